"""The Trainer every Lightning part uses, with the checklist's callbacks in the order they need."""

from __future__ import annotations

import logging
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import lightning as L
import torch
from lightning.pytorch.callbacks import BatchSizeFinder, LearningRateMonitor, ModelCheckpoint
from lightning.pytorch.loggers import Logger
from lightning.pytorch.profilers import AdvancedProfiler
from lightning.pytorch.utilities import rank_zero_info
from lightning.pytorch.utilities.parsing import lightning_getattr, lightning_setattr

from src.callbacks.guards import (
    AlertCallback,
    FiniteLossCallback,
    SigtermInStep,
    StopFileCallback,
    WallClockTimer,
)
from src.callbacks.metrics import MetricsCallback, RunInfoCallback, TimingCallback
from src.callbacks.progress import EpochSummaryCallback, ModelSummary, ProgressBar
from src.callbacks.resume import ExactResume, ResumableEarlyStopping
from src.ops.alerts import Alerts
from src.runs.directory import stop_file_paths
from src.runs.launch import current_launch, trainer_processes
from src.runs.loggers import file_loggers
from src.training.checkpoints import AtomicCheckpointIO
from src.training.config import LightningConfig
from src.training.jsonl_logger import JsonlLogger
from src.training.precision import choose_precision
from src.training.profiler import BoundedSimpleProfiler

# Raised inside Lightning 2.6 by newer torch on every run; nothing in this project to act on.
warnings.filterwarnings("ignore", message=r".*isinstance\(treespec, LeafSpec\)")
# By design: the first ModelCheckpoint (best.ckpt) is the one test(ckpt_path="best") uses.
warnings.filterwarnings("ignore", message=r".*multiple `ModelCheckpoint` callbacks")
# A run folder is new or resumed: a resume finds its own checkpoints there, on purpose.
warnings.filterwarnings("ignore", message=r"Checkpoint directory .* exists and is not empty")
# On every bf16-mixed run; the summary counts 32 bits a parameter, which mixed precision keeps.
warnings.filterwarnings("ignore", message=r"Precision bf16-mixed is not supported by the model summary")
# Lines Lightning prints on every run that tell nothing about this one (the precision line
# says whether CUDA is there, and which precision), and that it uses our ModelSummary.
BOILERPLATE = (
    "💡 Tip",
    "GPU available: ",
    "TPU available: ",
    "Using bfloat16 Automatic Mixed Precision",
    "Loading `train_dataloader` to estimate",
    "Trainer already configured with model summary callbacks",
)
logging.getLogger("lightning.pytorch.utilities.rank_zero").addFilter(
    lambda record: not str(record.msg).startswith(BOILERPLATE)
)
# The hooks Lightning calls on every batch: each batch's start and end, and each step's.
BATCH_HOOKS = [
    hook for hook in vars(L.Callback) if "_batch_" in hook or hook.startswith(("on_before_", "on_after_"))
]


def build_callbacks(
    cfg: LightningConfig,
    run_dir: Path,
    monitor: str,
    mode: str,
    stopping_threshold: float | None,
    fetch_section: str,
) -> list[L.Callback]:
    """The checklist's callbacks, in the order Lightning calls each hook in, which matters:
    - ExactResume after the guards, so that a step that ends training (the budget) is validated
      and checkpointed as the end; after the metrics, so that a resume's plateau step changes
      the rate after `lr` is logged, and its mid-epoch checkpoint counts as timing/overhead;
    - the metrics before EpochSummaryCallback, which prints them; AlertCallback after
      FiniteLossCallback, which ends a run whose metric is not a number;
    - Lightning moves the ModelCheckpoints last, in their order: best.ckpt first (what
      test(ckpt_path="best") uses), the latest before last.ckpt, which then records them."""
    checkpoints = run_dir / "checkpoints"
    # The latest keep_last_n validations' checkpoints ("step" ranks them by age); Lightning
    # deletes the oldest only after the new one is written.
    latest = ModelCheckpoint(dirpath=checkpoints, monitor="step", mode="max", save_top_k=cfg.keep_last_n)
    return [
        ResumableEarlyStopping(  # CB-1: patience counts validations, not epochs
            monitor=monitor,
            patience=cfg.patience,
            mode=mode,
            min_delta=cfg.min_delta,
            stopping_threshold=stopping_threshold,
        ),
        # CB-2, OUT-3: best.ckpt, and last.ckpt from a callback of its own: Lightning 2.6's
        # save_last=True rewrites it only when the best improves, not after every validation.
        ModelCheckpoint(
            dirpath=checkpoints,
            filename="best",
            monitor=monitor,
            mode=mode,
            save_top_k=1,
            enable_version_counter=False,
        ),
        *([latest] if cfg.keep_last_n else []),
        ModelCheckpoint(dirpath=checkpoints, filename="last", enable_version_counter=False),
        # CB-3: each scheduler at its own interval, per step but for plateau (RES-2: warmup shows).
        LearningRateMonitor(logging_interval=None),
        FiniteLossCallback(monitor=monitor),  # a NaN loss fails the run, never saved as best
        AlertCallback(Alerts(cfg.alerts, run_dir), monitor, mode, cfg.min_delta),  # stalled, GPU idle or full
        StopFileCallback(stop_file_paths(cfg.stop_file, run_dir)),  # `touch STOP` (CB-4)
        SigtermInStep(),  # the ranks stop together, however many were signalled
        WallClockTimer(cfg.max_wall_clock_hours),  # CFG-4 budget, mid-epoch
        TimingCallback(fetch_section=fetch_section),  # timing/ (PRF-2..4)
        MetricsCallback(monitor=monitor, mode=mode),  # batch/, lr, system/, tracking/ (LOG-4)
        RunInfoCallback(run_dir),  # start-of-run facts (LOG-5)
        ExactResume(cfg, run_dir),  # RES-1, RES-2
        EpochSummaryCallback(),
    ]


def skip_inherited_batch_hooks(callbacks: Sequence[L.Callback]) -> None:
    """Lightning calls every batch hook of every callback in a profiler context, inherited empty
    ones included: about 140 calls a step. Set to None, an inherited one is passed over (private:
    _call_callback_hooks skips what is not callable; a change shows in
    test_lightning_calls_only_the_batch_hooks_a_callback_defines)."""
    for callback in callbacks:
        for hook in BATCH_HOOKS:
            if getattr(type(callback), hook) is getattr(L.Callback, hook) and hook not in vars(callback):
                setattr(callback, hook, None)


def build_trainer(
    cfg: LightningConfig,
    run_dir: Path,
    wandb_logger: Logger | None,
    *,
    monitor: str = "val_loss",
    mode: str = "min",
    stopping_threshold: float | None = None,
    fetch_section: str = "data",
    extra_callbacks: Sequence[L.Callback] = (),
    **trainer_args: Any,
) -> L.Trainer:
    """The Trainer with the checklist's callbacks; from the part: the metric early stopping and
    best.ckpt follow (and a `stopping_threshold` that ends training), the timed fetch's name
    (`data`, or `env_step` for RL), its own callbacks and any other Trainer argument."""
    precision = choose_precision(cfg.precision, cfg.accelerator)
    cuda = torch.cuda.is_available()
    rank_zero_info(
        f"precision: {precision} (requested {cfg.precision}; CUDA {'' if cuda else 'not '}available)"
    )
    if cuda:
        torch.set_float32_matmul_precision("high")  # TF32 for what still runs in fp32
    loggers: list[Logger] = [
        *([wandb_logger] if wandb_logger is not None else []),
        *file_loggers(cfg, run_dir),  # TensorBoard and CSV, as --loggers chose (LOG-1)
        JsonlLogger(run_dir / "metrics.jsonl"),  # a copy W&B cannot lose (OUT-4)
    ]
    profiler_cls = AdvancedProfiler if cfg.profiler == "advanced" else BoundedSimpleProfiler
    callbacks = build_callbacks(cfg, run_dir, monitor, mode, stopping_threshold, fetch_section)
    devices, num_nodes = trainer_processes(current_launch(), cfg.devices, cfg.num_nodes)
    if cfg.val_every_n_steps:  # counted in batches by Lightning, across epoch ends
        batches = cfg.val_every_n_steps * trainer_args.get("accumulate_grad_batches", 1)
        trainer_args |= {"val_check_interval": batches, "check_val_every_n_epoch": None}
    # Rich's bar on a terminal; a detached run gets EpochSummaryCallback's lines alone.
    on_terminal = sys.stderr.isatty()
    trainer = L.Trainer(
        default_root_dir=run_dir,  # Lightning's own files land in the run too (OUT-1)
        logger=loggers,
        callbacks=[*callbacks, *extra_callbacks, ModelSummary(), *([ProgressBar()] if on_terminal else [])],
        max_epochs=cfg.num_epochs,
        precision=precision,  # bf16-mixed, or 32-true where bf16 is unsupported (PRC-1, PRC-3)
        accelerator=cfg.accelerator,
        # Under torchrun or srun, the processes they started: one DDP job, not several runs.
        devices=devices,
        num_nodes=num_nodes,
        strategy=cfg.strategy,
        plugins=[AtomicCheckpointIO()],  # a kill or a full disk never truncates a checkpoint
        profiler=profiler_cls(dirpath=run_dir, filename="profile"),
        log_every_n_steps=cfg.log_every_n_steps,
        enable_progress_bar=on_terminal,
        **trainer_args,
    )
    skip_inherited_batch_hooks(trainer.callbacks)  # Lightning's own callbacks too
    for finder in (callback for callback in extra_callbacks if isinstance(callback, BatchSizeFinder)):
        # The batch size is found before training, once: Lightning's searches again as test()
        # and predict() start, on a CPU up to the whole set.
        finder.on_test_start = finder.on_predict_start = lambda *args: None
        keep_the_found_batch_size(finder)
    return trainer


def keep_the_found_batch_size(finder: BatchSizeFinder) -> None:
    """The batch size `finder` found travels in the run's checkpoints, and a resumed run takes
    it again: searching anew restores the finder's own checkpoint over the resumed one, and the
    run began again at epoch 0."""
    search, found = finder.on_fit_start, {}

    def on_fit_start(trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if "batch_size" in found:  # from the checkpoint resumed
            lightning_setattr(pl_module, "batch_size", found["batch_size"])
        else:
            search(trainer, pl_module)
            found["batch_size"] = int(lightning_getattr(pl_module, "batch_size"))

    finder.on_fit_start, finder.state_dict, finder.load_state_dict = on_fit_start, found.copy, found.update
