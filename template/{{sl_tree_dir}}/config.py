"""Configs of this part (CFG-1, CFG-6): pick one with `--config NAME`.

The task config holds the baseline; each variant overrides only what differs.
Trees count boosting rounds, not epochs: `num_boost_round` is a high cap and
early stopping (`early_stopping_rounds` without improvement) ends training.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Literal

from src.trees.config import SLTreeConfig

DIABETES_FEATURES = ("age", "sex", "bmi", "bp", "s1", "s2", "s3", "s4", "s5", "s6")


@dataclass
class DiabetesConfig(SLTreeConfig):
    """Disease progression one year on, from scikit-learn's bundled diabetes table
    (442 patients, 10 baseline measurements): a regression.

    Attributes:
        data_path: Your own CSV or Parquet table with feature_columns and label_column; empty
            means the bundled diabetes data.
        label_column: Column of data_path that holds the numeric label.
        feature_columns: Columns of data_path the model reads, in order.
        objective: XGBoost learning objective, e.g. reg:squarederror, reg:absoluteerror,
            count:poisson, binary:logistic (labels in [0, 1]).
        eval_metric: XGBoost metric that early stopping watches on the validation set, e.g.
            rmse, logloss, auc.
        learning_rate: Shrinkage of each new tree's contribution (XGBoost's eta), in (0, 1].
        max_depth: Deepest a tree may grow.
        min_child_weight: Smallest total instance weight (hessian) a leaf may hold; larger is
            more conservative.
        subsample: Share of rows sampled for each tree, in (0, 1]; below 1 a resumed run grows
            different trees than an uninterrupted one.
        colsample_bytree: Share of feature columns sampled for each tree, in (0, 1].
        reg_lambda: L2 regularization of leaf weights.
        reg_alpha: L1 regularization of leaf weights.
        checkpoint_minutes: Minutes between rewrites of checkpoints/last.ubj, the model a
            resume starts from.
        keep_last_n: Earlier checkpoints to keep beside last.ubj, as checkpoints/round=R.ubj,
            one per checkpoint_minutes; the oldest goes once a newer one is written.
        device: Where XGBoost trains: auto is cuda where a GPU is present, else cpu.
        num_threads: CPU threads XGBoost uses; 0 uses every core.
    """

    name: str = "baseline"
    # Your own table: a CSV or Parquet file with these feature columns and a numeric
    # label column; empty means the bundled diabetes data.
    data_path: str = ""
    label_column: str = "target"
    feature_columns: tuple[str, ...] = DIABETES_FEATURES
    objective: str = "reg:squarederror"
    eval_metric: str = "rmse"
    learning_rate: float = 0.03
    max_depth: int = 2
    min_child_weight: float = 5.0
    # Below 1, rows and columns are sampled per tree. XGBoost does not save its sampling
    # state, so a resumed run then grows different trees than an uninterrupted one.
    subsample: float = 1.0
    colsample_bytree: float = 1.0
    reg_lambda: float = 1.0
    reg_alpha: float = 0.0
    checkpoint_minutes: float = 5.0  # RES-1: how often checkpoints/last.ubj is rewritten
    keep_last_n: int = 0
    device: Literal["auto", "cpu", "cuda"] = "auto"  # auto: cuda where a GPU is present
    num_threads: int = 0  # 0: every core

    def problems(self) -> list[str]:
        found = super().problems()
        if self.label_column in self.feature_columns or not self.feature_columns:
            found.append("feature_columns: list one or more columns, not including label_column")
        if duplicates := sorted({c for c in self.feature_columns if self.feature_columns.count(c) > 1}):
            found.append(f"feature_columns: {', '.join(duplicates)} listed more than once")
        if self.data_path:  # here, so that a bad one is refused before a run directory exists
            from src.data_checks import data_path_problems  # pandas: only for a table of one's own

            found += data_path_problems(self.data_path, (*self.feature_columns, self.label_column))
        if not 0 < self.learning_rate <= 1 or self.max_depth < 1:
            found.append(
                f"learning_rate {self.learning_rate}, max_depth {self.max_depth}: need (0, 1] and >= 1"
            )
        if not (0 < self.subsample <= 1 and 0 < self.colsample_bytree <= 1):
            found.append(f"subsample {self.subsample}, colsample_bytree {self.colsample_bytree}: need (0, 1]")
        negative = {
            name: getattr(self, name)
            for name in ("min_child_weight", "reg_lambda", "reg_alpha", "num_threads", "keep_last_n")
            if getattr(self, name) < 0
        }
        found += [f"{name} {value}: must be 0 or more" for name, value in negative.items()]
        if self.checkpoint_minutes <= 0:
            found.append(f"checkpoint_minutes {self.checkpoint_minutes}: must be positive")
        numbers = ("learning_rate", "max_depth", "min_child_weight", "subsample", "colsample_bytree")
        numbers += ("reg_lambda", "reg_alpha")
        # A value refused above is not refused twice: the words of those messages name them.
        refused = {word.rstrip(",:") for message in found for word in message.split()}
        values = {name: getattr(self, name) for name in numbers if name not in refused}
        found += xgboost_name_problems(self.objective, self.eval_metric)
        return found + xgboost_value_problems(values)


XGBOOST_DOCS = "https://xgboost.readthedocs.io/en/stable/parameter.html#learning-task-parameters"


def xgboost_name_problems(objective: str, eval_metric: str) -> list[str]:
    """CFG-3: objective and eval_metric as the installed XGBoost sees them. XGBoost is
    asked, not a list kept here: it checks both while configuring a booster, which on
    one empty row takes about a millisecond and trains nothing."""
    found = []
    try:
        _configure({"objective": objective})
    except ValueError as error:  # XGBoostError is one
        # An unknown name: XGBoost's message lists every objective it has.
        known = sorted(set(re.findall(r"Objective candidate: (\S+)", str(error))))
        valid = f"it has {', '.join(known)}; " if known else ""
        found.append(
            f"objective {objective!r}: {xgboost_says(error)}; {valid}multi:* and reg:quantileerror "
            f"need num_class or quantile_alpha, which model.booster_params does not pass ({XGBOOST_DOCS})"
        )
    try:
        logged = [metric["name"] for metric in _configure({"eval_metric": eval_metric})["metrics"]]
    except ValueError as error:  # its message lists no metrics: a few common ones
        found.append(
            f"eval_metric {eval_metric!r}: {xgboost_says(error)}; common ones: rmse, mae, mape, logloss, "
            f"error, auc, aucpr, poisson-nloglik, ndcg (all: {XGBOOST_DOCS})"
        )
    else:  # early stopping looks the metric up by the name XGBoost logs it under
        if logged != [eval_metric]:
            found.append(
                f"eval_metric {eval_metric!r}: XGBoost logs it as {', '.join(logged) or 'nothing'}, the "
                "name early stopping looks for; give that name"
            )
    return found


def xgboost_value_problems(values: dict) -> list[str]:
    """CFG-3: numbers XGBoost refuses, such as 1e-308 or 1e300, which do not fit the
    32-bit floats it keeps them in."""
    found = []
    for name, value in values.items():
        try:
            _configure({name: value})
        except ValueError as error:
            found.append(f"{name} {value}: {xgboost_says(error)} (it keeps numbers as 32-bit floats)")
    return found


def _configure(params: dict) -> dict:
    """The learner's config XGBoost makes of `params`; its XGBoostError, a ValueError,
    where it refuses them."""
    # Here, not at the top: --help and a mistyped flag answer without XGBoost's seconds of import.
    import numpy as np
    import xgboost as xgb

    # One thread: starting XGBoost's pool would take longer than the check. Named: the
    # booster needs the row alive while it configures.
    row = xgb.DMatrix(np.zeros((1, 1)), nthread=1)
    return json.loads(xgb.Booster(params, [row]).save_config())["learner"]


def xgboost_says(error: ValueError) -> str:
    """The first line of XGBoost's message, without its time stamp and source file."""
    first_line = str(error).strip().splitlines()[0]
    return "XGBoost: " + re.sub(r"^\[[0-9:]+\] \S+:\d+: ", "", first_line).strip(" :")


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
