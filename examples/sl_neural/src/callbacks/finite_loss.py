"""A run whose loss stops being a number fails, saying where, instead of stopping quietly."""

from __future__ import annotations

import math
from typing import Any

import lightning as L

from src.errors import TrainingDiverged


class FiniteLossCallback(L.Callback):
    """Raises TrainingDiverged once the training loss, or the monitored validation
    metric, is not finite. The training loss is read at the steps Lightning logs (every
    log_every_n_steps) and before any checkpoint is saved, so the non-finite weights a
    diverged step leaves behind are never saved."""

    def __init__(self, monitor: str = "val_loss") -> None:
        self.monitor = monitor

    def on_train_batch_end(
        self, trainer: L.Trainer, pl_module: L.LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        # Not every step: on a GPU each read waits for the step to finish. The loggers read
        # the loss at these steps anyway, and the weights stay non-finite once they are.
        if trainer._logger_connector.should_update_logs:
            self._check_training_loss(trainer)

    def on_save_checkpoint(self, trainer: L.Trainer, pl_module: L.LightningModule, checkpoint: dict) -> None:
        self._check_training_loss(trainer)  # raised before a byte of the checkpoint is written

    def _check_training_loss(self, trainer: L.Trainer) -> None:
        metrics = trainer.callback_metrics
        loss = metrics.get("train_loss_step", metrics.get("train_loss"))
        if loss is not None and not math.isfinite(float(loss)):
            self._diverged(trainer, "training loss", float(loss))

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        value = trainer.callback_metrics.get(self.monitor)
        if not trainer.sanity_checking and value is not None and not math.isfinite(float(value)):
            self._diverged(trainer, self.monitor, float(value))

    @staticmethod
    def _diverged(trainer: L.Trainer, what: str, value: float) -> None:
        now = f" (now {trainer.optimizers[0].param_groups[0]['lr']:g})" if trainer.optimizers else ""
        raise TrainingDiverged(
            f"training diverged: the {what} is {value} at epoch {trainer.current_epoch}, "
            f"step {trainer.global_step}; checkpoints from before it are kept. Lower the learning "
            f"rate{now} or look for extreme values in the data."
        )
