"""Checks of the XGBoost parts (tree): native early stopping and stop file, and the files
a tree run writes."""

from __future__ import annotations

import ast
import json
import math
from typing import Any

from src.checklist.project import Part, Project, name_of, of_type
from src.checklist.registry import Failed, check, each_part, lacks, require
from src.checklist.run_checks import RunDir

TREE_PLOTS = ("feature_importance.png", "shap_summary.png")
# The test set's predictions, from which the report draws predicted vs actual (or a
# classifier's confusion matrix and ROC): src/predictions.py's PREDICTIONS_FILE.
PREDICTIONS = "test_predictions.csv"


@each_part("CB-1", "cfg.early_stopping_rounds reaches XGBoost's early stopping", "tree")
def early_stopping_rounds(project: Project, part: Part) -> None:
    given = [a for _, c in project.find(ast.Call, part) for a in [*c.args, *(k.value for k in c.keywords)]]
    require("early_stopping_rounds" in map(name_of, given), "cfg.early_stopping_rounds is passed to no call")


@each_part("CB-4", "an XGBoost callback in use ends training (returns True) when a STOP file exists", "tree")
def stop_file_rounds(project: Project, part: Part) -> None:
    hooks = [m.get("after_iteration") for m in project.in_use("TrainingCallback", part)]
    # `return True` ends training: not a callback that only logs, whose logger may look for files too.
    stops = [
        h for h in hooks if h and True in {getattr(r.value, "value", None) for r in of_type(h, ast.Return)}
    ]
    stopped = any(project.reaches(h, {"exists", "is_file"}, part) for h in stops)
    require(stopped, "no callback in use stops training when a STOP file exists")


@check("OUT-2", "checkpoints/last.ubj loads as an XGBoost Booster", "tree", mode="run")
def booster_loads(run: RunDir) -> None:
    # In a process of its own: XGBoost can segfault on a cut model file.
    from src.runs.checkpoint_checks import checkpoint_problem

    if problem := checkpoint_problem(run.path / "checkpoints" / "last.ubj"):
        raise Failed(f"checkpoints/last.ubj does not load: {problem}")


def summary(run: RunDir) -> dict[str, Any]:
    try:
        found = json.loads((run.path / "metrics.json").read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise Failed(f"metrics.json does not read as JSON: {error}") from None
    require(isinstance(found, dict) and found, "metrics.json holds no summary")
    return found


@check("LOG-5", "a tree's parameter count, known once trained, is in metrics.json", "tree", mode="run")
def tree_size(run: RunDir) -> None:
    lacks("metrics.json", ["total_params"], summary(run))


@check("OUT-5", "metrics.json, the test predictions and plots/: importance, SHAP", "tree", mode="run")
def tree_outputs(run: RunDir) -> str:
    found = summary(run)
    nan = [k for k, v in found.items() if k.startswith("test_") and isinstance(v, float) and math.isnan(v)]
    require(not nan, f"metrics.json: {', '.join(nan)} are NaN")
    for name in (PREDICTIONS, *(f"plots/{plot}" for plot in TREE_PLOTS)):
        run.file(name)
    return f"metrics.json ({len(found)} values), {PREDICTIONS} and plots/" + ", ".join(TREE_PLOTS)
