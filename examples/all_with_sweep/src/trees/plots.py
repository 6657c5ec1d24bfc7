"""OUT-5: the plots every tree part leaves in {run_dir}/plots/.

Drawn on matplotlib Figure objects rather than pyplot: no display, backend or
global state involved, so they work the same on a headless server.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import xgboost as xgb
from matplotlib.figure import Figure

from src.report.figures import save_figure


def feature_importance(booster: xgb.Booster, path: Path, top: int = 20) -> Path:
    """Total gain of each feature's splits, largest on top."""
    gains = sorted(booster.get_score(importance_type="total_gain").items(), key=lambda item: item[1])[-top:]
    figure = Figure(figsize=(7, 0.35 * len(gains) + 1.5))
    axes = figure.subplots()
    axes.barh([name for name, _ in gains], [gain for _, gain in gains], color="tab:blue")
    axes.set(title="Feature importance", xlabel="total gain")
    return save_figure(figure, path)


def predicted_vs_actual(predicted: np.ndarray, actual: np.ndarray, path: Path) -> Path:
    figure = Figure(figsize=(5.5, 5.5))
    axes = figure.subplots()
    axes.scatter(actual, predicted, s=14, alpha=0.6)
    low, high = float(min(actual.min(), predicted.min())), float(max(actual.max(), predicted.max()))
    axes.plot([low, high], [low, high], color="grey", linestyle="--", linewidth=1)
    axes.set(title="Test set: predicted vs actual", xlabel="actual", ylabel="predicted")
    return save_figure(figure, path)


def shap_summary(
    model: xgb.Booster, features: pd.DataFrame, path: Path, top: int = 20, max_rows: int = 2000
) -> Path:
    """Beeswarm of SHAP values on at most `max_rows` rows (a fixed sample), which is
    plenty for the picture. They come from XGBoost itself (pred_contribs: exact
    TreeSHAP), so the shap package and its compiled dependencies are not needed."""
    if len(features) > max_rows:
        features = features.sample(max_rows, random_state=0)
    contributions = model.predict(xgb.DMatrix(features), pred_contribs=True)
    contributions = contributions[:, :-1]  # the last column is the bias
    order = np.argsort(np.abs(contributions).mean(axis=0))[-top:]
    jitter = np.random.default_rng(0).uniform(-0.3, 0.3, size=len(features))
    figure = Figure(figsize=(7, 0.35 * len(order) + 1.5))
    axes = figure.subplots()
    for row, column in enumerate(order):
        values = features.iloc[:, column].to_numpy(dtype=float)
        colour = (values - values.min()) / (np.ptp(values) or 1.0)
        axes.scatter(contributions[:, column], row + jitter, c=colour, cmap="coolwarm", s=8, alpha=0.7)
    axes.set_yticks(range(len(order)), [features.columns[i] for i in order])
    axes.axvline(0, color="grey", linewidth=0.8)
    axes.set(title="SHAP values (colour: feature value, low blue to high red)", xlabel="SHAP value")
    return save_figure(figure, path)
