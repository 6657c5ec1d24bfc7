"""OUT-5: the plots every tree part leaves in {run_dir}/plots/, drawn on matplotlib Figures,
not pyplot: no display, backend or global state, the same on a headless server."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import xgboost as xgb
from matplotlib import colormaps
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


def shap_summary(
    model: xgb.Booster,
    features: pd.DataFrame,
    path: Path,
    classes: Sequence[Any] | None = None,
    top: int = 20,
    max_rows: int = 2000,
) -> Path:
    """SHAP values of at most `max_rows` rows, from XGBoost itself (pred_contribs: exact
    TreeSHAP, no shap package): a beeswarm for a model of one output; for a multi:* model,
    each feature's mean |SHAP value| per class."""
    if len(features) > max_rows:
        features = features.sample(max_rows, random_state=0)
    contributions = model.predict(xgb.DMatrix(features, enable_categorical=True), pred_contribs=True)
    contributions = contributions[..., :-1]  # the last column is the bias
    if contributions.ndim == 3:  # rows x classes x features
        return _mean_shap_by_class(np.abs(contributions).mean(axis=0), features.columns, classes, path, top)
    order = np.argsort(np.abs(contributions).mean(axis=0))[-top:]
    jitter = np.random.default_rng(0).uniform(-0.3, 0.3, size=len(features))
    figure = Figure(figsize=(7, 0.35 * len(order) + 1.5))
    axes = figure.subplots()
    # One scatter for every feature's row of points: a call each would take longer to draw.
    axes.scatter(
        contributions[:, order].T.ravel(),
        (np.arange(len(order))[:, None] + jitter).ravel(),
        c=np.concatenate([_colour_scale(features.iloc[:, column]) for column in order]),
        cmap=colormaps["coolwarm"].with_extremes(bad="lightgrey"),
        s=8,
        alpha=0.7,
        plotnonfinite=True,  # missing values, in grey
    )
    axes.set_yticks(range(len(order)), [features.columns[i] for i in order])
    axes.axvline(0, color="grey", linewidth=0.8)
    colours = "colour: feature value, low blue to high red; a category's by its place; grey: missing"
    axes.set_title(f"SHAP values\n({colours})", fontsize="medium")
    axes.set(xlabel="SHAP value")
    return save_figure(figure, path)


def _colour_scale(column: pd.Series) -> np.ndarray:
    """A feature's values scaled to 0..1; a category by its place; missing NaN."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        column = column.cat.codes.where(column.cat.codes >= 0)
    values = column.astype(float)
    return ((values - values.min()) / ((values.max() - values.min()) or 1.0)).to_numpy()


def _mean_shap_by_class(
    importance: np.ndarray, names: Sequence[str], classes: Sequence[Any], path: Path, top: int
) -> Path:
    """Bars of each feature's mean |SHAP value|, a segment per class (classes x features)."""
    order = np.argsort(importance.sum(axis=0))[-top:]
    figure = Figure(figsize=(7, 0.35 * len(order) + 1.5))
    axes = figure.subplots()
    left = np.zeros(len(order))
    for index, name in enumerate(classes):
        axes.barh(
            range(len(order)), importance[index, order], left=left, label=str(name), color=f"C{index % 10}"
        )
        left += importance[index, order]
    axes.set_yticks(range(len(order)), [names[i] for i in order])
    axes.set(title="SHAP: mean |value| of each feature, by class", xlabel="mean |SHAP value| (margin)")
    if len(classes) <= 20:  # beyond, the legend hides the bars
        axes.legend(title="class", fontsize="small")
    return save_figure(figure, path)
