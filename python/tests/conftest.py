"""Shared fixtures: resolved scenarios from the c10dsim binary, and runs of the interpreter
against the fake torch (python/tests/fake_torch) in a subprocess, as torchrun would start it."""

import json
import os
import pathlib
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
FAKE_TORCH = REPO / "python" / "tests" / "fake_torch"
# The package under test, importable from any working directory.
sys.path.insert(0, str(REPO / "python"))


def binary():
    path = os.environ.get("C10DSIM_BIN")
    if path:
        return pathlib.Path(path)
    target = pathlib.Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
    for profile in ("debug", "release"):
        candidate = target / profile / "c10dsim"
        if candidate.is_file():
            return candidate
    return None


@pytest.fixture
def resolve(tmp_path):
    """resolve(name or path.toml, *sets) -> (path of the resolved JSON, the scenario as a dict)."""
    exe = binary()
    if exe is None:
        pytest.skip("no c10dsim binary (target/debug/c10dsim): run `cargo build` first; "
                    ".ci/run does")

    def run(name, *sets):
        """`name` names a catalogue scenario, or is a path to a .toml file."""
        source = (pathlib.Path(name) if name.endswith(".toml")
                  else REPO / "scenarios" / (name + ".toml"))
        name = source.stem
        args = [str(exe), "resolve", str(source), "--json"]
        for value in sets:
            args += ["--set", value]
        text = subprocess.run(args, check=True, capture_output=True, text=True,
                              cwd=REPO).stdout
        path = tmp_path / (name + ".json")
        path.write_text(text)
        return path, json.loads(text)

    return run


@pytest.fixture
def interpret(tmp_path):
    """interpret(scenario_path, env=...) -> (exit status, Timeline dict or None, calls)."""

    def run(scenario_path, env=None, world=1):
        out = tmp_path / "out"
        out.mkdir(exist_ok=True)
        log = tmp_path / "calls.jsonl"
        if log.exists():
            log.unlink()
        environ = dict(os.environ)
        environ.update(env or {})
        environ["PYTHONPATH"] = os.pathsep.join([str(REPO / "python"), str(FAKE_TORCH)])
        environ["FAKE_TORCH_LOG"] = str(log)
        environ.update(RANK="0", WORLD_SIZE=str(world), LOCAL_RANK="0")
        completed = subprocess.run(
            [sys.executable, "-m", "c10dsim.torch", str(scenario_path), "--out", str(out)],
            env=environ, capture_output=True, text=True, timeout=120)
        timeline_path = out / "rank0.json"
        document = json.loads(timeline_path.read_text()) if timeline_path.exists() else None
        calls = [json.loads(line) for line in log.read_text().splitlines()] \
            if log.exists() else []
        return completed, document, calls

    return run
