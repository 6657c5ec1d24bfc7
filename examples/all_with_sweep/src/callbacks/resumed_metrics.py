"""OUT-4, RES-1: a resumed run's metrics.jsonl has each step once."""

from __future__ import annotations

import lightning as L

from src.training.jsonl_logger import JsonlLogger


class ResumedMetricsCallback(L.Callback):
    """A run resumed from a checkpoint logs again the steps the interrupted session
    logged after that checkpoint: metrics.jsonl drops those lines first."""

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.ckpt_path is None:
            return
        for logger in trainer.loggers:
            if isinstance(logger, JsonlLogger):
                logger.resuming()
