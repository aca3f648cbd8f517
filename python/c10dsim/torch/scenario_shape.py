"""The shape of a resolved scenario (``c10dsim resolve FILE --json``) as far as the interpreter
reads it, checked before torch is imported: a file of another c10dsim version, or edited by
hand, is refused naming the key that is wrong instead of stopping the interpreter mid-run.

A shape is a JSON type (``int``, ``NUMBER``, ``str``, ``bool``, ``list``, ``dict``); a dict of
keys an object must have and their shapes; a one-item list, a list whose items all have that
shape; ``Maybe(shape)``, null or the shape; ``Index("ops")``, an integer index of the
scenario's top-level list ``ops``; ``PerItem("groups", shape)``, a list of that shape with one
item per item of the top-level list ``groups``; ``Tagged(tag, variants)``, an object whose string ``tag``
picks one of ``variants``' shapes."""

import json

NUMBER = (int, float)


class Maybe:
    def __init__(self, shape):
        self.shape = shape


class Index:
    def __init__(self, table):
        self.table = table


class PerItem:
    def __init__(self, table, shape):
        self.table, self.shape = table, shape


class Tagged:
    """``known_only``: a tag outside ``variants`` is wrong; else it is left to the interpreter's
    refusal, which names it (an op kind this interpreter cannot enact)."""

    def __init__(self, tag, variants, known_only=True):
        self.tag, self.variants, self.known_only = tag, variants, known_only


DELAY = Tagged("distribution", {
    "fixed": {"ns": NUMBER},
    "normal": {"mean_ns": NUMBER, "std_ns": NUMBER},
    "lognormal": {"mean_ns": NUMBER, "std_ns": NUMBER},
    "exponential": {"mean_ns": NUMBER},
    "gamma": {"shape": NUMBER, "scale_ns": NUMBER},
    "uniform": {"min_ns": NUMBER, "max_ns": NUMBER},
})
WORK = Maybe(Index("works"))
DURATION = {"duration_ns": int}
OP_KINDS = Tagged("kind", {
    "collective": {"collective": str, "tensor": Index("tensors"), "group": Index("groups"),
                   "async_op": bool, "work": WORK, "batch": Tagged("batch", {
                       "each": {}, "coalesced": {}, "bucketed": {"cap_bytes": int}})},
    "batch_p2p": {"group": Index("groups"), "work": WORK, "transfers": [
        {"send": bool, "tensor": Index("tensors"), "shift": int}]},
    "barrier": {"group": Index("groups"), "async_op": bool, "work": WORK},
    "wait": {"work": Index("works"), "timeout_ns": Maybe(int), "previous_iteration": bool},
    "is_completed": {"work": Index("works")},
    "get_future": {"work": Index("works"), "child": WORK, "callback": Maybe(
        {"duration_ns": int, "stream": Index("streams")})},
    "set_stream": {"stream": Index("streams")},
    "record_event": {"event": int},
    "wait_event": {"event": int},
    "event_sync": {"event": int},
    "stream_sync": {"stream": Index("streams")},
    "device_sync": {},
    "item": {"tensor": Index("tensors")},
    "gemm": {"m": int, "n": int, "k": int, "dtype": str},
    "kernel": DURATION,
    "gpu_sleep": DURATION,
    "host_sleep": DURATION,
    "mark": {"mark": Index("marks")},
    "alloc": {"tensor": Index("tensors")},
    "free": {"tensor": Index("tensors")},
    "init_process_group": {"device_id": bool},
    "new_group": {"group": Index("groups")},
}, known_only=False)
FAULT_KINDS = Tagged("kind", {
    "skip": {}, "hang": {}, "die": {}, "watchdog_stuck": {},
    "mismatch": {"collective": str, "size_bytes": int, "dtype": str},
    "async_error": {"after_ns": int},
})
RANKS = [int]

# In an order where a list comes before the keys that index it.
SCENARIO = {
    "name": str, "path": str, "source_hash": str, "torch": str, "seed": int, "repeat": int,
    "warmup": int,
    "cluster": {"ranks": int},
    "env": {"raw": {}, "high_priority": bool, "blocking_wait": bool},
    "memory": {"capacity_bytes": int},
    "tensors": [{"name": str, "size_bytes": int, "count": int, "dtype": str, "dynamic": bool}],
    "streams": [{"name": str, "priority": str}],
    "groups": [{"name": str, "ranks": RANKS, "eager_init": bool, "high_priority": bool,
                "timeout_ns": int}],
    "works": [str],
    "marks": [str],
    "ops": [{"index": int, "line": int, "kind": OP_KINDS, "stream": Index("streams"),
             "ranks": Maybe(RANKS)}],
    "perturbations": [{"ranks": RANKS, "before_op": Index("ops"), "host_delay": DELAY,
                       "gpu_delay": DELAY, "iterations": Maybe([int])}],
    "faults": [{"ranks": RANKS, "op": Index("ops"), "iteration": int, "kind": FAULT_KINDS}],
    "measures": [{"name": str, "from": Index("marks"), "to": Index("marks"), "clock": str}],
    "overlaps": [{"name": str, "compute": Index("measures"), "comm": Index("measures"),
                  "both": Index("measures")}],
    "communicators": PerItem("groups", Index("groups")),
    "process_groups": PerItem("groups", Index("groups")),
    "stream_high_priority": PerItem("groups", bool),
    "setup_communicator_ranks": PerItem("groups", RANKS),
    "functional_works": PerItem("works", bool),
    "op_works": PerItem("ops", Maybe({"op_type": str, "element_bytes": int, "numel_in": {},
                        "numel_out": {}, "timeout_ms": int})),
}

TYPE_NAMES = {int: "an integer", NUMBER: "a number", str: "a string", bool: "true or false",
              list: "a list", dict: "an object"}


def shape_error(value, shape, scenario, where=""):
    """The first place where ``value`` does not have ``shape``, as ``KEY.PATH: expected …,
    got …``; None where it does."""
    if isinstance(shape, Maybe):
        return None if value is None else shape_error(value, shape.shape, scenario, where)
    if isinstance(shape, Index):
        error = shape_error(value, int, scenario, where)
        size = len(scenario[shape.table])
        if error is None and not 0 <= value < size:
            error = "%s: expected an index of %s (0 to %d), got %d" % (
                where, shape.table, size - 1, value)
        return error
    if isinstance(shape, PerItem):
        error = shape_error(value, [shape.shape], scenario, where)
        size = len(scenario[shape.table])
        if error is None and len(value) != size:
            error = "%s: expected one item per item of %s (%d), got %d" % (
                where, shape.table, size, len(value))
        return error
    if isinstance(shape, (dict, Tagged)):
        if not isinstance(value, dict):
            return expected(where, dict, value)
        if isinstance(shape, Tagged):
            error = shape_error(value, {shape.tag: str}, scenario, where)
            if error is not None:
                return error
            tag = value[shape.tag]
            if tag not in shape.variants:
                return ("%s.%s: expected one of %s, got %s" % (
                    where, shape.tag, ", ".join(shape.variants), json.dumps(tag))
                    if shape.known_only else None)
            shape = shape.variants[tag]
        for key, item in shape.items():
            if key not in value:
                return "%s: has no %s" % (where or "the scenario", key)
            error = shape_error(value[key], item, scenario, "%s.%s" % (where, key) if where
                                else key)
            if error is not None:
                return error
        return None
    if isinstance(shape, list):
        if not isinstance(value, list):
            return expected(where, list, value)
        for position, item in enumerate(value):
            error = shape_error(item, shape[0], scenario, "%s[%d]" % (where, position))
            if error is not None:
                return error
        return None
    if isinstance(value, bool) != (shape is bool) or not isinstance(value, shape):
        return expected(where, shape, value)
    return None


def expected(where, shape, value):
    return "%s: expected %s, got %s" % (where, TYPE_NAMES[shape], json.dumps(value)[:60])
