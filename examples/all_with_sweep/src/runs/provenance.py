"""What produced a run: the code's commit, the packages, the machine and the data files,
recorded in run.json at the start of every session and in the W&B run's config (OUT-2)."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import importlib.metadata
import os
import platform
import socket
import subprocess
from pathlib import Path
from typing import Any

from src.config import BaseConfig
from src.ops.hardware import driver_versions, gpu_name

# The libraries whose versions decide a result; any that is not installed is left out.
PACKAGES = ("torch", "lightning", "torchrl", "tensordict", "gymnasium", "xgboost", "xgboost-cpu", "wandb")
PACKAGES += ("numpy", "pandas", "scikit-learn", "optuna", "dask")


def provenance(cfg: BaseConfig) -> dict[str, Any]:
    machine = {"hostname": socket.gethostname(), "platform": platform.platform(), "gpu": gpu_name()}
    return {
        "code": code_state(Path(__file__).resolve().parent),
        "python": platform.python_version(),
        "packages": _package_versions(),
        # driver_versions: the NVIDIA driver and the CUDA version it runs; None without one.
        "machine": {**machine, **driver_versions()},
        "data_files": [_data_file(path) for path in data_files(cfg)],
    }


def code_state(inside: Path) -> dict[str, Any]:
    """The git commit of the repository holding `inside`, whether files differ from it,
    and a hash of those differences (`git diff HEAD`, untracked file names included):
    two runs with the same commit and hash ran the same code."""
    head = _git(inside, "rev-parse", "HEAD")
    if head is None:
        return {"git_commit": None, "why": "not in a git repository with a commit (git init, then commit)"}
    status = _git(inside, "status", "--porcelain") or ""
    untracked = sorted(line[3:] for line in status.splitlines() if line.startswith("??"))
    changes = (_git(inside, "diff", "HEAD", "--binary") or "") + "\n".join(untracked)
    return {
        "git_commit": head.strip(),
        "git_dirty": bool(status.strip()),
        "git_diff_sha256": hashlib.sha256(changes.encode()).hexdigest() if changes else None,
    }


def _git(inside: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(["git", *args], cwd=inside, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):  # no git on this machine, or a hung one
        return None
    return done.stdout if done.returncode == 0 else None


def _package_versions() -> dict[str, str]:
    versions = {}
    for name in PACKAGES:
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            versions[name] = importlib.metadata.version(name)
    return versions


def data_files(cfg: BaseConfig) -> list[Path]:
    """The files a config reads: every field named `*_path` that names an existing file
    (`data_path` in the supervised parts, or one of your own)."""
    values = [getattr(cfg, field.name) for field in dataclasses.fields(cfg) if field.name.endswith("_path")]
    return [Path(value) for value in values if isinstance(value, str) and value and _is_file(value)]


def _is_file(value: str) -> bool:
    try:
        return Path(value).is_file()
    except OSError:  # a name too long for the file system: reading the data says so
        return False


def changed_data(cfg: BaseConfig, record: dict[str, Any]) -> str | None:
    """What a resume would read differently from the run's last session: a data file rewritten
    in place (RES-1); None when every file is as that session recorded it."""
    files = record.get("provenance", {}).get("data_files", [])
    recorded = {entry.get("path"): entry.get("sha256") for entry in files}
    for path in data_files(cfg):
        now = _data_file(path)
        if recorded.get(now["path"], now["sha256"]) != now["sha256"]:
            return (
                f"{path} has changed since this run's last session read it: a resume reads and splits "
                "it again, so rows it trained on could land among its validation and test rows; "
                "resume it with the file as it was, or start a new run"
            )
    return None


def same_data_file(given: object, saved: object, record: dict[str, Any]) -> bool:
    """Whether the path `given` names the file a run read as `saved`: spelt otherwise, or moved
    or copied with the content (SHA-256) the run's last session recorded."""
    if not (isinstance(given, str) and isinstance(saved, str) and given and saved and _is_file(given)):
        return False
    with contextlib.suppress(OSError):
        if os.path.samefile(given, saved):
            return True
    recorded = {entry.get("sha256") for entry in record.get("provenance", {}).get("data_files", [])}
    return _data_file(Path(given))["sha256"] in recorded


def _data_file(path: Path) -> dict[str, Any]:
    stat, resolved = path.stat(), str(path.resolve())
    digest = _digest(resolved, stat.st_size, stat.st_mtime_ns)
    return {"path": resolved, "bytes": stat.st_size, "sha256": digest}


@functools.cache
def _digest(path: str, size: int, modified_ns: int) -> str:
    """A file's SHA-256, once per version of it: a resume checks the data and records it."""
    with open(path, "rb") as file:
        return hashlib.file_digest(file, "sha256").hexdigest()
