"""The default project, installed as its README says, trains and passes its own tests."""

from __future__ import annotations

import json
import time

import pytest
from conftest import run

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def smoke(default_project):
    """`python -m part1.train --config smoke`, the README's first training command."""
    started = time.monotonic()
    result = run([default_project.python, "-m", "part1.train", "--config", "smoke"], default_project.dir)
    seconds = time.monotonic() - started
    print(f"\nsmoke run: {seconds:.1f} s wall")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    (run_dir,) = (default_project.dir / "output").glob("smoke_*")
    return run_dir, result


def test_smoke_run_leaves_its_outputs(smoke):  # OUT-1..4
    run_dir, _ = smoke
    for name in (
        "config.json",
        "console.log",
        "metrics.jsonl",
        "checkpoints/best.ckpt",
        "checkpoints/last.ckpt",
    ):
        assert (run_dir / name).stat().st_size > 0, name
    events = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    keys = set().union(*events)
    for namespace in ("batch/", "timing/", "tracking/", "system/"):
        assert any(key.startswith(namespace) for key in keys), namespace
    assert {"train_loss_epoch", "val_loss", "lr", "test_acc"} <= keys


def test_script_form_of_the_command_works(default_project):
    result = run([default_project.python, "part1/train.py", "--help"], default_project.dir)
    assert result.returncode == 0, result.stderr
    assert "--config NAME" in result.stdout


def test_rendered_projects_own_suite_passes(default_project, smoke):
    result = run(
        [default_project.python, "-m", "pytest", "-q", "-p", "no:cacheprovider"], default_project.dir
    )
    assert result.returncode == 0, result.stdout[-5000:]
    assert " passed" in result.stdout
