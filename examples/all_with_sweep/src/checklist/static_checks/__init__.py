"""Static checks: this project's code, read with `ast`, never imported (no torch needed).
Each module holds one area of the checklist; importing this package registers them all."""

from src.checklist.static_checks import config, lightning, operations, rl, sweep, tracking

__all__ = ["config", "lightning", "operations", "rl", "sweep", "tracking"]
