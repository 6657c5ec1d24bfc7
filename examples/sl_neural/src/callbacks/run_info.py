"""LOG-5: what a run is, logged once at its start, with how it trains: the precision,
each optimizer's parameter groups, the callbacks and the profiler in use (so a run
directory shows the checklist's settings took effect, LIT-4, PRC-1, CB-1..3, PRF-1)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import lightning as L
import torch
from lightning.pytorch.utilities.parsing import lightning_getattr, lightning_hasattr

from src.ops.hardware import gpu_name
from src.runs.lifetime import record_in_run_json, record_used_settings


class RunInfoCallback(L.Callback):
    """Logs the model's size, the sample counts, the GPU and the training setup to every
    logger (W&B: the run's config; metrics.jsonl: one line); the processes it trains
    on go to run.json too (DDP-1)."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        processes = {"world_size": trainer.world_size, "num_nodes": trainer.num_nodes}
        used = _used_settings(trainer, pl_module)
        if trainer.is_global_zero:
            record_in_run_json(self.run_dir, **processes)
            record_used_settings(self.run_dir, **used)
        info = {
            **processes,
            "used": used,
            "total_params": sum(p.numel() for p in pl_module.parameters()),
            "trainable_params": sum(p.numel() for p in pl_module.parameters() if p.requires_grad),
            "num_train_samples": _num_samples(trainer, "num_train_samples", trainer.train_dataloader),
            "num_val_samples": _num_samples(trainer, "num_val_samples", trainer.val_dataloaders),
            "gpu_name": gpu_name(),
            "precision": trainer.precision,
            "optimizers": [_describe_optimizer(optimizer) for optimizer in trainer.optimizers],
            "callbacks": [_lightning_name(callback) for callback in trainer.callbacks],
            "profiler": _lightning_name(trainer.profiler),
        }
        for logger in trainer.loggers:
            logger.log_hyperparams(info)


def _used_settings(trainer: L.Trainer, pl_module: L.LightningModule) -> dict[str, Any]:
    """What the Trainer settled on where the config said auto, or where a callback chose
    (BatchSizeFinder has already run: it searches at the start of fit)."""
    used = {
        "precision": trainer.precision,
        "accelerator": type(trainer.accelerator).__name__.removesuffix("Accelerator").lower(),
        "devices": trainer.num_devices,
        "num_nodes": trainer.num_nodes,
        "strategy": getattr(trainer.strategy, "strategy_name", type(trainer.strategy).__name__),
        "accumulate_grad_batches": trainer.accumulate_grad_batches,
    }
    if lightning_hasattr(pl_module, "batch_size"):
        used["batch_size"] = int(lightning_getattr(pl_module, "batch_size"))
    return used


def _describe_optimizer(optimizer: torch.optim.Optimizer) -> dict[str, Any]:
    groups = [
        {
            "weight_decay": group.get("weight_decay", 0.0),
            "param_dims": sorted({p.dim() for p in group["params"]}),
        }
        for group in optimizer.param_groups
    ]
    return {
        "name": type(optimizer).__name__,
        "fused": bool(optimizer.defaults.get("fused")),
        "param_groups": groups,
    }


def _lightning_name(obj: object) -> str:
    """A Lightning class's own name; a class of ours with the Lightning class it extends,
    e.g. "StopFileCallback(Callback)"."""
    own = type(obj)
    base = next((c for c in own.__mro__ if c.__module__.startswith("lightning.")), None)
    if base is None or base is own:
        return own.__name__
    return f"{own.__name__}({base.__name__})"


def _num_samples(trainer: L.Trainer, name: str, loaders: Any) -> int:
    """The DataModule's own count where it has one (RL: frames per epoch), else the
    size of the loaders' datasets."""
    if hasattr(trainer.datamodule, name):
        return int(getattr(trainer.datamodule, name))
    if loaders is None:
        return 0
    loaders = loaders if isinstance(loaders, (list, tuple)) else [loaders]
    return sum(len(loader.dataset) for loader in loaders)
