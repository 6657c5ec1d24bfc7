"""python -m src.report RUN_DIR [RUN_DIR ...] [--output DIR]

One run directory: its report.md written again. Several, of one part: a report comparing them.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Annotated

import tyro

from src.cli import exit_on_bad_input, parse_options
from src.errors import DataValidationError

COMPARISON = "comparison-"  # and its stamp: the folder a comparison goes to by default


@dataclass
class ReportOptions:
    """What `python -m src.report` takes.

    Attributes:
        run_dirs: One run directory, to write its report again; several, of one part, to compare
            them side by side (runs that differ only in their seed taken together: mean ± std).
        output: Where a comparison goes (default: comparison-YYYYMMDD-HHMMSS beside the first run).
    """

    run_dirs: Annotated[
        tuple[Path, ...],
        tyro.conf.Positional,
        tyro.conf.arg(metavar="RUN_DIR", help_behavior_hint="(one or more)"),
    ]
    output: Annotated[Path | None, tyro.conf.arg(metavar="DIR", help_behavior_hint="")] = None


def main(argv: list[str] | None = None) -> None:
    options = parse_options(ReportOptions, argv, prog="python -m src.report", description=__doc__)
    try:
        _report(options)
    except KeyboardInterrupt:
        print("interrupted: the report may lack figures; run the command again", file=sys.stderr)
        raise SystemExit(130) from None


def _report(options: ReportOptions) -> None:
    with exit_on_bad_input():
        # An earlier comparison beside the runs, which `output/part1/*` names too: no run.
        earlier = [path for path in options.run_dirs if _is_comparison(path)]
        for path in earlier:
            print(f"{path}: an earlier comparison, not a run: left out", file=sys.stderr)
        run_dirs = [path for path in options.run_dirs if path not in earlier]
        if not run_dirs:
            raise DataValidationError("give the run directory to report on, or two or more to compare")
        if len(run_dirs) == 1 and options.output is not None:
            raise DataValidationError("--output is for a comparison: give two run directories or more")
        from src.report.run_files import RunFiles
        from src.report.run_report import compare_runs, write_report  # loads matplotlib

        runs = [RunFiles.read(path) for path in run_dirs]
        resolved = [path.resolve() for path in run_dirs]
        if twice := next((path for at, path in enumerate(resolved) if path in resolved[:at]), None):
            raise DataValidationError(f"{twice} is given twice: each run counts once in a comparison")
        if options.output is not None:
            output = options.output.resolve()
            if inside := next((run for run in resolved if run == output or run in output.parents), None):
                raise DataValidationError(
                    f"--output {options.output}: inside the run {inside}, whose report.md it would "
                    "replace; give the comparison a folder of its own"
                )
        # Dashes: no run directory is named so.
        output = options.output or runs[0].dir.parent / f"{COMPARISON}{datetime.now():%Y%m%d-%H%M%S}"
        print(write_report(runs[0]) if len(runs) == 1 else compare_runs(runs, output))


def _is_comparison(path: Path) -> bool:
    """A folder named as this command names a comparison, which holds no run's config.json."""
    return path.name.startswith(COMPARISON) and not (path / "config.json").exists()


if __name__ == "__main__":
    main()
