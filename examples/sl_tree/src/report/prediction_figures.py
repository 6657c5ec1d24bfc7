"""The report's figures of a supervised run's test predictions (test_predictions.csv): a
classifier's confusion matrix and ROC curves, a regression's predicted against true values."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from src import predictions
from src.report.figures import panel_grid, save_figure


def prediction_figures(run_dir: Path, folder: Path) -> dict[str, Path]:
    """{section title: PNG} of what the run's test predictions show for their task; none where
    the run wrote none, or they hold no true values."""
    path = run_dir / predictions.PREDICTIONS_FILE
    return draw_predictions(predictions.read_predictions(path), folder) if path.is_file() else {}


def draw_predictions(table: pd.DataFrame, folder: Path) -> dict[str, Path]:
    if not (targets := predictions.targets_of(table)):
        return {}
    if predictions.task_of(table) == "regression":
        return {"Predicted vs true": predicted_vs_true(table, targets, folder / "predicted_vs_true.png")}
    (target,) = targets
    columns = predictions.probability_columns(table)
    probabilities = table[columns].set_axis(
        [c.removeprefix(predictions.PROBABILITY) for c in columns], axis=1
    )
    truth, predicted = (table[f"{side}_{target}"].astype(str) for side in ("true", "predicted"))
    classes = list(probabilities)
    return {
        "Confusion matrix": confusion_matrix(truth, predicted, classes, folder / "confusion_matrix.png"),
        "ROC": roc_curves(truth, probabilities, folder / "roc.png"),
    }


def confusion_matrix(truth: pd.Series, predicted: pd.Series, classes: list[str], path: Path) -> Path:
    """The test set's counts, coloured by the share of each true class (row) predicted as each column."""
    from sklearn.metrics import confusion_matrix as count

    counts = count(truth, predicted, labels=classes)
    shares = counts / np.maximum(counts.sum(axis=1, keepdims=True), 1)
    size = len(classes)
    side = min(max(4.5, 0.45 * size + 2), 14)
    figure = Figure(figsize=(side + 1, side), layout="constrained")
    axes = figure.subplots()
    image = axes.imshow(shares, cmap="Blues", vmin=0, vmax=1)
    figure.colorbar(image, ax=axes, label="share of the true class", shrink=0.8)
    if size <= 30:  # beyond, the numbers do not fit their cells
        for (row, column), value in np.ndenumerate(counts):
            colour = "white" if shares[row, column] > 0.5 else "black"
            axes.text(column, row, value, ha="center", va="center", fontsize="small", color=colour)
    ticks = range(0, size, math.ceil(size / 30))
    axes.set_xticks(ticks, [classes[i] for i in ticks], rotation=90 if size > 10 else 0)
    axes.set_yticks(ticks, [classes[i] for i in ticks])
    axes.set(title="Test set confusion matrix", xlabel="predicted class", ylabel="true class")
    return save_figure(figure, path)


def roc_curves(truth: pd.Series, probabilities: pd.DataFrame, path: Path) -> Path:
    """One ROC curve per class (a column of `probabilities`) against the rest, the positive
    class alone for two, with its AUC."""
    from sklearn.metrics import RocCurveDisplay

    figure, (axes,) = panel_grid(1)
    figure.set_size_inches(5.5, 4.8)  # square-ish: both axes are rates
    for name in probabilities.columns[1:] if probabilities.shape[1] == 2 else probabilities.columns:
        if 0 < (positive := truth == name).sum() < len(positive):
            RocCurveDisplay.from_predictions(positive, probabilities[name], name=name, ax=axes)
    axes.plot([0, 1], [0, 1], color="grey", linestyle=":", linewidth=1)
    axes.set(title="Test set ROC", xlabel="false positive rate", ylabel="true positive rate")
    axes.legend(fontsize="small", loc="lower right")
    return save_figure(figure, path)


def predicted_vs_true(table: pd.DataFrame, targets: list[str], path: Path) -> Path:
    """Per target, the test set's true against predicted values beside the residuals."""
    from sklearn.metrics import PredictionErrorDisplay

    figure, panels = panel_grid(2 * len(targets), columns=2)
    for target, *pair in zip(targets, panels[::2], panels[1::2], strict=True):
        for axes, kind in zip(pair, ("actual_vs_predicted", "residual_vs_predicted"), strict=True):
            truth, predicted = table[f"true_{target}"], table[f"predicted_{target}"]
            PredictionErrorDisplay.from_predictions(truth, predicted, kind=kind, ax=axes, subsample=None)
            axes.set_title(f"{target}: {kind.replace('_', ' ')}")
    return save_figure(figure, path)
