"""Every variant renders cleanly: the expected files and no others, no Jinja left,
ruff-clean, and the answers recorded for `copier update`."""

from __future__ import annotations

import ast
import json
import re
import sys
import tomllib
from pathlib import Path

import pytest
import yaml
from conftest import QUESTIONS, TEMPLATE, every_variant, run, variant_id

SRC_MODULES = """
    __init__ cli config errors project wandb_utils
    runs/__init__ runs/atomic runs/checkpoint_checks runs/console runs/directory
    runs/launch runs/lifetime runs/loggers runs/metrics_jsonl runs/provenance
    ops/__init__ ops/alerts ops/babysit ops/gpu_lock ops/hardware ops/memory ops/records
    report/__init__ report/__main__ report/figures report/run_files report/run_report
"""
CALLBACKS = "__init__ guards metrics progress resume"
TRAINING = "__init__ checkpoints config jsonl_logger optim precision profiler schedules seeding"
TRAINING += " stopwatch trainer"
CHECKLIST = "__init__ __main__ code_checks project registry run_checks"
SHARED_FILES = {
    ".copier-answers.yml",
    ".github/dependabot.yml",
    ".github/workflows/ci.yml",
    ".github/zizmor.yml",
    ".gitignore",
    ".pre-commit-config.yaml",
    "README.md",
    "constraints.txt",
    "experiments/README.md",
    "issues/README.md",
    "pyproject.toml",
    "scripts/detach.sh",
    "tests/conftest.py",
    "tests/test_alerts.py",
    "tests/test_config_cli.py",
    "tests/test_loggers.py",
    "tests/test_checklist.py",
    "tests/test_ops.py",
    "tests/test_provenance.py",
    "tests/test_faults.py",
    "tests/test_fuzz.py",
    "tests/test_distributed.py",
    "tests/test_report.py",
    "scripts/torchrun.sh",
    "scripts/slurm.sbatch",
    *(f"src/{name}.py" for name in SRC_MODULES.split()),
    *(f"src/checklist/{name}.py" for name in CHECKLIST.split()),
}
PART_FILES = ("__init__.py", "config.py", "data.py", "model.py", "train.py")
# The Lightning machinery, which the neural and RL parts share and a project of trees lacks.
LIGHTNING_FILES = [
    "tests/test_callbacks.py",
    "src/checklist/lightning_checks.py",
    *(f"src/callbacks/{name}.py" for name in CALLBACKS.split()),
    *(f"src/training/{name}.py" for name in TRAINING.split()),
]
SWEEP_MODULES = "__init__ command local runner spec wandb_sweep"
# What the parts that learn from a table share, neural and trees, and an RL project lacks.
TABLE_FILES = [
    "src/predict.py",
    "src/data_checks.py",
    "src/predictions.py",
    "src/report/prediction_figures.py",
    "src/checklist/table_checks.py",
    "tests/test_predictions.py",
]


# Files a part kind adds beyond the four of every part; {part} is its folder.
KIND_FILES = {
    "sl_neural": [
        "{part}/predict.py",
        *TABLE_FILES,
        *LIGHTNING_FILES,
        "src/neural/predict.py",
        *(f"src/neural/{name}.py" for name in ("__init__", "config", "data", "encoding", "module")),
    ],
    "sl_tree": [
        "src/checklist/tree_checks.py",
        *(f"src/trees/{name}.py" for name in ("__init__", "booster", "config", "data", "plots", "rounds")),
        "{part}/predict.py",
        *TABLE_FILES,
    ],
    "rl": [
        "{part}/envs.py",
        "{part}/evaluate.py",
        *LIGHTNING_FILES,
        "src/checklist/rl_checks.py",
        *(f"src/rl/{name}.py" for name in ("__init__", "config", "data", "evaluate", "module", "policy")),
    ],
}


def expected_files(answers: dict) -> set[str]:
    files = set(SHARED_FILES)
    for number, kind in enumerate(answers["parts"], start=1):
        files |= {f"part{number}/{name}" for name in PART_FILES}
        files |= {name.format(part=f"part{number}") for name in KIND_FILES[kind]}
        files.add(f"tests/test_{kind}.py")
        if answers["sweep"]:
            files.add(f"part{number}/sweep.py")  # SWP-1
    if answers["sweep"]:
        files |= {f"src/sweep/{name}.py" for name in SWEEP_MODULES.split()} | {"tests/test_sweep.py"}
        files.add("src/checklist/sweep_checks.py")
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
        text = (project / name).read_text().replace("${{", "")  # a GitHub Actions expression
        assert "{{" not in text and "{%" not in text, f"unrendered Jinja in {name}"

    recorded = yaml.safe_load((project / ".copier-answers.yml").read_text())
    assert recorded["parts"] == answers["parts"] and recorded["sweep"] == answers["sweep"]
    assert f'requires-python = ">={answers["python_version"]}"' in (project / "pyproject.toml").read_text()

    for command in (["ruff", "check", "--no-cache", "."], ["ruff", "format", "--check", "--no-cache", "."]):
        lint = run(command, project)
        assert lint.returncode == 0, lint.stdout + lint.stderr

    # The shipped checker passes on the project as rendered; static mode needs no install, no torch.
    checklist = run([sys.executable, "-m", "src.checklist", "--format", "json"], project)
    assert checklist.returncode == 0, checklist.stdout + checklist.stderr
    report = json.loads(checklist.stdout)
    assert [r for r in report["results"] if r["status"] == "fail"] == []


def test_readme_names_each_part(copie):
    result = copie.copy(extra_answers={"parts": ["sl_neural", "sl_tree", "rl"]})
    readme = (Path(result.project_dir) / "README.md").read_text()
    assert "| `part1/` | supervised neural (Lightning) |" in readme
    assert "| `part2/` | supervised tree (XGBoost) |" in readme
    assert "| `part3/` | reinforcement learning (TorchRL PPO in Lightning) |" in readme


@pytest.mark.parametrize("parts", [["sl_neural", "sl_tree", "rl"], ["rl"]], ids="+".join)
def test_readme_says_where_each_src_module_and_package_lives(copie, parts):
    project = Path(copie.copy(extra_answers={"parts": parts, "sweep": True}).project_dir)
    readme = (project / "README.md").read_text()
    table = readme.split("## Where things live", 1)[1].split("\n## ", 1)[0]
    homes = {p.name for p in (project / "src").iterdir() if p.is_dir() and p.name != "__pycache__"}
    homes |= {p.name for p in (project / "src").glob("*.py") if p.name != "__init__.py"}
    named = {home for home in homes if f"`src/{home}" in table}
    assert named == homes, f"README's table leaves out {sorted(homes - named)}"
    assert ("src/trees/" in table) == ("sl_tree" in parts)


# A run directory's name, `config_stamp`, as the docs write one: ..._20260101_120000, ..._2026*, ..._...
RUN_DIR_NAME = re.compile(r"[a-z][\w-]*_(?:\d{8}_\d{6}|\d{4}\*|\.\.\.|\*)")


def test_the_docs_put_each_run_directory_in_its_parts_folder(copie):
    """Runs go to output/<part>/<config>_<stamp>/: an example path without the part's folder
    names a directory that never exists."""
    answers = {"parts": ["sl_neural", "sl_tree", "rl"], "sweep": True}
    project = Path(copie.copy(extra_answers=answers).project_dir)
    docs = [project / "README.md", *(project / "src").rglob("*.py"), *project.glob("part*/*.py")]
    straight_under_output = [
        f"{path.relative_to(project)}: output/{found}"
        for path in docs
        for found in re.findall(r"output/([^/\s`'\")|,;:]+)", path.read_text())
        if RUN_DIR_NAME.fullmatch(found)
    ]
    assert straight_under_output == []


# The dependencies a project lists only with the parts that import them: distribution, module.
CONDITIONAL_DEPENDENCIES = {
    "pandera": "pandera",
    "scikit-learn": "sklearn",
    "torchdata": "torchdata",
    "torchrl": "torchrl",
    "tensordict": "tensordict",
    "gymnasium": "gymnasium",
    "optuna": "optuna",
}


@pytest.mark.parametrize("parts", [["sl_neural"], ["sl_tree"], ["rl"]], ids="+".join)
def test_a_project_depends_on_the_libraries_its_code_imports(copie, parts):
    """A project of the RL part alone installs no table library: scikit-learn brings scipy,
    which torchmetrics then imports at every start."""
    project = Path(copie.copy(extra_answers={"parts": parts, "sweep": True}).project_dir)
    listed = tomllib.loads((project / "pyproject.toml").read_text())["project"]["dependencies"]
    declared = {re.split(r"[<>=\[ ;]", line, maxsplit=1)[0] for line in listed}
    imported = set()
    for path in project.rglob("*.py"):
        if "tests" not in path.relative_to(project).parts:
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Import):
                    imported |= {alias.name.split(".")[0] for alias in node.names}
                elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    imported.add(node.module.split(".")[0])
    for distribution, module in CONDITIONAL_DEPENDENCIES.items():
        assert (distribution in declared) == (module in imported), (distribution, sorted(declared))


def test_a_tree_only_project_numbers_its_part_1(copie):
    result = copie.copy(extra_answers={"parts": ["sl_tree"]})
    assert not (result.project_dir / "part2").exists()
    assert "from part1.config import CONFIGS" in (result.project_dir / "part1" / "train.py").read_text()


def test_the_command_line_renders_with_parts_chosen_by_data(tmp_path):
    # As the README's users type it; copier 9.7 and older refuse this multiple-choice
    # answer ("Invalid choice"), hence _min_copier_version.
    command = [sys.executable, "-m", "copier", "copy", "--vcs-ref", "HEAD", "--defaults", "--trust"]
    command += ["--data", 'parts=["sl_tree", "rl"]', "--data", "sweep=true"]
    result = run([*command, str(TEMPLATE), str(tmp_path / "project")], tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    assert (tmp_path / "project" / "part2" / "envs.py").is_file()
    # The next steps printed after the copy are the project's README's, for its answers: the
    # tree part's XGBoost extra, and the sweeps it has (the default project's are in
    # tests/test_update.py, with the template's README).
    message = (result.stdout + result.stderr).split("Next steps", 1)[1]
    steps, claims = message.split("\n\n", 3)[1:3]
    readme = (tmp_path / "project" / "README.md").read_text()
    install = readme.split("## Install\n", 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    assert [line.strip() for line in steps.splitlines()[1:-1]] == install.splitlines()
    assert 'pip install -c constraints.txt ".[dev,cpu]"' in install
    assert "train, resume, sweep and" in claims and "\n## Sweeps\n" in readme


@pytest.mark.slow
def test_the_oldest_copier_allowed_renders_the_largest_project(tmp_path):
    """`nox -s min_copier` (a CI job of its own) runs these render tests on the oldest
    copier copier.yml allows; this one renders the largest variant with it on every run."""
    oldest = yaml.safe_load((TEMPLATE / "copier.yml").read_text())["_min_copier_version"]
    run([sys.executable, "-m", "venv", str(tmp_path / "venv")], tmp_path)
    python = str(tmp_path / "venv" / "bin" / "python")
    pins = (TEMPLATE / "template" / "constraints.txt").read_text().splitlines()
    other_pins = [pin for pin in pins if not pin.startswith("copier==")]
    (tmp_path / "constraints.txt").write_text("\n".join(other_pins) + "\n")
    pip = [python, "-m", "pip", "install", "-q", "-c", "constraints.txt"]
    install = run([*pip, f"copier=={oldest}"], tmp_path)
    assert install.returncode == 0, install.stderr[-2000:]
    defaults = {question: QUESTIONS[question]["default"] for question in ("license", "python_version")}
    answers = {"parts": ["sl_neural", "sl_tree", "rl"], "sweep": True, **defaults}
    command = [python, "-m", "copier", "copy", "--vcs-ref", "HEAD", "--defaults", "--trust", "--quiet"]
    command += ["--data", f"parts={json.dumps(answers['parts'])}", "--data", "sweep=true"]
    result = run([*command, str(TEMPLATE), str(tmp_path / "project")], tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    project = tmp_path / "project"
    assert {str(p.relative_to(project)) for p in project.rglob("*") if p.is_file()} == expected_files(answers)
    version = run([python, "-m", "copier", "--version"], tmp_path).stdout
    assert oldest in version, version
