"""A sweep's folder besides its trials' run directories: sweep.json, config.json (the base
config), trials.jsonl (a line per ended trial, from every worker), summary.md, comparison/
and optuna.journal (the shared Optuna study, unless sweep.json names a database); and
finding the sweep `--resume` or `--study` names, with its lock (RES-1)."""

from __future__ import annotations

import dataclasses
import fcntl
import json
import math
import os
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import IO, Any

from src.config import BaseConfig, ConfigError
from src.runs.atomic import write_text_atomic

SWEEP_FILE = "sweep.json"
CONFIG_FILE = "config.json"
TRIALS_FILE = "trials.jsonl"
SUMMARY_FILE = "summary.md"
COMPARISON_DIR = "comparison"
LOCK_FILE = ".lock"  # every worker holds it shared; an idle sweep's can be taken alone
JOURNAL_FILE = "optuna.journal"
DEFAULT_TRIALS, DEFAULT_MAX_HOURS, DEFAULT_SEED = 20, 24.0, 0


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

    @property
    def score(self) -> float | None:
        """What the study learns and the ranking uses: None for a failed or non-finite trial."""
        ok = self.status == "finished" and self.value is not None and math.isfinite(self.value)
        return self.value if ok else None


@dataclass
class SweepState:
    """sweep.json: what the sweep is and how far it got."""

    engine: str
    name: str  # the base config's name: the folder's prefix, what --resume auto looks for
    config_class: str
    seed: int = DEFAULT_SEED
    trials: int = DEFAULT_TRIALS  # the local sweep's total over all its attempts; a W&B agent's count
    max_hours: float = DEFAULT_MAX_HOURS  # likewise the whole sweep's, over all its attempts (SWP-5)
    # running | interrupted | finished | failed; a killed sweep stays running.
    status: str = "running"
    storage: str = ""  # the database URL of the Optuna study; "" for the folder's optuna.journal
    wandb_sweep_id: str = ""
    pid: int = 0
    updated: str = ""

    @classmethod
    def read(cls, sweep_dir: Path) -> SweepState | None:
        try:
            record = json.loads((sweep_dir / SWEEP_FILE).read_text())
            return cls(**{f.name: record[f.name] for f in dataclasses.fields(cls) if f.name in record})
        except (OSError, ValueError, TypeError, KeyError):
            return None

    def write(self, sweep_dir: Path) -> None:
        self.pid, self.updated = os.getpid(), datetime.now().isoformat(timespec="seconds")
        text = json.dumps(dataclasses.asdict(self), indent=2, default=str) + "\n"
        write_text_atomic(sweep_dir / SWEEP_FILE, text)


def find_sweep(base: BaseConfig, flag: str, named: str) -> tuple[Path, SweepState, IO[str]] | None:
    """The sweep `--resume` or `--study` names, its state and this process's share of its lock;
    None when `--resume auto` finds none. Another engine or config than this command's is
    refused: its trials would not fit."""
    if flag == "--resume" and named == "auto":
        sweeps = base.runs_dir() / "sweeps"
        # Folders are named BASE_STAMP_PID: the newest first.
        for path in sorted(sweeps.glob(f"{base.name}_*"), key=_started, reverse=True):
            state = SweepState.read(path)
            if (
                state is None
                or (state.engine, state.name) != ("local", base.name)
                or state.status == "finished"
            ):
                continue
            if (lock := lock_sweep(path)) is not None:  # one another process runs is skipped
                _check_same_sweep(state, base, "--resume auto")
                return path, state, lock
        print(f"--resume auto: no unfinished local '{base.name}' sweep in {sweeps}/, starting a new one")
        return None
    path = Path(named)
    if (state := SweepState.read(path)) is None:
        raise ConfigError(f"{flag} {named}: not a sweep directory (no readable {SWEEP_FILE})")
    _check_same_sweep(state, base, f"{flag} {named}")
    if (lock := lock_sweep(path, alone=flag == "--resume")) is None:
        raise ConfigError(
            f"--resume {named}: another process is running that sweep (pid {state.pid}); "
            f"to run it on more processes, start each with --study {named}"
        )
    return path, state, lock


def _started(sweep_dir: Path) -> tuple[str, float]:
    return sweep_dir.name.rpartition("_")[0], sweep_dir.stat().st_mtime


def _check_same_sweep(state: SweepState, base: BaseConfig, flag: str) -> None:
    if state.engine != "local":
        raise ConfigError(
            f"{flag}: that is a {state.engine} sweep; a W&B sweep goes on with "
            f"--engine wandb --sweep-id {state.wandb_sweep_id or 'ID'}"
        )
    if (state.name, state.config_class) != (base.name, type(base).__name__):
        raise ConfigError(
            f"{flag}: that sweep is of config '{state.name}', this command's is "
            f"'{base.name}' (give --config {state.name})"
        )


def lock_sweep(sweep_dir: Path, alone: bool = True) -> IO[str] | None:
    """A share of the sweep's lock for this process's lifetime; with `alone`, taken only where
    no other process holds one (None while another worker runs the sweep). The kernel
    releases it however the process ends, kill -9 included."""
    file = open(sweep_dir / LOCK_FILE, "a")  # noqa: SIM115 - held open while the sweep runs
    try:
        if alone:
            fcntl.flock(file, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        file.close()
        return None
    fcntl.flock(file, fcntl.LOCK_SH)  # then one worker among any that join
    return file
