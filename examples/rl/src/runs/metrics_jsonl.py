"""OUT-4: metrics.jsonl, one JSON line per logging event in the run directory, written
for every part (by src.training.jsonl_logger and src.trees.rounds) and read back here."""

from __future__ import annotations

import contextlib
import json
import math
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from src.runs.atomic import translate_write_errors, write_text_atomic


def append_jsonl(path: Path, *records: Mapping[str, Any]) -> None:
    """Append events, one line each; values JSON cannot hold (tensors, paths) become
    numbers or text."""
    now = round(time.time(), 3)
    lines = [_json_line({"time": now, **record}) for record in records]
    with translate_write_errors(path), open(path, "a", encoding="utf-8") as file:
        file.writelines(lines)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """The events of a metrics.jsonl, without the lines a kill or a full disk cut short, or
    that damage left something other than a JSON object."""
    records = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        with contextlib.suppress(json.JSONDecodeError):
            if isinstance(record := json.loads(line), dict):
                records.append(record)
    return records


def drop_metrics_from_step(path: Path, step: int, checkpointed: int = 0) -> int:
    """Remove what a resumed run logs again: the metric lines of `step` and later, but for the
    first `checkpointed` (logged before its checkpoint was taken), and a test's lines; also a
    last line a kill cut short, and metric lines without a step number. The metric lines left."""
    kept, rows, tested = [], 0, False
    for record in read_jsonl(path):
        tested |= record.get("event") == "test"
        rows += record.get("event") == "metrics"
        if record.get("event") not in ("metrics", "test") or (
            not tested and (rows <= checkpointed or _step_before(record.get("step") or 0, step))
        ):
            kept.append(record)
    write_text_atomic(path, "".join(json.dumps(record) + "\n" for record in kept))
    return sum(record.get("event") == "metrics" for record in kept)


def count_metric_rows(path: Path) -> int:
    return sum(record.get("event") == "metrics" for record in read_jsonl(path)) if path.is_file() else 0


def _step_before(logged: object, step: int) -> bool:
    return isinstance(logged, int | float) and not isinstance(logged, bool) and logged < step


def _json_line(record: Mapping[str, Any]) -> str:
    try:  # most records hold only finite numbers: walked only when JSON refuses one
        return json.dumps(record, default=_plain, allow_nan=False) + "\n"
    except ValueError:
        return json.dumps(_finite(record), default=_plain, allow_nan=False) + "\n"


def as_read_back(record: Mapping[str, Any]) -> dict[str, Any]:
    """The record as read_jsonl() reads it back once append_jsonl() has written it."""
    return json.loads(json.dumps(_finite(record), default=_plain))


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):  # not a dict
        return _finite(value)
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


# The first word of a score that grows as a run improves (test_roc_auc_ovr, test_r2_height).
SCORES = {"acc", "accuracy", "balanced", "f1", "roc", "r2", "precision", "recall"}


def higher_is_better(metric: str) -> bool:
    """Whether a metric grows as a run improves: rewards, accuracies and the other scores of
    a test, and the XGBoost metrics its own early stopping maximizes (auc, aucpr, map, ndcg,
    pre, and their @n forms; mape is an error). Takes a logged key such as
    "val_episode_reward" or a bare XGBoost eval_metric."""
    name = metric.split("_", 1)[-1]
    maximized = name.startswith(("auc", "map", "ndcg", "pre")) and name != "mape"
    return "reward" in name or name.split("_")[0] in SCORES or maximized
