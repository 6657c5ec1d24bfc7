"""Alerts while a Lightning part trains (src.ops.alerts): the monitored metric has stalled,
the GPU idles or its memory is nearly full. A loss that is not a number ends the run
(FiniteLossCallback), and start_run raises that alert with the others that end a run."""

from __future__ import annotations

import math
from typing import Any

import lightning as L

from src.ops.alerts import Alerts
from src.ops.hardware import gpu_readings


class AlertCallback(L.Callback):
    """After each validation, the validations since the monitored metric improved, counted as
    early stopping counts them; after each training epoch, a reading of the run's GPU."""

    def __init__(self, alerts: Alerts, monitor: str = "val_loss", mode: str = "min", min_delta: float = 0.0):
        self.alerts, self.monitor, self.mode, self.min_delta = alerts, monitor, mode, min_delta
        self.best: float | None = None
        self.validations_since_best = 0

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        # Counted here, not read from EarlyStopping: Lightning runs its epoch-end check after
        # every other callback's.
        if trainer.sanity_checking or (value := trainer.callback_metrics.get(self.monitor)) is None:
            return
        value = float(value)
        gain = math.inf if self.best is None else (self.best - value) * (1 if self.mode == "min" else -1)
        if gain > abs(self.min_delta):
            self.best, self.validations_since_best = value, 0
        else:
            self.validations_since_best += 1
        if trainer.is_global_zero:
            where = f"epoch {trainer.current_epoch}, step {trainer.global_step}"
            self.alerts.evaluated(self.monitor, value, self.validations_since_best, where)

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.is_global_zero and pl_module.device.type == "cuda":
            self.alerts.gpu_read(gpu_readings(pl_module.device.index or 0))

    def state_dict(self) -> dict[str, Any]:  # a resumed run goes on counting
        return {"best": self.best, "validations_since_best": self.validations_since_best}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.best, self.validations_since_best = state_dict["best"], state_dict["validations_since_best"]
