//! `--trace` (one Chrome trace with every rank, for Perfetto) and `--trace-dir` (a folder with one
//! file per rank, for Holistic Trace Analysis and Perfetto): both streamed to their files
//! (docs/timeline-format.md#traces-for-hta-and-perfetto).

use crate::{stdio, Failure};
use analysis::trace;
use sim::timeline::Timeline;
use std::path::Path;

/// Which ranks a `--trace-dir` folder receives from this process.
pub enum Ranks {
    /// Every rank of the job (`run`): a file of another rank already there would be read by HTA
    /// as part of this run, so it is refused.
    WholeJob,
    /// This process's rank (`hw` under torchrun): the other processes write theirs beside it.
    ThisProcess,
}

/// Writes the single-file trace to `path`, or to standard output for `-`.
pub fn write_trace(path: &Path, timeline: &Timeline) -> Result<(), Failure> {
    crate::stdio::replace(path, |out| trace::write_chrome_trace(timeline, out))
}

/// Writes `rank<N>.pt.trace.json` into `dir` (created if missing) for each rank of `timeline`.
/// A `dir` of `-` was refused before the run (`RunOutputs::check_places`).
pub fn write_trace_dir(dir: &Path, timeline: &Timeline, ranks: Ranks) -> Result<(), Failure> {
    stdio::create_folder(dir)?;
    if let Ranks::WholeJob = ranks {
        refuse_other_ranks(dir, timeline)?;
    }
    let traces = trace::RankTraces::new(timeline);
    let mut batch = stdio::Batch::default();
    for (position, name) in traces.files() {
        batch.add(&dir.join(name), |out| traces.write(position, out))?;
    }
    batch.commit()
}

/// A `rank<N>.pt.trace.json` in `dir` for a rank this run does not have (left by a run with more
/// ranks) is refused: HTA would load it as rank N of this one.
fn refuse_other_ranks(dir: &Path, timeline: &Timeline) -> Result<(), Failure> {
    let entries = std::fs::read_dir(dir)
        .map_err(|error| Failure::input(format!("cannot read {}: {error}", dir.display())))?;
    let mut others: Vec<String> = entries
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .filter(|name| {
            name.strip_prefix("rank")
                .and_then(|rest| rest.strip_suffix(".pt.trace.json"))
                .and_then(|number| number.parse::<u32>().ok())
                .is_some_and(|rank| !timeline.ranks.iter().any(|r| r.rank == rank))
        })
        .collect();
    others.sort();
    match others.first() {
        None => Ok(()),
        Some(first) => Err(Failure::input(format!(
            "{} holds {first}{}, of a rank this run does not have (it has {}); HTA would read it as \
             part of this run: remove it or use another folder",
            dir.display(),
            match others.len() {
                1 => String::new(),
                n => format!(" and {} more", n - 1),
            },
            timeline.ranks.len()
        ))),
    }
}
