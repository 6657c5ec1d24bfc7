"""CFG-4: the wall-clock budget of a Lightning run."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import lightning as L
from lightning.pytorch.callbacks import Timer


class WallClockTimer(Timer):
    """Lightning's Timer, which ends training mid-epoch once `hours` of training are
    spent (a resumed run's earlier sessions counted), reading its clock at the steps
    Lightning logs (every log_every_n_steps) instead of after every step: under DDP
    each reading is a broadcast from rank zero. Training ends at most that many steps
    past the budget."""

    def __init__(self, hours: float) -> None:
        super().__init__(duration=timedelta(hours=hours), interval="step")

    def on_train_batch_end(self, trainer: L.Trainer, *args: Any, **kwargs: Any) -> None:
        if trainer._logger_connector.should_update_logs:  # as Lightning's LearningRateMonitor decides
            super().on_train_batch_end(trainer, *args, **kwargs)
