"""Migration to v0.2.0: `src/utils/gpu_lock.py` and `src/utils/memory.py` moved to `src/`.

Copier runs this in the project after `copier update` (see `_migrations` in copier.yml).
The update itself deletes the old files, edits included, because the new release no
longer renders them. Their content did not change in v0.2.0, only their place, so the
project's last committed version of each old file is the right content for the new one:
this writes it there, keeping the user's edits. It also points the user's own imports at
the new modules, and keeps `src/utils/` a package if the user put modules of their own in it.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

MOVES = {"src/utils/gpu_lock.py": "src/gpu_lock.py", "src/utils/memory.py": "src/memory.py"}
OLD_IMPORT = re.compile(r"\bsrc\.utils\.(gpu_lock|memory)\b")


def committed(path: str) -> str | None:
    """The file as of the project's last commit, or None if it was not there."""
    shown = subprocess.run(["git", "show", f"HEAD:{path}"], capture_output=True, text=True)
    return shown.stdout if shown.returncode == 0 else None


def main() -> None:
    for old, new in MOVES.items():
        user_version = committed(old)
        if user_version is None or not Path(new).exists():
            continue  # deleted by the user before this update, or not rendered
        if user_version != Path(new).read_text():
            Path(new).write_text(user_version)
            print(f"migration v0.2.0: your edits to {old} are kept, now in {new}")

    for path in subprocess.run(["git", "ls-files", "*.py"], capture_output=True, text=True).stdout.split():
        source = Path(path)
        if source.exists() and OLD_IMPORT.search(text := source.read_text()):
            source.write_text(OLD_IMPORT.sub(r"src.\1", text))
            print(f"migration v0.2.0: {path} now imports src.gpu_lock / src.memory")

    utils = Path("src/utils")
    own_modules = sorted(p.name for p in utils.glob("*.py")) if utils.is_dir() else []
    if own_modules and not (utils / "__init__.py").exists():
        (utils / "__init__.py").write_text(committed("src/utils/__init__.py") or "")
        print(f"migration v0.2.0: src/utils/ stays a package for your modules {own_modules}")


if __name__ == "__main__":
    main()
