#!/usr/bin/env bash
# OPS-2: start a long run detached from the terminal, with unbuffered output.
#   scripts/detach.sh part1.train --config baseline
# The run survives logout; its output goes to output/<module>_<config>_<stamp>.txt.
set -euo pipefail
usage="usage: scripts/detach.sh MODULE [ARGS...]   e.g. scripts/detach.sh part1.train --config baseline"
if [[ $# -lt 1 ]]; then
    echo "$usage" >&2
    exit 2
fi
module=$1
shift
config=baseline
resumed=""
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
    case ${args[i]} in
        --config)
            if ((i + 1 >= ${#args[@]})); then
                echo "error: --config needs a config name after it; $usage" >&2
                exit 2
            fi
            config=${args[i + 1]}
            ;;
        --config=*) config=${args[i]#--config=} ;;
        --resume | --resume=*) resumed=resume ;;
    esac
done
# The log's name keeps only characters safe in a file name: a config name is free text to
# the shell (a '/' in it would name a folder that does not exist). A resume runs its run's
# own config, whatever the default.
safe_config=${resumed:-${config//[^A-Za-z0-9_.-]/_}}
base="output/${module//[^A-Za-z0-9_]/_}_${safe_config}_$(date +%Y%m%d_%H%M%S)"
log="$base.txt"
attempt=1
# Created only where no file has the name: a second run started in the same second gets _2.
until { mkdir -p output && (set -o noclobber && : >"$log"); } 2>/dev/null; do
    if [[ ! -e $log ]]; then
        echo "error: cannot write the log $log in $(pwd); start it from a folder you can write to" >&2
        exit 2
    fi
    log="${base}_$((++attempt)).txt"
done
PYTHONUNBUFFERED=1 nohup "${PYTHON:-python}" -m "$module" "$@" >"$log" 2>&1 &
pid=$!
# A run that cannot start (an unknown module, a mistyped flag or value) ends before it names
# its run directory, once its libraries have loaded: say so here rather than "started" for a
# process that is already gone. One queued behind the GPU lock says so first.
for ((waited = 0; waited < 3000; waited++)); do
    if ! kill -0 "$pid" 2>/dev/null || grep -qE "^((run|sweep) directory: |GPU lock .* waiting)" "$log"; then
        break
    fi
    sleep 0.1
done
if ! kill -0 "$pid" 2>/dev/null; then
    status=0
    wait "$pid" || status=$?
    if ((status != 0)); then
        echo "error: $module ended at once with exit status $status; its log $log ends:" >&2
        tail -n 20 "$log" >&2
        exit "$status"
    fi
fi
# The run's own folder, once it has said it (a run queued behind the GPU lock has not yet).
run_dir=$(sed -n 's/^run directory: \([^ ]*\).*/\1/p' "$log" | head -n 1)
run_dir=${run_dir:-output/<part>/<run dir>}
echo "started pid $pid (log: $log)"
echo "  follow it:            tail -f $log"
echo "  stop after the epoch: touch $run_dir/STOP"
echo "  watch over it:        python -m src.ops.babysit $run_dir --every 600 --restart"
