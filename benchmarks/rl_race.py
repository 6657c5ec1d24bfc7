"""Time to solve an env: a rendered project's RL part against stable-baselines3.

    python benchmarks/rl_race.py --project DIR --project-python PY --sb3-python PY
        [--env CartPole-v1|Pendulum-v1] [--part part3] [--seeds 0 1 2 3 4] [--json race.json]

For each seed, alternating which goes first, it times two whole processes from start
to exit: `python -m PART.train --config CONFIG --seed S` in the project (W&B and the
report's figures off: the reference draws none), and benchmarks/sb3_ppo.py (RL-Zoo's
tuned PPO) in a venv with stable-baselines3. Both stop at the env's target mean
evaluation reward (CartPole-v1: 475, its registered threshold; Pendulum-v1: -250, within
300k frames), and a run counts as solved when its final test reaches it. It prints both
walls and frames per second per seed, their medians and the load average before and
after, and writes them as JSON. `nox -s race` renders the project and makes both venvs.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
# Per env: the RL part's config, what it adds to that config for the race, the target, and the
# frames sb3_ppo.py may train (CartPole-v1: RL-Zoo's budget).
RACES = {
    "CartPole-v1": ("baseline", [], 475.0, 100_000),
    # 36 epochs of 8192 frames: 294,912, within the same 300k frames.
    "Pendulum-v1": ("pendulum", ["--target-reward", "-250", "--num-epochs", "36"], -250.0, 300_000),
}


def timed(
    command: list[str], cwd: Path, env: dict[str, str] | None = None
) -> tuple[float, subprocess.CompletedProcess]:
    started = time.perf_counter()
    result = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    return time.perf_counter() - started, result


def ours(args: argparse.Namespace, seed: int, output: Path) -> dict:
    config, extra, target, _ = RACES[args.env]
    command = [
        args.project_python,
        "-m",
        f"{args.part}.train",
        "--config",
        config,
        "--seed",
        str(seed),
        *extra,
    ]
    command += [
        "--wandb-mode",
        "disabled",
        "--output.no-report",
        "--output.base-dir",
        str(output / f"seed{seed}"),
    ]
    wall, result = timed(command, args.project)
    if result.returncode != 0:
        sys.exit(f"error: {' '.join(command)} exited {result.returncode}:\n{result.stderr[-2000:]}")
    (run_dir,) = (output / f"seed{seed}").iterdir()
    events = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line]
    test = next(e["test_episode_reward"] for e in reversed(events) if "test_episode_reward" in e)
    frames = max(e.get("frames", 0) for e in events)
    return {"wall_s": wall, "frames": int(frames), "test_reward": test, "solved": test >= target}


def sb3(args: argparse.Namespace, seed: int, output: Path) -> dict:
    _, _, target, max_frames = RACES[args.env]
    command = [args.sb3_python, str(HERE / "sb3_ppo.py"), "--env", args.env, "--seed", str(seed)]
    command += ["--target", str(target), "--max-frames", str(max_frames)]
    # SB3's logger makes a folder even when it writes nothing: the scratch one, not /tmp.
    wall, result = timed(command, HERE, {**os.environ, "SB3_LOGDIR": str(output / "sb3-logs")})
    if result.returncode != 0:
        sys.exit(f"error: {' '.join(command)} exited {result.returncode}:\n{result.stderr[-2000:]}")
    line = json.loads(result.stdout.strip().splitlines()[-1])
    return {"wall_s": wall, **{key: line[key] for key in ("frames", "test_reward", "solved")}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--project", type=Path, required=True, help="a rendered project with an RL part")
    parser.add_argument("--project-python", required=True, help="the Python of the project's venv")
    parser.add_argument("--sb3-python", required=True, help="a Python with stable-baselines3 installed")
    parser.add_argument("--env", choices=sorted(RACES), default="CartPole-v1")
    parser.add_argument("--part", default="part3", help="the RL part's folder in the project")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--json", type=Path, default=Path("race.json"))
    args = parser.parse_args()

    load_before = os.getloadavg()
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        for number, seed in enumerate(args.seeds):
            order = ["ours", "sb3"] if number % 2 == 0 else ["sb3", "ours"]
            results = {}
            for name in order:
                results[name] = (ours if name == "ours" else sb3)(args, seed, Path(scratch))
            rows.append({"seed": seed, **results})
            o, s = results["ours"], results["sb3"]
            print(
                f"{args.env} seed {seed}: ours {o['wall_s']:6.1f} s {o['frames']:>7} frames"
                f" ({o['frames'] / o['wall_s']:5.0f}/s) test {o['test_reward']:7.1f}"
                f" | sb3 {s['wall_s']:6.1f} s {s['frames']:>7} frames"
                f" ({s['frames'] / s['wall_s']:5.0f}/s) test {s['test_reward']:7.1f}",
                flush=True,
            )
    load_after = os.getloadavg()
    medians = {name: statistics.median(row[name]["wall_s"] for row in rows) for name in ("ours", "sb3")}
    rates = {
        name: statistics.median(row[name]["frames"] / row[name]["wall_s"] for row in rows)
        for name in ("ours", "sb3")
    }
    faster = sum(row["ours"]["wall_s"] < row["sb3"]["wall_s"] and row["ours"]["solved"] for row in rows)
    summary = {
        "env": args.env,
        "rows": rows,
        "median_wall_s": medians,
        "median_frames_per_s": rates,
        "ours_over_sb3": medians["ours"] / medians["sb3"],
        "seeds_ours_solved_faster": faster,
        "load_before": load_before,
        "load_after": load_after,
    }
    print(
        f"{args.env} median wall: ours {medians['ours']:.1f} s, sb3 {medians['sb3']:.1f} s "
        f"(ours / sb3 = {summary['ours_over_sb3']:.2f}); "
        f"frames/s ours {rates['ours']:.0f}, sb3 {rates['sb3']:.0f}; "
        f"ours solved faster on {faster} of {len(rows)} seeds; "
        f"load {load_before[0]:.2f} before, {load_after[0]:.2f} after"
    )
    args.json.write_text(json.dumps(summary, indent=2) + "\n")


if __name__ == "__main__":
    main()
