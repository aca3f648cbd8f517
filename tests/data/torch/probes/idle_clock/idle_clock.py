"""How long a short `torch.cuda._sleep` takes after the GPU idled for a while (session 28).

`_sleep` counts SM clock cycles, so its duration shows the clock the GPU runs at. The sleep is
calibrated once the clock settled (gpu_clock.cycles_per_ms), to 5 us and to 100 us. For each idle
gap (the host sleeps with the device drained), five rounds: synchronize, sleep the gap on the
host, then launch N short sleeps back to back, each between two CUDA events, and print each one's
duration. A second part repeats caught_timeout's shape: a 2 s sleep, an all_reduce whose
blocking wait (group timeout 0.5 s) raises after the communicator's abort, then the short sleeps.
Run: python3 idle_clock.py (one GPU, world size 1). Output: one line per measurement.
"""

import datetime
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from gpu_clock import cycles_per_ms  # noqa: E402

SHORT_SLEEPS = 8


def timed_sleeps(cycles, count):
    """Launches `count` sleeps of `cycles` back to back; their durations in us."""
    events = [torch.cuda.Event(enable_timing=True) for _ in range(count + 1)]
    events[0].record()
    for i in range(count):
        torch.cuda._sleep(int(cycles))
        events[i + 1].record()
    torch.cuda.synchronize()
    return [events[i].elapsed_time(events[i + 1]) * 1000 for i in range(count)]


def main():
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29541")
    # As caught_timeout: blocking wait, so no watchdog takes the process down after the timeout.
    os.environ["TORCH_NCCL_BLOCKING_WAIT"] = "1"
    torch.cuda.set_device(0)
    rate = cycles_per_ms()
    print(f"cycles_per_ms {rate:.0f} device {torch.cuda.get_device_name(0)} torch {torch.__version__}")
    for target_us in (5, 100):
        cycles = rate * target_us / 1000
        for gap_ms in (0, 1, 5, 20, 100, 500, 2000):
            for round_ in range(5):
                torch.cuda.synchronize()
                if gap_ms:
                    time.sleep(gap_ms / 1000)
                durations = timed_sleeps(cycles, SHORT_SLEEPS)
                print(f"idle target_us={target_us} gap_ms={gap_ms} round={round_} us="
                      + ",".join(f"{d:.1f}" for d in durations))
    # caught_timeout's shape: the abort after a wait's timeout, then the short sleeps.
    dist.init_process_group("nccl", rank=0, world_size=1,
                            timeout=datetime.timedelta(seconds=0.5))
    x = torch.ones(1 << 18, device="cuda")
    dist.all_reduce(x)
    torch.cuda.synchronize()
    for round_ in range(2):
        torch.cuda._sleep(int(rate * 2000))
        work = dist.all_reduce(x, async_op=True)
        begin = time.monotonic()
        try:
            work.wait(datetime.timedelta(milliseconds=500))
            raised = "returned"
        except Exception as error:  # the DistBackendError of the timeout
            raised = type(error).__name__
        waited = time.monotonic() - begin
        durations = timed_sleeps(rate * 5 / 1000, SHORT_SLEEPS)
        print(f"after_abort round={round_} wait_{raised}_after_s={waited:.3f} us="
              + ",".join(f"{d:.1f}" for d in durations))
        if round_ == 0:
            dist.destroy_process_group()
            dist.init_process_group("nccl", rank=0, world_size=1,
                                    timeout=datetime.timedelta(seconds=0.5))
            dist.all_reduce(x)
            torch.cuda.synchronize()
    os._exit(0)


if __name__ == "__main__":
    main()
