"""``python -m c10dsim.torch SCENARIO.json --out DIR [--world N]``: one rank of a resolved
scenario (``c10dsim resolve FILE --json``) through real ``torch.distributed``.

Run one process per GPU under torchrun (``c10dsim torch FILE`` does it). Each process writes
``DIR/rank<RANK>.json``. Exit status: 0 the program ran; 1 it stopped on an exception PyTorch
raised for a failed call (a timed-out wait, an aborted communicator, an out-of-memory error:
recorded in the Timeline as a finding); 2 bad input, found before torch is imported (a scenario
file that cannot be read or is no resolved scenario, its first wrong key named; an --out that
cannot be made a folder; a launcher variable that is not a non-negative integer or a rank not
below the world size; a launch that does not fit the scenario; a scenario that asks for
something this interpreter cannot enact), or a torch that cannot be imported, named; 3 an
exception the interpreter does not expect (its own bug, or the machine's), its traceback on
stderr.
"""

import argparse
import json
import os
import sys
import traceback

from .scenario_shape import SCENARIO, shape_error

# Set unless the scenario's [env] says otherwise: Works time their kernels (as the hardware
# backend's do) and the Flight Recorder keeps every collective, so that kernel durations can be
# read back at the end (docs/torch.md).
MEASUREMENT_ENV = {
    "TORCH_NCCL_ENABLE_TIMING": "1",
    "TORCH_FR_BUFFER_SIZE": "100000",
    "TORCH_NCCL_TRACE_BUFFER_SIZE": "100000",
}

ERROR_HANDLING_VARIABLE = "TORCH_NCCL_ASYNC_ERROR_HANDLING"
# The resolved scenario's `env.async_error_handling`, in the variable's order (0 to 3).
ERROR_HANDLING_MODES = ("NoHandling", "TearDown", "CleanUpOnly", "SkipCleanUp")
MODULE_LOADING_VARIABLE = "CUDA_MODULE_LOADING"


def export_environment(scenario, environ):
    """Exports the scenario's [env] (as written), then the measurement's defaults where the
    scenario is silent; returns what was set, for the Timeline's machine map."""
    exported = {}
    for key, value in sorted(scenario["env"]["raw"].items()):
        environ[key] = str(value)
        exported[key] = str(value)
    # The Flight Recorder's buffer has two names (PyTorch >= 2.11 reads TORCH_FR_BUFFER_SIZE
    # first): a scenario that sets either keeps both unset by the defaults.
    buffer_names = {"TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE"}
    scenario_buffer = bool(buffer_names & set(exported))
    for key, value in MEASUREMENT_ENV.items():
        if key not in exported and not (scenario_buffer and key in buffer_names):
            environ[key] = value
            exported[key] = value
    # torchrun gives its workers TORCH_NCCL_ASYNC_ERROR_HANDLING=1 where the launching shell
    # has none, and PyTorch's own default is 3: the mode the simulator resolved for the
    # scenario is exported, so that the measured run handles errors as the simulated one
    # (docs/watchdog.md: under 1 the take-down came 0.54-0.78 s later).
    if ERROR_HANDLING_VARIABLE not in exported:
        mode = scenario["env"].get("async_error_handling")
        if mode in ERROR_HANDLING_MODES:
            value = str(ERROR_HANDLING_MODES.index(mode))
            environ[ERROR_HANDLING_VARIABLE] = value
            exported[ERROR_HANDLING_VARIABLE] = value
    # The simulator assumes CUDA's lazy loading (a kernel's first launch waits for the device,
    # R14) unless the scenario says EAGER: a launching shell's own CUDA_MODULE_LOADING must not
    # decide the measured run instead.
    lazy = scenario["env"].get("lazy_module_loading")
    if MODULE_LOADING_VARIABLE not in exported and lazy is not None:
        value = "LAZY" if lazy else "EAGER"
        environ[MODULE_LOADING_VARIABLE] = value
        exported[MODULE_LOADING_VARIABLE] = value
    return exported


# The exit status of an exception the interpreter does not expect: distinct from a finding's 1.
UNEXPECTED_EXCEPTION = 3


def fail(message):
    sys.stderr.write("c10dsim.torch: %s\n" % message)
    return 2




def read_scenario(path):
    """The resolved scenario at ``path``; None, said on stderr, where it cannot be read or is
    not one."""
    try:
        with open(path) as handle:
            scenario = json.load(handle)
    except OSError as error:
        fail("cannot read the scenario %s: %s" % (path, error.strerror or error))
        return None
    except ValueError as error:  # not JSON, or not UTF-8
        fail("%s is not a resolved scenario (c10dsim resolve FILE --json): %s" % (path, error))
        return None
    if not isinstance(scenario, dict):
        fail("%s is not a resolved scenario (c10dsim resolve FILE --json): a JSON %s, not an "
             "object" % (path, type(scenario).__name__))
        return None
    missing = [key for key in SCENARIO if key not in scenario]
    wrong = ("it has no %s" % ", ".join(missing) if missing
             else shape_error(scenario, SCENARIO, scenario))
    if wrong is not None:
        fail("%s is not a resolved scenario (c10dsim resolve FILE --json): %s" % (path, wrong))
        return None
    return scenario


def launch_variable(name, default):
    """The launcher's variable ``name`` as a non-negative integer (``default`` where unset);
    ValueError, naming it, where it is not one."""
    text = os.environ.get(name)
    if text is None:
        return default
    digits = text.strip()
    if not (digits.isascii() and digits.isdigit()):
        raise ValueError("%s=%r is not a non-negative integer (torchrun sets RANK, WORLD_SIZE "
                         "and LOCAL_RANK for each process it starts)" % (name, text))
    return int(digits)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m c10dsim.torch", description=__doc__)
    parser.add_argument("scenario", help="resolved scenario (c10dsim resolve FILE --json)")
    parser.add_argument("--out", required=True, help="folder for rank<r>.json")
    parser.add_argument("--world", type=int, default=None,
                        help="processes launched (default: WORLD_SIZE)")
    args = parser.parse_args(argv)
    scenario = read_scenario(args.scenario)
    if scenario is None:
        return 2
    # Made where missing, as `c10dsim run --trace-dir` makes its folder; every rank may try.
    try:
        os.makedirs(args.out, exist_ok=True)
    except OSError as error:
        return fail("--out %s cannot be made a folder (each rank writes rank<r>.json there): %s"
                    % (args.out, error.strerror or error))
    exported = export_environment(scenario, os.environ)
    try:
        rank = launch_variable("RANK", 0)
        world = launch_variable("WORLD_SIZE", 1)
        local_rank = launch_variable("LOCAL_RANK", 0)
    except ValueError as error:
        return fail(str(error))
    if world < 1 or rank >= world:
        return fail("RANK=%d with WORLD_SIZE=%d: the rank must be below the world size"
                    % (rank, world))
    if args.world is not None and args.world != world:
        return fail("launched with WORLD_SIZE=%d, expected --world %d" % (world, args.world))
    if world > scenario["cluster"]["ranks"]:
        return fail("WORLD_SIZE=%d exceeds the scenario's %d ranks" % (
            world, scenario["cluster"]["ranks"]))
    # No torch in the interpreter module: what the scenario asks that PyTorch cannot do is
    # refused here, on a machine without PyTorch too.
    from .interpreter import Interpreter, Refusal, refuse_what_cannot_run, scenario_file

    try:
        refuse_what_cannot_run(scenario, world)
    except Refusal as refusal:
        sets = scenario_file(scenario["path"])[1]
        return fail("%s (the scenario as resolved with %s)" % (refusal, sets) if sets
                    else str(refusal))
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29500")

    try:
        import torch  # after the environment: PyTorch and NCCL read it at import and init
    except ImportError as error:
        return fail("%s cannot import torch (%s): install PyTorch with CUDA"
                    % (sys.executable, error))

    out_path = os.path.join(args.out, "rank%d.json" % rank)
    interpreter = Interpreter(scenario, torch, rank, world, local_rank, out_path)
    interpreter.machine.update(
        torch=torch.__version__,
        nccl=".".join(str(part) for part in torch.cuda.nccl.version()),
        device=torch.cuda.get_device_name(local_rank),
        cuda=torch.version.cuda,
        gpus=torch.cuda.device_count(),
        env=" ".join("%s=%s" % item for item in sorted(exported.items())),
    )
    if world < scenario["cluster"]["ranks"]:
        interpreter.machine["downscale"] = (
            "ranks 0..%d of %d launched; groups hold the launched ranks only"
            % (world - 1, scenario["cluster"]["ranks"]))
    interpreter.setup()
    status = interpreter.run()
    interpreter.finish()
    sys.stdout.flush()
    sys.stderr.flush()
    if status == 0:
        if tears_down_at_the_end(scenario):
            torch.distributed.destroy_process_group()
        return 0
    # After an error the communicators may be aborted or stuck: leave without tearing down.
    os._exit(status)


def tears_down_at_the_end(scenario):
    """Whether the program ends with ``destroy_process_group()`` (the scenario's
    ``destroy_process_group``, default true); without it, ProcessGroupNCCL's destructor tears
    the group down at the interpreter's exit (R31)."""
    return scenario.get("destroy_process_group", True)


def unexpected_exception():
    """An exception that is no finding of the scenario: its traceback, then exit
    UNEXPECTED_EXCEPTION without tearing down (the communicators may be stuck)."""
    traceback.print_exc()
    sys.stderr.write("c10dsim.torch: the interpreter stopped on an exception it does not expect "
                     "(a bug of the interpreter, or of the machine), not a finding of the "
                     "scenario; exit %d\n" % UNEXPECTED_EXCEPTION)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(UNEXPECTED_EXCEPTION)


if __name__ == "__main__":
    try:
        status = main()
    except Exception:
        unexpected_exception()
    sys.exit(status)
