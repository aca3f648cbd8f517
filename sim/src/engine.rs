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
//! Events are processed in time order from a binary heap keyed by (time, sequence number), so
//! equal times pop in the order they were scheduled and a run is deterministic. If the queue
//! runs dry while a host or a stream still has work, the run ends with a deadlock finding naming
//! the ranks, ops and streams that are stuck.

use crate::cost::gemm_ns;
use crate::gpu::{KernelShape, SmScheduler};
use crate::lifetime::{AllocStep, TensorMemory};
use crate::nccl::{plan_collective, CollectivePlan};
use crate::race::{AccessKind, Point, RaceDetector};
use crate::random::{collective_rng, jittered_ns, mix_seed, rank_rng};
use crate::scenario::{Batch, TensorId};
use crate::scenario::{CollectiveKind, GroupId, OpKind, Priority, Scenario, WorkId};
use crate::timeline::*;
use rand_chacha::ChaCha8Rng;
use rustc_hash::FxHashMap;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use watchdog::{Failures, FaultEffect, WatchdogStep};

mod watchdog;

/// Sentinel for "has not happened".
const NEVER: u64 = u64::MAX;

/// Simulates `scenario` to completion (or to a deadlock or the time cap).
pub fn simulate(scenario: &Scenario) -> Timeline {
    simulate_with(scenario, Options::default()).0
}

/// What a simulation does besides the timeline.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// Run the race detector (R21).
    pub race_detector: bool,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            race_detector: true,
        }
    }
}

/// Simulates with `options`; also returns the number of events processed (for the benchmark).
pub fn simulate_with(scenario: &Scenario, options: Options) -> (Timeline, u64) {
    let mut engine = Engine::new(scenario, options);
    engine.run();
    let events = engine.events_processed;
    (engine.finish(), events)
}

type Instance = u32;

#[derive(Debug, Clone, Copy)]
enum GpuItem {
    /// An event record: fires when the stream reaches it (R5).
    Record { instance: Instance },
    /// `cudaStreamWaitEvent`: the stream holds until the instance fired (R5).
    WaitFor {
        instance: Instance,
        stream_wait: u32,
    },
    /// A kernel of known duration.
    Kernel { duration_ns: u64, kernel: u32 },
    /// An NCCL kernel: rendezvous with the group's other ranks (R16), then α-β time (R24).
    Collective {
        kernel: u32,
        rendezvous: u32,
        collective: u32,
    },
}

#[derive(Debug, Clone, Copy)]
struct QueuedItem {
    item: GpuItem,
    /// Earliest start: the host time of the call plus, for kernels, the launch latency.
    ready_ns: u64,
}

#[derive(Default)]
struct StreamState {
    queue: VecDeque<QueuedItem>,
    /// A kernel at the head asked for SMs or is running.
    busy: bool,
    /// An `Advance` is already scheduled for this time.
    wake_at_ns: Option<u64>,
    /// Bumped whenever the head kernel's end is rescheduled; stale `KernelEnd`s are skipped.
    end_version: u32,
    /// Runs at high priority (R7).
    high_priority: bool,
}

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
    /// Blocking wait (R15) or `wait(timeout)`: polls at `first_poll_ns + k·poll_ns`, raising at
    /// the first poll at or after `deadline_ns`.
    Polling {
        first_poll_ns: u64,
        poll_ns: u64,
        deadline_ns: u64,
    },
    /// Lazy communicator init (R8): waiting for the group's other ranks.
    CommInit,
    /// Waiting for the simulation to catch up with the host's time, then running the same op
    /// again (an allocation that must see which recordStream events have passed, R19).
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

struct RankState {
    host_ns: u64,
    iteration: u32,
    pc: usize,
    blocked: Blocked,
    /// Op the host is blocked in, for deadlock findings.
    blocked_op: usize,
    /// Counts the host's resumptions, so that a stale timeout is recognised.
    generation: u64,
    streams: Vec<StreamState>,
    /// Local stream index of each group's internal NCCL stream (R9).
    group_stream: Vec<Option<u16>>,
    /// Per group: collectives issued so far (the next SeqNum is this plus one).
    group_seq: Vec<u64>,
    group_initialised: Vec<bool>,
    /// Fire time of every event instance this rank recorded.
    fired_ns: Vec<u64>,
    /// Stream on which each instance was recorded.
    instance_stream: Vec<u16>,
    waiters: FxHashMap<Instance, Vec<Waiter>>,
    /// Latest instance of each named event.
    event_instance: Vec<Instance>,
    /// Per Work name: (collective record, end instance) of the latest creation.
    work_state: Vec<Option<(u32, Instance)>>,
    timeline: RankTimeline,
    scratch: Scratch,
    /// The GPU's SMs and the kernels sharing them (R7, R22).
    gpu: SmScheduler,
    /// The pending `SmTransfer`, if one is scheduled.
    transfer_at_ns: Option<u64>,
    /// The rank's random stream: straggler delays and kernel jitter, in program order.
    rng: ChaCha8Rng,
    /// (iteration, op) whose perturbations were applied, so that an op re-run after a
    /// communicator init is not delayed twice.
    perturbed: Option<(u32, usize)>,
    /// The caching allocator and the lifetime of each tensor (R17–R20).
    memory: MemoryState,
    /// The next call of a batched collective op to issue after a communicator init (R25).
    batch_next: usize,
    /// This GPU's compute time relative to the model's (`cluster.rank_speed_spread_pct`).
    compute_speed: f64,
    /// Happens-before of this rank's host and streams, for data races (R21).
    race: RaceDetector,
}

/// Where each tensor lives and what keeps its block from being reused (R17–R20), and the
/// state of an allocation that waits for the device before releasing the cache.
struct MemoryState {
    books: TensorMemory<Instance>,
    /// The op resumes by running again (a cache release waited for the device to drain).
    retry: bool,
    /// Start of a call that runs again, for its host record.
    retry_start_ns: Option<u64>,
    /// A cache release is waiting for the device to drain (R20).
    awaiting_idle: bool,
}

impl MemoryState {
    fn new(scenario: &Scenario) -> MemoryState {
        let mut books = TensorMemory::new(scenario);
        // The up-front allocations cost no simulated time: they happen before the program.
        books.static_steps();
        MemoryState {
            books,
            retry: false,
            retry_start_ns: None,
            awaiting_idle: false,
        }
    }
}

/// Instances whose fire times fill Timeline fields once the run ends.
#[derive(Default)]
struct Scratch {
    collective_input_ready: Vec<Instance>,
    collective_end: Vec<Instance>,
    collective_kernel: Vec<u32>,
    collective_wait_stream_wait: Vec<u32>,
    mark_instance: Vec<Instance>,
    stream_wait_instance: Vec<Instance>,
    query_instance: Vec<Instance>,
}

struct Rendezvous {
    group: GroupId,
    collective: CollectiveKind,
    arrived: u32,
    last_arrival: (u64, u32),
    /// (rank, stream) of every arrived kernel.
    members: Vec<(u32, u16)>,
    /// The op and sequence number, for findings.
    op: usize,
    seq: u64,
    iteration: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    Advance {
        rank: u32,
        stream: u16,
    },
    KernelEnd {
        rank: u32,
        stream: u16,
        version: u32,
    },
    /// SMs move from an elastic kernel to a waiting one (see `gpu`).
    SmTransfer {
        rank: u32,
    },
    HostResume {
        rank: u32,
        at_ns: u64,
    },
    /// A polling `wait()` reaches its deadline; `generation` tells whether the host is still
    /// in that wait.
    WaitTimeout {
        rank: u32,
        generation: u64,
    },
    /// A step of a group's watchdog or heartbeat monitor, or of the store rendezvous
    /// (R26–R29, `watchdog`).
    Watchdog {
        rank: u32,
        group: u16,
        step: WatchdogStep,
    },
}

/// How `wait()` treats the host (R12, R15).
#[derive(Debug, Clone, Copy)]
enum WaitMode {
    /// The default: block the current stream, return at once.
    StreamOnly,
    /// Also poll `is_completed()` on the host, raising at the timeout if there is one.
    Poll { timeout_ns: Option<u64> },
}

struct Engine<'s> {
    scenario: &'s Scenario,
    now_ns: u64,
    sequence: u64,
    queue: BinaryHeap<Reverse<(u64, u64, Event)>>,
    ranks: Vec<RankState>,
    rendezvous: Vec<Option<Rendezvous>>,
    /// (group, seq) → index into `rendezvous`.
    rendezvous_index: FxHashMap<(GroupId, u64), u32>,
    free_rendezvous: Vec<u32>,
    /// Lazy communicator init: per group, ranks that arrived and their host times.
    comm_init: Vec<Vec<(u32, u64)>>,
    /// Per op: the perturbations applying to it.
    perturbations_by_op: Vec<Vec<usize>>,
    gemm_ns_by_op: Vec<u64>,
    /// Per collective or barrier op: how NCCL runs it (channels, duration; R22, R24).
    /// How NCCL runs each (collective or barrier op, call size) (R22, R24, R25).
    plans: FxHashMap<(usize, u64), CollectivePlan>,
    findings: Vec<Finding>,
    /// Faults, watchdogs, heartbeat monitors (R26–R29).
    failures: Failures,
    events_processed: u64,
}

impl<'s> Engine<'s> {
    fn new(scenario: &'s Scenario, options: Options) -> Self {
        let user_streams = scenario.streams.len();
        let ranks = (0..scenario.cluster.ranks)
            .map(|rank| {
                let mut streams_info: Vec<StreamInfo> = scenario
                    .streams
                    .iter()
                    .enumerate()
                    .map(|(index, stream)| StreamInfo {
                        name: stream.name.clone(),
                        kind: if index == 0 {
                            StreamKind::Default
                        } else {
                            StreamKind::User
                        },
                        high_priority: stream.priority == Priority::High,
                    })
                    .collect();
                let mut group_stream = vec![None; scenario.groups.len()];
                for (group_id, group) in scenario.groups.iter().enumerate() {
                    if group.ranks.binary_search(&rank).is_ok() {
                        group_stream[group_id] = Some(streams_info.len() as u16);
                        streams_info.push(StreamInfo {
                            name: format!("nccl:{}", group.name),
                            kind: StreamKind::Nccl,
                            high_priority: scenario.group_stream_high_priority(group_id),
                        });
                    }
                }
                let stream_count = streams_info.len();
                let streams = streams_info
                    .iter()
                    .map(|info| StreamState {
                        high_priority: info.high_priority,
                        ..StreamState::default()
                    })
                    .collect();
                RankState {
                    host_ns: 0,
                    iteration: 0,
                    pc: 0,
                    blocked: Blocked::Running,
                    blocked_op: 0,
                    generation: 0,
                    streams,
                    group_stream,
                    group_seq: vec![0; scenario.groups.len()],
                    group_initialised: scenario.groups.iter().map(|g| g.eager_init).collect(),
                    fired_ns: Vec::new(),
                    instance_stream: Vec::new(),
                    waiters: FxHashMap::default(),
                    event_instance: vec![0; scenario.events.len()],
                    work_state: vec![None; scenario.works.len()],
                    timeline: RankTimeline {
                        rank,
                        streams: streams_info,
                        ..RankTimeline::default()
                    },
                    scratch: Scratch::default(),
                    gpu: SmScheduler::new(scenario.cluster.gpu.sms),
                    transfer_at_ns: None,
                    rng: rank_rng(scenario.seed, rank),
                    perturbed: None,
                    memory: MemoryState::new(scenario),
                    batch_next: 0,
                    compute_speed: rank_speed(scenario, rank),
                    race: if options.race_detector {
                        RaceDetector::new(stream_count)
                    } else {
                        RaceDetector::disabled(stream_count)
                    },
                }
            })
            .collect();
        debug_assert!(user_streams >= 1);
        let mut perturbations_by_op = vec![Vec::new(); scenario.ops.len()];
        for (index, perturbation) in scenario.perturbations.iter().enumerate() {
            perturbations_by_op[perturbation.before_op].push(index);
        }
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
            let Some((collective, group)) = collective_of(&op.kind) else {
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
            sequence: 0,
            queue: BinaryHeap::new(),
            ranks,
            rendezvous: Vec::new(),
            rendezvous_index: FxHashMap::default(),
            free_rendezvous: Vec::new(),
            comm_init: vec![Vec::new(); scenario.groups.len()],
            perturbations_by_op,
            gemm_ns_by_op,
            findings: Vec::new(),
            failures: Failures::new(scenario),
            events_processed: 0,
        }
    }

    fn schedule(&mut self, at_ns: u64, event: Event) {
        debug_assert!(
            at_ns >= self.now_ns,
            "causality: an event scheduled in the past"
        );
        self.sequence += 1;
        self.queue.push(Reverse((at_ns, self.sequence, event)));
    }

    fn run(&mut self) {
        for rank in 0..self.ranks.len() as u32 {
            self.run_host(rank);
        }
        while let Some(Reverse((at_ns, _, event))) = self.queue.pop() {
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
                    state.busy = false;
                    let kernel = match finished.item {
                        GpuItem::Kernel { kernel, .. } | GpuItem::Collective { kernel, .. } => {
                            kernel
                        }
                        _ => unreachable!("only kernels end"),
                    };
                    let rank_state = &mut self.ranks[rank as usize];
                    rank_state.timeline.kernels[kernel as usize].end_ns = at_ns;
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
                    let was = std::mem::replace(&mut state.blocked, Blocked::Running);
                    let retry = std::mem::take(&mut state.memory.retry);
                    // After a communicator init, a timer or a cache release the call itself
                    // runs again (pc unchanged).
                    if !matches!(was, Blocked::CommInit | Blocked::Timer) && !retry {
                        self.finish_blocking_call(rank);
                    }
                    self.run_host(rank);
                }
                Event::WaitTimeout { rank, generation } => self.wait_timed_out(rank, generation),
                Event::Watchdog { rank, group, step } => self.watchdog_step(rank, group, step),
            }
        }
        self.report_deadlocks();
    }

    // ---------------------------------------------------------------- GPU side

    fn new_instance(&mut self, rank: u32, stream: u16) -> Instance {
        let state = &mut self.ranks[rank as usize];
        state.fired_ns.push(NEVER);
        state.instance_stream.push(stream);
        (state.fired_ns.len() - 1) as Instance
    }

    /// Queues an item on a stream (R4) and returns its happens-before point (R21).
    fn push(&mut self, rank: u32, stream: u16, item: GpuItem, ready_ns: u64) -> Point {
        let state = &mut self.ranks[rank as usize];
        let point = state.race.enqueue(stream);
        match item {
            GpuItem::Record { instance } => state.race.record(instance, &point),
            GpuItem::WaitFor { instance, .. } => state.race.stream_waits(stream, instance),
            _ => {}
        }
        state.streams[stream as usize]
            .queue
            .push_back(QueuedItem { item, ready_ns });
        self.advance(rank, stream);
        point
    }

    /// Runs the head of a stream as far as it can go at the current time (R4).
    fn advance(&mut self, rank: u32, stream: u16) {
        loop {
            let now_ns = self.now_ns;
            let state = &mut self.ranks[rank as usize].streams[stream as usize];
            if state.busy {
                return;
            }
            let Some(head) = state.queue.front().copied() else {
                return;
            };
            if head.ready_ns > now_ns {
                if state.wake_at_ns != Some(head.ready_ns) {
                    state.wake_at_ns = Some(head.ready_ns);
                    self.schedule(head.ready_ns, Event::Advance { rank, stream });
                }
                return;
            }
            match head.item {
                GpuItem::Record { instance } => {
                    state.queue.pop_front();
                    self.fire(rank, instance);
                }
                GpuItem::WaitFor {
                    instance,
                    stream_wait,
                } => {
                    let rank_state = &mut self.ranks[rank as usize];
                    let fired_ns = rank_state.fired_ns[instance as usize];
                    if fired_ns == NEVER {
                        rank_state
                            .waiters
                            .entry(instance)
                            .or_default()
                            .push(Waiter::Stream { stream });
                        return;
                    }
                    let release_ns = fired_ns + self.scenario.host.stream_wait_latency_ns;
                    if release_ns > now_ns {
                        let state = &mut rank_state.streams[stream as usize];
                        if state.wake_at_ns != Some(release_ns) {
                            state.wake_at_ns = Some(release_ns);
                            self.schedule(release_ns, Event::Advance { rank, stream });
                        }
                        return;
                    }
                    rank_state.streams[stream as usize].queue.pop_front();
                    rank_state.timeline.stream_waits[stream_wait as usize].released_ns = now_ns;
                }
                GpuItem::Kernel {
                    duration_ns,
                    kernel,
                } => {
                    state.busy = true;
                    let high_priority = state.high_priority;
                    let shape = self.kernel_shape(rank, kernel, duration_ns);
                    self.ranks[rank as usize]
                        .gpu
                        .submit(now_ns, kernel, high_priority, shape);
                    self.rebalance(rank);
                    return;
                }
                GpuItem::Collective {
                    kernel, collective, ..
                } => {
                    state.busy = true;
                    let high_priority = state.high_priority;
                    let timeline = &self.ranks[rank as usize].timeline;
                    let op = timeline.kernels[kernel as usize].op as usize;
                    let bytes = timeline.collectives[collective as usize].bytes;
                    let shape = KernelShape::Collective {
                        channels: self.plan(op, bytes).channels,
                    };
                    self.ranks[rank as usize]
                        .gpu
                        .submit(now_ns, kernel, high_priority, shape);
                    self.rebalance(rank);
                    return;
                }
            }
        }
    }

    /// The plan of one call of a collective op: precomputed for the sizes the program issues,
    /// computed here for others (a rank that issues a different size, a mismatch fault).
    fn plan(&mut self, op: usize, size_bytes: u64) -> CollectivePlan {
        let scenario = self.scenario;
        self.plans
            .entry((op, size_bytes))
            .or_insert_with(|| {
                let (collective, group) =
                    collective_of(&scenario.ops[op].kind).expect("a collective op");
                plan_collective(
                    scenario,
                    &scenario.groups[group].ranks,
                    collective,
                    size_bytes,
                )
            })
            .clone()
    }

    /// How a kernel uses SMs: a GEMM fills the GPU in waves of `cluster.gemm_tile` blocks, a generic
    /// kernel holds its `sms`, a sleep (or a straggler's delay) one block (R22).
    fn kernel_shape(&self, rank: u32, kernel: u32, duration_ns: u64) -> KernelShape {
        let record = &self.ranks[rank as usize].timeline.kernels[kernel as usize];
        let sms = self.scenario.cluster.gpu.sms;
        match (record.class, &self.scenario.ops[record.op as usize].kind) {
            (KernelClass::Compute, OpKind::Gemm { m, n, .. }) => {
                let [tile_m, tile_n] = self.scenario.cluster.gemm_tile;
                let blocks = m.div_ceil(tile_m) * n.div_ceil(tile_n);
                KernelShape::elastic(duration_ns, sms, blocks)
            }
            (KernelClass::Compute, OpKind::Kernel { sms, .. }) => KernelShape::Rigid {
                sms: *sms,
                duration_ns,
            },
            _ => KernelShape::Rigid {
                sms: 1,
                duration_ns,
            },
        }
    }

    /// Applies the SM scheduler's decisions for `rank`: kernels that got SMs start (a
    /// collective's start is its arrival, R16), changed end times are rescheduled, and the
    /// next SM transfer is timed.
    fn rebalance(&mut self, rank: u32) {
        let now_ns = self.now_ns;
        let changes = self.ranks[rank as usize].gpu.rebalance(now_ns);
        for kernel in changes.started {
            let state = &mut self.ranks[rank as usize];
            let record = &mut state.timeline.kernels[kernel as usize];
            record.start_ns = now_ns;
            let stream = record.stream;
            if let Some(QueuedItem {
                item: GpuItem::Collective { rendezvous, .. },
                ..
            }) = state.streams[stream as usize].queue.front().copied()
            {
                self.arrive(rank, stream, rendezvous);
            }
        }
        for (kernel, end_ns) in changes.ends {
            let state = &mut self.ranks[rank as usize];
            let stream = state.timeline.kernels[kernel as usize].stream;
            let stream_state = &mut state.streams[stream as usize];
            stream_state.end_version += 1;
            let version = stream_state.end_version;
            if end_ns != u64::MAX {
                self.schedule(
                    end_ns,
                    Event::KernelEnd {
                        rank,
                        stream,
                        version,
                    },
                );
            }
        }
        let state = &mut self.ranks[rank as usize];
        if let Some(at_ns) = changes.transfer_at_ns {
            if state.transfer_at_ns != Some(at_ns) {
                state.transfer_at_ns = Some(at_ns);
                self.schedule(at_ns, Event::SmTransfer { rank });
            }
        }
    }

    /// A collective kernel started on `rank` (R16): it spins until the last rank arrives.
    fn arrive(&mut self, rank: u32, stream: u16, rendezvous: u32) {
        let now_ns = self.now_ns;
        let slot = self.rendezvous[rendezvous as usize]
            .as_mut()
            .expect("a live rendezvous");
        slot.arrived += 1;
        slot.members.push((rank, stream));
        if now_ns >= slot.last_arrival.0 {
            slot.last_arrival = (now_ns, rank);
        }
        let group = &self.scenario.groups[slot.group];
        if slot.arrived < group.ranks.len() as u32 || self.failures.poisoned(rendezvous) {
            return;
        }
        let slot = self.rendezvous[rendezvous as usize]
            .take()
            .expect("a live rendezvous");
        self.rendezvous_index.remove(&(slot.group, slot.seq));
        self.free_rendezvous.push(rendezvous);
        // R22: data moves only on resident channels; the collective runs at the pace of the
        // rank with the fewest channels resident when data starts.
        let resident = slot
            .members
            .iter()
            .map(|&(member, member_stream)| {
                let state = &self.ranks[member as usize];
                let kernel = match state.streams[member_stream as usize].queue.front() {
                    Some(QueuedItem {
                        item: GpuItem::Collective { kernel, .. },
                        ..
                    }) => *kernel,
                    _ => unreachable!("an arrived collective is at its stream's head"),
                };
                state.gpu.held(kernel).max(1)
            })
            .min()
            .unwrap_or(1);
        let (first_rank, first_stream) = slot.members[0];
        let size_bytes = match self.ranks[first_rank as usize].streams[first_stream as usize]
            .queue
            .front()
        {
            Some(QueuedItem {
                item: GpuItem::Collective { collective, .. },
                ..
            }) => self.ranks[first_rank as usize].timeline.collectives[*collective as usize].bytes,
            _ => unreachable!("an arrived collective is at its stream's head"),
        };
        let plan = self.plan(slot.op, size_bytes);
        let resident = resident.min(plan.channels);
        let full_ns = (u128::from(plan.duration_ns) * u128::from(plan.channels))
            .div_ceil(u128::from(resident)) as u64;
        let jitter = self.scenario.cluster.kernel_jitter;
        let duration_ns = if jitter > 0.0 {
            let mut rng = collective_rng(self.scenario.seed, slot.group, slot.seq);
            jittered_ns(full_ns, jitter, &mut rng)
        } else {
            full_ns
        };
        let end_ns = now_ns + duration_ns;
        for &(member, member_stream) in &slot.members {
            let state = &mut self.ranks[member as usize];
            let collective = match state.streams[member_stream as usize].queue.front() {
                Some(QueuedItem {
                    item: GpuItem::Collective { collective, .. },
                    ..
                }) => *collective,
                _ => unreachable!("an arrived collective is at its stream's head"),
            };
            let record = &mut state.timeline.collectives[collective as usize];
            record.data_start_ns = now_ns;
            record.last_rank = Some(slot.last_arrival.1);
            let stream_state = &mut state.streams[member_stream as usize];
            stream_state.end_version += 1;
            let version = stream_state.end_version;
            self.schedule(
                end_ns,
                Event::KernelEnd {
                    rank: member,
                    stream: member_stream,
                    version,
                },
            );
        }
    }

    /// An event instance fired: release the streams and hosts waiting on it.
    fn fire(&mut self, rank: u32, instance: Instance) {
        let now_ns = self.now_ns;
        let state = &mut self.ranks[rank as usize];
        state.fired_ns[instance as usize] = now_ns;
        let Some(waiters) = state.waiters.remove(&instance) else {
            return;
        };
        for waiter in waiters {
            match waiter {
                Waiter::Stream { stream } => self.advance(rank, stream),
                Waiter::Host => self.host_instance_fired(rank),
            }
        }
    }

    // ---------------------------------------------------------------- host side

    fn host_instance_fired(&mut self, rank: u32) {
        let now_ns = self.now_ns;
        let state = &mut self.ranks[rank as usize];
        match &mut state.blocked {
            Blocked::Instances {
                pending,
                latest_ns,
                from_ns,
                cost_ns,
            } => {
                *pending -= 1;
                *latest_ns = (*latest_ns).max(now_ns);
                if *pending == 0 {
                    let resume_ns = (*from_ns).max(*latest_ns) + *cost_ns;
                    self.schedule(
                        resume_ns,
                        Event::HostResume {
                            rank,
                            at_ns: resume_ns,
                        },
                    );
                }
            }
            Blocked::Polling {
                first_poll_ns,
                poll_ns,
                deadline_ns,
            } => {
                // R15: the host sees completion at the first poll at or after the fire time.
                let resume_ns = next_poll_ns(*first_poll_ns, *poll_ns, now_ns);
                // Past the deadline the pending timeout raises first.
                if resume_ns < *deadline_ns {
                    self.schedule(
                        resume_ns,
                        Event::HostResume {
                            rank,
                            at_ns: resume_ns,
                        },
                    );
                }
            }
            // The host raised in a timed-out wait() and the Work finished afterwards.
            Blocked::Done => {}
            _ => unreachable!("a host waiter is blocked"),
        }
    }

    /// Blocks the host until every instance fired, then resumes `cost_ns` later (R14).
    /// Returns true when the host can go on at once.
    fn block_on(&mut self, rank: u32, instances: &[Instance], cost_ns: u64) -> bool {
        let state = &mut self.ranks[rank as usize];
        for &instance in instances {
            state.race.host_waits(instance);
            state.race.forget(instance);
        }
        let mut pending = 0;
        let mut latest_ns = 0;
        for &instance in instances {
            let fired = state.fired_ns[instance as usize];
            if fired == NEVER {
                pending += 1;
                state
                    .waiters
                    .entry(instance)
                    .or_default()
                    .push(Waiter::Host);
            } else {
                latest_ns = latest_ns.max(fired);
            }
        }
        if pending == 0 {
            state.host_ns = state.host_ns.max(latest_ns) + cost_ns;
            return true;
        }
        state.blocked = Blocked::Instances {
            pending,
            latest_ns,
            from_ns: state.host_ns,
            cost_ns,
        };
        false
    }

    /// Completes the record of the call the host was blocked in.
    fn finish_blocking_call(&mut self, rank: u32) {
        let state = &mut self.ranks[rank as usize];
        let host_ns = state.host_ns;
        if let Some(call) = state.timeline.host.last_mut() {
            call.end_ns = host_ns;
        }
        let op = &self.scenario.ops[state.blocked_op];
        match op.kind {
            OpKind::Wait { work, .. } => {
                let (collective, _) = state.work_state[work].expect("waited Work exists");
                if let Some(wait) = &mut state.timeline.collectives[collective as usize].wait {
                    wait.host_end_ns = host_ns;
                }
            }
            OpKind::Collective { .. } | OpKind::Barrier { .. } => {
                if let Some(record) = state.timeline.collectives.last_mut() {
                    if record.op as usize == op.index {
                        match &mut record.wait {
                            Some(wait) if wait.op as usize == op.index => {
                                wait.host_end_ns = host_ns;
                                record.host_end_ns = host_ns;
                            }
                            _ => record.host_end_ns = host_ns,
                        }
                    }
                }
            }
            _ => {}
        }
        state.pc += 1;
    }

    /// Runs the rank's program until it blocks or ends (R1: the host runs ahead of the GPU).
    fn run_host(&mut self, rank: u32) {
        let ops = &self.scenario.ops;
        loop {
            let state = &mut self.ranks[rank as usize];
            if !matches!(state.blocked, Blocked::Running) {
                return;
            }
            if state.pc == ops.len() {
                state.pc = 0;
                state.iteration += 1;
                if state.iteration == self.scenario.repeat {
                    state.blocked = Blocked::Done;
                    return;
                }
            }
            let op = &ops[state.pc];
            if !op.runs_on(rank) {
                state.pc += 1;
                continue;
            }
            let iteration = state.iteration;
            let first_visit = state.perturbed != Some((iteration, op.index));
            state.perturbed = Some((iteration, op.index));
            for slot in 0..self.perturbations_by_op[op.index].len() {
                let index = self.perturbations_by_op[op.index][slot];
                let perturbation = &self.scenario.perturbations[index];
                let applies = first_visit
                    && perturbation.ranks.binary_search(&rank).is_ok()
                    && perturbation
                        .iterations
                        .as_ref()
                        .is_none_or(|list| list.contains(&iteration));
                if !applies {
                    continue;
                }
                let state = &mut self.ranks[rank as usize];
                state.host_ns += perturbation.host_delay.sample_ns(&mut state.rng);
                let gpu_delay_ns = perturbation.gpu_delay.sample_ns(&mut state.rng);
                if gpu_delay_ns > 0 {
                    let host_ns = state.host_ns;
                    self.launch_kernel(
                        rank,
                        op.stream as u16,
                        op.index,
                        KernelClass::Sleep,
                        gpu_delay_ns,
                        host_ns,
                    );
                }
            }
            if first_visit {
                match self.apply_fault(rank, op.index) {
                    FaultEffect::Run => {}
                    FaultEffect::Skip => {
                        self.ranks[rank as usize].pc += 1;
                        continue;
                    }
                    FaultEffect::Stop => return,
                }
            }
            if self.execute(rank, op.index) {
                self.ranks[rank as usize].pc += 1;
            } else {
                self.ranks[rank as usize].blocked_op = op.index;
                return;
            }
        }
    }

    fn launch_kernel(
        &mut self,
        rank: u32,
        stream: u16,
        op: usize,
        class: KernelClass,
        duration_ns: u64,
        host_ns: u64,
    ) -> Point {
        let state = &mut self.ranks[rank as usize];
        let duration_ns = match class {
            KernelClass::Compute => jittered_ns(
                (duration_ns as f64 * state.compute_speed).round() as u64,
                self.scenario.cluster.kernel_jitter,
                &mut state.rng,
            ),
            _ => duration_ns,
        };
        let kernel = state.timeline.kernels.len() as u32;
        state.timeline.kernels.push(KernelRecord {
            iteration: state.iteration,
            op: op as OpRef,
            stream,
            class,
            enqueue_ns: host_ns,
            start_ns: NEVER,
            end_ns: NEVER,
        });
        let ready_ns = host_ns + self.scenario.host.launch_latency_ns;
        self.push(
            rank,
            stream,
            GpuItem::Kernel {
                duration_ns,
                kernel,
            },
            ready_ns,
        )
    }

    /// Adds a `cudaStreamWaitEvent` of `waiting` on `instance`.
    fn push_stream_wait(&mut self, rank: u32, op: usize, waiting: u16, instance: Instance) {
        let state = &mut self.ranks[rank as usize];
        let stream_wait = state.timeline.stream_waits.len() as u32;
        state.timeline.stream_waits.push(StreamWaitRecord {
            iteration: state.iteration,
            op: op as OpRef,
            source_stream: state.instance_stream[instance as usize],
            source_ns: NEVER,
            waiting_stream: waiting,
            released_ns: NEVER,
        });
        state.scratch.stream_wait_instance.push(instance);
        let host_ns = state.host_ns;
        self.push(
            rank,
            waiting,
            GpuItem::WaitFor {
                instance,
                stream_wait,
            },
            host_ns,
        );
    }

    fn record(&mut self, rank: u32, stream: u16) -> Instance {
        self.record_at(rank, stream).0
    }

    fn record_at(&mut self, rank: u32, stream: u16) -> (Instance, Point) {
        let instance = self.new_instance(rank, stream);
        let host_ns = self.ranks[rank as usize].host_ns;
        let point = self.push(rank, stream, GpuItem::Record { instance }, host_ns);
        (instance, point)
    }

    fn push_host_call(&mut self, rank: u32, op: usize, start_ns: u64) {
        let state = &mut self.ranks[rank as usize];
        state.timeline.host.push(HostCall {
            iteration: state.iteration,
            op: op as OpRef,
            start_ns,
            end_ns: state.host_ns,
        });
    }

    /// Executes one op on the host. Returns false when the host blocked (the call's record is
    /// completed when it resumes).
    fn execute(&mut self, rank: u32, op_index: usize) -> bool {
        let scenario = self.scenario;
        let op = &scenario.ops[op_index];
        let costs = &scenario.host;
        let stream = op.stream as u16;
        let start_ns = self.ranks[rank as usize].host_ns;
        self.ranks[rank as usize].race.host_step();
        let mut proceed = true;
        // Where the op's declared reads and writes happen (R21): at its kernel if it launches
        // one, else at its point in the stream.
        let mut access_point: Option<Point> = None;
        match op.kind {
            OpKind::Collective {
                collective,
                tensor,
                group,
                async_op,
                work,
                batch,
            } => {
                let sizes = scenario.call_sizes(&op.kind);
                if batch == Batch::Coalesced && self.ranks[rank as usize].batch_next == 0 {
                    // R25: the coalescing manager only records each call; one launch follows.
                    let count = u64::from(scenario.tensors[tensor].count);
                    self.ranks[rank as usize].host_ns += (count - 1) * costs.event_ns;
                }
                // A batch resumes where a communicator init stopped it.
                let first = std::mem::take(&mut self.ranks[rank as usize].batch_next);
                for (call, &size_bytes) in sizes.iter().enumerate().skip(first) {
                    let (collective, size_bytes) =
                        self.issued_collective(rank, collective, size_bytes);
                    proceed = self.collective(
                        rank,
                        op_index,
                        collective,
                        (Some(tensor), size_bytes),
                        group,
                        async_op,
                        work,
                        false,
                    );
                    if !proceed {
                        if matches!(self.ranks[rank as usize].blocked, Blocked::CommInit) {
                            self.ranks[rank as usize].batch_next = call;
                        }
                        return false;
                    }
                }
                return proceed;
            }
            OpKind::Barrier { group } => {
                return self.collective(
                    rank,
                    op_index,
                    CollectiveKind::AllReduce,
                    (None, 1),
                    group,
                    true,
                    None,
                    true,
                );
            }
            OpKind::Wait { work, timeout_ns } => {
                self.ranks[rank as usize].host_ns += costs.wait_ns;
                let (collective, end) = self.ranks[rank as usize].work_state[work]
                    .expect("validation guarantees the Work exists");
                // R15: blocking wait, or an explicit timeout, makes the host poll.
                let mode = if scenario.env.blocking_wait || timeout_ns.is_some() {
                    WaitMode::Poll { timeout_ns }
                } else {
                    WaitMode::StreamOnly
                };
                proceed = self.wait(rank, op_index, (collective, end), stream, start_ns, mode);
            }
            OpKind::IsCompleted { work } => {
                let state = &mut self.ranks[rank as usize];
                state.host_ns += costs.query_ns;
                let (_, end) = state.work_state[work].expect("validation guarantees the Work");
                state.timeline.queries.push(QueryRecord {
                    iteration: state.iteration,
                    op: op_index as OpRef,
                    host_ns: state.host_ns,
                    completed: false,
                });
                state.scratch.query_instance.push(end);
            }
            OpKind::SetStream { .. } => {
                self.ranks[rank as usize].host_ns += costs.event_ns;
            }
            OpKind::RecordEvent { event } => {
                self.ranks[rank as usize].host_ns += costs.event_ns;
                let instance = self.record(rank, stream);
                self.ranks[rank as usize].event_instance[event] = instance;
            }
            OpKind::WaitEvent { event } => {
                self.ranks[rank as usize].host_ns += costs.event_ns;
                let instance = self.ranks[rank as usize].event_instance[event];
                self.push_stream_wait(rank, op_index, stream, instance);
            }
            OpKind::EventSync { event } => {
                let instance = self.ranks[rank as usize].event_instance[event];
                proceed = self.block_on(rank, &[instance], costs.sync_ns);
            }
            OpKind::StreamSync { stream: target } => {
                let instance = self.record(rank, target as u16);
                proceed = self.block_on(rank, &[instance], costs.sync_ns);
            }
            OpKind::DeviceSync => {
                let streams = self.ranks[rank as usize].streams.len() as u16;
                let instances: Vec<Instance> = (0..streams).map(|s| self.record(rank, s)).collect();
                proceed = self.block_on(rank, &instances, costs.sync_ns);
            }
            OpKind::Item { tensor } => {
                self.ranks[rank as usize].host_ns += costs.launch_ns;
                let (instance, point) = self.record_at(rank, stream);
                self.access(rank, point.clone(), tensor, AccessKind::Read, op_index);
                access_point = Some(point);
                proceed = self.block_on(rank, &[instance], costs.item_ns);
            }
            OpKind::Alloc { tensor } => return self.alloc(rank, op_index, tensor, stream),
            OpKind::Free { tensor } => self.free(rank, tensor),
            OpKind::Gemm { .. } => {
                let state = &mut self.ranks[rank as usize];
                state.host_ns += costs.launch_ns;
                let host_ns = state.host_ns;
                let duration_ns = self.gemm_ns_by_op[op_index];
                access_point = Some(self.launch_kernel(
                    rank,
                    stream,
                    op_index,
                    KernelClass::Compute,
                    duration_ns,
                    host_ns,
                ));
            }
            OpKind::Kernel { duration_ns, .. } | OpKind::GpuSleep { duration_ns } => {
                let class = match op.kind {
                    OpKind::GpuSleep { .. } => KernelClass::Sleep,
                    _ => KernelClass::Compute,
                };
                let state = &mut self.ranks[rank as usize];
                state.host_ns += costs.launch_ns;
                let host_ns = state.host_ns;
                access_point =
                    Some(self.launch_kernel(rank, stream, op_index, class, duration_ns, host_ns));
            }
            OpKind::HostSleep { duration_ns } => {
                self.ranks[rank as usize].host_ns += duration_ns;
            }
            OpKind::Mark { mark } => {
                let state = &mut self.ranks[rank as usize];
                state.host_ns += costs.mark_ns;
                let instance = self.record(rank, stream);
                let state = &mut self.ranks[rank as usize];
                state.timeline.marks.push(MarkRecord {
                    iteration: state.iteration,
                    mark: mark as u32,
                    host_ns: start_ns,
                    gpu_ns: NEVER,
                });
                state.scratch.mark_instance.push(instance);
            }
        }
        self.declared_accesses(rank, op_index, access_point);
        self.push_host_call(rank, op_index, start_ns);
        proceed
    }

    /// The op's `reads` and `writes` (R21), at `point` or, for ops without a GPU item of
    /// their own, at their place in the stream.
    fn declared_accesses(&mut self, rank: u32, op_index: usize, point: Option<Point>) {
        let op = &self.scenario.ops[op_index];
        if op.reads.is_empty() && op.writes.is_empty() {
            return;
        }
        let point =
            point.unwrap_or_else(|| self.ranks[rank as usize].race.enqueue(op.stream as u16));
        for &tensor in &op.reads {
            self.access(rank, point.clone(), tensor, AccessKind::Read, op_index);
        }
        for &tensor in &op.writes {
            self.access(rank, point.clone(), tensor, AccessKind::Write, op_index);
        }
    }

    /// Keeps a collective's tensor alive as the lifetime rule says (R18, R19): the Work stashes
    /// it, or the allocator records the NCCL stream on it.
    fn keep_alive(
        &mut self,
        rank: u32,
        group: GroupId,
        tensor: TensorId,
        run_stream: u16,
        (collective, end): (u32, Instance),
    ) {
        let books = &mut self.ranks[rank as usize].memory.books;
        books.keep_alive(tensor, group, run_stream, collective as usize, end);
    }

    /// R18: Works never waited on leave the shelf at the next collective of their group once
    /// they completed (as far as the simulation has got; later ones stay on the shelf).
    fn release_shelf(&mut self, rank: u32, group: GroupId) {
        let state = &mut self.ranks[rank as usize];
        let fired = &state.fired_ns;
        state
            .memory
            .books
            .release_shelf(group, |end| fired[end as usize] != NEVER);
    }

    /// `del t` (R18, R19): the block returns to its stream's pool now, when the last Work
    /// holding it lets go (stash), or once events on the streams that used it passed
    /// (recordStream).
    fn free(&mut self, rank: u32, tensor: TensorId) {
        let streams = self.ranks[rank as usize]
            .memory
            .books
            .streams_to_record(tensor);
        let instances: Vec<Instance> = streams.iter().map(|&s| self.record(rank, s)).collect();
        let state = &mut self.ranks[rank as usize];
        state.host_ns += self.scenario.memory.alloc_ns;
        state.memory.books.free(tensor, instances);
    }

    /// `torch.empty` on `stream` (R17): from the stream's cache, a new segment, or — at the
    /// capacity — after releasing the cache, which first waits for the whole device (R20).
    fn alloc(&mut self, rank: u32, op_index: usize, tensor: TensorId, stream: u16) -> bool {
        let scenario = self.scenario;
        let now_ns = self.now_ns;
        let state = &mut self.ranks[rank as usize];
        let start_ns = state.memory.retry_start_ns.take().unwrap_or(state.host_ns);
        // R19: blocks freed under recordStream come back once their events passed, checked
        // now; the simulation must have reached the host's time to know which did.
        if !state.memory.books.pending_events().is_empty() {
            if now_ns < state.host_ns {
                state.memory.retry_start_ns = Some(start_ns);
                state.blocked = Blocked::Timer;
                state.blocked_op = op_index;
                let at_ns = state.host_ns;
                self.schedule(at_ns, Event::HostResume { rank, at_ns });
                return false;
            }
            let fired = &state.fired_ns;
            state
                .memory
                .books
                .collect_pending(|instance| fired[instance as usize] != NEVER);
        }
        let memory_config = &scenario.memory;
        let size_bytes = scenario.tensor_bytes(tensor);
        loop {
            let state = &mut self.ranks[rank as usize];
            match state.memory.books.allocate(tensor, size_bytes, stream) {
                AllocStep::Cached(_) => {
                    state.host_ns += memory_config.alloc_ns;
                    break;
                }
                AllocStep::NewSegment { .. } => {
                    state.host_ns += memory_config.malloc_ns;
                    break;
                }
                AllocStep::NeedsRelease
                    if memory_config.expandable_segments || state.memory.awaiting_idle =>
                {
                    // R20: synchronize_and_free_events, then cudaFree every cached segment.
                    let device_idle_ns =
                        std::mem::take(&mut state.memory.awaiting_idle).then_some(state.host_ns);
                    let segments_freed = state.memory.books.release_cache().len() as u32;
                    // Expandable segments unmap pages without cudaFree's synchronisation.
                    if !memory_config.expandable_segments {
                        state.host_ns += memory_config.free_ns * u64::from(segments_freed);
                    }
                    state.timeline.cache_releases.push(CacheRelease {
                        iteration: state.iteration,
                        op: op_index as OpRef,
                        host_start_ns: start_ns,
                        host_end_ns: state.host_ns,
                        device_idle_ns,
                        segments_freed,
                    });
                }
                AllocStep::NeedsRelease => {
                    // cudaFree synchronises the device: the host waits for every stream and for
                    // pending recordStream events, then runs this allocation again (R20, R23
                    // `frag`).
                    state.memory.retry = true;
                    state.memory.retry_start_ns = Some(start_ns);
                    state.memory.awaiting_idle = true;
                    let pending = state.memory.books.pending_events();
                    let streams = state.streams.len() as u16;
                    let mut instances: Vec<Instance> =
                        (0..streams).map(|s| self.record(rank, s)).collect();
                    instances.extend(pending);
                    if !self.block_on(rank, &instances, 0) {
                        return false;
                    }
                }
                AllocStep::OutOfMemory => {
                    let reserved = state.memory.books.reserved_bytes();
                    self.findings.push(Finding {
                        kind: FindingKind::OutOfMemory,
                        rank: Some(rank),
                        iteration: Some(state.iteration),
                        op: Some(op_index as OpRef),
                        stream: Some(state.timeline.streams[stream as usize].name.clone()),
                        message: format!(
                            "rank {rank}: CUDA out of memory at {} (line {}): {} B asked with {} B reserved of {} B, even after releasing the cache; the rank's program stopped",
                            scenario.ops[op_index].display_name(),
                            scenario.ops[op_index].line,
                            size_bytes,
                            reserved,
                            memory_config.capacity_bytes,
                        ),
                    });
                    state.blocked = Blocked::Done;
                    return false;
                }
            }
        }
        self.push_host_call(rank, op_index, start_ns);
        true
    }

    /// One access of a tensor's block; a race with an earlier access becomes a record and a
    /// finding (R21).
    fn access(
        &mut self,
        rank: u32,
        point: Point,
        tensor: TensorId,
        kind: AccessKind,
        op_index: usize,
    ) {
        const MAX_RACE_FINDINGS: usize = 64;
        let state = &mut self.ranks[rank as usize];
        let Some(region) = state.memory.books.region(tensor) else {
            return;
        };
        let range = (region.segment, region.start_bytes, region.end_bytes);
        let Some(race) = state.race.access(point, range, kind, op_index as u64) else {
            return;
        };
        let stream_name = |agent: usize| match agent {
            0 => "host".to_string(),
            agent => state.timeline.streams[agent - 1].name.clone(),
        };
        let record = RaceRecord {
            iteration: state.iteration,
            host_ns: state.host_ns,
            tensor: self.scenario.tensors[tensor].name.clone(),
            earlier_op: race.earlier_site as OpRef,
            earlier_stream: stream_name(race.earlier_agent),
            earlier_write: race.earlier_kind == AccessKind::Write,
            later_op: race.later_site as OpRef,
            later_stream: stream_name(race.later_agent),
            later_write: race.later_kind == AccessKind::Write,
        };
        let is_nccl =
            |agent: usize| agent > 0 && state.timeline.streams[agent - 1].kind == StreamKind::Nccl;
        let ops = &self.scenario.ops;
        let earlier = &ops[race.earlier_site as usize];
        let later = &ops[race.later_site as usize];
        let verb = |write: bool| if write { "write" } else { "read" };
        let fix = match (is_nccl(race.earlier_agent), is_nccl(race.later_agent)) {
            (true, true) => format!(
                "order the two collectives: call wait() on the Work of {} before launching {} (syncStream then makes {} wait too, R10a), or run both on one group",
                earlier.display_name(), later.display_name(), record.later_stream
            ),
            (true, false) => format!(
                "call wait() on the Work of {} while stream {} is current, before {} (R12)",
                earlier.display_name(), record.later_stream, later.display_name()
            ),
            (false, true) => format!(
                "make the stream current at {} wait for stream {} first (record_event there after {}, wait_event before the collective; syncStream only waits for the current stream, R10a)",
                later.display_name(), record.earlier_stream, earlier.display_name()
            ),
            (false, false) => format!(
                "record_event on stream {} after {} and wait_event on stream {} before {}",
                record.earlier_stream, earlier.display_name(), record.later_stream, later.display_name()
            ),
        };
        let message = format!(
            "data race on tensor {} (rank {rank}, iteration {}): {} by {} (line {}) on stream {} is not ordered with the earlier {} by {} (line {}) on stream {}; to order them, {fix}",
            record.tensor,
            record.iteration,
            verb(record.later_write),
            later.display_name(),
            later.line,
            record.later_stream,
            verb(record.earlier_write),
            earlier.display_name(),
            earlier.line,
            record.earlier_stream,
        );
        let stream = Some(record.later_stream.clone());
        let iteration = record.iteration;
        state.timeline.races.push(record);
        if self
            .findings
            .iter()
            .filter(|f| f.kind == FindingKind::Race)
            .count()
            < MAX_RACE_FINDINGS
        {
            self.findings.push(Finding {
                kind: FindingKind::Race,
                rank: Some(rank),
                iteration: Some(iteration),
                op: Some(op_index as OpRef),
                stream,
                message,
            });
        }
    }

    /// `work.wait()` (R12): the stream current at the call waits on the end event; with
    /// `TORCH_NCCL_BLOCKING_WAIT` the host then polls (R15).
    fn wait(
        &mut self,
        rank: u32,
        op_index: usize,
        (collective, end): (u32, Instance),
        stream: u16,
        start_ns: u64,
        mode: WaitMode,
    ) -> bool {
        let stream_wait = self.ranks[rank as usize].timeline.stream_waits.len() as u32;
        self.push_stream_wait(rank, op_index, stream, end);
        let state = &mut self.ranks[rank as usize];
        let host_ns = state.host_ns;
        state.timeline.collectives[collective as usize].wait = Some(WaitRecord {
            op: op_index as OpRef,
            host_start_ns: start_ns,
            host_end_ns: host_ns,
            stream,
            released_ns: NEVER,
            completed_at_return: false,
        });
        state.scratch.collective_wait_stream_wait[collective as usize] = stream_wait;
        // R18: after the stream block the Work lets go of its stashed tensor.
        state.memory.books.release_on_wait(collective as usize);
        let WaitMode::Poll { timeout_ns } = mode else {
            return true;
        };
        // The polling host returns only once the end event passed.
        state.race.host_waits(end);
        let timeout_ns = self.wait_timeout_ns(rank, collective, timeout_ns);
        let enqueue_ns = self.enqueue_ns(rank, collective);
        let state = &mut self.ranks[rank as usize];
        let poll_ns = self.scenario.host.blocking_wait_poll_ns;
        let fired = state.fired_ns[end as usize];
        if fired != NEVER {
            // Completed before the first poll: the first check succeeds.
            return true;
        }
        state.waiters.entry(end).or_default().push(Waiter::Host);
        let deadline_ns = match timeout_ns {
            // The check at each poll raises once the timeout has passed since the Work's
            // enqueue (R26's clock, checked by the main thread, R15).
            Some(timeout_ns) => next_poll_ns(host_ns, poll_ns, enqueue_ns + timeout_ns),
            None => NEVER,
        };
        state.blocked = Blocked::Polling {
            first_poll_ns: host_ns,
            poll_ns,
            deadline_ns,
        };
        if deadline_ns != NEVER {
            let generation = state.generation;
            self.schedule(deadline_ns, Event::WaitTimeout { rank, generation });
        }
        false
    }

    /// `wait(timeout)` or blocking wait past the timeout: the main thread raises (R15) and the
    /// rank's program ends there.
    fn wait_timed_out(&mut self, rank: u32, generation: u64) {
        let now_ns = self.now_ns;
        let state = &mut self.ranks[rank as usize];
        if state.generation != generation || !matches!(state.blocked, Blocked::Polling { .. }) {
            return;
        }
        let op = &self.scenario.ops[state.blocked_op];
        let (collective, own_timeout_ns) = match op.kind {
            OpKind::Wait { work, timeout_ns } => {
                let (collective, _) = state.work_state[work].expect("waited Work exists");
                (collective, timeout_ns)
            }
            // The wait() inside a 2.5 synchronous collective (R11).
            _ => (state.timeline.collectives.len() as u32 - 1, None),
        };
        let timeout_ns = self
            .wait_timeout_ns(rank, collective, own_timeout_ns)
            .expect("a polling wait that times out has a timeout");
        let enqueue_ns = self.enqueue_ns(rank, collective);
        let state = &mut self.ranks[rank as usize];
        let record = &state.timeline.collectives[collective as usize];
        let op_type = match self.scenario.ops[record.op as usize].kind {
            OpKind::Collective { collective, .. } => collective.op_type(),
            _ => "BARRIER",
        };
        let waited_ms = now_ns.saturating_sub(enqueue_ns) as f64 / 1e6;
        self.findings.push(Finding {
            kind: FindingKind::WaitTimeout,
            rank: Some(rank),
            iteration: Some(state.iteration),
            op: Some(op.index as OpRef),
            stream: Some(state.timeline.streams[op.stream].name.clone()),
            message: format!(
                "rank {rank}: WorkNCCL(SeqNum={}, OpType={op_type}, Timeout(ms)={}) timed out in wait() at {} (line {}), {waited_ms:.3} ms after the collective was enqueued; the main thread raised and the rank's program stopped (R15)",
                record.seq,
                timeout_ns / 1_000_000,
                op.display_name(),
                op.line,
            ),
        });
        if let Some(call) = state.timeline.host.last_mut() {
            call.end_ns = now_ns;
        }
        self.wait_raised(rank, collective, timeout_ns);
    }

    /// A collective call (R10, R11), or a barrier (R14).
    #[allow(clippy::too_many_arguments)]
    fn collective(
        &mut self,
        rank: u32,
        op_index: usize,
        collective: CollectiveKind,
        (tensor, size_bytes): (Option<TensorId>, u64),
        group: GroupId,
        async_op: bool,
        work: Option<WorkId>,
        barrier: bool,
    ) -> bool {
        if self.communicator_aborted(rank, group, op_index) {
            return false;
        }
        let scenario = self.scenario;
        let costs = &scenario.host;
        let op = &scenario.ops[op_index];
        let call_stream = op.stream as u16;
        let state = &mut self.ranks[rank as usize];
        // A resumed call (after lazy init) must not repeat its bookkeeping.
        let resuming_init = state.timeline.host.last().is_some_and(|call| {
            call.op as usize == op_index
                && call.iteration == state.iteration
                && call.end_ns == NEVER
        });
        let start_ns = if resuming_init {
            state.timeline.host.last().expect("checked").start_ns
        } else {
            state.host_ns
        };
        if !state.group_initialised[group] {
            // R8: the first collective of a group bootstraps the communicator, a rendezvous of
            // every member through the store, inside this call.
            state.group_initialised[group] = true;
            state.timeline.host.push(HostCall {
                iteration: state.iteration,
                op: op_index as OpRef,
                start_ns,
                end_ns: NEVER,
            });
            let arrived = &mut self.comm_init[group];
            arrived.push((rank, state.host_ns));
            if arrived.len() < scenario.groups[group].ranks.len() {
                state.blocked = Blocked::CommInit;
                self.ranks[rank as usize].blocked_op = op_index;
                self.store_get(rank, group);
                return false;
            }
            let resume_ns = arrived.iter().map(|&(_, t)| t).max().unwrap_or(0) + costs.comm_init_ns;
            let members: Vec<u32> = arrived.iter().map(|&(r, _)| r).collect();
            for member in members {
                self.ranks[member as usize].blocked = Blocked::CommInit;
                self.ranks[member as usize].blocked_op = op_index;
                self.schedule(
                    resume_ns.max(self.now_ns),
                    Event::HostResume {
                        rank: member,
                        at_ns: resume_ns,
                    },
                );
            }
            return false;
        }
        let state = &mut self.ranks[rank as usize];
        if resuming_init {
            state.timeline.host.pop();
        }
        // The kernel is launched `collective_tail_ns` before the call returns.
        state.host_ns += costs.collective_ns - costs.collective_tail_ns;
        state.group_seq[group] += 1;
        let seq = state.group_seq[group];
        let iteration = state.iteration;
        let internal_stream = state.group_stream[group].expect("members have the group's stream");
        let on_internal_stream =
            barrier || async_op || !scenario.torch.sync_collective_on_current_stream();
        let run_stream = if on_internal_stream {
            internal_stream
        } else {
            call_stream
        };

        // R10a: input-ready event on the current stream; the NCCL stream waits on it.
        let input_ready = self.record(rank, call_stream);
        if on_internal_stream {
            self.push_stream_wait(rank, op_index, run_stream, input_ready);
        }
        self.ranks[rank as usize].race.forget(input_ready);
        self.release_shelf(rank, group);
        // R10c: the kernel, joined to the group's rendezvous (R16).
        let rendezvous = self.rendezvous_slot(group, seq, collective, op_index, iteration);
        let state = &mut self.ranks[rank as usize];
        let host_ns = state.host_ns;
        let kernel = state.timeline.kernels.len() as u32;
        state.timeline.kernels.push(KernelRecord {
            iteration,
            op: op_index as OpRef,
            stream: run_stream,
            class: KernelClass::Communication,
            enqueue_ns: host_ns,
            start_ns: NEVER,
            end_ns: NEVER,
        });
        let ready_ns = host_ns + costs.nccl_launch_latency_ns;
        let collective_index = state.timeline.collectives.len() as u32;
        let kernel_point = self.push(
            rank,
            run_stream,
            GpuItem::Collective {
                kernel,
                rendezvous,
                collective: collective_index,
            },
            ready_ns,
        );
        // The collective reads and writes its tensor on the stream it runs on (R21).
        if let Some(tensor) = tensor {
            self.access(
                rank,
                kernel_point.clone(),
                tensor,
                AccessKind::Write,
                op_index,
            );
        }
        self.declared_accesses(rank, op_index, Some(kernel_point));
        // R10d: the Work's end event on the stream the kernel ran on.
        let end = self.record(rank, run_stream);
        let state = &mut self.ranks[rank as usize];
        state.host_ns += costs.collective_tail_ns;
        let host_ns = state.host_ns;
        state.timeline.collectives.push(CollectiveRecord {
            iteration,
            op: op_index as OpRef,
            group: group as u16,
            seq,
            bytes: size_bytes,
            async_op,
            call_stream,
            run_stream,
            host_start_ns: start_ns,
            host_end_ns: host_ns,
            input_ready_ns: NEVER,
            kernel_start_ns: NEVER,
            data_start_ns: NEVER,
            end_ns: NEVER,
            last_rank: None,
            wait: None,
        });
        state.scratch.collective_input_ready.push(input_ready);
        state.scratch.collective_end.push(end);
        state.scratch.collective_kernel.push(kernel);
        state.scratch.collective_wait_stream_wait.push(u32::MAX);
        if let Some(work) = work {
            if let Some((_, previous_end)) = state.work_state[work] {
                state.race.forget(previous_end);
            }
            state.work_state[work] = Some((collective_index, end));
        } else if async_op && !barrier {
            // A Work nobody can name is never waited on.
            state.race.forget(end);
        }
        if let Some(tensor) = tensor.filter(|_| on_internal_stream) {
            self.keep_alive(rank, group, tensor, run_stream, (collective_index, end));
        }
        self.collective_enqueued(
            rank,
            group,
            collective_index,
            rendezvous,
            (collective, size_bytes),
        );
        self.push_host_call(rank, op_index, start_ns);

        if barrier {
            // R14: barrier = the all_reduce, wait() on the current stream, then
            // currentStream.synchronize(), which the host blocks in (so no polling is modelled).
            let wait_start = self.ranks[rank as usize].host_ns;
            self.ranks[rank as usize].host_ns += costs.wait_ns;
            self.wait(
                rank,
                op_index,
                (collective_index, end),
                call_stream,
                wait_start,
                WaitMode::StreamOnly,
            );
            let instance = self.record(rank, call_stream);
            return self.block_on(rank, &[instance], costs.sync_ns);
        }
        if !async_op && on_internal_stream {
            // R11 (≤ 2.5): the wrapper calls wait() itself.
            self.ranks[rank as usize].host_ns += costs.wait_ns;
            let wait_start = self.ranks[rank as usize].host_ns - costs.wait_ns;
            let proceed = self.wait(
                rank,
                op_index,
                (collective_index, end),
                call_stream,
                wait_start,
                if scenario.env.blocking_wait {
                    WaitMode::Poll { timeout_ns: None }
                } else {
                    WaitMode::StreamOnly
                },
            );
            let state = &mut self.ranks[rank as usize];
            let host_ns = state.host_ns;
            if let Some(call) = state.timeline.host.last_mut() {
                call.end_ns = if proceed { host_ns } else { NEVER };
            }
            state.timeline.collectives[collective_index as usize].host_end_ns = host_ns;
            return proceed;
        }
        true
    }

    fn rendezvous_slot(
        &mut self,
        group: GroupId,
        seq: u64,
        collective: CollectiveKind,
        op: usize,
        iteration: u32,
    ) -> u32 {
        if let Some(&slot) = self.rendezvous_index.get(&(group, seq)) {
            return slot;
        }
        let rendezvous = Rendezvous {
            group,
            collective,
            arrived: 0,
            last_arrival: (0, 0),
            members: Vec::new(),
            op,
            seq,
            iteration,
        };
        let slot = match self.free_rendezvous.pop() {
            Some(slot) => {
                self.rendezvous[slot as usize] = Some(rendezvous);
                slot
            }
            None => {
                self.rendezvous.push(Some(rendezvous));
                (self.rendezvous.len() - 1) as u32
            }
        };
        self.rendezvous_index.insert((group, seq), slot);
        slot
    }

    // ---------------------------------------------------------------- the end

    fn report_deadlocks(&mut self) {
        const MAX_FINDINGS: usize = 32;
        let scenario = self.scenario;
        let mut stuck_collectives: Vec<&Rendezvous> = self.rendezvous.iter().flatten().collect();
        stuck_collectives.sort_by_key(|r| (r.group, r.seq));
        stuck_collectives.retain(|r| !self.rendezvous_settled(r));
        for rendezvous in stuck_collectives.iter().take(MAX_FINDINGS) {
            let group = &scenario.groups[rendezvous.group];
            let arrived: Vec<u32> = {
                let mut list: Vec<u32> = rendezvous.members.iter().map(|&(r, _)| r).collect();
                list.sort_unstable();
                list
            };
            let missing: Vec<u32> = group
                .ranks
                .iter()
                .copied()
                .filter(|r| arrived.binary_search(r).is_err())
                .collect();
            let op = &scenario.ops[rendezvous.op];
            let (first_rank, first_stream) = rendezvous.members.first().copied().unwrap_or((0, 0));
            self.findings.push(Finding {
                kind: FindingKind::Deadlock,
                rank: Some(first_rank),
                iteration: Some(rendezvous.iteration),
                op: Some(rendezvous.op as OpRef),
                stream: Some(
                    self.ranks[first_rank as usize].timeline.streams[first_stream as usize]
                        .name
                        .clone(),
                ),
                message: format!(
                    "collective {} (SeqNum={}, OpType={}, group {}, line {}) never completes: ranks {} started its kernel and spin (R16), ranks {} never launched it",
                    op.display_name(),
                    rendezvous.seq,
                    match op.kind {
                        OpKind::Barrier { .. } => "BARRIER",
                        _ => rendezvous.collective.op_type(),
                    },
                    group.name,
                    op.line,
                    rank_list(&arrived),
                    rank_list(&missing),
                ),
            });
        }
        for (group_id, arrived) in self.comm_init.iter().enumerate() {
            let group = &scenario.groups[group_id];
            if arrived.is_empty()
                || arrived.len() == group.ranks.len()
                || arrived.iter().all(|&(r, _)| self.is_dead(r))
            {
                continue;
            }
            let mut waiting: Vec<u32> = arrived.iter().map(|&(r, _)| r).collect();
            waiting.sort_unstable();
            let missing: Vec<u32> = group
                .ranks
                .iter()
                .copied()
                .filter(|r| waiting.binary_search(r).is_err())
                .collect();
            let first = waiting[0];
            let op = &scenario.ops[self.ranks[first as usize].blocked_op];
            self.findings.push(Finding {
                kind: FindingKind::Deadlock,
                rank: Some(first),
                iteration: Some(self.ranks[first as usize].iteration),
                op: Some(op.index as OpRef),
                stream: None,
                message: format!(
                    "the communicator of group {} never forms (R8): ranks {} wait in its lazy init at {} (line {}), ranks {} never issue a collective on it",
                    group.name,
                    rank_list(&waiting),
                    op.display_name(),
                    op.line,
                    rank_list(&missing),
                ),
            });
        }
        let mut blocked_hosts = 0;
        for state in &self.ranks {
            if matches!(state.blocked, Blocked::Done | Blocked::Dead) {
                continue;
            }
            blocked_hosts += 1;
            if self.findings.len() >= MAX_FINDINGS {
                continue;
            }
            let op = &scenario.ops[state.blocked_op];
            let why = match state.blocked {
                Blocked::CommInit => {
                    "waits for the group's other ranks to create the communicator (R8)"
                }
                Blocked::Polling { .. } => "polls a Work that never completes (blocking wait, R15)",
                Blocked::Hung => "hangs before it (a [[fault]] of kind hang)",
                _ => "waits for GPU work that never finishes (R14)",
            };
            self.findings.push(Finding {
                kind: FindingKind::Deadlock,
                rank: Some(state.timeline.rank),
                iteration: Some(state.iteration),
                op: Some(state.blocked_op as OpRef),
                stream: Some(state.timeline.streams[op.stream].name.clone()),
                message: format!(
                    "host of rank {} is blocked in {} (line {}, iteration {}): it {why}",
                    state.timeline.rank,
                    op.display_name(),
                    op.line,
                    state.iteration
                ),
            });
        }
        if blocked_hosts > 0 && self.findings.len() >= MAX_FINDINGS {
            self.findings.push(Finding {
                kind: FindingKind::Deadlock,
                rank: None,
                iteration: None,
                op: None,
                stream: None,
                message: format!(
                    "{blocked_hosts} hosts in all are blocked; only the first findings are listed"
                ),
            });
        }
    }

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
        timeline.findings = self.findings;
        timeline.watchdog = self.failures.into_records();
        for mut state in self.ranks {
            state.timeline.memory = state.memory.books.peaks();
            let fired = &state.fired_ns;
            let t = &mut state.timeline;
            let scratch = &state.scratch;
            for (wait, &instance) in t.stream_waits.iter_mut().zip(&scratch.stream_wait_instance) {
                wait.source_ns = fired[instance as usize];
            }
            for (index, record) in t.collectives.iter_mut().enumerate() {
                record.input_ready_ns = fired[scratch.collective_input_ready[index] as usize];
                record.end_ns = fired[scratch.collective_end[index] as usize];
                record.kernel_start_ns =
                    t.kernels[scratch.collective_kernel[index] as usize].start_ns;
                let end_ns = record.end_ns;
                if let Some(wait) = &mut record.wait {
                    let stream_wait = scratch.collective_wait_stream_wait[index];
                    wait.released_ns = t.stream_waits[stream_wait as usize].released_ns;
                    wait.completed_at_return = end_ns <= wait.host_end_ns;
                }
            }
            for (mark, &instance) in t.marks.iter_mut().zip(&scratch.mark_instance) {
                mark.gpu_ns = fired[instance as usize];
            }
            for (query, &instance) in t.queries.iter_mut().zip(&scratch.query_instance) {
                query.completed = fired[instance as usize] <= query.host_ns;
            }
            // Records of what never happened (a deadlock) are dropped; findings describe them.
            t.kernels.retain(|k| k.end_ns != NEVER);
            t.collectives
                .retain(|c| c.end_ns != NEVER && c.wait.is_none_or(|w| w.released_ns != NEVER));
            t.marks.retain(|m| m.gpu_ns != NEVER);
            t.stream_waits.retain(|w| w.released_ns != NEVER);
            t.host.retain(|h| h.end_ns != NEVER);
            timeline.ranks.push(state.timeline);
        }
        timeline
    }
}

/// The first poll at or after `at_ns` of a loop polling at `first_poll_ns + k·poll_ns`.
fn next_poll_ns(first_poll_ns: u64, poll_ns: u64, at_ns: u64) -> u64 {
    if at_ns <= first_poll_ns {
        first_poll_ns
    } else {
        first_poll_ns + (at_ns - first_poll_ns).div_ceil(poll_ns) * poll_ns
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
fn collective_of(kind: &OpKind) -> Option<(CollectiveKind, GroupId)> {
    match *kind {
        OpKind::Collective {
            collective, group, ..
        } => Some((collective, group)),
        OpKind::Barrier { group } => Some((CollectiveKind::AllReduce, group)),
        _ => None,
    }
}

fn rank_list(ranks: &[u32]) -> String {
    if ranks.is_empty() {
        return "none".into();
    }
    const SHOWN: usize = 16;
    let mut text: Vec<String> = ranks.iter().take(SHOWN).map(u32::to_string).collect();
    if ranks.len() > SHOWN {
        text.push(format!("… ({} in all)", ranks.len()));
    }
    format!("[{}]", text.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::parse;

    const TWO_RANKS: &str = "torch = \"2.12\"\n[cluster]\nranks = 2\n[groups.world]\neager_init = true\n[tensors]\nx = \"1MiB\"\n";

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
        assert!(
            finding.message.contains("Timeout(ms)=10"),
            "{}",
            finding.message
        );
        assert!(finding.message.contains("10.014 ms"), "{}", finding.message);
        let wait_call = timeline.ranks[0].host.last().unwrap();
        assert_eq!(wait_call.end_ns, 10_034_000);
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
