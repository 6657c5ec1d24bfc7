"""Configs of this part (CFG-1, CFG-6): pick one with `--config NAME`. The task config holds
the baseline; each variant overrides only what differs. Trees count boosting rounds, not
epochs: `num_boost_round` is a high cap, and early stopping ends training."""

from __future__ import annotations

from dataclasses import dataclass

from src.trees.config import SLTreeConfig


@dataclass
class DiabetesConfig(SLTreeConfig):
    """Disease progression one year on, from scikit-learn's bundled diabetes table
    (442 patients, 10 baseline measurements): a regression.

    Attributes:
        learning_rate: Shrinkage of each new tree's contribution (XGBoost's eta).
        max_depth: Deepest a tree may grow.
        min_child_weight: Smallest total instance weight (hessian) a leaf may hold; larger is
            more conservative.
        subsample: Share of rows sampled for each tree, in (0, 1]; below 1 a resumed run grows
            different trees than an uninterrupted one.
        colsample_bytree: Share of feature columns sampled for each tree, in (0, 1].
        reg_lambda: L2 regularization of leaf weights.
        reg_alpha: L1 regularization of leaf weights.
    """

    name: str = "baseline"
    label_column: str = "target"  # the features: every other column of the table
    # The booster's parameters (model.booster_params), named as XGBoost names them.
    learning_rate: float = 0.03
    max_depth: int = 2
    min_child_weight: float = 5.0
    subsample: float = 1.0
    colsample_bytree: float = 1.0
    reg_lambda: float = 1.0
    reg_alpha: float = 0.0


@dataclass
class Deeper(DiabetesConfig):
    name: str = "deeper"
    max_depth: int = 4


@dataclass
class FastLR(DiabetesConfig):
    name: str = "fast_lr"
    learning_rate: float = 0.1


@dataclass
class Regularized(DiabetesConfig):
    name: str = "regularized"
    reg_lambda: float = 10.0


@dataclass
class Subsampled(DiabetesConfig):
    name: str = "subsampled"
    subsample: float = 0.8


@dataclass
class Aggressive(DiabetesConfig):
    """Several dimensions at once: deep trees, a fast rate, row and column sampling."""

    name: str = "aggressive"
    max_depth: int = 6
    learning_rate: float = 0.2
    min_child_weight: float = 1.0
    subsample: float = 0.7
    colsample_bytree: float = 0.7


@dataclass
class Smoke(DiabetesConfig):
    """Trains in seconds on a CPU: checks the whole pipeline, not the model."""

    name: str = "smoke"
    num_boost_round: int = 40
    early_stopping_rounds: int = 10
    learning_rate: float = 0.1
    max_wall_clock_hours: float = 0.1


CONFIGS: dict[str, type[DiabetesConfig]] = {
    config.name: config
    for config in (DiabetesConfig, Deeper, FastLR, Regularized, Subsampled, Aggressive, Smoke)
}
