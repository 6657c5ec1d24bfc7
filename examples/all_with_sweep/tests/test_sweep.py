"""Sweeps (SWP-1..7): every part's local sweep, a failing trial, the sweep's clock, W&B's sweep runs."""

from __future__ import annotations

import dataclasses
import json
import weakref
from pathlib import Path

import pytest
import torch
import wandb
from conftest import PARTS, part_module, slow

from src.config import BaseConfig
from src.runs.lifetime import start_run
from src.sweep import Sweep, SweepSpec, main, run_local
from src.wandb_utils import finish_run, setup_run


def local_sweep(kind: str, tmp_path: Path, *args: str) -> Sweep:
    spec = part_module(kind, "sweep").SPEC
    argv = [
        "--engine",
        "local",
        "--config",
        "smoke",
        "--output.base-dir",
        str(tmp_path),
        "--wandb-mode",
        "disabled",
    ]
    return main(spec, [*argv, *args])


@slow
@pytest.mark.parametrize("kind", sorted(PARTS))
def test_a_local_sweep_of_three_smoke_trials(kind, tmp_path):  # SWP-1, SWP-2, SWP-4
    sweep = local_sweep(kind, tmp_path, "--trials", "3")
    assert [t.status for t in sweep.trials] == ["finished"] * 3
    run_dirs = {Path(t.run_dir) for t in sweep.trials}
    assert len(run_dirs) == 3 and all((d / "config.json").is_file() for d in run_dirs)
    for trial in sweep.trials:  # SWP-4: the preset's fields reached the trial's config
        saved = json.loads((Path(trial.run_dir) / "config.json").read_text())
        preset = sweep.spec.architectures[trial.params["architecture"]]
        assert {name: saved[name] for name in preset} == json.loads(json.dumps(preset))
    summary = (sweep.dir / "summary.md").read_text()
    assert all(Path(t.run_dir).name in summary for t in sweep.trials)
    assert len((sweep.dir / "trials.jsonl").read_text().splitlines()) == 3
    values = [t.value for t in sweep.ranked()]
    assert values == sorted(values, reverse=sweep.spec.goal == "maximize")


@slow
def test_the_sweep_clock_stops_the_running_trial_with_its_checkpoint(tmp_path):  # SWP-5
    kind = sorted(PARTS)[0]
    sweep = local_sweep(kind, tmp_path, "--trials", "3", "--max-hours", "1e-4")  # 0.36 s
    assert [t.status for t in sweep.trials] == ["finished"]  # and no trial after it
    run_dir = Path(sweep.trials[0].run_dir)
    assert list((run_dir / "checkpoints").glob("last.*"))


LEAKED: list[weakref.ref] = []


def toy_train(cfg: BaseConfig) -> dict[str, float]:
    """Holds a tensor in its frame; the second trial fails while holding it."""
    with start_run(cfg):
        activations = torch.ones(1_000_000)
        LEAKED.append(weakref.ref(activations))
        if cfg.name.endswith("trial001"):
            raise RuntimeError("out of memory, say")
        return {"score": float(cfg.seed)}


def test_a_failing_trial_is_recorded_and_its_memory_released(tmp_path):  # SWP-7
    spec = SweepSpec(
        configs={"baseline": BaseConfig},
        space={"seed": {"values": [1, 2, 3]}},
        architectures={},
        train=toy_train,
        metric="score",
        goal="maximize",
    )
    base = dataclasses.replace(
        BaseConfig(wandb_mode="disabled"),
        output=dataclasses.replace(BaseConfig().output, base_dir=str(tmp_path)),
    )
    sweep = Sweep(spec, base, tmp_path, max_hours=1)
    run_local(sweep, trials=3, seed=0)
    assert [t.status for t in sweep.trials] == ["finished", "failed", "finished"]
    assert "RuntimeError: out of memory, say" in sweep.trials[1].error
    assert all(ref() is None for ref in LEAKED)  # the failed trial's tensor is gone too
    assert sweep.ranked()[-1].status == "failed" and "failed" in sweep.finish()


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
