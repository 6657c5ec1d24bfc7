"""Train this part: PPO on TorchRL, driven by Lightning.

Usage (`--help` lists every config field as a flag):
python -m part3.train --config smoke                   # the whole pipeline in under a minute
python -m part3.train --config baseline                # solves CartPole-v1 in minutes on a CPU
python -m part3.train --config baseline --resume auto  # continue the newest baseline run
"""

from __future__ import annotations

import os

# RL-8: as in this package's __init__.py, for `python part3/train.py`, which may load
# torch before the package.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from pathlib import Path

# This part's own modules; the template names its folder.
from part3.config import CONFIGS, CartPoleConfig
from src.cli import exit_on_bad_input, parse_cli
from src.ops.gpu_lock import GpuLock


def main_with_config(cfg: CartPoleConfig, resume_from: Path | None = None) -> dict[str, float]:
    """Train, test and save one config; returns the test metrics and the best validation
    score (SWP-2: sweeps call this, and select on validation, never on test)."""
    # Here, not at the top: torch, Lightning and TorchRL take seconds to load; --help answers before.
    import lightning as L

    from part3 import data
    from part3.model import build_model, save_model
    from src.ops.memory import cleanup_vram
    from src.rl.data import RolloutDataModule, target_reward
    from src.runs.lifetime import start_run
    from src.training.checkpoints import best_score, check_best_checkpoint
    from src.training.trainer import build_trainer
    from src.wandb_utils import create_wandb_logger, finish_run, log_model_artifact

    with start_run(cfg, resume_from) as run:
        # MAIN-1: seed -> DataModule -> LightningModule -> WandbLogger -> Trainer -> fit -> test -> finish
        L.seed_everything(cfg.seed, workers=True)
        datamodule = RolloutDataModule(cfg, data)
        try:
            model = build_model(cfg)
            logger = create_wandb_logger(cfg, run.dir)
            trainer = build_trainer(
                cfg,
                run.dir,
                logger,
                monitor="val_episode_reward",
                mode="max",
                stopping_threshold=target_reward(cfg),  # solved: no need to wait for a plateau
                fetch_section="env_step",  # PRF-3: collecting a rollout is this part's data fetch
                # An epoch is a fixed number of collections from an endless collector.
                limit_train_batches=cfg.iterations_per_epoch,
                num_sanity_val_steps=0,  # an untrained policy's episodes tell nothing
            )
            trainer.fit(model, datamodule=datamodule, ckpt_path=run.resume_from)
            best_val_reward = best_score(trainer)  # one line, not a traceback, when there is none
            check_best_checkpoint(trainer)  # intact, or the latest intact one stands in (RES-1)
            (test_metrics,) = trainer.test(model, datamodule=datamodule, ckpt_path="best")
        finally:
            datamodule.close()  # RL-3: no worker process outlives the run, however it ends
        # test() loaded that checkpoint's weights into `model`: they are the ones we keep.
        model_path = save_model(model, run.dir / "model.pt")
        log_model_artifact(model_path, f"{cfg.name}-model", metadata=test_metrics)  # once, at the end (LOG-6)
        finish_run()  # wandb.finish(), except in a sweep agent's run
    del model, trainer
    cleanup_vram()  # after `del`: the memory is free for the next run (MEM-4)
    return {**test_metrics, "best_val_episode_reward": best_val_reward}


def main() -> None:
    cfg, resume_from = parse_cli(CONFIGS, prog="python -m part3.train", description=__doc__)
    # OPS-1: queue behind other GPU jobs instead of failing; after parsing, so that --help answers at once.
    with GpuLock(), exit_on_bad_input():
        main_with_config(cfg, resume_from)


if __name__ == "__main__":
    main()
