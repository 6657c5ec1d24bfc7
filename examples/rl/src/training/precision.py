"""Training precision (PRC-1..3): bf16 has fp32's exponent range, so no GradScaler is needed;
Lightning applies autocast itself, so model code never calls torch.autocast (PRC-2). Testing
may step out of it (full_float32)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch


def choose_precision(requested: str = "auto", accelerator: str = "auto") -> str:
    """`requested`, or for "auto" bf16-mixed where training runs on a GPU that supports it
    (not with accelerator cpu on a machine that has one), else 32-true."""
    if requested != "auto":
        return requested
    on_gpu = accelerator in ("auto", "gpu", "cuda") and torch.cuda.is_available()
    return "bf16-mixed" if on_gpu and torch.cuda.is_bf16_supported() else "32-true"


@contextmanager
def full_float32(device_type: str) -> Iterator[None]:
    """Float32 as a CPU computes it, whatever the Trainer's precision: no bf16 autocast, and no
    TF32 in a GPU's matrix products and convolutions."""
    matmul, convolution = torch.get_float32_matmul_precision(), torch.backends.cudnn.allow_tf32
    torch.set_float32_matmul_precision("highest")
    torch.backends.cudnn.allow_tf32 = False
    try:
        with torch.autocast(device_type, enabled=False):
            yield
    finally:
        torch.set_float32_matmul_precision(matmul)
        torch.backends.cudnn.allow_tf32 = convolution
