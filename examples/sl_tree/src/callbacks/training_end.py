"""RES-1: a run killed after its training ended (during the test or the final save)
resumes to do only what remains, never to train further."""

from __future__ import annotations

from pathlib import Path

import lightning as L
from lightning.pytorch.utilities import rank_zero_info

from src.runs.lifetime import mark_training_ended, training_ended


class TrainingEndCallback(L.Callback):
    """Records in run.json that fit() ended normally (early stopping, the epoch limit,
    the budget or a STOP file). A resumed fit of such a run stops before its first step;
    Lightning restores the checkpoint callbacks, so test(ckpt_path="best") still works."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if training_ended(self.run_dir):
            rank_zero_info("this run's training ended in an earlier session: only testing and saving remain")
            trainer.should_stop = True

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.is_global_zero:
            mark_training_ended(self.run_dir)
