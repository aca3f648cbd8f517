//! The join of a `c10dsim torch` run's per-rank Timelines into one (docs/torch.md): each rank's
//! interpreter writes its own Timeline, on its own time 0, and PyTorch's C++ prints on the
//! launcher's stderr what the Python side cannot see. [`join_ranks`] puts the ranks on one
//! axis and adds what none of them wrote:
//! - **A rank cut short.** A rank whose last file is the journal written while an op blocked,
//!   not its final Timeline, ended inside that op without saying so; a rank that wrote nothing
//!   ended before its first journal. Each gets an `exit` record the launcher's status implies
//!   (an inferred exit), the second also an empty rank record.
//! - **PyTorch's log.** The ranks of one host share `CLOCK_MONOTONIC`, so the earliest rank's
//!   origin on both clocks places every line ([`torch_log::LogOrigin`]); its lines become
//!   watchdog records and findings ([`torch_log`]).
//! - **Where an inferred exit goes.** Where the log says how the process ended (the watchdog's
//!   take-down), the inferred exit is dropped; else it moves to the rank's last record, since a
//!   process cannot end before what it logged.
//!
//! Pure: the caller reads the rank files, the launcher's status and its stderr, and passes the
//! join of parts on a common axis (`hw::merge_ranks`, which `hw-merge` uses too) as `merge`.
//! Its tests, on stored runs and PyTorch's log lines, are in `torch_join/tests.rs`.

use crate::torch_log::{self, LogOrigin};
use sim::timeline::{RankTimeline, ThreadKind, Timeline, WatchdogEvent, WatchdogRecord};

/// Where an exit no rank recorded is placed, as its message says.
const INFERRED_EXIT_PLACE: &str =
    "placed at the rank's last record (the end of its last completed op or the start of the call it never returned from, or a later line PyTorch logged for it)";

/// Joins the Timelines of a launch's ranks `0..files.len()`: `files[r]` is the Timeline rank
/// `r` wrote, with the name its errors give it (the file it was read from), or `None` where it
/// wrote none (at least one did). `launcher_status` is the launcher's exit status as the
/// records say it, `log` its stderr; `merge` joins the parts of the ranks that wrote one on a
/// common axis, keeping every part's watchdog records, and its error is the join's.
pub fn join_ranks<E>(
    files: Vec<Option<(String, Timeline)>>,
    launcher_status: &str,
    log: &str,
    merge: impl FnOnce(Vec<(String, Timeline)>) -> Result<Timeline, E>,
) -> Result<Timeline, E> {
    let mut parts = Vec::new();
    let mut silent = Vec::new();
    // Ranks whose end the launcher's status implies but no record of theirs says.
    let mut inferred_exits = Vec::new();
    for (rank, file) in (0..).zip(files) {
        match file {
            Some((name, mut part)) => {
                if note_unfinished(&mut part, rank, launcher_status) {
                    inferred_exits.push(rank);
                }
                parts.push((name, part));
            }
            None => {
                silent.push(rank);
                inferred_exits.push(rank);
            }
        }
    }
    // One host's ranks share CLOCK_MONOTONIC: the earliest rank's pair places every log line.
    let earliest = parts
        .iter()
        .map(|(_, part)| part)
        .min_by_key(|part| origin_ns(part));
    let log_origin = LogOrigin {
        unix_ns: earliest.map_or(0, origin_ns),
        monotonic_ns: earliest
            .and_then(|part| part.machine.get("host_origin_monotonic_ns"))
            .and_then(|text| text.parse().ok()),
    };
    // Every rank's watchdog records, on the common axis.
    let mut timeline = merge(parts)?;
    let mut watchdog = std::mem::take(&mut timeline.watchdog);
    for rank in silent {
        timeline.ranks.push(RankTimeline {
            rank,
            ..RankTimeline::default()
        });
        watchdog.push(WatchdogRecord {
            stands_for: Default::default(),
            rank,
            group: None,
            thread: ThreadKind::Main,
            event: WatchdogEvent::Exit,
            at_ns: 0,
            message: format!(
                "[Rank {rank}] the process ended without writing its Timeline (launcher exit status {launcher_status}); {INFERRED_EXIT_PLACE}"
            ),
        });
    }
    // What PyTorch's watchdog logged (its timeout or async error, dump, taking the process
    // down) is on the same wall clock: records on the common axis, and a finding for each Work
    // the watchdog timed out or found an error on, naming the call that made it where the
    // rank's records say which (as the simulator's does).
    let records = torch_log::watchdog_records(log, log_origin, &timeline.scenario.groups);
    let findings = torch_log::log_findings(&timeline, &records);
    timeline.findings.extend(findings);
    // A polling wait's timeout, which a rank wrote at its raise, the log has at its times.
    torch_log::drop_superseded(&mut watchdog, &records);
    watchdog.extend(records);
    place_inferred_exits(&mut watchdog, &inferred_exits);
    timeline.ranks.sort_by_key(|rank| rank.rank);
    // An inferred exit comes after whatever else its rank logged at the same time.
    watchdog.sort_by_key(|record| (record.at_ns, record.rank, is_inferred_exit(record)));
    timeline.watchdog = watchdog;
    timeline.machine.insert(
        "launcher_exit_status".to_string(),
        launcher_status.to_string(),
    );
    Ok(timeline)
}

/// A rank whose last file is the journal written while an op blocked (not its final
/// Timeline) ended inside that op without saying so: an `exit` record says it did, at the end
/// of its last completed op or the start of the call it never returned from
/// (`unfinished_host`), whichever is later, until [`place_inferred_exits`] knows better.
/// Returns whether it added one.
fn note_unfinished(part: &mut Timeline, rank: u32, launcher_status: &str) -> bool {
    let partial = part
        .machine
        .get("journal")
        .is_some_and(|journal| journal.starts_with("partial"));
    let exit_recorded = part
        .watchdog
        .iter()
        .any(|record| record.event == WatchdogEvent::Exit);
    if !partial || exit_recorded {
        return false;
    }
    let at_ns = part
        .ranks
        .iter()
        .flat_map(|rank| {
            let returned = rank.host.iter().map(|call| call.end_ns);
            returned.chain(rank.unfinished_host.iter().map(|call| call.start_ns))
        })
        .max()
        .unwrap_or(0);
    part.watchdog.push(WatchdogRecord {
        stands_for: Default::default(),
        rank,
        group: None,
        thread: ThreadKind::Main,
        event: WatchdogEvent::Exit,
        at_ns,
        message: format!(
            "[Rank {rank}] the process ended inside a blocking call without writing its final Timeline (launcher exit status {launcher_status}); {INFERRED_EXIT_PLACE}"
        ),
    });
    true
}

/// Each exit that `note_unfinished` or a silent rank implied: dropped where PyTorch's log says
/// how the process ended (the watchdog's take-down), else moved to the rank's last record, since
/// the log often says more than the rank's own file (the watchdog's timeout comes after the last
/// op it completed) and a process cannot end before what it logged.
fn place_inferred_exits(watchdog: &mut Vec<WatchdogRecord>, ranks: &[u32]) {
    for &rank in ranks {
        let logged_exit = watchdog.iter().any(|record| {
            record.rank == rank && record.event == WatchdogEvent::Exit && !is_inferred_exit(record)
        });
        if logged_exit {
            watchdog.retain(|record| record.rank != rank || !is_inferred_exit(record));
            continue;
        }
        let latest_ns = watchdog
            .iter()
            .filter(|record| record.rank == rank)
            .map(|record| record.at_ns)
            .max()
            .unwrap_or(0);
        if let Some(exit) = watchdog
            .iter_mut()
            .find(|record| record.rank == rank && is_inferred_exit(record))
        {
            exit.at_ns = latest_ns;
        }
    }
}

/// Whether `record` is an exit this join inferred (not one a rank or PyTorch's log recorded).
fn is_inferred_exit(record: &WatchdogRecord) -> bool {
    record.thread == ThreadKind::Main
        && record.event == WatchdogEvent::Exit
        && record.message.ends_with(INFERRED_EXIT_PLACE)
}

/// A rank's time 0 on the wall clock (Unix ns), as its Timeline records it; 0 where it does not.
fn origin_ns(part: &Timeline) -> u64 {
    part.machine
        .get("host_origin_unix_ns")
        .and_then(|text| text.parse().ok())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests;
