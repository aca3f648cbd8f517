#!/usr/bin/env bash
# Runs exit_with_pending_work.py in the variants docs/torch.md ("A program that returns with work
# pending") reports, two runs each, on a machine with one GPU and PyTorch; prints one line per run:
# the arguments, the run, the exit status, the process's lifetime (measured here, from the start)
# and the script's JSON line, then the run's stderr lines that name the watchdog, a timeout, an
# abort or terminate. With arguments, runs only that one variant.
set -u
here="$(cd "$(dirname "$0")" && pwd)"
variants=(
  "--sleep-ms 2000 --timeout-ms 500"
  "--sleep-ms 2000 --timeout-ms 600000"
  "--sleep-ms 2000 --timeout-ms 500 --no-collective"
  "--sleep-ms 5000 --timeout-ms 1000 --host-sleep-ms 800"
  "--sleep-ms 5000 --timeout-ms 1000 --host-sleep-ms 1500"
  "--sleep-ms 3000 --timeout-ms 1000 --sync"
  "--sleep-ms 2000 --timeout-ms 600000 --raise"
  "--sleep-ms 2000 --timeout-ms 500 --raise"
  "--sleep-ms 2000 --timeout-ms 500 --no-collective --raise"
  "--sleep-ms 2000 --timeout-ms 600000 --no-collective --second-group-timeout-ms 500"
  "--sleep-ms 2000 --timeout-ms 600000 --second-group-timeout-ms 500"
  "--sleep-ms 2000 --timeout-ms 600000 --second-group-timeout-ms 500 --second-group-work"
  "--sleep-ms 2000 --timeout-ms 500 --no-collective --second-group-timeout-ms 600000"
)
if [ $# -gt 0 ]; then variants=("$*"); fi
for args in "${variants[@]}"; do
  for run in 1 2; do
    err="$(mktemp)"
    start=$(date +%s.%N)
    # shellcheck disable=SC2086
    out="$(python3 "$here/exit_with_pending_work.py" $args 2>"$err")"
    status=$?
    end=$(date +%s.%N)
    lifetime=$(python3 -c "print(f'{$end - $start:.3f}')")
    echo "== $args | run $run | exit $status | lifetime_s $lifetime | $out"
    grep -aE "Watchdog|timeout|timed out|abort|terminate|destroy_process_group|Error" "$err" | cut -c1-300 | head -8 | sed 's/^/   /'
    rm -f "$err"
  done
done
