"""OUT-4: metrics.jsonl, one JSON line per logging event, in the run directory.

Written by a Lightning logger rather than a callback: the logger interface sees
every event that reaches W&B (LearningRateMonitor's and the epoch aggregates
included), in the order W&B sees them, on rank zero only (DDP-1).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lightning.pytorch.loggers import Logger
from lightning.pytorch.utilities import rank_zero_only


def append_jsonl(path: Path, *records: Mapping[str, Any]) -> None:
    """Append events, one line each; values JSON cannot hold (tensors, paths) become
    numbers or text."""
    now = round(time.time(), 3)
    lines = [
        json.dumps(_finite({"time": now, **record}), default=_plain, allow_nan=False) + "\n"
        for record in records
    ]
    with open(path, "a", encoding="utf-8") as file:
        file.writelines(lines)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as file:
        return [json.loads(line) for line in file if line.strip()]


def drop_metrics_from_step(path: Path, step: int) -> None:
    """Remove the metric lines of `step` and later, which a run resumed from a
    checkpoint taken at `step` logs again, and a last line a kill cut short.
    Rewritten atomically."""
    kept = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if record.get("event") != "metrics" or (record.get("step") or 0) < step:
            kept.append(line + "\n")
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text("".join(kept), encoding="utf-8")
    partial.replace(path)


class JsonlLogger(Logger):
    """Lightning hands hyperparameters over more than once at the start (the module's,
    then the run's facts); they are gathered into the one hyperparams line written
    before the first metrics."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = Path(path)
        self._hyperparams: dict[str, Any] = {}

    @property
    def name(self) -> str:
        return "metrics_jsonl"

    @property
    def version(self) -> str:
        return ""

    @rank_zero_only
    def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None:
        self._write_hyperparams()
        append_jsonl(self.path, {"event": "metrics", "step": step, **metrics})

    @rank_zero_only
    def log_hyperparams(self, params: Any, *args: Any, **kwargs: Any) -> None:
        self._hyperparams |= params if isinstance(params, Mapping) else vars(params)  # dict or Namespace

    @rank_zero_only
    def finalize(self, status: str) -> None:
        self._write_hyperparams()  # a run that ended before its first metrics

    def _write_hyperparams(self) -> None:
        if self._hyperparams:
            append_jsonl(self.path, {"event": "hyperparams", **self._hyperparams})
            self._hyperparams = {}


def _plain(value: Any) -> Any:
    if hasattr(value, "item") and getattr(value, "ndim", 1) == 0:
        return _finite(value.item())
    if hasattr(value, "tolist"):
        return _finite(value.tolist())
    return str(value)


def _finite(value: Any) -> Any:
    """NaN and infinities become null: JSON has no spelling for them."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Mapping):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(item) for item in value]
    return value


def higher_is_better(metric: str) -> bool:
    """Whether a metric grows as a run improves: rewards, accuracies, and the XGBoost
    metrics its own early stopping maximizes (auc, aucpr, map, ndcg, pre). Takes a
    logged key such as "val_episode_reward" or a bare XGBoost eval_metric."""
    name = metric.split("_", 1)[-1]
    return "reward" in name or name.endswith("acc") or name.startswith(("auc", "map", "ndcg", "pre"))
