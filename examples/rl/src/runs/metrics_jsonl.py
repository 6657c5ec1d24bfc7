"""OUT-4: metrics.jsonl, one JSON line per logging event, in the run directory.

Written by a Lightning logger rather than a callback: the logger interface sees
every event that reaches W&B (LearningRateMonitor's and the epoch aggregates
included), in the order W&B sees them, on rank zero only (DDP-1).
"""

from __future__ import annotations

import contextlib
import json
import math
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lightning.pytorch.loggers import Logger
from lightning.pytorch.utilities import rank_zero_only

from src.runs.atomic import translate_write_errors, write_text_atomic


def append_jsonl(path: Path, *records: Mapping[str, Any]) -> None:
    """Append events, one line each; values JSON cannot hold (tensors, paths) become
    numbers or text."""
    now = round(time.time(), 3)
    lines = [
        json.dumps(_finite({"time": now, **record}), default=_plain, allow_nan=False) + "\n"
        for record in records
    ]
    with translate_write_errors(path), open(path, "a", encoding="utf-8") as file:
        file.writelines(lines)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """The events of a metrics.jsonl; a last line that a kill or a full disk cut short
    is left out."""
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    records = [json.loads(line) for line in lines[:-1]]
    with contextlib.suppress(json.JSONDecodeError):
        records += [json.loads(line) for line in lines[-1:]]
    return records


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
    write_text_atomic(path, "".join(kept))


class JsonlLogger(Logger):
    """Lightning hands hyperparameters over more than once (the module's, then the run's
    facts, and again for test()); they are gathered into one hyperparams line, written
    before the first metrics unless the file's last one already says all of it (test(), a
    resumed run)."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = Path(path)
        self._hyperparams: dict[str, Any] = {}
        self._last_hyperparams: dict[str, Any] | None = None  # read from the file once
        self._drop_from_next_step = False

    @property
    def name(self) -> str:
        return "metrics_jsonl"

    @property
    def version(self) -> str:
        return ""

    def resuming(self) -> None:
        """The next step logged is the first after the checkpoint resumed from: the lines
        of that step and later, from the session that was interrupted, go (RES-1). Lightning
        numbers logged steps with a counter of its own, so the step is taken from it."""
        self._drop_from_next_step = True

    @rank_zero_only
    def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None:
        if self._drop_from_next_step and step is not None and self.path.is_file():
            drop_metrics_from_step(self.path, step)
        self._drop_from_next_step = False
        self._write_hyperparams()
        append_jsonl(self.path, {"event": "metrics", "step": step, **metrics})

    @rank_zero_only
    def log_hyperparams(self, params: Any, *args: Any, **kwargs: Any) -> None:
        self._hyperparams |= params if isinstance(params, Mapping) else vars(params)  # dict or Namespace

    @rank_zero_only
    def finalize(self, status: str) -> None:
        self._write_hyperparams()  # a run that ended before its first metrics

    def _write_hyperparams(self) -> None:
        if not self._hyperparams:
            return
        # As it reads back from the file, to compare with the line written before.
        plain = json.loads(json.dumps(_finite(self._hyperparams), default=_plain))
        record = {"event": "hyperparams", **plain}
        if self._last_hyperparams is None:
            earlier = read_jsonl(self.path) if self.path.is_file() else []
            self._last_hyperparams = next(
                (line for line in reversed(earlier) if line.get("event") == "hyperparams"), {}
            )
            self._last_hyperparams.pop("time", None)
        if any(self._last_hyperparams.get(key) != value for key, value in record.items()):
            append_jsonl(self.path, record)
            self._last_hyperparams = record
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
