"""Reinforcement-learning part: PPO on TorchRL, driven by Lightning."""

KIND = "rl"
