"""A part's network and loss inside Lightning's loop (LIT-1, LIT-4, LOG-2, LOG-3).

The part's model.py builds the network and computes the loss; this module trains,
validates and tests it, and holds the optimizer and the learning-rate schedule.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import lightning as L
import torch
import torch.nn.functional as F
from torch import nn
from torchmetrics import MeanMetric
from torchmetrics.classification import MulticlassAccuracy, MulticlassConfusionMatrix

from src.neural.config import SLNeuralConfig
from src.training.checkpoints import config_hyperparameters, load_module
from src.training.optim import adamw
from src.training.schedules import step_schedule

BuildNetwork = Callable[[Any, int, int], nn.Module]  # (cfg, num_features, num_classes) -> network
Loss = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]  # (outputs, labels) -> per-example losses


class Classifier(L.LightningModule):
    """`build_network(cfg, num_features, num_classes)` makes the network once the data is
    set up and its shape known; `loss(outputs, labels)` gives one loss per example."""

    def __init__(
        self,
        cfg: SLNeuralConfig,
        build_network: BuildNetwork,
        loss: Loss,
        num_features: int = 0,
        classes: list | None = None,
    ) -> None:
        super().__init__()
        self.cfg, self.build_network, self.loss = cfg, build_network, loss
        # LIT-1, LOG-2: the config reaches checkpoints and W&B; the data's shape joins it
        # once known, so that a saved model can be rebuilt without the data.
        hparams = {**config_hyperparameters(cfg), "num_features": num_features, "classes": classes or []}
        self.save_hyperparameters(hparams)
        self.batch_size = cfg.batch_size  # MEM-2: BatchSizeFinder changes it
        self.net: nn.Module | None = None
        self.test_confusion_counts: list[list[int]] = []  # rows: true class; for the run's report

    def configure_model(self) -> None:
        """The network and metrics, sized by the data: Lightning calls this after the
        DataModule's setup, and again (a no-op) for test."""
        if self.net is not None:
            return
        if not self.hparams.classes:
            datamodule = self.trainer.datamodule
            self.hparams.update(num_features=datamodule.num_features, classes=datamodule.classes)
        num_classes = len(self.hparams.classes)
        self.net = self.build_network(self.cfg, self.hparams.num_features, num_classes)
        # torchmetrics accumulate across batches and DDP ranks, so evaluation over several
        # processes gives the single-process numbers (DDP-1). A NaN loss stays NaN, for the
        # finite-loss guard to see, instead of being left out of the mean.
        self.val_accuracy = MulticlassAccuracy(num_classes, average="micro")
        self.val_loss = MeanMetric(nan_strategy="disable")
        self.test_accuracy = MulticlassAccuracy(num_classes, average="micro")
        self.test_loss = MeanMetric(nan_strategy="disable")
        self.test_confusion = MulticlassConfusionMatrix(num_classes)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return self.net(features)

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> torch.Tensor:
        features, labels = batch
        loss = self.loss(self(features), labels).mean()
        self.log("train_loss", loss, on_step=True, on_epoch=True, prog_bar=True, sync_dist=True)
        return loss

    def validation_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> None:
        features, labels = batch
        outputs = self(features)
        self.val_accuracy(outputs, labels)
        # Per-example losses: the epoch's value is the mean over examples, on every rank. (Not
        # the batch mean with weight=: torchmetrics 1.9 ignores it with nan_strategy="disable".)
        self.val_loss(self.loss(outputs, labels))
        self.log("val_loss", self.val_loss, on_epoch=True, prog_bar=True)
        self.log("val_acc", self.val_accuracy, on_epoch=True, prog_bar=True)

    def test_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> None:
        features, labels = batch
        outputs = self(features)
        self.test_accuracy(outputs, labels)
        self.test_confusion.update(outputs, labels)
        self.test_loss(self.loss(outputs, labels))
        self.log("test_loss", self.test_loss, on_epoch=True)
        self.log("test_acc", self.test_accuracy, on_epoch=True)

    def on_test_epoch_end(self) -> None:
        # compute() sums the counts of every rank (DDP-1).
        self.test_confusion_counts = self.test_confusion.compute().tolist()
        self.test_confusion.reset()

    def configure_optimizers(self) -> dict:
        cfg = self.cfg
        optimizer = adamw(self, cfg.learning_rate, cfg.weight_decay)
        if cfg.scheduler == "plateau":
            plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(
                optimizer, mode="min", factor=cfg.lr_factor, patience=cfg.lr_patience
            )
            # strict=False: an epoch that ends before the first validation (--val-every-n-steps)
            # keeps the rate.
            schedule = {"scheduler": plateau, "monitor": "val_loss", "interval": "epoch", "strict": False}
            schedule["name"] = "lr"
        else:  # RES-2: over the run's optimizer steps, which Lightning counts once the data is set up
            schedule = step_schedule(optimizer, self.trainer.estimated_stepping_batches, self.hparams)
        return {"optimizer": optimizer, "lr_scheduler": schedule}


def cross_entropy(outputs: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(outputs, labels, reduction="none")


def load_classifier(
    path: Path, config_class: type[SLNeuralConfig], build_network: BuildNetwork, loss: Loss, map_location: Any
) -> Classifier:
    """A Classifier from a saved model or a checkpoint, rebuilt from the config it holds."""

    def rebuild(hparams: dict[str, Any]) -> Classifier:
        fields = {key: value for key, value in hparams.items() if key not in ("num_features", "classes")}
        cfg = config_class.from_dict(fields)
        return Classifier(cfg, build_network, loss, hparams["num_features"], hparams["classes"])

    return load_module(rebuild, path, map_location)
