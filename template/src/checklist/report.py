"""The report: a terminal table, JSON or Markdown."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass

from src.checklist.registry import Result

STATUSES = ("pass", "fail", "skipped", "waived", "manual")
GROUP_TITLES = {"static": "static (code)", "run": "run (no RUN_DIR given)", "manual": "manual"}


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
        return (
            f"{len(self.automated) + len(self.manual)} checklist items apply: "
            f"{len(self.automated)} automated, {len(self.manual)} manual. Results: {counts}."
        )

    def groups(self) -> dict[str, list[Result]]:
        found: dict[str, list[Result]] = {}
        for result in self.results:
            found.setdefault(f"run {result.where}" if result.where else GROUP_TITLES[result.mode], []).append(
                result
            )
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
        lines += [f"| {r.status} | {r.id} | {_cell(r.why)} |" for r in results]
        lines.append("")
    return "\n".join([*lines, report.summary()])


def _cell(text: str) -> str:
    return text.replace("|", r"\|")


FORMATS = {"table": as_table, "json": as_json, "markdown": as_markdown}
