"""Checks of what a run of any part wrote (`output/<part>/<run>/`); they import the part's config classes."""

from __future__ import annotations

import base64
import hashlib
import importlib
import json
import re
from dataclasses import dataclass, is_dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from src.checklist.project import Part, Project
from src.checklist.registry import BadInput, Failed, Skipped, check, lacks, require

MODEL_FILES = {"sl_neural": "model.pt", "rl": "model.pt", "sl_tree": "model.ubj"}
START_OF_RUN = ("total_params", "trainable_params", "num_train_samples", "num_val_samples", "gpu_name")
VALID = "a run directory is output/<part>/<name>_<YYYYMMDD_HHMMSS>/ holding config.json and run.json"


@dataclass
class RunDir:
    path: Path
    part: Part
    config: dict[str, Any]
    record: dict[str, Any]  # run.json: status, launcher, world_size, history ...; {} without one

    @property
    def kind(self) -> str:
        return self.part.kind

    @cached_property
    def events(self) -> list[dict[str, Any]]:
        path, events = self.path / "metrics.jsonl", []
        require(path.is_file(), "metrics.jsonl is missing")
        for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            if not line.strip():
                continue
            try:
                event = json.loads(line)
            except json.JSONDecodeError as error:
                raise Failed(f"metrics.jsonl line {number} is not JSON: {error}") from None
            require(isinstance(event, dict), f"metrics.jsonl line {number} is not a JSON object")
            events.append(event)
        return events

    def metrics(self) -> list[dict[str, Any]]:
        return [event for event in self.events if event.get("event") == "metrics"]

    def metric_keys(self) -> set[str]:
        return {key for event in self.metrics() for key in event}

    def start_facts(self) -> dict[str, Any]:
        return {k: v for e in self.events if e.get("event") == "hyperparams" for k, v in e.items()}

    def fact(self, key: str) -> Any:
        require(self.start_facts().get(key) is not None, f"metrics.jsonl's hyperparams lines lack {key}")
        return self.start_facts()[key]

    def file(self, relative: str) -> Path:
        path = self.path / relative
        require(path.is_file() and path.stat().st_size, f"{relative} is missing or empty")
        return path


def read_json(path: Path) -> dict[str, Any]:
    try:
        content = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise BadInput(f"{path} is not JSON ({error}); {VALID}") from None
    if not isinstance(content, dict):
        raise BadInput(f"{path} holds a JSON {type(content).__name__}, not an object; {VALID}")
    return content


def open_run_dir(path: Path, project: Project) -> RunDir:
    """The run directory and the part its run.json names; BadInput saying what is wrong otherwise."""
    if not (path / "config.json").is_file():
        problem = "has no config.json" if path.is_dir() else "is not a directory"
        raise BadInput(f"{path} {problem if path.exists() else 'does not exist'}; {VALID}")
    config = read_json(path / "config.json")
    run = read_json(path / "run.json") if (path / "run.json").is_file() else {}
    part = next((p for p in project.parts if p.name == run.get("part")), None)
    if part is None:
        kinds = ", ".join(f"{p.name} ({p.kind})" for p in project.parts)
        raise BadInput(f"{path}: no run.json names one of this project's parts ({kinds}); {VALID}")
    from src.runs.directory import status_now  # psutil: the static checks need only the standard library

    if (status := status_now(path, run)) != "finished":  # its model and last metrics are not there yet
        then = (
            "check it once it has finished"
            if status == "running"
            else "resume it to its end, or leave it out"
        )
        raise BadInput(f"{path}: the run is {status}, not finished; {then}")
    return RunDir(path, part, config, run)


@check("OUT-1", "the run directory is named {name}_{YYYYMMDD_HHMMSS}", mode="run")
def run_dir_name(run: RunDir) -> None:
    name = run.config.get("name")
    stamped = re.fullmatch(re.escape(str(name)) + r"_\d{8}_\d{6}(_\d+)?", run.path.name)
    require(stamped, f"{run.path.name} is not {name}_YYYYMMDD_HHMMSS")


@check("OUT-2", "the run directory holds config.json, console.log and checkpoints", mode="run")
def run_contents(run: RunDir) -> None:
    for name in ("config.json", "console.log"):
        run.file(name)
    checkpoints = [p for p in (run.path / "checkpoints").glob("*") if p.suffix in {".ckpt", ".ubj"}]
    require(checkpoints, "checkpoints/ holds no checkpoint")


@check("OUT-2", "run.json records what produced the run: code, packages, machine, data", mode="run")
def provenance_recorded(run: RunDir) -> str:
    recorded = run.record.get("provenance") or {}
    lacks("run.json's provenance", ("code", "python", "packages", "machine", "data_files"), recorded)
    code = recorded["code"]
    if code.get("git_commit") is None:
        return f"recorded, but no git commit: {code.get('why', 'the project is not in git')}"
    return f"commit {code['git_commit'][:10]}{' with uncommitted changes' if code.get('git_dirty') else ''}"


@check("CFG-2", "config.json round-trips through the part's config class", mode="run")
def config_round_trip(run: RunDir) -> str:
    module = importlib.import_module(f"{run.part.name}.config")
    own = [c for c in vars(module).values() if is_dataclass(c) and c.__module__ == module.__name__]
    require(own, f"{run.part.name}/config.py defines no config dataclass")
    # The config class named as config.json's `name`, or else the task config (the least derived).
    named = [c for c in own if getattr(c, "name", None) == run.config.get("name")]
    cls = (named or sorted(own, key=lambda c: len(c.__mro__)))[0]
    # "used": what a Lightning run settled on (precision, batch size), beside the fields.
    fields = {key: value for key, value in run.config.items() if key != "used"}
    try:
        again = cls.from_dict(fields).to_dict()
    except Exception as error:  # noqa: BLE001 - whatever from_dict refuses is the finding
        raise Failed(f"{cls.__name__}.from_dict(config.json) fails: {error}") from None
    differ = sorted(key for key in fields if fields[key] != again.get(key))
    require(not differ, f"config.json does not round-trip through {cls.__name__}: {', '.join(differ)} differ")
    if run.kind != "sl_tree":
        used = ("precision", "batch_size")
        lacks("config.json's used settings (what the Trainer chose)", used, run.config.get("used", {}))
    # Fields config.json lacks: ones the code gained after the run load at their defaults (as
    # --resume and predict load them); where git cannot show that the code changed, a defect.
    missing = sorted(again.keys() - fields.keys())
    if not missing:
        return f"config.json round-trips through {cls.__name__}"
    lacking = f"config.json lacks {', '.join(missing)} (git shows no change of the code since the run)"
    require(code_changed_since(run), lacking)
    return f"config.json round-trips through {cls.__name__}; {', '.join(missing)}: added since this run"


def code_changed_since(run: RunDir) -> bool:
    """Whether git shows this checkout's code other than the run's last session ran."""
    from src.runs.provenance import code_state  # git, only for a config.json that lacks fields

    ran = (run.record.get("history") or [{}])[-1]
    now = code_state(Path(__file__).resolve().parent)
    known = ran.get("git_commit") is not None and now.get("git_commit") is not None
    return known and any(ran.get(key) != now.get(key) for key in ("git_commit", "git_diff_sha256"))


@check("OUT-4", "metrics.jsonl: one JSON line per logging event", mode="run")
def metric_lines(run: RunDir) -> None:
    require(run.metrics(), "metrics.jsonl has no metrics events")


@check("LOG-4", "metrics in every namespace: top level, batch/, timing/, tracking/, system/", mode="run")
def metric_namespaces(run: RunDir) -> None:
    keys, tree = run.metric_keys(), run.kind == "sl_tree"
    spaces = ["timing/", "tracking/", "system/"] + ([] if tree else ["batch/"])
    best = "tracking/epochs_since_improvement" in keys and any(k.startswith("tracking/best_") for k in keys)
    wanted = {"top-level train_*/val_*": {k[:4] for k in keys if "/" not in k} >= {"trai", "val_"}}
    wanted |= {"lr": tree or any(key.startswith("lr") for key in keys)}
    wanted |= {space: any(key.startswith(space) for key in keys) for space in spaces}
    wanted |= {"tracking/best_* and tracking/epochs_since_improvement": best}
    missing = [what for what, found in wanted.items() if not found]
    require(not missing, "metrics.jsonl lacks " + "; ".join(missing))


@check("LOG-5", "the start-of-run facts are logged once", mode="run")
def start_facts(run: RunDir) -> None:
    # A tree's parameters, its leaves, are known once it is trained: metrics.json has them.
    wanted = START_OF_RUN[2:] if run.kind == "sl_tree" else START_OF_RUN
    lacks("metrics.jsonl's hyperparams lines", wanted, run.start_facts())


@check("LOG-6", "the model file was saved and logged as a W&B artifact", mode="run")
def artifact_logged(run: RunDir) -> str:
    model = run.file(MODEL_FILES[run.kind])  # the file the artifact holds
    digest = base64.b64encode(hashlib.md5(model.read_bytes()).digest())  # the manifest's digest
    logs = [p for p in (run.path / "wandb").glob("*run-*/*.wandb") if not p.parent.is_symlink()]
    no_wandb = f"{model.name} exists, but W&B was off for this run (no wandb/ in it): no artifact to verify"
    if not logs:
        raise Skipped(no_wandb)
    for log in logs:
        if model.name.encode() in (data := log.read_bytes()) and digest in data:
            return f"{model.name} (md5 {digest.decode()}) is in the artifact of {log.parent.name}"
    raise Failed(f"no W&B artifact in {', '.join(p.parent.name for p in logs)} holds this {model.name}")
