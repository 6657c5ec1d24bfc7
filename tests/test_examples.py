"""examples/ holds what the template renders now, for each answer file beside it."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from conftest import TEMPLATE

spec = importlib.util.spec_from_file_location("render_examples", TEMPLATE / "examples" / "render.py")
render_examples = importlib.util.module_from_spec(spec)
spec.loader.exec_module(render_examples)


def tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_there_is_an_example_for_each_kind_alone_and_all_with_sweep():
    names = {path.stem for path in render_examples.answer_files()}
    assert names == {"sl_neural", "sl_tree", "rl", "all_with_sweep"}


@pytest.mark.parametrize("answers_file", render_examples.answer_files(), ids=lambda path: path.stem)
def test_example_is_what_the_template_renders_now(answers_file, tmp_path):
    committed = tree(answers_file.with_suffix(""))
    rendered = tree(render_examples.render_example(answers_file, tmp_path / answers_file.stem))
    stale = sorted(
        name for name in committed.keys() | rendered.keys() if committed.get(name) != rendered.get(name)
    )
    assert not stale, f"examples/{answers_file.stem}/ is stale in {stale[:10]}: run `nox -s examples`"
