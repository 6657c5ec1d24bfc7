"""Errors of the input, not of the code: `fail` ends a command at once with one line and exit
status 2; the errors below, raised while a run goes on, end it the same way
(src.cli.bad_input_message). Apart from the checks that raise them, so that the command line
knows them without loading pandas or Lightning."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from typing import NoReturn


def fail(message: str) -> NoReturn:
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(2)


@contextlib.contextmanager
def reader_may_stop_reading() -> Iterator[None]:
    """`--help | head`: the reader has read what it wanted, and the command ends quietly."""
    try:
        yield
    except BrokenPipeError:
        # Python flushes stdout again as it exits: into nothing, not into a second BrokenPipeError.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise SystemExit(128 + 13) from None  # as a command that SIGPIPE ends: the shell's status


class DataValidationError(ValueError):
    """The input data does not match its schema; the message names each bad column."""


class TrainingDiverged(ArithmeticError):
    """The training loss or the monitored metric became NaN or infinite."""
