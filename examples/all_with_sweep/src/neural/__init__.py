"""What the supervised neural parts share: a table served to Lightning, and a network trained in it."""
