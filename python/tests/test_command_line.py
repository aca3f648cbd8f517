"""`python -m c10dsim.torch` as torchrun starts it, against the fake torch (or none): bad input,
a launch that does not fit and a scenario PyTorch cannot enact exit 2 before torch is imported; a
missing torch exits 2 naming it; the journal thread's failures are reported."""

import json

import pytest

# The fake torch logs these variables when it is imported: no call logged, no import.
WATCH_IMPORT = {"FAKE_TORCH_WATCH": "RANK"}


def test_a_missing_scenario_file_exits_2_naming_it(interpret, tmp_path):
    missing = tmp_path / "nowhere.json"
    completed, document, calls = interpret(missing, env=WATCH_IMPORT)
    assert completed.returncode == 2
    assert "Traceback" not in completed.stderr
    assert str(missing) in completed.stderr and "cannot read" in completed.stderr
    assert document is None and calls == []


@pytest.mark.parametrize("text", ["", "{\"name\": ", "[1, 2]", "{}",
                                  "{\"format\": \"c10dsim-timeline\", \"ranks\": []}"])
def test_a_file_that_is_not_a_resolved_scenario_exits_2(interpret, tmp_path, text):
    bad = tmp_path / "bad.json"
    bad.write_text(text)
    completed, document, calls = interpret(bad, env=WATCH_IMPORT)
    assert completed.returncode == 2
    assert "Traceback" not in completed.stderr
    assert "not a resolved scenario" in completed.stderr
    assert document is None and calls == []


def test_an_out_folder_that_does_not_exist_is_made_and_filled(resolve, interpret, tmp_path):
    path, _ = resolve("exp_b_stream_scope", "cluster.ranks=1")
    missing = tmp_path / "made" / "by_the_rank"
    completed, _, _ = interpret(path, out=missing)
    assert completed.returncode == 0, completed.stderr
    assert (missing / "rank0.json").is_file()


def test_an_out_that_is_a_file_exits_2_before_the_program(resolve, interpret, tmp_path):
    path, _ = resolve("exp_b_stream_scope", "cluster.ranks=1")
    a_file = tmp_path / "a_file"
    a_file.write_text("kept")
    completed, _, calls = interpret(path, env=WATCH_IMPORT, out=a_file)
    assert completed.returncode == 2
    assert "Traceback" not in completed.stderr
    assert "--out %s cannot be made a folder" % a_file in completed.stderr
    assert calls == [] and a_file.read_text() == "kept"


def test_a_launch_whose_world_size_is_not_the_asked_one_exits_2(resolve, interpret):
    path, _ = resolve("send_recv")
    completed, document, calls = interpret(path, env=WATCH_IMPORT, world=2,
                                           args=["--world", "4"])
    assert completed.returncode == 2
    assert "launched with WORLD_SIZE=2, expected --world 4" in completed.stderr
    assert document is None and calls == []
    completed, _, _ = interpret(path, world=2, args=["--world", "2"])
    assert completed.returncode == 0, completed.stderr


def test_a_launch_of_more_processes_than_the_scenario_has_ranks_exits_2(resolve, interpret):
    path, scenario = resolve("send_recv")
    assert scenario["cluster"]["ranks"] == 2
    completed, document, calls = interpret(path, env=WATCH_IMPORT, world=3)
    assert completed.returncode == 2
    assert "WORLD_SIZE=3 exceeds the scenario's 2 ranks" in completed.stderr
    assert document is None and calls == []


def test_a_journal_write_that_fails_is_reported_on_stderr_once(resolve, interpret, tmp_path):
    # Two ops that block past the journal's 0.5 s: two partial writes, both failing (the
    # partial write asks the fake's events whether they completed; the final write does not).
    source = tmp_path / "blocking.toml"
    source.write_text("""
repeat = 1
warmup = 0
[cluster]
ranks = 1
[[op]]
gpu_sleep_us = 10
[[op]]
host_sleep_us = 800000
[[op]]
host_sleep_us = 800000
""")
    path, _ = resolve(str(source))
    completed, document, calls = interpret(path, env={
        "FAKE_TORCH_RAISES": "event.query=RuntimeError: the event cannot be queried"})
    assert completed.returncode == 0, completed.stderr
    assert [call[0] for call in calls].count("event.query") >= 2, "both writes were tried"
    assert completed.stderr.count("the journal could not write") == 1, completed.stderr
    assert "RuntimeError: the event cannot be queried" in completed.stderr
    assert document["machine"]["journal"] == "final"


@pytest.mark.parametrize("variables, message", [
    ({"RANK": "abc"}, "RANK='abc' is not a non-negative integer"),
    ({"LOCAL_RANK": ""}, "LOCAL_RANK='' is not a non-negative integer"),
    ({"LOCAL_RANK": "-1"}, "LOCAL_RANK='-1' is not a non-negative integer"),
    ({"WORLD_SIZE": "²"}, "WORLD_SIZE='²' is not a non-negative integer"),
    ({"RANK": "2"}, "RANK=2 with WORLD_SIZE=2: the rank must be below the world size"),
    ({"WORLD_SIZE": "0"}, "RANK=0 with WORLD_SIZE=0: the rank must be below the world size"),
])
def test_bad_launcher_variables_exit_2_naming_them(resolve, interpret, variables, message):
    path, _ = resolve("send_recv")
    completed, document, calls = interpret(path, env=dict(WATCH_IMPORT, **variables), world=2)
    assert completed.returncode == 2, completed.stderr
    assert "Traceback" not in completed.stderr
    assert message in completed.stderr, completed.stderr
    assert document is None and calls == []


def test_without_torch_a_runnable_scenario_exits_2_naming_the_missing_torch(resolve, interpret):
    path, _ = resolve("exp_b_stream_scope", "cluster.ranks=1")
    completed, document, _ = interpret(path, torch=False)
    assert completed.returncode == 2, completed.stderr
    assert "Traceback" not in completed.stderr
    assert "cannot import torch (No module named 'torch'): install PyTorch with CUDA" \
        in completed.stderr, completed.stderr
    assert document is None


def test_without_torch_a_scenario_pytorch_cannot_enact_is_refused_for_what_it_asks(
        resolve, interpret, tmp_path):
    path, scenario = resolve("mismatch")
    scenario["faults"][0]["ranks"] = [0]
    scenario["faults"][0]["kind"] = {"kind": "async_error", "after_ns": 5}
    edited = tmp_path / "async_error_rank0.json"
    edited.write_text(json.dumps(scenario))
    completed, document, _ = interpret(edited, world=2, torch=False)
    assert completed.returncode == 2, completed.stderr
    assert "fault 'async_error' on rank(s) [0] cannot be enacted" in completed.stderr, \
        completed.stderr
    assert "cannot import torch" not in completed.stderr, completed.stderr
    assert document is None


def test_a_scenario_pytorch_cannot_enact_is_refused_before_torch_is_imported(resolve,
                                                                              interpret):
    path, _ = resolve("watchdog_stuck")
    completed, document, calls = interpret(path, env=WATCH_IMPORT)
    assert completed.returncode == 2, completed.stderr
    assert "watchdog_stuck" in completed.stderr and "Traceback" not in completed.stderr
    assert document is None and calls == []
