"""RES-1: checkpoints/last.ckpt rewritten mid-epoch, so a kill loses minutes, not an epoch."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import lightning as L


class PeriodicCheckpointCallback(L.Callback):
    """Rewrites `path` every `every_n_steps` training steps and every `minutes` since the
    last checkpoint of any kind (0 turns either off), and when training ends after the
    last one, so that it always holds the latest step. A step is an optimizer step, or a
    whole batch where the module optimizes by hand (RL), as metrics.jsonl counts them.

    Lightning's ModelCheckpoint has both triggers, but ignores the time one under manual
    optimization and takes it between accumulated batches, whose gradients no checkpoint
    holds. Nor is a checkpoint taken at an epoch's last batch or just before a
    validation: resumed from it, Lightning would count the end of the epoch (its
    scheduler step, its epoch metrics) or the validation as done and skip them. The
    checkpoint then waits for the next step, or comes with the validation's.
    """

    def __init__(self, path: Path, every_n_steps: int, minutes: float) -> None:
        self.path = path
        self.every_n_steps = every_n_steps
        self.seconds = minutes * 60
        self._saved_at = time.monotonic()
        self._saved_step: int | None = None

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._saved_at, self._saved_step = time.monotonic(), trainer.global_step

    def on_save_checkpoint(self, trainer: L.Trainer, pl_module: L.LightningModule, checkpoint: Any) -> None:
        self._saved_at, self._saved_step = time.monotonic(), trainer.global_step

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, *args: Any) -> None:
        off = not (self.every_n_steps or self.seconds)
        if off or not _step_ended(trainer) or _epoch_end_or_validation_follows(trainer):
            return
        steps = trainer.global_step if pl_module.automatic_optimization else _batches_done(trainer)
        due = bool(self.every_n_steps) and steps % self.every_n_steps == 0
        # The clock is read on logging steps only: under DDP the ranks' clocks differ, and
        # agreeing on it costs a collective that waits for the GPU, as logging does anyway.
        if self.seconds and steps % trainer.log_every_n_steps == 0:
            late = time.monotonic() - self._saved_at >= self.seconds
            due = trainer.strategy.reduce_boolean_decision(due or late, all=False)
        if due:
            trainer.save_checkpoint(self.path)

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        # Validating every n steps can leave the last steps without a checkpoint.
        if trainer.global_step != self._saved_step:
            trainer.save_checkpoint(self.path)


def _batches_done(trainer: L.Trainer) -> int:
    return trainer.fit_loop.epoch_loop.total_batch_idx + 1


def _step_ended(trainer: L.Trainer) -> bool:
    """This batch took an optimizer step: no gradients are waiting to be accumulated."""
    return (trainer.fit_loop.epoch_loop.batch_idx + 1) % trainer.accumulate_grad_batches == 0


def _epoch_end_or_validation_follows(trainer: L.Trainer) -> bool:
    """Whether the epoch ends after this batch, or Lightning validates: when training is
    stopping, and every val_check_batch batches across epochs (--val-every-n-steps)."""
    if trainer.fit_loop.epoch_loop.batch_progress.is_last_batch or trainer.should_stop:
        return True
    return trainer.check_val_every_n_epoch is None and _batches_done(trainer) % trainer.val_check_batch == 0
