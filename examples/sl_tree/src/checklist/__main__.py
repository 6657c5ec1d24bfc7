"""python -m src.checklist [RUN_DIR ...] [--format table|json|markdown]

Checks the checklist items that apply to this project: on its code, and on each run
directory given. Exit status 1 when an item fails, 2 for bad input (a RUN_DIR that is
not a run directory, a malformed waiver).
"""

from __future__ import annotations

# argparse, not the project's tyro: the checker runs on a fresh clone, before anything is installed.
import argparse
import importlib
import sys
import tomllib
from pathlib import Path

from src.checklist.project import Project
from src.checklist.registry import CHECKS, FORMATS, MANUAL, TAGS, BadInput, Report, Result, id_order
from src.checklist.run_checks import open_run_dir
from src.errors import reader_may_stop_reading

ROOT = Path(__file__).resolve().parents[2]
# The check modules present: a project renders only those of its part kinds and its sweep.
for module in sorted(Path(__file__).parent.glob("*_checks.py")):
    importlib.import_module(f"src.checklist.{module.stem}")


def load_waivers(pyproject: Path) -> dict[str, str]:
    """`"CB-4" = "why it does not apply"` lines of pyproject.toml's [tool.checklist.waivers]."""
    known = sorted({c.id for c in CHECKS} | MANUAL.keys(), key=id_order)
    try:
        waivers = tomllib.loads(pyproject.read_text(encoding="utf-8")) if pyproject.is_file() else {}
    except tomllib.TOMLDecodeError as error:
        raise BadInput(f"{pyproject}: not valid TOML ({error})") from None
    for name in ("tool", "tool.checklist", "tool.checklist.waivers"):  # each a table, where there is one
        waivers = waivers.get(name.rpartition(".")[2], {})
        if not isinstance(waivers, dict):
            wanted = '[tool.checklist.waivers] of ID = "reason"'
            raise BadInput(f"{pyproject}: [{name}] must be a table: {wanted}")
    for item, reason in waivers.items():
        if item not in known:
            raise BadInput(f"{pyproject}: waiver for unknown item {item!r}; valid IDs: {', '.join(known)}")
        if not isinstance(reason, str) or not reason.strip():
            raise BadInput(f'{pyproject}: waiver {item} needs a reason: {item} = "why it does not apply"')
    return {item: reason.strip() for item, reason in waivers.items()}


def check_project(root: Path, run_dirs: list[Path]) -> Report:
    """Every applicable check's result; BadInput for a bad RUN_DIR or waiver."""
    project = Project.load(root)
    if not project.parts:
        raise BadInput(f"{root}: no part to check (a folder with a train.py); give a project's root")
    if run_dirs and str(root) not in sys.path:
        sys.path.insert(0, str(root))  # run checks import the project's config classes
    runs = [open_run_dir(path, project) for path in run_dirs]
    waivers = load_waivers(root / "pyproject.toml")
    applicable = [c for c in CHECKS if c.applies(project.kinds, project.has_sweep)]
    applicable.sort(key=lambda c: id_order(c.id))
    static = [c for c in applicable if c.mode == "static"]
    results = [Result(c.id, "static", *c.outcome(project)) for c in static]
    for run in runs:
        where = f"{run.path} ({run.part.name}, {run.kind}, {run.record.get('status', 'unknown')})"
        checks = [c for c in applicable if c.mode == "run" and run.kind in TAGS[c.applies_to]]
        results += [Result(c.id, "run", *c.outcome(run), where=where) for c in checks]
    if not run_dirs:  # items only a run directory shows
        later = sorted({c.id for c in applicable} - {c.id for c in static}, key=id_order)
        why = "checked on a run directory: python -m src.checklist output/<part>/<run>/"
        results += [Result(item, "run", "skipped", why) for item in later]
    results += [Result(item, "manual", "manual", why) for item, why in MANUAL.items()]
    for result in (r for r in results if r.id in waivers):
        result.why = f"{waivers[result.id]} (check: {result.status}: {result.why})"
        result.status = "waived"
    return Report(results, sorted({c.id for c in applicable}, key=id_order), list(MANUAL))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m src.checklist", description=__doc__.split("\n\n")[1])
    parser.add_argument("run_dirs", nargs="*", type=Path, metavar="RUN_DIR", help="a run directory to check")
    parser.add_argument("--format", choices=sorted(FORMATS), default="table")
    parser.add_argument("--root", type=Path, default=ROOT, help="the project to check (default: this one)")
    args = parser.parse_args(argv)
    try:
        report = check_project(args.root.resolve(), args.run_dirs)
    except BadInput as error:
        print(f"checklist: {error}", file=sys.stderr)
        return 2
    except ModuleNotFoundError as error:
        if not args.run_dirs:  # the static checks need nothing beyond the standard library
            raise
        needs = f"the project's packages ({error.name} is not installed for this Python)"
        fix = "run it with the Python the project is installed in"
        print(f"checklist: checking a run directory needs {needs}: {fix}", file=sys.stderr)
        return 2
    with reader_may_stop_reading():  # `| head`
        print(FORMATS[args.format](report), flush=True)
    return 1 if report.failed else 0


if __name__ == "__main__":
    sys.exit(main())
