"""Checks of what a run wrote (`output/<run>/`): its files, metrics.jsonl, and the facts
logged at its start (precision, optimizer groups, callbacks). They import the project's
config classes, torch and xgboost when they run, never when this module is imported."""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import importlib
import inspect
import json
import math
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from itertools import pairwise
from pathlib import Path
from typing import Any

from src.checklist.project import Part, Project
from src.checklist.registry import Failed, Skipped, check, require

MODEL_FILES = {"sl_neural": "model.pt", "rl": "model.pt", "sl_tree": "model.ubj"}
START_OF_RUN = ("total_params", "trainable_params", "num_train_samples", "num_val_samples", "gpu_name")
VALID = "a run directory is output/<name>_<YYYYMMDD_HHMMSS>/ holding config.json (and run.json)"


class BadRunDir(ValueError):
    """A path given as RUN_DIR is not a run directory of this project."""


@dataclass
class RunDir:
    path: Path
    part: Part
    config: dict[str, Any]
    record: dict[str, Any]  # run.json: status, launcher, world_size, history ...; {} without one

    @property
    def status(self) -> str:
        """finished, running, failed, interrupted, or unknown."""
        return self.record.get("status", "unknown")

    @property
    def kind(self) -> str:
        return self.part.kind

    @cached_property
    def events(self) -> list[dict[str, Any]]:
        path = self.path / "metrics.jsonl"
        require(path.is_file(), "metrics.jsonl is missing")
        events = []
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            try:
                events += [json.loads(line)] if line.strip() else []
            except json.JSONDecodeError as error:
                raise Failed(f"metrics.jsonl line {number} is not JSON: {error}") from None
        return events

    def metric_keys(self) -> set[str]:
        return {key for event in self.events if event.get("event") == "metrics" for key in event}

    def start_facts(self) -> dict[str, Any]:
        facts: dict[str, Any] = {}
        for event in self.events:
            facts.update(event if event.get("event") == "hyperparams" else {})
        return facts


def open_run_dir(path: Path, project: Project) -> RunDir:
    """The run directory and its part; BadRunDir saying what is wrong otherwise."""
    if not path.is_dir():
        raise BadRunDir(f"{path} {'is not a directory' if path.exists() else 'does not exist'}; {VALID}")
    try:
        config = json.loads((path / "config.json").read_text())
    except FileNotFoundError:
        raise BadRunDir(f"{path} has no config.json; {VALID}") from None
    except json.JSONDecodeError as error:
        raise BadRunDir(f"{path}/config.json is not JSON ({error}); {VALID}") from None
    try:
        run = json.loads((path / "run.json").read_text()) if (path / "run.json").is_file() else {}
    except json.JSONDecodeError as error:
        raise BadRunDir(f"{path}/run.json is not JSON ({error}); {VALID}") from None
    # run.json's command names the part's module (`-m part1.train`); else the config's keys tell.
    named = {word.split(".")[0] for word in run.get("command", [])}
    part = next((p for p in project.parts if p.name in named), None) or _best_fit(config, project)
    if part is None:
        kinds = ", ".join(f"{p.name} ({p.kind})" for p in project.parts)
        raise BadRunDir(f"{path}: its config.json fits none of this project's parts: {kinds}")
    return RunDir(path, part, config, run)


def _best_fit(config: dict[str, Any], project: Project) -> Part | None:
    """The part whose config fields cover most of config.json's keys (more than half)."""
    scores = {}
    for part in project.parts:
        names = {f.name for f in dataclasses.fields(config_class(part, config))}
        if 2 * len(names & config.keys()) > len(config):
            scores[part] = len(names & config.keys()) - len(names ^ config.keys())
    return max(scores, key=scores.__getitem__, default=None)


def config_class(part: Part, config: dict[str, Any]) -> type:
    """The part's config class named as config.json's `name` (or its task config)."""
    module = importlib.import_module(f"{part.name}.config")
    own = [
        c for _, c in inspect.getmembers(module, dataclasses.is_dataclass) if c.__module__ == module.__name__
    ]
    named = [c for c in own if getattr(c, "name", None) == config.get("name")]
    require(own, f"{part.name}/config.py defines no config dataclass")
    return (named or sorted(own, key=lambda c: len(c.__mro__)))[0]


@check("OUT-1", "the run directory is named {name}_{YYYYMMDD_HHMMSS}", mode="run")
def run_dir_name(run: RunDir) -> str:
    pattern = re.escape(str(run.config.get("name"))) + r"_\d{8}_\d{6}(_\d+)?"
    require(
        re.fullmatch(pattern, run.path.name),
        f"{run.path.name} is not {run.config.get('name')}_YYYYMMDD_HHMMSS",
    )
    return f"{run.path.name}: the config's name and a timestamp"


@check("OUT-2", "the run directory holds config.json, console.log and checkpoints", mode="run")
def run_contents(run: RunDir) -> str:
    for name in ("config.json", "console.log"):
        require(
            (run.path / name).is_file() and (run.path / name).stat().st_size, f"{name} is missing or empty"
        )
    checkpoints = sorted(
        p.name for p in (run.path / "checkpoints").glob("*") if p.suffix in {".ckpt", ".ubj"}
    )
    require(checkpoints, "checkpoints/ holds no checkpoint")
    if run.kind == "sl_tree":
        import xgboost as xgb

        try:
            xgb.Booster(model_file=str(run.path / "checkpoints" / "last.ubj"))
        except xgb.core.XGBoostError as error:
            raise Failed(f"checkpoints/last.ubj does not load: {str(error).splitlines()[0]}") from None
    return "config.json, console.log, checkpoints/" + ", ".join(checkpoints)


@check("CFG-2", "config.json round-trips through the part's config class", mode="run")
def config_round_trip(run: RunDir) -> str:
    cls = config_class(run.part, run.config)
    # "used": what a Lightning run settled on (precision, batch size), beside the fields.
    fields = {key: value for key, value in run.config.items() if key != "used"}
    try:
        again = cls.from_dict(fields).to_dict()
    except Exception as error:  # noqa: BLE001 - whatever from_dict refuses is the finding
        raise Failed(f"{cls.__name__}.from_dict(config.json) fails: {error}") from None
    differ = sorted(key for key in fields.keys() | again.keys() if fields.get(key) != again.get(key))
    require(not differ, f"config.json does not round-trip through {cls.__name__}: {', '.join(differ)} differ")
    if run.kind == "sl_tree":
        return f"config.json == {cls.__name__}.from_dict(config.json).to_dict()"
    used = run.config.get("used", {})
    missing = [key for key in ("precision", "batch_size") if key not in used]
    require(not missing, f"config.json's used settings lack {', '.join(missing)} (what the Trainer chose)")
    return f"config.json round-trips; used: precision {used['precision']}, batch size {used['batch_size']}"


@check("OUT-3", "checkpoints/best.ckpt and last.ckpt exist and load", "nn", mode="run")
def checkpoints_load(run: RunDir) -> str:
    import torch

    for name in ("best.ckpt", "last.ckpt"):
        path = run.path / "checkpoints" / name
        require(path.is_file(), f"checkpoints/{name} is missing")
        try:
            checkpoint = torch.load(path, map_location="cpu", weights_only=True)  # RES-3
        except Exception as error:  # noqa: BLE001 - a checkpoint that does not load is the finding
            raise Failed(f"checkpoints/{name} does not load: {str(error).splitlines()[0]}") from None
        require("state_dict" in checkpoint, f"checkpoints/{name} holds no state_dict")
    return "best.ckpt and last.ckpt load on the CPU with weights_only=True"


@check("OUT-2", "run.json records what produced the run: code, packages, machine, data", mode="run")
def provenance_recorded(run: RunDir) -> str:
    recorded = run.record.get("provenance") or {}
    missing = [key for key in ("code", "python", "packages", "machine", "data_files") if key not in recorded]
    require(not missing, f"run.json's provenance lacks {', '.join(missing)}")
    code = recorded["code"]
    if code.get("git_commit") is None:
        return f"recorded, but no git commit: {code.get('why', 'the project is not in git')}"
    dirty = " with uncommitted changes" if code.get("git_dirty") else ""
    counts = f"{len(recorded['packages'])} package versions, {len(recorded['data_files'])} data file(s)"
    return f"commit {code['git_commit'][:10]}{dirty}, {counts}"


@check("OUT-4", "metrics.jsonl: one JSON line per logging event", mode="run")
def metric_lines(run: RunDir) -> str:
    metrics = [e for e in run.events if e.get("event") == "metrics"]
    require(metrics, "metrics.jsonl has no metrics events")
    return f"{len(run.events)} lines, {len(metrics)} metrics events"


@check("DDP-1", "run.json records the launch; rank zero alone writes metrics.jsonl", "nn", mode="run")
def one_writer(run: RunDir) -> str:
    launch = {key: run.record.get(key) for key in ("launcher", "world_size", "num_nodes")}
    missing = [key for key, value in launch.items() if value is None]
    require(not missing, f"run.json lacks {', '.join(missing)}")
    # Several processes writing would log each metric of a step once per process.
    logged = Counter(
        (event.get("step"), key)
        for event in run.events
        if event.get("event") == "metrics"
        for key in event
        if key not in {"time", "event", "step", "epoch"}
    )
    repeated = [(key, step, count) for (step, key), count in logged.items() if count > 1]
    if repeated:
        key, step, count = repeated[0]
        raise Failed(f"metrics.jsonl logs {key} at step {step} {count} times: more than one process wrote it")
    return (
        f"{launch['world_size']} process(es) on {launch['num_nodes']} node(s), started by "
        f"{launch['launcher']}; each metric once per step"
    )


@check("LOG-4", "metrics in every namespace: top level, batch/, timing/, tracking/, system/", mode="run")
def metric_namespaces(run: RunDir) -> str:
    keys, missing = run.metric_keys(), []
    if not {k[:4] for k in keys if "/" not in k} >= {"trai", "val_"}:
        missing.append("top-level train_*/val_*")
    if run.kind != "sl_tree" and not any(key.startswith("lr") for key in keys):
        missing.append("lr")
    spaces = ["timing/", "tracking/", "system/"] + ([] if run.kind == "sl_tree" else ["batch/"])
    missing += [space for space in spaces if not any(key.startswith(space) for key in keys)]
    if "tracking/epochs_since_improvement" not in keys or not any(
        k.startswith("tracking/best_") for k in keys
    ):
        missing.append("tracking/best_* and tracking/epochs_since_improvement")
    require(not missing, "metrics.jsonl lacks " + "; ".join(missing))
    return "top level, " + ", ".join(spaces) + " all present"


@check("LOG-5", "the start-of-run facts are logged once", mode="run")
def start_facts(run: RunDir) -> str:
    wanted = list(START_OF_RUN)
    if run.kind == "sl_tree":  # a tree's parameters, its leaves, are known once it is trained
        require("total_params" in _summary(run), "metrics.json has no total_params")
        wanted = wanted[2:]
    missing = [key for key in wanted if key not in run.start_facts()]
    require(not missing, f"metrics.jsonl's hyperparams lines lack {', '.join(missing)}")
    return ", ".join(wanted) + (" (total_params in metrics.json)" if run.kind == "sl_tree" else "")


def _fact(run: RunDir, key: str) -> Any:
    value = run.start_facts().get(key)
    require(value is not None, f"metrics.jsonl's hyperparams lines lack {key}")
    return value


@check(
    "LIT-4",
    "AdamW decays only dim >= 2 parameters, fused unless the Trainer clips in mixed precision",
    "nn",
    mode="run",
)
def optimizer_groups(run: RunDir) -> str:
    optimizers = [o for o in _fact(run, "optimizers") if o.get("name") == "AdamW"]
    require(optimizers, "no AdamW among the optimizers logged at the start")
    for group in (g for o in optimizers for g in o["param_groups"]):
        dims = group["param_dims"]
        require(
            group["weight_decay"] == 0 or not dims or min(dims) >= 2,
            f"a param group with weight_decay {group['weight_decay']} holds parameters of dim {dims}",
        )
    clips_mixed = run.config.get("gradient_clip_val") and "mixed" in str(_fact(run, "precision"))
    fused = {bool(o.get("fused")) for o in optimizers}
    require(fused == {not clips_mixed}, f"AdamW fused={fused.pop()} with precision {_fact(run, 'precision')}")
    return f"decay on dim >= 2 only; fused={not clips_mixed}"


@check("PRC-1", 'the run used "bf16-mixed" or "32-true", never fp16', "nn", mode="run")
def precision_used(run: RunDir) -> str:
    precision = str(_fact(run, "precision"))
    require(precision in {"bf16-mixed", "32-true", "bf16-true"}, f"the run used precision {precision!r}")
    return f"precision {precision}"


def _active(run: RunDir, wanted: str) -> str:
    active = _fact(run, "callbacks")
    require(
        any(a == wanted or a.endswith(f"({wanted})") for a in active), f"no {wanted} in this run: {active}"
    )
    return f"{wanted} was active"


@check("CB-1", "EarlyStopping was active", "nn", mode="run")
def early_stopping_active(run: RunDir) -> str:
    return _active(run, "EarlyStopping")


@check("CB-2", "ModelCheckpoint was active", "nn", mode="run")
def checkpoint_active(run: RunDir) -> str:
    return _active(run, "ModelCheckpoint")


@check("CB-3", "LearningRateMonitor was active", "nn", mode="run")
def lr_monitor_active(run: RunDir) -> str:
    return _active(run, "LearningRateMonitor")


@check("RES-2", "the rate logged per step follows the schedule over the optimizer steps", "nn", mode="run")
def schedule_followed(run: RunDir) -> str:
    rates = _logged_rates(run)
    require(rates, "metrics.jsonl holds no learning rate from LearningRateMonitor (lr/...)")
    scheduler = run.config.get("scheduler")
    if scheduler in (None, "plateau"):  # it follows the monitored metric, and only ever cuts the rate
        name, steps = scheduler or "no schedule", sorted(rates)
        rose = next((later for earlier, later in pairwise(steps) if rates[later] > rates[earlier]), None)
        require(rose is None, f"the rate rose at step {rose}, where {name} only cuts it")
        return f"{name}: lr at {len(rates)} steps, never rising"
    epoch_zero = [e["step"] for e in run.events if e.get("epoch") == 0 and "step" in e]
    if not epoch_zero or not any(e.get("epoch", 0) >= 1 for e in run.events):
        raise Skipped("the run logged fewer than 2 epochs: its steps per epoch are unknown")
    per_epoch, epochs = max(epoch_zero) + 1, int(run.config["num_epochs"])
    planned = _schedule(scheduler, float(run.config["learning_rate"]), per_epoch * epochs, run.config)
    for step, rate in sorted(rates.items()):
        require(
            math.isclose(rate, planned(step), rel_tol=1e-4, abs_tol=1e-12),
            f"lr {rate:.4g} at step {step}, where {scheduler} over {per_epoch * epochs} optimizer steps "
            f"({per_epoch} per epoch x {epochs} epochs) is at {planned(step):.4g}",
        )
    require(
        per_epoch == 1 or any(step % per_epoch for step in rates),
        "lr is logged at epoch starts only, not per step",
    )
    return f"{scheduler}: lr at {len(rates)} steps, on it over {per_epoch} steps per epoch x {epochs} epochs"


def _logged_rates(run: RunDir) -> dict[int, float]:
    """{step: rate} of LearningRateMonitor's events (they hold nothing else), first group's."""
    rates = {}
    for event in run.events:
        logged = {k: v for k, v in event.items() if k not in ("time", "event", "step")}
        if event.get("event") == "metrics" and logged and all(k.startswith("lr") for k in logged):
            rates[event["step"]] = logged[min(logged)]
    return rates


def _schedule(name: str, rate: float, total: int, config: dict[str, Any]) -> Callable[[int], float]:
    """The rate at each step of cosine (linear warmup from rate / (peak + 1)), onecycle (cosine
    rise from rate / 25) or constant, as the config defines them, over `total` steps."""
    floor = config["min_lr_fraction"] * rate
    peak = max(0, min(round(config["warmup_fraction"] * total), total - 2))

    def anneal(start: float, end: float, share: float) -> float:
        return end + (start - end) * (1 + math.cos(math.pi * share)) / 2

    def cosine(step: int) -> float:
        return (
            rate * (step + 1) / (peak + 1)
            if step < peak
            else anneal(rate, floor, (step - peak) / (total - peak))
        )

    def onecycle(step: int) -> float:
        if not peak:
            return anneal(rate, floor, (step + 1) / total)
        return (
            anneal(rate / 25, rate, step / peak)
            if step <= peak
            else anneal(rate, floor, (step - peak) / (total - 1 - peak))
        )

    schedules = {"cosine": cosine, "onecycle": onecycle, "constant": lambda step: rate}
    require(name in schedules, f"config.json's scheduler {name!r} is none of {', '.join(schedules)}")
    return schedules[name]


@check("PRF-1", "a Lightning profiler was active", "nn", mode="run")
def profiler_active(run: RunDir) -> str:
    profiler = str(_fact(run, "profiler"))
    require(re.search(r"(Simple|Advanced)Profiler\)?$", profiler), f"the run's profiler was {profiler}")
    return f"{profiler} was active"


@check("PRF-2", "timing/ data (or env_step), inference, backward and overhead seconds", "nn", mode="run")
def timing_keys(run: RunDir) -> str:
    fetch = "env_step" if run.kind == "rl" else "data"
    wanted = [f"timing/{name}_seconds" for name in (fetch, "inference", "backward", "overhead")]
    missing = [key for key in wanted if key not in run.metric_keys()]
    require(not missing, f"metrics.jsonl lacks {', '.join(missing)}")
    return ", ".join(wanted)


@check("PRF-3", "timing/env_step_seconds covers the rollouts", "rl", mode="run")
def env_step_time(run: RunDir) -> str:
    values = [e["timing/env_step_seconds"] for e in run.events if "timing/env_step_seconds" in e]
    require(values, "metrics.jsonl has no timing/env_step_seconds")
    require(
        all(v > 0 for v in values), "timing/env_step_seconds is 0 in some epoch: the rollout is not timed"
    )
    return f"timing/env_step_seconds > 0 in {len(values)} epoch(s)"


@check("PRF-4", "timing/*_pct add up to 100 in each epoch", "nn", mode="run")
def timing_shares(run: RunDir) -> str:
    totals = [
        (
            event.get("step"),
            sum(v for k, v in event.items() if k.startswith("timing/") and k.endswith("_pct")),
        )
        for event in run.events
        if any(k.startswith("timing/") and k.endswith("_pct") for k in event)
    ]
    require(totals, "metrics.jsonl has no timing/*_pct")
    for step, total in totals:
        require(abs(total - 100) <= 1, f"step {step}: timing/*_pct add up to {total:.1f}")
    return f"timing/*_pct add up to 100 (+-1) in all {len(totals)} epoch(s)"


@check("RL-11", "batch/actual_updates logged", "rl", mode="run")
def updates_logged(run: RunDir) -> str:
    values = [e["batch/actual_updates"] for e in run.events if "batch/actual_updates" in e]
    require(values, "metrics.jsonl has no batch/actual_updates")
    return f"batch/actual_updates in {len(values)} step(s)"


@check("LOG-6", "the model file was saved and logged as a W&B artifact", mode="run")
def artifact_logged(run: RunDir) -> str:
    model = run.path / MODEL_FILES[run.kind]
    require(
        model.is_file() and model.stat().st_size, f"{model.name} (the file the artifact holds) is missing"
    )
    digest = base64.b64encode(hashlib.md5(model.read_bytes()).digest())  # the manifest's digest
    logs = [p for p in (run.path / "wandb").glob("*run-*/*.wandb") if not p.parent.is_symlink()]
    if not logs:
        raise Skipped(
            f"{model.name} exists, but W&B was off for this run (no wandb/ in it): no artifact to verify"
        )
    for log in logs:
        data = log.read_bytes()
        if model.name.encode() in data and digest in data:
            return f"{model.name} (md5 {digest.decode()}) is in the artifact of {log.parent.name}"
    raise Failed(f"no W&B artifact in {', '.join(p.parent.name for p in logs)} holds this {model.name}")


def _summary(run: RunDir) -> dict[str, Any]:
    try:
        summary = json.loads((run.path / "metrics.json").read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise Failed(f"metrics.json does not read as JSON: {error}") from None
    require(isinstance(summary, dict) and summary, "metrics.json holds no summary")
    return summary


TREE_PLOTS = ("feature_importance.png", "predicted_vs_actual.png", "shap_summary.png")


@check(
    "OUT-5",
    "metrics.json (final summary) and plots/: importance, predicted vs actual, SHAP",
    "tree",
    mode="run",
)
def tree_outputs(run: RunDir) -> str:
    summary = _summary(run)
    nan = [k for k, v in summary.items() if k.startswith("test_") and isinstance(v, float) and math.isnan(v)]
    require(not nan, f"metrics.json: {', '.join(nan)} are NaN")
    plots = [run.path / "plots" / name for name in TREE_PLOTS]
    missing = [p.name for p in plots if not p.is_file() or not p.stat().st_size]
    require(not missing, f"plots/ lacks {', '.join(missing)}")
    return f"metrics.json ({len(summary)} values) and plots/" + ", ".join(TREE_PLOTS)
