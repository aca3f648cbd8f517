"""What PyTorch's profiler writes for a group's ranks in `record_param_comms`: 33 processes on one
GPU join an NCCL world and make groups of several shapes (every other rank from 0 and from 1,
the uneven [0, 1, 3], the lone [5]); each profiles an all_reduce on the world and on each group it
is in. NCCL refuses a communicator of several ranks on one GPU ("invalid usage"), but
`record_param_comms` is recorded before the communicator is made, so each call still has one.
Each rank writes its events' arguments, one JSON object a line, to OUT/rank<R>.jsonl.
Run: python3 group_ranks_args.py OUT (it starts the 33 processes; about 4 minutes, the refused
communicators' ranks waiting out the group's timeout). Records: group_ranks_args/ (ranks 0, 5)."""

import datetime
import json
import os
import subprocess
import sys

WORLD = 33
GROUPS = (list(range(0, WORLD, 2)), [0, 1, 3], [5], list(range(1, WORLD, 2)))
LEFT_OUT = ("Input Dims", "Input type", "Input Strides", "Concrete Inputs", "Ev Idx",
            "External id", "Record function id")


def member(rank, out):
    import torch
    import torch.distributed as dist
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.set_device(0)
    dist.init_process_group("nccl", init_method="tcp://127.0.0.1:29517", rank=rank,
                            world_size=WORLD, timeout=datetime.timedelta(seconds=40))
    groups = [dist.new_group(ranks) for ranks in GROUPS]
    x = torch.ones(4, device="cuda")
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for group in [None] + groups:
            if group is None or group != dist.GroupMember.NON_GROUP_MEMBER:
                try:
                    dist.all_reduce(x, group=group)
                    torch.cuda.synchronize()
                except Exception as error:
                    print(rank, "err", type(error).__name__, str(error)[:80], flush=True)
    trace = f"/tmp/group_ranks_args{rank}.json"
    prof.export_chrome_trace(trace)
    with open(trace) as f:
        events = json.load(f)["traceEvents"]
    with open(os.path.join(out, f"rank{rank}.jsonl"), "w") as f:
        for event in events:
            if event.get("name") == "record_param_comms":
                args = event.get("args", {})
                f.write(json.dumps({k: v for k, v in args.items() if k not in LEFT_OUT}) + "\n")
    os._exit(0)


if __name__ == "__main__":
    if len(sys.argv) == 3:
        member(int(sys.argv[2]), sys.argv[1])
    else:
        os.makedirs(sys.argv[1], exist_ok=True)
        procs = [subprocess.Popen([sys.executable, __file__, sys.argv[1], str(r)])
                 for r in range(WORLD)]
        sys.exit(max(p.wait() for p in procs))
