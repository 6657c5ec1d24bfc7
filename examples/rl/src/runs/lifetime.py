"""A run's lifetime: `with start_run(cfg, resume_from) as run:` trains into run.dir. Rank zero
(DDP-1) writes config.json, console.log (OUT-2) and run.json's status (OPS-3); the run ends with
`run ended: REASON (DETAIL)`, console.log's last line and run.json's end_reason and end_detail."""

from __future__ import annotations

import atexit
import contextlib
import gc
import json
import os
import signal
import socket
import sys
import threading
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from src.cli import INPUT_ERRORS, bad_input_message, checkpoint_does_not_fit
from src.config import USED_KEY, BaseConfig, ConfigError, first_line
from src.errors import DataValidationError
from src.ops.alerts import Alerts
from src.runs.atomic import (
    WriteFailed,
    disk_full,
    translate_write_errors,
    write_bytes_atomic,
    write_text_atomic,
)
from src.runs.console import tee_console, write_log
from src.runs.directory import (
    RUN_DIR_ENV,
    claim_run,
    create_run_dir,
    record_in_run_json,
    resume_advice,
    run_dir_of,
    run_record,
    stop_file_paths,
    stop_requested,
)
from src.runs.launch import agreed, current_launch, is_rank_zero, leave_process_group, process_rank
from src.runs.provenance import changed_data, provenance
from src.wandb_utils import current_run

# Why a run ended. Training code names the first four with training_stopped() where it
# decides to stop (early stopping, its budget, a STOP file); a signal or an error is seen here.
END_REASONS = ("target", "patience", "budget", "stop_file", "signal", "error")
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)  # Ctrl-C, `kill`, a closed terminal
# How gloo and NCCL say that a collective failed because another rank of it had ended.
LOST_PEER = ("Connection closed by peer", "Connection reset by peer", "remote process", "remote worker")


@dataclass
class Run:
    dir: Path
    resume_from: Path | None  # checkpoint to continue from; None for a fresh run


@contextlib.contextmanager
def start_run(cfg: BaseConfig, resume_from: Path | None = None) -> Iterator[Run]:
    cfg.validate()  # raises ConfigError before any directory exists
    launch = current_launch()
    claimed: list[Any] = []

    def decide() -> dict[str, str]:
        """Rank zero's choice, which every process of a torchrun or srun launch writes into
        (DDP-1). One process trains a run: rank zero claims it for the launch, and where
        another process trains it (a second --resume, a babysitter's restart while it still
        runs), every rank is refused."""
        decided = _run_dir_and_checkpoint(cfg, resume_from)
        if not is_rank_zero():  # a rank Lightning started: rank zero holds the run
            return decided
        record = run_record(Path(decided["run_dir"]))
        if (lock := claim_run(Path(decided["run_dir"]))) is not None:
            claimed.append(lock)
            if decided["resume_from"] and (changed := changed_data(cfg, record)):
                decided["refused"] = changed
        else:
            pid = record.get("pid")
            decided["refused"] = (
                f"{decided['run_dir']}: another process{f' (pid {pid})' if pid else ''} is training this "
                "run; stop it (Ctrl-C, or a STOP file) before resuming it"
            )
        return decided

    decided = agreed(launch, decide, cfg.runs_dir())
    if "refused" in decided:
        raise ConfigError(decided["refused"])
    run_dir = Path(decided["run_dir"])
    resume_from = Path(decided["resume_from"]) if decided["resume_from"] else None
    console = tee_console(run_dir / "console.log") if is_rank_zero() else contextlib.nullcontext()
    # A resume that fails (flags that do not fit the checkpoint, say) gives the run its
    # config.json back, so the next --resume still works; one refused before it saved a
    # checkpoint leaves run.json and report.md as they were too: a finished run stays finished.
    config_path, record_path = run_dir / "config.json", run_dir / "run.json"
    previous_config = config_path.read_text() if resume_from and config_path.is_file() else None
    previous_record = record_path.read_bytes() if resume_from and record_path.is_file() else None
    checkpoints_before = _saved_checkpoints(run_dir)
    # A finished run resumed with nothing left to train ends as it ended before.
    earlier = run_record(run_dir) if resume_from else {}
    finished_as = {key: earlier.get(key) for key in ("end_reason", "end_detail")}
    finished_as = finished_as if earlier.get("status") == "finished" and all(finished_as.values()) else None
    _training_stops.clear()
    atexit.unregister(leave_process_group)  # a run that fails may leave a collective unfinished
    lock = claimed[0] if claimed else contextlib.nullcontext()
    with lock, _handed_down(run_dir), console as log_file, hangup_and_sigterm_unwind():
        if log_file is not None:
            # What other ranks said of their errors, in an earlier session.
            for leftover in run_dir.glob("process_*_error.json"):
                leftover.unlink(missing_ok=True)
            write_text_atomic(config_path, cfg.to_json() + "\n")
            if previous_record is not None and not earlier:  # run.json damaged: kept aside
                unreadable = record_path.with_name("run.json.unreadable")
                os.replace(record_path, unreadable)
                print(
                    f"warning: {record_path} could not be read; kept as {unreadable.name}, and this "
                    "session starts a new one"
                )
            # A Lightning part records the processes its Trainer starts too (RunInfoCallback).
            processes = {"world_size": launch.world_size, "num_nodes": launch.num_nodes}
            facts = {"part": cfg.part(), "launcher": launch.launcher, **processes}
            _write_status(run_dir, "running", resume_from, **facts, provenance=provenance(cfg))
            print(f"run directory: {run_dir}" + (f" (resuming {resume_from.name})" if resume_from else ""))
            if stopper := stop_requested(stop_file_paths(cfg.stop_file, run_dir)):
                print(f"warning: {stopper} exists: this run stops at its first check (delete it?)")
        # Python's cycle collector leaves alone what is loaded before the run (torch's, Lightning's
        # and the other libraries' objects, most of the heap): its full passes during the run, and
        # cleanup_vram()'s after it, walk only what the run makes. A pass over the whole heap takes
        # about half a second on a CPU, an RL step's tenth. Reference counting still frees the
        # frozen objects; a cycle among them stays until the process ends.
        gc.freeze()
        try:
            yield Run(run_dir, resume_from)
        except BaseException as error:
            # Lightning turns Ctrl-C into SystemExit after saving what it can. What fails after a
            # stop signal is part of stopping: under torchrun, which signals every rank, a rank
            # that stops first fails the collective the others are in.
            stopping = isinstance(error, SystemExit) or _ctrl_c(error) or bool(_stop_signals)
            status = "interrupted" if stopping else "failed"
            refused = _refused(error)
            if log_file is None:  # another rank: rank zero records the run, and what this one said
                _leave_error_for_rank_zero(run_dir, error, refused)
            first = _failed_first(run_dir, error) if log_file is not None and not stopping else None
            if first is not None:  # this rank's collective failed because that one had ended
                error, refused = AnotherProcessFailed(first), first["refused"]
                write_log(log_file, f"process {first['process']} failed first:\n{first['traceback']}")
            end = _why_it_was_cut_short(error)
            # Refused before it saved anything: whoever typed the flags reads why on the terminal;
            # no alert goes out, and no report is drawn of a run that never trained.
            refused = refused and _saved_checkpoints(run_dir) == checkpoints_before
            saved_nothing = refused and previous_record is not None
            with signals_wait_for_cleanup():
                if log_file is not None:
                    # The terminal gets the traceback when it propagates; the log gets it now.
                    write_log(log_file, traceback.format_exc())
                    try:  # on a full disk this may fail too; the error that ended the run comes first
                        if previous_config is not None:
                            write_text_atomic(config_path, previous_config)
                        if saved_nothing:
                            write_bytes_atomic(record_path, previous_record)
                        else:
                            _write_status(run_dir, status, resume_from, error=repr(error), **end)
                    except WriteFailed as failure:
                        print(f"warning: run.json not updated ({failure})", file=sys.stderr)
                    stopped_by = signal.Signals(_stop_signals[-1]).name if _stop_signals else None
                    if not refused:
                        Alerts(cfg.alerts, run_dir).run_ended(error, stopped_by)  # before W&B's run ends
                    if cfg.output.report and not refused:  # a run cut short gets one, for what it did
                        _write_report(run_dir)
                if (wandb_run := current_run()) is not None:
                    wandb_run.finish(exit_code=1)
                if _ctrl_c(error):
                    print(f"interrupted: saved files are kept; {resume_advice(run_dir)}", file=sys.stderr)
                if log_file is not None:
                    _say_why(end, saved_nothing)
            if _ctrl_c(error):
                raise SystemExit(130) from None
            if _lightning_sigterm(error) or (_stop_signals and not isinstance(error, SystemExit)):
                raise Terminated(128 + (_stop_signals[-1] if _stop_signals else signal.SIGTERM)) from None
            raise
        else:
            # Every collective of the run has completed here: the group can end as the process
            # does, while Python can still run the threads that free it.
            atexit.unregister(leave_process_group)
            atexit.register(leave_process_group)
            if log_file is not None:
                with signals_wait_for_cleanup() as deferred:
                    end = _why_training_stopped(run_dir)
                    if not isinstance(end, dict):
                        said = "the training code recorded no reason"
                        end = finished_as or {"end_reason": "unknown", "end_detail": said}
                    _write_status(run_dir, "finished", resume_from, **end)
                    if cfg.output.report:
                        _write_report(run_dir)
                    Alerts(cfg.alerts, run_dir).run_ended(None)
                    _say_why(end)
                if deferred:  # the run finished, and then its owner asked it to stop
                    raise SystemExit(128 + deferred[0])


@contextlib.contextmanager
def _handed_down(run_dir: Path) -> Iterator[None]:
    """TRAIN_RUN_DIR names the run directory for the DDP ranks Lightning starts, until the run
    ends however it ends: a sweep's next trial in this process, after one that failed as it
    started (a full disk), must not write into that trial's directory."""
    previous = os.environ.get(RUN_DIR_ENV)
    os.environ[RUN_DIR_ENV] = str(run_dir)
    try:
        yield
    finally:
        os.environ.pop(RUN_DIR_ENV, None)
        if previous is not None:
            os.environ[RUN_DIR_ENV] = previous


def _run_dir_and_checkpoint(cfg: BaseConfig, resume_from: Path | None) -> dict[str, str]:
    """The directory handed down in TRAIN_RUN_DIR, the resumed checkpoint's, or a new one."""
    if inherited := os.environ.get(RUN_DIR_ENV):
        run_dir = Path(inherited)
        run_dir.mkdir(parents=True, exist_ok=True)  # one a user names for torchrun, say
    elif resume_from is not None:
        run_dir = run_dir_of(resume_from)
    else:
        run_dir = create_run_dir(cfg.runs_dir(), cfg.name)
    return {"run_dir": str(run_dir), "resume_from": str(resume_from or "")}


class AnotherProcessFailed(RuntimeError):
    """Another process's error, which failed the collective this one was in."""

    def __init__(self, failure: dict[str, Any]) -> None:
        super().__init__(f"{failure['said']} (process {failure['process']})")


def _error_file(run_dir: Path, rank: int) -> Path:
    return run_dir / f"process_{rank}_error.json"


def _refused(error: BaseException) -> bool:
    """Refused (its flags, its data), not failed in training: the run is left as it was."""
    return isinstance(error, ConfigError | DataValidationError) or checkpoint_does_not_fit(error)


def _leave_error_for_rank_zero(run_dir: Path, error: BaseException, refused: bool) -> None:
    """This rank's error, where rank zero finds it: when one rank fails alone, the others
    see only that their collective with it failed (gloo's "Connection closed by peer")."""
    rank = process_rank()
    said = _why_it_was_cut_short(error)["end_detail"]
    failure = {"process": rank, "said": said, "refused": refused, "traceback": traceback.format_exc()}
    with contextlib.suppress(OSError, WriteFailed):  # the error itself is on this rank's terminal
        write_text_atomic(_error_file(run_dir, rank), json.dumps(failure))


def _failed_first(run_dir: Path, error: BaseException) -> dict[str, Any] | None:
    """The error of another rank that ended first, when rank zero's own error says only that
    a collective with it failed; None otherwise."""
    text = str(error)
    if not (type(error).__name__.startswith("Dist") or any(sign in text for sign in LOST_PEER)):
        return None
    for path in sorted(run_dir.glob("process_*_error.json")):
        with contextlib.suppress(OSError, ValueError):
            failure = json.loads(path.read_text())
            if not any(sign in failure["said"] for sign in LOST_PEER):  # not lost on a peer too
                return failure
    return None


def _saved_checkpoints(run_dir: Path) -> dict[str, tuple[int, int]]:
    """Each checkpoint's size and modification time, by name: what a session has saved
    (SLURM's requeue saves hpc_ckpt_N.ckpt beside checkpoints/)."""
    saved = {}
    for path in [*(run_dir / "checkpoints").glob("*"), *run_dir.glob("hpc_ckpt_*.ckpt")]:
        with contextlib.suppress(OSError):  # one a rotation removed meanwhile
            stat = path.stat()
            saved[str(path)] = (stat.st_size, stat.st_mtime_ns)
    return saved


def _lightning_sigterm(error: BaseException) -> bool:
    """Whether Lightning ended fit or test at SIGTERM (its SIGTERMException). Looked up, not
    imported: a tree part never loads Lightning, and need not wait seconds for it here."""
    exceptions = sys.modules.get("lightning.pytorch.utilities.exceptions")
    return exceptions is not None and isinstance(error, exceptions.SIGTERMException)


def _ctrl_c(error: BaseException | None) -> bool:
    """Ctrl-C, as Python raises it, as Lightning ends a fit after its own cleanup (exit(1)
    while handling it), or as a library garbles it while unwinding (a failing __exit__)."""
    while error is not None:
        if isinstance(error, KeyboardInterrupt):
            return True
        error = error.__context__
    return False


# Why this session's training stopped, as the code that stopped it said (training_stopped).
_training_stops: list[dict[str, str]] = []


def training_stopped(reason: str, detail: str) -> None:
    """Record why training stops: `reason` one of END_REASONS, `detail` what reached what.
    The first call of a session counts (a STOP file and the budget may both come due)."""
    _training_stops.append({"end_reason": reason, "end_detail": detail})


def wall_clock_spent(hours: float, where: str) -> tuple[str, str]:
    """training_stopped()'s words for a run whose max_wall_clock_hours ran out (CFG-4)."""
    return "budget", f"max_wall_clock_hours {hours:g} spent, in {where}"


def ended_by_the_wall_clock(record: dict[str, Any]) -> bool:
    """Whether run.json says the wall clock ended training, not its epochs or rounds."""
    said = str(record.get("end_detail") or "")
    return record.get("end_reason") == "budget" and said.startswith("max_wall_clock_hours ")


def training_ended(run_dir: Path) -> bool:
    """Whether an earlier session of this run finished training (RES-1): resuming it
    then only tests and saves, as a run killed during its test or final save needs."""
    return bool(run_record(run_dir).get("training_ended"))


def _why_training_stopped(run_dir: Path) -> dict[str, str] | bool | None:
    """This session's first reason, else the one of the session that trained."""
    return _training_stops[0] if _training_stops else run_record(run_dir).get("training_ended")


def mark_training_ended(run_dir: Path) -> None:
    """Record in run.json why training stopped, for a session that resumes only to test and save."""
    record_in_run_json(run_dir, training_ended=_why_training_stopped(run_dir) or True)


def _why_it_was_cut_short(error: BaseException) -> dict[str, str]:
    if _ctrl_c(error):
        return {"end_reason": "signal", "end_detail": "SIGINT (Ctrl-C)"}
    if _stop_signals:
        return {"end_reason": "signal", "end_detail": signal.Signals(_stop_signals[-1]).name}
    if isinstance(error, AnotherProcessFailed):
        return {"end_reason": "error", "end_detail": str(error)}
    said, kind = first_line(error), type(error).__name__
    if isinstance(error, INPUT_ERRORS) and str(error).strip():  # not cut as another library's
        said = str(error).strip().splitlines()[0]
    elif checkpoint_does_not_fit(error) or disk_full(error):  # as the terminal says it
        said = bad_input_message(error) or said
    return {"end_reason": "error", "end_detail": said if said == kind else f"{kind}: {said}"}


def _say_why(end: dict[str, str], saved_nothing: bool = False) -> None:
    said = f"{end['end_reason']} ({end['end_detail']})"
    if saved_nothing:  # the run's own end, in run.json, stands
        print(f"resume ended: {said}; it saved no checkpoint: the run is as it was", flush=True)
    else:
        print(f"run ended: {said}", flush=True)


def record_used_settings(run_dir: Path, **used: Any) -> None:
    """Add to config.json what the run actually used (the precision "auto" became, the
    batch size BatchSizeFinder found), beside the fields that say what was asked."""
    path = run_dir / "config.json"
    config = json.loads(path.read_text())
    config[USED_KEY] = {**config.get(USED_KEY, {}), **used}
    write_text_atomic(path, json.dumps(config, indent=2, sort_keys=True) + "\n")


class Terminated(SystemExit):
    """SIGTERM (`kill PID`, a scheduler's preemption) or SIGHUP (a closed terminal)."""


# The SIGTERMs and SIGHUPs since the run (or sweep) began: Lightning reports either as a
# SIGTERMException, and the exit status names the last one.
_stop_signals: list[int] = []


def hangup_and_sigterm_unwind() -> contextlib.AbstractContextManager[None]:
    """SIGTERM and SIGHUP unwind the run (or sweep) as Ctrl-C does instead of ending the
    process on the spot: run.json says "interrupted" (`--resume auto` continues it), W&B
    and console.log are closed, and the exit status is 128 + the signal's number."""

    def terminate(signum: int, frame: object) -> None:
        _stop_signals.append(signum)
        # Inside fit and test, Lightning's own SIGTERM handler stops at the end of the batch:
        # raised here, mid-step, it could leave Lightning's loops half-updated.
        if signal.getsignal(signal.SIGTERM) is terminate:
            raise Terminated(128 + signum)

    def hang_up(signum: int, frame: object) -> None:
        _stop_signals.append(signum)  # then handled as SIGTERM, by whoever handles it now
        if callable(handler := signal.getsignal(signal.SIGTERM)):
            handler(signum, frame)

    if threading.current_thread() is threading.main_thread():
        _stop_signals.clear()
    return _signal_handlers({signal.SIGTERM: terminate, signal.SIGHUP: hang_up})


@contextlib.contextmanager
def signals_wait_for_cleanup() -> Iterator[list[int]]:
    """While a run (or sweep) saves its last files, Ctrl-C, SIGTERM and SIGHUP wait: pressed
    again, Ctrl-C would cut the report in half. Yields the signals that came meanwhile."""
    deferred: list[int] = []

    def wait(signum: int, frame: object) -> None:
        if not deferred:
            name = signal.Signals(signum).name
            print(f"{name}: the run is saving its last files and stops in a moment", file=sys.stderr)
        deferred.append(signum)

    with _signal_handlers(dict.fromkeys(STOP_SIGNALS, wait)):
        yield deferred
    # Registered again after each run: the last registered runs first, before the libraries' own.
    atexit.unregister(_signals_leave_at_once)
    atexit.register(_signals_leave_at_once)


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """Ctrl-C, SIGTERM and SIGHUP wait for the block's end, then act as they would have: for a
    step that a signal must not cut in half (processes starting)."""
    held: list[int] = []
    with _signal_handlers(dict.fromkeys(STOP_SIGNALS, lambda signum, frame: held.append(signum))):
        yield
    for signum in dict.fromkeys(held):
        signal.raise_signal(signum)


def _signals_leave_at_once() -> None:
    """As the process exits, everything saved: a signal ends it at once, where the libraries'
    exit handlers would print a KeyboardInterrupt traceback."""
    for signum in STOP_SIGNALS:
        signal.signal(signum, lambda number, frame: os._exit(128 + number))


@contextlib.contextmanager
def _signal_handlers(handlers: dict[int, Callable[[int, Any], None]]) -> Iterator[None]:
    """`handlers` for the block, where they can be set: signals reach the main thread only."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {signum: signal.signal(signum, handler) for signum, handler in handlers.items()}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            if signal.getsignal(signum) is handlers[signum]:
                signal.signal(signum, handler)


def this_command() -> list[str]:
    """How this process was started, `python -m package.module ...` included."""
    return [sys.executable, *sys.orig_argv[1:]]


def _write_status(run_dir: Path, status: str, resume_from: Path | None, **extra: Any) -> None:
    path, record = run_dir / "run.json", run_record(run_dir)
    record.setdefault("history", [])
    now = datetime.now().isoformat(timespec="seconds")
    if status == "running":
        # Each session's code, since a resumed run may run changed code.
        code = extra["provenance"]["code"]
        session = {"started": now, "resumed_from": str(resume_from or ""), "command": this_command()}
        record["history"].append({**session, **code})
        if record.get("status") == "finished":
            # Resuming a run that finished asks for more training; only a run killed after
            # training resumes to test and save alone.
            record.pop("training_ended", None)
    for key in ("error", "end_reason", "end_detail"):  # a resumed run's, until it ends again
        record.pop(key, None)
    record.update(status=status, updated=now, pid=os.getpid(), host=socket.gethostname(), cwd=os.getcwd())
    record.update(command=this_command(), **extra)  # the latest session's: to start it again
    text = json.dumps(record, indent=2) + "\n"
    try:
        write_text_atomic(path, text)
    except WriteFailed:
        if status == "running":
            raise
        # A full disk has no room for a second copy, but this small file rewritten in place
        # reuses its own blocks: the babysitter must not restart a failed run (OPS-3).
        with translate_write_errors(path):
            path.write_text(text)


def _write_report(run_dir: Path) -> None:
    """report.md and its figures; one that fails says so in a line and the run's end stands."""
    try:
        from src.report.run_files import RunFiles
        from src.report.run_report import write_report  # matplotlib loads only here

        print(f"report: {write_report(RunFiles.read(run_dir))}")
    except Exception as error:  # noqa: BLE001 - whatever went wrong, the run's result stands
        print(f"warning: no run report ({type(error).__name__}: {error})", file=sys.stderr)
