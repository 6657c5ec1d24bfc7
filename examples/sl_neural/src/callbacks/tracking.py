"""LOG-4: the best value of the monitored metric so far, logged under tracking/."""

from __future__ import annotations

from typing import Any

import lightning as L


class TrackingCallback(L.Callback):
    """Logs tracking/best_{monitor}, tracking/best_epoch and
    tracking/epochs_since_improvement after every epoch that validated."""

    def __init__(self, monitor: str = "val_loss", mode: str = "min") -> None:
        self.monitor, self.mode = monitor, mode
        self.best: float | None = None
        self.best_epoch = -1
        self.epochs_since_improvement = 0

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        value = trainer.callback_metrics.get(self.monitor)
        if value is None:
            return
        value = float(value)
        if self.best is None or (value < self.best if self.mode == "min" else value > self.best):
            self.best, self.best_epoch, self.epochs_since_improvement = value, trainer.current_epoch, 0
        else:
            self.epochs_since_improvement += 1
        pl_module.log_dict(
            {
                f"tracking/best_{self.monitor}": self.best,
                "tracking/best_epoch": float(self.best_epoch),
                "tracking/epochs_since_improvement": float(self.epochs_since_improvement),
            },
            on_step=False,
            on_epoch=True,
            sync_dist=True,  # the same on every DDP process: the mean changes nothing
        )

    def state_dict(self) -> dict[str, Any]:  # restored on resume (RES-1)
        return {
            "best": self.best,
            "best_epoch": self.best_epoch,
            "epochs_since_improvement": self.epochs_since_improvement,
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.best = state_dict["best"]
        self.best_epoch = state_dict["best_epoch"]
        self.epochs_since_improvement = state_dict["epochs_since_improvement"]
