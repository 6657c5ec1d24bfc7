"""Fuzz every part's `train` and `sweep` command lines (CFG-3, CFG-4).

105 generated command lines per part (315 for all three kinds), each with one or two
odd values (wrong types, out-of-range, non-finite or huge numbers, odd strings and
paths), bad resumes, unknown flags or missing values, and all under a budget of about
a second. None may end in a
traceback: bad input exits 2 with a message; the rest train, or stop at their budget,
and exit 0. The lines run in-process, one child Python per part, so that the imports
are paid once per part, not once per line.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import importlib
import io
import json
import os
import random
import shlex
import shutil
import signal
import subprocess
import sys
import time
import typing
from pathlib import Path

import torch
from conftest import PARTS, ROOT, slow

from src.cli import TrainOptions, parse_command
from src.runs.directory import RUN_DIR_ENV

LINES_PER_PART = 105  # 315 in a project of all three kinds of part
SWEEP_SHARE = 0.24  # of a part's lines, where it has a sweep
# Random lines that pass the checks and so train, per part: what bounds the test's time.
# RL's are few: a line that asks for environment workers waits seconds for them to start.
TRAINING_LINES = {"rl": 1}
TRAINING_LINES_DEFAULT = 2
BUDGET = ["--max-wall-clock-hours", "0.0003"]  # about a second of training
SWEEP_BUDGET = ["--trials", "1", "--max-hours", "0.0003"]
LINE_SECONDS = 120  # a line still running then was not bounded by its budget
CHILD_SECONDS = 600
PARALLEL = 2  # children at once
MEMORY_LIMIT = 8 * 2**30  # address space of a child without CUDA: a huge allocation fails fast
TRACEBACK = "Traceback (most recent call last)"

INTS = ["0", "-1", "1", "2", str(2**33), str(10**30), "abc", "", "1.5", "nan", "-0", "1_0"]
FLOATS = ["0", "-1", "1", "0.5", "nan", "inf", "-inf", "1e308", "1e-308", "-1e-308", str(2**33), "abc", ""]
STRINGS = ["", " ", "a/b", "x" * 300, "../x", "/dev/null", "ünï-名前-🙂", "-", "a b", "%s{0}", "nosuch"]
# The budget may only shrink or be refused: a longer valid one would make the line train for long.
BUDGETS = ["0", "-1", "nan", "inf", "-inf", "1e308", "1e-308", str(2**33), "abc", "", "1e-6"]
# Counts of processes, threads, nodes or devices stay small: thousands of data-loader
# workers, or a multi-node run that waits for machines that never come, test the
# machine, not the command line.
PROCESS_COUNTS = ["0", "-1", "1", "2", "abc", "", "1.5"]
LIMITED = {
    "num_workers": PROCESS_COUNTS,
    "num_envs": PROCESS_COUNTS,
    "env_workers": PROCESS_COUNTS,
    "num_threads": PROCESS_COUNTS,
    "num_nodes": ["0", "-1", "1", "abc", "", "1.5"],
    "devices": ["auto", "1", "0", "abc", "", " ", "1.5"]
    + ([] if torch.cuda.is_available() else ["-1", "0,", "1,1"]),
    "strategy": ["auto", "ddp", "ddp_spawn", "fsdp", "deepspeed", "single_device", "abc", ""],
    "accelerator": ["auto", "cpu", "gpu", "cuda", "mps", "tpu", "", "CPU"],
    # Online needs a W&B account: it has lines of its own, not one in every few.
    "wandb_mode": ["disabled", "offline", "auto", "", "abc", "DISABLED"],
    "engine": ["local", "wandb", "", "abc", "LOCAL"],
}


@dataclasses.dataclass
class Flag:
    """One flag of a command line and the values the fuzz gives it."""

    flag: str  # "--batch-size", "--output.base-dir"
    name: str  # the field: batch_size, base_dir
    type: typing.Any
    default: typing.Any
    seen: list  # the values the part's configs give the field


def config_flags(configs: dict, prefix: str = "") -> list[Flag]:
    """A Flag for every field of the part's configs, nested ones (`--output.base-dir`) included."""
    first = next(iter(configs.values()))
    hints = typing.get_type_hints(first)
    flags = []
    for field in dataclasses.fields(first):
        default = field.default_factory() if field.default is dataclasses.MISSING else field.default
        flag = f"--{prefix}{field.name.replace('_', '-')}"
        if dataclasses.is_dataclass(default):
            flags += config_flags({"nested": type(default)}, f"{prefix}{field.name.replace('_', '-')}.")
            continue
        seen = []
        for config_cls in configs.values():
            value = getattr(config_cls(), field.name)
            if value not in seen:
                seen.append(value)
        flags.append(Flag(flag, field.name, hints[field.name], default, seen))
    return flags


def as_arg(value: typing.Any) -> str:
    return repr(value) if isinstance(value, float) else str(value)


def fuzzed(flag: Flag, rng: random.Random, paths: list[str], valid: bool) -> list[str]:
    """The flag with a value: one in range (`valid`, though the checks may still refuse
    it) or one drawn from the odd values of its type."""
    tp, origin, args = flag.type, typing.get_origin(flag.type), typing.get_args(flag.type)
    if tp is bool:
        prefix, _, last = flag.flag[2:].rpartition(".")
        negated = f"--{prefix}.no-{last}" if prefix else f"--no-{last}"
        return rng.choice([[flag.flag], [negated], [flag.flag, "abc"], [f"{flag.flag}=1"]])
    if origin is tuple:
        return [flag.flag, *rng.choice(tuple_values(flag, args, valid))]
    if flag.name in LIMITED:
        pool = LIMITED[flag.name]
    elif flag.name in ("max_wall_clock_hours", "max_hours"):
        pool = BUDGETS
    elif origin is typing.Literal:
        pool = [str(a) for a in args] if valid else [str(a) for a in args] + ["", "abc", str(args[0]).upper()]
    elif valid:
        pool = [as_arg(value) for value in flag.seen if value is not None]
        pool += ["None"] if type(None) in args else []
        if isinstance(flag.default, int) and not isinstance(flag.default, bool):
            pool += [str(flag.default + 1), str(max(1, flag.default // 2))]
        elif isinstance(flag.default, float):
            pool += [as_arg(flag.default * 0.5), as_arg(flag.default * 2)]
        pool = pool or [as_arg(flag.default)]
    elif int in (tp, *args):
        pool = INTS
    elif float in (tp, *args):
        pool = FLOATS + (["None", "none"] if type(None) in args else [])
    elif flag.name.endswith(("path", "dir", "file")):
        pool = paths
    else:
        pool = STRINGS + paths[:3]
    return [flag.flag, rng.choice(pool)]


def tuple_values(flag: Flag, args: tuple, valid: bool) -> list[list[str]]:
    default = [str(value) for value in flag.default]
    if args[0] is int:
        odd = [[], ["-1"], ["0"], ["a"], ["1.5"], [str(2**33)], ["8", "-8"], ["nan"], [str(10**30)]]
        return [default, ["16"], ["8", "8"], default[:1]] if valid else odd
    if args[0] is float:
        odd = [["1", "0"], ["nan", "1"], ["0"], ["a", "b"], ["-inf", "inf"], ["0", "1", "2"], ["5", "5"]]
        return [default, ["-1", "17"], ["-1e308", "1e308"]] if valid else odd
    odd = [[], [""], ["nosuch"], ["x" * 300], default[:1] * 2, ["target"], ["-"]]
    return [default, default[:3], default[::-1]] if valid else odd


@dataclasses.dataclass
class Part:
    kind: str
    base: Path  # its runs' folder
    configs: dict
    flags: list[Flag]
    sweep_flags: list[Flag]

    def command(self, sweep: bool) -> list[str]:
        """The start of every line: the smoke config, this part's folder, no W&B and no report
        (the lines are about the command line; a report's figures cost seconds), the budget."""
        start = ["--config", "smoke", "--output.base-dir", str(self.base), "--wandb-mode", "disabled"]
        start += ["--output.no-report"]
        return start + BUDGET + (SWEEP_BUDGET if sweep else [])


def random_line(part: Part, sweep: bool, rng: random.Random, paths: list[str]) -> list[str]:
    line = part.command(sweep)
    draw = rng.random()
    if draw < 0.12:  # another of the part's configs, or a name it does not have
        line[1] = rng.choice([*part.configs, *part.configs, "nosuch", "", "SMOKE", "smoke "])
    valid = rng.random() < 0.4
    flags = part.flags + (part.sweep_flags if sweep else [])
    for flag in rng.sample(flags, rng.choice([1, 1, 2])):
        line += fuzzed(flag, rng, paths, valid and rng.random() < 0.8)
    if draw > 0.97:
        line += rng.choice([["--no-such-flag", "1"], ["stray"], ["--seed"], ["--learning-rat", "1"]])
    return line


def passes_checks(part: Part, sweep: bool, line: list[str]) -> bool:
    """Whether the command line's parse and config checks accept the line: whether it trains."""
    if sweep:
        from src.sweep import SweepOptions  # only projects with sweeps have it

        options = SweepOptions
    else:
        options = TrainOptions
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        try:
            parse_command(part.configs, options, line)
        except BaseException:  # noqa: BLE001 (refused, or a bug: the child reports which)
            return False
    return True


def special_lines(part: Part, sweep: bool, files: dict[str, str]) -> list[list[str]]:
    """Lines every part gets: names and flags it does not have, values missing, resumes
    of every sort, W&B without an account."""
    start = part.command(sweep)
    refused = [
        ["--config", "nosuch"],
        ["--config"],
        ["--config=nosuch"],
        ["--config", ""],
        ["--no-such-flag", "1"],
        ["--no-such-flag"],
        ["stray"],
        ["--seed"],
        ["--learning-rat", "1"],
        ["--stop-file", ""],
        ["--name", ""],
        ["--output.base-dir", "/dev/null"],
        ["--output.base-dir", files["file"]],
        ["--help"],
        ["--wandb-mode", "online"],  # W&B without an account
    ]
    if sweep:
        others = [["--engine", "wandb"], ["--engine", "wandb", "--wandb-mode", "online"], ["--trials", "0"]]
        others += [["--max-hours", "0"], ["--resume", "auto"]]
        return [start] + [start + extra for extra in refused + others]
    resumes = [
        "auto",  # no run yet: starts afresh
        "auto",  # continues that run, in place
        files["own_run"],
        files["own_checkpoint"],
        files["other_run"],
        files["other_checkpoint"],
        files["broken_run"],
        files["no_checkpoint_run"],
        str(Path(files["dir"]) / "no-such-run"),
        files["file"],
        files["fake_checkpoint"],
        files["dir"],
        "/dev/null",
        "",
    ]
    others = [["--resume", resume] for resume in resumes if resume]
    others += [["--resume"], ["--config", "nosuch", "--resume", "auto"], ["--stop-file", "/dev/null"]]
    return [start + extra for extra in others + refused]


def fuzz_lines(part: Part, count: int, sweep: bool, paths, files) -> list[list[str]]:
    """The special lines, then random ones up to `count`; of these, only TRAINING_LINES
    may pass the checks (and so train), a third of them for sweeps."""
    # The same lines every time; FUZZ_SEED=N draws others, for a fault campaign of one's own.
    rng = random.Random(f"{os.environ.get('FUZZ_SEED', '')}{part.kind} {'sweep' if sweep else 'train'}")
    lines = special_lines(part, sweep, files)
    training = TRAINING_LINES.get(part.kind, TRAINING_LINES_DEFAULT) * (0.3 if sweep else 1)
    while len(lines) < count:
        line = random_line(part, sweep, rng, paths)
        if passes_checks(part, sweep, line):
            if training < 1:
                continue
            training -= 1
        lines.append(line)
    return lines


def make_files(tmp_path: Path, smoke_runs, kind: str, other_kind: str) -> tuple[list[str], dict[str, str]]:
    """Odd paths for the fuzz, and run directories to resume: copies of this part's smoke
    run and of another part's, a run whose config.json is damaged, one whose checkpoints
    are all cut short."""
    odd = tmp_path / "odd"
    if not odd.exists():
        odd.mkdir()
        (odd / "readonly").mkdir(mode=0o555)
        (odd / "empty").mkdir()
        (odd / "garbage.csv").write_bytes(bytes(range(256)) * 4)
        (odd / "empty.csv").write_text("")
        (odd / "header.csv").write_text("a,b,target\n")
        (odd / "text.parquet").write_text("not a parquet file\n")
        (odd / "notes.txt").write_text("not a checkpoint\n")
        (odd / "fake.ckpt").write_bytes(b"\x80\x04not a checkpoint")
    paths = [
        str(odd / "no" / "such" / "thing"),
        str(odd / "empty"),
        "/dev/null",
        str(odd / "readonly"),
        str(odd / "garbage.csv"),
        str(odd / "empty.csv"),
        str(odd / "header.csv"),
        str(odd / "text.parquet"),
        "",
        " ",
        "x" * 300,
        "../x",
        "a/b",
    ]
    runs = tmp_path / "runs" / kind
    own = shutil.copytree(smoke_runs(kind)[0], runs / "own")  # a run directory moved elsewhere
    broken = shutil.copytree(own, runs / "broken")
    (broken / "config.json").write_text('{"name": ')
    cut = shutil.copytree(own, runs / "cut")
    for checkpoint in (cut / "checkpoints").glob("*.*"):
        checkpoint.write_bytes(checkpoint.read_bytes()[: checkpoint.stat().st_size // 2])
    files = {"other_run": "", "other_checkpoint": ""}
    if other_kind != kind:
        other = shutil.copytree(smoke_runs(other_kind)[0], runs / "other")
        files = {"other_run": str(other), "other_checkpoint": str(min((other / "checkpoints").glob("*.*")))}
    return paths, files | {
        "own_run": str(own),
        "own_checkpoint": str(min((own / "checkpoints").glob("*.*"))),
        "broken_run": str(broken),
        "no_checkpoint_run": str(cut),
        "dir": str(odd / "empty"),
        "file": str(odd / "notes.txt"),
        "fake_checkpoint": str(odd / "fake.ckpt"),
    }


# Runs each line of a batch in this one process, as `python -m partN.train|sweep` would
# run it, and isolates the lines from each other. Output is caught at the file
# descriptors, so that what worker processes print counts too.
DRIVER = r"""
import gc, importlib, json, os, resource, signal, sys, tempfile, time, traceback

jobs_file, results_file, line_seconds, memory_limit = sys.argv[1:5]
if int(memory_limit):
    try:
        resource.setrlimit(resource.RLIMIT_AS, (int(memory_limit), int(memory_limit)))
    except (ValueError, OSError):  # not on every OS
        pass


class Unbounded(BaseException):  # not an Exception: nothing in the product catches it
    pass


def on_alarm(signum, frame):
    raise Unbounded(f"still running after {line_seconds} s: not bounded by its budget")


signal.signal(signal.SIGALRM, on_alarm)
home, argv0 = os.getcwd(), sys.argv[0]
with open(jobs_file) as file:
    jobs = json.load(file)
results = open(results_file, "a", encoding="utf-8")
for job in jobs:
    module = importlib.import_module(job["module"])
    prog = "python -m " + job["module"]
    environ = dict(os.environ)
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    streams = sys.stdout, sys.stderr
    for stream in streams:
        stream.flush()
    capture = tempfile.TemporaryFile()
    saved = os.dup(1), os.dup(2)
    os.dup2(capture.fileno(), 1)
    os.dup2(capture.fileno(), 2)
    sys.argv = [prog, *job["argv"]]
    code, error, started = 0, None, time.monotonic()
    try:
        signal.alarm(int(line_seconds))
        try:
            module.main(module.SPEC, prog=prog) if job["sweep"] else module.main()
        finally:
            signal.alarm(0)
    except SystemExit as exit:
        code = exit.code if isinstance(exit.code, int) else int(exit.code is not None)
    except BaseException:
        code, error = None, traceback.format_exc()
    try:
        wandb = sys.modules.get("wandb")
        if wandb is not None and wandb.run is not None:
            wandb.finish()
    except BaseException:
        error = (error or "") + "wandb.finish() after the line: " + traceback.format_exc()
    for stream in (sys.stdout, sys.stderr, *streams):
        try:
            stream.flush()
        except BaseException:
            pass
    sys.stdout, sys.stderr = streams
    os.dup2(saved[0], 1)
    os.dup2(saved[1], 2)
    for fd in saved:
        os.close(fd)
    sys.argv = [argv0]
    os.chdir(home)
    os.environ.clear()
    os.environ.update(environ)
    for signum, handler in handlers.items():
        if handler is not None:
            signal.signal(signum, handler)
    capture.seek(0)
    output = capture.read().decode(errors="replace")
    capture.close()
    printed = "Traceback (most recent call last)" in output
    tail = output[-4000:] if error or printed or code not in (0, 2) else ""
    result = {"argv": job["argv"], "module": job["module"], "code": code, "error": error}
    last = [line for line in output.splitlines() if line.strip()][-1:]
    result.update(printed=printed, tail=tail, last=last, seconds=round(time.monotonic() - started, 2))
    results.write(json.dumps(result) + "\n")
    results.flush()
    gc.collect()
"""


def run_batches(batches: list[list[dict]], tmp_path: Path, env: dict) -> tuple[list[dict], list[str]]:
    """Each batch in a child Python, PARALLEL at once: the lines' results, and what went
    wrong outside them (a child that crashed, hung, or printed a traceback between lines)."""
    memory_limit = 0 if torch.cuda.is_available() else MEMORY_LIMIT
    pending, running, results, problems = list(enumerate(batches)), [], [], []
    try:
        while pending or running:
            while pending and len(running) < PARALLEL:
                number, batch = pending.pop(0)
                jobs, out = tmp_path / f"jobs{number}.json", tmp_path / f"results{number}.jsonl"
                jobs.write_text(json.dumps(batch))
                log = open(tmp_path / f"child{number}.log", "w+b")  # noqa: SIM115 (closed when it ends)
                limits = [str(LINE_SECONDS), str(memory_limit)]
                child = subprocess.Popen(
                    [sys.executable, "-c", DRIVER, str(jobs), str(out), *limits],
                    cwd=tmp_path / "cwd",
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=log,
                    start_new_session=True,  # its worker processes too can be ended with it
                )
                running.append((child, batch, out, log, time.monotonic()))
            time.sleep(0.5)
            for entry in list(running):
                child, batch, out, log, started = entry
                if child.poll() is None and time.monotonic() - started < CHILD_SECONDS:
                    continue
                end_child(child)
                running.remove(entry)
                done = [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []
                results += done
                log.seek(0)
                output = log.read().decode(errors="replace")
                log.close()
                if len(done) < len(batch):
                    job = batch[len(done)]
                    problems.append(
                        f"the child running `{command_line(job['module'], job['argv'])}` ended (status "
                        f"{child.returncode}) after {time.monotonic() - started:.0f} s:\n{output[-3000:]}"
                    )
                elif TRACEBACK in output:
                    problems.append(f"a traceback between lines:\n{output[-3000:]}")
    finally:
        for child, *_ in running:
            end_child(child)
    return results, problems


def end_child(child: subprocess.Popen) -> None:
    """End a child that is still running, and the processes it started."""
    if child.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGKILL)
    child.wait()


def shortened(output: str) -> str:
    """A traceback's frames in this project, and its last lines."""
    lines = output.rstrip().splitlines()
    ours = [n for n, line in enumerate(lines) if line.strip().startswith(f'File "{ROOT}')]
    keep = {*ours, *(n + 1 for n in ours), *range(max(len(lines) - 5, 0), len(lines))}
    return "\n".join(lines[n] for n in sorted(keep) if n < len(lines))


def command_line(module: str, argv: list[str]) -> str:
    shown = [arg if len(arg) <= 80 else f"{arg[:8]}...({len(arg)} characters)" for arg in argv]
    return shlex.join(["python", "-m", module, *shown])


@slow
def test_fuzzed_command_lines_end_without_a_traceback(tmp_path, smoke_runs, monkeypatch):
    """Bad input exits 2 with a message (CFG-3); the rest train within their budget
    (CFG-4) and exit 0. No line, valid or not, ends in a traceback."""
    kinds = sorted(PARTS)
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")  # relative paths of the checks land where the children's do
    per_part = LINES_PER_PART
    batches = []
    for number, kind in enumerate(kinds):
        package = PARTS[kind]
        configs = importlib.import_module(f"{package}.config").CONFIGS
        has_sweep = (ROOT / package / "sweep.py").exists()
        sweep_flags = []
        if has_sweep:
            from src.sweep import SweepOptions

            sweep_flags = config_flags({"options": SweepOptions})
        part = Part(kind, tmp_path / package, configs, config_flags(configs), sweep_flags)
        other_kind = kinds[(number + 1) % len(kinds)]
        paths, files = make_files(tmp_path, smoke_runs, kind, other_kind)
        sweeps = round(per_part * SWEEP_SHARE) if has_sweep else 0
        batch = [
            {"module": f"{package}.train", "sweep": False, "argv": argv}
            for argv in fuzz_lines(part, per_part - sweeps, False, paths, files)
        ]
        if sweeps:
            batch += [
                {"module": f"{package}.sweep", "sweep": True, "argv": argv}
                for argv in fuzz_lines(part, sweeps, True, paths, files)
            ]
        batches.append(batch)
    # The slowest part first, so that the others run beside it.
    batches.sort(key=lambda batch: not batch[0]["module"].startswith(PARTS.get("rl", "-")))
    env = {key: value for key, value in os.environ.items() if not key.startswith("WANDB_")}
    env.pop(RUN_DIR_ENV, None)  # each line makes its own run directory
    # No W&B account and no way to reach one: nothing the fuzz does leaves this machine.
    env.update(
        WANDB_MODE="disabled",
        WANDB_SILENT="true",
        WANDB_CONFIG_DIR=str(tmp_path / "wandb_config"),
        WANDB_DIR=str(tmp_path / "wandb"),
        WANDB_BASE_URL="http://127.0.0.1:9",
        NETRC=str(tmp_path / "no-netrc"),
        PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
    )
    started = time.monotonic()
    results, problems = run_batches(batches, tmp_path, env)
    seconds = time.monotonic() - started

    codes = collections.Counter(result["code"] for result in results)
    print(f"{len(results)} command lines in {seconds:.0f} s; exit codes: {dict(codes)}")
    failures = problems + [
        f"`{command_line(result['module'], result['argv'])}` -> "
        + ("raised" if result["error"] else f"exit {result['code']}")
        + (", printed a traceback" if result["printed"] else "")
        + "\n"
        + shortened(result["error"] or result["tail"])
        for result in results
        if result["error"] is not None or result["printed"] or result["code"] not in (0, 2)
    ]
    assert not failures, f"{len(failures)} of {len(results)} command lines failed:\n\n" + "\n\n".join(
        failures[:20]
    )
    assert len(results) >= LINES_PER_PART * len(kinds)
    # The fuzz is no check of the runs if none of them ran.
    untrained = {job["module"] for batch in batches for job in batch}
    untrained -= {r["module"] for r in results if r["code"] == 0 and "--help" not in r["argv"]}
    assert not untrained, f"no line of {', '.join(sorted(untrained))} exited 0"
