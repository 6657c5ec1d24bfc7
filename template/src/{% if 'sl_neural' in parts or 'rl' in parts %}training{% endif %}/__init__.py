"""The Lightning training core: Trainer, optimizer, precision, checkpoints, step timing."""
