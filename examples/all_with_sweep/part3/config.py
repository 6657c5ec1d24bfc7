"""Configs of this part (CFG-1, CFG-6): pick one with `--config NAME`. The task config holds the
baseline; each variant overrides only what differs. PPO's own fields are RLConfig's (src/rl/config.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from src.rl.config import RLConfig


@dataclass
class CartPoleConfig(RLConfig):
    """PPO on gymnasium's CartPole-v1 (no download): balance a pole for up to 500 steps.
    `--env-name LineWalk` trains on the custom environment in envs.py instead.

    Attributes:
        hidden_sizes: Widths of the hidden layers of the policy and of the value network.
    """

    name: str = "baseline"
    env_name: str = "CartPole-v1"
    iterations_per_epoch: int = 4  # evaluation every 4096 frames: it costs as much as a collection
    # One batch plays them in little more than the longest takes; a lucky few do not stop the run.
    eval_episodes: int = 32
    hidden_sizes: tuple[int, ...] = (64, 64)
    # Networks this small train faster on the CPU: 2,895 frames/s there against 1,398 on an
    # H100 of the same machine. A CNN or a wide network wants --accelerator auto.
    accelerator: str = "cpu"
    # The rate, discount and GAE lambda of RL-Zoo's tuned CartPole PPO.
    learning_rate: float = 1e-3
    gamma: float = 0.98
    gae_lambda: float = 0.8
    weight_decay: float = 0.0
    patience: int = 30

    def problems(self) -> list[str]:
        found = super().problems()
        if not self.hidden_sizes or min(self.hidden_sizes) < 1:
            found.append(f"hidden_sizes {self.hidden_sizes}: give one or more positive layer widths")
        # CFG-3: an env the policy cannot take is refused before a run starts. Imported here: for --help.
        from src.rl.data import env_problem

        from . import data

        return [*found, *env_problem(data, self.env_name)]


@dataclass
class Wide(CartPoleConfig):
    name: str = "wide"
    hidden_sizes: tuple[int, ...] = (256, 256)


@dataclass
class HighLR(CartPoleConfig):
    name: str = "high_lr"
    learning_rate: float = 3e-3


@dataclass
class MoreEnvs(CartPoleConfig):
    name: str = "more_envs"
    num_envs: int = 16


@dataclass
class Aggressive(CartPoleConfig):
    """Several dimensions at once: a fast rate, fewer passes, a wider clip range."""

    name: str = "aggressive"
    learning_rate: float = 3e-3
    ppo_epochs: int = 4
    clip_epsilon: float = 0.3
    batch_size: int = 512


@dataclass
class Pendulum(CartPoleConfig):
    """Continuous actions: swing gymnasium's Pendulum-v1 up and hold it with a torque in [-2, 2],
    with RL-Zoo's tuned PPO settings (without gSDE). No reward is registered as solving it: patience
    or the budget ends the run; a random policy scores about -1200 per episode, a good one above
    -200. Normalized observations slowed learning here: their statistics shift as it learns."""

    name: str = "pendulum"
    env_name: str = "Pendulum-v1"
    num_envs: int = 4
    frames_per_batch: int = 4096  # 1024 steps of each env
    batch_size: int = 64
    iterations_per_epoch: int = 2  # evaluation every 8192 frames
    eval_episodes: int = 16  # episodes differ by their start: a few do not measure the policy
    gamma: float = 0.9
    gae_lambda: float = 0.95
    # A 64-frame minibatch's KL estimate is too noisy for the usual 0.05: this stops a runaway only.
    target_kl: float = 1.0
    patience: int = 10


@dataclass
class Smoke(CartPoleConfig):
    """Runs the whole pipeline in well under a minute on a CPU: checks it, not the policy."""

    name: str = "smoke"
    num_envs: int = 4
    frames_per_batch: int = 256
    batch_size: int = 128
    ppo_epochs: int = 2
    iterations_per_epoch: int = 2
    num_epochs: int = 2
    eval_episodes: int = 2
    test_episodes: int = 2
    max_wall_clock_hours: float = 0.1


CONFIGS: dict[str, type[CartPoleConfig]] = {
    config.name: config for config in (CartPoleConfig, Wide, HighLR, MoreEnvs, Aggressive, Pendulum, Smoke)
}
