"""Saving and loading a LightningModule outside Lightning (LIT-3, RES-3), and Lightning's
checkpoints written atomically (RES-1)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import lightning as L
import torch
from lightning.pytorch.plugins import TorchCheckpointIO
from lightning.pytorch.utilities import rank_zero_only

from src.config import ConfigError
from src.runs.atomic import atomic_path
from src.runs.checkpoint_checks import checkpoint_problem
from src.runs.directory import latest_checkpoint, run_dir_of


def config_hyperparameters(cfg: Any) -> dict[str, Any]:
    """A config's fields as a LightningModule's hyperparameters (LOG-2), less the settings
    that RunInfoCallback logs as what the Trainer used, under the same names."""
    return {name: value for name, value in cfg.to_dict().items() if name not in ("precision", "profiler")}


@rank_zero_only
def save_module(module: L.LightningModule, path: Path) -> Path:
    """Weights and constructor arguments only: small, and loadable with weights_only=True.
    Written by rank zero only (DDP-1); other ranks get None."""
    save_torch({"hyper_parameters": dict(module.hparams), "state_dict": module.state_dict()}, path)
    return path


class AtomicCheckpointIO(TorchCheckpointIO):
    """Lightning's checkpoint writer, written beside the checkpoint and renamed. Lightning's
    own goes through a file in the system temp folder and copies it over when that is
    another disk, so a full disk there truncates last.ckpt."""

    def save_checkpoint(self, checkpoint: dict[str, Any], path: Any, storage_options: Any = None) -> None:
        save_torch(checkpoint, Path(path))


def save_torch(content: dict[str, Any], path: Path) -> None:
    """torch.save, atomically. A full disk is the OSError the file's write raised: torch's
    writer reports it as an unrelated RuntimeError ("unexpected pos")."""
    with atomic_path(path) as temporary, open(temporary, "wb") as file:
        failed: list[OSError] = []

        def write(data: bytes) -> int:
            try:
                return file.write(data)
            except OSError as error:
                failed.append(error)
                raise

        try:
            torch.save(content, SimpleNamespace(write=write, flush=file.flush))
        except RuntimeError:
            if failed:
                raise failed[0] from None
            raise


def best_score(trainer: L.Trainer) -> float:
    """The validation score of the best checkpoint, the one test(ckpt_path="best") loads."""
    callback = trainer.checkpoint_callback
    if callback is None or not callback.best_model_path or callback.best_model_score is None:
        raise ConfigError(
            "training stopped before its first validation (its time budget ran out, a stop file "
            "asked it to, or it trained fewer steps than val_every_n_steps), so there is no best "
            "checkpoint to test; give it more max_wall_clock_hours or fewer val_every_n_steps"
        )
    return float(callback.best_model_score)


def check_best_checkpoint(trainer: L.Trainer) -> None:
    """A run killed while it tested may have cut best.ckpt: the latest intact checkpoint stands
    in for a damaged one (best_model_path, which "best" names, points there), else ConfigError."""
    callback = trainer.checkpoint_callback
    best = Path(callback.best_model_path)
    if (problem := checkpoint_problem(best)) is None:
        return
    last = latest_checkpoint(run_dir_of(best))
    if last is None or checkpoint_problem(last) is not None:
        raise ConfigError(f"{best} is {problem} and no other intact checkpoint is left to test; train afresh")
    if trainer.is_global_zero:
        print(f"warning: {best.name} is {problem}: testing {last.name} instead", file=sys.stderr)
    callback.best_model_path = str(last)


def load_module(
    build: Callable[[dict[str, Any]], L.LightningModule], path: Path, map_location: str | torch.device = "cpu"
) -> L.LightningModule:
    """A `save_module` file or a Lightning checkpoint, on any device, `build` making the module
    from its hyperparameters. weights_only=True: a pickle's hidden code is refused, not run."""
    checkpoint = torch.load(path, map_location=map_location, weights_only=True)
    module = build(checkpoint["hyper_parameters"])
    module.configure_model()  # a module that sizes its layers there, as Lightning does before loading
    module.load_state_dict(checkpoint["state_dict"])
    del checkpoint  # RES-3: the loaded copy (optimizer state included) is not kept
    return module.to(map_location).eval()
