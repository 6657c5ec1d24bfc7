"""Set once, when this project was rendered from the template."""

PROJECT_SLUG = "ml-pipeline"  # the distribution's name and the W&B project
WANDB_ENTITY = ""  # empty: your default W&B entity
