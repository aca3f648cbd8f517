#!/usr/bin/env bash
# never_ending_side.sh's `wait(timeout)` run with the collective on `dist.new_group([0])` instead
# of the default group (wait_timeout_abort.py --subgroup), heartbeat 15 s, each run killed after
# 90 s, on a machine with one GPU and PyTorch: the abort after the wait's timeout holds the
# subgroup's watchdog while the default group's keeps beating. Does the subgroup's own heartbeat
# monitor find its watchdog stuck and end the process, and how do its lines name the group?
# Records: subgroup_monitor.txt.
set -u
here="$(cd "$(dirname "$0")" && pwd)"
EXTRA_ARGS=--subgroup MODES=timed RUNS="${RUNS:-2}" WINDOW_S="${WINDOW_S:-90}" \
  TORCH_CPP_LOG_LEVEL=INFO exec "$here/never_ending_side.sh"
