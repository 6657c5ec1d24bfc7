"""The project under check, read with `ast`: parts (folders with a train.py) and the code they reach."""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from src.checklist.registry import BadInput, Failed, require

N = TypeVar("N", bound=ast.AST)
Where = Any  # a Part, a part's folder, or None for every part


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
            try:  # every file of the part's code parses, or nothing can be told of it
                kind = project.kind_of(train.parent.name)
                for path in project.code(train.parent.name):
                    project.tree(path)
            except Failed as error:
                raise BadInput(f"{error}: the checker reads the parts' code; fix it first") from None
            project.parts += [Part(kind, train.parent.name)] if kind else []
        return project

    @property
    def kinds(self) -> set[str]:
        return {part.kind for part in self.parts}

    @property
    def has_sweep(self) -> bool:
        return any((self.root / part.name / "sweep.py").is_file() for part in self.parts)

    def kind_of(self, folder: str) -> str | None:
        """Tree: calls xgboost.train; RL: builds a LightningModule using ClipPPOLoss; else neural."""
        for tree in (self.tree(path) for path in self.code(folder) if self.parses(path)):
            imported = [alias for node in of_type(tree, ast.Import) for alias in node.names]
            xgb = {alias.asname or alias.name for alias in imported if alias.name == "xgboost"}
            if any(source(c.func) in {f"{name}.train" for name in xgb} for c in calls(tree, "train")):
                return "sl_tree"
        modules = self.built("LightningModule", folder)
        if any("ClipPPOLoss" in names(c) for _, m in modules for c in self.lineage(m, folder)):
            return "rl"
        return "sl_neural" if modules else None

    def code(self, part: Where = None) -> list[str]:
        """The files a part's train.py, sweep.py and __init__.py import, directly or not (None: all parts)."""
        if part is None:
            return sorted({path for p in self.parts for path in self.code(p)})
        folder = getattr(part, "name", part)
        if folder not in self._code:
            found = [f"{folder}/{name}" for name in ("train.py", "sweep.py", "__init__.py")]
            found = [path for path in found if (self.root / path).is_file()]
            for path in found:  # found grows as it goes, to the files imported indirectly
                found += [imported for imported in self._imported_files(path) if imported not in found]
            self._code[folder] = sorted(found)
        return self._code[folder]

    def _imported_files(self, relative: str) -> set[str]:
        tree = self.tree(relative) if self.parses(relative) else ast.Module([], [])
        package = Path(relative).parent.parts
        modules = [alias.name.split(".") for node in of_type(tree, ast.Import) for alias in node.names]
        for node in of_type(tree, ast.ImportFrom):
            base = [*package[: len(package) - node.level + 1]] if node.level else []
            base += node.module.split(".") if node.module else []
            modules += [base] + [[*base, alias.name] for alias in node.names]
        found = [c for m in modules if m for c in (Path(*m).with_suffix(".py"), Path(*m, "__init__.py"))]
        return {str(c) for c in found if (self.root / c).is_file()}

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
            return bool(self.tree(relative))
        except Failed:
            return False

    def text(self, relative: str) -> str:
        require((self.root / relative).is_file(), f"{relative} is missing")
        return (self.root / relative).read_text(encoding="utf-8")

    def find(self, node_type: type[N], part: Where = None) -> list[tuple[str, N]]:
        return [(p, n) for p in self.code(part) for n in of_type(self.tree(p), node_type)]

    def calls(self, name: str, part: Where = None) -> list[tuple[str, ast.Call]]:
        return [(path, call) for path in self.code(part) for call in calls(self.tree(path), name)]

    def made(self, part: Where = None) -> set[str]:
        """The names of everything the code calls, classes it instantiates included."""
        return {name for path in self.code(part) for name in _calls(self.tree(path))}

    def has_constant(self, value: object, part: Where = None) -> bool:
        return any(value in constants(self.tree(path)) for path in self.code(part))

    def classes(self, base: str, part: Where = None) -> list[tuple[str, ast.ClassDef]]:
        """Classes deriving from `base` (a library class), also through the project's own."""
        every, found, wanted = self.find(ast.ClassDef, part), [], {base}
        while more := [(p, c) for p, c in every if (p, c) not in found and bases(c) & wanted]:
            found += more
            wanted |= {cls.name for _, cls in more}
        return found

    def built(self, base: str, part: Where) -> list[tuple[str, ast.ClassDef]]:
        """The most derived classes of `base` that the part's code instantiates."""
        found = self.classes(base, part)
        derived = {name for _, c in found for name in bases(c)}
        return [(p, c) for p, c in found if c.name not in derived and c.name in self.made(part)]

    def the_class(self, base: str, part: Part) -> ast.ClassDef:
        found = self.built(base, part)
        require(found, f"its code builds no {base} subclass")
        return found[0][1]

    def in_use(self, base: str, part: Part) -> list[dict[str, ast.FunctionDef]]:
        """The methods of each class deriving from `base` that the part's code creates."""
        return [self.methods(c, part) for _, c in self.classes(base, part) if c.name in self.made(part)]

    def lineage(self, cls: ast.ClassDef, part: Where) -> list[ast.ClassDef]:
        """The class and the project's classes it derives from, most derived first."""
        defined = {c.name: c for _, c in self.find(ast.ClassDef, part)}
        found = [cls]
        for current in found:  # found grows as it goes: breadth first
            found += [defined[n] for n in bases(current) if n in defined and defined[n] not in found]
        return found

    def methods(self, cls: ast.ClassDef, part: Where) -> dict[str, ast.FunctionDef]:
        """Methods by name, inherited ones from the project's base classes included."""
        return {k: v for c in reversed(self.lineage(cls, part)) for k, v in methods(c).items()}

    def functions(self, part: Where = None) -> dict[str, list[ast.FunctionDef]]:
        """Functions and methods by name; a class's name gives its methods."""
        key = getattr(part, "name", part) or ""
        if key not in self._functions:
            index: dict[str, list[ast.FunctionDef]] = {}
            for _, node in self.find(ast.AST, part):
                if isinstance(node, ast.FunctionDef):
                    index.setdefault(node.name, []).append(node)
                elif isinstance(node, ast.ClassDef):
                    index.setdefault(node.name, []).extend(methods(node).values())
            self._functions[key] = index
        return self._functions[key]

    def reaches(self, node: ast.AST, target: str | set[str], part: Where = None) -> bool:
        """Whether `node` calls `target`, directly or through the project's functions."""
        targets = {target} if isinstance(target, str) else target
        index, seen, pending = self.functions(part), set(), [node]
        while pending:
            for name in _calls(pending.pop()):
                if name in targets:
                    return True
                if name not in seen:
                    seen.add(name)
                    pending += index.get(name, [])
        return False

    def passes(self, name: str, part: Where = None, test: Callable[[ast.expr], object] = bool) -> bool:
        """Whether the code passes `name=` to any call, with a value that passes `test` if given."""
        values = [keyword(call, name) for _, call in self.find(ast.Call, part)]
        return any(test(value) for value in values if value is not None)

    def call_with(self, name: str, part: Part, /, **tests: Callable[[ast.expr | None], object]) -> None:
        """Fail unless the part's code calls `name` (or a subclass of it) with keywords that pass `tests`."""
        subclasses = [cls.name for _, cls in self.classes(name, part)]
        made = [c for called in (name, *subclasses) for _, c in self.calls(called, part)]
        found = [c for c in made if all(test(keyword(c, k)) for k, test in tests.items())]
        require(found, f"no {name}({', '.join(f'{k}=...' for k in tests)}) as the checklist asks")

    def main_with_config(self, part: Part) -> ast.FunctionDef:
        return self.function("main_with_config", part)[1]

    def function(self, name: str, part: Part | None = None) -> tuple[str, ast.FunctionDef]:
        """The first function called `name` in the code a part runs; Failed if none."""
        found = [(p, f) for p, f in self.find(ast.FunctionDef, part) if f.name == name]
        require(found, f"no {name}() in the code {part.name if part else 'the parts'} run(s)")
        return found[0]


def per_tree(query: Callable[[ast.AST], Any]) -> Callable[[ast.AST], Any]:
    """`query`'s answer kept on the tree: a cache keyed by trees would keep every project alive."""
    attribute = f"_checklist_{query.__name__}"

    def answered(tree: ast.AST) -> Any:
        if attribute not in tree.__dict__:
            tree.__dict__[attribute] = query(tree)
        return tree.__dict__[attribute]

    return answered


def name_of(node: ast.AST | None) -> str:
    """The last name of a called or referenced object: `a.b.C(...)` -> "C"."""
    node = node.func if isinstance(node, ast.Call) else node
    return node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""


def bases(cls: ast.ClassDef) -> set[str]:
    return {name_of(base) for base in cls.bases}


@per_tree
def _by_type(tree: ast.AST) -> dict[type, list[ast.AST]]:
    return {ast.AST: list(ast.walk(tree))}


def of_type(tree: ast.AST, node_type: type[ast.AST]) -> list[Any]:
    """The tree's nodes of a type (ast.AST: all), in walk order; kept, since every check asks again."""
    found = _by_type(tree)
    if node_type not in found:
        found[node_type] = [node for node in found[ast.AST] if isinstance(node, node_type)]
    return found[node_type]


def in_order(tree: ast.AST) -> list[ast.Call]:
    return sorted(of_type(tree, ast.Call), key=lambda n: (n.lineno, n.col_offset))


@per_tree
def _calls(tree: ast.AST) -> dict[str, list[ast.Call]]:
    index: dict[str, list[ast.Call]] = {}
    for node in in_order(tree):
        index.setdefault(name_of(node), []).append(node)
    return index


def calls(tree: ast.AST, name: str) -> list[ast.Call]:  # in source order
    return list(_calls(tree).get(name, []))


@per_tree
def names(tree: ast.AST) -> frozenset[str]:
    """Every name and attribute used or imported."""
    found = {n.id for n in of_type(tree, ast.Name)} | {n.attr for n in of_type(tree, ast.Attribute)}
    return frozenset(found | {n.name.rsplit(".", 1)[-1] for n in of_type(tree, ast.alias)})


def constants(tree: ast.AST) -> set:
    return {node.value for node in of_type(tree, ast.Constant)}


def keyword(call: ast.Call, name: str) -> ast.expr | None:
    return next((kw.value for kw in call.keywords if kw.arg == name), None)


def constant(node: ast.AST | None, default: object = None) -> object:
    return node.value if isinstance(node, ast.Constant) else default


def source(node: ast.AST | None) -> str:
    return ast.unparse(node) if node is not None else ""


def function(tree: ast.AST, name: str) -> ast.FunctionDef | None:
    return next((n for n in of_type(tree, ast.FunctionDef) if n.name == name), None)


def methods(cls: ast.ClassDef) -> dict[str, ast.FunctionDef]:
    return {node.name: node for node in cls.body if isinstance(node, ast.FunctionDef)}


def fields(cls: ast.ClassDef) -> dict[str, ast.expr | None]:
    """A dataclass's fields and their defaults."""
    return {source(n.target): n.value for n in cls.body if isinstance(n, ast.AnnAssign)}


def top_level_names(tree: ast.Module) -> set[str]:
    """Functions defined or imported at a module's top level."""
    found = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    return found | {a.asname or a.name for n in tree.body if isinstance(n, ast.ImportFrom) for a in n.names}
