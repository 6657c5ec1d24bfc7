"""How a table's rows become a network's inputs and targets, and its outputs predictions.

Fitted on the training rows and kept as plain data, not a pickle: it travels in the model's
hyperparameters (checkpoints, model.pt, loaded with weights_only=True), so that a resumed run
and a prediction encode rows as training did.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from sklearn.impute import SimpleImputer
from sklearn.preprocessing import OneHotEncoder, StandardScaler

from src import predictions
from src.data_checks import as_written
from src.errors import DataValidationError
from src.neural.config import Task

MISSING = "(missing)"  # the category of a missing text value


def is_numeric(column: pd.Series) -> bool:
    """Numbers (booleans included) are scaled; any other column is text, one-hot encoded."""
    return pd.api.types.is_numeric_dtype(column)


def as_text(column: pd.Series) -> np.ndarray:
    column = as_written(column)
    return column.astype(str).where(column.notna(), MISSING).to_numpy(dtype=object)


def as_numbers(column: pd.Series, where: str) -> np.ndarray:
    try:
        numbers = pd.to_numeric(column).to_numpy(dtype=np.float64, na_value=np.nan)
    except (TypeError, ValueError):
        values = column.dropna()
        example = values[pd.to_numeric(values, errors="coerce").isna()].iloc[0]
        raise DataValidationError(
            f"{where}: column '{column.name}' holds text ({example!r}) where the run read numbers"
        ) from None
    # Training refuses them too (the table's finite check): float32, the network's, holds neither.
    if (beyond := np.abs(numbers) > np.finfo(np.float32).max).any():
        row = column.index[beyond][0]
        raise DataValidationError(
            f"{where}: column '{column.name}' holds {numbers[beyond][0]:g} at row {row}, which is not "
            "finite within float32's range (about 3.4e38)"
        )
    return numbers


@dataclass
class FeatureEncoding:
    """The network's inputs, as scikit-learn fits them on the training rows: a number's missing
    value becomes the column's median, then it is standardised (SimpleImputer, StandardScaler); a
    text column becomes one input per value seen in training, missing counting as a value and an
    unseen one as none (OneHotEncoder(handle_unknown="ignore"))."""

    numeric: list[str]
    medians: list[float]
    means: list[float]
    scales: list[float]
    text: list[str]
    categories: list[list[str]]

    @classmethod
    def fit(cls, rows: pd.DataFrame, where: str) -> FeatureEncoding:
        numeric = [name for name in rows.columns if is_numeric(rows[name])]
        text = [name for name in rows.columns if name not in numeric]
        for name in numeric:  # the imputer would drop it, and the network's inputs with it
            if rows[name].isna().all():
                raise DataValidationError(
                    f"{where}: column '{name}' has no value in any of the {len(rows)} training rows: "
                    "leave it out with --feature-columns"
                )
        encoding = cls(numeric, [], [], [], text, [])
        if numeric:  # a missing number becomes the column's median, then all are standardized
            imputer = SimpleImputer(strategy="median").fit(rows[numeric])
            scaler = StandardScaler().fit(imputer.transform(rows[numeric]))
            encoding.medians, encoding.means = imputer.statistics_.tolist(), scaler.mean_.tolist()
            encoding.scales = scaler.scale_.tolist()
        if text:  # the values training saw, missing among them
            texts = pd.DataFrame({name: as_text(rows[name]) for name in text})
            encoding.categories = [values.tolist() for values in OneHotEncoder().fit(texts).categories_]
        return encoding

    @property
    def columns(self) -> list[str]:
        return [*self.numeric, *self.text]

    @property
    def width(self) -> int:  # the network's inputs
        return len(self.numeric) + sum(map(len, self.categories))

    def transform(self, table: pd.DataFrame, where: str) -> np.ndarray:
        """The network's inputs for each row of `table`; `where` names it in an error."""
        numbers = np.empty((len(table), len(self.numeric)))
        for index, name in enumerate(self.numeric):
            numbers[:, index] = as_numbers(table[name], where)
        numbers = np.where(np.isnan(numbers), self.medians, numbers)
        inputs = [(numbers - np.asarray(self.means)) / np.asarray(self.scales)]
        for name, values in zip(self.text, self.categories, strict=True):
            codes = pd.Categorical(as_text(table[name]), categories=values).codes  # -1: never seen
            inputs.append(codes[:, None] == np.arange(len(values)))
        return np.hstack(inputs).astype(np.float32)


@dataclass
class TableEncoding:
    """The features' and the targets' encoding: a class is its position in `classes`; a number to
    predict is standardised with the training rows' means and scales, so that the network's
    outputs are of one size whatever the units."""

    task: Task
    targets: list[str]
    features: FeatureEncoding
    classes: list = dataclasses.field(default_factory=list)
    target_means: list[float] = dataclasses.field(default_factory=list)
    target_scales: list[float] = dataclasses.field(default_factory=list)

    @classmethod
    def fit(
        cls, task: Task, table: pd.DataFrame, targets: list[str], training_rows: pd.DataFrame, where: str
    ) -> TableEncoding:
        """Classes are the label's values in all of `table`; the rest comes from the training rows."""
        features = FeatureEncoding.fit(training_rows.drop(columns=targets), where)
        if task == "classification":
            (target,) = targets
            return cls(task, targets, features, classes=sorted(table[target].unique().tolist()))
        values = training_rows[targets].to_numpy(dtype=np.float64)
        scales = values.std(axis=0)
        if constant := [name for name, scale in zip(targets, scales, strict=True) if scale == 0]:
            raise DataValidationError(
                f"{where}: label column(s) {', '.join(constant)} hold one value in all {len(values)} "
                "training rows: there is nothing to learn"
            )
        return cls(
            task, targets, features, target_means=values.mean(axis=0).tolist(), target_scales=scales.tolist()
        )

    @property
    def num_outputs(self) -> int:
        return len(self.classes) if self.task == "classification" else len(self.targets)

    def encode_targets(self, table: pd.DataFrame) -> np.ndarray:
        """Each row's class (int64), or its standardised numbers (float32, a column per target)."""
        if self.task == "classification":
            (target,) = self.targets
            return table[target].map({value: i for i, value in enumerate(self.classes)}).to_numpy(np.int64)
        values = table[self.targets].to_numpy(dtype=np.float64)
        return ((values - self.target_means) / self.target_scales).astype(np.float32)

    def predictions(self, rows: np.ndarray, outputs: np.ndarray, labels: pd.DataFrame | None) -> pd.DataFrame:
        """src/predictions.py's table of the network's `outputs` for `rows`, with the true values
        of `labels` (the label columns of those rows) where known."""
        if self.task == "classification":
            (target,) = self.targets
            logits = outputs.astype(np.float64)  # probabilities that add up to 1 within float64's error
            shifted = np.exp(logits - logits.max(axis=1, keepdims=True))  # softmax
            truth = None if labels is None else labels[target].to_numpy()
            return predictions.classification_table(
                rows, shifted / shifted.sum(axis=1, keepdims=True), self.classes, target, truth
            )
        values = outputs.astype(np.float64) * self.target_scales + np.asarray(self.target_means)
        truth = None if labels is None else labels[self.targets].to_numpy(dtype=np.float64)
        return predictions.regression_table(rows, values, self.targets, truth)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TableEncoding:
        return cls(**{**data, "features": FeatureEncoding(**data["features"])})
