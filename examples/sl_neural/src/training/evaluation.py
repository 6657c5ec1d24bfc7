"""Validation and test under DDP see every example exactly once (DDP-1); the test's
predictions, every row once, for the run's report.

Lightning gives an evaluation loader a DistributedSampler, which pads the ranks'
shares to one length with repeated examples, so metrics over several processes
are not the single-process metrics. Lightning's unpadded sampler lets the ranks'
shares differ by one example instead; a loader that already has a
DistributedSampler keeps it.
"""

from __future__ import annotations

from collections.abc import Sized
from pathlib import Path

import pandas as pd
import torch.distributed as dist
from lightning.pytorch.overrides.distributed import UnrepeatedDistributedSampler
from lightning.pytorch.utilities import rank_zero_only

from src.errors import DataValidationError
from src.predictions import write_predictions


def evaluation_sampler(dataset: Sized, split: str) -> UnrepeatedDistributedSampler | None:
    """This rank's share of an evaluation split, in order; None in a single process."""
    if not (dist.is_available() and dist.is_initialized()) or (ranks := dist.get_world_size()) == 1:
        return None
    # DDP syncs BatchNorm statistics on each rank's first evaluation batch: every rank needs one.
    if len(dataset) < ranks:
        raise DataValidationError(
            f"the {split} split has {len(dataset)} rows, fewer than the {ranks} processes that "
            f"evaluate it; give it more rows or train with fewer processes"
        )
    return UnrepeatedDistributedSampler(dataset, shuffle=False)


@rank_zero_only
def save_predictions(table: pd.DataFrame, path: Path) -> None:
    """The test split's predictions (src/predictions.py), which every rank holds whole,
    written by rank zero alone; src.report.run_files reads them."""
    write_predictions(table, path)
