"""How much the pipeline adds to XGBoost's own training time.

    python -m <this part>.benchmark --config baseline --repeats 7 [--with-wandb]

Times `train_booster` with every callback the pipeline runs after each round
(metrics, early stopping, STOP file, wall-clock budget, latest checkpoint) against a
bare `xgb.train` with the same parameters, data and early stopping, alternating the
two in one process, and prints the ratio of their medians. Plots and SHAP come after
training and are not timed. --with-wandb adds an offline W&B run to the pipeline.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import wandb
import xgboost as xgb

from src.xgb_callbacks import round_callbacks

from .config import CONFIGS
from .data import load_split
from .model import booster_params, train_booster, training_matrices


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="baseline", choices=list(CONFIGS))
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--with-wandb", action="store_true", help="log to an offline W&B run as well")
    args = parser.parse_args(argv)

    cfg = CONFIGS[args.config]()
    split = load_split(cfg)
    train, val = training_matrices(split)
    params = booster_params(cfg)
    with tempfile.TemporaryDirectory() as scratch:
        run_dir = Path(scratch)
        wandb_run = wandb.init(mode="offline", dir=scratch, project="benchmark") if args.with_wandb else None

        def pipeline() -> xgb.Booster:
            callbacks = round_callbacks(cfg, run_dir, wandb_run, cfg.eval_metric, cfg.checkpoint_minutes)
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
    logging = "W&B offline" if wandb_run else "W&B off"
    print(f"pipeline / bare xgb.train = {ratio:.3f}  (config {cfg.name}, {logging})")


if __name__ == "__main__":
    main()
