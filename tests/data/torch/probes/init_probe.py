"""Probe (issue 14, items 8 and 11): what PyTorch's process-group setup costs on the host, whether
a lazily created communicator waits for the GPU backlog, and whether the seed's frag recipe
(set_per_process_memory_fraction(0.12)) makes the caching allocator release its cache.

One process per mode, world size 1, under torchrun:
    torchrun --nproc-per-node=1 init_probe.py MODE    (MODE: lazy, eager, nonblocking, frag)
Prints one JSON object per measurement on stdout. It drives PyTorch only: every figure is read
from time.perf_counter_ns around the call, or from torch.cuda.memory_stats().
"""
import json
import os
import sys
import time

import torch
import torch.distributed as dist

import gpu_clock


def emit(**fields):
    print(json.dumps(fields), flush=True)


def gpu_sleep_ms(ms, cycles_per_ms):
    torch.cuda._sleep(int(ms * cycles_per_ms))


def timed_ns(fn):
    start = time.perf_counter_ns()
    result = fn()
    return time.perf_counter_ns() - start, result


def lazy_first_collectives(mode, per_ms, x):
    """A new group's first all_reduce after `backlog_ms` of GPU sleep queued on the current
    stream: the call's host time, and whether the backlog had drained when it returned."""
    for backlog_ms in (0, 100, 300, 1000, 0, 100, 300, 1000):
        torch.cuda.synchronize()
        new_ns, group = timed_ns(lambda: dist.new_group([0]))
        gpu_sleep_ms(backlog_ms, per_ms)
        done = torch.cuda.Event()
        done.record()
        call_ns, _ = timed_ns(lambda: dist.all_reduce(x, group=group))
        drained = done.query()
        second_ns, _ = timed_ns(lambda: dist.all_reduce(x, group=group))
        torch.cuda.synchronize()
        emit(mode=mode, what="new_group_first_collective", backlog_ms=backlog_ms,
             new_group_us=new_ns / 1e3, first_call_us=call_ns / 1e3,
             backlog_drained_at_return=drained, second_call_us=second_ns / 1e3)


def frag(per_ms):
    """The seed's overlap_bench.py frag killer, at the seed's fraction and smaller ones."""
    dev = torch.device("cuda", 0)
    total = torch.cuda.get_device_properties(0).total_memory
    a = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
    buf = torch.randn(25 * 1024 * 1024 // 4, device=dev)
    for fraction in (0.12, 0.05, 0.02, 0.01, 0.008, 0.006):
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        torch.cuda.set_per_process_memory_fraction(fraction, 0)
        for repeat in range(3):
            torch.cuda.synchronize()
            before = torch.cuda.memory_stats()
            work = dist.all_reduce(buf, async_op=True)
            start = time.perf_counter_ns()
            try:
                junk = [torch.empty(int(2**20 * (1 + (i * 7) % 13)), device=dev, dtype=torch.uint8)
                        for i in range(48)]
                del junk[::2]
                big = torch.empty(2**20 * 200, device=dev, dtype=torch.uint8)
                del big, junk
                outcome = "ok"
            except torch.OutOfMemoryError:
                outcome = "OutOfMemoryError"
            frag_ns = time.perf_counter_ns() - start
            c = a @ b
            work.wait()
            torch.cuda.synchronize()
            after = torch.cuda.memory_stats()
            del c
            emit(mode="frag", fraction=fraction, quota_mib=fraction * total / 2**20,
                 repeat=repeat, outcome=outcome, frag_host_us=frag_ns / 1e3,
                 alloc_retries=after["num_alloc_retries"] - before["num_alloc_retries"],
                 device_frees=after.get("num_device_free", 0) - before.get("num_device_free", 0),
                 device_allocs=after.get("num_device_alloc", 0) - before.get("num_device_alloc", 0),
                 peak_reserved_mib=after["reserved_bytes.all.peak"] / 2**20)


def main():
    mode = sys.argv[1]
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    dev = torch.device("cuda", local_rank)
    torch.cuda.set_device(dev)
    torch.zeros(1, device=dev)
    torch.cuda.synchronize()
    per_ms = gpu_clock.cycles_per_ms()
    kwargs = {} if mode == "lazy" else {"device_id": dev}
    init_ns, _ = timed_ns(lambda: dist.init_process_group("nccl", **kwargs))
    emit(mode=mode, what="init_process_group", us=init_ns / 1e3,
         nonblocking=os.environ.get("TORCH_NCCL_USE_COMM_NONBLOCKING", ""),
         torch=torch.__version__, nccl=".".join(map(str, torch.cuda.nccl.version())))
    x = torch.ones(1024, device=dev)
    gpu_sleep_ms(300, per_ms)
    done = torch.cuda.Event()
    done.record()
    first_ns, _ = timed_ns(lambda: dist.all_reduce(x))
    drained = done.query()
    torch.cuda.synchronize()
    emit(mode=mode, what="world_first_collective_after_300ms_backlog",
         first_call_us=first_ns / 1e3, backlog_drained_at_return=drained)
    if mode == "frag":
        frag(per_ms)
    else:
        lazy_first_collectives(mode, per_ms, x)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
