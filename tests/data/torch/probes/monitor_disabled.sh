#!/usr/bin/env bash
# monitor_after_dump_signal.sh under TORCH_NCCL_ENABLE_MONITORING=0 (mode 2 twice, mode 0 once),
# heartbeat 15 s, on a machine with one GPU and PyTorch: does the heartbeat monitor still read
# the dump signal, dump and sleep, and does it then leave the process alive? One run with
# monitoring on goes first, as a warm-up of a freshly started machine (its record is printed too).
# Records: monitor_disabled.txt.
here="$(cd "$(dirname "$0")" && pwd)"
RUNS="1:2 0:2 0:2 0:0" LINGER_S=40 exec "$here/monitor_after_dump_signal.sh"
