"""What the reinforcement-learning parts share."""
