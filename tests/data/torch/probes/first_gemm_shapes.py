"""Is the first GEMM's cold cost the process's or each shape's? A fresh process runs GEMMs of
four shapes and dtypes in turn, each twice, and prints each call's host time and its time to
done (torch.cuda.synchronize after it). Run it in a fresh process: python first_gemm_shapes.py
"""

import time

import torch

torch.cuda.set_device(0)
device = torch.device("cuda", 0)
torch.ones(1, device=device)
torch.cuda.synchronize()
shapes = [(8192, torch.bfloat16), (4096, torch.bfloat16), (4096, torch.float32),
          (1024, torch.float16)]
operands = {key: torch.randn(key[0], key[0], dtype=key[1], device=device) for key in shapes}
torch.cuda.synchronize()
for key in shapes:
    a = operands[key]
    for call in (1, 2):
        start = time.perf_counter()
        a @ a
        returned = time.perf_counter()
        torch.cuda.synchronize()
        done = time.perf_counter()
        print("%5d %-14s call %d: host %9.3f ms, done %9.3f ms" % (
            key[0], str(key[1]).replace("torch.", ""), call, (returned - start) * 1e3,
            (done - start) * 1e3), flush=True)
