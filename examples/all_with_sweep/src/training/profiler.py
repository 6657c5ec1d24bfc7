"""PRF-1: Lightning's SimpleProfiler, in memory that stays the same size however long
the run."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from typing import Any

from lightning.pytorch.profilers import SimpleProfiler


class RunningDurations:
    """An action's durations as the profiler's report reads them (their number and
    their sum), kept as two numbers rather than a list of every one."""

    __slots__ = ("count", "total")

    def __init__(self) -> None:
        self.count, self.total = 0, 0.0

    def append(self, seconds: float) -> None:
        self.count += 1
        self.total += seconds

    def __len__(self) -> int:
        return self.count

    def __iter__(self) -> Iterator[float]:
        yield self.total  # the report sums what it iterates


class BoundedSimpleProfiler(SimpleProfiler):
    """SimpleProfiler keeps every duration of every action: Lightning times each hook of
    each callback, about 150 actions a step, so a week of training would hold billions
    of floats. This one keeps each action's count and total, all its report shows."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.recorded_durations = defaultdict(RunningDurations)
