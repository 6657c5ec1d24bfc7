"""CB-1: Lightning's EarlyStopping, made safe for a run resumed between an epoch's last
batch and its validation."""

from __future__ import annotations

import lightning as L
from lightning.pytorch.callbacks import EarlyStopping


class ResumableEarlyStopping(EarlyStopping):
    """EarlyStopping, except at the end of an epoch that a resumed session finished without
    a validation of its own. A checkpoint taken after an epoch's last batch (SLURM's
    signal, a budget or a STOP file landing there) resumes with that epoch's validation
    counted as done, so the monitored metric is not there to judge, and EarlyStopping's
    strict check would fail the run. Anywhere else a missing metric is still an error."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._validated_this_session = False

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._validated_this_session = False

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if not trainer.sanity_checking:
            self._validated_this_session = True
        super().on_validation_end(trainer, pl_module)

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self._validated_this_session or self.monitor in trainer.callback_metrics:
            super().on_train_epoch_end(trainer, pl_module)
