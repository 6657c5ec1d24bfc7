"""Keeps Python's garbage collector off the objects a fit starts with."""

import gc

import lightning as L


class FrozenHeapCallback(L.Callback):
    """While fitting, the objects alive at its start (model, data, libraries) sit in gc's permanent
    generation: a step makes many short-lived objects (TorchRL's tensordicts), and each full pass
    would otherwise walk that whole heap again, about a tenth of a CPU PPO step."""

    def on_fit_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        gc.freeze()

    def on_fit_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        gc.unfreeze()  # collectable again: a sweep's next trial, or the test that follows

    def on_exception(self, trainer: L.Trainer, pl_module: L.LightningModule, error: BaseException) -> None:
        gc.unfreeze()
