"""report.md of one run (its final metrics, figures, config and environment; every run writes
it as it ends), or of runs of one part side by side (`python -m src.report RUN_DIR...`, a
sweep's best trials), runs that differ only in their seed taken together."""

from __future__ import annotations

import os
import shlex
from pathlib import Path
from typing import Any

import pandas as pd

from src.errors import DataValidationError
from src.report import figures
from src.report.run_files import REPORT_FILE, RunFiles
from src.runs.atomic import write_text_atomic
from src.runs.console import metric_text
from src.runs.directory import resume_advice, status_now
from src.runs.metrics_jsonl import higher_is_better

FIGURES_DIR = "report"
MISSING = "—"
NO_METRICS = "No metrics were logged."
# Config fields that do not change what a run learns: where it writes, logs and sends its
# alerts, and how it is stopped by hand. Runs whose other fields are equal are one group,
# their seeds aside.
NOT_SETTINGS = ("seed", "output.", "stop_file", "loggers", "wandb_", "alerts.", "used.")
# A final metric that times the run (a tree's train_seconds): it differs between any two runs.
# The learning curves, where the other final metrics come from, leave timing/ and system/ out.
TIMES = "_seconds"


def write_report(run: RunFiles) -> Path:
    """report.md and its figures; figures an earlier report drew that no longer apply go."""
    drawn = draw_figures(run, run.dir / FIGURES_DIR)
    for stale in set((run.dir / FIGURES_DIR).glob("*.png")) - set(drawn.values()):
        stale.unlink()
    own = [(path.stem.replace("_", " ").capitalize(), path) for path in run.plots]
    metrics = [
        [key, cell(row["final"]), cell(row.get("best", "")), cell(row.get("at", ""))]
        for key, row in run.final_metrics().items()
    ]
    sections = [
        f"# {title(run)}\n\n{run_line(run)}",
        "## Final metrics\n\n" + table(["metric", "final", "best", f"at {run.axis}"], metrics, NO_METRICS),
        *(f"## {name}\n\n![{name}]({path.relative_to(run.dir)})" for name, path in [*drawn.items(), *own]),
        "## Config\n\n" + table(["field", "value"], [[k, cell(v)] for k, v in flat(run.config).items()]),
        "## Environment\n\n" + table(["", ""], environment(run)),
    ]
    return write_text_atomic(run.dir / REPORT_FILE, "\n\n".join(sections) + "\n")


def draw_figures(run: RunFiles, folder: Path) -> dict[str, Path]:
    """{section title: PNG} of the figures this run's metrics call for."""
    drawn, per_axis, seconds = {}, run.per_axis, f"timing/{run.axis}_seconds"
    if run.curves.size:
        drawn["Learning curves"] = _curves_figure(
            [[run]], [run.name], folder / "learning_curves.png", title(run)
        )
    if (rates := run.learning_rates()).size:
        drawn["Learning rate"] = figures.learning_rate(rates, folder / "learning_rate.png")
    if seconds in per_axis:
        shares = per_axis.filter(regex=r"^timing/.*_pct$")
        drawn["Timing"] = figures.timing(shares, per_axis[seconds], run.axis, folder / "timing.png")
    if (readings := per_axis.filter(regex="^system/")).columns.size:
        drawn["System"] = figures.system(readings, run.axis, run.last() or 0, folder / "system.png")
    return drawn


def title(run: RunFiles) -> str:
    """`part2: run baseline_20260101_120000`: which part's run, as every figure says too."""
    return f"{run.part}: run {run.name}" if run.part else f"Run {run.name}"


def run_line(run: RunFiles) -> str:
    """finished (or how it ended), how far it got, when, and the command that started it."""
    record = run.record
    now = status_now(run.dir, record)
    status = f"**{now}**"
    if now == "killed":
        status += f" (its process ended without recording why; {resume_advice(run.dir)})"
    elif record.get("error") and now != "interrupted":  # a signal's exception says less than its name
        status += f" ({record['error']})"
    elif record.get("end_reason"):  # why it ended: the target, patience, the budget, a signal ...
        status += f" ({record['end_reason']}: {record.get('end_detail', '')})"
    last = run.last()
    progress = f"{int(last) + 1} {run.axis}s" if last is not None else f"no {run.axis} logged"
    history = record.get("history") or [{}]
    when = f"started {history[0].get('started', '?')}, last update {record.get('updated', '?')}"
    if len(history) > 1:
        when += f", {len(history)} sessions"
    command = history[0].get("command") or record.get("command") or []  # what started it, not a resume
    return " · ".join(
        [status, progress, when, f"`{shlex.join(['python', *command[1:]])}`" if command else ""]
    ).rstrip(" ·")


def environment(run: RunFiles) -> list[list[str]]:
    """Where and with what the run ran: run.json's record (src/runs/provenance.py) and the logged facts."""
    record, facts = run.record, run.hyperparams
    provenance = record.get("provenance", {})
    code, machine = provenance.get("code", {}), provenance.get("machine", {})
    commit = (code.get("git_commit") or "")[:12] or code.get("why", "")
    if code.get("git_dirty"):
        commit += f" with uncommitted changes (sha256 {(code.get('git_diff_sha256') or '')[:12]})"
    processes = f"world size {record.get('world_size', 1)}, nodes {record.get('num_nodes', 1)}"
    rows = [
        ["host", record.get("host", "")],
        ["launcher", f"{record.get('launcher', '')}, {processes}"],
        ["GPU", facts.get("gpu_name", "")],
        ["precision", facts.get("precision", "")],
        ["parameters", cell(facts.get("total_params", run.summary.get("total_params", "")))],
        ["git commit", commit],
        ["python", provenance.get("python", "")],
        *provenance.get("packages", {}).items(),
        ["CUDA", machine.get("cuda")],
        ["NVIDIA driver", machine.get("nvidia_driver")],
        *(
            [f"data {data['path']}", f"{data['bytes']:,} bytes, sha256 {data['sha256'][:12]}"]
            for data in provenance.get("data_files", [])
        ),
        ["working directory", record.get("cwd", "")],
    ]
    return [[name, str(value)] for name, value in rows if value not in ("", None)]


def compare_runs(runs: list[RunFiles], output: Path, title: str = "") -> Path:
    """{output}/report.md and its figure: the config fields that differ, the final metrics and
    the learning curves overlaid; runs that differ only in their seed as one group, mean ± std.
    Its path; a DataValidationError for runs of several parts."""
    if len(parts := list(dict.fromkeys(run.part for run in runs if run.part))) > 1:
        listed = "; ".join(f"{part}: {', '.join(r.name for r in runs if r.part == part)}" for part in parts)
        raise DataValidationError(
            f"these runs are of different parts ({listed}); compare one part's runs at a time"
        )
    title = title or f"{len(runs)} runs of {parts[0] if parts else 'this project'} compared"
    groups = _seed_groups(runs)
    seeded = len(groups) < len(runs)
    names = [_group_name(group) for group in groups]
    if len(set(names)) < len(names):
        names = [f"{index}: {name}" for index, name in enumerate(names, start=1)]
    listed = [
        [
            run.name if seeded else name,
            *([name, cell(run.config.get("seed", MISSING))] if seeded else []),
            status_now(run.dir, run.record),
            f"[{REPORT_FILE}]({Path(os.path.relpath(run.dir / REPORT_FILE, output)).as_posix()})",
        ]
        for name, group in zip(names, groups, strict=True)
        for run in group
    ]
    sections = [f"# {title}"]
    if seeded:
        sections.append("Runs that differ only in their seed are taken together: mean ± standard deviation.")
        alike = [_seeds_differ(group) and _same_finals(group) for group in groups]
        unmoved = [name for name, same in zip(names, alike, strict=True) if same]
        sections += [
            f"{name}: every seed ended with the same final metrics; nothing in this config's training "
            "draws on the seed, so its ± 0 says nothing of the spread."
            for name in unmoved
        ]
    sections.append(table(["run", *(["group", "seed"] if seeded else []), "status", "report"], listed))
    if len(groups) > 1:
        configs = [flat(group[0].config) for group in groups]
        fields = dict.fromkeys(
            field for config in configs for field in config if not (seeded and field == "seed")
        )
        rows = [
            [field, *(cell(config.get(field, MISSING)) for config in configs)]
            for field in fields
            if len({repr(config.get(field, MISSING)) for config in configs}) > 1
        ]
        sections.append(
            "## Config differences\n\n" + table(["field", *names], rows, "The configs are the same.")
        )
    over_seeds = " (mean ± std over seeds)" if seeded else ""
    sections.append(f"## Final metrics{over_seeds}\n\n" + _final_metrics(groups, names))
    if any(run.curves.size for run in runs):
        path = _curves_figure(groups, names, output / "learning_curves.png", title)
        sections.append(f"## Learning curves{over_seeds}\n\n![Learning curves]({path.name})")
    return write_text_atomic(output / REPORT_FILE, "\n\n".join(sections) + "\n")


def _seed_groups(runs: list[RunFiles]) -> list[list[RunFiles]]:
    """The runs grouped by their settings, seed aside; groups in the order of their first run."""
    groups: dict[str, list[RunFiles]] = {}
    for run in runs:
        settings = {k: v for k, v in sorted(flat(run.config).items()) if not k.startswith(NOT_SETTINGS)}
        groups.setdefault(repr(settings), []).append(run)
    return list(groups.values())


def _group_name(group: list[RunFiles]) -> str:
    """A run's name, or its group's config name and how many seeds (or runs of one seed) it holds."""
    if len(group) == 1:
        return group[0].name
    counted = f"{len(group)} {'seeds' if _seeds_differ(group) else 'runs'}"
    return f"{group[0].config.get('name', group[0].name)}, {counted}"


def _seeds_differ(group: list[RunFiles]) -> bool:
    """Whether every run of a group has a seed of its own (runs of one seed are repeats)."""
    return len({str(run.config.get("seed")) for run in group}) == len(group)


def _same_finals(group: list[RunFiles]) -> bool:
    """Whether the runs of a group of several ended with the same final metrics, their times aside."""
    finals = [
        {key: row["final"] for key, row in run.final_metrics().items() if not key.endswith(TIMES)}
        for run in group
    ]
    return len(group) > 1 and bool(finals[0]) and all(final == finals[0] for final in finals[1:])


def _curves_figure(groups: list[list[RunFiles]], names: list[str], path: Path, title: str) -> Path:
    runs = dict(zip(names, groups, strict=True))
    return figures.learning_curves(
        {name: [run.curves for run in group] for name, group in runs.items()},
        path,
        title,
        set().union(*(run.monitored() for group in groups for run in group)),
        {name: group[0].resume_points() for name, group in runs.items() if len(group) == 1},
    )


def _final_metrics(groups: list[list[RunFiles]], names: list[str]) -> str:
    """A row per final metric, a column per group: a run's value, or a group's mean ± std (n runs);
    the best of a validation or test metric (a group's mean) in bold."""
    finals = pd.DataFrame(
        [{k: v["final"] for k, v in run.final_metrics().items()} for g in groups for run in g]
    )
    by_group = finals.apply(pd.to_numeric, errors="coerce").groupby(
        [index for index, group in enumerate(groups) for _ in group]
    )
    texts, means = by_group.agg(_mean_std), by_group.mean()
    # best_round, best_epoch: where the best came, no score.
    for key in means.filter(regex="^(val|test|best)_(?!(round|epoch|step)$)"):
        # An episode is better long in CartPole and short in MountainCar: neither end is bold.
        if means[key].count() > 1 and not key.endswith("episode_length"):
            best = means[key].max() if higher_is_better(key) else means[key].min()
            texts.loc[means[key] == best, key] = "**" + texts[key] + "**"
    return table(["metric", *names], [[key, *texts[key]] for key in texts], NO_METRICS)


def _mean_std(values: pd.Series) -> str:
    if len(values := values.dropna()) < 2:
        return cell(values.iloc[0]) if len(values) else MISSING
    return f"{cell(values.mean())} ± {cell(values.std())} (n={len(values)})"


def flat(config: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """{"output": {"base_dir": ...}} -> {"output.base_dir": ...}"""
    found = {}
    for key, value in config.items():
        if isinstance(value, dict) and value:
            found |= flat(value, f"{prefix}{key}.")
        else:
            found[f"{prefix}{key}"] = value
    return found


def cell(value: Any) -> str:
    if isinstance(value, float):
        return metric_text(value)
    return str(value).replace("|", "\\|").replace("\n", " ")


def table(header: list[str], rows: list[list[str]], empty: str = "") -> str:
    if not rows and empty:
        return empty
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows])
