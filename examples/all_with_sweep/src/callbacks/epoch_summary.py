"""One readable line per epoch in the console and console.log."""

from __future__ import annotations

import lightning as L
from lightning.pytorch.utilities import rank_zero_info

from src.callbacks.progress_bar import ProgressBar
from src.runs.console import write_to_log_only


class EpochSummaryCallback(L.Callback):
    """`epoch 3 | lr 0.001 | train_loss 0.1203 | val_loss 0.0981 | val_acc 0.9712 | 1.4 s`:
    the top-level metrics (LOG-4), so a detached run's log (OPS-2) reads at a glance."""

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        metrics = trainer.callback_metrics
        parts = [f"epoch {trainer.current_epoch}"]
        parts += [
            f"{key} {float(value):.4g}"
            for key, value in sorted(metrics.items())
            if "/" not in key and not key.endswith(("_step", "_epoch"))
        ]
        if "timing/epoch_seconds" in metrics:
            parts.append(f"{float(metrics['timing/epoch_seconds']):.1f} s")
        line = " | ".join(parts)
        bar = trainer.progress_bar_callback
        if trainer.is_global_zero and isinstance(bar, ProgressBar) and bar.print_line(line):
            write_to_log_only(line + "\n")  # the bar's redraws stay out of console.log
        else:
            rank_zero_info(line)
