"""Every variant renders cleanly: the expected files and no others, no Jinja left,
ruff-clean, and the answers recorded for `copier update`."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from conftest import every_variant, run, variant_id

SHARED_FILES = {
    ".copier-answers.yml",
    ".github/workflows/ci.yml",
    ".gitignore",
    ".pre-commit-config.yaml",
    "README.md",
    "constraints.txt",
    "experiments/README.md",
    "issues/README.md",
    "pyproject.toml",
    "scripts/detach.sh",
    "tests/conftest.py",
    "tests/test_config_cli.py",
    "tests/test_ops.py",
    *(
        f"src/{name}"
        for name in (
            "__init__.py", "babysit.py", "checkpoints.py", "cli.py", "config.py", "console.py",
            "data_checks.py", "metrics_jsonl.py", "optim.py", "precision.py", "project.py",
            "records.py", "run.py", "run_dir.py", "system_metrics.py", "trainer.py",
            "wandb_utils.py", "utils/__init__.py", "utils/gpu_lock.py", "utils/memory.py",
        )
    ),
    *(
        f"src/callbacks/{name}.py"
        for name in (
            "__init__", "batch_metrics", "epoch_summary", "rng_state", "run_info",
            "stop_file", "system_metrics", "timing", "tracking",
        )
    ),
}
PART_FILES = ("__init__.py", "config.py", "data.py", "model.py", "train.py")


def expected_files(answers: dict) -> set[str]:
    files = set(SHARED_FILES)
    for number, kind in enumerate(answers["parts"], start=1):
        files |= {f"part{number}/{name}" for name in PART_FILES}
        files.add(f"tests/test_{kind}.py")
    if answers["license"] != "Proprietary":
        files.add("LICENSE")
    return files


@pytest.mark.parametrize("answers", every_variant(), ids=variant_id)
def test_variant_renders_cleanly(copie, answers):
    result = copie.copy(extra_answers=answers)
    assert result.exit_code == 0, result.exception
    project = result.project_dir
    files = {str(p.relative_to(project)) for p in project.rglob("*") if p.is_file()}
    assert files == expected_files(answers)

    for name in files:
        text = (project / name).read_text()
        assert "{{" not in text and "{%" not in text, f"unrendered Jinja in {name}"

    recorded = yaml.safe_load((project / ".copier-answers.yml").read_text())
    assert recorded["parts"] == answers["parts"] and recorded["sweep"] == answers["sweep"]
    assert f'requires-python = ">={answers["python_version"]}"' in (project / "pyproject.toml").read_text()

    for command in (["ruff", "check", "--no-cache", "."], ["ruff", "format", "--check", "--no-cache", "."]):
        lint = run(command, project)
        assert lint.returncode == 0, lint.stdout + lint.stderr


def test_readme_names_each_part(copie):
    result = copie.copy(extra_answers={"parts": ["sl_neural"]})
    readme = (Path(result.project_dir) / "README.md").read_text()
    assert "| `part1/` | supervised neural (Lightning) |" in readme
