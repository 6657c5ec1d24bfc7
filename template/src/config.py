"""The config hierarchy shared by every part (CFG-1, CFG-2).

BaseConfig -> SLNeuralConfig / SLTreeConfig / RLConfig -> a part's task config ->
its variants. Variants override only the fields that differ (CFG-6).
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from dataclasses import dataclass, field
from typing import Any, Literal, Self

from src.project import PROJECT_SLUG, WANDB_ENTITY

WandbMode = Literal["auto", "online", "offline", "disabled"]


@dataclass
class OutputConfig:
    """Where runs are written: {base_dir}/{name}_{YYYYMMDD_HHMMSS}/ (OUT-1)."""

    base_dir: str = "output"


@dataclass
class BaseConfig:
    """Fields every part has, whatever its kind."""

    name: str = "baseline"
    seed: int = 42
    # CFG-4: every run ends within this budget, checkpoint and final evaluation included.
    max_wall_clock_hours: float = 24.0
    output: OutputConfig = field(default_factory=OutputConfig)
    # CB-4: a file at this path (relative to the working directory) stops the run after
    # the current epoch; so does a file named STOP inside the run directory.
    stop_file: str = "STOP"
    # LOG-1: "auto" logs online when a W&B API key is configured, offline otherwise.
    wandb_mode: WandbMode = "auto"
    wandb_project: str = PROJECT_SLUG
    wandb_entity: str = WANDB_ENTITY

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready snapshot of every field (CFG-2)."""
        return json.loads(json.dumps(dataclasses.asdict(self)))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Self:
        """Rebuild a config from `to_dict()` output; unknown keys are an error (CFG-2)."""
        return _build(cls, data)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Self:
        return cls.from_dict(json.loads(text))


@dataclass
class LightningConfig(BaseConfig):
    """Trainer settings shared by the Lightning parts: SL neural and RL."""

    # CFG-5: effectively unlimited, so early stopping (CB-1) ends training.
    num_epochs: int = 10_000
    patience: int = 10
    min_delta: float = 0.0
    batch_size: int = 64
    learning_rate: float = 1e-3
    weight_decay: float = 0.01
    gradient_accumulation_steps: int = 1  # MEM-3
    gradient_clip_val: float = 1.0  # LIT-4: clipping through the Trainer
    # MEM-1: Lightning's BatchSizeFinder (binsearch) replaces batch_size with the
    # largest that fits in memory. Worth it on a GPU; off by default so a run's
    # hyperparameters do not depend on the machine.
    find_batch_size: bool = False
    # PRC-1/PRC-3: "auto" is bf16-mixed where the GPU supports it, else 32-true.
    precision: Literal["auto", "bf16-mixed", "32-true"] = "auto"
    profiler: Literal["simple", "advanced"] = "simple"  # PRF-1
    # DDP-1: the same code runs on several devices and nodes.
    accelerator: str = "auto"
    devices: str = "auto"
    num_nodes: int = 1
    strategy: str = "auto"
    log_every_n_steps: int = 10


@dataclass
class SLNeuralConfig(LightningConfig):
    """Supervised neural parts (Lightning)."""

    num_workers: int = 0
    val_fraction: float = 0.15
    test_fraction: float = 0.15
    # The train/val/test split has its own seed, so changing `seed` keeps the split.
    split_seed: int = 0


@dataclass
class SLTreeConfig(BaseConfig):
    """Supervised tree parts (XGBoost's native API)."""

    # The tree reading of CFG-5: a high round cap; early stopping is the binding limit.
    num_boost_round: int = 10_000
    early_stopping_rounds: int = 50
    val_fraction: float = 0.15
    test_fraction: float = 0.15
    split_seed: int = 0


@dataclass
class RLConfig(LightningConfig):
    """Reinforcement-learning parts (TorchRL inside Lightning)."""

    num_envs: int = 4  # RL-1
    frames_per_batch: int = 1024
    gamma: float = 0.99


def _build(cls: type, data: dict[str, Any]) -> Any:
    if not isinstance(data, dict):
        raise TypeError(f"{cls.__name__}: expected a JSON object, got {type(data).__name__}")
    known = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - set(known))
    if unknown:
        raise ValueError(
            f"{cls.__name__}: unknown field(s) {', '.join(unknown)}; valid fields: {', '.join(sorted(known))}"
        )
    hints = typing.get_type_hints(cls)
    return cls(**{key: _convert(hints[key], value) for key, value in data.items()})


def _convert(hint: Any, value: Any) -> Any:
    """Undo what JSON does to a field's type: nested configs and tuples."""
    origin = typing.get_origin(hint)
    if dataclasses.is_dataclass(hint):
        return _build(hint, value)
    if origin is tuple and isinstance(value, list):
        return tuple(value)
    if origin in (typing.Union, types.UnionType) and value is not None:
        for option in typing.get_args(hint):
            if option is not type(None):
                return _convert(option, value)
    return value
