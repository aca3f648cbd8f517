//! A rank's polling waits (R15): blocking wait and `wait(timeout)` poll the Work on the host
//! until it completes, times out or is found failed by an NCCL async error (R27); in the last
//! two cases the main thread aborts the communicator and raises once the abort returned, as
//! any `wait()` does whose Work stored its error before the call; a caught raise resumes the
//! host's cursor ([`super::host`]) at the next op.

use super::failure::Notice;
use super::host::next_poll_ns;
use super::{Blocked, Engine, Event, Waiter, NEVER};
use crate::pg::{work, Slot};
use crate::timeline::*;

impl Engine<'_> {
    /// Blocking wait (R15) or `wait(timeout)`: the host polls until the end event fired,
    /// raising at the first poll at or after the timeout counted from the enqueue (R26's clock,
    /// checked by the main thread).
    pub(super) fn poll(
        &mut self,
        rank: u32,
        collective: u32,
        end: Slot,
        interval_ns: u64,
        timeout_ns: u64,
    ) {
        let end = self.instance(rank, end);
        // The polling host returns only once the end event passed.
        self.ranks[rank as usize].race.host_waits(end);
        let enqueue_ns = self.enqueue_ns(rank, collective);
        let error_ns = self.poll_error_ns(rank, collective);
        let state = &mut self.ranks[rank as usize];
        let host_ns = state.host_ns;
        let completed = state.fired_ns[end as usize] != NEVER;
        if completed && !work::failed_by(error_ns, host_ns) {
            // Completed before the first poll, and no error of its communicator yet: the
            // first check succeeds.
            return;
        }
        if !completed {
            state.waiters.add(end, Waiter::Host);
        }
        let timeout_poll_ns = next_poll_ns(
            host_ns,
            interval_ns,
            work::timeout_deadline_ns(enqueue_ns, timeout_ns),
        );
        // A Work whose communicator reported an NCCL async error (its own, or another Work's
        // of the same communicator) is completed, with its error, at the first poll after the
        // error, and raises there (R27); a Work completed before the call, at its first check.
        // Decided here: no Work is enqueued on the rank while its host polls, and its main
        // thread aborts nothing meanwhile (a watchdog's abort within the one poll interval up to
        // that poll is not followed).
        let error_poll_ns = error_ns.map(|error_ns| next_poll_ns(host_ns, interval_ns, error_ns));
        let failed = error_poll_ns.is_some_and(|error_poll_ns| error_poll_ns <= timeout_poll_ns);
        let deadline_ns = error_poll_ns.map_or(timeout_poll_ns, |error_poll_ns| {
            timeout_poll_ns.min(error_poll_ns)
        });
        state.blocked = Blocked::Polling {
            first_poll_ns: host_ns,
            poll_ns: interval_ns,
            deadline_ns,
            collective,
            failed,
        };
        let generation = state.generation;
        self.schedule(deadline_ns, Event::WaitTimeout { rank, generation });
    }

    /// A `wait()` whose Work stored its NCCL async error ([`work::stored_error_ns`]: its own
    /// `is_completed()` found it before), found after its stream wait (R27: PyTorch's
    /// `WorkNCCL::wait()` checks `exception()` after `synchronize()`, for every wait), or a
    /// barrier's wait whose own `is_completed()` found it (R14): as a poll whose first check
    /// finds the error, at the host's time, it aborts the communicator, then raises
    /// ([`Self::wait_timed_out`]).
    pub(super) fn wait_found_error(&mut self, rank: u32, collective: u32) {
        let interval_ns = self.scenario.host.blocking_wait_poll_ns;
        let state = &mut self.ranks[rank as usize];
        let host_ns = state.host_ns;
        state.blocked = Blocked::Polling {
            first_poll_ns: host_ns,
            poll_ns: interval_ns,
            deadline_ns: host_ns,
            collective,
            failed: true,
        };
        let generation = state.generation;
        self.schedule(host_ns, Event::WaitTimeout { rank, generation });
    }

    /// `wait(timeout)` or blocking wait past the timeout, or at the first poll after the Work's
    /// async error (R15, R27): the main thread aborts the communicator, and raises once the
    /// abort ended ([`Self::wait_abort_check`]).
    pub(super) fn wait_timed_out(&mut self, rank: u32, generation: u64) {
        let now_ns = self.now_ns;
        let state = &self.ranks[rank as usize];
        let Blocked::Polling {
            collective, failed, ..
        } = state.blocked
        else {
            return;
        };
        if state.generation != generation {
            return;
        }
        if failed {
            // The poll found the Work failed, and the Work stores the error (R27): wait()
            // aborts the communicator, then raises the error, not a timeout.
            let error_ns = self.poll_error_ns(rank, collective);
            (self.failure).program_polled((rank, collective), error_ns, now_ns);
            self.notify(Notice::WaitFoundError {
                rank,
                collective,
                now_ns,
            });
            self.wait_aborts(rank, collective, true);
            return;
        }
        let op = &self.scenario.ops[state.blocked_op];
        let enqueue_ns = self.enqueue_ns(rank, collective);
        let work = self.work_text(rank, collective);
        let state = &self.ranks[rank as usize];
        let rank_id = state.timeline.rank;
        let finding = Finding {
            kind: FindingKind::WaitTimeout,
            rank: Some(rank_id),
            iteration: Some(state.iteration),
            op: Some(op.index as OpRef),
            stream: Some(state.timeline.streams[op.stream].name.clone()),
            message: work::wait_timeout_finding(
                rank_id,
                &work,
                now_ns.saturating_sub(enqueue_ns),
                op,
            ),
            stands_for: RankSet::default(),
        };
        self.rank_finding(rank, finding);
        self.notify(Notice::WaitTimedOut {
            rank,
            collective,
            enqueue_ns,
            now_ns,
        });
        self.wait_aborts(rank, collective, false);
    }

    /// The wait of `rank` on `collective` aborts the communicator (the Work `failed` by an
    /// async error, else a polling wait timed out) and raises once the abort ended.
    fn wait_aborts(&mut self, rank: u32, collective: u32, failed: bool) {
        let floor_ns = work::wait_abort_floor_ns(self.now_ns, self.scenario.host.comm_abort_ns);
        let state = &mut self.ranks[rank as usize];
        // The host no longer waits for the Work's end event: it is in the abort.
        state.waiters.forget_host();
        state.blocked = Blocked::Aborting {
            collective,
            floor_passed: false,
            failed,
        };
        let generation = state.generation;
        self.schedule(floor_ns, Event::WaitAbortDue { rank, generation });
    }

    /// The abort in a wait (its timeout, or its Work's async error) may end now: its least time passed
    /// (`host.comm_abort_us`), or a stream moved after it had.
    pub(super) fn wait_abort_due(&mut self, rank: u32, generation: u64) {
        let state = &mut self.ranks[rank as usize];
        if state.generation != generation {
            return;
        }
        let Blocked::Aborting { floor_passed, .. } = &mut state.blocked else {
            return;
        };
        *floor_passed = true;
        self.wait_abort_check(rank);
    }

    /// The abort in a wait ends once its floor passed and the device drained: every
    /// stream of the rank, not only the collective's (measured: a sleep on a stream the
    /// collective does not wait for holds the raise too). The call ends there and the wait
    /// raises (R15). Called from an event of its own, never from inside a stream's advance, so
    /// that a raise that ends the process stops its GPU between two steps.
    fn wait_abort_check(&mut self, rank: u32) {
        let now_ns = self.now_ns;
        let state = &self.ranks[rank as usize];
        let Blocked::Aborting {
            collective,
            floor_passed: true,
            failed,
        } = state.blocked
        else {
            return;
        };
        if !state.drained() {
            return;
        }
        let op = state.blocked_op;
        self.raised_in_wait(rank, collective, op, now_ns);
        self.notify(Notice::WaitRaised {
            rank,
            collective,
            op,
            now_ns,
            failed,
        });
        self.resume_if_caught(rank, now_ns);
    }

    /// The `wait()` (op `op`) on the Work of `collective` raised at `now_ns`: its call
    /// and the wait's record end there.
    fn raised_in_wait(&mut self, rank: u32, collective: u32, op: usize, now_ns: u64) {
        self.push_host_call(rank, op, now_ns);
        let state = &mut self.ranks[rank as usize];
        if let Some(wait) = &mut state.timeline.collectives[collective as usize].wait {
            wait.host_end_ns = now_ns;
        }
    }

    /// Whether the program of `rank` just caught an exception (`catch = true`), and forget it.
    pub(super) fn take_caught(&mut self, rank: u32) -> bool {
        std::mem::take(&mut self.ranks[rank as usize].caught)
    }

    /// A wait that raised and was caught: the host goes on at the next op from `now_ns`.
    fn resume_if_caught(&mut self, rank: u32, now_ns: u64) {
        if !self.take_caught(rank) {
            return;
        }
        let state = &mut self.ranks[rank as usize];
        // The host no longer waits for the Work's end event.
        state.waiters.forget_host();
        // A wait inside a collective op (a synchronous call's, R11) ends the op there: its
        // later calls never run.
        state.pg.left_before_call(state.cursor.calls_checked());
        state.cursor.leave_op();
        state.blocked = Blocked::Timer;
        self.schedule(now_ns, self.host_resume(rank, now_ns));
    }

    /// The NCCL async error a poll of `rank`'s Work of `collective` finds from its instant
    /// on (R27, [`work::poll_error_ns`]): the Work's own, or its communicator's while that is
    /// not aborted.
    pub(super) fn poll_error_ns(&self, rank: u32, collective: u32) -> Option<u64> {
        self.failure.poll_error_ns(rank, collective, || {
            let group = self.ranks[rank as usize].timeline.collectives[collective as usize].group;
            group as crate::scenario::GroupId
        })
    }

    /// When the Work of a collective record was enqueued (its kernel's launch).
    pub(super) fn enqueue_ns(&self, rank: u32, collective: u32) -> u64 {
        let state = &self.ranks[rank as usize];
        state.timeline.kernels[state.scratch.collective_kernel[collective as usize] as usize]
            .enqueue_ns
    }
}
