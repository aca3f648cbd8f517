#!/usr/bin/env bash
# Records the real inputs of `c10dsim import` on a GPU machine (docs/import.md):
#   OUT/traces/{ddp_b25,fsdp_b25,ddp_b100}/rank<R>.json  torch.profiler traces (train_step.py)
#   OUT/steps.jsonl                                      traced and untraced step times
#   OUT/fr/completed_rank<R>, OUT/fr/timeout_rank<R>     Flight Recorder dumps (in-process, on timeout)
#   OUT/launch_queue.json                                the launch-queue bound (launch_queue.py)
#   OUT/versions.txt                                     torch, CUDA, NCCL, driver
# Usage: tests/data/torch/probes/record_traces.sh OUT [NPROC]
set -u
out=$1
nproc=${2:-1}
here=$(dirname "$0")
mkdir -p "$out/traces" "$out/fr"
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", torch.cuda.nccl.version())' >"$out/versions.txt" 2>&1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >>"$out/versions.txt" 2>&1
launch() {
    torchrun --standalone --nproc-per-node "$nproc" "$here/train_step.py" "$@"
}
launch "$out/traces" --workload both --bucket-mb 25 >>"$out/steps.jsonl" 2>"$out/train_b25.log"
echo "b25 exit $?" >>"$out/status.txt"
launch "$out/traces" --workload ddp --bucket-mb 100 >>"$out/steps.jsonl" 2>"$out/train_b100.log"
echo "b100 exit $?" >>"$out/status.txt"
TORCH_FR_BUFFER_SIZE=2000 TORCH_NCCL_DUMP_ON_TIMEOUT=1 TORCH_FR_DUMP_TEMP_FILE="$out/fr/timeout_rank" \
    timeout 120 torchrun --standalone --nproc-per-node "$nproc" "$here/train_step.py" "$out/fr_traces" \
    --workload ddp --steps 2 --warmup 1 --fr >"$out/fr/run.jsonl" 2>"$out/fr/run.log"
echo "fr exit $?" >>"$out/status.txt"
rm -rf "$out/fr_traces"
python3 "$here/launch_queue.py" >"$out/launch_queue.json" 2>"$out/launch_queue.log"
echo "launch_queue exit $?" >>"$out/status.txt"
