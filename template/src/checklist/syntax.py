"""Small `ast` queries the static checks share."""

from __future__ import annotations

import ast
from functools import cache
from typing import Any


def name_of(node: ast.AST) -> str:
    """The last name of a called or referenced object: `a.b.C(...)` -> "C"."""
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return ""


# Each tree is walked once: the checks ask many questions of the same files.
@cache
def _walk(tree: ast.AST) -> tuple[ast.AST, ...]:
    return tuple(ast.walk(tree))


@cache
def _calls_by_name(tree: ast.AST) -> dict[str, list[ast.Call]]:
    index: dict[str, list[ast.Call]] = {}
    for node in _walk(tree):
        if isinstance(node, ast.Call):
            index.setdefault(name_of(node), []).append(node)
    for found in index.values():
        found.sort(key=lambda node: (node.lineno, node.col_offset))
    return index


@cache
def _names(tree: ast.AST) -> frozenset[str]:
    found = set()
    for node in _walk(tree):
        if isinstance(node, ast.Name):
            found.add(node.id)
        elif isinstance(node, ast.Attribute):
            found.add(node.attr)
        elif isinstance(node, ast.alias):
            found.add(node.name.rsplit(".", 1)[-1])
    return frozenset(found)


def nodes(tree: ast.AST) -> tuple[ast.AST, ...]:
    """Every node below `tree`, itself included."""
    return _walk(tree)


def calls(tree: ast.AST, name: str) -> list[ast.Call]:
    """Every call of something named `name`, in source order."""
    return list(_calls_by_name(tree).get(name, []))


def names(tree: ast.AST) -> frozenset[str]:
    """Every name and attribute used or imported."""
    return _names(tree)


def constants(tree: ast.AST) -> set:
    """Every constant value (strings, numbers) below `tree`."""
    return {node.value for node in nodes(tree) if isinstance(node, ast.Constant)}


def keyword(call: ast.Call, name: str) -> ast.expr | None:
    return next((kw.value for kw in call.keywords if kw.arg == name), None)


def constant(node: ast.expr | None, default: Any = None) -> Any:
    return node.value if isinstance(node, ast.Constant) else default


def source(node: ast.AST | None) -> str:
    return ast.unparse(node) if node is not None else ""


def function(tree: ast.AST, name: str) -> ast.FunctionDef | None:
    """The first function or method called `name`."""
    for node in nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            return node
    return None


def classes(tree: ast.AST) -> list[ast.ClassDef]:
    return [node for node in nodes(tree) if isinstance(node, ast.ClassDef)]


def subclasses(tree: ast.AST, base: str) -> list[ast.ClassDef]:
    """Classes with a base named `base` (e.g. LightningModule for L.LightningModule)."""
    return [node for node in classes(tree) if any(name_of(b) == base for b in node.bases)]


def methods(cls: ast.ClassDef) -> dict[str, ast.FunctionDef]:
    return {node.name: node for node in cls.body if isinstance(node, ast.FunctionDef)}


def is_dataclass(cls: ast.ClassDef) -> bool:
    return any(name_of(decorator) == "dataclass" for decorator in cls.decorator_list)


def self_assigns(function_node: ast.FunctionDef, attribute: str) -> bool:
    """Whether the function assigns `self.<attribute>`."""
    for node in ast.walk(function_node):
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if (
                    isinstance(target, ast.Attribute)
                    and target.attr == attribute
                    and isinstance(target.value, ast.Name)
                    and target.value.id == "self"
                ):
                    return True
    return False


def class_field_default(cls: ast.ClassDef, field_name: str) -> ast.expr | bool | None:
    """A dataclass field's default expression; False when the class has no such field."""
    for node in cls.body:
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and node.target.id == field_name
        ):
            return node.value
    return False
