"""Configs of this part (CFG-1, CFG-6): pick one with `--config NAME`.

The task config holds the baseline; each variant overrides only what differs.
"""

from __future__ import annotations

from dataclasses import dataclass

from src.config import SLNeuralConfig


@dataclass
class DigitsConfig(SLNeuralConfig):
    """An MLP on scikit-learn's bundled 8x8 handwritten digits (1,797 images, 10 classes).

    Attributes:
        data_path: Your own CSV or Parquet table (numeric features, an integer label); empty
            means the bundled digits.
        label_column: Column of data_path that holds the class label, from 0 to num_classes - 1.
        num_features: Number of feature columns: every column of the table but the label.
        num_classes: Number of classes the label takes.
        feature_range: Lowest and highest valid feature value; a value outside is a data error.
        hidden_sizes: Widths of the MLP's hidden layers, input side first.
        dropout: Dropout probability after each hidden layer, in [0, 1).
        lr_factor: Under scheduler plateau, the learning rate is multiplied by this when
            val_loss stops improving.
        lr_patience: Under scheduler plateau, epochs without a lower val_loss before the
            learning rate is cut.
    """

    name: str = "baseline"
    # Your own table: a CSV or Parquet file with numeric feature columns and an
    # integer label column; empty means the bundled digits.
    data_path: str = ""
    label_column: str = "target"
    num_features: int = 64
    num_classes: int = 10
    feature_range: tuple[float, float] = (0.0, 16.0)  # DATA-1: values outside are an error
    hidden_sizes: tuple[int, ...] = (256, 128)
    dropout: float = 0.2
    patience: int = 20
    # scheduler "plateau": ReduceLROnPlateau on val_loss scales the rate by lr_factor
    # after lr_patience epochs without improvement.
    lr_factor: float = 0.5
    lr_patience: int = 5

    def problems(self) -> list[str]:
        found = super().problems()
        if self.num_features < 1 or self.num_classes < 2:
            found.append(
                f"num_features {self.num_features}, num_classes {self.num_classes}: need >= 1 and >= 2"
            )
        if not self.feature_range[0] < self.feature_range[1]:
            found.append(f"feature_range {self.feature_range}: the low end must be below the high end")
        if self.data_path:  # here, so that a bad one is refused before a run directory exists
            from src.data_checks import data_path_problems  # pandas: only for a table of one's own

            found += data_path_problems(self.data_path, (self.label_column,))
        if not self.hidden_sizes or min(self.hidden_sizes) < 1:
            found.append(f"hidden_sizes {self.hidden_sizes}: give one or more positive layer widths")
        if self.batch_size == 1:  # model.py's BatchNorm1d cannot train on one example at a time
            found.append("batch_size 1: the model's BatchNorm needs at least 2 examples per training batch")
        if not 0 <= self.dropout < 1 or not 0 < self.lr_factor < 1:
            found.append(f"dropout {self.dropout}, lr_factor {self.lr_factor}: must be in [0, 1) and (0, 1)")
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
