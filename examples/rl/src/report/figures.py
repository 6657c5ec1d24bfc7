"""The report's figures, drawn on matplotlib Figure objects rather than pyplot: no
display, backend or global state involved, so they work the same on a headless server."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
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


def learning_curves(
    runs: Mapping[str, Mapping[str, Mapping[str, Series]]],
    axis: str,
    monitored: set[str],
    path: Path,
    resumed: Mapping[str, list[float]] | None = None,
    title: str = "",
) -> Path:
    """A panel per metric (loss, acc, episode_reward...). `runs` maps a run's name to
    its {metric: {key: series}}; several runs are overlaid, a colour each. The best
    point of a monitored key (the one checkpoints and early stopping go by) is starred;
    where a run was resumed (`resumed`: a run's name to those x), a dotted line."""
    resumed = resumed or {}
    metrics = list(dict.fromkeys(metric for panels in runs.values() for metric in panels))
    several = len(runs) > 1
    figure, panels = _grid(len(metrics), extra_height=0.3 * len(runs) if several else 0)
    for axes, metric in zip(panels, metrics, strict=True):
        for index, (name, curves) in enumerate(runs.items()):
            train_first = sorted(curves.get(metric, {}).items(), key=lambda item: item[0].startswith("val_"))
            for key, series in train_first:
                _curve(axes, key, series, f"C{index}" if several else None, starred=key in monitored)
            for x in resumed.get(name, []):
                axes.axvline(x, color=f"C{index}" if several else "grey", linestyle=":", linewidth=1)
        axes.set(title=metric, xlabel=axis)
        _whole_numbers(axes)
        if not several:
            _resume_legend(axes, bool(resumed.get(next(iter(runs), ""))))
    if several:
        handles = [Line2D([], [], color=f"C{index}", label=name) for index, name in enumerate(runs)]
        handles += [
            Line2D([], [], color="grey", linestyle="--", label="train"),
            Line2D([], [], color="grey", label="validation"),
            Line2D([], [], color="grey", marker="*", markersize=9, linestyle="", label="best"),
        ]
        if any(resumed.values()):
            handles.append(Line2D([], [], color="grey", linestyle=":", label="resumed"))
        figure.legend(handles=handles, loc="outside lower center", fontsize="small")
    if title:
        figure.suptitle(title)
    return save_figure(figure, path)


def _resume_legend(axes: Axes, resumed: bool) -> None:
    """One run's legend, with the resume line where it was resumed."""
    handles, _ = axes.get_legend_handles_labels()
    if resumed:
        handles.append(Line2D([], [], color="grey", linestyle=":", label="resumed"))
    axes.legend(handles=handles, fontsize="small")


def seed_bands(
    groups: Mapping[str, Mapping[str, Mapping[str, tuple[Series, Series]]]],
    axis: str,
    path: Path,
    title: str = "",
) -> Path:
    """Runs that differ only in their seed, as one curve per group: `groups` maps a
    group's name to its {metric: {key: (mean, std)}}; the mean drawn as a line, mean ±
    one standard deviation shaded (train dashed, validation solid)."""
    metrics = list(dict.fromkeys(metric for panels in groups.values() for metric in panels))
    figure, panels = _grid(len(metrics), extra_height=0.3 * len(groups))
    for axes, metric in zip(panels, metrics, strict=True):
        for index, curves in enumerate(groups.values()):
            for key, (mean, std) in curves.get(metric, {}).items():
                xs = sorted(mean)
                low = [mean[x] - std.get(x, 0.0) for x in xs]
                high = [mean[x] + std.get(x, 0.0) for x in xs]
                style = "-" if key.startswith("val_") else "--"
                axes.plot(xs, [mean[x] for x in xs], color=f"C{index}", linestyle=style, linewidth=1.5)
                axes.fill_between(xs, low, high, color=f"C{index}", alpha=0.2, linewidth=0)
        axes.set(title=metric, xlabel=axis)
        _whole_numbers(axes)
    handles = [Line2D([], [], color=f"C{index}", label=name) for index, name in enumerate(groups)]
    handles += [
        Line2D([], [], color="grey", linestyle="--", label="train (mean)"),
        Line2D([], [], color="grey", label="validation (mean)"),
        Patch(color="grey", alpha=0.2, label="± one standard deviation"),
    ]
    figure.legend(handles=handles, loc="outside lower center", fontsize="small")
    if title:
        figure.suptitle(title)
    return save_figure(figure, path)


def _curve(axes: Axes, key: str, series: Series, colour: str | None, starred: bool) -> None:
    """Train dashed, validation solid; in one run's figure, train blue and validation orange."""
    validation = key.startswith("val_")
    colour = colour or ("C1" if validation else "C0")
    _line(axes, series, key, color=colour, linestyle="-" if validation else "--")
    if starred and series:
        best = (max if higher_is_better(key) else min)(series, key=series.__getitem__)
        axes.plot(best, series[best], marker="*", markersize=11, color=colour, linestyle="")


def learning_rate(series: Mapping[str, Series], path: Path) -> Path:
    figure = Figure(figsize=(6.5, 3.5), layout="constrained")
    axes = figure.subplots()
    for index, (key, values) in enumerate(series.items()):
        # Steps: a rate holds until the next one is logged. Dashes: the groups' often coincide.
        _line(axes, values, key, linestyle=("-", "--", ":", "-.")[index % 4], drawstyle="steps-post")
    axes.set(title="Learning rate", xlabel="step")
    _whole_numbers(axes)
    _zero_or_log_scale(axes, [value for values in series.values() for value in values.values()])
    if axes.get_yscale() == "linear":
        axes.ticklabel_format(axis="y", style="sci", scilimits=(-3, 4), useOffset=False)
    axes.legend(fontsize="small")
    return save_figure(figure, path)


def timing(shares: Mapping[str, Series], seconds: Series, axis: str, path: Path) -> Path:
    """Where each epoch's time went (timing/*_pct, stacked to 100%), and its length."""
    figure, panels = _grid(2 if shares else 1, columns=2)
    if shares:
        _stacked_bars(panels[0], shares)
        panels[0].set(
            title=f"Time per {axis}, by section", xlabel=axis, ylabel="% of the time", ylim=(0, 100)
        )
    _line(panels[-1], seconds, f"timing/{axis}_seconds")
    panels[-1].set(title=f"Seconds per {axis}", xlabel=axis, ylabel="seconds")
    _zero_or_log_scale(panels[-1], list(seconds.values()))
    for axes in panels:
        _whole_numbers(axes)
    return save_figure(figure, path)


def _stacked_bars(axes: Axes, shares: Mapping[str, Series]) -> None:
    bottom: dict[float, float] = {}
    for index, (key, values) in enumerate(shares.items()):
        xs = sorted(values)
        below = [bottom.get(x, 0.0) for x in xs]
        axes.bar(xs, [values[x] for x in xs], bottom=below, width=0.85, label=_short(key), color=f"C{index}")
        bottom |= {x: base + values[x] for x, base in zip(xs, below, strict=True)}
    axes.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.0, 1.0))


def system(readings: Mapping[str, Series], axis: str, last: float, path: Path) -> Path:
    """CPU, RAM and GPU readings, by epoch (or round) up to `last`: percentages on one
    panel, sizes on another."""
    groups: dict[str, dict[str, Series]] = {}
    for key, values in readings.items():
        unit = "%" if key.endswith("_percent") else "GB" if key.endswith("_gb") else key
        groups.setdefault(unit, {})[key] = values
    figure, panels = _grid(len(groups), columns=2)
    for axes, (unit, members) in zip(panels, groups.items(), strict=True):
        for key, values in members.items():
            _line(axes, values, _short(key))
        axes.set(title=f"System ({unit})", xlabel=axis, xlim=(-0.02 * last - 0.5, last * 1.02 + 0.5))
        highest = max(value for values in members.values() for value in values.values())
        axes.set_ylim(0, 105 if unit == "%" else highest * 1.1 or 1)
        _whole_numbers(axes)
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


def roc_curves(truth: Sequence[str], probabilities: Mapping[str, Sequence[float]], path: Path) -> Path:
    """One ROC curve per class against the rest (the positive class alone for two), with its AUC."""
    from sklearn.metrics import roc_auc_score, roc_curve

    figure = Figure(figsize=(5.5, 4.8), layout="constrained")
    axes = figure.subplots()
    classes = list(probabilities)
    for name in classes[1:] if len(classes) == 2 else classes:
        positive = [label == name for label in truth]
        if 0 < sum(positive) < len(positive):
            false_rate, true_rate, _ = roc_curve(positive, probabilities[name])
            auc = roc_auc_score(positive, probabilities[name])
            axes.plot(false_rate, true_rate, label=f"{name} (AUC {auc:.3f})")
    axes.plot([0, 1], [0, 1], color="grey", linestyle=":", linewidth=1)
    axes.set(title="Test set ROC", xlabel="false positive rate", ylabel="true positive rate")
    axes.legend(fontsize="small", loc="lower right")
    return save_figure(figure, path)


def predicted_vs_actual(pairs: Mapping[str, tuple[Sequence[float], Sequence[float]]], path: Path) -> Path:
    """Per target, predicted against true values beside the residuals (predicted minus true)."""
    figure, panels = _grid(2 * len(pairs), columns=2)
    for (target, (truth, predicted)), scatter, residual in zip(
        pairs.items(), panels[::2], panels[1::2], strict=True
    ):
        scatter.scatter(truth, predicted, s=8, alpha=0.6)
        low, high = min(*truth, *predicted), max(*truth, *predicted)
        scatter.plot([low, high], [low, high], color="grey", linestyle=":", linewidth=1)
        scatter.set(title=f"{target}: predicted vs true", xlabel="true", ylabel="predicted")
        residual.scatter(predicted, [p - t for t, p in zip(truth, predicted, strict=True)], s=8, alpha=0.6)
        residual.axhline(0, color="grey", linestyle=":", linewidth=1)
        residual.set(title=f"{target}: residuals", xlabel="predicted", ylabel="predicted - true")
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


def _whole_numbers(axes: Axes) -> None:
    """Whole epochs, rounds or steps on x, a run of one epoch included."""
    axes.xaxis.set_major_locator(MaxNLocator(integer=True))
    low, high = axes.get_xlim()
    if high - low < 2:
        axes.set_xlim((low + high) / 2 - 1, (low + high) / 2 + 1)


def _line(axes: Axes, series: Series, label: str, **style: object) -> None:
    xs = sorted(series)
    axes.plot(
        xs, [series[x] for x in xs], label=label, marker="o" if len(xs) <= 30 else None, markersize=3, **style
    )


def _zero_or_log_scale(axes: Axes, values: list[float]) -> None:
    """A log scale for values over decades (a decayed learning rate, a first round's
    warm-up); else a linear one from zero, which a flat line does not magnify."""
    low, high = min(values, default=0.0), max(values, default=0.0)
    if low > 0 and high / low > 20:
        axes.set_yscale("log")
    else:
        axes.set_ylim(0, high * 1.1 or 1)


def _short(key: str) -> str:
    """timing/data_pct -> data, system/ram_used_gb -> ram_used."""
    return key.split("/", 1)[-1].removesuffix("_pct").removesuffix("_percent").removesuffix("_gb")
