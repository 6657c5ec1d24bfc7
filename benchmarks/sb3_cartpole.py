"""stable-baselines3 PPO on CartPole-v1 with RL-Zoo's tuned hyperparameters, stopped
once solved: the reference the RL part's time-to-solve is raced against.

    python benchmarks/sb3_cartpole.py --seed 0 [--eval-every-frames 5120]

Runs in a venv of its own (stable-baselines3 is no dependency of a rendered project):
`nox -s race` makes one. Every `--eval-every-frames` it plays `--eval-episodes`
evaluation episodes and stops at a mean reward of 475, as the RL part's early stopping
does; then it tests on `--test-episodes` episodes. It prints one JSON line: the seed,
frames trained, the evaluation and test rewards, and whether the test reached 475.
"""

from __future__ import annotations

import argparse
import json

import gymnasium as gym
from stable_baselines3 import PPO
from stable_baselines3.common.callbacks import EvalCallback, StopTrainingOnRewardThreshold
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.monitor import Monitor

SOLVED = 475.0
# rl_zoo3/hyperparams/ppo.yml, CartPole-v1 ("Tuned"): 8 envs, 1e5 timesteps at most.
NUM_ENVS = 8
MAX_FRAMES = 100_000


def linear(start: float):
    """RL-Zoo's lin_<start>: decays to 0 over training (SB3 passes the progress left)."""
    return lambda progress_remaining: progress_remaining * start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--eval-every-frames", type=int, default=5120)
    parser.add_argument("--eval-episodes", type=int, default=5)
    parser.add_argument("--test-episodes", type=int, default=20)
    args = parser.parse_args()

    env = make_vec_env("CartPole-v1", n_envs=NUM_ENVS, seed=args.seed)
    model = PPO(
        "MlpPolicy",
        env,
        n_steps=32,
        batch_size=256,
        gae_lambda=0.8,
        gamma=0.98,
        n_epochs=20,
        ent_coef=0.0,
        learning_rate=linear(1e-3),
        clip_range=linear(0.2),
        seed=args.seed,
        device="cpu",
        verbose=0,
    )
    evaluation = EvalCallback(
        Monitor(gym.make("CartPole-v1")),
        n_eval_episodes=args.eval_episodes,
        eval_freq=max(args.eval_every_frames // NUM_ENVS, 1),
        callback_on_new_best=StopTrainingOnRewardThreshold(reward_threshold=SOLVED),
        deterministic=True,
        verbose=0,
    )
    model.learn(total_timesteps=MAX_FRAMES, callback=evaluation)
    test_env = Monitor(gym.make("CartPole-v1"))
    test_env.reset(seed=args.seed + 1000)
    test_reward, _ = evaluate_policy(model, test_env, n_eval_episodes=args.test_episodes, deterministic=True)
    print(
        json.dumps(
            {
                "seed": args.seed,
                "frames": int(model.num_timesteps),
                "best_eval_reward": float(evaluation.best_mean_reward),
                "test_reward": float(test_reward),
                "solved": bool(test_reward >= SOLVED),
            }
        )
    )


if __name__ == "__main__":
    main()
