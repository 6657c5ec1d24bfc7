"""DATA-1: validate input tables before training, naming the bad column.

Schemas are pandera DataFrameSchemas: dtypes, nulls, ranges and allowed values are
declared per column, and every failure is collected before one error is raised.
"""

from __future__ import annotations

import os
import stat
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd
import pandera.pandas as pa

from src.errors import DataValidationError


def data_path_problems(path: str | Path, needed_columns: Iterable[str] = ()) -> list[str]:
    """What makes `path` unusable as a table, from the file system and its header alone:
    cheap enough for config validation, so that a bad --data-path is refused before a run
    directory exists. Empty when nothing is wrong that can be told without reading rows."""
    where = f"--data-path {path}"
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return [f"{where}: no such file"]
    except OSError as error:  # a name the file system refuses (too long), a parent that is a file...
        return [f"{where}: {error.strerror.lower()}"]
    if stat.S_ISDIR(mode):
        return [f"{where}: is a folder; give a CSV or Parquet file"]
    if not stat.S_ISREG(mode):
        # A FIFO would block the reader until something writes to it, and is gone once read.
        return [f"{where}: is not a regular file (a FIFO, socket or device); give a CSV or Parquet file"]
    try:
        with open(path, "rb") as file:
            empty = not file.read(1)
    except OSError as error:
        return [f"{where}: cannot be read ({error.strerror})"]
    if empty:
        return [f"{where}: cannot read it as a table (the file is empty)"]
    if (columns := header_columns(path)) is None:
        return []  # reading the rows will tell what is wrong, if anything
    # pandas renames a repeated column name ("a" then "a.1") and reads on: the rows of the
    # second would train under a name nobody gave them.
    if repeated := [name for name, count in Counter(columns).items() if count > 1 and name]:
        return [f"{where}: column(s) {', '.join(repeated)} named more than once in its header"]
    if missing := [name for name in dict.fromkeys(needed_columns) if name not in columns]:
        shown = ", ".join(columns[:20]) + (f" and {len(columns) - 20} more" if len(columns) > 20 else "")
        return [f"{where}: has no column(s) {', '.join(missing)} (its columns: {shown})"]
    return []


def header_columns(path: str | Path) -> list[str] | None:
    """The column names a table's file gives, as written (repeats included), read without
    its rows; None where that is not cheap or the file does not parse."""
    path = Path(path)
    try:
        if path.suffix == ".parquet":
            import pyarrow.parquet as pq  # an optional engine; without it, loading says so

            return list(pq.read_schema(path).names)
        # header=None: the names as a row of values, which pandas leaves as they are.
        header = pd.read_csv(path, header=None, nrows=1, dtype=str, keep_default_na=False)
    except (ImportError, ValueError, OSError):  # pandas' parser and pyarrow errors are among them
        return None
    return header.iloc[0].tolist()


def read_table(path: str | Path) -> pd.DataFrame:
    """A user's table from a CSV or Parquet file; a missing, empty or unreadable file, or
    one that is not a regular file, is a DataValidationError that names it."""
    if problems := data_path_problems(path):
        raise DataValidationError(problems[0])
    path = Path(path)
    try:
        return pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path)
    except ImportError:  # pandas reads Parquet through an optional engine
        raise DataValidationError(
            f"--data-path {path}: reading Parquet needs pyarrow (pip install pyarrow), or give a CSV file"
        ) from None
    except (ValueError, OSError) as error:  # unreadable files included
        reason = " ".join(str(error).split())  # pandas ends some messages with a line break
        raise DataValidationError(f"--data-path {path}: cannot read it as a table ({reason})") from None


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
