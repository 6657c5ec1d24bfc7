"""W&B for every part (LOG-1, LOG-6), its files in the run directory. wandb_mode auto logs online
with an API key (WANDB_API_KEY or `wandb login`), else offline, and WANDB_MODE wins over it;
W&B is off when --loggers leaves out wandb."""

from __future__ import annotations

import netrc
import os
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from src.config import BaseConfig, ConfigError, first_line
from src.runs.directory import run_record
from src.runs.launch import is_rank_zero

if TYPE_CHECKING:
    from lightning.pytorch.loggers import WandbLogger


def chosen_wandb_mode(cfg: BaseConfig) -> str:
    """The W&B mode of a run: online, offline or disabled."""
    if "wandb" not in cfg.loggers:
        return "disabled"
    if cfg.wandb_mode != "auto":
        return cfg.wandb_mode
    if from_env := os.environ.get("WANDB_MODE"):
        return {"dryrun": "offline", "run": "online"}.get(from_env, from_env)
    return "online" if api_key_configured() else "offline"


def setup_run(cfg: BaseConfig, run_dir: Path) -> Any | None:
    """The W&B run of this training run, started (or resumed); None when W&B is off. A W&B sweep
    agent has started it already: it is given the full config instead (SWP-3)."""
    if (run := current_run()) is not None and run.sweep_id:
        run.config.update(_config(cfg, run_dir), allow_val_change=True)
        return run
    mode = chosen_wandb_mode(cfg)
    if mode == "disabled" or not is_rank_zero():
        return None
    import wandb  # here: a run with W&B off never waits for it to load

    # The same id in every session of a run, so that a resume continues its W&B run (RES-1):
    # the one run.json records, else the part and the run directory's name.
    record = run_record(run_dir)
    name = "-".join(filter(None, (record.get("part"), run_dir.name)))
    run_id = str(record.get("wandb_id") or re.sub(r"[^A-Za-z0-9_-]", "-", name))
    try:
        run = wandb.init(
            project=cfg.wandb_project or None,
            entity=cfg.wandb_entity or None,
            name=cfg.name,
            id=run_id,
            resume="allow",
            dir=run_dir,
            config=_config(cfg, run_dir),
            mode=mode,
            settings=quiet_settings(),
        )
    except wandb.errors.Error as error:  # a key W&B refuses, a server it cannot reach
        raise ConfigError(
            f"wandb_mode {cfg.wandb_mode}: W&B said: {first_line(error)}; "
            "use --wandb-mode offline to sync later"
        ) from None
    print(f"W&B: logging offline to {run.sync_dir}" if run.offline else f"W&B: {run.url}")
    return run


def quiet_settings() -> Any:
    """W&B without its banner and closing tables; its warnings still show."""
    import wandb

    return wandb.Settings(silent=True)


def _config(cfg: BaseConfig, run_dir: Path) -> dict[str, Any]:
    """The config, and what produced the run as run.json records it (code, packages, machine, data)."""
    return {**cfg.to_dict(), "provenance": run_record(run_dir).get("provenance", {})}


def finish_run() -> None:
    """End the W&B run (MAIN-1), unless a sweep agent's: the agent records its score first (SWP-3)."""
    if (run := current_run()) is not None and not run.sweep_id:
        done = f"to upload this offline run: wandb sync {run.sync_dir}" if run.offline else str(run.url)
        run.finish()
        print(f"W&B: {done}")


def create_wandb_logger(cfg: BaseConfig, run_dir: Path) -> WandbLogger | None:
    """LOG-1: the Trainer's WandbLogger, or None when W&B is off. It uploads no checkpoints:
    log_model_artifact() logs the model once, at the end (LOG-6)."""
    if chosen_wandb_mode(cfg) == "disabled":
        return None
    from lightning.pytorch.loggers import WandbLogger  # here: the tree parts never load Lightning

    return WandbLogger(experiment=setup_run(cfg, run_dir), log_model=False)


def log_model_artifact(path: Path | None, name: str, metadata: dict[str, Any] | None = None) -> bool:
    """LOG-6: log the trained model once, at the end of the run; False where W&B is off or off rank zero."""
    if (run := current_run()) is None or path is None:
        return False
    import wandb

    artifact = wandb.Artifact(re.sub(r"[^A-Za-z0-9_.-]", "-", name), type="model", metadata=metadata)
    artifact.add_file(str(path))
    run.log_artifact(artifact)
    return True


def current_run() -> Any | None:
    """The W&B run of this process, if any: none before wandb is imported."""
    wandb = sys.modules.get("wandb")
    return None if wandb is None else wandb.run


def api_key_configured() -> bool:
    if os.environ.get("WANDB_API_KEY"):
        return True
    host = urlparse(os.environ.get("WANDB_BASE_URL", "https://api.wandb.ai")).hostname
    try:
        return netrc.netrc().authenticators(host or "") is not None
    except (FileNotFoundError, netrc.NetrcParseError):
        return False
