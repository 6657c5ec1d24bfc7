"""Data of this part: the environments. Training batches are rollouts collected from
`num_envs` environments, stepping in this process or in `env_workers` worker processes;
validation and test batches are whole evaluation episodes of the current policy."""

from __future__ import annotations

import functools
import multiprocessing
import signal
from collections.abc import Iterator

import gymnasium
import lightning as L
import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.nn import TensorDictModuleBase
from torchrl.collectors import Collector
from torchrl.envs import (
    EnvBase,
    ExplorationType,
    GymWrapper,
    ParallelEnv,
    RewardSum,
    StepCounter,
    TransformedEnv,
)
from torchrl.envs.utils import set_exploration_type

from src.config import ConfigError
from src.training.seeding import derived_seed, rank_seed

from .config import CartPoleConfig
from .envs import LineWalk

# Evaluation episodes end on their own (CartPole-v1 after 500 steps); this bounds one that never does.
EVAL_MAX_STEPS = 10_000
MAX_EVAL_ENVS = 32  # evaluation episodes played at once, at most: the envs' memory


def make_env(env_name: str, num_envs: int = 1) -> EnvBase:
    """`num_envs` envs stepping as one batch in the calling process: gymnasium's
    SyncVectorEnv for a gymnasium id, a batched TorchRL env for LineWalk. RL-2: a
    module-level function, so ParallelEnv can pickle it (with functools.partial) into
    its worker processes."""
    if multiprocessing.parent_process() is not None:
        # In a ParallelEnv worker. Ctrl-C, or a `kill` of the process group (a scheduler's
        # SIGTERM), reaches every process; the main process stops at the end of its step
        # and shuts the workers down (RL-3), so a worker ignores both.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if env_name == LineWalk.name:
        return LineWalk(num_envs)
    # An ended episode waits for the reset TorchRL asks for (DISABLED), so that its last
    # step reaches the collector before the env starts the next one.
    autoreset = {"autoreset_mode": gymnasium.vector.AutoresetMode.DISABLED}
    envs = gymnasium.make_vec(env_name, num_envs, vectorization_mode="sync", vector_kwargs=autoreset)
    return GymWrapper(envs, categorical_action_encoding=True)


def with_episode_stats(env: EnvBase) -> TransformedEnv:
    """RL-4: episode_reward (RewardSum) and step_count (StepCounter) in every step."""
    env = TransformedEnv(env, RewardSum())
    env.append_transform(StepCounter())
    return env


def make_training_env(cfg: CartPoleConfig, seed: int) -> TransformedEnv:
    if cfg.env_workers:
        # RL-1: ParallelEnv, never SerialEnv, where stepping is expensive: the workers step
        # at once, each a batch of num_envs / env_workers envs.
        each = cfg.num_envs // cfg.env_workers
        env = ParallelEnv(cfg.env_workers, functools.partial(make_env, cfg.env_name, each), device="cpu")
    else:
        # Cheap envs: one batch in this process, no worker to start or to pass steps to.
        env = make_env(cfg.env_name, cfg.num_envs)
    env = with_episode_stats(env)
    env.set_seed(seed)
    return env


def collector_devices(policy_device: torch.device) -> dict[str, torch.device | str]:
    """The Collector's devices where the policy is not on the CPU the envs step on: steps
    are stored where the policy learns. On the CPU it names none: a Collector given devices
    checks and moves every step's tensors to them, the CPU included, which costs about a
    tenth of a CartPole collection."""
    if policy_device.type == "cpu":
        return {}
    return {"env_device": "cpu", "policy_device": policy_device, "storing_device": policy_device}


class EvaluationEpisodes:
    """This process's share of `episodes` whole episodes of the policy taking its most
    likely action, played as many at a time as `env` holds. Episode i starts from seed
    `seed + i` (element j of a batched env seeded s starts from s + j), so the episodes,
    and their mean, are the same however many DDP ranks share them."""

    def __init__(
        self, env: EnvBase, policy: TensorDictModuleBase, seed: int, episodes: int, trainer: L.Trainer
    ):
        if episodes < trainer.world_size:
            raise ConfigError(
                f"{episodes} evaluation episode(s) for {trainer.world_size} processes: give each "
                "process one at least (eval_episodes, test_episodes)"
            )
        self.env, self.policy, self.seed = env, policy, seed
        rank, processes, size = trainer.global_rank, trainer.world_size, env.batch_size.numel()
        first, end = episodes * rank // processes, episodes * (rank + 1) // processes
        self.batches = [range(start, min(start + size, end)) for start in range(first, end, size)]

    def __len__(self) -> int:
        return len(self.batches)

    def __iter__(self) -> Iterator[TensorDictBase]:
        for batch in self.batches:
            self.env.set_seed(self.seed + batch.start)
            yield first_episodes(self.env, self.policy, len(batch))


def first_episodes(env: EnvBase, policy: TensorDictModuleBase, count: int) -> TensorDictBase:
    """The return and length of the first episode of each of the first `count` envs, as
    the ("next", "episode_reward"), ("next", "step_count") and ("next", "done") entries
    of a batch of `count`. The batch steps on until each of them has ended an episode; an
    env whose episode ended is reset and steps with the others. The sums are kept here,
    not by RewardSum and StepCounter transforms: a fifth of an evaluation step."""
    device = next(policy.parameters()).device
    # The envs step on the CPU: a policy on a GPU acts on a copy of their state, and only its
    # action comes back. Moving whole steps would copy each into a TensorDict that checks
    # the device of every later write: a tenth of a CartPole step.
    move = device.type != "cpu"
    returns, lengths = torch.zeros(count), torch.zeros(count, dtype=torch.int64)
    ended = torch.zeros(count, dtype=torch.bool)
    # A probabilistic policy takes its most likely action; the part's greedy_policy() does so anyway.
    with set_exploration_type(ExplorationType.DETERMINISTIC), torch.no_grad():
        state = env.reset()
        for _ in range(EVAL_MAX_STEPS):
            if move:
                state[env.action_key] = policy(state.to(device))[env.action_key].cpu()
            else:
                policy(state)
            step, state = env.step_and_maybe_reset(state)
            playing = ~ended
            # RL-9: the step's reward and done flag are in its "next" entry.
            returns += step["next", "reward"][:count].reshape(count) * playing
            lengths += playing
            ended |= step["next", "done"][:count].reshape(count)
            if ended.all():
                break
    # An episode that EVAL_MAX_STEPS cut off counts as ended where it stopped.
    episode_end = {"episode_reward": returns, "step_count": lengths, "done": torch.ones_like(ended)}
    return TensorDict({"next": {key: value.unsqueeze(-1) for key, value in episode_end.items()}}, [count])


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
        self.eval_envs: dict[int, EnvBase] = {}  # by width: episodes played at once

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
            **collector_devices(device),
        )
        return self.collector

    def val_dataloader(self) -> EvaluationEpisodes:
        return self._episodes(seed=derived_seed(self.cfg.seed, 1), episodes=self.cfg.eval_episodes)

    def test_dataloader(self) -> EvaluationEpisodes:
        # Seeds of its own: the test episodes are not the validation episodes played again.
        return self._episodes(seed=derived_seed(self.cfg.seed, 2), episodes=self.cfg.test_episodes)

    def _episodes(self, seed: int, episodes: int) -> EvaluationEpisodes:
        # This process's share of the episodes steps as one batch in this process, so that
        # twenty take little longer than the longest of them; validation and test share the
        # batch when their shares are the same size.
        width = min(-(-episodes // self.trainer.world_size), MAX_EVAL_ENVS)
        if width not in self.eval_envs:
            self.eval_envs[width] = make_env(self.cfg.env_name, width)  # first_episodes sums its episodes
        policy = self.trainer.lightning_module.greedy_policy()
        return EvaluationEpisodes(self.eval_envs[width], policy, seed, episodes, self.trainer)

    def teardown(self, stage: str) -> None:
        self.close()

    def close(self) -> None:
        """Shut the collector and every environment down, worker processes included;
        safe to call more than once (RL-3)."""
        if self.collector is not None:
            self.collector.shutdown()  # closes self.env too
            self.collector = None
        for env in (self.env, *self.eval_envs.values()):
            if env is not None and not env.is_closed:
                env.close(raise_if_closed=False)
        self.env, self.eval_envs = None, {}
