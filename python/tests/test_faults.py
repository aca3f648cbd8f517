"""Faults and failures against the fake torch: what a `skip` or a `mismatch` fault issues, which
faults are refused, how an exception from PyTorch is classified, and that an exception of the
interpreter's own is no finding.

About 900 lines, one file: every case drives the same fake torch through the interpreter and
reads the same Timeline fields; split by fault kind it would repeat the fixtures."""

import json
import signal
import subprocess

import pytest

from conftest import REPO, required_binary, scenario_source

MISMATCHED = """
name = "mismatched"
repeat = 3
warmup = 0
[cluster]
ranks = 1
[tensors]
x = "1MiB"
[[op]]
label = "ar"
all_reduce = "x"
async_op = true
work = "w"
[[op]]
wait = "w"
[[fault]]
ranks = [0]
at = "ar"
iteration = 1
kind = "mismatch"
collective = "%s"
size = "2MiB"
"""


def names(calls):
    return [call[0] for call in calls]


# Two ranks and a tensor, then rank 0's send of it to rank 1 (labelled `send_x`).
TWO_RANKS = """
[cluster]
ranks = 2
[tensors]
x = "1MiB"
"""
SEND_FROM_0_TO_1 = """[[op]]
label = "send_x"
ranks = [0]
send = "x"
peer = 1
[[op]]
ranks = [1]
recv = "x"
peer = 0
"""


def scenario_file(tmp_path, name, text):
    source = tmp_path / (name + ".toml")
    source.write_text(text)
    return str(source)


def test_a_skip_fault_issues_nothing_for_its_op_and_the_program_goes_on(resolve, interpret,
                                                                        tmp_path):
    source = scenario_file(tmp_path, "skipped", """
repeat = 2
warmup = 0
[cluster]
ranks = 1
[tensors]
x = "1MiB"
[[op]]
label = "ar"
all_reduce = "x"
[[op]]
label = "after"
host_sleep_us = 10
[[fault]]
ranks = [0]
at = "ar"
kind = "skip"
""")
    path, scenario = resolve(source)
    completed, document, calls = interpret(path)
    assert completed.returncode == 0, completed.stderr
    # Iteration 0 skips the all_reduce (sim::pg::faults::HostEffect::Skip); iteration 1 runs it.
    assert names(calls).count("all_reduce") == 1
    (rank,) = document["ranks"]
    ar, after = (op["index"] for op in scenario["ops"])
    assert [h["iteration"] for h in rank["host"] if h["op"] == ar] == [1]
    assert [h["iteration"] for h in rank["host"] if h["op"] == after] == [0, 1]
    assert [(c["iteration"], c["seq"]) for c in rank["collectives"]] == [(1, 1)]
    (fault,) = document["watchdog"]
    assert fault["event"] == "fault" and "skip before ar" in fault["message"]


@pytest.mark.parametrize("collective, call", [
    ("all_gather", "all_gather_into_tensor"),
    ("reduce_scatter", "reduce_scatter_tensor"),
    ("broadcast", "broadcast"),
    ("all_to_all", "all_to_all_single"),
])
def test_a_mismatch_issues_the_fault_s_collective_in_place_of_the_op(
        resolve, interpret, tmp_path, collective, call):
    path, scenario = resolve(scenario_file(tmp_path, "mismatched", MISMATCHED % collective))
    # Each kernel takes its SeqNum in µs: a record matched to another call's entry shows.
    completed, document, calls = interpret(path, env={"FAKE_TORCH_DURATION_PER_SEQ": "1"})
    assert completed.returncode == 0, completed.stderr
    issued = [c for c in calls if c[0] in ("all_reduce", call, "work.wait")]
    # Iteration 1 issues the other collective instead of the all_reduce, and its wait() is on
    # that call's Work.
    assert [c[0] for c in issued] == ["all_reduce", "work.wait", call, "work.wait",
                                      "all_reduce", "work.wait"]
    assert issued[3][1] == call
    (rank,) = document["ranks"]
    records = rank["collectives"]
    # The call takes a SeqNum of the group, as PyTorch's Work does: no record gets the
    # duration of the call before it.
    assert [(c["iteration"], c["seq"]) for c in records] == [(0, 1), (1, 2), (2, 3)]
    assert [c["bytes"] for c in records] == [1 << 20, 2 << 20, 1 << 20]
    for record in records:
        assert abs(record["end_ns"] - record["kernel_start_ns"] - record["seq"] * 1000) <= 1
        assert record["wait"]["op"] == 1
    assert document["machine"]["kernel_durations"] == (
        "Flight Recorder duration_ms for 3 of 3 collectives (after 1 dumps)")
    ar = scenario["ops"][0]["index"]
    assert [h["iteration"] for h in rank["host"] if h["op"] == ar] == [0, 1, 2]
    assert [r["event"] for r in document["watchdog"]] == ["fault"]


# One rank whose barrier "b" is issued as an all_gather instead (a mismatch fault).
BARRIER_AS_ALL_GATHER = """
[cluster]
ranks = 1
[[op]]
label = "b"
barrier = true
[[fault]]
ranks = [0]
at = "b"
kind = "mismatch"
collective = "all_gather"
"""


def test_a_mismatch_at_a_barrier_issues_the_collective_and_waits_for_it(resolve, interpret,
                                                                        tmp_path):
    source = scenario_file(tmp_path, "barrier_mismatch",
                           "repeat = 2\nwarmup = 0\n" + BARRIER_AS_ALL_GATHER)
    path, _ = resolve(source)
    completed, document, calls = interpret(path)
    assert completed.returncode == 0, completed.stderr
    assert [n for n in names(calls) if n in ("barrier", "all_gather_into_tensor")] == [
        "all_gather_into_tensor", "barrier"]
    records = document["ranks"][0]["collectives"]
    assert [(c["iteration"], c["seq"]) for c in records] == [(0, 1), (1, 2)]
    assert all(not c["async_op"] and c["wait"] is not None for c in records)


def test_a_process_taken_down_inside_a_mismatch_at_a_barrier_writes_its_collective_unfinished(
        resolve, interpret, tmp_path):
    # The fault's all_gather hangs (its peers issue a barrier) and, synchronous before PyTorch
    # 2.8, blocks inside the wrapper's wait until the watchdog takes the process down: the
    # simulator writes it unfinished.
    source = scenario_file(tmp_path, "barrier_mismatch_hang",
                           BARRIER_AS_ALL_GATHER + 'size = "1MiB"\n')
    path, _ = resolve(source)
    completed, document, _ = interpret(path, env={"FAKE_TORCH_VERSION": "2.5.1",
                                                  "FAKE_TORCH_ABORTS": "all_gather_into_tensor:1"})
    assert completed.returncode == -signal.SIGABRT, completed.stderr
    (rank,) = document["ranks"]
    assert rank["collectives"] == []
    (never,) = rank["unfinished_collectives"]
    assert (never["op"], never["seq"], never["bytes"]) == (0, 1, 1 << 20)
    assert never["wait"] == {"op": 0, "host_start_ns": never["host_start_ns"],
                             "host_end_ns": None, "stream": 0}


@pytest.mark.parametrize("at, collective, why", [
    ("ar", "batch_isend_irecv", "batch_isend_irecv"),
    ("ar", "send", "point-to-point"),
    ("send_x", "all_reduce", "point-to-point"),
])
def test_a_mismatch_pytorch_cannot_issue_is_refused_before_the_program(
        resolve, interpret, tmp_path, at, collective, why):
    source = scenario_file(tmp_path, "p2p_mismatch", TWO_RANKS + """[[op]]
label = "ar"
all_reduce = "x"
""" + SEND_FROM_0_TO_1 + """[[fault]]
ranks = [0]
at = "%s"
kind = "mismatch"
collective = "%s"
""" % (at, collective))
    path, scenario = resolve(source)
    completed, document, calls = interpret(path, world=2)
    assert completed.returncode == 2, completed.stderr
    assert document is None and "Traceback" not in completed.stderr
    assert why in completed.stderr
    (op,) = [op for op in scenario["ops"] if op["label"] == at]
    assert ":%d:" % op["line"] in completed.stderr
    assert "init_process_group" not in names(calls)


def test_a_send_of_another_size_in_place_of_a_send_goes_to_the_peer(resolve, interpret,
                                                                   tmp_path):
    source = scenario_file(tmp_path, "send_mismatch", TWO_RANKS + SEND_FROM_0_TO_1 + """[[fault]]
ranks = [0]
at = "send_x"
kind = "mismatch"
size = "3MiB"
""")
    path, scenario = resolve(source)
    completed, document, calls = interpret(path, world=2)
    assert completed.returncode == 0, completed.stderr
    assert ["send", "1"] in calls
    (record,) = document["ranks"][0]["collectives"]
    assert record["bytes"] == 3 << 20


def test_a_mismatch_of_another_dtype_issues_a_buffer_of_that_dtype(resolve, interpret,
                                                                    tmp_path):
    source = scenario_file(tmp_path, "dtype_mismatch", """
repeat = 2
warmup = 0
[cluster]
ranks = 1
[tensors]
x = "1MiB"
[[op]]
label = "ar"
all_reduce = "x"
[[fault]]
ranks = [0]
at = "ar"
iteration = 1
kind = "mismatch"
dtype = "bf16"
""")
    path, scenario = resolve(source)
    assert scenario["faults"][0]["kind"]["dtype"] == "bf16"
    completed, document, calls = interpret(path)
    assert completed.returncode == 0, completed.stderr
    # The op's tensor as bf16: as many elements (262144), half the bytes.
    assert ["ones", "262144", "bfloat16"] in calls
    records = document["ranks"][0]["collectives"]
    assert [c["bytes"] for c in records] == [1 << 20, 512 << 10]


def test_a_mismatch_at_a_functional_all_reduce_still_binds_its_result(resolve, simulate,
                                                                      interpret, tmp_path):
    # R30: y = fcol.all_reduce(x) makes y at the call; the fault issues another size in its
    # place, and the read of y after it finds a y of its own size, as in the simulator.
    source = scenario_file(tmp_path, "functional_mismatch", """
repeat = 2
warmup = 0
[cluster]
ranks = 1
[tensors]
x = "1MiB"
y = "1MiB"
[[op]]
label = "ar"
functional_all_reduce = "x"
result = "y"
[[op]]
label = "read_y"
item = "y"
[[fault]]
ranks = [0]
at = "ar"
kind = "mismatch"
size = "2MiB"
""")
    path, scenario = resolve(source)
    completed, document, calls = interpret(path)
    assert completed.returncode == 0, completed.stderr
    # Iteration 0: the result (262144 floats) made, the fault's all_reduce issued, waited at
    # the read; iteration 1: the functional all_reduce itself.
    issued = [c for c in calls if c[0] in ("empty", "all_reduce", "work.wait",
                                           "functional.all_reduce", "functional.wait_tensor",
                                           "item")]
    assert issued == [["empty", "262144", "float32"], ["all_reduce", "0", "True"],
                      ["work.wait", "all_reduce", "None"], ["item"],
                      ["functional.all_reduce", "0", "True"], ["functional.wait_tensor"],
                      ["item"]]

    def records(timeline):
        return [(c["iteration"], c["seq"], c["bytes"])
                for c in timeline["ranks"][0]["collectives"]]

    assert records(document) == records(simulate(source)) == [(0, 1, 2 << 20), (1, 2, 1 << 20)]
    read_y = scenario["ops"][-1]["index"]
    assert [h["iteration"] for h in document["ranks"][0]["host"] if h["op"] == read_y] == [0, 1]


# A list of three 4 KiB tensors all_reduced with async_op, the Work waited; rank 0 issues
# iteration 1's first NCCL call as bf16 (`%s`: the batch, one call per tensor by default).
MISMATCHED_LIST = """
repeat = 2
warmup = 0
[cluster]
ranks = 1
[tensors]
g = { size = "4KiB", count = 3 }
[[op]]
label = "l"
all_reduce = "g"
async_op = true
work = "w"
%s
[[op]]
wait = "w"
[[fault]]
ranks = [0]
at = "l"
iteration = 1
kind = "mismatch"
dtype = "bf16"
"""


@pytest.mark.parametrize("batch, issued", [
    # The first tensor's call is the fault's, the other two follow, each its own SeqNum.
    ("", ["all_reduce"] * 3),
    # The first bucket's (8 KiB under a 10 KB cap) is the fault's; the second is issued.
    ('bucket = "10KB"', ["all_reduce"] * 2),
    # The block's one call is the fault's: the block's tensors as bf16, in the block.
    ("coalesce = true", ["coalescing_manager.enter"] + ["all_reduce"] * 3
     + ["coalescing_manager.exit"]),
])
def test_a_mismatch_on_a_tensor_list_replaces_its_first_call_as_the_simulator_does(
        resolve, simulate, interpret, tmp_path, batch, issued):
    source = scenario_file(tmp_path, "list_mismatch", MISMATCHED_LIST % batch)
    path, _ = resolve(source)
    completed, document, calls = interpret(path)
    assert completed.returncode == 0, completed.stderr

    def records(timeline):
        # Which records a wait released: `w` holds the list's last call's Work (R25).
        return [(c["iteration"], c["seq"], c["bytes"], c["wait"] is not None)
                for c in timeline["ranks"][0]["collectives"]]

    assert records(document) == records(simulate(source))
    # Iteration 1 issues as many calls as iteration 0, and the wait is on its last Work.
    per_iteration = [c[0] for c in calls
                     if c[0] in ("all_reduce", "coalescing_manager.enter",
                                 "coalescing_manager.exit")]
    assert per_iteration == issued * 2
    waits = [c for c in calls if c[0] == "work.wait"]
    assert len(waits) == 2


def test_a_mismatch_issuing_a_broadcast_in_a_coalescing_block_is_refused(resolve, interpret,
                                                                         tmp_path):
    source = scenario_file(tmp_path, "block_broadcast",
                           (MISMATCHED_LIST % "coalesce = true").replace(
                               'dtype = "bf16"', 'collective = "broadcast"'))
    path, scenario = resolve(source)
    completed, document, calls = interpret(path)
    assert completed.returncode == 2, completed.stderr
    assert document is None and "Traceback" not in completed.stderr
    assert "_coalescing_manager" in completed.stderr
    (op,) = [op for op in scenario["ops"] if op["label"] == "l"]
    assert ":%d:" % op["line"] in completed.stderr
    assert "init_process_group" not in names(calls)


def waits_with_timeout(scenario):
    for op in scenario["ops"]:
        if op["kind"]["kind"] == "wait":
            op["kind"]["timeout_ns"] = 5_000_000
    return scenario


@pytest.mark.parametrize("sets, edit, message, finding, events", [
    # A wait with its own timeout, or any wait under blocking wait, raised a timeout: its own
    # (R15), which it logged twice, then aborted the communicator.
    ((), waits_with_timeout, "WorkNCCL(SeqNum=1) timed out", "wait_timeout",
     ["wait_timeout", "wait_timeout", "abort"]),
    (("env.TORCH_NCCL_BLOCKING_WAIT=1",), None, "WorkNCCL(SeqNum=1) timed out",
     "wait_timeout", ["wait_timeout", "wait_timeout", "abort"]),
    # Such a wait raised the communicator's error instead: the Work's async error, which it
    # found (R27), as a plain wait's. Both were a wait_timeout.
    ((), waits_with_timeout, "NCCL error: unhandled system error", "async_error",
     ["wait_error", "abort"]),
    (("env.TORCH_NCCL_BLOCKING_WAIT=1",), None, "NCCL error: unhandled system error",
     "async_error", ["wait_error", "abort"]),
    # A plain wait() raised what the watchdog's timeout left on the Work (R26).
    ((), None, "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1)",
     "watchdog_timeout", ["timeout"]),
    ((), None, "WorkNCCL(SeqNum=1, OpType=ALLREDUCE) timed out", "watchdog_timeout", ["timeout"]),
    # Anything else is the communicator's error (R27), which the wait found on its Work: it
    # aborted the communicator, then raised.
    ((), None, "NCCL error: unhandled system error", "async_error", ["wait_error", "abort"]),
])
def test_an_exception_from_pytorch_is_classified_as_the_simulator_classifies_it(
        resolve, interpret, tmp_path, sets, edit, message, finding, events):
    path, scenario = resolve("exp_b_stream_scope", "cluster.ranks=1", *sets)
    if edit is not None:
        path = tmp_path / "edited.json"
        path.write_text(json.dumps(edit(scenario)))
    completed, document, calls = interpret(
        path, env={"FAKE_TORCH_RAISES": "work.wait=DistBackendError: " + message})
    assert completed.returncode == 1, completed.stderr
    (recorded,) = document["findings"]
    assert recorded["kind"] == finding, recorded
    assert "raised DistBackendError" in recorded["message"] and message in recorded["message"]
    assert [r["event"] for r in document["watchdog"]] == events + ["exit"]
    assert names(calls).count("work.wait") == 1
    # The program never returned from its first iteration; the call raised, so none is open.
    (rank,) = document["ranks"]
    assert rank["unfinished_iteration"] == 0 and "unfinished_host" not in rank


def test_an_out_of_memory_error_is_an_out_of_memory_finding(resolve, interpret, tmp_path):
    source = scenario_file(tmp_path, "oom", """
[cluster]
ranks = 1
[tensors]
x = "1MiB"
y = "64MiB"
[[op]]
all_reduce = "x"
[[op]]
label = "grow"
alloc = "y"
[[op]]
free = "y"
""")
    path, _ = resolve(source)
    completed, document, _ = interpret(path, env={
        "FAKE_TORCH_RAISES": "empty=OutOfMemoryError: CUDA out of memory. Tried to allocate "
                             "64.00 MiB"})
    assert completed.returncode == 1, completed.stderr
    (finding,) = document["findings"]
    assert finding["kind"] == "out_of_memory"
    assert "grow raised OutOfMemoryError" in finding["message"]
    # The process ends there: no watchdog event but its exit (as the simulator's R20).
    assert [r["event"] for r in document["watchdog"]] == ["exit"]


@pytest.mark.parametrize("raised, finding", [
    ("OutOfMemoryError: CUDA out of memory. Tried to allocate 600.00 MiB", "out_of_memory"),
    ("DistStoreError: wait timeout after 1000ms, keys: /default_pg/0//0", "store_timeout"),
])
def test_catch_true_catches_dist_backend_error_only(resolve, interpret, tmp_path, raised,
                                                     finding):
    # `catch = true` is `except DistBackendError:`: the clone of a functional all_reduce that
    # does not fit raises OutOfMemoryError, which it does not catch, so the program stops
    # there (the simulator's uncaught out_of_memory finding); so does another c10d error. The
    # interpreter used to catch both and go on.
    source = scenario_file(tmp_path, "uncaught", """
[cluster]
ranks = 1
[tensors]
x = "1MiB"
y = "1MiB"
[[op]]
label = "far"
functional_all_reduce = "x"
result = "y"
catch = true
[[op]]
label = "after"
kernel = { us = 5 }
""")
    path, _ = resolve(source)
    completed, document, calls = interpret(path, env={
        "FAKE_TORCH_RAISES": "functional.all_reduce=" + raised})
    assert completed.returncode == 1, completed.stderr
    (recorded,) = document["findings"]
    assert (recorded["kind"], recorded["op"]) == (finding, 0), recorded
    (rank,) = document["ranks"]
    assert "exceptions" not in rank
    assert not [call for call in rank["host"] if call["op"] == 1]
    assert "_sleep" not in names(calls)[names(calls).index("functional.all_reduce"):]


# The store timeout of R29 as PyTorch 2.11 raises it from the first collective, which creates
# the communicator and blocks in store.get for rank 0's NCCL unique id: TCPStore's
# DistStoreError, wrapped by ProcessGroupNCCL into a DistBackendError.
UNIQUE_ID_TIMEOUT = (
    "DistBackendError: [0] is setting up NCCL communicator and retrieving ncclUniqueId from [0] "
    "via c10d key-value store by key '0', but store->get('0') got error: wait timeout after "
    "600000ms, keys: /default_pg/0//0. This may indicate a possible application crash on rank 0 "
    "or a network set up issue.")


@pytest.mark.parametrize("raised, finding, event", [
    (UNIQUE_ID_TIMEOUT, "store_timeout", "store_timeout"),
    ("DistStoreError: wait timeout after 600000ms, keys: /default_pg/0//0", "store_timeout",
     "store_timeout"),
    # The store failed otherwise: no timeout, so the communicator's error as before.
    ("DistBackendError: [0] is setting up NCCL communicator and retrieving ncclUniqueId from [0] "
     "via c10d key-value store by key '0', but store->get('0') got error: Connection reset by "
     "peer", "async_error", "async_error"),
])
def test_a_store_timeout_is_a_store_timeout_finding_as_the_simulator_writes_it(
        resolve, simulate, interpret, tmp_path, raised, finding, event):
    # rank0_crash_init: rank 0 dies before publishing the unique id, and every other rank's
    # `ar` raises the store's timeout at 600 s, a store_timeout finding in the simulator (R29).
    # The interpreter classified the exception by the word "timeout" alone, as a
    # watchdog_timeout, so `diff` could not pair the two.
    simulated = simulate("rank0_crash_init", "cluster.ranks=2")
    assert [(f["kind"], f["rank"], f["op"]) for f in simulated["findings"]] == [
        ("store_timeout", 1, 0)]
    assert [r["event"] for r in simulated["watchdog"] if r["rank"] == 1] == [
        "store_timeout", "exit"]
    source = scenario_file(tmp_path, "store", """
[cluster]
ranks = 1
[tensors]
grad = "1MiB"
[[op]]
label = "ar"
all_reduce = "grad"
[[op]]
label = "loss"
item = "grad"
""")
    path, _ = resolve(source)
    completed, document, _ = interpret(path, env={"FAKE_TORCH_RAISES": "all_reduce=" + raised})
    assert completed.returncode == 1, completed.stderr
    (recorded,) = document["findings"]
    assert (recorded["kind"], recorded["op"]) == (finding, 0), recorded
    assert [(r["event"], r["thread"]) for r in document["watchdog"]] == [
        (event, "main"), ("exit", "main")]


@pytest.mark.parametrize("raised", [
    UNIQUE_ID_TIMEOUT,
    # The non-blocking init's wait for its communicator (TORCH_NCCL_NONBLOCKING_TIMEOUT).
    "DistBackendError: NCCL timeout in: /pytorch/torch/csrc/distributed/c10d/NCCLUtils.cpp:123",
])
def test_a_caught_store_timeout_is_still_a_store_timeout_finding(
        resolve, simulate, interpret, tmp_path, raised):
    # `catch = true` is `except DistBackendError:`, which catches the wrapped store timeout; the
    # simulator, which ended the process whatever `catch` said, now records the exception and
    # goes on, writing the store_timeout finding caught or not (as a wait's timeout). The
    # interpreter wrote no finding for it, and classified the non-blocking init's timeout as a
    # watchdog_timeout.
    simulated = simulate("rank0_crash_init", "cluster.ranks=2", "op.ar.catch=true")
    assert [(f["kind"], f["rank"], f["op"]) for f in simulated["findings"]] == [
        ("store_timeout", 1, 0)]
    (exception,) = next(r for r in simulated["ranks"] if r["rank"] == 1)["exceptions"]
    assert exception["exception"] == "DistBackendError"
    source = scenario_file(tmp_path, "store_caught", """
[cluster]
ranks = 1
[tensors]
grad = "1MiB"
[[op]]
label = "ar"
all_reduce = "grad"
catch = true
[[op]]
label = "loss"
item = "grad"
""")
    path, _ = resolve(source)
    completed, document, _ = interpret(path, env={"FAKE_TORCH_RAISES": "all_reduce=" + raised})
    assert completed.returncode == 0, completed.stderr
    (recorded,) = document["findings"]
    assert (recorded["kind"], recorded["op"]) == ("store_timeout", 0), recorded
    (rank,) = document["ranks"]
    assert [e["op"] for e in rank["exceptions"]] == [0]


def test_a_call_that_raised_uncaught_ends_its_host_record_at_the_raise(
        resolve, simulate, interpret, tmp_path):
    # caught_timeout without `catch` on `retry`: the all_reduce on the communicator the blocking
    # wait aborted raises DistBackendError before it issues anything (R27), uncaught. A call
    # that raised, caught or not, has a host record ending at its raise
    # (docs/timeline-format.md), as the simulator writes it; the interpreter wrote none, so
    # `diff` reported `retry` as run by the simulator only.
    text = (scenario_source("caught_timeout").read_text()
            .replace('label = "retry"\nall_reduce = "x"\ncatch = true\n',
                     'label = "retry"\nall_reduce = "x"\n'))
    source = scenario_file(tmp_path, "retry_uncaught", text)
    simulated = simulate(source)
    path, scenario = resolve(source)
    retry = [op["index"] for op in scenario["ops"] if op["label"] == "retry"]
    completed, document, _ = interpret(path, env={
        "FAKE_TORCH_RAISES": "all_reduce:2=DistBackendError: NCCL communicator was aborted on "
                             "rank 0."})
    assert completed.returncode == 1, completed.stderr
    (recorded,) = document["findings"]
    assert [recorded["op"]] == retry
    (rank,) = document["ranks"]
    (expected,) = simulated["ranks"]
    assert "unfinished_host" not in rank and "unfinished_host" not in expected
    assert ([(h["iteration"], h["op"]) for h in rank["host"]]
            == [(h["iteration"], h["op"]) for h in expected["host"]])
    (raised,) = [h for h in rank["host"] if h["op"] in retry]
    (raise_record,) = [r for r in document["watchdog"] if r["event"] == "async_error"]
    assert raised["start_ns"] <= raised["end_ns"] == raise_record["at_ns"]


# Rank 0's all_reduce fails by an NCCL async error 5 us after its enqueue (rank 1 never joins
# it); the program's is_completed() stores the error in the Work, so the default wait() after it
# finds it (R27): the main thread aborts the communicator and raises, uncaught.
WAIT_FINDS_ERROR = """
[cluster]
ranks = 2
[groups.world]
eager_init = true
[tensors]
grad = "1MiB"
[[op]]
label = "ar"
all_reduce = "grad"
async_op = true
work = "w"
[[op]]
host_sleep_us = 1000
[[op]]
is_completed = "w"
[[op]]
label = "wait_w"
wait = "w"
[[fault]]
ranks = [0]
at = "ar"
kind = "async_error"
after_us = 5
[[fault]]
ranks = [1]
at = "ar"
kind = "hang"
"""


# WAIT_FINDS_ERROR's Work made by another call: a bf16 reduce_scatter (its element counts
# sliced, R16's descriptors), and an isend of an eager world's pair, whose Work runs on the
# world's communicator (R11), which the wait aborts.
OTHER_WORKS = {
    "reduce_scatter": [('grad = "1MiB"', 'grad = { size = "3KiB", dtype = "bf16" }'),
                       ('all_reduce = "grad"', 'reduce_scatter = "grad"')],
    "pair_send": [('all_reduce = "grad"\n', 'send = "grad"\nranks = [0]\npeer = 1\n'),
                  ('work = "w"\n', 'work = "w"\n[[op]]\nlabel = "rv"\nrecv = "grad"\n'
                                  'ranks = [1]\npeer = 0\n'),
                  ('is_completed = "w"\n', 'is_completed = "w"\nranks = [0]\n'),
                  ('wait = "w"\n', 'wait = "w"\nranks = [0]\n'),
                  ('ranks = [1]\nat = "ar"', 'ranks = [1]\nat = "rv"')],
}


@pytest.mark.parametrize("call", ["all_reduce", *OTHER_WORKS])
@pytest.mark.parametrize("catch", [False, True])
def test_a_wait_that_raises_its_work_s_async_error_writes_the_simulator_s_records(
        resolve, simulate, interpret, tmp_path, catch, call):
    # The interpreter wrote such a raise as a main-thread `async_error` record (uncaught) or
    # none (caught), where the simulator writes `wait_error` (the wait found the Work's error)
    # and `abort` (its abort of the communicator returned), caught or not: `diff` reported the
    # two sides' main-thread records as disagreeing.
    text = WAIT_FINDS_ERROR
    for before, after in OTHER_WORKS.get(call, []):
        assert before in text
        text = text.replace(before, after, 1)
    text = text.replace('wait = "w"', 'wait = "w"\ncatch = true' if catch else 'wait = "w"')
    source = scenario_file(tmp_path, "wait_finds_error", text)
    simulated = simulate(source)
    expected = [(r["thread"], r["event"], r["group"], r["message"])
                for r in simulated["watchdog"]
                if r["rank"] == 0 and r["thread"] == "main"
                and r["event"] not in ("fault", "exit", "warning")]
    assert [event for _, event, _, _ in expected] == ["wait_error", "abort"], expected
    path, scenario = resolve(source)
    # PyTorch offers no way to inject the network failure: the fake raises it from the wait.
    scenario["faults"] = []
    path.write_text(json.dumps(scenario))
    completed, document, _ = interpret(path, world=2, env={
        "FAKE_TORCH_RAISES": "work.wait=DistBackendError: NCCL error: remote process exited or "
                             "there was a network error, NCCL version 2.27.3"})
    assert completed.returncode == (0 if catch else 1), completed.stderr
    assert [(r["thread"], r["event"], r["group"], r["message"])
            for r in document["watchdog"] if r["event"] not in ("exit", "warning")] == expected
    (wait_w,) = [op["index"] for op in scenario["ops"] if op["label"] == "wait_w"]
    raised_at = {r["event"]: r["at_ns"] for r in document["watchdog"]}
    assert raised_at["wait_error"] <= raised_at["abort"]
    if catch:
        # Caught, it is no finding, as in the simulator: the exception goes on record.
        assert document["findings"] == []
        (rank,) = document["ranks"]
        (exception,) = rank["exceptions"]
        assert (exception["op"], exception["at_ns"]) == (wait_w, raised_at["abort"])
    else:
        (recorded,) = document["findings"]
        assert (recorded["kind"], recorded["op"]) == ("async_error", wait_w)
        assert raised_at["abort"] <= raised_at["exit"]


def watchdog_disagreements(simulated, measured, tmp_path):
    """`c10dsim diff`'s disagreements of the watchdog's, the monitor's and the main thread's
    records between the two Timelines, by count alone: the fake's calls take no time, so first
    times are not compared."""
    paths = []
    for name, timeline in (("simulated", simulated), ("measured", measured)):
        paths.append(tmp_path / (name + ".json"))
        paths[-1].write_text(json.dumps(timeline))
    completed = subprocess.run(
        [str(required_binary()), "diff", *map(str, paths), "--json", "--tol-pct", "1e9",
         "--tol-us", "1e12"], capture_output=True, text=True, cwd=REPO)
    assert completed.returncode in (0, 1), completed.stderr
    # The report leaves the key out where there are none.
    return json.loads(completed.stdout).get("watchdog_disagreements", [])


@pytest.mark.parametrize("catch, sets", [
    (True, ()), (False, ()), (False, ("env.TORCH_NCCL_BLOCKING_WAIT=1",)),
])
def test_a_polling_wait_s_timeout_writes_the_simulator_s_main_thread_records(
        resolve, simulate, interpret, tmp_path, catch, sets):
    # The interpreter wrote a polling wait's timeout (R15) as one main-thread `wait_timeout`
    # record (uncaught) or none (caught), where the simulator writes two `wait_timeout` records
    # (PyTorch's timeout line, then the wait's) and an `abort` once the abort returned, caught
    # or not: `diff` reported the two sides' main-thread records as disagreeing.
    text = scenario_source("wait_timeout").read_text()
    if not catch:
        text = text.replace("catch = true", "catch = false")
    source = scenario_file(tmp_path, "wait_timeout", text)
    simulated = simulate(source, *sets)
    expected = [(r["thread"], r["event"], r["group"], r["message"])
                for r in simulated["watchdog"] if r["thread"] == "main" and r["event"] != "exit"]
    assert [event for _, event, _, _ in expected] == ["wait_timeout", "wait_timeout", "abort"]
    path, scenario = resolve(source, *sets)
    # What PyTorch's wait raises is the timeout check's line, the simulator's first record.
    completed, document, _ = interpret(path, env={
        "FAKE_TORCH_RAISES": "work.wait=DistBackendError: " + expected[0][3]})
    assert completed.returncode == (0 if catch else 1), completed.stderr
    assert [(r["thread"], r["event"], r["group"], r["message"]) for r in document["watchdog"]
            if r["thread"] == "main" and r["event"] != "exit"] == expected
    (wait_w,) = [op["index"] for op in scenario["ops"] if op["label"] == "wait_w"]
    raised_at = [r["at_ns"] for r in document["watchdog"] if r["event"] != "exit"]
    assert raised_at == sorted(raised_at)
    (timed_out,) = [f for f in document["findings"] if f["kind"] == "wait_timeout"]
    assert timed_out["op"] == wait_w
    if catch:
        (exception,) = document["ranks"][0]["exceptions"]
        assert (exception["op"], exception["at_ns"]) == (wait_w, raised_at[-1])
    disagreements = watchdog_disagreements(simulated, document, tmp_path)
    if sets:
        # No watchdog runs under blocking wait: the two sides' records all agree.
        assert disagreements == []
    else:
        # The watchdog's records of the aborted communicator come from PyTorch's log, which the
        # fake writes none of here.
        assert [d for d in disagreements if d["thread"] == "main"] == []


def test_an_exception_of_the_interpreter_s_own_is_no_finding_but_a_traceback_and_exit_3(
        resolve, interpret):
    # An AttributeError from inside a call stands for a bug of the interpreter (a torch API
    # called wrongly): not a collective failure of the scenario.
    path, _ = resolve("exp_b_stream_scope", "cluster.ranks=1")
    completed, document, _ = interpret(path, env={
        "FAKE_TORCH_RAISES": "work.wait=AttributeError: 'Work' object has no attribute 'x'"})
    assert completed.returncode == 3, completed.stderr
    assert "Traceback" in completed.stderr and "AttributeError" in completed.stderr
    assert document is None


WAIT_TIMEOUT_RAISED = (
    "work.wait=DistBackendError: [Rank 0] Watchdog caught collective operation timeout: "
    "WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=262144, NumelOut=262144, "
    "Timeout(ms)=600000) ran for 50 milliseconds before timing out.")


@pytest.mark.parametrize("catch", [True, False])
def test_a_collective_whose_wait_raised_is_unfinished_as_the_simulator_writes_it(
        resolve, interpret, simulate, tmp_path, catch):
    # wait_timeout: `wait_w`'s wait(timeout=50ms) raises and the program catches it (or, not
    # caught, stops). The interpreter kept the collective only once a wait had returned, so its
    # Timeline had neither a record nor an unfinished one of `ar`: `diff` reported "unfinished
    # collective (rank 0): ar … in A only" and the log's AsyncError about SeqNum=1 could name
    # no op.
    path, scenario = resolve("wait_timeout")
    for op in scenario["ops"]:
        if op["label"] == "wait_w":
            op["catch"] = catch
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(scenario))
    completed, document, calls = interpret(path, env={"FAKE_TORCH_RAISES": WAIT_TIMEOUT_RAISED})
    assert completed.returncode == (0 if catch else 1), completed.stderr
    assert document["machine"]["journal"].startswith("final" if catch else "partial")
    (rank,) = document["ranks"]
    (simulated_rank,) = simulate("wait_timeout")["ranks"]
    ops = {op["label"]: op["index"] for op in scenario["ops"]}
    assert rank["collectives"] == []
    (unfinished,) = rank["unfinished_collectives"]
    (expected,) = simulated_rank["unfinished_collectives"]
    for key in ("iteration", "op", "group", "seq", "bytes", "async_op", "call_stream",
                "run_stream"):
        assert unfinished[key] == expected[key], key
    assert (unfinished["op"], unfinished["seq"]) == (ops["ar"], 1)
    # Its wait returned, by raising: it ended where the call's host record ends.
    (wait_host,) = [h for h in rank["host"] if h["op"] == ops["wait_w"]]
    wait = unfinished["wait"]
    assert {key: wait[key] for key in ("op", "stream")} == {
        key: expected["wait"][key] for key in ("op", "stream")}
    assert wait["host_start_ns"] <= wait["host_end_ns"] <= wait_host["end_ns"]
    assert wait_host["start_ns"] <= wait["host_start_ns"]
    # Whether the raise released the stream the interpreter cannot see: as in the simulator,
    # no stream wait is written never released; the call raised, so none is open.
    assert "unfinished_stream_waits" not in simulated_rank
    for key in ("unfinished_stream_waits", "unfinished_host"):
        assert key not in rank, key
    assert rank.get("unfinished_iteration") == (None if catch else 0)


# caught_timeout with a synchronous `ar` under the 2.5 profile: the wrapper's implicit wait()
# polls under blocking wait and times out behind the 2 s backlog (R11, R15).
SYNC_BLOCKING_WAIT = """
torch = "2.5"
[cluster]
ranks = 1
[env]
TORCH_NCCL_BLOCKING_WAIT = 1
[groups.world]
eager_init = true
timeout_s = 0.5
[tensors]
x = "1MiB"
[[op]]
label = "backlog"
gpu_sleep_us = 2_000_000
[[op]]
label = "ar"
%s = "x"
%s
[[op]]
label = "after"
kernel = { us = 5 }
"""

IMPLICIT_WAIT_TIMEOUT = (
    "DistBackendError: [Rank 0] Watchdog caught collective operation timeout: "
    "WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=262144, NumelOut=262144, "
    "Timeout(ms)=500) ran for 500 milliseconds before timing out.")


@pytest.mark.parametrize("call", ["all_reduce", "barrier"])
@pytest.mark.parametrize("catch", [True, False])
def test_a_synchronous_call_whose_implicit_wait_raised_is_unfinished_as_simulated(
        resolve, interpret, simulate, tmp_path, call, catch):
    # A synchronous all_reduce's (or barrier's) implicit wait() times out under blocking wait.
    # The interpreter made an all_reduce's record only once the call had returned, so its
    # Timeline had no `ar` at all where the simulator's has it unfinished, and the finding was a
    # watchdog_timeout (uncaught) or none (caught) where the simulator's is a wait_timeout naming
    # `ar`. A barrier's record, made before the call, kept its wait open (host_end_ns null, made
    # for a process taken down inside the call): a wait that never returned, where the
    # simulator's wait ends at the raise.
    text = SYNC_BLOCKING_WAIT % (call, "catch = true" if catch else "")
    source = scenario_file(tmp_path, "sync_timeout", text.replace('barrier = "x"', "barrier = true"))
    simulated = simulate(source)
    path, scenario = resolve(source)
    ops = {op["label"]: op["index"] for op in scenario["ops"]}
    completed, document, _ = interpret(path, env={
        "FAKE_TORCH_RAISES": call + "=" + IMPLICIT_WAIT_TIMEOUT})
    assert completed.returncode == (0 if catch else 1), completed.stderr
    (rank,) = document["ranks"]
    (expected,) = simulated["ranks"]
    assert rank["collectives"] == expected["collectives"] == []
    (unfinished,) = rank["unfinished_collectives"]
    (simulated_unfinished,) = expected["unfinished_collectives"]
    for key in ("iteration", "op", "group", "seq", "bytes", "async_op", "call_stream",
                "run_stream"):
        assert unfinished[key] == simulated_unfinished[key], key
    assert unfinished["op"] == ops["ar"]
    # The implicit wait ends at the raise, where the call's host record ends.
    (host,) = [h for h in rank["host"] if h["op"] == ops["ar"]]
    wait = unfinished["wait"]
    assert (wait["op"], wait["stream"]) == (ops["ar"], simulated_unfinished["wait"]["stream"])
    assert host["start_ns"] <= wait["host_start_ns"] <= wait["host_end_ns"] <= host["end_ns"]
    for key in ("unfinished_stream_waits", "unfinished_host"):
        assert key not in rank, key
    assert ([(f["kind"], f["op"]) for f in document["findings"]]
            == [(f["kind"], f["op"]) for f in simulated["findings"]]
            == [("wait_timeout", ops["ar"])])


@pytest.mark.parametrize("call", ["all_reduce", "barrier"])
def test_a_call_on_an_aborted_communicator_writes_no_collective_as_simulated(
        resolve, interpret, simulate, tmp_path, call):
    # caught_timeout's `retry`, a synchronous all_reduce (under the 2.5 profile) or a barrier
    # on the communicator the blocking wait aborted, raises before it issues anything (R27): no
    # record of it on either side, however a call is kept for a raise in its implicit wait. A
    # barrier's record, made before the call, was kept: an unfinished collective the simulator
    # has not.
    text = scenario_source("caught_timeout").read_text()
    if call == "barrier":
        text = text.replace('label = "retry"\nall_reduce = "x"', 'label = "retry"\nbarrier = true')
        assert "barrier = true" in text
    else:
        text = text.replace("[cluster]", 'torch = "2.5"\n[cluster]')
    source = scenario_file(tmp_path, "retry_" + call, text)
    simulated = simulate(source)
    path, scenario = resolve(source)
    raises = ("all_reduce:2" if call == "all_reduce" else "barrier") + (
        "=DistBackendError: NCCL communicator was aborted on rank 0.")
    completed, document, _ = interpret(path, env={"FAKE_TORCH_RAISES": raises})
    assert completed.returncode == 0, completed.stderr
    (rank,) = document["ranks"]
    (expected,) = simulated["ranks"]
    retry = next(op["index"] for op in scenario["ops"] if op["label"] == "retry")
    assert [e["op"] for e in rank["exceptions"]] == [retry]
    assert retry not in [r["op"] for r in expected.get("unfinished_collectives", [])]
    for key in ("collectives", "unfinished_collectives"):
        assert retry not in [r["op"] for r in rank.get(key, [])], key
    if call == "all_reduce":
        assert [r["seq"] for r in rank["collectives"]] == [1]
