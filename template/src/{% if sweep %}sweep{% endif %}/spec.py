"""What a part's sweep.py declares: its search space, in W&B's sweep format, and how
trials are scored; the same space as Optuna distributions for the local engine."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from optuna import distributions as optuna_dist

from src.config import BaseConfig, ConfigError, first_line

Goal = Literal["minimize", "maximize"]


@dataclass
class SweepSpec:
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

    def distributions(self) -> dict[str, optuna_dist.BaseDistribution]:
        """The sampled parameters as Optuna distributions: `values` lists, `min`/`max` ranges
        (integer when both bounds are), `log_uniform_values`."""
        found: dict[str, optuna_dist.BaseDistribution] = {}
        for name, spec in self.space.items():
            low, high = spec.get("min"), spec.get("max")
            if "value" in spec:
                continue
            if "values" not in spec and (low is None or high is None):
                raise ConfigError(f"search space '{name}': use value, values, or min and max (got {spec})")
            log = spec.get("distribution") == "log_uniform_values"
            integer = isinstance(low, int) and isinstance(high, int) and not log
            kind = optuna_dist.IntDistribution if integer else optuna_dist.FloatDistribution
            try:
                if "values" in spec:
                    found[name] = optuna_dist.CategoricalDistribution(spec["values"])
                else:
                    found[name] = kind(low, high, log=log)
            except (ValueError, TypeError) as error:  # no values, min above max, a log range from 0
                raise ConfigError(f"search space '{name}': Optuna refuses it: {error} (got {spec})") from None
        return found

    def check_fields(self, base: BaseConfig) -> None:
        """Every sampled name and preset field is a field of the config, or each trial would fail."""
        known = {f.name for f in dataclasses.fields(base)}
        named = [name for name in self.space if name != "architecture"]
        named += [name for preset in self.architectures.values() for name in preset]
        if unknown := sorted(set(named) - known):
            raise ConfigError(
                f"search space: {', '.join(unknown)} not a field of {type(base).__name__} (a misspelt "
                f"name?); its fields: {', '.join(sorted(known))}"
            )
        # A value of another type than its field's trained as whatever it meant to Python ("no"
        # is true) and left a config.json that nothing loads again.
        given = [(name, value) for name, spec in self.space.items() for value in spec.get("values", ())]
        given += [(name, value) for preset in self.architectures.values() for name, value in preset.items()]
        fields = base.to_dict()
        for name, value in [(name, value) for name, value in given if name != "architecture"]:
            try:
                type(base).from_dict({**fields, name: value})
            except (TypeError, ValueError) as error:
                raise ConfigError(f"search space '{name}': {first_line(error)}") from None
