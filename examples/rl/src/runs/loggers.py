"""LOG-1: TensorBoard and CSV beside W&B, chosen with --loggers, for every part. TensorBoard
writes {run}/tensorboard/ for every session, so a resumed run goes on in the same curves; CSV,
{run}/csv/version_N/metrics.csv, one per session (CSVLogger would delete an earlier one)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from src.config import BaseConfig

if TYPE_CHECKING:
    from lightning.pytorch.loggers import Logger


def file_loggers(cfg: BaseConfig, run_dir: Path) -> list[Logger]:
    """The TensorBoard and CSV loggers the config's `loggers` name (W&B is src.wandb_utils')."""
    if not {"tensorboard", "csv"} & set(cfg.loggers):
        return []
    # Here, not at the top: Lightning takes seconds to load, and a tree part may never need it.
    from lightning.pytorch.loggers import CSVLogger, TensorBoardLogger

    chosen: list[Logger] = []
    if "tensorboard" in cfg.loggers:
        # No hp_metric: a placeholder scalar (-1) that no part fills in.
        chosen.append(TensorBoardLogger(run_dir, name="tensorboard", version="", default_hp_metric=False))
    if "csv" in cfg.loggers:
        chosen.append(CSVLogger(run_dir, name="csv"))
    return chosen
