"""The optimizer every Lightning part uses (LIT-4)."""

from __future__ import annotations

import inspect

import torch
from lightning.pytorch.plugins.precision import MixedPrecision
from torch import nn


def adamw(module: nn.Module, learning_rate: float, weight_decay: float) -> torch.optim.AdamW:
    """AdamW that decays only matrices (dim >= 2), never biases or norm scales.

    Fused where the installed torch offers it for the parameters' device, except when
    the Trainer clips gradients under mixed precision: Lightning refuses to clip for an
    optimizer that unscales its own gradients, as fused AdamW does, even in bf16.
    """
    params = [p for p in module.parameters() if p.requires_grad]
    groups = [
        {"name": "decay", "params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
        {"name": "no_decay", "params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
    ]
    device = params[0].device.type if params else "cpu"
    fusable = "fused" in inspect.signature(torch.optim.AdamW).parameters and device in ("cuda", "cpu")
    fused = fusable and not _trainer_clips_under_mixed_precision(module)
    return torch.optim.AdamW(groups, lr=learning_rate, fused=fused or None)


def _trainer_clips_under_mixed_precision(module: nn.Module) -> bool:
    try:
        trainer = module.trainer
    except (AttributeError, RuntimeError):  # a plain nn.Module, or one not attached to a Trainer
        return False
    return bool(trainer.gradient_clip_val) and isinstance(trainer.precision_plugin, MixedPrecision)
