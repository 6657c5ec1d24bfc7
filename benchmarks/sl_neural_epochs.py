"""How much a rendered project's neural pipeline adds to a bare Lightning Trainer's
training epoch.

    python benchmarks/sl_neural_epochs.py --project DIR [--part part1] [--config baseline]
        [--repeats 5] [--scale 11] [--epochs 4] [--json FILE]

Times the epochs of the part's pipeline (build_trainer: every callback, the
profiler, the checkpoints and metrics.jsonl; W&B off) against a bare
`lightning.Trainer` (no logger, checkpoint, callback or profiler of ours) fitting
the same module on the same DataModule, against `lightning.Trainer` with its own
defaults (what `L.Trainer(max_epochs=N)` does: its TensorBoard or CSV logger, a
checkpoint every epoch, the model summary), against the bare Trainer on a default
DataLoader (rows collated one at a time, as a bare script would serve them), and
against a plain PyTorch loop (the same model, AdamW and data loaders, no Lightning),
alternating the five, and prints the ratios of their median epoch times. Then one more
fit of the pipeline with every hook of every callback and logger timed prints what each
costs an epoch (a checkpoint's time includes the state the other callbacks hand it).
Validation is part of every epoch; each fit's first epoch (warm-up) is left out.
--scale K repeats the table's rows K times: the per-step share of the cost shows on
an epoch of many steps. --json FILE writes the figures. Run it with the project's
Python; `nox -s bench` does.
"""

# ruff: noqa: E402 - the project's modules are imported once its path is known

from __future__ import annotations

import argparse

from harness import alternate, medians, parse_and_import, recorded

PARSER = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
PARSER.add_argument("--config", default="baseline")
PARSER.add_argument("--repeats", type=int, default=5, help="fits of each, alternating")
PARSER.add_argument("--scale", type=int, default=1, help="repeat the table's rows this many times")
PARSER.add_argument("--epochs", type=int, default=4, help="epochs a fit; the first is not timed")
ARGS, PART = parse_and_import(PARSER, "sl_neural")

import collections
import dataclasses
import functools
import itertools
import sys
import tempfile
import time
from pathlib import Path

import lightning as L
import pandas as pd
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

from src.neural.data import TableDataModule
from src.runs.lifetime import start_run
from src.training.optim import adamw
from src.training.precision import choose_precision
from src.training.trainer import build_trainer


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


class DefaultLoaderDataModule(TableDataModule):
    """The same split served as a bare Lightning script serves it: a default DataLoader
    over a TensorDataset, collating a batch from single rows."""

    def train_dataloader(self) -> DataLoader:
        rows = TensorDataset(*self.train_dataset.tensors)
        return DataLoader(rows, batch_size=self.batch_size, shuffle=True, drop_last=True)

    def val_dataloader(self) -> DataLoader:
        return DataLoader(TensorDataset(*self.val_dataset.tensors), batch_size=self.batch_size)


BARE = {"logger": False, "enable_checkpointing": False, "enable_model_summary": False}


def trainer_arguments(cfg) -> dict:
    """What the part's train.py passes build_trainer beside the config, for every Trainer here."""
    return {
        "accumulate_grad_batches": cfg.gradient_accumulation_steps,
        "gradient_clip_val": cfg.gradient_clip_val,
    }


def fit_epochs(
    cfg, pipeline: bool, default_loader: bool = False, lightning_defaults: bool = False
) -> tuple[list[float], int]:
    """The steady epochs' seconds, and the batches of an epoch. `lightning_defaults`: the bare
    Trainer keeps Lightning's own logger, checkpointing and model summary."""
    L.seed_everything(cfg.seed)
    datamodule = (DefaultLoaderDataModule if default_loader else TableDataModule)(cfg, PART.data)
    model, clock = PART.model.build_model(cfg), EpochClock()
    arguments = trainer_arguments(cfg)
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
            **({} if lightning_defaults else BARE),
            enable_progress_bar=sys.stderr.isatty(),  # as the pipeline: a bar on a terminal only
            callbacks=[clock],
            **arguments,
        )
        trainer.fit(model, datamodule=datamodule)
    return clock.steady_epochs(), clock.batches


def timed_hooks(owner: object, label: str, spent: collections.Counter) -> None:
    """Wrap each Lightning hook `owner` defines (callback hooks; a logger's calls) so that its
    seconds add up in spent[label]."""
    for name in dir(type(owner)):
        hook = getattr(owner, name, None)
        lightning_hook = name.startswith("on_") or name in ("setup", "teardown", "state_dict")
        if callable(hook) and (lightning_hook or name in ("log_metrics", "log_hyperparams", "save")):

            @functools.wraps(hook)
            def timed(*args, _hook=hook, **kwargs):
                start = time.perf_counter()
                try:
                    return _hook(*args, **kwargs)
                finally:
                    spent[label] += time.perf_counter() - start

            setattr(owner, name, timed)


def callback_costs(cfg) -> dict[str, float]:
    """Seconds an epoch that each callback's and logger's hooks take in one fit of the pipeline
    (the first epoch, warm-up, included: each figure is its total over the epochs)."""
    L.seed_everything(cfg.seed)
    datamodule, model = TableDataModule(cfg, PART.data), PART.model.build_model(cfg)
    spent: collections.Counter = collections.Counter()
    with start_run(cfg) as run:
        trainer = build_trainer(cfg, run.dir, None, **trainer_arguments(cfg))
        for owner in [*trainer.callbacks, *trainer.loggers]:
            name = type(owner).__name__
            if name == "ModelCheckpoint":
                name += f" ({owner.filename or 'latest'})"
            timed_hooks(owner, name, spent)
        trainer.fit(model, datamodule=datamodule)
    return {name: seconds / trainer.current_epoch for name, seconds in spent.most_common()}


def plain_loop_epochs(cfg) -> list[float]:
    """The same model, AdamW and loaders in a loop of plain PyTorch: forward, loss,
    backward, gradient clipping, step, then a validation pass, for the same epochs."""
    L.seed_everything(cfg.seed)
    datamodule = TableDataModule(cfg, PART.data)
    datamodule.setup("fit")
    encoding = datamodule.encoding  # the table's encoding, fitted on the training rows
    model = PART.model.build_network(cfg, encoding.features.width, encoding.num_outputs)
    optimizer = adamw(model, cfg.learning_rate, cfg.weight_decay)
    train_loader, val_loader = datamodule.train_dataloader(), datamodule.val_dataloader()
    marks = []
    for _ in range(cfg.num_epochs):
        marks.append(time.perf_counter())
        model.train()
        for features, labels, _ in train_loader:  # the rows' places in the table, for test predictions
            optimizer.zero_grad(set_to_none=True)
            F.cross_entropy(model(features), labels).backward()
            if cfg.gradient_clip_val:  # as the Trainers do
                torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.gradient_clip_val)
            optimizer.step()
        model.eval()
        with torch.no_grad():
            for features, labels, _ in val_loader:
                F.cross_entropy(model(features), labels)
    marks.append(time.perf_counter())
    return [end - start for start, end in itertools.pairwise(marks[1:])]  # the first is warm-up


def main(args: argparse.Namespace) -> None:
    cfg = PART.config.CONFIGS[args.config]()
    batches = {}
    with recorded(args.json) as figures, tempfile.TemporaryDirectory() as scratch:
        table = Path(scratch) / "table.csv"
        pd.concat([PART.data.load_table(cfg)] * args.scale).to_csv(table, index=False)
        timed = dataclasses.replace(
            cfg,
            data_path=str(table),
            num_epochs=args.epochs,
            wandb_mode="disabled",
            output=dataclasses.replace(cfg.output, base_dir=scratch),
        )

        def lightning_epochs(pipeline: bool, **bare: bool) -> list[float]:
            epochs, batches["an epoch"] = fit_epochs(timed, pipeline, **bare)
            return epochs

        contenders = {
            "plain PyTorch loop": lambda: plain_loop_epochs(timed),
            "bare Trainer": lambda: lightning_epochs(pipeline=False),
            "bare Trainer, default DataLoader": lambda: lightning_epochs(pipeline=False, default_loader=True),
            "Lightning's default Trainer": lambda: lightning_epochs(pipeline=False, lightning_defaults=True),
            "pipeline": lambda: lightning_epochs(pipeline=True),
        }
        seconds = alternate(contenders, args.repeats)
        median = medians(seconds)
        for name in contenders:
            print(f"{name:<34} median epoch {median[name] * 1000:8.1f} ms  of {len(seconds[name])} epochs")
        setting = f"config {cfg.name}, {batches['an epoch']} batches an epoch, rows x{args.scale}"
        baselines = ("bare Trainer", "bare Trainer, default DataLoader", "Lightning's default Trainer")
        for baseline in (*baselines, "plain PyTorch loop"):
            ratio = median["pipeline"] / median[baseline]
            added = (median["pipeline"] - median[baseline]) * 1000
            print(f"pipeline / {baseline} = {ratio:.3f}  ({added:+.1f} ms an epoch)")
        print(setting)
        costs = callback_costs(dataclasses.replace(timed, num_epochs=max(args.epochs, 10)))
        print("each callback's and logger's hooks, ms an epoch (one fit of the pipeline):")
        for name, cost in costs.items():
            print(f"  {name:<32} {cost * 1000:7.2f}")
        figures.update(
            callback_ms_an_epoch={name: cost * 1000 for name, cost in costs.items()},
            setting=setting,
            median_epoch_s=median,
            epochs_timed={name: len(times) for name, times in seconds.items()},
            pipeline_over_bare_trainer=median["pipeline"] / median["bare Trainer"],
            pipeline_over_bare_trainer_default_loader=(
                median["pipeline"] / median["bare Trainer, default DataLoader"]
            ),
            pipeline_over_lightning_defaults=median["pipeline"] / median["Lightning's default Trainer"],
            pipeline_over_plain_loop=median["pipeline"] / median["plain PyTorch loop"],
        )


if __name__ == "__main__":
    main(ARGS)
