# What dist.barrier() does in this PyTorch with NCCL: which stream its kernel runs on, which
# CUDA sync calls the host makes, and whether it returns a Work. One rank.
import os, torch, torch.distributed as dist
os.environ.setdefault("MASTER_ADDR", "127.0.0.1"); os.environ.setdefault("MASTER_PORT", "29541")
dist.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device("cuda:0"))
torch.cuda.set_device(0)
print(torch.__version__, torch.cuda.nccl.version())
x = torch.ones(4, device="cuda"); dist.all_reduce(x); dist.barrier(); torch.cuda.synchronize()
side = torch.cuda.Stream()
from torch.profiler import profile, ProfilerActivity
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
    torch.cuda._sleep(20_000_000)          # ~10 ms on the current stream
    r = dist.barrier()                     # sync barrier
    print("sync barrier returned", type(r))
    w = dist.barrier(async_op=True)
    print("async barrier returned", type(w))
    if w is not None: w.wait()
    torch.cuda.synchronize()
cur = torch.cuda.current_stream().cuda_stream
print("current stream id", cur)
for e in prof.events():
    n = e.name
    if any(k in n for k in ("nccl", "Synchronize", "barrier", "StreamWait", "EventRecord", "EventSynchronize", "cudaLaunchKernel", "sleep")):
        dev = getattr(e, "device_type", None)
        print(f"{e.time_range.start:>14.1f} {e.time_range.end:>14.1f} {str(dev):>20} {n[:90]}")
prof.export_chrome_trace(os.environ.get("OUT", ".") + "/barrier_trace.json")
dist.destroy_process_group()
