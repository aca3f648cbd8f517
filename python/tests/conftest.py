"""Shared fixtures: resolved scenarios and simulated Timelines from the c10dsim binary, and runs
of the interpreter against the fake torch (python/tests/fake_torch) in a subprocess, as torchrun
would start it."""

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


def required_binary():
    exe = binary()
    if exe is None:
        pytest.skip("no c10dsim binary (target/debug/c10dsim): run `cargo build` first; "
                    ".ci/run does")
    return exe


def scenario_source(name):
    """`name` names a catalogue scenario, or is a path to a .toml file."""
    return (pathlib.Path(name) if name.endswith(".toml")
            else REPO / "scenarios" / (name + ".toml"))


@pytest.fixture
def resolve(tmp_path):
    """resolve(name or path.toml, *sets) -> (path of the resolved JSON, the scenario as a dict)."""
    exe = required_binary()

    def run(name, *sets):
        source = scenario_source(name)
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
def simulate():
    """simulate(name or path.toml, *sets) -> the simulator's Timeline of the scenario as `resolve`
    resolves it (`c10dsim run … --timeline -`)."""
    exe = required_binary()

    def run(name, *sets):
        args = [str(exe), "run", str(scenario_source(name)), "--timeline", "-"]
        for value in sets:
            args += ["--set", value]
        # Exit 1 is a run with findings: its Timeline is on stdout all the same.
        completed = subprocess.run(args, capture_output=True, text=True, cwd=REPO)
        assert completed.returncode in (0, 1), completed.stderr
        return json.loads(completed.stdout)

    return run


def absent_torch(folder):
    """A folder whose `torch` package fails to import as a missing PyTorch does."""
    package = folder / "absent_torch" / "torch"
    package.mkdir(parents=True, exist_ok=True)
    (package / "__init__.py").write_text(
        'raise ModuleNotFoundError("No module named \'torch\'", name="torch")\n')
    return package.parent


@pytest.fixture
def interpret(tmp_path):
    """interpret(scenario_path, env=..., world=..., args=[...], out=..., torch=True) -> (the
    completed process, Timeline dict or None, calls). `out` (default: a fresh folder) is passed
    as --out; `args` are more arguments; `env` is applied after the launcher's RANK=0,
    WORLD_SIZE=world and LOCAL_RANK=0. `torch=False` runs it where torch cannot be imported (a
    `torch` package on the path that raises ModuleNotFoundError, as an absent one does), whether
    or not this machine has PyTorch."""

    def run(scenario_path, env=None, world=1, args=(), out=None, torch=True):
        if out is None:
            out = tmp_path / "out"
            out.mkdir(exist_ok=True)
        log = tmp_path / "calls.jsonl"
        if log.exists():
            log.unlink()
        environ = dict(os.environ)
        environ.update(RANK="0", WORLD_SIZE=str(world), LOCAL_RANK="0")
        environ.update(env or {})
        environ["PYTHONPATH"] = os.pathsep.join(
            [str(REPO / "python"), str(FAKE_TORCH if torch else absent_torch(tmp_path))])
        environ["FAKE_TORCH_LOG"] = str(log)
        completed = subprocess.run(
            [sys.executable, "-m", "c10dsim.torch", str(scenario_path), "--out", str(out),
             *args],
            env=environ, capture_output=True, text=True, timeout=120)
        timeline_path = out / "rank0.json"
        document = json.loads(timeline_path.read_text()) if timeline_path.exists() else None
        calls = [json.loads(line) for line in log.read_text().splitlines()] \
            if log.exists() else []
        return completed, document, calls

    return run
