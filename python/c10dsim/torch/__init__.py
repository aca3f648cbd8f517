"""Run a resolved c10dsim scenario through real ``torch.distributed`` (docs/torch.md).

``python -m c10dsim.torch SCENARIO.json --out DIR`` under ``torchrun``, one process per GPU:
each process exports the scenario's ``[env]``, imports torch, interprets the scenario's ops for
its rank and writes ``DIR/rank<r>.json``, a Timeline (``source: "torch"``) in the format of
docs/timeline-format.md. ``c10dsim torch FILE`` does all of this and joins the ranks.

Modules: ``timeline`` builds the Timeline's JSON (no torch needed); ``interpreter`` drives
PyTorch; ``__main__`` is the command line. Importing this package imports no torch, so that the
environment can be exported first.
"""
