"""Supervised neural part: an MLP classifier or regressor of table rows, trained with Lightning."""
