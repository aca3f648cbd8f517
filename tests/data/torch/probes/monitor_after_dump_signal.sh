#!/usr/bin/env bash
# Runs monitor_after_dump_signal.py under CleanUpOnly (mode 2) twice and NoHandling (mode 0) once,
# heartbeat 15 s, on a machine with one GPU and PyTorch; prints per run the exit status, the last
# `alive` line and the PyTorch lines of its stderr with their time from the script's start
# (wait_timeout_abort.py --read-log). Records: monitor_after_dump_signal.txt. TORCH_CPP_LOG_LEVEL
# is INFO, so that the monitor's "slept for" line shows. That is the default; RUNS (MONITORING:MODE
# pairs, default "1:2 1:2 1:0", MONITORING the value TORCH_NCCL_ENABLE_MONITORING is set to in
# each run) and LINGER_S (seconds, default 60) change the runs; monitor_disabled.sh sets them.
set -u
here="$(cd "$(dirname "$0")" && pwd)"
linger_s="${LINGER_S:-60}"
case "$linger_s" in
  ''|*[!0-9]*) echo "LINGER_S must be a number of seconds, not '$linger_s'" >&2; exit 2 ;;
esac
for run in ${RUNS:-1:2 1:2 1:0}; do
  case "$run" in
    [01]:[0-3]) ;;
    *) echo "RUNS takes MONITORING:MODE pairs (MONITORING 0 or 1, MODE 0-3), not '$run'" >&2; exit 2 ;;
  esac
  monitoring="${run%%:*}" mode="${run##*:}"
  label="--mode $mode"
  [ "$monitoring" = 1 ] || label="TORCH_NCCL_ENABLE_MONITORING=$monitoring $label"
  err="$(mktemp)"
  out="$(TORCH_NCCL_ENABLE_MONITORING=$monitoring TORCH_CPP_LOG_LEVEL=INFO \
    timeout -s KILL $((linger_s + 30)) \
    python3 "$here/monitor_after_dump_signal.py" --mode "$mode" --linger-s "$linger_s" 2>"$err")"
  status=$?
  first="$(echo "$out" | head -1)"
  echo "== $label | exit $status | last: $(echo "$out" | tail -1) | $first"
  if [ -n "$first" ]; then
    python3 "$here/wait_timeout_abort.py" --read-log "$err" "$first" | grep -vE "NCCL INFO|Work update periodically"
  fi
  rm -f "$err"
done
