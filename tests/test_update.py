"""`copier update` keeps a user's edits and brings in the template's changes: from the first
release to the one being prepared, for every variant; with a conflict; across a migration;
and when the answers change (a part kind or the sweep added and removed)."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
from fnmatch import fnmatch
from pathlib import Path

import copier
import pytest
import yaml
from conftest import AVAILABLE_PARTS, TEMPLATE, assert_each_part_smoke_trains, install_into_venv, run

# Release headings in CHANGELOG.md, newest first: "## v0.2.0 (2026-11-22[, commit abc1234])".
RELEASE_HEADING = re.compile(
    r"^## (v\d+\.\d+\.\d+) \(\d{4}-\d{2}-\d{2}(?:, commit ([0-9a-f]{7,40}))?\)$", re.M
)
RELEASES = RELEASE_HEADING.findall((TEMPLATE / "CHANGELOG.md").read_text())
LATEST = RELEASES[0][0]  # the release being prepared: the working tree is tagged with it
FIRST = RELEASES[-1][0]

GIT_ENV = {
    "GIT_AUTHOR_NAME": "Test",
    "GIT_AUTHOR_EMAIL": "test@example.com",
    "GIT_COMMITTER_NAME": "Test",
    "GIT_COMMITTER_EMAIL": "test@example.com",
}
# A default hyperparameter a user changes in each kind's config.py.
HYPERPARAMETER_EDITS = {
    "sl_neural": ("dropout: float = 0.2", "dropout: float = 0.25"),
    "sl_tree": ("max_depth: int = 2", "max_depth: int = 3"),
    "rl": (
        "hidden_sizes: tuple[int, ...] = (256, 256)",
        "hidden_sizes: tuple[int, ...] = (512, 256)",
    ),  # wide
}
CONFLICT_MARKERS = ("<<<<<<< ", ">>>>>>> ")
# The user's files once rendered (data.py, envs.py): an update leaves them as they are.
SKIP_IF_EXISTS = yaml.safe_load((TEMPLATE / "copier.yml").read_text())["_skip_if_exists"]
PRE_COMMIT = ".pre-commit-config.yaml"


def git(cwd: Path, *args: str) -> str:
    result = subprocess.run(
        ["git", *args], cwd=cwd, env={**os.environ, **GIT_ENV}, capture_output=True, text=True
    )
    assert result.returncode == 0, f"git {' '.join(args)}: {result.stderr}"
    return result.stdout


@pytest.fixture(scope="session")
def template_repo(tmp_path_factory) -> Path:
    """A clone of this template whose HEAD is the working tree, tagged LATEST, with the earlier
    releases tagged from CHANGELOG.md where the clone has no tags (CI clones may not)."""
    repo = tmp_path_factory.mktemp("template") / "repo"
    git(TEMPLATE, "clone", "--quiet", str(TEMPLATE), str(repo))
    for tracked in git(repo, "ls-files", "-z").split("\0"):
        if tracked:
            (repo / tracked).unlink(missing_ok=True)
    for path in git(TEMPLATE, "ls-files", "-z", "--cached", "--others", "--exclude-standard").split("\0"):
        if path and (TEMPLATE / path).is_file():
            (repo / path).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(TEMPLATE / path, repo / path)
    git(repo, "add", "--all")
    git(repo, "commit", "--quiet", "--allow-empty", "-m", "the working tree under test")
    tags = git(repo, "tag").split()
    for version, commit in RELEASES[1:]:
        if version not in tags:
            assert commit, f"CHANGELOG.md: release {version} names no commit to recreate its tag from"
            found = subprocess.run(["git", "cat-file", "-e", f"{commit}^{{commit}}"], cwd=repo)
            assert found.returncode == 0, f"{version}: no commit {commit} here (a shallow clone?)"
            git(repo, "tag", version, commit)
    git(repo, "tag", "--force", LATEST, "HEAD")
    return repo


def render(template: Path, destination: Path, ref: str, **answers) -> Path:
    """Render as a user does (`copier copy --vcs-ref REF --defaults`), then commit the project."""
    copier.run_copy(
        str(template), destination, data=answers, vcs_ref=ref, defaults=True, quiet=True, unsafe=True
    )
    git(destination, "init", "--quiet")
    commit(destination, "rendered from the template")
    return destination


def commit(project: Path, message: str) -> None:
    git(project, "add", "--all")
    git(project, "commit", "--quiet", "-m", message)


def update(project: Path, ref: str, conflict: str = "inline", **answers) -> None:
    """`copier update --defaults --trust --vcs-ref REF [--data ...]`."""
    copier.run_update(
        project,
        data=answers,
        vcs_ref=ref,
        defaults=True,
        overwrite=True,
        quiet=True,
        unsafe=True,
        conflict=conflict,
    )


def recorded_answers(project: Path) -> dict:
    return yaml.safe_load((project / ".copier-answers.yml").read_text())


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{path}: {old!r} not found"
    path.write_text(text.replace(old, new, 1))


def make_user_edits(project: Path, parts: list[str]) -> dict[str, str]:
    """The edits a user makes after rendering; returns {path: text the update must keep}."""
    kept = {}
    for number, kind in enumerate(parts, start=1):
        old, new = HYPERPARAMETER_EDITS[kind]
        edit(project / f"part{number}" / "config.py", old, new)
        kept[f"part{number}/config.py"] = new
    (project / "part1" / "augment.py").write_text('"""Our own augmentations."""\n\nSCALE = 1.5\n')
    kept["part1/augment.py"] = "SCALE = 1.5"
    edit(
        project / "README.md",
        "\n\nTraining pipelines",
        "\n\nThe real tables live on the lab share.\n\nTraining pipelines",
    )
    kept["README.md"] = "The real tables live on the lab share."
    edit(project / "pyproject.toml", "dependencies = [\n", 'dependencies = [\n    "rich>=13",  # ours\n')
    kept["pyproject.toml"] = '"rich>=13",  # ours'
    commit(project, "our edits")
    return kept


def unmerged_paths(project: Path) -> list[str]:
    return git(project, "diff", "--name-only", "--diff-filter=U").split()


def files_with_markers(project: Path) -> list[str]:
    found = []
    for path in project.rglob("*"):
        if ".git" in path.parts or not path.is_file():
            continue
        lines = path.read_bytes().decode(errors="replace").splitlines()
        if any(line.startswith(CONFLICT_MARKERS) for line in lines):
            found.append(str(path.relative_to(project)))
    return found


def assert_merged_cleanly(project: Path) -> None:
    assert unmerged_paths(project) == []
    assert files_with_markers(project) == []
    assert sorted(project.rglob("*.rej")) == []


def project_files(project: Path) -> set[str]:
    return {
        str(path.relative_to(project))
        for path in project.rglob("*")
        if path.is_file() and ".git" not in path.relative_to(project).parts
    }


def assert_is_fresh_render_plus_edits(project: Path, template: Path, tmp_path: Path, kept: dict) -> None:
    """The template's side of the update: every file the user did not touch is exactly what
    the target release renders for the project's answers, and no template file is missing."""
    answers = {k: v for k, v in recorded_answers(project).items() if not k.startswith("_")}
    fresh = tmp_path / "fresh"
    copier.run_copy(str(template), fresh, data=answers, vcs_ref=LATEST, defaults=True, quiet=True)
    missing = project_files(fresh) - project_files(project)
    assert missing == set(), f"template files missing after the update: {sorted(missing)}"
    users = {name for name in project_files(fresh) if any(fnmatch(name, glob) for glob in SKIP_IF_EXISTS)}
    for name in project_files(fresh) - set(kept) - users - {".copier-answers.yml"}:
        assert (project / name).read_bytes() == (fresh / name).read_bytes(), f"{name} differs from {LATEST}"
    extra = project_files(project) - project_files(fresh)
    assert extra <= set(kept), f"files neither the template's nor the user's: {sorted(extra - set(kept))}"


# Each part kind alone, sweeps with and without, and every kind together: every conditional
# file of the template rendered and left out at least once. A cross product of the selections
# adds only the same files' updates again (test_render renders every selection).
VARIANTS = [(["sl_neural"], False), (["sl_tree"], True), (["rl"], False), (AVAILABLE_PARTS, True)]


@pytest.mark.parametrize(
    ("parts", "sweep"), VARIANTS, ids=["+".join(p) + ("-sweep" if s else "") for p, s in VARIANTS]
)
def test_update_from_the_first_release_keeps_user_edits(template_repo, tmp_path, parts, sweep):
    project = render(template_repo, tmp_path / "project", FIRST, parts=parts, sweep=sweep)
    kept = make_user_edits(project, parts)

    update(project, LATEST)

    assert recorded_answers(project)["_commit"] == LATEST
    assert_merged_cleanly(project)
    for name, text in kept.items():
        assert text in (project / name).read_text(), f"the user's edit to {name} was lost"
    assert_is_fresh_render_plus_edits(project, template_repo, tmp_path, kept)


def test_notes_appended_to_the_readme_survive_a_release_that_changes_its_end(template_repo, tmp_path):
    # The next release, made in a clone: it adds a paragraph at the end of the README's
    # last template section, just above the owner's section (without that section, the
    # end of the file, where the owner's lines are too).
    template = tmp_path / "template"
    git(template_repo, "clone", "--quiet", str(template_repo), str(template))
    project = render(template, tmp_path / "project", LATEST)
    readme = project / "README.md"
    readme.write_text(readme.read_text() + "\nOur cluster's queue is `gpu-long`; ask Ana for an account.\n")
    commit(project, "our notes")
    last_line = "After an update, run the tests (`pytest`) and a smoke training of each part."
    advice = "Then commit the update on its own, apart from your changes."
    edit(template / "template" / "README.md.jinja", last_line, f"{last_line}\n\n{advice}")
    git(template, "commit", "--quiet", "--all", "-m", "the next release")
    git(template, "tag", "v99.0.0")

    update(project, "v99.0.0")

    assert_merged_cleanly(project)
    text = readme.read_text()
    assert f"{last_line}\n\n{advice}" in text
    assert text.endswith("Our cluster's queue is `gpu-long`; ask Ana for an account.\n")


def test_notes_of_a_v0_2_0_readme_move_below_your_notes_and_its_own_lines_stay(template_repo, tmp_path):
    # The note is a command the README gives too, inside longer lines of its own.
    project = render(template_repo, tmp_path / "project", V0_2_0)
    readme = project / "README.md"
    notes = "python -m part1.train --config smoke\n"
    readme.write_text(readme.read_text() + "\n" + notes)
    commit(project, "our notes")

    update(project, LATEST)

    assert_merged_cleanly(project)
    fresh = tmp_path / "fresh"
    copier.run_copy(str(template_repo), fresh, vcs_ref=LATEST, defaults=True, quiet=True)
    assert readme.read_text() == (fresh / "README.md").read_text().rstrip("\n") + "\n\n" + notes


NOTES = "\n## Our notes\n\nThe real runs go to the lab's queue; ask Ana for an account.\n"
NEXT = "v99.0.0"


LAST_LINE = "After an update, run the tests (`pytest`) and a smoke training of each part."
ADVICE = "Then commit the update on its own, apart from your changes."


def next_release(template_repo: Path, tmp_path: Path) -> Path:
    """A clone of the template with a release after LATEST (see release_next)."""
    template = tmp_path / "template"
    git(template_repo, "clone", "--quiet", str(template_repo), str(template))
    release_next(template)
    return template


def release_next(template: Path) -> None:
    """Commit and tag NEXT in a clone of the template: a release that changes the README's
    end and a shared module, as releases do."""
    edit(template / "template" / "README.md.jinja", LAST_LINE, f"{LAST_LINE}\n\n{ADVICE}")
    edit(template / "template" / "src" / "config.py", "class ConfigError(", "class ConfigError(  # next\n")
    git(template, "commit", "--quiet", "--all", "-m", "the next release")
    git(template, "tag", NEXT)


@pytest.mark.slow
@pytest.mark.parametrize("start", [RELEASES[1][0], LATEST])
def test_a_project_with_the_usual_edits_updates_then_passes_its_own_tests(template_repo, tmp_path, start):
    # From the previous release to this one, every kind of part and sweeps, and from this one
    # to the next, the default project: a wider layer, a dependency, a module and README notes
    # of the user's own merge without conflict, and the project's fast tier (which trains a
    # smoke run of every part) passes afterwards. These are the only fast tiers CI runs (the
    # all-parts project of conftest.INSTALLED runs its slow tier). The project from the
    # previous release, whose data.py and envs.py are that release's, also smoke-trains every
    # part from the command line. The newer project has the user's own names for the part's
    # config class and network builder.
    if start != LATEST:
        template, target, parts = template_repo, LATEST, AVAILABLE_PARTS
    else:
        template, target, parts = next_release(template_repo, tmp_path), NEXT, ["sl_neural"]
    project = render(template, tmp_path / "project", start, parts=parts, sweep=start != LATEST)
    kept = make_user_edits(project, parts)
    wider = ("hidden_sizes: tuple[int, ...] = (1024, 512)", "hidden_sizes: tuple[int, ...] = (2048, 512)")
    edit(project / "part1" / "config.py", *wider)  # the sl_neural part's "wide" variant
    if start == LATEST:  # names only the part itself uses, which its tests must not depend on
        for path in (project / "part1").glob("*.py"):
            text = re.sub(r"\bDigitsConfig\b", "TableConfig", path.read_text())
            path.write_text(re.sub(r"\bbuild_network\b", "make_network", text))
        assert "make_network" in (project / "part1" / "model.py").read_text()
    readme = project / "README.md"
    readme.write_text(readme.read_text() + NOTES)
    commit(project, "a wider variant, and our notes")

    update(project, target)

    assert_merged_cleanly(project)
    for name, text in [*kept.items(), ("part1/config.py", wider[1])]:
        assert text in (project / name).read_text(), f"the user's edit to {name} was lost"
    text = readme.read_text()
    assert text.index("\n## Your notes\n") < text.index(NOTES.strip()), "the notes belong below 'Your notes'"
    python = install_into_venv(project, tmp_path / "venv")
    fast_tier = [python, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-m", "not slow"]
    result = run(fast_tier, project)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    if start != LATEST:
        assert_each_part_smoke_trains(python, project, AVAILABLE_PARTS, "ml-pipeline")
        wide = run(
            [python, "-c", "from part3.config import CONFIGS; print(CONFIGS['wide']().hidden_sizes)"], project
        )
        assert wide.stdout.strip() == "(512, 256)"  # the user's default survived the update


def bash_blocks(markdown: str) -> list[str]:
    return re.findall(r"^```bash\n(.*?)^```", markdown, re.S | re.M)


def commands(block: str) -> list[str]:
    """A bash block's commands, one per `&&` link, without comments."""
    found = []
    for line in block.splitlines():
        line = re.sub(r"(^|\s)#.*", "", line).strip()
        found += [command.strip() for command in line.split(" && ") if command.strip()]
    return found


# What the quickstart test leaves out of README.md's first command: making venvs and installing
# into them (this environment stands in: its copier, and torch, lightning... for the project),
# and the smoke training, which tests/test_rendered_project.py runs on the same default project.
INSTALLS_AND_TRAINING = re.compile(
    r"python3 -m venv |(\.venv/bin/)?pip install |(\.|source) \S*/bin/activate$|python -m "
)


def test_the_readme_quickstart_renders_a_project_that_updates(template_repo, tmp_path):
    """README.md's first command, run as its user runs it in a clone of the template, gives a
    committed project; after the template's next release, the command in that project's
    README brings the release in (issue 35: `copier copy ... .` recorded `_src_path: .`,
    and the commands made no git repository, so no update could run)."""
    readme = (TEMPLATE / "README.md").read_text()
    quickstart, test_command = (commands(block) for block in bash_blocks(readme)[:2])
    clone = tmp_path / "clone"
    git(template_repo, "clone", "--quiet", str(template_repo), str(clone))
    tools = Path(sys.executable).parent  # what the README's venvs would hold
    (clone / ".venv" / "bin").mkdir(parents=True)
    (clone / ".venv" / "bin" / "copier").symlink_to(tools / "copier")
    env = {**os.environ, **GIT_ENV, "PATH": f"{tools}{os.pathsep}{os.environ['PATH']}"}
    script = "\n".join(command for command in quickstart if not INSTALLS_AND_TRAINING.match(command))
    shell = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script], cwd=clone, env=env, capture_output=True, text=True
    )
    assert shell.returncode == 0, script + "\n" + shell.stderr[-3000:]
    (project,) = [path for path in tmp_path.iterdir() if path.name != "clone"]
    assert git(project, "status", "--porcelain") == ""  # rendered and committed
    assert recorded_answers(project)["_src_path"] == str(clone)  # a path copier finds again

    # The commands copier printed after rendering are the README's (template's and project's).
    message = (shell.stdout + shell.stderr).split("Next steps", 1)[1]
    printed = commands(message.split("\n\n", 2)[1])
    assert printed == quickstart[-len(printed) :] and printed[0] == "cd ../my-project"
    readme = (project / "README.md").read_text()
    assert printed[1:-1] == commands(bash_blocks(readme)[0])
    claims = re.sub(r"\(`copier update [^)]*\)", "", message.split("\n\n", 3)[2])  # how to add sweeps
    assert ("sweep" in claims) == ("\n## Sweeps\n" in readme), "a default project has no sweeps to explain"

    release_next(clone)
    (updating,) = [
        block for block in bash_blocks((project / "README.md").read_text()) if "copier update" in block
    ]
    script = "\n".join(command for command in commands(updating) if not INSTALLS_AND_TRAINING.match(command))
    shell = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script], cwd=project, env=env, capture_output=True, text=True
    )
    assert shell.returncode == 0, script + "\n" + shell.stderr[-3000:]
    assert recorded_answers(project)["_commit"] == NEXT
    assert_merged_cleanly(project)
    assert f"{LAST_LINE}\n\n{ADVICE}" in (project / "README.md").read_text()
    assert "class ConfigError(  # next" in (project / "src" / "config.py").read_text()

    # Nothing goes into the system's Python (Debian refuses it): every pip is a venv's.
    for block in (quickstart, test_command):
        venv_active = False
        for command in block:
            venv_active |= bool(re.fullmatch(r"(\.|source) \S*/bin/activate", command))
            assert not re.match(r"python3? -m pip|pip3? ", command) or venv_active, command
    # The test command runs in the clone, from a venv of its own; CI runs it as it stands.
    assert test_command[0] == "python3 -m venv .venv" and test_command[-1] == ".venv/bin/nox -s tests"
    ci_run = (TEMPLATE / ".ci" / "run").read_text().splitlines()
    assert " && ".join(test_command) in ci_run, ".ci/run runs the README's test command"


def test_a_conflicting_edit_is_reported_with_markers_or_a_rej_file(template_repo, tmp_path):
    # The user and v0.2.0 both changed the check-merge-conflict hook's line.
    hook_line = "      - id: check-merge-conflict # catches markers a `copier update` left behind\n"
    ours = "      - id: check-merge-conflict # ours: also on CI\n"
    inline = render(template_repo, tmp_path / "inline", FIRST)
    edit(inline / ".pre-commit-config.yaml", hook_line, ours)
    commit(inline, "our hook comment")

    update(inline, LATEST)

    assert unmerged_paths(inline) == [".pre-commit-config.yaml"]
    assert files_with_markers(inline) == [".pre-commit-config.yaml"]
    config = (inline / ".pre-commit-config.yaml").read_text()
    assert "<<<<<<< before updating" in config and ">>>>>>> after updating" in config
    assert ours in config and "--assume-in-merge" in config  # both sides kept
    assert (inline / "src" / "ops" / "gpu_lock.py").is_file()  # the rest of the update went in
    # The rendered project's pre-commit hook refuses to commit the markers.
    hook = subprocess.run(
        [
            sys.executable,
            "-m",
            "pre_commit_hooks.check_merge_conflict",
            "--assume-in-merge",
            ".pre-commit-config.yaml",
        ],
        cwd=inline,
        capture_output=True,
        text=True,
    )
    assert hook.returncode == 1 and "Merge conflict string" in hook.stdout

    rej = render(template_repo, tmp_path / "rej", FIRST)
    edit(rej / ".pre-commit-config.yaml", hook_line, ours)
    commit(rej, "our hook comment")

    update(rej, LATEST, conflict="rej")

    # The file holds the template's version; the user's change that did not apply is beside it.
    assert "--assume-in-merge" in (rej / ".pre-commit-config.yaml").read_text()
    assert "+" + ours in (rej / ".pre-commit-config.yaml.rej").read_text()


def test_the_migrations_move_edited_modules_with_their_edits_from_the_first_release(template_repo, tmp_path):
    # v0.2.0 moved src/utils/gpu_lock.py to src/, v0.3.0 moved it on to src/ops/.
    project = render(template_repo, tmp_path / "project", FIRST)
    with (project / "src" / "utils" / "gpu_lock.py").open("a") as lock:
        lock.write("\n\nLOCK_NOTE = 'ours'\n")
    (project / "src" / "utils" / "paths.py").write_text('DATA = "/data"\n')
    (project / "part1" / "ours.py").write_text(
        "from src.utils.memory import cleanup_vram\n\ncleanup_vram()\n"
    )
    commit(project, "our edits")

    update(project, LATEST)

    assert_merged_cleanly(project)
    assert "LOCK_NOTE = 'ours'" in (project / "src" / "ops" / "gpu_lock.py").read_text()
    assert not (project / "src" / "utils" / "gpu_lock.py").exists()
    assert not (project / "src" / "gpu_lock.py").exists()
    assert (project / "part1" / "ours.py").read_text().startswith("from src.ops.memory import cleanup_vram")
    assert (project / "src" / "utils" / "__init__.py").is_file()  # still a package for paths.py
    assert (project / "src" / "utils" / "paths.py").read_text() == 'DATA = "/data"\n'


V0_2_0 = "v0.2.0"  # the last release with a flat src/
OUR_RUN_DIR_LINE = 'SCRATCH = Path("/scratch")  # where our cluster wants runs\n'
OUR_MODULE = """from src import babysit, cli
from src.callbacks.timing import Stopwatch
from src.config import BaseConfig, LightningConfig, SLNeuralConfig
from src.run_dir import find_latest_run
from src.metrics_jsonl import JsonlLogger, read_jsonl
from src import tree_plots
from src.config import SLNeuralConfig as Base  # one for our tables
from src.callbacks import StopFileCallback, TimingCallback
from src.callbacks import (
    # how an epoch ends
    EpochSummaryCallback,
    RunInfoCallback,  # the facts at the start
    RngStateCallback,
)

__all__ = ["BaseConfig", "JsonlLogger", "LightningConfig", "SLNeuralConfig", "Stopwatch", "babysit", "cli"]
__all__ += ["find_latest_run", "read_jsonl", "tree_plots"]
"""


def test_the_v0_3_0_migration_merges_edits_to_modules_the_release_moved_and_changed(
    template_repo, tmp_path, capfd
):
    project = render(template_repo, tmp_path / "project", V0_2_0, parts=["sl_neural", "sl_tree"])
    edit(
        project / "src" / "run_dir.py",
        'RUN_DIR_ENV = "TRAIN_RUN_DIR"\n',
        'RUN_DIR_ENV = "TRAIN_RUN_DIR"\n' + OUR_RUN_DIR_LINE,
    )
    with (project / "src" / "memory.py").open("a") as memory:
        memory.write("\n\nFREED_NOTE = 'ours'\n")
    (project / "src" / "paths.py").write_text(OUR_MODULE)
    (project / "scripts" / "nightly.sh").write_text("python -m src.babysit output/latest\n")
    commit(project, "our edits")

    update(project, LATEST)

    assert_merged_cleanly(project)
    run_dir_module = (project / "src" / "runs" / "directory.py").read_text()
    assert OUR_RUN_DIR_LINE in run_dir_module  # the user's edit...
    assert "def stop_requested(" in run_dir_module  # ...and the release's own change to the module
    fresh = render(template_repo, tmp_path / "fresh", LATEST, parts=["sl_neural", "sl_tree"])
    assert (
        run_dir_module.replace(OUR_RUN_DIR_LINE, "") == (fresh / "src" / "runs" / "directory.py").read_text()
    )
    assert "FREED_NOTE = 'ours'" in (project / "src" / "ops" / "memory.py").read_text()
    assert not (project / "src" / "run_dir.py").exists() and not (project / "src" / "memory.py").exists()
    assert (
        (project / "src" / "paths.py").read_text()
        == """from src.ops import babysit
from src import cli
from src.training.stopwatch import Stopwatch
from src.config import BaseConfig
from src.training.config import LightningConfig
from src.neural.config import SLNeuralConfig
from src.runs.directory import find_latest_run
from src.training.jsonl_logger import JsonlLogger
from src.runs.metrics_jsonl import read_jsonl
from src.trees import plots as tree_plots
from src.neural.config import SLNeuralConfig as Base  # one for our tables
from src.callbacks.guards import StopFileCallback
from src.callbacks.metrics import TimingCallback
from src.callbacks.progress import (
    # how an epoch ends
    EpochSummaryCallback,
)
from src.callbacks.metrics import (
    RunInfoCallback,  # the facts at the start
)
from src.callbacks import RngStateCallback

__all__ = ["BaseConfig", "JsonlLogger", "LightningConfig", "SLNeuralConfig", "Stopwatch", "babysit", "cli"]
__all__ += ["find_latest_run", "read_jsonl", "tree_plots"]
"""
    )
    merged = "src/paths.py imports RngStateCallback; v0.3.0 merged it into ExactResume"
    assert merged in capfd.readouterr().out  # no import stands in for it: the user is told
    assert (project / "scripts" / "nightly.sh").read_text() == "python -m src.ops.babysit output/latest\n"
    kept = {"src/runs/directory.py": OUR_RUN_DIR_LINE, "src/ops/memory.py": "FREED_NOTE"}
    kept |= {"src/paths.py": "", "scripts/nightly.sh": ""}
    assert_is_fresh_render_plus_edits(project, template_repo, tmp_path, kept)


def test_the_v0_3_0_migration_keeps_an_edited_module_the_release_split_beside_its_package(
    template_repo, tmp_path
):
    project = render(template_repo, tmp_path / "project", V0_2_0, parts=["sl_neural"], sweep=True)
    with (project / "src" / "sweep.py").open("a") as sweep:
        sweep.write("\n\nOUR_DEFAULT_TRIALS = 50\n")
    commit(project, "our edits")

    update(project, LATEST)

    assert_merged_cleanly(project)
    assert not (project / "src" / "sweep.py").exists()  # it would not be imported beside the package
    assert (project / "src" / "sweep" / "__init__.py").is_file()
    assert "OUR_DEFAULT_TRIALS = 50" in (project / "src" / "sweep.py.yours").read_text()
    assert_is_fresh_render_plus_edits(project, template_repo, tmp_path, {"src/sweep.py.yours": ""})


def test_the_v0_3_0_migration_leaves_markers_where_an_edit_meets_the_releases_change(template_repo, tmp_path):
    # v0.3.0 took the RL branches out of the shared Trainer: the line the user changed.
    project = render(template_repo, tmp_path / "project", V0_2_0, parts=["sl_neural"])
    edit(
        project / "src" / "trainer.py",
        "    is_rl = isinstance(cfg, RLConfig)\n",
        "    is_rl = False  # ours\n",
    )
    commit(project, "our edit")

    update(project, LATEST)

    trainer = (project / "src" / "training" / "trainer.py").read_text()
    assert files_with_markers(project) == ["src/training/trainer.py"]
    assert "<<<<<<< before updating" in trainer and ">>>>>>> after updating" in trainer
    assert "is_rl = False  # ours" in trainer and "def build_trainer(" in trainer
    assert not (project / "src" / "trainer.py").exists()


def write_run(run_dir: Path, module: str, **record) -> Path:
    """A run directory as an earlier release left it: config.json, and run.json naming the
    module that started it."""
    run_dir.mkdir(parents=True)
    (run_dir / "config.json").write_text('{"name": "baseline"}\n')
    command = [sys.executable, "-m", module, "--config", "baseline"]
    (run_dir / "run.json").write_text(json.dumps({"status": "finished", "command": command, **record}))
    return run_dir


def test_the_v0_3_0_migration_moves_each_parts_runs_into_its_folder(template_repo, tmp_path):
    project = render(template_repo, tmp_path / "project", V0_2_0, parts=["sl_neural", "sl_tree"], sweep=True)
    output = project / "output"
    write_run(output / "baseline_20260101_120000", "part2.train")
    # Still written by a live process (this one): it stays where it is.
    alive = {"status": "running", "pid": os.getpid(), "host": socket.gethostname()}
    write_run(output / "baseline_20260101_120001", "part1.train", **alive)
    sweep = output / "sweeps" / "baseline_20260101_130000_42"
    trial = write_run(sweep / "baseline-trial000_20260101_130001", "part1.sweep")
    (sweep / "sweep.json").write_text(json.dumps({"name": "baseline", "config_class": "DigitsConfig"}))
    ended = {"number": 0, "run_dir": str(trial.relative_to(project))}
    (sweep / "trials.jsonl").write_text(json.dumps(ended) + "\n")
    (project / "logs").mkdir()
    (project / "logs" / "babysit_baseline_20260101_120000.json").write_text('{"restarts": []}')

    update(project, LATEST)

    moved = output / "part2" / "baseline_20260101_120000"
    record = json.loads((moved / "run.json").read_text())
    # The W&B id it logged to so far, so that a resume goes on in the same W&B run.
    assert (record["part"], record["wandb_id"]) == ("part2", "baseline_20260101_120000")
    assert (output / "baseline_20260101_120001" / "run.json").is_file()
    moved_sweep = output / "part1" / "sweeps" / sweep.name
    (line,) = (moved_sweep / "trials.jsonl").read_text().splitlines()
    assert json.loads(line)["run_dir"] == f"output/part1/sweeps/{sweep.name}/{trial.name}"
    assert json.loads((moved_sweep / trial.name / "run.json").read_text())["part"] == "part1"
    assert not (output / "sweeps").exists()
    assert (project / "logs" / "babysit_part2_baseline_20260101_120000.json").is_file()


def test_a_module_the_user_links_to_elsewhere_is_not_merged_as_its_link(template_repo, tmp_path, capfd):
    # The user's GPU lock is shared by their projects: src/gpu_lock.py links to it.
    project = render(template_repo, tmp_path / "project", V0_2_0)
    shared = tmp_path / "shared" / "gpu_lock.py"
    shared.parent.mkdir()
    shared.write_text((project / "src" / "gpu_lock.py").read_text() + "\n\nLOCK_NOTE = 'ours'\n")
    (project / "src" / "gpu_lock.py").unlink()
    (project / "src" / "gpu_lock.py").symlink_to(shared)
    commit(project, "our shared lock")

    update(project, LATEST)

    assert_merged_cleanly(project)
    fresh = render(template_repo, tmp_path / "fresh", LATEST)
    moved = "src/ops/gpu_lock.py"
    assert (project / moved).read_text() == (fresh / moved).read_text()
    assert f"src/gpu_lock.py links to {shared}; the module is now {moved}" in capfd.readouterr().out
    assert shared.read_text().endswith("LOCK_NOTE = 'ours'\n")


def test_the_migration_needs_trust(template_repo, tmp_path):
    project = render(template_repo, tmp_path / "project", FIRST)
    with pytest.raises(copier.errors.UnsafeTemplateError, match="migrations"):
        copier.run_update(project, vcs_ref=LATEST, defaults=True, overwrite=True, quiet=True)


ANSWER_CHANGES = {
    "add-a-part": ({"parts": ["sl_neural"]}, {"parts": ["sl_neural", "rl"]}),
    "remove-a-part": ({"parts": ["sl_neural", "sl_tree"]}, {"parts": ["sl_neural"]}),
    "add-sweeps": ({"parts": ["sl_neural", "sl_tree"], "sweep": False}, {"sweep": True}),
    "remove-sweeps": ({"parts": ["sl_tree", "rl"], "sweep": True}, {"sweep": False}),
}


@pytest.mark.parametrize(("before", "change"), ANSWER_CHANGES.values(), ids=ANSWER_CHANGES.keys())
def test_changing_answers_on_update_adds_or_removes_files(template_repo, tmp_path, before, change):
    project = render(template_repo, tmp_path / "project", LATEST, **before)
    kept = make_user_edits(project, before["parts"])
    removed_folders = tuple(
        f"part{number}/"
        for number in range(len(change.get("parts", before["parts"])) + 1, len(before["parts"]) + 1)
    )
    kept = {name: text for name, text in kept.items() if not name.startswith(removed_folders)}

    update(project, LATEST, **change)

    assert {**recorded_answers(project), **change} == recorded_answers(project)
    assert_merged_cleanly(project)
    for name, text in kept.items():
        assert text in (project / name).read_text(), f"the user's edit to {name} was lost"
    assert_is_fresh_render_plus_edits(project, template_repo, tmp_path, kept)


def test_a_users_data_and_environments_are_theirs_after_the_first_render(template_repo, tmp_path):
    """`_skip_if_exists`: an update leaves an existing data.py alone, edited or not, even when
    the template changed it, and renders a missing envs.py again."""
    later = tmp_path / "later-template"
    git(template_repo, "clone", "--quiet", str(template_repo), str(later))
    for folder in ("{{sl_neural_dir}}", "{{rl_dir}}"):
        with (later / "template" / folder / "data.py").open("a") as data:
            data.write("\n# changed in a later release\n")
    commit(later, "a later release changes the data modules")
    git(later, "tag", "v99.0.0")
    project = render(later, tmp_path / "project", LATEST, parts=["sl_neural", "rl"])
    edit(
        project / "part1" / "data.py",
        "def load_table(",
        "def load_our_table(cfg):\n    pass\n\n\ndef load_table(",
    )
    rl_data = (project / "part2" / "data.py").read_text()
    (project / "part2" / "envs.py").unlink()
    commit(project, "our data; no custom environments")

    update(project, "v99.0.0")

    assert_merged_cleanly(project)
    part1_data = (project / "part1" / "data.py").read_text()
    assert "def load_our_table(" in part1_data and "changed in a later release" not in part1_data
    assert (project / "part2" / "data.py").read_text() == rl_data
    assert (project / "part2" / "envs.py").is_file()
    assert recorded_answers(project)["_commit"] == "v99.0.0"
