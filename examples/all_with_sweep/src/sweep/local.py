"""The local engine: Optuna samples the search space, with no W&B server. Its study lives
in storage several processes share (the sweep folder's journal file, or a database), so
any number of workers, on one GPU each or on several machines, split one sweep's trials."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import optuna
import psutil
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend, JournalFileSymlinkLock
from optuna.trial import FrozenTrial, TrialState

from src.config import ConfigError, first_line
from src.sweep.runner import JOURNAL_FILE, TRIALS_FILE, WORKER, Sweep, Trial

# The study's user attributes of a trial: its number in the sweep (runs are named after
# it), the worker that runs it, and whether it ended through this engine. A trial of a
# worker that died stays RUNNING; another worker marks it failed and queues it again
# with its number and values, to be continued from its checkpoint (RES-1).
NUMBER, RESUME, ENDED = "number", "resume", "ended"
# Held while a worker hands out trial numbers or queues a trial again: a number is free
# or taken by looking at every trial, which no two workers may do at once.
NUMBERS_LOCK = ".numbers.lock"


def run_local(sweep: Sweep, trials: int, seed: int) -> None:
    """Ask the study for trials until it holds `trials` in all, every worker's and every
    attempt's included."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    distributions = sweep.spec.distributions()
    study = open_study(sweep)
    with numbering(sweep):
        # RES-1: the study learns the trials of trials.jsonl it lacks: a journal moved aside
        # as damaged is rebuilt from them.
        in_study = {t.user_attrs.get(NUMBER) for t in study.get_trials(deepcopy=False)}
        for done in sweep.recorded_trials():
            if done.number not in in_study:
                _add_ended(study, done, distributions)
    while True:
        with numbering(sweep):
            if sweep.hours_left() <= 0:
                print("sweep: --max-hours reached, no new trial")
                return
            asked = _next_trial(study, sweep, distributions, trials, seed)
        if asked is None:
            return
        number = asked.user_attrs[NUMBER]
        fixed = {name: spec["value"] for name, spec in sweep.spec.space.items() if "value" in spec}
        params = fixed | asked.params
        try:
            trial = sweep.run_trial(params, number, resume=bool(asked.user_attrs.get(RESUME)))
        except BaseException:  # Ctrl-C, SIGTERM, a record that could not be written
            recorded = next((t for t in sweep.recorded_trials() if t.number == number), None)
            if recorded is not None:  # it ended and is in trials.jsonl: never run again
                _end(study, asked, recorded)
            else:  # back to the queue, checkpoints kept
                with numbering(sweep):
                    _queue_again(study, asked.number, asked.params, number)
            raise
        _end(study, asked, trial)


@contextlib.contextmanager
def numbering(sweep: Sweep) -> Iterator[None]:
    """The sweep's lock for handing out trial numbers, across processes (the kernel
    releases it however its holder ends, kill -9 included)."""
    with open(sweep.dir / NUMBERS_LOCK, "a") as file:
        fcntl.flock(file, fcntl.LOCK_EX)
        yield  # closing the file releases the lock


def _next_trial(
    study: optuna.Study, sweep: Sweep, distributions: dict[str, Any], trials: int, seed: int
) -> optuna.Trial | None:
    """The next trial this worker runs, numbered; None once every number of the sweep
    is taken. Called under `numbering`."""
    recorded = sweep.recorded_trials()
    requeue_dead_workers_trials(study, recorded)
    existing = study.get_trials(deepcopy=False)
    free = sorted(set(range(trials)) - taken_numbers(existing, recorded))
    if not free and not any(t.state == TrialState.WAITING for t in existing):
        return None
    # Seeded afresh from the sweep's seed and the number the study gives the trial: a
    # sampler seeded once per process would draw a killed trial's values again after a
    # resume, or in a second worker; the same seed still samples the same trials (RES-1).
    trial_seed = (seed * 1_000_003 + len(existing)) % 2**32
    random = sweep.spec.method == "random"
    study.sampler = (optuna.samplers.RandomSampler if random else optuna.samplers.TPESampler)(seed=trial_seed)
    asked = study.ask(distributions)  # a trial queued again first, else new values
    asked.set_user_attr("worker", WORKER)
    if NUMBER not in asked.user_attrs:
        if not free:  # the queued trial was taken first by a process outside the lock
            study.tell(asked, state=TrialState.FAIL)
            return None
        asked.set_user_attr(NUMBER, free[0])
    return asked


def taken_numbers(trials: Sequence[FrozenTrial], recorded: Sequence[Trial]) -> set[int]:
    """The sweep's trial numbers in use: a trial under way or queued again, one that
    ended through this engine, one in trials.jsonl. Not the number of a dead worker's
    trial marked failed: its copy queued again holds it."""
    held = {
        t.user_attrs[NUMBER]
        for t in trials
        if NUMBER in t.user_attrs
        and (t.state in (TrialState.RUNNING, TrialState.WAITING) or t.user_attrs.get(ENDED))
    }
    return held | {trial.number for trial in recorded}


def open_study(sweep: Sweep) -> optuna.Study:
    """The sweep's study, created on first use, in sweep.json's database or the folder's
    journal file (which workers on several machines share through a shared filesystem)."""
    url = sweep.state.storage if sweep.state else ""
    if url:
        return study_in(url, sweep.dir.name, sweep.spec.goal)
    storage = JournalStorage(JournalFileBackend(str(sweep.dir / JOURNAL_FILE)))
    return optuna.create_study(
        storage=storage, study_name=sweep.dir.name, direction=sweep.spec.goal, load_if_exists=True
    )


def study_in(url: str, name: str, goal: str) -> optuna.Study:
    """The study `name` in the database at `url`, created on first use; ConfigError where
    Optuna cannot use the database (out of reach, damaged)."""
    storage = open_storage(url)
    try:
        return optuna.create_study(storage=storage, study_name=name, direction=goal, load_if_exists=True)
    except Exception as error:  # noqa: BLE001 - a database that cannot be reached or used, say
        raise ConfigError(f"--storage {url}: Optuna cannot use it: {first_line(error)}") from None


def open_storage(url: str) -> optuna.storages.BaseStorage:
    """The database at `url` as Optuna's storage; ConfigError where Optuna cannot use it."""
    try:
        return optuna.storages.get_storage(url)
    except Exception as error:  # noqa: BLE001 - no driver for its scheme, a database out of reach
        raise ConfigError(f"--storage {url}: Optuna cannot use it: {first_line(error)}") from None


def repair_journal(sweep_dir: Path) -> None:
    """Make a resumed or joined sweep's journal file readable again, or refuse it.

    Optuna's reader skips a last line without its newline (a process killed while
    appending it), but its next append goes on that line and makes the journal
    unreadable: such a line is dropped, under the lock Optuna's appends take, so it is
    never a line another worker is writing. Damage anywhere else is a ConfigError that
    changes nothing."""
    path = sweep_dir / JOURNAL_FILE
    if not path.is_file():
        return
    lock = JournalFileSymlinkLock(str(path))
    lock.acquire()
    try:
        data = path.read_bytes()
        body, _, tail = data.rpartition(b"\n")
        if tail:
            os.truncate(path, len(data) - len(tail))
            cut = f"dropped its last line, cut short ({len(tail)} bytes): the study goes on without it"
            print(f"warning: {path}: {cut}", file=sys.stderr)
        for index, line in enumerate(body.split(b"\n") if body else [], start=1):
            if not _is_record(line):
                raise ConfigError(_damaged(path, f"line {index} is not an Optuna journal record"))
        try:  # Optuna replays every record, as opening the study will
            JournalStorage(JournalFileBackend(str(path))).get_all_studies()
        except Exception as error:  # noqa: BLE001 - whatever a bad record makes Optuna raise
            raise ConfigError(_damaged(path, f"Optuna cannot replay it ({first_line(error)})")) from None
    finally:
        lock.release()


def _is_record(line: bytes) -> bool:
    try:
        return isinstance(json.loads(line), dict)
    except ValueError:  # invalid JSON or UTF-8
        return False


def _damaged(path: Path, what: str) -> str:
    return (
        f"{path}: {what}; the sweep's trials are kept in {TRIALS_FILE}: move the journal aside "
        f"(mv {path} {path}.damaged) and run this command again to rebuild the study from them"
    )


def requeue_dead_workers_trials(study: optuna.Study, recorded: Sequence[Trial] = ()) -> None:
    """A trial still RUNNING whose worker on this machine is gone (kill -9, Ctrl-C, a
    crash) is marked failed and queued again under its own number, to be continued from
    its run's checkpoint. A worker on another machine is not judged from here."""
    in_record = {trial.number: trial for trial in recorded}
    for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        host, _, pid = str(trial.user_attrs.get("worker", "")).rpartition(":")
        if host != socket.gethostname() or not pid.isdigit() or psutil.pid_exists(int(pid)):
            continue
        number = trial.user_attrs.get(NUMBER)
        if number is None or number in in_record:
            # Never numbered (a new one is asked instead), or its end is recorded but was lost
            # from a damaged journal or not told before its worker died: not run again.
            with contextlib.suppress(ValueError, RuntimeError):
                _tell(study, trial.number, in_record.get(number))
        else:
            _queue_again(study, trial.number, trial.params, number)


def _queue_again(study: optuna.Study, optuna_number: int, params: dict[str, Any], number: int) -> None:
    """Mark a trial under way failed and queue its values again under its sweep number."""
    try:
        study.tell(optuna_number, state=TrialState.FAIL)
    except (ValueError, RuntimeError):  # already ended: another worker was first
        return
    study.enqueue_trial(params, user_attrs={NUMBER: number, RESUME: True})


def _end(study: optuna.Study, asked: optuna.Trial, trial: Trial) -> None:
    asked.set_user_attr(ENDED, True)
    _tell(study, asked, trial)


def _tell(study: optuna.Study, asked: optuna.Trial | int, trial: Trial | None) -> None:
    study.tell(asked, trial.score if trial else None, state=_state(trial))


def _state(trial: Trial | None) -> TrialState:
    """What the study learns of an ended trial: one the sweep's clock cut short is pruned."""
    if trial is None:
        return TrialState.FAIL
    if trial.score is not None:
        return TrialState.COMPLETE
    return TrialState.PRUNED if trial.status == "cut short" else TrialState.FAIL


def _add_ended(
    study: optuna.Study, trial: Trial, distributions: dict[str, optuna.distributions.BaseDistribution]
) -> None:
    """Add a trial of trials.jsonl that the study lost with a damaged journal."""
    params = {name: trial.params[name] for name in distributions if name in trial.params}
    try:
        study.add_trial(
            optuna.trial.create_trial(
                params=params,
                distributions={name: distributions[name] for name in params},
                value=trial.score,
                state=_state(trial),
                user_attrs={NUMBER: trial.number, ENDED: True},
            )
        )
    except ValueError as error:  # the search space was edited since: the trial stays in the record
        print(f"sweep trial {trial.number}: its values no longer fit the search space ({error})")
