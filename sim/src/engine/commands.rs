//! The engine's side of the failure component ([`failure`](super::failure)): the read-only
//! view of the run it is given, and the one place its commands are applied to rank, host and
//! stream state — schedule a wake-up, record a finding, poison a rendezvous, hang a host,
//! abort a communicator, end a process.

use super::failure::{Command, FindingAbout, Notice, Progress, RunView, WorkFacts};
use super::*;
use crate::pg::faults::{host_effect, HostEffect, RankFaults};

/// The engine's [`View`], borrowing only the fields it reads (so that the failure component,
/// another field, can be borrowed mutably beside it).
macro_rules! view {
    ($engine:expr) => {
        View {
            ranks: &$engine.ranks,
            comm_init_root_ns: &$engine.comm_init_root_ns,
            comm_init_ranks: &$engine.comm_init_ranks,
            comm_init_end_ns: &$engine.comm_init_end_ns,
            unique_ids: &$engine.unique_ids,
            scenario: $engine.scenario,
            any_dead: $engine.any_dead,
            epoch: $engine.epoch,
        }
    };
}

/// The run as the failure component may read it.
struct View<'a> {
    ranks: &'a [RankState],
    /// When each group's root arrived in its init, publishing the unique id (R29).
    comm_init_root_ns: &'a [Option<u64>],
    /// How many ranks of each group still do their part of its init (R8).
    comm_init_ranks: &'a [u32],
    /// When each group's init ends, once every member counted (R8).
    comm_init_end_ns: &'a [u64],
    unique_ids: &'a [UniqueIdExchange],
    scenario: &'a Scenario,
    any_dead: bool,
    epoch: u64,
}

impl RunView for View<'_> {
    fn is_dead(&self, rank: u32) -> bool {
        self.any_dead && matches!(self.ranks[rank as usize].blocked, Blocked::Dead)
    }

    fn work(&self, rank: u32, collective: u32) -> WorkFacts {
        let state = &self.ranks[rank as usize];
        let records = &state.timeline;
        if let Some(folded) = records.folded_work(collective) {
            return WorkFacts {
                op: folded.op as usize,
                iteration: folded.iteration,
                group: folded.group as GroupId,
                seq: folded.seq,
                seq_num: folded.seq_num,
                bytes: folded.bytes,
            };
        }
        let record = &records.collectives[collective as usize];
        WorkFacts {
            op: record.op as usize,
            iteration: record.iteration,
            group: record.group as GroupId,
            seq: record.seq,
            seq_num: record.seq_num(),
            bytes: record.bytes,
        }
    }

    fn work_end_ns(&self, rank: u32, collective: u32, end: u32) -> Option<u64> {
        let state = &self.ranks[rank as usize];
        if let Some(folded) = state.timeline.folded_work(collective) {
            return Some(folded.end_ns);
        }
        debug_assert_eq!(Some(end), state.scratch.enqueued_end(collective as usize));
        let fired_ns = state.fired_ns[end as usize];
        (fired_ns != NEVER).then_some(fired_ns)
    }

    fn progress(
        &self,
        rank: u32,
        (group, seq): (GroupId, u64),
        point_to_point: bool,
        now_ns: u64,
    ) -> Progress {
        let state = &self.ranks[rank as usize];
        // A collective's SeqNum goes on from those the group ran before the program.
        let before = if point_to_point {
            0
        } else {
            self.scenario.groups[group].collectives_before()
        };
        let mut progress = Progress {
            last_enqueued: state.group_seq[group],
            enqueued_seq_num: before,
            completed_seq_num: before,
            ..Progress::default()
        };
        // The calls the report numbers: a point-to-point call is numbered among its process
        // group's point-to-point calls, whatever the peer (a pair's send or receive is the
        // default group's), a collective among its group's collectives.
        let scenario = self.scenario;
        let numbered = |g: GroupId, op: u32| {
            let kind_p2p = scenario.ops[op as usize].kind.is_point_to_point();
            kind_p2p == point_to_point
                && if point_to_point {
                    scenario.process_group(g) == scenario.process_group(group)
                } else {
                    g == group
                }
        };
        // Folded collectives (a summarised run) completed, their kernels started.
        for folded in &state.timeline.folded_works {
            let folded_group = folded.group as GroupId;
            let counted = numbered(folded_group, folded.op);
            if counted {
                progress.enqueued_seq_num = progress.enqueued_seq_num.max(folded.seq_num);
            }
            if folded.end_ns > now_ns {
                continue;
            }
            if counted {
                progress.completed_seq_num = progress.completed_seq_num.max(folded.seq_num);
            }
            if folded_group == group {
                progress.last_completed = progress.last_completed.max(folded.seq);
                progress.kernel_started |= folded.seq == seq;
            }
        }
        let base = state.timeline.collectives.base();
        for (offset, c) in state.timeline.collectives.items().iter().enumerate() {
            let index = base + offset;
            let c_group = c.group as GroupId;
            let counted = numbered(c_group, c.op);
            if !counted && c_group != group {
                continue;
            }
            // A Work not enqueued yet (its host blocked before it) is not counted.
            let Some(end) = state.scratch.enqueued_end(index) else {
                continue;
            };
            let completed = state.fired_ns[end as usize] <= now_ns;
            if counted {
                progress.enqueued_seq_num = progress.enqueued_seq_num.max(c.seq_num());
                if completed {
                    progress.completed_seq_num = progress.completed_seq_num.max(c.seq_num());
                }
            }
            if c_group != group {
                continue;
            }
            if completed {
                progress.last_completed = progress.last_completed.max(c.seq);
            }
            if c.seq == seq {
                let kernel = state.scratch.collective_kernel[index];
                progress.kernel_started |=
                    state.scratch.kernel_times.get(kernel as usize).start_ns <= now_ns;
            }
        }
        progress
    }

    fn waits_for_unique_id(&self, rank: u32, group: GroupId, now_ns: u64) -> bool {
        // A root whose host ran ahead arrived at a time of its own, maybe later than now; one
        // that publishes at `now_ns` itself is too late for a `store.get` giving up then (R29).
        let exchange = &self.unique_ids[group];
        if exchange.waiting.contains_key(&rank) {
            return exchange
                .published_ns
                .is_none_or(|root_ns| root_ns >= now_ns);
        }
        if exchange.fetched.contains(&rank) {
            return false;
        }
        matches!(self.ranks[rank as usize].blocked, Blocked::CommInit)
            && self.comm_init_root_ns[group].is_none_or(|root_ns| root_ns >= now_ns)
    }

    fn waits_for_communicator(&self, rank: u32, group: GroupId, now_ns: u64) -> bool {
        let formed =
            (self.comm_init_ranks[group] as usize) == self.scenario.groups[group].ranks.len();
        // A creation a non-blocking eager init began is ready only at its end; one that ends at
        // `now_ns` itself is in time for a wait that gives up then.
        let ends_later = || {
            self.unique_ids[group].fetched.contains(&rank) && self.comm_init_end_ns[group] > now_ns
        };
        matches!(self.ranks[rank as usize].blocked, Blocked::CommInit) && (!formed || ends_later())
    }

    fn epoch(&self) -> u64 {
        self.epoch
    }

    fn host_op(&self, rank: u32) -> usize {
        self.ranks[rank as usize].blocked_op
    }

    fn drained(&self, rank: u32) -> bool {
        self.ranks[rank as usize].drained()
    }
}

impl Engine<'_> {
    /// Tells the failure component what happened and applies what it answers.
    pub(super) fn notify(&mut self, notice: Notice) {
        let mut commands = std::mem::take(&mut self.commands);
        let view = view!(self);
        self.failure.notify(&view, notice, &mut commands);
        self.apply(&mut commands);
        self.commands = commands;
    }

    /// Whether a failure wake-up due at `at_ns` changes nothing any more (it is dropped); the
    /// component may ask for a later one instead.
    pub(super) fn wake_is_stale(&mut self, wake: (u32, GroupId, Wake), at_ns: u64) -> bool {
        let mut commands = std::mem::take(&mut self.commands);
        let view = view!(self);
        let stale = self.failure.is_stale(&view, wake, at_ns, &mut commands);
        self.apply(&mut commands);
        self.commands = commands;
        stale
    }

    /// Before the host runs `op_index`: the fault of this rank, op and iteration, from the
    /// step transformer both engines share ([`crate::pg::faults`]), goes to the failure
    /// component, and says what becomes of the op's steps.
    pub(super) fn fault_reached(&mut self, rank: u32, op_index: usize) -> HostEffect {
        let scenario = self.scenario;
        let state = &self.ranks[rank as usize];
        let iteration = state.iteration;
        let rank_id = state.timeline.rank;
        let Some(fault) = RankFaults::new(scenario, rank_id).at(op_index, iteration) else {
            return HostEffect::Run;
        };
        let host_ns = state.host_ns;
        self.notify(Notice::FaultReached {
            rank,
            op: op_index,
            iteration,
            fault: fault.kind.clone(),
            host_ns,
        });
        host_effect(&fault.kind)
    }

    /// `WorkNCCL(…)` as PyTorch prints it, with the collective as issued.
    pub(super) fn work_text(&self, rank: u32, collective: u32) -> String {
        self.failure.work_text(&view!(self), rank, collective)
    }

    /// The iteration and op a finding on `rank` about `about` names.
    fn finding_place(&self, rank: u32, about: FindingAbout) -> (Option<u32>, Option<usize>) {
        let host_iteration = self.ranks[rank as usize].iteration;
        match about {
            FindingAbout::Work(collective) => {
                let work = view!(self).work(rank, collective);
                (Some(work.iteration), Some(work.op))
            }
            FindingAbout::Call(op) => (Some(host_iteration), Some(op)),
            FindingAbout::Rank => (
                (host_iteration < self.scenario.repeat).then_some(host_iteration),
                None,
            ),
        }
    }

    /// The one place the failure component's commands change the run, in their order.
    pub(super) fn apply(&mut self, commands: &mut Vec<Command>) {
        for command in commands.drain(..) {
            if !matches!(command, Command::Wake { .. } | Command::Finding { .. }) {
                self.epoch += 1;
            }
            match command {
                Command::Wake {
                    rank,
                    group,
                    wake,
                    at_ns,
                } => {
                    let at_ns = at_ns.max(self.now_ns);
                    *self.failure_wakes.entry(at_ns).or_default() += 1;
                    self.horizon_ns = self.horizon_ns.min(at_ns);
                    self.schedule(
                        at_ns,
                        Event::Failure {
                            rank,
                            group: group as u16,
                            wake,
                        },
                    );
                }
                Command::Finding {
                    kind,
                    rank,
                    about,
                    message,
                } => {
                    let (iteration, op) = self.finding_place(rank, about);
                    let finding = Finding {
                        kind,
                        rank: None,
                        iteration,
                        op: op.map(|o| o as OpRef),
                        stream: None,
                        message,
                        stands_for: RankSet::default(),
                    };
                    self.rank_finding(rank, finding);
                }
                Command::PoisonRendezvous { rendezvous } => {
                    self.poisoned.insert(rendezvous);
                }
                Command::HangHost { rank, op } => {
                    let state = &mut self.ranks[rank as usize];
                    state.blocked = Blocked::Hung;
                    state.blocked_op = op;
                }
                Command::AbortCommunicators { rank, group } => {
                    self.abort_communicators(rank, group)
                }
                Command::AwaitDrain { rank, group } => self.ranks[rank as usize]
                    .aborts_awaiting_drain
                    .push(group as u16),
                Command::WatchdogFree { rank, group } => {
                    let state = &mut self.ranks[rank as usize];
                    if matches!(state.blocked, Blocked::Watchdog { group: g } if g as GroupId == group)
                    {
                        state.blocked = Blocked::Timer;
                        let at_ns = self.now_ns;
                        self.schedule(at_ns, self.host_resume(rank, at_ns));
                    }
                }
                // A host running ahead of the simulation (a `die` fault it reached) ends its
                // process at its own time: the GPU work due before then still runs.
                Command::KillProcess {
                    rank,
                    status,
                    at_ns,
                } if at_ns > self.now_ns => {
                    self.ranks[rank as usize].blocked = Blocked::Exiting { status };
                    self.schedule(at_ns, Event::ProcessEnds { rank });
                }
                Command::KillProcess {
                    rank,
                    status,
                    at_ns,
                } => self.kill(
                    rank,
                    ProcessEnd {
                        status,
                        at_ns: Some(at_ns),
                    },
                ),
                Command::Caught {
                    rank,
                    op,
                    exception,
                    message,
                    at_ns,
                } => {
                    let state = &mut self.ranks[rank as usize];
                    state.caught = true;
                    state.timeline.exceptions.push(ExceptionRecord {
                        iteration: state.iteration,
                        op: op as OpRef,
                        at_ns,
                        exception: exception.to_string(),
                        message,
                    });
                    if matches!(state.blocked, Blocked::CommInit) {
                        self.comm_init_raised(rank, at_ns);
                    }
                }
            }
        }
    }

    /// A failure wake-up left the queue.
    pub(super) fn failure_wake_popped(&mut self, at_ns: u64) {
        let Some(count) = self.failure_wakes.get_mut(&at_ns) else {
            unreachable!("every failure wake-up in the queue is counted");
        };
        *count -= 1;
        if *count == 0 {
            self.failure_wakes.remove(&at_ns);
            self.horizon_ns = self
                .failure_wakes
                .first_key_value()
                .map_or(u64::MAX, |(&at_ns, _)| at_ns);
        }
    }

    /// How far a host may run ahead of the simulation: to the earliest failure wake-up in the
    /// queue, which may end its process, abort its communicators or hand it an error (R1,
    /// R26–R29). Past it, the host waits for the simulation to get there, so that whatever
    /// the side threads do reaches it at its simulated time.
    pub(super) fn host_horizon_ns(&self) -> u64 {
        debug_assert_eq!(
            self.horizon_ns,
            self.failure_wakes
                .first_key_value()
                .map_or(u64::MAX, |(&at_ns, _)| at_ns)
        );
        self.horizon_ns
    }

    /// Nor past the heartbeat monitors' next read of the store after now: a dump signal
    /// another rank broadcasts from now on is read there, and may end this process a heartbeat
    /// timeout later (R28); no wake-up announces it before the broadcast.
    pub(super) fn dump_signal_read_bound_ns(&self) -> u64 {
        self.dump_signal_read_ns.map_or(u64::MAX, |period_ns| {
            super::host::next_poll_ns(0, period_ns, self.now_ns + 1)
        })
    }

    pub(super) fn is_dead(&self, rank: u32) -> bool {
        view!(self).is_dead(rank)
    }

    /// Whether a rendezvous can never complete.
    pub(super) fn poisoned(&self, rendezvous: u32) -> bool {
        !self.poisoned.is_empty() && self.poisoned.contains(&rendezvous)
    }

    /// `ncclCommAbort` (R27 modes 1, 2; R15 after a wait's timeout): this rank's spinning
    /// kernels of the group end now and their collectives can never complete; those that start
    /// later end at their start ([`Self::arrive`]). One whose data already moves finishes (the
    /// model does not cut a transfer short on one rank only).
    fn abort_communicators(&mut self, rank: u32, group: GroupId) {
        for stream in 0..self.ranks[rank as usize].streams.len() as u16 {
            let state = &mut self.ranks[rank as usize];
            let Some(QueuedItem {
                item:
                    GpuItem::Collective {
                        kernel,
                        rendezvous,
                        collective,
                        ..
                    },
                ..
            }) = state.streams[stream as usize].queue.front().copied()
            else {
                continue;
            };
            let started = state.scratch.kernel_times.get(kernel as usize).start_ns != NEVER;
            // A collective whose data already moves (every rank arrived) runs to its end on
            // every rank alike: only a spinning kernel is cut short.
            let moving = state
                .scratch
                .collective_data
                .get(collective as usize)
                .data_start_ns
                != NEVER;
            let on = state.timeline.collectives[collective as usize].group as GroupId;
            // The communicators the abort covered: the group's own, which an eager world's
            // pairs share (R11: their sends and receives run on it), and for a process group's
            // abort by its watchdog its pairs' too (`Failure::is_aborted` knows which).
            if !started || moving || !(on == group || self.failure.is_aborted(rank, on)) {
                continue;
            }
            self.poisoned.insert(rendezvous);
            self.schedule_kernel_end(rank, stream, self.now_ns);
        }
    }

    /// The process ends: its host stops, and the collectives it joined can never complete.
    pub(super) fn kill(&mut self, rank: u32, end: ProcessEnd) {
        let state = &mut self.ranks[rank as usize];
        let ended_ns = end.at_ns.unwrap_or(state.host_ns);
        if !matches!(state.blocked, Blocked::Dead) {
            self.withdraw_from_comm_init(rank, ended_ns);
        }
        let state = &mut self.ranks[rank as usize];
        if state.end.is_none() {
            state.end_call(end.status, ended_ns);
        }
        self.ranks[rank as usize].end.get_or_insert(end);
        self.any_dead = true;
        self.ranks[rank as usize].blocked = Blocked::Dead;
        for (slot, rendezvous) in self.rendezvous.iter().enumerate() {
            if rendezvous
                .as_ref()
                .is_some_and(|r| r.members.iter().any(|&(member, _)| member == rank))
            {
                self.poisoned.insert(slot as u32);
            }
        }
        self.stop_transfers_of(rank);
    }

    /// A process that ended at `ended_ns` in a communicator's init never does its part (R8):
    /// the init waits for it for good, also where every member arrived but the init had not
    /// ended yet (the others' resumes at its end are then void: `waits_in_unformed_init`). Its
    /// arrival stays, as the root's published unique id stays in the store (R29).
    fn withdraw_from_comm_init(&mut self, rank: u32, ended_ns: u64) {
        for (group, arrived) in self.comm_init.iter_mut().enumerate() {
            let members = self.scenario.groups[group].ranks.len();
            let formed = (self.comm_init_ranks[group] as usize) == members
                && self.comm_init_end_ns[group] <= ended_ns;
            if formed {
                continue;
            }
            let Some(&index) = self.comm_init_index[group].get(&rank) else {
                continue;
            };
            let arrival = &mut arrived[index];
            if arrival.counted {
                arrival.counted = false;
                self.comm_init_ranks[group] -= self.classes.weight(rank);
            }
        }
    }

    /// Whether nobody waits on a stuck rendezvous any more: every rank that joined it ended
    /// or aborted its communicator, or, when none joined, every rank of its group ended (left
    /// out of the deadlock findings).
    pub(super) fn rendezvous_settled(&self, rendezvous: &Rendezvous) -> bool {
        if !self.any_dead && self.poisoned.is_empty() {
            return false;
        }
        let ended =
            |member: u32| self.is_dead(member) || self.failure.is_aborted(member, rendezvous.group);
        if rendezvous.members.is_empty() {
            let ranks = self.classes.group_simulated(rendezvous.group);
            return ranks.iter().all(|&r| self.is_dead(r));
        }
        rendezvous.members.iter().all(|&(member, _)| ended(member))
    }
}

/// The failure machinery through the whole engine: scenarios in, Timelines out.
#[cfg(test)]
mod tests;
