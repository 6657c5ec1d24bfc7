"""A supervised run's test predictions (test_predictions.csv): their metrics by task, the
figures its report draws of them, and the file a classifier's run writes."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from conftest import PARTS, PNG_SIGNATURE, ROOT, assert_report, prediction_figures, run_config
from sklearn import metrics

from src import predictions
from src.errors import DataValidationError
from src.predict import PredictOptions, rows_to_predict
from src.report.prediction_figures import draw_predictions
from src.runs.atomic import WriteFailed

# The report's figures of the test predictions, by the task of each kind's smoke run.
SUPERVISED = ("sl_neural", "sl_tree")


@pytest.mark.parametrize("kind", sorted(set(PARTS) & set(SUPERVISED)))
def test_predict_of_another_parts_run_names_that_part_in_one_line(kind, tmp_path):  # OUT-2
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "run.json").write_text('{"part": "part9"}')
    command = [sys.executable, "-m", f"{PARTS[kind]}.predict", str(tmp_path)]
    command += ["--output", str(tmp_path / "out.csv")]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 2, result.stderr[-2000:]
    assert result.stderr == f"error: {tmp_path} is a run of part9\n"  # no such part here


@pytest.mark.skipif("rl" not in PARTS, reason="this project has no RL part")
@pytest.mark.parametrize("kind", sorted(set(PARTS) & set(SUPERVISED)))
def test_predict_of_an_rl_run_names_the_command_that_plays_it(kind, tmp_path):  # OUT-2
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "run.json").write_text(json.dumps({"part": PARTS["rl"]}))
    command = [sys.executable, "-m", f"{PARTS[kind]}.predict", str(tmp_path)]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 2, result.stderr[-2000:]
    assert result.stderr.endswith(f" is a run of {PARTS['rl']}; use python -m {PARTS['rl']}.evaluate\n")


@pytest.mark.parametrize("kind", sorted(set(PARTS) & set(SUPERVISED)))
def test_a_supervised_runs_report_draws_its_test_predictions(kind, smoke_runs):
    run_dir, _ = smoke_runs(kind)
    tested = predictions.read_predictions(run_dir / predictions.PREDICTIONS_FILE)
    assert tested["row"].is_unique and predictions.targets_of(tested)
    # A classifier's probability of each class; a regression's predictions are numbers alone.
    classes = len(predictions.probability_columns(tested))
    assert classes >= 2 if run_config(kind, run_dir).task != "regression" else classes == 0
    assert_report(run_dir, prediction_figures(kind, run_dir))


def test_a_damaged_predictions_file_is_one_line_and_leaves_the_report_as_it_was(smoke_runs, tmp_path):
    kind = min(set(PARTS) & set(SUPERVISED))
    run_dir = shutil.copytree(smoke_runs(kind)[0], tmp_path / "run")
    (run_dir / predictions.PREDICTIONS_FILE).write_text("not,a\npredictions,file\n")
    written = sorted([run_dir / "report.md", *(run_dir / "report").glob("*.png")])
    before = [path.stat().st_mtime_ns for path in written]
    command = [sys.executable, "-m", "src.report", str(run_dir)]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 2
    (line,) = result.stderr.splitlines()
    assert line.startswith("error: ") and "not a predictions file" in line
    assert [path.stat().st_mtime_ns for path in written] == before


@pytest.mark.parametrize("targets", [["y"], ["height", "weight"]])
def test_a_regression_of_no_rows_is_a_table_of_no_rows(targets):
    labels = np.empty((0, len(targets)))
    table = predictions.regression_table(np.arange(0), np.empty((0, len(targets))), targets, labels)
    assert table.empty and {"row", *(f"predicted_{target}" for target in targets)} <= set(table.columns)


@pytest.mark.parametrize("row", ["abc", "1.5", "-1"])
def test_a_predictions_file_whose_rows_are_no_row_numbers_is_one_line(row, tmp_path):
    path = tmp_path / predictions.PREDICTIONS_FILE
    path.write_text(f"row,predicted_y\n0,1.0\n{row},2.0\n")
    with pytest.raises(DataValidationError, match=f"column 'row' holds {re.escape(row)}, not a row number"):
        predictions.read_predictions(path)


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
    drawn = draw_predictions(table, tmp_path / "report")
    assert sorted(path.stem for path in drawn.values()) == sorted(figures)
    assert all(path.read_bytes().startswith(PNG_SIGNATURE) for path in drawn.values())


@pytest.mark.parametrize("classes", [[5, 10], [5, 10, 20]])
def test_classes_whose_names_sort_otherwise_as_text_are_scored_right(classes, tmp_path):
    # As text, 5, 10, 20 sort as '10', '20', '5': the metrics must read each probability column
    # as its own class's.
    rng = np.random.default_rng(0)
    picked = rng.integers(len(classes), size=60)
    probabilities = rng.dirichlet(np.ones(len(classes)), size=60)
    labels = np.array(classes)[picked]
    table = predictions.classification_table(np.arange(60), probabilities, classes, "y", labels)
    path = predictions.write_predictions(table, tmp_path / predictions.PREDICTIONS_FILE)
    found = predictions.task_metrics(predictions.read_predictions(path))
    assert found["log_loss"] == pytest.approx(-np.log(probabilities[np.arange(60), picked]).mean())
    if len(classes) == 2:
        assert found["roc_auc"] == pytest.approx(metrics.roc_auc_score(picked == 1, probabilities[:, 1]))
    else:
        expected = metrics.roc_auc_score(picked, probabilities, multi_class="ovr", labels=[0, 1, 2])
        assert found["roc_auc_ovr"] == pytest.approx(expected)


@pytest.mark.parametrize("given", ["--data-path", "the run's own"])
def test_predictions_never_replace_the_table_they_come_from(given, tmp_path):  # OUT-2
    table = tmp_path / "rows.csv"
    table.write_text("x,y\n1,2\n")
    data_path, run_table = (str(table), "the run's table") if given == "--data-path" else ("", str(table))
    options = PredictOptions(tmp_path, data_path=data_path, output=tmp_path / "." / "rows.csv")
    with pytest.raises(DataValidationError, match=r"rows.csv: is the table the rows come from"):
        rows_to_predict(options, ["x"], lambda: pd.read_csv(table), run_table)
    assert table.read_text() == "x,y\n1,2\n"


def test_predictions_never_replace_a_file_of_the_run(tmp_path):  # OUT-2
    (tmp_path / "model.ubj").write_bytes(b"the model")
    (tmp_path / "table.csv").write_text("x,y\n1,2\n")
    options = PredictOptions(tmp_path, data_path=str(tmp_path / "table.csv"), output=tmp_path / "model.ubj")
    with pytest.raises(WriteFailed, match=r"model.ubj: is a file of the run .* give a new file"):
        rows_to_predict(options, ["x"], lambda: pd.DataFrame(), "the run's table")
    assert (tmp_path / "model.ubj").read_bytes() == b"the model"
    new = PredictOptions(tmp_path, data_path=str(tmp_path / "table.csv"), output=tmp_path / "new.csv")
    assert len(rows_to_predict(new, ["x"], lambda: pd.DataFrame(), "the run's table")[0]) == 1


def test_the_test_rows_of_another_table_are_refused_not_scored(tmp_path):  # OUT-2
    # --rows test takes the rows by their place: those of a reordered table were scored as the test's.
    table = pd.DataFrame({"x": range(10), "y": [float(row) ** 2 for row in range(10)]})
    table.to_csv(tmp_path / "table.csv", index=False)
    tested = table.iloc[[2, 5, 7]]
    recorded = pd.DataFrame({"row": tested.index, "true_y": tested["y"], "predicted_y": 0.0})
    recorded.to_csv(tmp_path / predictions.PREDICTIONS_FILE, index=False)
    given = {"data_path": str(tmp_path / "table.csv"), "output": tmp_path / "out.csv", "rows": "test"}
    options = PredictOptions(tmp_path, **given)
    assert list(rows_to_predict(options, ["x"], lambda: table, "the run's table")[0].index) == [2, 5, 7]
    table.iloc[::-1].to_csv(tmp_path / "table.csv", index=False)
    with pytest.raises(DataValidationError, match="row 2 holds another y than the row the run tested there"):
        rows_to_predict(options, ["x"], lambda: table, "the run's table")


def test_predictions_named_parquet_are_a_parquet_file(tmp_path):  # OUT-2
    table = predictions.regression_table(np.arange(3), np.array([1.0, 2.0, 3.0]), ["y"], None)
    path = predictions.write_predictions(table, tmp_path / "out.parquet")
    assert pd.read_parquet(path).equals(table)
