"""The project under check, read with `ast` and never imported: its parts, the code
each part reaches through its imports, and which functions a call reaches.

Nothing here knows this project's own file or helper names: a part is a folder with a
train.py (STR-1), its kind is told from what its code does (PPO's loss makes it RL,
an `xgboost.train` call a tree part, a LightningModule a supervised neural part), and
checks look for library APIs and checklist names wherever the user put them."""

from __future__ import annotations

import ast
import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from src.checklist.registry import Failed

N = TypeVar("N", bound=ast.AST)


@dataclass(frozen=True)
class Part:
    kind: str  # sl_neural, sl_tree or rl
    name: str  # its folder


@dataclass
class Project:
    root: Path
    parts: list[Part] = field(default_factory=list)
    _trees: dict[str, ast.Module] = field(default_factory=dict, repr=False)
    _code: dict[str, list[str]] = field(default_factory=dict, repr=False)
    _functions: dict[str, dict[str, list[ast.FunctionDef]]] = field(default_factory=dict, repr=False)

    @classmethod
    def load(cls, root: Path) -> Project:
        project = cls(root)
        for train in sorted(root.glob("*/train.py")):
            kind = project.kind_of(train.parent.name)
            if kind:
                project.parts.append(Part(kind, train.parent.name))
        return project

    @property
    def kinds(self) -> set[str]:
        return {part.kind for part in self.parts}

    @property
    def has_sweep(self) -> bool:
        return any((self.root / part.name / "sweep.py").is_file() for part in self.parts)

    def parts_of(self, kinds: set[str]) -> list[Part]:
        return [part for part in self.parts if part.kind in kinds]

    def kind_of(self, folder: str) -> str | None:
        trees = [self.tree(path) for path in self.code(folder) if self.parses(path)]
        if any("ClipPPOLoss" in names(tree) for tree in trees):
            return "rl"
        if any(_calls_xgboost_train(tree) for tree in trees):
            return "sl_tree"
        if any(subclasses(tree, "LightningModule") for tree in trees):
            return "sl_neural"
        return None

    def code(self, part: Part | str | None = None) -> list[str]:
        """The files a part's train.py, sweep.py and __init__.py reach through imports (every part's
        when `part` is None): the code its runs execute, wherever it lives."""
        if part is None:
            return sorted({path for p in self.parts for path in self.code(p)})
        folder = part if isinstance(part, str) else part.name
        if folder not in self._code:
            entries = [f"{folder}/{name}" for name in ("train.py", "sweep.py", "__init__.py")]
            found: list[str] = []
            pending = [path for path in entries if (self.root / path).is_file()]
            while pending:
                path = pending.pop()
                if path not in found:
                    found.append(path)
                    pending += self._imported_files(path)
            self._code[folder] = sorted(found)
        return self._code[folder]

    def _imported_files(self, relative: str) -> list[str]:
        package = Path(relative).parent.parts
        files: list[str] = []
        if not self.parses(relative):  # the checks that read it report it
            return files
        for node in nodes(self.tree(relative)):
            if isinstance(node, ast.Import):
                modules = [alias.name.split(".") for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = [*package[: len(package) - node.level + 1]] if node.level else []
                base += node.module.split(".") if node.module else []
                modules = [base] + [[*base, alias.name] for alias in node.names]
            else:
                continue
            for parts in filter(None, modules):
                for candidate in (Path(*parts).with_suffix(".py"), Path(*parts, "__init__.py")):
                    if (self.root / candidate).is_file():
                        files.append(str(candidate))
        return files

    def tree(self, relative: str) -> ast.Module:
        """The parsed file; Failed when it is missing or does not parse."""
        if relative not in self._trees:
            try:
                self._trees[relative] = ast.parse(self.text(relative), filename=relative)
            except SyntaxError as error:
                raise Failed(f"{relative} does not parse: {error}") from None
        return self._trees[relative]

    def parses(self, relative: str) -> bool:
        try:
            self.tree(relative)
        except Failed:
            return False
        return True

    def text(self, relative: str) -> str:
        path = self.root / relative
        if not path.is_file():
            raise Failed(f"{relative} is missing")
        return path.read_text(encoding="utf-8")

    def rel(self, path: Path) -> str:
        return str(path.relative_to(self.root))

    def find(self, node_type: type[N], part: Part | None = None) -> list[tuple[str, N]]:
        """Every node of a type (ast.Call, ast.ClassDef...) in the code a part (or any part) runs."""
        return [(p, n) for p in self.code(part) for n in nodes(self.tree(p)) if isinstance(n, node_type)]

    def calls(self, name: str, part: Part | None = None) -> list[tuple[str, ast.Call]]:
        """Every call of something named `name` in the code a part (or any part) runs."""
        return [(path, call) for path in self.code(part) for call in calls(self.tree(path), name)]

    def classes(self, base: str, part: Part | None = None) -> list[tuple[str, ast.ClassDef]]:
        """Classes deriving from `base` (a library class such as LightningModule), also
        through the project's own classes in between."""
        every = [(path, cls) for path in self.code(part) for cls in classes(self.tree(path))]
        found, wanted = [], {base}
        while True:
            more = [
                (p, c) for p, c in every if (p, c) not in found and {name_of(b) for b in c.bases} & wanted
            ]
            if not more:
                return found
            found += more
            wanted |= {cls.name for _, cls in more}

    def functions(self, part: Part | None = None) -> dict[str, list[ast.FunctionDef]]:
        """Functions and methods by name; a class's name gives its methods. Built once
        per part: every reaches() question walks it."""
        key = part.name if part else ""
        if key not in self._functions:
            index: dict[str, list[ast.FunctionDef]] = {}
            for path in self.code(part):
                for node in nodes(self.tree(path)):
                    if isinstance(node, ast.FunctionDef):
                        index.setdefault(node.name, []).append(node)
                    elif isinstance(node, ast.ClassDef):
                        index.setdefault(node.name, []).extend(methods(node).values())
            self._functions[key] = index
        return self._functions[key]

    def reaches(self, node: ast.AST, target: str | set[str], part: Part | None = None) -> bool:
        """Whether `node` calls `target`, directly or through the project's functions."""
        targets = {target} if isinstance(target, str) else target
        index, seen, pending = self.functions(part), set(), [node]
        while pending:
            current = pending.pop()
            for call in (n for n in nodes(current) if isinstance(n, ast.Call)):
                name = name_of(call)
                if name in targets:
                    return True
                if name not in seen:
                    seen.add(name)
                    pending += index.get(name, [])
        return False

    def function(self, name: str, part: Part | None = None) -> tuple[str, ast.FunctionDef]:
        """The first function called `name` in the code a part runs; Failed if none."""
        for path in self.code(part):
            found = function(self.tree(path), name)
            if found:
                return path, found
        raise Failed(f"no {name}() in the code {part.name if part else 'the parts'} run(s)")


def _calls_xgboost_train(tree: ast.Module) -> bool:
    aliases = {
        alias.asname or alias.name
        for node in nodes(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
        if alias.name == "xgboost"
    }
    return any(
        isinstance(c.func, ast.Attribute) and name_of(c.func.value) in aliases for c in calls(tree, "train")
    )


# Small `ast` queries; each tree is walked once, since checks ask many questions of it.


def per_tree(query: Callable[[ast.AST], Any]) -> Callable[[ast.AST], Any]:
    """`query` answered once per tree, the answer kept on the tree itself: it lives as long
    as the tree does. A cache keyed by trees would keep every tree it ever saw alive, millions
    of objects that each of gc's full collections walks, in a process that checks many projects."""
    attribute = f"_checklist_{query.__name__}"

    @functools.wraps(query)
    def answered(tree: ast.AST) -> Any:
        try:
            return tree.__dict__[attribute]
        except KeyError:
            answer = tree.__dict__[attribute] = query(tree)
            return answer

    return answered


def name_of(node: ast.AST | None) -> str:
    """The last name of a called or referenced object: `a.b.C(...)` -> "C"."""
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else ""


@per_tree
def nodes(tree: ast.AST) -> tuple[ast.AST, ...]:
    return tuple(ast.walk(tree))


@per_tree
def _calls(tree: ast.AST) -> dict[str, list[ast.Call]]:
    index: dict[str, list[ast.Call]] = {}
    for node in nodes(tree):
        if isinstance(node, ast.Call):
            index.setdefault(name_of(node), []).append(node)
    for found in index.values():
        found.sort(key=lambda node: (node.lineno, node.col_offset))
    return index


def calls(tree: ast.AST, name: str) -> list[ast.Call]:
    """Every call of something named `name`, in source order."""
    return list(_calls(tree).get(name, []))


@per_tree
def names(tree: ast.AST) -> frozenset[str]:
    """Every name and attribute used or imported."""
    found = set()
    for node in nodes(tree):
        if isinstance(node, ast.Name):
            found.add(node.id)
        elif isinstance(node, ast.Attribute):
            found.add(node.attr)
        elif isinstance(node, ast.alias):
            found.add(node.name.rsplit(".", 1)[-1])
    return frozenset(found)


def constants(tree: ast.AST) -> set:
    return {node.value for node in nodes(tree) if isinstance(node, ast.Constant)}


def keyword(call: ast.Call, name: str) -> ast.expr | None:
    return next((kw.value for kw in call.keywords if kw.arg == name), None)


def constant(node: ast.AST | None, default: object = None) -> object:
    return node.value if isinstance(node, ast.Constant) else default


def source(node: ast.AST | None) -> str:
    return ast.unparse(node) if node is not None else ""


def function(tree: ast.AST, name: str) -> ast.FunctionDef | None:
    return next((n for n in nodes(tree) if isinstance(n, ast.FunctionDef) and n.name == name), None)


def classes(tree: ast.AST) -> list[ast.ClassDef]:
    return [node for node in nodes(tree) if isinstance(node, ast.ClassDef)]


def subclasses(tree: ast.AST, base: str) -> list[ast.ClassDef]:
    return [node for node in classes(tree) if any(name_of(b) == base for b in node.bases)]


def methods(cls: ast.ClassDef) -> dict[str, ast.FunctionDef]:
    return {node.name: node for node in cls.body if isinstance(node, ast.FunctionDef)}


def fields(cls: ast.ClassDef) -> dict[str, ast.expr | None]:
    """A dataclass's fields and their defaults."""
    return {
        node.target.id: node.value
        for node in cls.body
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
    }


def is_dataclass(cls: ast.ClassDef) -> bool:
    return any(name_of(decorator) == "dataclass" for decorator in cls.decorator_list)
