#!/usr/bin/env bash
# What PyTorch's watchdog does after a collective timeout with TORCH_NCCL_DUMP_ON_TIMEOUT=0, against
# the default 1: scenarios/timeout_dump.toml (one rank, a 1-s timeout, a GPU backlog ahead of the
# all_reduce, TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC=250) through `c10dsim torch` on one GPU, three
# runs of each value, alternating. Usage: tests/data/torch/probes/dump_off.sh C10DSIM OUT; writes
# OUT/timeout_dump.dump_on_timeout<v>.run<k>.json and .log, and prints per run each watchdog-thread
# event's first time (seconds on the run's axis) and the time from the timeout to the exit.
# Records: dump_off.txt; docs/watchdog.md reports the result.
set -u
bin=$1
out=$2
mkdir -p "$out"
for run in 1 2 3; do
  for value in 0 1; do
    name="timeout_dump.dump_on_timeout$value.run$run"
    setsid "$bin" torch scenarios/timeout_dump.toml --set env.TORCH_NCCL_DUMP_ON_TIMEOUT=$value \
      --timeline "$out/$name.json" >"$out/$name.log" 2>&1
    status=$?
    python3 - "$out/$name.json" "$value" "$status" <<'PY'
import json, sys
timeline = json.load(open(sys.argv[1]))
first = {}
for record in timeline["watchdog"]:
    first.setdefault((record["thread"], record["event"]), record["at_ns"] / 1e9)
events = " ".join(f"{thread}/{event} {at:.3f}" for (thread, event), at in sorted(first.items(), key=lambda kv: kv[1]))
timeout = first.get(("watchdog", "timeout"))
end = first.get(("watchdog", "exit"))
gap = f"{end - timeout:.3f}" if timeout is not None and end is not None else "-"
print(f"DUMP_ON_TIMEOUT={sys.argv[2]} (c10dsim torch exit {sys.argv[3]}): {events}; exit - timeout {gap}")
PY
  done
done
