"""The binary's outputs as other tools read them: the sweep CSV and `bench`'s scaling CSV in
pandas (numeric sizes and unit columns), and `run --nccl-tests` parsed the way scripts parse nccl-tests' all_reduce_perf."""

import subprocess

import pytest

from conftest import REPO, binary


def run_binary(*args):
    exe = binary()
    if exe is None:
        pytest.skip("no c10dsim binary (target/debug/c10dsim): run `cargo build` first; "
                    ".ci/run does")
    return subprocess.run([str(exe), *args], check=True, capture_output=True, text=True,
                          cwd=REPO)


def test_the_sweep_csv_loads_in_pandas_with_numeric_sizes(tmp_path):
    pandas = pytest.importorskip(
        "pandas", reason="pandas is not installed: the CSV's numeric columns are checked by "
                         "tests/e2e/sweep.rs instead")
    out = tmp_path / "exp_a.csv"
    run_binary("sweep", "scenarios/exp_a_sweep.toml", "-o", str(out))
    frame = pandas.read_csv(out, dtype={"scenario_hash": str})
    assert frame["tensors.x_bytes"].dtype.kind == "i"
    assert sorted(frame["tensors.x_bytes"].unique()) == [1024, 1 << 20, 64 << 20, 256 << 20]
    for column in frame.columns:
        if column.endswith(("_us", "_bytes", "_share", ".overlap")) or \
                column.startswith("findings") or column in ("point", "seed", "sweep_points"):
            assert frame[column].dtype.kind in "iuf", (column, frame[column].dtype)
    ordered = frame.sort_values("tensors.x_bytes")["tensors.x"].drop_duplicates().tolist()
    assert ordered == ["1KiB", "1MiB", "64MiB", "256MiB"]


def test_the_bench_scaling_csv_loads_in_pandas_with_numeric_columns(tmp_path):
    pandas = pytest.importorskip(
        "pandas", reason="pandas is not installed: the scaling CSV's columns are checked by "
                         "tests/e2e/summary.rs instead")
    out = tmp_path / "scaling.csv"
    run_binary("bench", "--scaling", "2,4", "--iterations", "3", "-o", str(out))
    frame = pandas.read_csv(out)
    assert frame["ranks"].tolist() == [2, 4]
    assert frame["summary"].dtype.kind == "b" and frame["fold"].dtype.kind == "b"
    for column in frame.columns.drop(["summary", "fold"]):
        assert frame[column].dtype.kind in "iuf", (column, frame[column].dtype)
    assert (frame["events"] > 0).all() and (frame["peak_memory_mib"] > 1).all()


def parse_nccl_tests(text):
    """As scripts parse all_reduce_perf's output: skip '#' lines, split data lines on
    whitespace; the first columns are size, count, type, redop, root, then out-of-place
    time/algbw/busbw/#wrong and in-place time/algbw/busbw/#wrong; the footer gives the average
    bus bandwidth."""
    rows, average = [], None
    for line in text.splitlines():
        if line.startswith("# Avg bus bandwidth"):
            average = float(line.split(":")[1].split()[0])
            continue
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        fields = line.split()
        rows.append({
            "size": int(fields[0]), "count": int(fields[1]), "type": fields[2],
            "redop": fields[3], "root": int(fields[4]),
            "oop_time": float(fields[5]), "oop_algbw": float(fields[6]),
            "oop_busbw": float(fields[7]), "oop_wrong": fields[8],
            "ip_time": float(fields[9]), "ip_algbw": float(fields[10]),
            "ip_busbw": float(fields[11]), "ip_wrong": fields[12],
        })
    return rows, average


def test_nccl_tests_output_parses_like_all_reduce_perf():
    # stdout is the table alone, as all_reduce_perf's: the whole of it is parsed.
    text = run_binary("run", "scenarios/nccl_tests_all_reduce.toml", "--nccl-tests").stdout
    rows, average = parse_nccl_tests(text)
    assert len(rows) > 20
    sizes = [row["size"] for row in rows]
    assert sizes == sorted(sizes)
    for row in rows:
        assert row["type"] == "float" and row["redop"] == "sum" and row["root"] == -1
        assert row["count"] * 4 == row["size"]
        # No data is checked: nccl-tests prints N/A for #wrong then (-c 0).
        assert row["oop_wrong"] == "N/A" and row["ip_wrong"] == "N/A"
        assert row["oop_time"] > 0 and row["oop_busbw"] >= 0
    assert average is not None
    mean = sum(row["oop_busbw"] for row in rows) / len(rows)
    assert abs(average - mean) < 0.01 + 1e-3 * mean
