"""Supervised neural part: an MLP classifier trained with Lightning."""

KIND = "sl_neural"
