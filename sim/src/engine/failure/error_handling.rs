//! After a timeout or an error (R27): the dump signal through the store, the watchdog's sleep
//! of 4 × `TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC`, then `TORCH_NCCL_ASYNC_ERROR_HANDLING`:
//! 0 nothing, 1 abort then exit, 2 abort and stay alive, 3 exit without abort. A communicator
//! the watchdog aborted raises at its next use in the main thread; a polling `wait()` that
//! raised (R15) ends the process.
//!
//! About 1,140 lines, half of them tests (from the `tests` module on): the code is the one chain
//! from a verdict to the process's end, and its tests drive that chain through the modes.

use super::{ms, next_tick_ns, wake, Command, Failure, RunView, Wake};
use crate::pg::work::{
    error_handling_setting, error_left_alone, watchdog_abort, watchdog_abort_returned,
};
use crate::scenario::{ErrorHandling, GroupId};
use crate::timeline::{ExitStatus, FindingKind, ThreadKind, WatchdogEvent};

impl Failure<'_> {
    /// The dump signal goes into the store; this rank dumps now, the others when their
    /// heartbeat monitor next polls the store.
    pub(super) fn broadcast_dump_signal(
        &mut self,
        view: &impl RunView,
        rank: u32,
        group: GroupId,
        now_ns: u64,
        out: &mut Vec<Command>,
    ) {
        let rank_id = self.rank_id(rank);
        let env = &self.scenario.env;
        let sleep_ms = ms(4 * env.wait_timeout_dump_ns);
        let wait_ms = ms(crate::pg::work::dump_wait_ns(self.scenario));
        let outlasted = match (env.dump_on_timeout, wait_ms > sleep_ms) {
            (true, true) => format!("; the dump itself lasts {wait_ms} ms (host.flight_recorder_dump_us), and the watchdog goes on after it"),
            (false, true) => format!("; TORCH_NCCL_DUMP_ON_TIMEOUT=0: nothing is dumped, and the watchdog goes on after {wait_ms} ms, as long as a dump would take (host.flight_recorder_dump_us)"),
            (false, false) => "; TORCH_NCCL_DUMP_ON_TIMEOUT=0: nothing is dumped".to_string(),
            (true, false) => String::new(),
        };
        self.note(
            rank,
            Some(group),
            (ThreadKind::Watchdog, WatchdogEvent::DumpSignal),
            now_ns,
            format!("[Rank {rank_id}] Broadcasting the dump signal to all ranks through the store; the watchdog sleeps {sleep_ms} ms (4 x TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC) for the Flight Recorder dumps{outlasted}"),
        );
        if !env.dump_on_timeout {
            // No rank dumps, and no monitor leaves its loop for the signal: the broadcaster's own
            // logged no "Received a dump signal" on PyTorch 2.11 (docs/watchdog.md); the other
            // ranks' are not measured (one GPU), and are modelled alike.
            return;
        }
        if !self.dumped[rank as usize] {
            self.dumped[rank as usize] = true;
            self.note(
                rank,
                Some(group),
                (ThreadKind::Watchdog, WatchdogEvent::Dump),
                now_ns,
                format!("[Rank {rank_id}] dumping the Flight Recorder"),
            );
        }
        let seen_ns = next_tick_ns(0, env.coord_check_ns, now_ns + 1);
        // Every rank a broadcast for this tick would wake, an earlier one already woke (a rank
        // once dumped, or gone, stays so): when a hang's every rank broadcasts at one poll,
        // one pass over the ranks, not one per broadcaster.
        if self.dump_signal_seen_ns.replace(seen_ns) == Some(seen_ns) {
            return;
        }
        // Every monitor still in its loop reads it, the broadcaster's own too (R28).
        for other in 0..self.dumped.len() as u32 {
            let index = self.index(other, 0);
            if self.watchdogs[index].monitor_ending.is_none() && !view.is_dead(other) {
                super::wake(out, other, 0, Wake::DumpSeen, seen_ns);
            }
        }
    }

    /// The heartbeat monitor of `rank` found the dump signal in the store, or, `local`, the
    /// process's dump flag: it leaves its loop, dumps where this rank has not dumped yet, and
    /// ends the process as after a stalled heartbeat, one heartbeat timeout later (R28).
    pub(super) fn dump_seen(
        &mut self,
        view: &impl RunView,
        (rank, group, local): (u32, GroupId, bool),
        now_ns: u64,
        out: &mut Vec<Command>,
    ) {
        // A watchdog's poll at the same instant goes first: a timeout it finds sets the
        // process's own dump flag, read below. (The engine took the two wake-ups in the order
        // they were asked for, which differs between a folded and an unfolded run.)
        let monitor = self.index(rank, 0);
        if !local
            && !self.dumped[rank as usize]
            && self.watchdogs[monitor].dump_read_put_off_ns != Some(now_ns)
            && self.polls_at(rank, now_ns)
        {
            self.watchdogs[monitor].dump_read_put_off_ns = Some(now_ns);
            super::wake(out, rank, group, Wake::DumpSeen, now_ns);
            return;
        }
        // The process's own flag (`shouldDump_`, set by its broadcast) is read at every wake;
        // the store only where the default group's Work list did not change in the last 100 ms.
        if !local && !self.dumped[rank as usize] && self.store_read_skipped(view, rank, now_ns) {
            let next_ns = next_tick_ns(0, self.scenario.env.coord_check_ns, now_ns + 1);
            super::wake(out, rank, group, Wake::DumpSeen, next_ns);
            return;
        }
        let rank_id = self.rank_id(rank);
        let message = match local {
            true => format!("[Rank {rank_id}] Received a dump signal due to a collective timeout from this local rank; dumping the Flight Recorder"),
            false => format!("[Rank {rank_id}] Received a dump signal from another rank through the store; dumping the Flight Recorder"),
        };
        self.monitor_leaves_loop(
            (rank, group, super::heartbeat::DUMP_SIGNAL),
            now_ns,
            message,
            out,
        );
    }

    /// After the dump wait, `TORCH_NCCL_ASYNC_ERROR_HANDLING` decides. Modes 1 and 2 abort
    /// the communicators first (`ncclCommAbort`), which lasts `host.comm_abort_us` and until the
    /// device drained ([`Self::abort_may_return`]): PyTorch 2.11 took the process down
    /// 0.54–0.78 s later under mode 1 than under 3 (docs/watchdog.md).
    pub(super) fn handle_error(
        &mut self,
        view: &impl RunView,
        rank: u32,
        group: GroupId,
        now_ns: u64,
        out: &mut Vec<Command>,
    ) {
        let mode = self.scenario.env.async_error_handling;
        if mode == ErrorHandling::NoHandling {
            let rank_id = self.rank_id(rank);
            self.note(
                rank,
                Some(group),
                (ThreadKind::Watchdog, WatchdogEvent::NoHandling),
                now_ns,
                error_left_alone(rank_id, mode),
            );
        }
        if !mode.cleans_up() {
            self.after_abort(view, rank, group, now_ns, out);
            return;
        }
        let message = watchdog_abort(self.rank_id(rank), mode, &self.scenario.groups[group].name);
        let thread_event = (ThreadKind::Watchdog, WatchdogEvent::Abort);
        self.note(rank, Some(group), thread_event, now_ns, message);
        let index = self.index(rank, group);
        let already_aborted = self.is_aborted(rank, group);
        let abort_ns = self.watchdog_abort_ns(rank, group);
        self.mark_aborted(rank, group, true);
        out.push(Command::AbortCommunicators { rank, group });
        if already_aborted && !self.watchdogs[index].main_abort_running {
            // The main thread aborted the communicator after a wait's timeout, and its abort
            // returned (R15): NCCL has nothing left to abort, and the abort returns at once
            // (logged as any return, mode 2's marking where polling resumes).
            self.watchdogs[index].aborting = true;
            self.after_abort(view, rank, group, now_ns, out);
            return;
        }
        // Otherwise the abort returns after its least time (none where the main thread's abort
        // runs: the watchdog's waits on it, until it returned) and once the device drained.
        // Asked for as a wake-up even at no least time, so that the kernels the command above
        // cuts have ended when it is looked at.
        self.watchdogs[index].aborting = true;
        self.watchdogs[index].abort_awaits_main = self.watchdogs[index].main_abort_running;
        self.watchdogs[index].abort_least_end_ns = now_ns + abort_ns;
        self.hold_heartbeat_for_abort(rank, group, out);
        wake(out, rank, group, Wake::AbortReturned, now_ns + abort_ns);
    }

    /// The watchdog is inside ncclCommAbort: its heartbeat, still since it began handling the
    /// error, stays still until the abort returns (R28; [`Self::after_abort`] lets it go).
    fn hold_heartbeat_for_abort(&mut self, rank: u32, group: GroupId, out: &mut Vec<Command>) {
        let index = self.index(rank, group);
        let since_ns = self.watchdogs[index].handling_since_ns;
        if self.watchdogs[index].own_abort_stall_since_ns.is_none() {
            self.watchdogs[index].own_abort_stall_since_ns = Some(since_ns);
            let check = Wake::AbortStallCheck { since_ns };
            self.heartbeat_stalls((rank, group), since_ns, u64::MAX, check, out);
        }
    }

    /// The watchdog's abort returns once its least time passed and the device drained: every
    /// stream of the rank, as for the main thread's abort after a wait's timeout (R15).
    /// Measured on PyTorch 2.11 (docs/watchdog.md): behind a GPU sleep still running when the
    /// abort began, or one launched during it, the process went down, or a call blocked on the
    /// communicator raised, 7–37 ms after the sleep ended.
    pub(super) fn abort_may_return(
        &mut self,
        view: &impl RunView,
        rank: u32,
        group: GroupId,
        now_ns: u64,
        out: &mut Vec<Command>,
    ) {
        let index = self.index(rank, group);
        if !self.watchdogs[index].aborting {
            // The abort returned already: a wake-up asked for before it did.
            return;
        }
        if self.watchdogs[index].abort_awaits_main {
            // The main thread's abort still runs: `wait_raised` asks again once it returned.
            return;
        }
        if view.drained(rank) {
            self.after_abort(view, rank, group, now_ns, out);
            return;
        }
        out.push(Command::AwaitDrain { rank, group });
        self.hold_heartbeat_for_abort(rank, group, out);
    }

    /// The error handling after the abort of the communicators (or at once, in the modes that
    /// do not abort): mode 1 and 3 take the process down, 0 and 2 let the watchdog go on.
    pub(super) fn after_abort(
        &mut self,
        view: &impl RunView,
        rank: u32,
        group: GroupId,
        now_ns: u64,
        out: &mut Vec<Command>,
    ) {
        let index = self.index(rank, group);
        let mode = self.scenario.env.async_error_handling;
        let aborted_now = std::mem::take(&mut self.watchdogs[index].aborting);
        if aborted_now || !mode.tears_down() {
            // A call the program made meanwhile, on the communicator or waiting for the Work
            // list, goes on (R27).
            out.push(Command::WatchdogFree { rank, group });
        }
        if aborted_now {
            // The heartbeat moves again.
            self.watchdogs[index].own_abort_stall_since_ns = None;
            if !mode.tears_down() {
                let name = &self.scenario.groups[group].name;
                let message = watchdog_abort_returned(self.rank_id(rank), mode, name);
                let thread_event = (ThreadKind::Watchdog, WatchdogEvent::AbortReturned);
                self.note(rank, Some(group), thread_event, now_ns, message);
            }
        }
        if mode.tears_down() {
            let rank_id = self.rank_id(rank);
            self.take_down(
                (rank, Some(group), ThreadKind::Watchdog),
                (ExitStatus::Aborted, now_ns),
                format!("[Rank {rank_id}] {}: Some NCCL operations have failed or timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data. To avoid data inconsistency, we are taking the entire process down.", error_handling_setting(mode)),
                out,
            );
            return;
        }
        // The process lives on and the watchdog resumes polling: a timed-out Work is done
        // with, and every Work of a failed or aborted communicator.
        let aborted = self.is_aborted(rank, group);
        self.move_tick_origin(index, now_ns);
        let watchdog = &mut self.watchdogs[index];
        watchdog.handling = false;
        if watchdog.handling_timeout && !aborted {
            watchdog.pending.pop_front();
        } else {
            watchdog.pending.clear();
        }
        if let Some(deadline_ns) = self.head_deadline_ns(rank, group) {
            self.schedule_check(rank, group, deadline_ns, out);
        }
        self.watchdog_joined(view, rank, group, now_ns, out);
    }

    /// A collective on a communicator the watchdog aborted (mode 2) raises `DistBackendError`
    /// in the main thread; uncaught, it ends the process.
    pub(super) fn communicator_used(
        &mut self,
        rank: u32,
        group: GroupId,
        op: usize,
        host_ns: u64,
        out: &mut Vec<Command>,
    ) {
        if !self.is_aborted(rank, group) {
            return;
        }
        let rank_id = self.rank_id(rank);
        let scenario = self.scenario;
        let caught = scenario.ops[op].catch;
        let message = crate::pg::work::aborted_communicator_raised(
            rank_id,
            &scenario.groups[group].name,
            &scenario.ops[op],
        );
        if caught {
            self.note(
                rank,
                Some(group),
                (ThreadKind::Main, WatchdogEvent::AsyncError),
                host_ns,
                message.clone(),
            );
            out.push(Command::Caught {
                rank,
                op,
                exception: "DistBackendError",
                message,
                at_ns: host_ns,
            });
            return;
        }
        self.raise_uncaught(
            (rank, Some(group), op),
            FindingKind::AsyncError,
            (host_ns, message),
            out,
        );
    }

    /// The rank as PyTorch names it, the Work's group, and the Work as PyTorch prints it: with
    /// its own (the group's) timeout, whatever the wait's was.
    fn timed_out_work(
        &self,
        view: &impl RunView,
        rank: u32,
        collective: u32,
    ) -> (u32, GroupId, String) {
        // An eager world's send or receive runs on the world's communicator (R11): the wait
        // aborts that one.
        let group = self
            .scenario
            .communicator(view.work(rank, collective).group);
        let work = self.work_text(view, rank, collective);
        (self.rank_id(rank), group, work)
    }

    /// A polling `wait()` of a Work enqueued at `enqueue_ns` timed out at `now_ns` (R15): the
    /// main thread logs it, PyTorch's two lines, and aborts the communicator (its kernels end
    /// now; it raises once the abort returns).
    pub(super) fn wait_timed_out(
        &mut self,
        view: &impl RunView,
        (rank, collective): (u32, u32),
        (enqueue_ns, now_ns): (u64, u64),
        out: &mut Vec<Command>,
    ) {
        let (rank_id, group, work) = self.timed_out_work(view, rank, collective);
        let ran_ns = now_ns.saturating_sub(enqueue_ns);
        for line in crate::pg::work::wait_timeout_log(rank_id, &work, ran_ns) {
            self.note(
                rank,
                Some(group),
                (ThreadKind::Main, WatchdogEvent::WaitTimeout),
                now_ns,
                line,
            );
        }
        self.main_thread_aborts(rank, group, now_ns, out);
    }

    /// A `wait()`, default or polling, found its Work failed by the communicator's NCCL async
    /// error (R15, R27): PyTorch's `WorkNCCL::wait()` (after its loop, if it polls) aborts the
    /// Work's communicator and rethrows the error once the abort returned
    /// ([`Self::wait_raised`]), as after a timeout.
    pub(super) fn wait_found_error(
        &mut self,
        view: &impl RunView,
        (rank, collective): (u32, u32),
        now_ns: u64,
        out: &mut Vec<Command>,
    ) {
        let (rank_id, group, work) = self.timed_out_work(view, rank, collective);
        self.note(
            rank,
            Some(group),
            (ThreadKind::Main, WatchdogEvent::WaitError),
            now_ns,
            crate::pg::work::wait_error_log(rank_id, &work),
        );
        self.main_thread_aborts(rank, group, now_ns, out);
    }

    /// The main thread of `rank` aborts the communicator of `group` in a polling `wait()`
    /// (R15): a later collective on it raises; a running watchdog blocks on the abort, so its
    /// heartbeat stalls while the abort lasts (R28).
    fn main_thread_aborts(&mut self, rank: u32, group: usize, now_ns: u64, out: &mut Vec<Command>) {
        let index = self.index(rank, group);
        self.mark_aborted(rank, group, false);
        self.watchdogs[index].main_abort_running = true;
        if self.watchdog_enabled && crate::pg::work::wait_abort_stalls_watchdog(&self.scenario.env)
        {
            self.watchdogs[index].abort_stall_since_ns = Some(now_ns);
            let check = Wake::AbortStallCheck { since_ns: now_ns };
            // The stalled heartbeat is the watchdog's: its process group's.
            let watchdog = self.watchdog_group(group);
            self.heartbeat_stalls((rank, watchdog), now_ns, u64::MAX, check, out);
        }
        out.push(Command::AbortCommunicators { rank, group });
    }

    /// A `wait()` raised (R15), its abort of the communicator over: the Work's async error
    /// where it `failed` (R27, a default or polling wait); else a polling wait's
    /// timeout, and where it runs, the watchdog finds the aborted communicator's error, caught
    /// or not; caught, the program goes on with the communicator aborted; uncaught, the
    /// exception then ends the process.
    pub(super) fn wait_raised(
        &mut self,
        view: &impl RunView,
        (rank, collective, op): (u32, u32, usize),
        (now_ns, failed): (u64, bool),
        out: &mut Vec<Command>,
    ) {
        let (rank_id, group, work) = self.timed_out_work(view, rank, collective);
        // The abort returned: the watchdog goes on, and its own abort, if it waited on this
        // one, may return now.
        let index = self.index(rank, group);
        self.watchdogs[index].abort_stall_since_ns = None;
        self.watchdogs[index].main_abort_running = false;
        if std::mem::take(&mut self.watchdogs[index].abort_awaits_main)
            && self.watchdogs[index].aborting
        {
            let watchdog = self.watchdog_group(group);
            let at_ns = now_ns.max(self.watchdogs[index].abort_least_end_ns);
            wake(out, rank, watchdog, Wake::AbortReturned, at_ns);
        }
        let group_name = &self.scenario.groups[group].name;
        let message = if failed {
            crate::pg::work::wait_error_abort_returned(rank_id, &work, group_name)
        } else {
            crate::pg::work::wait_abort_returned(rank_id, &work, group_name)
        };
        self.note(
            rank,
            Some(group),
            (ThreadKind::Main, WatchdogEvent::Abort),
            now_ns,
            message.clone(),
        );
        // The error the wait found for its Work, which the Work stored (R27,
        // [`crate::pg::work::stored_error_ns`]): the communicator's earliest, or once it was
        // aborted, the Work's own; and the Work the network failed under, which the watchdog
        // names, whichever Work the wait was on.
        let found = failed
            .then(|| self.stored_error_ns(rank, collective))
            .flatten()
            .map(|error_ns| (error_ns, self.failed_under(rank, group)));
        let catches = self.scenario.ops[op].catch;
        if catches {
            // The communicator stays aborted: its next use raises (R27). The communicator's
            // error is what the wait rethrows.
            if let Some((error_ns, _)) = found {
                self.raise_failed(view, (rank, collective, op), (error_ns, now_ns), out);
            } else {
                out.push(Command::caught_backend_error(rank, op, &message, now_ns));
            }
        }
        // Where the watchdog runs, it finds the aborted communicator's error under the Work in
        // the raise's millisecond and handles it as its own, caught or not: uncaught, it finds
        // it before the exception ends the process (measured on PyTorch 2.11: docs/watchdog.md,
        // and R31's uncaught `wait(timeout)`, tests/data/torch/probes/wait_timeout_abort.variants.txt).
        // After a Work's async error, the one it finds is that error: a poll of its that fell
        // in the abort blocked on it ([`super::Failure::is_stale`]).
        // It names the Work the network failed under (the model does not follow which Work
        // its list polls first).
        let named = found.map_or(collective, |(_, failed_under)| failed_under);
        let watchdog = &self.watchdogs[index];
        let pending = watchdog.pending.iter().any(|p| p.collective == named);
        if crate::pg::work::wait_timeout_reaches_watchdog(&self.scenario.env)
            && !watchdog.handling
            && pending
        {
            // The watchdog of the Work's process group handles it, and its abort (modes
            // 1 and 2) covers every communicator of that group.
            let watchdog = self.watchdog_group(group);
            let caught = if failed {
                super::Caught::AsyncError(named)
            } else {
                super::Caught::AbortedByWait(named)
            };
            self.caught(view, rank, watchdog, caught, now_ns, out);
        }
        match (catches, found) {
            (true, _) => {}
            // The communicator's error is rethrown and ends the process.
            (false, Some((error_ns, _))) => {
                self.raise_failed(view, (rank, collective, op), (error_ns, now_ns), out)
            }
            (false, None) => self.exit_uncaught(rank, group, now_ns, out),
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
    use crate::timeline::{ExitStatus, FindingKind, ThreadKind, WatchdogEvent};

    /// Rank 0 enqueues at 20 µs and times out at 1.1 s (rank 1 never joins).
    fn time_out(failure: &mut Failure<'_>, run: &FakeRun) {
        let (commands, _) = split(time_out_rank_0(failure, run));
        assert_eq!(
            commands[0],
            finding(FindingKind::WatchdogTimeout, 0, FindingAbout::Work(0))
        );
    }

    /// Rank 0's watchdog, inside its abort from the 1.1 s timeout on, holds its heartbeat: the
    /// monitor's read at 960 s (two 480-s periods) finds it still, unless the abort returned.
    fn abort_holds_heartbeat() -> Command {
        wake(
            0,
            Wake::AbortStallCheck {
                since_ns: 1_100_000_000,
            },
            960_000_000_000,
        )
    }

    /// The events of rank 0's records at `at_ns`.
    fn events_at(failure: Failure<'_>, at_ns: u64) -> Vec<WatchdogEvent> {
        failure
            .into_records()
            .iter()
            .filter(|r| r.rank == 0 && r.at_ns == at_ns)
            .map(|r| r.event)
            .collect()
    }

    #[test]
    fn skip_clean_up_exits_without_abort_r27() {
        let scenario = two_ranks("", "");
        let mut failure = Failure::new(&scenario, per_rank(&scenario));
        let run = FakeRun::default().with_work(0, 0, 1);
        time_out(&mut failure, &run);
        assert_eq!(
            woken(&mut failure, &run, 0, Wake::DumpWaitOver, DUMP_WAIT_OVER_NS),
            [Command::KillProcess {
                rank: 0,
                status: ExitStatus::Aborted,
                at_ns: DUMP_WAIT_OVER_NS
            }]
        );
        assert!(!failure.is_aborted(0, 0));
        assert_eq!(events_at(failure, DUMP_WAIT_OVER_NS), [WatchdogEvent::Exit]);
    }

    #[test]
    fn tear_down_aborts_then_exits_r27() {
        let scenario = two_ranks("[env]\nTORCH_NCCL_ASYNC_ERROR_HANDLING = 1", "");
        let mut failure = Failure::new(&scenario, per_rank(&scenario));
        let run = FakeRun::default().with_work(0, 0, 1);
        time_out(&mut failure, &run);
        assert_eq!(
            woken(&mut failure, &run, 0, Wake::DumpWaitOver, DUMP_WAIT_OVER_NS),
            [
                Command::AbortCommunicators { rank: 0, group: 0 },
                abort_holds_heartbeat(),
                wake(0, Wake::AbortReturned, DUMP_WAIT_OVER_NS),
            ]
        );
        assert_eq!(
            woken(
                &mut failure,
                &run,
                0,
                Wake::AbortReturned,
                DUMP_WAIT_OVER_NS
            ),
            [
                Command::WatchdogFree { rank: 0, group: 0 },
                Command::KillProcess {
                    rank: 0,
                    status: ExitStatus::Aborted,
                    at_ns: DUMP_WAIT_OVER_NS
                },
            ]
        );
        assert_eq!(
            events_at(failure, DUMP_WAIT_OVER_NS),
            [WatchdogEvent::Abort, WatchdogEvent::Exit]
        );
    }

    #[test]
    fn the_abort_lasts_comm_abort_us_and_until_the_device_drained_r27() {
        const ABORT_NS: u64 = 550_000_000;
        let scenario = two_ranks(
            "[env]\nTORCH_NCCL_ASYNC_ERROR_HANDLING = 1\n[host]\ncomm_abort_us = 550_000",
            "",
        );
        let mut failure = Failure::new(&scenario, per_rank(&scenario));
        let run = FakeRun::default().with_work(0, 0, 1);
        time_out(&mut failure, &run);
        assert_eq!(
            woken(&mut failure, &run, 0, Wake::DumpWaitOver, DUMP_WAIT_OVER_NS),
            [
                Command::AbortCommunicators { rank: 0, group: 0 },
                abort_holds_heartbeat(),
                wake(0, Wake::AbortReturned, DUMP_WAIT_OVER_NS + ABORT_NS),
            ]
        );
        // GPU work still queued holds the abort until the device drained.
        let busy = FakeRun {
            busy: vec![0],
            ..FakeRun::default().with_work(0, 0, 1)
        };
        let returned_ns = DUMP_WAIT_OVER_NS + ABORT_NS;
        // The watchdog stays in the abort (its heartbeat held since the abort began).
        assert_eq!(
            woken(&mut failure, &busy, 0, Wake::AbortReturned, returned_ns),
            [Command::AwaitDrain { rank: 0, group: 0 }]
        );
        assert_eq!(
            woken(&mut failure, &run, 0, Wake::AbortReturned, returned_ns),
            [
                Command::WatchdogFree { rank: 0, group: 0 },
                Command::KillProcess {
                    rank: 0,
                    status: ExitStatus::Aborted,
                    at_ns: returned_ns
                }
            ]
        );
        assert_eq!(
            events_at(failure, DUMP_WAIT_OVER_NS + ABORT_NS),
            [WatchdogEvent::Exit]
        );
        // Mode 2 resumes polling only once the abort returned; mode 3 aborts nothing and
        // takes the process down at the end of the dump wait.
        let scenario = two_ranks(
            "[env]\nTORCH_NCCL_ASYNC_ERROR_HANDLING = 2\n[host]\ncomm_abort_us = 550_000",
            "",
        );
        let mut failure = Failure::new(&scenario, per_rank(&scenario));
        time_out(&mut failure, &run);
        let commands = woken(&mut failure, &run, 0, Wake::DumpWaitOver, DUMP_WAIT_OVER_NS);
        assert_eq!(
            commands.last(),
            Some(&wake(0, Wake::AbortReturned, DUMP_WAIT_OVER_NS + ABORT_NS))
        );
        let scenario = two_ranks("[host]\ncomm_abort_us = 550_000", "");
        let mut failure = Failure::new(&scenario, per_rank(&scenario));
        time_out(&mut failure, &run);
        assert_eq!(
            woken(&mut failure, &run, 0, Wake::DumpWaitOver, DUMP_WAIT_OVER_NS),
            [Command::KillProcess {
                rank: 0,
                status: ExitStatus::Aborted,
                at_ns: DUMP_WAIT_OVER_NS
            }]
        );
    }

    #[test]
    fn clean_up_only_aborts_and_the_next_use_of_the_communicator_raises_r27() {
        let scenario = two_ranks("[env]\nTORCH_NCCL_ASYNC_ERROR_HANDLING = 2", "");
        let mut failure = Failure::new(&scenario, per_rank(&scenario));
        let run = FakeRun::default().with_work(0, 0, 1);
        // Before the abort the communicator is fine.
        let used = |host_ns| Notice::CommunicatorUsed {
            rank: 0,
            group: 0,
            op: 0,
            host_ns,
        };
        let mut out = Vec::new();
        failure.notify(&run, used(1_000), &mut out);
        assert_eq!(out, []);
        time_out(&mut failure, &run);
        assert_eq!(
            woken(&mut failure, &run, 0, Wake::DumpWaitOver, DUMP_WAIT_OVER_NS),
            [
                Command::AbortCommunicators { rank: 0, group: 0 },
                abort_holds_heartbeat(),
                wake(0, Wake::AbortReturned, DUMP_WAIT_OVER_NS)
            ]
        );
        woken(
            &mut failure,
            &run,
            0,
            Wake::AbortReturned,
            DUMP_WAIT_OVER_NS,
        );
        assert!(failure.is_aborted(0, 0));
        failure.notify(&run, used(DUMP_WAIT_OVER_NS + 15_000), &mut out);
        let (commands, messages) = split(out);
        assert_eq!(
            commands,
            [
                finding(FindingKind::AsyncError, 0, FindingAbout::Call(0)),
                Command::KillProcess {
                    rank: 0,
                    status: ExitStatus::Raised,
                    at_ns: DUMP_WAIT_OVER_NS + 15_000
                },
            ]
        );
        assert!(messages[0].contains("DistBackendError"), "{}", messages[0]);
    }

    #[test]
    fn no_handling_leaves_the_process_and_goes_on_to_the_next_pending_work_r27() {
        // Two Works (20 µs and 50 µs): the first times out at 1.1 s; after the dump wait the
        // watchdog's polls restart at 61.1 s, where the second is long past its deadline.
        let scenario = two_ranks("[env]\nTORCH_NCCL_ASYNC_ERROR_HANDLING = 0", "");
        let mut failure = Failure::new(&scenario, per_rank(&scenario));
        let run = FakeRun::default().with_work(0, 0, 1).with_work(0, 1, 2);
        time_out(&mut failure, &run);
        assert_eq!(enqueue(&mut failure, &run, (0, 1), 50_000), []);
        assert_eq!(
            woken(&mut failure, &run, 0, Wake::DumpWaitOver, DUMP_WAIT_OVER_NS),
            [
                Command::WatchdogFree { rank: 0, group: 0 },
                wake(0, Wake::Check, DUMP_WAIT_OVER_NS)
            ]
        );
        let (commands, messages) =
            split(woken(&mut failure, &run, 0, Wake::Check, DUMP_WAIT_OVER_NS));
        assert_eq!(
            commands[0],
            finding(FindingKind::WatchdogTimeout, 0, FindingAbout::Work(1))
        );
        assert!(messages[0].contains("SeqNum=2"), "{}", messages[0]);
        assert_eq!(
            events_at(failure, DUMP_WAIT_OVER_NS),
            [
                WatchdogEvent::NoHandling,
                WatchdogEvent::Timeout,
                WatchdogEvent::DumpSignal
            ]
        );
    }

    #[test]
    fn the_dump_wait_is_four_times_the_dump_timeout_and_each_rank_dumps_once_r27() {
        let scenario = two_ranks("[env]\nTORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC = 1000", "");
        let mut failure = Failure::new(&scenario, per_rank(&scenario));
        let run = FakeRun::default().with_work(0, 0, 1);
        enqueue(&mut failure, &run, (0, 0), 20_000);
        let commands = woken(&mut failure, &run, 0, Wake::Check, 1_100_000_000);
        assert_eq!(
            commands.last(),
            Some(&wake(0, Wake::DumpWaitOver, 5_100_000_000))
        );
        // Rank 1's monitor dumps at its poll and leaves its loop: it ends the process one
        // heartbeat timeout later (measured on PyTorch 2.11: docs/watchdog.md); a second signal
        // finds it gone from its loop.
        assert_eq!(
            woken(&mut failure, &run, 1, Wake::DumpSeen, 2_000_000_000),
            [wake(1, Wake::MonitorKill, 482_000_000_000)]
        );
        let mut out = Vec::new();
        assert!(failure.is_stale(&run, (1, 0, Wake::DumpSeen), 3_000_000_000, &mut out));
        let dumps = failure
            .into_records()
            .iter()
            .filter(|r| r.event == WatchdogEvent::Dump)
            .map(|r| (r.rank, r.at_ns))
            .collect::<Vec<_>>();
        assert_eq!(dumps, [(0, 1_100_000_000), (1, 2_000_000_000)]);
    }

    /// Rank 1's monitor, woken for rank 0's dump signal at 2.0 s, skips every read of the store
    /// before `seen_ns` (one second apart) and leaves its loop at `seen_ns` (R28).
    fn reads_the_signal_at(failure: &mut Failure<'_>, run: &FakeRun, seen_ns: u64, case: &str) {
        // A read at the instant of a watchdog's poll is put off once behind it; the fake run
        // has no event queue, so the read comes again at once.
        let woken = |failure: &mut Failure<'_>, at_ns| {
            let out = woken(failure, run, 1, Wake::DumpSeen, at_ns);
            if out == [wake(1, Wake::DumpSeen, at_ns)] {
                return woken(failure, run, 1, Wake::DumpSeen, at_ns);
            }
            out
        };
        let mut read_ns = 2_000_000_000;
        while read_ns < seen_ns {
            assert_eq!(
                woken(failure, read_ns),
                [wake(1, Wake::DumpSeen, read_ns + 1_000_000_000)],
                "{case}: the read at {read_ns} is skipped"
            );
            read_ns += 1_000_000_000;
        }
        assert_eq!(
            woken(failure, read_ns),
            [wake(1, Wake::MonitorKill, seen_ns + 480_000_000_000)],
            "{case}"
        );
    }

    #[test]
    fn the_default_monitor_reads_the_store_only_100_ms_after_a_work_left_the_list_r28() {
        // Rank 0 times out at 1.1 s and broadcasts; its signal is read at the 2.0 s poll of
        // the store. Rank 1's default-group Work, enqueued at 1.5 s, ends at `end_ns`: its
        // watchdog takes it off the list at its next 100-ms poll, and the monitor skips any
        // store poll less than 100 ms after that (`HeartbeatMonitor::runLoop`).
        for (end_ns, seen_ns) in [
            (1_950_000_000, 3_000_000_000),
            (1_850_000_000, 2_000_000_000),
            (2_000_000_000, 3_000_000_000),
        ] {
            let scenario = two_ranks("", "");
            let mut failure = Failure::new(&scenario, per_rank(&scenario));
            let mut run = FakeRun::default().with_work(0, 0, 1).with_work(1, 0, 1);
            run.ends_ns.insert((1, 0), end_ns);
            enqueue(&mut failure, &run, (1, 0), 1_500_000_000);
            time_out_rank_0(&mut failure, &run);
            reads_the_signal_at(&mut failure, &run, seen_ns, &format!("end {end_ns}"));
        }
    }

    /// Rank 1's watchdog polls at 2.0 s, the instant its monitor reads rank 0's dump signal
    /// (R28): the read is put off once behind the poll (the engine then takes the poll first),
    /// whichever of the two wake-ups was asked for first; the second time it is read.
    #[test]
    fn the_monitor_reads_the_store_after_a_watchdog_poll_of_the_same_instant_r28() {
        let scenario = two_ranks("", "");
        let mut failure = Failure::new(&scenario, per_rank(&scenario));
        let run = FakeRun::default().with_work(0, 0, 1).with_work(1, 0, 1);
        time_out_rank_0(&mut failure, &run);
        let out = enqueue(&mut failure, &run, (1, 0), 1_000_000_000);
        assert!(
            out.contains(&wake(1, Wake::Check, 2_000_000_000)),
            "{out:?}"
        );
        assert_eq!(
            woken(&mut failure, &run, 1, Wake::DumpSeen, 2_000_000_000),
            [wake(1, Wake::DumpSeen, 2_000_000_000)]
        );
        let read = woken(&mut failure, &run, 1, Wake::DumpSeen, 2_000_000_000);
        assert_ne!(
            read,
            [wake(1, Wake::DumpSeen, 2_000_000_000)],
            "put off once only"
        );
    }

    #[test]
    fn a_work_enqueued_less_than_100_ms_before_the_read_skips_it_too_r28() {
        // `workEnqueue` updates `lastWorkListUpdateTime_` as a removal does: rank 1's Work
        // enqueued at 1.95 s (not ended) makes its monitor skip the 2.0-s read of the store;
        // one enqueued at 1.85 s does not.
        for (enqueue_ns, seen_ns) in [
            (1_950_000_000, 3_000_000_000),
            (1_850_000_000, 2_000_000_000),
        ] {
            let scenario = two_ranks("", "");
            let mut failure = Failure::new(&scenario, per_rank(&scenario));
            let run = FakeRun::default().with_work(0, 0, 1).with_work(1, 0, 1);
            time_out_rank_0(&mut failure, &run);
            enqueue(&mut failure, &run, (1, 0), enqueue_ns);
            reads_the_signal_at(
                &mut failure,
                &run,
                seen_ns,
                &format!("enqueue {enqueue_ns}"),
            );
        }
    }

    #[test]
    fn a_hung_watchdog_takes_nothing_off_its_list_r28() {
        // Rank 1's watchdog hangs at its first poll after the 1.5-s enqueue (1.6 s); its Work
        // ends at 1.95 s, before its deadline, but no poll takes it off, so the monitor reads
        // the store at 2.0 s.
        let scenario = two_ranks("", "");
        let mut failure = Failure::new(&scenario, per_rank(&scenario));
        let mut run = FakeRun::default().with_work(0, 0, 1).with_work(1, 0, 1);
        run.ends_ns.insert((1, 0), 1_950_000_000);
        let mut out = Vec::new();
        failure.notify(
            &run,
            Notice::FaultReached {
                rank: 1,
                op: 0,
                iteration: 0,
                fault: crate::scenario::FaultKind::WatchdogStuck,
                host_ns: 0,
            },
            &mut out,
        );
        enqueue(&mut failure, &run, (1, 0), 1_500_000_000);
        time_out_rank_0(&mut failure, &run);
        assert_eq!(
            woken(&mut failure, &run, 1, Wake::DumpSeen, 2_000_000_000),
            [wake(1, Wake::MonitorKill, 482_000_000_000)]
        );
    }

    #[test]
    fn the_broadcasting_rank_s_monitor_reads_its_own_flag_whatever_its_work_list_r28() {
        // Rank 0's second Work ends at 1.95 s and leaves its list at the 2.0-s poll, but the
        // dump flag its own broadcast set is read before the store and whatever the list did.
        let scenario = two_ranks("", "");
        let mut failure = Failure::new(&scenario, per_rank(&scenario));
        let mut run = FakeRun::default().with_work(0, 0, 1).with_work(0, 1, 2);
        run.ends_ns.insert((0, 1), 1_950_000_000);
        time_out_rank_0(&mut failure, &run);
        enqueue(&mut failure, &run, (0, 1), 1_500_000_000);
        assert_eq!(
            woken(&mut failure, &run, 0, Wake::DumpSeen, 2_000_000_000),
            [wake(0, Wake::MonitorKill, 482_000_000_000)]
        );
    }

    #[test]
    fn a_dump_longer_than_the_sleep_for_it_delays_the_error_handling_r27() {
        // Measured on PyTorch 2.11: 4 x 100 ms of sleep, but the process went down 1.1-1.3 s
        // after the dump signal; from 4 x 1 s up, at the end of the sleep.
        for (dump_timeout_ms, over_ns) in [(100, 2_700_000_000), (1000, 5_100_000_000)] {
            let scenario = two_ranks(
                &format!("[env]\nTORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC = {dump_timeout_ms}\n[host]\nflight_recorder_dump_us = 1_600_000"),
                "",
            );
            let mut failure = Failure::new(&scenario, per_rank(&scenario));
            let commands = time_out_rank_0(&mut failure, &FakeRun::default().with_work(0, 0, 1));
            assert_eq!(
                commands.last(),
                Some(&wake(0, Wake::DumpWaitOver, over_ns)),
                "{dump_timeout_ms} ms"
            );
        }
    }

    #[test]
    fn a_timeout_s_stack_trace_delays_the_dump_signal_and_the_wait_r27() {
        // PyTorch symbolises the timed-out Work's stack trace first (host cost 3.9 s here).
        let scenario = two_ranks(
            "[env]\nTORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC = 250\n[host]\nwatchdog_stack_trace_us = 3_900_000",
            "",
        );
        let mut failure = Failure::new(&scenario, per_rank(&scenario));
        let run = FakeRun::default().with_work(0, 0, 1);
        enqueue(&mut failure, &run, (0, 0), 20_000);
        let commands = woken(&mut failure, &run, 0, Wake::Check, 1_100_000_000);
        assert_eq!(
            commands.last(),
            Some(&wake(0, Wake::StackTraceLogged, 5_000_000_000))
        );
        assert!(!commands.contains(&wake(0, Wake::DumpWaitOver, 2_100_000_000)));
        assert_eq!(
            woken(&mut failure, &run, 0, Wake::StackTraceLogged, 5_000_000_000).last(),
            Some(&wake(0, Wake::DumpWaitOver, 6_000_000_000))
        );
        let events: Vec<(WatchdogEvent, u64)> = failure
            .into_records()
            .iter()
            .filter(|r| r.rank == 0)
            .map(|r| (r.event, r.at_ns))
            .collect();
        assert_eq!(
            events[..3],
            [
                (WatchdogEvent::Timeout, 1_100_000_000),
                (WatchdogEvent::StackTrace, 5_000_000_000),
                (WatchdogEvent::DumpSignal, 5_000_000_000)
            ]
        );
    }

    #[test]
    fn with_the_flight_recorder_off_nothing_is_symbolised_and_the_wait_is_unchanged_r27() {
        // Measured on PyTorch 2.11 (tests/data/torch/probes/fr_off.txt): the "not found" line
        // at the timeout, the signal at once, the take-down as long after it as with the
        // recorder on (here the later of 4 x 250 ms and the 1.6-s dump).
        let scenario = two_ranks(
            "[env]\nTORCH_FR_BUFFER_SIZE = 0\nTORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC = 250\n[host]\nwatchdog_stack_trace_us = 3_900_000\nflight_recorder_dump_us = 1_600_000",
            "",
        );
        let mut failure = Failure::new(&scenario, per_rank(&scenario));
        let run = FakeRun::default().with_work(0, 0, 1);
        enqueue(&mut failure, &run, (0, 0), 20_000);
        let commands = woken(&mut failure, &run, 0, Wake::Check, 1_100_000_000);
        assert!(commands.contains(&wake(0, Wake::DumpWaitOver, 2_700_000_000)));
        assert!(!commands.iter().any(|c| matches!(
            c,
            Command::Wake {
                wake: Wake::StackTraceLogged,
                ..
            }
        )));
        let records = failure.into_records();
        let trace = records
            .iter()
            .find(|r| r.event == WatchdogEvent::StackTrace)
            .unwrap();
        assert_eq!(trace.at_ns, 1_100_000_000);
        assert!(trace.message.contains("not found"), "{}", trace.message);
    }

    #[test]
    fn a_caught_wait_timeout_s_aborted_communicator_reaches_the_watchdog_as_an_error_r15() {
        // `wait(timeout=50 ms)`, caught, without blocking wait: the watchdog runs.
        let scenario = two_ranks("", "timeout_ms = 50\ncatch = true\n");
        let mut failure = Failure::new(&scenario, per_rank(&scenario));
        let run = FakeRun::default().with_work(0, 0, 1);
        enqueue(&mut failure, &run, (0, 0), 20_000);
        let mut out = Vec::new();
        let timed_out = Notice::WaitTimedOut {
            rank: 0,
            collective: 0,
            enqueue_ns: 20_000,
            now_ns: 70_000_000,
        };
        failure.notify(&run, timed_out, &mut out);
        // The main thread aborts the communicator at the timeout; it raises later. The watchdog
        // blocks on the abort meanwhile: the heartbeat monitor's second read after the timeout
        // (480 s grid) would find it stuck.
        assert_eq!(
            out,
            [
                wake(
                    0,
                    Wake::AbortStallCheck {
                        since_ns: 70_000_000
                    },
                    960_000_000_000
                ),
                Command::AbortCommunicators { rank: 0, group: 0 }
            ]
        );
        assert!(failure.is_aborted(0, 0));
        out.clear();
        let raised = Notice::WaitRaised {
            rank: 0,
            collective: 0,
            op: 1,
            now_ns: 1_000_000_000,
            failed: false,
        };
        failure.notify(&run, raised, &mut out);
        assert!(matches!(out[0], Command::Caught { op: 1, .. }));
        // The abort returned long before that read: it finds the watchdog beating again.
        let mut later = Vec::new();
        let check = (
            0,
            0,
            Wake::AbortStallCheck {
                since_ns: 70_000_000,
            },
        );
        assert!(failure.is_stale(&run, check, 960_000_000_000, &mut later));
        let kinds: Vec<FindingKind> = out
            .iter()
            .filter_map(|command| match command {
                Command::Finding { kind, .. } => Some(*kind),
                _ => None,
            })
            .collect();
        assert_eq!(kinds, [FindingKind::AsyncError]);
        let records = failure.into_records();
        let at_raise: Vec<WatchdogEvent> = records
            .iter()
            .filter(|r| r.at_ns == 1_000_000_000)
            .map(|r| r.event)
            .collect();
        assert_eq!(
            at_raise[..2],
            [WatchdogEvent::Abort, WatchdogEvent::AsyncError]
        );
        assert!(records.iter().all(|r| r.event != WatchdogEvent::Timeout));
    }

    #[test]
    fn a_blocking_wait_that_raised_ends_the_process_r15() {
        let scenario = two_ranks("[env]\nTORCH_NCCL_BLOCKING_WAIT = 1", "");
        let mut failure = Failure::new(&scenario, per_rank(&scenario));
        let run = FakeRun::default().with_work(0, 0, 1);
        // Blocking wait starts no watchdog: an enqueue asks for nothing.
        assert_eq!(enqueue(&mut failure, &run, (0, 0), 20_000), []);
        let mut out = Vec::new();
        failure.notify(
            &run,
            Notice::WaitTimedOut {
                rank: 0,
                collective: 0,
                enqueue_ns: 20_000,
                now_ns: 1_000_034_000,
            },
            &mut out,
        );
        assert_eq!(
            out,
            [Command::AbortCommunicators { rank: 0, group: 0 }],
            "the main thread aborts the communicator, then raises"
        );
        out.clear();
        // The abort ended (its floor, the GPU drained): the raise ends the process.
        failure.notify(
            &run,
            Notice::WaitRaised {
                rank: 0,
                collective: 0,
                op: 0,
                now_ns: 1_930_034_000,
                failed: false,
            },
            &mut out,
        );
        assert_eq!(
            out,
            [Command::KillProcess {
                rank: 0,
                status: ExitStatus::Raised,
                at_ns: 1_930_034_000
            }]
        );
        let records = failure.into_records();
        let events = |at_ns| -> Vec<WatchdogEvent> {
            records
                .iter()
                .filter(|r| r.rank == 0 && r.at_ns == at_ns)
                .map(|r| r.event)
                .collect()
        };
        // The main thread's two lines, in PyTorch's order: the timeout check's, then the wait's.
        let at_timeout: Vec<&str> = (records.iter())
            .filter(|r| r.rank == 0 && r.at_ns == 1_000_034_000)
            .map(|r| {
                assert_eq!(
                    (r.thread, r.event),
                    (ThreadKind::Main, WatchdogEvent::WaitTimeout)
                );
                r.message.as_str()
            })
            .collect();
        assert_eq!(at_timeout.len(), 2, "{at_timeout:?}");
        assert!(
            at_timeout[0].starts_with(
                "[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, "
            ) && at_timeout[0].ends_with(" ran for 1000 milliseconds before timing out."),
            "{}",
            at_timeout[0]
        );
        assert!(
            at_timeout[1].contains(") timed out in blocking wait. "),
            "{}",
            at_timeout[1]
        );
        assert_eq!(
            events(1_930_034_000),
            [WatchdogEvent::Abort, WatchdogEvent::Exit]
        );
    }
}
