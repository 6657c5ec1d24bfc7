"""Static checks of operations, outputs, resume and data (OPS, OUT, RES, DATA)."""

from __future__ import annotations

import ast
import shlex

from src.checklist.layout import Project
from src.checklist.registry import TAGS, check
from src.checklist.static_checks.common import (
    TRAINER,
    callbacks_list,
    one_call,
    parts,
    project_sources,
    require,
)
from src.checklist.syntax import calls, constant, function, keyword, name_of, nodes, source

# OPS: running on a shared GPU machine


@check("OPS-1", 'main() runs inside GpuLock() under if __name__ == "__main__"')
def gpu_lock(project: Project) -> str:
    lock = project.tree("src/gpu_lock.py")
    require(calls(lock, "flock"), "src/gpu_lock.py: no fcntl.flock")
    require(
        "/tmp/gpu-task.lock" in {constant(n) for n in nodes(lock)},
        "src/gpu_lock.py: the default lock is not /tmp/gpu-task.lock",
    )
    for part in project.parts:
        tree = project.tree(f"{part.name}/train.py")
        guard = [
            n
            for n in tree.body
            if isinstance(n, ast.If) and "__name__" in source(n.test) and calls(n, "main")
        ]
        require(guard, f'{part.name}/train.py: no `if __name__ == "__main__": main()`')
        main = function(tree, "main")
        locked = (
            [
                w
                for w in nodes(main)
                if isinstance(w, ast.With) and any(name_of(i.context_expr) == "GpuLock" for i in w.items)
            ]
            if main
            else []
        )
        require(locked, f"{part.name}/train.py: main() does not run inside `with GpuLock()`")
    return "every main() runs under GpuLock(), flock on /tmp/gpu-task.lock"


@check("OPS-2", "one command starts a long run detached: PYTHONUNBUFFERED=1 nohup ... &")
def detached(project: Project) -> str:
    words = shlex.split(project.text("scripts/detach.sh"), comments=True)
    for word in ("PYTHONUNBUFFERED=1", "nohup"):
        require(word in words, f"scripts/detach.sh: no {word}")
    return "scripts/detach.sh runs PYTHONUNBUFFERED=1 nohup ... &"


# OUT: outputs


@check("OUT-1", "runs write to {base_dir}/{name}_{YYYYMMDD_HHMMSS}/; Trainer(default_root_dir=run_dir)")
def run_dir_names(project: Project) -> str:
    tree = project.tree("src/run_dir.py")
    stamps = [n for n in tree.body if isinstance(n, ast.Assign) and source(n.targets[0]) == "STAMP_FORMAT"]
    require(
        stamps and constant(stamps[0].value) == "%Y%m%d_%H%M%S",
        'src/run_dir.py: STAMP_FORMAT is not "%Y%m%d_%H%M%S"',
    )
    if project.kinds & TAGS["nn"]:
        trainer = one_call(project.tree(TRAINER), "Trainer", TRAINER)
        require(
            keyword(trainer, "default_root_dir") is not None,
            f"{TRAINER}: Trainer(default_root_dir=run_dir) missing",
        )
    return "{name}_{YYYYMMDD_HHMMSS} run directories"


@check("OUT-4", "metrics.jsonl, one line per logging event")
def metrics_jsonl(project: Project) -> str:
    if project.kinds & TAGS["nn"]:
        trainer = function(project.tree(TRAINER), "build_trainer")
        require(trainer and calls(trainer, "JsonlLogger"), f"{TRAINER}: build_trainer() adds no JsonlLogger")
    if "sl_tree" in project.kinds:
        where, node = callbacks_list(project, "sl_tree")
        require(calls(node, "RoundMetrics"), f"{where} lacks RoundMetrics (metrics.jsonl)")
    return "metrics.jsonl written by every part"


# RES, DATA


@check("RES-3", "checkpoints load onto any device: torch.load(map_location=...)")
def map_location(project: Project) -> str:
    loads = 0
    for path in project_sources(project):
        for call in calls(project.tree(path), "load"):
            if source(call.func) == "torch.load":
                loads += 1
                require(
                    keyword(call, "map_location") is not None,
                    f"{path}:{call.lineno}: torch.load without map_location=",
                )
    return f"{loads} torch.load call(s), all with map_location="


@check("DATA-1", "input data validated before training, naming the bad column", "sl")
def data_validated(project: Project) -> str:
    for part in parts(project, "sl"):
        require(
            calls(project.tree(f"{part.name}/data.py"), "validate_table"),
            f"{part.name}/data.py never calls validate_table() (src/data_checks.py)",
        )
    return "every supervised part validates its table"
