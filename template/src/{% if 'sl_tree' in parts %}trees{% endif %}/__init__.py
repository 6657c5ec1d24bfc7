"""What only the XGBoost parts need: callbacks between boosting rounds, and plots."""
