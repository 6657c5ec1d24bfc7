"""OPS-1: one GPU job at a time on a shared machine; the others queue on flock(2) of
/tmp/gpu-task.lock (or $GPU_LOCK_PATH), which the kernel releases however the process ends.
Every user queues on the same file: it is created writable by all, and flock needs only read
access. The folder is shared too, so a link, a FIFO or a hard-linked file at the path is refused."""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import sys
import time
from pathlib import Path
from typing import IO, NoReturn

from src.errors import fail
from src.ops.hardware import visible_gpus


class GpuLock:
    def __init__(self, path: str | os.PathLike[str] | None = None, *, without_gpu: bool = False) -> None:
        """A machine without a CUDA device has nothing to queue for: there the lock is not taken,
        unless `without_gpu=True`."""
        self.path = Path(path or os.environ.get("GPU_LOCK_PATH", "/tmp/gpu-task.lock"))
        self._file: IO[str] | None = None
        self._owned = False  # a plain file of this user's, which the lock may write its holder to
        # DDP ranks started beside the first process belong to its job: only local rank 0 queues.
        is_first_rank = int(os.environ.get("LOCAL_RANK", "0")) == 0
        self.enabled = is_first_rank and (without_gpu or bool(visible_gpus()))

    def __enter__(self) -> GpuLock:
        if not self.enabled:
            return self
        self._file = self._open()  # held open for the lock's lifetime
        try:
            fcntl.flock(self._file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = self._file.read(200).strip() or "another process"
            print(f"GPU lock {self.path} is held by {holder}; waiting for it...", file=sys.stderr)
            started = time.monotonic()
            try:
                fcntl.flock(self._file, fcntl.LOCK_EX)
            except KeyboardInterrupt:
                print("stopped while waiting for the GPU lock; nothing ran", file=sys.stderr)
                raise SystemExit(130) from None
            print(f"GPU lock acquired after {time.monotonic() - started:.0f} s", file=sys.stderr)
        if self._owned:  # who holds it, for the next job's "waiting" line
            self._file.seek(0)
            self._file.truncate()
            self._file.write(f"pid {os.getpid()}: {' '.join(sys.argv)}\n")
            self._file.flush()
        return self

    def _open(self) -> IO[str]:
        """The lock file, never through a link (whoever planted one would have the job change
        their target); a plain file this user owns is the only one ever written to."""
        flags = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC  # NONBLOCK: a FIFO must not hang open()
        try:
            try:
                descriptor, writable = os.open(self.path, flags | os.O_RDWR | os.O_CREAT, 0o666), True
            except PermissionError:  # another user's file: locking it needs only read access
                if not os.path.lexists(self.path):
                    raise  # a folder this user cannot create the file in
                descriptor, writable = os.open(self.path, flags | os.O_RDONLY), False
        except OSError as error:  # a link, a missing folder, a folder at the path
            link = error.errno == errno.ELOOP
            self._fail("it is a symbolic link, which a lock never follows" if link else error.strerror)
        info = os.fstat(descriptor)
        if not (regular := stat.S_ISREG(info.st_mode)) or info.st_nlink != 1:
            os.close(descriptor)
            self._fail("it has other hard links" if regular else "it is not a regular file")
        self._owned = writable and info.st_uid == os.geteuid()
        if self._owned:
            os.fchmod(descriptor, 0o666)  # past the umask, so other users can queue on it too
        return os.fdopen(descriptor, "r+" if writable else "r")

    def _fail(self, reason: str) -> NoReturn:
        fail(
            f"cannot use the GPU lock file {self.path}: {reason}; "
            "set GPU_LOCK_PATH to a file path every user of this machine can read"
        )

    def __exit__(self, *exc_info: object) -> None:
        if self._file is not None:
            if self._owned:
                self._file.truncate(0)
            fcntl.flock(self._file, fcntl.LOCK_UN)
            self._file.close()
            self._file = None
