"""Run reports (`python -m src.report`); importing this package loads no plotting library."""
