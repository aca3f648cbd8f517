//! Where two Timelines part: simulated against measured, or two runs of either
//! (`c10dsim diff`, docs/diff.md).
//!
//! Ops are aligned by rank, iteration and op name (the label, or `key#index`). Times are taken
//! relative to the start of their iteration on their rank (the first host call's start), so a
//! difference in setup (a communicator bootstrap, R8) or in the clocks' origin does not move
//! every later op. Per op the medians over the measured iterations of the Δ (B − A) of the
//! host return (R1), the GPU start and the GPU end; per R3 metric (`host_call_us`, `wait_us`,
//! `stream_interval_us`, `kernel_us`, `completed_at_wait`, measures, overlaps) both values and
//! their ratio; ordering verdicts (which of two GPU events — a mark's event (R5), a collective's
//! end event (R10d), a `wait()`'s release (R12) — comes first in most iterations) that differ;
//! findings present in one Timeline only; and where each rank stopped, the records that never
//! finished (`diff/unfinished.rs`); the watchdog's and the main thread's records, per rank,
//! thread and event (`diff/watchdog.rs`). Pure: Timelines in, a [`Diff`] out.
//!
//! Over 1,000 lines (about 1,070; its tests are in `diff/tests.rs`): the three comparisons (op
//! times, metrics, orderings) and the text rendering share the `Diff` types and the alignment of
//! ops; the renderer (`render_diff` onwards, ~110 lines) is the piece to move out if it grows.

use crate::metrics::{self, Report};
use crate::text::table;
use serde::{Deserialize, Serialize};
use sim::timeline::{Finding, RankSet, Timeline};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;
pub use unfinished::UnfinishedDisagreement;
pub use watchdog::WatchdogDisagreement;

mod unfinished;
mod watchdog;

/// Tolerances and bounds of a diff.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct DiffOptions {
    /// A timing difference counts only when it exceeds this share of A's value (percent);
    /// fractions (`completed_at_wait`, overlap) when they differ by more than this many
    /// hundredths.
    pub tolerance_pct: f64,
    /// ... and this many microseconds.
    pub tolerance_us: f64,
    /// Two events closer than this are simultaneous: no order is read from them (the
    /// hardware backend's clock alignment is good to about 4 µs, docs/hw.md).
    pub order_tie_us: f64,
    /// Ordering verdicts consider the first this many GPU events of each iteration and rank.
    pub order_events_per_iteration: usize,
    /// How many ops the summary names as the worst.
    pub worst_op_count: usize,
}

impl Default for DiffOptions {
    fn default() -> DiffOptions {
        DiffOptions {
            tolerance_pct: 10.0,
            tolerance_us: 10.0,
            order_tie_us: 5.0,
            order_events_per_iteration: 32,
            worst_op_count: 5,
        }
    }
}

/// One side of a diff, as the report names it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Side {
    pub scenario: String,
    pub ranks: u32,
    pub source: String,
    pub seed: u64,
    pub machine: String,
}

/// One time of an op on both sides, medians over the aligned iterations, in µs since the
/// iteration's start.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TimeDelta {
    pub a_us: f64,
    pub b_us: f64,
    /// Median over iterations of B − A.
    pub delta_us: f64,
    /// Median over iterations of |B − A|.
    pub abs_delta_us: f64,
    /// A's duration of the host call (for the host return) or of the kernel (for GPU times):
    /// the base of the percentage tolerance, so that an op late in a long iteration is held
    /// to its own scale.
    pub scale_us: f64,
}

impl TimeDelta {
    fn exceeds(&self, options: &DiffOptions) -> bool {
        let moved = self.delta_us.abs();
        moved > options.tolerance_us && moved > options.tolerance_pct / 100.0 * self.scale_us
    }
}

/// The Δs of one op on one rank.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OpDelta {
    pub rank: u32,
    pub op: String,
    pub key: String,
    /// Aligned iterations (measured ones: from `warmup` on).
    pub iterations: usize,
    pub host_return: Option<TimeDelta>,
    pub gpu_start: Option<TimeDelta>,
    pub gpu_end: Option<TimeDelta>,
    /// Whether a Δ exceeds both tolerances.
    pub exceeds: bool,
}

impl OpDelta {
    /// The largest median |Δ| of the three times.
    pub fn largest_abs_delta_us(&self) -> f64 {
        [self.host_return, self.gpu_start, self.gpu_end]
            .iter()
            .flatten()
            .map(|d| d.abs_delta_us)
            .fold(0.0, f64::max)
    }
}

/// |Δ| over every aligned (rank, iteration, op) sample of one kind of time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeltaSummary {
    /// `host_return`, `gpu_start` or `gpu_end`.
    pub time: String,
    pub samples: usize,
    pub median_abs_us: f64,
    pub p90_abs_us: f64,
    pub max_abs_us: f64,
}

/// An R3 metric, measure or overlap on both sides.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MetricDelta {
    /// `<op>.<metric>` (`ar.kernel_us`), `measure.<name>` or `overlap.<name>`.
    pub metric: String,
    /// `us` for times, `fraction` for shares and overlaps.
    pub unit: String,
    pub a: f64,
    pub b: f64,
    /// B / A, where A is not 0.
    pub ratio: Option<f64>,
    /// |B − A| / |A| in percent, where A is not 0.
    pub error_pct: Option<f64>,
    pub exceeds: bool,
}

/// Which of two events comes first in most measured iterations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Order {
    /// The first event precedes the second in more than half of the iterations.
    Before,
    /// The second precedes the first in more than half of the iterations.
    After,
    /// Neither: simultaneous (within the tie) or mixed.
    Unsettled,
}

/// The order of two events of one rank on both sides.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OrderVerdict {
    pub rank: u32,
    /// Events: `mark:<name>`, `end:<op>` (a collective's end event), `released:<wait op>`.
    pub first: String,
    pub second: String,
    pub a: Order,
    pub b: Order,
    /// Iterations in which `first` strictly preceded `second`, and all iterations, per side.
    pub a_before: usize,
    pub a_iterations: usize,
    pub b_before: usize,
    pub b_iterations: usize,
}

impl OrderVerdict {
    /// The two sides hold opposite orders.
    pub fn disagrees(&self) -> bool {
        matches!(
            (self.a, self.b),
            (Order::Before, Order::After) | (Order::After, Order::Before)
        )
    }
}

/// Everything `c10dsim diff` reports.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Diff {
    pub a: Side,
    pub b: Side,
    pub options: DiffOptions,
    /// Per (rank, op), in rank then program order.
    pub ops: Vec<OpDelta>,
    /// Ops (by name) found on one side only.
    pub ops_only_in_a: Vec<String>,
    pub ops_only_in_b: Vec<String>,
    /// Ranks with records on one side only.
    pub ranks_only_in_a: Vec<u32>,
    pub ranks_only_in_b: Vec<u32>,
    /// (rank, op, measured iterations) that ran on one side only, on ranks both sides hold: a
    /// Timeline with records missing is not identical to a whole one.
    pub calls_only_in_a: Vec<(u32, String, usize)>,
    pub calls_only_in_b: Vec<(u32, String, usize)>,
    pub summary: Vec<DeltaSummary>,
    /// The ops with the largest median |Δ|, largest first.
    pub worst_ops: Vec<OpDelta>,
    pub metrics: Vec<MetricDelta>,
    /// Pairs of events compared, and those whose verdicts agree (neither side unsettled counts
    /// as agreeing).
    pub order_pairs: usize,
    pub order_pairs_agreeing: usize,
    /// The pairs whose orders are opposite.
    pub order_disagreements: Vec<OrderVerdict>,
    pub findings_only_in_a: Vec<Finding>,
    pub findings_only_in_b: Vec<Finding>,
    /// No Δ, no metric difference, no ordering or finding difference at all.
    pub identical: bool,
    /// What exceeds the tolerances: ops and metrics that moved, orders and findings that
    /// differ. Empty ⇒ exit 0.
    pub exceeded: Vec<String>,
    /// Either Timeline is summarised (`--summary`): the records it left out by design were not
    /// compared, only its summaries' metrics and what it kept.
    #[serde(default)]
    pub summarised: bool,
    /// The ranks that left a record unfinished (a host call, an iteration, a collective, a
    /// kernel, a stream wait) on either side, compared rank by rank.
    #[serde(default)]
    pub unfinished_ranks: usize,
    /// Per rank, each unfinished record the two sides do not share.
    #[serde(default)]
    pub unfinished_disagreements: Vec<UnfinishedDisagreement>,
    /// Per rank, thread and event, the watchdog and main-thread records the two sides do not
    /// share (counts, or first times beyond the tolerances); left out where they all agree.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub watchdog_disagreements: Vec<WatchdogDisagreement>,
    /// How the two sides' scenarios differ ([`unlike_scenarios`]); empty for two runs of one
    /// scenario.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unlike_scenarios: Vec<String>,
}

impl Diff {
    pub fn within_tolerance(&self) -> bool {
        self.exceeded.is_empty()
    }
}

/// Per (rank, iteration, op): host return, GPU start and GPU end, relative to the iteration
/// start, then the host call's and the kernel's durations.
type OpTimes = BTreeMap<(u32, u32, String), [Option<i64>; 5]>;

/// How the scenarios of two sides differ: their names, their rank counts. Ops are matched by
/// name all the same, so their differences may compare unlike things; a downscaled run may be
/// compared on purpose, so this is said, not refused. The file (`source_hash`) is not compared:
/// a machine profile or an edit of the same scenario changes it.
pub fn unlike_scenarios(a: &Side, b: &Side) -> Vec<String> {
    let mut unlike = Vec::new();
    if a.scenario != b.scenario {
        unlike.push(format!(
            "A and B are runs of different scenarios ({}, {})",
            a.scenario, b.scenario
        ));
    }
    if a.ranks != b.ranks {
        unlike.push(format!(
            "A and B have different rank counts ({} against {})",
            crate::text::counted(u64::from(a.ranks), "rank"),
            b.ranks
        ));
    }
    unlike
}

fn side(timeline: &Timeline) -> Side {
    Side {
        scenario: timeline.scenario.name.clone(),
        ranks: timeline.scenario.ranks,
        source: match timeline.source {
            sim::timeline::Source::Simulated => "simulated".into(),
            sim::timeline::Source::Measured => "measured".into(),
            sim::timeline::Source::Torch => "torch".into(),
        },
        seed: timeline.scenario.seed,
        machine: timeline
            .machine
            .get("device")
            .or_else(|| timeline.machine.get("gpu"))
            .cloned()
            .unwrap_or_default(),
    }
}

/// Host return, GPU start and GPU end of every op of the measured iterations.
fn op_times(timeline: &Timeline) -> OpTimes {
    let warmup = timeline.scenario.warmup;
    let mut times = OpTimes::new();
    for rank in &timeline.ranks {
        let mut iteration_start: HashMap<u32, u64> = HashMap::new();
        for call in &rank.host {
            let start = iteration_start
                .entry(call.iteration)
                .or_insert(call.start_ns);
            *start = (*start).min(call.start_ns);
        }
        let relative = |iteration: u32, ns: u64| {
            iteration_start
                .get(&iteration)
                .map(|&start| ns as i64 - start as i64)
        };
        let name = |op: u32| timeline.ops[op as usize].name.clone();
        for call in rank.host.iter().filter(|c| c.iteration >= warmup) {
            let entry = times
                .entry((rank.rank, call.iteration, name(call.op)))
                .or_default();
            entry[0] = relative(call.iteration, call.end_ns);
            entry[3] = Some(call.end_ns as i64 - call.start_ns as i64);
        }
        // The op's last kernel is its own (a perturbation's delay kernel comes first).
        for kernel in rank.kernels.iter().filter(|k| k.iteration >= warmup) {
            let entry = times
                .entry((rank.rank, kernel.iteration, name(kernel.op)))
                .or_default();
            entry[1] = relative(kernel.iteration, kernel.start_ns);
            entry[2] = relative(kernel.iteration, kernel.end_ns);
            entry[4] = Some(kernel.end_ns as i64 - kernel.start_ns as i64);
        }
    }
    times
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n == 0 {
        0.0
    } else if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

/// Nearest-rank percentile of sorted values.
fn percentile_sorted(sorted: &[f64], fraction: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = (fraction * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn exceeds_us(options: &DiffOptions, a: f64, b: f64) -> bool {
    let delta = (b - a).abs();
    delta > options.tolerance_us && delta > options.tolerance_pct / 100.0 * a.abs()
}

fn exceeds_fraction(options: &DiffOptions, a: f64, b: f64) -> bool {
    (b - a).abs() > options.tolerance_pct / 100.0
}

const TIME_NAMES: [&str; 3] = ["host_return", "gpu_start", "gpu_end"];

fn op_deltas(
    (a, times_a): (&Timeline, &OpTimes),
    times_b: &OpTimes,
    options: &DiffOptions,
) -> (Vec<OpDelta>, [Vec<f64>; 3]) {
    // (rank, op) → per time kind: (a, b, A's duration) in µs.
    type Pairs = [Vec<(f64, f64, f64)>; 3];
    let mut per_op: BTreeMap<(u32, usize, String), (Pairs, usize)> = BTreeMap::new();
    let order_of: HashMap<&str, usize> = a
        .ops
        .iter()
        .map(|op| (op.name.as_str(), op.index as usize))
        .collect();
    let mut all_abs: [Vec<f64>; 3] = Default::default();
    for ((rank, iteration, op), ta) in times_a {
        let Some(tb) = times_b.get(&(*rank, *iteration, op.clone())) else {
            continue;
        };
        let position = order_of.get(op.as_str()).copied().unwrap_or(usize::MAX);
        let entry = per_op.entry((*rank, position, op.clone())).or_default();
        entry.1 += 1;
        for kind in 0..3 {
            if let (Some(x), Some(y)) = (ta[kind], tb[kind]) {
                let (x, y) = (x as f64 / 1e3, y as f64 / 1e3);
                let scale = ta[if kind == 0 { 3 } else { 4 }].unwrap_or(0) as f64 / 1e3;
                entry.0[kind].push((x, y, scale));
                all_abs[kind].push((y - x).abs());
            }
        }
    }
    let key_of: HashMap<&str, &str> = a
        .ops
        .iter()
        .map(|op| (op.name.as_str(), op.key.as_str()))
        .collect();
    let ops = per_op
        .into_iter()
        .map(|((rank, _, op), (pairs, iterations))| {
            let delta = |pairs: &[(f64, f64, f64)]| {
                (!pairs.is_empty()).then(|| {
                    let mut a: Vec<f64> = pairs.iter().map(|p| p.0).collect();
                    let mut b: Vec<f64> = pairs.iter().map(|p| p.1).collect();
                    let mut d: Vec<f64> = pairs.iter().map(|p| p.1 - p.0).collect();
                    let mut abs: Vec<f64> = d.iter().map(|x| x.abs()).collect();
                    let mut scale: Vec<f64> = pairs.iter().map(|p| p.2).collect();
                    TimeDelta {
                        a_us: median(&mut a),
                        b_us: median(&mut b),
                        delta_us: median(&mut d),
                        abs_delta_us: median(&mut abs),
                        scale_us: median(&mut scale),
                    }
                })
            };
            let [host_return, gpu_start, gpu_end] = [0, 1, 2].map(|kind| delta(&pairs[kind]));
            let exceeds = [host_return, gpu_start, gpu_end]
                .iter()
                .flatten()
                .any(|d| d.exceeds(options));
            OpDelta {
                rank,
                key: key_of.get(op.as_str()).unwrap_or(&"").to_string(),
                op,
                iterations,
                host_return,
                gpu_start,
                gpu_end,
                exceeds,
            }
        })
        .collect();
    (ops, all_abs)
}

fn op_names(timeline: &Timeline) -> BTreeSet<String> {
    timeline.ops.iter().map(|op| op.name.clone()).collect()
}

fn metric(options: &DiffOptions, metric: String, unit: &str, a: f64, b: f64) -> MetricDelta {
    let nonzero = a != 0.0;
    MetricDelta {
        exceeds: if unit == "us" {
            exceeds_us(options, a, b)
        } else {
            exceeds_fraction(options, a, b)
        },
        metric,
        unit: unit.to_string(),
        a,
        b,
        ratio: nonzero.then(|| b / a),
        error_pct: nonzero.then(|| (b - a).abs() / a.abs() * 100.0),
    }
}

/// A metric that moved, as the text says it: times in µs, as every other line; a fraction
/// bare, as the metrics table has it (`unit` keeps the JSON's `us` and `fraction`).
fn metric_line(m: &MetricDelta) -> String {
    let unit = if m.unit == "us" { " µs" } else { "" };
    format!(
        "metric {}: {:.3} → {:.3}{unit}{}",
        m.metric,
        m.a,
        m.b,
        m.ratio.map_or(String::new(), |r| format!(" (×{r:.3})"))
    )
}

/// The R3 metrics, measures and overlaps of one report by name, with their units.
pub fn named_metrics(report: &Report) -> Vec<(String, &'static str, f64)> {
    let mut out = Vec::new();
    for c in &report.collectives {
        out.push((
            format!("{}.host_call_us", c.op),
            "us",
            c.host_call_us.median,
        ));
        if let Some(wait) = &c.wait_us {
            out.push((format!("{}.wait_us", c.op), "us", wait.median));
        }
        out.push((
            format!("{}.stream_interval_us", c.op),
            "us",
            c.stream_interval_us.median,
        ));
        out.push((format!("{}.kernel_us", c.op), "us", c.kernel_us.median));
        if let Some(share) = c.completed_at_wait {
            out.push((format!("{}.completed_at_wait", c.op), "fraction", share));
        }
    }
    for k in &report.kernels {
        out.push((format!("{}.kernel_us", k.op), "us", k.kernel_us.median));
    }
    for m in &report.measures {
        out.push((format!("measure.{}", m.name), "us", m.value_us.median));
    }
    for o in &report.overlaps {
        out.push((format!("overlap.{}", o.name), "fraction", o.overlap));
    }
    out
}

fn metric_deltas(a: &Timeline, b: &Timeline, options: &DiffOptions) -> Vec<MetricDelta> {
    let report_a = metrics::report(a);
    let report_b = metrics::report(b);
    let values_b: HashMap<String, f64> = named_metrics(&report_b)
        .into_iter()
        .map(|(name, _, value)| (name, value))
        .collect();
    named_metrics(&report_a)
        .into_iter()
        .filter_map(|(name, unit, value_a)| {
            let value_b = *values_b.get(&name)?;
            Some(metric(options, name, unit, value_a, value_b))
        })
        .collect()
}

/// A GPU event of one iteration: its name and time.
fn gpu_events(
    timeline: &Timeline,
    options: &DiffOptions,
) -> BTreeMap<(u32, u32), Vec<(String, u64)>> {
    let warmup = timeline.scenario.warmup;
    // Per (rank, iteration): (host time of the call that made it, name, GPU time).
    type Placed = Vec<(u64, String, u64)>;
    let mut events: BTreeMap<(u32, u32), Placed> = BTreeMap::new();
    for rank in &timeline.ranks {
        // Program position of each event, so the first N of an iteration are the same on
        // both sides whatever their times.
        for mark in rank.marks.iter().filter(|m| m.iteration >= warmup) {
            let name = format!("mark:{}", timeline.scenario.marks[mark.mark as usize]);
            events
                .entry((rank.rank, mark.iteration))
                .or_default()
                .push((mark.host_ns, name, mark.gpu_ns));
        }
        for c in rank.collectives.iter().filter(|c| c.iteration >= warmup) {
            let list = events.entry((rank.rank, c.iteration)).or_default();
            let op_name = &timeline.ops[c.op as usize].name;
            list.push((c.host_start_ns, format!("end:{op_name}"), c.end_ns));
            if let Some(wait) = &c.wait {
                let wait_name = &timeline.ops[wait.op as usize].name;
                list.push((
                    wait.host_start_ns,
                    format!("released:{wait_name}"),
                    wait.released_ns,
                ));
            }
        }
    }
    events
        .into_iter()
        .map(|(key, mut list)| {
            list.sort_by(|x, y| (x.0, &x.1).cmp(&(y.0, &y.1)));
            list.truncate(options.order_events_per_iteration);
            let named = list.into_iter().map(|(_, name, at)| (name, at)).collect();
            (key, named)
        })
        .collect()
}

/// Per (rank, first, second): iterations with first strictly before, strictly after, and all.
type OrderCounts = BTreeMap<(u32, String, String), (usize, usize, usize)>;

fn order_counts(timeline: &Timeline, options: &DiffOptions) -> OrderCounts {
    let tie_ns = (options.order_tie_us * 1e3) as i64;
    let mut counts = OrderCounts::new();
    for ((rank, _), list) in gpu_events(timeline, options) {
        for (i, (first, t_first)) in list.iter().enumerate() {
            for (second, t_second) in &list[i + 1..] {
                if first == second {
                    continue;
                }
                let gap = *t_second as i64 - *t_first as i64;
                let entry = counts
                    .entry((rank, first.clone(), second.clone()))
                    .or_default();
                entry.0 += usize::from(gap > tie_ns);
                entry.1 += usize::from(gap < -tie_ns);
                entry.2 += 1;
            }
        }
    }
    counts
}

fn verdict(before: usize, after: usize, iterations: usize) -> Order {
    if 2 * before > iterations {
        Order::Before
    } else if 2 * after > iterations {
        Order::After
    } else {
        Order::Unsettled
    }
}

fn order_verdicts(a: &Timeline, b: &Timeline, options: &DiffOptions) -> Vec<OrderVerdict> {
    let counts_a = order_counts(a, options);
    let counts_b = order_counts(b, options);
    counts_a
        .into_iter()
        .filter_map(|(key, (a_before, a_after, a_iterations))| {
            let &(b_before, b_after, b_iterations) = counts_b.get(&key)?;
            let (rank, first, second) = key;
            Some(OrderVerdict {
                rank,
                first,
                second,
                a: verdict(a_before, a_after, a_iterations),
                b: verdict(b_before, b_after, b_iterations),
                a_before,
                a_iterations,
                b_before,
                b_iterations,
            })
        })
        .collect()
}

/// The ranks a finding concerns: each it stands for (a finding made once for a class of ranks,
/// docs/scale.md), else its own; `None` for a finding of no rank.
fn finding_ranks(finding: &Finding) -> Option<RankSet> {
    let ranks = finding.ranks();
    (!ranks.is_empty()).then_some(ranks)
}

/// What identifies a finding across runs besides the ranks it concerns: kind, iteration and op
/// name.
type FindingKey<'a> = (&'static str, Option<u32>, &'a str);

fn finding_key<'a>(timeline: &'a Timeline, finding: &Finding) -> FindingKey<'a> {
    let op = finding
        .op
        .and_then(|op| timeline.ops.get(op as usize))
        .map_or("-", |op| op.name.as_str());
    (finding.kind.as_str(), finding.iteration, op)
}

/// The findings of `first` that some rank they concern did not make in `second`, each narrowed
/// to those ranks: a class's finding that one of its members lacks in `second` names that
/// member, not the class's lowest rank. A finding made once for a class is each member's:
/// another run, measured or with `--detail ranks`, holds one finding per rank.
fn findings_only_in(first: &Timeline, second: &Timeline) -> Vec<Finding> {
    // Per key: the ranks that made it in `second`, and whether a finding of no rank did.
    let mut made: HashMap<FindingKey, (RankSet, bool)> = HashMap::new();
    for finding in &second.findings {
        let entry = made.entry(finding_key(second, finding)).or_default();
        match finding_ranks(finding) {
            Some(ranks) => entry.0 = entry.0.union(&ranks),
            None => entry.1 = true,
        }
    }
    first
        .findings
        .iter()
        .filter_map(|f| {
            let made = made.get(&finding_key(first, f));
            let Some(ranks) = finding_ranks(f) else {
                return (!made.is_some_and(|&(_, rankless)| rankless)).then(|| f.clone());
            };
            let missing = RankSet::from_ranks(
                ranks
                    .iter()
                    .filter(|&rank| !made.is_some_and(|(set, _)| set.contains(rank))),
            );
            if missing.is_empty() {
                None
            } else if missing.count() == ranks.count() {
                Some(f.clone())
            } else {
                Some(f.narrowed_to(missing))
            }
        })
        .collect()
}

/// The findings of one side as the report prints them: a finding names every rank it stands
/// for, and findings that differ only in the `[Rank r]` they open with (and the group ranks a
/// store timeout names) are one line.
fn finding_lines(findings: &[Finding]) -> Vec<String> {
    crate::text::merge_by_rank(
        findings
            .iter()
            .map(|f| (f.kind, f.rank, &f.stands_for, f.message.as_str())),
        false,
    )
    .into_iter()
    .map(|(kind, text)| format!("{}: {text}", kind.as_str()))
    .collect()
}

/// Lines `prefix + rank + suffix` that differ only in their rank, as one line naming all their
/// ranks (`rank 3`, `ranks 0-2,4-99999; 99,999 ranks`), in order of first appearance: the ranks
/// of a folded run's class differ alike, and a diff at 100,000 ranks stays a few lines.
fn lines_by_ranks(lines: impl IntoIterator<Item = (u32, String, String)>) -> Vec<String> {
    let mut groups: Vec<((String, String), Vec<u32>)> = Vec::new();
    let mut index: HashMap<(String, String), usize> = HashMap::new();
    for (rank, prefix, suffix) in lines {
        let key = (prefix, suffix);
        match index.get(&key) {
            Some(&i) => groups[i].1.push(rank),
            None => {
                index.insert(key.clone(), groups.len());
                groups.push((key, vec![rank]));
            }
        }
    }
    groups
        .into_iter()
        .map(|((prefix, suffix), ranks)| {
            let ranks = RankSet::from_ranks(ranks);
            let named = match ranks.count() {
                1 => format!("rank {ranks}"),
                count => format!("ranks {ranks}; {} ranks", sim::ranks::thousands(count)),
            };
            format!("{prefix}{named}{suffix}")
        })
        .collect()
}

/// Compares two Timelines of one scenario (B against the reference A).
pub fn diff(a: &Timeline, b: &Timeline, options: &DiffOptions) -> Diff {
    let (times_a, times_b) = (op_times(a), op_times(b));
    let (ops, mut all_abs) = op_deltas((a, &times_a), &times_b, options);
    let names_a = op_names(a);
    let names_b = op_names(b);
    let summary = TIME_NAMES
        .iter()
        .zip(all_abs.iter_mut())
        .map(|(time, values)| {
            values.sort_by(f64::total_cmp);
            DeltaSummary {
                time: time.to_string(),
                samples: values.len(),
                median_abs_us: median(values),
                p90_abs_us: percentile_sorted(values, 0.9),
                max_abs_us: values.last().copied().unwrap_or(0.0),
            }
        })
        .collect::<Vec<_>>();
    let mut worst_ops: Vec<OpDelta> = ops
        .iter()
        .filter(|op| op.largest_abs_delta_us() > 0.0)
        .cloned()
        .collect();
    worst_ops.sort_by(|x, y| {
        y.largest_abs_delta_us()
            .total_cmp(&x.largest_abs_delta_us())
    });
    worst_ops.truncate(options.worst_op_count);
    let metrics = metric_deltas(a, b, options);
    let verdicts = order_verdicts(a, b, options);
    let order_disagreements: Vec<OrderVerdict> =
        verdicts.iter().filter(|v| v.disagrees()).cloned().collect();
    let findings_only_in_a = findings_only_in(a, b);
    let findings_only_in_b = findings_only_in(b, a);
    let unfinished = unfinished::compare(a, b);
    let watchdog_disagreements = watchdog::compare(a, b, options);

    let mut exceeded = Vec::new();
    let mut op_lines = Vec::new();
    for op in ops.iter().filter(|op| op.exceeds) {
        for (time, delta) in TIME_NAMES
            .iter()
            .zip([op.host_return, op.gpu_start, op.gpu_end])
        {
            if let Some(d) = delta.filter(|d| d.exceeds(options)) {
                op_lines.push((
                    op.rank,
                    format!("op {} (", op.op),
                    format!(
                        "): {time} {:+.1} µs ({:.1} → {:.1} µs after the iteration start)",
                        d.delta_us, d.a_us, d.b_us
                    ),
                ));
            }
        }
    }
    exceeded.extend(lines_by_ranks(op_lines));
    exceeded.extend(metrics.iter().filter(|m| m.exceeds).map(metric_line));
    exceeded.extend(lines_by_ranks(order_disagreements.iter().map(|v| {
        (
            v.rank,
            "order (".to_string(),
            format!(
                "): {} before {} in {}/{} iterations of A, {}/{} of B",
                v.first, v.second, v.a_before, v.a_iterations, v.b_before, v.b_iterations
            ),
        )
    })));
    for (side, list) in [("A", &findings_only_in_a), ("B", &findings_only_in_b)] {
        for line in finding_lines(list) {
            exceeded.push(format!("finding only in {side}: {line}"));
        }
    }
    exceeded.extend(unfinished::lines(&unfinished.disagreements));
    exceeded.extend(watchdog::lines(&watchdog_disagreements));
    let ops_only_in_a: Vec<String> = names_a.difference(&names_b).cloned().collect();
    let ops_only_in_b: Vec<String> = names_b.difference(&names_a).cloned().collect();
    for name in ops_only_in_a.iter().chain(&ops_only_in_b) {
        exceeded.push(format!("op {name} is in one Timeline only"));
    }
    // A summarised Timeline keeps the records of the ranks and iterations it was asked to
    // (`--records-for`): records missing there are by design, not a difference.
    let whole = a.summary.is_none() && b.summary.is_none();
    let ranks_of = |t: &Timeline| -> BTreeSet<u32> {
        t.ranks
            .iter()
            .filter(|r| r.has_records())
            .map(|r| r.rank)
            .collect()
    };
    let (ranks_a, ranks_b) = (ranks_of(a), ranks_of(b));
    let only = |first: &BTreeSet<u32>, second: &BTreeSet<u32>| -> Vec<u32> {
        if whole {
            first.difference(second).copied().collect()
        } else {
            Vec::new()
        }
    };
    let ranks_only_in_a = only(&ranks_a, &ranks_b);
    let ranks_only_in_b = only(&ranks_b, &ranks_a);
    for (side, ranks) in [("A", &ranks_only_in_a), ("B", &ranks_only_in_b)] {
        if !ranks.is_empty() {
            let ranks = RankSet::from_ranks(ranks.iter().copied());
            exceeded.push(format!("rank(s) {ranks} ran ops in {side} only"));
        }
    }
    let both: BTreeSet<u32> = ranks_a.intersection(&ranks_b).copied().collect();
    let calls_only = |times_first: &OpTimes, times_second: &OpTimes| -> Vec<(u32, String, usize)> {
        if !whole {
            return Vec::new();
        }
        let mut counts: BTreeMap<(u32, String), usize> = BTreeMap::new();
        for (rank, iteration, op) in times_first.keys() {
            if both.contains(rank) && !times_second.contains_key(&(*rank, *iteration, op.clone())) {
                *counts.entry((*rank, op.clone())).or_default() += 1;
            }
        }
        counts
            .into_iter()
            .map(|((rank, op), n)| (rank, op, n))
            .collect()
    };
    let calls_only_in_a = calls_only(&times_a, &times_b);
    let calls_only_in_b = calls_only(&times_b, &times_a);
    for (side, list) in [("A", &calls_only_in_a), ("B", &calls_only_in_b)] {
        exceeded.extend(lines_by_ranks(list.iter().map(|(rank, op, iterations)| {
            (
                *rank,
                format!("op {op} ("),
                format!("): {iterations} measured iteration(s) ran in {side} only"),
            )
        })));
    }
    let identical = summary.iter().all(|s| s.max_abs_us == 0.0)
        && metrics.iter().all(|m| m.a == m.b)
        && verdicts.iter().all(|v| v.a == v.b)
        && findings_only_in_a.is_empty()
        && findings_only_in_b.is_empty()
        && ops_only_in_a.is_empty()
        && ops_only_in_b.is_empty()
        && ranks_only_in_a.is_empty()
        && ranks_only_in_b.is_empty()
        && calls_only_in_a.is_empty()
        && calls_only_in_b.is_empty()
        && unfinished.disagreements.is_empty()
        && watchdog_disagreements.is_empty();
    let (a, b) = (side(a), side(b));
    Diff {
        unlike_scenarios: unlike_scenarios(&a, &b),
        a,
        b,
        options: *options,
        ops,
        ops_only_in_a,
        ops_only_in_b,
        ranks_only_in_a,
        ranks_only_in_b,
        calls_only_in_a,
        calls_only_in_b,
        summary,
        worst_ops,
        metrics,
        order_pairs: verdicts.len(),
        order_pairs_agreeing: verdicts.len() - order_disagreements.len(),
        order_disagreements,
        findings_only_in_a,
        findings_only_in_b,
        identical,
        exceeded,
        summarised: !whole,
        unfinished_ranks: unfinished.ranks,
        unfinished_disagreements: unfinished.disagreements,
        watchdog_disagreements,
    }
}

fn fmt_time(delta: Option<TimeDelta>) -> String {
    delta.map_or("-".into(), |d| format!("{:+.1}", d.delta_us))
}

/// The diff as the text `c10dsim diff` prints.
pub fn render_diff(diff: &Diff) -> String {
    let mut out = String::new();
    let describe = |s: &Side| {
        format!(
            "{} ({}, {}, seed {}, {})",
            s.scenario,
            crate::text::counted(u64::from(s.ranks), "rank"),
            s.source,
            s.seed,
            s.machine
        )
    };
    let _ = writeln!(out, "A: {}", describe(&diff.a));
    let _ = writeln!(out, "B: {}", describe(&diff.b));
    let _ = writeln!(
        out,
        "tolerance: {}% and {} µs; order tie {} µs",
        diff.options.tolerance_pct, diff.options.tolerance_us, diff.options.order_tie_us
    );
    let _ = writeln!(out, "\n|Δ| (B − A), times since each iteration's start:");
    let rows: Vec<Vec<String>> = diff
        .summary
        .iter()
        .map(|s| {
            // With no sample there is no median to print: "-", not a 0 that reads as agreement.
            let value = |us: f64| {
                if s.samples == 0 {
                    "-".to_string()
                } else {
                    format!("{us:.3}")
                }
            };
            vec![
                s.time.to_string(),
                s.samples.to_string(),
                value(s.median_abs_us),
                value(s.p90_abs_us),
                value(s.max_abs_us),
            ]
        })
        .collect();
    out.push_str(&table(
        &["time", "samples", "median µs", "p90 µs", "max µs"],
        &rows,
    ));
    if !diff.worst_ops.is_empty() {
        let _ = writeln!(out, "\nworst ops (median Δ µs):");
        let rows: Vec<Vec<String>> = diff
            .worst_ops
            .iter()
            .map(|op| {
                vec![
                    op.rank.to_string(),
                    op.op.clone(),
                    fmt_time(op.host_return),
                    fmt_time(op.gpu_start),
                    fmt_time(op.gpu_end),
                ]
            })
            .collect();
        out.push_str(&table(
            &["rank", "op", "host_return", "gpu_start", "gpu_end"],
            &rows,
        ));
    }
    let _ = writeln!(out, "\nmetrics (medians):");
    let rows: Vec<Vec<String>> = diff
        .metrics
        .iter()
        .map(|m| {
            vec![
                m.metric.clone(),
                format!("{:.3}", m.a),
                format!("{:.3}", m.b),
                m.ratio.map_or("-".into(), |r| format!("{r:.3}")),
                m.error_pct.map_or("-".into(), |e| format!("{e:.1}%")),
                if m.exceeds { "!" } else { "" }.to_string(),
            ]
        })
        .collect();
    out.push_str(&table(&["metric", "A", "B", "B/A", "error", "over"], &rows));
    let _ = writeln!(
        out,
        "\nordering verdicts: {}/{} pairs agree",
        diff.order_pairs_agreeing, diff.order_pairs
    );
    for line in lines_by_ranks(diff.order_disagreements.iter().map(|v| {
        (
            v.rank,
            "  ".to_string(),
            format!(
                ": {} before {}: A {}/{}, B {}/{}",
                v.first, v.second, v.a_before, v.a_iterations, v.b_before, v.b_iterations
            ),
        )
    })) {
        let _ = writeln!(out, "{line}");
    }
    if diff.unfinished_ranks > 0 {
        let disagreeing: BTreeSet<u32> = (diff.unfinished_disagreements.iter())
            .map(|d| d.rank)
            .collect();
        let _ = writeln!(
            out,
            "where the ranks stopped: {}/{} ranks agree",
            diff.unfinished_ranks - disagreeing.len(),
            diff.unfinished_ranks
        );
        for line in unfinished::lines(&diff.unfinished_disagreements) {
            let _ = writeln!(out, "  {line}");
        }
    }
    if !diff.watchdog_disagreements.is_empty() {
        let _ = writeln!(
            out,
            "watchdog and main-thread records (count, first time) that differ:"
        );
        for line in watchdog::lines(&diff.watchdog_disagreements) {
            let _ = writeln!(out, "  {line}");
        }
    }
    for (side, list) in [
        ("A", &diff.findings_only_in_a),
        ("B", &diff.findings_only_in_b),
    ] {
        for line in finding_lines(list) {
            let _ = writeln!(out, "finding only in {side}: {line}");
        }
    }
    if diff.ops.is_empty()
        && diff.ops_only_in_a.is_empty()
        && diff.ops_only_in_b.is_empty()
        && diff.ranks_only_in_a.is_empty()
        && diff.ranks_only_in_b.is_empty()
    {
        let why = if diff.summarised {
            "a summarised Timeline (--summary) keeps only the records --records-for names, and \
             no op kept its records on both sides: nothing was compared op by op, only the \
             summaries' metrics"
        } else {
            "no op ran in either Timeline: nothing was compared op by op"
        };
        let _ = writeln!(out, "\n{why}");
    }
    if diff.identical && diff.summarised {
        let _ = writeln!(out, "\nidentical in what was compared: no differences");
    } else if diff.identical {
        let _ = writeln!(out, "\nidentical: no differences");
    } else if diff.within_tolerance() {
        let _ = writeln!(out, "\nwithin tolerance");
    } else {
        let _ = writeln!(out, "\nexceeds tolerance ({}):", diff.exceeded.len());
        for line in &diff.exceeded {
            let _ = writeln!(out, "  {line}");
        }
    }
    out
}

#[cfg(test)]
mod tests;
