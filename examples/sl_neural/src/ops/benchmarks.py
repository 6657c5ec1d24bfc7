"""What every part's benchmark.py shares: contenders timed in alternation, their medians,
the machine's load before and after (figures taken on a busy machine say so), and the
figures written as JSON for `nox -s bench` to collect."""

from __future__ import annotations

import json
import os
import statistics
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from src.runs.atomic import write_text_atomic


def alternate(contenders: dict[str, Callable[[], list[float]]], repeats: int) -> dict[str, list[float]]:
    """Each contender's timings (seconds) over `repeats` rounds, the contenders taking turns
    within each round so that a change in the machine's load falls on all of them alike."""
    seconds: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(repeats):
        for name, measure in contenders.items():
            seconds[name] += measure()
    return seconds


def medians(seconds: dict[str, list[float]]) -> dict[str, float]:
    return {name: statistics.median(times) for name, times in seconds.items()}


@contextmanager
def recorded(json_path: Path | None) -> Iterator[dict[str, Any]]:
    """A dict for the benchmark's figures; on leaving, the load averages before and after
    are added and printed, and the whole written to `json_path` if one is given."""
    figures: dict[str, Any] = {"load_before": os.getloadavg()}
    yield figures
    figures["load_after"] = os.getloadavg()
    before, after = figures["load_before"][0], figures["load_after"][0]
    print(f"load average {before:.2f} before, {after:.2f} after ({os.cpu_count()} CPUs)")
    if json_path is not None:
        write_text_atomic(json_path, json.dumps(figures, indent=2) + "\n")
        print(f"figures written to {json_path}")
