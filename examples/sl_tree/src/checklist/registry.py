"""Checks by checklist ID, which part kinds each applies to, and their results."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

Status = Literal["pass", "fail", "skipped", "manual", "waived"]
Mode = Literal["static", "run"]

KIND_NAMES = ("sl_neural", "sl_tree", "rl")
# Applicability tags: "nn" = the Lightning parts, "sl" = the supervised parts.
TAGS = {
    "all": set(KIND_NAMES),
    "nn": {"sl_neural", "rl"},
    "sl": {"sl_neural", "sl_tree"},
    "tree": {"sl_tree"},
    "rl": {"rl"},
    "sweep": set(KIND_NAMES),
}


def kinds_of(tags: tuple[str, ...]) -> set[str]:
    """The part kinds every one of these tags covers."""
    return set.intersection(*(TAGS[tag] for tag in tags))


def applies(tags: tuple[str, ...], kinds: set[str], has_sweep: bool) -> bool:
    """Whether an item with these tags applies to a project with these part kinds."""
    if "sweep" in tags and not has_sweep:
        return False
    return all(kinds & TAGS[tag] for tag in tags)


# The checklist's sections, in its order: reports list items this way.
SECTIONS = (
    "CFG",
    "STR",
    "LIT",
    "LOG",
    "PRF",
    "PRC",
    "RL",
    "MEM",
    "MAIN",
    "CB",
    "OPS",
    "OUT",
    "SWP",
    "RES",
    "DDP",
    "DATA",
)


def id_order(item: str) -> tuple[int, int]:
    """Sort key of an item ID in checklist order: CFG-1, CFG-2, ..., DATA-1."""
    section, _, number = item.partition("-")
    position = SECTIONS.index(section) if section in SECTIONS else len(SECTIONS)
    return position, int(number) if number.isdigit() else 0


class Failed(Exception):
    """A check found the item not satisfied; the message says where and why."""


def require(condition: object, message: str) -> None:
    """Fail the check with `message` unless `condition` holds."""
    if not condition:
        raise Failed(message)


class Skipped(Exception):
    """A check could not decide (e.g. W&B was off for the run); the message says why."""


@dataclass(frozen=True)
class Check:
    id: str
    title: str
    applies_to: tuple[str, ...]  # tags from TAGS; every one must hold
    mode: Mode
    function: Callable[..., str]  # returns why it passed; raises Failed or Skipped

    def applies(self, kinds: set[str], has_sweep: bool) -> bool:
        return applies(self.applies_to, kinds, has_sweep)

    def kinds(self) -> set[str]:
        """The part kinds this check looks at."""
        return kinds_of(self.applies_to)


@dataclass
class Result:
    id: str
    mode: str  # static, run or manual
    status: Status
    why: str
    where: str = ""  # the run directory, for run checks

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "mode": self.mode, "status": self.status, "why": self.why, "where": self.where}


CHECKS: list[Check] = []


def check(id: str, title: str, *applies_to: str, mode: Mode = "static") -> Callable:
    """Register a check function under a checklist ID."""

    def register(function: Callable[..., str]) -> Callable[..., str]:
        CHECKS.append(Check(id, title, applies_to or ("all",), mode, function))
        return function

    return register


def run_check(item: Check, *args: Any) -> tuple[Status, str]:
    try:
        return "pass", item.function(*args)
    except Failed as failure:
        return "fail", str(failure)
    except Skipped as skip:
        return "skipped", str(skip)
