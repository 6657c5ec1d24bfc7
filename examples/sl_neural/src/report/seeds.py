"""Runs that differ only in their seed, taken together: their curves as a mean with a band
of one standard deviation, their final metrics as mean ± std (`python -m src.report`)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from pathlib import Path

from src.report import figures
from src.report.run_files import RunFiles, Series
from src.report.run_report import cell, flat, table

# Config fields that do not change what a run learns: where it writes and logs, and how
# it is stopped by hand. Runs whose other fields are equal but for the seed are one group.
NOT_SETTINGS = ("seed", "output.", "stop_file", "loggers", "wandb_", "used.")
MISSING = "—"


def seed_groups(runs: Sequence[RunFiles]) -> list[list[RunFiles]]:
    """The runs grouped by their settings, seed aside; groups in the order of their first run."""
    groups: dict[str, list[RunFiles]] = {}
    for run in runs:
        groups.setdefault(repr(settings(run)), []).append(run)
    return list(groups.values())


def settings(run: RunFiles) -> dict[str, object]:
    return {
        field: value
        for field, value in sorted(flat(run.config).items())
        if not field.startswith(NOT_SETTINGS)
    }


def group_name(group: Sequence[RunFiles]) -> str:
    """`baseline, 3 seeds`: the config's name and the number of runs."""
    name = str(group[0].config.get("name", group[0].name))
    return f"{name}, {len(group)} seeds" if len(group) > 1 else group[0].name


def mean_and_std(series: Sequence[Series]) -> tuple[Series, Series]:
    """The mean of the series at each x, and their standard deviation where two or more
    runs reached it (runs that stopped early count up to where they stopped)."""
    xs = sorted({x for values in series for x in values})
    mean, std = {}, {}
    for x in xs:
        values = [values[x] for values in series if x in values]
        mean[x] = statistics.fmean(values)
        if len(values) > 1:
            std[x] = statistics.stdev(values)
    return mean, std


def summary_table(groups: Sequence[Sequence[RunFiles]], names: Sequence[str]) -> str:
    """A row per final metric, a column per group: mean ± standard deviation (n runs)."""
    finals = [[{k: v["final"] for k, v in run.final_metrics().items()} for run in group] for group in groups]
    keys = list(dict.fromkeys(key for group in finals for final in group for key in final))
    rows = [[key, *(_mean_std([final.get(key) for final in group]) for group in finals)] for key in keys]
    return table(["metric", *names], rows) if rows else "No metrics were logged."


def _mean_std(values: list[object]) -> str:
    numbers = [float(value) for value in values if isinstance(value, int | float)]
    if not numbers:
        return MISSING
    if len(numbers) == 1:
        return cell(numbers[0])
    return f"{cell(statistics.fmean(numbers))} ± {cell(statistics.stdev(numbers))} (n={len(numbers)})"


def band_figure(
    groups: Sequence[Sequence[RunFiles]], names: Sequence[str], path: Path, title: str
) -> Path | None:
    """Each group's learning curves as mean and band; None when no run logged any."""
    curves: dict[str, dict[str, dict[str, tuple[Series, Series]]]] = {}
    for name, group in zip(names, groups, strict=True):
        runs: dict[tuple[str, str], list[Series]] = {}  # (metric, key) -> each run's series
        for run in group:
            for metric, panel in run.learning_curves().items():
                for key, series in panel.items():
                    runs.setdefault((metric, key), []).append(series)
        curves[name] = {}
        for (metric, key), series in runs.items():
            curves[name].setdefault(metric, {})[key] = mean_and_std(series)
    if not any(curves.values()):
        return None
    axes = " / ".join(sorted({run.curve_axis for group in groups for run in group}))
    return figures.seed_bands(curves, axes, path, title)
