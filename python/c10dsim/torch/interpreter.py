"""The interpreter: one rank of a resolved scenario, run through real ``torch.distributed``.

``Interpreter(scenario, torch, ...)`` takes the torch module as an argument, so that the tests
can hand it a stand-in (``python/tests/fake_torch``). Every ``OpKind`` of the resolved scenario
is either enacted with the PyTorch call a user would write or refused up front, before torch is
imported (:func:`refuse_what_cannot_run`, :class:`Refusal`, exit 2). What is measured and how is
in docs/torch.md.

About 1,670 lines in one module: the op handlers share the interpreter's state (streams, Works,
tensors, pending timing events) through ``self``; the Timeline assembly at the end
(``finish`` and ``resolved_rank``) is the part to move into ``timeline.py`` if it grows.
"""

import datetime
import importlib
import os
import pickle
import random
import signal
import sys
import threading
import time
import traceback

from . import timeline as tl

DTYPES = tl.DTYPES

# Host sleeps sleep until this long before their deadline, then spin: a plain sleep ends
# 50-70 us late on Linux (timer slack and wake-up), as docs/hw.md measured.
SPIN_MARGIN_NS = 200_000

# The journal thread writes the Timeline so far when one op has blocked this long, so that a
# process killed inside it (a watchdog abort) still leaves its records.
JOURNAL_AFTER_NS = 500_000_000

# Flight Recorder dumps tried, 100 ms apart, until every collective has its kernel duration.
DURATION_ATTEMPTS = 20

# Op keys of point-to-point calls: PyTorch numbers them apart from a group's collectives
# (the Flight Recorder's p2p_seq_id, with is_p2p set).
P2P_KEYS = ("send", "recv", "batch_isend_irecv")


def scenario_file(path):
    """The file of a resolved scenario's ``path`` and the ``--set`` options it was resolved with
    (``c10dsim resolve`` records ``FILE [--set K=V --set …]``; "" for none)."""
    marker = path.find(" [--set ")
    if marker < 0 or not path.endswith("]"):
        return path, ""
    return path[:marker], path[marker + 2:-1]


class Refusal(Exception):
    """Something in the scenario that this interpreter cannot enact through PyTorch."""


class UnboundWorkName(NameError):
    """The program's own NameError: an op names a Work no call bound on this rank, every call
    that would have raised first (``catch = true``); ``except DistBackendError:`` does not
    catch it, so the program stops there (the simulator's ``program_error``)."""


def where(scenario, op):
    """``FILE:LINE`` of ``op`` in the scenario's file."""
    return "%s:%d" % (scenario_file(scenario["path"])[0], op["line"])


def refuse_what_cannot_run(scenario, world):
    """Raises :class:`Refusal` for what the scenario asks of ranks ``0..world-1`` that this
    interpreter cannot enact through PyTorch. It reads the scenario and the launch only, so
    that it is asked before torch is imported: a machine without PyTorch sees the refusal."""
    ops = scenario["ops"]
    for op in ops:
        kind = op["kind"]
        if not hasattr(Interpreter, "op_" + kind["kind"]):
            raise Refusal("%s: op kind %r is not known to this interpreter" % (
                where(scenario, op), kind["kind"]))
        if kind["kind"] == "collective" and kind["collective"] not in tl.COLLECTIVE_KINDS:
            raise Refusal("%s: collective %r is not known to this interpreter" % (
                where(scenario, op), kind["collective"]))
        if kind["kind"] == "collective" and kind["collective"] in ("send", "recv"):
            pair = scenario["groups"][kind["group"]]["ranks"]
            if any(rank >= world for rank in pair):
                raise Refusal(
                    "%s: a %s between ranks %s needs both processes, and this launch runs "
                    "%d rank(s): point-to-point ops need as many GPUs as their ranks" % (
                        where(scenario, op), kind["collective"], pair, world))
        if kind["kind"] == "batch_p2p":
            members = scenario["groups"][kind["group"]]["ranks"]
            if any(rank >= world for rank in members):
                raise Refusal(
                    "%s: batch_isend_irecv exchanges with ranks %s, and this launch runs "
                    "%d rank(s): point-to-point ops need as many GPUs as their ranks" % (
                        where(scenario, op), members, world))
        if (kind["kind"] == "collective" and kind["batch"]["batch"] == "coalesced"
                and kind["collective"] in ("broadcast", "all_to_all")):
            raise Refusal(
                "%s: a coalesced %s cannot be issued through "
                "torch.distributed._coalescing_manager (it takes all_reduce, "
                "all_gather_into_tensor and reduce_scatter_tensor)" % (
                    where(scenario, op), kind["collective"]))
    for fault in scenario["faults"]:
        if not any(r < world for r in fault["ranks"]):
            continue
        kind = fault["kind"]["kind"]
        if kind in ("async_error", "watchdog_stuck"):
            raise Refusal(
                "%s: fault %r on rank(s) %s cannot be enacted through PyTorch (%s)" % (
                    where(scenario, ops[fault["op"]]), kind, fault["ranks"],
                    "NCCL offers no way to inject a network failure"
                    if kind == "async_error"
                    else "the watchdog thread cannot be made to hang from Python"))
        if kind == "mismatch":
            refuse_mismatch(scenario, fault["kind"]["collective"], ops[fault["op"]])


def refuse_mismatch(scenario, issued, op):
    """A ``mismatch`` fault issues its collective in place of the op's call: refused where
    PyTorch has no such call to make."""
    replaced = tl.op_key(op["kind"])
    if issued == "batch_p2p":
        raise Refusal(
            "%s: a mismatch fault cannot issue batch_isend_irecv in place of the %s: a "
            "batch's transfers are declared only by a batch_isend_irecv op" % (
                where(scenario, op), replaced))
    if issued not in tl.COLLECTIVE_KINDS:
        raise Refusal("%s: a mismatch fault issues collective %r, which is not known to "
                      "this interpreter" % (where(scenario, op), issued))
    if (issued in P2P_KEYS) != (replaced in P2P_KEYS):
        raise Refusal(
            "%s: a mismatch fault cannot issue a %s in place of the %s through PyTorch: a "
            "point-to-point call and a group collective cannot stand for each other (a "
            "pair's communicator is no group a collective can be issued on, and a group "
            "collective names no peer)" % (where(scenario, op), issued, replaced))
    if (op["kind"]["kind"] == "collective" and op["kind"]["batch"]["batch"] == "coalesced"
            and issued in ("broadcast", "all_to_all")):
        raise Refusal(
            "%s: a mismatch fault cannot issue a %s in place of the coalescing block's "
            "call: torch.distributed._coalescing_manager takes all_reduce, "
            "all_gather_into_tensor and reduce_scatter_tensor" % (where(scenario, op), issued))


class GpuTime:
    """A timing CUDA event whose host-axis time is known only once it has completed."""

    __slots__ = ("event",)

    def __init__(self, event):
        self.event = event


class CoalescedWork:
    """The Works of one ``_coalescing_manager`` block, waited and queried together."""

    def __init__(self, manager):
        self.manager = manager

    def wait(self, timeout=None):
        for work in self.manager.works:
            if timeout is None:
                work.wait()
            else:
                work.wait(timeout)
        return True

    def is_completed(self):
        return all(work.is_completed() for work in self.manager.works)


class FutureWork:
    """The future ``then`` returned: ``wait()`` orders the current stream after the callback's
    work; it has no ``is_completed``, so ``done()`` answers."""

    def __init__(self, future):
        self.future = future

    def wait(self, timeout=None):
        self.future.wait()
        return True

    def is_completed(self):
        return self.future.done()


class FunctionalWork:
    """A functional collective's result: waited by ``wait_tensor`` at its first use, after
    which it is ``completed`` and a use waits for nothing, as ``AsyncCollectiveTensor``'s
    ``trigger_wait`` (R30)."""

    def __init__(self, funcol, result):
        self.funcol = funcol
        self.result = result
        self.completed = False

    def wait(self, timeout=None):
        self.funcol.wait_tensor(self.result)
        self.completed = True
        return True

    def is_completed(self):
        return None


def _precise_sleep(ns, clock):
    deadline = clock() + ns
    if ns > SPIN_MARGIN_NS:
        time.sleep((ns - SPIN_MARGIN_NS) / 1e9)
    while clock() < deadline:
        pass


class Interpreter:
    def __init__(self, scenario, torch, rank, world, local_rank, out_path,
                 clock=time.perf_counter_ns, wall_clock=time.time_ns,
                 monotonic_clock=time.monotonic_ns):
        self.scenario = scenario
        self.torch = torch
        self.dist = torch.distributed
        self.rank = rank
        self.world = world
        self.local_rank = local_rank
        self.out_path = out_path
        self.clock = clock
        self.origin_ns = clock()
        self.origin_unix_ns = wall_clock()
        # PyTorch's C++ log lines print the wall clock's seconds with CLOCK_MONOTONIC's
        # nanoseconds (docs/torch.md): the pair lets the log reader put them on this axis.
        self.origin_monotonic_ns = monotonic_clock()
        self.machine = {}
        self.findings = []
        self.watchdog = []
        self.timing_events = []
        self.current = 0
        self.works = {}
        self.event_sources = {}
        self.seq = {}
        # How PyTorch's Flight Recorder files each collective record: (process group, is_p2p,
        # that group's count of such calls) -> (group, SeqNum) of the record.
        self.flight_seq = {}
        self.flight_records = {}
        self.exit_status = 0
        self.busy_since_ns = None
        # The op the program is inside (``unfinished_host`` of a partial write: iteration, op,
        # start_ns, blocked_on), and the iteration the program is in until it returns
        # (``unfinished_iteration``).
        self.open_call = None
        self.program_iteration = None
        # Per (group, SeqNum): when PyTorch created the Work (the Flight Recorder's
        # time_created_ns, wall clock), on this run's host axis.
        self.work_created = {}
        # What PyTorch raises when a program's call fails: a collective's timeout, an aborted
        # communicator, an NCCL error (c10d's DistError); an allocation the quota refuses.
        # Anything else is the interpreter's own failure and is not caught.
        # A Work's name no call bound (UnboundWorkName) is the program's own NameError.
        self.program_errors = (torch.distributed.DistError, torch.cuda.OutOfMemoryError,
                               UnboundWorkName)
        self.lock = threading.Lock()
        self.rng = random.Random(scenario["seed"] * 1_000_003 + rank)
        self.members = [
            [r for r in group["ranks"] if r < world] for group in scenario["groups"]
        ]
        self.streams_info = [
            {"name": s["name"], "kind": "default" if i == 0 else "user",
             "high_priority": s["priority"] == "high"}
            for i, s in enumerate(scenario["streams"])
        ]
        self.nccl_stream = {}
        for index, group in enumerate(scenario["groups"]):
            communicator = scenario["communicators"][index]
            if rank in self.members[index] and communicator != index:
                # R11: an eager world's send/recv runs on the world's stream, no pair's.
                self.nccl_stream[index] = self.nccl_stream[communicator]
            elif rank in self.members[index]:
                self.nccl_stream[index] = len(self.streams_info)
                self.streams_info.append({
                    "name": "nccl:" + group["name"], "kind": "nccl",
                    "high_priority": scenario["stream_high_priority"][index],
                })
        self.record = tl.empty_rank(rank, self.streams_info)
        # PyTorch 2.8 and later launch a synchronous collective on the current stream
        # (pytorch/pytorch#150398, R11); earlier ones on the group's internal stream.
        self.sync_on_current_stream = tl.torch_version(torch.__version__) >= (2, 8)

    # ---- time -----------------------------------------------------------------------------

    def rel(self, host_ns):
        return host_ns - self.origin_ns

    def now(self):
        return self.rel(self.clock())

    def gpu_time(self, stream_index):
        """Records a timing event on a scenario stream; its time is resolved at the end."""
        return self.gpu_time_on(self.streams[stream_index])

    def gpu_time_on(self, stream):
        """Records a timing event on a torch stream; its time is resolved at the end."""
        event = self.torch.cuda.Event(enable_timing=True)
        event.record(stream)
        self.timing_events.append(event)
        return GpuTime(event)

    def anchor(self):
        """The tightest of eight (host before record, host after synchronize) brackets of a
        timing event on an idle stream: its midpoint and half-width (docs/hw.md)."""
        best = None
        for _ in range(8):
            event = self.torch.cuda.Event(enable_timing=True)
            before = self.clock()
            event.record(self.anchor_stream)
            event.synchronize()
            after = self.clock()
            if best is None or after - before < best[2] - best[1]:
                best = (event, before, after)
        event, before, after = best
        return event, self.rel((before + after) // 2), (after - before) // 2

    def resolve(self, value, final):
        """Host-axis ns of a GpuTime (None while its event has not completed)."""
        if not isinstance(value, GpuTime):
            return value
        if not final and not value.event.query():
            return None
        elapsed_ns = self.start_anchor[0].elapsed_time(value.event) * 1e6
        return int(self.start_anchor[1] + elapsed_ns * self.drift_scale)

    # ---- setup ----------------------------------------------------------------------------

    def setup(self):
        torch, dist, scenario = self.torch, self.dist, self.scenario
        torch.cuda.set_device(self.local_rank)
        self.device = torch.device("cuda", self.local_rank)
        self.streams = [torch.cuda.current_stream()]
        for stream in scenario["streams"][1:]:
            self.streams.append(
                torch.cuda.Stream(priority=-1 if stream["priority"] == "high" else 0))
        self.anchor_stream = torch.cuda.Stream()
        self.groups = [None] * len(scenario["groups"])
        if scenario["groups"][0].get("created_by") is None:
            # The default group exists before the program (no init_process_group op).
            init_start = self.clock()
            self.init_process_group(scenario["groups"][0]["eager_init"])
            self.machine["init_process_group_ns"] = self.clock() - init_start
            for index, group in enumerate(scenario["groups"][1:], start=1):
                if group.get("created_by") is None:
                    self.new_group(index)
        self.funcol = importlib.import_module("torch.distributed._functional_collectives")
        self.tensors = {}
        for index, tensor in enumerate(scenario["tensors"]):
            if not tensor["dynamic"]:
                self.tensors[index] = self.allocate(tensor, fill=True)
        # A rank that never runs a bucketed op never builds its DDP Reducer: no buffers.
        self.buckets = {}
        for op in scenario["ops"]:
            kind = op["kind"]
            if (kind["kind"] == "collective" and kind["batch"]["batch"] == "bucketed"
                    and self.runs(op)):
                self.buckets[op["index"]] = self.bucket_buffers(kind)
        self.make_own_buffers()
        self.limit_memory()
        self.calibrate_sleep()
        torch.cuda.synchronize()
        self.start_anchor = self.anchor()
        self.drift_scale = 1.0

    def runs(self, op):
        """Whether this rank runs `op` (its ``ranks``, a subgroup's members)."""
        return op["ranks"] is None or self.rank in op["ranks"]

    def make_own_buffers(self):
        """What the interpreter and PyTorch take from the caching allocator before the program
        and the simulator does not book — the GEMM operands, the all_to_all receive buffers made
        at setup, the mismatch faults' scratch buffers and the cuBLAS workspaces — made one
        after the other, after the scenario's tensors and bucket buffers, and measured as the
        allocator counts them: ``machine.interpreter_allocated_bytes`` and
        ``interpreter_reserved_bytes``. They live to the end, so a peak less them is the
        scenario's own (``c10dsim fidelity``'s memory table)."""
        cuda = self.torch.cuda
        allocated_before = cuda.memory_allocated(self.device)
        reserved_before = cuda.memory_reserved(self.device)
        self.gemm_operands = {}
        self.all_to_all_outputs = {}
        for op in self.scenario["ops"]:
            kind = op["kind"]
            if kind["kind"] == "gemm":
                self.gemm_operand(kind)
            if kind["kind"] == "collective" and kind["collective"] == "all_to_all":
                self.all_to_all_output(self.tensors.get(kind["tensor"], []))
        self.mismatch_buffers = {}
        for fault in self.scenario["faults"]:
            if self.rank in fault["ranks"] and fault["kind"]["kind"] == "mismatch":
                self.mismatch_buffer(fault["kind"], self.scenario["ops"][fault["op"]])
        self.blas_workspaces()
        self.machine["interpreter_allocated_bytes"] = str(
            cuda.memory_allocated(self.device) - allocated_before)
        self.machine["interpreter_reserved_bytes"] = str(
            cuda.memory_reserved(self.device) - reserved_before)

    def limit_memory(self):
        """The scenario's allocator capacity (R17), plus what the interpreter and PyTorch add from
        the same allocator and the simulator does not count (``make_own_buffers``), as the
        allocator's fraction of the device. The bucket buffers are not added: the simulator
        books them before the program, as DDP's Reducer makes them."""
        extra_bytes = sum(t.numel() * t.element_size()
                          for operands in self.gemm_operands.values() for t in operands)
        extra_bytes += sum(b.numel() * b.element_size()
                           for buffers in self.mismatch_buffers.values() for b in buffers)
        extra_bytes += sum(b.numel() * b.element_size()
                           for b in self.all_to_all_outputs.values())
        extra_bytes += int(self.machine["blas_workspace_bytes"])
        total_bytes = self.torch.cuda.get_device_properties(self.local_rank).total_memory
        capacity = self.scenario["memory"]["capacity_bytes"] + extra_bytes
        fraction = min(1.0, capacity / total_bytes)
        self.torch.cuda.set_per_process_memory_fraction(fraction, self.local_rank)
        self.machine["memory_fraction"] = "%.4f" % fraction

    def blas_workspaces(self):
        """The cuBLAS workspaces of the streams that run GEMMs. PyTorch takes one per
        stream from its caching allocator at the stream's first cuBLAS call (32 MiB each on an
        H200) and keeps it: made here, before the program, by asking for each such stream's cuBLAS
        handle, and measured as the allocator counts it (`machine.blas_workspace_bytes`)."""
        streams = sorted({op["stream"] for op in self.scenario["ops"]
                          if op["kind"]["kind"] == "gemm"})
        before = self.torch.cuda.memory_allocated(self.device)
        for stream in streams:
            with self.torch.cuda.stream(self.streams[stream]):
                self.torch.cuda.current_blas_handle()
        workspace_bytes = self.torch.cuda.memory_allocated(self.device) - before
        self.machine["blas_workspace_bytes"] = str(workspace_bytes)

    def init_process_group(self, device_id):
        world_group = self.scenario["groups"][0]
        self.dist.init_process_group(
            backend="nccl", rank=self.rank, world_size=self.world,
            timeout=datetime.timedelta(microseconds=world_group["timeout_ns"] // 1000),
            device_id=self.device if device_id else None,
            pg_options=self.pg_options(world_group))
        self.groups[0] = self.dist.group.WORLD

    def new_group(self, index):
        group = self.scenario["groups"][index]
        if self.scenario["process_groups"][index] != index:
            # A pair's calls go through the world's process group (``process_groups``): PyTorch
            # makes its communicator itself, lazily, at the first send/recv on the world
            # group; no group of ours.
            return
        # Described by its scenario name, PyTorch's log lines of the group open with it
        # (`[PG ID 1 PG GUID 1(sub) Rank 0]`): `c10dsim torch` tells the group's Works by it.
        self.groups[index] = self.dist.new_group(
            ranks=self.members[index],
            timeout=datetime.timedelta(microseconds=group["timeout_ns"] // 1000),
            pg_options=self.pg_options(group),
            group_desc=group["name"])

    def pg_options(self, group):
        if not group["high_priority"]:
            return None
        options = self.dist.ProcessGroupNCCL.Options()
        options.is_high_priority_stream = True
        return options

    def dtype(self, name):
        return getattr(self.torch, DTYPES[name][0])

    def allocate(self, tensor, fill=False):
        numel = max(1, tensor["size_bytes"] // DTYPES[tensor["dtype"]][1])
        make = self.torch.ones if fill else self.torch.empty
        return [make(numel, dtype=self.dtype(tensor["dtype"]), device=self.device)
                for _ in range(tensor["count"])]

    def gemm_operand(self, kind):
        key = (kind["m"], kind["n"], kind["k"], kind["dtype"])
        if key not in self.gemm_operands:
            dtype = self.dtype(kind["dtype"])
            a = self.torch.randn(kind["m"], kind["k"], dtype=dtype, device=self.device)
            b = self.torch.randn(kind["k"], kind["n"], dtype=dtype, device=self.device)
            c = self.torch.empty(kind["m"], kind["n"], dtype=dtype, device=self.device)
            self.gemm_operands[key] = (a, b, c)
        return self.gemm_operands[key]

    def bucket_buffers(self, kind):
        tensor = self.scenario["tensors"][kind["tensor"]]
        size, count = tensor["size_bytes"], tensor["count"]
        per_bucket = max(1, kind["batch"]["cap_bytes"] // size)
        sizes = [per_bucket * size] * (count // per_bucket)
        if count % per_bucket:
            sizes.append((count % per_bucket) * size)
        element = DTYPES[tensor["dtype"]][1]
        return [self.torch.ones(max(1, s // element), dtype=self.dtype(tensor["dtype"]),
                                device=self.device) for s in sizes]

    def all_to_all_output(self, buffers):
        """``all_to_all_single`` cannot run in place: a receive buffer per sent tensor, made at
        setup (a dynamic tensor gets its own at first use, outside the timed call)."""
        for buffer in buffers:
            output = self.all_to_all_outputs.get(id(buffer))
            if output is None or output.numel() != buffer.numel():
                self.all_to_all_outputs[id(buffer)] = self.torch.empty(
                    buffer.numel(), dtype=buffer.dtype, device=self.device)

    def mismatch_buffer(self, mismatch, op):
        """The scratch buffers a ``mismatch`` fault at ``op`` issues its collective on, of its
        size and element type (the op's, unless the fault names another), with receive buffers
        for an all_to_all: made at setup, so that the faulty call is timed as the op's would be.
        One buffer, or for a coalescing block one per tensor of the block, the fault's size
        split equally — one buffer of the whole size where it does not split into whole
        elements (the simulator's Flight Recorder lists the block's shapes alike)."""
        dtype = mismatch["dtype"]
        numel = max(1, mismatch["size_bytes"] // DTYPES[dtype][1])
        pieces = 1
        if op["kind"]["kind"] == "collective" and op["kind"]["batch"]["batch"] == "coalesced":
            pieces = self.scenario["tensors"][op["kind"]["tensor"]]["count"]
            pieces = pieces if numel % pieces == 0 else 1
        key = (dtype, mismatch["size_bytes"], pieces)
        if key not in self.mismatch_buffers:
            self.mismatch_buffers[key] = [
                self.torch.ones(numel // pieces, dtype=self.dtype(dtype), device=self.device)
                for _ in range(pieces)]
        if mismatch["collective"] == "all_to_all":
            self.all_to_all_output(self.mismatch_buffers[key])
        return self.mismatch_buffers[key]

    def calibrate_sleep(self):
        """``torch.cuda._sleep`` counts cycles: one timed million-cycle sleep (after a warm-up)
        gives the cycles per ns used for every later sleep."""
        cycles = 1_000_000
        for _ in range(2):
            start = self.torch.cuda.Event(enable_timing=True)
            end = self.torch.cuda.Event(enable_timing=True)
            start.record(self.streams[0])
            self.torch.cuda._sleep(cycles)
            end.record(self.streams[0])
            end.synchronize()
            elapsed_ns = start.elapsed_time(end) * 1e6
        self.cycles_per_ns = cycles / max(elapsed_ns, 1.0)
        self.machine["sleep_cycles_per_us"] = "%.1f" % (self.cycles_per_ns * 1000)

    def sleep_gpu(self, duration_ns):
        self.torch.cuda._sleep(max(1, int(duration_ns * self.cycles_per_ns)))

    # ---- the program ----------------------------------------------------------------------

    def run(self):
        """Runs every iteration; returns the process's exit status (0, or 1 after a caught
        exception)."""
        scenario = self.scenario
        journal = threading.Thread(target=self.journal_loop, daemon=True)
        journal.start()
        # `repeat` counts every iteration, the warmup ones among them (docs/scenario-format.md).
        iterations = scenario["repeat"]
        try:
            for iteration in range(iterations):
                self.program_iteration = iteration
                self.set_current(0)
                for op in scenario["ops"]:
                    if not self.runs(op):
                        continue
                    if not self.step(op, iteration):
                        return self.exit_status
            self.program_iteration = None
        finally:
            self.busy_since_ns = None
            self.open_call = None
        return self.exit_status

    def set_current(self, stream):
        if stream != self.current or stream == 0:
            self.torch.cuda.set_stream(self.streams[stream])
            self.current = stream

    def step(self, op, iteration):
        """One op of one iteration; False once the program has stopped."""
        if op["stream"] != self.current and op["kind"]["kind"] != "set_stream":
            self.set_current(op["stream"])
        for perturbation in self.scenario["perturbations"]:
            if (self.rank in perturbation["ranks"] and perturbation["before_op"] == op["index"]
                    and (perturbation["iterations"] is None
                         or iteration in perturbation["iterations"])):
                self.perturb(perturbation, op, iteration)
        enact, kind = getattr(self, "op_" + op["kind"]["kind"]), op["kind"]
        fault = self.fault_at(op, iteration)
        if fault is not None:
            self.log_fault(fault, op, iteration)
            effect = fault["kind"]["kind"]
            if effect == "skip":
                # The rank issues nothing for the op and goes on (HostEffect::Skip).
                return True
            if effect != "mismatch":
                self.stop_at_fault(effect, op)
                return False
            enact, kind = self.issue_mismatch, fault["kind"]
        self.busy_since_ns = self.clock()
        self.open_call = {"iteration": iteration, "op": op["index"],
                          "start_ns": self.rel(self.busy_since_ns),
                          "blocked_on": self.blocked_on(op)}
        try:
            enact(op, kind, iteration)
        except self.program_errors as error:
            # A call that raised, caught or not, ends at its raise (docs/timeline-format.md).
            raised_ns = self.clock()
            self.host(op, iteration, self.busy_since_ns, raised_ns)
            if op.get("catch", False) and isinstance(error, self.dist.DistBackendError):
                # try: … except DistBackendError: around the call (catch = true): recorded, the
                # program goes on. An out-of-memory error, another c10d error or the program's
                # NameError passes it and stops the program.
                self.handled(op, iteration, error, self.rel(raised_ns))
                return True
            self.caught(op, iteration, error, self.rel(raised_ns))
            return False
        finally:
            self.busy_since_ns = None
            self.open_call = None
        return True

    def blocked_on(self, op):
        """What ``op`` blocks on, as the simulator's ``unfinished_host.blocked_on`` says it, where
        the interpreter knows it before the call (a ``wait()`` names its Work as it reaches each
        one, ``op_wait``); None for every other call: a collective's or a barrier's own call
        could block in its communicator's creation, its implicit wait or a barrier's stream
        synchronisation, which the interpreter cannot tell apart, and has no record yet of the
        Work it would name."""
        kind = op["kind"]
        if kind["kind"] == "item":
            return {"kind": "stream", "stream": op["stream"]}
        if kind["kind"] == "stream_sync":
            return {"kind": "stream", "stream": kind["stream"]}
        if kind["kind"] == "event_sync":
            source = self.event_sources.get(kind["event"])
            return {"kind": "stream", "stream": source[0]} if source is not None else None
        if kind["kind"] == "device_sync":
            return {"kind": "device"}
        if kind["kind"] in ("init_process_group", "new_group"):
            # The group's communicator, where the call creates it on this rank, as the
            # simulator decided (``setup_communicator_ranks``, R8); else the call runs its own
            # host time.
            group = kind.get("group", 0)
            if self.rank in self.scenario["setup_communicator_ranks"][group]:
                return {"kind": "communicator", "group": group}
        return None

    def host(self, op, iteration, start_ns, end_ns):
        self.record["host"].append({"iteration": iteration, "op": op["index"],
                                    "start_ns": self.rel(start_ns), "end_ns": self.rel(end_ns)})

    def kernel(self, op, iteration, stream, kind_class, enqueue_ns, start, end):
        self.record["kernels"].append({
            "iteration": iteration, "op": op["index"], "stream": stream, "class": kind_class,
            "enqueue_ns": self.rel(enqueue_ns), "start_ns": start, "end_ns": end})

    def perturb(self, perturbation, op, iteration):
        host_ns = tl.draw_delay_ns(perturbation["host_delay"], self.rng)
        gpu_ns = tl.draw_delay_ns(perturbation["gpu_delay"], self.rng)
        if host_ns:
            _precise_sleep(host_ns, self.clock)
        if gpu_ns:
            start = self.gpu_time(self.current)
            enqueue = self.clock()
            self.sleep_gpu(gpu_ns)
            end = self.gpu_time(self.current)
            self.kernel(op, iteration, self.current, "sleep", enqueue, start, end)

    # ---- faults ---------------------------------------------------------------------------

    def fault_at(self, op, iteration):
        for fault in self.scenario["faults"]:
            if (self.rank in fault["ranks"] and fault["op"] == op["index"]
                    and fault["iteration"] == iteration):
                return fault
        return None

    def log_fault(self, fault, op, iteration):
        self.watchdog.append(tl.watchdog_record(
            self.rank, "fault", self.now(),
            "[Rank %d] fault: %s before %s (line %d, iteration %d)" % (
                self.rank, fault["kind"]["kind"], tl.display_name(op), op["line"], iteration)))

    def stop_at_fault(self, effect, op):
        """A ``die`` or ``hang`` fault before ``op``: the program stops here."""
        if effect == "die":
            self.exit_status = -signal.SIGKILL
            self.watchdog.append(tl.watchdog_record(
                self.rank, "exit", self.now(),
                "[Rank %d] the process is killed (SIGKILL) before %s" % (
                    self.rank, tl.display_name(op))))
            self.write(final=False)
            os.kill(os.getpid(), signal.SIGKILL)
        # hang: the host never reaches the op; the process stays until the group's timeout
        # has long passed or the launcher kills it.
        self.write(final=False)
        time.sleep(self.scenario["groups"][0]["timeout_ns"] / 1e9 + 60.0)
        self.exit_status = 1

    def issue_mismatch(self, op, mismatch, iteration):
        """A ``mismatch`` fault (R16): in place of the op's first NCCL call, a call of the
        fault's collective, size and element type on the op's group (the peer, for a send or
        receive), on its scratch buffer. It is the op's call as PyTorch sees it: it takes the
        group's next SeqNum, is synchronous or not as the op, and its Work is the op's. A
        collective over a tensor list (``op_collective``) replaces only its first call — one
        tensor's, the first bucket's, or a coalescing block's, whose tensors become the
        fault's — and issues the others as usual; a barrier or a functional all_reduce is one
        plain call. A functional all_reduce's result is still a new tensor of its own size,
        bound to its name as the call's would be (R30), so that the ops after it find it."""
        kind = op["kind"]
        functional = tl.is_functional(self.scenario, op)
        if kind["kind"] == "collective" and not functional:
            self.op_collective(op, kind, iteration, mismatch)
            return
        group_index = kind["group"]
        async_op = kind.get("async_op", False)
        (buffer,) = self.mismatch_buffer(mismatch, op)
        ready = self.gpu_time(self.current)
        start = self.clock()
        if functional:
            # The call's result, made inside it as its clone of the input is.
            result = self.allocate(self.scenario["tensors"][kind["result"]])
        record, work, end = self.recorded_call(
            op, iteration, group_index, buffer.numel() * buffer.element_size(), async_op, ready,
            start,
            lambda: self.issue(mismatch["collective"], buffer, self.groups[group_index],
                               group_index, async_op),
            self.has_implicit_wait(op, async_op))
        if functional:
            # The one the name held goes now, after the call, as in op_collective.
            self.tensors[kind["result"]] = result
        self.host(op, iteration, start, end)
        if not async_op:
            self.implicit_wait(op, record)
        elif kind["work"] is not None:
            self.works[kind["work"]] = [(work, record)]

    def handled(self, op, iteration, error, at):
        """An exception the program catches (``catch = true``), raised at ``at``: it goes into
        the Timeline's ``exceptions``."""
        message = str(error).strip().splitlines()[0] if str(error).strip() else repr(error)
        self.record.setdefault("exceptions", []).append({
            "iteration": iteration, "op": op["index"], "at_ns": at,
            "exception": type(error).__name__, "message": message,
        })
        lowered = message.lower()
        if self.raised_in_a_wait(op, iteration) and ("timed out" in lowered
                                                     or "timeout" in lowered):
            # Caught or not, the wait timed out: the finding the simulator writes (R15), and
            # a polling wait's main-thread records.
            self.findings.append(tl.finding(
                "wait_timeout", self.rank, iteration, op["index"],
                "[Rank %d] %s raised %s at %s (line %d), caught: %s" % (
                    self.rank, tl.display_name(op), type(error).__name__, iteration,
                    op["line"], message)))
            if self.polls(op):
                self.wait_timed_out(op, message, at)
        elif self.is_store_timeout(error, message):
            # Caught or not, the store timed out: the finding the simulator writes (R29).
            self.findings.append(tl.finding(
                "store_timeout", self.rank, iteration, op["index"],
                "[Rank %d] %s raised %s at %s (line %d), caught: %s" % (
                    self.rank, tl.display_name(op), type(error).__name__, iteration,
                    op["line"], message)))
        elif self.raised_in_a_wait(op, iteration):
            self.wait_found_error(op, at)

    def caught(self, op, iteration, error, at):
        """An exception nobody catches, raised at ``at``: a finding, and the program stops."""
        message = str(error).strip().splitlines()[0] if str(error).strip() else repr(error)
        kind = op["kind"]
        timed_out = "timeout" in message.lower() or "timed out" in message.lower()
        if isinstance(error, UnboundWorkName):
            # The simulator's words (sim::pg::work::name_error), logged as the process's end.
            text = ("[Rank %d] NameError: %s; %s (line %d) raises it in the main thread (every "
                    "call that would have bound the Work raised first) and, uncaught, ends the "
                    "process" % (self.rank, message, tl.display_name(op), op["line"]))
            self.findings.append(tl.finding("program_error", self.rank, iteration, op["index"],
                                            text))
            self.watchdog.append(tl.watchdog_record(self.rank, "exit", at, text))
            self.exit_status = 1
            return
        if isinstance(error, self.torch.cuda.OutOfMemoryError):
            # The process ends at the raise (R20): no watchdog event but its exit.
            finding, event = "out_of_memory", None
        elif self.raised_in_a_wait(op, iteration) and timed_out and self.polls(op):
            # A polling wait's own timeout (R15); the Work's async error it raised instead is
            # the error it found (R27), below.
            finding, event = "wait_timeout", None
            self.wait_timed_out(op, message, at)
        elif self.is_store_timeout(error, message):
            # The store rendezvous timed out (R29): the main thread's own, as the simulator's.
            finding, event = "store_timeout", "store_timeout"
        elif timed_out:
            finding, event = "watchdog_timeout", "timeout"
        elif self.raised_in_a_wait(op, iteration):
            finding, event = "async_error", None
            self.wait_found_error(op, at)
        else:
            finding, event = "async_error", "async_error"
        text = "[Rank %d] %s raised %s at %s (line %d): %s" % (
            self.rank, tl.display_name(op), type(error).__name__, iteration, op["line"],
            message)
        self.findings.append(tl.finding(finding, self.rank, iteration, op["index"], text))
        if event is not None:
            self.watchdog.append(tl.watchdog_record(self.rank, event, at, text))
        self.exit_status = 1

    def raised_in_a_wait(self, op, iteration):
        """Whether ``op``'s raise came from a ``wait()``: its own, or the implicit one of a
        synchronous call (``wait_raised``), whose timeout is the same ``wait_timeout`` (R15)."""
        return op["kind"]["kind"] == "wait" or any(
            record["op"] == op["index"] and record["iteration"] == iteration
            and (record["wait"] or {}).get("raised") for record in self.record["collectives"])

    def polls(self, op):
        """Whether a ``wait()`` at ``op`` polls its Work (R15): a wait with its own timeout, or
        any wait under blocking wait (a synchronous call's implicit one too)."""
        return (op["kind"].get("timeout_ns") is not None
                or self.scenario["env"]["blocking_wait"])

    def raised_work(self, op):
        """The record of the Work whose ``wait()`` at ``op`` raised last (``wait_raised``): of
        the Works an explicit wait reached, the last."""
        return [record for record in self.record["collectives"]
                if (record["wait"] or {}).get("raised")
                and record["wait"]["op"] == op["index"]][-1]

    def wait_found_error(self, op, at):
        """A ``wait()`` at ``op`` raised its Work's NCCL async error at ``at``, caught or not
        (R27): it aborted the communicator, then raised, which the simulator logs as the main
        thread's ``wait_error`` and ``abort``."""
        self.watchdog.extend(tl.wait_error_records(
            self.scenario, self.rank, self.raised_work(op), at))

    def wait_timed_out(self, op, message, at):
        """A polling ``wait()`` at ``op`` raised its Work's timeout, ``message``, at ``at``,
        caught or not (R15): it logged the timeout, aborted the communicator, then raised, which
        the simulator logs as the main thread's two ``wait_timeout`` records and ``abort``."""
        self.watchdog.extend(tl.wait_timeout_records(
            self.scenario, self.rank, self.raised_work(op), message, at))

    def is_store_timeout(self, error, message):
        """Whether ``error`` is the store's timeout: TCPStore's ``DistStoreError`` ("wait timeout
        after 600000ms, keys: …"), raised as such or, from ``store.get`` of the NCCL unique id
        when a communicator is created, wrapped by ProcessGroupNCCL into a ``DistBackendError``
        ("… retrieving ncclUniqueId from [0] via c10d key-value store … got error: wait timeout
        after …"); or the non-blocking init's wait for its communicator
        (``TORCH_NCCL_NONBLOCKING_TIMEOUT``: NCCLUtils' ``DistBackendError`` "NCCL timeout in:
        <file>:<line>")."""
        lowered = message.lower()
        if "nccl timeout in:" in lowered:
            return True
        if "timeout" not in lowered and "timed out" not in lowered:
            return False
        return (isinstance(error, self.dist.DistStoreError)
                or "via c10d key-value store" in lowered)

    # ---- collectives ----------------------------------------------------------------------

    def issue(self, collective, buffer, group, group_index, async_op):
        dist = self.dist
        n = len(self.members[group_index])
        if collective == "all_reduce":
            return dist.all_reduce(buffer, group=group, async_op=async_op)
        if collective == "broadcast":
            return dist.broadcast(buffer, src=self.members[group_index][0], group=group,
                                  async_op=async_op)
        chunk = buffer.numel() // n
        position = self.members[group_index].index(self.rank)
        whole = buffer.narrow(0, 0, chunk * n)
        mine = buffer.narrow(0, position * chunk, chunk)
        if collective == "all_gather":
            return dist.all_gather_into_tensor(whole, mine, group=group, async_op=async_op)
        if collective == "reduce_scatter":
            return dist.reduce_scatter_tensor(mine, whole, group=group, async_op=async_op)
        if collective in ("send", "recv"):
            (peer,) = [r for r in self.members[group_index] if r != self.rank]
            if collective == "send":
                call = dist.isend if async_op else dist.send
                return call(buffer, dst=peer)
            call = dist.irecv if async_op else dist.recv
            return call(buffer, src=peer)
        if collective == "all_to_all":
            received = self.all_to_all_outputs[id(buffer)].narrow(0, 0, chunk * n)
            return dist.all_to_all_single(received, whole, group=group, async_op=async_op)
        raise Refusal("collective %r is not known to this interpreter" % collective)

    def flight_key(self, op, group_index):
        """Where PyTorch's Flight Recorder files this call: the process group it ran on (the
        world, for a pair's send or receive), whether it is point-to-point, and that group's
        count of such calls — ``collective_seq_id``, or ``p2p_seq_id`` for a point-to-point
        call, which PyTorch numbers apart and marks ``is_p2p``."""
        counter = self.flight_counter(op, group_index)
        self.flight_seq[counter] = self.flight_seq.get(counter, 0) + 1
        return counter + (self.flight_seq[counter],)

    def flight_counter(self, op, group_index):
        """The process group the call goes through, as the simulator decided it
        (``process_groups``: the world, for a pair's send or receive), and whether it is
        point-to-point."""
        p2p = tl.op_key(op["kind"]) in P2P_KEYS
        return self.scenario["process_groups"][group_index], p2p

    def collective_record(self, op, iteration, group_index, nbytes, async_op, start_ns,
                          end_ns, ready):
        self.seq[group_index] = self.seq.get(group_index, 0) + 1
        flight_key = self.flight_key(op, group_index)
        self.flight_records[flight_key] = (group_index, self.seq[group_index])
        record = {
            "iteration": iteration, "op": op["index"], "group": group_index,
            "seq": self.seq[group_index], "bytes": nbytes, "async_op": async_op,
            "call_stream": self.current,
            "run_stream": (self.current if self.runs_on_calling_stream(op, async_op)
                           else self.nccl_stream[group_index]),
            "host_start_ns": self.rel(start_ns), "host_end_ns": self.rel(end_ns),
            "input_ready_ns": ready, "kernel_start_ns": None, "data_start_ns": None,
            "end_ns": None, "last_rank": None, "wait": None,
        }
        # The Work's SeqNum, where PyTorch's counter differs from the group's count (as the
        # simulator's Timeline keeps it): a point-to-point call numbered among its process
        # group's, whatever the peer.
        if flight_key[2] != self.seq[group_index]:
            record["work_seq_num"] = flight_key[2]
        self.record["collectives"].append(record)
        return record

    def runs_on_calling_stream(self, op, async_op):
        """R11: a synchronous collective runs on the current stream from PyTorch 2.8; a
        synchronous send or recv never does (``isend``/``irecv`` then ``wait()``)."""
        return (not async_op and self.sync_on_current_stream
                and tl.op_key(op["kind"]) not in P2P_KEYS)

    def has_implicit_wait(self, op, async_op):
        """Whether the call blocks inside the wrapper's ``wait()`` on its Work until its
        collective is done: synchronous, on the internal stream (a send or receive; any
        collective before PyTorch 2.8, R11)."""
        return not async_op and not self.runs_on_calling_stream(op, async_op)

    def raised_in_implicit_wait(self, op, async_op, error):
        """Whether a call that raised ``error`` had issued its collective and raised in the
        wrapper's implicit ``wait()`` (a synchronous call on the internal stream: a blocking
        wait's timeout, R15, or its Work's error). A call raises before it issues anything —
        no SeqNum, no Work, no record, as in the simulator — where its communicator's creation
        timed out (R29) or failed in the store otherwise ("… via c10d key-value store …"), or
        its communicator was already aborted (R27: "NCCL communicator was aborted"), and
        wherever it has no implicit wait (async_op; on the current stream, R11)."""
        message = str(error)
        lowered = message.lower()
        return (self.has_implicit_wait(op, async_op)
                and isinstance(error, self.dist.DistBackendError)
                and not self.is_store_timeout(error, message)
                and "via c10d key-value store" not in lowered
                and "communicator was aborted" not in lowered)

    def wait_raised(self, op, record, start_ns, raised_ns):
        """The wait at ``op`` on ``record``'s Work, begun at ``start_ns``, raised at
        ``raised_ns`` (the clock's readings): it ends at the raise, marked raised, so that the
        Timeline writes the collective unfinished as the simulator does (``resolved_rank``)."""
        record["wait"] = {
            "op": op["index"], "host_start_ns": self.rel(start_ns),
            "host_end_ns": self.rel(raised_ns), "stream": self.current, "released_ns": None,
            "completed_at_return": None, "raised": True,
        }

    def withdraw(self, op, record):
        """The record made before a call that raised before it issued anything: undone, its
        SeqNum and Flight Recorder number given back (``raised_in_implicit_wait``)."""
        self.record["collectives"].remove(record)
        self.seq[record["group"]] -= 1
        counter = self.flight_counter(op, record["group"])
        del self.flight_records[counter + (self.flight_seq[counter],)]
        self.flight_seq[counter] -= 1

    def raised(self, op, record, start_ns, error):
        """The call of ``record``, made before it, raised ``error``: its implicit wait ends at
        the raise where it had issued its collective, else the record is withdrawn. The call's
        host side stays at its start, since where PyTorch issued the collective inside the call
        is not observable."""
        if self.raised_in_implicit_wait(op, record["async_op"], error):
            self.wait_raised(op, record, start_ns, self.clock())
        else:
            self.withdraw(op, record)

    def implicit_wait(self, op, record):
        """``async_op=False``. On the group's internal stream (before PyTorch 2.8, a send or
        receive, a barrier) the wrapper's ``work.wait()`` makes the current stream wait for the
        kernel: a wait, released when that stream passes the call. On the calling stream
        (PyTorch >= 2.8, R11) ProcessGroupNCCL returns no Work and nothing waits: no wait is
        recorded, as the simulator records none, and the probe after the call only bounds the
        kernel's end where the Flight Recorder gives no duration."""
        passed = self.gpu_time(self.current)
        if record["run_stream"] == record["call_stream"]:
            record["stream_passed_ns"] = passed
            return
        record["wait"] = {
            "op": op["index"], "host_start_ns": record["host_start_ns"],
            "host_end_ns": record["host_end_ns"], "stream": self.current,
            "released_ns": passed, "completed_at_return": None,
        }

    def blocked_inside(self, op, record):
        """A synchronous call blocking until its collective is done, before it returns: a
        partial write sees the collective unfinished while the current stream has not passed it
        (on the calling stream, R11), or with the wrapper's ``wait()`` never returned (on the
        internal stream); ``implicit_wait`` replaces this once the call returns."""
        if record["run_stream"] == record["call_stream"]:
            record["stream_passed_ns"] = None
            return
        record["wait"] = {
            "op": op["index"], "host_start_ns": record["host_start_ns"], "host_end_ns": None,
            "stream": self.current, "released_ns": None, "completed_at_return": None,
        }

    def recorded_call(self, op, iteration, group_index, nbytes, async_op, ready, start, call,
                      blocks_inside):
        """``call()``, a collective's call begun at ``start`` (the clock's reading), its record
        made before it: a process taken down inside a call that ``blocks_inside`` (the
        watchdog) still writes the collective, unfinished, as the simulator does
        (``blocked_inside``); until the call returns its end is its start, since where PyTorch
        issued the collective inside it is not observable. A call that raised keeps its record
        only where it had issued the collective (``raised``). Returns the record, what the call
        returned and the clock at its return."""
        record = self.collective_record(op, iteration, group_index, nbytes, async_op, start,
                                        start, ready)
        if blocks_inside:
            self.blocked_inside(op, record)
        try:
            returned = call()
        except self.program_errors as error:
            self.raised(op, record, start, error)
            raise
        end = self.clock()
        record["host_end_ns"] = self.rel(end)
        return record, returned, end

    def op_collective(self, op, kind, iteration, mismatch=None):
        """The op's NCCL call or calls; a ``mismatch`` fault's call in place of the first
        (``issue_mismatch``)."""
        group_index = kind["group"]
        group = self.groups[group_index]
        tensor = self.scenario["tensors"][kind["tensor"]]
        batch = kind["batch"]["batch"]
        async_op = kind["async_op"]
        entries = []
        if tl.is_functional(self.scenario, op):
            ready = self.gpu_time(self.current)
            start = self.clock()
            result = self.funcol.all_reduce(self.tensors[kind["tensor"]][0], "sum", group)
            end = self.clock()
            record = self.collective_record(op, iteration, group_index, tensor["size_bytes"],
                                            True, start, end, ready)
            entries.append((FunctionalWork(self.funcol, result), record))
            # ``y = fcol.all_reduce(x)``: the result is a new tensor each call, bound to its
            # name; the one the name held goes now, after the call (R30).
            self.tensors[kind["result"]] = [result]
        elif batch == "coalesced":
            buffers = self.tensors[kind["tensor"]]
            collective, nbytes = kind["collective"], tensor["size_bytes"] * tensor["count"]
            if mismatch is not None:
                # The block's one call is the fault's: its calls on the fault's buffers.
                buffers = self.mismatch_buffer(mismatch, op)
                collective, nbytes = mismatch["collective"], mismatch["size_bytes"]

            def block():
                with self.dist._coalescing_manager(group=group, device=self.device,
                                                   async_ops=async_op) as manager:
                    for buffer in buffers:
                        self.issue(collective, buffer, group, group_index, False)
                return manager

            ready = self.gpu_time(self.current)
            start = self.clock()
            record, manager, end = self.recorded_call(
                op, iteration, group_index, nbytes, async_op, ready, start, block,
                self.has_implicit_wait(op, async_op))
            entries.append((CoalescedWork(manager), record))
            if not async_op:
                self.implicit_wait(op, record)
        else:
            buffers = (self.buckets[op["index"]] if batch == "bucketed"
                       else self.tensors[kind["tensor"]])
            if kind["collective"] == "all_to_all":
                self.all_to_all_output(self.tensors[kind["tensor"]])
            calls = [(kind["collective"], buffer) for buffer in buffers]
            if mismatch is not None:
                # The first tensor's or bucket's call is the fault's; the others follow.
                calls[0] = (mismatch["collective"], self.mismatch_buffer(mismatch, op)[0])
            first_start = None
            for collective, buffer in calls:
                ready = self.gpu_time(self.current)
                start = self.clock()
                record, work, end = self.recorded_call(
                    op, iteration, group_index, buffer.numel() * buffer.element_size(),
                    async_op, ready, start,
                    lambda: self.issue(collective, buffer, group, group_index, async_op),
                    self.has_implicit_wait(op, async_op))
                first_start = first_start if first_start is not None else start
                entries.append((work, record))
                if not async_op:
                    # Released right after its own call, not after the list's last one.
                    self.implicit_wait(op, record)
            start = first_start
        self.host(op, iteration, start, end)
        if kind["work"] is not None and async_op:
            # ``w = dist.all_reduce(t, async_op=True)`` for each tensor or bucket binds the
            # name to each call's Work in turn: it holds the last one, as in the simulator
            # (the calls run in order on one stream, so that Work ends last; R25).
            self.works[kind["work"]] = entries[-1:]

    def op_batch_p2p(self, op, kind, iteration):
        """``dist.batch_isend_irecv``: a ``P2POp`` per transfer, its peer ``shift`` places along
        the group; PyTorch issues them in one coalesced NCCL group on the group's
        communicator, and every Work it returns is that group's."""
        group_index = kind["group"]
        members = self.members[group_index]
        position = members.index(self.rank)
        p2p_ops = []
        sizes = {True: 0, False: 0}
        for transfer in kind["transfers"]:
            peer = members[(position + transfer["shift"]) % len(members)]
            call = self.dist.isend if transfer["send"] else self.dist.irecv
            buffer = self.tensors[transfer["tensor"]][0]
            p2p_ops.append(self.dist.P2POp(call, buffer, peer, self.groups[group_index]))
            sizes[transfer["send"]] += self.scenario["tensors"][transfer["tensor"]]["size_bytes"]
        ready = self.gpu_time(self.current)
        start = self.clock()
        works = self.dist.batch_isend_irecv(p2p_ops)
        end = self.clock()
        record = self.collective_record(op, iteration, group_index, max(sizes.values()), True,
                                        start, end, ready)
        self.host(op, iteration, start, end)
        if kind["work"] is not None:
            self.works[kind["work"]] = [(work, record) for work in works]

    def op_barrier(self, op, kind, iteration):
        group_index = kind["group"]
        async_op = kind["async_op"]
        ready = self.gpu_time(self.current)
        start = self.clock()
        # A synchronous all_reduce (R11, R14): from PyTorch 2.8 on the current stream, which
        # ProcessGroupNCCL::barrier then synchronises itself, returning no Work; before, on the
        # internal stream, its Work waited on by the wrapper. Either way a synchronous barrier
        # blocks inside its call. With async_op, the internal stream and a Work, kept for a
        # later wait as any async collective's. Its call reduces one element (the
        # simulator's ``element_bytes``: ProcessGroupNCCL::barrier's ``at::zeros({1}, kFloat)``).
        nbytes = self.scenario["op_works"][op["index"]]["element_bytes"]
        record, work, end = self.recorded_call(
            op, iteration, group_index, nbytes, async_op, ready, start,
            lambda: self.dist.barrier(group=self.groups[group_index], async_op=async_op,
                                      device_ids=[self.local_rank]),
            not async_op)
        self.host(op, iteration, start, end)
        if not async_op:
            self.implicit_wait(op, record)
        elif kind["work"] is not None:
            self.works[kind["work"]] = [(work, record)]

    def bound_works(self, work):
        """The Works (with their records) the Work name ``work`` holds; UnboundWorkName where no
        call bound it on this rank (every call that would have raised first)."""
        if work not in self.works:
            raise UnboundWorkName("name '%s' is not defined" % self.scenario["works"][work])
        return self.works[work]

    def op_wait(self, op, kind, iteration):
        entries = self.works.get(kind["work"], [])
        functional = tl.waits_tensor(self.scenario, kind["work"])
        if (kind["previous_iteration"] or functional) and not entries:
            # R30: the wait_tensor of a result no call made yet (the first iteration, or every
            # call so far raised): the name holds a plain tensor and nothing waits.
            return
        entries = self.bound_works(kind["work"])
        if any(isinstance(work, FunctionalWork) and work.completed for work, _ in entries):
            # R30: the name still holds a result already waited (the call that would have
            # bound it anew raised): its use calls nothing.
            return
        timeout = None
        if kind["timeout_ns"] is not None:
            timeout = datetime.timedelta(microseconds=kind["timeout_ns"] // 1000)
        start = self.clock()
        reached = []
        try:
            for work, record in entries:
                reached.append(record)
                self.open_call["blocked_on"] = {"kind": "work", "group": record["group"],
                                                "seq": record["seq"], "aborting": False}
                if timeout is None:
                    work.wait()
                else:
                    work.wait(timeout)
        except self.program_errors:
            # The wait raised (its timeout, R15, or the Work's error, R26, R27): the Works it
            # reached keep their wait, ended at the raise, so that the Timeline writes their
            # collectives unfinished, as the simulator does (``resolved_rank``).
            raised = self.clock()
            for record in reached:
                self.wait_raised(op, record, start, raised)
            raise
        end = self.clock()
        released = self.gpu_time(self.current)
        completed = [work.is_completed() for work, _ in entries]
        self.host(op, iteration, start, end)
        for (work, record), done in zip(entries, completed):
            record["wait"] = {
                "op": op["index"], "host_start_ns": self.rel(start),
                "host_end_ns": self.rel(end), "stream": self.current,
                "released_ns": released, "completed_at_return": done,
            }

    def op_get_future(self, op, kind, iteration):
        """``work.get_future().wait()``, or ``.then(callback)``. PyTorch runs the callback at
        once, on a stream from its pool that it made wait on the Work; the callback launches a
        ``_sleep`` of its duration there (its SM footprint is not reproduced), timed by events
        on that stream, recorded under the scenario's stream for it. The future ``then``
        returns is kept under ``work`` for a later ``wait``."""
        entries = self.bound_works(kind["work"])
        callback = kind["callback"]
        launched = []

        def launch(_future):
            pool = self.torch.cuda.current_stream()
            start_event = self.gpu_time_on(pool)
            enqueue = self.clock()
            self.sleep_gpu(callback["duration_ns"])
            launched.append((enqueue, start_event, self.gpu_time_on(pool)))

        children = []
        start = self.clock()
        for work, record in entries:
            future = work.get_future()
            if callback is None:
                future.wait()
            else:
                children.append((FutureWork(future.then(launch)), record))
        end = self.clock()
        self.host(op, iteration, start, end)
        for enqueue, start_event, end_event in launched:
            self.kernel(op, iteration, callback["stream"], "compute", enqueue, start_event,
                        end_event)
        if kind["child"] is not None:
            self.works[kind["child"]] = children

    def op_is_completed(self, op, kind, iteration):
        entries = self.bound_works(kind["work"])
        start = self.clock()
        answers = [work.is_completed() for work, _ in entries]
        end = self.clock()
        self.host(op, iteration, start, end)
        self.record["queries"].append({
            "iteration": iteration, "op": op["index"], "host_ns": self.rel(start),
            "completed": all(bool(a) for a in answers)})

    # ---- streams, events, synchronisation -------------------------------------------------

    def op_set_stream(self, op, kind, iteration):
        start = self.clock()
        self.torch.cuda.set_stream(self.streams[kind["stream"]])
        end = self.clock()
        self.current = kind["stream"]
        self.host(op, iteration, start, end)

    def user_event(self, index):
        if not hasattr(self, "events"):
            self.events = {}
        if index not in self.events:
            self.events[index] = self.torch.cuda.Event()
        return self.events[index]

    def op_record_event(self, op, kind, iteration):
        event = self.user_event(kind["event"])
        start = self.clock()
        event.record(self.streams[self.current])
        end = self.clock()
        self.event_sources[kind["event"]] = (self.current, self.gpu_time(self.current))
        self.host(op, iteration, start, end)

    def op_wait_event(self, op, kind, iteration):
        event = self.user_event(kind["event"])
        start = self.clock()
        self.streams[self.current].wait_event(event)
        end = self.clock()
        released = self.gpu_time(self.current)
        self.host(op, iteration, start, end)
        if kind["event"] in self.event_sources:
            source_stream, fired = self.event_sources[kind["event"]]
            self.record["stream_waits"].append({
                "iteration": iteration, "op": op["index"], "source_stream": source_stream,
                "source_ns": fired, "waiting_stream": self.current, "released_ns": released})

    def op_event_sync(self, op, kind, iteration):
        event = self.user_event(kind["event"])
        start = self.clock()
        event.synchronize()
        self.host(op, iteration, start, self.clock())

    def op_stream_sync(self, op, kind, iteration):
        stream = self.streams[kind["stream"]]
        start = self.clock()
        stream.synchronize()
        self.host(op, iteration, start, self.clock())

    def op_init_process_group(self, op, kind, iteration):
        """``dist.init_process_group`` in the program, in the first iteration only (R8)."""
        if iteration > 0:
            return
        start = self.clock()
        self.init_process_group(kind["device_id"])
        self.host(op, iteration, start, self.clock())

    def op_new_group(self, op, kind, iteration):
        """``dist.new_group`` in the program, on every rank, in the first iteration only."""
        if iteration > 0:
            return
        start = self.clock()
        self.new_group(kind["group"])
        self.host(op, iteration, start, self.clock())

    def op_device_sync(self, op, kind, iteration):
        start = self.clock()
        self.torch.cuda.synchronize()
        self.host(op, iteration, start, self.clock())

    def op_item(self, op, kind, iteration):
        element = self.tensors[kind["tensor"]][0].view(-1)[:1]
        start = self.clock()
        element.item()
        self.host(op, iteration, start, self.clock())

    # ---- kernels, host work, marks, memory ------------------------------------------------

    def launch(self, op, iteration, kind_class, launch):
        start_event = self.gpu_time(self.current)
        start = self.clock()
        launch()
        end = self.clock()
        end_event = self.gpu_time(self.current)
        self.host(op, iteration, start, end)
        self.kernel(op, iteration, self.current, kind_class, start, start_event, end_event)

    def op_gemm(self, op, kind, iteration):
        a, b, c = self.gemm_operand(kind)
        self.launch(op, iteration, "compute", lambda: self.torch.matmul(a, b, out=c))

    def op_kernel(self, op, kind, iteration):
        self.launch(op, iteration, "compute", lambda: self.sleep_gpu(kind["duration_ns"]))

    def op_gpu_sleep(self, op, kind, iteration):
        self.launch(op, iteration, "sleep", lambda: self.sleep_gpu(kind["duration_ns"]))

    def op_host_sleep(self, op, kind, iteration):
        start = self.clock()
        _precise_sleep(kind["duration_ns"], self.clock)
        self.host(op, iteration, start, self.clock())

    def op_mark(self, op, kind, iteration):
        start = self.clock()
        gpu = self.gpu_time(self.current)
        end = self.clock()
        self.host(op, iteration, start, end)
        self.record["marks"].append({"iteration": iteration, "mark": kind["mark"],
                                     "host_ns": self.rel(start), "gpu_ns": gpu})

    def op_alloc(self, op, kind, iteration):
        tensor = self.scenario["tensors"][kind["tensor"]]
        start = self.clock()
        self.tensors[kind["tensor"]] = self.allocate(tensor)
        self.host(op, iteration, start, self.clock())

    def op_free(self, op, kind, iteration):
        # The tensors' all_to_all receive buffers go with them (untimed): kept, they would pile
        # up, one per allocation, and a later tensor given a freed one's id would find a stale
        # buffer.
        for buffer in self.tensors.get(kind["tensor"], []):
            self.all_to_all_outputs.pop(id(buffer), None)
        start = self.clock()
        self.tensors.pop(kind["tensor"], None)
        self.host(op, iteration, start, self.clock())

    # ---- the end --------------------------------------------------------------------------

    def finish(self):
        """Drains the GPU (unless the program stopped on an error) and takes the end anchor,
        which gives the GPU clock's drift against the host's."""
        if self.exit_status == 0:
            # A Work still pending can time out in the drain and PyTorch's watchdog end the
            # process there: the journal writes what was measured, as inside a blocking op.
            self.busy_since_ns = self.clock()
            try:
                self.torch.cuda.synchronize()
            finally:
                self.busy_since_ns = None
            end_anchor = self.anchor()
            host_span = end_anchor[1] - self.start_anchor[1]
            gpu_span = self.start_anchor[0].elapsed_time(end_anchor[0]) * 1e6
            if gpu_span > 0:
                self.drift_scale = host_span / gpu_span
            self.machine["gpu_clock_drift_ppm"] = "%.2f" % ((1.0 / self.drift_scale - 1) * 1e6)
            self.machine["clock_alignment_uncertainty_ns"] = max(
                self.start_anchor[2], end_anchor[2])
        else:
            self.machine["clock_alignment_uncertainty_ns"] = self.start_anchor[2]
        stats = self.torch.cuda.memory_stats()
        self.record["memory"] = {
            "peak_reserved_bytes": int(self.torch.cuda.max_memory_reserved()),
            "peak_allocated_bytes": int(self.torch.cuda.max_memory_allocated()),
            "cache_releases": int(stats.get("num_alloc_retries", 0)),
        }
        self.durations = self.kernel_durations()
        if self.exit_status != 0:
            self.watchdog.append(tl.watchdog_record(
                self.rank, "exit", self.now(),
                "[Rank %d] the program stopped on the exception; exit status %d" % (
                    self.rank, self.exit_status)))
        self.write(final=self.exit_status == 0)

    def kernel_durations(self):
        """Per (group, SeqNum) of a collective record, its NCCL kernel's duration (ns) from the
        Flight Recorder's dump (``duration_ms``, timed under TORCH_NCCL_ENABLE_TIMING=1), the
        entry found by ``flight_key``; empty where the dump is not available. PyTorch fills
        ``duration_ms`` when its watchdog retires a completed Work (every ~100 ms), so the dump
        is retried, up to 2 s, until every collective of the run has one (a point-to-point
        call's too); ``machine.kernel_durations`` says how many matched. With
        the recorder off (TORCH_FR_BUFFER_SIZE = 0) there is nothing to read: no dump is asked
        for, and kernel ends fall back to the waits' releases."""
        if self.scenario["env"]["trace_buffer_entries"] == 0:
            self.machine["kernel_durations"] = (
                "unavailable (the Flight Recorder is off: TORCH_FR_BUFFER_SIZE = 0)")
            return {}
        names = {}
        for index, group in enumerate(self.groups):
            if group is not None and index in self.nccl_stream:
                names[str(getattr(group, "group_name", index))] = index
        wanted = {(record["group"], record["seq"]) for record in self.record["collectives"]}
        durations = {}
        for attempt in range(DURATION_ATTEMPTS):
            try:
                dump = pickle.loads(self.torch._C._distributed_c10d._dump_nccl_trace())
            except Exception as error:  # the private API moved or the recorder is off
                self.machine["kernel_durations"] = "unavailable (%s)" % type(error).__name__
                return {}
            durations = {}
            previous_p2p = False
            for entry in dump.get("entries", []):
                group = names.get(entry.get("process_group", ("",))[0])
                p2p = bool(entry.get("is_p2p"))
                if entry.get("profiling_name") == "nccl:coalesced":
                    # PyTorch's source marks a block's own entry by the block's op type, never
                    # point-to-point: a block of sends and receives is the one whose calls,
                    # recorded just before it, are (else it would take the number, and the
                    # duration, of the last collective).
                    p2p = p2p or previous_p2p
                previous_p2p = bool(entry.get("is_p2p"))
                sequence = entry.get("p2p_seq_id" if p2p else "collective_seq_id")
                # A call inside a coalescing block shares its block's number, untimed; the
                # block's own entry, recorded last, is the Work's.
                record = self.flight_records.get((group, p2p, sequence))
                if record is None:
                    continue
                created = entry.get("time_created_ns")
                if created is not None:
                    self.work_created[record] = created - self.origin_unix_ns
                duration = entry.get("duration_ms")
                if duration is not None:
                    durations[record] = int(duration * 1e6)
            found = len(wanted & durations.keys())
            if found == len(wanted):
                break
            time.sleep(0.1)
        self.machine["kernel_durations"] = (
            "Flight Recorder duration_ms for %d of %d collectives (after %d dumps)"
            % (found, len(wanted), attempt + 1))
        return durations

    def usable_work_created(self):
        """The Works' creation times, where the Flight Recorder's clock is this run's: each
        within its own call (a 50 us margin) for nine in ten collectives or more; else none.
        ``machine.work_created`` says which."""
        calls = {(r["group"], r["seq"]): r for r in self.record["collectives"]}
        known = [(key, at) for key, at in self.work_created.items() if key in calls]
        inside = sum(calls[key]["host_start_ns"] - 50_000 <= at <= calls[key]["host_end_ns"]
                     + 50_000 for key, at in known)
        usable = bool(known) and inside * 10 >= len(known) * 9
        if known:
            self.machine["work_created"] = (
                "Flight Recorder time_created_ns within its call for %d of %d collectives (%s)"
                % (inside, len(known), "used for input_ready_ns" if usable else "not used"))
        return dict(known) if usable else {}

    def resolved_rank(self, final):
        """The rank's records with every GPU time on the host axis; records whose events have
        not completed (the work never ran) are left out, as the simulator leaves out work that
        never happened. A partial write (``final`` false: the journal's, or one before the
        process ends on a fault or an exception) keeps apart what had not finished when it
        wrote, as the simulator does (docs/timeline-format.md): the op the program is inside
        (``unfinished_host``), the iteration it is in (``unfinished_iteration``), the kernels
        whose end had not come, and the collectives whose completion the interpreter would have
        seen and had not — a call whose input its stream had not reached, one whose ``wait()``
        (or implicit wait) had not released its stream, a synchronous call on the current stream
        that stream had not passed, the Work the open ``wait()`` is blocked on — and the stream
        waits on such a collective never released (its ``wait()``'s on its end, its internal
        stream's on an input that never came). A collective whose ``wait()`` raised is unfinished
        in every write, the final one too. An async
        collective with no ``wait()`` yet and no end known is left out: nothing says whether it
        completed."""
        def resolve_all(record):
            out = {}
            for key, value in record.items():
                value = self.resolve(value, final)
                if value is None and key in ("start_ns", "end_ns", "gpu_ns", "source_ns",
                                             "released_ns", "input_ready_ns"):
                    return None
                out[key] = value
            return out

        rank = dict(self.record)
        for key in ("marks", "stream_waits"):
            rank[key] = [r for r in map(resolve_all, list(self.record[key])) if r is not None]
        rank["kernels"] = []
        unfinished_kernels = []
        for record in list(self.record["kernels"]):
            # Its end first: once that has come, so has its start (the same stream, earlier).
            if final or self.resolve(record["end_ns"], final) is not None:
                rank["kernels"].append(resolve_all(record))
            else:
                unfinished_kernels.append(
                    tl.unfinished_kernel(record, self.resolve(record["start_ns"], final)))
        open_call = None if final or self.open_call is None else dict(self.open_call)
        if open_call is not None and any(
                call["op"] == open_call["op"] and call["start_ns"] >= open_call["start_ns"]
                for call in self.record["host"][-1:]):
            open_call = None  # it returned while this write was under way
        blocked = (open_call or {}).get("blocked_on") or {}
        open_work = (blocked["group"], blocked["seq"]) if blocked.get("kind") == "work" else None
        unfinished = []
        unreleased = []
        rank["host"] = list(self.record["host"])
        rank["queries"] = list(self.record["queries"])
        collectives = []
        kernels = rank["kernels"]
        previous_end = {}
        durations = getattr(self, "durations", {})
        created = self.usable_work_created()
        for record in list(self.record["collectives"]):
            record = dict(record)
            record["input_ready_ns"] = self.resolve(record["input_ready_ns"], final)
            at = created.get((record["group"], record["seq"]))
            if at is not None and record["input_ready_ns"] is not None:
                # On an idle stream the probe fired before the call; ProcessGroupNCCL's own
                # input-ready point (R10a, or the launch of a call on the current stream) is
                # inside it, where the Work is created (the wall clock's reading of that moment,
                # kept inside the call it was made in).
                at = min(max(at, record["host_start_ns"]), record["host_end_ns"])
                record["input_ready_ns"] = max(record["input_ready_ns"], at)
            probed = "stream_passed_ns" in record
            stream_passed = self.resolve(record.pop("stream_passed_ns", None), final)
            waited = dict(record["wait"]) if record["wait"] else None
            raised = waited is not None and waited.get("raised", False)
            wait = dict(waited) if waited else None
            if wait is not None:
                wait["released_ns"] = self.resolve(wait["released_ns"], final)
                if wait["released_ns"] is None:
                    wait = None
            if open_work == (record["group"], record["seq"]):
                waited = {"op": open_call["op"], "host_start_ns": open_call["start_ns"],
                          "host_end_ns": None, "stream": self.current}
            elif waited is not None:
                waited = {key: waited[key] for key in ("op", "host_start_ns", "host_end_ns",
                                                       "stream")}
            never_completed = tl.unfinished_collective(record, record["input_ready_ns"],
                                                       waited)
            if raised:
                # Its wait() raised: PyTorch gave up on the Work, which the program never saw
                # complete, whatever its kernel's events say (an abort ends a spinning kernel
                # before data moved, R15, R27). Whether the raise left the waiting stream
                # released is not seen: no stream wait is written for it.
                unfinished.append(never_completed)
                continue
            if record["input_ready_ns"] is None:
                unfinished.append(never_completed)
                unreleased += tl.unreleased_stream_waits(never_completed, input_came=False)
                continue
            group = record["group"]
            start = max(record["input_ready_ns"], previous_end.get(group, 0),
                        record["host_start_ns"])
            duration = durations.get((group, record["seq"]))
            if duration is not None:
                end = start + duration
            elif wait is not None:
                end = max(start, wait["released_ns"])
            elif stream_passed is not None:
                end = max(start, stream_passed)
            else:
                if waited is not None or probed:
                    unfinished.append(never_completed)
                    unreleased += tl.unreleased_stream_waits(never_completed, input_came=True)
                continue
            previous_end[group] = end
            record.update(kernel_start_ns=start, data_start_ns=start, end_ns=end)
            if wait is not None and wait["completed_at_return"] is None:
                wait["completed_at_return"] = end <= wait["host_end_ns"]
            record["wait"] = wait
            collectives.append(record)
            kernels.append({
                "iteration": record["iteration"], "op": record["op"],
                "stream": record["run_stream"], "class": "communication",
                "enqueue_ns": record["host_start_ns"], "start_ns": start, "end_ns": end})
            # A kernel on the calling stream (a synchronous call, PyTorch >= 2.8, R11) needs no
            # cudaStreamWaitEvent on either side: the stream orders it.
            if record["call_stream"] != record["run_stream"]:
                rank["stream_waits"].append({
                    "iteration": record["iteration"], "op": record["op"],
                    "source_stream": record["call_stream"], "source_ns": record["input_ready_ns"],
                    "waiting_stream": record["run_stream"], "released_ns": start})
            if wait is not None and wait["stream"] != record["run_stream"]:
                rank["stream_waits"].append({
                    "iteration": record["iteration"], "op": wait["op"],
                    "source_stream": record["run_stream"], "source_ns": end,
                    "waiting_stream": wait["stream"], "released_ns": wait["released_ns"]})
        kernels.sort(key=lambda k: k["enqueue_ns"])
        rank["stream_waits"].sort(key=lambda w: w["released_ns"])
        rank["collectives"] = collectives
        if open_call is not None:
            open_call["blocked_on"] = dict(blocked) if blocked else None
        # In the order the host made them, as the simulator keeps them.
        unreleased.sort(key=lambda made: made[0])
        return tl.with_unfinished(rank, unfinished, unfinished_kernels,
                                  [wait for _, wait in unreleased], open_call,
                                  None if final else self.program_iteration)

    def timeline(self, final):
        rank = self.resolved_rank(final)
        machine = dict(self.machine)
        machine.update(
            backend="c10dsim.torch", rank=self.rank, world=self.world,
            host_origin_unix_ns=self.origin_unix_ns,
            host_origin_monotonic_ns=self.origin_monotonic_ns, exit_status=self.exit_status,
            journal="final" if final else "partial (written before the process could end "
                                          "normally)")
        return tl.timeline(self.scenario, machine, rank, list(self.findings),
                           list(self.watchdog))

    def write(self, final):
        import json

        with self.lock:
            document = self.timeline(final)
            temporary = self.out_path + ".tmp"
            with open(temporary, "w") as handle:
                json.dump(document, handle, separators=(",", ":"))
            os.replace(temporary, self.out_path)

    def journal_loop(self):
        """Writes the Timeline so far once when an op has blocked for JOURNAL_AFTER_NS. A write
        that fails is reported on stderr, the first time only; the journal goes on."""
        written_for = None
        reported = False
        while True:
            time.sleep(0.1)
            since = self.busy_since_ns
            if since is None or self.clock() - since < JOURNAL_AFTER_NS:
                continue
            if written_for == since:
                continue
            written_for = since
            try:
                self.write(final=False)
            except Exception:
                if not reported:
                    sys.stderr.write(
                        "c10dsim.torch: the journal could not write the Timeline so far to %s "
                        "(reported once; the final write is the main thread's):\n%s"
                        % (self.out_path, traceback.format_exc()))
                    sys.stderr.flush()
                    reported = True
