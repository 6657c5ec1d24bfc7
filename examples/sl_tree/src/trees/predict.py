"""`python -m partN.predict`: a trained tree run's model on a table, new rows or the run's
own, written as a predictions file (src/predictions.py), with the task's metrics where
the table holds labels. The model file keeps what reading a table needs (TableEncoding:
the feature columns, the categories of text columns, a classifier's classes), so new rows
are read as training read its own.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Annotated, Literal

import tyro

from src.config import first_line
from src.errors import DataValidationError
from src.trees.config import SLTreeConfig

if TYPE_CHECKING:  # pandas and XGBoost load once the command line is read
    import xgboost as xgb


@dataclass
class PredictOptions:
    """What `partN.predict` takes.

    Attributes:
        run_dir: The training run's directory: its model.ubj predicts; its config.json says
            where the run's own table comes from.
        data_path: CSV or Parquet table to predict, with the model's feature columns (others
            are left out) and, to score the predictions, its label column; empty: the run's
            own table.
        output: CSV file the predictions go to: row (the row's position in the table),
            predicted_<label>, probability_<class> for a classifier, true_<label> where known.
        rows: all predicts every row of the table; test only the rows the run tested on (the
            rows of its test_predictions.csv), which gives the run's test metrics again.
    """

    run_dir: Annotated[Path, tyro.conf.Positional, tyro.conf.arg(metavar="RUN_DIR")]
    data_path: str = ""
    output: Path = Path("predictions.csv")
    rows: Literal["all", "test"] = "all"


def parse_options(
    argv: Sequence[str] | None = None, prog: str | None = None, description: str | None = None
) -> PredictOptions:
    summary = description.strip().split("\n\n")[0] if description else None  # tyro joins the lines
    return tyro.cli(PredictOptions, args=argv, prog=prog, description=summary)


def predict_run(
    options: PredictOptions,
    config_cls: type[SLTreeConfig],
    source: ModuleType,
    load_model: Callable[[Path], xgb.Booster],
) -> dict[str, float]:
    """Predict the table `options` name with the run's model and write the predictions;
    the task's metrics of the rows with a known label, printed and returned. `source` is
    the part's data module, `load_model` its model.load_model."""
    import pandas as pd
    import xgboost as xgb

    from src.data_checks import read_table
    from src.predictions import PREDICTIONS_FILE, read_predictions, task_metrics, write_predictions
    from src.trees.booster import predictions_table
    from src.trees.config import xgboost_says
    from src.trees.data import TableEncoding, class_values, part_function

    run_dir = options.run_dir
    config_path, model_path = run_dir / "config.json", run_dir / "model.ubj"
    for needed in (config_path, model_path):
        if not needed.is_file():
            raise DataValidationError(
                f"{run_dir}: has no {needed.name}; give the directory of a finished run"
            )
    try:
        cfg = config_cls.from_json(config_path.read_text())
    except (ValueError, TypeError) as error:
        raise DataValidationError(
            f"{config_path}: not a {config_cls.__name__}: {first_line(error)}"
        ) from None
    try:
        model = load_model(model_path)
    except xgb.core.XGBoostError as error:
        raise DataValidationError(f"{model_path}: does not load: {xgboost_says(error)}") from None
    model.set_param({"device": "cpu", "nthread": cfg.num_threads})  # a model a GPU trained, too
    encoding = TableEncoding.of(model, str(model_path))
    if options.data_path:
        table, where = read_table(options.data_path), f"--data-path {options.data_path}"
    else:
        table = part_function(source, "load_table", cfg, pd.DataFrame)
        where = cfg.data_path or f"{source.__name__}.load_table(cfg)"
    table = table.reset_index(drop=True)  # a row's index is its position: the files' `row`
    if missing := [name for name in encoding.feature_columns if name not in table.columns]:
        raise DataValidationError(
            f"{where}: has no column(s) {', '.join(missing)}; the model reads "
            f"{', '.join(encoding.feature_columns)}"
        )
    if options.rows == "test":
        tested = read_predictions(run_dir / PREDICTIONS_FILE)["row"]
        if not tested.between(0, len(table) - 1).all():
            raise DataValidationError(
                f"{where}: has {len(table)} rows, and the run tested on rows up to {tested.max()}; "
                "--rows test needs the table the run was trained on"
            )
        table = table.loc[tested]
    features = encoding.features(table, where)
    for name in encoding.categories:  # read as missing: say so
        if (unseen := table[name][features[name].isna() & table[name].notna()]).size:
            shown = ", ".join(map(str, unseen.unique()[:5]))
            print(f"column {name!r}: {unseen.size} row(s) hold values training never saw ({shown}): missing")
    label = encoding.label_column
    truth = None
    if label in table.columns:
        known = table[label].dropna()
        values = pd.to_numeric(known, errors="coerce") if encoding.classes is None else class_values(known)
        values = values.astype(object)
        truth = values.reindex(table.index).to_numpy()
    predictions = predictions_table(model, encoding, features, truth)
    write_predictions(predictions, options.output)
    print(f"predictions of {len(predictions)} rows: {options.output}")
    if truth is None:
        return {}
    scored = predictions[predictions[f"true_{label}"].notna()]
    if encoding.classes is not None:
        classes = set(map(str, encoding.classes))
        if unknown := sorted(set(scored[f"true_{label}"].astype(str)) - classes):
            print(f"column {label!r}: classes the model does not know ({', '.join(unknown[:5])}); not scored")
            scored = scored[scored[f"true_{label}"].astype(str).isin(classes)]
    if scored.empty:
        return {}
    metrics = task_metrics(scored)
    print(
        f"{len(scored)} rows with a label: "
        + " | ".join(f"{key} {value:.4g}" for key, value in metrics.items())
    )
    return metrics
