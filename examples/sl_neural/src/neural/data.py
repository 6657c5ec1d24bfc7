"""Any table, checked, split, encoded and served to Lightning (LIT-2, DATA-1, DDP-2, RES-1).

A part's data.py says where its rows come from (`load_table(cfg)`) and, for data it knows,
the valid feature values (`value_range(cfg)`, optional); the rest is the same for every table.
"""

from __future__ import annotations

import hashlib
import sys
import warnings
from pathlib import Path
from types import ModuleType

import lightning as L
import numpy as np
import pandas as pd
import pandera.pandas as pa
import torch
import torch.distributed as dist
from lightning.pytorch.overrides.distributed import UnrepeatedDistributedSampler
from sklearn.model_selection import train_test_split
from torch.utils.data import DataLoader, Sampler, TensorDataset
from torchdata.stateful_dataloader import StatefulDataLoader
from torchdata.stateful_dataloader.sampler import StatefulDistributedSampler

from src.config import ConfigError, first_line
from src.data_checks import (
    DataValidationError,
    check_rows_and_feature_kinds,
    finite,
    part_function,
    refuse_identifiers,
    validate_table,
)
from src.neural.config import SLNeuralConfig
from src.neural.encoding import TableEncoding, is_numeric
from src.predictions import class_values

# torchdata 0.11 calls a torch function that torch 2.13 deprecates, for every loader it builds.
warnings.filterwarnings("ignore", message="'set_vital' is deprecated")
# Lightning's advice on a machine of more than two cores. The table is in memory: a batch is a
# slice of it, which worker processes would only copy across (num_workers stays a choice).
warnings.filterwarnings("ignore", message=r"The '\w+_dataloader' does not have many workers")


def evaluation_sampler(dataset: TensorDataset, split: str) -> UnrepeatedDistributedSampler | None:
    """This rank's share of an evaluation split, in order; None in a single process (DDP-1).
    Lightning's DistributedSampler pads the shares to one length with repeated examples, which
    would change the metrics; its unpadded one, in a module Lightning does not document, lets
    them differ by one example. A change shows in
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


def same_rows_on_every_rank(where: str, splits: tuple[TensorDataset, ...]) -> None:
    """DataValidationError on every rank when the ranks' splits differ (DDP-2): a table that
    changed between their reads gives them shares of different lengths, and a rank that runs out
    of batches first would leave the others waiting in a collective until the timeout."""
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return
    digest = hashlib.blake2b(digest_size=8)
    for split in splits:
        for tensor in split.tensors:
            digest.update(tensor.contiguous().numpy().tobytes())
    mine = ([len(split) for split in splits], digest.hexdigest())
    ranks: list = [None] * dist.get_world_size()
    dist.all_gather_object(ranks, mine)
    if all(rank == ranks[0] for rank in ranks):
        return
    counts = {tuple(rows) for rows, _ in ranks}
    detail = (
        "; ".join(f"process {rank}: {'/'.join(map(str, rows))}" for rank, (rows, _) in enumerate(ranks))
        + " training/validation/test rows"
        if len(counts) > 1
        else "the same numbers of rows, with different values"
    )
    raise DataValidationError(
        f"{where}: the {len(ranks)} processes of this run loaded different rows ({detail}); every "
        "process loads the table for itself, so it must not change while the run starts: give the "
        "run a copy that stays as it is"
    )


class TrainingLoader(StatefulDataLoader):
    """Resumes at the next batch, but from a position at an epoch's end (a validation every n
    steps can fall on its last batch) starts the next epoch at its first: loaded, that position
    would leave the next epoch no batches."""

    def load_state_dict(self, state_dict: dict) -> None:
        # torchdata's layout, in one process or with workers: a change shows in
        # test_a_run_checkpointed_at_its_last_batch_resumes_into_a_whole_epoch (one process) and
        # test_a_run_with_data_workers_killed_mid_epoch_resumes_as_if_never_stopped.
        if "_snapshot" in state_dict:
            batches = state_dict["_snapshot"]["_snapshot_step"] + state_dict["_steps_since_snapshot"]
        else:
            batches = state_dict["_num_yielded"]
        if batches < len(self):
            super().load_state_dict(state_dict)


class InMemoryTable(TensorDataset):
    """Rows held as tensors: the loader asks for a batch's indices at once and gets one indexed
    tensor per column, instead of gathering and stacking batch_size single rows."""

    def __getitems__(self, indices: list[int]) -> tuple[torch.Tensor, ...]:
        rows = torch.as_tensor(indices)
        return tuple(tensor[rows] for tensor in self.tensors)


class TableDataModule(L.LightningDataModule):
    """The rows of `source`, a part's data module, as batches (inputs, targets, rows), `rows` the
    examples' positions in the loaded table. A resumed run (`resume_from`, the checkpoint it
    continues) encodes the rows as that checkpoint's model was trained on them."""

    def __init__(self, cfg: SLNeuralConfig, source: ModuleType, resume_from: Path | None = None) -> None:
        super().__init__()
        self.cfg, self.source, self.resume_from = cfg, source, resume_from
        self.batch_size = cfg.batch_size  # MEM-2: BatchSizeFinder may change it
        self.encoding: TableEncoding | None = None  # fitted on the training rows (setup)
        self.label_values = pd.DataFrame()  # the labelled rows' labels, by position in the loaded table
        self._checked_table: pd.DataFrame | None = None
        self.where = cfg.data_path or f"{getattr(source, '__name__', source)}.load_table(cfg)"  # for errors

    def prepare_data(self) -> None:
        # DDP-2: once per node, before any rank trains, so that bad data fails fast. Testing
        # after training (Lightning calls this again) reuses the rows that trained.
        if self.encoding is None:
            self._checked_table = self._load_valid_table()

    def setup(self, stage: str | None = None) -> None:
        if self.encoding is not None:  # testing after training: the same rows, encoded the same way
            return
        # The process that ran prepare_data reuses its table; other DDP ranks load their own.
        table = self._checked_table if self._checked_table is not None else self._load_valid_table()
        self._checked_table = None
        train, val, test = self._split(table)
        labels = list(self.cfg.label_column)
        self.encoding = self._encoding_of_resumed_run() or TableEncoding.fit(
            self.cfg.task, table, labels, table.iloc[train], self.where
        )
        inputs = torch.from_numpy(self.encoding.features.transform(table, self.where))
        targets = torch.tensor(self.encoding.encode_targets(table))
        rows = torch.tensor(table.index.to_numpy(dtype=np.int64))
        self.label_values = table[labels]
        self.train_dataset, self.val_dataset, self.test_dataset = (
            InMemoryTable(inputs[index], targets[index], rows[index]) for index in (train, val, test)
        )
        same_rows_on_every_rank(self.where, (self.train_dataset, self.val_dataset, self.test_dataset))

    def train_dataloader(self) -> TrainingLoader:
        # RES-1: the sampler's order follows from the seed and the epoch, and its position travels
        # in checkpoints with the loader's, so a resumed run sees the batches an uninterrupted one
        # would, mid-epoch too. Under DDP each rank takes its share.
        ranks, rank = (self.trainer.world_size, self.trainer.global_rank) if self.trainer else (1, 0)
        sampler = StatefulDistributedSampler(
            self.train_dataset, num_replicas=ranks, rank=rank, seed=self.cfg.seed
        )
        if self.trainer:
            # Worker processes start drawing batches as soon as the fit loop makes the iterator,
            # which on a resume is before it sets the epoch: the sampler must know it already.
            sampler.set_epoch(self.trainer.fit_loop.epoch_progress.current.processed)
        return self._loader(self.train_dataset, train=True, sampler=sampler)

    def val_dataloader(self) -> DataLoader:
        return self._loader(self.val_dataset, sampler=evaluation_sampler(self.val_dataset, "validation"))

    def test_dataloader(self) -> DataLoader:
        return self._loader(self.test_dataset, sampler=evaluation_sampler(self.test_dataset, "test"))

    def _loader(
        self, dataset: TensorDataset, train: bool = False, sampler: Sampler | None = None
    ) -> DataLoader:
        return (TrainingLoader if train else DataLoader)(
            dataset,
            batch_size=self.batch_size,
            sampler=sampler,
            collate_fn=tuple,  # InMemoryTable has made the batch already
            # Workers' seeds come from each loader's own generator, not the global one, which
            # dropout draws from: persistent evaluation workers take theirs once per process, so
            # a resumed run would draw it at its first validation, an uninterrupted one earlier.
            generator=torch.Generator().manual_seed(self.cfg.seed),
            # A last batch of a few examples makes a noisy step (of one, it breaks a BatchNorm);
            # training reshuffles every epoch, so no example is lost for good.
            drop_last=train and len(sampler or dataset) > self.batch_size,  # this rank's share
            num_workers=self.cfg.num_workers,
            persistent_workers=self.cfg.num_workers > 0,
            pin_memory=torch.cuda.is_available(),
        )

    def _split(self, table: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Positions of the training, validation and test rows, by split_seed (the same in every
        run), stratified by class for a classifier."""
        classes = table[self.cfg.label_column[0]] if self.cfg.task == "classification" else None
        if classes is not None and classes.nunique() < 2:
            raise DataValidationError(
                f"{self.where}: label column '{classes.name}' has one class ({classes.iloc[0]}) in all "
                f"{len(table)} rows: a classifier needs examples of at least two"
            )
        held_out = self.cfg.val_fraction + self.cfg.test_fraction
        rest = None
        try:
            train, rest = train_test_split(
                np.arange(len(table)), test_size=held_out, stratify=classes, random_state=self.cfg.split_seed
            )
            val, test = train_test_split(
                rest,
                test_size=self.cfg.test_fraction / held_out,
                stratify=None if classes is None else classes.iloc[rest],
                random_state=self.cfg.split_seed,
            )
        except ValueError as error:  # too few rows, or too few of some class for a stratified split
            counts = classes.value_counts() if classes is not None else pd.Series(dtype=int)
            # A stratified split puts one row of each class in each part: a class of three rows or
            # more can still leave fewer than two held out at these fractions.
            held = classes.iloc[rest].value_counts() if classes is not None and rest is not None else counts
            if len(scarce := counts[(counts < 3) | (held.reindex(counts.index, fill_value=0) < 2)]):
                named = ", ".join(f"{name} ({rows})" for name, rows in sorted(scarce.items(), key=str)[:10])
                hint = ""
                if pd.api.types.is_numeric_dtype(classes) and len(counts) > 20:  # numbers to predict?
                    hint = f" ({len(counts)} distinct numbers: to predict a number, pass --task regression)"
                fractions = (
                    f"--val-fraction {self.cfg.val_fraction:g} and --test-fraction {self.cfg.test_fraction:g}"
                )
                raise DataValidationError(
                    f"{self.where}: cannot split {len(table)} rows into train/val/test by class: class(es) "
                    f"{named}{' ...' if len(scarce) > 10 else ''} of '{classes.name}' have too few rows to "
                    f"give training, validation and test one each at {fractions}; give more rows of them, "
                    f"larger fractions, or leave them out of the table{hint}"
                ) from None
            raise DataValidationError(
                f"{self.where}: cannot split {len(table)} rows into train/val/test: {first_line(error)}"
            ) from None
        return train, val, test

    def _encoding_of_resumed_run(self) -> TableEncoding | None:
        if self.resume_from is None:
            return None
        # mmap: the hyperparameters are read, not every tensor of the checkpoint.
        checkpoint = torch.load(self.resume_from, map_location="cpu", weights_only=True, mmap=True)
        if "encoding" not in (hyperparameters := checkpoint.get("hyper_parameters", {})):
            raise ConfigError(
                f"{self.resume_from} holds no encoding of its rows: resume it with the code that trained "
                "it, or start a new run"
            )
        return TableEncoding.from_dict(hyperparameters["encoding"])

    def _load_valid_table(self) -> pd.DataFrame:
        """The table's feature and label columns, checked (DATA-1), less the rows without a
        label; indexed by each row's position in the table as loaded."""
        table = part_function(self.source, "load_table", self.cfg, pd.DataFrame).reset_index(drop=True)
        labels = list(self.cfg.label_column)
        features = list(self.cfg.feature_columns) or [name for name in table.columns if name not in labels]
        shown = ", ".join(map(str, table.columns[:20])) + (" ..." if len(table.columns) > 20 else "")
        for flag, names in (("--label-column", labels), ("--feature-columns", features)):
            if missing := [name for name in names if name not in table.columns]:
                named = ", ".join(map(str, missing))
                raise DataValidationError(
                    f"{self.where}: no column(s) {named} (set {flag}; its columns: {shown})"
                )
        if not features:
            raise DataValidationError(f"{self.where}: no feature columns beside the label column(s) {shown}")
        table = table[[*features, *labels]]
        check_rows_and_feature_kinds(table, features, self.where)
        unlabelled = table[labels].isna().any(axis=1)
        if unlabelled.all():
            raise DataValidationError(
                f"{self.where}: none of its {len(table)} rows has a {' and '.join(labels)}"
            )
        if unlabelled.any() and (self.trainer is None or self.trainer.is_global_zero):
            print(
                f"warning: {self.where}: {unlabelled.sum()} of {len(table)} rows have no "
                f"{' or '.join(labels)}; they are left out of training and testing",
                file=sys.stderr,
            )
        table = table[~unlabelled]
        self._check_column_kinds(table, features)
        if self.cfg.task == "classification":  # a column of whole numbers with a blank reads as floats
            table = table.copy(deep=False)
            table[labels[0]] = class_values(table[labels[0]])
        # Missing feature values are allowed: the encoding fills them in.
        value_range = getattr(self.source, "value_range", lambda cfg: None)(self.cfg)
        if value_range is not None:  # a range of every feature: text has none
            self._refuse_text_under(value_range, table, features)
        numbers = [finite(), *([pa.Check.in_range(*value_range)] if value_range is not None else [])]
        columns = {
            name: pa.Column(float, numbers, nullable=True, coerce=True)
            if value_range is not None or is_numeric(table[name])
            else pa.Column(nullable=True)
            for name in features
        }
        for name in labels:
            columns[name] = (
                pa.Column(float, [finite()], coerce=True) if self.cfg.task == "regression" else pa.Column()
            )
        try:
            return validate_table(table, pa.DataFrameSchema(columns, strict=True), self.where)
        except DataValidationError as error:
            if value_range is None or "in_range" not in str(error):
                raise
            low, high, where = *value_range, getattr(self.source, "__name__", "data")
            raise DataValidationError(
                f"{error}\n  ({low:g} to {high:g} is what {where}.value_range(cfg) gives: a table of "
                "your own has its own range there, or None)"
            ) from None

    def _refuse_text_under(
        self, value_range: tuple[float, float], table: pd.DataFrame, features: list[str]
    ) -> None:
        cells = {name: table[name].dropna() for name in features if not is_numeric(table[name])}
        words = {name: found[pd.to_numeric(found, errors="coerce").isna()] for name, found in cells.items()}
        text = [name for name, found in words.items() if len(found)]
        if not text:
            return
        example = f" ({words[text[0]].iloc[0]!r} at row {words[text[0]].index[0]})"
        low, high, where = *value_range, getattr(self.source, "__name__", "data")
        raise DataValidationError(
            f"{self.where}: column(s) {', '.join(map(repr, text))} hold text{example}, but "
            f"{where}.value_range(cfg) gives {low:g} to {high:g} for every feature column: "
            "return None there for a table with text columns"
        )

    def _check_column_kinds(self, table: pd.DataFrame, features: list[str]) -> None:
        """Columns that would train, but not as meant: what to pass instead."""
        for name in self.cfg.label_column if self.cfg.task == "regression" else ():
            if not is_numeric(table[name]):
                raise DataValidationError(
                    f"{self.where}: label column '{name}' holds text ({table[name].iloc[0]!r}), not "
                    "numbers to predict: for classes pass --task classification"
                )
        label = table[self.cfg.label_column[0]]
        classifies_floats = self.cfg.task == "classification" and pd.api.types.is_float_dtype(label)
        if classifies_floats and len(fractions := label[label % 1 != 0]):
            raise DataValidationError(
                f"{self.where}: label column '{label.name}' holds fractions ({fractions.iloc[0].item()!r}), "
                "not classes: for numbers to predict pass --task regression"
            )
        refuse_identifiers(table, [name for name in features if not is_numeric(table[name])], self.where)
