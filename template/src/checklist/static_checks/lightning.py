"""Static checks of the Lightning parts and their callbacks (LIT, PRF, PRC, MEM, MAIN, CB)."""

from __future__ import annotations

import ast
from collections.abc import Callable

from src.checklist.layout import Part, Project
from src.checklist.registry import TAGS, Failed, check
from src.checklist.static_checks.common import (
    TRAINER,
    callbacks_list,
    calls_anywhere,
    datamodule,
    keyword_arguments,
    lightning_inits,
    lightning_module,
    main_with_config,
    never_named,
    one_call,
    parts,
    project_sources,
    require,
)
from src.checklist.syntax import (
    calls,
    classes,
    constant,
    constants,
    function,
    keyword,
    methods,
    name_of,
    names,
    nodes,
    self_assigns,
    source,
    subclasses,
)

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
        values = [constant(value, "set") for _, value in keyword_arguments(project, "gradient_clip_val")]
        require(any(values), "no Trainer(gradient_clip_val=...) anywhere: not clipping through the Trainer")
    return "decay on dim >= 2 only, fused AdamW, Trainer clipping"


# PRF: profiling and timing


@check("PRF-1", "a Lightning profiler (SimpleProfiler or AdvancedProfiler)", "nn")
def profiler(project: Project) -> str:
    tree = project.tree(TRAINER)
    require(
        keyword(one_call(tree, "Trainer", TRAINER), "profiler") is not None,
        f"{TRAINER}: Trainer(profiler=...) missing",
    )
    require(
        {"SimpleProfiler", "AdvancedProfiler"} & names(tree),
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
        require("GradScaler" not in names(tree), f"{path} uses a GradScaler")
        require(not {"16-mixed", "fp16"} & constants(tree), f'{path} asks for fp16 ("16-mixed")')
    return "bf16-mixed chosen in src/precision.py; no GradScaler, no fp16"


@check("PRC-2", "no manual autocast in model code", "nn")
def no_autocast(project: Project) -> str:
    files = ("model.py", "data.py", "train.py")
    model_code = [f"{part.name}/{name}" for part in parts(project, "nn") for name in files]
    never_named(project, model_code, "autocast", "Lightning's precision setting does it")
    return "no autocast in any Lightning part"


@check("PRC-3", '"32-true" chosen automatically where bf16 is unsupported', "nn")
def fp32_fallback(project: Project) -> str:
    tree = project.tree("src/precision.py")
    require(calls(tree, "is_bf16_supported"), "src/precision.py never asks is_bf16_supported()")
    require("32-true" in {constant(n) for n in nodes(tree)}, 'src/precision.py never falls back to "32-true"')
    return 'is_bf16_supported() decides between bf16-mixed and "32-true"'


# MEM: batch size and memory


@check("MEM-1", 'BatchSizeFinder(mode="binsearch"); no hand-written batch-size probing', "nn")
def batch_size_finder(project: Project) -> str:
    # PPO's batch is its rollout and minibatch, which no finder can size; RL alone
    # passes on the absence of hand-written probing.
    if "sl_neural" in project.kinds:
        modes = [constant(keyword(call, "mode")) for _, call in calls_anywhere(project, "BatchSizeFinder")]
        require(modes, "no BatchSizeFinder(...) anywhere")
        require("binsearch" in modes, f'BatchSizeFinder mode is {modes[0]!r}, not "binsearch"')
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
    if "sl_neural" not in project.kinds:
        return "no supervised neural part; PPO steps its optimizer once per minibatch"
    values = [source(value) for _, value in keyword_arguments(project, "accumulate_grad_batches")]
    require(
        any("gradient_accumulation_steps" in value for value in values),
        "no Trainer(accumulate_grad_batches=cfg.gradient_accumulation_steps) anywhere",
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
