"""The report's figures, drawn on matplotlib Figure objects rather than pyplot: no display,
backend or global state involved, so they work the same on a headless server."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path

import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator

from src.runs.atomic import atomic_path
from src.runs.metrics_jsonl import higher_is_better


def save_figure(figure: Figure, path: Path) -> Path:
    with atomic_path(path) as temporary:
        figure.savefig(temporary, dpi=110, bbox_inches="tight")  # long tick labels stay on the canvas
    return path


def learning_curves(
    runs: Mapping[str, list[pd.DataFrame]],
    path: Path,
    title: str,
    monitored: set[str],
    resumed: Mapping[str, list[float]],
) -> Path:
    """A panel per metric (loss, acc, episode_reward...), train dashed and validation solid;
    `runs` (a name to one run's curves, or those of runs that differ only in their seed: their
    mean ± one standard deviation) overlaid, a colour each. Starred: the best point of a
    `monitored` key (the one checkpoints and early stopping go by); dotted: where a run was
    `resumed` (a name to those x)."""
    stacked = {name: pd.concat(curves).groupby(level=0) for name, curves in runs.items()}
    means = {name: group.mean() for name, group in stacked.items()}
    metrics = dict.fromkeys(_metric(key) for mean in means.values() for key in mean)
    several, seeds = len(runs) > 1, any(len(curves) > 1 for curves in runs.values())
    figure, panels = panel_grid(len(metrics), extra_height=0.3 * len(runs) if several else 0)
    axis = " / ".join(sorted({curves.index.name for group in runs.values() for curves in group}))
    for axes, metric in zip(panels, metrics, strict=True):
        for index, (name, mean) in enumerate(means.items()):
            for key in sorted((k for k in mean if _metric(k) == metric), key=lambda k: k.startswith("val_")):
                validation, series = key.startswith("val_"), mean[key].dropna()
                colour = f"C{index}" if several else "C1" if validation else "C0"
                _line(axes, series, key, color=colour, linestyle="-" if validation else "--")
                if key in monitored:
                    best = series.idxmax() if higher_is_better(key) else series.idxmin()
                    axes.plot(best, series[best], marker="*", markersize=11, color=colour, linestyle="")
                if len(runs[name]) > 1:
                    std = stacked[name][key].std()
                    axes.fill_between(
                        std.index, mean[key] - std, mean[key] + std, color=colour, alpha=0.2, lw=0
                    )
            for x in resumed.get(name, []):
                axes.axvline(x, color=f"C{index}" if several else "grey", linestyle=":", linewidth=1)
        axes.set(title=metric, xlabel=axis)
        _whole_numbers(axes)
    resume = [Line2D([], [], color="grey", linestyle=":", label="resumed")] if any(resumed.values()) else []
    if not several:  # one run: each panel's legend names its keys
        for axes in panels:
            axes.legend(handles=axes.get_legend_handles_labels()[0] + resume, fontsize="small")
    else:
        handles = [
            *(Line2D([], [], color=f"C{index}", label=name) for index, name in enumerate(runs)),
            Line2D([], [], color="grey", linestyle="--", label="train"),
            Line2D([], [], color="grey", label="validation"),
            Line2D([], [], color="grey", marker="*", markersize=9, linestyle="", label="best"),
            *([Patch(color="grey", alpha=0.2, label="± one standard deviation")] if seeds else []),
            *resume,
        ]
        figure.legend(handles=handles, loc="outside lower center", fontsize="small")
    figure.suptitle(title)
    return save_figure(figure, path)


def _metric(key: str) -> str:
    """What a key's panel shows: val_loss beside train_loss, episode_reward beside val_episode_reward."""
    return key.removeprefix("val_").removeprefix("train_")


def learning_rate(rates: pd.DataFrame, path: Path) -> Path:
    figure, (axes,) = panel_grid(1)
    for index, (key, series) in enumerate(rates.items()):
        # Steps: a rate holds until the next one is logged. Dashes: the groups' often coincide.
        _line(axes, series, key, linestyle=("-", "--", ":", "-.")[index % 4], drawstyle="steps-post")
    axes.set(title="Learning rate", xlabel="step")
    _whole_numbers(axes)
    _zero_or_log_scale(axes, rates)
    if axes.get_yscale() == "linear":
        axes.ticklabel_format(axis="y", style="sci", scilimits=(-3, 4), useOffset=False)
    axes.legend(fontsize="small")
    return save_figure(figure, path)


def timing(shares: pd.DataFrame, seconds: pd.Series, axis: str, path: Path) -> Path:
    """Where each epoch's time went (timing/*_pct columns, stacked to 100%), and its length."""
    figure, panels = panel_grid(2 if shares.size else 1, columns=2)
    shares, below = shares.dropna(how="all").fillna(0.0), 0.0
    for key, share in shares.items():
        panels[0].bar(shares.index, share, bottom=below, width=0.85, label=_short(key))
        below = below + share
    if shares.size:
        panels[0].set(
            title=f"Time per {axis}, by section", xlabel=axis, ylabel="% of the time", ylim=(0, 100)
        )
        panels[0].legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.0, 1.0))
    _line(panels[-1], seconds, f"timing/{axis}_seconds")
    panels[-1].set(title=f"Seconds per {axis}", xlabel=axis, ylabel="seconds")
    _zero_or_log_scale(panels[-1], seconds)
    for axes in panels:
        _whole_numbers(axes)
    return save_figure(figure, path)


def system(readings: pd.DataFrame, axis: str, last: float, path: Path) -> Path:
    """CPU, RAM and GPU readings (system/* columns) by epoch (or round) up to `last`:
    percentages on one panel, sizes on another."""
    units = {
        key: "%" if key.endswith("_percent") else "GB" if key.endswith("_gb") else key for key in readings
    }
    figure, panels = panel_grid(len(set(units.values())), columns=2)
    for axes, unit in zip(panels, dict.fromkeys(units.values()), strict=True):
        members = readings[[key for key in readings if units[key] == unit]]
        for key, series in members.items():
            _line(axes, series, _short(key))
        axes.set(title=f"System ({unit})", xlabel=axis, xlim=(-0.02 * last - 0.5, last * 1.02 + 0.5))
        axes.set_ylim(0, 105 if unit == "%" else members.max().max() * 1.1 or 1)
        _whole_numbers(axes)
        axes.legend(fontsize="small")
    return save_figure(figure, path)


def panel_grid(count: int, columns: int = 3, extra_height: float = 0.0) -> tuple[Figure, list[Axes]]:
    """`count` panels, `columns` a row at most."""
    columns = min(count, columns)
    rows = math.ceil(count / columns)
    figure = Figure(figsize=(4.8 * columns, 3.4 * rows + extra_height), layout="constrained")
    panels = list(figure.subplots(rows, columns, squeeze=False).ravel())
    for unused in panels[count:]:
        figure.delaxes(unused)
    return figure, panels[:count]


def _line(axes: Axes, series: pd.Series, label: str, **style: object) -> None:
    series = series.dropna()
    marker = "o" if len(series) <= 30 else None
    axes.plot(series.index, series.to_numpy(), label=label, marker=marker, markersize=3, **style)


def _whole_numbers(axes: Axes) -> None:
    """Whole epochs, rounds or steps on x, a run of one epoch included."""
    axes.xaxis.set_major_locator(MaxNLocator(integer=True))
    low, high = axes.get_xlim()
    if high - low < 2:
        axes.set_xlim((low + high) / 2 - 1, (low + high) / 2 + 1)


def _zero_or_log_scale(axes: Axes, values: pd.DataFrame | pd.Series) -> None:
    """A log scale for values over decades (a decayed learning rate, a first round's
    warm-up); else a linear one from zero, which a flat line does not magnify."""
    low, high = values.min(axis=None), values.max(axis=None)
    if low > 0 and high / low > 20:
        axes.set_yscale("log")
    else:
        axes.set_ylim(0, high * 1.1 or 1)


def _short(key: str) -> str:
    """timing/data_pct -> data, system/ram_used_gb -> ram_used."""
    return key.split("/", 1)[-1].removesuffix("_pct").removesuffix("_percent").removesuffix("_gb")
