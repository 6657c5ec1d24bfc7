"""Train this part: an MLP on the digits data, or a table of your own, with Lightning.

Usage (`--help` lists every config field as a flag):
python -m part1.train --config smoke                   # the whole pipeline in seconds
python -m part1.train --config baseline                # a real run
python -m part1.train --config baseline --resume auto  # continue the newest baseline run
python -m part1.train --data-path penguins.csv --label-column species   # a table of your own
python -m part1.train --data-path penguins.csv --label-column body_mass_g --task regression
"""

from __future__ import annotations

from pathlib import Path

from part1.config import CONFIGS, DigitsConfig
from src.cli import exit_on_bad_input, parse_cli
from src.ops.gpu_lock import GpuLock


def main_with_config(cfg: DigitsConfig, resume_from: Path | None = None) -> dict[str, float]:
    """Train, test and save one config; returns the test metrics (test_accuracy or test_rmse
    and the others of src/predictions.py) and the best validation score (SWP-2: sweeps call
    this, and select on validation, never on test)."""
    # Here, not at the top: --help and a mistyped flag answer before torch and Lightning load.
    import lightning as L
    from lightning.pytorch.callbacks import BatchSizeFinder

    from part1 import data
    from part1.model import build_model, save_model
    from src.neural.data import TableDataModule
    from src.ops.memory import cleanup_vram
    from src.predictions import PREDICTIONS_FILE
    from src.runs.lifetime import start_run
    from src.training.checkpoints import best_score, check_best_checkpoint
    from src.training.trainer import build_trainer
    from src.wandb_utils import create_wandb_logger, finish_run, log_model_artifact

    with start_run(cfg, resume_from) as run:
        # MAIN-1: seed -> DataModule -> LightningModule -> WandbLogger -> Trainer -> fit -> test -> finish
        # DDP-1: one seed on every rank, as DistributedSampler needs; workers=True seeds each worker.
        L.seed_everything(cfg.seed, workers=True)
        datamodule = TableDataModule(cfg, data, resume_from=run.resume_from)
        model = build_model(cfg)
        logger = create_wandb_logger(cfg, run.dir)
        trainer = build_trainer(
            cfg,
            run.dir,
            logger,
            accumulate_grad_batches=cfg.gradient_accumulation_steps,
            gradient_clip_val=cfg.gradient_clip_val,  # LIT-4: clipping through the Trainer
            # MEM-1: Lightning's search for the largest batch that fits, never a hand-written one.
            extra_callbacks=[BatchSizeFinder(mode="binsearch")] if cfg.find_batch_size else [],
        )
        trainer.fit(model, datamodule=datamodule, ckpt_path=run.resume_from)
        best_val_loss = best_score(trainer)  # one line, not a traceback, when there is none
        check_best_checkpoint(trainer)  # intact, or the latest intact one stands in (RES-1)
        (test_metrics,) = trainer.test(model, datamodule=datamodule, ckpt_path="best")
        results = {**test_metrics, "best_val_loss": best_val_loss}
        # Every test row's prediction, for report.md and for checking `predict --rows test`.
        model.save_test_predictions(run.dir / PREDICTIONS_FILE)
        # test() loaded that checkpoint's weights into `model`: they are the ones we keep.
        model_path = save_model(model, run.dir / "model.pt")
        log_model_artifact(model_path, f"{cfg.name}-model", metadata=test_metrics)  # once, at the end (LOG-6)
        finish_run()  # wandb.finish(), except in a sweep agent's run
    del model, trainer
    cleanup_vram()  # after `del`: the memory is free for the next run (MEM-4)
    return results


def main() -> None:
    cfg, resume_from = parse_cli(CONFIGS, prog="python -m part1.train", description=__doc__)
    # OPS-1: queue behind other GPU jobs instead of failing; after parsing, so that --help answers at once.
    with GpuLock(), exit_on_bad_input():
        main_with_config(cfg, resume_from)


if __name__ == "__main__":
    main()
