"""The interpreter under real PyTorch on a GPU, where there is one: `c10dsim torch` on a short
experiment B. Skipped, saying why, without torch or a GPU (CI has neither)."""

import importlib.util
import json
import os
import subprocess

import pytest

from conftest import REPO, binary


def real_torch_with_gpu():
    if importlib.util.find_spec("torch") is None:
        return "PyTorch is not installed for this Python"
    import torch

    if not torch.cuda.is_available():
        return "PyTorch sees no CUDA GPU"
    return None


def test_experiment_b_runs_under_real_pytorch(tmp_path):
    missing = real_torch_with_gpu()
    if missing:
        pytest.skip(missing)
    exe = binary()
    if exe is None:
        pytest.skip("no c10dsim binary: run `cargo build` first")
    out = tmp_path / "exp_b.json"
    environ = dict(os.environ, PYTHONPATH=str(REPO / "python"))
    completed = subprocess.run(
        [str(exe), "torch", "scenarios/exp_b_stream_scope.toml", "--set", "repeat=2",
         "--set", "warmup=1", "--nproc", "1", "--timeline", str(out)],
        cwd=REPO, env=environ, capture_output=True, text=True, timeout=600)
    assert completed.returncode == 0, completed.stderr
    document = json.loads(out.read_text())
    assert document["source"] == "torch"
    (rank,) = document["ranks"]
    # One all_reduce per iteration (repeat = 2, the warm-up one among them), and the marks.
    assert len(rank["collectives"]) == 2 and rank["marks"]
