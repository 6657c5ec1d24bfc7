"""OPS-1..4: the GPU lock queues jobs, the babysitter reports and restarts, records are
written, and the detach script starts a job that outlives it."""

from __future__ import annotations

import contextlib
import fcntl
import gc
import importlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import weakref
from dataclasses import replace
from datetime import date
from pathlib import Path
from types import MappingProxyType, SimpleNamespace

import numpy as np
import psutil
import pytest
import torch
from conftest import PARTS, ROOT, slow

from src.cli import parse_cli
from src.config import BaseConfig, OutputConfig
from src.ops import babysit, records
from src.ops.gpu_lock import GpuLock
from src.runs.atomic import WriteFailed
from src.runs.directory import TRAINING_LOCK, create_run_dir, marked_if_never_checkpointed
from src.runs.lifetime import start_run
from src.runs.metrics_jsonl import append_jsonl, higher_is_better


# OPS-1: concurrent jobs queue on the lock instead of failing.
def test_gpu_lock_makes_a_second_job_wait(tmp_path):
    lock, releasing = tmp_path / "gpu.lock", tmp_path / "releasing"
    # The holder writes `releasing` as the last thing it does with the lock held: a second job
    # that got the lock without waiting would find no such file, however slow the machine.
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import pathlib, sys, time\nfrom src.ops.gpu_lock import GpuLock\n"
            "with GpuLock(sys.argv[1], without_gpu=True):\n"
            "    print('locked', flush=True); time.sleep(1.5); pathlib.Path(sys.argv[2]).touch()",
            str(lock),
            str(releasing),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout.readline().strip() == "locked"
    with GpuLock(lock, without_gpu=True):
        assert releasing.exists()
    holder.wait()
    assert holder.returncode == 0
    assert lock.stat().st_mode & 0o777 == 0o666  # every user of the machine can queue on it


def test_a_machine_without_a_gpu_takes_no_lock(tmp_path):
    if torch.cuda.is_available():
        pytest.skip("the machine has a GPU")
    with GpuLock(tmp_path / "gpu.lock") as lock:
        assert not lock.enabled and not (tmp_path / "gpu.lock").exists()


SETPRIV = ["setpriv", "--inh-caps=-dac_override", "--bounding-set=-dac_override"]
TAKE_LOCK = """import sys
from src.ops.gpu_lock import GpuLock
with GpuLock(sys.argv[1], without_gpu=True):
    print("ok")
"""


READABLE = "set GPU_LOCK_PATH to a file path every user of this machine can read\n"


def take_lock(path, *prefix: str) -> subprocess.CompletedProcess:
    command = [*prefix, sys.executable, "-c", TAKE_LOCK, str(path)]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True)


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root's setpriv")
def test_a_lock_file_another_user_owns_read_only_still_queues(tmp_path):
    lock = tmp_path / "gpu.lock"
    lock.write_text("")
    lock.chmod(0o444)  # as another user's file looks to this one without DAC override
    result = take_lock(lock, *SETPRIV)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root's setpriv")
def test_a_lock_file_that_cannot_be_created_says_so(tmp_path):
    tmp_path.chmod(0o555)  # a folder this user cannot write to
    result = take_lock(tmp_path / "gpu.lock", *SETPRIV)
    assert result.returncode == 2 and result.stderr.endswith("Permission denied; " + READABLE), result.stderr


@pytest.mark.parametrize("where", ["missing/gpu.lock", "."])
def test_a_lock_path_that_cannot_be_a_file_is_one_clear_line(tmp_path, where):
    path = tmp_path / where
    result = take_lock(path)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.startswith(f"error: cannot use the GPU lock file {path}: ")


@pytest.mark.parametrize("planted", ["symlink", "hard link", "fifo"])
def test_a_lock_path_planted_by_someone_else_changes_nothing(tmp_path, planted):  # OPS-1
    """The lock's folder is writable by every user: whatever stands at the path is refused
    in one line, and a file it leads to keeps its content and its mode."""
    victim, path = tmp_path / "victim.txt", tmp_path / "gpu.lock"
    victim.write_text("someone's work\n")
    victim.chmod(0o600)
    plant = {"symlink": path.symlink_to, "hard link": path.hardlink_to, "fifo": lambda _: os.mkfifo(path)}
    plant[planted](victim)
    result = take_lock(path)
    assert result.returncode == 2 and result.stdout == "", result.stderr
    assert result.stderr.startswith(f"error: cannot use the GPU lock file {path}: ")
    assert len(result.stderr.splitlines()) == 1
    assert victim.read_text() == "someone's work\n" and victim.stat().st_mode & 0o777 == 0o600


def test_a_lock_file_left_by_an_earlier_job_is_reused(tmp_path):
    path = tmp_path / "gpu.lock"
    assert take_lock(path).returncode == 0
    result = take_lock(path)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr
    assert path.read_text() == ""  # the holder's line goes with the holder


def make_run(tmp_path, status="running", pid=None, val_losses=(1.0, 0.8, 0.7), linger=0.0):
    """A run directory as a run leaves it; its command writes its arguments to `marker`."""
    run_dir = tmp_path / "output" / "baseline_20260101_120000"
    (run_dir / "checkpoints").mkdir(parents=True)
    (run_dir / "config.json").write_text(json.dumps({"name": "baseline", "patience": 10}))
    marker = tmp_path / "restarted"
    script = f"import sys, time; open({str(marker)!r}, 'w').write(' '.join(sys.argv)); time.sleep({linger})"
    run = {
        "status": status,
        "pid": pid or os.getpid(),
        "host": socket.gethostname(),
        "command": [sys.executable, "-c", script],
        "cwd": str(tmp_path),
        "history": [],
    }
    (run_dir / "run.json").write_text(json.dumps(run))
    for epoch, loss in enumerate(val_losses):
        append_jsonl(run_dir / "metrics.jsonl", {"epoch": epoch, "val_loss": loss})
    torch.save({"epoch": len(val_losses) - 1, "state_dict": {}}, run_dir / "checkpoints" / "last.ckpt")
    return run_dir, marker


def babysitter(tmp_path, run_dir, **overrides):
    defaults = {
        "stall_minutes": 30.0,
        "monitor": "val_loss",
        "log_dir": str(tmp_path / "logs"),
        "restart": False,
    }
    return babysit.Babysitter(run_dir, SimpleNamespace(max_restarts=3, **{**defaults, **overrides}))


def dead_pid():
    finished = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    return int(finished.stdout)


def wait_for(path, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not (path.exists() and path.read_text()):
        time.sleep(0.1)
    return path.read_text() if path.exists() else ""


# OPS-3: the babysitter writes what it finds to logs/.
def test_babysitter_reports_a_healthy_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    run_dir, _ = make_run(tmp_path)
    findings = babysitter(tmp_path, run_dir).check()
    assert [f.check for f in findings] == ["process", "hung", "metrics", "system", "checkpoint"]
    assert all(f.level == "OK" for f in findings), findings
    log = (tmp_path / "logs" / f"babysit_{run_dir.name}.log").read_text()
    assert "val_loss 0.7" in log and "last.ckpt loads (epoch 2" in log
    assert not (tmp_path / "issues").exists()


# OPS-3: early stopping ends a run on a plateau; only a run still training is warned of one.
def test_babysitter_warns_of_a_plateau_only_while_the_run_trains(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    plateau = (0.7, 0.8, 0.9, 1.0, 1.1, 1.2)  # best 5 validations ago, patience 10
    run_dir, _ = make_run(tmp_path, val_losses=plateau)
    assert babysitter(tmp_path, run_dir).check()[2].level == "WARN"
    record = json.loads((run_dir / "run.json").read_text())
    (run_dir / "run.json").write_text(json.dumps({**record, "status": "finished"}))
    findings = babysitter(tmp_path, run_dir).check()
    assert all(f.level == "OK" for f in findings), findings
    (metrics,) = [finding for finding in findings if finding.check == "metrics"]
    assert metrics.message.startswith("val_loss 1.2 (best 0.7, 5 validation(s) ago")


# OPS-3: a metric trend is judged in the metric's own direction.
def test_babysitter_reads_a_reward_as_higher_is_better(tmp_path):
    path = tmp_path / "metrics.jsonl"
    rewards = [10.0, 50.0, 200.0, 480.0, 100.0, 100.0]
    append_jsonl(
        path, *({"event": "metrics", "epoch": e, "val_episode_reward": r} for e, r in enumerate(rewards[:4]))
    )
    assert babysit.check_metrics(tmp_path, "val_episode_reward", patience=4).level == "OK"
    append_jsonl(
        path,
        *({"event": "metrics", "epoch": 4 + e, "val_episode_reward": r} for e, r in enumerate(rewards[4:])),
    )
    finding = babysit.check_metrics(tmp_path, "val_episode_reward", patience=4)
    assert finding.level == "WARN" and "best 480" in finding.message


@pytest.mark.parametrize(
    ("metric", "higher"),
    [
        ("val_episode_reward", True),
        ("val_acc", True),
        ("val_loss", False),
        *[(f"val_{name}", True) for name in ("auc", "aucpr", "map", "map@3", "ndcg@5", "pre@2")],
        # The test's scores (src/predictions.py), which a comparison bolds at their best.
        *[(f"test_{name}", True) for name in ("accuracy", "balanced_accuracy", "f1_macro", "roc_auc_ovr")],
        *[(f"test_{name}", True) for name in ("r2", "r2_height")],
        *[(f"test_{name}", False) for name in ("rmse_acc", "log_loss", "mae_height")],  # a label named acc
        *[(f"val_{name}", False) for name in ("mape", "rmse", "mae", "logloss", "mlogloss", "error")],
        ("mape", False),  # a bare XGBoost eval_metric
    ],
)
def test_a_metric_is_read_in_its_own_direction(metric, higher):  # CB-1, OPS-3
    # As XGBoost's own early stopping reads them: mape is an error, though it starts as map does.
    assert higher_is_better(metric) is higher


# OPS-3: a tree run that leaves its metric to the task is watched on what it early-stops on.
def test_babysitter_watches_the_metric_a_run_tracks_where_its_config_leaves_it_to_the_task(tmp_path):
    run_dir, _ = make_run(tmp_path)
    (run_dir / "config.json").write_text(json.dumps({"name": "baseline", "eval_metric": ""}))
    tracked = {"tracking/best_round": 0, "tracking/best_val_mlogloss": 0.9}  # the round is no metric
    append_jsonl(run_dir / "metrics.jsonl", {"round": 0, "val_mlogloss": 0.9, **tracked})
    metrics = babysitter(tmp_path, run_dir, monitor=None).check()[2]
    assert metrics.check == "metrics" and metrics.message.startswith("val_mlogloss 0.9 (best 0.9")


# OPS-3 restarts from the checkpoint; OPS-4 records the problem under issues/.
def test_babysitter_restarts_a_killed_run_once_and_files_an_issue(tmp_path, monkeypatch, webhook):
    monkeypatch.chdir(tmp_path)
    run_dir, marker = make_run(tmp_path, pid=dead_pid(), linger=5)
    config = json.loads((run_dir / "config.json").read_text())
    (run_dir / "config.json").write_text(json.dumps({**config, "alerts": {"webhook_url": webhook.url}}))
    record = json.loads((run_dir / "run.json").read_text())
    resumed = [*record["command"], "--resume", "x"]  # a run an earlier restart resumed
    (run_dir / "run.json").write_text(json.dumps({**record, "command": resumed}))
    sitter = babysitter(tmp_path, run_dir, restart=True)
    findings = sitter.check()
    assert findings[0].level == "FAIL" and "never finished" in findings[0].message
    restarted = wait_for(marker)
    assert restarted.endswith(f"--resume {run_dir.resolve()}") and restarted.count("--resume") == 1
    # The restarted job has not taken over run.json yet (queued on the GPU lock, say).
    assert sitter.check()[0].message.startswith("restarted as pid")
    assert len(json.loads(sitter.state_path.read_text())["restarts"]) == 1
    (issue,) = (tmp_path / "issues").glob("*.md")
    text = issue.read_text()
    assert 'type: "crash"' in text and 'status: "open"' in text and "last.ckpt" in text
    # A killed run cannot raise its alert: the babysitter does, once, as the run's config says.
    deadline = time.monotonic() + 10
    while not webhook.received and time.monotonic() < deadline:
        time.sleep(0.1)
    ((kind, text),) = [(post["kind"], post["text"]) for post in webhook.received]
    assert kind == "killed" and "never finished (killed?)" in text


def test_a_monitor_the_run_never_logs_is_named_with_those_it_does(tmp_path):  # OPS-3
    run_dir, _ = make_run(tmp_path)  # it logs val_loss
    finding = babysit.check_metrics(run_dir, "val_los", patience=10)
    assert (finding.level, finding.message) == ("WARN", "the run logs no val_los; it logs val_loss")
    assert babysit.check_metrics(make_run(tmp_path / "new", val_losses=())[0], "val_los", 10).level == "OK"


def test_a_run_before_its_first_validation_is_not_said_to_log_its_config_fields(tmp_path):  # OPS-3
    # The start-of-run line holds the config, val_fraction among it: no metric the run logs.
    run_dir, _ = make_run(tmp_path, val_losses=())
    append_jsonl(
        run_dir / "metrics.jsonl", {"event": "hyperparams", "val_fraction": 0.15, "val_every_n_steps": 0}
    )
    finding = babysit.check_metrics(run_dir, "val_loss", patience=10)
    assert (finding.level, finding.message) == ("OK", "no val_loss yet")


@pytest.mark.parametrize("checkpointed", [True, False])
def test_a_failed_run_is_told_to_resume_only_if_it_can(tmp_path, checkpointed):  # OPS-3
    # A table refused before training leaves no checkpoint: --resume then says "start afresh".
    run_dir, _ = make_run(tmp_path, status="failed")
    if not checkpointed:
        (run_dir / "checkpoints" / "last.ckpt").unlink()
    finding = babysit.check_process(run_dir, json.loads((run_dir / "run.json").read_text()), None)
    advice = "(fix it, then --resume)" if checkpointed else "(nothing to resume: fix it, then start afresh)"
    assert finding.level == "FAIL" and finding.message.endswith(advice), finding


def test_babysitter_checks_the_checkpoint_a_resume_would_take(tmp_path, monkeypatch):  # OPS-3, RES-1
    # Killed between writing best.ckpt and last.ckpt: best.ckpt is what --resume continues from.
    monkeypatch.chdir(tmp_path)
    run_dir, _ = make_run(tmp_path)
    (run_dir / "checkpoints" / "last.ckpt").rename(run_dir / "checkpoints" / "best.ckpt")
    findings = {f.check: f for f in babysitter(tmp_path, run_dir).check()}
    assert findings["checkpoint"].message.startswith("best.ckpt loads (epoch 2"), findings["checkpoint"]


def test_a_stall_shorter_than_a_minute_says_how_long(tmp_path):  # OPS-3
    run_dir, _ = make_run(tmp_path)
    half_a_minute_ago = time.time() - 30
    for path in run_dir.rglob("*"):
        os.utime(path, (half_a_minute_ago, half_a_minute_ago))
    finding = babysit.check_hung(run_dir, stall_minutes=0.2)
    assert finding.level == "FAIL" and re.fullmatch(r"no output for 0\.[5-9] min", finding.message)


def test_a_run_folder_no_one_may_make_is_one_line(tmp_path):  # OUT-1
    # /proc: root's access() says yes, and only making the folder says no.
    with pytest.raises(WriteFailed, match=r"^cannot make /proc/no_such/smoke_\d{8}_\d{6}: "):
        create_run_dir(Path("/proc/no_such"), "smoke")


def test_a_babysitter_that_cannot_file_its_issue_still_restarts_the_run(tmp_path, monkeypatch):  # OPS-3
    monkeypatch.chdir(tmp_path)
    (tmp_path / "issues").write_text("a file where the records' folder would be")  # or a full disk
    run_dir, marker = make_run(tmp_path, pid=dead_pid(), linger=5)
    sitter = babysitter(tmp_path, run_dir, restart=True)
    assert sitter.check()[0].level == "FAIL"
    assert wait_for(marker).endswith(f"--resume {run_dir.resolve()}")
    log = sitter.log_path.read_text()
    assert f"WARN issue      not recorded: cannot write {tmp_path / 'issues'}" in log


def test_a_restart_that_ends_before_it_takes_the_run_over_is_a_failure_not_repeated(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # OPS-3: a missing module, a refused flag would fail every restart
    run_dir, _ = make_run(tmp_path, pid=dead_pid())
    record = json.loads((run_dir / "run.json").read_text())
    record["command"] = [sys.executable, "-c", "raise SystemExit('No module named part2')"]
    (run_dir / "run.json").write_text(json.dumps(record))
    sitter = babysitter(tmp_path, run_dir, restart=True)
    assert sitter.check()[0].restartable
    (restart,) = json.loads(sitter.state_path.read_text())["restarts"]
    deadline = time.monotonic() + 60
    while psutil.pid_exists(restart["pid"]) and time.monotonic() < deadline:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(restart["pid"], os.WNOHANG)  # the babysitter's child: reaped as it ends
        time.sleep(0.1)
    process = sitter.check()[0]
    assert process.level == "FAIL" and not process.restartable
    said = f"ended before it took the run over: see {restart['output']}; not restarted again"
    assert process.message.endswith(said) and sitter.gave_up
    assert len(json.loads(sitter.state_path.read_text())["restarts"]) == 1
    filed = sorted(path.read_text() for path in (tmp_path / "issues").glob("*.md"))
    assert len(filed) == 2 and any("ended before it took the run over" in text for text in filed)


def test_babysitter_knows_a_killed_run_whose_pid_another_process_now_has(tmp_path, monkeypatch):  # OPS-3
    monkeypatch.chdir(tmp_path)
    run_dir, _ = make_run(tmp_path, pid=os.getpid())  # a live process, and not the run's
    (run_dir / TRAINING_LOCK).touch()  # the run's lock, which nothing holds since it was killed
    process = babysitter(tmp_path, run_dir).check()[0]
    assert process.level == "FAIL" and "never finished" in process.message and process.restartable
    with open(run_dir / TRAINING_LOCK) as held:  # while a process holds it, the run trains
        fcntl.flock(held, fcntl.LOCK_EX)
        assert babysitter(tmp_path, run_dir).check()[0].message == f"running as pid {os.getpid()}"


@pytest.mark.parametrize("status", ["failed", "interrupted"])
def test_babysitter_does_not_restart_a_run_that_ended_on_purpose_or_with_an_error(
    tmp_path, monkeypatch, status
):
    monkeypatch.chdir(tmp_path)
    run_dir, marker = make_run(tmp_path, status=status, pid=dead_pid())
    findings = babysitter(tmp_path, run_dir, restart=True).check()
    assert findings[0].level == ("FAIL" if status == "failed" else "WARN")
    log = (tmp_path / "logs" / f"babysit_{run_dir.name}.log").read_text()
    assert not marker.exists() and "ACT  restart" not in log


@pytest.mark.parametrize(
    ("breakage", "check"),
    [
        (lambda run_dir: (run_dir / "checkpoints" / "last.ckpt").write_bytes(b"truncated"), "checkpoint"),
        (lambda run_dir: append_jsonl(run_dir / "metrics.jsonl", {"val_loss": float("nan")}), "metrics"),
        (lambda run_dir: [os.utime(run_dir / f, (0, 0)) for f in ("metrics.jsonl",)], "hung"),
    ],
)
# OPS-3: each check fails on the fault it exists for.
def test_babysitter_fails_what_is_broken(tmp_path, monkeypatch, breakage, check):
    monkeypatch.chdir(tmp_path)
    run_dir, _ = make_run(tmp_path)
    breakage(run_dir)
    findings = {f.check: f for f in babysitter(tmp_path, run_dir).check()}
    assert findings[check].level == "FAIL", findings[check]
    if check == "checkpoint":  # in the words a resume uses, not torch's
        assert findings[check].message == (
            "last.ckpt does not load: it is damaged (cut or overwritten: not the whole zip archive "
            "torch.save writes)"
        )


@pytest.mark.parametrize(
    ("damage", "args", "said"),
    [
        (lambda run_dir: (run_dir / "run.json").write_text(""), [], "its run.json cannot be read ("),
        (lambda run_dir: (run_dir / "run.json").write_text("[]"), [], "its run.json holds no JSON object"),
        (lambda run_dir: (run_dir / "config.json").unlink(), [], "its config.json cannot be read ("),
        (None, ["--every", "-5"], "--every -5.0: give a number from 0 up"),
        (None, ["--max-restarts", "-1"], "--max-restarts -1: give a number from 0 up"),
        (None, ["--stall-minutes", "-3"], "--stall-minutes -3.0: give a number of minutes above 0"),
        (None, ["--log-dir", "/proc/no/such/folder"], "--log-dir /proc/no/such/folder: "),
    ],
)
def test_babysitter_refuses_bad_input_in_one_line(tmp_path, monkeypatch, capsys, damage, args, said):  # OPS-3
    monkeypatch.chdir(tmp_path)
    run_dir, _ = make_run(tmp_path)
    if damage is not None:
        damage(run_dir)
    with pytest.raises(SystemExit) as exit_info:
        babysit.main([str(run_dir), *args])
    (line,) = capsys.readouterr().err.splitlines()
    assert exit_info.value.code == 2 and line.startswith("error: ") and said in line


def start_babysitter(run_dir, log_dir, *flags: str) -> subprocess.Popen:
    """A babysitter checking every 10 minutes, once its first checks are done."""
    command = [sys.executable, "-m", "src.ops.babysit", str(run_dir), "--every", "600", *flags]
    command += ["--log-dir", str(log_dir)]
    sitter = subprocess.Popen(command, cwd=ROOT, stderr=subprocess.PIPE, text=True)
    log, deadline = log_dir / f"babysit_{run_dir.name}.log", time.monotonic() + 600
    while " checkpoint " not in (log.read_text() if log.exists() else ""):
        if sitter.poll() is not None or time.monotonic() > deadline:
            sitter.kill()
            raise AssertionError(f"no check finished: {sitter.communicate()[1]}")
        time.sleep(0.1)
    return sitter


def test_ctrl_c_ends_a_babysitter_between_checks_quietly(tmp_path):  # OPS-3
    run_dir, _ = make_run(tmp_path)
    sitter = start_babysitter(run_dir, tmp_path / "logs")
    try:
        sitter.send_signal(signal.SIGINT)  # while it sleeps until the next
        assert sitter.wait(timeout=60) == 130 and "Traceback" not in sitter.stderr.read()
    finally:
        sitter.kill()


def test_a_second_babysitter_that_would_restart_the_same_run_is_refused(tmp_path, capsys):  # OPS-3
    run_dir, _ = make_run(tmp_path)
    log_dir = tmp_path / "logs"
    first = start_babysitter(run_dir, log_dir, "--restart")
    try:
        with pytest.raises(SystemExit) as exit_info:
            babysit.main([str(run_dir), "--restart", "--log-dir", str(log_dir)])
        assert exit_info.value.code == 2
        (line,) = capsys.readouterr().err.splitlines()
        assert line.startswith(f"error: another babysitter (pid {first.pid}) restarts {run_dir}")
        assert babysit.main([str(run_dir), "--log-dir", str(log_dir)]) == 3  # a check alone: still welcome
    finally:
        first.kill()
        first.wait()


def test_babysitter_exit_status_is_a_failure_wherever_a_check_failed(tmp_path, monkeypatch):  # OPS-3
    monkeypatch.chdir(tmp_path)
    run_dir, _ = make_run(tmp_path, status="finished")
    append_jsonl(run_dir / "metrics.jsonl", {"epoch": 3, "val_loss": "text where a number belongs"})
    assert babysit.main([str(run_dir)]) == 0
    (run_dir / "checkpoints" / "last.ckpt").write_bytes(b"cut short")  # after it finished: still a failure
    assert babysit.main([str(run_dir)]) == 1


# OPS-3: a tree checkpoint that crashes XGBoost as it loads is a finding, not the babysitter's end.
def test_babysitter_survives_a_tree_checkpoint_that_crashes_xgboost(tmp_path):
    xgb = pytest.importorskip("xgboost")
    run_dir, _ = make_run(tmp_path)
    (run_dir / "checkpoints" / "last.ckpt").unlink()
    rows = np.random.default_rng(0).normal(size=(64, 3))
    model = bytearray(xgb.train({}, xgb.DMatrix(rows, label=rows[:, 0]), num_boost_round=3).save_raw("ubj"))
    count = model.find(b"parents[$l#L") + len(b"parents[$l#L")  # an array's length, 8 bytes
    assert count > len(b"parents[$l#L")
    model[count + 4] = 0x61  # billions of items: XGBoost reads past the file's end
    (run_dir / "checkpoints" / "last.ubj").write_bytes(model)
    script = "import sys; from pathlib import Path; from src.ops import babysit; "
    script += "print(babysit.check_checkpoint(Path(sys.argv[1])))"
    command = [sys.executable, "-c", script, run_dir]
    checked = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr[-2000:]
    assert "level='FAIL'" in checked.stdout and "last.ubj does not load" in checked.stdout


# OPS-4: each record type has its own fields.
def test_records_carry_type_status_and_their_own_fields(tmp_path):
    experiment = records.new_experiment(tmp_path, "Wider MLP", hypothesis="width helps", configs="wide")
    issue = records.new_issue(tmp_path, "NaN loss", "divergence", run="output/x", metric="val_loss")
    assert 'hypothesis: "width helps"' in experiment.read_text()
    assert 'metric: "val_loss"' in issue.read_text() and 'epoch: ""' in issue.read_text()
    listed = {(r["type"], r["status"]) for r in records.list_records(tmp_path)}
    assert listed == {("experiment", "planned"), ("divergence", "open")}
    with pytest.raises(ValueError, match="valid types: crash"):
        records.new_issue(tmp_path, "x", "oops")


def test_records_written_at_once_each_keep_their_own_file(tmp_path):  # OPS-4
    script = "import sys; from pathlib import Path; from src.ops import records; "
    script += "records.new_experiment(Path(sys.argv[1]), 'race', hypothesis=sys.argv[2])"
    command = [sys.executable, "-c", script, str(tmp_path)]
    writers = [subprocess.Popen([*command, f"writer {n}"], cwd=ROOT) for n in range(6)]
    assert [writer.wait() for writer in writers] == [0] * 6
    written = sorted(path.read_text() for path in (tmp_path / "experiments").iterdir())
    assert len(written) == 6 and all(f'hypothesis: "writer {n}"' in "".join(written) for n in range(6))


def test_a_record_never_replaces_what_holds_its_name(tmp_path):  # OPS-4
    (tmp_path / "experiments").mkdir()
    taken = tmp_path / "experiments" / f"{date.today().isoformat()}-wider-mlp.md"
    taken.symlink_to(tmp_path / "someone's notes.md")  # a link to a file not written yet
    written = records.new_experiment(tmp_path, "Wider MLP")
    assert written.name.endswith("-wider-mlp-2.md") and taken.is_symlink()


def test_records_list_latin_1_and_refuse_a_file_for_their_folder(tmp_path, monkeypatch, capsys):  # OPS-4
    monkeypatch.chdir(tmp_path)
    records.new_experiment(tmp_path, "Wider MLP")
    (edited,) = (tmp_path / "experiments").glob("*.md")
    edited.write_bytes(edited.read_bytes().replace(b"# Wider MLP", "# Wider MLP, caf\xe9".encode("latin-1")))
    # An editor's lock link to a file that is gone, and a folder named as a record: no records.
    (tmp_path / "experiments" / ".#wider.md").symlink_to("nowhere@1234")
    (tmp_path / "experiments" / "drafts.md").mkdir()
    records.main(["list"])
    assert capsys.readouterr().out.split() == ["planned", "experiment", f"experiments/{edited.name}"]
    (tmp_path / "issues").write_text("not a folder")
    with pytest.raises(SystemExit) as exit_info:
        records.main(["issue", "Disk full", "--type", "infra"])
    (line,) = capsys.readouterr().err.splitlines()
    assert exit_info.value.code == 2 and line.startswith(f"error: cannot write {tmp_path / 'issues'}: ")


# OPS-4: records are written from the command line.
def test_records_command_line_fills_type_fields(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    records.main(
        ["issue", "NaN loss", "--type", "divergence", "--field", "metric=val_loss", "--field", "epoch=12"]
    )
    (issue,) = (tmp_path / "issues").glob("*.md")
    assert 'metric: "val_loss"' in issue.read_text() and 'epoch: "12"' in issue.read_text()
    with pytest.raises(SystemExit):
        records.main(["issue", "x", "--type", "divergence", "--field", "colour=red"])
    assert "NAME one of: metric, epoch, value" in capsys.readouterr().err
    twice = ["--field", "metric=a", "--field", "metric=b"]
    refused = {
        "--field metric is given twice; give each field once": ["issue", "x", "--type", "divergence", *twice],
        "TITLE is empty: give the record a title, which also names its file": ["experiment", " "],
    }
    for said, argv in refused.items():
        with pytest.raises(SystemExit) as exit_info:
            records.main(argv)
        assert (exit_info.value.code, capsys.readouterr().err) == (2, f"error: {said}\n")
    assert len(list(tmp_path.rglob("*.md"))) == 1  # the first issue alone


class Cycle:
    """An object that refers to itself: only the cycle collector frees it."""

    def __init__(self) -> None:
        self.itself = self


def test_a_run_keeps_the_collector_off_what_was_loaded_before_it(tmp_path):
    # A full pass over the loaded libraries takes about half a second on a CPU: the passes
    # during a run, and cleanup_vram()'s after it, walk only what the run made.
    cfg = BaseConfig(name="heap", wandb_mode="disabled", output=OutputConfig(base_dir=str(tmp_path)))
    with start_run(cfg):
        made = Cycle()
        collectable = weakref.ref(made)
        del made
        walked, left_alone = len(gc.get_objects()), gc.get_freeze_count()
    assert left_alone > 10 * walked  # torch, Lightning, pytest: far more than the run made
    gc.collect()
    assert collectable() is None  # what the run made is collected as ever


def test_an_interrupted_run_says_whether_there_is_anything_to_resume(tmp_path, capsys):  # RES-1
    output = OutputConfig(base_dir=str(tmp_path), report=False)
    cfg = BaseConfig(name="cut", wandb_mode="disabled", output=output)
    with pytest.raises(SystemExit), start_run(cfg):
        raise KeyboardInterrupt  # before its first checkpoint
    assert "it saved no checkpoint yet, so there is nothing to resume" in capsys.readouterr().err
    with pytest.raises(SystemExit), start_run(cfg) as run:
        (run.dir / "checkpoints").mkdir()
        (run.dir / "checkpoints" / "last.ckpt").write_bytes(b"weights")
        raise KeyboardInterrupt
    assert f"continue with --resume {run.dir}" in capsys.readouterr().err


# RES-1: a resume that fails loses nothing.
def test_a_failed_resume_gives_the_run_its_config_back(tmp_path):
    output = OutputConfig(base_dir=str(tmp_path))
    first = BaseConfig(name="resumed", seed=1, wandb_mode="disabled", output=output)
    with start_run(first) as run:
        checkpoint = run.dir / "checkpoints" / "last.ckpt"
        checkpoint.parent.mkdir()
        checkpoint.write_bytes(b"weights")
    saved = (run.dir / "config.json").read_text()
    with pytest.raises(RuntimeError, match="size mismatch"), start_run(replace(first, seed=2), checkpoint):
        raise RuntimeError("size mismatch")  # as loading a checkpoint into a different model does
    assert (run.dir / "config.json").read_text() == saved


@slow
# RES-1, OPS-3: SIGTERM and SIGHUP (a closed terminal) keep what was saved and tell the
# babysitter why the run ended.
@pytest.mark.parametrize(("signal_name", "exit_status"), [("SIGTERM", 143), ("SIGHUP", 129)])
def test_sigterm_and_sighup_unwind_the_run_and_record_it_as_interrupted(tmp_path, signal_name, exit_status):
    script = f"""
import dataclasses, os, signal, time
from src.config import BaseConfig
from src.runs.lifetime import start_run
cfg = BaseConfig(name="terminated", wandb_mode="disabled")
cfg = dataclasses.replace(cfg, output=dataclasses.replace(cfg.output, base_dir={str(tmp_path)!r}))
with start_run(cfg):
    os.kill(os.getpid(), signal.{signal_name})
    time.sleep(60)
"""
    started = time.monotonic()
    finished = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True)
    assert finished.returncode == exit_status, finished.stderr
    assert time.monotonic() - started < 30  # unwound at once, not after the sleep
    (run_dir,) = tmp_path.glob("terminated_*")
    record = json.loads((run_dir / "run.json").read_text())
    assert record["status"] == "interrupted" and "Terminated" in record["error"]
    assert "Terminated" in (run_dir / "console.log").read_text()
    # The signal's name, not the exception that carried it (Terminated(), SIGTERMException()).
    assert f"**interrupted** (signal: {signal_name})" in (run_dir / "report.md").read_text()


# Signals that come while a run writes its last files (run.json, the report): sent from
# inside the report writer, so they land there whatever the machine's speed.
SIGNALLED_DURING_REPORT = """
import dataclasses, os, signal, sys
from src.config import BaseConfig
from src.runs import lifetime
write_report = lifetime._write_report
def signalled_write_report(run_dir):
    for signum in (signal.SIGINT, signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        os.kill(os.getpid(), signum)
    write_report(run_dir)
lifetime._write_report = signalled_write_report
cfg = BaseConfig(name="signalled", wandb_mode="disabled")
cfg = dataclasses.replace(cfg, output=dataclasses.replace(cfg.output, base_dir=sys.argv[1]))
with lifetime.start_run(cfg):
    if sys.argv[2] == "interrupted":
        raise KeyboardInterrupt
"""


@pytest.mark.parametrize("ending", ["interrupted", "finished"])
def test_signals_while_the_report_is_written_wait_for_it(tmp_path, ending):
    command = [sys.executable, "-c", SIGNALLED_DURING_REPORT, str(tmp_path), ending]
    finished = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert finished.returncode == 130, finished.stderr  # 128 + SIGINT, the first to come
    assert "Traceback" not in finished.stderr
    assert finished.stderr.count("the run is saving its last files") == 1
    (run_dir,) = tmp_path.glob("signalled_*")
    assert json.loads((run_dir / "run.json").read_text())["status"] == ending
    assert (run_dir / "report.md").read_text().strip()


KILLED_BEFORE_ITS_FIRST_CHECKPOINT = """
import dataclasses, importlib, sys, time
from src.runs.lifetime import start_run
cfg = importlib.import_module(sys.argv[1] + ".config").CONFIGS["smoke"]()
output = dataclasses.replace(cfg.output, base_dir=sys.argv[2])
cfg = dataclasses.replace(cfg, wandb_mode="disabled", output=output)
with start_run(cfg):
    print("started", flush=True)
    time.sleep(120)
"""


# RES-1, OPS-3: a run killed before its first checkpoint is marked as such, not left "running".
def test_a_run_killed_before_its_first_checkpoint_is_marked_and_passed_over(tmp_path, capsys, monkeypatch):
    part = sorted(PARTS.values())[0]
    command = [sys.executable, "-c", KILLED_BEFORE_ITS_FIRST_CHECKPOINT, part, str(tmp_path)]
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert any(line == "started\n" for line in process.stdout)  # after start_run's own lines
    (run_dir,) = tmp_path.glob("smoke_*")
    assert not marked_if_never_checkpointed(run_dir)  # alive: it may yet write one
    process.kill()
    process.wait()
    assert json.loads((run_dir / "run.json").read_text())["status"] == "running"
    # as dead, but of a run named smoke_x: not one of this config's runs
    shutil.copytree(run_dir, tmp_path / "smoke_x_20260101_000000")

    configs = importlib.import_module(f"{part}.config").CONFIGS
    argv = ["--config", "smoke", "--resume", "auto", "--output.base-dir", str(tmp_path)]
    assert parse_cli(configs, argv)[1] is None  # a new run, not that one
    assert "passing over 1 run(s) that died before their first checkpoint" in capsys.readouterr().err
    assert json.loads((run_dir / "run.json").read_text())["status"] == "never_checkpointed"
    monkeypatch.chdir(tmp_path)  # the babysitter records the issue under the working directory
    (process_finding, *_) = babysitter(tmp_path, run_dir, restart=True).check()
    assert process_finding.level == "FAIL" and "died before its first checkpoint" in process_finding.message
    assert not process_finding.restartable
    (issue,) = (tmp_path / "issues").glob("*.md")
    assert "died before its first checkpoint" in issue.read_text()


# OPS-2: one command starts a run detached, with unbuffered output.
def test_detach_script_starts_an_unbuffered_background_job(tmp_path):
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


def detach(tmp_path, *args: str) -> subprocess.CompletedProcess:
    command = ["bash", str(ROOT / "scripts" / "detach.sh"), *args]
    return subprocess.run(
        command, cwd=tmp_path, capture_output=True, text=True, env={**os.environ, "PYTHON": sys.executable}
    )


def test_detach_names_the_runs_directory_it_started(tmp_path):  # OPS-2
    # A module that names its run directory as the parts' train commands do, then works on.
    announced = "print('run directory: output/part9/run_1', flush=True); import time; time.sleep(2)"
    (tmp_path / "named_run.py").write_text(announced + "\n")
    result = detach(tmp_path, "named_run")
    assert result.returncode == 0, result.stderr
    assert "stop after the epoch: touch output/part9/run_1/STOP" in result.stdout
    assert "python -m src.ops.babysit output/part9/run_1 --every 600 --restart" in result.stdout


@pytest.mark.parametrize("config_args", [["--config", "a/b c"], ["--config=a/b c"]])
def test_detach_names_the_log_safely_whatever_the_config_is_called(tmp_path, config_args):  # OPS-2
    result = detach(tmp_path, "json.tool", "--help", *config_args)
    assert result.returncode == 0, result.stderr
    (log,) = (tmp_path / "output").glob("json_tool_a_b_c_*.txt")
    assert f"(log: output/{log.name})" in result.stdout


def test_detach_never_writes_over_another_runs_log(tmp_path):  # OPS-2
    # Logs of the seconds the run may start in, as a run started a moment before left them.
    (tmp_path / "output").mkdir()
    now = time.time()
    stamps = [time.localtime(now + seconds) for seconds in range(60)]
    taken = [time.strftime("json_tool_baseline_%Y%m%d_%H%M%S.txt", stamp) for stamp in stamps]
    for name in taken:
        (tmp_path / "output" / name).write_text("another run's log\n")
    result = detach(tmp_path, "json.tool", "--help")
    assert result.returncode == 0, result.stderr
    assert {(tmp_path / "output" / name).read_text() for name in taken} == {"another run's log\n"}
    (log,) = [path for path in (tmp_path / "output").iterdir() if path.name not in taken]
    assert log.name.endswith("_2.txt") and f"(log: output/{log.name})" in result.stdout


def test_detach_says_when_the_run_cannot_start(tmp_path):  # OPS-2
    # The command line is checked once torch and the rest have loaded: seconds, not one.
    module = f"{next(iter(PARTS.values()))}.train"
    command = ["bash", str(ROOT / "scripts" / "detach.sh"), module, "--config", "smoke", "--seed=-1"]
    env = {**os.environ, "PYTHON": sys.executable, "PYTHONPATH": str(ROOT)}
    result = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, env=env)
    assert result.returncode == 2 and "started" not in result.stdout
    assert f"error: {module} ended at once with exit status 2" in result.stderr
    assert "seed -1: must be in 0 .. 2**32-1" in result.stderr  # the log's last lines


def test_detach_refuses_a_config_flag_without_a_name(tmp_path):
    result = detach(tmp_path, "json.tool", "--config")
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith("error: --config needs a config name") and "unbound" not in result.stderr
    assert not (tmp_path / "output").exists()


def test_torchrun_script_sets_the_cpu_threads_itself(tmp_path):  # DDP-1
    # torchrun prints a banner about OMP_NUM_THREADS on every launch where it is unset.
    python = tmp_path / "python"
    python.write_text('#!/bin/sh\necho "OMP_NUM_THREADS=$OMP_NUM_THREADS $*"\n')
    python.chmod(0o755)
    env = {key: value for key, value in os.environ.items() if key != "OMP_NUM_THREADS"}
    result = subprocess.run(
        ["bash", str(ROOT / "scripts" / "torchrun.sh"), "part1.train", "--config", "smoke"],
        capture_output=True,
        text=True,
        env={**env, "PYTHON": str(python), "NPROC": "2"},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(
        "OMP_NUM_THREADS=1 -m torch.distributed.run --standalone --nproc-per-node 2"
    )


def test_metrics_jsonl_stays_json_when_a_value_is_not_finite(tmp_path):  # OUT-4
    path = tmp_path / "metrics.jsonl"
    append_jsonl(
        path,
        {"loss": float("nan"), "grad": torch.tensor(float("inf")), "lr": [1.0, float("-inf")]},
        {"val": np.float64("nan"), "per_class": MappingProxyType({"a": np.float32("inf"), "b": (2.5,)})},
        {"step": 3, "val": np.float32(0.5), "tensor": torch.tensor([1.0, 2.0])},  # all finite
    )
    events = [
        json.loads(line, parse_constant=lambda name: pytest.fail(f"bare {name}"))
        for line in path.read_text().splitlines()
    ]
    assert (events[0]["loss"], events[0]["grad"], events[0]["lr"]) == (None, None, [1.0, None])
    assert (events[1]["val"], events[1]["per_class"]) == (None, {"a": None, "b": [2.5]})
    assert (events[2]["step"], events[2]["val"], events[2]["tensor"]) == (3, 0.5, [1.0, 2.0])
