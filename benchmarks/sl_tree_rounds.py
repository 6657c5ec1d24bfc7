"""How much a rendered project's tree pipeline adds to XGBoost's own training time.

    python benchmarks/sl_tree_rounds.py --project DIR [--part part2] [--config baseline]
        [--repeats 15] [--scale 50] [--with-wandb] [--end-to-end-repeats 5] [--json FILE]

Times the pipeline's `train_booster` (src/trees/booster.py) with every callback the
pipeline runs (metrics, early stopping, STOP file, wall-clock budget, the checkpoint
written when training ends) against a bare `xgb.train` with the same parameters, data
and early stopping, alternating the two in one process, and prints the ratio of their
medians. `train_booster` quantizes the split's rows into its QuantileDMatrix pair
itself, so each bare call does the same (`training_matrices`) within its timing.
Plots and SHAP come after training and are not timed. The pipeline's cost is mostly fixed
(the metrics.jsonl lines and the final checkpoint), so it shows most on a small
table: --scale K repeats the training rows K times to see it on a larger one.

--with-wandb logs the pipeline's rounds to an offline W&B run, and times a third
contender: the bare `xgb.train` with W&B's own XGBoost callback, which logs every
round. Each timed call gets a W&B run of its own, started and finished outside the
timing: what is timed is the logging of the rounds. W&B takes a round in a call of
its own (a fraction of a millisecond, the first ones of a run more), as long as a
small table's round, so the pipeline charts a round once `wandb_every_seconds` of
training passed since the last it charted, and the first and last of the training; the
table of every round it logs as a run ends is not timed. --json FILE writes the
figures.

Then, unless --end-to-end-repeats is 0, a whole run in this process (`main_with_config`:
run directory, metrics, checkpoint, test, model, plots, SHAP and report; W&B off)
against a bare script's load, split, train and predict on the same data. Run it with
the project's Python; `nox -s bench` does.
"""

# ruff: noqa: E402 - the project's modules are imported once its path is known

from __future__ import annotations

import argparse

from harness import alternate, medians, parse_and_import, recorded

PARSER = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
PARSER.add_argument("--config", default="baseline")
PARSER.add_argument("--repeats", type=int, default=15)
PARSER.add_argument("--scale", type=int, default=1, help="repeat the training rows this many times")
PARSER.add_argument("--with-wandb", action="store_true", help="log the rounds to offline W&B runs too")
PARSER.add_argument(
    "--end-to-end-repeats", type=int, default=5, help="whole runs against a bare script (0: none)"
)
ARGS, PART = parse_and_import(PARSER, "sl_tree", ("config", "data", "model", "train"))

import contextlib
import dataclasses
import functools
import io
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import wandb
import xgboost as xgb
from wandb.integration.xgboost import WandbCallback

from src.trees.booster import train_booster, training_matrices, training_params
from src.trees.data import Split, load_split
from src.trees.rounds import RoundLoggers, round_callbacks

QUIET = wandb.Settings(silent=True)  # no banner and summary around every timed call


def main(args: argparse.Namespace) -> None:
    cfg = PART.config.CONFIGS[args.config]()
    split = load_split(cfg, PART.data)
    split = dataclasses.replace(
        split,
        train_features=pd.concat([split.train_features] * args.scale),
        train_labels=pd.concat([split.train_labels] * args.scale),
    )
    params = PART.model.booster_params(cfg)  # the part's; train_booster adds the pipeline's
    with recorded(args.json) as figures, tempfile.TemporaryDirectory() as scratch:
        run_dir = Path(scratch)

        def pipeline() -> xgb.Booster:
            (run_dir / "metrics.jsonl").unlink(missing_ok=True)
            # W&B only: TensorBoard and CSV are no part of what is timed.
            loggers = RoundLoggers(wandb.run, wandb_every_seconds=cfg.wandb_every_seconds)
            callbacks = round_callbacks(cfg, run_dir, loggers)
            return train_booster(cfg, params, split, callbacks)

        def bare(wandb_callback: bool = False) -> xgb.Booster:
            # W&B's own callback for XGBoost logs a history row every round, as the pipeline does.
            callbacks = [WandbCallback(log_feature_importance=False)] if wandb_callback else None
            return bare_xgb_train(cfg, params, split, callbacks)

        contenders: dict[str, Callable[[], xgb.Booster]] = {"bare xgb.train": bare}
        if args.with_wandb:
            contenders["bare + W&B callback"] = functools.partial(bare, wandb_callback=True)
        contenders["pipeline"] = pipeline
        rounds = {}

        def timed(name: str, fit: Callable[[], xgb.Booster]) -> list[float]:
            # A run of its own each time: W&B ignores a step below one it already holds.
            logs_to_wandb = args.with_wandb and name != "bare xgb.train"
            if logs_to_wandb:
                wandb.init(mode="offline", dir=scratch, project="benchmark", settings=QUIET)
            started = time.perf_counter()
            rounds[name] = fit().num_boosted_rounds()
            seconds = time.perf_counter() - started
            if logs_to_wandb:
                wandb.finish()
            return [seconds]

        measures = {name: functools.partial(timed, name, fit) for name, fit in contenders.items()}
        seconds = alternate(measures, args.repeats)
        median = medians(seconds)
        for name in contenders:
            milliseconds = median[name] * 1000
            print(f"{name:<20} {rounds[name]:>5} rounds  median {milliseconds:8.1f} ms  of {args.repeats}")
        logging = "W&B offline" if args.with_wandb else "W&B off"
        setting = f"config {cfg.name}, {len(split.train_labels)} training rows, pipeline with {logging}"
        print(setting)
        for name in contenders:
            if name != "pipeline":
                added = (median["pipeline"] - median[name]) * 1000
                print(f"pipeline / {name} = {median['pipeline'] / median[name]:.3f}  ({added:+.1f} ms)")
        figures.update(
            setting=setting,
            median_s=median,
            repeats=args.repeats,
            ratios={
                f"pipeline / {name}": median["pipeline"] / median[name]
                for name in seconds
                if name != "pipeline"
            },
        )
        if args.end_to_end_repeats:
            figures["end_to_end"] = end_to_end(cfg, args.end_to_end_repeats, run_dir / "runs")


def bare_xgb_train(
    cfg,
    params: dict,
    split: Split,
    callbacks: list[xgb.callback.TrainingCallback] | None = None,
) -> xgb.Booster:
    """`xgb.train` with the pipeline's parameters (the part's `params` with the objective,
    metric, tree method, device, threads and seed it adds), the same QuantileDMatrix pair
    and evaluation sets (train and val, each round, as train_booster) and early stopping,
    and none of its callbacks."""
    train, val = training_matrices(split)
    return xgb.train(
        training_params(cfg, params, split.encoding),
        train,
        num_boost_round=cfg.num_boost_round,
        evals=[(train, "train"), (val, "val")],
        early_stopping_rounds=cfg.early_stopping_rounds,
        verbose_eval=False,
        callbacks=callbacks,
    )


def end_to_end(cfg, repeats: int, base_dir: Path) -> dict:
    """Seconds of a whole run in this process against a bare script's, medians printed."""
    run_cfg = dataclasses.replace(
        cfg, wandb_mode="disabled", output=dataclasses.replace(cfg.output, base_dir=str(base_dir))
    )

    def whole_run() -> None:
        with contextlib.redirect_stdout(io.StringIO()):  # its round lines and summary
            PART.train.main_with_config(run_cfg)

    def bare_script() -> None:
        split = load_split(cfg, PART.data)
        booster = bare_xgb_train(cfg, PART.model.booster_params(cfg), split)
        booster[: booster.best_iteration + 1].inplace_predict(split.test_features)

    def timed(run: Callable[[], None]) -> list[float]:
        started = time.perf_counter()
        run()
        return [time.perf_counter() - started]

    whole_run()  # warm-up: the first run loads matplotlib's fonts and XGBoost's plotting
    runs = {"whole run": whole_run, "bare script": bare_script}
    median = medians(alternate({name: functools.partial(timed, run) for name, run in runs.items()}, repeats))
    for name, seconds in median.items():
        print(f"{name:<20} median {seconds * 1000:8.1f} ms  of {repeats}")
    ratio = median["whole run"] / median["bare script"]
    setting = f"config {cfg.name}, its own table: --scale does not apply"
    print(f"whole run / bare script (load, split, train, predict) = {ratio:.2f}  ({setting})")
    return {"setting": setting, "median_s": median, "repeats": repeats, "whole_run_over_bare_script": ratio}


if __name__ == "__main__":
    main(ARGS)
