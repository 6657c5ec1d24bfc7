"""RES-1: a resumed run takes the ReduceLROnPlateau step its checkpoint missed."""

from __future__ import annotations

from typing import Any

import lightning as L


class PlateauResumeCallback(L.Callback):
    """Checkpoints are written after validation but before Lightning steps
    ReduceLROnPlateau with that validation's metric, and on resume Lightning skips
    that step (the metric is not in the checkpoint). This callback stores the
    monitored values in the checkpoint and replays the step when training resumes,
    so the learning rate follows the uninterrupted run's."""

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
        monitored, self._to_replay = self._to_replay, None
        for config in trainer.lr_scheduler_configs if monitored else ():
            if config.reduce_on_plateau and config.interval == "epoch" and config.monitor in monitored:
                config.scheduler.step(monitored[config.monitor])
