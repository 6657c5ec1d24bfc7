"""What ends a run before early stopping does: a loss that is not a number, a STOP file (CB-4)
and the wall-clock budget (CFG-4); and alerts (src.ops.alerts) that the monitored metric has
stalled or the GPU idles or is nearly full (start_run raises those of a run that ends)."""

from __future__ import annotations

import functools
import math
import signal
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import lightning as L
from lightning.pytorch.callbacks import Timer
from lightning.pytorch.utilities import rank_zero_info

from src.callbacks import logs_this_step
from src.errors import TrainingDiverged
from src.ops.alerts import Alerts
from src.ops.hardware import gpu_readings
from src.runs.directory import stop_requested
from src.runs.lifetime import training_stopped, wall_clock_spent


class FiniteLossCallback(L.Callback):
    """TrainingDiverged once the training loss or the monitored metric is not finite. The loss is
    read at the steps Lightning logs (a read waits for the GPU; non-finite weights stay so) and
    before any checkpoint is written, so that a diverged step's weights are never saved."""

    def __init__(self, monitor: str = "val_loss") -> None:
        self.monitor = monitor

    def on_train_batch_end(self, trainer: L.Trainer, *args: Any) -> None:
        if logs_this_step(trainer):
            self._check_loss(trainer)

    def on_save_checkpoint(self, trainer: L.Trainer, *args: Any) -> None:
        self._check_loss(trainer)

    def _check_loss(self, trainer: L.Trainer) -> None:
        metrics = trainer.callback_metrics
        self._check(trainer, "training loss", metrics.get("train_loss_step", metrics.get("train_loss")))

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if not trainer.sanity_checking:
            self._check(trainer, self.monitor, trainer.callback_metrics.get(self.monitor))

    def _check(self, trainer: L.Trainer, what: str, value: Any) -> None:
        if value is None or math.isfinite(value := float(value)):
            return
        now = f" (now {trainer.optimizers[0].param_groups[0]['lr']:g})" if trainer.optimizers else ""
        raise TrainingDiverged(
            f"training diverged: the {what} is {value} at epoch {trainer.current_epoch}, "
            f"step {trainer.global_step}; checkpoints from before it are kept. Lower the learning "
            f"rate{now} or look for extreme values in the data."
        )


class SigtermInStep(L.Callback):
    """SIGTERM in a run of several processes: flagged for Lightning, whose broadcast at the start
    of each training batch stops the ranks together. Lightning's own handler also
    broadcasts from inside the handler, in the middle of whatever collective the rank is in:
    under torchrun, which signals every rank, those broadcasts meet other collectives and the
    job hangs until torchrun kills it, its run left "running". This one does not. Private: the
    flag is `trainer._signal_connector.received_sigterm`, which `trainer.received_sigterm`
    reads; a change shows in test_sigterm_to_torchrun_leaves_the_run_interrupted_not_failed."""

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        self._before_lightning = signal.getsignal(signal.SIGTERM)  # the run's own: it records the signal

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        # Lightning registers its handlers as the stage starts, after setup.
        if trainer.world_size > 1:
            signal.signal(signal.SIGTERM, functools.partial(self._flag, trainer))

    on_test_start = on_train_start

    def _flag(self, trainer: L.Trainer, signum: int, frame: Any) -> None:
        connector = trainer._signal_connector
        if not connector.received_sigterm and (launcher := trainer.strategy.launcher) is not None:
            launcher.kill(signum)  # the ranks Lightning started, as its own handler does
        connector.received_sigterm = True
        if callable(self._before_lightning):
            self._before_lightning(signum, frame)


class StopFileCallback(L.Callback):
    """`touch STOP`: the epoch finishes, then checkpoints, cleanup and the test run. The file
    stays (other runs and ranks see it too): delete it before the next run."""

    def __init__(self, paths: Sequence[Path]) -> None:
        self.paths = list(paths)

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        found = stop_requested(self.paths)
        # Any rank that sees the file stops them all, so DDP ranks never diverge.
        if trainer.strategy.reduce_boolean_decision(found is not None, all=False):
            trainer.should_stop = True
            said = f"STOP file {found or 'of another rank'}: stopping after epoch {trainer.current_epoch}"
            training_stopped("stop_file", said)
            rank_zero_info(said)


class WallClockTimer(Timer):
    """Lightning's Timer (earlier sessions of a resumed run counted), read at the steps Lightning
    logs, not every step: under DDP each reading is a broadcast."""

    def __init__(self, hours: float) -> None:
        super().__init__(duration=timedelta(hours=hours), interval="step")
        self.hours = hours

    def on_train_batch_end(self, trainer: L.Trainer, *args: Any, **kwargs: Any) -> None:
        if logs_this_step(trainer):
            stopping = trainer.should_stop
            super().on_train_batch_end(trainer, *args, **kwargs)
            if trainer.should_stop and not stopping:
                training_stopped(*wall_clock_spent(self.hours, f"epoch {trainer.current_epoch}"))


class AlertCallback(L.Callback):
    """After each validation, the validations since the monitored metric improved, counted as
    early stopping counts them; after each training epoch, a reading of the run's GPU."""

    def __init__(self, alerts: Alerts, monitor: str = "val_loss", mode: str = "min", min_delta: float = 0.0):
        self.alerts, self.monitor, self.mode, self.min_delta = alerts, monitor, mode, min_delta
        self.best: float | None = None
        self.validations_since_best = 0

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        # Counted here, not read from EarlyStopping: Lightning runs its epoch-end check after
        # every other callback's.
        if trainer.sanity_checking or (value := trainer.callback_metrics.get(self.monitor)) is None:
            return
        value = float(value)
        gain = math.inf if self.best is None else (self.best - value) * (1 if self.mode == "min" else -1)
        if gain > abs(self.min_delta):
            self.best, self.validations_since_best = value, 0
        else:
            self.validations_since_best += 1
        if trainer.is_global_zero:
            where = f"epoch {trainer.current_epoch}, step {trainer.global_step}"
            self.alerts.evaluated(self.monitor, value, self.validations_since_best, where)

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.is_global_zero and pl_module.device.type == "cuda":
            self.alerts.gpu_read(gpu_readings(pl_module.device.index or 0))

    def state_dict(self) -> dict[str, Any]:  # a resumed run goes on counting
        return {"best": self.best, "validations_since_best": self.validations_since_best}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.best, self.validations_since_best = state_dict["best"], state_dict["validations_since_best"]
