"""LOG-1: --loggers tensorboard csv, in a Lightning part and a tree part: TensorBoard reads
the finished run, the CSV has its metrics, and W&B stays off. What a run prints: what a
user needs, without the libraries' boilerplate."""

from __future__ import annotations

import csv
import json

import pytest
from conftest import PARTS, slow
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from src.runs.metrics_jsonl import read_jsonl

# A Lightning part (RL logs as SL neural does) and the tree part: the two ways a part logs.
LIGHTNING_KINDS = [kind for kind in ("sl_neural", "rl") if kind in PARTS]
KINDS = LIGHTNING_KINDS[:1] + (["sl_tree"] if "sl_tree" in PARTS else [])


@pytest.fixture(params=KINDS)
def file_logged_run(request, smoke_runs):
    """(run directory, test metrics) of the smoke run with TensorBoard and CSV and no W&B."""
    return smoke_runs(request.param, loggers=("tensorboard", "csv"))


def logged_metrics(run_dir) -> dict[tuple[str, int], float]:
    """{(key, step): value} of every number metrics.jsonl has; a step logged twice keeps its last."""
    found = {}
    for event in read_jsonl(run_dir / "metrics.jsonl"):
        if event["event"] == "metrics":
            for key, value in event.items():
                if key not in ("event", "step", "time") and isinstance(value, int | float):
                    found[key, event["step"]] = value
    return found


@slow
def test_tensorboard_reads_the_metrics_of_metrics_jsonl(file_logged_run):
    run_dir, test_metrics = file_logged_run
    events = EventAccumulator(str(run_dir / "tensorboard"))  # what `tensorboard --logdir` reads
    events.Reload()
    tags = events.Tags()["scalars"]
    scalars = {(tag, scalar.step): scalar.value for tag in tags for scalar in events.Scalars(tag)}
    jsonl = logged_metrics(run_dir)
    assert {key for key, _ in jsonl} <= set(tags)
    assert any(tag.startswith("val_") for tag in tags) and any(tag.startswith("train_") for tag in tags)
    for (key, step), value in jsonl.items():  # TensorBoard keeps float32
        assert scalars[key, step] == pytest.approx(value, rel=1e-6, abs=1e-6), (key, step)
    tested = {key: value for key, value in test_metrics.items() if key.startswith("test_")}
    assert tested
    for key, value in tested.items():  # the final test
        assert events.Scalars(key)[-1].value == pytest.approx(value, rel=1e-6), key


@slow
def test_the_csv_has_a_column_for_every_metric(file_logged_run):
    run_dir, _ = file_logged_run
    (path,) = (run_dir / "csv").glob("version_*/metrics.csv")
    with path.open(newline="") as file:
        rows = list(csv.DictReader(file))
    assert {key for key, _ in logged_metrics(run_dir)} | {"step"} <= set(rows[0])
    steps = {int(row["step"]) for row in rows}
    assert {step for _, step in logged_metrics(run_dir)} <= steps


@slow
def test_wandb_stays_off_when_the_loggers_leave_it_out(file_logged_run):
    run_dir, _ = file_logged_run
    assert not (run_dir / "wandb").exists()
    assert json.loads((run_dir / "config.json").read_text())["loggers"] == ["tensorboard", "csv"]


@pytest.mark.parametrize("kind", sorted(PARTS))
def test_the_console_says_what_a_user_needs_without_boilerplate(kind, smoke_runs):
    run_dir, _ = smoke_runs(kind)  # W&B offline
    console = (run_dir / "console.log").read_text()
    lines = console.splitlines()
    assert lines[0] == f"run directory: {run_dir}" and lines[-2] == f"report: {run_dir / 'report.md'}"
    assert lines[-1].startswith("run ended: ")  # and why
    # Lightning's device lines, its model summary's FLOPs column and total (0 without an
    # example_input_array), W&B's banner and its tables of history and summary at the end.
    for noise in ("GPU available", "TPU available", "FLOPs", "wandb:", "Run history", "Run summary"):
        assert noise not in console, noise
    said = [line for line in lines if line.startswith("W&B: ")]
    assert len(said) == 2, said  # where the run logs, and how to upload it once it ended
    assert said[-1].startswith("W&B: to upload this offline run: wandb sync ") and str(run_dir) in said[-1]
    if kind != "sl_tree":  # the model's parameters still show
        assert any(line.startswith("parameters: ") and " trainable" in line for line in lines)
