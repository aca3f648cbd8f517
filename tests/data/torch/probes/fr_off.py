"""Probe: what PyTorch's watchdog does after a collective timeout with the Flight Recorder off.

c10dsim refused `TORCH_FR_BUFFER_SIZE=0` until this probe ran (docs/semantics.md, R27): what the
watchdog then does was not established. This probe runs scenarios/timeout_dump.toml (one rank, a 1-s timeout behind a
GPU backlog, `TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC=250`) through the interpreter
(`python -m c10dsim.torch`, one process, no torchrun) with both buffer variables at 0, and, as a
control, at 2000, with `TORCH_NCCL_DUMP_ON_TIMEOUT` at 1. The scenario is resolved by the
c10dsim binary given (`c10dsim resolve --json`) and its `[env]` edited in the resolved JSON,
since the binary refuses the 0. Each stderr line of the process is stamped on arrival with the
seconds since the launch (`time.monotonic`), so no log clock is read. Usage, from the
repository root:
    python tests/data/torch/probes/fr_off.py C10DSIM OUT_DIR [RUNS]
(`stamp` and `marks` were made functions after the recorded run, for launch_wait.py; what they do
is unchanged.)
Writes OUT_DIR/<variant>.run<k>.log (stamped lines) and prints, per run, the stamps of the
watchdog's lines (timeout, stack trace, dump signal, the monitor's dump, the take-down) and the
exit status. It drives PyTorch only.
"""

import json
import os
import subprocess
import sys
import time

MARKERS = [
    ("timeout", "Watchdog caught collective operation timeout"),
    ("stack_trace", "Stack trace of the failed collective"),
    ("signal", "to signal dumping"),
    ("monitor_dump", "Received a dump signal"),
    ("dump", "preparing to dump debug info"),
    ("take_down", "we are taking the entire process down"),
]


def resolved(binary, buffer_entries):
    out = subprocess.run([binary, "resolve", "scenarios/timeout_dump.toml", "--json"],
                         capture_output=True, text=True, check=True).stdout
    scenario = json.loads(out)
    raw = scenario["env"]["raw"]
    raw["TORCH_FR_BUFFER_SIZE"] = str(buffer_entries)
    raw["TORCH_NCCL_TRACE_BUFFER_SIZE"] = str(buffer_entries)
    return scenario


def stamp(command, env, log_path):
    """Runs `command`, stamping each stderr line on arrival with the seconds since the launch;
    writes the stamped lines to `log_path`; returns the exit status and the lines."""
    begin = time.monotonic()
    process = subprocess.Popen(command, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
                               text=True, env=env)
    stamped = []
    for line in process.stderr:
        stamped.append((time.monotonic() - begin, line.rstrip("\n")))
    status = process.wait()
    with open(log_path, "w") as f:
        for at, line in stamped:
            f.write(f"{at:9.3f} {line}\n")
    return status, stamped


def marks(stamped):
    """The stamp of the first line of each marker, as `key seconds` pairs."""
    first = {}
    for key, marker in MARKERS:
        for at, line in stamped:
            if marker in line:
                first[key] = at
                break
    return " ".join(f"{key} {first[key]:.3f}" for key, _ in MARKERS if key in first)


def run(scenario, out_dir, name, launcher=(), extra=()):
    """Runs the interpreter on `scenario`, behind `launcher` (a module run with -m before
    `-m c10dsim.torch`, e.g. torchrun's, launch_store.py) and with `extra` arguments."""
    path = os.path.join(out_dir, name + ".json")
    with open(path, "w") as f:
        json.dump(scenario, f)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.abspath("python") + ":" + env.get("PYTHONPATH", "")
    command = [sys.executable, *launcher, "-m", "c10dsim.torch", path,
               "--out", os.path.join(out_dir, name), *extra]
    status, stamped = stamp(command, env, os.path.join(out_dir, name + ".log"))
    print(f"{name}: exit {status}; {marks(stamped)}", flush=True)


def main():
    binary, out_dir = sys.argv[1], sys.argv[2]
    runs = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    os.makedirs(out_dir, exist_ok=True)
    for k in range(1, runs + 1):
        for entries in (0, 2000):
            name = f"fr{entries}.run{k}"
            run(resolved(binary, entries), out_dir, name)


if __name__ == "__main__":
    main()
