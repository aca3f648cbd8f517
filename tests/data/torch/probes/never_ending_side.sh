#!/usr/bin/env bash
# A wait's own timeout while a kernel on another stream never ends (a one-hour GPU sleep on a side
# stream, which the collective does not wait for): does the wait ever raise, and does anything
# end the process? wait_timeout_abort.py under `timeout -s KILL`, with the heartbeat monitor's
# timeout at 15 s, in both modes, two runs each, on a machine with one GPU and PyTorch. Prints per
# run the arguments, the exit status (137: still alive when `timeout` killed it), when the shell
# saw the process gone, the script's JSON line(s), then each PyTorch line of its stderr with its
# time from the script's start (--read-log). Records: never_ending_side.txt. WINDOW_S (50), MODES
# ("timed blocking"), RUNS (2), TORCH_CPP_LOG_LEVEL (PyTorch's default) and EXTRA_ARGS (more
# arguments of wait_timeout_abort.py, e.g. --subgroup) change the sitting.
set -u
here="$(cd "$(dirname "$0")" && pwd)"
window_s="${WINDOW_S:-50}"
for mode in ${MODES:-timed blocking}; do
  for run in $(seq "${RUNS:-2}"); do
    err="$(mktemp)"
    args="--mode $mode --sleep-ms 1000 --timeout-ms 500 --side-sleep-ms 3600000 --early-json ${EXTRA_ARGS:-}"
    # shellcheck disable=SC2086
    out="$(TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC=15 timeout -s KILL "$window_s" \
      python3 "$here/wait_timeout_abort.py" $args 2>"$err")"
    status=$?
    echo "== $args | heartbeat 15 s, killed after ${window_s} s, log level ${TORCH_CPP_LOG_LEVEL:-default} | run $run | exit $status | ended_unix_ns $(date +%s%N)"
    echo "$out" | sed 's/^/   json /'
    first="$(echo "$out" | head -1)"
    if [ -n "$first" ]; then
      python3 "$here/wait_timeout_abort.py" --read-log "$err" "$first"
    fi
    tail -3 "$err" | cut -c1-300 | sed 's/^/   stderr tail: /'
    rm -f "$err"
  done
done
