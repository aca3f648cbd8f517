# Why did the process's first dist.barrier() behind a 5 s GPU sleep not time out (2 s group
# timeout), while a later one did? Variants (argv[1]), each a fresh process, one rank:
#   cold: nothing before the sleep;  empty: torch.empty(4) (small pool made, no kernel) before;
#   zeros: torch.zeros(1) (pool and fill kernel loaded) before;  sin: time the first launch of a
#   kernel never used before (torch.sin on an existing tensor) behind the sleep, no barrier.
# TORCH_NCCL_ASYNC_ERROR_HANDLING=0: the watchdog logs a timeout but lets the process live.
import os, sys, time, torch, torch.distributed as dist, datetime
os.environ.setdefault("MASTER_ADDR", "127.0.0.1"); os.environ.setdefault("MASTER_PORT", "29571")
v = sys.argv[1]
torch.cuda.set_device(0)
dist.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device("cuda:0"), timeout=datetime.timedelta(seconds=2))
keep = None
if v == "empty": keep = torch.empty(4, device="cuda")
if v == "zeros": keep = torch.zeros(1, device="cuda")
if v == "sin": keep = torch.empty(1024, device="cuda")
torch.cuda.synchronize()
t0 = time.perf_counter()
torch.cuda._sleep(10_000_000_000)  # about 5 s
t1 = time.perf_counter()
if v == "sin":
    y = torch.sin(keep); t2 = time.perf_counter()
    print(f"{v}: first torch.sin launch took {(t2-t1)*1e3:.1f} ms behind the sleep (sleep launch {(t1-t0)*1e3:.1f} ms)", flush=True)
else:
    dist.barrier(); t2 = time.perf_counter()
    print(f"{v}: barrier returned after {(t2-t1)*1e3:.1f} ms", flush=True)
torch.cuda.synchronize(); time.sleep(0.3)
print(f"{v}: done at {(time.perf_counter()-t0)*1e3:.1f} ms", flush=True)
os._exit(0)
