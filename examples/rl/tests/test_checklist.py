"""The checklist checker (src/checklist): it passes on this project and on a smoke run
of each part, and each of its checks fails on a copy broken on purpose."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import PARTS, ROOT, slow

from src.checklist.__main__ import check_project
from src.checklist.registry import CHECKS

KIND_GROUPS = {"any": list(PARTS), "nn": ["sl_neural", "rl"], "sl": ["sl_neural", "sl_tree"]}
DELETE = None  # as an edit: delete the file
HAS_SWEEP = (ROOT / "src" / "sweep.py").is_file()


def replace(old: str, new: str) -> Callable[[str], str]:
    def edit(text: str) -> str:
        assert old in text, f"the broken copy's edit no longer applies: {old!r} not found"
        return text.replace(old, new)

    return edit


def append(extra: str) -> Callable[[str], str]:
    return lambda text: text + "\n" + extra


def add_method(class_name: str) -> Callable[[str], str]:
    """A method in a config variant, which should only override fields (CFG-6)."""

    def edit(text: str) -> str:
        header = re.search(rf"class {class_name}\(\w+\):\n", text)
        assert header, f"no class {class_name}"
        return (
            text[: header.end()]
            + "    def describe(self) -> str:\n        return ''\n\n"
            + text[header.end() :]
        )

    return edit


OOM_PROBE = """
def largest_batch_size(size: int) -> int:
    while True:
        try:
            return size
        except RuntimeError as error:
            if "out of memory" not in str(error):
                raise
            size //= 2
"""


def logger_before_data(text: str) -> str:
    """The WandbLogger created right after seeding, before the DataModule (MAIN-1)."""
    logger = re.search(r"\n *logger = create_wandb_logger\(cfg, run\.dir\)\n", text)
    seed = re.search(r"\n( *)L\.seed_everything\(.*\)\n", text)
    assert logger and seed, "no logger or seed line"
    text = text[: logger.start()] + "\n" + text[logger.end() :]
    moved = f"{seed[1]}logger = create_wandb_logger(cfg, run.dir)\n"
    return text.replace(seed[0], seed[0] + moved, 1)


# (item, part kind the edit needs ("any", "nn", "sl" or a kind; None: none), file, edit).
# {part} in the file names the part; edits are checked to still apply.
STATIC_BREAKS = [
    ("CFG-1", None, "src/config.py", replace("@dataclass\nclass BaseConfig:", "class BaseConfig:")),
    ("CFG-3", "any", "{part}/train.py", replace("parse_cli(CONFIGS", "parse_cli(dict(CONFIGS)")),
    ("CFG-4", None, "src/config.py", replace("max_wall_clock_hours: float", "max_hours: float")),
    ("CFG-5", "nn", "src/config.py", replace("num_epochs: int = 10_000", "num_epochs: int = 10")),
    ("CFG-6", "any", "{part}/config.py", add_method("Aggressive")),
    ("STR-1", "any", "{part}/data.py", DELETE),
    ("STR-2", None, "src/gpu_lock.py", DELETE),
    ("STR-3", "any", "{part}/train.py", replace("def main() -> None:", "def run_main() -> None:")),
    ("LIT-1", "nn", "{part}/model.py", replace("def validation_step(", "def _validation_step(")),
    ("LIT-2", "nn", "{part}/data.py", replace("def test_dataloader(", "def _test_dataloader(")),
    ("LIT-3", "nn", "{part}/model.py", replace("def load_model_from_checkpoint(", "def load_checkpoint(")),
    ("LIT-4", "nn", "src/optim.py", replace("p.dim() >= 2", "p.dim() >= 1")),
    ("LIT-4", "sl_neural", "{part}/train.py", replace("=cfg.gradient_clip_val", "=None")),
    ("LOG-1", None, "src/wandb_utils.py", replace("        mode=mode,\n", "")),
    ("LOG-1", "nn", "src/wandb_utils.py", replace("log_model=False", "log_model=True")),
    ("LOG-1", "any", "src/wandb_utils.py", replace("name=cfg.name,", "name=None,")),
    ("LOG-2", "nn", "{part}/model.py", replace("self.save_hyperparameters(", "print(")),
    ("LOG-3", "nn", "{part}/model.py", replace('self.log("train_loss"', 'self.log("loss"')),
    ("LOG-4", "nn", "src/trainer.py", replace("SystemMetricsCallback(),", "")),
    ("LOG-4", "sl_tree", "src/xgb_callbacks.py", replace("= RoundMetrics(", "= dict(")),
    ("LOG-5", "nn", "src/trainer.py", replace("RunInfoCallback(),", "")),
    ("LOG-5", "sl_tree", "{part}/train.py", replace("log_start_of_run(", "print(")),
    ("LOG-6", "any", "{part}/train.py", replace("log_model_artifact(model_path", "print(model_path")),
    (
        "PRF-1",
        "nn",
        "src/trainer.py",
        replace('profiler=profiler_cls(dirpath=run_dir, filename="profile"),', ""),
    ),
    ("PRF-2", "nn", "src/callbacks/timing.py", replace("def on_validation_end(", "def on_validation_done(")),
    ("PRC-1", "nn", "{part}/model.py", append("SCALER = torch.amp.GradScaler()\n")),
    (
        "PRC-2",
        "nn",
        "{part}/model.py",
        append("def f(x):\n    with torch.autocast('cpu'):\n        return x\n"),
    ),
    ("PRC-3", "nn", "src/precision.py", replace("torch.cuda.is_bf16_supported()", "True")),
    ("RL-1", "rl", "{part}/data.py", replace("ParallelEnv(cfg.num_envs", "SerialEnv(cfg.num_envs")),
    ("RL-2", "rl", "{part}/data.py", replace("functools.partial(make_env, cfg.env_name)", "lambda: None")),
    ("RL-3", "rl", "{part}/train.py", replace("datamodule.close()", "pass")),
    (
        "RL-4",
        "rl",
        "{part}/data.py",
        replace("TransformedEnv(env, RewardSum())", "TransformedEnv(env, StepCounter())"),
    ),
    ("RL-5", "rl", "{part}/envs.py", replace("distance=Unbounded(shape=(1,), device=self.device),", "")),
    ("RL-6", "rl", "{part}/model.py", append("from torchrl.envs.utils import step_mdp\n")),
    ("RL-7", "rl", "{part}/envs.py", replace("device=torch.device(device)", "device=device")),
    ("RL-8", "rl", "{part}/__init__.py", replace("import os\n", "import os\n\nimport numpy\n")),
    ("RL-9", "rl", "{part}/model.py", replace('batch["next", "done"]', 'batch["done"]')),
    ("RL-10", "rl", "{part}/envs.py", replace("Bounded(low", "BoundedTensorSpec(low")),
    ("RL-11", "rl", "{part}/model.py", replace("value / max(updates, 1)", "value")),
    ("RL-12", "rl", "{part}/model.py", replace("if not torch.isfinite(loss):", "if False:")),
    (
        "RL-13",
        "rl",
        "{part}/model.py",
        replace("clip_grad_norm_(self.critic.parameters()", "clip_grad_norm_(self.policy.parameters()"),
    ),
    (
        "MEM-1",
        "sl_neural",
        "{part}/train.py",
        replace('BatchSizeFinder(mode="binsearch")', 'BatchSizeFinder(mode="power")'),
    ),
    ("MEM-1", "nn", "{part}/model.py", append(OOM_PROBE)),
    (
        "MEM-2",
        "nn",
        "{part}/model.py",
        replace("self.batch_size = batch_size", "self.minibatch = batch_size"),
    ),
    ("MEM-3", "sl_neural", "{part}/train.py", replace("cfg.gradient_accumulation_steps", "1")),
    ("MEM-4", "nn", "{part}/train.py", replace("del model, trainer", "pass")),
    ("MAIN-1", "nn", "{part}/train.py", replace('ckpt_path="best")', 'ckpt_path="last")')),
    ("MAIN-1", "nn", "{part}/train.py", logger_before_data),
    ("CB-1", "nn", "src/trainer.py", replace("patience=cfg.patience,", "patience=3,")),
    (
        "CB-1",
        "sl_tree",
        "src/xgb_callbacks.py",
        replace("EarlyStoppingRounds(cfg.early_stopping_rounds", "EarlyStoppingRounds(5"),
    ),
    ("CB-2", "nn", "src/trainer.py", replace("save_top_k=1,", "save_top_k=3,")),
    ("CB-3", "nn", "src/trainer.py", replace('logging_interval="epoch"', 'logging_interval="step"')),
    (
        "CB-4",
        "nn",
        "src/trainer.py",
        replace("StopFileCallback(stop_file_paths(cfg.stop_file, run_dir)),", ""),
    ),
    (
        "CB-4",
        "sl_tree",
        "src/xgb_callbacks.py",
        replace("StopFileRounds(stop_file_paths(cfg.stop_file, run_dir)),", ""),
    ),
    (
        "OPS-1",
        "any",
        "{part}/train.py",
        replace("with GpuLock(), exit_on_bad_input():", "with exit_on_bad_input():"),
    ),
    ("OPS-2", None, "scripts/detach.sh", replace("nohup ", "")),
    ("OUT-1", None, "src/run_dir.py", replace('STAMP_FORMAT = "%Y%m%d_%H%M%S"', 'STAMP_FORMAT = "%Y%m%d"')),
    ("OUT-4", "nn", "src/trainer.py", replace("JsonlLogger(run_dir", "print(run_dir")),
    ("OUT-4", "sl_tree", "src/xgb_callbacks.py", replace("= RoundMetrics(", "= dict(")),
    ("SWP-1", "any", "{part}/sweep.py", DELETE),
    (
        "SWP-2",
        "any",
        "{part}/train.py",
        replace("        main_with_config(cfg, resume_from)", "        print(cfg)"),
    ),
    (
        "SWP-3",
        None,
        "src/wandb_utils.py",
        replace("if wandb.run is not None and wandb.run.sweep_id:", "if False:"),
    ),
    ("SWP-4", "any", "{part}/sweep.py", replace('"architecture": {"values": list(ARCHITECTURES)},', "")),
    ("SWP-5", None, "src/sweep.py", replace("max_hours", "max_trial_hours")),
    ("SWP-6", None, "README.md", replace("tmux new -s sweep", "screen -S sweep")),
    (
        "SWP-7",
        None,
        "src/sweep.py",
        replace("        gc.collect()\n        gc.collect()\n", "        gc.collect()\n"),
    ),
    ("RES-3", None, "src/checkpoints.py", replace("map_location=map_location, weights_only", "weights_only")),
    ("DATA-1", "sl", "{part}/data.py", replace("validate_table(", "check_table(")),
]


def check_ids(mode: str) -> set[str]:
    return {check.id for check in CHECKS if check.mode == mode}


def break_id(entry: tuple) -> str:
    item, kind, _, _ = entry
    return f"{item}-{kind}" if kind else item


def part_for(kind: str | None) -> str | None:
    """The folder of a part the edit can use; skips the test when there is none."""
    if kind is None:
        return None
    for candidate in KIND_GROUPS.get(kind, [kind]):
        if candidate in PARTS:
            return PARTS[candidate]
    pytest.skip(f"this project has no {kind} part")


def statuses(report, item: str, mode: str) -> set[str]:
    return {result.status for result in report.results if result.id == item and result.mode == mode}


def copy_project(destination: Path) -> Path:
    """The code of this project (not its runs or caches), to break."""
    ignore = shutil.ignore_patterns("output", "__pycache__", ".*", "*.egg-info", "wandb", "logs")
    shutil.copytree(ROOT, destination, ignore=ignore)
    return destination


def test_every_check_has_a_broken_copy():  # a check that cannot fail is a defect
    assert check_ids("static") <= {item for item, *_ in STATIC_BREAKS}
    assert check_ids("run") <= {item for item, *_ in RUN_BREAKS}


def test_the_project_passes_its_static_checks():
    report = check_project(ROOT, [])
    assert [r for r in report.results if r.status == "fail"] == []
    assert len(report.automated) > 0 and len(report.manual) > 0


def test_the_command_line_needs_no_torch():
    # -S: no site-packages at all, so nothing but the standard library can be imported.
    command = [sys.executable, "-S", "-m", "src.checklist", "--format", "json"]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout)
    assert report["counts"]["fail"] == 0 and report["items_counts"]["automated"] == len(
        report["items"]["automated"]
    )


@pytest.mark.parametrize("entry", STATIC_BREAKS, ids=break_id)
def test_a_broken_copy_fails_the_static_check(tmp_path, entry):
    item, kind, relative, edit = entry
    if item.startswith("SWP") and not HAS_SWEEP:
        pytest.skip("this project has no sweeps")
    project = copy_project(tmp_path / "project")
    path = project / relative.format(part=part_for(kind))
    if edit is DELETE:
        path.unlink()
    else:
        path.write_text(edit(path.read_text()))
    assert statuses(check_project(project, []), item, "static") == {"fail"}


@pytest.mark.parametrize(
    ("waiver", "message"),
    [
        ('"CB-4" = ""', "needs a reason"),
        ('"XYZ-1" = "no such item"', "valid IDs: CFG-1"),
    ],
)
def test_bad_waivers_are_refused(tmp_path, waiver, message):
    project = copy_project(tmp_path / "project")
    pyproject = project / "pyproject.toml"
    pyproject.write_text(
        pyproject.read_text().replace("[tool.checklist.waivers]", f"[tool.checklist.waivers]\n{waiver}")
    )
    result = subprocess.run(
        [sys.executable, "-m", "src.checklist"], cwd=project, capture_output=True, text=True
    )
    assert result.returncode == 2 and message in result.stderr, result.stderr


def test_a_waived_failure_does_not_fail_the_run(tmp_path):
    project = copy_project(tmp_path / "project")
    (project / "scripts" / "detach.sh").write_text('#!/bin/bash\npython -m "$@"\n')  # OPS-2 fails
    pyproject = project / "pyproject.toml"
    reason = "runs start under the cluster's scheduler"
    pyproject.write_text(
        pyproject.read_text().replace(
            "[tool.checklist.waivers]", f'[tool.checklist.waivers]\n"OPS-2" = "{reason}"'
        )
    )
    result = subprocess.run(
        [sys.executable, "-m", "src.checklist"], cwd=project, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert re.search(rf"WAIVED\s+OPS-2\s+{reason}", result.stdout)
    pyproject.write_text(pyproject.read_text().replace('"OPS-2"', '# "OPS-2"'))
    assert (
        subprocess.run([sys.executable, "-m", "src.checklist"], cwd=project, capture_output=True).returncode
        == 1
    )


@pytest.mark.parametrize("argument", ["no-such-dir", "src", "pyproject.toml"])
def test_a_path_that_is_not_a_run_directory_is_bad_input(argument):
    result = subprocess.run(
        [sys.executable, "-m", "src.checklist", argument], cwd=ROOT, capture_output=True, text=True
    )
    assert result.returncode == 2
    assert "a run directory is output/" in result.stderr


# Run checks: one smoke run per part kind (shared with the part's own tests), then broken copies.


def edit_events(change: Callable[[dict], dict]) -> Callable[[Path], None]:
    def edit(run_dir: Path) -> None:
        path = run_dir / "metrics.jsonl"
        events = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        path.write_text("".join(json.dumps(change(event)) + "\n" for event in events))

    return edit


def without(*keys: str) -> Callable[[Path], None]:
    return edit_events(
        lambda event: {k: v for k, v in event.items() if k not in keys and not k.startswith(keys)}
    )


def unlink(relative: str) -> Callable[[Path], None]:
    return lambda run_dir: (run_dir / relative).unlink()


def add_config_key(run_dir: Path) -> None:
    path = run_dir / "config.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "no_such_field": 1}))


def grow_model(run_dir: Path) -> None:
    model = next(path for path in (run_dir / "model.pt", run_dir / "model.ubj") if path.exists())
    model.write_bytes(model.read_bytes() + b"\0")  # no longer the file the artifact holds


def shares_off(event: dict) -> dict:
    return {k: (v * 2 if k.startswith("timing/") and k.endswith("_pct") else v) for k, v in event.items()}


def env_step_zero(event: dict) -> dict:
    return {**event, "timing/env_step_seconds": 0.0} if "timing/env_step_seconds" in event else event


RUN_BREAKS = [  # (item, part kind, edit of a copy of the run directory)
    ("CFG-2", "any", add_config_key),
    ("OUT-2", "any", unlink("console.log")),
    ("OUT-3", "nn", unlink("checkpoints/last.ckpt")),
    ("OUT-4", "any", unlink("metrics.jsonl")),
    ("LOG-4", "any", without("system/")),
    ("LOG-5", "any", without("gpu_name")),
    ("LOG-6", "any", grow_model),
    ("PRF-2", "nn", without("timing/inference_seconds")),
    ("PRF-3", "rl", edit_events(env_step_zero)),
    ("PRF-4", "nn", edit_events(shares_off)),
    ("RL-11", "rl", without("batch/actual_updates")),
    ("OUT-5", "sl_tree", unlink("plots/shap_summary.png")),
]


def kind_for(kind: str) -> str:
    for candidate in KIND_GROUPS.get(kind, [kind]):
        if candidate in PARTS:
            return candidate
    pytest.skip(f"this project has no {kind} part")


@slow
@pytest.mark.parametrize("kind", ["sl_neural", "sl_tree", "rl"])
def test_a_smoke_run_passes_its_run_checks(smoke_runs, kind):
    run_dir, _ = smoke_runs(kind_for(kind))
    report = check_project(ROOT, [run_dir])
    run_results = [r for r in report.results if r.mode == "run"]
    assert run_results and [r for r in report.results if r.status in ("fail", "skipped")] == []


@slow
def test_without_wandb_the_artifact_check_says_why_it_skips(smoke_runs, tmp_path):
    run_dir, _ = smoke_runs(kind_for("any"))
    copy = shutil.copytree(run_dir, tmp_path / run_dir.name, ignore=shutil.ignore_patterns("wandb"))
    (result,) = [r for r in check_project(ROOT, [copy]).results if r.id == "LOG-6" and r.mode == "run"]
    assert result.status == "skipped" and "W&B was off" in result.why


@slow
@pytest.mark.parametrize("entry", RUN_BREAKS, ids=lambda entry: f"{entry[0]}-{entry[1]}")
def test_a_broken_run_directory_fails_the_run_check(smoke_runs, tmp_path, entry):
    item, kind, edit = entry
    run_dir, _ = smoke_runs(kind_for(kind))
    copy = shutil.copytree(run_dir, tmp_path / run_dir.name)
    edit(copy)
    assert statuses(check_project(ROOT, [copy]), item, "run") == {"fail"}
