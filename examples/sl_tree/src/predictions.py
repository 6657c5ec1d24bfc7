"""A supervised model's predictions as a table, their metrics by task, and the file that keeps
them. A row per example: `row` (its position in its table), per target T `true_T` where known
and `predicted_T`, and a classifier's `probability_<class>`; the task, its metrics and its
figures follow from the columns, so the report needs no part's help."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn import metrics

from src.errors import DataValidationError
from src.runs.atomic import atomic_path

PREDICTIONS_FILE = "test_predictions.csv"
PROBABILITY = "probability_"


def classification_table(
    rows: np.ndarray, probabilities: np.ndarray, classes: Sequence, target: str, labels: np.ndarray | None
) -> pd.DataFrame:
    """`probabilities` has a column per class of `classes`; `labels`, where known, holds class values."""
    table = pd.DataFrame({"row": rows})
    if labels is not None:
        table[f"true_{target}"] = labels
    table[f"predicted_{target}"] = np.asarray(classes, dtype=object)[probabilities.argmax(axis=1)]
    for index, value in enumerate(classes):
        table[f"{PROBABILITY}{value}"] = probabilities[:, index]
    return table


def regression_table(
    rows: np.ndarray, predictions: np.ndarray, targets: Sequence[str], labels: np.ndarray | None
) -> pd.DataFrame:
    """`predictions` and `labels` have a column per target."""
    table = pd.DataFrame({"row": rows})
    predictions = predictions.reshape(len(rows), len(targets))  # also of no rows
    for index, target in enumerate(targets):
        if labels is not None:
            table[f"true_{target}"] = labels.reshape(len(rows), len(targets))[:, index]
        table[f"predicted_{target}"] = predictions[:, index]
    return table


def class_values(labels: pd.Series) -> pd.Series:
    """Whole numbers as integers (a label column with an empty cell reads as floats); True and
    False stay themselves."""
    numbers = pd.to_numeric(labels, errors="coerce")
    if not pd.api.types.is_bool_dtype(numbers) and numbers.notna().all() and (numbers % 1 == 0).all():
        return numbers.astype("int64")
    return labels


def task_of(table: pd.DataFrame) -> str:
    """classification or regression."""
    return "classification" if probability_columns(table) else "regression"


def probability_columns(table: pd.DataFrame) -> list[str]:
    return [column for column in table.columns if column.startswith(PROBABILITY)]


def targets_of(table: pd.DataFrame) -> list[str]:
    """The targets whose true and predicted values are both in the table."""
    predicted = [
        column.removeprefix("predicted_") for column in table.columns if column.startswith("predicted_")
    ]
    return [target for target in predicted if f"true_{target}" in table.columns]


def task_metrics(table: pd.DataFrame) -> dict[str, float]:
    """Classification: accuracy, balanced accuracy (the mean of per-class recall), macro F1, log
    loss and ROC AUC (one-vs-rest, macro, for several classes). Regression: RMSE, MAE and R²,
    per target when there are several. Empty when no label is known."""
    targets, found = targets_of(table), {}
    if task_of(table) == "regression":
        for target in targets:
            suffix = f"_{target}" if len(targets) > 1 else ""
            truth, predicted = (
                table[f"{side}_{target}"].to_numpy(np.float64) for side in ("true", "predicted")
            )
            found[f"rmse{suffix}"] = metrics.root_mean_squared_error(truth, predicted)
            found[f"mae{suffix}"] = metrics.mean_absolute_error(truth, predicted)
            found[f"r2{suffix}"] = metrics.r2_score(truth, predicted) if len(truth) > 1 else float("nan")
    elif targets:
        (target,) = targets
        classes = [column.removeprefix(PROBABILITY) for column in probability_columns(table)]
        truth, predicted = (
            table[f"{side}_{target}"].astype(str).to_numpy() for side in ("true", "predicted")
        )
        # sklearn takes the probability columns in the text order of the class names: classes
        # 5, 10 and 20 are '10', '20' and '5' to it.
        order = sorted(range(len(classes)), key=classes.__getitem__)
        classes = [classes[index] for index in order]
        probabilities = table[probability_columns(table)].to_numpy(np.float64)[:, order]
        found["accuracy"] = metrics.accuracy_score(truth, predicted)
        found["balanced_accuracy"] = metrics.balanced_accuracy_score(truth, predicted)
        found["f1_macro"] = metrics.f1_score(
            truth, predicted, average="macro", labels=classes, zero_division=0
        )
        found["log_loss"] = metrics.log_loss(truth, probabilities, labels=classes)
        present = set(truth)
        if len(present) > 1 and len(classes) == 2:  # AUC needs both sides of every class it scores
            found["roc_auc"] = metrics.roc_auc_score(truth == classes[1], probabilities[:, 1])
        elif len(present) > 1 and present == set(classes):
            found["roc_auc_ovr"] = metrics.roc_auc_score(
                truth, probabilities, multi_class="ovr", labels=classes
            )
    return {key: float(value) for key, value in found.items()}


def write_predictions(table: pd.DataFrame, path: Path) -> Path:
    """A CSV file, or a Parquet one where the name ends in .parquet."""
    with atomic_path(path) as temporary:
        if Path(path).suffix.lower() == ".parquet":
            table.to_parquet(temporary, index=False)
        else:
            table.to_csv(temporary, index=False)
    return path


def read_predictions(path: Path) -> pd.DataFrame:
    """A predictions file, checked: a DataValidationError (one line) when it is not one."""
    try:
        table = pd.read_csv(path)
    except (OSError, ValueError) as error:
        raise DataValidationError(f"{path}: cannot read predictions ({error})") from None
    if "row" not in table.columns or not any(column.startswith("predicted_") for column in table.columns):
        raise DataValidationError(
            f"{path}: not a predictions file (it needs 'row' and 'predicted_*' columns)"
        )
    rows = pd.to_numeric(table["row"], errors="coerce")
    if not (whole := rows.notna() & (rows >= 0) & (rows % 1 == 0)).all():
        bad = table["row"][~whole].iloc[0]
        raise DataValidationError(f"{path}: column 'row' holds {bad}, not a row number of the table")
    return table
