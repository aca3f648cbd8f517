"""When does a wait's own timeout reach Python, and what clock do PyTorch's log lines print?

A one-rank NCCL group queues a `--sleep-ms` GPU sleep and an async all_reduce behind it, then
waits for the Work: with `--mode blocking` under TORCH_NCCL_BLOCKING_WAIT=1 and a group timeout
of `--timeout-ms`; with `--mode timed` as `work.wait(timeout=--timeout-ms)` in a group whose own
timeout is 600 s. The wait times out; the main thread aborts the communicator, then raises. The
script catches the exception, retries one all_reduce on the aborted communicator (catching that
too), waits for the GPU, lives `--linger-ms` on so that the watchdog can log what it does with
the aborted communicator, and ends with os._exit(0) (the exit path is another probe's subject).

Two variants ask what the abort waits for. `--side-sleep-ms` also queues a GPU sleep of that
length on a side stream, which the collective does not depend on: does the raise wait for the
collective's stream only, or for the whole device? `--second-work` queues a second async
all_reduce behind the first before the wait: after the first's wait raised, is the second
complete, and does its `wait()` raise (`second_*` fields)? `--uncaught` prints the JSON line
(what is known by then) before the wait and lets the wait's exception end the program: the shell
script prints when the process was gone (`ended_unix_ns`). `--early-json` prints that line
before the wait too, but still catches: for a wait that may never return, as when the side sleep
never ends (`--side-sleep-ms 3600000` under `timeout`), the caller still learns the times.
`--subgroup` runs the collectives, their wait and the retry on `dist.new_group([0])` instead of
the default group: whose watchdog does the abort hold, and whose heartbeat monitor acts?

Printed as one JSON line on stdout, every time in seconds from the script's start: the enqueue
(`enqueued_s`), the start and end of the wait (`wait_began_s`, `raised_s`), the retry's raise
and the GPU drain, with the wall and CLOCK_MONOTONIC readings of the start (`start_unix_ns`,
`start_monotonic_ns`) so that the caller can place PyTorch's stderr lines on the same axis
(`--read-log`). Usage:

    python wait_timeout_abort.py [--mode blocking|timed] [--sleep-ms 2000] [--timeout-ms 500]
                                 [--linger-ms 2000]
    python wait_timeout_abort.py --read-log STDERR_FILE JSON_LINE
"""

import argparse
import datetime
import json
import os
import re
import sys
import time

START_UNIX_NS = time.time_ns()
START_MONOTONIC_NS = time.monotonic_ns()
START = time.perf_counter()

LINE = re.compile(r"^\[rank\d+\]:\[[EWI](\d\d)(\d\d) (\d\d):(\d\d):(\d\d)\.(\d{9}) ([^\]]+)\] (.*)")


def read_log(path, run):
    """Each PyTorch line of `path` with its time from the start read two ways: the printed clock
    as wall time, and the printed seconds as wall time with the fraction as CLOCK_MONOTONIC's."""
    start = run["start_unix_ns"]
    offset = (start - run["start_monotonic_ns"]) % 10**9
    year = time.gmtime(start / 1e9).tm_year
    for line in open(path, errors="replace"):
        match = LINE.match(line)
        if not match:
            continue
        month, day, hour, minute, second, fraction, source, message = match.groups()
        seconds = datetime.datetime(year, int(month), int(day), int(hour), int(minute),
                                    int(second), tzinfo=datetime.timezone.utc).timestamp()
        whole_ns = int(seconds) * 10**9
        as_wall = whole_ns + int(fraction)
        as_monotonic = whole_ns + (int(fraction) + offset) % 10**9
        print(f"   printed {(as_wall - start) / 1e9:8.3f}  monotonic-fraction "
              f"{(as_monotonic - start) / 1e9:8.3f}  {source}  {message[:110]}")


def since_start():
    return time.perf_counter() - START


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", choices=["blocking", "timed"], default="blocking")
    parser.add_argument("--sleep-ms", type=float, default=2000.0)
    parser.add_argument("--timeout-ms", type=float, default=500.0)
    parser.add_argument("--linger-ms", type=float, default=2000.0)
    parser.add_argument("--side-sleep-ms", type=float, default=0.0)
    parser.add_argument("--second-work", action="store_true")
    parser.add_argument("--uncaught", action="store_true")
    parser.add_argument("--early-json", action="store_true")
    parser.add_argument("--subgroup", action="store_true")
    parser.add_argument("--read-log", nargs=2, metavar=("STDERR_FILE", "JSON_LINE"))
    args = parser.parse_args()
    if args.read_log:
        read_log(args.read_log[0], json.loads(args.read_log[1]))
        return
    if args.mode == "blocking":
        os.environ["TORCH_NCCL_BLOCKING_WAIT"] = "1"
        group_timeout_ms = args.timeout_ms
    else:
        group_timeout_ms = 600_000
    import torch
    import torch.distributed as dist

    import gpu_clock
    import one_rank

    x = one_rank.init_group(group_timeout_ms)
    group = None
    if args.subgroup:
        group = dist.new_group([0], timeout=datetime.timedelta(milliseconds=group_timeout_ms))
        dist.all_reduce(x, group=group)
    torch.cuda.synchronize()
    cycles_per_ms = gpu_clock.cycles_per_ms()
    side = torch.cuda.Stream()
    side_done = torch.cuda.Event()
    if args.side_sleep_ms > 0:
        with torch.cuda.stream(side):
            torch.cuda._sleep(int(cycles_per_ms * args.side_sleep_ms))
            side_done.record(side)
    side_queued_s = since_start()
    torch.cuda._sleep(int(cycles_per_ms * args.sleep_ms))
    enqueued_s = since_start()
    work = dist.all_reduce(x, async_op=True, group=group)
    second = dist.all_reduce(x, async_op=True, group=group) if args.second_work else None
    wait_began_s = since_start()
    if args.uncaught or args.early_json:
        print(json.dumps({"mode": args.mode, "uncaught": args.uncaught, "sleep_ms": args.sleep_ms,
                          "timeout_ms": args.timeout_ms, "enqueued_s": enqueued_s,
                          "wait_began_s": wait_began_s, "start_unix_ns": START_UNIX_NS,
                          "start_monotonic_ns": START_MONOTONIC_NS,
                          "side_sleep_ms": args.side_sleep_ms, "subgroup": args.subgroup,
                          "torch": torch.__version__}), flush=True)
    if args.uncaught:
        if args.mode == "blocking":
            work.wait()
        else:
            work.wait(timeout=datetime.timedelta(milliseconds=args.timeout_ms))
    raised, error = None, None
    try:
        if args.mode == "blocking":
            work.wait()
        else:
            work.wait(timeout=datetime.timedelta(milliseconds=args.timeout_ms))
    except Exception as caught:  # noqa: BLE001 - the probe records whatever the wait raises
        raised, error = since_start(), f"{type(caught).__name__}: {str(caught)[:160]}"
    returned_s = since_start()
    side_done_at_raise = side_done.query() if args.side_sleep_ms > 0 else None
    second_completed, second_error, second_waited_s = None, None, None
    if second is not None:
        second_completed = second.is_completed()
        try:
            second.wait()
        except Exception as caught:  # noqa: BLE001
            second_error = f"{type(caught).__name__}: {str(caught)[:120]}"
        second_waited_s = since_start()
    retry_error = None
    try:
        dist.all_reduce(x, group=group)
    except Exception as caught:  # noqa: BLE001
        retry_error = f"{type(caught).__name__}: {str(caught)[:120]}"
    retry_s = since_start()
    torch.cuda.synchronize()
    drained_s = since_start()
    time.sleep(args.linger_ms / 1000)
    print(json.dumps({"mode": args.mode, "sleep_ms": args.sleep_ms,
                      "timeout_ms": args.timeout_ms, "enqueued_s": enqueued_s,
                      "wait_began_s": wait_began_s, "raised_s": raised,
                      "returned_s": returned_s, "error": error, "retry_s": retry_s,
                      "retry_error": retry_error, "drained_s": drained_s,
                      "side_sleep_ms": args.side_sleep_ms, "side_queued_s": side_queued_s,
                      "side_done_at_raise": side_done_at_raise,
                      "second_completed_at_raise": second_completed,
                      "second_error": second_error, "second_waited_s": second_waited_s,
                      "subgroup": args.subgroup,
                      "start_unix_ns": START_UNIX_NS,
                      "start_monotonic_ns": START_MONOTONIC_NS,
                      "torch": torch.__version__}),
          flush=True)
    sys.stdout.flush()
    os._exit(0)


main()
