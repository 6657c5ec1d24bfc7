"""Rendering helpers for the template's tests (pytest-copie renders; we assert)."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

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


def run(command: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess:
    """Run a command to completion, with a GPU lock of its own so parallel jobs don't queue."""
    environment = {**os.environ, "GPU_LOCK_PATH": str(cwd / ".gpu.lock"), "WANDB_MODE": "disabled", **env}
    return subprocess.run(command, cwd=cwd, env=environment, capture_output=True, text=True)


@dataclass
class Project:
    dir: Path
    python: str  # the interpreter of the venv the project is installed in
    parts: list[str]  # part kinds, in folder order: parts[0] is part1


@pytest.fixture(
    scope="session",
    params=[{}, {"parts": AVAILABLE_PARTS, "sweep": True}],
    ids=["defaults", "all-parts-with-sweep"],
)
def project(request, copie_session, tmp_path_factory) -> Project:
    """A rendered project (the default answers, and every part kind with sweeps), installed as its
    README says: editable, into a virtual environment of its own."""
    result = copie_session.copy(extra_answers=request.param)
    assert result.exit_code == 0, result.exception
    python = install_into_venv(result.project_dir, tmp_path_factory.mktemp("venv"))
    return Project(result.project_dir, python, request.param.get("parts", ["sl_neural"]))


def install_into_venv(project_dir: Path, venv: Path) -> str:
    """Install a rendered project, editable, into a new venv that sees this environment's
    packages; returns the venv's interpreter."""
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    # The new venv sees this environment's packages (torch, lightning ...) through a .pth file.
    site = run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], venv
    ).stdout.strip()
    Path(site, "parent_env.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    install = run([python, "-m", "pip", "install", "-q", "--no-deps", "-e", "."], project_dir)
    assert install.returncode == 0, install.stderr
    return python
