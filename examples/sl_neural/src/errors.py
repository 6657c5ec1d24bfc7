"""Errors of the input, not of the code, raised while a run goes on: the command ends with their
one-line message and exit status 2 (src.cli.bad_input_message). Apart from the checks that raise
them, so that the command line knows them without loading pandas or Lightning."""

from __future__ import annotations


class DataValidationError(ValueError):
    """The input data does not match its schema; the message names each bad column."""


class TrainingDiverged(ArithmeticError):
    """The training loss or the monitored metric became NaN or infinite."""
