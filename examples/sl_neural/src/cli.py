"""The command lines (CFG-3): `--config NAME`, a flag for every config field, the command's
own options (`--resume`), all parsed by tyro. Priority: dataclass defaults < the config
chosen by `--config` < flags. Bad input exits with status 2 before a run directory exists."""

from __future__ import annotations

import contextlib
import dataclasses
import re
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

import tyro

from src.config import BaseConfig, ConfigError
from src.errors import DataValidationError, TrainingDiverged, fail, reader_may_stop_reading
from src.runs.atomic import WriteFailed, disk_full
from src.runs.checkpoint_checks import checkpoint_problem
from src.runs.directory import (
    CHECKPOINT_SUFFIXES,
    NEVER_CHECKPOINTED,
    find_latest_run,
    intact_checkpoint,
    marked_if_never_checkpointed,
    newest_first,
    run_dir_of,
    run_part,
    run_record,
)


@dataclasses.dataclass
class TrainOptions:
    """What `partN.train` takes beside the config's fields.

    Attributes:
        resume: Continue a run: its directory or a checkpoint file, or auto for this config's
            newest unfinished run. Its config.json replaces the named config's defaults; flags
            given now still override it (e.g. a longer budget).
    """

    resume: Annotated[str | None, tyro.conf.arg(metavar="PATH|auto")] = None


def parse_cli(
    configs: Mapping[str, type[BaseConfig]],
    argv: Sequence[str] | None = None,
    prog: str | None = None,
    description: str | None = None,
) -> tuple[BaseConfig, Path | None]:
    """A training command line's config and the checkpoint to resume from."""
    try:
        return _parse_cli(configs, argv, prog, description)
    except KeyboardInterrupt:  # Ctrl-C while the checks load the training libraries: nothing began
        print("interrupted before the run began", file=sys.stderr)
        raise SystemExit(130) from None


def _parse_cli(
    configs: Mapping[str, type[BaseConfig]],
    argv: Sequence[str] | None,
    prog: str | None,
    description: str | None,
) -> tuple[BaseConfig, Path | None]:
    # A resumed run's flags apply to its saved config, and are checked with it, not alone.
    cfg, options = parse_command(configs, TrainOptions, argv, prog, description, validate=False)
    checkpoint = None if options.resume is None else _checkpoint_to_resume(cfg, options.resume)
    if checkpoint is None:
        if options.resume is not None:
            print(f"--resume auto: no unfinished '{cfg.name}' run in {cfg.runs_dir()}/, starting afresh")
        with exit_on_bad_input():
            cfg.validate()
        return cfg, None
    run_dir = run_dir_of(checkpoint)
    record = run_record(run_dir)
    other = run_part(record)
    if other and cfg.part() and other != cfg.part():
        fail(f"--resume {options.resume}: that is a run of {other}; resume it with python -m {other}.train")
    config_path = run_dir / "config.json"
    try:
        saved = type(cfg).from_json(config_path.read_text())
    except (OSError, ValueError, TypeError) as error:
        # Fields the config class no longer has: the run of older code, not a damaged file.
        why = "a run of code that had them (an earlier release, or fields you removed)"
        if "unknown field(s)" not in str(error):
            why = "another part's run, or a damaged file"
        fail(f"--resume {options.resume}: {config_path} is not a {type(cfg).__name__} ({why}): {error}")
    cfg, _ = parse_command(configs, TrainOptions, argv, prog, description, start_from=saved)
    from src.runs.provenance import same_data_file  # here: psutil and pynvml load with it

    changed = [name for name in cfg.kept_on_resume if getattr(cfg, name) != getattr(saved, name)]
    # A table found at another path (a moved project, another spelling) is the run's own.
    if changed := [
        name for name in changed if not same_data_file(getattr(cfg, name), getattr(saved, name), record)
    ]:
        fail(
            f"--resume {options.resume}: {as_flags(changed)} would change what a run under way learns "
            "from (its data, its splits or its environment) or what it predicts; start a new run, "
            "without --resume, to change them"
        )
    return cfg, checkpoint


def variant_problem(configs: Mapping[str, type[BaseConfig]]) -> str | None:
    """A variant that declares a field its task config (the least derived) has not: a misspelt
    override becomes a new flag that nothing reads, and the field it meant keeps its value."""
    task = min(configs.values(), key=lambda cls: len(cls.__mro__))
    known = {field.name for field in dataclasses.fields(task)}
    for name, cls in configs.items():
        if added := sorted({field.name for field in dataclasses.fields(cls)} - known):
            return (
                f"config '{name}' ({cls.__name__}) declares {', '.join(added)}, which {task.__name__} has "
                "not (a misspelt field?): a variant sets fields of its config; declare a new one there"
            )
    return None


def as_flags(fields: Sequence[str]) -> str:
    """Config fields as the command line spells them: learning_rate -> --learning-rate."""
    return " ".join(f"--{name.replace('_', '-')}" for name in fields)


def parse_command(
    configs: Mapping[str, type[BaseConfig]],
    options_cls: type,
    argv: Sequence[str] | None = None,
    prog: str | None = None,
    description: str | None = None,
    start_from: BaseConfig | None = None,
    validate: bool = True,
) -> tuple[BaseConfig, Any]:
    """`--config NAME`, the fields of `options_cls` and every config field; `start_from`
    replaces the named config's defaults (a resumed run's config)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    names = tuple(configs)
    if problem := variant_problem(configs):
        fail(problem)
    # Looked up before tyro parses: the config named decides the defaults the flags override.
    name = _config_named_in(argv)
    if name is not None and name not in configs:
        fail(f"--config {name!r}: no such config; this part's are {', '.join(map(repr, names))}")
    name = name or names[0]
    config_help = (
        f"Which of this part's configs to start from ({', '.join(names)}); the flags below "
        "override its fields."
    )
    command_cls = dataclasses.make_dataclass(
        "Command",
        [
            ("config", Annotated[Literal[names], tyro.conf.arg(help=config_help, metavar="NAME")]),
            ("options", Annotated[options_cls, tyro.conf.arg(name="")]),
            ("cfg", Annotated[configs[name], tyro.conf.arg(name="")]),
        ],
    )
    default = command_cls(config=name, options=options_cls(), cfg=start_from or configs[name]())
    command = parse_options(command_cls, argv, prog, description, default=default)
    if validate:
        with exit_on_bad_input():
            command.cfg.validate()
    return command.cfg, command.options


def parse_options(
    options_cls: type,
    argv: Sequence[str] | None = None,
    prog: str | None = None,
    description: str | None = None,
    default: Any = None,
) -> Any:
    """A command's options (a dataclass) from its command line."""
    # tyro joins a description's lines into one paragraph: only the summary reads well.
    summary = description.strip().split("\n\n")[0] if description else None
    with reader_may_stop_reading():
        return tyro.cli(options_cls, default=default, args=argv, prog=prog, description=summary)


def _config_named_in(argv: Sequence[str]) -> str | None:
    """The value of the last `--config NAME` or `--config=NAME` in argv."""
    found = None
    for position, arg in enumerate(argv):
        if arg == "--config" and position + 1 < len(argv) and not argv[position + 1].startswith("--"):
            found = argv[position + 1]
        elif arg.startswith("--config="):
            found = arg.partition("=")[2]
    return found


@contextlib.contextmanager
def exit_on_bad_input() -> Iterator[None]:
    """Errors of the input, not of the code, end the command with status 2 and one line;
    any other error keeps its traceback."""
    try:
        yield
    except Exception as error:
        if (message := bad_input_message(error)) is None:
            raise
        fail(message)


# Ours, raised where the input is at fault: their messages are written to be read whole.
INPUT_ERRORS = (DataValidationError, ConfigError, TrainingDiverged, WriteFailed)


def checkpoint_does_not_fit(error: BaseException) -> bool:
    """torch's words when a checkpoint's weights do not fit the model: a resume whose flags
    changed the model's shape (its layer sizes, say)."""
    return isinstance(error, RuntimeError) and str(error).startswith("Error(s) in loading state_dict")


def bad_input_message(error: Exception) -> str | None:
    """The one-line message of an error the input caused (bad data, config values, training
    that diverged on them, a full disk, sizes beyond the machine's memory), else None."""
    if isinstance(error, INPUT_ERRORS):
        return str(error)
    if (failed := disk_full(error)) is not None:  # a library's write (a logger's, the profiler's)
        return str(failed)
    text = str(error)
    # torch reports CPU allocations that fail as a plain RuntimeError; CUDA's as its
    # OutOfMemoryError, a RuntimeError too. Neither is worth a traceback.
    if isinstance(error, MemoryError) or (
        isinstance(error, RuntimeError) and ("out of memory" in text or "can't allocate memory" in text)
    ):
        size = re.search(r"allocate (\d+) bytes", text)
        detail = f"{int(size[1]) / 2**30:.1f} GiB more were asked for" if size else text.split("\n")[0][:200]
        return (
            f"out of memory ({detail}): the config's sizes need more memory than this machine has; "
            "lower the batch, model or data sizes"
        )
    if checkpoint_does_not_fit(error):
        detail = next((line.strip() for line in text.splitlines()[1:] if line.strip()), text)[:200]
        return (
            f"the checkpoint does not fit the model this config builds ({detail}); "
            "give the model settings it was trained with, or train a new run"
        )
    return None


def _checkpoint_to_resume(cfg: BaseConfig, resume: str) -> Path | None:
    """The checkpoint `--resume` names, checked intact (RES-1); a run directory (or auto)
    continues from its newest intact checkpoint, saying which it skipped."""
    path = Path(resume)
    if resume == "auto":
        runs = newest_first(cfg.runs_dir(), cfg.name)
        if dead := [run_dir for run_dir in runs if marked_if_never_checkpointed(run_dir)]:
            print(
                f"--resume auto: passing over {len(dead)} run(s) that died before their first "
                f"checkpoint (run.json status {NEVER_CHECKPOINTED}), e.g. {dead[0]}; the README says "
                "how to delete them",
                file=sys.stderr,
            )
        run_dir = find_latest_run(cfg.runs_dir(), cfg.name, cfg.part())
        if run_dir is None:
            return None
    elif path.is_file():
        if path.suffix not in CHECKPOINT_SUFFIXES:
            fail(f"--resume {resume}: not a run directory or a checkpoint ({', '.join(CHECKPOINT_SUFFIXES)})")
        if problem := checkpoint_problem(path):
            fail(f"--resume {resume}: it is {problem}; give the run directory to use its newest intact one")
        run_dir = run_dir_of(path)
    elif path.is_dir():
        run_dir = path
    else:
        fail(f"--resume {resume}: does not exist")
    if not (run_dir / "config.json").is_file():
        fail(f"--resume {resume}: {run_dir} has no config.json, so it is not a run directory")
    if path.is_file():
        return path
    checkpoint, skipped = intact_checkpoint(run_dir)
    if checkpoint is None:
        found = "; ".join(skipped) or "none yet"
        fail(f"--resume {resume}: no intact checkpoint in {run_dir} ({found}); start afresh without it")
    for problem in skipped:
        print(f"warning: {problem}: resuming from {checkpoint.relative_to(run_dir)} instead", file=sys.stderr)
    return checkpoint
