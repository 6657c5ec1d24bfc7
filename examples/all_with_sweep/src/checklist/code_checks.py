"""Checks of the code: library APIs (Lightning, XGBoost, W&B, torch) and the names the
checklist itself gives, found in whatever files each part's code reaches."""

from __future__ import annotations

import ast
import shlex
from collections.abc import Callable

from src.checklist.project import (
    Part,
    Project,
    calls,
    classes,
    constant,
    constants,
    fields,
    function,
    is_dataclass,
    keyword,
    methods,
    name_of,
    names,
    nodes,
    source,
)
from src.checklist.registry import TAGS, Failed, check, require

LEVELS = {"sl_neural": "SLNeuralConfig", "sl_tree": "SLTreeConfig", "rl": "RLConfig"}
Test = Callable[[ast.expr | None], bool]


def each(project: Project, tag: str = "all") -> list[Part]:
    return project.parts_of(TAGS[tag])


def given(value: ast.expr | None) -> bool:
    return value is not None


def equals(wanted: object) -> Test:
    return lambda value: constant(value) == wanted


def mentions(text: str) -> Test:
    return lambda value: text in source(value)


def call_with(project: Project, part: Part, name: str, /, **tests: Test) -> str:
    """Fail unless the part's code makes a call `name(...)`, or of a subclass of the code's
    own, whose keywords pass `tests`."""
    subclasses = [cls.name for _, cls in project.classes(name, part)]
    made = [c for called in (name, *subclasses) for _, c in project.calls(called, part)]
    found = [c for c in made if all(t(keyword(c, k)) for k, t in tests.items())]
    require(found, f"{part.name}: no {name}({', '.join(f'{k}=...' for k in tests)}) as the checklist asks")
    return source(found[0])


def passes(project: Project, part: Part | None, name: str, test: Test = given) -> bool:
    """Whether the code passes `name=` to any call with a value that passes `test`."""
    values = [keyword(call, name) for _, call in project.find(ast.Call, part)]
    return any(test(value) for value in values if value is not None)


def never_uses(project: Project, paths: list[str], name: str, advice: str) -> None:
    for path in paths:
        require(name not in names(project.tree(path)), f"{path} uses {name}; {advice}")


def one_class(project: Project, part: Part, base: str) -> ast.ClassDef:
    found = project.classes(base, part)
    require(found, f"{part.name}: no {base} subclass in the code it runs")
    return found[-1][1]  # the most derived: the part's own


def main_with_config(project: Project, part: Part) -> ast.FunctionDef:
    return project.function("main_with_config", part)[1]


def in_use(project: Project, part: Part, base: str, hook: str) -> list[ast.ClassDef]:
    """Subclasses of `base` defining `hook` that the part's code creates."""
    made = {name_of(call) for _, call in project.find(ast.Call, part)}
    return [c for _, c in project.classes(base, part) if hook in methods(c) and c.name in made]


def shared_classes(project: Project) -> dict[str, ast.ClassDef]:
    return {c.name: c for path, c in project.find(ast.ClassDef) if path.startswith("src/")}


# CFG, STR


def config_classes(project: Project, part: Part) -> list[ast.ClassDef]:
    """The part's task config (the one inheriting its level), then its variants."""
    local = classes(project.tree(f"{part.name}/config.py"))
    family, found = {LEVELS[part.kind]}, []
    for cls in local:
        if {name_of(b) for b in cls.bases} & family:
            family.add(cls.name)
            found.append(cls)
    require(found, f"{part.name}/config.py: no config class inherits from {LEVELS[part.kind]}")
    return found


@check("CFG-1", "each part's config is a dataclass in the one hierarchy in src/")
def config_hierarchy(project: Project) -> str:
    shared = shared_classes(project)

    def reaches_base(name: str) -> bool:
        cls = shared.get(name)
        bases = [name_of(b) for b in cls.bases] if cls else []
        return bool(cls and is_dataclass(cls)) and (name == "BaseConfig" or any(map(reaches_base, bases)))

    for part in project.parts:
        require(
            reaches_base(LEVELS[part.kind]),
            f"src/: {LEVELS[part.kind]} is not a @dataclass reaching BaseConfig",
        )
        for cls in config_classes(project, part):
            require(cls.name not in shared, f"{part.name}/config.py redefines {cls.name} of src/")
            require(is_dataclass(cls), f"{part.name}/config.py: {cls.name} is not a @dataclass")
    return "every part's configs are dataclasses under " + ", ".join(sorted(LEVELS[k] for k in project.kinds))


@check("CFG-3", "--config NAME and per-field flags, parsed with tyro")
def config_by_name(project: Project) -> str:
    for part in project.parts:
        main = function(project.tree(f"{part.name}/train.py"), "main")
        require(
            main and project.reaches(main, "cli", part),
            f"{part.name}/train.py: main() never reaches tyro.cli()",
        )
        require(len(config_classes(project, part)) > 1, f"{part.name}/config.py: one config, nothing to pick")
    return "every main() parses --config and the field flags with tyro.cli()"


@check("CFG-4", "max_wall_clock_hours bounds every run")
def wall_clock(project: Project) -> str:
    base = shared_classes(project).get("BaseConfig")
    require(base and "max_wall_clock_hours" in fields(base), "BaseConfig has no max_wall_clock_hours field")
    for part in project.parts:
        # Lightning's Timer or a subclass of it, or XGBoost callbacks.
        bases = ("Timer", "TrainingCallback")
        stoppers = {"Timer", *(c.name for base in bases for _, c in project.classes(base, part))}
        require(
            any(
                name_of(c) in stoppers and "max_wall_clock_hours" in source(c)
                for _, c in project.find(ast.Call, part)
            ),
            f"{part.name}: no Timer or XGBoost callback is given cfg.max_wall_clock_hours",
        )
    return "BaseConfig.max_wall_clock_hours, enforced by a Timer or an XGBoost callback in every part"


@check("CFG-5", "num_epochs is effectively unlimited; early stopping ends training", "nn")
def unlimited_epochs(project: Project) -> str:
    defaults = [
        constant(fields(c)["num_epochs"])
        for c in shared_classes(project).values()
        if "num_epochs" in fields(c)
    ]
    require(defaults, "no config in src/ has a num_epochs field")
    require(
        all(isinstance(d, int) and d >= 1000 for d in defaults),
        f"num_epochs defaults to {defaults}, want >= 1000",
    )
    require(
        passes(project, None, "max_epochs", mentions("num_epochs")), "no Trainer(max_epochs=cfg.num_epochs)"
    )
    return f"num_epochs defaults to {defaults[0]}, passed as max_epochs"


@check("CFG-6", "variants are dataclass subclasses overriding only fields, one multi-dimension")
def variants(project: Project) -> str:
    for part in project.parts:
        found = config_classes(project, part)[1:]
        for cls in found:
            extra = [n for n in cls.body if isinstance(n, (ast.FunctionDef, ast.Assign))]
            require(not extra, f"{part.name}/config.py: variant {cls.name} does more than override fields")
        require(len(found) >= 3, f"{part.name}/config.py: {len(found)} variants, want >= 3")
        require(
            any(len(set(fields(cls)) - {"name"}) >= 2 for cls in found),
            f"{part.name}/config.py: no variant changes several fields at once (an aggressive one)",
        )
    return "every part has >= 3 field-only variants, one changing several fields"


@check("STR-1", "partN/ holds config.py, data.py, model.py, train.py (and sweep.py)")
def part_layout(project: Project) -> str:
    wanted = ["config.py", "data.py", "model.py", "train.py"] + (["sweep.py"] if project.has_sweep else [])
    for part in project.parts:
        missing = [name for name in wanted if not (project.root / part.name / name).is_file()]
        require(not missing, f"{part.name}/ lacks {', '.join(missing)}")
    return f"{len(project.parts)} part(s), each with {', '.join(wanted)}"


@check("STR-2", "shared code (configs, W&B, GPU lock, callbacks) lives once in src/")
def shared_code(project: Project) -> str:
    project.text("src/wandb_utils.py")
    shared = shared_classes(project)
    require({"BaseConfig", "GpuLock"} <= set(shared), "src/ lacks BaseConfig or GpuLock")
    for path, cls in project.find(ast.ClassDef):
        require(path.startswith("src/") or cls.name not in shared, f"{path} defines {cls.name} of src/ again")
    return "src/wandb_utils.py, the configs and GpuLock in src/; no part redefines a class of src/"


@check("STR-3", "each train.py has a main() entry point")
def has_main(project: Project) -> str:
    for part in project.parts:
        body = project.tree(f"{part.name}/train.py").body
        require(
            any(isinstance(n, ast.FunctionDef) and n.name == "main" for n in body),
            f"{part.name}/train.py: no main()",
        )
    return "every train.py defines main()"


# LIT, LOG, PRF, PRC


@check("LIT-1", "LightningModule: save_hyperparameters, forward, steps that log, configure_optimizers", "nn")
def lightning_contract(project: Project) -> str:
    for part in each(project, "nn"):
        cls = one_class(project, part, "LightningModule")
        found = methods(cls)
        for name in ("__init__", "forward", "training_step", "validation_step", "configure_optimizers"):
            require(name in found, f"{part.name}: {cls.name} has no {name}()")
        require(
            calls(found["__init__"], "save_hyperparameters"),
            f"{cls.name}.__init__ never calls save_hyperparameters()",
        )
        for step in ("training_step", "validation_step"):
            require(
                project.reaches(found[step], {"log", "log_dict"}, part), f"{cls.name}.{step} logs nothing"
            )
    return "every LightningModule has the LIT-1 methods"


@check("LIT-2", "LightningDataModule: setup(stage) and the three dataloaders", "nn")
def datamodule_contract(project: Project) -> str:
    for part in each(project, "nn"):
        cls = one_class(project, part, "LightningDataModule")
        wanted = ["train_dataloader", "val_dataloader", "test_dataloader"]
        wanted += ["setup"] if part.kind == "sl_neural" else []  # RL builds its collector in train_dataloader
        missing = [name for name in wanted if name not in methods(cls)]
        require(not missing, f"{part.name}: {cls.name} lacks {', '.join(missing)}")
    return "every DataModule has its dataloaders"


@check("LIT-3", "model.py exposes save_model() and load_model_from_checkpoint()", "nn")
def model_helpers(project: Project) -> str:
    for part in each(project, "nn"):
        body = project.tree(f"{part.name}/model.py").body
        top = {n.name for n in body if isinstance(n, ast.FunctionDef)}
        top |= {a.asname or a.name for n in body if isinstance(n, ast.ImportFrom) for a in n.names}
        missing = {"save_model", "load_model_from_checkpoint"} - top
        require(not missing, f"{part.name}/model.py lacks {', '.join(sorted(missing))}")
    return "save_model() and load_model_from_checkpoint() in every model.py"


@check("LIT-4", "fused AdamW in configure_optimizers, clipping through the Trainer", "nn")
def optimizer(project: Project) -> str:
    for part in each(project, "nn"):
        configure = methods(one_class(project, part, "LightningModule")).get("configure_optimizers")
        require(
            configure and project.reaches(configure, "AdamW", part),
            f"{part.name}: configure_optimizers() makes no AdamW",
        )
        call_with(project, part, "AdamW", fused=given)
    for part in each(project, "sl_neural"):
        clips = passes(project, part, "gradient_clip_val", lambda v: bool(constant(v, "set")))
        require(clips, f"{part.name}: no Trainer(gradient_clip_val=...): not clipping through the Trainer")
    return "AdamW(fused=...) from configure_optimizers, Trainer clipping (decay groups: on a run)"


@check("LOG-1", "wandb.init(project, name=cfg.name, mode) and WandbLogger(log_model=False)")
def wandb_logger(project: Project) -> str:
    for part in project.parts:
        call_with(
            project, part, "init", project=given, name=lambda v: source(v).endswith(".name"), mode=given
        )
        wanted = "init" if part.kind == "sl_tree" else "WandbLogger"
        require(
            project.reaches(main_with_config(project, part), wanted, part),
            f"{part.name}: main_with_config() never reaches {wanted}()",
        )
        for path, logger in project.calls("WandbLogger", part):
            require(
                constant(keyword(logger, "log_model"), True) is False,
                f"{path}: WandbLogger log_model= is not False",
            )
    return "wandb.init(project, name=cfg.name, mode=...), WandbLogger(log_model=False) in the Lightning parts"


@check("LOG-2", "hyperparameters reach W&B through save_hyperparameters()", "nn")
def hyperparameters(project: Project) -> str:
    for part in each(project, "nn"):
        cls = one_class(project, part, "LightningModule")
        require(
            calls(cls, "save_hyperparameters"), f"{part.name}: {cls.name} never calls save_hyperparameters()"
        )
    return "save_hyperparameters() in every LightningModule"


@check("LOG-3", 'self.log("train_loss", on_step=True, on_epoch=True, prog_bar=True)', "nn")
def train_loss_logged(project: Project) -> str:
    for part in each(project, "nn"):
        logs = [c for _, c in project.calls("log", part) if c.args and constant(c.args[0]) == "train_loss"]
        require(logs, f'{part.name}: no self.log("train_loss", ...)')
        flags = {name: constant(keyword(logs[0], name)) for name in ("on_step", "on_epoch", "prog_bar")}
        require(all(v is True for v in flags.values()), f"{part.name}: train_loss logged with {flags}")
    return "train_loss logged per step and epoch, on the progress bar"


@check("LOG-6", "the model is saved, then logged as a W&B artifact, at the end")
def model_artifact(project: Project) -> str:
    for part in project.parts:
        steps = [c for c in nodes(main_with_config(project, part)) if isinstance(c, ast.Call)]
        logged = [c.lineno for c in steps if project.reaches(c, "log_artifact", part)]
        saved = [c.lineno for c in steps if name_of(c) == "save_model"]
        require(logged, f"{part.name}: main_with_config() never reaches log_artifact()")
        require(saved and saved[0] <= logged[0], f"{part.name}: the artifact is logged before save_model()")
    return "save_model(), then log_artifact(), in every main_with_config()"


@check("PRF-1", "a Lightning profiler (SimpleProfiler or AdvancedProfiler)", "nn")
def profiler(project: Project) -> str:
    for part in each(project, "nn"):
        require(passes(project, part, "profiler"), f"{part.name}: no Trainer(profiler=...)")
        profilers = {"SimpleProfiler", "AdvancedProfiler"}
        require(
            any(profilers & names(project.tree(p)) for p in project.code(part)),
            f"{part.name}: no {profilers}",
        )
    return "Trainer(profiler=SimpleProfiler | AdvancedProfiler)"


@check("PRF-2", "a timing callback with on_train_batch_start/end and on_validation_start/end", "nn")
def timing_callback(project: Project) -> str:
    hooks = ("on_train_batch_start", "on_train_batch_end", "on_validation_start", "on_validation_end")
    for part in each(project, "nn"):
        timers = in_use(project, part, "Callback", hooks[0])
        require(
            any(set(hooks) <= set(methods(c)) for c in timers),
            f"{part.name}: no callback in use has {', '.join(hooks)}",
        )
    return "a callback with the four timing hooks in every Lightning part"


@check("PRC-1", 'bf16-mixed, never fp16: no GradScaler, no "16-mixed"', "nn")
def bf16(project: Project) -> str:
    for part in each(project, "nn"):
        require(passes(project, part, "precision"), f"{part.name}: no Trainer(precision=...)")
        require(
            any("bf16-mixed" in constants(project.tree(p)) for p in project.code(part)),
            f'{part.name}: never picks "bf16-mixed"',
        )
    for path in project.code():
        require("GradScaler" not in names(project.tree(path)), f"{path} uses a GradScaler")
        require(
            not {"16-mixed", "fp16"} & constants(project.tree(path)), f'{path} asks for fp16 ("16-mixed")'
        )
    return "bf16-mixed picked for the Trainer; no GradScaler, no fp16"


@check("PRC-2", "no manual autocast in model code", "nn")
def no_autocast(project: Project) -> str:
    for part in each(project, "nn"):
        own = [project.rel(path) for path in sorted((project.root / part.name).glob("*.py"))]
        never_uses(project, own, "autocast", "the Trainer's precision setting does it")
    return "no autocast in any Lightning part"


@check("PRC-3", '"32-true" chosen automatically where bf16 is unsupported', "nn")
def fp32_fallback(project: Project) -> str:
    for part in each(project, "nn"):
        require(project.calls("is_bf16_supported", part), f"{part.name}: never asks is_bf16_supported()")
        require(
            any("32-true" in constants(project.tree(p)) for p in project.code(part)),
            f'{part.name}: no "32-true"',
        )
    return 'is_bf16_supported() decides between bf16-mixed and "32-true"'


# MEM, MAIN, CB


@check("MEM-1", 'BatchSizeFinder(mode="binsearch"); no hand-written batch-size probing', "nn")
def batch_size_finder(project: Project) -> str:
    # PPO's batch is its rollout and minibatch, which no finder sizes: RL passes on the
    # absence of hand-written probing alone.
    for part in each(project, "sl_neural"):
        call_with(project, part, "BatchSizeFinder", mode=equals("binsearch"))
    for path, handler in project.find(ast.ExceptHandler):
        if "OutOfMemoryError" in source(handler.type) or any(
            "out of memory" in str(v) for v in constants(handler)
        ):
            raise Failed(
                f"{path}:{handler.lineno}: catches out-of-memory errors: hand-written batch-size probing?"
            )
    return 'BatchSizeFinder(mode="binsearch"), no OutOfMemoryError probing'


@check("MEM-2", "the LightningModule exposes a batch_size attribute", "nn")
def batch_size_attribute(project: Project) -> str:
    for part in each(project, "nn"):
        cls = one_class(project, part, "LightningModule")
        assigned = {
            source(t)
            for n in nodes(methods(cls).get("__init__", cls))
            if isinstance(n, ast.Assign)
            for t in n.targets
        }
        require(
            "self.batch_size" in assigned, f"{part.name}: {cls.name}.__init__ does not set self.batch_size"
        )
    return "self.batch_size set in every LightningModule"


@check("MEM-3", "accumulate_grad_batches=cfg.gradient_accumulation_steps", "nn")
def accumulation(project: Project) -> str:
    for part in each(project, "sl_neural"):
        accumulates = passes(
            project, part, "accumulate_grad_batches", mentions("gradient_accumulation_steps")
        )
        require(
            accumulates, f"{part.name}: no Trainer(accumulate_grad_batches=cfg.gradient_accumulation_steps)"
        )
    return "Trainer(accumulate_grad_batches=cfg.gradient_accumulation_steps) (PPO steps once per minibatch)"


@check("MEM-4", "cleanup_vram(): del model and trainer, empty_cache(), gc.collect()", "nn")
def cleanup(project: Project) -> str:
    for part in each(project, "nn"):
        path, memory = project.function("cleanup_vram", part)
        empty, collect = calls(memory, "empty_cache"), calls(memory, "collect")
        require(
            empty and any(c.lineno > empty[0].lineno for c in collect),
            f"{path}: no gc.collect() after empty_cache()",
        )
        main = main_with_config(project, part)
        deleted = [
            n.lineno
            for n in nodes(main)
            if isinstance(n, ast.Delete) and {"model", "trainer"} <= set(map(source, n.targets))
        ]
        cleaned = [c.lineno for c in calls(main, "cleanup_vram")]
        require(
            deleted and cleaned and deleted[0] < cleaned[0],
            f"{part.name}: no `del model, trainer` then cleanup_vram()",
        )
    return "del model, trainer; cleanup_vram() empties the cache then collects"


@check(
    "MAIN-1", "seed -> DataModule -> module -> WandbLogger -> Trainer -> fit -> test(best) -> finish", "nn"
)
def main_order(project: Project) -> str:
    for part in each(project, "nn"):
        steps = [
            ("seed_everything", {"seed_everything"}),
            ("the LightningDataModule", {one_class(project, part, "LightningDataModule").name}),
            ("the LightningModule", {one_class(project, part, "LightningModule").name}),
            ("WandbLogger", {"WandbLogger"}),
            ("Trainer", {"Trainer"}),
            ("trainer.fit", {"fit"}),
            ('trainer.test(ckpt_path="best")', {"test"}),
            ("wandb.finish", {"finish"}),
        ]
        every = sorted(
            (n for n in nodes(main_with_config(project, part)) if isinstance(n, ast.Call)),
            key=lambda n: (n.lineno, n.col_offset),
        )
        line = 0
        for step, targets in steps:
            found = [c.lineno for c in every if c.lineno >= line and _is_step(project, part, c, targets)]
            require(found, f"{part.name}: main_with_config() has no {step} after line {line}")
            line = found[0]
    return "every Lightning part's main_with_config() follows the MAIN-1 order"


def _is_step(project: Project, part: Part, call: ast.Call, targets: set[str]) -> bool:
    if targets & {"fit", "test"}:  # called on the Trainer itself
        return name_of(call) in targets and (
            name_of(call) == "fit" or constant(keyword(call, "ckpt_path")) == "best"
        )
    return project.reaches(call, targets, part)


@check("CB-1", "EarlyStopping(monitor, patience=cfg.patience, mode) (tree: early-stopping rounds)")
def early_stopping(project: Project) -> str:
    for part in each(project, "nn"):
        call_with(project, part, "EarlyStopping", monitor=given, mode=given, patience=mentions("patience"))
    for part in each(project, "tree"):
        rounds = [
            a for _, c in project.find(ast.Call, part) for a in [*c.args, *(k.value for k in c.keywords)]
        ]
        require(
            any(name_of(a) == "early_stopping_rounds" for a in rounds),
            f"{part.name}: cfg.early_stopping_rounds is passed to no call",
        )
    return "early stopping on the monitored metric with the config's patience (tree: its rounds)"


@check("CB-2", "ModelCheckpoint: the best (monitored, save_top_k=1) and the last", "nn")
def model_checkpoint(project: Project) -> str:
    for part in each(project, "nn"):
        call_with(
            project,
            part,
            "ModelCheckpoint",
            # A checkpoint that monitors "step" keeps the latest epochs, not the best one.
            monitor=lambda v: v is not None and constant(v) not in ("step", "epoch"),
            mode=given,
            save_top_k=lambda v: constant(v, 1) == 1,
        )
        last = [
            c
            for _, c in project.calls("ModelCheckpoint", part)
            if constant(keyword(c, "filename")) == "last" or constant(keyword(c, "save_last")) is True
        ]
        require(last, f"{part.name}: no ModelCheckpoint saves last.ckpt")
    return "ModelCheckpoints for the best and the last"


@check("CB-3", "LearningRateMonitor at each schedule's interval: per epoch (plateau) or per step", "nn")
def lr_monitor(project: Project) -> str:
    for part in each(project, "nn"):
        # None (the default) logs each scheduler at its own interval: "epoch" would hide a
        # per-step schedule's warmup and decay.
        call_with(project, part, "LearningRateMonitor", logging_interval=equals(None))
    return "LearningRateMonitor(logging_interval=None): each schedule at its own interval"


@check("CB-4", "a STOP file, checked between epochs, ends the run gracefully")
def stop_file(project: Project) -> str:
    for part in project.parts:
        if part.kind == "sl_tree":  # an XGBoost callback: returning True ends training
            hook, found = "after_iteration", in_use(project, part, "TrainingCallback", "after_iteration")
            found = [c for c in found if any(_returns_true(n) for n in nodes(methods(c)[hook]))]
        else:
            hook, found = "on_train_epoch_end", in_use(project, part, "Callback", "on_train_epoch_end")
            found = [c for c in found if "should_stop" in names(methods(c)[hook])]
        found = [c for c in found if project.reaches(methods(c)[hook], {"exists", "is_file"}, part)]
        require(found, f"{part.name}: no callback in use stops training when a STOP file exists")
    return "a callback looks for a STOP file between epochs (rounds) in every part"


def _returns_true(node: ast.AST) -> bool:
    """`return True`: not a callback that only logs, whose logger may look for files too."""
    return isinstance(node, ast.Return) and isinstance(node.value, ast.Constant) and node.value.value is True


# OPS, OUT, RES, DATA


@check("OPS-1", 'main() runs inside GpuLock() under if __name__ == "__main__"')
def gpu_lock(project: Project) -> str:
    path, lock = next(((p, c) for p, c in project.find(ast.ClassDef) if c.name == "GpuLock"), ("", None))
    require(lock and calls(lock, "flock"), "no GpuLock class that takes an fcntl.flock")
    require(
        "/tmp/gpu-task.lock" in constants(project.tree(path)),
        f"{path}: the default lock is not /tmp/gpu-task.lock",
    )
    for part in project.parts:
        tree = project.tree(f"{part.name}/train.py")
        guard = [
            n
            for n in tree.body
            if isinstance(n, ast.If) and "__name__" in source(n.test) and calls(n, "main")
        ]
        require(guard, f'{part.name}/train.py: no `if __name__ == "__main__": main()`')
        locks = [i for w in nodes(function(tree, "main") or tree) if isinstance(w, ast.With) for i in w.items]
        require(
            any(name_of(i.context_expr) == "GpuLock" for i in locks),
            f"{part.name}/train.py: main() runs outside `with GpuLock()`",
        )
    return "every main() runs under GpuLock(), flock on /tmp/gpu-task.lock"


@check("OPS-2", "one command starts a long run detached: PYTHONUNBUFFERED=1 nohup ... &")
def detached(project: Project) -> str:
    scripts = sorted([*project.root.glob("*.sh"), *project.root.glob("*/*.sh")])
    for script in scripts:
        if {"PYTHONUNBUFFERED=1", "nohup"} <= set(
            shlex.split(script.read_text(encoding="utf-8"), comments=True)
        ):
            return f"{project.rel(script)} runs PYTHONUNBUFFERED=1 nohup ... &"
    raise Failed(f"no shell script runs PYTHONUNBUFFERED=1 nohup (looked at {len(scripts)})")


@check("OUT-1", "runs write to {base_dir}/{name}_{YYYYMMDD_HHMMSS}/; Trainer(default_root_dir=run_dir)")
def run_dir_names(project: Project) -> str:
    require(
        any("%Y%m%d_%H%M%S" in constants(project.tree(p)) for p in project.code()), 'no "%Y%m%d_%H%M%S" stamp'
    )
    for part in each(project, "nn"):
        require(
            passes(project, part, "default_root_dir"), f"{part.name}: no Trainer(default_root_dir=run_dir)"
        )
    return "{name}_{YYYYMMDD_HHMMSS} run directories"


@check("RES-3", "checkpoints load onto any device: torch.load(map_location=...)")
def map_location(project: Project) -> str:
    loads = [(p, c) for p, c in project.calls("load") if source(c.func) == "torch.load"]
    for path, call in loads:
        require(keyword(call, "map_location"), f"{path}:{call.lineno}: torch.load without map_location=")
    return f"{len(loads)} torch.load call(s), all with map_location="


@check("DATA-1", "input data validated before training, naming the bad column", "sl")
def data_validated(project: Project) -> str:
    for part in each(project, "sl"):
        loaders = [f for f in nodes(project.tree(f"{part.name}/data.py")) if isinstance(f, ast.FunctionDef)]
        require(
            any(project.reaches(f, "validate", part) for f in loaders),
            f"{part.name}/data.py never validates its table against a schema (pandera's validate())",
        )
    return "every supervised part validates its table with a pandera schema"


# SWP


@check("SWP-1", "partN/sweep.py", sweep=True)
def sweep_files(project: Project) -> str:
    missing = [p.name for p in project.parts if not (project.root / p.name / "sweep.py").is_file()]
    require(not missing, f"no sweep.py in {', '.join(missing)}")
    return "every part has sweep.py"


@check("SWP-2", "main_with_config(cfg) split out of main(), used by the sweep", sweep=True)
def split_main(project: Project) -> str:
    for part in project.parts:
        main = function(project.tree(f"{part.name}/train.py"), "main")
        require(
            main and calls(main, "main_with_config"),
            f"{part.name}/train.py: main() never calls main_with_config()",
        )
        require(
            "main_with_config" in names(project.tree(f"{part.name}/sweep.py")),
            f"{part.name}/sweep.py does not use main_with_config",
        )
    return "main() and sweep.py both call main_with_config()"


@check("SWP-3", "setup_run() joins a sweep's run (wandb.run.sweep_id) instead of wandb.init()", sweep=True)
def sweep_aware(project: Project) -> str:
    path, setup = project.function("setup_run")
    joins = [
        n
        for n in nodes(setup)
        if isinstance(n, ast.If) and "sweep_id" in source(n.test) and calls(n, "update")
    ]
    init = calls(setup, "init")
    require(
        joins and init and joins[0].lineno < init[0].lineno,
        f"{path}: setup_run() does not join a sweep's run before wandb.init()",
    )
    return "setup_run() updates the sweep's run when wandb.run.sweep_id is set"


@check("SWP-4", "an `architecture` parameter decoded into config fields", sweep=True)
def architecture(project: Project) -> str:
    for part in project.parts:
        space = f"{part.name}/sweep.py"
        keys = {constant(k) for n in nodes(project.tree(space)) if isinstance(n, ast.Dict) for k in n.keys}
        require("architecture" in keys, f"{space}: no architecture in the search space")
        decoders = [
            f for p, f in project.find(ast.FunctionDef, part) if p != space and "architecture" in constants(f)
        ]
        require(decoders, f"{part.name}: no function decodes the architecture parameter")
    return "architecture presets decoded into fields"


@check("SWP-5", "--max-hours bounds the whole sweep", sweep=True)
def sweep_budget(project: Project) -> str:
    for part in project.parts:
        deadlines = [
            n
            for _, n in project.find(ast.BinOp, part)
            if "max_hours" in names(n) and {"monotonic", "time"} & {name_of(c) for c in nodes(n)}
        ]
        require(deadlines, f"{part.name}: no sweep deadline computed from --max-hours")
    return "--max-hours sets one deadline for the sweep"


@check("SWP-6", "documented launch in tmux (`tmux new -s sweep`)", sweep=True)
def tmux_documented(project: Project) -> str:
    require("tmux new -s sweep" in project.text("README.md"), "README.md does not show `tmux new -s sweep`")
    return "README.md shows `tmux new -s sweep`"


@check("SWP-7", "a trial's exceptions are caught, then cleanup_vram() and two gc.collect()", sweep=True)
def trial_cleanup(project: Project) -> str:
    for _, node in project.find(ast.FunctionDef):
        tries = [
            t
            for t in node.body
            if isinstance(t, ast.Try) and any("Exception" in source(h.type) for h in t.handlers)
        ]
        after = ast.Module([s for s in node.body if tries and s.lineno > tries[0].lineno], [])
        if calls(after, "cleanup_vram") and len(calls(after, "collect")) >= 2:
            return f"{node.name}() catches, then cleanup_vram() and gc.collect() twice"
    raise Failed("no trial function catches Exception, then calls cleanup_vram() and gc.collect() twice")
