"""Any part's environments, checked, laid out and served to Lightning (LIT-2, RL-1..4, RL-9).

A part's data.py has `make_env(env_name, num_envs)`, `num_envs` TorchRL envs stepping as one
batch, or `make_env(env_name)`, one env per call (each then steps in a worker process).
"""

from __future__ import annotations

import functools
import inspect
import math
import multiprocessing
import os
import signal
import sys
from collections.abc import Callable, Iterator
from types import ModuleType

import gymnasium
import lightning as L
import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.nn import TensorDictModuleBase
from torchrl.collectors import Collector
from torchrl.data import Bounded, Categorical, Unbounded
from torchrl.envs import (
    DoubleToFloat,
    EnvBase,
    ParallelEnv,
    RewardSum,
    StepCounter,
    Transform,
    TransformedEnv,
)

from src.config import ConfigError, first_line
from src.errors import DataValidationError
from src.rl.config import RLConfig
from src.rl.policy import ActionSpace
from src.runs.lifetime import signals_held
from src.training.precision import full_float32
from src.training.seeding import derived_seed, rank_seed

EVAL_MAX_STEPS = 10_000  # ends an evaluation episode that never ends on its own
MAX_EVAL_ENVS = 32  # evaluation episodes played at once, at most: the envs' memory
TRAINABLE = (
    "use an env with a flat vector observation and discrete actions or a vector of continuous ones that "
    "the part's make_env() makes (gymnasium's CartPole-v1, Acrobot-v1, Pendulum-v1, "
    "MountainCarContinuous-v0, or one of the part's envs.py)"
)
MakeEnv = Callable[..., EnvBase]


def env_maker(source: ModuleType) -> MakeEnv:
    if not callable(make_env := getattr(source, "make_env", None)):
        raise ConfigError(f"{source.__name__} has no make_env(env_name, num_envs) to make the envs")
    return make_env


def makes_batches(make_env: MakeEnv) -> bool:
    return len(inspect.signature(make_env).parameters) >= 2


def make_envs(make_env: MakeEnv, env_name: str, num_envs: int) -> EnvBase:
    """`num_envs` envs as one batch (one env where `make_env` makes one per call), checked.
    RL-2: module-level, so ParallelEnv pickles it (with functools.partial) into its workers."""
    if multiprocessing.parent_process() is not None:
        # A worker: Ctrl-C or a `kill` of the process group reaches every process; the main one
        # stops after its step and shuts the workers down (RL-3).
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    batched = makes_batches(make_env)
    env = make_env(env_name, num_envs) if batched else make_env(env_name)
    size = (num_envs,) if batched else ()
    if not (is_env := isinstance(env, EnvBase)) or tuple(env.batch_size) != size:
        call = f"{make_env.__module__}.make_env({env_name!r}{f', {num_envs}' if batched else ''})"
        got = f"envs of batch_size {tuple(env.batch_size)}" if is_env else f"a {type(env).__name__}"
        wanted = f"{num_envs} stepping as one batch, batch_size {size}" if batched else "one, batch_size ()"
        raise ConfigError(f"{call} returned {got}; it must return TorchRL EnvBase envs: {wanted}")
    # MuJoCo's envs, and many of one's own, observe in float64; the networks take float32.
    if any(spec.dtype == torch.float64 for spec in env.observation_spec.values(True, True)):
        env = TransformedEnv(env, DoubleToFloat())
    return env


def env_problem(source: ModuleType, env_name: str) -> list[str]:
    """Why the policy cannot train on `env_name`, one line; none when it can (CFG-3)."""
    try:
        observation_and_action_space(env_maker(source), env_name)
    except ConfigError as error:
        return [str(error)]
    return []


def observation_and_action_space(make_env: MakeEnv, env_name: str) -> tuple[int, ActionSpace]:
    """The size of the env's flat vector observation and what it acts in; a one-line
    ConfigError for an env the policy cannot take."""

    def refused(problem: str) -> ConfigError:
        return ConfigError(f"env_name {env_name!r}: {problem}; {TRAINABLE}")

    def described(spec) -> str:
        return f"{type(spec).__name__} of shape {tuple(spec.shape)}"

    try:
        env = make_envs(make_env, env_name, 1)
    except ConfigError:
        raise
    except (gymnasium.error.Error, ImportError) as error:  # an unknown id, a missing dependency
        raise refused(first_line(error)) from None
    except ValueError as error:
        if not _raised_in(error, "torchrl"):  # make_env's own word on the name, say
            raise refused(first_line(error)) from None
        # TorchRL cannot batch the observation (Blackjack's tuple)
        raise refused("its observation is not one flat vector: TorchRL cannot batch it") from None
    observation, action, reward = env.observation_spec, env.action_spec, env.reward_spec
    if env.batch_size:
        observation, action, reward = observation[0], action[0], reward[0]
    gymnasium_actions = _gymnasium_action_space(env)
    env.close()
    if "observation" not in observation:  # gymnasium's Dict observation: a key per entry
        named = ", ".join(map(str, observation.keys()))
        raise refused(
            f"its observation is a dict ({named}), not one flat vector of floats: flatten it in "
            "make_env with gymnasium.wrappers.FlattenObservation"
        )
    observation = observation["observation"]
    # A discrete observation (FrozenLake's cell) or an image is none.
    if observation.domain != "continuous" or len(observation.shape) != 1:
        raise refused(f"its observation is {described(observation)}, not one flat vector of floats")
    if tuple(reward.shape) != (1,):  # GAE would fail deep inside, on shapes that do not match
        raise ConfigError(
            f"env_name {env_name!r}: its reward_spec has shape {tuple(reward.shape)} per env, where a "
            "TorchRL env gives one reward of shape (1,) per env: batch_size + (1,) in all"
        )
    if isinstance(gymnasium_actions, gymnasium.spaces.Discrete) and int(gymnasium_actions.start) != 0:
        # gymnasium checks no action: the env would step on the policy's 0..n-1 as they are.
        raise ConfigError(
            f"env_name {env_name!r}: its actions are {gymnasium_actions}, numbered from "
            f"{gymnasium_actions.start}, where the policy picks 0 to {gymnasium_actions.n - 1}: shift "
            "them in make_env with gymnasium.wrappers.TransformAction"
        )
    if hasattr(action.space, "n"):
        if not isinstance(action, Categorical):  # one-hot: GymWrapper's encoding unless told otherwise
            raise ConfigError(
                f"env_name {env_name!r}: its actions are {described(action)}, where the policy picks "
                "one of n by its number: GymWrapper(..., categorical_action_encoding=True), or an "
                "action_spec of Categorical(n)"
            )
        return observation.shape[0], ActionSpace(action.space.n)
    if isinstance(action, Bounded | Unbounded) and action.domain == "continuous" and len(action.shape) == 1:
        # Unbounded values: the normal distribution needs no bounds, and the envs clip nothing.
        size, bounded = action.shape[0], isinstance(action, Bounded)
        low = action.space.low.tolist() if bounded else [-math.inf] * size
        high = action.space.high.tolist() if bounded else [math.inf] * size
        if all(map(float.__lt__, low, high)):
            return observation.shape[0], ActionSpace(size, tuple(low), tuple(high))
    raise refused(
        f"its actions are {described(action)}, neither one choice of n nor a vector of values "
        "(its lower bounds below its upper ones)"
    )


def _raised_in(error: BaseException, package: str) -> bool:
    """Whether the innermost frame of an error's traceback is in the installed `package`."""
    frame = error.__traceback__
    while frame is not None and frame.tb_next is not None:
        frame = frame.tb_next
    return frame is not None and f"{os.sep}{package}{os.sep}" in frame.tb_frame.f_code.co_filename


def _gymnasium_action_space(env: EnvBase) -> gymnasium.Space | None:
    """The action space of the gymnasium env (or vector of envs) a TorchRL env wraps, if any."""
    # TorchRL's private `_env` (GymWrapper's wrapped env): test_rl's shifted_cart_pole case
    # fails if it moves.
    wrapped = getattr(getattr(env, "base_env", env), "_env", None)
    return getattr(wrapped, "single_action_space", None) or getattr(wrapped, "action_space", None)


def target_reward(cfg: RLConfig) -> float | None:
    """cfg.target_reward, or else the reward gymnasium registers as solving cfg.env_name, if any."""
    if cfg.target_reward is not None:
        return cfg.target_reward
    spec = gymnasium.registry.get(cfg.env_name)
    return None if spec is None else spec.reward_threshold


def training_env(cfg: RLConfig, make_env: MakeEnv, seed: int) -> TransformedEnv:
    """cfg.num_envs envs stepping together, with RewardSum and StepCounter (RL-4), observations
    checked finite, a continuous action clipped to its bounds."""
    if not makes_batches(make_env):  # RL-1: a worker process per env
        env = ParallelEnv(cfg.num_envs, functools.partial(make_envs, make_env, cfg.env_name, 1), device="cpu")
    elif cfg.env_workers:  # RL-1: ParallelEnv, never SerialEnv, each worker stepping a batch
        each = functools.partial(make_envs, make_env, cfg.env_name, cfg.num_envs // cfg.env_workers)
        env = ParallelEnv(cfg.env_workers, each, device="cpu")
    else:  # cheap envs: one batch in this process, no worker to pass steps to
        env = make_envs(make_env, cfg.env_name, cfg.num_envs)
    env = TransformedEnv(env, RewardSum())
    env.append_transform(StepCounter())
    env.append_transform(FiniteSteps(cfg.env_name))
    if isinstance(action := env.action_spec, Bounded) and action.domain == "continuous":
        env.append_transform(ClipAction(action.space.low, action.space.high))
    # Seeding starts the workers. A signal then would take away the locks they are still
    # unpickling, and each would print a traceback after the run's end: it waits until they run.
    with signals_held():
        env.set_seed(seed)
    return env


class FiniteSteps(Transform):
    """Ends a run at the envs' first NaN or infinite observation or reward, in one line: the
    policy would sample from the observation deep inside torch, or act on it in silence, and the
    reward would make the batch's every loss NaN, which reads as a diverged run (DATA-1). Its own
    _step costs tens of microseconds a step of 8 CartPoles; TorchRL's per-key one, twice that."""

    def __init__(self, env_name: str) -> None:
        super().__init__()
        self.env_name = env_name

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        return self._checked(next_tensordict)

    def _reset(self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase) -> TensorDictBase:
        return self._checked(tensordict_reset)

    def _checked(self, state: TensorDictBase) -> TensorDictBase:
        for key, article in (("observation", "an"), ("reward", "a")):  # a reset has no reward
            values = state.get(key, None)
            if values is not None and not (finite := torch.isfinite(values)).all():
                where = (~finite).nonzero()[0].tolist()
                raise DataValidationError(
                    f"env {self.env_name!r} returned {article} {key} of {values[tuple(where)].item()} (at "
                    f"{tuple(where)} of a batch shaped {tuple(values.shape)}): {key}s must be finite "
                    "numbers; check the env's step() and reset()"
                )
        return state


class ClipAction(Transform):
    """Steps the envs with the policy's action clipped to the bounds, and leaves the sampled one
    in the collected batch, whose log-probability PPO's ratio needs (TorchRL's inverse
    transforms work on a copy). gymnasium's ClipAction wrapper, for a batch of TorchRL envs:
    TorchRL's ClipTransform takes one bound for every value, and a Box may bound each its own."""

    def __init__(self, low: torch.Tensor, high: torch.Tensor) -> None:
        super().__init__(in_keys_inv=["action"], out_keys_inv=["action"])
        self.register_buffer("low", low.clone())
        self.register_buffer("high", high.clone())

    def _inv_apply_transform(self, action: torch.Tensor) -> torch.Tensor:
        return action.clamp(self.low, self.high)


def test_seed(cfg: RLConfig) -> int:
    """The seed of a run's first test episode: not those of the validation episodes."""
    return derived_seed(cfg.seed, 2)


def evaluation_envs(make_env: MakeEnv, env_name: str, episodes: int) -> EnvBase:
    """Envs for `episodes` evaluation episodes: all of them as one batch, up to MAX_EVAL_ENVS, so
    that twenty take little longer than the longest (one at a time where make_env makes one)."""
    envs = make_envs(make_env, env_name, min(episodes, MAX_EVAL_ENVS) if makes_batches(make_env) else 1)
    return TransformedEnv(envs, FiniteSteps(env_name))


class EvaluationEpisodes:
    """This process's share of `episodes` episodes of the greedy policy, as many at a time as
    `env` holds. Episode i starts from seed `seed + i` (element j of a batched env seeded s from
    s + j), so they are the same however many DDP ranks share them."""

    def __init__(
        self,
        env: EnvBase,
        policy: TensorDictModuleBase,
        seed: int,
        episodes: int,
        rank: int = 0,
        processes: int = 1,
    ) -> None:
        if episodes < processes:
            raise ConfigError(
                f"{episodes} evaluation episode(s) for {processes} processes: give each "
                "process one at least (eval_episodes, test_episodes)"
            )
        self.env, self.policy, self.seed = env, policy, seed
        size = env.batch_size.numel()
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
    ("next", "episode_reward" / "step_count" / "done"). Summed here, not by RewardSum and
    StepCounter transforms: a fifth of an evaluation step."""
    device = next(policy.parameters()).device
    returns, lengths = torch.zeros(count), torch.zeros(count, dtype=torch.int64)
    ended = torch.zeros(count, dtype=torch.bool)
    # The greedy policy: no exploration to turn off. In full float32: TF32's logits on a GPU
    # can tip a near tie, and the episodes should be those the evaluate command plays again.
    with torch.no_grad(), full_float32(device.type):
        state = env.reset()
        for _ in range(EVAL_MAX_STEPS):
            # The envs step on the CPU: a policy elsewhere acts on a copy; only its action comes back.
            state[env.action_key] = policy(state.to(device))[env.action_key].cpu()
            step, state = env.step_and_maybe_reset(state)
            returns += step["next", "reward"][:count].reshape(count) * ~ended  # RL-9
            lengths += ~ended
            ended |= step["next", "done"][:count].reshape(count)
            if ended.all():
                break
    # An episode that EVAL_MAX_STEPS cut off counts as ended where it stopped.
    episode_end = {"episode_reward": returns, "step_count": lengths, "done": torch.ones_like(ended)}
    return TensorDict({"next": {key: value.unsqueeze(-1) for key, value in episode_end.items()}}, [count])


class Rollouts(Collector):
    """TorchRL's Collector, whose error says which env worker process died and how: after one
    dies, TorchRL's shutdown fails on the live ones ("Cannot close a process while it is still
    running"), and that error would be the run's last word (RL-3)."""

    def __iter__(self) -> Iterator[TensorDictBase]:
        workers = multiprocessing.active_children()  # the env's, started as it was seeded
        try:
            yield from super().__iter__()
        except Exception as error:
            ended = [(worker.pid, code) for worker in workers if (code := _exit_code(worker)) is not None]
            if not ended:
                raise
            pid, code = ended[0]
            if code < 0:  # multiprocessing's word for "ended by signal -code"
                how = f"was killed by signal {-code} ({signal.strsignal(-code) or 'unknown'})"
            else:
                how = f"exited with status {code} (its own error, if it raised one, went to stderr)"
            raise EnvWorkerDied(f"environment worker process {pid} {how}") from error


class EnvWorkerDied(RuntimeError):
    """An env worker process ended while the envs stepped: killed, or its env raised."""


def _exit_code(process: multiprocessing.process.BaseProcess) -> int | None:
    try:
        return process.exitcode
    except ValueError:  # closed by TorchRL: it was alive, and TorchRL ended it
        return None


class RolloutDataModule(L.LightningDataModule):
    """The envs of `source`, a part's data module: training batches are rollouts, validation and
    test batches whole evaluation episodes. `close()` shuts them down on every way out (RL-3):
    teardown, and the train script's `finally`."""

    def __init__(self, cfg: RLConfig, source: ModuleType) -> None:
        super().__init__()
        self.cfg, self.make_env = cfg, env_maker(source)
        self.num_train_samples = cfg.frames_per_batch * cfg.iterations_per_epoch  # LOG-5
        self.num_val_samples = cfg.eval_episodes
        self.num_observations, self.action_space = 0, ActionSpace(0)  # known once an env is made
        self.env: EnvBase | None = None
        self.collector: Rollouts | None = None
        # Validation's and test's, each as wide as its share of episodes, made once: a
        # validation of 2 episodes steps 2 envs, however many the test plays.
        self.eval_envs: dict[int, EnvBase] = {}

    def setup(self, stage: str | None = None) -> None:
        if not self.num_observations:
            spaces = observation_and_action_space(self.make_env, self.cfg.env_name)
            self.num_observations, self.action_space = spaces

    def train_dataloader(self) -> Rollouts:
        # Not in setup(): Lightning has moved the policy to its device by now.
        policy = self.trainer.lightning_module.policy
        device = next(policy.parameters()).device
        # On the CPU no device is named: a Collector given devices moves every step's tensors.
        devices = {"env_device": "cpu", "policy_device": device, "storing_device": device}
        self.env = training_env(self.cfg, self.make_env, rank_seed(self.cfg.seed, self.trainer.global_rank))
        self.collector = Rollouts(
            self.env,
            policy,
            frames_per_batch=self.cfg.frames_per_batch,
            total_frames=-1,  # endless: Lightning's limit_train_batches makes the epochs
            auto_register_policy_transforms=False,
            # Nothing here reads ("collector", "traj_ids"): numbering each step's trajectory
            # took a fifth of the collection's time on Pendulum-v1, a tenth on CartPole-v1.
            track_traj_ids=False,
            **(devices if device.type != "cpu" else {}),
        )
        return self.collector

    def val_dataloader(self) -> EvaluationEpisodes:
        return self._episodes(derived_seed(self.cfg.seed, 1), self.cfg.eval_episodes)

    def test_dataloader(self) -> EvaluationEpisodes:
        return self._episodes(test_seed(self.cfg), self.cfg.test_episodes)

    def _episodes(self, seed: int, episodes: int) -> EvaluationEpisodes:
        rank, processes = self.trainer.global_rank, self.trainer.world_size
        share = -(-episodes // processes)  # this process's
        if share not in self.eval_envs:
            self.eval_envs[share] = evaluation_envs(self.make_env, self.cfg.env_name, share)
        policy = self.trainer.lightning_module.greedy_policy()
        return EvaluationEpisodes(self.eval_envs[share], policy, seed, episodes, rank, processes)

    def teardown(self, stage: str) -> None:
        self.close()

    def close(self) -> None:
        """Shut the collector and every env down, worker processes included; safe to repeat."""
        try:
            if self.collector is not None:
                self.collector.shutdown()  # closes self.env too
            for env in (self.env, *self.eval_envs.values()):
                if env is not None and not env.is_closed:
                    env.close(raise_if_closed=False)
        except Exception as error:  # noqa: BLE001 - whatever a dead worker makes the close raise
            # An env worker that died (killed, crashed) fails the orderly close, and Python would
            # wait for the others at exit for ever: they go now, and the error that ended the
            # run stays the one it reports.
            for worker in multiprocessing.active_children():
                worker.kill()
            print(f"warning: environment workers stopped by force ({first_line(error)})", file=sys.stderr)
        self.collector = self.env = None
        self.eval_envs = {}
