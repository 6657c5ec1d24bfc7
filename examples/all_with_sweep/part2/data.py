"""Where this part's rows come from (one per example, with the config's label column and
the features), and which values of the bundled data are valid. The pipeline checks and
splits them; for a table of your own give `--data-path`, or change `load_table`."""

from __future__ import annotations

import pandas as pd
import pandera.pandas as pa
from sklearn.datasets import load_diabetes

from src.data_checks import read_table

from .config import DiabetesConfig


def load_table(cfg: DiabetesConfig) -> pd.DataFrame:
    if not cfg.data_path:
        return load_diabetes(as_frame=True, scaled=False).frame  # ships with scikit-learn: no download
    return read_table(cfg.data_path)


def column_checks(cfg: DiabetesConfig) -> dict[str, list[pa.Check]]:
    """DATA-1: the valid values of the bundled table's columns (scikit-learn's raw,
    unscaled diabetes data), by column name. A table of your own is checked by what it
    holds (finite numbers, a label that suits the objective); return its own columns'
    checks here to check more."""
    if cfg.data_path:
        return {}
    return {
        "age": [pa.Check.in_range(0, 120)],
        "sex": [pa.Check.isin([1, 2])],
        "bmi": [pa.Check.in_range(10, 80)],
        "bp": [pa.Check.in_range(30, 250)],
        **{blood_serum: [pa.Check.ge(0)] for blood_serum in ("s1", "s2", "s3", "s4", "s5", "s6")},
        "target": [pa.Check.ge(0)],
    }
