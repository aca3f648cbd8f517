"""The Timeline's JSON (docs/timeline-format.md, ``c10dsim-timeline/1``) built from a resolved
scenario: the header, the op table and the record shapes. Pure Python; no torch.

Field names and order follow ``sim/src/timeline.rs``; the Rust side parses the result with
``serde_json::from_str::<Timeline>``.
"""

import math
import re

TIMELINE_FORMAT = "c10dsim-timeline/1"

# Each scenario element type: torch's name of it and its size in bytes.
DTYPES = {"f32": ("float32", 4), "bf16": ("bfloat16", 2), "f16": ("float16", 2)}

# The Python call the interpreter makes for each op key: the Timeline's ``host_name``.
TORCH_CALLS = {
    "all_reduce": "torch.distributed.all_reduce",
    "all_gather": "torch.distributed.all_gather_into_tensor",
    "reduce_scatter": "torch.distributed.reduce_scatter_tensor",
    "broadcast": "torch.distributed.broadcast",
    "all_to_all": "torch.distributed.all_to_all_single",
    "send": "torch.distributed.isend",
    "recv": "torch.distributed.irecv",
    "batch_isend_irecv": "torch.distributed.batch_isend_irecv",
    "barrier": "torch.distributed.barrier",
    "wait": "Work.wait",
    "is_completed": "Work.is_completed",
    "set_stream": "torch.cuda.set_stream",
    "record_event": "torch.cuda.Event.record",
    "wait_event": "torch.cuda.Stream.wait_event",
    "event_sync": "torch.cuda.Event.synchronize",
    "stream_sync": "torch.cuda.Stream.synchronize",
    "device_sync": "torch.cuda.synchronize",
    "item": "torch.Tensor.item",
    "gemm": "torch.matmul",
    "kernel": "torch.cuda._sleep",
    "gpu_sleep": "torch.cuda._sleep",
    "host_sleep": "time.sleep",
    "mark": "mark (perf_counter_ns + torch.cuda.Event.record)",
    "alloc": "torch.empty",
    "free": "del",
    "init_process_group": "torch.distributed.init_process_group",
    "new_group": "torch.distributed.new_group",
}

COLLECTIVE_KINDS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all",
                    "send", "recv")


def op_key(kind):
    """The scenario key of a resolved op kind (``OpKind::key``)."""
    if kind["kind"] == "collective":
        return kind["collective"]
    if kind["kind"] == "batch_p2p":
        return "batch_isend_irecv"
    return kind["kind"]


def display_name(op):
    """The op's label, or ``key#index``."""
    if op.get("label"):
        return op["label"]
    return "%s#%d" % (op_key(op["kind"]), op["index"])


def waits_tensor(scenario, work):
    """Whether the Work name ``work`` is a functional collective's result's (R30), as the
    simulator decided it (``functional_works``): its wait is the result's ``wait_tensor``."""
    return work is not None and scenario["functional_works"][work]


def is_functional(scenario, op):
    """Whether a collective op is a functional collective (R30): its Work is a functional
    result's (``waits_tensor``)."""
    kind = op["kind"]
    return kind["kind"] == "collective" and waits_tensor(scenario, kind["work"])


def host_name(scenario, op):
    if is_functional(scenario, op):
        return "torch.distributed._functional_collectives.all_reduce"
    if op["kind"]["kind"] == "wait" and waits_tensor(scenario, op["kind"]["work"]):
        return "torch.distributed._functional_collectives.wait_tensor"
    if op["kind"]["kind"] == "collective" and op["kind"]["batch"]["batch"] == "coalesced":
        return "torch.distributed._coalescing_manager"
    if op_key(op["kind"]) in ("send", "recv") and not op["kind"]["async_op"]:
        return "torch.distributed." + op_key(op["kind"])
    if op["kind"]["kind"] == "get_future":
        # `work.get_future().then(callback)` or `.wait()`: the Future's call, as the simulator
        # names it (`sim::timeline::host_name`).
        return "Future.then" if op["kind"]["callback"] else "Future.wait"
    return TORCH_CALLS[op_key(op["kind"])]


def kernel_name(op):
    """The kernel an op launches, as far as the interpreter knows it: NCCL picks its own
    kernel, so collectives name the collective only."""
    kind = op["kind"]
    key = op_key(kind)
    if kind["kind"] in ("collective", "batch_p2p"):
        return "nccl:" + key
    if key == "barrier":
        return "nccl:barrier"
    if key == "gemm":
        return "gemm_%s_%dx%dx%d" % (kind["dtype"], kind["m"], kind["n"], kind["k"])
    if key in ("kernel", "gpu_sleep") or (key == "get_future" and kind["callback"]):
        return "cuda_sleep"
    return None


def transfer_info(tensor, transfer):
    """A ``batch_isend_irecv`` transfer as the op table lists it (`sim::timeline::TransferInfo`):
    its direction, its peer's shift, its tensor's bytes (every tensor of a list) and dtype."""
    return {"send": transfer["send"], "shift": transfer["shift"],
            "bytes": tensor["size_bytes"] * tensor["count"], "dtype": tensor["dtype"]}


def op_table(scenario):
    table = []
    for op in scenario["ops"]:
        entry = {
            "index": op["index"],
            "name": display_name(op),
            "key": op_key(op["kind"]),
            "line": op["line"],
            "kernel_name": kernel_name(op),
            "host_name": host_name(scenario, op),
        }
        if op["kind"]["kind"] == "collective":
            # The element type NCCL is given, as the Rust side writes it (absent elsewhere).
            entry["dtype"] = scenario["tensors"][op["kind"]["tensor"]]["dtype"]
        if op["kind"]["kind"] == "collective" and op["kind"]["batch"]["batch"] == "coalesced":
            # A `_coalescing_manager` block, whose one call the trace names (absent elsewhere).
            entry["coalesced"] = True
        if op["kind"]["kind"] == "batch_p2p":
            # Each send and receive of the batch, which the trace records one by one.
            entry["transfers"] = [transfer_info(scenario["tensors"][t["tensor"]], t)
                                  for t in op["kind"]["transfers"]]
        table.append(entry)
    return table


def scenario_info(scenario):
    marks = scenario["marks"]
    measures = scenario["measures"]
    return {
        "name": scenario["name"],
        "path": scenario["path"],
        "source_hash": scenario["source_hash"],
        "seed": scenario["seed"],
        "torch": scenario["torch"],
        "repeat": scenario["repeat"],
        "warmup": scenario["warmup"],
        "ranks": scenario["cluster"]["ranks"],
        "measures": [
            {
                "name": m["name"],
                "from": marks[m["from"]],
                "to": marks[m["to"]],
                "clock": m["clock"],
            }
            for m in measures
        ],
        "overlaps": [
            [
                o["name"],
                measures[o["compute"]]["name"],
                measures[o["comm"]]["name"],
                measures[o["both"]]["name"],
            ]
            for o in scenario["overlaps"]
        ],
        "marks": list(marks),
        "groups": [g["name"] for g in scenario["groups"]],
    }


def empty_rank(rank, streams):
    return {
        "rank": rank,
        "streams": streams,
        "host": [],
        "kernels": [],
        "collectives": [],
        "marks": [],
        "stream_waits": [],
        "queries": [],
        "memory": {
            "peak_reserved_bytes": 0,
            "peak_allocated_bytes": 0,
            "cache_releases": 0,
        },
        "cache_releases": [],
        "races": [],
    }


# A rank's fields in ``sim::timeline::RankTimeline``'s order.
RANK_FIELD_ORDER = ("rank", "streams", "host", "kernels", "collectives", "marks", "stream_waits",
                    "queries", "unfinished_collectives", "unfinished_kernels",
                    "unfinished_stream_waits", "unfinished_host", "unfinished_iteration",
                    "memory", "cache_releases", "races", "exceptions")


def with_unfinished(rank, collectives, kernels, stream_waits, host, iteration):
    """``rank`` with the records of what never finished (docs/timeline-format.md), each one left
    out when empty or None as the Rust side leaves it out, in the Rust field order."""
    merged = dict(rank)
    for key, value in (("unfinished_collectives", collectives), ("unfinished_kernels", kernels),
                       ("unfinished_stream_waits", stream_waits), ("unfinished_host", host),
                       ("unfinished_iteration", iteration)):
        if value or (value is not None and key == "unfinished_iteration"):
            merged[key] = value
    ordered = {key: merged[key] for key in RANK_FIELD_ORDER if key in merged}
    ordered.update(merged)
    return ordered


def unfinished_collective(record, input_ready_ns, wait):
    """The host side of a collective call whose completion never came (``UnfinishedCollective``):
    its kernel's start and end are not known (null), ``wait`` is the host side of the ``wait()``
    on its Work (``host_end_ns`` None: it never returned) or None."""
    out = {key: record[key] for key in ("iteration", "op", "group", "seq")}
    if "work_seq_num" in record:
        out["work_seq_num"] = record["work_seq_num"]
    for key in ("bytes", "async_op", "call_stream", "run_stream", "host_start_ns",
                "host_end_ns"):
        out[key] = record[key]
    out.update(input_ready_ns=input_ready_ns, kernel_start_ns=None, kernel_end_ns=None,
               wait=wait)
    return out


def unreleased_stream_waits(collective, input_came):
    """The ``cudaStreamWaitEvent`` calls of ``collective`` (an ``unfinished_collective``) whose
    waiting stream was never released (``UnfinishedStreamWait``), each with the host time it was
    made at: its internal stream's on its input, where the input never came (R10a), and its
    ``wait()``'s on its end event, which never fired (R12). A kernel on the calling stream (a
    synchronous call, R11) and a ``wait()`` on the stream it ran on need none."""
    def made(op, source_stream, waiting_stream):
        return {"iteration": collective["iteration"], "op": op, "source_stream": source_stream,
                "source_ns": None, "waiting_stream": waiting_stream}

    calling, running = collective["call_stream"], collective["run_stream"]
    waits = []
    if not input_came and calling != running:
        waits.append((collective["host_start_ns"], made(collective["op"], calling, running)))
    wait = collective["wait"]
    if wait is not None and wait["stream"] != running:
        waits.append((wait["host_start_ns"], made(wait["op"], running, wait["stream"])))
    return waits


def unfinished_kernel(record, start_ns):
    """A kernel launched that never ended (``UnfinishedKernel``); ``start_ns`` None: it never
    started."""
    out = {key: record[key] for key in ("iteration", "op", "stream", "class", "enqueue_ns")}
    out["start_ns"] = start_ns
    return out


def timeline(scenario, machine, rank_record, findings, watchdog):
    return {
        "format": TIMELINE_FORMAT,
        "source": "torch",
        "scenario": scenario_info(scenario),
        "machine": {key: str(value) for key, value in sorted(machine.items())},
        "ops": op_table(scenario),
        "ranks": [rank_record],
        "findings": findings,
        "watchdog": watchdog,
    }


def finding(kind, rank, iteration, op, message):
    return {
        "kind": kind,
        "rank": rank,
        "iteration": iteration,
        "op": op,
        "stream": None,
        "message": message,
    }


def watchdog_record(rank, event, at_ns, message, thread="main", group=None):
    return {
        "rank": rank,
        "group": group,
        "thread": thread,
        "event": event,
        "at_ns": at_ns,
        "message": message,
    }


def numel(share, count):
    """One of a Work's element counts for a call of ``count`` elements, as the Rust side
    describes it (``sim::collective::NumelShare``): fixed, or ``kept`` of ``slices`` slices."""
    if "fixed" in share:
        return share["fixed"]
    return count // share["share"]["slices"] * share["share"]["kept"]


def work_text(scenario, record):
    """The Work of the collective ``record`` as the simulator prints it
    (``sim::pg::work_text``): ``WorkNCCL(SeqNum=…, OpType=…, NumelIn=…, NumelOut=…,
    Timeout(ms)=…)``, every fact but the SeqNum and the call's bytes from the op's
    ``op_works`` entry, which the Rust side decided."""
    work = scenario["op_works"][record["op"]]
    count = record["bytes"] // work["element_bytes"]
    return "WorkNCCL(SeqNum=%d, OpType=%s, NumelIn=%d, NumelOut=%d, Timeout(ms)=%d)" % (
        record.get("work_seq_num", record["seq"]), work["op_type"],
        numel(work["numel_in"], count), numel(work["numel_out"], count), work["timeout_ms"])


def wait_error_records(scenario, rank, record, at_ns):
    """The main thread's records where a ``wait()`` of rank ``rank`` raised the NCCL async
    error of ``record``'s Work at ``at_ns`` (R15, R27), as the simulator writes them
    (``sim::pg::work::wait_error_log``, ``wait_error_abort_returned``): PyTorch's wait aborted
    the communicator before it raised. Where in the call it found the error, and when the abort
    returned, Python cannot see: both are at the raise."""
    group = scenario["communicators"][record["group"]]
    work = work_text(scenario, record)
    return [
        watchdog_record(
            rank, "wait_error", at_ns,
            "[Rank %d] Work %s failed with its communicator's NCCL async error in wait(). "
            "Aborting the communicator, then raising DistBackendError in the main thread."
            % (rank, work), group=group),
        watchdog_record(
            rank, "abort", at_ns,
            "[Rank %d] Work %s failed with an NCCL async error in wait(); the main thread "
            "aborted the communicator of group %s and raises DistBackendError."
            % (rank, work, scenario["groups"][group]["name"]), group=group),
    ]


# PyTorch's timeout line (``WorkNCCL::checkTimeout``), which a polling wait raises: how long the
# Work ran before it timed out, in whole milliseconds.
RAN_FOR = re.compile(r"ran for (\d+) milliseconds before timing out")


def wait_timeout_records(scenario, rank, record, message, at_ns):
    """The main thread's records where a polling ``wait()`` of rank ``rank`` (blocking wait or
    ``wait(timeout)``, R15) raised the timeout of ``record``'s Work at ``at_ns``, ``message``
    the first line it raised, as the simulator writes them (``sim::pg::work::wait_timeout_log``,
    ``wait_abort_returned``): the timeout check's line and the wait's, then, once its abort of
    the communicator returned, the ``abort``. How long the Work ran is PyTorch's number in
    ``message`` where it has one, else from the call's start to the raise. When PyTorch found
    the timeout, and when the abort returned, Python cannot see: all three are at the raise."""
    group = scenario["communicators"][record["group"]]
    work = work_text(scenario, record)
    ran = RAN_FOR.search(message)
    ran_ms = int(ran.group(1)) if ran else (at_ns - record["host_start_ns"]) // 1_000_000
    lines = [
        ("wait_timeout", "[Rank %d] Watchdog caught collective operation timeout: %s ran for %d "
                         "milliseconds before timing out." % (rank, work, ran_ms)),
        ("wait_timeout", "[Rank %d] Work %s timed out in blocking wait. Aborting the "
                         "communicator, then raising DistBackendError in the main thread."
                         % (rank, work)),
        ("abort", "[Rank %d] Work %s timed out in blocking wait; the main thread aborted the "
                  "communicator of group %s and raises DistBackendError."
                  % (rank, work, scenario["groups"][group]["name"])),
    ]
    return [watchdog_record(rank, event, at_ns, text, group=group) for event, text in lines]


def draw_delay_ns(delay, rng):
    """A perturbation's delay (``sim::random::Delay``) in ns, drawn from ``rng`` (a
    ``random.Random``). The draws are the interpreter's own, not the simulator's sequence."""
    distribution = delay["distribution"]
    if distribution == "fixed":
        return delay["ns"]
    if distribution == "normal":
        value = rng.gauss(delay["mean_ns"], delay["std_ns"])
    elif distribution == "lognormal":
        mean, std = delay["mean_ns"], delay["std_ns"]
        sigma2 = math.log(1.0 + (std * std) / (mean * mean))
        value = rng.lognormvariate(math.log(mean) - sigma2 / 2.0, math.sqrt(sigma2))
    elif distribution == "exponential":
        value = rng.expovariate(1.0 / delay["mean_ns"])
    elif distribution == "gamma":
        value = rng.gammavariate(delay["shape"], delay["scale_ns"])
    elif distribution == "uniform":
        value = rng.uniform(delay["min_ns"], delay["max_ns"])
    else:
        raise ValueError("unknown delay distribution %r" % distribution)
    return max(0, int(value))


def torch_version(text):
    """(major, minor) of a version string such as ``2.11.0+cu130``; (0, 0) where it has none."""
    parts = text.split("+")[0].split(".")
    try:
        return int(parts[0]), int(parts[1])
    except (IndexError, ValueError):
        return 0, 0
