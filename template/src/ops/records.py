"""Records of experiments, under experiments/, and of problems, under issues/.

Each is a Markdown file whose YAML front matter holds its `type`, its `status` (edited by
hand: planned, running, done or abandoned; open, investigating, fixed or wontfix) and the
fields of its type (OPS-4). experiments/README.md and issues/README.md show the commands."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import re
from datetime import date
from pathlib import Path
from typing import Annotated, Literal

import tyro

from src.errors import fail, reader_may_stop_reading
from src.runs.atomic import WriteFailed, translate_write_errors, write_text_atomic

# The fields each issue type carries beyond the common ones.
ISSUE_FIELDS = {
    "crash": ("exit_status", "last_checkpoint", "traceback"),
    "hang": ("last_output_at", "stack_dump"),
    "divergence": ("metric", "epoch", "value"),
    "data": ("source", "column", "check"),
    "performance": ("metric", "expected", "observed"),
    "bug": ("component",),
    "infra": ("host", "resource"),
}
IssueType = Literal[tuple(ISSUE_FIELDS)]
_TYPE_HELP = f"The kind of problem, each with fields of its own: {', '.join(ISSUE_FIELDS)}."
Title = Annotated[str, tyro.conf.Positional, tyro.conf.arg(metavar="TITLE", help="The record's title.")]


def new_experiment(root: Path, title: str, hypothesis: str = "", configs: str = "") -> Path:
    fields = {"type": "experiment", "status": "planned", "date": date.today().isoformat()}
    fields |= {"hypothesis": hypothesis, "configs": configs, "runs": "", "result": ""}
    return _write(root / "experiments", title, fields, "## Plan\n\n## Results\n\n## Conclusion\n")


def new_issue(root: Path, title: str, issue_type: str, run: str = "", **details: str) -> Path:
    if issue_type not in ISSUE_FIELDS:
        raise ValueError(f"unknown issue type '{issue_type}'; valid types: {', '.join(ISSUE_FIELDS)}")
    fields = {"type": issue_type, "status": "open", "date": date.today().isoformat(), "run": run}
    fields |= {name: details.get(name, "") for name in ISSUE_FIELDS[issue_type]}
    return _write(root / "issues", title, fields, "## Symptom\n\n## Cause\n\n## Fix\n")


def list_records(root: Path) -> list[dict[str, str]]:
    records = []
    for folder in ("experiments", "issues"):
        # Files only: an editor's lock link, a folder named as a record, are none.
        for path in sorted(path for path in (root / folder).glob("*.md") if path.is_file()):
            if header := _front_matter(path.read_text(errors="replace")):  # a hand edit in another encoding
                records.append({"file": str(path.relative_to(root)), **header})
    return records


def _write(folder: Path, title: str, fields: dict[str, str], body: str) -> Path:
    """The record, written whole under a name no other record has, however many processes
    write records at once."""
    with translate_write_errors(folder):  # a file where the folder belongs, say: one line
        folder.mkdir(parents=True, exist_ok=True)
    slug = re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")[:60] or "untitled"
    # A JSON string is a double-quoted YAML string: quotes, backslashes and line breaks escaped.
    header = "\n".join(
        f"{key}: {json.dumps(value, ensure_ascii=False)}" for key, value in {"title": title, **fields}.items()
    )
    for attempt in itertools.count(1):
        path = folder / f"{fields['date']}-{slug}{f'-{attempt}' if attempt > 1 else ''}.md"
        with translate_write_errors(path), contextlib.suppress(FileExistsError):
            os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY))  # the name is this record's
            write_text_atomic(path, f"---\n{header}\n---\n\n# {title}\n\n{body}")
            return path


def _front_matter(text: str) -> dict[str, str]:
    match = re.match(r"---\n(.*?)\n---\n", text, re.DOTALL)
    pairs = (line.split(":", 1) for line in (match[1].splitlines() if match else []) if ":" in line)
    return {key.strip(): value.strip().strip('"') for key, value in pairs}


def experiment(
    title: Title,
    hypothesis: Annotated[str, tyro.conf.arg(metavar="TEXT")] = "",
    configs: Annotated[str, tyro.conf.arg(metavar="NAMES")] = "",
) -> None:
    """Record a planned experiment.

    Args:
        hypothesis: What the experiment expects to show.
        configs: Config names, e.g. 'baseline wide'.
    """
    _need_a_title(title)
    print(new_experiment(Path.cwd(), title, hypothesis, configs))


def issue(
    title: Title,
    issue_type: Annotated[IssueType, tyro.conf.arg(name="type", metavar="TYPE", help=_TYPE_HELP)],
    run: Annotated[str, tyro.conf.arg(metavar="RUN_DIR")] = "",
    field: Annotated[tuple[str, ...], tyro.conf.UseAppendAction, tyro.conf.arg(metavar="NAME=VALUE")] = (),
) -> None:
    """Record a problem.

    Args:
        run: The run directory it happened in.
        field: A field of the issue's type, e.g. --field metric=val_loss.
    """
    _need_a_title(title)
    names = [item.split("=", 1)[0] for item in field]
    if twice := next((name for at, name in enumerate(names) if name in names[:at]), None):
        fail(f"--field {twice} is given twice; give each field once")
    fields = dict(item.split("=", 1) for item in field if "=" in item)
    if set(fields) - set(ISSUE_FIELDS[issue_type]) or len(fields) != len(field):
        valid = ", ".join(ISSUE_FIELDS[issue_type])
        fail(f"--field takes NAME=VALUE with NAME one of: {valid} (got {', '.join(field)})")
    print(new_issue(Path.cwd(), title, issue_type, run, **fields))


def _need_a_title(title: str) -> None:
    if not title.strip():
        fail("TITLE is empty: give the record a title, which also names its file")


def list_all() -> None:
    """Every record with its type and status."""
    for record in list_records(Path.cwd()):
        print(f"{record.get('status', '?'):<14} {record.get('type', '?'):<12} {record['file']}")


def main(argv: list[str] | None = None) -> None:
    commands = {"experiment": experiment, "issue": issue, "list": list_all}
    description = __doc__.split("\n\n")[0]
    try:
        with reader_may_stop_reading():
            tyro.extras.subcommand_cli_from_dict(
                commands, prog="python -m src.ops.records", description=description, args=argv
            )
    except WriteFailed as error:
        fail(str(error))


if __name__ == "__main__":
    main()
