"""A stand-in for the parts of PyTorch that c10dsim.torch calls, for tests without torch or a
GPU. Every call is appended to ``CALLS`` (and, when ``FAKE_TORCH_LOG`` names a file, written
there as one JSON line) so tests can check what was dispatched. GPU events read the host clock:
a "kernel" takes no time. ``FAKE_TORCH_RAISES="CALL=CLASS: MESSAGE"`` makes every call logged as
CALL (``work.wait``, ``empty``, …) raise CLASS — a class of ``torch.distributed`` (PyTorch's
``DistBackendError``), of ``torch.cuda`` (``OutOfMemoryError``) or a builtin — with MESSAGE;
``CALL:N=…`` only from the Nth such call on.
``FAKE_TORCH_ABORTS="CALL:N"`` makes the Nth call logged as CALL block for 1.5 s, then end the
process with SIGABRT, as PyTorch's watchdog takes a process down inside a blocking call.
``FAKE_TORCH_GPU_STOPS="CALL:N"`` stops the GPU at the Nth call logged as CALL: no event
recorded from that call on completes (``query()`` answers False), as on a GPU where a kernel
launched there never ends. ``FAKE_TORCH_VERSION`` sets ``__version__``.
"""

import builtins
import json
import os
import signal
import time
import weakref

from . import cuda, distributed, version  # noqa: F401

__version__ = os.environ.get("FAKE_TORCH_VERSION", "0.0-fake")

CALLS = []
# Whether the GPU has stopped (FAKE_TORCH_GPU_STOPS).
GPU_STOPPED = [False]

float32 = "float32"
bfloat16 = "bfloat16"
float16 = "float16"


def log(name, *args):
    CALLS.append((name,) + args)
    path = os.environ.get("FAKE_TORCH_LOG")
    if path:
        with open(path, "a") as handle:
            handle.write(json.dumps([name] + [str(a) for a in args]) + "\n")
    stopping, _, count = os.environ.get("FAKE_TORCH_GPU_STOPS", "").partition(":")
    if stopping == name and [call[0] for call in CALLS].count(name) == int(count):
        GPU_STOPPED[0] = True
    aborting, _, count = os.environ.get("FAKE_TORCH_ABORTS", "").partition(":")
    if aborting == name and [call[0] for call in CALLS].count(name) == int(count):
        time.sleep(1.5)
        os.kill(os.getpid(), signal.SIGABRT)
    call, _, error = os.environ.get("FAKE_TORCH_RAISES", "").partition("=")
    call, _, first = call.partition(":")
    if call == name and [c[0] for c in CALLS].count(name) >= int(first or 1):
        class_name, _, message = error.partition(": ")
        for namespace in (distributed, cuda, builtins):
            if hasattr(namespace, class_name):
                raise getattr(namespace, class_name)(message)
        raise ValueError("FAKE_TORCH_RAISES names no exception class: %r" % class_name)


class device:
    def __init__(self, kind, index):
        self.kind = kind
        self.index = index


class Tensor:
    def __init__(self, numel, dtype):
        self._numel = numel
        self.dtype = dtype

    def numel(self):
        return self._numel

    def element_size(self):
        return {"float32": 4}.get(self.dtype, 2)

    def narrow(self, dim, start, length):
        return Tensor(length, self.dtype)

    def view(self, *shape):
        return self

    def __getitem__(self, index):
        return Tensor(1, self.dtype)

    def item(self):
        log("item")
        return 1.0


def _numel(shape):
    total = 1
    for size in shape:
        total *= size
    return total


def _allocate(shape, dtype):
    """A tensor of the fake caching allocator: its bytes count in ``cuda.memory_allocated`` (and
    its peak), and a segment of its own in ``cuda.memory_reserved``, until the last reference to
    it is dropped."""
    tensor = Tensor(_numel(shape), dtype)
    size = tensor.numel() * tensor.element_size()
    cuda._allocated[0] += size
    cuda._peak_allocated[0] = max(cuda._peak_allocated[0], cuda._allocated[0])
    segment = cuda._segment_bytes(size)
    cuda._reserved[0] += segment
    weakref.finalize(tensor, cuda._release, size, segment)
    return tensor


def ones(*shape, dtype=None, device=None):
    log("ones", _numel(shape), dtype)
    return _allocate(shape, dtype)


def empty(*shape, dtype=None, device=None):
    log("empty", _numel(shape), dtype)
    return _allocate(shape, dtype)


def randn(*shape, dtype=None, device=None):
    return _allocate(shape, dtype)


def matmul(a, b, out=None):
    log("matmul", a.numel(), b.numel())
    return out


# What the process environment held when torch was imported: the interpreter must export the
# scenario's [env] before this import.
for _name in os.environ.get("FAKE_TORCH_WATCH", "").split(","):
    if _name:
        log("import", "%s=%s" % (_name, os.environ.get(_name)))
