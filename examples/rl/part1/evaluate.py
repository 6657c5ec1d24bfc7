"""Play a trained run's policy: the mean and spread of its episode rewards, and their lengths.

Usage (`--help` lists every option):
python -m part1.evaluate RUN_DIR                                  # the run's test episodes again
python -m part1.evaluate RUN_DIR --episodes 100 --output evaluation.json
"""

from __future__ import annotations

from src.cli import exit_on_bad_input, parse_options
from src.rl.evaluate import EvaluateOptions, evaluate_run


def main() -> None:
    options = parse_options(EvaluateOptions, prog="python -m part1.evaluate", description=__doc__)
    # Here, not at the top: torch and TorchRL take seconds to load, and --help answers before.
    from part1 import data
    from part1.model import load_model_from_checkpoint

    with exit_on_bad_input():
        evaluate_run(options, data, load_model_from_checkpoint)


if __name__ == "__main__":
    main()
