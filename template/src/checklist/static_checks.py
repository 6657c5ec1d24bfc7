"""Static checks: this project's code, read with `ast`, never imported (no torch needed)."""

from __future__ import annotations

import ast
import shlex
from collections.abc import Callable

from src.checklist.layout import Part, Project
from src.checklist.registry import TAGS, Failed, check
from src.checklist.syntax import (
    calls,
    class_field_default,
    classes,
    constant,
    constants,
    function,
    is_dataclass,
    keyword,
    methods,
    name_of,
    names,
    nodes,
    self_assigns,
    source,
    subclasses,
)

TRAINER = "src/trainer.py"
WANDB = "src/wandb_utils.py"
XGB_CALLBACKS = "src/xgb_callbacks.py"
SWEEP = "src/sweep.py"
KIND_CONFIG = {"sl_neural": "SLNeuralConfig", "sl_tree": "SLTreeConfig", "rl": "RLConfig"}
DEPRECATED_SPECS = {  # RL-10: the old names and their current replacements
    "BoundedTensorSpec": "Bounded",
    "CompositeSpec": "Composite",
    "UnboundedContinuousTensorSpec": "Unbounded",
    "UnboundedDiscreteTensorSpec": "Unbounded",
    "DiscreteTensorSpec": "Categorical",
    "OneHotDiscreteTensorSpec": "OneHot",
    "MultiDiscreteTensorSpec": "MultiCategorical",
    "MultiOneHotDiscreteTensorSpec": "MultiOneHot",
    "BinaryDiscreteTensorSpec": "Binary",
}


def parts(project: Project, *tags: str) -> list[Part]:
    return project.parts_of(set.intersection(*(TAGS[tag] for tag in tags)))


def require(condition: object, message: str) -> None:
    if not condition:
        raise Failed(message)


def one_call(tree: ast.AST, name: str, where: str) -> ast.Call:
    found = calls(tree, name)
    require(found, f"{where}: no {name}(...) call")
    return found[0]


def lightning_module(project: Project, part: Part) -> ast.ClassDef:
    found = subclasses(project.tree(f"{part.name}/model.py"), "LightningModule")
    require(found, f"{part.name}/model.py: no LightningModule subclass")
    return found[0]


def lightning_inits(project: Project) -> list[tuple[Part, ast.FunctionDef]]:
    """Each Lightning part's LightningModule.__init__."""
    found = []
    for part in parts(project, "nn"):
        init = methods(lightning_module(project, part)).get("__init__")
        require(init, f"{part.name}/model.py: the LightningModule has no __init__")
        found.append((part, init))
    return found


def datamodule(project: Project, part: Part) -> ast.ClassDef:
    found = subclasses(project.tree(f"{part.name}/data.py"), "LightningDataModule")
    require(found, f"{part.name}/data.py: no LightningDataModule subclass")
    return found[0]


def main_with_config(project: Project, part: Part) -> ast.FunctionDef:
    found = function(project.tree(f"{part.name}/train.py"), "main_with_config")
    require(found, f"{part.name}/train.py: no main_with_config()")
    return found


def callbacks_list(project: Project, kind: str) -> tuple[str, ast.AST]:
    """Where a part kind's callbacks are listed: build_callbacks() (Lightning) or
    round_callbacks() (XGBoost)."""
    path, name = (XGB_CALLBACKS, "round_callbacks") if kind == "sl_tree" else (TRAINER, "build_callbacks")
    found = function(project.tree(path), name)
    require(found, f"{path}: no {name}()")
    return f"{path}:{name}()", found


def project_sources(project: Project) -> list[str]:
    """Every Python file of src/ and the parts (the checker itself left out)."""
    files = [*project.root.glob("src/**/*.py"), *project.root.glob("part*/**/*.py")]
    return sorted(
        str(path.relative_to(project.root))
        for path in files
        if "checklist" not in path.relative_to(project.root).parts
    )


# CFG: configuration


@check("CFG-1", "each part's config is a dataclass in the one hierarchy of src/config.py")
def config_hierarchy(project: Project) -> str:
    shared = {cls.name: cls for cls in classes(project.tree("src/config.py"))}

    def reaches_base(name: str) -> bool:
        cls = shared.get(name)
        if cls is None or not is_dataclass(cls):
            return False
        return name == "BaseConfig" or any(reaches_base(name_of(base)) for base in cls.bases)

    for part in project.parts:
        level = KIND_CONFIG[part.kind]
        require(reaches_base(level), f"src/config.py: {level} is not a @dataclass reaching BaseConfig")
        tree = project.tree(f"{part.name}/config.py")
        local = classes(tree)
        for cls in local:
            require(cls.name not in shared, f"{part.name}/config.py redefines {cls.name} of src/config.py")
            require(is_dataclass(cls), f"{part.name}/config.py: {cls.name} is not a @dataclass")
        require(
            any(name_of(base) == level for cls in local for base in cls.bases),
            f"{part.name}/config.py: no config class inherits from {level}",
        )
    return "every part's config classes are dataclasses under " + ", ".join(
        sorted({KIND_CONFIG[p.kind] for p in project.parts})
    )


def configs_dict(project: Project, part: Part) -> ast.Dict | ast.DictComp:
    for node in project.tree(f"{part.name}/config.py").body:
        target = (
            node.target
            if isinstance(node, ast.AnnAssign)
            else (node.targets[0] if isinstance(node, ast.Assign) else None)
        )
        if (
            isinstance(target, ast.Name)
            and target.id == "CONFIGS"
            and isinstance(node.value, (ast.Dict, ast.DictComp))
        ):
            return node.value
    raise Failed(f"{part.name}/config.py: no CONFIGS dict (name -> config class)")


def listed_configs(node: ast.Dict | ast.DictComp) -> list[str]:
    """The class names a CONFIGS dict (or `{c.name: c for c in (A, B)}`) lists."""
    if isinstance(node, ast.Dict):
        return [name_of(value) for value in node.values]
    return [
        name_of(element)
        for gen in node.generators
        if isinstance(gen.iter, ast.Tuple)
        for element in gen.iter.elts
    ]


@check("CFG-3", "--config NAME picks a config class by name; CLI flags override it")
def config_by_name(project: Project) -> str:
    for part in project.parts:
        configs_dict(project, part)
        main = function(project.tree(f"{part.name}/train.py"), "main")
        require(main, f"{part.name}/train.py: no main()")
        parse = [
            call for call in calls(main, "parse_cli") if call.args and name_of(call.args[0]) == "CONFIGS"
        ]
        require(parse, f"{part.name}/train.py: main() does not call parse_cli(CONFIGS, ...) (src/cli.py)")
    return "every train.py's main() parses --config and flags with parse_cli(CONFIGS)"


@check("CFG-4", "max_wall_clock_hours bounds every run")
def wall_clock(project: Project) -> str:
    base = next((c for c in classes(project.tree("src/config.py")) if c.name == "BaseConfig"), None)
    require(base, "src/config.py: no BaseConfig")
    require(
        class_field_default(base, "max_wall_clock_hours") is not False,
        "BaseConfig has no max_wall_clock_hours",
    )
    enforcers = []
    if project.kinds & TAGS["nn"]:
        enforcers.append((TRAINER, "Timer"))
    if "sl_tree" in project.kinds:
        enforcers.append((XGB_CALLBACKS, "WallClockRounds"))
    for path, name in enforcers:
        uses = [c for c in calls(project.tree(path), name) if "max_wall_clock_hours" in source(c)]
        require(uses, f"{path}: no {name}(...) given max_wall_clock_hours")
    return "BaseConfig.max_wall_clock_hours, enforced by " + ", ".join(name for _, name in enforcers)


@check("CFG-5", "num_epochs is effectively unlimited; early stopping ends training", "nn")
def unlimited_epochs(project: Project) -> str:
    cls = next((c for c in classes(project.tree("src/config.py")) if c.name == "LightningConfig"), None)
    require(cls, "src/config.py: no LightningConfig")
    default = constant(class_field_default(cls, "num_epochs") or None)
    require(
        isinstance(default, int) and default >= 1000,
        f"LightningConfig.num_epochs is {default!r}, want >= 1000",
    )
    trainer = one_call(project.tree(TRAINER), "Trainer", TRAINER)
    require(
        "num_epochs" in source(keyword(trainer, "max_epochs")),
        f"{TRAINER}: Trainer(max_epochs=cfg.num_epochs) missing",
    )
    return f"num_epochs defaults to {default}, passed as max_epochs"


@check("CFG-6", "variants are dataclass subclasses overriding only fields, one multi-dimension")
def variants(project: Project) -> str:
    for part in project.parts:
        tree = project.tree(f"{part.name}/config.py")
        local = {cls.name: cls for cls in classes(tree)}
        listed = listed_configs(configs_dict(project, part))
        variant_classes = [local[name] for name in listed if name in local and local[name].bases]
        overrides = {}
        for cls in variant_classes:
            if any(name_of(base) == KIND_CONFIG[part.kind] for base in cls.bases):
                continue  # the task config itself
            extra = [n for n in cls.body if isinstance(n, (ast.FunctionDef, ast.Assign))]
            require(not extra, f"{part.name}/config.py: variant {cls.name} does more than override fields")
            overrides[cls.name] = [n for n in cls.body if isinstance(n, ast.AnnAssign)]
        require(
            len(overrides) >= 3, f"{part.name}/config.py: {len(overrides)} variants in CONFIGS, want >= 3"
        )
        require(
            any(len(fields) >= 2 for fields in overrides.values()),
            f"{part.name}/config.py: no variant changes several fields at once (an aggressive one)",
        )
    return "every part lists >= 3 field-only variants, one changing several fields"


# STR: structure


@check("STR-1", "partN/ holds config.py, data.py, model.py, train.py (and sweep.py)")
def part_layout(project: Project) -> str:
    wanted = ["config.py", "data.py", "model.py", "train.py"] + (["sweep.py"] if project.has_sweep else [])
    for part in project.parts:
        missing = [name for name in wanted if not (project.root / part.name / name).is_file()]
        require(not missing, f"{part.name}/ lacks {', '.join(missing)}")
    return f"{len(project.parts)} part(s), each with {', '.join(wanted)}"


SHARED = {
    "src/config.py": {"BaseConfig", "SLNeuralConfig", "SLTreeConfig", "RLConfig", "LightningConfig"},
    "src/wandb_utils.py": {"setup_run", "create_wandb_logger", "log_model_artifact"},
    "src/system_metrics.py": {"collect_system_metrics"},
    "src/callbacks/__init__.py": {"StopFileCallback", "TimingCallback"},
    "src/gpu_lock.py": {"GpuLock"},
}


@check("STR-2", "shared code (configs, W&B, system metrics, callbacks, GPU lock) lives once in src/")
def shared_code(project: Project) -> str:
    for path in SHARED:
        project.tree(path)
    shared_names = set().union(*SHARED.values())
    for path in project_sources(project):
        if path.startswith("part"):
            tree = project.tree(path)
            defined = {n.name for n in nodes(tree) if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
            require(
                not defined & shared_names,
                f"{path} defines {', '.join(sorted(defined & shared_names))} again",
            )
    return "src/ has " + ", ".join(SHARED) + "; no part redefines them"


@check("STR-3", "each train.py has a main() entry point")
def has_main(project: Project) -> str:
    for part in project.parts:
        tree = project.tree(f"{part.name}/train.py")
        require(
            any(isinstance(n, ast.FunctionDef) and n.name == "main" for n in tree.body),
            f"{part.name}/train.py: no main()",
        )
    return "every train.py defines main()"


# LIT: the Lightning contract


@check("LIT-1", "LightningModule: save_hyperparameters, forward, steps logging, configure_optimizers", "nn")
def lightning_contract(project: Project) -> str:
    for part in parts(project, "nn"):
        cls = lightning_module(project, part)
        found = methods(cls)
        for name in ("__init__", "forward", "training_step", "validation_step", "configure_optimizers"):
            require(name in found, f"{part.name}/model.py: {cls.name} has no {name}()")
        require(
            calls(found["__init__"], "save_hyperparameters"),
            f"{part.name}/model.py: __init__ never calls self.save_hyperparameters()",
        )
        for step in ("training_step", "validation_step"):
            require(
                calls(found[step], "log")
                or calls(found[step], "log_dict")
                or _logs_via_helper(cls, found[step]),
                f"{part.name}/model.py: {step} logs nothing with self.log()",
            )
    return "every LightningModule has the LIT-1 methods"


def _logs_via_helper(cls: ast.ClassDef, step: ast.FunctionDef) -> bool:
    """A step that calls a helper method of its class that logs."""
    helpers = methods(cls)
    for call in nodes(step):
        if isinstance(call, ast.Call) and name_of(call) in helpers and name_of(call) != step.name:
            helper = helpers[name_of(call)]
            if calls(helper, "log") or calls(helper, "log_dict"):
                return True
    return False


@check("LIT-2", "LightningDataModule: setup(stage) and the three dataloaders", "nn")
def datamodule_contract(project: Project) -> str:
    for part in parts(project, "nn"):
        cls = datamodule(project, part)
        wanted = ["train_dataloader", "val_dataloader", "test_dataloader"]
        if part.kind == "sl_neural":
            wanted.insert(0, "setup")  # RL builds its collector in train_dataloader instead
        missing = [name for name in wanted if name not in methods(cls)]
        require(not missing, f"{part.name}/data.py: {cls.name} lacks {', '.join(missing)}")
    return "every DataModule has its dataloaders"


@check("LIT-3", "model.py exposes save_model() and load_model_from_checkpoint()", "nn")
def model_helpers(project: Project) -> str:
    for part in parts(project, "nn"):
        tree = project.tree(f"{part.name}/model.py")
        top = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
        missing = {"save_model", "load_model_from_checkpoint"} - top
        require(not missing, f"{part.name}/model.py lacks {', '.join(sorted(missing))}")
    return "save_model() and load_model_from_checkpoint() in every model.py"


@check("LIT-4", "weight decay only on dim >= 2, fused AdamW, clipping through the Trainer", "nn")
def optimizer(project: Project) -> str:
    tree = project.tree("src/optim.py")
    compares = [ast.unparse(n) for n in nodes(tree) if isinstance(n, ast.Compare)]
    require(
        any(".dim() >= 2" in text for text in compares), "src/optim.py: no `p.dim() >= 2` weight-decay group"
    )
    require(
        any(keyword(c, "fused") for c in calls(tree, "AdamW")), "src/optim.py: AdamW(..., fused=...) missing"
    )
    for part in parts(project, "nn"):
        configure = methods(lightning_module(project, part)).get("configure_optimizers")
        require(
            configure and calls(configure, "adamw"),
            f"{part.name}/model.py: configure_optimizers() does not use src.optim.adamw",
        )
    if "sl_neural" in project.kinds:
        keys = {constant(k) for d in nodes(project.tree(TRAINER)) if isinstance(d, ast.Dict) for k in d.keys}
        require("gradient_clip_val" in keys, f"{TRAINER}: no gradient_clip_val for the Trainer")
    return "decay on dim >= 2 only, fused AdamW, Trainer clipping"


# LOG: logging and tracking


@check("LOG-1", "WandbLogger(project=..., name=cfg.name, log_model=False); W&B can be offline or off")
def wandb_logger(project: Project) -> str:
    tree = project.tree(WANDB)
    init = one_call(tree, "init", WANDB)
    require(keyword(init, "mode") is not None, f"{WANDB}: wandb.init() has no mode= (offline / disabled)")
    if project.kinds & TAGS["nn"]:
        logger = one_call(tree, "WandbLogger", WANDB)
        require(keyword(logger, "project") is not None, f"{WANDB}: WandbLogger has no project=")
        require(
            source(keyword(logger, "name")).endswith(".name"), f"{WANDB}: WandbLogger name= is not cfg.name"
        )
        require(
            constant(keyword(logger, "log_model"), True) is False,
            f"{WANDB}: WandbLogger log_model= is not False",
        )
    for part in project.parts:
        wanted = "setup_run" if part.kind == "sl_tree" else "create_wandb_logger"
        require(
            calls(main_with_config(project, part), wanted),
            f"{part.name}/train.py: main_with_config() never calls {wanted}()",
        )
    return "WandbLogger(project, name=cfg.name, log_model=False); wandb.init(mode=...)"


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


# PRF: profiling and timing


@check("PRF-1", "a Lightning profiler (SimpleProfiler or AdvancedProfiler)", "nn")
def profiler(project: Project) -> str:
    tree = project.tree(TRAINER)
    require(
        keyword(one_call(tree, "Trainer", TRAINER), "profiler") is not None,
        f"{TRAINER}: Trainer(profiler=...) missing",
    )
    require(
        {"SimpleProfiler", "AdvancedProfiler"} & set(names(tree)),
        f"{TRAINER}: no SimpleProfiler / AdvancedProfiler",
    )
    return "Trainer(profiler=SimpleProfiler | AdvancedProfiler)"


@check("PRF-2", "a timing callback with on_train_batch_start/end and on_validation_start/end", "nn")
def timing_callback(project: Project) -> str:
    where, node = callbacks_list(project, "sl_neural")
    require(calls(node, "TimingCallback"), f"{where} lacks TimingCallback")
    cls = next(
        (c for c in classes(project.tree("src/callbacks/timing.py")) if c.name == "TimingCallback"), None
    )
    require(cls, "src/callbacks/timing.py: no TimingCallback")
    hooks = {"on_train_batch_start", "on_train_batch_end", "on_validation_start", "on_validation_end"}
    missing = hooks - set(methods(cls))
    require(not missing, f"TimingCallback lacks {', '.join(sorted(missing))}")
    return "TimingCallback in the callbacks, with its four hooks"


# PRC: precision


@check("PRC-1", 'bf16-mixed, never fp16: no GradScaler, no "16-mixed"', "nn")
def bf16(project: Project) -> str:
    require(
        "bf16-mixed" in {constant(n) for n in nodes(project.tree("src/precision.py"))},
        'src/precision.py never picks "bf16-mixed"',
    )
    require(
        keyword(one_call(project.tree(TRAINER), "Trainer", TRAINER), "precision") is not None,
        f"{TRAINER}: Trainer(precision=...) missing",
    )
    for path in project_sources(project):
        tree = project.tree(path)
        require("GradScaler" not in set(names(tree)), f"{path} uses a GradScaler")
        require(not {"16-mixed", "fp16"} & constants(tree), f'{path} asks for fp16 ("16-mixed")')
    return "bf16-mixed chosen in src/precision.py; no GradScaler, no fp16"


@check("PRC-2", "no manual autocast in model code", "nn")
def no_autocast(project: Project) -> str:
    for part in parts(project, "nn"):
        for name in ("model.py", "data.py", "train.py"):
            path = f"{part.name}/{name}"
            require(
                "autocast" not in set(names(project.tree(path))),
                f"{path} calls autocast; Lightning's precision does it",
            )
    return "no autocast in any Lightning part"


@check("PRC-3", '"32-true" chosen automatically where bf16 is unsupported', "nn")
def fp32_fallback(project: Project) -> str:
    tree = project.tree("src/precision.py")
    require(calls(tree, "is_bf16_supported"), "src/precision.py never asks is_bf16_supported()")
    require("32-true" in {constant(n) for n in nodes(tree)}, 'src/precision.py never falls back to "32-true"')
    return 'is_bf16_supported() decides between bf16-mixed and "32-true"'


# RL: TorchRL


def rl_part(project: Project) -> Part:
    part = project.part("rl")
    require(part, "no RL part")
    return part


def rl_files(project: Project) -> list[str]:
    part = rl_part(project)
    return [str(p.relative_to(project.root)) for p in sorted((project.root / part.name).glob("*.py"))]


@check("RL-1", "ParallelEnv(num_workers=cfg.num_envs), never SerialEnv", "rl")
def parallel_env(project: Project) -> str:
    for path in rl_files(project):
        if not path.endswith("/benchmark.py"):  # which measures ParallelEnv against SerialEnv
            require("SerialEnv" not in set(names(project.tree(path))), f"{path} uses SerialEnv")
    path = f"{rl_part(project).name}/data.py"
    env = one_call(project.tree(path), "ParallelEnv", path)
    workers = keyword(env, "num_workers") or (env.args[0] if env.args else None)
    require(
        source(workers).endswith("num_envs"),
        f"{path}: ParallelEnv's num_workers is {source(workers)!r}, not cfg.num_envs",
    )
    return "ParallelEnv(cfg.num_envs, ...)"


@check("RL-2", "the env factory is picklable: a module-level function or functools.partial", "rl")
def picklable_factory(project: Project) -> str:
    path = f"{rl_part(project).name}/data.py"
    tree = project.tree(path)
    env = one_call(tree, "ParallelEnv", path)
    factory = keyword(env, "create_env_fn") or (env.args[1] if len(env.args) > 1 else None)
    top = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    imported = {a.asname or a.name for n in tree.body if isinstance(n, ast.ImportFrom) for a in n.names}
    if isinstance(factory, ast.Call) and name_of(factory) == "partial":
        factory = factory.args[0] if factory.args else None
    require(
        isinstance(factory, ast.Name) and factory.id in top | imported,
        f"{path}: ParallelEnv's factory {source(factory)!r} is not a module-level function",
    )
    return f"ParallelEnv's factory is the module-level {factory.id}"


@check("RL-3", "env.close() on every exit path (no zombie workers)", "rl")
def env_closed(project: Project) -> str:
    part = rl_part(project)
    body = main_with_config(project, part)
    closing = [
        t for t in nodes(body) if isinstance(t, ast.Try) and any(calls(s, "close") for s in t.finalbody)
    ]
    require(closing, f"{part.name}/train.py: main_with_config() closes the environments in no `finally:`")
    cls = datamodule(project, part)
    teardown = methods(cls).get("teardown")
    require(
        teardown and calls(teardown, "close"),
        f"{part.name}/data.py: {cls.name}.teardown() does not close the envs",
    )
    close = methods(cls).get("close")
    require(
        close and calls(close, "close") and calls(close, "shutdown"),
        f"{part.name}/data.py: {cls.name}.close() does not shut the collector and close the envs",
    )
    return "closed in teardown() and in train.py's finally:"


@check("RL-4", "RewardSum() appended so episode rewards are tracked", "rl")
def reward_sum(project: Project) -> str:
    path = f"{rl_part(project).name}/data.py"
    require(calls(project.tree(path), "RewardSum"), f"{path}: no RewardSum() transform")
    return "RewardSum() on the environments"


def custom_envs(project: Project) -> list[tuple[str, ast.ClassDef]]:
    return [(path, cls) for path in rl_files(project) for cls in subclasses(project.tree(path), "EnvBase")]


def emitted_keys(cls: ast.ClassDef) -> set[str]:
    """Keys of the TensorDicts (dict literals) a custom env builds in its methods."""
    keys = set()
    for call in calls(cls, "TensorDict"):
        if call.args and isinstance(call.args[0], ast.Dict):
            keys |= {constant(k) for k in call.args[0].keys if isinstance(constant(k), str)}
    return keys


def spec_keys(cls: ast.ClassDef, spec: str) -> set[str]:
    for node in nodes(cls):
        assigned = isinstance(node, ast.Assign) and any(name_of(t) == spec for t in node.targets)
        if assigned and isinstance(node.value, ast.Call):
            return {kw.arg for kw in node.value.keywords if kw.arg}
    return set()


@check("RL-5", "every field a custom env emits has a spec (diagnostics: Unbounded)", "rl")
def diagnostic_specs(project: Project) -> str:
    envs = custom_envs(project)
    if not envs:
        return "no custom env (gymnasium envs bring their own specs)"
    for path, cls in envs:
        extra = emitted_keys(cls) - {"done", "terminated", "truncated", "reward"}
        missing = extra - spec_keys(cls, "observation_spec")
        require(
            not missing,
            f"{path}: {cls.name} emits {', '.join(sorted(missing))} without an observation_spec entry",
        )
    return f"{len(envs)} custom env(s): every emitted field is in observation_spec"


@check("RL-6", "step_and_maybe_reset(), not step() plus a manual step_mdp()", "rl")
def no_step_mdp(project: Project) -> str:
    for path in rl_files(project):
        require(
            "step_mdp" not in set(names(project.tree(path))),
            f"{path} uses step_mdp(); use env.step_and_maybe_reset()",
        )
    return "no manual step_mdp() (the collector steps with step_and_maybe_reset)"


@check("RL-7", "a custom env's device is a torch.device", "rl")
def env_device(project: Project) -> str:
    envs = custom_envs(project)
    for path, cls in envs:
        init = methods(cls).get("__init__")
        supers = [c for c in calls(init, "__init__")] if init else []
        device = keyword(supers[0], "device") if supers else None
        require(
            name_of(device) == "device" and isinstance(device, ast.Call),
            f"{path}: {cls.name} passes device={source(device)!r}, not torch.device(...)",
        )
    return f"{len(envs)} custom env(s) built on torch.device"


THREAD_VARIABLES = {"OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "OMP_NUM_THREADS"}


@check("RL-8", "thread variables set with os.environ.setdefault before numpy/torch imports", "rl")
def thread_variables(project: Project) -> str:
    part = rl_part(project)
    for name in ("__init__.py", "train.py"):
        path = f"{part.name}/{name}"
        seen: set[str] = set()
        for node in project.tree(path).body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                module = node.module if isinstance(node, ast.ImportFrom) else node.names[0].name
                if module not in {"os", "__future__"}:
                    break
            for call in calls(node, "setdefault"):
                if (
                    call.args
                    and constant(call.args[0]) in THREAD_VARIABLES
                    and constant(call.args[1] if len(call.args) > 1 else None) == "1"
                ):
                    seen.add(constant(call.args[0]))
        missing = THREAD_VARIABLES - seen
        require(
            not missing, f"{path}: {', '.join(sorted(missing))} not set to 1 before the first other import"
        )
    return "thread variables set before any other import in __init__.py and train.py"


EPISODE_KEYS = {"reward", "done", "terminated", "truncated", "episode_reward"}


@check("RL-9", 'rewards and done flags read from batch["next"]', "rl")
def next_keys(project: Project) -> str:
    path = f"{rl_part(project).name}/model.py"
    tree = project.tree(path)
    # Names bound to a step's result, e.g. `final = episode["next"][-1]`.
    from_next = {
        source(target)
        for node in nodes(tree)
        if isinstance(node, ast.Assign) and "next" in constants(node.value)
        for target in node.targets
    }
    for node in nodes(tree):
        if isinstance(node, ast.Subscript) and constant(node.slice) in EPISODE_KEYS:
            inner = node.value
            read_from_next = source(inner) in from_next or (
                isinstance(inner, ast.Subscript) and "next" in constants(inner.slice)
            )
            require(
                read_from_next,
                f"{path}:{node.lineno}: {source(node)} reads the batch root, not batch['next']",
            )
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Tuple) and node.slice.elts:
            first = constant(node.slice.elts[0])
            require(
                first != "reward" and first not in EPISODE_KEYS,
                f"{path}:{node.lineno}: {source(node)} reads the batch root",
            )
    return 'rewards and done flags come from ["next", ...]'


@check("RL-10", "current TorchRL spec names only (Bounded, Composite, Unbounded, ...)", "rl")
def spec_names(project: Project) -> str:
    for path in rl_files(project):
        old = set(names(project.tree(path))) & set(DEPRECATED_SPECS)
        require(not old, f"{path} uses " + ", ".join(f"{n} (now {DEPRECATED_SPECS[n]})" for n in sorted(old)))
    return "no deprecated spec classes"


@check("RL-11", "an actual_updates counter averages the update metrics", "rl")
def actual_updates(project: Project) -> str:
    path = f"{rl_part(project).name}/model.py"
    tree = project.tree(path)
    strings = {constant(n) for n in nodes(tree) if isinstance(constant(n), str)}
    require(any("actual_updates" in s for s in strings), f"{path}: no actual_updates metric")
    divides = [
        n
        for n in nodes(tree)
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Div) and "updates" in source(n.right)
    ]
    require(divides, f"{path}: update metrics are not divided by the updates really made")
    return "sums divided by the updates made, logged as batch/actual_updates"


@check("RL-12", "isfinite(loss) before backward, isfinite(grad norm) after clipping, KL early stop", "rl")
def finite_updates(project: Project) -> str:
    path = f"{rl_part(project).name}/model.py"
    tree = project.tree(path)
    checks = calls(tree, "isfinite")
    backward = calls(tree, "manual_backward") or calls(tree, "backward")
    require(backward, f"{path}: no backward pass")
    require(
        any("loss" in source(c) and c.lineno < backward[0].lineno for c in checks),
        f"{path}: isfinite(loss) is not checked before backward",
    )
    norms = {
        source(t)
        for n in nodes(tree)
        if isinstance(n, ast.Assign) and calls(n.value, "clip_grad_norm_")
        for t in n.targets
    }
    require(
        any(source(c.args[0]) in norms for c in checks if c.args),
        f"{path}: the clipped gradient norms are not checked with isfinite",
    )
    kl_stop = [
        n
        for n in nodes(tree)
        if isinstance(n, ast.If) and "kl" in source(n.test) and any(isinstance(s, ast.Break) for s in n.body)
    ]
    require(kl_stop, f"{path}: no KL early stopping (`if ...kl... > target: break`)")
    return "finite loss and gradient norms checked; KL early stopping"


@check("RL-13", "clip_grad_norm_() called for both actor and critic", "rl")
def clipping(project: Project) -> str:
    path = f"{rl_part(project).name}/model.py"
    clipped = {source(c.args[0]) for c in calls(project.tree(path), "clip_grad_norm_") if c.args}
    require(
        len(clipped) >= 2,
        f"{path}: clip_grad_norm_ clips {sorted(clipped) or 'nothing'}, want actor and critic separately",
    )
    return "clip_grad_norm_ on " + ", ".join(sorted(clipped))


# MEM: batch size and memory


@check("MEM-1", 'BatchSizeFinder(mode="binsearch"); no hand-written batch-size probing', "nn")
def batch_size_finder(project: Project) -> str:
    finder = one_call(project.tree(TRAINER), "BatchSizeFinder", TRAINER)
    require(
        constant(keyword(finder, "mode")) == "binsearch",
        f'{TRAINER}: BatchSizeFinder mode is not "binsearch"',
    )
    for path in project_sources(project):
        handlers = [node for node in nodes(project.tree(path)) if isinstance(node, ast.ExceptHandler)]
        for handler in handlers:
            catches_oom = "OutOfMemoryError" in source(handler.type) or any(
                "out of memory" in str(value) for value in constants(handler)
            )
            if catches_oom:
                raise Failed(
                    f"{path}:{handler.lineno}: catches out-of-memory errors: hand-written batch-size probing?"
                )
    return 'BatchSizeFinder(mode="binsearch"), no OutOfMemoryError probing'


@check("MEM-2", "the LightningModule exposes a batch_size attribute", "nn")
def batch_size_attribute(project: Project) -> str:
    for part, init in lightning_inits(project):
        require(
            self_assigns(init, "batch_size"), f"{part.name}/model.py: __init__ does not set self.batch_size"
        )
    return "self.batch_size set in every LightningModule"


@check("MEM-3", "accumulate_grad_batches=cfg.gradient_accumulation_steps", "nn")
def accumulation(project: Project) -> str:
    for node in nodes(project.tree(TRAINER)):
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if constant(key) == "accumulate_grad_batches" and "gradient_accumulation_steps" in source(
                    value
                ):
                    return "Trainer(accumulate_grad_batches=cfg.gradient_accumulation_steps)"
    trainer = one_call(project.tree(TRAINER), "Trainer", TRAINER)
    require(
        "gradient_accumulation_steps" in source(keyword(trainer, "accumulate_grad_batches")),
        f"{TRAINER}: accumulate_grad_batches is not cfg.gradient_accumulation_steps",
    )
    return "Trainer(accumulate_grad_batches=cfg.gradient_accumulation_steps)"


@check("MEM-4", "cleanup_vram(): del model and trainer, empty_cache(), gc.collect()", "nn")
def cleanup(project: Project) -> str:
    memory = function(project.tree("src/memory.py"), "cleanup_vram")
    require(memory, "src/memory.py: no cleanup_vram()")
    empty, collect = calls(memory, "empty_cache"), calls(memory, "collect")
    require(
        empty and any(c.lineno > empty[0].lineno for c in collect),
        "cleanup_vram(): no gc.collect() after torch.cuda.empty_cache()",
    )
    for part in parts(project, "nn"):
        tree = project.tree(f"{part.name}/train.py")
        deleted = [
            n
            for n in nodes(tree)
            if isinstance(n, ast.Delete) and {"model", "trainer"} <= {source(t) for t in n.targets}
        ]
        cleaned = calls(tree, "cleanup_vram")
        require(
            deleted and cleaned and deleted[0].lineno < cleaned[0].lineno,
            f"{part.name}/train.py: no `del model, trainer` then cleanup_vram()",
        )
    return "del model, trainer; cleanup_vram() empties the cache then collects"


# MAIN: the order of main()


def main_steps(project: Project, part: Part) -> list[tuple[str, Callable[[ast.Call], bool]]]:
    """MAIN-1's steps, each with how to recognise its call in main_with_config()."""
    model_tree = project.tree(f"{part.name}/model.py")
    modules = {cls.name for cls in subclasses(model_tree, "LightningModule")}
    # Factories of the module too, e.g. `def build_model(...) -> PPOModule`.
    modules |= {
        node.name
        for node in model_tree.body
        if isinstance(node, ast.FunctionDef) and source(node.returns) in modules
    }
    data_module = datamodule(project, part).name
    return [
        ("seed_everything", lambda c: name_of(c) == "seed_everything"),
        (data_module, lambda c: name_of(c) == data_module),
        ("the LightningModule", lambda c: name_of(c) in modules),
        ("WandbLogger", lambda c: name_of(c) in {"create_wandb_logger", "WandbLogger"}),
        ("Trainer", lambda c: name_of(c) in {"build_trainer", "Trainer"}),
        ("trainer.fit", lambda c: name_of(c) == "fit"),
        (
            'trainer.test(ckpt_path="best")',
            lambda c: name_of(c) == "test" and constant(keyword(c, "ckpt_path")) == "best",
        ),
        ("wandb.finish", lambda c: name_of(c) in {"finish_run", "finish"}),
    ]


@check(
    "MAIN-1", "seed -> DataModule -> module -> WandbLogger -> Trainer -> fit -> test(best) -> finish", "nn"
)
def main_order(project: Project) -> str:
    for part in parts(project, "nn"):
        body = main_with_config(project, part)
        every = sorted(
            (n for n in nodes(body) if isinstance(n, ast.Call)), key=lambda n: (n.lineno, n.col_offset)
        )
        line = 0
        for step, matches in main_steps(project, part):
            found = [c.lineno for c in every if matches(c) and c.lineno >= line]
            require(found, f"{part.name}/train.py: main_with_config() has no {step} after line {line}")
            line = found[0]
    return "every Lightning part's main_with_config() follows the MAIN-1 order"


# CB: callbacks


@check("CB-1", "EarlyStopping(monitor, patience=cfg.patience, mode) (tree: early-stopping rounds)")
def early_stopping(project: Project) -> str:
    if project.kinds & TAGS["nn"]:
        where, node = callbacks_list(project, "sl_neural")
        stop = one_call(node, "EarlyStopping", where)
        for name in ("monitor", "mode"):
            require(keyword(stop, name) is not None, f"{where}: EarlyStopping has no {name}=")
        require(
            "patience" in source(keyword(stop, "patience")),
            f"{where}: EarlyStopping patience is not cfg.patience",
        )
    if "sl_tree" in project.kinds:
        where, node = callbacks_list(project, "sl_tree")
        rounds = one_call(node, "EarlyStoppingRounds", where)
        require(
            "early_stopping_rounds" in source(rounds),
            f"{where}: EarlyStoppingRounds is not given cfg.early_stopping_rounds",
        )
    return "early stopping on the monitored metric with the config's patience"


@check("CB-2", "ModelCheckpoint: the best (monitored, save_top_k=1) and the last", "nn")
def model_checkpoint(project: Project) -> str:
    where, node = callbacks_list(project, "sl_neural")
    checkpoints = calls(node, "ModelCheckpoint")
    best = [c for c in checkpoints if constant(keyword(c, "filename")) == "best"]
    require(best, f'{where}: no ModelCheckpoint(filename="best")')
    require(
        keyword(best[0], "monitor") is not None and keyword(best[0], "mode") is not None,
        f"{where}: the best checkpoint has no monitor= / mode=",
    )
    require(
        constant(keyword(best[0], "save_top_k"), 1) == 1,
        f"{where}: the best checkpoint keeps save_top_k != 1",
    )
    last = [
        c
        for c in checkpoints
        if constant(keyword(c, "filename")) == "last" or constant(keyword(c, "save_last")) is True
    ]
    require(last, f"{where}: nothing saves last.ckpt")
    return "checkpoints/best.ckpt and checkpoints/last.ckpt"


@check("CB-3", 'LearningRateMonitor(logging_interval="epoch")', "nn")
def lr_monitor(project: Project) -> str:
    where, node = callbacks_list(project, "sl_neural")
    monitor = one_call(node, "LearningRateMonitor", where)
    require(
        constant(keyword(monitor, "logging_interval")) == "epoch",
        f'{where}: LearningRateMonitor logging_interval is not "epoch"',
    )
    return 'LearningRateMonitor(logging_interval="epoch")'


@check("CB-4", "a STOP file, checked between epochs, ends the run gracefully")
def stop_file(project: Project) -> str:
    if project.kinds & TAGS["nn"]:
        where, node = callbacks_list(project, "sl_neural")
        require(calls(node, "StopFileCallback"), f"{where} lacks StopFileCallback")
        cls = next(
            (c for c in classes(project.tree("src/callbacks/stop_file.py")) if c.name == "StopFileCallback"),
            None,
        )
        hook = methods(cls).get("on_train_epoch_end") if cls else None
        sets = hook and any(
            isinstance(n, ast.Assign) and any(name_of(t) == "should_stop" for t in n.targets)
            for n in nodes(hook)
        )
        require(
            sets,
            "src/callbacks/stop_file.py: StopFileCallback.on_train_epoch_end never sets trainer.should_stop",
        )
    if "sl_tree" in project.kinds:
        where, node = callbacks_list(project, "sl_tree")
        require(calls(node, "StopFileRounds"), f"{where} lacks StopFileRounds")
    return "the STOP-file callback is in every callbacks list"


# OPS: running on a shared GPU machine


@check("OPS-1", 'main() runs inside GpuLock() under if __name__ == "__main__"')
def gpu_lock(project: Project) -> str:
    lock = project.tree("src/gpu_lock.py")
    require(calls(lock, "flock"), "src/gpu_lock.py: no fcntl.flock")
    require(
        "/tmp/gpu-task.lock" in {constant(n) for n in nodes(lock)},
        "src/gpu_lock.py: the default lock is not /tmp/gpu-task.lock",
    )
    for part in project.parts:
        tree = project.tree(f"{part.name}/train.py")
        guard = [
            n
            for n in tree.body
            if isinstance(n, ast.If) and "__name__" in source(n.test) and calls(n, "main")
        ]
        require(guard, f'{part.name}/train.py: no `if __name__ == "__main__": main()`')
        main = function(tree, "main")
        locked = (
            [
                w
                for w in nodes(main)
                if isinstance(w, ast.With) and any(name_of(i.context_expr) == "GpuLock" for i in w.items)
            ]
            if main
            else []
        )
        require(locked, f"{part.name}/train.py: main() does not run inside `with GpuLock()`")
    return "every main() runs under GpuLock(), flock on /tmp/gpu-task.lock"


@check("OPS-2", "one command starts a long run detached: PYTHONUNBUFFERED=1 nohup ... &")
def detached(project: Project) -> str:
    words = shlex.split(project.text("scripts/detach.sh"), comments=True)
    for word in ("PYTHONUNBUFFERED=1", "nohup"):
        require(word in words, f"scripts/detach.sh: no {word}")
    return "scripts/detach.sh runs PYTHONUNBUFFERED=1 nohup ... &"


# OUT: outputs


@check("OUT-1", "runs write to {base_dir}/{name}_{YYYYMMDD_HHMMSS}/; Trainer(default_root_dir=run_dir)")
def run_dir_names(project: Project) -> str:
    tree = project.tree("src/run_dir.py")
    stamps = [n for n in tree.body if isinstance(n, ast.Assign) and source(n.targets[0]) == "STAMP_FORMAT"]
    require(
        stamps and constant(stamps[0].value) == "%Y%m%d_%H%M%S",
        'src/run_dir.py: STAMP_FORMAT is not "%Y%m%d_%H%M%S"',
    )
    if project.kinds & TAGS["nn"]:
        trainer = one_call(project.tree(TRAINER), "Trainer", TRAINER)
        require(
            keyword(trainer, "default_root_dir") is not None,
            f"{TRAINER}: Trainer(default_root_dir=run_dir) missing",
        )
    return "{name}_{YYYYMMDD_HHMMSS} run directories"


@check("OUT-4", "metrics.jsonl, one line per logging event")
def metrics_jsonl(project: Project) -> str:
    if project.kinds & TAGS["nn"]:
        trainer = function(project.tree(TRAINER), "build_trainer")
        require(trainer and calls(trainer, "JsonlLogger"), f"{TRAINER}: build_trainer() adds no JsonlLogger")
    if "sl_tree" in project.kinds:
        where, node = callbacks_list(project, "sl_tree")
        require(calls(node, "RoundMetrics"), f"{where} lacks RoundMetrics (metrics.jsonl)")
    return "metrics.jsonl written by every part"


# SWP: sweeps


@check("SWP-1", "partN/sweep.py", "sweep")
def sweep_files(project: Project) -> str:
    missing = [p.name for p in project.parts if not (project.root / p.name / "sweep.py").is_file()]
    require(not missing, f"no sweep.py in {', '.join(missing)}")
    return "every part has sweep.py"


@check("SWP-2", "main_with_config(cfg) split out of main(), used by the sweep", "sweep")
def split_main(project: Project) -> str:
    for part in project.parts:
        main_with_config(project, part)
        main = function(project.tree(f"{part.name}/train.py"), "main")
        require(
            main and calls(main, "main_with_config"),
            f"{part.name}/train.py: main() does not call main_with_config()",
        )
        require(
            "main_with_config" in set(names(project.tree(f"{part.name}/sweep.py"))),
            f"{part.name}/sweep.py does not train through main_with_config",
        )
    return "main() and sweep.py both call main_with_config()"


@check("SWP-3", "setup_run() joins a sweep's run (wandb.run.sweep_id) instead of wandb.init()", "sweep")
def sweep_aware(project: Project) -> str:
    setup = function(project.tree(WANDB), "setup_run")
    require(setup, f"{WANDB}: no setup_run()")
    joins = [
        n
        for n in nodes(setup)
        if isinstance(n, ast.If) and "sweep_id" in source(n.test) and calls(n, "update")
    ]
    init = calls(setup, "init")
    require(
        joins and init and joins[0].lineno < init[0].lineno,
        f"{WANDB}: setup_run() does not update the sweep run's config before wandb.init()",
    )
    return "setup_run() updates the sweep's run when wandb.run.sweep_id is set"


@check("SWP-4", "an `architecture` parameter decoded into config fields", "sweep")
def architecture(project: Project) -> str:
    for part in project.parts:
        tree = project.tree(f"{part.name}/sweep.py")
        spaces = [
            n.value for n in tree.body if isinstance(n, ast.Assign) and source(n.targets[0]) == "SEARCH_SPACE"
        ]
        require(
            spaces
            and isinstance(spaces[0], ast.Dict)
            and "architecture" in {constant(k) for k in spaces[0].keys},
            f"{part.name}/sweep.py: no architecture in SEARCH_SPACE",
        )
    decode = function(project.tree(SWEEP), "decode")
    require(
        decode and "architecture" in {constant(n) for n in nodes(decode)},
        f"{SWEEP}: decode() does not expand architecture",
    )
    return "architecture presets decoded into fields"


@check("SWP-5", "--max-hours bounds the whole sweep", "sweep")
def sweep_budget(project: Project) -> str:
    tree = project.tree(SWEEP)
    require(
        [c for c in calls(tree, "add_argument") if c.args and constant(c.args[0]) == "--max-hours"],
        f"{SWEEP}: no --max-hours",
    )
    require("deadline" in set(names(tree)), f"{SWEEP}: no sweep-wide deadline")
    return "--max-hours sets one deadline for the sweep"


@check("SWP-6", "documented launch in tmux (`tmux new -s sweep`)", "sweep")
def tmux_documented(project: Project) -> str:
    require("tmux new -s sweep" in project.text("README.md"), "README.md does not show `tmux new -s sweep`")
    return "README.md shows `tmux new -s sweep`"


@check("SWP-7", "a trial's exceptions are caught, then cleanup_vram() and two gc.collect()", "sweep")
def trial_cleanup(project: Project) -> str:
    tree = project.tree(SWEEP)
    for node in nodes(tree):
        if isinstance(node, ast.FunctionDef):
            tries = [
                t
                for t in node.body
                if isinstance(t, ast.Try) and any("Exception" in source(h.type) for h in t.handlers)
            ]
            after = [s for s in node.body if tries and s.lineno > tries[0].lineno]
            cleaned = [c for s in after for c in calls(s, "cleanup_vram")]
            collected = [c for s in after for c in calls(s, "collect")]
            if cleaned and len(collected) >= 2:
                return f"{node.name}() catches, then cleanup_vram() and gc.collect() twice"
    raise Failed(
        f"{SWEEP}: no trial function that catches Exception, then calls cleanup_vram() and gc.collect() twice"
    )


# RES, DATA


@check("RES-3", "checkpoints load onto any device: torch.load(map_location=...)")
def map_location(project: Project) -> str:
    loads = 0
    for path in project_sources(project):
        for call in calls(project.tree(path), "load"):
            if source(call.func) == "torch.load":
                loads += 1
                require(
                    keyword(call, "map_location") is not None,
                    f"{path}:{call.lineno}: torch.load without map_location=",
                )
    return f"{loads} torch.load call(s), all with map_location="


@check("DATA-1", "input data validated before training, naming the bad column", "sl")
def data_validated(project: Project) -> str:
    for part in parts(project, "sl"):
        require(
            calls(project.tree(f"{part.name}/data.py"), "validate_table"),
            f"{part.name}/data.py never calls validate_table() (src/data_checks.py)",
        )
    return "every supervised part validates its table"
