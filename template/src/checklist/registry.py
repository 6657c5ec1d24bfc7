"""Checks by checklist ID and the part kinds each applies to; their results and report."""

from __future__ import annotations

import json
from collections import Counter
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
CHECKLIST_ORDER = "CFG STR LIT LOG PRF PRC RL MEM MAIN CB OPS OUT SWP RES DDP DATA"
SECTIONS = CHECKLIST_ORDER.split()
ESCAPED_BAR = r"\|"  # a | inside a Markdown table cell
STATUSES = ("pass", "fail", "skipped", "waived", "manual")


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


CHECKS: list[Check] = []


def check(id: str, title: str, applies_to: str = "all", *, mode: Mode = "static", sweep: bool = False):
    """Register a check of a checklist item: function(project) or function(run_dir)."""

    def register(function: Callable[..., str]) -> Callable[..., str]:
        CHECKS.append(Check(id, title, applies_to, mode, function, sweep))
        return function

    return register


def each_part(id: str, title: str, applies_to: str = "all", *, sweep: bool = False):
    """Register a static check made of function(project, part) for each part it applies to."""

    def register(function: Callable[..., None]) -> Callable[..., None]:
        def every(project: Any) -> str:
            parts = project.parts_of(TAGS[applies_to])
            for part in parts:
                function(project, part)
            return f"{', '.join(part.name for part in parts)}: {title}"

        CHECKS.append(Check(id, title, applies_to, "static", every, sweep))
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
        "needs a run killed mid-way, resumed, and compared with an uninterrupted one (the "
        "project's tests do this for each part; a finished run directory cannot show it)",
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
        "judging process health, trends, hangs and restarts needs a live job "
        "(the babysitter has its own tests)",
    ),
    (
        "OPS-4",
        "all",
        "a working practice: whether a record was written when it should have been is not in the code",
    ),
]


@dataclass
class Result:
    id: str
    mode: str  # static, run or manual
    status: Status
    why: str
    where: str = ""  # the run directory, for run checks

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "mode": self.mode, "status": self.status, "why": self.why, "where": self.where}


@dataclass
class Report:
    results: list[Result]
    automated: list[str]  # item IDs with at least one applicable check
    manual: list[str]  # item IDs no program checks here

    @property
    def failed(self) -> bool:
        return any(result.status == "fail" for result in self.results)

    def counts(self) -> dict[str, int]:
        found = Counter(result.status for result in self.results)
        return {status: found[status] for status in STATUSES}

    def summary(self) -> str:
        counts = ", ".join(f"{n} {status}" for status, n in self.counts().items())
        items = len(self.automated) + len(self.manual)
        automated, manual = len(self.automated), len(self.manual)
        return f"{items} checklist items apply: {automated} automated, {manual} manual. Results: {counts}."

    def groups(self) -> dict[str, list[Result]]:
        titles = {"static": "static (code)", "run": "run (no RUN_DIR given)", "manual": "manual"}
        found: dict[str, list[Result]] = {}
        for r in self.results:
            found.setdefault(f"run {r.where}" if r.where else titles[r.mode], []).append(r)
        return found


def as_json(report: Report) -> str:
    return json.dumps(
        {
            "items": {"automated": report.automated, "manual": report.manual},
            # Items (what applies) and results (one per check and run directory), counted apart.
            "items_counts": {"automated": len(report.automated), "manual": len(report.manual)},
            "counts": report.counts(),
            "failed": report.failed,
            "results": [result.as_dict() for result in report.results],
        },
        indent=2,
    )


def as_table(report: Report) -> str:
    lines = []
    for title, results in report.groups().items():
        lines += [f"== {title}"] + [f"  {r.status.upper():<8} {r.id:<7} {r.why}" for r in results]
    return "\n".join([*lines, report.summary()])


def as_markdown(report: Report) -> str:
    lines = ["# Checklist report", ""]
    for title, results in report.groups().items():
        lines += [f"## {title}", "", "| status | item | why |", "| --- | --- | --- |"]
        lines += [f"| {r.status} | {r.id} | {r.why.replace('|', ESCAPED_BAR)} |" for r in results]
        lines.append("")
    return "\n".join([*lines, report.summary()])


FORMATS = {"table": as_table, "json": as_json, "markdown": as_markdown}
