"""The RL part, trained for real: a smoke run, and the ways a run can end."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import multiprocessing
import os
import runpy
import shutil
import signal
import statistics
import subprocess
import sys
import time
import types
from pathlib import Path

import gymnasium
import lightning as L
import numpy as np
import psutil
import pytest
import torch
from conftest import (
    PARTS,
    ROOT,
    Killed,
    assert_ended,
    assert_report,
    default_config,
    gpu,
    kill_next_run,
    killed_copy,
    part_module,
    slow,
)
from tensordict import TensorDict
from torchrl.collectors import Collector
from torchrl.data import Bounded, OneHot, Unbounded
from torchrl.envs import ExplorationType, GymEnv, GymWrapper
from torchrl.envs.utils import check_env_specs, set_exploration_type

from src.cli import parse_cli
from src.config import ConfigError
from src.errors import DataValidationError
from src.rl import data as rl_data
from src.rl import evaluate as rl_evaluate
from src.rl.module import PPO
from src.rl.policy import ActionSpace
from src.runs.metrics_jsonl import read_jsonl

config = part_module("rl", "config")
data = part_module("rl", "data")
envs = part_module("rl", "envs")
model = part_module("rl", "model")
train = part_module("rl", "train")


WORKERS = {"env_workers": 2}  # the smoke config's 4 envs in two worker processes, not this one
PENDULUM = {"env_name": "Pendulum-v1", "normalize_observations": True}  # continuous actions


def one_cartpole(env_name):
    """A make_env that makes one env per call."""
    return GymEnv(env_name, categorical_action_encoding=True)


def configured_ppo(cfg):
    """The part's PPO module with its networks built, as Lightning's configure_model() builds them."""
    num_observations, space = rl_data.observation_and_action_space(data.make_env, cfg.env_name)
    ppo = model.build_model(cfg)
    ppo.hparams.update(num_observations=num_observations, num_actions=space.size)
    ppo.hparams.update(action_low=list(space.low), action_high=list(space.high))
    ppo.configure_model()
    return ppo


def smoke_config(tmp_path, report=False, **overrides):
    """The smoke config on CartPole-v1 (whatever environment the part has), writing into
    tmp_path without W&B; with its report only where a test reads it."""
    base = config.CONFIGS["smoke"]()
    output = dataclasses.replace(base.output, base_dir=str(tmp_path), report=report)
    fields = {"wandb_mode": "disabled", "env_name": "CartPole-v1", **overrides}
    return dataclasses.replace(base, output=output, **fields)


def worker_processes(parent: psutil.Process | None = None) -> list[psutil.Process]:
    """Live ParallelEnv workers below `parent` (this process if None), not multiprocessing's
    resource tracker, which lives as long as this process by design."""
    workers = []
    for child in (parent or psutil.Process()).children(recursive=True):
        with contextlib.suppress(psutil.NoSuchProcess):  # exited while read
            if "spawn_main" in " ".join(child.cmdline()) and still_running(child):
                workers.append(child)
    return workers


def still_running(process: psutil.Process) -> bool:
    """False once gone, or a zombie its parent (init, once the run has ended) has yet to collect."""
    with contextlib.suppress(psutil.NoSuchProcess):
        return process.status() != psutil.STATUS_ZOMBIE
    return False


@pytest.fixture(scope="module")
def smoke_run(smoke_runs):
    """The session's offline-W&B smoke run: (run directory, test metrics, metric events)."""
    run_dir, test_metrics = smoke_runs("rl")
    return run_dir, test_metrics, read_jsonl(run_dir / "metrics.jsonl")


@slow
def test_run_directory_holds_the_run(smoke_run):  # OUT-1, OUT-2, OUT-3
    run_dir, test_metrics, _ = smoke_run
    for name in ("config.json", "console.log", "metrics.jsonl", "model.pt", "checkpoints/best.ckpt"):
        assert (run_dir / name).stat().st_size > 0, name
    assert (run_dir / "checkpoints" / "last.ckpt").is_file()
    assert math.isfinite(test_metrics["test_episode_reward"])
    assert_ended(run_dir, "finished", "budget", "num_epochs 2 trained")


@slow
def test_metrics_cover_rewards_updates_and_timing(smoke_run):  # LOG-4, LOG-5, PRF-2..4, RL-11
    _, _, events = smoke_run
    keys = set().union(*events)
    assert {"episode_reward_step", "val_episode_reward", "train_loss_step", "frames"} <= keys
    assert {
        f"batch/{key}" for key in ("actual_updates", "kl_approx", "actor_grad_norm", "critic_grad_norm")
    } <= keys
    assert {"tracking/best_val_episode_reward", "total_params", "num_train_samples", "gpu_name"} <= keys
    assert any(key.startswith("system/") for key in keys)
    epochs = [e for e in events if "timing/env_step_seconds" in e]
    assert epochs and all(e["timing/env_step_seconds"] > 0 for e in epochs)
    for epoch in epochs:
        shares = sum(
            value for key, value in epoch.items() if key.startswith("timing/") and key.endswith("_pct")
        )
        assert shares == pytest.approx(100, abs=0.5)
    updates = [e["batch/actual_updates"] for e in events if "batch/actual_updates" in e]
    cfg = config.CONFIGS["smoke"]()
    most = cfg.ppo_epochs * cfg.frames_per_batch // cfg.batch_size
    assert all(1 <= count <= most for count in updates)  # KL early stopping may cut it short
    # Once a collection, at the step of Lightning's own metrics of that collection.
    batch_steps = [e["step"] for e in events if "batch/actual_updates" in e]
    assert batch_steps == [e["step"] for e in events if "train_loss_step" in e]


@slow
def test_model_artifact_reaches_the_offline_wandb_run(smoke_run):  # LOG-1, LOG-6
    run_dir, _, _ = smoke_run
    (history,) = (run_dir / "wandb").glob("offline-run-*/*.wandb")
    assert b"smoke-model" in history.read_bytes()


def evaluate_command(*args, monkeypatch, capsys):
    """`python -m partN.evaluate ARGS`, run in this process: (exit status, stdout, stderr)."""
    module = f"{PARTS['rl']}.evaluate"
    monkeypatch.setattr(sys, "argv", [module, *map(str, args)])
    try:
        runpy.run_module(module, run_name="__main__")
        status = 0
    except SystemExit as exit_info:
        status = exit_info.code
    captured = capsys.readouterr()
    return status, captured.out, captured.err


@slow
def test_evaluate_plays_the_runs_test_again(smoke_run, tmp_path, monkeypatch, capsys):
    run_dir, test_metrics, _ = smoke_run
    cfg = config.CONFIGS["smoke"]()
    output = tmp_path / "evaluation.json"
    status, out, _ = evaluate_command(run_dir, "--output", output, monkeypatch=monkeypatch, capsys=capsys)
    assert status == 0
    results = json.loads(output.read_text())
    # The run's test: its episodes, seeds and policy, played on the CPU.
    assert results["episodes"] == cfg.test_episodes and results["policy"] == str(run_dir / "model.pt")
    assert results["mean_reward"] == pytest.approx(test_metrics["test_episode_reward"])
    assert statistics.fmean(results["lengths"]) == pytest.approx(test_metrics["test_episode_length"])
    assert f"episode reward: mean {results['mean_reward']:.6g}, std {results['std_reward']:.6g}" in out
    more = rl_evaluate.play_saved_policy(run_dir, data, model.load_model_from_checkpoint, episodes=5, seed=3)
    assert len(more["rewards"]) == len(more["lengths"]) == 5 and more["seed"] == 3


@pytest.mark.parametrize("seed", ["-1", str(2**32)])
def test_evaluate_with_a_seed_gymnasium_refuses_is_one_line(seed, smoke_run, monkeypatch, capsys):
    run_dir, _, _ = smoke_run
    status, _, err = evaluate_command(run_dir, "--seed", seed, monkeypatch=monkeypatch, capsys=capsys)
    assert status == 2 and err.splitlines() == [f"error: --seed {seed}: give 0 to {2**32 - 2}"]


def run_dir_without_a_policy(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    return tmp_path


def another_parts_run(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "run.json").write_text('{"part": "part9"}')
    return tmp_path


@pytest.mark.parametrize(
    ("make_run_dir", "message"),
    [
        (lambda tmp_path: tmp_path / "missing", "missing does not exist"),
        (lambda tmp_path: tmp_path, "has no config.json, so it is not a run directory"),
        (
            run_dir_without_a_policy,
            "holds no policy to play: model.pt is empty or missing; checkpoints/best.ckpt is empty",
        ),
        (another_parts_run, "is a run of part9"),
    ],
    ids=["missing", "not-a-run", "no-policy", "another-part"],
)
def test_evaluate_of_a_path_that_is_no_run_is_one_line(make_run_dir, message, tmp_path, monkeypatch, capsys):
    status, _, err = evaluate_command(make_run_dir(tmp_path), monkeypatch=monkeypatch, capsys=capsys)
    assert status == 2 and len(err.splitlines()) == 1 and message in err


def test_evaluate_never_writes_over_a_file_of_the_run(smoke_run, tmp_path, monkeypatch, capsys):  # OUT-2
    run_dir, _, _ = smoke_run
    copied = shutil.copytree(run_dir, tmp_path / run_dir.name)
    policy = (copied / "model.pt").read_bytes()
    status, out, err = evaluate_command(
        copied, "--output", copied / "model.pt", monkeypatch=monkeypatch, capsys=capsys
    )
    assert status == 2 and err.splitlines() == [
        f"error: --output {copied / 'model.pt'}: is a file of the run {copied} already, which the "
        "episodes' results would replace: give a new file"
    ]
    assert (
        copied / "model.pt"
    ).read_bytes() == policy and "episode reward" not in out  # refused before playing


@pytest.fixture(scope="module")
def pendulum_run(smoke_runs):
    """The smoke run on PENDULUM, keeping both epochs' checkpoints: (run directory, test metrics)."""
    return smoke_runs("rl", keep_last_n=2, **PENDULUM)


@slow
def test_a_continuous_policy_trains_saves_and_evaluates(pendulum_run):  # LIT-3
    run_dir, test_metrics = pendulum_run
    assert_ended(run_dir, "finished", "budget", "num_epochs 2 trained")
    assert test_metrics["test_episode_length"] == 200  # Pendulum-v1's episodes are cut at 200 steps
    saved = model.load_model_from_checkpoint(run_dir / "model.pt")
    assert saved.action_space == ActionSpace(1, (-2.0,), (2.0,))
    # The observation statistics of every frame the best checkpoint had trained on, kept in model.pt.
    best = torch.load(run_dir / "checkpoints" / "best.ckpt", weights_only=True)
    assert saved.observation_normalizer.count.item() == best["frames"] > 0
    played = rl_evaluate.play_saved_policy(run_dir, data, model.load_model_from_checkpoint)
    assert played["mean_reward"] == pytest.approx(test_metrics["test_episode_reward"])


@slow
def test_a_continuous_run_resumes_with_its_observation_statistics(pendulum_run, tmp_path):  # RES-1
    run_dir, _ = pendulum_run
    (first_epoch,) = (path.name for path in (run_dir / "checkpoints").glob("epoch=0-*.ckpt"))
    resume_from = killed_copy(run_dir, first_epoch, tmp_path)
    train.main_with_config(smoke_config(tmp_path, keep_last_n=2, **PENDULUM), resume_from=resume_from)
    last = {
        name: torch.load(folder / "checkpoints" / "last.ckpt", weights_only=True)
        for name, folder in (("straight", run_dir), ("resumed", resume_from.parents[1]))
    }
    cfg = config.CONFIGS["smoke"]()
    per_epoch = cfg.iterations_per_epoch * cfg.frames_per_batch
    first = torch.load(run_dir / "checkpoints" / first_epoch, weights_only=True)["state_dict"]
    assert first["observation_normalizer.count"].item() == per_epoch
    # Restored from the checkpoint, then updated by the resumed epoch's frames: not begun again.
    for checkpoint in last.values():
        count = checkpoint["state_dict"]["observation_normalizer.count"]
        assert checkpoint["frames"] == count == 2 * per_epoch


@slow
def test_stop_file_ends_the_run_and_closes_the_workers(tmp_path):  # CB-4, RL-3
    stop = tmp_path / "STOP"
    stop.touch()
    train.main_with_config(smoke_config(tmp_path, report=True, num_epochs=50, stop_file=str(stop), **WORKERS))
    (run_dir,) = tmp_path.glob("smoke_*")
    assert [e["epoch"] for e in read_jsonl(run_dir / "metrics.jsonl") if "val_episode_reward" in e] == [0]
    assert worker_processes() == []
    assert_report(run_dir, ["learning_curves", "timing"])  # a run cut short gets its report too
    assert_ended(run_dir, "finished", "stop_file", f"STOP file {stop}: stopping after epoch 0")


@slow
def test_a_run_that_reaches_its_target_reward_ends_saying_so(tmp_path):  # CB-1, RES-1
    train.main_with_config(smoke_config(tmp_path, num_epochs=50, target_reward=1.0))
    (run_dir,) = tmp_path.glob("smoke_*")

    def validated() -> list[int]:
        return [e["epoch"] for e in read_jsonl(run_dir / "metrics.jsonl") if "val_episode_reward" in e]

    assert validated() == [0]
    assert_ended(run_dir, "finished", "target", "reached the target 1")
    # Resumed, its target still reached: nothing left to train. With a higher one, it trains on.
    last = run_dir / "checkpoints" / "last.ckpt"
    train.main_with_config(smoke_config(tmp_path, num_epochs=50, target_reward=1.0), resume_from=last)
    assert validated() == [0]
    assert_ended(run_dir, "finished", "target", "reached the target 1")
    train.main_with_config(smoke_config(tmp_path, num_epochs=2, target_reward=1e9), resume_from=last)
    assert validated() == [0, 1]
    assert_ended(run_dir, "finished", "budget", "num_epochs 2 trained")


@slow
def test_a_run_that_raises_closes_the_workers(tmp_path, monkeypatch):  # RL-3
    def failing_step(self, batch, batch_idx):
        raise RuntimeError("broken update")

    monkeypatch.setattr(PPO, "training_step", failing_step)
    with pytest.raises(RuntimeError, match="broken update"):
        train.main_with_config(smoke_config(tmp_path, report=True, **WORKERS))
    (run_dir,) = tmp_path.glob("smoke_*")
    assert worker_processes() == []
    assert_ended(run_dir, "failed", "error", "RuntimeError: broken update")
    # A failed run gets its report too, and the error it raised stays the one raised.
    assert "**failed** (RuntimeError('broken update'))" in (run_dir / "report.md").read_text()


@slow
def test_a_spent_wall_clock_budget_ends_the_run(tmp_path):  # CFG-4
    # Its workers close as the STOP file's do: both end the fit the same way.
    train.main_with_config(smoke_config(tmp_path, num_epochs=50, max_wall_clock_hours=1e-6))
    (run_dir,) = tmp_path.glob("smoke_*")
    assert len([e for e in read_jsonl(run_dir / "metrics.jsonl") if "frames" in e]) == 1
    assert_ended(run_dir, "finished", "budget", "max_wall_clock_hours 1e-06 spent, in epoch 0")


@slow
@pytest.mark.parametrize("signal_number", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_an_interrupted_run_leaves_no_worker_behind(tmp_path, signal_number):  # RL-3
    command = [sys.executable, "-m", f"{PARTS['rl']}.train", "--config", "smoke", "--num-epochs", "1000"]
    command += ["--env-workers", str(WORKERS["env_workers"])]
    command += ["--wandb-mode", "disabled", "--output.base-dir", str(tmp_path)]
    process = subprocess.Popen(
        command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + 120
    workers: list[psutil.Process] = []
    while len(workers) < WORKERS["env_workers"] and time.monotonic() < deadline:
        time.sleep(0.5)
        workers = worker_processes(psutil.Process(process.pid))
    assert workers, "the run never started its env workers"
    time.sleep(2)  # well into training
    process.send_signal(signal_number)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode != 0
    _, alive = psutil.wait_procs(workers, timeout=1)  # closed by the run, not orphaned and dying later
    assert [w for w in alive if still_running(w)] == [], stderr[-2000:]
    (run_dir,) = tmp_path.glob("smoke_*")
    name = "SIGINT (Ctrl-C)" if signal_number == signal.SIGINT else "SIGTERM"
    assert_ended(run_dir, "interrupted", "signal", name)


@slow
def test_a_run_whose_env_worker_is_killed_fails_and_leaves_no_worker_behind(tmp_path):  # RL-3
    command = [sys.executable, "-m", f"{PARTS['rl']}.train", "--config", "smoke", "--num-epochs", "1000"]
    command += ["--env-workers", str(WORKERS["env_workers"]), "--patience", "1000"]
    command += ["--wandb-mode", "disabled", "--output.base-dir", str(tmp_path)]
    process = subprocess.Popen(
        command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    try:
        deadline, workers = time.monotonic() + 120, []
        while time.monotonic() < deadline and not (workers and list(tmp_path.glob("smoke_*/checkpoints/*"))):
            time.sleep(0.5)
            workers = worker_processes(psutil.Process(process.pid))
        assert workers, "the run never started its env workers"
        killed = workers[0]
        killed.kill()  # a worker crashed, or the machine's OOM killer chose it
        _, stderr = process.communicate(timeout=180)  # ends: Python does not wait on the others
    finally:
        for leftover in [process, *workers]:
            with contextlib.suppress(psutil.NoSuchProcess, ProcessLookupError):
                leftover.kill()
    assert process.returncode != 0
    _, alive = psutil.wait_procs(workers, timeout=1)
    assert [w for w in alive if still_running(w)] == [], stderr[-2000:]
    (run_dir,) = tmp_path.glob("smoke_*")
    # The run's last word names the worker that died, not TorchRL's failure to close the others.
    died = f"EnvWorkerDied: environment worker process {killed.pid} was killed by signal 9 (Killed)"
    assert_ended(run_dir, "failed", "error", died)


class RaisingLineWalk(envs.LineWalk):
    """LineWalk whose every step raises, as a bug in one's own env would."""

    def _step(self, tensordict):
        raise ArithmeticError("a bug in the env's step")


def broken_line_walk(env_name, num_envs):
    return RaisingLineWalk(num_envs)


def test_an_env_that_raises_in_its_worker_is_the_errors_subject(tmp_path):  # RL-3
    cfg = smoke_config(tmp_path, num_envs=2, env_workers=2)
    env = rl_data.training_env(cfg, broken_line_walk, cfg.seed)
    collector = rl_data.Rollouts(env, None, frames_per_batch=32)
    # Not TorchRL's "Cannot close a process while it is still running", which it raises as it
    # fails to shut the other worker down.
    died = r"^environment worker process \d+ exited with status 1 "
    try:
        with pytest.raises(rl_data.EnvWorkerDied, match=died):
            next(iter(collector))
    finally:
        for worker in multiprocessing.active_children():  # this test's: the env's other worker
            worker.kill()
            worker.join()


def signalling_line_walk(env_name, num_envs):
    """LineWalk; made in a worker, the first worker here sends Ctrl-C to the run's process, the
    other takes a second longer, and each then leaves a file in START_FOLDER saying it started."""
    if (run := multiprocessing.parent_process()) is None:  # the run's process, reading the specs
        return envs.LineWalk(num_envs)
    folder = Path(os.environ["START_FOLDER"])
    try:
        (folder / "signalled").touch(exist_ok=False)
        os.kill(run.pid, signal.SIGINT)
    except FileExistsError:
        time.sleep(1)
    made = envs.LineWalk(num_envs)
    (folder / f"started-{os.getpid()}").touch()
    return made


@slow
def test_ctrl_c_while_env_workers_start_waits_until_they_run(tmp_path, monkeypatch):  # RL-3
    # Handled at once, it would take away the locks a worker still unpickles: that worker would
    # print a traceback after the run's end.
    monkeypatch.setenv("START_FOLDER", str(tmp_path))
    cfg = smoke_config(tmp_path, num_envs=2, env_workers=2)
    try:
        with pytest.raises(KeyboardInterrupt):
            rl_data.training_env(cfg, signalling_line_walk, cfg.seed)
        assert len(list(tmp_path.glob("started-*"))) == 2  # both had started when it came
    finally:
        for worker in multiprocessing.active_children():  # this test's: the env's workers
            worker.kill()
            worker.join()


def rates(run_dir):
    """{collection: learning rate} as LearningRateMonitor logged them."""
    return {e["step"]: e["lr/decay"] for e in read_jsonl(run_dir / "metrics.jsonl") if "lr/decay" in e}


@pytest.fixture(scope="module")
def cosine_run(tmp_path_factory):
    """The smoke run under a cosine schedule (too few steps for a warmup step), keeping both epochs'
    checkpoints; its run directory."""
    folder = tmp_path_factory.mktemp("cosine")
    train.main_with_config(smoke_config(folder, scheduler="cosine", keep_last_n=2))
    (run_dir,) = folder.glob("smoke_*")
    return run_dir


@slow
def test_the_schedule_steps_once_per_collection(cosine_run):  # RES-2
    cfg = config.CONFIGS["smoke"]()
    collections = cfg.num_epochs * cfg.iterations_per_epoch
    cosine = {step: (1 + math.cos(math.pi * step / collections)) / 2 for step in range(collections)}
    assert cfg.min_lr_fraction == 0  # the floor
    assert rates(cosine_run) == pytest.approx({step: cfg.learning_rate * c for step, c in cosine.items()})


@slow
def test_resume_continues_the_frame_count_and_the_schedule(cosine_run, tmp_path):  # RES-1, RES-2
    (first_epoch,) = (path.name for path in (cosine_run / "checkpoints").glob("epoch=0-*.ckpt"))
    resume_from = killed_copy(cosine_run, first_epoch, tmp_path)
    train.main_with_config(smoke_config(tmp_path, scheduler="cosine", keep_last_n=2), resume_from=resume_from)
    run_dir = resume_from.parents[1]
    frames = [e["frames"] for e in read_jsonl(run_dir / "metrics.jsonl") if "frames" in e]
    cfg = config.CONFIGS["smoke"]()
    assert frames[-1] == 2 * cfg.iterations_per_epoch * cfg.frames_per_batch
    checkpoint = torch.load(run_dir / "checkpoints" / "last.ckpt", weights_only=True)
    assert checkpoint["epoch"] == 1 and checkpoint["frames"] == frames[-1]  # epochs count from 0
    second_epoch = {step: r for step, r in rates(cosine_run).items() if step >= cfg.iterations_per_epoch}
    assert len(second_epoch) == 2 and rates(run_dir) == pytest.approx(second_epoch)


@slow
def test_a_run_killed_mid_epoch_resumes_its_frame_count(tmp_path, monkeypatch):  # RES-1
    # Evaluation after every second collection, last.ckpt after each; killed before the sixth and last.
    settings = {
        "num_epochs": 2,
        "iterations_per_epoch": 3,
        "val_every_n_steps": 2,
        "checkpoint_every_n_steps": 1,
    }
    kill_next_run(monkeypatch, "on_train_batch_start", lambda t: t.fit_loop.total_batch_idx == 5)
    with pytest.raises(Killed):
        train.main_with_config(smoke_config(tmp_path, **settings))
    (run_dir,) = tmp_path.glob("smoke_*")
    frames = config.CONFIGS["smoke"]().frames_per_batch
    last = run_dir / "checkpoints" / "last.ckpt"
    checkpoint = torch.load(last, weights_only=True)
    assert checkpoint["epoch"] == 1 and checkpoint["frames"] == 5 * frames  # epochs count from 0
    train.main_with_config(smoke_config(tmp_path, **settings), resume_from=last)
    events = read_jsonl(run_dir / "metrics.jsonl")
    # Each step once, counting the frames an uninterrupted run does (from freshly started envs).
    counted = [(e["step"], e["frames"]) for e in events if "frames" in e]
    assert counted == [(step, (step + 1) * frames) for step in range(6)]
    assert [(e["step"], e["epoch"]) for e in events if "val_episode_reward" in e] == [(1, 0), (3, 1), (5, 1)]


def test_custom_env_passes_torchrl_spec_checks():  # RL-5, RL-7, RL-10
    env = envs.LineWalk()
    assert isinstance(env.device, torch.device)
    check_env_specs(env)


@pytest.mark.parametrize(
    ("env_workers", "batch"),
    [pytest.param(2, (2, 2), marks=slow, id="two-workers"), pytest.param(0, (4,), id="this-process")],
)
def test_diagnostic_field_survives_the_collector(tmp_path, env_workers, batch):  # RL-1, RL-2, RL-5
    cfg = smoke_config(tmp_path, env_name="LineWalk", num_envs=4, env_workers=env_workers)
    env = rl_data.training_env(cfg, data.make_env, cfg.seed)
    collector = Collector(env, None, frames_per_batch=32)
    try:
        frames = next(iter(collector))
    finally:
        collector.shutdown()
    assert frames["next", "distance"].shape == (*batch, 8, 1)
    assert frames["next", "episode_reward"].shape == (*batch, 8, 1)  # RL-4
    assert worker_processes() == []


@pytest.mark.parametrize("env_name", ["CartPole-v1", "LineWalk"])
def test_an_evaluation_episode_is_the_same_in_any_batch(env_name):
    # Episode i starts from seed + i whichever batch plays it: DDP ranks or a wider batch play the same.
    cfg = config.CONFIGS["smoke"](env_name=env_name)
    policy = configured_ppo(cfg).greedy_policy()

    def played(width: int, seed: int, count: int) -> list[float]:
        env = rl_data.make_envs(data.make_env, env_name, width)
        env.set_seed(seed)
        return rl_data.first_episodes(env, policy, count)["next", "episode_reward"].flatten().tolist()

    five = played(5, seed=7, count=5)
    assert five[2:] == played(3, seed=9, count=3) and five[:2] == played(5, seed=7, count=2)


@pytest.mark.parametrize("overrides", [{}, PENDULUM], ids=["discrete", "continuous"])
def test_evaluation_plays_the_action_the_deterministic_policy_takes(overrides):
    cfg = config.CONFIGS["smoke"](**overrides)
    ppo = configured_ppo(cfg)
    torch.nn.init.normal_(ppo.actor[-1].weight, std=3.0)  # confident, varied choices, not near-ties
    size = ppo.hparams.num_observations
    observations = TensorDict({"observation": torch.randn(256, size) * 3}, [256])
    with set_exploration_type(ExplorationType.DETERMINISTIC), torch.no_grad():
        expected = ppo.policy(observations.clone())["action"]
        greedy = ppo.greedy_policy()(observations.clone())["action"]
    assert expected.unique().numel() >= 2
    if ppo.action_space.continuous:  # the mean, clipped to the bounds as the training envs clip it
        assert greedy.shape == (256, 1) and expected.abs().max() > 2.0
        expected = expected.clamp(-2.0, 2.0)
    torch.testing.assert_close(greedy, expected)


class BrokenLineWalk(envs.LineWalk):
    """LineWalk whose last walk observes NaN from the third step on: an env with a bug."""

    def _step(self, tensordict):
        stepped = super()._step(tensordict)
        if int(self._steps.max()) >= 3:
            stepped["observation"][-1, 0] = float("nan")
        return stepped


def test_a_non_finite_observation_ends_training_and_evaluation_in_one_line(tmp_path):  # DATA-1
    # Left alone, the policy samples from NaN deep inside torch (a discrete one), or acts on it.
    cfg = smoke_config(tmp_path, env_name="LineWalk", num_envs=4)
    make_env = lambda env_name, num_envs: BrokenLineWalk(num_envs)  # noqa: E731
    collector = Collector(rl_data.training_env(cfg, make_env, cfg.seed), None, frames_per_batch=32)
    said = r"env 'LineWalk' returned an observation of nan \(at \(3, 0\) of a batch shaped \(4, 2\)\)"
    try:
        with pytest.raises(DataValidationError, match=said):
            next(iter(collector))
    finally:
        collector.shutdown()
    policy = configured_ppo(config.CONFIGS["smoke"](env_name="LineWalk")).greedy_policy()
    with pytest.raises(DataValidationError, match="observations must be finite numbers"):
        rl_data.first_episodes(rl_data.evaluation_envs(make_env, "LineWalk", 4), policy, 4)


class NanRewardLineWalk(envs.LineWalk):
    """LineWalk whose first walk is rewarded NaN from the third step on: a simulator's bug."""

    def _step(self, tensordict):
        stepped = super()._step(tensordict)
        if int(self._steps.max()) >= 3:
            stepped["reward"][0, 0] = float("nan")
        return stepped


def test_a_non_finite_reward_ends_training_in_one_line(tmp_path):  # DATA-1
    # Left alone, it makes every loss of the batch NaN, which reads as a diverged run.
    cfg = smoke_config(tmp_path, env_name="LineWalk", num_envs=4)
    make_env = lambda env_name, num_envs: NanRewardLineWalk(num_envs)  # noqa: E731
    collector = Collector(rl_data.training_env(cfg, make_env, cfg.seed), None, frames_per_batch=32)
    said = r"env 'LineWalk' returned a reward of nan \(at \(0, 0\) of a batch shaped \(4, 1\)\): rewards must"
    try:
        with pytest.raises(DataValidationError, match=said):
            next(iter(collector))
    finally:
        collector.shutdown()


def test_validation_steps_as_many_envs_as_its_episodes(tmp_path):
    # Each env of a slow simulator costs a validation its steps: the test's wider batch is its own.
    widths = []

    def make_env(env_name, num_envs):
        widths.append(num_envs)
        return envs.LineWalk(num_envs)

    cfg = smoke_config(tmp_path, env_name="LineWalk", num_envs=4, eval_episodes=2, test_episodes=6)
    datamodule = rl_data.RolloutDataModule(cfg, types.SimpleNamespace(make_env=make_env))
    module = configured_ppo(cfg)
    quiet = {"logger": False, "enable_progress_bar": False, "enable_model_summary": False}
    trainer = L.Trainer(max_epochs=1, limit_train_batches=1, enable_checkpointing=False, **quiet)
    try:
        trainer.fit(module, datamodule=datamodule)
        trainer.test(module, datamodule=datamodule, verbose=False)
    finally:
        datamodule.close()
    assert sorted(set(widths) - {1, cfg.num_envs}) == [cfg.eval_episodes, cfg.test_episodes]


class SteeredLineWalk(envs.LineWalk):
    """LineWalk moving by any amount up to a step either way: a bounded continuous action
    (any amount at all: unbounded)."""

    def __init__(self, num_envs, bounded=True):
        super().__init__(num_envs)
        shape = (num_envs, 1)
        self.action_spec = Bounded(low=-1.0, high=1.0, shape=shape) if bounded else Unbounded(shape=shape)

    def _step(self, tensordict):
        steered = tensordict.clone(False)
        steered["action"] = tensordict["action"][..., 0] + 1  # LineWalk's left, stay, right: 0, 1, 2
        return super()._step(steered)


def test_the_envs_take_a_continuous_action_clipped_and_the_batch_keeps_the_sampled_one():
    """As SB3 does: the policy's normal distribution reaches past the bounds, and PPO's ratio
    needs the log-probability of the action it sampled, not of the one the env could take."""
    cfg = config.CONFIGS["smoke"]()
    make_env = lambda env_name, num_envs: SteeredLineWalk(num_envs)  # noqa: E731
    space = rl_data.observation_and_action_space(make_env, "LineWalk")[1]
    assert space == ActionSpace(1, (-1.0,), (1.0,))

    def step(action):
        env = rl_data.training_env(cfg, make_env, 3)
        state = env.reset()
        state["action"] = torch.full((cfg.num_envs, 1), action)
        stepped = env.step(state)
        env.close()
        return stepped

    far, bound = step(5.0), step(1.0)
    torch.testing.assert_close(far["next", "observation"], bound["next", "observation"])
    assert far["action"].eq(5.0).all()
    assert not torch.equal(step(0.5)["next", "observation"], bound["next", "observation"])


@slow
def test_a_continuous_action_without_bounds_trains_saves_and_loads(tmp_path, monkeypatch):
    monkeypatch.setattr(data, "make_env", lambda env_name, num_envs: SteeredLineWalk(num_envs, bounded=False))
    space = rl_data.observation_and_action_space(data.make_env, "LineWalk")[1]
    assert space == ActionSpace(1, (-math.inf,), (math.inf,))
    env = rl_data.training_env(smoke_config(tmp_path), data.make_env, 0)
    assert not any(isinstance(t, rl_data.ClipAction) for t in env.transform)  # nothing to clip to
    env.close()
    test_metrics = train.main_with_config(smoke_config(tmp_path, env_name="LineWalk"))
    assert math.isfinite(test_metrics["test_episode_reward"])
    (run_dir,) = tmp_path.glob("smoke_*")
    loaded = model.load_model_from_checkpoint(run_dir / "model.pt")
    assert loaded.action_space == space
    played = rl_evaluate.play_saved_policy(run_dir, data, model.load_model_from_checkpoint)
    assert played["mean_reward"] == pytest.approx(test_metrics["test_episode_reward"])  # the test again


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"frames_per_batch": 255}, "must be a multiple of num_envs"),
        ({"env_workers": 3}, "env_workers 3: use 0 or a divisor of num_envs 4"),
        ({"batch_size": 4096}, "at most frames_per_batch"),
        ({"clip_epsilon": 1.5}, "clip_epsilon 1.5"),
        ({"critic_coef": 0.0}, "critic_coef 0.0: must be positive"),
    ],
)
def test_bad_config_values_are_refused_by_name(overrides, message):  # CFG-3
    with pytest.raises(ConfigError, match=message):
        config.CONFIGS["smoke"](**overrides).validate()


@pytest.mark.parametrize(
    "flag", ["--find-batch-size", "--gradient-clip-val=1", "--gradient-accumulation-steps=2"]
)
def test_no_flag_is_offered_that_ppo_would_ignore(flag, capsys):  # CFG-3, RL-13
    with pytest.raises(SystemExit) as exit_info:
        parse_cli(config.CONFIGS, ["--config", "smoke", flag])
    assert exit_info.value.code == 2
    assert f"Unrecognized options: {flag.split('=')[0]}" in capsys.readouterr().err


def square_line_walk(env_name, num_envs):
    """LineWalk whose action is a 2 x 2 matrix of values: no flat vector."""
    env = envs.LineWalk(num_envs)
    env.action_spec = Unbounded(shape=(num_envs, 2, 2))
    return env


def test_fewer_evaluation_episodes_than_processes_are_refused_before_the_run():  # CFG-3, DDP-1
    # Found only as the first validation began, after an epoch of training, they left a failed run.
    cfg = config.CONFIGS["smoke"](devices="2", eval_episodes=1, test_episodes=2)

    def episode_problems(cfg):
        return [problem for problem in cfg.problems() if "episodes" in problem]

    assert episode_problems(cfg) == ["eval_episodes 1: at least one for each of the 2 processes"]
    assert episode_problems(dataclasses.replace(cfg, eval_episodes=2)) == []


def vector_of(make, num_envs):
    """`num_envs` gymnasium envs that `make()` makes, as the part's make_env wraps them."""
    disabled = gymnasium.vector.AutoresetMode.DISABLED
    envs = gymnasium.vector.SyncVectorEnv([make] * num_envs, autoreset_mode=disabled)
    return GymWrapper(envs, categorical_action_encoding=True)


def dict_cart_pole(env_name, num_envs):
    """CartPole whose observation is a dict of two entries, as many environments give theirs."""
    entries = {"position": slice(0, 2), "velocity": slice(2, 4)}
    space = gymnasium.spaces.Dict({k: gymnasium.spaces.Box(-np.inf, np.inf, (2,)) for k in entries})

    def as_dict(observation):
        return {name: observation[where] for name, where in entries.items()}

    make = lambda: gymnasium.wrappers.TransformObservation(gymnasium.make("CartPole-v1"), as_dict, space)  # noqa: E731
    return vector_of(make, num_envs)


def shifted_cart_pole(env_name, num_envs):
    """CartPole whose two actions are numbered -1 and 0, as gymnasium's Discrete(n, start) allows."""
    numbered = gymnasium.spaces.Discrete(2, start=-1)
    make = lambda: gymnasium.wrappers.TransformAction(gymnasium.make(env_name), lambda a: a + 1, numbered)  # noqa: E731
    return vector_of(make, num_envs)


def one_hot_line_walk(env_name, num_envs):
    """LineWalk choosing its move by a one-hot vector, GymWrapper's encoding unless told otherwise."""
    env = envs.LineWalk(num_envs)
    env.action_spec = OneHot(3, shape=(num_envs, 3))
    return env


def flat_reward_line_walk(env_name, num_envs):
    """LineWalk rewarding each walk with a number of shape (), not (1,)."""
    env = envs.LineWalk(num_envs)
    env.reward_spec = Unbounded(shape=(num_envs,))
    return env


def naming_make_env(env_name, num_envs):
    """A make_env that refuses a name it does not know, in its own words."""
    raise ValueError(f"unknown env {env_name!r}: this make_env knows LineWalk")


@pytest.mark.parametrize(
    ("make_env", "env_name", "message"),
    [
        (data.make_env, "NoSuchEnv-v0", "`NoSuchEnv` doesn't exist"),
        (naming_make_env, "Walk-v9", "'Walk-v9': unknown env 'Walk-v9': this make_env knows LineWalk"),
        (shifted_cart_pole, "CartPole-v1", r"Discrete\(2, start=-1\), numbered from -1, where .* 0 to 1"),
        (one_hot_line_walk, "LineWalk", r"OneHot of shape \(3,\), .*categorical_action_encoding=True"),
        (flat_reward_line_walk, "LineWalk", r"its reward_spec has shape \(\) per env"),
        (data.make_env, "FrozenLake-v1", "its observation is Categorical"),
        (dict_cart_pole, "CartPole-v1", r"a dict \(position, velocity\), not one flat .*FlattenObservation"),
        (square_line_walk, "LineWalk", "its actions are UnboundedContinuous of shape \\(2, 2\\), neither"),
    ],
)
def test_an_env_the_policy_cannot_train_is_a_config_error(make_env, env_name, message):  # CFG-3
    with pytest.raises(ConfigError, match=message):
        rl_data.observation_and_action_space(make_env, env_name)


@pytest.mark.parametrize(
    ("env_name", "num_observations", "space"),
    [
        ("CartPole-v1", 4, ActionSpace(2)),
        ("Acrobot-v1", 6, ActionSpace(3)),
        ("LineWalk", 2, ActionSpace(3)),
        ("Pendulum-v1", 3, ActionSpace(1, (-2.0,), (2.0,))),
        ("MountainCarContinuous-v0", 2, ActionSpace(1, (-1.0,), (1.0,))),
    ],
)
def test_an_env_the_config_accepts_is_one_the_policy_takes(env_name, num_observations, space):  # CFG-3
    assert rl_data.env_problem(data, env_name) == []
    assert rl_data.observation_and_action_space(data.make_env, env_name) == (num_observations, space)


def test_resume_flags_are_checked_with_the_runs_own_config(tmp_path):  # RES-1, CFG-3
    train.main_with_config(smoke_config(tmp_path, num_envs=6, frames_per_batch=252))
    (run_dir,) = tmp_path.glob("smoke_*")
    # Three workers divide the run's 6 envs, not the 8 of the config a bare command line names.
    cfg, checkpoint = parse_cli(config.CONFIGS, ["--resume", str(run_dir), "--env-workers", "3"])
    assert (cfg.name, cfg.num_envs, cfg.env_workers, cfg.frames_per_batch) == ("smoke", 6, 3, 252)
    assert checkpoint is not None and checkpoint.parent.parent == run_dir


class Float64Walk(gymnasium.Env):
    """Observes in float64, as MuJoCo's envs and many of one's own do."""

    observation_space = gymnasium.spaces.Box(-1.0, 1.0, (3,), np.float64)
    action_space = gymnasium.spaces.Discrete(2)

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.steps = 0
        return self.np_random.uniform(-1, 1, 3), {}

    def step(self, action):
        self.steps += 1
        return self.np_random.uniform(-1, 1, 3), float(action), False, self.steps >= 20, {}


def test_an_env_observing_in_float64_trains(tmp_path):  # CFG-3, RL-5
    if "Float64Walk-v0" not in gymnasium.registry:
        gymnasium.register("Float64Walk-v0", entry_point=Float64Walk)
    assert rl_data.observation_and_action_space(data.make_env, "Float64Walk-v0") == (3, ActionSpace(2))
    train.main_with_config(smoke_config(tmp_path, env_name="Float64Walk-v0"))
    (run_dir,) = tmp_path.glob("smoke_*")
    assert_ended(run_dir, "finished", "budget", "num_epochs 2 trained")


@pytest.mark.parametrize(
    ("overrides", "target"),
    [
        ({"env_name": "CartPole-v1"}, 475.0),
        ({"env_name": "Acrobot-v1"}, -100.0),
        ({"env_name": "LineWalk"}, None),
        ({"env_name": "Pendulum-v1"}, None),  # none registered: patience or the budget ends it
        ({"target_reward": 9.0}, 9.0),
    ],
)
def test_the_target_reward_is_the_envs_registered_threshold_unless_given(overrides, target):
    assert rl_data.target_reward(default_config("rl")(**overrides)) == target


def test_a_make_env_that_breaks_the_contract_is_named_in_one_line():
    with pytest.raises(ConfigError, match=rf"^{PARTS['rl']}\.data has no make_env\(env_name, num_envs\)"):
        rl_data.env_maker(types.ModuleType(f"{PARTS['rl']}.data"))
    with pytest.raises(ConfigError, match=r"make_env\('CartPole-v1', 3\) returned envs of batch_size \(2,\)"):
        rl_data.make_envs(lambda env_name, num_envs: data.make_env(env_name, 2), "CartPole-v1", 3)
    with pytest.raises(ConfigError, match="returned a str; it must return TorchRL EnvBase envs"):
        rl_data.make_envs(lambda env_name, num_envs: "CartPole", "CartPole-v1", 1)
    # One env per call, or each worker would step a batch the policy's shapes do not expect.
    with pytest.raises(ConfigError, match=r"make_env\('CartPole-v1'\) returned envs of batch_size \(2,\);"):
        rl_data.make_envs(lambda env_name: data.make_env(env_name, 2), "CartPole-v1", 1)


@slow
def test_a_make_env_of_one_env_per_call_still_trains(tmp_path):  # RL-1, RL-2
    cfg = smoke_config(tmp_path, num_envs=2)
    assert rl_data.observation_and_action_space(one_cartpole, cfg.env_name) == (4, ActionSpace(2))
    collector = Collector(rl_data.training_env(cfg, one_cartpole, cfg.seed), None, frames_per_batch=32)
    try:
        frames = next(iter(collector))  # a worker per env
    finally:
        collector.shutdown()
    assert frames["next", "episode_reward"].shape == (2, 16, 1)
    assert worker_processes() == []
    policy = configured_ppo(cfg).greedy_policy()
    env = rl_data.make_envs(one_cartpole, cfg.env_name, 1)
    episodes = list(rl_data.EvaluationEpisodes(env, policy, seed=0, episodes=3))
    env.close()
    assert [len(batch) for batch in episodes] == [1, 1, 1]
    assert all(batch["next", "step_count"].item() >= 1 for batch in episodes)


@gpu
def test_trains_on_the_gpu_in_bf16(tmp_path):  # PRC-1
    test_metrics = train.main_with_config(smoke_config(tmp_path, accelerator="gpu"))
    (run_dir,) = tmp_path.glob("smoke_*")
    assert "bf16-mixed" in (run_dir / "console.log").read_text()
    assert test_metrics["test_episode_reward"] >= 1
    # The policy a GPU trained plays on the CPU, and by default plays the run's test again.
    played = rl_evaluate.play_saved_policy(run_dir, data, model.load_model_from_checkpoint)
    assert played["episodes"] == len(played["rewards"]) and played["mean_reward"] >= 1
    assert played["mean_reward"] == pytest.approx(test_metrics["test_episode_reward"])


@slow
def test_a_count_on_the_console_is_shown_in_full(tmp_path):  # OPS-2
    # 20 epochs of 512 frames: past 10,000, which four significant digits showed as 1.024e+04.
    train.main_with_config(smoke_config(tmp_path, num_epochs=20, patience=100))
    (run_dir,) = tmp_path.glob("smoke_*")
    log = (run_dir / "console.log").read_text().splitlines()
    epochs = [line for line in log if line.startswith("epoch ")]
    frames = next(part.split()[1] for part in epochs[-1].split(" | ") if part.startswith("frames "))
    assert frames.isdigit() and int(frames) >= 10_000, epochs[-1]
