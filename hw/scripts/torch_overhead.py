"""PyTorch's own host overhead, for comparison with c10dsim-hw (docs/hw.md).

Times, with a host monotonic clock, dist.all_reduce(t, async_op=True) and work.wait() on a
1-rank NCCL process group (file:// store), 1 KiB float32, after a warm-up; prints the medians in
microseconds as JSON. Run: python3 hw/scripts/torch_overhead.py [iterations]
"""

import json
import os
import statistics
import sys
import tempfile
import time

import torch
import torch.distributed as dist


def main() -> None:
    iterations = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    store = os.path.join(tempfile.mkdtemp(), "store")
    torch.cuda.set_device(0)
    dist.init_process_group(
        "nccl", init_method=f"file://{store}", rank=0, world_size=1,
        device_id=torch.device("cuda", 0),
    )
    t = torch.ones(256, device="cuda")
    call, wait = [], []
    for i in range(iterations + 200):
        t0 = time.perf_counter_ns()
        work = dist.all_reduce(t, async_op=True)
        t1 = time.perf_counter_ns()
        work.wait()
        t2 = time.perf_counter_ns()
        if i >= 200:
            call.append(t1 - t0)
            wait.append(t2 - t1)
    torch.cuda.synchronize()
    print(json.dumps({
        "torch": torch.__version__,
        "nccl": ".".join(map(str, torch.cuda.nccl.version())),
        "iterations": iterations,
        "all_reduce_async_call_us_median": statistics.median(call) / 1e3,
        "wait_us_median": statistics.median(wait) / 1e3,
    }))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
