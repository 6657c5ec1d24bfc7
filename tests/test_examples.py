"""examples/ holds what the template renders now, for each answer file beside it."""

from __future__ import annotations

import ast
import importlib.util
import subprocess
import sys
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


def test_the_sb3_race_evaluates_as_the_rl_part_does():
    # benchmarks/sb3_ppo.py imports stable-baselines3, which this venv lacks: its RACES are read
    # from the source. Each env's cadence and episodes are those of the config the race trains.
    source = (TEMPLATE / "benchmarks" / "sb3_ppo.py").read_text()
    races = next(
        node.value
        for node in ast.parse(source).body
        if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "RACES"
    )
    raced = {"CartPole-v1": "baseline", "Pendulum-v1": "pendulum"}  # benchmarks/rl_race.py's configs
    for env, settings in zip(map(ast.literal_eval, races.keys), races.values, strict=True):
        sb3 = {ast.literal_eval(k): v for k, v in zip(settings.keys, settings.values, strict=True)}
        probe = (
            "from part1.config import CONFIGS\n"
            f"cfg = CONFIGS[{raced[env]!r}]()\n"
            "print(cfg.env_name, cfg.frames_per_batch * cfg.iterations_per_epoch, cfg.eval_episodes)"
        )
        ours = subprocess.run(
            [sys.executable, "-c", probe],
            cwd=TEMPLATE / "examples" / "rl",
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        every, episodes = (ast.literal_eval(sb3[key]) for key in ("eval_every_frames", "eval_episodes"))
        assert ours == [env, str(every), str(episodes)]
