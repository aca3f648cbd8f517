"""`run --trace-dir` as Holistic Trace Analysis reads it: the folder loads as a multi-rank job
without a warning from HTA's loader, and its communication/computation overlap and critical
path analyses run (docs/timeline-format.md#traces-for-hta-and-perfetto).

Needs HolisticTraceAnalysis (`import hta`, 0.5 wants pandas < 3); .ci/run installs it. Without
it the test skips and says why (`pytest -rs` shows the reason)."""

import logging
import re
import subprocess

import pytest

from conftest import REPO, binary

# HTA logs its own timings at WARNING level ("Parsed … in 0.12 seconds", "leaving
# parse_traces duration=…"); those say nothing about the trace. Any other warning does.
TIMING = re.compile(r"^(Parsed |Overall parsing of |leaving \w+ duration=)")


# HTA's pandas calls raise FutureWarnings of pandas' own; they are not the trace's.
pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")


@pytest.fixture
def hta_trace_analysis():
    trace_analysis = pytest.importorskip(
        "hta.trace_analysis",
        reason="Holistic Trace Analysis is not installed (pip install HolisticTraceAnalysis "
               "'pandas<3'; .ci/run does): the per-rank trace folder is not checked in HTA")
    import pandas
    if int(pandas.__version__.split(".")[0]) >= 3:
        pytest.skip(f"HolisticTraceAnalysis 0.5 does not run on pandas {pandas.__version__} "
                    "(its critical path calls DataFrame.drop with both axis and columns): "
                    "install 'pandas<3'; .ci/run does")
    return trace_analysis


def write_trace_dir(tmp_path, scenario):
    exe = binary()
    if exe is None:
        pytest.skip("no c10dsim binary (target/debug/c10dsim): run `cargo build` first; "
                    ".ci/run does")
    folder = tmp_path / "trace"
    subprocess.run([str(exe), "run", str(REPO / "scenarios" / scenario), "--trace-dir",
                    str(folder)], check=True, capture_output=True, text=True, cwd=REPO)
    return folder


def load(trace_analysis, folder, log_path):
    """TraceAnalysis(trace_dir=folder), with everything HTA logs at WARNING or above collected
    in a file: HTA parses ranks in forked processes, which write to the same file."""
    logger = logging.getLogger("hta")
    handler = logging.FileHandler(log_path)
    handler.setLevel(logging.WARNING)
    handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    logger.addHandler(handler)
    try:
        analysis = trace_analysis.TraceAnalysis(trace_dir=str(folder))
    finally:
        logger.removeHandler(handler)
        handler.close()
    lines = [line for line in log_path.read_text().splitlines() if line.strip()]
    return analysis, lines


def test_the_trace_folder_loads_in_hta_as_an_eight_rank_job(tmp_path, hta_trace_analysis):
    folder = write_trace_dir(tmp_path, "overlap_bench.toml")
    assert sorted(path.name for path in folder.iterdir()) == \
        sorted(f"rank{rank}.pt.trace.json" for rank in range(8))
    analysis, logged = load(hta_trace_analysis, folder, tmp_path / "hta.log")

    warnings = [line for line in logged
                if not TIMING.match(line.split(" ", 1)[1] if " " in line else line)]
    assert warnings == [], warnings
    assert analysis.t.get_ranks() == list(range(8))
    # 25 iterations (repeat = 25), each a ProfilerStep; HTA keeps all but the last.
    assert [int(i) for i in analysis.t.get_iterations(0)] == list(range(24))

    overlap = analysis.get_comm_comp_overlap(visualize=False)
    assert overlap["rank"].tolist() == list(range(8))
    # Of the six all_reduces of an iteration, `none`'s runs under the GEMM: some, not all, of
    # the communication time overlaps computation.
    assert ((overlap["comp_comm_overlap_pctg"] > 0) &
            (overlap["comp_comm_overlap_pctg"] < 100)).all(), overlap

    graph, succeeded = analysis.critical_path_analysis(
        rank=3, annotation="ProfilerStep", instance_id=1)
    assert succeeded
    summary = graph.summary()
    assert summary.sum() == pytest.approx(100, abs=0.5), summary
    assert summary.get("gpu_compute_bound", 0) > 0, summary
