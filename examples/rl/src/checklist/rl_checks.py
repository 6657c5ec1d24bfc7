"""Checks of the TorchRL parts (RL): environments, and the PPO update of the part's
LightningModule, wherever its methods are defined."""

from __future__ import annotations

import ast

from src.checklist.code_checks import makes_call, never_uses
from src.checklist.project import (
    Part,
    Project,
    calls,
    constant,
    constants,
    in_order,
    keyword,
    name_of,
    names,
    of_type,
    source,
    top_level_names,
)
from src.checklist.registry import check, each_part, require, rules
from src.checklist.run_checks import RunDir

RENAMED_SPECS = {  # RL-10: old spec names and their current ones
    "BoundedTensorSpec": "Bounded",
    "CompositeSpec": "Composite",
    "UnboundedContinuousTensorSpec": "Unbounded",
    "UnboundedDiscreteTensorSpec": "Unbounded",
    "DiscreteTensorSpec": "Categorical",
    "OneHotDiscreteTensorSpec": "OneHot",
    "MultiDiscreteTensorSpec": "MultiCategorical",
    "MultiOneHotDiscreteTensorSpec": "MultiOneHot",
    "BinaryDiscreteTensorSpec": "Binary",
}
THREAD_VARIABLES = {"OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "OMP_NUM_THREADS"}
EPISODE_KEYS = {"reward", "done", "terminated", "truncated"}  # and episode_reward: read from batch["next"]


def env_argument(project: Project, part: Part, name: str, position: int) -> tuple[str, ast.expr | None]:
    """An argument of the part's ParallelEnv(...), given by keyword or position."""
    found = project.calls("ParallelEnv", part)
    require(found, "no ParallelEnv(...)")
    path, env = found[0]
    return path, keyword(env, name) or (env.args[position] if len(env.args) > position else None)


def update_code(project: Project, part: Part) -> tuple[str, ast.Module]:
    """The PPO module's name and its methods, inherited ones included, as one tree."""
    cls = project.the_class("LightningModule", part)
    return f"{part.name}: {cls.name}", ast.Module(list(project.methods(cls, part).values()), [])


@each_part("RL-1", "ParallelEnv(<a config field>, ...) for worker processes, never SerialEnv", "rl")
def parallel_env(project: Project, part: Part) -> None:
    # The config lays the envs out: worker processes (ParallelEnv) for an env that is slow
    # to step, a batch in the main process for a cheap one; never one after another.
    never_uses(project, project.code(part), "SerialEnv", "ParallelEnv steps envs in parallel")
    path, workers = env_argument(project, part, "num_workers", 0)
    field = isinstance(workers, ast.Attribute)
    require(field, f"{path}: ParallelEnv's num_workers is {source(workers)!r}, not a config field")


@each_part("RL-2", "ParallelEnv's env factory is a module-level function (or its functools.partial)", "rl")
def picklable_factory(project: Project, part: Part) -> None:
    path, factory = env_argument(project, part, "create_env_fn", 1)
    if isinstance(factory, ast.Call) and name_of(factory) == "partial":
        factory = factory.args[0] if factory.args else None
    top_level = isinstance(factory, ast.Name) and factory.id in top_level_names(project.tree(path))
    require(top_level, f"{path}: ParallelEnv's factory {source(factory)!r} is not a module-level function")


@each_part("RL-3", "envs closed in the DataModule's teardown() and in a finally: of main_with_config()", "rl")
def env_closed(project: Project, part: Part) -> None:
    tries = of_type(project.main_with_config(part), ast.Try)
    closing = [t for t in tries if project.reaches(ast.Module(t.finalbody, []), "close", part)]
    require(closing, "main_with_config() closes the environments in no `finally:`")
    data = project.the_class("LightningDataModule", part)
    teardown = project.methods(data, part).get("teardown")
    require(teardown and project.reaches(teardown, "close", part), f"{data.name}.teardown() closes nothing")


@each_part("RL-5", "every field a custom env emits has a spec (diagnostics: Unbounded)", "rl")
def diagnostic_specs(project: Project, part: Part) -> None:
    for path, cls in project.classes("EnvBase", part):
        # What the env emits, inherited methods included; its spec, the nearest class's that sets one.
        made = [c for method in project.methods(cls, part).values() for c in calls(method, "TensorDict")]
        dicts = [c.args[0] for c in made if c.args and isinstance(c.args[0], ast.Dict)]
        emitted = {constant(k) for d in dicts for k in d.keys} - {None, *EPISODE_KEYS}
        setting = [
            [n.value for n in of_type(c, ast.Assign) if "observation_spec" in map(name_of, n.targets)]
            for c in project.lineage(cls, part)
        ]
        specs = next(filter(None, setting), [])
        specified = {kw.arg for spec in specs for kw in getattr(spec, "keywords", [])}
        missing = ", ".join(sorted(map(str, emitted - specified)))
        require(not missing, f"{path}: {cls.name} emits {missing} without an observation_spec entry")


@each_part("RL-7", "a custom env's device is a torch.device", "rl")
def env_device(project: Project, part: Part) -> None:
    for path, cls in project.classes("EnvBase", part):
        init = [c for c in calls(cls, "__init__") if keyword(c, "device")]
        if not init and "EnvBase" not in map(name_of, cls.bases):
            continue  # a subclass of an env of the project's, whose own __init__ is checked
        device = keyword(init[0], "device") if init else None
        torch_device = isinstance(device, ast.Call) and name_of(device) == "device"
        require(torch_device, f"{path}: {cls.name} passes device={source(device)!r}, not torch.device(...)")


@each_part("RL-8", "thread variables set to 1 with os.environ.setdefault before numpy/torch imports", "rl")
def thread_variables(project: Project, part: Part) -> None:
    for path in (f"{part.name}/__init__.py", f"{part.name}/train.py"):
        seen: set[object] = set()
        for node in project.tree(path).body:
            imported = {a.name for a in node.names} if isinstance(node, ast.Import) else set()
            imported |= {node.module} if isinstance(node, ast.ImportFrom) else set()
            if imported - {"os", "__future__"}:
                break
            ones = [c for c in calls(node, "setdefault") if len(c.args) == 2 and constant(c.args[1]) == "1"]
            seen |= {constant(c.args[0]) for c in ones}
        missing = ", ".join(sorted(THREAD_VARIABLES - seen))
        require(not missing, f"{path}: {missing} not set to 1 before the first other import")


@each_part("RL-9", 'rewards and done flags read from batch["next"]', "rl")
def next_keys(project: Project, part: Part) -> None:
    where, tree = update_code(project, part)
    # Names bound to a step's result, e.g. `final = episode["next"][-1]`.
    steps = [n for n in of_type(tree, ast.Assign) if "next" in constants(n.value)]
    from_next = {source(target) for n in steps for target in n.targets}
    for node in of_type(tree, ast.Subscript):
        inner, read = node.value, f"{where}: {source(node)} reads the batch root, not batch['next']"
        if constant(node.slice) in {*EPISODE_KEYS, "episode_reward"}:
            nested = isinstance(inner, ast.Subscript) and "next" in constants(inner.slice)
            require(source(inner) in from_next or nested, read)
        if isinstance(node.slice, ast.Tuple) and node.slice.elts:
            require(constant(node.slice.elts[0]) not in {*EPISODE_KEYS, "episode_reward"}, read)


@each_part("RL-10", "current TorchRL spec names only (Bounded, Composite, Unbounded, ...)", "rl")
def spec_names(project: Project, part: Part) -> None:
    for path in project.code(part):
        old = sorted(names(project.tree(path)) & RENAMED_SPECS.keys())
        require(not old, f"{path} uses " + ", ".join(f"{n} (now {RENAMED_SPECS[n]})" for n in old))


@each_part("RL-11", "update metrics divided by the updates made, logged as actual_updates", "rl")
def actual_updates(project: Project, part: Part) -> None:
    where, tree = update_code(project, part)
    require(any("actual_updates" in str(c) for c in constants(tree)), f"{where}: no actual_updates metric")
    divisions = [n for n in of_type(tree, ast.BinOp) if isinstance(n.op, ast.Div)]
    divided = any("updates" in source(n.right) for n in divisions)
    require(divided, f"{where}: update metrics are not divided by the updates made")


@each_part("RL-12", "isfinite(loss) before backward, isfinite(grad norms) after clipping, KL stop", "rl")
def finite_updates(project: Project, part: Part) -> None:
    where, tree = update_code(project, part)

    def checks_loss_first(method: ast.AST) -> bool:
        backward = {"backward", "manual_backward"}
        steps = [c.lineno for c in in_order(method) if project.reaches(c, backward, part)]
        return any("loss" in source(c) and c.lineno < steps[0] for c in calls(method, "isfinite") if steps)

    require(any(map(checks_loss_first, tree.body)), f"{where}: isfinite(loss) is not checked before backward")
    clipping = [n for n in of_type(tree, ast.Assign) if calls(n.value, "clip_grad_norm_")]
    norms = {source(t) for n in clipping for t in n.targets}
    checked = {source(c.args[0]) for c in calls(tree, "isfinite") if c.args}
    require(norms & checked, f"{where}: the clipped gradient norms are not checked with isfinite")
    breaks = [n.test for n in of_type(tree, ast.If) if any(isinstance(s, ast.Break) for s in n.body)]
    stops = any("kl" in source(test) for test in breaks)
    require(stops, f"{where}: no KL early stopping (`if kl > ...: break`)")


@each_part("RL-13", "clip_grad_norm_() on the actor's and the critic's parameters apart", "rl")
def clipping(project: Project, part: Part) -> None:
    where, tree = update_code(project, part)
    clipped = sorted({source(c.args[0]) for c in calls(tree, "clip_grad_norm_") if c.args})
    apart = len(clipped) >= 2
    require(apart, f"{where}: clip_grad_norm_ clips {clipped or 'nothing'}, not actor and critic apart")


@each_part("RL-6", "no manual step_mdp(): the collector steps with step_and_maybe_reset()", "rl")
def collector_steps(project: Project, part: Part) -> None:
    never_uses(project, project.code(part), "step_mdp", "use env.step_and_maybe_reset()")


rules("RL-4", "RewardSum() on the environments: episode rewards are tracked", "rl", makes_call("RewardSum"))


@check("PRF-3", "timing/env_step_seconds > 0 in every epoch: the rollouts are timed", "rl", mode="run")
def env_step_time(run: RunDir) -> None:
    values = [e["timing/env_step_seconds"] for e in run.events if "timing/env_step_seconds" in e]
    require(values, "metrics.jsonl has no timing/env_step_seconds")
    timed = all(v > 0 for v in values)
    require(timed, "timing/env_step_seconds is 0 in some epoch: the rollout is not timed")


@check("RL-11", "batch/actual_updates logged", "rl", mode="run")
def updates_logged(run: RunDir) -> None:
    require(any("batch/actual_updates" in e for e in run.events), "metrics.jsonl has no batch/actual_updates")
