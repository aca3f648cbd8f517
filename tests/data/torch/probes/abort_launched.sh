#!/usr/bin/env bash
# Runs abort_launched.toml through `c10dsim torch`: mode 2, mode 1, mode 2 again (two runs of
# mode 2, one of mode 1); OUT/mode<m>.run<k>.json (the Timeline) and .log (stderr and the report).
# Usage, from the repository root: tests/data/torch/probes/abort_launched.sh C10DSIM OUT
set -u
bin=$1
out=$2
mkdir -p "$out"
here=$(dirname "$0")
for run in "2 1" "1 1" "2 2"; do
    set -- $run
    mode=$1
    k=$2
    {
        timeout 120 "$bin" torch "$here/abort_launched.toml" \
            --set env.TORCH_NCCL_ASYNC_ERROR_HANDLING=$mode \
            --timeline "$out/mode$mode.run$k.json" >"$out/mode$mode.run$k.log" 2>&1
        echo "mode $mode run $k: exit $?"
    }
done
