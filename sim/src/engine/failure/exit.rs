//! A process outlives its program (R31): it ends once its GPU work drained, and its watchdog
//! goes on until then. How depends on how the program ends (`destroy_process_group` in the
//! scenario):
//!
//! - With `destroy_process_group()` (the default): the call waits for the GPU work, then joins
//!   the watchdog. A watchdog busy with an error (its sleep for the dumps) holds the process
//!   until its error-handling mode acts; a stuck one hangs it, and the heartbeat monitor, still
//!   running, may abort it.
//! - Without it, ProcessGroupNCCL's destructor runs at exit: it aborts the communicators, waits
//!   for the GPU work at most the smallest group timeout (past it the process ends in `SIGABRT`
//!   once the work drained), stops the heartbeat monitor and joins the watchdog, which polls
//!   without pause from then on: a Work it times out takes the process down at once. A program
//!   that returns while the watchdog sleeps for the dumps crashes at exit (`SIGSEGV`), unless
//!   the communicator was aborted already; a stuck watchdog hangs the exit.
//!
//! Measured with PyTorch 2.11 on an H200 (docs/torch.md), except two readings of its source: the
//! destructor stops the heartbeat monitor, and a stuck watchdog hangs the exit.

use super::{ms, wake, Caught, Command, Failure, FindingAbout, RunView, Wake};
use crate::scenario::GroupId;
use crate::timeline::{ExitStatus, FindingKind, ThreadKind, WatchdogEvent};

/// A rank whose program returned and whose process waits for its GPU work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Exiting {
    /// Host time of the program's return.
    pub(super) returned_ns: u64,
    /// The program ended with `destroy_process_group()`; false: the destructor tears down.
    pub(super) destroy: bool,
    /// The destructor's abort of the communicators passed its timeout: the process ends in
    /// `SIGABRT` once its GPU work drained.
    pub(super) abort_timed_out: bool,
    /// A watchdog thread was stuck: the join of it never returns, and the process never ends
    /// by itself.
    pub(super) hangs: bool,
    /// The teardown joins this group's watchdog, busy with an error: the process cannot end
    /// before the watchdog's error handling.
    pub(super) joins_watchdog: Option<GroupId>,
    /// When the GPU work drained, if it did while the teardown waited for the watchdog.
    pub(super) drained_ns: Option<u64>,
}

impl Exiting {
    /// The watchdog polls without pause: the destructor's flag ends each poll's wait at once.
    pub(super) fn polls_without_pause(&self) -> bool {
        !self.destroy
    }
}

impl Failure<'_> {
    /// The heartbeat monitor of `rank` was stopped: its program returned without
    /// `destroy_process_group()`, and the destructor stops it.
    pub(super) fn heartbeat_stopped(&self, rank: u32) -> bool {
        self.exiting[rank as usize].is_some_and(|exiting| !exiting.destroy)
    }

    /// The program of `rank` returned at `returned_ns`. `abort_timeout`: the group with the
    /// smallest timeout among those whose communicator the process created, and that timeout
    /// (the destructor's abort waits at most that long); `drained`: its GPU work is done already.
    pub(super) fn program_returned(
        &mut self,
        view: &impl RunView,
        (rank, returned_ns): (u32, u64),
        abort_timeout: Option<(GroupId, u64)>,
        drained: bool,
        out: &mut Vec<Command>,
    ) {
        let destroy = self.scenario.destroy_process_group;
        let busy = self.handling_watchdog(rank);
        // Where a communicator of the process group was aborted already (a `wait(timeout)` that
        // raised, R15, on a collective or on a pair's send or receive), the destructor has
        // nothing to abort and joins the sleeping watchdog, as `destroy_process_group()` does
        // (read from the source; wait_timeout.toml was measured with the call).
        let crashes = self.watchdog_groups().find(|&group| {
            !destroy
                && self.watchdogs[self.index(rank, group)].handling
                && !self.any_aborted_in(rank, group)
        });
        if let Some(group) = crashes {
            self.exit_failure(
                (rank, group, ThreadKind::Main, WatchdogEvent::Exit),
                returned_ns,
                "the program returned while the watchdog slept for the Flight Recorder dumps: the process crashed at exit (SIGSEGV, exit code 139, as PyTorch 2.11 was measured to)",
                out,
            );
            out.push(Command::KillProcess {
                rank,
                status: ExitStatus::Crashed,
                at_ns: returned_ns,
            });
            return;
        }
        // A watchdog that hangs at its next poll hangs the join.
        let stuck = self
            .watchdog_groups()
            .find(|&group| (self.watchdogs[self.index(rank, group)].stuck_at_ns).is_some());
        let exiting = Exiting {
            returned_ns,
            destroy,
            abort_timed_out: false,
            hangs: stuck.is_some(),
            joins_watchdog: busy,
            drained_ns: None,
        };
        self.exiting[rank as usize] = Some(exiting);
        if let Some(group) = stuck {
            let how = if destroy {
                "destroy_process_group() waits for the GPU work, then joins the watchdog thread, which hangs: the process hangs at exit unless the heartbeat monitor aborts it"
            } else {
                "the destructor stops the heartbeat monitor and joins the watchdog thread, which hangs: the process hangs at exit"
            };
            let message = format!(
                "the program returned: {how} (read from ProcessGroupNCCL's source, not measured)"
            );
            self.exit_failure(
                (rank, group, ThreadKind::Main, WatchdogEvent::Abort),
                returned_ns,
                &message,
                out,
            );
            return;
        }
        if exiting.polls_without_pause()
            && self.timeout_due_while_exiting(view, rank, returned_ns, out)
        {
            return;
        }
        if drained {
            self.drained(view, rank, returned_ns, out);
            return;
        }
        if let (Some((group, timeout_ns)), false) = (abort_timeout, destroy) {
            wake(
                out,
                rank,
                group,
                Wake::ExitAbortTimeout,
                returned_ns + timeout_ns,
            );
        }
    }

    /// Logs what failed at exit and reports it as an `exit_failure` finding.
    fn exit_failure(
        &mut self,
        (rank, group, thread, event): (u32, GroupId, ThreadKind, WatchdogEvent),
        at_ns: u64,
        what: &str,
        out: &mut Vec<Command>,
    ) {
        let message = format!("[Rank {}] {what}", self.rank_id(rank));
        self.note(rank, Some(group), (thread, event), at_ns, message.clone());
        out.push(Command::Finding {
            kind: FindingKind::ExitFailure,
            rank,
            about: FindingAbout::Rank,
            message,
        });
    }

    /// The watchdogs of an exiting `rank` poll without pause (R31): a pending Work past its
    /// deadline at `now_ns` times out now, and takes the process down (true); the others get
    /// their deadline poll at their deadline.
    fn timeout_due_while_exiting(
        &mut self,
        view: &impl RunView,
        rank: u32,
        now_ns: u64,
        out: &mut Vec<Command>,
    ) -> bool {
        let groups: Vec<GroupId> = self.watchdog_groups().collect();
        for group in groups {
            // The deadline poll's own test, run now: the others get their poll at their deadline.
            if self.timeout_due(view, rank, group, now_ns, out) {
                let watchdog = &self.watchdogs[self.index(rank, group)];
                let head = *watchdog.pending.front().expect("a due check has a Work");
                self.caught(view, rank, group, Caught::Timeout(head), now_ns, out);
                return true;
            }
        }
        false
    }

    /// The GPU work of an exiting `rank` drained at `now_ns`: the process ends, unless a Work
    /// times out at this very poll.
    pub(super) fn drained(
        &mut self,
        view: &impl RunView,
        rank: u32,
        now_ns: u64,
        out: &mut Vec<Command>,
    ) {
        let Some(exiting) = self.exiting[rank as usize] else {
            return;
        };
        if exiting.hangs {
            return;
        }
        let now_ns = now_ns.max(exiting.returned_ns);
        // A watchdog busy with an error holds the teardown's join until it handled it.
        if let Some(group) = exiting.joins_watchdog.or(self.handling_watchdog(rank)) {
            self.exiting[rank as usize] = Some(Exiting {
                joins_watchdog: Some(group),
                drained_ns: Some(now_ns),
                ..exiting
            });
            return;
        }
        if exiting.polls_without_pause() && self.timeout_due_while_exiting(view, rank, now_ns, out)
        {
            return;
        }
        if exiting.abort_timed_out {
            let rank_id = self.rank_id(rank);
            self.take_down(
                (rank, None, ThreadKind::Main),
                (ExitStatus::Aborted, now_ns),
                format!("[Rank {rank_id}] the GPU work drained; the destructor's DistBackendError (terminate called after throwing an instance of 'c10::DistBackendError') ends the process in SIGABRT"),
                out,
            );
            return;
        }
        out.push(Command::KillProcess {
            rank,
            status: ExitStatus::Clean,
            at_ns: now_ns,
        });
    }

    /// The destructor's abort of `group`'s communicators passed the group's timeout while the
    /// GPU work of `rank` had not drained.
    pub(super) fn exit_abort_timed_out(
        &mut self,
        rank: u32,
        group: GroupId,
        now_ns: u64,
        out: &mut Vec<Command>,
    ) {
        let Some(exiting) = &mut self.exiting[rank as usize] else {
            return;
        };
        exiting.abort_timed_out = true;
        let timeout_ms = ms(self.scenario.groups[group].timeout_ns);
        let message = format!("destroy_process_group() was not called before program exit: the destructor aborts the communicators; Future for ProcessGroup abort timed out after {timeout_ms} ms (the GPU work has not drained); the process ends in SIGABRT once it did");
        self.exit_failure(
            (rank, group, ThreadKind::Main, WatchdogEvent::Abort),
            now_ns,
            &message,
            out,
        );
    }

    /// A Work the watchdog of `rank` timed out after the program returned: the watchdog thread
    /// ends in an exception, and the process in `SIGABRT`, at once. True if so.
    pub(super) fn timed_out_while_exiting(
        &mut self,
        rank: u32,
        group: GroupId,
        now_ns: u64,
        out: &mut Vec<Command>,
    ) -> bool {
        if !self.exiting[rank as usize].is_some_and(|exiting| exiting.polls_without_pause()) {
            return false;
        }
        let rank_id = self.rank_id(rank);
        self.take_down(
            (rank, Some(group), ThreadKind::Watchdog),
            (ExitStatus::Aborted, now_ns),
            format!("[Rank {rank_id}] the program had returned and the process group was being torn down: Process group watchdog thread terminated with exception: std::future_error: Broken promise; SIGABRT without the sleep for the dumps"),
            out,
        );
        true
    }

    /// The watchdog of `group` finished its error handling without ending the process: a
    /// destructor that waited for it (R31) returns now, and the process ends once its GPU work
    /// drained (at once, if it did).
    pub(super) fn watchdog_joined(
        &mut self,
        view: &impl RunView,
        rank: u32,
        group: GroupId,
        now_ns: u64,
        out: &mut Vec<Command>,
    ) {
        let Some(exiting) = self.exiting[rank as usize] else {
            return;
        };
        if exiting.joins_watchdog != Some(group) {
            return;
        }
        self.exiting[rank as usize] = Some(Exiting {
            joins_watchdog: None,
            ..exiting
        });
        if exiting.drained_ns.is_some() {
            self.drained(view, rank, now_ns, out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::fake::{
        enqueue, finding, per_rank, split, time_out_rank_0, two_ranks, wake, woken, FakeRun,
        DUMP_WAIT_OVER_NS,
    };
    use super::super::FindingAbout;
    use super::super::{Command, Failure, Notice, Wake};
    use crate::timeline::{ExitStatus, FindingKind};

    const RETURNED_NS: u64 = 300_000_000;

    /// Tells `failure` that rank 0's program returned at 0.3 s; the commands it answers.
    fn returned(failure: &mut Failure<'_>, run: &FakeRun, drained: bool) -> Vec<Command> {
        let mut out = Vec::new();
        failure.notify(
            run,
            Notice::ProgramReturned {
                rank: 0,
                host_ns: RETURNED_NS,
                abort_timeout: Some((0, 1_000_000_000)),
                drained,
            },
            &mut out,
        );
        out
    }

    fn drained(failure: &mut Failure<'_>, run: &FakeRun, now_ns: u64) -> Vec<Command> {
        let mut out = Vec::new();
        failure.notify(run, Notice::Drained { rank: 0, now_ns }, &mut out);
        out
    }

    fn ends(status: ExitStatus, at_ns: u64) -> Command {
        Command::KillProcess {
            rank: 0,
            status,
            at_ns,
        }
    }

    const NO_DESTROY: &str = "destroy_process_group = false";

    #[test]
    fn a_drained_process_ends_cleanly_at_its_return_either_way_r31() {
        for extra in ["", NO_DESTROY] {
            let scenario = two_ranks(extra, "");
            let mut failure = Failure::new(&scenario, per_rank(&scenario));
            let run = FakeRun::default();
            assert_eq!(
                returned(&mut failure, &run, true),
                [ends(ExitStatus::Clean, RETURNED_NS)]
            );
        }
    }

    #[test]
    fn pending_work_holds_the_process_until_it_drained_r31() {
        // With destroy_process_group(): no deadline of its own; the drain ends the process.
        let scenario = two_ranks("", "");
        let mut failure = Failure::new(&scenario, per_rank(&scenario));
        let run = FakeRun::default();
        assert_eq!(returned(&mut failure, &run, false), []);
        assert_eq!(
            drained(&mut failure, &run, 2_000_000_000),
            [ends(ExitStatus::Clean, 2_000_000_000)]
        );
        // Without it, the destructor's abort times out one group timeout after the return:
        // a finding then, SIGABRT once the work drained.
        let scenario = two_ranks(NO_DESTROY, "");
        let mut failure = Failure::new(&scenario, per_rank(&scenario));
        let deadline_ns = RETURNED_NS + 1_000_000_000;
        assert_eq!(
            returned(&mut failure, &run, false),
            [wake(0, Wake::ExitAbortTimeout, deadline_ns)]
        );
        let (commands, messages) = split(woken(
            &mut failure,
            &run,
            0,
            Wake::ExitAbortTimeout,
            deadline_ns,
        ));
        assert_eq!(
            commands,
            [finding(FindingKind::ExitFailure, 0, FindingAbout::Rank)]
        );
        assert!(messages[0].contains("Future for ProcessGroup abort timed out after 1000 ms"));
        assert_eq!(
            drained(&mut failure, &run, 2_000_000_000),
            [ends(ExitStatus::Aborted, 2_000_000_000)]
        );
    }

    #[test]
    fn without_destroy_a_pending_work_times_out_at_its_deadline_and_aborts_at_once_r31() {
        // Enqueued at 20 µs, 1-s timeout: the 100-ms polls would catch it at 1.1 s; after the
        // return the watchdog polls without pause and catches it at 1.00002 s.
        let scenario = two_ranks(NO_DESTROY, "");
        let mut failure = Failure::new(&scenario, per_rank(&scenario));
        let run = FakeRun::default().with_work(0, 0, 1);
        enqueue(&mut failure, &run, (0, 0), 20_000);
        let deadline_ns = 1_000_020_000;
        let mut expected = vec![wake(0, Wake::Check, deadline_ns)];
        expected.push(wake(0, Wake::ExitAbortTimeout, RETURNED_NS + 1_000_000_000));
        assert_eq!(returned(&mut failure, &run, false), expected);
        let (commands, _) = split(woken(&mut failure, &run, 0, Wake::Check, deadline_ns));
        assert_eq!(
            commands,
            [
                finding(FindingKind::WatchdogTimeout, 0, FindingAbout::Work(0)),
                ends(ExitStatus::Aborted, deadline_ns)
            ]
        );
    }

    #[test]
    fn returning_during_the_dump_wait_crashes_without_destroy_and_waits_with_it_r31() {
        // Rank 0 times out at 1.1 s and sleeps 60 s for the dumps; its program returns at 2 s.

        let notice = Notice::ProgramReturned {
            rank: 0,
            host_ns: 2_000_000_000,
            abort_timeout: Some((0, 1_000_000_000)),
            drained: true,
        };
        let scenario = two_ranks(NO_DESTROY, "");
        let mut failure = Failure::new(&scenario, per_rank(&scenario));
        let run = FakeRun::default().with_work(0, 0, 1);
        time_out_rank_0(&mut failure, &run);
        let mut out = Vec::new();
        failure.notify(&run, notice.clone(), &mut out);
        let (commands, _) = split(out);
        assert_eq!(
            commands,
            [
                finding(FindingKind::ExitFailure, 0, FindingAbout::Rank),
                ends(ExitStatus::Crashed, 2_000_000_000)
            ]
        );
        // destroy_process_group() joins the watchdog: the dump wait's end decides (mode 3:
        // SIGABRT at 61.1 s).
        let scenario = two_ranks("", "");
        let mut failure = Failure::new(&scenario, per_rank(&scenario));
        time_out_rank_0(&mut failure, &run);
        let mut out = Vec::new();
        failure.notify(&run, notice, &mut out);
        assert_eq!(out, []);
        assert_eq!(
            woken(&mut failure, &run, 0, Wake::DumpWaitOver, DUMP_WAIT_OVER_NS),
            [ends(ExitStatus::Aborted, DUMP_WAIT_OVER_NS)]
        );
    }

    #[test]
    fn after_a_mode_that_leaves_the_process_alive_the_joined_teardown_ends_it_r31() {
        // Mode 0 (NoHandling): the dump wait ends at 61.1 s with the process alive; the
        // teardown waiting for the watchdog returns then, and the process, drained, ends.
        let scenario = two_ranks("[env]\nTORCH_NCCL_ASYNC_ERROR_HANDLING = 0", "");
        let mut failure = Failure::new(&scenario, per_rank(&scenario));
        let run = FakeRun::default().with_work(0, 0, 1);
        time_out_rank_0(&mut failure, &run);
        assert_eq!(returned(&mut failure, &run, true), []);
        let commands = woken(&mut failure, &run, 0, Wake::DumpWaitOver, DUMP_WAIT_OVER_NS);
        assert_eq!(
            commands.last(),
            Some(&ends(ExitStatus::Clean, DUMP_WAIT_OVER_NS))
        );
    }

    #[test]
    fn a_returned_program_s_heartbeat_monitor_is_stopped_without_destroy_only_r31() {
        for (extra, stopped) in [("", false), (NO_DESTROY, true)] {
            let scenario = two_ranks(extra, "");
            let mut failure = Failure::new(&scenario, per_rank(&scenario));
            let run = FakeRun::default();
            returned(&mut failure, &run, false);
            let mut out = Vec::new();
            let stale = failure.is_stale(&run, (0, 0, Wake::DumpSeen), 1_000_000_000, &mut out);
            assert_eq!(stale, stopped, "{extra:?}");
        }
    }
}
