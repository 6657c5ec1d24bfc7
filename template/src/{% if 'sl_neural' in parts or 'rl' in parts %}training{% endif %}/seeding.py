"""Seeds under DDP: the ranks agree where they must (model init, the data split,
DistributedSampler's order: `seed_everything(cfg.seed)` before anything is built) and differ
where they must (dropout, minibatch order, sampled actions, environments: `rank_seed`)."""

from __future__ import annotations

import numpy as np


def derived_seed(*numbers: int) -> int:
    """An independent 32-bit seed for each sequence of numbers (NumPy's SeedSequence, as
    Lightning seeds data-loader workers)."""
    return int(np.random.SeedSequence(list(numbers)).generate_state(1)[0])


def rank_seed(seed: int, rank: int, *more: int) -> int:
    """`seed` itself on rank zero, so that one process trains as it always has; a seed of its
    own on every other rank."""
    return seed if rank == 0 else derived_seed(seed, rank, *more)
