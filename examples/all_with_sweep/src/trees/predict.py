"""`python -m partN.predict` for trees: a run's model.ubj on a table, new rows or the run's own
(src/predict.py), read as training read its own by the model's TableEncoding."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from src.config import first_line
from src.errors import DataValidationError
from src.predict import PredictOptions
from src.trees.config import SLTreeConfig

if TYPE_CHECKING:  # XGBoost loads once the command line is read
    import xgboost as xgb


def predict_run(
    options: PredictOptions,
    config_cls: type[SLTreeConfig],
    source: ModuleType,
    load_model: Callable[[Path], xgb.Booster],
) -> dict[str, float]:
    """Predict and write the table `options` name; the metrics of the rows with a known label,
    printed and returned. `source` is the part's data module, `load_model` its model.load_model."""
    import pandas as pd
    import xgboost as xgb

    from src.predict import rows_to_predict, score_predictions
    from src.predictions import write_predictions
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
    table, where = rows_to_predict(
        options,
        list(encoding.feature_columns),
        lambda: part_function(source, "load_table", cfg, pd.DataFrame),
        cfg.data_path or f"{source.__name__}.load_table(cfg)",
    )
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
        truth = values.astype(object).reindex(table.index).to_numpy()
    predictions = predictions_table(model, encoding, features, truth)
    write_predictions(predictions, options.output)
    print(f"predictions of {len(predictions)} rows: {options.output}")
    return score_predictions(predictions, [label], encoding.classes)
