"""What a sweep's folder holds besides its trials' run directories: sweep.json (what
the sweep is and how far it got), config.json (the base config), trials.jsonl (a line
per ended trial, from every worker), summary.md, comparison/ (the best trials side by
side) and optuna.journal (the Optuna study
every worker shares, unless sweep.json names a database); `--resume` and `--study`
read them back (RES-1)."""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from src.runs.atomic import write_text_atomic

SWEEP_FILE = "sweep.json"
CONFIG_FILE = "config.json"
TRIALS_FILE = "trials.jsonl"
SUMMARY_FILE = "summary.md"
COMPARISON_DIR = "comparison"
LOCK_FILE = ".lock"  # every worker holds it shared; an idle sweep's can be taken alone
JOURNAL_FILE = "optuna.journal"


@dataclass
class Trial:
    number: int
    params: dict[str, Any]
    status: str = "running"  # finished | failed; interrupted in the summary of a stopped sweep
    value: float | None = None
    seconds: float = 0.0
    run_dir: str = ""
    error: str = ""
    bad_input: bool = False  # it failed on its values, data or memory, not on a bug
    metrics: dict[str, float] = field(default_factory=dict)
    resumed_from: str = ""  # the checkpoint a trial cut off by a kill went on from (RES-1)
    worker: str = ""  # host:pid of the process that ran it


@dataclass
class SweepState:
    """sweep.json: what the sweep is and how far it got, for `--resume` (RES-1)."""

    engine: str
    name: str  # the base config's name: the folder's prefix, what --resume auto looks for
    config_class: str
    seed: int
    trials: int  # the local sweep's total over all its attempts; a W&B agent's count
    max_hours: float  # likewise the whole sweep's, over all its attempts (SWP-5)
    # running | interrupted (Ctrl-C, SIGTERM) | finished | failed. A killed sweep stays
    # "running": --resume auto takes any sweep that is not finished.
    status: str = "running"
    # {"number", "params"} of the trial under way, kept by sweeps from before the shared
    # study; since, the study knows which trials are under way, and whose.
    running_trial: dict[str, Any] | None = None
    storage: str = ""  # the database URL of the Optuna study; "" for the folder's optuna.journal
    wandb_sweep_id: str = ""
    pid: int = 0
    updated: str = ""

    @classmethod
    def read(cls, sweep_dir: Path) -> SweepState:
        record = json.loads((sweep_dir / SWEEP_FILE).read_text())
        return cls(**{f.name: record[f.name] for f in dataclasses.fields(cls) if f.name in record})

    def write(self, sweep_dir: Path) -> None:
        self.pid, self.updated = os.getpid(), datetime.now().isoformat(timespec="seconds")
        write_text_atomic(
            sweep_dir / SWEEP_FILE, json.dumps(dataclasses.asdict(self), indent=2, default=str) + "\n"
        )


def jsonl_line(trial: Trial) -> str:
    return json.dumps(dataclasses.asdict(trial), default=str) + "\n"
