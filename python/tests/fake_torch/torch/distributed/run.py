"""``python -m torch.distributed.run --standalone --nproc-per-node=N -m MODULE ARGS...``: starts
N processes of MODULE with RANK, WORLD_SIZE and LOCAL_RANK set, one after another; exits with
the first non-zero status."""

import os
import subprocess
import sys


def main(argv):
    nproc = 1
    index = 0
    while argv[index] != "-m":
        if argv[index].startswith("--nproc-per-node="):
            nproc = int(argv[index].split("=", 1)[1])
        index += 1
    command = [sys.executable, "-m"] + argv[index + 1:]
    status = 0
    for rank in range(nproc):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(nproc), LOCAL_RANK=str(rank))
        code = subprocess.call(command, env=env)
        status = status or code
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
