//! The fidelity table (docs/fidelity.md): per scenario and metric, the simulator and the
//! hardware backend against PyTorch measured through `c10dsim torch`, PyTorch's own run-to-run
//! spread, and the ordering and outcome verdicts; the caching allocator's peaks against
//! PyTorch's (`memory`). Pure: Timelines in, a table out.

mod memory;

use crate::diff::{self, DiffOptions};
use crate::metrics;
use crate::text::table;
use serde::{Deserialize, Serialize};
use sim::scenario::Scenario;
use sim::timeline::{Timeline, WatchdogEvent};
use std::collections::BTreeSet;

pub use memory::{memory_run_mismatch, MeasuredFigure, MeasuredMemory, MemoryRow, MemorySource};

/// One scenario's Timelines: the simulation at the measured world size, the hardware backend's
/// run where there is one, every PyTorch run (separate processes) and the PyTorch runs made for
/// the memory table alone (each found a run of the same program by [`memory_run_mismatch`]);
/// the scenario as simulated, whose tensors and ops say what the interpreter allocated itself.
pub struct ScenarioRuns {
    pub name: String,
    pub scenario: Scenario,
    pub simulated: Timeline,
    pub hw: Option<Timeline>,
    pub torch: Vec<Timeline>,
    pub memory_runs: Vec<Timeline>,
}

/// Which side of the machine a metric times.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MetricSide {
    /// A host call's duration (`host_call_us`, `wait_us`, host-clock measures).
    Host,
    /// GPU work (`stream_interval_us`, `kernel_us`, GPU-clock measures).
    Gpu,
    /// A share or an overlap: shown, not in the error medians.
    Fraction,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MetricRow {
    pub scenario: String,
    pub metric: String,
    pub side: MetricSide,
    pub simulated: f64,
    pub hw: Option<f64>,
    /// Median over the PyTorch runs of each run's median.
    pub torch: f64,
    /// Largest minus smallest of the runs' values.
    pub torch_spread: f64,
    pub torch_runs: usize,
    /// |simulated − torch| / torch, percent (none where torch is 0).
    pub simulated_error_pct: Option<f64>,
    pub hw_error_pct: Option<f64>,
    /// |simulated − torch| ≤ the spread: PyTorch's runs differ by as much (none with fewer
    /// than two runs: no spread was measured).
    pub simulated_within_spread: Option<bool>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OutcomeRow {
    pub scenario: String,
    /// Finding kinds of the simulation, and of the newest PyTorch run (the last given).
    pub simulated_findings: Vec<String>,
    pub torch_findings: Vec<String>,
    /// How the process ended: `ran to the end`, or the last `exit` record's message.
    pub simulated_end: String,
    pub torch_end: String,
    /// Ordering pairs of the newest PyTorch run against the simulation (`diff`'s verdicts).
    pub order_pairs: usize,
    pub order_pairs_agreeing: usize,
    pub agree: bool,
    /// Ranks the PyTorch run launched, where fewer than the scenario's: it ran the lower
    /// ranks' part of the program, and what the others do (their faults) did not happen, so
    /// the outcome is not compared (`agree` is false).
    pub launched_of: Option<(usize, u32)>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fidelity {
    pub metrics: Vec<MetricRow>,
    pub outcomes: Vec<OutcomeRow>,
    pub memory: Vec<MemoryRow>,
    /// Median simulated error over GPU-side rows, and the rows counted.
    pub gpu_median_error_pct: Option<f64>,
    pub gpu_rows: usize,
    pub host_median_error_pct: Option<f64>,
    pub host_rows: usize,
    pub host_within_spread: usize,
    /// Host-side rows with at least two PyTorch runs (a spread to be within).
    pub host_rows_with_spread: usize,
    /// PyTorch's own median run-to-run spread (largest − smallest run over the median run, %)
    /// over the GPU-side and the host-side rows with two runs or more.
    pub gpu_median_spread_pct: Option<f64>,
    pub host_median_spread_pct: Option<f64>,
    pub hw_median_error_pct: Option<f64>,
    pub hw_rows: usize,
}

fn median(values: &mut [f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let n = values.len();
    Some(if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    })
}

fn error_pct(value: f64, reference: f64) -> Option<f64> {
    (reference != 0.0).then(|| (value - reference).abs() / reference.abs() * 100.0)
}

fn side_of(timeline: &Timeline, metric: &str, unit: &str) -> MetricSide {
    if unit == "fraction" {
        return MetricSide::Fraction;
    }
    if metric.ends_with(".host_call_us") || metric.ends_with(".wait_us") {
        return MetricSide::Host;
    }
    let host_measure = metric.strip_prefix("measure.").is_some_and(|name| {
        timeline
            .scenario
            .measures
            .iter()
            .any(|m| m.name == name && m.clock == "host")
    });
    if host_measure {
        MetricSide::Host
    } else {
        MetricSide::Gpu
    }
}

fn lookup(values: &[(String, &'static str, f64)], metric: &str) -> Option<f64> {
    values
        .iter()
        .find(|(name, _, _)| name == metric)
        .map(|(_, _, value)| *value)
}

/// The kinds of a run's findings, races aside. A timeout a `wait()` raised and the program
/// caught counts as `wait_timeout` also where the Timeline recorded only the exception (the
/// torch engine wrote no finding for a caught one before 2026-12-02).
fn finding_kinds(timeline: &Timeline) -> Vec<String> {
    let mut kinds: BTreeSet<&str> = timeline
        .findings
        .iter()
        .filter(|f| f.kind != sim::timeline::FindingKind::Race)
        .map(|f| f.kind.as_str())
        .collect();
    let caught_wait_timeout = timeline.ranks.iter().flat_map(|r| &r.exceptions).any(|e| {
        let message = e.message.to_ascii_lowercase();
        timeline
            .ops
            .get(e.op as usize)
            .is_some_and(|op| op.key == "wait")
            && (message.contains("timed out") || message.contains("timeout"))
    });
    if caught_wait_timeout {
        kinds.insert(sim::timeline::FindingKind::WaitTimeout.as_str());
    }
    kinds.into_iter().map(str::to_string).collect()
}

/// How the run's process ended: the last `exit` record, else a launcher that did not exit 0
/// (a measured run), else `ran to the end`. An exit is also given from the first op's call: a
/// measured run's clock starts with its process, before the process group's setup, which the
/// scenarios' programs mostly leave out (0.46–0.51 s in the PyTorch runs).
fn end_of(timeline: &Timeline) -> String {
    if let Some(exit) = timeline
        .watchdog
        .iter()
        .rev()
        .find(|record| record.event == WatchdogEvent::Exit)
    {
        let first_op_ns = (timeline.ranks.iter())
            .flat_map(|rank| rank.host.iter().map(|call| call.start_ns))
            .min();
        let seconds = |ns: u64| ns as f64 / 1e9;
        return match first_op_ns {
            Some(first) if first <= exit.at_ns => format!(
                "exited at {:.3} s ({:.3} s after the first op)",
                seconds(exit.at_ns),
                seconds(exit.at_ns - first)
            ),
            _ => format!("exited at {:.3} s", seconds(exit.at_ns)),
        };
    }
    match timeline.machine.get("launcher_exit_status") {
        Some(status) if status != "0" => format!("launcher exit status {status}"),
        _ => "ran to the end".to_string(),
    }
}

/// Whether two ends say the same thing: both ran to the end, or neither did.
fn same_end(a: &str, b: &str) -> bool {
    (a == "ran to the end") == (b == "ran to the end")
}

type Rows = (Vec<MetricRow>, Option<OutcomeRow>, Option<MemoryRow>);

fn scenario_rows(runs: &ScenarioRuns) -> Rows {
    let Some(first) = runs.torch.first() else {
        return (Vec::new(), None, None);
    };
    let simulated = diff::named_metrics(&metrics::report(&runs.simulated));
    let hw = runs
        .hw
        .as_ref()
        .map(|timeline| diff::named_metrics(&metrics::report(timeline)));
    let torch: Vec<Vec<(String, &'static str, f64)>> = runs
        .torch
        .iter()
        .map(|timeline| diff::named_metrics(&metrics::report(timeline)))
        .collect();
    let mut rows = Vec::new();
    for (metric, unit, _) in &torch[0] {
        let Some(sim_value) = lookup(&simulated, metric) else {
            continue;
        };
        let mut values: Vec<f64> = torch.iter().filter_map(|run| lookup(run, metric)).collect();
        let spread = values.iter().copied().fold(f64::NEG_INFINITY, f64::max)
            - values.iter().copied().fold(f64::INFINITY, f64::min);
        let runs_counted = values.len();
        let Some(torch_value) = median(&mut values) else {
            continue;
        };
        let hw_value = hw.as_ref().and_then(|hw| lookup(hw, metric));
        rows.push(MetricRow {
            scenario: runs.name.clone(),
            metric: metric.clone(),
            side: side_of(first, metric, unit),
            simulated: sim_value,
            hw: hw_value,
            torch: torch_value,
            torch_spread: spread,
            torch_runs: runs_counted,
            simulated_error_pct: error_pct(sim_value, torch_value),
            hw_error_pct: hw_value.and_then(|value| error_pct(value, torch_value)),
            simulated_within_spread: (runs_counted >= 2)
                .then(|| (sim_value - torch_value).abs() <= spread),
        });
    }
    // Outcomes from the newest run: the interpreter that wrote it read the most of PyTorch's
    // own log (earlier runs may predate a reader).
    let newest = runs.torch.last().unwrap_or(first);
    let compared = diff::diff(&runs.simulated, newest, &DiffOptions::default());
    let simulated_end = end_of(&runs.simulated);
    let torch_end = end_of(newest);
    let simulated_findings = finding_kinds(&runs.simulated);
    let torch_findings = finding_kinds(newest);
    let launched = newest.ranks.len();
    let launched_of =
        (launched < newest.scenario.ranks as usize).then_some((launched, newest.scenario.ranks));
    let agree = launched_of.is_none()
        && simulated_findings == torch_findings
        && same_end(&simulated_end, &torch_end)
        && compared.order_disagreements.is_empty();
    let outcome = OutcomeRow {
        scenario: runs.name.clone(),
        simulated_findings,
        torch_findings,
        simulated_end,
        torch_end,
        order_pairs: compared.order_pairs,
        order_pairs_agreeing: compared.order_pairs_agreeing,
        agree,
        launched_of,
    };
    if launched_of.is_some() {
        // The timings are of another program than the one simulated.
        rows.clear();
    }
    let memory = memory::memory_row(
        &runs.name,
        &runs.scenario,
        &runs.simulated,
        &runs.torch,
        &runs.memory_runs,
        launched_of,
    );
    (rows, Some(outcome), memory)
}

/// The table over every scenario, in the order given.
pub fn fidelity(scenarios: &[ScenarioRuns]) -> Fidelity {
    let mut metrics = Vec::new();
    let mut outcomes = Vec::new();
    let mut memory = Vec::new();
    for runs in scenarios {
        let (rows, outcome, memory_row) = scenario_rows(runs);
        metrics.extend(rows);
        outcomes.extend(outcome);
        memory.extend(memory_row);
    }
    let errors = |side: MetricSide, hw: bool| -> Vec<f64> {
        metrics
            .iter()
            .filter(|row| row.side == side || (hw && row.side != MetricSide::Fraction))
            .filter_map(|row| {
                if hw {
                    row.hw_error_pct
                } else {
                    row.simulated_error_pct
                }
            })
            .collect()
    };
    let mut gpu = errors(MetricSide::Gpu, false);
    let mut host = errors(MetricSide::Host, false);
    let mut hw = errors(MetricSide::Gpu, true);
    let host_within_spread = metrics
        .iter()
        .filter(|row| row.side == MetricSide::Host && row.simulated_within_spread == Some(true))
        .count();
    let host_rows_with_spread = metrics
        .iter()
        .filter(|row| row.side == MetricSide::Host && row.simulated_within_spread.is_some())
        .count();
    let spreads = |side: MetricSide| -> Vec<f64> {
        metrics
            .iter()
            .filter(|row| row.side == side && row.torch_runs >= 2)
            .filter_map(|row| error_pct(row.torch + row.torch_spread, row.torch))
            .collect()
    };
    Fidelity {
        host_rows_with_spread,
        gpu_median_spread_pct: median(&mut spreads(MetricSide::Gpu)),
        host_median_spread_pct: median(&mut spreads(MetricSide::Host)),
        gpu_rows: gpu.len(),
        gpu_median_error_pct: median(&mut gpu),
        host_rows: host.len(),
        host_median_error_pct: median(&mut host),
        host_within_spread,
        hw_rows: hw.len(),
        hw_median_error_pct: median(&mut hw),
        metrics,
        outcomes,
        memory,
    }
}

fn number(value: f64) -> String {
    format!("{value:.3}")
}

/// A summary median, to two decimals: a target of 5% is not met by 5.01%.
fn median_percent(value: Option<f64>) -> String {
    value.map_or_else(|| "–".to_string(), |v| format!("{v:.2}%"))
}

fn percent(value: Option<f64>) -> String {
    value.map_or_else(|| "–".to_string(), |v| format!("{v:.1}%"))
}

/// The four verdicts over every scenario, as sentences without their labels: the simulator
/// against PyTorch (with PyTorch's own spread), hw against PyTorch, the outcomes, memory.
fn summary_sentences(fidelity: &Fidelity) -> [String; 4] {
    let spread = if fidelity.host_rows_with_spread == 0 {
        "none with a measured run-to-run spread (one PyTorch run each)".to_string()
    } else {
        format!(
            "{} of the {} with two runs or more within PyTorch's own run-to-run spread \
             (PyTorch's median run-to-run spread, largest − smallest run over the median: {} \
             GPU-side, {} host-side)",
            fidelity.host_within_spread,
            fidelity.host_rows_with_spread,
            percent(fidelity.gpu_median_spread_pct),
            percent(fidelity.host_median_spread_pct)
        )
    };
    let comparable = |o: &&OutcomeRow| o.launched_of.is_none();
    [
        format!(
            "median error {} over {} GPU-side metrics, {} over {} host-side metrics, {spread}",
            median_percent(fidelity.gpu_median_error_pct),
            fidelity.gpu_rows,
            median_percent(fidelity.host_median_error_pct),
            fidelity.host_rows,
        ),
        format!(
            "median error {} over {} timing metrics",
            fidelity
                .hw_median_error_pct
                .map_or_else(|| "–".into(), |v| format!("{v:.1}%")),
            fidelity.hw_rows,
        ),
        format!(
            "{} of {} scenarios agree ({} not comparable: the PyTorch run launched fewer ranks \
             than the scenario has)",
            fidelity.outcomes.iter().filter(|o| o.agree).count(),
            fidelity.outcomes.iter().filter(comparable).count(),
            fidelity.outcomes.len() - fidelity.outcomes.iter().filter(comparable).count(),
        ),
        memory::memory_sentence(&fidelity.memory),
    ]
}

const OUTCOME_HEADER: [&str; 7] = [
    "scenario",
    "sim findings",
    "torch findings",
    "sim process",
    "torch process",
    "orderings agreeing",
    "verdict",
];

/// One row per scenario under [`OUTCOME_HEADER`].
fn outcome_rows(fidelity: &Fidelity) -> Vec<Vec<String>> {
    fidelity
        .outcomes
        .iter()
        .map(|o| {
            vec![
                o.scenario.clone(),
                list(&o.simulated_findings),
                list(&o.torch_findings),
                o.simulated_end.clone(),
                o.torch_end.clone(),
                format!("{}/{}", o.order_pairs_agreeing, o.order_pairs),
                match o.launched_of {
                    Some((launched, ranks)) => format!(
                        "not comparable: {launched} of {ranks} ranks launched, the others' part (faults included) not run"
                    ),
                    None if o.agree => "agree".to_string(),
                    None => "differ".to_string(),
                },
            ]
        })
        .collect()
}

/// The table as the Markdown of docs/fidelity.md's generated part.
pub fn render_markdown(fidelity: &Fidelity) -> String {
    let [simulator, hw, outcomes, memory] = summary_sentences(fidelity);
    let mut out = format!(
        "**Simulator vs PyTorch:** {simulator}. **hw vs PyTorch:** {hw}. \
         **Outcome verdicts:** {outcomes}. **Memory:** {memory}.\n\n"
    );
    out.push_str("### Outcomes and orderings\n\n");
    out.push_str(&markdown_table(&OUTCOME_HEADER, &outcome_rows(fidelity)));
    out.push_str("\n### Memory\n\n(bytes)\n\n");
    out.push_str(&markdown_table(
        &memory::MEMORY_HEADER,
        &memory::memory_rows(&fidelity.memory),
    ));
    out.push_str("\n### Metrics (µs, fractions where named)\n\n");
    let rows: Vec<Vec<String>> = fidelity
        .metrics
        .iter()
        .map(|row| {
            vec![
                row.scenario.clone(),
                row.metric.clone(),
                format!("{:?}", row.side).to_lowercase(),
                number(row.simulated),
                row.hw.map_or_else(|| "–".into(), number),
                number(row.torch),
                if row.torch_runs < 2 {
                    "– (1 run)".to_string()
                } else {
                    format!("{} ({} runs)", number(row.torch_spread), row.torch_runs)
                },
                percent(row.simulated_error_pct),
                percent(row.hw_error_pct),
                match row.simulated_within_spread {
                    Some(true) => "yes",
                    Some(false) => "no",
                    None => "–",
                }
                .to_string(),
            ]
        })
        .collect();
    out.push_str(&markdown_table(
        &[
            "scenario",
            "metric",
            "side",
            "sim",
            "hw",
            "torch",
            "torch spread",
            "sim error",
            "hw error",
            "sim within spread",
        ],
        &rows,
    ));
    out
}

fn list(kinds: &[String]) -> String {
    if kinds.is_empty() {
        "none".to_string()
    } else {
        kinds.join(", ")
    }
}

fn markdown_table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut out = format!("| {} |\n", header.join(" | "));
    out.push_str(&format!("|{}\n", "---|".repeat(header.len())));
    for row in rows {
        out.push_str(&format!("| {} |\n", row.join(" | ")));
    }
    out
}

/// The plain-text form `c10dsim fidelity` prints without `-o`: what the Markdown says, as
/// plain tables.
pub fn render_text(fidelity: &Fidelity) -> String {
    let [simulator, hw, outcomes, memory] = summary_sentences(fidelity);
    let mut out = format!(
        "simulator vs PyTorch: {simulator}\nhw vs PyTorch: {hw}\noutcome verdicts: {outcomes}\n\
         memory: {memory}\n\n"
    );
    out.push_str("outcomes and orderings:\n");
    out.push_str(&table(&OUTCOME_HEADER, &outcome_rows(fidelity)));
    out.push_str("\nmemory (bytes):\n");
    out.push_str(&table(
        &memory::MEMORY_HEADER,
        &memory::memory_rows(&fidelity.memory),
    ));
    out.push_str("\nmetrics (µs; completed_at_wait and overlaps are fractions):\n");
    let rows: Vec<Vec<String>> = fidelity
        .metrics
        .iter()
        .map(|row| {
            vec![
                row.scenario.clone(),
                row.metric.clone(),
                number(row.simulated),
                number(row.torch),
                // One run measures no spread: not a spread of 0.
                if row.torch_runs < 2 {
                    "–".to_string()
                } else {
                    number(row.torch_spread)
                },
                percent(row.simulated_error_pct),
                percent(row.hw_error_pct),
            ]
        })
        .collect();
    out.push_str(&table(
        &[
            "scenario", "metric", "sim", "torch", "spread", "sim_err", "hw_err",
        ],
        &rows,
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use sim::timeline::Source;

    fn parse(text: &str) -> Scenario {
        sim::scenario::parse("fidelity.toml", text).expect("valid scenario")
    }

    fn simulate(text: &str) -> Timeline {
        sim::engine::simulate(&parse(text))
    }

    const SCENARIO: &str = "repeat = 3\nwarmup = 1\n[cluster]\nranks = 1\n[tensors]\nx = \"64MiB\"\n\
        [[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\nasync_op = true\nwork = \"w\"\n[[op]]\nwait = \"w\"\n";

    #[test]
    fn an_exit_is_also_given_from_the_first_op() {
        let mut timeline = simulate(SCENARIO);
        assert_eq!(end_of(&timeline), "ran to the end");
        // A measured run's clock starts with its process: the first op 0.5 s in.
        let first_ns = 500_000_000;
        let shift = first_ns
            - (timeline.ranks.iter())
                .flat_map(|rank| rank.host.iter().map(|call| call.start_ns))
                .min()
                .unwrap();
        for call in timeline.ranks.iter_mut().flat_map(|rank| &mut rank.host) {
            call.start_ns += shift;
            call.end_ns += shift;
        }
        timeline.watchdog.push(sim::timeline::WatchdogRecord {
            rank: 0,
            group: Some(0),
            thread: sim::timeline::ThreadKind::Watchdog,
            event: WatchdogEvent::Exit,
            at_ns: 6_000_000_000,
            message: "taken down".into(),
            stands_for: Default::default(),
        });
        assert_eq!(
            end_of(&timeline),
            "exited at 6.000 s (5.500 s after the first op)"
        );
    }

    #[test]
    fn a_caught_wait_timeout_counts_as_wait_timeout_where_only_the_exception_was_recorded() {
        let mut timeline = simulate(SCENARIO);
        assert!(finding_kinds(&timeline).is_empty());
        let exception = |op: u32, message: &str| sim::timeline::ExceptionRecord {
            iteration: 1,
            op,
            at_ns: 1,
            exception: "DistBackendError".into(),
            message: message.into(),
        };
        // Raised by the all_reduce call (op 0): an aborted communicator, not a timed-out wait.
        timeline.ranks[0]
            .exceptions
            .push(exception(0, "Watchdog caught collective operation timeout"));
        assert!(finding_kinds(&timeline).is_empty());
        timeline.ranks[0].exceptions.push(exception(
            1,
            "[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1) ran for 50 milliseconds before timing out.",
        ));
        assert_eq!(finding_kinds(&timeline), vec!["wait_timeout".to_string()]);
    }

    /// A "measured" copy of a simulation with every kernel `factor` times as long.
    fn stretched(timeline: &Timeline, factor: f64) -> Timeline {
        let mut out = timeline.clone();
        out.source = Source::Torch;
        for rank in &mut out.ranks {
            for c in &mut rank.collectives {
                c.end_ns =
                    c.kernel_start_ns + ((c.end_ns - c.kernel_start_ns) as f64 * factor) as u64;
            }
        }
        out
    }

    #[test]
    fn the_error_is_against_the_median_run_and_the_spread_spans_the_runs() {
        let simulated = simulate(SCENARIO);
        let runs = ScenarioRuns {
            name: "ar".into(),
            scenario: parse(SCENARIO),
            torch: vec![
                stretched(&simulated, 1.25),
                stretched(&simulated, 1.35),
                stretched(&simulated, 1.3),
            ],
            hw: None,
            memory_runs: Vec::new(),
            simulated,
        };
        let table = fidelity(&[runs]);
        let kernel = table
            .metrics
            .iter()
            .find(|row| row.metric == "ar.kernel_us")
            .expect("the kernel row");
        assert_eq!(kernel.side, MetricSide::Gpu);
        assert_eq!(kernel.torch_runs, 3);
        // torch median = 1.3 × sim, so the error is 0.3 / 1.3 of it; the runs span 0.1 × sim.
        let error = kernel.simulated_error_pct.expect("non-zero");
        assert!((error - 100.0 * 0.3 / 1.3).abs() < 0.1, "{error}");
        assert!((kernel.torch_spread / kernel.simulated - 0.1).abs() < 0.01);
        assert_eq!(kernel.simulated_within_spread, Some(false));
        let host = table
            .metrics
            .iter()
            .find(|row| row.metric == "ar.host_call_us")
            .expect("the host row");
        assert_eq!(host.side, MetricSide::Host);
        assert_eq!(host.simulated_error_pct, Some(0.0));
        assert_eq!(host.simulated_within_spread, Some(true));
        assert_eq!(table.outcomes.len(), 1);
        assert!(table.outcomes[0].agree, "{:?}", table.outcomes[0]);
        assert!(render_markdown(&table).contains(
            "2 host-side metrics, 2 of the 2 with two runs or more within PyTorch's own run-to-run spread"
        ));
        // PyTorch's own spread beside it: the host runs are identical, the GPU ones are not.
        assert_eq!(table.host_median_spread_pct, Some(0.0));
        assert!(table.gpu_median_spread_pct.is_some_and(|s| s > 0.0));
        assert!(render_markdown(&table).contains("PyTorch's median run-to-run spread"));
        // The runs held what the simulation did, and the interpreter nothing of its own.
        assert_eq!(table.memory.len(), 1);
        assert_eq!(table.memory[0].differing(), Some(vec![]));
        let markdown = render_markdown(&table);
        assert!(
            markdown.contains("**Memory:** 1 of 1 compared scenarios agree")
                && markdown.contains("### Memory")
                && markdown.contains("| 0 / 0 (derived) | 67108864 | 67108864 (3 runs) |"),
            "{markdown}"
        );
    }

    #[test]
    fn a_killed_torch_run_disagrees_with_a_simulation_that_ran_to_the_end() {
        let simulated = simulate(SCENARIO);
        let mut killed = stretched(&simulated, 1.0);
        killed
            .machine
            .insert("launcher_exit_status".into(), "1".into());
        let table = fidelity(&[ScenarioRuns {
            name: "ar".into(),
            scenario: parse(SCENARIO),
            torch: vec![killed],
            hw: None,
            memory_runs: Vec::new(),
            simulated,
        }]);
        assert!(render_markdown(&table).contains("none with a measured run-to-run spread"));
        let outcome = &table.outcomes[0];
        assert_eq!(outcome.torch_end, "launcher exit status 1");
        assert!(!outcome.agree);
        assert!(render_markdown(&table)
            .contains("| ar | none | none | ran to the end | launcher exit status 1 |"));
        // The plain text says as much: the verdicts, and no spread where one run measured none.
        let text = render_text(&table);
        assert!(
            text.contains("outcome verdicts: 0 of 1 scenarios agree")
                && text.contains("launcher exit status 1")
                && text.contains("differ"),
            "{text}"
        );
        let kernel = text
            .lines()
            .find(|line| line.contains("ar.kernel_us"))
            .expect("the kernel row");
        assert_eq!(kernel.split_whitespace().nth(4), Some("–"), "{text}");
    }

    #[test]
    fn a_run_of_fewer_ranks_than_the_scenario_is_not_compared() {
        let simulated = simulate(SCENARIO);
        let mut partial = stretched(&simulated, 1.0);
        partial.scenario.ranks = 4;
        let table = fidelity(&[ScenarioRuns {
            name: "ar".into(),
            scenario: parse(SCENARIO),
            torch: vec![partial],
            hw: None,
            memory_runs: Vec::new(),
            simulated,
        }]);
        let outcome = &table.outcomes[0];
        assert_eq!(outcome.launched_of, Some((1, 4)));
        assert!(!outcome.agree);
        let text = render_markdown(&table);
        assert!(
            text.contains("0 of 0 scenarios agree (1 not comparable"),
            "{text}"
        );
        assert!(text.contains("not comparable: 1 of 4 ranks launched"));
    }
}
