"""One training run's lifetime: its directory, snapshots and console log.

    with start_run(cfg, resume_from) as run:
        ...train, writing into run.dir...

On rank zero only (DDP-1) it writes config.json (OUT-2), tees the console into
console.log (OUT-2) and keeps run.json up to date: pid, command and status,
which is what the babysitter (OPS-3) reads to tell a crash from a finished run.
A run that fails, diverges or is stopped by a signal raises an alert (src.ops.alerts).
A run ends with one line saying why, `run ended: REASON (DETAIL)`, the last of
console.log, and the same in run.json's end_reason and end_detail: REASON is one of
END_REASONS. Training code says why it stopped with training_stopped(), where it
decides to (early stopping, the budget, a STOP file); a signal or an error is seen here.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import sys
import threading
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from src.config import USED_KEY, BaseConfig, first_line
from src.ops.alerts import Alerts
from src.runs.atomic import WriteFailed, translate_write_errors, write_text_atomic
from src.runs.console import tee_console, write_log
from src.runs.directory import (
    RUN_DIR_ENV,
    create_run_dir,
    inherited_run_dir,
    run_dir_of,
    stop_file_paths,
    stop_requested,
)
from src.runs.launch import agreed, current_launch, is_rank_zero
from src.runs.provenance import provenance
from src.wandb_utils import current_run

# Why a run ended: the target reward or score was reached; early stopping's patience ran
# out; its budget (epochs, rounds, wall clock) was spent; a STOP file; a signal (Ctrl-C,
# SIGTERM, SIGHUP); an error.
END_REASONS = ("target", "patience", "budget", "stop_file", "signal", "error")


@dataclass
class Run:
    dir: Path
    resume_from: Path | None  # checkpoint to continue from; None for a fresh run


@contextlib.contextmanager
def start_run(cfg: BaseConfig, resume_from: Path | None = None) -> Iterator[Run]:
    cfg.validate()  # raises ConfigError before any directory exists
    launch = current_launch()
    # Every process of a torchrun or srun launch writes into rank zero's choice (DDP-1).
    decided = agreed(launch, lambda: _run_dir_and_checkpoint(cfg, resume_from), cfg.runs_dir())
    run_dir = Path(decided["run_dir"])
    resume_from = Path(decided["resume_from"]) if decided["resume_from"] else None
    is_writer = is_rank_zero()
    previous_env = os.environ.get(RUN_DIR_ENV)
    os.environ[RUN_DIR_ENV] = str(run_dir)  # for the DDP ranks Lightning starts
    console = tee_console(run_dir / "console.log") if is_writer else contextlib.nullcontext()
    # A resume that fails (flags that do not fit the checkpoint, say) gives the run its
    # config.json back, so the next --resume still works.
    config_path = run_dir / "config.json"
    previous_config = config_path.read_text() if resume_from and config_path.is_file() else None
    _training_stops.clear()
    with console as log_file, hangup_and_sigterm_unwind():
        if log_file is not None:
            write_text_atomic(config_path, cfg.to_json() + "\n")
            # A Lightning part records the processes its Trainer starts too (RunInfoCallback).
            processes = {"world_size": launch.world_size, "num_nodes": launch.num_nodes}
            facts = {"part": cfg.part(), "launcher": launch.launcher, **processes}
            facts["provenance"] = provenance(cfg)
            _write_status(run_dir, "running", resume_from, **facts)
            print(f"run directory: {run_dir}" + (f" (resuming {resume_from.name})" if resume_from else ""))
            if stopper := stop_requested(stop_file_paths(cfg.stop_file, run_dir)):
                print(f"warning: {stopper} exists: this run will stop after its first epoch (delete it?)")
        try:
            yield Run(run_dir, resume_from)
        except BaseException as error:
            # Lightning turns Ctrl-C into SystemExit after saving what it can.
            status = "interrupted" if isinstance(error, SystemExit) or _ctrl_c(error) else "failed"
            end = _why_it_was_cut_short(error)
            with signals_wait_for_cleanup():
                if log_file is not None:
                    # The terminal gets the traceback when it propagates; the log gets it now.
                    write_log(log_file, traceback.format_exc())
                    _record_end(run_dir, status, resume_from, config_path, previous_config, error, end)
                    stopped_by = signal.Signals(_stop_signals[-1]).name if _stop_signals else None
                    Alerts(cfg.alerts, run_dir).run_ended(error, stopped_by)  # before W&B's run ends
                    _write_report(run_dir)  # a run cut short gets one too, for what it did
                if (wandb_run := current_run()) is not None:
                    wandb_run.finish(exit_code=1)
                if _ctrl_c(error):
                    resume = f"continue with --resume {run_dir}"
                    print(f"interrupted: saved files are kept; {resume}", file=sys.stderr)
                if log_file is not None:
                    _say_why(end)  # console.log's last line
            if _ctrl_c(error):
                raise SystemExit(130) from None
            if _lightning_sigterm(error):
                raise Terminated(128 + (_stop_signals[-1] if _stop_signals else signal.SIGTERM)) from None
            raise
        else:
            if log_file is not None:
                with signals_wait_for_cleanup() as deferred:
                    end = _why_training_stopped(run_dir)
                    _write_status(run_dir, "finished", resume_from, **end)
                    _write_report(run_dir)
                    Alerts(cfg.alerts, run_dir).run_ended(None)
                    _say_why(end)
                if deferred:  # the run finished, and then its owner asked it to stop
                    raise SystemExit(128 + deferred[0])
        finally:
            if previous_env is None:
                os.environ.pop(RUN_DIR_ENV, None)
            else:
                os.environ[RUN_DIR_ENV] = previous_env


def _run_dir_and_checkpoint(cfg: BaseConfig, resume_from: Path | None) -> dict[str, str]:
    """Where this run writes (the directory handed down by TRAIN_RUN_DIR, the resumed
    checkpoint's, or a new one) and the checkpoint it resumes from, if any."""
    run_dir = inherited_run_dir()
    if run_dir is not None:
        run_dir.mkdir(parents=True, exist_ok=True)  # one a user names for torchrun, say
    elif resume_from is not None:
        run_dir = run_dir_of(resume_from)
    else:
        run_dir = create_run_dir(cfg.runs_dir(), cfg.name)
    return {"run_dir": str(run_dir), "resume_from": str(resume_from or "")}


def _lightning_sigterm(error: BaseException) -> bool:
    """Whether Lightning ended fit or test at SIGTERM (its SIGTERMException, a SystemExit
    without a status). Looked up, not imported: a run that never loaded Lightning (a tree
    part's) cannot have raised it, and need not wait seconds for it to load."""
    exceptions = sys.modules.get("lightning.pytorch.utilities.exceptions")
    return exceptions is not None and isinstance(error, exceptions.SIGTERMException)


def _ctrl_c(error: BaseException | None) -> bool:
    """Ctrl-C, as Python raises it, as Lightning ends a fit after its own cleanup
    (exit(1) while handling the KeyboardInterrupt), or as a library garbles it while
    unwinding (a context manager whose exit fails, such as a TensorDict's to_module)."""
    while error is not None:
        if isinstance(error, KeyboardInterrupt):
            return True
        error = error.__context__
    return False


def _record_end(
    run_dir: Path,
    status: str,
    resume_from: Path | None,
    config_path: Path,
    previous_config: str | None,
    error: BaseException,
    end: dict[str, str],
) -> None:
    """run.json's status, and a resumed run's config.json back, after an error. On a full
    disk this may fail too: the terminal then says so, and the error that ended the run
    still comes first."""
    try:
        if previous_config is not None:
            write_text_atomic(config_path, previous_config)
        _write_status(run_dir, status, resume_from, error=repr(error), **end)
    except WriteFailed as failure:
        print(f"warning: run.json not updated ({failure})", file=sys.stderr)


# Why this session's training stopped, as the code that stopped it said (training_stopped).
_training_stops: list[dict[str, str]] = []


def training_stopped(reason: str, detail: str) -> None:
    """Record why training stops: `reason` one of END_REASONS, `detail` what reached what,
    in a few words. Called where the decision is made; the first call of a session
    counts, as the first cause stops training (a STOP file and the wall-clock budget may
    both come due at the end of one epoch)."""
    _training_stops.append({"end_reason": reason, "end_detail": detail})


def training_ended(run_dir: Path) -> bool:
    """Whether an earlier session of this run finished training (RES-1): resuming it
    then only tests and saves, as a run killed during its test or final save needs."""
    return bool(_read_record(run_dir).get("training_ended"))


def mark_training_ended(run_dir: Path) -> None:
    """run.json's training_ended: why training stopped, kept for a session that resumes
    only to test and save (an earlier session's reason stays when this one trained none)."""
    earlier = _read_record(run_dir).get("training_ended")
    record_in_run_json(run_dir, training_ended=_training_stops[0] if _training_stops else earlier or True)


def _read_record(run_dir: Path) -> dict[str, Any]:
    try:
        return json.loads((run_dir / "run.json").read_text())
    except (OSError, ValueError):
        return {}


def _why_training_stopped(run_dir: Path) -> dict[str, str]:
    """end_reason and end_detail of a run that finished: this session's first reason, or
    the session's that trained, or else that none was given."""
    if _training_stops:
        return _training_stops[0]
    earlier = _read_record(run_dir).get("training_ended")
    if isinstance(earlier, dict):
        return earlier
    return {"end_reason": "unknown", "end_detail": "the training code recorded no reason"}


def _why_it_was_cut_short(error: BaseException) -> dict[str, str]:
    """end_reason and end_detail of a run that a signal or an error ended."""
    if _ctrl_c(error):
        return {"end_reason": "signal", "end_detail": "SIGINT (Ctrl-C)"}
    if isinstance(error, SystemExit) and _stop_signals:
        return {"end_reason": "signal", "end_detail": signal.Signals(_stop_signals[-1]).name}
    said, kind = first_line(error), type(error).__name__
    return {"end_reason": "error", "end_detail": said if said == kind else f"{kind}: {said}"}


def _say_why(end: dict[str, str]) -> None:
    """The last line of console.log."""
    print(f"run ended: {end['end_reason']} ({end['end_detail']})", flush=True)


def record_in_run_json(run_dir: Path, **facts: Any) -> None:
    """Add facts to run.json: that training ended, the processes it ran on. Called by
    the process that writes the run's files (a Lightning callback: on global rank zero)."""
    path = run_dir / "run.json"
    record = json.loads(path.read_text())
    write_text_atomic(path, json.dumps({**record, **facts}, indent=2) + "\n")


def record_used_settings(run_dir: Path, **used: Any) -> None:
    """Add to config.json what the run actually used (the precision "auto" became, the
    batch size BatchSizeFinder found), beside the fields that say what was asked."""
    path = run_dir / "config.json"
    config = json.loads(path.read_text())
    config[USED_KEY] = {**config.get(USED_KEY, {}), **used}
    write_text_atomic(path, json.dumps(config, indent=2, sort_keys=True) + "\n")


class Terminated(SystemExit):
    """The process got SIGTERM (`kill PID`, a scheduler preempting the job) or SIGHUP (its
    terminal or ssh session closed)."""


# The SIGTERMs and SIGHUPs received since the run (or sweep) began: Lightning reports
# either as a SIGTERMException, and the exit status names the last one that came.
_stop_signals: list[int] = []


@contextlib.contextmanager
def hangup_and_sigterm_unwind() -> Iterator[None]:
    """SIGTERM and SIGHUP unwind the run (or sweep) like Ctrl-C instead of ending the
    process on the spot: run.json says "interrupted" (the babysitter leaves it alone,
    `--resume auto` continues it), W&B and console.log are closed, and the exit status is
    128 + the signal's number (143, 129)."""

    def terminate(signum: int, frame: object) -> None:
        _stop_signals.append(signum)
        # Inside fit and test Lightning has a SIGTERM handler of its own, which stops at
        # the end of the batch (SIGTERMException, given its status by start_run): raised
        # here, mid-step, it could leave Lightning's profiler or loops half-updated.
        if signal.getsignal(signal.SIGTERM) is terminate:
            raise Terminated(128 + signum)

    def hang_up(signum: int, frame: object) -> None:
        # Handled as SIGTERM is, by whoever handles SIGTERM now (Lightning, inside fit).
        _stop_signals.append(signum)
        if callable(handler := signal.getsignal(signal.SIGTERM)):
            handler(signum, frame)

    if threading.current_thread() is not threading.main_thread():  # signals reach the main thread only
        yield
        return
    _stop_signals.clear()
    previous = {
        signal.SIGTERM: signal.signal(signal.SIGTERM, terminate),
        signal.SIGHUP: signal.signal(signal.SIGHUP, hang_up),
    }
    try:
        yield
    finally:
        for signum, handler in previous.items():
            if signal.getsignal(signum) in (terminate, hang_up):
                signal.signal(signum, handler)


@contextlib.contextmanager
def signals_wait_for_cleanup() -> Iterator[list[int]]:
    """While a run (or sweep) saves its last files (run.json, the report), a further
    Ctrl-C, SIGTERM or SIGHUP waits for it: pressed again, Ctrl-C would cut the report in
    half with a traceback. Yields the signals that came meanwhile."""
    deferred: list[int] = []

    def wait(signum: int, frame: object) -> None:
        if not deferred:
            name = signal.Signals(signum).name
            print(f"{name}: the run is saving its last files and stops in a moment", file=sys.stderr)
        deferred.append(signum)

    if threading.current_thread() is not threading.main_thread():
        yield deferred
        return
    signals = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    previous = {signum: signal.signal(signum, wait) for signum in signals}
    try:
        yield deferred
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _write_status(run_dir: Path, status: str, resume_from: Path | None, **extra: Any) -> None:
    path = run_dir / "run.json"
    record = json.loads(path.read_text()) if path.exists() else {"history": []}
    now = datetime.now().isoformat(timespec="seconds")
    if status == "running":
        # Each session's code, since a resumed run may run changed code.
        code = extra.get("provenance", {}).get("code", {})
        record["history"].append({"started": now, "resumed_from": str(resume_from or ""), **code})
        if record.get("status") == "finished":
            # Resuming a run that finished asks for more training (more epochs, a longer
            # budget); only a run killed after training resumes to test and save alone.
            record.pop("training_ended", None)
    for key in ("error", "end_reason", "end_detail"):  # a resumed run's, until it ends again
        record.pop(key, None)
    record.update(
        status=status,
        updated=now,
        pid=os.getpid(),
        host=socket.gethostname(),
        cwd=os.getcwd(),
        command=_command(),
        **extra,
    )
    text = json.dumps(record, indent=2) + "\n"
    try:
        write_text_atomic(path, text)
    except WriteFailed:
        if status == "running":
            raise
        # A full disk has no room for a second copy, but rewriting this small file in
        # place reuses its own blocks: the babysitter must not read a failed run as a
        # crash to restart (OPS-3).
        with translate_write_errors(path):
            path.write_text(text)


def _write_report(run_dir: Path) -> None:
    """report.md and its figures. A report that fails says so in one line: the run's own
    end (its exit status, its error) stays as it was."""
    try:
        from src.report.run_files import RunFiles
        from src.report.run_report import write_report  # matplotlib loads only here

        print(f"report: {write_report(RunFiles.read(run_dir))}")
    except Exception as error:  # noqa: BLE001 - whatever went wrong, the run's result stands
        print(f"warning: no run report ({type(error).__name__}: {error})", file=sys.stderr)


def _command() -> list[str]:
    """How this process was started, as `python -m package.module` where it was."""
    main_spec = getattr(sys.modules["__main__"], "__spec__", None)
    if main_spec is not None:
        return [sys.executable, "-m", main_spec.name, *sys.argv[1:]]
    return [sys.executable, *sys.argv]
