"""The config hierarchy every part shares (CFG-1, CFG-2): BaseConfig, here -> the levels its
part kind adds in src/ (the Lightning parts' LightningConfig, then SLNeuralConfig or RLConfig;
SLTreeConfig) -> a part's config -> its variants, which override only the fields that differ
(CFG-6). Each field's --help line is in its class's Attributes docstring, where tyro reads it."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal, Self

from src.project import PROJECT_SLUG, WANDB_ENTITY

# config.json's record, beside the fields, of what a run used where its config left the choice
# to the machine or to Lightning (precision "auto", the batch size BatchSizeFinder found).
USED_KEY = "used"
PART = "{part}"  # in output.base_dir: the folder name of the part the config belongs to
MAX_COUNT = 2**31 - 1  # the largest count torch, XGBoost and the OS take

LoggerName = Literal["wandb", "tensorboard", "csv"]


class ConfigError(ValueError):
    """A config value is out of its valid range; the message lists every such field."""


def first_line(error: BaseException) -> str:
    """Another library's error, fit for a one-line message of ours; its type where it says nothing."""
    text = str(error).strip()
    return text.splitlines()[0][:200].rstrip(".") if text else type(error).__name__


@dataclass
class OutputConfig:
    """Where runs are written: {base_dir}/{name}_{YYYYMMDD_HHMMSS}/ (OUT-1).

    Attributes:
        base_dir: Folder of the run directories, relative to the working directory; {part} stands
            for the part's folder (part1, ...), so each part keeps to its own runs.
        report: Draw report.md and its figures when the run ends (about 2 s on a CPU); without
            it, `python -m src.report RUN_DIR` draws them later.
    """

    base_dir: str = f"output/{PART}"
    report: bool = True


@dataclass
class AlertConfig:
    """Who hears of a run's trouble, and what counts as trouble (src.ops.alerts). Every alert is
    printed, recorded in run.json and sent to W&B when the run logs there online.

    Attributes:
        webhook_url: URL that gets each alert as a JSON POST with a "text" field (Slack,
            Mattermost); a URL that holds a token belongs in ALERT_WEBHOOK_URL instead.
        email_to: Comma-separated addresses that get each alert by email.
        smtp_server: host:port of the SMTP server that sends the emails (465: TLS); it logs in as
            ALERT_SMTP_USER with ALERT_SMTP_PASSWORD where those are set.
        stalled_evaluations: Validations (boosting rounds for trees) without improvement of the
            monitored metric that raise a `stalled` alert; 0 raises none.
        gpu_utilization_below: GPU use, in percent, below which 3 readings in a row raise a `low
            GPU use` alert; 0 raises none. Read only where the run trains on a GPU.
        gpu_memory_above: Share of GPU memory in use, in percent, above which a reading raises a
            `GPU memory` alert; 100 raises none.
        on_finish: Also alert when a run finishes.
        timeout_seconds: Seconds an email or webhook may take, in the background, before it is
            given up with a warning.
    """

    webhook_url: str = ""
    email_to: str = ""
    smtp_server: str = "localhost:25"
    stalled_evaluations: int = 0
    gpu_utilization_below: float = 20.0
    gpu_memory_above: float = 95.0
    on_finish: bool = False
    timeout_seconds: float = 10.0

    def problems(self) -> list[str]:
        found = [f"alerts.{problem}" for problem in at_least(self, stalled_evaluations=0)]
        if self.webhook_url and not re.match(r"https?://[^/\s]+", self.webhook_url):
            found.append(f"alerts.webhook_url {self.webhook_url!r}: use an http:// or https:// URL")
        addresses = [address.strip() for address in self.email_to.split(",") if address.strip()]
        if bad := [address for address in addresses if not re.fullmatch(r"[^@\s]+@[^@\s]+", address)]:
            found.append(f"alerts.email_to {bad[0]!r}: not an email address; give name@host, comma-separated")
        if not re.fullmatch(r"[^:\s]+:[0-9]{1,5}", self.smtp_server):
            found.append(f"alerts.smtp_server {self.smtp_server!r}: use host:port, e.g. smtp.example.com:587")
        for name in ("gpu_utilization_below", "gpu_memory_above"):
            if not 0 <= (value := getattr(self, name)) <= 100:
                found.append(f"alerts.{name} {value}: must be a percentage, 0 to 100")
        if not 0 < (seconds := self.timeout_seconds) <= 600:
            found.append(f"alerts.timeout_seconds {seconds}: must be more than 0 and at most 600")
        return found


@dataclass
class BaseConfig:
    """Fields every part has, whatever its kind.

    Attributes:
        name: Name of the run; its directory is {output.base_dir}/{name}_{YYYYMMDD_HHMMSS}/.
        seed: Seed of every random number generator (model init, data order, environments).
        max_wall_clock_hours: Training stops after this many hours, keeping its checkpoints;
            the final test follows.
        output: Where runs are written.
        stop_file: Creating this file, relative to the working directory (or STOP in the run
            directory), stops the run after the current epoch.
        loggers: Where metrics go beside metrics.jsonl, any of: wandb, tensorboard (the run's
            tensorboard/), csv (the run's csv/). W&B is off without wandb, whatever wandb_mode says.
        wandb_mode: W&B logging: auto is online with an API key, else offline; disabled logs nothing.
        wandb_project: W&B project the runs are logged to.
        wandb_entity: W&B team or user the project belongs to; empty for your default entity.
        alerts: When a run raises alerts, and where they go besides the console and run.json.
    """

    name: str = "baseline"
    seed: int = 42
    max_wall_clock_hours: float = 24.0
    output: OutputConfig = field(default_factory=OutputConfig)
    stop_file: str = "STOP"
    loggers: tuple[LoggerName, ...] = ("wandb",)
    wandb_mode: Literal["auto", "online", "offline", "disabled"] = "auto"
    wandb_project: str = PROJECT_SLUG
    wandb_entity: str = WANDB_ENTITY
    alerts: AlertConfig = field(default_factory=AlertConfig)
    # Fields a resume may not change, each level adding its own: what the run learns from (which
    # rows train, validate and test; its environment) and what it predicts stay as it began.
    kept_on_resume: ClassVar[tuple[str, ...]] = ()

    def problems(self) -> list[str]:
        """What is wrong with these values (CFG-3), one line each; each level adds its own fields'."""
        found = []
        for name, value in ((f.name, getattr(self, f.name)) for f in dataclasses.fields(self)):
            if isinstance(value, float) and not math.isfinite(value):
                found.append(f"{name} {value}: must be a finite number")
            counts = [v for v in (value if isinstance(value, tuple) else (value,)) if type(v) is int]
            if name != "seed" and max(counts, default=0) > MAX_COUNT:
                found.append(
                    f"{name} {value}: must be at most {MAX_COUNT} (the largest count the libraries take)"
                )
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}", self.name):
            found.append(
                f"name {self.name!r}: use up to 100 letters, digits, '_', '.' and '-' "
                "(it names the run directory)"
            )
        if not 0 <= self.seed < 2**32:
            found.append(f"seed {self.seed}: must be in 0 .. 2**32-1 (what numpy and torch accept)")
        if not 0 < self.max_wall_clock_hours <= 24 * 366:
            hours = self.max_wall_clock_hours
            found.append(f"max_wall_clock_hours {hours}: must be more than 0 and at most 8784 (a year)")
        if refused := _refused_path(Path(self.stop_file)):
            found.append(f"stop_file {self.stop_file!r}: {refused}")
        elif not self.stop_file.strip() or Path(self.stop_file).is_dir():
            found.append(f"stop_file {self.stop_file!r}: must name a file, not a folder, e.g. STOP")
        if not re.fullmatch(r"[^/\\#?%:]{1,128}", self.wandb_project):
            found.append(
                f"wandb_project {self.wandb_project!r}: W&B project names are 1 to 128 characters "
                "without / \\ # ? % :"
            )
        valid_loggers = ", ".join(typing.get_args(LoggerName))
        if not self.loggers:
            found.append(f"loggers: name at least one of {valid_loggers}")
        elif len(set(self.loggers)) < len(self.loggers):
            found.append(f"loggers {' '.join(self.loggers)}: name each at most once, from {valid_loggers}")
        return found + self.alerts.problems() + _wandb_problems(self) + _output_problems(self.runs_dir())

    @classmethod
    def part(cls) -> str:
        """The folder of the part this config belongs to (part1, ...): the package its class, or
        the nearest class it inherits from outside src/, is defined in; "" outside a package."""
        for level in cls.__mro__:
            package, _, module = level.__module__.partition(".")
            if module and package != "src":
                return package
        return ""

    def runs_dir(self) -> Path:
        return Path(self.output.base_dir.replace(PART, self.part()))

    def validate(self) -> None:
        try:
            found, broken = self.problems(), None
        except (TypeError, ValueError) as error:  # a check met a value of another type than its field's
            found, broken = [], error
        if not found:  # a variant's default of 2.5 for an int, say: what config.json would refuse
            try:
                type(self).from_dict(self.to_dict())
            except (TypeError, ValueError) as error:
                found = [first_line(error)]
        if broken is not None and not found:
            raise broken
        if found:
            raise ConfigError(f"config '{self.name}' cannot run:\n  " + "\n  ".join(found))

    def to_dict(self) -> dict[str, Any]:
        return json.loads(json.dumps(dataclasses.asdict(self)))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Self:
        """The config of a `to_dict()`, or of a run's config.json (its USED_KEY is no field);
        an unknown key or a value of the wrong type is an error (CFG-2)."""
        if isinstance(data, dict):
            data = {key: value for key, value in data.items() if key != USED_KEY}
        return _build(cls, data)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Self:
        return cls.from_dict(json.loads(text))


def _refused_path(path: Path) -> str | None:
    """Why the system refuses the path itself (a name too long, say); None when it takes it."""
    try:
        path.exists()
    except OSError as error:
        return f"the system refuses it ({error.strerror})"
    return None


def _wandb_problems(cfg: BaseConfig) -> list[str]:
    """Online W&B without an API key would stop at a login prompt, or fail, after the run began."""
    from src.wandb_utils import api_key_configured, chosen_wandb_mode  # here: it imports this module

    if chosen_wandb_mode(cfg) != "online" or api_key_configured():
        return []
    return [
        f"wandb_mode {cfg.wandb_mode!r}: W&B online needs an API key (`wandb login` or WANDB_API_KEY); "
        "use offline to sync later, or disabled"
    ]


def _output_problems(base_dir: Path) -> list[str]:
    """Run directories can be made under base_dir: the nearest folder that exists is writable."""
    if refused := _refused_path(base_dir):
        return [f"output.base_dir {str(base_dir)!r}: {refused}"]
    existing = next(path for path in (base_dir, *base_dir.absolute().parents) if path.exists())
    if not existing.is_dir():
        return [f"output.base_dir {str(base_dir)!r}: {existing} is not a folder"]
    # The folders still to be made: the system checks their names only when it makes them.
    longest = os.pathconf(existing, "PC_NAME_MAX")
    to_make = base_dir.absolute().relative_to(existing.absolute()).parts
    if too_long := next((part for part in to_make if len(os.fsencode(part)) > longest), None):
        size = len(os.fsencode(too_long))
        return [f"output.base_dir: a folder name is {size} bytes ({too_long[:40]}...); the most is {longest}"]
    if not os.access(existing, os.W_OK | os.X_OK):
        return [f"output.base_dir {str(base_dir)!r}: {existing} is not writable by this user"]
    return []


def at_least(config: object, **minimums: float) -> list[str]:
    return [
        f"{name} {getattr(config, name)}: must be at least {minimum}"
        for name, minimum in minimums.items()
        if getattr(config, name) < minimum
    ]


def split_problems(val_fraction: float, test_fraction: float) -> list[str]:
    if val_fraction > 0 and test_fraction > 0 and val_fraction + test_fraction < 1:
        return []
    return [
        f"val_fraction {val_fraction} and test_fraction {test_fraction}: "
        "each must be positive and together less than 1 (the rest trains)"
    ]


def _build(cls: type, data: dict[str, Any]) -> Any:
    if not isinstance(data, dict):
        raise TypeError(f"{cls.__name__}: expected a JSON object, got {type(data).__name__}")
    known = {f.name for f in dataclasses.fields(cls)}
    if unknown := sorted(set(data) - known):
        raise ValueError(
            f"{cls.__name__}: unknown field(s) {', '.join(unknown)}; valid fields: {', '.join(sorted(known))}"
        )
    hints = typing.get_type_hints(cls)
    return cls(**{key: _convert(hints[key], value, key) for key, value in data.items()})


def _convert(hint: Any, value: Any, name: str) -> Any:
    """Undo what JSON does to a field's type (nested configs, tuples), and refuse a value of
    another type: config.json is a file people edit, and a string where a number belongs
    would fail much later, inside the checks or the training."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if dataclasses.is_dataclass(hint):
        return _build(hint, value)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        for option in (arg for arg in args if arg is not type(None)):
            try:
                return _convert(option, value, name)
            except TypeError:
                continue
    elif origin is Literal:
        if value in args:
            return value
    elif origin is tuple:
        if isinstance(value, list | tuple):
            items = args[:1] * len(value) if len(args) == 2 and args[1] is Ellipsis else args
            if len(items) == len(value):
                return tuple(_convert(item, one, name) for item, one in zip(items, value, strict=True))
    elif hint is float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return value
    elif hint in (int, str, bool):
        if type(value) is hint:
            return value
    else:
        return value
    raise TypeError(f"{name} {json.dumps(value)}: not {_type_name(hint)}")


def _type_name(hint: Any) -> str:
    """How a field's type reads in an error: 'an int', 'one of "auto", "cpu"'."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is Literal:
        return "one of " + ", ".join(json.dumps(arg) for arg in args)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_name(arg) for arg in args if arg is not type(None)) + " or null"
    if origin is tuple:
        return "a list of " + (f"{_type_name(args[0])}s" if args[-1] is Ellipsis else f"{len(args)} values")
    return {int: "an int", float: "a number", str: "a string", bool: "true or false"}.get(hint, str(hint))
