"""What a run shows as it trains: the model's summary, Rich's progress bar on a terminal,
and one summary line per epoch in the console and console.log."""

from __future__ import annotations

from typing import Any

import lightning as L
from lightning.pytorch.callbacks import RichModelSummary, RichProgressBar
from lightning.pytorch.utilities import rank_zero_info
from lightning.pytorch.utilities.model_summary import get_human_readable_count

from src.runs.console import write_to_log_only


class ProgressBar(RichProgressBar):
    """RichProgressBar less `v_num`, the end of the W&B run id, which tells nothing the run
    directory's name does not."""

    def get_metrics(self, trainer: L.Trainer, pl_module: L.LightningModule) -> dict[str, Any]:
        items = super().get_metrics(trainer, pl_module)
        items.pop("v_num", None)
        return items

    def print_line(self, line: str) -> bool:
        """Print `line` above the live bar, not under its next redraw; False when no bar shows."""
        if self.progress is None or not self.is_enabled:
            return False
        self.progress.console.print(line, markup=False, highlight=False, soft_wrap=True)
        return True


class ModelSummary(RichModelSummary):
    """Lightning's table of the model's layers and parameters, less its FLOPs column and
    total where they would read 0: Lightning counts FLOPs only for a module that sets an
    example_input_array. The totals take one line."""

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
        from rich import get_console
        from rich.table import Table

        table = Table(header_style="bold magenta")
        columns = [(name, values) for name, values in summary_data if total_flops or name != "FLOPs"]
        for name, _ in columns:
            table.add_column(name, justify="right" if name in ("Params", "FLOPs") else "left")
        for row in zip(*(values for _, values in columns), strict=True):
            table.add_row(*row)

        def count(number: int) -> str:
            return get_human_readable_count(int(number)).strip()

        modes = total_training_modes
        totals = (
            f"parameters: {count(trainable_parameters)} trainable, "
            f"{count(total_parameters - trainable_parameters)} frozen ({model_size:,.3f} MB); "
            f"modules: {modes['train']} in train mode, {modes['eval']} in eval mode"
        )
        if total_flops:
            totals += f"; FLOPs of a forward pass on example_input_array: {count(total_flops)}"
        console = get_console()
        console.print(table)
        console.print(totals, markup=False, highlight=False, soft_wrap=True)


class EpochSummaryCallback(L.Callback):
    """`epoch 3 | lr 0.001 | train_loss 0.1203 | val_loss 0.0981 | val_acc 0.9712 | 1.4 s`:
    the top-level metrics (LOG-4), so a detached run's log (OPS-2) reads at a glance. After
    the callbacks that log them."""

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
