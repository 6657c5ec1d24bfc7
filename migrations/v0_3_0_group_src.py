"""Migration to v0.3.0: the flat `src/` became packages (training, runs, ops, trees).

Copier runs this in the project after `copier update` (see `_migrations` in copier.yml),
with the release the project came from as its argument. The update itself deletes each
module's old file, edits included, because the new release no longer renders it, and
writes the new release's version at the new place. Several of these modules also changed
in v0.3.0, so the user's edits cannot simply be copied over: for each moved module this
does a three-way merge (`git merge-file`) of the user's last committed version, the
template's version of the release they came from, and the new release's version. A
conflict is left in the file with markers, as copier leaves its own. An edited module
that became a package of several (`src/sweep.py`) is kept beside it as `.yours`. Then
it points the project's own imports and commands (`python -m src.babysit`) at the new
modules.
"""

from __future__ import annotations

import functools
import re
import subprocess
import sys
import tempfile
from pathlib import Path

TEMPLATE = Path(__file__).resolve().parent.parent
# New module -> where earlier releases had it (v0.2.0 first, then v0.1.0's src/utils/).
MOVES = {
    "src/runs/lifetime.py": ["src/run.py"],
    "src/runs/directory.py": ["src/run_dir.py"],
    "src/runs/console.py": ["src/console.py"],
    "src/runs/metrics_jsonl.py": ["src/metrics_jsonl.py"],
    "src/ops/hardware.py": ["src/system_metrics.py"],
    "src/ops/gpu_lock.py": ["src/gpu_lock.py", "src/utils/gpu_lock.py"],
    "src/ops/memory.py": ["src/memory.py", "src/utils/memory.py"],
    "src/ops/babysit.py": ["src/babysit.py"],
    "src/ops/records.py": ["src/records.py"],
    "src/training/trainer.py": ["src/trainer.py"],
    "src/training/optim.py": ["src/optim.py"],
    "src/training/precision.py": ["src/precision.py"],
    "src/training/checkpoints.py": ["src/checkpoints.py"],
    "src/trees/plots.py": ["src/tree_plots.py"],
    "src/trees/rounds.py": ["src/xgb_callbacks.py"],
}
# Modules v0.3.0 split into a package, one module per concern: edits to the old file
# cannot be merged line by line into several new ones.
SPLIT = {"src/sweep.py": "src/sweep"}
MODULE_NAMES = {
    Path(old).stem: new.removesuffix(".py").replace("/", ".").removeprefix("src.")
    for new, olds in MOVES.items()
    for old in olds[:1]
}
# Helpers v0.3.0 took out of the modules that held them, by (old module, name).
MOVED_HELPERS = {
    ("src.callbacks.timing", "Stopwatch"): "src.training.stopwatch",
    ("src.callbacks.stop_file", "stop_file_paths"): "src.runs.directory",
    ("src.callbacks.stop_file", "stop_requested"): "src.runs.directory",
    ("src.callbacks.tracking", "higher_is_better"): "src.runs.metrics_jsonl",
    # The Lightning logger, apart from metrics.jsonl's reading and writing, which the tree
    # parts and the reports use without Lightning.
    ("src.metrics_jsonl", "JsonlLogger"): "src.training.jsonl_logger",
    # Each config level beside the code of the part kinds that use it.
    ("src.config", "LightningConfig"): "src.training.config",
    ("src.config", "SLNeuralConfig"): "src.neural.config",
    ("src.config", "SLTreeConfig"): "src.trees.config",
    ("src.config", "RLConfig"): "src.rl.config",
}
# v0.2.0's callbacks, by feature now; imported from the package (its __all__) or their module.
for _module, _name, _feature in (
    ("stop_file", "StopFileCallback", "guards"),
    ("timing", "TimingCallback", "metrics"),
    ("run_info", "RunInfoCallback", "metrics"),
    ("epoch_summary", "EpochSummaryCallback", "progress"),
):
    for _old in ("src.callbacks", f"src.callbacks.{_module}"):
        MOVED_HELPERS[(_old, _name)] = f"src.callbacks.{_feature}"
# v0.2.0's callbacks that v0.3.0 merged into others: no import can stand in for them.
REPLACED = {
    "BatchMetricsCallback": "MetricsCallback (src/callbacks/metrics.py)",
    "SystemMetricsCallback": "MetricsCallback (src/callbacks/metrics.py)",
    "TrackingCallback": "MetricsCallback (src/callbacks/metrics.py)",
    "RngStateCallback": "ExactResume (src/callbacks/resume.py)",
    "PlateauResumeCallback": "ExactResume (src/callbacks/resume.py)",
}
# `from src import babysit` and `from src.callbacks.timing import Stopwatch` (one line with
# a comment or none, or a parenthesized list, comments and all); then `src.run_dir` and
# `src.utils.memory` anywhere in code, and `src/run_dir.py` in docs and scripts.
FROM_IMPORT = re.compile(
    r"^([ \t]*)from (src[\w.]*) import (?:\(([^()]*)\)|([\w, ]*\w))([ \t]*#[^\n]*)?[ \t]*$", re.M
)
OLD_MODULE = re.compile(r"\bsrc\.(?:utils\.)?(" + "|".join(MODULE_NAMES) + r")\b")
OLD_PATH = re.compile(r"\bsrc/(" + "|".join(MODULE_NAMES) + r")\.py\b")
REWRITTEN = ("*.py", "*.sh", "*.md", "*.ipynb", "*.toml", "*.cfg", "*.yaml", "*.yml", "Makefile")
JINJA_BLOCK = re.compile(r"\{%.*?%\}")


def git(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)


def committed(path: str) -> str | None:
    """The file as of the project's last commit, or None if it was not there."""
    shown = git("show", f"HEAD:{path}")
    return shown.stdout if shown.returncode == 0 else None


@functools.cache
def released_paths(release: str) -> dict[str, str]:
    """{rendered path: template path} of the modules `release` had under src/ (a file name
    may be conditional Jinja); empty where the template's history is not at hand."""
    listed = git("ls-tree", "-r", "--name-only", release, "--", "template/src", cwd=TEMPLATE)
    return {JINJA_BLOCK.sub("", name).removeprefix("template/"): name for name in listed.stdout.splitlines()}


def released(path: str, release: str) -> str | None:
    """What `release` of this template rendered at `path` (a module whose content has no
    Jinja), or None where the history is not at hand."""
    if (name := released_paths(release).get(path)) is None:
        return None
    shown = git("show", f"{release}:{name}", cwd=TEMPLATE)
    return shown.stdout if shown.returncode == 0 else None


def listed_names(found: re.Match[str]) -> list[tuple[str, str, list[str], str]]:
    """(name, alias, the comment lines above it, the comment after it) of each name a
    from-import lists; a one-line import's own comment is found[5]."""
    if found[3] is None:
        return [(*_name_and_alias(imported), [], "") for imported in found[4].split(",")]
    listed: list[list] = []
    above: list[str] = []
    for line in found[3].splitlines():
        code, hash_sign, comment = line.partition("#")
        comment = f"#{comment}".rstrip() if hash_sign else ""
        names = [[*_name_and_alias(imported), [], ""] for imported in code.split(",") if imported.strip()]
        if not names:
            above += [comment] if comment else []
            continue
        names[0][2], names[-1][3], above = above, comment, []
        listed += names
    if above and listed:  # comment lines below the last name
        listed[-1][3] = "  ".join(filter(None, [listed[-1][3], *above]))
    return [tuple(entry) for entry in listed]


def _name_and_alias(imported: str) -> tuple[str, str]:
    name, _, alias = (part.strip() for part in imported.partition(" as "))
    return name, alias


def split_from_import(found: re.Match[str]) -> str:
    """`from src import babysit, cli, run` -> `from src import cli`, `from src.ops import
    babysit` and `from src.runs import lifetime as run`: the code goes on using its names,
    and keeps its comments."""
    indent, module, by_module = found[1], found[2], {}
    if module != "src" and not any(old_module == module for old_module, _ in MOVED_HELPERS):
        return found[0]  # nothing moved out of it: left as written
    for name, alias, above, after in listed_names(found):
        target = MOVED_HELPERS.get((module, name), module)
        if module == "src" and name in MODULE_NAMES:
            target, _, new_name = f"src.{MODULE_NAMES[name]}".rpartition(".")
            alias = alias or (name if new_name != name else "")
            name = new_name
        by_module.setdefault(target, []).append((f"{name} as {alias}" if alias else name, above, after))
    if list(by_module) == [module]:
        return found[0]
    lines = []
    for target, names in by_module.items():
        if not any(above or after for _, above, after in names):
            lines.append(f"{indent}from {target} import {', '.join(spelled for spelled, _, _ in names)}")
            continue
        lines.append(f"{indent}from {target} import (")
        for spelled, above, after in names:
            lines += [f"{indent}    {comment}" for comment in above]
            lines.append(f"{indent}    {spelled},{f'  {after}' if after else ''}")
        lines.append(f"{indent})")
    if found[5]:  # a one-line import's comment, on the first line that takes its place
        lines[0] += f"  {found[5].strip()}"
    return "\n".join(lines)


def rewrite_imports(text: str) -> str:
    text = FROM_IMPORT.sub(split_from_import, text)
    text = OLD_MODULE.sub(lambda found: "src." + MODULE_NAMES[found[1]], text)
    return OLD_PATH.sub(lambda found: "src/" + MODULE_NAMES[found[1]].replace(".", "/") + ".py", text)


def merge(yours: str, base: str, new_release: str) -> tuple[str, bool]:
    """`git merge-file`: the new release's changes on top of yours; True if it conflicted."""
    with tempfile.TemporaryDirectory() as scratch:
        files = []
        for name, text in (("yours", yours), ("base", base), ("new", new_release)):
            files.append(Path(scratch, name))
            files[-1].write_text(text)
        labels = ["-L", "before updating", "-L", "last update", "-L", "after updating"]
        merged = subprocess.run(["git", "merge-file", *labels, *map(str, files)], capture_output=True)
        if merged.returncode < 0:
            raise RuntimeError(merged.stderr.decode())
        return files[0].read_text(), merged.returncode > 0


def move_edited_modules(release: str) -> None:
    for new, olds in MOVES.items():
        found = [(old, text) for old in olds if (text := committed(old)) is not None]
        if not found or not Path(new).exists():
            continue  # removed or moved by the user before this update, or not rendered
        old, yours = found[0]
        if git("ls-tree", "HEAD", "--", old).stdout.startswith("120000"):  # a link: its text is a path
            print(f"migration v0.3.0: {old} links to {yours}; the module is now {new}: link that instead")
            continue
        base = released(old, release)
        yours, base = rewrite_imports(yours), base and rewrite_imports(base)
        if yours == base or yours == Path(new).read_text():
            continue
        if base is None:
            Path(f"{new}.yours").write_text(yours)
            print(f"migration v0.3.0: {old} moved to {new}; merge your version, {new}.yours, by hand")
            continue
        merged, conflicted = merge(yours, base, Path(new).read_text())
        Path(new).write_text(merged)
        if conflicted:
            print(f"migration v0.3.0: {old} moved to {new}; your edits conflict there (see the markers)")
        else:
            print(f"migration v0.3.0: your edits to {old} are kept, now in {new}")


def keep_edited_split_modules(release: str) -> None:
    """The user's edited version of a module the release split up, beside the new package
    (not importable: .yours), for carrying the edits over by hand."""
    for old, package in SPLIT.items():
        yours = committed(old)
        if yours is None or not Path(package).is_dir() or yours == released(old, release):
            continue
        Path(f"{old}.yours").write_text(yours)
        print(
            f"migration v0.3.0: {old} is now the package {package}/, a module per concern; your "
            f"edited version is {old}.yours: carry your edits over by hand"
        )


def rewrite_project_imports() -> None:
    listed = git("ls-files", "--cached", "--others", "--exclude-standard", "--", *REWRITTEN)
    for path in sorted(set(listed.stdout.splitlines())):
        source = Path(path)
        if not source.is_file():
            continue
        try:
            text = source.read_text()
        except UnicodeDecodeError:
            continue
        if (rewritten := rewrite_imports(text)) != text:
            source.write_text(rewritten)
            print(f"migration v0.3.0: {path} now names the modules' new homes")
        for name in replaced_callbacks(rewritten):
            print(f"migration v0.3.0: {path} imports {name}; v0.3.0 merged it into {REPLACED[name]}")


def replaced_callbacks(text: str) -> list[str]:
    """The callbacks of v0.2.0 that `text` imports and v0.3.0 merged into others."""
    imports = [found for found in FROM_IMPORT.finditer(text) if found[2].startswith("src.callbacks")]
    return [name for found in imports for name, *_ in listed_names(found) if name in REPLACED]


def main() -> None:
    release = sys.argv[1] if len(sys.argv) > 1 else "v0.2.0"
    move_edited_modules(release)
    keep_edited_split_modules(release)
    rewrite_project_imports()


if __name__ == "__main__":
    main()
