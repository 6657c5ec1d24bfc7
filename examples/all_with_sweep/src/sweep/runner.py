"""A sweep under way: runs its trials in this process and keeps its folder's record after each:
sweep.json, config.json (the base config), trials.jsonl (a line per ended trial, from every
worker), summary.md, comparison/ and optuna.journal (the shared Optuna study, unless sweep.json
names a database), beside the trials' run directories."""

from __future__ import annotations

import dataclasses
import gc
import json
import math
import os
import socket
import time
import traceback
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from src.cli import bad_input_message
from src.config import BaseConfig
from src.report.run_files import REPORT_FILE, RunFiles
from src.runs.atomic import write_text_atomic
from src.runs.directory import intact_checkpoint, run_record
from src.runs.lifetime import ended_by_the_wall_clock
from src.runs.metrics_jsonl import read_jsonl
from src.sweep.spec import SweepSpec

SWEEP_FILE = "sweep.json"
CONFIG_FILE = "config.json"
TRIALS_FILE = "trials.jsonl"
SUMMARY_FILE = "summary.md"
COMPARISON_DIR = "comparison"
LOCK_FILE = ".lock"  # every worker holds it shared; an idle sweep's can be taken alone
JOURNAL_FILE = "optuna.journal"
DEFAULT_TRIALS, DEFAULT_MAX_HOURS, DEFAULT_SEED = 20, 24.0, 0


WORKER = f"{socket.gethostname()}:{os.getpid()}"  # this process, in trials.jsonl and the study
COMPARED = 8  # the best trials that summary.md's comparison shows side by side


@dataclass
class Trial:
    number: int
    params: dict[str, Any]
    # finished | cut short (by the sweep's clock: not ranked) | failed; interrupted in the
    # summary of a stopped sweep
    status: str = "running"
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
    part: str = ""  # the part whose sweep it is: a config of another part has the same names
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
            state = cls(**{f.name: record[f.name] for f in dataclasses.fields(cls) if f.name in record})
        except (OSError, ValueError, TypeError, KeyError):
            return None
        # A field damage or a hand's edit left of another kind (a null max_hours): no sweep to go on with.
        kinds = {f.name: type(f.default) for f in dataclasses.fields(cls)}  # the first three have none
        kinds |= {"engine": str, "name": str, "config_class": str, "max_hours": int | float}
        fitting = all(isinstance(getattr(state, name), kind) for name, kind in kinds.items())
        return state if fitting and not isinstance(state.trials, bool) else None

    def write(self, sweep_dir: Path) -> None:
        self.pid, self.updated = os.getpid(), datetime.now().isoformat(timespec="seconds")
        text = json.dumps(dataclasses.asdict(self), indent=2, default=str) + "\n"
        write_text_atomic(sweep_dir / SWEEP_FILE, text)


class Sweep:
    """Runs trials until the count or the wall clock (SWP-5) is spent; trials.jsonl gets
    each as it ends, then sweep.json and summary.md."""

    def __init__(
        self,
        spec: SweepSpec,
        base: BaseConfig,
        sweep_dir: Path,
        max_hours: float,
        state: SweepState | None = None,
    ) -> None:
        self.spec, self.base, self.dir, self.state = spec, base, sweep_dir, state
        # The trials of earlier attempts and other workers are kept, not repeated (RES-1), and
        # their time counts against --max-hours, which bounds the whole sweep (SWP-5).
        self.trials = self.recorded_trials()
        self.deadline = time.monotonic() + max_hours * 3600 - sum(trial.seconds for trial in self.trials)
        path = self.dir / TRIALS_FILE
        if path.is_file() and path.stat().st_size and not path.read_bytes().endswith(b"\n"):
            # A line a kill cut short: the next trial's line starts on a line of its own.
            with open(path, "a", encoding="utf-8") as file:
                file.write("\n")

    def hours_left(self) -> float:
        return max(self.deadline - time.monotonic(), 0.0) / 3600

    def recorded_trials(self) -> list[Trial]:
        """Every ended trial in trials.jsonl, whichever worker ran it; a line a kill cut
        short is left out (that trial is continued, RES-1)."""
        path = self.dir / TRIALS_FILE
        names = {f.name for f in dataclasses.fields(Trial)}
        found = []
        for record in read_jsonl(path) if path.is_file() else []:
            # As a line a kill cut short, one that damage left without a trial's number and values.
            if isinstance(record.get("number"), int) and isinstance(record.get("params"), dict):
                found.append(Trial(**{key: value for key, value in record.items() if key in names}))
        return found

    def trial_config(self, number: int, params: dict[str, Any]) -> BaseConfig:
        """The base config with the sampled values, its own name and run folder, and a
        wall-clock budget that ends with the sweep's (SWP-5)."""
        output = dataclasses.replace(self.base.output, base_dir=str(self.dir))
        return dataclasses.replace(
            self.base,
            **self.spec.decode(params),
            name=f"{self.base.name}-trial{number:03d}",
            output=output,
            # At least a moment, so a trial started just before the deadline still ends
            # with a checkpoint of its first epoch or round.
            max_wall_clock_hours=max(min(self.base.max_wall_clock_hours, self.hours_left()), 1e-6),
        )

    def run_trial(self, params: dict[str, Any], number: int | None = None, resume: bool = False) -> Trial:
        """Trial `number` (the next one when None); with `resume`, one a kill or a stop left
        unfinished, continued from its run's last checkpoint or, without one, run again."""
        if number is None:
            number = max((trial.number for trial in self.trials), default=-1) + 1
        trial = Trial(number, params, worker=WORKER)
        self.trials.append(trial)
        started = time.monotonic()
        try:
            cfg = self.trial_config(trial.number, params)
            run = self.last_run(trial.number) if resume else None
            checkpoint = intact_checkpoint(run)[0] if run else None  # a damaged one is skipped (RES-1)
            trial.resumed_from = str(checkpoint or "")
            resuming = f", resuming {checkpoint}" if checkpoint else ""
            print(f"sweep trial {trial.number}: {params}{resuming}")
            trial.metrics = self.spec.train(cfg, checkpoint)
            trial.value = float(trial.metrics[self.spec.metric])
            trial.status = "finished"
            if self.cut_by_the_sweeps_clock(trial.number, cfg):
                trial.status, trial.error = "cut short", "by the sweep's --max-hours: not ranked"
        # SWP-7: any failure of a trial is caught here, so its stack unwinds now and the
        # sweep goes on; Ctrl-C and SystemExit are not Exceptions and still end the sweep.
        except Exception as error:  # noqa: BLE001
            message = bad_input_message(error)
            trial.status, trial.error = "failed", message or f"{type(error).__name__}: {error}"
            trial.bad_input = message is not None
            if message is None:  # a bug's traceback is worth reading; bad input's is not
                traceback.print_exc()
            print(f"sweep trial {trial.number} failed ({trial.error}); the sweep goes on")
        # SWP-7: only now is nothing of the trial referenced: free its memory before the next.
        from src.ops.memory import cleanup_vram  # here: torch takes a second to load, --help none

        cleanup_vram()
        gc.collect()
        gc.collect()
        trial.seconds = time.monotonic() - started
        trial.run_dir = str(self.last_run(trial.number) or "")
        self.record(trial)
        return trial

    def cut_by_the_sweeps_clock(self, number: int, cfg: BaseConfig) -> bool:
        """Whether the sweep's deadline, before the trial's own budget, ended its training: its
        score is of a shorter training than the others' (SWP-5)."""
        if self.hours_left() > 0 or cfg.max_wall_clock_hours >= self.base.max_wall_clock_hours:
            return False
        run = self.last_run(number)
        return run is not None and ended_by_the_wall_clock(run_record(run))

    def last_run(self, number: int) -> Path | None:
        return max(self.dir.glob(f"{self.base.name}-trial{number:03d}_*"), default=None)

    def record(self, trial: Trial) -> None:
        """trials.jsonl first, then sweep.json: a kill between the two leaves a trial that
        --resume finds recorded, so it is not run twice."""
        # One write of one line: workers appending at once do not interleave.
        with open(self.dir / TRIALS_FILE, "a", encoding="utf-8") as file:
            file.write(json.dumps(dataclasses.asdict(trial), default=str) + "\n")
        self.save()
        self.finish()  # after every trial, so a sweep killed later still has its summary

    def save(self, **changes: Any) -> None:
        if self.state is not None:
            self.state = dataclasses.replace(self.state, **changes)
            self.state.write(self.dir)

    def end(self, status: str) -> str:
        """The sweep's status in sweep.json and its final summary; returns what the sweep
        prints as it ends: the table, and where its summary and comparison are."""
        for trial in self.trials:
            if trial.status == "running":
                trial.status, trial.run_dir = "interrupted", str(self.last_run(trial.number) or "")
        self.save(status=status)
        comparison = self.compare_best()
        lines = [self.finish(), f"summary: {self.dir / SUMMARY_FILE}"]
        lines += [f"the best trials compared: {comparison}"] if comparison else []
        return "\n".join(lines)

    def compare_best(self) -> Path | None:
        """comparison/report.md, the best finished trials side by side; its path."""
        best = [trial for trial in self.ranked() if trial.status == "finished" and trial.run_dir][:COMPARED]
        if len(best) < 2:
            return None
        try:
            from src.report.run_report import compare_runs  # here: matplotlib is slow to load

            # In this folder, which may have moved since a trial recorded where it ran.
            runs = [RunFiles.read(self.dir / Path(trial.run_dir).name) for trial in best]
            return compare_runs(
                runs, self.dir / COMPARISON_DIR, f"Sweep {self.dir.name}: the best {len(best)} trials"
            )
        except Exception as error:  # noqa: BLE001 - the sweep's own record matters more
            print(f"warning: no comparison of the trials ({type(error).__name__}: {error})")
            return None

    def ranked(self) -> list[Trial]:
        """Finished trials best first, then the others (cut short, failed): every worker's
        ended trials, and this one's under way or interrupted."""
        sign = -1 if self.spec.goal == "maximize" else 1
        ended = self.recorded_trials()
        numbers = {trial.number for trial in ended}
        trials = ended + [t for t in self.trials if t.number not in numbers]
        return sorted(trials, key=lambda trial: (trial.score is None, sign * (trial.score or 0.0)))

    def finish(self) -> str:
        """Write summary.md (atomically: a kill mid-write keeps the previous one); its table."""
        names = list(self.spec.space)
        rows = [["rank", "trial", "status", self.spec.metric, *names, "seconds", "run directory"]]
        rows.append(["---"] * len(rows[0]))
        for rank, trial in enumerate(self.ranked(), start=1):
            params = [_cell(trial.params.get(name, "")) for name in names]
            where = [Path(trial.run_dir).name, "(resumed)" if trial.resumed_from else "", trial.error]
            ranked = str(rank) if trial.score is not None else ""  # failed, cut short: not ranked
            row = [ranked, str(trial.number), trial.status, _cell(trial.value), *params]
            rows.append([*row, f"{trial.seconds:.0f}", " ".join(filter(None, where))])
        table = "".join("| " + " | ".join(row) + " |\n" for row in rows)
        progress = ""
        if self.state is not None:
            ended = len(self.recorded_trials())  # more than --trials where a resume gave fewer
            progress = f"{self.state.status}, {ended} of {max(ended, self.state.trials)} trials ended\n\n"
        comparison = f"{COMPARISON_DIR}/{REPORT_FILE}"
        if (self.dir / comparison).is_file():
            progress += f"[The best trials side by side]({comparison})\n\n"
        write_text_atomic(
            self.dir / SUMMARY_FILE,
            f"# Sweep {self.dir.name}: {self.spec.metric}, {self.spec.goal}\n\n{progress}{table}",
        )
        return table


def _cell(value: Any) -> str:
    return "" if value is None else f"{value:.4g}" if isinstance(value, float) else str(value)
