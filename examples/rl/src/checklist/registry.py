"""Checks by checklist ID, the part kinds each applies to, their results, and the items
no program can check honestly."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

Status = Literal["pass", "fail", "skipped", "manual", "waived"]
Mode = Literal["static", "run"]

# Applicability tags, as the checklist writes them: "nn" = the Lightning parts.
TAGS = {
    "all": {"sl_neural", "sl_tree", "rl"},
    "nn": {"sl_neural", "rl"},
    "sl": {"sl_neural", "sl_tree"},
    "sl_neural": {"sl_neural"},
    "tree": {"sl_tree"},
    "rl": {"rl"},
}
SECTIONS = [
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
]


def id_order(item: str) -> tuple[int, int]:
    """Sort key of an item ID in the checklist's order: CFG-1, CFG-2, ..., DATA-1."""
    section, _, number = item.partition("-")
    position = SECTIONS.index(section) if section in SECTIONS else len(SECTIONS)
    return position, int(number) if number.isdigit() else 0


class Failed(Exception):
    """A check found the item not satisfied; the message says where and why."""


class Skipped(Exception):
    """A check could not decide (e.g. W&B was off for the run); the message says why."""


def require(condition: object, message: str) -> None:
    if not condition:
        raise Failed(message)


@dataclass(frozen=True)
class Check:
    id: str
    title: str
    applies_to: str  # a key of TAGS
    mode: Mode
    function: Callable[..., str]  # returns why it passed; raises Failed or Skipped
    sweep_only: bool = False

    def applies(self, kinds: set[str], has_sweep: bool) -> bool:
        return bool(kinds & TAGS[self.applies_to]) and (has_sweep or not self.sweep_only)


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


def check(id: str, title: str, applies_to: str = "all", *, mode: Mode = "static", sweep: bool = False):
    """Register a check function under a checklist ID."""

    def register(function: Callable[..., str]) -> Callable[..., str]:
        CHECKS.append(Check(id, title, applies_to, mode, function, sweep))
        return function

    return register


def run_check(item: Check, *args: Any) -> tuple[Status, str]:
    try:
        return "pass", item.function(*args)
    except Failed as failure:
        return "fail", str(failure)
    except Skipped as skip:
        return "skipped", str(skip)


MANUAL = [  # (ID, applies to, why no program checks it here)
    (
        "RES-1",
        "all",
        "needs a run killed mid-way, resumed, and compared with an uninterrupted one "
        "(the project's tests do this for each part; a finished run directory cannot show it)",
    ),
    (
        "DDP-2",
        "all",
        "which process prepared the data, and that the others waited, leaves no trace in a run "
        "directory; Lightning calls prepare_data once per node and holds the other ranks at a barrier",
    ),
    (
        "OPS-3",
        "all",
        "judging process health, trends, hangs and restarts needs a live job (the babysitter "
        "has its own tests)",
    ),
    (
        "OPS-4",
        "all",
        "a working practice: whether a record was written when it should have been is not in the code",
    ),
]
