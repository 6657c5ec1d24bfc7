"""Static checks of every part kind, and the rules the checks of each kind are made of."""

from __future__ import annotations

import ast
import shlex
from collections.abc import Callable

from src.checklist.project import (
    Part,
    Project,
    calls,
    constant,
    constants,
    fields,
    function,
    keyword,
    name_of,
    names,
    of_type,
    source,
)
from src.checklist.registry import Failed, check, each_part, lacks, require

LEVELS = {"sl_neural": "SLNeuralConfig", "sl_tree": "SLTreeConfig", "rl": "RLConfig"}
Test = Callable[[ast.expr | None], bool]  # of a keyword's value
Rule = Callable[[Project, Part], object]  # raises Failed


def given(value: ast.expr | None) -> bool:
    return value is not None


def equals(wanted: object) -> Test:
    return lambda value: constant(value) == wanted


def mentions(text: str) -> Test:
    return lambda value: text in source(value)


def never_uses(project: Project, paths: list[str], name: str, advice: str) -> None:
    for path in paths:
        require(name not in names(project.tree(path)), f"{path} uses {name}; {advice}")


def makes_call(name: str, /, **tests: Test) -> Rule:
    return lambda project, part: project.call_with(name, part, **tests)


def gives(name: str) -> Rule:
    return lambda project, part: require(project.passes(name, part), f"no call is given {name}=")


def holds(value: str) -> Rule:
    return lambda project, part: require(project.has_constant(value, part), f'no "{value}"')


def is_dataclass(cls: ast.ClassDef) -> bool:
    return any(name_of(decorator) == "dataclass" for decorator in cls.decorator_list)


def shared_classes(project: Project) -> dict[str, ast.ClassDef]:
    return {c.name: c for path, c in project.find(ast.ClassDef) if path.startswith("src/")}


def config_classes(project: Project, part: Part) -> list[ast.ClassDef]:
    """The part's task config (the one inheriting its level), then its variants."""
    family, found = {LEVELS[part.kind]}, []
    for cls in of_type(project.tree(f"{part.name}/config.py"), ast.ClassDef):
        if {name_of(b) for b in cls.bases} & family:
            family.add(cls.name)
            found.append(cls)
    require(found, f"{part.name}/config.py: no config class inherits from {LEVELS[part.kind]}")
    return found


@each_part("CFG-1", "the part's configs are dataclasses in the one hierarchy in src/")
def config_hierarchy(project: Project, part: Part) -> None:
    shared = shared_classes(project)

    def reaches_base(name: str) -> bool:
        cls = shared.get(name)
        bases = [name_of(b) for b in cls.bases] if cls else []
        return bool(cls and is_dataclass(cls)) and (name == "BaseConfig" or any(map(reaches_base, bases)))

    level = LEVELS[part.kind]
    require(reaches_base(level), f"src/: {level} is not a @dataclass reaching BaseConfig")
    for cls in config_classes(project, part):
        require(cls.name not in shared, f"{part.name}/config.py redefines {cls.name} of src/")
        require(is_dataclass(cls), f"{part.name}/config.py: {cls.name} is not a @dataclass")


@each_part("CFG-3", "main() parses --config NAME and the field flags with tyro.cli()")
def config_by_name(project: Project, part: Part) -> None:
    main = function(project.tree(f"{part.name}/train.py"), "main")
    require(main and project.reaches(main, "cli", part), "train.py: main() never reaches tyro.cli()")
    require(len(config_classes(project, part)) > 1, f"{part.name}/config.py: one config, nothing to pick")


@each_part("CFG-4", "max_wall_clock_hours, given to a Timer or an XGBoost callback, bounds every run")
def wall_clock(project: Project, part: Part) -> None:
    base = shared_classes(project).get("BaseConfig")
    require(base and "max_wall_clock_hours" in fields(base), "BaseConfig has no max_wall_clock_hours field")
    own = [c.name for base in ("Timer", "TrainingCallback") for _, c in project.classes(base, part)]
    given = [c for _, c in project.find(ast.Call, part) if name_of(c) in {"Timer", *own}]
    bounded = any("max_wall_clock_hours" in source(c) for c in given)
    require(bounded, "no Timer or XGBoost callback is given cfg.max_wall_clock_hours")


@each_part("CFG-6", ">= 3 variants overriding only fields, one changing several")
def variants(project: Project, part: Part) -> None:
    found, where = config_classes(project, part)[1:], f"{part.name}/config.py"
    for cls in found:
        extra = [n for n in cls.body if isinstance(n, (ast.FunctionDef, ast.Assign))]
        require(not extra, f"{where}: variant {cls.name} does more than override fields")
    require(len(found) >= 3, f"{where}: {len(found)} variants, want >= 3")
    several = any(len(set(fields(cls)) - {"name"}) >= 2 for cls in found)
    require(several, f"{where}: no variant changes several fields at once (an aggressive one)")


@each_part("STR-1", "partN/ holds config.py, data.py, model.py, train.py (and sweep.py)")
def part_layout(project: Project, part: Part) -> None:
    wanted = ["config.py", "data.py", "model.py", "train.py"] + (["sweep.py"] if project.has_sweep else [])
    lacks(f"{part.name}/", wanted, [path.name for path in (project.root / part.name).glob("*.py")])


@check("STR-2", "shared code (configs, W&B, GPU lock, callbacks) lives once in src/")
def shared_code(project: Project) -> None:
    project.text("src/wandb_utils.py")
    shared = shared_classes(project)
    require({"BaseConfig", "GpuLock"} <= set(shared), "src/ lacks BaseConfig or GpuLock")
    for path, cls in project.find(ast.ClassDef):
        require(path.startswith("src/") or cls.name not in shared, f"{path} defines {cls.name} of src/ again")


@each_part("STR-3", "train.py defines main()")
def has_main(project: Project, part: Part) -> None:
    body = project.tree(f"{part.name}/train.py").body
    require("main" in [n.name for n in body if isinstance(n, ast.FunctionDef)], "train.py: no main()")


@each_part("LOG-1", "main_with_config() reaches wandb.init(project, name=cfg.name, mode)")
def wandb_init(project: Project, part: Part) -> None:
    project.call_with("init", part, project=given, name=lambda v: source(v).endswith(".name"), mode=given)
    reached = project.reaches(project.main_with_config(part), "init", part)
    require(reached, "main_with_config() never reaches wandb.init()")


@each_part("LOG-6", "save_model(), then log_artifact(), in main_with_config()")
def model_artifact(project: Project, part: Part) -> None:
    steps = of_type(project.main_with_config(part), ast.Call)
    logged = [c.lineno for c in steps if project.reaches(c, "log_artifact", part)]
    saved = [c.lineno for c in steps if project.reaches(c, "save_model", part)]  # through a helper too
    require(logged, "main_with_config() never reaches log_artifact()")
    require(saved and saved[0] <= logged[0], "the artifact is logged before save_model()")


@check("OPS-1", 'main() runs inside GpuLock() (flock on /tmp/gpu-task.lock) under if __name__ == "__main__"')
def gpu_lock(project: Project) -> None:
    path, lock = next(((p, c) for p, c in project.find(ast.ClassDef) if c.name == "GpuLock"), ("", None))
    require(lock and calls(lock, "flock"), "no GpuLock class that takes an fcntl.flock")
    require("/tmp/gpu-task.lock" in constants(project.tree(path)), f"{path}: the default lock is elsewhere")
    for train in (f"{part.name}/train.py" for part in project.parts):
        tree = project.tree(train)
        guards = [n for n in tree.body if isinstance(n, ast.If) and "__name__" in source(n.test)]
        require([n for n in guards if calls(n, "main")], f'{train}: no `if __name__ == "__main__": main()`')
        locks = [i.context_expr for w in of_type(function(tree, "main") or tree, ast.With) for i in w.items]
        require("GpuLock" in map(name_of, locks), f"{train}: main() runs outside `with GpuLock()`")


@check("OPS-2", "one command starts a long run detached: PYTHONUNBUFFERED=1 nohup ... &")
def detached(project: Project) -> str:
    scripts = sorted([*project.root.glob("*.sh"), *project.root.glob("*/*.sh")])
    for script in scripts:
        words = shlex.split(script.read_text(encoding="utf-8"), comments=True)
        if {"PYTHONUNBUFFERED=1", "nohup"} <= set(words):
            return f"{script.relative_to(project.root)} runs PYTHONUNBUFFERED=1 nohup ... &"
    raise Failed(f"no shell script runs PYTHONUNBUFFERED=1 nohup (looked at {len(scripts)})")


@check("OUT-1", 'runs write to {base_dir}/{name}_{YYYYMMDD_HHMMSS}/: a "%Y%m%d_%H%M%S" stamp')
def run_dir_names(project: Project) -> None:
    require(project.has_constant("%Y%m%d_%H%M%S"), 'no "%Y%m%d_%H%M%S" stamp')


@check("RES-3", "checkpoints load onto any device: torch.load(map_location=...)")
def map_location(project: Project) -> None:
    for path, call in project.calls("load"):
        missing = source(call.func) == "torch.load" and not keyword(call, "map_location")
        require(not missing, f"{path}:{call.lineno}: torch.load without map_location=")
