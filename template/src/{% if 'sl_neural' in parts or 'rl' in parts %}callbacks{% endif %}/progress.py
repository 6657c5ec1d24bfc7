"""What a run shows as it trains: the model's summary, Rich's progress bar on a terminal, and
one line per epoch in the console and console.log."""

from __future__ import annotations

import time
from typing import Any

import lightning as L
from lightning.pytorch.callbacks import RichModelSummary, RichProgressBar
from lightning.pytorch.utilities import rank_zero_info
from lightning.pytorch.utilities.model_summary import get_human_readable_count
from rich import get_console
from rich.table import Table

from src.runs.console import metric_text, write_to_log_only


class ProgressBar(RichProgressBar):
    """RichProgressBar less `v_num`, the end of the W&B run id, which the run directory's name says."""

    def get_metrics(self, trainer: L.Trainer, pl_module: L.LightningModule) -> dict[str, Any]:
        return {k: v for k, v in super().get_metrics(trainer, pl_module).items() if k != "v_num"}


class ModelSummary(RichModelSummary):
    """Lightning's table of the model's layers, less its FLOPs column and total where they would
    read 0 (Lightning counts FLOPs only for a module with an example_input_array); totals in one line."""

    @staticmethod
    def summarize(
        summary_data: list[tuple[str, list[str]]],
        total_parameters: int,
        trainable_parameters: int,
        model_size: float,
        total_training_modes: dict[str, int],
        total_flops: int,
        **summarize_kwargs: Any,
    ) -> None:
        table = Table(header_style="bold magenta")
        columns = [(name, values) for name, values in summary_data if total_flops or name != "FLOPs"]
        for name, _ in columns:
            table.add_column(name, justify="right" if name in ("Params", "FLOPs") else "left")
        for row in zip(*(values for _, values in columns), strict=True):
            table.add_row(*row)
        count = [
            get_human_readable_count(int(n)).strip()
            for n in (trainable_parameters, total_parameters - trainable_parameters, total_flops)
        ]
        totals = (
            f"parameters: {count[0]} trainable, {count[1]} frozen ({model_size:,.3f} MB); modules: "
            f"{total_training_modes['train']} in train mode, {total_training_modes['eval']} in eval mode"
        )
        get_console().print(table)
        flops = f"; FLOPs of a forward pass on example_input_array: {count[2]}" if total_flops else ""
        get_console().print(totals + flops, markup=False, highlight=False, soft_wrap=True)


class EpochSummaryCallback(L.Callback):
    """`epoch 3 | lr 0.001 | train_loss 0.1203 | val_loss 0.0981 | val_acc 0.9712 | 1.4 s`: the
    first parameter group's rate, the top-level metrics (LOG-4) and the epoch's seconds, so that
    a detached run's log (OPS-2) reads at a glance."""

    def __init__(self) -> None:
        self._epoch_start = time.perf_counter()

    def on_train_epoch_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._epoch_start = time.perf_counter()

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        parts = [f"epoch {trainer.current_epoch}"]
        if trainer.optimizers:
            parts.append(f"lr {trainer.optimizers[0].param_groups[0]['lr']:.4g}")
        parts += [
            f"{key} {metric_text(value)}"
            for key, value in sorted(trainer.callback_metrics.items())
            if "/" not in key and not key.endswith(("_step", "_epoch"))
        ]
        parts.append(f"{time.perf_counter() - self._epoch_start:.1f} s")
        line = " | ".join(parts)
        bar = trainer.progress_bar_callback
        if (
            trainer.is_global_zero
            and isinstance(bar, ProgressBar)
            and bar.progress is not None
            and bar.is_enabled
        ):
            # Above the live bar, not under its next redraw; the redraws stay out of console.log.
            bar.progress.console.print(line, markup=False, highlight=False, soft_wrap=True)
            write_to_log_only(line + "\n")
        else:
            rank_zero_info(line)
