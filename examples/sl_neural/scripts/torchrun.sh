#!/usr/bin/env bash
# DDP-1: one training run on several processes through torchrun: every GPU of this
# machine, or of several machines. The processes share one run directory, and the
# run takes its devices and num_nodes from torchrun.
#   scripts/torchrun.sh part1.train --config baseline               # every GPU here
#   NPROC=2 scripts/torchrun.sh part1.train --config smoke          # 2 processes (CPU: gloo)
#   NNODES=2 MASTER=host0:29500 scripts/torchrun.sh part1.train ... # run it on each machine
set -euo pipefail
if [[ $# -lt 1 ]]; then
    echo "usage: [NPROC=N] [NNODES=N MASTER=HOST:PORT] scripts/torchrun.sh MODULE [ARGS...]" >&2
    exit 2
fi
module=$1
shift
gpus=$(nvidia-smi --list-gpus 2>/dev/null | wc -l || true)
nproc=${NPROC:-$((gpus > 0 ? gpus : 1))}
nnodes=${NNODES:-1}
python=${PYTHON:-python}
# One CPU thread per process unless you set more, as torchrun would choose, but without
# the banner it prints on every launch when it chooses.
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
if ((nnodes == 1)); then
    exec "$python" -m torch.distributed.run --standalone --nproc-per-node "$nproc" -m "$module" "$@"
fi
if [[ -z ${MASTER:-} ]]; then
    echo "NNODES=$nnodes needs MASTER=HOST:PORT, an address of one of the machines every machine can reach" >&2
    exit 2
fi
# The rendezvous id tells this launch from any other on the same MASTER.
exec "$python" -m torch.distributed.run --nnodes "$nnodes" --nproc-per-node "$nproc" \
    --rdzv-backend c10d --rdzv-endpoint "$MASTER" --rdzv-id "${RDZV_ID:-${USER:-run}-$module}" \
    -m "$module" "$@"
