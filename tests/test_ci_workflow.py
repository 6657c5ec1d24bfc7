"""The template's GitHub workflow runs one job per variant the questions allow, and the update tests."""

from __future__ import annotations

import yaml
from conftest import TEMPLATE, part_selections

WORKFLOW = yaml.safe_load((TEMPLATE / ".github" / "workflows" / "ci.yml").read_text())


def test_the_variant_matrix_lists_every_selection_of_parts_with_and_without_sweeps():
    expected = {"+".join(parts) + suffix for parts in part_selections() for suffix in ("", "-sweep")}
    matrix = WORKFLOW["jobs"]["variant"]["strategy"]["matrix"]["variant"]
    assert sorted(matrix) == sorted(expected) and len(matrix) == len(expected)


def test_there_are_update_and_gpu_jobs():
    update_steps = " ".join(step.get("run", "") for step in WORKFLOW["jobs"]["update"]["steps"])
    assert "tests/test_update.py" in update_steps
    gpu_steps = " ".join(step.get("run", "") for step in WORKFLOW["jobs"]["gpu"]["steps"])
    assert "-m gpu" in gpu_steps


def test_a_job_renders_with_the_oldest_copier_the_template_allows():
    steps = " ".join(step.get("run", "") for step in WORKFLOW["jobs"]["min-copier"]["steps"])
    assert "nox -s min_copier" in steps
    noxfile = (TEMPLATE / "noxfile.py").read_text()
    assert "_min_copier_version" in noxfile and 'f"copier=={oldest}"' in noxfile
