"""Where continuing a tree run crashes on a GPU: one variant of the continuation at a time,
each in a process of its own, so that a segmentation fault ends one variant, not the check.

    python benchmarks/tree_gpu_resume.py --project DIR [--part part2] [--device cuda]
        [--task binary|multiclass|regression] [--json FILE]

XGBoost 3.2's CUDA build crashes (`Booster.update`, a segmentation fault) continuing a model
trained on pandas categories, which keeps XGBoost's own list of them: the first GPU checks
(an H200, then an H100) saw it in the tree part's resume tests and in every variant below on
a table with a text column, an XGBoost-only reproduction in all its forms (QuantileDMatrix or
DMatrix, saved as UBJ or JSON or kept in memory, trained on the CPU, no missing values,
one-hot splits) but two: continuing on the CPU, and training on the categories' codes with
feature types "c". Training hands XGBoost codes since (`TableEncoding.as_codes`). Each
variant starts from seven rounds of that task on a table like the tests' (text column
`colour`, empty cells among the features), saved as the pipeline saves a checkpoint, and
grows five rounds more:
- `after_exception`: as the test does, in the process whose first training a callback ended
  with an exception, then continued from last.ubj;
- `fresh_process`: a new process loads last.ubj and continues through the pipeline's
  `train_booster`, as `--resume` after a `kill -9` does;
- `device_set_first`: the same, the loaded booster told its device before it continues;
- `bare_xgb_train`: a new process continues with `xgb.train(xgb_model=...)` alone, no
  callbacks, on the pipeline's QuantileDMatrix pair;
- `bare_dmatrix`: the same on plain DMatrix objects of the codes;
- `pandas_categories`: the same on DMatrix objects of the pandas categories, from seven
  rounds trained on them: the crash itself, which says whether an XGBoost release still has
  it; not counted in the exit status.
Prints one line a variant: ok (with the rounds), the signal that ended it, or the error;
exits 1 unless every counted one is ok, as on a CPU. Needs XGBoost's CUDA build for
`--device cuda`."""

from __future__ import annotations

import argparse
import dataclasses
import json
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import xgboost as xgb

VARIANTS = ("after_exception", "fresh_process", "device_set_first", "bare_xgb_train", "bare_dmatrix")
UNCOUNTED = ("pandas_categories",)  # XGBoost's own crash, which the pipeline steps around
TASKS = {"binary": ("flag", "binary:logistic"), "multiclass": ("kind", "multi:softprob")}
TASKS["regression"] = ("score", "reg:squarederror")
FIRST_ROUNDS, MORE_ROUNDS = 7, 5


def write_table(path: Path, rows: int = 300) -> None:
    """A table as a user's CSV holds it: `colour` as words, empty cells, a label per task."""
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(0)
    colour = rng.choice(["red", "green", "blue"], rows)
    size, weight = rng.normal(size=rows), rng.normal(size=rows)
    score = 2 * size + np.select([colour == "red", colour == "green"], [2.0, -2.0], 0.0) + 0.2 * weight
    table = pd.DataFrame({"colour": colour, "size": size, "weight": weight, "score": score})
    table["flag"] = np.where(score > 0, "yes", "no")
    table["kind"] = np.select([score < -1, score < 1], ["low", "mid"], "high")
    table.loc[rng.choice(rows, 15, replace=False), "size"] = np.nan
    table.loc[rng.choice(rows, 15, replace=False), "colour"] = None
    table.to_csv(path, index=False)


class StopAfter(xgb.callback.TrainingCallback):
    """Raises once the model holds `rounds` rounds: a run that ends mid-way."""

    def __init__(self, rounds: int) -> None:
        self.rounds = rounds

    def after_iteration(self, model: xgb.Booster, epoch: int, evals_log: dict) -> bool:
        if model.num_boosted_rounds() == self.rounds:
            raise RuntimeError("stopped on purpose")
        return False


def one_variant(args: argparse.Namespace) -> None:
    """In its own process: the variant `args.variant`, printing its rounds as JSON."""
    import importlib

    sys.path.insert(0, str(args.project))
    from src.trees.booster import train_booster, training_matrices, training_params
    from src.trees.data import load_split
    from src.trees.rounds import RoundLoggers, round_callbacks

    part = args.part
    config, data, model = (importlib.import_module(f"{part}.{name}") for name in ("config", "data", "model"))
    label, objective = TASKS[args.task]
    base = config.CONFIGS["smoke"]()
    cfg = dataclasses.replace(
        base,
        data_path=str(args.scratch / "raw.csv"),
        label_column=label,
        objective=objective,
        feature_columns=("colour", "size", "weight"),
        loggers=("csv",),
        wandb_mode="disabled",
        device=args.device,
        num_boost_round=FIRST_ROUNDS + MORE_ROUNDS,
        early_stopping_rounds=100,
        checkpoint_minutes=1e-9,  # last.ubj after every round
        output=dataclasses.replace(base.output, base_dir=str(args.scratch), report=False),
    )
    split, params = load_split(cfg, data), model.booster_params(cfg)
    run_dir = args.scratch / args.variant
    run_dir.mkdir(exist_ok=True)
    checkpoint = run_dir / "checkpoints" / "last.ubj"
    if args.variant == "pandas_categories":
        pandas_categories(cfg, params, split, args.stage, run_dir)
        return
    if args.stage == "first":  # seven rounds in last.ubj, the way a run leaves them
        callbacks = round_callbacks(cfg, run_dir, RoundLoggers())
        # Before the last callback, LatestModel: the eighth round never reaches last.ubj.
        callbacks.insert(-1, StopAfter(FIRST_ROUNDS + 1))
        try:
            train_booster(cfg, params, split, callbacks)
        except RuntimeError as error:
            if "on purpose" not in str(error):
                raise
        if args.variant != "after_exception":
            return
    previous = model.load_model(checkpoint)
    if (saved := previous.num_boosted_rounds()) != FIRST_ROUNDS:
        raise SystemExit(f"last.ubj holds {saved} rounds, not {FIRST_ROUNDS}")
    if args.variant == "device_set_first":
        previous.set_param({"device": "cuda" if args.device == "cuda" else "cpu"})
    if args.variant.startswith("bare"):
        if args.variant == "bare_xgb_train":
            train, val = training_matrices(split)
        else:
            (train_codes, types), (val_codes, _) = map(
                split.encoding.as_codes, (split.train_features, split.val_features)
            )
            train = xgb.DMatrix(train_codes, split.train_labels, feature_types=types, enable_categorical=True)
            val = xgb.DMatrix(val_codes, split.val_labels, feature_types=types, enable_categorical=True)
        booster = xgb.train(
            training_params(cfg, params, split.encoding),
            train,
            num_boost_round=MORE_ROUNDS,
            evals=[(train, "train"), (val, "val")],
            xgb_model=previous,
            verbose_eval=False,
        )
    else:
        booster = train_booster(cfg, params, split, round_callbacks(cfg, run_dir, RoundLoggers()), previous)
    print(json.dumps({"rounds": booster.num_boosted_rounds()}))


def pandas_categories(cfg, params: dict, split, stage: str, run_dir: Path) -> None:
    """Seven rounds on DMatrix objects of the pandas categories, saved; then five more."""
    from src.trees.booster import training_params

    train = xgb.DMatrix(split.train_features, split.train_labels, enable_categorical=True)
    options = {"params": training_params(cfg, params, split.encoding), "dtrain": train, "verbose_eval": False}
    path = run_dir / "pandas.ubj"
    if stage == "first":
        xgb.train(**options, num_boost_round=FIRST_ROUNDS).save_model(path)
        return
    booster = xgb.train(**options, num_boost_round=MORE_ROUNDS, xgb_model=xgb.Booster(model_file=path))
    print(json.dumps({"rounds": booster.num_boosted_rounds()}))


def run_variant(args: argparse.Namespace, variant: str) -> str:
    """The variant's outcome, in a line: its stages each in a new process, but after_exception's."""
    stages = ["first"] if variant == "after_exception" else ["first", "continue"]
    for stage in stages:
        command = [sys.executable, "-X", "faulthandler", __file__, "--project", str(args.project)]
        command += ["--part", args.part, "--device", args.device, "--task", args.task]
        command += ["--variant", variant, "--stage", stage, "--scratch", str(args.scratch)]
        result = subprocess.run(command, capture_output=True, text=True, check=False)
        if result.returncode < 0:
            return f"{stage}: killed by {signal.Signals(-result.returncode).name}"
        if result.returncode != 0:
            last = (result.stderr.strip().splitlines() or ["no output"])[-1]
            return f"{stage}: exit {result.returncode}: {last[:200]}"
    rounds = json.loads(result.stdout.strip().splitlines()[-1])["rounds"]
    expected = FIRST_ROUNDS + MORE_ROUNDS
    return f"ok ({rounds} rounds)" if rounds == expected else f"ended with {rounds} rounds, not {expected}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--project", type=Path, required=True, help="a rendered project with a tree part")
    parser.add_argument("--part", default="part2", help="the tree part's folder")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cuda")
    parser.add_argument("--task", choices=sorted(TASKS), default="binary")
    parser.add_argument("--json", type=Path, help="write the outcomes to this file")
    # A variant's own process.
    parser.add_argument("--variant", choices=VARIANTS + UNCOUNTED, help=argparse.SUPPRESS)
    parser.add_argument("--stage", choices=["first", "continue"], help=argparse.SUPPRESS)
    parser.add_argument("--scratch", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.project = args.project.resolve()
    if args.variant:
        one_variant(args)
        return
    build = "CUDA" if xgb.build_info()["USE_CUDA"] else "CPU-only"
    print(f"xgboost {xgb.__version__} ({build} build), device {args.device}, task {args.task}")
    outcomes = {}
    with tempfile.TemporaryDirectory() as scratch:
        args.scratch = Path(scratch)
        write_table(args.scratch / "raw.csv")
        for variant in VARIANTS + UNCOUNTED:
            outcomes[variant] = run_variant(args, variant)
            print(f"  {variant:<18} {outcomes[variant]}", flush=True)
    if args.json:
        args.json.write_text(json.dumps({"device": args.device, "task": args.task, **outcomes}, indent=2))
    sys.exit(any(not outcomes[variant].startswith("ok") for variant in VARIANTS))


if __name__ == "__main__":
    main()
