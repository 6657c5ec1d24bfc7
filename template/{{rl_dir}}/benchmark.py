"""Frames per second: ParallelEnv against SerialEnv, and the Lightning PPO loop
against a plain TorchRL loop, on the same config in the same run.

    python -m <this part>.benchmark --config baseline [--batches 20] [--epochs 3]

1. Environments: a Collector with a random policy over `num_envs` envs stepping in
   worker processes (ParallelEnv, what training uses) and in this process one after
   another (SerialEnv), `--batches` collections each after one warm-up collection.
2. PPO: this part's pipeline (build_trainer with every callback, `--epochs` epochs,
   one evaluation episode per epoch) against a plain loop of the same Collector,
   GAE, ClipPPOLoss and AdamW with the same minibatch updates and clipping, and no
   Lightning, W&B or evaluation. KL early stopping is off in both, so both make the
   same number of updates.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import tempfile
import time
from pathlib import Path

import lightning as L
import torch
from torchrl.collectors import Collector
from torchrl.envs import EnvBase, ParallelEnv, SerialEnv

from src.training.optim import adamw
from src.training.trainer import build_trainer

from .config import CONFIGS, CartPoleConfig
from .data import RolloutDataModule, make_env, with_episode_stats
from .model import build_model


def environment_fps(cfg: CartPoleConfig, batched_env_cls: type[EnvBase], batches: int) -> float:
    env = with_episode_stats(batched_env_cls(cfg.num_envs, functools.partial(make_env, cfg.env_name)))
    collector = Collector(env, None, frames_per_batch=cfg.frames_per_batch, total_frames=-1)
    try:
        frames = iter(collector)
        next(frames)  # warm-up: workers started, first reset done
        started = time.perf_counter()
        for _ in range(batches):
            next(frames)
        return batches * cfg.frames_per_batch / (time.perf_counter() - started)
    finally:
        collector.shutdown()


class SteadyStateClock(L.Callback):
    """Frames per second from the end of the first training step on: worker start-up
    and the first collection are left out, as in the plain loop."""

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if not hasattr(self, "started"):
            self.started, self.first_frames = time.perf_counter(), pl_module.frames

    def on_train_end(self, trainer, pl_module) -> None:
        self.fps = (pl_module.frames - self.first_frames) / (time.perf_counter() - self.started)


def pipeline_fps(cfg: CartPoleConfig, run_dir: Path) -> float:
    L.seed_everything(cfg.seed)
    datamodule = RolloutDataModule(cfg)
    model = build_model(cfg, *datamodule.observation_and_action_sizes())
    trainer = build_trainer(cfg, run_dir, None, monitor="val_episode_reward", mode="max")
    clock = SteadyStateClock()
    trainer.callbacks.append(clock)
    try:
        trainer.fit(model, datamodule=datamodule)
    finally:
        datamodule.close()
    return clock.fps


def plain_torchrl_fps(cfg: CartPoleConfig, iterations: int) -> float:
    torch.manual_seed(cfg.seed)
    datamodule = RolloutDataModule(cfg)  # only for the sizes; the loop below is plain TorchRL
    module = build_model(cfg, *datamodule.observation_and_action_sizes())
    policy, critic, advantage, loss_module = (
        module.policy,
        module.critic,
        module.advantage,
        module.loss_module,
    )
    optimizer = adamw(module, cfg.learning_rate, cfg.weight_decay)
    env = with_episode_stats(ParallelEnv(cfg.num_envs, functools.partial(make_env, cfg.env_name)))
    collector = Collector(env, policy, frames_per_batch=cfg.frames_per_batch, total_frames=-1)
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


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="baseline", choices=list(CONFIGS))
    parser.add_argument("--batches", type=int, default=20, help="collections timed per environment kind")
    parser.add_argument("--epochs", type=int, default=3, help="Lightning epochs of PPO timed")
    args = parser.parse_args(argv)
    cfg = CONFIGS[args.config]()

    parallel = environment_fps(cfg, ParallelEnv, args.batches)
    serial = environment_fps(cfg, SerialEnv, args.batches)
    setting = f"{cfg.num_envs} x {cfg.env_name}, random policy, {cfg.frames_per_batch} frames a batch"
    print(f"environments: {setting}")
    print(f"  ParallelEnv {parallel:9.0f} frames/s   SerialEnv {serial:9.0f} frames/s")
    print(f"  ParallelEnv / SerialEnv = {parallel / serial:.2f}")

    with tempfile.TemporaryDirectory() as scratch:
        timed = dataclasses.replace(
            cfg,
            num_epochs=args.epochs,
            target_reward=None,
            target_kl=float("inf"),  # the same number of updates in both loops
            eval_episodes=1,
            wandb_mode="disabled",
        )
        pipeline = pipeline_fps(timed, Path(scratch))
        plain = plain_torchrl_fps(timed, args.epochs * timed.iterations_per_epoch)
    print(
        f"PPO ({args.epochs} epochs of {cfg.iterations_per_epoch} collections, {cfg.ppo_epochs} passes each)"
    )
    print(f"  Lightning pipeline {pipeline:9.0f} frames/s   plain TorchRL loop {plain:9.0f} frames/s")
    print(f"  pipeline / plain TorchRL = {pipeline / plain:.2f}")


if __name__ == "__main__":
    main()
