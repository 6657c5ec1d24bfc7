"""DATA-1: a user's table read and checked against its pandera schema before training; every
failure is collected and named (column, check, rows) in one error."""

from __future__ import annotations

import inspect
import os
import re
import stat
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pandas as pd
import pandera.pandas as pa

from src.errors import DataValidationError

# A column named as identifiers are: id, customer_id, "Customer ID", userId, userID.
IDENTIFIER_NAME = re.compile(r"(?i:(?:^|[_\s.-])id)$|[a-z](?:Id|ID)$")
MIN_ROWS_FOR_IDENTIFIERS = 20  # below it, distinct numbers are no sign of one


def data_path_problems(path: str | Path, needed_columns: Iterable[str] = ()) -> list[str]:
    """What makes `path` unusable as a table, told from the file system and its header alone:
    cheap enough for config validation, so a bad --data-path is refused before a run starts."""
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
    try:  # the names as written, repeats included, without the rows
        if reads_as_parquet(path):
            import pyarrow.parquet as pq  # an optional engine; without it, loading says so

            columns = list(pq.read_schema(path).names)
        else:  # header=None: the names as a row of values, which pandas leaves as they are
            columns = (
                pd.read_csv(path, header=None, nrows=1, dtype=str, keep_default_na=False).iloc[0].tolist()
            )
    except (ImportError, ValueError, OSError):  # pandas' parser and pyarrow errors are among them
        return []  # reading the rows will tell what is wrong, if anything
    # pandas renames a repeated column name ("a" then "a.1") and reads on: the rows of the
    # second would train under a name nobody gave them.
    if repeated := [name for name, count in Counter(columns).items() if count > 1 and name]:
        return [f"{where}: column(s) {', '.join(repeated)} named more than once in its header"]
    if missing := [name for name in dict.fromkeys(needed_columns) if name not in columns]:
        shown = ", ".join(columns[:20]) + (f" and {len(columns) - 20} more" if len(columns) > 20 else "")
        said = f"{where}: has no column(s) {', '.join(missing)} (its columns: {shown})"
        if len(columns) == 1 and (separator := next((s for s in ";\t|" if s in columns[0]), None)):
            said += (
                f"; it reads as one column: for a file separated by {separator!r}, read it in load_table "
                f"with pd.read_csv(path, sep={separator!r})"
            )
        return [said]
    return []


def reads_as_parquet(path: str | Path) -> bool:
    """A Parquet file by its name (.parquet) or, named otherwise (.pq, .parq), by its first bytes."""
    if Path(path).suffix.lower() == ".parquet":
        return True
    try:
        with open(path, "rb") as file:
            return file.read(4) == b"PAR1"
    except OSError:
        return False


def read_table(path: str | Path) -> pd.DataFrame:
    """A user's table from a CSV or Parquet file; a DataValidationError that names the file
    when it cannot be read as one."""
    if problems := data_path_problems(path):
        raise DataValidationError(problems[0])
    path = Path(path)
    try:
        return pd.read_parquet(path) if reads_as_parquet(path) else pd.read_csv(path)
    except UnicodeDecodeError as error:
        raise DataValidationError(
            f"--data-path {path}: is not UTF-8 text ({error.reason} at byte {error.start}): save it as "
            "UTF-8, or read it in load_table with pd.read_csv(path, encoding=...)"
        ) from None
    except ImportError:  # pandas reads Parquet through an optional engine
        raise DataValidationError(
            f"--data-path {path}: reading Parquet needs pyarrow (pip install pyarrow), or give a CSV file"
        ) from None
    except (ValueError, OSError) as error:  # unreadable files included
        reason = " ".join(str(error).split())  # pandas ends some messages with a line break
        raise DataValidationError(f"--data-path {path}: cannot read it as a table ({reason})") from None


def check_rows_and_feature_kinds(table: pd.DataFrame, features: list, where: str) -> None:
    """Refuse a table of no rows, feature columns of dates or times, which neither a network nor
    a booster reads as they are, a few words in a column of numbers (a typo, or a missing value
    spelled as pandas does not read it), which would make it a column of categories, and the
    row numbers a DataFrame wrote beside its columns."""
    if table.empty:
        raise DataValidationError(f"{where}: has no rows")
    kinds = (pd.api.types.is_datetime64_any_dtype, pd.api.types.is_timedelta64_dtype)
    if dated := [name for name in features if any(kind(table[name]) for kind in kinds)]:
        raise DataValidationError(
            f"{where}: column(s) {', '.join(map(repr, dated))} hold dates or times: make numbers of them "
            "in load_table (days since a date, the day of the week), or leave them out with --feature-columns"
        )

    for name in features:
        values = table[name].dropna()
        if pd.api.types.is_numeric_dtype(values) or pd.api.types.is_bool_dtype(values):
            continue
        words = values[pd.to_numeric(values, errors="coerce").isna()]
        if 0 < len(words) < len(values) / 2:
            shown = ", ".join(f"{word!r} at row {row}" for row, word in words.drop_duplicates()[:3].items())
            raise DataValidationError(
                f"{where}: column {name!r} holds numbers and text ({shown}); make those cells numbers, or "
                "empty for a missing value"
            )

    def row_numbers(column: pd.Series) -> bool:  # as pandas names a nameless header cell
        named = str(column.name).startswith("Unnamed: ") and pd.api.types.is_integer_dtype(column)
        return named and bool((column.to_numpy() == np.arange(len(column))).all())

    if written := [name for name in features if row_numbers(table[name])]:
        raise DataValidationError(
            f"{where}: column {written[0]!r} holds the row numbers 0, 1, 2 ... that pandas writes as a "
            "nameless first column (to_csv without index=False), not a feature: leave it out with "
            "--feature-columns, or write the file with index=False"
        )

    def numbers_rows(column: pd.Series) -> bool:  # customer_id, ID, userId: one number a row
        named = IDENTIFIER_NAME.search(str(column.name)) and pd.api.types.is_integer_dtype(column)
        return bool(named) and len(column) >= MIN_ROWS_FOR_IDENTIFIERS and column.is_unique

    if numbered := [name for name in features if numbers_rows(table[name])]:
        raise DataValidationError(
            f"{where}: column {numbered[0]!r} gives each of its {len(table)} rows a number of its own "
            f"({table[numbered[0]].iloc[0]}, ...): an identifier, not a feature to learn from: leave "
            "it out with --feature-columns"
        )


def refuse_identifiers(table: pd.DataFrame, text_columns: Iterable[str], where: str) -> None:
    """Refuse a text feature with a value for nearly every row: an identifier or a date, which
    one-hot codes or a booster's categories would learn by heart, row by row."""
    for name in text_columns:
        if (distinct := table[name].nunique()) > max(20, len(table) // 2):
            values = table[name].dropna().astype(str)
            dates = pd.to_datetime(values.iloc[:100], errors="coerce", format="ISO8601").notna().all()
            what = (
                "dates: make numbers of them in load_table (days since a date, the day of the week), or"
                if dates
                else "an identifier, not a category to learn from:"
            )
            raise DataValidationError(
                f"{where}: text column {name!r} has {distinct} distinct values in {len(table)} rows "
                f"({values.iloc[0]!r}, ...): {what} leave it out with --feature-columns"
            )


def as_written(column: pd.Series) -> pd.Series:
    """Whole numbers that pandas read as floats (a blank in the column makes them so) as a CSV
    holds them: 3, not 3.0, so that a category "3" stays "3"."""
    if pd.api.types.is_float_dtype(column) and (column.dropna() % 1 == 0).all():
        return column.astype("Int64")
    return column


def finite() -> pa.Check:
    """A pandera check that rejects inf, -inf and values beyond float32 (what torch and
    XGBoost train in, where they would become inf); nulls are the `nullable` flag's job."""
    largest = float(np.finfo(np.float32).max)  # inf and -inf lie beyond it
    return pa.Check.in_range(-largest, largest, error="finite (within float32's range, about 3.4e38)")


def validate_table(table: pd.DataFrame, schema: pa.DataFrameSchema, source: str) -> pd.DataFrame:
    """`table` if it matches `schema`; else one DataValidationError listing every failure: its
    column, check and a few of its values with their rows."""
    try:
        # In place on a shallow copy, which pandas copies on write: the caller's table stays as it
        # was, and only the columns coerced are new (pandera's default copies the whole table).
        return schema.validate(table.copy(deep=False), lazy=True, inplace=True)
    except pa.errors.SchemaErrors as errors:
        failures = errors.failure_cases
    lines = [f"{source}: the data does not match its schema ({len(failures)} problem(s))"]
    for (column, check), group in failures.groupby(["column", "check"], dropna=False, sort=False):
        column = "(table)" if pd.isna(column) else f"column '{column}'"
        examples = ", ".join(
            f"{value!r}" + ("" if pd.isna(row) else f" at row {int(row)}")
            for value, row in zip(group["failure_case"][:3], group["index"][:3], strict=True)
        )
        lines.append(f"  {column}: failed {check}" + (f" ({examples})" if examples else ""))
    raise DataValidationError("\n".join(lines))


def part_function(source: ModuleType, name: str, cfg: Any, returns: type) -> Any:
    """What `name(cfg)` of the part's module returns; one line where it breaks that contract."""
    module = getattr(source, "__name__", "data")
    function, wanted = getattr(source, name, None), f"{module}.{name}(cfg)"
    if not callable(function):
        where = getattr(source, "__file__", module)
        raise DataValidationError(f"{where}: no function {name}; the pipeline calls {wanted}")
    try:
        inspect.signature(function).bind(cfg)
    except TypeError as error:
        signature = f"{name}{inspect.signature(function)}"
        raise DataValidationError(f"{wanted}: {error} (it is {signature})") from None
    if not isinstance(result := function(cfg), returns):
        raise DataValidationError(f"{wanted} returned a {type(result).__name__}, not a {returns.__name__}")
    return result
