"""Checks by checklist ID and the part kinds each applies to; their results and report."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from typing import Any

# Applicability tags, as the checklist writes them: "nn" = the Lightning parts.
TAGS = {"all": {"sl_neural", "sl_tree", "rl"}, "nn": {"sl_neural", "rl"}, "sl": {"sl_neural", "sl_tree"}}
TAGS |= {"sl_neural": {"sl_neural"}, "tree": {"sl_tree"}, "rl": {"rl"}}
CHECKLIST_ORDER = "CFG STR LIT LOG PRF PRC RL MEM MAIN CB OPS OUT SWP RES DDP DATA"
SECTIONS = CHECKLIST_ORDER.split()
ESCAPED_BAR = r"\|"  # a | inside a Markdown table cell
STATUSES = ("pass", "fail", "skipped", "waived", "manual")
WORST_FIRST = ("fail", "skipped", "waived", "manual", "pass")  # an item's status: its worst result's
MANUAL = {  # items of every part kind that no program checks here, and why
    "RES-1": "needs a run killed mid-way, resumed, and compared with an uninterrupted one (the "
    "project's tests do this for each part; a finished run directory cannot show it)",
    "DDP-2": "which process prepared the data, and that the others waited, leaves no trace in a run "
    "directory; Lightning calls prepare_data once per node and holds the other ranks at a barrier",
    "OPS-3": "judging process health, trends, hangs and restarts needs a live job "
    "(the babysitter has its own tests)",
    "OPS-4": "a working practice: whether a record was written when it should have been is not in the code",
}


def id_order(item: str) -> tuple[int, int]:
    section, _, number = item.partition("-")
    return SECTIONS.index(section), int(number)


class BadInput(ValueError):
    """A RUN_DIR that is not a run directory, or a malformed waiver (exit status 2)."""


class Failed(Exception):
    status = "fail"


class Skipped(Exception):  # a check could not decide (e.g. W&B was off for the run); says why
    status = "skipped"


def require(condition: object, message: str) -> None:
    if not condition:
        raise Failed(message)


def lacks(what: str, wanted: Iterable[str], present: Any) -> None:
    missing = [key for key in wanted if key not in present]
    require(not missing, f"{what} lacks {', '.join(missing)}")


@dataclass(frozen=True)
class Check:
    id: str
    title: str  # also what a pass reports, unless the check returns more
    applies_to: str  # a key of TAGS
    mode: str  # static (given the Project) or run (given a RunDir)
    function: Callable[..., str | None]  # raises Failed or Skipped
    sweep_only: bool = False

    def applies(self, kinds: set[str], has_sweep: bool) -> bool:
        return bool(kinds & TAGS[self.applies_to]) and (has_sweep or not self.sweep_only)

    def outcome(self, *args: Any) -> tuple[str, str]:
        try:
            return "pass", self.function(*args) or self.title
        except (Failed, Skipped) as found:
            return found.status, str(found)


CHECKS: list[Check] = []


def check(id: str, title: str, applies_to: str = "all", *, mode: str = "static", sweep: bool = False):
    """Register function(project) or function(run_dir) as a check of a checklist item."""
    return lambda function: CHECKS.append(Check(id, title, applies_to, mode, function, sweep)) or function


def rules(item: str, title: str, applies_to: str, *checks: Callable[[Any, Any], object], sweep: bool = False):
    """Register an item checked on each part it applies to by all of `checks`(project, part);
    a failure's message starts with the part's name. A check that returns a text has passed the
    part on other terms (the item does not apply to it as written): the pass says so for it."""

    def every(project: Any) -> str:
        parts = [part for part in project.parts if part.kind in TAGS[applies_to]]
        terms: dict[str, str] = {}
        for part, rule in itertools.product(parts, checks):
            try:
                if isinstance(said := rule(project, part), str):
                    terms[part.name] = said
            except Failed as failure:
                named = str(failure).startswith(part.name)
                raise Failed(str(failure) if named else f"{part.name}: {failure}") from None
        as_written = [part.name for part in parts if part.name not in terms]
        passes = [f"{', '.join(as_written)}: {title}"] if as_written else []
        return "; ".join(passes + [f"{name}: {said}" for name, said in terms.items()])

    CHECKS.append(Check(item, title, applies_to, "static", every, sweep))


def each_part(id: str, title: str, applies_to: str = "all", *, sweep: bool = False):
    """Register function(project, part) as the check of an item on each part it applies to."""
    return lambda function: rules(id, title, applies_to, function, sweep=sweep) or function


@dataclass
class Result:
    id: str
    mode: str  # static, run or manual
    status: str  # one of STATUSES
    why: str
    where: str = ""  # the run directory, for run checks


@dataclass
class Report:
    results: list[Result]
    automated: list[str]  # item IDs with at least one applicable check
    manual: list[str]  # item IDs no program checks here

    @property
    def failed(self) -> bool:
        return any(result.status == "fail" for result in self.results)

    def counts(self) -> dict[str, int]:
        return {status: sum(result.status == status for result in self.results) for status in STATUSES}

    def item_counts(self) -> dict[str, int]:
        """Each item once, by its worst result (a fail, then a skip, ...); an item without a
        result (its run check found no run directory of its kind) is counted unchecked."""
        found = [{r.status for r in self.results if r.id == item} for item in self.automated + self.manual]
        worst = [next((s for s in WORST_FIRST if s in statuses), "unchecked") for statuses in found]
        unchecked = {"unchecked": worst.count("unchecked")} if "unchecked" in worst else {}
        return {status: worst.count(status) for status in STATUSES} | unchecked

    def summary(self, between: str = "\n") -> str:
        """Items (each once, whatever its parts and checks), then the checks' results."""
        automated, manual = len(self.automated), len(self.manual)
        items = ", ".join(f"{n} {status}" for status, n in self.item_counts().items())
        counts = ", ".join(f"{n} {status}" for status, n in self.counts().items())
        said = (
            f"{automated + manual} checklist items apply ({automated} automated, {manual} manual): {items}."
        )
        per = "a static check covers every part it applies to; a run check, one run directory"
        return f"{said}{between}{len(self.results)} results ({per}): {counts}."

    def groups(self) -> dict[str, list[Result]]:
        titles = {"static": "static (code)", "run": "run (no RUN_DIR given)", "manual": "manual"}
        found: dict[str, list[Result]] = {}
        for r in self.results:
            found.setdefault(f"run {r.where}" if r.where else titles[r.mode], []).append(r)
        return found

    def as_json(self) -> str:
        items = {"automated": self.automated, "manual": self.manual}
        # Items (what applies) and results (one per check and run directory), counted apart.
        counts = {"items_counts": {k: len(v) for k, v in items.items()}, "counts": self.counts()}
        counts["item_statuses"] = self.item_counts()
        results = [asdict(result) for result in self.results]
        return json.dumps({"items": items, **counts, "failed": self.failed, "results": results}, indent=2)

    def as_table(self) -> str:
        lines = []
        for title, results in self.groups().items():
            lines += [f"== {title}"] + [f"  {r.status.upper():<8} {r.id:<7} {r.why}" for r in results]
        return "\n".join([*lines, self.summary()])

    def as_markdown(self) -> str:
        lines = ["# Checklist report", ""]
        for title, results in self.groups().items():
            lines += [f"## {title}", "", "| status | item | why |", "| --- | --- | --- |"]
            lines += [f"| {r.status} | {r.id} | {r.why.replace('|', ESCAPED_BAR)} |" for r in results]
            lines.append("")
        return "\n".join([*lines, self.summary("\n\n")])


FORMATS = {"table": Report.as_table, "json": Report.as_json, "markdown": Report.as_markdown}
