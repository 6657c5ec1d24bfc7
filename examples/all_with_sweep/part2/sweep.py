"""Sweep this part's hyperparameters (SWP-1): the search space, in W&B's format.

python -m part2.sweep --engine local --trials 3 --config smoke     # seconds, no W&B server
python -m part2.sweep --engine local --trials 50 --max-hours 2     # a real local sweep
python -m part2.sweep --engine wandb --trials 50                   # a W&B sweep: more agents join it
"""

from __future__ import annotations

from src.runs.metrics_jsonl import higher_is_better
from src.sweep import SweepSpec, main

from .config import CONFIGS
from .train import main_with_config

# SWP-4: the `architecture` parameter picks a whole tree shape: one value, several fields.
ARCHITECTURES = {
    "stumps": {"max_depth": 1, "min_child_weight": 1.0},
    "shallow": {"max_depth": 2, "min_child_weight": 5.0},
    "deep": {"max_depth": 5, "min_child_weight": 10.0},
}

SEARCH_SPACE = {
    "architecture": {"values": list(ARCHITECTURES)},
    "learning_rate": {"distribution": "log_uniform_values", "min": 0.01, "max": 0.3},
    "subsample": {"values": [0.7, 0.85, 1.0]},
    "colsample_bytree": {"values": [0.7, 1.0]},
    "reg_lambda": {"distribution": "log_uniform_values", "min": 0.1, "max": 10.0},
}

SPEC = SweepSpec(
    configs=CONFIGS,
    space=SEARCH_SPACE,
    architectures=ARCHITECTURES,
    train=main_with_config,
    # Chosen on validation by the config's eval metric (best_val_rmse, best_val_mlogloss...),
    # never on test; each trial's test metrics are in its metrics.json.
    metric=lambda cfg: f"best_val_{cfg.watched_metric}",
    goal=lambda cfg: "maximize" if higher_is_better(cfg.watched_metric) else "minimize",
)

if __name__ == "__main__":
    main(SPEC, prog=f"python -m {__package__}.sweep")
