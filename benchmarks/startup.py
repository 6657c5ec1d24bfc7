"""Start-up and smoke-run walls of a rendered project's parts, whole processes.

    python benchmarks/startup.py --project DIR --python PY [--parts part1 part2 part3]
        [--repeats 5] [--smoke-repeats 3] [--json startup.json]

For each part it times `python -m PART.train --help` (the goal: under 1.5 s) and
`python -m PART.train --config smoke` (W&B off, a run directory of its own each time),
and from a smoke run's start to its first trained step (the first metrics line of its
metrics.jsonl: for RL, the first collection and its update), the parts taking turns,
and prints the medians beside two floors measured in the same turns: `python -c pass`
and `python -c "import lightning"`. The load average before and
after goes with the figures, as in every part's benchmark. `nox -s bench` runs it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def wall(command: list[str], cwd: Path) -> float:
    started = time.perf_counter()
    result = subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - started
    if result.returncode != 0:
        sys.exit(f"error: {' '.join(command)} exited {result.returncode}:\n{result.stderr[-2000:]}")
    return seconds


def to_first_step(output: Path, started: float) -> float:
    """Seconds from `started` (time.time()) to the run's first metrics line: its first trained step."""
    (metrics,) = output.glob("*/metrics.jsonl")
    lines = (json.loads(line) for line in metrics.read_text().splitlines() if line)
    return next(line["time"] for line in lines if line.get("event") == "metrics") - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--project", type=Path, required=True, help="a rendered project")
    parser.add_argument("--python", required=True, help="the Python of the project's venv")
    parser.add_argument("--parts", nargs="+", default=["part1", "part2", "part3"])
    parser.add_argument("--repeats", type=int, default=5, help="--help timings of each, in turn")
    parser.add_argument("--smoke-repeats", type=int, default=3, help="smoke runs of each part, in turn")
    parser.add_argument("--json", type=Path, help="write the figures to this file")
    args = parser.parse_args()
    parts = [part for part in args.parts if (args.project / part / "train.py").is_file()]
    if not parts:
        sys.exit(f"error: --project {args.project}: none of {', '.join(args.parts)} has a train.py")

    load_before = os.getloadavg()
    commands = {
        "python -c pass": [args.python, "-c", "pass"],
        "import lightning": [args.python, "-c", "import lightning"],
        **{f"{part} --help": [args.python, "-m", f"{part}.train", "--help"] for part in parts},
    }
    seconds: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(args.repeats):
        for name, command in commands.items():
            seconds[name].append(wall(command, args.project))
    with tempfile.TemporaryDirectory() as scratch:
        for repeat in range(args.smoke_repeats):
            for part in parts:
                command = [args.python, "-m", f"{part}.train", "--config", "smoke", "--wandb-mode=disabled"]
                output = Path(scratch) / f"{part}-{repeat}"
                started = time.time()
                whole = wall([*command, "--output.base-dir", str(output)], args.project)
                seconds.setdefault(f"{part} smoke run", []).append(whole)
                seconds.setdefault(f"{part} to first step", []).append(to_first_step(output, started))
    load_after = os.getloadavg()

    median = {name: statistics.median(times) for name, times in seconds.items()}
    for name, value in median.items():
        print(f"{name:<20} median {value:6.2f} s  of {len(seconds[name])}")
    print(f"load average {load_before[0]:.2f} before, {load_after[0]:.2f} after ({os.cpu_count()} CPUs)")
    if args.json:
        figures = {"median_s": median, "seconds": seconds, "load": [load_before, load_after]}
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
        print(f"figures written to {args.json}")


if __name__ == "__main__":
    main()
