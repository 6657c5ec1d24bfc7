"""python -m src.report RUN_DIR [RUN_DIR ...] [--output DIR]

One run directory: writes its report.md again (every run writes one as it ends). Several:
one report comparing them side by side (the config fields that differ, final metrics,
learning curves overlaid), in --output; its path is printed. Exit status 2 for a path
that is not a run directory.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import NoReturn

from src.report.comparison import compare_runs, default_output
from src.report.run_files import NotARunDir, RunFiles
from src.report.run_report import write_report
from src.runs.atomic import WriteFailed


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m src.report", description="Write a run's report, or one comparing runs side by side."
    )
    parser.add_argument("run_dirs", nargs="+", type=Path, metavar="RUN_DIR", help="run directories")
    parser.add_argument(
        "--output",
        type=Path,
        metavar="DIR",
        help="where a comparison goes (default: comparison-YYYYMMDD-HHMMSS beside the first run)",
    )
    args = parser.parse_args(argv)
    if len(args.run_dirs) == 1 and args.output is not None:
        _fail("--output is for a comparison: give two run directories or more")
    try:
        runs = [RunFiles.read(path) for path in args.run_dirs]
        if len(runs) == 1:
            print(write_report(runs[0]))
        else:
            print(compare_runs(runs, args.output or default_output(runs)))
    except (NotARunDir, WriteFailed) as error:
        _fail(str(error))


def _fail(message: str) -> NoReturn:
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(2)


if __name__ == "__main__":
    main()
