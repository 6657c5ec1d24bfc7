"""What every supervised part's `python -m partN.predict` shares: its options, the rows to
predict, and the metrics of the predictions (in a run's test_predictions.csv format) whose
label is known."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

import tyro

from src.errors import DataValidationError

if TYPE_CHECKING:  # pandas loads once the command line is read
    import pandas as pd


@dataclass
class PredictOptions:
    """What `partN.predict` takes.

    Attributes:
        run_dir: The training run's directory, whose saved model predicts.
        data_path: CSV or Parquet table with the model's feature columns (others are left
            out) and, to score the predictions, its label column(s); empty: the run's own table.
        output: CSV file the predictions go to (Parquet where its name ends in .parquet): row
            (the row's position in the table), predicted_<label>, probability_<class> for a
            classifier, true_<label> where known.
        rows: all predicts every row of the table; test only the rows the run tested on (the
            rows of its test_predictions.csv), which gives the run's test metrics again.
    """

    run_dir: Annotated[Path, tyro.conf.Positional, tyro.conf.arg(metavar="RUN_DIR")]
    data_path: str = ""
    output: Path = Path("predictions.csv")
    rows: Literal["all", "test"] = "all"


def rows_to_predict(
    options: PredictOptions,
    feature_columns: list[str],
    run_table: Callable[[], pd.DataFrame],
    run_table_name: str,
) -> tuple[pd.DataFrame, str]:
    """The rows of the table `options` name (`run_table()` when none is), indexed by their
    position, and how messages name the table; a DataValidationError where they do not fit."""
    from src.data_checks import read_table
    from src.predictions import PREDICTIONS_FILE, read_predictions
    from src.runs.directory import refuse_run_file

    with contextlib.suppress(OSError):  # either is missing: not the same file
        if os.path.samefile(options.output, options.data_path or run_table_name):
            raise DataValidationError(
                f"--output {options.output}: is the table the rows come from; writing the predictions "
                "there would replace it: give another file"
            )
    refuse_run_file(options.output, options.run_dir, "predictions")
    if options.data_path:
        table, where = read_table(options.data_path), f"--data-path {options.data_path}"
    else:
        table, where = run_table(), run_table_name
    table = table.reset_index(drop=True)  # a row's index is its position: the files' `row`
    if missing := [str(name) for name in feature_columns if name not in table.columns]:
        read = ", ".join(map(str, feature_columns))
        raise DataValidationError(f"{where}: has no column(s) {', '.join(missing)}; the model reads {read}")
    if options.rows == "test":
        recorded = read_predictions(options.run_dir / PREDICTIONS_FILE)
        tested = recorded["row"]
        if not tested.between(0, len(table) - 1).all():
            raise DataValidationError(
                f"{where}: has {len(table)} rows, and the run tested on rows up to {tested.max()}; "
                "--rows test needs the table the run was trained on"
            )
        table = table.loc[tested]
        if other := _labels_tested_otherwise(table, recorded):
            row, label = other
            raise DataValidationError(
                f"{where}: row {row} holds another {label} than the row the run tested there; "
                "--rows test takes the rows by their place in the table the run trained on, and this "
                "table is another one, or that one reordered: give that table, or --rows all"
            )
    return table, where


def _labels_tested_otherwise(table: pd.DataFrame, recorded: pd.DataFrame) -> tuple[int, str] | None:
    """The first of the run's test rows whose label in `table` differs from the one the run
    recorded in its test_predictions.csv (`recorded`), and that label; None when each is the same."""
    import numpy as np
    import pandas as pd

    from src.data_checks import as_written

    for column in [name for name in recorded.columns if name.startswith("true_")]:
        if (label := column.removeprefix("true_")) not in table.columns:
            continue
        given, tested = table[label].reset_index(drop=True), recorded[column]
        numbers = pd.to_numeric(given, errors="coerce"), pd.to_numeric(tested, errors="coerce")
        if numbers[0].notna().all() and numbers[1].notna().all():
            same = np.isclose(numbers[0], numbers[1], rtol=1e-6)
        else:
            same = as_written(given).astype(str).to_numpy() == as_written(tested).astype(str).to_numpy()
        if not same.all():
            return int(recorded["row"].iloc[int(np.argmin(same))]), label
    return None


def say_unseen_values(column: str, unseen: pd.Series, read_as: str) -> None:
    """One line for a text column whose rows hold values training never saw (`unseen`), and
    how the model reads them."""
    if unseen.size:
        shown = ", ".join(map(str, unseen.unique()[:5]))
        print(f"column {column!r}: {unseen.size} row(s) hold values training never saw ({shown}): {read_as}")


def score_predictions(predicted: pd.DataFrame, labels: list[str], classes: list | None) -> dict[str, float]:
    """The task's metrics over the rows whose label is known (one of a classifier's `classes`),
    printed on one line and returned."""
    from src.predictions import task_metrics

    truth = [f"true_{name}" for name in labels]
    if not set(truth) <= set(predicted.columns):
        return {}
    scored = predicted[predicted[truth].notna().all(axis=1)]
    if classes is not None:
        known = set(map(str, classes))
        if unknown := sorted(set(scored[truth[0]].astype(str)) - known):
            shown = ", ".join(unknown[:5])
            print(f"column {labels[0]!r}: classes the model does not know ({shown}); not scored")
            scored = scored[scored[truth[0]].astype(str).isin(known)]
    if scored.empty:
        print(f"no row has a known {' and '.join(labels)}: no metrics")
        return {}
    metrics = task_metrics(scored)
    print(
        f"{len(scored)} rows with a known {' and '.join(labels)}: "
        + " | ".join(f"{name} {value:.6g}" for name, value in metrics.items())
    )
    return metrics
