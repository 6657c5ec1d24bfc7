"""Static checks of configuration and layout (CFG, STR)."""

from __future__ import annotations

import ast

from src.checklist.layout import Part, Project
from src.checklist.registry import TAGS, Failed, check
from src.checklist.static_checks.common import TRAINER, XGB_CALLBACKS, one_call, project_sources, require
from src.checklist.syntax import (
    calls,
    class_field_default,
    classes,
    constant,
    function,
    is_dataclass,
    keyword,
    name_of,
    nodes,
    source,
)

KIND_CONFIG = {"sl_neural": "SLNeuralConfig", "sl_tree": "SLTreeConfig", "rl": "RLConfig"}

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
