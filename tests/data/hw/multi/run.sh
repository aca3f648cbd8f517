#!/bin/bash
# The one device call that measured the Timelines of this folder (see README.md):
#   bash tests/data/hw/multi/run.sh BIN OUT
# runs every scenario of scenarios/ with one process per GPU under torchrun, merges each run's
# per-rank Timelines with `c10dsim hw-merge`, and packs them with the logs into OUT/multi.tar.gz.
BIN=$1
OUT=$2
N=4
S=tests/data/hw/multi/scenarios
W=$(mktemp -d)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
{
  date -u
  nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv
  nvidia-smi topo -m
  nproc
  python3 -c 'import torch; print("torch", torch.__version__, "nccl", torch.cuda.nccl.version())'
  ls -la /lib/x86_64-linux-gnu/libnccl.so*
} >"$W/meta.txt" 2>&1
run() {
  local name=$1 file=$2
  shift 2
  local t0=$(date +%s%N)
  C10DSIM_RENDEZVOUS_DIR=$(mktemp -d) timeout 75 torchrun --standalone --no-python \
    --nproc-per-node="$N" "$BIN" hw "$file" --timeline "$W/$name.rank{rank}.json" "$@" \
    >"$W/$name.log" 2>&1
  local rc=$?
  "$BIN" hw-merge "$W"/$name.rank*.json -o "$W/$name.json" >>"$W/$name.log" 2>&1
  echo "$name rc=$rc merge=$? wall=$((($(date +%s%N) - t0) / 1000000))ms" | tee -a "$W/runs.txt"
  rm -f "$W"/$name.rank*.json
}
run exp_a_api_modes.4ranks $S/exp_a_api_modes.4ranks.toml
run exp_a_api_modes.4ranks.blocking $S/exp_a_api_modes.4ranks.toml --set env.TORCH_NCCL_BLOCKING_WAIT=1
run exp_b_stream_scope.4ranks $S/exp_b_stream_scope.4ranks.toml
run overlap_bench.4ranks $S/overlap_bench.4ranks.toml
run straggler.4ranks $S/straggler.4ranks.toml
run nccl_tests_all_reduce.4ranks $S/nccl_tests_all_reduce.4ranks.toml
# The same sweep with PyTorch's own NCCL (its wheel ships only libnccl.so.2: link it, docs/hw.md).
mkdir -p /tmp/nccl && ln -sf "$(python3 -c 'import nvidia.nccl; print(nvidia.nccl.__path__[0])')/lib/libnccl.so.2" /tmp/nccl/libnccl.so
LD_LIBRARY_PATH=/tmp/nccl:$LD_LIBRARY_PATH run nccl_tests_all_reduce.4ranks.torch_nccl $S/nccl_tests_all_reduce.4ranks.toml
tar czf "$OUT/multi.tar.gz" -C "$W" .
cp "$W/runs.txt" "$W/meta.txt" "$OUT/"
