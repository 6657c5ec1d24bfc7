"""Shared Lightning pieces (callbacks, the profiler) on a real fit of Lightning's own
BoringModel, where what they do shows outside a run's files."""

from __future__ import annotations

import pickle
import re

import lightning as L
import pytest
from lightning.pytorch.callbacks import LambdaCallback
from lightning.pytorch.demos.boring_classes import BoringModel

from src.callbacks.metrics import MetricsCallback, TimingCallback
from src.runs.metrics_jsonl import read_jsonl
from src.training.jsonl_logger import JsonlLogger
from src.training.profiler import BoundedSimpleProfiler
from src.training.trainer import skip_inherited_batch_hooks


class StepCounter(L.Callback):
    def __init__(self) -> None:
        self.steps = self.validation_batches = 0

    def on_train_batch_end(self, *args) -> None:
        self.steps += 1

    def on_validation_batch_end(self, *args) -> None:
        self.validation_batches += 1


def test_the_profiler_reports_every_call_in_memory_that_does_not_grow(tmp_path):  # PRF-1
    sizes, reports = [], []
    for steps in (4, 40):
        profiler = BoundedSimpleProfiler(dirpath=tmp_path, filename=f"profile{steps}")
        trainer = L.Trainer(
            default_root_dir=tmp_path,
            max_steps=steps,
            limit_val_batches=0,
            profiler=profiler,
            logger=False,
            enable_checkpointing=False,
            enable_progress_bar=False,
            enable_model_summary=False,
        )
        trainer.fit(BoringModel())
        sizes.append(len(pickle.dumps(dict(profiler.recorded_durations))))
        reports.append((tmp_path / f"fit-profile{steps}.txt").read_text())
    assert sizes[0] == sizes[1]  # ten times the steps, the same memory
    for steps, report in zip((4, 40), reports, strict=True):  # calls counted, seconds summed
        row = re.search(r"\|\s+run_training_batch\s+\|\s+([\d.e-]+)\s+\|\s+(\d+)\s+\|\s+([\d.e-]+)", report)
        mean, calls, total = float(row[1]), int(row[2]), float(row[3])
        assert calls == steps and total > 0 and mean == pytest.approx(total / steps, rel=1e-3)


def test_the_profiler_times_an_action_that_a_signal_handler_starts_again_inside_it(tmp_path):  # PRF-1
    profiler = BoundedSimpleProfiler(dirpath=tmp_path, filename="profile")
    # The inner one: Lightning's SLURM handler saving a checkpoint on SIGUSR1, mid-save.
    with profiler.profile("save_checkpoint"), profiler.profile("save_checkpoint"):
        pass
    with profiler.profile("save_checkpoint"):
        pass
    assert len(profiler.recorded_durations["save_checkpoint"]) == 2
    assert not profiler.current_actions


def test_lightning_calls_only_the_batch_hooks_a_callback_defines(tmp_path):
    counter, profiler = StepCounter(), BoundedSimpleProfiler(dirpath=tmp_path, filename="profile")
    lambda_steps = []  # a hook set on the object, not its class, is the callback's own too
    on_the_object = LambdaCallback(on_train_batch_start=lambda *args: lambda_steps.append(1))
    trainer = L.Trainer(
        default_root_dir=tmp_path,
        max_steps=6,
        val_check_interval=3,
        limit_val_batches=2,
        num_sanity_val_steps=0,
        callbacks=[counter, on_the_object],
        profiler=profiler,
        logger=False,
        enable_progress_bar=False,
    )
    skip_inherited_batch_hooks(trainer.callbacks)
    trainer.fit(BoringModel())
    assert (counter.steps, counter.validation_batches, len(lambda_steps)) == (6, 4, 6)  # their own hooks ran
    timed = profiler.recorded_durations
    assert timed["[Callback]StepCounter.on_train_batch_end"].count == 6
    callback_hooks = {action.split(".")[-1] for action in timed if action.startswith("[Callback]")}
    # Lightning's ModelCheckpoint and ModelSummary and the two above define no other batch hook.
    assert callback_hooks & {"on_before_backward", "on_after_backward", "on_before_zero_grad"} == set()
    assert timed["[Callback]LambdaCallback.on_train_batch_start"].count == 6
    assert {"on_fit_start", "on_train_epoch_end"} <= callback_hooks  # the other hooks untouched


class EpochLoggingModel(BoringModel):
    def training_step(self, batch, batch_idx):
        output = super().training_step(batch, batch_idx)
        self.log("train_loss", output["loss"], on_step=False, on_epoch=True)
        self.log("step_loss", output["loss"], on_step=True, on_epoch=False)
        return output


def test_step_and_epoch_figures_share_the_steps_of_lightnings_metrics(tmp_path):  # LOG-4, OUT-4
    # The callbacks hand their figures to the loggers themselves, at Lightning's logging steps.
    trainer = L.Trainer(
        default_root_dir=tmp_path,
        max_epochs=3,
        limit_train_batches=6,
        limit_val_batches=2,
        accumulate_grad_batches=2,  # Lightning logs at optimizer steps, not batches
        log_every_n_steps=2,
        logger=JsonlLogger(tmp_path / "metrics.jsonl"),
        callbacks=[TimingCallback(), MetricsCallback(monitor="train_loss")],
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(EpochLoggingModel())
    events = [event for event in read_jsonl(tmp_path / "metrics.jsonl") if event["event"] == "metrics"]
    lightnings = [(event["epoch"], event["step"]) for event in events if "train_loss" in event]
    assert lightnings == [(0, 2), (1, 5), (2, 8)]  # three optimizer steps an epoch, at its last
    for key in ("timing/epoch_seconds", "system/ram_used_gb", "tracking/best_train_loss", "lr"):
        assert [(event["epoch"], event["step"]) for event in events if key in event] == lightnings, key
    steps = sorted({(event["epoch"], event["step"]) for event in events if "step_loss" in event})
    assert steps == [(0, 1), (1, 3), (1, 5), (2, 7)]  # every second optimizer step
    assert [(event["epoch"], event["step"]) for event in events if "batch/grad_norm" in event] == steps
