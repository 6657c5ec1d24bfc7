"""Migration to v0.3.0: each part's runs move into a folder of their own, output/<part>/.

Earlier releases wrote every part's runs to output/<config>_<stamp>/ and every sweep to
output/sweeps/, so that a part's `--resume auto` could find another part's run of the same
config name. v0.3.0 writes them to output/<part>/ (the `{part}` in `output.base_dir`).
Run in the project after `copier update`, this moves each run and sweep under output/ into
its part's folder, the part read from the command that started it (run.json), and records
in its run.json the part and the W&B id it has logged to, so that a resumed run goes on in
the same W&B run. A run or sweep a process still writes to, one whose part cannot be told,
and one whose new place is taken stay where they are, each named in a line. The
babysitter's records of a moved run (logs/babysit_<run>.*) are renamed as it now names them.
Runs written elsewhere (`--output.base-dir`) are left alone.
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import json
import os
import re
import socket
from pathlib import Path

OUTPUT = Path("output")
RUN_NAME = re.compile(r".+_\d{8}_\d{6}(_\d+)?")


def read_json(path: Path) -> dict:
    try:
        value = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def write_json(path: Path, value: dict) -> None:
    temporary = path.with_name(f".{path.name}.migrating")
    temporary.write_text(json.dumps(value, indent=2) + "\n")
    os.replace(temporary, path)


def part_of_command(record: dict, parts: set[str]) -> str | None:
    """The part whose module started the run: `python -m part1.train` -> part1."""
    command = record.get("command") or []
    for flag, module in itertools.pairwise(command):
        if flag == "-m" and module.split(".")[0] in parts:
            return module.split(".")[0]
    return None


def still_running(record: dict) -> bool:
    """Whether a process of this machine may still write to the run."""
    if record.get("status") != "running" or record.get("host") != socket.gethostname():
        return False
    try:
        os.kill(int(record["pid"]), 0)
    except (KeyError, TypeError, ValueError, ProcessLookupError):
        return False
    except PermissionError:
        return True
    return True


def record_part(run_dir: Path, part: str) -> None:
    """run.json names the part, and the W&B id the run has used: its folder's name."""
    path = run_dir / "run.json"
    record = read_json(path)
    if record:
        wandb_id = re.sub(r"[^A-Za-z0-9_-]", "-", run_dir.name)
        write_json(path, {**record, "part": part, "wandb_id": record.get("wandb_id", wandb_id)})


def move(source: Path, target: Path, what: str) -> bool:
    if target.exists():
        print(f"migration: {source} stays: {target} exists already")
        return False
    target.parent.mkdir(parents=True, exist_ok=True)
    os.rename(source, target)
    print(f"migration: {what} {source} -> {target}")
    return True


def rename_babysitter_records(name: str, part: str) -> None:
    for old in Path("logs").glob(f"babysit_{name}.*"):
        new = old.with_name(f"babysit_{part}_{name}{old.suffix}")
        if not new.exists():
            os.rename(old, new)


def move_runs(parts: set[str]) -> None:
    for run_dir in sorted(OUTPUT.iterdir()):
        if not (run_dir / "config.json").is_file() or not RUN_NAME.fullmatch(run_dir.name):
            continue
        record = read_json(run_dir / "run.json")
        part = part_of_command(record, parts)
        if part is None:
            print(f"migration: {run_dir} stays: its run.json does not say which part wrote it")
        elif still_running(record):
            print(f"migration: {run_dir} stays: pid {record['pid']} runs it; move it to output/{part}/ later")
        elif move(run_dir, OUTPUT / part / run_dir.name, "run"):
            record_part(OUTPUT / part / run_dir.name, part)
            rename_babysitter_records(run_dir.name, part)


def sweep_part(sweep_dir: Path, parts: set[str]) -> str | None:
    """The part a sweep's trials were run by, or whose config.py defines its config class."""
    for run_json in sorted(sweep_dir.glob("*/run.json")):
        if part := part_of_command(read_json(run_json), parts):
            return part
    config_class = read_json(sweep_dir / "sweep.json").get("config_class")
    defining = [p for p in sorted(parts) if f"class {config_class}(" in (Path(p) / "config.py").read_text()]
    return defining[0] if config_class and len(defining) == 1 else None


def in_use(sweep_dir: Path) -> bool:
    """Whether a worker holds the sweep's lock."""
    lock = sweep_dir / ".lock"
    if not lock.is_file():
        return False
    with open(lock) as file:
        try:
            fcntl.flock(file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
    return False


def move_sweeps(parts: set[str]) -> None:
    sweeps = OUTPUT / "sweeps"
    if not sweeps.is_dir():
        return
    for sweep_dir in sorted(path for path in sweeps.iterdir() if (path / "sweep.json").is_file()):
        part = sweep_part(sweep_dir, parts)
        target = OUTPUT / part / "sweeps" / sweep_dir.name if part else None
        if target is None:
            print(f"migration: {sweep_dir} stays: neither its trials nor its config class tell its part")
        elif in_use(sweep_dir):
            print(f"migration: {sweep_dir} stays: a worker still runs it; move it to {target.parent}/ later")
        elif move(sweep_dir, target, "sweep"):
            for trial_run in sorted(target.glob("*/run.json")):
                record_part(trial_run.parent, part)
            # trials.jsonl names each trial's run directory (and checkpoint) by its old path.
            trials = target / "trials.jsonl"
            if trials.is_file():
                text = trials.read_text()
                for old, new in ((sweep_dir, target), (sweep_dir.absolute(), target.absolute())):
                    text = text.replace(json.dumps(str(old))[1:-1] + "/", json.dumps(str(new))[1:-1] + "/")
                temporary = trials.with_name(".trials.jsonl.migrating")
                temporary.write_text(text)
                os.replace(temporary, trials)
    with contextlib.suppress(OSError):
        sweeps.rmdir()  # only when it is empty


def main() -> None:
    parts = {path.parent.name for path in Path().glob("part*/train.py")}
    if not OUTPUT.is_dir() or not parts:
        return
    move_runs(parts)
    move_sweeps(parts)


if __name__ == "__main__":
    main()
