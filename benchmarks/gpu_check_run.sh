#!/usr/bin/env bash
# The GPU check's one command, run on the GPU machine from the folder `nox -s gpu_check`
# prepared (it copies this file there as run.sh):
#   bash build/gpu_check/run.sh [FOLDER [GPU_THROUGHPUT_OPTION ...]]
# Installs the carried wheels with no network, runs the rendered project's gpu-marked tests
# (and, where XGBoost's CUDA build is installed, tree_gpu_resume.py), then times the neural
# part in bf16-mixed and 32-true and the RL part's frames per second (gpu_throughput.py,
# which takes the options after FOLDER: small sizes on a CPU), then runs the rest of the
# project's tests (a worker a core). The limits add up to 590 s. FOLDER
# (default: out/ here) receives the logs and the figures. PYTHON names the interpreter
# (default: python3, the one that holds torch there).
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="$(mkdir -p "${1:-$here/out}" && cd "${1:-$here/out}" && pwd)"
shift $(($# > 0))
python="${PYTHON:-python3}"
site="$(mktemp -d)"  # the carried packages, on top of the machine's own

"$python" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$site" "$here"/wheels/*.whl ||
    { echo "gpu check: the carried wheels did not install"; exit 1; }
export PYTHONPATH="$site" WANDB_MODE=disabled PYTHONUNBUFFERED=1
"$python" - <<'EOF' 2>&1 | tee "$out/versions.txt"
import importlib.metadata as metadata, platform, torch
print(f"python {platform.python_version()}, torch {torch.__version__}, CUDA {torch.version.cuda}")
print("GPU:", torch.cuda.get_device_name() if torch.cuda.is_available() else "none visible")
for name in ("lightning", "torchrl", "tensordict", "wandb", "tyro", "pandera", "optuna", "dask"):
    print(f"{name} {metadata.version(name)}")
import xgboost  # xgboost-cpu as carried, or XGBoost's CUDA build installed there
print(f"xgboost {xgboost.__version__}, {'CUDA' if xgboost.build_info()['USE_CUDA'] else 'CPU-only'} build")
EOF

cd "$here/project" || exit 1
started=$SECONDS
timeout 90 "$python" -m pytest -m gpu -v -rs -p no:cacheprovider 2>&1 | tee "$out/gpu_tests.log"
tests=${PIPESTATUS[0]}
echo "gpu tests: exit $tests, $((SECONDS - started)) s"

# Continuing a tree run that a GPU trained on a table with a text column crashed there once
# (Booster.update, a segmentation fault): which way of continuing does, each in a process of
# its own. Only where XGBoost's CUDA wheel replaced xgboost-cpu's among the carried wheels (one
# installed on the machine is hidden by the carried xgboost-cpu).
resume=0
if "$python" -c "import sys, xgboost; sys.exit(not xgboost.build_info()['USE_CUDA'])"; then
    timeout 80 "$python" "$here/tree_gpu_resume.py" --project . --task binary \
        --json "$out/tree_resume.json" 2>&1 | tee "$out/tree_resume.log"
    resume=${PIPESTATUS[0]}
else
    echo "tree resume on the GPU: skipped (XGBoost's CPU-only build)"
fi

started=$SECONDS
timeout 300 "$python" "$here/gpu_throughput.py" --project . --json "$out/throughput.json" "$@" 2>&1 | tee "$out/throughput.log"
throughput=${PIPESTATUS[0]}
echo "throughput: exit $throughput, $((SECONDS - started)) s"

# The rest of the project's suite with a GPU in sight: what a GPU changes (auto picking cuda,
# bf16, TF32) reaches tests that never ask for one. -v names each test as it ends, so a suite
# cut off at its limit still says which failed.
started=$SECONDS
timeout 120 "$python" -m pytest -m "not gpu" -v -rf -n "$(nproc)" -p no:cacheprovider 2>&1 | tee "$out/suite.log" | grep -E "FAILED|ERROR|passed|failed|crashed"
suite=${PIPESTATUS[0]}
if ((suite == 124)); then  # cut off at its limit: what ran is in suite.log, test by test
    failed=$(grep -c " FAILED " "$out/suite.log")
    echo "whole suite: cut off after $((SECONDS - started)) s; by then $(grep -c " PASSED " "$out/suite.log") passed, $failed failed"
    suite=$failed
else
    echo "whole suite: exit $suite, $((SECONDS - started)) s"
fi
exit $((tests != 0 || resume != 0 || throughput != 0 || suite != 0))
