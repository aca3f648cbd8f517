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


def edit(**changes):
    """An edit of a resolved scenario: each KEY__PATH=value replaces scenario[KEY][PATH]
    (an int part indexes a list); the value `DELETE` removes the key."""

    def apply(scenario):
        for key_path, value in changes.items():
            *parents, last = [int(part) if part.isdigit() else part
                              for part in key_path.split("__")]
            holder = scenario
            for part in parents:
                holder = holder[part]
            if value is DELETE:
                del holder[last]
            else:
                holder[last] = value
        return scenario

    return apply


DELETE = object()


# The review's malformed copies of straggler's resolved scenario: each exits 2 with one line
# naming the key path, before torch is imported.
@pytest.mark.parametrize("change, message", [
    (edit(env__raw=DELETE), "env: has no raw"),
    (edit(env=[]), "env: expected an object, got []"),
    (edit(cluster={}), "cluster: has no ranks"),
    (edit(cluster__ranks="8"), 'cluster.ranks: expected an integer, got "8"'),
    (edit(ops=None), "ops: expected a list, got null"),
    (edit(ops=[{}]), "ops[0]: has no index"),
    (edit(ops__0__kind={}), "ops[0].kind: has no kind"),
    (edit(ops__0__kind__group=7), "ops[0].kind.group: expected an index of groups (0 to 0), "
                                  "got 7"),
    (edit(faults=[{"ranks": [0], "kind": {"kind": "async_error"}, "op": 99, "iteration": 0}]),
     "faults[0].op: expected an index of ops (0 to 2), got 99"),
    (edit(faults=[{"ranks": [0], "kind": {"kind": "async_error"}, "op": 0, "iteration": 0}]),
     "faults[0].kind: has no after_ns"),
    (edit(faults=[{"ranks": [0], "kind": {"kind": "melt"}, "op": 0, "iteration": 0}]),
     'faults[0].kind.kind: expected one of skip, hang, die, watchdog_stuck, mismatch, '
     'async_error, got "melt"'),
    (edit(path=None, ops__0__kind={"kind": "nope"}), "path: expected a string, got null"),
    (edit(repeat=True), "repeat: expected an integer, got true"),
    (edit(perturbations__0__host_delay={"distribution": "lognormal"}),
     "perturbations[0].host_delay: has no mean_ns"),
    (edit(process_groups=[]), "process_groups: expected one item per item of groups (1), got 0"),
    (edit(process_groups=[1]), "process_groups[0]: expected an index of groups (0 to 0), got 1"),
    (edit(stream_high_priority=[0]), "stream_high_priority[0]: expected true or false, got 0"),
    (edit(stream_high_priority=[True, False]),
     "stream_high_priority: expected one item per item of groups (1), got 2"),
    (edit(op_works=[None]), "op_works: expected one item per item of ops (3), got 1"),
    (edit(setup_communicator_ranks=[]),
     "setup_communicator_ranks: expected one item per item of groups (1), got 0"),
    (edit(setup_communicator_ranks=[[True]]),
     "setup_communicator_ranks[0][0]: expected an integer, got true"),
    (edit(functional_works=[]), "functional_works: expected one item per item of works (1), got 0"),
    (edit(functional_works=[1]), "functional_works[0]: expected true or false, got 1"),
])
def test_a_malformed_resolved_scenario_exits_2_naming_the_key(resolve, interpret, tmp_path,
                                                                change, message):
    _, scenario = resolve("straggler")
    assert len(scenario["ops"]) == 3 and len(scenario["groups"]) == 1
    bad = tmp_path / "malformed.json"
    bad.write_text(json.dumps(change(scenario)))
    completed, document, calls = interpret(bad, env=WATCH_IMPORT)
    assert completed.returncode == 2, completed.stderr
    assert "Traceback" not in completed.stderr
    assert completed.stderr == "c10dsim.torch: %s is not a resolved scenario (c10dsim resolve " \
        "FILE --json): %s\n" % (bad, message), completed.stderr
    assert document is None and calls == []


def test_an_unknown_op_kind_is_left_to_the_refusal_that_names_it(resolve, interpret, tmp_path):
    _, scenario = resolve("straggler")
    scenario["ops"][0]["kind"] = {"kind": "nope"}
    bad = tmp_path / "unknown_kind.json"
    bad.write_text(json.dumps(scenario))
    completed, _, calls = interpret(bad, env=WATCH_IMPORT)
    assert completed.returncode == 2, completed.stderr
    assert "scenarios/straggler.toml:31: op kind 'nope' is not known to this interpreter" \
        in completed.stderr, completed.stderr
    assert calls == []


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
