"""PRF-1: Lightning's SimpleProfiler, in memory that stays the same size however long
the run, and safe to enter again from a signal handler."""

from __future__ import annotations

import time
from collections import Counter, defaultdict
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
    of floats. This one keeps each action's count and total, all its report shows.

    It also times an action that starts again inside itself as one: Lightning's SLURM
    handler saves a checkpoint on SIGUSR1, and when the signal lands inside a checkpoint
    save, SimpleProfiler's "already started" error, then "never started", ended the run."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.recorded_durations = defaultdict(RunningDurations)
        self.depth: Counter[str] = Counter()  # how many times each action is open

    def profile(self, action_name: str) -> TimedAction:
        return TimedAction(self, action_name)  # Lightning's is a generator, slower per hook

    def start(self, action_name: str) -> None:
        if not self.depth[action_name]:
            self.current_actions[action_name] = time.perf_counter()
        self.depth[action_name] += 1

    def stop(self, action_name: str) -> None:
        end = time.perf_counter()
        if not self.depth[action_name]:
            return  # closed already, by a signal handler's profile of the same action
        self.depth[action_name] -= 1
        # Read without failing: a handler that ran in between may have recorded it.
        if not self.depth[action_name] and (started := self.current_actions.pop(action_name, None)):
            self.recorded_durations[action_name].append(end - started)


class TimedAction:
    """`with profiler.profile(name):` as a plain context manager: Lightning enters one
    for every hook of every batch."""

    __slots__ = ("action_name", "profiler")

    def __init__(self, profiler: BoundedSimpleProfiler, action_name: str) -> None:
        self.profiler, self.action_name = profiler, action_name

    def __enter__(self) -> str:
        self.profiler.start(self.action_name)
        return self.action_name

    def __exit__(self, *exc_info: object) -> None:
        self.profiler.stop(self.action_name)
