import time, torch
dev = torch.device("cuda", 0)
torch.cuda.set_device(0)
x = torch.ones(1, device=dev); torch.cuda.synchronize()
a = torch.randn(8192, 8192, dtype=torch.bfloat16, device=dev); torch.cuda.synchronize()
a0 = torch.cuda.memory_allocated(dev)
t0 = time.perf_counter(); c = a @ a; t1 = time.perf_counter(); torch.cuda.synchronize(); t2 = time.perf_counter()
print("fresh process, first 8192 bf16 matmul cold: host %.1f ms, done %.1f ms, allocated +%d (output %d)" % ((t1 - t0) * 1e3, (t2 - t0) * 1e3, torch.cuda.memory_allocated(dev) - a0, c.numel()*2))
