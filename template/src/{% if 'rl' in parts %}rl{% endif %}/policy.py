"""The policy's side of an env's action spec: a part's actor network made a categorical
distribution over discrete actions, or a normal distribution around its outputs for continuous
ones, with a learned scale per action value that does not depend on the observation (as
stable-baselines3 and CleanRL build PPO's); and the observation statistics it may scale its
inputs by. The envs clip a continuous action to its bounds (src/rl/data.py's ClipAction)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from tensordict.nn import AddStateIndependentNormalScale, TensorDictModule
from torch import nn
from torch.distributions import Categorical
from torchrl.modules import IndependentNormal, ProbabilisticActor, RunningValueNorm

# In standard deviations, as SB3's VecNormalize and TorchRL's MuJoCo recipe clip them: a rare
# extreme observation does not swamp the networks.
CLIP_NORMALIZED = 10.0


@dataclass(frozen=True)
class ActionSpace:
    """One of `size` actions (discrete), or `size` values, value i within [low[i], high[i]]
    (infinite where the env does not bound it)."""

    size: int
    low: tuple[float, ...] = ()
    high: tuple[float, ...] = ()

    @property
    def continuous(self) -> bool:
        return bool(self.low)

    def policy(self, network: nn.Module) -> ProbabilisticActor:
        """The stochastic policy that collects and that PPO trains; return_log_prob: PPO's ratio
        needs the collecting policy's log-probabilities."""
        if not self.continuous:
            logits = TensorDictModule(network, in_keys=["observation"], out_keys=["logits"])
            return ProbabilisticActor(
                logits, ["logits"], distribution_class=Categorical, return_log_prob=True
            )
        # Float32: PPO's ratio compares log-probabilities that bf16-mixed would round to about 1%.
        # A normal's log-probability and entropy are closed forms: PPO's loss takes 40% less time
        # than with a TanhNormal squashed into the bounds, whose entropy is sampled.
        mean_and_scale = nn.Sequential(network, Float32(), AddStateIndependentNormalScale(self.size))
        parameters = TensorDictModule(mean_and_scale, in_keys=["observation"], out_keys=["loc", "scale"])
        return ProbabilisticActor(
            parameters, ["loc", "scale"], distribution_class=IndependentNormal, return_log_prob=True
        )

    def most_likely_action(self, outputs: torch.Tensor) -> torch.Tensor:
        """The likeliest action, or the mean within the bounds (the action an env takes from the
        policy's deterministic sample), from the network's outputs without building the
        distribution (a fifth of an evaluation step)."""
        if not self.continuous:
            return outputs.argmax(dim=-1)
        low, high = (torch.tensor(bound, device=outputs.device) for bound in (self.low, self.high))
        return outputs.float().clamp(low, high)


class Float32(nn.Module):
    def forward(self, outputs: torch.Tensor) -> torch.Tensor:
        return outputs.float()


class ObservationNormalizer(RunningValueNorm):
    """Standardizes by the running mean and variance of every observation collected so far.
    The statistics are buffers: checkpoints and model.pt keep them. The identity until the first
    update (the sum of squares stands for a variance of 1 while the count is 0)."""

    def __init__(self, size: int) -> None:
        super().__init__(shape=size)
        self.m2.fill_(1.0)

    def forward(self, observation: torch.Tensor) -> torch.Tensor:
        return self.normalize(observation).clamp(-CLIP_NORMALIZED, CLIP_NORMALIZED)
