"""Any table, checked, encoded and split for a tree part (DATA-1). A part's data.py says
where its rows come from (`load_table`) and, for data it knows, which values are valid
(`column_checks`, optional). Rows are read as XGBoost takes them (text as categories, empty
cells missing, a classifier's labels 0..K-1) and keep their place in the table as index."""

from __future__ import annotations

import json
import math
import warnings
from dataclasses import asdict, dataclass
from types import ModuleType
from typing import Any

import numpy as np
import pandas as pd
import pandera.pandas as pa
import xgboost as xgb
from sklearn.model_selection import train_test_split

from src.data_checks import (
    DataValidationError,
    as_written,
    check_rows_and_feature_kinds,
    finite,
    part_function,
    refuse_identifiers,
    validate_table,
)
from src.predictions import class_values
from src.trees.config import SLTreeConfig, xgboost_says

ENCODING_ATTRIBUTE = "table_encoding"  # the booster attribute that keeps a model's TableEncoding


@dataclass(frozen=True)
class TableEncoding:
    """How a model reads a table, kept in the model so that predicting reads new rows as
    training did: the categories training saw in each text column (others read as missing),
    and a classifier's classes (label code i is classes[i]; None for a regression)."""

    label_column: str
    feature_columns: tuple[str, ...]
    categories: dict[str, list[str]]
    classes: list[Any] | None = None

    def features(self, table: pd.DataFrame, where: str) -> pd.DataFrame:
        """The feature columns of `table` as XGBoost takes them, its index kept."""
        columns = {}
        for name in self.feature_columns:
            if name in self.categories:
                text, known = _as_text(table[name]), self.categories[name]
                # A value training never saw reads as missing (pandas will refuse to do it silently).
                columns[name] = pd.Categorical(text.where(text.isin(known)), categories=known)
                continue
            numbers = pd.to_numeric(table[name], errors="coerce")
            if (text := table[name][numbers.isna() & table[name].notna()]).size:
                raise DataValidationError(
                    f"{where}: column {name!r} holds text ({_examples(text)}) where the model reads "
                    "numbers; make those cells numbers, or empty for a missing value"
                )
            # As training's finite check: beyond float32's range, where XGBoost reads, is infinite.
            if (beyond := numbers[numbers.abs() > np.finfo(np.float32).max]).size:
                raise DataValidationError(
                    f"{where}: column {name!r} holds {beyond.iloc[0]:g} at row {beyond.index[0]}: the model "
                    "takes finite numbers within float32's range (about 3.4e38), as training did"
                )
            # XGBoost reads every value as a float32: a float64 copy would hold the same in twice the memory.
            columns[name] = numbers.astype(np.float32)
        return pd.DataFrame(columns, index=table.index)

    def as_codes(self, features: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
        """`features` with each text column as its categories' codes (NaN where missing), and
        XGBoost's feature types ("c" for those): what training hands XGBoost. The trees are
        those pandas categories grow, but the model does not keep XGBoost's own list of
        categories, and XGBoost 3.2's CUDA build crashes continuing a model that keeps one."""
        codes = features.copy(deep=False)
        for name in self.categories:
            codes[name] = features[name].cat.codes.astype(np.float32).where(features[name].notna())
        return codes, ["c" if name in self.categories else "q" for name in self.feature_columns]

    def label_codes(self, labels: pd.Series) -> pd.Series:
        if self.classes is None:
            return labels.astype(float)
        return pd.Series(pd.Categorical(class_values(labels), self.classes).codes, index=labels.index)

    def label_values(self, codes: pd.Series) -> np.ndarray:
        if self.classes is None:
            return codes.to_numpy(dtype=float)
        return np.asarray(self.classes, dtype=object)[codes.to_numpy(dtype=int)]

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def of(cls, model: xgb.Booster, where: str) -> TableEncoding:
        if (text := model.attr(ENCODING_ATTRIBUTE)) is None:
            raise DataValidationError(
                f"{where}: the model holds no {ENCODING_ATTRIBUTE}, which this project's training keeps in "
                "it; train it again"
            )
        fields = json.loads(text)
        return cls(**fields | {"feature_columns": tuple(fields["feature_columns"])})


@dataclass
class Split:
    train_features: pd.DataFrame
    train_labels: pd.Series
    val_features: pd.DataFrame
    val_labels: pd.Series
    test_features: pd.DataFrame
    test_labels: pd.Series
    encoding: TableEncoding


def load_split(cfg: SLTreeConfig, source: ModuleType) -> Split:
    """The rows of `source`, a part's data module, checked and split by cfg.split_seed. Its
    `load_table(cfg)` returns a row per example; its `column_checks(cfg)`, where defined,
    pandera checks by column name for data whose valid values it knows."""
    table = part_function(source, "load_table", cfg, pd.DataFrame).reset_index(drop=True)
    known = part_function(source, "column_checks", cfg, dict) if hasattr(source, "column_checks") else {}
    where = cfg.data_path or f"{source.__name__}.load_table(cfg)"
    label = cfg.label_column
    features = list(cfg.feature_columns) or [name for name in table.columns if name != label]
    if not features:
        raise DataValidationError(f"{where}: no feature columns beside the label column {label}")
    if missing := [name for name in (*features, label) if name not in table.columns]:
        shown = ", ".join(map(str, table.columns[:20])) + (" ..." if len(table.columns) > 20 else "")
        raise DataValidationError(
            f"{where}: has no column(s) {', '.join(map(str, missing))} (its columns: {shown}); "
            "name others with --label-column and --feature-columns"
        )
    if named := [name for name in features if set(str(name)) & set("[]<")]:  # refused once training starts
        raise DataValidationError(
            f"{where}: column {named[0]!r}: XGBoost takes no '[', ']' or '<' in a feature's name; rename "
            "it in load_table (table.rename(columns=...)), or leave it out with --feature-columns"
        )
    check_rows_and_feature_kinds(table, features, where)
    table = labelled_rows(table, label, cfg.drop_unlabelled_rows, where)
    classes = label_classes(table[label], cfg, where)
    if classes is None and table[label].nunique() < 2:
        raise DataValidationError(
            f"{where}: label column {label!r} holds one value ({table[label].iloc[0]}) in all {len(table)} "
            "labelled rows: there is nothing to learn"
        )
    text = [name for name in features if column_kind(table[name]) == "text"]
    refuse_identifiers(table, text, where)
    try:
        table = validate_table(table[[*features, label]], table_schema(cfg, features, text, known), where)
    except DataValidationError as error:
        if not (checked := [name for name in known if f"column '{name}'" in str(error)]):
            raise
        raise DataValidationError(
            f"{error}\n  (the checks of {', '.join(map(repr, checked))} are what {source.__name__}"
            ".column_checks(cfg) gives: a table of your own has its own there, or none)"
        ) from None
    train, val, test = split_rows(table, cfg, classes is not None, where)
    categories = {name: sorted(_as_text(table.loc[train, name]).dropna().unique().tolist()) for name in text}
    if empty := [name for name, values in categories.items() if not values]:
        raise DataValidationError(
            f"{where}: column(s) {', '.join(map(repr, empty))} hold no value in the training rows, so "
            "nothing can be learnt from them; leave them out with --feature-columns"
        )
    encoding = TableEncoding(label, tuple(features), categories, classes)
    labels = encoding.label_codes(table[label])
    split = Split(
        train_features=encoding.features(table.loc[train], where),
        train_labels=labels.loc[train],
        val_features=encoding.features(table.loc[val], where),
        val_labels=labels.loc[val],
        test_features=encoding.features(table.loc[test], where),
        test_labels=labels.loc[test],
        encoding=encoding,
    )
    labels_suit_objective(cfg, split, where)
    return split


def labelled_rows(table: pd.DataFrame, label: str, drop_unlabelled: bool, where: str) -> pd.DataFrame:
    empty = table[label].isna()
    if not empty.any():
        return table
    rows = ", ".join(map(str, empty[empty].index[:5])) + (" ..." if empty.sum() > 5 else "")
    if not drop_unlabelled:
        raise DataValidationError(
            f"{where}: label column {label!r} is empty in {empty.sum()} row(s) (rows {rows}); give every "
            "row a label, or pass --drop-unlabelled-rows to train on the others"
        )
    print(f"{where}: {empty.sum()} row(s) without a {label!r} label left out (rows {rows})")
    return table[~empty]


def label_classes(labels: pd.Series, cfg: SLTreeConfig, where: str) -> list[Any] | None:
    """A classifier's classes in order, None for a regression; a label that does not fit the
    task is refused, saying which objective would."""
    name, numbers = cfg.label_column, pd.to_numeric(labels, errors="coerce")
    if cfg.task == "regression":
        if (text := labels[numbers.isna()]).size:
            raise DataValidationError(
                f"{where}: label column {name!r} holds text ({_examples(text)}), and --objective "
                f"{cfg.objective} predicts a number; to classify, pass --objective multi:softprob "
                "(binary:logistic for two classes)"
            )
        return None
    if numbers.notna().all() and not (whole := numbers % 1 == 0).all():
        raise DataValidationError(
            f"{where}: label column {name!r} holds fractional numbers ({_examples(labels[~whole])}), "
            f"and --objective {cfg.objective} classifies; to predict a number, pass --objective "
            "reg:squarederror"
        )
    classes = sorted(class_values(labels).unique().tolist())
    shown = ", ".join(map(str, classes[:10])) + (" ..." if len(classes) > 10 else "")
    if len(classes) < 2:
        raise DataValidationError(
            f"{where}: label column {name!r} holds one class ({shown}); a classifier needs two or more"
        )
    if cfg.task == "binary" and len(classes) != 2:
        raise DataValidationError(
            f"{where}: label column {name!r} holds {len(classes)} classes ({shown}), and --objective "
            f"{cfg.objective} separates two; pass --objective multi:softprob"
        )
    return classes


def column_kind(column: pd.Series) -> str:
    """numbers or text by what the column holds (check_rows_and_feature_kinds has refused a few
    words among numbers)."""
    if pd.api.types.is_numeric_dtype(column) or pd.api.types.is_bool_dtype(column):
        return "numbers"
    return "numbers" if pd.to_numeric(column.dropna(), errors="coerce").notna().all() else "text"


def table_schema(
    cfg: SLTreeConfig, features: list[str], text: list[str], known: dict[str, list[pa.Check]]
) -> pa.DataFrameSchema:
    """DATA-1: numeric features finite where not empty, a regression's label finite, every
    column valid by the `known` checks of its name."""

    def numbers(name: str, *checks: pa.Check, nullable: bool = True) -> pa.Column:
        return pa.Column(float, [finite(), *known.get(name, []), *checks], nullable=nullable, coerce=True)

    label = cfg.label_column
    return pa.DataFrameSchema(
        {
            **{name: pa.Column(checks=known.get(name, []), nullable=True) for name in text},
            **{name: numbers(name) for name in features if name not in text},
            label: numbers(label, nullable=False)
            if cfg.task == "regression"
            else pa.Column(checks=known.get(label, []), nullable=False),
        },
        ordered=False,
    )


def split_rows(
    table: pd.DataFrame, cfg: SLTreeConfig, stratified: bool, where: str
) -> tuple[pd.Index, pd.Index, pd.Index]:
    """Train, validation and test rows; a classifier's stratified where classes allow."""
    held_out, labels = cfg.val_fraction + cfg.test_fraction, class_values(table[cfg.label_column])

    def divide(rows: pd.Index, share: float) -> list[pd.Index]:
        try:
            return train_test_split(
                rows,
                test_size=share,
                random_state=cfg.split_seed,
                stratify=labels.loc[rows] if stratified else None,
            )
        except ValueError:  # a class with too few rows to share out
            return train_test_split(rows, test_size=share, random_state=cfg.split_seed)

    try:
        train, rest = divide(table.index, held_out)
        val, test = divide(rest, cfg.test_fraction / held_out)
    except ValueError as error:  # too few rows for the fractions asked for
        raise DataValidationError(f"{where}: cannot split {len(table)} rows: {error}") from None
    if min(len(val), len(test)) < 2:  # R² and early stopping need two rows or more
        raise DataValidationError(
            f"{where}: {len(table)} rows leave {len(val)} validation and {len(test)} test "
            "row(s); each needs at least 2: give more rows or larger --val-fraction/--test-fraction"
        )
    return train, val, test


def labels_suit_objective(cfg: SLTreeConfig, split: Split, source: str) -> None:
    """DATA-1: labels cfg.objective trains on and its metric scores (count:poisson no
    negatives, survival:aft bounds...), as XGBoost says after one round on a constant
    feature: milliseconds here, a traceback mid-run."""
    train, val = split.train_labels, split.val_labels
    labels = pd.concat([train, val])
    metric, classes = cfg.watched_metric, split.encoding.classes
    what = f"labels {labels.min():g} to {labels.max():g}" if classes is None else f"{len(classes)} classes"
    refusal = (
        f"{source}: {what} of column {cfg.label_column!r} do not suit --objective {cfg.objective} "
        f"--eval-metric {metric}"
    )
    # XGBoost checks [0, 1] for its logistic objectives only: binary:hinge trains on any labels.
    if cfg.objective == "reg:logistic" and not labels.between(0, 1).all():
        raise DataValidationError(f"{refusal}: it needs labels in [0, 1]")
    # One thread: starting XGBoost's pool would take longer than the check itself.
    train_set, val_set = (xgb.DMatrix(np.zeros((len(y), 1)), label=y, nthread=1) for y in (train, val))
    # With the part's numbers: the quantile_alpha some objectives need.
    params = {**cfg.booster_fields(), "objective": cfg.objective, "eval_metric": metric}
    if cfg.task == "multiclass":
        params["num_class"] = len(classes)
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


def _as_text(column: pd.Series) -> pd.Series:
    return as_written(column).astype("string")


def _examples(values: pd.Series) -> str:
    shown = ", ".join(f"{value!r} at row {row}" for row, value in values.head(3).items())
    return shown + (" ..." if len(values) > 3 else "")
