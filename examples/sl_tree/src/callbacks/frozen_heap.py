"""Keeps Python's garbage collector off the objects a fit starts with."""

import gc

import lightning as L


class FrozenHeapCallback(L.Callback):
    """From the start of fitting to its end, the objects alive when it starts (the model, the
    data, every library's own) sit in gc's permanent generation. A step makes many short-lived
    objects, TorchRL's tensordicts above all, and each of gc's full passes would otherwise walk
    that whole heap again: about a tenth of a CPU PPO step."""

    def on_fit_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        gc.freeze()

    def on_fit_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        gc.unfreeze()  # collectable again: a sweep's next trial, or the test that follows

    def on_exception(self, trainer: L.Trainer, pl_module: L.LightningModule, error: BaseException) -> None:
        gc.unfreeze()
