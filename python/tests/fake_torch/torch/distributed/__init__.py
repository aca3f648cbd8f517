import time
import contextlib
import datetime
import os
import sys

from .. import _C


def _log(*args):
    import torch

    torch.log(*args)


class _Group:
    def __init__(self, name, ranks):
        self.group_name = name
        self.ranks = ranks
        self.seq = 0


class group:
    WORLD = None


_groups = []


class Work:
    def __init__(self, name):
        self.name = name

    def wait(self, timeout=None):
        _log("work.wait", self.name, timeout)
        if os.environ.get("FAKE_TORCH_WAIT_RAISES") == "1":
            raise RuntimeError("Watchdog caught collective operation timeout: WorkNCCL(fake) "
                               "timed out")
        return True

    def is_completed(self):
        _log("work.is_completed", self.name)
        return True

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


def _issue(name, group, async_op):
    group = group or _groups[0]
    group.seq += 1
    _C._distributed_c10d.ENTRIES.append({
        "record_id": len(_C._distributed_c10d.ENTRIES), "process_group": (group.group_name, ""),
        "collective_seq_id": group.seq,
        "duration_ms": float(os.environ.get("FAKE_TORCH_DURATION_MS", "0.01")), "is_p2p": False,
        "time_created_ns": time.time_ns()})
    _log(name, group.group_name, async_op)
    return Work(name) if async_op else None


class ProcessGroupNCCL:
    class Options:
        is_high_priority_stream = False


def _log_line(rank, message):
    """A line as PyTorch 2.11's C++ logger prints it: the wall clock's date and seconds (UTC
    here) with CLOCK_MONOTONIC's nanoseconds."""
    monotonic_ns = time.monotonic_ns()
    now = datetime.datetime.now(datetime.timezone.utc)
    sys.stderr.write("[rank%d]:[E%s.%09d ProcessGroupNCCL.cpp:1] [Rank %d] %s\n"
                     % (rank, now.strftime("%m%d %H:%M:%S"), monotonic_ns % 10**9, rank, message))
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


def new_group(ranks=None, timeout=None, pg_options=None):
    _log("new_group", ranks)
    created = _Group(str(len(_groups)), ranks)
    _groups.append(created)
    return created


def destroy_process_group():
    _log("destroy_process_group")


def all_reduce(tensor, group=None, async_op=False):
    return _issue("all_reduce", group, async_op)


def broadcast(tensor, src=0, group=None, async_op=False):
    return _issue("broadcast", group, async_op)


def all_gather_into_tensor(output, input, group=None, async_op=False):
    return _issue("all_gather_into_tensor", group, async_op)


def reduce_scatter_tensor(output, input, group=None, async_op=False):
    return _issue("reduce_scatter_tensor", group, async_op)


def all_to_all_single(output, input, group=None, async_op=False):
    return _issue("all_to_all_single", group, async_op)


def isend(tensor, dst=None, group=None):
    _log("isend", dst)
    return _issue("isend", group, True)


def irecv(tensor, src=None, group=None):
    _log("irecv", src)
    return _issue("irecv", group, True)


def barrier(group=None, device_ids=None):
    _issue("barrier", group, False)


class _CoalescingManager:
    def __init__(self):
        self.works = []


@contextlib.contextmanager
def _coalescing_manager(group=None, device=None, async_ops=False):
    _log("coalescing_manager.enter", async_ops)
    manager = _CoalescingManager()
    yield manager
    manager.works.append(_issue("coalesced", group, True))
    _log("coalescing_manager.exit")


class P2POp:
    """One send or receive of a batch, as ``torch.distributed.P2POp`` holds it."""

    def __init__(self, op, tensor, peer, group=None):
        self.op, self.tensor, self.peer, self.group = op, tensor, peer, group


def batch_isend_irecv(p2p_op_list):
    names = ["%s:%d" % (p.op.__name__, p.peer) for p in p2p_op_list]
    _log("batch_isend_irecv", *names)
    return [Work("batch")]
