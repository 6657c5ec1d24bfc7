"""PPO inside Lightning's loop: a part's actor and critic trained on collected rollouts, with
TorchRL's GAE and clipped objective (LIT-1, LOG-2, LOG-3, RL-9, RL-11..13)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import lightning as L
import torch
from tensordict import TensorDictBase
from tensordict.nn import TensorDictModule, TensorDictSequential
from torch import nn
from torchrl.modules import ValueOperator
from torchrl.objectives import ClipPPOLoss
from torchrl.objectives.value import GAE

from src.callbacks import log_to_loggers, logs_this_step
from src.rl.config import RLConfig
from src.rl.policy import ActionSpace, ObservationNormalizer
from src.training.checkpoints import config_hyperparameters, load_module
from src.training.optim import adamw
from src.training.schedules import step_schedule
from src.training.stopwatch import Stopwatch

# (cfg, num_observations, num_actions) -> (actor, critic), as a part's model.build_networks.
BuildNetworks = Callable[[Any, int, int], tuple[nn.Module, nn.Module]]
LossSettings = Callable[[Any], dict[str, Any]]  # cfg -> ClipPPOLoss's keyword arguments
LOSS_TERMS = ("loss_objective", "loss_critic", "loss_entropy", "kl_approx", "clip_fraction", "entropy")
LOGGED_TERMS = (*LOSS_TERMS, "loss", "actor_grad_norm", "critic_grad_norm")


class PPO(L.LightningModule):
    """The actor's outputs are a logit per action of a discrete env, or the mean of each value of
    a continuous env's action (src/rl/policy.py makes them a distribution). A training step
    is one collected batch: advantages by GAE, then up to `ppo_epochs` passes of minibatch
    updates, stopped once a minibatch finds the policy too far from the collecting one (RL-12)."""

    def __init__(
        self,
        cfg: RLConfig,
        build_networks: BuildNetworks,
        loss_settings: LossSettings,
        num_observations: int = 0,
        num_actions: int = 0,
        action_low: Sequence[float] = (),
        action_high: Sequence[float] = (),
    ) -> None:
        super().__init__()
        self.cfg, self.build_networks, self.loss_settings = cfg, build_networks, loss_settings
        # LIT-1, LOG-2: the env's sizes join the config once known, so that a saved model can be
        # rebuilt without the env.
        sizes = {"num_observations": num_observations, "num_actions": num_actions}
        bounds = {"action_low": list(action_low), "action_high": list(action_high)}
        self.save_hyperparameters({**config_hyperparameters(cfg), **sizes, **bounds})
        self.automatic_optimization = False  # several updates per batch, clipped by hand (RL-13)
        self.batch_size = cfg.batch_size  # MEM-2
        self.stopwatch = Stopwatch()  # PRF-2
        self.frames = 0  # environment frames trained on, kept in checkpoints
        self.actor: nn.Module | None = None
        self.observation_normalizer: ObservationNormalizer | None = None

    def configure_model(self) -> None:
        """The networks, sized by the env: Lightning calls this after the DataModule's setup."""
        if self.actor is not None:
            return
        hparams, cfg = self.hparams, self.cfg
        if not hparams.num_observations:
            data, space = self.trainer.datamodule, self.trainer.datamodule.action_space
            hparams.update(num_observations=data.num_observations, num_actions=space.size)
            hparams.update(action_low=list(space.low), action_high=list(space.high))
        self.action_space = ActionSpace(
            hparams.num_actions, tuple(hparams.action_low), tuple(hparams.action_high)
        )
        self.actor, critic = self.build_networks(cfg, hparams.num_observations, self.action_space.size)
        self.policy_network = self.actor
        if cfg.normalize_observations:  # both networks see the observations standardized
            self.observation_normalizer = ObservationNormalizer(hparams.num_observations)
            self.policy_network = nn.Sequential(self.observation_normalizer, self.actor)
            critic = nn.Sequential(self.observation_normalizer, critic)
        self.policy = self.action_space.policy(self.policy_network)
        self.critic = ValueOperator(critic, in_keys=["observation"])
        self.advantage = GAE(
            gamma=cfg.gamma, lmbda=cfg.gae_lambda, value_network=self.critic, average_gae=True
        )
        # functional=False: the networks themselves, not functional copies: a faster update.
        self.loss_module = ClipPPOLoss(self.policy, self.critic, functional=False, **self.loss_settings(cfg))

    def forward(self, observation: torch.Tensor) -> torch.Tensor:
        return self.policy_network(observation)

    def greedy_policy(self) -> TensorDictSequential:
        """The policy's most likely action, which evaluation plays, without building the
        distribution. Made on each call, not a submodule, so that checkpoints keep their keys."""
        return TensorDictSequential(
            TensorDictModule(self.policy_network, in_keys=["observation"], out_keys=["actor_outputs"]),
            TensorDictModule(self.action_space.most_likely_action, ["actor_outputs"], ["action"]),
        )

    def training_step(self, batch: TensorDictBase, batch_idx: int) -> None:
        with self.stopwatch("inference"), torch.no_grad():
            self.advantage(batch)
        with self.stopwatch("data"):
            frames = batch.reshape(-1)
        sums = torch.zeros(len(LOGGED_TERMS), device=frames.device)  # read once, after the updates
        updates = skipped = 0
        minibatches = (
            indices
            for _ in range(self.cfg.ppo_epochs)
            for indices in torch.randperm(frames.numel(), device=frames.device).split(self.batch_size)
        )
        for indices in minibatches:
            with self.stopwatch("inference"):
                terms = self.loss_module(frames[indices])
                loss = terms["loss_objective"] + terms["loss_critic"] + terms["loss_entropy"]
            # Each DDP backward is a collective, so the ranks decide on their mean KL, and
            # skip a minibatch if any rank's loss is not finite.
            kl, finite = self.trainer.strategy.reduce(
                torch.stack([terms["kl_approx"].detach().float(), torch.isfinite(loss).float()]),
                reduce_op="mean",
            ).tolist()
            if updates and kl > self.cfg.target_kl:
                break  # RL-12: the policy has moved far enough from the collecting one
            grad_norms = self._update(loss) if finite == 1.0 else None
            if grad_norms is None:  # RL-12: skipped, not applied
                skipped += 1
                continue
            updates += 1  # RL-11
            values = [*(terms[key] for key in LOSS_TERMS), loss, *grad_norms]
            sums += torch.stack([value.detach().float() for value in values])
        self.lr_schedulers().step()  # RES-2: once per collection, however many updates were made
        if self.observation_normalizer is not None:
            # After the updates, which scored the frames with the statistics that collected them;
            # every rank's frames, so that the ranks' networks stay the same.
            observations = self.all_gather(frames["observation"])
            self.observation_normalizer.update(observations.reshape(-1, observations.shape[-1]))
        made = dict(zip(LOGGED_TERMS, sums.tolist(), strict=True)) if updates else {}
        self._log_step(batch, made, updates, skipped)

    def _update(self, loss: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor] | None:
        """Backward, clip actor and critic, step; None, nothing applied, if a gradient norm is not
        finite (the same on every rank: DDP has averaged the gradients)."""
        optimizer = self.optimizers()
        with self.stopwatch("backward"):
            optimizer.zero_grad()
            self.manual_backward(loss)
            actor_norm = nn.utils.clip_grad_norm_(self.policy.parameters(), self.cfg.max_grad_norm)
            critic_norm = nn.utils.clip_grad_norm_(self.critic.parameters(), self.cfg.max_grad_norm)
            if not (torch.isfinite(actor_norm) & torch.isfinite(critic_norm)):  # one read of the device
                optimizer.zero_grad()
                return None
            optimizer.step()
        return actor_norm, critic_norm

    def _log_step(self, batch: TensorDictBase, sums: dict[str, float], updates: int, skipped: int) -> None:
        self.frames += batch.numel() * self.trainer.world_size  # every DDP rank collects a batch
        # RL-11: over the updates really made; with none, the loss is NaN.
        averages = {key: value / max(updates, 1) for key, value in sums.items()}
        if logs_this_step(self.trainer):  # no callback reads batch/: straight to the loggers
            metrics = {f"batch/{key}": value for key, value in averages.items() if key != "loss"}
            metrics |= {"batch/actual_updates": float(updates), "batch/skipped_updates": float(skipped)}
            log_to_loggers(self.trainer, metrics)
        loss = averages.get("loss", float("nan"))
        self.log("train_loss", loss, on_step=True, on_epoch=True, prog_bar=True, sync_dist=True)
        self.log("frames", float(self.frames), on_step=True, on_epoch=False)
        # RL-9: the mean over every rank's finished episodes; each rank takes part, finished or not.
        rewards = batch["next", "episode_reward"][batch["next", "done"]].float()
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
        # The epoch's value is the mean over the episodes of every DDP rank.
        for name, key in (("reward", "episode_reward"), ("length", "step_count")):
            mean = episodes["next", key].float().mean()
            self.log(f"{stage}_episode_{name}", mean, batch_size=episodes.numel(), sync_dist=True)

    def configure_optimizers(self) -> dict:
        optimizer = adamw(self, self.cfg.learning_rate, self.cfg.weight_decay)
        # RES-2: the schedule steps once per collection, as in PPO's usual annealing.
        schedule = step_schedule(optimizer, self.trainer.estimated_stepping_batches, self.hparams)
        return {"optimizer": optimizer, "lr_scheduler": schedule}

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        checkpoint["frames"] = self.frames

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        self.frames = checkpoint.get("frames", 0)


def load_ppo(
    path: Path,
    config_class: type[RLConfig],
    build_networks: BuildNetworks,
    loss_settings: LossSettings,
    map_location: Any,
) -> PPO:
    """A PPO module from a saved model or a checkpoint, rebuilt from the config it holds."""

    def rebuild(hparams: dict[str, Any]) -> PPO:
        sizes = [
            hparams.pop(name, ()) for name in ("num_observations", "num_actions", "action_low", "action_high")
        ]
        return PPO(config_class.from_dict(hparams), build_networks, loss_settings, *sizes)

    return load_module(rebuild, path, map_location)
