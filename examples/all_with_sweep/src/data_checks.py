"""DATA-1: validate input tables before training, naming the bad column.

Schemas are pandera DataFrameSchemas: dtypes, nulls, ranges and allowed values are
declared per column, and every failure is collected before one error is raised.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pandera.pandas as pa

from src.errors import DataValidationError


def read_table(path: str | Path) -> pd.DataFrame:
    """A user's table from a CSV or Parquet file; a missing, empty or unreadable file
    is a DataValidationError that names it."""
    path = Path(path)
    try:
        found = path.is_file()
    except OSError as error:  # a name the file system refuses: too long, say
        raise DataValidationError(f"--data-path {path}: {error.strerror.lower()}") from None
    if not found:
        raise DataValidationError(f"--data-path {path}: no such file")
    try:
        return pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path)
    except ImportError:  # pandas reads Parquet through an optional engine
        raise DataValidationError(
            f"--data-path {path}: reading Parquet needs pyarrow (pip install pyarrow), or give a CSV file"
        ) from None
    except (ValueError, OSError) as error:  # empty or unreadable files included
        raise DataValidationError(f"--data-path {path}: cannot read it as a table ({error})") from None


FLOAT32_MAX = float(np.finfo(np.float32).max)


def finite() -> pa.Check:
    """A pandera check that rejects inf, -inf and values beyond float32 (what torch and
    XGBoost train in, where they would become inf); nulls are the `nullable` flag's job."""
    return pa.Check(
        lambda column: ~np.isinf(column) & (column.abs() <= FLOAT32_MAX),
        element_wise=False,
        error="finite (within float32's range, about 3.4e38)",
    )


def validate_table(table: pd.DataFrame, schema: pa.DataFrameSchema, source: str) -> pd.DataFrame:
    """Return `table` if it matches `schema`, else raise one DataValidationError listing
    every failure: column, check and a few offending values with their rows."""
    try:
        return schema.validate(table, lazy=True)
    except pa.errors.SchemaErrors as errors:
        raise DataValidationError(_describe(errors.failure_cases, source)) from None


def _describe(failures: pd.DataFrame, source: str) -> str:
    lines = [f"{source}: the data does not match its schema ({len(failures)} problem(s))"]
    for (column, check), group in failures.groupby(["column", "check"], dropna=False, sort=False):
        column = "(table)" if pd.isna(column) else f"column '{column}'"
        examples = ", ".join(
            f"{value!r}" + ("" if pd.isna(row) else f" at row {int(row)}")
            for value, row in zip(group["failure_case"][:3], group["index"][:3], strict=True)
        )
        lines.append(f"  {column}: failed {check}" + (f" ({examples})" if examples else ""))
    return "\n".join(lines)
