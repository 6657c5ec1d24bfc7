"""Rendered projects, installed as their README says, train every part and pass their own tests."""

from __future__ import annotations

import json
import time

import pytest
from conftest import run

pytestmark = pytest.mark.slow

# What a smoke run of each part kind leaves in its run directory, beyond config.json and console.log.
OUTPUTS = {
    "sl_neural": ["checkpoints/best.ckpt", "checkpoints/last.ckpt", "model.pt"],
    "sl_tree": ["model.ubj", "metrics.json", "plots/shap_summary.png"],
    "rl": ["checkpoints/best.ckpt", "checkpoints/last.ckpt", "model.pt"],
}
NAMESPACES = ("timing/", "tracking/", "system/")


def test_every_part_smoke_trains_from_the_command_line(project):  # OUT-1..5, LOG-4
    for number, kind in enumerate(project.parts, start=1):
        started = time.monotonic()
        result = run([project.python, "-m", f"part{number}.train", "--config", "smoke"], project.dir)
        print(f"\npart{number} ({kind}) smoke run: {time.monotonic() - started:.1f} s wall")
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
        run_dir = max((project.dir / "output").glob("smoke_*"))
        for name in ["config.json", "console.log", "metrics.jsonl", *OUTPUTS[kind]]:
            assert (run_dir / name).stat().st_size > 0, f"{kind}: {name}"
        events = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
        keys = set().union(*events)
        for namespace in NAMESPACES:
            assert any(key.startswith(namespace) for key in keys), f"{kind}: {namespace}"


def test_script_form_of_the_command_works(project):
    result = run([project.python, "part1/train.py", "--help"], project.dir)
    assert result.returncode == 0, result.stderr
    assert "--config NAME" in result.stdout


def test_rendered_projects_own_suite_passes(project):
    # Started in the background when the project was installed (conftest.installed_projects).
    returncode = project.own_suite.wait()
    output = project.own_suite_log.read_text()
    assert returncode == 0, output[-5000:]
    assert " passed" in output
