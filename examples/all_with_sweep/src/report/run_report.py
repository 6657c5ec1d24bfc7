"""One run's report.md: its final metrics, figures, config and environment, written in
the run directory with the figures in report/. Every run writes it as it ends
(src/runs/lifetime.py); `python -m src.report RUN_DIR` writes it again."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from src import predictions
from src.report import figures
from src.report.run_files import REPORT_FILE, RunFiles
from src.runs.atomic import write_text_atomic

FIGURES_DIR = "report"


def write_report(run: RunFiles) -> Path:
    """report.md and its figures; figures an earlier report drew that no longer apply go."""
    drawn = draw_figures(run, run.dir / FIGURES_DIR)
    for stale in set((run.dir / FIGURES_DIR).glob("*.png")) - set(drawn.values()):
        stale.unlink()
    sections = [
        f"# {title(run)}\n\n{run_line(run)}",
        f"## Final metrics\n\n{metrics_table(run)}",
        *(f"## {title}\n\n![{title}]({path.relative_to(run.dir)})" for title, path in drawn.items()),
        *(
            f"## {path.stem.replace('_', ' ').capitalize()}\n\n![{path.stem}]({path.relative_to(run.dir)})"
            for path in run.plots
        ),
        "## Config\n\n"
        + table(["field", "value"], [[key, cell(value)] for key, value in flat(run.config).items()]),
        "## Environment\n\n" + table(["", ""], environment(run)),
    ]
    return write_text_atomic(run.dir / REPORT_FILE, "\n\n".join(sections) + "\n")


def draw_figures(run: RunFiles, folder: Path) -> dict[str, Path]:
    """{section title: PNG} of the figures this run's metrics call for."""
    drawn = {}
    per_axis = run.per_axis
    if panels := run.learning_curves():
        drawn["Learning curves"] = figures.learning_curves(
            {run.name: panels},
            run.curve_axis,
            run.monitored(),
            folder / "learning_curves.png",
            resumed={run.name: run.resume_points()},
            title=title(run),
        )
    rates = run.by_step("lr")
    per_group = {key: series for key, series in rates.items() if key != "lr"}  # LearningRateMonitor's
    if rates:
        drawn["Learning rate"] = figures.learning_rate(per_group or rates, folder / "learning_rate.png")
    if seconds := per_axis.get(f"timing/{run.axis}_seconds"):
        shares = {
            key: series
            for key, series in per_axis.items()
            if key.startswith("timing/") and key.endswith("_pct")
        }
        drawn["Timing"] = figures.timing(shares, seconds, run.axis, folder / "timing.png")
    if readings := {key: series for key, series in per_axis.items() if key.startswith("system/")}:
        drawn["System"] = figures.system(readings, run.axis, run.last() or 0, folder / "system.png")
    if run.predictions is not None:
        drawn |= prediction_figures(run.predictions, folder)
    return drawn


def prediction_figures(table: pd.DataFrame, folder: Path) -> dict[str, Path]:
    """What the test predictions show for their task: the confusion matrix and ROC curves of
    a classifier; predicted against true values, and the residuals, of a regression."""
    targets = predictions.targets_of(table)
    if not targets:
        return {}
    if predictions.task_of(table) == "regression":
        pairs = {
            target: (table[f"true_{target}"].tolist(), table[f"predicted_{target}"].tolist())
            for target in targets
        }
        return {"Predicted vs true": figures.predicted_vs_actual(pairs, folder / "predicted_vs_true.png")}
    (target,) = targets
    columns = predictions.probability_columns(table)
    classes = [column.removeprefix(predictions.PROBABILITY) for column in columns]
    truth = table[f"true_{target}"].astype(str).tolist()
    predicted = table[f"predicted_{target}"].astype(str).tolist()
    counts = pd.crosstab(pd.Categorical(truth, classes), pd.Categorical(predicted, classes), dropna=False)
    return {
        "Confusion matrix": figures.confusion_matrix(
            classes, counts.to_numpy().tolist(), folder / "confusion_matrix.png"
        ),
        "ROC": figures.roc_curves(
            truth, {c: table[k].tolist() for c, k in zip(classes, columns, strict=True)}, folder / "roc.png"
        ),
    }


def title(run: RunFiles) -> str:
    """`part2: run baseline_20260101_120000`: which part's run, as every figure says too."""
    return f"{run.part}: run {run.name}" if run.part else f"Run {run.name}"


def run_line(run: RunFiles) -> str:
    """finished (or how it ended), how far it got, when, and the command that started it."""
    record = run.record
    status = f"**{record.get('status', 'unknown')}**"
    if record.get("error"):
        status += f" ({record['error']})"
    elif record.get("end_reason"):  # why it ended: the target, patience, the budget ...
        status += f" ({record['end_reason']}: {record.get('end_detail', '')})"
    last = run.last()
    progress = f"{int(last) + 1} {run.axis}s" if last is not None else f"no {run.axis} logged"
    history = record.get("history") or [{}]
    when = f"started {history[0].get('started', '?')}, last update {record.get('updated', '?')}"
    if len(history) > 1:
        when += f", {len(history)} sessions"
    command = record.get("command") or []
    return " · ".join(
        [status, progress, when, f"`{' '.join(['python', *command[1:]])}`" if command else ""]
    ).rstrip(" ·")


def metrics_table(run: RunFiles) -> str:
    rows = [
        [key, cell(row["final"]), cell(row.get("best", "")), cell(row.get("at", ""))]
        for key, row in run.final_metrics().items()
    ]
    return table(["metric", "final", "best", f"at {run.axis}"], rows) if rows else "No metrics were logged."


def environment(run: RunFiles) -> list[list[str]]:
    record, facts = run.record, run.hyperparams
    processes = f"world size {record.get('world_size', 1)}, nodes {record.get('num_nodes', 1)}"
    rows = [
        ["host", record.get("host", "")],
        ["launcher", f"{record.get('launcher', '')}, {processes}"],
        ["GPU", facts.get("gpu_name", "")],
        ["precision", facts.get("precision", "")],
        ["parameters", cell(facts.get("total_params", run.summary.get("total_params", "")))],
        *provenance_rows(record.get("provenance", {})),
        ["working directory", record.get("cwd", "")],
    ]
    return [[name, str(value)] for name, value in rows if value not in ("", None)]


def provenance_rows(provenance: dict[str, Any]) -> list[list[Any]]:
    """What produced the run, as run.json records it (src/runs/provenance.py)."""
    code, machine = provenance.get("code", {}), provenance.get("machine", {})
    commit = (code.get("git_commit") or "")[:12] or code.get("why", "")
    if code.get("git_dirty"):
        commit += f" with uncommitted changes (sha256 {(code.get('git_diff_sha256') or '')[:12]})"
    rows = [["git commit", commit], ["python", provenance.get("python", "")]]
    rows += [[name, version] for name, version in provenance.get("packages", {}).items()]
    rows += [["CUDA", machine.get("cuda")], ["NVIDIA driver", machine.get("nvidia_driver")]]
    for data in provenance.get("data_files", []):
        rows.append([f"data {data['path']}", f"{data['bytes']:,} bytes, sha256 {data['sha256'][:12]}"])
    return rows


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
        return str(int(value)) if value.is_integer() and abs(value) < 1e15 else f"{value:.4g}"
    return str(value).replace("|", "\\|").replace("\n", " ")


def table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows])
