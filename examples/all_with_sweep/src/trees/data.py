"""Any table, checked and split for a tree part (DATA-1).

A part's data.py says where its rows come from (`load_table`) and, for data it knows,
which values are valid (`column_checks`, optional); this module checks the rows, the
same way for every table, and splits them.
"""

from __future__ import annotations

import inspect
import math
import warnings
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np
import pandas as pd
import pandera.pandas as pa
import xgboost as xgb
from sklearn.model_selection import train_test_split

from src.data_checks import DataValidationError, finite, validate_table
from src.trees.config import SLTreeConfig, xgboost_says


@dataclass
class Split:
    train_features: pd.DataFrame
    train_labels: pd.Series
    val_features: pd.DataFrame
    val_labels: pd.Series
    test_features: pd.DataFrame
    test_labels: pd.Series


def load_split(cfg: SLTreeConfig, source: ModuleType) -> Split:
    """The rows of `source`, a part's data module, checked and split into train /
    validation / test with their own seed, so every run of every config sees the same
    rows. Its `load_table(cfg)` returns one row per example with cfg.feature_columns and
    cfg.label_column; its `column_checks(cfg)`, where it defines one, pandera checks by
    column name for data whose valid values it knows."""
    table = part_function(source, "load_table", cfg, pd.DataFrame)
    known = part_function(source, "column_checks", cfg, dict) if hasattr(source, "column_checks") else {}
    where = cfg.data_path or f"{source.__name__}.load_table(cfg)"
    table = validate_table(table, table_schema(cfg, known), where)
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
        raise DataValidationError(f"{where}: cannot split {len(table)} rows: {error}") from None
    if min(len(val_y), len(test_y)) < 2:  # R² and early stopping need two rows or more
        raise DataValidationError(
            f"{where}: {len(table)} rows leave {len(val_y)} validation and {len(test_y)} test "
            "row(s); each needs at least 2: give more rows or larger --val-fraction/--test-fraction"
        )
    labels_suit_objective(cfg, train_y, val_y, where)
    return Split(train_x, train_y, val_x, val_y, test_x, test_y)


def part_function(source: ModuleType, name: str, cfg: SLTreeConfig, returns: type) -> Any:
    """What `name(cfg)` of the part's module returns, once it is known to be a function
    of the config that returns a `returns`; otherwise one line that says what is wrong."""
    function, wanted = getattr(source, name, None), f"{source.__name__}.{name}(cfg)"
    if not callable(function):
        raise DataValidationError(f"{source.__file__}: no function {name}; the pipeline calls {wanted}")
    try:
        inspect.signature(function).bind(cfg)
    except TypeError as error:
        signature = f"{name}{inspect.signature(function)}"
        raise DataValidationError(f"{wanted}: {error} (it is {signature})") from None
    if not isinstance(result := function(cfg), returns):
        raise DataValidationError(f"{wanted} returned a {type(result).__name__}, not a {returns.__name__}")
    return result


def table_schema(cfg: SLTreeConfig, known: dict[str, list[pa.Check]]) -> pa.DataFrameSchema:
    """DATA-1: every feature and the label present, numeric, non-null, finite, valid by
    the `known` checks of its name, and the label not the same in every row. Columns the
    config does not name are dropped."""

    def column(name: str, *checks: pa.Check) -> pa.Column:
        return pa.Column(float, [finite(), *known.get(name, []), *checks], nullable=False, coerce=True)

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


def labels_suit_objective(cfg: SLTreeConfig, train: pd.Series, val: pd.Series, source: str) -> None:
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
    # With the part's numbers: the num_class or quantile_alpha some objectives need.
    params = {**cfg.booster_fields(), "objective": cfg.objective, "eval_metric": cfg.eval_metric}
    try:
        with warnings.catch_warnings(action="ignore"):  # training repeats them; a refusal says more
            booster = xgb.Booster({**params, "nthread": 1}, [train_set])
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
