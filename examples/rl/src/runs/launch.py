"""Who started this process, and the one run directory all processes of a launch share (DDP-1):
Lightning's DDP ranks inherit it in TRAIN_RUN_DIR; under torchrun or srun rank zero decides and
tells the others through torchrun's store or a note in the output folder, which the nodes share."""

from __future__ import annotations

import errno
import json
import os
import re
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from src.runs.atomic import write_text_atomic

# Rank zero may queue for the GPU lock first (OPS-1): the other ranks wait as long.
WAIT = timedelta(days=7)
# Where Lightning reads a process's global rank before a Trainer exists, first found first.
RANK_VARIABLES = ("RANK", "LOCAL_RANK", "SLURM_PROCID", "JSM_NAMESPACE_RANK")


@dataclass(frozen=True)
class Launch:
    launcher: str  # python (Lightning starts any further ranks itself), torchrun or slurm
    world_size: int  # processes of the launch, on all nodes
    num_nodes: int
    rank: int

    @property
    def processes_per_node(self) -> int:
        return self.world_size // self.num_nodes


def current_launch() -> Launch:
    """How this process was started, as Lightning's own cluster environments detect it."""
    # What those environments look for first: without either, Lightning (seconds to load, and
    # never needed by a tree part) stays unloaded.
    if not {"TORCHELASTIC_RUN_ID", "SLURM_NTASKS"} & os.environ.keys():
        return Launch("python", 1, 1, 0)
    from lightning.fabric.plugins.environments import SLURMEnvironment, TorchElasticEnvironment

    if TorchElasticEnvironment.detect():
        torchrun = TorchElasticEnvironment()
        world_size = torchrun.world_size()
        per_node = int(os.environ.get("LOCAL_WORLD_SIZE", world_size))
        return Launch("torchrun", world_size, world_size // per_node, torchrun.global_rank())
    if SLURMEnvironment.detect():
        try:
            slurm = SLURMEnvironment()
        except RuntimeError as error:  # variables Lightning refuses: --ntasks without --ntasks-per-node
            from src.config import ConfigError

            raise ConfigError(f"SLURM: {' '.join(str(error).split())}") from None
        return Launch(
            "slurm", slurm.world_size(), int(os.environ.get("SLURM_NNODES", "1")), slurm.global_rank()
        )
    return Launch("python", 1, 1, 0)


def process_rank() -> int:
    """This process's global rank, as Lightning's rank_zero_only counts it before a Trainer
    exists; read without loading Lightning, for the tree parts."""
    return int(next((os.environ[name] for name in RANK_VARIABLES if name in os.environ), "0"))


def is_rank_zero() -> bool:
    """Whether this process writes the run's files (DDP-1)."""
    return process_rank() == 0


def leave_process_group() -> None:
    """End this process's part in the launch's collective group, if it has one. For the exit of
    a process whose run finished: torch leaves gloo's worker threads to the interpreter's
    shutdown, where one still freeing the last collective's tensors aborts the process
    ("terminate called without an active exception") after a run that went well."""
    distributed = sys.modules.get("torch.distributed")  # a tree part never loads torch
    if distributed is not None and distributed.is_available() and distributed.is_initialized():
        distributed.destroy_process_group()


def processes_problem(launch: Launch, devices: str, num_nodes: int) -> str | None:
    """Why devices and num_nodes do not fit the processes the launcher started; None
    when they do, or when `devices` is auto (the launcher's numbers are then taken)."""
    if launch.world_size == 1 or devices == "auto":
        return None
    count = int(devices) if devices.strip().isdigit() else None
    if (count, num_nodes) == (launch.processes_per_node, launch.num_nodes):
        return None
    return (
        f"devices {devices!r} on num_nodes {num_nodes}: {launch.launcher} started "
        f"{launch.processes_per_node} process(es) on each of {launch.num_nodes} node(s); "
        "leave devices at auto to follow it"
    )


def master_port_problem(launch: Launch, devices: str, num_nodes: int) -> str | None:
    """Why the MASTER_PORT given to Lightning's own DDP cannot serve: another process listens
    on it (another run's rank zero), which would fail this one with a traceback and leave its
    other ranks waiting at that run's door."""
    port, count = os.environ.get("MASTER_PORT"), process_count(launch, devices, num_nodes)
    if port is None or launch.launcher != "python" or not is_rank_zero() or count is None or count < 2:
        return None
    if not port.isdigit() or not 0 < int(port) < 65536:
        return f"MASTER_PORT {port!r}: not a port number; give one from 1 to 65535, or unset it"
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as torch's store binds
        try:
            probe.bind(("", int(port)))
        except OSError as error:
            if error.errno == errno.EADDRINUSE:
                return f"MASTER_PORT {port}: in use here (another run?); give a free port, or unset it"
    return None


def trainer_processes(launch: Launch, devices: str, num_nodes: int) -> tuple[str | int, int]:
    """The Trainer's devices and num_nodes: the launcher's where it started several
    processes, so that they form one DDP job instead of training side by side."""
    if launch.world_size > 1 and devices == "auto":
        return launch.processes_per_node, launch.num_nodes
    return devices, num_nodes


def process_count(launch: Launch, devices: str, num_nodes: int) -> int | None:
    """The processes a run trains in: the launcher's, or a count or list of devices on each
    node; None where Lightning counts them (devices auto or -1)."""
    devices, num_nodes = trainer_processes(launch, devices, num_nodes)
    devices = str(devices).replace(" ", "").rstrip(",")
    if re.fullmatch(r"[1-9][0-9]*", devices):
        return int(devices) * num_nodes
    if re.fullmatch(r"[0-9]+(,[0-9]+)*", devices):
        return len(devices.split(",")) * num_nodes
    return None


def agreed(launch: Launch, decide: Callable[[], dict[str, str]], note_dir: Path) -> dict[str, str]:
    """What rank zero's `decide()` returns, on every rank of the launch."""
    if launch.world_size == 1:
        return decide()
    if launch.launcher == "torchrun" and os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True":
        import torch.distributed as dist

        # torchrun's agent serves this store to its workers; a restarted attempt gets keys of its own.
        agent = dist.TCPStore(
            os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), is_master=False, timeout=WAIT
        )
        attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
        store = dist.PrefixStore(f"run_dir/attempt_{attempt}", agent)
        if launch.rank == 0:
            decided = decide()
            store.set("decided", json.dumps(decided))
            return decided
        return json.loads(store.get("decided"))
    # These name one launch: a restarted or requeued job, or the next srun step, never
    # reads the note of an earlier one.
    names = ("TORCHELASTIC_RUN_ID", "TORCHELASTIC_RESTART_COUNT")
    if launch.launcher == "slurm":
        names = ("SLURM_JOB_ID", "SLURM_STEP_ID", "SLURM_RESTART_COUNT")
    note = note_dir / f".launch_{'_'.join(os.environ.get(name, '0') for name in names)}.json"
    if launch.rank == 0:
        decided = decide()
        note_dir.mkdir(parents=True, exist_ok=True)
        write_text_atomic(note, json.dumps(decided))
        return decided
    deadline = time.monotonic() + WAIT.total_seconds()
    while not note.is_file():
        if time.monotonic() > deadline:
            raise TimeoutError(f"rank {launch.rank}: rank 0 wrote no {note}; do all nodes share {note_dir}?")
        time.sleep(1)
    return json.loads(note.read_text())
