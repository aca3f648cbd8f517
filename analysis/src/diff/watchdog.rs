//! The watchdog's, the heartbeat monitor's and the main thread's records (R15, R26–R29, R31)
//! on both sides of a diff (docs/diff.md): per rank, thread and event, how many each side
//! logged and when the first was. A record made once for several ranks (`stands_for`) is each
//! of theirs.

use super::{exceeds_us, lines_by_ranks, DiffOptions};
use serde::{Deserialize, Serialize};
use sim::timeline::Timeline;
use std::collections::{BTreeMap, HashMap};

/// One rank's records of one thread and event that the two sides do not share: not as many,
/// or the first of them at times further apart than the tolerances.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WatchdogDisagreement {
    pub rank: u32,
    /// `main`, `watchdog` or `heartbeat_monitor`, as the Timeline names it.
    pub thread: String,
    /// The record's `event` (`remote_error`, `warning`, `timeout`, …).
    pub event: String,
    pub a_count: usize,
    pub b_count: usize,
    /// The first record's time on each side; `None`: that side has none.
    pub a_first_ns: Option<u64>,
    pub b_first_ns: Option<u64>,
}

/// Per (rank, thread, event): the count and the first time.
type Logged = BTreeMap<(u32, String, String), (usize, u64)>;

fn logged(timeline: &Timeline) -> Logged {
    let mut logged = Logged::new();
    for record in &timeline.watchdog {
        let (thread, event) = (record.thread.to_string(), record.event.to_string());
        for rank in record.ranks().iter() {
            let entry = logged
                .entry((rank, thread.clone(), event.clone()))
                .or_insert((0, record.at_ns));
            entry.0 += 1;
            entry.1 = entry.1.min(record.at_ns);
        }
    }
    logged
}

/// When each rank's program made its first host call, and the earliest of all ranks (for a
/// rank a record stands for that kept no host calls): a measured run's clock starts before its
/// setup (a GPU's first communicator takes ~0.4 s there), the simulator's at the program, so
/// first times are compared from these starts, as the op table compares times from each
/// iteration's start.
fn program_starts(timeline: &Timeline) -> (HashMap<u32, u64>, u64) {
    let starts: HashMap<u32, u64> = (timeline.ranks.iter())
        .filter_map(|rank| {
            let first = rank.host.iter().map(|call| call.start_ns).min()?;
            Some((rank.rank, first))
        })
        .collect();
    let earliest = starts.values().copied().min().unwrap_or(0);
    (starts, earliest)
}

/// The records the two sides do not share, by rank, thread and event.
pub(super) fn compare(
    a: &Timeline,
    b: &Timeline,
    options: &DiffOptions,
) -> Vec<WatchdogDisagreement> {
    let (logged_a, logged_b) = (logged(a), logged(b));
    let (starts_a, starts_b) = (program_starts(a), program_starts(b));
    let since_start = |(starts, earliest): &(HashMap<u32, u64>, u64), rank: u32, ns: u64| {
        let start = starts.get(&rank).copied().unwrap_or(*earliest);
        (ns as f64 - start as f64) / 1e3
    };
    let mut keys: Vec<&(u32, String, String)> = logged_a.keys().chain(logged_b.keys()).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .filter_map(|key| {
            let (a, b) = (logged_a.get(key), logged_b.get(key));
            let (a_count, b_count) = (a.map_or(0, |a| a.0), b.map_or(0, |b| b.0));
            let (a_first_ns, b_first_ns) = (a.map(|a| a.1), b.map(|b| b.1));
            let moved = match (a_first_ns, b_first_ns) {
                (Some(x), Some(y)) => exceeds_us(
                    options,
                    since_start(&starts_a, key.0, x),
                    since_start(&starts_b, key.0, y),
                ),
                _ => false,
            };
            (a_count != b_count || moved).then(|| WatchdogDisagreement {
                rank: key.0,
                thread: key.1.clone(),
                event: key.2.clone(),
                a_count,
                b_count,
                a_first_ns,
                b_first_ns,
            })
        })
        .collect()
}

/// The disagreements as the report writes them, ranks that differ alike on one line.
pub(super) fn lines(disagreements: &[WatchdogDisagreement]) -> Vec<String> {
    let side = |count: usize, first_ns: Option<u64>| match first_ns {
        Some(first_ns) => format!("{count} (first at {:.6} s)", first_ns as f64 / 1e9),
        None => "none".to_string(),
    };
    lines_by_ranks(disagreements.iter().map(|d| {
        (
            d.rank,
            "watchdog (".to_string(),
            format!(
                "): {} {}: A {}, B {}",
                d.thread,
                d.event,
                side(d.a_count, d.a_first_ns),
                side(d.b_count, d.b_first_ns)
            ),
        )
    }))
}
