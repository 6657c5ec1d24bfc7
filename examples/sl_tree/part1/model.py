"""The booster of this part: gradient-boosted trees (XGBoost). A new hyperparameter is a
field in config.py, named as XGBoost names the parameter and read here as `cfg.<field>`.
The objective and metric are config fields (`--objective`, `--eval-metric`): the
pipeline passes them, with the classes, device, threads and seed."""

from __future__ import annotations

from pathlib import Path

import xgboost as xgb

from src.trees.rounds import save_booster

from .config import DiabetesConfig


def booster_params(cfg: DiabetesConfig) -> dict:
    """XGBoost's parameters for growing the trees: https://xgboost.readthedocs.io/en/stable/parameter.html"""
    return {
        "learning_rate": cfg.learning_rate,
        "max_depth": cfg.max_depth,
        "min_child_weight": cfg.min_child_weight,
        "subsample": cfg.subsample,
        "colsample_bytree": cfg.colsample_bytree,
        "reg_lambda": cfg.reg_lambda,
        "reg_alpha": cfg.reg_alpha,
    }


def save_model(model: xgb.Booster, path: Path) -> Path:
    """XGBoost's own format (.ubj): loads in any XGBoost binding, no pickle involved."""
    return save_booster(model, path)


def load_model(path: Path) -> xgb.Booster:
    return xgb.Booster(model_file=path)
