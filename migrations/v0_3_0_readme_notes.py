"""Migration to v0.3.0: notes a user appended to the README go below its "Your notes".

Releases before v0.3.0 ended the README with the template's own text, so notes were
appended there; v0.3.0 ends it with a section that is the user's. Copier meets the
appended lines and the new section at the same place: it leaves a conflict there, or
the notes above the new section. Run in the project after `copier update` (see
`_migrations` in copier.yml), this puts the release's text first and the notes at the
end, below "Your notes". Any other conflict in the README stays for the user.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

# The last line of the README of each earlier release: what follows it is the user's.
OLD_LAST_LINES = (
    "After an update, run the tests (`pytest`) and a smoke training of each part.",  # v0.2.0
    "then review `git diff` and resolve any conflict markers it reports.",  # v0.1.0
)
CONFLICT = re.compile(r"^<{7} [^\n]*\n(.*?)^={7}\n(.*?)^>{7} [^\n]*\n", re.S | re.M)


def appended_notes(readme_before_update: str) -> str:
    for last_line in OLD_LAST_LINES:
        if last_line in readme_before_update:
            end = readme_before_update.rindex(last_line) + len(last_line)
            return readme_before_update[end:].strip("\n")
    return ""


def main() -> None:
    readme = Path("README.md")
    committed = subprocess.run(["git", "show", "HEAD:README.md"], capture_output=True, text=True)
    if not readme.is_file() or committed.returncode != 0:
        return
    notes = appended_notes(committed.stdout)
    if not notes:
        return
    # The notes as whole lines: a note that repeats a command of the README is no part of it.
    as_lines = re.compile(rf"^{re.escape(notes)}(?:\n|\Z)", re.M)

    def releases_side(conflict: re.Match[str]) -> str:
        """The release's side of the conflict the notes are in, where they are all of the
        user's side; any other conflict stays for the user."""
        rest = as_lines.sub("", conflict[1], count=1)
        return conflict[2] if rest != conflict[1] and not rest.strip() else conflict[0]

    before = readme.read_text()
    text = CONFLICT.sub(releases_side, before)
    if text == before:  # copier merged them in: they are the last such lines outside any conflict
        outside = [m for m in as_lines.finditer(text) if not in_conflict(text, m.start())]
        if not outside:  # in a conflict with more of the user's lines: theirs to resolve
            return
        text = text[: outside[-1].start()] + text[outside[-1].end() :]
    text = text.rstrip("\n")
    readme.write_text(f"{text}\n\n{notes}\n")
    if not CONFLICT.search(text):  # resolved: unstaged like the update's other changes
        subprocess.run(["git", "reset", "--quiet", "--", "README.md"], check=False)


def in_conflict(text: str, position: int) -> bool:
    return any(found.start() <= position < found.end() for found in CONFLICT.finditer(text))


if __name__ == "__main__":
    main()
