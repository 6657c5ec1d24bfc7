"""LOG-4: CPU, RAM and GPU readings, for every part. GPUs are read from the NVIDIA driver
(NVML, through nvidia-ml-py) as torch counts them, without importing torch: that takes
seconds, and a tree part never uses it."""

from __future__ import annotations

import contextlib
import functools
import os
from typing import Any

import psutil
import pynvml

GIB = 1024**3


def collect_system_metrics(gpu: int = 0) -> dict[str, float]:
    """One reading, keyed under system/, of the visible GPU numbered `gpu` (a DDP rank's
    own) among the rest. CPU percent is the average since the last call."""
    memory = psutil.virtual_memory()
    metrics = {
        "system/cpu_percent": psutil.cpu_percent(interval=None),
        "system/ram_used_gb": (memory.total - memory.available) / GIB,
        "system/ram_percent": memory.percent,
        "system/process_rss_gb": psutil.Process().memory_info().rss / GIB,
    }
    return metrics | gpu_readings(gpu)


def gpu_readings(gpu: int = 0) -> dict[str, float]:
    """How busy the visible GPU numbered `gpu` is, and how full its memory (every process's
    use, as nvidia-smi shows it); empty without one."""
    readings: dict[str, float] = {}
    if gpu < len(gpus := visible_gpus()):
        # Each on its own: a MIG slice reports its memory but not its use. A reading that
        # fails is left out; it never fails a run.
        with contextlib.suppress(pynvml.NVMLError):
            use = pynvml.nvmlDeviceGetUtilizationRates(gpus[gpu]).gpu
            readings["system/gpu_utilization_percent"] = float(use)
        with contextlib.suppress(pynvml.NVMLError):
            memory = pynvml.nvmlDeviceGetMemoryInfo(gpus[gpu])
            readings["system/gpu_memory_percent"] = 100 * memory.used / memory.total
    return readings


def gpu_name() -> str:
    gpus = visible_gpus()
    return pynvml.nvmlDeviceGetName(gpus[0]) if gpus else "none (CPU)"


def driver_versions() -> dict[str, str | None]:
    """The newest CUDA the NVIDIA driver runs and the driver's own version, as nvidia-smi
    shows them; None without a driver."""
    versions: dict[str, str | None] = {"cuda": None, "nvidia_driver": None}
    with contextlib.suppress(pynvml.NVMLError):  # no driver, or one too old to say
        pynvml.nvmlInit()
        cuda = pynvml.nvmlSystemGetCudaDriverVersion()  # 12040 for CUDA 12.4
        versions["cuda"] = f"{cuda // 1000}.{cuda % 1000 // 10}"
        versions["nvidia_driver"] = pynvml.nvmlSystemGetDriverVersion()
    return versions


@functools.cache
def visible_gpus() -> tuple[Any, ...]:
    """NVML's handles of the GPUs CUDA shows this process, in its order: every one, or those
    CUDA_VISIBLE_DEVICES names (by index or UUID) up to the first it does not know."""
    try:
        pynvml.nvmlInit()  # once a process, as torch starts it: the result is cached
        handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
    except pynvml.NVMLError:  # no driver, or one that cannot list its GPUs: none to use
        return ()
    if (chosen := os.environ.get("CUDA_VISIBLE_DEVICES")) is None:
        return tuple(handles)
    visible = []
    for entry in map(str.strip, chosen.split(",")):
        try:  # an index, a GPU's UUID or a MIG slice's
            visible.append(
                handles[int(entry)] if entry.isdigit() else pynvml.nvmlDeviceGetHandleByUUID(entry)
            )
        except (IndexError, pynvml.NVMLError):
            break
    return tuple(visible)


def first_visible_gpu() -> str | None:
    """The UUID of the GPU that `cuda` (device 0) means in this process; None without one."""
    try:
        return pynvml.nvmlDeviceGetUUID(gpus[0]) if (gpus := visible_gpus()) else None
    except pynvml.NVMLError:  # a driver that cannot say: none to count on
        return None
