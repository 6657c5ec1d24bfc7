"""Sweep this part's hyperparameters (SWP-1): the search space, in W&B's format.

python -m part1.sweep --engine local --trials 3 --config smoke     # seconds, no W&B server
python -m part1.sweep --engine local --trials 30 --max-hours 6     # a real local sweep
python -m part1.sweep --engine wandb --trials 30                   # a W&B sweep: more agents join it
"""

from __future__ import annotations

from src.sweep import SweepSpec, main

from .config import CONFIGS
from .train import main_with_config

# SWP-4: the `architecture` parameter picks a whole network shape: one value, several fields.
ARCHITECTURES = {
    "small": {"hidden_sizes": (128,)},
    "medium": {"hidden_sizes": (256, 128)},
    "large": {"hidden_sizes": (512, 256, 128)},
}

SEARCH_SPACE = {
    "architecture": {"values": list(ARCHITECTURES)},
    "learning_rate": {"distribution": "log_uniform_values", "min": 1e-4, "max": 3e-3},
    "dropout": {"values": [0.0, 0.1, 0.2, 0.3]},
    "batch_size": {"values": [32, 64, 128]},
    "weight_decay": {"values": [0.0, 0.01, 0.05]},
}

SPEC = SweepSpec(
    configs=CONFIGS,
    space=SEARCH_SPACE,
    architectures=ARCHITECTURES,
    train=main_with_config,
    metric="best_val_loss",  # chosen on validation; each trial's test metrics are in its run directory
    goal="minimize",
)

if __name__ == "__main__":
    main(SPEC, prog=f"python -m {__package__}.sweep")
