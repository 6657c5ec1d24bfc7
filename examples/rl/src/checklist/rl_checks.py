"""Checks of the TorchRL part's code (RL), wherever its files are."""

from __future__ import annotations

import ast

from src.checklist.code_checks import never_uses
from src.checklist.project import (
    Part,
    Project,
    calls,
    constant,
    constants,
    keyword,
    methods,
    name_of,
    names,
    nodes,
    source,
)
from src.checklist.registry import check, require

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
EPISODE_KEYS = {"reward", "done", "terminated", "truncated", "episode_reward"}


def rl_parts(project: Project) -> list[Part]:
    return project.parts_of({"rl"})


def the_call(project: Project, part: Part, name: str) -> tuple[str, ast.Call]:
    found = project.calls(name, part)
    require(found, f"{part.name}: no {name}(...)")
    return found[0]


def update_code(project: Project, part: Part) -> tuple[str, ast.AST]:
    """The file of the PPO update: where ClipPPOLoss is used."""
    path = next((p for p in project.code(part) if "ClipPPOLoss" in names(project.tree(p))), None)
    require(path, f"{part.name}: no ClipPPOLoss")
    return path, project.tree(path)


@check("RL-1", "ParallelEnv(num_workers=<a config field>) for worker processes, never SerialEnv", "rl")
def parallel_env(project: Project) -> str:
    # The config lays the envs out: worker processes (ParallelEnv) for an env that is slow
    # to step, a batch in the main process for a cheap one; never one after another.
    for part in rl_parts(project):
        never_uses(project, project.code(part), "SerialEnv", "ParallelEnv steps envs in parallel")
        path, env = the_call(project, part, "ParallelEnv")
        workers = keyword(env, "num_workers") or (env.args[0] if env.args else None)
        require(
            isinstance(workers, ast.Attribute) and source(workers.value) == "cfg",
            f"{path}: ParallelEnv's num_workers is {source(workers)!r}, not a config field",
        )
    return "worker processes as ParallelEnv(cfg.<field>, ...); no SerialEnv"


@check("RL-2", "the env factory is picklable: a module-level function or functools.partial", "rl")
def picklable_factory(project: Project) -> str:
    for part in rl_parts(project):
        path, env = the_call(project, part, "ParallelEnv")
        factory = keyword(env, "create_env_fn") or (env.args[1] if len(env.args) > 1 else None)
        if isinstance(factory, ast.Call) and name_of(factory) == "partial":
            factory = factory.args[0] if factory.args else None
        tree = project.tree(path)
        top = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
        top |= {a.asname or a.name for n in tree.body if isinstance(n, ast.ImportFrom) for a in n.names}
        require(
            isinstance(factory, ast.Name) and factory.id in top,
            f"{path}: ParallelEnv's factory {source(factory)!r} is not a module-level function",
        )
    return "ParallelEnv's factory is a module-level function"


@check("RL-3", "env.close() on every exit path (no zombie workers)", "rl")
def env_closed(project: Project) -> str:
    for part in rl_parts(project):
        main = project.function("main_with_config", part)[1]
        closing = [
            t
            for t in nodes(main)
            if isinstance(t, ast.Try) and project.reaches(ast.Module(t.finalbody, []), "close", part)
        ]
        require(closing, f"{part.name}: main_with_config() closes the environments in no `finally:`")
        teardown = methods(project.classes("LightningDataModule", part)[-1][1]).get("teardown")
        require(
            teardown and project.reaches(teardown, "close", part),
            f"{part.name}: the DataModule's teardown() closes nothing",
        )
    return "closed in the DataModule's teardown() and in a finally: of main_with_config()"


@check("RL-4", "RewardSum() appended so episode rewards are tracked", "rl")
def reward_sum(project: Project) -> str:
    for part in rl_parts(project):
        the_call(project, part, "RewardSum")
    return "RewardSum() on the environments"


def custom_envs(project: Project, part: Part) -> list[tuple[str, ast.ClassDef]]:
    return project.classes("EnvBase", part)


@check("RL-5", "every field a custom env emits has a spec (diagnostics: Unbounded)", "rl")
def diagnostic_specs(project: Project) -> str:
    envs = [env for part in rl_parts(project) for env in custom_envs(project, part)]
    for path, cls in envs:
        emitted = {
            constant(k)
            for c in calls(cls, "TensorDict")
            if c.args and isinstance(c.args[0], ast.Dict)
            for k in c.args[0].keys
        }
        specs = {
            kw.arg
            for n in nodes(cls)
            if isinstance(n, ast.Assign)
            and any(name_of(t) == "observation_spec" for t in n.targets)
            and isinstance(n.value, ast.Call)
            for kw in n.value.keywords
        }
        missing = (
            {k for k in emitted if isinstance(k, str)} - {"done", "terminated", "truncated", "reward"} - specs
        )
        require(
            not missing,
            f"{path}: {cls.name} emits {', '.join(sorted(missing))} without an observation_spec entry",
        )
    return f"{len(envs)} custom env(s): every emitted field is in observation_spec"


@check("RL-6", "step_and_maybe_reset(), not step() plus a manual step_mdp()", "rl")
def no_step_mdp(project: Project) -> str:
    for part in rl_parts(project):
        never_uses(project, project.code(part), "step_mdp", "use env.step_and_maybe_reset()")
    return "no manual step_mdp() (the collector steps with step_and_maybe_reset)"


@check("RL-7", "a custom env's device is a torch.device", "rl")
def env_device(project: Project) -> str:
    envs = [env for part in rl_parts(project) for env in custom_envs(project, part)]
    for path, cls in envs:
        init = methods(cls).get("__init__")
        device = keyword(calls(init, "__init__")[0], "device") if init and calls(init, "__init__") else None
        require(
            isinstance(device, ast.Call) and name_of(device) == "device",
            f"{path}: {cls.name} passes device={source(device)!r}, not torch.device(...)",
        )
    return f"{len(envs)} custom env(s) built on torch.device"


@check("RL-8", "thread variables set with os.environ.setdefault before numpy/torch imports", "rl")
def thread_variables(project: Project) -> str:
    for part in rl_parts(project):
        for path in (f"{part.name}/__init__.py", f"{part.name}/train.py"):
            seen: set[object] = set()
            for node in project.tree(path).body:
                imported = (
                    [a.name for a in node.names]
                    if isinstance(node, ast.Import)
                    else [node.module]
                    if isinstance(node, ast.ImportFrom)
                    else []
                )
                if set(imported) - {"os", "__future__"}:
                    break
                seen |= {
                    constant(c.args[0])
                    for c in calls(node, "setdefault")
                    if len(c.args) == 2 and constant(c.args[1]) == "1"
                }
            missing = THREAD_VARIABLES - seen
            require(
                not missing,
                f"{path}: {', '.join(sorted(missing))} not set to 1 before the first other import",
            )
    return "thread variables set before any other import in the part's __init__.py and train.py"


@check("RL-9", 'rewards and done flags read from batch["next"]', "rl")
def next_keys(project: Project) -> str:
    for part in rl_parts(project):
        path, tree = update_code(project, part)
        # Names bound to a step's result, e.g. `final = episode["next"][-1]`.
        from_next = {
            source(t)
            for n in nodes(tree)
            if isinstance(n, ast.Assign) and "next" in constants(n.value)
            for t in n.targets
        }
        for node in (n for n in nodes(tree) if isinstance(n, ast.Subscript)):
            inner = node.value
            if constant(node.slice) in EPISODE_KEYS:
                good = source(inner) in from_next or (
                    isinstance(inner, ast.Subscript) and "next" in constants(inner.slice)
                )
                require(good, f"{path}:{node.lineno}: {source(node)} reads the batch root, not batch['next']")
            if isinstance(node.slice, ast.Tuple) and node.slice.elts:
                require(
                    constant(node.slice.elts[0]) not in EPISODE_KEYS,
                    f"{path}:{node.lineno}: {source(node)} reads the batch root",
                )
    return 'rewards and done flags come from ["next", ...]'


@check("RL-10", "current TorchRL spec names only (Bounded, Composite, Unbounded, ...)", "rl")
def spec_names(project: Project) -> str:
    for part in rl_parts(project):
        for path in project.code(part):
            old = names(project.tree(path)) & RENAMED_SPECS.keys()
            require(
                not old, f"{path} uses " + ", ".join(f"{n} (now {RENAMED_SPECS[n]})" for n in sorted(old))
            )
    return "no deprecated spec classes"


@check("RL-11", "an actual_updates counter averages the update metrics", "rl")
def actual_updates(project: Project) -> str:
    for part in rl_parts(project):
        path, tree = update_code(project, part)
        require(any("actual_updates" in str(c) for c in constants(tree)), f"{path}: no actual_updates metric")
        divides = [
            n
            for n in nodes(tree)
            if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Div) and "updates" in source(n.right)
        ]
        require(divides, f"{path}: update metrics are not divided by the updates really made")
    return "sums divided by the updates made, logged as actual_updates"


@check("RL-12", "isfinite(loss) before backward, isfinite(grad norm) after clipping, KL early stop", "rl")
def finite_updates(project: Project) -> str:
    for part in rl_parts(project):
        path, tree = update_code(project, part)
        finite = calls(tree, "isfinite")
        backward = calls(tree, "manual_backward") or calls(tree, "backward")
        require(backward, f"{path}: no backward pass")
        require(
            any("loss" in source(c) and c.lineno < backward[0].lineno for c in finite),
            f"{path}: isfinite(loss) is not checked before backward",
        )
        norms = {
            source(t)
            for n in nodes(tree)
            if isinstance(n, ast.Assign) and calls(n.value, "clip_grad_norm_")
            for t in n.targets
        }
        require(
            any(source(c.args[0]) in norms for c in finite if c.args),
            f"{path}: the clipped gradient norms are not checked with isfinite",
        )
        kl_stop = [
            n
            for n in nodes(tree)
            if isinstance(n, ast.If)
            and "kl" in source(n.test)
            and any(isinstance(s, ast.Break) for s in n.body)
        ]
        require(kl_stop, f"{path}: no KL early stopping (`if ...kl... > target: break`)")
    return "finite loss and gradient norms checked; KL early stopping"


@check("RL-13", "clip_grad_norm_() called for both actor and critic", "rl")
def clipping(project: Project) -> str:
    for part in rl_parts(project):
        path, tree = update_code(project, part)
        clipped = {source(c.args[0]) for c in calls(tree, "clip_grad_norm_") if c.args}
        require(
            len(clipped) >= 2,
            f"{path}: clip_grad_norm_ clips {sorted(clipped) or 'nothing'}, want actor and critic apart",
        )
    return "clip_grad_norm_ on the actor's and the critic's parameters"
