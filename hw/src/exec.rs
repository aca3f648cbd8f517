//! The ProcessGroupNCCL re-enactment: each scenario op becomes the steps `sim::pg` lowers it to
//! (the one implementation of R8–R15, R18, R25 both engines share; a Work's timeout and its
//! async error are decided by `sim::pg::work`), and each step the host and GPU calls PyTorch
//! makes for it, issued through the [`Device`] trait; every call is written down so that the
//! Timeline can be assembled once the GPU has drained.
//!
//! [`crate::cuda::CudaDevice`] is the thin real implementation of [`Device`]; the tests below
//! use the recording [`crate::fake`] device, so the mapping of steps onto GPU calls is checked
//! without a GPU. (Over 800 lines: about 1,130 of code — the steps, the faults hw injects, the
//! run log — and 670 of unit tests. Kept as one piece because every step arm, the injected
//! faults and the run log share the executor's live CUDA handles and its log's ordering, which
//! the engine-equivalence test compares call by call; moving the run log and the fault handling
//! into files of their own would bring it under.)

use crate::error::HwError;
use crate::options::StandIn;
use crate::plan::{GroupPlan, RankPlan};
use sim::allocator::MemoryPeaks;
use sim::lifetime::{AllocStep, Place};
use sim::pg::faults::{host_effect, CollectiveFate, HostEffect, RankFaults};
/// A kernel the executor launches: the lowering's own (a spin of `duration_ns` by
/// `%globaltimer`, each block alone on its SM with `own_sm`; or a cuBLAS GEMM).
pub use sim::pg::Kernel;
use sim::pg::{work, work_text, NcclCall, ProcessGroupNccl, Step};
use sim::random::apply_jitter;
use sim::scenario::{CollectiveKind, Op, OpKind, P2pTransfer, Scenario, TensorId};
use sim::timeline::{
    CacheRelease, CollectiveRecord, Finding, FindingKind, HostCall, KernelClass, KernelRecord,
    MarkRecord, OpRef, QueryRecord, RankTimeline, StreamRef, StreamWaitRecord, ThreadKind,
    WaitRecord, WatchdogEvent, WatchdogRecord,
};
use std::collections::HashMap;

/// The duration of a stand-in collective that never completes (a peer never joins, the
/// network failed): the spin kernel runs until the process ends.
pub const FOREVER_NS: u64 = u64::MAX;

/// Handle of a timed CUDA event in the device's pool.
pub type Ev = usize;

/// The tensor memory of the rank: the simulator's own books ([`sim::lifetime`]) keyed by CUDA
/// events; the executor carries their steps out with real `cuMemAlloc`/`cuMemFree` and a real
/// device-wide synchronise before a cache release (R17–R20).
pub type Memory = sim::lifetime::TensorMemory<Ev>;

/// What a communicator is asked to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommCall<'a> {
    Collective {
        collective: CollectiveKind,
        tensor: TensorId,
        /// Bytes of this call: the tensor, or a slice of a list of tensors (R25).
        bytes: u64,
    },
    /// `barrier()`: a 1-element (u8) all_reduce (R14).
    Barrier,
    /// `batch_isend_irecv`: every transfer's send or receive of its whole tensor, to or from the
    /// rank `shift` places along the group, in one NCCL group (R25).
    Batch { transfers: &'a [P2pTransfer] },
}

/// A Work handed to the watchdog (R10e, R26).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchedWork {
    pub end: Ev,
    pub enqueue_ns: u64,
    /// The group's timeout, counted from the enqueue (R26).
    pub timeout_ns: u64,
    /// As PyTorch names it in the timeout message.
    pub description: String,
    /// An injected NCCL async error (`[[fault]] kind = "async_error"`): after this long since
    /// the enqueue the watchdog finds it on the communicator, and why it happened.
    pub async_error: Option<(u64, String)>,
}

/// The GPU calls of a ProcessGroupNCCL, on one device. Streams are [`StreamRef`]s of the
/// [`RankPlan`]; every event is timed.
pub trait Device {
    /// Host clock: nanoseconds since the run's origin, monotonic.
    fn now_ns(&self) -> u64;
    /// `cudaEventRecord` of a fresh timed event.
    fn record(&mut self, stream: StreamRef) -> Result<Ev, HwError>;
    /// `cudaStreamWaitEvent` (R5).
    fn stream_wait(&mut self, stream: StreamRef, event: Ev) -> Result<(), HwError>;
    /// `cudaEventQuery`: never blocks (R13).
    fn query(&mut self, event: Ev) -> Result<bool, HwError>;
    fn event_sync(&mut self, event: Ev) -> Result<(), HwError>;
    fn stream_sync(&mut self, stream: StreamRef) -> Result<(), HwError>;
    /// `cudaDeviceSynchronize`: every stream, the internal ones included (R14).
    fn device_sync(&mut self) -> Result<(), HwError>;
    fn launch(&mut self, stream: StreamRef, kernel: Kernel) -> Result<(), HwError>;
    /// Creates the group's communicator unless it exists (R8); blocks for the bootstrap.
    fn init_comm(&mut self, group: &GroupPlan) -> Result<(), HwError>;
    fn collective(
        &mut self,
        stream: StreamRef,
        group: &GroupPlan,
        call: CommCall<'_>,
    ) -> Result<(), HwError>;
    /// `.item()`: one element copied to pageable host memory on `stream`, then the stream
    /// synchronised (R14).
    fn read_element(&mut self, stream: StreamRef, tensor: TensorId) -> Result<(), HwError>;
    fn host_sleep(&mut self, duration_ns: u64);
    /// Hands a Work to the watchdog (R10e).
    fn watch(&mut self, work: WatchedWork);
    /// The watchdog's verdict, once it aborted the communicators (R26).
    fn watchdog_failure(&mut self) -> Option<HwError>;
    /// Aborts every communicator (`ncclCommAbort`), as a timed-out blocking wait does.
    fn abort_comms(&mut self);
    /// Host-axis time of an event, once the GPU drained.
    fn event_time_ns(&mut self, event: Ev) -> Result<u64, HwError>;
    /// A new segment of the caching allocator (`cudaMalloc`, R17); `fill` writes a non-zero
    /// pattern (segments of tensors that live for the whole run).
    fn malloc(&mut self, segment: u32, bytes: u64, fill: bool) -> Result<(), HwError>;
    /// Gives a released segment back (`cudaFree`, R20); `deferred` (expandable segments) keeps
    /// it until the run ends, so that the release costs no device-wide synchronise.
    fn free_segment(&mut self, segment: u32, deferred: bool);
    /// The tensor now lives at `place` (`None`: not allocated).
    fn bind(&mut self, tensor: TensorId, place: Option<Place>);
}

#[derive(Debug, Clone, Copy)]
struct Pending<T> {
    iteration: u32,
    op: OpRef,
    rest: T,
}

#[derive(Debug, Clone, Copy)]
struct KernelLog {
    stream: StreamRef,
    class: KernelClass,
    enqueue_ns: u64,
    start: Ev,
    end: Ev,
}

#[derive(Debug, Clone, Copy)]
struct WaitLog {
    op: OpRef,
    host_start_ns: u64,
    host_end_ns: u64,
    stream: StreamRef,
    released: Ev,
    completed_at_return: bool,
}

#[derive(Debug, Clone)]
struct CollectiveLog {
    group: u16,
    seq: u64,
    bytes: u64,
    async_op: bool,
    call_stream: StreamRef,
    run_stream: StreamRef,
    host_start_ns: u64,
    host_end_ns: u64,
    input_ready: Ev,
    start: Ev,
    /// The Work is timed (R6): `start` is its start event.
    timed: bool,
    end: Ev,
    wait: Option<WaitLog>,
}

#[derive(Debug, Clone, Copy)]
struct StreamWaitLog {
    source_stream: StreamRef,
    source: Ev,
    waiting_stream: StreamRef,
    released: Ev,
}

/// Everything the run wrote down, with GPU times still as events.
#[derive(Debug, Default)]
pub struct RunLog {
    host: Vec<HostCall>,
    kernels: Vec<Pending<KernelLog>>,
    collectives: Vec<Pending<CollectiveLog>>,
    marks: Vec<Pending<(u64, Ev)>>,
    stream_waits: Vec<Pending<StreamWaitLog>>,
    queries: Vec<QueryRecord>,
    cache_releases: Vec<CacheRelease>,
    memory: MemoryPeaks,
    /// The faults met, the verdict and the end of the process, as the Timeline's `watchdog`.
    pub records: Vec<WatchdogRecord>,
    /// The verdict that ended the run early, as the Timeline's `findings`.
    pub findings: Vec<Finding>,
    /// Whether the run ended before its program did (a timeout, an async error, a dead
    /// process): the GPU may still hold work that will never end.
    pub ended_early: bool,
}

impl RunLog {
    /// Turns events into host-axis times and builds the rank's Timeline part. `time` is
    /// `None` for an event that never fired (behind a collective that never completes): a
    /// record with such a time is left out, as the simulator leaves out what never happened.
    pub fn resolve(
        self,
        plan: &RankPlan,
        mut time: impl FnMut(Ev) -> Result<Option<u64>, HwError>,
    ) -> Result<RankTimeline, HwError> {
        let mut kernels = Vec::with_capacity(self.kernels.len());
        for k in &self.kernels {
            let (Some(start_ns), Some(end_ns)) = (time(k.rest.start)?, time(k.rest.end)?) else {
                continue;
            };
            kernels.push(KernelRecord {
                iteration: k.iteration,
                op: k.op,
                stream: k.rest.stream,
                class: k.rest.class,
                enqueue_ns: k.rest.enqueue_ns,
                start_ns,
                end_ns,
            });
        }
        let mut collectives = Vec::with_capacity(self.collectives.len());
        for c in self.collectives {
            let r = c.rest;
            let (Some(kernel_start_ns), Some(input_ready_ns), Some(end_ns)) =
                (time(r.start)?, time(r.input_ready)?, time(r.end)?)
            else {
                continue;
            };
            let wait = match r.wait {
                None => None,
                Some(w) => time(w.released)?.map(|released_ns| WaitRecord {
                    op: w.op,
                    host_start_ns: w.host_start_ns,
                    host_end_ns: w.host_end_ns,
                    stream: w.stream,
                    released_ns,
                    completed_at_return: w.completed_at_return,
                }),
            };
            collectives.push(CollectiveRecord {
                iteration: c.iteration,
                op: c.op,
                group: r.group,
                seq: r.seq,
                bytes: r.bytes,
                async_op: r.async_op,
                call_stream: r.call_stream,
                run_stream: r.run_stream,
                host_start_ns: r.host_start_ns,
                host_end_ns: r.host_end_ns,
                input_ready_ns,
                kernel_start_ns,
                // The kernel starts at the event recorded just before it: the start event.
                work_start_ns: r.timed.then_some(kernel_start_ns),
                // R16: when the last rank arrived is not observable from one rank.
                data_start_ns: kernel_start_ns,
                end_ns,
                last_rank: None,
                wait,
            });
        }
        let mut marks = Vec::with_capacity(self.marks.len());
        for m in &self.marks {
            let Some(gpu_ns) = time(m.rest.1)? else {
                continue;
            };
            marks.push(MarkRecord {
                iteration: m.iteration,
                mark: m.op,
                host_ns: m.rest.0,
                gpu_ns,
            });
        }
        let mut stream_waits = Vec::with_capacity(self.stream_waits.len());
        for w in &self.stream_waits {
            let (Some(source_ns), Some(released_ns)) =
                (time(w.rest.source)?, time(w.rest.released)?)
            else {
                continue;
            };
            stream_waits.push(StreamWaitRecord {
                iteration: w.iteration,
                op: w.op,
                source_stream: w.rest.source_stream,
                source_ns,
                waiting_stream: w.rest.waiting_stream,
                released_ns,
            });
        }
        Ok(RankTimeline {
            stands_for: Default::default(),
            rank: plan.rank,
            streams: plan.streams.clone(),
            host: self.host,
            kernels,
            collectives,
            marks,
            stream_waits,
            queries: self.queries,
            memory: self.memory,
            cache_releases: self.cache_releases,
            // The race detector is the simulator's: the GPU shows no races by itself.
            races: Vec::new(),
            // A program that catches is refused before it runs (`refusal`).
            exceptions: Vec::new(),
            // The process's end is the launcher's to see (`c10dsim hw` reports its exit).
            end: None,
        })
    }
}

/// Why rank `rank`'s part of the scenario cannot run on hardware, if it cannot: a `catch`
/// (no `wait()` of hw raises an exception a program could catch) or a fault hardware cannot
/// produce; `alone` when the other ranks are not run (the downscale).
pub(crate) fn not_on_hardware(scenario: &Scenario, rank: u32, alone: bool) -> Option<String> {
    if let Some(op) = scenario.ops.iter().find(|op| op.catch && op.runs_on(rank)) {
        return Some(format!(
            "op {:?} (line {}) has catch = true: on hardware no wait() raises a DistBackendError the program could catch (hw ends the run at a timeout or an async error, R15, R27); the simulator enacts it",
            op.display_name(),
            op.line
        ));
    }
    RankFaults::new(scenario, rank).not_on_hardware(alone)
}

/// A Work as the executor needs it for `wait()` and the watchdog.
#[derive(Debug, Clone)]
struct WorkState {
    end: Ev,
    /// The NCCL kernel's enqueue: the Work's timeout counts from it (R26).
    enqueue_ns: u64,
    description: String,
    group: usize,
    iteration: u32,
    op: OpRef,
}

/// The NCCL call between its [`Step::Nccl`] and its [`Step::Watch`].
#[derive(Debug, Clone)]
struct IssuedCall {
    call: NcclCall,
    enqueue_ns: u64,
    input_ready: Ev,
    start: Ev,
    /// The injected async error of a faulted collective: after how long, and why.
    async_error: Option<(u64, String)>,
    /// Whether that error fails this Work itself (this rank's network, R27).
    fails_work: bool,
}

/// Runs a scenario's program for one rank on a [`Device`]: the steps ProcessGroupNCCL makes of
/// each op ([`sim::pg`]), one device call (or a few) per step.
pub struct Executor<'a, D: Device> {
    scenario: &'a Scenario,
    plan: &'a RankPlan,
    device: &'a mut D,
    pg: ProcessGroupNccl,
    /// The `[[fault]]`s of this rank, and (downscaled) what the others' do to its collectives.
    faults: RankFaults<'a>,
    /// The `wait()` that raised in the main thread, rather than the watchdog (R26): a polling
    /// one that timed out (R15), or one on a Work an async error failed (R27). Its iteration
    /// and op, which the finding names, as the simulator's does.
    wait_raised: Option<(u32, OpRef)>,
    /// The error instant of every Work an NCCL async error failed, by its end event (R27).
    failed_ends: HashMap<Ev, u64>,
    /// Every step run, in order (the engine-equivalence test compares it with the simulator's).
    #[cfg(test)]
    executed: Vec<Step>,
    /// The event and stream of every slot.
    slots: Vec<(Ev, StreamRef)>,
    /// Per stream: the event recorded last, while nothing else followed it; a kernel launched
    /// next starts at that event.
    last_record: Vec<Option<Ev>>,
    /// Per collective record.
    works: Vec<WorkState>,
    issued: Option<IssuedCall>,
    call_start_ns: u64,
    /// The collective record the current call made.
    call_collective: Option<usize>,
    /// The `wait()` under way: its log, until it returns.
    wait: Option<WaitLog>,
    log: RunLog,
    memory: Memory,
}

impl<'a, D: Device> Executor<'a, D> {
    pub fn new(scenario: &'a Scenario, plan: &'a RankPlan, device: &'a mut D) -> Self {
        Executor {
            scenario,
            plan,
            device,
            pg: ProcessGroupNccl::new(scenario, plan.rank),
            faults: RankFaults::new(scenario, plan.rank),
            wait_raised: None,
            failed_ends: HashMap::new(),
            #[cfg(test)]
            executed: Vec::new(),
            slots: Vec::new(),
            last_record: vec![None; plan.streams.len()],
            works: Vec::new(),
            issued: None,
            call_start_ns: 0,
            call_collective: None,
            wait: None,
            log: RunLog::default(),
            memory: Memory::new(scenario),
        }
    }

    /// Before the program: every tensor that no `alloc` creates gets its segment (R17), and the
    /// steps `sim::pg` runs in `init_process_group` (R8, eager init) are run.
    pub fn setup(&mut self) -> Result<(), HwError> {
        for (tensor, step) in self.memory.static_steps() {
            let place = match step {
                AllocStep::NewSegment { place, bytes } => {
                    self.device.malloc(place.segment, bytes, true)?;
                    place
                }
                AllocStep::Cached(place) => place,
                AllocStep::NeedsRelease { .. } | AllocStep::OutOfMemory => {
                    return Err(HwError::OutOfMemory(format!(
                        "tensor {:?} ({} B) does not fit in the {} B the allocator may reserve",
                        self.scenario.tensors[tensor].name,
                        self.scenario.tensors[tensor].size_bytes,
                        self.scenario.memory.capacity_bytes
                    )))
                }
            };
            self.device.bind(tensor, Some(place));
        }
        let mut steps = Vec::new();
        self.pg.prologue(self.scenario, &mut steps);
        for step in steps {
            #[cfg(test)]
            self.executed.push(step);
            let Step::EagerInit { group } = step else {
                unreachable!("the prologue only creates communicators, not {step}")
            };
            self.device.init_comm(self.plan.group(group))?;
        }
        Ok(())
    }

    /// The steps run so far, in order.
    #[cfg(test)]
    pub fn executed(&self) -> &[Step] {
        &self.executed
    }

    /// Why this rank's hardware run cannot produce the scenario's faults, if it cannot (exit
    /// 2, before anything runs).
    pub fn refusal(scenario: &Scenario, plan: &RankPlan) -> Option<HwError> {
        not_on_hardware(scenario, plan.rank, plan.stand_in.is_some()).map(HwError::Unsupported)
    }

    /// Every iteration (warm-up ones included, as the simulator does), then a device
    /// synchronise so that every event can be read. A timeout or an NCCL async error ends the
    /// run where the error handling says so (R26, R27, R15), and so does a `die` fault: the
    /// log then holds what ran up to there, the verdict and its finding.
    pub fn run(&mut self) -> Result<RunLog, HwError> {
        if let Some(refusal) = Self::refusal(self.scenario, self.plan) {
            return Err(refusal);
        }
        let outcome = match self.program() {
            Ok(true) => self
                .device
                .device_sync()
                .and_then(|()| self.device.watchdog_failure().map_or(Ok(()), Err)),
            Ok(false) => Ok(()),
            Err(error) => Err(error),
        };
        match outcome {
            Ok(()) => {}
            Err(error @ (HwError::Timeout(_) | HwError::AsyncError(_))) => self.verdict(error)?,
            Err(error) => return Err(error),
        }
        self.log.memory = self.memory.peaks();
        Ok(std::mem::take(&mut self.log))
    }

    /// The program; false when a fault stopped the process before its end.
    fn program(&mut self) -> Result<bool, HwError> {
        let rank = self.plan.rank;
        let mut steps = Vec::new();
        for iteration in 0..self.scenario.repeat {
            for op in self.scenario.ops.iter().filter(|op| op.runs_on(rank)) {
                if let Some(failure) = self.device.watchdog_failure() {
                    return Err(failure);
                }
                if let Some(fault) = self.faults.at(op.index, iteration) {
                    let where_ = format!(
                        "{} (line {}, iteration {iteration})",
                        op.display_name(),
                        op.line
                    );
                    self.note(
                        ThreadKind::Main,
                        WatchdogEvent::Fault,
                        format!("[Rank {rank}] fault: {} at {where_}", fault.kind.key()),
                    );
                    match host_effect(&fault.kind) {
                        HostEffect::Run => {}
                        HostEffect::Skip => continue,
                        HostEffect::Stop => {
                            self.note(
                                ThreadKind::Main,
                                WatchdogEvent::Exit,
                                format!(
                                    "[Rank {rank}] process exited (fault) before {where_}; its \
                                     GPU work vanishes"
                                ),
                            );
                            self.log.ended_early = true;
                            return Ok(false);
                        }
                    }
                }
                steps.clear();
                self.pg.before_op(self.scenario, iteration, op, &mut steps);
                self.pg
                    .op(self.scenario, op, &mut steps)
                    .map_err(|error| HwError::Unsupported(error.0))?;
                for &step in &steps {
                    #[cfg(test)]
                    self.executed.push(step);
                    self.step(iteration, op, step)?;
                }
            }
        }
        Ok(true)
    }

    /// A line of the Timeline's `watchdog` records, at the host's time now.
    fn note(&mut self, thread: ThreadKind, event: WatchdogEvent, message: String) {
        let at_ns = self.device.now_ns();
        self.note_group(None, thread, event, at_ns, message);
    }

    fn note_group(
        &mut self,
        group: Option<usize>,
        thread: ThreadKind,
        event: WatchdogEvent,
        at_ns: u64,
        message: String,
    ) {
        self.log.records.push(WatchdogRecord {
            stands_for: Default::default(),
            rank: self.plan.rank,
            group: group.map(|g| g as u16),
            thread,
            event,
            at_ns,
            message,
        });
    }

    /// The run ends on a timeout or an async error: the finding names the oldest Work not
    /// complete, and hw takes the process down at once (the TearDown of R27 without the dump
    /// wait), whatever the GPU still holds.
    fn verdict(&mut self, error: HwError) -> Result<(), HwError> {
        let at_ns = self.device.now_ns();
        if let (Some((iteration, op)), HwError::AsyncError(message)) = (self.wait_raised, &error) {
            // wait() raised in the main thread: uncaught, the exception ends the process.
            self.note(ThreadKind::Main, WatchdogEvent::Exit, message.clone());
            self.log.findings.push(Finding {
                stands_for: Default::default(),
                kind: FindingKind::AsyncError,
                rank: Some(self.plan.rank),
                iteration: Some(iteration),
                op: Some(op),
                stream: None,
                message: message.clone(),
            });
            self.log.ended_early = true;
            return Ok(());
        }
        let mut oldest = None;
        for work in &self.works {
            if !self.device.query(work.end)? {
                oldest = Some((work.group, work.iteration, work.op));
                break;
            }
        }
        let (kind, event, thread) = match (&error, self.wait_raised) {
            (HwError::AsyncError(_), _) => (
                FindingKind::AsyncError,
                WatchdogEvent::AsyncError,
                ThreadKind::Watchdog,
            ),
            (_, Some(_)) => (
                FindingKind::WaitTimeout,
                WatchdogEvent::Timeout,
                ThreadKind::Main,
            ),
            _ => (
                FindingKind::WatchdogTimeout,
                WatchdogEvent::Timeout,
                ThreadKind::Watchdog,
            ),
        };
        let rank = self.plan.rank;
        let message = format!("[Rank {rank}] {error}");
        let group = oldest.map(|(group, _, _)| group);
        self.note_group(group, thread, event, at_ns, message.clone());
        self.note_group(
            group,
            thread,
            WatchdogEvent::Exit,
            at_ns,
            format!(
                "[Rank {rank}] TORCH_NCCL_ASYNC_ERROR_HANDLING={}: hw takes the process down \
                 now, without waiting for the GPU's work (R27, no dump wait)",
                self.scenario.env.async_error_handling.number()
            ),
        );
        // The wait() that raised, else the oldest Work not complete.
        let at = self
            .wait_raised
            .or(oldest.map(|(_, iteration, op)| (iteration, op)));
        self.log.findings.push(Finding {
            stands_for: Default::default(),
            kind,
            rank: Some(rank),
            iteration: at.map(|(iteration, _)| iteration),
            op: at.map(|(_, op)| op),
            stream: None,
            message,
        });
        self.log.ended_early = true;
        Ok(())
    }

    fn step(&mut self, iteration: u32, op: &Op, step: Step) -> Result<(), HwError> {
        let op_ref = op.index as OpRef;
        match step {
            Step::CallStart => {
                self.call_start_ns = self.device.now_ns();
                self.call_collective = None;
            }
            Step::CallEnd => {
                let end_ns = self.device.now_ns();
                self.log.host.push(HostCall {
                    iteration,
                    op: op_ref,
                    start_ns: self.call_start_ns,
                    end_ns,
                });
                if let Some(record) = self.call_collective {
                    self.log.collectives[record].rest.host_end_ns = end_ns;
                }
            }
            // A real call takes its own time.
            Step::HostCost { .. } | Step::CollectiveCost(_) => {}
            Step::HostSleep { duration_ns } => self.device.host_sleep(duration_ns),
            Step::Record { stream, slot } => {
                debug_assert_eq!(slot as usize, self.slots.len());
                let ev = self.record(stream)?;
                self.slots.push((ev, stream));
            }
            Step::StreamWait { stream, slot } => {
                let (source, source_stream) = self.slots[slot as usize];
                self.stream_wait(iteration, op_ref, (source_stream, source), stream)?;
            }
            Step::Launch {
                stream,
                class,
                kernel,
                jitter,
            } => {
                let kernel = match kernel {
                    Kernel::Spin {
                        duration_ns,
                        blocks,
                        own_sm,
                    } => Kernel::Spin {
                        duration_ns: apply_jitter(duration_ns, jitter),
                        blocks,
                        own_sm,
                    },
                    // A real GEMM has its own jitter.
                    gemm @ Kernel::Gemm { .. } => gemm,
                };
                self.kernel(iteration, op_ref, stream, class, kernel)?;
            }
            // The watchdog's verdict is checked before every op.
            Step::CheckComm { .. } => {}
            Step::InitComm { group, .. } | Step::EagerInit { group } => {
                self.device.init_comm(self.plan.group(group))?
            }
            Step::ReleaseShelf { group } => self.release_shelf(group)?,
            Step::Nccl(call) => self.nccl(iteration, op, call)?,
            Step::Watch {
                collective,
                end,
                stash,
                holder,
            } => {
                let held = holder.program_holds();
                self.watch(
                    iteration,
                    op,
                    collective,
                    self.slots[end as usize].0,
                    stash,
                    held,
                )
            }
            Step::DropHandle { collective } => self.memory.drop_handle(collective as usize),
            Step::Wait {
                collective,
                stream,
                end,
                ..
            } => {
                // A Work that failed with an NCCL async error raises in wait() (R27).
                self.raise_if_failed(iteration, op, collective)?;
                // The Work's end event, or the event that completes a future's callback.
                let (event, source_stream) = self.slots[end as usize];
                let host_start_ns = self.device.now_ns();
                let released =
                    self.stream_wait(iteration, op_ref, (source_stream, event), stream)?;
                self.wait = Some(WaitLog {
                    op: op_ref,
                    host_start_ns,
                    host_end_ns: host_start_ns,
                    stream,
                    released,
                    completed_at_return: false,
                });
            }
            Step::ReleaseOnWait { collective } => self.memory.release_on_wait(collective as usize),
            Step::Poll {
                collective,
                interval_ns,
                timeout_ns,
                ..
            } => self.poll(iteration, op, collective, (interval_ns, timeout_ns))?,
            Step::WaitReturn { collective } => {
                let end = self.works[collective as usize].end;
                let mut wait = self.wait.take().expect("wait() returns after it began");
                wait.host_end_ns = self.device.now_ns();
                wait.completed_at_return = self.device.query(end)?;
                // The record keeps the latest wait() on the Work, as the simulator does.
                self.log.collectives[collective as usize].rest.wait = Some(wait);
            }
            Step::Query { slot, .. } => {
                let host_ns = self.device.now_ns();
                let event = self.slots[slot as usize].0;
                let fired = self.device.query(event)?;
                let error_ns = self.failed_ends.get(&event).copied();
                let completed = work::is_completed(fired, error_ns, host_ns);
                self.log.queries.push(QueryRecord {
                    iteration,
                    op: op_ref,
                    host_ns,
                    completed,
                });
            }
            Step::EventSync { slot, .. } => self.device.event_sync(self.slots[slot as usize].0)?,
            Step::StreamSync { stream, .. } => self.device.stream_sync(stream)?,
            Step::DeviceSync { .. } => self.device.device_sync()?,
            Step::Item { stream, tensor, .. } => {
                self.last_record[stream as usize] = None;
                self.device.read_element(stream, tensor)?;
            }
            Step::Alloc { tensor, stream } => self.alloc(iteration, op, tensor, stream)?,
            Step::Free { tensor } => {
                // recordStream (R19): an event on every other stream that used the tensor.
                let mut events = Vec::new();
                for used_on in self.memory.streams_to_record(tensor) {
                    events.push(self.record(used_on)?);
                }
                self.memory.free(tensor, events);
                self.device.bind(tensor, None);
            }
            Step::Mark { mark, stream, .. } => {
                let host_ns = self.device.now_ns();
                let ev = self.record(stream)?;
                self.log.marks.push(Pending {
                    iteration,
                    op: mark as OpRef,
                    rest: (host_ns, ev),
                });
            }
            // The race detector is the simulator's: the GPU shows no races by itself.
            Step::Access { .. } => {}
        }
        Ok(())
    }

    fn record(&mut self, stream: StreamRef) -> Result<Ev, HwError> {
        let ev = self.device.record(stream)?;
        self.last_record[stream as usize] = Some(ev);
        Ok(ev)
    }

    /// `cudaStreamWaitEvent` of `stream` on `source`, and an event after it that times the
    /// release.
    fn stream_wait(
        &mut self,
        iteration: u32,
        op: OpRef,
        (source_stream, source): (StreamRef, Ev),
        stream: StreamRef,
    ) -> Result<Ev, HwError> {
        self.device.stream_wait(stream, source)?;
        let released = self.record(stream)?;
        self.log.stream_waits.push(Pending {
            iteration,
            op,
            rest: StreamWaitLog {
                source_stream,
                source,
                waiting_stream: stream,
                released,
            },
        });
        Ok(released)
    }

    /// R18: Works of `group` never waited on leave the shelf once complete.
    fn release_shelf(&mut self, group: usize) -> Result<(), HwError> {
        let mut completed = Vec::new();
        for end in self.memory.shelf_ends(group) {
            if self.device.query(end)? {
                completed.push(end);
            }
        }
        self.memory
            .release_shelf(group, |end| completed.contains(&end));
        Ok(())
    }

    /// `torch.empty` on the op's stream (R17): from the stream's cache, a new segment, or — at
    /// the capacity — after releasing the cache: the host first waits for the whole device,
    /// unless expandable segments (R20).
    fn alloc(
        &mut self,
        iteration: u32,
        op: &Op,
        tensor: TensorId,
        stream: StreamRef,
    ) -> Result<(), HwError> {
        let host_start_ns = self.device.now_ns();
        let mut passed = Vec::new();
        for event in self.memory.pending_events() {
            if self.device.query(event)? {
                passed.push(event);
            }
        }
        self.memory.collect_pending(|event| passed.contains(&event));
        let size_bytes = self.scenario.tensor_bytes(tensor);
        // At most one release: after it the request fits or never will.
        for _ in 0..2 {
            match self.memory.allocate(tensor, size_bytes, stream) {
                AllocStep::Cached(place) => {
                    self.device.bind(tensor, Some(place));
                    return Ok(());
                }
                AllocStep::NewSegment { place, bytes } => {
                    self.device.malloc(place.segment, bytes, false)?;
                    self.device.bind(tensor, Some(place));
                    return Ok(());
                }
                AllocStep::NeedsRelease { synchronises } => {
                    let device_idle_ns = if synchronises {
                        self.device.device_sync()?;
                        Some(self.device.now_ns())
                    } else {
                        None
                    };
                    let segments = self.memory.release_cache();
                    for &segment in &segments {
                        self.device.free_segment(segment, !synchronises);
                    }
                    self.log.cache_releases.push(CacheRelease {
                        iteration,
                        op: op.index as OpRef,
                        host_start_ns,
                        host_end_ns: self.device.now_ns(),
                        device_idle_ns,
                        segments_freed: segments.len() as u32,
                    });
                }
                AllocStep::OutOfMemory => break,
            }
        }
        Err(HwError::OutOfMemory(format!(
            "{} B for {:?} at {} (line {}) do not fit in the {} B the allocator may reserve, even \
             after releasing the cache (R20)",
            size_bytes,
            self.scenario.tensors[tensor].name,
            op.display_name(),
            op.line,
            self.scenario.memory.capacity_bytes
        )))
    }

    fn kernel(
        &mut self,
        iteration: u32,
        op: OpRef,
        stream: StreamRef,
        class: KernelClass,
        kernel: Kernel,
    ) -> Result<(), HwError> {
        // The launch's host time is taken before the start event is recorded, so that the
        // event (which fires at once on an idle stream) never precedes it.
        let enqueue_ns = self.device.now_ns();
        let start = self.record(stream)?;
        self.device.launch(stream, kernel)?;
        let end = self.record(stream)?;
        self.log.kernels.push(Pending {
            iteration,
            op,
            rest: KernelLog {
                stream,
                class,
                enqueue_ns,
                start,
                end,
            },
        });
        Ok(())
    }

    /// The NCCL kernel (R10c), or its stand-in when downscaled; it starts at the event recorded
    /// just before it on its stream, else at one recorded now.
    fn nccl(&mut self, iteration: u32, op: &Op, call: NcclCall) -> Result<(), HwError> {
        let g = self.plan.group(call.group);
        let enqueue_ns = self.device.now_ns();
        let start = match self.last_record[call.stream as usize] {
            Some(ev) => ev,
            None => self.record(call.stream)?,
        };
        // Downscaled, the other ranks' faults (and this rank's armed one) decide whether the
        // stand-in ever ends; with every rank run, the real NCCL call does.
        let fate = match self.plan.stand_in {
            Some(_) => self.faults.collective_fate(op, iteration, call.group),
            None => CollectiveFate::Completes,
        };
        let (async_error, fails_work) = match &fate {
            CollectiveFate::AsyncError {
                after_ns,
                why,
                fails_work,
            } => (Some((*after_ns, why.clone())), *fails_work),
            _ => (None, false),
        };
        match self.plan.stand_in {
            Some(_) if fate != CollectiveFate::Completes => {
                let ranks = &self.scenario.groups[call.group].ranks;
                let model = sim::nccl::plan_collective(self.scenario, ranks, call.kind, call.bytes);
                let spin = Kernel::Spin {
                    duration_ns: FOREVER_NS,
                    blocks: model.channels,
                    own_sm: true,
                };
                self.device.launch(call.stream, spin)?
            }
            None | Some(StandIn::Nccl) => {
                let comm_call = match (&op.kind, call.tensor) {
                    (OpKind::BatchP2p { transfers, .. }, _) => CommCall::Batch { transfers },
                    (_, Some(tensor)) => CommCall::Collective {
                        collective: call.kind,
                        tensor,
                        bytes: call.bytes,
                    },
                    (_, None) => CommCall::Barrier,
                };
                self.device.collective(call.stream, g, comm_call)?
            }
            Some(stand_in) => {
                // The simulator's plan of this collective for the real group (R22, R24): its
                // channels become the spin's blocks, its duration the spin's unless fixed.
                let ranks = &self.scenario.groups[call.group].ranks;
                let model = sim::nccl::plan_collective(self.scenario, ranks, call.kind, call.bytes);
                let duration_ns = match stand_in {
                    StandIn::Spin { duration_ns } => duration_ns,
                    _ => apply_jitter(model.duration_ns, call.jitter),
                };
                let spin = Kernel::Spin {
                    duration_ns,
                    blocks: model.channels,
                    own_sm: true,
                };
                self.device.launch(call.stream, spin)?
            }
        }
        self.last_record[call.stream as usize] = None;
        self.issued = Some(IssuedCall {
            call,
            enqueue_ns,
            input_ready: self.slots[call.input_ready as usize].0,
            start,
            async_error,
            fails_work,
        });
        Ok(())
    }

    /// R10e / R11: the watchdog tracks every collective, sync ones too.
    fn watch(
        &mut self,
        iteration: u32,
        op: &Op,
        collective: u32,
        end: Ev,
        stash: Option<TensorId>,
        held: bool,
    ) {
        let issued = self.issued.take().expect("a Work follows its NCCL call");
        let call = issued.call;
        let g = self.plan.group(call.group);
        let description = format!(
            "{} on group {:?}",
            work_text(
                self.scenario,
                op,
                (call.kind, call.bytes),
                (call.group, call.seq),
                g.timeout_ns
            ),
            g.name
        );
        if let (Some((after_ns, _)), true) = (&issued.async_error, issued.fails_work) {
            self.failed_ends
                .insert(end, work::async_error_ns(issued.enqueue_ns, *after_ns));
        }
        self.device.watch(WatchedWork {
            end,
            enqueue_ns: issued.enqueue_ns,
            timeout_ns: g.timeout_ns,
            description: description.clone(),
            async_error: issued.async_error,
        });
        let op_ref = op.index as OpRef;
        self.log.kernels.push(Pending {
            iteration,
            op: op_ref,
            rest: KernelLog {
                stream: call.stream,
                class: KernelClass::Communication,
                enqueue_ns: issued.enqueue_ns,
                start: issued.start,
                end,
            },
        });
        let record = self.log.collectives.len();
        debug_assert_eq!(record, collective as usize);
        self.log.collectives.push(Pending {
            iteration,
            op: op_ref,
            rest: CollectiveLog {
                group: call.group as u16,
                seq: call.seq,
                bytes: call.bytes,
                async_op: call.async_op,
                call_stream: call.call_stream,
                run_stream: call.stream,
                host_start_ns: self.call_start_ns,
                host_end_ns: self.call_start_ns,
                input_ready: issued.input_ready,
                start: issued.start,
                timed: issued.call.work_start.is_some(),
                end,
                wait: None,
            },
        });
        if let Some(tensor) = stash {
            self.memory
                .keep_alive(tensor, call.group, call.stream, record, end, held);
        }
        self.works.push(WorkState {
            end,
            enqueue_ns: issued.enqueue_ns,
            description,
            group: call.group,
            iteration,
            op: op_ref,
        });
        self.call_collective = Some(record);
    }

    /// Blocking wait or `wait(timeout)`: poll `is_completed()`, sleeping the interval between
    /// polls (R15); a poll that finds the Work failed by an async error raises it (R27), one
    /// that finds the timeout (`sim::pg`'s: the wait's own, else the group's) passed since the
    /// enqueue aborts the communicators and raises (R26's clock, [`work::timed_out`]).
    fn poll(
        &mut self,
        iteration: u32,
        op: &Op,
        collective: u32,
        (interval_ns, limit_ns): (u64, u64),
    ) -> Result<(), HwError> {
        let poll_ns = interval_ns.max(1);
        let (end, enqueue_ns) = {
            let work = &self.works[collective as usize];
            (work.end, work.enqueue_ns)
        };
        while !self.device.query(end)? {
            self.raise_if_failed(iteration, op, collective)?;
            let now_ns = self.device.now_ns();
            if work::timed_out(enqueue_ns, limit_ns, now_ns) {
                self.device.abort_comms();
                self.wait_raised = Some((iteration, op.index as OpRef));
                return Err(HwError::Timeout(format!(
                    "{} ran for {} ms, reaching the {} ms timeout; communicators aborted",
                    self.works[collective as usize].description,
                    now_ns.saturating_sub(enqueue_ns) / 1_000_000,
                    limit_ns / 1_000_000
                )));
            }
            self.device.host_sleep(poll_ns);
        }
        Ok(())
    }

    /// `wait()` on a Work that an NCCL async error failed by now raises `DistBackendError` in
    /// the main thread (R27, [`work::failed_by`]); the call ends there.
    fn raise_if_failed(&mut self, iteration: u32, op: &Op, collective: u32) -> Result<(), HwError> {
        let work = &self.works[collective as usize];
        let Some(&error_ns) = self.failed_ends.get(&work.end) else {
            return Ok(());
        };
        let now_ns = self.device.now_ns();
        if !work::failed_by(Some(error_ns), now_ns) {
            return Ok(());
        }
        let message = work::async_error_raised(self.plan.rank, &work.description, error_ns, op);
        self.log.host.push(HostCall {
            iteration,
            op: op.index as OpRef,
            start_ns: self.call_start_ns,
            end_ns: now_ns,
        });
        self.wait_raised = Some((iteration, op.index as OpRef));
        Err(HwError::AsyncError(message))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake::FakeDevice;
    use crate::options::Layout;

    pub fn run_fake(text: &str, device: &mut FakeDevice) -> Result<RankTimeline, HwError> {
        let scenario = sim::scenario::parse("fake.toml", text).unwrap();
        let layout = Layout {
            rank: 0,
            world: 1,
            device: 0,
            launched: false,
            stand_in: None,
        };
        let plan = RankPlan::new(&scenario, &layout)?;
        let mut executor = Executor::new(&scenario, &plan, device);
        executor.setup()?;
        let log = executor.run()?;
        log.resolve(&plan, |ev| Ok(device.time_of(ev)))
    }

    /// The log of a run on the fake device that must end early, with its one finding.
    fn run_fake_log(text: &str, device: &mut FakeDevice, stand_in: Option<StandIn>) -> RunLog {
        let scenario = sim::scenario::parse("fake.toml", text).unwrap();
        let layout = Layout {
            rank: 0,
            world: 1,
            device: 0,
            launched: false,
            stand_in,
        };
        let plan = RankPlan::new(&scenario, &layout).unwrap();
        let mut executor = Executor::new(&scenario, &plan, device);
        executor.setup().unwrap();
        let log = executor.run().unwrap();
        assert!(log.ended_early);
        log
    }

    fn only_finding(text: &str, device: &mut FakeDevice) -> Finding {
        let log = run_fake_log(text, device, None);
        assert_eq!(log.findings.len(), 1, "{:?}", log.findings);
        log.findings[0].clone()
    }

    /// A batch of sends and receives is one NCCL call of all its transfers (R25), on the group's
    /// stream, and the batch's one Work waits as any other.
    #[test]
    fn batch_isend_irecv_is_one_call_of_every_transfer() {
        let text = r#"
[cluster]
ranks = 2
[tensors]
kv = "1MiB"
kv_next = "1MiB"
[[op]]
batch_isend_irecv = [{ send = "kv", shift = 1 }, { recv = "kv_next", shift = -1 }]
work = "exchange"
[[op]]
wait = "exchange"
"#;
        let mut device = FakeDevice::default();
        let rank = run_fake(text, &mut device).unwrap();
        let batches: Vec<&String> = device
            .calls
            .iter()
            .filter(|c| c.contains("batch"))
            .collect();
        assert_eq!(
            batches,
            ["nccl s1 batch [send t0 +1, recv t1 -1] world"],
            "{:?}",
            device.calls
        );
        assert_eq!(rank.collectives.len(), 1);
        assert_eq!(rank.collectives[0].bytes, 1 << 20);
        assert!(rank.collectives[0].wait.is_some());
    }

    const ASYNC: &str = r#"
[cluster]
ranks = 1
[tensors]
grad = "1MiB"
[streams]
side = {}
[[op]]
all_reduce = "grad"
async_op = true
work = "w"
[[op]]
set_stream = "side"
[[op]]
wait = "w"
[[op]]
is_completed = "w"
"#;

    #[test]
    fn the_executor_runs_the_process_groups_steps_and_nothing_else() {
        let text = ASYNC.replace("[tensors]", "[groups.world]\neager_init = true\n[tensors]");
        let scenario = sim::scenario::parse("fake.toml", &text).unwrap();
        let layout = Layout {
            rank: 0,
            world: 1,
            device: 0,
            launched: false,
            stand_in: None,
        };
        let plan = RankPlan::new(&scenario, &layout).unwrap();
        let mut device = FakeDevice::default();
        let mut executor = Executor::new(&scenario, &plan, &mut device);
        executor.setup().unwrap();
        executor.run().unwrap();
        let mut pg = ProcessGroupNccl::new(&scenario, 0);
        let mut expected = Vec::new();
        pg.prologue(&scenario, &mut expected);
        for op in &scenario.ops {
            pg.before_op(&scenario, 0, op, &mut expected);
            pg.op(&scenario, op, &mut expected).unwrap();
        }
        assert_eq!(executor.executed(), expected);
        assert!(expected.len() > scenario.ops.len());
        // R8, eager: pg's prologue created the communicator before the program; no
        // collective bootstraps it again.
        assert_eq!(expected[0], Step::EagerInit { group: 0 });
        assert!(!expected
            .iter()
            .any(|step| matches!(step, Step::InitComm { group: 0, .. })));
        assert_eq!(device.calls[0], "init_comm world");
    }

    #[test]
    fn async_all_reduce_is_r10_and_wait_is_r12() {
        let mut device = FakeDevice::default();
        let rank = run_fake(ASYNC, &mut device).unwrap();
        // Streams: default 0, side 1, nccl:world 2.
        assert_eq!(
            device.calls,
            [
                "init_comm world",
                "device_sync", // the process's first communicator then waits for the device (R8)
                "record s0 e0", // input-ready on the current stream (R10a)
                "wait s2 e0",  // syncStream
                "record s2 e1", // release = kernel start
                "nccl s2 all_reduce world",
                "record s2 e2", // end event (R10d)
                "wait s1 e2",   // wait() blocks the stream current at the call (R12)
                "record s1 e3",
                "query e2 true", // completed_at_return
                "query e2 true", // is_completed (R13)
                "device_sync",
            ]
        );
        assert_eq!(device.watched.len(), 1, "R10e: handed to the watchdog");
        let c = &rank.collectives[0];
        assert_eq!(
            (c.call_stream, c.run_stream, c.seq, c.async_op),
            (0, 2, 1, true)
        );
        let wait = c.wait.unwrap();
        assert_eq!((wait.op, wait.stream), (2, 1));
        assert_eq!(rank.stream_waits.len(), 2);
        assert_eq!(rank.stream_waits[1].source_stream, 2);
        assert_eq!(rank.stream_waits[1].waiting_stream, 1);
        assert_eq!(rank.kernels[0].class, KernelClass::Communication);
        assert_eq!(rank.queries.len(), 1);
        assert_eq!(rank.host.len(), 4);
        assert_eq!(c.data_start_ns, c.kernel_start_ns);
        assert_eq!(c.last_rank, None);
    }

    #[test]
    fn sync_collective_differs_by_profile() {
        let text = r#"
[cluster]
ranks = 1
[tensors]
grad = "1MiB"
[[op]]
all_reduce = "grad"
"#;
        let mut v2_12 = FakeDevice::default();
        let rank = run_fake(text, &mut v2_12).unwrap();
        assert_eq!(
            v2_12.calls,
            [
                "init_comm world",
                "device_sync", // the process's first communicator then waits for the device (R8)
                "record s0 e0",
                "nccl s0 all_reduce world", // R11: on the current stream
                "record s0 e1",
                "device_sync"
            ]
        );
        assert_eq!(rank.collectives[0].run_stream, 0);
        assert!(rank.collectives[0].wait.is_none());
        assert_eq!(v2_12.watched.len(), 1, "the watchdog still tracks it (R11)");

        let mut v2_5 = FakeDevice::default();
        let rank = run_fake(&format!("torch = \"2.5\"\n{text}"), &mut v2_5).unwrap();
        assert_eq!(
            v2_5.calls,
            [
                "init_comm world",
                "device_sync", // the process's first communicator then waits for the device (R8)
                "record s0 e0",
                "wait s1 e0",
                "record s1 e1",
                "nccl s1 all_reduce world",
                "record s1 e2",
                "wait s0 e2", // the wrapper's wait()
                "record s0 e3",
                "query e2 true",
                "device_sync"
            ]
        );
        let c = &rank.collectives[0];
        assert_eq!(c.run_stream, 1);
        assert_eq!(
            c.wait.unwrap().op,
            0,
            "the implicit wait names the collective"
        );
    }

    #[test]
    fn blocking_wait_polls_with_the_profile_interval() {
        let text = ASYNC.replace(
            "[cluster]",
            "[env]\nTORCH_NCCL_BLOCKING_WAIT = 1\n[cluster]",
        );
        let mut device = FakeDevice {
            query_answers: [false, false, false].into_iter().collect(),
            ..FakeDevice::default()
        };
        let rank = run_fake(&text, &mut device).unwrap();
        let sleeps = device
            .calls
            .iter()
            .filter(|c| c.as_str() == "sleep 1000000")
            .count();
        assert_eq!(sleeps, 3, "R15: 1 ms polls under 2.12");
        let wait = rank.collectives[0].wait.unwrap();
        let host_ns = wait.host_end_ns - wait.host_start_ns;
        assert!((3_000_000..3_100_000).contains(&host_ns), "{host_ns}");
        assert!(wait.completed_at_return);
    }

    #[test]
    fn blocking_wait_times_out_and_aborts() {
        let text = ASYNC.replace("wait = \"w\"", "wait = \"w\"\ntimeout_ms = 2.5");
        let mut device = FakeDevice {
            query_answers: std::iter::repeat_n(false, 100).collect(),
            ..FakeDevice::default()
        };
        let finding = only_finding(&text, &mut device);
        assert_eq!(finding.kind, FindingKind::WaitTimeout);
        // The wait() op raised (as the simulator's finding names it).
        assert_eq!((finding.op, finding.iteration), (Some(2), Some(0)));
        assert!(finding.message.contains("SeqNum=1"), "{}", finding.message);
        assert!(device.aborted);
        let sleeps = device
            .calls
            .iter()
            .filter(|c| c.starts_with("sleep"))
            .count();
        assert_eq!(sleeps, 3, "gave up after the third 1 ms poll passed 2.5 ms");
    }

    #[test]
    fn barrier_item_marks_events_and_kernels() {
        let text = r#"
repeat = 2
warmup = 1
[cluster]
ranks = 1
[tensors]
x = { size = "4KiB", dtype = "bf16" }
[streams]
side = {}
[[op]]
mark = "a"
[[op]]
gemm = [256, 256, 256]
[[op]]
record_event = "e"
[[op]]
wait_event = "e"
stream = "side"
[[op]]
kernel = { us = 100, sms = 8 }
stream = "side"
[[op]]
gpu_sleep_us = 50
[[op]]
barrier = true
[[op]]
item = "x"
[[op]]
host_sleep_us = 20
[[op]]
event_sync = "e"
[[op]]
stream_sync = "side"
[[op]]
device_sync = true
"#;
        let mut device = FakeDevice::default();
        let rank = run_fake(text, &mut device).unwrap();
        let first: Vec<&str> = device.calls.iter().take(20).map(String::as_str).collect();
        assert_eq!(
            first,
            [
                "record s0 e0", // mark
                "record s0 e1", // gemm start
                "launch s0 gemm 256x256x256 bf16",
                "record s0 e2",
                "record s0 e3", // record_event
                "wait s1 e3",   // wait_event on side
                "record s1 e4",
                "record s1 e5",
                "launch s1 spin 100000ns x8 own",
                "record s1 e6",
                "record s0 e7",
                "launch s0 spin 50000ns x1",
                "record s0 e8",
                "init_comm world", // barrier: internal stream, wait, stream sync
                "device_sync", // the process's first communicator then waits for the device (R8)
                "record s0 e9",
                "wait s2 e9",
                "record s2 e10",
                "nccl s2 barrier world",
                "record s2 e11",
            ]
        );
        assert!(device.calls.contains(&"item s0 t0".to_string()));
        assert!(device.calls.contains(&"sleep 20000".to_string()));
        assert!(device.calls.contains(&"event_sync e3".to_string()));
        assert!(device.calls.contains(&"stream_sync s1".to_string()));
        assert_eq!(rank.marks.len(), 2);
        assert_eq!(rank.host.len(), 2 * 12);
        assert_eq!(rank.kernels.len(), 2 * 4);
        let barrier = &rank.collectives[0];
        assert!(barrier.async_op);
        assert_eq!(barrier.bytes, 1);
        let wait = barrier.wait.unwrap();
        assert!(wait.completed_at_return);
        assert_eq!(
            rank.collectives[1].seq, 2,
            "seq counts per group across iterations"
        );
    }

    #[test]
    fn stand_ins_replace_collectives_when_downscaled() {
        let text = r#"
[cluster]
ranks = 4
[tensors]
grad = "64MiB"
[[op]]
all_reduce = "grad"
async_op = true
work = "w"
[[op]]
wait = "w"
"#;
        let scenario = sim::scenario::parse("down.toml", text).unwrap();
        let model = sim::nccl::plan_collective(
            &scenario,
            &[0, 1, 2, 3],
            CollectiveKind::AllReduce,
            64 << 20,
        );
        let channels = model.channels;
        for (stand_in, expected) in [
            (
                StandIn::Spin { duration_ns: 7_000 },
                format!("launch s1 spin 7000ns x{channels} own"),
            ),
            (
                StandIn::Model,
                format!("launch s1 spin {}ns x{channels} own", model.duration_ns),
            ),
            (StandIn::Nccl, "nccl s1 all_reduce world".to_string()),
        ] {
            let layout = Layout {
                rank: 0,
                world: 1,
                device: 0,
                launched: false,
                stand_in: Some(stand_in),
            };
            let plan = RankPlan::new(&scenario, &layout).unwrap();
            let mut device = FakeDevice::default();
            Executor::new(&scenario, &plan, &mut device).run().unwrap();
            assert!(device.calls.contains(&expected), "{:?}", device.calls);
        }
    }

    #[test]
    fn perturbations_delay_the_host_and_the_gpu() {
        let text = r#"
repeat = 2
[cluster]
ranks = 1
[[op]]
label = "late"
gpu_sleep_us = 10
[[perturb]]
ranks = [0]
before = "late"
host_delay_us = 30
gpu_delay_us = 40
iterations = [1]
"#;
        let mut device = FakeDevice::default();
        let rank = run_fake(text, &mut device).unwrap();
        let delays: Vec<_> = rank
            .kernels
            .iter()
            .filter(|k| k.class == KernelClass::Sleep && k.iteration == 1)
            .collect();
        assert_eq!(delays.len(), 2, "the delay kernel and the op's own sleep");
        let sleeps: Vec<&String> = device
            .calls
            .iter()
            .filter(|c| c.contains("sleep 30000") || c.contains("40000ns"))
            .collect();
        assert_eq!(sleeps.len(), 2, "only in iteration 1: {:?}", device.calls);
    }

    /// Every committed hardware scenario (and the shipped catalogue) plans and runs on the fake
    /// device: the GPU runs only ever see programs that the executor accepts.
    #[test]
    fn committed_scenarios_run_on_the_fake_device() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut count = 0;
        for dir in ["tests/data/hw/scenarios", "scenarios"] {
            let Ok(entries) = std::fs::read_dir(root.join(dir)) else {
                continue;
            };
            for entry in entries {
                let path = entry.unwrap().path();
                if path.extension().is_none_or(|e| e != "toml") {
                    continue;
                }
                let text = std::fs::read_to_string(&path).unwrap();
                let scenario = sim::scenario::parse(&path.to_string_lossy(), &text)
                    .unwrap_or_else(|e| panic!("{e}"));
                let plan = crate::fake::rank0_plan(&scenario).unwrap();
                if Executor::<FakeDevice>::refusal(&scenario, &plan).is_some() {
                    continue;
                }
                let mut device = FakeDevice::default();
                let log = Executor::new(&scenario, &plan, &mut device)
                    .run()
                    .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                assert!(
                    device.event_times.len()
                        <= plan.events_per_iteration * scenario.repeat as usize
                );
                let times = device.event_times.clone();
                log.resolve(&plan, |ev| Ok(Some(times[ev]))).unwrap();
                count += 1;
            }
        }
        assert!(count >= 5, "found {count} scenarios");
    }

    /// Drawn delays come from the rank's seeded stream in the simulator's order (host, then
    /// GPU, per perturbation and iteration; a jitter draw per compute kernel), so hw sleeps what
    /// the simulator's rank sleeps.
    #[test]
    fn drawn_delays_and_jitter_follow_the_simulators_stream() {
        let text = r#"
seed = 9
repeat = 3
[cluster]
ranks = 1
kernel_jitter_pct = 5
[[op]]
label = "late"
kernel = { us = 100, sms = 2 }
[[perturb]]
ranks = [0]
before = "late"
host_delay_us = { normal = { mean = 50, std = 10 } }
gpu_delay_us = { uniform = { min = 10, max = 20 } }
"#;
        let scenario = sim::scenario::parse("draws.toml", text).unwrap();
        let perturbation = &scenario.perturbations[0];
        let mut rng = sim::random::rank_rng(9, 0);
        let mut expected = Vec::new();
        for _ in 0..3 {
            let host = perturbation.host_delay.sample_ns(&mut rng);
            let gpu = perturbation.gpu_delay.sample_ns(&mut rng);
            let jitter = scenario.cluster.kernel_jitter;
            let spin = sim::random::jittered_ns(100_000, jitter, &mut rng);
            expected.push(format!("sleep {host}"));
            expected.push(format!("launch s0 spin {gpu}ns x1"));
            expected.push(format!("launch s0 spin {spin}ns x2 own"));
        }
        let mut device = FakeDevice::default();
        run_fake(text, &mut device).unwrap();
        let drawn: Vec<&str> = device
            .calls
            .iter()
            .filter(|c| c.starts_with("sleep") || c.starts_with("launch"))
            .map(String::as_str)
            .collect();
        assert_eq!(drawn, expected);
    }

    /// R20 through the executor: the allocation that does not fit synchronises the device,
    /// frees the cached segment and records the release; with expandable segments it neither
    /// synchronises nor frees before the run ends.
    #[test]
    fn a_cache_release_synchronises_unless_expandable() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/data/hw/scenarios/hw_cache_release.toml");
        let text = std::fs::read_to_string(path).unwrap();
        let mut device = FakeDevice::default();
        let rank = run_fake(&text, &mut device).unwrap();
        let release = rank.cache_releases[0];
        assert_eq!(
            (release.iteration, release.op, release.segments_freed),
            (0, 3, 1)
        );
        assert!(release.device_idle_ns.is_some());
        let alloc_b = device
            .calls
            .iter()
            .position(|c| c == "launch s1 spin 5000000ns x1")
            .unwrap();
        assert_eq!(
            device.calls[alloc_b + 2],
            "device_sync",
            "{:?}",
            device.calls
        );
        assert_eq!(
            &device.memory_calls[..5],
            [
                "malloc s0 629145600",
                "bind t0 Some(\"s0+0\")",
                "bind t0 None",
                "free s0",
                "malloc s1 629145600",
            ]
        );
        assert_eq!(rank.memory.cache_releases, rank.cache_releases.len() as u32);
        assert!(rank.memory.peak_reserved_bytes <= 1 << 30);

        let expandable = text.replace(
            "fraction = 1.0",
            "fraction = 1.0\nexpandable_segments = true",
        );
        let mut device = FakeDevice::default();
        let rank = run_fake(&expandable, &mut device).unwrap();
        assert!(rank
            .cache_releases
            .iter()
            .all(|r| r.device_idle_ns.is_none()));
        // The program's five device_sync ops and the one after the run: none for the releases.
        let syncs = device.calls.iter().filter(|c| *c == "device_sync").count();
        assert_eq!(syncs, 6);
        assert!(device
            .memory_calls
            .contains(&"free s0 deferred".to_string()));
    }

    /// Rank 0's network fails under its all_reduce, NCCL reporting it 1 ms after the enqueue
    /// (as `sim`'s engine tests have it); `extra` goes into `[env]`, `between` between the
    /// all_reduce and `is_completed()`, `wait()`. Run on the fake device as the one-GPU stand-in
    /// does (the device injects the error), and simulated.
    fn failed_work(extra: &str, between: &str) -> (RunLog, sim::timeline::Timeline) {
        let text = format!(
            "[env]\n{extra}\n[cluster]\nranks = 2\n[groups.world]\neager_init = true\ntimeout_s = 1\n[tensors]\nx = \"1MiB\"\n[[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\nasync_op = true\nwork = \"w\"\n{between}[[op]]\nis_completed = \"w\"\n[[op]]\nlabel = \"wait\"\nwait = \"w\"\n[[fault]]\nranks = [0]\nat = \"ar\"\nkind = \"async_error\"\nafter_us = 1000\n"
        );
        let mut device = FakeDevice::default();
        let log = run_fake_log(&text, &mut device, Some(StandIn::Model));
        let scenario = sim::scenario::parse("failed.toml", &text).unwrap();
        (log, sim::engine::simulate(&scenario))
    }

    /// The first finding about rank 0: (kind, iteration, op, whether it says DistBackendError).
    fn rank0_verdict(findings: &[Finding]) -> (FindingKind, Option<u32>, Option<OpRef>, bool) {
        let finding = findings.iter().find(|f| f.rank == Some(0)).unwrap();
        let raised = finding.message.contains("DistBackendError");
        (finding.kind, finding.iteration, finding.op, raised)
    }

    /// R27 on hardware as in the simulator: from the async error on, the failed Work's
    /// `is_completed()` is true and its `wait()` raises `DistBackendError` in the main thread,
    /// ending the process there; before the error `wait()` returns and the watchdog catches it.
    #[test]
    fn a_work_failed_by_an_async_error_is_completed_and_its_wait_raises_r27() {
        let (log, simulated) = failed_work("", "[[op]]\nhost_sleep_us = 5000\n");
        assert_eq!(log.queries.len(), 1);
        assert!(log.queries[0].completed, "completed with its error");
        let verdict = rank0_verdict(&log.findings);
        assert_eq!(verdict, (FindingKind::AsyncError, Some(0), Some(3), true));
        assert_eq!(verdict, rank0_verdict(&simulated.findings), "both engines");
        assert_eq!(
            simulated.ranks[0].queries[0].completed,
            log.queries[0].completed
        );
        let exit = log
            .records
            .iter()
            .find(|r| r.event == WatchdogEvent::Exit)
            .unwrap();
        assert_eq!(exit.thread, ThreadKind::Main);
        assert_eq!(exit.message, log.findings[0].message);
        let wait_call = log.host.last().unwrap();
        assert_eq!(wait_call.op, 3);
        assert_eq!(wait_call.start_ns, wait_call.end_ns, "it raised at once");

        // Before the error: is_completed() is false, wait() returns, and the watchdog's poll
        // finds the error later.
        let (log, simulated) = failed_work("", "");
        assert!(!log.queries[0].completed);
        assert!(!simulated.ranks[0].queries[0].completed);
        assert!(log.host.iter().any(|h| h.op == 2));
        let (kind, _, _, raised) = rank0_verdict(&log.findings);
        assert_eq!((kind, raised), (FindingKind::AsyncError, false));
    }

    /// A polling wait() raises the async error at its first poll after it, not the timeout.
    #[test]
    fn a_blocking_wait_raises_at_the_first_poll_after_the_async_error_r15_r27() {
        let (log, simulated) = failed_work("TORCH_NCCL_BLOCKING_WAIT = 1", "");
        let verdict = rank0_verdict(&log.findings);
        assert_eq!(verdict, (FindingKind::AsyncError, Some(0), Some(2), true));
        assert_eq!(verdict, rank0_verdict(&simulated.findings), "both engines");
        let wait_call = log.host.last().unwrap();
        assert!(
            (1_000_000..2_100_000).contains(&wait_call.end_ns),
            "{}",
            wait_call.end_ns
        );
    }

    /// Without `timeout_ms`, a blocking wait gives up after its group's timeout
    /// (`init_process_group(timeout=…)`, R15, R26), which the watchdog gets too.
    #[test]
    fn the_groups_timeout_bounds_blocking_wait_and_the_watchdog() {
        let text = ASYNC.replace(
            "[cluster]",
            "[env]\nTORCH_NCCL_BLOCKING_WAIT = 1\n[groups.world]\ntimeout_s = 0.0035\n[cluster]",
        );
        let mut device = FakeDevice {
            query_answers: std::iter::repeat_n(false, 100).collect(),
            ..FakeDevice::default()
        };
        let finding = only_finding(&text, &mut device);
        assert!(
            finding.message.contains("reaching the 3 ms timeout"),
            "{}",
            finding.message
        );
        assert_eq!(device.watched[0].timeout_ns, 3_500_000);
        let sleeps = device
            .calls
            .iter()
            .filter(|c| c.starts_with("sleep"))
            .count();
        assert_eq!(
            sleeps, 4,
            "gave up after the fourth 1 ms poll passed 3.5 ms"
        );
    }
}
