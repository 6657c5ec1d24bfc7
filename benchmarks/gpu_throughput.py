"""Training throughput of a rendered project on this machine, from its own train commands:
the neural part's rows per second in bf16-mixed and in 32-true (TF32 matrix products on a
GPU), on a generated table and a network big enough to keep a GPU busy, and the RL part's
frames per second on the GPU and on the CPU.

    python benchmarks/gpu_throughput.py --project DIR [--rows 1000000] [--width 8192]
        [--layers 3] [--batch-size 8192] [--epochs 3] [--rl-epochs 5] [--json FILE]

Each figure is a whole `python -m partN.train` process (W&B off), read from its
metrics.jsonl: an epoch's training time is `timing/epoch_seconds` less its
`timing/validation_seconds`, and the first epoch (start-up, CUDA kernels chosen) is left
out; the figure is the median of the others. bf16 runs where the GPU supports it and is
skipped elsewhere. `nox -s gpu_check` carries this file to a GPU machine; on a CPU, small
sizes (`--rows 20000 --width 256 --batch-size 1024 --epochs 2 --rl-epochs 2`) check that it
runs.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness import part_folder

PARSER = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
PARSER.add_argument("--project", type=Path, required=True, help="a project rendered with every part kind")
PARSER.add_argument("--rows", type=int, default=1_000_000, help="rows of the generated table")
PARSER.add_argument("--features", type=int, default=64, help="feature columns of the generated table")
PARSER.add_argument("--width", type=int, default=8192, help="width of each hidden layer")
PARSER.add_argument("--layers", type=int, default=3, help="hidden layers")
PARSER.add_argument("--batch-size", type=int, default=8192)
PARSER.add_argument(
    "--epochs", type=int, default=3, help="epochs of each neural run; the first is not counted"
)
PARSER.add_argument("--rl-epochs", type=int, default=5, help="epochs of the RL run; the first is not counted")
PARSER.add_argument("--json", type=Path, help="write the figures to this file")


def epochs_of(run_dir: Path) -> list[dict]:
    """The end-of-epoch events of a run's metrics.jsonl, in order, with the frames the RL
    part had collected by then."""
    ends, frames = [], 0.0
    for line in (run_dir / "metrics.jsonl").read_text().splitlines():
        event = json.loads(line)
        frames = event.get("frames", frames)
        if "timing/epoch_seconds" in event:
            ends.append({**event, "frames_so_far": frames})
    return ends


def gpu_utilization(run_dir: Path) -> float | None:
    """The median of the GPU utilization readings (NVML, percent) the run logged after its
    first epoch: whether the size kept the GPU busy. None without a GPU."""
    events = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    key = "system/gpu_utilization_percent"
    readings = [event[key] for event in events if key in event and event.get("epoch", 0) >= 1]
    return statistics.median(readings) if readings else None


def training_seconds(end: dict) -> float:
    return end["timing/epoch_seconds"] - end.get("timing/validation_seconds", 0.0)


def train(project: Path, module: str, arguments: list[str], output: Path) -> Path:
    """Run `python -m MODULE ARGUMENTS` in the project; its run directory."""
    command = [sys.executable, "-m", module, *arguments, "--wandb-mode", "disabled"]
    command += ["--output.base-dir", str(output)]
    started = time.monotonic()
    result = subprocess.run(command, cwd=project, capture_output=True, text=True)
    print(f"  {' '.join(command[2:])}: exit {result.returncode}, {time.monotonic() - started:.0f} s wall")
    if result.returncode != 0:
        sys.exit(f"{module} failed:\n{result.stdout[-2000:]}\n{result.stderr[-4000:]}")
    (run_dir,) = [path for path in output.iterdir() if (path / "metrics.jsonl").is_file()]
    return run_dir


def bf16_supported() -> bool:
    import torch

    return torch.cuda.is_available() and torch.cuda.is_bf16_supported()


def neural_rows_per_second(args: argparse.Namespace, work: Path) -> dict[str, dict | str]:
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(0)
    features = rng.standard_normal((args.rows, args.features), dtype=np.float32)
    table = pd.DataFrame(features, columns=[f"x{i}" for i in range(args.features)])
    table["label"] = (features[:, :4].sum(axis=1) > 0).astype(np.int64) + 2 * (features[:, 4] > 0)
    table.to_parquet(work / "table.parquet")
    part = part_folder(args.project, "sl_neural", PARSER)
    network = ["--hidden-sizes", *[str(args.width)] * args.layers, "--batch-size", str(args.batch_size)]
    common = ["--config", "baseline", "--data-path", str(work / "table.parquet"), "--label-column", "label"]
    common += [*network, "--num-epochs", str(args.epochs), "--patience", str(args.epochs)]
    figures: dict[str, dict | str] = {}
    for precision in ("bf16-mixed", "32-true"):
        if precision == "bf16-mixed" and not bf16_supported():
            figures[precision] = "skipped: no GPU that supports bf16"
            print(f"neural, {precision}: {figures[precision]}")
            continue
        run_dir = train(args.project, f"{part}.train", [*common, "--precision", precision], work / precision)
        rows = json.loads((run_dir / "metrics.jsonl").read_text().splitlines()[0])["num_train_samples"]
        seconds = statistics.median(training_seconds(end) for end in epochs_of(run_dir)[1:])
        figures[precision] = {
            "rows_per_second": rows / seconds,
            "gpu_utilization_percent": gpu_utilization(run_dir),
        }
        busy = figures[precision]["gpu_utilization_percent"]
        busy_text = "no GPU readings" if busy is None else f"GPU busy {busy:.0f}% (NVML, median)"
        print(f"neural, {precision}: {rows / seconds:,.0f} rows/s, {busy_text}")
    if all(isinstance(run, dict) for run in figures.values()):
        ratio = figures["bf16-mixed"]["rows_per_second"] / figures["32-true"]["rows_per_second"]
        print(f"neural, bf16-mixed / 32-true: {ratio:.2f}x")
    return figures


def rl_frames_per_second(args: argparse.Namespace, work: Path) -> dict[str, float]:
    """The RL part's training frames/s on the GPU (where there is one) and on the CPU: a small
    policy may train faster without the GPU, whose every step is a few tiny kernels."""
    import torch

    part = part_folder(args.project, "rl", PARSER)
    arguments = ["--config", "baseline", "--num-epochs", str(args.rl_epochs), "--target-reward", "1e9"]
    figures = {}
    for accelerator in ("gpu", "cpu") if torch.cuda.is_available() else ("cpu",):
        on = [*arguments, "--accelerator", accelerator]
        ends = epochs_of(train(args.project, f"{part}.train", on, work / accelerator))
        per_epoch = [
            (end["frames_so_far"] - before["frames_so_far"]) / training_seconds(end)
            for before, end in itertools.pairwise(ends)
        ]
        figures[accelerator] = statistics.median(per_epoch)
        print(f"RL, {accelerator}: {figures[accelerator]:,.0f} frames/s (training epochs, no evaluation)")
    if len(figures) == 2:
        print(f"RL, gpu / cpu: {figures['gpu'] / figures['cpu']:.2f}x")
    return figures


def main() -> None:
    args = PARSER.parse_args()
    args.project = args.project.resolve()
    figures: dict[str, object] = {"load_before": os.getloadavg()}
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        network = f"{args.layers} hidden layers of {args.width}, batch {args.batch_size}"
        print(f"neural part: {args.rows} rows x {args.features} features, {network}")
        figures["neural_rows_per_second"] = neural_rows_per_second(args, work)
        print("RL part: baseline config")
        figures["rl_frames_per_second"] = rl_frames_per_second(args, work)
    figures["load_after"] = os.getloadavg()
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        figures["arguments"] = {name: str(value) for name, value in vars(args).items()}
        args.json.write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
