#!/usr/bin/env python3
# /// script
# dependencies = ["nox>=2025.2.9"]
# ///
"""Sessions for working on the template: nox -s tests | lint | variant | examples | demo | fmt |
bench | race."""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from pathlib import Path

import nox

ROOT = Path(__file__).parent
CONSTRAINTS = ROOT / "template" / "constraints.txt"  # the one file that pins tested versions
TOOLS = ["copier", "pytest-copie", "pytest", "ruff", "pyyaml", "pre-commit-hooks"]
# What a rendered project needs; versions come from the constraints file.
PROJECT_DEPS = [
    "lightning",
    "torchmetrics",
    "torchdata",
    "wandb",
    "tensorboard",
    "tyro",
    "numpy",
    "pandas",
    "pandera",
    "scikit-learn",
    "psutil",
    "nvidia-ml-py",
    "rich",
    "xgboost-cpu",  # the CPU-only build: no NCCL download in CI
    "matplotlib",
    "torchrl",
    "tensordict",
    "gymnasium",
    "optuna",
    "dask[distributed,dataframe]",  # the tree part's --cluster
]

# Every part kind the template renders today, and the folder each gets when all are chosen.
ALL_PARTS = '["sl_neural", "sl_tree", "rl"]'
PART_DIRS = {"{{sl_neural_dir}}": "part1", "{{sl_tree_dir}}": "part2", "{{rl_dir}}": "part3"}


nox.needs_version = ">=2025.2.9"  # @nox.session(default=...)
nox.options.default_venv_backend = "virtualenv"  # nox's own default, said once
nox.options.reuse_existing_virtualenvs = True


def install(session: nox.Session, *packages: str) -> None:
    # torch first and alone: an unpinned torch anywhere pulls the newest CUDA build.
    # TORCH_INDEX_URL (set by CI's CPU jobs) picks a CPU-only build of the pinned version.
    index = ["--index-url", os.environ["TORCH_INDEX_URL"]] if os.environ.get("TORCH_INDEX_URL") else []
    session.install("-c", str(CONSTRAINTS), *index, "torch")
    session.install("-c", str(CONSTRAINTS), *packages)


@nox.session
def tests(session: nox.Session) -> None:
    """Render every variant, lint it, smoke-train it and run its own tests."""
    install(session, *TOOLS, *PROJECT_DEPS)
    session.run("pytest", *session.posargs)


@nox.session(default=False)
def min_copier(session: nox.Session) -> None:
    """The render tests on the oldest copier that copier.yml allows (_min_copier_version),
    every other tool at its tested version."""
    oldest = re.search(r'^_min_copier_version: "(.+)"$', (ROOT / "copier.yml").read_text(), re.M)[1]
    pins = [line for line in CONSTRAINTS.read_text().splitlines() if not line.startswith("copier==")]
    constraints = Path(session.create_tmp()) / "constraints.txt"
    constraints.write_text("\n".join(pins) + "\n")
    session.install("-c", str(constraints), f"copier=={oldest}", "pytest-copie", "pytest", "ruff", "pyyaml")
    session.run("pytest", "tests/test_render.py", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    """Ruff on the template's own Python and on the default rendered project."""
    session.install("-c", str(CONSTRAINTS), "ruff", "copier")
    session.run("ruff", "check", "noxfile.py", "tests", "examples/render.py", "migrations")
    session.run("ruff", "format", "--check", "noxfile.py", "tests", "examples/render.py", "migrations")
    # Rendered outside the repo, whose .gitignore would hide files from ruff.
    project = render(session, Path(tempfile.mkdtemp()) / "lint", ALL_PARTS, sweep=True)
    session.run("ruff", "check", "--no-cache", str(project))
    session.run("ruff", "format", "--check", "--no-cache", str(project))


@nox.session(default=False)
def variant(session: nox.Session) -> None:
    """One variant end to end, as CI's matrix runs it: nox -s variant -- sl_neural+rl-sweep.
    Renders it, installs it as its README says, lints it, smoke-trains each part and runs
    its own test suite."""
    if len(session.posargs) != 1 or not re.fullmatch(r"[a-z_]+(\+[a-z_]+)*(-sweep)?", session.posargs[0]):
        session.error(
            "give one variant, its part kinds joined by '+' and '-sweep' for sweeps: sl_tree+rl-sweep"
        )
    kinds, sweep = session.posargs[0].removesuffix("-sweep").split("+"), session.posargs[0].endswith("-sweep")
    install(session, "copier", "ruff", "pytest")
    project = render(session, Path(tempfile.mkdtemp()) / "variant", json.dumps(kinds), sweep=sweep)
    session.install("-c", str(CONSTRAINTS), f"{project}[{extras(kinds)}]")
    session.chdir(project)
    session.run("ruff", "check", "--no-cache", ".")
    session.run("ruff", "format", "--check", "--no-cache", ".")
    for number in range(1, len(kinds) + 1):
        session.run("python", "-m", f"part{number}.train", "--config", "smoke", env={"WANDB_MODE": "offline"})
    session.run("python", "-m", "pytest", "-q", "-p", "no:cacheprovider")


@nox.session(default=False)
def examples(session: nox.Session) -> None:
    """Render examples/NAME/ again from each examples/NAME.yml (tests/test_examples.py checks them)."""
    session.install("-c", str(CONSTRAINTS), "copier", "pyyaml")
    session.run("python", str(ROOT / "examples" / "render.py"))


@nox.session(default=False)
def demo(session: nox.Session) -> None:
    """Render the default project into build/demo, install it and smoke-train it."""
    install(session, "copier")
    project = render(session, ROOT / "build" / "demo")
    session.install("-c", str(CONSTRAINTS), f"{project}[dev]")
    session.chdir(project)
    session.run("python", "-m", "part1.train", "--config", "smoke", env={"WANDB_MODE": "offline"})


@nox.session(default=False)
def bench(session: nox.Session) -> None:
    """Render every part into build/bench, install it and run the part benchmarks on it
    (benchmarks/sl_neural_epochs.py on the bundled table and on 20k and 200k rows;
    benchmarks/sl_tree_rounds.py with W&B off and offline, on the bundled table and 50
    times its rows, and a whole run against a bare script; benchmarks/rl_frames.py), then
    start-up and smoke walls (benchmarks/startup.py) and the CartPole race against
    stable-baselines3 (see race); figures land in build/bench/*.json. Not part of CI: the
    figures need a quiet machine. `nox -s bench -- --no-race` skips the race."""
    install(session, "copier")
    project = render(session, ROOT / "build" / "bench" / "project", ALL_PARTS)
    session.install("-c", str(CONSTRAINTS), f"{project}[{extras(json.loads(ALL_PARTS))}]")
    results = ROOT / "build" / "bench"
    neural, tree, rl = (PART_DIRS[name] for name in ("{{sl_neural_dir}}", "{{sl_tree_dir}}", "{{rl_dir}}"))
    tree_rows_x50 = ["--scale", "50", "--repeats", "7", "--end-to-end-repeats", "0"]
    runs = {  # the JSON file's name: the benchmark, the arguments
        neural: ("sl_neural_epochs", []),
        f"{neural}-rows-x11": ("sl_neural_epochs", ["--scale", "11", "--repeats", "3"]),
        f"{neural}-rows-x110": ("sl_neural_epochs", ["--scale", "110", "--repeats", "2", "--epochs", "3"]),
        tree: ("sl_tree_rounds", []),
        f"{tree}-wandb": ("sl_tree_rounds", ["--with-wandb", "--end-to-end-repeats", "0"]),
        f"{tree}-rows-x50": ("sl_tree_rounds", tree_rows_x50),
        f"{tree}-rows-x50-wandb": ("sl_tree_rounds", [*tree_rows_x50, "--with-wandb"]),
        rl: ("rl_frames", []),
    }
    for name, (benchmark, arguments) in runs.items():
        script, figures = ROOT / "benchmarks" / f"{benchmark}.py", f"{results / name}.json"
        with session.chdir(project):  # where the part's own commands run
            session.run("python", str(script), "--project", ".", *arguments, "--json", figures)
    python = session.virtualenv.bin + "/python"
    startup = ["--project", str(project), "--python", python, "--json", str(results / "startup.json")]
    session.run("python", str(ROOT / "benchmarks" / "startup.py"), *startup)
    if "--no-race" not in session.posargs:
        _race(session, project, results / "race.json")


@nox.session(default=False)
def race(session: nox.Session) -> None:
    """Time to solve CartPole-v1: the RL part against stable-baselines3 PPO (RL-Zoo's tuned
    hyperparameters), whole processes, five seeds (benchmarks/cartpole_race.py)."""
    install(session, "copier")
    project = render(session, ROOT / "build" / "bench" / "project", ALL_PARTS)
    session.install("-c", str(CONSTRAINTS), f"{project}[{extras(json.loads(ALL_PARTS))}]")
    _race(session, project, ROOT / "build" / "bench" / "race.json")


def _race(session: nox.Session, project: Path, output: Path) -> None:
    # stable-baselines3 gets a venv of its own: it is no dependency of a rendered project.
    sb3 = Path(session.create_tmp()).resolve() / "sb3-venv"  # absolute: the race runs elsewhere
    if not (sb3 / "bin" / "python").exists():
        session.run("python", "-m", "venv", str(sb3))
        pip = [str(sb3 / "bin" / "python"), "-m", "pip", "install", "-q", "-c", str(CONSTRAINTS)]
        session.run(*pip, "torch", external=True)
        # Pinned here, not in the constraints file every project gets: only this race uses it.
        session.run(*pip, "stable-baselines3==2.9.2", "gymnasium", external=True)
    session.run(
        "python",
        str(ROOT / "benchmarks" / "cartpole_race.py"),
        "--project",
        str(project),
        "--project-python",
        session.virtualenv.bin + "/python",
        "--sb3-python",
        str(sb3 / "bin" / "python"),
        "--json",
        str(output),
    )


@nox.session(default=False)
def fmt(session: nox.Session) -> None:
    """Format the template: render, let ruff fix the result, copy fixes back to plain
    .py sources. Changes to .jinja files are only reported."""
    session.install("-c", str(CONSTRAINTS), "ruff", "copier")
    project = render(session, Path(tempfile.mkdtemp()) / "fmt", ALL_PARTS, sweep=True)
    session.run("ruff", "check", "--fix", "--no-cache", "-q", str(project), success_codes=[0, 1])
    session.run("ruff", "format", "--no-cache", "-q", str(project))
    for source in (ROOT / "template").rglob("*"):
        rendered = project / rendered_path(source.relative_to(ROOT / "template"))
        if rendered.suffix != ".py" or source.suffix == ".jinja" or not rendered.is_file():
            continue
        if rendered.read_text() != source.read_text():
            shutil.copyfile(rendered, source)
            session.log(f"formatted {source.relative_to(ROOT)}")
    for source in (ROOT / "template").rglob("*.py.jinja"):
        session.log(f"check by hand: {source.relative_to(ROOT)} (ruff check {project})")


def extras(kinds: list[str]) -> str:
    """The extras a rendered project installs with on a CPU machine, as its README says: a
    tree part's XGBoost is the cpu extra (xgboost-cpu: no NCCL download)."""
    return "dev,cpu" if "sl_tree" in kinds else "dev"


def render(session: nox.Session, destination: Path, parts: str = "", sweep: bool = False) -> Path:
    """Render with the default answers, and the given parts (JSON list) and sweep if any."""
    if destination.exists():
        shutil.rmtree(destination)
    data = ["--data", f"parts={parts}"] if parts else []
    data += ["--data", "sweep=true"] if sweep else []
    session.run(
        "copier", "copy", "--vcs-ref", "HEAD", "--defaults", "--quiet", *data, str(ROOT), str(destination)
    )
    return destination


def rendered_path(path: Path) -> Path:
    """A template source's path in the project rendered with ALL_PARTS."""
    text = re.sub(r"\{% if [^%]*%\}(.*?)\{% endif %\}", r"\1", str(path))
    for variable, folder in PART_DIRS.items():
        text = text.replace(variable, folder)
    return Path(text)


if __name__ == "__main__":
    nox.main()
