"""Training, testing and predicting with a part's booster: XGBoost's native API (`xgb.train`
on a QuantileDMatrix), or xgboost.dask on a Dask cluster (--cluster): a LocalCluster of
worker processes here, or a running scheduler. The round callbacks run on every worker
(rounds.py), so the run directory must be on a filesystem the worker of rank 0 sees."""

from __future__ import annotations

import json
import logging
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pandas as pd
import xgboost as xgb
from scipy.special import expit, softmax

from src.config import ConfigError, first_line
from src.data_checks import part_function
from src.errors import DataValidationError
from src.ops.hardware import first_visible_gpu, visible_gpus
from src.predict import PredictOptions, rows_to_predict, say_unseen_values, score_predictions
from src.predictions import (
    PREDICTIONS_FILE,
    class_values,
    classification_table,
    regression_table,
    task_metrics,
    write_predictions,
)
from src.runs.atomic import write_text_atomic
from src.runs.checkpoint_checks import checkpoint_problem
from src.runs.directory import another_parts_run
from src.runs.lifetime import training_stopped
from src.trees.config import (
    CUDA_XGBOOST_INSTALL,
    XGBOOST_DOCS,
    SLTreeConfig,
    is_local_cluster,
    shares_gpus,
    unused_parameters,
    xgboost_says,
)
from src.trees.data import ENCODING_ATTRIBUTE, Split, TableEncoding
from src.trees.plots import feature_importance, shap_summary
from src.trees.rounds import RoundMetrics, stop_reason, train_seconds_so_far


def training_params(
    cfg: SLTreeConfig, params: dict[str, Any], encoding: TableEncoding, client: Any = None
) -> dict[str, Any]:
    """The part's model.booster_params(cfg) with what the pipeline sets: the config's objective
    and metric, a multi:* objective's classes, the hist tree method QuantileDMatrix needs,
    the device, threads and seed. `client`: the Dask client of a running scheduler's cluster,
    whose workers say which GPUs they have."""
    if client is not None and not is_local_cluster(cfg.cluster):
        device = cluster_device(cfg.device, list(client.run(_first_cuda_gpu).values()))
    else:
        device = local_device(cfg)
    num_class = len(encoding.classes or ())
    check_booster_params(cfg, params, num_class, device)
    return params | pipeline_params(cfg, device, num_class)


def pipeline_params(cfg: SLTreeConfig, device: str, num_class: int) -> dict[str, Any]:
    """What the pipeline sets of XGBoost's parameters, which model.booster_params(cfg) may not."""
    ours = {"objective": cfg.objective, "eval_metric": cfg.watched_metric, "tree_method": "hist"}
    ours |= {"device": device, "nthread": cfg.num_threads, "seed": cfg.seed}
    return ours | ({"num_class": num_class} if cfg.task == "multiclass" else {})


def check_booster_params(
    cfg: SLTreeConfig, params: dict[str, Any], num_class: int = 2, device: str | None = None
) -> None:
    """CFG-3: a ConfigError where model.booster_params(cfg) sets what the pipeline sets, gives
    a name XGBoost does not use (a misspelt one trains as if unset) or a value it refuses.
    Before the run directory is made (the classes unknown yet: two; the device, where training
    runs on this machine, checked too), and again in training, given the device it settled."""
    if device is None and (not cfg.cluster or is_local_cluster(cfg.cluster)):
        local_device(cfg)  # device cuda without a GPU or XGBoost's CUDA build
    ours = pipeline_params(cfg, "cpu", num_class)  # checked where any XGBoost runs
    if both := sorted(ours.keys() & params.keys()):
        raise ConfigError(f"model.booster_params(cfg) sets {', '.join(both)}, which the pipeline sets")
    try:
        unused = unused_parameters(params | ours)
    except ValueError as error:  # XGBoostError: a value it refuses, the config's own said first
        cfg.validate()
        raise ConfigError(f"model.booster_params(cfg): {xgboost_says(error)}") from None
    if unused:
        raise ConfigError(
            f"model.booster_params(cfg) gives {', '.join(unused)}, which XGBoost does not use with "
            f"objective {cfg.objective}: a misspelt name? Its parameters: {XGBOOST_DOCS.partition('#')[0]}"
        )


def local_device(cfg: SLTreeConfig) -> str:
    """cfg.device for training here, or on a local cluster's workers: auto is cuda where a GPU
    and XGBoost's CUDA build are, and no local cluster of several workers would share it
    (XGBoost refuses two processes on one GPU)."""
    gpus = visible_gpus()
    if cfg.device == "cuda" and not gpus:
        raise ConfigError("device cuda: no CUDA GPU is visible here; use auto or cpu")
    cuda_build = xgb.build_info()["USE_CUDA"]  # False for xgboost-cpu, the cpu extra
    if cfg.device == "cuda" and not cuda_build:
        raise ConfigError(f"device cuda: this XGBoost is its CPU-only build; {CUDA_XGBOOST_INSTALL}")
    use_gpu = gpus and cuda_build and not shares_gpus(cfg.cluster)
    return ("cuda" if use_gpu else "cpu") if cfg.device == "auto" else cfg.device


def cluster_device(device: str, first_gpus: list[str | None]) -> str:
    """`device` for a running scheduler's workers, given the GPU each would train on (its first,
    by UUID; None without a GPU or XGBoost's CUDA build): cuda needs one of its own for each."""
    without = first_gpus.count(None)
    sharing = sum(first_gpus.count(gpu) > 1 for gpu in first_gpus if gpu is not None)
    own_gpus = bool(first_gpus) and without == sharing == 0
    if device == "cuda" and not own_gpus:
        raise ConfigError(
            f"device cuda: XGBoost needs a GPU of its own on each Dask worker; of the {len(first_gpus)} "
            f"workers, {without} without one (or with XGBoost's CPU-only build), {sharing} sharing one; "
            "use auto or cpu, or start one worker per GPU (dask-cuda)"
        )
    return ("cuda" if own_gpus else "cpu") if device == "auto" else device


def _first_cuda_gpu() -> str | None:
    """On a Dask worker: the GPU XGBoost's cuda would train on there, if it can."""
    return first_visible_gpu() if xgb.build_info()["USE_CUDA"] else None


def training_matrices(
    split: Split, client: Any = None, max_bin: int | None = None
) -> tuple[xgb.QuantileDMatrix, xgb.QuantileDMatrix]:
    """Train and validation data, quantized once for the hist tree method into `max_bin` bins
    (the booster's, which XGBoost requires to match; None: its default); validation reuses the training set's
    bins. With a Dask `client`, spread over its workers."""
    train_features, types = split.encoding.as_codes(split.train_features)
    val_features, _ = split.encoding.as_codes(split.val_features)
    columns = {"feature_types": types, "enable_categorical": True, "max_bin": max_bin}
    if client is not None:
        import dask
        from xgboost import dask as dxgb  # the distributed extra

        workers = sorted(client.nthreads())
        train_data = partitioned(client, workers, train_features, split.train_labels)
        val_data = partitioned(client, workers, val_features, split.val_labels)
        # Restricted to the workers there are, each task runs where its rows are. Unrestricted,
        # Dask takes from_delayed's tasks for loading new data and hands them to whichever
        # worker is free first, which then holds the shares of the busy ones. The client puts
        # the restriction on every task it sends, which dask.dataframe's warning that it
        # ignores annotations does not know.
        with warnings.catch_warnings(), dask.annotate(workers=workers, allow_other_workers=True):
            warnings.filterwarnings("ignore", message="Dask annotations .* detected")
            train = dxgb.DaskQuantileDMatrix(client, *train_data, **columns)
            val = dxgb.DaskQuantileDMatrix(client, *val_data, ref=train, **columns)
        return train, val
    train = xgb.QuantileDMatrix(train_features, split.train_labels, **columns)
    val = xgb.QuantileDMatrix(val_features, split.val_labels, ref=train, **columns)
    return train, val


def train_booster(
    cfg: SLTreeConfig,
    params: dict[str, Any],
    split: Split,
    callbacks: Sequence[xgb.callback.TrainingCallback] = (),
    previous: xgb.Booster | None = None,
) -> xgb.Booster:
    """Boost up to cfg.num_boost_round trees in all, continuing the `previous` model if given;
    on the Dask cluster cfg.cluster names, if any."""
    first_round = previous.num_boosted_rounds() if previous else 0
    if first_round > cfg.num_boost_round:  # a resume's flag below what the run has grown
        raise ConfigError(
            f"num_boost_round {cfg.num_boost_round}: the run has grown {first_round} rounds already; "
            "give more to grow more, or leave the flag out to keep the run's own"
        )
    with dask_client(cfg.cluster) as client:
        params = training_params(cfg, params, split.encoding, client)
        train, val = training_matrices(split, client, params.get("max_bin"))
        options = {
            "num_boost_round": max(cfg.num_boost_round - first_round, 0),
            "evals": [(train, "train"), (val, "val")],
            # First: every checkpoint holds the encoding, which predicting needs.
            "callbacks": [KeepEncoding(split.encoding), *callbacks],
            "xgb_model": previous,
            "verbose_eval": False,
        }
        if client is None:
            booster = xgb.train(params, train, **options)
        else:
            from concurrent.futures import CancelledError

            from distributed import KilledWorker
            from distributed.comm import CommClosedError
            from xgboost import dask as dxgb

            try:
                booster = dxgb.train(client, params, train, **options)["booster"]
            # Dask's words for a worker that died or was cut off name only a task it cancelled.
            except (CancelledError, KilledWorker, CommClosedError) as error:
                raise DaskWorkerLost(
                    f"a Dask worker was lost while training (Dask's {type(error).__name__}); the run's "
                    "checkpoints are kept: continue it with --resume once the cluster is whole"
                ) from error
            for metrics in (c for c in callbacks if isinstance(c, RoundMetrics)):
                metrics.replay(first_round)  # the rounds the workers wrote, which the loggers here missed
    if (stopped := stop_reason(booster)) is not None:  # early stopping, a STOP file or the budget
        print(stopped[1])
    else:
        stopped = ("budget", f"num_boost_round {cfg.num_boost_round} grown")
    training_stopped(*stopped)
    return booster


class DaskWorkerLost(RuntimeError):
    """A worker of the run's Dask cluster died or lost its connection during training."""


class KeepEncoding(xgb.callback.TrainingCallback):
    """Keeps the table's encoding in the model, which XGBoost saves with it: a model file is
    all predicting needs."""

    def __init__(self, encoding: TableEncoding) -> None:
        self.encoding = encoding

    def before_training(self, model: xgb.Booster) -> xgb.Booster:
        model.set_attr(**{ENCODING_ATTRIBUTE: self.encoding.to_json()})
        return model


def best_rounds(booster: xgb.Booster) -> xgb.Booster:
    """The trees up to the best validation round early stopping recorded (all if none)."""
    best = booster.attr("best_iteration")
    return booster[: int(best) + 1] if best is not None else booster


def summary_and_plots(cfg: SLTreeConfig, booster: xgb.Booster, split: Split, run_dir: Path) -> dict:
    """OUT-5: the best rounds' test predictions (PREDICTIONS_FILE), their metrics with how
    `booster` was trained in metrics.json (returned too), and plots/."""
    model, encoding = best_rounds(booster), split.encoding
    # On the CPU, as predict_run predicts: a GPU's sums can differ in the last float32 digit,
    # and the file should be what `predict --rows test` writes on any machine.
    model.set_param({"device": "cpu"})
    truth = encoding.label_values(split.test_labels)
    table = predictions_table(model, encoding, split.test_features, truth)
    write_predictions(table, run_dir / PREDICTIONS_FILE)
    summary = {f"test_{name}": value for name, value in task_metrics(table).items()}
    summary |= {
        "best_round": model.num_boosted_rounds() - 1,
        f"best_val_{cfg.watched_metric}": float(booster.attr("best_score") or "nan"),
        "rounds_trained": booster.num_boosted_rounds(),
        # LOG-5: a tree model's parameters are its leaves, known once it is trained.
        "total_params": int((model.trees_to_dataframe()["Feature"] == "Leaf").sum()),
        "train_seconds": train_seconds_so_far(booster),  # a resumed run's sessions included
    }
    write_text_atomic(run_dir / "metrics.json", json.dumps(summary, indent=2) + "\n")
    plots = run_dir / "plots"
    feature_importance(model, plots / "feature_importance.png")
    shap_summary(model, split.test_features, plots / "shap_summary.png", classes=encoding.classes)
    return summary


def predictions_table(
    model: xgb.Booster, encoding: TableEncoding, features: pd.DataFrame, truth: np.ndarray | None
) -> pd.DataFrame:
    """The model's predictions of `features` (TableEncoding.features) as src/predictions.py's
    table, with the true labels where known. A classifier's probabilities are the softmax or
    sigmoid of the margins, which is what multi:softprob and binary:logistic predict, and gives
    multi:softmax and binary:logitraw probabilities too; binary:hinge's class as a certainty."""
    rows = features.index.to_numpy()
    if encoding.classes is None:
        return regression_table(rows, model.inplace_predict(features), [encoding.label_column], truth)
    objective = json.loads(model.save_config())["learner"]["objective"]["name"]
    # In float64: float32 probabilities do not sum to 1 as closely as metrics ask.
    margins = model.inplace_predict(features, predict_type="margin").astype(np.float64)
    if objective.startswith("multi:"):  # a margin per class, also of a table of no rows
        probabilities = softmax(margins.reshape(len(rows), len(encoding.classes)), axis=1)
    else:
        positive = (margins > 0).astype(float) if objective == "binary:hinge" else expit(margins)
        probabilities = np.column_stack([1 - positive, positive])
    return classification_table(rows, probabilities, encoding.classes, encoding.label_column, truth)


def predict_run(
    options: PredictOptions,
    config_cls: type[SLTreeConfig],
    source: ModuleType,
    load_model: Callable[[Path], xgb.Booster],
) -> dict[str, float]:
    """`python -m partN.predict`: a run's model.ubj on the table `options` name, read as training
    read its own by the model's TableEncoding, written; the metrics of the rows with a known
    label, printed and returned. `source` is the part's data module, `load_model` its model's."""
    config_path, model_path = options.run_dir / "config.json", options.run_dir / "model.ubj"
    if not config_path.is_file():
        raise DataValidationError(
            f"{options.run_dir}: has no config.json; give the directory of a finished run"
        )
    if other := another_parts_run(options.run_dir, source.__name__.partition(".")[0], "predict"):
        raise DataValidationError(other)
    if problem := checkpoint_problem(model_path):  # in a process of its own: XGBoost can crash on a cut file
        raise DataValidationError(
            f"{model_path} is {problem}: a run saves it as it ends; give a finished run"
        )
    try:
        cfg = config_cls.from_json(config_path.read_text())
    except (ValueError, TypeError) as error:
        raise DataValidationError(
            f"{config_path}: not a {config_cls.__name__}: {first_line(error)}"
        ) from None
    model = load_model(model_path)
    model.set_param({"device": "cpu", "nthread": cfg.num_threads})  # a model a GPU trained, too
    encoding = TableEncoding.of(model, str(model_path))
    table, where = rows_to_predict(
        options,
        list(encoding.feature_columns),
        lambda: part_function(source, "load_table", cfg, pd.DataFrame),
        cfg.data_path or f"{source.__name__}.load_table(cfg)",
    )
    features = encoding.features(table, where)
    for name in encoding.categories:
        say_unseen_values(name, table[name][features[name].isna() & table[name].notna()], "missing")
    label, truth = encoding.label_column, None
    if label in table.columns:
        known = table[label].dropna()
        values = pd.to_numeric(known, errors="coerce") if encoding.classes is None else class_values(known)
        truth = values.astype(object).reindex(table.index).to_numpy()
    predictions = predictions_table(model, encoding, features, truth)
    write_predictions(predictions, options.output)
    print(f"predictions of {len(predictions)} rows: {options.output}")
    return score_predictions(predictions, [label], encoding.classes)


@contextmanager
def dask_client(cluster: str) -> Iterator[Any]:
    """A client of the cluster `cluster` names (SLTreeConfig.cluster), closed on the way out
    with a LocalCluster's workers; None for an empty `cluster`."""
    if not cluster:
        yield None
        return
    import dask
    from dask.distributed import Client, LocalCluster

    if is_local_cluster(cluster):
        # None: Dask's choice for the cores here, which shares them out among the workers too.
        workers = int(cluster.partition(":")[2] or 0) or None
        # Random ports, the dashboard's too (None still serves it on 8787): other users'
        # clusters may share the machine. No work stealing: it hands a busy worker's rows to
        # an idle one, which then trains on both shares while the busy one sits out (XGBoost
        # trains each worker on what it holds).
        with (
            dask.config.set({"distributed.scheduler.work-stealing": False}),
            LocalCluster(n_workers=workers, dashboard_address=":0", silence_logs=logging.ERROR) as local,
            Client(local) as client,
        ):
            # XGBoost trains on every worker the scheduler knows: one that registers after the
            # rows are shared out would train on none of them ("has an empty DMatrix").
            client.wait_for_workers(len(local.workers))
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


def partitioned(client: Any, workers: list[str], *frames: pd.DataFrame | pd.Series) -> list:
    """The frames, which share one index, as Dask collections of one partition for each of `workers`,
    the same rows of every frame on the same worker. XGBoost trains each worker on the
    partitions it holds; left to the scheduler, a small table's often all land on one, and
    the others train on nothing ("has an empty DMatrix")."""
    import dask.dataframe as dd

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
