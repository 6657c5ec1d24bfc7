"""Validation and test under DDP see every example exactly once (DDP-1); the test's
confusion matrix, for the run's report.

Lightning gives an evaluation loader a DistributedSampler, which pads the ranks'
shares to one length with repeated examples, so metrics over several processes
are not the single-process metrics. Lightning's unpadded sampler lets the ranks'
shares differ by one example instead; a loader that already has a
DistributedSampler keeps it.
"""

from __future__ import annotations

import json
from collections.abc import Sized
from pathlib import Path

import torch.distributed as dist
from lightning.pytorch.overrides.distributed import UnrepeatedDistributedSampler
from lightning.pytorch.utilities import rank_zero_only

from src.errors import DataValidationError
from src.runs.atomic import write_text_atomic


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
def save_confusion_matrix(counts: list[list[int]], path: Path, labels: list | None = None) -> None:
    """Test-set counts, rows the true class and columns the predicted one, for the report
    (src.report.run_files reads them); labels default to the class numbers."""
    labels = [str(label) for label in labels or range(len(counts))]
    write_text_atomic(path, json.dumps({"labels": labels, "counts": counts}) + "\n")
