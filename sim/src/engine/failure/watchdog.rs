//! The watchdog (R26): one thread per process group and rank, polling every 100 ms from its
//! start: async error, then timeout (host clock since the Work's *enqueue*), then completion.
//!
//! It is not ticked: a Work's timeout can only be seen at the first poll at or after
//! `enqueue + timeout`, and only if the Work was not complete at the poll before. Works of a
//! group share one timeout, so the oldest pending Work decides first; one `Check` wake-up per
//! group and rank waits at its deadline poll and is dropped there if the Work finished in
//! time. A run where nothing goes wrong pays one event per group and rank.
//!
//! Just over 800 lines: the watchdog's list, its polls, its verdicts and the desync report are
//! one state machine over one `WatchdogState`. Its unit tests are in `watchdog/tests.rs`.

use super::{
    ms, next_tick_ns, seconds, wake, Caught, Command, Failure, FindingAbout, RunView, Wake,
    WorkFacts,
};
use crate::pg::work::{
    async_error_ns, async_exception, dump_wait_ns, remote_error_detected, stack_trace_ns,
    timeout_caught, timeout_deadline_ns, NcclAsyncError, WATCHDOG_POLL_NS,
};
use crate::ranks::RankSet;
use crate::scenario::{FaultKind, GroupId};
use crate::timeline::{FindingKind, ThreadKind, WatchdogEvent};
use std::collections::VecDeque;
use std::rc::Rc;

/// A pending Work in a watchdog's list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct PendingWork {
    pub(super) enqueue_ns: u64,
    /// When it went onto the list: the watchdog sees it at its first poll after then.
    pub(super) listed_ns: u64,
    pub(super) collective: u32,
    /// Its end event instance: a poll reads its fire time without looking up the record.
    pub(super) end: u32,
}

/// A watchdog's pending Works, oldest first. The oldest is kept beside the watchdog's state:
/// it is the one every enqueue and poll reads, and the host runs so far ahead of its GPU (the
/// launch queue) that the front of a queue of hundreds is cold by then.
#[derive(Debug, Default)]
pub(super) struct PendingWorks {
    head: Option<PendingWork>,
    rest: VecDeque<PendingWork>,
}

impl PendingWorks {
    pub(super) fn front(&self) -> Option<&PendingWork> {
        self.head.as_ref()
    }

    pub(super) fn push_back(&mut self, work: PendingWork) {
        if self.head.is_none() {
            self.head = Some(work);
        } else {
            self.rest.push_back(work);
        }
    }

    pub(super) fn pop_front(&mut self) -> Option<PendingWork> {
        let head = self.head.take();
        self.head = self.rest.pop_front();
        head
    }

    pub(super) fn clear(&mut self) {
        self.head = None;
        self.rest.clear();
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = &PendingWork> {
        self.head.iter().chain(self.rest.iter())
    }
}

#[derive(Debug, Default)]
pub(super) struct WatchdogState {
    pub(super) pending: PendingWorks,
    /// The `Check` wake-up asked for, if any.
    check_at_ns: Option<u64>,
    /// The heartbeat monitor's read of the store put off behind a `Check` due at the same
    /// instant ([`Failure::dump_seen`]), once.
    pub(super) dump_read_put_off_ns: Option<u64>,
    /// Polls fall on `tick_origin_ns + k·100 ms` (the grid moves after a dump wait).
    pub(super) tick_origin_ns: u64,
    /// Handling an error: asleep for the dumps, or done with this communicator.
    pub(super) handling: bool,
    /// When the watchdog began handling its error: its heartbeat stands still from then until
    /// it goes on (R28).
    pub(super) handling_since_ns: u64,
    /// The poll at which the watchdog hung (a `watchdog_stuck` fault).
    pub(super) stuck_at_ns: Option<u64>,
    /// Since when the main thread's abort of this communicator after a wait's timeout has not
    /// returned: the watchdog blocks on it and its heartbeat stops (R15, R28).
    pub(super) abort_stall_since_ns: Option<u64>,
    /// The main thread's abort after a wait's timeout has not returned yet (R15).
    pub(super) main_abort_running: bool,
    /// Since when the watchdog's own abort (modes 1 and 2), waiting for the device, has held its
    /// heartbeat: from when it began handling the error (R27, R28).
    pub(super) own_abort_stall_since_ns: Option<u64>,
    /// The heartbeat monitor left its loop (a stalled heartbeat, or the dump signal in the
    /// store): it dumps, sleeps and terminates the process, for this reason, in PyTorch's words
    /// (R28).
    pub(super) monitor_ending: Option<&'static str>,
    /// The watchdog's own abort of the communicators runs (modes 1 and 2,
    /// `host.comm_abort_us`, then until the device drained). A call on the communicator blocks
    /// until it returned.
    pub(super) aborting: bool,
    /// The error being handled is a timeout (only that Work failed), not a communicator error.
    pub(super) handling_timeout: bool,
    /// The watchdog's abort began while the main thread's, after a wait's timeout, still ran
    /// (R15): it returns no earlier than that one.
    pub(super) abort_awaits_main: bool,
    /// When the watchdog's abort's least time (`host.comm_abort_us`) ends.
    pub(super) abort_least_end_ns: u64,
    /// The latest two distinct reads of the store by the heartbeat monitor (every
    /// `TORCH_NCCL_COORD_CHECK_MILSEC` from 0) that come less than 100 ms after an update of
    /// this watchdog's Work list (`lastWorkListUpdateTime_`: a Work enqueued, or taken off
    /// complete), latest first: the default group's monitor skips those (R28,
    /// [`Failure::store_read_skipped`]).
    skipped_reads_ns: [Option<u64>; 2],
    /// The process group's error (`error_`) is set: by the first error or timeout the watchdog
    /// found, or by a peer's error read from the store (`REMOTE_ERROR`, R27). Only the program
    /// reads it (`get_error()`); the watchdog reads the store only while it is unset.
    pub(super) error_set: bool,
}

impl Failure<'_> {
    /// The watchdog that watches a Work of `group`: the process group's. A pair's send or
    /// receive goes through the process group it was called on (the default one), whose one
    /// watchdog thread polls all its Works, point-to-point ones included, in the order they
    /// were enqueued, and whose abort aborts the pair's communicator too.
    pub(in crate::engine) fn watchdog_group(&self, group: GroupId) -> GroupId {
        self.scenario.process_group(group)
    }

    /// The process groups, each with its watchdog (a pair's Works are watched by its process
    /// group's).
    pub(super) fn watchdog_groups(&self) -> impl Iterator<Item = GroupId> + '_ {
        (0..self.groups).filter(|&group| self.watchdog_group(group) == group)
    }

    /// The process group whose watchdog of `rank` is busy with an error, if one is.
    pub(super) fn handling_watchdog(&self, rank: u32) -> Option<GroupId> {
        self.watchdog_groups()
            .find(|&group| self.watchdogs[self.index(rank, group)].handling)
    }

    /// Whether any communicator of `rank`'s process group `group` was aborted: its own, or a
    /// pair's after a wait on a send or receive timed out (R15).
    pub(super) fn any_aborted_in(&self, rank: u32, group: GroupId) -> bool {
        (self.scenario.groups_of_process_group(group)).any(|g| self.is_aborted(rank, g))
    }

    pub(super) fn index(&self, rank: u32, group: GroupId) -> usize {
        rank as usize * self.groups + self.watchdog_group(group)
    }

    /// Whether `rank`'s communicator of `group` was aborted: by the watchdog of its process
    /// group (R27 modes 1, 2), which aborts every communicator of the process group, the
    /// pairs' included, or by the main thread after a wait's timeout (R15), which aborts the
    /// Work's own communicator only.
    pub(in crate::engine) fn is_aborted(&self, rank: u32, group: GroupId) -> bool {
        self.comm_aborted[rank as usize * self.groups + group]
    }

    /// Marks `rank`'s communicator of `group` aborted; for a process group's abort by its
    /// watchdog (`whole_process_group`, `group` the process group), every communicator of it
    /// (`Scenario::groups_of_process_group`: the pairs' too). An eager world's pairs run on the
    /// world's communicator (R11, `Scenario::communicator`): aborting it, through any of them,
    /// aborts them all, so that `is_aborted` stays one look-up.
    pub(super) fn mark_aborted(&mut self, rank: u32, group: GroupId, whole_process_group: bool) {
        let (scenario, base) = (self.scenario, rank as usize * self.groups);
        let communicator = scenario.communicator(group);
        self.comm_aborted[base + communicator] = true;
        if whole_process_group {
            for covered in scenario.groups_of_process_group(group) {
                self.comm_aborted[base + covered] = true;
            }
        }
        for (pair, info) in scenario.groups.iter().enumerate() {
            if info.point_to_point && scenario.communicator(pair) == communicator {
                self.comm_aborted[base + pair] = true;
            }
        }
    }

    /// Whether `rank`'s watchdog of `group`'s process group holds its Work list: from the
    /// error it found until it is done with it (its stack trace, dump wait and abort; R27).
    /// `ProcessGroupNCCL::watchdogHandler` holds `workMetaListMutex_` all that time, and a call
    /// takes it to put its Work onto the list after launching its kernel: the call waits.
    pub(in crate::engine) fn holds_work_list(&self, rank: u32, group: GroupId) -> bool {
        self.watchdogs[self.index(rank, group)].handling
    }

    /// The Work of collective record `collective` went onto the list at `listed_ns` on a
    /// communicator the watchdog aborted meanwhile: its next poll (the one at the abort's
    /// return came before the listing) finds NCCL's error under it, before any timeout (R26),
    /// so the Work needs no deadline poll (R27; measured on PyTorch 2.11, 105 ms after the
    /// call returned: tests/data/torch/probes/mode2_timeout/).
    pub(super) fn watch_aborted(
        &mut self,
        rank: u32,
        group: GroupId,
        collective: u32,
        listed_ns: u64,
        out: &mut Vec<Command>,
    ) {
        if !self.watchdog_enabled {
            return;
        }
        let origin_ns = self.watchdogs[self.index(rank, group)].tick_origin_ns;
        let seen_ns = next_tick_ns(origin_ns, WATCHDOG_POLL_NS, listed_ns + 1);
        let found = Wake::AbortedCommunicator { collective };
        wake(out, rank, group, found, seen_ns);
    }

    /// The watchdog at `index` polls from `origin_ns` on (after a dump wait).
    pub(super) fn move_tick_origin(&mut self, index: usize, origin_ns: u64) {
        self.watchdogs[index].tick_origin_ns = origin_ns;
    }

    /// Whether `rank`'s watchdog of `group` is aborting its communicators (R27 modes 1, 2).
    pub(in crate::engine) fn is_aborting(&self, rank: u32, group: GroupId) -> bool {
        self.watchdogs[self.index(rank, group)].aborting
    }

    /// How long the watchdog will spend aborting the communicators after its dump wait: the
    /// abort of modes 1 and 2 (`host.comm_abort_us`), unless the main thread aborted them
    /// already (a wait's own timeout, R15), in which case NCCL has nothing left to abort.
    pub(super) fn watchdog_abort_ns(&self, rank: u32, group: GroupId) -> u64 {
        let cleans_up = self.scenario.env.async_error_handling.cleans_up();
        if cleans_up && !self.is_aborted(rank, group) {
            self.scenario.host.comm_abort_ns
        } else {
            0
        }
    }

    /// The Work goes onto the watchdog's list (R10e, R26), with the fault armed for it.
    pub(super) fn watch(
        &mut self,
        view: &impl RunView,
        (rank, group): (u32, GroupId),
        work: PendingWork,
        armed: Option<FaultKind>,
        out: &mut Vec<Command>,
    ) {
        if !self.watchdog_enabled {
            return;
        }
        self.prune_finished(view, rank, group);
        let index = self.index(rank, group);
        let watchdog = &mut self.watchdogs[index];
        watchdog.pending.push_back(work);
        let PendingWork {
            enqueue_ns,
            listed_ns,
            collective,
            ..
        } = work;
        let origin_ns = watchdog.tick_origin_ns;
        let idle = !watchdog.handling && watchdog.stuck_at_ns.is_none();
        match armed {
            Some(FaultKind::AsyncError { after_ns }) => {
                // Found at the first poll that has both the error and the Work on the list.
                let error_ns = async_error_ns(enqueue_ns, after_ns);
                let seen_ns =
                    next_tick_ns(origin_ns, WATCHDOG_POLL_NS, error_ns.max(listed_ns + 1));
                wake(out, rank, group, Wake::AsyncError { collective }, seen_ns);
            }
            Some(FaultKind::WatchdogStuck) => {
                let stuck_ns = next_tick_ns(origin_ns, WATCHDOG_POLL_NS, enqueue_ns);
                self.watchdogs[index].stuck_at_ns = Some(stuck_ns);
                // Logged when it happens: a process gone by its next poll has no watchdog to hang.
                wake(out, rank, group, Wake::WatchdogHangs, stuck_ns);
                self.heartbeat_stalls((rank, group), stuck_ns, u64::MAX, Wake::HeartbeatCheck, out);
            }
            _ => {}
        }
        if idle {
            if let Some(deadline_ns) = self.head_deadline_ns(rank, group) {
                self.schedule_check(rank, group, deadline_ns, out);
            }
        }
    }

    /// At a `Check`: drops Works that completed before their deadline poll; true when the
    /// oldest pending Work times out now, else asks for the next deadline poll.
    pub(super) fn timeout_due(
        &mut self,
        view: &impl RunView,
        rank: u32,
        group: GroupId,
        at_ns: u64,
        out: &mut Vec<Command>,
    ) -> bool {
        let index = self.index(rank, group);
        let watchdog = &mut self.watchdogs[index];
        if watchdog.check_at_ns == Some(at_ns) {
            watchdog.check_at_ns = None;
        }
        if watchdog.handling || watchdog.stuck_at_ns.is_some_and(|t| t <= at_ns) {
            return false;
        }
        self.prune_finished(view, rank, group);
        let Some(deadline_ns) = self.head_deadline_ns(rank, group) else {
            return false;
        };
        if deadline_ns > at_ns {
            self.schedule_check(rank, group, deadline_ns, out);
            return false;
        }
        true
    }

    pub(super) fn head_deadline_ns(&self, rank: u32, group: GroupId) -> Option<u64> {
        let watchdog = &self.watchdogs[self.index(rank, group)];
        let head = watchdog.pending.front()?;
        let timeout_ns = self.scenario.groups[group].timeout_ns;
        let deadline_ns = timeout_deadline_ns(head.enqueue_ns, timeout_ns);
        // A Work listed past its deadline (its call blocked behind a full launch queue or the
        // watchdog's list) times out at the first poll that finds it on the list.
        let seen_ns = deadline_ns.max(head.listed_ns + 1);
        Some(self.first_poll_ns(rank, group, seen_ns))
    }

    /// The watchdog's first poll at or after `at_ns`: every 100 ms from its tick origin, and
    /// without pause once the program returned without `destroy_process_group()` (R31: the
    /// destructor's flag ends the poll's wait at once).
    fn first_poll_ns(&self, rank: u32, group: GroupId, at_ns: u64) -> u64 {
        let watchdog = &self.watchdogs[self.index(rank, group)];
        let tick_ns = next_tick_ns(watchdog.tick_origin_ns, WATCHDOG_POLL_NS, at_ns);
        match self.exiting[rank as usize] {
            Some(exiting) if exiting.polls_without_pause() => {
                tick_ns.min(at_ns.max(exiting.returned_ns))
            }
            _ => tick_ns,
        }
    }

    /// Drops pending Works that a poll saw complete before their deadline poll (the watchdog
    /// checks timeout before completion, so a Work seen complete only at its deadline poll
    /// still times out, R26).
    fn prune_finished(&mut self, view: &impl RunView, rank: u32, group: GroupId) {
        let index = self.index(rank, group);
        while let Some(deadline_ns) = self.head_deadline_ns(rank, group) {
            let watchdog = &self.watchdogs[index];
            let head = *watchdog
                .pending
                .front()
                .expect("a pending Work has a deadline");
            let Some(end_ns) = view.work_end_ns(rank, head.collective, head.end) else {
                return;
            };
            let removed_ns = self.first_poll_ns(rank, group, end_ns);
            if removed_ns >= deadline_ns {
                return;
            }
            let watchdog = &mut self.watchdogs[index];
            watchdog.pending.pop_front();
            // A hung watchdog, or one asleep for the dumps, takes nothing off its list.
            let busy = (watchdog.handling && removed_ns >= watchdog.handling_since_ns)
                || watchdog
                    .stuck_at_ns
                    .is_some_and(|stuck_ns| removed_ns >= stuck_ns);
            if group == 0 && !busy {
                self.work_list_updated(index, removed_ns);
            }
        }
    }

    /// The default group's watchdog at `index` updated its Work list at `at_ns`: the heartbeat
    /// monitor's reads of the store less than 100 ms later are skipped (R28). With the default
    /// one-second reads that is at most one read; hosts never run past the next read
    /// (`Engine::dump_signal_read_bound_ns`), so the reads a later update marks are the next
    /// one or the one after, and the latest two marked decide every read still to come. Where
    /// hosts are not held at the reads (`TORCH_NCCL_ENABLE_MONITORING=0`), a host more than a
    /// read ahead may push a marked read out of the two, which is then not skipped.
    pub(super) fn work_list_updated(&mut self, index: usize, at_ns: u64) {
        let period_ns = self.scenario.env.coord_check_ns;
        let mut read_ns = next_tick_ns(0, period_ns, at_ns);
        while read_ns - at_ns < WATCHDOG_POLL_NS {
            let [latest, previous] = &mut self.watchdogs[index].skipped_reads_ns;
            match *latest {
                Some(latest_ns) if read_ns == latest_ns => {}
                Some(latest_ns) if read_ns < latest_ns => {
                    *previous = (*previous).max(Some(read_ns));
                }
                _ => *previous = latest.replace(read_ns),
            }
            read_ns += period_ns;
        }
    }

    /// Whether a watchdog of `rank` polls at `at_ns` and has not yet: its `Check` wake-up is
    /// due then.
    pub(super) fn polls_at(&self, rank: u32, at_ns: u64) -> bool {
        (0..self.groups)
            .any(|group| self.watchdogs[self.index(rank, group)].check_at_ns == Some(at_ns))
    }

    /// Whether `rank`'s default-group heartbeat monitor skips its read of the store for the
    /// dump signal at `at_ns`: its watchdog enqueued a Work or took one off its list less than
    /// 100 ms before (`kWatchdogThreadSleepMillis`, `HeartbeatMonitor::runLoop`, R28).
    pub(super) fn store_read_skipped(
        &mut self,
        view: &impl RunView,
        rank: u32,
        at_ns: u64,
    ) -> bool {
        if !self.watchdog_enabled {
            return false;
        }
        self.prune_finished(view, rank, 0);
        let watchdog = &self.watchdogs[self.index(rank, 0)];
        watchdog.skipped_reads_ns.contains(&Some(at_ns))
    }

    pub(super) fn schedule_check(
        &mut self,
        rank: u32,
        group: GroupId,
        at_ns: u64,
        out: &mut Vec<Command>,
    ) {
        let index = self.index(rank, group);
        let watchdog = &mut self.watchdogs[index];
        if watchdog.check_at_ns.is_some_and(|t| t <= at_ns) {
            return;
        }
        watchdog.check_at_ns = Some(at_ns);
        wake(out, rank, group, Wake::Check, at_ns);
    }

    /// `checkAndSetRemoteError()` (`TORCH_NCCL_PROPAGATE_ERROR=1`, R27): at the top of its
    /// poll, the watchdog whose group's error is still unset reads `remote_error:<pg_uid>`
    /// from the store, which rank `from_rank`'s watchdog wrote as it found its error; it sets
    /// the group's error to `REMOTE_ERROR` and logs PyTorch's line. Nothing else: no Work
    /// fails by it, no dump wait, no abort; the rank goes on as without propagation.
    pub(super) fn remote_error_read(
        &mut self,
        rank: u32,
        group: GroupId,
        from_rank: u32,
        now_ns: u64,
    ) {
        let index = self.index(rank, group);
        self.watchdogs[index].error_set = true;
        let message = remote_error_detected(self.rank_id(rank), self.rank_id(from_rank));
        self.note(
            rank,
            Some(group),
            (ThreadKind::Watchdog, WatchdogEvent::RemoteError),
            now_ns,
            message,
        );
    }

    /// A poll caught a timeout or an error: log it, report it, propagate it, signal the
    /// dumps and sleep for them (R26, R27).
    pub(super) fn caught(
        &mut self,
        view: &impl RunView,
        rank: u32,
        group: GroupId,
        caught: Caught,
        now_ns: u64,
        out: &mut Vec<Command>,
    ) {
        let rank_id = self.rank_id(rank);
        let scenario = self.scenario;
        let env = &scenario.env;
        let index = self.index(rank, group);
        self.watchdogs[index].handling = true;
        self.watchdogs[index].error_set = true;
        self.watchdogs[index].handling_since_ns = now_ns;
        self.watchdogs[index].handling_timeout = matches!(caught, Caught::Timeout(_));
        let mut diagnosis = String::new();
        let (event, kind, about, message) = match caught {
            Caught::Timeout(work) => {
                let facts = view.work(rank, work.collective);
                let (_, verdict) =
                    self.desync_report(view, rank, facts.group, work.collective, now_ns);
                diagnosis = format!(" Diagnosis: {verdict}.");
                (
                    WatchdogEvent::Timeout,
                    FindingKind::WatchdogTimeout,
                    FindingAbout::Work(work.collective),
                    timeout_caught(
                        rank_id,
                        &self.work_text(view, rank, work.collective),
                        now_ns - work.enqueue_ns,
                    ),
                )
            }
            Caught::AsyncError(collective)
            | Caught::AbortedByWait(collective)
            | Caught::AbortedByWatchdog(collective) => {
                let error = match caught {
                    Caught::AbortedByWait(_) => NcclAsyncError::AbortedByWait,
                    Caught::AbortedByWatchdog(_) => NcclAsyncError::AbortedByWatchdog,
                    _ => NcclAsyncError::Remote,
                };
                (
                    WatchdogEvent::AsyncError,
                    FindingKind::AsyncError,
                    FindingAbout::Work(collective),
                    async_exception(rank_id, &self.work_text(view, rank, collective), error),
                )
            }
        };
        self.note(
            rank,
            Some(group),
            (ThreadKind::Watchdog, event),
            now_ns,
            message.clone(),
        );
        out.push(Command::Finding {
            kind,
            rank,
            about,
            message: message + &diagnosis,
        });
        if let (true, Caught::Timeout(work)) = (env.desync_debug, caught) {
            let work_group = view.work(rank, work.collective).group;
            let (table, verdict) =
                self.desync_report(view, rank, work_group, work.collective, now_ns);
            let report = format!("{table}\n  verdict: {verdict}");
            self.note(
                rank,
                Some(group),
                (ThreadKind::Watchdog, WatchdogEvent::DesyncReport),
                now_ns,
                report,
            );
        }
        if matches!(caught, Caught::Timeout(_))
            && self.timed_out_while_exiting(rank, group, now_ns, out)
        {
            return;
        }
        // `broadcastSignal(store, "remote_error:<pg_uid>", rank)` before the dump signal.
        if env.propagate_error {
            let classes = Rc::clone(&self.classes);
            for &member in classes.group_simulated(group) {
                if member == rank || view.is_dead(member) {
                    continue;
                }
                let origin_ns = self.watchdogs[self.index(member, group)].tick_origin_ns;
                let seen_ns = next_tick_ns(origin_ns, WATCHDOG_POLL_NS, now_ns + 1);
                wake(
                    out,
                    member,
                    group,
                    Wake::RemoteError { from_rank: rank },
                    seen_ns,
                );
            }
        }
        // TORCH_NCCL_DUMP_ON_TIMEOUT=0 changes none of what follows but the dumps: PyTorch 2.11
        // still logs the stack trace, signals and waits as long (docs/watchdog.md).
        // The failed Work's stack trace: for a timeout, and for the error of a communicator a
        // wait's timeout or the watchdog aborted (measured on PyTorch 2.11, docs/watchdog.md).
        let traced = crate::pg::work::stack_traced(match caught {
            Caught::Timeout(_) => None,
            Caught::AbortedByWait(_) => Some(NcclAsyncError::AbortedByWait),
            Caught::AbortedByWatchdog(_) => Some(NcclAsyncError::AbortedByWatchdog),
            Caught::AsyncError(_) => Some(NcclAsyncError::Remote),
        });
        let first_trace = traced && !std::mem::replace(&mut self.symbolised[rank as usize], true);
        let trace_ns = if first_trace {
            stack_trace_ns(self.scenario)
        } else {
            0
        };
        let wait_ns = dump_wait_ns(self.scenario);
        if trace_ns == 0 {
            let kept = traced && !first_trace && stack_trace_ns(scenario) > 0;
            if (traced && scenario.env.trace_buffer_entries == 0) || kept {
                let rank_id = self.rank_id(rank);
                let message = match kept {
                    false => format!("[Rank {rank_id}] Stack trace of the failed collective not found, potentially because FlightRecorder is disabled (TORCH_FR_BUFFER_SIZE = 0)"),
                    true => format!("[Rank {rank_id}] Stack trace of the failed collective (its symbols kept from the process's first trace)"),
                };
                self.note(
                    rank,
                    Some(group),
                    (ThreadKind::Watchdog, WatchdogEvent::StackTrace),
                    now_ns,
                    message,
                );
            }
            self.signal_dump(view, rank, group, now_ns, out);
            // The watchdog sleeps: its heartbeat stalls until the sleep ends, then while its
            // abort runs (`handle_error` holds it for as long as the abort really lasts).
            self.heartbeat_stalls(
                (rank, group),
                now_ns,
                now_ns + wait_ns,
                Wake::HeartbeatCheck,
                out,
            );
            return;
        }
        // A timeout: the watchdog first symbolises and logs the Work's stack trace, and its
        // heartbeat stalls from now until its sleep for the dumps ended (then while its abort
        // runs, as above).
        wake(out, rank, group, Wake::StackTraceLogged, now_ns + trace_ns);
        self.heartbeat_stalls(
            (rank, group),
            now_ns,
            now_ns + trace_ns + wait_ns,
            Wake::HeartbeatCheck,
            out,
        );
    }

    /// The timed-out Work's stack trace, logged `host.watchdog_stack_trace_us` after the
    /// timeout was found.
    pub(super) fn stack_trace_logged(&mut self, rank: u32, group: GroupId, now_ns: u64) {
        let rank_id = self.rank_id(rank);
        let took_ms = ms(stack_trace_ns(self.scenario));
        self.note(
            rank,
            Some(group),
            (ThreadKind::Watchdog, WatchdogEvent::StackTrace),
            now_ns,
            format!("[Rank {rank_id}] Stack trace of the failed collective (symbolised in {took_ms} ms, host.watchdog_stack_trace_us)"),
        );
    }

    /// The dump signal, then the watchdog's sleep for the dumps (R27); the caller stalls the
    /// heartbeat for the sleep.
    pub(super) fn signal_dump(
        &mut self,
        view: &impl RunView,
        rank: u32,
        group: GroupId,
        now_ns: u64,
        out: &mut Vec<Command>,
    ) {
        self.broadcast_dump_signal(view, rank, group, now_ns, out);
        let wait_ns = dump_wait_ns(self.scenario);
        wake(out, rank, group, Wake::DumpWaitOver, now_ns + wait_ns);
    }

    /// `TORCH_NCCL_DESYNC_DEBUG` (Flight-Recorder-like): where every rank of the group stands
    /// at the timed-out Work's SeqNum; the table and the verdict.
    fn desync_report(
        &mut self,
        view: &impl RunView,
        rank: u32,
        group: GroupId,
        collective: u32,
        now_ns: u64,
    ) -> (String, String) {
        let rank_id = self.rank_id(rank);
        let WorkFacts {
            seq, seq_num, op, ..
        } = view.work(rank, collective);
        let (issued, _) = self.issued_call(view, rank, collective);
        let op_type = self.scenario.ops[op].kind.work_op_type(issued);
        let group_name = &self.scenario.groups[group].name;
        let header = format!(
            "[Rank {rank_id}] Desync debug report at SeqNum={seq_num} ({op_type}, group {group_name}), {}:",
            seconds(now_ns)
        );
        // Every rank that reports at this time, on this run state, finds the same table.
        let key = DesyncKey {
            group,
            seq,
            seq_num,
            issued,
            op_type,
            now_ns,
            epoch: view.epoch(),
        };
        if let Some((cached, table, verdict)) = &self.desync_cache {
            if *cached == key {
                return (header + table, verdict.clone());
            }
        }
        let (table, verdict) =
            self.desync_table(view, (group, seq, seq_num), (issued, op_type), now_ns);
        self.desync_cache = Some((key, table.clone(), verdict.clone()));
        (header + &table, verdict)
    }

    /// The desync report's table (one line per set of ranks that stand alike) and verdict,
    /// about the call the group numbered `seq`, whose Work's `SeqNum` on the reporting rank is
    /// `seq_num`. The table's numbers are each rank's own Works' `SeqNum`s among its calls of
    /// the same kind (point-to-point calls or collectives), as PyTorch numbers them; the
    /// verdict names the Work by its `OpType`, `op_type`.
    fn desync_table(
        &self,
        view: &impl RunView,
        (group, seq, seq_num): (GroupId, u64, u64),
        (issued, op_type): (crate::scenario::CollectiveKind, &str),
        now_ns: u64,
    ) -> (String, String) {
        let group_name = &self.scenario.groups[group].name;
        let mut text = String::new();
        // One line per class of ranks that behave alike (each stands where its lowest rank
        // does), consecutive classes that stand alike merged.
        let mut missing = RankSet::default();
        let mut missing_alive = false;
        let mut not_started = RankSet::default();
        // Ranks that enqueued the collective and ended before its kernel started.
        let mut gone_first = RankSet::default();
        // Ranks whose kernel started and whose process ended before the collective did.
        let mut gone_during = RankSet::default();
        let mut waiting = RankSet::default();
        let mut rows: Vec<(RankSet, String)> = Vec::new();
        for &class in self.classes.group_classes(group) {
            let member = self.classes.simulated_of_class(class);
            let ranks = self.classes.members(class);
            let progress = view.progress(member, (group, seq), issued.is_point_to_point(), now_ns);
            let dead = view.is_dead(member);
            let status = format!(
                "last enqueued {}, last completed {}{}",
                progress.enqueued_seq_num,
                progress.completed_seq_num,
                if dead { ", process gone" } else { "" }
            );
            match rows.iter_mut().find(|(_, row)| *row == status) {
                Some((set, _)) => set.union_with(ranks),
                None => rows.push((ranks.clone(), status)),
            }
            if progress.last_enqueued < seq {
                missing.union_with(ranks);
                missing_alive |= !dead;
                continue;
            }
            waiting.union_with(ranks);
            match (progress.kernel_started, dead) {
                (false, true) => gone_first.union_with(ranks),
                (false, false) => not_started.union_with(ranks),
                (true, true) => gone_during.union_with(ranks),
                (true, false) => {}
            }
        }
        rows.sort_by_key(|(set, _)| set.first());
        for (set, status) in &rows {
            text.push_str(&format!("\n  {}: {status}", set.named()));
        }
        let verdict = if !missing.is_empty() {
            let gone = match (missing_alive, missing.count()) {
                (true, _) => "",
                (false, 1) => ": its process ended",
                (false, _) => ": their processes ended",
            };
            format!(
                "{} never joined collective {seq_num} ({op_type}, {group_name}){gone}; {} waiting",
                missing.named(),
                waiting.named()
            )
        } else if self.mismatched.contains(&(group, seq)) {
            format!(
                "ranks disagree on the op at {seq_num} ({group_name}): see the mismatch finding"
            )
        } else if !not_started.is_empty() || !gone_first.is_empty() {
            let mut why = Vec::new();
            if !not_started.is_empty() {
                let (have, their) = not_started.one_or_many(
                    ("has", "its kernel: its stream is"),
                    ("have", "their kernels: their streams are"),
                );
                why.push(format!(
                    "{} {have} not started {their} still busy before it",
                    not_started.named()
                ));
            }
            if !gone_first.is_empty() {
                let their = gone_first
                    .one_or_many("its kernel: its process", "their kernels: their processes");
                why.push(format!(
                    "{} never started {their} ended first",
                    gone_first.named()
                ));
            }
            format!(
                "every rank enqueued collective {seq_num}; {}",
                why.join("; ")
            )
        } else if !gone_during.is_empty() {
            let their = gone_during.one_or_many("its process", "their processes");
            format!(
                "every rank enqueued and started collective {seq_num}; {}: {their} ended before it finished",
                gone_during.named()
            )
        } else {
            format!("every rank enqueued and started collective {seq_num}; it had not finished at the timeout")
        };
        (text, verdict)
    }
}

/// What a desync report's table is made of, besides the run's state at `epoch`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct DesyncKey {
    group: GroupId,
    seq: u64,
    seq_num: u64,
    issued: crate::scenario::CollectiveKind,
    /// The timed-out Work's `OpType`: a coalescing block's differs from its calls' kind.
    op_type: &'static str,
    now_ns: u64,
    epoch: u64,
}

#[cfg(test)]
mod tests;
