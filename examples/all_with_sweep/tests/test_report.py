"""Run reports: every part's run ends with report.md and its figures, and
`python -m src.report` compares runs side by side."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
import statistics
import subprocess
import sys

import pytest
from conftest import (
    PARTS,
    PNG_SIGNATURE,
    ROOT,
    assert_report,
    part_module,
    prediction_figures,
    run_config,
    slow,
)

from src.report.run_files import RunFiles
from src.report.run_report import cell
from src.runs.lifetime import start_run
from src.runs.metrics_jsonl import higher_is_better

# The figures each kind's metrics call for (a supervised part's test predictions add theirs);
# a tree part's own plots/ are in its report too.
FIGURES = {
    "sl_neural": ["learning_curves", "learning_rate", "timing", "system"],
    "sl_tree": ["learning_curves", "timing", "system", "feature_importance", "shap_summary"],
    "rl": ["learning_curves", "learning_rate", "timing", "system"],
}


def curve_metric(kind: str, run_dir) -> str:
    """A metric the run's final metrics table must hold, with its best epoch or round: the one
    early stopping watches, whatever the part predicts."""
    if kind == "sl_tree":
        return f"val_{run_config(kind, run_dir).watched_metric}"
    return {"sl_neural": "val_loss", "rl": "val_episode_reward"}[kind]


def report_command(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "src.report", *args], cwd=ROOT, capture_output=True, text=True, timeout=300
    )


@pytest.mark.parametrize("kind", sorted(PARTS))
def test_every_run_ends_with_its_report(kind, smoke_runs):
    run_dir, _ = smoke_runs(kind)
    predicted = prediction_figures(kind, run_dir) if kind != "rl" else []
    report = assert_report(run_dir, FIGURES[kind] + predicted)
    assert report.startswith(f"# {PARTS[kind]}: run {run_dir.name}\n")  # which part's run
    assert f"| {curve_metric(kind, run_dir)} |" in report
    assert "**finished**" in report and "## Config" in report and "| python |" in report


def test_report_compares_two_runs_side_by_side(smoke_runs, tmp_path):
    first, _ = smoke_runs(sorted(PARTS)[0])
    second = shutil.copytree(first, tmp_path / "runs" / "other_run")
    config = json.loads((second / "config.json").read_text())
    rate = config["learning_rate"]
    (second / "config.json").write_text(json.dumps({**config, "learning_rate": rate * 2}))
    output = tmp_path / "compared"
    result = report_command(str(first), str(second), "--output", str(output))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(output / "report.md")
    comparison = (output / "report.md").read_text()
    assert comparison.startswith(f"# 2 runs of {PARTS[sorted(PARTS)[0]]} compared\n")
    assert first.name in comparison and "other_run" in comparison
    assert f"| learning_rate | {cell(rate)} | {cell(rate * 2)} |" in comparison
    assert (output / "learning_curves.png").read_bytes().startswith(PNG_SIGNATURE)


def test_a_comparison_takes_each_run_once_and_writes_beside_them(smoke_runs, tmp_path):
    first, _ = smoke_runs(sorted(PARTS)[0])
    runs = tmp_path / "runs"
    second = shutil.copytree(first, runs / "second")
    config = json.loads((second / "config.json").read_text())
    (second / "config.json").write_text(json.dumps({**config, "max_wall_clock_hours": 1.5}))
    third = shutil.copytree(second, runs / "third")
    # `output/part1/*` a second time: the first comparison, written beside the runs, is no run.
    assert report_command(str(second), str(third)).returncode == 0
    (earlier,) = runs.glob("comparison-*")
    result = report_command(*map(str, sorted(runs.iterdir())))
    left_out = f"{earlier}: an earlier comparison, not a run: left out\n"
    assert (result.returncode, result.stderr) == (0, left_out)
    refused = {
        "twice": report_command(str(second), str(second)),
        "into a run": report_command(str(second), str(third), "--output", str(third / "compared")),
    }
    said = {name: (result.returncode, result.stderr) for name, result in refused.items()}
    assert said == {
        "twice": (2, f"error: {second} is given twice: each run counts once in a comparison\n"),
        "into a run": (
            2,
            f"error: --output {third / 'compared'}: inside the run {third}, whose report.md it would "
            "replace; give the comparison a folder of its own\n",
        ),
    }


def test_report_refuses_to_compare_runs_of_different_parts(smoke_runs, tmp_path):
    first, _ = smoke_runs(sorted(PARTS)[0])
    other = shutil.copytree(first, tmp_path / "other_part")
    record = json.loads((other / "run.json").read_text())
    (other / "run.json").write_text(json.dumps({**record, "part": "part9"}))
    result = report_command(str(first), str(other), "--output", str(tmp_path / "compared"))
    assert result.returncode == 2
    (line,) = result.stderr.splitlines()
    assert line == (
        f"error: these runs are of different parts ({record['part']}: {first.name}; part9: other_part); "
        "compare one part's runs at a time"
    )
    assert not (tmp_path / "compared").exists()


@slow
def test_report_takes_runs_that_differ_only_in_their_seed_together(smoke_runs, tmp_path):
    kind = sorted(PARTS)[0]
    seeds = [smoke_runs(kind)[0], smoke_runs(kind, seed=43)[0]]
    # Where a run's alerts go changes nothing it learns: still one of the seeds.
    seeds[1] = shutil.copytree(seeds[1], tmp_path / "alerted" / seeds[1].name)
    config = json.loads((seeds[1] / "config.json").read_text())
    alerts = {**config["alerts"], "webhook_url": "http://localhost:9/hook"}
    (seeds[1] / "config.json").write_text(json.dumps({**config, "alerts": alerts}))
    other = shutil.copytree(seeds[0], tmp_path / "other_rate")  # a group of one
    config = json.loads((other / "config.json").read_text())
    (other / "config.json").write_text(json.dumps({**config, "learning_rate": config["learning_rate"] * 2}))
    output = tmp_path / "compared"
    result = report_command(*map(str, [*seeds, other]), "--output", str(output))
    assert result.returncode == 0, result.stderr
    comparison = (output / "report.md").read_text()
    finals = [RunFiles.read(run).final_metrics() for run in seeds]
    metric = curve_metric(kind, seeds[0])
    values = [final[metric]["final"] for final in finals]
    mean, std = statistics.fmean(values), statistics.stdev(values)
    group = f"{config['name']}, 2 seeds"
    assert f"| metric | {group} | other_rate |" in comparison
    alone = RunFiles.read(other).final_metrics()[metric]["final"]
    # The better of the group's mean and the lone run's value in bold.
    best = (max if higher_is_better(metric) else min)(mean, alone)
    shown = [f"{cell(mean)} ± {cell(std)} (n=2)", cell(alone)]
    values = (mean, alone)
    shown = [f"**{text}**" if value == best else text for value, text in zip(values, shown, strict=True)]
    assert f"| {metric} | {shown[0]} | {shown[1]} |" in comparison
    # An episode is better long in CartPole and short in MountainCar: no length is bold.
    lengths = [line for line in comparison.splitlines() if line.startswith("| test_episode_length |")]
    assert (bool(lengths) == (kind == "rl")) and not any("**" in line for line in lengths)
    assert f"| {seeds[1].name} | {group} | 43 |" in comparison
    assert "## Learning curves (mean ± std over seeds)" in comparison
    assert (output / "learning_curves.png").read_bytes().startswith(PNG_SIGNATURE)


def halve(record: dict) -> dict:
    """Every validation and test metric of a metrics line halved."""
    scores = {k: v / 2 for k, v in record.items() if isinstance(v, float) and k.startswith(("val_", "test_"))}
    return record | scores


def assert_bold_is_best(comparison: str) -> None:
    """Each bold value of the final metrics is its row's best, read in the metric's direction;
    where the best came (best_round, best_epoch) is no score to bold."""
    rows = [[cell.strip() for cell in line.strip().strip("|").split("|")] for line in comparison.splitlines()]
    for name, *values in (row for row in rows if re.fullmatch(r"(val|test|best)_\w+", row[0])):
        bold = [value.startswith("**") for value in values]
        if name in ("best_round", "best_epoch") or not any(bold):
            assert not any(bold), name
            continue
        numbers = [float(value.strip("*").split()[0]) for value in values]
        # Read here from the name, not by the code under test: losses and errors shrink.
        lower = any(word in name for word in ("loss", "rmse", "mae", "error"))
        best = (min if lower else max)(numbers)
        assert numbers[bold.index(True)] == best, (name, values)


@slow
def test_a_comparison_says_when_the_seed_changed_nothing(smoke_runs, tmp_path):
    """Trees without row or column sampling grow the same trees whatever the seed: their ± 0
    measures nothing, and the comparison says so. A network's seeds train it differently."""
    for kind in sorted(PARTS):
        seeds = [smoke_runs(kind)[0], smoke_runs(kind, seed=43)[0]]
        result = report_command(*map(str, seeds), "--output", str(tmp_path / kind))
        assert result.returncode == 0, result.stderr
        comparison = (tmp_path / kind / "report.md").read_text()
        said = "2 seeds: every seed ended with the same final metrics;" in comparison
        assert said == (kind == "sl_tree"), kind
        # Beside a run of other settings whose every final metric is half as large: in each row,
        # the better of the two in bold.
        other = shutil.copytree(seeds[0], tmp_path / f"{kind}_other" / seeds[0].name)
        config = json.loads((other / "config.json").read_text())
        (other / "config.json").write_text(json.dumps({**config, "max_wall_clock_hours": 1.5}))
        if (summary := other / "metrics.json").is_file():  # the test's metrics, where a part keeps them
            summary.write_text(json.dumps(halve(json.loads(summary.read_text()))))
        events = [halve(json.loads(line)) for line in (other / "metrics.jsonl").read_text().splitlines()]
        (other / "metrics.jsonl").write_text("".join(json.dumps(event) + "\n" for event in events))
        result = report_command(str(seeds[0]), str(other), "--output", str(tmp_path / f"{kind}_compared"))
        assert result.returncode == 0, result.stderr
        assert_bold_is_best((tmp_path / f"{kind}_compared" / "report.md").read_text())
        # Two runs of one seed are repeats, whatever they ended with: not seeds.
        repeats = [seeds[0], shutil.copytree(seeds[0], tmp_path / f"{kind}_again" / seeds[0].name)]
        result = report_command(*map(str, repeats), "--output", str(tmp_path / f"{kind}_repeats"))
        assert result.returncode == 0, result.stderr
        comparison = (tmp_path / f"{kind}_repeats" / "report.md").read_text()
        assert ", 2 runs" in comparison and "2 seeds" not in comparison
        assert "every seed ended" not in comparison


@pytest.mark.parametrize("kind", sorted(PARTS))
def test_learning_curves_are_drawn_against_frames_for_rl_and_mark_resumes(kind, smoke_runs):
    run = RunFiles.read(smoke_runs(kind)[0])
    frames = sorted({event["frames"] for event in run.events if "frames" in event})
    expected = {"rl": "frames", "sl_tree": "round"}.get(kind, "epoch")
    assert run.curve_axis == expected == run.curves.index.name
    key = run.curves.columns[0]
    series, by_epoch = run.curves[key].dropna(), run.per_axis[key].dropna()
    if kind == "rl":  # at the frames collected by each epoch's end (several collections an epoch)
        assert series.tolist() == by_epoch.tolist()
        assert set(series.index) <= set(frames) and series.index.max() == frames[-1]
    else:
        assert series.to_dict() == by_epoch.to_dict()
    assert run.resume_points() == []  # one session: a resumed run's are in test_faults


@pytest.mark.parametrize("kind", sorted(PARTS))
def test_a_curve_that_ended_on_nan_has_nan_as_its_final_value(kind, smoke_runs, tmp_path):
    # A run diverged at its last validation: metrics.jsonl writes the NaN as null.
    run_dir = shutil.copytree(smoke_runs(kind)[0], tmp_path / "run")
    key, lines = curve_metric(kind, run_dir), (run_dir / "metrics.jsonl").read_text().splitlines()
    last = [json.loads(line) for line in lines if f'"{key}"' in line][-1]
    axis = "round" if "round" in last else "epoch"
    later = {name: last[name] + 1 for name in (axis, "step", "frames") if name in last}
    diverged = last | later | {key: None}
    with (run_dir / "metrics.jsonl").open("a") as metrics:
        metrics.write(json.dumps(diverged) + "\n")
    final = RunFiles.read(run_dir).final_metrics()[key]["final"]
    assert final != final  # NaN, not the last finite value before it
    result = report_command(str(run_dir))
    assert result.returncode == 0, result.stderr
    assert f"| {key} | nan |" in (run_dir / "report.md").read_text()


def test_a_reports_command_line_pastes_back_as_it_ran(smoke_runs, tmp_path):
    # A column name with a space is one argument: unquoted, a pasted command split it in two.
    # The command is the first session's: a resume's `--resume auto` says nothing of the run.
    run_dir = shutil.copytree(smoke_runs(sorted(PARTS)[0])[0], tmp_path / "run")
    record = json.loads((run_dir / "run.json").read_text())
    first = record["history"][0]
    first["command"] += ["--feature-columns", "x 2", "colör"]
    resumed = {**first, "command": [first["command"][0], "-m", "part9.train", "--resume", "auto"]}
    record.update(history=[first, resumed], command=resumed["command"])
    (run_dir / "run.json").write_text(json.dumps(record))
    result = report_command(str(run_dir))
    assert result.returncode == 0, result.stderr
    report = (run_dir / "report.md").read_text()
    assert " --feature-columns 'x 2' 'colör'`" in report and "--resume" not in report


def test_report_of_one_run_writes_it_again(smoke_runs, tmp_path):
    run_dir = shutil.copytree(smoke_runs(sorted(PARTS)[0])[0], tmp_path / "run")
    (run_dir / "report.md").unlink()
    result = report_command(str(run_dir))
    assert result.returncode == 0, result.stderr
    assert_report(run_dir, ["learning_curves"])


@pytest.mark.parametrize(
    ("name", "message"), [("missing", "does not exist"), ("empty", "has no config.json")]
)
def test_report_of_a_path_that_is_no_run_is_one_line(name, message, tmp_path):
    (tmp_path / "empty").mkdir()
    result = report_command(str(tmp_path / name), str(tmp_path / name))
    assert result.returncode == 2
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"error: {tmp_path / name} {message}")


@pytest.mark.parametrize("damaged", ["run.json", "config.json", "metrics.json"])
def test_a_run_file_that_is_json_but_no_object_is_one_line(damaged, smoke_runs, tmp_path):
    run_dir = shutil.copytree(smoke_runs(sorted(PARTS)[0])[0], tmp_path / "run")
    (run_dir / damaged).write_text("[1, 2]\n")
    result = report_command(str(run_dir))
    assert result.returncode == 2, result.stderr[-2000:]
    (line,) = result.stderr.splitlines()
    assert line == f"error: {run_dir / damaged} holds a JSON list, not an object"


def test_a_report_that_fails_leaves_the_run_as_it_ended(tmp_path, capsys):
    base = part_module(sorted(PARTS)[0], "config").CONFIGS["smoke"]()
    cfg = dataclasses.replace(base, output=dataclasses.replace(base.output, base_dir=str(tmp_path)))
    with start_run(cfg) as run:
        (run.dir / "report.md").mkdir()  # a folder where the report goes: it cannot be written
    assert json.loads((run.dir / "run.json").read_text())["status"] == "finished"
    (warning,) = [line for line in capsys.readouterr().err.splitlines() if "report" in line]
    assert warning.startswith("warning: no run report (")
