"""The policy's side of an env's action spec: a part's actor network made a distribution over
actions, categorical for discrete actions and a TanhNormal within the bounds of continuous
ones (as TorchRL's PPO recipes build them), and the observation statistics it may scale
its inputs by."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from tensordict.nn import NormalParamExtractor, TensorDictModule
from torch import nn
from torch.distributions import Categorical
from torchrl.modules import ProbabilisticActor, RunningValueNorm, TanhNormal

# Normalized observations are clipped to this many standard deviations, as SB3's VecNormalize
# and TorchRL's MuJoCo recipe do: a rare extreme value does not swamp the networks.
CLIP_NORMALIZED = 10.0


@dataclass(frozen=True)
class ActionSpace:
    """What the policy chooses: one of `size` actions (discrete), or `size` values at once,
    value i within [low[i], high[i]] (continuous)."""

    size: int
    low: tuple[float, ...] = ()
    high: tuple[float, ...] = ()

    @property
    def continuous(self) -> bool:
        return bool(self.low)

    @property
    def actor_outputs(self) -> int:
        """The actor network's outputs per observation: a logit per action, or a location
        and a scale parameter per value (all locations first)."""
        return 2 * self.size if self.continuous else self.size

    def policy(self, network: nn.Module) -> ProbabilisticActor:
        """The stochastic policy that collects experience and that PPO trains: `network`
        maps "observation" to the distribution's parameters."""
        if not self.continuous:
            parameters = TensorDictModule(network, in_keys=["observation"], out_keys=["logits"])
            # return_log_prob: PPO's ratio needs the collecting policy's log-probabilities.
            return ProbabilisticActor(
                parameters, in_keys=["logits"], distribution_class=Categorical, return_log_prob=True
            )
        # The scale through a softplus shifted to give 1 for an output of 0, floored above 0.
        split = nn.Sequential(network, Float32(), NormalParamExtractor(scale_lb=1e-4))
        parameters = TensorDictModule(split, in_keys=["observation"], out_keys=["loc", "scale"])
        bounds = {"low": torch.tensor(self.low), "high": torch.tensor(self.high)}
        return ProbabilisticActor(
            parameters,
            in_keys=["loc", "scale"],
            distribution_class=TanhNormal,
            # tanh_loc=False: the location stays free; the sample is squashed into the bounds.
            distribution_kwargs={**bounds, "tanh_loc": False},
            return_log_prob=True,
        )

    def most_likely_action(self, outputs: torch.Tensor) -> torch.Tensor:
        """The action the policy takes when it does not explore, from the network's outputs:
        the likeliest action, or the squashed location (TanhNormal's deterministic sample),
        without building the distribution (a fifth of an evaluation step)."""
        if not self.continuous:
            return outputs.argmax(dim=-1)
        location = outputs[..., : self.size].float()
        low, high = (torch.tensor(bound, device=outputs.device) for bound in (self.low, self.high))
        return (high + low) / 2 + (high - low) / 2 * torch.tanh(location)


class Float32(nn.Module):
    """Distribution parameters in float32 under bf16-mixed precision: PPO's probability
    ratio compares log-probabilities that bf16 would round to about 1%."""

    def forward(self, outputs: torch.Tensor) -> torch.Tensor:
        return outputs.float()


class ObservationNormalizer(RunningValueNorm):
    """The running mean and variance of every observation collected so far (TorchRL's
    Welford normaliser), by which a network's input is standardized. Its statistics are
    buffers: checkpoints and saved models keep them, so a resumed run and a loaded policy
    see what the trained one saw. The identity until its first update."""

    def __init__(self, size: int) -> None:
        super().__init__(shape=size)
        # Before any frame: a variance of 1 (the sum of squares stands for it while the
        # count is 0), which the first update's frames then all but replace.
        self.m2.fill_(1.0)

    def forward(self, observation: torch.Tensor) -> torch.Tensor:
        return self.normalize(observation).clamp(-CLIP_NORMALIZED, CLIP_NORMALIZED)
