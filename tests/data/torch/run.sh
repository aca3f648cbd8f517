#!/usr/bin/env bash
# Measures every catalogue scenario through `c10dsim torch` (real torch.distributed), RUNS times
# each, every run its own launch: OUT/<scenario>.run<k>.json (the Timeline), .log (stderr and
# the report) and .status (the command's exit status). Run order: first run of every scenario,
# then the second, then the third, so that a cut-short session still covers every scenario.
# Usage: tests/data/torch/run.sh C10DSIM OUT [RUNS] [FIRST] (runs FIRST..RUNS, default 1..3);
# SCENARIOS="a b c" limits it to those scenarios of scenarios/ (default: all of them).
# OUT = tests/data/torch/memory records runs for the fidelity memory table alone (its README.md).
# Fault scenarios are made short with --set (docs/fidelity.md lists the sets); scenarios with
# more ranks than GPUs are downscaled by `c10dsim torch` itself (docs/torch.md).
set -u
bin=$1
out=$2
runs=${3:-3}
first=${4:-1}
mkdir -p "$out"

sets_for() {
    case $1 in
        exp_b_stream_scope) echo "--set repeat=10 --set warmup=2" ;;
        gpu_backlog_timeout) echo "--set op.backlog.gpu_sleep_us=3000000 --set groups.world.timeout_s=1 --set env.TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC=250" ;;
        hang_10min | watchdog_stuck | async_error | mismatch) echo "--set groups.world.timeout_s=5" ;;
        *) echo "" ;;
    esac
}

for run in $(seq "$first" "$runs"); do
    for file in scenarios/*.toml; do
        name=$(basename "$file" .toml)
        if [ -n "${SCENARIOS:-}" ] && [[ " $SCENARIOS " != *" $name "* ]]; then
            continue
        fi
        # Its own session, so that a run past 90 s is killed with its launcher and ranks.
        # shellcheck disable=SC2046
        setsid "$bin" torch "$file" $(sets_for "$name") \
            --timeline "$out/$name.run$run.json" >"$out/$name.run$run.log" 2>&1 &
        pid=$!
        (sleep 90 && kill -KILL -- "-$pid" 2>/dev/null) &
        guard=$!
        wait "$pid"
        echo $? >"$out/$name.run$run.status"
        kill "$guard" 2>/dev/null
        echo "$name run $run: exit $(cat "$out/$name.run$run.status")"
    done
done
