"""Sweeps (SWP-1..7): every part's local sweep, a failing trial, the sweep's clock, W&B's sweep runs,
and a sweep that is killed or stopped and resumed (RES-1)."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import weakref
from datetime import datetime
from pathlib import Path

import pytest
import torch
import wandb
from conftest import PARTS, PROJECT_PYTHONPATH, ROOT, part_module, slow, write_mixed_table
from optuna.trial import TrialState

from src.config import BaseConfig, ConfigError
from src.runs.atomic import WriteFailed, atomic_path
from src.runs.directory import latest_checkpoint
from src.runs.lifetime import start_run, training_stopped
from src.sweep import SweepSpec, main
from src.sweep.local import open_study, run_local
from src.sweep.runner import Sweep, SweepState
from src.wandb_utils import finish_run, setup_run


def local_sweep(kind: str, tmp_path: Path, *args: str) -> Sweep:
    argv = [
        "--engine",
        "local",
        "--config",
        "smoke",
        "--output.base-dir",
        str(tmp_path),
        "--wandb-mode",
        "disabled",
        "--output.no-report",  # the trials' own reports: the sweep's comparison is drawn all the same
    ]
    return main(part_module(kind, "sweep").SPEC, [*argv, *args])


def own_task(kind: str, tmp_path: Path) -> list[str]:
    """The supervised neural part sweeps a regression of a raw table (its kill tests below
    sweep its classifier of the bundled data); the other parts their own data."""
    if kind != "sl_neural":
        return []
    table = write_mixed_table(tmp_path / "table.csv")
    return ["--data-path", str(table), "--task", "regression", "--label-column", "height", "weight"]


@slow
@pytest.mark.parametrize("kind", sorted(PARTS))
def test_a_local_sweep_of_three_smoke_trials(kind, tmp_path, capsys):  # SWP-1, SWP-2, SWP-4
    sweep = local_sweep(kind, tmp_path, "--trials", "3", *own_task(kind, tmp_path))
    # It ends by saying where its summary and the comparison of its best trials are.
    *_, summary_line, comparison_line = capsys.readouterr().out.splitlines()
    assert summary_line == f"summary: {sweep.dir / 'summary.md'}"
    assert comparison_line == f"the best trials compared: {sweep.dir / 'comparison' / 'report.md'}"
    assert [t.status for t in sweep.trials] == ["finished"] * 3
    run_dirs = {Path(t.run_dir) for t in sweep.trials}
    assert len(run_dirs) == 3 and all((d / "config.json").is_file() for d in run_dirs)
    for trial in sweep.trials:  # SWP-4: the preset's fields reached the trial's config
        saved = json.loads((Path(trial.run_dir) / "config.json").read_text())
        preset = sweep.spec.architectures[trial.params["architecture"]]
        assert {name: saved[name] for name in preset} == json.loads(json.dumps(preset))
        assert saved.get("devices", "1") == "1"  # auto, which may be every GPU there is: one
    summary = (sweep.dir / "summary.md").read_text()
    assert all(Path(t.run_dir).name in summary for t in sweep.trials)
    assert "](comparison/report.md)" in summary  # the trials side by side
    comparison = (sweep.dir / "comparison" / "report.md").read_text()
    assert all(Path(t.run_dir).name in comparison for t in sweep.trials)
    assert len((sweep.dir / "trials.jsonl").read_text().splitlines()) == 3
    values = [t.value for t in sweep.ranked()]
    assert values == sorted(values, reverse=sweep.spec.goal == "maximize")


def test_a_moved_sweep_resumes_and_compares_its_trials_where_they_are_now(tmp_path, capsys):  # RES-1, SWP-2
    kind = "sl_tree" if "sl_tree" in PARTS else sorted(PARTS)[0]  # the quickest to train
    sweep = local_sweep(kind, tmp_path / "before", "--trials", "2")
    moved = tmp_path / "after" / "sweep moved"
    moved.parent.mkdir()
    sweep.dir.rename(moved)
    capsys.readouterr()
    resumed = local_sweep(kind, tmp_path / "before", "--resume", str(moved), "--trials", "3")
    assert "no comparison" not in capsys.readouterr().out
    comparison = (moved / "comparison" / "report.md").read_text()
    assert resumed.dir == moved and all(Path(t.run_dir).name in comparison for t in resumed.ranked())


@slow
def test_the_sweep_clock_stops_the_running_trial_with_its_checkpoint(tmp_path):  # SWP-5
    kind = sorted(PARTS)[0]
    sweep = local_sweep(kind, tmp_path, "--trials", "3", "--max-hours", "1e-4")  # 0.36 s
    # Its score is of a shorter training than a whole trial's: recorded, not ranked.
    (trial,) = sweep.trials  # and no trial after it
    assert trial.status == "cut short" and trial.value is not None and trial.score is None
    assert "|  | 0 | cut short |" in (sweep.dir / "summary.md").read_text()  # no rank
    assert [told.state for told in open_study(sweep).trials] == [TrialState.PRUNED]
    run_dir = Path(trial.run_dir)
    assert list((run_dir / "checkpoints").glob("last.*"))


LEAKED: list[weakref.ref] = []


def toy_train(cfg: BaseConfig, resume_from: Path | None = None) -> dict[str, float]:
    """Holds a tensor in its frame; the second trial fails while holding it."""
    with start_run(cfg, resume_from):
        activations = torch.ones(1_000_000)
        LEAKED.append(weakref.ref(activations))
        if cfg.name.endswith("trial001"):
            raise RuntimeError("out of memory, say")
        return {"score": float(cfg.seed)}


@slow
def test_a_failing_trial_is_recorded_and_its_memory_released(tmp_path, capsys):  # SWP-7
    spec = toy_spec(toy_train)
    base = dataclasses.replace(
        BaseConfig(wandb_mode="disabled"),
        output=dataclasses.replace(BaseConfig().output, base_dir=str(tmp_path)),
    )
    sweep = Sweep(spec, base, tmp_path, max_hours=1)
    run_local(sweep, trials=3, seed=0)
    assert [t.status for t in sweep.trials] == ["finished", "failed", "finished"]
    # Running out of memory is the config's doing: one line, no traceback.
    assert sweep.trials[1].error.startswith("out of memory (out of memory, say)")
    assert "Traceback" not in capsys.readouterr().err
    assert all(ref() is None for ref in LEAKED)  # the failed trial's tensor is gone too
    assert sweep.ranked()[-1].status == "failed" and "|  | 1 | failed |" in sweep.finish()  # unranked


def test_bad_sweep_arguments_exit_2(tmp_path, capsys):
    spec = part_module(sorted(PARTS)[0], "sweep").SPEC
    with pytest.raises(SystemExit) as exit_info:
        main(spec, ["--trials", "0", "--output.base-dir", str(tmp_path)])
    assert exit_info.value.code == 2 and "--trials 0" in capsys.readouterr().err


def test_setup_run_joins_a_sweep_run_instead_of_starting_one(tmp_path):  # SWP-3
    # A real (offline) run carrying a sweep id, as wandb.agent starts one for each trial.
    settings = wandb.Settings(sweep_id="abc123")
    agent_run = wandb.init(mode="offline", dir=tmp_path, project="sweep-test", settings=settings)
    try:
        assert agent_run.sweep_id == "abc123"
        cfg = BaseConfig(name="trial", seed=7, wandb_mode="offline")
        assert setup_run(cfg, tmp_path) is agent_run
        assert agent_run.config["seed"] == 7 and agent_run.config["name"] == "trial"
        finish_run()  # the end of training leaves the agent's run open for its score
        assert wandb.run is agent_run
    finally:
        wandb.finish()


# Flags that make a smoke trial last a few seconds after its first checkpoint, so that the
# kill below lands inside it; the parts in the order they are quickest to test.
KILL_FLAGS = {
    "sl_neural": ["--num-epochs", "6", "--patience", "100"],
    "sl_tree": ["--num-boost-round", "600", "--early-stopping-rounds", "600", "--checkpoint-minutes", ".001"],
    "rl": ["--target-reward", "None"],  # smoke's two epochs, never ended early by the reward
}


def second_trial_checkpointed(sweeps: Path) -> bool:
    """Trial 0 recorded, trial 1 under way with a checkpoint."""
    records = list(sweeps.glob("smoke_*/trials.jsonl"))
    return bool(records and records[0].read_text().count("\n") == 1) and any(
        latest_checkpoint(run) for run in sweeps.glob("smoke_*/smoke-trial001_*")
    )


@slow
def test_a_killed_local_sweep_resumes_without_repeating_a_trial(tmp_path):  # RES-1, SWP-5
    kind = next(kind for kind in KILL_FLAGS if kind in PARTS)
    flags = ["--config", "smoke", "--output.base-dir", str(tmp_path), "--wandb-mode", "disabled"]
    flags += ["--output.no-report", *KILL_FLAGS[kind]]
    command = [sys.executable, "-m", f"{PARTS[kind]}.sweep", "--engine", "local", "--trials", "3", *flags]
    with open(tmp_path / "first.log", "w") as log:
        process = subprocess.Popen(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    sweeps = tmp_path / "sweeps"
    deadline = time.monotonic() + 300
    while process.poll() is None and time.monotonic() < deadline and not second_trial_checkpointed(sweeps):
        time.sleep(0.05)
    process.kill()  # kill -9: nothing of the sweep's own runs
    process.wait()
    (sweep_dir,) = sweeps.glob("smoke_*")
    first_record = (sweep_dir / "trials.jsonl").read_text()
    assert first_record.count("\n") == 1, (tmp_path / "first.log").read_text()[-3000:]
    killed_summary = (sweep_dir / "summary.md").read_text()  # written after the first trial
    (first_run,) = sweep_dir.glob("smoke-trial000_*")
    assert first_run.name in killed_summary and "trial001" not in killed_summary

    sweep = main(part_module(kind, "sweep").SPEC, [*flags, "--resume", "auto"])
    assert sweep.dir == sweep_dir
    assert [(t.number, t.status) for t in sweep.trials] == [(0, "finished"), (1, "finished"), (2, "finished")]
    assert list(sweep_dir.glob("smoke-trial000_*")) == [first_run]  # trial 0 kept, not run again
    assert (sweep_dir / "trials.jsonl").read_text().startswith(first_record)
    (killed_run,) = sweep_dir.glob("smoke-trial001_*")  # continued in its own run directory
    history = json.loads((killed_run / "run.json").read_text())["history"]
    assert sweep.trials[1].resumed_from and history[-1]["resumed_from"] == sweep.trials[1].resumed_from
    summary = (sweep_dir / "summary.md").read_text()
    assert all(Path(t.run_dir).name in summary for t in sweep.trials)
    assert json.loads((sweep_dir / "sweep.json").read_text())["status"] == "finished"


def toy_spec(train) -> SweepSpec:
    @dataclasses.dataclass
    class Other(BaseConfig):
        name: str = "other"

    return SweepSpec(
        configs={"baseline": BaseConfig, "other": Other},
        space={"seed": {"values": [1, 2, 3]}},
        architectures={},
        train=train,
        metric="score",
        goal="maximize",
    )


def toy_sweep(spec: SweepSpec, tmp_path: Path, *args: str) -> Sweep:
    return main(spec, ["--output.base-dir", str(tmp_path), "--wandb-mode", "disabled", *args])


@pytest.mark.parametrize(
    ("error", "status"), [(ValueError("a bug, say"), 1), (ConfigError("learning_rate 5: too high, say"), 2)]
)
def test_a_sweep_whose_every_trial_failed_exits_non_zero(tmp_path, capsys, error, status):
    # Status 2 when every trial failed on its values (as one run would), 1 on a bug.
    def train(cfg: BaseConfig, resume_from: Path | None = None) -> dict[str, float]:
        with start_run(cfg, resume_from):
            raise error

    with pytest.raises(SystemExit) as exit_info:
        toy_sweep(toy_spec(train), tmp_path, "--trials", "2")
    errors = capsys.readouterr().err
    assert exit_info.value.code == status and "error: every trial failed;" in errors
    assert errors.count("Traceback") == (2 if status == 1 else 0)  # a bug's is kept, once per trial


def test_sweeps_started_in_the_same_second_get_folders_of_their_own_and_resume_in_order(
    tmp_path, monkeypatch
):
    class SameSecond(datetime):
        @classmethod
        def now(cls, tz=None):
            return datetime(2026, 11, 27, 6, 30, 0, tzinfo=tz)

    monkeypatch.setattr("src.runs.directory.datetime", SameSecond)

    def train(cfg: BaseConfig, resume_from: Path | None = None) -> dict[str, float]:
        with start_run(cfg, resume_from):
            return {"score": float(cfg.seed)}

    first, second = (toy_sweep(toy_spec(train), tmp_path, "--trials", "1") for _ in range(2))
    assert (first.dir.name, second.dir.name) == ("baseline_20261127_063000", "baseline_20261127_063000_2")
    assert all(sweep.trials[0].status == "finished" for sweep in (first, second))

    # The ninth and tenth of that second, both cut short: --resume auto takes the tenth, which
    # sorts before the ninth as text.
    for number in range(3, 9):
        (tmp_path / "sweeps" / f"baseline_20261127_063000_{number}").mkdir()
    ninth, tenth = (toy_sweep(toy_spec(train), tmp_path, "--trials", "1").dir for _ in range(2))
    assert (ninth.name, tenth.name) == ("baseline_20261127_063000_9", "baseline_20261127_063000_10")
    for sweep_dir in (ninth, tenth):
        state = json.loads((sweep_dir / "sweep.json").read_text())
        (sweep_dir / "sweep.json").write_text(json.dumps({**state, "status": "interrupted"}))
    assert toy_sweep(toy_spec(train), tmp_path, "--resume", "auto").dir == tenth


@slow
@pytest.mark.parametrize(
    ("signal_number", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143), (signal.SIGHUP, 129)]
)
def test_a_signal_ends_a_sweep_quietly_and_resume_goes_on(tmp_path, capsys, signal_number, status):
    signalled = []

    def train(cfg: BaseConfig, resume_from: Path | None = None) -> dict[str, float]:
        with start_run(cfg, resume_from):
            if cfg.name.endswith("trial001") and not signalled:
                signalled.append(cfg.name)
                os.kill(os.getpid(), signal_number)  # as Ctrl-C or `kill PID` would
                time.sleep(30)
            return {"score": float(cfg.seed)}

    spec = toy_spec(train)
    with pytest.raises(SystemExit) as exit_info:
        toy_sweep(spec, tmp_path, "--trials", "3")
    errors = capsys.readouterr().err
    assert exit_info.value.code == status and "Traceback" not in errors
    (sweep_dir,) = (tmp_path / "sweeps").glob("baseline_*")
    # The trial's own advice is its sweep's: the trial folder is no sweep's to resume.
    assert f"its sweep continues it: give the sweep command --resume {sweep_dir}" in errors
    assert json.loads((sweep_dir / "sweep.json").read_text())["status"] == "interrupted"
    (stopped_run,) = sweep_dir.glob("baseline-trial001_*")
    assert json.loads((stopped_run / "run.json").read_text())["status"] == "interrupted"
    summary = (sweep_dir / "summary.md").read_text()
    assert "| 0 | finished |" in summary and "| 1 | interrupted |" in summary

    # The stopped trial had no checkpoint: it runs again with its values, then the sweep goes on.
    stopped_seed = json.loads((stopped_run / "config.json").read_text())["seed"]
    sweep = toy_sweep(spec, tmp_path, "--resume", "auto")
    assert sweep.dir == sweep_dir and [t.number for t in sweep.trials] == [0, 1, 2]
    assert [t.status for t in sweep.trials] == ["finished"] * 3
    assert sweep.trials[1].value == stopped_seed and len(list(sweep_dir.glob("baseline-trial000_*"))) == 1

    # --trials is the sweep's total: a finished sweep of 3 grows to 4 by one more trial.
    sweep = toy_sweep(spec, tmp_path, "--resume", str(sweep_dir), "--trials", "4")
    assert [t.number for t in sweep.trials] == [0, 1, 2, 3] and sweep.trials[3].status == "finished"
    assert (sweep_dir / "trials.jsonl").read_text().count("\n") == 4
    # Fewer than it has: none more, and the summary counts what ended ("4 of 2" it said).
    sweep = toy_sweep(spec, tmp_path, "--resume", str(sweep_dir), "--trials", "2")
    assert len(sweep.trials) == 4
    assert "finished, 4 of 4 trials ended" in (sweep_dir / "summary.md").read_text()


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--engine", "wandb"], "--resume, --study and --storage are for a local sweep"),
        (["--config", "other"], "that sweep is of config 'baseline'"),
    ],
    ids=["engine", "config"],
)
def test_resuming_with_another_engine_or_config_exits_2(tmp_path, capsys, flags, message):
    sweep = toy_sweep(toy_spec(toy_train), tmp_path, "--trials", "1")
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        toy_sweep(toy_spec(toy_train), tmp_path, *flags, "--resume", str(sweep.dir))
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and message in err and len(err.strip().splitlines()) == 1


@dataclasses.dataclass
class Scored(BaseConfig):
    """A config that chooses the metric its sweep ranks trials by, as the tree part's eval_metric does."""

    eval_metric: str = "score"


def scored_train(cfg: BaseConfig, resume_from: Path | None = None) -> dict[str, float]:
    with start_run(cfg, resume_from):
        return {"score": float(cfg.seed), "other": -float(cfg.seed)}


def scored_spec(**space: dict) -> SweepSpec:
    return SweepSpec(
        configs={"baseline": Scored},
        space=space or {"seed": {"values": [1, 2, 3]}},
        architectures={},
        train=scored_train,
        metric=lambda cfg: cfg.eval_metric,
        goal="maximize",
    )


@pytest.mark.parametrize("join", ["--resume", "--study"])
def test_a_sweep_goes_on_only_with_the_config_and_metric_its_trials_had(tmp_path, capsys, join):  # SWP-2
    sweep = toy_sweep(scored_spec(), tmp_path, "--trials", "1")
    records = {name: (sweep.dir / name).read_text() for name in ("sweep.json", "config.json", "trials.jsonl")}
    capsys.readouterr()
    # Another metric would rank the earlier trials' scores against the new ones'.
    with pytest.raises(SystemExit) as exit_info:
        toy_sweep(scored_spec(), tmp_path, join, str(sweep.dir), "--trials", "2", "--eval-metric", "other")
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert exit_info.value.code == 2
    assert line == (
        f"error: {join} {sweep.dir}: --eval-metric would change what its trials learn from or how they "
        "are ranked; start a new sweep to change them"
    )
    assert {name: (sweep.dir / name).read_text() for name in records} == records
    # A flag that changes neither (where W&B logs) is taken; a worker that joins leaves the
    # sweep's config as it is.
    toy_sweep(scored_spec(), tmp_path, join, str(sweep.dir), "--trials", "2", "--wandb-project", "elsewhere")
    projects = [
        json.loads(text)["wandb_project"]
        for text in (records["config.json"], (sweep.dir / "config.json").read_text())
    ]
    assert projects[1] == ("elsewhere" if join == "--resume" else projects[0])


@pytest.mark.parametrize(
    ("space", "message"),
    [
        ({"seed": {"min": 5, "max": 1}}, r"error: search space 'seed': Optuna refuses it: .*low <= high"),
        ({"seed": {"values": []}}, r"error: search space 'seed': Optuna refuses it: "),
        (
            {"max_wall_clock_hours": {"min": 0.0, "max": 1.0, "distribution": "log_uniform_values"}},
            r"error: search space 'max_wall_clock_hours': Optuna refuses it: .*log=True",
        ),
        ({"sed": {"values": [1, 2]}}, r"error: search space: sed not a field of Scored \(a misspelt"),
        # It trained as what the value meant to Python, and nothing loaded its config.json again.
        ({"seed": {"values": [1, "two"]}}, r'error: search space \'seed\': seed "two": not an int$'),
    ],
    ids=["min-above-max", "no-values", "log-from-zero", "misspelt", "another-type"],
)
def test_a_search_space_that_cannot_be_sampled_is_one_line_before_any_trial(tmp_path, capsys, space, message):
    with pytest.raises(SystemExit) as exit_info:
        toy_sweep(scored_spec(**space), tmp_path, "--trials", "2")
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert exit_info.value.code == 2 and re.match(message, line), line
    assert not (tmp_path / "sweeps").exists()  # no trial, no folder


def test_a_trial_that_trained_in_full_before_the_sweeps_clock_ran_out_is_ranked(
    tmp_path, monkeypatch
):  # SWP-5
    # Its epochs, not the clock, ended its training: the clock ran out as it tested, say.
    def train(cfg: BaseConfig, resume_from: Path | None = None) -> dict[str, float]:
        with start_run(cfg, resume_from):
            training_stopped("budget", "num_epochs 3 trained")
            # The sweep's hour (less than the trial's own 24) is spent now, however long it took.
            monkeypatch.setattr(Sweep, "hours_left", lambda sweep: 0.0)
            return {"score": 1.0}

    sweep = toy_sweep(toy_spec(train), tmp_path, "--trials", "2", "--max-hours", "1")
    (trial,) = sweep.trials
    assert (trial.status, trial.score) == ("finished", 1.0)


def test_a_resume_refused_for_its_database_changes_nothing(tmp_path, capsys):  # RES-1
    database = tmp_path / "studies.db"
    sweep = toy_sweep(toy_spec(toy_train), tmp_path, "--trials", "1", "--storage", f"sqlite:///{database}")
    before = (sweep.dir / "sweep.json").read_text()
    capsys.readouterr()
    # Another database than the one the sweep's study is in: neither used nor made.
    other = tmp_path / "other.db"
    with pytest.raises(SystemExit) as exit_info:
        toy_sweep(
            toy_spec(toy_train), tmp_path, "--resume", str(sweep.dir), "--storage", f"sqlite:///{other}"
        )
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert exit_info.value.code == 2 and "leave out --storage" in line and not other.exists()
    # Its own database, cut short.
    database.write_bytes(database.read_bytes()[: database.stat().st_size // 2])
    with pytest.raises(SystemExit) as exit_info:
        toy_sweep(toy_spec(toy_train), tmp_path, "--resume", str(sweep.dir), "--trials", "3")
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert exit_info.value.code == 2 and "Optuna cannot use it" in line
    assert (sweep.dir / "sweep.json").read_text() == before


def test_lines_damage_left_in_trials_jsonl_are_passed_over(tmp_path):  # RES-1
    sweep = toy_sweep(scored_spec(), tmp_path, "--trials", "2")
    with open(sweep.dir / "trials.jsonl", "ab") as file:
        file.write(b'[1, 2]\n{"foo": 1}\n\xff\xfe not text\n')
    resumed = toy_sweep(scored_spec(), tmp_path, "--resume", str(sweep.dir), "--trials", "3")
    assert [(trial.number, trial.status) for trial in resumed.trials] == [(n, "finished") for n in range(3)]


@pytest.mark.parametrize("damage", [{"max_hours": None}, {"trials": "3"}, {"name": 7}])
def test_a_sweep_json_with_a_field_of_another_kind_is_no_sweep_to_resume(tmp_path, capsys, damage):
    sweep = toy_sweep(scored_spec(), tmp_path, "--trials", "1")
    record = json.loads((sweep.dir / "sweep.json").read_text())
    (sweep.dir / "sweep.json").write_text(json.dumps(record | damage))
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        toy_sweep(scored_spec(), tmp_path, "--resume", str(sweep.dir))
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert exit_info.value.code == 2 and line.endswith("not a sweep directory (no readable sweep.json)")


@pytest.mark.parametrize("kind", [kind for kind in ("sl_neural", "rl") if kind in PARTS])
def test_a_sweep_whose_trials_would_train_in_several_processes_is_refused(kind, tmp_path, capsys):
    # Lightning would start each further DDP rank as the sweep command again: a second sweep.
    with pytest.raises(SystemExit) as exit_info:
        local_sweep(kind, tmp_path, "--accelerator", "cpu", "--devices", "2", "--strategy", "ddp")
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert exit_info.value.code == 2
    assert line.endswith(
        "devices '2' on num_nodes 1: a trial trains in one process; start one sweep worker "
        "per GPU or machine instead (--study SWEEP_DIR)"
    )
    assert list(tmp_path.rglob("sweeps")) == []


def test_a_sweep_of_another_part_is_refused_by_name(tmp_path, capsys):
    kind = sorted(PARTS)[0]
    sweep_dir = tmp_path / "sweeps" / "smoke_20260101_000000"
    sweep_dir.mkdir(parents=True)
    SweepState(engine="local", name="smoke", config_class="Smoke", part="another_part").write(sweep_dir)
    with pytest.raises(SystemExit) as exit_info:
        local_sweep(kind, tmp_path, "--resume", str(sweep_dir))
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert exit_info.value.code == 2
    assert line.endswith("that is a sweep of another_part; go on with python -m another_part.sweep")


@pytest.mark.parametrize(
    "flags",
    [
        ["--wandb-mode", "disabled"],
        ["--wandb-mode", "auto"],
        ["--wandb-mode", "online"],
        ["--sweep-id", "a/b/c"],
        ["--loggers", "tensorboard", "--wandb-mode", "offline"],
    ],
    ids=[
        "disabled",
        "auto-with-WANDB_MODE-disabled",
        "online-without-an-api-key",
        "join-while-disabled",
        "without-the-wandb-logger",
    ],
)
def test_a_wandb_sweep_without_wandb_is_one_line_and_exit_2(tmp_path, capsys, monkeypatch, flags):
    monkeypatch.setenv("WANDB_MODE", "disabled")
    if "online" in flags:  # no key anywhere: none in the environment, no ~/.netrc
        monkeypatch.delenv("WANDB_MODE")
        monkeypatch.delenv("WANDB_API_KEY", raising=False)
        monkeypatch.setenv("HOME", str(tmp_path))
    spec = part_module(sorted(PARTS)[0], "sweep").SPEC
    with pytest.raises(SystemExit) as exit_info:
        main(spec, ["--engine", "wandb", "--config", "smoke", "--output.base-dir", str(tmp_path), *flags])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and err.startswith("error:") and "Traceback" not in err
    if "online" in flags:  # the config's own problem, whatever the engine: found first
        assert "wandb_mode 'online': W&B online needs an API key (`wandb login`" in err
    else:
        assert len(err.strip().splitlines()) == 1 and "wandb login" in err and "--engine local" in err
    if "--loggers" in flags:
        assert "--loggers is tensorboard, without wandb" in err
    assert not (tmp_path / "sweeps").exists()  # refused before anything was made


# Several workers on one sweep (one per GPU or machine): the Optuna study in the sweep's
# journal file, or in a database, hands each trial to one of them.

TOY_SWEEP = """
import os
import time
from pathlib import Path

import torch

from src.config import BaseConfig
from src.runs.lifetime import start_run
from src.sweep import SweepSpec, main


def train(cfg, resume_from=None):
    if marks := os.environ.get("TOY_MARKS"):
        # The first trial waits until the second worker runs one too: on a busy machine
        # the second could start after the first had run them all.
        (Path(marks) / str(os.getpid())).touch()
        deadline = time.monotonic() + 120
        while len(list(Path(marks).iterdir())) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.2)
        return {"score": float(cfg.seed)}
    with start_run(cfg, resume_from) as run:
        if os.environ.get("TOY_HANG") and cfg.name.endswith("trial000"):
            (run.dir / "checkpoints").mkdir()
            torch.save({"state_dict": {"w": torch.zeros(1)}}, run.dir / "checkpoints" / "last.ckpt")
            Path(os.environ["TOY_HANG"]).touch()
            time.sleep(600)  # until the test kills this process
        return {"score": float(cfg.seed)}


SPEC = SweepSpec(
    configs={"baseline": BaseConfig},
    space={"seed": {"min": 0, "max": 10**9}},  # values that do not repeat by chance
    architectures={},
    train=train,
    metric="score",
    goal="maximize",
)

if __name__ == "__main__":
    main(SPEC, prog="toy_sweep")
"""


@slow
def test_two_workers_split_one_sweep_and_run_each_trial_once(tmp_path):
    (tmp_path / "toy_sweep.py").write_text(TOY_SWEEP)
    (tmp_path / "marks").mkdir()
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{PROJECT_PYTHONPATH}"}
    env["TOY_MARKS"] = str(tmp_path / "marks")
    command = [sys.executable, str(tmp_path / "toy_sweep.py"), "--output.base-dir", str(tmp_path / "out")]
    command += ["--wandb-mode", "disabled"]
    output = {"stdout": subprocess.PIPE, "stderr": subprocess.STDOUT, "text": True, "cwd": tmp_path}

    def worker(index: int, *args: str) -> subprocess.Popen:  # each with a GPU lock of its own
        return subprocess.Popen(
            [*command, *args], env={**env, "GPU_LOCK_PATH": f"{tmp_path}/gpu{index}"}, **output
        )

    first = worker(0, "--trials", "8")
    deadline = time.monotonic() + 120
    while not list((tmp_path / "out").glob("sweeps/*/sweep.json")) and time.monotonic() < deadline:
        assert first.poll() is None, first.communicate()[0][-3000:]
        time.sleep(0.05)
    (sweep_dir,) = (tmp_path / "out" / "sweeps").iterdir()
    second = worker(1, "--study", str(sweep_dir))
    outputs = [process.communicate(timeout=300)[0] for process in (first, second)]
    assert [first.returncode, second.returncode] == [0, 0], outputs[0][-2000:] + outputs[1][-2000:]
    records = [json.loads(line) for line in (sweep_dir / "trials.jsonl").read_text().splitlines()]
    assert sorted(record["number"] for record in records) == list(range(8))  # each once, none lost
    assert {record["status"] for record in records} == {"finished"}
    assert len({record["worker"] for record in records}) == 2  # both workers ran trials
    assert json.loads((sweep_dir / "sweep.json").read_text())["status"] == "finished"
    assert "sweep directory: " + str(sweep_dir) + " (joined)" in outputs[1]
    summary_rows = [
        row for row in (sweep_dir / "summary.md").read_text().splitlines() if "| finished |" in row
    ]
    assert sorted(int(row.split("|")[2]) for row in summary_rows) == list(range(8))  # each trial listed once
    assert not list(sweep_dir.glob(".*partial*"))  # neither worker left a write half done


@slow
def test_a_sweep_keeps_its_study_in_the_database_it_is_given(tmp_path):
    import optuna

    url = f"sqlite:///{tmp_path / 'studies.db'}"
    sweep = toy_sweep(toy_spec(toy_train), tmp_path, "--trials", "2", "--storage", url)
    study = optuna.load_study(study_name=sweep.dir.name, storage=url)
    assert (
        [t.user_attrs["number"] for t in study.trials] == [trial.number for trial in sweep.trials] == [0, 1]
    )
    assert [t.state.name for t in study.trials] == [
        "COMPLETE" if trial.status == "finished" else "FAIL" for trial in sweep.trials
    ]
    assert not (sweep.dir / "optuna.journal").exists()
    assert json.loads((sweep.dir / "sweep.json").read_text())["storage"] == url


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--study", "nowhere"], "--study nowhere: not a sweep directory"),
        (["--storage", "studies.db"], "--storage studies.db: not a database URL"),
        (["--storage", "nosuchdb://x"], "--storage nosuchdb://x: Optuna cannot use it"),
        (["--study", ".", "--resume", "auto"], "leave out --resume and --storage"),
    ],
    ids=["study-not-a-sweep", "storage-not-a-url", "storage-unusable", "study-and-resume"],
)
def test_bad_study_or_storage_is_one_line_and_exit_2(tmp_path, capsys, flags, message):
    with pytest.raises(SystemExit) as exit_info:
        toy_sweep(toy_spec(toy_train), tmp_path, "--trials", "1", *flags)
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and message in err and len(err.strip().splitlines()) == 1
    assert not list(tmp_path.rglob("sweep.json"))  # refused before a sweep's folder is made


def score_train(cfg: BaseConfig, resume_from: Path | None = None) -> dict[str, float]:
    with start_run(cfg, resume_from):
        return {"score": float(cfg.seed)}


def records_of(sweep_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (sweep_dir / "trials.jsonl").read_text().splitlines()]


def journal_study(sweep_dir: Path):
    import optuna
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    storage = JournalStorage(JournalFileBackend(str(sweep_dir / "optuna.journal")))
    return optuna.load_study(study_name=sweep_dir.name, storage=storage)


@slow
def test_a_journal_cut_mid_line_loses_its_last_line_and_the_sweep_resumes(tmp_path, capsys):  # RES-1
    spec = toy_spec(score_train)
    sweep_dir = toy_sweep(spec, tmp_path, "--trials", "2").dir
    journal = sweep_dir / "optuna.journal"
    data = journal.read_bytes()
    last_line = data.rstrip(b"\n").rfind(b"\n") + 1
    os.truncate(journal, last_line + (len(data) - last_line) // 2)  # a kill while Optuna appended it
    capsys.readouterr()

    sweep = toy_sweep(spec, tmp_path, "--resume", str(sweep_dir), "--trials", "3")
    (warning,) = capsys.readouterr().err.strip().splitlines()
    assert warning.startswith(f"warning: {journal}: dropped its last line, cut short")
    assert [record["number"] for record in records_of(sweep_dir)] == [0, 1, 2]
    assert [t.status for t in sweep.trials] == ["finished"] * 3
    study = journal_study(sweep_dir)  # whole again, and it holds every trial once
    assert sorted(t.user_attrs["number"] for t in study.trials if t.user_attrs.get("ended")) == [0, 1, 2]
    assert json.loads((sweep_dir / "sweep.json").read_text())["status"] == "finished"


def test_a_journal_damaged_inside_exits_2_and_changes_nothing(tmp_path, capsys):  # RES-1
    spec = toy_spec(score_train)
    sweep_dir = toy_sweep(spec, tmp_path, "--trials", "2").dir
    journal = sweep_dir / "optuna.journal"
    lines = journal.read_bytes().splitlines(keepends=True)
    lines[2] = lines[2][: len(lines[2]) // 2] + b"\n"  # a damaged record, with records after it
    journal.write_bytes(b"".join(lines))
    before = {path: path.read_bytes() for path in sweep_dir.rglob("*") if path.is_file()}
    capsys.readouterr()

    with pytest.raises(SystemExit) as exit_info:
        toy_sweep(spec, tmp_path, "--resume", str(sweep_dir), "--trials", "3")
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and len(err.strip().splitlines()) == 1, err
    assert f"{journal}: line 3 is not an Optuna journal record" in err and f"mv {journal}" in err
    assert {path: path.read_bytes() for path in sweep_dir.rglob("*") if path.is_file()} == before


@slow
def test_a_sweep_killed_in_its_first_trial_resumes_it_and_samples_on(tmp_path):  # RES-1
    (tmp_path / "toy_sweep.py").write_text(TOY_SWEEP)
    env = {
        **os.environ,
        "PYTHONPATH": f"{tmp_path}{os.pathsep}{PROJECT_PYTHONPATH}",
        "GPU_LOCK_PATH": str(tmp_path / "gpu"),
    }
    command = [sys.executable, str(tmp_path / "toy_sweep.py"), "--output.base-dir", str(tmp_path / "out")]
    command += ["--wandb-mode", "disabled", "--trials", "4"]
    hang = tmp_path / "checkpointed"
    with open(tmp_path / "first.log", "w") as log:
        first = subprocess.Popen(command, env={**env, "TOY_HANG": str(hang)}, stdout=log, stderr=log)
    deadline = time.monotonic() + 120
    while not hang.exists() and first.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    first.kill()  # kill -9 in trial 0, after its checkpoint
    first.wait()
    assert hang.exists(), (tmp_path / "first.log").read_text()[-3000:]
    (sweep_dir,) = (tmp_path / "out" / "sweeps").iterdir()
    (killed_run,) = sweep_dir.glob("baseline-trial000_*")
    killed_seed = json.loads((killed_run / "config.json").read_text())["seed"]

    resumed = subprocess.run(
        [*command, "--resume", str(sweep_dir)], env=env, capture_output=True, text=True, check=False
    )
    assert resumed.returncode == 0, resumed.stdout[-2000:] + resumed.stderr[-2000:]
    records = records_of(sweep_dir)
    assert sorted(record["number"] for record in records) == [0, 1, 2, 3]  # each once
    (rerun,) = [record for record in records if record["number"] == 0]  # the cut-off trial, continued
    assert rerun["params"]["seed"] == killed_seed and rerun["run_dir"] == str(killed_run)
    assert rerun["resumed_from"] == str(killed_run / "checkpoints" / "last.ckpt")
    seeds = [record["params"]["seed"] for record in records]
    assert len(set(seeds)) == 4, seeds  # no new trial drew the values of an earlier one again


def test_two_workers_writing_sweep_json_at_once_both_succeed(tmp_path):
    state = SweepState(
        engine="local", name="baseline", config_class="BaseConfig", seed=0, trials=2, max_hours=1
    )
    with atomic_path(tmp_path / "sweep.json") as other_worker:  # another worker, midway through its write
        other_worker.write_text(json.dumps(dataclasses.asdict(state)) + "\n")
        state.write(tmp_path)  # this worker's write, in the meantime
    assert SweepState.read(tmp_path).trials == 2
    assert [path.name for path in tmp_path.iterdir()] == ["sweep.json"]


@slow
def test_a_number_whose_trial_is_not_yet_queued_again_is_not_given_twice(tmp_path):
    # Another worker on this machine runs trial 2; the worker that ran trial 1 died and a
    # third marked it failed but had not queued it again (killed, or not yet). Whatever
    # the moment another worker looks, each number goes to one trial.
    import optuna

    spec = toy_spec(score_train)
    sweep_dir = toy_sweep(spec, tmp_path, "--trials", "1").dir
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        study = journal_study(sweep_dir)
        distributions = {"seed": optuna.distributions.CategoricalDistribution([1, 2, 3])}
        for number, pid in ((1, int(dead.stdout)), (2, alive.pid)):
            trial = study.ask(distributions)
            trial.set_user_attr("worker", f"{socket.gethostname()}:{pid}")
            trial.set_user_attr("number", number)
        study.tell(1, state=optuna.trial.TrialState.FAIL)

        toy_sweep(spec, tmp_path, "--resume", str(sweep_dir), "--trials", "4")
        # 1 and 3 run now; not 2, which the live worker runs
        assert sorted(record["number"] for record in records_of(sweep_dir)) == [0, 1, 3]
    finally:
        alive.kill()
        alive.wait()


@slow
def test_a_trial_recorded_before_the_sweep_failed_is_not_run_again(tmp_path, capsys):
    # A full disk, say, once trial 1's line is in trials.jsonl: its sweep.json cannot be
    # written. The trial is recorded, so --resume goes on after it, not with it again.
    injected = []

    def train(cfg: BaseConfig, resume_from: Path | None = None) -> dict[str, float]:
        with start_run(cfg, resume_from):
            if cfg.name.endswith("trial001") and not injected:
                injected.append(cfg.name)
                sweep_json = Path(cfg.output.base_dir) / "sweep.json"
                sweep_json.rename(tmp_path / "saved.json")
                (sweep_json / "in-the-way").mkdir(parents=True)
            return {"score": float(cfg.seed)}

    spec = toy_spec(train)
    with pytest.raises((SystemExit, WriteFailed)):
        toy_sweep(spec, tmp_path, "--trials", "3")
    (sweep_dir,) = (tmp_path / "sweeps").glob("baseline_*")
    assert [record["number"] for record in records_of(sweep_dir)] == [0, 1]
    (sweep_dir / "sweep.json" / "in-the-way").rmdir()
    (sweep_dir / "sweep.json").rmdir()
    (tmp_path / "saved.json").rename(sweep_dir / "sweep.json")  # the disk has room again

    toy_sweep(spec, tmp_path, "--resume", str(sweep_dir))
    assert [record["number"] for record in records_of(sweep_dir)] == [0, 1, 2]
