"""LOG-5: what a run is, logged once at its start."""

from __future__ import annotations

from typing import Any

import lightning as L

from src.system_metrics import gpu_name


class RunInfoCallback(L.Callback):
    """Logs total_params, trainable_params, num_train_samples, num_val_samples and
    gpu_name to every logger (W&B: the run's config; metrics.jsonl: one line)."""

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        info = {
            "total_params": sum(p.numel() for p in pl_module.parameters()),
            "trainable_params": sum(p.numel() for p in pl_module.parameters() if p.requires_grad),
            "num_train_samples": _num_samples(trainer, "num_train_samples", trainer.train_dataloader),
            "num_val_samples": _num_samples(trainer, "num_val_samples", trainer.val_dataloaders),
            "gpu_name": gpu_name(),
        }
        for logger in trainer.loggers:
            logger.log_hyperparams(info)


def _num_samples(trainer: L.Trainer, name: str, loaders: Any) -> int:
    """The DataModule's own count where it has one (RL: frames per epoch), else the
    size of the loaders' datasets."""
    if hasattr(trainer.datamodule, name):
        return int(getattr(trainer.datamodule, name))
    if loaders is None:
        return 0
    loaders = loaders if isinstance(loaders, (list, tuple)) else [loaders]
    return sum(len(loader.dataset) for loader in loaders)
