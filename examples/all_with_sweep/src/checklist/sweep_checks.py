"""Checks of the sweeps (SWP), present in a project rendered with them."""

from __future__ import annotations

import ast

from src.checklist.project import Part, Project, calls, constant, constants, function, names, of_type, source
from src.checklist.registry import Failed, check, each_part, require


@each_part("SWP-1", "partN/sweep.py", sweep=True)
def sweep_file(project: Project, part: Part) -> None:
    require((project.root / part.name / "sweep.py").is_file(), f"no sweep.py in {part.name}")


@each_part("SWP-2", "main() and sweep.py both call main_with_config()", sweep=True)
def split_main(project: Project, part: Part) -> None:
    main = function(project.tree(f"{part.name}/train.py"), "main")
    split = main and calls(main, "main_with_config")
    require(split, f"{part.name}/train.py: main() does not call main_with_config()")
    used = "main_with_config" in names(project.tree(f"{part.name}/sweep.py"))
    require(used, f"{part.name}/sweep.py does not use main_with_config")


@check("SWP-3", "setup_run() joins a sweep's run (wandb.run.sweep_id) instead of wandb.init()", sweep=True)
def sweep_aware(project: Project) -> None:
    path, setup = project.function("setup_run")
    joins = [n.lineno for n in of_type(setup, ast.If) if "sweep_id" in source(n.test) and calls(n, "update")]
    init = calls(setup, "init")
    require(joins and init and joins[0] < init[0].lineno, f"{path}: setup_run() calls wandb.init() first")


@each_part("SWP-4", "an architecture preset in the search space, decoded into config fields", sweep=True)
def architecture(project: Project, part: Part) -> None:
    space = f"{part.name}/sweep.py"
    keys = {constant(k) for n in of_type(project.tree(space), ast.Dict) for k in n.keys}
    require("architecture" in keys, f"{space}: no architecture in the search space")
    functions = [f for p, f in project.find(ast.FunctionDef, part) if p != space]
    require(any("architecture" in constants(f) for f in functions), "no function decodes the architecture")


@each_part("SWP-5", "--max-hours sets one deadline for the whole sweep", sweep=True)
def sweep_budget(project: Project, part: Part) -> None:
    sums = [n for _, n in project.find(ast.BinOp, part) if "max_hours" in names(n)]
    clocked = any({"monotonic", "time"} & names(n) for n in sums)
    require(clocked, "no sweep deadline computed from --max-hours")


@check("SWP-6", "README.md documents the launch in tmux (`tmux new -s sweep`)", sweep=True)
def tmux_documented(project: Project) -> None:
    require("tmux new -s sweep" in project.text("README.md"), "README.md does not show `tmux new -s sweep`")


@check("SWP-7", "a trial's exceptions are caught, then cleanup_vram() and two gc.collect()", sweep=True)
def trial_cleanup(project: Project) -> str:
    for _, node in project.find(ast.FunctionDef):
        tries = [t for t in node.body if isinstance(t, ast.Try)]
        handled = [t for t in tries if any("Exception" in source(h.type) for h in t.handlers)]
        after = ast.Module([s for s in node.body if handled and s.lineno > handled[0].lineno], [])
        if calls(after, "cleanup_vram") and len(calls(after, "collect")) >= 2:
            return f"{node.name}() catches, then cleanup_vram() and gc.collect() twice"
    raise Failed("no trial function catches Exception, then calls cleanup_vram() and gc.collect() twice")
