"""CFG-2, CFG-3: every part's configs round-trip and its command line refuses bad input."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import PARTS, ROOT, part_module

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
    ],
)
def test_bad_command_lines_exit_2_with_a_message_and_no_run_dir(kind, args, message, tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", f"{PARTS[kind]}.train", *args],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
    )
    assert result.returncode == 2, result.stderr
    assert message in result.stderr + result.stdout
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "output").exists()
