"""Does the GPU-clock calibration of the probes hold on a freshly started machine?

The probes turned milliseconds into `torch.cuda._sleep` cycles with one calibration: a 10 M-cycle
sleep timed with CUDA events (gpu_clock.py now repeats it until it settles). `_sleep` counts SM clock cycles, so a calibration taken while the
GPU still runs at an idle clock gives too few cycles per millisecond, and once the clock rises
every later "3000-ms" backlog is shorter than asked. This script calibrates five times in a row,
then runs a backlog of 3000 ms by the first calibration and by the last, timing each with CUDA
events, and reads the SM clock (`nvidia-smi`) before and after. One JSON line per reading on
stdout. Usage: python sleep_calibration.py
"""

import json
import subprocess

import torch

from gpu_clock import timed_sleep_ms


def sm_clock_mhz():
    out = subprocess.run(
        ["nvidia-smi", "--query-gpu=clocks.sm,clocks.max.sm", "--format=csv,noheader,nounits"],
        capture_output=True, text=True, check=False).stdout.strip()
    return out


def main():
    print(json.dumps({"reading": "sm clock before, max (MHz)", "value": sm_clock_mhz()}), flush=True)
    torch.cuda.set_device(0)
    torch.ones(1, device="cuda")
    torch.cuda.synchronize()
    per_ms = []
    for k in range(5):
        per_ms.append(10_000_000 / timed_sleep_ms(10_000_000))
        print(json.dumps({"reading": f"calibration {k}: cycles per ms", "value": round(per_ms[-1])}),
              flush=True)
    for name, rate in (("first", per_ms[0]), ("last", per_ms[-1])):
        took = timed_sleep_ms(rate * 3000)
        print(json.dumps({"reading": f"3000-ms backlog by the {name} calibration: ms",
                          "value": round(took, 1)}), flush=True)
    print(json.dumps({"reading": "sm clock after, max (MHz)", "value": sm_clock_mhz()}), flush=True)


main()
