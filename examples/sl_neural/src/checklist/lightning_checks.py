"""Checks of the Lightning parts (nn), found by their Lightning base classes wherever they live."""

from __future__ import annotations

import ast
import math
import re
from collections import Counter
from collections.abc import Callable
from functools import partial
from itertools import pairwise
from typing import Any

from src.checklist.code_checks import equals, given, gives, holds, makes_call, mentions, never_uses
from src.checklist.project import (
    Part,
    Project,
    calls,
    constant,
    constants,
    fields,
    in_order,
    keyword,
    name_of,
    names,
    of_type,
    source,
    top_level_names,
)
from src.checklist.registry import Failed, Skipped, check, each_part, lacks, require, rules
from src.checklist.run_checks import RunDir

STEPS = ("__init__", "forward", "training_step", "validation_step", "configure_optimizers")
TIMED = ("on_train_batch_start", "on_train_batch_end", "on_validation_start", "on_validation_end")
ORDER = ("seed_everything", "LightningDataModule", "LightningModule", "WandbLogger", "Trainer", "fit", "test")
ORDER += ("finish",)


def module_methods(project: Project, part: Part) -> tuple[str, dict[str, ast.FunctionDef]]:
    """The part's LightningModule and its methods, inherited ones included."""
    cls = project.the_class("LightningModule", part)
    return cls.name, project.methods(cls, part)


def steps_its_own_optimizers(project: Project, part: Part) -> bool:
    """Whether the part's LightningModule sets automatic_optimization = False: Lightning then
    neither accumulates nor clips its gradients."""
    if (init := module_methods(project, part)[1].get("__init__")) is None:
        return False
    assigned = [
        n for n in of_type(init, ast.Assign) if "self.automatic_optimization" in map(source, n.targets)
    ]
    return any(constant(n.value) is False for n in assigned)


@check("CFG-5", "num_epochs is effectively unlimited; early stopping ends training", "nn")
def unlimited_epochs(project: Project) -> str:
    classes = [c for path, c in project.find(ast.ClassDef) if path.startswith("src/")]
    defaults = [constant(fields(c)["num_epochs"]) for c in classes if "num_epochs" in fields(c)]
    require(defaults, "no config in src/ has a num_epochs field")
    unlimited = all(isinstance(d, int) and d >= 1000 for d in defaults)
    require(unlimited, f"num_epochs defaults to {defaults}, want >= 1000")
    passed = project.passes("max_epochs", None, mentions("num_epochs"))
    require(passed, "no Trainer(max_epochs=cfg.num_epochs)")
    return f"num_epochs defaults to {defaults[0]}, passed as max_epochs"


@each_part("LIT-1", "the LightningModule: hyperparameters, forward, logging steps, optimizers", "nn")
def lightning_contract(project: Project, part: Part) -> None:
    name, found = module_methods(project, part)
    lacks(name, STEPS, found)
    saves = calls(found["__init__"], "save_hyperparameters")
    require(saves, f"{name}.__init__ never saves its hyperparameters")
    for step in ("training_step", "validation_step"):
        require(project.reaches(found[step], {"log", "log_dict"}, part), f"{name}.{step} logs nothing")


@each_part("LIT-2", "the LightningDataModule: setup(stage) and the three dataloaders", "nn")
def datamodule_contract(project: Project, part: Part) -> None:
    cls = project.the_class("LightningDataModule", part)
    wanted = ["train_dataloader", "val_dataloader", "test_dataloader"]
    wanted += ["setup"] if part.kind == "sl_neural" else []  # RL builds its collector in train_dataloader
    lacks(cls.name, wanted, project.methods(cls, part))


@each_part("LIT-4", "AdamW(fused=...) from configure_optimizers; clipping through the Trainer", "nn")
def optimizer(project: Project, part: Part) -> str | None:
    configure = module_methods(project, part)[1].get("configure_optimizers")
    require(configure and project.reaches(configure, "AdamW", part), "configure_optimizers() makes no AdamW")
    project.call_with("AdamW", part, fused=given)
    if steps_its_own_optimizers(project, part):
        return (
            "AdamW(fused=...) from configure_optimizers; the module steps it itself and clips by hand (RL-13)"
        )
    # 0 and None do not clip; an expression (the config's field) may.
    clipped = project.passes("gradient_clip_val", part, lambda v: constant(v, 1))
    require(clipped, "no Trainer(gradient_clip_val=...): not clipping through the Trainer")
    return None


@each_part("LOG-1", "WandbLogger(log_model=False), reached from main_with_config()", "nn")
def wandb_logger(project: Project, part: Part) -> None:
    reached = project.reaches(project.main_with_config(part), "WandbLogger", part)
    require(reached, "main_with_config() never reaches WandbLogger()")
    for path, logger in project.calls("WandbLogger", part):
        off = constant(keyword(logger, "log_model"), True) is False
        require(off, f"{path}: WandbLogger log_model= is not False")


@each_part("LOG-3", 'self.log("train_loss", on_step=True, on_epoch=True, prog_bar=True)', "nn")
def train_loss_logged(project: Project, part: Part) -> None:
    logs = [c for _, c in project.calls("log", part) if c.args and constant(c.args[0]) == "train_loss"]
    require(logs, 'no self.log("train_loss", ...)')
    flags = {name: constant(keyword(logs[0], name)) for name in ("on_step", "on_epoch", "prog_bar")}
    require(all(v is True for v in flags.values()), f"train_loss logged with {flags}")


@each_part("PRF-2", "a callback in use with on_train_batch_start/end and on_validation_start/end", "nn")
def timing_callback(project: Project, part: Part) -> None:
    found = any(set(TIMED) <= set(hooks) for hooks in project.in_use("Callback", part))
    require(found, f"no callback in use has {', '.join(TIMED)}")


@each_part("PRC-1", 'bf16-mixed, never fp16: no GradScaler, no "16-mixed"', "nn")
def bf16(project: Project, part: Part) -> None:
    require(project.passes("precision", part), "no Trainer(precision=...)")
    require(project.has_constant("bf16-mixed", part), 'no "bf16-mixed"')
    for path in project.code(part):
        require("GradScaler" not in names(project.tree(path)), f"{path} uses a GradScaler")
        fp16 = {"16-mixed", "fp16"} & constants(project.tree(path))
        require(not fp16, f'{path} asks for fp16 ("16-mixed")')


@each_part("PRC-2", "no manual autocast in the part's code", "nn")
def no_autocast(project: Project, part: Part) -> None:
    own = [str(path.relative_to(project.root)) for path in sorted((project.root / part.name).glob("*.py"))]
    never_uses(project, own, "autocast", "the Trainer's precision setting does it")


@each_part("MEM-1", 'BatchSizeFinder(mode="binsearch"); no hand-written batch-size probing', "nn")
def batch_size_finder(project: Project, part: Part) -> None:
    # PPO's batch (rollout, minibatch) is no finder's to size: RL passes on no hand-written probing.
    if part.kind == "sl_neural":
        project.call_with("BatchSizeFinder", part, mode=equals("binsearch"))
    for path, handler in project.find(ast.ExceptHandler, part):
        said = any("out of memory" in str(v) for v in constants(handler))
        oom = said or "OutOfMemoryError" in source(handler.type)
        require(not oom, f"{path}:{handler.lineno}: catches out-of-memory errors: hand-written probing?")


@each_part("MEM-2", "the LightningModule sets self.batch_size, which BatchSizeFinder can change", "nn")
def batch_size_attribute(project: Project, part: Part) -> None:
    name, found = module_methods(project, part)
    assigned = {source(t) for n in of_type(found["__init__"], ast.Assign) for t in n.targets}
    require("self.batch_size" in assigned, f"{name}.__init__ does not set self.batch_size")


@each_part("MEM-3", "Trainer(accumulate_grad_batches=cfg.gradient_accumulation_steps)", "nn")
def accumulation(project: Project, part: Part) -> str | None:
    if steps_its_own_optimizers(project, part):
        return "does not apply: the module steps its optimizers itself, so Lightning cannot accumulate"
    accumulates = project.passes("accumulate_grad_batches", part, mentions("gradient_accumulation_steps"))
    require(accumulates, "no Trainer(accumulate_grad_batches=...)")
    return None


@each_part("MEM-4", "del model, trainer; cleanup_vram() empties the cache, then collects", "nn")
def cleanup(project: Project, part: Part) -> None:
    path, memory = project.function("cleanup_vram", part)
    empty, collect = calls(memory, "empty_cache"), calls(memory, "collect")
    collects = empty and any(c.lineno > empty[0].lineno for c in collect)
    require(collects, f"{path}: no gc.collect() after empty_cache()")
    main, module = project.main_with_config(part), project.the_class("LightningModule", part).name
    # The names main_with_config() gives the module and the Trainer, whatever they are.
    assigned = [n for n in of_type(main, ast.Assign) if isinstance(n.targets[0], ast.Name)]
    made = [(n.targets[0].id, n.value) for n in assigned]
    models = {name for name, value in made if project.reaches(value, module, part)}
    trainers = {name for name, value in made if project.reaches(value, "Trainer", part)}
    deletes = [(n.lineno, set(map(source, n.targets))) for n in of_type(main, ast.Delete)]
    deleted = [line for line, gone in deletes if gone & models and gone & trainers]
    cleaned = [c.lineno for c in calls(main, "cleanup_vram")]
    require(deleted and cleaned and deleted[0] < cleaned[0], "no `del model, trainer` then cleanup_vram()")


@each_part("MAIN-1", "main_with_config(): seed, data, module, logger, Trainer, fit, test(best), finish", "nn")
def main_order(project: Project, part: Part) -> None:
    every, line = in_order(project.main_with_config(part)), 0
    for step in ORDER:
        if step.startswith("Lightning"):
            found = [c.lineno for c in every if project.reaches(c, project.the_class(step, part).name, part)]
        elif step in ("fit", "test"):  # called on the Trainer itself; test on the best checkpoint
            wanted = [c for c in every if name_of(c) == step]
            found = [c.lineno for c in wanted if step == "fit" or constant(keyword(c, "ckpt_path")) == "best"]
        else:
            found = [c.lineno for c in every if project.reaches(c, step, part)]
        found = [number for number in found if number >= line]
        require(found, f"main_with_config() has no {step} after line {line}")
        line = found[0]


@each_part("CB-4", "a callback in use sets trainer.should_stop when a STOP file exists, between epochs", "nn")
def stop_file(project: Project, part: Part) -> None:
    hooks = [m.get("on_train_epoch_end") for m in project.in_use("Callback", part)]
    stopping = [h for h in hooks if h and "should_stop" in names(h)]
    stops = [h for h in stopping if project.reaches(h, {"exists", "is_file"}, part)]
    require(stops, "no callback in use stops training when a STOP file exists")


@each_part("LIT-3", "model.py exposes save_model() and load_model_from_checkpoint()", "nn")
def model_helpers(project: Project, part: Part) -> None:
    helpers = top_level_names(project.tree(f"{part.name}/model.py"))
    lacks(f"{part.name}/model.py", ("save_model", "load_model_from_checkpoint"), helpers)


@each_part("PRF-1", "Trainer(profiler=SimpleProfiler | AdvancedProfiler)", "nn")
def profiler(project: Project, part: Part) -> None:
    require(project.passes("profiler", part), "no call is given profiler=")
    used = {name for path in project.code(part) for name in names(project.tree(path))}
    require(used & {"SimpleProfiler", "AdvancedProfiler"}, "no SimpleProfiler or AdvancedProfiler")


@each_part("CB-2", "ModelCheckpoints: the best (monitored, save_top_k=1) and the last", "nn")
def checkpoints(project: Project, part: Part) -> None:
    # Monitoring "step" or "epoch" would keep the latest checkpoint, not the best.
    best = {"monitor": lambda v: v is not None and constant(v) not in ("step", "epoch"), "mode": given}
    project.call_with("ModelCheckpoint", part, **best, save_top_k=lambda v: constant(v, 1) == 1)
    saves = project.calls("ModelCheckpoint", part)
    last = [c for _, c in saves if constant(keyword(c, "save_last")) is True]
    last += [c for _, c in saves if constant(keyword(c, "filename")) == "last"]
    require(last, "no ModelCheckpoint saves last.ckpt")


fallback = (makes_call("is_bf16_supported"), holds("32-true"))
rules("PRC-3", 'is_bf16_supported() picks bf16-mixed or "32-true"', "nn", *fallback)
early_stopping = makes_call("EarlyStopping", monitor=given, mode=given, patience=mentions("patience"))
rules("CB-1", "EarlyStopping(monitor, patience=cfg.patience, mode)", "nn", early_stopping)
# None (the default) logs each scheduler at its own interval: "epoch" hides a per-step warmup.
rate_monitor = makes_call("LearningRateMonitor", logging_interval=equals(None))
rules("CB-3", "LearningRateMonitor(logging_interval=None)", "nn", rate_monitor)
rules("OUT-1", "Trainer(default_root_dir=run_dir)", "nn", gives("default_root_dir"))
saves_hyperparameters = makes_call("save_hyperparameters")
rules("LOG-2", "hyperparameters reach W&B through save_hyperparameters()", "nn", saves_hyperparameters)


@check("OUT-3", "checkpoints/best.ckpt and last.ckpt load on the CPU, weights only", "nn", mode="run")
def checkpoints_load(run: RunDir) -> None:
    import torch

    for name in ("best.ckpt", "last.ckpt"):
        path = run.path / "checkpoints" / name
        require(path.is_file(), f"checkpoints/{name} is missing")
        try:
            checkpoint = torch.load(path, map_location="cpu", weights_only=True)  # RES-3
        except Exception as error:  # noqa: BLE001 - a checkpoint that does not load is the finding
            raise Failed(f"checkpoints/{name} does not load: {str(error).splitlines()[0]}") from None
        require("state_dict" in checkpoint, f"checkpoints/{name} holds no state_dict")


@check("DDP-1", "run.json records the launch; rank zero alone writes metrics.jsonl", "nn", mode="run")
def one_writer(run: RunDir) -> str:
    recorded = {k for k, v in run.record.items() if v is not None}
    lacks("run.json", ("launcher", "world_size", "num_nodes"), recorded)
    # Several processes writing would log each metric of a step once per process.
    keys = [(e.get("step"), k) for e in run.metrics() for k in e]
    logged = Counter(key for key in keys if key[1] not in {"time", "event", "step", "epoch"})
    for (step, key), count in logged.items():
        require(count == 1, f"metrics.jsonl logs {key} at step {step} {count} times: several processes wrote")
    return f"{run.record['world_size']} process(es), started by {run.record['launcher']}"


@check("LIT-4", "AdamW decays dim >= 2 parameters only, fused unless clipping in mixed", "nn", mode="run")
def optimizer_groups(run: RunDir) -> str:
    optimizers = [o for o in run.fact("optimizers") if o.get("name") == "AdamW"]
    require(optimizers, "no AdamW among the optimizers logged at the start")
    for group in (g for o in optimizers for g in o["param_groups"]):
        dims, decay = group["param_dims"], group["weight_decay"]
        matrices = decay == 0 or not dims or min(dims) >= 2
        require(matrices, f"a param group with weight_decay {decay} holds parameters of dim {dims}")
    clips_mixed = run.config.get("gradient_clip_val") and "mixed" in str(run.fact("precision"))
    fused = {bool(o.get("fused")) for o in optimizers}
    require(fused == {not clips_mixed}, f"AdamW fused={fused.pop()} with precision {run.fact('precision')}")
    return f"decay on dim >= 2 only; fused={not clips_mixed}"


@check("PRC-1", 'the run used "bf16-mixed" or "32-true", never fp16', "nn", mode="run")
def precision_used(run: RunDir) -> str:
    precision = str(run.fact("precision"))
    require(precision in {"bf16-mixed", "32-true", "bf16-true"}, f"the run used precision {precision!r}")
    return f"precision {precision}"


def callback_active(wanted: str, run: RunDir) -> None:
    callbacks = run.fact("callbacks")
    found = any(c == wanted or c.endswith(f"({wanted})") for c in callbacks)
    require(found, f"no {wanted} in this run: {callbacks}")


CALLBACKS = {"CB-1": "EarlyStopping", "CB-2": "ModelCheckpoint", "CB-3": "LearningRateMonitor"}
for _item, _callback in CALLBACKS.items():
    check(_item, f"{_callback} was active", "nn", mode="run")(partial(callback_active, _callback))


@check("RES-2", "the rate logged per step follows the schedule over the optimizer steps", "nn", mode="run")
def schedule_followed(run: RunDir) -> str:
    rates = {}  # {step: rate} of LearningRateMonitor's events (they hold nothing else), first group's
    for event in run.metrics():
        logged = {k: v for k, v in event.items() if k not in ("time", "event", "step")}
        if logged and all(k.startswith("lr") for k in logged):
            rates[event["step"]] = logged[min(logged)]
    require(rates, "metrics.jsonl holds no learning rate from LearningRateMonitor (lr/...)")
    scheduler = run.config.get("scheduler")
    if scheduler in (None, "plateau"):  # it follows the monitored metric, and only ever cuts the rate
        name, steps = scheduler or "no schedule", sorted(rates)
        rose = next((later for earlier, later in pairwise(steps) if rates[later] > rates[earlier]), None)
        require(rose is None, f"the rate rose at step {rose}, where {name} only cuts it")
        return f"{name}: lr at {len(rates)} steps, never rising"
    epoch_zero = [e["step"] for e in run.events if e.get("epoch") == 0 and "step" in e]
    if not epoch_zero or not any(e.get("epoch", 0) >= 1 for e in run.events):
        raise Skipped("the run logged fewer than 2 epochs: its steps per epoch are unknown")
    per_epoch, epochs = max(epoch_zero) + 1, int(run.config["num_epochs"])
    planned = _schedule(scheduler, float(run.config["learning_rate"]), per_epoch * epochs, run.config)
    plan = f"{scheduler} over {per_epoch * epochs} optimizer steps ({per_epoch} per epoch x {epochs} epochs)"
    for step, rate in sorted(rates.items()):
        on_schedule = math.isclose(rate, planned(step), rel_tol=1e-4, abs_tol=1e-12)
        require(on_schedule, f"lr {rate:.4g} at step {step}, where {plan} is at {planned(step):.4g}")
    per_step = per_epoch == 1 or any(step % per_epoch for step in rates)
    require(per_step, "lr is logged at epoch starts only, not per step")
    return f"{scheduler}: lr at {len(rates)} steps, on it over {per_epoch} steps per epoch x {epochs} epochs"


def _schedule(name: str, rate: float, total: int, config: dict[str, Any]) -> Callable[[int], float]:
    """The rate at each step of cosine (linear warmup from rate / (peak + 1)), onecycle (cosine
    rise from rate / 25) or constant, as the config defines them, over `total` steps."""
    floor = config["min_lr_fraction"] * rate
    peak = max(0, min(round(config["warmup_fraction"] * total), total - 2))

    def anneal(start: float, end: float, share: float) -> float:
        return end + (start - end) * (1 + math.cos(math.pi * share)) / 2

    def cosine(step: int) -> float:
        warming = rate * (step + 1) / (peak + 1)
        return warming if step < peak else anneal(rate, floor, (step - peak) / (total - peak))

    def onecycle(step: int) -> float:
        if not peak:
            return anneal(rate, floor, (step + 1) / total)
        if step <= peak:
            return anneal(rate / 25, rate, step / peak)
        return anneal(rate, floor, (step - peak) / (total - 1 - peak))

    schedules = {"cosine": cosine, "onecycle": onecycle, "constant": lambda step: rate}
    require(name in schedules, f"config.json's scheduler {name!r} is none of {', '.join(schedules)}")
    return schedules[name]


@check("PRF-1", "a Lightning profiler was active", "nn", mode="run")
def profiler_active(run: RunDir) -> str:
    profiler = str(run.fact("profiler"))
    require(re.search(r"(Simple|Advanced)Profiler\)?$", profiler), f"the run's profiler was {profiler}")
    return f"{profiler} was active"


@check("PRF-2", "timing/ data (or env_step), inference, backward and overhead seconds", "nn", mode="run")
def timing_keys(run: RunDir) -> None:
    fetch = "env_step" if run.kind == "rl" else "data"
    wanted = [f"timing/{name}_seconds" for name in (fetch, "inference", "backward", "overhead")]
    lacks("metrics.jsonl", wanted, run.metric_keys())


@check("PRF-4", "timing/*_pct add up to 100 (+-1) in each epoch", "nn", mode="run")
def timing_shares(run: RunDir) -> None:
    shares = [[v for k, v in e.items() if k.startswith("timing/") and k.endswith("_pct")] for e in run.events]
    totals = [(e.get("step"), sum(share)) for e, share in zip(run.events, shares, strict=True) if share]
    require(totals, "metrics.jsonl has no timing/*_pct")
    for step, total in totals:
        require(abs(total - 100) <= 1, f"step {step}: timing/*_pct add up to {total:.1f}")
