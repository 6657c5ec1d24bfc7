"""Migration to v0.3.0: a part's data.py or envs.py never edited becomes the new release's.

A part's data.py and envs.py are the user's: an update leaves them as they are
(`_skip_if_exists` in copier.yml). v0.3.0 moved what earlier releases' data.py held beside the loading of the
data (splits, checks, loaders, the environments' layout and evaluation) into `src/`, so
an earlier data.py still works but keeps dead copies of that machinery. Run in the
project after `copier update`, with the release the project came from as its argument,
this replaces a data.py or envs.py that is still exactly what that release rendered with
the new release's; an edited one stays as it is (CHANGELOG.md says what in it is no
longer used).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

TEMPLATE = Path(__file__).resolve().parent.parent
KINDS = {"sl_neural": "{{sl_neural_dir}}", "sl_tree": "{{sl_tree_dir}}", "rl": "{{rl_dir}}"}


def shown(revision_path: str, cwd: Path | None = None) -> str | None:
    result = subprocess.run(["git", "show", revision_path], cwd=cwd, capture_output=True, text=True)
    return result.stdout if result.returncode == 0 else None


def main(release: str) -> None:
    parts = yaml.safe_load(Path(".copier-answers.yml").read_text()).get("parts") or []
    kinds = [kind for kind in KINDS if kind in parts]  # the order the template numbers them in
    for number, kind in enumerate(kinds, start=1):
        for name in ("data.py", "envs.py"):
            path, template = Path(f"part{number}/{name}"), f"template/{KINDS[kind]}/{name}"
            released = shown(f"{release}:{template}", cwd=TEMPLATE)
            if path.is_file() and released is not None and shown(f"HEAD:{path}") == released:
                path.write_text((TEMPLATE / template).read_text())


if __name__ == "__main__":
    main(sys.argv[1])
