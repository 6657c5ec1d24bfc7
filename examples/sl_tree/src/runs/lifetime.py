"""One training run's lifetime: its directory, snapshots and console log.

    with start_run(cfg, resume_from) as run:
        ...train, writing into run.dir...

On rank zero only (DDP-1) it writes config.json (OUT-2), tees the console into
console.log (OUT-2) and keeps run.json up to date: pid, command and status,
which is what the babysitter (OPS-3) reads to tell a crash from a finished run.
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

import wandb
from lightning.pytorch.utilities import rank_zero_only

from src.config import BaseConfig
from src.runs.console import tee_console
from src.runs.directory import (
    RUN_DIR_ENV,
    create_run_dir,
    inherited_run_dir,
    run_dir_of,
    stop_file_paths,
    stop_requested,
)


@dataclass
class Run:
    dir: Path
    resume_from: Path | None  # checkpoint to continue from; None for a fresh run


@contextlib.contextmanager
def start_run(cfg: BaseConfig, resume_from: Path | None = None) -> Iterator[Run]:
    cfg.validate()  # raises ConfigError before any directory exists
    run_dir = (
        inherited_run_dir()
        or (run_dir_of(resume_from) if resume_from else None)
        or create_run_dir(Path(cfg.output.base_dir), cfg.name)
    )
    is_writer = rank_zero_only.rank == 0
    previous_env = os.environ.get(RUN_DIR_ENV)
    os.environ[RUN_DIR_ENV] = str(run_dir)  # for the DDP ranks Lightning starts
    console = tee_console(run_dir / "console.log") if is_writer else contextlib.nullcontext()
    # A resume that fails (flags that do not fit the checkpoint, say) gives the run its
    # config.json back, so the next --resume still works.
    config_path = run_dir / "config.json"
    previous_config = config_path.read_text() if resume_from and config_path.is_file() else None
    with console as log_file, _sigterm_unwinds():
        if log_file is not None:
            config_path.write_text(cfg.to_json() + "\n")
            _write_status(run_dir, "running", resume_from)
            print(f"run directory: {run_dir}" + (f" (resuming {resume_from.name})" if resume_from else ""))
            if stopper := stop_requested(stop_file_paths(cfg.stop_file, run_dir)):
                print(f"warning: {stopper} exists: this run will stop after its first epoch (delete it?)")
        try:
            yield Run(run_dir, resume_from)
        except BaseException as error:
            # Lightning turns Ctrl-C into SystemExit after saving what it can.
            status = "interrupted" if isinstance(error, (KeyboardInterrupt, SystemExit)) else "failed"
            if log_file is not None:
                # The terminal gets the traceback when it propagates; the log gets it now.
                log_file.write(traceback.format_exc())
                if previous_config is not None:
                    config_path.write_text(previous_config)
                _write_status(run_dir, status, resume_from, error=repr(error))
            if wandb.run is not None:
                wandb.finish(exit_code=1)
            raise
        else:
            if log_file is not None:
                _write_status(run_dir, "finished", resume_from)
        finally:
            if previous_env is None:
                os.environ.pop(RUN_DIR_ENV, None)
            else:
                os.environ[RUN_DIR_ENV] = previous_env


class Terminated(SystemExit):
    """The process got SIGTERM (`kill PID`, a scheduler preempting the job)."""


@contextlib.contextmanager
def _sigterm_unwinds() -> Iterator[None]:
    """SIGTERM unwinds the run like Ctrl-C instead of ending the process on the spot:
    run.json says "interrupted" (the babysitter leaves it alone, `--resume auto`
    continues it), W&B and console.log are closed, and the exit status is 143."""

    def terminate(signum: int, frame: object) -> None:
        raise Terminated(128 + signum)

    if threading.current_thread() is not threading.main_thread():  # signals reach the main thread only
        yield
        return
    previous = signal.signal(signal.SIGTERM, terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _write_status(run_dir: Path, status: str, resume_from: Path | None, **extra: Any) -> None:
    path = run_dir / "run.json"
    record = json.loads(path.read_text()) if path.exists() else {"history": []}
    now = datetime.now().isoformat(timespec="seconds")
    if status == "running":
        record["history"].append({"started": now, "resumed_from": str(resume_from or "")})
    record.pop("error", None)
    record.update(
        status=status,
        updated=now,
        pid=os.getpid(),
        host=socket.gethostname(),
        cwd=os.getcwd(),
        command=_command(),
        **extra,
    )
    path.write_text(json.dumps(record, indent=2) + "\n")


def _command() -> list[str]:
    """How this process was started, as `python -m package.module` where it was."""
    main_spec = getattr(sys.modules["__main__"], "__spec__", None)
    if main_spec is not None:
        return [sys.executable, "-m", main_spec.name, *sys.argv[1:]]
    return [sys.executable, *sys.argv]
