"""Probe: which part of the torchrun launch adds the second after the dump signal?

launch_wait.py (launch_wait.txt) found the take-down 1.000 s after the dump signal when the
interpreter is launched directly and 1.91-2.01 s after it under `c10dsim torch`, both stamped
on arrival, so the launch, not the log clock, makes the difference. This probe runs
scenarios/timeout_dump.toml (TORCH_NCCL_DUMP_ON_TIMEOUT=1, TORCH_FR_BUFFER_SIZE=2000) three
ways, two runs each, alternating, every stderr line stamped on arrival:
`direct`, the interpreter launched directly (its rank 0 hosts the TCPStore in-process);
`agent_store`, launched directly but told, as torchrun tells its workers
(TORCHELASTIC_USE_AGENT_STORE=True), to use a TCPStore another process hosts;
`torchrun`, `python -m torch.distributed.run --standalone` on the same resolved scenario (what
`c10dsim torch` launches). Usage, from the repository root:
python tests/data/torch/probes/launch_store.py C10DSIM OUT_DIR. It drives PyTorch only.
"""

import os
import subprocess
import sys
import time

from fr_off import resolved, run

STORE_PORT = 29517


def with_agent_store(scenario, out_dir, name):
    host = subprocess.Popen([
        sys.executable, "-c",
        "import time, torch.distributed as d\n"
        f"s = d.TCPStore('127.0.0.1', {STORE_PORT}, is_master=True, wait_for_workers=False)\n"
        "time.sleep(120)\n"])
    time.sleep(3)
    os.environ["TORCHELASTIC_USE_AGENT_STORE"] = "True"
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(STORE_PORT)
    try:
        run(scenario, out_dir, name)
    finally:
        for key in ("TORCHELASTIC_USE_AGENT_STORE", "MASTER_ADDR", "MASTER_PORT"):
            del os.environ[key]
        host.kill()
        host.wait()


def through_torchrun(scenario, out_dir, name):
    run(scenario, out_dir, name,
        launcher=["-m", "torch.distributed.run", "--standalone", "--nproc-per-node=1"],
        extra=["--world", "1"])


def main():
    binary, out_dir = sys.argv[1], sys.argv[2]
    os.makedirs(out_dir, exist_ok=True)
    scenario = resolved(binary, 2000)
    for k in (1, 2):
        run(scenario, out_dir, f"direct.run{k}")
        with_agent_store(scenario, out_dir, f"agent_store.run{k}")
        through_torchrun(scenario, out_dir, f"torchrun.run{k}")


if __name__ == "__main__":
    main()
