"""LOG-4: per-step batch/ metrics, and the top-level learning rate per epoch."""

from __future__ import annotations

import lightning as L
import torch


class BatchMetricsCallback(L.Callback):
    """batch/grad_norm (before clipping) at the optimizer steps Lightning logs (every
    log_every_n_steps); the top-level `lr` once per epoch (LearningRateMonitor, CB-3,
    logs each parameter group's rate as lr/decay and lr/no_decay)."""

    def on_before_optimizer_step(
        self, trainer: L.Trainer, pl_module: L.LightningModule, optimizer: torch.optim.Optimizer
    ) -> None:
        if not pl_module.automatic_optimization:
            return  # a manual-optimization module logs its own norms (RL: batch/actor_grad_norm)
        # The norm takes a kernel per parameter: only for the steps whose metrics reach the
        # loggers, the test Lightning's own LearningRateMonitor uses.
        if not trainer._logger_connector.should_update_logs:
            return
        grads = [p.grad.detach().norm() for p in pl_module.parameters() if p.grad is not None]
        if grads:
            norm = torch.linalg.vector_norm(torch.stack(grads))
            pl_module.log("batch/grad_norm", norm, on_step=True, on_epoch=False)

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.optimizers:
            lr = trainer.optimizers[0].param_groups[0]["lr"]
            pl_module.log("lr", lr, on_step=False, on_epoch=True, sync_dist=True)
