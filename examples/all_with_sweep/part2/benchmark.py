"""How much the pipeline adds to XGBoost's own training time.

    python -m <this part>.benchmark --config baseline --repeats 15 [--scale 50] [--with-wandb]

Times `train_booster` with every callback the pipeline runs (metrics, early
stopping, STOP file, wall-clock budget, the checkpoint written when training ends)
against a bare `xgb.train` with the same parameters, data and early stopping,
alternating the two in one process, and prints the ratio of their medians. Plots
and SHAP come after training and are not timed. The pipeline's cost is mostly fixed
(the metrics.jsonl lines and the final checkpoint), so it shows most on a small
table: --scale K repeats the training rows K times to see it on a larger one.
--with-wandb adds an offline W&B run to the pipeline.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import tempfile
import time
from pathlib import Path

import pandas as pd
import wandb
import xgboost as xgb

from src.trees.rounds import RoundLoggers, round_callbacks

from .config import CONFIGS
from .data import load_split
from .model import booster_params, train_booster, training_matrices


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="baseline", choices=list(CONFIGS))
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--scale", type=int, default=1, help="repeat the training rows this many times")
    parser.add_argument("--with-wandb", action="store_true", help="log to an offline W&B run as well")
    args = parser.parse_args(argv)

    cfg = CONFIGS[args.config]()
    split = load_split(cfg)
    split = dataclasses.replace(
        split,
        train_features=pd.concat([split.train_features] * args.scale),
        train_labels=pd.concat([split.train_labels] * args.scale),
    )
    train, val = training_matrices(split)
    params = booster_params(cfg)
    with tempfile.TemporaryDirectory() as scratch:
        run_dir = Path(scratch)
        wandb_run = wandb.init(mode="offline", dir=scratch, project="benchmark") if args.with_wandb else None

        def pipeline() -> xgb.Booster:
            (run_dir / "metrics.jsonl").unlink(missing_ok=True)
            loggers = RoundLoggers(wandb_run)  # W&B only: TensorBoard and CSV are no part of what is timed
            callbacks = round_callbacks(cfg, run_dir, loggers, cfg.eval_metric, cfg.checkpoint_minutes)
            return train_booster(cfg, train, val, callbacks)

        def bare() -> xgb.Booster:
            return xgb.train(
                params,
                train,
                num_boost_round=cfg.num_boost_round,
                evals=[(train, "train"), (val, "val")],
                early_stopping_rounds=cfg.early_stopping_rounds,
                verbose_eval=False,
            )

        seconds: dict[str, list[float]] = {"bare xgb.train": [], "pipeline": []}
        rounds = {}
        for _ in range(args.repeats):
            for name, fit in (("bare xgb.train", bare), ("pipeline", pipeline)):
                started = time.perf_counter()
                rounds[name] = fit().num_boosted_rounds()
                seconds[name].append(time.perf_counter() - started)
        if wandb_run is not None:
            wandb_run.finish()

    medians = {name: statistics.median(times) for name, times in seconds.items()}
    for name, median in medians.items():
        print(f"{name:<16} {rounds[name]:>5} rounds  median {median * 1000:8.1f} ms  of {args.repeats} runs")
    ratio = medians["pipeline"] / medians["bare xgb.train"]
    added = (medians["pipeline"] - medians["bare xgb.train"]) * 1000
    logging = "W&B offline" if wandb_run else "W&B off"
    setting = f"config {cfg.name}, {len(split.train_labels)} training rows, {logging}"
    print(f"pipeline / bare xgb.train = {ratio:.3f}  ({added:+.1f} ms; {setting})")


if __name__ == "__main__":
    main()
