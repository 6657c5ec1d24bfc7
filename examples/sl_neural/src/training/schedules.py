"""Learning-rate schedules that step once per training step, over the whole run (RES-2).

Built from torch's own schedulers. The length of a run in steps is the caller's: a
LightningModule passes `self.trainer.estimated_stepping_batches`, which Lightning
computes after the DataModule is set up from the real loader length, the gradient
accumulation and the number of processes, so neither accumulation nor DDP shifts it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from torch.optim import Optimizer
from torch.optim.lr_scheduler import (
    ConstantLR,
    CosineAnnealingLR,
    LinearLR,
    LRScheduler,
    OneCycleLR,
    SequentialLR,
)

from src.config import StepSchedule

ONECYCLE_START = 1 / 25  # OneCycleLR's default div_factor: it starts at 4% of the peak rate


def step_schedule(optimizer: Optimizer, total_steps: int, hparams: Mapping[str, Any]) -> dict[str, Any]:
    """Lightning's scheduler config for the schedule the hyperparameters name (`scheduler`)
    over `total_steps` steps, from the optimizer's rate: cosine rises linearly over the
    first `warmup_fraction` of the steps, then falls to `min_lr_fraction` of the rate by the
    last; onecycle rises and falls alike, along cosines, from 4% of the rate; constant keeps
    the rate. LearningRateMonitor logs it as lr/<parameter group> at every step."""
    scheduler = _scheduler(
        optimizer, hparams["scheduler"], total_steps, hparams["warmup_fraction"], hparams["min_lr_fraction"]
    )
    return {"scheduler": scheduler, "interval": "step", "name": "lr"}


def _scheduler(
    optimizer: Optimizer, name: StepSchedule, total_steps: int, warmup_fraction: float, min_lr_fraction: float
) -> LRScheduler:
    rate = optimizer.defaults["lr"]
    if name == "constant":
        return ConstantLR(optimizer, factor=1.0, total_iters=0)
    # The step at which the rate peaks; at least one step falls after it.
    peak = max(0, min(round(warmup_fraction * total_steps), total_steps - 2))
    if name == "onecycle":
        return OneCycleLR(
            optimizer,
            max_lr=rate,
            total_steps=total_steps,
            pct_start=(peak + 1) / total_steps if peak else 0.0,  # it peaks at pct_start * total - 1
            div_factor=1 / ONECYCLE_START,
            final_div_factor=ONECYCLE_START / min_lr_fraction if min_lr_fraction else math.inf,
            cycle_momentum=False,  # the rate alone: AdamW keeps its betas, as under the other schedules
        )
    cosine = CosineAnnealingLR(optimizer, T_max=total_steps - peak, eta_min=min_lr_fraction * rate)
    if not peak:
        return cosine
    # Step k of the warmup trains at rate * (k + 1) / (peak + 1): a line through zero
    # that reaches the rate at the peak, without a first step at rate zero.
    rise = LinearLR(optimizer, start_factor=1 / (peak + 1), total_iters=peak)
    return SequentialLR(optimizer, [rise, cosine], milestones=[peak])
