"""Hyperparameter sweeps (SWP-1..7): a part's sweep.py writes its search space once, in W&B's
format; `--engine wandb` runs it as a W&B sweep, `--engine local` samples it with Optuna. Every
trial is a normal run in the sweep's folder, trained in-process by `main_with_config()`."""

from src.sweep.command import SweepOptions, main
from src.sweep.spec import SweepSpec

__all__ = ["SweepOptions", "SweepSpec", "main"]
