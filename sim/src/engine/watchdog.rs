//! Faults, the watchdog and what follows a timeout (R15, R26–R29), as hooks of the engine.
//!
//! Over 800 lines (about 1,100 of code, then its tests): the side threads are one state
//! machine per group and rank whose steps edit the engine's rank state directly; turning them
//! into a component that receives notifications and returns commands (issue 12) is what would
//! split it, and has not been done.
//!
//! - **Watchdog (R26)**: one thread per process group and rank, polling every 100 ms from its
//!   start: async error, then timeout (host clock since the Work's *enqueue*), then completion.
//!   It is not ticked: a Work's timeout can only be seen at the first tick at or after
//!   `enqueue + timeout`, and only if the Work was not complete at the tick before. Works of a
//!   group share one timeout, so the oldest pending Work decides first; one `Check` event per
//!   group and rank waits at its deadline tick and is dropped there if the Work finished in
//!   time. A run where nothing goes wrong pays one event per group and rank.
//! - **Error handling (R27)**: log, desync report (`TORCH_NCCL_DESYNC_DEBUG`), dump signal
//!   through the store (every rank's heartbeat monitor dumps at its next poll), sleep
//!   4 × `TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC`, then `TORCH_NCCL_ASYNC_ERROR_HANDLING`:
//!   0 nothing, 1 abort then exit, 2 abort and stay alive, 3 exit without abort.
//!   `TORCH_NCCL_PROPAGATE_ERROR` hands the error to the group's other ranks at their next tick.
//! - **Heartbeat monitor (R28)**: reads the watchdog's heartbeat every
//!   `TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC` from its start; unchanged since the last read ⇒ dump and
//!   abort the process. Only a stalled heartbeat (a stuck watchdog, or a dump wait longer than
//!   the heartbeat timeout) schedules a check.
//! - **Store rendezvous (R29)**: a rank waiting for the NCCL unique id of a lazily created
//!   communicator raises when the group's timeout passes before the root published it.
//! - **Faults** (`[[fault]]`): hang, skip, mismatch, die, async error, stuck watchdog. A process
//!   that ends (fault, exit, abort) is `Blocked::Dead`: its host stops and its pending GPU work
//!   never runs; collectives it had joined can never complete. A hung host is `Blocked::Hung`.
//! - **Mismatch (R16)**: where calls at one SeqNum can disagree (faults, ops restricted to some
//!   ranks), each call is compared with the first; a disagreement is a finding and the
//!   collective never completes.

use super::*;
use crate::pg::faults::{host_effect, HostEffect, RankFaults};
use crate::scenario::{ErrorHandling, FaultKind};
use std::collections::HashSet;

/// The watchdog's poll interval (`kWatchdogThreadSleepMillis`, R26).
const WATCHDOG_POLL_NS: u64 = 100_000_000;

/// A step of the watchdog, the heartbeat monitor or the store rendezvous, for one rank and
/// group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum WatchdogStep {
    /// The deadline tick of the oldest pending Work (R26).
    Check,
    /// The first tick that sees an async error on the communicator under collective record
    /// `collective` (R26).
    AsyncError { collective: u32 },
    /// The first tick after another rank propagated its error (R27).
    RemoteError { from_rank: u32 },
    /// The heartbeat monitor's poll that finds the dump signal in the store (R27).
    DumpSeen,
    /// The watchdog's sleep for the dumps is over: act on the error-handling mode (R27).
    DumpWaitOver,
    /// The heartbeat monitor's read that finds the heartbeat unchanged (R28).
    HeartbeatCheck,
    /// `store.get` of the unique id passes the store timeout (R29).
    StoreTimeout,
}

/// A pending Work in a watchdog's list.
#[derive(Debug, Clone, Copy)]
struct PendingWork {
    enqueue_ns: u64,
    collective: u32,
}

#[derive(Debug, Default)]
struct WatchdogState {
    pending: VecDeque<PendingWork>,
    /// The `Check` event scheduled, if any.
    check_at_ns: Option<u64>,
    /// Ticks fall on `tick_origin_ns + k·100 ms` (the grid moves after a dump wait).
    tick_origin_ns: u64,
    /// Handling an error: asleep for the dumps, or done with this communicator.
    handling: bool,
    /// The tick at which the watchdog hung (a `watchdog_stuck` fault).
    stuck_at_ns: Option<u64>,
    /// The communicators were aborted (modes 1 and 2).
    aborted: bool,
    /// The error being handled is a timeout (only that Work failed), not a communicator error.
    handling_timeout: bool,
}

/// The engine's record of faults and of the watchdog threads.
pub(super) struct Failures {
    /// Watchdog threads exist: not under `TORCH_NCCL_BLOCKING_WAIT` (R15).
    watchdog_enabled: bool,
    groups: usize,
    /// Per rank × group.
    watchdogs: Vec<WatchdogState>,
    records: Vec<WatchdogRecord>,
    /// Per rank: the fault that applies to the collective being issued.
    armed: Vec<Option<FaultKind>>,
    /// Some process ended.
    any_dead: bool,
    /// Rendezvous that can never complete (a member died or aborted, a network error, a
    /// mismatch).
    poisoned: HashSet<u32>,
    /// Per (group, SeqNum): what the first caller issued, when calls may disagree.
    signatures: Option<HashMap<(GroupId, u64), Signature>>,
    /// (group, SeqNum) at which calls disagreed.
    mismatched: HashSet<(GroupId, u64)>,
    /// Per rank: its Flight Recorder was dumped.
    dumped: Vec<bool>,
    /// (rank, collective record) → the collective a mismatch fault issued instead of the op's.
    issued_instead: HashMap<(u32, u32), CollectiveKind>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Signature {
    collective: CollectiveKind,
    size_bytes: u64,
    rank: u32,
    op: usize,
}

impl Failures {
    pub(super) fn new(scenario: &Scenario) -> Failures {
        let ranks = scenario.cluster.ranks as usize;
        let groups = scenario.groups.len();
        // Calls at one SeqNum can only disagree where some rank issues another op than its
        // peers: faults, or ops restricted to some ranks.
        let calls_may_disagree = !scenario.faults.is_empty()
            || scenario.ops.iter().any(|op| {
                op.ranks.is_some()
                    && matches!(op.kind, OpKind::Collective { .. } | OpKind::Barrier { .. })
            });
        Failures {
            watchdog_enabled: !scenario.env.blocking_wait,
            groups,
            watchdogs: (0..ranks * groups)
                .map(|_| WatchdogState::default())
                .collect(),
            records: Vec::new(),
            armed: vec![None; ranks],
            any_dead: false,
            poisoned: HashSet::new(),
            signatures: calls_may_disagree.then(HashMap::default),
            mismatched: HashSet::new(),
            dumped: vec![false; ranks],
            issued_instead: HashMap::default(),
        }
    }

    /// The records, in time order.
    pub(super) fn into_records(mut self) -> Vec<WatchdogRecord> {
        self.records.sort_by_key(|r| (r.at_ns, r.rank));
        self.records
    }

    /// Whether a rendezvous can never complete.
    pub(super) fn poisoned(&self, rendezvous: u32) -> bool {
        !self.poisoned.is_empty() && self.poisoned.contains(&rendezvous)
    }
}

/// The first tick at or after `at_ns` of a poller started at `origin_ns`.
fn next_tick_ns(origin_ns: u64, period_ns: u64, at_ns: u64) -> u64 {
    next_poll_ns(origin_ns, period_ns, at_ns)
}

fn ms(ns: u64) -> u64 {
    ns / 1_000_000
}

fn seconds(ns: u64) -> String {
    format!("{:.3} s", ns as f64 / 1e9)
}

impl Engine<'_> {
    fn watchdog_index(&self, rank: u32, group: GroupId) -> usize {
        rank as usize * self.failures.groups + group
    }

    pub(super) fn is_dead(&self, rank: u32) -> bool {
        self.failures.any_dead && matches!(self.ranks[rank as usize].blocked, Blocked::Dead)
    }

    fn note(
        &mut self,
        rank: u32,
        group: Option<GroupId>,
        thread: ThreadKind,
        event: WatchdogEvent,
        at_ns: u64,
        message: String,
    ) {
        self.failures.records.push(WatchdogRecord {
            rank,
            group: group.map(|g| g as u16),
            thread,
            event,
            at_ns,
            message,
        });
    }

    fn find(&mut self, kind: FindingKind, rank: u32, op: Option<usize>, message: String) {
        let iteration = self.ranks[rank as usize].iteration;
        self.findings.push(Finding {
            kind,
            rank: Some(rank),
            iteration: Some(iteration),
            op: op.map(|o| o as OpRef),
            stream: None,
            message,
        });
    }

    // ------------------------------------------------------------ events the engine skips

    /// Events that change nothing: those of a dead process, and watchdog steps whose reason
    /// went away (the Work finished in time, the root published the id). Dropped before the
    /// time cap is checked, so a 10-minute watchdog deadline left over by a run that ended in
    /// milliseconds costs nothing.
    pub(super) fn ignored(&mut self, at_ns: u64, event: Event) -> bool {
        let rank = match event {
            Event::Advance { rank, .. }
            | Event::KernelEnd { rank, .. }
            | Event::SmTransfer { rank }
            | Event::HostResume { rank, .. }
            | Event::WaitTimeout { rank, .. }
            | Event::Watchdog { rank, .. } => rank,
        };
        if self.is_dead(rank) {
            return true;
        }
        let Event::Watchdog { group, step, .. } = event else {
            return false;
        };
        let group = group as GroupId;
        match step {
            WatchdogStep::Check => !self.timeout_due(rank, group, at_ns),
            WatchdogStep::StoreTimeout => {
                let root = self.scenario.groups[group].ranks[0];
                !matches!(self.ranks[rank as usize].blocked, Blocked::CommInit)
                    || self.comm_init[group].iter().any(|&(r, _)| r == root)
            }
            WatchdogStep::AsyncError { .. } | WatchdogStep::RemoteError { .. } => {
                let watchdog = &self.failures.watchdogs[self.watchdog_index(rank, group)];
                watchdog.handling || watchdog.stuck_at_ns.is_some_and(|t| t <= at_ns)
            }
            WatchdogStep::DumpSeen => self.failures.dumped[rank as usize],
            WatchdogStep::DumpWaitOver | WatchdogStep::HeartbeatCheck => false,
        }
    }

    /// At a `Check` event: drops Works that completed before their deadline tick; true when
    /// the oldest pending Work times out now, else reschedules for the next one.
    fn timeout_due(&mut self, rank: u32, group: GroupId, at_ns: u64) -> bool {
        let index = self.watchdog_index(rank, group);
        let watchdog = &mut self.failures.watchdogs[index];
        if watchdog.check_at_ns == Some(at_ns) {
            watchdog.check_at_ns = None;
        }
        if watchdog.handling || watchdog.stuck_at_ns.is_some_and(|t| t <= at_ns) {
            return false;
        }
        self.prune_finished(rank, group);
        let Some(deadline_ns) = self.head_deadline_ns(rank, group) else {
            return false;
        };
        if deadline_ns > at_ns {
            self.schedule_check(rank, group, deadline_ns);
            return false;
        }
        true
    }

    fn head_deadline_ns(&self, rank: u32, group: GroupId) -> Option<u64> {
        let watchdog = &self.failures.watchdogs[self.watchdog_index(rank, group)];
        let head = watchdog.pending.front()?;
        let timeout_ns = self.scenario.groups[group].timeout_ns;
        Some(next_tick_ns(
            watchdog.tick_origin_ns,
            WATCHDOG_POLL_NS,
            head.enqueue_ns + timeout_ns,
        ))
    }

    /// Drops pending Works that a tick saw complete before their deadline tick (the watchdog
    /// checks timeout before completion, so a Work seen complete only at its deadline tick
    /// still times out, R26).
    fn prune_finished(&mut self, rank: u32, group: GroupId) {
        let index = self.watchdog_index(rank, group);
        while let Some(deadline_ns) = self.head_deadline_ns(rank, group) {
            let watchdog = &self.failures.watchdogs[index];
            let head = watchdog.pending[0];
            let state = &self.ranks[rank as usize];
            let end = state.scratch.collective_end[head.collective as usize];
            let fired_ns = state.fired_ns[end as usize];
            if fired_ns == NEVER
                || next_tick_ns(watchdog.tick_origin_ns, WATCHDOG_POLL_NS, fired_ns) >= deadline_ns
            {
                return;
            }
            self.failures.watchdogs[index].pending.pop_front();
        }
    }

    fn schedule_check(&mut self, rank: u32, group: GroupId, at_ns: u64) {
        let index = self.watchdog_index(rank, group);
        let watchdog = &mut self.failures.watchdogs[index];
        if watchdog.check_at_ns.is_some_and(|t| t <= at_ns) {
            return;
        }
        watchdog.check_at_ns = Some(at_ns);
        self.schedule_step(rank, group, WatchdogStep::Check, at_ns);
    }

    fn schedule_step(&mut self, rank: u32, group: GroupId, step: WatchdogStep, at_ns: u64) {
        self.schedule(
            at_ns.max(self.now_ns),
            Event::Watchdog {
                rank,
                group: group as u16,
                step,
            },
        );
    }

    // ------------------------------------------------------------ hooks on the host side

    /// Before the host runs `op_index`: applies a fault of this rank, op and iteration.
    /// The fault comes from the step transformer both engines share
    /// ([`crate::pg::faults`]), and so does what becomes of the op's steps.
    pub(super) fn apply_fault(&mut self, rank: u32, op_index: usize) -> HostEffect {
        let scenario = self.scenario;
        let iteration = self.ranks[rank as usize].iteration;
        let Some(fault) = RankFaults::new(scenario, rank).at(op_index, iteration) else {
            return HostEffect::Run;
        };
        let now_ns = self.ranks[rank as usize].host_ns;
        let op = &scenario.ops[op_index];
        let where_ = format!(
            "{} (line {}, iteration {iteration})",
            op.display_name(),
            op.line
        );
        let message = match &fault.kind {
            FaultKind::Skip => format!("[Rank {rank}] fault: skips {where_}"),
            FaultKind::Hang => format!("[Rank {rank}] fault: the host hangs before {where_}"),
            FaultKind::Die => format!("[Rank {rank}] fault: the process dies before {where_}"),
            FaultKind::Mismatch {
                collective,
                size_bytes,
            } => format!(
                "[Rank {rank}] fault: issues {} of {} at {where_}",
                collective.op_type(),
                crate::units::format_size(*size_bytes)
            ),
            FaultKind::AsyncError { after_ns } => format!(
                "[Rank {rank}] fault: the network fails under {where_}; NCCL reports an async error {} after its enqueue",
                seconds(*after_ns)
            ),
            FaultKind::WatchdogStuck => format!(
                "[Rank {rank}] fault: the watchdog hangs in cudaEventQuery on the Work of {where_}"
            ),
        };
        self.note(
            rank,
            None,
            ThreadKind::Main,
            WatchdogEvent::Fault,
            now_ns,
            message,
        );
        let effect = host_effect(&fault.kind);
        match fault.kind {
            FaultKind::Hang => {
                let state = &mut self.ranks[rank as usize];
                state.blocked = Blocked::Hung;
                state.blocked_op = op_index;
            }
            FaultKind::Die => {
                self.note(
                    rank,
                    None,
                    ThreadKind::Main,
                    WatchdogEvent::Exit,
                    now_ns,
                    format!("[Rank {rank}] process exited (fault); its GPU work vanishes"),
                );
                self.kill(rank);
            }
            FaultKind::Skip => {}
            _ => self.failures.armed[rank as usize] = Some(fault.kind.clone()),
        }
        effect
    }

    /// The collective and size a rank issues for the op it is running (the declared ones, or
    /// those of an armed mismatch fault).
    pub(super) fn issued_collective(
        &self,
        rank: u32,
        collective: CollectiveKind,
        size_bytes: u64,
    ) -> (CollectiveKind, u64) {
        match self.failures.armed[rank as usize] {
            Some(FaultKind::Mismatch {
                collective,
                size_bytes,
            }) => (collective, size_bytes),
            _ => (collective, size_bytes),
        }
    }

    /// A collective was enqueued (R10e): checks that the group's ranks agree on it, hands it
    /// to the watchdog (R26), and applies an armed fault.
    pub(super) fn collective_enqueued(
        &mut self,
        rank: u32,
        group: GroupId,
        collective_index: u32,
        rendezvous: u32,
        (collective, size_bytes): (CollectiveKind, u64),
    ) {
        let armed = self.failures.armed[rank as usize].take();
        if let Some(FaultKind::Mismatch { collective, .. }) = armed {
            self.failures
                .issued_instead
                .insert((rank, collective_index), collective);
        }
        let state = &self.ranks[rank as usize];
        let record = &state.timeline.collectives[collective_index as usize];
        let seq = record.seq;
        let op = record.op as usize;
        let enqueue_ns = state.timeline.kernels
            [state.scratch.collective_kernel[collective_index as usize] as usize]
            .enqueue_ns;
        self.check_signature(rank, group, seq, op, rendezvous, (collective, size_bytes));
        if let Some(FaultKind::AsyncError { .. }) = armed {
            // The network under this collective fails: it never completes, and the
            // communicator reports the error from then on (to a watchdog, if there is one).
            self.failures.poisoned.insert(rendezvous);
        }
        if !self.failures.watchdog_enabled {
            return;
        }
        self.prune_finished(rank, group);
        let index = self.watchdog_index(rank, group);
        let watchdog = &mut self.failures.watchdogs[index];
        watchdog.pending.push_back(PendingWork {
            enqueue_ns,
            collective: collective_index,
        });
        let origin_ns = watchdog.tick_origin_ns;
        let idle = !watchdog.handling && watchdog.stuck_at_ns.is_none();
        match armed {
            Some(FaultKind::AsyncError { after_ns }) => {
                let seen_ns = next_tick_ns(origin_ns, WATCHDOG_POLL_NS, enqueue_ns + after_ns);
                self.schedule_step(
                    rank,
                    group,
                    WatchdogStep::AsyncError {
                        collective: collective_index,
                    },
                    seen_ns,
                );
            }
            Some(FaultKind::WatchdogStuck) => {
                let stuck_ns = next_tick_ns(origin_ns, WATCHDOG_POLL_NS, enqueue_ns);
                self.failures.watchdogs[index].stuck_at_ns = Some(stuck_ns);
                self.note(
                    rank,
                    Some(group),
                    ThreadKind::Watchdog,
                    WatchdogEvent::Fault,
                    stuck_ns,
                    format!("[Rank {rank}] the watchdog thread hangs in cudaEventQuery; its heartbeat stops"),
                );
                self.heartbeat_stalls(rank, group, stuck_ns, NEVER);
            }
            _ => {}
        }
        if idle {
            if let Some(deadline_ns) = self.head_deadline_ns(rank, group) {
                self.schedule_check(rank, group, deadline_ns);
            }
        }
    }

    /// Calls at one SeqNum must issue the same collective and size (R16); a disagreement is
    /// reported once and the collective never completes (NCCL hangs or corrupts).
    fn check_signature(
        &mut self,
        rank: u32,
        group: GroupId,
        seq: u64,
        op: usize,
        rendezvous: u32,
        (collective, size_bytes): (CollectiveKind, u64),
    ) {
        let Some(signatures) = &mut self.failures.signatures else {
            return;
        };
        let issued = Signature {
            collective,
            size_bytes,
            rank,
            op,
        };
        let first = *signatures.entry((group, seq)).or_insert(issued);
        if (first.collective.descriptor().counterpart, first.size_bytes) == (collective, size_bytes)
            || (first.rank == rank && first.collective == collective)
            || !self.failures.mismatched.insert((group, seq))
        {
            return;
        }
        self.failures.poisoned.insert(rendezvous);
        let describe = |s: &Signature| {
            format!(
                "rank {} issued {} of {} ({}, line {})",
                s.rank,
                s.collective.op_type(),
                crate::units::format_size(s.size_bytes),
                self.scenario.ops[s.op].display_name(),
                self.scenario.ops[s.op].line
            )
        };
        let message = format!(
            "ranks disagree on collective SeqNum={seq} of group {}: {}, {}; NCCL would hang or corrupt data, the model hangs it (R16)",
            self.scenario.groups[group].name,
            describe(&first),
            describe(&issued)
        );
        self.find(FindingKind::Mismatch, rank, Some(op), message);
    }

    /// R29: a non-root rank waits in `store.get` for the unique id of a lazily created
    /// communicator; it raises after the group's timeout unless the root publishes it.
    pub(super) fn store_get(&mut self, rank: u32, group: GroupId) {
        let root = self.scenario.groups[group].ranks[0];
        if rank == root || self.comm_init[group].iter().any(|&(r, _)| r == root) {
            return;
        }
        let at_ns = self.ranks[rank as usize].host_ns + self.scenario.groups[group].timeout_ns;
        self.schedule_step(rank, group, WatchdogStep::StoreTimeout, at_ns);
    }

    /// The collective kind of a record as issued (a mismatch fault changes it; a barrier's is
    /// its all_reduce).
    fn issued_kind(&self, rank: u32, collective: u32) -> CollectiveKind {
        if let Some(&kind) = self.failures.issued_instead.get(&(rank, collective)) {
            return kind;
        }
        let record = &self.ranks[rank as usize].timeline.collectives[collective as usize];
        self.scenario.ops[record.op as usize]
            .kind
            .collective()
            .map_or(CollectiveKind::AllReduce, |(kind, _)| kind)
    }

    /// The `OpType` of a collective record as issued.
    pub(super) fn op_type(&self, rank: u32, collective: u32) -> &'static str {
        self.issued_kind(rank, collective).op_type()
    }

    /// When the Work of a collective record was enqueued (its kernel's launch).
    pub(super) fn enqueue_ns(&self, rank: u32, collective: u32) -> u64 {
        let state = &self.ranks[rank as usize];
        state.timeline.kernels[state.scratch.collective_kernel[collective as usize] as usize]
            .enqueue_ns
    }

    /// `WorkNCCL(SeqNum=…, OpType=…, NumelIn=…, NumelOut=…, Timeout(ms)=…)` as PyTorch prints it.
    pub(super) fn work_text(&self, rank: u32, collective: u32, timeout_ns: u64) -> String {
        let record = &self.ranks[rank as usize].timeline.collectives[collective as usize];
        crate::pg::work_text(
            self.scenario,
            &self.scenario.ops[record.op as usize],
            (self.issued_kind(rank, collective), record.bytes),
            (record.group as GroupId, record.seq),
            timeout_ns,
        )
    }

    /// A polling `wait()` raised (R15): under blocking wait the main thread aborts the
    /// communicator and the exception ends the process.
    pub(super) fn wait_raised(&mut self, rank: u32, collective: u32, timeout_ns: u64) {
        let now_ns = self.now_ns;
        let work = self.work_text(rank, collective, timeout_ns);
        let group = self.ranks[rank as usize].timeline.collectives[collective as usize].group;
        self.note(
            rank,
            Some(group as GroupId),
            ThreadKind::Main,
            WatchdogEvent::WaitTimeout,
            now_ns,
            format!("[Rank {rank}] Work {work} timed out in blocking wait. Aborting the communicator and raising DistBackendError in the main thread."),
        );
        self.note(
            rank,
            Some(group as GroupId),
            ThreadKind::Main,
            WatchdogEvent::Exit,
            now_ns,
            format!("[Rank {rank}] process exited: the exception was not caught"),
        );
        self.kill(rank);
    }

    // ------------------------------------------------------------ the watchdog's steps

    pub(super) fn watchdog_step(&mut self, rank: u32, group: u16, step: WatchdogStep) {
        let group = group as GroupId;
        match step {
            WatchdogStep::Check => {
                let head = self.failures.watchdogs[self.watchdog_index(rank, group)].pending[0];
                self.watchdog_caught(rank, group, Caught::Timeout(head));
            }
            WatchdogStep::AsyncError { collective } => {
                self.watchdog_caught(rank, group, Caught::AsyncError(collective))
            }
            WatchdogStep::RemoteError { from_rank } => {
                self.watchdog_caught(rank, group, Caught::Remote(from_rank))
            }
            WatchdogStep::DumpSeen => {
                self.failures.dumped[rank as usize] = true;
                let now_ns = self.now_ns;
                self.note(
                    rank,
                    Some(group),
                    ThreadKind::HeartbeatMonitor,
                    WatchdogEvent::Dump,
                    now_ns,
                    format!("[Rank {rank}] Received a dump signal from another rank through the store; dumping the Flight Recorder"),
                );
            }
            WatchdogStep::DumpWaitOver => self.handle_error(rank, group),
            WatchdogStep::HeartbeatCheck => self.heartbeat_abort(rank, group),
            WatchdogStep::StoreTimeout => self.store_timed_out(rank, group),
        }
    }

    fn watchdog_caught(&mut self, rank: u32, group: GroupId, caught: Caught) {
        let now_ns = self.now_ns;
        let env = &self.scenario.env;
        let index = self.watchdog_index(rank, group);
        self.failures.watchdogs[index].handling = true;
        self.failures.watchdogs[index].handling_timeout = matches!(caught, Caught::Timeout(_));
        let timeout_ns = self.scenario.groups[group].timeout_ns;
        let mut diagnosis = String::new();
        let (event, kind, op, message) = match caught {
            Caught::Timeout(work) => {
                let ran_ms = ms(now_ns - work.enqueue_ns);
                let op = self.ranks[rank as usize].timeline.collectives[work.collective as usize].op;
                let (_, verdict) = self.desync_report(rank, group, work.collective);
                diagnosis = format!(" Diagnosis: {verdict}.");
                (
                    WatchdogEvent::Timeout,
                    FindingKind::WatchdogTimeout,
                    Some(op as usize),
                    format!(
                        "[Rank {rank}] Watchdog caught collective operation timeout: {} ran for {ran_ms} milliseconds before timing out.",
                        self.work_text(rank, work.collective, timeout_ns)
                    ),
                )
            }
            Caught::AsyncError(collective) => {
                let record = &self.ranks[rank as usize].timeline.collectives[collective as usize];
                let op = record.op as usize;
                (
                    WatchdogEvent::AsyncError,
                    FindingKind::AsyncError,
                    Some(op),
                    format!(
                        "[Rank {rank}] NCCL communicator of group {} encountered an async error: ncclRemoteError: a call failed possibly due to a network error or a remote process exiting prematurely; failure detected by watchdog at work sequence id: {}",
                        self.scenario.groups[group].name, record.seq
                    ),
                )
            }
            Caught::Remote(from_rank) => (
                WatchdogEvent::RemoteError,
                FindingKind::AsyncError,
                None,
                format!(
                    "[Rank {rank}] Watchdog found a remote error signalled by rank {from_rank} through the store for group {} (TORCH_NCCL_PROPAGATE_ERROR=1)",
                    self.scenario.groups[group].name
                ),
            ),
        };
        self.note(
            rank,
            Some(group),
            ThreadKind::Watchdog,
            event,
            now_ns,
            message.clone(),
        );
        self.find(kind, rank, op, message + &diagnosis);
        if let (true, Caught::Timeout(work)) = (env.desync_debug, caught) {
            let (table, verdict) = self.desync_report(rank, group, work.collective);
            let report = format!("{table}\n  verdict: {verdict}");
            self.note(
                rank,
                Some(group),
                ThreadKind::Watchdog,
                WatchdogEvent::DesyncReport,
                now_ns,
                report,
            );
        }
        if env.propagate_error && !matches!(caught, Caught::Remote(_)) {
            for &member in &self.scenario.groups[group].ranks {
                if member == rank || self.is_dead(member) {
                    continue;
                }
                let origin_ns =
                    self.failures.watchdogs[self.watchdog_index(member, group)].tick_origin_ns;
                let seen_ns = next_tick_ns(origin_ns, WATCHDOG_POLL_NS, now_ns + 1);
                self.schedule_step(
                    member,
                    group,
                    WatchdogStep::RemoteError { from_rank: rank },
                    seen_ns,
                );
            }
        }
        self.broadcast_dump_signal(rank, group);
        let wait_ns = 4 * self.scenario.env.wait_timeout_dump_ns;
        self.schedule_step(rank, group, WatchdogStep::DumpWaitOver, now_ns + wait_ns);
        // The watchdog sleeps: its heartbeat stalls until the sleep ends.
        self.heartbeat_stalls(rank, group, now_ns, now_ns + wait_ns);
    }

    /// R27: the dump signal goes into the store; this rank dumps now, the others when their
    /// heartbeat monitor next polls the store.
    fn broadcast_dump_signal(&mut self, rank: u32, group: GroupId) {
        let now_ns = self.now_ns;
        let wait_ms = ms(4 * self.scenario.env.wait_timeout_dump_ns);
        self.note(
            rank,
            Some(group),
            ThreadKind::Watchdog,
            WatchdogEvent::DumpSignal,
            now_ns,
            format!("[Rank {rank}] Broadcasting the dump signal to all ranks through the store; the watchdog sleeps {wait_ms} ms (4 x TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC) for the Flight Recorder dumps"),
        );
        if !self.failures.dumped[rank as usize] {
            self.failures.dumped[rank as usize] = true;
            self.note(
                rank,
                Some(group),
                ThreadKind::Watchdog,
                WatchdogEvent::Dump,
                now_ns,
                format!("[Rank {rank}] dumping the Flight Recorder"),
            );
        }
        if !self.scenario.env.enable_monitoring {
            return;
        }
        let poll_ns = self.scenario.env.coord_check_ns;
        let seen_ns = next_tick_ns(0, poll_ns, now_ns + 1);
        for other in 0..self.ranks.len() as u32 {
            if other != rank && !self.failures.dumped[other as usize] && !self.is_dead(other) {
                self.schedule_step(other, 0, WatchdogStep::DumpSeen, seen_ns);
            }
        }
    }

    /// R27: after the dump wait, `TORCH_NCCL_ASYNC_ERROR_HANDLING` decides.
    fn handle_error(&mut self, rank: u32, group: GroupId) {
        let now_ns = self.now_ns;
        let mode = self.scenario.env.async_error_handling;
        let name = match mode {
            ErrorHandling::NoHandling => "NoHandling",
            ErrorHandling::TearDown => "TearDown",
            ErrorHandling::CleanUpOnly => "CleanUpOnly",
            ErrorHandling::SkipCleanUp => "SkipCleanUp",
        };
        let setting = format!("TORCH_NCCL_ASYNC_ERROR_HANDLING={} ({name})", mode.number());
        if mode == ErrorHandling::NoHandling {
            self.note(
                rank,
                Some(group),
                ThreadKind::Watchdog,
                WatchdogEvent::NoHandling,
                now_ns,
                format!("[Rank {rank}] {setting}: the error is left alone; the process and its hung collective stay"),
            );
        }
        if mode.cleans_up() {
            self.note(
                rank,
                Some(group),
                ThreadKind::Watchdog,
                WatchdogEvent::Abort,
                now_ns,
                format!("[Rank {rank}] {setting}: aborting the communicators of group {} (ncclCommAbort)", self.scenario.groups[group].name),
            );
            self.abort_communicators(rank, group);
        }
        if mode.tears_down() {
            self.note(
                rank,
                Some(group),
                ThreadKind::Watchdog,
                WatchdogEvent::Exit,
                now_ns,
                format!("[Rank {rank}] {setting}: Some NCCL operations have failed or timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data. To avoid data inconsistency, we are taking the entire process down."),
            );
            self.kill(rank);
            return;
        }
        // The process lives on and the watchdog resumes polling: a timed-out Work is done
        // with, and every Work of a failed or aborted communicator.
        let index = self.watchdog_index(rank, group);
        let watchdog = &mut self.failures.watchdogs[index];
        watchdog.handling = false;
        watchdog.tick_origin_ns = now_ns;
        if watchdog.handling_timeout && !watchdog.aborted {
            watchdog.pending.pop_front();
        } else {
            watchdog.pending.clear();
        }
        if let Some(deadline_ns) = self.head_deadline_ns(rank, group) {
            self.schedule_check(rank, group, deadline_ns);
        }
    }

    /// `ncclCommAbort` (R27 modes 1, 2): this rank's spinning kernels of the group end now and
    /// their collectives can never complete.
    fn abort_communicators(&mut self, rank: u32, group: GroupId) {
        let index = self.watchdog_index(rank, group);
        self.failures.watchdogs[index].aborted = true;
        let now_ns = self.now_ns;
        for stream in 0..self.ranks[rank as usize].streams.len() as u16 {
            let state = &mut self.ranks[rank as usize];
            let Some(QueuedItem {
                item:
                    GpuItem::Collective {
                        kernel,
                        rendezvous,
                        collective,
                    },
                ..
            }) = state.streams[stream as usize].queue.front().copied()
            else {
                continue;
            };
            let started = state.timeline.kernels[kernel as usize].start_ns != NEVER;
            if !started || state.timeline.collectives[collective as usize].group as GroupId != group
            {
                continue;
            }
            self.failures.poisoned.insert(rendezvous);
            let stream_state = &mut state.streams[stream as usize];
            stream_state.end_version += 1;
            let version = stream_state.end_version;
            self.schedule(
                now_ns,
                Event::KernelEnd {
                    rank,
                    stream,
                    version,
                },
            );
        }
    }

    /// A collective on a communicator the watchdog aborted (mode 2, R27) raises
    /// `DistBackendError` in the main thread; uncaught, it ends the process. True when it did.
    pub(super) fn communicator_aborted(&mut self, rank: u32, group: GroupId, op: usize) -> bool {
        if !self.failures.watchdogs[self.watchdog_index(rank, group)].aborted {
            return false;
        }
        let host_ns = self.ranks[rank as usize].host_ns;
        let message = format!(
            "[Rank {rank}] DistBackendError: the NCCL communicator of group {} was aborted; {} (line {}) raises in the main thread and, uncaught, ends the process",
            self.scenario.groups[group].name,
            self.scenario.ops[op].display_name(),
            self.scenario.ops[op].line
        );
        self.note(
            rank,
            Some(group),
            ThreadKind::Main,
            WatchdogEvent::Exit,
            host_ns,
            message.clone(),
        );
        self.find(FindingKind::AsyncError, rank, Some(op), message);
        self.kill(rank);
        true
    }

    /// The process ends: its host stops, and the collectives it joined can never complete.
    pub(super) fn kill(&mut self, rank: u32) {
        self.failures.any_dead = true;
        self.ranks[rank as usize].blocked = Blocked::Dead;
        for (slot, rendezvous) in self.rendezvous.iter().enumerate() {
            if rendezvous
                .as_ref()
                .is_some_and(|r| r.members.iter().any(|&(member, _)| member == rank))
            {
                self.failures.poisoned.insert(slot as u32);
            }
        }
    }

    /// Whether nobody waits on a stuck rendezvous any more: every rank that joined it ended
    /// or aborted its communicator (left out of the deadlock findings).
    pub(super) fn rendezvous_settled(&self, rendezvous: &Rendezvous) -> bool {
        let ended = |member: u32| {
            self.is_dead(member)
                || self.failures.watchdogs[self.watchdog_index(member, rendezvous.group)].aborted
        };
        !self.failures.poisoned.is_empty()
            && !rendezvous.members.is_empty()
            && rendezvous.members.iter().all(|&(member, _)| ended(member))
    }

    /// R28: the watchdog's heartbeat stops moving from its tick at `from_ns` until
    /// `until_ns` (`NEVER`: it is stuck). The monitor reads it every heartbeat timeout from
    /// its start and aborts at the first read that finds it unchanged since the last.
    fn heartbeat_stalls(&mut self, rank: u32, group: GroupId, from_ns: u64, until_ns: u64) {
        let env = &self.scenario.env;
        if !env.enable_monitoring {
            return;
        }
        let period_ns = env.heartbeat_timeout_ns;
        let read_ns = next_tick_ns(0, period_ns, from_ns + period_ns);
        if read_ns < until_ns {
            self.schedule_step(rank, group, WatchdogStep::HeartbeatCheck, read_ns);
        }
    }

    fn heartbeat_abort(&mut self, rank: u32, group: GroupId) {
        let now_ns = self.now_ns;
        let seconds = self.scenario.env.heartbeat_timeout_ns / 1_000_000_000;
        let message = format!(
            "[Rank {rank}] Heartbeat monitor timed out! Process will be terminated after dumping debug info. ProcessGroupNCCL's watchdog got stuck for {seconds} seconds without making progress in monitoring enqueued collectives. If you suspect the watchdog is not actually stuck and a longer timeout would help, you can either increase the timeout (TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC) to a larger value or disable the heartbeat monitor (TORCH_NCCL_ENABLE_MONITORING=0)."
        );
        self.note(
            rank,
            Some(group),
            ThreadKind::HeartbeatMonitor,
            WatchdogEvent::HeartbeatTimeout,
            now_ns,
            message.clone(),
        );
        self.find(FindingKind::HeartbeatAbort, rank, None, message);
        if !self.failures.dumped[rank as usize] {
            self.failures.dumped[rank as usize] = true;
            self.note(
                rank,
                Some(group),
                ThreadKind::HeartbeatMonitor,
                WatchdogEvent::Dump,
                now_ns,
                format!("[Rank {rank}] dumping the Flight Recorder and the C++ stacks"),
            );
        }
        self.note(
            rank,
            Some(group),
            ThreadKind::HeartbeatMonitor,
            WatchdogEvent::Exit,
            now_ns,
            format!("[Rank {rank}] terminateProcess: std::abort()"),
        );
        self.kill(rank);
    }

    fn store_timed_out(&mut self, rank: u32, group: GroupId) {
        let now_ns = self.now_ns;
        let timeout_ns = self.scenario.groups[group].timeout_ns;
        let root = self.scenario.groups[group].ranks[0];
        let op = self.ranks[rank as usize].blocked_op;
        let message = format!(
            "[Rank {rank}] DistStoreError: wait timeout after {} ms for the NCCL unique id of group {} published by rank {root}. This may indicate a possible application crash on rank {root} or a network set up issue (R29)",
            ms(timeout_ns),
            self.scenario.groups[group].name
        );
        self.note(
            rank,
            Some(group),
            ThreadKind::Main,
            WatchdogEvent::StoreTimeout,
            now_ns,
            message.clone(),
        );
        self.find(FindingKind::StoreTimeout, rank, Some(op), message);
        self.note(
            rank,
            Some(group),
            ThreadKind::Main,
            WatchdogEvent::Exit,
            now_ns,
            format!("[Rank {rank}] process exited: the exception was not caught"),
        );
        self.kill(rank);
    }

    /// `TORCH_NCCL_DESYNC_DEBUG` (Flight-Recorder-like): where every rank of the group stands
    /// at the timed-out Work's SeqNum.
    fn desync_report(&self, rank: u32, group: GroupId, collective: u32) -> (String, String) {
        let now_ns = self.now_ns;
        let record = &self.ranks[rank as usize].timeline.collectives[collective as usize];
        let seq = record.seq;
        let op_type = self.op_type(rank, collective);
        let group_name = &self.scenario.groups[group].name;
        let mut text = format!(
            "[Rank {rank}] Desync debug report at SeqNum={seq} ({op_type}, group {group_name}), {}:",
            seconds(now_ns)
        );
        let mut missing = Vec::new();
        let mut not_started = Vec::new();
        for &member in &self.scenario.groups[group].ranks {
            let state = &self.ranks[member as usize];
            let enqueued = state.group_seq[group];
            let mut completed = 0;
            let mut started = false;
            for (index, c) in state.timeline.collectives.iter().enumerate() {
                if c.group as GroupId != group {
                    continue;
                }
                let end = state.scratch.collective_end[index];
                if state.fired_ns[end as usize] <= now_ns {
                    completed = completed.max(c.seq);
                }
                if c.seq == seq {
                    let kernel = state.scratch.collective_kernel[index];
                    started |= state.timeline.kernels[kernel as usize].start_ns <= now_ns;
                }
            }
            let status = if self.is_dead(member) {
                ", process gone"
            } else {
                ""
            };
            text.push_str(&format!(
                "\n  rank {member}: last enqueued {enqueued}, last completed {completed}{status}"
            ));
            if enqueued < seq {
                missing.push(member);
            } else if !started {
                not_started.push(member);
            }
        }
        let verdict = if !missing.is_empty() {
            let who = if missing.len() == 1 {
                format!("rank {}", missing[0])
            } else {
                format!("ranks {}", rank_list(&missing))
            };
            format!("{who} never joined collective {seq} ({op_type}, {group_name})")
        } else if self.failures.mismatched.contains(&(group, seq)) {
            format!("ranks disagree on the op at {seq} ({group_name}): see the mismatch finding")
        } else if !not_started.is_empty() {
            format!(
                "every rank enqueued collective {seq}; ranks {} have not started its kernel: their streams are still busy before it",
                rank_list(&not_started)
            )
        } else {
            format!("every rank enqueued and started collective {seq}; it never finished")
        };
        (text, verdict)
    }
}

/// What the watchdog caught.
#[derive(Debug, Clone, Copy)]
enum Caught {
    Timeout(PendingWork),
    AsyncError(u32),
    Remote(u32),
}

#[cfg(test)]
mod tests {
    use crate::engine::simulate;
    use crate::scenario::parse;
    use crate::timeline::{FindingKind, WatchdogEvent};

    /// Two ranks, a 1-s group timeout, an async all_reduce enqueued at 20 µs, then wait and
    /// `.item()`.
    fn two_ranks(extra: &str) -> String {
        format!(
            "[cluster]\nranks = 2\n[groups.world]\neager_init = true\ntimeout_s = 1\n[tensors]\nx = \"1MiB\"\n{extra}\n[[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\nasync_op = true\nwork = \"w\"\n[[op]]\nwait = \"w\"\n[[op]]\nitem = \"x\"\n"
        )
    }

    fn events_of(text: &str, rank: u32, event: WatchdogEvent) -> Vec<u64> {
        let timeline = simulate(&parse("t.toml", text).unwrap());
        timeline
            .watchdog
            .iter()
            .filter(|r| r.rank == rank && r.event == event)
            .map(|r| r.at_ns)
            .collect()
    }

    #[test]
    fn a_work_seen_complete_only_at_its_deadline_poll_still_times_out_r26() {
        // Rank 0's deadline: the first poll past 20 µs + 1 s is 1.1 s. Rank 1 joins at
        // 1.05 s, so the Work completes at ≈ 1.0501 s: not yet at the 1.0-s poll, and at the
        // 1.1-s poll the timeout is checked before completion.
        let late = two_ranks("[[perturb]]\nranks = [1]\nbefore = \"ar\"\nhost_delay_us = 1050000");
        assert_eq!(events_of(&late, 0, WatchdogEvent::Timeout), [1_100_000_000]);
        // Joining at 0.95 s, it completes before the 1.0-s poll: no timeout on any rank.
        let in_time =
            two_ranks("[[perturb]]\nranks = [1]\nbefore = \"ar\"\nhost_delay_us = 950000");
        let timeline = simulate(&parse("t.toml", &in_time).unwrap());
        assert!(timeline.findings.is_empty(), "{:?}", timeline.findings);
        assert!(timeline.watchdog.is_empty());
    }

    #[test]
    fn a_slow_host_phase_before_a_collective_times_out_the_others() {
        // Rank 1's host spends 2 s (a checkpoint) before the all_reduce: rank 0 times out at
        // 1.1 s; rank 1 then joins at 2 s while rank 0 is still in its dump wait, so the
        // collective completes — and rank 0 still exits at 1.1 s + 60 s.
        let text = two_ranks("[[perturb]]\nranks = [1]\nbefore = \"ar\"\nhost_delay_us = 2000000");
        let timeline = simulate(&parse("t.toml", &text).unwrap());
        let at = |rank: u32, event: WatchdogEvent| {
            timeline
                .watchdog
                .iter()
                .find(|r| r.rank == rank && r.event == event)
                .map(|r| r.at_ns)
        };
        assert_eq!(at(0, WatchdogEvent::Timeout), Some(1_100_000_000));
        assert_eq!(at(0, WatchdogEvent::Exit), Some(61_100_000_000));
        assert_eq!(at(1, WatchdogEvent::Timeout), None);
        let end_ns = timeline.ranks[1].collectives[0].end_ns;
        assert!(end_ns > 2_000_000_000 && end_ns < 2_001_000_000, "{end_ns}");
    }

    #[test]
    fn a_process_that_dies_loses_its_queued_gpu_work_and_its_peers_time_out() {
        // Rank 1 queues a 1-s GPU sleep, then dies before the all_reduce: the sleep never
        // finishes (its process is gone) and rank 0's Work times out at 1.1 s.
        let text = format!(
            "[[op]]\nlabel = \"backlog\"\ngpu_sleep_us = 1000000\nranks = [1]\n{}",
            two_ranks("[[fault]]\nranks = [1]\nat = \"ar\"\nkind = \"die\"")
        );
        let timeline = simulate(&parse("t.toml", &text).unwrap());
        assert!(timeline.ranks[1].kernels.is_empty());
        let exit: Vec<u64> = timeline
            .watchdog
            .iter()
            .filter(|r| r.rank == 1 && r.event == WatchdogEvent::Exit)
            .map(|r| r.at_ns)
            .collect();
        assert_eq!(exit, [5_000], "died after the 5-µs launch");
        let kinds: Vec<FindingKind> = timeline.findings.iter().map(|f| f.kind).collect();
        assert_eq!(kinds, [FindingKind::WatchdogTimeout]);
        assert!(timeline.findings[0]
            .message
            .contains("rank 1 never joined collective 1"));
    }

    #[test]
    fn after_clean_up_only_the_next_collective_on_the_aborted_communicator_raises_r27() {
        // Mode 2: rank 0 times out at 1.1 s and aborts at 61.1 s; its wait and `.item()` return
        // (15 µs), and its second iteration's all_reduce raises in the main thread.
        let text = format!(
            "repeat = 2\n[env]\nTORCH_NCCL_ASYNC_ERROR_HANDLING = 2\n{}",
            two_ranks("[[fault]]\nranks = [1]\nat = \"ar\"\nkind = \"hang\"")
        );
        assert_eq!(events_of(&text, 0, WatchdogEvent::Abort), [61_100_000_000]);
        assert_eq!(
            events_of(&text, 0, WatchdogEvent::Exit),
            [61_100_000_000 + 15_000]
        );
    }

    #[test]
    fn no_handling_goes_on_to_the_next_pending_work_after_the_dump_wait_r27() {
        // Mode 0: rank 0 enqueued two all_reduces (20 µs and 50 µs); both are past their
        // deadline at the 1.1-s poll, but the watchdog handles the first, sleeps 60 s, and only
        // then reaches the second (61.1 s), as one pass of Watchdog::runLoop does.
        let text = "[env]\nTORCH_NCCL_ASYNC_ERROR_HANDLING = 0\n[cluster]\nranks = 2\n[groups.world]\neager_init = true\ntimeout_s = 1\n[tensors]\nx = \"1MiB\"\n[[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\nasync_op = true\nwork = \"w\"\n[[op]]\nall_reduce = \"x\"\nasync_op = true\nwork = \"v\"\n[[op]]\nitem = \"x\"\n[[fault]]\nranks = [1]\nat = \"ar\"\nkind = \"hang\"\n";
        assert_eq!(
            events_of(text, 0, WatchdogEvent::Timeout),
            [1_100_000_000, 61_100_000_000]
        );
        assert_eq!(
            events_of(text, 0, WatchdogEvent::NoHandling),
            [61_100_000_000, 121_100_000_000]
        );
    }

    #[test]
    fn a_skipped_collective_desyncs_the_sequence_numbers() {
        // Rank 1 skips the all_reduce of iteration 0, so its iteration-1 call is its SeqNum 1
        // and completes rank 0's first; rank 0's SeqNum 2 is never joined and times out at the
        // first poll past its enqueue + 1 s.
        let text = "repeat = 2\n[cluster]\nranks = 2\n[groups.world]\neager_init = true\ntimeout_s = 1\n[tensors]\nx = \"1MiB\"\n[[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\n[[op]]\nitem = \"x\"\n[[fault]]\nranks = [1]\nat = \"ar\"\nkind = \"skip\"\n";
        let timeline = simulate(&parse("t.toml", text).unwrap());
        assert_eq!(timeline.ranks[1].collectives.len(), 1);
        assert_eq!(timeline.ranks[1].collectives[0].iteration, 1);
        assert_eq!(
            timeline.ranks[0].collectives[0].end_ns,
            timeline.ranks[1].collectives[0].end_ns
        );
        let kinds: Vec<FindingKind> = timeline.findings.iter().map(|f| f.kind).collect();
        assert_eq!(kinds, [FindingKind::WatchdogTimeout]);
        assert!(timeline.findings[0]
            .message
            .contains("rank 1 never joined collective 2 (ALLREDUCE, world)"));
        assert_eq!(timeline.findings[0].iteration, Some(1));
        assert_eq!(
            timeline
                .watchdog
                .iter()
                .find(|r| r.event == WatchdogEvent::Timeout)
                .map(|r| r.at_ns),
            Some(1_100_000_000)
        );
    }

    #[test]
    fn the_watchdog_costs_no_processed_event_when_nothing_times_out() {
        // The same program with and without watchdog threads (blocking wait starts none, R15;
        // with no wait() it changes nothing else) processes the same events: the one deadline
        // event per group and rank is dropped unprocessed at the end.
        let program = |blocking: u8| {
            format!(
                "repeat = 50\n[cluster]\nranks = 4\n[env]\nTORCH_NCCL_BLOCKING_WAIT = {blocking}\n[groups.world]\neager_init = true\n[tensors]\nx = \"1MiB\"\n[[op]]\nall_reduce = \"x\"\n[[op]]\ngemm = [512, 512, 512]\n"
            )
        };
        let options = crate::engine::Options::default();
        let (with_watchdog, events) =
            crate::engine::simulate_with(&parse("t.toml", &program(0)).unwrap(), options);
        let (_, events_without) =
            crate::engine::simulate_with(&parse("t.toml", &program(1)).unwrap(), options);
        assert!(with_watchdog.findings.is_empty());
        assert_eq!(events, events_without);
    }

    #[test]
    fn each_process_group_has_its_own_watchdog_and_timeout() {
        // A subgroup with a 2-s timeout: rank 1 never joins its collective, so rank 0's
        // watchdog of that group (not the world's) fires at the first poll past 20 µs + 2 s.
        let text = "[cluster]\nranks = 4\n[groups.world]\neager_init = true\n[groups.pair]\nranks = [0, 1]\neager_init = true\ntimeout_s = 2\n[tensors]\nx = \"1MiB\"\n[[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\ngroup = \"pair\"\n[[op]]\nitem = \"x\"\n[[fault]]\nranks = [1]\nat = \"ar\"\nkind = \"hang\"\n";
        let timeline = simulate(&parse("t.toml", text).unwrap());
        let timeout = timeline
            .watchdog
            .iter()
            .find(|r| r.event == WatchdogEvent::Timeout)
            .unwrap();
        assert_eq!(
            (timeout.rank, timeout.group, timeout.at_ns),
            (0, Some(1), 2_100_000_000)
        );
        assert!(timeout.message.contains("Timeout(ms)=2000"));
        assert!(timeline.findings[0]
            .message
            .contains("rank 1 never joined collective 1 (ALLREDUCE, pair)"));
    }

    #[test]
    fn every_fault_under_every_handling_mode_ends_the_run_with_findings() {
        // Each fault kind on each rank, at each collective, under each error-handling mode and
        // with blocking wait: the run ends (no hang, no panic) and says what went wrong.
        let kinds = [
            ("ar", "hang", ""),
            ("ar", "die", ""),
            ("ar", "async_error", "after_us = 1000"),
            ("ar", "watchdog_stuck", ""),
            ("ar", "mismatch", "size = \"2MiB\""),
            ("ar2", "skip", ""),
            ("ar2", "mismatch", "collective = \"broadcast\""),
        ];
        for (at, kind, extra) in kinds {
            for rank in 0..3 {
                for mode in 0..4 {
                    for blocking in 0..2 {
                        let text = format!(
                            "repeat = 2\n[cluster]\nranks = 3\n[env]\nTORCH_NCCL_ASYNC_ERROR_HANDLING = {mode}\nTORCH_NCCL_BLOCKING_WAIT = {blocking}\nTORCH_NCCL_DESYNC_DEBUG = 1\nTORCH_NCCL_HEARTBEAT_TIMEOUT_SEC = 30\n[groups.world]\ntimeout_s = 10\n[tensors]\nx = \"1MiB\"\n[[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\nasync_op = true\nwork = \"w\"\n[[op]]\ngemm = [256, 256, 256]\n[[op]]\nwait = \"w\"\n[[op]]\nlabel = \"ar2\"\nall_reduce = \"x\"\n[[op]]\nitem = \"x\"\n[[fault]]\nranks = [{rank}]\nat = \"{at}\"\niteration = 1\nkind = \"{kind}\"\n{extra}\n"
                        );
                        let timeline = simulate(&parse("t.toml", &text).unwrap());
                        // Blocking wait starts no watchdog, so none can hang.
                        let harmless = kind == "watchdog_stuck" && blocking == 1;
                        assert_eq!(
                            timeline.findings.is_empty(),
                            harmless,
                            "{kind} at {at} on rank {rank}, mode {mode}, blocking {blocking}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn the_heartbeat_monitor_can_kill_a_watchdog_asleep_in_a_long_dump_wait_r28() {
        // A 1-s heartbeat timeout is shorter than the 60-s dump wait: rank 0's watchdog
        // stops beating at the 1.1-s timeout poll, and the monitor's reads at 2 s (moved since
        // 1 s) and 3 s (unchanged) abort it at 3 s.
        let text = two_ranks(
            "[env]\nTORCH_NCCL_HEARTBEAT_TIMEOUT_SEC = 1\n[[fault]]\nranks = [1]\nat = \"ar\"\nkind = \"hang\"",
        );
        assert_eq!(
            events_of(&text, 0, WatchdogEvent::HeartbeatTimeout),
            [3_000_000_000]
        );
        assert!(events_of(&text, 0, WatchdogEvent::Abort).is_empty());
    }
}
