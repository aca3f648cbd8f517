"""The probes' one-rank process group: NCCL on GPU 0, a file store, the group's timeout, and one
warm-up all_reduce of a 1-MiB tensor, which is returned for the probe's own collectives."""

import datetime
import tempfile

import torch
import torch.distributed as dist


def init_group(timeout_ms):
    torch.cuda.set_device(0)
    store = tempfile.mktemp()
    dist.init_process_group("nccl", init_method=f"file://{store}", rank=0, world_size=1,
                            timeout=datetime.timedelta(milliseconds=timeout_ms),
                            device_id=torch.device("cuda", 0))
    x = torch.ones(1 << 18, device="cuda")
    dist.all_reduce(x)
    return x
