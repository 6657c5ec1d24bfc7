#!/usr/bin/env bash
# OPS-2: start a long run detached from the terminal, with unbuffered output.
#   scripts/detach.sh part1.train --config baseline
# The run survives logout; its output goes to output/<module>_<config>_<stamp>.txt.
set -euo pipefail
if [[ $# -lt 1 ]]; then
    echo "usage: scripts/detach.sh MODULE [ARGS...]   e.g. scripts/detach.sh part1.train --config baseline" >&2
    exit 2
fi
module=$1
shift
config=baseline
for ((i = 1; i <= $#; i++)); do
    if [[ ${!i} == --config ]]; then
        next=$((i + 1))
        config=${!next}
    fi
done
mkdir -p output
log="output/${module//./_}_${config}_$(date +%Y%m%d_%H%M%S).txt"
PYTHONUNBUFFERED=1 nohup "${PYTHON:-python}" -m "$module" "$@" >"$log" 2>&1 &
echo "started pid $! (log: $log)"
echo "  follow it:            tail -f $log"
echo "  stop after the epoch: touch STOP"
echo "  watch over it:        python -m src.ops.babysit output/<run dir> --every 600 --restart"
