"""The network of this part and its loss: an MLP classifier.

To change the model, change `build_network`; a new hyperparameter is a field in
config.py, read here as `cfg.<field>`.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from src.neural.module import Classifier, cross_entropy, load_classifier
from src.training.checkpoints import save_module

from .config import DigitsConfig

loss = cross_entropy  # per-example losses of (class logits, labels)


def build_network(cfg: DigitsConfig, num_features: int, num_classes: int) -> nn.Module:
    """Class logits from a batch of feature rows."""
    # Standardizes inputs with statistics learned from the training batches, so the saved
    # model needs no separate preprocessing step.
    layers: list[nn.Module] = [nn.BatchNorm1d(num_features, affine=False)]
    width = num_features
    for hidden in cfg.hidden_sizes:
        layers += [nn.Linear(width, hidden), nn.GELU(), nn.Dropout(cfg.dropout)]
        width = hidden
    layers.append(nn.Linear(width, num_classes))
    return nn.Sequential(*layers)


def build_model(cfg: DigitsConfig) -> Classifier:
    """The LightningModule that trains the network; it sizes it once the data is set up."""
    return Classifier(cfg, build_network, loss)


def save_model(model: Classifier, path: Path) -> Path | None:
    """Weights and hyperparameters, for use outside Lightning (LIT-3); None off rank zero."""
    return save_module(model, path)


def load_model_from_checkpoint(path: Path, map_location: str | torch.device = "cpu") -> Classifier:
    """A model from `save_model()` output or a Lightning .ckpt, in eval mode (LIT-3, RES-3)."""
    return load_classifier(path, DigitsConfig, build_network, loss, map_location)
