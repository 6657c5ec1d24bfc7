"""RES-1: a resumed run takes the ReduceLROnPlateau step its checkpoint missed."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import lightning as L


class PlateauResumeCallback(L.Callback):
    """Lightning steps ReduceLROnPlateau at the end of an epoch, after that epoch's
    checkpoints are written, and a resumed run skips that step (the monitored metric is
    not in the checkpoint): for a checkpoint taken after the epoch's last validation it
    moves on to the next epoch, for one taken within the epoch it finishes the epoch
    first. This callback stores the monitored values in the checkpoint and takes the
    step itself when training resumes, or when that epoch ends with the value logged
    since, so the learning rate follows the uninterrupted run's."""

    def __init__(self) -> None:
        self._trainer: L.Trainer | None = None
        self._to_replay: dict[str, float] | None = None

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        self._trainer = trainer

    def state_dict(self) -> dict[str, Any]:
        if self._trainer is None:
            return {}
        monitors = {c.monitor for c in self._trainer.lr_scheduler_configs if c.reduce_on_plateau}
        metrics = self._trainer.callback_metrics
        return {"monitored": {name: float(metrics[name]) for name in monitors if name in metrics}}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self._to_replay = state_dict.get("monitored")

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if not trainer.fit_loop.restarting:  # resumed at the start of the next epoch
            self._replay(trainer, {})

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.fit_loop.restarting:  # the epoch the checkpoint was taken in ends
            self._replay(trainer, trainer.callback_metrics)

    def _replay(self, trainer: L.Trainer, logged: Mapping[str, Any]) -> None:
        monitored, self._to_replay = self._to_replay, None
        if monitored is None:
            return
        monitored |= {name: float(value) for name, value in logged.items()}
        for config in trainer.lr_scheduler_configs:
            if config.reduce_on_plateau and config.interval == "epoch" and config.monitor in monitored:
                config.scheduler.step(monitored[config.monitor])
