"""Data of this part: the environments. Training batches are rollouts collected from
`num_envs` environments stepping in parallel worker processes; validation and test
batches are whole evaluation episodes of the current policy."""

from __future__ import annotations

import functools
import multiprocessing
import signal
from collections.abc import Iterator

import gymnasium
import lightning as L
import torch
from tensordict import TensorDictBase
from tensordict.nn import TensorDictModuleBase
from torchrl.collectors import Collector
from torchrl.envs import EnvBase, ExplorationType, GymEnv, ParallelEnv, RewardSum, StepCounter, TransformedEnv
from torchrl.envs.utils import set_exploration_type

from src.config import ConfigError
from src.training.seeding import derived_seed, rank_seed

from .config import CartPoleConfig
from .envs import LineWalk

# Evaluation episodes end on their own (CartPole-v1 after 500 steps); this bounds one that never does.
EVAL_MAX_STEPS = 10_000


def make_env(env_name: str) -> EnvBase:
    """RL-2: the env factory is a module-level function, so ParallelEnv can pickle it
    (with functools.partial) into its worker processes."""
    if multiprocessing.parent_process() is not None:
        # In a ParallelEnv worker. Ctrl-C, or a `kill` of the process group (a scheduler's
        # SIGTERM), reaches every process; the main process stops at the end of its step
        # and shuts the workers down (RL-3), so a worker ignores both.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if env_name == LineWalk.name:
        return LineWalk()
    return GymEnv(env_name, categorical_action_encoding=True)


def with_episode_stats(env: EnvBase) -> TransformedEnv:
    """RL-4: episode_reward (RewardSum) and step_count (StepCounter) in every step."""
    env = TransformedEnv(env, RewardSum())
    env.append_transform(StepCounter())
    return env


def make_training_env(cfg: CartPoleConfig, seed: int) -> TransformedEnv:
    # RL-1: ParallelEnv, not SerialEnv: the envs step in num_envs processes at once.
    env = ParallelEnv(cfg.num_envs, functools.partial(make_env, cfg.env_name), device="cpu")
    env = with_episode_stats(env)
    env.set_seed(seed)
    return env


class EvaluationEpisodes:
    """This process's share of `episodes` whole episodes of the policy taking its most
    likely action, one rollout per item. Each episode starts from a seed of its own, so
    the episodes, and their mean, are the same however many DDP ranks share them."""

    def __init__(
        self, env: EnvBase, policy: TensorDictModuleBase, seed: int, episodes: int, trainer: L.Trainer
    ):
        if episodes < trainer.world_size:
            raise ConfigError(
                f"{episodes} evaluation episode(s) for {trainer.world_size} processes: give each "
                "process one at least (eval_episodes, test_episodes)"
            )
        self.env, self.policy, self.seed = env, policy, seed
        self.indices = range(trainer.global_rank, episodes, trainer.world_size)

    def __len__(self) -> int:
        return len(self.indices)

    def __iter__(self) -> Iterator[TensorDictBase]:
        for index in self.indices:
            self.env.set_seed(derived_seed(self.seed, index))
            with set_exploration_type(ExplorationType.DETERMINISTIC), torch.no_grad():
                episode = self.env.rollout(
                    EVAL_MAX_STEPS, self.policy, auto_cast_to_device=True, break_when_any_done=True
                )
            yield episode  # outside the no_grad block: a suspended generator must not hold it


class RolloutDataModule(L.LightningDataModule):
    """The environments and the collector, opened when training needs them and closed
    by `close()` on every way out (RL-3): teardown after fit and test, and the
    train script's `finally` for errors, STOP, the wall-clock budget and Ctrl-C."""

    def __init__(self, cfg: CartPoleConfig) -> None:
        super().__init__()
        self.cfg = cfg
        # LOG-5: samples are frames per epoch, and evaluation episodes.
        self.num_train_samples = cfg.frames_per_batch * cfg.iterations_per_epoch
        self.num_val_samples = cfg.eval_episodes
        self.env: EnvBase | None = None
        self.collector: Collector | None = None
        self.val_env: EnvBase | None = None
        self.test_env: EnvBase | None = None

    def observation_and_action_sizes(self) -> tuple[int, int]:
        """The policy's input and output sizes; a ConfigError for an env this part cannot train."""
        try:
            env = make_env(self.cfg.env_name)
        except gymnasium.error.Error as error:
            raise ConfigError(
                f"env_name {self.cfg.env_name!r}: {error}; "
                "use a gymnasium id such as CartPole-v1, or LineWalk"
            ) from None
        try:
            if not hasattr(env.action_spec.space, "n"):
                raise ConfigError(
                    f"env_name {self.cfg.env_name!r}: its actions are continuous; this PPO policy "
                    "picks one of n discrete actions (CartPole-v1, LineWalk, ...)"
                )
            return env.observation_spec["observation"].shape[-1], env.action_spec.space.n
        finally:
            env.close()

    def train_dataloader(self) -> Collector:
        # Built here, not in setup(): Lightning has moved the policy to its device by now,
        # so the collector acts with the very module being trained.
        policy = self.trainer.lightning_module.policy
        device = next(policy.parameters()).device
        # Each DDP rank collects experience of its own (seed 002).
        self.env = make_training_env(self.cfg, rank_seed(self.cfg.seed, self.trainer.global_rank))
        self.collector = Collector(
            self.env,
            policy,
            frames_per_batch=self.cfg.frames_per_batch,
            total_frames=-1,  # endless: Lightning's limit_train_batches makes the epochs
            auto_register_policy_transforms=False,  # the policy needs no extra env transform
            env_device="cpu",
            policy_device=device,
            storing_device=device,
        )
        return self.collector

    def val_dataloader(self) -> EvaluationEpisodes:
        if self.val_env is None:
            self.val_env = with_episode_stats(make_env(self.cfg.env_name))
        return self._episodes(self.val_env, seed=self.cfg.seed + 1, episodes=self.cfg.eval_episodes)

    def test_dataloader(self) -> EvaluationEpisodes:
        # Its own seed: the test episodes are not the validation episodes played again.
        if self.test_env is None:
            self.test_env = with_episode_stats(make_env(self.cfg.env_name))
        return self._episodes(self.test_env, seed=self.cfg.seed + 2, episodes=self.cfg.test_episodes)

    def _episodes(self, env: EnvBase, seed: int, episodes: int) -> EvaluationEpisodes:
        return EvaluationEpisodes(env, self.trainer.lightning_module.policy, seed, episodes, self.trainer)

    def teardown(self, stage: str) -> None:
        self.close()

    def close(self) -> None:
        """Shut the collector and every environment down, worker processes included;
        safe to call more than once (RL-3)."""
        if self.collector is not None:
            self.collector.shutdown()  # closes self.env too
            self.collector = None
        for env in (self.env, self.val_env, self.test_env):
            if env is not None and not env.is_closed:
                env.close(raise_if_closed=False)
        self.env = self.val_env = self.test_env = None
