"""Seconds per named section of a training step, for a module that times its own step
(manual optimization: PPO's updates); TimingCallback reads them from `module.stopwatch`."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager


class Stopwatch:
    """`with stopwatch("backward"): ...` adds the seconds it took to "backward"."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)

    @contextmanager
    def __call__(self, section: str) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[section] += time.perf_counter() - started

    def pop(self) -> dict[str, float]:
        seconds, self.seconds = dict(self.seconds), defaultdict(float)
        return seconds
