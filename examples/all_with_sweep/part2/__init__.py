"""Supervised tree part: gradient-boosted trees on XGBoost's native API."""
