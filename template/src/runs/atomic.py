"""Files written whole or not at all: beside their final name, flushed to disk and renamed
over it, so a kill or a full disk leaves the previous version, never a truncated one."""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
import re
import shutil
import socket
from collections.abc import Iterator
from pathlib import Path

import psutil


class WriteFailed(Exception):
    """A file of the run could not be written (full disk, quota, file-size limit)."""


_writes = itertools.count()  # numbers this process's writes, for their temporary names


@contextlib.contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """A temporary path for `path`'s new content, renamed over `path` when the block ends (removed
    if it fails); it keeps the suffix, for writers that pick the format from it (XGBoost)."""
    path = Path(path)
    # A name of this write's own: two writers of one file (a sweep's workers, on one machine
    # or several) must not rename or remove each other's temporary file.
    writer = f"{socket.gethostname()}-{os.getpid()}-{next(_writes)}"
    temporary = path.with_name(f".{path.name}.{writer}.partial{path.suffix}")
    try:
        with translate_write_errors(path):
            path.parent.mkdir(parents=True, exist_ok=True)
            yield temporary
            with open(temporary, "rb+") as written:
                os.fsync(written.fileno())
            os.replace(temporary, path)
    finally:
        # A disk remounted read-only refuses even this: the write's own error is the one to tell.
        with contextlib.suppress(OSError):
            temporary.unlink(missing_ok=True)
    _remove_abandoned(path)


def _remove_abandoned(path: Path) -> None:
    """Remove the temporary files of `path` that a process of this machine left behind when
    killed mid-write (kill -9): as large as the file itself, they would pile up."""
    name = re.compile(rf"\.{re.escape(path.name)}\.(.+)-(\d+)-\d+\.partial{re.escape(path.suffix)}")
    for leftover in path.parent.glob(f".{path.name}.*.partial{path.suffix}"):
        found = name.fullmatch(leftover.name)
        if found and found[1] == socket.gethostname() and not psutil.pid_exists(int(found[2])):
            leftover.unlink(missing_ok=True)


def write_text_atomic(path: Path, text: str) -> Path:
    return write_bytes_atomic(path, text.encode())


def write_bytes_atomic(path: Path, content: bytes) -> Path:
    with atomic_path(path) as temporary:
        temporary.write_bytes(content)
    return path


@contextlib.contextmanager
def translate_write_errors(path: Path) -> Iterator[None]:
    """An OSError while writing `path` becomes a WriteFailed that says how much room is left."""
    try:
        yield
    except OSError as error:
        raise _write_failed(path, error) from error


def disk_full(error: BaseException) -> WriteFailed | None:
    """A library's own write that found no room (a full disk or quota, a file-size limit),
    said as ours say it; None for any other error."""
    if isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        return _write_failed(Path(error.filename or "."), error)
    return None


def _write_failed(path: Path, error: OSError) -> WriteFailed:
    reason = error.strerror or str(error)
    return WriteFailed(f"cannot write {path}: {reason} ({_free_space(path)} free there)")


def _free_space(path: Path) -> str:
    """Free space on the disk of `path`'s nearest existing folder."""
    try:
        free = shutil.disk_usage(next(folder for folder in Path(path).parents if folder.exists())).free
    except OSError:
        return "unknown space"
    for unit in ("B", "KB", "MB"):
        if free < 1024:
            return f"{free:.0f} B" if unit == "B" else f"{free:.1f} {unit}"
        free /= 1024
    return f"{free:.1f} GB"
