"""MEM-4: give GPU memory back between configs (sweep trials, tests, notebooks)."""

from __future__ import annotations

import gc

import torch


def cleanup_vram() -> None:
    """Call after `del model, trainer`: frees what they held.

    The first collection breaks reference cycles (a Trainer and its module point
    at each other), so their tensors are really gone before the CUDA cache is
    emptied; the second catches what the first one's finalizers released.
    """
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    gc.collect()
