"""RES-1: a run directory moved or copied elsewhere (another disk, another machine)
resumes as if it had never moved."""

from __future__ import annotations

from typing import Any

import lightning as L


class MovedRunCallback(L.Callback):
    """A checkpoint holds the absolute paths of the checkpoint callbacks' files. When the
    run was moved, Lightning would drop their best score and test(ckpt_path="best") would
    look in the old place: the paths are moved along before the callbacks load them."""

    def on_load_checkpoint(self, trainer: L.Trainer, pl_module: L.LightningModule, checkpoint: dict) -> None:
        states = checkpoint.get("callbacks", {})
        for callback in trainer.checkpoint_callbacks:
            state = states.get(callback.state_key)
            old_dir = state.get("dirpath") if isinstance(state, dict) else None
            if not old_dir or not callback.dirpath or old_dir == callback.dirpath:
                continue

            def moved(path: Any, old_dir: str = old_dir, new_dir: str = callback.dirpath) -> Any:
                is_inside = isinstance(path, str) and path.startswith(old_dir)
                return new_dir + path[len(old_dir) :] if is_inside else path

            for key in ("dirpath", "best_model_path", "last_model_path", "kth_best_model_path"):
                if key in state:
                    state[key] = moved(state[key])
            best_k = state.get("best_k_models")
            if isinstance(best_k, dict):
                state["best_k_models"] = {moved(path): score for path, score in best_k.items()}
