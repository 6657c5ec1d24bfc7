"""Where this part's rows come from.

`load_table(cfg)` returns one row per example: feature columns (numbers or text, with
missing values where need be) and the label column(s) `cfg.label_column`. The pipeline
checks, splits, encodes and serves it; to train on a table of your own, give
`--data-path` (CSV or Parquet) or change `load_table`.
"""

from __future__ import annotations

import pandas as pd
from sklearn.datasets import load_digits

from src.data_checks import read_table

from .config import DigitsConfig


def load_table(cfg: DigitsConfig) -> pd.DataFrame:
    if not cfg.data_path:
        return load_digits(as_frame=True).frame  # ships with scikit-learn: no download
    return read_table(cfg.data_path)


def value_range(cfg: DigitsConfig) -> tuple[float, float] | None:
    """The valid values of every feature column, where known: a pixel of the bundled digits
    is a number from 0 to 16. None for a table of your own, or one with text columns: its
    number columns are checked for finite values."""
    return None if cfg.data_path else (0.0, 16.0)
