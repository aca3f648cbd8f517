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
use crate::lifetime::TensorMemory;
use crate::nccl::{plan_collective, CollectivePlan};
use crate::pg::{ProcessGroupNccl, Step};
use crate::race::{AccessKind, Point, RaceDetector};
use crate::random::{apply_jitter, jittered_ns, mix_seed, rank_rng};
use crate::scenario::TensorId;
use crate::scenario::{CollectiveKind, GroupId, OpKind, Priority, Scenario};
use crate::timeline::*;
use host::{next_poll_ns, Cursor, StepLog};
use rustc_hash::FxHashMap;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use watchdog::{Failures, WatchdogStep};

mod host;
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

/// Simulates `scenario` and returns the steps `rank`'s host executed, in order: the
/// simulator's side of the engine-equivalence test (`hw` logs the steps it runs too).
pub fn executed_steps(scenario: &Scenario, rank: u32) -> Vec<Step> {
    let mut engine = Engine::new(scenario, Options::default());
    engine.step_log = Some((rank, Vec::new()));
    engine.run();
    engine
        .step_log
        .take()
        .map(|(_, steps)| steps)
        .unwrap_or_default()
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
    /// Blocking wait (R15) or `wait(timeout)` on the Work of collective record `collective`:
    /// polls at `first_poll_ns + k·poll_ns`, raising at the first poll at or after
    /// `deadline_ns`.
    Polling {
        first_poll_ns: u64,
        poll_ns: u64,
        deadline_ns: u64,
        collective: u32,
        own_timeout_ns: Option<u64>,
    },
    /// Lazy communicator init (R8): waiting for the group's other ranks.
    CommInit,
    /// Waiting for the simulation to catch up with the host's time, then running the same step
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
    /// The next op of the program.
    pc: usize,
    blocked: Blocked,
    /// The op the host is in (blocked in, for deadlock findings).
    blocked_op: usize,
    /// ProcessGroupNCCL of this rank: what each op is made of.
    pg: ProcessGroupNccl,
    /// The current op's steps and the host's place in them.
    cursor: Cursor,
    /// The event instance of every slot the steps recorded.
    slot_instance: Vec<Instance>,
    /// Counts the host's resumptions, so that a stale timeout is recognised.
    generation: u64,
    streams: Vec<StreamState>,
    /// Per group: the SeqNum of the last collective the host enqueued.
    group_seq: Vec<u64>,
    /// Fire time of every event instance this rank recorded.
    fired_ns: Vec<u64>,
    /// Stream on which each instance was recorded.
    instance_stream: Vec<u16>,
    waiters: FxHashMap<Instance, Vec<Waiter>>,
    /// Per Work name: the end instance of its latest creation.
    work_end: Vec<Option<Instance>>,
    timeline: RankTimeline,
    scratch: Scratch,
    /// The GPU's SMs and the kernels sharing them (R7, R22).
    gpu: SmScheduler,
    /// The pending `SmTransfer`, if one is scheduled.
    transfer_at_ns: Option<u64>,
    /// The caching allocator and the lifetime of each tensor (R17–R20).
    memory: MemoryState,
    /// This GPU's compute time relative to the model's (`cluster.rank_speed_spread_pct`).
    compute_speed: f64,
    /// Happens-before of this rank's host and streams, for data races (R21).
    race: RaceDetector,
}

/// Where each tensor lives and what keeps its block from being reused (R17–R20), and the
/// state of an allocation that waits for the device before releasing the cache.
struct MemoryState {
    books: TensorMemory<Instance>,
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
    /// Factor on the data-moving time, the same for every rank (`cluster.kernel_jitter`).
    jitter: f64,
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
    gemm_ns_by_op: Vec<u64>,
    /// Per collective or barrier op: how NCCL runs it (channels, duration; R22, R24).
    /// How NCCL runs each (collective or barrier op, call size) (R22, R24, R25).
    plans: FxHashMap<(usize, u64), CollectivePlan>,
    findings: Vec<Finding>,
    /// Faults, watchdogs, heartbeat monitors (R26–R29).
    failures: Failures,
    events_processed: u64,
    step_log: StepLog,
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
                for (group_id, group) in scenario.groups.iter().enumerate() {
                    if group.ranks.binary_search(&rank).is_ok() {
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
                    pg: ProcessGroupNccl::new(scenario, rank),
                    cursor: Cursor::default(),
                    slot_instance: Vec::new(),
                    generation: 0,
                    streams,
                    group_seq: vec![0; scenario.groups.len()],
                    fired_ns: Vec::new(),
                    instance_stream: Vec::new(),
                    waiters: FxHashMap::default(),
                    work_end: vec![None; scenario.works.len()],
                    timeline: RankTimeline {
                        rank,
                        streams: streams_info,
                        ..RankTimeline::default()
                    },
                    scratch: Scratch::default(),
                    gpu: SmScheduler::new(scenario.cluster.gpu.sms),
                    transfer_at_ns: None,
                    memory: MemoryState::new(scenario),
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
            gemm_ns_by_op,
            findings: Vec::new(),
            failures: Failures::new(scenario),
            events_processed: 0,
            step_log: None,
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
                    state.blocked = Blocked::Running;
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
        let end_ns = now_ns + apply_jitter(full_ns, slot.jitter);
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

    fn rendezvous_slot(
        &mut self,
        group: GroupId,
        seq: u64,
        collective: CollectiveKind,
        op: usize,
        iteration: u32,
        jitter: f64,
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
            jitter,
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
                    rendezvous.collective.op_type(),
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
