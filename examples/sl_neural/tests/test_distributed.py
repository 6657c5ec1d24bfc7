"""Several processes, one run (DDP-1): Lightning's own DDP, torchrun and SLURM's srun
(simulated on CPU with the environment srun gives each task) each make one run
directory that records the launch; the numbers are those of one process (test
metrics of the same checkpoint, frames counted over the ranks), while each RL rank
collects experience of its own; a SLURM job signalled before its time limit saves,
requeues and resumes in that directory (RES-1)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import lightning as L
import psutil
import pytest
from conftest import PARTS, PROJECT_PYTHONPATH, ROOT, part_module, slow, write_mixed_table

from src.runs.directory import resume_candidates
from src.runs.metrics_jsonl import read_jsonl

LIGHTNING_KINDS = [kind for kind in ("sl_neural", "rl") if kind in PARTS]
pytestmark = pytest.mark.skipif(not LIGHTNING_KINDS, reason="this project has no Lightning part")
KIND = (LIGHTNING_KINDS or ["none"])[0]
QUIET = ["--wandb-mode", "disabled", "--output.no-report"]
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]


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
        "PYTHONPATH": PROJECT_PYTHONPATH,
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


# Set in every process a test launches (children inherit it): finds any left behind.
MARKER = "TEST_LAUNCH_MARKER"


def launch(kind: str, launcher: str, base_dir: Path, tmp_path: Path, *args: str) -> list[subprocess.Popen]:
    """The processes of a two-process launch of a part's smoke config."""
    command = train_args(kind, base_dir, *args)
    output = {"stdout": subprocess.PIPE, "stderr": subprocess.STDOUT, "text": True, "cwd": ROOT}
    marked = {**os.environ, MARKER: str(tmp_path)}
    if launcher == "lightning":
        env = {**marked, "MASTER_PORT": str(free_port())}
        ddp = [sys.executable, *command, "--accelerator", "cpu", "--devices", "2", "--strategy", "ddp"]
        return [subprocess.Popen(ddp, env=env, **output)]
    if launcher == "torchrun":
        return [subprocess.Popen([*TORCHRUN, *command], env=marked, **output)]
    port = free_port()
    return [
        subprocess.Popen(
            [sys.executable, *command],
            env=slurm_env(tmp_path, rank, 2, port, **{MARKER: str(tmp_path)}),
            **output,
        )
        for rank in (0, 1)
    ]


def run_dirs(base_dir: Path) -> list[Path]:
    return [path for path in base_dir.iterdir() if path.is_dir()]


def processes_left(marker: str) -> list[psutil.Process]:
    left = []
    for process in psutil.process_iter():
        try:
            if process.environ().get(MARKER) == marker and process.status() != psutil.STATUS_ZOMBIE:
                left.append(process)
        except (psutil.AccessDenied, psutil.NoSuchProcess):  # another user's, or gone
            continue
    return left


LAUNCHERS = ["lightning", "torchrun", "srun"]


def task_args(kind: str, launcher: str, tmp_path: Path) -> list[str]:
    """The supervised neural part's torchrun launch trains a regression on a raw table
    (text and missing values among its features), the other launches each part's own task."""
    if (kind, launcher) != ("sl_neural", "torchrun"):
        return []
    table = write_mixed_table(tmp_path / "table.csv")
    return ["--data-path", str(table), "--task", "regression", "--label-column", "height", "--batch-size=32"]


@dataclass
class Launched:
    run_dir: Path
    returncodes: list[int]
    output: str  # every process's, one after another
    left_behind: list[psutil.Process]  # processes of the launch still alive after it ended


@pytest.fixture(scope="module")
def two_processes(tmp_path_factory):
    """two_processes(kind, launcher) -> Launched: a part's smoke config trained by two
    processes, launched once per module on first use."""
    done = {}

    def launched(kind: str, launcher: str) -> Launched:
        if (kind, launcher) not in done:
            tmp_path = tmp_path_factory.mktemp(f"{kind}-{launcher}")
            task = task_args(kind, launcher, tmp_path)
            processes = launch(kind, launcher, tmp_path / "out", tmp_path, *task)
            outputs = [process.communicate(timeout=600)[0] for process in processes]
            (run_dir,) = run_dirs(tmp_path / "out")
            _, alive = psutil.wait_procs(processes_left(str(tmp_path)), timeout=5)
            returncodes = [process.returncode for process in processes]
            done[kind, launcher] = Launched(run_dir, returncodes, "".join(outputs), alive)
        return done[kind, launcher]

    return launched


@slow
@pytest.mark.parametrize("launcher", LAUNCHERS)
def test_each_launcher_makes_one_run_directory_that_records_it(launcher, two_processes):
    run = two_processes(KIND, launcher)
    assert run.returncodes == [0] * len(run.returncodes), run.output[-3000:]
    record = json.loads((run.run_dir / "run.json").read_text())
    expected = {"lightning": "python", "torchrun": "torchrun", "srun": "slurm"}[launcher]
    assert (record["launcher"], record["world_size"], record["num_nodes"]) == (expected, 2, 1)
    assert record["status"] == "finished" and (run.run_dir / "config.json").is_file()
    assert "Traceback" not in run.output
    assert run.left_behind == []


def lightning_runs() -> list[tuple[str, str]]:
    """Each Lightning part under Lightning's own DDP, and the first also under torchrun."""
    return [(KIND, "torchrun"), *((kind, "lightning") for kind in LIGHTNING_KINDS)]


@slow
@pytest.mark.parametrize(("kind", "launcher"), lightning_runs())
def test_metrics_are_reduced_across_ranks_without_lightning_warnings(kind, launcher, two_processes):
    # Epoch metrics not reduced across ranks, or evaluation through a padding sampler,
    # make Lightning warn; the warnings name what is wrong.
    run = two_processes(kind, launcher)
    assert run.returncodes == [0] * len(run.returncodes), run.output[-3000:]
    text = run.output + (run.run_dir / "console.log").read_text()
    assert "sync_dist" not in text and "DistributedSampler" not in text


def validations(run_dir: Path) -> list[tuple[int, float]]:
    return [(e["step"], e["val_loss"]) for e in read_jsonl(run_dir / "metrics.jsonl") if "val_loss" in e]


@slow
@pytest.mark.skipif("sl_neural" not in PARTS, reason="this project has no sl_neural part")
def test_a_two_process_run_resumed_logs_what_it_would_have_uninterrupted(two_processes, tmp_path):  # RES-1
    # Each rank draws its own dropout masks: a resume that gave the second rank other random
    # numbers than the ones it had would train another model.
    straight = two_processes("sl_neural", "lightning")
    (first,) = launch("sl_neural", "lightning", tmp_path / "out", tmp_path, "--num-epochs", "1")
    output = first.communicate(timeout=600)[0]
    assert first.returncode == 0, output[-3000:]
    (run_dir,) = run_dirs(tmp_path / "out")
    epochs = str(part_module("sl_neural", "config").CONFIGS["smoke"]().num_epochs)
    resume = ["--resume", str(run_dir), "--num-epochs", epochs]
    (resumed,) = launch("sl_neural", "lightning", tmp_path / "out", tmp_path, *resume)
    output = resumed.communicate(timeout=600)[0]
    assert resumed.returncode == 0, output[-3000:]
    assert "warning: this run trained in" not in output
    steps, losses = zip(*validations(straight.run_dir), strict=True)
    assert [step for step, _ in validations(run_dir)] == list(steps)
    assert [loss for _, loss in validations(run_dir)] == pytest.approx(losses, rel=1e-5)


@slow
def test_a_run_resumed_in_another_number_of_processes_warns_that_it_will_not_continue_exactly(
    two_processes, tmp_path
):  # RES-1
    # A step takes a batch from each process: the run goes on, with other steps than it had.
    trained = two_processes(KIND, "lightning").run_dir
    copy = shutil.copytree(trained, tmp_path / "out" / trained.name)  # the fixture's run stays as it is
    command = [sys.executable, *train_args(KIND, tmp_path / "out", "--resume", str(copy), "--devices", "1")]
    env = {**os.environ, MARKER: str(tmp_path)}
    result = subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "warning: this run trained in 2 processes and resumes in 1: " in result.stderr


@slow
@pytest.mark.parametrize(("kind", "launcher"), lightning_runs())
def test_two_process_test_metrics_equal_one_process_testing_the_same_checkpoint(
    kind, launcher, two_processes
):
    # Every test example, or test episode, counted once however the ranks share them (DDP-1).
    run_dir = two_processes(kind, launcher).run_dir
    events = read_jsonl(run_dir / "metrics.jsonl")
    two = next(event for event in reversed(events) if any(key.startswith("test_") for key in event))
    one, module = one_process_test(kind, run_dir)
    assert {name: two[name] for name in one} == pytest.approx(one, rel=1e-5, abs=1e-7)
    if kind == "sl_neural":  # every test row once, as one process predicts them
        from src.predictions import PREDICTIONS_FILE, read_predictions

        written, expected = read_predictions(run_dir / PREDICTIONS_FILE), module.test_predictions
        assert list(written.columns) == list(expected.columns)
        assert list(written["row"]) == list(expected["row"])
        numbers = [column for column in written.columns if column.startswith(("true_", "predicted_"))]
        assert written[numbers].to_numpy() == pytest.approx(expected[numbers].to_numpy(), rel=1e-5)


def one_process_test(kind: str, run_dir: Path) -> tuple[dict[str, float], L.LightningModule]:
    """The test metrics of a run's best.ckpt, tested by this process alone, and the module."""
    config, model = part_module(kind, "config"), part_module(kind, "model")
    cfg = next(iter(config.CONFIGS.values())).from_json((run_dir / "config.json").read_text())
    # The DataModule of the part's kind, in src/, serving the part's data module.
    if kind == "rl":
        from src.rl.data import RolloutDataModule as datamodule_cls
    else:
        from src.neural.data import TableDataModule as datamodule_cls
    module = model.load_model_from_checkpoint(run_dir / "checkpoints" / "best.ckpt")
    trainer = L.Trainer(
        accelerator="cpu", devices=1, logger=False, enable_progress_bar=False, enable_model_summary=False
    )
    datamodule = datamodule_cls(cfg, part_module(kind, "data"))
    (metrics,) = trainer.test(module, datamodule=datamodule, verbose=False)
    return metrics, module


@slow
@pytest.mark.skipif("rl" not in PARTS, reason="this project has no RL part")
def test_rl_frames_are_counted_over_both_ranks(two_processes, smoke_runs):
    # Each rank collects frames_per_batch frames a step: two ranks, twice one process's count.
    def frames_by_step(run_dir: Path) -> dict[int, float]:
        events = read_jsonl(run_dir / "metrics.jsonl")
        return {event["step"]: event["frames"] for event in events if "frames" in event}

    two = frames_by_step(two_processes("rl", "lightning").run_dir)
    one = frames_by_step(smoke_runs("rl")[0])
    assert two and {step: 2 * frames for step, frames in one.items() if step in two} == {
        step: frames for step, frames in two.items() if step in one
    }


FIRST_ROLLOUTS = """
import json, sys
import lightning as L
import torch
from {part} import data
from {part}.config import CONFIGS
from {part}.model import build_model
from src.rl.data import RolloutDataModule

class FirstRollouts(L.Callback):
    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        sums = trainer.strategy.all_gather(batch["observation"].sum()).tolist()
        if trainer.global_rank == 0:
            open(sys.argv[1], "w").write(json.dumps(sums))

if __name__ == "__main__":  # processes started for DDP or environment workers import this file again
    cfg = CONFIGS["smoke"]()
    datamodule = RolloutDataModule(cfg, data)
    model = build_model(cfg)
    trainer = L.Trainer(accelerator="cpu", devices=2, strategy="ddp", max_steps=1, limit_val_batches=0,
        logger=False, enable_checkpointing=False, enable_progress_bar=False, callbacks=[FirstRollouts()])
    trainer.fit(model, datamodule=datamodule)
    datamodule.close()
    # As torch asks of a script whose processes join a group: else gloo's threads meet Python's
    # shutdown, and one still freeing the last collective aborts the process.
    torch.distributed.destroy_process_group()
"""


@slow
@pytest.mark.skipif("rl" not in PARTS, reason="this project has no RL part")
def test_rl_ranks_collect_experience_of_their_own(tmp_path):
    script = tmp_path / "first_rollouts.py"
    script.write_text(FIRST_ROLLOUTS.format(part=PARTS["rl"]))
    command = [*TORCHRUN, str(script), str(tmp_path / "sums.json")]
    env = {**os.environ, "PYTHONPATH": PROJECT_PYTHONPATH}
    result = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    rank_zero, rank_one = json.loads((tmp_path / "sums.json").read_text())
    assert rank_zero != rank_one


def torchrun_script(tmp_path: Path, source: str, kind: str, **fields: str) -> subprocess.CompletedProcess:
    """Two processes under torchrun, each running `source` given the part and its smoke flags."""
    script = tmp_path / "script.py"
    args = train_args(kind, tmp_path / "out")[2:]  # the flags after `-m module`
    script.write_text(source.format(part=PARTS[kind], args=args, **fields))
    env = {**os.environ, "PYTHONPATH": PROJECT_PYTHONPATH, MARKER: str(tmp_path)}
    command = [*TORCHRUN, str(script)]
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)


RANK_ONE_READS = """
import os, sys
from {part} import data
from {part}.train import main

read_table = data.load_table


def load_table(cfg):
    table = read_table(cfg)
    if os.environ["RANK"] == "1":
        {rank_one}
    return table


if __name__ == "__main__":
    data.load_table = load_table
    sys.argv[1:] = {args!r}
    main()
"""


@slow
@pytest.mark.skipif("sl_neural" not in PARTS, reason="this project has no sl_neural part")
def test_ranks_that_loaded_different_rows_stop_in_one_line_instead_of_waiting(tmp_path):  # DDP-2
    # Each rank loads the table for itself: with fewer rows, rank 1 ran out of batches first and
    # rank 0 waited in a collective until the 30-minute timeout.
    rewritten = "table = table.iloc[: len(table) // 2]  # the table, rewritten with half its rows"
    result = torchrun_script(tmp_path, RANK_ONE_READS, "sl_neural", rank_one=rewritten)
    output = result.stdout + result.stderr
    assert result.returncode != 0, output[-3000:]
    assert "the 2 processes of this run loaded different rows (process 0: " in output, output[-3000:]
    assert "process 1: " in output and "training/validation/test rows" in output
    (run_dir,) = run_dirs(tmp_path / "out")
    assert json.loads((run_dir / "run.json").read_text())["status"] == "failed"
    assert not list(run_dir.glob("checkpoints/*.ckpt")) and processes_left(str(tmp_path)) == []


@slow
@pytest.mark.skipif("sl_neural" not in PARTS, reason="this project has no sl_neural part")
def test_a_run_that_one_rank_failed_records_that_ranks_error(tmp_path):  # DDP-1
    # Rank zero records the run, and its own error was only that gloo had lost rank 1.
    failing = 'raise OSError("cannot read /data/table.csv: Input/output error")'
    result = torchrun_script(tmp_path, RANK_ONE_READS, "sl_neural", rank_one=failing)
    assert result.returncode != 0
    (run_dir,) = run_dirs(tmp_path / "out")
    record = json.loads((run_dir / "run.json").read_text())
    said = "OSError: cannot read /data/table.csv: Input/output error (process 1)"
    assert (record["status"], record["end_detail"]) == ("failed", said), result.stdout[-3000:]
    assert "process 1 failed first:\nTraceback" in (run_dir / "console.log").read_text()
    assert processes_left(str(tmp_path)) == []


GROUP_AT_EXIT = """
import atexit, json, os, sys
import torch.distributed
from {part}.train import main

def record_the_group():
    with open(os.path.join({record_dir!r}, "group_at_exit_" + os.environ["RANK"] + ".json"), "w") as file:
        json.dump(torch.distributed.is_initialized(), file)

if __name__ == "__main__":
    atexit.register(record_the_group)  # registered first, run last: what Python's shutdown meets
    sys.argv[1:] = {args!r}
    main()
"""


@slow
def test_a_finished_run_ends_its_process_group_before_python_shuts_down(tmp_path):
    # torch leaves gloo's worker threads to the shutdown, where one still freeing the last
    # collective aborts a rank whose run went well (SIGABRT, and torchrun reports a failure).
    result = torchrun_script(tmp_path, GROUP_AT_EXIT, KIND, record_dir=str(tmp_path))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    records = [tmp_path / f"group_at_exit_{rank}.json" for rank in (0, 1)]
    assert [json.loads(record.read_text()) for record in records] == [False, False]


@slow
def test_sigterm_to_torchrun_leaves_the_run_interrupted_not_failed(tmp_path):  # RES-1
    # torchrun signals each rank: the one that stops first fails the collective the other is
    # in, which was filed as the run's failure, and neither --resume auto nor a babysitter's
    # restart would take the run up as a preempted one.
    long = ["--num-epochs", "100000", "--patience", "100000", "--max-wall-clock-hours", "0.05"]
    (torchrun,) = launch(KIND, "torchrun", tmp_path / "out", tmp_path, *long)
    deadline = time.monotonic() + 600
    while not list((tmp_path / "out").glob("*/checkpoints/last.ckpt")):
        assert torchrun.poll() is None and time.monotonic() < deadline, torchrun.stdout.read()[-3000:]
        time.sleep(0.2)
    torchrun.send_signal(signal.SIGTERM)
    output = torchrun.communicate(timeout=300)[0]
    (run_dir,) = run_dirs(tmp_path / "out")
    record = json.loads((run_dir / "run.json").read_text())
    assert (record["status"], record.get("end_reason"), record.get("end_detail")) == (
        "interrupted",
        "signal",
        "SIGTERM",
    ), output[-3000:]
    assert processes_left(str(tmp_path)) == []


def test_a_master_port_another_process_listens_on_is_refused_before_a_run_directory(tmp_path):
    # Rank zero failed on it with a traceback, and Lightning left rank 1 waiting for ever.
    with socket.socket() as other_run:
        other_run.bind(("", 0))
        other_run.listen()
        port = other_run.getsockname()[1]
        env = {**os.environ, "MASTER_PORT": str(port), MARKER: str(tmp_path)}
        ddp = [sys.executable, *train_args(KIND, tmp_path / "out"), "--accelerator", "cpu", "--devices", "2"]
        result = subprocess.run(ddp, env=env, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert f"MASTER_PORT {port}: in use here (another run?); give a free port, or unset it" in result.stderr
    assert not (tmp_path / "out").exists() and processes_left(str(tmp_path)) == []


@slow
def test_devices_that_disagree_with_torchrun_are_refused(tmp_path):
    (process,) = launch(KIND, "torchrun", tmp_path / "out", tmp_path, "--devices", "1")
    output = process.communicate(timeout=600)[0]
    assert process.returncode != 0
    assert "devices '1' on num_nodes 1: torchrun started 2 process(es) on each of 1 node(s)" in output
    assert not (tmp_path / "out").exists()


def test_slurm_variables_lightning_refuses_are_one_line_before_a_run_directory(tmp_path):  # DDP-1
    env = slurm_env(tmp_path, 0, 2, free_port())
    del env["SLURM_NTASKS_PER_NODE"]  # as sbatch --ntasks 2 leaves them
    command = [sys.executable, *train_args(KIND, tmp_path / "out")]
    result = subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-2000:]
    (line,) = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert "SLURM: You set `--ntasks=2`" in line and "`--ntasks-per-node=2` instead" in line
    assert not (tmp_path / "out").exists()


@slow
@pytest.mark.skipif("sl_tree" not in PARTS, reason="this project has no tree part")
def test_a_tree_part_under_torchrun_is_refused(tmp_path):
    command = [*TORCHRUN, *train_args("sl_tree", tmp_path / "out")]
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
    streams = {"stdout": subprocess.PIPE, "stderr": subprocess.STDOUT, "text": True}
    job = subprocess.Popen(command, env=env, cwd=ROOT, **streams)
    output: list[str] = []
    reader = threading.Thread(target=lambda: output.extend(job.stdout), daemon=True)
    reader.start()
    deadline = time.monotonic() + 300
    while not list(base_dir.glob("*/checkpoints/last.ckpt")) and time.monotonic() < deadline:
        assert job.poll() is None, "".join(output)[-3000:]
        time.sleep(0.1)
    job.send_signal(signal.SIGUSR1)  # what `#SBATCH --signal=SIGUSR1@120` sends
    # Lightning says so once scontrol has returned and its handler is done.
    while not any("Requeued SLURM job" in line for line in output) and time.monotonic() < deadline:
        time.sleep(0.1)
    job.send_signal(signal.SIGTERM)  # and SLURM ends the job it requeued
    job.wait(timeout=300)
    reader.join(timeout=60)
    assert job.returncode == 143, "".join(output)[-3000:]
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
