"""What happens to a process whose program returns while its GPU work and a Work are pending?

A one-rank NCCL group (its timeout `--timeout-ms`) queues a `--sleep-ms` GPU sleep and an async
all_reduce behind it (none with `--no-collective`), sleeps `--host-sleep-ms` on the host,
waits for the GPU with `--sync` (`wait()`, then `torch.cuda.synchronize()`), then the program returns without waiting (optionally after `destroy_process_group()`), or, with `--raise`, ends
in an uncaught exception instead of returning. `--second-group-timeout-ms T` also creates a
second group (`new_group([0], timeout=T)`, its communicator made eagerly by a warm all_reduce);
with `--second-group-work` the async all_reduce goes to that group instead of the default one.
Printed as one JSON line on stdout: when the Work was enqueued (`enqueued_s`) and when the
program returned or raised (`returned_s`), both from the script's start; the caller measures
when the process ended, and keeps stderr for the watchdog's lines. Usage:

    python exit_with_pending_work.py [--sleep-ms 2000] [--timeout-ms 500] [--host-sleep-ms 0]
                                     [--no-collective] [--sync] [--destroy] [--raise]
                                     [--second-group-timeout-ms T [--second-group-work]]
"""

import argparse
import datetime
import json
import os
import time

START = time.perf_counter()

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

import gpu_clock  # noqa: E402
import one_rank  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--sleep-ms", type=float, default=2000.0)
    parser.add_argument("--timeout-ms", type=float, default=500.0)
    parser.add_argument("--host-sleep-ms", type=float, default=0.0)
    parser.add_argument("--no-collective", action="store_true")
    parser.add_argument("--sync", action="store_true")
    parser.add_argument("--destroy", action="store_true")
    parser.add_argument("--raise", dest="raise_", action="store_true")
    parser.add_argument("--second-group-timeout-ms", type=float, default=None)
    parser.add_argument("--second-group-work", action="store_true")
    args = parser.parse_args()
    x = one_rank.init_group(args.timeout_ms)
    group = None
    if args.second_group_timeout_ms is not None:
        second = dist.new_group(
            [0], timeout=datetime.timedelta(milliseconds=args.second_group_timeout_ms))
        dist.all_reduce(x, group=second)
        if args.second_group_work:
            group = second
    torch.cuda.synchronize()
    cycles_per_ms = gpu_clock.cycles_per_ms()
    torch.cuda._sleep(int(cycles_per_ms * args.sleep_ms))
    enqueued_s = time.perf_counter() - START
    completed = None
    if not args.no_collective:
        work = dist.all_reduce(x, group=group, async_op=True)
        completed = work.is_completed()
    time.sleep(args.host_sleep_ms / 1000)
    if args.sync:
        if not args.no_collective:
            work.wait()
        torch.cuda.synchronize()
    if args.destroy:
        dist.destroy_process_group()
    print(json.dumps({"returned_s": time.perf_counter() - START, "enqueued_s": enqueued_s,
                      "pid": os.getpid(), "host_sleep_ms": args.host_sleep_ms,
                      "collective": not args.no_collective, "sync": args.sync,
                      "work_completed_at_return": completed,
                      "destroy": args.destroy, "sleep_ms": args.sleep_ms,
                      "timeout_ms": args.timeout_ms, "raise": args.raise_,
                      "second_group_timeout_ms": args.second_group_timeout_ms,
                      "second_group_work": args.second_group_work,
                      "torch": torch.__version__}),
          flush=True)
    if args.raise_:
        raise RuntimeError("exit_with_pending_work.py: the program ends in an uncaught exception")


main()
