"""The config level of the supervised neural parts (CFG-1): its fields and their checks."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

from src.config import at_least, split_problems
from src.training.config import SPANNING_SCHEDULES, LightningConfig, Schedule

Task = Literal["classification", "regression"]


@dataclass
class SLNeuralConfig(LightningConfig):
    """Supervised neural parts (Lightning).

    Attributes:
        task: What the network predicts: classification (the label's distinct values are the
            classes, two or more) or regression (one or more numeric label columns).
        data_path: A table of your own, CSV or Parquet: feature columns of numbers or text, with
            missing values allowed, and the label column(s); empty means the part's bundled data.
        label_column: Column(s) of the table that hold the label: one for classification, one or
            more numbers for regression (e.g. --label-column height weight).
        feature_columns: Columns the network reads; empty means every column but the label(s).
        scheduler: Learning-rate schedule: plateau cuts the rate when val_loss stalls (once per
            epoch); constant, cosine (after a linear warmup) and onecycle follow the optimizer
            steps, the last two over num_epochs, which they need set.
        lr_factor: Under scheduler plateau, the learning rate is multiplied by this when val_loss stalls.
        lr_patience: Under scheduler plateau, epochs without a lower val_loss before the rate is cut.
        gradient_accumulation_steps: Batches whose gradients add up to one optimizer step.
        gradient_clip_val: Gradients are clipped to this total norm before each optimizer step;
            0 turns clipping off.
        find_batch_size: Replace batch_size with the largest that fits in memory before training;
            worth it on a GPU, off so that hyperparameters do not depend on the machine.
        num_workers: Data-loader worker processes; 0 loads batches in the training process.
        val_fraction: Share of the rows held out for validation.
        test_fraction: Share of the rows held out for the final test.
        split_seed: Seed of the train/val/test split, apart from seed so that changing seed
            keeps the split.
    """

    # What a resume may not change: which rows train, validate and test, and what is predicted.
    kept_on_resume: ClassVar = (
        "task",
        "data_path",
        "label_column",
        "feature_columns",
        "val_fraction",
        "test_fraction",
        "split_seed",
    )

    task: Task = "classification"
    data_path: str = ""
    label_column: tuple[str, ...] = ("label",)
    feature_columns: tuple[str, ...] = ()
    scheduler: Schedule = "plateau"
    lr_factor: float = 0.5
    lr_patience: int = 5
    gradient_accumulation_steps: int = 1
    gradient_clip_val: float = 1.0
    find_batch_size: bool = False
    num_workers: int = 0
    val_fraction: float = 0.15
    test_fraction: float = 0.15
    split_seed: int = 0

    def problems(self) -> list[str]:
        found = super().problems()
        found += at_least(self, gradient_accumulation_steps=1, gradient_clip_val=0, num_workers=0)
        found += split_problems(self.val_fraction, self.test_fraction)
        if not 0 < self.lr_factor < 1:
            found.append(f"lr_factor {self.lr_factor}: must be in (0, 1)")
        if self.find_batch_size and self.scheduler in SPANNING_SCHEDULES:
            # The schedule's length is fixed before the search changes the steps per epoch.
            found.append(
                f"find_batch_size with scheduler {self.scheduler}: find the batch size in a run of its "
                "own, then give it as batch_size"
            )
        # A bare string, as a tree part's label_column is written, would be read letter by letter below.
        columns = {name: getattr(self, name) for name in ("label_column", "feature_columns")}
        if text := {name: value for name, value in columns.items() if isinstance(value, str)}:
            return found + [f'{n} {v!r}: a tuple of column names, as ("{v}",)' for n, v in text.items()]
        if not self.label_column:
            found.append("label_column: name the column that holds the label")
        elif self.task == "classification" and len(self.label_column) > 1:
            found.append(
                f"label_column {' '.join(self.label_column)}: a classifier predicts one column; "
                "for several numbers pass --task regression"
            )
        for field in ("label_column", "feature_columns"):
            names = getattr(self, field)
            if repeated := sorted({name for name in names if names.count(name) > 1}):
                found.append(f"{field}: {', '.join(repeated)} listed more than once")
        if both := [name for name in self.feature_columns if name in self.label_column]:
            found.append(f"feature_columns: {', '.join(both)} is a label column; the network cannot read it")
        if self.data_path:  # here, so that a bad one is refused before a run directory exists
            from src.data_checks import data_path_problems  # pandas: only for a table of one's own

            found += data_path_problems(self.data_path, (*self.label_column, *self.feature_columns))
        return found
