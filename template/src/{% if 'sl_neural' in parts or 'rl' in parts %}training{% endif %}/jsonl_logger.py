"""metrics.jsonl from a Lightning logger rather than a callback (OUT-4): a logger sees every
event that reaches W&B (LearningRateMonitor's and the epoch aggregates included), in the
order W&B sees them, on rank zero only (DDP-1)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lightning.pytorch.loggers import Logger
from lightning.pytorch.utilities import rank_zero_only

from src.runs.metrics_jsonl import append_jsonl, as_read_back, drop_metrics_from_step, read_jsonl


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

    def resuming(self) -> None:
        """The killed session's lines from the next logged step on go (RES-1)."""
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
        record = {"event": "hyperparams", **as_read_back(self._hyperparams)}  # as the earlier line reads
        if self._last_hyperparams is None:
            earlier = read_jsonl(self.path) if self.path.is_file() else []
            last = [line for line in earlier if line.get("event") == "hyperparams"]
            self._last_hyperparams = last[-1] if last else {}
        if any(self._last_hyperparams.get(key) != value for key, value in record.items()):
            append_jsonl(self.path, record)
            self._last_hyperparams = record
        self._hyperparams = {}
