"""A run directory's files read back for its report: config.json, run.json, metrics.jsonl,
metrics.json and plots/*.png. Every part logs the same metric
namespaces, so what to draw follows from which keys are there."""

from __future__ import annotations

import contextlib
import functools
import json
import math
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pandas as pd

from src.errors import DataValidationError
from src.runs.directory import run_part
from src.runs.metrics_jsonl import higher_is_better, read_jsonl

REPORT_FILE = "report.md"
# Bookkeeping keys, and keys drawn in figures of their own: not learning curves.
NOT_CURVES = ("time", "event", "step", "epoch", "round")
OWN_FIGURES = ("timing/", "system/", "tracking/", "batch/", "lr", "test_", "frames")


@dataclass
class RunFiles:
    dir: Path
    config: dict[str, Any]
    record: dict[str, Any]  # run.json
    events: list[dict[str, Any]]  # the "metrics" lines of metrics.jsonl
    hyperparams: dict[str, Any]  # its "hyperparams" lines, merged
    summary: dict[str, Any]  # metrics.json, where the part writes one
    plots: list[Path]  # the part's own figures

    @classmethod
    def read(cls, run_dir: Path) -> RunFiles:
        """The run's files; a DataValidationError (one line) for a path that is not a run
        directory, or a damaged file in it."""
        run_dir = Path(run_dir)
        if not run_dir.is_dir():
            raise DataValidationError(
                f"{run_dir} {'is not a directory' if run_dir.exists() else 'does not exist'}"
            )
        if not (run_dir / "config.json").is_file():
            raise DataValidationError(f"{run_dir} has no config.json, so it is not a run directory")
        lines = _read(run_dir / "metrics.jsonl", read_jsonl) or []
        return cls(
            dir=run_dir,
            config=_read(run_dir / "config.json"),
            record=_read(run_dir / "run.json"),
            events=[line for line in lines if line.get("event") == "metrics"],
            hyperparams={
                k: v for line in lines if line.get("event") == "hyperparams" for k, v in line.items()
            },
            summary=_read(run_dir / "metrics.json"),
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
        """What the run counts its progress in: boosting rounds where it logs them, else epochs."""
        return "round" if any("round" in event for event in self.events) else "epoch"

    def _last_by(self, x: str) -> pd.DataFrame:
        """The numeric keys logged, a column each and a row per value of `x` (epoch, round or
        step); a key logged twice for one x: its last value."""
        events = pd.DataFrame(self.events)
        if x not in events:
            return pd.DataFrame()
        return events.dropna(subset=[x]).groupby(x).last().select_dtypes("number").dropna(axis=1, how="all")

    @functools.cached_property
    def per_axis(self) -> pd.DataFrame:
        """Every key logged once per epoch (or round); Lightning's "_epoch" suffix dropped."""
        by_axis = self._last_by(self.axis)
        keys = [key for key in by_axis if key not in NOT_CURVES and not key.endswith("_step")]
        return by_axis[keys].rename(columns=lambda key: key.removesuffix("_epoch"))

    @property
    def curve_axis(self) -> str:
        """What learning curves are drawn against: the frames an RL run has collected, which
        compare across collection sizes as epochs do not; else its axis."""
        return "frames" if "frames" in self.per_axis else self.axis

    @functools.cached_property
    def curves(self) -> pd.DataFrame:
        """The learning curves (train_X, val_X and bare X, as an RL part's episode_reward), a
        column each, against the curve axis."""
        curves = self.per_axis[[key for key in self.per_axis if not key.startswith(OWN_FIGURES)]]
        if self.curve_axis == "frames":
            curves = curves.set_index(self.per_axis["frames"])
        return curves[curves.index.notna()].dropna(how="all").rename_axis(self.curve_axis)

    def resume_points(self) -> list[float]:
        """Where, on the curve axis, each later session of the run took over: the last epoch
        (or round) logged before it started, which its checkpoint had reached."""
        points = []
        for session in (self.record.get("history") or [])[1:]:
            with contextlib.suppress(KeyError, TypeError, ValueError):  # a record edited by hand
                started = datetime.fromisoformat(session["started"]).timestamp()
                before = [e.get(self.axis) for e in self.events if e.get("time", started) < started]
                points.append(max(x for x in before if x is not None))
        if self.curve_axis == "frames":
            frames = self.per_axis["frames"].dropna()
            return [frames[x] for x in points if x in frames.index]
        return points

    def last(self) -> float | None:
        """The last epoch (or round) trained; the test metrics, logged a step later, left out."""
        trained = self.per_axis.drop(columns=[k for k in self.per_axis if k.startswith(("test_", "frames"))])
        return max(trained.dropna(how="all").index, default=None)

    def monitored(self) -> set[str]:
        """The keys the run picks its best checkpoint by: those its tracking/best_* follow."""
        return {k.removeprefix("tracking/best_") for k in self.per_axis if k.startswith("tracking/best_")}

    def learning_rates(self) -> pd.DataFrame:
        """By step, as a rate can change within an epoch: LearningRateMonitor's per group, else `lr`."""
        rates = self._last_by("step").filter(regex="^lr")
        per_group = rates.drop(columns="lr", errors="ignore")
        return per_group if per_group.columns.size else rates

    def final_metrics(self) -> dict[str, dict[str, Any]]:
        """{metric: {"final": value, "best": value, "at": epoch}}: metrics.json and the test
        metrics first, then each learning curve's last value; the monitored ones' best too."""
        rows = {key: {"final": value} for key, value in self.summary.items()}
        for event in self.events:
            rows |= {k: {"final": v} for k, v in event.items() if k.startswith("test_") and k not in rows}
        monitored = self.monitored()
        for key in sorted(self.curves, key=lambda key: not key.startswith("val_")):
            series = self.per_axis[key].dropna()
            rows.setdefault(key, {"final": self._last_logged(key)})
            if key in monitored:
                at = series.idxmax() if higher_is_better(key) else series.idxmin()
                rows[key] |= {"best": series[at], "at": at}
        return rows

    def _last_logged(self, key: str) -> float:
        """The curve's last value as logged: a run whose loss went NaN (null in metrics.jsonl)
        ended on NaN, not on the last finite value before it."""
        names = (key, f"{key}_epoch")  # per_axis drops Lightning's suffix
        logged = [e[n] for e in self.events if e.get(self.axis) is not None for n in names if n in e]
        return math.nan if logged[-1] is None else logged[-1]


def _read(path: Path, read: Any = None) -> Any:
    """The file's content (a JSON object, unless `read` reads it); {} when it is missing."""
    try:
        content = read(path) if read else json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except ValueError as error:
        raise DataValidationError(f"{path} is not valid JSON ({error})") from None
    if read is None and not isinstance(content, dict):
        raise DataValidationError(f"{path} holds a JSON {type(content).__name__}, not an object")
    return content
