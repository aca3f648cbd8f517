//! The replay error (docs/import.md): an imported trace's steps as the trace has them and as
//! the simulation of the imported scenario has them — the step's host time and each stream's
//! busy time (the union of its GPU activities inside the step).

use super::kineto::Trace;
use sim::timeline::{StreamKind, Timeline};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// The name under which ProcessGroupNCCL's internal streams are shown.
pub const INTERNAL: &str = "internal NCCL";

/// One step of one rank.
#[derive(Debug, Clone, PartialEq)]
pub struct StepFigures {
    pub rank: u32,
    pub step: String,
    pub step_ns: u64,
    /// Stream → busy ns within the step.
    pub busy_ns: BTreeMap<String, u64>,
}

/// The total length of the union of intervals, clipped to `[from, to)`.
fn union_ns(mut intervals: Vec<(i64, i64)>, from: i64, to: i64) -> u64 {
    intervals.sort_unstable();
    let mut total = 0i64;
    let mut reach = from;
    for (start, end) in intervals {
        let start = start.max(reach);
        let end = end.min(to);
        if end > start {
            total += end - start;
            reach = end;
        }
    }
    total.max(0) as u64
}

/// The steps as the trace has them: from a step's start to the next one's (the last: to its
/// end), GPU activities per stream named as the import names them.
pub fn traced(trace: &Trace) -> Vec<StepFigures> {
    let mut figures = Vec::new();
    for (index, step) in trace.steps.iter().enumerate() {
        let to = trace
            .steps
            .get(index + 1)
            .map_or(step.end_ns, |next| next.start_ns);
        let mut per_stream: BTreeMap<String, Vec<(i64, i64)>> = BTreeMap::new();
        for op in &trace.gpu {
            let name = trace
                .streams
                .get(&op.stream)
                .map_or(INTERNAL, String::as_str);
            per_stream
                .entry(name.to_string())
                .or_default()
                .push((op.start_ns, op.start_ns + op.duration_ns));
        }
        figures.push(StepFigures {
            rank: trace.rank,
            step: step.name.clone(),
            step_ns: (to - step.start_ns).max(0) as u64,
            busy_ns: per_stream
                .into_iter()
                .map(|(name, intervals)| (name, union_ns(intervals, step.start_ns, to)))
                .collect(),
        });
    }
    figures
}

/// The steps as the simulation has them: between the import's marks (`step_N` … `end`, with
/// the `rN_` prefix of a multi-rank import), on the host clock.
pub fn simulated(timeline: &Timeline) -> Vec<StepFigures> {
    let several = timeline.ranks.len() > 1;
    let mut figures = Vec::new();
    for rank in &timeline.ranks {
        let prefix = if several {
            format!("r{}_", rank.rank)
        } else {
            String::new()
        };
        let mut marks: Vec<(u64, &str)> = rank
            .marks
            .iter()
            .filter_map(|m| {
                let name = timeline.scenario.marks.get(m.mark as usize)?;
                let name = name.strip_prefix(&prefix)?;
                (name.starts_with("step_") || name == "end").then_some((m.host_ns, name))
            })
            .collect();
        marks.sort_unstable();
        let stream_name = |stream: u16| {
            rank.streams.get(usize::from(stream)).map_or(INTERNAL, |s| {
                if s.kind == StreamKind::Nccl {
                    INTERNAL
                } else {
                    s.name.as_str()
                }
            })
        };
        let mut intervals: BTreeMap<&str, Vec<(i64, i64)>> = BTreeMap::new();
        for kernel in &rank.kernels {
            intervals
                .entry(stream_name(kernel.stream))
                .or_default()
                .push((kernel.start_ns as i64, kernel.end_ns as i64));
        }
        for pair in marks.windows(2) {
            let (from, to) = (pair[0].0 as i64, pair[1].0 as i64);
            figures.push(StepFigures {
                rank: rank.rank,
                step: pair[0].1.to_string(),
                step_ns: (to - from).max(0) as u64,
                busy_ns: intervals
                    .iter()
                    .map(|(name, list)| (name.to_string(), union_ns(list.clone(), from, to)))
                    .collect(),
            });
        }
    }
    figures
}

/// Mean and the (min…max) spread of values, in µs.
fn spread(values: &[u64]) -> String {
    if values.is_empty() {
        return "–".to_string();
    }
    let mean = values.iter().sum::<u64>() as f64 / values.len() as f64 / 1e3;
    let min = *values.iter().min().unwrap_or(&0) as f64 / 1e3;
    let max = *values.iter().max().unwrap_or(&0) as f64 / 1e3;
    format!("{mean:.1} ({min:.1}…{max:.1})")
}

/// The relative error of `simulated` against `traced`, in %, of the means.
pub fn error_pct(traced: &[u64], simulated: &[u64]) -> Option<f64> {
    let mean = |v: &[u64]| v.iter().sum::<u64>() as f64 / v.len().max(1) as f64;
    let reference = mean(traced);
    (reference > 0.0 && !simulated.is_empty())
        .then(|| (mean(simulated) - reference) / reference * 100.0)
}

/// The Markdown table: per rank, the step time and each stream's busy time, traced and
/// simulated (mean over steps, with the min…max spread), and the simulation's error.
pub fn render(traced: &[StepFigures], simulated: &[StepFigures]) -> String {
    let mut text = String::from(
        "| rank | figure | traced µs, mean (min…max) | simulated µs, mean (min…max) | error |\n|---|---|---|---|---|\n",
    );
    let ranks: std::collections::BTreeSet<u32> = traced.iter().map(|s| s.rank).collect();
    for rank in ranks {
        let pick = |list: &[StepFigures], figure: Option<&str>| -> Vec<u64> {
            list.iter()
                .filter(|s| s.rank == rank)
                .map(|s| match figure {
                    None => s.step_ns,
                    Some(stream) => s.busy_ns.get(stream).copied().unwrap_or(0),
                })
                .collect()
        };
        let mut streams: Vec<String> = traced
            .iter()
            .chain(simulated)
            .filter(|s| s.rank == rank)
            .flat_map(|s| s.busy_ns.keys().cloned())
            .collect();
        streams.sort();
        streams.dedup();
        let rows = std::iter::once((None, "step time".to_string())).chain(
            streams
                .iter()
                .map(|s| (Some(s.as_str()), format!("busy: {s}"))),
        );
        for (figure, title) in rows {
            let (t, s) = (pick(traced, figure), pick(simulated, figure));
            let error = error_pct(&t, &s).map_or("–".to_string(), |e| format!("{e:+.1}%"));
            let _ = writeln!(
                text,
                "| {rank} | {title} | {} | {} | {error} |",
                spread(&t),
                spread(&s)
            );
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_time_is_the_union_inside_the_window() {
        assert_eq!(union_ns(vec![(0, 10), (5, 20), (30, 40)], 2, 35), 23);
        assert_eq!(union_ns(vec![], 0, 10), 0);
    }

    #[test]
    fn the_error_is_of_the_means() {
        assert_eq!(error_pct(&[100, 100], &[110, 110]), Some(10.0));
        assert_eq!(error_pct(&[], &[1]), None);
    }
}
