"""Supervised neural part: an MLP classifier trained with Lightning."""
