"""How many kernel launches can a stream hold before the launching host thread blocks?

A long GPU sleep is queued first, so nothing behind it runs; then tiny kernels are launched one
by one on the same stream and each launch's host time is taken with ``time.perf_counter_ns``.
While the queue has room a launch returns in microseconds; once it is full the launch blocks
until the sleep ends. The first launch that takes more than ``--block-ms`` names the bound.
Repeated ``--repeat`` times (fresh stream each) and printed as one JSON object.

Usage: python launch_queue.py [--sleep-ms 2000] [--max-launches 20000] [--repeat 3]
"""

import argparse
import json
import time

import torch


def one_run(sleep_cycles, max_launches, block_ns):
    stream = torch.cuda.Stream()
    tiny = torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
    with torch.cuda.stream(stream):
        torch.cuda._sleep(sleep_cycles)
        for launched in range(max_launches):
            start = time.perf_counter_ns()
            tiny.add_(1.0)
            took = time.perf_counter_ns() - start
            if took > block_ns:
                stream.synchronize()
                return {"blocked_at_launch": launched, "blocked_ns": took}
    stream.synchronize()
    return {"blocked_at_launch": None, "launched": max_launches}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--sleep-ms", type=int, default=2000)
    parser.add_argument("--max-launches", type=int, default=20000)
    parser.add_argument("--block-ms", type=float, default=50.0)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    torch.zeros(1, device="cuda").add_(1.0)
    torch.cuda.synchronize()
    cycles = args.sleep_ms * 1000 * 1980
    runs = [one_run(cycles, args.max_launches, int(args.block_ms * 1e6)) for _ in range(args.repeat)]
    print(json.dumps({"torch": torch.__version__, "device": torch.cuda.get_device_name(), "runs": runs}))


if __name__ == "__main__":
    main()
