//! nccl-tests-style results: one row per collective op of the program, with the columns
//! `all_reduce_perf` prints — size, count, type, redop, time, algbw, busbw — plus the algorithm
//! and protocol the kernel ran with (from its name, `…_RING_LL`).
//!
//! Time is the data movement of R16/R24 (from the moment the last rank arrived to the end of
//! the kernel), median over ranks × measured iterations; where some of those calls never
//! completed (a hang, a timeout, a process taken down), over the ones that did, and the table
//! says how many. `algbw = S / t`; `busbw` scales it by
//! the collective's traffic factor as nccl-tests does (doc/PERFORMANCE.md): `2(n−1)/n` for
//! all_reduce, `(n−1)/n` for all_gather, reduce_scatter and all_to_all, 1 for broadcast — so
//! that busbw is comparable to the link's bandwidth whatever n is (R24). As nccl-tests prints
//! them, the size is the whole buffer (all_gather's output, reduce_scatter's input, all of
//! all_to_all's) and the count the elements one call is given: one rank's slice for all_gather
//! and reduce_scatter (`all_gather_perf`), one peer's for all_to_all (`alltoall_perf`).
//!
//! Pure: a function of the Timeline.

use crate::metrics::Stat;
use serde::Serialize;
use sim::timeline::Timeline;
use std::fmt::Write;

/// One line of the table.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    /// The op's label (or `key#index`).
    pub op: String,
    /// The collective (`all_reduce`, `all_gather`, `reduce_scatter`, `broadcast`, `all_to_all`).
    pub op_key: &'static str,
    pub size_bytes: u64,
    /// Elements of the tensor's type one call is given, as nccl-tests counts them: the whole
    /// tensor (all_reduce, broadcast), one rank's slice (all_gather, reduce_scatter) or one
    /// peer's (all_to_all).
    pub count: u64,
    /// nccl-tests' name of the element type (`float`, `bfloat16`, `half`).
    pub type_name: &'static str,
    /// `sum`, or `none` for collectives that do not reduce.
    pub redop: &'static str,
    pub time_us: f64,
    pub algbw_gbps: f64,
    pub busbw_gbps: f64,
    /// Algorithm and protocol from the kernel name (`RING_LL`, `NVLS_SIMPLE`); all_to_all's
    /// kernel carries neither, and shows its own name (`SendRecv`).
    pub algorithm: String,
    /// The (rank, measured iteration) pairs whose call completed, which `time_us` is over.
    pub completed_rank_iterations: u64,
    /// The op's ranks × measured iterations: `completed_rank_iterations` falls short of it
    /// where some calls never completed.
    pub rank_iterations: u64,
}

impl Row {
    /// Whether some of the op's calls never completed, so its figures are over fewer.
    pub fn falls_short(&self) -> bool {
        self.completed_rank_iterations < self.rank_iterations
    }
}

/// The rows, in program order, for every collective op with measured samples.
pub fn rows(timeline: &Timeline) -> Vec<Row> {
    let warmup = timeline.scenario.warmup;
    let measured = u64::from(timeline.scenario.repeat - warmup);
    timeline
        .ops
        .iter()
        .filter_map(|op| {
            let (traffic_word, redop) = match op.key.as_str() {
                "all_reduce" => ("all_reduce", "sum"),
                "reduce_scatter" => ("reduce_scatter", "sum"),
                "all_gather" => ("all_gather", "none"),
                "broadcast" => ("broadcast", "none"),
                "all_to_all" => ("all_to_all", "none"),
                _ => return None,
            };
            let records: Vec<_> = timeline
                .ranks
                .iter()
                .flat_map(|rank| rank.collectives.iter().map(move |c| (rank.rank, c)))
                .filter(|(_, c)| c.op == op.index && c.iteration >= warmup)
                .collect();
            let (_, first) = records.first()?;
            // An op called several times per iteration (`count`) counts once per iteration.
            let completed_rank_iterations = records
                .iter()
                .map(|&(rank, c)| (rank, c.iteration))
                .collect::<std::collections::BTreeSet<_>>()
                .len() as u64;
            let ranks = timeline
                .ranks
                .iter()
                .filter(|rank| rank.collectives.iter().any(|c| c.op == op.index))
                .count() as f64;
            let mut samples_ns: Vec<i64> = records
                .iter()
                .map(|(_, c)| (c.end_ns - c.data_start_ns) as i64)
                .collect();
            let time_us = Stat::from_ns(&mut samples_ns)?.median;
            let kernel = op.kernel_name.as_deref().unwrap_or_default();
            let mut words = kernel.rsplitn(4, '_');
            let protocol = words.next().unwrap_or_default();
            let algorithm = words.next().unwrap_or_default();
            let kernel_dtype = words.next().unwrap_or_default();
            let (type_name, element_bytes) = match op.dtype.as_deref().unwrap_or(kernel_dtype) {
                "bf16" => ("bfloat16", 2),
                "f16" => ("half", 2),
                _ => ("float", 4),
            };
            let algorithm = if ["LL", "LL128", "SIMPLE"].contains(&protocol) {
                format!("{algorithm}_{protocol}")
            } else {
                kernel.trim_start_matches("ncclDevKernel_").to_string()
            };
            let size_bytes = first.bytes;
            let algbw_gbps = size_bytes as f64 / time_us / 1e3;
            let (factor, count) = match traffic_word {
                "all_reduce" => (2.0 * (ranks - 1.0) / ranks, size_bytes / element_bytes),
                "broadcast" => (1.0, size_bytes / element_bytes),
                _ => (
                    (ranks - 1.0) / ranks,
                    size_bytes / element_bytes / ranks as u64,
                ),
            };
            Some(Row {
                op: op.name.clone(),
                op_key: traffic_word,
                size_bytes,
                count,
                type_name,
                redop,
                time_us,
                algbw_gbps,
                busbw_gbps: algbw_gbps * factor,
                algorithm,
                completed_rank_iterations,
                rank_iterations: ranks as u64 * measured,
            })
        })
        .collect()
}

/// nccl-tests' `root` column: −1 for collectives without a root; broadcast's root is rank 0
/// (`dist.broadcast`'s usual `src`; scenarios do not name another).
fn root_of(row: &Row) -> i32 {
    if row.op_key == "broadcast" {
        0
    } else {
        -1
    }
}

/// The table as `all_reduce_perf` prints it, so that scripts that parse nccl-tests' output read
/// it: `#` comment lines, then per size the 13 whitespace-separated columns size, count, type,
/// redop, root, and time (µs), algbw, busbw (GB/s), #wrong out of place and again in place, then
/// the `# Out of bounds values` and `# Avg bus bandwidth` footer lines. The simulator does not
/// tell in-place from out-of-place calls (both columns are the same figures) and checks no data
/// (`#wrong` is `N/A`, as nccl-tests prints it with `-c 0`). The algorithm and protocol of
/// each row (`RING_LL`) follow as comment lines; a row some of whose calls never completed
/// says there how many of its ranks × measured iterations its figures are over.
pub fn table(timeline: &Timeline) -> String {
    let rows = rows(timeline);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# c10dsim: simulated {}; in-place = out-of-place (not told apart), no data checked",
        timeline.scenario.name
    );
    if rows.iter().any(Row::falls_short) {
        let _ = writeln!(
            out,
            "# some calls never completed: a row's figures are over the calls that did (see its line below)"
        );
    }
    let _ = writeln!(out, "#");
    let over_columns = format!("#{:>48}{:^32}{:^32}", "", "out-of-place", "in-place");
    let _ = writeln!(out, "{}", over_columns.trim_end());
    let _ = writeln!(
        out,
        "#{:>11} {:>12} {:>8} {:>6} {:>6} {:>8} {:>7} {:>7} {:>6} {:>8} {:>7} {:>7} {:>6}",
        "size",
        "count",
        "type",
        "redop",
        "root",
        "time",
        "algbw",
        "busbw",
        "#wrong",
        "time",
        "algbw",
        "busbw",
        "#wrong"
    );
    let units = format!(
        "#{:>11} {:>12} {:>8} {:>6} {:>6} {:>8} {:>7} {:>7} {:>6} {:>8} {:>7} {:>7}",
        "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)"
    );
    let _ = writeln!(out, "{units}");
    for row in &rows {
        let measured = format!(
            "{:>8.2} {:>7.2} {:>7.2} {:>6}",
            row.time_us, row.algbw_gbps, row.busbw_gbps, "N/A"
        );
        let _ = writeln!(
            out,
            " {:>11} {:>12} {:>8} {:>6} {:>6} {measured} {measured}",
            row.size_bytes,
            row.count,
            row.type_name,
            row.redop,
            root_of(row),
        );
    }
    let average = if rows.is_empty() {
        0.0
    } else {
        rows.iter().map(|row| row.busbw_gbps).sum::<f64>() / rows.len() as f64
    };
    let _ = writeln!(out, "# Out of bounds values : 0 OK");
    let _ = writeln!(out, "# Avg bus bandwidth    : {average:.4} ");
    let _ = writeln!(out, "#");
    let _ = writeln!(out, "# algorithm and protocol per row (c10dsim):");
    for row in &rows {
        let ran = if row.falls_short() {
            format!(
                " (over the {} of {} rank-iterations whose call completed)",
                row.completed_rank_iterations, row.rank_iterations
            )
        } else {
            String::new()
        };
        let _ = writeln!(
            out,
            "# {:>11} {} {}{ran}",
            row.size_bytes, row.op, row.algorithm
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ring_all_reduce_row_follows_r24() {
        // 4 ranks, α-β ring (NVLink 100 GB/s, α = 1 µs), 100 MB of f32:
        // t = 6·1 µs + 2·3/4 · 1e8 B / 1e11 B/s = 6 µs + 1500 µs = 1506 µs;
        // algbw = 1e8 B / 1506 µs = 66.40 GB/s; busbw = algbw · 2·3/4 = 99.60 GB/s.
        let text = "repeat = 3\nwarmup = 1\n[cluster]\nranks = 4\n\
                    [network]\nnvlink_gbps = 100\nalpha_us = 1\n\
                    [groups.world]\neager_init = true\n[tensors]\nx = \"100MB\"\n\
                    [[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\n[[op]]\ngemm = [64, 64, 64]\n";
        let scenario = sim::scenario::parse("t.toml", text).unwrap();
        let timeline = sim::engine::simulate(&scenario);
        let rows = rows(&timeline);
        assert_eq!(rows.len(), 1, "the GEMM is no collective");
        let row = &rows[0];
        assert_eq!(
            (row.op.as_str(), row.size_bytes, row.count),
            ("ar", 100_000_000, 25_000_000)
        );
        assert_eq!(
            (row.type_name, row.redop, row.algorithm.as_str()),
            ("float", "sum", "RING_LL")
        );
        assert!((row.time_us - 1506.0).abs() < 1e-9, "{}", row.time_us);
        assert!((row.algbw_gbps - 66.401).abs() < 1e-3, "{}", row.algbw_gbps);
        assert!((row.busbw_gbps - 99.602).abs() < 1e-3, "{}", row.busbw_gbps);
        let table = table(&timeline);
        assert!(table.contains("(elements)"), "{table}");
        let data: Vec<&str> = table.lines().filter(|l| !l.starts_with('#')).collect();
        assert_eq!(
            data,
            ["   100000000     25000000    float    sum     -1  1506.00   66.40   99.60    N/A  1506.00   66.40   99.60    N/A"],
            "{table}"
        );
        assert!(
            table.contains("\n# Avg bus bandwidth    : 99.6016 \n"),
            "{table}"
        );
        assert!(table.contains("\n#   100000000 ar RING_LL\n"), "{table}");
    }

    #[test]
    fn a_row_whose_later_calls_never_completed_says_how_many_its_time_is_over() {
        let timeline = crate::test_scenarios::backlog_then_hang();
        let row = &rows(&timeline)[0];
        assert_eq!((row.completed_rank_iterations, row.rank_iterations), (2, 4));
        let rendered = table(&timeline);
        assert!(
            rendered.contains("\n#    26214400 ar RING_LL (over the 2 of 4 rank-iterations whose call completed)\n"),
            "{rendered}"
        );
        assert!(
            rendered.contains("# some calls never completed"),
            "{rendered}"
        );
        // Every call completed: the table as before.
        let timeline = crate::test_scenarios::backlog_every_call_completes();
        assert_eq!(rows(&timeline)[0].completed_rank_iterations, 4);
        let rendered = table(&timeline);
        assert!(
            rendered.contains("\n#    26214400 ar RING_LL\n"),
            "{rendered}"
        );
        assert!(!rendered.contains("never completed"), "{rendered}");
    }

    #[test]
    fn gather_and_scatter_rows_count_one_ranks_slice_as_nccl_tests_does() {
        // all_gather_perf and reduce_scatter_perf print the whole buffer as size and what one
        // rank passes NCCL as count (src/all_gather.cu, src/reduce_scatter.cu: `paramcount`).
        let text = "repeat = 2\nwarmup = 1\n[cluster]\nranks = 4\n\
                    [groups.world]\neager_init = true\n\
                    [tensors]\nx = { size = \"8MiB\", dtype = \"bf16\" }\n\
                    [[op]]\nlabel = \"ag\"\nall_gather = \"x\"\n\
                    [[op]]\nlabel = \"rs\"\nreduce_scatter = \"x\"\n\
                    [[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\n\
                    [[op]]\nlabel = \"bc\"\nbroadcast = \"x\"\n";
        let scenario = sim::scenario::parse("t.toml", text).unwrap();
        let rows = rows(&sim::engine::simulate(&scenario));
        let counts: Vec<(&str, u64, u64)> = rows
            .iter()
            .map(|row| (row.op.as_str(), row.size_bytes, row.count))
            .collect();
        let elements = 8 * 1024 * 1024 / 2;
        assert_eq!(
            counts,
            [
                ("ag", 2 * elements, elements / 4),
                ("rs", 2 * elements, elements / 4),
                ("ar", 2 * elements, elements),
                ("bc", 2 * elements, elements),
            ]
        );
    }

    #[test]
    fn sliced_collectives_count_one_ranks_elements_as_nccl_tests_does() {
        // 4 ranks, α-β ring (NVLink 100 GB/s, α = 1 µs), 8 MB of bf16: all_gather,
        // reduce_scatter and all_to_all take 3·1 µs + 3/4 · 8e6 B / 1e11 B/s = 63 µs;
        // algbw = 8e6 B / 63 µs = 126.98 GB/s, busbw = algbw · 3/4 = 95.24 GB/s. The size is
        // the whole buffer, the count one rank's (one peer's) slice: 4e6 elements / 4.
        let text = "repeat = 2\nwarmup = 1\n[cluster]\nranks = 4\n\
                    [network]\nnvlink_gbps = 100\nalpha_us = 1\n\
                    [groups.world]\neager_init = true\n\
                    [tensors]\nx = { size = \"8MB\", dtype = \"bf16\" }\n\
                    [[op]]\nall_gather = \"x\"\n[[op]]\nreduce_scatter = \"x\"\n\
                    [[op]]\nall_to_all = \"x\"\n";
        let scenario = sim::scenario::parse("t.toml", text).unwrap();
        let rows = rows(&sim::engine::simulate(&scenario));
        let keys: Vec<_> = rows.iter().map(|row| row.op_key).collect();
        assert_eq!(keys, ["all_gather", "reduce_scatter", "all_to_all"]);
        for row in &rows {
            assert_eq!(
                (row.size_bytes, row.count, row.type_name),
                (8_000_000, 1_000_000, "bfloat16"),
                "{row:?}"
            );
            assert!((row.time_us - 63.0).abs() < 1e-9, "{row:?}");
            assert!((row.busbw_gbps - 95.238).abs() < 1e-3, "{row:?}");
        }
        assert_eq!(rows[2].redop, "none");
        assert_eq!(rows[2].algorithm, "SendRecv");
    }
}
