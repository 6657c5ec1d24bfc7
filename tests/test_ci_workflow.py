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


def rendered_workflow(tmp_path) -> dict:
    import copier

    copier.run_copy(str(TEMPLATE), tmp_path, vcs_ref="HEAD", defaults=True, quiet=True)
    return yaml.safe_load((tmp_path / ".github" / "workflows" / "ci.yml").read_text())


def test_both_workflows_are_least_privilege_cancel_stale_runs_and_start_by_hand(tmp_path):
    for name, workflow in (("template", WORKFLOW), ("rendered", rendered_workflow(tmp_path))):
        assert workflow["permissions"] == {"contents": "read"}, name
        assert workflow["concurrency"]["cancel-in-progress"] is True, name
        assert "workflow_dispatch" in workflow[True], name  # YAML reads the key `on` as True
        for job in workflow["jobs"].values():
            for step in job["steps"]:
                if step.get("uses", "").startswith("actions/checkout@"):
                    assert step["with"]["persist-credentials"] is False, name
                if "uses" in step:  # GitHub's node24 majors: node20 runtimes are being removed
                    assert step["uses"].split("@")[1] in {"v6"}, step["uses"]
    for dependabot in (TEMPLATE / ".github", TEMPLATE / "template" / ".github"):
        ecosystems = {
            update["package-ecosystem"]
            for update in yaml.safe_load((dependabot / "dependabot.yml").read_text())["updates"]
        }
        assert ecosystems == {"github-actions", "pip"}
