"""W&B for every part (LOG-1, LOG-6): works online, offline with no account, or off.

`--wandb-mode auto` (the default) logs online when an API key is configured
(WANDB_API_KEY or `wandb login`) and offline otherwise; WANDB_MODE, when set, wins
over "auto". W&B is off for a run whose --loggers leaves out wandb. A run's W&B files
live in its run directory.
"""

from __future__ import annotations

import json
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


def resolve_mode(requested: str) -> str:
    """The W&B mode a config's wandb_mode stands for: online, offline or disabled."""
    if requested != "auto":
        return requested
    from_env = os.environ.get("WANDB_MODE")
    if from_env:
        return {"dryrun": "offline", "run": "online"}.get(from_env, from_env)
    return "online" if api_key_configured() else "offline"


def chosen_wandb_mode(cfg: BaseConfig) -> str:
    """The W&B mode of a run: disabled when its loggers leave out wandb, else what
    resolve_mode() makes of its wandb_mode."""
    return resolve_mode(cfg.wandb_mode) if "wandb" in cfg.loggers else "disabled"


def setup_run(cfg: BaseConfig, run_dir: Path) -> Any | None:
    """Start (or join) the W&B run for this training run; None when W&B is off.

    Inside a W&B sweep the agent has already started the run: it is reused and
    given the full config instead of a second wandb.init() (SWP-3).
    """
    if (run := current_run()) is not None and run.sweep_id:
        run.config.update(_config(cfg, run_dir), allow_val_change=True)
        return run
    mode = chosen_wandb_mode(cfg)
    if mode == "disabled" or not is_rank_zero():
        return None
    import wandb  # here: a run with W&B off never waits for it to load

    try:
        run = wandb.init(
            project=cfg.wandb_project or None,
            entity=cfg.wandb_entity or None,
            name=cfg.name,
            id=wandb_run_id(run_dir),
            resume="allow",
            dir=run_dir,
            config=_config(cfg, run_dir),
            mode=mode,
            settings=quiet_settings(),
        )
    except wandb.errors.Error as error:  # a key W&B refuses, a server it cannot reach
        said = first_line(error)
        raise ConfigError(
            f"wandb_mode {cfg.wandb_mode}: W&B said: {said}; use --wandb-mode offline to sync later"
        ) from None
    print(f"W&B: logging offline to {run.sync_dir}" if run.offline else f"W&B: {run.url}")
    return run


def quiet_settings() -> Any:
    """W&B's settings for a run: none of the run's own lines (its banner, and the history
    and summary tables at its end, some 25 lines); W&B's warnings still show. setup_run
    and finish_run say where the run is, in a line each."""
    import wandb

    return wandb.Settings(silent=True)


def wandb_run_id(run_dir: Path) -> str:
    """The W&B id of a training run, the same in every session so that a resumed run
    continues its W&B run (RES-1): the id run.json records, else the run's part and the
    run directory's name (two parts' runs started in the same second differ)."""
    record = run_record(run_dir)
    if recorded := record.get("wandb_id"):
        return str(recorded)
    return re.sub(r"[^A-Za-z0-9_-]", "-", "-".join(filter(None, (record.get("part"), run_dir.name))))


def _config(cfg: BaseConfig, run_dir: Path) -> dict[str, Any]:
    """The config, and what produced the run as run.json records it (code, packages,
    machine, data files)."""
    try:
        recorded = json.loads((run_dir / "run.json").read_text()).get("provenance", {})
    except (OSError, ValueError):  # a DDP rank that started before rank zero wrote it
        recorded = {}
    return {**cfg.to_dict(), "provenance": recorded}


def finish_run() -> None:
    """End the W&B run at the end of training (MAIN-1), unless it is a sweep agent's:
    the agent records the trial's score in it first, then ends it (SWP-3)."""
    if (run := current_run()) is not None and not run.sweep_id:
        done = f"to upload this offline run: wandb sync {run.sync_dir}" if run.offline else str(run.url)
        run.finish()
        print(f"W&B: {done}")


def create_wandb_logger(cfg: BaseConfig, run_dir: Path) -> WandbLogger | None:
    """LOG-1: the WandbLogger handed to the Trainer, or None when W&B is off."""
    if chosen_wandb_mode(cfg) == "disabled":
        return None
    # Here, not at the top: only the Lightning parts make one, and the tree parts never load Lightning.
    from lightning.pytorch.loggers import WandbLogger

    # The run, named and placed in its project by setup_run(); the artifact is logged by
    # log_model_artifact() once at the end (LOG-6), so the logger uploads no checkpoints.
    return WandbLogger(experiment=setup_run(cfg, run_dir), log_model=False)


def log_model_artifact(path: Path | None, name: str, metadata: dict[str, Any] | None = None) -> bool:
    """LOG-6: log the trained model once, at the end of the run. False when W&B is off
    (or on a DDP rank other than zero)."""
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
