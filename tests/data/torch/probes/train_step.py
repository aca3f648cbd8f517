"""Real training steps on the GPU, traced: the input of `c10dsim import kineto` and its replay error.

One process per GPU under torchrun (world size 1 on one H200). Two workloads:

``ddp``  an MLP (``--layers`` Linear layers of ``--width``², bf16) wrapped in
         DistributedDataParallel with ``--bucket-mb`` gradient buckets: forward, backward (DDP's
         reducer all_reduces each bucket as its gradients are ready), optimizer step.
``fsdp`` an FSDP-style loop written by hand: per layer, the layer's parameter shard is
         all_gathered (``all_gather_into_tensor``) on a communication stream one layer ahead of
         the GEMM that needs it, and in the backward pass each layer's gradient is
         reduce_scattered (``reduce_scatter_tensor``) on the same stream.

Each workload runs ``--warmup`` untraced steps, then ``--steps`` steps under ``torch.profiler``
(CPU and CUDA activities, one ``ProfilerStep#N`` per step) exported as
``OUT/<workload>_b<bucket>/rank<R>.json``, then ``--steps`` more untraced steps timed with CUDA
events (step time without the profiler's overhead). It prints one JSON line per workload:
the traced and untraced step times (every step, ns).

``--fr`` also writes Flight Recorder dumps (``TORCH_FR_BUFFER_SIZE`` must be set before the
process group is created): ``OUT/fr/completed_rank<R>`` (an in-process dump after the steps,
every entry completed) and, last, a hang: a 3 s GPU sleep ahead of an all_reduce with a 1 s
timeout, so the watchdog times out and dumps to ``TORCH_FR_DUMP_TEMP_FILE`` on its own
(``TORCH_NCCL_DUMP_ON_TIMEOUT=1``); the process then ends as PyTorch ends it.

Usage: torchrun --nproc-per-node 1 train_step.py OUT [--workload ddp|fsdp|both] [--bucket-mb 25]
"""

import argparse
import json
import os
import time

import torch
import torch.distributed as dist
from torch.profiler import ProfilerActivity, profile, schedule


def mlp(width, layers):
    modules = []
    for _ in range(layers):
        modules += [torch.nn.Linear(width, width, bias=False), torch.nn.ReLU()]
    return torch.nn.Sequential(*modules)


def ddp_step_fn(args, device):
    model = mlp(args.width, args.layers).to(device=device, dtype=torch.bfloat16)
    model = torch.nn.parallel.DistributedDataParallel(
        model, device_ids=[device.index], bucket_cap_mb=args.bucket_mb
    )
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    batch = torch.randn(args.batch, args.width, device=device, dtype=torch.bfloat16)

    def step():
        optimizer.zero_grad(set_to_none=True)
        loss = model(batch).float().square().mean()
        loss.backward()
        optimizer.step()

    return step


def fsdp_step_fn(args, device):
    world = dist.get_world_size()
    width = args.width
    shards = [
        torch.randn(width * width // world, device=device, dtype=torch.bfloat16) * 0.01
        for _ in range(args.layers)
    ]
    full = [torch.empty(width * width, device=device, dtype=torch.bfloat16) for _ in range(2)]
    grad_full = [
        torch.empty(width * width, device=device, dtype=torch.bfloat16) for _ in range(args.layers)
    ]
    grad_shards = [torch.empty_like(s) for s in shards]
    comm = torch.cuda.Stream(device=device)
    batch = torch.randn(args.batch, width, device=device, dtype=torch.bfloat16)

    def gather(layer):
        buffer = full[layer % 2]
        with torch.cuda.stream(comm):
            dist.all_gather_into_tensor(buffer, shards[layer])
            done = torch.cuda.Event()
            done.record(comm)
        return buffer, done

    def step():
        activations = [batch]
        pending = gather(0)
        for layer in range(args.layers):
            buffer, done = pending
            torch.cuda.current_stream().wait_event(done)
            weight = buffer.view(width, width)
            out = torch.relu(activations[-1] @ weight)
            if layer + 1 < args.layers:
                # the next layer's buffer is the one two layers back: wait for this GEMM first
                ready = torch.cuda.Event()
                ready.record()
                comm.wait_event(ready)
                pending = gather(layer + 1)
            activations.append(out)
        upstream = torch.ones_like(activations[-1])
        for layer in reversed(range(args.layers)):
            grad_full[layer].view(width, width).copy_(activations[layer].t() @ upstream)
            upstream = upstream @ activations[layer + 1].new_ones(width, width) * 1e-3
            computed = torch.cuda.Event()
            computed.record()
            comm.wait_event(computed)
            with torch.cuda.stream(comm):
                dist.reduce_scatter_tensor(grad_shards[layer], grad_full[layer])
        torch.cuda.current_stream().wait_stream(comm)
        for shard, grad in zip(shards, grad_shards):
            shard.add_(grad, alpha=-1e-3)

    return step


def timed_steps(step, count):
    times = []
    for _ in range(count):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        step()
        end.record()
        end.synchronize()
        times.append(int(start.elapsed_time(end) * 1e6))
    return times


def run_workload(name, make_step, args, device, rank):
    step = make_step(args, device)
    for _ in range(args.warmup):
        step()
    torch.cuda.synchronize()
    folder = os.path.join(args.out, "%s_b%d" % (name, args.bucket_mb))
    os.makedirs(folder, exist_ok=True)
    traced = []
    with profile(
        activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
        schedule=schedule(wait=0, warmup=1, active=args.steps, repeat=1),
        record_shapes=True,
    ) as prof:
        for _ in range(args.steps + 1):
            host_start = time.perf_counter_ns()
            step()
            torch.cuda.synchronize()
            traced.append(time.perf_counter_ns() - host_start)
            prof.step()
    prof.export_chrome_trace(os.path.join(folder, "rank%d.json" % rank))
    untraced = timed_steps(step, args.steps)
    print(
        json.dumps(
            {
                "workload": name,
                "bucket_mb": args.bucket_mb,
                "rank": rank,
                "traced_host_step_ns": traced[1:],
                "untraced_gpu_step_ns": untraced,
            }
        ),
        flush=True,
    )


def flight_recorder(args, device, rank):
    folder = os.path.join(args.out, "fr")
    os.makedirs(folder, exist_ok=True)
    dump = getattr(torch._C._distributed_c10d, "_dump_nccl_trace", None)
    if dump is not None:
        with open(os.path.join(folder, "completed_rank%d" % rank), "wb") as file:
            file.write(dump())
    tensor = torch.ones(1 << 20, device=device)
    torch.cuda._sleep(3_000 * 1_000 * 2_000)
    work = dist.all_reduce(tensor, async_op=True)
    print(json.dumps({"fr": "hang issued", "rank": rank}), flush=True)
    work.wait()
    torch.cuda.synchronize()
    print(json.dumps({"fr": "hang returned", "rank": rank}), flush=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--workload", default="both", choices=["ddp", "fsdp", "both"])
    parser.add_argument("--bucket-mb", type=int, default=25)
    parser.add_argument("--width", type=int, default=4096)
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--batch", type=int, default=8192)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--fr", action="store_true")
    args = parser.parse_args()
    rank = int(os.environ.get("LOCAL_RANK", "0"))
    device = torch.device("cuda", rank)
    torch.cuda.set_device(device)
    from datetime import timedelta

    timeout = timedelta(seconds=1) if args.fr else timedelta(minutes=10)
    dist.init_process_group("nccl", device_id=device, timeout=timeout)
    workloads = ["ddp", "fsdp"] if args.workload == "both" else [args.workload]
    for name in workloads:
        run_workload(name, ddp_step_fn if name == "ddp" else fsdp_step_fn, args, device, rank)
    if args.fr:
        flight_recorder(args, device, dist.get_rank())
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
