import time

from . import nccl  # noqa: F401


class OutOfMemoryError(RuntimeError):
    """``torch.cuda.OutOfMemoryError``: the caching allocator could not allocate."""


def _log(*args):
    import torch

    torch.log(*args)


class Stream:
    def __init__(self, device=None, priority=0):
        self.priority = priority

    def synchronize(self):
        _log("stream.synchronize")

    def wait_event(self, event):
        _log("stream.wait_event")


_DEFAULT = Stream()
_current = [_DEFAULT]


class Event:
    def __init__(self, enable_timing=False):
        self.enable_timing = enable_timing
        self.time_ns = None

    def record(self, stream=None):
        import torch

        if not torch.GPU_STOPPED[0]:
            self.time_ns = time.perf_counter_ns()

    def synchronize(self):
        _log("event.synchronize")

    def query(self):
        _log("event.query")
        return self.time_ns is not None

    def elapsed_time(self, other):
        return (other.time_ns - self.time_ns) / 1e6


def current_stream():
    return _current[0]


def set_stream(stream):
    _log("set_stream", stream.priority)
    _current[0] = stream


def set_device(index):
    _log("set_device", index)


def synchronize():
    _log("cuda.synchronize")


def _sleep(cycles):
    _log("_sleep", cycles)


def is_available():
    return True


def device_count():
    return 1


def get_device_name(index):
    return "Fake GPU"


def memory_stats():
    return {"num_alloc_retries": 0}


def max_memory_reserved():
    return 0


def max_memory_allocated():
    return _peak_allocated[0]


class _Properties:
    total_memory = 141 * 2**30


def get_device_properties(index):
    return _Properties()


def set_per_process_memory_fraction(fraction, device=None):
    _log("set_per_process_memory_fraction", fraction)


# What the fake caching allocator holds: the tensors made by torch.ones, empty and randn while
# referenced, and the cuBLAS workspaces, 32 MiB per stream at its first cuBLAS handle, as
# PyTorch's on an H200. Each tensor has a segment of its own, its size rounded up to 2 MiB,
# returned with it (the fake caches nothing).
BLAS_WORKSPACE_BYTES = 32 * 2**20
_allocated = [0]
_peak_allocated = [0]
_reserved = [0]
_streams_with_workspace = []


def _segment_bytes(size):
    return -(-size // (2 * 2**20)) * 2 * 2**20


def _release(size, segment):
    _allocated[0] -= size
    _reserved[0] -= segment


def memory_allocated(device=None):
    return _allocated[0]


def memory_reserved(device=None):
    return _reserved[0]


def current_blas_handle():
    stream = current_stream()
    _log("current_blas_handle", stream.priority)
    if not any(s is stream for s in _streams_with_workspace):
        _streams_with_workspace.append(stream)
        _allocated[0] += BLAS_WORKSPACE_BYTES
        _reserved[0] += BLAS_WORKSPACE_BYTES
    return 1


class stream:
    """``torch.cuda.stream(s)``: ``s`` is the current stream inside the block."""

    def __init__(self, stream):
        self.stream = stream

    def __enter__(self):
        self.previous = _current[0]
        _current[0] = self.stream

    def __exit__(self, *exc):
        _current[0] = self.previous
