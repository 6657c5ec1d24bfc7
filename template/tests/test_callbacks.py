"""Shared callbacks on a real Lightning fit (Lightning's own BoringModel), where what
they do shows outside the run's files."""

from __future__ import annotations

import gc

import lightning as L
import pytest
from lightning.pytorch.demos.boring_classes import BoringModel

from src.callbacks import FrozenHeapCallback


class FreezeProbe(L.Callback):
    """The objects gc leaves alone, at each training step."""

    def __init__(self) -> None:
        self.frozen: list[int] = []

    def on_train_batch_end(self, *args) -> None:
        self.frozen.append(gc.get_freeze_count())


class FailingModel(BoringModel):
    def training_step(self, batch, batch_idx):
        if batch_idx == 2:
            raise RuntimeError("a step that fails")
        return super().training_step(batch, batch_idx)


def fit(tmp_path, model: L.LightningModule) -> FreezeProbe:
    probe = FreezeProbe()
    trainer = L.Trainer(
        default_root_dir=tmp_path,
        max_steps=4,
        callbacks=[FrozenHeapCallback(), probe],
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(model)
    return probe


def test_a_fit_keeps_gc_off_its_starting_objects_and_gives_them_back(tmp_path):
    assert gc.get_freeze_count() == 0
    probe = fit(tmp_path, BoringModel())
    assert len(probe.frozen) == 4
    assert min(probe.frozen) > 1000  # the model, Lightning's and torch's own objects
    assert gc.get_freeze_count() == 0  # collectable again: a sweep's next trial, a test


def test_a_fit_that_fails_gives_its_objects_back_to_gc(tmp_path):
    with pytest.raises(RuntimeError, match="a step that fails"):
        fit(tmp_path, FailingModel())
    assert gc.get_freeze_count() == 0
