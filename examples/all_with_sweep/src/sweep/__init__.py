"""Hyperparameter sweeps for every part (SWP-1..7): one search space, two engines.

A part's sweep.py writes its search space once, in W&B's sweep format. `--engine wandb`
hands it to a W&B sweep, whose agents can run on many machines; `--engine local` samples
it with Optuna, with no W&B server. Every trial is a normal run in the sweep's folder,
trained in-process by the part's `main_with_config()` (SWP-2); `--resume` continues a
killed local sweep from that folder's records (RES-1).
"""

from src.sweep.command import SweepOptions, main
from src.sweep.spec import SweepSpec

__all__ = ["SweepOptions", "SweepSpec", "main"]
