"""The project under check: its parts and its source files, parsed once (read with
`ast`, never imported). A part's kind is told from what its code does, following its
imports across the project: PPO's loss makes it RL, an `xgboost.train` call a tree
part, a LightningModule otherwise a supervised neural part."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

from src.checklist.registry import Failed
from src.checklist.syntax import calls, name_of, names, nodes, subclasses


@dataclass(frozen=True)
class Part:
    kind: str  # sl_neural, sl_tree or rl
    name: str  # the folder: part1, part2, ...


@dataclass
class Project:
    root: Path
    parts: list[Part]
    has_sweep: bool
    _trees: dict[str, ast.Module] = field(default_factory=dict, repr=False)

    @classmethod
    def find(cls, root: Path) -> Project:
        project = cls(root, [], (root / "src" / "sweep.py").is_file())
        for train in sorted(root.glob("part*/train.py")):
            kind = project.kind_of(f"{train.parent.name}/train.py")
            if kind:
                project.parts.append(Part(kind, train.parent.name))
        return project

    @property
    def kinds(self) -> set[str]:
        return {part.kind for part in self.parts}

    def parts_of(self, kinds: set[str]) -> list[Part]:
        return [part for part in self.parts if part.kind in kinds]

    def part(self, kind: str) -> Part | None:
        return next((part for part in self.parts if part.kind == kind), None)

    def tree(self, relative: str) -> ast.Module:
        """The parsed file; Failed when it is missing or does not parse."""
        if relative not in self._trees:
            try:
                self._trees[relative] = ast.parse(self.text(relative), filename=relative)
            except SyntaxError as error:
                raise Failed(f"{relative} does not parse: {error}") from None
        return self._trees[relative]

    def kind_of(self, train: str) -> str | None:
        """sl_neural, sl_tree or rl, from the code a part's train.py reaches; None if none fits."""
        trees = [self.tree(path) for path in self.reachable(train) if self.parses(path)]
        if any("ClipPPOLoss" in names(tree) for tree in trees):
            return "rl"
        if any(_calls_xgboost_train(tree) for tree in trees):
            return "sl_tree"
        if any(subclasses(tree, "LightningModule") for tree in trees):
            return "sl_neural"
        return None

    def reachable(self, relative: str) -> list[str]:
        """`relative` and every module of the project it imports, directly or not."""
        found, pending = [], [relative]
        while pending:
            path = pending.pop()
            if path in found:
                continue
            found.append(path)
            pending += self._imported_files(path)
        return found

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
            for parts in modules:
                for candidate in (Path(*parts).with_suffix(".py"), Path(*parts, "__init__.py")):
                    if parts and (self.root / candidate).is_file():
                        files.append(str(candidate))
        return files

    def parses(self, relative: str) -> bool:
        try:
            self.tree(relative)
        except Failed:
            return False
        return True

    def text(self, relative: str) -> str:
        """The file's text; Failed when it is missing."""
        path = self.root / relative
        if not path.is_file():
            raise Failed(f"{relative} is missing")
        return path.read_text(encoding="utf-8")


def _calls_xgboost_train(tree: ast.Module) -> bool:
    """Whether the module calls `xgboost.train` (`import xgboost as xgb; xgb.train(...)`)."""
    aliases = {
        alias.asname or alias.name
        for node in nodes(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
        if alias.name == "xgboost"
    }
    return any(
        isinstance(call.func, ast.Attribute) and name_of(call.func.value) in aliases
        for call in calls(tree, "train")
    )
