"""OPS-3: watch a running job; each finding goes to logs/ as it is made, each problem to
issues/ (OPS-4), and what a run cannot report itself (killed, hung, a broken checkpoint)
raises its alerts (src.ops.alerts). README.md, "Watching a run", says what it checks."""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import math
import os
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Annotated

import psutil
import torch
import tyro

from src.config import AlertConfig, first_line
from src.errors import fail, reader_may_stop_reading
from src.ops.alerts import Alerts
from src.ops.hardware import gpu_readings, visible_gpus
from src.ops.records import new_issue
from src.runs.atomic import WriteFailed, write_text_atomic
from src.runs.checkpoint_checks import checkpoint_problem
from src.runs.directory import (
    NEVER_CHECKPOINTED,
    latest_checkpoint,
    marked_if_never_checkpointed,
    process_alive,
    run_part,
    run_record,
)
from src.runs.metrics_jsonl import higher_is_better, read_jsonl

ENDED_BY_ITSELF = ("failed", "finished", "interrupted")  # run.json statuses a run writes as it ends


@dataclass
class Finding:
    check: str
    level: str  # OK, WARN or FAIL
    message: str
    issue_type: str = ""  # set on failures that deserve an issues/ record
    details: dict[str, str] = field(default_factory=dict)  # the issue type's fields
    restartable: bool = False


def check_process(run_dir: Path, record: dict, pending_restart: int | None) -> Finding:
    status, pid, host = record.get("status"), record.get("pid"), record.get("host")
    last = str(latest_checkpoint(run_dir) or "none")
    if status == "finished":
        return Finding("process", "OK", "finished")
    if host and host != socket.gethostname():
        return Finding("process", "WARN", f"runs on {host}: only its files are checked from here")
    if status == "interrupted":
        stopped_by = record.get("end_detail") or "Ctrl-C, SIGTERM or SIGHUP"
        return Finding("process", "WARN", f"interrupted on purpose ({stopped_by}): not restarted")
    if status == "failed":
        details = {"exit_status": "failed", "last_checkpoint": last, "traceback": record.get("error", "")}
        then = "fix it, then --resume" if last != "none" else "nothing to resume: fix it, then start afresh"
        message = f"failed: {record.get('error', '')} ({then})"
        return Finding("process", "FAIL", message, "crash", details)
    if pending_restart:
        return Finding("process", "OK", f"restarted as pid {pending_restart}, not yet running (GPU lock?)")
    if marked_if_never_checkpointed(run_dir):
        message = "died before its first checkpoint: nothing to resume or restart; delete the folder"
        details = {"exit_status": f"killed ({NEVER_CHECKPOINTED})", "last_checkpoint": "none"}
        return Finding("process", "FAIL", message, "crash", details)
    if pid and process_alive(run_dir, record):
        return Finding("process", "OK", f"running as pid {pid}")
    details = {"exit_status": "killed (no status recorded)", "last_checkpoint": last}
    message = f"pid {pid} is gone but the run never finished (killed?)"
    return Finding("process", "FAIL", message, "crash", details, restartable=True)


def check_hung(run_dir: Path, stall_minutes: float) -> Finding:
    outputs = [run_dir / "metrics.jsonl", run_dir / "console.log"]
    newest = max((p.stat().st_mtime for p in outputs if p.exists()), default=0.0)
    idle_minutes = (time.time() - newest) / 60
    if idle_minutes > stall_minutes:
        details = {"last_output_at": datetime.fromtimestamp(newest).isoformat(timespec="seconds")}
        return Finding("hung", "FAIL", f"no output for {idle_minutes:.1f} min", "hang", details)
    return Finding("hung", "OK", f"last output {idle_minutes:.1f} min ago")


def check_metrics(run_dir: Path, monitor: str, patience: int, running: bool = True) -> Finding:
    """The monitored metric's trend; a plateau warns only while the run trains (early stopping
    ends a run on one)."""
    # Numbers only: null is how metrics.jsonl spells a value that is not finite.
    logged = _events(run_dir)
    events = [e for e in logged if monitor in e and type(e[monitor]) in (int, float, type(None))]
    # Of the metric lines: the start-of-run line's config has val_* fields (val_fraction).
    metrics = [event for event in logged if event.get("event") != "hyperparams"]
    validated = sorted({key for event in metrics for key in event if key.startswith("val_")})
    if not events and validated:  # the run validates, and logs no such metric: a misspelt --monitor?
        return Finding("metrics", "WARN", f"the run logs no {monitor}; it logs {', '.join(validated)}")
    if not events:
        return Finding("metrics", "OK", f"no {monitor} yet")
    # metrics.jsonl writes NaN and infinities as null (JSON has no spelling for them).
    values = [math.nan if e[monitor] is None else e[monitor] for e in events]
    if not math.isfinite(values[-1]):
        details = {"metric": monitor, "epoch": str(events[-1].get("epoch", "")), "value": str(values[-1])}
        return Finding("metrics", "FAIL", f"{monitor} is not finite: {values[-1]}", "divergence", details)
    finite = [v for v in values if math.isfinite(v)]
    best = max(finite) if higher_is_better(monitor) else min(finite)
    since_best = len(values) - 1 - values.index(best)
    level = "WARN" if running and since_best >= max(patience // 2, 1) else "OK"
    # Counted in validations: a tree's are its rounds, a neural run's its epochs or every n steps.
    trend = f"{monitor} {values[-1]:.4g} (best {best:.4g}, {since_best} validation(s) ago, of {len(values)})"
    return Finding("metrics", level, trend)


def check_system(run_dir: Path) -> Finding:
    memory = psutil.virtual_memory()
    free_gb = shutil.disk_usage(run_dir).free / 1024**3
    parts = [f"RAM {memory.percent:.0f}%", f"disk free {free_gb:.1f} GB"]
    for index in range(len(visible_gpus())):
        readings = (
            f"{k.removeprefix('system/gpu_').removesuffix('_percent')} {v:.0f}%"
            for k, v in gpu_readings(index).items()
        )
        parts.append(f"GPU{index} {' '.join(readings)}")
    level = "WARN" if memory.percent > 90 or free_gb < 5 else "OK"
    return Finding("system", level, ", ".join(parts))


def check_checkpoint(run_dir: Path) -> Finding:
    last = latest_checkpoint(run_dir)
    if last is None:
        return Finding("checkpoint", "OK", "no checkpoint yet")
    try:  # as a resume would load it
        if last.suffix == ".ubj":
            # A damaged model file can crash XGBoost: another process loads it first.
            if problem := checkpoint_problem(last):
                raise ValueError(f"it is {problem}")
            import xgboost as xgb  # only projects with a tree part have it

            progress = f"{xgb.Booster(model_file=last).num_boosted_rounds()} rounds"
        else:
            try:
                checkpoint = torch.load(last, map_location="cpu", weights_only=True, mmap=True)
            except Exception:
                if problem := checkpoint_problem(last):  # in the words a resume uses, not torch's
                    raise ValueError(f"it is {problem}") from None
                raise
            progress = f"epoch {checkpoint.get('epoch')}"
    except Exception as error:  # noqa: BLE001 - any failure to load means a broken file
        details = {"exit_status": "", "last_checkpoint": str(last), "traceback": repr(error)}
        return Finding("checkpoint", "FAIL", f"{last.name} does not load: {error}", "crash", details)
    age = (time.time() - last.stat().st_mtime) / 60
    return Finding("checkpoint", "OK", f"{last.name} loads ({progress}, {age:.0f} min old)")


def _events(run_dir: Path) -> list[dict]:
    path = run_dir / "metrics.jsonl"
    return read_jsonl(path) if path.exists() else []


@dataclass
class BabysitOptions:
    """Watch a running job and write what is found, as it is found, to logs/. Exit status: 0
    when the run finished, 1 when the last check found a failure, 3 when neither: the run goes
    on (a single check), or it was stopped on purpose; 2 for bad input, 130 for Ctrl-C. Checks
    end once the run has ended, or its process is gone and not restarted.

    Attributes:
        run_dir: The run directory to watch.
        every: Seconds between checks; 0: check once.
        restart: Restart a killed run from its checkpoint.
        max_restarts: Restarts at most, counted across checks and babysitters.
        stall_minutes: Minutes without output after which a running job counts as hung.
        monitor: The metric to watch (default: what the run early-stops on).
        log_dir: Where the log of findings and the restarts' output go.
    """

    run_dir: Annotated[Path, tyro.conf.Positional, tyro.conf.arg(metavar="RUN_DIR")]
    every: Annotated[float, tyro.conf.arg(metavar="SECONDS")] = 0
    restart: Annotated[bool, tyro.conf.FlagCreatePairsOff] = False
    max_restarts: int = 3
    stall_minutes: float = 30.0
    monitor: Annotated[str | None, tyro.conf.arg(metavar="METRIC", help_behavior_hint="")] = None
    log_dir: Annotated[Path, tyro.conf.arg(metavar="DIR")] = Path("logs")


class Babysitter:
    """Checks one run; remembers its restarts in logs/babysit_<part>_<run>.json."""

    def __init__(self, run_dir: Path, options: BabysitOptions) -> None:
        self.run_dir, self.options = run_dir, options
        self.log_dir = Path(options.log_dir)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        # Named by part too: two parts' runs may share a name (output/part1/smoke_X, output/part2/smoke_X).
        self.label = "_".join(filter(None, (run_part(run_record(run_dir)), run_dir.name)))
        self.gave_up = False  # the last check found the process gone, and did not restart it
        self.log_path = self.log_dir / f"babysit_{self.label}.log"
        self.state_path = self.log_dir / f"babysit_{self.label}.json"

    def hold_restarts(self) -> str | None:
        """Restarting the run is this babysitter's alone while it lives (two would resume one
        kill twice); the pid of another that holds it instead, if one does."""
        self._restarts_lock = open(self.log_dir / f"babysit_{self.label}.lock", "a+")  # noqa: SIM115 - held
        try:
            fcntl.flock(self._restarts_lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._restarts_lock.seek(0)
            return self._restarts_lock.read().strip() or "unknown"
        self._restarts_lock.truncate(0)
        self._restarts_lock.write(str(os.getpid()))
        self._restarts_lock.flush()
        return None

    def check(self) -> list[Finding]:
        record = json.loads((self.run_dir / "run.json").read_text())
        config = json.loads((self.run_dir / "config.json").read_text())
        findings = [check_process(self.run_dir, record, self._pending_restart(record))]
        if findings[0].restartable and (failed := self._failed_restart(record)):
            findings[0] = failed
        if record.get("status") == "running":
            findings.append(check_hung(self.run_dir, self.options.stall_minutes))
        patience = config.get("patience", config.get("early_stopping_rounds", 10))
        findings += [
            check_metrics(self.run_dir, self._monitor(config), patience, record.get("status") == "running"),
            check_system(self.run_dir),
            check_checkpoint(self.run_dir),
        ]
        for finding in findings:
            self._log(f"{finding.level:<4} {finding.check:<10} {finding.message}")
            if finding.issue_type:
                self._record_issue(finding, record, config)
        restarted = False
        if findings[0].restartable and self.options.restart:
            restarted, said = self._restart(record)
            self._log(f"ACT  restart    {said}")
        # A process gone and not started again: nothing more happens to the run.
        self.gave_up = findings[0].level == "FAIL" and not restarted
        return findings

    def _monitor(self, config: dict) -> str:
        """--monitor, or what the run early-stops on: val_<eval_metric> for trees, else the key
        metrics.jsonl tracks the best of, else val_episode_reward for RL and val_loss for the rest."""
        if self.options.monitor:
            return self.options.monitor
        if config.get("eval_metric"):
            return f"val_{config['eval_metric']}"
        tracked = {k for e in _events(self.run_dir) for k in e if k.startswith("tracking/best_")}
        if keys := sorted(tracked - {"tracking/best_epoch", "tracking/best_round"}):
            return keys[0].removeprefix("tracking/best_")
        return "val_episode_reward" if "num_envs" in config else "val_loss"

    def _restart(self, record: dict) -> tuple[bool, str]:
        """Start the run's own command again, detached, resuming from its last checkpoint;
        whether it did, and what happened."""
        restarts = self._state().get("restarts", [])
        if len(restarts) >= self.options.max_restarts:
            return False, f"not restarted: {len(restarts)} restarts already (--max-restarts)"
        if latest_checkpoint(self.run_dir) is None:
            return False, "not restarted: no checkpoint to resume from"
        output = self.log_dir / f"{self.label}_restart_{datetime.now():%Y%m%d_%H%M%S}.txt"
        # The run's own command, less the --resume an earlier restart gave it: each would add one.
        command = [*_without_resume(record["command"]), "--resume", str(self.run_dir.resolve())]
        with open(output, "w") as log:
            process = subprocess.Popen(
                command,
                cwd=record.get("cwd"),
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # outlives the babysitter, like nohup (OPS-2)
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        at = datetime.now().isoformat(timespec="seconds")
        restarts.append({"pid": process.pid, "at": at, "output": str(output)})
        write_text_atomic(self.state_path, json.dumps({"restarts": restarts}, indent=2))
        return True, f"restarted from its latest checkpoint as pid {process.pid}; output in {output}"

    def _failed_restart(self, record: dict) -> Finding | None:
        """Our last restart, where it ended without taking the run over: restarting again would
        fail again (a missing module, a refused flag) until someone looks."""
        restarts = self._state().get("restarts", [])
        if not restarts or restarts[-1]["pid"] == record.get("pid") or _alive(restarts[-1]["pid"]):
            return None
        if str(record.get("updated", "")) >= restarts[-1]["at"]:  # someone resumed it since
            return None
        said = f"its restart (pid {restarts[-1]['pid']}) ended before it took the run over"
        details = {"exit_status": said, "last_checkpoint": str(latest_checkpoint(self.run_dir) or "none")}
        details["restart_pid"] = str(restarts[-1]["pid"])
        output = restarts[-1].get("output", "its output in --log-dir")
        return Finding("restart", "FAIL", f"{said}: see {output}; not restarted again", "crash", details)

    def _pending_restart(self, record: dict) -> int | None:
        """A restart of ours that is alive but has not taken over run.json yet."""
        restarts = self._state().get("restarts", [])
        if restarts and restarts[-1]["pid"] != record.get("pid") and _alive(restarts[-1]["pid"]):
            return restarts[-1]["pid"]
        return None

    def _state(self) -> dict:
        return json.loads(self.state_path.read_text()) if self.state_path.exists() else {}

    def _log(self, line: str) -> None:
        # Appended and flushed per finding: a babysitter killed mid-check loses nothing.
        with open(self.log_path, "a") as log:
            log.write(f"{datetime.now():%Y-%m-%d %H:%M:%S} {line}\n")
        print(line, flush=True)

    def _record_issue(self, finding: Finding, record: dict, config: dict) -> None:
        # Once per problem and process (a restart's, where it failed).
        pid = finding.details.get("restart_pid") or record.get("pid")
        marker = self.run_dir / f".issue_{finding.check}_{pid}"
        if marker.exists():
            return
        title = f"{self.run_dir.name} {finding.check}: {finding.message[:60]}"
        try:
            path = new_issue(Path.cwd(), title, finding.issue_type, str(self.run_dir), **finding.details)
            marker.write_text(str(path))
            self._log(f"ACT  issue      recorded {path}")
        except (WriteFailed, OSError) as error:  # a full disk, a folder it may not write: it still acts
            self._log(f"WARN issue      not recorded: {first_line(error)}")
        # What a run cannot report itself; one that ended by itself, or diverged, raised its own.
        kind = {"process": "killed", "hung": "hung", "checkpoint": "checkpoint broken"}.get(finding.check)
        kind = "restart failed" if finding.check == "restart" else kind
        if kind and record.get("status") not in ENDED_BY_ITSELF:
            known = {f.name for f in dataclasses.fields(AlertConfig)}
            cfg = AlertConfig(**{k: v for k, v in config.get("alerts", {}).items() if k in known})
            Alerts(cfg, self.run_dir, record=False).send(kind, finding.message, "ERROR")
            self._log(f"ACT  alert      {kind}")


def _without_resume(command: list[str]) -> list[str]:
    """The command line less its --resume PATH or --resume=PATH."""
    kept: list[str] = []
    for arg in command:
        if kept[-1:] == ["--resume"]:
            kept.pop()  # and its value
        elif not arg.startswith("--resume="):
            kept.append(arg)
    return kept


def _alive(pid: int) -> bool:
    """Whether the process runs; a restart of this babysitter's that ended is reaped."""
    try:
        if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
            return True
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:  # another user's: it runs
        return True
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
    return False


def main(argv: list[str] | None = None) -> int:
    with reader_may_stop_reading():
        options = tyro.cli(BabysitOptions, args=argv, prog="python -m src.ops.babysit")
    for flag, value, lowest in (("--every", options.every, 0), ("--max-restarts", options.max_restarts, 0)):
        if not lowest <= value < math.inf:
            fail(f"{flag} {value}: give a number from {lowest} up")
    if not 0 < options.stall_minutes < math.inf:
        fail(f"--stall-minutes {options.stall_minutes}: give a number of minutes above 0")
    # Its real path: a babysitter of a link to the run counts the same restarts.
    options.run_dir = options.run_dir.resolve()
    for name in ("run.json", "config.json"):
        try:
            found = json.loads((options.run_dir / name).read_text())
        except (OSError, ValueError) as error:
            fail(f"{options.run_dir} is not a run directory: its {name} cannot be read ({first_line(error)})")
        if not isinstance(found, dict):
            fail(f"{options.run_dir} is not a run directory: its {name} holds no JSON object")
    try:
        babysitter = Babysitter(options.run_dir, options)
        holder = babysitter.hold_restarts() if options.restart else None
    except OSError as error:
        fail(f"--log-dir {options.log_dir}: {error.strerror or error}")
    if holder:
        fail(f"another babysitter (pid {holder}) restarts {options.run_dir}: stop it, or leave out --restart")
    try:
        while True:
            findings = babysitter.check()
            failed = any(finding.level == "FAIL" for finding in findings)
            status = run_record(options.run_dir).get("status")
            if status in ENDED_BY_ITSELF or babysitter.gave_up or not options.every:
                return 1 if failed else 0 if status == "finished" else 3
            time.sleep(options.every)
    except KeyboardInterrupt:
        return 130  # the findings so far are in the log


if __name__ == "__main__":
    sys.exit(main())
