# Where does PyTorch hold a deleted gradient of an async all_reduce? One rank, NCCL.
import os, sys, torch, torch.distributed as dist
os.environ.setdefault("MASTER_ADDR", "127.0.0.1"); os.environ.setdefault("MASTER_PORT", "29533")
dist.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device("cuda:0"))
torch.cuda.set_device(0)
MiB = 1 << 20
def loop(variant, n=8):
    torch.cuda.synchronize(); torch.cuda.empty_cache(); torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    w = None
    for i in range(n):
        g = torch.empty(64 * MiB // 4, device="cuda")
        torch.cuda._sleep(500 * 1000)
        g.fill_(1.0)
        w = dist.all_reduce(g, async_op=True)
        del g
        if variant == "wait_then_del_w":
            w.wait(); del w; w = None
        elif variant == "wait_keep_w":
            w.wait()
        elif variant == "wait_sync_keep_w":
            w.wait(); torch.cuda.synchronize()
        elif variant == "is_completed_poll_keep_w":
            w.wait(); torch.cuda.synchronize(); w.is_completed()
        after = torch.cuda.memory_allocated() - base
        if i < 3: print(f"  {variant} iter {i}: allocated after wait {after/MiB:.0f} MiB", flush=True)
    torch.cuda.synchronize()
    print(f"{variant}: peak_allocated {(torch.cuda.max_memory_allocated()-base)/MiB:.0f} MiB, peak_reserved {torch.cuda.max_memory_reserved()/MiB:.0f} MiB, end allocated {(torch.cuda.memory_allocated()-base)/MiB:.0f} MiB", flush=True)
    del w
    torch.cuda.synchronize()
    print(f"  after del w: allocated {(torch.cuda.memory_allocated()-base)/MiB:.0f} MiB", flush=True)
print(torch.__version__, torch.cuda.nccl.version(), "AVOID_RECORD_STREAMS=", os.environ.get("TORCH_NCCL_AVOID_RECORD_STREAMS"))
for v in sys.argv[1:] or ["wait_keep_w", "wait_then_del_w", "wait_sync_keep_w"]:
    loop(v)
dist.destroy_process_group()
