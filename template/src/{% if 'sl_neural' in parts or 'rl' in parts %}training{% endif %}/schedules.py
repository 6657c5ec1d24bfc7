"""Learning-rate schedules that step once per optimizer step, over the whole run (RES-2), from
torch's own schedulers. The caller passes the run's length in steps: a LightningModule's
`self.trainer.estimated_stepping_batches` counts the real loader, accumulation and processes."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from torch.optim import Optimizer, lr_scheduler

ONECYCLE_START = 1 / 25  # OneCycleLR's default div_factor: it starts at 4% of the peak rate


def step_schedule(optimizer: Optimizer, total_steps: int, hparams: Mapping[str, Any]) -> dict[str, Any]:
    """Lightning's scheduler config for hparams["scheduler"] over `total_steps`: cosine rises
    linearly over `warmup_fraction` of the steps, then falls to `min_lr_fraction` of the rate;
    onecycle likewise, along cosines from 4% of the rate; constant keeps it."""
    rate, min_fraction, name = optimizer.defaults["lr"], hparams["min_lr_fraction"], hparams["scheduler"]
    # The step at which the rate peaks; at least one step falls after it.
    peak = max(0, min(round(hparams["warmup_fraction"] * total_steps), total_steps - 2))
    if name == "constant":
        scheduler = lr_scheduler.ConstantLR(optimizer, factor=1.0, total_iters=0)
    elif name == "onecycle":
        scheduler = lr_scheduler.OneCycleLR(
            optimizer,
            max_lr=rate,
            total_steps=total_steps,
            pct_start=(peak + 1) / total_steps if peak else 0.0,  # it peaks at pct_start * total - 1
            div_factor=1 / ONECYCLE_START,
            final_div_factor=ONECYCLE_START / min_fraction if min_fraction else math.inf,
            cycle_momentum=False,  # the rate alone: AdamW keeps its betas, as under the other schedules
        )
    else:
        scheduler = lr_scheduler.CosineAnnealingLR(
            optimizer, T_max=total_steps - peak, eta_min=min_fraction * rate
        )
        if peak:
            # Step k of the warmup trains at rate * (k + 1) / (peak + 1): a line through zero
            # that reaches the rate at the peak, without a first step at rate zero.
            rise = lr_scheduler.LinearLR(optimizer, start_factor=1 / (peak + 1), total_iters=peak)
            scheduler = lr_scheduler.SequentialLR(optimizer, [rise, scheduler], milestones=[peak])
    return {"scheduler": scheduler, "interval": "step", "name": "lr"}
