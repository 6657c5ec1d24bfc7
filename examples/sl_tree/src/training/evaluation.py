"""Validation and test under DDP see every example exactly once (DDP-1), and the test's
predictions, every row once, go to the run's report."""

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
    """This rank's share of an evaluation split, in order; None in a single process.
    Lightning's own DistributedSampler pads the ranks' shares to one length with repeated
    examples, so metrics over several processes would not be the single-process ones; its
    unpadded sampler lets the shares differ by one example instead. It lives in a module
    Lightning does not document (lightning.pytorch.overrides): a change shows in
    test_two_process_test_metrics_equal_one_process_testing_the_same_checkpoint."""
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
    """The test split's predictions, which every rank holds whole, written by rank zero."""
    write_predictions(table, path)
