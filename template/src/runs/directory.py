"""Run directories, {output.base_dir}/{name}_{YYYYMMDD_HHMMSS}/ (OUT-1, OUT-2), the STOP
files that end a run (CB-4), and the checkpoint a run resumes from (RES-1)."""

from __future__ import annotations

import contextlib
import fcntl
import importlib.util
import json
import os
import re
import socket
import time
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import IO, Any

import psutil

from src.runs.atomic import WriteFailed, translate_write_errors, write_text_atomic
from src.runs.checkpoint_checks import checkpoint_problem
from src.runs.launch import is_rank_zero

STAMP_FORMAT = "%Y%m%d_%H%M%S"
# Lightning starts DDP ranks as copies of this command; they inherit the run
# directory through this variable instead of stamping their own (DDP-1).
RUN_DIR_ENV = "TRAIN_RUN_DIR"
CHECKPOINTS = ("checkpoints/last.ckpt", "checkpoints/last.ubj")  # Lightning, XGBoost
CHECKPOINT_SUFFIXES = (".ckpt", ".ubj")  # Lightning, XGBoost
# run.json's status of a run whose process died (kill -9, a crash, a lost machine) before
# it wrote a checkpoint: nothing can resume it, and its folder can go.
NEVER_CHECKPOINTED = "never_checkpointed"
# Held by the process that trains a run, for as long as it does: see claim_run.
TRAINING_LOCK = ".training.lock"


def create_run_dir(base_dir: Path, name: str) -> Path:
    """A new, empty run directory; a second run in the same second gets a suffix."""
    stamp = datetime.now().strftime(STAMP_FORMAT)
    candidate, attempt = base_dir / f"{name}_{stamp}", 1
    while True:
        try:
            candidate.mkdir(parents=True)
            return candidate
        except FileExistsError:
            attempt += 1
            candidate = base_dir / f"{name}_{stamp}_{attempt}"
        except OSError as error:  # a folder no one may write in (/proc), which a check cannot tell
            raise WriteFailed(f"cannot make {candidate}: {error.strerror or error}") from error


def newest_first(base_dir: Path, name: str) -> list[Path]:
    """The folders create_run_dir made for `name` in base_dir, the newest first: by their stamp,
    then their number in its second (_10 after _9)."""
    pattern = re.compile(re.escape(name) + r"_(\d{8}_\d{6})(?:_(\d+))?")
    matches = [(pattern.fullmatch(path.name), path) for path in base_dir.glob(f"{name}_*")]
    found = sorted(((m[1], int(m[2] or 1), path) for m, path in matches if m), reverse=True)
    return [path for *_, path in found]


def find_latest_run(base_dir: Path, name: str, part: str) -> Path | None:
    """The newest unfinished run of config `name` of this part that has a checkpoint and that
    no process trains now."""
    for path in newest_first(base_dir, name):
        if not (record := run_record(path)) and (path / "run.json").is_file():
            print(f"warning: passing over {path}: its run.json cannot be read (--resume it by its directory)")
            continue
        # Rank zero's view: the other ranks of a launch resume the run rank zero already holds.
        unfinished = record.get("status") != "finished" and not (is_rank_zero() and being_trained(path))
        if run_part(record) in ("", part) and resume_candidates(path) and unfinished:
            return path
    return None


def claim_run(run_dir: Path) -> IO[str] | None:
    """The run's training lock, held while the file returned stays open; None where another
    process holds it, training the run. The kernel releases it however that process ends,
    kill -9 included. A process that looks (being_trained) holds it for an instant: wait that out."""
    with translate_write_errors(run_dir / TRAINING_LOCK):  # a read-only folder: one line
        file = open(run_dir / TRAINING_LOCK, "a")  # noqa: SIM115 - held open while the run trains
    for _ in range(20):
        try:
            fcntl.flock(file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            time.sleep(0.05)
            continue
        # A forked child (a data-loader worker) would hold the lock on past a kill -9 of this
        # process; its copy closes as it starts, which leaves this process's lock held.
        os.register_at_fork(after_in_child=file.close)
        return file
    file.close()
    return None


def being_trained(run_dir: Path) -> bool:
    """Whether a process trains the run now (it holds claim_run's lock)."""
    try:
        with open(run_dir / TRAINING_LOCK) as file:
            fcntl.flock(file, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:  # no lock file: a run of an earlier release, or one not started yet
        return False
    return False


def run_part(record: dict) -> str:
    """The part a run belongs to, as its run.json records it; "" without one."""
    return str(record.get("part") or "")


def another_parts_run(run_dir: Path, part: str, command: str) -> str | None:
    """What to run instead where run.json names a part other than `part`, whose model this
    part's `command` (predict, evaluate) cannot load; None for a run of this part or without one."""
    if (other := run_part(run_record(run_dir))) in ("", part):
        return None
    # A neural or tree part predicts, an RL part evaluates.
    found = [
        name for name in dict.fromkeys((command, "predict", "evaluate")) if _module_exists(f"{other}.{name}")
    ]
    return f"{run_dir} is a run of {other}" + (f"; use python -m {other}.{found[0]}" if found else "")


def _module_exists(name: str) -> bool:
    with contextlib.suppress(ImportError, ValueError):
        return importlib.util.find_spec(name) is not None
    return False


def refuse_run_file(output: Path, run_dir: Path, what: str) -> None:
    """An --output that names a file of the run already, which `what` would replace, is refused."""
    if output.resolve().is_relative_to(run_dir.resolve()) and output.exists():
        raise WriteFailed(
            f"--output {output}: is a file of the run {run_dir} already, which the {what} would replace: "
            "give a new file"
        )


def marked_if_never_checkpointed(run_dir: Path) -> bool:
    """Whether the run died before its first checkpoint, marking it so in run.json, where it
    would stay "running" for ever."""
    record = run_record(run_dir)
    if record.get("status") == NEVER_CHECKPOINTED:
        return True
    if record.get("status") != "running" or resume_candidates(run_dir) or process_alive(run_dir, record):
        return False
    record_in_run_json(run_dir, status=NEVER_CHECKPOINTED)
    return True


def process_alive(run_dir: Path, record: dict) -> bool:
    """Whether the run's process still runs, as far as this machine can tell: it holds the
    run's training lock, or, for a run without one (an earlier release's), its pid names a
    process as old as the run. One on another machine is taken to run."""
    if record.get("host") != socket.gethostname():
        return True
    if (run_dir / TRAINING_LOCK).is_file():  # a pid may name another process by now; a lock cannot
        return being_trained(run_dir)
    return not _process_gone(record)


def status_now(run_dir: Path, record: dict) -> str:
    """run.json's status, or "killed" where it says running but the run's process is gone
    (kill -9, a crash, a lost machine: nothing was left to record the end)."""
    status = str(record.get("status", "unknown"))
    return "killed" if status == "running" and not process_alive(run_dir, record) else status


def _process_gone(record: dict) -> bool:
    """Whether the run's process no longer runs; a pid that names a younger process is
    another process's."""
    try:
        process = psutil.Process(int(record["pid"]))
        started = datetime.fromisoformat(record["history"][-1]["started"]).timestamp()
        return process.status() == psutil.STATUS_ZOMBIE or process.create_time() > started + 1
    except psutil.NoSuchProcess:
        return True
    except (psutil.Error, KeyError, IndexError, TypeError, ValueError):
        return False


def resume_advice(run_dir: Path) -> str:
    """What to do next about a run stopped on purpose: resume it, if it saved something to resume."""
    if (run_dir.parent / "sweep.json").is_file():  # a sweep's trial (src/sweep/runner.py's SWEEP_FILE)
        return f"its sweep continues it: give the sweep command --resume {run_dir.parent}"
    if resume_candidates(run_dir):
        return f"continue with --resume {run_dir}"
    return "it saved no checkpoint yet, so there is nothing to resume: start it again"


def resume_candidates(run_dir: Path) -> list[Path]:
    """The checkpoints a run can continue from, most progress first: last and the ones
    Lightning saves when SLURM signals a job before requeueing it (hpc_ckpt_N.ckpt),
    newest first, then any periodic ones, then best."""
    folder = run_dir / "checkpoints"
    files = [*(folder.iterdir() if folder.is_dir() else ()), *run_dir.glob("hpc_ckpt_*.ckpt")]
    files = [path for path in files if path.suffix in CHECKPOINT_SUFFIXES and not path.name.startswith(".")]

    def rank(path: Path) -> int:
        if str(path.relative_to(run_dir)) in CHECKPOINTS or path.stem.startswith("hpc_ckpt_"):
            return 0
        return 2 if path.stem == "best" else 1

    def age(path: Path) -> float:  # a link to a missing file comes last of its rank
        try:
            return -path.stat().st_mtime
        except OSError:
            return 0.0

    return sorted(files, key=lambda path: (rank(path), age(path)))


def intact_checkpoint(run_dir: Path) -> tuple[Path | None, list[str]]:
    """The first intact resume candidate, and what is wrong with each one skipped before it."""
    skipped = []
    for path in resume_candidates(run_dir):
        if (problem := checkpoint_problem(path)) is None:
            return path, skipped
        skipped.append(f"{path.relative_to(run_dir)} is {problem}")
    return None, skipped


def latest_checkpoint(run_dir: Path) -> Path | None:
    """The checkpoint of most progress, which a resume tries first: last.ckpt or last.ubj, else
    a periodic one, else best.ckpt (a run killed between writing best and last has only it)."""
    return next(iter(resume_candidates(run_dir)), None)


def run_dir_of(checkpoint: Path) -> Path:
    return checkpoint.parent.parent if checkpoint.parent.name == "checkpoints" else checkpoint.parent


def run_record(run_dir: Path) -> dict:
    """run.json; {} when it is missing or unreadable."""
    try:
        record = json.loads((run_dir / "run.json").read_text())
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def record_in_run_json(run_dir: Path, **facts: Any) -> None:
    """Add facts to run.json (that training ended, the processes it ran on)."""
    path = run_dir / "run.json"
    write_text_atomic(path, json.dumps({**json.loads(path.read_text()), **facts}, indent=2) + "\n")


def stop_file_paths(stop_file: str, run_dir: Path) -> list[Path]:
    """The shared STOP file (stops every run started here) and this run's own."""
    return [Path(stop_file), run_dir / "STOP"]


def stop_requested(paths: Sequence[Path]) -> Path | None:
    return next((path for path in paths if path.exists()), None)
