"""The project under check: its parts (found by each part's KIND, read with `ast`,
not imported) and its source files, parsed once."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

from src.checklist.registry import Failed


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
        parts = []
        for train in sorted(root.glob("part*/train.py")):
            kind = part_kind(train.parent / "__init__.py")
            if kind:
                parts.append(Part(kind, train.parent.name))
        return cls(root, parts, (root / "src" / "sweep.py").is_file())

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

    def text(self, relative: str) -> str:
        """The file's text; Failed when it is missing."""
        path = self.root / relative
        if not path.is_file():
            raise Failed(f"{relative} is missing")
        return path.read_text(encoding="utf-8")


def part_kind(init: Path) -> str | None:
    """The string assigned to KIND at module level of a part's __init__.py."""
    if not init.is_file():
        return None
    for node in ast.parse(init.read_text(encoding="utf-8")).body:
        is_kind = isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == "KIND" for target in node.targets
        )
        if is_kind and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return node.value.value
    return None
