"""CB-4: `touch STOP` ends a run gracefully after the current epoch."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import lightning as L
from lightning.pytorch.utilities import rank_zero_info

from src.runs.directory import stop_requested


class StopFileCallback(L.Callback):
    """Checked between epochs: the epoch finishes, then checkpoints, cleanup and test run.

    The file is left in place (other runs and ranks see it too): delete it before
    the next run.
    """

    def __init__(self, paths: Sequence[Path]) -> None:
        self.paths = list(paths)

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        found = stop_requested(self.paths)
        # Any rank that sees the file stops them all, so DDP ranks never diverge.
        if trainer.strategy.reduce_boolean_decision(found is not None, all=False):
            trainer.should_stop = True
            rank_zero_info(f"STOP file {found}: stopping after epoch {trainer.current_epoch}")
