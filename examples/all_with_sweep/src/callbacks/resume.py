"""RES-1: a run killed at any point, by kill -9 and mid-epoch too, resumes as if it had never
stopped: the same steps, learning rates, random numbers and metrics.jsonl rows."""

from __future__ import annotations

import random
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import lightning as L
import numpy as np
import torch
import torch.distributed as dist
from lightning.pytorch.callbacks import EarlyStopping
from lightning.pytorch.callbacks.early_stopping import EarlyStoppingReason
from lightning.pytorch.trainer.states import TrainerFn
from lightning.pytorch.utilities import rank_zero_info

from src.config import ConfigError
from src.runs.lifetime import mark_training_ended, training_ended, training_stopped
from src.training.config import SPANNING_SCHEDULES, LightningConfig
from src.training.jsonl_logger import JsonlLogger
from src.training.seeding import rank_seed


def _processes(count: int) -> str:
    return f"{count} process" if count == 1 else f"{count} processes"


def _random_states() -> dict[str, Any]:
    """This process's random generators, as lists and tensors: they load with weights_only=True."""
    kind, keys, *rest = np.random.get_state()
    state: dict[str, Any] = {"python": random.getstate(), "numpy": [kind, keys.tolist(), *rest]}
    state["torch"] = torch.get_rng_state()
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


class ExactResume(L.Callback):
    """What Lightning's own checkpoint leaves out of an exact resume.

    - last.ckpt every checkpoint_every_n_steps steps (optimizer steps; batches under manual
      optimization) and checkpoint_minutes, and when training ends: ModelCheckpoint's triggers
      ignore the clock under manual optimization and fire between accumulated batches. None at
      an epoch's last batch or just before a validation, which a resume would count as done.
    - Every rank's random generators, the metric each ReduceLROnPlateau watches (Lightning
      steps it after the epoch-end checkpoints, and skips that step on resume) and a spanning
      schedule's length.
    - A resume restores them and takes the skipped plateau step, refuses a changed schedule
      length, drops metrics.jsonl rows logged after the checkpoint, follows a moved run
      directory, and once run.json says training ended, only tests and saves."""

    def __init__(self, cfg: LightningConfig, run_dir: Path) -> None:
        self.run_dir, self.seed = run_dir, cfg.seed
        self.every_n_steps, self.seconds = cfg.checkpoint_every_n_steps, cfg.checkpoint_minutes * 60
        self.schedule_spans_run = cfg.scheduler in SPANNING_SCHEDULES
        self._trainer: L.Trainer | None = None  # state_dict() is given none
        self._steps: int | None = None  # the schedule's length in optimizer steps, this session
        self._planned_steps: int | None = None  # and as the checkpoint recorded it
        self._plateau_metrics: dict[str, float] | None = None  # from the checkpoint, until stepped
        self._saved_at, self._saved_step = time.monotonic(), -1
        self._ended_earlier = False  # run.json said training had ended when this session began
        self._fit_loop_ran = False  # Lightning skips it for a run resumed with no epochs left
        self._own_generators = False  # this rank's random generators came from the checkpoint
        self._metrics_rows: int | None = None  # metrics.jsonl's rows when the checkpoint was taken

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        self._trainer = trainer

    def state_dict(self) -> dict[str, Any]:
        state = _random_states()
        if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
            # Every rank's generators, rank zero's also at the top as one process keeps them:
            # Lightning dumps a checkpoint on every rank, and rank zero writes it.
            ranks: list[Any] = [None] * dist.get_world_size()
            dist.all_gather_object(ranks, dict(state))
            state["ranks"] = ranks
        if self._trainer is not None:
            watched = {c.monitor for c in self._trainer.lr_scheduler_configs if c.reduce_on_plateau}
            metrics = self._trainer.callback_metrics
            state["plateau_metrics"] = {name: float(metrics[name]) for name in watched if name in metrics}
        if self._steps is not None:
            state["optimizer_steps"] = self._steps
        if self._trainer is not None and self._trainer.is_global_zero and (jsonl := _jsonl(self._trainer)):
            state["metrics_rows"] = jsonl.rows
        return state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        ranks, trainer = state_dict.get("ranks") or [], self._trainer
        # Resumed on another number of processes, ranks past zero seed apart (on_train_start).
        self._own_generators = trainer is not None and len(ranks) == trainer.world_size
        trained = len(ranks) or 1  # the processes that trained it: one keeps no list of ranks
        resumed = trainer is not None and trainer.state.fn == TrainerFn.FITTING  # not testing it
        if resumed and trainer.is_global_zero and trained != trainer.world_size:
            print(
                f"warning: this run trained in {_processes(trained)} and resumes in {trainer.world_size}: "
                "a step takes a batch from each process, so its steps and the order of its examples "
                "from here on are not those of the run uninterrupted; to continue it exactly, resume it "
                f"in {trained}",
                file=sys.stderr,
            )
        if self._own_generators:
            state_dict = {**state_dict, **ranks[trainer.global_rank]}
        version, internal, gauss = state_dict["python"]
        random.setstate((version, tuple(internal), gauss))
        kind, keys, *rest = state_dict["numpy"]
        np.random.set_state((kind, np.array(keys, dtype=np.uint32), *rest))
        torch.set_rng_state(state_dict["torch"])
        # RES-3: resumed on another number of GPUs, the CUDA generators stay freshly seeded.
        if len(state_dict.get("cuda", ())) == torch.cuda.device_count() > 0:
            torch.cuda.set_rng_state_all(state_dict["cuda"])
        self._plateau_metrics = state_dict.get("plateau_metrics")
        self._planned_steps = state_dict.get("optimizer_steps")
        self._metrics_rows = state_dict.get("metrics_rows")

    def on_load_checkpoint(self, trainer: L.Trainer, pl_module: L.LightningModule, checkpoint: dict) -> None:
        # Before Lightning's own check of the same, a MisconfigurationException.
        trained, planned = checkpoint.get("epoch", 0), trainer.max_epochs
        if trainer.state.fn == TrainerFn.FITTING and planned not in (None, -1) and trained > planned:
            raise ConfigError(
                f"this run's checkpoint is at epoch {trained}, past the num_epochs {planned} it would resume "
                f"with: give num_epochs {trained} or more, or start a new run for fewer epochs"
            )
        # Runs before any callback loads its state. ModelCheckpoint's state holds absolute paths:
        # left pointing at a run's old place, Lightning would drop the best score and
        # test(ckpt_path="best") would look there. Its layout is private: a change shows in
        # test_a_damaged_best_checkpoint_is_not_tested (it resumes a copied run).
        for callback in trainer.checkpoint_callbacks:
            state = checkpoint.get("callbacks", {}).get(callback.state_key)
            if state and state["dirpath"] != callback.dirpath:
                state.update(_moved(state, state["dirpath"], callback.dirpath))

    def on_fit_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        # Not on_train_start, which a run resumed with no epochs left never reaches.
        if trainer.ckpt_path is not None and (jsonl := _jsonl(trainer)):
            jsonl.resuming(self._metrics_rows)

    def on_test_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if jsonl := _jsonl(trainer):
            jsonl.testing(trainer.global_step)

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._fit_loop_ran = True
        if self.schedule_spans_run:
            self._steps = int(trainer.estimated_stepping_batches)
            if self._planned_steps is not None and self._planned_steps != self._steps:
                raise ConfigError(
                    f"this run's learning-rate schedule spans {self._planned_steps} optimizer steps, and "
                    f"resuming it with these settings would make the run {self._steps}: resume with the "
                    "num_epochs, batch size, devices and data it started with"
                )
        self._ended_earlier = training_ended(self.run_dir)
        if self._ended_earlier:
            rank_zero_info("this run's training ended in an earlier session: only testing and saving remain")
            trainer.should_stop = True
        if trainer.global_rank > 0 and not self._own_generators:  # a fresh run, or other ranks' checkpoint
            # Not seed_everything, whose PL_GLOBAL_SEED DistributedSampler reads and the ranks share.
            seed = rank_seed(self.seed, trainer.global_rank, trainer.global_step)
            random.seed(seed)
            np.random.seed(seed)
            torch.manual_seed(seed)
        # Private loop state: a schedule over the run's steps asks estimated_stepping_batches in
        # configure_optimizers, where the fit loop sets its loader up before the checkpoint is
        # restored; Lightning then never hands that loader its saved position, and a resumed
        # epoch would start again at its first batch. Dropped, it is set up again with it. A change
        # shows in test_a_run_with_a_schedule_of_its_length_killed_mid_epoch_resumes_as_if_never_stopped.
        if trainer.fit_loop._combined_loader_states_to_load:
            trainer.fit_loop._combined_loader = None
        # Private loop state: whether the checkpoint was taken within an epoch, which then
        # finishes first (on_train_epoch_end steps the scheduler). A change shows in
        # test_resumed_run_matches_an_uninterrupted_one (resumed between epochs) and
        # test_a_run_killed_mid_epoch_resumes_as_if_never_stopped (within one).
        if not trainer.fit_loop.restarting:
            self._step_plateau(trainer, {})
        self._saved_at, self._saved_step = time.monotonic(), trainer.global_step

    def on_train_batch_end(
        self, trainer: L.Trainer, pl_module: L.LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        if not (self.every_n_steps or self.seconds) or (batch_idx + 1) % trainer.accumulate_grad_batches:
            return  # off, or gradients are still accumulating
        # Private loop state: the batches of the whole fit, which Lightning counts validations
        # in (--val-every-n-steps) and metrics.jsonl counts a manual-optimization run's steps in.
        # A change shows in test_a_run_killed_in_validation_resumes_and_validates (SL) and
        # test_a_run_killed_mid_epoch_resumes_its_frame_count (RL).
        batches = trainer.fit_loop.epoch_loop.total_batch_idx + 1
        validates = trainer.check_val_every_n_epoch is None and batches % trainer.val_check_batch == 0
        if trainer.is_last_batch or trainer.should_stop or validates:
            return
        steps = trainer.global_step if pl_module.automatic_optimization else batches
        due = bool(self.every_n_steps) and steps % self.every_n_steps == 0
        # The clock is read on logging steps only: under DDP the ranks' clocks differ, and
        # agreeing on it costs a collective that waits for the GPU, as logging does anyway.
        if self.seconds and steps % trainer.log_every_n_steps == 0:
            late = time.monotonic() - self._saved_at >= self.seconds
            due = trainer.strategy.reduce_boolean_decision(due or late, all=False)
        if due:
            trainer.save_checkpoint(self.run_dir / "checkpoints" / "last.ckpt", weights_only=False)

    def on_save_checkpoint(self, trainer: L.Trainer, pl_module: L.LightningModule, checkpoint: dict) -> None:
        self._saved_at, self._saved_step = time.monotonic(), trainer.global_step

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.fit_loop.restarting:  # the epoch the checkpoint was taken in ends (see on_train_start)
            self._step_plateau(trainer, trainer.callback_metrics)

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if (
            not self._ended_earlier
            and trainer.max_epochs is not None
            and trainer.current_epoch >= trainer.max_epochs
        ):
            # Counted after any other reason: early stopping at the last epoch is why it stopped.
            training_stopped("budget", f"num_epochs {trainer.max_epochs} trained")
        if trainer.global_step != self._saved_step:  # validating every n steps can leave steps unsaved
            trainer.save_checkpoint(self.run_dir / "checkpoints" / "last.ckpt", weights_only=False)
        if trainer.is_global_zero:  # after the save: killed in between, the resume trains the rest
            mark_training_ended(self.run_dir)

    def on_fit_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        # Resumed with no epochs left (killed after its last epoch's checkpoint, before it
        # recorded that training ended, or given num_epochs at the epochs it has done): Lightning
        # skipped the fit loop, on_train_end with it, and the run would end for no reason.
        if (
            self._fit_loop_ran
            or trainer.max_epochs in (None, -1)
            or trainer.current_epoch < trainer.max_epochs
        ):
            return
        if not training_ended(self.run_dir):
            training_stopped("budget", f"num_epochs {trainer.max_epochs} trained")
            if trainer.is_global_zero:
                mark_training_ended(self.run_dir)

    def _step_plateau(self, trainer: L.Trainer, logged: Mapping[str, Any]) -> None:
        """The ReduceLROnPlateau step the checkpoint's epoch end missed, on the value the
        checkpoint recorded or the one logged since."""
        monitored, self._plateau_metrics = self._plateau_metrics, None
        if monitored is None:
            return
        monitored |= {name: float(value) for name, value in logged.items()}
        for config in trainer.lr_scheduler_configs:
            if config.reduce_on_plateau and config.interval == "epoch" and config.monitor in monitored:
                config.scheduler.step(monitored[config.monitor])


def _jsonl(trainer: L.Trainer) -> JsonlLogger | None:
    return next((logger for logger in trainer.loggers if isinstance(logger, JsonlLogger)), None)


def _moved(value: Any, old_dir: str, new_dir: str) -> Any:
    """`value` with every path under `old_dir` in it, dictionary keys too, under `new_dir`."""
    if isinstance(value, str) and value.startswith(old_dir):
        return new_dir + value[len(old_dir) :]
    if isinstance(value, dict):
        return {_moved(key, old_dir, new_dir): _moved(item, old_dir, new_dir) for key, item in value.items()}
    return value


class ResumableEarlyStopping(EarlyStopping):
    """CB-1: EarlyStopping, except at the end of an epoch whose validation a resumed session did
    not run (a checkpoint taken after the epoch's last batch counts it as done, and the strict
    check would fail on the missing metric; elsewhere it still does). It records why it stops."""

    _validated_this_session = False

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        patience = self.patience  # the config's: a resume may give a larger --patience
        super().load_state_dict(state_dict)
        self.patience = patience

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._validated_this_session = False
        # A run that stopped early, resumed: with its patience still spent, or its target still
        # reached, nothing is left to train; else a later stop is this session's, said anew.
        reason, self.stopping_reason = self.stopping_reason, EarlyStoppingReason.NOT_STOPPED
        best, target, checks = self.best_score, self.stopping_threshold, self.wait_count
        reached = target is not None and bool(self.monitor_op(best, target))
        if reason == EarlyStoppingReason.PATIENCE_EXHAUSTED and checks >= self.patience:
            said = f"no better {self.monitor} for {checks} checks; give a --patience above {self.patience}"
        elif reason == EarlyStoppingReason.STOPPING_THRESHOLD and reached:
            said = f"{self.monitor} {float(best):.6g} reached the target {target:g}"
        else:
            return
        self.stopping_reason, trainer.should_stop = reason, True
        rank_zero_info(f"early stopping ended this run and still applies ({said}): nothing left to train")

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._validated_this_session |= not trainer.sanity_checking
        self._checked(trainer, super().on_validation_end, pl_module)

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self._validated_this_session or self.monitor in trainer.callback_metrics:
            self._checked(trainer, super().on_train_epoch_end, pl_module)

    def _checked(self, trainer: L.Trainer, check: Any, pl_module: L.LightningModule) -> None:
        decided_before = self.stopping_reason
        check(trainer, pl_module)
        if self.stopping_reason == decided_before or not trainer.should_stop:
            return
        value = trainer.callback_metrics.get(self.monitor)
        now = f"{float(value):.6g}" if value is not None else "?"
        if self.stopping_reason == EarlyStoppingReason.STOPPING_THRESHOLD:
            # Lightning stops on the target before it counts the value as the best; on_train_start
            # of a resume reads the target as reached from the best.
            self.best_score = value.detach().clone()
            training_stopped("target", f"{self.monitor} {now} reached the target {self.stopping_threshold:g}")
        elif self.stopping_reason == EarlyStoppingReason.PATIENCE_EXHAUSTED:
            best = f"{float(self.best_score):.6g}"
            training_stopped(
                "patience", f"{self.monitor} {now}, no better than {best} for {self.wait_count} checks"
            )
