"""Rendered projects, installed as their README says, train every part and pass their own tests."""

from __future__ import annotations

import json
import time

import pytest
from conftest import install_project, new_venv, run

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
        run_dir = max((project.dir / "output" / f"part{number}").glob("smoke_*"))
        for name in ["config.json", "console.log", "metrics.jsonl", *OUTPUTS[kind]]:
            assert (run_dir / name).stat().st_size > 0, f"{kind}: {name}"
        assert json.loads((run_dir / "config.json").read_text())["wandb_project"] == project.slug
        events = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
        keys = set().union(*events)
        for namespace in NAMESPACES:
            assert any(key.startswith(namespace) for key in keys), f"{kind}: {namespace}"


def test_the_project_installs_under_its_slug(project):
    installed = run([project.python, "-m", "pip", "show", project.slug], project.dir)
    assert installed.returncode == 0, installed.stderr
    assert f"Name: {project.slug}" in installed.stdout


def test_script_form_of_the_command_works(project):
    # The README's form for an IDE: the project folder on the path, as `python -m` puts it.
    result = run([project.python, "part1/train.py", "--help"], project.dir, PYTHONPATH=str(project.dir))
    assert result.returncode == 0, result.stderr
    assert "--config NAME" in result.stdout


def test_rendered_projects_own_suite_passes(project):
    # Started in the background when the project was installed (conftest.installed_projects).
    returncode = project.own_suite.wait()
    output = project.own_suite_log.read_text()
    assert returncode == 0, output[-5000:]
    assert " passed" in output


def test_two_projects_share_one_environment(copie_session, tmp_path):
    """Installing a project installs nothing importable, so two projects in one venv each
    run their own code and log to their own W&B project, and uninstalling one leaves the
    other whole (installed top-level `src` and `part1` packages overwrote each other)."""
    python = new_venv(tmp_path / "venv")
    projects = {}
    for name, slug in (("Alpha Lab", "alpha-lab"), ("Beta Lab", "beta-lab")):
        result = copie_session.copy(extra_answers={"project_name": name, "parts": ["sl_tree"]})
        assert result.exit_code == 0, result.exception
        install_project(python, result.project_dir)
        projects[slug] = result.project_dir
    listed = json.loads(run([python, "-m", "pip", "list", "--format", "json"], tmp_path).stdout)
    assert {"alpha-lab", "beta-lab"} <= {package["name"] for package in listed}
    assert "No module named 'src'" in run([python, "-c", "import src"], tmp_path).stderr

    def trains_as_itself(slug: str) -> None:
        project_dir, output = projects[slug], tmp_path / "output" / slug
        command = [python, "-m", "part1.train", "--config", "smoke", "--output.base-dir", str(output)]
        result = run(command, project_dir)
        assert result.returncode == 0, result.stderr[-3000:]
        run_dir = max(output.glob("smoke_*"))
        assert json.loads((run_dir / "config.json").read_text())["wandb_project"] == slug
        modules = "import part1.train, src.config; print(part1.train.__file__, src.config.__file__)"
        imported = run([python, "-c", modules], project_dir).stdout.split()
        assert imported == [str(project_dir / "part1" / "train.py"), str(project_dir / "src" / "config.py")]

    trains_as_itself("alpha-lab")
    trains_as_itself("beta-lab")
    uninstalled = run([python, "-m", "pip", "uninstall", "-y", "alpha-lab"], tmp_path)
    assert uninstalled.returncode == 0, uninstalled.stderr
    trains_as_itself("beta-lab")
