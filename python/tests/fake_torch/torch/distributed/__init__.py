"""The fake ``torch.distributed``. Its Flight Recorder (``torch._C._distributed_c10d``) keeps an
entry per call as PyTorch 2.11's does: a group counts its collectives (``collective_seq_id``) and
its point-to-point calls (``p2p_seq_id``, ``is_p2p``) apart; a send or receive without a group is
the world's; a ``_coalescing_manager`` block (``batch_isend_irecv`` is one) takes one number, its
calls are recorded untimed and its Work as ``nccl:coalesced``, point-to-point if it held any.
Kernels take ``FAKE_TORCH_DURATION_MS`` (0.01 ms); with ``FAKE_TORCH_DURATION_PER_SEQ=1`` a
collective's takes its ``collective_seq_id`` in µs and a point-to-point call's 1 ms plus its
``p2p_seq_id`` in µs, so that a record given another call's duration shows.
Its functions take PyTorch 2.11's parameters in PyTorch's order (``op`` before ``group``, the
split sizes of ``all_to_all_single``, …), so that a call the real API would read otherwise does
not pass here. ``FAKE_TORCH_COMPLETED=0`` makes ``Work.is_completed`` answer False.
``FAKE_TORCH_BLOCK_BY_OP_TYPE=1`` marks a block's own entry ``is_p2p`` as PyTorch's source reads
(``isP2POp`` of the block's op type, never point-to-point), not by the calls it held.
``FAKE_TORCH_LOG_WAIT_TIMEOUT=1`` makes ``Work.wait`` print, first, PyTorch's log lines of a
polling wait's timeout: the timeout check's, the wait's and the end of its abort.
"""

import time
import contextlib
import datetime
import os
import sys

from .. import _C


def _log(*args):
    import torch

    torch.log(*args)


class DistError(RuntimeError):
    """``torch.distributed.DistError``, the base of what c10d raises."""


class DistBackendError(DistError):
    """What ProcessGroupNCCL raises: a timed-out or aborted collective, an NCCL error."""


class DistStoreError(DistError):
    """What the store raises: a ``get`` that timed out."""


class _Group:
    def __init__(self, name, ranks):
        self.group_name = name
        self.ranks = ranks
        self.seq = 0
        self.p2p_seq = 0
        # Inside a _coalescing_manager block: whether it holds point-to-point calls, collectives.
        self.coalescing = None


class group:
    WORLD = None


_groups = []


class Work:
    def __init__(self, name):
        self.name = name

    def wait(self, timeout=None):
        if os.environ.get("FAKE_TORCH_LOG_WAIT_TIMEOUT") == "1":
            rank, work = int(os.environ.get("RANK", "0")), "WorkNCCL(SeqNum=1, fake)"
            _log_line(rank, "Watchdog caught collective operation timeout: %s ran for 50 "
                            "milliseconds before timing out." % work)
            _log_line(rank, "Work %s timed out in blocking wait." % work)
            _log_line(rank, "To avoid data inconsistency, we are taking the entire process "
                            "down.")
        _log("work.wait", self.name, timeout)
        return True

    def is_completed(self):
        _log("work.is_completed", self.name)
        return os.environ.get("FAKE_TORCH_COMPLETED", "1") == "1"

    def get_future(self):
        return Future(self.name)


class Future:
    """A CUDA-aware future as NCCL's Work hands it out: complete at once."""

    def __init__(self, name):
        self.name = name

    def wait(self):
        _log("future.wait", self.name)

    def then(self, callback):
        _log("future.then", self.name)
        callback(self)
        return Future(self.name + ".then")

    def done(self):
        return True


def _duration_ms(group, p2p):
    if os.environ.get("FAKE_TORCH_DURATION_PER_SEQ") == "1":
        return (1000 + group.p2p_seq) / 1000 if p2p else group.seq / 1000
    return float(os.environ.get("FAKE_TORCH_DURATION_MS", "0.01"))


def _record(group, p2p):
    """One call into the Flight Recorder: PyTorch's sequence number is bumped once per call, or
    once per coalescing block, and a call inside a block gets no timing events."""
    coalescing = group.coalescing
    if coalescing is None or p2p not in coalescing:
        if p2p:
            group.p2p_seq += 1
        else:
            group.seq += 1
    if coalescing is not None:
        coalescing.add(p2p)
    _append_entry(group, p2p, timed=coalescing is None)


def _append_entry(group, p2p, timed, marked=None, name=None):
    _C._distributed_c10d.ENTRIES.append({
        "record_id": len(_C._distributed_c10d.ENTRIES), "process_group": (group.group_name, ""),
        "profiling_name": name or ("nccl:send" if p2p else "nccl:all_reduce"),
        "collective_seq_id": group.seq, "p2p_seq_id": group.p2p_seq,
        "duration_ms": _duration_ms(group, p2p) if timed else None,
        "is_p2p": p2p if marked is None else marked, "time_created_ns": time.time_ns()})


def _issue(name, group, async_op):
    group = group or _groups[0]
    _record(group, p2p=False)
    _log(name, group.group_name, async_op)
    return Work(name) if async_op else None


def _issue_p2p(name, peer, group, async_op):
    group = group or _groups[0]
    _record(group, p2p=True)
    _log(name, peer)
    return Work(name) if async_op else None


class ProcessGroupNCCL:
    class Options:
        is_high_priority_stream = False


def _log_line(rank, message):
    """A line as PyTorch 2.11's C++ logger prints it: the wall clock's date and seconds (UTC
    here; month × 100 + day unpadded, `E915` on 15 September) with CLOCK_MONOTONIC's
    nanoseconds."""
    monotonic_ns = time.monotonic_ns()
    now = datetime.datetime.now(datetime.timezone.utc)
    sys.stderr.write("[rank%d]:[E%d %s.%09d ProcessGroupNCCL.cpp:1] [Rank %d] %s\n"
                     % (rank, now.month * 100 + now.day, now.strftime("%H:%M:%S"),
                        monotonic_ns % 10**9, rank, message))
    sys.stderr.flush()


def init_process_group(backend=None, rank=0, world_size=1, timeout=None, device_id=None,
                       pg_options=None):
    _log("init_process_group", backend, rank, world_size, timeout, device_id is not None)
    if os.environ.get("FAKE_TORCH_LOG_TIMEOUT") == "1":
        _log_line(rank, "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, fake)")
    if os.environ.get("FAKE_TORCH_LOG_ASYNC_ERROR") == "1":
        _log_line(rank, "Collective WorkNCCL(SeqNum=1, fake) raised the following async "
                        "exception: NCCL error: unhandled system error")
    world = _Group("0", list(range(world_size)))
    _groups.append(world)
    group.WORLD = world


def new_group(ranks=None, timeout=None, pg_options=None, group_desc=None):
    _log("new_group", ranks, group_desc)
    created = _Group(str(len(_groups)), ranks)
    _groups.append(created)
    return created


def destroy_process_group():
    _log("destroy_process_group")


def all_reduce(tensor, op=None, group=None, async_op=False):
    return _issue("all_reduce", group, async_op)


def broadcast(tensor, src=None, group=None, async_op=False, group_src=None):
    return _issue("broadcast", group, async_op)


def all_gather_into_tensor(output, input, group=None, async_op=False):
    return _issue("all_gather_into_tensor", group, async_op)


def reduce_scatter_tensor(output, input, op=None, group=None, async_op=False):
    return _issue("reduce_scatter_tensor", group, async_op)


def all_to_all_single(output, input, output_split_sizes=None, input_split_sizes=None, group=None,
                      async_op=False):
    return _issue("all_to_all_single", group, async_op)


def isend(tensor, dst=None, group=None, tag=0, group_dst=None):
    return _issue_p2p("isend", dst, group, True)


def irecv(tensor, src=None, group=None, tag=0, group_src=None):
    return _issue_p2p("irecv", src, group, True)


def send(tensor, dst=None, group=None, tag=0, group_dst=None):
    return _issue_p2p("send", dst, group, False)


def recv(tensor, src=None, group=None, tag=0, group_src=None):
    return _issue_p2p("recv", src, group, False)


def barrier(group=None, async_op=False, device_ids=None):
    return _issue("barrier", group, async_op)


class _CoalescingManager:
    def __init__(self):
        self.works = []


@contextlib.contextmanager
def _coalescing_block(group):
    """ProcessGroupNCCL's startCoalescing / endCoalescing: the block's Work, timed, recorded as
    ``nccl:coalesced`` (point-to-point if the block held a send or a receive)."""
    group.coalescing = set()
    yield
    p2p = True in group.coalescing
    group.coalescing = None
    marked = p2p and os.environ.get("FAKE_TORCH_BLOCK_BY_OP_TYPE") != "1"
    _append_entry(group, p2p, timed=True, marked=marked, name="nccl:coalesced")


@contextlib.contextmanager
def _coalescing_manager(group=None, device=None, async_ops=False):
    _log("coalescing_manager.enter", async_ops)
    group = group or _groups[0]
    manager = _CoalescingManager()
    with _coalescing_block(group):
        yield manager
    # PyTorch keeps the block's Work for the caller only with async_ops; else it waits on it.
    work = Work("coalesced")
    if async_ops:
        manager.works.append(work)
    else:
        work.wait()
    _log("coalescing_manager.exit")


class P2POp:
    """One send or receive of a batch, as ``torch.distributed.P2POp`` holds it."""

    def __init__(self, op, tensor, peer=None, group=None, tag=0, group_peer=None):
        self.op, self.tensor, self.peer, self.group = op, tensor, peer, group


def batch_isend_irecv(p2p_op_list):
    """One coalescing block on the first op's group, as PyTorch's NCCL path: its Work only."""
    names = ["%s:%d" % (p.op.__name__, p.peer) for p in p2p_op_list]
    _log("batch_isend_irecv", *names)
    group = p2p_op_list[0].group or _groups[0]
    with _coalescing_block(group):
        for _ in p2p_op_list:
            _record(group, p2p=True)
    return [Work("batch")]
