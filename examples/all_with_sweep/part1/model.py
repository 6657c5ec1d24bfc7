"""The network of this part and its loss for each task: an MLP.

A new hyperparameter is a field in config.py, read here as `cfg.<field>`. The network's inputs
are the table's features encoded (numbers standardised, text one-hot); its outputs a logit per
class, or a number per label column, standardised with the training rows' mean and deviation.
"""

from __future__ import annotations

from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from src.neural.module import SupervisedModule, load_supervised_module
from src.training.checkpoints import save_module

from .config import DigitsConfig


def build_network(cfg: DigitsConfig, num_features: int, num_outputs: int) -> nn.Module:
    layers: list[nn.Module] = []
    width = num_features
    for hidden in cfg.hidden_sizes:
        layers += [nn.Linear(width, hidden), nn.GELU(), nn.Dropout(cfg.dropout)]
        width = hidden
    layers.append(nn.Linear(width, num_outputs))
    return nn.Sequential(*layers)


def classification_loss(logits: torch.Tensor, classes: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits, classes, reduction="none")  # one per example


def regression_loss(predicted: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Squared error of each example, averaged over its (standardised) label columns."""
    return F.mse_loss(predicted, targets, reduction="none").mean(dim=1)


LOSSES = {"classification": classification_loss, "regression": regression_loss}  # by cfg.task


def build_model(cfg: DigitsConfig) -> SupervisedModule:
    """The LightningModule that trains the network; it sizes it once the data is set up."""
    return SupervisedModule(cfg, build_network, LOSSES[cfg.task])


def save_model(model: SupervisedModule, path: Path) -> Path | None:
    """Weights and hyperparameters, the encoding among them, for use outside Lightning (LIT-3);
    None off rank zero."""
    return save_module(model, path)


def load_model_from_checkpoint(path: Path, map_location: str | torch.device = "cpu") -> SupervisedModule:
    """A model from `save_model()` output or a Lightning .ckpt, in eval mode (LIT-3, RES-3)."""
    return load_supervised_module(path, DigitsConfig, build_network, LOSSES, map_location)
