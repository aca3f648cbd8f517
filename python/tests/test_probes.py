"""The probes' logic that needs no GPU: warmth_probe.py's `--pool`, which docs/torch.md's
host-warmth table comes from, read back from the committed runs."""

import json
import re
import statistics
import subprocess
import sys

from conftest import REPO

PROBES = REPO / "tests" / "data" / "torch" / "probes"
RUNS = [PROBES / f"warmth.run{k}.json" for k in (1, 2, 3)]


def pooled_table():
    out = subprocess.run([sys.executable, str(PROBES / "warmth_probe.py"), "--pool",
                          *map(str, RUNS)], capture_output=True, text=True, check=True)
    assert out.stderr == ""
    return out.stdout.splitlines()


def test_pool_prints_the_median_over_every_call_and_the_range_of_the_runs_medians():
    lines = pooled_table()
    header = lines[1].split()
    assert header[0] == "way" and header[1:] == ["0.1", "0.3", "1.0", "3.0", "10.0", "30.0", "100.0"]
    rows = {line.split()[0]: line for line in lines[2:9]}
    assert list(rows) == ["sleep", "spin", "sync", "item", "wait", "launch", "pooled"]
    trials = [json.load(open(path))["trials"] for path in RUNS]
    for way in ("sleep", "pooled"):
        cells = re.findall(r"(\d+) \(\s*(\d+)-\s*(\d+)\)", rows[way])
        assert len(cells) == 7
        for (median, low, high), gap_ms in zip(cells, [0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0]):
            calls = [[t["call_ns"] / 1e3 for t in run
                      if way in ("pooled", t["way"]) and t["gap_ms"] == gap_ms] for run in trials]
            assert all(len(c) == 12 * (6 if way == "pooled" else 1) for c in calls)
            assert int(median) == round(statistics.median(sum(calls, [])))
            medians = [statistics.median(c) for c in calls]
            assert (int(low), int(high)) == (round(min(medians)), round(max(medians)))


def test_pool_then_prints_each_runs_own_table_and_the_record_holds_the_same():
    lines = pooled_table()
    for path in RUNS:
        assert f"{path}:" in lines
    assert sum(line.startswith("tight ") for line in lines) == 3
    # Each record holds, between its header and its reading, exactly what --pool prints.
    for name in ("warmth", "warmth_c10d", "warmth_tail"):
        runs = [f"{name}.run{k}.json" for k in (1, 2, 3)]
        printed = subprocess.run([sys.executable, "warmth_probe.py", "--pool", *runs],
                                 cwd=PROBES, capture_output=True, text=True, check=True).stdout
        record = (PROBES / f"{name}.txt").read_text()
        head, _, tail = record.partition(printed)
        assert tail, name
        assert printed not in tail and "\ntight " not in head and "\ntight " not in tail, name


def test_fr_off_stamps_each_stderr_line_on_arrival_and_finds_the_first_of_each_marker(tmp_path):
    sys.path.insert(0, str(PROBES))
    try:
        import fr_off
    finally:
        sys.path.remove(str(PROBES))
    script = ("import sys, time\n"
              "print('Watchdog caught collective operation timeout: A', file=sys.stderr, flush=True)\n"
              "time.sleep(0.5)\n"
              "print('First PG on this rank to signal dumping.', file=sys.stderr, flush=True)\n"
              "print('Watchdog caught collective operation timeout: B', file=sys.stderr)\n"
              "sys.exit(3)\n")
    log = tmp_path / "x.log"
    status, stamped = fr_off.stamp([sys.executable, "-c", script], None, str(log))
    assert status == 3
    assert [line for _, line in stamped][1] == "First PG on this rank to signal dumping."
    # Stamped on arrival, not at the end: half the child's pause at least, whatever this
    # machine's load delays one read by.
    assert stamped[1][0] - stamped[0][0] >= 0.25
    written = log.read_text().splitlines()
    assert len(written) == 3 and written[2].endswith("B")
    assert float(written[1].split()[0]) == round(stamped[1][0], 3)
    found = fr_off.marks(stamped).split()
    assert found[0] == "timeout" and found[2] == "signal"
    assert float(found[1]) == round(stamped[0][0], 3)
    assert len(found) == 4
