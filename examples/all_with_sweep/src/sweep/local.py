"""The local engine: Optuna samples the search space in this process, with no W&B server."""

from __future__ import annotations

import math

import optuna

from src.sweep.records import Trial
from src.sweep.runner import Sweep
from src.sweep.spec import fixed_values, optuna_distributions


def run_local(sweep: Sweep, trials: int, seed: int) -> None:
    """Optuna samples the space (TPE, or random for method "random"), in-process, until
    the sweep has `trials` trials in all, those of earlier attempts included."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    distributions = optuna_distributions(sweep.spec.space)
    # A resumed sweep's sampler gets a seed of its own: the first seed again would sample
    # the first trials' values again. Still one seed per sweep and trial count: reproducible.
    sampler_seed = (seed * 1_000_003 + len(sweep.trials)) % 2**32
    sampler = (
        optuna.samplers.RandomSampler(seed=sampler_seed)
        if sweep.spec.method == "random"
        else optuna.samplers.TPESampler(seed=sampler_seed)
    )
    study = optuna.create_study(direction=sweep.spec.goal, sampler=sampler)
    for done in sweep.trials:  # RES-1: TPE goes on from what the earlier attempts learned
        _tell_ended(study, done, distributions)
    while len(sweep.trials) < trials:
        if sweep.hours_left() <= 0:
            print("sweep: --max-hours reached, no new trial")
            break
        unfinished = sweep.unfinished_trial()
        if unfinished is not None:  # first the trial a kill cut off, with its own values
            number, params = unfinished
            _tell_ended(study, sweep.run_trial(params, number), distributions)
            continue
        asked = study.ask(distributions)
        params = {**fixed_values(sweep.spec.space), **asked.params}
        trial = sweep.run_trial(params)
        if trial.status == "finished" and trial.value is not None and math.isfinite(trial.value):
            study.tell(asked, trial.value)
        else:
            study.tell(asked, state=optuna.trial.TrialState.FAIL)


def _tell_ended(
    study: optuna.Study, trial: Trial, distributions: dict[str, optuna.distributions.BaseDistribution]
) -> None:
    """Add a trial that ran outside study.ask() (an earlier attempt's, a resumed one)."""
    params = {name: trial.params[name] for name in distributions if name in trial.params}
    ok = trial.status == "finished" and trial.value is not None and math.isfinite(trial.value)
    try:
        study.add_trial(
            optuna.trial.create_trial(
                params=params,
                distributions={name: distributions[name] for name in params},
                value=trial.value if ok else None,
                state=optuna.trial.TrialState.COMPLETE if ok else optuna.trial.TrialState.FAIL,
            )
        )
    except ValueError as error:  # the search space was edited since: the trial stays in the record
        print(f"sweep trial {trial.number}: its values no longer fit the search space ({error})")
