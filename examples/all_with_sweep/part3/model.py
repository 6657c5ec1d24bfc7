"""This part's networks, PPO's actor and critic (two MLPs), and its loss settings. A new
hyperparameter is a field in config.py, read here as `cfg.<field>`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import nn
from torchrl.modules import MLP

from src.rl.module import PPO, load_ppo
from src.training.checkpoints import save_module

from .config import CartPoleConfig


def build_networks(
    cfg: CartPoleConfig, num_observations: int, num_actions: int
) -> tuple[nn.Module, nn.Module]:
    """The actor, `num_actions` numbers from an observation, and the critic, its value. The actor's
    outputs are a logit per discrete action, or the mean of each continuous action value (its spread
    is learned beside it: src/rl/policy.py)."""
    layers = {"num_cells": list(cfg.hidden_sizes), "activation_class": nn.Tanh}
    return MLP(num_observations, num_actions, **layers), MLP(num_observations, 1, **layers)


def loss_settings(cfg: CartPoleConfig) -> dict[str, Any]:
    return {
        "clip_epsilon": cfg.clip_epsilon,
        "entropy_coeff": cfg.entropy_coef,
        "critic_coeff": cfg.critic_coef,
        "loss_critic_type": "l2",
    }


def build_model(cfg: CartPoleConfig) -> PPO:
    return PPO(cfg, build_networks, loss_settings)


def save_model(model: PPO, path: Path) -> Path | None:
    """Weights and hyperparameters, for use outside Lightning (LIT-3); None off rank zero."""
    return save_module(model, path)


def load_model_from_checkpoint(path: Path, map_location: str | torch.device = "cpu") -> PPO:
    """A model from `save_model()` output or a Lightning .ckpt, in eval mode (LIT-3, RES-3)."""
    return load_ppo(path, CartPoleConfig, build_networks, loss_settings, map_location)
