"""LOG-4: system/ metrics once per epoch."""

from __future__ import annotations

import lightning as L
import torch

from src.ops.hardware import GIB, collect_system_metrics


class SystemMetricsCallback(L.Callback):
    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        metrics = collect_system_metrics(gpu=pl_module.device.index or 0)  # this rank's GPU
        if torch.cuda.is_available():  # what torch's allocator holds: the model's memory
            metrics |= {
                "system/gpu_memory_allocated_gb": torch.cuda.memory_allocated() / GIB,
                "system/gpu_memory_reserved_gb": torch.cuda.memory_reserved() / GIB,
                "system/gpu_max_memory_allocated_gb": torch.cuda.max_memory_allocated() / GIB,
            }
        # DDP-1: the mean over the processes, one all-reduce an epoch.
        pl_module.log_dict(metrics, on_step=False, on_epoch=True, sync_dist=True)
