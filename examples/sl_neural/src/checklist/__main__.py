"""python -m src.checklist [RUN_DIR ...] [--format table|json|markdown]

Checks the checklist items that apply to this project: statically on its code, and
on each finished run directory given. Exit status 1 when an item fails, 2 for bad
input (a RUN_DIR that is not a run directory, a malformed waiver).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from src.checklist import run_checks, static_checks  # noqa: F401 - they register the checks
from src.checklist.layout import Project
from src.checklist.manual import MANUAL
from src.checklist.registry import CHECKS, Result, applies, id_order, run_check
from src.checklist.report import FORMATS, Report
from src.checklist.waivers import BadWaivers, load_waivers

ROOT = Path(__file__).resolve().parents[2]


def check_project(root: Path, run_dirs: list[Path]) -> Report:
    """Every applicable check's result; BadRunDir or BadWaivers for bad input."""
    project = Project.find(root)
    if run_dirs and str(root) not in sys.path:
        sys.path.insert(0, str(root))  # run checks import the project's own config classes
    runs = [run_checks.open_run_dir(path, project) for path in run_dirs]
    known = {c.id for c in CHECKS} | {item.id for item in MANUAL}
    waivers = load_waivers(root / "pyproject.toml", known)
    applicable = [c for c in CHECKS if c.applies(project.kinds, project.has_sweep)]
    results = []
    for item in (c for c in applicable if c.mode == "static"):
        results.append(Result(item.id, "static", *run_check(item, project)))
    for run in runs:
        for item in (c for c in applicable if c.mode == "run" and run.kind in c.kinds()):
            result = Result(
                item.id,
                "run",
                *run_check(item, run),
                where=f"{run.path} ({run.part.name}, {run.kind}, {run.status})",
            )
            results.append(result)
    if not run_dirs:  # items only a run directory shows
        static_ids = {c.id for c in applicable if c.mode == "static"}
        for item_id in sorted({c.id for c in applicable} - static_ids, key=id_order):
            why = "checked on a run directory: python -m src.checklist output/<run>/"
            results.append(Result(item_id, "run", "skipped", why))
    manual = [m for m in MANUAL if applies(m.applies_to, project.kinds, project.has_sweep)]
    results += [Result(m.id, "manual", "manual", m.reason) for m in manual]
    for result in results:
        if result.id in waivers:
            result.why = f"{waivers[result.id]} (check: {result.status}: {result.why})"
            result.status = "waived"
    return Report(results, sorted({c.id for c in applicable}, key=id_order), [m.id for m in manual])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m src.checklist", description=__doc__.split("\n\n")[1])
    parser.add_argument("run_dirs", nargs="*", type=Path, metavar="RUN_DIR", help="output/<run>/ to check")
    parser.add_argument("--format", choices=sorted(FORMATS), default="table")
    parser.add_argument("--root", type=Path, default=ROOT, help="the project to check (default: this one)")
    args = parser.parse_args(argv)
    try:
        report = check_project(args.root.resolve(), args.run_dirs)
    except (BadWaivers, run_checks.BadRunDir) as error:
        print(f"checklist: {error}", file=sys.stderr)
        return 2
    print(FORMATS[args.format](report))
    return 1 if report.failed else 0


if __name__ == "__main__":
    sys.exit(main())
