"""Render every example project from the answer file beside it: `nox -s examples`.

`examples/NAME.yml` holds the answers; `examples/NAME/` is what the template at HEAD
(working-tree changes included) renders from them. The tests render them again and
fail when a folder here is stale. The rendered `.copier-answers.yml` is left out: it
records a local path and commit, which would change on every commit; the answers that
matter are in NAME.yml.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import copier
import yaml

EXAMPLES = Path(__file__).resolve().parent
TEMPLATE = EXAMPLES.parent


def answer_files() -> list[Path]:
    return sorted(EXAMPLES.glob("*.yml"))


def render_example(answers_file: Path, destination: Path) -> Path:
    """Render one example into destination, replacing what was there."""
    if destination.exists():
        shutil.rmtree(destination)
    answers = yaml.safe_load(answers_file.read_text())
    copier.run_copy(str(TEMPLATE), destination, data=answers, vcs_ref="HEAD", defaults=True, quiet=True)
    (destination / ".copier-answers.yml").unlink()
    return destination


def main() -> None:
    for answers_file in answer_files():
        render_example(answers_file, EXAMPLES / answers_file.stem)
        print(f"rendered examples/{answers_file.stem}/ from {answers_file.name}", file=sys.stderr)


if __name__ == "__main__":
    main()
