"""The optimizer every Lightning part uses (LIT-4)."""

from __future__ import annotations

import inspect

import torch
from torch import nn


def adamw(module: nn.Module, learning_rate: float, weight_decay: float) -> torch.optim.AdamW:
    """AdamW that decays only matrices (dim >= 2), never biases or norm scales.

    Fused where the installed torch offers it for the parameters' device.
    """
    params = [p for p in module.parameters() if p.requires_grad]
    groups = [
        {"name": "decay", "params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
        {"name": "no_decay", "params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
    ]
    device = params[0].device.type if params else "cpu"
    fused = "fused" in inspect.signature(torch.optim.AdamW).parameters and device in ("cuda", "cpu")
    return torch.optim.AdamW(groups, lr=learning_rate, fused=fused or None)
