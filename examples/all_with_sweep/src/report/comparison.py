"""A report comparing runs of one part side by side: the config fields that differ, the
final metrics and the learning curves overlaid (`python -m src.report RUN_DIR RUN_DIR...`,
and a sweep's best trials). Runs that differ only in their seed are taken together: mean
and spread (src/report/seeds.py)."""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path

from src.report import figures, seeds
from src.report.run_files import RunFiles
from src.report.run_report import REPORT_FILE, cell, flat, table
from src.runs.atomic import write_text_atomic
from src.runs.metrics_jsonl import higher_is_better

MISSING = "—"


def default_output(runs: list[RunFiles]) -> Path:
    """comparison-YYYYMMDD-HHMMSS beside the first run (dashes: no run directory's name)."""
    return runs[0].dir.parent / f"comparison-{datetime.now():%Y%m%d-%H%M%S}"


class MixedParts(ValueError):
    """The runs are of different parts: their metrics and curves do not compare."""


def compare_runs(runs: list[RunFiles], output: Path, title: str = "") -> Path:
    """{output}/report.md and its figure; returns the report's path. MixedParts for runs
    of several parts."""
    part = _one_part(runs)
    title = title or f"{len(runs)} runs of {part or 'this project'} compared"
    groups = seeds.seed_groups(runs)
    if len(groups) < len(runs):  # some differ only in their seed
        return _compare_seed_groups(groups, output, title)
    names = _names(runs)
    axes = sorted({run.curve_axis for run in runs})
    sections = [
        f"# {title}",
        table(
            ["run", "status", "report"],
            [
                [
                    name,
                    run.record.get("status", "unknown"),
                    f"[{REPORT_FILE}]({_link(run.dir / REPORT_FILE, output)})",
                ]
                for name, run in zip(names, runs, strict=True)
            ],
        ),
        "## Config differences\n\n" + _config_differences(runs, names),
        "## Final metrics\n\n" + _final_metrics(runs, names),
    ]
    curves = {name: run.learning_curves() for name, run in zip(names, runs, strict=True)}
    if any(curves.values()):
        monitored = set().union(*(run.monitored() for run in runs))
        resumed = {name: run.resume_points() for name, run in zip(names, runs, strict=True)}
        path = figures.learning_curves(
            curves, " / ".join(axes), monitored, output / "learning_curves.png", resumed, title=title
        )
        sections.append(f"## Learning curves\n\n![Learning curves]({path.name})")
    return write_text_atomic(output / REPORT_FILE, "\n\n".join(sections) + "\n")


def _one_part(runs: list[RunFiles]) -> str:
    """The part every run is of ("" where none says); MixedParts otherwise."""
    parts: dict[str, list[str]] = {}
    for run in runs:
        parts.setdefault(run.part, []).append(run.name)
    known = [part for part in parts if part]
    if len(known) > 1:
        listed = "; ".join(f"{part}: {', '.join(parts[part])}" for part in known)
        raise MixedParts(f"these runs are of different parts ({listed}); compare one part's runs at a time")
    return known[0] if known else ""


def _compare_seed_groups(groups: list[list[RunFiles]], output: Path, title: str) -> Path:
    """Groups of runs that differ only in their seed: each group's mean and spread."""
    names = [seeds.group_name(group) for group in groups]
    if len(set(names)) < len(names):
        names = [f"{index}: {name}" for index, name in enumerate(names, start=1)]
    runs = [run for group in groups for run in group]
    group_of = {id(run): name for name, group in zip(names, groups, strict=True) for run in group}
    sections = [
        f"# {title}",
        "Runs that differ only in their seed are taken together: the mean of each group, "
        "± one standard deviation.",
        table(
            ["run", "group", "seed", "status", "report"],
            [
                [
                    run.name,
                    group_of[id(run)],
                    cell(run.config.get("seed", MISSING)),
                    run.record.get("status", "unknown"),
                    f"[{REPORT_FILE}]({_link(run.dir / REPORT_FILE, output)})",
                ]
                for run in runs
            ],
        ),
    ]
    if len(groups) > 1:
        differences = _config_differences([group[0] for group in groups], names, skip=("seed",))
        sections.append(f"## Config differences\n\n{differences}")
    sections.append("## Final metrics (mean ± std over seeds)\n\n" + seeds.summary_table(groups, names))
    if path := seeds.band_figure(groups, names, output / "learning_curves.png", title):
        sections.append(f"## Learning curves (mean ± std over seeds)\n\n![Learning curves]({path.name})")
    return write_text_atomic(output / REPORT_FILE, "\n\n".join(sections) + "\n")


def _config_differences(runs: list[RunFiles], names: list[str], skip: tuple[str, ...] = ()) -> str:
    configs = [flat(run.config) for run in runs]
    fields = list(dict.fromkeys(field for config in configs for field in config if field not in skip))
    rows = [
        [field, *(cell(config.get(field, MISSING)) for config in configs)]
        for field in fields
        if len({repr(config.get(field, MISSING)) for config in configs}) > 1
    ]
    return table(["field", *names], rows) if rows else "The configs are the same."


def _final_metrics(runs: list[RunFiles], names: list[str]) -> str:
    """Each run's final values; the best of a validation or test metric in bold."""
    finals = [{key: row["final"] for key, row in run.final_metrics().items()} for run in runs]
    rows = []
    for key in dict.fromkeys(key for final in finals for key in final):
        values = [final.get(key) for final in finals]
        numbers = [value for value in values if isinstance(value, int | float)]
        best = None
        if key.startswith(("val_", "test_", "best_")) and len(numbers) > 1:
            best = max(numbers) if higher_is_better(key) else min(numbers)
        rows.append(
            [
                key,
                *(
                    MISSING if value is None else f"**{cell(value)}**" if value == best else cell(value)
                    for value in values
                ),
            ]
        )
    return table(["metric", *names], rows) if rows else "No metrics were logged."


def _names(runs: list[RunFiles]) -> list[str]:
    """Each run's folder name, with its parent's where two share one."""
    names = [run.name for run in runs]
    if len(set(names)) == len(names):
        return names
    return [f"{run.dir.parent.name}/{run.name}" for run in runs]


def _link(path: Path, start: Path) -> str:
    return Path(os.path.relpath(path.resolve(), start.resolve())).as_posix()
