"""Data of this part: load, validate (DATA-1) and split a table.

To train on your own data, set `--data-path your.csv` with `--feature-columns`
and `--label-column`, or replace `load_table()`.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pandera.pandas as pa
import xgboost as xgb
from sklearn.datasets import load_diabetes
from sklearn.model_selection import train_test_split

from src.data_checks import DataValidationError, finite, read_table, validate_table

from .config import DiabetesConfig, xgboost_says


@dataclass
class Split:
    train_features: pd.DataFrame
    train_labels: pd.Series
    val_features: pd.DataFrame
    val_labels: pd.Series
    test_features: pd.DataFrame
    test_labels: pd.Series


def load_table(cfg: DiabetesConfig) -> pd.DataFrame:
    """The raw table: one row per example, feature columns and the label column."""
    if not cfg.data_path:
        return load_diabetes(as_frame=True, scaled=False).frame  # ships with scikit-learn
    return read_table(cfg.data_path)


# DATA-1 ranges: plausible values of the bundled table's columns (scikit-learn's raw,
# unscaled diabetes data). Name your own table's columns here to check them too.
COLUMN_CHECKS = {
    "age": [pa.Check.in_range(0, 120)],
    "sex": [pa.Check.isin([1, 2])],
    "bmi": [pa.Check.in_range(10, 80)],
    "bp": [pa.Check.in_range(30, 250)],
    **{blood_serum: [pa.Check.ge(0)] for blood_serum in ("s1", "s2", "s3", "s4", "s5", "s6")},
    "target": [pa.Check.ge(0)],
}


def table_schema(cfg: DiabetesConfig) -> pa.DataFrameSchema:
    """DATA-1: every feature and the label present, numeric, non-null, finite and in
    range, and the label not the same in every row. Columns the config does not name
    are dropped."""

    def column(name: str, *checks: pa.Check) -> pa.Column:
        return pa.Column(
            float, [finite(), *COLUMN_CHECKS.get(name, []), *checks], nullable=False, coerce=True
        )

    label_varies = pa.Check(
        lambda label: label.nunique() > 1, element_wise=False, error="takes 2 or more values"
    )
    return pa.DataFrameSchema(
        {
            **{name: column(name) for name in cfg.feature_columns},
            cfg.label_column: column(cfg.label_column, label_varies),
        },
        strict="filter",
        ordered=False,
    )


def load_split(cfg: DiabetesConfig) -> Split:
    """The validated table, split into train / validation / test with its own seed,
    so every run of every config sees the same rows."""
    source = cfg.data_path or "scikit-learn diabetes"
    table = validate_table(load_table(cfg), table_schema(cfg), source)
    features, labels = table[list(cfg.feature_columns)], table[cfg.label_column]
    held_out = cfg.val_fraction + cfg.test_fraction
    try:
        train_x, rest_x, train_y, rest_y = train_test_split(
            features, labels, test_size=held_out, random_state=cfg.split_seed
        )
        val_x, test_x, val_y, test_y = train_test_split(
            rest_x, rest_y, test_size=cfg.test_fraction / held_out, random_state=cfg.split_seed
        )
    except ValueError as error:  # too few rows for the fractions asked for
        raise DataValidationError(f"{source}: cannot split {len(table)} rows: {error}") from None
    if min(len(val_y), len(test_y)) < 2:  # R² and early stopping need two rows or more
        raise DataValidationError(
            f"{source}: {len(table)} rows leave {len(val_y)} validation and {len(test_y)} test "
            "row(s); each needs at least 2: give more rows or larger --val-fraction/--test-fraction"
        )
    labels_suit_objective(cfg, train_y, val_y, source)
    return Split(train_x, train_y, val_x, val_y, test_x, test_y)


def labels_suit_objective(cfg: DiabetesConfig, train: pd.Series, val: pd.Series, source: str) -> None:
    """DATA-1: the labels are ones cfg.objective trains on and cfg.eval_metric scores
    (binary:* need [0, 1], count:poisson no negatives, rank:* integers, survival:aft
    label bounds...). XGBoost says so itself after one round on the labels with a
    constant feature: milliseconds here, where mid-run it would be a traceback."""
    labels = pd.concat([train, val])
    refusal = (
        f"{source}: labels {labels.min():g} to {labels.max():g} of column {cfg.label_column!r} do not "
        f"suit --objective {cfg.objective} --eval-metric {cfg.eval_metric}"
    )
    # XGBoost checks [0, 1] for its logistic objectives only: binary:hinge trains on any labels.
    probabilities = cfg.objective.startswith("binary:") or cfg.objective == "reg:logistic"
    if probabilities and not labels.between(0, 1).all():
        raise DataValidationError(f"{refusal}: it needs labels in [0, 1]")
    # One thread: starting XGBoost's pool would take longer than the check itself.
    train_set, val_set = (xgb.DMatrix(np.zeros((len(y), 1)), label=y, nthread=1) for y in (train, val))
    params = {"objective": cfg.objective, "eval_metric": cfg.eval_metric, "nthread": 1}
    try:
        with warnings.catch_warnings(action="ignore"):  # training repeats them; a refusal says more
            booster = xgb.Booster(params, [train_set])
            booster.update(train_set, 0)
            # "[0]\ttrain-rmse:151.2\tval-rmse:149.8"
            scores = booster.eval_set([(train_set, "train"), (val_set, "val")]).split("\t")[1:]
    except xgb.core.XGBoostError as error:
        raise DataValidationError(f"{refusal}: {xgboost_says(error)}") from None
    # Early stopping cannot follow a score that is NaN or infinite from the start (auc on
    # labels other than 0 and 1, mape on labels of 0).
    if not all(math.isfinite(float(score.rpartition(":")[2])) for score in scores):
        raise DataValidationError(
            f"{refusal}: {' '.join(scores)} after one round; early stopping needs finite scores"
        )
