"""A trained run's predictions for a table's rows (a part's predict.py is the command): its
model.pt holds the network and its table's encoding, so that rows are encoded as in training."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING

from src.errors import DataValidationError
from src.predict import PredictOptions

if TYPE_CHECKING:
    from src.neural.module import SupervisedModule

BATCH_ROWS = 65_536  # rows encoded and predicted at a time


@dataclass
class NeuralPredictOptions(PredictOptions):
    """What `partN.predict` takes for a network.

    Attributes:
        device: Where the model runs: cpu, or cuda (cuda:1 ...) where a GPU is visible.
    """

    device: str = "cpu"


def predict(
    options: NeuralPredictOptions, load_model: Callable[..., SupervisedModule], source: ModuleType
) -> dict[str, float]:
    """Write the predictions of the run's model (the part's `load_model` loads it) for the table
    `options.data_path`, or the one the part's data module `source` loads for the run's config,
    in the format of test_predictions.csv; their metrics where the table holds the label."""
    import pandas as pd
    import torch

    from src.neural.encoding import as_text
    from src.predict import rows_to_predict, say_unseen_values, score_predictions
    from src.predictions import class_values, write_predictions
    from src.runs.checkpoint_checks import checkpoint_problem
    from src.runs.directory import another_parts_run

    if other := another_parts_run(options.run_dir, source.__name__.partition(".")[0], "predict"):
        raise DataValidationError(other)
    model_path = options.run_dir / "model.pt"
    if problem := checkpoint_problem(model_path):
        raise DataValidationError(
            f"{model_path} is {problem}: a run saves it as it ends; give a finished run"
        )
    try:
        device = torch.device(options.device)
    except RuntimeError:
        device = None
    if device is None or device.type not in ("cpu", "cuda", "mps"):  # meta, say, holds no numbers
        raise DataValidationError(
            f"--device {options.device}: not a device to predict on; use cpu, or cuda where a GPU is visible"
        )
    if device.type == "cuda" and not torch.cuda.is_available():
        raise DataValidationError(f"--device {options.device}: no CUDA GPU is visible; use cpu")
    if device.type == "mps" and not torch.backends.mps.is_available():
        raise DataValidationError(f"--device {options.device}: this machine has no Apple GPU; use cpu")
    model = load_model(model_path, map_location=options.device)
    encoding = model.encoding
    table, where = rows_to_predict(
        options,
        list(encoding.features.columns),
        lambda: source.load_table(model.cfg),
        model.cfg.data_path or "the run's table",
    )
    inputs = torch.from_numpy(encoding.features.transform(table, where))
    for name, seen in zip(encoding.features.text, encoding.features.categories, strict=True):
        values = pd.Series(as_text(table[name]))
        say_unseen_values(name, values[~values.isin(seen)], "read as none of the values it saw")
    with torch.inference_mode():  # an empty table is one batch of no rows
        outputs = torch.cat([model(batch.to(device)).float().cpu() for batch in inputs.split(BATCH_ROWS)])
    labels = table[encoding.targets] if set(encoding.targets) <= set(table.columns) else None
    if labels is not None and encoding.task == "regression":
        labels = labels.apply(pd.to_numeric, errors="coerce")  # text where a number belongs: unknown
    elif labels is not None:  # the classes as training read them, whether or not a label is blank
        labels = labels.apply(lambda known: class_values(known.dropna()).astype(object).reindex(known.index))
    predicted = encoding.predictions(table.index.to_numpy(), outputs.numpy(), labels)
    write_predictions(predicted, options.output)
    print(f"predictions of {len(predicted)} rows: {options.output}")
    return score_predictions(predicted, encoding.targets, encoding.classes or None)
