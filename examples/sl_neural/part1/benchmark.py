"""How much the pipeline adds to a bare Lightning Trainer's training epoch.

    python -m <this part>.benchmark --config baseline --repeats 5 [--scale 11] [--epochs 4]

Times the epochs of this part's pipeline (build_trainer: every callback, the
profiler, the checkpoints and metrics.jsonl; W&B off) against a bare
`lightning.Trainer` (no logger, checkpoint, callback or profiler of ours) fitting
the same module on the same DataModule, alternating the two, and prints the ratio
of their median epoch times. Validation is part of both epochs; each fit's first
epoch (warm-up) is left out. --scale K repeats the table's rows K times: the
per-step share of the cost shows on an epoch of many steps.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import tempfile
import time
from pathlib import Path

import lightning as L
import pandas as pd

from src.runs.lifetime import start_run
from src.training.precision import choose_precision
from src.training.trainer import build_trainer

from .config import CONFIGS, DigitsConfig
from .data import DigitsDataModule, load_table
from .model import build_model


class EpochClock(L.Callback):
    """Seconds from each training epoch's start to the next one's (or to the end of
    training): the epoch's steps, its validation and whatever runs at its end."""

    def __init__(self) -> None:
        self.marks: list[float] = []
        self.batches = 0

    def on_train_epoch_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.marks.append(time.perf_counter())
        self.batches = trainer.num_training_batches

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.marks.append(time.perf_counter())

    def steady_epochs(self) -> list[float]:
        return [end - start for start, end in zip(self.marks[1:], self.marks[2:], strict=False)]


def fit_epochs(cfg: DigitsConfig, pipeline: bool) -> tuple[list[float], int]:
    """The steady epochs' seconds, and the batches of an epoch."""
    L.seed_everything(cfg.seed)
    datamodule, model, clock = DigitsDataModule(cfg), build_model(cfg), EpochClock()
    arguments = {
        "accumulate_grad_batches": cfg.gradient_accumulation_steps,
        "gradient_clip_val": cfg.gradient_clip_val,
    }
    if pipeline:
        with start_run(cfg) as run:  # the run directory, run.json and console.log it writes to
            trainer = build_trainer(cfg, run.dir, None, extra_callbacks=[clock], **arguments)
            trainer.fit(model, datamodule=datamodule)
    else:
        trainer = L.Trainer(
            default_root_dir=cfg.output.base_dir,
            max_epochs=cfg.num_epochs,
            precision=choose_precision(cfg.precision),
            accelerator=cfg.accelerator,
            devices=1,
            logger=False,
            enable_checkpointing=False,
            enable_model_summary=False,
            enable_progress_bar=sys.stderr.isatty(),  # as the pipeline: a bar on a terminal only
            callbacks=[clock],
            **arguments,
        )
        trainer.fit(model, datamodule=datamodule)
    return clock.steady_epochs(), clock.batches


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="baseline", choices=list(CONFIGS))
    parser.add_argument("--repeats", type=int, default=5, help="fits of each, alternating")
    parser.add_argument("--scale", type=int, default=1, help="repeat the table's rows this many times")
    parser.add_argument("--epochs", type=int, default=4, help="epochs a fit; the first is not timed")
    args = parser.parse_args(argv)

    cfg = CONFIGS[args.config]()
    with tempfile.TemporaryDirectory() as scratch:
        table = Path(scratch) / "table.csv"
        pd.concat([load_table(cfg)] * args.scale).to_csv(table, index=False)
        timed = dataclasses.replace(
            cfg,
            data_path=str(table),
            num_epochs=args.epochs,
            wandb_mode="disabled",
            output=dataclasses.replace(cfg.output, base_dir=scratch),
        )
        seconds: dict[str, list[float]] = {"bare Trainer": [], "pipeline": []}
        for _ in range(args.repeats):
            for name in seconds:
                epochs, batches = fit_epochs(timed, pipeline=name == "pipeline")
                seconds[name] += epochs

    medians = {name: statistics.median(times) for name, times in seconds.items()}
    for name, median in medians.items():
        print(f"{name:<13} median epoch {median * 1000:8.1f} ms  of {len(seconds[name])} epochs")
    ratio = medians["pipeline"] / medians["bare Trainer"]
    added = (medians["pipeline"] - medians["bare Trainer"]) * 1000
    setting = f"config {cfg.name}, {batches} batches an epoch, log_every_n_steps {cfg.log_every_n_steps}"
    print(f"pipeline / bare Trainer = {ratio:.3f}  ({added:+.1f} ms an epoch; {setting})")


if __name__ == "__main__":
    main()
