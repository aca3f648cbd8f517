//! The discrete-event simulator: a [`Scenario`] in, a [`Timeline`] out.
//!
//! Each rank has a host thread that runs the program (R1) and a GPU with FIFO streams (R4).
//! Host calls cost host time and push work onto streams; the host runs ahead of the GPU and
//! stops only at the blocking points of R14/R15. Streams execute their queues in simulated time:
//! event records fire when reached, event waits hold a stream until the event fired (R5),
//! kernels occupy their stream for their duration, and a collective's kernel, once started,
//! spins until every rank of the group has started it (R16), then moves data for its α-β time
//! (R24).
//!
//! Events are processed in time order, equal times in the order they were scheduled (the
//! order of a heap keyed by (time, sequence number); `queue` keeps it as a heap of distinct
//! times with a FIFO per time), so a run is deterministic. If the queue runs dry while a host
//! or a stream still has work, the run ends with a deadlock finding naming the ranks, ops and
//! streams that are stuck.
//!
//! The parts: `host` is each rank's host, a cursor over the steps ProcessGroupNCCL makes of
//! its ops ([`crate::pg`], shared with `hw`); `streams` the GPU's streams, event instances
//! and SMs; `rendezvous` the collectives' meeting of ranks (R16, R24); `memory` the caching
//! allocator and tensor lifetimes (R17–R20); `queue` the event queue; `findings` data races
//! and deadlocks; `failure` faults, ProcessGroupNCCL's side threads (R26–R29) and the end of a
//! process (R31), a component that is told what happened and answers with commands, which
//! `commands` applies; `rank` the state of one rank; `gpu_times` what the GPU side writes into
//! the records, kept apart from them until they are resolved. This file holds the run loop and
//! the Timeline's assembly once the run ends; `tests` the engine-level behaviours, each through a
//! whole small scenario.
//!
//! About 870 lines: the run loop dispatches every event kind and the assembly reads every
//! part's state, so both stay beside the `Engine` they share.

use crate::cost::gemm_ns;
use crate::fold::Classes;
use crate::gpu::{KernelShape, SmScheduler};
use crate::lifetime::TensorMemory;
use crate::nccl::{plan_collective, CollectivePlan};
use crate::pg::{ProcessGroupNccl, Step};
use crate::race::{AccessKind, Point, RaceDetector};
use crate::random::{apply_jitter, jittered_ns, mix_seed, rank_rng};
use crate::scenario::TensorId;
use crate::scenario::{CollectiveKind, GroupId, OpKind, Scenario};
use crate::timeline::*;
use failure::{Failure, Wake};
use host::{Cursor, StepLog};
use memory::MemoryState;
use queue::{Event, EventQueue};
use rank::{RankState, Scratch};
use rendezvous::Rendezvous;
use rustc_hash::FxHashMap;
use rustc_hash::FxHashSet;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::rc::Rc;
use streams::{ComputeSms, GpuItem, QueuedItem, StreamState};

mod commands;
mod failure;
mod findings;
mod flight_recorder;
mod gpu_times;
mod host;
mod memory;
mod queue;
mod rank;
mod rendezvous;
mod streams;
mod summary;
mod wait;

/// Sentinel for "has not happened", the Timeline's own for the records the engine builds.
const NEVER: u64 = NEVER_NS;

/// The most race findings a run lists (R21), the earliest ([`Engine::order_findings`]); every
/// race stays in its rank's `races`.
const MAX_RACE_FINDINGS: usize = 64;

/// Simulates `scenario` to completion (or to a deadlock or the time cap), folding ranks that
/// behave alike (docs/scale.md), and returns the Timeline rank by rank (expanded).
pub fn simulate(scenario: &Scenario) -> Timeline {
    simulate_with(scenario, Options::default()).0.expand()
}

/// What a simulation does besides the timeline.
#[derive(Debug, Clone)]
pub struct Options {
    /// Run the race detector (R21).
    pub race_detector: bool,
    /// The memory cap (docs/reliability.md): `memory_in_use` (what the process holds, as its
    /// allocator counts it) is asked at the first event and every [`MEMORY_CHECK_EVENTS`]
    /// after, and a run past `max_memory_bytes` stops there with a `memory_cap` finding. The
    /// engine reads no counter of its own; without one there is no cap.
    pub memory_in_use: Option<fn() -> u64>,
    pub max_memory_bytes: u64,
    /// Told the events processed and the simulated time reached, at the first event and every
    /// [`MEMORY_CHECK_EVENTS`] after (the binary shows a long run's progress with it). It only
    /// observes: the run is the same with it or without.
    pub progress: Option<fn(u64, u64)>,
    /// Simulate one rank per class of ranks that behave alike (with the scenario's
    /// `cluster.fold`); the Timeline is then folded (docs/scale.md).
    pub fold: bool,
    /// Report every rank's findings and watchdog records, not one per class: every rank is a
    /// class of its own (`--detail ranks`).
    pub per_rank_detail: bool,
    /// Keep the Timeline as summaries (`Timeline::summary`), folding each rank's records as
    /// they complete, and keep whole only the records this selects (engine/summary.rs).
    pub summary: Option<RecordSelection>,
}

/// Events between two looks at the memory in use.
pub const MEMORY_CHECK_EVENTS: u64 = 4_096;

impl Default for Options {
    fn default() -> Options {
        Options {
            race_detector: true,
            memory_in_use: None,
            max_memory_bytes: u64::MAX,
            progress: None,
            fold: true,
            per_rank_detail: false,
            summary: None,
        }
    }
}

/// The classes of ranks a simulation with `options` uses (docs/scale.md). A summarised run
/// (`options.summary`) simulates every rank, unfolded: its distributions count ranks.
pub fn classes(scenario: &Scenario, options: &Options) -> Classes {
    if options.per_rank_detail {
        Classes::per_rank(scenario)
    } else {
        Classes::of(scenario, options.fold && options.summary.is_none())
    }
}

/// Simulates with `options`; also returns the number of events processed (for the benchmark).
/// With `options.fold` the Timeline is folded ([`Timeline::expand`] unfolds it).
pub fn simulate_with(scenario: &Scenario, options: Options) -> (Timeline, u64) {
    let mut engine = Engine::new(scenario, options);
    engine.run();
    let events = engine.events_processed;
    (engine.finish(), events)
}

/// Simulates `scenario` and returns the steps `rank`'s host executed, in order: the
/// simulator's side of the engine-equivalence test (`hw` logs the steps it runs too).
pub fn executed_steps(scenario: &Scenario, rank: u32) -> Vec<Step> {
    let mut engine = Engine::new(scenario, Options::default());
    let simulated = engine.classes.simulated_of(rank);
    engine.step_log = Some((simulated, Vec::new()));
    engine.run();
    engine
        .step_log
        .take()
        .map(|(_, steps)| steps)
        .unwrap_or_default()
}

type Instance = u32;

/// In `Scratch::collective_work_start`: the Work is not timed and has no start event.
const NO_WORK_START: Instance = Instance::MAX;

/// In `Scratch::collective_end`: the collective's Work is not enqueued (R10e) and has no end
/// event yet; its host has not got from the NCCL call to the Work (it waits for room on a full
/// launch queue, R1, or for the simulation to reach its time).
const NOT_ENQUEUED: Instance = Instance::MAX - 1;

#[derive(Debug, Clone, Copy)]
enum Blocked {
    /// Not blocked.
    Running,
    /// Waiting for `pending` instances to fire, then resuming after `cost_ns`; `from_ns` is the
    /// host time at which the host started waiting.
    Instances {
        pending: u32,
        latest_ns: u64,
        from_ns: u64,
        cost_ns: u64,
    },
    /// Blocking wait (R15) or `wait(timeout)` on the Work of collective record `collective`:
    /// polls at `first_poll_ns + k·poll_ns`, raising at the first poll at or after
    /// `deadline_ns`: that of the NCCL async error its first poll knew of (`failed`, R27),
    /// else of the timeout. Also any `wait()` that found its Work's error at the call: one
    /// poll, its deadline the call's host time.
    Polling {
        first_poll_ns: u64,
        poll_ns: u64,
        deadline_ns: u64,
        collective: u32,
        failed: bool,
    },
    /// A wait's own timeout, or the Work's async error found by a poll (`failed`, R15, R27):
    /// the main thread aborts the communicator of collective record `collective` and raises
    /// once the abort's least time passed (`floor_passed`, `host.comm_abort_us`) and the
    /// device drained (every stream's queue, the collective's or not).
    Aborting {
        collective: u32,
        floor_passed: bool,
        failed: bool,
    },
    /// A call waiting for the watchdog of process group `group`, busy with an error (R27): on
    /// the communicator the watchdog is aborting, or, its kernel launched, to put its Work onto
    /// the list the watchdog holds from the error's finding until it is done with it. The call
    /// goes on once the watchdog is done, at the same step (the communicator checked again,
    /// the Work listed).
    Watchdog { group: u16 },
    /// Enqueueing onto `stream` (a launch, an event record, a stream wait), which already holds
    /// `host.launch_queue_depth` commands: CUDA blocks the thread until the GPU takes one.
    LaunchQueue { stream: u16 },
    /// Lazy communicator init (R8): waiting for the group's other ranks.
    CommInit,
    /// Waiting for the simulation to catch up with the host's time, then running the same step
    /// again (an allocation that must see which recordStream events have passed, R19), or
    /// going on at the next step (a host that reached a pending side-thread step, R26–R29).
    Timer,
    /// The program ended.
    Done,
    /// The process is gone (a fault, an exception, an abort): nothing of it runs again.
    Dead,
    /// The process ends with `status` when the simulation reaches the host's time
    /// ([`queue::Event::ProcessEnds`]): the host runs nothing more, while its GPU work and side
    /// threads go on until then (a `die` fault reached by a host running ahead of its GPU).
    Exiting { status: ExitStatus },
    /// The host hangs for good before an op (a `hang` fault: a stuck data loader, a
    /// deadlocked Python thread); its GPU work and watchdog go on.
    Hung,
}

/// A simulated rank that reached a lazy communicator init (R8), at host time `host_ns`; its part
/// of the init costs `cost_ns` (its process's first communicator, or a later one). It `counted`
/// towards the init's members until it could no longer do its part: its process ended in the
/// init, or its `store.get` gave up before the root published the unique id (R29). It `left`
/// once a caught raise took the rank out of the init: its next try is a new arrival.
#[derive(Debug, Clone, Copy)]
struct InitArrival {
    rank: u32,
    host_ns: u64,
    cost_ns: u64,
    counted: bool,
    left: bool,
}

/// The exchange of a group's unique id inside a non-blocking eager `init_process_group`
/// (R8, R29): the root publishes it in its call, the others' `store.get` wait there.
#[derive(Debug, Clone, Default)]
struct UniqueIdExchange {
    /// When the root published the id (its host time).
    published_ns: Option<u64>,
    /// The simulated ranks blocked in `store.get`. Sets and maps by rank, not lists: every
    /// rank of a large unfolded world is looked up in them.
    waiting: BTreeMap<u32, StoreGet>,
    /// The simulated ranks that have the id, whose part of the creation runs from then (their
    /// arrival in the group's init): their first use waits only for the communicator, also
    /// after a raise there.
    fetched: BTreeSet<u32>,
    /// The simulated ranks blocked in the first use, waiting for the creation to end.
    in_first_use: BTreeSet<u32>,
}

/// A rank's `store.get` of the unique id in a non-blocking eager init ([`UniqueIdExchange`]).
#[derive(Debug, Clone, Copy)]
struct StoreGet {
    /// The host time it began.
    since_ns: u64,
    /// The cost of the rank's part of the creation, once it has the id.
    cost_ns: u64,
}

#[derive(Debug, Clone, Copy)]
enum Waiter {
    Stream { stream: u16 },
    Host,
}

/// The engine's ranks are *simulated ranks*: one per class of ranks that behave alike when the
/// run is folded (its `rank` variables index them; [`Classes::rank_of`] names the rank), one per
/// rank otherwise.
struct Engine<'s> {
    scenario: &'s Scenario,
    /// The classes of ranks, and how simulated ranks map onto them (docs/scale.md).
    classes: Rc<Classes>,
    now_ns: u64,
    queue: EventQueue,
    ranks: Vec<RankState>,
    rendezvous: Vec<Option<Rendezvous>>,
    /// (group, seq) → index into `rendezvous`.
    rendezvous_index: FxHashMap<(GroupId, u64), u32>,
    free_rendezvous: Vec<u32>,
    /// Collectives whose data is moving: a member that dies before their end stops them on
    /// every other member.
    in_flight: Vec<rendezvous::Transfer>,
    /// Lazy communicator init: per group, the simulated ranks that arrived.
    comm_init: Vec<Vec<InitArrival>>,
    /// Per group: how many ranks the arrivals still `counted` count as.
    comm_init_ranks: Vec<u32>,
    /// Per group: where each simulated rank's arrival (not `left`) is in `comm_init`, looked
    /// up as each of a large world's ranks ends or raises.
    comm_init_index: Vec<FxHashMap<u32, usize>>,
    /// Per group: when its root arrived, publishing the unique id (R29), read at each arrival.
    comm_init_root_ns: Vec<Option<u64>>,
    /// Per group: when its init ends, set once every member counts (`init_formed`), read while
    /// they all still do: kept, since each of a large world's ranks asks for it.
    comm_init_end_ns: Vec<u64>,
    /// Per group: the unique id a non-blocking eager init exchanged (R29).
    unique_ids: Vec<UniqueIdExchange>,
    gemm_ns_by_op: Vec<u64>,
    /// Per op: how its compute kernels hold SMs (R22), read when one starts.
    compute_sms_by_op: Vec<ComputeSms>,
    /// Per collective or barrier op: how NCCL runs it (channels, duration; R22, R24).
    /// How NCCL runs each (collective or barrier op, call size) (R22, R24, R25).
    plans: FxHashMap<(usize, u64), CollectivePlan>,
    findings: Vec<Finding>,
    /// Per finding made during the run: when it was found and the rank that reports it, the
    /// order the report lists them in ([`Self::order_findings`]).
    finding_keys: Vec<(u64, u32)>,
    /// Faults, watchdogs, heartbeat monitors, the store, the end of a process (R26–R29, R31).
    failure: Failure<'s>,
    /// The failure component's commands being applied (kept to reuse the buffer).
    commands: Vec<failure::Command>,
    /// Some process ended.
    any_dead: bool,
    /// Rendezvous that can never complete (a member died or aborted, a network error, a
    /// mismatch).
    poisoned: FxHashSet<u32>,
    /// The failure wake-ups in the queue: their times and how many at each.
    failure_wakes: BTreeMap<u64, u32>,
    /// The earliest time in `failure_wakes` (`u64::MAX`: none), kept as it changes: the host
    /// reads it before every step.
    horizon_ns: u64,
    /// The period of the heartbeat monitors' reads of the store, where another rank's dump
    /// signal can end a process there (`TORCH_NCCL_DUMP_ON_TIMEOUT`, monitoring and the
    /// watchdog on): a host does not run past the next read, whose effect no wake-up in the
    /// queue announces yet (R28).
    dump_signal_read_ns: Option<u64>,
    events_processed: u64,
    /// What the failure component may read changed ([`failure::RunView::epoch`]).
    epoch: u64,
    options: Options,
    step_log: StepLog,
    /// Summary hook: the distributions of a summarised run (engine/summary.rs).
    summariser: Option<summary::Summariser>,
}

impl<'s> Engine<'s> {
    fn new(scenario: &'s Scenario, options: Options) -> Self {
        let user_streams = scenario.streams.len();
        let classes = Rc::new(classes(scenario, &options));
        let ranks = (0..classes.simulated())
            .map(|simulated| {
                let rank = classes.rank_of(simulated);
                let streams_info = crate::pg::streams::rank_streams(scenario, rank);
                let stream_count = streams_info.len();
                let streams = streams_info
                    .iter()
                    .map(|info| StreamState {
                        high_priority: info.high_priority,
                        ..StreamState::default()
                    })
                    .collect();
                let mut pg = ProcessGroupNccl::new(scenario, rank);
                let cursor = Cursor::at_start(scenario, &mut pg);
                RankState {
                    host_ns: 0,
                    iteration: 0,
                    pc: 0,
                    blocked: Blocked::Running,
                    blocked_op: 0,
                    pg,
                    cursor,
                    last_collective_return_ns: None,
                    slot_instance: Vec::new(),
                    generation: 0,
                    streams,
                    group_seq: vec![0; scenario.groups.len()],
                    comm_created_ns: vec![NEVER; scenario.groups.len()],
                    fired_ns: Vec::new(),
                    instance_stream: Vec::new(),
                    waiters: rank::Waiters::default(),
                    work_end: vec![None; scenario.works.len()],
                    timeline: summary::RankRecords {
                        rank,
                        streams: streams_info,
                        folds: options.summary.is_some(),
                        ..summary::RankRecords::default()
                    },
                    scratch: Scratch::default(),
                    gpu: SmScheduler::new(scenario.cluster.gpu.sms),
                    transfer_at_ns: None,
                    end: None,
                    unfinished_host: None,
                    caught: false,
                    pg_before_op: None,
                    aborts_awaiting_drain: Vec::new(),
                    memory: MemoryState::new(scenario, rank),
                    compute_speed: rank_speed(scenario, rank),
                    compute_launched_ns: 0,
                    race: if options.race_detector {
                        RaceDetector::new(stream_count)
                    } else {
                        RaceDetector::disabled(stream_count)
                    },
                }
            })
            .collect();
        debug_assert!(user_streams >= 1);
        let gemm_ns_by_op = scenario
            .ops
            .iter()
            .map(|op| match op.kind {
                OpKind::Gemm { m, n, k, dtype } => gemm_ns(&scenario.cluster.gpu, m, n, k, dtype),
                _ => 0,
            })
            .collect();
        let compute_sms_by_op = scenario
            .ops
            .iter()
            .map(|op| ComputeSms::of(scenario, &op.kind))
            .collect();
        let mut plans = FxHashMap::default();
        for op in &scenario.ops {
            let Some((collective, group)) = op.kind.collective() else {
                continue;
            };
            for size_bytes in scenario.call_sizes(&op.kind) {
                let ranks = &scenario.groups[group].ranks;
                plans
                    .entry((op.index, size_bytes))
                    .or_insert_with(|| plan_collective(scenario, ranks, collective, size_bytes));
            }
        }
        Engine {
            scenario,
            plans,
            now_ns: 0,
            queue: EventQueue::default(),
            ranks,
            rendezvous: Vec::new(),
            rendezvous_index: FxHashMap::default(),
            free_rendezvous: Vec::new(),
            in_flight: Vec::new(),
            comm_init: vec![Vec::new(); scenario.groups.len()],
            comm_init_ranks: vec![0; scenario.groups.len()],
            comm_init_index: vec![FxHashMap::default(); scenario.groups.len()],
            comm_init_root_ns: vec![None; scenario.groups.len()],
            comm_init_end_ns: vec![0; scenario.groups.len()],
            unique_ids: vec![UniqueIdExchange::default(); scenario.groups.len()],
            gemm_ns_by_op,
            compute_sms_by_op,
            findings: Vec::new(),
            finding_keys: Vec::new(),
            failure: Failure::new(scenario, Rc::clone(&classes)),
            classes,
            commands: Vec::new(),
            any_dead: false,
            poisoned: FxHashSet::default(),
            failure_wakes: BTreeMap::new(),
            horizon_ns: u64::MAX,
            dump_signal_read_ns: (scenario.env.dump_on_timeout
                && scenario.env.enable_monitoring
                && crate::pg::work::watchdog_runs(&scenario.env))
            .then_some(scenario.env.coord_check_ns),
            events_processed: 0,
            epoch: 0,
            summariser: options
                .summary
                .clone()
                .map(|selection| summary::Summariser::new(scenario, selection)),
            options,
            step_log: None,
        }
    }

    fn schedule(&mut self, at_ns: u64, event: Event) {
        debug_assert!(
            at_ns >= self.now_ns,
            "causality: an event scheduled in the past"
        );
        self.queue.push(at_ns, event);
    }

    /// The resume of `rank`'s host at `at_ns`, for the state the host is in now.
    fn host_resume(&self, rank: u32, at_ns: u64) -> Event {
        let generation = self.ranks[rank as usize].generation;
        Event::HostResume {
            rank,
            at_ns,
            generation,
        }
    }

    /// The end of the communicator's init `rank`'s host waits in, resuming it at `at_ns`.
    fn comm_init_end(&self, rank: u32, at_ns: u64) -> Event {
        let generation = self.ranks[rank as usize].generation;
        Event::CommInitEnd {
            rank,
            at_ns,
            generation,
        }
    }

    /// Events that change nothing: those of a dead process, and failure wake-ups whose reason
    /// went away (dropped before the time cap is checked, so a 10-minute watchdog deadline
    /// left over by a run that ended in milliseconds costs nothing).
    fn ignored(&mut self, at_ns: u64, event: Event) -> bool {
        let rank = match event {
            // A collective's members may have ended meanwhile; the others still move data.
            Event::RendezvousDue { .. } => return false,
            Event::Advance { rank, .. }
            | Event::KernelEnd { rank, .. }
            | Event::SmTransfer { rank }
            | Event::HostResume { rank, .. }
            | Event::CommInitEnd { rank, .. }
            | Event::WaitTimeout { rank, .. }
            | Event::WaitAbortDue { rank, .. }
            | Event::Failure { rank, .. }
            | Event::ProcessEnds { rank } => rank,
        };
        if self.is_dead(rank) {
            return true;
        }
        // The host of a process that is about to end takes no more steps.
        if matches!(self.ranks[rank as usize].blocked, Blocked::Exiting { .. })
            && matches!(
                event,
                Event::HostResume { .. }
                    | Event::CommInitEnd { .. }
                    | Event::WaitTimeout { .. }
                    | Event::WaitAbortDue { .. }
            )
        {
            return true;
        }
        match event {
            // Scheduled for a state the host left: it resumed since, or a caught raise took it
            // out of the init whose end this is (`RankState::generation`).
            Event::HostResume { generation, .. } | Event::CommInitEnd { generation, .. }
                if generation != self.ranks[rank as usize].generation =>
            {
                return true;
            }
            // The end of a communicator's init that a member's end undid (R8): the host waits
            // on. (Only that resume: one from `store.get`, the unique id there, is not the
            // init's end.)
            Event::CommInitEnd { .. } if self.any_dead && self.waits_in_unformed_init(rank) => {
                return true;
            }
            _ => {}
        }
        let Event::Failure { group, wake, .. } = event else {
            return false;
        };
        self.wake_is_stale((rank, group as GroupId, wake), at_ns)
    }

    fn run(&mut self) {
        let stopped_by_cap = self.run_events();
        for mismatch in self.failure.mismatch_findings() {
            let rank = mismatch.ranks.first().expect("a call was made");
            self.finding_keys.push((mismatch.found_ns, rank));
            self.findings.push(Finding {
                kind: FindingKind::Mismatch,
                rank: Some(rank),
                iteration: Some(mismatch.iteration),
                op: Some(mismatch.op as OpRef),
                stream: None,
                message: mismatch.message,
                stands_for: if mismatch.ranks.count() > 1 {
                    mismatch.ranks
                } else {
                    RankSet::default()
                },
            });
        }
        self.order_findings();
        match stopped_by_cap {
            Some(cap) => self.findings.push(cap),
            None => self.report_deadlocks(),
        }
    }

    /// The findings made so far, by the simulated time they were found at (a host's own time
    /// for what its host found running ahead, R1), then by the rank that reports them: the
    /// engine takes the events of one instant in an order that depends on which ranks it
    /// simulates (a folded run has fewer), and the report must not (docs/scale.md). Of the
    /// races, the first [`MAX_RACE_FINDINGS`] in that order are kept: a finding made later is
    /// found at the engine's time or after, so none that is dropped could come back among
    /// them (the run orders its findings when they reach twice the cap, and at its end).
    fn order_findings(&mut self) {
        debug_assert_eq!(self.findings.len(), self.finding_keys.len());
        let mut keyed: Vec<((u64, u32), Finding)> = std::mem::take(&mut self.finding_keys)
            .into_iter()
            .zip(std::mem::take(&mut self.findings))
            .collect();
        keyed.sort_by_key(|&(key, _)| key);
        let mut races = 0;
        keyed.retain(|(_, finding)| {
            races += usize::from(finding.kind == FindingKind::Race);
            finding.kind != FindingKind::Race || races <= MAX_RACE_FINDINGS
        });
        (self.finding_keys, self.findings) = keyed.into_iter().unzip();
    }

    /// The event loop, to its end or to a cap that stops it (the cap's finding).
    fn run_events(&mut self) -> Option<Finding> {
        for rank in 0..self.ranks.len() as u32 {
            if !self.up_front_out_of_memory(rank) {
                self.run_host(rank);
            }
        }
        while let Some((at_ns, event)) = self.queue.pop() {
            if let Event::Failure { .. } = event {
                self.failure_wake_popped(at_ns);
            }
            if self.ignored(at_ns, event) {
                continue;
            }
            if at_ns > self.scenario.max_sim_time_ns {
                return Some(Finding {
                    kind: FindingKind::TimeCap,
                    rank: None,
                    iteration: None,
                    op: None,
                    stream: None,
                    stands_for: RankSet::default(),
                    message: format!(
                        "simulated time reached the cap of {:.3} s (max_sim_time_s) with work still pending; the run was stopped there",
                        self.scenario.max_sim_time_ns as f64 / 1e9
                    ),
                });
            }
            debug_assert!(at_ns >= self.now_ns, "time only moves forward");
            self.now_ns = at_ns;
            self.events_processed += 1;
            if !matches!(event, Event::Failure { .. }) {
                self.epoch += 1;
            }
            // At the first event, then every MEMORY_CHECK_EVENTS: a cap below what the process
            // holds already ends even a short run.
            if (self.events_processed - 1).is_multiple_of(MEMORY_CHECK_EVENTS) {
                if let Some(progress) = self.options.progress {
                    progress(self.events_processed, self.now_ns);
                }
                if let Some(cap) = self.over_memory_cap() {
                    return Some(cap);
                }
            }
            match event {
                Event::Advance { rank, stream } => {
                    let state = &mut self.ranks[rank as usize].streams[stream as usize];
                    if state.wake_at_ns == Some(at_ns) {
                        state.wake_at_ns = None;
                    }
                    self.advance(rank, stream);
                }
                Event::KernelEnd {
                    rank,
                    stream,
                    version,
                } => {
                    let state = &mut self.ranks[rank as usize].streams[stream as usize];
                    if state.end_version != version {
                        continue;
                    }
                    let finished = state.queue.pop_front().expect("a running kernel is queued");
                    let kernel = state.running.take().expect("only kernels end");
                    debug_assert!(matches!(
                        finished.item,
                        GpuItem::Kernel { kernel: k, .. } | GpuItem::Collective { kernel: k, .. }
                            if k == kernel
                    ));
                    self.stream_popped(rank, stream);
                    let rank_state = &mut self.ranks[rank as usize];
                    rank_state
                        .scratch
                        .kernel_times
                        .get_mut(kernel as usize)
                        .end_ns = at_ns;
                    rank_state.gpu.finish(at_ns, kernel);
                    self.rebalance(rank);
                    self.advance(rank, stream);
                }
                Event::SmTransfer { rank } => {
                    let state = &mut self.ranks[rank as usize];
                    if state.transfer_at_ns != Some(at_ns) {
                        continue;
                    }
                    state.transfer_at_ns = None;
                    state.gpu.transfer(at_ns);
                    self.rebalance(rank);
                }
                Event::HostResume { rank, at_ns, .. } | Event::CommInitEnd { rank, at_ns, .. } => {
                    let state = &mut self.ranks[rank as usize];
                    if matches!(event, Event::CommInitEnd { .. }) {
                        state
                            .cursor
                            .comm_init_ended(&mut state.comm_created_ns, at_ns);
                    }
                    state.host_ns = state.host_ns.max(at_ns);
                    state.generation += 1;
                    state.blocked = Blocked::Running;
                    self.run_host(rank);
                }
                Event::RendezvousDue { rendezvous } => self.rendezvous_due(rendezvous),
                Event::WaitTimeout { rank, generation } => self.wait_timed_out(rank, generation),
                Event::WaitAbortDue { rank, generation } => self.wait_abort_due(rank, generation),
                Event::Failure { rank, group, wake } => self.notify(failure::Notice::Woken {
                    rank,
                    group: group as GroupId,
                    wake,
                    now_ns: at_ns,
                }),
                Event::ProcessEnds { rank } => {
                    let Blocked::Exiting { status } = self.ranks[rank as usize].blocked else {
                        unreachable!("only an exiting process has its end queued");
                    };
                    self.kill(
                        rank,
                        ProcessEnd {
                            status,
                            at_ns: Some(at_ns),
                        },
                    );
                }
            }
        }
        None
    }

    /// The finding that stops the run, when the process holds more than the memory cap.
    fn over_memory_cap(&self) -> Option<Finding> {
        let memory_in_use = self.options.memory_in_use?;
        let held_bytes = memory_in_use();
        if held_bytes <= self.options.max_memory_bytes {
            return None;
        }
        let events = self.events_processed;
        Some(Finding {
            kind: FindingKind::MemoryCap,
            rank: None,
            iteration: None,
            op: None,
            stream: None,
            stands_for: RankSet::default(),
            message: format!(
                "the simulation held {} of memory, over the cap of {} (--max-memory), after {} event{} at simulated time {:.3} s; the run was stopped there",
                crate::units::format_size_readable(held_bytes),
                crate::units::format_size(self.options.max_memory_bytes),
                crate::ranks::thousands(events),
                if events == 1 { "" } else { "s" },
                self.now_ns as f64 / 1e9
            ),
        })
    }

    // ---------------------------------------------------------------- GPU side

    // ---------------------------------------------------------------- the end

    fn finish(self) -> Timeline {
        let scenario = self.scenario;
        let mut timeline = Timeline::for_scenario(scenario, Source::Simulated, |kind| {
            crate::nccl::kernel_name(scenario, kind)
        });
        timeline.machine.insert(
            "model".into(),
            format!("c10dsim-sim {}", env!("CARGO_PKG_VERSION")),
        );
        timeline
            .machine
            .insert("gpu".into(), scenario.cluster.gpu.preset.clone());
        let scenario = self.scenario;
        let watchdog = self.failure.into_records();
        // Each rank's first Dump record (one pass: a hang's every rank dumps).
        let mut dumped_at: FxHashMap<u32, u64> = FxHashMap::default();
        for record in &watchdog {
            if record.event == crate::timeline::WatchdogEvent::Dump {
                dumped_at.entry(record.rank).or_insert(record.at_ns);
            }
        }
        let group_ranks: Vec<std::sync::Arc<[u32]>> = scenario
            .groups
            .iter()
            .map(|group| group.ranks.as_slice().into())
            .collect();
        let mut summariser = self.summariser;
        let classes = self.classes;
        for (simulated, mut state) in self.ranks.into_iter().enumerate() {
            let class = classes.class_members(simulated as u32);
            let counts = summary::Counts::all(&state.timeline);
            // A call the process's end left open, else the one the run's end leaves open.
            let open_call = state.unfinished_host.or_else(|| state.open_call());
            // The program returned once it passed its last iteration.
            let unfinished_iteration =
                (state.iteration < scenario.repeat).then_some(state.iteration);
            // The calls folded during the run; resolving appends the rest to them.
            let folded_during_run = state.timeline.folded_works.len();
            let mut t = summary::resolved(&mut state, counts);
            let records = state.timeline;
            t.streams = records.streams;
            t.cache_releases = records.cache_releases;
            t.races = records.races;
            t.exceptions = records.exceptions;
            t.memory = state.memory.books.peaks();
            if classes.folded() && class.count() > 1 {
                t.stands_for = class.clone();
            }
            // The Flight Recorder sees every collective created before its dump, finished or not.
            // The watchdog's records are its class's lowest rank's.
            let rank = t.rank;
            let logged_as = class.first().expect("a class has members");
            // A summarised run keeps the dumps of the ranks it names and one per class of the
            // others (`Summariser::dump_stands_for`).
            let stands_for = match &summariser {
                Some(summariser) => summariser.dump_stands_for(rank, class),
                None => Some(RankSet::default()),
            };
            if let (Some(&at_ns), Some(stands_for)) = (dumped_at.get(&logged_as), stands_for) {
                let earlier = &records.folded_works[..folded_during_run];
                let dump = flight_recorder::dump(
                    scenario,
                    &group_ranks,
                    (rank, &state.comm_created_ns),
                    at_ns,
                    (earlier, &t.collectives),
                );
                timeline
                    .flight_recorder
                    .push(crate::flight_recorder::FlightRecorderDump { stands_for, ..dump });
            }
            // Records of what never happened (a deadlock) are dropped; findings describe them.
            // A collective that never completed (a hang, or a kernel an abort ended before data
            // moved, R27), a kernel that never ended and a stream wait never released move to the
            // unfinished records: their host side happened. A collective that completed stays though its wait's stream
            // release never came (the process ended first): only that wait did not happen, and
            // the other ranks' records name this one's arrival (R16).
            t.set_apart_unfinished();
            if let Some(call) = open_call {
                t.leave_open(call);
            }
            t.unfinished_iteration = unfinished_iteration;
            t.marks.retain(|m| m.gpu_ns != NEVER);
            t.host.retain(|h| h.end_ns != NEVER);
            // A process nothing ended runs on: hung, stopped at the time cap, or, its program
            // returned, waiting for GPU work that never drains (R31).
            t.end = Some(state.end.unwrap_or(ProcessEnd {
                status: ExitStatus::Running,
                at_ns: None,
            }));
            match &mut summariser {
                Some(summariser) => timeline.ranks.extend(summariser.finish_rank(scenario, t)),
                None => timeline.ranks.push(t),
            }
        }
        timeline.findings = self.findings;
        timeline.watchdog = watchdog;
        timeline.summary = summariser.map(|summariser| summariser.into_summary(scenario));
        timeline
    }
}

/// A rank's compute-time factor, `max(0.5, 1 + N(0, spread))`, drawn from its own stream so that
/// it shifts no other draw.
fn rank_speed(scenario: &Scenario, rank: u32) -> f64 {
    let spread = scenario.cluster.rank_speed_spread;
    if spread <= 0.0 {
        return 1.0;
    }
    let mut rng = rank_rng(mix_seed(scenario.seed, RANK_SPEED_STREAM), rank);
    (jittered_ns(1_000_000_000, spread, &mut rng) as f64 / 1e9).max(0.5)
}

/// Stream key of the per-rank speed draws.
const RANK_SPEED_STREAM: u64 = 0x73_7065_6564;

#[cfg(test)]
mod comm_error_tests;
#[cfg(test)]
mod side_thread_tests;
#[cfg(test)]
mod tests;
