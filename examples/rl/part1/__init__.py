"""Reinforcement-learning part: PPO on TorchRL, driven by Lightning."""

import os

# RL-8: one math thread per process, set before numpy and torch are imported. Here,
# the package's first lines run before any of its modules (train, sweep);
# with env_workers worker processes on the same cores, more threads only contend.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
