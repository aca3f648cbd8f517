"""The probes' GPU clock: how many `torch.cuda._sleep` cycles make a millisecond.

`_sleep` counts SM clock cycles. A freshly started machine's GPU idles at a low clock (the H200:
345 MHz against 1980 MHz) and its first kernels run before the clock rises, so a single timed
sleep taken then gives far too few cycles per millisecond (measured 0.58 M against 1.97 M,
sleep_calibration.txt), and every backlog made from it is short (a "3000-ms" one took 0.88 s).
`cycles_per_ms` therefore repeats the timed sleep until two readings in a row agree within 1 %
(at most ten), and returns the last one.
"""

import sys

import torch

PROBE_CYCLES = 10_000_000


def timed_sleep_ms(cycles):
    """The milliseconds a `_sleep` of `cycles` takes on the current stream, by CUDA events."""
    begin = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    begin.record()
    torch.cuda._sleep(int(cycles))
    end.record()
    torch.cuda.synchronize()
    return begin.elapsed_time(end)


def cycles_per_ms():
    """Cycles of `_sleep` per millisecond, once the clock has settled."""
    torch.cuda.synchronize()
    previous = None
    for _ in range(10):
        rate = PROBE_CYCLES / timed_sleep_ms(PROBE_CYCLES)
        if previous is not None and abs(rate - previous) <= 0.01 * previous:
            return rate
        previous = rate
    print(f"gpu_clock: the timed sleep did not settle in ten readings; using {previous:.0f} "
          "cycles per ms", file=sys.stderr)
    return previous
