"""XGBoost callbacks between boosting rounds. The best round, its score and the training
time so far travel in the saved model as booster attributes, so a resumed run goes on where
the saved one stopped. On a Dask cluster every worker runs them: rank 0 writes the files, and
its stop decisions are broadcast, so every worker stops after the same round."""

from __future__ import annotations

import json
import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import xgboost as xgb
from xgboost import collective

from src.ops.alerts import Alerts
from src.ops.hardware import collect_system_metrics, gpu_readings
from src.runs.atomic import atomic_path
from src.runs.directory import stop_file_paths, stop_requested
from src.runs.lifetime import wall_clock_spent
from src.runs.metrics_jsonl import append_jsonl, drop_metrics_from_step, higher_is_better, read_jsonl
from src.trees.config import SLTreeConfig

if TYPE_CHECKING:  # only when --loggers asks for them does Lightning load (src.runs.loggers)
    from lightning.pytorch.loggers import Logger

TRAIN_SECONDS = "train_seconds"  # booster attribute: training time of every session so far
STOP_REASON = "stop_reason"  # booster attribute: why the last training call stopped early
STOP_KIND = "stop_kind"  # booster attribute: that reason as one of src.runs.lifetime.END_REASONS


def best_round_so_far(model: xgb.Booster) -> tuple[float | None, int]:
    """The best validation score and its round recorded in a (resumed) model."""
    score = model.attr("best_score")
    return (float(score) if score is not None else None), int(model.attr("best_iteration") or -1)


def train_seconds_so_far(model: xgb.Booster) -> float:
    return float(model.attr(TRAIN_SECONDS) or 0.0)


def writes_files() -> bool:
    return collective.get_rank() == 0  # the only process, or the Dask worker of rank 0


def stop_reason(model: xgb.Booster) -> tuple[str, str] | None:
    """Why the training call that made `model` stopped before its last round, as one of
    END_REASONS and a line; from the model, since on a Dask cluster the workers decided."""
    said = model.attr(STOP_REASON)
    return None if said is None else (model.attr(STOP_KIND) or "budget", said)


def _record_stop(model: xgb.Booster, kind: str, said: str) -> None:
    said += f": stopping after round {model.num_boosted_rounds() - 1}"
    model.set_attr(**{STOP_KIND: kind, STOP_REASON: said})


def save_booster(model: xgb.Booster, path: Path) -> Path:
    """XGBoost's own format, written atomically by Python: a full disk is an OSError."""
    with atomic_path(path) as temporary:
        temporary.write_bytes(model.save_raw(raw_format="ubj"))
    return path


class BestRound:
    """The best validation score of `metric` and its round, taken back from the model when
    training continues a saved one (xgb.train then numbers its rounds from 0 again)."""

    def __init__(self, metric: str) -> None:
        self.metric, self.maximize = metric, higher_is_better(metric)
        self.first_round, self.score, self.round = 0, None, -1

    def start(self, model: xgb.Booster) -> None:
        self.first_round = model.num_boosted_rounds()
        self.score, self.round = best_round_so_far(model)

    def update(self, epoch: int, evals_log: dict) -> tuple[int, float, bool]:
        """This round's number and validation score, and whether it is the best so far."""
        round_number = self.first_round + epoch
        score = float(evals_log["val"][self.metric][-1])
        return round_number, score, self.offer(round_number, score)

    def offer(self, round_number: int, score: float) -> bool:
        """Keep `score` as the best if it is; whether it was."""
        improved = self.score is None or (score > self.score if self.maximize else score < self.score)
        if improved:
            self.score, self.round = score, round_number
        return improved


class EarlyStoppingRounds(xgb.callback.TrainingCallback):
    """CB-1: stops after `rounds` rounds without improvement of validation `metric`, keeping
    the best round in XGBoost's `best_iteration` and `best_score` attributes. Unlike
    xgb.callback.EarlyStopping, which counts afresh when training continues a saved model,
    it takes the best round back from the model: a resumed run stops where one run would."""

    def __init__(self, rounds: int, metric: str) -> None:
        self.rounds, self.best = rounds, BestRound(metric)
        self._saved_stop: str | None = None

    def before_training(self, model: xgb.Booster) -> xgb.Booster:
        self.best.start(model)
        # Read before StopRounds, later in round_callbacks' order, clears the saved model's reason.
        self._saved_stop = model.attr(STOP_REASON) if model.attr(STOP_KIND) == "patience" else None
        return model

    def before_iteration(self, model: xgb.Booster, epoch: int, evals_log: dict) -> bool:
        """A model whose patience had run out grows no more: a run killed after its last round,
        before it recorded that training ended, resumes to the trees one run grows."""
        best = self.best
        if epoch or best.round < 0 or best.first_round - 1 - best.round < self.rounds:
            return False
        if self._saved_stop is not None:  # what the session that stopped it said
            model.set_attr(**{STOP_KIND: "patience", STOP_REASON: self._saved_stop})
        else:
            said = f"val_{best.metric} no better than {best.score:.6g} for {self.rounds} rounds"
            _record_stop(model, "patience", said)
        return True

    def after_iteration(self, model: xgb.Booster, epoch: int, evals_log: dict) -> bool:
        round_number, score, improved = self.best.update(epoch, evals_log)
        if improved:
            model.set_attr(best_score=str(score), best_iteration=str(round_number))
        if round_number - self.best.round < self.rounds:
            return False
        best = self.best
        said = f"val_{best.metric} {score:.6g}, no better than {best.score:.6g} for {self.rounds} rounds"
        # The scores since the best, where this training call has them all (not a resumed
        # model's earlier rounds): all ties, as xgb.callback.EarlyStopping counts no improvement.
        since_best = evals_log["val"][best.metric][best.round + 1 - best.first_round :]
        if best.round + 1 >= best.first_round and all(float(s) == best.score for s in since_best):
            said += (
                f" (every round since tied it: val_{best.metric} is flat, not worse, as auc can be while "
                "the trees still change the predictions; give more --early-stopping-rounds or another "
                "--eval-metric)"
            )
        _record_stop(model, "patience", said)
        return True


class StopRounds(xgb.callback.TrainingCallback):
    """CB-4, CFG-4: ends training after the round in which a STOP file appears or the run's
    wall-clock budget, earlier sessions' included, is spent. Rounds can take microseconds:
    both are looked at once a second at most."""

    def __init__(self, stop_files: Sequence[Path], hours: float) -> None:
        self.paths, self.seconds = list(stop_files), hours * 3600
        self.started = self._next_check = 0.0

    def before_training(self, model: xgb.Booster) -> xgb.Booster:
        model.set_attr(**{STOP_REASON: None, STOP_KIND: None})  # a resumed model's are an earlier session's
        self.started = time.monotonic() - train_seconds_so_far(model)
        return model

    def after_iteration(self, model: xgb.Booster, epoch: int, evals_log: dict) -> bool:
        stop = None
        if writes_files() and (now := time.monotonic()) >= self._next_check:
            self._next_check = now + 1.0
            if (stopper := stop_requested(self.paths)) is not None:
                stop = ("stop_file", f"STOP file {stopper}")
            elif now - self.started >= self.seconds:
                stop = wall_clock_spent(self.seconds / 3600, f"round {epoch}")
        # Rank 0's decision on every worker: one that stopped a round later than the others would
        # wait for them forever. Wrapped: None is a decision too.
        if collective.get_world_size() > 1:
            stop = collective.broadcast([stop], root=0)[0]
        if stop is None:
            return False
        _record_stop(model, *stop)
        return True


class AlertRounds(xgb.callback.TrainingCallback):
    """src.ops.alerts while trees grow: each round's validation score with its rounds since
    the best, counted as EarlyStoppingRounds counts them (not read back from the model: three
    calls into XGBoost a round cost as much as a small table's round takes); on a GPU, a
    reading of it every minute."""

    def __init__(self, alerts: Alerts, metric: str) -> None:
        self.alerts, self.best = alerts, BestRound(metric)
        self.on_gpu, self._next_reading = False, 0.0

    def before_training(self, model: xgb.Booster) -> xgb.Booster:
        # Where this process trains, as its parameters settled it: a GPU in sight may be idle.
        device = json.loads(model.save_config())["learner"]["generic_param"]["device"]
        self.on_gpu = device.startswith(("cuda", "gpu"))
        self.best.start(model)
        return model

    def after_iteration(self, model: xgb.Booster, epoch: int, evals_log: dict) -> bool:
        if not writes_files():
            return False
        round_number, score, _ = self.best.update(epoch, evals_log)
        since_best = round_number - self.best.round
        self.alerts.evaluated(f"val_{self.best.metric}", score, since_best, f"round {round_number}")
        if self.on_gpu and (now := time.monotonic()) >= self._next_reading:
            self._next_reading = now + 60.0
            self.alerts.gpu_read(gpu_readings())
        return False


class LatestModel(xgb.callback.TrainingCallback):
    """RES-1: checkpoints/last.ubj, every tree with the early-stopping state and the training
    time so far, rewritten every `every_minutes` and when training ends. `before_save` runs
    first (it writes the buffered metrics), so a resumed run's metrics.jsonl neither misses
    nor repeats a round. Each save also leaves round=R.ubj, the newest `keep_last_n` kept."""

    def __init__(self, path: Path, every_minutes: float, keep_last_n: int, before_save: Callable[[], None]):
        self.path, self.interval, self.keep_last_n = path, every_minutes * 60, keep_last_n
        self.before_save = before_save
        self._started = self._next_save = 0.0

    def before_training(self, model: xgb.Booster) -> xgb.Booster:
        self._started = time.monotonic() - train_seconds_so_far(model)
        self._next_save = time.monotonic() + self.interval
        return model

    def after_iteration(self, model: xgb.Booster, epoch: int, evals_log: dict) -> bool:
        if time.monotonic() >= self._next_save:
            self.save(model)
            self._next_save = time.monotonic() + self.interval
        return False

    def after_training(self, model: xgb.Booster) -> xgb.Booster:
        self.save(model)
        return model

    def save(self, model: xgb.Booster) -> None:
        self.before_save()
        model.set_attr(**{TRAIN_SECONDS: f"{time.monotonic() - self._started:.3f}"})
        if not writes_files():
            return
        save_booster(model, self.path)
        if self.keep_last_n:
            # Removed only after the new one is written in full (save_booster is atomic), and
            # by the round in their names, so a resumed run goes on removing the right ones.
            save_booster(model, self.path.with_name(f"round={model.num_boosted_rounds() - 1}.ubj"))
            kept = sorted(self.path.parent.glob("round=*.ubj"), key=lambda p: int(p.stem.partition("=")[2]))
            for old in kept[: -self.keep_last_n]:
                old.unlink(missing_ok=True)


@dataclass
class RoundLoggers:
    """Where rounds go beside metrics.jsonl (LOG-1): the W&B run, which charts the first
    round, a round once `wandb_every_seconds` of training passed since the last it charted,
    and the last, and gets every round in a `rounds` table at the end; and the TensorBoard
    and CSV loggers of src.runs.loggers, every round. A W&B row costs a fixed fraction of a
    millisecond, as much as a round on a small table: spaced in time, its share stays small
    at any speed."""

    wandb_run: Any | None = None
    lightning: list[Logger] = field(default_factory=list)
    wandb_every_seconds: float = 0.0
    _seconds_since_charted: float = field(default=math.inf, init=False, repr=False)  # inf: charts the first
    _uncharted: tuple[dict[str, Any], int] | None = field(default=None, init=False, repr=False)

    def log_start(self, jsonl_path: Path, facts: dict[str, Any]) -> None:
        """LOG-5: a metrics.jsonl line, the W&B run's config and the other loggers' hyperparameters."""
        append_jsonl(jsonl_path, {"event": "hyperparams", **facts})
        if self.wandb_run is not None:
            self.wandb_run.config.update(facts, allow_val_change=True)
        for logger in self.lightning:
            logger.log_hyperparams(facts)

    def log_rounds(self, events: list[dict[str, Any]], training_ended: bool = False) -> None:
        if self.wandb_run is None and not self.lightning:
            return
        for event in events:
            metrics = {k: v for k, v in event.items() if k not in ("event", "step", "time")}
            if self.wandb_run is not None:
                self._chart(metrics, event["step"])
            numbers = {k: v for k, v in metrics.items() if isinstance(v, int | float)}  # no None
            for logger in self.lightning:
                logger.log_metrics(numbers, step=event["step"])
        if training_ended and self._uncharted is not None:  # the last round
            metrics, step = self._uncharted
            self.wandb_run.log(metrics, step=step)
            self._uncharted = None

    def _chart(self, metrics: dict[str, Any], step: int) -> None:
        since = self._seconds_since_charted + metrics.get("timing/round_seconds", 0.0)
        if since >= self.wandb_every_seconds:
            self.wandb_run.log(metrics, step=step)
            self._seconds_since_charted, self._uncharted = 0.0, None
        else:
            self._seconds_since_charted, self._uncharted = since, (metrics, step)

    def finish(self, summary: dict[str, float], last_round: int, jsonl_path: Path) -> None:
        """The summary; in W&B also every round of metrics.jsonl, as the `rounds` table."""
        if self.wandb_run is not None:
            import wandb  # here: only a run with W&B gets this far

            rounds = logged_rounds(jsonl_path)
            columns = list(
                dict.fromkeys(key for event in rounds for key in event if key not in ("event", "time"))
            )
            table = wandb.Table(
                columns=columns, data=[[event.get(key) for key in columns] for event in rounds]
            )
            self.wandb_run.log({"rounds": table}, step=last_round)
            self.wandb_run.summary.update(summary)
        for logger in self.lightning:
            logger.log_metrics(summary, step=last_round)
            logger.finalize("success")


def logged_rounds(jsonl_path: Path, first_round: int = 0) -> list[dict[str, Any]]:
    """The rounds from `first_round` on that metrics.jsonl holds."""
    events = read_jsonl(jsonl_path) if jsonl_path.is_file() else []
    return [event for event in events if event.get("event") == "metrics" and event["step"] >= first_round]


class RoundMetrics(xgb.callback.TrainingCallback):
    """LOG-4, OUT-4: every round's train/val metrics, with tracking/ and timing/, to
    metrics.jsonl and the RoundLoggers; system/ at every flush. A round can take well under
    a millisecond, so it only records its duration; the lines are built from XGBoost's
    evaluation log every `flush_every` rounds, before each checkpoint and at the end. A
    resumed run first drops the lines of rounds its checkpoint does not hold."""

    def __init__(self, jsonl_path: Path, loggers: RoundLoggers, monitor: str, flush_every: int = 100) -> None:
        self.jsonl_path, self.loggers = jsonl_path, loggers
        self.monitor = monitor  # e.g. "val_rmse"
        self.best = BestRound(monitor.removeprefix("val_"))
        self.flush_every = flush_every
        self._seconds: list[float] = []  # durations of the rounds not yet written
        self._written = 0  # rounds of this training call already written
        self._evals_log: dict = {}
        self._mark = 0.0

    def __getstate__(self) -> dict[str, Any]:
        # Sent to a Dask worker: the loggers stay in the training process, which logs
        # the rounds from metrics.jsonl when training ends (replay).
        return {**self.__dict__, "loggers": RoundLoggers()}

    def before_training(self, model: xgb.Booster) -> xgb.Booster:
        self.best.start(model)  # and the rounds before this training call
        if self.best.first_round and writes_files() and self.jsonl_path.is_file():
            drop_metrics_from_step(self.jsonl_path, self.best.first_round)
        self._mark = time.perf_counter()
        return model

    def after_iteration(self, model: xgb.Booster, epoch: int, evals_log: dict) -> bool:
        now = time.perf_counter()
        self._seconds.append(now - self._mark)
        self._mark = now
        self._evals_log = evals_log  # XGBoost's history of every round, updated in place
        if len(self._seconds) >= self.flush_every:
            self.flush()
        return False

    def after_training(self, model: xgb.Booster) -> xgb.Booster:
        self.flush(training_ended=True)
        return model

    def flush(self, training_ended: bool = False) -> None:
        if writes_files():
            events = [self._event(self._written + i, seconds) for i, seconds in enumerate(self._seconds)]
            if events:
                events[-1] |= collect_system_metrics()
                append_jsonl(self.jsonl_path, *({"event": "metrics", **event} for event in events))
                print(self._progress_line(events[-1]))
            self.loggers.log_rounds(events, training_ended)  # a checkpoint may have flushed the last
        self._written += len(self._seconds)
        self._seconds.clear()

    def replay(self, first_round: int) -> None:
        """Metrics.jsonl's rounds from `first_round` on, to the loggers the Dask workers lacked."""
        self.loggers.log_rounds(logged_rounds(self.jsonl_path, first_round), training_ended=True)

    def _progress_line(self, event: dict[str, Any]) -> str:
        """`round 99 | train_rmse 45.1 | val_rmse 61.23 | best 61.07 at round 25 | median 0.31
        ms/round`; a median, since the first rounds' start-up would weigh on a mean."""
        metrics = [f"{key} {value:.4g}" for key, value in event.items() if key.startswith(("train_", "val_"))]
        score, best_round = self.best.score, self.best.round
        best = f"best {score:.4g} at round {best_round}" if score is not None else "no best yet"
        milliseconds = 1000 * statistics.median(self._seconds)
        return " | ".join([f"round {event['round']}", *metrics, best, f"median {milliseconds:.2g} ms/round"])

    def _event(self, index: int, seconds: float) -> dict[str, Any]:
        round_number = self.best.first_round + index
        event: dict[str, Any] = {"step": round_number, "round": round_number, "timing/round_seconds": seconds}
        for data_name, metrics in self._evals_log.items():
            for metric_name, values in metrics.items():
                event[f"{data_name}_{metric_name}"] = values[index]
        if (value := event.get(self.monitor)) is not None:
            self.best.offer(round_number, value)
        event[f"tracking/best_{self.monitor}"] = self.best.score
        event["tracking/best_round"] = self.best.round
        # A boosting round is a tree model's epoch: the same key as the Lightning parts.
        event["tracking/epochs_since_improvement"] = round_number - self.best.round
        return event


def round_callbacks(
    cfg: SLTreeConfig, run_dir: Path, loggers: RoundLoggers
) -> list[xgb.callback.TrainingCallback]:
    """The callbacks of a run, in the order they act after each round."""
    metrics = RoundMetrics(run_dir / "metrics.jsonl", loggers, monitor=f"val_{cfg.watched_metric}")
    return [
        metrics,
        EarlyStoppingRounds(cfg.early_stopping_rounds, cfg.watched_metric),
        AlertRounds(Alerts(cfg.alerts, run_dir), cfg.watched_metric),
        StopRounds(stop_file_paths(cfg.stop_file, run_dir), cfg.max_wall_clock_hours),
        LatestModel(
            run_dir / "checkpoints" / "last.ubj", cfg.checkpoint_minutes, cfg.keep_last_n, metrics.flush
        ),
    ]
