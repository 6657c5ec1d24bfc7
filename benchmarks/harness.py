"""What the part benchmarks (sl_neural_epochs.py, sl_tree_rounds.py, rl_frames.py) share:
finding the part in a rendered project and importing it, contenders timed in
alternation, their medians, the machine's load before and after (figures taken on a
busy machine say so), and the figures written as JSON for `nox -s bench` to collect.

Each benchmark runs with the project's own Python (its venv has the libraries) and
takes the project's path: `python benchmarks/rl_frames.py --project DIR [--part part3]`.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import re
import statistics
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

# The part kinds in the order the template numbers their folders (copier.yml).
KINDS = ("sl_neural", "sl_tree", "rl")


def parse_and_import(
    parser: argparse.ArgumentParser, kind: str, modules: tuple[str, ...] = ("config", "data", "model")
) -> tuple[argparse.Namespace, SimpleNamespace]:
    """The arguments, and the project's part of `kind` with the named modules as attributes
    (`part.config`, `part.data`, ...). Called before torch is imported: a part's package
    may set the process's thread counts first (the RL part does)."""
    parser.add_argument("--project", type=Path, required=True, help="a rendered project")
    parser.add_argument("--part", help=f"its {kind} part's folder (default: from .copier-answers.yml)")
    parser.add_argument("--json", type=Path, help="write the figures to this file")
    args = parser.parse_args()
    folder = args.part or part_folder(args.project, kind, parser)
    if not (args.project / folder / "train.py").is_file():
        parser.error(f"{args.project / folder} is not a part of a rendered project (it has no train.py)")
    sys.path.insert(0, str(args.project.resolve()))
    part = SimpleNamespace(
        name=folder, **{name: importlib.import_module(f"{folder}.{name}") for name in modules}
    )
    if getattr(args, "config", None) not in part.config.CONFIGS:
        parser.error(f"--config {args.config}: {folder} has {', '.join(part.config.CONFIGS)}")
    return args, part


def part_folder(project: Path, kind: str, parser: argparse.ArgumentParser) -> str:
    """The folder copier gave the part of `kind`: partN, N its place among the chosen kinds."""
    answers = project / ".copier-answers.yml"
    if not answers.is_file():
        parser.error(f"{project} has no .copier-answers.yml: give --part")
    # The answers are YAML, but this is all they need, and the project's venv may lack a YAML reader.
    listed = re.search(r"^parts:\n((?:- .+\n)+)", answers.read_text(), re.M)
    chosen = {line.removeprefix("- ").strip() for line in listed[1].splitlines()} if listed else set()
    if kind not in chosen:
        parser.error(f"{project} has no {kind} part (its parts: {', '.join(sorted(chosen)) or 'none'})")
    return f"part{[k for k in KINDS if k in chosen].index(kind) + 1}"


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
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(figures, indent=2) + "\n")
        print(f"figures written to {json_path}")
