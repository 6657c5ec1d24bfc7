"""stable-baselines3 PPO with RL-Zoo's tuned hyperparameters, stopped once solved: the
reference the RL part's time-to-solve is raced against.

    python benchmarks/sb3_ppo.py --env CartPole-v1|Pendulum-v1 --target R --max-frames N --seed 0

Runs in a venv of its own (stable-baselines3 is no dependency of a rendered project):
`nox -s race` makes one. Every `--eval-every-frames` it plays `--eval-episodes`
deterministic evaluation episodes and stops once their mean reaches the env's target, as
the RL part's early stopping does, with the RL part's config's cadence and episodes, played
at once in a vectorised env as the RL part plays them; then it tests on `--test-episodes`
episodes. It prints one JSON line: the env, seed, frames trained, the evaluation and test
rewards, and whether the test reached the target.
"""

from __future__ import annotations

import argparse
import json

from stable_baselines3 import PPO
from stable_baselines3.common.callbacks import EvalCallback, StopTrainingOnRewardThreshold
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.evaluation import evaluate_policy

MAX_EVAL_ENVS = 32  # episodes played at once, at most: the RL part's (src/rl/data.py)


def linear(start: float):
    """RL-Zoo's lin_<start>: decays to 0 over training (SB3 passes the progress left)."""
    return lambda progress_remaining: progress_remaining * start


# rl_zoo3/hyperparams/ppo.yml, the "Tuned" entries; the evaluation cadence and episodes are the
# RL part's config's. The target and the frame budget are the race's: benchmarks/rl_race.py passes them.
RACES = {
    "CartPole-v1": {
        "eval_every_frames": 4096,
        "eval_episodes": 32,
        "n_envs": 8,
        "ppo": {
            "n_steps": 32,
            "batch_size": 256,
            "gae_lambda": 0.8,
            "gamma": 0.98,
            "n_epochs": 20,
            "ent_coef": 0.0,
            "learning_rate": linear(1e-3),
            "clip_range": linear(0.2),
        },
    },
    "Pendulum-v1": {
        "eval_every_frames": 8192,
        "eval_episodes": 16,
        "n_envs": 4,
        "ppo": {
            "n_steps": 1024,
            "gae_lambda": 0.95,
            "gamma": 0.9,
            "n_epochs": 10,
            "ent_coef": 0.0,
            "learning_rate": 1e-3,
            "clip_range": 0.2,
            "use_sde": True,
            "sde_sample_freq": 4,
        },
    },
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", choices=sorted(RACES), default="CartPole-v1")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--target", type=float, required=True, help="mean evaluation reward that solves it")
    parser.add_argument("--max-frames", type=int, required=True)
    parser.add_argument("--eval-every-frames", type=int, help="default: the env's in RACES")
    parser.add_argument("--eval-episodes", type=int, help="default: the env's in RACES")
    parser.add_argument("--test-episodes", type=int, default=20)
    args = parser.parse_args()
    race = RACES[args.env]
    every = args.eval_every_frames or race["eval_every_frames"]

    episodes = args.eval_episodes or race["eval_episodes"]
    env = make_vec_env(args.env, n_envs=race["n_envs"], seed=args.seed)
    model = PPO("MlpPolicy", env, **race["ppo"], seed=args.seed, device="cpu", verbose=0)
    evaluation = EvalCallback(
        # Its episodes at once, as the RL part plays them.
        make_vec_env(args.env, n_envs=min(episodes, MAX_EVAL_ENVS), seed=args.seed + 500),
        n_eval_episodes=episodes,
        eval_freq=max(every // race["n_envs"], 1),
        callback_on_new_best=StopTrainingOnRewardThreshold(reward_threshold=args.target),
        deterministic=True,
        verbose=0,
    )
    model.learn(total_timesteps=args.max_frames, callback=evaluation)
    test_env = make_vec_env(args.env, n_envs=min(args.test_episodes, MAX_EVAL_ENVS), seed=args.seed + 1000)
    test_reward, _ = evaluate_policy(model, test_env, n_eval_episodes=args.test_episodes, deterministic=True)
    print(
        json.dumps(
            {
                "env": args.env,
                "seed": args.seed,
                "frames": int(model.num_timesteps),
                "best_eval_reward": float(evaluation.best_mean_reward),
                "test_reward": float(test_reward),
                "solved": bool(test_reward >= args.target),
            }
        )
    )


if __name__ == "__main__":
    main()
