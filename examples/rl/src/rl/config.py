"""The config level of the reinforcement-learning parts (CFG-1): PPO's fields and their checks."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from src.config import at_least
from src.runs.launch import current_launch, process_count
from src.training.config import LightningConfig

MAX_EPISODES = 10_000  # evaluation episodes: Lightning times training, not evaluation


@dataclass
class RLConfig(LightningConfig):
    """TorchRL's PPO inside Lightning. A step is one collection of `frames_per_batch` frames and
    up to `ppo_epochs` passes of minibatch updates on it; an epoch is `iterations_per_epoch` steps;
    evaluation episodes are the validation.

    Attributes:
        env_name: Environment to train on, as the part's data.make_env() names them.
        num_envs: Environments stepping together; each steps frames_per_batch / num_envs times a collection.
        env_workers: Worker processes (ParallelEnv) for envs slow to step; 0 steps them in this process.
        frames_per_batch: Frames collected across all environments before each round of updates.
        iterations_per_epoch: Collections (each followed by its updates) per epoch.
        gamma: Discount factor of future rewards, in (0, 1].
        eval_episodes: Evaluation episodes after each epoch; early stopping watches their mean reward.
        test_episodes: Episodes of the final test of the best checkpoint.
        target_reward: Mean evaluation reward that ends training; None: gymnasium's solving reward, if any.
        batch_size: PPO minibatch, in frames.
        ppo_epochs: Passes over each collected batch of frames.
        clip_epsilon: PPO clip range of the probability ratio, in (0, 1).
        gae_lambda: GAE lambda, the bias-variance trade-off of advantage estimates, in [0, 1].
        entropy_coef: Weight of the entropy bonus in the loss; larger explores more.
        critic_coef: Weight of the value loss in the loss.
        target_kl: A collection's updates stop once the approximate KL from the collecting policy passes this.
        max_grad_norm: Actor and critic gradients are each clipped to this total norm.
        normalize_observations: Standardize the networks' inputs by running statistics of all observations.
        log_every_n_steps: Collections between per-step metric logs.
        val_every_n_steps: Evaluate every this many collections (patience counts these); 0 after each epoch.
        checkpoint_every_n_steps: Also rewrite checkpoints/last.ckpt every this many collections; 0 never.
    """

    # What a resume may not change: the environment the run's rewards and checkpoints come from.
    kept_on_resume: ClassVar = ("env_name",)

    env_name: str = ""
    num_envs: int = 8
    env_workers: int = 0  # RL-1: in this process, a batch of cheap envs steps faster than workers
    frames_per_batch: int = 1024
    iterations_per_epoch: int = 5
    gamma: float = 0.99
    eval_episodes: int = 5
    test_episodes: int = 20
    target_reward: float | None = None
    batch_size: int = 256  # MEM-2: the PPO minibatch
    log_every_n_steps: int = 1
    ppo_epochs: int = 10
    clip_epsilon: float = 0.2
    gae_lambda: float = 0.95
    entropy_coef: float = 0.0
    critic_coef: float = 0.5
    target_kl: float = 0.05  # RL-12
    max_grad_norm: float = 0.5  # RL-13
    normalize_observations: bool = False

    def problems(self) -> list[str]:
        found = super().problems() + at_least(
            self, num_envs=1, frames_per_batch=1, iterations_per_epoch=1, eval_episodes=1, test_episodes=1
        )
        for name in ("eval_episodes", "test_episodes"):
            if getattr(self, name) > MAX_EPISODES:
                found.append(
                    f"{name} {getattr(self, name)}: must be at most {MAX_EPISODES} "
                    "(evaluation ignores the time budget)"
                )
        processes = process_count(current_launch(), self.devices, self.num_nodes)
        if processes is not None:  # each plays its share of the episodes
            shares = {"eval_episodes": self.eval_episodes, "test_episodes": self.test_episodes}
            for name, episodes in shares.items():
                if 1 <= episodes < processes:
                    found.append(f"{name} {episodes}: at least one for each of the {processes} processes")
        for name in ("target_kl", "max_grad_norm", "critic_coef", "ppo_epochs"):
            if getattr(self, name) <= 0:
                found.append(f"{name} {getattr(self, name)}: must be positive")
        checks = {
            f"env_workers {self.env_workers}: use 0 or a divisor of num_envs {self.num_envs}": (
                self.env_workers >= 0 and not (self.env_workers and self.num_envs % self.env_workers)
            ),
            f"frames_per_batch {self.frames_per_batch}: must be a multiple of num_envs {self.num_envs}": (
                self.num_envs < 1 or self.frames_per_batch % self.num_envs == 0
            ),
            f"batch_size {self.batch_size}: at most frames_per_batch {self.frames_per_batch}": (
                self.batch_size <= self.frames_per_batch
            ),
            f"gamma {self.gamma}: must be in (0, 1]": 0 < self.gamma <= 1,
            f"clip_epsilon {self.clip_epsilon}: must be in (0, 1)": 0 < self.clip_epsilon < 1,
            f"gae_lambda {self.gae_lambda}: must be in [0, 1]": 0 <= self.gae_lambda <= 1,
            "env_name: name the environment to train on": bool(self.env_name),
        }
        return found + [problem for problem, valid in checks.items() if not valid]
