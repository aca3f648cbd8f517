"""Collective records against the fake's Flight Recorder, which numbers calls as PyTorch 2.11's
does: kernel durations matched by group and SeqNum, point-to-point calls apart; and whether a
wait's Work had completed at its return."""

import pytest

# Each kernel takes its SeqNum in µs, a point-to-point call 1 ms plus its p2p SeqNum in µs.
BY_SEQ = {"FAKE_TORCH_DURATION_PER_SEQ": "1"}

WORLD_AND_PAIR = """
repeat = 2
warmup = 0
[cluster]
ranks = 2
[tensors]
x = "1MiB"
[[op]]
label = "ar"
all_reduce = "x"
[[op]]
label = "send_x"
ranks = [0]
send = "x"
peer = 1
async_op = %s
[[op]]
ranks = [1]
recv = "x"
peer = 0
async_op = %s
"""


PIPELINE = """
[cluster]
ranks = 3
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
[[op]]
ranks = [0]
send = "x"
peer = 2
[[op]]
ranks = [2]
recv = "x"
peer = 0
[[op]]
all_reduce = "x"
"""


def duration(record):
    return record["end_ns"] - record["kernel_start_ns"]


@pytest.mark.parametrize("async_op", ["true", "false"])
def test_world_collectives_and_point_to_point_calls_each_get_their_own_durations(
        resolve, interpret, tmp_path, async_op):
    source = tmp_path / "world_and_pair.toml"
    source.write_text(WORLD_AND_PAIR % (async_op, async_op))
    path, scenario = resolve(str(source))
    # Rank 0 of two: an all_reduce on the world and a send to rank 1, twice.
    completed, document, calls = interpret(path, world=2, env=BY_SEQ)
    assert completed.returncode == 0, completed.stderr
    call = "isend" if async_op == "true" else "send"
    assert [call, "1"] in calls
    assert document["ops"][1]["host_name"] == "torch.distributed." + call
    ar, send = (op["index"] for op in scenario["ops"][:2])
    records = document["ranks"][0]["collectives"]
    world = [r for r in records if r["op"] == ar]
    pair = [r for r in records if r["op"] == send]
    assert [(r["group"], r["seq"]) for r in world] == [(0, 1), (0, 2)]
    assert [(r["group"], r["seq"]) for r in pair] == [(1, 1), (1, 2)]
    # The world's own entries, not the pair's; the sends by their p2p SeqNum.
    assert [round(duration(r) / 1000) for r in world] == [1, 2]
    assert [round(duration(r) / 1000) for r in pair] == [1001, 1002]
    # Found in the first dump: no retrying for entries that cannot match.
    assert document["machine"]["kernel_durations"] == (
        "Flight Recorder duration_ms for 4 of 4 collectives (after 1 dumps)")


def test_a_batch_isend_irecv_gets_the_duration_of_its_coalesced_work(resolve, interpret):
    path, scenario = resolve("batch_isend_irecv", "cluster.ranks=2")
    completed, document, _ = interpret(path, world=2, env=BY_SEQ)
    assert completed.returncode == 0, completed.stderr
    (op,) = [op for op in scenario["ops"] if op["kind"]["kind"] == "batch_p2p"]
    records = document["ranks"][0]["collectives"]
    batches = [r for r in records if r["op"] == op["index"]]
    assert [round(duration(r) / 1000) for r in batches] == [
        1000 + k for k in range(1, len(batches) + 1)]
    total = len(records)
    assert document["machine"]["kernel_durations"] == (
        "Flight Recorder duration_ms for %d of %d collectives (after 1 dumps)" % (total, total))


AR_THEN_BATCH = """
repeat = 2
warmup = 0
[cluster]
ranks = 2
[tensors]
a = "1MiB"
b = "1MiB"
[[op]]
label = "ar"
all_reduce = "a"
[[op]]
label = "ring"
batch_isend_irecv = [{ send = "a", shift = 1 }, { recv = "b", shift = -1 }]
"""


@pytest.mark.parametrize("by_op_type", ["0", "1"])
def test_a_batch_after_a_collective_takes_its_own_duration_however_its_block_is_marked(
        resolve, interpret, tmp_path, by_op_type):
    # With the block's entry not marked point-to-point (PyTorch's source), its numbers would
    # otherwise be the all_reduce's: the all_reduce would get the batch's duration.
    source = tmp_path / "ar_then_batch.toml"
    source.write_text(AR_THEN_BATCH)
    path, scenario = resolve(str(source))
    env = dict(BY_SEQ, FAKE_TORCH_BLOCK_BY_OP_TYPE=by_op_type)
    completed, document, _ = interpret(path, world=2, env=env)
    assert completed.returncode == 0, completed.stderr
    ar, ring = (op["index"] for op in scenario["ops"])
    records = document["ranks"][0]["collectives"]
    assert [(r["op"], round(duration(r) / 1000)) for r in records] == [
        (ar, 1), (ring, 1001), (ar, 2), (ring, 1002)]
    assert document["machine"]["kernel_durations"] == (
        "Flight Recorder duration_ms for 4 of 4 collectives (after 1 dumps)")


def test_each_coalesced_and_bucketed_collective_gets_its_own_seqnum_s_duration(resolve,
                                                                              interpret):
    # A _coalescing_manager block takes one SeqNum for its calls, a bucket one per call.
    path, _ = resolve("coalescing", "cluster.ranks=1")
    completed, document, _ = interpret(path, env=BY_SEQ)
    assert completed.returncode == 0, completed.stderr
    records = document["ranks"][0]["collectives"]
    assert [r["seq"] for r in records] == list(range(1, len(records) + 1))
    for record in records:
        assert abs(duration(record) - record["seq"] * 1000) <= 1, record
    assert document["machine"]["kernel_durations"].endswith("(after 1 dumps)")


@pytest.mark.parametrize("duration_ms, completed_at_return", [("100", False), ("0.0001", True)])
def test_an_implicit_wait_completed_at_return_when_the_kernel_ended_before_it(
        resolve, interpret, duration_ms, completed_at_return):
    path, _ = resolve("nccl_tests_all_reduce", "cluster.ranks=1", "repeat=2")
    completed, document, _ = interpret(path, env={"FAKE_TORCH_DURATION_MS": duration_ms})
    assert completed.returncode == 0, completed.stderr
    records = document["ranks"][0]["collectives"]
    assert records and all(not r["async_op"] for r in records)
    for record in records:
        assert record["wait"]["completed_at_return"] is completed_at_return, record
        assert (record["end_ns"] <= record["wait"]["host_end_ns"]) is completed_at_return


@pytest.mark.parametrize("answer, duration_ms", [("1", "100"), ("0", "0.0001")])
def test_an_explicit_wait_completed_at_return_as_is_completed_answered(
        resolve, interpret, tmp_path, answer, duration_ms):
    # PyTorch's answer, whatever the inferred kernel end says.
    source = tmp_path / "waited.toml"
    source.write_text("repeat = 2\nwarmup = 0\n[cluster]\nranks = 1\n[tensors]\nx = \"1MiB\"\n"
                      "[[op]]\nall_reduce = \"x\"\nasync_op = true\nwork = \"w\"\n"
                      "[[op]]\nwait = \"w\"\n")
    path, _ = resolve(str(source))
    completed, document, calls = interpret(path, env={"FAKE_TORCH_COMPLETED": answer,
                                                      "FAKE_TORCH_DURATION_MS": duration_ms})
    assert completed.returncode == 0, completed.stderr
    assert [call[0] for call in calls].count("work.is_completed") == 2
    records = document["ranks"][0]["collectives"]
    assert len(records) == 2
    for record in records:
        assert record["wait"]["completed_at_return"] is (answer == "1"), record


def test_a_send_to_a_second_peer_keeps_the_work_s_seqnum_where_it_differs_from_the_pair_s(
        resolve, interpret, tmp_path):
    source = tmp_path / "pipeline.toml"
    source.write_text(PIPELINE)
    path, _ = resolve(str(source))
    completed, document, _ = interpret(path, world=3)
    assert completed.returncode == 0, completed.stderr
    records = document["ranks"][0]["collectives"]
    # Each pair counts its own calls; PyTorch numbers rank 0's sends 1, 2 whatever the peer,
    # and the all_reduce is the world's first collective.
    assert [(r["seq"], r.get("work_seq_num")) for r in records] == [(1, None), (1, 2), (1, None)]
