#!/usr/bin/env bash
# Runs wait_timeout_abort.py in the variants docs/watchdog.md ("When a wait's own timeout
# raises") reports, two runs each, on a machine with one GPU and PyTorch; prints one line per run
# (the arguments, the run, the exit status, when the shell saw the process gone and the script's
# JSON line), then each PyTorch line of its stderr with its time from the script's start read two
# ways (--read-log). With arguments, runs only that one variant: wait_timeout_abort.variants.txt
# is `--mode M --sleep-ms 1000 --timeout-ms 500` with `--side-sleep-ms 3000`, `--second-work` or
# `--uncaught`, M timed and blocking.
set -u
here="$(cd "$(dirname "$0")" && pwd)"
variants=(
  "--mode blocking --sleep-ms 1000 --timeout-ms 500"
  "--mode blocking --sleep-ms 2000 --timeout-ms 500"
  "--mode blocking --sleep-ms 4000 --timeout-ms 500"
  "--mode blocking --sleep-ms 300 --timeout-ms 50"
  "--mode timed --sleep-ms 300 --timeout-ms 50"
  "--mode timed --sleep-ms 1000 --timeout-ms 500"
  "--mode timed --sleep-ms 2000 --timeout-ms 500"
  "--mode timed --sleep-ms 4000 --timeout-ms 500"
)
if [ $# -gt 0 ]; then variants=("$*"); fi
for args in "${variants[@]}"; do
  for run in 1 2; do
    err="$(mktemp)"
    # shellcheck disable=SC2086
    out="$(python3 "$here/wait_timeout_abort.py" $args 2>"$err")"
    status=$?
    echo "== $args | run $run | exit $status | ended_unix_ns $(date +%s%N) | $out"
    if [ -n "$out" ]; then
      python3 "$here/wait_timeout_abort.py" --read-log "$err" "$out"
    else
      tail -5 "$err" | cut -c1-300 | sed 's/^/   /'
    fi
    rm -f "$err"
  done
done
