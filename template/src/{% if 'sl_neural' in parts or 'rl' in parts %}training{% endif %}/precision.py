"""Training precision (PRC-1..3): bf16 has fp32's exponent range, so no GradScaler is needed;
Lightning applies autocast itself, so model code never calls torch.autocast (PRC-2)."""

from __future__ import annotations

import torch


def choose_precision(requested: str = "auto") -> str:
    """`requested`, or for "auto" bf16-mixed where the GPU supports it, else 32-true."""
    if requested != "auto":
        return requested
    return "bf16-mixed" if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else "32-true"
