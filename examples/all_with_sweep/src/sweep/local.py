"""The local engine: Optuna samples the search space, with no W&B server. Its study
lives in storage that several processes can share (the sweep folder's journal file,
or a database), so any number of workers, on one GPU each or on several machines,
split one sweep's trials; each asks the study for its next trial."""

from __future__ import annotations

import contextlib
import math
import os
import socket
from typing import Any

import optuna
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend
from optuna.trial import FrozenTrial, TrialState

from src.config import ConfigError, first_line
from src.sweep.records import JOURNAL_FILE, Trial
from src.sweep.runner import WORKER, Sweep
from src.sweep.spec import fixed_values, optuna_distributions

# The study's user attributes of a trial: its number in the sweep (runs are named after
# it), the worker that runs it, and whether it ended through this engine. A trial of a
# worker that died stays RUNNING; another worker marks it failed and queues it again
# with its number and values, to be continued from its checkpoint (RES-1).
NUMBER, RESUME, ENDED, SURPLUS = "number", "resume", "ended", "surplus"


def run_local(sweep: Sweep, trials: int, seed: int, joined: bool = False) -> None:
    """Ask the study for trials (TPE, or random for method "random") until it holds
    `trials` in all, every worker's and every attempt's included."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    distributions = optuna_distributions(sweep.spec.space)
    study = open_study(sweep, seed, joined)
    if not study.trials and sweep.trials:  # a sweep from before the shared study
        for done in sweep.trials:  # RES-1: TPE goes on from what the earlier attempts learned
            _add_ended(study, done, distributions)
    while True:
        requeue_dead_workers_trials(study)
        if sweep.hours_left() <= 0:
            print("sweep: --max-hours reached, no new trial")
            return
        if len(counted(study.get_trials(deepcopy=False))) >= trials:
            return
        unfinished = sweep.unfinished_trial()  # a sweep from before the shared study: its cut-off trial
        if unfinished is not None:
            number, params = unfinished
            _add_ended(study, sweep.run_trial(params, number, resume=True), distributions)
            continue
        asked = study.ask(distributions)
        asked.set_user_attr("worker", WORKER)
        number = asked.user_attrs.get(NUMBER)
        if number is None:  # a new trial: numbered by its place among the sweep's trials
            earlier = [t for t in counted(study.get_trials(deepcopy=False)) if t.number < asked.number]
            if len(earlier) >= trials:  # another worker asked for the last one first
                asked.set_user_attr(SURPLUS, True)
                study.tell(asked, state=TrialState.FAIL)
                return
            number = len(earlier)
            asked.set_user_attr(NUMBER, number)
        params = {**fixed_values(sweep.spec.space), **asked.params}
        try:
            trial = sweep.run_trial(params, number, resume=bool(asked.user_attrs.get(RESUME)))
        except BaseException:  # Ctrl-C, SIGTERM: the trial goes back to the queue, checkpoints kept
            _queue_again(study, asked.number, asked.params, number)
            raise
        asked.set_user_attr(ENDED, True)
        if trial.status == "finished" and trial.value is not None and math.isfinite(trial.value):
            study.tell(asked, trial.value)
        else:
            study.tell(asked, state=TrialState.FAIL)


def open_study(sweep: Sweep, seed: int, joined: bool) -> optuna.Study:
    """The sweep's study, created on first use, in sweep.json's database or the folder's
    journal file (which workers on several machines share through a shared filesystem)."""
    state = sweep.state
    storage: Any = state.storage if state and state.storage else None
    if storage is None:
        storage = JournalStorage(JournalFileBackend(str(sweep.dir / JOURNAL_FILE)))
    # One seed per sweep and trial count: a resumed sweep samples on reproducibly instead
    # of sampling its first trials' values again. A joining worker mixes in its pid, so
    # two workers do not propose the same values.
    known = len(sweep.recorded_trials())
    sampler_seed = (seed * 1_000_003 + known + (os.getpid() if joined else 0)) % 2**32
    sampler = (
        optuna.samplers.RandomSampler(seed=sampler_seed)
        if sweep.spec.method == "random"
        else optuna.samplers.TPESampler(seed=sampler_seed)
    )
    try:
        return optuna.create_study(
            storage=storage,
            study_name=sweep.dir.name,
            direction=sweep.spec.goal,
            sampler=sampler,
            load_if_exists=True,
        )
    except Exception as error:  # a database that cannot be reached or used, say
        if not isinstance(storage, str):
            raise
        raise ConfigError(f"--storage {storage}: Optuna cannot use it: {first_line(error)}") from None


def counted(trials: list[FrozenTrial]) -> list[FrozenTrial]:
    """The sweep's trials: under way (numbered or about to be: a worker that asks at the
    same moment must count it), queued again, or ended through this engine; not the
    record of a dead worker's trial (queued again) nor one asked past the count."""
    return [
        t
        for t in trials
        if not t.user_attrs.get(SURPLUS)
        and (t.state in (TrialState.RUNNING, TrialState.WAITING) or t.user_attrs.get(ENDED))
    ]


def requeue_dead_workers_trials(study: optuna.Study) -> None:
    """A trial still RUNNING whose worker on this machine is gone (kill -9, Ctrl-C, a
    crash) is marked failed and queued again under its own number, to be continued from
    its run's checkpoint. A worker on another machine is not judged from here."""
    for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        host, _, pid = str(trial.user_attrs.get("worker", "")).rpartition(":")
        if host != socket.gethostname() or not pid.isdigit() or _alive(int(pid)):
            continue
        if trial.user_attrs.get(ENDED) or NUMBER not in trial.user_attrs:
            # Recorded before its worker died (not run again), or never numbered (a new one
            # is asked instead).
            with contextlib.suppress(ValueError, RuntimeError):
                study.tell(trial.number, state=TrialState.FAIL)
        else:
            _queue_again(study, trial.number, trial.params, trial.user_attrs[NUMBER])


def _queue_again(study: optuna.Study, optuna_number: int, params: dict[str, Any], number: int) -> None:
    """Mark a trial under way failed and queue its values again under its sweep number."""
    try:
        study.tell(optuna_number, state=TrialState.FAIL)
    except (ValueError, RuntimeError):  # already ended: another worker was first
        return
    study.enqueue_trial(params, user_attrs={NUMBER: number, RESUME: True})


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def _add_ended(
    study: optuna.Study, trial: Trial, distributions: dict[str, optuna.distributions.BaseDistribution]
) -> None:
    """Add a trial that ran outside study.ask() (one of a sweep from before the shared study)."""
    params = {name: trial.params[name] for name in distributions if name in trial.params}
    ok = trial.status == "finished" and trial.value is not None and math.isfinite(trial.value)
    try:
        study.add_trial(
            optuna.trial.create_trial(
                params=params,
                distributions={name: distributions[name] for name in params},
                value=trial.value if ok else None,
                state=TrialState.COMPLETE if ok else TrialState.FAIL,
                user_attrs={NUMBER: trial.number, ENDED: True},
            )
        )
    except ValueError as error:  # the search space was edited since: the trial stays in the record
        print(f"sweep trial {trial.number}: its values no longer fit the search space ({error})")
