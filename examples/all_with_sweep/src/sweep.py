"""Hyperparameter sweeps for every part (SWP-1..7): one search space, two engines.

    python -m partN.sweep --engine local --trials 20 --config baseline --max-hours 8
    python -m partN.sweep --engine local --config baseline --resume auto   # continue it after a crash
    python -m partN.sweep --engine wandb --trials 20 --config baseline   # a new W&B sweep and its first agent
    python -m partN.sweep --engine wandb --sweep-id ENTITY/PROJECT/ID    # one more agent, on any machine

A part's sweep.py writes its search space once, in W&B's sweep format. The `wandb`
engine hands it to a W&B sweep, whose agents can run on many machines at once. The
`local` engine samples the same space with Optuna, in this process and with no W&B
server (W&B offline or disabled), so a sweep also runs, and is tested, anywhere.
Every trial is a normal run in the sweep's folder, trained in-process by the
part's `main_with_config()` (SWP-2).

A sweep's folder holds sweep.json (what it is and how far it got), config.json (the
base config), trials.jsonl (a line per ended trial) and summary.md (rewritten after
every trial). From them `--resume` continues a local sweep that was killed (RES-1).
"""

from __future__ import annotations

import dataclasses
import fcntl
import gc
import json
import math
import os
import re
import sys
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import IO, Annotated, Any, Literal

import optuna
import tyro
import wandb

from src.cli import bad_input_message, exit_on_bad_input, parse_command
from src.config import BaseConfig, ConfigError, first_line
from src.ops.gpu_lock import GpuLock
from src.ops.memory import cleanup_vram
from src.runs.atomic import write_text_atomic
from src.runs.directory import STAMP_FORMAT, intact_checkpoint
from src.runs.lifetime import sigterm_unwinds
from src.wandb_utils import api_key_configured

SWEEP_FILE = "sweep.json"
CONFIG_FILE = "config.json"
TRIALS_FILE = "trials.jsonl"
SUMMARY_FILE = "summary.md"
LOCK_FILE = ".lock"


@dataclass
class SweepSpec:
    """What a part's sweep.py declares."""

    configs: Mapping[str, type[BaseConfig]]
    space: dict[str, dict[str, Any]]  # W&B sweep "parameters"
    architectures: dict[str, dict[str, Any]]  # SWP-4: presets the `architecture` parameter names
    # The part's main_with_config(cfg, resume_from=None) (SWP-2); given a checkpoint
    # only when a trial cut off by a kill is resumed (RES-1).
    train: Callable[..., dict[str, float]]
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
    status: str = "running"  # finished | failed; interrupted in the summary of a stopped sweep
    value: float | None = None
    seconds: float = 0.0
    run_dir: str = ""
    error: str = ""
    bad_input: bool = False  # it failed on its values, data or memory, not on a bug
    metrics: dict[str, float] = field(default_factory=dict)
    resumed_from: str = ""  # the checkpoint a trial cut off by a kill went on from (RES-1)


@dataclass
class SweepState:
    """sweep.json: what the sweep is and how far it got, for `--resume` (RES-1)."""

    engine: str
    name: str  # the base config's name: the folder's prefix, what --resume auto looks for
    config_class: str
    seed: int
    trials: int  # the local sweep's total over all its attempts; a W&B agent's count
    max_hours: float  # likewise the whole sweep's, over all its attempts (SWP-5)
    # running | interrupted (Ctrl-C, SIGTERM) | finished | failed. A killed sweep stays
    # "running": --resume auto takes any sweep that is not finished.
    status: str = "running"
    running_trial: dict[str, Any] | None = None  # {"number", "params"} of the trial under way
    wandb_sweep_id: str = ""
    pid: int = 0
    updated: str = ""

    @classmethod
    def read(cls, sweep_dir: Path) -> SweepState:
        record = json.loads((sweep_dir / SWEEP_FILE).read_text())
        return cls(**{f.name: record[f.name] for f in dataclasses.fields(cls) if f.name in record})

    def write(self, sweep_dir: Path) -> None:
        self.pid, self.updated = os.getpid(), datetime.now().isoformat(timespec="seconds")
        write_text_atomic(
            sweep_dir / SWEEP_FILE, json.dumps(dataclasses.asdict(self), indent=2, default=str) + "\n"
        )


class Sweep:
    """Runs trials until the count or the wall clock (SWP-5) is spent, and keeps the
    record: {sweep_dir}/trials.jsonl as they end, sweep.json and summary.md after each."""

    def __init__(
        self,
        spec: SweepSpec,
        base: BaseConfig,
        sweep_dir: Path,
        max_hours: float,
        state: SweepState | None = None,
    ) -> None:
        self.spec, self.base, self.dir, self.state = spec, base, sweep_dir, state
        self.deadline = time.monotonic() + max_hours * 3600
        self.trials: list[Trial] = []

    def hours_left(self) -> float:
        return max(self.deadline - time.monotonic(), 0.0) / 3600

    def load_trials(self) -> None:
        """Read back the trials of earlier attempts: kept, not repeated (RES-1), and their
        time counts against --max-hours, which bounds the whole sweep (SWP-5)."""
        path = self.dir / TRIALS_FILE
        names = {f.name for f in dataclasses.fields(Trial)}
        for line in path.read_text(encoding="utf-8").splitlines() if path.is_file() else []:
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue  # cut short by the kill: that trial is still sweep.json's running_trial
            self.trials.append(Trial(**{key: value for key, value in record.items() if key in names}))
        # Rewritten without a cut line, so the next trial's line starts on a line of its own.
        write_text_atomic(path, "".join(_jsonl(trial) for trial in self.trials))
        self.deadline -= sum(trial.seconds for trial in self.trials)

    def unfinished_trial(self) -> tuple[int, dict[str, Any]] | None:
        """The number and values of the trial an earlier attempt was running when it was
        killed or stopped, if it has no record yet."""
        running = self.state.running_trial if self.state else None
        if running is None or running["number"] in {trial.number for trial in self.trials}:
            return None
        return running["number"], running["params"]

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

    def run_trial(self, params: dict[str, Any], number: int | None = None) -> Trial:
        """A new trial; or, given its number, the trial an earlier attempt left unfinished,
        continued from its run's last checkpoint or, without one, run again (RES-1)."""
        trial = Trial(self.next_number() if number is None else number, params)
        self.trials.append(trial)
        # Saved before the trial starts: a kill from here on leaves what --resume needs.
        self.save(running_trial={"number": trial.number, "params": params})
        started = time.monotonic()
        try:
            cfg = self.trial_config(trial.number, params)
            checkpoint = self.last_checkpoint(trial.number) if number is not None else None
            if checkpoint is None:
                print(f"sweep trial {trial.number}: {params}")
                trial.metrics = self.spec.train(cfg)
            else:
                trial.resumed_from = str(checkpoint)
                print(f"sweep trial {trial.number}: {params}, resuming {checkpoint}")
                trial.metrics = self.spec.train(cfg, checkpoint)
            trial.value = float(trial.metrics[self.spec.metric])
            trial.status = "finished"
        # SWP-7: any failure of a trial is caught here, so its stack unwinds now and the
        # sweep goes on; Ctrl-C and SystemExit are not Exceptions and still end the sweep.
        except Exception as error:  # noqa: BLE001
            message = bad_input_message(error)
            trial.status, trial.error = "failed", message or f"{type(error).__name__}: {error}"
            trial.bad_input = message is not None
            if message is None:  # a bug's traceback is worth reading; bad input's is not
                traceback.print_exc()
            print(f"sweep trial {trial.number} failed ({trial.error}); the sweep goes on")
        # SWP-7: only now is nothing of the trial referenced: free its memory before the next.
        cleanup_vram()
        gc.collect()
        gc.collect()
        trial.seconds = time.monotonic() - started
        runs = self.run_dirs(trial.number)
        trial.run_dir = str(runs[-1]) if runs else ""
        self.record(trial)
        return trial

    def next_number(self) -> int:
        return max((trial.number for trial in self.trials), default=-1) + 1

    def run_dirs(self, number: int) -> list[Path]:
        return sorted(self.dir.glob(f"{self.base.name}-trial{number:03d}_*"))

    def last_checkpoint(self, number: int) -> Path | None:
        runs = self.run_dirs(number)
        return intact_checkpoint(runs[-1])[0] if runs else None  # a damaged one is skipped (RES-1)

    def record(self, trial: Trial) -> None:
        """trials.jsonl first, then sweep.json: a kill between the two leaves a trial that
        --resume finds recorded, so it is not run twice."""
        with open(self.dir / TRIALS_FILE, "a", encoding="utf-8") as file:
            file.write(_jsonl(trial))
        self.save(running_trial=None)
        self.finish()  # after every trial, so a sweep killed later still has its summary

    def save(self, **changes: Any) -> None:
        if self.state is not None:
            self.state = dataclasses.replace(self.state, **changes)
            self.state.write(self.dir)

    def end(self, status: str) -> str:
        """The sweep's status in sweep.json and its final summary. A stopped sweep keeps
        its running_trial, which --resume continues."""
        for trial in self.trials:
            if trial.status == "running":
                runs = self.run_dirs(trial.number)
                trial.status, trial.run_dir = "interrupted", str(runs[-1]) if runs else ""
        self.save(status=status)
        return self.finish()

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
                _where(trial),
            ]
            for rank, trial in enumerate(self.ranked(), start=1)
        ]
        lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
        lines += ["| " + " | ".join(row) + " |" for row in rows]
        return "\n".join(lines) + "\n"

    def finish(self) -> str:
        """Write summary.md (atomically: a kill mid-write keeps the previous one)."""
        table = self.summary()
        progress = ""
        if self.state is not None:
            progress = f"{self.state.status}, {len(self.trials)} of {self.state.trials} trials\n\n"
        write_text_atomic(
            self.dir / SUMMARY_FILE,
            f"# Sweep {self.dir.name}: {self.spec.metric}, {self.spec.goal}\n\n{progress}{table}",
        )
        return table


def _where(trial: Trial) -> str:
    resumed = "(resumed)" if trial.resumed_from else ""
    return " ".join(filter(None, (Path(trial.run_dir).name, resumed, trial.error)))


def _cell(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def _jsonl(trial: Trial) -> str:
    return json.dumps(dataclasses.asdict(trial), default=str) + "\n"


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


def run_wandb(sweep: Sweep, trials: int, sweep_id: str | None) -> None:
    """W&B's sweep controller samples; this process is one agent of the sweep."""
    if sweep_id is None:
        sweep_id = create_wandb_sweep(sweep.spec, sweep.base)

    def agent_trial() -> None:
        if sweep.hours_left() <= 0:
            print("sweep: --max-hours reached, no new trial")
            return
        run = wandb.init()  # the agent's run, with the sampled values; setup_run() joins it (SWP-3)
        trial = sweep.run_trial(dict(run.config))
        if trial.value is not None:
            run.summary[sweep.spec.metric] = trial.value  # what the sweep's controller optimizes
        wandb.finish(exit_code=0 if trial.status == "finished" else 1)

    try:
        wandb.agent(sweep_id, function=agent_trial, count=trials)
    except wandb.errors.Error as error:  # CommError, UsageError, AuthenticationError
        raise ConfigError(_wandb_needed(f"W&B said: {first_line(error)}")) from None


def create_wandb_sweep(spec: SweepSpec, base: BaseConfig) -> str:
    """A new W&B sweep of this space; its id, for more agents to join."""
    require_wandb_login(base)
    try:
        sweep_id = wandb.sweep(
            {
                "method": spec.method,
                "metric": {"name": spec.metric, "goal": spec.goal},
                "parameters": spec.space,
            },
            project=base.wandb_project or None,
            entity=base.wandb_entity or None,
        )
    except wandb.errors.Error as error:  # CommError, UsageError, AuthenticationError
        raise ConfigError(_wandb_needed(f"W&B said: {first_line(error)}")) from None
    print(f"W&B sweep {sweep_id}: start more agents with --engine wandb --sweep-id {sweep_id}")
    return sweep_id


def require_wandb_login(cfg: BaseConfig) -> None:
    """A W&B sweep lives on a W&B server: without one (W&B offline or disabled, no API
    key) say so in one line before wandb.sweep() or wandb.agent() tries to reach it."""
    env_mode = os.environ.get("WANDB_MODE", "")
    if cfg.wandb_mode in ("offline", "disabled"):
        found = f"--wandb-mode is {cfg.wandb_mode}"
    elif cfg.wandb_mode == "auto" and env_mode in ("offline", "dryrun", "disabled"):
        found = f"WANDB_MODE is {env_mode}"
    elif not api_key_configured():
        found = "no W&B API key is configured"
    else:
        return
    raise ConfigError(_wandb_needed(found))


def _wandb_needed(found: str) -> str:
    return (
        f"--engine wandb: {found}; a W&B sweep needs a W&B server and login (`wandb login` or "
        "WANDB_API_KEY). --engine local runs the same sweep without one"
    )


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


DEFAULT_TRIALS, DEFAULT_MAX_HOURS, DEFAULT_SEED = 20, 24.0, 0


def _default_hint(metavar: str, default: object) -> Any:
    return tyro.conf.arg(metavar=metavar, help_behavior_hint=f"(default: {default}, or the resumed sweep's)")


SWEEP_DESCRIPTION = """Sweep this part's hyperparameters: trials sampled from the search space in its
sweep.py, each a normal training run in the sweep's folder under OUTPUT.BASE_DIR/sweeps/.
The config flags set what every trial starts from."""


@dataclass
class SweepOptions:
    """What `partN.sweep` takes beside the config's fields.

    Attributes:
        engine: local samples trials with Optuna in this process, with no W&B server; wandb
            runs a W&B sweep, which agents on other machines can join.
        trials: Trials in the whole local sweep, at least 1, a resumed sweep's earlier ones
            included. With --engine wandb: the trials this agent runs.
        max_hours: Wall-clock budget of the whole sweep in hours, a resumed sweep's earlier
            trials included; the trial still running then stops as a STOP file would stop
            it, its checkpoints kept.
        sweep_id: Join this W&B sweep (ENTITY/PROJECT/ID) instead of creating one; with
            --engine wandb.
        sweep_seed: Seed of the local engine's sampler: the same seed samples the same trials.
        resume: Continue a local sweep: its directory, or auto for this config's newest
            unfinished sweep under OUTPUT.BASE_DIR/sweeps/. Its ended trials are kept; the
            one a kill cut off goes on from its last checkpoint.
    """

    engine: Literal["local", "wandb"] = "local"
    # None stands for the resumed sweep's value, or the default a new sweep gets.
    trials: Annotated[int | None, _default_hint("INT", DEFAULT_TRIALS)] = None
    max_hours: Annotated[float | None, _default_hint("HOURS", DEFAULT_MAX_HOURS)] = None
    sweep_id: str | None = None
    sweep_seed: Annotated[int | None, _default_hint("INT", DEFAULT_SEED)] = None
    # The wording of the training command's --resume (RES-1).
    resume: Annotated[str | None, tyro.conf.arg(metavar="PATH|auto")] = None


def main(spec: SweepSpec, argv: Sequence[str] | None = None, prog: str | None = None) -> Sweep:
    base, args = parse_command(spec.configs, SweepOptions, argv, prog, description=SWEEP_DESCRIPTION)
    lock: IO[str] | None = None
    try:
        with exit_on_bad_input():
            _check_options(spec, args)
            found = None if args.resume is None else find_sweep(base, args.resume)
            sweep_id = args.sweep_id
            if args.engine == "wandb" and sweep_id is None:
                sweep_id = create_wandb_sweep(spec, base)
            elif args.engine == "wandb":
                require_wandb_login(base)
        if found is not None:
            sweep_dir, state, lock = found
            # As `train --resume`: the sweep's saved base config, and the flags given now over it.
            saved = _saved_config(base, sweep_dir, args.resume)
            base, args = parse_command(
                spec.configs, SweepOptions, argv, prog, description=SWEEP_DESCRIPTION, start_from=saved
            )
            state = dataclasses.replace(
                state,
                status="running",
                trials=_given(args.trials, state.trials),
                max_hours=_given(args.max_hours, state.max_hours),
                seed=_given(args.sweep_seed, state.seed),
            )
            print(f"sweep directory: {sweep_dir} (resumed)")
        else:
            stamp = datetime.now().strftime(STAMP_FORMAT)
            sweep_dir = Path(base.output.base_dir) / "sweeps" / f"{base.name}_{stamp}_{os.getpid()}"
            sweep_dir.mkdir(parents=True)
            lock = _try_lock(sweep_dir)
            state = SweepState(
                engine=args.engine,
                name=base.name,
                config_class=type(base).__name__,
                seed=_given(args.sweep_seed, DEFAULT_SEED),
                trials=_given(args.trials, DEFAULT_TRIALS),
                max_hours=_given(args.max_hours, DEFAULT_MAX_HOURS),
                wandb_sweep_id=sweep_id or "",
            )
            print(f"sweep directory: {sweep_dir}")
        write_text_atomic(sweep_dir / CONFIG_FILE, base.to_json() + "\n")
        state.write(sweep_dir)
        sweep = Sweep(spec, base, sweep_dir, state.max_hours, state)
        if found is not None:
            sweep.load_trials()
        _run(sweep, args.engine, state.trials, state.seed, sweep_id)
        return sweep
    finally:
        if lock is not None:
            lock.close()


def _run(sweep: Sweep, engine: str, trials: int, seed: int, sweep_id: str | None) -> None:
    """Run the sweep's trials; Ctrl-C and SIGTERM end it quietly, summary.md written,
    with status 130 or 143, and --resume continues it."""
    try:
        with sigterm_unwinds(), GpuLock(), exit_on_bad_input():
            # OPS-1: a sweep queues behind other GPU jobs like a single run
            if engine == "local":
                if len(sweep.trials) >= trials:
                    print(f"sweep: it has {len(sweep.trials)} trials already; --trials is the total")
                run_local(sweep, trials, seed)
            else:
                run_wandb(sweep, trials, sweep_id)
    except BaseException as error:
        code = _stop_status(error)
        if code is None:  # a W&B error (exit 2), say
            sweep.end("failed")
            raise
        print(sweep.end("interrupted"))
        print(f"sweep stopped; continue the sweep, trial and all, with --resume {sweep.dir}", file=sys.stderr)
        raise SystemExit(code) from None
    print(sweep.end("finished"))
    if sweep.trials and all(trial.status == "failed" for trial in sweep.trials):
        # A script that runs the sweep must not read "every trial failed" as success;
        # status 2 when the values were to blame, as for a single run.
        print(f"error: every trial failed; {sweep.dir / SUMMARY_FILE} says why", file=sys.stderr)
        raise SystemExit(2 if all(trial.bad_input for trial in sweep.trials) else 1)


def _stop_status(error: BaseException) -> int | None:
    """130 for Ctrl-C, 143 for SIGTERM; None for an exit of another cause."""
    if isinstance(error, KeyboardInterrupt):
        return 130
    # Ctrl-C or SIGTERM inside a run (src/runs/lifetime.py), Ctrl-C while queued for the GPU lock
    if isinstance(error, SystemExit) and error.code in (130, 143):
        return int(error.code)
    return None


def _check_options(spec: SweepSpec, args: SweepOptions) -> None:
    if (args.trials is not None and args.trials < 1) or (
        args.max_hours is not None and not 0 < args.max_hours < math.inf
    ):
        raise ConfigError(
            f"--trials {args.trials}, --max-hours {args.max_hours}: need at least 1 and a positive number"
        )
    if args.resume is not None and args.engine != "local":
        raise ConfigError(
            f"--resume continues a local sweep; a W&B sweep goes on with --engine {args.engine} --sweep-id ID"
        )
    optuna_distributions(spec.space)  # a bad search space fails before any trial


def _given(value: Any, default: Any) -> Any:
    return default if value is None else value


def find_sweep(base: BaseConfig, resume: str) -> tuple[Path, SweepState, IO[str]] | None:
    """The sweep --resume names, its state and its lock; None when `auto` finds none.
    Another engine or config than this command's is refused: its trials would not fit."""
    if resume == "auto":
        sweeps = Path(base.output.base_dir) / "sweeps"
        pattern = re.compile(re.escape(base.name) + r"_(\d{8}_\d{6})_\d+")
        candidates = sorted(
            (match[1], path.stat().st_mtime, path)
            for path in sweeps.glob(f"{base.name}_*")
            if (match := pattern.fullmatch(path.name)) and (path / SWEEP_FILE).is_file()
        )
        for *_, path in reversed(candidates):  # the newest first
            state = _read_state(path)
            if state is None or state.engine != "local" or state.status == "finished":
                continue
            if (lock := _try_lock(path)) is not None:  # one another process runs is skipped
                _check_same_sweep(path, state, base, resume)
                return path, state, lock
        print(f"--resume auto: no unfinished local '{base.name}' sweep in {sweeps}/, starting a new one")
        return None
    path = Path(resume)
    state = _read_state(path)
    if state is None:
        raise ConfigError(f"--resume {resume}: not a sweep directory (no readable {SWEEP_FILE})")
    _check_same_sweep(path, state, base, resume)
    lock = _try_lock(path)
    if lock is None:
        raise ConfigError(f"--resume {resume}: another process is running that sweep (pid {state.pid})")
    return path, state, lock


def _check_same_sweep(path: Path, state: SweepState, base: BaseConfig, resume: str) -> None:
    if state.engine != "local":
        raise ConfigError(
            f"--resume {resume}: that is a {state.engine} sweep; a W&B sweep goes on with "
            f"--engine wandb --sweep-id {state.wandb_sweep_id or 'ID'}"
        )
    if (state.name, state.config_class) != (base.name, type(base).__name__):
        raise ConfigError(
            f"--resume {resume}: that sweep is of config '{state.name}', this command's is "
            f"'{base.name}' (give --config {state.name})"
        )


def _read_state(sweep_dir: Path) -> SweepState | None:
    try:
        return SweepState.read(sweep_dir)
    except (OSError, ValueError, TypeError, KeyError):
        return None


def _saved_config(base: BaseConfig, sweep_dir: Path, resume: str) -> BaseConfig:
    with exit_on_bad_input():
        try:
            return type(base).from_json((sweep_dir / CONFIG_FILE).read_text())
        except (OSError, ValueError, TypeError) as error:
            raise ConfigError(f"--resume {resume}: its {CONFIG_FILE} cannot be read: {error}") from None


def _try_lock(sweep_dir: Path) -> IO[str] | None:
    """Hold the sweep's lock for this process's lifetime, or None when another process
    holds it: two processes running one sweep would run its trials twice. The kernel
    releases it however the process ends, kill -9 included."""
    file = open(sweep_dir / LOCK_FILE, "a")  # noqa: SIM115 - held open while the sweep runs
    try:
        fcntl.flock(file, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        file.close()
        return None
    return file
