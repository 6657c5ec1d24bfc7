"""Train this part: gradient-boosted trees with XGBoost.

Usage (`--help` lists every config field as a flag):
python -m part1.train --config smoke                   # the whole pipeline in seconds
python -m part1.train --config baseline                # a real run
python -m part1.train --config baseline --resume auto  # continue the newest baseline run
python -m part1.train --config baseline --cluster local:4  # on 4 Dask workers (the distributed extra)
"""

from __future__ import annotations

import json
from pathlib import Path

# This part's own modules; the template names its folder.
from part1.config import CONFIGS, DiabetesConfig
from src.cli import exit_on_bad_input, parse_cli
from src.ops.gpu_lock import GpuLock
from src.ops.hardware import gpu_name
from src.runs.atomic import write_text_atomic
from src.runs.loggers import file_loggers


def main_with_config(cfg: DiabetesConfig, resume_from: Path | None = None) -> dict[str, float]:
    """Train, test, save and plot one config; returns the summary of metrics.json: test
    metrics and the best validation score (SWP-2: sweeps call this, and select on
    validation, never on test)."""
    # Here, not at the top: XGBoost, pandas and matplotlib take seconds to load, and
    # --help or a mistyped flag answers before (main() parses the command line first).
    from part1.data import load_split
    from part1.model import (
        best_rounds,
        evaluate,
        load_model,
        predict,
        save_model,
        train_booster,
        training_matrices,
    )
    from src.runs.lifetime import mark_training_ended, start_run, training_ended
    from src.trees.cluster import dask_client
    from src.trees.plots import feature_importance, predicted_vs_actual, shap_summary
    from src.trees.rounds import (
        RoundLoggers,
        log_start_of_run,
        replay_rounds,
        round_callbacks,
        train_seconds_so_far,
    )
    from src.wandb_utils import finish_run, log_model_artifact, setup_run

    with start_run(cfg, resume_from) as run:
        split = load_split(cfg)  # validated (DATA-1) and split
        # LOG-1: W&B directly, TensorBoard and CSV through Lightning's loggers, as --loggers chose.
        loggers = RoundLoggers(setup_run(cfg, run.dir), file_loggers(cfg, run.dir), cfg.wandb_every_n_rounds)
        log_start_of_run(
            run.dir / "metrics.jsonl",
            loggers,
            {
                "num_train_samples": len(split.train_labels),
                "num_val_samples": len(split.val_labels),
                "num_features": len(cfg.feature_columns),
                "gpu_name": gpu_name(),
            },
        )
        callbacks = round_callbacks(
            cfg, run.dir, loggers, cfg.eval_metric, cfg.checkpoint_minutes, cfg.keep_last_n
        )
        # Every tree grown; checkpoints/last.ubj keeps them all for --resume. A run whose
        # training ended in an earlier session grows none: test and save remain (RES-1).
        grow = not training_ended(run.dir)
        previous = load_model(run.resume_from) if run.resume_from else None
        # None without --cluster (trains in this process), and when nothing is left to grow.
        with dask_client(cfg.cluster if grow else "") as client:
            train, val = training_matrices(split, client)
            booster = train_booster(cfg, train, val, callbacks, previous, grow=grow, client=client)
        if client is not None:  # the workers wrote the rounds to metrics.jsonl, out of the loggers' reach
            first_round = previous.num_boosted_rounds() if previous else 0
            replay_rounds(run.dir / "metrics.jsonl", loggers, first_round)
        mark_training_ended(run.dir)
        model = best_rounds(booster)  # CB-1: the trees up to the best validation round

        predicted = predict(model, split.test_features)
        test_metrics = evaluate(predicted, split.test_labels)
        model_path = save_model(model, run.dir / "model.ubj")
        trees = model.trees_to_dataframe()
        summary = {  # metrics.json (OUT-5)
            **test_metrics,
            "best_round": model.num_boosted_rounds() - 1,
            f"best_val_{cfg.eval_metric}": float(booster.attr("best_score") or "nan"),
            "rounds_trained": booster.num_boosted_rounds(),
            # LOG-5: a tree model's parameters are its leaves, known once it is trained.
            "total_params": int((trees["Feature"] == "Leaf").sum()),
            "train_seconds": train_seconds_so_far(booster),  # a resumed run's sessions included
        }
        write_text_atomic(run.dir / "metrics.json", json.dumps(summary, indent=2) + "\n")
        plots = run.dir / "plots"
        feature_importance(model, plots / "feature_importance.png")
        actual = split.test_labels.to_numpy()
        predicted_vs_actual(predicted, actual, plots / "predicted_vs_actual.png")
        shap_summary(model, split.test_features, plots / "shap_summary.png")
        loggers.finish(summary, booster.num_boosted_rounds() - 1, run.dir / "metrics.jsonl")
        log_model_artifact(model_path, f"{cfg.name}-model", metadata=summary)  # once, at the end (LOG-6)
        print(" | ".join(f"{key} {value:.4g}" for key, value in summary.items()))
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
