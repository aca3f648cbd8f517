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
//! and deadlocks; `failure` faults and ProcessGroupNCCL's side threads (R26–R29), a component
//! that is told what happened and answers with commands, which `commands` applies; `rank` the
//! state of one rank; `gpu_times` what the GPU side writes into the records, kept apart from
//! them until they are resolved. This file holds the run loop and the Timeline's assembly once
//! the run ends; with its unit tests (the engine-level behaviours, through whole small
//! scenarios) it is just over 800 lines, and those tests are the part to move out.
//!
//! Over 1,000 lines only because of its unit tests (about half the file), which drive the
//! whole engine through small scenarios; the engine itself is split across this folder.

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
use std::collections::{BTreeMap, VecDeque};
use std::rc::Rc;
use streams::{GpuItem, QueuedItem, StreamState};

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

/// Sentinel for "has not happened".
const NEVER: u64 = u64::MAX;

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
    /// allocator counts it) is asked every [`MEMORY_CHECK_EVENTS`] events, and a run past
    /// `max_memory_bytes` stops there with a `memory_cap` finding. The engine reads no
    /// counter of its own; without one there is no cap.
    pub memory_in_use: Option<fn() -> u64>,
    pub max_memory_bytes: u64,
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
    /// `deadline_ns`.
    Polling {
        first_poll_ns: u64,
        poll_ns: u64,
        deadline_ns: u64,
        collective: u32,
        timeout_ns: u64,
    },
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
    /// The host hangs for good before an op (a `hang` fault: a stuck data loader, a
    /// deadlocked Python thread); its GPU work and watchdog go on.
    Hung,
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
    /// Lazy communicator init: per group, simulated ranks that arrived and their host times.
    comm_init: Vec<Vec<(u32, u64)>>,
    /// Per group: how many ranks those arrivals count as.
    comm_init_ranks: Vec<u32>,
    gemm_ns_by_op: Vec<u64>,
    /// Per collective or barrier op: how NCCL runs it (channels, duration; R22, R24).
    /// How NCCL runs each (collective or barrier op, call size) (R22, R24, R25).
    plans: FxHashMap<(usize, u64), CollectivePlan>,
    findings: Vec<Finding>,
    /// Faults, watchdogs, heartbeat monitors, the store (R26–R29).
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
                    caught: false,
                    memory: MemoryState::new(scenario),
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
            comm_init: vec![Vec::new(); scenario.groups.len()],
            comm_init_ranks: vec![0; scenario.groups.len()],
            gemm_ns_by_op,
            findings: Vec::new(),
            failure: Failure::new(scenario, Rc::clone(&classes)),
            classes,
            commands: Vec::new(),
            any_dead: false,
            poisoned: FxHashSet::default(),
            failure_wakes: BTreeMap::new(),
            horizon_ns: u64::MAX,
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

    /// Events that change nothing: those of a dead process, and failure wake-ups whose reason
    /// went away (dropped before the time cap is checked, so a 10-minute watchdog deadline
    /// left over by a run that ended in milliseconds costs nothing).
    fn ignored(&mut self, at_ns: u64, event: Event) -> bool {
        let rank = match event {
            Event::Advance { rank, .. }
            | Event::KernelEnd { rank, .. }
            | Event::SmTransfer { rank }
            | Event::HostResume { rank, .. }
            | Event::WaitTimeout { rank, .. }
            | Event::Failure { rank, .. } => rank,
        };
        if self.is_dead(rank) {
            return true;
        }
        let Event::Failure { group, wake, .. } = event else {
            return false;
        };
        self.wake_is_stale((rank, group as GroupId, wake), at_ns)
    }

    fn run(&mut self) {
        for rank in 0..self.ranks.len() as u32 {
            self.run_host(rank);
        }
        while let Some((at_ns, event)) = self.queue.pop() {
            if let Event::Failure { .. } = event {
                self.failure_wake_popped(at_ns);
            }
            if self.ignored(at_ns, event) {
                continue;
            }
            if at_ns > self.scenario.max_sim_time_ns {
                self.findings.push(Finding {
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
                return;
            }
            debug_assert!(at_ns >= self.now_ns, "time only moves forward");
            self.now_ns = at_ns;
            self.events_processed += 1;
            if !matches!(event, Event::Failure { .. }) {
                self.epoch += 1;
            }
            if self.events_processed.is_multiple_of(MEMORY_CHECK_EVENTS) && self.over_memory_cap() {
                return;
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
                Event::HostResume { rank, at_ns } => {
                    let state = &mut self.ranks[rank as usize];
                    state.host_ns = state.host_ns.max(at_ns);
                    state.generation += 1;
                    state.blocked = Blocked::Running;
                    self.run_host(rank);
                }
                Event::WaitTimeout { rank, generation } => self.wait_timed_out(rank, generation),
                Event::Failure { rank, group, wake } => self.notify(failure::Notice::Woken {
                    rank,
                    group: group as GroupId,
                    wake,
                    now_ns: at_ns,
                }),
            }
        }
        self.report_deadlocks();
    }

    /// True, with a finding, when the process holds more than the memory cap.
    fn over_memory_cap(&mut self) -> bool {
        let Some(memory_in_use) = self.options.memory_in_use else {
            return false;
        };
        let held_bytes = memory_in_use();
        if held_bytes <= self.options.max_memory_bytes {
            return false;
        }
        self.findings.push(Finding {
            kind: FindingKind::MemoryCap,
            rank: None,
            iteration: None,
            op: None,
            stream: None,
            stands_for: RankSet::default(),
            message: format!(
                "the simulation held {} of memory, over the cap of {} (--max-memory), after {} events at simulated time {:.3} s; the run was stopped there",
                crate::units::format_size(held_bytes),
                crate::units::format_size(self.options.max_memory_bytes),
                self.events_processed,
                self.now_ns as f64 / 1e9
            ),
        });
        true
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
            if let Some(&at_ns) = dumped_at.get(&logged_as) {
                let dump =
                    flight_recorder::dump(scenario, &group_ranks, rank, at_ns, &t.collectives);
                timeline.flight_recorder.push(dump);
            }
            // Records of what never happened (a deadlock) are dropped; findings describe them.
            // A collective whose kernel an abort ended never moved data: it did not happen
            // either (R27).
            t.kernels.retain(|k| k.end_ns != NEVER);
            t.collectives.retain(|c| {
                c.end_ns != NEVER
                    && c.data_start_ns != NEVER
                    && c.wait.is_none_or(|w| w.released_ns != NEVER)
            });
            t.marks.retain(|m| m.gpu_ns != NEVER);
            t.stream_waits.retain(|w| w.released_ns != NEVER);
            t.host.retain(|h| h.end_ns != NEVER);
            // A process nothing ended exited cleanly when its program returned, or runs on.
            let last_return_ns = t.host.iter().map(|h| h.end_ns).max();
            t.end = Some(state.end.unwrap_or(match state.blocked {
                Blocked::Done => ProcessEnd {
                    status: ExitStatus::Clean,
                    at_ns: Some(last_return_ns.unwrap_or(0)),
                },
                _ => ProcessEnd {
                    status: ExitStatus::Running,
                    at_ns: None,
                },
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

/// The collective and group of a collective or barrier op.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::parse;

    const TWO_RANKS: &str = "torch = \"2.12\"\n[cluster]\nranks = 2\n[groups.world]\neager_init = true\n[tensors]\nx = \"1MiB\"\n";

    #[test]
    fn a_dropped_work_leaves_the_shelf_at_the_next_collective_a_held_one_at_wait_r18() {
        // x's all_reduce ends ~50 ms in; the host, a second later, calls the next collective on
        // the group. A Work the program dropped lets go of x there, although the simulation
        // had not yet reached the host's time when the host got there; a Work still held by
        // its name keeps x (PyTorch 2.11, docs/torch.md#unwaited-works).
        let text = |work: &str| {
            format!(
                "[cluster]\nranks = 1\n[groups.world]\neager_init = true\n\
                 [tensors]\nx = \"64MiB\"\nfresh = \"64MiB\"\ny = \"512KiB\"\n\
                 [[op]]\nalloc = \"x\"\n[[op]]\ngpu_sleep_us = 50000\n\
                 [[op]]\nall_reduce = \"x\"\nasync_op = true\n{work}[[op]]\nfree = \"x\"\n\
                 [[op]]\nhost_sleep_us = 1000000\n[[op]]\nalloc = \"y\"\n[[op]]\nall_reduce = \"y\"\n\
                 [[op]]\nfree = \"y\"\n[[op]]\nalloc = \"fresh\"\n[[op]]\nfree = \"fresh\"\n"
            )
        };
        let peak_allocated = |work: &str| {
            let timeline = simulate(&parse("shelf.toml", &text(work)).unwrap());
            timeline.ranks[0].memory.peak_allocated_bytes
        };
        assert_eq!(peak_allocated(""), (64 << 20) + (512 << 10));
        assert_eq!(peak_allocated("work = \"w\"\n"), (128 << 20));
    }

    #[test]
    fn a_collective_call_costs_more_the_longer_since_the_previous_one() {
        // Warm 20 µs within 30 µs of the previous call's return, cold 200 µs from 30 ms on and
        // for the first call; 3 ms after the previous call is two thirds of the way (log).
        let text = format!(
            "{TWO_RANKS}[host]\ncollective_us = 20\ncollective_tail_us = 0\ncollective_cold_us = 200\n\
             [[op]]\nall_reduce = \"x\"\n[[op]]\nall_reduce = \"x\"\n[[op]]\nhost_sleep_us = 3000\n\
             [[op]]\nall_reduce = \"x\"\n[[op]]\nhost_sleep_us = 50000\n[[op]]\nall_reduce = \"x\"\n"
        );
        let timeline = simulate(&parse("w.toml", &text).unwrap());
        let calls_us: Vec<u64> = timeline.ranks[0]
            .collectives
            .iter()
            .map(|c| (c.host_end_ns - c.host_start_ns) / 1_000)
            .collect();
        assert_eq!(calls_us, [200, 20, 140, 200]);
    }

    #[test]
    fn a_straggler_makes_the_early_kernel_spin_r16() {
        // Rank 1 arrives 500 µs late: rank 0's kernel starts at launch and spins until then.
        let text = format!(
            "{TWO_RANKS}[[perturb]]\nranks = [1]\nbefore = \"ar\"\nhost_delay_us = 500\n[[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\n"
        );
        let timeline = simulate(&parse("s.toml", &text).unwrap());
        let early = &timeline.ranks[0].collectives[0];
        let late = &timeline.ranks[1].collectives[0];
        assert_eq!(early.last_rank, Some(1));
        assert_eq!(late.data_start_ns, late.kernel_start_ns);
        assert_eq!(early.data_start_ns - early.kernel_start_ns, 500_000);
        assert_eq!(early.end_ns, late.end_ns);
    }

    #[test]
    fn wait_with_a_timeout_raises_at_the_first_poll_past_it_r15() {
        // Rank 0 waits 10 ms for a collective rank 1 joins after 50 ms. Call at 0, kernel
        // enqueued at 20 µs, returns at 30 µs; wait() costs 4 µs, first poll at 34 µs, then
        // every 1 ms: the first poll past enqueue + 10 ms (R26's clock) is 34 µs + 10 ms,
        // 10.014 ms after the enqueue.
        let text = format!(
            "{TWO_RANKS}[[perturb]]\nranks = [1]\nbefore = \"ar\"\nhost_delay_us = 50000\n[[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\nasync_op = true\nwork = \"w\"\n[[op]]\nwait = \"w\"\ntimeout_ms = 10\n"
        );
        let timeline = simulate(&parse("t.toml", &text).unwrap());
        // Rank 0's process raises, so its kernel never meets rank 1's: rank 1 times out too.
        let finding = timeline
            .findings
            .iter()
            .find(|f| f.rank == Some(0))
            .expect("rank 0 raised");
        assert_eq!(finding.kind, FindingKind::WaitTimeout);
        assert_eq!(finding.rank, Some(0));
        // The Work as PyTorch prints it, the same text the watchdog and hw use: 1 MiB of f32.
        assert!(
            finding.message.contains(
                "WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=262144, NumelOut=262144, Timeout(ms)=10)"
            ),
            "{}",
            finding.message
        );
        assert!(finding.message.contains("10.014 ms"), "{}", finding.message);
        let wait_call = timeline.ranks[0].host.last().unwrap();
        assert_eq!(wait_call.end_ns, 10_034_000);
    }

    #[test]
    fn a_batch_that_times_out_is_named_as_the_coalesced_work_it_is() {
        // Rank 1 hangs before the batch: rank 0's watchdog catches the batch's one Work.
        let text = "[cluster]\nranks = 2\n[groups.world]\neager_init = true\ntimeout_s = 1\n[tensors]\na = \"1MiB\"\nb = \"1MiB\"\n\
                    [[op]]\nlabel = \"ring\"\nbatch_isend_irecv = [{ send = \"a\", shift = 1 }, { recv = \"b\", shift = -1 }]\n\
                    [[fault]]\nranks = [1]\nat = \"ring\"\nkind = \"hang\"\n";
        let timeline = simulate(&parse("b.toml", text).unwrap());
        let timeout = timeline
            .findings
            .iter()
            .find(|f| f.kind == FindingKind::WatchdogTimeout && f.rank == Some(0))
            .expect("rank 0's watchdog times out");
        assert!(
            timeout.message.contains("OpType=COALESCED"),
            "{}",
            timeout.message
        );
    }

    #[test]
    fn a_launch_onto_a_full_stream_blocks_the_host_until_a_kernel_ends() {
        // A 1 ms sleep, then five 1 µs kernels on the same stream; the stream holds 4 commands:
        // the sleep and three launch at once, the fourth launch returns when the sleep ends.
        let ops = "[[op]]\nkernel = { us = 1 }\n".repeat(5);
        let text =
            |depth: &str| format!("{TWO_RANKS}[host]\n{depth}[[op]]\ngpu_sleep_us = 1000\n{ops}");
        let timeline = simulate(&parse("q.toml", &text("launch_queue_depth = 4\n")).unwrap());
        let rank = &timeline.ranks[0];
        let sleep_end_ns = rank.kernels[0].end_ns;
        assert_eq!(rank.host.len(), 6);
        assert!(rank.host[3].end_ns < 100_000, "{:?}", rank.host[3]);
        assert!(rank.host[4].end_ns >= sleep_end_ns, "{:?}", rank.host[4]);
        assert!(rank.kernels[4].enqueue_ns >= sleep_end_ns);
        // The default depth (1,022 measured on an H200) never fills with six kernels.
        let unbounded = simulate(&parse("q.toml", &text("")).unwrap());
        assert!(unbounded.ranks[0].host[5].end_ns < 100_000);
        assert!(unbounded.findings.is_empty(), "{:?}", unbounded.findings);
    }

    #[test]
    fn a_launch_behind_kernels_that_never_end_is_a_named_deadlock() {
        // Rank 1 never joins: rank 0's synchronous all_reduce spins for ever on the current
        // stream (where 2.12 runs an `async_op=False` collective), behind its input-ready
        // record; with room for two commands, the first GEMM's launch never returns.
        let text = format!(
            "{TWO_RANKS}[host]\nlaunch_queue_depth = 2\n[env]\nTORCH_NCCL_ASYNC_ERROR_HANDLING = 0\n[[op]]\nlabel = \"ar\"\nranks = [0]\nall_reduce = \"x\"\nstream = \"default\"\n[[op]]\ngemm = [512, 512, 512]\n[[op]]\nlabel = \"stuck\"\ngemm = [512, 512, 512]\n"
        );
        let timeline = simulate(&parse("d.toml", &text).unwrap());
        let deadlock = timeline
            .findings
            .iter()
            .find(|f| f.kind == FindingKind::Deadlock && f.message.contains("launch queue"))
            .unwrap_or_else(|| panic!("{:?}", timeline.findings));
        assert_eq!(deadlock.rank, Some(0));
        assert!(deadlock.message.contains("gemm#1"), "{}", deadlock.message);
    }

    #[test]
    fn a_wait_that_completes_in_time_does_not_raise() {
        let text = format!(
            "{TWO_RANKS}[[op]]\nall_reduce = \"x\"\nasync_op = true\nwork = \"w\"\n[[op]]\nwait = \"w\"\ntimeout_ms = 10\n"
        );
        let timeline = simulate(&parse("t.toml", &text).unwrap());
        assert!(timeline.findings.is_empty(), "{:?}", timeline.findings);
        // A timeout makes wait() poll (R15): the host returns at the first poll after the end.
        let record = &timeline.ranks[0].collectives[0];
        let wait = record.wait.unwrap();
        assert!(wait.host_end_ns >= record.end_ns);
        assert!(wait.completed_at_return);
    }

    #[test]
    fn a_one_rank_collective_enqueues_no_kernel_and_ignores_a_full_gpu_r24() {
        // NCCL's one-rank path launches nothing for an all_reduce: behind a GEMM that holds
        // every SM on another stream, it still takes only the floor (PyTorch 2.11 on an H200:
        // 5.3 µs, docs/fidelity.md). An all_to_all becomes a send/recv to itself, a kernel,
        // and waits for SMs.
        let text = |collective: &str| {
            format!(
                "torch = \"2.12\"\n[cluster]\nranks = 1\n[network]\nkernel_floor_us = 2\n[groups.world]\neager_init = true\n[tensors]\nx = \"1MiB\"\n[streams]\nside = {{}}\n[[op]]\nstream = \"side\"\ngemm = [8192, 8192, 8192]\n[[op]]\nhost_sleep_us = 100\n[[op]]\nlabel = \"c\"\n{collective} = \"x\"\nasync_op = true\nwork = \"w\"\n[[op]]\nwait = \"w\"\n"
            )
        };
        let run = |collective: &str| {
            let timeline = simulate(&parse("one.toml", &text(collective)).unwrap());
            let rank = &timeline.ranks[0];
            let gemm = rank
                .kernels
                .iter()
                .find(|k| k.class == KernelClass::Compute)
                .copied()
                .unwrap();
            (gemm, rank.collectives[0].clone())
        };
        let (gemm, all_reduce) = run("all_reduce");
        assert!(all_reduce.kernel_start_ns < gemm.end_ns);
        assert_eq!(all_reduce.end_ns - all_reduce.kernel_start_ns, 2_000);
        let (gemm, all_to_all) = run("all_to_all");
        assert!(all_to_all.kernel_start_ns > gemm.start_ns + (gemm.end_ns - gemm.start_ns) / 2);
    }

    #[test]
    fn a_synchronous_collective_on_the_current_stream_costs_sync_collective_us_r11() {
        let host_call_ns = |torch: &str, sync_us: &str| {
            let text = format!(
                "torch = \"{torch}\"\n[cluster]\nranks = 2\n[groups.world]\neager_init = true\n[tensors]\nx = \"1MiB\"\n[host]\ncollective_us = 30\ncollective_tail_us = 5\n{sync_us}\n[[op]]\nall_reduce = \"x\"\n"
            );
            let timeline = simulate(&parse("s.toml", &text).unwrap());
            let c = &timeline.ranks[0].collectives[0];
            c.host_end_ns - c.host_start_ns
        };
        assert_eq!(host_call_ns("2.12", ""), 30_000);
        assert_eq!(host_call_ns("2.12", "sync_collective_us = 20"), 20_000);
        // Under 2.5 the call goes through the internal stream and waits: the cost is the async
        // call's (and its wait's).
        assert_eq!(
            host_call_ns("2.5", "sync_collective_us = 20"),
            host_call_ns("2.5", "")
        );
        let error = parse(
            "s.toml",
            &format!("{TWO_RANKS}[host]\ncollective_tail_us = 5\nsync_collective_us = 4\n"),
        )
        .unwrap_err()
        .to_string();
        assert!(error.contains("host.sync_collective_us"), "{error}");
        assert!(error.contains("s.toml:"), "{error}");
    }

    #[test]
    fn the_input_ready_event_is_recorded_at_the_works_creation_enqueue_plus_tail_before_the_return_r10a(
    ) {
        let call = |torch: &str, enqueue: &str| {
            let text = format!(
                "torch = \"{torch}\"\n[cluster]\nranks = 2\n[groups.world]\neager_init = true\n[tensors]\nx = \"1MiB\"\n[host]\ncollective_us = 30\nsync_collective_us = 20\ncollective_tail_us = 5\n{enqueue}\n[[op]]\nall_reduce = \"x\"\nasync_op = true\nwork = \"w\"\n[[op]]\nwait = \"w\"\n[[op]]\nall_reduce = \"x\"\n"
            );
            let timeline = simulate(&parse("e.toml", &text).unwrap());
            timeline.ranks[0].collectives.clone()
        };
        for torch in ["2.12", "2.5"] {
            let at_launch = call(torch, "");
            let at_work = call(torch, "collective_enqueue_us = 4");
            for (launch, work) in at_launch.iter().zip(&at_work) {
                // The call costs the same and launches at the same time; the input-ready point
                // moves 4 µs earlier.
                assert_eq!(
                    work.host_end_ns - work.host_start_ns,
                    launch.host_end_ns - launch.host_start_ns
                );
                assert_eq!(launch.input_ready_ns - work.input_ready_ns, 4_000);
                assert_eq!(work.kernel_start_ns, launch.kernel_start_ns);
            }
            // The async call returns the tail after the launch, which follows the input-ready
            // point by the enqueue.
            let (launch, work) = (&at_launch[0], &at_work[0]);
            assert_eq!(launch.host_end_ns - launch.input_ready_ns, 5_000);
            assert_eq!(work.host_end_ns - work.input_ready_ns, 9_000);
        }
        // On the current stream (2.12) the synchronous call keeps its own cost.
        let sync = &call("2.12", "collective_enqueue_us = 4")[1];
        assert!(!sync.async_op);
        assert_eq!(sync.host_end_ns - sync.host_start_ns, 20_000);
        assert_eq!(sync.host_end_ns - sync.input_ready_ns, 9_000);
        let error = parse(
            "e.toml",
            &format!("{TWO_RANKS}[host]\ncollective_us = 30\nsync_collective_us = 20\ncollective_tail_us = 5\ncollective_enqueue_us = 16\n"),
        )
        .unwrap_err()
        .to_string();
        assert!(
            error.contains("host.sync_collective_us")
                && error.contains("host.collective_enqueue_us"),
            "{error}"
        );
        assert!(error.contains("e.toml:"), "{error}");
    }

    #[test]
    fn the_programs_gap_before_each_op_moves_every_later_call() {
        let host_starts = |gap: &str| {
            let text = format!(
                "{TWO_RANKS}[host]\nlaunch_us = 5\n{gap}\n[[op]]\ngpu_sleep_us = 10\n[[op]]\ngpu_sleep_us = 10\n[[op]]\ngpu_sleep_us = 10\n"
            );
            let timeline = simulate(&parse("g.toml", &text).unwrap());
            let starts: Vec<u64> = timeline.ranks[0].host.iter().map(|h| h.start_ns).collect();
            starts
        };
        assert_eq!(host_starts(""), [0, 5_000, 10_000]);
        assert_eq!(host_starts("op_gap_us = 3"), [3_000, 11_000, 19_000]);
    }

    #[test]
    fn compute_after_the_boost_window_runs_at_the_sustained_clock() {
        // Four 1 ms kernels; the GPU settles after 2 ms of compute, then runs at 0.8 of its
        // rate: the third and fourth take 1.25 ms.
        let durations = |cluster: &str| {
            let text = format!(
                "torch = \"2.12\"\n[cluster]\nranks = 1\n{cluster}\n[[op]]\nkernel = {{ us = 1000, sms = 132 }}\n[[op]]\nkernel = {{ us = 1000, sms = 132 }}\n[[op]]\nkernel = {{ us = 1000, sms = 132 }}\n[[op]]\nkernel = {{ us = 1000, sms = 132 }}\n"
            );
            let timeline = simulate(&parse("b.toml", &text).unwrap());
            let ends: Vec<u64> = timeline.ranks[0]
                .kernels
                .iter()
                .map(|k| k.end_ns - k.start_ns)
                .collect();
            ends
        };
        assert_eq!(durations(""), [1_000_000; 4]);
        assert_eq!(
            durations("boost_ms = 2\nsustained_clock = 0.8"),
            [1_000_000, 1_000_000, 1_250_000, 1_250_000]
        );
        let error = parse("b.toml", "[cluster]\nsustained_clock = 1.5\n")
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("cluster.sustained_clock") && error.contains("b.toml:2:"),
            "{error}"
        );
    }

    #[test]
    fn a_cold_calls_nccl_launch_latency_is_slowed_as_the_call_is() {
        // One rank, timed Works on an idle stream: PyTorch's duration is the floor plus the
        // launch latency. The first call is cold (100 µs against 20 µs warm: 5×), the second
        // warm.
        let text = "torch = \"2.12\"\n[cluster]\nranks = 1\n[network]\nkernel_floor_us = 1\n[host]\ncollective_us = 20\ncollective_tail_us = 5\ncollective_cold_us = 100\nsync_collective_us = 20\nnccl_launch_latency_us = 2\n[env]\nTORCH_NCCL_ENABLE_TIMING = 1\n[groups.world]\neager_init = true\n[tensors]\nx = \"1KiB\"\n[[op]]\nall_reduce = \"x\"\n[[op]]\nall_reduce = \"x\"\n";
        let timeline = simulate(&parse("c.toml", text).unwrap());
        let durations: Vec<i64> = timeline.ranks[0]
            .collectives
            .iter()
            .map(|c| c.duration_ns())
            .collect();
        assert_eq!(durations, [1_000 + 10_000, 1_000 + 2_000]);
    }

    #[test]
    fn a_slower_nccl_launch_lets_the_gemm_take_the_sms_first_r22() {
        // The all_reduce is launched first, but its kernel is ready 20 µs after the launch; the
        // GEMM, launched 15 µs later with a 3 µs latency, starts first and holds every SM, so
        // the NCCL kernel gets SMs only in the GEMM's tail.
        let text = format!(
            "{TWO_RANKS}[host]\nnccl_launch_latency_us = 20\n[[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\nasync_op = true\nwork = \"w\"\n[[op]]\ngemm = [8192, 8192, 8192]\n[[op]]\nwait = \"w\"\n"
        );
        let timeline = simulate(&parse("l.toml", &text).unwrap());
        let rank = &timeline.ranks[0];
        let gemm = rank
            .kernels
            .iter()
            .find(|k| k.class == KernelClass::Compute)
            .unwrap();
        let nccl = &rank.collectives[0];
        assert!(gemm.start_ns < nccl.kernel_start_ns);
        assert!(nccl.kernel_start_ns > gemm.start_ns + (gemm.end_ns - gemm.start_ns) / 2);
    }

    #[test]
    fn a_stream_wait_latency_lets_a_queued_gemm_start_before_the_nccl_kernel_r22() {
        // The GPU is behind the host (a 2 ms sleep): the all_reduce's input-ready wait and the
        // GEMM queued behind the sleep become runnable at the sleep's end. Without a latency
        // the NCCL kernel, launched first, takes its SMs first; with one, the GEMM does.
        let text = format!(
            "{TWO_RANKS}[[op]]\ngpu_sleep_us = 2000\n[[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\nasync_op = true\nwork = \"w\"\n[[op]]\ngemm = [8192, 8192, 8192]\n[[op]]\nwait = \"w\"\n"
        );
        let starts = |text: &str| {
            let timeline = simulate(&parse("w.toml", text).unwrap());
            let rank = &timeline.ranks[0];
            let sleep_end = rank.kernels[0].end_ns;
            let gemm = rank
                .kernels
                .iter()
                .rfind(|k| k.class == KernelClass::Compute);
            let nccl = &rank.collectives[0];
            let wait = &rank.stream_waits[0];
            (
                sleep_end,
                gemm.unwrap().start_ns,
                nccl.kernel_start_ns,
                wait.released_ns,
            )
        };
        let (sleep_end, gemm, nccl, released) = starts(&text);
        assert_eq!((gemm, nccl, released), (sleep_end, sleep_end, sleep_end));
        let late = text.replace(
            "[[op]]\ngpu",
            "[host]\nstream_wait_latency_us = 3\n[[op]]\ngpu",
        );
        let (sleep_end, gemm, nccl, released) = starts(&late);
        assert_eq!((gemm, released), (sleep_end, sleep_end + 3_000));
        assert!(
            nccl > gemm + 500_000,
            "the NCCL kernel waits for the GEMM's tail"
        );
    }

    #[test]
    fn wider_gemm_tiles_give_the_nccl_kernel_a_longer_tail_r22() {
        // 8192² outputs: 4096 blocks of 128×128 are 31.03 waves on 132 SMs, so the last wave
        // (4 blocks) frees SMs for about 1/31 of the GEMM; 2048 blocks of 128×256 are 15.5
        // waves and the last (68 blocks) frees 64 SMs for about 1/15.5 of it.
        let text = format!(
            "{TWO_RANKS}[host]\nstream_wait_latency_us = 3\n[[op]]\ngpu_sleep_us = 2000\n[[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\nasync_op = true\nwork = \"w\"\n[[op]]\ngemm = [8192, 8192, 8192]\n[[op]]\nwait = \"w\"\n"
        );
        let lead_ns = |text: &str| {
            let timeline = simulate(&parse("t.toml", text).unwrap());
            let rank = &timeline.ranks[0];
            let gemm = rank
                .kernels
                .iter()
                .rfind(|k| k.class == KernelClass::Compute);
            let gemm = gemm.unwrap();
            let waves = (gemm.end_ns - gemm.start_ns) as f64;
            (gemm.end_ns - rank.collectives[0].kernel_start_ns) as f64 / waves
        };
        let narrow = lead_ns(&text);
        let wide = lead_ns(&text.replace("[cluster]", "[cluster]\ngemm_tile_n = 256"));
        // At least one wave ahead of the GEMM's end (a little more: the NCCL kernel's 16 SMs
        // slow the GEMM's last blocks).
        assert!((1.0 / 31.03..1.3 / 31.03).contains(&narrow), "{narrow}");
        assert!((1.0 / 15.52..1.3 / 15.52).contains(&wide), "{wide}");
    }

    #[test]
    fn ranks_compute_at_their_own_drawn_speed() {
        let text = "seed = 3\n[cluster]\nranks = 4\nrank_speed_spread_pct = 5\n[[op]]\ngemm = [4096, 4096, 4096]\n";
        let durations = |text: &str| -> Vec<u64> {
            simulate(&parse("s.toml", text).unwrap())
                .ranks
                .iter()
                .map(|r| r.kernels[0].end_ns - r.kernels[0].start_ns)
                .collect()
        };
        let first = durations(text);
        assert_eq!(first, durations(text), "seeded");
        assert!(first.iter().any(|&d| d != first[0]), "{first:?}");
        let even =
            durations(&text.replace("rank_speed_spread_pct = 5", "rank_speed_spread_pct = 0"));
        assert!(even.iter().all(|&d| d == even[0]));
    }

    #[test]
    fn stream_sync_blocks_the_host_for_the_backlog_r14() {
        // A 2 ms sleep launched at 5 µs (launch cost), on the GPU from 8 µs; stream_sync returns
        // 5 µs (sync cost) after it ends.
        let text = "[cluster]\nranks = 1\n[[op]]\ngpu_sleep_us = 2000\n[[op]]\nstream_sync = \"current\"\n";
        let timeline = simulate(&parse("s.toml", text).unwrap());
        let sync = timeline.ranks[0].host[1];
        assert_eq!(sync.end_ns, 8_000 + 2_000_000 + 5_000);
    }
}
