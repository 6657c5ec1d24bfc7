"""The W&B engine: a W&B sweep's controller samples, and this process is one of its agents."""

from __future__ import annotations

import os

import wandb

from src.config import BaseConfig, ConfigError, first_line
from src.sweep.runner import Sweep
from src.sweep.spec import SweepSpec
from src.wandb_utils import api_key_configured, quiet_settings


def run_wandb(sweep: Sweep, trials: int, sweep_id: str) -> None:
    def agent_trial() -> None:
        if sweep.hours_left() <= 0:
            print("sweep: --max-hours reached, no new trial")
            return
        # The agent's run, with the sampled values; setup_run() joins it (SWP-3).
        run = wandb.init(settings=quiet_settings())
        trial = sweep.run_trial(dict(run.config))
        if trial.value is not None:
            run.summary[sweep.spec.metric] = trial.value  # what the sweep's controller optimizes
        wandb.finish(exit_code=0 if trial.status in ("finished", "cut short") else 1)

    try:
        wandb.agent(sweep_id, function=agent_trial, count=trials)
    except wandb.errors.Error as error:  # CommError, UsageError, AuthenticationError
        raise ConfigError(_wandb_needed(f"W&B said: {first_line(error)}")) from None


def create_wandb_sweep(spec: SweepSpec, base: BaseConfig) -> str:
    """A new W&B sweep of this space; its id, for more agents to join."""
    try:
        sweep_id = wandb.sweep(
            {
                "method": spec.method,
                "metric": {"name": spec.metric, "goal": spec.goal},
                "parameters": spec.space,
            },
            project=base.wandb_project or None,
            entity=base.wandb_entity or None,
        )
    except wandb.errors.Error as error:  # CommError, UsageError, AuthenticationError
        raise ConfigError(_wandb_needed(f"W&B said: {first_line(error)}")) from None
    print(f"W&B sweep {sweep_id}: start more agents with --engine wandb --sweep-id {sweep_id}")
    return sweep_id


def require_wandb_login(cfg: BaseConfig) -> None:
    """A W&B sweep needs a W&B server: say so in one line before wandb.sweep() or
    wandb.agent() tries to reach none."""
    env_mode = os.environ.get("WANDB_MODE", "")
    if "wandb" not in cfg.loggers:
        found = f"--loggers is {' '.join(cfg.loggers)}, without wandb"
    elif cfg.wandb_mode in ("offline", "disabled"):
        found = f"--wandb-mode is {cfg.wandb_mode}"
    elif cfg.wandb_mode == "auto" and env_mode in ("offline", "dryrun", "disabled"):
        found = f"WANDB_MODE is {env_mode}"
    elif not api_key_configured():
        found = "no W&B API key is configured"
    else:
        return
    raise ConfigError(_wandb_needed(found))


def _wandb_needed(found: str) -> str:
    return (
        f"--engine wandb: {found}; a W&B sweep needs a W&B server and login (`wandb login` or "
        "WANDB_API_KEY). --engine local runs the same sweep without one"
    )
