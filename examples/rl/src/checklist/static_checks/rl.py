"""Static checks of the TorchRL part (RL)."""

from __future__ import annotations

import ast

from src.checklist.layout import Part, Project
from src.checklist.registry import check
from src.checklist.static_checks.common import datamodule, main_with_config, never_named, one_call, require
from src.checklist.syntax import (
    calls,
    constant,
    constants,
    keyword,
    methods,
    name_of,
    names,
    nodes,
    source,
    subclasses,
)

DEPRECATED_SPECS = {  # RL-10: the old names and their current replacements
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

# RL: TorchRL


def rl_part(project: Project) -> Part:
    part = project.part("rl")
    require(part, "no RL part")
    return part


def rl_files(project: Project) -> list[str]:
    part = rl_part(project)
    return [str(p.relative_to(project.root)) for p in sorted((project.root / part.name).glob("*.py"))]


@check("RL-1", "ParallelEnv(num_workers=cfg.num_envs), never SerialEnv", "rl")
def parallel_env(project: Project) -> str:
    for path in rl_files(project):
        if not path.endswith("/benchmark.py"):  # which measures ParallelEnv against SerialEnv
            require("SerialEnv" not in names(project.tree(path)), f"{path} uses SerialEnv")
    path = f"{rl_part(project).name}/data.py"
    env = one_call(project.tree(path), "ParallelEnv", path)
    workers = keyword(env, "num_workers") or (env.args[0] if env.args else None)
    require(
        source(workers).endswith("num_envs"),
        f"{path}: ParallelEnv's num_workers is {source(workers)!r}, not cfg.num_envs",
    )
    return "ParallelEnv(cfg.num_envs, ...)"


@check("RL-2", "the env factory is picklable: a module-level function or functools.partial", "rl")
def picklable_factory(project: Project) -> str:
    path = f"{rl_part(project).name}/data.py"
    tree = project.tree(path)
    env = one_call(tree, "ParallelEnv", path)
    factory = keyword(env, "create_env_fn") or (env.args[1] if len(env.args) > 1 else None)
    top = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    imported = {a.asname or a.name for n in tree.body if isinstance(n, ast.ImportFrom) for a in n.names}
    if isinstance(factory, ast.Call) and name_of(factory) == "partial":
        factory = factory.args[0] if factory.args else None
    require(
        isinstance(factory, ast.Name) and factory.id in top | imported,
        f"{path}: ParallelEnv's factory {source(factory)!r} is not a module-level function",
    )
    return f"ParallelEnv's factory is the module-level {factory.id}"


@check("RL-3", "env.close() on every exit path (no zombie workers)", "rl")
def env_closed(project: Project) -> str:
    part = rl_part(project)
    body = main_with_config(project, part)
    closing = [
        t for t in nodes(body) if isinstance(t, ast.Try) and any(calls(s, "close") for s in t.finalbody)
    ]
    require(closing, f"{part.name}/train.py: main_with_config() closes the environments in no `finally:`")
    cls = datamodule(project, part)
    teardown = methods(cls).get("teardown")
    require(
        teardown and calls(teardown, "close"),
        f"{part.name}/data.py: {cls.name}.teardown() does not close the envs",
    )
    close = methods(cls).get("close")
    require(
        close and calls(close, "close") and calls(close, "shutdown"),
        f"{part.name}/data.py: {cls.name}.close() does not shut the collector and close the envs",
    )
    return "closed in teardown() and in train.py's finally:"


@check("RL-4", "RewardSum() appended so episode rewards are tracked", "rl")
def reward_sum(project: Project) -> str:
    path = f"{rl_part(project).name}/data.py"
    require(calls(project.tree(path), "RewardSum"), f"{path}: no RewardSum() transform")
    return "RewardSum() on the environments"


def custom_envs(project: Project) -> list[tuple[str, ast.ClassDef]]:
    return [(path, cls) for path in rl_files(project) for cls in subclasses(project.tree(path), "EnvBase")]


def emitted_keys(cls: ast.ClassDef) -> set[str]:
    """Keys of the TensorDicts (dict literals) a custom env builds in its methods."""
    keys = set()
    for call in calls(cls, "TensorDict"):
        if call.args and isinstance(call.args[0], ast.Dict):
            keys |= {constant(k) for k in call.args[0].keys if isinstance(constant(k), str)}
    return keys


def spec_keys(cls: ast.ClassDef, spec: str) -> set[str]:
    for node in nodes(cls):
        assigned = isinstance(node, ast.Assign) and any(name_of(t) == spec for t in node.targets)
        if assigned and isinstance(node.value, ast.Call):
            return {kw.arg for kw in node.value.keywords if kw.arg}
    return set()


@check("RL-5", "every field a custom env emits has a spec (diagnostics: Unbounded)", "rl")
def diagnostic_specs(project: Project) -> str:
    envs = custom_envs(project)
    if not envs:
        return "no custom env (gymnasium envs bring their own specs)"
    for path, cls in envs:
        extra = emitted_keys(cls) - {"done", "terminated", "truncated", "reward"}
        missing = extra - spec_keys(cls, "observation_spec")
        require(
            not missing,
            f"{path}: {cls.name} emits {', '.join(sorted(missing))} without an observation_spec entry",
        )
    return f"{len(envs)} custom env(s): every emitted field is in observation_spec"


@check("RL-6", "step_and_maybe_reset(), not step() plus a manual step_mdp()", "rl")
def no_step_mdp(project: Project) -> str:
    never_named(project, rl_files(project), "step_mdp", "use env.step_and_maybe_reset()")
    return "no manual step_mdp() (the collector steps with step_and_maybe_reset)"


@check("RL-7", "a custom env's device is a torch.device", "rl")
def env_device(project: Project) -> str:
    envs = custom_envs(project)
    for path, cls in envs:
        init = methods(cls).get("__init__")
        supers = [c for c in calls(init, "__init__")] if init else []
        device = keyword(supers[0], "device") if supers else None
        require(
            name_of(device) == "device" and isinstance(device, ast.Call),
            f"{path}: {cls.name} passes device={source(device)!r}, not torch.device(...)",
        )
    return f"{len(envs)} custom env(s) built on torch.device"


THREAD_VARIABLES = {"OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "OMP_NUM_THREADS"}


@check("RL-8", "thread variables set with os.environ.setdefault before numpy/torch imports", "rl")
def thread_variables(project: Project) -> str:
    part = rl_part(project)
    for name in ("__init__.py", "train.py"):
        path = f"{part.name}/{name}"
        seen: set[str] = set()
        for node in project.tree(path).body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                module = node.module if isinstance(node, ast.ImportFrom) else node.names[0].name
                if module not in {"os", "__future__"}:
                    break
            for call in calls(node, "setdefault"):
                if (
                    call.args
                    and constant(call.args[0]) in THREAD_VARIABLES
                    and constant(call.args[1] if len(call.args) > 1 else None) == "1"
                ):
                    seen.add(constant(call.args[0]))
        missing = THREAD_VARIABLES - seen
        require(
            not missing, f"{path}: {', '.join(sorted(missing))} not set to 1 before the first other import"
        )
    return "thread variables set before any other import in __init__.py and train.py"


EPISODE_KEYS = {"reward", "done", "terminated", "truncated", "episode_reward"}


@check("RL-9", 'rewards and done flags read from batch["next"]', "rl")
def next_keys(project: Project) -> str:
    path = f"{rl_part(project).name}/model.py"
    tree = project.tree(path)
    # Names bound to a step's result, e.g. `final = episode["next"][-1]`.
    from_next = {
        source(target)
        for node in nodes(tree)
        if isinstance(node, ast.Assign) and "next" in constants(node.value)
        for target in node.targets
    }
    for node in nodes(tree):
        if isinstance(node, ast.Subscript) and constant(node.slice) in EPISODE_KEYS:
            inner = node.value
            read_from_next = source(inner) in from_next or (
                isinstance(inner, ast.Subscript) and "next" in constants(inner.slice)
            )
            require(
                read_from_next,
                f"{path}:{node.lineno}: {source(node)} reads the batch root, not batch['next']",
            )
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Tuple) and node.slice.elts:
            first = constant(node.slice.elts[0])
            require(
                first != "reward" and first not in EPISODE_KEYS,
                f"{path}:{node.lineno}: {source(node)} reads the batch root",
            )
    return 'rewards and done flags come from ["next", ...]'


@check("RL-10", "current TorchRL spec names only (Bounded, Composite, Unbounded, ...)", "rl")
def spec_names(project: Project) -> str:
    for path in rl_files(project):
        old = names(project.tree(path)) & DEPRECATED_SPECS.keys()
        require(not old, f"{path} uses " + ", ".join(f"{n} (now {DEPRECATED_SPECS[n]})" for n in sorted(old)))
    return "no deprecated spec classes"


@check("RL-11", "an actual_updates counter averages the update metrics", "rl")
def actual_updates(project: Project) -> str:
    path = f"{rl_part(project).name}/model.py"
    tree = project.tree(path)
    strings = {constant(n) for n in nodes(tree) if isinstance(constant(n), str)}
    require(any("actual_updates" in s for s in strings), f"{path}: no actual_updates metric")
    divides = [
        n
        for n in nodes(tree)
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Div) and "updates" in source(n.right)
    ]
    require(divides, f"{path}: update metrics are not divided by the updates really made")
    return "sums divided by the updates made, logged as batch/actual_updates"


@check("RL-12", "isfinite(loss) before backward, isfinite(grad norm) after clipping, KL early stop", "rl")
def finite_updates(project: Project) -> str:
    path = f"{rl_part(project).name}/model.py"
    tree = project.tree(path)
    checks = calls(tree, "isfinite")
    backward = calls(tree, "manual_backward") or calls(tree, "backward")
    require(backward, f"{path}: no backward pass")
    require(
        any("loss" in source(c) and c.lineno < backward[0].lineno for c in checks),
        f"{path}: isfinite(loss) is not checked before backward",
    )
    norms = {
        source(t)
        for n in nodes(tree)
        if isinstance(n, ast.Assign) and calls(n.value, "clip_grad_norm_")
        for t in n.targets
    }
    require(
        any(source(c.args[0]) in norms for c in checks if c.args),
        f"{path}: the clipped gradient norms are not checked with isfinite",
    )
    kl_stop = [
        n
        for n in nodes(tree)
        if isinstance(n, ast.If) and "kl" in source(n.test) and any(isinstance(s, ast.Break) for s in n.body)
    ]
    require(kl_stop, f"{path}: no KL early stopping (`if ...kl... > target: break`)")
    return "finite loss and gradient norms checked; KL early stopping"


@check("RL-13", "clip_grad_norm_() called for both actor and critic", "rl")
def clipping(project: Project) -> str:
    path = f"{rl_part(project).name}/model.py"
    clipped = {source(c.args[0]) for c in calls(project.tree(path), "clip_grad_norm_") if c.args}
    require(
        len(clipped) >= 2,
        f"{path}: clip_grad_norm_ clips {sorted(clipped) or 'nothing'}, want actor and critic separately",
    )
    return "clip_grad_norm_ on " + ", ".join(sorted(clipped))
