"""run.json says what produced a run: the code's commit and changes, the packages, the
machine and the data files (OUT-2)."""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

from conftest import PARTS, slow

from src.config import BaseConfig, OutputConfig
from src.runs.lifetime import start_run
from src.runs.provenance import code_state


@dataclass
class TableConfig(BaseConfig):
    data_path: str = ""


def recorded(tmp_path: Path, data_path: Path) -> dict:
    output = OutputConfig(base_dir=str(tmp_path))
    cfg = TableConfig(name="table", wandb_mode="disabled", output=output, data_path=str(data_path))
    with start_run(cfg) as run:
        pass
    return json.loads((run.dir / "run.json").read_text())


def test_run_json_records_packages_machine_and_the_data_file_s_hash(tmp_path):
    table = tmp_path / "table.csv"
    table.write_text("x,y\n1,2\n")
    first = recorded(tmp_path / "first", table)["provenance"]
    assert {"torch", "lightning", "wandb"} <= set(first["packages"])
    assert first["python"].count(".") == 2 and first["machine"]["hostname"]
    (data,) = first["data_files"]
    assert data["path"] == str(table.resolve()) and data["bytes"] == 8 and len(data["sha256"]) == 64

    table.write_text("x,y\n1,3\n")  # same size, other content
    (changed,) = recorded(tmp_path / "second", table)["provenance"]["data_files"]
    assert changed["bytes"] == 8 and changed["sha256"] != data["sha256"]


def git(repo: Path, *args: str) -> None:
    identity = ["-c", "user.name=test", "-c", "user.email=test@example.com"]
    subprocess.run(["git", *identity, *args], cwd=repo, check=True, capture_output=True)


def test_code_state_names_the_commit_and_hashes_uncommitted_changes(tmp_path):
    assert code_state(tmp_path)["git_commit"] is None  # no repository: it says why
    assert "git init" in code_state(tmp_path)["why"]
    git(tmp_path, "init", "-q")
    (tmp_path / "train.py").write_text("lr = 1e-3\n")
    git(tmp_path, "add", "-A")
    git(tmp_path, "commit", "-qm", "first")
    clean = code_state(tmp_path)
    assert len(clean["git_commit"]) == 40 and clean["git_dirty"] is False and clean["git_diff_sha256"] is None

    (tmp_path / "train.py").write_text("lr = 3e-4\n")
    edited = code_state(tmp_path)
    assert edited["git_commit"] == clean["git_commit"] and edited["git_dirty"] is True
    (tmp_path / "notes.py").write_text("")  # a new file the commit lacks changes the hash too
    assert code_state(tmp_path)["git_diff_sha256"] not in (None, edited["git_diff_sha256"])


@slow
def test_a_smoke_run_records_its_provenance_in_run_json_and_each_session(smoke_runs):
    run_dir, _ = smoke_runs(next(iter(PARTS)))
    record = json.loads((run_dir / "run.json").read_text())
    assert set(record["provenance"]) == {"code", "python", "packages", "machine", "data_files"}
    assert "git_commit" in record["history"][-1]  # each session's code: a resume may run changed code
