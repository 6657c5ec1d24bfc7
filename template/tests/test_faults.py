"""Faults a real week of training meets, injected for real: a full disk, damaged
checkpoints, kill -9 after training or mid-epoch, Ctrl-C. Each test asserts what the
user sees: exit status, the one line printed, run.json's status and intact files."""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest
from conftest import PARTS, ROOT, as_flags, assert_ended, assert_report, noise_regression, part_module, slow

from src.cli import bad_input_message
from src.config import BaseConfig, ConfigError, OutputConfig
from src.report.run_files import RunFiles
from src.report.run_report import run_line
from src.runs.atomic import WriteFailed, write_text_atomic
from src.runs.checkpoint_checks import checkpoint_problem
from src.runs.directory import RUN_DIR_ENV, find_latest_run
from src.runs.lifetime import start_run
from src.runs.metrics_jsonl import drop_metrics_from_step, read_jsonl

# Flags that keep each kind of part training until a fault ends it (bounded by a
# wall-clock budget all the same).
TRAINS_ON = {
    "sl_neural": ["--num-epochs", "100000", "--patience", "100000"],
    "rl": ["--num-epochs", "100000", "--patience", "100000"],
    "sl_tree": [
        *("--num-boost-round", "1000000", "--early-stopping-rounds", "1000000"),
        *("--checkpoint-minutes", "0.0001"),
    ],
}
LIGHTNING_KINDS = sorted(kind for kind in PARTS if kind != "sl_tree")
# The Lightning part that takes the faults whose handling both Lightning parts share
# (src/runs/, src/training/): the neural part, or the RL part where it is alone. An RL run
# costs more than a neural one.
THOROUGH = "sl_neural" if "sl_neural" in PARTS else "rl"
# That part and the tree part, which has run code of its own.
EACH_ENGINE = sorted({THOROUGH, "sl_tree"} & set(PARTS)) or sorted(PARTS)


def command(kind: str, base_dir: Path, *args: str) -> list[str]:
    """A smoke run without W&B and, but where a test passes --output.report, without its report."""
    smoke = ["--config", "smoke", "--wandb-mode", "disabled", "--output.no-report"]
    return [sys.executable, "-m", f"{PARTS[kind]}.train", *smoke, "--output.base-dir", str(base_dir), *args]


def train(kind: str, base_dir: Path, *args: str) -> subprocess.CompletedProcess:
    finished = subprocess.run(
        command(kind, base_dir, *args), cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    return finished


def start(kind: str, base_dir: Path, *args: str) -> subprocess.Popen:
    """A training process in a session of its own, as a terminal job is: Ctrl-C goes
    to its whole process group, data-loader and environment workers included."""
    return subprocess.Popen(
        command(kind, base_dir, *args),
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def wait_until(condition, process: subprocess.Popen, timeout: float = 300.0) -> bool:
    """Poll `condition` until it holds (True) or the process ends first (False)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        if process.poll() is not None:
            return bool(condition())
        time.sleep(0.005)
    raise TimeoutError("the training process neither reached the state nor ended")


def run_dir_in(base_dir: Path) -> Path:
    (run_dir,) = [path for path in base_dir.iterdir() if (path / "config.json").is_file()]
    return run_dir


def status(run_dir: Path) -> dict:
    return json.loads((run_dir / "run.json").read_text())


def last_checkpoint(base_dir: Path) -> Path | None:
    found = list(base_dir.glob("*/checkpoints/last.*"))
    return found[0] if found else None


def partial_files(base_dir: Path) -> list[Path]:
    return [path for path in base_dir.rglob("*") if ".partial" in path.name]


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("error:")]


# A full disk (RES-1, OUT-2): the run stops with one line naming the file, run.json says
# "failed", every checkpoint stays loadable, and once there is room it resumes.


@pytest.fixture
def small_disk(tmp_path):
    """A 64 MB tmpfs: a disk that can really fill up. Needs root (mount). Room for a
    minute of the tree part's fastest checkpoints, so that the test, not the run, fills it."""
    mountpoint = tmp_path / "disk"
    mountpoint.mkdir()
    mount = ["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(mountpoint)]
    mounted = subprocess.run(mount, capture_output=True, check=False)
    if mounted.returncode != 0:
        pytest.skip("mounting a tmpfs needs root")
    yield mountpoint
    subprocess.run(["umount", "-l", str(mountpoint)], check=False)


def fill(disk: Path) -> Path:
    ballast = disk / "ballast"
    with contextlib.suppress(OSError), open(ballast, "wb") as file:
        while True:
            file.write(b"\0" * 65536)
            file.flush()
    return ballast


@slow
@pytest.mark.parametrize("kind", EACH_ENGINE)
def test_a_full_disk_fails_the_run_clearly_and_keeps_its_checkpoints(kind, small_disk):
    base_dir = small_disk / "out"
    process = start(kind, base_dir, *TRAINS_ON[kind], "--max-wall-clock-hours", "0.05")
    assert wait_until(lambda: last_checkpoint(base_dir) is not None, process)
    ballast = fill(small_disk)
    _, stderr = process.communicate(timeout=600)

    assert process.returncode == 2, stderr[-2000:]
    assert "Traceback" not in stderr
    (line,) = error_lines(stderr)
    assert "cannot write" in line and "No space left on device" in line and "free there" in line
    run_dir = run_dir_in(base_dir)
    assert status(run_dir)["status"] == "failed"
    for checkpoint in (run_dir / "checkpoints").iterdir():
        assert checkpoint_problem(checkpoint) is None, checkpoint
    assert partial_files(base_dir) == []

    ballast.unlink()
    resumed = train(kind, base_dir, "--resume", "auto", "--max-wall-clock-hours", "0.0003")
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert status(run_dir)["status"] == "finished"


def test_a_run_that_fails_as_it_starts_leaves_the_next_one_its_own_directory(small_disk):
    # A sweep runs its trials in one process (SWP-2): the next trial, once there is room
    # again, starts a directory of its own, not the failed trial's.
    output = OutputConfig(base_dir=str(small_disk / "out"))
    cfg = BaseConfig(name="trial", wandb_mode="disabled", output=output)
    ballast = fill(small_disk)
    with pytest.raises(WriteFailed, match=r"config\.json"), start_run(cfg):
        pass
    assert RUN_DIR_ENV not in os.environ
    (failed,) = (small_disk / "out").iterdir()
    ballast.unlink()
    with start_run(cfg) as run:
        assert run.dir != failed
    assert RUN_DIR_ENV not in os.environ


def test_a_disk_remounted_read_only_is_one_write_error_naming_the_file(small_disk):
    subprocess.run(["mount", "-o", "remount,ro", str(small_disk)], check=True)
    with pytest.raises(WriteFailed, match=r"cannot write .*run\.json: Read-only file system"):
        write_text_atomic(small_disk / "run.json", "{}\n")


def test_a_checkpoint_that_finds_the_disk_full_is_one_write_error_naming_it(small_disk):
    # torch's writer turned the file's OSError into RuntimeError("... unexpected pos ...").
    torch = pytest.importorskip("torch")
    save_torch = pytest.importorskip("src.training.checkpoints", reason="no Lightning part").save_torch
    ballast = fill(small_disk)
    os.truncate(ballast, ballast.stat().st_size - 100 * 1024)  # room for a part of it
    with pytest.raises(WriteFailed, match=r"cannot write .*last\.ckpt: No space left on device"):
        save_torch({"state_dict": {"weight": torch.zeros(100_000)}}, small_disk / "last.ckpt")
    assert sorted(path.name for path in small_disk.iterdir()) == ["ballast"]


def test_a_full_disk_that_a_librarys_own_write_meets_is_one_line(tmp_path):
    # Lightning's profiler and CSV logger write their files themselves.
    full = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(tmp_path / "test-profile.txt"))
    said = bad_input_message(full)
    assert re.fullmatch(
        rf"cannot write {tmp_path}/test-profile\.txt: No space left on device \(.+ free there\)", said
    )
    assert bad_input_message(OSError(errno.EIO, "Input/output error")) is None  # the disk's fault


def test_a_damaged_metrics_jsonl_keeps_its_good_lines_for_a_resume(tmp_path):  # OUT-4, RES-1
    path = tmp_path / "metrics.jsonl"
    good = [{"event": "metrics", "step": step, "loss": 1.0} for step in range(4)]
    lines = [json.dumps(line).encode() for line in good]
    damage = [b"\xff\xfe", b"[1]", b'{"event": "metrics", "step": "x"}', b'{"event": "metr']
    path.write_bytes(b"\n".join([*lines[:2], *damage, *lines[2:]]) + b"\n")
    assert [line.get("step") for line in read_jsonl(path)] == [0, 1, "x", 2, 3]
    drop_metrics_from_step(path, 2)  # as a run resumed from step 2 does
    assert read_jsonl(path) == good[:2]


# Damaged checkpoints and run files (RES-1): reported by name, never loaded into a
# traceback or a crash; a run directory falls back to its newest intact checkpoint.


@pytest.fixture
def copied_run(smoke_runs, tmp_path):
    """A copy of the session's smoke run of a kind, as if killed while running."""

    def copy(kind: str) -> Path:
        run_dir, _ = smoke_runs(kind)
        copy_dir = tmp_path / kind / run_dir.name
        shutil.copytree(run_dir, copy_dir)
        record = status(copy_dir)
        record.update(status="running", training_ended=False)
        (copy_dir / "run.json").write_text(json.dumps(record))
        return copy_dir

    return copy


def damage(path: Path, how: str) -> None:
    size = path.stat().st_size
    if how == "truncated":
        with open(path, "r+b") as file:
            file.truncate(size // 2)
    elif how == "zeroed":
        path.write_bytes(b"\0" * size)
    else:
        path.write_bytes(b"")


WRITES_AND_WAITS = """
import sys, time
from pathlib import Path
from src.runs.atomic import atomic_path
with atomic_path(Path(sys.argv[1])) as temporary:
    temporary.write_bytes(b"half a checkpoint")
    print("writing", flush=True)
    time.sleep(120)
"""


# RES-1: a writer killed in the middle of a write leaves its temporary file; the next
# write of that file removes it, and never a live writer's.
def test_a_temporary_file_left_by_a_killed_writer_goes_with_the_next_write(tmp_path):
    target = tmp_path / "last.ckpt"

    def writer() -> subprocess.Popen:
        command = [sys.executable, "-c", WRITES_AND_WAITS, str(target)]
        process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, text=True)
        assert process.stdout.readline() == "writing\n"
        return process

    killed, alive = writer(), writer()
    killed.kill()
    killed.wait()
    assert len(partial_files(tmp_path)) == 2
    write_text_atomic(target, "whole")
    assert target.read_text() == "whole"
    (left,) = partial_files(tmp_path)  # the live writer's
    assert str(alive.pid) in left.name
    alive.kill()
    alive.wait()


# Every damage on the neural part (the RL part where it is alone), one on the other:
# telling a damaged file is shared code (src/runs/checkpoint_checks.py).
DAMAGES = [
    (kind, how)
    for kind in LIGHTNING_KINDS
    for how in (["truncated", "zeroed", "empty"] if kind == THOROUGH else ["truncated"])
]


@slow
@pytest.mark.parametrize(("kind", "how"), DAMAGES)
def test_a_damaged_last_checkpoint_falls_back_to_best(kind, how, copied_run):
    run_dir = copied_run(kind)
    damage(run_dir / "checkpoints" / "last.ckpt", how)
    resumed = train(kind, run_dir.parent, "--resume", "auto")
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert "Traceback" not in resumed.stderr
    assert f"warning: checkpoints/last.ckpt is {'empty' if how == 'empty' else 'damaged'}" in resumed.stderr
    assert "resuming from checkpoints/best.ckpt instead" in resumed.stderr
    assert status(run_dir)["history"][-1]["resumed_from"].endswith("best.ckpt")


@slow
@pytest.mark.parametrize("kind", [THOROUGH])
def test_a_damaged_best_checkpoint_is_not_tested(kind, copied_run):
    """Killed during its final test, with best.ckpt left cut: the resumed run tests
    last.ckpt and says so; with last.ckpt damaged too, one line."""
    run_dir = copied_run(kind)
    record = status(run_dir)
    (run_dir / "run.json").write_text(json.dumps({**record, "training_ended": True}))
    damage(run_dir / "checkpoints" / "best.ckpt", "truncated")
    resumed = train(kind, run_dir.parent, "--resume", str(run_dir / "checkpoints" / "last.ckpt"))
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert "Traceback" not in resumed.stderr
    assert "warning: best.ckpt is damaged" in resumed.stderr and "testing last.ckpt instead" in resumed.stderr
    assert status(run_dir)["status"] == "finished"
    assert checkpoint_problem(run_dir / "model.pt") is None

    record = {**status(run_dir), "training_ended": True, "status": "running"}
    (run_dir / "run.json").write_text(json.dumps(record))
    shutil.copy(run_dir / "checkpoints" / "last.ckpt", run_dir / "resume.ckpt")
    damage(run_dir / "checkpoints" / "last.ckpt", "truncated")
    resumed = train(kind, run_dir.parent, "--resume", str(run_dir / "resume.ckpt"))
    assert resumed.returncode == 2 and "Traceback" not in resumed.stderr
    (line,) = error_lines(resumed.stderr)
    assert "best.ckpt is damaged" in line and "no other intact checkpoint" in line


@slow
@pytest.mark.parametrize("kind", EACH_ENGINE)
def test_a_run_with_no_intact_checkpoint_is_one_line(kind, copied_run):
    run_dir = copied_run(kind)
    for checkpoint in (run_dir / "checkpoints").iterdir():
        damage(checkpoint, "truncated")
    resumed = train(kind, run_dir.parent, "--resume", str(run_dir))
    assert resumed.returncode == 2 and "Traceback" not in resumed.stderr
    (line,) = error_lines(resumed.stderr)
    assert "no intact checkpoint" in line and "last." in line
    assert status(run_dir)["status"] == "running"  # nothing started, nothing changed


@pytest.mark.parametrize("kind", sorted(PARTS))
def test_a_cut_model_file_is_reported_never_loaded(kind, smoke_runs, tmp_path):
    """Damage at any length: XGBoost crashes the process (a segfault) on some cut
    .ubj files, so the check must survive every one of them."""
    run_dir, _ = smoke_runs(kind)
    original = next((run_dir / "checkpoints").glob("last.*")).read_bytes()
    for fraction in (0.1, 0.3, 0.5, 0.7, 0.9, 0.99):
        cut = tmp_path / f"cut{fraction}{'.ubj' if kind == 'sl_tree' else '.ckpt'}"
        cut.write_bytes(original[: int(len(original) * fraction)])
        assert checkpoint_problem(cut) is not None, fraction
        cut.write_bytes(original[int(len(original) * fraction) :])  # its start lost instead
        problem = checkpoint_problem(cut)
        assert problem is not None and "Errno" not in problem, (fraction, problem)


@slow
@pytest.mark.parametrize("kind", EACH_ENGINE)
def test_a_damaged_config_or_another_parts_run_is_one_line(kind, copied_run):
    run_dir = copied_run(kind)
    others = [other for other in sorted(PARTS) if other != kind]
    if others:
        other_run = copied_run(others[0])
        resumed = train(kind, run_dir.parent, "--resume", str(other_run))
        assert resumed.returncode == 2 and "Traceback" not in resumed.stderr
        (line,) = error_lines(resumed.stderr)
        part = PARTS[others[0]]
        assert line.endswith(f"that is a run of {part}; resume it with python -m {part}.train")
    (run_dir / "config.json").write_text('{"name": ')
    resumed = train(kind, run_dir.parent, "--resume", str(run_dir))
    assert resumed.returncode == 2 and "Traceback" not in resumed.stderr
    (line,) = error_lines(resumed.stderr)
    assert str(run_dir / "config.json") in line


@slow
@pytest.mark.parametrize("kind", LIGHTNING_KINDS)
def test_a_resume_that_would_change_the_model_or_a_field_type_is_one_line(kind, copied_run):  # RES-1, CFG-2
    run_dir = copied_run(kind)
    saved = (run_dir / "config.json").read_text()
    resumed = train(kind, run_dir.parent, "--resume", str(run_dir), "--hidden-sizes", "7")
    assert resumed.returncode == 2 and "Traceback" not in resumed.stderr
    (line,) = error_lines(resumed.stderr)
    assert "the checkpoint does not fit the model this config builds (" in line
    assert (run_dir / "config.json").read_text() == saved  # nothing lost: --resume works again

    (run_dir / "config.json").write_text(json.dumps({**json.loads(saved), "batch_size": "lots"}))
    resumed = train(kind, run_dir.parent, "--resume", str(run_dir))
    assert resumed.returncode == 2 and "Traceback" not in resumed.stderr
    (line,) = error_lines(resumed.stderr)
    assert 'batch_size "lots": not an int' in line


@slow
@pytest.mark.parametrize("kind", LIGHTNING_KINDS)
def test_a_budget_spent_before_the_first_validation_is_one_line(kind, tmp_path):
    # No validation ran, so no checkpoint was chosen for the test: the budget was too short.
    result = train(kind, tmp_path, "--max-wall-clock-hours", "1e-12")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    (line,) = error_lines(result.stderr)
    assert "stopped before its first validation" in line and "max_wall_clock_hours" in line
    assert status(run_dir_in(tmp_path))["status"] == "failed"
    assert not (run_dir_in(tmp_path) / "report.md").exists()  # --output.no-report, on a failed run too


# A checkpoint taken after an epoch's last batch and before its validation (SLURM's
# SIGUSR1 can land there): the process saves it and dies at exactly that point.
CUT_BEFORE_VALIDATION = """
import os, sys
import lightning as L
from src.training import trainer as trainer_module


class SaveBeforeValidation(L.Callback):
    def on_train_batch_end(self, trainer, *args):
        if trainer.current_epoch == 1 and trainer.is_last_batch:
            trainer.save_checkpoint(os.path.join(os.environ["TRAIN_RUN_DIR"], "before_validation.ckpt"))
            os._exit(9)


build = trainer_module.build_trainer
trainer_module.build_trainer = lambda *args, extra_callbacks=(), **kwargs: build(
    *args, extra_callbacks=[*extra_callbacks, SaveBeforeValidation()], **kwargs
)
__import__(sys.argv.pop(1) + ".train", fromlist=["main"]).main()
"""


@slow
@pytest.mark.parametrize("kind", LIGHTNING_KINDS)
def test_a_run_resumed_from_before_an_epochs_validation_trains_on(kind, tmp_path):  # RES-1, CB-1
    flags = ["--num-epochs", "3", "--patience", "100"]
    script = [sys.executable, "-c", CUT_BEFORE_VALIDATION, PARTS[kind], *command(kind, tmp_path, *flags)[3:]]
    cut = subprocess.run(script, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert cut.returncode == 9, cut.stderr[-2000:]
    run_dir = run_dir_in(tmp_path)
    resumed = train(kind, tmp_path, *flags, "--resume", str(run_dir / "before_validation.ckpt"))
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert "Traceback" not in resumed.stderr
    assert status(run_dir)["status"] == "finished"


# kill -9 after training ended, during the test or the final save (RES-1): the resumed
# run tests and saves, and trains no further.


@slow
@pytest.mark.parametrize("kind", sorted(PARTS))
def test_a_run_killed_after_training_resumes_without_training_more(kind, tmp_path):
    for attempt in range(3):
        base_dir = tmp_path / f"attempt{attempt}"
        process = start(kind, base_dir, "--max-wall-clock-hours", "0.0005")

        reached = wait_until(lambda base_dir=base_dir: training_ended(base_dir), process)
        if process.poll() is None:
            os.kill(process.pid, signal.SIGKILL)
            process.wait()
            break
        assert reached, process.stderr.read()[-2000:]  # ended before the kill: try again
    else:
        pytest.skip("training ended and the run finished before it could be killed, three times")
    run_dir = run_dir_in(base_dir)
    assert status(run_dir)["status"] == "running"
    stopped = status(run_dir)["training_ended"]  # why training stopped, recorded before the kill
    trained = trained_so_far(kind, run_dir)

    resumed = train(kind, base_dir, "--resume", "auto")
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert status(run_dir)["status"] == "finished"
    first, second = status(run_dir)["history"]  # each session's command: the run's own flags kept
    assert "--max-wall-clock-hours" in first["command"] and "--resume" in second["command"]
    # The session that only tested and saved ends saying why the training stopped.
    assert stopped["end_reason"] in ("budget", "patience", "target")
    assert {key: status(run_dir)[key] for key in stopped} == stopped
    assert trained_so_far(kind, run_dir) == trained
    model = next(path for path in run_dir.iterdir() if path.stem == "model")
    assert checkpoint_problem(model) is None
    assert not (run_dir / "report.md").exists() and not (run_dir / "report").exists()  # --output.no-report


@pytest.mark.parametrize("kind", EACH_ENGINE)
def test_a_last_checkpoint_that_links_to_a_missing_file_is_passed_over(kind, copied_run):  # RES-1
    run_dir = copied_run(kind)
    (last,) = (run_dir / "checkpoints").glob("last.*")
    last.unlink()
    last.symlink_to(run_dir / "gone" / last.name)
    others = [path for path in (run_dir / "checkpoints").iterdir() if path != last]
    resumed = train(kind, run_dir.parent, "--resume", "auto")
    assert "Traceback" not in resumed.stderr
    assert f"{last.relative_to(run_dir)} is empty or missing" in resumed.stdout + resumed.stderr
    if others:  # it resumes from the next intact one (best.ckpt)
        assert resumed.returncode == 0, resumed.stderr[-2000:]
        assert status(run_dir)["status"] == "finished" and len(status(run_dir)["history"]) == 2
    else:  # nothing to resume from: one line
        assert resumed.returncode == 2 and len(error_lines(resumed.stderr)) == 1


@pytest.mark.parametrize("damage", [b"{bad", b"\xff"], ids=["not-json", "not-utf-8"])
def test_a_run_whose_run_json_cannot_be_read_keeps_it_aside(damage, copied_run):  # RES-1, OPS-3
    run_dir = copied_run(EACH_ENGINE[0])
    record = run_dir / "run.json"
    record.write_bytes(record.read_bytes() + damage)
    damaged = record.read_bytes()
    # Whether it finished is unknown: --resume auto leaves it, and a new run trains.
    assert find_latest_run(run_dir.parent, "smoke", PARTS[EACH_ENGINE[0]]) is None
    resumed = train(EACH_ENGINE[0], run_dir.parent, "--resume", str(run_dir))
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert "run.json could not be read; kept as run.json.unreadable" in resumed.stdout
    assert (run_dir / "run.json.unreadable").read_bytes() == damaged
    assert status(run_dir)["status"] == "finished" and len(status(run_dir)["history"]) == 1


@pytest.mark.parametrize("kind", sorted(set(PARTS) - {"sl_tree"}))  # Lightning's
def test_a_run_killed_after_its_test_logs_the_test_metrics_once(kind, copied_run):  # RES-1, OUT-4
    # Its checkpoint holds every epoch: Lightning has nothing to train, and the resume tests again.
    run_dir = copied_run(kind)
    tested = lines_of_test_metrics(run_dir)
    resumed = train(kind, run_dir.parent, "--resume", str(run_dir))
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert len(lines_of_test_metrics(run_dir)) == len(tested) > 0


def lines_of_test_metrics(run_dir: Path) -> list[dict]:
    events = read_jsonl(run_dir / "metrics.jsonl")
    return [e for e in events if e["event"] == "metrics" and any(key.startswith("test_") for key in e)]


@pytest.mark.skipif("sl_tree" not in PARTS, reason="this project has no tree part")
def test_a_tree_run_killed_as_its_patience_ran_out_resumes_without_another_round(tmp_path):  # RES-1
    noise = noise_regression(tmp_path / "noise.csv")  # validation stops improving within rounds
    flags = as_flags({**noise, "early_stopping_rounds": 3})
    finished = train("sl_tree", tmp_path / "runs", *flags)
    assert finished.returncode == 0, finished.stderr[-2000:]
    # Killed after saving its last model, before recording that training ended (run.json as
    # it was then): the resume grows no tree beyond those one uninterrupted run grows.
    run_dir = run_dir_in(tmp_path / "runs")
    killed = status(run_dir) | {"status": "running", "training_ended": False}
    (run_dir / "run.json").write_text(json.dumps(killed))
    stopped, trained = status(run_dir)["end_detail"], trained_so_far("sl_tree", run_dir)
    assert status(run_dir)["end_reason"] == "patience"
    resumed = train("sl_tree", run_dir.parent, "--resume", str(run_dir))
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert trained_so_far("sl_tree", run_dir) == trained
    assert (status(run_dir)["end_reason"], status(run_dir)["end_detail"]) == ("patience", stopped)


@pytest.mark.skipif(THOROUGH not in PARTS, reason="this project has no Lightning part")
def test_a_run_resumed_with_no_epochs_left_ends_on_its_budget(tmp_path):  # RES-1
    # Killed after its last epoch's checkpoint, before it recorded that training ended (or
    # resumed with num_epochs at the epochs it had done): Lightning skips the whole fit loop,
    # and the run ended "unknown (the training code recorded no reason)".
    finished = train(THOROUGH, tmp_path, "--num-epochs", "2")
    assert finished.returncode == 0, finished.stderr[-2000:]
    run_dir = run_dir_in(tmp_path)
    assert (status(run_dir)["end_reason"], status(run_dir)["end_detail"]) == (
        "budget",
        "num_epochs 2 trained",
    )
    (run_dir / "run.json").write_text(
        json.dumps(status(run_dir) | {"status": "running", "training_ended": False})
    )
    resumed = train(THOROUGH, tmp_path, "--resume", str(run_dir))
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    record = status(run_dir)
    assert (record["end_reason"], record["end_detail"]) == ("budget", "num_epochs 2 trained"), record
    assert record["status"] == "finished" and record["training_ended"]


def training_ended(base_dir: Path) -> bool:
    with contextlib.suppress(OSError, ValueError):
        return bool(status(run_dir_in(base_dir)).get("training_ended"))
    return False


def trained_so_far(kind: str, run_dir: Path) -> int:
    """Epochs with a validation result (Lightning), or trees in the latest model."""
    if kind == "sl_tree":
        rounds = [line.get("round") for line in read_jsonl(run_dir / "metrics.jsonl")]
        return max(value for value in rounds if value is not None) + 1
    lines = read_jsonl(run_dir / "metrics.jsonl")
    return sum("epoch" in line and any(key.startswith("val_") for key in line) for line in lines)


# kill -9 mid-epoch (OUT-4, RES-1): after the resume, metrics.jsonl holds every step once.


@slow
@pytest.mark.parametrize("kind", LIGHTNING_KINDS)
def test_metrics_jsonl_has_each_step_once_after_a_resume(kind, tmp_path):
    # Killed once it has logged past its second checkpoint, however fast its epochs are: the
    # run has no end of its own (TRAINS_ON); the resumed one, the same config, ends at the end
    # of its first epoch, by the STOP file in its run directory.
    process = start(kind, tmp_path, *TRAINS_ON[kind])
    written, checkpointed_steps = [], []

    def logged_steps() -> list[int]:
        found = list(tmp_path.glob("*/metrics.jsonl"))
        events = read_jsonl(found[0]) if found else []
        return [event["step"] for event in events if event.get("event") == "metrics"]

    def second_checkpoint() -> bool:
        checkpoint = last_checkpoint(tmp_path)
        if checkpoint is not None:
            with contextlib.suppress(OSError):
                mtime = checkpoint.stat().st_mtime_ns
                if mtime not in written:
                    written.append(mtime)
                    checkpointed_steps.append(max(logged_steps(), default=-1))
        return len(written) >= 2

    def logged_past_it() -> bool:  # lines the resume will log again
        return max(logged_steps(), default=-1) > checkpointed_steps[1]

    assert wait_until(second_checkpoint, process) and wait_until(logged_past_it, process)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    # run.json still says running; its report says what became of it (OPS-3).
    assert status(run_dir_in(tmp_path))["status"] == "running"
    assert run_line(RunFiles.read(run_dir_in(tmp_path))).startswith("**killed** (its process ended")

    (run_dir_in(tmp_path) / "STOP").touch()
    resumed = train(kind, tmp_path, "--resume", "auto", *TRAINS_ON[kind])
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert "exists and is not empty" not in resumed.stderr  # Lightning's, of the run's own checkpoints
    lines = read_jsonl(run_dir_in(tmp_path) / "metrics.jsonl")
    logged = Counter(
        (line["step"], key)
        for line in lines
        if line["event"] == "metrics"
        for key in line
        if key not in {"time", "event", "step", "epoch"}  # "epoch" is in every line of a step
    )
    assert [entry for entry, count in logged.items() if count > 1] == []
    assert sum(line["event"] == "hyperparams" for line in lines) == 1
    # The report's curves mark where the second session took over, at a point they have.
    run = RunFiles.read(run_dir_in(tmp_path))
    xs = set(run.curves.index)
    (resumed_at,) = run.resume_points()
    assert resumed_at in xs and resumed_at < max(xs)


# Ctrl-C, SIGTERM and SIGHUP: one line, the status they give, no traceback (workers included),
# no partial file, run.json "interrupted".


SIGNALS = [(signal.SIGINT, 130), (signal.SIGTERM, 143), (signal.SIGHUP, 129)]
# Every part and every signal, each signal on a part of its own where there are three: the
# handlers are shared (src/runs/lifetime.py), each part's way to stop is its own.
KINDS_AND_SIGNALS = (
    [(kind, *SIGNALS[number]) for number, kind in enumerate(sorted(PARTS))]
    if len(PARTS) == len(SIGNALS)
    else [(kind, *signal_and_status) for kind in sorted(PARTS) for signal_and_status in SIGNALS]
)


@slow
@pytest.mark.parametrize(("kind", "signal_number", "exit_status"), KINDS_AND_SIGNALS)
def test_ctrl_c_sigterm_and_sighup_end_a_run_quietly(kind, signal_number, exit_status, tmp_path, webhook):
    alerts = ["--alerts.webhook-url", webhook.url, "--output.report"]
    process = start(kind, tmp_path, *TRAINS_ON[kind], "--max-wall-clock-hours", "0.05", *alerts)
    assert wait_until(lambda: last_checkpoint(tmp_path) is not None, process)
    time.sleep(0.5)
    os.killpg(process.pid, signal_number)
    _, stderr = process.communicate(timeout=300)
    assert process.returncode == exit_status, stderr[-2000:]
    # Lightning's own "Detected KeyboardInterrupt" line is fine; a traceback's last line is not.
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr.splitlines()
    run_dir = run_dir_in(tmp_path)
    name = {signal.SIGINT: "SIGINT (Ctrl-C)", signal.SIGTERM: "SIGTERM", signal.SIGHUP: "SIGHUP"}
    assert_ended(run_dir, "interrupted", "signal", name[signal_number])
    assert partial_files(tmp_path) == []
    assert checkpoint_problem(last_checkpoint(tmp_path)) is None
    assert_report(run_dir, ["learning_curves"])  # for what it did before the signal
    # A signal from elsewhere (a scheduler's, a closed terminal's) raises an alert; Ctrl-C,
    # pressed by whoever would receive it, none.
    said = f"{run_dir.name}: stopped\n{signal.Signals(signal_number).name} stopped it; continue with --resume"
    expected = [] if signal_number == signal.SIGINT else [("stopped", said)]
    assert [(post["kind"], post["text"][: len(said)]) for post in webhook.received] == expected


# Ctrl-C as the process exits, its run ended and saved: it ends at once, where a library's
# exit handler would have printed KeyboardInterrupt's traceback.
SLOW_EXIT_HANDLER = """
import atexit, runpy, sys, time
atexit.register(lambda: (print("exiting", flush=True), time.sleep(60)))
sys.argv = sys.argv[1:]
runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
"""


def test_ctrl_c_as_the_process_exits_ends_it_at_once(tmp_path):
    kind = "sl_tree" if "sl_tree" in PARTS else THOROUGH  # the quicker run
    module_and_flags = command(kind, tmp_path)[2:]
    process = subprocess.Popen(
        [sys.executable, "-c", SLOW_EXIT_HANDLER, *module_and_flags],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    said = []
    for line in process.stdout:
        said += [line] if line.startswith(("run ended:", "exiting")) else []
        if line == "exiting\n":
            os.killpg(process.pid, signal.SIGINT)
            break
    _, stderr = process.communicate(timeout=60)
    assert said[0].startswith("run ended:") and said[-1] == "exiting\n", stderr[-2000:]
    assert process.returncode == 130 and "Traceback" not in stderr, stderr[-2000:]


# A bad --data-path: refused in one line, exit status 2, before a run directory exists.

DATA_PATH_KINDS = [kind for kind in ("sl_neural", "sl_tree") if kind in PARTS]
# What makes the table with a repeated column name otherwise fit each part.
FITS_THE_TABLE = {
    "sl_neural": [],
    "sl_tree": ["--feature-columns", "a", "c", "d"],
}


def bad_data_path(folder: Path, bad: str) -> Path:
    path = folder / "table.csv"
    if bad == "repeated column":
        # pandas would read the second "a" as "a.1": the header itself must be looked at.
        path.write_text("a,a,c,d,target\n" + "".join(f"{i % 9},1,2,3,{i % 2}\n" for i in range(60)))
    elif bad == "semicolons":
        path.write_text("a;c;d;target\n" + "".join(f"{i % 9};2;3;{i % 2}\n" for i in range(60)))
    elif bad == "folder":
        path.mkdir()
    else:  # nothing ever writes to it: a reader would wait forever
        os.mkfifo(path)
    return path


# A table refused once the run reads it: one line, and neither an alert nor a report of a run
# that never trained.
@pytest.mark.parametrize("kind", DATA_PATH_KINDS)
def test_a_table_refused_in_the_run_sends_no_alert_and_draws_no_report(kind, tmp_path, webhook):  # DATA-1
    table = tmp_path / "labels_as_text.csv"
    table.write_text("a,b,target\n" + "".join(f"{row},{row % 3},{'xy'[row % 2]}\n" for row in range(40)))
    flags = ["--data-path", str(table), "--alerts.webhook-url", webhook.url, "--output.report"]
    flags += ["--label-column", "target", "--feature-columns", "a", "b"]
    flags += ["--task", "regression"] if kind == "sl_neural" else ["--objective", "reg:squarederror"]
    result = train(kind, tmp_path / "runs", *flags)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-2000:]
    (line,) = error_lines(result.stderr)
    assert "label column 'target' holds text" in line
    assert webhook.received == [] and "ALERT" not in result.stdout + result.stderr
    assert not list((tmp_path / "runs").glob("*/report.md"))


@pytest.mark.parametrize("kind", DATA_PATH_KINDS)
@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ("repeated column", "column(s) a named more than once in its header"),
        ("semicolons", "it reads as one column: for a file separated by ';', read it in load_table"),
        ("folder", "is a folder"),
        ("fifo", "is not a regular file"),
    ],
)
def test_a_bad_data_path_is_one_line_and_exit_2_before_a_run_dir(
    kind, bad, message, tmp_path, monkeypatch, capsys
):
    """In this process: the command line refuses it, and so does a run started without one
    (a sweep's trials), each before any training could begin."""
    path = bad_data_path(tmp_path, bad)
    output = tmp_path / "output"
    args = command(kind, output, "--data-path", str(path), *FITS_THE_TABLE[kind])[3:]  # after python -m
    monkeypatch.setattr(sys, "argv", [f"{PARTS[kind]}.train", *args])
    train_module = part_module(kind, "train")
    with pytest.raises(SystemExit) as exit_info:
        train_module.main()
    stderr = capsys.readouterr().err
    assert exit_info.value.code == 2, stderr[-2000:]
    (line,) = [line.strip() for line in stderr.splitlines() if message in line]
    assert line.startswith(f"--data-path {path}: ")
    assert "Traceback" not in stderr and not output.exists()
    smoke = part_module(kind, "config").CONFIGS["smoke"]
    cfg = smoke(data_path=str(path), output=dataclasses.replace(smoke().output, base_dir=str(output)))
    with pytest.raises(ConfigError, match=re.escape(message)):
        train_module.main_with_config(cfg)
    assert not output.exists()


RESUME_CHANGES = [
    *[(kind, flag) for kind in DATA_PATH_KINDS for flag in ("--split-seed=5", "--val-fraction=0.3")],
    *[(kind, "--feature-columns=bmi") for kind in DATA_PATH_KINDS],
    *[("rl", "--env-name=Acrobot-v1")] * ("rl" in PARTS),
]


# The cheapest kind; a run with no end of its own (an RL run reaches its target reward), and
# one that ends at once.
ALONE = next(kind for kind in ("sl_neural", "sl_tree", "rl") if kind in PARTS)
ENDLESS = {**TRAINS_ON, "rl": [*TRAINS_ON["rl"], "--target-reward", "1e9"]}
SHORT = {"sl_neural": ["--num-epochs", "1"], "rl": ["--num-epochs", "1"]}
SHORT["sl_tree"] = ["--num-boost-round", "2"]


def test_a_run_in_training_is_neither_resumed_nor_picked_by_a_second_process(tmp_path):  # RES-1, OPS-3
    process = start(ALONE, tmp_path, *ENDLESS[ALONE])
    try:
        assert wait_until(lambda: last_checkpoint(tmp_path) is not None, process)
        run_dir = run_dir_in(tmp_path)
        again = train(ALONE, tmp_path, "--resume", str(run_dir))
        assert again.returncode == 2 and "Traceback" not in again.stderr
        (line,) = error_lines(again.stderr)
        assert f"{run_dir}: another process (pid {process.pid}) is training this run" in line
        assert status(run_dir)["pid"] == process.pid and process.poll() is None
        fresh = train(ALONE, tmp_path, "--resume", "auto", *SHORT[ALONE])
        assert fresh.returncode == 0 and "starting afresh" in fresh.stdout, fresh.stderr[-2000:]
        assert status(run_dir)["pid"] == process.pid and process.poll() is None
    finally:
        process.kill()
        process.wait()


def test_resuming_a_finished_run_with_nothing_left_to_train_keeps_why_it_ended(smoke_runs, tmp_path):  # RES-1
    run_dir, _ = smoke_runs(THOROUGH)
    copy_dir = tmp_path / run_dir.name
    shutil.copytree(run_dir, copy_dir)
    ended = {key: status(copy_dir)[key] for key in ("status", "end_reason", "end_detail")}
    resumed = train(THOROUGH, tmp_path, "--resume", str(copy_dir))
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert {key: status(copy_dir)[key] for key in ended} == ended
    assert f"run ended: {ended['end_reason']} ({ended['end_detail']})" in resumed.stdout


@slow
@pytest.mark.skipif(THOROUGH not in PARTS, reason="this project has no Lightning part")
def test_a_run_early_stopping_ended_trains_on_only_with_more_patience(tmp_path):  # CB-1, RES-1
    ended = train(THOROUGH, tmp_path, "--num-epochs", "1000", "--patience", "1")
    assert ended.returncode == 0, ended.stderr[-2000:]
    run_dir = run_dir_in(tmp_path)
    stopped, trained = status(run_dir), trained_so_far(THOROUGH, run_dir)
    assert stopped["end_reason"] == "patience"

    again = train(THOROUGH, tmp_path, "--resume", str(run_dir))  # its patience still spent
    assert again.returncode == 0, again.stderr[-2000:]
    assert "nothing left to train" in again.stdout + again.stderr
    assert trained_so_far(THOROUGH, run_dir) == trained
    assert status(run_dir)["end_detail"] == stopped["end_detail"]

    more = train(THOROUGH, tmp_path, "--resume", str(run_dir), "--patience", "3")
    assert more.returncode == 0, more.stderr[-2000:]
    assert trained_so_far(THOROUGH, run_dir) > trained
    assert status(run_dir)["end_reason"] == "patience" and "for 3 checks" in status(run_dir)["end_detail"]


NOT_FITTING_FLAGS = {
    "the checkpoint does not fit the model this config builds": ["--hidden-sizes", "7"],
    # Lightning's own check of this was a traceback (the RL smoke run's checkpoint is at epoch 1).
    "past the num_epochs 1 it would resume with": ["--num-epochs", "1"],
}
NOT_FITTING = [
    (kind, message)
    for kind in ("sl_neural", "rl")
    for message in NOT_FITTING_FLAGS
    if kind in PARTS and not (kind == "rl" and "num_epochs" in message)
]


@pytest.mark.parametrize(("kind", "message"), NOT_FITTING)
def test_a_resume_that_fails_before_it_saves_leaves_the_run_as_it_was(
    kind, message, smoke_runs, tmp_path
):  # RES-1
    # A resume whose flags do not fit the checkpoint: --resume auto must not take the finished
    # run for a failed one, nor lose why it ended.
    run_dir, _ = smoke_runs(kind)
    copy_dir = tmp_path / run_dir.name
    shutil.copytree(run_dir, copy_dir)
    kept = ["config.json", *[path.name for path in copy_dir.glob("report.md")]]
    before, record = {name: (copy_dir / name).read_bytes() for name in kept}, status(copy_dir)
    resumed = train(kind, tmp_path, "--resume", str(copy_dir), *NOT_FITTING_FLAGS[message])
    assert resumed.returncode == 2 and "Traceback" not in resumed.stderr
    (line,) = error_lines(resumed.stderr)
    assert message in line
    assert {name: (copy_dir / name).read_bytes() for name in kept} == before
    assert status(copy_dir) == record and record["status"] == "finished"  # no alert added either
    said = (copy_dir / "console.log").read_text().splitlines()[-1]
    assert said.startswith("resume ended: error (") and said.endswith("the run is as it was")
    assert message in said  # not torch's first line


@pytest.mark.parametrize("kind", DATA_PATH_KINDS)
def test_a_resume_of_a_run_whose_table_was_rewritten_is_one_line(kind, tmp_path):  # RES-1
    # The same file name, other content: split again, rows that trained moved into the test rows.
    cfg = part_module(kind, "config").CONFIGS["smoke"]()
    table = tmp_path / "table.csv"
    part_module(kind, "data").load_table(cfg).to_csv(table, index=False)
    assert train(kind, tmp_path, "--data-path", str(table), *SHORT[kind]).returncode == 0
    run_dir = run_dir_in(tmp_path)
    pd.read_csv(table).sample(frac=1, random_state=1).to_csv(table, index=False)
    record = status(run_dir)
    resumed = train(kind, tmp_path, "--resume", str(run_dir))
    assert resumed.returncode == 2 and "Traceback" not in resumed.stderr
    (line,) = error_lines(resumed.stderr)
    assert line == (
        f"error: {table} has changed since this run's last session read it: a resume reads and splits "
        "it again, so rows it trained on could land among its validation and test rows; resume it with "
        "the file as it was, or start a new run"
    )
    assert status(run_dir) == record


@pytest.mark.parametrize(("kind", "flag"), RESUME_CHANGES)
def test_a_resume_that_would_change_what_the_run_learns_from_is_one_line(kind, flag, copied_run):  # RES-1
    # Rows the model trained on would join the test rows, or the table or the environment
    # would change under it.
    run_dir = copied_run(kind)
    resumed = train(kind, run_dir.parent, "--resume", str(run_dir), flag)
    assert resumed.returncode == 2 and "Traceback" not in resumed.stderr
    (line,) = error_lines(resumed.stderr)
    assert f"{flag.partition('=')[0]} would change what a run under way learns from" in line
    assert status(run_dir)["status"] == "running"  # nothing started, nothing changed
