"""Is the first kernel's extra time after an idle gap the host's or the GPU's? (session 28)

idle_clock.py found that a 100-us `_sleep` bracketed by two CUDA events takes 102.7 us back to
back but 135-185 us when it is the first after the device drained and the host slept 5 ms or
more. Here the same first sleep is timed after a 20-ms gap filled four ways, five rounds each:
`sleep` (host asleep, GPU idle), `spin` (host spinning in Python, GPU idle), `gpu_busy` (host
asleep, the GPU running a 20-ms sleep on another stream until just before), and `sync_spin`
(the host waits in torch.cuda.synchronize() on a 20-ms GPU sleep on the same stream, then
launches at once: GPU idle for microseconds, host hot). It also times the host's own path:
the microseconds from before the start event's record to after the kernel's launch returned.
Run: python3 idle_cause.py (one GPU).
"""

import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import torch  # noqa: E402
from gpu_clock import cycles_per_ms  # noqa: E402


def first_sleep(cycles):
    """(GPU us between the events, host us from before the record to after the launch)."""
    begin = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    t0 = time.perf_counter()
    begin.record()
    torch.cuda._sleep(int(cycles))
    t1 = time.perf_counter()
    end.record()
    torch.cuda.synchronize()
    return begin.elapsed_time(end) * 1000, (t1 - t0) * 1e6


def main():
    torch.cuda.set_device(0)
    rate = cycles_per_ms()
    side = torch.cuda.Stream()
    cycles = rate * 100 / 1000
    print(f"cycles_per_ms {rate:.0f} device {torch.cuda.get_device_name(0)}")
    for fill in ("sleep", "spin", "gpu_busy", "sync_spin", "sleep"):
        for round_ in range(5):
            torch.cuda.synchronize()
            if fill == "sleep":
                time.sleep(0.020)
            elif fill == "spin":
                until = time.perf_counter() + 0.020
                while time.perf_counter() < until:
                    pass
            elif fill == "gpu_busy":
                with torch.cuda.stream(side):
                    torch.cuda._sleep(int(rate * 20))
                time.sleep(0.0195)
            elif fill == "sync_spin":
                torch.cuda._sleep(int(rate * 20))
                torch.cuda.synchronize()
            gpu_us, host_us = first_sleep(cycles)
            print(f"fill={fill} round={round_} gpu_us={gpu_us:.1f} host_us={host_us:.1f}")
    os._exit(0)


if __name__ == "__main__":
    main()
