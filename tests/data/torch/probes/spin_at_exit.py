"""Does the destructor's ncclCommAbort end a collective spinning for a peer that never comes?
One rank: a send to itself with no matching receive would spin, if NCCL let it through; it does
not (spin_at_exit.txt: ncclInvalidUsage), so the question needs two GPUs. Usage:

    python spin_at_exit.py return|raise|destroy
"""
import datetime
import json
import sys
import tempfile
import time

START = time.perf_counter()

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

mode = sys.argv[1]  # return | raise | destroy
torch.cuda.set_device(0)
dist.init_process_group("nccl", init_method="file://" + tempfile.mktemp(), rank=0, world_size=1,
                        timeout=datetime.timedelta(seconds=600), device_id=torch.device("cuda", 0))
x = torch.ones(1 << 18, device="cuda")
dist.all_reduce(x)
torch.cuda.synchronize()
how = None
for name, launch in (("isend", lambda: dist.isend(x, dst=0)),
                     ("batch", lambda: dist.batch_isend_irecv([dist.P2POp(dist.isend, x, 0)])[0])):
    try:
        work = launch(); how = name; break
    except Exception as error:  # noqa: BLE001
        print(json.dumps({"refused": name, "error": str(error)[:200]}), flush=True)
if how is None:
    sys.exit(3)
time.sleep(1.0)
print(json.dumps({"launched": how, "completed_after_1s": work.is_completed(),
                  "returned_s": time.perf_counter() - START, "mode": mode}), flush=True)
if mode == "destroy":
    dist.destroy_process_group()
if mode == "raise":
    raise RuntimeError("spin_at_exit: uncaught")
