"""Does the heartbeat monitor end a process that survived a collective's timeout?

By PyTorch's source (`HeartbeatMonitor::runLoop`), a monitor that finds the dump signal in the
store leaves its loop, dumps, sleeps one heartbeat timeout and terminates the process, unless the
process group was destroyed meanwhile. A one-rank group is enough to see it: the rank's own
watchdog broadcasts the signal, and its own monitor reads it. The script queues a `--backlog-ms`
GPU sleep and an async all_reduce behind it in a group whose timeout is `--timeout-ms`, never
waits on it, and lives `--linger-s` on in Python, printing a line every second: under
TORCH_NCCL_ASYNC_ERROR_HANDLING=2 (CleanUpOnly, `--mode 2`) or 0 (NoHandling) the watchdog does
not end the process itself. The environment sets the heartbeat timeout (`--heartbeat-s`) and
the dump wait (250 ms, so that the watchdog's sleep for the dumps is 1 s).

Prints on stdout a JSON line with the start's wall and CLOCK_MONOTONIC readings (for
wait_timeout_abort.py --read-log), `alive <seconds from the start>` every second, and `done` if the
program got to its end. Usage:

    python monitor_after_dump_signal.py [--mode 2] [--heartbeat-s 15] [--timeout-ms 1000]
                                        [--backlog-ms 3000] [--linger-s 60]
"""

import argparse
import json
import os
import sys
import time

START_UNIX_NS = time.time_ns()
START_MONOTONIC_NS = time.monotonic_ns()
START = time.perf_counter()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", type=int, choices=[0, 1, 2, 3], default=2)
    parser.add_argument("--heartbeat-s", type=int, default=15)
    parser.add_argument("--timeout-ms", type=float, default=1000.0)
    parser.add_argument("--backlog-ms", type=float, default=3000.0)
    parser.add_argument("--linger-s", type=int, default=60)
    args = parser.parse_args()
    os.environ["TORCH_NCCL_ASYNC_ERROR_HANDLING"] = str(args.mode)
    os.environ["TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC"] = str(args.heartbeat_s)
    os.environ["TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC"] = "250"
    import torch
    import torch.distributed as dist

    import gpu_clock
    import one_rank

    x = one_rank.init_group(args.timeout_ms)
    torch.cuda.synchronize()
    cycles_per_ms = gpu_clock.cycles_per_ms()
    torch.cuda._sleep(int(cycles_per_ms * args.backlog_ms))
    dist.all_reduce(x, async_op=True)
    enqueued_s = time.perf_counter() - START
    print(json.dumps({"mode": args.mode, "heartbeat_s": args.heartbeat_s,
                      "timeout_ms": args.timeout_ms, "backlog_ms": args.backlog_ms,
                      "enqueued_s": enqueued_s, "cycles_per_ms": round(cycles_per_ms),
                      "start_unix_ns": START_UNIX_NS,
                      "start_monotonic_ns": START_MONOTONIC_NS, "torch": torch.__version__}),
          flush=True)
    for _ in range(args.linger_s):
        time.sleep(1)
        print(f"alive {time.perf_counter() - START:.3f}", flush=True)
    print("done", flush=True)
    sys.stdout.flush()
    os._exit(0)


main()
