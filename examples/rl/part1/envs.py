"""A custom TorchRL environment to copy when your task is not a gymnasium env: train on it with
`--env-name LineWalk`; check a copy with `torchrl.envs.utils.check_env_specs(YourEnv())`.

LineWalk: points on a line must each reach a target. Each step moves a point left, keeps it or moves
it right; the reward is minus its distance to the target, and reaching it ends the episode.
`num_envs` walks step together as one batch, as a vectorised env does.
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

    def __init__(self, num_envs: int = 1, device: str | torch.device = "cpu") -> None:
        # RL-7: a torch.device, not a string: TorchRL compares and moves with it.
        super().__init__(device=torch.device(device), batch_size=torch.Size([num_envs]))
        batch = tuple(self.batch_size)
        # RL-10: the current spec classes, Bounded / Categorical / Composite / Unbounded.
        self.observation_spec = Composite(
            # Each walk's position and target.
            observation=Bounded(low=-1.0, high=1.0, shape=(*batch, 2), device=self.device),
            # RL-5: a diagnostic field needs a spec: collectors drop keys no spec names.
            distance=Unbounded(shape=(*batch, 1), device=self.device),
            shape=batch,
        )
        self.action_spec = Categorical(3, shape=batch, device=self.device)  # left, stay, right
        self.reward_spec = Unbounded(shape=(*batch, 1), device=self.device)
        # Reaching the target terminates an episode; running out of steps truncates it.
        self.done_spec = Composite(
            {
                key: Categorical(2, shape=(*batch, 1), dtype=torch.bool, device=self.device)
                for key in ("done", "terminated", "truncated")
            },
            shape=batch,
        )
        self._position = torch.zeros(batch, device=self.device)
        self._target = torch.zeros(batch, device=self.device)
        self._steps = torch.zeros(batch, dtype=torch.int64, device=self.device)
        self._set_seed(0)

    def _reset(self, tensordict: TensorDictBase | None = None) -> TensorDictBase:
        # A collector resets only the walks that ended: "_reset" marks them.
        reset = tensordict.get("_reset", None) if tensordict is not None else None
        if reset is None:
            reset = torch.ones(self.batch_size, dtype=torch.bool)
        reset = reset.view(self.batch_size)
        for index in reset.nonzero().flatten().tolist():
            start, target = torch.rand(2, generator=self._generators[index]) * 2 - 1
            self._position[index], self._target[index] = start.to(self.device), target.to(self.device)
        self._steps[reset] = 0
        not_done = torch.zeros(self.batch_size, dtype=torch.bool, device=self.device)
        return self._observe(done=not_done, truncated=not_done)

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        move = (tensordict["action"].to(torch.float32) - 1) * self.step_size
        self._position = (self._position + move).clamp(-1.0, 1.0)
        self._steps += 1
        distance = (self._position - self._target).abs()
        reached = distance < self.step_size / 2
        result = self._observe(done=reached, truncated=(self._steps >= self.max_steps) & ~reached)
        result["reward"] = -distance.unsqueeze(-1)
        return result

    def _observe(self, done: torch.Tensor, truncated: torch.Tensor) -> TensorDictBase:
        return TensorDict(
            {
                "observation": torch.stack([self._position, self._target], dim=-1),
                "distance": (self._position - self._target).abs().unsqueeze(-1),
                "done": (done | truncated).unsqueeze(-1),
                "terminated": done.unsqueeze(-1),
                "truncated": truncated.unsqueeze(-1),
            },
            batch_size=self.batch_size,
            device=self.device,
        )

    def _set_seed(self, seed: int | None) -> None:
        # Walk i draws from seed + i, as in gymnasium's vector envs: an evaluation episode's seed then
        # depends on its number alone, not on the batch that plays it.
        first = 0 if seed is None else seed
        self._generators = [torch.Generator().manual_seed(first + i) for i in range(self.batch_size.numel())]
