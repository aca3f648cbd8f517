"""Probe: is the watchdog's wait after the dump signal longer under torchrun?

fr_off.py (the interpreter launched directly, each log line stamped on arrival) found the
take-down 1.000 s after the dump signal with TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC=250, where
`c10dsim torch` (the interpreter under torchrun, times read from PyTorch's log clock) had put it
1.56-1.95 s after (dump_wait.txt, dump_off.txt). This probe runs scenarios/timeout_dump.toml
three ways, two runs each, alternating, stamping every stderr line on arrival as fr_off.py does:
`direct0` and `direct1`, the interpreter launched directly with TORCH_NCCL_DUMP_ON_TIMEOUT at 0
and 1, and `torchrun1`, `c10dsim torch` itself with 1 (its Timeline kept, to compare its log
reader's times with the stamps). Usage, from the repository root: python
tests/data/torch/probes/launch_wait.py C10DSIM OUT_DIR. Writes
OUT_DIR/<way>.run<k>.log (stamped) and prints per run the stamps of the watchdog's lines and, for
`torchrun1`, the reader's dump signal and take-down. It drives PyTorch only.
"""

import json
import os
import sys

from fr_off import marks, resolved, run, stamp


def through_torchrun(binary, out_dir, name):
    timeline_path = os.path.join(out_dir, name + ".timeline.json")
    command = [binary, "torch", "scenarios/timeout_dump.toml", "--timeline", timeline_path]
    status, stamped = stamp(command, dict(os.environ), os.path.join(out_dir, name + ".log"))
    with open(timeline_path) as f:
        timeline = json.load(f)
    first = {}
    for record in timeline["watchdog"]:
        first.setdefault((record["thread"], record["event"]), record["at_ns"] / 1e9)
    signal = first.get(("watchdog", "dump_signal"))
    exit_ = first.get(("watchdog", "exit"))
    read = f"reader: signal {signal:.3f} take_down {exit_:.3f} (gap {exit_ - signal:.3f})" \
        if signal is not None and exit_ is not None else "reader: -"
    print(f"{name}: exit {status}; {marks(stamped)}; {read}", flush=True)


def main():
    binary, out_dir = sys.argv[1], sys.argv[2]
    os.makedirs(out_dir, exist_ok=True)
    for k in (1, 2):
        for value in (0, 1):
            scenario = resolved(binary, 2000)
            scenario["env"]["raw"]["TORCH_NCCL_DUMP_ON_TIMEOUT"] = str(value)
            run(scenario, out_dir, f"direct{value}.run{k}")
        through_torchrun(binary, out_dir, f"torchrun1.run{k}")


if __name__ == "__main__":
    main()
