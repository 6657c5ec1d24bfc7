"""Play a run's saved policy (model.pt, else checkpoints/best.ckpt) on the CPU: a part's
`python -m partN.evaluate RUN_DIR`. Its episodes are those of the run's test unless told
otherwise; a path that is not a run of the part is one line on stderr, exit status 2."""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Annotated, Any

import tyro

from src.config import ConfigError, first_line
from src.rl.config import MAX_EPISODES

POLICY_FILES = ("model.pt", "checkpoints/best.ckpt")


@dataclass
class EvaluateOptions:
    """What `partN.evaluate` takes.

    Attributes:
        run_dir: The training run's directory.
        episodes: Episodes to play; None plays as many as the run's test did.
        seed: Seed of the first episode (episode i starts from seed + i); None takes the run's test seed.
        output: Also write each episode's reward and length here, as JSON.
    """

    run_dir: Annotated[Path, tyro.conf.Positional, tyro.conf.arg(metavar="RUN_DIR")]
    episodes: int | None = None
    seed: int | None = None
    output: Annotated[Path | None, tyro.conf.arg(metavar="FILE")] = None


def evaluate_run(
    options: EvaluateOptions, source: ModuleType, load_model: Callable[[Path, str], Any]
) -> None:
    """Print what the episodes scored, and write it to --output. `source` is the part's data
    module, `load_model` its model.load_model_from_checkpoint."""
    if options.output is not None:
        from src.runs.directory import refuse_run_file

        refuse_run_file(options.output, options.run_dir, "episodes' results")
    results = play_saved_policy(options.run_dir, source, load_model, options.episodes, options.seed)
    rewards, lengths = results["rewards"], results["lengths"]
    played = f"{results['episodes']} episode(s) from seed {results['seed']}"
    print(f"{results['policy']} on {results['env_name']}: {played}")
    print(
        f"episode reward: mean {results['mean_reward']:.6g}, std {results['std_reward']:.6g}, "
        f"min {min(rewards):.6g}, max {max(rewards):.6g}"
    )
    print(f"episode length: mean {statistics.fmean(lengths):.6g}, min {min(lengths)}, max {max(lengths)}")
    if options.output is not None:
        from src.runs.atomic import write_text_atomic

        write_text_atomic(options.output, json.dumps(results, indent=2) + "\n")
        print(f"written: {options.output}")


def play_saved_policy(
    run_dir: Path,
    source: ModuleType,
    load_model: Callable[[Path, str], Any],
    episodes: int | None = None,
    seed: int | None = None,
) -> dict[str, Any]:
    """The rewards and lengths of `episodes` episodes of the run's saved policy, on the CPU."""
    import torch

    from src.rl.data import EvaluationEpisodes, env_maker, env_problem, evaluation_envs, test_seed
    from src.runs.checkpoint_checks import checkpoint_problem
    from src.runs.directory import another_parts_run

    if not run_dir.is_dir():
        raise ConfigError(f"{run_dir} {'is not a directory' if run_dir.exists() else 'does not exist'}")
    if not (run_dir / "config.json").is_file():
        raise ConfigError(f"{run_dir} has no config.json, so it is not a run directory")
    if other := another_parts_run(run_dir, source.__name__.partition(".")[0], "evaluate"):
        raise ConfigError(other)
    problems = []
    for name in POLICY_FILES:  # the first intact one
        if (problem := checkpoint_problem(run_dir / name)) is None:
            break
        problems.append(f"{name} is {problem}")
    else:
        raise ConfigError(f"{run_dir} holds no policy to play: {'; '.join(problems)}")
    path = run_dir / name
    try:
        model = load_model(path, "cpu")
    except (KeyError, TypeError, ValueError, RuntimeError) as error:  # another part's model, say
        raise ConfigError(f"{path} is not a policy of this part ({first_line(error)})") from None
    episodes = model.cfg.test_episodes if episodes is None else episodes
    if not 1 <= episodes <= MAX_EPISODES:
        raise ConfigError(f"--episodes {episodes}: give 1 to {MAX_EPISODES}")
    seed = test_seed(model.cfg) if seed is None else seed
    if not 0 <= seed <= 2**32 - episodes:  # episode i plays from seed + i, as gymnasium takes it
        raise ConfigError(f"--seed {seed}: give 0 to {2**32 - episodes}")
    if problems := env_problem(source, model.cfg.env_name):  # where the run trained, not here
        raise ConfigError(f"{path} plays {model.cfg.env_name!r}, which cannot be made here: {problems[0]}")
    env = evaluation_envs(env_maker(source), model.cfg.env_name, episodes)
    try:
        batches = list(EvaluationEpisodes(env, model.greedy_policy(), seed, episodes))
    finally:
        env.close()
    rewards, lengths = (
        torch.cat([batch["next", key].flatten() for batch in batches]).tolist()
        for key in ("episode_reward", "step_count")
    )
    return {
        "run_dir": str(run_dir),
        "policy": str(path),
        "env_name": model.cfg.env_name,
        "seed": seed,
        "episodes": episodes,
        "mean_reward": statistics.fmean(rewards),
        "std_reward": statistics.pstdev(rewards),
        "rewards": rewards,
        "lengths": lengths,
    }
