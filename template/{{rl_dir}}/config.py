"""Configs of this part (CFG-1, CFG-6): pick one with `--config NAME`.

The task config holds the baseline; each variant overrides only what differs.
A Lightning epoch here is `iterations_per_epoch` collections of `frames_per_batch`
frames from `num_envs` parallel environments, each followed by `ppo_epochs` passes
of minibatch updates; evaluation episodes follow every epoch.
"""

from __future__ import annotations

from dataclasses import dataclass

from src.rl.config import RLConfig


@dataclass
class CartPoleConfig(RLConfig):
    """PPO on gymnasium's CartPole-v1 (no download): balance a pole for up to 500 steps.
    `--env-name LineWalk` trains on the custom environment in envs.py instead.

    Attributes:
        env_name: Environment: a gymnasium id with discrete actions and a flat vector
            observation, or LineWalk, the custom one in envs.py.
        hidden_sizes: Widths of the hidden layers of the policy and of the value network.
        ppo_epochs: Passes over each collected batch of frames.
        clip_epsilon: PPO clip range of the probability ratio, in (0, 1).
        gae_lambda: GAE lambda, the bias-variance trade-off of advantage estimates, in [0, 1].
        entropy_coef: Weight of the entropy bonus in the loss; larger explores more.
        critic_coef: Weight of the value loss in the loss.
        target_kl: A collection's updates stop once the policy's approximate KL divergence
            from the collecting policy passes this.
        max_grad_norm: Actor and critic gradients are each clipped to this total norm.
    """

    name: str = "baseline"
    env_name: str = "CartPole-v1"
    # num_envs 8 and env_workers 0, RLConfig's: CartPole steps in microseconds, so its envs
    # step fastest as one batch in this process.
    iterations_per_epoch: int = 4  # evaluation every 4096 frames: it costs as much as a collection
    # As many as one batch plays at once, for little more than the time of the longest:
    # a lucky few episodes over the target do not stop the run.
    eval_episodes: int = 32
    hidden_sizes: tuple[int, ...] = (64, 64)
    # The rate, discount and GAE lambda of RL-Zoo's tuned CartPole PPO.
    learning_rate: float = 1e-3
    gamma: float = 0.98
    weight_decay: float = 0.0
    batch_size: int = 256  # PPO minibatch, in frames (MEM-2)
    ppo_epochs: int = 10  # passes over each collected batch
    clip_epsilon: float = 0.2
    gae_lambda: float = 0.8
    entropy_coef: float = 0.0
    critic_coef: float = 0.5
    # RL-12: a collection's updates stop once the approximate KL divergence from the
    # collecting policy passes this (per minibatch).
    target_kl: float = 0.05
    max_grad_norm: float = 0.5  # RL-13: clip_grad_norm_ on actor and critic
    target_reward: float | None = 475.0  # CartPole-v1 counts as solved at 475
    patience: int = 30

    def problems(self) -> list[str]:
        found = super().problems()
        if not self.hidden_sizes or min(self.hidden_sizes) < 1:
            found.append(f"hidden_sizes {self.hidden_sizes}: give one or more positive layer widths")
        if self.batch_size > self.frames_per_batch:
            found.append(f"batch_size {self.batch_size}: at most frames_per_batch {self.frames_per_batch}")
        if self.ppo_epochs < 1 or not 0 < self.clip_epsilon < 1 or not 0 <= self.gae_lambda <= 1:
            found.append(
                f"ppo_epochs {self.ppo_epochs}, clip_epsilon {self.clip_epsilon}, gae_lambda "
                f"{self.gae_lambda}: need >= 1, (0, 1) and [0, 1]"
            )
        if self.target_kl <= 0 or self.max_grad_norm <= 0 or self.critic_coef <= 0:
            found.append(
                f"target_kl {self.target_kl}, max_grad_norm {self.max_grad_norm}, critic_coef "
                f"{self.critic_coef}: must be positive"
            )
        # CFG-3: an env the policy cannot take fails here, before a run directory exists.
        if problem := env_problem(self.env_name):
            found.append(problem)
        return found


TRAINABLE = (
    "use a gymnasium id with discrete actions and a flat vector observation (CartPole-v1, "
    "Acrobot-v1, MountainCar-v0) or LineWalk, the custom env of envs.py"
)


def env_problem(env_name: str) -> str | None:
    """Why the policy cannot train on `env_name`, in one line; None when it can. The
    env is made as training makes it (data.make_env: gymnasium ids, LineWalk and what
    you add there), once, in milliseconds for most, and its specs read as the model
    reads them: one flat vector of continuous values in, one of n actions out."""
    # Imported here, not at the top: data.py imports this module, and loading it (torchrl)
    # takes seconds that --help need not wait.
    import gymnasium

    from .data import make_env

    try:
        env = make_env(env_name)
    except (gymnasium.error.Error, ImportError) as error:  # an unknown id, a missing dependency
        return f"env_name {env_name!r}: {str(error).strip().splitlines()[0].rstrip('.')}; {TRAINABLE}"
    except ValueError:  # TorchRL cannot batch the observation (Blackjack's tuple)
        problem = "its observation is not one flat vector of continuous values: TorchRL cannot batch it"
        return f"env_name {env_name!r}: {problem}; {TRAINABLE}"
    try:
        # The specs of one env: of the batch make_env made (an older data.py's makes one).
        observation, action = env.observation_spec, env.action_spec
        if env.batch_size:
            observation, action = observation[0], action[0]
        observation = observation.get("observation", None)
        if not hasattr(action.space, "n"):  # continuous, or several choices at once
            problem = f"its actions are {_describe(action)}, not one choice of n"
        # A discrete observation (FrozenLake's cell, Blackjack's tuple) or an image is none.
        elif observation is None or observation.domain != "continuous" or len(observation.shape) != 1:
            problem = f"its observation is {_describe(observation)}, not one flat vector of continuous values"
        else:
            return None
    finally:
        env.close()
    return f"env_name {env_name!r}: {problem}; {TRAINABLE}"


def _describe(spec) -> str:
    return "missing" if spec is None else f"{type(spec).__name__} of shape {tuple(spec.shape)}"


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
class Smoke(CartPoleConfig):
    """Runs the whole pipeline in well under a minute on a CPU: checks it, not the policy."""

    name: str = "smoke"
    num_envs: int = 4  # one batch in this process, as the baseline's: no worker to start
    frames_per_batch: int = 256
    batch_size: int = 128
    ppo_epochs: int = 2
    iterations_per_epoch: int = 2
    num_epochs: int = 2
    eval_episodes: int = 2
    test_episodes: int = 2
    max_wall_clock_hours: float = 0.1


CONFIGS: dict[str, type[CartPoleConfig]] = {
    config.name: config for config in (CartPoleConfig, Wide, HighLR, MoreEnvs, Aggressive, Smoke)
}
