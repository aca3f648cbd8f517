"""The interpreter's logic against the fake torch: ops dispatched, environment exported before
the import, the Timeline's shape, caught exceptions, faults and refusals.

About 1,400 lines in one module: its 62 tests share the fake torch's fixtures and the Timeline
field order they check against (RANK_FIELDS)."""

import json
import pathlib
import random
import signal
import statistics

import pytest

from conftest import scenario_source
from c10dsim.torch import timeline as tl
from c10dsim.torch.__main__ import MEASUREMENT_ENV, export_environment, tears_down_at_the_end

RANK_FIELDS = ["rank", "streams", "host", "kernels", "collectives", "marks", "stream_waits",
               "queries", "memory", "cache_releases", "races"]


# What a Work's wait() raises when its collective timed out: PyTorch 2.11's DistBackendError.
WAIT_TIMES_OUT = {"FAKE_TORCH_RAISES": (
    "work.wait=DistBackendError: Watchdog caught collective operation timeout: "
    "WorkNCCL(SeqNum=1, OpType=ALLREDUCE) ran for 600000 milliseconds before timing out")}


def names(calls):
    return [call[0] for call in calls]


def test_every_op_of_the_overlap_benchmark_is_dispatched_to_torch(resolve, interpret):
    path, scenario = resolve("overlap_bench", "cluster.ranks=1")
    completed, document, calls = interpret(path)
    assert completed.returncode == 0, completed.stderr
    called = names(calls)
    iterations = scenario["repeat"]
    gemms = sum(op["kind"]["kind"] == "gemm" for op in scenario["ops"])
    collectives = sum(op["kind"]["kind"] == "collective" for op in scenario["ops"])
    assert called.count("matmul") == gemms * iterations
    assert called.count("all_reduce") == collectives * iterations
    assert "item" in called and "cuda.synchronize" in called and "work.wait" in called
    (init,) = [call for call in calls if call[0] == "init_process_group"]
    eager = scenario["groups"][0]["eager_init"]
    assert init[1:4] == ["nccl", "0", "1"] and init[5] == str(eager)


def test_with_the_flight_recorder_off_no_dump_is_asked_for_and_the_machine_map_says_so(
        resolve, interpret):
    path, scenario = resolve("exp_b_stream_scope", "cluster.ranks=1",
                             "env.TORCH_FR_BUFFER_SIZE=0")
    assert scenario["env"]["trace_buffer_entries"] == 0
    completed, document, _ = interpret(path)
    assert completed.returncode == 0, completed.stderr
    assert document["machine"]["kernel_durations"] == (
        "unavailable (the Flight Recorder is off: TORCH_FR_BUFFER_SIZE = 0)")
    # Kernel ends fall back to the waits' releases: every collective still has its record.
    (rank,) = document["ranks"]
    assert rank["collectives"] and all(c["end_ns"] >= c["kernel_start_ns"]
                                       for c in rank["collectives"])


def test_the_timeline_has_the_rust_shape_and_one_host_record_per_op_and_iteration(
        resolve, interpret):
    path, scenario = resolve("exp_b_stream_scope", "cluster.ranks=1", "repeat=3",
                             "warmup=1")
    completed, document, _ = interpret(path)
    assert completed.returncode == 0, completed.stderr
    assert document["format"] == tl.TIMELINE_FORMAT and document["source"] == "torch"
    assert list(document) == ["format", "source", "scenario", "machine", "ops", "ranks",
                              "findings", "watchdog"]
    assert all(isinstance(v, str) for v in document["machine"].values())
    assert document["machine"]["kernel_durations"] == (
        "Flight Recorder duration_ms for 3 of 3 collectives (after 1 dumps)")
    for key in ("torch", "nccl", "device", "host_origin_unix_ns", "host_origin_monotonic_ns",
                "exit_status"):
        assert key in document["machine"]
    assert [op["index"] for op in document["ops"]] == list(range(len(scenario["ops"])))
    (rank,) = document["ranks"]
    assert list(rank) == RANK_FIELDS
    # `repeat` counts every iteration, the warmup one among them, as the simulator runs it.
    iterations = scenario["repeat"]
    assert {h["iteration"] for h in rank["host"]} == set(range(iterations))
    assert len(rank["host"]) == len(scenario["ops"]) * iterations
    assert [s["kind"] for s in rank["streams"]][-1] == "nccl"
    (collective,) = {c["op"] for c in rank["collectives"]}
    assert len(rank["collectives"]) == iterations
    for record in rank["collectives"]:
        assert record["kernel_start_ns"] <= record["end_ns"]
        assert record["wait"]["released_ns"] >= record["wait"]["host_start_ns"] - 10**6
    assert len(rank["marks"]) == len([o for o in scenario["ops"] if o["kind"]["kind"] == "mark"]) * iterations
    assert any(k["class"] == "sleep" for k in rank["kernels"])


def test_a_synchronous_call_on_the_calling_stream_has_no_wait(resolve, interpret):
    # PyTorch >= 2.8 returns no Work from a synchronous call on the calling stream and the
    # wrapper waits for nothing (R11): no wait, as the simulator records none; the kernel's end
    # is its Flight Recorder duration.
    path, _ = resolve("nccl_tests_all_reduce", "cluster.ranks=1")
    completed, document, calls = interpret(
        path, env={"FAKE_TORCH_VERSION": "2.11.0", "FAKE_TORCH_DURATION_MS": "0.0001"})
    assert completed.returncode == 0, completed.stderr
    assert "work.wait" not in names(calls)
    (rank,) = document["ranks"]
    assert rank["collectives"]
    for record in rank["collectives"]:
        assert not record["async_op"] and record["run_stream"] == record["call_stream"]
        assert record["wait"] is None
        assert "stream_passed_ns" not in record
        assert record["end_ns"] - record["kernel_start_ns"] == 100
    # No cudaStreamWaitEvent orders a kernel after its own stream, as the simulator records it.
    collective_ops = {record["op"] for record in rank["collectives"]}
    assert not [w for w in rank["stream_waits"] if w["op"] in collective_ops]


def test_without_durations_a_synchronous_call_on_the_calling_stream_ends_by_the_probe(
        resolve, interpret, tmp_path):
    # The Flight Recorder off, the probe after the call bounds the kernel's end: every call
    # keeps its record, still without a wait.
    source = tmp_path / "sync_list.toml"
    source.write_text(SYNC_LIST)
    path, scenario = resolve(str(source))
    completed, document, _ = interpret(path, env={"FAKE_TORCH_VERSION": "2.11.0"})
    assert completed.returncode == 0, completed.stderr
    (rank,) = document["ranks"]
    iterations = scenario["repeat"]
    assert len(rank["collectives"]) == 4 * iterations
    for record in rank["collectives"]:
        assert record["run_stream"] == record["call_stream"] and record["wait"] is None
        assert "stream_passed_ns" not in record
        assert record["end_ns"] >= record["kernel_start_ns"]


def test_a_synchronous_call_on_the_internal_stream_keeps_the_probe(resolve, interpret):
    path, scenario = resolve("nccl_tests_all_reduce", "cluster.ranks=1")
    completed, document, _ = interpret(
        path, env={"FAKE_TORCH_VERSION": "2.5.1", "FAKE_TORCH_DURATION_MS": "0.0001"})
    assert completed.returncode == 0, completed.stderr
    (rank,) = document["ranks"]
    calls = scenario["repeat"] * len(scenario["ops"])
    assert len(rank["collectives"]) == calls
    for record in rank["collectives"]:
        assert record["run_stream"] != record["wait"]["stream"]
        assert record["wait"]["released_ns"] >= record["host_end_ns"]
    # The internal stream waits for the input, the calling stream for the kernel's end.
    assert len(rank["stream_waits"]) == 2 * calls


SYNC_LIST = """
name = "sync_list"
[cluster]
ranks = 1
[env]
TORCH_FR_BUFFER_SIZE = 0
[tensors]
grads = { size = "1MiB", count = 4 }
[[op]]
all_reduce = "grads"
[[op]]
gpu_sleep_us = 10
"""


def test_each_synchronous_call_of_a_list_is_released_right_after_itself(
        resolve, interpret, tmp_path):
    # One all_reduce per tensor, each waited by its own call: its release probe follows it, not
    # the list's last call (with the Flight Recorder off, the release is the kernel's end).
    source = tmp_path / "sync_list.toml"
    source.write_text(SYNC_LIST)
    path, _ = resolve(str(source))
    completed, document, _ = interpret(path, env={"FAKE_TORCH_VERSION": "2.5.1"})
    assert completed.returncode == 0, completed.stderr
    (rank,) = document["ranks"]
    for iteration in {c["iteration"] for c in rank["collectives"]}:
        calls = [c for c in rank["collectives"] if c["iteration"] == iteration]
        assert len(calls) == 4
        for call, following in zip(calls, calls[1:]):
            # GPU times against GPU times (the fake's sit a constant off the host's): the probe
            # after a call fires before the one before the next call.
            assert call["wait"]["released_ns"] < following["input_ready_ns"]
            assert call["end_ns"] < following["input_ready_ns"]


def test_the_scenario_environment_is_exported_before_torch_is_imported(resolve, interpret):
    path, _ = resolve("sm_contention", "cluster.ranks=1", "env.TORCH_NCCL_BLOCKING_WAIT=1")
    completed, document, calls = interpret(
        path, env={"FAKE_TORCH_WATCH": "TORCH_NCCL_BLOCKING_WAIT,TORCH_NCCL_ENABLE_TIMING"})
    assert completed.returncode == 0, completed.stderr
    assert calls[0] == ["import", "TORCH_NCCL_BLOCKING_WAIT=1"]
    assert calls[1] == ["import", "TORCH_NCCL_ENABLE_TIMING=1"]
    assert "TORCH_NCCL_BLOCKING_WAIT=1" in document["machine"]["env"]


def test_a_scenario_value_wins_over_the_measurement_defaults():
    environ = {}
    exported = export_environment({"env": {"raw": {"TORCH_NCCL_ENABLE_TIMING": "0"}}},
                                  environ)
    assert environ["TORCH_NCCL_ENABLE_TIMING"] == "0"
    assert set(exported) == set(MEASUREMENT_ENV)


def test_the_simulated_module_loading_is_exported_over_the_shells(resolve):
    # The simulator's barrier waits for the device at its fill kernel's first launch under
    # lazy loading (R14); a shell's CUDA_MODULE_LOADING=EAGER must not change the measured run.
    path, scenario = resolve("timeout_dump", "cluster.ranks=1")
    assert scenario["env"]["lazy_module_loading"] is True
    environ = {"CUDA_MODULE_LOADING": "EAGER"}
    exported = export_environment(scenario, environ)
    assert environ["CUDA_MODULE_LOADING"] == exported["CUDA_MODULE_LOADING"] == "LAZY"
    path, scenario = resolve("timeout_dump", "cluster.ranks=1", "env.CUDA_MODULE_LOADING=EAGER")
    environ = {}
    export_environment(scenario, environ)
    assert environ["CUDA_MODULE_LOADING"] == "EAGER"


def test_the_simulated_error_handling_mode_is_exported_over_torchruns_default(resolve,
                                                                            interpret):
    # torchrun sets TORCH_NCCL_ASYNC_ERROR_HANDLING=1 for its workers; the scenario is silent,
    # so the simulator assumes PyTorch's default, 3, and the measured run must too.
    path, scenario = resolve("timeout_dump", "cluster.ranks=1")
    assert scenario["env"]["async_error_handling"] == "SkipCleanUp"
    completed, document, calls = interpret(
        path, env={"TORCH_NCCL_ASYNC_ERROR_HANDLING": "1",
                   "FAKE_TORCH_WATCH": "TORCH_NCCL_ASYNC_ERROR_HANDLING"})
    assert calls[0] == ["import", "TORCH_NCCL_ASYNC_ERROR_HANDLING=3"], calls[:2]
    assert "TORCH_NCCL_ASYNC_ERROR_HANDLING=3" in document["machine"]["env"]
    path, scenario = resolve("timeout_dump", "cluster.ranks=1",
                             "env.TORCH_NCCL_ASYNC_ERROR_HANDLING=1")
    assert scenario["env"]["async_error_handling"] == "TearDown"
    environ = {}
    export_environment(scenario, environ)
    assert environ["TORCH_NCCL_ASYNC_ERROR_HANDLING"] == "1"
    for number, mode in enumerate(["NoHandling", "TearDown", "CleanUpOnly", "SkipCleanUp"]):
        environ = {}
        export_environment({"env": {"raw": {}, "async_error_handling": mode}}, environ)
        assert environ["TORCH_NCCL_ASYNC_ERROR_HANDLING"] == str(number)


def test_a_scenario_flight_recorder_size_under_either_name_is_not_overridden():
    environ = {}
    exported = export_environment(
        {"env": {"raw": {"TORCH_NCCL_TRACE_BUFFER_SIZE": "500"}}}, environ)
    assert environ["TORCH_NCCL_TRACE_BUFFER_SIZE"] == "500"
    assert "TORCH_FR_BUFFER_SIZE" not in environ
    assert set(exported) == {"TORCH_NCCL_TRACE_BUFFER_SIZE", "TORCH_NCCL_ENABLE_TIMING"}


def test_coalesced_and_functional_collectives_use_their_torch_apis(resolve, interpret):
    path, _ = resolve("coalescing", "cluster.ranks=1")
    completed, _, calls = interpret(path)
    assert completed.returncode == 0, completed.stderr
    assert "coalescing_manager.enter" in names(calls)
    path, _ = resolve("functional_collective", "cluster.ranks=1")
    completed, document, calls = interpret(path)
    assert completed.returncode == 0, completed.stderr
    # repeat = 3 iterations, the warmup one among them.
    assert names(calls).count("functional.all_reduce") == 3
    assert names(calls).count("functional.wait_tensor") == 3
    assert document["ops"][0]["host_name"].endswith("_functional_collectives.all_reduce")


def test_a_functional_result_is_bound_to_its_name_and_replaces_the_previous_one(
        resolve, interpret):
    # y = fcol.all_reduce(x): y is the call's new tensor, not one made at setup; the y of the
    # previous iteration goes when the name is rebound, after the call made the new one, so
    # the peak is x and two results, whatever the number of iterations (R30).
    peaks = []
    for repeat in (2, 5):
        path, _ = resolve("functional_collective", "cluster.ranks=1", "repeat=%d" % repeat)
        completed, document, _ = interpret(path)
        assert completed.returncode == 0, completed.stderr
        memory = document["ranks"][0]["memory"]
        own = int(document["machine"]["interpreter_allocated_bytes"])
        peaks.append(memory["peak_allocated_bytes"] - own)
    assert peaks == [3 * 25 * 2**20] * 2


def test_an_op_given_a_functional_result_gets_the_call_s_tensor(resolve, interpret, tmp_path):
    # `.item()` of y and an all_reduce of y read the tensor the call returned: there is no
    # other y (R30).
    source = tmp_path / "functional_result_used.toml"
    source.write_text("[cluster]\nranks = 1\n[tensors]\nx = \"1MiB\"\ny = \"1MiB\"\n"
                      "[[op]]\nfunctional_all_reduce = \"x\"\nresult = \"y\"\n"
                      "[[op]]\nitem = \"y\"\n[[op]]\nall_reduce = \"y\"\n")
    path, _ = resolve(str(source))
    completed, _, calls = interpret(path)
    assert completed.returncode == 0, completed.stderr
    assert names(calls).count("item") == 1


def test_y_equals_fcol_all_reduce_of_y_reduces_the_y_made_at_setup(resolve, simulate,
                                                                  interpret, tmp_path):
    # `y = fcol.all_reduce(y)`: the call reads y before it binds its result, so y is the
    # program's from the start, made at setup (R30); the peak is that y and the call's result,
    # in the simulator as in PyTorch.
    source = tmp_path / "functional_in_place.toml"
    source.write_text("repeat = 1\n[cluster]\nranks = 1\n[tensors]\ny = \"1MiB\"\n"
                      "[[op]]\nfunctional_all_reduce = \"y\"\nresult = \"y\"\n")
    path, scenario = resolve(str(source))
    assert scenario["tensors"][0]["dynamic"] is False
    completed, _, calls = interpret(path)
    assert completed.returncode == 0, completed.stderr
    assert names(calls).count("functional.all_reduce") == 1
    memory = simulate(str(source))["ranks"][0]["memory"]
    assert memory["peak_allocated_bytes"] == 2 * 2**20


def test_a_result_the_previous_iteration_left_is_waited_only_once_there_is_one(
        resolve, interpret, tmp_path):
    # y = fcol.all_reduce(x); use(y); x = fcol.all_reduce(y): the wait_tensor(x) before the
    # first call has no result to wait on in the first iteration (R30): no call, no host record.
    source = tmp_path / "functional_loop.toml"
    source.write_text("repeat = 3\n[cluster]\nranks = 1\n[tensors]\nx = \"1MiB\"\n"
                      "y = \"1MiB\"\n[[op]]\nfunctional_all_reduce = \"x\"\nresult = \"y\"\n"
                      "[[op]]\nkernel = { us = 5 }\nreads = [\"y\"]\n"
                      "[[op]]\nfunctional_all_reduce = \"y\"\nresult = \"x\"\n")
    path, scenario = resolve(str(source))
    assert scenario["ops"][0]["kind"]["previous_iteration"] is True
    completed, document, calls = interpret(path)
    assert completed.returncode == 0, completed.stderr
    assert names(calls).count("functional.wait_tensor") == 3 + 2
    (rank,) = document["ranks"]
    assert [call["iteration"] for call in rank["host"] if call["op"] == 0] == [1, 2]


def test_a_result_whose_next_call_raised_is_not_waited_again(resolve, interpret, tmp_path):
    # y = fcol.all_reduce(x) raises from the second iteration on, caught: y still names the
    # first iteration's AsyncCollectiveTensor, completed by its wait_tensor, whose later uses
    # wait for nothing (R30): no call, no host record, its Work's wait record left as it was.
    source = tmp_path / "functional_raises.toml"
    source.write_text("repeat = 3\n[cluster]\nranks = 1\n[tensors]\nx = \"1MiB\"\n"
                      "y = \"1MiB\"\n[[op]]\nfunctional_all_reduce = \"x\"\nresult = \"y\"\n"
                      "catch = true\n[[op]]\nkernel = { us = 5 }\nreads = [\"y\"]\n")
    path, scenario = resolve(str(source))
    assert scenario["ops"][1]["label"] == "wait_tensor(y)"
    completed, document, calls = interpret(path, env={
        "FAKE_TORCH_RAISES": "functional.all_reduce:2=DistBackendError: NCCL communicator was "
                             "aborted on rank 0."})
    assert completed.returncode == 0, completed.stderr
    assert names(calls).count("functional.wait_tensor") == 1
    (rank,) = document["ranks"]
    assert [e["iteration"] for e in rank["exceptions"]] == [1, 2]
    (wait_call,) = [call for call in rank["host"] if call["op"] == 1]
    assert wait_call["iteration"] == 0
    (record,) = rank["collectives"]
    assert record["wait"]["host_start_ns"] == wait_call["start_ns"]


def test_a_result_no_call_bound_is_a_plain_tensor_whose_use_waits_for_nothing(
        resolve, interpret, tmp_path):
    # y = fcol.all_reduce(x) raises from its first call on, caught: y is still the plain
    # tensor it was, and its use calls nothing (R30), as the simulator lowers it.
    source = tmp_path / "functional_never_bound.toml"
    source.write_text("repeat = 2\n[cluster]\nranks = 1\n[tensors]\nx = \"1MiB\"\n"
                      "y = \"1MiB\"\n[[op]]\nfunctional_all_reduce = \"x\"\nresult = \"y\"\n"
                      "catch = true\n[[op]]\nkernel = { us = 5 }\nreads = [\"y\"]\n")
    path, scenario = resolve(str(source))
    assert scenario["ops"][1]["label"] == "wait_tensor(y)"
    completed, document, calls = interpret(path, env={
        "FAKE_TORCH_RAISES": "functional.all_reduce=DistBackendError: NCCL communicator was "
                             "aborted on rank 0."})
    assert completed.returncode == 0, completed.stderr
    assert names(calls).count("functional.wait_tensor") == 0
    (rank,) = document["ranks"]
    assert [e["iteration"] for e in rank["exceptions"]] == [0, 1]
    assert not [call for call in rank["host"] if call["op"] == 1]



@pytest.mark.parametrize("use", ["wait", "is_completed", "get_future"])
def test_a_work_name_whose_only_call_raised_is_a_name_error_that_ends_the_program(
        resolve, interpret, tmp_path, use):
    # w2 = dist.all_reduce(x, async_op=True) raises, caught: w2 is never bound, and its use
    # raises Python's NameError, which `except DistBackendError:` does not catch: the program
    # stops there with the simulator's program_error finding. The interpreter used to go on
    # as if the name held no Work.
    source = tmp_path / "unbound.toml"
    source.write_text("[cluster]\nranks = 1\n[tensors]\nx = \"1MiB\"\n"
                      "[[op]]\nall_reduce = \"x\"\n"
                      "[[op]]\nlabel = \"retry\"\nall_reduce = \"x\"\nasync_op = true\n"
                      "work = \"w2\"\ncatch = true\n"
                      "[[op]]\nlabel = \"use_w2\"\n%s = \"w2\"\n"
                      "[[op]]\nlabel = \"after\"\nkernel = { us = 5 }\n" % use)
    path, _ = resolve(str(source))
    completed, document, calls = interpret(path, env={
        "FAKE_TORCH_RAISES": "all_reduce:2=DistBackendError: NCCL communicator was aborted on "
                             "rank 0."})
    assert completed.returncode == 1, completed.stderr
    (finding,) = document["findings"]
    message = ("[Rank 0] NameError: name 'w2' is not defined; use_w2 (line 13) raises it in the "
               "main thread (every call that would have bound the Work raised first) and, "
               "uncaught, ends the process")
    assert (finding["kind"], finding["op"], finding["message"]) == ("program_error", 2, message)
    (rank,) = document["ranks"]
    assert [e["op"] for e in rank["exceptions"]] == [1]
    assert not [call for call in rank["host"] if call["op"] == 3]
    assert "work.wait" not in names(calls) and "work.is_completed" not in names(calls)


def test_a_timed_out_wait_is_caught_recorded_with_its_time_and_ends_the_program(
        resolve, interpret):
    path, scenario = resolve("exp_b_stream_scope", "cluster.ranks=1")
    completed, document, calls = interpret(path, env=WAIT_TIMES_OUT)
    assert completed.returncode == 1
    (finding,) = document["findings"]
    assert finding["kind"] == "watchdog_timeout" and finding["iteration"] == 0
    assert "DistBackendError" in finding["message"]
    events = [record["event"] for record in document["watchdog"]]
    assert events == ["timeout", "exit"]
    assert document["machine"]["exit_status"] == "1"
    assert names(calls).count("work.wait") == 1


def test_a_wait_with_catch_records_the_exception_and_goes_on(resolve, interpret, tmp_path):
    path, scenario = resolve("exp_b_stream_scope", "cluster.ranks=1")
    waits = [op for op in scenario["ops"] if op["kind"]["kind"] == "wait"]
    for op in waits:
        op["catch"] = True
    edited = tmp_path / "caught.json"
    edited.write_text(json.dumps(scenario))
    completed, document, calls = interpret(str(edited), env=WAIT_TIMES_OUT)
    assert completed.returncode == 0, completed.stderr
    (rank,) = document["ranks"]
    iterations = scenario["repeat"]
    assert len(rank["exceptions"]) == len(waits) * iterations
    # A caught timeout is still a timed-out wait: the finding the simulator writes too.
    assert [f["kind"] for f in document["findings"]] == ["wait_timeout"] * len(rank["exceptions"])
    assert {f["op"] for f in document["findings"]} == {op["index"] for op in waits}
    first = rank["exceptions"][0]
    assert first["exception"] == "DistBackendError" and first["op"] == waits[0]["index"]
    host = [h for h in rank["host"] if h["op"] == waits[0]["index"]]
    assert host[0]["end_ns"] == first["at_ns"]
    assert names(calls).count("work.wait") == len(waits) * iterations


def test_a_dying_rank_is_killed_after_writing_what_it_did(resolve, interpret):
    path, _ = resolve("rank0_crash_init")
    completed, document, _ = interpret(path)
    assert completed.returncode == -9
    assert [r["event"] for r in document["watchdog"]] == ["fault", "exit"]
    assert document["machine"]["journal"].startswith("partial")


def test_a_process_taken_down_in_the_final_drain_leaves_what_it_measured(
        resolve, interpret, tmp_path):
    # After the last op the interpreter drains the GPU; a Work still pending there can time out
    # and the watchdog end the process inside that synchronize (docs/torch.md, exit_probe):
    # the journal writes the records measured so far, as for a blocking op of the program.
    source = tmp_path / "pending_at_the_end.toml"
    source.write_text("""
repeat = 1
warmup = 0
[cluster]
ranks = 1
[tensors]
x = "1MiB"
[[op]]
all_reduce = "x"
async_op = true
work = "w"
""")
    path, _ = resolve(str(source))
    # The first synchronize ends the setup, the second is the drain.
    completed, document, calls = interpret(path, env={"FAKE_TORCH_ABORTS": "cuda.synchronize:2"})
    assert completed.returncode == -signal.SIGABRT, completed.stderr
    assert names(calls).count("cuda.synchronize") == 2
    assert document is not None, "the journal wrote nothing"
    assert document["machine"]["journal"].startswith("partial")
    (rank,) = document["ranks"]
    assert [h["op"] for h in rank["host"]] == [0]
    # The program returned: no call left open, no iteration unfinished (the drain is the
    # process's, R31).
    assert "unfinished_host" not in rank and "unfinished_iteration" not in rank


BLOCKED_ITEM = """
repeat = 2
warmup = 0
[cluster]
ranks = 1
[tensors]
x = "1MiB"
[[op]]
all_reduce = "x"
async_op = true
work = "w"
[[op]]
wait = "w"
[[op]]
item = "x"
"""


def test_a_process_taken_down_inside_item_leaves_the_open_call_and_what_never_completed(
        resolve, interpret, tmp_path):
    # The GPU stops at the second all_reduce: its wait() returns (a wait does not block the
    # host), the .item() after it blocks until the watchdog takes the process down. The
    # journal's Timeline says where: the call that never returned, its iteration, and the
    # collective whose Work never completed with the host side of its wait.
    source = tmp_path / "blocked_item.toml"
    source.write_text(BLOCKED_ITEM)
    path, _ = resolve(str(source))
    completed, document, _ = interpret(path, env={"FAKE_TORCH_GPU_STOPS": "all_reduce:2",
                                                  "FAKE_TORCH_ABORTS": "item:2"})
    assert completed.returncode == -signal.SIGABRT, completed.stderr
    assert document["machine"]["journal"].startswith("partial")
    (rank,) = document["ranks"]
    assert [(h["iteration"], h["op"]) for h in rank["host"]] == [(0, 0), (0, 1), (0, 2),
                                                                (1, 0), (1, 1)]
    assert rank["unfinished_host"] == {
        "iteration": 1, "op": 2, "start_ns": rank["unfinished_host"]["start_ns"],
        "blocked_on": {"kind": "stream", "stream": 0}}
    assert rank["unfinished_host"]["start_ns"] >= rank["host"][-1]["end_ns"]
    assert rank["unfinished_iteration"] == 1
    assert [(c["iteration"], c["seq"]) for c in rank["collectives"]] == [(0, 1)]
    (never,) = rank["unfinished_collectives"]
    wait = [h for h in rank["host"] if (h["iteration"], h["op"]) == (1, 1)][0]
    assert (never["iteration"], never["op"], never["group"], never["seq"]) == (1, 0, 0, 2)
    assert never["input_ready_ns"] is not None and never["kernel_start_ns"] is None
    assert never["kernel_end_ns"] is None
    assert never["wait"] == {"op": 1, "host_start_ns": wait["start_ns"],
                             "host_end_ns": wait["end_ns"], "stream": 0}
    # The wait()'s cudaStreamWaitEvent on the Work's end event, which never fired: the current
    # stream was never released, as the simulator writes it (docs/timeline-format.md).
    assert rank["unfinished_stream_waits"] == [
        {"iteration": 1, "op": 1, "source_stream": never["run_stream"], "source_ns": None,
         "waiting_stream": 0}]
    assert never["run_stream"] != 0
    # In the Rust field order.
    assert list(rank)[:14] == RANK_FIELDS[:8] + ["unfinished_collectives",
                                                 "unfinished_stream_waits", "unfinished_host",
                                                 "unfinished_iteration", "memory",
                                                 "cache_releases"]


BLOCKED_INPUT = """
warmup = 0
[cluster]
ranks = 1
[tensors]
x = "1MiB"
[[op]]
gpu_sleep_us = 100
[[op]]
all_reduce = "x"
async_op = true
work = "w"
[[op]]
wait = "w"
[[op]]
item = "x"
"""


def test_a_collective_whose_input_never_came_leaves_both_its_stream_waits_unreleased(
        resolve, interpret, tmp_path):
    # The sleep before the all_reduce (the third: two calibrate) never ends: its internal stream's wait on its input
    # (R10a) and the current stream's wait() on its end (R12) are never released, in the order
    # the host made them.
    source = tmp_path / "blocked_input.toml"
    source.write_text(BLOCKED_INPUT)
    path, _ = resolve(str(source))
    completed, document, _ = interpret(path, env={"FAKE_TORCH_GPU_STOPS": "_sleep:3",
                                                  "FAKE_TORCH_ABORTS": "item:1"})
    assert completed.returncode == -signal.SIGABRT, completed.stderr
    (rank,) = document["ranks"]
    (never,) = rank["unfinished_collectives"]
    assert never["input_ready_ns"] is None and never["wait"]["op"] == 2
    nccl = never["run_stream"]
    assert rank["unfinished_stream_waits"] == [
        {"iteration": 0, "op": 1, "source_stream": 0, "source_ns": None, "waiting_stream": nccl},
        {"iteration": 0, "op": 2, "source_stream": nccl, "source_ns": None, "waiting_stream": 0}]
    assert rank["stream_waits"] == []


def test_a_process_taken_down_inside_a_wait_names_the_work_it_waits_for(
        resolve, interpret, tmp_path):
    # A wait that blocks (blocking wait, or wait(timeout)) on a Work whose collective never
    # completes: blocked on that Work, and its wait never returned.
    source = tmp_path / "blocked_wait.toml"
    source.write_text(BLOCKED_ITEM)
    path, _ = resolve(str(source))
    completed, document, _ = interpret(path, env={"FAKE_TORCH_GPU_STOPS": "all_reduce:1",
                                                  "FAKE_TORCH_ABORTS": "work.wait:1"})
    assert completed.returncode == -signal.SIGABRT, completed.stderr
    (rank,) = document["ranks"]
    assert [h["op"] for h in rank["host"]] == [0]
    start_ns = rank["unfinished_host"]["start_ns"]
    assert rank["unfinished_host"] == {
        "iteration": 0, "op": 1, "start_ns": start_ns,
        "blocked_on": {"kind": "work", "group": 0, "seq": 1, "aborting": False}}
    assert rank["unfinished_iteration"] == 0
    (never,) = rank["unfinished_collectives"]
    assert (never["op"], never["seq"]) == (0, 1)
    assert never["wait"] == {"op": 1, "host_start_ns": start_ns, "host_end_ns": None,
                             "stream": 0}
    assert rank["unfinished_stream_waits"] == [
        {"iteration": 0, "op": 1, "source_stream": never["run_stream"], "source_ns": None,
         "waiting_stream": 0}]
    assert "collectives" in rank and rank["collectives"] == []


def test_faults_that_pytorch_cannot_enact_are_refused_with_exit_2(resolve, interpret,
                                                                      tmp_path):
    path, scenario = resolve("mismatch")
    scenario["faults"][0]["ranks"] = [0]
    scenario["faults"][0]["kind"] = {"kind": "async_error", "after_ns": 5}
    edited = tmp_path / "async_error_rank0.json"
    edited.write_text(json.dumps(scenario))
    completed, document, calls = interpret(edited, world=2)
    assert completed.returncode == 2 and document is None
    assert "async_error" in completed.stderr and ":%d:" % scenario["ops"][0]["line"] \
        in completed.stderr
    assert "init_process_group" not in names(calls)


def test_faults_on_ranks_that_were_not_launched_are_left_out(resolve, interpret):
    path, scenario = resolve("watchdog_stuck")
    scenario_ranks = scenario["cluster"]["ranks"]
    completed, _, _ = interpret(path)
    assert scenario_ranks == 4 and completed.returncode == 2
    assert "watchdog_stuck" in completed.stderr
    path, _ = resolve("hang_10min")
    completed, document, _ = interpret(path)
    assert completed.returncode == 0, completed.stderr
    assert document["watchdog"] == [] and "downscale" in document["machine"]


@pytest.mark.parametrize("delay, mean, std", [
    ({"distribution": "normal", "mean_ns": 1000.0, "std_ns": 10.0}, 1000.0, 10.0),
    ({"distribution": "lognormal", "mean_ns": 200000.0, "std_ns": 50000.0}, 200000.0, 50000.0),
    ({"distribution": "exponential", "mean_ns": 1000.0}, 1000.0, 1000.0),
    ({"distribution": "gamma", "shape": 2.0, "scale_ns": 500.0}, 1000.0, 2**0.5 * 500.0),
    ({"distribution": "uniform", "min_ns": 10.0, "max_ns": 20.0}, 15.0, 10.0 / 12**0.5),
])
def test_drawn_delays_have_the_asked_mean_and_spread(delay, mean, std):
    rng = random.Random(1)
    draws = [tl.draw_delay_ns(delay, rng) for _ in range(4000)]
    assert all(isinstance(d, int) and d >= 0 for d in draws)
    # Whole ns: the draws are truncated, half a ns below on average.
    assert abs(statistics.fmean(draws) - mean) < 0.06 * mean + 1
    assert abs(statistics.pstdev(draws) - std) < 0.1 * std


def test_a_fixed_delay_is_exact():
    assert tl.draw_delay_ns({"distribution": "fixed", "ns": 1234}, random.Random(0)) == 1234


def test_an_op_kind_the_interpreter_does_not_know_is_refused(resolve, interpret, tmp_path):
    path, scenario = resolve("exp_b_stream_scope", "cluster.ranks=1")
    scenario["ops"][1]["kind"] = {"kind": "teleport"}
    edited = tmp_path / "unknown.json"
    edited.write_text(json.dumps(scenario))
    completed, document, _ = interpret(edited)
    assert completed.returncode == 2 and document is None
    assert "'teleport' is not known" in completed.stderr
    assert ":%d:" % scenario["ops"][1]["line"] in completed.stderr


def test_all_to_all_runs_as_all_to_all_single_into_a_receive_buffer(resolve, interpret):
    path, scenario = resolve("all_to_all", "cluster.ranks=1")
    completed, document, calls = interpret(path)
    assert completed.returncode == 0, completed.stderr
    iterations = scenario["repeat"]
    sends = sum(op["kind"].get("collective") == "all_to_all" for op in scenario["ops"])
    assert names(calls).count("all_to_all_single") == sends * iterations
    assert {op["host_name"] for op in document["ops"] if op["key"] == "all_to_all"} == {
        "torch.distributed.all_to_all_single"}


DYNAMIC_ALL_TO_ALL = """
name = "dynamic_all_to_all"
warmup = 0
[cluster]
ranks = 1
[tensors]
x = "1MiB"
[[op]]
alloc = "x"
[[op]]
all_to_all = "x"
async_op = true
work = "w"
[[op]]
wait = "w"
[[op]]
free = "x"
"""


def test_a_dynamic_tensor_s_receive_buffer_goes_with_the_tensor(resolve, interpret, tmp_path):
    # Each iteration's x is a new tensor with a receive buffer of its own, made at its first
    # all_to_all; freeing x frees both, so the peak does not grow with the iterations.
    source = tmp_path / "dynamic_all_to_all.toml"
    source.write_text(DYNAMIC_ALL_TO_ALL)
    peaks = []
    for repeat in (2, 6):
        path, _ = resolve(str(source), "repeat=%d" % repeat)
        completed, document, calls = interpret(path)
        assert completed.returncode == 0, completed.stderr
        assert names(calls).count("all_to_all_single") == repeat
        peaks.append(document["ranks"][0]["memory"]["peak_allocated_bytes"])
    assert peaks[0] == peaks[1] == 2 * 2**20


def test_send_and_recv_go_to_the_peer_without_a_group_of_their_own(resolve, interpret):
    path, _ = resolve("send_recv")
    # Rank 0 of a two-rank launch: it sends to rank 1.
    completed, document, calls = interpret(path, world=2)
    assert completed.returncode == 0, completed.stderr
    assert ["isend", "1"] in calls
    assert not any(call[0] == "new_group" for call in calls)
    assert {op["host_name"] for op in document["ops"] if op["key"] == "send"} == {
        "torch.distributed.isend"}


def test_get_future_then_launches_the_callback_kernel_after_the_collective(resolve, interpret):
    path, scenario = resolve("get_future", "cluster.ranks=1")
    completed, document, calls = interpret(path)
    assert completed.returncode == 0, completed.stderr
    iterations = scenario["repeat"]
    assert names(calls).count("future.then") == iterations
    (op,) = [op for op in scenario["ops"] if op["kind"]["kind"] == "get_future"]
    callback_kernels = [k for k in document["ranks"][0]["kernels"] if k["op"] == op["index"]]
    assert len(callback_kernels) == iterations
    pool = op["kind"]["callback"]["stream"]
    assert pool != 0 and all(k["stream"] == pool for k in callback_kernels)
    # The optimizer's wait is on the future then() returned, not on the Work.
    assert names(calls).count("future.wait") == iterations


@pytest.mark.parametrize("batch", ["", 'bucket = "8MiB"'])
def test_a_list_s_work_name_holds_its_last_call_s_work_as_in_the_simulator(
        resolve, simulate, interpret, tmp_path, batch):
    # `w = dist.all_reduce(t, async_op=True)` per tensor (or per bucket) binds `w` to each
    # call's Work in turn: the hook runs once, on the last Work, and is_completed and wait
    # ask that one (R25).
    source = tmp_path / "list_work.toml"
    source.write_text("""repeat = 2
[cluster]
ranks = 1
[streams]
pool = {}
[tensors]
g = { size = "4MiB", count = 3 }
[[op]]
label = "l"
all_reduce = "g"
async_op = true
work = "w"
%s
[[op]]
label = "hook"
get_future = "w"
then = { us = 15, stream = "pool" }
work = "hooked"
[[op]]
is_completed = "w"
[[op]]
wait = "hooked"
[[op]]
wait = "w"
""" % batch)
    path, scenario = resolve(str(source))
    completed, document, calls = interpret(path)
    assert completed.returncode == 0, completed.stderr
    simulated = simulate(str(source))

    def shape(timeline):
        rank = timeline["ranks"][0]
        return ([(k["iteration"], k["op"]) for k in rank["kernels"]
                 if k["class"] != "communication"],
                [(c["iteration"], c["seq"], c["wait"] and c["wait"]["op"])
                 for c in rank["collectives"]])

    assert shape(document) == shape(simulated)
    # Per iteration: one then(), one wait(), and is_completed() twice (the op's, and the
    # wait's completed_at_return).
    assert [names(calls).count(name) for name in ("future.then", "work.wait",
                                                  "work.is_completed")] == [2, 2, 4]


def test_a_send_whose_peer_was_not_launched_is_refused(resolve, interpret):
    path, scenario = resolve("send_recv")
    # One process: rank 0 would send to rank 1, which this launch does not run.
    completed, document, calls = interpret(path, world=1)
    assert completed.returncode == 2 and document is None
    assert "needs both processes" in completed.stderr
    (send,) = [op for op in scenario["ops"] if op["kind"].get("collective") == "send"]
    assert ":%d:" % send["line"] in completed.stderr
    assert "init_process_group" not in names(calls)


def test_batch_isend_irecv_sends_and_receives_by_shift_in_one_call(resolve, interpret):
    path, scenario = resolve("batch_isend_irecv", "cluster.ranks=2")
    # Rank 0 of two: +1 and -1 are both rank 1.
    completed, document, calls = interpret(path, world=2)
    assert completed.returncode == 0, completed.stderr
    iterations = scenario["repeat"]
    batches = [call for call in calls if call[0] == "batch_isend_irecv"]
    assert len(batches) == iterations
    assert batches[0][1:] == ["isend:1", "irecv:1"]
    (op,) = [op for op in scenario["ops"] if op["kind"]["kind"] == "batch_p2p"]
    records = [c for c in document["ranks"][0]["collectives"] if c["op"] == op["index"]]
    assert len(records) == iterations and all(c["bytes"] == 8 << 20 for c in records)
    completed, document, _ = interpret(path, world=1)
    assert completed.returncode == 2 and "need as many GPUs" in completed.stderr


def test_init_process_group_and_new_group_ops_run_once_in_program_order(resolve, interpret):
    path, scenario = resolve("process_group_setup", "op.init.device_id=true")
    completed, document, calls = interpret(path)
    assert completed.returncode == 0, completed.stderr
    called = names(calls)
    # Nothing is set up before the program: the init op comes first, then the backlog, the
    # world's all_reduce and new_group, each once although the program runs twice.
    assert called.count("init_process_group") == 1 and called.count("new_group") == 1
    (init,) = [call for call in calls if call[0] == "init_process_group"]
    assert init[5] == "True"
    # The group is described by its scenario name: PyTorch's log prefix then names it
    # (`[PG ID 1 PG GUID 1(sub) Rank 0]`), which is how `c10dsim torch` tells its Works.
    (new,) = [call for call in calls if call[0] == "new_group"]
    assert new[2] == "sub"
    assert called.index("init_process_group") < called.index("all_reduce")
    assert called.index("all_reduce") < called.index("new_group")
    assert called.count("all_reduce") == 2 * scenario["repeat"]
    (rank,) = document["ranks"]
    ops = {op["label"]: op["index"] for op in scenario["ops"]}
    setup = [h for h in rank["host"] if h["op"] in (ops["init"], ops["make_sub"])]
    assert [h["iteration"] for h in setup] == [0, 0]


@pytest.mark.parametrize("version, on_current", [("2.11.0+cu130", True), ("2.7.1", False)])
def test_a_synchronous_collective_runs_on_the_current_stream_from_pytorch_2_8(
        resolve, interpret, version, on_current):
    path, scenario = resolve("nccl_tests_all_reduce", "cluster.ranks=1", "repeat=2")
    completed, document, _ = interpret(path, env={"FAKE_TORCH_VERSION": version})
    assert completed.returncode == 0, completed.stderr
    collectives = document["ranks"][0]["collectives"]
    assert collectives and all(not c["async_op"] for c in collectives)
    for c in collectives:
        assert (c["run_stream"] == c["call_stream"]) == on_current, c


@pytest.mark.parametrize("version", ["2.11.0+cu130", "2.7.1"])
def test_a_synchronous_send_runs_on_the_internal_stream_in_every_version(
        resolve, interpret, tmp_path, version):
    # `dist.send` is `isend(...).wait()`: ProcessGroupNCCL's point-to-point path has no
    # `asyncOp`, so it never runs on the current stream (R11).
    source = tmp_path / "sync_send.toml"
    source.write_text('[cluster]\nranks = 2\n[tensors]\nact = "1MiB"\n'
                      '[[op]]\nranks = [0]\nsend = "act"\npeer = 1\n'
                      '[[op]]\nranks = [1]\nrecv = "act"\npeer = 0\n')
    path, _ = resolve(str(source))
    completed, document, calls = interpret(path, world=2, env={"FAKE_TORCH_VERSION": version})
    assert completed.returncode == 0, completed.stderr
    assert ["send", "1"] in calls
    (record,) = document["ranks"][0]["collectives"]
    assert not record["async_op"]
    assert record["run_stream"] != record["call_stream"], record


@pytest.mark.parametrize("version, on_current", [("2.11.0+cu130", True), ("2.7.1", False)])
def test_a_barrier_runs_on_the_current_stream_without_a_wait_from_pytorch_2_8(
        resolve, interpret, tmp_path, version, on_current):
    # Measured on PyTorch 2.11 (tests/data/torch/probes/barrier/): no cudaStreamWaitEvent, no
    # Work, the current stream synchronised inside the call (R11, R14).
    source = tmp_path / "barrier.toml"
    source.write_text("[cluster]\nranks = 1\n[[op]]\nbarrier = true\n")
    path, _ = resolve(str(source))
    completed, document, calls = interpret(path, env={"FAKE_TORCH_VERSION": version})
    assert completed.returncode == 0, completed.stderr
    assert "barrier" in names(calls)
    (record,) = document["ranks"][0]["collectives"]
    assert not record["async_op"]
    assert (record["run_stream"] == record["call_stream"]) == on_current, record
    assert (record["wait"] is None) == on_current, record
    assert record["bytes"] == 4, "one f32, as ProcessGroupNCCL::barrier's and the simulator's"


@pytest.mark.parametrize("version, on_current", [("2.11.0+cu130", True), ("2.7.1", False)])
def test_a_process_taken_down_inside_a_barrier_writes_its_collective_unfinished(
        resolve, interpret, tmp_path, version, on_current):
    # PyTorch 2.11 on an H100: a barrier behind a 5 s GPU sleep, 2 s group timeout, after a
    # warm-up barrier; the watchdog took the process down inside the second barrier, whose
    # collective the simulator writes unfinished (seq 2).
    source = tmp_path / "barrier_hang.toml"
    source.write_text("[cluster]\nranks = 1\n[[op]]\nbarrier = true\n[[op]]\nbarrier = true\n")
    path, _ = resolve(str(source))
    completed, document, _ = interpret(path, env={"FAKE_TORCH_VERSION": version,
                                                  "FAKE_TORCH_ABORTS": "barrier:2"})
    assert completed.returncode == -signal.SIGABRT, completed.stderr
    (rank,) = document["ranks"]
    assert [c["seq"] for c in rank["collectives"]] == [1]
    (never,) = rank["unfinished_collectives"]
    assert (never["op"], never["seq"], never["bytes"]) == (1, 2, 4)
    assert never["host_end_ns"] == never["host_start_ns"] >= rank["unfinished_host"]["start_ns"]
    assert rank["unfinished_host"]["op"] == 1
    if on_current:
        assert never["wait"] is None and never["run_stream"] == 0
    else:
        assert never["wait"] == {"op": 1, "host_start_ns": never["host_start_ns"],
                                 "host_end_ns": None, "stream": 0}


@pytest.mark.parametrize("call", ["send", "recv"])
def test_a_process_taken_down_inside_a_synchronous_send_or_recv_writes_it_unfinished(
        resolve, interpret, tmp_path, call):
    # `dist.send` is `isend(...).wait()` (R11): the process blocks inside the call until the
    # transfer is done, and the watchdog can take it down there; the simulator writes that
    # transfer unfinished, its wrapper's wait never returned.
    source = tmp_path / "sync_p2p_hang.toml"
    other = "recv" if call == "send" else "send"
    source.write_text('[cluster]\nranks = 2\n[tensors]\nact = "1MiB"\n'
                      '[[op]]\nranks = [0]\n%s = "act"\npeer = 1\n'
                      '[[op]]\nranks = [1]\n%s = "act"\npeer = 0\n' % (call, other))
    path, _ = resolve(str(source))
    completed, document, _ = interpret(path, world=2, env={"FAKE_TORCH_VERSION": "2.11.0+cu130",
                                                           "FAKE_TORCH_ABORTS": call + ":1"})
    assert completed.returncode == -signal.SIGABRT, completed.stderr
    (rank,) = document["ranks"]
    assert rank["collectives"] == []
    (never,) = rank["unfinished_collectives"]
    assert (never["op"], never["seq"], never["bytes"]) == (0, 1, 1 << 20)
    assert never["host_end_ns"] == never["host_start_ns"] >= rank["unfinished_host"]["start_ns"]
    assert never["run_stream"] != never["call_stream"]
    assert never["wait"] == {"op": 0, "host_start_ns": never["host_start_ns"],
                             "host_end_ns": None, "stream": 0}
    assert rank["unfinished_host"]["op"] == 0


@pytest.mark.parametrize("tensor, coalesce, aborting, nbytes", [
    ('"1MiB"', "", "all_reduce:2", 1 << 20),
    ('{ size = "1MiB", count = 2 }', "coalesce = true\n", "coalescing_manager.exit:2", 2 << 20)])
def test_a_process_taken_down_inside_a_2_5_synchronous_all_reduce_writes_it_unfinished(
        resolve, interpret, tmp_path, tensor, coalesce, aborting, nbytes):
    # Before PyTorch 2.8 a synchronous all_reduce (or coalescing block) runs on the group's
    # internal stream and the wrapper waits on its Work inside the call (R11): a process the
    # watchdog takes down there leaves the collective unfinished, as the simulator writes it.
    source = tmp_path / "sync_all_reduce_hang.toml"
    source.write_text('torch = "2.5"\n[cluster]\nranks = 1\n[tensors]\ngrad = %s\n'
                      '[[op]]\nall_reduce = "grad"\n%s'
                      '[[op]]\nall_reduce = "grad"\n%s' % (tensor, coalesce, coalesce))
    path, _ = resolve(str(source))
    completed, document, _ = interpret(path, env={"FAKE_TORCH_VERSION": "2.5.1",
                                                  "FAKE_TORCH_ABORTS": aborting})
    assert completed.returncode == -signal.SIGABRT, completed.stderr
    (rank,) = document["ranks"]
    assert [c["seq"] for c in rank["collectives"]] == [1]
    (never,) = rank["unfinished_collectives"]
    assert (never["op"], never["seq"], never["bytes"]) == (1, 2, nbytes)
    assert never["host_end_ns"] == never["host_start_ns"] >= rank["unfinished_host"]["start_ns"]
    assert never["run_stream"] != never["call_stream"]
    assert never["wait"] == {"op": 1, "host_start_ns": never["host_start_ns"],
                             "host_end_ns": None, "stream": 0}
    assert rank["unfinished_host"]["op"] == 1


def test_an_async_barrier_returns_its_work_for_a_later_wait(resolve, interpret, tmp_path):
    # Measured on PyTorch 2.11 (tests/data/torch/probes/barrier/): barrier(async_op=True) runs
    # on the internal stream and returns a Work; its wait() is the program's (R14).
    source = tmp_path / "async_barrier.toml"
    source.write_text('[cluster]\nranks = 1\n[[op]]\nbarrier = true\nasync_op = true\n'
                      'work = "b"\n[[op]]\nwait = "b"\n')
    path, _ = resolve(str(source))
    completed, document, calls = interpret(path, env={"FAKE_TORCH_VERSION": "2.11.0+cu130"})
    assert completed.returncode == 0, completed.stderr
    assert ["barrier", "0", "True"] in calls, calls
    assert ["work.wait", "barrier", "None"] in calls, calls
    (record,) = document["ranks"][0]["collectives"]
    assert record["async_op"]
    assert record["run_stream"] != record["call_stream"], record
    assert record["wait"]["op"] == 1, record
    assert record["bytes"] == 4


def test_a_version_string_gives_its_major_and_minor():
    assert tl.torch_version("2.11.0+cu130") == (2, 11)
    assert tl.torch_version("2.8.0") == (2, 8)
    assert tl.torch_version("0.0-fake") == (0, 0)
    assert tl.torch_version("nightly") == (0, 0)


def test_the_input_ready_point_is_inside_the_call_where_the_work_was_created(resolve, interpret):
    # The fake's Flight Recorder stamps each Work with the wall clock at its call, as PyTorch's
    # time_created_ns: the probe recorded before the call gives way to it on an idle stream.
    path, scenario = resolve("nccl_tests_all_reduce", "cluster.ranks=1", "repeat=2")
    completed, document, _ = interpret(path)
    assert completed.returncode == 0, completed.stderr
    assert document["machine"]["work_created"].endswith("(used for input_ready_ns)")
    collectives = document["ranks"][0]["collectives"]
    assert len(collectives) == scenario["repeat"] * len(scenario["ops"])
    for c in collectives:
        assert c["host_start_ns"] <= c["input_ready_ns"] <= c["host_end_ns"], c


TWO_GEMM_STREAMS = """
name = "two_gemm_streams"
[cluster]
ranks = 1
[memory]
fraction = 0.01
[streams]
side = {}
[[op]]
gemm = [1024, 1024, 1024]
[[op]]
gemm = [2048, 2048, 2048]
[[op]]
set_stream = "side"
[[op]]
gemm = [1024, 1024, 1024]
[[op]]
set_stream = "default"
"""


def test_the_memory_quota_adds_the_gemm_operands_and_a_cublas_workspace_per_gemm_stream(
        resolve, interpret, tmp_path):
    # PyTorch's cuBLAS workspace of each stream that runs a GEMM comes from the caching
    # allocator, as the operands do; the simulator books neither, so the quota grows by both
    # (frag_killer ran out of memory in PyTorch by exactly one 32-MiB workspace).
    source = tmp_path / "two_gemm_streams.toml"
    source.write_text(TWO_GEMM_STREAMS)
    path, scenario = resolve(str(source))
    completed, document, calls = interpret(path)
    assert completed.returncode == 0, completed.stderr
    handles = [call for call in calls if call[0] == "current_blas_handle"]
    assert len(handles) == 2, "one handle per stream that runs a GEMM"
    workspace_bytes = 2 * 32 * 2**20
    assert document["machine"]["blas_workspace_bytes"] == str(workspace_bytes)
    operand_bytes = sum(3 * n * n * 2 for n in (1024, 2048))  # bf16, the default dtype
    expected = (scenario["memory"]["capacity_bytes"] + operand_bytes + workspace_bytes) / (
        141 * 2**30)
    (fraction,) = [call for call in calls if call[0] == "set_per_process_memory_fraction"]
    assert float(fraction[1]) == pytest.approx(expected, rel=1e-12)
    first_gemm = names(calls).index("matmul")
    assert names(calls).index("current_blas_handle") < first_gemm, "made before the program"


def test_the_memory_quota_adds_the_all_to_all_receive_buffers(resolve, interpret):
    # all_to_all_single cannot run in place: the interpreter makes a receive buffer per sent
    # tensor from the caching allocator, which the simulator does not book.
    path, scenario = resolve("all_to_all", "cluster.ranks=1", "memory.fraction=0.01")
    completed, document, calls = interpret(path)
    assert completed.returncode == 0, completed.stderr
    sent = {op["kind"]["tensor"] for op in scenario["ops"]
            if op["kind"]["kind"] == "collective" and op["kind"]["collective"] == "all_to_all"}
    received_bytes = sum(scenario["tensors"][t]["size_bytes"] * scenario["tensors"][t]["count"]
                         for t in sent)
    (m, n, k) = (4096, 4096, 4096)
    operand_bytes = (m * k + k * n + m * n) * 2  # bf16
    workspace_bytes = int(document["machine"]["blas_workspace_bytes"])
    expected = (scenario["memory"]["capacity_bytes"] + operand_bytes + received_bytes
                + workspace_bytes) / (141 * 2**30)
    (fraction,) = [call for call in calls if call[0] == "set_per_process_memory_fraction"]
    assert float(fraction[1]) == pytest.approx(expected, rel=1e-12)


OWN_BUFFERS = """
name = "own_buffers"
[cluster]
ranks = 1
[tensors]
x = "3MiB"
[streams]
side = {}
[[op]]
gemm = [1000, 1000, 1000]
[[op]]
all_to_all = "x"
[[op]]
set_stream = "side"
[[op]]
gemm = [2048, 2048, 2048]
[[op]]
set_stream = "default"
"""


def test_the_interpreter_records_the_bytes_it_allocated_itself(resolve, interpret, tmp_path):
    # The GEMM operands, the all_to_all receive buffer and a cuBLAS workspace per GEMM stream
    # live from setup to the end and the simulator books none of them: measured as the
    # allocator counted them, so that `c10dsim fidelity` can take them off PyTorch's peaks.
    # The scenario's own tensor x is not among them.
    source = tmp_path / "own_buffers.toml"
    source.write_text(OWN_BUFFERS)
    path, _ = resolve(str(source))
    completed, document, _ = interpret(path)
    assert completed.returncode == 0, completed.stderr
    mib = 2**20
    operands = [1000 * 1000 * 2] * 3 + [2048 * 2048 * 2] * 3  # bf16, the default dtype
    received = 3 * mib
    workspaces = 2 * 32 * mib
    machine = document["machine"]
    assert machine["interpreter_allocated_bytes"] == str(sum(operands) + received + workspaces)
    # The fake gives each tensor a segment of its size rounded up to 2 MiB.
    segments = [-(-size // (2 * mib)) * 2 * mib for size in operands + [received]]
    assert machine["interpreter_reserved_bytes"] == str(sum(segments) + workspaces)


def test_the_memory_quota_leaves_out_the_bucket_buffers_the_simulator_books(resolve, interpret):
    # DDP's Reducer makes each bucket's flattened buffer when it is built; the simulator books
    # them up front beside the gradients (50 MiB reserved for coalescing, as PyTorch measured),
    # so the interpreter's buffers come out of the scenario's capacity, not on top of it.
    path, scenario = resolve("coalescing", "cluster.ranks=1")
    completed, document, calls = interpret(path)
    assert completed.returncode == 0, completed.stderr
    assert document["machine"]["blas_workspace_bytes"] == "0"
    expected = scenario["memory"]["capacity_bytes"] / (141 * 2**30)
    (fraction,) = [call for call in calls if call[0] == "set_per_process_memory_fraction"]
    assert float(fraction[1]) == pytest.approx(expected, rel=1e-12)



BUCKETS_ON_RANK_0 = """
[cluster]
ranks = 2
[groups.world]
eager_init = true
[tensors]
grads = { size = "1MiB", count = 4 }
[[op]]
all_reduce = "grads"
bucket = "2MiB"
ranks = [0]
"""


@pytest.mark.parametrize("rank", [0, 1])
def test_only_a_rank_that_runs_a_bucketed_op_makes_its_bucket_buffers(tmp_path, resolve, interpret,
                                                                     rank):
    # A rank that never runs the op never builds that DDP Reducer: rank 1 makes the four
    # gradients alone, rank 0 two 2 MiB bucket buffers besides. Every rank used to make them.
    source = tmp_path / "buckets.toml"
    source.write_text(BUCKETS_ON_RANK_0)
    path, _ = resolve(str(source))
    completed, _, calls = interpret(path, world=2, env={"RANK": str(rank)})
    assert completed.returncode == 0, completed.stderr
    made = [int(call[1]) for call in calls if call[0] == "ones"]
    gradient, bucket = 2**20 // 4, 2 * 2**20 // 4
    assert made == [gradient] * 4 + [bucket] * 2 * (rank == 0)


EVERY_KIND = """
name = "every_kind"
repeat = 2
warmup = 1
[cluster]
ranks = 1
[tensors]
x = "1MiB"
y = "1MiB"
[streams]
side = {}
[[perturb]]
ranks = [0]
before = "ar"
host_delay_us = 50
gpu_delay_us = 20
[[op]]
alloc = "y"
[[op]]
label = "ar"
all_reduce = "x"
async_op = true
work = "w"
[[op]]
is_completed = "w"
[[op]]
record_event = "e"
[[op]]
set_stream = "side"
[[op]]
wait_event = "e"
[[op]]
kernel = { us = 5, sms = 1 }
[[op]]
event_sync = "e"
[[op]]
set_stream = "default"
[[op]]
wait = "w"
[[op]]
barrier = true
[[op]]
host_sleep_us = 30
[[op]]
free = "y"
"""


def test_events_barrier_query_sleep_memory_and_a_straggler_reach_torch(resolve, interpret,
                                                                        tmp_path):
    source = tmp_path / "every_kind.toml"
    source.write_text(EVERY_KIND)
    path, scenario = resolve(str(source))
    completed, document, calls = interpret(path)
    assert completed.returncode == 0, completed.stderr
    called = names(calls)
    for call in ("barrier", "work.is_completed", "stream.wait_event", "event.synchronize",
                 "empty", "set_stream"):
        assert call in called, (call, sorted(set(called)))
    (rank,) = document["ranks"]
    iterations = 2  # repeat, the warmup iteration among them
    # One host record per op and iteration, the straggler's host delay before `ar` included.
    assert len(rank["host"]) == len(scenario["ops"]) * iterations
    assert len(rank["queries"]) == iterations
    ar = [c for c in rank["collectives"] if c["op"] == 1]
    assert len(ar) == iterations
    assert called.count("barrier") == iterations and called.count("empty") == iterations
    # Each iteration: the kernel and the straggler's GPU delay, both sleeps under the fake.
    assert called.count("_sleep") >= 2 * iterations


def test_the_program_ends_with_destroy_process_group_unless_the_scenario_says_not(
        resolve, interpret, tmp_path):
    plain = tmp_path / "plain.toml"
    plain.write_text("[cluster]\nranks = 1\n[tensors]\nx = \"1MiB\"\n[[op]]\nall_reduce = \"x\"\n")
    returns = tmp_path / "returns.toml"
    returns.write_text("destroy_process_group = false\n" + plain.read_text())
    for path, destroys in ((plain, True), (returns, False)):
        resolved, scenario = resolve(str(path))
        assert tears_down_at_the_end(scenario) == destroys
        # The whole program through main(): the call is the last torch call, or is not made.
        completed, document, calls = interpret(resolved)
        assert completed.returncode == 0, completed.stderr
        assert document is not None
        called = names(calls)
        assert ("destroy_process_group" in called) == destroys, called
        if destroys:
            assert called[-1] == "destroy_process_group", called


def test_a_refusal_names_the_file_and_line_then_the_sets_it_was_resolved_with(resolve, interpret):
    path, scenario = resolve("send_recv", "seed=3")
    completed, document, _ = interpret(path, world=1)
    assert completed.returncode == 2 and document is None
    (send,) = [op for op in scenario["ops"] if op["kind"].get("collective") == "send"]
    line = completed.stderr.strip().splitlines()[-1]
    assert line.startswith("c10dsim.torch: %s:%d: a send between ranks [0, 1]" % (
        scenario_source("send_recv"), send["line"])), line
    assert line.endswith("(the scenario as resolved with --set seed=3)"), line


EAGER_SEND = """[cluster]
ranks = 2
[groups.world]
eager_init = true
[tensors]
x = "1MiB"
[[op]]
ranks = [0]
send = "x"
peer = 1
[[op]]
ranks = [1]
recv = "x"
peer = 0
"""


def test_an_eager_world_s_send_runs_on_the_world_s_stream_as_simulated(resolve, interpret,
                                                                       simulate, tmp_path):
    # R11: under init_process_group(device_id=…) PyTorch makes no pair communicator; the send
    # is the world's, on its stream, and the rank has no `nccl:p2p:0:1` stream.
    source = tmp_path / "eager_send.toml"
    source.write_text(EAGER_SEND)
    path, _ = resolve(str(source))
    completed, document, _ = interpret(path, world=2)
    assert completed.returncode == 0, completed.stderr
    (rank,) = document["ranks"]
    simulated = simulate(str(source))["ranks"][0]
    assert [s["name"] for s in rank["streams"]] == [s["name"] for s in simulated["streams"]]
    assert [k["stream"] for k in rank["kernels"]] == [k["stream"] for k in simulated["kernels"]]
    assert rank["streams"][rank["kernels"][0]["stream"]]["name"] == "nccl:world"


TWO_PAIRS = """[cluster]
ranks = 3
[groups]
half = { ranks = [0, 1], high_priority = true }
[tensors]
x = "1MiB"
[[op]]
all_reduce = "x"
group = "half"
[[op]]
ranks = [0]
send = "x"
peer = 1
[[op]]
ranks = [1]
recv = "x"
peer = 0
[[op]]
ranks = [0]
send = "x"
peer = 2
[[op]]
ranks = [2]
recv = "x"
peer = 0
"""


@pytest.mark.parametrize("sets", [(), ("env.TORCH_NCCL_HIGH_PRIORITY=1",)])
def test_the_streams_priorities_and_the_pairs_numbering_are_the_simulated_ones(
        resolve, interpret, simulate, tmp_path, sets):
    # The interpreter lays out its internal streams at the priorities of the resolved JSON's
    # `stream_high_priority` (R9), and numbers a pair's send in the process group its
    # `process_groups` names, the world's: rank 0's send to rank 2 is the world's second
    # point-to-point call, its Work SeqNum 2 (`work_seq_num`), though its pair's first.
    source = tmp_path / "two_pairs.toml"
    source.write_text(TWO_PAIRS)
    path, scenario = resolve(str(source), *sets)
    completed, document, _ = interpret(path, world=3)
    assert completed.returncode == 0, completed.stderr
    (rank,) = document["ranks"]
    simulated = simulate(str(source), *sets)["ranks"][0]
    priorities = [(s["name"], s["high_priority"]) for s in rank["streams"]]
    assert priorities == [(s["name"], s["high_priority"]) for s in simulated["streams"]]
    assert ("nccl:half", True) in priorities and ("nccl:world", bool(sets)) in priorities
    numbering = [(c["op"], c["group"], c["seq"], c.get("work_seq_num"))
                 for c in rank["collectives"]]
    assert numbering == [(c["op"], c["group"], c["seq"], c.get("work_seq_num"))
                         for c in simulated["collectives"]]
    assert numbering[-1][2:] == (1, 2), numbering


SETUP_OPS = """warmup = 0
[cluster]
ranks = 2
[groups]
mine = { ranks = [0] }
theirs = { ranks = [1] }
[[op]]
label = "init"
init_process_group = true
[[op]]
new_group = "mine"
[[op]]
new_group = "theirs"
"""


@pytest.mark.parametrize("device_id, aborts, blocked_on", [
    # A lazy world: neither call creates a communicator (R8), the host runs its own time.
    (False, "init_process_group:1", None),
    (False, "new_group:1", None),
    # An eager world: init_process_group creates the world's, new_group each group's split of
    # it, on the group's members only; rank 0 is no member of `theirs`.
    (True, "init_process_group:1", {"kind": "communicator", "group": 0}),
    (True, "new_group:1", {"kind": "communicator", "group": 1}),
    (True, "new_group:2", None),
])
def test_a_process_taken_down_inside_a_setup_call_is_blocked_where_the_simulator_says(
        resolve, interpret, tmp_path, device_id, aborts, blocked_on):
    # The journal's open call blocks on a communicator only where the simulator's rank does:
    # in the init_process_group or new_group that creates it on this rank (the resolved JSON's
    # `setup_communicator_ranks`), as `unfinished_host.blocked_on` says it.
    source = tmp_path / "setup.toml"
    source.write_text(SETUP_OPS)
    path, scenario = resolve(str(source), "op.init.device_id=%s" % str(device_id).lower())
    completed, document, _ = interpret(path, world=2, env={"FAKE_TORCH_ABORTS": aborts})
    assert completed.returncode == -signal.SIGABRT, completed.stderr
    (rank,) = document["ranks"]
    op = {"init_process_group:1": 0, "new_group:1": 1, "new_group:2": 2}[aborts]
    assert rank["unfinished_host"]["op"] == op
    assert rank["unfinished_host"]["blocked_on"] == blocked_on


def test_a_functional_collective_is_told_by_the_resolved_fact_not_by_its_work_s_name(
        resolve, interpret, tmp_path):
    # Whether a collective is functional (R30), and its wait a wait_tensor, is the resolved
    # JSON's `functional_works`, not the form of the Work's name: a program's Work renamed
    # `wait_tensor(w)` in the JSON is still an all_reduce's Work, waited by Work.wait().
    source = tmp_path / "named.toml"
    source.write_text(BLOCKED_ITEM)
    path, scenario = resolve(str(source))
    scenario["works"] = ["wait_tensor(%s)" % name for name in scenario["works"]]
    pathlib.Path(path).write_text(json.dumps(scenario))
    completed, document, calls = interpret(path)
    assert completed.returncode == 0, completed.stderr
    called = names(calls)
    assert "functional.all_reduce" not in called and "functional.wait_tensor" not in called
    assert called.count("all_reduce") == called.count("work.wait") == scenario["repeat"]


def test_a_barrier_s_bytes_are_its_one_element_as_the_simulator_decided(
        resolve, interpret, tmp_path):
    # A barrier reduces one element, its size the resolved JSON's `op_works[op].element_bytes`
    # (the simulator's): the interpreter keeps no size of its own, so a JSON that says 8 is
    # recorded as 8.
    source = tmp_path / "barrier.toml"
    source.write_text("[cluster]\nranks = 1\n[[op]]\nbarrier = true\n")
    path, scenario = resolve(str(source))
    assert scenario["op_works"][0]["element_bytes"] == 4
    scenario["op_works"][0]["element_bytes"] = 8
    pathlib.Path(path).write_text(json.dumps(scenario))
    completed, document, _ = interpret(path)
    assert completed.returncode == 0, completed.stderr
    (record,) = document["ranks"][0]["collectives"]
    assert record["bytes"] == 8
