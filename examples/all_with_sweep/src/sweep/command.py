"""`python -m partN.sweep`: its options, a new sweep's folder or the one `--resume` or `--study`
names (with its lock, RES-1), and how the sweep ends (the exit status a script reads)."""

from __future__ import annotations

import dataclasses
import fcntl
import math
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Annotated, Any, Literal

import tyro

from src.cli import as_flags, exit_on_bad_input, parse_command
from src.config import BaseConfig, ConfigError
from src.ops.gpu_lock import GpuLock
from src.runs.atomic import translate_write_errors, write_text_atomic
from src.runs.directory import create_run_dir, newest_first
from src.runs.launch import current_launch, process_count
from src.runs.lifetime import hangup_and_sigterm_unwind, signals_wait_for_cleanup
from src.sweep.runner import (
    CONFIG_FILE,
    DEFAULT_MAX_HOURS,
    DEFAULT_SEED,
    DEFAULT_TRIALS,
    LOCK_FILE,
    SUMMARY_FILE,
    SWEEP_FILE,
    Sweep,
    SweepState,
)
from src.sweep.spec import SweepSpec


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
            trials included; the trial running then stops as a STOP file would stop it.
        sweep_id: Join this W&B sweep (ENTITY/PROJECT/ID) instead of creating one; with
            --engine wandb.
        sweep_seed: Seed of the local engine's sampler: the same seed samples the same trials.
        resume: Continue a local sweep no process runs: its directory, or auto for this
            config's newest unfinished sweep under OUTPUT.BASE_DIR/sweeps/. Its ended trials
            are kept; one a kill cut off goes on from its last checkpoint.
        study: Join a local sweep as one more worker: its directory (on a filesystem every
            worker sees). The workers share its Optuna study and split its trials.
        storage: Keep a new local sweep's Optuna study in this database (an SQLAlchemy URL such
            as sqlite:///sweeps.db) instead of the journal file in the sweep's directory.
    """

    engine: Literal["local", "wandb"] = "local"
    # None stands for the resumed sweep's value, or the default a new sweep gets.
    trials: Annotated[int | None, _default_hint("INT", DEFAULT_TRIALS)] = None
    max_hours: Annotated[float | None, _default_hint("HOURS", DEFAULT_MAX_HOURS)] = None
    sweep_id: str | None = None
    sweep_seed: Annotated[int | None, _default_hint("INT", DEFAULT_SEED)] = None
    # The wording of the training command's --resume (RES-1).
    resume: Annotated[str | None, tyro.conf.arg(metavar="PATH|auto")] = None
    study: Annotated[str | None, tyro.conf.arg(metavar="DIR")] = None
    storage: Annotated[str | None, tyro.conf.arg(metavar="URL")] = None


def main(spec: SweepSpec, argv: Sequence[str] | None = None, prog: str | None = None) -> Sweep:
    base, args = parse_command(spec.configs, SweepOptions, argv, prog, description=SWEEP_DESCRIPTION)
    lock: IO[str] | None = None
    try:
        with exit_on_bad_input():
            _check_options(spec, args)
            flag, named = ("--study", args.study) if args.study is not None else ("--resume", args.resume)
            found = None if named is None else find_sweep(base, flag, named)
            if found is not None:
                sweep_dir, state, lock = found
                if args.storage is not None and args.storage != state.storage:
                    raise ConfigError(
                        f"{flag} {named}: that sweep keeps its study in {state.storage or 'its folder'}; "
                        "leave out --storage, which chooses a new sweep's database"
                    )
                if not state.storage:
                    from src.sweep.local import repair_journal

                    repair_journal(sweep_dir)  # before anything is written: a refusal changes nothing
                try:
                    saved = type(base).from_json((sweep_dir / CONFIG_FILE).read_text())
                except (OSError, ValueError, TypeError) as error:
                    raise ConfigError(f"{flag} {named}: its {CONFIG_FILE} cannot be read: {error}") from None
                # As `train --resume`: the sweep's saved base config, the flags given now over it.
                base, args = parse_command(
                    spec.configs, SweepOptions, argv, prog, description=SWEEP_DESCRIPTION, start_from=saved
                )
                if changed := changes_to_the_trials(spec, saved, base):
                    raise ConfigError(
                        f"{flag} {named}: {as_flags(changed)} would change what its trials learn from or "
                        "how they are ranked; start a new sweep to change them"
                    )
            spec.check_fields(base)
            base = one_process_per_trial(base)
            spec = spec.for_config(base)
            if found is None and args.storage is not None:  # refused before the sweep's folder is made
                from src.sweep.local import open_storage

                open_storage(args.storage)
            elif found is not None and state.storage:  # refused before anything is written
                from src.sweep.local import study_in

                study_in(state.storage, sweep_dir.name, spec.goal)
            sweep_id = args.sweep_id
            if args.engine == "wandb":
                # Loaded once chosen: wandb takes a second to load, --help and a refusal need it not.
                from src.sweep.wandb_sweep import create_wandb_sweep, require_wandb_login

                require_wandb_login(base)
                sweep_id = sweep_id or create_wandb_sweep(spec, base)
        if found is not None:
            print(f"sweep directory: {sweep_dir} ({'joined' if args.study else 'resumed'})")
        else:
            # BASE_STAMP, with a number after it for a second sweep in the same second.
            with exit_on_bad_input():  # a folder this user may not write: one line
                sweep_dir = create_run_dir(base.runs_dir() / "sweeps", base.name)
                lock = lock_sweep(sweep_dir)
            state = SweepState(
                engine=args.engine,
                name=base.name,
                config_class=type(base).__name__,
                part=base.part(),
                wandb_sweep_id=sweep_id or "",
                storage=args.storage or "",
            )
            print(f"sweep directory: {sweep_dir}")
            if args.engine == "local":
                print(f"more workers (one per GPU or machine) join it with --study {sweep_dir}")
        given = {"trials": args.trials, "max_hours": args.max_hours, "seed": args.sweep_seed}
        state = dataclasses.replace(
            state, status="running", **{k: v for k, v in given.items() if v is not None}
        )
        if not args.study:  # a worker that joins runs the sweep's config: its flags change no record
            write_text_atomic(sweep_dir / CONFIG_FILE, base.to_json() + "\n")
        state.write(sweep_dir)
        sweep = Sweep(spec, base, sweep_dir, state.max_hours, state)
        _run(sweep, args.engine, state.trials, state.seed, sweep_id)
        return sweep
    finally:
        if lock is not None:
            lock.close()


def _run(sweep: Sweep, engine: str, trials: int, seed: int, sweep_id: str | None) -> None:
    """Run the sweep's trials; Ctrl-C, SIGTERM and SIGHUP end it quietly, summary.md
    written, with status 130, 143 or 129, and --resume continues it."""
    try:
        with hangup_and_sigterm_unwind(), GpuLock(), exit_on_bad_input():
            # OPS-1: a sweep queues behind other GPU jobs like a single run
            if engine == "local":
                if len(sweep.trials) >= trials:
                    print(f"sweep: it has {len(sweep.trials)} trials already; --trials is the total")
                from src.sweep.local import run_local

                run_local(sweep, trials, seed)
            else:
                from src.sweep.wandb_sweep import run_wandb

                run_wandb(sweep, trials, sweep_id)
    except BaseException as error:
        # Ctrl-C; SIGTERM or SIGHUP inside a run (src/runs/lifetime.py); Ctrl-C while queued for the GPU lock
        code = 130 if isinstance(error, KeyboardInterrupt) else getattr(error, "code", None)
        if not isinstance(error, (KeyboardInterrupt, SystemExit)) or code not in (129, 130, 143):
            sweep.end("failed")  # a W&B error (exit 2), say
            raise
        with signals_wait_for_cleanup():
            print(sweep.end("interrupted"))
        print(f"sweep stopped; continue the sweep, trial and all, with --resume {sweep.dir}", file=sys.stderr)
        raise SystemExit(code) from None
    # Other workers may still be running trials: the last one to stop says finished.
    done = engine != "local" or len(sweep.recorded_trials()) >= trials or sweep.hours_left() <= 0
    print(sweep.end("finished" if done else "running"))
    if sweep.trials and all(trial.status == "failed" for trial in sweep.trials):
        # A script that runs the sweep must not read "every trial failed" as success;
        # status 2 when the values were to blame, as for a single run.
        print(f"error: every trial failed; {sweep.dir / SUMMARY_FILE} says why", file=sys.stderr)
        raise SystemExit(2 if all(trial.bad_input for trial in sweep.trials) else 1)


def _check_options(spec: SweepSpec, args: SweepOptions) -> None:
    if (args.trials is not None and args.trials < 1) or (
        args.max_hours is not None and not 0 < args.max_hours < math.inf
    ):
        raise ConfigError(
            f"--trials {args.trials}, --max-hours {args.max_hours}: need at least 1 and a positive number"
        )
    if args.engine != "local" and (args.resume or args.study or args.storage) is not None:
        raise ConfigError(
            "--resume, --study and --storage are for a local sweep; a W&B sweep goes on with "
            f"--engine {args.engine} --sweep-id ID"
        )
    if args.study is not None and (args.resume or args.storage) is not None:
        raise ConfigError(
            f"--study {args.study}: joins a sweep as it is; leave out --resume and --storage, "
            "which continue a sweep alone and choose a new sweep's database"
        )
    if args.storage is not None and not re.match(r"^[a-z][a-z0-9+]*://", args.storage):
        raise ConfigError(
            f"--storage {args.storage}: not a database URL; give one such as sqlite:///sweeps.db "
            "or postgresql://host/db, or leave it out for the journal file in the sweep's folder"
        )
    spec.distributions()  # a bad search space fails before any trial


def one_process_per_trial(base: BaseConfig) -> BaseConfig:
    """A trial trains in the sweep's own process: Lightning would start each further DDP rank
    as this command again, a sweep of its own. Devices auto (every GPU there is) becomes one
    device; more, or a launcher's several processes, are refused: the way to use several
    GPUs is a worker on each (--study)."""
    launch = current_launch()
    instead = "start one sweep worker per GPU or machine instead (--study SWEEP_DIR)"
    if launch.world_size > 1:
        raise ConfigError(
            f"{launch.launcher} started {launch.world_size} processes: a sweep runs in one; {instead}"
        )
    devices = getattr(base, "devices", None)  # a config of a Lightning part
    if devices == "auto":
        return dataclasses.replace(base, devices="1")
    if devices is not None and process_count(launch, devices, base.num_nodes) != 1:
        raise ConfigError(
            f"devices {devices!r} on num_nodes {base.num_nodes}: a trial trains in one process; {instead}"
        )
    return base


def find_sweep(base: BaseConfig, flag: str, named: str) -> tuple[Path, SweepState, IO[str]] | None:
    """Its state and this process's share of its lock; None when `--resume auto` finds none.
    Another engine or config than this command's is refused: its trials would not fit."""
    if flag == "--resume" and named == "auto":
        sweeps = base.runs_dir() / "sweeps"
        for path in newest_first(sweeps, base.name):
            state = SweepState.read(path)
            unfinished = state is not None and state.engine == "local" and state.status != "finished"
            # One another process runs is skipped.
            if unfinished and state.name == base.name and (lock := lock_sweep(path)) is not None:
                _check_same_sweep(state, base, "--resume auto")
                return path, state, lock
        print(f"--resume auto: no unfinished local '{base.name}' sweep in {sweeps}/, starting a new one")
        return None
    path = Path(named)
    if (state := SweepState.read(path)) is None:
        raise ConfigError(f"{flag} {named}: not a sweep directory (no readable {SWEEP_FILE})")
    _check_same_sweep(state, base, f"{flag} {named}")
    if (lock := lock_sweep(path, alone=flag == "--resume")) is None:
        raise ConfigError(
            f"--resume {named}: another process is running that sweep (pid {state.pid}); "
            f"to run it on more processes, start each with --study {named}"
        )
    return path, state, lock


def changes_to_the_trials(spec: SweepSpec, saved: BaseConfig, base: BaseConfig) -> list[str]:
    """The fields `base` changes from the sweep's saved config that decide what its trials learn
    from (as a resumed run's) or which metric ranks them: its trials would not compare."""

    def ranking(cfg: BaseConfig) -> tuple[Any, Any]:
        chosen = spec.for_config(cfg)
        return chosen.metric, chosen.goal

    changed = [f.name for f in dataclasses.fields(base) if getattr(base, f.name) != getattr(saved, f.name)]
    return [
        name
        for name in changed
        if name in base.kept_on_resume
        or ranking(dataclasses.replace(saved, **{name: getattr(base, name)})) != ranking(saved)
    ]


def _check_same_sweep(state: SweepState, base: BaseConfig, flag: str) -> None:
    if state.engine != "local":
        raise ConfigError(
            f"{flag}: that is a {state.engine} sweep; a W&B sweep goes on with "
            f"--engine wandb --sweep-id {state.wandb_sweep_id or 'ID'}"
        )
    if state.part and state.part != base.part():
        raise ConfigError(f"{flag}: that is a sweep of {state.part}; go on with python -m {state.part}.sweep")
    if (state.name, state.config_class) != (base.name, type(base).__name__):
        raise ConfigError(
            f"{flag}: that sweep is of config '{state.name}', this command's is "
            f"'{base.name}' (give --config {state.name})"
        )


def lock_sweep(sweep_dir: Path, alone: bool = True) -> IO[str] | None:
    """A share of the sweep's lock for this process's lifetime; with `alone`, taken only where
    no other process holds one (None while another worker runs the sweep). The kernel
    releases it however the process ends, kill -9 included."""
    with translate_write_errors(sweep_dir / LOCK_FILE):
        file = open(sweep_dir / LOCK_FILE, "a")  # noqa: SIM115 - held open while the sweep runs
    try:
        if alone:
            fcntl.flock(file, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        file.close()
        return None
    fcntl.flock(file, fcntl.LOCK_SH)  # then one worker among any that join
    return file
