"""What a part's sweep.py declares: its search space, in W&B's sweep format, and how
trials are scored; the same space as Optuna distributions for the local engine."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import optuna

from src.config import BaseConfig, ConfigError

Goal = Literal["minimize", "maximize"]


@dataclass
class SweepSpec:
    """What a part's sweep.py declares."""

    configs: Mapping[str, type[BaseConfig]]
    space: dict[str, dict[str, Any]]  # W&B sweep "parameters"
    architectures: dict[str, dict[str, Any]]  # SWP-4: presets the `architecture` parameter names
    # The part's main_with_config(cfg, resume_from=None) (SWP-2); given a checkpoint
    # only when a trial cut off by a kill is resumed (RES-1).
    train: Callable[..., dict[str, float]]
    # A key of what `train` returns, e.g. "best_val_loss"; or, where the config chooses the
    # metric (an eval_metric field, say), a function of the sweep's config that names it.
    metric: str | Callable[[BaseConfig], str]
    goal: Goal | Callable[[BaseConfig], Goal]
    method: Literal["random", "bayes"] = "bayes"

    def for_config(self, base: BaseConfig) -> SweepSpec:
        """This spec with the metric and goal of `base`, the config every trial starts from."""
        return dataclasses.replace(
            self,
            metric=self.metric(base) if callable(self.metric) else self.metric,
            goal=self.goal(base) if callable(self.goal) else self.goal,
        )

    def decode(self, params: dict[str, Any]) -> dict[str, Any]:
        """Sampled values -> config fields; `architecture` stands for all of its preset's."""
        fields = {name: value for name, value in params.items() if name != "architecture"}
        return fields | self.architectures.get(params.get("architecture"), {})


def optuna_distributions(
    space: dict[str, dict[str, Any]],
) -> dict[str, optuna.distributions.BaseDistribution]:
    """W&B parameter specs as Optuna distributions: `values` lists, `min`/`max`
    ranges (integer when both bounds are), `log_uniform_values`. Fixed `value`s are
    not sampled."""
    distributions: dict[str, optuna.distributions.BaseDistribution] = {}
    for name, spec in space.items():
        if "value" in spec:
            continue
        if "values" in spec:
            distributions[name] = optuna.distributions.CategoricalDistribution(spec["values"])
        elif spec.get("distribution") == "log_uniform_values":
            distributions[name] = optuna.distributions.FloatDistribution(spec["min"], spec["max"], log=True)
        elif isinstance(spec.get("min"), int) and isinstance(spec.get("max"), int):
            distributions[name] = optuna.distributions.IntDistribution(spec["min"], spec["max"])
        elif "min" in spec and "max" in spec:
            distributions[name] = optuna.distributions.FloatDistribution(spec["min"], spec["max"])
        else:
            raise ConfigError(f"search space '{name}': use value, values, or min and max (got {spec})")
    return distributions


def fixed_values(space: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return {name: spec["value"] for name, spec in space.items() if "value" in spec}
