"""The Trainer's settings that the Lightning parts (SL neural and RL) share: the level of the
config hierarchy (CFG-1) between BaseConfig and their own."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from src.config import BaseConfig, at_least
from src.runs.launch import current_launch, master_port_problem, processes_problem

StepSchedule = Literal["constant", "cosine", "onecycle"]  # per optimizer step (src/training/schedules.py)
Schedule = Literal["plateau", StepSchedule]  # plateau: per epoch, on the monitored metric
SPANNING_SCHEDULES = ("cosine", "onecycle")  # they decay over the whole run: they need its length


@dataclass
class LightningConfig(BaseConfig):
    """Trainer settings shared by the Lightning parts: SL neural and RL.

    Attributes:
        num_epochs: Upper bound on epochs; set high so that early stopping ends training.
        patience: Validations without improvement of the monitored metric before early stopping.
        min_delta: Smallest change of the monitored metric that counts as an improvement.
        batch_size: Examples per batch on each device.
        learning_rate: Learning rate of AdamW: the peak of a cosine or onecycle schedule.
        weight_decay: AdamW weight decay, of weight matrices only (never biases or norm scales).
        scheduler: Learning-rate schedule: constant, cosine (after a linear warmup) or onecycle;
            the last two span num_epochs, which they need set.
        warmup_fraction: Share of the training steps over which cosine and onecycle raise the
            rate to learning_rate.
        min_lr_fraction: Rate at which cosine and onecycle end, as a share of learning_rate.
        precision: Numeric precision: auto is bf16-mixed on a GPU that supports it, else 32-true.
        profiler: Lightning profiler whose report lands in the run directory; advanced is per function.
        accelerator: Lightning accelerator: auto, cpu, gpu or mps.
        devices: Devices per node: auto, a count such as 2, or a list such as 0,1.
        num_nodes: Machines in a multi-node run.
        strategy: Lightning strategy for several devices, such as ddp.
        log_every_n_steps: Optimizer steps between per-step metric logs.
        keep_last_n: Checkpoints of the latest validations to keep beside best and last, as
            checkpoints/epoch=E-step=S.ckpt; the oldest goes once a newer one is written.
        val_every_n_steps: Validate every this many optimizer steps, across epoch ends, instead of
            after each epoch (0); early stopping's patience then counts these validations.
        checkpoint_minutes: Minutes between rewrites of checkpoints/last.ckpt, the checkpoint a
            resume starts from, mid-epoch included; 0 rewrites it after validations only.
        checkpoint_every_n_steps: Also rewrite checkpoints/last.ckpt every this many optimizer
            steps; 0 never does on a step count.
    """

    num_epochs: int = 10_000
    patience: int = 10
    min_delta: float = 0.0
    batch_size: int = 64
    learning_rate: float = 1e-3
    weight_decay: float = 0.01
    scheduler: StepSchedule = "constant"
    warmup_fraction: float = 0.05
    min_lr_fraction: float = 0.0
    precision: Literal["auto", "bf16-mixed", "32-true"] = "auto"
    profiler: Literal["simple", "advanced"] = "simple"
    accelerator: str = "auto"
    devices: str = "auto"
    num_nodes: int = 1
    strategy: str = "auto"
    log_every_n_steps: int = 10
    keep_last_n: int = 0
    val_every_n_steps: int = 0
    checkpoint_minutes: float = 30.0
    checkpoint_every_n_steps: int = 0

    def problems(self) -> list[str]:
        minimums = dict.fromkeys(("num_epochs", "batch_size", "num_nodes", "log_every_n_steps"), 1)
        minimums |= dict.fromkeys(("patience", "keep_last_n", "val_every_n_steps", "learning_rate"), 0)
        minimums |= dict.fromkeys(("weight_decay", "checkpoint_minutes", "checkpoint_every_n_steps"), 0)
        found = super().problems() + at_least(self, **minimums)
        # The default num_epochs leaves the end to early stopping: a schedule that decays to its
        # end needs an end it can plan for.
        if self.scheduler in SPANNING_SCHEDULES and self.num_epochs >= LightningConfig.num_epochs:
            found.append(
                f"scheduler {self.scheduler}: it decays over num_epochs, {self.num_epochs} here (the "
                "default, for early stopping to end training); set num_epochs to the epochs to train, e.g. 50"
            )
        if not 0 <= self.warmup_fraction < 1 or not 0 <= self.min_lr_fraction <= 1:
            fractions = f"warmup_fraction {self.warmup_fraction}, min_lr_fraction {self.min_lr_fraction}"
            found.append(f"{fractions}: must be in [0, 1) and [0, 1]")
        return found + _hardware_problems(self.accelerator, self.devices, self.num_nodes, self.strategy)


def _hardware_problems(accelerator: str, devices: str, num_nodes: int, strategy: str) -> list[str]:
    """Accelerator, devices and strategy that Lightning would refuse only after the run began.
    torch and Lightning load only for values other than auto: the defaults, --help and a
    mistyped flag answer without the seconds they take."""
    found = []
    accelerators = ("auto", "cpu", "gpu", "cuda", "mps")
    if accelerator not in accelerators:
        found.append(f"accelerator {accelerator!r}: use one of {', '.join(accelerators)}")
    elif not _accelerator_present(accelerator):
        found.append(f"accelerator {accelerator!r}: none is visible on this machine; use auto or cpu")
    on_cpu = accelerator == "cpu" or (accelerator == "auto" and not _accelerator_present("gpu"))
    if not re.fullmatch(r"auto|-1|[1-9][0-9]*|[0-9]+,|[0-9]+(,[0-9]+)+,?", devices.replace(" ", "")):
        found.append(f"devices {devices!r}: use auto, -1 (all), a count such as 2, or a list such as 0,1")
    elif not re.fullmatch(r"auto|[1-9][0-9]*", devices.strip()) and on_cpu:
        found.append(f"devices {devices!r}: on the CPU, use auto or a count of processes such as 2")
    launch = current_launch()
    checks = (processes_problem, master_port_problem)
    found += [said for check in checks if (said := check(launch, devices, num_nodes))]
    if strategy == "auto":
        return found
    from lightning.pytorch.strategies import StrategyRegistry

    strategies = ["auto", *StrategyRegistry.available_strategies()]
    if strategy not in strategies:
        found.append(f"strategy {strategy!r}: use one of Lightning's: {', '.join(strategies)}")
    elif re.search("spawn|fork|notebook", strategy):
        # Lightning brings back only the weights from processes it starts this way: the
        # checkpoints' scores, which the test and the sweeps need, stay behind.
        found.append(f"strategy {strategy!r}: use ddp, which starts a process per device with its own state")
    return found


def _accelerator_present(accelerator: str) -> bool:
    if accelerator in ("auto", "cpu"):
        return True
    import torch

    cuda, mps = torch.cuda.is_available(), torch.backends.mps.is_available()
    return {"gpu": cuda or mps, "cuda": cuda, "mps": mps}[accelerator]
