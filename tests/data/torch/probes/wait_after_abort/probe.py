# Probe: what WorkNCCL::wait() does (PyTorch 2.11) on a communicator that is failed/aborted.
# One GPU, one process, world size 1.  Run:  python probe.py blocking   |   python probe.py timeout2
#  blocking : TORCH_NCCL_BLOCKING_WAIT=1 (no watchdog); a side thread aborts the backend while
#             the main thread sits in w.wait() on a collective queued behind a GPU backlog.
#  timeout2 : the known async-error route (mode 2, watchdog on): w1 times out, w2 is called
#             during the watchdog's handling, then w2.wait(timeout=...) -- the SAME polling
#             branch of WorkNCCL::wait() as blocking wait (`blockingWait_ || timeout != kNoTimeout`).
import os, sys, time, threading, datetime
mode = sys.argv[1] if len(sys.argv) > 1 else "blocking"
os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="29533", TORCH_NCCL_TRACE_BUFFER_SIZE="2000")
if mode == "blocking":
    os.environ["TORCH_NCCL_BLOCKING_WAIT"] = "1"
else:
    os.environ.update(TORCH_NCCL_ASYNC_ERROR_HANDLING="2", TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC="2000")
import torch, torch.distributed as dist
T0 = time.monotonic()
def say(*a): print(f"{time.monotonic() - T0:8.3f}", *a, flush=True)
def try_(label, f):
    s = time.monotonic() - T0
    try: r = f(); say(label, f"RETURNED {r!r} (called at {s:.3f})")
    except Exception as e: say(label, f"RAISED {type(e).__name__} (called at {s:.3f}): {str(e)[:300]!r}")
dev = torch.device("cuda", 0); torch.cuda.set_device(dev)
timeout = datetime.timedelta(seconds=1 if mode == "timeout2" else 600)
dist.init_process_group("nccl", rank=0, world_size=1, timeout=timeout)
be = dist.group.WORLD._get_backend(dev)
say("torch", torch.__version__, "nccl", torch.cuda.nccl.version(), "mode", mode)
x = torch.ones(1 << 20, device=dev); dist.all_reduce(x); torch.cuda.synchronize(); say("warm-up done")
hz = torch.cuda.get_device_properties(dev).clock_rate * 1e3          # kHz -> Hz (approx. cycles/s)
torch.cuda._sleep(int(3.0 * hz)); say("queued ~3 s GPU backlog")
w1 = dist.all_reduce(x, async_op=True); say("w1 enqueued, is_completed", w1.is_completed())
if mode == "blocking":
    def aborter():
        time.sleep(1.0); say("side thread: backend.abort() starts")
        try_("side thread: backend.abort()", be.abort)
    threading.Thread(target=aborter, daemon=True).start()
    try_("w1.wait() [blocking wait]", w1.wait)   # source: isAborted() -> skips error check -> returns True once event fires
else:
    time.sleep(2.5)                               # w1 timed out at 1 s; watchdog is inside its handling now
    w2 = None
    def call2():
        global w2; w2 = dist.all_reduce(x, async_op=True); return "w2 made"
    try_("all_reduce #2 (during watchdog handling)", call2)
    time.sleep(0.5)                               # let the watchdog's next poll mark ITS copy of w2 failed
    if w2 is not None:
        try_("w2.is_completed()", w2.is_completed)
        try_("w2.wait(timeout=20s) [polling branch]", lambda: w2.wait(datetime.timedelta(seconds=20)))
    try_("w1.wait(timeout=20s)", lambda: w1.wait(datetime.timedelta(seconds=20)))
try_("follow-up all_reduce (is the communicator aborted?)", lambda: dist.all_reduce(x, async_op=True).wait())
try_("torch.cuda.synchronize()", torch.cuda.synchronize)
say("end")
os._exit(0)
