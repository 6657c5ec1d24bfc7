"""Run reports: every part's run ends with report.md and its figures, and
`python -m src.report` compares runs side by side."""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
import sys

import numpy as np
import pytest
from conftest import PARTS, PNG_SIGNATURE, ROOT, assert_report, part_module

from src import predictions
from src.report.run_report import prediction_figures
from src.runs.lifetime import start_run

# The figures each kind's metrics call for; a tree part's own plots/ are in its report too.
FIGURES = {
    "sl_neural": ["learning_curves", "learning_rate", "timing", "system", "confusion_matrix", "roc"],
    "sl_tree": ["learning_curves", "timing", "system"],
    "rl": ["learning_curves", "learning_rate", "timing", "system"],
}
OWN_PLOTS = {"sl_tree": ["feature_importance", "predicted_vs_actual", "shap_summary"]}
# A metric each kind's final metrics table must hold, with its best epoch or round.
CURVE_METRIC = {"sl_neural": "val_acc", "sl_tree": "val_rmse", "rl": "val_episode_reward"}


def report_command(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "src.report", *args], cwd=ROOT, capture_output=True, text=True, timeout=300
    )


@pytest.mark.parametrize("kind", sorted(PARTS))
def test_every_run_ends_with_its_report(kind, smoke_runs):
    run_dir, _ = smoke_runs(kind)
    report = assert_report(run_dir, FIGURES[kind] + OWN_PLOTS.get(kind, []))
    assert f"| {CURVE_METRIC[kind]} |" in report
    assert "**finished**" in report and "## Config" in report and "| python |" in report
    if kind == "sl_neural":  # the figures of a classifier's test predictions
        tested = predictions.read_predictions(run_dir / predictions.PREDICTIONS_FILE)
        assert len(predictions.probability_columns(tested)) == 10 and tested["row"].is_unique


def test_report_compares_two_runs_side_by_side(smoke_runs, tmp_path):
    first, _ = smoke_runs(sorted(PARTS)[0])
    second = shutil.copytree(first, tmp_path / "runs" / "other_run")
    config = json.loads((second / "config.json").read_text())
    (second / "config.json").write_text(json.dumps({**config, "seed": config["seed"] + 1}))
    output = tmp_path / "compared"
    result = report_command(str(first), str(second), "--output", str(output))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(output / "report.md")
    comparison = (output / "report.md").read_text()
    assert first.name in comparison and "other_run" in comparison
    assert f"| seed | {config['seed']} | {config['seed'] + 1} |" in comparison
    assert (output / "learning_curves.png").read_bytes().startswith(PNG_SIGNATURE)


def test_report_of_one_run_writes_it_again(smoke_runs, tmp_path):
    run_dir = shutil.copytree(smoke_runs(sorted(PARTS)[0])[0], tmp_path / "run")
    (run_dir / "report.md").unlink()
    result = report_command(str(run_dir))
    assert result.returncode == 0, result.stderr
    assert_report(run_dir, ["learning_curves"])


@pytest.mark.parametrize(
    ("name", "message"), [("missing", "does not exist"), ("empty", "has no config.json")]
)
def test_report_of_a_path_that_is_no_run_is_one_line(name, message, tmp_path):
    (tmp_path / "empty").mkdir()
    result = report_command(str(tmp_path / name), str(tmp_path / name))
    assert result.returncode == 2
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"error: {tmp_path / name} {message}")


def test_a_report_that_fails_leaves_the_run_as_it_ended(tmp_path, capsys):
    base = part_module(sorted(PARTS)[0], "config").CONFIGS["smoke"]()
    cfg = dataclasses.replace(base, output=dataclasses.replace(base.output, base_dir=str(tmp_path)))
    with start_run(cfg) as run:
        (run.dir / "metrics.jsonl").write_text("[1, 2]\n")  # no event: the report cannot read it
    assert json.loads((run.dir / "run.json").read_text())["status"] == "finished"
    (warning,) = [line for line in capsys.readouterr().err.splitlines() if "report" in line]
    assert warning.startswith("warning: no run report (")


@pytest.mark.parametrize("task", ["binary", "multiclass", "regression"])
def test_a_predictions_file_gets_its_tasks_metrics_and_figures(task, tmp_path):
    rng = np.random.default_rng(0)
    rows = np.arange(40)
    if task == "regression":
        truth = rng.normal(size=(40, 2))
        table = predictions.regression_table(rows, truth + 0.1, ["height", "weight"], truth)
        expected, figures = {"rmse_height", "mae_height", "r2_weight"}, ["predicted_vs_true"]
    else:
        classes = ["Adelie", "Gentoo"] if task == "binary" else ["Adelie", "Chinstrap", "Gentoo"]
        labels = np.array(classes)[np.arange(40) % len(classes)]
        probabilities = np.eye(len(classes))[np.arange(40) % len(classes)] * 0.8 + 0.2 / len(classes)
        table = predictions.classification_table(rows, probabilities, classes, "species", labels)
        auc = "roc_auc" if task == "binary" else "roc_auc_ovr"
        expected, figures = (
            {"accuracy", "balanced_accuracy", "f1_macro", "log_loss", auc},
            ["confusion_matrix", "roc"],
        )
    path = predictions.write_predictions(table, tmp_path / predictions.PREDICTIONS_FILE)
    found = predictions.task_metrics(predictions.read_predictions(path))
    assert expected <= set(found)
    if task == "regression":
        assert found["rmse_height"] == pytest.approx(0.1) and found["mae_weight"] == pytest.approx(0.1)
    else:
        assert found["accuracy"] == 1.0 and found[auc] == 1.0
    drawn = prediction_figures(table, tmp_path / "report")
    assert sorted(path.stem for path in drawn.values()) == sorted(figures)
    assert all(path.read_bytes().startswith(PNG_SIGNATURE) for path in drawn.values())
