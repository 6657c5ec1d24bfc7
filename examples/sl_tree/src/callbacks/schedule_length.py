"""RES-1, RES-2: a run resumes only with the schedule length it was planned with."""

from __future__ import annotations

from typing import Any

import lightning as L

from src.config import ConfigError


class ScheduleLengthCallback(L.Callback):
    """A learning-rate schedule that spans the run (cosine, onecycle) is built for its number
    of optimizer steps, and a resumed run restores it as it was. Resumed with settings that
    change that number (num_epochs, the batch size, accumulation, devices, the data) it would
    go on past its end; such a resume is refused before its first step."""

    def __init__(self) -> None:
        self._steps: int | None = None  # this session's
        self._planned: int | None = None  # the checkpoint's

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._steps = int(trainer.estimated_stepping_batches)
        planned, self._planned = self._planned, None
        if planned is not None and planned != self._steps:
            raise ConfigError(
                f"this run's learning-rate schedule spans {planned} optimizer steps, and resuming it with "
                f"these settings would make the run {self._steps}: resume with the num_epochs, batch size, "
                "devices and data it started with"
            )

    def state_dict(self) -> dict[str, Any]:
        return {} if self._steps is None else {"optimizer_steps": self._steps}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self._planned = state_dict.get("optimizer_steps")
