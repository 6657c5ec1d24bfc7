"""Any table, checked, split and served to Lightning (LIT-2, DATA-1, DDP-2, RES-1).

A part's data.py says where its rows come from (`load_table`) and, for data it knows,
which values are valid (`value_range`, optional); this module checks the rows, splits
them and serves them in batches, the same way for every table.
"""

from __future__ import annotations

import warnings
from types import ModuleType

import lightning as L
import numpy as np
import pandas as pd
import pandera.pandas as pa
import torch
from sklearn.model_selection import train_test_split
from torch.utils.data import DataLoader, Sampler, TensorDataset
from torchdata.stateful_dataloader import StatefulDataLoader
from torchdata.stateful_dataloader.sampler import StatefulDistributedSampler

from src.data_checks import DataValidationError, finite, validate_table
from src.neural.config import SLNeuralConfig
from src.training.evaluation import evaluation_sampler

# torchdata 0.11 calls a torch function that torch 2.13 deprecates, for every loader it builds.
warnings.filterwarnings("ignore", message="'set_vital' is deprecated")


class InMemoryTable(TensorDataset):
    """Rows held as tensors and served a batch at a time: the loader asks for a batch's
    indices at once and gets one indexed tensor per column, instead of gathering and
    stacking batch_size single rows. `table[i]` still gives one row."""

    def __getitems__(self, indices: list[int]) -> tuple[torch.Tensor, ...]:
        rows = torch.as_tensor(indices)
        return tuple(tensor[rows] for tensor in self.tensors)


def whole_batch(batch: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
    """The loader's collate function: InMemoryTable has already made the batch."""
    return batch


class TableDataModule(L.LightningDataModule):
    """The rows of `source`, a part's data module: its `load_table(cfg)` returns one row
    per example, numeric feature columns and `cfg.label_column`, whose distinct values
    are the classes; its `value_range(cfg)`, where it defines one, gives the lowest and
    highest valid feature value, or None."""

    def __init__(self, cfg: SLNeuralConfig, source: ModuleType) -> None:
        super().__init__()
        self.cfg, self.source = cfg, source
        self.batch_size = cfg.batch_size  # MEM-2: BatchSizeFinder may change it
        self.num_features = 0  # known once the table is loaded (setup)
        self.classes: list = []  # the label's values; a class is its position here
        self._checked_table: pd.DataFrame | None = None

    def prepare_data(self) -> None:
        # DDP-2: once per node, before any rank trains. A download goes here; a table on
        # disk only needs checking, so bad data fails fast.
        self._checked_table = self._load_valid_table()

    def setup(self, stage: str | None = None) -> None:
        # The process that ran prepare_data reuses its table; other DDP ranks load their own.
        table = self._checked_table if self._checked_table is not None else self._load_valid_table()
        self.classes = sorted(table[self.cfg.label_column].unique().tolist())
        features = table.drop(columns=self.cfg.label_column).to_numpy(dtype=np.float32)
        labels = table[self.cfg.label_column].map({value: i for i, value in enumerate(self.classes)})
        labels = labels.to_numpy(dtype=np.int64)
        self.num_features = features.shape[1]
        train_idx, val_idx, test_idx = self._split(labels)

        def subset(index: np.ndarray) -> InMemoryTable:
            return InMemoryTable(torch.from_numpy(features[index]), torch.from_numpy(labels[index]))

        self.train_dataset, self.val_dataset, self.test_dataset = map(subset, (train_idx, val_idx, test_idx))

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
        if len(self.classes) < 2:
            raise DataValidationError(
                f"label column '{self.cfg.label_column}' has one class ({self.classes[0]}) in all "
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
        where = f"{getattr(self.source, '__name__', self.source)}.load_table(cfg)"
        table = self.source.load_table(self.cfg)
        if not isinstance(table, pd.DataFrame):
            raise DataValidationError(
                f"{where} returned a {type(table).__name__}; it must return a pandas DataFrame"
            )
        source = self.cfg.data_path or where
        if self.cfg.label_column not in table.columns:
            raise DataValidationError(
                f"{source}: no label column '{self.cfg.label_column}' (set --label-column; "
                f"its columns: {', '.join(map(str, table.columns[:20]))})"
            )
        return validate_table(table, self._schema(list(table.columns)), source)

    def _schema(self, columns: list[str]) -> pa.DataFrameSchema:
        """DATA-1: numeric, finite (and in range, where a range is known) features, and a
        label in every row."""
        checks = [finite()]
        value_range = getattr(self.source, "value_range", lambda cfg: None)(self.cfg)
        if value_range is not None:
            checks.append(pa.Check.in_range(*value_range))
        feature = pa.Column(float, checks, nullable=False, coerce=True)
        label = pa.Column(nullable=False)
        return pa.DataFrameSchema(
            {name: label if name == self.cfg.label_column else feature for name in columns}, strict=True
        )
