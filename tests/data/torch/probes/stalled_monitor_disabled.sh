#!/usr/bin/env bash
# never_ending_side.sh's `wait(timeout)` run (the abort after the wait's timeout hangs on a
# one-hour GPU sleep, so the watchdog's heartbeat stalls) under TORCH_NCCL_ENABLE_MONITORING=0,
# heartbeat 15 s, on a machine with one GPU and PyTorch: does the heartbeat monitor still find
# the stalled heartbeat, dump and sleep, and does it then leave the process alive? One run with
# monitoring on goes first, as a warm-up of a freshly started machine (its record is printed
# too). Records: stalled_monitor_disabled.txt.
set -u
here="$(cd "$(dirname "$0")" && pwd)"
echo "# monitoring on (warm-up)"
MODES=timed RUNS=1 WINDOW_S="${WINDOW_S:-90}" TORCH_CPP_LOG_LEVEL=INFO "$here/never_ending_side.sh"
echo "# TORCH_NCCL_ENABLE_MONITORING=0"
TORCH_NCCL_ENABLE_MONITORING=0 MODES=timed RUNS="${RUNS:-2}" WINDOW_S="${WINDOW_S:-90}" \
  TORCH_CPP_LOG_LEVEL=INFO "$here/never_ending_side.sh"
