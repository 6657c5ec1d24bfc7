"""Model of this part: PPO's actor and critic as a LightningModule, with TorchRL's
own GAE and clipped objective (LIT-1, LIT-3, RL-11..13)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import lightning as L
import torch
from tensordict import TensorDictBase
from tensordict.nn import TensorDictModule, TensorDictSequential
from torch import nn
from torch.distributions import Categorical
from torchrl.modules import MLP, ProbabilisticActor, ValueOperator
from torchrl.objectives import ClipPPOLoss
from torchrl.objectives.value import GAE

from src.training.checkpoints import load_module, save_module
from src.training.optim import adamw
from src.training.schedules import step_schedule
from src.training.stopwatch import Stopwatch

from .config import CartPoleConfig

LOSS_TERMS = ("loss_objective", "loss_critic", "loss_entropy", "kl_approx", "clip_fraction", "entropy")
LOGGED_TERMS = (*LOSS_TERMS, "loss", "actor_grad_norm", "critic_grad_norm")


class PPOModule(L.LightningModule):
    """One training step is one collected batch: advantages by GAE, then up to
    `ppo_epochs` passes of minibatch updates. The batch's remaining updates are
    dropped once a minibatch finds the policy too far from the one that collected
    the batch (KL early stopping, RL-12), before that minibatch is applied."""

    def __init__(
        self,
        *,
        num_observations: int,
        num_actions: int,
        hidden_sizes: tuple[int, ...],
        learning_rate: float,
        weight_decay: float,
        batch_size: int,
        # Defaults: what a checkpoint saved before schedules were a choice trained with.
        scheduler: str = "constant",
        warmup_fraction: float = 0.05,
        min_lr_fraction: float = 0.0,
        ppo_epochs: int,
        clip_epsilon: float,
        gamma: float,
        gae_lambda: float,
        entropy_coef: float,
        critic_coef: float,
        target_kl: float,
        max_grad_norm: float,
    ) -> None:
        super().__init__()
        self.save_hyperparameters()  # hparams reach W&B's config (LOG-2)
        self.automatic_optimization = False  # several updates per batch, clipped by hand (RL-13)
        self.batch_size = batch_size  # the PPO minibatch (MEM-2)
        layers = {"num_cells": list(hidden_sizes), "activation_class": nn.Tanh}
        self.actor = MLP(num_observations, num_actions, **layers)
        self.policy = ProbabilisticActor(
            TensorDictModule(self.actor, in_keys=["observation"], out_keys=["logits"]),
            in_keys=["logits"],
            distribution_class=Categorical,
            return_log_prob=True,  # PPO's ratio needs the collecting policy's log-probabilities
        )
        self.critic = ValueOperator(MLP(num_observations, 1, **layers), in_keys=["observation"])
        self.advantage = GAE(gamma=gamma, lmbda=gae_lambda, value_network=self.critic, average_gae=True)
        self.loss_module = ClipPPOLoss(
            self.policy,
            self.critic,
            clip_epsilon=clip_epsilon,
            entropy_coeff=entropy_coef,
            critic_coeff=critic_coef,
            loss_critic_type="l2",
            functional=False,  # the networks themselves, not functional copies: a faster update
        )
        self.register_load_state_dict_pre_hook(_from_functional_loss)
        self.stopwatch = Stopwatch()  # PRF-2: this step's inference / backward / data seconds
        self.frames = 0  # environment frames trained on, kept in checkpoints

    def forward(self, observation: torch.Tensor) -> torch.Tensor:
        """The policy's action logits."""
        return self.actor(observation)

    def greedy_policy(self) -> TensorDictSequential:
        """The policy's most likely action, which evaluation plays: the actor's logits and
        their argmax, without the distribution and log-probability that the policy builds
        for PPO (a fifth of an evaluation step). Made on each call, not a submodule, so that
        checkpoints keep their keys."""
        return TensorDictSequential(
            TensorDictModule(self.actor, in_keys=["observation"], out_keys=["logits"]),
            TensorDictModule(most_likely_action, in_keys=["logits"], out_keys=["action"]),
        )

    def training_step(self, batch: TensorDictBase, batch_idx: int) -> None:
        with self.stopwatch("inference"), torch.no_grad():
            self.advantage(batch)
        with self.stopwatch("data"):
            frames = batch.reshape(-1)
        # The logged terms are summed on the device and read once, after the updates.
        sums = torch.zeros(len(LOGGED_TERMS), device=frames.device)
        updates = skipped = 0
        for indices in self._minibatches(frames.numel(), frames.device):
            with self.stopwatch("inference"):
                terms = self.loss_module(frames[indices])
                loss = terms["loss_objective"] + terms["loss_critic"] + terms["loss_entropy"]
            # Under DDP each backward is a collective, so the ranks make the same updates:
            # they decide on their mean KL, and skip a minibatch if any rank's loss is not finite.
            kl, finite = self.trainer.strategy.reduce(
                torch.stack([terms["kl_approx"].detach().float(), torch.isfinite(loss).float()]),
                reduce_op="mean",
            ).tolist()
            if updates and kl > self.hparams.target_kl:
                break  # RL-12: the policy has moved far enough from the collecting one
            grad_norms = self._update(loss) if finite == 1.0 else None
            if grad_norms is None:  # RL-12: a non-finite loss or gradient is skipped, not applied
                skipped += 1
                continue
            updates += 1  # RL-11: the updates really made
            values = [*(terms[key] for key in LOSS_TERMS), loss, *grad_norms]
            sums += torch.stack([value.detach().float() for value in values])
        self.lr_schedulers().step()  # once per collection, however many updates KL early stopping left
        # No update made, nothing to average: the batch's loss is logged as NaN.
        made = dict(zip(LOGGED_TERMS, sums.tolist(), strict=True)) if updates else {}
        self._log_step(batch, made, updates, skipped)

    def _minibatches(self, size: int, device: torch.device) -> Iterator[torch.Tensor]:
        """Indices of `ppo_epochs` shuffled passes over a batch of `size` frames."""
        for _ in range(self.hparams.ppo_epochs):
            yield from torch.randperm(size, device=device).split(self.batch_size)

    def _update(self, loss: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor] | None:
        """Backward, clip actor and critic, step; None (nothing applied) if a gradient
        norm is not finite (the same on every rank: DDP has averaged the gradients)."""
        optimizer = self.optimizers()
        with self.stopwatch("backward"):
            optimizer.zero_grad()
            self.manual_backward(loss)
            # RL-13: clip_grad_norm_ really called, separately for actor and critic.
            actor_norm = nn.utils.clip_grad_norm_(self.policy.parameters(), self.hparams.max_grad_norm)
            critic_norm = nn.utils.clip_grad_norm_(self.critic.parameters(), self.hparams.max_grad_norm)
            if not (torch.isfinite(actor_norm) & torch.isfinite(critic_norm)):  # one read of the device
                optimizer.zero_grad()
                return None
            optimizer.step()
        return actor_norm, critic_norm

    def _log_step(self, batch: TensorDictBase, sums: dict[str, float], updates: int, skipped: int) -> None:
        self.frames += batch.numel() * self.trainer.world_size  # every DDP rank collects a batch
        # Over the updates really made: KL early stopping makes them fewer (RL-11).
        averages = {key: value / max(updates, 1) for key, value in sums.items()}
        metrics = {f"batch/{key}": value for key, value in averages.items() if key != "loss"}
        metrics |= {"batch/actual_updates": float(updates), "batch/skipped_updates": float(skipped)}
        self.log_dict(metrics, on_step=True, on_epoch=False, batch_size=1)
        loss = averages.get("loss", float("nan"))
        self.log("train_loss", loss, on_step=True, on_epoch=True, prog_bar=True, sync_dist=True)
        self.log("frames", float(self.frames), on_step=True, on_epoch=False)
        # RL-9: rewards and done flags are read from batch["next"], where the step put them.
        rewards = batch["next", "episode_reward"][batch["next", "done"]].float()
        # The mean over every rank's finished episodes; each rank takes part, finished or not.
        total, count = self.trainer.strategy.reduce(
            torch.stack([rewards.sum(), torch.tensor(float(rewards.numel()), device=rewards.device)]),
            reduce_op="sum",
        )
        if count > 0:
            mean = total / count
            self.log(
                "episode_reward", mean, on_step=True, on_epoch=True, batch_size=int(count), sync_dist=True
            )

    def validation_step(self, episodes: TensorDictBase, batch_idx: int) -> None:
        self._log_episodes("val", episodes)

    def test_step(self, episodes: TensorDictBase, batch_idx: int) -> None:
        self._log_episodes("test", episodes)

    def _log_episodes(self, stage: str, episodes: TensorDictBase) -> None:
        # A batch holds the last steps of whole episodes, the steps marked done; the epoch's
        # value is the mean over episodes, of every DDP rank's. (A data.py rendered before
        # v0.3.0 yields one episode's every step: its last, done, step is the one counted.)
        ends = episodes["next", "done"].reshape(-1).clone()
        ends[-1] |= not ends.any()  # an episode that never ended counts where it stopped
        rewards = episodes["next", "episode_reward"].reshape(-1)[ends].float()
        lengths = episodes["next", "step_count"].reshape(-1)[ends].float()
        count = int(ends.sum())
        self.log(f"{stage}_episode_reward", rewards.mean(), batch_size=count, sync_dist=True)
        self.log(f"{stage}_episode_length", lengths.mean(), batch_size=count, sync_dist=True)

    def configure_optimizers(self) -> dict:
        optimizer = adamw(self, self.hparams.learning_rate, self.hparams.weight_decay)
        # RES-2: the schedule's step is a collection (Lightning's step here), as in PPO's usual
        # annealing: the updates per collection vary, the collections per run do not.
        schedule = step_schedule(optimizer, self.trainer.estimated_stepping_batches, self.hparams)
        return {"optimizer": optimizer, "lr_scheduler": schedule}

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        checkpoint["frames"] = self.frames

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        self.frames = checkpoint.get("frames", 0)


def most_likely_action(logits: torch.Tensor) -> torch.Tensor:
    return logits.argmax(dim=-1)


def _from_functional_loss(module: nn.Module, state_dict: dict[str, Any], prefix: str, *args: Any) -> None:
    """Checkpoints saved before v0.3.0 name the loss's parameters as its functional copies."""
    old = [key for key in state_dict if key.startswith(f"{prefix}loss_module.") and "_network_params." in key]
    for key in old:
        state_dict[key.replace("_network_params.", "_network.")] = state_dict.pop(key)


def build_model(cfg: CartPoleConfig, num_observations: int, num_actions: int) -> PPOModule:
    """The module for a config and an environment's sizes; the config holds every default."""
    return PPOModule(
        num_observations=num_observations,
        num_actions=num_actions,
        hidden_sizes=cfg.hidden_sizes,
        learning_rate=cfg.learning_rate,
        weight_decay=cfg.weight_decay,
        batch_size=cfg.batch_size,
        scheduler=cfg.scheduler,
        warmup_fraction=cfg.warmup_fraction,
        min_lr_fraction=cfg.min_lr_fraction,
        ppo_epochs=cfg.ppo_epochs,
        clip_epsilon=cfg.clip_epsilon,
        gamma=cfg.gamma,
        gae_lambda=cfg.gae_lambda,
        entropy_coef=cfg.entropy_coef,
        critic_coef=cfg.critic_coef,
        target_kl=cfg.target_kl,
        max_grad_norm=cfg.max_grad_norm,
    )


def save_model(model: PPOModule, path: Path) -> Path | None:
    """Weights and hyperparameters, for use outside Lightning (LIT-3); None off rank zero."""
    return save_module(model, path)


def load_model_from_checkpoint(path: Path, map_location: str | torch.device = "cpu") -> PPOModule:
    """A model from `save_model()` output or a Lightning .ckpt, in eval mode (LIT-3, RES-3)."""
    return load_module(lambda hyperparameters: PPOModule(**hyperparameters), path, map_location)
