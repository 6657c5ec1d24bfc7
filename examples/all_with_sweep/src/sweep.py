"""Hyperparameter sweeps for every part (SWP-1..7): one search space, two engines.

    python -m partN.sweep --engine local --trials 20 --config baseline --max-hours 8
    python -m partN.sweep --engine wandb --trials 20 --config baseline   # a new W&B sweep and its first agent
    python -m partN.sweep --engine wandb --sweep-id ENTITY/PROJECT/ID    # one more agent, on any machine

A part's sweep.py writes its search space once, in W&B's sweep format. The `wandb`
engine hands it to a W&B sweep, whose agents can run on many machines at once. The
`local` engine samples the same space with Optuna, in this process and with no W&B
server (W&B offline or disabled), so a sweep also runs, and is tested, anywhere.
Every trial is a normal run in the sweep's folder, trained in-process by the
part's `main_with_config()` (SWP-2).
"""

from __future__ import annotations

import dataclasses
import gc
import json
import math
import os
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

import optuna
import wandb

from src.cli import exit_on_bad_input, parse_command
from src.config import BaseConfig, ConfigError
from src.ops.gpu_lock import GpuLock
from src.ops.memory import cleanup_vram
from src.runs.directory import STAMP_FORMAT


@dataclass
class SweepSpec:
    """What a part's sweep.py declares."""

    configs: Mapping[str, type[BaseConfig]]
    space: dict[str, dict[str, Any]]  # W&B sweep "parameters"
    architectures: dict[str, dict[str, Any]]  # SWP-4: presets the `architecture` parameter names
    train: Callable[[BaseConfig], dict[str, float]]  # the part's main_with_config (SWP-2)
    metric: str  # a key of what `train` returns, e.g. "best_val_loss"
    goal: Literal["minimize", "maximize"]
    method: Literal["random", "bayes"] = "bayes"

    def decode(self, params: dict[str, Any]) -> dict[str, Any]:
        """Sampled values -> config fields; `architecture` stands for all of its preset's."""
        fields = {name: value for name, value in params.items() if name != "architecture"}
        return fields | self.architectures.get(params.get("architecture"), {})


@dataclass
class Trial:
    number: int
    params: dict[str, Any]
    status: str = "running"  # finished | failed
    value: float | None = None
    seconds: float = 0.0
    run_dir: str = ""
    error: str = ""
    metrics: dict[str, float] = field(default_factory=dict)


class Sweep:
    """Runs trials until the count or the wall clock (SWP-5) is spent, and keeps the
    record: {sweep_dir}/trials.jsonl as they end, summary.md at the end."""

    def __init__(self, spec: SweepSpec, base: BaseConfig, sweep_dir: Path, max_hours: float) -> None:
        self.spec, self.base, self.dir = spec, base, sweep_dir
        self.deadline = time.monotonic() + max_hours * 3600
        self.trials: list[Trial] = []

    def hours_left(self) -> float:
        return max(self.deadline - time.monotonic(), 0.0) / 3600

    def trial_config(self, number: int, params: dict[str, Any]) -> BaseConfig:
        """The base config with the sampled values, its own name and run folder, and a
        wall-clock budget that ends with the sweep's: at the deadline the running
        trial stops as a STOP file would stop it, checkpoints kept (SWP-5)."""
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

    def run_trial(self, params: dict[str, Any]) -> Trial:
        trial = Trial(len(self.trials), params)
        self.trials.append(trial)
        started = time.monotonic()
        try:
            cfg = self.trial_config(trial.number, params)
            print(f"sweep trial {trial.number}: {params}")
            trial.metrics = self.spec.train(cfg)
            trial.value = float(trial.metrics[self.spec.metric])
            trial.status = "finished"
        # SWP-7: any failure of a trial is caught here, so its stack unwinds now and the
        # sweep goes on; Ctrl-C and SystemExit are not Exceptions and still end the sweep.
        except Exception as error:  # noqa: BLE001
            trial.status, trial.error = "failed", f"{type(error).__name__}: {error}"
            traceback.print_exc()
            print(f"sweep trial {trial.number} failed ({trial.error}); the sweep goes on")
        # SWP-7: only now is nothing of the trial referenced: free its memory before the next.
        cleanup_vram()
        gc.collect()
        gc.collect()
        trial.seconds = time.monotonic() - started
        runs = sorted(self.dir.glob(f"{self.base.name}-trial{trial.number:03d}_*"))
        trial.run_dir = str(runs[-1]) if runs else ""
        with open(self.dir / "trials.jsonl", "a", encoding="utf-8") as file:
            file.write(json.dumps(dataclasses.asdict(trial), default=str) + "\n")
        return trial

    def ranked(self) -> list[Trial]:
        """Finished trials best first, then the failed ones."""
        sign = -1 if self.spec.goal == "maximize" else 1

        def key(trial: Trial) -> tuple[bool, float]:
            value = trial.value if trial.value is not None and math.isfinite(trial.value) else None
            return value is None, sign * value if value is not None else 0.0

        return sorted(self.trials, key=key)

    def summary(self) -> str:
        names = list(self.spec.space)
        header = ["rank", "trial", "status", self.spec.metric, *names, "seconds", "run directory"]
        rows = [
            [
                str(rank),
                str(trial.number),
                trial.status,
                "" if trial.value is None else f"{trial.value:.4g}",
                *(_cell(trial.params.get(name, "")) for name in names),
                f"{trial.seconds:.0f}",
                " ".join(filter(None, (Path(trial.run_dir).name, trial.error))),
            ]
            for rank, trial in enumerate(self.ranked(), start=1)
        ]
        lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
        lines += ["| " + " | ".join(row) + " |" for row in rows]
        return "\n".join(lines) + "\n"

    def finish(self) -> str:
        table = self.summary()
        (self.dir / "summary.md").write_text(
            f"# Sweep {self.dir.name}: {self.spec.metric}, {self.spec.goal}\n\n{table}"
        )
        return table


def _cell(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def run_local(sweep: Sweep, trials: int, seed: int) -> None:
    """Optuna samples the space (TPE, or random for method "random"), in-process."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    sampler = (
        optuna.samplers.RandomSampler(seed=seed)
        if sweep.spec.method == "random"
        else optuna.samplers.TPESampler(seed=seed)
    )
    study = optuna.create_study(direction=sweep.spec.goal, sampler=sampler)
    distributions = optuna_distributions(sweep.spec.space)
    for _ in range(trials):
        if sweep.hours_left() <= 0:
            print("sweep: --max-hours reached, no new trial")
            break
        asked = study.ask(distributions)
        params = {**fixed_values(sweep.spec.space), **asked.params}
        trial = sweep.run_trial(params)
        if trial.status == "finished" and trial.value is not None and math.isfinite(trial.value):
            study.tell(asked, trial.value)
        else:
            study.tell(asked, state=optuna.trial.TrialState.FAIL)


def run_wandb(sweep: Sweep, trials: int, sweep_id: str | None) -> None:
    """W&B's sweep controller samples; this process is one agent of the sweep."""
    if sweep_id is None:
        sweep_id = wandb.sweep(
            {
                "method": sweep.spec.method,
                "metric": {"name": sweep.spec.metric, "goal": sweep.spec.goal},
                "parameters": sweep.spec.space,
            },
            project=sweep.base.wandb_project or None,
            entity=sweep.base.wandb_entity or None,
        )
        print(f"W&B sweep {sweep_id}: start more agents with --engine wandb --sweep-id {sweep_id}")

    def agent_trial() -> None:
        if sweep.hours_left() <= 0:
            print("sweep: --max-hours reached, no new trial")
            return
        run = wandb.init()  # the agent's run, with the sampled values; setup_run() joins it (SWP-3)
        trial = sweep.run_trial(dict(run.config))
        if trial.value is not None:
            run.summary[sweep.spec.metric] = trial.value  # what the sweep's controller optimizes
        wandb.finish(exit_code=0 if trial.status == "finished" else 1)

    wandb.agent(sweep_id, function=agent_trial, count=trials)


def optuna_distributions(
    space: dict[str, dict[str, Any]],
) -> dict[str, optuna.distributions.BaseDistribution]:
    """W&B parameter specs as Optuna distributions: `values` lists, `min`/`max`
    ranges (integer when both bounds are), `log_uniform_values`. Fixed `value`s are
    not sampled."""
    distributions: dict[str, optuna.distributions.BaseDistribution] = {}
    for name, spec in space.items():
        if "value" in spec:
            continue
        if "values" in spec:
            distributions[name] = optuna.distributions.CategoricalDistribution(spec["values"])
        elif spec.get("distribution") == "log_uniform_values":
            distributions[name] = optuna.distributions.FloatDistribution(spec["min"], spec["max"], log=True)
        elif isinstance(spec.get("min"), int) and isinstance(spec.get("max"), int):
            distributions[name] = optuna.distributions.IntDistribution(spec["min"], spec["max"])
        elif "min" in spec and "max" in spec:
            distributions[name] = optuna.distributions.FloatDistribution(spec["min"], spec["max"])
        else:
            raise ConfigError(f"search space '{name}': use value, values, or min and max (got {spec})")
    return distributions


def fixed_values(space: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return {name: spec["value"] for name, spec in space.items() if "value" in spec}


SWEEP_DESCRIPTION = """Sweep this part's hyperparameters: trials sampled from the search space in its
sweep.py, each a normal training run in the sweep's folder under OUTPUT.BASE_DIR/sweeps/.
The config flags set what every trial starts from."""


@dataclass
class SweepOptions:
    """What `partN.sweep` takes beside the config's fields.

    Attributes:
        engine: local samples trials with Optuna in this process, with no W&B server; wandb
            runs a W&B sweep, which agents on other machines can join.
        trials: How many trials this process runs (at least 1).
        max_hours: Wall-clock budget of the whole sweep, in hours; the trial still running
            then stops as a STOP file would stop it, its checkpoints kept.
        sweep_id: Join this W&B sweep (ENTITY/PROJECT/ID) instead of creating one; with
            --engine wandb.
        sweep_seed: Seed of the local engine's sampler: the same seed samples the same trials.
    """

    engine: Literal["local", "wandb"] = "local"
    trials: int = 20
    max_hours: float = 24.0
    sweep_id: str | None = None
    sweep_seed: int = 0


def main(spec: SweepSpec, argv: Sequence[str] | None = None, prog: str | None = None) -> Sweep:
    base, args = parse_command(spec.configs, SweepOptions, argv, prog, description=SWEEP_DESCRIPTION)
    with exit_on_bad_input():
        if args.trials < 1 or not 0 < args.max_hours < math.inf:
            raise ConfigError(
                f"--trials {args.trials}, --max-hours {args.max_hours}: need at least 1 and a positive number"
            )
        optuna_distributions(spec.space)  # a bad search space fails before any trial
    stamp = datetime.now().strftime(STAMP_FORMAT)
    sweep_dir = Path(base.output.base_dir) / "sweeps" / f"{base.name}_{stamp}_{os.getpid()}"
    sweep_dir.mkdir(parents=True)
    sweep = Sweep(spec, base, sweep_dir, args.max_hours)
    print(f"sweep directory: {sweep_dir}")
    try:
        with GpuLock():  # OPS-1: a sweep queues behind other GPU jobs like a single run
            if args.engine == "local":
                run_local(sweep, args.trials, args.sweep_seed)
            else:
                run_wandb(sweep, args.trials, args.sweep_id)
    finally:
        print(sweep.finish())
    return sweep
