#!/usr/bin/env bash
# Runs monitor_after_dump_signal.py under CleanUpOnly (mode 2) twice and NoHandling (mode 0) once,
# heartbeat 15 s, on a machine with one GPU and PyTorch; prints per run the exit status, the last
# `alive` line and the PyTorch lines of its stderr with their time from the script's start
# (wait_timeout_abort.py --read-log). Records: monitor_after_dump_signal.txt. TORCH_CPP_LOG_LEVEL
# is INFO, so that the monitor's "slept for" line shows.
set -u
here="$(cd "$(dirname "$0")" && pwd)"
for mode in 2 2 0; do
  err="$(mktemp)"
  out="$(TORCH_CPP_LOG_LEVEL=INFO timeout -s KILL 90 \
    python3 "$here/monitor_after_dump_signal.py" --mode "$mode" --linger-s 60 2>"$err")"
  status=$?
  first="$(echo "$out" | head -1)"
  echo "== --mode $mode | exit $status | last: $(echo "$out" | tail -1) | $first"
  if [ -n "$first" ]; then
    python3 "$here/wait_timeout_abort.py" --read-log "$err" "$first" | grep -vE "NCCL INFO|Work update periodically"
  fi
  rm -f "$err"
done
