#!/usr/bin/env bash
# How long PyTorch's watchdog waits after the dump signal before it takes the process down, as
# a function of TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC: scenarios/timeout_dump.toml through
# `c10dsim torch` (one GPU) with that variable set to each value, two runs each. Usage:
# tests/data/torch/probes/dump_wait.sh C10DSIM OUT; writes OUT/timeout_dump.dump<ms>.run<k>.json
# and .log, and prints per run: the dump timeout, the dump signal, the monitor's dump, the exit
# (seconds on the run's axis) and exit − signal. docs/watchdog.md reports the result.
set -u
bin=$1
out=$2
mkdir -p "$out"
for run in 1 2; do
  for ms in 100 250 1000 2500; do
    name="timeout_dump.dump$ms.run$run"
    setsid "$bin" torch scenarios/timeout_dump.toml \
      --set env.TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC=$ms \
      --timeline "$out/$name.json" >"$out/$name.log" 2>&1
    python3 - "$out/$name.json" "$ms" <<'PY'
import json, sys
timeline = json.load(open(sys.argv[1]))
first = {}
for record in timeline["watchdog"]:
    if record["thread"] == "watchdog":
        first.setdefault(record["event"], record["at_ns"] / 1e9)
signal, dump, end = first.get("dump_signal"), first.get("dump"), first.get("exit")
gap = f"{end - signal:.3f}" if signal is not None and end is not None else "-"
print(f"dump_ms {sys.argv[2]}: signal {signal} dump {dump} exit {end} exit-signal {gap}")
PY
  done
done
