"""Probe (issue 13): where inside a ProcessGroupNCCL collective call PyTorch records its events, so
that the model's split of the call's host cost (R10a's input-ready event, R6's start event before
NCCL's enqueue, the end event, then `host.collective_tail_us`) is measured, not guessed.

One process, world size 1, under torchrun, TORCH_NCCL_ENABLE_TIMING=1:
    torchrun --nproc-per-node=1 call_split_probe.py OUT.json
Each call runs inside `torch.profiler.record_function`, and the CUDA runtime calls the profiler
(CUPTI) sees inside that range are placed relative to its start and end. Modes: `sync`
(`dist.all_reduce(x)`, which PyTorch >= 2.8 launches on the current stream) and `async`
(`dist.all_reduce(x, async_op=True)`, then `wait()` outside the range), each in a tight loop and
after a 2 ms host pause. Prints a summary; writes every call's events to OUT.json. It drives
PyTorch only.
"""
import json
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
from torch.profiler import ProfilerActivity, profile, record_function

CALLS = 200


def pause_ns(ns):
    end = time.perf_counter_ns() + ns
    while time.perf_counter_ns() < end:
        pass


def run(x, mode, gap_ns):
    for _ in range(CALLS):
        if gap_ns:
            pause_ns(gap_ns)
        with record_function("probe:%s:%d" % (mode, gap_ns)):
            work = dist.all_reduce(x, async_op=(mode == "async"))
        if work is not None:
            work.wait()


def main():
    out_path = sys.argv[1]
    os.environ.setdefault("TORCH_NCCL_ENABLE_TIMING", "1")
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local_rank)
    device = torch.device("cuda", local_rank)
    dist.init_process_group("nccl", device_id=device)
    x = torch.ones(1024, device=device)
    for mode in ("sync", "async"):
        run(x, mode, 0)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for mode in ("sync", "async"):
            for gap_ns in (0, 2_000_000):
                run(x, mode, gap_ns)
        torch.cuda.synchronize()
    events = [e for e in prof.events()]
    ranges = [e for e in events if e.name.startswith("probe:")]
    runtime = [e for e in events if e.device_type.name == "CPU" and e.name.startswith("cuda")]
    calls = []
    for r in ranges:
        start, end = r.time_range.start, r.time_range.end
        inside = [
            {"name": e.name, "from_start_us": e.time_range.start - start,
             "to_end_us": end - e.time_range.end}
            for e in runtime if start <= e.time_range.start and e.time_range.end <= end
        ]
        calls.append({"range": r.name, "duration_us": end - start, "runtime": inside})
    summary = {}
    for name in sorted({c["range"] for c in calls}):
        mine = [c for c in calls if c["range"] == name][10:]
        row = {"calls": len(mine), "duration_us": statistics.median(c["duration_us"] for c in mine)}
        for kind in ("cudaEventRecord", "cudaStreamWaitEvent", "cudaLaunchKernel",
                     "cudaEventRecordWithFlags"):
            for position in range(4):
                picked = [c for c in mine
                          if len([e for e in c["runtime"] if e["name"] == kind]) > position]
                if len(picked) < len(mine) // 2:
                    continue
                nth = [[e for e in c["runtime"] if e["name"] == kind][position] for c in picked]
                row["%s#%d" % (kind, position)] = {
                    "from_start_us": statistics.median(e["from_start_us"] for e in nth),
                    "to_end_us": statistics.median(e["to_end_us"] for e in nth),
                    "calls": len(picked)}
        names = {}
        for c in mine:
            for e in c["runtime"]:
                names[e["name"]] = names.get(e["name"], 0) + 1
        row["runtime_calls"] = names
        summary[name] = row
    print(json.dumps(summary, indent=1), flush=True)
    with open(out_path, "w") as f:
        json.dump({"torch": torch.__version__, "nccl": ".".join(map(str, torch.cuda.nccl.version())),
                   "device": torch.cuda.get_device_name(device), "summary": summary,
                   "calls": calls}, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
