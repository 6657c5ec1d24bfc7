"""Predict with a trained run's model: its model.ubj, which keeps the classes and the text
columns' categories it was trained with, on a table of new rows or the run's own.

Usage (`--help` lists every option):
python -m part1.predict RUN_DIR --data-path new.csv --output predictions.csv
python -m part1.predict RUN_DIR --rows test   # the run's test rows: its test metrics again
"""

from __future__ import annotations

from part1.config import DiabetesConfig
from src.cli import exit_on_bad_input, parse_options
from src.predict import PredictOptions


def main() -> None:
    options = parse_options(PredictOptions, prog="python -m part1.predict", description=__doc__)
    # Here, not at the top: XGBoost and pandas take seconds to load, and --help answers before.
    from part1 import data
    from part1.model import load_model
    from src.trees.booster import predict_run

    with exit_on_bad_input():
        predict_run(options, DiabetesConfig, data, load_model)


if __name__ == "__main__":
    main()
