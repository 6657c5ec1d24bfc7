"""A trained run's predictions for a table's rows (a part's predict.py is the command).

The run's model.pt holds the network and the encoding of its table (src/neural/encoding.py):
the rows are encoded as the training rows were, and the predictions written in the format
of the run's own test_predictions.csv (src/predictions.py), with the task's metrics
printed where the table holds the label. The model runs on the CPU unless asked otherwise,
wherever it was trained.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Annotated, Literal

import tyro

from src.errors import DataValidationError

if TYPE_CHECKING:
    import pandas as pd

    from src.neural.module import SupervisedModule

BATCH_ROWS = 65_536  # rows encoded and predicted at a time


@dataclasses.dataclass
class PredictOptions:
    """What `partN.predict` takes.

    Attributes:
        run_dir: The run directory whose model.pt predicts.
        data_path: CSV or Parquet table holding the run's feature columns, and its label
            column(s) where known; empty means the table the run trained on.
        output: CSV file the predictions go to: row (the row's position in the table),
            predicted_<label>, probability_<class> for a classifier, true_<label> where known.
        rows: all, or test: only the rows the run tested on (by their row in its
            test_predictions.csv), which gives its test metrics again from the same table.
        device: Where the model runs: cpu, or cuda (cuda:1 ...) where a GPU is visible.
    """

    run_dir: Annotated[Path, tyro.conf.Positional, tyro.conf.arg(metavar="RUN_DIR")]
    data_path: str = ""
    output: Path = Path("predictions.csv")
    rows: Literal["all", "test"] = "all"
    device: str = "cpu"


def parse_predict_options(
    argv: Sequence[str] | None = None, prog: str | None = None, description: str | None = None
) -> PredictOptions:
    # tyro joins a description's lines into one paragraph: only the summary reads well.
    summary = description.strip().split("\n\n")[0] if description else None
    return tyro.cli(PredictOptions, args=argv, prog=prog, description=summary)


def predict(
    options: PredictOptions, load_model: Callable[..., SupervisedModule], source: ModuleType
) -> pd.DataFrame:
    """Write the predictions of `options.run_dir`'s model (loaded with the part's `load_model`)
    for the table `options.data_path`, or the one the part's data module `source` loads for
    the run's config; print their metrics where the table holds the label. Bad input is a
    DataValidationError, one line."""
    import numpy as np
    import pandas as pd
    import torch

    from src.data_checks import read_table
    from src.predictions import PREDICTIONS_FILE, read_predictions, task_metrics, write_predictions
    from src.runs.checkpoint_checks import checkpoint_problem

    model_path = options.run_dir / "model.pt"
    if problem := checkpoint_problem(model_path):
        raise DataValidationError(
            f"{model_path} is {problem}: a run saves it as it ends; give a finished run"
        )
    device = _device(options.device)
    model = load_model(model_path, map_location=device)
    encoding = model.encoding
    if options.data_path:
        where, table = options.data_path, read_table(options.data_path)
    else:
        where, table = model.cfg.data_path or "the run's table", source.load_table(model.cfg)
    table = table.reset_index(drop=True)
    if missing := [name for name in encoding.features.columns if name not in table.columns]:
        raise DataValidationError(
            f"{where}: no column(s) {', '.join(map(str, missing))}, which the run's model reads "
            f"(it reads {', '.join(map(str, encoding.features.columns))})"
        )
    rows = np.arange(len(table))
    if options.rows == "test":
        rows = read_predictions(options.run_dir / PREDICTIONS_FILE)["row"].to_numpy()
        if len(rows) and rows.max() >= len(table):
            raise DataValidationError(
                f"{where}: {len(table)} rows, but the run tested row {rows.max()}: "
                "give the table it trained on"
            )
    selected = table.iloc[rows]
    inputs = encoding.features.transform(selected, where)
    with torch.inference_mode():
        outputs = np.concatenate(
            [
                model(torch.from_numpy(inputs[start : start + BATCH_ROWS]).to(device)).float().cpu().numpy()
                for start in range(0, len(inputs), BATCH_ROWS)
            ]
            or [np.empty((0, encoding.num_outputs), dtype=np.float32)]
        )
    labels = selected[encoding.targets] if set(encoding.targets) <= set(table.columns) else None
    if labels is not None and encoding.task == "regression":
        labels = labels.apply(pd.to_numeric, errors="coerce")  # text where a number belongs: unknown
    predicted = encoding.predictions(rows, outputs, labels)
    write_predictions(predicted, options.output)
    print(f"{options.output}: predictions of {len(predicted)} rows of {where}")
    if labels is not None:
        _print_metrics(predicted, encoding.targets, encoding.classes, task_metrics)
    return predicted


def _print_metrics(predicted: pd.DataFrame, targets: list[str], classes: list, metrics: Callable) -> None:
    """The task's metrics over the rows whose label is known (a classifier's: one of its classes)."""
    truth = [f"true_{name}" for name in targets]
    known = predicted[truth].notna().all(axis=1)
    if classes:
        known &= predicted[truth[0]].astype(str).isin([str(value) for value in classes])
    if not known.any():
        print(f"no row has a known {' and '.join(targets)}: no metrics")
        return
    print(f"metrics over the {known.sum()} rows with a known {' and '.join(targets)}:")
    for name, value in metrics(predicted[known]).items():
        print(f"  {name} {value:.6g}")


def _device(name: str) -> str:
    import torch

    try:
        device = torch.device(name)
    except RuntimeError:
        raise DataValidationError(
            f"--device {name}: not a device; use cpu, or cuda where a GPU is visible"
        ) from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise DataValidationError(f"--device {name}: no CUDA GPU is visible; use cpu")
    return name
