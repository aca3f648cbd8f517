//! How much a scenario asks of the machine, estimated before it runs, and the caps that refuse
//! a run too large to finish (docs/reliability.md).
//!
//! The estimate counts op calls (every op on every rank that runs it, every iteration, one
//! call per tensor of a list) and derives the engine's events and the Timeline's size from
//! them with per-call figures measured on the catalogue (about one event and 170–400 bytes of
//! Timeline JSON per call; the constants below round up). A scenario that can time out (a fault,
//! an op only some ranks run, or the run's sleeps as long as a group's timeout) adds what
//! the watchdog writes for every member of every group, and a desync report per member when
//! `TORCH_NCCL_DESYNC_DEBUG` reports where the group's ranks stand (a line per set of ranks that
//! stand alike: at most one per distinct progress).
//! A folded run (docs/scale.md) simulates and logs once per class of ranks that behave alike:
//! its estimate counts classes where the unfolded one counts ranks.
//!
//! ```
//! let text = "repeat = 1000\n[cluster]\nranks = 4\n[[op]]\nhost_sleep_us = 5\n";
//! let scenario = sim::scenario::parse("doc.toml", text).unwrap();
//! let estimate = sim::limits::estimate(&scenario);
//! // Two classes of ranks: rank 0 (the lazy world communicator's root) and ranks 1-3.
//! assert_eq!(estimate.op_calls, 2_000);
//! assert!(estimate.check(&sim::limits::Limits::default()).is_ok());
//! ```

use crate::fold::Classes;
use crate::scenario::{OpKind, Scenario};
use serde::Serialize;

/// Engine events per op call, rounded up from the catalogue's (the benchmark: 1.01).
pub const EVENTS_PER_CALL: u64 = 4;
/// Timeline JSON bytes per op call, rounded up from the catalogue's (170–400).
pub const TIMELINE_BYTES_PER_CALL: u64 = 512;
/// Timeline bytes the watchdog writes per member of a group that times out (a handful of
/// records with their messages).
pub const WATCHDOG_BYTES_PER_RANK: u64 = 2_048;
/// Timeline bytes of one line of a rank's desync report.
pub const DESYNC_BYTES_PER_PAIR: u64 = 128;
/// Timeline bytes of a Flight Recorder dump besides its groups' ranks and its entries.
pub const DUMP_BYTES: u64 = 1_024;
/// Timeline bytes per rank a dump lists in a group's `ranks` (up to 6 digits and a comma; the
/// catalogue's hang measures 4.7 at 1,024 ranks, 4.9 at 4,096).
pub const DUMP_BYTES_PER_LISTED_RANK: u64 = 8;
/// Timeline bytes of one entry of a dump (a collective it recorded).
pub const DUMP_BYTES_PER_ENTRY: u64 = 1_024;

/// The caps a run must fit; `c10dsim run --max-events / --max-timeline` raise them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub max_events: u64,
    pub max_timeline_bytes: u64,
}

impl Default for Limits {
    /// 10⁹ events (minutes of simulation) and a 4 GiB Timeline.
    fn default() -> Limits {
        Limits {
            max_events: 1_000_000_000,
            max_timeline_bytes: 4 << 30,
        }
    }
}

/// What a scenario asks for, before it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct WorkEstimate {
    pub op_calls: u64,
    pub events: u64,
    /// The whole Timeline, `flight_recorder_bytes` included.
    pub timeline_bytes: u64,
    /// The Timeline's `flight_recorder` section: a dump per simulated rank that can dump,
    /// each listing every rank of its groups (unfolded, the square of the ranks).
    pub flight_recorder_bytes: u64,
    /// The part of `flight_recorder_bytes` that lists the groups' ranks in each dump: JSON
    /// the Timeline and the dump files write, which the dumps share in memory (one list per
    /// group) and traces and charts never write.
    #[serde(skip)]
    pub dump_rank_lists_bytes: u64,
}

/// Estimates a scenario's work without running it, folded as its `cluster.fold` says;
/// saturates instead of overflowing.
pub fn estimate(scenario: &Scenario) -> WorkEstimate {
    estimate_for(scenario, &Classes::of(scenario, true))
}

/// Estimates a scenario's work with its ranks simulated as `classes` says.
pub fn estimate_for(scenario: &Scenario, classes: &Classes) -> WorkEstimate {
    let ranks = u64::from(classes.simulated());
    let per_iteration = scenario.ops.iter().fold(0u64, |sum, op| {
        let runs_on = match &op.ranks {
            None => ranks,
            Some(list) if !classes.folded() => list.len() as u64,
            Some(_) => (0..classes.simulated())
                .filter(|&simulated| op.runs_on(classes.rank_of(simulated)))
                .count() as u64,
        };
        let calls = match op.kind {
            OpKind::Collective { .. } => scenario.call_sizes(&op.kind).len().max(1) as u64,
            _ => 1,
        };
        sum.saturating_add(runs_on.saturating_mul(calls))
    });
    let op_calls = per_iteration.saturating_mul(u64::from(scenario.repeat));
    let may_time_out = !scenario.faults.is_empty()
        || scenario.ops.iter().any(|op| op.ranks.is_some())
        || backlog_outlasts_a_timeout(scenario);
    let watchdog_bytes = if may_time_out {
        scenario
            .groups
            .iter()
            .enumerate()
            .fold(0u64, |sum, (index, _)| {
                // Records and report lines are made once per class (folded or not).
                let members = classes.group_classes(index).len() as u64;
                let desync = if scenario.env.desync_debug {
                    // A report's table has a line per set of ranks that stand alike: at most
                    // one per distinct (last enqueued, last completed, process gone), however
                    // many ranks the group has.
                    let seqs = scenario
                        .ops
                        .iter()
                        .filter(|op| op.kind.collective().is_some_and(|(_, g)| g == index))
                        .map(|op| scenario.call_sizes(&op.kind).len().max(1) as u64)
                        .sum::<u64>()
                        .saturating_mul(u64::from(scenario.repeat));
                    let states = seqs
                        .saturating_add(1)
                        .saturating_mul(seqs.saturating_add(1))
                        .saturating_mul(2);
                    members
                        .saturating_mul(members.min(states))
                        .saturating_mul(DESYNC_BYTES_PER_PAIR)
                } else {
                    0
                };
                sum.saturating_add(members.saturating_mul(WATCHDOG_BYTES_PER_RANK))
                    .saturating_add(desync)
            })
    } else {
        0
    };
    let (flight_recorder_bytes, dump_rank_lists_bytes) =
        if may_time_out && scenario.env.dump_on_timeout {
            let lists = dump_rank_lists_bytes(scenario, classes);
            (
                flight_recorder_bytes(scenario, classes).saturating_add(lists),
                lists,
            )
        } else {
            (0, 0)
        };
    WorkEstimate {
        op_calls,
        events: op_calls.saturating_mul(EVENTS_PER_CALL),
        timeline_bytes: op_calls
            .saturating_mul(TIMELINE_BYTES_PER_CALL)
            .saturating_add(watchdog_bytes)
            .saturating_add(flight_recorder_bytes),
        flight_recorder_bytes,
        dump_rank_lists_bytes,
    }
}

/// Whether the run's sleeps (`gpu_sleep_us`, `host_sleep_us`), every iteration's, add up to a
/// group's timeout or more: a Work enqueued behind them can outwait its timeout (R26) with no
/// fault. Every iteration's, since the host runs ahead of the GPU (R1) and a backlog within
/// the timeout each iteration adds up over the iterations.
fn backlog_outlasts_a_timeout(scenario: &Scenario) -> bool {
    let sleeps_ns = scenario.ops.iter().fold(0u64, |sum, op| match op.kind {
        OpKind::GpuSleep { duration_ns } | OpKind::HostSleep { duration_ns } => {
            sum.saturating_add(duration_ns)
        }
        _ => sum,
    });
    let sleeps_ns = sleeps_ns.saturating_mul(u64::from(scenario.repeat));
    scenario
        .groups
        .iter()
        .any(|group| sleeps_ns >= group.timeout_ns)
}

/// The Flight Recorder dumps of a run where every simulated rank dumps (a timeout's every
/// rank does, R27), their groups' rank lists aside: each holds up to `TORCH_FR_BUFFER_SIZE`
/// entries, one per collective call and, for a batch, one per send or receive and its own.
fn flight_recorder_bytes(scenario: &Scenario, classes: &Classes) -> u64 {
    let entries = scenario
        .ops
        .iter()
        .filter(|op| op.kind.collective().is_some())
        .map(|op| match &op.kind {
            OpKind::BatchP2p { transfers, .. } => transfers.len() as u64 + 1,
            kind => scenario.call_sizes(kind).len().max(1) as u64,
        })
        .sum::<u64>()
        .saturating_mul(u64::from(scenario.repeat));
    let entries = entries.min(scenario.env.trace_buffer_entries);
    let per_dump = entries
        .saturating_mul(DUMP_BYTES_PER_ENTRY)
        .saturating_add(DUMP_BYTES);
    u64::from(classes.simulated()).saturating_mul(per_dump)
}

/// What those dumps' JSON lists, for every group each dump's rank is a member of, all of the
/// group's ranks: the square of the ranks, unfolded.
fn dump_rank_lists_bytes(scenario: &Scenario, classes: &Classes) -> u64 {
    let listed = (0..scenario.groups.len()).fold(0u64, |sum, group| {
        let dumps = classes.group_simulated(group).len() as u64;
        let ranks = scenario.groups[group].ranks.len() as u64;
        sum.saturating_add(dumps.saturating_mul(ranks))
    });
    listed.saturating_mul(DUMP_BYTES_PER_LISTED_RANK)
}

impl WorkEstimate {
    /// Ok when the estimate fits the caps; else what exceeds which cap, with the numbers.
    pub fn check(&self, limits: &Limits) -> Result<(), String> {
        let mut over = Vec::new();
        if self.events > limits.max_events {
            over.push(format!(
                "about {} engine events, over the cap of {}",
                self.events, limits.max_events
            ));
        }
        if self.timeline_bytes > limits.max_timeline_bytes {
            // Named where it is the bulk: what --no-fold makes quadratic in the ranks.
            let dumps = if self.flight_recorder_bytes > self.timeline_bytes / 2 {
                format!(
                    " ({} of it in its flight_recorder section: a Flight Recorder dump per \
                     simulated rank, each listing every rank of its groups)",
                    crate::units::format_size_readable(self.flight_recorder_bytes)
                )
            } else {
                String::new()
            };
            over.push(format!(
                "a Timeline of about {}{dumps}, over the cap of {}",
                crate::units::format_size_readable(self.timeline_bytes),
                crate::units::format_size(limits.max_timeline_bytes)
            ));
        }
        if over.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "the scenario asks for {} op calls: {}",
                self.op_calls,
                over.join("; ")
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scenario(text: &str) -> Scenario {
        crate::scenario::parse("l.toml", text).unwrap()
    }

    #[test]
    fn calls_count_every_rank_iteration_and_listed_tensor() {
        let scenario = scenario(
            "repeat = 10\n[cluster]\nranks = 8\n[groups.world]\neager_init = true\n\
             [tensors]\ng = { size = \"1MiB\", count = 3 }\n\
             [[op]]\nall_reduce = \"g\"\n[[op]]\nranks = [0, 1]\nhost_sleep_us = 1\n",
        );
        let unfolded = estimate_for(&scenario, &Classes::per_rank(&scenario));
        assert_eq!(unfolded.op_calls, 10 * (8 * 3 + 2));
        // An op only some ranks run may leave the others to their watchdogs.
        // And every rank may dump its Flight Recorder: 30 entries, the world's 8 ranks listed.
        let dump = 30 * DUMP_BYTES_PER_ENTRY + DUMP_BYTES;
        assert_eq!(
            unfolded.flight_recorder_bytes,
            8 * dump + 8 * 8 * DUMP_BYTES_PER_LISTED_RANK
        );
        assert_eq!(
            unfolded.timeline_bytes,
            unfolded.op_calls * TIMELINE_BYTES_PER_CALL
                + 8 * WATCHDOG_BYTES_PER_RANK
                + unfolded.flight_recorder_bytes
        );
        // Folded, ranks 0-1 and 2-7 are simulated once each, and log once each.
        let folded = estimate(&scenario);
        assert_eq!(folded.op_calls, 10 * (2 * 3 + 1));
        assert_eq!(
            folded.flight_recorder_bytes,
            2 * dump + 2 * 8 * DUMP_BYTES_PER_LISTED_RANK
        );
        assert_eq!(
            folded.timeline_bytes,
            folded.op_calls * TIMELINE_BYTES_PER_CALL
                + 2 * WATCHDOG_BYTES_PER_RANK
                + folded.flight_recorder_bytes
        );
    }

    #[test]
    fn a_batch_counts_an_entry_per_send_and_receive_and_its_own() {
        // Ten batches of a send and a receive, the last never joined: 30 entries in each of the
        // 2 dumps.
        let scenario = scenario(
            "repeat = 10\n[cluster]\nranks = 2\n[tensors]\na = \"1MiB\"\nb = \"1MiB\"\n\
             [[op]]\nlabel = \"ring\"\nbatch_isend_irecv = [{ send = \"a\", shift = 1 }, { recv = \"b\", shift = -1 }]\n\
             [[fault]]\nranks = [1]\nat = \"ring\"\niteration = 9\nkind = \"hang\"\n",
        );
        let estimate = estimate_for(&scenario, &Classes::per_rank(&scenario));
        assert_eq!(
            estimate.flight_recorder_bytes,
            2 * (30 * DUMP_BYTES_PER_ENTRY + DUMP_BYTES) + 2 * 2 * DUMP_BYTES_PER_LISTED_RANK
        );
    }

    #[test]
    fn the_largest_scenario_is_refused_with_its_numbers() {
        let scenario = scenario(
            "repeat = 1000000\n[cluster]\nranks = 65536\nfold = false\n[[op]]\nhost_sleep_us = 1\n",
        );
        let estimate = estimate(&scenario);
        assert_eq!(estimate.op_calls, 65_536_000_000);
        let message = estimate.check(&Limits::default()).unwrap_err();
        assert!(message.contains("65536000000 op calls"), "{message}");
        assert!(message.contains("over the cap of 1000000000"), "{message}");
        assert!(message.contains("over the cap of 4GiB"), "{message}");
    }

    /// Every rank of a hang dumps its Flight Recorder, each dump listing every rank of its
    /// groups: unfolded, the dumps grow with the square of the ranks (87.6 MB of a 4,096-rank
    /// Timeline), folded with the classes times the ranks.
    #[test]
    fn flight_recorder_dumps_count_every_rank_they_list() {
        let scenario = scenario(
            "[cluster]\nranks = 4096\n[groups.world]\neager_init = true\n\
             [tensors]\ng = \"1MiB\"\n[[op]]\nlabel = \"ar\"\nall_reduce = \"g\"\n\
             [[fault]]\nranks = [3]\nat = \"ar\"\nkind = \"hang\"\n",
        );
        let unfolded = estimate_for(&scenario, &Classes::per_rank(&scenario));
        let listed = 4096 * 4096 * DUMP_BYTES_PER_LISTED_RANK;
        assert!(unfolded.flight_recorder_bytes >= listed, "{unfolded:?}");
        assert!(unfolded.timeline_bytes >= unfolded.flight_recorder_bytes);
        let limits = Limits {
            max_events: u64::MAX,
            max_timeline_bytes: 10 << 20,
        };
        let message = unfolded.check(&limits).unwrap_err();
        assert!(message.contains("flight_recorder"), "{message}");
        // Folded: ranks 0-2,4-4095 and rank 3, two dumps.
        let folded = estimate(&scenario);
        assert!(folded.flight_recorder_bytes >= 2 * 4096 * DUMP_BYTES_PER_LISTED_RANK);
        assert!(folded.flight_recorder_bytes < 1 << 20, "{folded:?}");
        assert!(folded.check(&limits).is_ok());
        // No dump without TORCH_NCCL_DUMP_ON_TIMEOUT.
        let text = "[env]\nTORCH_NCCL_DUMP_ON_TIMEOUT = 0\n[cluster]\nranks = 64\n[tensors]\n\
                    g = \"1MiB\"\n[[op]]\nlabel = \"ar\"\nall_reduce = \"g\"\n\
                    [[fault]]\nranks = [3]\nat = \"ar\"\nkind = \"hang\"\n";
        let quiet = self::scenario(text);
        assert_eq!(
            estimate_for(&quiet, &Classes::per_rank(&quiet)).flight_recorder_bytes,
            0
        );
    }

    /// A timeout with no fault: a GPU backlog longer than the group's timeout (the catalogue's
    /// timeout_dump and gpu_backlog_timeout) times out every rank, each dumping: estimated so,
    /// as a fault is (65,536 ranks of timeout_dump wrote some 26 GB of --fr-dir files unrefused).
    #[test]
    fn a_backlog_longer_than_the_timeout_may_time_out() {
        let text = "[cluster]\nranks = 64\n[groups.world]\ntimeout_s = 1\n[tensors]\n\
                    x = \"4MiB\"\n[[op]]\ngpu_sleep_us = 3_000_000\n[[op]]\nall_reduce = \"x\"\n";
        let backlog = self::scenario(text);
        let unfolded = estimate_for(&backlog, &Classes::per_rank(&backlog));
        assert!(
            unfolded.flight_recorder_bytes >= 64 * 64 * DUMP_BYTES_PER_LISTED_RANK,
            "{unfolded:?}"
        );
        // A backlog within the timeout does not time out: no watchdog records, no dumps.
        let within = self::scenario(&text.replace("3_000_000", "500_000"));
        let unfolded = estimate_for(&within, &Classes::per_rank(&within));
        assert_eq!(unfolded.flight_recorder_bytes, 0);
        assert_eq!(
            unfolded.timeline_bytes,
            unfolded.op_calls * TIMELINE_BYTES_PER_CALL
        );
        // Within the timeout each iteration, but the host runs ahead of the GPU and the
        // backlog adds up: 0.5 s a time, the third iteration's all_reduce times out.
        let adding_up = self::scenario(
            &text
                .replace("3_000_000", "500_000")
                .replace("[cluster]", "repeat = 3\n[cluster]"),
        );
        let unfolded = estimate_for(&adding_up, &Classes::per_rank(&adding_up));
        assert!(
            unfolded.flight_recorder_bytes >= 64 * 64 * DUMP_BYTES_PER_LISTED_RANK,
            "{unfolded:?}"
        );
    }

    #[test]
    fn desync_reports_grow_with_the_classes_times_the_states_they_can_be_in() {
        let text = "[cluster]\nranks = 65536\n[env]\nTORCH_NCCL_DESYNC_DEBUG = 1\n\
                    [tensors]\ng = \"1MiB\"\n[[op]]\nlabel = \"ar\"\nall_reduce = \"g\"\n\
                    [[fault]]\nranks = [3]\nat = \"ar\"\nkind = \"hang\"\n";
        let scenario = scenario(text);
        // Rank 0 (the root of the lazily created communicator), rank 3, and the others.
        let classes = estimate(&scenario);
        let desync_bytes = classes.timeline_bytes - classes.flight_recorder_bytes;
        assert!(desync_bytes < 4 * 4 * DESYNC_BYTES_PER_PAIR + (1 << 20));
        assert!(classes.check(&Limits::default()).is_ok());
        // Every rank its own class: a report per rank, each with at most 2 x (1 + 1)^2 = 8
        // lines (one collective: last enqueued and completed 0 or 1, the process gone or not).
        let estimate = estimate_for(&scenario, &Classes::per_rank(&scenario));
        let desync_bytes = estimate.timeline_bytes - estimate.flight_recorder_bytes;
        assert!(desync_bytes >= 65_536 * 8 * DESYNC_BYTES_PER_PAIR);
        assert!(desync_bytes < 65_536 * 8 * DESYNC_BYTES_PER_PAIR + (1 << 30));
        // Many collectives: as many lines as ranks at most, the square of the classes.
        let many = text.replace("[cluster]", "repeat = 1000\n[cluster]");
        let scenario = self::scenario(&many);
        let estimate = estimate_for(&scenario, &Classes::per_rank(&scenario));
        assert!(estimate.timeline_bytes > 65_536 * 65_536 * DESYNC_BYTES_PER_PAIR);
        assert!(estimate.check(&Limits::default()).is_err());
        let raised = Limits {
            max_events: u64::MAX,
            max_timeline_bytes: u64::MAX,
        };
        assert!(estimate.check(&raised).is_ok());
    }
}
