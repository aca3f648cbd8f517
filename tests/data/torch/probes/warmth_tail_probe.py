"""Probe: what makes overlap_bench's all_reduce cheap after milliseconds of blocking?

In the catalogue's PyTorch runs, overlap_bench's async all_reduce costs 34-45 µs after 3-30 ms
in which the host blocked on the GPU (an `.item()` or a synchronize), where warmth_probe.py's
calls after the same blocking cost 100-170 µs (docs/torch.md#host-warmth). Between the blocking
and the call, overlap_bench's program launches a GEMM, calls a Work's `wait()` and records two
timing marks. Here each trial issues a 4-byte async all_reduce (the previous collective: the gap
runs from its return), blocks for the gap (a GPU sleep, then `.item()`), runs one tail, then
times an async all_reduce of 25 MiB (overlap_bench's tensor) with `time.perf_counter_ns`:

- `none`: nothing;
- `marks`: two marks, each `time.perf_counter_ns()` and a timing event's `record()`;
- `wait`: the previous collective's `wait()`;
- `gemm`: an 8192 x 8192 x 8192 bf16 `torch.matmul` launched (overlap_bench's GEMM);
- `all`: the GEMM, the `wait()`, then the two marks, as overlap_bench does.

The timed Work is then waited on and the device synchronized. Gaps 1, 3, 10 and 30 ms, 12 trials
a cell, shuffled (fixed seed), after a warm-up. Usage: python warmth_tail_probe.py OUT.json
(prints the table; writes every trial to OUT.json; `warmth_probe.py --pool` reads them back).
It drives PyTorch only.
"""

import json
import random
import sys
import time

from warmth_probe import TAILS, table, write_run

GAPS_MS = [1.0, 3.0, 10.0, 30.0]
REPEATS = 12


def main():
    import torch
    import torch.distributed as dist

    from gpu_clock import cycles_per_ms
    from one_rank import init_group

    out = sys.argv[1]
    init_group(timeout_ms=600_000)
    buf = torch.ones(25 << 18, device="cuda")
    small = torch.zeros(1, device="cuda")
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    cycles = cycles_per_ms()

    def mark():
        time.perf_counter_ns()
        torch.cuda.Event(enable_timing=True).record()

    def trial(tail, gap_ms):
        previous = dist.all_reduce(small, async_op=True)
        returned = time.perf_counter_ns()
        torch.cuda._sleep(int(cycles * gap_ms))
        small.add_(1)
        small.item()
        if tail in ("gemm", "all"):
            torch.matmul(a, b)
        if tail in ("wait", "all"):
            previous.wait()
        if tail in ("marks", "all"):
            mark()
            mark()
        gap_measured_ns = time.perf_counter_ns() - returned
        begin = time.perf_counter_ns()
        work = dist.all_reduce(buf, async_op=True)
        call_ns = time.perf_counter_ns() - begin
        work.wait()
        previous.wait()
        torch.cuda.synchronize()
        return gap_measured_ns, call_ns

    for tail in TAILS * 4:
        trial(tail, 1.0)
    trials = [(tail, gap) for tail in TAILS for gap in GAPS_MS] * REPEATS
    random.Random(20261204).shuffle(trials)
    rows = []
    for tail, gap_ms in trials:
        gap_measured_ns, call_ns = trial(tail, gap_ms)
        tight_begin = time.perf_counter_ns()
        work = dist.all_reduce(buf, async_op=True)
        tight_ns = time.perf_counter_ns() - tight_begin
        work.wait()
        torch.cuda.synchronize()
        rows.append({"way": tail, "gap_ms": gap_ms, "gap_measured_ns": gap_measured_ns,
                     "call_ns": call_ns, "tight_after_ns": tight_ns})
    table(rows, TAILS)
    write_run(out, torch, cycles, rows)


if __name__ == "__main__":
    main()
