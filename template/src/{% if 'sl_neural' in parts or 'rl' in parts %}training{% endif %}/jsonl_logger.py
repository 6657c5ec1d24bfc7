"""metrics.jsonl from a Lightning logger rather than a callback (OUT-4): a logger sees every
event that reaches W&B (LearningRateMonitor's and the epoch aggregates included), in the
order W&B sees them, on rank zero only (DDP-1)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lightning.pytorch.loggers import Logger
from lightning.pytorch.utilities import rank_zero_only

from src.runs.metrics_jsonl import (
    append_jsonl,
    as_read_back,
    count_metric_rows,
    drop_metrics_from_step,
    read_jsonl,
)


class JsonlLogger(Logger):
    """Lightning hands hyperparameters over several times (the module's, the run's facts, for
    test()): gathered into one hyperparams line before the next metrics, unless the file's last
    one already says it all."""

    name, version = "metrics_jsonl", ""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = Path(path)
        self._hyperparams: dict[str, Any] = {}
        self._last_hyperparams: dict[str, Any] | None = None  # read from the file once
        self._drop_from_next_step = False
        self._rows: int | None = None  # metric lines in the file, counted once
        self._checkpointed = 0  # metric lines logged before the checkpoint a resume starts from

    @property
    def rows(self) -> int:
        """The metric lines written so far, which a checkpoint records."""
        if self._rows is None:
            self._rows = count_metric_rows(self.path)
        return self._rows

    def resuming(self, checkpointed: int | None) -> None:
        """Metric lines of the next logged step and later go, which the resumed run logs again,
        but for the checkpoint's first `checkpointed` (RES-1)."""
        self._drop_from_next_step, self._checkpointed = True, checkpointed or 0

    @rank_zero_only
    def testing(self, step: int) -> None:
        """A line where the test's metrics begin: a resume drops them, since it tests again."""
        self._drop_before(step)
        append_jsonl(self.path, {"event": "test", "step": step})

    @rank_zero_only
    def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None:
        self._drop_before(step)
        self._write_hyperparams()
        rows = self.rows
        append_jsonl(self.path, {"event": "metrics", "step": step, **metrics})
        self._rows = rows + 1

    @rank_zero_only
    def log_hyperparams(self, params: Any, *args: Any, **kwargs: Any) -> None:
        self._hyperparams |= params if isinstance(params, Mapping) else vars(params)  # dict or Namespace

    @rank_zero_only
    def finalize(self, status: str) -> None:
        self._write_hyperparams()  # a run that ended before its first metrics

    def _drop_before(self, step: int | None) -> None:
        if self._drop_from_next_step and step is not None and self.path.is_file():
            self._rows = drop_metrics_from_step(self.path, step, self._checkpointed)
        self._drop_from_next_step = False

    def _write_hyperparams(self) -> None:
        if not self._hyperparams:
            return
        record = {"event": "hyperparams", **as_read_back(self._hyperparams)}  # as the earlier line reads
        if self._last_hyperparams is None:
            earlier = read_jsonl(self.path) if self.path.is_file() else []
            last = [line for line in earlier if line.get("event") == "hyperparams"]
            self._last_hyperparams = last[-1] if last else {}
        if any(self._last_hyperparams.get(key) != value for key, value in record.items()):
            append_jsonl(self.path, record)
            self._last_hyperparams = record
        self._hyperparams = {}
