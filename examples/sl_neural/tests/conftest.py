"""Shared fixtures: the parts of this project, found by their KIND, and a quiet W&B."""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from types import ModuleType

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]

# Tests never talk to a W&B server; the tests that check W&B files use offline mode.
os.environ.setdefault("WANDB_MODE", "disabled")
os.environ.setdefault("WANDB_SILENT", "true")


def parts_by_kind() -> dict[str, str]:
    """{"sl_neural": "part1", ...} from each partN/__init__.py's KIND."""
    found = {}
    for folder in sorted(ROOT.glob("part*/train.py")):
        package = folder.parent.name
        found[importlib.import_module(package).KIND] = package
    return found


PARTS = parts_by_kind()


def part_module(kind: str, module: str) -> ModuleType:
    if kind not in PARTS:
        pytest.skip(f"this project has no {kind} part")
    return importlib.import_module(f"{PARTS[kind]}.{module}")


slow = pytest.mark.slow  # trains or starts Python processes: deselect with -m "not slow"


def gpu(test):
    """Mark a test `gpu` (select with -m gpu) and skip it where CUDA is missing."""
    needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
    return pytest.mark.gpu(needs_cuda(test))
