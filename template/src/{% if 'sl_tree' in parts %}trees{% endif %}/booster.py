"""Training and testing a part's booster with XGBoost's native API (`xgb.train` on a
QuantileDMatrix; no scikit-learn wrapper, no Lightning), or its Dask twin with --cluster."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import xgboost as xgb

from src.config import ConfigError
from src.ops.hardware import visible_gpus
from src.runs.atomic import write_text_atomic
from src.trees.cluster import dask_client, partitioned
from src.trees.config import CUDA_XGBOOST_INSTALL, SLTreeConfig
from src.trees.data import Split
from src.trees.plots import feature_importance, predicted_vs_actual, shap_summary
from src.trees.rounds import RoundMetrics, stop_reason, train_seconds_so_far


def training_params(cfg: SLTreeConfig, params: dict[str, Any]) -> dict[str, Any]:
    """`params`, the part's model.booster_params(cfg), with what the pipeline sets: the
    objective and metric of the config, which the label check and early stopping read
    too, the hist tree method that QuantileDMatrix needs, the device, threads and seed."""
    if cfg.device == "cuda" and not visible_gpus():
        raise ConfigError("device cuda: no CUDA GPU is visible here; use auto or cpu")
    cuda_build = xgb.build_info()["USE_CUDA"]  # False for xgboost-cpu, the cpu extra
    if cfg.device == "cuda" and not cuda_build:
        raise ConfigError(f"device cuda: this XGBoost is its CPU-only build; {CUDA_XGBOOST_INSTALL}")
    device = ("cuda" if visible_gpus() and cuda_build else "cpu") if cfg.device == "auto" else cfg.device
    ours = {"objective": cfg.objective, "eval_metric": cfg.eval_metric, "tree_method": "hist"}
    ours |= {"device": device, "nthread": cfg.num_threads, "seed": cfg.seed}
    if both := sorted(ours.keys() & params.keys()):
        raise ConfigError(f"model.booster_params(cfg) sets {', '.join(both)}, which the pipeline sets")
    return params | ours


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
    cfg: SLTreeConfig,
    params: dict[str, Any],
    split: Split,
    callbacks: Sequence[xgb.callback.TrainingCallback] = (),
    previous: xgb.Booster | None = None,
) -> xgb.Booster:
    """Boost up to cfg.num_boost_round trees in all with the part's `params` on the
    split's rows, continuing the `previous` model if given; on the Dask cluster that
    cfg.cluster names, if any."""
    first_round = previous.num_boosted_rounds() if previous else 0
    params = training_params(cfg, params)
    with dask_client(cfg.cluster) as client:
        train, val = training_matrices(split, client)
        options = {
            "num_boost_round": max(cfg.num_boost_round - first_round, 0),
            "evals": [(train, "train"), (val, "val")],
            "callbacks": list(callbacks),
            "xgb_model": previous,
            "verbose_eval": False,
        }
        if client is None:
            booster = xgb.train(params, train, **options)
        else:
            from xgboost import dask as dxgb

            booster = dxgb.train(client, params, train, **options)["booster"]
            for metrics in (c for c in callbacks if isinstance(c, RoundMetrics)):
                metrics.replay(first_round)  # the rounds the workers wrote, which the loggers here missed
    if reason := stop_reason(booster):  # a STOP file or the wall-clock budget
        print(reason)
    return booster


def best_rounds(booster: xgb.Booster) -> xgb.Booster:
    """The model early stopping chose: the trees up to its best validation round (all
    of them if it recorded none)."""
    best = booster.attr("best_iteration")
    return booster[: int(best) + 1] if best is not None else booster


def summary_and_plots(cfg: SLTreeConfig, booster: xgb.Booster, split: Split, run_dir: Path) -> dict:
    """OUT-5: the test metrics of the trees up to the best round, with how `booster` was
    trained, in metrics.json (returned too), and the plots in plots/."""
    model, actual = best_rounds(booster), split.test_labels.to_numpy()
    predicted = model.inplace_predict(split.test_features)
    errors, total = predicted - actual, float(((actual - actual.mean()) ** 2).sum())
    summary = {
        "test_rmse": float(np.sqrt(np.mean(errors**2))),
        "test_mae": float(np.mean(np.abs(errors))),
        # R² is undefined when every test label is the same.
        "test_r2": 1 - float((errors**2).sum()) / total if total > 0 else float("nan"),
        "best_round": model.num_boosted_rounds() - 1,
        f"best_val_{cfg.eval_metric}": float(booster.attr("best_score") or "nan"),
        "rounds_trained": booster.num_boosted_rounds(),
        # LOG-5: a tree model's parameters are its leaves, known once it is trained.
        "total_params": int((model.trees_to_dataframe()["Feature"] == "Leaf").sum()),
        "train_seconds": train_seconds_so_far(booster),  # a resumed run's sessions included
    }
    write_text_atomic(run_dir / "metrics.json", json.dumps(summary, indent=2) + "\n")
    plots = run_dir / "plots"
    feature_importance(model, plots / "feature_importance.png")
    predicted_vs_actual(predicted, actual, plots / "predicted_vs_actual.png")
    shap_summary(model, split.test_features, plots / "shap_summary.png")
    return summary
