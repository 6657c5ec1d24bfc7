"""PRF-2 / PRF-3 / PRF-4: where each training epoch's time goes, logged under timing/."""

from __future__ import annotations

import time
from collections import defaultdict
from typing import Any

import lightning as L


class TimingCallback(L.Callback):
    """Splits every epoch into fetching the batch (`data`; `env_step` for RL, where it
    is the whole collector rollout, inter-process communication included),
    inference (the forward pass), backward (loss, backward pass and optimizer step),
    validation and overhead (logging, checkpointing, everything else), as seconds and
    as percentages that add up to 100.

    A module with a `stopwatch` (a Stopwatch) times the sections inside its own
    training step; for the others the forward pass and backward are found from hooks.
    """

    def __init__(self, fetch_section: str = "data") -> None:
        self.fetch_section = fetch_section
        self._totals: dict[str, float] = defaultdict(float)
        self._epoch_start = self._mark = time.perf_counter()
        self._forward_end: float | None = None
        self._hook: Any = None

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        # Marks where the module's forward pass ends inside training_step.
        self.teardown(trainer, pl_module, stage)
        self._hook = pl_module.register_forward_hook(self._on_forward_end)

    def teardown(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        if self._hook is not None:
            self._hook.remove()
            self._hook = None

    def _on_forward_end(self, module: Any, args: Any, output: Any) -> None:
        if module.training:
            self._forward_end = time.perf_counter()

    def on_train_epoch_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._totals = defaultdict(float)
        self._epoch_start = self._mark = time.perf_counter()

    def on_train_batch_start(self, trainer, pl_module, batch: Any, batch_idx: int) -> None:
        self._lap(self.fetch_section)  # since the previous batch ended: waiting for this one
        self._forward_end = None

    def on_before_backward(self, trainer, pl_module, loss) -> None:
        if not hasattr(pl_module, "stopwatch"):
            # The forward pass is inference; the loss computed from its output counts as backward.
            self._lap("inference", until=self._forward_end)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch: Any, batch_idx: int) -> None:
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
        # DDP-1: the mean over the processes, one all-reduce an epoch.
        pl_module.log_dict(metrics, on_step=False, on_epoch=True, sync_dist=True)

    def _lap(self, section: str, until: float | None = None) -> None:
        now = until or time.perf_counter()
        self._totals[section] += now - self._mark
        self._mark = now
