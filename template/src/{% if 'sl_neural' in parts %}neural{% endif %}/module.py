"""A part's network and loss inside Lightning's loop (LIT-1, LIT-4, LOG-2, LOG-3): training,
validation accuracy (classifier) or RMSE in the label's units (regression), and the test's
predictions of every row with their metrics (src/predictions.py), DDP-correct through torchmetrics.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import lightning as L
import numpy as np
import pandas as pd
import torch
from torch import nn
from torchmetrics import CatMetric, MeanMetric, MeanSquaredError
from torchmetrics.classification import MulticlassAccuracy

from src.config import ConfigError
from src.neural.config import SLNeuralConfig
from src.neural.encoding import TableEncoding
from src.predictions import task_metrics, write_predictions
from src.training.checkpoints import config_hyperparameters, load_module
from src.training.optim import adamw
from src.training.precision import full_float32
from src.training.schedules import step_schedule

BuildNetwork = Callable[[Any, int, int], nn.Module]  # (cfg, num_features, num_outputs) -> network
Loss = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]  # (outputs, targets) -> per-example losses
ENCODING = "encoding"  # the hyperparameter that holds the table's encoding (src/neural/encoding.py)
# CatMetric gathers float32, whose whole numbers are exact only up to 2**24: a row number travels
# as its quotient and remainder by that.
ROW_PART = 2**24


class SupervisedModule(L.LightningModule):
    """`build_network(cfg, num_features, num_outputs)` makes the network once the data's encoding
    is known: a logit per class, or a number per label column (standardised: src/neural/encoding.py);
    `loss(outputs, targets)` gives one loss per example."""

    def __init__(
        self,
        cfg: SLNeuralConfig,
        build_network: BuildNetwork,
        loss: Loss,
        encoding: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__()
        self.cfg, self.build_network, self.loss = cfg, build_network, loss
        # LIT-1, LOG-2: the config reaches checkpoints and W&B; the table's encoding joins it
        # once fitted, so that a saved model encodes new rows as it was trained on them.
        self.save_hyperparameters({**config_hyperparameters(cfg), ENCODING: encoding})
        self.batch_size = cfg.batch_size  # MEM-2: BatchSizeFinder changes it
        self.net: nn.Module | None = None
        self.encoding: TableEncoding | None = None
        self.test_predictions: pd.DataFrame | None = None  # after test(): src/predictions.py's table

    def configure_model(self) -> None:
        """The network and metrics, sized by the data: Lightning calls this after the DataModule's
        setup (and again for test)."""
        if self.net is not None:
            return
        if self.hparams[ENCODING] is None:
            self.hparams[ENCODING] = self.trainer.datamodule.encoding.to_dict()
        self.encoding = encoding = TableEncoding.from_dict(self.hparams[ENCODING])
        self.net = self.build_network(self.cfg, encoding.features.width, encoding.num_outputs)
        # torchmetrics accumulate across DDP ranks: several processes give one's numbers (DDP-1).
        # A NaN loss stays NaN, for the finite-loss guard to see, not left out of the mean.
        self.val_loss, self.test_loss = MeanMetric(nan_strategy="disable"), MeanMetric(nan_strategy="disable")
        # Every rank's test rows and outputs, gathered in rank order, both (DDP-1).
        self.test_row_quotients = CatMetric(nan_strategy="disable")
        self.test_row_remainders = CatMetric(nan_strategy="disable")
        self.test_outputs = CatMetric(nan_strategy="disable")
        if encoding.task == "classification":
            self.val_accuracy = MulticlassAccuracy(encoding.num_outputs, average="micro")
        else:  # per label column, in its own units
            self.val_rmse = nn.ModuleList(MeanSquaredError(squared=False) for _ in encoding.targets)
            several = len(encoding.targets) > 1
            self.val_rmse_names = [f"val_rmse_{name}" if several else "val_rmse" for name in encoding.targets]

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        return self.net(inputs)

    def training_step(self, batch: tuple[torch.Tensor, ...], batch_idx: int) -> torch.Tensor:
        inputs, targets, _ = batch
        loss = self.loss(self(inputs), targets).mean()
        self.log("train_loss", loss, on_step=True, on_epoch=True, prog_bar=True, sync_dist=True)
        return loss

    def validation_step(self, batch: tuple[torch.Tensor, ...], batch_idx: int) -> None:
        inputs, targets, _ = batch
        outputs = self(inputs)
        # Per-example losses: the epoch's value is the mean over examples, on every rank. (Not
        # the batch mean with weight=: torchmetrics 1.9 ignores it with nan_strategy="disable".)
        self.val_loss(self.loss(outputs, targets))
        self.log("val_loss", self.val_loss, on_epoch=True, prog_bar=True)
        if self.encoding.task == "classification":
            self.val_accuracy(outputs, targets)
            self.log("val_acc", self.val_accuracy, on_epoch=True, prog_bar=True)
            return
        scales = torch.tensor(self.encoding.target_scales, device=outputs.device)
        predicted, true = outputs.float() * scales, targets.float() * scales  # errors in the labels' units
        for column, (name, rmse) in enumerate(zip(self.val_rmse_names, self.val_rmse, strict=True)):
            rmse(predicted[:, column], true[:, column])
            self.log(name, rmse, on_epoch=True, prog_bar=True)

    def test_step(self, batch: tuple[torch.Tensor, ...], batch_idx: int) -> None:
        inputs, targets, rows = batch
        # The test metrics are those `predict` (float32) gives again on any device: bf16's and
        # TF32's outputs differ from float32's in the third digit.
        with full_float32(self.device.type):
            outputs = self(inputs)
        self.test_loss(self.loss(outputs, targets))
        self.log("test_loss", self.test_loss, on_epoch=True)
        self.test_row_quotients.update(rows // ROW_PART)
        self.test_row_remainders.update(rows % ROW_PART)
        self.test_outputs.update(outputs.float())

    def on_test_epoch_end(self) -> None:
        """Every test row's prediction, on every rank, and their metrics (src/predictions.py)."""
        gathered = (self.test_row_quotients, self.test_row_remainders, self.test_outputs)
        quotients, remainders, outputs = (metric.compute().cpu().numpy() for metric in gathered)
        for metric in gathered:
            metric.reset()
        # CatMetric gives a single value as a 0-d tensor: a test split of one row.
        rows = (quotients.astype(np.int64) * ROW_PART + remainders.astype(np.int64)).reshape(-1)
        outputs = outputs.reshape(rows.size, -1)
        order = rows.argsort()
        labels = self.trainer.datamodule.label_values.loc[rows[order]]  # as the table holds them
        self.test_predictions = self.encoding.predictions(rows[order], outputs[order], labels)
        for name, value in task_metrics(self.test_predictions).items():
            # Every rank computed the same number: syncing averages equal values (DDP-1).
            self.log(f"test_{name}", value, sync_dist=True)

    def save_test_predictions(self, path: Path) -> None:
        """The last test()'s predictions, which every rank holds whole, written by rank zero (DDP-1)."""
        if self.trainer.is_global_zero:
            write_predictions(self.test_predictions, path)

    def configure_optimizers(self) -> dict:
        cfg = self.cfg
        optimizer = adamw(self, cfg.learning_rate, cfg.weight_decay)
        if cfg.scheduler == "plateau":
            plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(
                optimizer, mode="min", factor=cfg.lr_factor, patience=cfg.lr_patience
            )
            # strict=False: an epoch that ends before the first validation keeps the rate.
            schedule = dict(scheduler=plateau, monitor="val_loss", interval="epoch", strict=False, name="lr")
        else:  # RES-2: over the run's optimizer steps, which Lightning counts once the data is set up
            schedule = step_schedule(optimizer, self.trainer.estimated_stepping_batches, self.hparams)
        return {"optimizer": optimizer, "lr_scheduler": schedule}


def load_supervised_module(
    path: Path,
    config_class: type[SLNeuralConfig],
    build_network: BuildNetwork,
    losses: Mapping[str, Loss],
    map_location: Any,
) -> SupervisedModule:
    """A SupervisedModule from a saved model or a checkpoint, rebuilt from the config and
    the encoding it holds; `losses` by task, as the part's model.py gives them."""

    def rebuild(hparams: dict[str, Any]) -> SupervisedModule:
        if not hparams.get(ENCODING):
            raise ConfigError(f"{path} holds no encoding of its table: it was saved by other code than this")
        cfg = config_class.from_dict({key: value for key, value in hparams.items() if key != ENCODING})
        return SupervisedModule(cfg, build_network, losses[cfg.task], hparams[ENCODING])

    return load_module(rebuild, path, map_location)
