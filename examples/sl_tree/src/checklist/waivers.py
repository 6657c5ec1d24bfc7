"""Waivers: `[tool.checklist.waivers]` in pyproject.toml, `"CB-4" = "why it does not apply"`."""

from __future__ import annotations

import tomllib
from collections.abc import Iterable
from pathlib import Path

from src.checklist.registry import id_order


class BadWaivers(ValueError):
    """The waivers table is malformed or names an unknown item."""


def load_waivers(pyproject: Path, known_ids: Iterable[str]) -> dict[str, str]:
    if not pyproject.is_file():
        return {}
    try:
        settings = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as error:
        raise BadWaivers(f"{pyproject}: not valid TOML ({error})") from None
    waivers = settings.get("tool", {}).get("checklist", {}).get("waivers", {})
    if not isinstance(waivers, dict):
        raise BadWaivers(f'{pyproject}: [tool.checklist.waivers] must be a table of ID = "reason"')
    known = sorted(set(known_ids), key=id_order)
    for item, reason in waivers.items():
        if item not in known:
            raise BadWaivers(f"{pyproject}: waiver for unknown item {item!r}; valid IDs: {', '.join(known)}")
        if not isinstance(reason, str) or not reason.strip():
            raise BadWaivers(
                f'{pyproject}: the waiver of {item} needs a reason: {item} = "why it does not apply"'
            )
    return {item: reason.strip() for item, reason in waivers.items()}
