//! Tests only: a run the failure component can be shown without an engine.

use super::{Progress, RunView, WorkFacts};
use crate::fold::Classes;
use crate::scenario::{GroupId, Scenario};
use std::collections::HashMap;
use std::rc::Rc;

/// Every rank a class of its own: the component's unit tests name ranks one by one.
pub(super) fn per_rank(scenario: &Scenario) -> Rc<Classes> {
    Rc::new(Classes::per_rank(scenario))
}

/// A run as a test describes it: Works, their end times, dead ranks.
#[derive(Default)]
pub(super) struct FakeRun {
    pub(super) works: HashMap<(u32, u32), WorkFacts>,
    pub(super) ends_ns: HashMap<(u32, u32), u64>,
    pub(super) dead: Vec<u32>,
    pub(super) waiting_for_unique_id: Vec<u32>,
    /// Ranks whose kernels of their enqueued Works have not started (the others all have).
    pub(super) not_started: Vec<u32>,
    /// A new epoch at every look: the fake run may change between any two calls.
    pub(super) epochs: std::cell::Cell<u64>,
    /// Ranks with GPU work still on their streams (the others have drained).
    pub(super) busy: Vec<u32>,
}

impl FakeRun {
    /// Collective record `collective` of `rank`: op 0 of group 0 at `seq`, 1 MiB.
    pub(super) fn with_work(mut self, rank: u32, collective: u32, seq: u64) -> FakeRun {
        let work = WorkFacts {
            op: 0,
            iteration: 0,
            group: 0,
            seq,
            seq_num: seq,
            bytes: 1 << 20,
        };
        self.works.insert((rank, collective), work);
        self
    }
}

impl RunView for FakeRun {
    fn is_dead(&self, rank: u32) -> bool {
        self.dead.contains(&rank)
    }

    fn work(&self, rank: u32, collective: u32) -> WorkFacts {
        self.works[&(rank, collective)]
    }

    fn work_end_ns(&self, rank: u32, collective: u32, _end: u32) -> Option<u64> {
        self.ends_ns.get(&(rank, collective)).copied()
    }

    fn progress(
        &self,
        rank: u32,
        (group, seq): (GroupId, u64),
        _point_to_point: bool,
        now_ns: u64,
    ) -> Progress {
        let mut progress = Progress::default();
        for (&(r, collective), work) in &self.works {
            if r != rank || work.group != group {
                continue;
            }
            progress.last_enqueued = progress.last_enqueued.max(work.seq);
            if self
                .work_end_ns(r, collective, collective)
                .is_some_and(|t| t <= now_ns)
            {
                progress.last_completed = progress.last_completed.max(work.seq);
            }
            progress.kernel_started |= work.seq == seq && !self.not_started.contains(&rank);
        }
        // The fake's Works are collectives numbered as their group numbers them.
        progress.enqueued_seq_num = progress.last_enqueued;
        progress.completed_seq_num = progress.last_completed;
        progress
    }

    fn waits_for_unique_id(&self, rank: u32, _group: GroupId, _now_ns: u64) -> bool {
        self.waiting_for_unique_id.contains(&rank)
    }

    fn epoch(&self) -> u64 {
        self.epochs.set(self.epochs.get() + 1);
        self.epochs.get()
    }

    fn waits_for_communicator(&self, rank: u32, _group: GroupId, _now_ns: u64) -> bool {
        self.waiting_for_unique_id.contains(&rank)
    }

    fn host_op(&self, _rank: u32) -> usize {
        0
    }

    fn drained(&self, rank: u32) -> bool {
        !self.busy.contains(&rank)
    }
}

/// Two ranks, group `world` with a 1-s timeout, op 0 an async all_reduce of 1 MiB labelled
/// `ar`; `extra` goes before the ops (an `[env]` table, faults go after them).
pub(super) fn two_ranks(extra: &str, faults: &str) -> crate::scenario::Scenario {
    let text = format!(
        "{extra}\n[cluster]\nranks = 2\n[groups.world]\neager_init = true\ntimeout_s = 1\n[tensors]\nx = \"1MiB\"\n[[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\nasync_op = true\nwork = \"w\"\n[[op]]\nwait = \"w\"\n{faults}"
    );
    crate::scenario::parse("t.toml", &text).unwrap()
}

/// Tells `failure` that `rank` enqueued its collective record `collective` at `enqueue_ns`
/// (rendezvous `collective`, issued as the op's all_reduce of 1 MiB); the commands it answers.
pub(super) fn enqueue(
    failure: &mut super::Failure<'_>,
    run: &FakeRun,
    (rank, collective): (u32, u32),
    enqueue_ns: u64,
) -> Vec<super::Command> {
    enqueue_issued(failure, run, (rank, collective), enqueue_ns, 1 << 20)
}

/// [`enqueue`], with the all_reduce issued of `size_bytes`.
pub(super) fn enqueue_issued(
    failure: &mut super::Failure<'_>,
    run: &FakeRun,
    (rank, collective): (u32, u32),
    enqueue_ns: u64,
    size_bytes: u64,
) -> Vec<super::Command> {
    let times_ns = (enqueue_ns, enqueue_ns);
    enqueue_listed_issued(failure, run, (rank, collective), times_ns, size_bytes)
}

/// [`enqueue`], the Work going onto the watchdog's list at `listed_ns`, later than its
/// enqueue (its call waited behind a full launch queue or for the watchdog's list).
pub(super) fn enqueue_listed(
    failure: &mut super::Failure<'_>,
    run: &FakeRun,
    (rank, collective): (u32, u32),
    (enqueue_ns, listed_ns): (u64, u64),
) -> Vec<super::Command> {
    let times_ns = (enqueue_ns, listed_ns);
    enqueue_listed_issued(failure, run, (rank, collective), times_ns, 1 << 20)
}

fn enqueue_listed_issued(
    failure: &mut super::Failure<'_>,
    run: &FakeRun,
    (rank, collective): (u32, u32),
    (enqueue_ns, listed_ns): (u64, u64),
    size_bytes: u64,
) -> Vec<super::Command> {
    let mut out = Vec::new();
    failure.notify(
        run,
        super::Notice::CollectiveIssued {
            rank,
            collective,
            rendezvous: collective,
            enqueue_ns,
            issued: (crate::scenario::CollectiveKind::AllReduce, size_bytes),
        },
        &mut out,
    );
    failure.notify(
        run,
        super::Notice::WorkEnqueued {
            rank,
            group: 0,
            collective,
            end: collective,
            enqueue_ns,
            listed_ns,
        },
        &mut out,
    );
    out
}

/// When the 60-s sleep for the dumps of [`time_out_rank_0`]'s timeout ends.
pub(super) const DUMP_WAIT_OVER_NS: u64 = 61_100_000_000;

/// Rank 0 enqueues collective record 0 at 20 µs and its watchdog's deadline poll finds it
/// timed out at 1.1 s (a 1-s group timeout); the commands it answers to the poll.
pub(super) fn time_out_rank_0(
    failure: &mut super::Failure<'_>,
    run: &FakeRun,
) -> Vec<super::Command> {
    enqueue(failure, run, (0, 0), 20_000);
    woken(failure, run, 0, super::Wake::Check, 1_100_000_000)
}

/// Tells `failure` that its wake-up `wake` of `rank` (group 0) is due at `now_ns`, unless it
/// is stale; the commands it answers.
pub(super) fn woken(
    failure: &mut super::Failure<'_>,
    run: &FakeRun,
    rank: u32,
    wake: super::Wake,
    now_ns: u64,
) -> Vec<super::Command> {
    let mut out = Vec::new();
    if !failure.is_stale(run, (rank, 0, wake), now_ns, &mut out) {
        failure.notify(
            run,
            super::Notice::Woken {
                rank,
                group: 0,
                wake,
                now_ns,
            },
            &mut out,
        );
    }
    out
}

/// The commands without the findings' messages, and the messages.
pub(super) fn split(commands: Vec<super::Command>) -> (Vec<super::Command>, Vec<String>) {
    let mut messages = Vec::new();
    let commands = commands
        .into_iter()
        .map(|command| match command {
            super::Command::Finding {
                kind,
                rank,
                about,
                message,
            } => {
                messages.push(message);
                super::Command::Finding {
                    kind,
                    rank,
                    about,
                    message: String::new(),
                }
            }
            other => other,
        })
        .collect();
    (commands, messages)
}

/// A finding with its message left out, as [`split`] leaves it.
pub(super) fn finding(
    kind: crate::timeline::FindingKind,
    rank: u32,
    about: super::FindingAbout,
) -> super::Command {
    super::Command::Finding {
        kind,
        rank,
        about,
        message: String::new(),
    }
}

/// A wake-up of group 0.
pub(super) fn wake(rank: u32, wake: super::Wake, at_ns: u64) -> super::Command {
    super::Command::Wake {
        rank,
        group: 0,
        wake,
        at_ns,
    }
}
