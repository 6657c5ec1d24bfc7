"""Is a checkpoint intact? Asked before a run resumes from it (RES-1): a file damaged by a full
disk, a cut copy or a bad sector is reported by name, never loaded into a traceback or a crash."""

from __future__ import annotations

import errno
import subprocess
import sys
import zipfile
from pathlib import Path

from src.config import first_line


def checkpoint_problem(path: Path) -> str | None:
    """What is wrong with a checkpoint file, or None if it is intact."""
    if not path.is_file() or path.stat().st_size == 0:
        return "empty or missing"
    if path.suffix == ".ubj":
        return _booster_problem(path)
    return _torch_problem(path)


def _torch_problem(path: Path) -> str | None:
    """torch.save writes a zip archive with a checksum per entry, which a cut or overwritten
    file fails; the weights must then load and be finite."""
    import torch  # here, not at the top: a tree part's .ubj checkpoints need no torch

    try:
        with zipfile.ZipFile(path) as archive:
            bad_entry = archive.testzip()
    # Python's words for a cut or overwritten archive say little ("[Errno 22] Invalid argument").
    except (zipfile.BadZipFile, OSError) as error:
        if isinstance(error, OSError) and error.errno != errno.EINVAL:
            return f"unreadable ({first_line(error)})"  # a disk's error: its own words
        return "damaged (cut or overwritten: not the whole zip archive torch.save writes)"
    if bad_entry is not None:
        return f"damaged ({bad_entry} fails its checksum)"
    try:
        # mmap: nothing is copied into memory; weights_only: no code runs from the file.
        checkpoint = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    # Whatever the unpickler meets in a damaged file is damage to report, not a crash.
    except Exception as error:  # noqa: BLE001
        return f"damaged ({first_line(error)})"
    weights = checkpoint.get("state_dict") if isinstance(checkpoint, dict) else None
    if not isinstance(weights, dict):
        return "not a checkpoint of this project (no state_dict)"
    for name, tensor in weights.items():
        if torch.is_tensor(tensor) and tensor.is_floating_point() and not torch.isfinite(tensor).all():
            return f"holds non-finite weights ({name})"
    return None


def _booster_problem(path: Path) -> str | None:
    """XGBoost can crash the process (a segfault) on a cut model file: another process tries."""
    code = "import sys, xgboost; xgboost.Booster(model_file=sys.argv[1])"
    try:
        result = subprocess.run(
            [sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=600, check=False
        )
    except subprocess.TimeoutExpired:
        return "XGBoost could not load it within 10 minutes"
    if result.returncode == 0:
        return None
    if result.returncode < 0:
        return f"damaged (XGBoost crashes reading it, signal {-result.returncode})"
    # The error's own line, not the stack trace XGBoost prints after it.
    errors = [line.partition("Error: ")[2] for line in result.stderr.splitlines() if "Error: " in line]
    return f"damaged ({errors[-1].strip()[:200] if errors else f'exit status {result.returncode}'})"
