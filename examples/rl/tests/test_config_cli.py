"""CFG-2, CFG-3: every part's configs round-trip and its command line refuses bad input."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import PARTS, ROOT, part_module, slow

from src.cli import parse_cli


@pytest.mark.parametrize("kind", sorted(PARTS))
def test_every_variant_round_trips_through_json(kind):
    configs = part_module(kind, "config").CONFIGS
    for name, config_cls in configs.items():
        cfg = config_cls()
        assert cfg.name == name
        restored = config_cls.from_json(cfg.to_json())
        assert restored == cfg, name


@pytest.mark.parametrize("kind", sorted(PARTS))
def test_cli_flags_override_the_config_class(kind):
    configs = part_module(kind, "config").CONFIGS
    name, config_cls = list(configs.items())[-1]
    cfg, resume_from = parse_cli(configs, ["--config", name, "--seed", "7", "--output.base-dir", "elsewhere"])
    assert (cfg.seed, cfg.output.base_dir, resume_from) == (7, "elsewhere", None)
    untouched = {k: v for k, v in cfg.to_dict().items() if k not in ("seed", "output")}
    assert untouched == {k: v for k, v in config_cls().to_dict().items() if k not in ("seed", "output")}


@pytest.mark.parametrize("kind", sorted(PARTS))
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--config", "no_such_config"], "valid names:"),
        (["--no-such-field", "1"], "valid options:"),
        (["--seed", "not-a-number"], "--seed"),
        (["--resume", "no/such/run"], "does not exist"),
        (["--max-wall-clock-hours", "0"], "max_wall_clock_hours 0.0: must be positive"),
        (["--name", "a/b"], "name 'a/b'"),
    ],
)
def test_bad_command_lines_are_refused_with_what_is_valid(kind, args, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        parse_cli(part_module(kind, "config").CONFIGS, args)
    assert exit_info.value.code == 2
    output = capsys.readouterr()
    assert message in output.err + output.out


@pytest.mark.parametrize("kind", sorted(PARTS))
def test_underscore_spellings_of_flags_are_accepted(kind):
    cfg, _ = parse_cli(
        part_module(kind, "config").CONFIGS, ["--max_wall_clock_hours", "2", "--output.base_dir", "x"]
    )
    assert (cfg.max_wall_clock_hours, cfg.output.base_dir) == (2, "x")


@slow
@pytest.mark.parametrize("kind", sorted(PARTS))
def test_a_bad_command_line_exits_2_without_traceback_or_run_dir(kind, tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", f"{PARTS[kind]}.train", "--config", "smoke", "--seed", "x"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
    )
    assert result.returncode == 2, result.stderr
    assert "--seed" in result.stderr + result.stdout and "Traceback" not in result.stderr
    assert not (tmp_path / "output").exists()
