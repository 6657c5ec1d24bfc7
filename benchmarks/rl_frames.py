"""Frames per second of a rendered project's RL part: layouts of the environments, and
the Lightning PPO loop against a plain TorchRL loop, on the same config in the same run.

    python benchmarks/rl_frames.py --project DIR [--part part3] [--config baseline]
        [--batches 20] [--epochs 8] [--repeats 3] [--json FILE]

1. Environments: a Collector with a random policy over `num_envs` envs laid out as
   `env_workers` worker processes (ParallelEnv) of num_envs / env_workers each, for
   the config's layout, all in this process (0), two workers, and one worker per env;
   `--batches` collections each after one warm-up collection, and the seconds to
   start (to the first collection) and to shut down.
2. PPO: this part's pipeline (build_trainer with every callback, `--epochs` epochs,
   one evaluation episode per epoch) against a plain loop of the same Collector,
   GAE, ClipPPOLoss and AdamW with the same minibatch updates and clipping, and no
   Lightning, W&B or evaluation. KL early stopping is off in both, so both make the
   same number of updates. The pipeline's frames per second are given without its
   evaluation episodes, to compare like with like, and with them.

Run it with the project's Python; `nox -s bench` does. The part's package is imported
before torch, as its train command imports it: it sets the math threads per process.
"""

# ruff: noqa: E402 - the project's modules are imported once its path is known

from __future__ import annotations

import argparse

from harness import alternate, medians, parse_and_import, recorded

PARSER = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
PARSER.add_argument("--config", default="baseline")
PARSER.add_argument("--batches", type=int, default=20, help="collections timed per environment layout")
PARSER.add_argument("--epochs", type=int, default=8, help="Lightning epochs of PPO timed")
PARSER.add_argument("--repeats", type=int, default=3, help="timings of each contender, taken in turn")
ARGS, PART = parse_and_import(PARSER, "rl")

import dataclasses
import functools
import statistics
import tempfile
import time

import lightning as L
import torch
from torchrl.collectors import Collector

from src.rl.data import RolloutDataModule, env_maker, observation_and_action_space, training_env
from src.rl.module import PPO
from src.runs.lifetime import start_run
from src.training.optim import adamw
from src.training.trainer import build_trainer


def environment_fps(cfg, batches: int) -> tuple[float, float, float]:
    """Frames per second of a random policy, and the seconds to start and to shut down."""
    started = time.perf_counter()
    env = training_env(cfg, env_maker(PART.data), cfg.seed)
    collector = Collector(env, None, frames_per_batch=cfg.frames_per_batch, track_traj_ids=False)
    frames = iter(collector)
    next(frames)  # warm-up: workers started, first reset done
    start_seconds = time.perf_counter() - started
    started = time.perf_counter()
    for _ in range(batches):
        next(frames)
    fps = batches * cfg.frames_per_batch / (time.perf_counter() - started)
    started = time.perf_counter()
    collector.shutdown()
    return fps, start_seconds, time.perf_counter() - started


def layouts(cfg) -> list[int]:
    """env_workers values to compare: the config's, 0, 2 and one per env, where they divide."""
    counts = dict.fromkeys([cfg.env_workers, 0, 2, cfg.num_envs])
    return [count for count in counts if count == 0 or cfg.num_envs % count == 0]


class SteadyStateClock(L.Callback):
    """Frames per second from the end of the first training step on: worker start-up
    and the first collection are left out, as in the plain loop. Evaluation, which the
    plain loop does not do, is timed apart: `fps` leaves it out, `fps_with_evaluation`
    counts it."""

    def __init__(self) -> None:
        self.started: float | None = None
        self.first_frames = 0
        self.evaluating = 0.0

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if self.started is None:
            self.started, self.first_frames = time.perf_counter(), pl_module.frames

    def on_validation_start(self, trainer, pl_module) -> None:
        self.evaluation_started = time.perf_counter()

    def on_validation_end(self, trainer, pl_module) -> None:
        if self.started is not None:
            self.evaluating += time.perf_counter() - self.evaluation_started

    def on_train_end(self, trainer, pl_module) -> None:
        frames, seconds = pl_module.frames - self.first_frames, time.perf_counter() - self.started
        self.fps, self.fps_with_evaluation = frames / (seconds - self.evaluating), frames / seconds


def pipeline_fps(cfg) -> tuple[float, float]:
    """Frames per second of training, and of training with its evaluations."""
    with start_run(cfg) as run:  # the run directory and run.json that the callbacks write to
        L.seed_everything(cfg.seed)
        datamodule = RolloutDataModule(cfg, PART.data)
        model = PART.model.build_model(cfg)  # sized by the env in fit, from the DataModule
        trainer = build_trainer(
            cfg,
            run.dir,
            None,
            monitor="val_episode_reward",
            mode="max",
            fetch_section="env_step",
            limit_train_batches=cfg.iterations_per_epoch,  # as train.py: the collector is endless
            num_sanity_val_steps=0,
        )
        clock = SteadyStateClock()
        trainer.callbacks.append(clock)
        try:
            trainer.fit(model, datamodule=datamodule)
        finally:
            datamodule.close()
    return clock.fps, clock.fps_with_evaluation


def plain_torchrl_fps(cfg, iterations: int) -> float:
    torch.manual_seed(cfg.seed)
    make_env = env_maker(PART.data)
    # The part's networks and loss settings, sized by its env: only for the policy, critic,
    # GAE and loss that the module builds; the loop below is plain TorchRL.
    num_observations, space = observation_and_action_space(make_env, cfg.env_name)
    sizes = num_observations, space.size, space.low, space.high
    module = PPO(cfg, PART.model.build_networks, PART.model.loss_settings, *sizes)
    module.configure_model()
    policy, critic, advantage, loss_module = (
        module.policy,
        module.critic,
        module.advantage,
        module.loss_module,
    )
    optimizer = adamw(module, cfg.learning_rate, cfg.weight_decay)
    collector = Collector(
        training_env(cfg, make_env, cfg.seed),
        policy,
        frames_per_batch=cfg.frames_per_batch,
        # As the pipeline's collector (src/rl/data.py):
        auto_register_policy_transforms=False,
        track_traj_ids=False,
    )
    frames = 0
    try:
        for iteration, batch in zip(range(iterations), collector, strict=False):
            with torch.no_grad():
                advantage(batch)
            flat = batch.reshape(-1)
            for _ in range(cfg.ppo_epochs):
                for indices in torch.randperm(flat.numel()).split(cfg.batch_size):
                    terms = loss_module(flat[indices])
                    loss = terms["loss_objective"] + terms["loss_critic"] + terms["loss_entropy"]
                    optimizer.zero_grad()
                    loss.backward()
                    torch.nn.utils.clip_grad_norm_(policy.parameters(), cfg.max_grad_norm)
                    torch.nn.utils.clip_grad_norm_(critic.parameters(), cfg.max_grad_norm)
                    optimizer.step()
            if iteration == 0:  # as SteadyStateClock: from the end of the first step on
                started = time.perf_counter()
            else:
                frames += batch.numel()
        return frames / (time.perf_counter() - started)
    finally:
        collector.shutdown()


def layout_name(cfg, workers: int) -> str:
    return f"{workers} workers x {cfg.num_envs // workers} envs" if workers else "this process"


def main(args: argparse.Namespace) -> None:
    cfg = PART.config.CONFIGS[args.config]()

    with recorded(args.json) as figures, tempfile.TemporaryDirectory() as scratch:
        setting = f"{cfg.num_envs} x {cfg.env_name}, random policy, {cfg.frames_per_batch} frames a batch"
        print(f"environments: {setting}")
        start_stop: dict[str, list[tuple[float, float]]] = {}

        def layout_fps(workers: int) -> list[float]:
            fps, start, stop = environment_fps(dataclasses.replace(cfg, env_workers=workers), args.batches)
            start_stop.setdefault(layout_name(cfg, workers), []).append((start, stop))
            return [fps]

        layout_runs = {layout_name(cfg, w): functools.partial(layout_fps, w) for w in layouts(cfg)}
        env_fps = medians(alternate(layout_runs, args.repeats))
        for name, fps in env_fps.items():
            start = statistics.median(start for start, _ in start_stop[name])
            stop = statistics.median(stop for _, stop in start_stop[name])
            chosen = " (the config's)" if name == layout_name(cfg, cfg.env_workers) else ""
            print(f"  {name:>22} {fps:9.0f} frames/s   start {start:5.1f} s   stop {stop:5.1f} s{chosen}")

        timed = dataclasses.replace(
            cfg,
            num_epochs=args.epochs,
            target_reward=None,
            target_kl=1e9,  # never reached: the same number of updates in both loops
            eval_episodes=1,
            wandb_mode="disabled",
            output=dataclasses.replace(cfg.output, base_dir=scratch),
        )
        collections = args.epochs * timed.iterations_per_epoch
        with_evaluation: list[float] = []

        def pipeline() -> list[float]:
            training, overall = pipeline_fps(timed)
            with_evaluation.append(overall)
            return [training]

        loops = {
            "Lightning pipeline": pipeline,
            "plain TorchRL loop": lambda: [plain_torchrl_fps(timed, collections)],
        }
        ppo_fps = medians(alternate(loops, args.repeats))
        ppo_fps["pipeline, evaluation included"] = statistics.median(with_evaluation)
        updates = f"{collections} collections in {args.epochs} epochs, {cfg.ppo_epochs} passes each"
        print(f"PPO ({updates}), medians of {args.repeats}:")
        for name, fps in ppo_fps.items():
            print(f"  {name:<30} {fps:9.0f} frames/s")
        ratio = ppo_fps["Lightning pipeline"] / ppo_fps["plain TorchRL loop"]
        print(f"  pipeline / plain TorchRL = {ratio:.2f} (training; the plain loop does not evaluate)")
        figures.update(
            setting=f"config {cfg.name}, {setting}; PPO {updates}",
            environment_frames_per_s=env_fps,
            environment_start_stop_s={
                name: [statistics.median(column) for column in zip(*runs, strict=True)]
                for name, runs in start_stop.items()
            },
            ppo_frames_per_s=ppo_fps,
            pipeline_over_plain_torchrl=ratio,
            repeats=args.repeats,
        )


if __name__ == "__main__":
    main(ARGS)
