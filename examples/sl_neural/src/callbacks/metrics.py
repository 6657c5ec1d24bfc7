"""Timing and metrics the Lightning module does not log itself (LOG-4, LOG-5, PRF-2..4): per
epoch timing/, tracking/, system/ and `lr`; per logged step batch/grad_norm; at the start, what
the run is and how it trains."""

from __future__ import annotations

import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import lightning as L
import torch
from lightning.pytorch.utilities.parsing import lightning_getattr, lightning_hasattr

from src.callbacks import log_epoch_figures, log_to_loggers, logs_this_step
from src.ops.hardware import GIB, collect_system_metrics, gpu_name
from src.runs.lifetime import record_in_run_json, record_used_settings


class TimingCallback(L.Callback):
    """Splits every epoch into fetching the batch (`data`; RL's `env_step`: the whole rollout),
    inference (forward), backward (loss, backward and optimizer step), validation and overhead,
    as seconds and shares adding up to 100. A module with a `stopwatch` (src.training.stopwatch)
    times the sections of its own step."""

    def __init__(self, fetch_section: str = "data") -> None:
        self.fetch_section = fetch_section
        self._totals: dict[str, float] = defaultdict(float)
        self._epoch_start = self._mark = self._validation_start = time.perf_counter()
        self._forward_end: float | None = None
        self._hook: Any = None

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        self.teardown(trainer, pl_module, stage)  # where the forward pass ends inside training_step
        self._hook = pl_module.register_forward_hook(self._on_forward_end)

    def teardown(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        if self._hook is not None:
            self._hook.remove()

    def _on_forward_end(self, module: Any, args: Any, output: Any) -> None:
        if module.training:
            self._forward_end = time.perf_counter()

    def on_train_epoch_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._totals = defaultdict(float)
        self._epoch_start = self._mark = time.perf_counter()

    def on_train_batch_start(self, trainer: L.Trainer, pl_module: L.LightningModule, *args: Any) -> None:
        self._lap(self.fetch_section)  # since the previous batch ended: waiting for this one
        self._forward_end = None

    def on_before_backward(self, trainer: L.Trainer, pl_module: L.LightningModule, loss: Any) -> None:
        if not hasattr(pl_module, "stopwatch"):  # the loss computed from the output counts as backward
            self._lap("inference", until=self._forward_end)

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, *args: Any) -> None:
        if hasattr(pl_module, "stopwatch"):
            for section, seconds in pl_module.stopwatch.pop().items():
                self._totals[section] += seconds
            self._mark = time.perf_counter()  # the rest of the step is overhead
        else:
            self._lap("backward")  # loss.backward() and the optimizer step

    def on_validation_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._validation_start = time.perf_counter()

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if not trainer.sanity_checking:
            self._totals["validation"] += time.perf_counter() - self._validation_start

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        total = time.perf_counter() - self._epoch_start
        seconds = {**self._totals, "overhead": max(total - sum(self._totals.values()), 0.0)}
        metrics = {f"timing/{name}_seconds": value for name, value in seconds.items()}
        metrics |= {f"timing/{name}_pct": 100 * value / total for name, value in seconds.items()}
        metrics["timing/epoch_seconds"] = total
        log_epoch_figures(trainer, pl_module, metrics)

    def _lap(self, section: str, until: float | None = None) -> None:
        now = until or time.perf_counter()
        self._totals[section] += now - self._mark
        self._mark = now


class MetricsCallback(L.Callback):
    """batch/grad_norm (before clipping) at the steps Lightning logs; per epoch the first
    parameter group's `lr` (LearningRateMonitor logs each under lr/), system/ and, after an epoch
    that validated, tracking/best_{monitor}, tracking/best_epoch, tracking/epochs_since_improvement."""

    def __init__(self, monitor: str = "val_loss", mode: str = "min") -> None:
        self.monitor, self.mode = monitor, mode
        self.best: float | None = None
        self.best_epoch = -1
        self.epochs_since_improvement = 0
        # The monitor's latest value, kept across a resume: a checkpoint taken at a validation
        # before its epoch's end leaves the resumed run nothing logged to close that epoch with.
        self.latest: float | None = None

    def on_before_optimizer_step(self, trainer: L.Trainer, pl_module: L.LightningModule, *args: Any) -> None:
        # A manual-optimization module logs its own norms (RL: batch/actor_grad_norm). The norm
        # takes a kernel per parameter: only on the steps whose metrics reach the loggers, and on
        # rank zero, since DDP leaves every rank the same gradients.
        if pl_module.automatic_optimization and trainer.is_global_zero and logs_this_step(trainer):
            grads = [p.grad.detach().norm() for p in pl_module.parameters() if p.grad is not None]
            if grads:
                norm = torch.linalg.vector_norm(torch.stack(grads))
                log_to_loggers(trainer, {"batch/grad_norm": float(norm)})  # not self.log, as the epoch's

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if not trainer.sanity_checking and (value := trainer.callback_metrics.get(self.monitor)) is not None:
            self.latest = float(value)

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        metrics = collect_system_metrics(gpu=pl_module.device.index or 0)  # this rank's GPU
        if torch.cuda.is_available():  # what torch's allocator holds: the model's memory
            metrics["system/gpu_memory_allocated_gb"] = torch.cuda.memory_allocated() / GIB
            metrics["system/gpu_memory_reserved_gb"] = torch.cuda.memory_reserved() / GIB
            metrics["system/gpu_max_memory_allocated_gb"] = torch.cuda.max_memory_allocated() / GIB
        if trainer.optimizers:
            metrics["lr"] = trainer.optimizers[0].param_groups[0]["lr"]
        if (value := trainer.callback_metrics.get(self.monitor)) is not None:
            self.latest = float(value)
        if (value := self.latest) is not None:
            if self.best is None or (value < self.best if self.mode == "min" else value > self.best):
                self.best, self.best_epoch, self.epochs_since_improvement = value, trainer.current_epoch, 0
            else:
                self.epochs_since_improvement += 1
            metrics[f"tracking/best_{self.monitor}"] = self.best
            metrics["tracking/best_epoch"] = float(self.best_epoch)
            metrics["tracking/epochs_since_improvement"] = float(self.epochs_since_improvement)
        log_epoch_figures(trainer, pl_module, metrics)

    def state_dict(self) -> dict[str, Any]:  # tracking/ goes on across a resume (RES-1)
        return {key: vars(self)[key] for key in ("best", "best_epoch", "epochs_since_improvement", "latest")}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        vars(self).update(state_dict)


class RunInfoCallback(L.Callback):
    """Logs to every logger the model's size, sample counts, GPU, and what the Trainer settled on
    (also config.json's `used`), optimizers, callbacks and profiler, so that a run directory
    shows the checklist's settings took effect (LIT-4, PRC-1, CB-1..3, PRF-1); and the
    processes to run.json (DDP-1)."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        processes = {"world_size": trainer.world_size, "num_nodes": trainer.num_nodes}
        used = {
            "precision": trainer.precision,
            "accelerator": type(trainer.accelerator).__name__.removesuffix("Accelerator").lower(),
            "devices": trainer.num_devices,
            "num_nodes": trainer.num_nodes,
            "strategy": getattr(trainer.strategy, "strategy_name", type(trainer.strategy).__name__),
            "accumulate_grad_batches": trainer.accumulate_grad_batches,
        }
        if lightning_hasattr(pl_module, "batch_size"):  # as BatchSizeFinder left it, at the start of fit
            used["batch_size"] = int(lightning_getattr(pl_module, "batch_size"))
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
            "optimizers": [
                {
                    "name": type(optimizer).__name__,
                    "fused": bool(optimizer.defaults.get("fused")),
                    "param_groups": [
                        {
                            "weight_decay": group.get("weight_decay", 0.0),
                            "param_dims": sorted({p.dim() for p in group["params"]}),
                        }
                        for group in optimizer.param_groups
                    ],
                }
                for optimizer in trainer.optimizers
            ],
            "callbacks": [_lightning_name(callback) for callback in trainer.callbacks],
            "profiler": _lightning_name(trainer.profiler),
        }
        for logger in trainer.loggers:
            logger.log_hyperparams(info)


def _lightning_name(obj: object) -> str:
    """A Lightning class's name; one of ours with the Lightning class it extends, as the
    checklist's run checks read it: "StopFileCallback(Callback)"."""
    own = type(obj)
    base = next((c for c in own.__mro__ if c.__module__.startswith("lightning.")), None)
    return own.__name__ if base is None or base is own else f"{own.__name__}({base.__name__})"


def _num_samples(trainer: L.Trainer, name: str, loaders: Any) -> int:
    """The DataModule's own count where it has one (RL: frames per epoch), else the datasets'."""
    if hasattr(trainer.datamodule, name):
        return int(getattr(trainer.datamodule, name))
    loaders = [] if loaders is None else loaders if isinstance(loaders, (list, tuple)) else [loaders]
    return sum(len(loader.dataset) for loader in loaders)
