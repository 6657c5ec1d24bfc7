"""The optimizer every Lightning part uses (LIT-4)."""

from __future__ import annotations

import torch
from lightning.pytorch.plugins.precision import MixedPrecision
from torch import nn


def adamw(module: nn.Module, learning_rate: float, weight_decay: float) -> torch.optim.AdamW:
    """AdamW that decays only matrices (dim >= 2), never biases or norm scales; fused, unless the
    Trainer clips under mixed precision: Lightning refuses to clip for an optimizer that
    unscales its own gradients, as fused AdamW does, even in bf16."""
    params = [p for p in module.parameters() if p.requires_grad]
    groups = [
        {"name": "decay", "params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
        {"name": "no_decay", "params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
    ]
    fusable = (params[0].device.type if params else "cpu") in ("cuda", "cpu")
    try:
        trainer = module.trainer
    except (AttributeError, RuntimeError):  # a plain nn.Module, or one not attached to a Trainer
        trainer = None
    clips = (
        trainer is not None
        and trainer.gradient_clip_val
        and isinstance(trainer.precision_plugin, MixedPrecision)
    )
    fused = fusable and not clips
    return torch.optim.AdamW(groups, lr=learning_rate, fused=fused or None)
