"""Model of this part: gradient-boosted trees on XGBoost's native API (`xgb.train` on
a QuantileDMatrix; no scikit-learn wrapper, no Lightning), or its Dask twin
(`xgb.dask.train`) with --cluster."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import xgboost as xgb

from src.config import ConfigError
from src.ops.hardware import visible_gpus
from src.trees.cluster import partitioned
from src.trees.rounds import save_booster, stop_reason

from .config import DiabetesConfig
from .data import Split


def booster_params(cfg: DiabetesConfig) -> dict:
    device = cfg.device
    if device == "auto":
        device = "cuda" if visible_gpus() else "cpu"
    elif device == "cuda" and not visible_gpus():
        raise ConfigError("device cuda: no CUDA GPU is visible here; use auto or cpu")
    return {
        "objective": cfg.objective,
        "eval_metric": cfg.eval_metric,
        "learning_rate": cfg.learning_rate,
        "max_depth": cfg.max_depth,
        "min_child_weight": cfg.min_child_weight,
        "subsample": cfg.subsample,
        "colsample_bytree": cfg.colsample_bytree,
        "reg_lambda": cfg.reg_lambda,
        "reg_alpha": cfg.reg_alpha,
        "tree_method": "hist",
        "device": device,
        "nthread": cfg.num_threads,
        "seed": cfg.seed,
    }


def training_matrices(split: Split, client: Any = None) -> tuple[xgb.QuantileDMatrix, xgb.QuantileDMatrix]:
    """Train and validation data, quantized once for the hist tree method; validation
    reuses the training set's bins. With a Dask `client`, spread over its workers."""
    if client is not None:
        from xgboost import dask as dxgb  # the distributed extra

        train_data = partitioned(client, split.train_features, split.train_labels)
        val_data = partitioned(client, split.val_features, split.val_labels)
        train = dxgb.DaskQuantileDMatrix(client, *train_data)
        return train, dxgb.DaskQuantileDMatrix(client, *val_data, ref=train)
    train = xgb.QuantileDMatrix(split.train_features, split.train_labels)
    val = xgb.QuantileDMatrix(split.val_features, split.val_labels, ref=train)
    return train, val


def train_booster(
    cfg: DiabetesConfig,
    train: xgb.DMatrix,
    val: xgb.DMatrix,
    callbacks: Sequence[xgb.callback.TrainingCallback] = (),
    previous: xgb.Booster | None = None,
    grow: bool = True,
    client: Any = None,
) -> xgb.Booster:
    """Boost up to cfg.num_boost_round trees in all, continuing the `previous` model if
    given (with `grow=False`, none: the saved model as it is); on the Dask cluster of
    `client` if given."""
    if previous is not None and not grow:
        return previous
    options = {
        "num_boost_round": max(cfg.num_boost_round - (previous.num_boosted_rounds() if previous else 0), 0),
        "evals": [(train, "train"), (val, "val")],
        "callbacks": list(callbacks),
        "xgb_model": previous,
        "verbose_eval": False,
    }
    if client is not None:
        from xgboost import dask as dxgb

        booster = dxgb.train(client, booster_params(cfg), train, **options)["booster"]
    else:
        booster = xgb.train(booster_params(cfg), train, **options)
    if reason := stop_reason(booster):  # a STOP file or the wall-clock budget
        print(reason)
    return booster


def best_rounds(booster: xgb.Booster) -> xgb.Booster:
    """The model early stopping chose: the trees up to its best validation round (all
    of them if it recorded none)."""
    best = booster.attr("best_iteration")
    return booster[: int(best) + 1] if best is not None else booster


def predict(model: xgb.Booster, features: pd.DataFrame) -> np.ndarray:
    return model.inplace_predict(features)


def evaluate(predicted: np.ndarray, actual: pd.Series) -> dict[str, float]:
    errors = predicted - actual.to_numpy()
    total = float(((actual - actual.mean()) ** 2).sum())
    return {
        "test_rmse": float(np.sqrt(np.mean(errors**2))),
        "test_mae": float(np.mean(np.abs(errors))),
        # R² is undefined when every test label is the same.
        "test_r2": 1 - float((errors**2).sum()) / total if total > 0 else float("nan"),
    }


def save_model(model: xgb.Booster, path: Path) -> Path:
    """XGBoost's own format (.ubj): loads in any XGBoost binding, no pickle involved."""
    return save_booster(model, path)


def load_model(path: Path) -> xgb.Booster:
    return xgb.Booster(model_file=path)
