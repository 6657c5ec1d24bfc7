"""python -m src.report RUN_DIR [RUN_DIR ...] [--output DIR]

One run directory: writes its report.md again (every run writes one as it ends). Several,
of one part: one report comparing them side by side (the config fields that differ, final
metrics, learning curves overlaid), in --output; its path is printed. Runs that differ
only in their seed are taken together: mean ± std of their final metrics, their curves as
a mean with a band of one standard deviation. Exit status 2 for a path that is not a run
directory, or runs of different parts.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, NoReturn

import tyro

from src.report.comparison import MixedParts, compare_runs, default_output
from src.report.run_files import NotARunDir, RunFiles
from src.report.run_report import write_report
from src.runs.atomic import WriteFailed


def report(
    run_dirs: Annotated[
        tuple[Path, ...],
        tyro.conf.Positional,
        tyro.conf.arg(metavar="RUN_DIR", help_behavior_hint="(one or more)"),
    ],
    output: Annotated[Path | None, tyro.conf.arg(metavar="DIR", help_behavior_hint="")] = None,
) -> None:
    """Write a run's report, or one comparing runs side by side.

    Args:
        run_dirs: Run directories.
        output: Where a comparison goes (default: comparison-YYYYMMDD-HHMMSS beside the first run).
    """
    if not run_dirs:
        _fail("give the run directory to report on, or two or more to compare")
    if len(run_dirs) == 1 and output is not None:
        _fail("--output is for a comparison: give two run directories or more")
    try:
        runs = [RunFiles.read(path) for path in run_dirs]
        print(write_report(runs[0]) if len(runs) == 1 else compare_runs(runs, output or default_output(runs)))
    except (NotARunDir, MixedParts, WriteFailed) as error:
        _fail(str(error))


def _fail(message: str) -> NoReturn:
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(2)


def main(argv: list[str] | None = None) -> None:
    tyro.cli(report, args=argv, prog="python -m src.report")


if __name__ == "__main__":
    main()
