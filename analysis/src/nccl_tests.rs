//! nccl-tests-style results: one row per collective op of the program, with the columns
//! `all_reduce_perf` prints — size, count, type, redop, time, algbw, busbw — plus the algorithm
//! and protocol the kernel ran with (from its name, `…_RING_LL`).
//!
//! Time is the data movement of R16/R24 (from the moment the last rank arrived to the end of
//! the kernel), median over ranks × measured iterations. `algbw = S / t`; `busbw` scales it by
//! the collective's traffic factor as nccl-tests does (doc/PERFORMANCE.md): `2(n−1)/n` for
//! all_reduce, `(n−1)/n` for all_gather and reduce_scatter, 1 for broadcast — so that busbw is
//! comparable to the link's bandwidth whatever n is (R24).
//!
//! Pure: a function of the Timeline.

use crate::metrics::Stat;
use sim::timeline::Timeline;
use std::fmt::Write;

/// One line of the table.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// The op's label (or `key#index`).
    pub op: String,
    pub size_bytes: u64,
    /// Elements of the tensor's type.
    pub count: u64,
    /// nccl-tests' name of the element type (`float`, `bfloat16`, `half`).
    pub type_name: &'static str,
    /// `sum`, or `none` for collectives that do not reduce.
    pub redop: &'static str,
    pub time_us: f64,
    pub algbw_gbps: f64,
    pub busbw_gbps: f64,
    /// Algorithm and protocol from the kernel name (`RING_LL`, `NVLS_SIMPLE`).
    pub algorithm: String,
}

/// The rows, in program order, for every collective op with measured samples.
pub fn rows(timeline: &Timeline) -> Vec<Row> {
    let warmup = timeline.scenario.warmup;
    timeline
        .ops
        .iter()
        .filter_map(|op| {
            let (traffic_word, redop) = match op.key.as_str() {
                "all_reduce" => ("all_reduce", "sum"),
                "reduce_scatter" => ("reduce_scatter", "sum"),
                "all_gather" => ("all_gather", "none"),
                "broadcast" => ("broadcast", "none"),
                _ => return None,
            };
            let records: Vec<_> = timeline
                .ranks
                .iter()
                .flat_map(|rank| rank.collectives.iter())
                .filter(|c| c.op == op.index && c.iteration >= warmup)
                .collect();
            let first = records.first()?;
            let ranks = timeline
                .ranks
                .iter()
                .filter(|rank| rank.collectives.iter().any(|c| c.op == op.index))
                .count() as f64;
            let mut samples_ns: Vec<i64> = records
                .iter()
                .map(|c| (c.end_ns - c.data_start_ns) as i64)
                .collect();
            let time_us = Stat::from_ns(&mut samples_ns)?.median;
            let kernel = op.kernel_name.as_deref().unwrap_or_default();
            let mut words = kernel.rsplitn(4, '_');
            let protocol = words.next().unwrap_or_default();
            let algorithm = words.next().unwrap_or_default();
            let (type_name, element_bytes) = match words.next().unwrap_or_default() {
                "bf16" => ("bfloat16", 2),
                "f16" => ("half", 2),
                _ => ("float", 4),
            };
            let size_bytes = first.bytes;
            let algbw_gbps = size_bytes as f64 / time_us / 1e3;
            let factor = match traffic_word {
                "all_reduce" => 2.0 * (ranks - 1.0) / ranks,
                "broadcast" => 1.0,
                _ => (ranks - 1.0) / ranks,
            };
            Some(Row {
                op: op.name.clone(),
                size_bytes,
                count: size_bytes / element_bytes,
                type_name,
                redop,
                time_us,
                algbw_gbps,
                busbw_gbps: algbw_gbps * factor,
                algorithm: format!("{algorithm}_{protocol}"),
            })
        })
        .collect()
}

/// The table as `all_reduce_perf` prints it (time in µs, bandwidths in GB/s), with the
/// algorithm and protocol in a last column.
pub fn table(timeline: &Timeline) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "#{:>12} {:>13} {:>9} {:>7} {:>10} {:>8} {:>8}  algorithm",
        "size", "count", "type", "redop", "time", "algbw", "busbw"
    );
    let _ = writeln!(
        out,
        "#{:>12} {:>13} {:>9} {:>7} {:>10} {:>8} {:>8}",
        "(B)", "(elements)", "", "", "(us)", "(GB/s)", "(GB/s)"
    );
    for row in rows(timeline) {
        let _ = writeln!(
            out,
            " {:>12} {:>13} {:>9} {:>7} {:>10.2} {:>8.2} {:>8.2}  {}",
            row.size_bytes,
            row.count,
            row.type_name,
            row.redop,
            row.time_us,
            row.algbw_gbps,
            row.busbw_gbps,
            row.algorithm
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
        assert!(
            table.contains("    100000000      25000000     float     sum    1506.00    66.40    99.60  RING_LL"),
            "{table}"
        );
    }
}
