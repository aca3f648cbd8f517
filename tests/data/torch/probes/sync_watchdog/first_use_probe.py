# Why did the process's first dist.barrier() behind a 5 s GPU sleep not time out (2 s group
# timeout), while a later one did? And does a GEMM's first launch wait for the device too?
# Variants (argv[1]), each a fresh process, one rank:
#   cold: nothing before the sleep;  empty: torch.empty(4) (small pool made, no kernel) before;
#   zeros: torch.zeros(1) (pool and float fill kernel loaded) before;  ones: torch.ones(4)
#   (float) before;  zeros_bf16: torch.zeros(1, bfloat16) (another dtype's fill kernel) before;
#   sin: time the first launch of a kernel never used before (torch.sin on an existing tensor)
#   behind the sleep, no barrier;  gemm: time the process's first 4096^3 bf16 matmul behind the
#   sleep;  gemm_warm: one such matmul before the sleep, time a second behind it;  gemm_shape:
#   a 1024^3 bf16 matmul before the sleep, time the first 4096^3 one behind it;  gemm_k /
#   gemm_m: a 4096^3 bf16 matmul before the sleep, time the first 4096x2048 @ 2048x4096
#   (another k) / 2048x4096 @ 4096x4096 (another m) one behind it: does a shape family share
#   the loaded kernel?
# TORCH_NCCL_ASYNC_ERROR_HANDLING=0: the watchdog logs a timeout but lets the process live.
import os, sys, time, torch, torch.distributed as dist, datetime
os.environ.setdefault("MASTER_ADDR", "127.0.0.1"); os.environ.setdefault("MASTER_PORT", "29571")
v = sys.argv[1]
torch.cuda.set_device(0)
dist.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device("cuda:0"), timeout=datetime.timedelta(seconds=2))
keep = None
if v == "empty": keep = torch.empty(4, device="cuda")
if v == "zeros": keep = torch.zeros(1, device="cuda")
if v == "ones": keep = torch.ones(4, device="cuda")
if v == "zeros_bf16": keep = torch.zeros(1, device="cuda", dtype=torch.bfloat16)
if v == "sin": keep = torch.empty(1024, device="cuda")
gemm = v.startswith("gemm")
if gemm:
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    torch.cuda.current_blas_handle()
    if v in ("gemm_warm", "gemm_k", "gemm_m"): torch.matmul(a, b)
    if v == "gemm_k": a, b = a[:, :2048].contiguous(), b[:2048, :].contiguous()
    if v == "gemm_m": a = a[:2048, :].contiguous()
    if v == "gemm_shape":
        s = torch.randn(1024, 1024, device="cuda", dtype=torch.bfloat16); torch.matmul(s, s)
torch.cuda.synchronize()
t0 = time.perf_counter()
torch.cuda._sleep(10_000_000_000)  # about 5 s
t1 = time.perf_counter()
if v == "sin":
    y = torch.sin(keep); t2 = time.perf_counter()
    print(f"{v}: first torch.sin launch took {(t2-t1)*1e3:.1f} ms behind the sleep (sleep launch {(t1-t0)*1e3:.1f} ms)", flush=True)
elif gemm:
    y = torch.matmul(a, b); t2 = time.perf_counter()
    print(f"{v}: the matmul call took {(t2-t1)*1e3:.1f} ms behind the sleep (sleep launch {(t1-t0)*1e3:.1f} ms)", flush=True)
else:
    dist.barrier(); t2 = time.perf_counter()
    print(f"{v}: barrier returned after {(t2-t1)*1e3:.1f} ms", flush=True)
torch.cuda.synchronize(); time.sleep(0.3)
print(f"{v}: done at {(time.perf_counter()-t0)*1e3:.1f} ms", flush=True)
os._exit(0)
