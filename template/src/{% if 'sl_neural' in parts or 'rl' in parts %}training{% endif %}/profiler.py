"""PRF-1: Lightning's SimpleProfiler, in memory that stays the same size however long the run,
and safe to enter again from a signal handler."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

from lightning.pytorch.profilers import SimpleProfiler


class BoundedSimpleProfiler(SimpleProfiler):
    """SimpleProfiler keeps every duration of every action, about 30 a step: billions of floats in
    a week. This one keeps each action's count and total, all its report shows; and it times an
    action started again inside itself as one (Lightning's SLURM handler saves a checkpoint on
    SIGUSR1, maybe inside a save: SimpleProfiler's "already started" error ended the run)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.recorded_durations = defaultdict(RunningDurations)

    def start(self, action_name: str) -> None:
        self.current_actions.setdefault(action_name, time.perf_counter())

    def stop(self, action_name: str) -> None:
        end = time.perf_counter()
        # None: the signal handler's profile of the same action closed it already.
        if (started := self.current_actions.pop(action_name, None)) is not None:
            self.recorded_durations[action_name].append(end - started)


class RunningDurations:
    """An action's durations as SimpleProfiler's report reads them, len() and math.fsum(), kept
    as two numbers. Not public API: a change shows in
    test_the_profiler_reports_every_call_in_memory_that_does_not_grow."""

    __slots__ = ("count", "total")

    def __init__(self) -> None:
        self.count, self.total = 0, 0.0

    def append(self, seconds: float) -> None:
        self.count += 1
        self.total += seconds

    def __len__(self) -> int:
        return self.count

    def __iter__(self) -> Iterator[float]:
        yield self.total
