"""A training run's directory and what it writes: status, console log, metrics."""
