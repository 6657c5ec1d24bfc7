"""Sweep this part's hyperparameters (SWP-1): the search space, in W&B's format.

python -m part3.sweep --engine local --trials 3 --config smoke     # about a minute, no W&B server
python -m part3.sweep --engine local --trials 20 --max-hours 4     # a real local sweep
python -m part3.sweep --engine wandb --trials 20                   # a W&B sweep: more agents join it
"""

from __future__ import annotations

from src.sweep import SweepSpec, main

from .config import CONFIGS
from .train import main_with_config

# SWP-4: the `architecture` parameter picks a whole network shape: one value, several fields.
ARCHITECTURES = {
    "small": {"hidden_sizes": (64, 64)},
    "wide": {"hidden_sizes": (256, 256)},
    "deep": {"hidden_sizes": (64, 64, 64)},
}

SEARCH_SPACE = {
    "architecture": {"values": list(ARCHITECTURES)},
    "learning_rate": {"distribution": "log_uniform_values", "min": 3e-4, "max": 3e-3},
    "clip_epsilon": {"values": [0.1, 0.2, 0.3]},
    "ppo_epochs": {"values": [4, 10]},
    "gae_lambda": {"values": [0.8, 0.9, 0.95]},
}

SPEC = SweepSpec(
    configs=CONFIGS,
    space=SEARCH_SPACE,
    architectures=ARCHITECTURES,
    train=main_with_config,
    metric="best_val_episode_reward",  # chosen on evaluation episodes; test episodes are in each run
    goal="maximize",
)

if __name__ == "__main__":
    main(SPEC, prog=f"python -m {__package__}.sweep")
