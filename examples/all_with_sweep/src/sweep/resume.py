"""Finding the sweep `--resume` or `--study` names, and holding its lock while a worker
runs it (RES-1)."""

from __future__ import annotations

import fcntl
import re
from pathlib import Path
from typing import IO

from src.cli import exit_on_bad_input
from src.config import BaseConfig, ConfigError
from src.sweep.records import CONFIG_FILE, LOCK_FILE, SWEEP_FILE, SweepState


def find_sweep(base: BaseConfig, resume: str) -> tuple[Path, SweepState, IO[str]] | None:
    """The sweep --resume names, its state and its lock; None when `auto` finds none.
    Another engine or config than this command's is refused: its trials would not fit."""
    if resume == "auto":
        sweeps = base.runs_dir() / "sweeps"
        pattern = re.compile(re.escape(base.name) + r"_(\d{8}_\d{6})_\d+")
        candidates = sorted(
            (match[1], path.stat().st_mtime, path)
            for path in sweeps.glob(f"{base.name}_*")
            if (match := pattern.fullmatch(path.name)) and (path / SWEEP_FILE).is_file()
        )
        for *_, path in reversed(candidates):  # the newest first
            state = read_state(path)
            if state is None or state.engine != "local" or state.status == "finished":
                continue
            if (lock := try_lock(path)) is not None:  # one another process runs is skipped
                _check_same_sweep(path, state, base, resume)
                return path, state, lock
        print(f"--resume auto: no unfinished local '{base.name}' sweep in {sweeps}/, starting a new one")
        return None
    path = Path(resume)
    state = read_state(path)
    if state is None:
        raise ConfigError(f"--resume {resume}: not a sweep directory (no readable {SWEEP_FILE})")
    _check_same_sweep(path, state, base, resume)
    lock = try_lock(path)
    if lock is None:
        raise ConfigError(
            f"--resume {resume}: another process is running that sweep (pid {state.pid}); "
            f"to run it on more processes, start each with --study {resume}"
        )
    return path, state, lock


def join_sweep(base: BaseConfig, study: str) -> tuple[Path, SweepState, IO[str]]:
    """The local sweep `--study` names, and this worker's share of its lock."""
    path = Path(study)
    state = read_state(path)
    if state is None:
        raise ConfigError(f"--study {study}: not a sweep directory (no readable {SWEEP_FILE})")
    _check_same_sweep(path, state, base, study, flag="--study")
    file = open(path / LOCK_FILE, "a")  # noqa: SIM115 - held open while the sweep runs
    fcntl.flock(file, fcntl.LOCK_SH)  # an exclusive holder only looks, for a moment
    return path, state, file


def _check_same_sweep(
    path: Path, state: SweepState, base: BaseConfig, resume: str, flag: str = "--resume"
) -> None:
    if state.engine != "local":
        raise ConfigError(
            f"{flag} {resume}: that is a {state.engine} sweep; a W&B sweep goes on with "
            f"--engine wandb --sweep-id {state.wandb_sweep_id or 'ID'}"
        )
    if (state.name, state.config_class) != (base.name, type(base).__name__):
        raise ConfigError(
            f"{flag} {resume}: that sweep is of config '{state.name}', this command's is "
            f"'{base.name}' (give --config {state.name})"
        )


def read_state(sweep_dir: Path) -> SweepState | None:
    try:
        return SweepState.read(sweep_dir)
    except (OSError, ValueError, TypeError, KeyError):
        return None


def saved_config(base: BaseConfig, sweep_dir: Path, resume: str) -> BaseConfig:
    with exit_on_bad_input():
        try:
            return type(base).from_json((sweep_dir / CONFIG_FILE).read_text())
        except (OSError, ValueError, TypeError) as error:
            raise ConfigError(f"--resume {resume}: its {CONFIG_FILE} cannot be read: {error}") from None


def try_lock(sweep_dir: Path) -> IO[str] | None:
    """A share of the sweep's lock for this process's lifetime, taken only where no other
    process holds one: None while another worker runs the sweep. Every worker holds a
    share (--study joins regardless); the kernel releases it however the process ends,
    kill -9 included."""
    file = open(sweep_dir / LOCK_FILE, "a")  # noqa: SIM115 - held open while the sweep runs
    try:
        fcntl.flock(file, fcntl.LOCK_EX | fcntl.LOCK_NB)  # alone?
    except BlockingIOError:
        file.close()
        return None
    fcntl.flock(file, fcntl.LOCK_SH)  # then one worker among any that join
    return file
