"""OPS-1..4: the GPU lock queues jobs, the babysitter reports and restarts, records are
written, and the detach script starts a job that outlives it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from types import SimpleNamespace

import pytest
import torch
from conftest import ROOT

from src import babysit, records
from src.metrics_jsonl import append_jsonl
from src.utils.gpu_lock import GpuLock


def test_gpu_lock_makes_a_second_job_wait(tmp_path):  # OPS-1
    lock = tmp_path / "gpu.lock"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\nfrom src.utils.gpu_lock import GpuLock\n"
            "with GpuLock(sys.argv[1]):\n    print('locked', flush=True); time.sleep(1.5)",
            str(lock),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout.readline().strip() == "locked"
    started = time.monotonic()
    with GpuLock(lock):
        waited = time.monotonic() - started
    holder.wait()
    assert waited > 0.5
    assert holder.returncode == 0


def make_run(tmp_path, status="running", pid=None, val_losses=(1.0, 0.8, 0.7)):
    run_dir = tmp_path / "output" / "baseline_20260101_120000"
    (run_dir / "checkpoints").mkdir(parents=True)
    (run_dir / "config.json").write_text(json.dumps({"name": "baseline", "patience": 10}))
    marker = tmp_path / "restarted"
    command = [sys.executable, "-c", f"open({str(marker)!r}, 'w').write(' '.join(__import__('sys').argv))"]
    run = {
        "status": status,
        "pid": pid or os.getpid(),
        "command": command,
        "cwd": str(tmp_path),
        "history": [],
    }
    (run_dir / "run.json").write_text(json.dumps(run))
    for epoch, loss in enumerate(val_losses):
        append_jsonl(run_dir / "metrics.jsonl", {"epoch": epoch, "val_loss": loss})
    torch.save({"epoch": len(val_losses) - 1, "state_dict": {}}, run_dir / "checkpoints" / "last.ckpt")
    return run_dir, marker


def babysit_args(tmp_path, **overrides):
    defaults = {
        "stall_minutes": 30.0,
        "monitor": "val_loss",
        "log_dir": str(tmp_path / "logs"),
        "restart": False,
    }
    (tmp_path / "logs").mkdir(exist_ok=True)
    return SimpleNamespace(max_restarts=3, **{**defaults, **overrides})


def test_babysitter_reports_a_healthy_run(tmp_path, monkeypatch):  # OPS-3
    monkeypatch.chdir(tmp_path)
    run_dir, _ = make_run(tmp_path)
    findings = babysit.babysit_once(run_dir, babysit_args(tmp_path))
    assert [f.check for f in findings] == ["process", "hung", "metrics", "system", "checkpoint"]
    assert all(f.level == "OK" for f in findings), findings
    log = (tmp_path / "logs" / f"babysit_{run_dir.name}.log").read_text()
    assert "val_loss 0.7" in log and "last.ckpt loads (epoch 2" in log
    assert not (tmp_path / "issues").exists()


def test_babysitter_restarts_a_dead_run_and_files_an_issue(tmp_path, monkeypatch):  # OPS-3, OPS-4
    monkeypatch.chdir(tmp_path)
    finished = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    run_dir, marker = make_run(tmp_path, pid=int(finished.stdout))
    findings = babysit.babysit_once(run_dir, babysit_args(tmp_path, restart=True))
    assert findings[0].level == "FAIL" and "never finished" in findings[0].message
    for _ in range(100):
        if marker.exists() and marker.read_text():
            break
        time.sleep(0.1)
    assert marker.read_text().endswith(f"--resume {run_dir.resolve()}")
    (issue,) = (tmp_path / "issues").glob("*.md")
    assert 'type: "crash"' in issue.read_text() and 'status: "open"' in issue.read_text()


@pytest.mark.parametrize(
    ("breakage", "check"),
    [
        (lambda run_dir: (run_dir / "checkpoints" / "last.ckpt").write_bytes(b"truncated"), "checkpoint"),
        (lambda run_dir: append_jsonl(run_dir / "metrics.jsonl", {"val_loss": float("nan")}), "metrics"),
        (lambda run_dir: [os.utime(run_dir / f, (0, 0)) for f in ("metrics.jsonl",)], "hung"),
    ],
)
def test_babysitter_fails_what_is_broken(tmp_path, monkeypatch, breakage, check):  # OPS-3
    monkeypatch.chdir(tmp_path)
    run_dir, _ = make_run(tmp_path)
    breakage(run_dir)
    findings = {f.check: f for f in babysit.babysit_once(run_dir, babysit_args(tmp_path))}
    assert findings[check].level == "FAIL", findings[check]


def test_records_carry_type_status_and_their_own_fields(tmp_path):  # OPS-4
    experiment = records.new_experiment(tmp_path, "Wider MLP", hypothesis="width helps", configs="wide")
    issue = records.new_issue(tmp_path, "NaN loss", "divergence", run="output/x", metric="val_loss")
    assert 'hypothesis: "width helps"' in experiment.read_text()
    assert 'metric: "val_loss"' in issue.read_text() and 'epoch: ""' in issue.read_text()
    listed = {(r["type"], r["status"]) for r in records.list_records(tmp_path)}
    assert listed == {("experiment", "planned"), ("divergence", "open")}
    with pytest.raises(ValueError, match="valid types: crash"):
        records.new_issue(tmp_path, "x", "oops")


def test_detach_script_starts_an_unbuffered_background_job(tmp_path):  # OPS-2
    result = subprocess.run(
        ["bash", str(ROOT / "scripts" / "detach.sh"), "json.tool", "--help"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHON": sys.executable},
    )
    assert result.returncode == 0, result.stderr
    assert "started pid" in result.stdout
    (log,) = (tmp_path / "output").glob("json_tool_baseline_*.txt")
    for _ in range(50):
        if "usage" in log.read_text():
            break
        time.sleep(0.1)
    assert "usage" in log.read_text()
