"""Configs of this part (CFG-1, CFG-6): pick one with `--config NAME`.

The task config holds the baseline; each variant overrides only what differs.
"""

from __future__ import annotations

from dataclasses import dataclass

from src.neural.config import SLNeuralConfig, Task


@dataclass
class DigitsConfig(SLNeuralConfig):
    """An MLP on scikit-learn's bundled 8x8 handwritten digits (1,797 images, 10 classes).

    Attributes:
        hidden_sizes: Widths of the MLP's hidden layers, input side first.
        dropout: Dropout probability after each hidden layer, in [0, 1).
    """

    name: str = "baseline"
    task: Task = "classification"
    label_column: tuple[str, ...] = ("target",)
    hidden_sizes: tuple[int, ...] = (256, 128)
    dropout: float = 0.2
    patience: int = 20

    def problems(self) -> list[str]:
        found = super().problems()
        if not self.hidden_sizes or min(self.hidden_sizes) < 1:
            found.append(f"hidden_sizes {self.hidden_sizes}: give one or more positive layer widths")
        if not 0 <= self.dropout < 1:
            found.append(f"dropout {self.dropout}: must be in [0, 1)")
        return found


@dataclass
class Wide(DigitsConfig):
    name: str = "wide"
    hidden_sizes: tuple[int, ...] = (1024, 512)


@dataclass
class Deep(DigitsConfig):
    name: str = "deep"
    hidden_sizes: tuple[int, ...] = (256, 256, 256, 128)


@dataclass
class HighLR(DigitsConfig):
    name: str = "high_lr"
    learning_rate: float = 3e-3


@dataclass
class SmallBatch(DigitsConfig):
    name: str = "small_batch"
    batch_size: int = 16


@dataclass
class StrongRegularization(DigitsConfig):
    name: str = "strong_reg"
    dropout: float = 0.5
    weight_decay: float = 0.1


@dataclass
class Aggressive(DigitsConfig):
    """Several dimensions at once: wider, faster, bigger effective batch, more dropout."""

    name: str = "aggressive"
    hidden_sizes: tuple[int, ...] = (1024, 1024, 512)
    learning_rate: float = 3e-3
    batch_size: int = 128
    gradient_accumulation_steps: int = 2
    dropout: float = 0.4


@dataclass
class Smoke(DigitsConfig):
    """Trains in seconds on a CPU: checks the whole pipeline, not the model."""

    name: str = "smoke"
    hidden_sizes: tuple[int, ...] = (32,)
    num_epochs: int = 3
    patience: int = 2
    batch_size: int = 128
    max_wall_clock_hours: float = 0.1
    log_every_n_steps: int = 3  # an epoch is 9 steps: Lightning warns when it logs none of them


CONFIGS: dict[str, type[DigitsConfig]] = {
    config.name: config
    for config in (DigitsConfig, Wide, Deep, HighLR, SmallBatch, StrongRegularization, Aggressive, Smoke)
}
