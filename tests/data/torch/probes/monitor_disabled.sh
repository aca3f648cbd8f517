#!/usr/bin/env bash
# Runs monitor_after_dump_signal.py under TORCH_NCCL_ENABLE_MONITORING=0 (mode 2 twice, mode 0
# once), heartbeat 15 s, on a machine with one GPU and PyTorch: does the heartbeat monitor still
# read the dump signal, dump and sleep, and does it then leave the process alive? One run with
# monitoring on goes first, as a warm-up of a freshly started machine (its record is printed
# too). Prints per run the exit status, the last stdout line and the PyTorch lines of its stderr
# with their time from the script's start (wait_timeout_abort.py --read-log). Records:
# monitor_disabled.txt.
set -u
here="$(cd "$(dirname "$0")" && pwd)"
for run in "1 2" "0 2" "0 2" "0 0"; do
  set -- $run
  monitoring=$1 mode=$2
  err="$(mktemp)"
  out="$(TORCH_NCCL_ENABLE_MONITORING=$monitoring TORCH_CPP_LOG_LEVEL=INFO timeout -s KILL 80 \
    python3 "$here/monitor_after_dump_signal.py" --mode "$mode" --linger-s 40 2>"$err")"
  status=$?
  first="$(echo "$out" | head -1)"
  echo "== TORCH_NCCL_ENABLE_MONITORING=$monitoring --mode $mode | exit $status | last: $(echo "$out" | tail -1) | $first"
  if [ -n "$first" ]; then
    python3 "$here/wait_timeout_abort.py" --read-log "$err" "$first" | grep -vE "NCCL INFO|Work update periodically"
  fi
  rm -f "$err"
done
