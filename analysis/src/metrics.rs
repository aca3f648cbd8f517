//! The R3 metrics and the scenario's named measures, computed from a Timeline.
//!
//! Every figure is taken over the measured samples: all ranks, iterations from `warmup` on. A
//! folded Timeline's records stand for several ranks each (docs/scale.md): they count as many
//! samples as ranks, so the report is the unfolded run's without expanding it.
//!
//! About 880 lines, 90 of them tests: the full records' and the summaries' paths
//! fill one [`Report`] and are kept side by side so that the two stay the same report.

use serde::{Deserialize, Serialize};
use sim::timeline::{
    Distribution, Finding, KernelClass, Source, Timeline, TimelineSummary, WatchdogRecord,
};
use std::collections::HashMap;

/// Summary of a set of samples, in microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Stat {
    pub median: f64,
    pub p10: f64,
    pub p90: f64,
    pub min: f64,
    pub max: f64,
    pub samples: usize,
}

impl Stat {
    /// Summarises samples in nanoseconds (signed: a measure between two marks can be
    /// negative when the later mark's event fired first); `None` when there are none.
    pub fn from_ns(samples_ns: &mut [i64]) -> Option<Stat> {
        if samples_ns.is_empty() {
            return None;
        }
        samples_ns.sort_unstable();
        let us = |ns: i64| ns as f64 / 1_000.0;
        Some(Stat {
            median: median_sorted(samples_ns),
            p10: us(percentile_sorted(samples_ns, 0.10)),
            p90: us(percentile_sorted(samples_ns, 0.90)),
            min: us(samples_ns[0]),
            max: us(samples_ns[samples_ns.len() - 1]),
            samples: samples_ns.len(),
        })
    }
}

impl Stat {
    /// Summarises samples in nanoseconds, each counted `weight` times: the same as
    /// [`Stat::from_ns`] over the samples repeated.
    pub fn from_weighted_ns(samples_ns: &mut [(i64, u64)]) -> Option<Stat> {
        samples_ns.sort_unstable();
        let total: u64 = samples_ns.iter().map(|&(_, weight)| weight).sum();
        if total == 0 {
            return None;
        }
        let nth = |index: u64| -> i64 {
            let mut seen = 0;
            for &(value, weight) in samples_ns.iter() {
                seen += weight;
                if index < seen {
                    return value;
                }
            }
            unreachable!("the index is below the total weight")
        };
        let us = |ns: i64| ns as f64 / 1_000.0;
        let percentile = |fraction: f64| {
            let rank = (fraction * total as f64).ceil() as u64;
            nth(rank.clamp(1, total) - 1)
        };
        let median = if total % 2 == 1 {
            nth(total / 2) as f64 / 1_000.0
        } else {
            (nth(total / 2 - 1) as f64 + nth(total / 2) as f64) / 2_000.0
        };
        Some(Stat {
            median,
            p10: us(percentile(0.10)),
            p90: us(percentile(0.90)),
            min: us(samples_ns[0].0),
            max: us(samples_ns[samples_ns.len() - 1].0),
            samples: total as usize,
        })
    }

    /// The same figures from an exact distribution (a summarised Timeline's); `None` when it
    /// holds no sample.
    pub fn from_distribution(values: &Distribution) -> Option<Stat> {
        if values.count == 0 {
            return None;
        }
        let us = |ns: i64| ns as f64 / 1_000.0;
        let n = values.count;
        let median = if n % 2 == 1 {
            us(values.nth(n / 2))
        } else {
            (values.nth(n / 2 - 1) as f64 + values.nth(n / 2) as f64) / 2_000.0
        };
        Some(Stat {
            median,
            p10: us(values.nearest_rank(0.10)),
            p90: us(values.nearest_rank(0.90)),
            min: us(values.min_ns),
            max: us(values.max_ns),
            samples: n as usize,
        })
    }
}

/// Median of sorted nanosecond samples, in microseconds (mean of the middle two for an even
/// count).
fn median_sorted(sorted: &[i64]) -> f64 {
    let n = sorted.len();
    if n % 2 == 1 {
        sorted[n / 2] as f64 / 1_000.0
    } else {
        (sorted[n / 2 - 1] as f64 + sorted[n / 2] as f64) / 2_000.0
    }
}

/// Nearest-rank percentile of sorted samples.
fn percentile_sorted(sorted: &[i64], fraction: f64) -> i64 {
    let rank = (fraction * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// R3 figures of one collective op of the program.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CollectiveMetrics {
    /// The op's label (or `key#index`).
    pub op: String,
    pub line: u32,
    pub key: String,
    pub bytes: u64,
    pub async_op: bool,
    /// How many ranks the figures are over: those with a measured record of it (a subgroup's
    /// members only; a folded class counts as its size).
    pub ranks: u32,
    /// How many (rank, measured iteration) pairs the figures are over: `ranks` × the measured
    /// iterations, fewer where a call never completed (an unfinished record) or a rank never
    /// reached it (a hang, a process taken down).
    pub rank_iterations: u64,
    /// Host time of the call (R3 `host_call_us`).
    pub host_call_us: Stat,
    /// Host time of the `wait()` on its Work, when there is one.
    pub wait_us: Option<Stat>,
    /// From the input-ready point on the calling stream to the point from which work issued
    /// on the consuming stream after the wait returned can run: the stream's release, or the
    /// wait's host return where that is later (R3 `stream_interval_us`; a GPU event recorded
    /// after `wait()` returns, which is what PyTorch can observe, reads the same).
    pub stream_interval_us: Stat,
    /// The NCCL kernel, start to end (includes spinning for late ranks, R16).
    pub kernel_us: Stat,
    /// Fraction of waits after which `is_completed()` was already true (R3
    /// `completed_at_wait`).
    pub completed_at_wait: Option<f64>,
    /// Time each kernel spun before the last rank arrived (R16): the wait a late rank imposed,
    /// over every rank but the one that arrived last (its own kernel waits for none but itself:
    /// counting it would pull the median down the more, the fewer ranks wait, docs/semantics.md
    /// R16); in a group of one rank, that rank's own.
    pub spin_us: Stat,
    /// The rank that arrived last most often (ties: the lowest), where known.
    pub last_rank: Option<u32>,
    /// Share of samples in which `last_rank` was the last to arrive.
    pub last_rank_share: f64,
}

/// Durations of the compute and sleep kernels an op launches.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KernelMetrics {
    pub op: String,
    pub line: u32,
    pub key: String,
    /// Start to end on the GPU (longer when it shared the SMs, R22).
    pub kernel_us: Stat,
    /// Launch to start: stream predecessors, event waits and waiting for SMs.
    pub queued_us: Stat,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MeasureValue {
    pub name: String,
    pub clock: String,
    pub value_us: Stat,
    /// Share of samples > 0: how often the `to` mark came after the `from` mark.
    pub positive_fraction: f64,
}

/// One R3 overlap figure.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OverlapValue {
    pub name: String,
    /// `(t_compute + t_comm − t_both) / min(t_compute, t_comm)`, the median over ranks of each
    /// rank's figure from its own medians.
    pub overlap: f64,
    pub compute_us: f64,
    pub comm_us: f64,
    pub both_us: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QueryMetrics {
    pub op: String,
    pub line: u32,
    /// Fraction of `is_completed()` calls that returned true.
    pub completed: f64,
    pub samples: usize,
}

/// Everything `c10dsim run` reports.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub scenario: String,
    pub source: Source,
    pub seed: u64,
    pub torch: String,
    pub ranks: u32,
    pub repeat: u32,
    pub warmup: u32,
    pub collectives: Vec<CollectiveMetrics>,
    pub kernels: Vec<KernelMetrics>,
    pub measures: Vec<MeasureValue>,
    pub overlaps: Vec<OverlapValue>,
    /// The declared overlaps with no figure: no rank had all three measures, or a compute or
    /// comm measure above 0 (R3 divides by the smaller). Named, so that they do not vanish
    /// from the report and a sweep keeps their column for the points where they are defined.
    #[serde(default)]
    pub undefined_overlaps: Vec<String>,
    pub queries: Vec<QueryMetrics>,
    /// The caching allocator (R17–R20), over ranks.
    pub memory: MemoryMetrics,
    pub findings: Vec<Finding>,
    /// What the watchdog, the heartbeat monitor and the main thread did about timeouts and
    /// errors (R15, R26–R29), in time order.
    pub watchdog: Vec<WatchdogRecord>,
}

/// Peak memory and cache releases of the caching allocator (R17–R20).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryMetrics {
    /// The highest peak of reserved memory (segments) of any rank.
    pub peak_reserved_bytes: u64,
    /// The highest peak of allocated memory (live tensors) of any rank.
    pub peak_allocated_bytes: u64,
    /// Allocations that released the cache (`cudaFree`, R20), all ranks.
    pub cache_releases: u64,
    /// Those of them that stalled the device (waited for it to drain): all of them, except
    /// under `expandable_segments`, where a release waits for nothing.
    pub cache_release_stalls: u64,
}

/// Computes the report of a Timeline: from its records, or from its summary when it was kept
/// as one (the same figures: the summary's distributions are exact).
pub fn report(timeline: &Timeline) -> Report {
    if let Some(summary) = &timeline.summary {
        return summary_report(timeline, summary);
    }
    let warmup = timeline.scenario.warmup;
    let op_count = timeline.ops.len();

    #[derive(Default)]
    struct Samples {
        host: Vec<(i64, u64)>,
        wait: Vec<(i64, u64)>,
        interval: Vec<(i64, u64)>,
        kernel: Vec<(i64, u64)>,
        spin: Vec<(i64, u64)>,
        /// The spin of the rank that arrived last, which waited for none but itself.
        last_rank_spin: Vec<(i64, u64)>,
        last_ranks: HashMap<u32, usize>,
        ranks: u32,
        rank_iterations: u64,
        completed: usize,
        waits: usize,
        bytes: u64,
        async_op: bool,
        seen: bool,
    }
    let mut per_op: Vec<Samples> = (0..op_count).map(|_| Samples::default()).collect();
    let mut queries: Vec<(usize, usize)> = vec![(0, 0); op_count];
    for rank in &timeline.ranks {
        let weight = rank.weight();
        let count = weight as usize;
        let mut counted = vec![false; op_count];
        // Per op, the last iteration counted in `rank_iterations` (records are in call order).
        let mut counted_iteration: Vec<Option<u32>> = vec![None; op_count];
        for record in rank.collectives.iter().filter(|c| c.iteration >= warmup) {
            let samples = &mut per_op[record.op as usize];
            samples.seen = true;
            if !std::mem::replace(&mut counted[record.op as usize], true) {
                samples.ranks += weight as u32;
            }
            let last = &mut counted_iteration[record.op as usize];
            if last.replace(record.iteration) != Some(record.iteration) {
                samples.rank_iterations += weight;
            }
            samples.bytes = record.bytes;
            samples.async_op = record.async_op;
            samples.host.push((
                record.host_end_ns as i64 - record.host_start_ns as i64,
                weight,
            ));
            samples.interval.push((record.stream_interval_ns(), weight));
            samples.kernel.push((record.duration_ns(), weight));
            // The rank that arrived last is kept apart (one of a folded class's `weight`):
            // the spin is the wait a late rank imposed on the others.
            let spin_ns = record.data_start_ns as i64 - record.kernel_start_ns as i64;
            let arrived_last = (record.last_rank)
                .is_some_and(|last| rank.rank == last || rank.stands_for.contains(last));
            if arrived_last {
                samples.last_rank_spin.push((spin_ns, 1));
            }
            if weight > u64::from(arrived_last) {
                samples
                    .spin
                    .push((spin_ns, weight - u64::from(arrived_last)));
            }
            if let Some(last) = record.last_rank {
                *samples.last_ranks.entry(last).or_default() += count;
            }
            if let Some(wait) = &record.wait {
                samples.waits += count;
                samples.completed += usize::from(wait.completed_at_return) * count;
                if wait.op != record.op {
                    samples
                        .wait
                        .push((wait.host_end_ns as i64 - wait.host_start_ns as i64, weight));
                }
            }
        }
        for query in rank.queries.iter().filter(|q| q.iteration >= warmup) {
            let entry = &mut queries[query.op as usize];
            entry.0 += usize::from(query.completed) * count;
            entry.1 += count;
        }
    }
    let collectives = per_op
        .iter_mut()
        .enumerate()
        .filter(|(_, samples)| samples.seen)
        .map(|(op, samples)| {
            let info = &timeline.ops[op];
            CollectiveMetrics {
                op: info.name.clone(),
                line: info.line,
                key: info.key.clone(),
                bytes: samples.bytes,
                async_op: samples.async_op,
                ranks: samples.ranks,
                rank_iterations: samples.rank_iterations,
                host_call_us: Stat::from_weighted_ns(&mut samples.host)
                    .expect("seen ops have samples"),
                wait_us: Stat::from_weighted_ns(&mut samples.wait),
                stream_interval_us: Stat::from_weighted_ns(&mut samples.interval)
                    .expect("seen ops have samples"),
                kernel_us: Stat::from_weighted_ns(&mut samples.kernel)
                    .expect("seen ops have samples"),
                completed_at_wait: (samples.waits > 0)
                    .then(|| samples.completed as f64 / samples.waits as f64),
                // A group of one rank waits for none: its spin is the last rank's own.
                spin_us: Stat::from_weighted_ns(&mut samples.spin)
                    .or_else(|| Stat::from_weighted_ns(&mut samples.last_rank_spin))
                    .expect("seen ops have samples"),
                last_rank: most_frequent(&samples.last_ranks).map(|(rank, _)| rank),
                last_rank_share: most_frequent(&samples.last_ranks).map_or(0.0, |(_, count)| {
                    count as f64 / samples.last_ranks.values().sum::<usize>() as f64
                }),
            }
        })
        .collect();
    let kernels = kernel_metrics(timeline);

    let measure_samples = measure_samples_by_rank(timeline);
    let measures = timeline
        .scenario
        .measures
        .iter()
        .enumerate()
        .filter_map(|(index, measure)| {
            let mut all: Vec<(i64, u64)> = measure_samples
                .iter()
                .zip(&timeline.ranks)
                .flat_map(|(per_rank, rank)| {
                    per_rank[index].iter().map(|&value| (value, rank.weight()))
                })
                .collect();
            let positive: u64 = all.iter().filter(|&&(v, _)| v > 0).map(|&(_, w)| w).sum();
            let total: u64 = all.iter().map(|&(_, w)| w).sum();
            Stat::from_weighted_ns(&mut all).map(|value_us| MeasureValue {
                name: measure.name.clone(),
                clock: measure.clock.clone(),
                value_us,
                positive_fraction: positive as f64 / total as f64,
            })
        })
        .collect();

    let overlaps: Vec<OverlapValue> = timeline
        .scenario
        .overlaps
        .iter()
        .filter_map(|names| overlap_value(timeline, &measure_samples, names))
        .collect();

    let queries = queries
        .iter()
        .enumerate()
        .filter(|(_, (_, total))| *total > 0)
        .map(|(op, &(completed, total))| QueryMetrics {
            op: timeline.ops[op].name.clone(),
            line: timeline.ops[op].line,
            completed: completed as f64 / total as f64,
            samples: total,
        })
        .collect();

    Report {
        scenario: timeline.scenario.name.clone(),
        source: timeline.source,
        seed: timeline.scenario.seed,
        torch: timeline.scenario.torch.clone(),
        ranks: timeline.scenario.ranks,
        repeat: timeline.scenario.repeat,
        warmup,
        collectives,
        kernels,
        measures,
        undefined_overlaps: undefined_overlaps(timeline, &overlaps),
        overlaps,
        queries,
        memory: MemoryMetrics {
            peak_reserved_bytes: timeline
                .ranks
                .iter()
                .map(|r| r.memory.peak_reserved_bytes)
                .max()
                .unwrap_or(0),
            peak_allocated_bytes: timeline
                .ranks
                .iter()
                .map(|r| r.memory.peak_allocated_bytes)
                .max()
                .unwrap_or(0),
            cache_releases: timeline
                .ranks
                .iter()
                .map(|r| r.cache_releases.len() as u64 * r.weight())
                .sum(),
            cache_release_stalls: (timeline.ranks.iter())
                .map(|r| {
                    let stalls = r
                        .cache_releases
                        .iter()
                        .filter(|c| c.device_idle_ns.is_some());
                    stalls.count() as u64 * r.weight()
                })
                .sum(),
        },
        findings: timeline.findings.clone(),
        watchdog: timeline.watchdog.clone(),
    }
}

/// [`report`] of a summarised Timeline.
fn summary_report(timeline: &Timeline, summary: &TimelineSummary) -> Report {
    let op = |index: u32| &timeline.ops[index as usize];
    let collectives = summary
        .collectives
        .iter()
        .filter_map(|c| {
            let info = op(c.op);
            let total: u64 = c.last_ranks.iter().map(|&(_, count)| count).sum();
            // A summary written before it counted them: its figures are over every rank.
            let ranks = if c.ranks == 0 {
                timeline.scenario.ranks
            } else {
                c.ranks
            };
            let measured = timeline.scenario.repeat - timeline.scenario.warmup;
            // The most frequent last rank, ties to the smallest (`last_ranks` is by rank).
            let last =
                c.last_ranks
                    .iter()
                    .copied()
                    .reduce(|best, next| if next.1 > best.1 { next } else { best });
            Some(CollectiveMetrics {
                op: info.name.clone(),
                line: info.line,
                key: info.key.clone(),
                bytes: c.bytes,
                async_op: c.async_op,
                ranks,
                // Likewise: over every measured iteration.
                rank_iterations: if c.rank_iterations == 0 {
                    u64::from(ranks) * u64::from(measured)
                } else {
                    c.rank_iterations
                },
                host_call_us: Stat::from_distribution(&c.host_call)?,
                wait_us: Stat::from_distribution(&c.wait),
                stream_interval_us: Stat::from_distribution(&c.stream_interval)?,
                kernel_us: Stat::from_distribution(&c.kernel)?,
                completed_at_wait: (c.waits > 0)
                    .then(|| c.completed_at_return as f64 / c.waits as f64),
                spin_us: Stat::from_distribution(&c.spin)?,
                last_rank: last.map(|(rank, _)| rank),
                last_rank_share: last.map_or(0.0, |(_, count)| count as f64 / total as f64),
            })
        })
        .collect();
    let kernels = summary
        .kernels
        .iter()
        .filter_map(|k| {
            let info = op(k.op);
            Some(KernelMetrics {
                op: info.name.clone(),
                line: info.line,
                key: info.key.clone(),
                kernel_us: Stat::from_distribution(&k.kernel)?,
                queued_us: Stat::from_distribution(&k.queued)?,
            })
        })
        .collect();
    let measures = summary
        .measures
        .iter()
        .zip(&timeline.scenario.measures)
        .filter_map(|(m, info)| {
            Some(MeasureValue {
                name: m.name.clone(),
                clock: info.clock.clone(),
                value_us: Stat::from_distribution(&m.values)?,
                positive_fraction: m.positive as f64 / m.values.count as f64,
            })
        })
        .collect();
    let overlaps: Vec<OverlapValue> = timeline
        .scenario
        .overlaps
        .iter()
        .filter_map(|names| {
            let medians = |name: &str| -> Option<HashMap<u32, f64>> {
                let m = summary.measures.iter().find(|m| m.name == name)?;
                Some(m.rank_medians_us.iter().copied().collect())
            };
            let (compute, comm, both) = (
                medians(&names[1])?,
                medians(&names[2])?,
                medians(&names[3])?,
            );
            let mut ranks: Vec<u32> = compute.keys().copied().collect();
            ranks.sort_unstable();
            let per_rank = ranks.into_iter().map(|rank| {
                let medians = (compute.get(&rank), comm.get(&rank), both.get(&rank));
                (
                    medians.0.copied(),
                    medians.1.copied(),
                    medians.2.copied(),
                    1,
                )
            });
            overlap_of_ranks(&names[0], per_rank)
        })
        .collect();
    let queries = summary
        .queries
        .iter()
        .map(|q| QueryMetrics {
            op: op(q.op).name.clone(),
            line: op(q.op).line,
            completed: q.completed as f64 / q.calls as f64,
            samples: q.calls as usize,
        })
        .collect();
    Report {
        scenario: timeline.scenario.name.clone(),
        source: timeline.source,
        seed: timeline.scenario.seed,
        torch: timeline.scenario.torch.clone(),
        ranks: timeline.scenario.ranks,
        repeat: timeline.scenario.repeat,
        warmup: timeline.scenario.warmup,
        collectives,
        kernels,
        measures,
        undefined_overlaps: undefined_overlaps(timeline, &overlaps),
        overlaps,
        queries,
        memory: MemoryMetrics {
            peak_reserved_bytes: summary.memory.peak_reserved_bytes,
            peak_allocated_bytes: summary.memory.peak_allocated_bytes,
            cache_releases: summary.cache_releases,
            cache_release_stalls: summary.cache_release_stalls,
        },
        findings: timeline.findings.clone(),
        watchdog: timeline.watchdog.clone(),
    }
}

/// The median of values each counted `weight` times.
fn median_of(values: &mut [(f64, u64)]) -> Option<f64> {
    values.sort_by(|a, b| a.0.total_cmp(&b.0));
    let n: u64 = values.iter().map(|&(_, w)| w).sum();
    if n == 0 {
        return None;
    }
    let nth = |index: u64| {
        let mut seen = 0;
        values
            .iter()
            .find(|&&(_, w)| {
                seen += w;
                index < seen
            })
            .map(|&(v, _)| v)
            .expect("the index is below the total weight")
    };
    Some(if n % 2 == 1 {
        nth(n / 2)
    } else {
        (nth(n / 2 - 1) + nth(n / 2)) / 2.0
    })
}

/// The declared overlaps (the scenario's order) that `overlaps` has no figure for.
fn undefined_overlaps(timeline: &Timeline, overlaps: &[OverlapValue]) -> Vec<String> {
    (timeline.scenario.overlaps.iter())
        .map(|names| &names[0])
        .filter(|name| !overlaps.iter().any(|o| &o.name == *name))
        .cloned()
        .collect()
}

fn overlap_value(
    timeline: &Timeline,
    measure_samples: &[Vec<Vec<i64>>],
    names: &[String; 4],
) -> Option<OverlapValue> {
    let index = |name: &str| {
        timeline
            .scenario
            .measures
            .iter()
            .position(|m| m.name == name)
    };
    let (compute, comm, both) = (index(&names[1])?, index(&names[2])?, index(&names[3])?);
    let per_rank = measure_samples
        .iter()
        .zip(&timeline.ranks)
        .map(|(samples, rank)| {
            let median = |i: usize| {
                let mut values = samples[i].clone();
                Stat::from_ns(&mut values).map(|s| s.median)
            };
            (median(compute), median(comm), median(both), rank.weight())
        });
    overlap_of_ranks(&names[0], per_rank)
}

/// R3's overlap figure from each rank's medians of the compute, comm and both measures (each
/// rank counted `weight` times: a folded class's size): the median of the ranks' figures, and
/// the medians of the measures over the ranks that have all three.
fn overlap_of_ranks(
    name: &str,
    per_rank: impl Iterator<Item = (Option<f64>, Option<f64>, Option<f64>, u64)>,
) -> Option<OverlapValue> {
    let mut figures: Vec<(f64, u64)> = Vec::new();
    let mut medians: [Vec<(f64, u64)>; 3] = Default::default();
    for (c, m, b, weight) in per_rank {
        let (Some(c), Some(m), Some(b)) = (c, m, b) else {
            continue;
        };
        if let Some(figure) = overlap_ratio(c, m, b) {
            figures.push((figure, weight));
            medians[0].push((c, weight));
            medians[1].push((m, weight));
            medians[2].push((b, weight));
        }
    }
    let [mut c, mut m, mut b] = medians;
    Some(OverlapValue {
        name: name.to_string(),
        overlap: median_of(&mut figures)?,
        compute_us: median_of(&mut c)?,
        comm_us: median_of(&mut m)?,
        both_us: median_of(&mut b)?,
    })
}

/// The most frequent key (ties: the smallest) and its count.
fn most_frequent(counts: &HashMap<u32, usize>) -> Option<(u32, usize)> {
    counts
        .iter()
        .map(|(&key, &count)| (key, count))
        .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0)))
}

/// Per op launching compute or sleep kernels: their durations and queueing.
fn kernel_metrics(timeline: &Timeline) -> Vec<KernelMetrics> {
    let warmup = timeline.scenario.warmup;
    let mut durations: Vec<Vec<(i64, u64)>> = vec![Vec::new(); timeline.ops.len()];
    let mut queued: Vec<Vec<(i64, u64)>> = vec![Vec::new(); timeline.ops.len()];
    for rank in &timeline.ranks {
        let weight = rank.weight();
        for kernel in &rank.kernels {
            if kernel.iteration < warmup || kernel.class == KernelClass::Communication {
                continue;
            }
            let op = kernel.op as usize;
            durations[op].push((kernel.end_ns as i64 - kernel.start_ns as i64, weight));
            queued[op].push((kernel.start_ns as i64 - kernel.enqueue_ns as i64, weight));
        }
    }
    durations
        .iter_mut()
        .zip(queued.iter_mut())
        .enumerate()
        .filter_map(|(op, (duration, queue))| {
            let info = &timeline.ops[op];
            Some(KernelMetrics {
                op: info.name.clone(),
                line: info.line,
                key: info.key.clone(),
                kernel_us: Stat::from_weighted_ns(duration)?,
                queued_us: Stat::from_weighted_ns(queue)?,
            })
        })
        .collect()
}

/// R3: `(t_compute + t_comm − t_both) / min(t_compute, t_comm)`; 1 = fully hidden, 0 = serial.
pub fn overlap_ratio(compute: f64, comm: f64, both: f64) -> Option<f64> {
    let shorter = compute.min(comm);
    (shorter > 0.0).then(|| (compute + comm - both) / shorter)
}

/// Per rank, per measure: the samples in nanoseconds over measured iterations.
fn measure_samples_by_rank(timeline: &Timeline) -> Vec<Vec<Vec<i64>>> {
    let warmup = timeline.scenario.warmup;
    let mark_index: HashMap<&str, u32> = timeline
        .scenario
        .marks
        .iter()
        .enumerate()
        .map(|(i, name)| (name.as_str(), i as u32))
        .collect();
    timeline
        .ranks
        .iter()
        .map(|rank| {
            let mut marks: HashMap<(u32, u32), (u64, u64)> = HashMap::new();
            for mark in rank.marks.iter().filter(|m| m.iteration >= warmup) {
                marks.insert((mark.iteration, mark.mark), (mark.host_ns, mark.gpu_ns));
            }
            timeline
                .scenario
                .measures
                .iter()
                .map(|measure| {
                    let (Some(&from), Some(&to)) = (
                        mark_index.get(measure.from.as_str()),
                        mark_index.get(measure.to.as_str()),
                    ) else {
                        return Vec::new();
                    };
                    let host = measure.clock == "host";
                    let mut samples = Vec::new();
                    for iteration in warmup..timeline.scenario.repeat {
                        let (Some(a), Some(b)) =
                            (marks.get(&(iteration, from)), marks.get(&(iteration, to)))
                        else {
                            continue;
                        };
                        let (start, end) = if host { (a.0, b.0) } else { (a.1, b.1) };
                        samples.push(end as i64 - start as i64);
                    }
                    samples
                })
                .collect()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_spin_is_the_early_ranks_wait_whatever_the_share_of_late_ranks_r16() {
        // scenarios/straggler.toml: rank 3 late by a seeded delay, the same draws at every
        // rank count. Its own kernel barely spins; the spin is the wait it imposed on the
        // others, so the figures are the same at 4 ranks (1 late of 4) and 16 (1 of 16), from
        // the records and from the summary.
        let text = |ranks: u32| {
            format!(
                "seed = 42\nrepeat = 21\nwarmup = 1\n[cluster]\nranks = {ranks}\n\
                 [groups.world]\neager_init = true\n[tensors]\ng = \"25MiB\"\n\
                 [[perturb]]\nranks = [3]\nbefore = \"ar\"\n\
                 host_delay_us = {{ lognormal = {{ mean = 200, std = 50 }} }}\n\
                 [[op]]\nlabel = \"ar\"\nall_reduce = \"g\"\nasync_op = true\nwork = \"w\"\n\
                 [[op]]\nwait = \"w\"\n[[op]]\ndevice_sync = true\n"
            )
        };
        let spin = |ranks: u32, summary: bool| {
            let scenario = sim::scenario::parse("straggler.toml", &text(ranks)).unwrap();
            let options = sim::engine::Options {
                summary: summary.then(|| sim::timeline::RecordSelection::parse("none").unwrap()),
                ..sim::engine::Options::default()
            };
            let report = report(&sim::engine::simulate_with(&scenario, options).0);
            let collective = &report.collectives[0];
            assert_eq!(collective.last_rank, Some(3));
            collective.spin_us
        };
        let four = spin(4, false);
        // 20 measured iterations of the 3 early ranks.
        assert_eq!(four.samples, 60);
        assert!(four.min > 100.0, "{four:?}");
        for (ranks, summary) in [(4, true), (8, false), (16, false), (16, true)] {
            let other = spin(ranks, summary);
            assert_eq!(
                (other.median, other.min, other.max),
                (four.median, four.min, four.max),
                "{ranks} ranks, summary {summary}"
            );
        }
    }

    #[test]
    fn stats_use_the_middle_and_nearest_rank() {
        let mut samples = vec![4_000, 1_000, 3_000, 2_000];
        let stat = Stat::from_ns(&mut samples).unwrap();
        assert_eq!(stat.median, 2.5);
        assert_eq!(stat.p10, 1.0);
        assert_eq!(stat.p90, 4.0);
        assert_eq!((stat.min, stat.max, stat.samples), (1.0, 4.0, 4));
        assert!(Stat::from_ns(&mut []).is_none());
        // Weights count as repeated samples.
        let mut weighted = vec![(4_000, 1), (1_000, 2), (3_000, 1)];
        let mut repeated = vec![4_000, 1_000, 1_000, 3_000];
        assert_eq!(
            Stat::from_weighted_ns(&mut weighted),
            Stat::from_ns(&mut repeated)
        );
        assert!(Stat::from_weighted_ns(&mut [(5, 0)]).is_none());
    }

    #[test]
    fn a_distribution_gives_the_figures_its_samples_give() {
        for samples in [
            vec![5],
            vec![4_000, 1_000, 3_000, 2_000],
            vec![7, 7, 7, -2, 9, 9, 1_000_000],
        ] {
            let mut counts: std::collections::BTreeMap<i64, u64> = Default::default();
            for &value in &samples {
                *counts.entry(value).or_default() += 1;
            }
            let distribution = Distribution::from_counts(counts.into_iter().collect());
            let mut sorted = samples.clone();
            assert_eq!(
                Stat::from_distribution(&distribution),
                Stat::from_ns(&mut sorted)
            );
        }
        assert_eq!(Stat::from_distribution(&Distribution::default()), None);
    }

    #[test]
    fn overlap_follows_r3() {
        // Fully hidden: both = max.
        assert_eq!(overlap_ratio(1500.0, 150.0, 1500.0), Some(1.0));
        // Serial: both = sum.
        assert_eq!(overlap_ratio(1500.0, 150.0, 1650.0), Some(0.0));
        assert_eq!(overlap_ratio(0.0, 150.0, 150.0), None);
    }
}
