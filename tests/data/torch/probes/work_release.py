"""When does PyTorch give a collective's tensor back to the caching allocator if nobody waits?

One process, world size 1 (NCCL), on one GPU. Each case queues a 50 ms GPU sleep on the current
stream, then an async all_reduce of a 64 MiB tensor, so the collective ends ~50 ms after the
call; the Python reference to the tensor is dropped right after the call. It then samples
``torch.cuda.memory_allocated()`` every ~1 ms for ``--watch-ms`` and reports when the 64 MiB left
the allocated count (relative to the call and to the collective's end), and whether a fresh
64 MiB allocation made then reuses the block (``memory_reserved()`` unchanged).

Cases: ``dropped`` (the Work handle dropped at once), ``kept`` (the handle kept, never waited,
then another all_reduce on the same group, then ``wait()``), ``waited`` (``wait()`` at once,
the reference). Run it once with ``TORCH_NCCL_AVOID_RECORD_STREAMS=0`` and once with ``=1``
(the variable is read when the process group is created). Prints one JSON object.

Usage: python work_release.py [--watch-ms 1000] [--repeat 2]
"""

import argparse
import json
import os
import time

import torch
import torch.distributed as dist

MIB = 1 << 20
SIZE_BYTES = 64 * MIB
SLEEP_US = 50_000


def cycles_per_us():
    """The GPU's `_sleep` rate, measured on a 20 ms sleep."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    torch.cuda._sleep(20_000 * 1900)
    end.record()
    end.synchronize()
    return 20_000 * 1900 / (start.elapsed_time(end) * 1000.0)


def watch(t0_ns, watch_ms, baseline_bytes):
    """Samples memory_allocated until watch_ms after t0; returns the first time (µs after t0)
    it is at or below baseline_bytes, and the samples' count."""
    released_us = None
    samples = 0
    while True:
        now = time.perf_counter_ns()
        if now - t0_ns > watch_ms * 1_000_000:
            return released_us, samples
        samples += 1
        if released_us is None and torch.cuda.memory_allocated() <= baseline_bytes:
            released_us = (now - t0_ns) / 1000.0
        time.sleep(0.001)


def one_case(case, rate, watch_ms):
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    baseline = torch.cuda.memory_allocated()
    x = torch.ones(SIZE_BYTES // 4, device="cuda")
    after_sleep = torch.cuda.Event(enable_timing=True)
    anchor = torch.cuda.Event(enable_timing=True)
    anchor_host_ns = time.perf_counter_ns()
    anchor.record()
    torch.cuda._sleep(int(SLEEP_US * rate))
    after_sleep.record()
    t0 = time.perf_counter_ns()
    work = dist.all_reduce(x, async_op=True)
    call_us = (time.perf_counter_ns() - t0) / 1000.0
    del x
    result = {"case": case, "call_us": call_us}
    if case == "waited":
        work.wait()
        del work
    elif case == "dropped":
        del work
    released_us, samples = watch(t0, watch_ms, baseline)
    reserved_before = torch.cuda.memory_reserved()
    fresh = torch.empty(SIZE_BYTES // 4, device="cuda")
    result["fresh_alloc_reused_block"] = torch.cuda.memory_reserved() == reserved_before
    del fresh
    after_sleep.synchronize()
    # The collective can start once the sleep ended: its end on the host axis, roughly.
    sleep_end_us = anchor.elapsed_time(after_sleep) * 1000.0 - (t0 - anchor_host_ns) / 1000.0
    result.update({"released_us": released_us, "samples": samples,
                   "gpu_sleep_end_us": sleep_end_us})
    if case == "kept":
        y = torch.ones(MIB // 4, device="cuda")
        t1 = time.perf_counter_ns()
        dist.all_reduce(y)
        released_next, _ = watch(t1, 200, baseline + MIB)
        result["released_after_next_collective_us"] = released_next
        t2 = time.perf_counter_ns()
        work.wait()
        del work
        released_wait, _ = watch(t2, 100, baseline + MIB)
        result["released_after_wait_us"] = released_wait
        del y
    torch.cuda.synchronize()
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--watch-ms", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29511")
    torch.cuda.set_device(0)
    dist.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device("cuda:0"))
    warm = torch.ones(1024, device="cuda")
    dist.all_reduce(warm)
    torch.cuda.synchronize()
    rate = cycles_per_us()
    results = [one_case(case, rate, args.watch_ms)
               for _ in range(args.repeat) for case in ("dropped", "kept", "waited")]
    print(json.dumps({
        "torch": torch.__version__,
        "nccl": ".".join(map(str, torch.cuda.nccl.version())),
        "device": torch.cuda.get_device_name(0),
        "TORCH_NCCL_AVOID_RECORD_STREAMS": os.environ.get("TORCH_NCCL_AVOID_RECORD_STREAMS"),
        "sleep_cycles_per_us": rate,
        "results": results,
    }, indent=1))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
