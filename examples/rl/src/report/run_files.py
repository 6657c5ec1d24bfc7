"""A run directory's own files, read back for its report: config.json, run.json,
metrics.jsonl, metrics.json, test_predictions.csv and plots/*.png.
Every part writes the same metric namespaces, so what to draw follows from which keys are there."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pandas as pd

from src.errors import DataValidationError
from src.predictions import PREDICTIONS_FILE, read_predictions
from src.runs.directory import run_part
from src.runs.metrics_jsonl import higher_is_better, read_jsonl

REPORT_FILE = "report.md"
# Keys that are bookkeeping, or drawn in a figure of their own, not learning curves.
NOT_CURVES = ("time", "event", "step", "epoch", "round", "frames")
OWN_FIGURES = ("timing/", "system/", "tracking/", "batch/", "lr", "test_")

Series = dict[float, float]  # epoch or round (or step) -> value


class NotARunDir(ValueError):
    """The path is not a training run's directory."""


@dataclass
class RunFiles:
    dir: Path
    config: dict[str, Any]
    record: dict[str, Any]  # run.json
    events: list[dict[str, Any]]  # the "metrics" lines of metrics.jsonl
    hyperparams: dict[str, Any]  # its "hyperparams" lines, merged
    summary: dict[str, Any]  # metrics.json, where the part writes one
    predictions: pd.DataFrame | None  # the test set's, where the part writes them
    plots: list[Path]  # the part's own figures

    @classmethod
    def read(cls, run_dir: Path) -> RunFiles:
        run_dir = Path(run_dir)
        if not run_dir.is_dir():
            raise NotARunDir(f"{run_dir} {'is not a directory' if run_dir.exists() else 'does not exist'}")
        if not (run_dir / "config.json").is_file():
            raise NotARunDir(f"{run_dir} has no config.json, so it is not a run directory")
        lines = _read_json(run_dir / "metrics.jsonl", read_jsonl) or []
        hyperparams: dict[str, Any] = {}
        for line in lines:
            if line.get("event") == "hyperparams":
                hyperparams |= line
        return cls(
            dir=run_dir,
            config=_read_json(run_dir / "config.json"),
            record=_read_json(run_dir / "run.json"),
            events=[line for line in lines if line.get("event") == "metrics"],
            hyperparams={k: v for k, v in hyperparams.items() if k not in ("time", "event")},
            summary=_read_json(run_dir / "metrics.json"),
            predictions=_read_predictions(run_dir / PREDICTIONS_FILE),
            plots=sorted((run_dir / "plots").glob("*.png")),
        )

    @property
    def name(self) -> str:
        return self.dir.name

    @property
    def part(self) -> str:
        """The part that wrote the run (part1, ...); "" where run.json does not tell."""
        return run_part(self.record)

    @functools.cached_property
    def axis(self) -> str:
        """What a curve's x counts: boosting rounds where the run logs them, else epochs."""
        return "round" if any("round" in event for event in self.events) else "epoch"

    @functools.cached_property
    def curve_axis(self) -> str:
        """What learning curves are drawn against: the frames an RL run has collected, which
        compare across collection sizes as epochs do not; else its axis."""
        return "frames" if self._frames_by_epoch else self.axis

    @functools.cached_property
    def _frames_by_epoch(self) -> dict[float, float]:
        """The frames collected by the end of each epoch, where the run counts them."""
        found: dict[float, float] = {}
        for event in self.events:
            frames, epoch = event.get("frames"), event.get("epoch")
            if isinstance(frames, int | float) and epoch is not None:
                found[epoch] = max(found.get(epoch, frames), frames)
        return found

    def on_curve_axis(self, series: Series) -> Series:
        """A per-epoch series against the curve axis (frames for RL)."""
        if self.curve_axis != "frames":
            return series
        return {self._frames_by_epoch[x]: value for x, value in series.items() if x in self._frames_by_epoch}

    def resume_points(self) -> list[float]:
        """Where, on the curve axis, each later session of the run took over: the last
        epoch (or round) logged before it started, which its checkpoint had reached."""
        points = []
        for session in (self.record.get("history") or [])[1:]:
            try:
                started = datetime.fromisoformat(session["started"]).timestamp()
            except (KeyError, TypeError, ValueError):
                continue
            before = [
                event[self.axis]
                for event in self.events
                if event.get(self.axis) is not None and event.get("time", started) < started
            ]
            if before:
                points += list(self.on_curve_axis({max(before): 0.0}))
        return points

    def last(self) -> float | None:
        """The last epoch (or round) trained; the test metrics, logged a step later, left out."""
        return max(
            (x for key, series in self.per_axis.items() if not key.startswith("test_") for x in series),
            default=None,
        )

    @functools.cached_property
    def per_axis(self) -> dict[str, Series]:
        """Every key logged once per epoch (or round), by epoch; Lightning's "_epoch"
        suffix dropped. A key logged twice for one epoch keeps its last value. Read once:
        every figure and table starts from it."""
        found: dict[str, Series] = {}
        axis = self.axis
        for event in self.events:
            x = event.get(axis)
            if x is None:
                continue
            for key, value in event.items():
                if key not in NOT_CURVES and isinstance(value, int | float) and not key.endswith("_step"):
                    found.setdefault(key.removesuffix("_epoch"), {})[x] = value
        return found

    def curve_keys(self) -> dict[str, Series]:
        """The per-epoch keys that are learning curves: train_X, val_X and bare X (an RL
        part's episode_reward), not timing, system, tracking or test metrics."""
        return {key: series for key, series in self.per_axis.items() if not key.startswith(OWN_FIGURES)}

    def learning_curves(self) -> dict[str, dict[str, Series]]:
        """{metric: {key: series}}: val_X drawn beside train_X (or a bare X), or alone;
        against the curve axis."""
        panels: dict[str, dict[str, Series]] = {}
        for key, series in self.curve_keys().items():
            metric = key.removeprefix("val_").removeprefix("train_")
            panels.setdefault(metric, {})[key] = self.on_curve_axis(series)
        return panels

    def monitored(self) -> set[str]:
        """The keys the run picks its best checkpoint by: those its tracking/best_* follow."""
        return {
            key.removeprefix("tracking/best_") for key in self.per_axis if key.startswith("tracking/best_")
        }

    def by_step(self, prefix: str) -> dict[str, Series]:
        """Keys starting with `prefix`, by logged step: a learning rate can change within an epoch."""
        found: dict[str, Series] = {}
        for event in self.events:
            for key, value in event.items():
                if (
                    key.startswith(prefix)
                    and isinstance(value, int | float)
                    and event.get("step") is not None
                ):
                    found.setdefault(key, {})[event["step"]] = value
        return found

    def final_metrics(self) -> dict[str, dict[str, Any]]:
        """{metric: {"final": value, "best": value, "at": epoch}}: metrics.json and the test
        metrics first, then each learning curve's last value; the monitored ones' best too."""
        rows: dict[str, dict[str, Any]] = {key: {"final": value} for key, value in self.summary.items()}
        for event in self.events:
            rows |= {k: {"final": v} for k, v in event.items() if k.startswith("test_") and k not in rows}
        validation_first = sorted(self.curve_keys().items(), key=lambda item: not item[0].startswith("val_"))
        monitored = self.monitored()
        for key, series in validation_first:
            if series and key not in rows:
                rows[key] = {"final": series[max(series)]}
            if series and key in monitored:
                at = (max if higher_is_better(key) else min)(series, key=series.__getitem__)
                rows[key] |= {"best": series[at], "at": at}
        return rows


def _read_predictions(path: Path) -> pd.DataFrame | None:
    """The run's test predictions; None when it has none, NotARunDir when they are damaged."""
    if not path.is_file():
        return None
    try:
        return read_predictions(path)
    except DataValidationError as error:
        raise NotARunDir(str(error)) from None


def _read_json(path: Path, read: Callable[[Path], Any] = lambda path: json.loads(path.read_text())) -> Any:
    """The file's content; {} when it is missing, NotARunDir when it is damaged."""
    try:
        return read(path)
    except FileNotFoundError:
        return {}
    except ValueError as error:
        raise NotARunDir(f"{path} is not valid JSON ({error})") from None
