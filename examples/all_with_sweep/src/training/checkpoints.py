"""Saving and loading a LightningModule outside Lightning (LIT-3, RES-3)."""

from __future__ import annotations

from pathlib import Path

import lightning as L
import torch
from lightning.pytorch.utilities import rank_zero_only


@rank_zero_only
def save_module(module: L.LightningModule, path: Path) -> Path:
    """Weights and constructor arguments only: small, and loadable with weights_only=True.
    Written by rank zero only (DDP-1); other ranks get None."""
    torch.save({"hyper_parameters": dict(module.hparams), "state_dict": module.state_dict()}, path)
    return path


def load_module(
    module_cls: type[L.LightningModule], path: Path, map_location: str | torch.device = "cpu"
) -> L.LightningModule:
    """Load a `save_module` file or a Lightning checkpoint onto any device.

    Both hold `hyper_parameters` and `state_dict`. weights_only=True refuses to run
    code hidden in a pickle; our checkpoints hold only tensors and plain containers.
    """
    checkpoint = torch.load(path, map_location=map_location, weights_only=True)
    module = module_cls(**checkpoint["hyper_parameters"])
    module.load_state_dict(checkpoint["state_dict"])
    del checkpoint  # RES-3: the loaded copy (optimizer state included) is not kept
    return module.to(map_location).eval()
