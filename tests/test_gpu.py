"""bf16 on a real GPU: the rendered project's gpu-marked tests, where CUDA exists."""

from __future__ import annotations

import pytest
import torch
from conftest import run

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (none here)"),
]


def test_rendered_gpu_tests_pass_in_bf16(project):
    result = run(
        [project.python, "-m", "pytest", "-m", "gpu", "-v", "-p", "no:cacheprovider"],
        project.dir,
    )
    print(result.stdout[-3000:])
    assert result.returncode == 0, result.stdout[-5000:]
    assert "passed" in result.stdout and "skipped" not in result.stdout.split("short test summary")[-1]
