"""Probe: does an async all_reduce's host cost depend on what the host did before it, or only on
how long ago the previous collective returned?

docs/torch.md#host-warmth found PyTorch's call 21 µs in a tight loop and 217 µs after 30 ms or
more, but 38 µs after 3-30 ms of blocking on the GPU: the model, which knows only the gap, is
150-200 µs where PyTorch took 35-57 µs (docs/fidelity.md). Here the gap before each timed call
is filled one way at a time, for gaps of 0.1 to 100 ms:

- `sleep`: `time.sleep` (the thread is off the CPU);
- `spin`: a Python loop until the gap passed (the thread busy in the interpreter);
- `sync`: a GPU sleep of the gap, then `torch.cuda.synchronize()` (the thread in CUDA's wait);
- `item`: a GPU sleep of the gap, then `.item()` of a tensor behind it;
- `wait`: an all_reduce behind a GPU sleep of the gap, then its `wait()` and a synchronize;
- `launch`: a GPU sleep launched, then small kernels launched in a loop until the gap passed
  (the thread busy in PyTorch's op dispatch, but not in c10d);
- `sleep_wait`: an all_reduce of a 4-byte tensor at the gap's start, `time.sleep`, then that
  Work's `wait()` at the gap's end (a c10d call just before the timed one);
- `sync_wait`: a GPU sleep, the small all_reduce behind it, `torch.cuda.synchronize()`, then its
  `wait()`;
- `sleep_query`: the small all_reduce, `time.sleep`, then its `is_completed()`.

The first six ways are the default; `--ways a,b,...` picks others.

Each timed call is `dist.all_reduce(x, async_op=True)` of a 1-MiB tensor on a one-rank NCCL
group, timed with `time.perf_counter_ns` around the call; the timed Work is then waited on and
the device synchronized, so every trial starts from an idle GPU. The (way, gap) pairs run in a
shuffled order (fixed seed), `REPEATS` times each, after a warm-up. Also timed: the same call
right after the previous one returned (`tight`). Usage: python warmth_probe.py OUT.json
[--ways a,b,...] (prints a summary table; writes every trial to OUT.json). It drives PyTorch only.
`python warmth_probe.py --pool RUN.json...` reads runs back (no PyTorch needed) and prints, per
way and gap (and for all ways together, `pooled`), the median over every run's calls and the
range of the runs' own medians, then each run's own table (warmth.txt, warmth_tail.txt).
"""

import json
import random
import statistics
import sys
import time

GAPS_MS = [0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0]
WAYS = ["sleep", "spin", "sync", "item", "wait", "launch"]
LATE_C10D_WAYS = ["sleep_wait", "sync_wait", "sleep_query"]
# warmth_tail_probe.py's tails, in the order its tables show them.
TAILS = ["none", "marks", "wait", "gemm", "all"]
REPEATS = 12


def timed_call(x):
    """Host nanoseconds of one async all_reduce call; waits for it afterwards."""
    import torch
    import torch.distributed as dist

    begin = time.perf_counter_ns()
    work = dist.all_reduce(x, async_op=True)
    took = time.perf_counter_ns() - begin
    work.wait()
    torch.cuda.synchronize()
    return took


def fill_gap(way, gap_ms, cycles, x, small):
    """Occupies the host for about `gap_ms` the way `way` says; returns the gap measured from
    the previous collective's return to now."""
    import torch
    import torch.distributed as dist

    deadline = time.perf_counter_ns() + int(gap_ms * 1e6)
    if way == "sleep":
        time.sleep(gap_ms / 1e3)
    elif way == "spin":
        while time.perf_counter_ns() < deadline:
            pass
    elif way == "sync":
        torch.cuda._sleep(int(cycles * gap_ms))
        torch.cuda.synchronize()
    elif way == "item":
        torch.cuda._sleep(int(cycles * gap_ms))
        small.add_(1)
        small.item()
    elif way == "wait":
        torch.cuda._sleep(int(cycles * gap_ms))
        dist.all_reduce(small, async_op=True).wait()
        torch.cuda.synchronize()
    elif way == "launch":
        torch.cuda._sleep(int(cycles * gap_ms))
        while time.perf_counter_ns() < deadline:
            small.add_(1)
        torch.cuda.synchronize()
    elif way in ("sleep_wait", "sleep_query"):
        work = dist.all_reduce(small, async_op=True)
        time.sleep(gap_ms / 1e3)
        if way == "sleep_wait":
            work.wait()
        else:
            work.is_completed()
    elif way == "sync_wait":
        torch.cuda._sleep(int(cycles * gap_ms))
        work = dist.all_reduce(small, async_op=True)
        torch.cuda.synchronize()
        work.wait()
    else:
        raise ValueError(way)


def quartiles(values):
    ordered = sorted(values)
    n = len(ordered)
    return ordered[n // 4], statistics.median(ordered), ordered[(3 * n) // 4]


def ways_of(trials, order=None):
    """The ways the trials used: in `order` where given, else in the order of their first
    trial."""
    ways = list(dict.fromkeys(t["way"] for t in trials))
    return sorted(ways, key=order.index) if order else ways


def gaps_of(trials):
    return sorted({t["gap_ms"] for t in trials})


def table(rows, order=None):
    """One run's medians (25th-75th percentile) per way and gap, and its tight calls'."""
    gaps = gaps_of(rows)
    print(f"{'way':<12}" + "".join(f"{g:>22}" for g in gaps))
    for way in ways_of(rows, order):
        cells = []
        for gap_ms in gaps:
            calls = [r["call_ns"] / 1e3 for r in rows if r["way"] == way and r["gap_ms"] == gap_ms]
            q1, median, q3 = quartiles(calls)
            cells.append(f"{median:7.1f} ({q1:5.1f}-{q3:5.1f})")
        print(f"{way:<12}" + "".join(f"{c:>22}" for c in cells))
    tight = [r["tight_after_ns"] / 1e3 for r in rows]
    q1, median, q3 = quartiles(tight)
    print(f"tight   {median:.1f} µs ({q1:.1f}-{q3:.1f}), {len(tight)} calls")


def pool(paths):
    """Per way and gap: the median call over all runs, and the runs' own medians' range."""
    runs = []
    for path in paths:
        with open(path) as f:
            runs.append(json.load(f)["trials"])
    print(f"{len(runs)} runs; per cell: median over every run's calls in µs "
          "(least-greatest of the runs' own medians)")
    every = [t for trials in runs for t in trials]
    order = next((known for known in (WAYS + LATE_C10D_WAYS, TAILS)
                  if set(ways_of(every)) <= set(known)), None)
    gaps = gaps_of(every)
    print(f"{'way':<12}" + "".join(f"{g:>18}" for g in gaps))
    for way in ways_of(every, order) + ["pooled"]:
        cells = []
        for gap_ms in gaps:
            medians, pooled = [], []
            for trials in runs:
                calls = [t["call_ns"] / 1e3 for t in trials
                         if way in ("pooled", t["way"]) and t["gap_ms"] == gap_ms]
                medians.append(statistics.median(calls))
                pooled.extend(calls)
            cells.append(f"{statistics.median(pooled):5.0f} ({min(medians):3.0f}-{max(medians):3.0f})")
        print(f"{way:<12}" + "".join(f"{c:>18}" for c in cells))
    for path, trials in zip(paths, runs):
        print(f"\n{path}:")
        table(trials, order)


def main():
    if sys.argv[1] == "--pool":
        pool(sys.argv[2:])
        return
    import torch
    import torch.distributed  # noqa: F401 (write_run ends the group through it)

    from gpu_clock import cycles_per_ms
    from one_rank import init_group

    out = sys.argv[1]
    ways = WAYS
    if sys.argv[2:3] == ["--ways"]:
        ways = sys.argv[3].split(",")
        unknown = set(ways) - set(WAYS + LATE_C10D_WAYS)
        if unknown:
            raise SystemExit(f"warmth_probe.py: unknown ways {sorted(unknown)}")
    x = init_group(timeout_ms=600_000)
    small = torch.zeros(1, device="cuda")
    cycles = cycles_per_ms()
    for _ in range(50):
        timed_call(x)
    trials = [(way, gap) for way in ways for gap in GAPS_MS] * REPEATS
    random.Random(20261204).shuffle(trials)
    rows = []
    for way, gap_ms in trials:
        # The previous collective is the tight call just before: the gap runs from its return.
        timed_call(x)
        returned = time.perf_counter_ns()
        fill_gap(way, gap_ms, cycles, x, small)
        gap_measured_ns = time.perf_counter_ns() - returned
        call_ns = timed_call(x)
        tight_ns = timed_call(x)
        rows.append({"way": way, "gap_ms": gap_ms, "gap_measured_ns": gap_measured_ns,
                     "call_ns": call_ns, "tight_after_ns": tight_ns})
    table(rows, WAYS + LATE_C10D_WAYS)
    write_run(out, torch, cycles, rows)


def write_run(out, torch, cycles, rows):
    """Writes a run's trials (what `--pool` reads) and ends the process group."""
    with open(out, "w") as f:
        json.dump({"torch": torch.__version__, "device": torch.cuda.get_device_name(),
                   "repeats": REPEATS, "cycles_per_ms": cycles, "trials": rows}, f, indent=1)
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
