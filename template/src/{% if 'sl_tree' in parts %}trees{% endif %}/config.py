"""The config level of the supervised tree parts (CFG-1): its fields and their checks."""

from __future__ import annotations

import re
from dataclasses import dataclass

from src.config import BaseConfig, at_least, split_problems
from src.runs.launch import current_launch


@dataclass
class SLTreeConfig(BaseConfig):
    """Supervised tree parts (XGBoost's native API).

    Attributes:
        num_boost_round: Upper bound on boosting rounds; set high so that early stopping ends
            training.
        early_stopping_rounds: Rounds without improvement of the validation metric before
            training stops.
        val_fraction: Share of the rows held out for validation (early stopping).
        test_fraction: Share of the rows held out for the final test.
        split_seed: Seed of the train/val/test split, apart from seed so that changing seed
            keeps the split.
        cluster: Train on a Dask cluster through xgboost.dask: local (or local:N) starts N
            worker processes here, tcp://host:8786 joins a running scheduler; empty trains in
            this process.
        wandb_every_n_rounds: W&B charts every this many rounds (a W&B call costs about a
            small round); every round still reaches metrics.jsonl and, at the end, W&B's
            `rounds` table.
    """

    # The tree reading of CFG-5: a high round cap; early stopping is the binding limit.
    num_boost_round: int = 10_000
    early_stopping_rounds: int = 50
    val_fraction: float = 0.15
    test_fraction: float = 0.15
    split_seed: int = 0
    cluster: str = ""
    wandb_every_n_rounds: int = 10

    def problems(self) -> list[str]:
        found = [
            *super().problems(),
            *at_least(self, num_boost_round=1, early_stopping_rounds=1, wandb_every_n_rounds=1),
        ]
        found += _cluster_problems(self.cluster)
        if (launch := current_launch()).world_size > 1:  # each would grow the same trees (DDP-1)
            found.append(
                f"{launch.launcher} started {launch.world_size} processes, but a tree part trains in one; "
                "start it with python -m"
            )
        return found + split_problems(self.val_fraction, self.test_fraction)


DASK_INSTALL = "pip install -c constraints.txt '.[distributed]'"


def _cluster_problems(cluster: str) -> list[str]:
    if not cluster:
        return []
    if not re.fullmatch(r"local(:[1-9][0-9]{0,3})?|[a-z]+://\S+|(?!local:)[^\s:/]+:[0-9]+", cluster):
        return [
            f"cluster {cluster!r}: use local, local:N (N worker processes, up to 9999) or a Dask "
            "scheduler's address such as tcp://host:8786"
        ]
    if not all(_installed(name) for name in ("distributed", "dask.dataframe", "pyarrow")):
        return [f"cluster {cluster!r}: training on a Dask cluster needs Dask; install it with {DASK_INSTALL}"]
    return []


def _installed(module: str) -> bool:
    from importlib.util import find_spec

    try:
        return find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package missing, or a module set to None
        return False
