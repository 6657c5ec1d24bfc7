"""Train this part: gradient-boosted trees with XGBoost.

Usage (`--help` lists every config field as a flag):
python -m part1.train --config smoke                   # the whole pipeline in seconds
python -m part1.train --config baseline                # a real run
python -m part1.train --config baseline --resume auto  # continue the newest baseline run
python -m part1.train --config baseline --cluster local:4  # on 4 Dask workers (the distributed extra)
python -m part1.train --data-path my.csv --label-column kind --objective multi:softprob  # classify your table
"""

from __future__ import annotations

from pathlib import Path

# This part's own modules; the template names its folder.
from part1.config import CONFIGS, DiabetesConfig
from src.cli import exit_on_bad_input, parse_cli
from src.ops.gpu_lock import GpuLock


def main_with_config(cfg: DiabetesConfig, resume_from: Path | None = None) -> dict[str, float]:
    """Train, test, save and plot one config; returns metrics.json's summary (SWP-2: sweeps
    call this, and select on its best validation score, never on test)."""
    # Here, not at the top: XGBoost, pandas and matplotlib take seconds to load, and --help
    # or a mistyped flag answers before.
    from part1 import data
    from part1.model import booster_params, load_model, save_model
    from src.ops.hardware import gpu_name
    from src.runs.console import metric_text
    from src.runs.lifetime import mark_training_ended, start_run, training_ended
    from src.runs.loggers import file_loggers
    from src.trees.booster import best_rounds, check_booster_params, summary_and_plots, train_booster
    from src.trees.data import load_split
    from src.trees.rounds import RoundLoggers, round_callbacks
    from src.wandb_utils import finish_run, log_model_artifact, setup_run

    check_booster_params(cfg, booster_params(cfg))  # CFG-3: a misspelt name, before the run directory
    with start_run(cfg, resume_from) as run:
        split = load_split(cfg, data)  # the rows that data.py loads, checked (DATA-1) and split
        # LOG-1: W&B directly, TensorBoard and CSV through Lightning's loggers, as --loggers chose.
        loggers = RoundLoggers(setup_run(cfg, run.dir), file_loggers(cfg, run.dir), cfg.wandb_every_seconds)
        facts = {"num_train_samples": len(split.train_labels), "num_val_samples": len(split.val_labels)}
        facts |= {"num_features": len(split.encoding.feature_columns), "gpu_name": gpu_name()}
        loggers.log_start(run.dir / "metrics.jsonl", facts)  # LOG-5
        booster = load_model(run.resume_from) if run.resume_from else None
        # Every tree grown; checkpoints/last.ubj keeps them all for --resume. A run whose
        # training ended in an earlier session grows none: test and save remain (RES-1).
        if not training_ended(run.dir):
            callbacks = round_callbacks(cfg, run.dir, loggers)
            booster = train_booster(cfg, booster_params(cfg), split, callbacks, previous=booster)
        mark_training_ended(run.dir)
        model_path = save_model(best_rounds(booster), run.dir / "model.ubj")  # CB-1: up to the best round
        summary = summary_and_plots(cfg, booster, split, run.dir)  # metrics.json and plots/ (OUT-5)
        loggers.finish(summary, booster.num_boosted_rounds() - 1, run.dir / "metrics.jsonl")
        log_model_artifact(model_path, f"{cfg.name}-model", metadata=summary)  # once, at the end (LOG-6)
        print(" | ".join(f"{key} {metric_text(value)}" for key, value in summary.items()))
        finish_run()  # wandb.finish(), except in a sweep agent's run
    return summary


def main() -> None:
    cfg, resume_from = parse_cli(CONFIGS, prog="python -m part1.train", description=__doc__)
    # OPS-1: queue behind other GPU jobs instead of failing. Taken after parsing, so
    # --help and a mistyped flag answer at once even while another job holds the GPU.
    with GpuLock(), exit_on_bad_input():
        main_with_config(cfg, resume_from)


if __name__ == "__main__":
    main()
