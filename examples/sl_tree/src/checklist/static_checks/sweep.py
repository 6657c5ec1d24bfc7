"""Static checks of sweeps (SWP)."""

from __future__ import annotations

import ast

from src.checklist.layout import Project
from src.checklist.registry import Failed, check
from src.checklist.static_checks.common import WANDB, main_with_config, require
from src.checklist.syntax import calls, constant, function, names, nodes, source

SWEEP = "src/sweep.py"

# SWP: sweeps


@check("SWP-1", "partN/sweep.py", "sweep")
def sweep_files(project: Project) -> str:
    missing = [p.name for p in project.parts if not (project.root / p.name / "sweep.py").is_file()]
    require(not missing, f"no sweep.py in {', '.join(missing)}")
    return "every part has sweep.py"


@check("SWP-2", "main_with_config(cfg) split out of main(), used by the sweep", "sweep")
def split_main(project: Project) -> str:
    for part in project.parts:
        main_with_config(project, part)
        main = function(project.tree(f"{part.name}/train.py"), "main")
        require(
            main and calls(main, "main_with_config"),
            f"{part.name}/train.py: main() does not call main_with_config()",
        )
        require(
            "main_with_config" in names(project.tree(f"{part.name}/sweep.py")),
            f"{part.name}/sweep.py does not train through main_with_config",
        )
    return "main() and sweep.py both call main_with_config()"


@check("SWP-3", "setup_run() joins a sweep's run (wandb.run.sweep_id) instead of wandb.init()", "sweep")
def sweep_aware(project: Project) -> str:
    setup = function(project.tree(WANDB), "setup_run")
    require(setup, f"{WANDB}: no setup_run()")
    joins = [
        n
        for n in nodes(setup)
        if isinstance(n, ast.If) and "sweep_id" in source(n.test) and calls(n, "update")
    ]
    init = calls(setup, "init")
    require(
        joins and init and joins[0].lineno < init[0].lineno,
        f"{WANDB}: setup_run() does not update the sweep run's config before wandb.init()",
    )
    return "setup_run() updates the sweep's run when wandb.run.sweep_id is set"


@check("SWP-4", "an `architecture` parameter decoded into config fields", "sweep")
def architecture(project: Project) -> str:
    for part in project.parts:
        tree = project.tree(f"{part.name}/sweep.py")
        spaces = [
            n.value for n in tree.body if isinstance(n, ast.Assign) and source(n.targets[0]) == "SEARCH_SPACE"
        ]
        require(
            spaces
            and isinstance(spaces[0], ast.Dict)
            and "architecture" in {constant(k) for k in spaces[0].keys},
            f"{part.name}/sweep.py: no architecture in SEARCH_SPACE",
        )
    decode = function(project.tree(SWEEP), "decode")
    require(
        decode and "architecture" in {constant(n) for n in nodes(decode)},
        f"{SWEEP}: decode() does not expand architecture",
    )
    return "architecture presets decoded into fields"


@check("SWP-5", "--max-hours bounds the whole sweep", "sweep")
def sweep_budget(project: Project) -> str:
    tree = project.tree(SWEEP)
    require("max_hours" in names(tree), f"{SWEEP}: no --max-hours option")
    require("deadline" in names(tree), f"{SWEEP}: no sweep-wide deadline")
    return "--max-hours sets one deadline for the sweep"


@check("SWP-6", "documented launch in tmux (`tmux new -s sweep`)", "sweep")
def tmux_documented(project: Project) -> str:
    require("tmux new -s sweep" in project.text("README.md"), "README.md does not show `tmux new -s sweep`")
    return "README.md shows `tmux new -s sweep`"


@check("SWP-7", "a trial's exceptions are caught, then cleanup_vram() and two gc.collect()", "sweep")
def trial_cleanup(project: Project) -> str:
    tree = project.tree(SWEEP)
    for node in nodes(tree):
        if isinstance(node, ast.FunctionDef):
            tries = [
                t
                for t in node.body
                if isinstance(t, ast.Try) and any("Exception" in source(h.type) for h in t.handlers)
            ]
            after = [s for s in node.body if tries and s.lineno > tries[0].lineno]
            cleaned = [c for s in after for c in calls(s, "cleanup_vram")]
            collected = [c for s in after for c in calls(s, "collect")]
            if cleaned and len(collected) >= 2:
                return f"{node.name}() catches, then cleanup_vram() and gc.collect() twice"
    raise Failed(
        f"{SWEEP}: no trial function that catches Exception, then calls cleanup_vram() and gc.collect() twice"
    )
