"""Data of this part: load, validate (DATA-1), split and serve (LIT-2).

To train on your own data, set `--data-path your.csv` (numeric feature columns
plus `--label-column`), or replace `load_table()`.
"""

from __future__ import annotations

import warnings

import lightning as L
import numpy as np
import pandas as pd
import pandera.pandas as pa
import torch
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from torch.utils.data import DataLoader, Sampler, TensorDataset
from torchdata.stateful_dataloader import StatefulDataLoader
from torchdata.stateful_dataloader.sampler import StatefulDistributedSampler

from src.data_checks import DataValidationError, finite, read_table, validate_table
from src.training.evaluation import evaluation_sampler

from .config import DigitsConfig

# torchdata 0.11 calls a torch function that torch 2.13 deprecates, for every loader it builds.
warnings.filterwarnings("ignore", message="'set_vital' is deprecated")


def load_table(cfg: DigitsConfig) -> pd.DataFrame:
    """The raw table: one row per example, features and the label column."""
    if not cfg.data_path:
        return load_digits(as_frame=True).frame  # ships with scikit-learn: no download
    return read_table(cfg.data_path)


def table_schema(cfg: DigitsConfig, columns: list[str]) -> pa.DataFrameSchema:
    """DATA-1: numeric, finite, in-range features and a label in [0, num_classes)."""
    low, high = cfg.feature_range
    feature = pa.Column(float, [finite(), pa.Check.in_range(low, high)], nullable=False, coerce=True)
    features = {name: feature for name in columns if name != cfg.label_column}
    return pa.DataFrameSchema(
        {
            **features,
            # No coercion: a float label such as 3.5 is an error, not a silent 3.
            cfg.label_column: pa.Column(int, pa.Check.isin(range(cfg.num_classes))),
        },
        strict=True,
    )


class InMemoryTable(TensorDataset):
    """Rows held as tensors and served a batch at a time: the loader asks for a batch's
    indices at once and gets one indexed tensor per column, instead of gathering and
    stacking batch_size single rows. `table[i]` still gives one row. A per-row transform
    added here must work on a batch of rows."""

    def __getitems__(self, indices: list[int]) -> tuple[torch.Tensor, ...]:
        rows = torch.as_tensor(indices)
        return tuple(tensor[rows] for tensor in self.tensors)


def whole_batch(batch: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
    """The loader's collate function: InMemoryTable has already made the batch."""
    return batch


class DigitsDataModule(L.LightningDataModule):
    def __init__(self, cfg: DigitsConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.batch_size = cfg.batch_size  # MEM-2: BatchSizeFinder may change it
        self._checked_table: pd.DataFrame | None = None

    def prepare_data(self) -> None:
        # DDP-2: once per node, before any rank trains. Downloads go here; the bundled
        # data only needs checking, so bad data fails fast.
        self._checked_table = self._load_valid_table()

    def setup(self, stage: str | None = None) -> None:
        # The process that ran prepare_data reuses its table; other DDP ranks load their own.
        table = self._checked_table if self._checked_table is not None else self._load_valid_table()
        features = table.drop(columns=self.cfg.label_column).to_numpy(dtype=np.float32)
        labels = table[self.cfg.label_column].to_numpy(dtype=np.int64)
        train_idx, val_idx, test_idx = self._split(labels)

        def subset(index: np.ndarray) -> InMemoryTable:
            return InMemoryTable(torch.from_numpy(features[index]), torch.from_numpy(labels[index]))

        self.train_dataset = subset(train_idx)
        self.val_dataset = subset(val_idx)
        self.test_dataset = subset(test_idx)

    def train_dataloader(self) -> StatefulDataLoader:
        # RES-1: the order of a DistributedSampler follows from the seed and the epoch, and the
        # position of this one travels in checkpoints with the loader's, so a resumed run sees
        # the batches an uninterrupted one would, mid-epoch too. Under DDP each rank takes its
        # share; Lightning keeps a DistributedSampler it is given.
        ranks, rank = (self.trainer.world_size, self.trainer.global_rank) if self.trainer else (1, 0)
        sampler = StatefulDistributedSampler(
            self.train_dataset, num_replicas=ranks, rank=rank, seed=self.cfg.seed
        )
        return self._loader(self.train_dataset, train=True, sampler=sampler)

    def val_dataloader(self) -> DataLoader:
        return self._loader(self.val_dataset, sampler=evaluation_sampler(self.val_dataset, "validation"))

    def test_dataloader(self) -> DataLoader:
        return self._loader(self.test_dataset, sampler=evaluation_sampler(self.test_dataset, "test"))

    def _loader(
        self, dataset: TensorDataset, train: bool = False, sampler: Sampler | None = None
    ) -> DataLoader:
        return (StatefulDataLoader if train else DataLoader)(
            dataset,
            batch_size=self.batch_size,
            sampler=sampler,
            collate_fn=whole_batch,
            # Starting each epoch draws a seed for the workers: from a generator of the training
            # loader's own, so that the global one, which dropout draws from, resumes exactly.
            generator=torch.Generator().manual_seed(self.cfg.seed) if train else None,
            # A last training batch of one example breaks BatchNorm; training reshuffles
            # every epoch, so dropping the incomplete batch loses no example for good.
            drop_last=train and len(dataset) > self.batch_size,
            num_workers=self.cfg.num_workers,
            persistent_workers=self.cfg.num_workers > 0,
            pin_memory=torch.cuda.is_available(),
        )

    def _split(self, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Stratified, and seeded apart from training, so every run sees the same split."""
        if len(classes := np.unique(labels)) < 2:
            raise DataValidationError(
                f"label column '{self.cfg.label_column}' has one class ({classes[0]}) in all "
                f"{len(labels)} rows: a classifier needs examples of at least two"
            )
        held_out = self.cfg.val_fraction + self.cfg.test_fraction
        try:
            train_idx, rest_idx = train_test_split(
                np.arange(len(labels)), test_size=held_out, stratify=labels, random_state=self.cfg.split_seed
            )
            val_idx, test_idx = train_test_split(
                rest_idx,
                test_size=self.cfg.test_fraction / held_out,
                stratify=labels[rest_idx],
                random_state=self.cfg.split_seed,
            )
        except ValueError as error:  # too few rows of some class for a stratified split
            raise DataValidationError(
                f"cannot split {len(labels)} rows into train/val/test: {error}"
            ) from None
        return train_idx, val_idx, test_idx

    def _load_valid_table(self) -> pd.DataFrame:
        table = load_table(self.cfg)
        source = self.cfg.data_path or "scikit-learn digits"
        if (found := table.shape[1] - 1) != self.cfg.num_features:  # before the per-column checks
            raise DataValidationError(
                f"{source}: {found} feature columns besides '{self.cfg.label_column}', expected "
                f"{self.cfg.num_features} (set --num-features)"
            )
        return validate_table(table, table_schema(self.cfg, list(table.columns)), source)
