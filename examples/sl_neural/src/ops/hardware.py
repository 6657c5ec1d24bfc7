"""LOG-4: CPU, RAM and GPU readings, for every part (Lightning or not)."""

from __future__ import annotations

import contextlib

import psutil
import torch

GIB = 1024**3


def collect_system_metrics() -> dict[str, float]:
    """One reading, keyed under system/. CPU percent is the average since the last call."""
    memory = psutil.virtual_memory()
    metrics = {
        "system/cpu_percent": psutil.cpu_percent(interval=None),
        "system/ram_used_gb": (memory.total - memory.available) / GIB,
        "system/ram_percent": memory.percent,
        "system/process_rss_gb": psutil.Process().memory_info().rss / GIB,
    }
    if torch.cuda.is_available():
        metrics |= {
            "system/gpu_memory_allocated_gb": torch.cuda.memory_allocated() / GIB,
            "system/gpu_memory_reserved_gb": torch.cuda.memory_reserved() / GIB,
            "system/gpu_max_memory_allocated_gb": torch.cuda.max_memory_allocated() / GIB,
        }
        # Read through pynvml (nvidia-ml-py); a missing reading never fails a run.
        with contextlib.suppress(Exception):
            metrics["system/gpu_utilization_percent"] = float(torch.cuda.utilization())
    return metrics


def gpu_name() -> str:
    return torch.cuda.get_device_name() if torch.cuda.is_available() else "none (CPU)"
