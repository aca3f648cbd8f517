#!/usr/bin/env bash
# Runs abort_backlog.toml through `c10dsim torch` under error-handling modes 2 and 1, two runs
# each, alternating; OUT/<mode>.run<k>.json (the Timeline) and .log (stderr and the report).
# Usage, from the repository root: tests/data/torch/probes/abort_backlog.sh C10DSIM OUT
set -u
bin=$1
out=$2
mkdir -p "$out"
here=$(dirname "$0")
for k in 1 2; do
    for mode in 2 1; do
        timeout 120 "$bin" torch "$here/abort_backlog.toml" \
            --set env.TORCH_NCCL_ASYNC_ERROR_HANDLING=$mode \
            --timeline "$out/mode$mode.run$k.json" >"$out/mode$mode.run$k.log" 2>&1
        echo "mode $mode run $k: exit $?"
    done
done
