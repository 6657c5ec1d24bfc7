"""Hyperparameter sweeps for every part (SWP-1..7): one search space, two engines.

    python -m partN.sweep --engine local --trials 20 --config baseline --max-hours 8
    python -m partN.sweep --engine local --config baseline --resume auto   # continue it after a crash
    python -m partN.sweep --engine wandb --trials 20 --config baseline   # a new W&B sweep and its first agent
    python -m partN.sweep --engine wandb --sweep-id ENTITY/PROJECT/ID    # one more agent, on any machine

A part's sweep.py writes its search space once, in W&B's sweep format. The `wandb`
engine hands it to a W&B sweep, whose agents can run on many machines at once. The
`local` engine samples the same space with Optuna, in this process and with no W&B
server (W&B offline or disabled), so a sweep also runs, and is tested, anywhere.
Every trial is a normal run in the sweep's folder, trained in-process by the
part's `main_with_config()` (SWP-2).

A sweep's folder holds sweep.json (what it is and how far it got), config.json (the
base config), trials.jsonl (a line per ended trial) and summary.md (rewritten after
every trial). From them `--resume` continues a local sweep that was killed (RES-1).
"""

from src.sweep.command import SweepOptions, main
from src.sweep.spec import SweepSpec

__all__ = ["SweepOptions", "SweepSpec", "main"]
