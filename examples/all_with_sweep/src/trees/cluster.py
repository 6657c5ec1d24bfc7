"""Training on a Dask cluster through xgboost.dask, for tables that outgrow one
process: a LocalCluster of worker processes on this machine, or a running Dask
scheduler (`dask scheduler` and `dask worker` on your machines, or your cluster's
Dask deployment). XGBoost shares out the boosting among the workers; the round
callbacks run on every worker (see rounds.py), so the run directory must be on a
filesystem the worker of rank 0 sees.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import pandas as pd

from src.config import ConfigError, first_line

if TYPE_CHECKING:  # Dask is an optional extra: imported only when a cluster is asked for
    from dask.distributed import Client


@contextmanager
def dask_client(cluster: str) -> Iterator[Client | None]:
    """A client of the cluster `cluster` names (see SLTreeConfig.cluster), closed on the
    way out with the workers a LocalCluster started; None for an empty `cluster`."""
    if not cluster:
        yield None
        return
    from dask.distributed import Client, LocalCluster

    if cluster.startswith("local"):
        workers = int(cluster.partition(":")[2] or 0) or None  # None: Dask's choice for the cores here
        threads = max(1, (os.cpu_count() or 1) // workers) if workers else None
        # No dashboard and random ports: other users' clusters may share the machine.
        with (
            LocalCluster(
                n_workers=workers,
                threads_per_worker=threads,
                dashboard_address=None,
                silence_logs=logging.ERROR,
            ) as local,
            Client(local) as client,
        ):
            print(f"Dask: {len(local.workers)} local worker processes")
            yield client
        return
    try:
        client = Client(cluster, timeout="30s")
    except OSError as error:  # distributed's connection timeout is an OSError too
        message = f"cluster {cluster}: cannot reach a Dask scheduler there: {first_line(error)}"
        raise ConfigError(message) from None
    with client:
        print(f"Dask: scheduler {cluster}, {len(client.scheduler_info()['workers'])} workers")
        yield client


def partitioned(client: Client, *frames: pd.DataFrame | pd.Series) -> list:
    """The pandas frames, which share one index, as Dask collections of one partition per
    worker, each worker holding its own share of rows of every frame, for xgboost.dask's
    DMatrix types.

    XGBoost trains each worker on the partitions that worker holds. Left to the scheduler,
    the partitions of a small table often all land on one worker, and the others train on
    nothing ("has an empty DMatrix"). Scattered to a named worker, a share stays there; the
    same rows of every frame on the same worker keep features and labels together."""
    import dask.dataframe as dd
    import numpy as np

    workers = sorted(client.nthreads())
    # Fewer rows than workers: a worker without rows gets no partition, not an empty one.
    shares = [rows for rows in np.array_split(np.arange(len(frames[0])), len(workers)) if len(rows)]
    collections = []
    for frame in frames:
        # Unhashed: equal shares scattered again would share a key, and releasing the first
        # would lose the data of the second.
        held = [
            client.scatter(frame.iloc[rows], workers=[worker], hash=False)
            for worker, rows in zip(workers, shares, strict=False)
        ]
        collections.append(dd.from_delayed(held, meta=frame.iloc[:0]))
    return collections
