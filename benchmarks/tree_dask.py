"""The tree part on a local Dask cluster against one process, on the same cores.

    python benchmarks/tree_dask.py --project DIR [--part part2] [--rows 1000000]
        [--workers 2] [--repeats 3] [--rounds 200] [--json FILE]

Writes a generated regression table (--rows rows, 10 numeric features) to a Parquet
file, then times whole runs of the part on it, `python -m partN.train --data-path ...`,
one process against `--cluster local:N`, the two taking turns. Early stopping is off
(a fixed --rounds) so both grow the same number of trees. For each run it samples the
resident memory of every process of the run's tree (the Dask workers included) and
keeps each one's peak: the figure to compare is the largest peak of any one process
(the run's own, which reads the table, or a worker's), against the single process's.
Prints medians of wall time and of that peak, their ratios, and the load; W&B is off.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import psutil

from harness import part_folder, recorded

FEATURES = [f"f{index}" for index in range(10)]


def generated_table(rows: int, path: Path) -> Path:
    """A regression target that needs deep-ish trees: a sum of interactions and noise."""
    rng = np.random.default_rng(0)
    table = pd.DataFrame(rng.normal(size=(rows, len(FEATURES))).astype(np.float32), columns=FEATURES)
    table["target"] = (
        np.sin(table.f0 * 2) + table.f1 * table.f2 - np.abs(table.f3) + 0.1 * rng.normal(size=rows)
    ).astype(np.float32)
    table.to_parquet(path)
    return path


def timed_run(command: list[str], cwd: Path) -> tuple[float, float, float, int]:
    """(wall seconds, peak RSS in MiB of the run's own process and of the largest of the
    others (its Dask workers; 0 without), processes seen) of one run."""
    peaks: dict[int, int] = {}
    started = time.perf_counter()
    process = subprocess.Popen(command, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    done = threading.Event()

    def sample() -> None:
        root = psutil.Process(process.pid)
        while not done.is_set():
            try:
                members = [root, *root.children(recursive=True)]
            except psutil.NoSuchProcess:
                return
            for member in members:
                with contextlib.suppress(psutil.NoSuchProcess):
                    peaks[member.pid] = max(peaks.get(member.pid, 0), member.memory_info().rss)
            done.wait(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    _, stderr = process.communicate()
    seconds = time.perf_counter() - started
    done.set()
    sampler.join()
    if process.returncode != 0:
        sys.exit(f"{' '.join(command)} exited {process.returncode}:\n{stderr[-2000:]}")
    others = [peak for pid, peak in peaks.items() if pid != process.pid]
    return seconds, peaks.get(process.pid, 0) / 2**20, max(others, default=0) / 2**20, len(peaks)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--project", type=Path, required=True, help="a rendered project")
    parser.add_argument("--part", help="its tree part's folder (default: from .copier-answers.yml)")
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--json", type=Path, help="write the figures to this file")
    args = parser.parse_args()
    folder = args.part or part_folder(args.project, "sl_tree", parser)
    with tempfile.TemporaryDirectory() as scratch, recorded(args.json) as figures:
        table = generated_table(args.rows, Path(scratch) / "table.parquet")
        base = [sys.executable, "-m", f"{folder}.train", "--config", "baseline", "--data-path", str(table)]
        base += ["--label-column", "target", "--feature-columns", *FEATURES, "--wandb-mode", "disabled"]
        base += ["--num-boost-round", str(args.rounds), "--early-stopping-rounds", str(args.rounds)]
        base += ["--output.base-dir", str(Path(scratch) / "runs")]
        contenders = {
            "one process": base,
            f"local:{args.workers}": [*base, "--cluster", f"local:{args.workers}"],
        }
        results: dict[str, list[tuple[float, float, float, int]]] = {name: [] for name in contenders}
        for repeat in range(args.repeats):
            for name, command in contenders.items():
                results[name].append(timed_run(command, args.project))
                wall, own, worker, processes = results[name][-1]
                print(
                    f"repeat {repeat + 1} {name}: {wall:.1f} s, peak memory {own:.0f} MiB in the run's "
                    f"process, {worker:.0f} MiB in its largest worker ({processes} processes)"
                )
        for name, runs in results.items():
            figures[name] = {
                "wall_s": statistics.median(run[0] for run in runs),
                "peak_rss_mib": statistics.median(max(run[1], run[2]) for run in runs),
                "run_process_peak_mib": statistics.median(run[1] for run in runs),
                "worker_peak_mib": statistics.median(run[2] for run in runs),
                "runs": runs,
            }
        one, dask = figures["one process"], figures[f"local:{args.workers}"]
        figures["wall_ratio"] = dask["wall_s"] / one["wall_s"]
        figures["peak_ratio"] = dask["peak_rss_mib"] / one["peak_rss_mib"]
        print(
            f"{args.rows:,} rows, {args.rounds} rounds, {args.repeats} repeats, medians: one process "
            f"{one['wall_s']:.1f} s and {one['peak_rss_mib']:.0f} MiB; "
            f"local:{args.workers} {dask['wall_s']:.1f} s and {dask['peak_rss_mib']:.0f} MiB in its largest "
            f"process: wall x{figures['wall_ratio']:.2f}, "
            f"peak memory per process x{figures['peak_ratio']:.2f} ({os.cpu_count()} CPUs)"
        )


if __name__ == "__main__":
    main()
