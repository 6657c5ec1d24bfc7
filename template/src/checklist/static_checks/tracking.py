"""Static checks of logging and tracking (LOG)."""

from __future__ import annotations

from src.checklist.layout import Project
from src.checklist.registry import TAGS, check
from src.checklist.static_checks.common import (
    callbacks_list,
    calls_anywhere,
    lightning_inits,
    main_with_config,
    parts,
    require,
)
from src.checklist.syntax import calls, constant, keyword, source

# LOG: logging and tracking


@check("LOG-1", "WandbLogger(project=..., name=cfg.name, log_model=False); W&B can be offline or off")
def wandb_logger(project: Project) -> str:
    runs = [
        call
        for _, call in calls_anywhere(project, "init")
        if keyword(call, "project") is not None and source(keyword(call, "name")).endswith(".name")
    ]
    require(runs, "no wandb.init(project=..., name=cfg.name) anywhere")
    require(
        all(keyword(call, "mode") is not None for call in runs),
        "wandb.init(project=..., name=cfg.name) has no mode=: W&B cannot be offline or off",
    )
    if project.kinds & TAGS["nn"]:
        loggers = [call for _, call in calls_anywhere(project, "WandbLogger")]
        require(loggers, "no WandbLogger(...) anywhere")
        require(
            constant(keyword(loggers[0], "log_model"), True) is False, "WandbLogger log_model= is not False"
        )
    for part in project.parts:
        wanted = "setup_run" if part.kind == "sl_tree" else "create_wandb_logger"
        require(
            calls(main_with_config(project, part), wanted),
            f"{part.name}/train.py: main_with_config() never calls {wanted}()",
        )
    return "wandb.init(project, name=cfg.name, mode=...) handed to WandbLogger(log_model=False)"


@check("LOG-2", "hyperparameters reach W&B through save_hyperparameters()", "nn")
def hyperparameters(project: Project) -> str:
    for part, init in lightning_inits(project):
        require(
            calls(init, "save_hyperparameters"),
            f"{part.name}/model.py: __init__ never calls self.save_hyperparameters()",
        )
    return "save_hyperparameters() in every LightningModule.__init__"


@check("LOG-3", 'self.log("train_loss", on_step=True, on_epoch=True, prog_bar=True)', "nn")
def train_loss_logged(project: Project) -> str:
    for part in parts(project, "nn"):
        logs = [
            c
            for c in calls(project.tree(f"{part.name}/model.py"), "log")
            if c.args and constant(c.args[0]) == "train_loss"
        ]
        require(logs, f'{part.name}/model.py: no self.log("train_loss", ...)')
        flags = {name: constant(keyword(logs[0], name)) for name in ("on_step", "on_epoch", "prog_bar")}
        require(
            all(value is True for value in flags.values()),
            f"{part.name}/model.py: train_loss logged with {flags}",
        )
    return "train_loss logged per step and epoch, on the progress bar"


CALLBACK_NAMESPACES = {
    "TrackingCallback": "tracking/",
    "BatchMetricsCallback": "batch/",
    "SystemMetricsCallback": "system/",
    "TimingCallback": "timing/",
}


@check("LOG-4", "callbacks log the batch/, timing/, tracking/ and system/ namespaces")
def namespaces(project: Project) -> str:
    for kind in sorted(project.kinds):
        where, node = callbacks_list(project, kind)
        wanted = ["RoundMetrics"] if kind == "sl_tree" else list(CALLBACK_NAMESPACES)
        missing = [name for name in wanted if not calls(node, name)]
        require(not missing, f"{where} lacks {', '.join(missing)}")
    return "the metric callbacks are in every callbacks list"


@check("LOG-5", "total_params, trainable_params, sample counts and gpu_name logged at start")
def start_of_run(project: Project) -> str:
    if project.kinds & TAGS["nn"]:
        where, node = callbacks_list(project, "sl_neural")
        require(calls(node, "RunInfoCallback"), f"{where} lacks RunInfoCallback")
    for part in project.parts_of({"sl_tree"}):
        require(
            calls(main_with_config(project, part), "log_start_of_run"),
            f"{part.name}/train.py never calls log_start_of_run()",
        )
    return "start-of-run facts logged by every part"


@check("LOG-6", "the model is logged as a W&B artifact once, at the end")
def model_artifact(project: Project) -> str:
    for part in project.parts:
        body = main_with_config(project, part)
        logged = calls(body, "log_model_artifact")
        require(
            len(logged) == 1,
            f"{part.name}/train.py: log_model_artifact() called {len(logged)} times in main_with_config",
        )
        saved = calls(body, "save_model")
        require(
            saved and saved[0].lineno < logged[0].lineno,
            f"{part.name}/train.py: the artifact is logged before save_model()",
        )
    return "log_model_artifact() once per run, after save_model()"
