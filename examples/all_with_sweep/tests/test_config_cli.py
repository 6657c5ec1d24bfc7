"""CFG-2, CFG-3: every part's configs round-trip and its command line refuses bad input."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import PARTS, PROJECT_PYTHONPATH, ROOT, part_module, run_python, slow

from src.cli import parse_cli
from src.runs.lifetime import start_run


@pytest.mark.parametrize("kind", sorted(PARTS))
def test_every_variant_round_trips_through_json(kind):
    configs = part_module(kind, "config").CONFIGS
    for name, config_cls in configs.items():
        cfg = config_cls()
        assert cfg.name == name
        restored = config_cls.from_json(cfg.to_json())
        assert restored == cfg, name


@pytest.mark.parametrize("kind", sorted(PARTS))
@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("name", 3, "name 3: not a string"),
        ("seed", "lots", 'seed "lots": not an int'),
        ("max_wall_clock_hours", True, "max_wall_clock_hours true: not a number"),
        ("wandb_mode", "sometimes", 'wandb_mode "sometimes": not one of "auto"'),
        ("loggers", "wandb", 'loggers "wandb": not a list of'),
        ("output", {"base_dir": None}, "base_dir null: not a string"),
    ],
)
def test_a_config_json_edited_to_a_wrong_type_is_refused_by_field(kind, field, value, message):  # CFG-2
    config_cls = next(iter(part_module(kind, "config").CONFIGS.values()))
    edited = {**config_cls().to_dict(), field: value}
    with pytest.raises(TypeError, match=re.escape(message)):
        config_cls.from_dict(edited)


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
        (["--config", "no_such_config"], "error: --config 'no_such_config': no such config; this part's are"),
        (["--no-such-field", "1"], "Unrecognized options: --no-such-field"),
        (["--learning-rat", "1"], "Perhaps you meant"),
        (["--seed", "not-a-number"], "--seed"),
        (["--resume", "no/such/run"], "does not exist"),
        (["--max-wall-clock-hours", "0"], "max_wall_clock_hours 0.0: must be more than 0"),
        (["--max-wall-clock-hours", "nan"], "max_wall_clock_hours nan: must be a finite number"),
        (["--max-wall-clock-hours", "1e308"], "at most 8784 (a year)"),
        (["--seed", "-1"], "seed -1: must be in 0 .. 2**32-1"),
        (["--seed", str(2**33)], f"seed {2**33}: must be in"),
        (["--name", "a/b"], "name 'a/b'"),
        (["--name", "x" * 300], "use up to 100 letters"),
        (["--stop-file", ""], "stop_file '': must name a file, not a folder"),
        (["--stop-file", "."], "stop_file '.': must name a file"),
        (["--wandb-project", "a/b"], "wandb_project 'a/b': W&B project names"),
        (["--output.base-dir", "/dev/null"], "/dev/null is not a folder"),
        (["--output.base-dir", "/dev/null/runs"], "/dev/null is not a folder"),
        (["--loggers"], "loggers: name at least one of wandb, tensorboard, csv"),
        (["--loggers", "csv", "csv"], "loggers csv csv: name each at most once"),
        (["--loggers", "mlflow"], "invalid choice 'mlflow' for argument '--loggers'"),
        (["--alerts.webhook-url", "example.com/hook"], "alerts.webhook_url 'example.com/hook': use an http"),
        (["--alerts.gpu-memory-above", "nan"], "alerts.gpu_memory_above nan: must be a percentage"),
        (["--alerts.smtp-server", "example.com"], "alerts.smtp_server 'example.com': use host:port"),
        (["--alerts.email-to", "ops@example.com, ops"], "alerts.email_to 'ops': not an email address"),
    ],
)
def test_bad_command_lines_are_refused_with_what_is_valid(kind, args, message, capsys):
    output = refused(kind, args, capsys)
    assert message in output
    if "--config" in args:  # and the valid names
        assert all(f"'{name}'" in output for name in part_module(kind, "config").CONFIGS)


def refused(kind: str, args: list[str], capsys) -> str:
    """What the part's command line prints when it refuses `args` (exit status 2)."""
    with pytest.raises(SystemExit) as exit_info:
        parse_cli(part_module(kind, "config").CONFIGS, args)
    assert exit_info.value.code == 2
    output = capsys.readouterr()
    return output.err + output.out


@pytest.mark.parametrize(
    ("kind", "args", "bad", "valid"),
    [
        (
            "sl_tree",
            ["--objective", "foo"],
            "objective 'foo': XGBoost: Unknown objective",
            "reg:squarederror",
        ),
        ("sl_tree", ["--objective", "reg:quantileerror"], "quantile_alpha", "model.booster_params"),
        ("sl_tree", ["--eval-metric", "foo"], "eval_metric 'foo': XGBoost: Unknown metric", "rmse, mae"),
        ("sl_tree", ["--eval-metric", "rmse@3"], "eval_metric 'rmse@3': XGBoost logs it as rmse", "name"),
        ("rl", ["--env-name", "Foo-v0"], "env_name 'Foo-v0': Environment `Foo` doesn't exist", "CartPole-v1"),
        ("rl", ["--env-name", "Foo-v0"], "Environment `Foo` doesn't exist", "or one of the part's envs.py"),
        (
            "rl",
            ["--env-name", "FrozenLake-v1"],
            "observation is Categorical of shape (), not one flat vector",
            "make_env",
        ),
        ("rl", ["--env-name", "Blackjack-v1"], "observation is not one flat vector", "Acrobot-v1"),
    ],
)
def test_names_xgboost_or_gymnasium_would_refuse_mid_run_are_refused_first(kind, args, bad, valid, capsys):
    # CFG-3: what the libraries themselves refuse, or the part's model cannot take, one
    # line each that names the bad value and what works.
    output = refused(kind, ["--config", "smoke", *args], capsys)
    (line,) = [line for line in output.splitlines() if bad in line]
    assert valid in line and "Traceback" not in output


@pytest.mark.parametrize(
    ("kind", "args"),
    [
        ("sl_tree", ["--objective", "reg:absoluteerror", "--eval-metric", "mae"]),
        ("sl_tree", ["--objective", "reg:pseudohubererror", "--eval-metric", "mphe"]),
        ("sl_tree", ["--objective", "binary:logistic", "--eval-metric", "auc"]),  # labels: data's check
        ("rl", ["--env-name", "Acrobot-v1"]),
        ("rl", ["--env-name", "LineWalk"]),
    ],
)
def test_other_objectives_metrics_and_envs_that_work_pass_validation(kind, args):
    cfg, _ = parse_cli(part_module(kind, "config").CONFIGS, ["--config", "smoke", *args])
    assert [getattr(cfg, arg[2:].replace("-", "_")) for arg in args[::2]] == args[1::2]


LIGHTNING_PARTS = sorted(kind for kind in PARTS if kind != "sl_tree")


@pytest.mark.parametrize("kind", LIGHTNING_PARTS)
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--learning-rate", "nan"], "learning_rate nan: must be a finite number"),
        (["--accelerator", "tpu"], "accelerator 'tpu': use one of auto, cpu, gpu, cuda, mps"),
        (["--devices", "0"], "devices '0': use auto, -1 (all), a count"),
        (["--devices", "abc"], "devices 'abc'"),
        (["--strategy", "foo"], "strategy 'foo': use one of Lightning's: auto, ddp"),
        # A spawned process's best checkpoint score never comes back to this one.
        (["--strategy", "ddp_spawn"], "strategy 'ddp_spawn': use ddp"),
    ],
)
def test_hardware_that_lightning_would_refuse_mid_run_is_refused_first(kind, args, message, capsys):
    assert message in refused(kind, args, capsys)


@pytest.mark.skipif(torch.cuda.is_available(), reason="the machine has a GPU")
@pytest.mark.parametrize("kind", LIGHTNING_PARTS)
@pytest.mark.parametrize("devices", ["-1", "0,", "0,1"])
def test_gpu_device_lists_on_the_cpu_are_refused(kind, devices, capsys):
    output = refused(kind, ["--devices", devices], capsys)
    assert f"devices '{devices}': on the CPU, use auto or a count" in output


@pytest.mark.parametrize(
    ("kind", "args", "message"),
    [
        # CFG-3: values the libraries would fail on mid-run, with an error that names no field.
        ("sl_neural", ["--gradient-accumulation-steps", str(10**30)], "must be at most 2147483647"),
        (
            "sl_neural",
            ["--task", "classification", "--label-column", "kind", "colour"],
            "a classifier predicts one column; for several",
        ),
        ("sl_tree", ["--num-boost-round", str(2**31)], "num_boost_round 2147483648: must be at most"),
        ("rl", ["--hidden-sizes", "64", str(2**33)], "hidden_sizes (64, 8589934592): must be at most"),
        ("rl", ["--num-envs", "0"], "num_envs 0: must be at least 1"),
        ("rl", ["--eval-episodes", "20000"], "eval_episodes 20000: must be at most 10000"),
        ("sl_tree", ["--reg-lambda", "1e-308"], "reg_lambda 1e-308: XGBoost: Out of range value"),
        ("sl_tree", ["--min-child-weight", "1e300"], "min_child_weight 1e+300: XGBoost: Out of range"),
        ("sl_neural", ["--stop-file", "x" * 300], "stop_file 'xxx"),
        ("sl_tree", ["--output.base-dir", "y" * 300], "the system refuses it (File name too long)"),
        # A long name under a folder still to be made, which the system checks only then.
        ("sl_neural", ["--output.base-dir", f"missing/{'y' * 300}"], "a folder name is 300 bytes (yyy"),
    ],
)
def test_values_the_libraries_would_fail_on_are_refused_first(kind, args, message, capsys):
    assert message in refused(kind, ["--config", "smoke", *args], capsys)


@pytest.mark.parametrize("kind", sorted(PARTS))
@pytest.mark.parametrize(
    ("field", "message"),
    [
        # A misspelt override became a flag that nothing read, and the checker passed it.
        (("seeed", int, 7), "config 'mine' (Mine) declares seeed, which "),
        # It failed deep in the libraries, after the run directory was made.
        (("seed", int, 2.5), "config 'mine' cannot run:\n  seed 2.5: not an int"),
    ],
    ids=["misspelt", "mistyped"],
)
def test_a_variant_that_misspells_or_mistypes_a_field_is_refused_in_one_line(kind, field, message, capsys):
    task = next(iter(part_module(kind, "config").CONFIGS.values()))
    variant = dataclasses.make_dataclass("Mine", [field, ("name", str, "mine")], bases=(task,))
    with pytest.raises(SystemExit) as exit_info:
        parse_cli({task().name: task, "mine": variant}, ["--config", "mine"])
    assert exit_info.value.code == 2 and "Traceback" not in (said := capsys.readouterr().err)
    assert message in said


@pytest.mark.skipif("sl_tree" not in PARTS, reason="this project has no tree part")
def test_a_word_of_a_booster_parameter_xgboost_would_refuse_mid_run_is_refused_first(capsys):  # CFG-3
    # A parameter of words, added as the README says: only numbers were asked before the run.
    task = next(iter(part_module("sl_tree", "config").CONFIGS.values()))
    mine = dataclasses.make_dataclass("Mine", [("grow_policy", str, "depthwise")], bases=(task,))
    with pytest.raises(SystemExit) as exit_info:
        parse_cli({task().name: mine}, ["--grow-policy", "lossguid"])
    assert exit_info.value.code == 2
    said = "grow_policy lossguid: XGBoost: Invalid Input: 'lossguid', valid values are: {'depthwise', "
    assert said in capsys.readouterr().err


@pytest.mark.parametrize("field", ["label_column", "feature_columns"])
def test_a_neural_variant_naming_its_columns_by_a_bare_string_is_refused_in_one_line(field, capsys):
    # Written as a tree part's label_column is: `label_column: str = "kind"` in a variant.
    task = part_module("sl_neural", "config").CONFIGS["smoke"]
    variant = dataclasses.make_dataclass("Mine", [(field, str, "kind"), ("name", str, "mine")], bases=(task,))
    with pytest.raises(SystemExit) as exit_info:
        parse_cli({"mine": variant}, [])
    assert exit_info.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines[-1].strip() == f"{field} 'kind': a tuple of column names, as (\"kind\",)"
    assert not [line for line in lines if "k i n d" in line or "listed more than once" in line]


@pytest.mark.parametrize(
    ("kind", "args", "message"),
    [
        # RES-2: a schedule that decays over the run needs the run's length, known up front.
        ("sl_neural", ["--num-epochs", "10000", "--scheduler", "cosine"], "it decays over num_epochs, 10000"),
        ("rl", ["--num-epochs", "10000", "--scheduler", "onecycle"], "set num_epochs to the epochs to train"),
        ("sl_neural", ["--scheduler", "cosine", "--num-epochs", "9", "--find-batch-size"], "find_batch_size"),
        ("rl", ["--warmup-fraction", "1"], "warmup_fraction 1.0, min_lr_fraction 0.0: must be in [0, 1)"),
        ("rl", ["--scheduler", "plateau"], "invalid choice 'plateau'"),  # PPO has no epoch metric to watch
    ],
)
def test_schedules_that_cannot_run_are_refused_first(kind, args, message, capsys):
    assert message in refused(kind, args, capsys)


@pytest.mark.parametrize("kind", sorted(PARTS))
def test_online_wandb_without_an_api_key_is_refused_first(kind, capsys, monkeypatch, tmp_path):
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.setenv("NETRC", str(tmp_path / "no-netrc"))
    output = refused(kind, ["--config", "smoke", "--wandb-mode", "online"], capsys)
    assert "wandb_mode 'online': W&B online needs an API key" in output


@pytest.mark.skipif(torch.cuda.is_available(), reason="the machine has a GPU")
@pytest.mark.parametrize("kind", LIGHTNING_PARTS)
def test_asking_for_a_gpu_on_a_machine_without_one_is_refused(kind, capsys):
    output = refused(kind, ["--accelerator", "cuda"], capsys)
    assert "accelerator 'cuda': none is visible on this machine" in output


@pytest.mark.parametrize("kind", sorted(PARTS))
def test_underscore_spellings_of_flags_are_accepted(kind):
    cfg, _ = parse_cli(
        part_module(kind, "config").CONFIGS, ["--max_wall_clock_hours", "2", "--output.base_dir", "x"]
    )
    assert (cfg.max_wall_clock_hours, cfg.output.base_dir) == (2, "x")


# What takes seconds to import: a command's --help, and its answer to a mistyped flag,
# come before any of it loads.
TRAINING_LIBRARIES = {"torch", "lightning", "torchrl", "wandb", "xgboost", "sklearn", "pandas"}


@slow
@pytest.mark.parametrize("kind", sorted(PARTS))
def test_help_answers_before_the_training_libraries_load(kind, tmp_path):
    result, imported = run_python(["-m", f"{PARTS[kind]}.train", "--help"], tmp_path)
    assert result.returncode == 0 and "--config" in result.stdout, result.stderr
    assert not imported & TRAINING_LIBRARIES


# A checklist item's ID as the code cites it: a user reads --help without the checklist at hand.
CHECKLIST_ID = re.compile(r"\b(?:CFG|STR|LIT|LOG|PRF|PRC|RL|MEM|MAIN|CB|OPS|OUT|SWP|RES|DDP|DATA)-\d+\b")


def commands() -> list[str]:
    """Every module of the parts and of src/ that runs as `python -m MODULE`."""
    files = [path for folder in PARTS.values() for path in (ROOT / folder).glob("*.py")]
    files += (ROOT / "src").rglob("*.py")
    runnable = [path for path in files if re.search(r'^if __name__ == "__main__":', path.read_text(), re.M)]
    modules = (".".join(path.relative_to(ROOT).with_suffix("").parts) for path in runnable)
    return sorted(module.removesuffix(".__main__") for module in modules)


@slow
@pytest.mark.parametrize("module", commands())
def test_help_that_the_reader_stops_reading_ends_without_a_traceback(tmp_path, module):
    # `--help | head`: the pipe closes before the help is all written (here, before any of it).
    read_end, write_end = os.pipe()
    os.close(read_end)
    env = {**os.environ, "PYTHONPATH": PROJECT_PYTHONPATH}
    streams = {"stdout": write_end, "stderr": subprocess.PIPE, "text": True}
    try:
        result = subprocess.run([sys.executable, "-m", module, "--help"], cwd=tmp_path, env=env, **streams)
    finally:
        os.close(write_end)
    assert result.stderr == ""
    assert result.returncode in (0, 141)  # argparse (the checker's) passes over a failed write: 0


@slow
@pytest.mark.parametrize("module", commands())
def test_no_commands_help_names_a_checklist_item(module, tmp_path):
    result, _ = run_python(["-m", module, "--help"], tmp_path)
    assert result.returncode == 0 and "usage:" in result.stdout, result.stderr
    assert not CHECKLIST_ID.findall(result.stdout), result.stdout


@slow
@pytest.mark.parametrize("kind", sorted(PARTS))
def test_a_bad_command_line_exits_2_without_traceback_or_run_dir(kind, tmp_path):
    command = ["-m", f"{PARTS[kind]}.train", "--config", "smoke", "--seed", "x"]
    result, imported = run_python(command, tmp_path)
    assert result.returncode == 2, result.stderr
    assert "--seed" in result.stderr + result.stdout and "Traceback" not in result.stderr
    assert not (tmp_path / "output").exists()
    assert not imported & TRAINING_LIBRARIES  # answered at once


@slow
@pytest.mark.parametrize(
    ("kind", "args", "message"),
    [
        ("sl_tree", ["--objective", "foo"], "objective 'foo': XGBoost: Unknown objective function"),
        ("rl", ["--env-name", "FrozenLake-v1"], "env_name 'FrozenLake-v1': its observation is Categorical"),
    ],
)
def test_a_name_the_libraries_refuse_exits_2_with_one_line_before_any_run_dir(kind, args, message, tmp_path):
    train = part_module(kind, "train")
    result = subprocess.run(
        [sys.executable, "-m", train.__name__, "--config", "smoke", *args],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": PROJECT_PYTHONPATH},
        capture_output=True,
        text=True,
    )
    assert result.returncode == 2, result.stderr
    assert [line for line in result.stderr.splitlines() if message in line], result.stderr
    assert "Traceback" not in result.stderr and not (tmp_path / "output").exists()


def help_texts(configs, name, capsys, monkeypatch) -> dict[str, str]:
    """{flag: its help text} as `--config NAME --help` prints them."""
    monkeypatch.setenv("COLUMNS", "400")  # one line per option: no wrapping to undo
    with pytest.raises(SystemExit) as exit_info:
        parse_cli(configs, ["--config", name, "--help"])
    assert exit_info.value.code == 0
    found, flag = {}, None
    for line in capsys.readouterr().out.splitlines():
        inside = line.strip("│").rstrip()
        # An option's line: flag, metavar, then (after two spaces or more) its help;
        # a deeper-indented line continues the help of the option above.
        first, *rest = re.split(r"\s{2,}", inside.strip())
        if re.match(r"--[a-z]", first):
            flag = first.split()[0].rstrip(",")
            found[flag] = " ".join(rest)
        elif flag and re.match(r"\s{3,}\S", inside):
            found[flag] = f"{found[flag]} {inside.strip()}".strip()
    return {flag: text.split("(default:")[0].strip() for flag, text in found.items() if flag != "--help"}


def field_flags(config_cls, prefix="") -> set[str]:
    flags = set()
    for field in dataclasses.fields(config_cls):
        flag = prefix + field.name.replace("_", "-")
        default = field.default_factory() if field.default is dataclasses.MISSING else field.default
        is_group = dataclasses.is_dataclass(default)
        flags |= field_flags(type(default), flag + ".") if is_group else {"--" + flag}
    return flags


@pytest.mark.parametrize("kind", sorted(PARTS))
def test_every_flag_has_help_of_its_own(kind, capsys, monkeypatch):
    configs = part_module(kind, "config").CONFIGS
    for name, config_cls in configs.items():
        helps = help_texts(configs, name, capsys, monkeypatch)
        assert field_flags(config_cls) | {"--config", "--resume"} == set(helps), name
        assert f"({', '.join(configs)})" in helps["--config"]  # the names it takes
        for flag, text in helps.items():
            assert text, f"{name}: {flag} has no help"
            # Checklist IDs mean nothing to a user who has no CHECKLIST.md.
            assert not re.search(r"\b[A-Z]{2,4}-\d+\b", text), f"{name}: {flag}: {text}"
        shared = {text for text in helps.values() if list(helps.values()).count(text) > 1}
        assert not shared, f"{name}: help shared by several flags: {shared}"


@pytest.mark.skipif("sl_neural" not in PARTS, reason="this project has no neural part")
def test_a_resume_reads_its_table_where_it_moved_and_no_other(tmp_path, monkeypatch, capsys):  # RES-1
    monkeypatch.chdir(tmp_path)
    configs = part_module("sl_neural", "config").CONFIGS
    table = Path("data", "table.csv")
    table.parent.mkdir()
    table.write_text("x,target\n" + "".join(f"{row},{row % 2}\n" for row in range(40)))
    with start_run(dataclasses.replace(configs["smoke"](), data_path=str(table))) as run:
        last = run.dir / "checkpoints" / "last.ckpt"
        last.parent.mkdir()
        torch.save({"epoch": 0, "state_dict": {"w": torch.zeros(2)}}, last)
    moved = tmp_path / "project moved" / "table.csv"  # by another spelling too: absolute
    moved.parent.mkdir()
    table.rename(moved)
    cfg, resume_from = parse_cli(configs, ["--resume", str(run.dir), "--data-path", str(moved)])
    assert (cfg.data_path, resume_from) == (str(moved), last)
    moved.write_text(moved.read_text() + "40,0\n")  # another table there
    with pytest.raises(SystemExit) as exit_info:
        parse_cli(configs, ["--resume", str(run.dir), "--data-path", str(moved)])
    assert exit_info.value.code == 2
    assert "--data-path would change what a run under way learns from" in capsys.readouterr().err


def unfinished_run(run_dir, part: str):
    """An unfinished run of `part` killed after its first checkpoint, as `--resume auto` finds it."""
    (run_dir / "checkpoints").mkdir(parents=True)
    (run_dir / "config.json").write_text("{}")
    (run_dir / "run.json").write_text(json.dumps({"status": "interrupted", "part": part}))
    torch.save({"epoch": 0, "state_dict": {"w": torch.zeros(2)}}, run_dir / "checkpoints" / "last.ckpt")
    return run_dir


def test_a_run_whose_config_has_fields_the_code_no_longer_has_says_so(tmp_path, capsys):  # RES-1
    # An earlier release's run: its config.json holds fields this release removed.
    kind = sorted(PARTS)[0]
    configs = part_module(kind, "config").CONFIGS
    run_dir = unfinished_run(tmp_path / "smoke_20260101_120000", PARTS[kind])
    (run_dir / "config.json").write_text(json.dumps({"name": "smoke", "num_features": 64}))
    with pytest.raises(SystemExit) as exit_info:
        parse_cli(configs, ["--config", "smoke", "--resume", str(run_dir)])
    assert exit_info.value.code == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert "(a run of code that had them (an earlier release, or fields you removed)): " in line
    assert "unknown field(s) num_features" in line


@pytest.mark.parametrize("kind", sorted(PARTS))
def test_each_part_keeps_to_its_own_runs(kind, tmp_path, monkeypatch, capsys):  # OUT-1, RES-1
    monkeypatch.chdir(tmp_path)
    configs = part_module(kind, "config").CONFIGS
    name = next(iter(configs))  # the first config, whatever it is called
    part = PARTS[kind]
    with start_run(configs["smoke"]()) as run:  # the default output.base_dir: output/{part}
        assert run.dir.parent == Path("output", part)
    assert json.loads((run.dir / "run.json").read_text())["part"] == part
    # Another part's unfinished run of the same config name, in its own folder and in a
    # folder both parts write to: --resume auto passes over both.
    unfinished_run(Path("output", "part9", f"{name}_20260101_120000"), "part9")
    unfinished_run(Path("shared", f"{name}_20260101_120000"), "part9")
    for argv in (["--config", name], ["--config", name, "--output.base-dir", "shared"]):
        _, resume_from = parse_cli(configs, [*argv, "--resume", "auto"])
        assert resume_from is None and f"no unfinished '{name}' run" in capsys.readouterr().out
    ours = unfinished_run(Path("output", part, f"{name}_20260101_110000"), part)
    _, resume_from = parse_cli(configs, ["--config", name, "--resume", "auto"])
    assert resume_from == ours / "checkpoints" / "last.ckpt"
    # Named by hand, another part's run is refused in one line.
    with pytest.raises(SystemExit) as exit_info:
        parse_cli(configs, ["--config", name, "--resume", f"shared/{name}_20260101_120000"])
    assert exit_info.value.code == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line == (
        f"error: --resume shared/{name}_20260101_120000: that is a run of part9; "
        "resume it with python -m part9.train"
    )
