"""Checks of the parts that learn from a table (sl): the neural part and the tree part."""

from __future__ import annotations

import ast

from src.checklist.project import Part, Project, name_of, of_type
from src.checklist.registry import each_part, require


@each_part("DATA-1", "the table is validated against a pandera schema before training", "sl")
def data_validated(project: Project, part: Part) -> None:
    # Where the rows go: data.py's own functions (copied: of_type's list is the tree's cache), the
    # DataModule the part builds, and what train.py hands the part's data module to.
    loaders: list[ast.AST] = list(of_type(project.tree(f"{part.name}/data.py"), ast.FunctionDef))
    for _, datamodule in project.built("LightningDataModule", part):
        loaders += project.methods(datamodule, part).values()
    train = project.tree(f"{part.name}/train.py")
    # `from partN import data` or `from . import data`, under any alias, passed by position or keyword.
    package = {part.name, None}  # None: `from . import data`
    imports = [n for n in of_type(train, ast.ImportFrom) if n.module in package]
    aliases = {a.asname or a.name for n in imports for a in n.names if a.name == "data"}
    for call in of_type(train, ast.Call):
        if {name_of(value) for value in [*call.args, *(k.value for k in call.keywords)]} & aliases:
            loaders.append(call)
    validates = any(project.reaches(f, "validate", part) for f in loaders)
    require(validates, "neither data.py nor the code it goes to validates the table (pandera's validate())")
