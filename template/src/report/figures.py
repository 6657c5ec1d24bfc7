"""The report's figures, drawn on matplotlib Figure objects rather than pyplot: no
display, backend or global state involved, so they work the same on a headless server."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator

from src.runs.atomic import atomic_path
from src.runs.metrics_jsonl import higher_is_better

Series = Mapping[float, float]


def save_figure(figure: Figure, path: Path) -> Path:
    if not figure.get_layout_engine():
        figure.tight_layout()
    with atomic_path(path) as temporary:
        figure.savefig(temporary, dpi=110)
    return path


def learning_curves(runs: Mapping[str, Mapping[str, Mapping[str, Series]]], axis: str, path: Path) -> Path:
    """A panel per metric (loss, acc, episode_reward...): train dashed, validation solid.
    `runs` maps a run's name to its {metric: {key: series}}; several runs are overlaid,
    a colour each."""
    metrics = list(dict.fromkeys(metric for panels in runs.values() for metric in panels))
    figure, panels = _grid(len(metrics), extra_height=0.3 * len(runs) if len(runs) > 1 else 0)
    for axes, metric in zip(panels, metrics, strict=True):
        for index, curves in enumerate(runs.values()):
            for key, series in sorted(
                curves.get(metric, {}).items(), key=lambda item: item[0].startswith("val_")
            ):
                validation = key.startswith("val_")
                colour = f"C{index}" if len(runs) > 1 else ("C1" if validation else "C0")
                _line(axes, series, key, color=colour, linestyle="-" if validation else "--")
                if validation and series:
                    best = (max if higher_is_better(key) else min)(series, key=series.__getitem__)
                    axes.plot(best, series[best], marker="*", markersize=11, color=colour, linestyle="")
        axes.set(title=metric, xlabel=axis)
        axes.xaxis.set_major_locator(MaxNLocator(integer=True))
        if len(runs) == 1:
            axes.legend(fontsize="small")
    if len(runs) > 1:
        handles = [Line2D([], [], color=f"C{index}", label=name) for index, name in enumerate(runs)]
        handles += [
            Line2D([], [], color="grey", linestyle="--", label="train"),
            Line2D([], [], color="grey", label="validation"),
            Line2D([], [], color="grey", marker="*", markersize=9, linestyle="", label="best validation"),
        ]
        figure.legend(handles=handles, loc="outside lower center", ncols=1, fontsize="small")
    return save_figure(figure, path)


def learning_rate(series: Mapping[str, Series], path: Path) -> Path:
    figure = Figure(figsize=(6.5, 3.5), layout="constrained")
    axes = figure.subplots()
    for key, values in series.items():
        _line(axes, values, key)
    axes.set(title="Learning rate", xlabel="step")
    axes.xaxis.set_major_locator(MaxNLocator(integer=True))
    low, high = _value_range(series)
    if low > 0 and high / low > 20:  # a decay over decades reads on a log scale only
        axes.set_yscale("log")
    else:  # from zero: a constant rate is a flat line, not float noise magnified
        axes.set_ylim(0, high * 1.15 or 1)
        axes.ticklabel_format(axis="y", style="sci", scilimits=(-3, 4), useOffset=False)
    axes.legend(fontsize="small")
    return save_figure(figure, path)


def timing(shares: Mapping[str, Series], seconds: Series, axis: str, path: Path) -> Path:
    """Where each epoch's time went (timing/*_pct, stacked to 100%), and its length."""
    figure, (*share_axes, length_axes) = _grid(int(bool(shares)) + 1, columns=2)
    if shares:
        (axes,) = share_axes
        bottom: dict[float, float] = {}
        for index, (key, values) in enumerate(shares.items()):
            xs = sorted(values)
            heights = [values[x] for x in xs]
            axes.bar(
                xs,
                heights,
                bottom=[bottom.get(x, 0.0) for x in xs],
                width=0.85,
                label=_short(key),
                color=f"C{index}",
            )
            bottom |= {x: bottom.get(x, 0.0) + height for x, height in zip(xs, heights, strict=True)}
        axes.set(title=f"Time per {axis}, by section", xlabel=axis, ylabel="% of the time", ylim=(0, 100))
        axes.xaxis.set_major_locator(MaxNLocator(integer=True))
        axes.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.0, 1.0))
    _line(length_axes, seconds, f"timing/{axis}_seconds")
    length_axes.set(title=f"Seconds per {axis}", xlabel=axis, ylabel="seconds", ylim=(0, None))
    length_axes.xaxis.set_major_locator(MaxNLocator(integer=True))
    return save_figure(figure, path)


def system(readings: Mapping[str, Series], path: Path) -> Path:
    """CPU, RAM and GPU readings over the run (`readings` by seconds since its start):
    percentages on one panel, sizes on another."""
    groups: dict[str, dict[str, Series]] = {}
    for key, values in readings.items():
        unit = "%" if key.endswith("_percent") else "GB" if key.endswith("_gb") else key
        groups.setdefault(unit, {})[key] = values
    end = max((x for values in readings.values() for x in values), default=0.0)
    scale, time_unit = next(
        (s, u) for s, u in ((1, "seconds"), (60, "minutes"), (3600, "hours")) if end < 120 * s or u == "hours"
    )
    figure, panels = _grid(len(groups), columns=2)
    for axes, (unit, members) in zip(panels, groups.items(), strict=True):
        for key, values in members.items():
            _line(axes, {x / scale: value for x, value in values.items()}, _short(key))
        axes.set(title=f"System ({unit})", xlabel=f"{time_unit} since the start")
        axes.set_ylim(0, 105 if unit == "%" else None)
        axes.set_xlim(left=0)
        axes.legend(fontsize="small")
    return save_figure(figure, path)


def confusion_matrix(labels: list[str], counts: list[list[int]], path: Path) -> Path:
    """Counts, coloured by the share of each true class (row) predicted as each column."""
    size = len(labels)
    shares = [[count / (sum(row) or 1) for count in row] for row in counts]
    side = min(max(4.5, 0.45 * size + 2), 14)
    figure = Figure(figsize=(side + 1, side), layout="constrained")
    axes = figure.subplots()
    image = axes.imshow(shares, cmap="Blues", vmin=0, vmax=1)
    figure.colorbar(image, ax=axes, label="share of the true class", shrink=0.8)
    if size <= 30:  # beyond, the numbers do not fit their cells
        for row, values in enumerate(counts):
            for column, count in enumerate(values):
                colour = "white" if shares[row][column] > 0.5 else "black"
                axes.text(column, row, str(count), ha="center", va="center", fontsize="small", color=colour)
    ticks = range(size) if size <= 30 else range(0, size, math.ceil(size / 30))
    axes.set_xticks(ticks, [labels[i] for i in ticks], rotation=90 if size > 10 else 0)
    axes.set_yticks(ticks, [labels[i] for i in ticks])
    axes.set(title="Test set confusion matrix", xlabel="predicted class", ylabel="true class")
    return save_figure(figure, path)


def _grid(count: int, columns: int = 3, extra_height: float = 0.0) -> tuple[Figure, list[Axes]]:
    """`count` panels, `columns` a row at most."""
    columns = min(count, columns)
    rows = math.ceil(count / columns)
    figure = Figure(figsize=(4.8 * columns, 3.4 * rows + extra_height), layout="constrained")
    panels = list(figure.subplots(rows, columns, squeeze=False).ravel())
    for unused in panels[count:]:
        figure.delaxes(unused)
    return figure, panels[:count]


def _line(axes: Axes, series: Series, label: str, **style: object) -> None:
    xs = sorted(series)
    axes.plot(
        xs, [series[x] for x in xs], label=label, marker="o" if len(xs) <= 30 else None, markersize=3, **style
    )


def _value_range(series: Mapping[str, Series]) -> tuple[float, float]:
    values = [value for values in series.values() for value in values.values()]
    return min(values, default=0.0), max(values, default=0.0)


def _short(key: str) -> str:
    """timing/data_pct -> data, system/ram_used_gb -> ram_used."""
    return key.split("/", 1)[-1].removesuffix("_pct").removesuffix("_percent").removesuffix("_gb")
