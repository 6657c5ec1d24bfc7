"""OPS-1: one GPU job at a time on a shared machine; the others queue.

    if __name__ == "__main__":
        with GpuLock():
            main()

The lock is flock(2) on /tmp/gpu-task.lock (or $GPU_LOCK_PATH). The kernel
releases it when the process exits, however it exits, so a crash never leaves a
stale lock behind. A machine without a CUDA device has nothing to queue for, so
there the lock is not taken. The file is created writable by every user, and one
that another user created read-only is still locked (flock needs no write access):
every user of the machine queues on the same lock. Since the folder is shared, a
link, a FIFO or a file with other hard links at the path is refused, and the job
writes its holder line only into a plain file of its own user's.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import sys
import time
from pathlib import Path
from typing import IO, NoReturn

from src.ops.hardware import visible_gpus

DEFAULT_LOCK_PATH = "/tmp/gpu-task.lock"


class GpuLock:
    def __init__(self, path: str | os.PathLike[str] | None = None, *, without_gpu: bool = False) -> None:
        """`without_gpu=True` takes the lock on a machine without a CUDA device too."""
        self.path = Path(path or os.environ.get("GPU_LOCK_PATH", DEFAULT_LOCK_PATH))
        self._file: IO[str] | None = None
        self._owned = False  # a plain file of this user's, which the lock may write to
        # DDP ranks that Lightning or torchrun start beside the first process belong
        # to the same job: only local rank 0 queues for the machine.
        is_first_rank = int(os.environ.get("LOCAL_RANK", "0")) == 0
        self.enabled = is_first_rank and (without_gpu or bool(visible_gpus()))

    def __enter__(self) -> GpuLock:
        if not self.enabled:
            return self
        self._file = self._open()  # held open for the lock's lifetime
        try:
            fcntl.flock(self._file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._file.seek(0)
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
        """The lock file, never through a link: the folder is writable by every user, so a
        link or a hard link planted at the path would make the job change someone else's
        file. Only a plain file this user owns is ever written to."""
        no_follow = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC  # NONBLOCK: a FIFO must not hang open()
        try:
            descriptor = os.open(self.path, no_follow | os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o666)
            os.fchmod(descriptor, 0o666)  # past the umask, so other users can queue on it too
        except FileExistsError:
            descriptor = self._open_existing(no_follow)
        except OSError as error:  # a missing folder, a folder at the path
            self._fail(error.strerror or str(error))
        info = os.fstat(descriptor)
        regular = stat.S_ISREG(info.st_mode)
        if not regular or info.st_nlink != 1:
            os.close(descriptor)
            self._fail("it has other hard links" if regular else "it is not a regular file")
        writable = fcntl.fcntl(descriptor, fcntl.F_GETFL) & os.O_ACCMODE == os.O_RDWR
        self._owned = writable and info.st_uid == os.geteuid()
        return os.fdopen(descriptor, "r+" if self._owned else "r")

    def _open_existing(self, no_follow: int) -> int:
        try:
            return os.open(self.path, no_follow | os.O_RDWR)
        except PermissionError:  # another user's file: locking it needs only read access
            try:
                return os.open(self.path, no_follow | os.O_RDONLY)
            except OSError as error:
                self._fail(error.strerror or str(error))
        except OSError as error:
            if error.errno == errno.ELOOP:
                self._fail("it is a symbolic link, which a lock never follows")
            self._fail(error.strerror or str(error))

    def _fail(self, reason: str) -> NoReturn:
        print(
            f"error: cannot use the GPU lock file {self.path}: {reason}; "
            "set GPU_LOCK_PATH to a file path every user of this machine can read",
            file=sys.stderr,
        )
        raise SystemExit(2)

    def __exit__(self, *exc_info: object) -> None:
        if self._file is not None:
            if self._owned:
                self._file.truncate(0)
            fcntl.flock(self._file, fcntl.LOCK_UN)
            self._file.close()
            self._file = None
