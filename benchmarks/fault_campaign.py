"""kill -9 trials on a rendered project: each run is killed at random moments, resumed with
`--resume auto` until it finishes, and compared with an uninterrupted run of the same config.

    python benchmarks/fault_campaign.py --project DIR --python PY [--trials 30] [--seed 0]

Each trial picks a part in turn, starts its smoke config made longer, kills the process
group with SIGKILL after a random delay (one to three times), and resumes until the run
exits 0. It counts tracebacks in every output, checkpoints that no longer load, resumes
that found no intact checkpoint, temporary files of killed writes left behind, and runs
whose test metrics differ from the uninterrupted run's (neural and tree parts, where
resume is promised exact; an RL part must finish). It prints one line per trial and the
totals, and exits 1 if any count but the kills is not zero.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

TRACEBACK = "Traceback (most recent call last)"
# Flags that make each kind's smoke run last long enough to be killed mid-run.
LONGER = {
    "neural": ["--num-epochs", "8", "--patience", "100", "--checkpoint-every-n-steps", "3"],
    "tree": ["--num-boost-round", "300", "--early-stopping-rounds", "1000", "--checkpoint-minutes", "0.0001"],
    "rl": ["--num-epochs", "6", "--patience", "100"],
}
CHECK_FILES = """
import sys
from pathlib import Path
from src.runs.checkpoint_checks import checkpoint_problem
for path in map(Path, sys.argv[1:]):
    if problem := checkpoint_problem(path):
        print(f"{path}: {problem}")
"""


def kind_of(part: Path) -> str:
    if (part / "envs.py").exists():
        return "rl"
    return "tree" if "xgboost" in (part / "model.py").read_text() else "neural"


def command(python: str, part: str, kind: str, base_dir: Path, *extra: str) -> list[str]:
    return [
        python,
        "-m",
        f"{part}.train",
        "--config",
        "smoke",
        "--wandb-mode",
        "disabled",
        "--output.base-dir",
        str(base_dir),
        *LONGER[kind],
        *extra,
    ]


def test_metrics(run_dir: Path) -> dict:
    """The final test metrics: metrics.json (trees) or metrics.jsonl's test_ keys."""
    if (run_dir / "metrics.json").is_file():
        return {k: v for k, v in json.loads((run_dir / "metrics.json").read_text()).items() if "test" in k}
    found = {}
    for line in (run_dir / "metrics.jsonl").read_text().splitlines():
        found.update({k: v for k, v in json.loads(line).items() if k.startswith("test_")})
    return found


def finished_run(base_dir: Path) -> Path:
    runs = [p for p in base_dir.iterdir() if (p / "run.json").is_file()]
    return next(p for p in runs if json.loads((p / "run.json").read_text()).get("status") == "finished")


def trial(number: int, part: str, kind: str, args: argparse.Namespace, reference: dict, work: Path) -> dict:
    rng = random.Random(f"{args.seed} {number}")
    base_dir = work / f"trial{number:03d}"
    env = {**os.environ, "GPU_LOCK_PATH": str(work / "gpu.lock"), "WANDB_MODE": "disabled"}
    outputs, kills, no_intact = [], 0, 0
    planned_kills = rng.randint(1, 3)
    for attempt in range(planned_kills + 1):
        resume = ["--resume", "auto"] if attempt else []
        process = subprocess.Popen(
            command(args.python, part, kind, base_dir, *resume),
            cwd=args.project,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        try:
            delay = None if attempt == planned_kills else rng.uniform(0.5, reference["wall"] * 0.9)
            output, _ = process.communicate(timeout=delay)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            output, _ = process.communicate()
            kills += 1
            outputs.append(output)
            continue
        outputs.append(output)
        no_intact += "no intact checkpoint" in output
        if process.returncode == 0:
            break
    else:
        output = subprocess.run(
            command(args.python, part, kind, base_dir, "--resume", "auto"),
            cwd=args.project,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
        )
        outputs.append(output.stdout + output.stderr)
    tracebacks = sum(TRACEBACK in text for text in outputs)
    try:
        run_dir = finished_run(base_dir)
    except StopIteration:
        return {
            "trial": number,
            "part": part,
            "kills": kills,
            "tracebacks": tracebacks,
            "unfinished": 1,
            "damaged": 0,
            "no_intact": no_intact,
            "differs": 0,
            "leftovers": 0,
            "tail": outputs[-1][-800:],
        }
    leftovers = len(list(base_dir.rglob(".*.partial*")))  # temporary files of killed writes
    files = [str(p) for p in (run_dir / "checkpoints").glob("[!.]*") if p.suffix in (".ckpt", ".ubj")]
    files += [str(p) for p in run_dir.glob("model.*")]
    checked = subprocess.run(
        [args.python, "-c", CHECK_FILES, *files], cwd=args.project, capture_output=True, text=True, env=env
    )
    damaged = len(checked.stdout.splitlines())
    differs = int(kind != "rl" and test_metrics(run_dir) != reference["metrics"])
    return {
        "trial": number,
        "part": part,
        "kills": kills,
        "tracebacks": tracebacks,
        "unfinished": 0,
        "damaged": damaged,
        "no_intact": no_intact,
        "differs": differs,
        "leftovers": leftovers,
        "tail": "",
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--project", type=Path, required=True, help="a rendered project")
    parser.add_argument("--python", required=True, help="the interpreter it is installed in")
    parser.add_argument("--trials", type=int, default=30, help="kill -9 trials, shared among the parts")
    parser.add_argument("--seed", default="0", help="seeds the kill times")
    parser.add_argument("--parallel", type=int, default=2, help="trials at once")
    args = parser.parse_args()
    parts = {p.name: kind_of(p) for p in sorted(args.project.glob("part*")) if (p / "train.py").is_file()}
    work = Path(tempfile.mkdtemp(prefix="fault-campaign-"))
    references = {}
    for part, kind in parts.items():  # the uninterrupted runs, one at a time: their walls set the kill times
        started = time.monotonic()
        done = subprocess.run(
            command(args.python, part, kind, work / f"reference_{part}"),
            cwd=args.project,
            capture_output=True,
            text=True,
            env={**os.environ, "WANDB_MODE": "disabled", "GPU_LOCK_PATH": str(work / "gpu.lock")},
        )
        if done.returncode != 0:
            print(f"{part}: its uninterrupted run failed:\n{done.stderr[-2000:]}", file=sys.stderr)
            return 1
        wall = time.monotonic() - started
        references[part] = {"wall": wall, "metrics": test_metrics(finished_run(work / f"reference_{part}"))}
        print(f"{part} ({kind}): uninterrupted in {wall:.1f} s, test metrics {references[part]['metrics']}")
    names = list(parts)
    with ThreadPoolExecutor(args.parallel) as pool:
        chosen = [names[number % len(names)] for number in range(args.trials)]
        futures = [
            pool.submit(trial, number, part, parts[part], args, references[part], work)
            for number, part in enumerate(chosen)
        ]
        results = [future.result() for future in futures]
    keys = ["kills", "tracebacks", "unfinished", "damaged", "no_intact", "differs", "leftovers"]
    for result in results:
        print(f"trial {result['trial']:3d} {result['part']}: " + ", ".join(f"{k} {result[k]}" for k in keys))
        if result["tail"]:
            print("  " + result["tail"].replace("\n", "\n  "))
    totals = {key: sum(result[key] for result in results) for key in keys}
    print(
        f"{len(results)} trials: " + ", ".join(f"{k} {v}" for k, v in totals.items()) + f" (work in {work})"
    )
    return int(any(totals[key] for key in keys if key != "kills"))


if __name__ == "__main__":
    sys.exit(main())
