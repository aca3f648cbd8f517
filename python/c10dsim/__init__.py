"""c10dsim's Python side.

Only one thing lives here: ``c10dsim.torch``, the interpreter that runs a resolved c10dsim
scenario through real ``torch.distributed`` and writes a Timeline (docs/torch.md). The simulator,
the reports and the diffs are the Rust binary's.
"""
