"""Errors of the input, not of the code: `fail` ends a command at once with one line and exit
status 2; the errors below, raised while a run goes on, end it the same way
(src.cli.bad_input_message). Apart from the checks that raise them, so that the command line
knows them without loading pandas or Lightning."""

from __future__ import annotations

import sys
from typing import NoReturn


def fail(message: str) -> NoReturn:
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(2)


class DataValidationError(ValueError):
    """The input data does not match its schema; the message names each bad column."""


class TrainingDiverged(ArithmeticError):
    """The training loss or the monitored metric became NaN or infinite."""
