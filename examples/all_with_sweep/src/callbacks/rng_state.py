"""RES-1: random number generator states travel with the checkpoint."""

from __future__ import annotations

import random
from typing import Any

import lightning as L
import numpy as np
import torch

from src.training.seeding import rank_seed, seed_generators


class RngStateCallback(L.Callback):
    """Saves Python, NumPy, torch (and CUDA) RNG states in every checkpoint and puts
    them back on resume, so shuffling and dropout continue exactly as in an
    uninterrupted run. Lightning runs its sanity check inside `isolate_rng()`, so
    nothing draws from these generators between loading and the first batch.
    Stored as lists and tensors: the checkpoint still loads with weights_only=True.

    Under DDP the checkpoint holds rank zero's states; every other rank then seeds its
    generators apart (seed 002), from the run's seed, its rank and the step."""

    def __init__(self, seed: int) -> None:
        self.seed = seed

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        # After the model's shared initialisation and any resume, before the first batch.
        if trainer.global_rank > 0:
            seed_generators(rank_seed(self.seed, trainer.global_rank, trainer.global_step))

    def state_dict(self) -> dict[str, Any]:
        kind, keys, *rest = np.random.get_state()
        state: dict[str, Any] = {
            "python": random.getstate(),
            "numpy": [kind, keys.tolist(), *rest],
            "torch": torch.get_rng_state(),
        }
        if torch.cuda.is_available():
            state["cuda"] = torch.cuda.get_rng_state_all()
        return state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        version, internal, gauss = state_dict["python"]
        random.setstate((version, tuple(internal), gauss))
        kind, keys, *rest = state_dict["numpy"]
        np.random.set_state((kind, np.array(keys, dtype=np.uint32), *rest))
        torch.set_rng_state(state_dict["torch"])
        # RES-3: a run resumed on a different number of GPUs keeps freshly seeded CUDA generators.
        if len(state_dict.get("cuda", ())) == torch.cuda.device_count() > 0:
            torch.cuda.set_rng_state_all(state_dict["cuda"])
