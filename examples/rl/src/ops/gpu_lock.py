"""OPS-1: one GPU job at a time on a shared machine; the others queue.

    if __name__ == "__main__":
        with GpuLock():
            main()

The lock is flock(2) on /tmp/gpu-task.lock (or $GPU_LOCK_PATH). The kernel
releases it when the process exits, however it exits, so a crash never leaves a
stale lock behind.
"""

from __future__ import annotations

import fcntl
import os
import sys
import time
from pathlib import Path
from types import TracebackType

DEFAULT_LOCK_PATH = "/tmp/gpu-task.lock"


class GpuLock:
    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path = Path(path or os.environ.get("GPU_LOCK_PATH", DEFAULT_LOCK_PATH))
        self._file = None
        # DDP ranks that Lightning or torchrun start beside the first process belong
        # to the same job: only local rank 0 queues for the machine.
        self.enabled = int(os.environ.get("LOCAL_RANK", "0")) == 0

    def __enter__(self) -> GpuLock:
        if not self.enabled:
            return self
        self._file = open(self.path, "a+")  # held open for the lock's lifetime
        try:
            fcntl.flock(self._file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._file.seek(0)
            holder = self._file.read().strip() or "another process"
            print(f"GPU lock {self.path} is held by {holder}; waiting for it...", file=sys.stderr)
            started = time.monotonic()
            fcntl.flock(self._file, fcntl.LOCK_EX)
            print(f"GPU lock acquired after {time.monotonic() - started:.0f} s", file=sys.stderr)
        self._file.seek(0)
        self._file.truncate()
        self._file.write(f"pid {os.getpid()}: {' '.join(sys.argv)}\n")
        self._file.flush()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._file is not None:
            self._file.truncate(0)
            fcntl.flock(self._file, fcntl.LOCK_UN)
            self._file.close()
            self._file = None
