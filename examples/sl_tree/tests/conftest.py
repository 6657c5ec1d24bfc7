"""Shared fixtures: the parts of this project, found by their config classes, and a quiet W&B."""

from __future__ import annotations

import dataclasses
import http.server
import importlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from types import ModuleType, SimpleNamespace

import lightning as L
import numpy as np
import pandas as pd
import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
# The project first on a child process's path, then any PYTHONPATH of the caller's own (packages
# installed into a folder of their own, say).
PROJECT_PYTHONPATH = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

# Tests never talk to a W&B server; the tests that check W&B files use offline mode.
os.environ.setdefault("WANDB_MODE", "disabled")

# A shell starts a background job (`nox -s tests &`) with Ctrl-C ignored, and every program
# it starts inherits that. The tests that press Ctrl-C need it delivered: here, and, since
# exec resets a handler but keeps an ignored signal ignored, in the runs they start.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def parts_by_kind() -> dict[str, str]:
    """{"sl_neural": "part1", ...}: each part's kind is the level of the config hierarchy
    its configs inherit from (CFG-1)."""
    levels = {"SLNeuralConfig": "sl_neural", "SLTreeConfig": "sl_tree", "RLConfig": "rl"}
    found = {}
    for train in sorted(ROOT.glob("*/train.py")):  # any folder name: the checker finds parts so too
        package = train.parent.name
        if not (train.parent / "config.py").is_file():
            continue
        config_cls = next(iter(importlib.import_module(f"{package}.config").CONFIGS.values()))
        (kind,) = (levels[cls.__name__] for cls in config_cls.__mro__ if cls.__name__ in levels)
        found[kind] = package
    return found


PARTS = parts_by_kind()


def part_module(kind: str, module: str) -> ModuleType:
    if kind not in PARTS:
        pytest.skip(f"this project has no {kind} part")
    return importlib.import_module(f"{PARTS[kind]}.{module}")


def default_config(kind: str) -> type:
    """The config class a bare `python -m PART.train` trains: the first of the part's CONFIGS.
    Tests name no class of config.py, so that renaming one breaks nothing here."""
    return next(iter(part_module(kind, "config").CONFIGS.values()))


def run_config(kind: str, run_dir: Path):
    """A run's config, as its config.json holds it."""
    return default_config(kind).from_json((run_dir / "config.json").read_text())


def prediction_figures(kind: str, run_dir: Path) -> list[str]:
    """The figures a supervised run's test predictions call for, by what the part predicts:
    a classifier's confusion matrix and ROC curves, a regression's predicted against true."""
    regression = run_config(kind, run_dir).task == "regression"
    return ["predicted_vs_true"] if regression else ["confusion_matrix", "roc"]


@pytest.fixture(scope="session")
def smoke_runs(tmp_path_factory):
    """Each part kind's smoke run with offline W&B, trained once per session on first use:
    smoke_runs(kind) -> (run directory, test metrics); smoke_runs(kind, field=value) the
    run with those config fields changed. Tests read these runs, never change them."""
    done = {}

    def smoke_run(kind: str, **overrides):
        key = (kind, *sorted(overrides.items()))
        if key not in done:
            base = part_module(kind, "config").CONFIGS["smoke"]()
            output_dir = tmp_path_factory.mktemp(f"smoke_{kind}")
            output = dataclasses.replace(base.output, base_dir=str(output_dir))
            test_metrics = part_module(kind, "train").main_with_config(
                dataclasses.replace(base, output=output, wandb_mode="offline", **overrides)
            )
            (run_dir,) = output_dir.glob("smoke_*")
            done[key] = run_dir, test_metrics
        return done[key]

    return smoke_run


def write_mixed_table(path: Path, rows: int = 300) -> Path:
    """A raw table, as users have them, written to `path` (CSV): numbers, a text column and
    missing values among the features; a label `kind` of three classes, and two numbers to
    predict, `height` and `weight`; a few rows without a kind or a height."""
    rng = np.random.default_rng(0)
    size, spread = rng.normal(size=rows), rng.uniform(0, 10, size=rows)
    colour = rng.choice(["red", "green", "blue"], size=rows)
    shade = pd.Series(colour).map({"red": 0.0, "green": 1.5, "blue": -1.5}).to_numpy()
    score = size + shade + rng.normal(scale=0.3, size=rows)
    table = pd.DataFrame(
        {
            "size": size,
            "spread": np.where(rng.random(rows) < 0.1, np.nan, spread),
            "colour": np.where(rng.random(rows) < 0.05, None, colour),
            "count": rng.integers(1, 6, size=rows),
            "kind": np.select([score < -0.7, score < 0.9], ["low", "mid"], "high"),
            "height": 3 * size + shade + rng.normal(scale=0.2, size=rows),
            "weight": 10 + spread + 2 * size + rng.normal(scale=0.2, size=rows),
        }
    )
    table.loc[[3, 40], "kind"] = None
    table.loc[[5, 77], "height"] = np.nan
    table.to_csv(path, index=False)
    return path


def noise_regression(path: Path) -> dict:
    """A table whose `target` is noise, written to `path` (CSV), and the fields that make a tree
    part regress it: validation stops improving within a few rounds, whatever the part's task."""
    noise = np.random.default_rng(0).normal(size=(200, 4))
    pd.DataFrame(noise, columns=["a", "b", "c", "target"]).to_csv(path, index=False)
    task = {"label_column": "target", "feature_columns": ("a", "b", "c"), "objective": "reg:squarederror"}
    return {"data_path": str(path), **task, "eval_metric": "rmse"}


def as_flags(fields: dict) -> list[str]:
    """Config fields as command-line flags, a tuple's items as one flag's values."""
    flags = []
    for name, value in fields.items():
        flags += [f"--{name.replace('_', '-')}", *map(str, value if isinstance(value, tuple) else [value])]
    return flags


def assert_report(run_dir: Path, figures: list[str]) -> str:
    """report.md with its metrics table, each figure a PNG it shows; its text."""
    report = (run_dir / "report.md").read_text()
    assert "## Final metrics" in report and "| metric | final | best |" in report
    for name in figures:
        png = next(run_dir.glob(f"*/{name}.png"))
        assert png.read_bytes().startswith(PNG_SIGNATURE) and png.stat().st_size > 5000, png
        assert f"]({png.relative_to(run_dir)})" in report
    return report


def killed_copy(run_dir: Path, checkpoint: str, folder: Path) -> Path:
    """The run as a kill right after one of its checkpoints (`checkpoint`, in checkpoints/)
    would have left it, copied into `folder`: its config.json, that checkpoint as
    last.ckpt, the file to resume from, which this returns, and as best.ckpt if it was
    the best so far (the test after training loads the best)."""
    checkpoints = folder / run_dir.name / "checkpoints"
    checkpoints.mkdir(parents=True)
    shutil.copy(run_dir / "config.json", checkpoints.parent)
    last = Path(shutil.copy(run_dir / "checkpoints" / checkpoint, checkpoints / "last.ckpt"))
    callbacks = torch.load(last, map_location="cpu", weights_only=False).get("callbacks", {})
    if any(
        Path(state.get("best_model_path", "")).name == "best.ckpt"
        and state.get("current_score") is not None
        and bool(state["current_score"] == state["best_model_score"])
        for state in callbacks.values()
    ):
        shutil.copy(last, checkpoints / "best.ckpt")
    return last


def run_python(args: list[str], cwd: Path) -> tuple[subprocess.CompletedProcess, set[str]]:
    """`python ARGS` in a process of its own, as a user runs it: its result (stderr without
    the lines of -X importtime) and the top-level packages it imported."""
    result = subprocess.run(
        [sys.executable, "-X", "importtime", *args],
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": PROJECT_PYTHONPATH},
        capture_output=True,
        text=True,
    )
    lines = result.stderr.splitlines()
    # "import time: self [us] | cumulative | imported package", then one line per module
    timed = [line.rsplit("|", 1)[-1].strip() for line in lines if line.startswith("import time:")]
    result.stderr = "\n".join(line for line in lines if not line.startswith("import time:"))
    return result, {module.split(".")[0] for module in timed[1:]}


class Killed(BaseException):
    """Stands for a kill -9: neither Lightning nor the run handles it, so nothing is written after it."""


def kill_next_run(monkeypatch, hook: str, when: Callable[[L.Trainer], bool]) -> None:
    """The next run of a Lightning part stops as if killed, raising Killed from the
    Lightning callback hook `hook` once `when(trainer)` holds."""

    class Kill(L.Callback):
        pass

    def kill(self, trainer: L.Trainer, *args) -> None:
        if when(trainer):
            raise Killed

    setattr(Kill, hook, kill)
    from src.training import trainer as trainer_module  # a project of trees alone has none

    # train.py imports build_trainer when a run starts: the run gets this module's.
    build_trainer = trainer_module.build_trainer

    def with_kill(*args, extra_callbacks=(), **kwargs):
        monkeypatch.setattr(trainer_module, "build_trainer", build_trainer)  # the next run only
        return build_trainer(*args, extra_callbacks=[*extra_callbacks, Kill()], **kwargs)

    monkeypatch.setattr(trainer_module, "build_trainer", with_kill)


@pytest.fixture
def webhook():
    """A local HTTP endpoint on a free port, for alerts: .url, and .received, the JSON of
    each POST it answered."""
    received: list[dict] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            received.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args) -> None:  # quiet
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield SimpleNamespace(url=f"http://127.0.0.1:{server.server_port}/alerts", received=received)
    server.shutdown()
    server.server_close()


def deliveries_done() -> None:
    """Wait for the alerts' deliveries, each on a thread of its own."""
    for thread in threading.enumerate():
        if thread.name.startswith("alert-"):
            thread.join()


@pytest.fixture
def hanging_port():
    """A port that takes connections and never says a word: a server that hangs."""
    with socket.create_server(("127.0.0.1", 0)) as listening:
        yield listening.getsockname()[1]


slow = pytest.mark.slow  # trains or starts Python processes: deselect with -m "not slow"


def gpu(test):
    """Mark a test `gpu` (select with -m gpu) and skip it where CUDA is missing."""
    needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
    return pytest.mark.gpu(needs_cuda(test))


def assert_ended(run_dir: Path, status: str, reason: str, detail: str) -> None:
    """run.json's status and end_reason, `detail` within its end_detail, and console.log's
    last line saying the same."""
    record = json.loads((run_dir / "run.json").read_text())
    assert (record["status"], record["end_reason"]) == (status, reason), record
    assert detail in record["end_detail"]
    last = (run_dir / "console.log").read_text().splitlines()[-1]
    assert last == f"run ended: {reason} ({record['end_detail']})"
