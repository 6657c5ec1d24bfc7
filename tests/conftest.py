"""Rendering helpers for the template's tests (pytest-copie renders; we assert)."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import sysconfig
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import pytest
import yaml

TEMPLATE = Path(__file__).resolve().parents[1]
QUESTIONS = yaml.safe_load((TEMPLATE / "copier.yml").read_text())


def choices(question: str) -> list:
    values = QUESTIONS[question]["choices"]
    return list(values.values()) if isinstance(values, dict) else list(values)


# Every part kind the template renders.
AVAILABLE_PARTS = ["sl_neural", "sl_tree", "rl"]


def part_selections() -> list[list[str]]:
    return [
        list(combo)
        for size in range(1, len(AVAILABLE_PARTS) + 1)
        for combo in itertools.combinations(AVAILABLE_PARTS, size)
    ]


def every_variant() -> list[dict]:
    """Every selection of part kinds, with and without sweeps, at the default licence and
    Python; then each other licence and Python version once, on the largest project.
    Licence and Python version change LICENSE, pyproject.toml and ruff's target, not
    which code renders, so their cross product with the parts would test nothing more."""
    default_license, default_python = QUESTIONS["license"]["default"], QUESTIONS["python_version"]["default"]
    largest = {"parts": AVAILABLE_PARTS, "sweep": True}
    return [
        *(
            {"parts": parts, "sweep": sweep, "license": default_license, "python_version": default_python}
            for parts in part_selections()
            for sweep in (False, True)
        ),
        *(
            {**largest, "license": license, "python_version": default_python}
            for license in choices("license")
            if license != default_license
        ),
        *(
            {**largest, "license": default_license, "python_version": python}
            for python in choices("python_version")
            if python != default_python
        ),
    ]


def variant_id(answers: dict) -> str:
    return "-".join(
        [
            "+".join(answers["parts"]),
            "sweep" if answers["sweep"] else "nosweep",
            answers["license"],
            answers["python_version"],
        ]
    )


def environment_for(cwd: Path, **env: str) -> dict[str, str]:
    """W&B off, and a GPU lock of the project's own so parallel jobs don't queue."""
    return {**os.environ, "GPU_LOCK_PATH": str(cwd / ".gpu.lock"), "WANDB_MODE": "disabled", **env}


def run(command: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess:
    """Run a command to completion."""
    return subprocess.run(command, cwd=cwd, env=environment_for(cwd, **env), capture_output=True, text=True)


@dataclass
class Project:
    dir: Path
    python: str  # the interpreter of the venv the project is installed in
    parts: list[str]  # part kinds, in folder order: parts[0] is part1
    slug: str  # the distribution's name and the W&B project
    own_suite: subprocess.Popen | None  # the project's own test suite, started when it was installed
    own_suite_log: Path | None  # where that suite's output goes


# The projects the slow tests install and train: the default answers, and every part kind with
# sweeps under a name with accents, a digit and punctuation (its ASCII slug names the distribution
# and the W&B project).
UNICODE_NAME = "Mi Proyecto-Ñandú 2 (beta)"
INSTALLED = {  # in this order: the all-parts project's suite, the longest, starts first
    "all-parts-with-sweep": {"project_name": UNICODE_NAME, "parts": AVAILABLE_PARTS, "sweep": True},
    "defaults": {},
}
# The slug each one's distribution and W&B project take.
SLUGS = {"defaults": "ml-pipeline", "all-parts-with-sweep": "mi-proyecto-nandu-2-beta"}
# The pytest options of the own suite each one runs as soon as it is installed. The all-parts
# project runs its slow tier, two tests at a time (pytest-xdist): most of them run one Python
# process at a time, so on a machine with a core to spare it takes half as long. It is most of
# CI's time. The fast tiers run in test_update.py (the usual edits test), after an update: the
# all-parts project's from the previous release, the default project's from this one.
OWN_SUITE_OPTIONS = {"all-parts-with-sweep": ["-m", "slow", "-n", "2"]}
# Each suite's log ends with its slowest tests: that suite is most of CI's time.
SUITE_REPORT = ["--durations=25"]


@pytest.fixture(scope="session")
def installed_projects(copie_session, tmp_path_factory) -> Iterator[dict[str, Project]]:
    """Both projects, rendered and installed as their README says, each into a virtual
    environment of its own. Each starts its own test suite in the background
    at once: the two suites and the template's other tests then share the cores instead
    of waiting for one another, which is most of CI's time."""
    projects = {}
    for name, answers in INSTALLED.items():
        result = copie_session.copy(extra_answers=answers)
        assert result.exit_code == 0, result.exception
        python = install_into_venv(result.project_dir, tmp_path_factory.mktemp("venv"))
        suite = log = None
        if name in OWN_SUITE_OPTIONS:
            log = tmp_path_factory.mktemp("own-suite") / "pytest.log"
            with log.open("w") as output:
                command = [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", *SUITE_REPORT]
                suite = start([*command, *OWN_SUITE_OPTIONS[name]], result.project_dir, output)
        parts = answers.get("parts", ["sl_neural"])
        projects[name] = Project(result.project_dir, python, parts, SLUGS[name], suite, log)
    yield projects
    for project in projects.values():  # a test that failed before it waited for the suite
        if project.own_suite is not None and project.own_suite.poll() is None:
            os.killpg(project.own_suite.pid, signal.SIGKILL)
            project.own_suite.wait()


@pytest.hookimpl(trylast=True)  # after pytest's own grouping of tests by fixture
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests of an installed project first, so that its suite starts early; the tests that
    wait for those suites last, so that nothing waits behind them."""
    items.sort(key=lambda item: 2 if "own_suite" in item.name else 0 if "project" in item.fixturenames else 1)


@pytest.fixture(scope="session", params=list(INSTALLED))
def project(request, installed_projects) -> Project:
    return installed_projects[request.param]


def start(command: list[str], cwd: Path, output: IO[str]) -> subprocess.Popen:
    """Start a command in a process group of its own (so that only what we started is
    ever signalled), with the same environment as run()."""
    return subprocess.Popen(
        command,
        cwd=cwd,
        env=environment_for(cwd),
        stdout=output,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


# What a smoke run of each part kind leaves in its run directory, beyond config.json and console.log.
SMOKE_OUTPUTS = {
    "sl_neural": ["checkpoints/best.ckpt", "checkpoints/last.ckpt", "model.pt", "report.md"],
    "sl_tree": ["model.ubj", "metrics.json", "plots/shap_summary.png", "report.md"],
    "rl": ["checkpoints/best.ckpt", "checkpoints/last.ckpt", "model.pt", "report.md"],
}
NAMESPACES = ("timing/", "tracking/", "system/")


def assert_each_part_smoke_trains(python: str, project_dir: Path, parts: list[str], slug: str) -> None:
    """`python -m partN.train --config smoke` of each part, as the README says, leaves a whole
    run directory logged to the project's W&B project, with every metric namespace (OUT-1..5, LOG-4)."""
    for number, kind in enumerate(parts, start=1):
        started = time.monotonic()
        result = run([python, "-m", f"part{number}.train", "--config", "smoke"], project_dir)
        print(f"\npart{number} ({kind}) smoke run: {time.monotonic() - started:.1f} s wall")
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
        run_dir = max((project_dir / "output" / f"part{number}").glob("smoke_*"))
        for name in ["config.json", "console.log", "metrics.jsonl", *SMOKE_OUTPUTS[kind]]:
            assert (run_dir / name).stat().st_size > 0, f"{kind}: {name}"
        assert json.loads((run_dir / "config.json").read_text())["wandb_project"] == slug
        events = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
        keys = set().union(*events)
        for namespace in NAMESPACES:
            assert any(key.startswith(namespace) for key in keys), f"{kind}: {namespace}"


def install_into_venv(project_dir: Path, venv: Path) -> str:
    """Install a rendered project as its README says into a new venv that sees this
    environment's packages; returns the venv's interpreter."""
    python = new_venv(venv)
    install_project(python, project_dir)
    return python


def new_venv(venv: Path) -> str:
    """A venv that sees this environment's packages (torch, lightning ...) through a .pth
    file; returns its interpreter."""
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    site = run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], venv
    ).stdout.strip()
    Path(site, "parent_env.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return python


def install_project(python: str, project_dir: Path) -> None:
    """`pip install .` as the README says, its dependencies already there."""
    install = run([python, "-m", "pip", "install", "-q", "--no-deps", "."], project_dir)
    assert install.returncode == 0, install.stderr
