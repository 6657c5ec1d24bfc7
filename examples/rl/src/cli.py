"""The training command line (CFG-3): `--config NAME`, per-field overrides, `--resume`.

Priority: dataclass defaults < the config class chosen by `--config` < CLI flags.
Field flags are generated from the dataclass by tyro (typed, with help and "did you
mean" hints), so a new config field is a new flag with nothing else to write.
Bad input exits with status 2 and a message that lists what is valid, before any
run directory exists.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import sys
import typing
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import NoReturn

import tyro

from src.config import BaseConfig, ConfigError
from src.data_checks import DataValidationError
from src.run_dir import find_latest_run, resolve_checkpoint, run_dir_of

USAGE = """\
Run options (everything else is a config field, see below):
  --config NAME   one of: {names} (default: {default})
  --resume PATH   continue a run: its run directory or a .ckpt file; the run's
                  config.json is the starting point and flags still override it
  --resume auto   continue the newest unfinished run of this config name, or start afresh
"""


def parse_cli(
    configs: Mapping[str, type[BaseConfig]], argv: Sequence[str] | None = None, prog: str | None = None
) -> tuple[BaseConfig, Path | None]:
    """Parse the command line into a config and the checkpoint to resume from (if any)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    default_name = next(iter(configs))
    pre = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    pre.add_argument("--config", default=default_name)
    pre.add_argument("--resume", default=None)
    run_args, field_args = pre.parse_known_args(argv)

    if "-h" in field_args or "--help" in field_args:
        print(USAGE.format(names=", ".join(configs), default=default_name))
    if run_args.config not in configs:
        _fail(f"unknown config '{run_args.config}'; valid names: {', '.join(configs)}")
    config_cls = configs[run_args.config]
    _reject_unknown_flags(config_cls, field_args, prog)

    cfg = _checked(tyro.cli(config_cls, default=config_cls(), args=field_args, prog=prog))
    if run_args.resume is None:
        return cfg, None

    checkpoint = _checkpoint_to_resume(cfg, run_args.resume)
    if checkpoint is None:
        print(f"--resume auto: no unfinished '{cfg.name}' run in {cfg.output.base_dir}/, starting afresh")
        return cfg, None
    # The resumed run keeps its own config; flags given now still win (e.g. a longer budget).
    saved_json = (run_dir_of(checkpoint) / "config.json").read_text()
    saved = config_cls.from_dict(json.loads(saved_json))
    return _checked(tyro.cli(config_cls, default=saved, args=field_args, prog=prog)), checkpoint


@contextlib.contextmanager
def exit_on_bad_input() -> Iterator[None]:
    """Bad data (DATA-1) or config values end the command with status 2 and the
    message, not a traceback."""
    try:
        yield
    except (DataValidationError, ConfigError) as error:
        _fail(str(error))


def _checked(cfg: BaseConfig) -> BaseConfig:
    try:
        cfg.validate()
    except ConfigError as error:
        _fail(str(error))
    return cfg


def _checkpoint_to_resume(cfg: BaseConfig, resume: str) -> Path | None:
    if resume == "auto":
        run_dir = find_latest_run(Path(cfg.output.base_dir), cfg.name)
        return None if run_dir is None else resolve_checkpoint(run_dir)
    try:
        checkpoint = resolve_checkpoint(Path(resume))
    except FileNotFoundError as error:
        _fail(f"--resume {resume}: {error}")
    if not (run_dir_of(checkpoint) / "config.json").is_file():
        _fail(f"--resume {resume}: {run_dir_of(checkpoint)} has no config.json, so it is not a run directory")
    return checkpoint


def _reject_unknown_flags(config_cls: type, args: Sequence[str], prog: str | None) -> None:
    valid = sorted(_flags(config_cls))
    spellings = {"--" + flag[2:].replace("-", "_") for flag in valid} | set(valid)
    unknown = [a for a in args if a.startswith("--") and a.split("=")[0] not in spellings | {"--help"}]
    if unknown:
        _fail(
            f"unknown option(s) {', '.join(unknown)}\n"
            f"valid options: --config, --resume, {', '.join(valid)}\n"
            f"types and defaults: {prog or 'this command'} --help"
        )


def _flags(config_cls: type, prefix: str = "") -> set[str]:
    flags: set[str] = set()
    for name, hint in typing.get_type_hints(config_cls).items():
        flag = prefix + name.replace("_", "-")
        if dataclasses.is_dataclass(hint):
            flags |= _flags(hint, flag + ".")
        else:
            flags |= {"--" + flag, "--no-" + flag} if hint is bool else {"--" + flag}
    return flags


def _fail(message: str) -> NoReturn:
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(2)
