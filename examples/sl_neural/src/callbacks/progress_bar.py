"""The progress bar on a terminal: Lightning's rich one, without `v_num`."""

from __future__ import annotations

from typing import Any

import lightning as L
from lightning.pytorch.callbacks import RichProgressBar


class ProgressBar(RichProgressBar):
    """RichProgressBar less `v_num`, the last characters of the W&B run id, which tell
    nothing the run directory's name does not. Lines printed through `print_line` land
    above the bar instead of under its next redraw."""

    def get_metrics(self, trainer: L.Trainer, pl_module: L.LightningModule) -> dict[str, Any]:
        items = super().get_metrics(trainer, pl_module)
        items.pop("v_num", None)
        return items

    def print_line(self, line: str) -> bool:
        """Print `line` above the live bar; False when no bar is showing."""
        if self.progress is None or not self.is_enabled:
            return False
        self.progress.console.print(line, markup=False, highlight=False, soft_wrap=True)
        return True
