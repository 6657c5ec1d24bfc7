"""A custom TorchRL environment to copy when your task is not a gymnasium env.

LineWalk: a point on a line must reach a target. Each step moves it left, keeps it
or moves it right; the reward is minus its distance to the target, and reaching
the target ends the episode. Train on it with `--env-name LineWalk`; check a copy
with `torchrl.envs.utils.check_env_specs(YourEnv())`.
"""

from __future__ import annotations

import torch
from tensordict import TensorDict, TensorDictBase
from torchrl.data import Bounded, Categorical, Composite, Unbounded
from torchrl.envs import EnvBase


class LineWalk(EnvBase):
    name = "LineWalk"
    step_size = 0.1
    max_steps = 50

    def __init__(self, device: str | torch.device = "cpu") -> None:
        # RL-7: a torch.device, not a string: TorchRL compares and moves with it.
        super().__init__(device=torch.device(device), batch_size=torch.Size([]))
        # RL-10: the current spec classes, Bounded / Categorical / Composite / Unbounded.
        self.observation_spec = Composite(
            observation=Bounded(low=-1.0, high=1.0, shape=(2,), device=self.device),  # position, target
            # RL-5: a diagnostic field. It needs a spec, because collectors keep only the
            # keys the specs name and would drop it silently.
            distance=Unbounded(shape=(1,), device=self.device),
        )
        self.action_spec = Categorical(3, device=self.device)  # left, stay, right
        self.reward_spec = Unbounded(shape=(1,), device=self.device)
        # Reaching the target terminates an episode; running out of steps truncates it.
        self.done_spec = Composite(
            {
                key: Categorical(2, shape=(1,), dtype=torch.bool, device=self.device)
                for key in ("done", "terminated", "truncated")
            }
        )
        self._position = torch.zeros((), device=self.device)
        self._target = torch.zeros((), device=self.device)
        self._steps = 0
        self._generator = torch.Generator().manual_seed(0)

    def _reset(self, tensordict: TensorDictBase | None = None) -> TensorDictBase:
        start, target = torch.rand(2, generator=self._generator) * 2 - 1
        self._position, self._target, self._steps = start.to(self.device), target.to(self.device), 0
        return self._observe(done=False, truncated=False)

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        move = (tensordict["action"].to(torch.float32) - 1) * self.step_size
        self._position = (self._position + move).clamp(-1.0, 1.0)
        self._steps += 1
        distance = (self._position - self._target).abs()
        reached = bool(distance < self.step_size / 2)
        result = self._observe(done=reached, truncated=self._steps >= self.max_steps and not reached)
        result["reward"] = (-distance).reshape(1)
        return result

    def _observe(self, done: bool, truncated: bool) -> TensorDictBase:
        def flag(value: bool) -> torch.Tensor:
            return torch.tensor([value], device=self.device)

        return TensorDict(
            {
                "observation": torch.stack([self._position, self._target]),
                "distance": (self._position - self._target).abs().reshape(1),
                "done": flag(done or truncated),
                "terminated": flag(done),
                "truncated": flag(truncated),
            },
            batch_size=self.batch_size,
            device=self.device,
        )

    def _set_seed(self, seed: int | None) -> None:
        self._generator.manual_seed(0 if seed is None else seed)
