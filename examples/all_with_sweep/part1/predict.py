"""Predict with a trained run of this part: its model.pt, for a table's rows.

The predictions CSV has the format of the run's test_predictions.csv; where the table
holds the label, the task's metrics are printed too.

python -m part1.predict RUN_DIR --data-path new.csv --output predictions.csv
python -m part1.predict RUN_DIR --rows test   # the run's test metrics again
"""

from __future__ import annotations

from src.cli import exit_on_bad_input, parse_options
from src.neural.predict import NeuralPredictOptions, predict


def main() -> None:
    options = parse_options(NeuralPredictOptions, prog="python -m part1.predict", description=__doc__)
    with exit_on_bad_input():
        # Here, not at the top: torch takes seconds to load, and --help answers before.
        from part1 import data
        from part1.model import load_model_from_checkpoint

        predict(options, load_model_from_checkpoint, data)


if __name__ == "__main__":
    main()
