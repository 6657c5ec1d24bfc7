"""console.log: everything the run prints, also kept in its run directory (OUT-2)."""

from __future__ import annotations

import contextlib
import logging
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

TERMINAL_CONTROL = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")  # ANSI escape sequences


def metric_text(value: float) -> str:
    """A metric as a line shows it: a count in full (28191, not 2.819e+04), else 4 digits."""
    value = float(value)
    return str(int(value)) if value.is_integer() and abs(value) < 1e15 else f"{value:.4g}"


_open_logs: list[TextIO] = []  # the console.log of each tee_console block, innermost last


class _Tee:
    """Writes to the terminal, then to the log file: when the log cannot be written (a full
    disk), the terminal still gets everything, the error that ends the run included."""

    def __init__(self, terminal: TextIO, log_file: TextIO) -> None:
        self.original = terminal
        self.terminal: TextIO | None = terminal  # None once it cannot be written
        self.log_file = log_file

    def write(self, text: str) -> int:
        if self.terminal is not None:
            try:
                self.terminal.write(text)
            except OSError:  # the terminal closed (SIGHUP, a lost ssh session): log on alone
                self.terminal = None
        # Progress-bar redraws (carriage returns) and colour or cursor codes stay on the terminal.
        logged = TERMINAL_CONTROL.sub("", text)
        if logged and "\r" not in logged and (error := write_log(self.log_file, logged)) and self.terminal:
            self.terminal.write(
                f"warning: {self.log_file.name} cannot be written ({error.strerror}); "
                "output goes to the terminal only\n"
            )
        return len(text)

    def flush(self) -> None:
        if self.terminal is not None:
            with contextlib.suppress(OSError):
                self.terminal.flush()
        with contextlib.suppress(OSError, ValueError):
            self.log_file.flush()

    def __getattr__(self, name: str):  # isatty(), fileno(), encoding ...
        return getattr(self.original, name)


class _Current:
    """sys.stdout or sys.stderr as it is at each write, for logging's handlers: a progress bar
    replaces them while it draws, to print above itself, and a handler holding the stream of
    before would print into the bar."""

    def __init__(self, name: str) -> None:
        self.name = name

    def write(self, text: str) -> int:
        return getattr(sys, self.name).write(text)

    def flush(self) -> None:
        getattr(sys, self.name).flush()


def write_to_log_only(text: str) -> None:
    """Write to console.log alone what the terminal shows in its own form (a progress bar's line)."""
    if _open_logs:  # found here, not through sys.stdout, which W&B wraps in its own stream
        write_log(_open_logs[-1], text)


def write_log(log_file: TextIO, text: str) -> OSError | None:
    """Write to console.log while it can be written; the first write that fails closes it
    and returns its error."""
    if log_file.closed:
        return None
    try:
        log_file.write(text)
    except OSError as error:
        with contextlib.suppress(OSError):
            log_file.close()
        return error
    return None


@contextlib.contextmanager
def tee_console(path: Path) -> Iterator[TextIO]:
    """Copy stdout, stderr and logging output into `path` until the block ends; yields the
    log file, for what belongs in the log but not on the terminal."""
    saved = sys.stdout, sys.stderr
    # Handlers made earlier (Lightning's among them) hold the old streams.
    loggers = [logging.getLogger(), *logging.Logger.manager.loggerDict.values()]
    handlers = {
        handler: handler.stream
        for logger in loggers
        for handler in getattr(logger, "handlers", ())
        if isinstance(handler, logging.StreamHandler) and handler.stream in saved
    }
    log_file = open(path, "a", buffering=1, encoding="utf-8")  # noqa: SIM115 (closed below even if a flush fails)
    try:
        sys.stdout, sys.stderr = _Tee(saved[0], log_file), _Tee(saved[1], log_file)
        _open_logs.append(log_file)
        for handler, stream in handlers.items():
            handler.setStream(_Current("stderr" if stream is saved[1] else "stdout"))
        yield log_file
    finally:
        for handler, stream in handlers.items():
            handler.setStream(stream)
        sys.stdout, sys.stderr = saved
        _open_logs.remove(log_file)
        with contextlib.suppress(OSError):
            log_file.close()
