"""Several processes, one run (DDP-1): Lightning's own DDP, torchrun and SLURM's srun
(simulated on CPU with the environment srun gives each task) each make one run
directory that records the launch; a SLURM job signalled before its time limit
saves, requeues and resumes in that directory (RES-1)."""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import PARTS, ROOT, slow

from src.runs.directory import resume_candidates

LIGHTNING_KINDS = [kind for kind in ("sl_neural", "rl") if kind in PARTS]
pytestmark = pytest.mark.skipif(not LIGHTNING_KINDS, reason="this project has no Lightning part")
KIND = (LIGHTNING_KINDS or ["none"])[0]
QUIET = ["--wandb-mode", "disabled"]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def train_args(kind: str, base_dir: Path, *args: str) -> list[str]:
    module = f"{PARTS[kind]}.train"
    return ["-m", module, "--config", "smoke", *QUIET, "--output.base-dir", str(base_dir), *args]


def slurm_env(tmp_path: Path, rank: int, tasks: int, port: int, **extra: str) -> dict[str, str]:
    """The environment srun gives task `rank` of a one-node job, as Lightning reads it."""
    return {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "SLURM_JOB_ID": "4242",
        "SLURM_JOB_NAME": "train",
        "SLURM_STEP_ID": "0",
        "SLURM_NTASKS": str(tasks),
        "SLURM_NTASKS_PER_NODE": str(tasks),
        "SLURM_NNODES": "1",
        "SLURM_NODEID": "0",
        "SLURM_PROCID": str(rank),
        "SLURM_LOCALID": str(rank),
        "SLURM_NODELIST": "127.0.0.1",
        "MASTER_PORT": str(port),
        # Lightning requeues the job with scontrol: this one records that it was asked.
        "PATH": f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}",
        **extra,
    }


def launch(launcher: str, base_dir: Path, tmp_path: Path, *args: str) -> list[subprocess.Popen]:
    """The processes of a two-process launch of the smoke config."""
    command = train_args(KIND, base_dir, *args)
    output = {"stdout": subprocess.PIPE, "stderr": subprocess.STDOUT, "text": True, "cwd": ROOT}
    if launcher == "lightning":
        env = {**os.environ, "MASTER_PORT": str(free_port())}
        ddp = [sys.executable, *command, "--accelerator", "cpu", "--devices", "2", "--strategy", "ddp"]
        return [subprocess.Popen(ddp, env=env, **output)]
    if launcher == "torchrun":
        torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
        return [subprocess.Popen([*torchrun, *command], **output)]
    port = free_port()
    return [
        subprocess.Popen([sys.executable, *command], env=slurm_env(tmp_path, rank, 2, port), **output)
        for rank in (0, 1)
    ]


def run_dirs(base_dir: Path) -> list[Path]:
    return [path for path in base_dir.iterdir() if path.is_dir()]


@slow
@pytest.mark.parametrize("launcher", ["lightning", "torchrun", "srun"])
def test_each_launcher_makes_one_run_directory_that_records_it(launcher, tmp_path):
    processes = launch(launcher, tmp_path / "out", tmp_path)
    outputs = [process.communicate(timeout=600)[0] for process in processes]
    assert [process.returncode for process in processes] == [0] * len(processes), outputs[0][-3000:]
    (run_dir,) = run_dirs(tmp_path / "out")
    record = json.loads((run_dir / "run.json").read_text())
    expected = {"lightning": "python", "torchrun": "torchrun", "srun": "slurm"}[launcher]
    assert (record["launcher"], record["world_size"], record["num_nodes"]) == (expected, 2, 1)
    assert record["status"] == "finished" and (run_dir / "config.json").is_file()
    assert all("Traceback" not in output for output in outputs)


@slow
def test_devices_that_disagree_with_torchrun_are_refused(tmp_path):
    (process,) = launch("torchrun", tmp_path / "out", tmp_path, "--devices", "1")
    output = process.communicate(timeout=600)[0]
    assert process.returncode != 0
    assert "devices '1' on num_nodes 1: torchrun started 2 process(es) on each of 1 node(s)" in output
    assert not (tmp_path / "out").exists()


@slow
@pytest.mark.skipif("sl_tree" not in PARTS, reason="this project has no tree part")
def test_a_tree_part_under_torchrun_is_refused(tmp_path):
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
    command = [*torchrun, *train_args("sl_tree", tmp_path / "out")]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode != 0 and "but a tree part trains in one" in result.stdout + result.stderr
    assert not (tmp_path / "out").exists()


@slow
def test_a_slurm_job_signalled_before_its_limit_requeues_and_resumes_in_its_run_directory(tmp_path):
    (tmp_path / "bin").mkdir()
    scontrol = tmp_path / "bin" / "scontrol"
    scontrol.write_text(f'#!/bin/sh\necho "$@" >> {tmp_path / "scontrol.txt"}\n')
    scontrol.chmod(scontrol.stat().st_mode | stat.S_IXUSR)
    base_dir = tmp_path / "out"
    command = [sys.executable, *train_args(KIND, base_dir, "--num-epochs", "100000", "--patience", "100000")]
    env = slurm_env(tmp_path, 0, 1, free_port())
    job = subprocess.Popen(command, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 300
    while not list(base_dir.glob("*/checkpoints/last.ckpt")) and time.monotonic() < deadline:
        assert job.poll() is None, job.communicate()[0].decode()[-3000:]
        time.sleep(0.1)
    job.send_signal(signal.SIGUSR1)  # what `#SBATCH --signal=SIGUSR1@120` sends
    while not (tmp_path / "scontrol.txt").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    job.send_signal(signal.SIGTERM)  # and SLURM ends the job it requeues
    job.communicate(timeout=300)
    assert job.returncode == 143
    assert (tmp_path / "scontrol.txt").read_text().split() == ["requeue", "4242"]
    (run_dir,) = run_dirs(base_dir)
    saved = [*run_dir.glob("hpc_ckpt_*.ckpt"), run_dir / "checkpoints" / "last.ckpt"]
    assert len(saved) == 2  # the signal's checkpoint, and the last one from before or after it
    newest = max(saved, key=lambda path: path.stat().st_mtime)

    # The requeued job: the same job id, one restart counted, --resume auto as the script adds.
    env = slurm_env(tmp_path, 0, 1, free_port(), SLURM_RESTART_COUNT="1")
    again = subprocess.run(
        [*command, "--resume", "auto", "--max-wall-clock-hours", "0.0003"],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert again.returncode == 0, again.stderr[-3000:]
    assert run_dirs(base_dir) == [run_dir]
    record = json.loads((run_dir / "run.json").read_text())
    assert record["status"] == "finished"
    assert record["history"][-1]["resumed_from"] == str(newest)


def test_a_requeued_job_resumes_from_its_newest_checkpoint(tmp_path):
    # Lightning saves hpc_ckpt_N.ckpt in the run directory when SLURM signals the job;
    # it and last.ckpt, whichever is newer, come before the periodic and best ones.
    (tmp_path / "checkpoints").mkdir()
    names = ["checkpoints/best.ckpt", "checkpoints/epoch=3.ckpt", "checkpoints/last.ckpt", "hpc_ckpt_1.ckpt"]
    for age, name in enumerate(reversed(names)):
        (tmp_path / name).write_bytes(b"")
        os.utime(tmp_path / name, (1e9 - age, 1e9 - age))
    order = ["hpc_ckpt_1.ckpt", "checkpoints/last.ckpt", "checkpoints/epoch=3.ckpt", "checkpoints/best.ckpt"]
    assert [str(path.relative_to(tmp_path)) for path in resume_candidates(tmp_path)] == order
    os.utime(tmp_path / "checkpoints/last.ckpt", (2e9, 2e9))  # saved after the signal
    assert [path.name for path in resume_candidates(tmp_path)][:2] == ["last.ckpt", "hpc_ckpt_1.ckpt"]
