"""MEM-4: give GPU memory back between configs (sweep trials, tests, notebooks)."""

import gc

import torch


def cleanup_vram() -> None:
    """Call after `del model, trainer`. The first collection breaks reference cycles (a Trainer
    and its module point at each other) so their tensors are gone before the CUDA cache is
    emptied; the second catches what the first one's finalizers released."""
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    gc.collect()
