"""The config level of the reinforcement-learning parts (CFG-1): its fields and their checks."""

from __future__ import annotations

from dataclasses import dataclass

from src.config import LightningConfig, at_least

MAX_EPISODES = 10_000  # evaluation episodes: Lightning times training, not evaluation


@dataclass
class RLConfig(LightningConfig):
    """Reinforcement-learning parts (TorchRL inside Lightning). A Lightning epoch is
    `iterations_per_epoch` collections of `frames_per_batch` frames, each followed by
    its policy updates; evaluation episodes are the validation.

    Attributes:
        num_envs: Environments stepping together; a collection takes frames_per_batch / num_envs
            steps of each.
        env_workers: Worker processes stepping them (ParallelEnv), num_envs / env_workers each
            as one batch; 0 steps them all in this process. Give an env that is slow to step
            workers, up to one per free core; a fast one like CartPole, 0.
        frames_per_batch: Frames collected across all environments before each round of
            policy updates.
        iterations_per_epoch: Collections (each followed by its updates) per epoch;
            evaluation follows each epoch.
        gamma: Discount factor of future rewards, in (0, 1].
        eval_episodes: Evaluation episodes after each epoch; their mean reward is what early
            stopping watches.
        test_episodes: Episodes of the final test of the best checkpoint.
        target_reward: Training ends once the mean evaluation reward reaches this; None never
            ends on reward.
        batch_size: PPO minibatch, in frames.
        log_every_n_steps: Collections between per-step metric logs (a step is a whole
            collection and its updates).
        val_every_n_steps: Evaluate every this many collections, across epoch ends, instead of
            after each epoch; early stopping's patience then counts these evaluations. 0
            evaluates after each epoch.
        checkpoint_every_n_steps: Also rewrite checkpoints/last.ckpt every this many
            collections; 0 never does on a step count.
    """

    num_envs: int = 8
    # RL-1: process parallelism where stepping costs more than passing the steps between
    # processes; in this process, a batch of cheap envs steps faster than any workers.
    env_workers: int = 0
    frames_per_batch: int = 1024
    iterations_per_epoch: int = 5
    gamma: float = 0.99
    eval_episodes: int = 5
    test_episodes: int = 20
    # Training ends once the mean evaluation reward reaches this (None: never);
    # early stopping on it (patience, in epochs) ends runs that stop improving.
    target_reward: float | None = None
    batch_size: int = 256  # the PPO minibatch: what BatchSizeFinder would change (MEM-2)
    log_every_n_steps: int = 1  # a step is a whole collection and its updates

    def problems(self) -> list[str]:
        found = [
            *super().problems(),
            *at_least(
                self, num_envs=1, frames_per_batch=1, iterations_per_epoch=1, eval_episodes=1, test_episodes=1
            ),
        ]
        found += [
            f"{name} {value}: must be at most {MAX_EPISODES} (evaluation ignores the time budget)"
            for name, value in (("eval_episodes", self.eval_episodes), ("test_episodes", self.test_episodes))
            if value > MAX_EPISODES
        ]
        if self.env_workers < 0 or (self.env_workers and self.num_envs % self.env_workers):
            found.append(f"env_workers {self.env_workers}: use 0 or a divisor of num_envs {self.num_envs}")
        if self.num_envs >= 1 and self.frames_per_batch % self.num_envs:
            found.append(
                f"frames_per_batch {self.frames_per_batch}: must be a multiple of num_envs {self.num_envs}"
            )
        if not 0 < self.gamma <= 1:
            found.append(f"gamma {self.gamma}: must be in (0, 1]")
        return found
