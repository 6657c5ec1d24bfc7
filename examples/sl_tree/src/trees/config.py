"""The config level of the supervised tree parts (CFG-1): its fields and their checks,
XGBoost's own among them (CFG-3), for a field a part adds for its booster too."""

from __future__ import annotations

import dataclasses
import json
import re
import warnings
from dataclasses import dataclass
from typing import ClassVar, Literal

from src.config import BaseConfig, at_least, split_problems
from src.runs.launch import current_launch

XGBOOST_DOCS = "https://xgboost.readthedocs.io/en/stable/parameter.html#learning-task-parameters"
Task = Literal["regression", "binary", "multiclass"]
DEFAULT_METRICS: dict[Task, str] = {"regression": "rmse", "binary": "logloss", "multiclass": "mlogloss"}
# Objectives that predict no probability, which logloss would misread: XGBoost's own default metric.
OBJECTIVE_METRICS = {"binary:hinge": "error", "binary:logitraw": "auc"}


@dataclass
class SLTreeConfig(BaseConfig):
    """Supervised tree parts (XGBoost's native API).

    Attributes:
        data_path: Your own CSV or Parquet table, a row per example; empty: the part's bundled data.
        label_column: Column holding the label: numbers for a regression, class values for a
            classification.
        feature_columns: Columns the model reads, in order; empty: all but label_column. Text
            columns are categorical features; empty cells are missing values.
        drop_unlabelled_rows: Leave out rows whose label is empty instead of refusing the table.
        objective: XGBoost learning objective, which sets the task: reg:squarederror (or another
            reg:*, count:*) a regression, binary:logistic two classes, multi:softprob several.
        eval_metric: XGBoost metric early stopping watches on validation (rmse, mae, logloss, auc,
            mlogloss...); empty: the objective's own (rmse, logloss or mlogloss; error for
            binary:hinge, auc for binary:logitraw).
        num_boost_round: Upper bound on boosting rounds; set high so that early stopping ends training.
        early_stopping_rounds: Rounds without improvement of the validation metric before training stops.
        val_fraction: Share of the rows held out for validation (early stopping).
        test_fraction: Share of the rows held out for the final test.
        split_seed: Seed of the train/val/test split, apart from seed so that changing seed keeps it.
        checkpoint_minutes: Minutes between rewrites of checkpoints/last.ubj, which a resume starts from.
        keep_last_n: Earlier checkpoints kept beside last.ubj as checkpoints/round=R.ubj, one per
            checkpoint_minutes.
        device: Where XGBoost trains: auto is cuda where a GPU and XGBoost's CUDA build (the cuda
            extra) are present and no local cluster of several workers would share it, else cpu.
        num_threads: CPU threads XGBoost uses; 0 uses every core.
        cluster: Train on a Dask cluster: local (or local:N) starts N worker processes here,
            tcp://host:8786 joins a running scheduler; empty trains in this process.
        wandb_every_seconds: W&B charts the first round, one whenever this many seconds of
            training passed since the last it charted (0: every round), and the last (a W&B
            row costs about 0.3 ms); every round still reaches metrics.jsonl and W&B's
            `rounds` table.
    """

    # What a resume may not change: which rows train, validate and test, and what is predicted.
    kept_on_resume: ClassVar = (
        "data_path",
        "label_column",
        "feature_columns",
        "drop_unlabelled_rows",
        "objective",
        "val_fraction",
        "test_fraction",
        "split_seed",
    )

    data_path: str = ""
    label_column: str = "label"
    feature_columns: tuple[str, ...] = ()
    drop_unlabelled_rows: bool = False
    objective: str = "reg:squarederror"
    eval_metric: str = ""
    # The tree reading of CFG-5: a high round cap; early stopping is the binding limit.
    num_boost_round: int = 10_000
    early_stopping_rounds: int = 50
    val_fraction: float = 0.15
    test_fraction: float = 0.15
    split_seed: int = 0
    checkpoint_minutes: float = 5.0  # RES-1
    keep_last_n: int = 0
    device: Literal["auto", "cpu", "cuda"] = "auto"
    num_threads: int = 0
    cluster: str = ""
    wandb_every_seconds: float = 1.0

    def problems(self) -> list[str]:
        found = [
            *super().problems(),
            *at_least(self, num_boost_round=1, early_stopping_rounds=1),
            *at_least(self, keep_last_n=0, num_threads=0, wandb_every_seconds=0),
        ]
        if self.checkpoint_minutes <= 0:
            found.append(f"checkpoint_minutes {self.checkpoint_minutes}: must be positive")
        if self.label_column in self.feature_columns:
            found.append(
                f"feature_columns: list the columns the model reads, not label_column {self.label_column!r}"
            )
        if duplicates := sorted({c for c in self.feature_columns if self.feature_columns.count(c) > 1}):
            found.append(f"feature_columns: {', '.join(duplicates)} listed more than once")
        if self.data_path:  # here, so that a bad one is refused before a run directory exists
            from src.data_checks import data_path_problems  # pandas: only for a table of one's own

            found += data_path_problems(self.data_path, (*self.feature_columns, self.label_column))
        found += _cluster_problems(self.cluster)
        if self.device == "cuda" and shares_gpus(self.cluster):
            found.append(
                f"device cuda with cluster {self.cluster}: the workers of a local cluster would all train "
                "on this machine's first GPU, which XGBoost refuses; use local:1, device cpu, or the "
                "address of a cluster with a GPU per worker (dask-cuda's LocalCUDACluster)"
            )
        if (launch := current_launch()).world_size > 1:  # each would grow the same trees (DDP-1)
            found.append(
                f"{launch.launcher} started {launch.world_size} processes, but a tree part trains in one; "
                "start it with python -m"
            )
        found += split_problems(self.val_fraction, self.test_fraction)
        if not _installed("xgboost"):  # neither extra installed: nothing to ask the questions below
            return [*found, f"the tree part needs XGBoost; install it with {XGBOOST_INSTALL}"]
        return found + xgboost_problems(self.objective, self.watched_metric, self.booster_fields())

    @property
    def task(self) -> Task:
        """binary:* and multi:* classify; the rest (reg:*, count:*...) predict a number."""
        kind = self.objective.partition(":")[0]
        return "binary" if kind == "binary" else "multiclass" if kind == "multi" else "regression"

    @property
    def watched_metric(self) -> str:
        """The metric early stopping, the best round and a sweep follow."""
        return self.eval_metric or OBJECTIVE_METRICS.get(self.objective) or DEFAULT_METRICS[self.task]

    def booster_fields(self) -> dict[str, float | str]:
        """The numbers and words a part's config adds to this level: its booster's parameters."""
        own = {f.name for f in dataclasses.fields(SLTreeConfig)}
        values = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name not in own}
        return {name: v for name, v in values.items() if type(v) in (int, float, str)}  # bool is an int


def xgboost_problems(objective: str, eval_metric: str, numbers: dict[str, float | str]) -> list[str]:
    """CFG-3: objective, eval_metric and a part's numbers and words as the installed XGBoost sees them,
    asked by configuring a booster on one row (about a millisecond). A name XGBoost does not
    know passes: it is not one of its parameters."""
    found = []
    for name, value in numbers.copy().items():
        try:
            _configure({name: value})
        except ValueError as error:
            found.append(f"{name} {value}: {xgboost_says(error)}")
            del numbers[name]
    # multi:* needs num_class, which training passes once the label's classes are known.
    classes = {"num_class": 2} if objective.startswith("multi:") else {}
    try:  # with the numbers: quantile_alpha, which reg:quantileerror needs, among them
        _configure({"objective": objective, **classes, **numbers})
    except ValueError as error:
        # An unknown name: XGBoost's message lists every objective it has.
        known = sorted(set(re.findall(r"Objective candidate: (\S+)", str(error))))
        valid = f"it has {', '.join(known)}; " if known else ""
        found.append(
            f"objective {objective!r}: {xgboost_says(error)}; {valid}reg:quantileerror needs "
            f"quantile_alpha: a config field of that name, passed in model.booster_params ({XGBOOST_DOCS})"
        )
    try:
        logged = [metric["name"] for metric in _configure({"eval_metric": eval_metric})["metrics"]]
    except ValueError as error:  # its message lists no metrics: a few common ones
        found.append(
            f"eval_metric {eval_metric!r}: {xgboost_says(error)}; common ones: rmse, mae, mape, logloss, "
            f"error, auc, aucpr, poisson-nloglik, ndcg (all: {XGBOOST_DOCS})"
        )
    else:  # early stopping looks the metric up by the name XGBoost logs it under
        if logged != [eval_metric]:
            found.append(
                f"eval_metric {eval_metric!r}: XGBoost logs it as {', '.join(logged) or 'nothing'}, the "
                "name early stopping looks for; give that name"
            )
    return found


def _configure(params: dict) -> dict:
    """The learner's config XGBoost makes of `params`; a ValueError where it refuses them."""
    return _configured(params)[0]


def unused_parameters(params: dict) -> list[str]:
    """The names in `params` XGBoost does nothing with: a misspelt one trains as if unset."""
    return _configured(params)[1]


def _configured(params: dict) -> tuple[dict, list[str]]:
    # Here, not at the top: --help answers without XGBoost's seconds of import.
    import numpy as np
    import xgboost as xgb

    # One thread: a pool would take longer than the check. Named: the booster needs it alive.
    row = xgb.DMatrix(np.zeros((1, 1)), nthread=1)
    with warnings.catch_warnings(record=True) as said:  # not shown: a part's other numbers among them
        warnings.simplefilter("always")
        config = json.loads(xgb.Booster(params, [row]).save_config())["learner"]
    warned = " ".join(str(warning.message) for warning in said)
    lists = re.findall(r"Parameters: \{(.*?)\} are not used", warned, re.DOTALL)
    return config, [name for names in lists for name in re.findall(r'"([^"]+)"', names)]


def xgboost_says(error: ValueError) -> str:
    first_line = str(error).strip().splitlines()[0]
    return "XGBoost: " + re.sub(r"^\[[0-9:]+\] \S+:\d+: ", "", first_line).strip(" :")


DASK_INSTALL = "pip install -c constraints.txt '.[distributed]'"
# XGBoost's two builds, one extra each (pyproject.toml): cpu (xgboost-cpu) or cuda (xgboost).
XGBOOST_INSTALL = "pip install -c constraints.txt '.[cpu]', or '.[cuda]' on a machine with a CUDA GPU"
CUDA_XGBOOST_INSTALL = "pip uninstall -y xgboost-cpu && pip install -c constraints.txt '.[cuda]'"


def _cluster_problems(cluster: str) -> list[str]:
    if not cluster:
        return []
    if not re.fullmatch(r"local(:[1-9][0-9]{0,3})?|[a-z]+://\S+|(?!local:)[^\s:/]+:[0-9]+", cluster):
        return [
            f"cluster {cluster!r}: use local, local:N (N worker processes, up to 9999) or a Dask "
            "scheduler's address such as tcp://host:8786"
        ]
    if not all(_installed(name) for name in ("distributed", "dask.dataframe", "pyarrow")):
        return [f"cluster {cluster!r}: training on a Dask cluster needs Dask; install it with {DASK_INSTALL}"]
    return []


def is_local_cluster(cluster: str) -> bool:
    """local or local:N, a cluster started here; not a scheduler's address (localhost:8786)."""
    return re.fullmatch(r"local(:[0-9]+)?", cluster) is not None


def shares_gpus(cluster: str) -> bool:
    """Whether `cluster` starts worker processes here that would all see the same GPUs: local
    and local:N but local:1 (Dask's LocalCluster gives each worker every GPU)."""
    return is_local_cluster(cluster) and cluster != "local:1"


def _installed(module: str) -> bool:
    from importlib.util import find_spec

    try:
        return find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package missing, or a module set to None
        return False
