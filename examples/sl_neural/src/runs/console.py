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
_open_logs: list[TextIO] = []  # the console.log of each tee_console block, innermost last


class _Tee:
    """A text stream that writes to the terminal and to the log file. The terminal comes
    first: when the log cannot be written (a full disk), the terminal still gets
    everything, the error that ends the run included."""

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
        # Progress-bar redraws (carriage returns) and terminal control sequences (colour,
        # cursor) stay on the terminal only.
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
    """sys.stdout or sys.stderr as it is at each write, for logging's handlers. A progress
    bar replaces them while it draws, to print what is written above itself; a handler
    holding the stream of before would print into the bar, which then draws again below."""

    def __init__(self, name: str) -> None:
        self.name = name

    def write(self, text: str) -> int:
        return getattr(sys, self.name).write(text)

    def flush(self) -> None:
        getattr(sys, self.name).flush()


def write_to_log_only(text: str) -> None:
    """Write `text` to console.log alone, for what the terminal already shows in its own
    form (a line a progress bar printed)."""
    if _open_logs:  # found here, not through sys.stdout, which W&B wraps in its own stream
        write_log(_open_logs[-1], text)


def write_log(log_file: TextIO, text: str) -> OSError | None:
    """Write to console.log while it can be written. The first write that fails closes
    it (later ones are skipped) and returns its error."""
    if log_file.closed:
        return None
    try:
        log_file.write(text)
    except OSError as error:
        _close_quietly(log_file)
        return error
    return None


@contextlib.contextmanager
def tee_console(path: Path) -> Iterator[TextIO]:
    """Copy stdout, stderr and logging output into `path` until the block ends;
    yields the log file, for what belongs in the log but not on the terminal."""
    saved = sys.stdout, sys.stderr
    log_file = open(path, "a", buffering=1, encoding="utf-8")  # noqa: SIM115 (closed below even if a flush fails)
    with contextlib.ExitStack() as closing:
        closing.callback(_close_quietly, log_file)
        sys.stdout, sys.stderr = _Tee(saved[0], log_file), _Tee(saved[1], log_file)
        _open_logs.append(log_file)
        closing.callback(_open_logs.remove, log_file)
        # Handlers made earlier (Lightning's among them) hold the old streams.
        handlers = {handler: handler.stream for handler in _stream_handlers(saved)}
        for handler, stream in handlers.items():
            handler.setStream(_Current("stderr" if stream is saved[1] else "stdout"))
        try:
            yield log_file
        finally:
            for handler, stream in handlers.items():
                handler.setStream(stream)
            sys.stdout, sys.stderr = saved


def _close_quietly(log_file: TextIO) -> None:
    with contextlib.suppress(OSError):
        log_file.close()


def _stream_handlers(streams: tuple[TextIO, TextIO]) -> set[logging.StreamHandler]:
    loggers = [logging.getLogger(), *logging.Logger.manager.loggerDict.values()]
    return {
        handler
        for logger in loggers
        for handler in getattr(logger, "handlers", ())
        if isinstance(handler, logging.StreamHandler) and any(handler.stream is stream for stream in streams)
    }
