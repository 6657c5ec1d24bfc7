"""The supervised neural part, trained for real on a CPU: one smoke run, many checks."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import math
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import lightning as L
import pandas as pd
import pytest
import torch
from conftest import (
    PARTS,
    PROJECT_PYTHONPATH,
    ROOT,
    Killed,
    as_flags,
    assert_ended,
    assert_report,
    default_config,
    gpu,
    kill_next_run,
    killed_copy,
    part_module,
    run_config,
    slow,
    write_mixed_table,
)
from sklearn.compose import ColumnTransformer
from sklearn.datasets import load_digits
from sklearn.impute import SimpleImputer
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler
from torch.utils.data import DataLoader, TensorDataset

from src.checklist.__main__ import check_project
from src.config import ConfigError
from src.data_checks import DataValidationError
from src.neural.data import TableDataModule
from src.neural.encoding import MISSING, FeatureEncoding, TableEncoding
from src.predictions import PREDICTIONS_FILE, read_predictions, task_metrics
from src.runs.console import TERMINAL_CONTROL
from src.runs.metrics_jsonl import read_jsonl
from src.training.precision import choose_precision

config = part_module("sl_neural", "config")
TaskConfig = default_config("sl_neural")
data = part_module("sl_neural", "data")
model_module = part_module("sl_neural", "model")
train = part_module("sl_neural", "train")
predict = part_module("sl_neural", "predict")


def datamodule_of(cfg):
    """The DataModule train.py builds for a config."""
    return TableDataModule(cfg, data)


def digits() -> pd.DataFrame:
    """A table of the tests' own, whatever table this part trains on: scikit-learn's bundled
    digits, 1,797 rows of 64 pixels (0 to 16) and their class, `target`."""
    return load_digits(as_frame=True).frame


# The fields that make this part a classifier of a table's `target`, whatever its own task.
CLASSIFICATION = {"task": "classification", "label_column": ("target",)}


def classifier(**fields):
    """This part's config as a classifier of a table's `target`, from every other column."""
    return TaskConfig(**{**CLASSIFICATION, "feature_columns": (), **fields})


def digits_run(folder: Path) -> dict:
    """The fields that train this part on the digits table, written into `folder`: nine
    steps an epoch in a batch of 128, whatever table and task the part has."""
    path = folder / "digits.csv"
    if not path.is_file():
        folder.mkdir(parents=True, exist_ok=True)
        digits().to_csv(path, index=False)
    split = {"batch_size": 128, "val_fraction": 0.15, "test_fraction": 0.15, "split_seed": 0}
    return {"data_path": str(path), **CLASSIFICATION, **split}


def smoke_config(tmp_path, report=False, **overrides):
    """The smoke config on the digits table, writing into tmp_path without W&B; with its report
    only where a test reads it."""
    base = config.CONFIGS["smoke"]()
    output = dataclasses.replace(base.output, base_dir=str(tmp_path), report=report)
    fields = {"wandb_mode": "disabled", "feature_columns": (), **digits_run(tmp_path), **overrides}
    return dataclasses.replace(base, output=output, **fields)


@pytest.fixture(scope="module")
def smoke_run(smoke_runs):
    """The session's offline-W&B smoke run (shared with test_checklist.py); returns
    (run directory, test metrics, metric events)."""
    run_dir, test_metrics = smoke_runs("sl_neural")
    return run_dir, test_metrics, read_jsonl(run_dir / "metrics.jsonl")


@slow
def test_run_directory_holds_the_run(smoke_run):  # OUT-1, OUT-2, OUT-3
    run_dir, _, _ = smoke_run
    for name in ("config.json", "console.log", "metrics.jsonl", "run.json", "model.pt", "fit-profile.txt"):
        assert (run_dir / name).stat().st_size > 0, name
    assert (run_dir / "checkpoints" / "best.ckpt").is_file()
    assert (run_dir / "checkpoints" / "last.ckpt").is_file()
    assert json.loads((run_dir / "run.json").read_text())["status"] == "finished"
    epoch_line = r"^epoch 2 \| lr [\d.e-]+ \| .*val_loss [\d.]+ \|.* [\d.]+ s$"  # OPS-2
    assert re.search(epoch_line, (run_dir / "console.log").read_text(), re.MULTILINE)


@slow
def test_config_snapshot_round_trips(smoke_run):  # CFG-2, OUT-2
    run_dir, _, _ = smoke_run
    saved = TaskConfig.from_json((run_dir / "config.json").read_text())
    assert saved.name == "smoke" and saved.hidden_sizes == config.Smoke().hidden_sizes


@slow
def test_metrics_cover_every_namespace(smoke_run):  # LOG-3, LOG-4, LOG-5, OUT-4, PRF-2, PRF-4
    run_dir, _, events = smoke_run
    keys = set().union(*events)
    classifies = run_config("sl_neural", run_dir).task == "classification"
    task_keys = ("val_acc", "test_accuracy") if classifies else ("test_loss",)
    for key in ("train_loss_step", "train_loss_epoch", "val_loss", "lr", *task_keys):
        assert key in keys, key
    for namespace in ("batch/", "timing/", "tracking/", "system/"):
        assert any(k.startswith(namespace) for k in keys), namespace
    assert {"timing/data_seconds", "timing/inference_seconds", "timing/backward_seconds"} <= keys
    assert {"tracking/best_val_loss", "tracking/epochs_since_improvement"} <= keys
    assert {"total_params", "trainable_params", "num_train_samples", "num_val_samples", "gpu_name"} <= keys
    for event in events:
        shares = [v for k, v in event.items() if k.startswith("timing/") and k.endswith("_pct")]
        if shares:
            assert sum(shares) == pytest.approx(100, abs=0.5)


@slow
def test_gradient_norm_is_logged_at_each_step_lightning_logs(smoke_run):  # LOG-4
    _, _, events = smoke_run
    logged_steps = [e["step"] for e in events if "train_loss_step" in e]
    assert len(logged_steps) > 1  # one every log_every_n_steps
    assert [e["step"] for e in events if "batch/grad_norm" in e] == logged_steps


@slow
def test_wandb_ran_offline_inside_the_run_directory(smoke_run):  # LOG-1, LOG-6
    run_dir, _, _ = smoke_run
    (offline_run,) = (run_dir / "wandb").glob("offline-run-*")
    (history,) = offline_run.glob("*.wandb")
    assert b"smoke-model" in history.read_bytes()  # the model artifact, logged once at the end


@slow
def test_saved_model_and_best_checkpoint_load_outside_lightning(smoke_run):  # LIT-3, RES-3
    run_dir, test_metrics, _ = smoke_run
    datamodule = datamodule_of(run_config("sl_neural", run_dir))  # rows of the run's own table
    datamodule.prepare_data()
    datamodule.setup("fit")
    features = next(iter(datamodule.val_dataloader()))[0][:8]
    from_file = model_module.load_model_from_checkpoint(run_dir / "model.pt")
    from_ckpt = model_module.load_model_from_checkpoint(run_dir / "checkpoints" / "best.ckpt")
    torch.testing.assert_close(from_file(features), from_ckpt(features))
    assert all(math.isfinite(value) for value in test_metrics.values())


@slow
def test_stop_file_ends_the_run_after_one_epoch_with_checkpoints_and_test(tmp_path):  # CB-4
    stop = tmp_path / "STOP"
    stop.touch()
    cfg = smoke_config(tmp_path, report=True, stop_file=str(stop), num_epochs=5)
    test_metrics = train.main_with_config(cfg)
    (run_dir,) = tmp_path.glob("smoke_*")
    epochs = {e["epoch"] for e in read_jsonl(run_dir / "metrics.jsonl") if "val_loss" in e}
    assert epochs == {0}
    assert (run_dir / "checkpoints" / "best.ckpt").is_file()
    assert (run_dir / "checkpoints" / "last.ckpt").is_file()
    assert "test_accuracy" in test_metrics
    assert_report(run_dir, ["learning_curves", "confusion_matrix", "roc"])  # a run cut short has its report


@slow
def test_a_stopped_run_resumed_logs_only_its_last_test(tmp_path):  # CB-4, RES-1, OUT-4
    # The resume's first logged step (a cosine schedule logs the rate at the next logging step)
    # comes after the stopped session's test: its rows were kept, as if the run tested twice.
    stop = tmp_path / "STOP"
    stop.touch()
    train.main_with_config(smoke_config(tmp_path, stop_file=str(stop), scheduler="cosine"))
    stop.unlink()
    (run_dir,) = tmp_path.glob("smoke_*")
    train.main_with_config(
        smoke_config(tmp_path, scheduler="cosine"), resume_from=run_dir / "checkpoints" / "last.ckpt"
    )
    events = read_jsonl(run_dir / "metrics.jsonl")
    assert [e["step"] for e in events if "test_loss" in e] == [3 * 9]  # after the 3 epochs of 9 steps
    assert [e["step"] for e in events if e["event"] == "test"] == [3 * 9]


@slow
def test_a_terminal_shows_the_rich_bar_with_epoch_lines_above_it_and_the_log_stays_plain(tmp_path):
    # `script` runs the command on a pseudo-terminal, as a person at a terminal would see it; in
    # bf16-mixed, as on a GPU (autocast on the CPU stands in), on a machine of 16 cores (as
    # Python's site module, which imports sitecustomize first thing, makes the process believe).
    command = [sys.executable, "-m", f"{PARTS['sl_neural']}.train", "--config", "smoke", "--num-epochs", "3"]
    command += ["--precision", "bf16-mixed", "--wandb-mode", "offline", "--output.base-dir", str(tmp_path)]
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import os\nos.sched_getaffinity = lambda pid: set(range(16))\n")
    env = {**os.environ, "COLUMNS": "100", "WANDB_SILENT": "true"}
    screen = subprocess.run(
        ["script", "-qec", " ".join(command), "/dev/null"],
        cwd=ROOT,
        env={**env, "PYTHONPATH": f"{site}{os.pathsep}{PROJECT_PYTHONPATH}"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert screen.returncode == 0, screen.stdout[-3000:]
    assert "━━━" in screen.stdout  # rich's bar
    assert "v_num" not in screen.stdout and "💡 Tip" not in screen.stdout
    # The precision line says it once; not Lightning's line, nor its model summary's warning.
    assert "precision: bf16-mixed" in screen.stdout and "Automatic Mixed Precision" not in screen.stdout
    assert "not supported by the model summary" not in screen.stdout
    assert "does not have many workers" not in screen.stdout  # in-memory batches need none
    (run_dir,) = tmp_path.glob("smoke_*")
    log = (run_dir / "console.log").read_text()
    summaries = [line for line in log.splitlines() if line.startswith("epoch ")]
    assert [line.split(" | ")[0] for line in summaries] == ["epoch 0", "epoch 1", "epoch 2"]
    for line in summaries:  # whole on the screen too, not cut into by a redraw of the bar
        assert line in screen.stdout.replace("\r\n", "\n")
    assert "\x1b[" not in log and "it/s" not in log and "💡 Tip" not in log  # no bar, no colour
    # Lightning's own lines go above the bar too: written into it, they left the last epoch's
    # bar on the screen twice, once above them and once below.
    (before,) = re.findall(r"([^\n]*)`Trainer.fit` stopped", screen.stdout)
    assert TERMINAL_CONTROL.sub("", before).strip("\r") == "", repr(before)


def history(run_dir):
    """The step and val_loss of each validation, and the learning rate of each epoch."""
    events = read_jsonl(run_dir / "metrics.jsonl")
    validations = [e for e in events if "val_loss" in e]
    return (
        [e["step"] for e in validations],
        [e["val_loss"] for e in validations],
        [e["lr"] for e in events if "lr" in e],
    )


def assert_same_history(run_dir, expected):
    steps, losses, lrs = history(run_dir)
    assert steps == expected[0]
    assert losses == pytest.approx(expected[1], rel=1e-5) and lrs == pytest.approx(expected[2])


@slow
def test_resumed_run_matches_an_uninterrupted_one(tmp_path):  # RES-1
    # A high learning rate and no plateau patience: val_loss rises after epoch 4, the last
    # before the split, and the scheduler step that halves the rate then is the resume's to take.
    settings = {"learning_rate": 0.1, "lr_patience": 0, "patience": 10}
    train.main_with_config(smoke_config(tmp_path / "straight", num_epochs=7, **settings))
    (straight,) = (tmp_path / "straight").glob("smoke_*")
    # The split run also keeps its 3 latest epochs, which a resume must not mistake for last.
    train.main_with_config(smoke_config(tmp_path / "split", num_epochs=5, keep_last_n=3, **settings))
    (split,) = (tmp_path / "split").glob("smoke_*")
    train.main_with_config(
        smoke_config(tmp_path / "split", num_epochs=7, keep_last_n=3, **settings),
        resume_from=split / "checkpoints" / "last.ckpt",
    )
    assert_same_history(split, history(straight))
    assert history(straight)[2][5] < settings["learning_rate"]
    assert len(json.loads((split / "run.json").read_text())["history"]) == 2
    kept = sorted(path.name for path in (split / "checkpoints").glob("epoch=*.ckpt"))
    assert [name.split("-")[0] for name in kept] == ["epoch=4", "epoch=5", "epoch=6"]  # across the resume
    assert all(torch.load(split / "checkpoints" / name, weights_only=True)["epoch"] for name in kept)


# Schedules over the optimizer steps (RES-2): 2 epochs of 10 steps (1,257 training rows in
# batches of 120, the last rows dropped; in 60s they make 20 batches, 10 steps of 2), the
# rate logged at each. The peak is at step 5 (a quarter of 20), the floor a tenth of the rate.
SCHEDULED = {
    "batch_size": 120,
    "num_epochs": 2,
    "log_every_n_steps": 1,
    "warmup_fraction": 0.25,
    "min_lr_fraction": 0.1,
    "keep_last_n": 2,
}
STEPS, PEAK = 20, 5


@pytest.fixture(scope="module")
def scheduled_runs(tmp_path_factory):
    """scheduled_runs(scheduler, field=value...) -> the run directory of a SCHEDULED run
    with that scheduler (and those fields changed), trained once per module."""
    done = {}

    def scheduled_run(scheduler, **overrides):
        key = (scheduler, *sorted(overrides.items()))
        if key not in done:
            folder = tmp_path_factory.mktemp(scheduler)
            train.main_with_config(smoke_config(folder, **{**SCHEDULED, "scheduler": scheduler, **overrides}))
            (done[key],) = folder.glob("smoke_*")
        return done[key]

    return scheduled_run


def rates(run_dir):
    """{optimizer step: learning rate} as LearningRateMonitor logged them."""
    return {e["step"]: e["lr/decay"] for e in read_jsonl(run_dir / "metrics.jsonl") if "lr/decay" in e}


def val_losses(run_dir):
    return {e["epoch"]: e["val_loss"] for e in read_jsonl(run_dir / "metrics.jsonl") if "val_loss" in e}


def cosine_rate(step, rate, floor):
    if step < PEAK:  # a line through zero that reaches the rate at the peak
        return rate * (step + 1) / (PEAK + 1)
    return floor + (rate - floor) * (1 + math.cos(math.pi * (step - PEAK) / (STEPS - PEAK))) / 2


@slow
@pytest.mark.parametrize("scheduler", ["cosine", "onecycle", "constant"])
def test_each_schedule_has_its_shape_over_the_optimizer_steps(scheduled_runs, scheduler):  # RES-2, CB-3
    rate = config.Smoke().learning_rate
    floor = SCHEDULED["min_lr_fraction"] * rate
    logged = rates(scheduled_runs(scheduler))
    assert sorted(logged) == list(range(STEPS))  # every optimizer step of the run
    curve = [logged[step] for step in range(STEPS)]
    if scheduler == "constant":
        assert curve == pytest.approx([rate] * STEPS)
    elif scheduler == "cosine":
        assert curve == pytest.approx([cosine_rate(step, rate, floor) for step in range(STEPS)])
        assert curve[0] == pytest.approx(rate / 6) and curve[-1] == pytest.approx(floor, rel=0.1)
    else:  # OneCycleLR: from 4% of the rate along a cosine to the peak, then down to the floor
        assert curve[0] == pytest.approx(rate / 25) and curve[PEAK] == pytest.approx(rate)
        assert curve[-1] == pytest.approx(floor)
    if scheduler != "constant":  # rises to the peak, then falls
        assert curve[: PEAK + 1] == sorted(set(curve[: PEAK + 1]))
        assert curve[PEAK:] == sorted(set(curve[PEAK:]), reverse=True)


@slow
@pytest.mark.parametrize("scheduler", ["cosine", "onecycle", "constant"])
def test_a_run_killed_after_an_epoch_resumes_on_its_schedule(scheduled_runs, tmp_path, scheduler):  # RES-1
    straight = scheduled_runs(scheduler)
    (first_epoch,) = (path.name for path in (straight / "checkpoints").glob("epoch=0-*.ckpt"))
    resume_from = killed_copy(straight, first_epoch, tmp_path)
    settings = {**SCHEDULED, "scheduler": scheduler}
    train.main_with_config(smoke_config(tmp_path, **settings), resume_from=resume_from)
    resumed = resume_from.parents[1]
    assert rates(resumed) == pytest.approx({s: r for s, r in rates(straight).items() if s >= STEPS // 2})
    assert val_losses(resumed) == pytest.approx({1: val_losses(straight)[1]}, rel=1e-5)


@slow
def test_two_accumulated_half_batches_keep_the_schedule_in_optimizer_steps(scheduled_runs):  # RES-2
    whole = rates(scheduled_runs("cosine"))
    halves = rates(scheduled_runs("cosine", batch_size=60, gradient_accumulation_steps=2))
    assert len(whole) == STEPS and halves == pytest.approx(whole)


@slow
def test_a_resume_that_would_stretch_the_schedule_is_refused(scheduled_runs, tmp_path):  # RES-2
    resume_from = killed_copy(scheduled_runs("cosine"), "last.ckpt", tmp_path)
    longer = smoke_config(tmp_path, **{**SCHEDULED, "scheduler": "cosine", "num_epochs": 3})
    with pytest.raises(ConfigError, match=r"spans 20 optimizer steps.* would make the run 30"):
        train.main_with_config(longer, resume_from=resume_from)


# Mid-epoch checkpoints (RES-1): validation every 4 steps and last.ckpt every 2, in epochs of
# 9 steps; as above, the learning rate halves along the way.
EVERY_N_STEPS = {"num_epochs": 6, "learning_rate": 0.05, "lr_patience": 0, "patience": 100}
EVERY_N_STEPS |= {"val_every_n_steps": 4, "checkpoint_every_n_steps": 2}


@pytest.fixture(scope="module")
def every_n_steps_run(tmp_path_factory):
    """An uninterrupted run with these settings: (run directory, history)."""
    base_dir = tmp_path_factory.mktemp("every_n_steps")
    train.main_with_config(smoke_config(base_dir, **EVERY_N_STEPS))
    (run_dir,) = base_dir.glob("smoke_*")
    return run_dir, history(run_dir)


@slow
def test_validation_every_n_steps_is_n_steps_apart_across_epochs(every_n_steps_run):  # RES-1, CB-1
    run_dir, (steps, _, lrs) = every_n_steps_run
    trained = torch.load(run_dir / "checkpoints" / "last.ckpt", weights_only=True)["global_step"]
    assert trained == 6 * 9  # training ended between validations: last.ckpt still holds its last step
    assert steps == list(range(3, trained, 4))  # logged at the step before the count (Lightning's)
    assert min(lrs) < EVERY_N_STEPS["learning_rate"]


@slow
def test_a_run_killed_in_validation_resumes_and_validates(tmp_path, monkeypatch, every_n_steps_run):  # RES-1
    # During the validation after step 24, in epoch 2, whose end halves the learning rate.
    kill_next_run(monkeypatch, "on_validation_batch_start", lambda trainer: trainer.global_step == 24)
    with pytest.raises(Killed):
        train.main_with_config(smoke_config(tmp_path, **EVERY_N_STEPS))
    (run_dir,) = tmp_path.glob("smoke_*")
    last = run_dir / "checkpoints" / "last.ckpt"
    # The checkpoint of step 22: none is taken just before a validation, which a resume would skip.
    assert torch.load(last, weights_only=True)["global_step"] == 22
    train.main_with_config(smoke_config(tmp_path, **EVERY_N_STEPS), resume_from=last)
    assert_same_history(run_dir, every_n_steps_run[1])


@slow
def test_checkpoint_minutes_rewrite_last_mid_epoch(tmp_path, monkeypatch):  # RES-1
    # A clock always due: last.ckpt at each logging step (every 3), mid-epoch (9 steps) too.
    kill_next_run(monkeypatch, "on_train_batch_start", lambda trainer: trainer.global_step == 13)
    with pytest.raises(Killed):
        train.main_with_config(smoke_config(tmp_path, checkpoint_minutes=1e-9))
    (run_dir,) = tmp_path.glob("smoke_*")
    assert torch.load(run_dir / "checkpoints" / "last.ckpt", weights_only=True)["global_step"] == 12


@slow
def test_checkpoints_within_an_epoch_say_nothing_on_the_console(tmp_path, caplog):  # RES-1
    caplog.set_level(logging.INFO)
    train.main_with_config(smoke_config(tmp_path, checkpoint_every_n_steps=2))
    assert "weights_only" not in caplog.text  # Lightning's note on each save it was not told of


@slow
def test_a_run_killed_mid_epoch_resumes_as_if_never_stopped(tmp_path, every_n_steps_run):  # RES-1
    assert_same_history(killed_mid_epoch_and_resumed(tmp_path, EVERY_N_STEPS), every_n_steps_run[1])


@slow
def test_a_run_with_data_workers_killed_mid_epoch_resumes_as_if_never_stopped(tmp_path, every_n_steps_run):
    # RES-1: workers draw batches as soon as a resumed run makes its loader's iterator, before the
    # fit loop sets the epoch; evaluation workers seed themselves once in each process.
    workers = killed_mid_epoch_and_resumed(tmp_path, {**EVERY_N_STEPS, "num_workers": 2})
    assert_same_history(workers, every_n_steps_run[1])


COSINE = {**EVERY_N_STEPS, "scheduler": "cosine", "warmup_fraction": 0.1}


@slow
def test_a_run_with_a_schedule_of_its_length_killed_mid_epoch_resumes_as_if_never_stopped(tmp_path):  # RES-1
    # Its length is counted as the optimizer is made, before the checkpoint is restored: the
    # resumed epoch started again at its first batch.
    train.main_with_config(smoke_config(tmp_path / "straight", **COSINE))
    (straight,) = (tmp_path / "straight").glob("smoke_*")
    assert_same_history(killed_mid_epoch_and_resumed(tmp_path / "killed", COSINE), history(straight))


@slow
def test_a_run_that_found_its_batch_size_resumes_with_it(tmp_path):  # RES-1, MEM-2
    # Searching again restored the finder's own checkpoint over the resumed one: epoch 0 again.
    settings = {"find_batch_size": True, "num_epochs": 3, "patience": 100}
    train.main_with_config(smoke_config(tmp_path / "straight", **settings))
    train.main_with_config(smoke_config(tmp_path / "split", **{**settings, "num_epochs": 1}))
    (straight,), (split,) = (tmp_path / "straight").glob("smoke_*"), (tmp_path / "split").glob("smoke_*")
    last = split / "checkpoints" / "last.ckpt"
    train.main_with_config(smoke_config(tmp_path / "split", **settings), resume_from=last)
    assert_same_history(split, history(straight))


@slow
def test_a_run_checkpointed_at_its_last_batch_resumes_into_a_whole_epoch(tmp_path):  # RES-1, LOG-4
    # Validating every 9 steps, at each epoch's last batch: last.ckpt is taken there, before the
    # epoch ends. The resumed run trained an epoch of no batches, dropped that validation's
    # metrics.jsonl row and left the epoch's end without tracking/.
    settings = {"val_every_n_steps": 9, "patience": 100}
    train.main_with_config(smoke_config(tmp_path / "straight", **settings))
    train.main_with_config(smoke_config(tmp_path / "split", **{**settings, "num_epochs": 1}))
    (straight,), (split,) = (tmp_path / "straight").glob("smoke_*"), (tmp_path / "split").glob("smoke_*")
    train.main_with_config(
        smoke_config(tmp_path / "split", **settings), resume_from=split / "checkpoints" / "last.ckpt"
    )
    resumed, uninterrupted = logged_values(split), logged_values(straight)
    assert (8, "tracking/best_epoch") in resumed and (8, "val_loss") in resumed
    # The epoch means of the epoch it resumed in cover its batches after the resume: none.
    assert resumed == pytest.approx(
        {key: v for key, v in uninterrupted.items() if key != (8, "train_loss_epoch")}
    )


def logged_values(run_dir) -> dict[tuple[int, str], float]:
    """Each metric logged in metrics.jsonl by step, but for timing/ and system/."""
    return {
        (event["step"], key): value
        for event in read_jsonl(run_dir / "metrics.jsonl")
        if event["event"] == "metrics"
        for key, value in event.items()
        if key not in ("time", "event", "step") and not key.startswith(("timing/", "system/"))
    }


def killed_mid_epoch_and_resumed(base_dir, settings: dict) -> Path:
    """A smoke run with `settings`, killed at a mid-epoch checkpoint and resumed; its directory."""
    flags = as_flags({**digits_run(base_dir), **settings})  # as smoke_config() gives them
    command = [sys.executable, "-m", f"{PARTS['sl_neural']}.train", "--config", "smoke", *flags]
    command += ["--wandb-mode", "disabled", "--output.base-dir", str(base_dir)]
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    killed_at = kill_at_a_mid_epoch_checkpoint(process, base_dir, after_step=20)
    (run_dir,) = base_dir.glob("smoke_*")
    last = run_dir / "checkpoints" / "last.ckpt"
    train.main_with_config(smoke_config(base_dir, **settings), resume_from=last)
    assert killed_at > 20 and len(json.loads((run_dir / "run.json").read_text())["history"]) == 2
    return run_dir


def kill_at_a_mid_epoch_checkpoint(process: subprocess.Popen, base_dir, after_step: int) -> int:
    """kill -9 the run once its last.ckpt was taken within an epoch, after `after_step`;
    returns that checkpoint's step."""
    deadline = time.monotonic() + 600
    while process.poll() is None and time.monotonic() < deadline:
        if (mid_epoch_step(base_dir) or 0) > after_step:
            process.send_signal(signal.SIGSTOP)  # last.ckpt cannot change while it is read again
            if (step := mid_epoch_step(base_dir) or 0) > after_step:
                process.kill()
                process.wait()
                return step
            process.send_signal(signal.SIGCONT)
        time.sleep(0.005)
    pytest.fail("the run ended before a mid-epoch checkpoint could be seen")


def mid_epoch_step(base_dir) -> int | None:
    """The step of the run's last.ckpt where it was taken within an epoch."""
    with contextlib.suppress(OSError, RuntimeError, StopIteration):
        checkpoint = torch.load(next(base_dir.glob("smoke_*/checkpoints/last.ckpt")), weights_only=True)
        if not checkpoint["loops"]["fit_loop"]["epoch_loop.batch_progress"]["is_last_batch"]:
            return checkpoint["global_step"]
    return None


@slow
def test_last_checkpoint_is_the_latest_epoch_not_the_best(tmp_path):  # CB-1, CB-2, OUT-3
    # With a zero learning rate val_loss never improves after epoch 0: early stopping's
    # patience of 2 ends the run after epoch 2.
    train.main_with_config(smoke_config(tmp_path, learning_rate=0.0, num_epochs=50, patience=2))
    (run_dir,) = tmp_path.glob("smoke_*")
    epoch = {
        name: torch.load(run_dir / "checkpoints" / f"{name}.ckpt", weights_only=True)["epoch"]
        for name in ("best", "last")
    }
    assert epoch == {"best": 0, "last": 2}
    assert_ended(run_dir, "finished", "patience", "for 2 checks")


@slow
def test_wall_clock_budget_ends_the_run_and_still_tests(tmp_path):  # CFG-4
    cfg = smoke_config(tmp_path, max_wall_clock_hours=1e-7, num_epochs=50)
    test_metrics = train.main_with_config(cfg)
    (run_dir,) = tmp_path.glob("smoke_*")
    validations = [e for e in read_jsonl(run_dir / "metrics.jsonl") if "val_loss" in e]
    # Stopped within its first epoch (9 steps); Lightning still validates before it ends.
    assert len(validations) == 1 and validations[0]["epoch"] == 0 and validations[0]["step"] < 9
    # The clock is read at the steps Lightning logs: the budget, spent by the first step,
    # ends training at the first of those.
    last = torch.load(run_dir / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=False)
    assert last["global_step"] == cfg.log_every_n_steps
    assert (run_dir / "checkpoints" / "best.ckpt").is_file()
    assert "test_accuracy" in test_metrics
    assert_ended(run_dir, "finished", "budget", "max_wall_clock_hours 1e-07 spent")


@slow
def test_batch_size_finder_changes_the_batch_size(tmp_path):  # MEM-1, MEM-2
    train.main_with_config(smoke_config(tmp_path, find_batch_size=True, batch_size=8, num_epochs=1))
    (run_dir,) = tmp_path.glob("smoke_*")
    # Found once, before training; test() does not search again.
    (found,) = re.findall(r"using batch size (\d+)", (run_dir / "console.log").read_text())
    assert int(found) > 8
    # config.json keeps what was asked and records what the run used, side by side.
    saved = json.loads((run_dir / "config.json").read_text())
    assert saved["batch_size"] == 8 and saved["used"]["batch_size"] == int(found)
    chosen = "bf16-mixed" if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else "32-true"
    assert saved["precision"] == "auto" and saved["used"]["precision"] == chosen
    assert TaskConfig.from_dict(saved).batch_size == 8  # --resume reads it as the config


@slow
@pytest.mark.parametrize("bad", ["inf", "name too long"])
def test_bad_data_on_the_command_line_exits_2_and_is_logged(tmp_path, bad):  # DATA-1
    path = tmp_path / "bad.csv"
    digits().assign(pixel_0_4=float("inf")).to_csv(path, index=False)
    if bad == "name too long":  # longer than a file system allows (found by test_fuzz.py)
        path = tmp_path / ("x" * 300 + ".csv")
    command = [
        "-m",
        f"{PARTS['sl_neural']}.train",
        "--config",
        "smoke",
        "--data-path",
        str(path),
        "--wandb-mode",
        "disabled",
    ]
    env = {**os.environ, "PYTHONPATH": PROJECT_PYTHONPATH, "GPU_LOCK_PATH": str(tmp_path / "lock")}
    result = subprocess.run([sys.executable, *command], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    said = "column 'pixel_0_4'" if bad == "inf" else "file name too long"
    assert said in result.stderr
    if bad == "name too long":  # a path refused as such is refused before a run directory exists
        assert not (tmp_path / "output").exists()
        return
    (run_dir,) = (tmp_path / "output" / PARTS["sl_neural"]).glob("smoke_*")
    assert json.loads((run_dir / "run.json").read_text())["status"] == "failed"
    assert said in (run_dir / "console.log").read_text()


@slow
def test_training_that_diverges_fails_saying_where_and_saves_no_nan_model(tmp_path, webhook, hanging_port):
    command = [sys.executable, "-m", f"{PARTS['sl_neural']}.train", "--config", "smoke"]
    command += ["--learning-rate", "1e6", "--gradient-clip-val", "0", "--wandb-mode", "disabled"]
    # Its alert goes to a webhook that answers and to an SMTP server that hangs.
    command += ["--alerts.webhook-url", webhook.url, "--alerts.email-to", "ml@example.com"]
    command += ["--alerts.smtp-server", f"127.0.0.1:{hanging_port}", "--alerts.timeout-seconds", "1"]
    env = {**os.environ, "PYTHONPATH": PROJECT_PYTHONPATH, "GPU_LOCK_PATH": str(tmp_path / "lock")}
    result = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert result.returncode == 2, result.stderr[-2000:]
    assert "training diverged: the " in result.stderr and "(now 1e+06)" in result.stderr
    assert "Traceback" not in result.stderr
    (run_dir,) = (tmp_path / "output" / PARTS["sl_neural"]).glob("smoke_*")
    record = json.loads((run_dir / "run.json").read_text())
    assert record["status"] == "failed"
    ((kind, level, text),) = [(post["kind"], post["level"], post["text"]) for post in webhook.received]
    assert (kind, level) == ("diverged", "ERROR") and "training diverged: the " in text
    assert [alert["kind"] for alert in record["alerts"]] == ["diverged"]
    assert f"ALERT ERROR {run_dir.name}: diverged: training diverged" in (run_dir / "console.log").read_text()
    assert "warning: alert 'diverged' not delivered by email: timed out" in result.stderr
    assert not (run_dir / "model.pt").exists()
    for checkpoint in (run_dir / "checkpoints").glob("*.ckpt"):  # only those from before it
        weights = torch.load(checkpoint, map_location="cpu", weights_only=False)["state_dict"].values()
        assert all(torch.isfinite(w).all() for w in weights if w.is_floating_point()), checkpoint.name
    for line in (run_dir / "metrics.jsonl").read_text().splitlines():
        json.loads(line, parse_constant=lambda name: pytest.fail(f"bare {name} in metrics.jsonl"))


@pytest.mark.parametrize(
    ("change", "column"),
    [
        (lambda t: t.assign(pixel_1_1="dark"), "pixel_1_1"),  # text where the bundled data has numbers
        (lambda t: t.assign(pixel_1_2=float("inf")), "pixel_1_2"),  # not finite
        (lambda t: t.assign(pixel_2_2=t["pixel_2_2"] + 100), "pixel_2_2"),  # outside the digits' 0..16
        (lambda t: t.drop(columns="target"), "target"),  # no label column
        (lambda t: t.assign(target=None), "target"),  # no row with a label
    ],
)
def test_bad_data_is_refused_naming_the_column(change, column):  # DATA-1
    cfg = classifier()
    table = change(digits())
    digits_range = SimpleNamespace(load_table=lambda _: table, value_range=lambda _: (0.0, 16.0))
    datamodule = TableDataModule(cfg, digits_range)
    with pytest.raises(DataValidationError, match=column):
        datamodule.prepare_data()


def test_a_table_with_text_columns_under_a_value_range_is_one_line():  # DATA-1
    # value_range() given a range of one's own, on a table with text columns.
    table = digits().assign(island="Biscoe")
    ranged = SimpleNamespace(
        __name__=data.__name__, load_table=lambda _: table, value_range=lambda _: (0, 1e4)
    )
    said = r"column\(s\) 'island' hold text \('Biscoe' at row 0\), but .*value_range\(cfg\) gives 0 to 10000 "
    with pytest.raises(DataValidationError, match=said) as refused:
        TableDataModule(classifier(), ranged).prepare_data()
    assert len(str(refused.value).splitlines()) == 1


def test_a_table_out_of_the_parts_range_says_where_the_range_comes_from():  # DATA-1
    # load_table() edited to return a table of one's own, value_range() left as it was.
    cfg = TaskConfig()
    if (bounds := data.value_range(cfg)) is None:
        pytest.skip("this part's data.py gives no value range for its table")
    table = data.load_table(cfg)
    features = cfg.feature_columns or [name for name in table.columns if name not in cfg.label_column]
    table = table.assign(**{features[0]: bounds[1] + 100})
    edited = SimpleNamespace(__name__=data.__name__, load_table=lambda _: table, value_range=data.value_range)
    said = rf"{bounds[0]:g} to {bounds[1]:g} is what {data.__name__}\.value_range\(cfg\) gives"
    with pytest.raises(DataValidationError, match=said):
        TableDataModule(cfg, edited).prepare_data()


def test_a_table_of_ones_own_is_not_held_to_the_bundled_datas_range(tmp_path):  # DATA-1
    path = tmp_path / "scaled.csv"
    digits().assign(pixel_2_2=1e4).to_csv(path, index=False)
    cfg = classifier(data_path=str(path))
    if data.value_range(cfg) is not None:
        pytest.skip("this part's data.py holds a table given by --data-path to its value range")
    datamodule_of(cfg).prepare_data()


def test_data_py_needs_only_load_table(tmp_path):  # DATA-1: its contract, as an older data.py meets it
    TableDataModule(TaskConfig(), SimpleNamespace(load_table=data.load_table)).prepare_data()
    returns_rows = SimpleNamespace(__name__="part1.data", load_table=lambda cfg: [[0.0, 1]])
    with pytest.raises(DataValidationError, match=r"load_table\(cfg\) returned a list, not a DataFrame"):
        TableDataModule(TaskConfig(), returns_rows).prepare_data()
    renamed = SimpleNamespace(__name__="part1.data", read_rows=data.load_table)  # a traceback before
    with pytest.raises(DataValidationError, match=r"no function load_table; the pipeline calls part1\.data"):
        TableDataModule(TaskConfig(), renamed).prepare_data()


@pytest.mark.parametrize(
    ("contents", "message"),
    [
        (None, "no such file"),
        ("", "cannot read it as a table"),
        ("pixel,label\n1.0,0\n2.0,1\n", r"no column\(s\) target \(set --label-column"),
    ],
)
def test_unreadable_or_unusable_files_are_refused(tmp_path, contents, message):  # DATA-1
    path = tmp_path / "data.csv"
    if contents is not None:
        path.write_text(contents)
    with pytest.raises(DataValidationError, match=message):
        datamodule_of(classifier(data_path=str(path))).prepare_data()


@pytest.mark.parametrize("task", ["classification", "regression"])
def test_too_few_rows_for_a_stratified_split_is_a_clear_error(tmp_path, task):  # DATA-1
    path = tmp_path / "tiny.csv"
    rows = 12 if task == "classification" else 3  # a regression splits any rows but two or three
    digits().head(rows).to_csv(path, index=False)
    datamodule = datamodule_of(classifier(data_path=str(path), task=task))
    with pytest.raises(DataValidationError, match=f"cannot split {rows} rows"):
        datamodule.setup("fit")


def test_a_class_too_scarce_to_split_is_named_whole_in_the_error_and_run_json(tmp_path):  # DATA-1
    path = tmp_path / "five.csv"
    pd.DataFrame({"a": range(5), "b": range(5), "y": ["x", "y", "x", "z", "y"]}).to_csv(path, index=False)
    cfg = smoke_config(tmp_path, data_path=str(path), label_column=("y",), task="classification")
    cfg = dataclasses.replace(cfg, feature_columns=())
    said = f"{path}: cannot split 5 rows into train/val/test by class: class(es) x (2), y (2), z (1) of 'y'"
    with pytest.raises(DataValidationError, match=re.escape(said)) as error:
        train.main_with_config(cfg)
    (run_dir,) = tmp_path.glob("smoke_*")
    detail = json.loads((run_dir / "run.json").read_text())["end_detail"]
    assert detail == f"DataValidationError: {error.value}"  # all of it, not its first 200 characters
    assert len(detail) > 200


@pytest.mark.parametrize("rows", [3, 4])
def test_a_class_of_a_few_rows_that_cannot_be_held_out_is_named_with_its_rows(tmp_path, rows):  # DATA-1
    path = tmp_path / "rare.csv"
    table = digits().head(150)
    table.assign(target=table["target"].mask(table.index < rows, 99)).to_csv(path, index=False)
    with pytest.raises(DataValidationError) as error:
        datamodule_of(classifier(data_path=str(path))).setup("fit")
    said = str(error.value)
    assert f"class(es) 99 ({rows}) of 'target' have too few rows" in said and "--val-fraction 0.15" in said


def test_a_label_of_many_numbers_split_as_classes_suggests_a_regression(tmp_path):  # DATA-1
    path = tmp_path / "amounts.csv"
    table = digits().head(150)
    table.assign(target=table.index % 60 * 7).to_csv(path, index=False)  # 60 numbers, 2 or 3 rows each
    with pytest.raises(DataValidationError, match=r"\(60 distinct numbers: to predict a number, pass --task"):
        datamodule_of(classifier(data_path=str(path))).setup("fit")


def test_a_regression_whose_test_split_is_one_row_is_tested(tmp_path):  # DATA-1
    path = tmp_path / "five.csv"
    pd.DataFrame({"x": [0.1, -0.2, 0.3, 0.4, -0.5], "y": [1.0, 2.0, 0.5, 3.0, 1.5]}).to_csv(path, index=False)
    cfg = smoke_config(tmp_path, data_path=str(path), label_column=("y",), task="regression")
    test_metrics = train.main_with_config(cfg)
    (run_dir,) = tmp_path.glob("smoke_*")
    assert len(pd.read_csv(run_dir / "test_predictions.csv")) == 1 and "test_loss" in test_metrics


def test_a_label_with_one_class_is_refused(tmp_path):  # DATA-1
    path = tmp_path / "one_class.csv"
    digits().assign(target=3).to_csv(path, index=False)
    datamodule = datamodule_of(classifier(data_path=str(path)))
    datamodule.prepare_data()
    with pytest.raises(DataValidationError, match=r"one class \(3\) in all 1797 rows"):
        datamodule.setup("fit")


def test_no_training_batch_has_a_single_example_for_batchnorm(tmp_path):
    path = tmp_path / "digits.csv"
    digits().to_csv(path, index=False)
    split = {"val_fraction": 0.15, "test_fraction": 0.15, "split_seed": 0}
    datamodule = datamodule_of(classifier(data_path=str(path), batch_size=8, **split))
    datamodule.prepare_data()
    datamodule.setup("fit")
    assert len(datamodule.train_dataset) % 8 == 1  # the split that used to end on a batch of one
    assert min(len(labels) for _, labels, _ in datamodule.train_dataloader()) == 8
    assert sum(len(labels) for _, labels, _ in datamodule.val_dataloader()) == len(datamodule.val_dataset)


def test_batches_are_the_rows_a_default_loader_would_collate():
    datamodule = datamodule_of(TaskConfig(batch_size=32))
    datamodule.prepare_data()
    datamodule.setup("fit")
    for served in (datamodule.train_dataloader(), datamodule.val_dataloader()):
        rows = torch.utils.data.TensorDataset(*served.dataset.tensors)  # collated one row at a time
        collated = torch.utils.data.DataLoader(
            rows, batch_size=32, sampler=served.sampler, drop_last=served.drop_last
        )
        pairs = list(zip(served, collated, strict=True))
        assert len(pairs) > 1
        assert all(torch.equal(a, b) for batch in pairs for a, b in zip(*batch, strict=True))


def test_own_csv_trains_like_the_bundled_data(tmp_path):
    path = tmp_path / "digits.csv"
    data.load_table(TaskConfig()).to_csv(path, index=False)
    datamodule = datamodule_of(TaskConfig(data_path=str(path)))
    datamodule.prepare_data()
    datamodule.setup("fit")
    assert len(datamodule.train_dataset) + len(datamodule.val_dataset) + len(datamodule.test_dataset) == len(
        pd.read_csv(path)
    )


@slow
def test_script_and_module_invocations_both_work():
    package = PARTS["sl_neural"]
    env = {**os.environ, "PYTHONPATH": PROJECT_PYTHONPATH}  # what running from the project folder provides
    for command in (["-m", f"{package}.train", "--help"], [f"{package}/train.py", "--help"]):
        result = subprocess.run([sys.executable, *command], cwd=ROOT, env=env, capture_output=True, text=True)
        assert result.returncode == 0, result.stderr
        assert "--learning-rate" in result.stdout


@slow
def test_bf16_mixed_trains_with_gradient_clipping(tmp_path):  # PRC-1, LIT-4
    # CPU bf16 autocast stands in for a GPU: the Trainer clips (gradient_clip_val 1.0)
    # under mixed precision, which Lightning refuses for a fused AdamW.
    test_metrics = train.main_with_config(smoke_config(tmp_path, precision="bf16-mixed"))
    (run_dir,) = tmp_path.glob("smoke_*")
    assert "precision: bf16-mixed" in (run_dir / "console.log").read_text()
    assert smoke_config(tmp_path).gradient_clip_val > 0
    assert test_metrics["test_accuracy"] > 0.3


@gpu
def test_bf16_smoke_run_on_gpu(tmp_path):  # PRC-1
    test_metrics = train.main_with_config(smoke_config(tmp_path))
    (run_dir,) = tmp_path.glob("smoke_*")
    assert "precision: bf16-mixed" in (run_dir / "console.log").read_text()
    assert test_metrics["test_accuracy"] > 0.3
    # Training on the CPU of a machine with a GPU: no bf16 autocast there.
    assert choose_precision("auto", "cpu") == "32-true" and choose_precision("auto", "gpu") == "bf16-mixed"


# A raw table of one's own (conftest.write_mixed_table): text and missing values among the
# features, rows without a label; each task trained on it once, tiny. The regression trains in
# bf16-mixed (autocast on the CPU stands in for a GPU's): predict, in float32, gives its test
# predictions again all the same.
TASKS = {
    "classification": {"label_column": ("kind",)},
    "regression": {"task": "regression", "label_column": ("height", "weight"), "precision": "bf16-mixed"},
}
TABLE_RUN = {"batch_size": 32, "num_epochs": 4, "learning_rate": 0.01, "log_every_n_steps": 2}
# What each task's report draws from the test predictions, and some metrics it logs.
TASK_FIGURES = {"classification": ["confusion_matrix", "roc"], "regression": ["predicted_vs_true"]}
TASK_KEYS = {
    "classification": {"val_acc", "test_accuracy", "test_balanced_accuracy", "test_roc_auc_ovr"},
    "regression": {"val_rmse_height", "val_rmse_weight", "test_rmse_height", "test_r2_weight"},
}


@pytest.fixture(scope="module")
def table_runs(tmp_path_factory):
    """table_runs(task) -> (run directory, test metrics, table): the run of that task on a
    raw table, trained once per module."""
    folder = tmp_path_factory.mktemp("raw_table")
    table = write_mixed_table(folder / "table.csv")
    done = {}

    def table_run(task):
        if task not in done:
            cfg = smoke_config(folder / task, report=True, data_path=str(table), **TABLE_RUN, **TASKS[task])
            test_metrics = train.main_with_config(cfg)
            (run_dir,) = (folder / task).glob("smoke_*")
            done[task] = run_dir, test_metrics, table
        return done[task]

    return table_run


@slow
@pytest.mark.parametrize("task", TASKS)
def test_a_raw_table_trains_for_its_task_and_reports_it(table_runs, task):  # DATA-1, LOG-3, OUT-4
    run_dir, test_metrics, path = table_runs(task)
    labels = list(TASKS[task]["label_column"])
    tested = read_predictions(run_dir / PREDICTIONS_FILE)
    # Every test row once, by its position in the table, with the table's own label values;
    # the rows without a label left out, as the run's log says.
    truth = pd.read_csv(path).loc[tested["row"], labels]
    assert tested["row"].is_unique and len(tested) == pytest.approx(0.15 * 298, abs=1)
    assert truth.notna().all().all()
    said = (run_dir / "console.log").read_text().count(" 2 of 300 rows have no ")
    assert said == 1  # once: testing after training reuses the rows that trained
    for label in labels:
        assert tested[f"true_{label}"].tolist() == pytest.approx(truth[label].tolist())
    # The test metrics the run returned are those of its predictions file.
    expected = {f"test_{name}": value for name, value in task_metrics(tested).items()}
    assert {name: test_metrics[name] for name in expected} == pytest.approx(expected, rel=1e-5)
    assert TASK_KEYS[task] <= set().union(*read_jsonl(run_dir / "metrics.jsonl"))
    if task == "classification":
        assert test_metrics["test_accuracy"] > 0.5  # three classes: chance is a third
    else:
        assert test_metrics["test_r2_height"] > 0.5
    assert_report(run_dir, ["learning_curves", *TASK_FIGURES[task]])
    results = [r for r in check_project(ROOT, [run_dir]).results if r.mode == "run"]
    assert results and [f"{r.id}: {r.why}" for r in results if r.status == "fail"] == []


@slow
@pytest.mark.parametrize("task", TASKS)
def test_predict_on_the_test_rows_gives_the_test_metrics(table_runs, task, tmp_path, monkeypatch, capsys):
    run_dir, test_metrics, table = table_runs(task)
    output = tmp_path / "predictions.csv"
    argv = [str(run_dir), "--data-path", str(table), "--rows", "test", "--output", str(output)]
    monkeypatch.setattr(sys, "argv", ["predict", *argv])
    predict.main()
    (scores,) = [line for line in capsys.readouterr().out.splitlines() if " rows with a known " in line]
    printed = dict(score.split() for score in scores.partition(": ")[2].split(" | "))
    again, tested = read_predictions(output), read_predictions(run_dir / PREDICTIONS_FILE)
    assert list(again.columns) == list(tested.columns) and list(again["row"]) == list(tested["row"])
    assert {f"test_{name}": float(value) for name, value in printed.items()} == pytest.approx(
        {f"test_{name}": test_metrics[f"test_{name}"] for name in printed}, rel=1e-4
    )
    numbers = [column for column in again.columns if column.startswith(("predicted_", "probability_"))]
    if task == "classification":
        numbers.remove("predicted_kind")
        assert list(again["predicted_kind"]) == list(tested["predicted_kind"])
    assert again[numbers].to_numpy() == pytest.approx(tested[numbers].to_numpy(), rel=1e-4, abs=1e-6)


@slow
def test_predict_takes_new_rows_and_refuses_a_table_without_the_runs_columns(
    table_runs, tmp_path, monkeypatch, capsys
):
    run_dir, _, table = table_runs("classification")
    new = pd.read_csv(table).drop(columns=["kind"]).head(6)
    new.loc[0, "colour"] = "purple"  # never seen in training: none of the colours
    new.loc[1, ["size", "spread", "colour"]] = None
    new.to_csv(tmp_path / "new.csv", index=False)
    output = tmp_path / "predictions.csv"
    argv = ["predict", str(run_dir), "--data-path", str(tmp_path / "new.csv"), "--output", str(output)]
    monkeypatch.setattr(sys, "argv", argv)
    predict.main()
    predicted = read_predictions(output)
    assert list(predicted["row"]) == list(range(6)) and "true_kind" not in predicted.columns
    probabilities = predicted[[f"probability_{name}" for name in ("high", "low", "mid")]]
    assert probabilities.sum(axis=1).tolist() == pytest.approx([1.0] * 6)
    printed = capsys.readouterr().out
    assert "metrics" not in printed  # no label, no metrics
    assert "column 'colour': 1 row(s) hold values training never saw (purple)" in printed

    for changed, said in (
        (new.drop(columns=["colour"]), "has no column(s) colour; the model reads size,"),
        (new.assign(size="big"), "column 'size' holds text ('big') where the run read numbers"),
        (new.assign(size=float("inf")), "column 'size' holds inf at row 0, which is not finite"),
    ):
        changed.to_csv(tmp_path / "new.csv", index=False)
        with pytest.raises(SystemExit) as exit_info:
            predict.main()
        (line,) = capsys.readouterr().err.splitlines()
        assert exit_info.value.code == 2
        assert line.startswith(f"error: --data-path {tmp_path / 'new.csv'}: {said}")


NO_DEVICE = "not a device to predict on; use cpu, or cuda where a GPU is visible"


@pytest.mark.parametrize(
    ("device", "said"),
    [
        ("meta", NO_DEVICE),  # it was "the checkpoint does not fit the model"
        ("gpu", NO_DEVICE),
        *[("mps", "this machine has no Apple GPU; use cpu")] * (not torch.backends.mps.is_available()),
        *[("cuda", "no CUDA GPU is visible; use cpu")] * (not torch.cuda.is_available()),
    ],
)
def test_predict_on_a_device_this_machine_lacks_is_one_line(
    device, said, smoke_run, tmp_path, monkeypatch, capsys
):
    argv = [str(smoke_run[0]), "--device", device, "--output", str(tmp_path / "out.csv")]
    monkeypatch.setattr(sys, "argv", ["predict", *argv])
    with pytest.raises(SystemExit) as exit_info:
        predict.main()
    assert exit_info.value.code == 2 and not (tmp_path / "out.csv").exists()
    assert capsys.readouterr().err == f"error: --device {device}: {said}\n"


@slow
def test_a_resumed_regression_matches_an_uninterrupted_one(table_runs, tmp_path):  # RES-1
    straight, _, table = table_runs("regression")
    settings = {**TABLE_RUN, **TASKS["regression"], "data_path": str(table)}
    train.main_with_config(smoke_config(tmp_path, **{**settings, "num_epochs": 2}))
    (split,) = tmp_path.glob("smoke_*")
    last = split / "checkpoints" / "last.ckpt"
    train.main_with_config(smoke_config(tmp_path, **settings), resume_from=last)
    assert_same_history(split, history(straight))
    saved = [torch.load(run / "model.pt", weights_only=True)["hyper_parameters"] for run in (split, straight)]
    assert saved[0]["encoding"] == saved[1]["encoding"]


def test_the_encoding_is_scikit_learns_fitted_on_the_training_rows(tmp_path):
    table = pd.read_csv(write_mixed_table(tmp_path / "table.csv"))[["size", "spread", "colour", "count"]]
    training, new = table.iloc[::2], table.iloc[1::2].copy()  # rows apart, as a split leaves them
    new.iloc[0, new.columns.get_loc("colour")] = "purple"  # never seen in training
    encoding = FeatureEncoding.fit(training, "the table")
    numbers = ["size", "spread", "count"]
    fitted = ColumnTransformer(
        [
            ("numbers", make_pipeline(SimpleImputer(strategy="median"), StandardScaler()), numbers),
            ("text", OneHotEncoder(handle_unknown="ignore", sparse_output=False), ["colour"]),
        ]
    ).fit(training.fillna({"colour": MISSING}))
    expected = fitted.transform(new.fillna({"colour": MISSING}))
    assert encoding.transform(new, "new rows") == pytest.approx(expected.astype("float32"), abs=1e-6)
    assert encoding.numeric == numbers and encoding.width == 3 + 4  # three colours and missing
    # float32, the network's numbers, holds neither: 1e39 became inf, and its row NaN.
    for beyond, shown in ((float("inf"), "inf"), (1e39, "1e+39"), (-1e39, "-1e+39")):
        changed = new.assign(size=[beyond, *new["size"].iloc[1:]])
        said = f"column 'size' holds {shown} at row {new.index[0]}, which is not finite within float32's"
        with pytest.raises(DataValidationError, match=re.escape(said)):
            encoding.transform(changed, "new rows")
    # A blank among the "1"s of a text column makes pandas read new rows' column as floats.
    codes = FeatureEncoding.fit(pd.DataFrame({"code": ["1", "x", "y", "1"]}), "the table")
    rows = [pd.DataFrame({"code": values}) for values in ([1.0, None], ["1", None])]
    as_read = [codes.transform(new_rows, "new rows") for new_rows in rows]
    assert as_read[0].tolist() == as_read[1].tolist() and as_read[0][0].sum() == 1
    # Plain data: it travels in checkpoints, which load with weights_only=True.
    whole = TableEncoding("regression", ["height"], encoding, target_means=[1.0], target_scales=[2.0])
    torch.save({"encoding": whole.to_dict()}, tmp_path / "saved.pt")
    assert TableEncoding.from_dict(torch.load(tmp_path / "saved.pt", weights_only=True)["encoding"]) == whole


def mixed_table_module(tmp_path, change=lambda table: table, **fields):
    """The DataModule of a config with these fields, for the raw table as `change` leaves it."""
    table = change(pd.read_csv(write_mixed_table(tmp_path / "table.csv")))
    cfg = classifier(**{"label_column": ("kind",), **fields})
    return TableDataModule(cfg, SimpleNamespace(__name__="part1.data", load_table=lambda _: table))


def unchanged(table):
    return table


@pytest.mark.parametrize(
    ("change", "fields", "message"),
    [
        (unchanged, {"task": "regression"}, r"'kind' holds text \('mid'\).*pass --task classification"),
        (unchanged, {"label_column": ("height",)}, r"holds fractions \(-?[\d.]+\), not .* --task regression"),
        (lambda t: t.assign(name=t.index.astype(str)), {}, r"column 'name' has 298 .*--feature-columns"),
        (lambda t: t.assign(spread=float("nan")), {}, r"'spread' has no value in any of the 208 training"),
        (unchanged, {"feature_columns": ("size", "shape")}, r"column\(s\) shape \(set --feature-columns"),
        (lambda t: t.assign(size=float("inf")), {}, r"column 'size': failed finite"),
        (
            lambda t: t.assign(size=t["size"].astype(object).mask(t.index % 100 == 5, "?")),
            {},
            r"column 'size' holds numbers and text \('\?' at row 5\); make those cells numbers",
        ),
        (lambda t: t.head(0), {}, r"^part1.data.load_table\(cfg\): has no rows$"),
        (lambda t: t.reset_index(names="Unnamed: 0"), {}, r"column 'Unnamed: 0' holds the row numbers 0, 1"),
        (
            lambda t: t.assign(customer_id=range(7, 7 + len(t))),
            {},
            r"column 'customer_id' gives each of its 300 rows a number of its own \(7, \.\.\.\): an",
        ),
        (lambda t: t.assign(day=pd.Timestamp("2024-05-01")), {}, r"column\(s\) 'day' hold dates or times"),
        (
            lambda t: t.assign(day=pd.date_range("2024-01-01", periods=len(t)).astype(str)),
            {},
            r"text column 'day' has 298 distinct values .*: dates: make numbers of them in load_table",
        ),
    ],
)
def test_a_table_that_does_not_fit_the_task_says_what_to_pass(tmp_path, change, fields, message):  # DATA-1
    datamodule = mixed_table_module(tmp_path, change, **fields)
    with pytest.raises(DataValidationError, match=message):
        datamodule.prepare_data()
        datamodule.setup("fit")


def numbered_kinds(table):
    """The mixed table with its classes numbered, as many tables hold them; its blank labels
    make pandas read the whole column as floats."""
    return table.assign(kind=table["kind"].map({"low": 0, "mid": 1, "high": 2}))


def test_whole_numbers_read_as_floats_are_integer_classes(tmp_path):  # DATA-1
    datamodule = mixed_table_module(tmp_path, numbered_kinds)
    datamodule.prepare_data()
    datamodule.setup("fit")
    assert [str(value) for value in datamodule.encoding.classes] == ["0", "1", "2"]


@slow
def test_predict_scores_integer_classes_with_or_without_blank_labels(tmp_path, monkeypatch, capsys):  # OUT-2
    table = numbered_kinds(pd.read_csv(write_mixed_table(tmp_path / "table.csv")))
    table.to_csv(tmp_path / "numbered.csv", index=False)
    settings = {**TABLE_RUN, "num_epochs": 1, "label_column": ("kind",)}
    train.main_with_config(smoke_config(tmp_path, **settings, data_path=str(tmp_path / "numbered.csv")))
    (run_dir,) = tmp_path.glob("smoke_*")
    assert set(read_predictions(run_dir / PREDICTIONS_FILE)["predicted_kind"].astype(str)) <= {"0", "1", "2"}
    for rows, labelled in ((table, 298), (table.dropna(subset=["kind"]).astype({"kind": int}), 298)):
        rows.to_csv(tmp_path / "new.csv", index=False)
        argv = ["predict", str(run_dir), "--data-path", str(tmp_path / "new.csv")]
        monkeypatch.setattr(sys, "argv", [*argv, "--output", str(tmp_path / "predictions.csv")])
        predict.main()
        printed = capsys.readouterr().out
        assert f"{labelled} rows with a known kind: accuracy " in printed and "does not know" not in printed


def test_test_predictions_keep_row_numbers_that_float32_rounds(tmp_path):  # OUT-2, DDP-1
    datamodule = mixed_table_module(tmp_path)
    datamodule.prepare_data()
    datamodule.setup("fit")
    rows = torch.tensor([2**24 + 1, 2**24 + 3, 2**31 + 5])  # float32: 2**24, 2**24 + 4, 2**31
    inputs = torch.zeros(len(rows), datamodule.encoding.features.width)

    class RowsOfABigTable(L.LightningDataModule):
        encoding = datamodule.encoding
        label_values = pd.DataFrame({"kind": ["low", "mid", "high"]}, index=rows.tolist())

        def test_dataloader(self):
            return DataLoader(TensorDataset(inputs, torch.tensor([1, 2, 0]), rows), batch_size=2)

    module = model_module.build_model(datamodule.cfg)
    trainer = L.Trainer(accelerator="cpu", logger=False, enable_progress_bar=False, default_root_dir=tmp_path)
    trainer.test(module, datamodule=RowsOfABigTable(), verbose=False)
    assert module.test_predictions["row"].tolist() == rows.tolist()
    assert module.test_predictions["true_kind"].tolist() == ["low", "mid", "high"]


def test_rows_without_a_label_are_left_out_with_a_warning(tmp_path, capsys):  # DATA-1
    datamodule = mixed_table_module(tmp_path, feature_columns=("size", "colour"))
    datamodule.prepare_data()
    datamodule.setup("fit")
    (warning,) = capsys.readouterr().err.splitlines()
    assert warning == (
        "warning: part1.data.load_table(cfg): 2 of 300 rows have no kind; they are left out of training "
        "and testing"
    )
    splits = (datamodule.train_dataset, datamodule.val_dataset, datamodule.test_dataset)
    rows = torch.cat([split.tensors[2] for split in splits]).tolist()
    assert sorted(rows) == [row for row in range(300) if row not in (3, 40)]
    assert datamodule.encoding.features.columns == ["size", "colour"]
    assert datamodule.encoding.classes == ["high", "low", "mid"]
