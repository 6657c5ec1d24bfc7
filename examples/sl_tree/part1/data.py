"""Data of this part: load, validate (DATA-1) and split a table.

To train on your own data, set `--data-path your.csv` with `--feature-columns`
and `--label-column`, or replace `load_table()`.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import pandera.pandas as pa
from sklearn.datasets import load_diabetes
from sklearn.model_selection import train_test_split

from src.data_checks import DataValidationError, finite, read_table, validate_table

from .config import DiabetesConfig


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
    return Split(train_x, train_y, val_x, val_y, test_x, test_y)
