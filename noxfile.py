#!/usr/bin/env python3
# /// script
# dependencies = ["nox>=2025.2.9"]
# ///
"""Sessions for working on the template: nox -s tests | lint | variant | examples | demo | fmt |
bench | race | gpu_check."""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import tomllib
from pathlib import Path

import nox

ROOT = Path(__file__).parent
CONSTRAINTS = ROOT / "template" / "constraints.txt"  # the one file that pins tested versions
TOOLS = ["copier", "pytest-copie", "pytest", "pytest-xdist", "ruff", "pyyaml", "pre-commit-hooks"]
# What a rendered project needs; versions come from the constraints file.
PROJECT_DEPS = [
    "lightning",
    "torchmetrics",
    "torchdata",
    "wandb",
    "tensorboard",
    "tyro",
    "numpy",
    "pandas",
    "pandera",
    "scikit-learn",
    "psutil",
    "nvidia-ml-py",
    "rich",
    "xgboost-cpu",  # the CPU-only build: no NCCL download in CI (xgboost on a GPU machine)
    "matplotlib",
    "torchrl",
    "tensordict",
    "gymnasium",
    "optuna",
    "dask[distributed,dataframe]",  # the tree part's --cluster
]

# Every part kind the template renders today, and the folder each gets when all are chosen.
ALL_PARTS = '["sl_neural", "sl_tree", "rl"]'
PART_DIRS = {"{{sl_neural_dir}}": "part1", "{{sl_tree_dir}}": "part2", "{{rl_dir}}": "part3"}
RL_ALONE_PART = "part1"  # the RL part's folder in a project of it alone


nox.needs_version = ">=2025.2.9"  # @nox.session(default=...)
nox.options.default_venv_backend = "virtualenv"  # nox's own default, said once
nox.options.reuse_existing_virtualenvs = True


def install(session: nox.Session, *packages: str) -> None:
    # torch first and alone: an unpinned torch anywhere pulls the newest CUDA build.
    # TORCH_INDEX_URL (set by CI's CPU jobs) picks a CPU-only build of the pinned version.
    index = ["--index-url", os.environ["TORCH_INDEX_URL"]] if os.environ.get("TORCH_INDEX_URL") else []
    session.install("-c", str(CONSTRAINTS), *index, "torch")
    session.install("-c", str(CONSTRAINTS), *packages)


@nox.session
def tests(session: nox.Session) -> None:
    """Render every variant, lint it, smoke-train it and run its own tests."""
    # On a machine with an NVIDIA GPU (CI's gpu job), XGBoost's CUDA build, so that the tree
    # part's GPU test trains there: a rendered project's cuda extra.
    gpu = shutil.which("nvidia-smi") is not None
    install(session, *TOOLS, *(("xgboost" if gpu and dep == "xgboost-cpu" else dep) for dep in PROJECT_DEPS))
    session.run("pytest", *session.posargs)


@nox.session(default=False)
def min_copier(session: nox.Session) -> None:
    """The render tests on the oldest copier that copier.yml allows (_min_copier_version),
    every other tool at its tested version."""
    oldest = re.search(r'^_min_copier_version: "(.+)"$', (ROOT / "copier.yml").read_text(), re.M)[1]
    pins = [line for line in CONSTRAINTS.read_text().splitlines() if not line.startswith("copier==")]
    constraints = Path(session.create_tmp()) / "constraints.txt"
    constraints.write_text("\n".join(pins) + "\n")
    session.install("-c", str(constraints), f"copier=={oldest}", "pytest-copie", "pytest", "ruff", "pyyaml")
    session.run("pytest", "tests/test_render.py", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    """Ruff on the template's own Python and on the default rendered project."""
    session.install("-c", str(CONSTRAINTS), "ruff", "copier")
    session.run("ruff", "check", "noxfile.py", "tests", "examples/render.py", "migrations")
    session.run("ruff", "format", "--check", "noxfile.py", "tests", "examples/render.py", "migrations")
    # Rendered outside the repo, whose .gitignore would hide files from ruff.
    project = render(session, Path(tempfile.mkdtemp()) / "lint", ALL_PARTS, sweep=True)
    session.run("ruff", "check", "--no-cache", str(project))
    session.run("ruff", "format", "--check", "--no-cache", str(project))


@nox.session(default=False)
def variant(session: nox.Session) -> None:
    """One variant end to end, as CI's matrix runs it: nox -s variant -- sl_neural+rl-sweep.
    Renders it, installs it as its README says, lints it, smoke-trains each part and runs
    its own test suite."""
    if len(session.posargs) != 1 or not re.fullmatch(r"[a-z_]+(\+[a-z_]+)*(-sweep)?", session.posargs[0]):
        session.error(
            "give one variant, its part kinds joined by '+' and '-sweep' for sweeps: sl_tree+rl-sweep"
        )
    kinds, sweep = session.posargs[0].removesuffix("-sweep").split("+"), session.posargs[0].endswith("-sweep")
    install(session, "copier", "ruff", "pytest", "pytest-xdist")
    project = render(session, Path(tempfile.mkdtemp()) / "variant", json.dumps(kinds), sweep=sweep)
    session.install("-c", str(CONSTRAINTS), f"{project}[{extras(kinds)}]")
    session.chdir(project)
    session.run("ruff", "check", "--no-cache", ".")
    session.run("ruff", "format", "--check", "--no-cache", ".")
    for number in range(1, len(kinds) + 1):
        session.run("python", "-m", f"part{number}.train", "--config", "smoke", env={"WANDB_MODE": "offline"})
    session.run("python", "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "auto")


@nox.session(default=False)
def examples(session: nox.Session) -> None:
    """Render examples/NAME/ again from each examples/NAME.yml (tests/test_examples.py checks them)."""
    session.install("-c", str(CONSTRAINTS), "copier", "pyyaml")
    session.run("python", str(ROOT / "examples" / "render.py"))


@nox.session(default=False)
def demo(session: nox.Session) -> None:
    """Render the default project into build/demo, install it and smoke-train it."""
    install(session, "copier")
    project = render(session, ROOT / "build" / "demo")
    session.install("-c", str(CONSTRAINTS), f"{project}[dev]")
    session.chdir(project)
    session.run("python", "-m", "part1.train", "--config", "smoke", env={"WANDB_MODE": "offline"})


@nox.session(default=False)
def bench(session: nox.Session) -> None:
    """Render every part into build/bench, install it and run the part benchmarks on it
    (benchmarks/sl_neural_epochs.py on the bundled table and on 20k and 200k rows;
    benchmarks/sl_tree_rounds.py with W&B off and offline, on the bundled table and 50
    times its rows, and a whole run against a bare script; benchmarks/tree_dask.py, a
    1,000,000-row table on a local Dask cluster against one process; benchmarks/rl_frames.py), then
    start-up and smoke walls (benchmarks/startup.py) and the CartPole and Pendulum races
    against stable-baselines3 (see race), the RL start-up and the races on the RL part rendered
    alone (build/race); figures land in build/bench/*.json. Not part of CI: the
    figures need a quiet machine. `nox -s bench -- --no-race` skips the race."""
    install(session, "copier")
    project = render(session, ROOT / "build" / "bench" / "project", ALL_PARTS)
    session.install("-c", str(CONSTRAINTS), f"{project}[{extras(json.loads(ALL_PARTS))}]")
    results = ROOT / "build" / "bench"
    neural, tree, rl = (PART_DIRS[name] for name in ("{{sl_neural_dir}}", "{{sl_tree_dir}}", "{{rl_dir}}"))
    tree_rows_x50 = ["--scale", "50", "--repeats", "7", "--end-to-end-repeats", "0"]
    runs = {  # the JSON file's name: the benchmark, the arguments
        neural: ("sl_neural_epochs", []),
        f"{neural}-rows-x11": ("sl_neural_epochs", ["--scale", "11", "--repeats", "3"]),
        f"{neural}-rows-x110": ("sl_neural_epochs", ["--scale", "110", "--repeats", "2", "--epochs", "3"]),
        tree: ("sl_tree_rounds", []),
        f"{tree}-wandb": ("sl_tree_rounds", ["--with-wandb", "--end-to-end-repeats", "0"]),
        f"{tree}-rows-x50": ("sl_tree_rounds", tree_rows_x50),
        f"{tree}-rows-x50-wandb": ("sl_tree_rounds", [*tree_rows_x50, "--with-wandb"]),
        f"{tree}-dask": ("tree_dask", []),
        rl: ("rl_frames", []),
    }
    for name, (benchmark, arguments) in runs.items():
        script, figures = ROOT / "benchmarks" / f"{benchmark}.py", f"{results / name}.json"
        with session.chdir(project):  # where the part's own commands run
            session.run("python", str(script), "--project", ".", *arguments, "--json", figures)
    python = session.virtualenv.bin + "/python"
    startup = ["--project", str(project), "--python", python, "--json", str(results / "startup.json")]
    session.run("python", str(ROOT / "benchmarks" / "startup.py"), *startup)
    # The RL part again, rendered alone and installed as its user would: no table libraries.
    rl_project, rl_python = rl_alone(session)
    startup = ["--project", str(rl_project), "--python", str(rl_python), "--parts", RL_ALONE_PART]
    startup += ["--json", str(results / "startup-rl-alone.json")]
    session.run("python", str(ROOT / "benchmarks" / "startup.py"), *startup)
    if "--no-race" not in session.posargs:
        _race(session, rl_project, rl_python, results, [])


@nox.session(default=False)
def race(session: nox.Session) -> None:
    """Time to solve CartPole-v1, then Pendulum-v1 (-250 within 300k frames): the RL part
    against stable-baselines3 PPO (RL-Zoo's tuned hyperparameters), whole processes, five
    seeds each (benchmarks/rl_race.py), on the RL part rendered alone (build/race) in a venv
    of its own; `nox -s race -- --seeds 0 1 2` runs fewer."""
    session.install("-c", str(CONSTRAINTS), "copier")  # the race's processes run in venvs of their own
    _race(session, *rl_alone(session), ROOT / "build" / "bench", session.posargs)


def venv(session: nox.Session, name: str, *packages: str) -> Path:
    """The python of a venv of the session's own (`name`), torch installed first, then `packages`."""
    folder = Path(session.create_tmp()).resolve() / name  # absolute: the benchmarks run elsewhere
    if not (folder / "bin" / "python").exists():
        session.run("python", "-m", "venv", str(folder))
    pip = [str(folder / "bin" / "python"), "-m", "pip", "install", "-q", "-c", str(CONSTRAINTS)]
    index = ["--index-url", os.environ["TORCH_INDEX_URL"]] if os.environ.get("TORCH_INDEX_URL") else []
    session.run(*pip, *index, "torch", external=True)  # as install() does
    session.run(*pip, *packages, external=True)
    return folder / "bin" / "python"


def rl_alone(session: nox.Session) -> tuple[Path, Path]:
    """The RL part rendered alone into build/race/project, installed in a venv of its own as its
    user's would be: without scikit-learn's scipy, which torchmetrics imports at start if present."""
    project = render(session, ROOT / "build" / "race" / "project", '["rl"]')
    return project, venv(session, "rl-venv", f"{project}[{extras(['rl'])}]")


def _race(session: nox.Session, project: Path, python: Path, results: Path, options: list[str]) -> None:
    """The races of rl_alone's `project`, run by its `python`, against SB3, into `results`."""
    results.mkdir(parents=True, exist_ok=True)
    # Pinned here, not in the constraints file every project gets: only this race uses it.
    sb3 = venv(session, "sb3-venv", "stable-baselines3==2.9.2", "gymnasium")
    pythons = ["--project-python", str(python), "--sb3-python", str(sb3), "--part", RL_ALONE_PART]
    for env, name in (("CartPole-v1", "race"), ("Pendulum-v1", "race-pendulum")):
        session.run(
            "python",
            str(ROOT / "benchmarks" / "rl_race.py"),
            "--project",
            str(project),
            *pythons,
            "--env",
            env,
            "--json",
            str(results / f"{name}.json"),
            *options,
        )


# What the GPU machines `gpu_check` was written for already hold: Python 3.12 with torch 2.11,
# Lightning 2.6.6 and a scientific Python stack, with no network (their `pip list`, names
# only). `nox -s gpu_check -- --has FILE` reads another machine's `pip list --format freeze`.
GPU_MACHINE_HAS = """
    absl-py accelerate aiofiles aiohappyeyeballs aiohttp aiosignal annotated-doc anyio attrs botorch
    build certifi charset-normalizer chex click cloudpickle cmake colorama contourpy coverage
    cuda-bindings cuda-core cuda-pathfinder cuda-toolkit cupy-cuda13x cycler cython diffrax e3nn
    einops equinox etils execnet filelock flatbuffers flax fonttools formulaic frozenlist fsspec
    gpytorch grpcio h11 h5py hf-xet httpcore httpx huggingface-hub humanize hypothesis idna imageio
    iniconfig interface-meta jax jax-cuda13-pjrt jax-cuda13-plugin jaxlib jaxtyping jinja2 joblib
    kiwisolver lazy-loader lightning lightning-utilities linear-operator lineax llvmlite lxml
    markdown markdown-it-py markupsafe matplotlib mdurl meson ml-dtypes mpi4py mpmath msgpack
    multidict multipledispatch mypy-extensions nanobind narwhals networkx ninja numba numba-cuda
    numpy numpyro nvidia-cublas nvidia-cuda-cupti nvidia-cuda-nvrtc nvidia-cuda-runtime
    nvidia-cudnn-cu13 nvidia-cufft nvidia-cufile nvidia-curand nvidia-cusolver nvidia-cusparse
    nvidia-cusparselt-cu13 nvidia-ml-py nvidia-nccl-cu13 nvidia-nvjitlink nvidia-nvshmem-cu13
    nvidia-nvtx onnx onnx-ir onnxruntime onnxscript opencv-python-headless optax opt-einsum
    opt-einsum-fx optimistix orbax-checkpoint packaging pandas pathspec patsy peft pillow pip
    pluggy portalocker prometheus-client propcache protobuf psutil pyarrow pybind11 py-cpuinfo
    pygments pyparsing pyproject-hooks pyre-extensions pytest pytest-benchmark pytest-cov
    pytest-mock pytest-timeout pytest-xdist python-dateutil pytorch-lightning pyyaml regex
    requests rich sacrebleu safetensors scikit-build-core scikit-image scikit-learn scipy seaborn
    sentencepiece sentence-transformers setuptools shellingham simplejson six sortedcontainers
    statsmodels sympy tabulate tensorboard tensorboard-data-server tensorstore threadpoolctl
    tifffile tiktoken timm tokenizers toolz torch torchaudio torchdiffeq torch-geometric
    torchmetrics torchvision tqdm transformers treescope triton typer typing-extensions
    typing-inspect urllib3 uvloop wadler-lindig werkzeug wheel wrapt xarray xxhash yarl zipp
"""
# What may travel to such a machine with the check: the folder, the template's files beside it.
GPU_CHECK_LIMIT_MIB = 60
# pip's tags for the wheels a Linux x86-64 machine with glibc 2.39 (Ubuntu 24.04) takes: pip
# matches each tag exactly, and wheels name any from manylinux1 to manylinux_2_39.
LINUX_X86_64 = [
    f"--platform={tag}_x86_64"
    for tag in (*(f"manylinux_2_{minor}" for minor in range(39, 4, -1)), "manylinux2014", "manylinux1")
]


@nox.session(default=False)
def gpu_check(session: nox.Session) -> None:
    """Prepare build/gpu_check for a GPU machine with no network, Python 3.12, torch and
    Lightning: a project rendered with every part kind and sweeps, the wheels of what its
    tests and training need beyond what the machine has (GPU_MACHINE_HAS, or `-- --has FILE`:
    that machine's `pip list --format freeze`; `--python-version 3.11` for another Python),
    gpu_throughput.py, tree_gpu_resume.py and run.sh. Then, there, `bash build/gpu_check/run.sh
    OUT` installs the wheels offline, runs the project's gpu-marked tests and prints the neural
    part's rows/s in bf16-mixed and 32-true and the RL part's frames/s, then the rest of the
    project's suite (at most 590 s of limits, about 7 minutes on one H200). The tree part
    trains with xgboost-cpu there: XGBoost's CUDA build (130 MB) does not fit the folder, so
    its GPU test is skipped, and so is tree_gpu_resume.py, unless XGBoost's CUDA wheel
    replaces xgboost-cpu's in build/gpu_check/wheels/ before run.sh runs."""
    options = dict(zip(session.posargs[::2], session.posargs[1::2], strict=False))
    if unknown := set(options) - {"--has", "--python-version"}:
        session.error(f"unknown option {', '.join(unknown)}: give --has FILE and --python-version X.Y")
    has = set(GPU_MACHINE_HAS.split())
    if "--has" in options:
        listing = Path(options["--has"]).read_text().splitlines()
        has = {line.split("==")[0].strip() for line in listing if "==" in line}
    has = {canonical(name) for name in has}
    python_version = options.get("--python-version", "3.12")
    session.install("-c", str(CONSTRAINTS), "copier")
    folder = ROOT / "build" / "gpu_check"
    shutil.rmtree(folder, ignore_errors=True)
    project = render(session, folder / "project", ALL_PARTS, sweep=True)
    # What the project needs with the CPU-only build of XGBoost (the cpu extra) and Dask (the
    # distributed extra, so that the whole tree suite runs there too), resolved for the
    # machine's Python on Linux at the tested versions; pytest the machine has.
    pyproject = tomllib.loads((project / "pyproject.toml").read_text())["project"]
    extras = pyproject["optional-dependencies"]
    requirements = [*pyproject["dependencies"], *extras["cpu"], *extras["distributed"]]
    report = Path(session.create_tmp()) / "resolved.json"
    binary = [
        "--only-binary=:all:",
        f"--python-version={python_version}",
        "--implementation=cp",
        *LINUX_X86_64,
    ]
    session.run(
        "python", "-m", "pip", "install", "--quiet", "--dry-run", "--ignore-installed", f"--report={report}",
        f"--target={session.create_tmp()}/unused", *binary, "-c", str(CONSTRAINTS), *requirements,
    )  # fmt: skip
    resolved = {
        canonical(item["metadata"]["name"]): item["metadata"]["version"]
        for item in json.loads(report.read_text())["install"]
    }
    missing = sorted(f"{name}=={version}" for name, version in resolved.items() if name not in has)
    session.log(f"the machine lacks {len(missing)} packages: {' '.join(missing)}")
    wheels = folder / "wheels"
    session.run(
        "python", "-m", "pip", "download", "--quiet", "--no-deps", *binary, f"--dest={wheels}", *missing
    )
    for name in ("gpu_throughput.py", "harness.py", "tree_gpu_resume.py"):
        shutil.copyfile(ROOT / "benchmarks" / name, folder / name)
    shutil.copyfile(ROOT / "benchmarks" / "gpu_check_run.sh", folder / "run.sh")
    sizes = {path: path.stat().st_size for path in folder.rglob("*") if path.is_file()}
    mib = sum(sizes.values()) / 2**20
    largest = ", ".join(
        f"{p.name} {n / 2**20:.1f} MiB" for p, n in sorted(sizes.items(), key=lambda x: -x[1])[:5]
    )
    if mib > GPU_CHECK_LIMIT_MIB:
        session.error(f"{folder} holds {mib:.1f} MiB, over {GPU_CHECK_LIMIT_MIB} MiB; largest: {largest}")
    session.log(f"{folder}: {mib:.1f} MiB ({largest}). On the GPU machine: bash build/gpu_check/run.sh OUT")


def canonical(name: str) -> str:
    """A distribution's name as pip compares them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


@nox.session(default=False)
def fmt(session: nox.Session) -> None:
    """Format the template: render, let ruff fix the result, copy fixes back to plain
    .py sources. Changes to .jinja files are only reported."""
    session.install("-c", str(CONSTRAINTS), "ruff", "copier")
    project = render(session, Path(tempfile.mkdtemp()) / "fmt", ALL_PARTS, sweep=True)
    session.run("ruff", "check", "--fix", "--no-cache", "-q", str(project), success_codes=[0, 1])
    session.run("ruff", "format", "--no-cache", "-q", str(project))
    for source in (ROOT / "template").rglob("*"):
        rendered = project / rendered_path(source.relative_to(ROOT / "template"))
        if rendered.suffix != ".py" or source.suffix == ".jinja" or not rendered.is_file():
            continue
        if rendered.read_text() != source.read_text():
            shutil.copyfile(rendered, source)
            session.log(f"formatted {source.relative_to(ROOT)}")
    for source in (ROOT / "template").rglob("*.py.jinja"):
        session.log(f"check by hand: {source.relative_to(ROOT)} (ruff check {project})")


def extras(kinds: list[str]) -> str:
    """The extras a rendered project installs with on a CPU machine, as its README says: a
    tree part's XGBoost is the cpu extra (xgboost-cpu: no NCCL download)."""
    return "dev,cpu" if "sl_tree" in kinds else "dev"


def render(session: nox.Session, destination: Path, parts: str = "", sweep: bool = False) -> Path:
    """Render with the default answers, and the given parts (JSON list) and sweep if any."""
    if destination.exists():
        shutil.rmtree(destination)
    data = ["--data", f"parts={parts}"] if parts else []
    data += ["--data", "sweep=true"] if sweep else []
    session.run(
        "copier", "copy", "--vcs-ref", "HEAD", "--defaults", "--quiet", *data, str(ROOT), str(destination)
    )
    return destination


def rendered_path(path: Path) -> Path:
    """A template source's path in the project rendered with ALL_PARTS."""
    text = re.sub(r"\{% if [^%]*%\}(.*?)\{% endif %\}", r"\1", str(path))
    for variable, folder in PART_DIRS.items():
        text = text.replace(variable, folder)
    return Path(text)


if __name__ == "__main__":
    nox.main()
