"""Probe: is it torchrun's environment or torchrun's process that adds the second after the dump
signal?

launch_store.py (launch_store.txt) found the take-down 1.000 s after the dump signal when the
interpreter is launched directly, with its own TCPStore or with one another process hosts, and
1.82-1.88 s after it under torchrun. This probe asks torchrun what environment it gives a worker
(`torchrun --no-python env`), then runs scenarios/timeout_dump.toml four ways, two runs each,
alternating, every stderr line stamped on arrival:
`direct`, the interpreter launched directly;
`torchrun_env`, launched directly with every variable torchrun adds or changes, except the ones
naming the store (MASTER_ADDR, MASTER_PORT, TORCHELASTIC_USE_AGENT_STORE: launch_store.py showed
the agent's store is not the cause), so the process hosts its own store as `direct` does;
`torchrun`, `python -m torch.distributed.run --standalone` on the same resolved scenario;
`handling1`, launched directly with the scenario's TORCH_NCCL_ASYNC_ERROR_HANDLING at 1, the
value torchrun gives its workers.
Prints the variables `torchrun_env` sets and, per run, the watchdog's stamps. Usage, from the
repository root: python tests/data/torch/probes/launch_env.py C10DSIM OUT_DIR. It drives
PyTorch only.

Recorded in launch_env.txt: the first three ways ran with the interpreter of 2026-12-06, which
left TORCH_NCCL_ASYNC_ERROR_HANDLING to the launcher; `handling1` ran as a separate call then,
with the variable in the environment. The interpreter now exports the scenario's mode (3 unless
the scenario says otherwise), so `torchrun_env` and `torchrun` now run mode 3 too and should
match `direct`; `handling1` therefore puts the 1 in the scenario's [env].
"""

import json
import os
import subprocess
import sys

from fr_off import resolved, run
from launch_store import through_torchrun

STORE_VARIABLES = ("MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_USE_AGENT_STORE")


def torchrun_environment():
    """The variables torchrun adds to or changes in its worker's environment."""
    printed = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=1",
         "--no-python", "env", "-0"],
        capture_output=True, text=True, check=True).stdout
    worker = dict(entry.split("=", 1) for entry in printed.split("\0") if "=" in entry)
    return {name: value for name, value in sorted(worker.items())
            if os.environ.get(name) != value and name not in STORE_VARIABLES}


def with_environment(scenario, out_dir, name, added):
    saved = {name: os.environ.get(name) for name in added}
    os.environ.update(added)
    try:
        run(scenario, out_dir, name)
    finally:
        for variable, value in saved.items():
            if value is None:
                del os.environ[variable]
            else:
                os.environ[variable] = value


def main():
    binary, out_dir = sys.argv[1], sys.argv[2]
    os.makedirs(out_dir, exist_ok=True)
    added = torchrun_environment()
    for variable, value in added.items():
        print(f"torchrun sets {variable}={value}", flush=True)
    scenario = resolved(binary, 2000)
    tear_down = json.loads(json.dumps(scenario))
    tear_down["env"]["raw"]["TORCH_NCCL_ASYNC_ERROR_HANDLING"] = "1"
    tear_down["env"]["async_error_handling"] = "TearDown"
    for k in (1, 2):
        run(scenario, out_dir, f"direct.run{k}")
        with_environment(scenario, out_dir, f"torchrun_env.run{k}", added)
        through_torchrun(scenario, out_dir, f"torchrun.run{k}")
        run(tear_down, out_dir, f"handling1.run{k}")


if __name__ == "__main__":
    main()
