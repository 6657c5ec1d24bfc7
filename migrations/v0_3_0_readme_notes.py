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
    text = readme.read_text()
    first_line = notes.splitlines()[0]
    # The conflict the notes are in: the release's side, without them.
    text = CONFLICT.sub(lambda m: m[2] if first_line in m[1] else m[0], text)
    text = text.replace(notes, "").rstrip("\n")
    readme.write_text(f"{text}\n\n{notes}\n")
    if not CONFLICT.search(text):  # resolved: unstaged like the update's other changes
        subprocess.run(["git", "reset", "--quiet", "--", "README.md"], check=False)


if __name__ == "__main__":
    main()
