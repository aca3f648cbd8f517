"""The torch Timeline's header against the simulator's for catalogue scenarios: the `scenario`
block and the op table must be the same program's, so that `c10dsim diff` pairs their records;
kernel and host names are the interpreter's own where the two engines run different calls."""

import pytest

# The PyTorch call the interpreter makes, by op key (the simulator names the profiler's view:
# `c10d::allreduce_`, `aten::mm`, …).
HOST_NAMES = {
    "all_reduce": "torch.distributed.all_reduce",
    "all_to_all": "torch.distributed.all_to_all_single",
    "send": "torch.distributed.isend",
    "recv": "torch.distributed.irecv",
    "batch_isend_irecv": "torch.distributed.batch_isend_irecv",
    "wait": "Work.wait",
    "get_future": "Future.then",  # the catalogue's has a callback; without, `Future.wait`
    "gemm": "torch.matmul",
    "kernel": "torch.cuda._sleep",
    "gpu_sleep": "torch.cuda._sleep",
    "mark": "mark (perf_counter_ns + torch.cuda.Event.record)",
    "item": "torch.Tensor.item",
    "device_sync": "torch.cuda.synchronize",
    "stream_sync": "torch.cuda.Stream.synchronize",
    "set_stream": "torch.cuda.set_stream",
}

# Ops whose call is not their key's, by scenario and op name.
SPECIAL_HOST_NAMES = {
    ("coalescing", "coalesced"): "torch.distributed._coalescing_manager",
    ("functional_collective", "ar"): "torch.distributed._functional_collectives.all_reduce",
    ("functional_collective", "wait_tensor(y)"):
        "torch.distributed._functional_collectives.wait_tensor",
}

NCCL_KEYS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all", "send",
             "recv", "batch_isend_irecv", "barrier")

CATALOGUE = [("overlap_bench", 1), ("exp_b_stream_scope", 1), ("coalescing", 1),
             ("functional_collective", 1), ("get_future", 1), ("all_to_all", 1),
             ("send_recv", 2), ("batch_isend_irecv", 2)]


@pytest.mark.parametrize("name, world", CATALOGUE)
def test_the_op_table_and_the_scenario_block_are_the_simulator_s(resolve, simulate, interpret,
                                                                 name, world):
    # A seed no catalogue scenario has: the Timeline must carry the resolved one.
    sets = ("cluster.ranks=%d" % world, "repeat=2", "warmup=0", "seed=977")
    path, _ = resolve(name, *sets)
    simulated = simulate(name, *sets)
    completed, document, _ = interpret(path, world=world)
    assert completed.returncode == 0, completed.stderr
    # Name, path, source hash, seed, measures (from, to), overlaps (compute, comm, both), marks
    # and groups, as the simulator carries them from the same resolved scenario.
    assert document["scenario"] == simulated["scenario"]
    assert len(document["ops"]) == len(simulated["ops"])
    for ours, theirs in zip(document["ops"], simulated["ops"]):
        for key in ("index", "name", "key", "line", "dtype", "transfers", "coalesced"):
            assert ours.get(key) == theirs.get(key), (key, ours, theirs)
        key = ours["key"]
        assert ours["host_name"] == SPECIAL_HOST_NAMES.get((name, ours["name"]),
                                                           HOST_NAMES[key]), ours
        kernel = ours["kernel_name"]
        if key in NCCL_KEYS:
            # NCCL picks its kernel: the interpreter names the collective, the simulator the
            # kernel its model picked.
            assert kernel == "nccl:" + key, ours
            assert theirs["kernel_name"].startswith("ncclDevKernel_"), theirs
        elif key in ("gemm", "gpu_sleep"):
            assert kernel == theirs["kernel_name"] and kernel is not None, (ours, theirs)
        elif theirs["kernel_name"] == "spin_kernel":
            # A `kernel` or a callback's kernel: a `_sleep`, whose SM footprint is not the
            # spinning kernel's (docs/torch.md).
            assert kernel == "cuda_sleep", ours
        else:
            assert kernel is None and theirs["kernel_name"] is None, (ours, theirs)
    keys = {op["key"] for op in document["ops"]}
    assert keys <= set(HOST_NAMES), keys - set(HOST_NAMES)


def test_a_gemm_kernel_is_named_by_dtype_and_shape_as_the_simulator_names_it(
        resolve, simulate, interpret, tmp_path):
    source = tmp_path / "gemms.toml"
    source.write_text("[cluster]\nranks = 1\n[[op]]\ngemm = [128, 256, 512]\n"
                      "[[op]]\ngemm = [64, 32, 16]\ndtype = \"f32\"\n")
    path, _ = resolve(str(source))
    simulated = simulate(str(source))
    completed, document, _ = interpret(path)
    assert completed.returncode == 0, completed.stderr
    assert [op["kernel_name"] for op in document["ops"]] == [
        "gemm_bf16_128x256x512", "gemm_f32_64x32x16"]
    assert [op["kernel_name"] for op in simulated["ops"]] == [
        op["kernel_name"] for op in document["ops"]]


@pytest.mark.parametrize("then, name", [("then = { us = 5, stream = \"pool\" }\n", "Future.then"),
                                        ("", "Future.wait")])
def test_a_get_future_is_named_by_the_future_call_as_the_simulator_names_it(
        resolve, simulate, interpret, tmp_path, then, name):
    # `work.get_future().then(callback)` or `.wait()`: the call is the Future's, on both sides
    # (the interpreter named it `Work.get_future` either way).
    source = tmp_path / "future.toml"
    source.write_text("[cluster]\nranks = 1\n[streams]\npool = {}\n[tensors]\nx = \"1MiB\"\n"
                      "[[op]]\nall_reduce = \"x\"\nasync_op = true\nwork = \"w\"\n"
                      "[[op]]\nlabel = \"hook\"\nget_future = \"w\"\n" + then)
    path, _ = resolve(str(source))
    simulated = simulate(str(source))
    completed, document, _ = interpret(path)
    assert completed.returncode == 0, completed.stderr
    ours, = [op for op in document["ops"] if op["name"] == "hook"]
    theirs, = [op for op in simulated["ops"] if op["name"] == "hook"]
    assert (ours["host_name"], theirs["host_name"]) == (name, name)
