"""The supervised tree part, trained for real: one smoke run, many checks."""

from __future__ import annotations

import csv
import dataclasses
import json
import os
import subprocess
import sys
import time
import types
from operator import itemgetter
from pathlib import Path

import numpy as np
import pandas as pd
import pandera.pandas as pa
import psutil
import pytest
import xgboost as xgb
from conftest import (
    PARTS,
    ROOT,
    assert_ended,
    assert_report,
    default_config,
    deliveries_done,
    gpu,
    part_module,
    run_config,
    run_python,
    slow,
)
from sklearn.datasets import load_diabetes, load_iris

from src.config import AlertConfig, ConfigError
from src.data_checks import DataValidationError, validate_table
from src.ops.hardware import visible_gpus
from src.predict import PredictOptions
from src.predictions import read_predictions
from src.runs.directory import latest_checkpoint
from src.runs.metrics_jsonl import read_jsonl
from src.trees.booster import (
    best_rounds,
    cluster_device,
    dask_client,
    predict_run,
    train_booster,
    training_matrices,
    training_params,
)
from src.trees.config import shares_gpus
from src.trees.data import TableEncoding, load_split
from src.trees.rounds import RoundLoggers, round_callbacks

config = part_module("sl_tree", "config")
TaskConfig = default_config("sl_tree")
data = part_module("sl_tree", "data")
model = part_module("sl_tree", "model")
train = part_module("sl_tree", "train")


def run_part(command: str, *args, **options) -> subprocess.CompletedProcess:
    """`python -m partN.COMMAND ARGS` in the project, as a user runs it."""
    command_line = [sys.executable, "-m", f"{PARTS['sl_tree']}.{command}", *map(str, args)]
    return subprocess.run(command_line, cwd=ROOT, capture_output=True, text=True, timeout=300, **options)


def diabetes() -> pd.DataFrame:
    """A table of the tests' own, whatever table this part trains on: scikit-learn's bundled
    diabetes table, raw (442 patients, 10 measurements, and `target`, a number)."""
    return load_diabetes(as_frame=True, scaled=False).frame


# The fields that make this part, whatever it predicts, a regression of a table's `target`.
REGRESSION = {
    "label_column": "target",
    "feature_columns": (),
    "objective": "reg:squarederror",
    "eval_metric": "",
}


def regressor(**fields):
    """This part's config as a regression of a table's `target`, from every other column."""
    return TaskConfig(**{**REGRESSION, **fields})


def diabetes_run(folder: Path) -> dict:
    """The fields that train this part on the diabetes table, written into `folder`, whatever
    table and task the part has."""
    path = folder / "diabetes.csv"
    if not path.is_file():
        folder.mkdir(parents=True, exist_ok=True)
        diabetes().to_csv(path, index=False)
    split = {"val_fraction": 0.15, "test_fraction": 0.15, "split_seed": 0}
    return {"data_path": str(path), **REGRESSION, **split}


def smoke_config(tmp_path, report=False, **overrides):
    """The smoke config on the diabetes table, writing into tmp_path without W&B; with its
    report only where a test reads it."""
    base = config.CONFIGS["smoke"]()
    output = dataclasses.replace(base.output, base_dir=str(tmp_path), report=report)
    fields = {"wandb_mode": "disabled", **diabetes_run(tmp_path), **overrides}
    return dataclasses.replace(base, output=output, **fields)


@pytest.fixture(scope="module")
def smoke_run(smoke_runs):
    """The session's offline-W&B smoke run (shared with test_checklist.py); returns
    (run directory, test metrics, metric events)."""
    run_dir, test_metrics = smoke_runs("sl_tree")
    return run_dir, test_metrics, read_jsonl(run_dir / "metrics.jsonl")


@slow
def test_run_directory_holds_the_run(smoke_run):  # OUT-1, OUT-2, OUT-5
    run_dir, _, _ = smoke_run
    files = [
        "config.json",
        "console.log",
        "metrics.jsonl",
        "metrics.json",
        "model.ubj",
        "test_predictions.csv",
    ]
    for name in [*files, "checkpoints/last.ubj"]:
        assert (run_dir / name).stat().st_size > 0, name
    plots = sorted(p.name for p in (run_dir / "plots").glob("*.png") if p.stat().st_size > 10_000)
    assert plots == ["feature_importance.png", "shap_summary.png"]
    assert json.loads((run_dir / "run.json").read_text())["status"] == "finished"
    rounds = json.loads((run_dir / "metrics.json").read_text())["rounds_trained"]
    log = (run_dir / "console.log").read_text().splitlines()
    progress = [line for line in log if line.startswith("round ")]
    metric = run_config("sl_tree", run_dir).watched_metric
    assert progress and progress[-1].startswith(f"round {rounds - 1} | train_{metric} ")
    assert f"| val_{metric} " in progress[-1] and "| median " in progress[-1] and " ms/round" in progress[-1]


@slow
def test_summary_and_per_round_metrics(smoke_run):  # LOG-4, LOG-5, OUT-4, OUT-5
    run_dir, test_metrics, events = smoke_run
    summary = json.loads((run_dir / "metrics.json").read_text())
    assert {"best_round", "rounds_trained", "total_params"} <= summary.keys()
    tested = [key for key in test_metrics if key.startswith("test_")]
    assert tested and all(summary[key] == pytest.approx(test_metrics[key]) for key in tested)
    metric = run_config("sl_tree", run_dir).watched_metric
    rounds = [e["round"] for e in events if f"val_{metric}" in e]
    assert rounds == list(range(summary["rounds_trained"]))
    keys = set().union(*events)
    assert {f"train_{metric}", f"tracking/best_val_{metric}", "tracking/epochs_since_improvement"} <= keys
    assert {"timing/round_seconds", "num_train_samples", "num_val_samples", "gpu_name"} <= keys
    assert any(key.startswith("system/") for key in keys)


@slow
def test_model_artifact_reaches_the_offline_wandb_run(smoke_run):  # LOG-1, LOG-6
    run_dir, _, _ = smoke_run
    (history,) = (run_dir / "wandb").glob("offline-run-*/*.wandb")
    assert b"smoke-model" in history.read_bytes()


def round_metrics(item: dict) -> dict:
    """A W&B history row without W&B's own keys (_step, _runtime...) and the table's (rounds.path...)."""
    return {key: value for key, value in item.items() if key[0] != "_" and not key.startswith("rounds.")}


def wandb_history(offline_run) -> dict[int, dict]:
    """An offline W&B run's history rows by step, read by W&B's own reader of its .wandb
    file, which needs no server."""
    inspect = [sys.executable, "-m", "wandb", "leet", "inspect", "--json", str(offline_run)]
    output = subprocess.run(inspect, capture_output=True, text=True, check=True).stdout
    history = [record["history"] for record in map(json.loads, output.splitlines()) if "history" in record]
    return {row["step"]["num"]: round_metrics(row["item"]) for row in history}


def test_wandb_charts_the_first_round_one_each_interval_and_the_last(tmp_path):  # LOG-1
    import wandb

    run = wandb.init(mode="offline", dir=tmp_path, project="rounds", settings=wandb.Settings(silent=True))
    loggers = RoundLoggers(run, wandb_every_seconds=0.5)
    rounds = [
        {"event": "metrics", "step": n, "timing/round_seconds": 0.2, "val_rmse": 9.0 - n} for n in range(8)
    ]
    loggers.log_rounds(rounds[:4])  # two batches, as metrics.jsonl gets them
    loggers.log_rounds(rounds[4:], training_ended=True)
    run.finish()
    (offline_run,) = (tmp_path / "wandb").glob("offline-run-*")
    # Round 0; 0.6 s of rounds later, round 3, then round 6; round 7, the last, as training ends.
    assert {step: row["val_rmse"] for step, row in wandb_history(offline_run).items()} == {
        step: 9.0 - step for step in (0, 3, 6, 7)
    }


@slow
def test_the_offline_wandb_run_charts_rounds_and_tables_every_one_as_metrics_jsonl(smoke_run):  # LOG-1, LOG-4
    run_dir, _, events = smoke_run
    (offline_run,) = (run_dir / "wandb").glob("offline-run-*")
    rounds = {e["step"]: e for e in events if e["event"] == "metrics"}
    rounds = {step: {k: v for k, v in e.items() if k not in ("event", "time")} for step, e in rounds.items()}
    assert list(rounds) == list(range(len(rounds)))
    charted = wandb_history(offline_run)
    assert {0, len(rounds) - 1} <= set(charted)  # the first and the last; between them, by time
    for step, metrics in charted.items():  # each at its own round, with that round's values
        assert metrics == {k: v for k, v in rounds[step].items() if k != "step"}
    # Every round, in the table the run logs as it ends.
    (table,) = offline_run.glob("files/media/table/rounds_*.table.json")
    content = json.loads(table.read_text())
    rows = [dict(zip(content["columns"], row, strict=True)) for row in content["data"]]
    assert [{k: v for k, v in row.items() if v is not None} for row in rows] == list(rounds.values())


def test_a_table_failing_the_parts_column_checks_says_where_they_come_from():  # DATA-1
    # load_table() edited to return a table of one's own, column_checks() left as it was.
    table = diabetes().assign(sex=0)  # coded 0/1, where the checks want 1/2
    checks = {"sex": [pa.Check.isin([1, 2])]}
    edited = module("rules", load_table=lambda cfg: table, column_checks=lambda cfg: checks)
    said = r"the checks of 'sex' are what rules\.column_checks\(cfg\) gives"
    with pytest.raises(DataValidationError, match=said):
        load_split(regressor(), edited)


@pytest.mark.parametrize("task", [None, "multiclass"])  # the bundled table; one with a text column
def test_predictions_equal_a_plain_xgb_train(tmp_path, task):
    cfg = task_config(tmp_path, task) if task else smoke_config(tmp_path)
    split = load_split(cfg, data)
    callbacks = round_callbacks(cfg, tmp_path, RoundLoggers())
    ours = train_booster(cfg, model.booster_params(cfg), split, callbacks)
    plain_train = xgb.DMatrix(split.train_features, split.train_labels, enable_categorical=True)
    plain_val = xgb.DMatrix(split.val_features, split.val_labels, enable_categorical=True)
    plain = xgb.train(
        training_params(cfg, model.booster_params(cfg), split.encoding),
        plain_train,
        num_boost_round=cfg.num_boost_round,
        evals=[(plain_train, "train"), (plain_val, "val")],
        early_stopping_rounds=cfg.early_stopping_rounds,
        verbose_eval=False,
    )
    test = xgb.DMatrix(split.test_features, enable_categorical=True)
    expected = plain.predict(test, iteration_range=(0, plain.best_iteration + 1))
    assert ours.attr("best_iteration") == str(plain.best_iteration)
    np.testing.assert_allclose(best_rounds(ours).inplace_predict(split.test_features), expected, rtol=1e-6)


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    """A smoke run that early-stops before its round cap: (run directory, summary)."""
    output_dir = tmp_path_factory.mktemp("uninterrupted")
    train.main_with_config(smoke_config(output_dir, num_boost_round=200))
    (run_dir,) = output_dir.glob("smoke_*")
    summary = json.loads((run_dir / "metrics.json").read_text())
    assert summary["rounds_trained"] < 200, "early stopping should end this run"
    return run_dir, summary


def rounds_logged(run_dir):
    return [e["round"] for e in read_jsonl(run_dir / "metrics.jsonl") if e["event"] == "metrics"]


def test_model_holds_the_best_rounds_and_the_checkpoint_every_round(uninterrupted):  # CB-1, RES-1
    run_dir, summary = uninterrupted
    assert model.load_model(run_dir / "model.ubj").num_boosted_rounds() == summary["best_round"] + 1
    last = model.load_model(run_dir / "checkpoints" / "last.ubj")
    assert last.num_boosted_rounds() == summary["rounds_trained"]
    assert last.attr("best_iteration") == str(summary["best_round"])
    assert float(last.attr("train_seconds")) == pytest.approx(summary["train_seconds"], abs=1e-3)
    ran = run_config("sl_tree", run_dir)
    best, rounds = summary[f"best_val_{ran.watched_metric}"], ran.early_stopping_rounds
    said = f"no better than {best:.6g} for {rounds} rounds"
    assert_ended(run_dir, "finished", "patience", said)


def test_early_stopping_on_ties_says_the_metric_was_flat_not_worse(tmp_path):  # CB-1
    # Two iris species, which one split separates: val auc is 1 from round 0 on. Patience ran
    # out on ties, as in xgb.callback.EarlyStopping, leaving a model of one tree; the stop said
    # only "no better than 1", as if the model had got worse.
    irises = load_iris(as_frame=True).frame
    path = tmp_path / "two_species.csv"
    irises[irises["target"] < 2].to_csv(path, index=False)
    fields = {"objective": "binary:logistic", "eval_metric": "auc", "early_stopping_rounds": 3}
    cfg = smoke_config(tmp_path, data_path=str(path), **fields)
    callbacks = round_callbacks(cfg, tmp_path, RoundLoggers())
    booster = train_booster(cfg, model.booster_params(cfg), load_split(cfg, data), callbacks)
    assert (booster.num_boosted_rounds(), booster.attr("best_iteration")) == (4, "0")
    said = "val_auc 1, no better than 1 for 3 rounds (every round since tied it: val_auc is flat, not worse"
    assert booster.attr("stop_reason").startswith(said)
    # A metric that got worse says no more than before.
    cfg = smoke_config(tmp_path / "worse", num_boost_round=200)
    callbacks = round_callbacks(cfg, tmp_path / "worse", RoundLoggers())
    booster = train_booster(cfg, model.booster_params(cfg), load_split(cfg, data), callbacks)
    assert booster.num_boosted_rounds() < 200 and "tied" not in booster.attr("stop_reason")


@slow
def test_a_resumed_run_stops_where_an_uninterrupted_one_does(tmp_path, uninterrupted):  # RES-1, CB-1
    straight_dir, straight = uninterrupted
    # Stopped three rounds past its best round: the resumed run must remember that
    # best round rather than count early stopping afresh.
    first_cap = straight["best_round"] + 4
    train.main_with_config(smoke_config(tmp_path, num_boost_round=first_cap))
    (split_dir,) = tmp_path.glob("smoke_*")
    resumed = smoke_config(tmp_path, num_boost_round=200)
    train.main_with_config(resumed, resume_from=latest_checkpoint(split_dir))
    split = json.loads((split_dir / "metrics.json").read_text())
    tested = [key for key in straight if key.startswith(("best_", "test_"))]
    for key in ("rounds_trained", *tested):
        assert split[key] == pytest.approx(straight[key], rel=1e-6), key
    features = load_split(resumed, data).test_features
    straight_model, split_model = (model.load_model(d / "model.ubj") for d in (straight_dir, split_dir))
    np.testing.assert_allclose(
        split_model.inplace_predict(features), straight_model.inplace_predict(features)
    )
    assert rounds_logged(split_dir) == list(range(split["rounds_trained"]))


def kept_rounds(run_dir):
    """The rounds of the checkpoints kept beside last.ubj (round=R.ubj holds rounds 0..R)."""
    return sorted(int(p.stem.removeprefix("round=")) for p in (run_dir / "checkpoints").glob("round=*.ubj"))


class CrashAfter(xgb.callback.TrainingCallback):
    def __init__(self, rounds):
        self.rounds = rounds

    def after_iteration(self, booster, epoch, evals_log):
        if booster.num_boosted_rounds() == self.rounds:
            raise RuntimeError("killed")
        return False


@pytest.mark.parametrize("task", [None, "multiclass", "binary"])
def test_a_run_killed_between_checkpoints_resumes_without_losing_or_repeating_a_round(
    tmp_path, task
):  # RES-1
    # A checkpoint every round, the latest three kept beside last.ubj (RES-1, keep-last-n).
    rounds = {
        "num_boost_round": 12,
        "early_stopping_rounds": 100,
        "checkpoint_minutes": 1e-9,
        "keep_last_n": 3,
    }
    cfg = task_config(tmp_path, task, **rounds) if task else smoke_config(tmp_path, **rounds)
    split, params = load_split(cfg, data), model.booster_params(cfg)
    straight = train_booster(cfg, params, split)
    callbacks = round_callbacks(cfg, tmp_path, RoundLoggers())
    callbacks[0].flush_every = 1  # round 7's metrics reach the file; its trees never reach last.ubj
    callbacks.insert(-1, CrashAfter(rounds=8))
    with pytest.raises(RuntimeError, match="killed"):
        train_booster(cfg, params, split, callbacks)
    checkpoint = tmp_path / "checkpoints" / "last.ubj"
    assert model.load_model(checkpoint).num_boosted_rounds() == 7
    assert kept_rounds(tmp_path) == [4, 5, 6]
    callbacks = round_callbacks(cfg, tmp_path, RoundLoggers())
    resumed = train_booster(cfg, params, split, callbacks, previous=model.load_model(checkpoint))
    assert rounds_logged(tmp_path) == list(range(12)) and resumed.num_boosted_rounds() == 12
    assert kept_rounds(tmp_path) == [9, 10, 11]  # the resumed run went on removing the oldest
    kept = model.load_model(tmp_path / "checkpoints" / "round=10.ubj")
    assert kept.num_boosted_rounds() == 11
    features = split.test_features
    np.testing.assert_allclose(
        resumed.inplace_predict(features), straight.inplace_predict(features), rtol=1e-6
    )


@slow
def test_a_stall_alert_comes_at_the_round_metrics_jsonl_counts_in_one_session_or_two(tmp_path, webhook):
    """The stalled alert comes at the first round `stalled_evaluations` rounds past the best,
    as metrics.jsonl counts them; a session that continues a saved model counts from its best."""
    cfg = smoke_config(tmp_path, alerts=AlertConfig(webhook_url=webhook.url, stalled_evaluations=3))
    split, params = load_split(cfg, data), model.booster_params(cfg)

    def stall_said(run_dir, *sessions):
        run_dir.mkdir()
        (run_dir / "run.json").write_text(json.dumps({"status": "running", "history": []}))
        previous = None
        for rounds in sessions:
            callbacks = round_callbacks(cfg, run_dir, RoundLoggers())
            session = dataclasses.replace(cfg, num_boost_round=rounds)
            previous = train_booster(session, params, split, callbacks, previous)
        deliveries_done()
        stalls = [post for post in webhook.received if post["kind"] == "stalled"]
        said = [post["text"] for post in stalls if post["run"] == run_dir.name]
        return said, read_jsonl(run_dir / "metrics.jsonl")

    said, events = stall_said(tmp_path / "one", cfg.num_boost_round)
    since = {e["round"]: e["tracking/epochs_since_improvement"] for e in events if "round" in e}
    stalled_at = min(round_number for round_number, count in since.items() if count >= 3)
    assert said == [f"one: stalled\nval_rmse has not improved for 3 evaluations, at round {stalled_at}"]
    # Two sessions: the second continues a model saved two rounds before the stall.
    said, _ = stall_said(tmp_path / "two", stalled_at - 1, cfg.num_boost_round)
    assert said == [f"two: stalled\nval_rmse has not improved for 3 evaluations, at round {stalled_at}"]


@slow
def test_stop_file_ends_training_after_the_round_and_keeps_the_outputs(tmp_path):  # CB-4
    stop = tmp_path / "STOP"
    stop.touch()
    test_metrics = train.main_with_config(smoke_config(tmp_path, report=True, stop_file=str(stop)))
    (run_dir,) = tmp_path.glob("smoke_*")
    assert json.loads((run_dir / "metrics.json").read_text())["rounds_trained"] == 1
    assert (run_dir / "model.ubj").is_file()
    assert "test_rmse" in test_metrics
    assert_report(run_dir, ["learning_curves", "shap_summary"])  # a run cut short gets its report too
    assert_ended(run_dir, "finished", "stop_file", f"STOP file {stop}: stopping after round 0")


@slow
def test_a_dask_cluster_trains_as_one_process_does(tmp_path, capfd):  # DDP-1 for trees
    """Two local Dask workers, each with half the rows: the same early stopping, files
    and metrics.jsonl rounds as one process. On 309 training rows XGBoost's quantile
    sketch is exact on any split of them, so the test scores are equal up to the float
    sums the workers add in another order."""
    same = {"loggers": ("csv",), "device": "cpu"}  # where a local cluster trains, a GPU or not
    alone = train.main_with_config(smoke_config(tmp_path / "alone", **same))
    on_cluster = train.main_with_config(smoke_config(tmp_path / "cluster", cluster="local:2", **same))
    # The worker processes write to the descriptors they inherit: capfd sees their words.
    workers_said = "".join(capfd.readouterr())
    assert "empty DMatrix" not in workers_said and "Empty dataset" not in workers_said, workers_said
    (alone_dir,) = (tmp_path / "alone").glob("smoke_*")
    (cluster_dir,) = (tmp_path / "cluster").glob("smoke_*")
    assert on_cluster["rounds_trained"] == alone["rounds_trained"] < config.CONFIGS["smoke"].num_boost_round
    assert on_cluster["best_round"] == alone["best_round"]
    for key in ("test_rmse", "test_mae", "test_r2"):
        assert on_cluster[key] == pytest.approx(alone[key], rel=1e-3), key

    def files(run_dir):
        return sorted(str(path.relative_to(run_dir)) for path in run_dir.rglob("*") if path.is_file())

    assert files(cluster_dir) == files(alone_dir)
    assert rounds_logged(cluster_dir) == rounds_logged(alone_dir) == list(range(alone["rounds_trained"]))

    def csv_rounds(run_dir):  # the workers' rounds reach the CSV logger from metrics.jsonl
        with next((run_dir / "csv").glob("version_*/metrics.csv")).open(newline="") as file:
            return [int(row["step"]) for row in csv.DictReader(file) if row["round"]]

    assert csv_rounds(cluster_dir) == csv_rounds(alone_dir) == list(range(alone["rounds_trained"]))
    assert "Dask: 2 local worker processes" in (cluster_dir / "console.log").read_text()


@slow
def test_a_stop_file_stops_every_dask_worker_after_the_same_round(tmp_path):  # CB-4, DDP-1
    stop = tmp_path / "STOP"
    stop.touch()  # seen by rank 0 after the first round; the other worker must stop with it
    # A classifier of a raw table: its text column as Dask categories, its classes on every worker.
    summary = train.main_with_config(
        task_config(tmp_path, "multiclass", stop_file=str(stop), cluster="local:2")
    )
    (run_dir,) = tmp_path.glob("smoke_*")
    assert summary["rounds_trained"] == 1 and summary["test_accuracy"] > 0.5
    assert f"STOP file {stop}: stopping after round 0" in (run_dir / "console.log").read_text()
    assert json.loads((run_dir / "run.json").read_text())["status"] == "finished"


@slow
def test_every_dask_worker_trains_on_rows_of_its_own():  # DDP-1 for trees
    """XGBoost trains each worker on the partitions that worker holds: one holding none
    trains on an empty DMatrix while the others do all the work. Left to the scheduler,
    where the partitions land varies from run to run, and a worker busy while the rows are
    shared out loses its share to an idle one; they must land on every worker always."""
    split = load_split(config.CONFIGS["smoke"](), data)
    with dask_client("local:2") as client:
        workers = client.nthreads()
        # Busy for longer than sharing the rows out takes on a quiet machine, with more tasks
        # than it runs at once: the others wait in the scheduler's queue.
        busy = max(workers)
        waits = [client.submit(time.sleep, 1, workers=[busy], pure=False) for _ in range(3 * workers[busy])]
        matrices = training_matrices(split, client)
        client.gather(waits)  # held until here: Dask cancels a task whose future is dropped
        for matrix, labels in zip(matrices, (split.train_labels, split.val_labels), strict=True):
            assert set(matrix.worker_map) == set(workers), matrix.worker_map
            rows_held = {
                worker: sum(client.gather(client.map(len, client.map(itemgetter("data"), parts))))
                for worker, parts in matrix.worker_map.items()
            }
            assert min(rows_held.values()) > 0 and sum(rows_held.values()) == len(labels), rows_held


@slow
def test_the_command_never_loads_torch_or_lightning(tmp_path):
    """A tree part needs neither, nor waits seconds for them to load: its command trains,
    tests, saves and reports without them."""
    command = ["-m", f"{PARTS['sl_tree']}.train", "--config", "smoke", "--wandb-mode", "disabled"]
    result, imported = run_python([*command, "--output.base-dir", str(tmp_path)], cwd=ROOT)
    assert result.returncode == 0, result.stderr[-3000:]
    (run_dir,) = tmp_path.glob("smoke_*")
    assert (run_dir / "model.ubj").is_file() and (run_dir / "report.md").is_file()
    assert not imported & {"torch", "lightning"}


@slow
def test_a_dask_worker_killed_in_training_ends_the_run_saying_so(tmp_path):  # RES-1
    command = [sys.executable, "-m", f"{PARTS['sl_tree']}.train", "--config", "smoke", "--cluster", "local:2"]
    command += ["--num-boost-round", "1000000", "--early-stopping-rounds", "1000000"]
    command += ["--checkpoint-minutes", "0.0001"]
    command += ["--wandb-mode", "disabled", "--output.no-report", "--output.base-dir", str(tmp_path)]
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 300
        while not list(tmp_path.glob("*/checkpoints/last.ubj")):
            assert process.poll() is None and time.monotonic() < deadline, process.stderr.read()[-2000:]
            time.sleep(0.1)
        # The local cluster's workers are processes this run started (its nannies live in it).
        children = psutil.Process(process.pid).children()
        workers = [child for child in children if "spawn_main" in " ".join(child.cmdline())]
        assert len(workers) == 2, [child.cmdline() for child in children]
        workers[0].kill()
        _, stderr = process.communicate(timeout=300)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 1
    assert "DaskWorkerLost: a Dask worker was lost while training (Dask's " in stderr, stderr[-3000:]
    (run_dir,) = tmp_path.glob("smoke_*")
    record = json.loads((run_dir / "run.json").read_text())
    assert record["status"] == "failed" and "continue it with --resume" in record["end_detail"]


@slow
@pytest.mark.parametrize(
    ("hidden", "flags", "message"),
    [  # as if the project were installed without the distributed extra, or without cpu or cuda
        (
            "distributed",
            ["--cluster", "local:2"],
            "needs Dask; install it with pip install -c constraints.txt '.[distributed]'",
        ),
        (
            "xgboost",
            [],
            "the tree part needs XGBoost; install it with pip install -c constraints.txt '.[cpu]'",
        ),
    ],
)
def test_a_missing_extra_is_one_line_naming_its_install(tmp_path, hidden, flags, message):
    code = f"import sys; sys.modules['{hidden}'] = None; from {PARTS['sl_tree']}.train import main; main()"
    command = [sys.executable, "-c", code, "--config", "smoke", *flags]
    command += ["--wandb-mode", "disabled", "--output.base-dir", str(tmp_path)]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stderr
    assert message in result.stderr and "Traceback" not in result.stderr
    assert not list(tmp_path.iterdir())  # refused before a run directory


@pytest.mark.parametrize(
    ("device", "first_gpus", "expected"),
    [
        ("auto", ["GPU-a", "GPU-b"], "cuda"),  # one of its own each, as dask-cuda starts them
        ("auto", ["GPU-a", "GPU-a"], "cpu"),  # both on one GPU, which XGBoost refuses
        ("auto", ["GPU-a", None], "cpu"),  # a worker without one
        ("cpu", ["GPU-a", "GPU-b"], "cpu"),
        ("cuda", ["GPU-a", "GPU-a", None], "of the 3 workers, 1 without one (or with XGBoost's"),
        ("cuda", ["GPU-a", "GPU-a", None], "CPU-only build), 2 sharing one; use auto or cpu"),
    ],
)
def test_a_running_schedulers_workers_decide_where_it_trains(device, first_gpus, expected):  # DDP-1
    if expected in ("cpu", "cuda"):
        assert cluster_device(device, first_gpus) == expected
        return
    with pytest.raises(ConfigError) as refused:
        cluster_device(device, first_gpus)
    assert str(refused.value).startswith("device cuda: XGBoost needs a GPU of its own on each Dask worker")
    assert expected in str(refused.value)


@slow
def test_a_running_scheduler_is_asked_about_its_workers_gpus_not_this_machine(tmp_path, monkeypatch):  # DDP-1
    """A scheduler's address: its workers' GPUs decide the device, not this machine's (a GPU
    here with CPU workers there would have failed on every worker)."""
    from dask.distributed import LocalCluster

    # Here a GPU and XGBoost's CUDA build, as this machine's view would have it; the worker, a
    # process of its own, sees no GPU.
    monkeypatch.setattr("src.trees.booster.visible_gpus", lambda: ("a GPU NVML lists here",))
    cuda_build = {**xgb.build_info(), "USE_CUDA": True}
    monkeypatch.setattr(xgb, "build_info", lambda: cuda_build)
    cfg = smoke_config(tmp_path)
    encoding = load_split(cfg, data).encoding
    with LocalCluster(n_workers=1, dashboard_address=":0", env={"CUDA_VISIBLE_DEVICES": ""}) as cluster:
        port = cluster.scheduler_address.rpartition(":")[2]
        address = f"localhost:{port}"  # a scheduler's address, though it starts with "local"
        assert not shares_gpus(address)
        assert TaskConfig(device="cuda", cluster=address).problems() == []
        with dask_client(address) as client:
            assert len(client.nthreads()) == 1  # that scheduler's worker: no cluster started here
            there = dataclasses.replace(cfg, cluster=address)
            params = model.booster_params(cfg)
            assert training_params(there, params, encoding, client)["device"] == "cpu"
            with pytest.raises(ConfigError, match="of the 1 workers, 1 without one"):
                training_params(dataclasses.replace(there, device="cuda"), params, encoding, client)


def test_a_resume_capped_below_the_rounds_grown_is_refused(tmp_path):  # CFG-3, RES-1
    # `--resume RUN --num-boost-round 5` on a run of 8 rounds grew none and ended saying
    # "num_boost_round 8 grown", with 5 in its config.json.
    cfg = dataclasses.replace(smoke_config(tmp_path), num_boost_round=8)
    split, params = load_split(cfg, data), model.booster_params(cfg)
    grown = train_booster(cfg, params, split)
    with pytest.raises(ConfigError, match=r"^num_boost_round 5: the run has grown 8 rounds already"):
        train_booster(dataclasses.replace(cfg, num_boost_round=5), params, split, previous=grown)
    assert train_booster(cfg, params, split, previous=grown).num_boosted_rounds() == 8  # its own cap: none


def test_a_misspelt_booster_parameter_is_refused_not_ignored(tmp_path):  # CFG-3
    cfg = smoke_config(tmp_path)
    encoding = load_split(cfg, data).encoding
    misspelt = {**model.booster_params(cfg), "colsample_bynodee": 0.5}
    with pytest.raises(ConfigError, match="gives colsample_bynodee, which XGBoost does not use with"):
        training_params(cfg, misspelt, encoding)
    params = training_params(cfg, model.booster_params(cfg), encoding)
    assert params["colsample_bytree"] == cfg.colsample_bytree


@pytest.mark.parametrize(
    ("given", "message"),
    [
        (("max_deph", 4), "model.booster_params(cfg) gives max_deph, which XGBoost does not use with"),
        (("max_depth", "x"), "model.booster_params(cfg): XGBoost: Invalid Parameter format for max_depth"),
    ],
    ids=["misspelt", "bad value"],
)
def test_a_booster_parameter_xgboost_refuses_is_refused_before_a_run_dir(tmp_path, given, message):  # CFG-3
    # A misspelt name in model.booster_params, as a user edits model.py: refused only in
    # training, after the run directory (config.json, run.json "failed") was made.
    part = PARTS["sl_tree"]
    code = (
        f"import {part}.model as model; own = model.booster_params; "
        f"model.booster_params = lambda cfg: own(cfg) | dict([{given!r}]); "
        f"from {part}.train import main; main()"
    )
    assert refusal_before_a_run_dir(tmp_path, ["-c", code]).startswith(f"error: {message}")


@pytest.mark.skipif(bool(visible_gpus()) and xgb.build_info()["USE_CUDA"], reason="a CUDA GPU is here")
def test_device_cuda_without_a_gpu_is_refused_before_a_run_dir(tmp_path):  # CFG-3
    # It was refused in training, after the run directory (run.json "failed") was made.
    refused = refusal_before_a_run_dir(tmp_path, ["-m", f"{PARTS['sl_tree']}.train"], "--device", "cuda")
    assert refused.startswith("error: device cuda: ")


def refusal_before_a_run_dir(tmp_path: Path, python_args: list[str], *flags: str) -> str:
    """The one line a smoke run started with `python_args` and `flags` exits 2 with, having made
    no run directory in tmp_path."""
    command = [sys.executable, *python_args, "--config", "smoke", *flags]
    command += ["--wandb-mode", "disabled", "--output.base-dir", str(tmp_path)]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stderr
    (line,) = result.stderr.strip().splitlines()  # one line, no traceback
    assert not list(tmp_path.iterdir())  # refused before a run directory
    return line


def test_a_booster_parameter_that_sizes_the_data_trains(tmp_path):  # CFG-3
    # max_bin, as a user adds it to booster_params: XGBoost refused a matrix quantized otherwise.
    cfg = dataclasses.replace(smoke_config(tmp_path), num_boost_round=2)
    booster = train_booster(cfg, {**model.booster_params(cfg), "max_bin": 16}, load_split(cfg, data))
    assert booster.num_boosted_rounds() == 2
    trained_with = json.loads(booster.save_config())["learner"]["gradient_booster"]["tree_train_param"]
    assert trained_with["max_bin"] == "16"


def test_the_cpu_build_of_xgboost_trains_on_the_cpu_beside_a_gpu(tmp_path, monkeypatch):
    """The cpu extra (xgboost-cpu) on a machine with a GPU: auto picks the CPU, and cuda says
    how to install the CUDA build, instead of XGBoost failing when training starts."""
    if xgb.build_info()["USE_CUDA"]:
        pytest.skip("XGBoost here is its CUDA build")
    monkeypatch.setattr("src.trees.booster.visible_gpus", lambda: ("a GPU NVML lists",))
    cfg = smoke_config(tmp_path)
    encoding = load_split(cfg, data).encoding
    assert training_params(cfg, model.booster_params(cfg), encoding)["device"] == "cpu"
    with pytest.raises(ConfigError, match=r"device cuda: this XGBoost is its CPU-only build; pip uninstall"):
        training_params(dataclasses.replace(cfg, device="cuda"), model.booster_params(cfg), encoding)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda t: t.drop(columns="target"), "has no column(s) target"),  # no label
        (lambda t: t[["target"]], "no feature columns beside the label column target"),
        (lambda t: t.assign(s1=np.inf), "column 's1': failed finite"),  # a non-finite value
        (lambda t: t.assign(target=100.0), "label column 'target' holds one value (100.0) in all 442"),
        (lambda t: t.assign(s2=t["s2"].mask(t.index == 4, 1e300)), "column 's2': failed finite"),  # float32
        (  # a word in a column of numbers: a typo, or a missing value spelled as pandas does not read it
            lambda t: t.assign(bp=t["bp"].astype(object).mask(t.index == 7, "high")),
            "column 'bp' holds numbers and text ('high' at row 7); make those cells numbers, or empty",
        ),
        (
            lambda t: t.assign(target=t["target"].mask(t.index == 4)),
            "label column 'target' is empty in 1 row(s) (rows 4); give every row a label, or pass "
            "--drop-unlabelled-rows",
        ),
        (  # text labels, for a regression
            lambda t: t.assign(target=np.where(t["target"] > 150, "high", "low")),
            "label column 'target' holds text ('high' at row 0, 'low' at row 1, 'low' at row 2 ...), and "
            "--objective reg:squarederror predicts a number; to classify, pass --objective multi:softprob "
            "(binary:logistic for two classes)",
        ),
    ],
)
def test_bad_data_is_refused_naming_the_column(tmp_path, change, message):  # DATA-1
    path = tmp_path / "bad.csv"
    change(diabetes()).to_csv(path, index=False)
    with pytest.raises(DataValidationError) as error:
        load_split(regressor(data_path=str(path)), data)
    assert message in str(error.value)


@pytest.mark.parametrize(
    ("file", "change", "message"),
    [
        ("header.csv", lambda t: t.head(0), "has no rows"),
        ("dated.parquet", lambda t: t.assign(day=pd.Timestamp("2024-05-01")), "column(s) 'day' hold dates"),
        ("indexed.csv", lambda t: t.reset_index(names="Unnamed: 0"), "column 'Unnamed: 0' holds the row"),
        ("ids.csv", lambda t: t.assign(ID=range(len(t))), "column 'ID' gives each of its 442 rows a number"),
        (
            "days.csv",
            lambda t: t.assign(day=pd.date_range("2024-01-01", periods=len(t)).astype(str)),
            "text column 'day' has 442 distinct values in 442 rows ('2024-01-01', ...): dates: make numbers",
        ),
        (
            "patients.csv",
            lambda t: t.assign(patient=[f"p{row}" for row in range(len(t))]),
            "text column 'patient' has 442 distinct values in 442 rows ('p0', ...): an identifier",
        ),
        ("named.csv", lambda t: t.rename(columns={"bmi": "bmi<30?"}), "column 'bmi<30?': XGBoost takes no"),
    ],
)
def test_a_table_of_no_rows_dates_or_row_numbers_is_refused_in_one_line(tmp_path, file, change, message):
    path = tmp_path / file
    changed = change(diabetes())
    if file.endswith(".parquet"):
        changed.to_parquet(path)
    else:
        changed.to_csv(path, index=False)
    with pytest.raises(DataValidationError) as error:
        load_split(regressor(data_path=str(path)), data)
    assert str(error.value).startswith(f"{path}: {message}") and "\n" not in str(error.value)


@pytest.mark.parametrize("name", ["table.pq", "table.PARQUET"])
def test_a_parquet_file_is_read_as_one_whatever_its_name(tmp_path, name):  # DATA-1
    data.load_table(TaskConfig()).to_parquet(tmp_path / name)
    split = load_split(TaskConfig(data_path=str(tmp_path / name)), data)
    assert split.train_features.equals(load_split(TaskConfig(), data).train_features)


def test_a_text_column_empty_in_every_training_row_is_refused_before_training(tmp_path):  # DATA-1
    held_out = load_split(TaskConfig(), data).test_features.index[0]
    table = data.load_table(TaskConfig())
    path = tmp_path / "note.csv"
    table.assign(note=np.where(table.index == held_out, "checked", None)).to_csv(path, index=False)
    with pytest.raises(DataValidationError, match="'note' hold no value in the training rows"):
        load_split(TaskConfig(data_path=str(path)), data)


@pytest.mark.parametrize(
    ("objective", "label", "message"),
    [
        (
            "binary:logistic",
            "target",
            "holds 214 classes (25, 31, 37, 39, 40, 42, 43, 44, 45, 47 ...), and "
            "--objective binary:logistic separates two; pass --objective multi:softprob",
        ),
        (
            "multi:softprob",
            "bmi",
            "holds fractional numbers (32.1 at row 0, 21.6 at row 1, 30.5 at row 2 ...), and --objective "
            "multi:softprob classifies; to predict a number, pass --objective reg:squarederror",
        ),
        ("multi:softprob", "one", "label column 'one' holds one class (1); a classifier needs two or more"),
    ],
)
def test_a_label_that_does_not_fit_the_task_says_which_objective_would(tmp_path, objective, label, message):
    path = tmp_path / "table.csv"  # DATA-1
    diabetes().assign(one=1).to_csv(path, index=False)
    cfg = regressor(data_path=str(path), objective=objective, label_column=label)
    with pytest.raises(DataValidationError) as error:
        load_split(cfg, data)
    assert message in str(error.value) and "\n" not in str(error.value)


def test_a_table_too_small_to_validate_and_test_on_is_refused(tmp_path):  # DATA-1
    path = tmp_path / "five_rows.csv"
    diabetes().head(5).to_csv(path, index=False)
    with pytest.raises(DataValidationError, match="5 rows leave 1 validation and 1 test row"):
        load_split(regressor(data_path=str(path)), data)


def test_parquet_without_an_engine_or_a_broken_file_is_a_clear_error(tmp_path):  # DATA-1
    path = tmp_path / "table.parquet"
    path.write_bytes(b"not parquet")
    with pytest.raises(DataValidationError, match=r"pyarrow|cannot read it as a table"):
        load_split(TaskConfig(data_path=str(path)), data)


def test_a_table_of_ones_own_is_not_held_to_the_bundled_tables_rules(tmp_path):  # DATA-1
    table = diabetes()
    # A patient of 300 years, and a sex column coded 0/1 (the bundled table codes it 1/2).
    odd = table.assign(age=table["age"].mask(table.index == 3, 300), sex=table.index % 2)
    path = tmp_path / "penguins.csv"
    odd.to_csv(path, index=False)
    cfg = smoke_config(tmp_path, data_path=str(path), loggers=("csv",), **REGRESSION)
    if getattr(data, "column_checks", lambda cfg: {})(cfg):
        pytest.skip("this part's data.py checks a table given by --data-path with its own rules")
    summary = train.main_with_config(cfg)
    (run_dir,) = tmp_path.glob("smoke_*")
    assert json.loads((run_dir / "metrics.json").read_text()) == summary and summary["rounds_trained"] > 1
    assert summary["test_rmse"] > 0 and "sex" in model.load_model(run_dir / "model.ubj").feature_names


def module(name, **functions):
    """A part's data module as a test writes it."""
    source = types.ModuleType(name)
    source.__dict__.update(functions)
    return source


DIABETES = module("diabetes", load_table=lambda cfg: diabetes())


@pytest.mark.parametrize(
    ("source", "message"),
    [
        (module("old"), "old.py: no function load_table; the pipeline calls old.load_table(cfg)"),
        (module("two", load_table=lambda cfg, path: 1), "two.load_table(cfg): missing a required argument"),
        (module("list", load_table=lambda cfg: [1]), "list.load_table(cfg) returned a list, not a DataFrame"),
        (
            module("rules", load_table=data.load_table, column_checks=lambda cfg: [1]),
            "rules.column_checks(cfg) returned a list, not a dict",
        ),
    ],
)
def test_a_data_module_that_breaks_its_contract_is_one_line(source, message):  # DATA-1
    source.__file__ = f"{source.__name__}.py"
    with pytest.raises(DataValidationError) as error:
        load_split(TaskConfig(), source)
    assert message in str(error.value) and "\n" not in str(error.value)


def test_a_data_module_of_load_table_alone_loads_its_table():  # DATA-1: data.py is the user's
    """column_checks(cfg) is optional: the bundled table's value rules are data.py's own."""
    bare = module("bare", load_table=data.load_table)
    split = load_split(TaskConfig(), bare)
    rows = len(split.train_labels) + len(split.val_labels) + len(split.test_labels)
    assert rows == len(data.load_table(TaskConfig()))


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"feature_columns": ("age", "bmi", "age")}, "age listed more than once"),
        ({"min_child_weight": -1.0}, "min_child_weight -1.0: XGBoost: value -1 for Parameter min_child"),
        ({"learning_rate": -0.1}, "learning_rate -0.1: XGBoost: value -0.1 for Parameter learning_rate"),
        ({"keep_last_n": -1}, "keep_last_n -1: must be at least 0"),
        ({"cluster": "local:0"}, "cluster 'local:0': use local, local:N"),
        ({"cluster": "my cluster"}, "tcp://host:8786"),
        ({"device": "cuda", "cluster": "local:2"}, "device cuda with cluster local:2: the workers of a"),
        ({"device": "cuda", "cluster": "local"}, "machine's first GPU, which XGBoost refuses; use local:1"),
    ],
)
def test_bad_config_values_are_refused_by_name(overrides, message):  # CFG-3
    assert any(message in problem for problem in TaskConfig(**overrides).problems())


def test_a_hyperparameter_a_config_adds_is_checked_by_xgboost_and_reaches_its_objective():  # CFG-3
    @dataclasses.dataclass
    class WithGamma(TaskConfig):
        gamma: float = -1.0  # XGBoost's min_split_loss, which must not be negative

    (problem,) = WithGamma().problems()
    assert problem.startswith("gamma -1.0: XGBoost: value -1 for Parameter min_split_loss")

    # The classes multi:* needs are the label's, passed once the table is loaded.
    assert TaskConfig(objective="multi:softprob").problems() == []


@pytest.mark.parametrize(
    ("objective", "eval_metric", "message"),
    [
        ("reg:logistic", "rmse", "reg:logistic --eval-metric rmse: it needs labels in [0, 1]"),
        ("rank:ndcg", "ndcg", "rank:ndcg --eval-metric ndcg: XGBoost:"),  # relevance degrees 0..31
        ("survival:aft", "aft-nloglik", "survival:aft --eval-metric aft-nloglik: XGBoost:"),  # label bounds
        ("reg:squarederror", "auc", "auc: train-auc:nan val-auc:nan after one round"),
    ],
)
def test_labels_the_objective_or_metric_cannot_take_are_refused(objective, eval_metric, message):  # DATA-1
    with pytest.raises(DataValidationError) as error:
        load_split(regressor(objective=objective, eval_metric=eval_metric), DIABETES)
    where = f"{DIABETES.__name__}.load_table(cfg)"
    assert str(error.value).startswith(f"{where}: labels 25 to 346 of column 'target' do not suit")
    assert message in str(error.value) and "\n" not in str(error.value)


def test_negative_labels_of_a_count_objective_are_refused(tmp_path):  # DATA-1
    path = tmp_path / "negative.csv"
    table = diabetes()
    table.assign(y=table["target"] - 200).drop(columns="target").to_csv(path, index=False)
    cfg = regressor(data_path=str(path), label_column="y", objective="count:poisson")
    with pytest.raises(DataValidationError, match="label must be non-negative for Poisson"):
        load_split(cfg, data)


@pytest.mark.parametrize(
    ("objective", "eval_metric"),
    [("reg:absoluteerror", "mae"), ("reg:pseudohubererror", "mphe"), ("count:poisson", "poisson-nloglik")],
)
def test_labels_other_regression_objectives_take_pass(objective, eval_metric):  # DATA-1
    split = load_split(regressor(objective=objective, eval_metric=eval_metric), DIABETES)
    assert len(split.train_labels) > 0


@slow
def test_labels_that_do_not_suit_the_objective_fail_the_run_with_one_line(tmp_path):  # DATA-1
    flags = ["--objective", "reg:logistic", "--wandb-mode", "disabled", "--output.base-dir", tmp_path]
    result = run_part("train", "--config", "smoke", *flags)
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines()[-1].endswith("it needs labels in [0, 1]"), result.stderr
    assert "Traceback" not in result.stderr
    (run_dir,) = tmp_path.glob("smoke_*")  # the labels are known once the run has begun
    assert json.loads((run_dir / "run.json").read_text())["status"] == "failed"


def test_split_is_fixed_by_split_seed_not_seed():
    first = load_split(regressor(seed=1), DIABETES)
    second = load_split(regressor(seed=2), DIABETES)
    assert first.test_features.index.equals(second.test_features.index)
    assert len(first.train_labels) + len(first.val_labels) + len(first.test_labels) == 442


@gpu
def test_trains_on_the_gpu(tmp_path):
    if not xgb.build_info()["USE_CUDA"]:
        pytest.skip("needs XGBoost's CUDA build, the cuda extra; this is xgboost-cpu, the cpu extra")
    cfg = smoke_config(tmp_path)
    encoding = load_split(cfg, data).encoding
    assert training_params(cfg, model.booster_params(cfg), encoding)["device"] == "cuda"
    # A local cluster's workers would all train on GPU 0, which XGBoost refuses: they use the CPU.
    for cluster, device in [("local:2", "cpu"), ("local", "cpu"), ("local:1", "cuda")]:
        on_cluster = dataclasses.replace(cfg, cluster=cluster)
        assert training_params(on_cluster, model.booster_params(cfg), encoding)["device"] == device
    summary = train.main_with_config(cfg)
    assert summary["test_rmse"] > 0
    # The model predicts where no GPU is visible, and gives the run's test metrics again.
    (run_dir,) = tmp_path.glob("smoke_*")
    cpu_only = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    result = run_part("predict", run_dir, "--rows", "test", "--output", tmp_path / "out.csv", env=cpu_only)
    assert result.returncode == 0, result.stderr
    assert f"rmse {summary['test_rmse']:.6g} |" in result.stdout
    assert (tmp_path / "out.csv").read_text() == (run_dir / "test_predictions.csv").read_text()
    # A table with a text column, continued from a checkpoint as --resume does: XGBoost 3.2's
    # CUDA build crashed there on models that kept its own list of categories.
    (tmp_path / "table").mkdir()
    on_table = task_config(tmp_path / "table", "binary", num_boost_round=6, device="cuda")
    split, params = load_split(on_table, data), model.booster_params(on_table)
    first = train_booster(dataclasses.replace(on_table, num_boost_round=3), params, split)
    first.save_model(tmp_path / "last.ubj")
    continued = train_booster(on_table, params, split, previous=model.load_model(tmp_path / "last.ubj"))
    assert continued.num_boosted_rounds() == 6


# A task per objective on one raw table: a text column, empty cells, and labels of each kind.
TASKS = {
    "regression": ("score", "reg:squarederror"),
    "binary": ("flag", "binary:logistic"),
    "multiclass": ("kind", "multi:softprob"),
}


def raw_table(rows: int = 300) -> pd.DataFrame:
    """A table as a user's CSV holds it: `colour` as words, empty cells among the features,
    and a label for each task that the features decide."""
    rng = np.random.default_rng(0)
    colour = rng.choice(["red", "green", "blue"], rows)
    size, weight = rng.normal(size=rows), rng.normal(size=rows)
    score = 2 * size + np.select([colour == "red", colour == "green"], [2.0, -2.0], 0.0) + 0.2 * weight
    table = pd.DataFrame({"colour": colour, "size": size, "weight": weight, "score": score})
    table["flag"] = np.where(score > 0, "yes", "no")
    table["kind"] = np.select([score < -1, score < 1], ["low", "mid"], "high")
    table.loc[rng.choice(rows, 15, replace=False), "size"] = np.nan
    table.loc[rng.choice(rows, 15, replace=False), "colour"] = None
    return table


def task_config(tmp_path, task: str, **overrides):
    label, objective = TASKS[task]
    path = tmp_path / "raw.csv"
    if not path.exists():
        raw_table().to_csv(path, index=False)
    fields = {"data_path": str(path), "label_column": label, "objective": objective}
    fields |= {"feature_columns": ("colour", "size", "weight"), "loggers": ("csv",)}
    return smoke_config(tmp_path, **fields | overrides)


@pytest.fixture(scope="module")
def task_runs(tmp_path_factory):
    """A smoke run of each task on the raw table: {task: (run directory, summary)}."""
    runs = {}
    for task in TASKS:
        folder = tmp_path_factory.mktemp(task)
        summary = train.main_with_config(task_config(folder, task, report=True))
        (run_dir,) = folder.glob("smoke_*")
        runs[task] = run_dir, summary
    return runs


# What each task's summary holds beyond the best round, and the report's figures of its predictions.
TASK_METRICS = {
    "regression": ({"test_rmse", "test_mae", "test_r2", "best_val_rmse"}, ["predicted_vs_true"]),
    "binary": (
        {"test_accuracy", "test_balanced_accuracy", "test_f1_macro", "test_log_loss", "test_roc_auc"}
        | {"best_val_logloss"},
        ["confusion_matrix", "roc"],
    ),
    "multiclass": (
        {"test_accuracy", "test_balanced_accuracy", "test_f1_macro", "test_log_loss", "test_roc_auc_ovr"}
        | {"best_val_mlogloss"},
        ["confusion_matrix", "roc"],
    ),
}


@pytest.mark.parametrize("task", TASKS)
def test_each_task_trains_on_a_raw_table_and_reports_its_metrics(task_runs, task):  # OUT-5, DATA-1
    run_dir, summary = task_runs[task]
    metrics, figures = TASK_METRICS[task]
    assert metrics <= set(summary) and json.loads((run_dir / "metrics.json").read_text()) == summary
    if task == "regression":
        assert summary["test_r2"] > 0.7
    else:  # the labels follow from the features: far better than chance, whatever depth the user sets
        chance_log_loss = np.log(len(raw_table()[TASKS[task][0]].unique()))
        assert summary["test_accuracy"] > 0.6 and summary["test_log_loss"] < 0.75 * chance_log_loss
    metric = f"val_{next(key for key in metrics if key.startswith('best_val_')).removeprefix('best_val_')}"
    logged = [e for e in read_jsonl(run_dir / "metrics.jsonl") if metric in e]
    assert len(logged) == summary["rounds_trained"] and f"tracking/best_{metric}" in logged[-1]
    report = assert_report(run_dir, ["learning_curves", *figures, "feature_importance", "shap_summary"])
    assert "predicted_vs_actual" not in report
    # The test rows, by their place in the table, with their labels as the table has them.
    label, _ = TASKS[task]
    table, tested = raw_table(), pd.read_csv(run_dir / "test_predictions.csv")
    assert len(tested) == 45 and tested["row"].is_unique
    expected = table[label].iloc[tested["row"]].to_numpy()
    if task == "regression":
        np.testing.assert_allclose(tested[f"true_{label}"], expected)
    else:
        assert tested[f"true_{label}"].tolist() == expected.tolist()
        classes = sorted(table[label].unique())
        assert [
            c.removeprefix("probability_") for c in tested.columns if c.startswith("probability_")
        ] == classes


@pytest.mark.parametrize("task", TASKS)
def test_predict_reproduces_the_runs_test_metrics(task_runs, task, tmp_path):  # OUT-5
    run_dir, summary = task_runs[task]
    output = tmp_path / "predictions.csv"
    options = PredictOptions(run_dir, output=output, rows="test")
    metrics = predict_run(options, TaskConfig, data, model.load_model)
    assert metrics == pytest.approx(
        {key.removeprefix("test_"): v for key, v in summary.items() if key[:5] == "test_"}
    )
    assert output.read_text() == (run_dir / "test_predictions.csv").read_text()
    # New rows: a colour training never saw reads as missing, a row without a label is predicted
    # and not scored, and columns the model does not read are left out.
    label, _ = TASKS[task]
    new = raw_table().head(20).assign(colour="purple", extra=1.0)
    new.loc[0, label] = None
    new.to_csv(tmp_path / "new.csv", index=False)
    options = PredictOptions(run_dir, data_path=str(tmp_path / "new.csv"), output=output)
    scored = predict_run(options, TaskConfig, data, model.load_model)
    assert set(scored) <= {key.removeprefix("test_") for key in summary} and len(scored) >= 3
    predicted = pd.read_csv(output)
    assert predicted["row"].tolist() == list(range(20)) and predicted[f"true_{label}"].isna().sum() == 1


def test_the_model_keeps_the_classes_and_categories_it_read_the_table_with(task_runs):  # OUT-5
    run_dir, _ = task_runs["multiclass"]
    encoding = TableEncoding.of(model.load_model(run_dir / "model.ubj"), "model.ubj")
    assert encoding.classes == ["high", "low", "mid"] and encoding.categories == {
        "colour": ["blue", "green", "red"]
    }
    assert encoding.feature_columns == ("colour", "size", "weight") and encoding.label_column == "kind"
    last = TableEncoding.of(model.load_model(run_dir / "checkpoints" / "last.ubj"), "last.ubj")
    assert last == encoding  # a checkpoint predicts too
    # Not XGBoost's own list as well: its CUDA build crashes continuing a model that keeps one.
    assert model.load_model(run_dir / "checkpoints" / "last.ubj").get_categories().empty()


def test_predict_reports_a_cut_model_file_before_xgboost_reads_it(task_runs, tmp_path):  # OUT-5, RES-1
    run_dir, _ = task_runs["binary"]
    (tmp_path / "run").mkdir()
    for name in ("config.json", "model.ubj"):
        (tmp_path / "run" / name).write_bytes((run_dir / name).read_bytes())
    cut = tmp_path / "run" / "model.ubj"
    cut.write_bytes(cut.read_bytes()[: cut.stat().st_size // 2])
    options = PredictOptions(tmp_path / "run", output=tmp_path / "out.csv", rows="test")
    with pytest.raises(DataValidationError, match=r"model\.ubj is damaged \(.+\): a run saves it as it ends"):
        predict_run(options, TaskConfig, data, model.load_model)
    assert not (tmp_path / "out.csv").exists()


@slow
def test_predict_refuses_a_table_without_the_models_columns_in_one_line(task_runs, tmp_path):  # OUT-5
    run_dir, _ = task_runs["multiclass"]
    raw_table().drop(columns=["size", "weight"]).to_csv(tmp_path / "fewer.csv", index=False)
    result = run_part(
        "predict", run_dir, "--data-path", tmp_path / "fewer.csv", "--output", tmp_path / "out.csv"
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip() == (
        f"error: --data-path {tmp_path / 'fewer.csv'}: has no column(s) size, weight; the model reads "
        "colour, size, weight"
    )
    assert not (tmp_path / "out.csv").exists()


@pytest.mark.parametrize("value", [np.inf, -np.inf, 1e300])
def test_predict_refuses_a_number_training_would_have_refused(value):  # OUT-5, DATA-1
    encoding = TableEncoding("y", ("size",), {})
    rows = pd.DataFrame({"size": [1.0, None, 2.0, value]})
    with pytest.raises(DataValidationError) as error:
        encoding.features(rows, "rows")
    assert str(error.value).startswith(f"rows: column 'size' holds {value:g} at row 3: the model takes")


@pytest.mark.parametrize("task", TASKS)
def test_predict_of_a_table_of_no_rows_is_a_table_of_no_rows(task_runs, task, tmp_path):  # OUT-5
    run_dir, _ = task_runs[task]
    raw_table().head(0).to_csv(tmp_path / "header.csv", index=False)
    output = tmp_path / "out.csv"
    result = run_part("predict", run_dir, "--data-path", tmp_path / "header.csv", "--output", output)
    assert result.returncode == 0, result.stderr
    predicted = read_predictions(output)
    assert predicted.empty and f"predicted_{TASKS[task][0]}" in predicted.columns


def test_true_and_false_labels_are_the_classes(tmp_path):  # DATA-1, OUT-5
    raw_table().assign(flag=lambda t: t["flag"] == "yes").to_csv(tmp_path / "raw.csv", index=False)
    split = load_split(task_config(tmp_path, "binary"), data)
    assert [repr(value) for value in split.encoding.classes] == ["False", "True"]  # not 0 and 1


def test_a_users_table_reads_every_column_but_the_label_numbers_as_float32_text_as_categories(tmp_path):
    cfg = task_config(tmp_path, "multiclass", feature_columns=())  # DATA-1
    split = load_split(cfg, data)
    assert split.encoding.feature_columns == ("colour", "size", "weight", "score", "flag")
    assert list(split.encoding.categories) == ["colour", "flag"]
    # XGBoost reads numbers as float32: a float64 copy of a large table would double its memory.
    numbers = split.train_features.drop(columns=["colour", "flag"])
    assert set(map(str, numbers.dtypes)) == {"float32"}, numbers.dtypes
    assert split.train_features["colour"].dtype == "category" and split.train_features["colour"].isna().any()
    assert split.train_features["size"].isna().any() and set(split.train_labels) == {0, 1, 2}
    # What XGBoost trains on: a text column's codes in the order of its categories, missing kept.
    codes, types = split.encoding.as_codes(split.train_features)
    assert types == ["c", "q", "q", "q", "c"] and codes["colour"].dtype == "float32"
    expected = split.train_features["colour"].map({"blue": 0.0, "green": 1.0, "red": 2.0}).astype(float)
    pd.testing.assert_series_equal(codes["colour"].astype(float), expected, check_names=False)
    assert split.train_features["colour"].dtype == "category"  # the split's own frame unchanged
    # Every class in each split in its share of the table (stratified by class).
    shares = [
        labels.value_counts(normalize=True).sort_index() for labels in (split.train_labels, split.test_labels)
    ]
    np.testing.assert_allclose(shares[0], shares[1], atol=0.05)


def test_checking_a_table_copies_only_the_columns_it_converts():  # DATA-1
    """A large table is checked as it is read: copied whole, it would be held twice."""
    table = pd.DataFrame({"number": np.arange(1000, dtype=np.float64), "count": np.arange(1000)})
    schema = pa.DataFrameSchema({name: pa.Column(float, coerce=True) for name in table})
    checked = validate_table(table, schema, "the table")
    assert np.shares_memory(checked["number"].to_numpy(), table["number"].to_numpy())
    assert checked["count"].dtype == "float64" and table["count"].dtype == "int64"  # the caller's unchanged


def test_unlabelled_rows_are_left_out_when_asked_keeping_each_rows_place(tmp_path):  # DATA-1
    table = raw_table()
    table.loc[[5, 77], "kind"] = None
    table.to_csv(tmp_path / "gaps.csv", index=False)
    cfg = task_config(tmp_path, "multiclass", data_path=str(tmp_path / "gaps.csv"), drop_unlabelled_rows=True)
    split = load_split(cfg, data)
    rows = split.train_features.index.union(split.val_features.index).union(split.test_features.index)
    assert len(rows) == 298 and {5, 77}.isdisjoint(rows) and rows.max() == 299


@pytest.mark.parametrize(
    ("task", "overrides", "metric", "goal"),
    [
        ("regression", {}, "best_val_rmse", "minimize"),
        ("multiclass", {}, "best_val_mlogloss", "minimize"),
        ("binary", {}, "best_val_logloss", "minimize"),
        ("binary", {"eval_metric": "auc"}, "best_val_auc", "maximize"),
        ("binary", {"objective": "binary:logitraw"}, "best_val_auc", "maximize"),  # margins: no logloss
    ],
)
def test_a_sweep_selects_on_the_tasks_validation_metric(tmp_path, task, overrides, metric, goal):  # SWP-1
    if not (ROOT / PARTS["sl_tree"] / "sweep.py").is_file():
        pytest.skip("this project has no sweep")
    spec = part_module("sl_tree", "sweep").SPEC.for_config(task_config(tmp_path, task, **overrides))
    assert (spec.metric, spec.goal) == (metric, goal)
