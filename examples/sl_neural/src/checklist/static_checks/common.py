"""What the static checks share: where shared code lives, and helpers over `ast`."""

from __future__ import annotations

import ast

from src.checklist.layout import Part, Project
from src.checklist.registry import kinds_of, require
from src.checklist.syntax import calls, function, methods, names, nodes, subclasses

TRAINER = "src/trainer.py"
WANDB = "src/wandb_utils.py"
XGB_CALLBACKS = "src/xgb_callbacks.py"


def parts(project: Project, *tags: str) -> list[Part]:
    return project.parts_of(kinds_of(tags))


def never_named(project: Project, paths: list[str], name: str, advice: str) -> None:
    """Fail if any of the files names `name` (a call, import or attribute)."""
    for path in paths:
        require(name not in names(project.tree(path)), f"{path} uses {name}; {advice}")


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


def keyword_arguments(project: Project, name: str) -> list[tuple[str, ast.expr]]:
    """Every `name=...` passed to a call anywhere in the project: (path, value), so a
    setting counts wherever the user passes it (the Trainer's factory or a part)."""
    found = []
    for path in project_sources(project):
        for node in nodes(project.tree(path)):
            if isinstance(node, ast.Call):
                found += [(path, kw.value) for kw in node.keywords if kw.arg == name]
    return found


def calls_anywhere(project: Project, name: str) -> list[tuple[str, ast.Call]]:
    """Every call of something named `name` anywhere in the project: (path, call)."""
    return [(path, call) for path in project_sources(project) for call in calls(project.tree(path), name)]
