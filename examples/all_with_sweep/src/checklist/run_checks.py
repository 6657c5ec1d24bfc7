"""Run checks: a finished run directory (`output/<run>/`). They import the project
(torch, xgboost) when they run, never when this module is imported."""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import importlib
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from src.checklist.layout import Part, Project
from src.checklist.registry import Failed, Skipped, check, require

MODEL_FILES = {"sl_neural": "model.pt", "rl": "model.pt", "sl_tree": "model.ubj"}  # what LOG-6 logs
START_OF_RUN = ("total_params", "trainable_params", "num_train_samples", "num_val_samples", "gpu_name")


class BadRunDir(ValueError):
    """A path given as RUN_DIR is not a run directory of this project."""


@dataclass
class RunDir:
    path: Path
    part: Part
    config: dict[str, Any]
    status: str  # run.json's: finished, running, failed, interrupted, or unknown
    _events: list[dict[str, Any]] | None = field(default=None, repr=False)

    @property
    def kind(self) -> str:
        return self.part.kind

    def events(self) -> list[dict[str, Any]]:
        """metrics.jsonl's lines, read once for all the checks of this run."""
        if self._events is None:
            self._events = self._read_events()
        return self._events

    def _read_events(self) -> list[dict[str, Any]]:
        path = self.path / "metrics.jsonl"
        if not path.is_file():
            raise Failed("metrics.jsonl is missing")
        events = []
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if line.strip():
                try:
                    events.append(json.loads(line))
                except json.JSONDecodeError as error:
                    raise Failed(f"metrics.jsonl line {number} is not JSON: {error}") from None
        return events

    def metric_keys(self) -> set[str]:
        return {key for event in self.events() if event.get("event") == "metrics" for key in event}


def open_run_dir(path: Path, project: Project) -> RunDir:
    """The run directory and its part; BadRunDir saying what is wrong otherwise."""
    valid = "a run directory is output/<name>_<YYYYMMDD_HHMMSS>/ holding config.json (and run.json)"
    if not path.exists():
        raise BadRunDir(f"{path} does not exist; {valid}")
    if not path.is_dir():
        raise BadRunDir(f"{path} is not a directory; {valid}")
    try:
        config = json.loads((path / "config.json").read_text())
    except FileNotFoundError:
        raise BadRunDir(f"{path} has no config.json; {valid}") from None
    except json.JSONDecodeError as error:
        raise BadRunDir(f"{path}/config.json is not JSON ({error}); {valid}") from None
    status_path = path / "run.json"
    run = json.loads(status_path.read_text()) if status_path.is_file() else {}
    part = _part_from_command(run.get("command", []), project) or _part_from_config(config, project)
    if part is None:
        kinds = ", ".join(f"{p.name} ({p.kind})" for p in project.parts)
        raise BadRunDir(f"{path}: its config.json fits none of this project's parts: {kinds}")
    return RunDir(path, part, config, run.get("status", "unknown"))


def _part_from_command(command: list[str], project: Project) -> Part | None:
    """run.json's command: `python -m partN.train ...` (or partN.sweep)."""
    for word in command:
        match = re.fullmatch(r"(part\d+)\.\w+", word)
        if match:
            return next((p for p in project.parts if p.name == match[1]), None)
    return None


def _part_from_config(config: dict[str, Any], project: Project) -> Part | None:
    """The part whose config class fits config.json's keys best, if it has most of them;
    a config.json that CFG-2 will refuse (an extra key, say) still finds its part."""
    best, best_score = None, None
    for part in project.parts:
        fields = {field.name for field in dataclasses.fields(config_class(part, config))}
        score = len(fields & config.keys()) - len(fields ^ config.keys())
        if 2 * len(fields & config.keys()) > len(config) and (best_score is None or score > best_score):
            best, best_score = part, score
    return best


def config_class(part: Part, config: dict[str, Any]) -> type:
    configs = importlib.import_module(f"{part.name}.config").CONFIGS
    return configs.get(config.get("name"), next(iter(configs.values())))


@check("OUT-2", "the run directory holds config.json, console.log and checkpoints", mode="run")
def run_contents(run: RunDir) -> str:
    for name in ("config.json", "console.log"):
        require(
            (run.path / name).is_file() and (run.path / name).stat().st_size > 0,
            f"{name} is missing or empty",
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
    try:
        again = cls.from_dict(run.config).to_dict()
    except Exception as error:  # noqa: BLE001 - whatever from_dict refuses is the finding
        raise Failed(f"{cls.__name__}.from_dict(config.json) fails: {error}") from None
    differ = sorted(key for key in run.config.keys() | again.keys() if run.config.get(key) != again.get(key))
    require(not differ, f"config.json does not round-trip through {cls.__name__}: {', '.join(differ)} differ")
    return f"config.json == {cls.__name__}.from_dict(config.json).to_dict()"


@check("OUT-3", "checkpoints/best.ckpt and last.ckpt exist and load", "nn", mode="run")
def checkpoints_load(run: RunDir) -> str:
    import torch

    loaded = []
    for name in ("best.ckpt", "last.ckpt"):
        path = run.path / "checkpoints" / name
        require(path.is_file(), f"checkpoints/{name} is missing")
        try:
            checkpoint = torch.load(path, map_location="cpu", weights_only=True)  # RES-3
        except Exception as error:  # noqa: BLE001 - a checkpoint that does not load is the finding
            raise Failed(f"checkpoints/{name} does not load: {str(error).splitlines()[0]}") from None
        require("state_dict" in checkpoint, f"checkpoints/{name} holds no state_dict")
        loaded.append(name)
    return " and ".join(loaded) + " load on the CPU with weights_only=True"


@check("OUT-4", "metrics.jsonl: one JSON line per logging event", mode="run")
def metric_lines(run: RunDir) -> str:
    events = run.events()
    metrics = [e for e in events if e.get("event") == "metrics"]
    require(metrics, "metrics.jsonl has no metrics events")
    return f"{len(events)} lines, {len(metrics)} metrics events"


@check("LOG-4", "metrics in every namespace: top level, batch/, timing/, tracking/, system/", mode="run")
def metric_namespaces(run: RunDir) -> str:
    keys = run.metric_keys()
    missing = []
    top = {key for key in keys if "/" not in key}
    if not any(key.startswith("train_") for key in top) or not any(key.startswith("val_") for key in top):
        missing.append("top-level train_*/val_*")
    if run.kind != "sl_tree" and not any(key == "lr" or key.startswith("lr") for key in keys):
        missing.append("lr")
    namespaces = ["timing/", "tracking/", "system/"] + ([] if run.kind == "sl_tree" else ["batch/"])
    missing += [space for space in namespaces if not any(key.startswith(space) for key in keys)]
    if "tracking/epochs_since_improvement" not in keys or not any(
        k.startswith("tracking/best_") for k in keys
    ):
        missing.append("tracking/best_* and tracking/epochs_since_improvement")
    require(not missing, "metrics.jsonl lacks " + "; ".join(missing))
    return "top level, " + ", ".join(namespaces) + " all present"


@check("LOG-5", "the start-of-run facts are logged once", mode="run")
def start_facts(run: RunDir) -> str:
    facts: dict[str, Any] = {}
    for event in run.events():
        if event.get("event") == "hyperparams":
            facts.update(event)
    wanted = list(START_OF_RUN)
    if run.kind == "sl_tree":
        # A tree's parameters (its leaves) are known once it is trained: metrics.json has them,
        # and every leaf is trained, so there is no separate trainable count.
        summary = _summary(run)
        require("total_params" in summary, "metrics.json has no total_params")
        wanted.remove("total_params")
        wanted.remove("trainable_params")
    missing = [key for key in wanted if key not in facts]
    require(not missing, f"metrics.jsonl's hyperparams lines lack {', '.join(missing)}")
    return ", ".join(START_OF_RUN if run.kind != "sl_tree" else [*wanted, "total_params (metrics.json)"])


def _timing_events(run: RunDir) -> list[dict[str, Any]]:
    return [e for e in run.events() if any(k.startswith("timing/") for k in e)]


@check("PRF-2", "timing/ data (or env_step), inference, backward and overhead seconds", "nn", mode="run")
def timing_keys(run: RunDir) -> str:
    fetch = "env_step" if run.kind == "rl" else "data"
    wanted = [f"timing/{name}_seconds" for name in (fetch, "inference", "backward", "overhead")]
    missing = sorted(set(wanted) - run.metric_keys(), key=wanted.index)
    require(not missing, f"metrics.jsonl lacks {', '.join(missing)}")
    return ", ".join(wanted)


@check("PRF-3", "timing/env_step_seconds covers the rollouts", "rl", mode="run")
def env_step_time(run: RunDir) -> str:
    values = [e["timing/env_step_seconds"] for e in run.events() if "timing/env_step_seconds" in e]
    require(values, "metrics.jsonl has no timing/env_step_seconds")
    require(
        all(v > 0 for v in values), "timing/env_step_seconds is 0 in some epoch: the rollout is not timed"
    )
    return f"timing/env_step_seconds > 0 in {len(values)} epoch(s)"


@check("PRF-4", "timing/*_pct add up to 100 in each epoch", "nn", mode="run")
def timing_shares(run: RunDir) -> str:
    counted = 0
    for event in _timing_events(run):
        shares = [v for k, v in event.items() if k.startswith("timing/") and k.endswith("_pct")]
        if shares:
            counted += 1
            require(
                abs(sum(shares) - 100) <= 1,
                f"step {event.get('step')}: timing/*_pct add up to {sum(shares):.1f}",
            )
    require(counted, "metrics.jsonl has no timing/*_pct")
    return f"timing/*_pct add up to 100 (+-1) in all {counted} epoch(s)"


@check("RL-11", "batch/actual_updates logged", "rl", mode="run")
def updates_logged(run: RunDir) -> str:
    values = [e["batch/actual_updates"] for e in run.events() if "batch/actual_updates" in e]
    require(values, "metrics.jsonl has no batch/actual_updates")
    return f"batch/actual_updates in {len(values)} step(s)"


@check("LOG-6", "the model file was saved and logged as a W&B artifact", mode="run")
def artifact_logged(run: RunDir) -> str:
    model = run.path / MODEL_FILES[run.kind]
    require(
        model.is_file() and model.stat().st_size > 0, f"{model.name} (the file the artifact holds) is missing"
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
    path = run.path / "metrics.json"
    require(path.is_file(), "metrics.json is missing")
    try:
        summary = json.loads(path.read_text())
    except json.JSONDecodeError as error:
        raise Failed(f"metrics.json is not JSON: {error}") from None
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
    bad = [k for k, v in summary.items() if isinstance(v, float) and math.isnan(v) and k.startswith("test_")]
    require(not bad, f"metrics.json: {', '.join(bad)} are NaN")
    missing = [
        name
        for name in TREE_PLOTS
        if not (run.path / "plots" / name).is_file() or not (run.path / "plots" / name).stat().st_size
    ]
    require(not missing, f"plots/ lacks {', '.join(missing)}")
    return f"metrics.json ({len(summary)} values) and plots/" + ", ".join(TREE_PLOTS)
