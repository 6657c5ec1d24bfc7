"""The config level of the reinforcement-learning parts (CFG-1): PPO's fields and their checks."""

from __future__ import annotations

from dataclasses import dataclass

from src.config import LightningConfig, at_least

MAX_EPISODES = 10_000  # evaluation episodes: Lightning times training, not evaluation


@dataclass
class RLConfig(LightningConfig):
    """Reinforcement-learning parts (TorchRL's PPO inside Lightning). A Lightning epoch is
    `iterations_per_epoch` collections of `frames_per_batch` frames, each followed by
    up to `ppo_epochs` passes of minibatch updates; evaluation episodes are the validation.

    Attributes:
        env_name: Environment to train on, as the part's data.make_env() names them.
        num_envs: Environments stepping together; a collection takes frames_per_batch / num_envs
            steps of each.
        env_workers: Worker processes stepping them (ParallelEnv), num_envs / env_workers each
            as one batch; 0 steps them all in this process. Give an env that is slow to step
            workers, up to one per free core; a fast one like CartPole, 0.
        frames_per_batch: Frames collected across all environments before each round of
            policy updates.
        iterations_per_epoch: Collections (each followed by its updates) per epoch;
            evaluation follows each epoch.
        gamma: Discount factor of future rewards, in (0, 1].
        eval_episodes: Evaluation episodes after each epoch; their mean reward is what early
            stopping watches.
        test_episodes: Episodes of the final test of the best checkpoint.
        target_reward: Training ends once the mean evaluation reward reaches this; None takes
            the reward gymnasium registers as solving env_name (475 for CartPole-v1), if any;
            inf never ends on reward.
        batch_size: PPO minibatch, in frames.
        ppo_epochs: Passes over each collected batch of frames.
        clip_epsilon: PPO clip range of the probability ratio, in (0, 1).
        gae_lambda: GAE lambda, the bias-variance trade-off of advantage estimates, in [0, 1].
        entropy_coef: Weight of the entropy bonus in the loss; larger explores more.
        critic_coef: Weight of the value loss in the loss.
        target_kl: A collection's updates stop once the policy's approximate KL divergence
            from the collecting policy passes this.
        max_grad_norm: Actor and critic gradients are each clipped to this total norm.
        normalize_observations: Standardize the networks' inputs by the running mean and
            variance of every observation collected so far (kept in checkpoints and the saved
            model); helps where observations differ in scale, as a velocity beside an angle.
        log_every_n_steps: Collections between per-step metric logs (a step is a whole
            collection and its updates).
        val_every_n_steps: Evaluate every this many collections, across epoch ends, instead of
            after each epoch; early stopping's patience then counts these evaluations. 0
            evaluates after each epoch.
        checkpoint_every_n_steps: Also rewrite checkpoints/last.ckpt every this many
            collections; 0 never does on a step count.
    """

    env_name: str = ""
    num_envs: int = 8
    # RL-1: process parallelism where stepping costs more than passing the steps between
    # processes; in this process, a batch of cheap envs steps faster than any workers.
    env_workers: int = 0
    frames_per_batch: int = 1024
    iterations_per_epoch: int = 5
    gamma: float = 0.99
    eval_episodes: int = 5
    test_episodes: int = 20
    target_reward: float | None = None
    batch_size: int = 256  # the PPO minibatch: what BatchSizeFinder would change (MEM-2)
    log_every_n_steps: int = 1  # a step is a whole collection and its updates
    ppo_epochs: int = 10
    clip_epsilon: float = 0.2
    gae_lambda: float = 0.95
    entropy_coef: float = 0.0
    critic_coef: float = 0.5
    target_kl: float = 0.05  # RL-12: KL early stopping, checked per minibatch
    max_grad_norm: float = 0.5  # RL-13: clip_grad_norm_ on actor and critic
    normalize_observations: bool = False

    def problems(self) -> list[str]:
        found = [
            *super().problems(),
            *at_least(
                self, num_envs=1, frames_per_batch=1, iterations_per_epoch=1, eval_episodes=1, test_episodes=1
            ),
        ]
        found += [
            f"{name} {value}: must be at most {MAX_EPISODES} (evaluation ignores the time budget)"
            for name, value in (("eval_episodes", self.eval_episodes), ("test_episodes", self.test_episodes))
            if value > MAX_EPISODES
        ]
        if self.env_workers < 0 or (self.env_workers and self.num_envs % self.env_workers):
            found.append(f"env_workers {self.env_workers}: use 0 or a divisor of num_envs {self.num_envs}")
        if self.num_envs >= 1 and self.frames_per_batch % self.num_envs:
            found.append(
                f"frames_per_batch {self.frames_per_batch}: must be a multiple of num_envs {self.num_envs}"
            )
        if not 0 < self.gamma <= 1:
            found.append(f"gamma {self.gamma}: must be in (0, 1]")
        if not self.env_name:
            found.append("env_name: name the environment to train on")
        if self.batch_size > self.frames_per_batch:
            found.append(f"batch_size {self.batch_size}: at most frames_per_batch {self.frames_per_batch}")
        if self.ppo_epochs < 1 or not 0 < self.clip_epsilon < 1 or not 0 <= self.gae_lambda <= 1:
            found.append(
                f"ppo_epochs {self.ppo_epochs}, clip_epsilon {self.clip_epsilon}, gae_lambda "
                f"{self.gae_lambda}: need >= 1, (0, 1) and [0, 1]"
            )
        if self.target_kl <= 0 or self.max_grad_norm <= 0 or self.critic_coef <= 0:
            found.append(
                f"target_kl {self.target_kl}, max_grad_norm {self.max_grad_norm}, critic_coef "
                f"{self.critic_coef}: must be positive"
            )
        return found
