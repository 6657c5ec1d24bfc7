"""LOG-4: system/ metrics once per epoch."""

from __future__ import annotations

import lightning as L

from src.ops.hardware import collect_system_metrics


class SystemMetricsCallback(L.Callback):
    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        # DDP-1: the mean over the processes, one all-reduce an epoch.
        pl_module.log_dict(collect_system_metrics(), on_step=False, on_epoch=True, sync_dist=True)
