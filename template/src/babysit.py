"""OPS-3: watch a running job and write what is found, as it is found, to logs/.

    python -m src.babysit output/baseline_20260101_120000             # one check, then exit
    python -m src.babysit output/baseline_20260101_120000 --every 600 --restart

Checks: process health, hung process (no output for --stall-minutes), metric
trend (non-finite values, epochs without improvement), GPU and system (memory,
disk), checkpoint integrity (last.ckpt loads). A dead run that did not finish is
restarted from its last checkpoint with --restart; problems are also recorded as
issues/ files (OPS-4). Exit status: 0 when the run finished, 1 when the last
check found a failure, 3 while the run is still going (one-shot mode).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import psutil
import torch

from src.metrics_jsonl import read_jsonl
from src.records import new_issue


@dataclass
class Finding:
    check: str
    level: str  # OK, WARN or FAIL
    message: str
    issue_type: str = ""  # set on failures that deserve an issues/ record


def check_process(run_dir: Path, record: dict) -> Finding:
    status, pid = record.get("status"), record.get("pid")
    if status == "finished":
        return Finding("process", "OK", "finished")
    if status in ("failed", "interrupted"):
        return Finding("process", "FAIL", f"{status}: {record.get('error', '')}", "crash")
    if pid and psutil.pid_exists(pid):
        return Finding("process", "OK", f"running as pid {pid}")
    return Finding("process", "FAIL", f"pid {pid} is gone but the run never finished (killed?)", "crash")


def check_hung(run_dir: Path, stall_minutes: float) -> Finding:
    outputs = [run_dir / "metrics.jsonl", run_dir / "console.log"]
    newest = max((p.stat().st_mtime for p in outputs if p.exists()), default=0.0)
    idle_minutes = (time.time() - newest) / 60
    if idle_minutes > stall_minutes:
        return Finding("hung", "FAIL", f"no output for {idle_minutes:.0f} min", "hang")
    return Finding("hung", "OK", f"last output {idle_minutes:.1f} min ago")


def check_metrics(run_dir: Path, monitor: str, patience: int) -> Finding:
    path = run_dir / "metrics.jsonl"
    values = [e[monitor] for e in read_jsonl(path) if monitor in e] if path.exists() else []
    if not values:
        return Finding("metrics", "OK", f"no {monitor} yet")
    if not all(math.isfinite(v) for v in values):
        return Finding("metrics", "FAIL", f"{monitor} is not finite: {values[-1]}", "divergence")
    best = min(values)
    since_best = len(values) - 1 - values.index(best)
    level = "WARN" if since_best >= max(patience // 2, 1) else "OK"
    trend = f"{monitor} {values[-1]:.4g} (best {best:.4g}, {since_best} epoch(s) ago, {len(values)} epochs)"
    return Finding("metrics", level, trend)


def check_system(run_dir: Path) -> Finding:
    memory = psutil.virtual_memory()
    free_gb = shutil.disk_usage(run_dir).free / 1024**3
    parts = [f"RAM {memory.percent:.0f}%", f"disk free {free_gb:.1f} GB", *_gpu_readings()]
    level = "WARN" if memory.percent > 90 or free_gb < 5 else "OK"
    return Finding("system", level, ", ".join(parts))


def check_checkpoint(run_dir: Path) -> Finding:
    last = run_dir / "checkpoints" / "last.ckpt"
    if not last.exists():
        return Finding("checkpoint", "OK", "no last.ckpt yet")
    try:
        checkpoint = torch.load(last, map_location="cpu", weights_only=True, mmap=True)
    except Exception as error:  # noqa: BLE001 - any failure to load means a broken file
        return Finding("checkpoint", "FAIL", f"last.ckpt does not load: {error}", "crash")
    age = (time.time() - last.stat().st_mtime) / 60
    return Finding(
        "checkpoint", "OK", f"last.ckpt loads (epoch {checkpoint.get('epoch')}, {age:.0f} min old)"
    )


def restart(run_dir: Path, record: dict, log_dir: Path) -> str:
    """Start the run's own command again, detached, resuming from its last checkpoint."""
    if not (run_dir / "checkpoints" / "last.ckpt").exists():
        return "not restarted: no last.ckpt to resume from"
    log = log_dir / f"{run_dir.name}_restart_{datetime.now():%Y%m%d_%H%M%S}.txt"
    command = [*record["command"], "--resume", str(run_dir.resolve())]
    with open(log, "w") as output:
        subprocess.Popen(
            command,
            cwd=record.get("cwd"),
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # outlives the babysitter, like nohup (OPS-2)
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    return f"restarted from last.ckpt; output in {log}"


def babysit_once(run_dir: Path, args: argparse.Namespace) -> list[Finding]:
    record = json.loads((run_dir / "run.json").read_text())
    config = json.loads((run_dir / "config.json").read_text())
    findings = [check_process(run_dir, record)]
    if record.get("status") == "running":
        findings.append(check_hung(run_dir, args.stall_minutes))
    findings += [
        check_metrics(run_dir, args.monitor, config.get("patience", 10)),
        check_system(run_dir),
        check_checkpoint(run_dir),
    ]
    log_dir = Path(args.log_dir)
    for finding in findings:
        _log(log_dir, run_dir, f"{finding.level:<4} {finding.check:<10} {finding.message}")
        if finding.issue_type:
            _record_issue(run_dir, finding)
    dead = findings[0].level == "FAIL"
    if dead and args.restart:
        restarts = _count_restarts(log_dir, run_dir)
        if restarts < args.max_restarts:
            _log(log_dir, run_dir, f"ACT  restart    {restart(run_dir, record, log_dir)}")
        else:
            _log(log_dir, run_dir, f"ACT  restart    not restarted: {restarts} restarts already")
    return findings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m src.babysit", description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--every", type=float, default=0, help="seconds between checks; 0: check once")
    parser.add_argument("--restart", action="store_true", help="restart a dead run from last.ckpt")
    parser.add_argument("--max-restarts", type=int, default=3)
    parser.add_argument("--stall-minutes", type=float, default=30.0)
    parser.add_argument("--monitor", default="val_loss")
    parser.add_argument("--log-dir", default="logs")
    args = parser.parse_args(argv)
    if not (args.run_dir / "run.json").is_file():
        parser.error(f"{args.run_dir} is not a run directory (it has no run.json)")
    Path(args.log_dir).mkdir(parents=True, exist_ok=True)
    while True:
        findings = babysit_once(args.run_dir, args)
        finished = findings[0].message == "finished"
        if finished or not args.every:
            return 0 if finished else 1 if any(f.level == "FAIL" for f in findings) else 3
        time.sleep(args.every)


def _gpu_readings() -> list[str]:
    if not shutil.which("nvidia-smi"):
        return []
    query = "--query-gpu=index,utilization.gpu,memory.used,memory.total,temperature.gpu"
    result = subprocess.run(
        ["nvidia-smi", query, "--format=csv,noheader,nounits"], capture_output=True, text=True
    )
    readings = []
    for line in result.stdout.strip().splitlines():
        index, util, used, total, temperature = (x.strip() for x in line.split(","))
        readings.append(f"GPU{index} {util}% {used}/{total} MiB {temperature}C")
    return readings


def _log(log_dir: Path, run_dir: Path, line: str) -> None:
    # Appended and flushed per finding: a babysitter killed mid-check loses nothing.
    with open(log_dir / f"babysit_{run_dir.name}.log", "a") as log:
        log.write(f"{datetime.now():%Y-%m-%d %H:%M:%S} {line}\n")
    print(line, flush=True)


def _record_issue(run_dir: Path, finding: Finding) -> None:
    marker = run_dir / f".issue_{finding.check}"  # one record per problem and run
    if marker.exists():
        return
    path = new_issue(
        Path.cwd(),
        f"{run_dir.name} {finding.check}: {finding.message[:60]}",
        finding.issue_type,
        str(run_dir),
    )
    marker.write_text(str(path))


def _count_restarts(log_dir: Path, run_dir: Path) -> int:
    log = log_dir / f"babysit_{run_dir.name}.log"
    return log.read_text().count("restarted from last.ckpt") if log.exists() else 0


if __name__ == "__main__":
    sys.exit(main())
