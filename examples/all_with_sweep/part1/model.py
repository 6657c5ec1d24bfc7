"""Model of this part: an MLP classifier as a LightningModule (LIT-1, LIT-3)."""

from __future__ import annotations

from pathlib import Path

import lightning as L
import torch
import torch.nn.functional as F
from torch import nn
from torchmetrics import MeanMetric
from torchmetrics.classification import MulticlassAccuracy, MulticlassConfusionMatrix

from src.training.checkpoints import load_module, save_module
from src.training.optim import adamw
from src.training.schedules import step_schedule

from .config import DigitsConfig


class DigitsClassifier(L.LightningModule):
    def __init__(
        self,
        *,
        num_features: int,
        num_classes: int,
        hidden_sizes: tuple[int, ...],
        dropout: float,
        learning_rate: float,
        weight_decay: float,
        batch_size: int,
        # Defaults: what a checkpoint saved before schedules were a choice trained with.
        scheduler: str = "plateau",
        warmup_fraction: float = 0.05,
        min_lr_fraction: float = 0.0,
        lr_factor: float,
        lr_patience: int,
    ) -> None:
        super().__init__()
        self.save_hyperparameters()  # LIT-1, LOG-2: checkpoints and W&B get them
        # MEM-2: BatchSizeFinder changes this attribute (and the saved hyperparameter).
        self.batch_size = batch_size
        # Standardizes inputs with statistics learned from the training batches, so
        # the saved model needs no separate preprocessing step.
        layers: list[nn.Module] = [nn.BatchNorm1d(num_features, affine=False)]
        width = num_features
        for hidden in hidden_sizes:
            layers += [nn.Linear(width, hidden), nn.GELU(), nn.Dropout(dropout)]
            width = hidden
        layers.append(nn.Linear(width, num_classes))
        self.net = nn.Sequential(*layers)
        # torchmetrics accumulate across batches and DDP ranks, so evaluation over several
        # processes gives the single-process numbers (DDP-1). A NaN loss stays NaN, for
        # FiniteLossCallback to see, instead of being left out of the mean.
        self.val_accuracy = MulticlassAccuracy(num_classes)
        self.val_loss = MeanMetric(nan_strategy="disable")
        self.test_accuracy = MulticlassAccuracy(num_classes)
        self.test_loss = MeanMetric(nan_strategy="disable")
        self.test_confusion = MulticlassConfusionMatrix(num_classes)
        self.test_confusion_counts: list[list[int]] = []  # rows: true class; for the run's report

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        """Class logits."""
        return self.net(features)

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> torch.Tensor:
        features, labels = batch
        loss = F.cross_entropy(self(features), labels)
        self.log("train_loss", loss, on_step=True, on_epoch=True, prog_bar=True, sync_dist=True)
        return loss

    def validation_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> None:
        features, labels = batch
        logits = self(features)
        self.val_accuracy(logits, labels)
        # Per-example losses: the epoch's value is the mean over examples, on every rank. (Not
        # the batch mean with weight=: torchmetrics 1.9 ignores it with nan_strategy="disable".)
        self.val_loss(F.cross_entropy(logits, labels, reduction="none"))
        self.log("val_loss", self.val_loss, on_epoch=True, prog_bar=True)
        self.log("val_acc", self.val_accuracy, on_epoch=True, prog_bar=True)

    def test_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> None:
        features, labels = batch
        logits = self(features)
        self.test_accuracy(logits, labels)
        self.test_confusion.update(logits, labels)
        self.test_loss(F.cross_entropy(logits, labels, reduction="none"))
        self.log("test_loss", self.test_loss, on_epoch=True)
        self.log("test_acc", self.test_accuracy, on_epoch=True)

    def on_test_epoch_end(self) -> None:
        # compute() sums the counts of every rank (DDP-1).
        self.test_confusion_counts = self.test_confusion.compute().tolist()
        self.test_confusion.reset()

    def configure_optimizers(self) -> dict:
        optimizer = adamw(self, self.hparams.learning_rate, self.hparams.weight_decay)
        if self.hparams.scheduler == "plateau":
            plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(
                optimizer, mode="min", factor=self.hparams.lr_factor, patience=self.hparams.lr_patience
            )
            schedule = {
                "scheduler": plateau,
                "monitor": "val_loss",
                "interval": "epoch",
                # An epoch that ends before the first validation (--val-every-n-steps) keeps the rate.
                "strict": False,
                "name": "lr",
            }
        else:  # RES-2: over the run's optimizer steps, which Lightning counts once the data is set up
            schedule = step_schedule(optimizer, self.trainer.estimated_stepping_batches, self.hparams)
        return {"optimizer": optimizer, "lr_scheduler": schedule}


def build_model(cfg: DigitsConfig) -> DigitsClassifier:
    """The module for a config; the config holds every default."""
    return DigitsClassifier(
        num_features=cfg.num_features,
        num_classes=cfg.num_classes,
        hidden_sizes=cfg.hidden_sizes,
        dropout=cfg.dropout,
        learning_rate=cfg.learning_rate,
        weight_decay=cfg.weight_decay,
        batch_size=cfg.batch_size,
        scheduler=cfg.scheduler,
        warmup_fraction=cfg.warmup_fraction,
        min_lr_fraction=cfg.min_lr_fraction,
        lr_factor=cfg.lr_factor,
        lr_patience=cfg.lr_patience,
    )


def save_model(model: DigitsClassifier, path: Path) -> Path | None:
    """Weights and hyperparameters, for use outside Lightning (LIT-3); None off rank zero."""
    return save_module(model, path)


def load_model_from_checkpoint(path: Path, map_location: str | torch.device = "cpu") -> DigitsClassifier:
    """A model from `save_model()` output or a Lightning .ckpt, in eval mode (LIT-3, RES-3)."""
    return load_module(DigitsClassifier, path, map_location)
