//! The summaries a summarised run keeps instead of every record (`run --summary`,
//! docs/timeline-format.md#summaries): exact per-op distributions, the records selection, how
//! the ranks ended. Part of the Timeline's wire format.

use super::{ExitStatus, OpRef};
use serde::{Deserialize, Serialize};

/// Which records a summarised run keeps whole (`--records-for ranks=0,3 iterations=0-2`): those
/// of the named ranks in the named iterations; a list left out names every rank (iteration).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordSelection {
    /// Inclusive ranges of ranks; `None`: every rank.
    pub ranks: Option<Vec<(u32, u32)>>,
    /// Inclusive ranges of iterations; `None`: every iteration.
    pub iterations: Option<Vec<(u32, u32)>>,
}

impl RecordSelection {
    /// Parses `ranks=0,3,7 iterations=0-2,99` (either part may be left out, in any order;
    /// `none` keeps no record). The message names the part that is wrong.
    pub fn parse(text: &str) -> Result<RecordSelection, String> {
        let text = text.trim();
        if text == "none" {
            return Ok(RecordSelection {
                ranks: Some(Vec::new()),
                iterations: Some(Vec::new()),
            });
        }
        let mut selection = RecordSelection::default();
        if text.is_empty() {
            return Err("expected ranks=LIST and/or iterations=LIST (e.g. ranks=0,3 iterations=0-2), or none".into());
        }
        for part in text.split_whitespace() {
            let (key, list) = part.split_once('=').ok_or_else(|| {
                format!("{part:?}: expected ranks=LIST or iterations=LIST (e.g. ranks=0-3,7)")
            })?;
            let parsed: Vec<(u32, u32)> = crate::ranks::parse_ranges(list)
                .map_err(|error| format!("{key}: {error}"))?
                .into_iter()
                .map(|range| (*range.start(), *range.end()))
                .collect();
            let slot = match key {
                "ranks" => &mut selection.ranks,
                "iterations" => &mut selection.iterations,
                other => {
                    return Err(format!(
                        "{other:?} is not a part of --records-for; the parts are ranks= and iterations="
                    ))
                }
            };
            if slot.is_some() {
                return Err(format!("{key}= is given twice"));
            }
            *slot = Some(parsed);
        }
        Ok(selection)
    }

    /// True when no record is kept (`none`, or an empty list of ranks or iterations).
    pub fn keeps_none(&self) -> bool {
        [&self.ranks, &self.iterations]
            .iter()
            .any(|ranges| ranges.as_ref().is_some_and(Vec::is_empty))
    }

    /// True when the records of `rank` are kept for some iteration.
    pub fn keeps_rank(&self, rank: u32) -> bool {
        in_ranges(self.ranks.as_deref(), rank)
    }

    /// True when the records of `rank` in `iteration` are kept.
    pub fn keeps(&self, rank: u32, iteration: u32) -> bool {
        self.keeps_rank(rank) && in_ranges(self.iterations.as_deref(), iteration)
    }
}

fn in_ranges(ranges: Option<&[(u32, u32)]>, value: u32) -> bool {
    ranges.is_none_or(|ranges| {
        ranges
            .iter()
            .any(|&(low, high)| (low..=high).contains(&value))
    })
}

/// A distribution of durations in nanoseconds, exact: `values` holds every distinct value with
/// its count, from which the report takes its medians; the other fields are read from it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Distribution {
    pub count: u64,
    pub min_ns: i64,
    /// Nearest-rank percentiles (the report's median of an even count is the mean of the
    /// middle two, taken from `values`).
    pub p50_ns: i64,
    pub p90_ns: i64,
    pub max_ns: i64,
    pub mean_ns: f64,
    /// `[value_ns, count]`, ascending.
    pub values: Vec<(i64, u64)>,
}

impl Distribution {
    /// The distribution of `(value, count)` pairs in ascending order of value.
    pub fn from_counts(values: Vec<(i64, u64)>) -> Distribution {
        let count: u64 = values.iter().map(|&(_, c)| c).sum();
        if count == 0 {
            return Distribution::default();
        }
        let sum: f64 = values.iter().map(|&(v, c)| v as f64 * c as f64).sum();
        let distribution = Distribution {
            count,
            min_ns: values[0].0,
            p50_ns: 0,
            p90_ns: 0,
            max_ns: values[values.len() - 1].0,
            mean_ns: sum / count as f64,
            values,
        };
        Distribution {
            p50_ns: distribution.nearest_rank(0.5),
            p90_ns: distribution.nearest_rank(0.9),
            ..distribution
        }
    }

    /// The `k`-th smallest value (from 0); `k < count`.
    pub fn nth(&self, k: u64) -> i64 {
        let mut seen = 0;
        for &(value, count) in &self.values {
            seen += count;
            if k < seen {
                return value;
            }
        }
        self.max_ns
    }

    /// Nearest-rank percentile, as `analysis::metrics` takes it from sorted samples.
    pub fn nearest_rank(&self, fraction: f64) -> i64 {
        let rank = (fraction * self.count as f64).ceil() as u64;
        self.nth(rank.clamp(1, self.count.max(1)) - 1)
    }
}

/// A collective op's records over every rank and measured iteration (R3).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CollectiveSummary {
    pub op: OpRef,
    pub bytes: u64,
    pub async_op: bool,
    /// How many ranks have measured records of it: the members of its group that ran it, which
    /// the report says its figures are over (0 in a Timeline written before the field).
    #[serde(default)]
    pub ranks: u32,
    /// How many (rank, measured iteration) pairs have a completed call of it: `ranks` × the
    /// measured iterations, fewer where a call never completed or a rank never reached it (0 in
    /// a Timeline written before the field: read as every one).
    #[serde(default)]
    pub rank_iterations: u64,
    /// `host_end_ns − host_start_ns`.
    pub host_call: Distribution,
    /// The `wait()`'s host duration (explicit waits only).
    pub wait: Distribution,
    /// As `analysis::metrics`'s `stream_interval_us`.
    pub stream_interval: Distribution,
    /// `end_ns − kernel_start_ns`.
    pub kernel: Distribution,
    /// `end_ns − data_start_ns`: the data moving once the last rank arrived (R16, R24).
    pub data: Distribution,
    /// `data_start_ns − kernel_start_ns`: spinning for late ranks (R16), over every rank but
    /// the one that arrived last (`analysis::metrics`'s `spin_us`); in a group of one rank, its
    /// own.
    pub spin: Distribution,
    /// Records with a wait (explicit or implicit), and those whose Work was complete when the
    /// wait returned (R3 `completed_at_wait`).
    pub waits: u64,
    pub completed_at_return: u64,
    /// `[rank, times it arrived last]`, by rank.
    pub last_ranks: Vec<(u32, u64)>,
}

/// The compute and sleep kernels of an op.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KernelSummary {
    pub op: OpRef,
    pub kernel: Distribution,
    /// Launch to start.
    pub queued: Distribution,
}

/// A named measure's samples, and per rank its median (the overlaps take those).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MeasureSummary {
    pub name: String,
    pub values: Distribution,
    /// Samples > 0.
    pub positive: u64,
    /// Per rank with samples, the median of its samples in µs, as `[rank, median_us]`.
    pub rank_medians_us: Vec<(u32, f64)>,
}

/// `is_completed()` calls of an op.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuerySummary {
    pub op: OpRef,
    pub calls: u64,
    pub completed: u64,
}

/// The ranks that ended one way.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EndClass {
    pub status: ExitStatus,
    /// As ranges, `0-6,8`.
    pub ranks: String,
    pub count: u64,
}

/// Every record of a run folded into distributions, as it ran (`run --summary`,
/// docs/timeline-format.md#summaries). Over every rank; durations over the measured
/// iterations (from `warmup` on), as the R3 report takes them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TimelineSummary {
    pub records_for: RecordSelection,
    pub collectives: Vec<CollectiveSummary>,
    pub kernels: Vec<KernelSummary>,
    pub measures: Vec<MeasureSummary>,
    pub queries: Vec<QuerySummary>,
    /// The highest peaks of any rank.
    pub memory: crate::allocator::MemoryPeaks,
    /// Allocations that released the cache, all ranks.
    pub cache_releases: u64,
    /// Those of them that waited for the device to drain (R20; none under expandable segments).
    #[serde(default)]
    pub cache_release_stalls: u64,
    pub ends: Vec<EndClass>,
}

impl Distribution {
    /// An error when the distribution contradicts itself: `values` not strictly ascending, a
    /// value counted zero times, or counts that do not add up to `count`.
    fn check(&self, what: &str) -> Result<(), String> {
        let mut total = 0u64;
        for (position, &(value, count)) in self.values.iter().enumerate() {
            if count == 0 {
                return Err(format!("{what}: value {value} is counted 0 times"));
            }
            if position > 0 && self.values[position - 1].0 >= value {
                return Err(format!("{what}: values are not in ascending order"));
            }
            total = total
                .checked_add(count)
                .ok_or_else(|| format!("{what}: counts overflow"))?;
        }
        if total != self.count {
            return Err(format!(
                "{what}: count is {} but its values are counted {total} times",
                self.count
            ));
        }
        Ok(())
    }
}

impl TimelineSummary {
    /// An error naming the first record that refers to an op the Timeline does not have
    /// (`ops` of them), a rank not below `ranks`, or whose counts contradict each other: a
    /// damaged file would otherwise index out of range or divide by zero in the report.
    pub fn check_references(&self, ops: usize, ranks: u32) -> Result<(), String> {
        let op = |what: &str, position: usize, index: OpRef| {
            if (index as usize) < ops {
                Ok(())
            } else {
                Err(format!(
                    "summary.{what}[{position}]: op {index} is out of range (the Timeline has {ops})"
                ))
            }
        };
        for (position, collective) in self.collectives.iter().enumerate() {
            op("collectives", position, collective.op)?;
            let at = |field: &str| format!("summary.collectives[{position}].{field}");
            for (field, distribution) in [
                ("host_call", &collective.host_call),
                ("wait", &collective.wait),
                ("stream_interval", &collective.stream_interval),
                ("kernel", &collective.kernel),
                ("data", &collective.data),
                ("spin", &collective.spin),
            ] {
                distribution.check(&at(field))?;
            }
            if collective.completed_at_return > collective.waits {
                return Err(format!(
                    "{}: {} of {} waits",
                    at("completed_at_return"),
                    collective.completed_at_return,
                    collective.waits
                ));
            }
            if collective.ranks > ranks {
                return Err(format!(
                    "{}: {} ranks (the Timeline has {ranks})",
                    at("ranks"),
                    collective.ranks
                ));
            }
            for &(rank, count) in &collective.last_ranks {
                if rank >= ranks || count == 0 {
                    return Err(format!(
                        "{}: rank {rank} counted {count} times (the Timeline has {ranks} ranks)",
                        at("last_ranks")
                    ));
                }
            }
        }
        for (position, kernel) in self.kernels.iter().enumerate() {
            op("kernels", position, kernel.op)?;
            kernel
                .kernel
                .check(&format!("summary.kernels[{position}].kernel"))?;
            kernel
                .queued
                .check(&format!("summary.kernels[{position}].queued"))?;
        }
        for (position, measure) in self.measures.iter().enumerate() {
            let at = format!("summary.measures[{position}]");
            measure.values.check(&at)?;
            if measure.positive > measure.values.count {
                return Err(format!(
                    "{at}: {} of {} values positive",
                    measure.positive, measure.values.count
                ));
            }
        }
        for (position, query) in self.queries.iter().enumerate() {
            op("queries", position, query.op)?;
            if query.calls == 0 || query.completed > query.calls {
                return Err(format!(
                    "summary.queries[{position}]: {} of {} calls completed",
                    query.completed, query.calls
                ));
            }
        }
        Ok(())
    }
}
