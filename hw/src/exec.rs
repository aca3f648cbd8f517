//! The ProcessGroupNCCL re-enactment: each scenario op becomes the steps `sim::pg` lowers it to
//! (the one implementation of R8–R15, R18, R25 both engines share; a Work's timeout and its
//! async error are decided by `sim::pg::work`), and each step the host and GPU calls PyTorch
//! makes for it, issued through the [`Device`] trait; every call is written down so that the
//! Timeline can be assembled once the GPU has drained.
//!
//! [`crate::cuda::CudaDevice`] is the thin real implementation of [`Device`]; the unit tests
//! use the recording [`crate::fake`] device (`exec/tests.rs`), so the mapping of steps onto GPU
//! calls is checked without a GPU. (About 2,160 lines, over 1,000: the steps, the faults hw
//! injects and the run log. Kept as one piece because every step arm, the injected faults and
//! the run log share the executor's live CUDA handles and its log's ordering, which the
//! engine-equivalence test compares call by call; moving the run log and the fault handling
//! into files of their own would bring it under.)

use crate::error::HwError;
use crate::options::StandIn;
use crate::plan::{GroupPlan, RankPlan};
use sim::allocator::allocation_bytes;
use sim::allocator::MemoryPeaks;
use sim::lifetime::{
    out_of_memory_finding, up_front_out_of_memory_finding, AllocStep, Place, UpFront,
    CACHE_RELEASE_DID_NOT_HELP,
};
use sim::pg::faults::{died, fault_reached, host_effect, CollectiveFate, HostEffect, RankFaults};
use sim::pg::work::{NcclAsyncError, WorkErrors};
/// A kernel the executor launches: the lowering's own (a spin of `duration_ns` by
/// `%globaltimer`, each block alone on its SM with `own_sm`; or a cuBLAS GEMM).
pub use sim::pg::Kernel;
use sim::pg::{work, work_text, NcclCall, ProcessGroupNccl, Step};
use sim::random::apply_jitter;
use sim::scenario::{CollectiveKind, ErrorHandling, Op, OpKind, P2pTransfer, Scenario, TensorId};
use sim::timeline::{
    CacheRelease, CollectiveRecord, ExceptionRecord, Finding, FindingKind, HostBlock, HostCall,
    KernelClass, KernelRecord, MarkRecord, OpRef, QueryRecord, RankTimeline, StreamRef,
    StreamWaitRecord, ThreadKind, UnfinishedHostCall, WaitRecord, WatchdogEvent, WatchdogRecord,
    NEVER_NS,
};
use sim::units::format_size_as_pytorch;
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
    /// `barrier()`: a 1-element f32 all_reduce (R14).
    Barrier,
    /// `batch_isend_irecv`: every transfer's send or receive of its whole tensor, to or from the
    /// rank `shift` places along the group, in one NCCL group (R25).
    Batch { transfers: &'a [P2pTransfer] },
}

/// A Work handed to the watchdog (R10e, R26).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchedWork {
    /// The rank whose Work it is, as the watchdog's finding names it.
    pub rank: u32,
    /// The group whose communicator runs it: its NCCL async error fails the Work (R27).
    pub group: usize,
    pub end: Ev,
    pub enqueue_ns: u64,
    /// The group's timeout, counted from the enqueue (R26).
    pub timeout_ns: u64,
    /// As PyTorch prints the Work (`sim::pg::work_text`), in the timeout's finding
    /// (`sim::pg::work::timeout_caught`).
    pub description: String,
    /// An injected NCCL async error (`[[fault]] kind = "async_error"`) under this rank's own
    /// call: after this long since the enqueue the watchdog finds it, and its verdict, an
    /// [`HwError::AsyncError`] in the simulator's words (`sim::pg::work::async_exception`).
    pub async_error: Option<(u64, HwError)>,
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
    /// The watchdog's verdict, once it found a timeout or an async error (R26).
    fn watchdog_failure(&mut self) -> Option<HwError>;
    /// Aborts the group's communicator (`ncclCommAbort`), as a timed-out blocking wait does
    /// (R15), and the watchdog's error handling under `TORCH_NCCL_ASYNC_ERROR_HANDLING` 1 or 2
    /// (R27): PyTorch aborts the Work's process group only, another group's communicator runs on.
    fn abort_comm(&mut self, group: usize);
    /// The watchdog goes on after its error handling aborted the communicators of `group` and
    /// left the process running (`TORCH_NCCL_ASYNC_ERROR_HANDLING` 2, R27): its verdict is
    /// handled, and the Works of that group are done with, as the simulator's watchdog clears
    /// them. Also once the executor re-enacted the watchdog's finding of a Work's injected
    /// async error at the raise of a polling wait that aborted the Work's communicator (R15):
    /// the watchdog does not find that error again.
    fn watchdog_resumed(&mut self, group: usize);
    /// Host-axis time of an event, once the GPU drained.
    fn event_time_ns(&mut self, event: Ev) -> Result<u64, HwError>;
    /// A new segment of the caching allocator (`cudaMalloc`, R17); `fill` writes a non-zero
    /// pattern (segments of tensors that live for the whole run).
    fn malloc(&mut self, segment: u32, bytes: u64, fill: bool) -> Result<(), HwError>;
    /// Gives a released segment back (`cudaFree`, R20); `deferred` (expandable segments) keeps
    /// it until the run ends, so that the release costs no device-wide synchronise.
    fn free_segment(&mut self, segment: u32, deferred: bool);
    /// The tensor now lives at `place` (`None`: not allocated); for a list, the place of its
    /// first tensor, once every tensor of it is allocated.
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
    seq_num: u64,
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
    /// The main thread aborted the group's communicator before the Work completed (R15): the
    /// abort ended its kernel, and no data moved.
    aborted: bool,
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
    /// The verdict or the out-of-memory that ended the run early, as the Timeline's `findings`.
    pub findings: Vec<Finding>,
    /// The exceptions the program caught (`catch = true`), as the Timeline's `exceptions`.
    exceptions: Vec<ExceptionRecord>,
    /// Whether the run ended before its program did (a timeout, an async error, a dead
    /// process, an out-of-memory), or the watchdog took the process down at its end (after a
    /// caught wait's timeout): the GPU may still hold work that will never end.
    pub ended_early: bool,
    /// The host call the run's early end left open, as the simulator's.
    pub unfinished_host: Option<UnfinishedHostCall>,
    /// The iteration the program was in when the run ended before the program did.
    pub unfinished_iteration: Option<u32>,
}

impl RunLog {
    /// Turns events into host-axis times and builds the rank's Timeline part. `time` is
    /// `None` for an event that never fired (behind a collective that never completes): a
    /// kernel that never ended, a collective that never completed and a stream wait never
    /// released go to the unfinished records, as the simulator's; any other record with such
    /// a time is left out, as the simulator leaves out what never happened.
    pub fn resolve(
        self,
        plan: &RankPlan,
        mut time: impl FnMut(Ev) -> Result<Option<u64>, HwError>,
    ) -> Result<RankTimeline, HwError> {
        // A time that never came is the Timeline's `NEVER_NS` until `set_apart_unfinished`,
        // the simulator's own mapping, moves its record apart.
        let mut time_or_never = |ev: Ev| Ok::<_, HwError>(time(ev)?.unwrap_or(NEVER_NS));
        let mut kernels = Vec::with_capacity(self.kernels.len());
        for k in &self.kernels {
            kernels.push(KernelRecord {
                iteration: k.iteration,
                op: k.op,
                stream: k.rest.stream,
                class: k.rest.class,
                enqueue_ns: k.rest.enqueue_ns,
                start_ns: time_or_never(k.rest.start)?,
                end_ns: time_or_never(k.rest.end)?,
            });
        }
        let mut collectives = Vec::with_capacity(self.collectives.len());
        for c in self.collectives {
            let r = c.rest;
            let kernel_start_ns = time_or_never(r.start)?;
            let wait = match r.wait {
                None => None,
                Some(w) => Some(WaitRecord {
                    op: w.op,
                    host_start_ns: w.host_start_ns,
                    host_end_ns: w.host_end_ns,
                    stream: w.stream,
                    released_ns: time_or_never(w.released)?,
                    completed_at_return: w.completed_at_return,
                }),
            };
            collectives.push(CollectiveRecord {
                iteration: c.iteration,
                op: c.op,
                group: r.group,
                seq: r.seq,
                work_seq_num: CollectiveRecord::work_seq_num_field(r.seq, r.seq_num),
                bytes: r.bytes,
                async_op: r.async_op,
                call_stream: r.call_stream,
                run_stream: r.run_stream,
                host_start_ns: r.host_start_ns,
                host_end_ns: r.host_end_ns,
                input_ready_ns: time_or_never(r.input_ready)?,
                kernel_start_ns,
                // The kernel starts at the event recorded just before it: the start event.
                work_start_ns: r.timed.then_some(kernel_start_ns),
                // R16: when the last rank arrived is not observable from one rank; a Work
                // aborted under it moved no data, and goes to the unfinished records with
                // its kernel ended by the abort, as the simulator's.
                data_start_ns: if r.aborted { NEVER_NS } else { kernel_start_ns },
                end_ns: time_or_never(r.end)?,
                last_rank: None,
                wait,
            });
        }
        let mut stream_waits = Vec::with_capacity(self.stream_waits.len());
        for w in &self.stream_waits {
            stream_waits.push(StreamWaitRecord {
                iteration: w.iteration,
                op: w.op,
                source_stream: w.rest.source_stream,
                source_ns: time_or_never(w.rest.source)?,
                waiting_stream: w.rest.waiting_stream,
                released_ns: time_or_never(w.rest.released)?,
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
        let mut rank = RankTimeline {
            stands_for: Default::default(),
            rank: plan.rank,
            streams: plan.streams.clone(),
            host: self.host,
            kernels,
            collectives,
            marks,
            stream_waits,
            queries: self.queries,
            unfinished_collectives: Vec::new(),
            unfinished_kernels: Vec::new(),
            unfinished_stream_waits: Vec::new(),
            unfinished_host: None,
            unfinished_iteration: self.unfinished_iteration,
            step_starts_ns: Vec::new(),
            memory: self.memory,
            cache_releases: self.cache_releases,
            // The race detector is the simulator's: the GPU shows no races by itself.
            races: Vec::new(),
            exceptions: self.exceptions,
            // The process's end is the launcher's to see (`c10dsim hw` reports its exit).
            end: None,
        };
        rank.set_apart_unfinished();
        if let Some(call) = self.unfinished_host {
            rank.leave_open(call);
        }
        Ok(rank)
    }
}

/// Why rank `rank`'s part of the scenario cannot run on hardware, if it cannot: a send or
/// receive on an eager world's communicator (R11: the re-enactment makes its sends and receives
/// on two-rank communicators only), a fault hardware cannot produce; `alone` when the other
/// ranks are not run (the downscale).
pub(crate) fn not_on_hardware(scenario: &Scenario, rank: u32, alone: bool) -> Option<String> {
    // A pair's group whose communicator is another's: the world's.
    let on_world = (scenario.ops.iter().filter(|op| op.runs_on(rank))).find_map(|op| {
        let (_, group) = op.kind.collective()?;
        (scenario.communicator(group) != group).then_some((op, group))
    });
    if let Some((first, pair)) = on_world {
        return Some(format!(
            "{} {:?} (line {}) and the other sends and receives between ranks {:?} run on the \
             eagerly created world's communicator \
             (R11: PyTorch makes no pair communicator under init_process_group(device_id=…)); \
             the hardware backend issues sends and receives on two-rank communicators only: \
             leave the world lazy ([groups.world] eager_init, device_id) or run it with \
             `c10dsim torch`",
            first.kind.key(),
            first.display_name(),
            first.line,
            scenario.groups[pair].ranks
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
    /// The injected async error of a collective faulted on this rank: after how long (R27).
    async_error: Option<u64>,
    /// A peer's error under it that this rank's watchdog reads from the store: after how long,
    /// and the peer (`TORCH_NCCL_PROPAGATE_ERROR=1`, R27, [`RankFaults::remote_error`]).
    remote_error: Option<(u64, u32)>,
}

/// A peer's error this rank's watchdog of the process group `group` (the one that watches the
/// failed Work, `Scenario::process_group`) reads from the store at `read_ns`, unless its
/// group's error was set before or the process ended first (R27): only a log line.
#[derive(Debug, Clone, Copy)]
struct RemoteErrorRead {
    group: usize,
    read_ns: u64,
    from_rank: u32,
}

/// An error the watchdog found and handles once the simulator's watchdog would, after the
/// failed Work's stack trace and the dump wait (R27, [`work::error_handled_ns`]), under
/// `TORCH_NCCL_ASYNC_ERROR_HANDLING`: 1 and 3 take the process down, 2 aborts the process
/// group's communicators (its pairs' included) and 0 leaves the error alone, the process
/// living on.
#[derive(Debug, Clone, Copy)]
struct Handling {
    /// The process group whose watchdog found the error.
    group: usize,
    handled_ns: u64,
    /// The device's watchdog gave it as its verdict, which it holds until the handling
    /// (`Device::watchdog_resumed`): a call blocked on the failed group's work stays blocked
    /// until then. Otherwise it was found at the raise of a polling wait the program caught,
    /// once the main thread's abort of the communicator returned.
    verdict: bool,
}

/// How an `abort` or `no_handling` record of the watchdog's, which the simulator writes after
/// the dump wait, ends where hw writes it at the program's end instead (it does not wait the
/// rest of the dump wait, 60 s by default, for nothing).
pub const AT_THE_PROGRAMS_END: &str = " (hw: at the program's end, without the dump wait)";

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
    /// and op, which the finding names, as the simulator's does, and the group of the Work it
    /// raised for, which the process's exit record names.
    wait_raised: Option<(u32, OpRef, usize)>,
    /// The NCCL async errors (R27) of the Works, by end event, and of the communicators, by
    /// group (`Scenario::communicator`).
    errors: WorkErrors<Ev, usize>,
    /// Per group: whether the main thread aborted its communicator after a wait's timeout
    /// (R15); a later collective on it raises before it issues anything (R27).
    aborted: Vec<bool>,
    /// The current op raised an exception the program caught (`catch = true`): its call
    /// ended there, and the program goes on at the next op.
    caught: bool,
    /// The error handling the watchdog owes ([`Handling`]): hw does it once the simulator's
    /// watchdog would, checked before each op and inside a blocked call, or at the program's
    /// end if that comes first ([`Self::handled_when_due`]).
    watchdog_found: Option<Handling>,
    /// Per process group: how many of `works` its watchdog is done with, those enqueued
    /// before its last handling of an error, after which it cleared its Work list (R27), as
    /// the simulator's: a wait's abort later finds no error under them
    /// ([`Self::aborted_found`]).
    watchdog_cleared: Vec<usize>,
    /// Whether the watchdog logged a failed Work's stack trace already: the process's first
    /// one only takes `host.watchdog_stack_trace_us` ([`work::error_handled_ns`]).
    stack_traced: bool,
    /// The peers' errors the watchdogs read from the store, logged at the run's end
    /// ([`Self::remote_errors_read`]).
    remote_error_reads: Vec<RemoteErrorRead>,
    /// Per process group (`Scenario::process_group`: a pair's Works are its process group's
    /// watchdog's): when its error (`error_`) was set by a verdict of its watchdog; a peer's
    /// error is read from the store only before.
    group_error_ns: HashMap<usize, u64>,
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
    /// Whether the program is inside a call: started, neither returned nor raised.
    in_call: bool,
    /// The collective record the current call made.
    call_collective: Option<usize>,
    /// The collective whose `wait()` is under way, until it returns or raises: its record
    /// holds the wait from its start, as the simulator's does.
    waiting_on: Option<u32>,
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
            errors: WorkErrors::default(),
            remote_error_reads: Vec::new(),
            group_error_ns: HashMap::new(),
            aborted: vec![false; scenario.groups.len()],
            caught: false,
            watchdog_found: None,
            watchdog_cleared: vec![0; scenario.groups.len()],
            stack_traced: false,
            #[cfg(test)]
            executed: Vec::new(),
            slots: Vec::new(),
            last_record: vec![None; plan.streams.len()],
            works: Vec::new(),
            issued: None,
            call_start_ns: 0,
            in_call: false,
            call_collective: None,
            waiting_on: None,
            log: RunLog::default(),
            memory: Memory::unbooked(scenario, plan.rank),
        }
    }

    /// Before the program: every tensor that no `alloc` creates (each of a list), then every
    /// bucket buffer of a bucketed collective, gets its block (R17, R25), and the steps
    /// `sim::pg` runs in `init_process_group` (R8, eager init) are run. A bucket buffer is only
    /// booked: the bucket's NCCL call moves the list's own buffer (docs/hw.md).
    pub fn setup(&mut self) -> Result<(), HwError> {
        // Which tensor of its list each step makes (0 for a plain tensor or a bucket buffer).
        let mut previous = None;
        let mut made = 0;
        // Booked one at a time, so that a segment the GPU refuses is the last one booked.
        while let Some((owner, step)) = self.memory.allocate_up_front() {
            made = if previous == Some(owner) { made + 1 } else { 0 };
            previous = Some(owner);
            match step {
                AllocStep::NewSegment { place, bytes } => {
                    match self.device.malloc(place.segment, bytes, true) {
                        Ok(()) => {}
                        Err(HwError::OutOfMemory(refused)) => {
                            // Nothing is freed before the program: no release can help.
                            self.memory.refuse_new_segment();
                            self.up_front_out_of_memory(owner, made, Some(&refused));
                            return Ok(());
                        }
                        Err(error) => return Err(error),
                    }
                }
                AllocStep::Cached(_) => {}
                AllocStep::NeedsRelease { .. } | AllocStep::OutOfMemory => {
                    // The last step: the books stopped at it, as PyTorch's raise would.
                    self.up_front_out_of_memory(owner, made, None);
                    return Ok(());
                }
            }
            // A list is bound once, after its last tensor.
            if let UpFront::Tensor(tensor) = owner {
                if made + 1 == self.scenario.tensors[tensor].count {
                    self.device.bind(tensor, self.memory.place(tensor));
                }
            }
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

    /// PyTorch's raise at an allocation before the program that does not fit (R17), in the
    /// books or on the GPU (`refused`: the device's words), tensor `made` of its list: uncaught,
    /// the program never starts. The simulator's `out_of_memory` finding, of no op.
    fn up_front_out_of_memory(&mut self, owner: UpFront, made: u32, refused: Option<&str>) {
        let list_position = match owner {
            UpFront::Tensor(tensor) => {
                let count = self.scenario.tensors[tensor].count;
                if count > 1 {
                    format!(" (tensor {} of the list of {count})", made + 1)
                } else {
                    String::new()
                }
            }
            UpFront::Bucket { .. } => String::new(),
        };
        let size_bytes = owner.size_bytes(self.scenario);
        let pytorch_text = self.pytorch_out_of_memory_text(size_bytes, refused);
        let refused = refused.map(gpu_refused);
        let message = up_front_out_of_memory_finding(
            self.scenario,
            (self.plan.rank, &pytorch_text),
            (owner, &list_position),
            refused.as_deref(),
        );
        self.log.findings.push(Finding {
            stands_for: Default::default(),
            kind: FindingKind::OutOfMemory,
            rank: Some(self.plan.rank),
            iteration: None,
            op: None,
            stream: Some(self.plan.streams[0].name.clone()),
            message,
        });
        self.log.ended_early = true;
    }

    /// PyTorch's words after "CUDA out of memory. " for a request of `size_bytes`: the books'
    /// (what is allowed, allocated and reserved), or, where the GPU refused the segment
    /// (`refused`) though the books had room, the size it tried to allocate and what the
    /// books hold (the refused segment is not among them; the GPU's capacity and free
    /// memory, which PyTorch's text gives too, are not known here).
    fn pytorch_out_of_memory_text(&self, size_bytes: u64, refused: Option<&str>) -> String {
        match refused {
            None => self
                .memory
                .out_of_memory_text(size_bytes, self.scenario.memory.capacity_bytes),
            Some(_) => format!(
                "Tried to allocate {}. {}",
                format_size_as_pytorch(allocation_bytes(size_bytes)),
                self.memory.allocated_memory_text()
            ),
        }
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
        if self.log.ended_early {
            // An allocation before the program did not fit (`setup`): it never starts.
            self.log.memory = self.memory.peaks();
            return Ok(std::mem::take(&mut self.log));
        }
        let outcome = match self.program() {
            Ok(true) => loop {
                let drained = self
                    .device
                    .device_sync()
                    .and_then(|()| self.device.watchdog_failure().map_or(Ok(()), Err));
                match drained {
                    Err(error) if self.runs_on_after(&error) => {
                        // The program has ended: its handling comes at once.
                        self.verdict(error)?;
                        self.handled_when_due(true)?;
                    }
                    drained => break drained,
                }
            },
            Ok(false) => Ok(()),
            Err(error) => Err(error),
        };
        match outcome {
            Ok(()) => {}
            Err(error @ (HwError::Timeout { .. } | HwError::AsyncError { .. })) => {
                self.verdict(error)?
            }
            // `torch.empty` raised, or the program's own exception, uncaught: the finding is
            // written (`out_of_memory`, `raise_uncaught`).
            Err(HwError::OutOfMemory(_) | HwError::ProgramError(_)) => {}
            Err(error) => return Err(error),
        }
        self.remote_errors_read();
        self.log.memory = self.memory.peaks();
        Ok(std::mem::take(&mut self.log))
    }

    /// `checkAndSetRemoteError()` (`TORCH_NCCL_PROPAGATE_ERROR=1`, R27): each peer's error a
    /// watchdog read from the store while the process lived and its group's error was unset,
    /// the first per group, as a `remote_error` record in the simulator's words
    /// ([`work::remote_error_detected`]); it sets the group's error and does nothing else.
    fn remote_errors_read(&mut self) {
        let end_ns = self.device.now_ns();
        let mut reads = std::mem::take(&mut self.remote_error_reads);
        reads.sort_by_key(|read| read.read_ns);
        for read in reads {
            let set_before = (self.group_error_ns.get(&read.group))
                .is_some_and(|&set_ns| set_ns <= read.read_ns);
            if set_before || read.read_ns > end_ns {
                continue;
            }
            self.group_error_ns.insert(read.group, read.read_ns);
            let message = work::remote_error_detected(self.plan.rank, read.from_rank);
            let (thread, event) = (ThreadKind::Watchdog, WatchdogEvent::RemoteError);
            self.note_group(Some(read.group), thread, event, read.read_ns, message);
        }
    }

    /// The program; false when a fault stopped the process before its end.
    fn program(&mut self) -> Result<bool, HwError> {
        let rank = self.plan.rank;
        let mut steps = Vec::new();
        for iteration in 0..self.scenario.repeat {
            // Until the program passed this iteration, a run that ends leaves it unfinished.
            self.log.unfinished_iteration = Some(iteration);
            for op in self.scenario.ops.iter().filter(|op| op.runs_on(rank)) {
                if self.handled_when_due(false)? {
                    return Ok(false);
                }
                if let Some(failure) = self.unhandled_watchdog_failure() {
                    if !self.runs_on_after(&failure) {
                        return Err(failure);
                    }
                    self.verdict(failure)?;
                }
                if let Some(fault) = self.faults.at(op.index, iteration) {
                    self.note(
                        ThreadKind::Main,
                        WatchdogEvent::Fault,
                        fault_reached(self.scenario, rank, &fault.kind, op, iteration),
                    );
                    match host_effect(&fault.kind) {
                        HostEffect::Run => {}
                        HostEffect::Skip => continue,
                        HostEffect::Stop => {
                            self.note(ThreadKind::Main, WatchdogEvent::Exit, died(rank));
                            self.log.ended_early = true;
                            return Ok(false);
                        }
                    }
                }
                steps.clear();
                self.pg.before_op(self.scenario, iteration, op, &mut steps);
                let aborted = |group: usize| self.aborted[group];
                self.pg
                    .reached_op(self.scenario, op, aborted, &mut steps)
                    .map_err(|error| HwError::Unsupported(error.0))?;
                for &step in &steps {
                    #[cfg(test)]
                    self.executed.push(step);
                    // A call blocked on a collective the watchdog's verdict aborts, where the
                    // process lives on, stays blocked until the abort, then returns: the step
                    // runs again.
                    while let Err(error) = self.step(iteration, op, step) {
                        if self.blocked_until_handled(&error)? {
                            continue;
                        }
                        if !self.runs_on_after(&error) {
                            self.leave_open(iteration, op, step);
                            return Err(error);
                        }
                        self.verdict(error)?;
                    }
                    if std::mem::take(&mut self.caught) {
                        break;
                    }
                }
            }
        }
        self.log.unfinished_iteration = None;
        Ok(!self.handled_when_due(true)?)
    }

    /// The device's watchdog's verdict, unless it is the one the watchdog is handling.
    fn unhandled_watchdog_failure(&mut self) -> Option<HwError> {
        if self.watchdog_found.is_some_and(|handling| handling.verdict) {
            return None;
        }
        self.device.watchdog_failure()
    }

    /// A step returned `error`: if it is the verdict the watchdog is handling, the call stays
    /// blocked until the handling is due (the device polled again every watchdog poll, so that
    /// work that completes meanwhile lets it return), then the handling comes
    /// ([`Self::handled_when_due`]); the step is to run again. Not a `wait()`'s raise in the
    /// main thread, which ends the call.
    fn blocked_until_handled(&mut self, error: &HwError) -> Result<bool, HwError> {
        let Some(handling) = self.watchdog_found.filter(|handling| handling.verdict) else {
            return Ok(false);
        };
        if !is_verdict(error) || self.wait_raised.is_some() {
            return Ok(false);
        }
        let now_ns = self.device.now_ns();
        if now_ns < handling.handled_ns {
            let rest_ns = handling.handled_ns - now_ns;
            self.device.host_sleep(rest_ns.min(work::WATCHDOG_POLL_NS));
            return Ok(true);
        }
        self.handled_when_due(false)?;
        Ok(true)
    }

    /// Whether `error` is a verdict of the watchdog (a timeout, R26; an NCCL async error, R27)
    /// whose error handling leaves the process running ([`work::aborts_and_runs_on`]): the
    /// program goes on past it ([`Self::verdict`]).
    fn runs_on_after(&self, error: &HwError) -> bool {
        is_verdict(error)
            && self.wait_raised.is_none()
            && work::aborts_and_runs_on(self.scenario.env.async_error_handling)
    }

    /// The watchdog's handling of the error it found ([`Self::watchdog_found`]), once the
    /// simulator's watchdog would handle it (after the stack trace and the dump wait), checked
    /// before each op and inside a blocked call, or at the program's end (`programs_end`),
    /// where hw does not wait the rest of the dump wait (60 s by default) for nothing, as the
    /// simulator's process, whose end waits for its watchdog, would: 1 and 3 take the process
    /// down (whether it did), 2 aborts the process group's communicators and 0 leaves the error
    /// alone ([`Self::handled`]).
    fn handled_when_due(&mut self, programs_end: bool) -> Result<bool, HwError> {
        let Some(handling) = self.watchdog_found else {
            return Ok(false);
        };
        let at_ns = self.device.now_ns();
        let due = at_ns >= handling.handled_ns;
        if !(due || programs_end) {
            return Ok(false);
        }
        self.watchdog_found = None;
        if self.scenario.env.async_error_handling.tears_down() {
            let when = if programs_end {
                "at the program's end, without the dump wait".to_string()
            } else {
                let dump_wait_ms = work::dump_wait_ns(self.scenario) / 1_000_000;
                format!("after the watchdog's dump wait ({dump_wait_ms} ms), before the next op")
            };
            self.take_down(Some(handling.group), at_ns, &when);
            self.log.ended_early = true;
            return Ok(true);
        }
        let early = if due { "" } else { AT_THE_PROGRAMS_END };
        self.handled(handling, early)?;
        Ok(false)
    }

    /// The watchdog's handling under `TORCH_NCCL_ASYNC_ERROR_HANDLING` 0 and 2, where the
    /// process lives on, in the simulator's words (`early` ends the first record where hw
    /// writes it before the simulator would): 0 leaves the error alone; 2 aborts the process
    /// group's communicators ([`Self::aborted_by_watchdog`]), or, where the main thread's abort
    /// of the Work's communicator returned already (the error found at the raise of a polling
    /// wait the program caught), the others of the process group, those the main thread did not
    /// abort ([`Self::watchdog_aborts`]), the return logged at once.
    fn handled(&mut self, handling: Handling, early: &str) -> Result<(), HwError> {
        let (rank, mode) = (self.plan.rank, self.scenario.env.async_error_handling);
        let group = handling.group;
        self.watchdog_cleared[group] = self.works.len();
        if mode == ErrorHandling::NoHandling {
            let left_alone = work::error_left_alone(rank, mode) + early;
            let (thread, event) = (ThreadKind::Watchdog, WatchdogEvent::NoHandling);
            let at_ns = self.device.now_ns();
            self.note_group(Some(group), thread, event, at_ns, left_alone);
            return Ok(());
        }
        self.aborted_by_watchdog(group, early, handling.verdict)
    }

    /// The program caught (`catch = true`) the exception `op` raised at `at_ns`, in
    /// `sim::pg::work`'s words (`message`): recorded, and the program goes on at the next op.
    fn catch(&mut self, iteration: u32, op: &Op, at_ns: u64, message: String) {
        self.wait_raised = None;
        self.caught = true;
        self.log.exceptions.push(ExceptionRecord {
            iteration,
            op: op.index as OpRef,
            at_ns,
            exception: "DistBackendError".to_string(),
            message,
        });
    }

    /// An exception the program raised at `op` and did not catch (a `DistBackendError` of a
    /// collective on the aborted communicator of `group`, R27; a NameError): the call ends
    /// there, logged as the process's end, a `kind` finding, and the run ends.
    fn raise_uncaught(
        &mut self,
        (iteration, op, group): (u32, &Op, Option<usize>),
        kind: FindingKind,
        message: String,
    ) -> HwError {
        let at_ns = self.device.now_ns();
        self.in_call = false;
        self.log.host.push(HostCall {
            iteration,
            op: op.index as OpRef,
            start_ns: self.call_start_ns,
            end_ns: at_ns,
        });
        let (thread, event) = (ThreadKind::Main, WatchdogEvent::Exit);
        self.note_group(group, thread, event, at_ns, message.clone());
        self.log.findings.push(Finding {
            stands_for: Default::default(),
            kind,
            rank: Some(self.plan.rank),
            iteration: Some(iteration),
            op: Some(op.index as OpRef),
            stream: None,
            message: message.clone(),
        });
        self.log.ended_early = true;
        HwError::ProgramError(message)
    }

    /// The run ends at `step` of `op`: a call it is inside never returned (its raise would have
    /// ended it), blocked on what the step waits for.
    fn leave_open(&mut self, iteration: u32, op: &Op, step: Step) {
        if !std::mem::take(&mut self.in_call) {
            return;
        }
        let blocked_on = match step {
            Step::Item { stream, .. }
            | Step::StreamSync { stream, .. }
            | Step::StreamSyncUnlessCompleted { stream, .. } => Some(HostBlock::Stream { stream }),
            Step::EventSync { slot, .. } => Some(HostBlock::Stream {
                stream: self.slots[slot as usize].1,
            }),
            Step::DeviceSync { .. } => Some(HostBlock::Device),
            Step::Poll { collective, .. } => {
                let record = &self.log.collectives[collective as usize].rest;
                Some(HostBlock::Work {
                    group: record.group,
                    seq: record.seq,
                    aborting: false,
                })
            }
            Step::InitComm { group, .. } => Some(HostBlock::Communicator {
                group: group as u16,
            }),
            _ => None,
        };
        self.log.unfinished_host = Some(UnfinishedHostCall {
            iteration,
            op: op.index as OpRef,
            start_ns: self.call_start_ns,
            blocked_on,
        });
    }

    /// The current call raised at `end_ns`, for a Work of `group`: its host record ends there.
    fn raised(&mut self, iteration: u32, op: &Op, group: usize, end_ns: u64) {
        self.in_call = false;
        self.log.host.push(HostCall {
            iteration,
            op: op.index as OpRef,
            start_ns: self.call_start_ns,
            end_ns,
        });
        // A wait() that raised ends there too.
        if let Some(collective) = self.waiting_on.take() {
            let record = &mut self.log.collectives[collective as usize].rest;
            if let Some(wait) = &mut record.wait {
                wait.host_end_ns = end_ns;
            }
        }
        self.wait_raised = Some((iteration, op.index as OpRef, group));
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

    /// The run ends on a timeout or an async error: the finding names the Work the watchdog
    /// caught, in the iteration of its call, or the call that raised (a peer's error read from
    /// the store names no Work: its group, at the host's iteration, none once the program
    /// returned, as the simulator's), and hw takes the process down at once (the TearDown of
    /// R27 without the dump wait), whatever the GPU still holds, after aborting the
    /// communicators of the Work's process group (`Scenario::process_group`, whose watchdog's
    /// records these are) where the watchdog's error handling does (modes 1 and 2); under 2
    /// the process lives instead and the program goes on: the watchdog aborts the process
    /// group's communicators once the simulator's would, after the stack trace and the dump wait
    /// ([`Self::handled_when_due`], [`Self::aborted_by_watchdog`]).
    fn verdict(&mut self, error: HwError) -> Result<(), HwError> {
        let at_ns = self.device.now_ns();
        let runs_on = self.runs_on_after(&error);
        if let (
            Some((iteration, op, group)),
            HwError::AsyncError {
                finding: message, ..
            },
        ) = (self.wait_raised, &error)
        {
            // wait() raised in the main thread: uncaught, the exception ends the process.
            let (thread, event) = (ThreadKind::Main, WatchdogEvent::Exit);
            self.note_group(Some(group), thread, event, at_ns, message.clone());
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
        // The Work the watchdog caught or a wait timed out on, else the oldest not complete.
        let named = match &error {
            HwError::Timeout {
                work: Some(end), ..
            }
            | HwError::AsyncError {
                work: Some(end), ..
            } => self.works.iter().find(|work| work.end == *end),
            _ => self.oldest_pending()?,
        }
        .map(|work| (work.group, work.iteration, work.op));
        // What found it, and its record: none for a wait's own timeout, which the wait's
        // poll logged as it found it.
        let (kind, event, thread) = match (&error, self.wait_raised) {
            (HwError::AsyncError { .. }, _) => (
                FindingKind::AsyncError,
                Some(WatchdogEvent::AsyncError),
                ThreadKind::Watchdog,
            ),
            (_, Some(_)) => (FindingKind::WaitTimeout, None, ThreadKind::Main),
            _ => (
                FindingKind::WatchdogTimeout,
                Some(WatchdogEvent::Timeout),
                ThreadKind::Watchdog,
            ),
        };
        let rank = self.plan.rank;
        let message = error.to_string();
        // The wait() that raised, else the Work named, in its own iteration.
        let raised = (self.wait_raised).map(|(iteration, op, _)| (iteration, op));
        let at = raised.or(named.map(|(_, iteration, op)| (iteration, op)));
        // The watchdog of the Work's process group, a pair's included, found it: its error is
        // set, and its records, handling and abort are that group's, as the simulator's.
        let (group, iteration, op) = (
            named.map(|(group, _, _)| self.scenario.process_group(group)),
            at.map(|(iteration, _)| iteration),
            at.map(|(_, op)| op),
        );
        if let Some(group) = group {
            self.group_error_ns.entry(group).or_insert(at_ns);
        }
        if let Some(event) = event {
            self.note_group(group, thread, event, at_ns, message.clone());
        }
        let aborted_found = self.wait_abort_found(&error);
        match self.wait_raised {
            // A wait's own timeout raised in the main thread: uncaught, it ends the process,
            // after the watchdog found the aborted communicator's error, where it runs.
            Some((_, _, raised_for)) => {
                if let Some((watchdog, found)) = &aborted_found {
                    let (thread, event) = (ThreadKind::Watchdog, WatchdogEvent::AsyncError);
                    let message = found.message.clone();
                    self.note_group(Some(*watchdog), thread, event, at_ns, message);
                }
                let exit = work::exception_not_caught(rank);
                self.note_group(Some(raised_for), thread, WatchdogEvent::Exit, at_ns, exit);
            }
            None if runs_on => {
                // A timeout's stack trace, the process's first; a Work's own async error has
                // none.
                let own_error =
                    (!matches!(error, HwError::Timeout { .. })).then_some(NcclAsyncError::Remote);
                let traced = work::stack_traced(own_error);
                self.handles_later(group, at_ns, traced, true);
            }
            None => self.take_down(group, at_ns, "now, without the dump wait"),
        }
        // A wait's own timeout names the stream current at the wait, as the simulator's does.
        let stream = match (kind, op) {
            (FindingKind::WaitTimeout, Some(op)) => {
                let stream = self.scenario.ops[op as usize].stream;
                Some(self.plan.streams[stream].name.clone())
            }
            _ => None,
        };
        self.log.findings.push(Finding {
            stands_for: Default::default(),
            kind,
            rank: Some(rank),
            iteration,
            op,
            stream,
            message,
        });
        self.log
            .findings
            .extend(aborted_found.map(|(_, found)| found));
        self.log.ended_early = !runs_on;
        Ok(())
    }

    /// The watchdog of `group` found at `found_ns` an error it handles once the simulator's
    /// would ([`Handling`], [`work::error_handled_ns`]): after the failed Work's stack trace
    /// where it has one (`traced`, the process's first only), and the dump wait. None for no
    /// group (a verdict that names none).
    fn handles_later(&mut self, group: Option<usize>, found_ns: u64, traced: bool, verdict: bool) {
        let Some(group) = group else {
            return;
        };
        let first_trace = traced && !std::mem::replace(&mut self.stack_traced, true);
        let handled_ns = work::error_handled_ns(self.scenario, found_ns, first_trace);
        self.watchdog_found = Some(Handling {
            group,
            handled_ns,
            verdict,
        });
    }

    /// Under `TORCH_NCCL_ASYNC_ERROR_HANDLING=2` the verdict of the watchdog of process group
    /// `failed` (on a Work of it or of one of its pairs) aborts the process group's
    /// communicators and the process lives (R27, [`work::aborts_and_runs_on`]), as the
    /// simulator's, once its handling is due ([`Self::handled_when_due`]; `early` ends the
    /// abort's record where that is the program's end): every Work of the process group not
    /// completed is aborted (written unfinished), its communicators are aborted for the main
    /// thread (a later call on any of them raises, `Step::CheckComm`), the abort and its
    /// return are logged in the simulator's words, and the watchdog goes on, done with every
    /// Work of the process group.
    ///
    /// Without a `verdict` of its own (the error found at the raise of a caught polling wait,
    /// whose main thread's abort returned already), the return is logged at once and the
    /// device's watchdog, which gave no verdict, has nothing to resume.
    fn aborted_by_watchdog(
        &mut self,
        failed: usize,
        early: &str,
        verdict: bool,
    ) -> Result<(), HwError> {
        let (rank, mode) = (self.plan.rank, self.scenario.env.async_error_handling);
        self.abort_pending_works_of_process_group(failed)?;
        let at_ns = self.device.now_ns();
        self.watchdog_aborts(failed, at_ns, early);
        let returned_ns = if verdict { self.device.now_ns() } else { at_ns };
        let name = &self.scenario.groups[failed].name;
        let returned = work::watchdog_abort_returned(rank, mode, name);
        let (thread, event) = (ThreadKind::Watchdog, WatchdogEvent::AbortReturned);
        self.note_group(Some(failed), thread, event, returned_ns, returned);
        if verdict {
            for group in self.groups_of_process_group(failed) {
                self.device.watchdog_resumed(group);
            }
        }
        Ok(())
    }

    /// The watchdog's error handling of process group `process_group` aborts its
    /// communicators (modes 1 and 2, R27: PyTorch's `work.abort()`, then `abortComms()` of the
    /// process group whose own watchdog found the error): its own and its pairs' (R11), those
    /// not aborted yet (a wait's timeout aborted one, R15); another process group's run on.
    /// Logged at `at_ns` in the simulator's words (`early`: see [`AT_THE_PROGRAMS_END`]).
    fn watchdog_aborts(&mut self, process_group: usize, at_ns: u64, early: &str) {
        let (rank, mode) = (self.plan.rank, self.scenario.env.async_error_handling);
        let name = &self.scenario.groups[process_group].name;
        let aborting = work::watchdog_abort(rank, mode, name) + early;
        self.note_group(
            Some(process_group),
            ThreadKind::Watchdog,
            WatchdogEvent::Abort,
            at_ns,
            aborting,
        );
        for group in self.groups_of_process_group(process_group) {
            if !self.aborted[group] {
                self.device.abort_comm(group);
                self.aborted[group] = true;
            }
        }
    }

    /// The groups of this rank whose calls go through process group `process_group`
    /// (`Scenario::groups_of_process_group`: the group itself and, for the world, its pairs).
    /// Each has its own communicator: hw refuses an eager world's pairs, which share the
    /// world's (R11).
    fn groups_of_process_group(&self, process_group: usize) -> Vec<usize> {
        let (scenario, rank) = (self.scenario, self.plan.rank);
        (scenario.groups_of_process_group(process_group))
            .filter(|&group| scenario.groups[group].has_rank(rank))
            .collect()
    }

    /// Before the watchdog's abort of process group `process_group`'s communicators
    /// ([`Self::watchdog_aborts`]): every Work not completed on one not aborted yet is aborted
    /// (written unfinished).
    fn abort_pending_works_of_process_group(
        &mut self,
        process_group: usize,
    ) -> Result<(), HwError> {
        for group in self.groups_of_process_group(process_group) {
            if !self.aborted[group] {
                self.abort_pending_works(group, None)?;
            }
        }
        Ok(())
    }

    /// hw takes the process down at `at_ns` (`when`, in the exit record's words) after a
    /// verdict of the watchdog of process group `group`, whatever the GPU still holds (R27),
    /// after the watchdog's abort of that process group's communicators under modes 1 and 2
    /// ([`Self::watchdog_aborts`]).
    fn take_down(&mut self, group: Option<usize>, at_ns: u64, when: &str) {
        let rank = self.plan.rank;
        let thread = ThreadKind::Watchdog;
        let mode = self.scenario.env.async_error_handling;
        if let (Some(failed), true) = (group, mode.cleans_up()) {
            self.watchdog_aborts(failed, at_ns, "");
        }
        let exit = format!(
            "[Rank {rank}] TORCH_NCCL_ASYNC_ERROR_HANDLING={}: hw takes the process down {when}, \
             without waiting for the GPU's work (R27)",
            mode.number()
        );
        self.note_group(group, thread, WatchdogEvent::Exit, at_ns, exit);
    }

    /// After a wait's own timeout (`error`, from [`Self::poll`]), uncaught: see
    /// [`Self::aborted_found`].
    fn wait_abort_found(&self, error: &HwError) -> Option<(usize, Finding)> {
        let HwError::Timeout {
            work: Some(end), ..
        } = error
        else {
            return None;
        };
        self.wait_raised?;
        self.aborted_found(*end, NcclAsyncError::AbortedByWait)
    }

    /// After a polling wait on the Work of end event `end` aborted the Work's communicator
    /// (R15), where the watchdog runs ([`work::wait_timeout_reaches_watchdog`]): the watchdog
    /// of the Work's process group finds `error` under the Work, in the raise's millisecond,
    /// caught or not (uncaught, before the exception ends the process), as the simulator's
    /// does: after the wait's timeout, the aborted communicator's (`AbortedByWait`: PyTorch's
    /// `NCCLComm::abort` leaves `ncclSystemError` for it); after the Work's own async error,
    /// that error, which its poll, blocked on the abort, finds once the abort returned (R27,
    /// R28). Not where the watchdog is handling an error of its group already, or was done
    /// with the Work at the end of an earlier handling (`watchdog_cleared`). That group and
    /// its finding, in `sim::pg::work`'s words.
    fn aborted_found(&self, end: Ev, error: NcclAsyncError) -> Option<(usize, Finding)> {
        if !work::wait_timeout_reaches_watchdog(&self.scenario.env) {
            return None;
        }
        let index = self.works.iter().position(|work| work.end == end)?;
        let timed_out = &self.works[index];
        let watchdog = self.scenario.process_group(timed_out.group);
        let handling = self
            .watchdog_found
            .is_some_and(|found| found.group == watchdog);
        if handling || index < self.watchdog_cleared[watchdog] {
            return None;
        }
        let rank = self.plan.rank;
        let message = work::async_exception(rank, &timed_out.description, error);
        let finding = Finding {
            stands_for: Default::default(),
            kind: FindingKind::AsyncError,
            rank: Some(rank),
            iteration: Some(timed_out.iteration),
            op: Some(timed_out.op),
            stream: None,
            message,
        };
        Some((watchdog, finding))
    }

    /// The oldest Work whose end event has not fired.
    fn oldest_pending(&mut self) -> Result<Option<&WorkState>, HwError> {
        for work in &self.works {
            if !self.device.query(work.end)? {
                return Ok(Some(work));
            }
        }
        Ok(None)
    }

    fn step(&mut self, iteration: u32, op: &Op, step: Step) -> Result<(), HwError> {
        let op_ref = op.index as OpRef;
        match step {
            Step::CallStart => {
                self.call_start_ns = self.device.now_ns();
                self.in_call = true;
                self.call_collective = None;
            }
            Step::CallEnd => {
                self.in_call = false;
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
            // A probe is one of hw's own timing events: a real record, where PyTorch has none.
            Step::Record { stream, slot } | Step::Probe { stream, slot } => {
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
            // The watchdog's verdict is checked before every op; a communicator the main thread
            // aborted raises here (R27).
            Step::CheckComm { group } if self.aborted[group] => {
                let name = &self.scenario.groups[group].name;
                let message = work::aborted_communicator_raised(self.plan.rank, name, op);
                if !op.catch {
                    let raise = (iteration, op, Some(group));
                    return Err(self.raise_uncaught(raise, FindingKind::AsyncError, message));
                }
                let at_ns = self.device.now_ns();
                let (thread, event) = (ThreadKind::Main, WatchdogEvent::AsyncError);
                self.note_group(Some(group), thread, event, at_ns, message.clone());
                self.raised(iteration, op, group, at_ns);
                self.catch(iteration, op, at_ns, message);
            }
            Step::CheckComm { .. } => {}
            // Every call that would have bound the Work raised first, caught: NameError, which
            // `except DistBackendError:` does not catch.
            Step::NameError { work } => {
                let name = &self.scenario.works[work];
                let message = work::name_error(self.plan.rank, name, op);
                let raise = (iteration, op, None);
                return Err(self.raise_uncaught(raise, FindingKind::ProgramError, message));
            }
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
                // The Work's end event, or the event that completes a future's callback.
                let (event, source_stream) = self.slots[end as usize];
                let host_start_ns = self.device.now_ns();
                let released =
                    self.stream_wait(iteration, op_ref, (source_stream, event), stream)?;
                // The record keeps the latest wait() on the Work, as the simulator does, from
                // its start: one that never returns or raises keeps its host side.
                self.log.collectives[collective as usize].rest.wait = Some(WaitLog {
                    op: op_ref,
                    host_start_ns,
                    host_end_ns: self.device.now_ns(),
                    stream,
                    released,
                    completed_at_return: false,
                });
                self.waiting_on = Some(collective);
                // After its stream wait, every wait() on a Work that stored its NCCL async
                // error (its own `is_completed()` found it) aborts the communicator, then
                // raises (R15, R27); the watchdog's finding stays in its copy of the Work.
                let end = self.works[collective as usize].end;
                if let Some(error_ns) = self.errors.stored_error_ns(end) {
                    let completed = self.device.query(end)?;
                    self.wait_aborts(iteration, op, (collective, completed), Some(error_ns))?;
                }
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
                self.waiting_on = None;
                let host_end_ns = self.device.now_ns();
                let completed_at_return = self.device.query(end)?;
                let record = &mut self.log.collectives[collective as usize].rest;
                let wait = record.wait.as_mut().expect("wait() returns after it began");
                (wait.host_end_ns, wait.completed_at_return) = (host_end_ns, completed_at_return);
            }
            Step::Query { slot, .. } => {
                let host_ns = self.device.now_ns();
                let event = self.slots[slot as usize].0;
                let fired = self.device.query(event)?;
                let error_ns = self.poll_error_ns(event);
                self.errors.program_polled(event, error_ns, host_ns);
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
            Step::StreamSyncUnlessCompleted {
                collective,
                stream,
                end,
                ..
            } => {
                let host_ns = self.device.now_ns();
                let event = self.slots[end as usize].0;
                let fired = self.device.query(event)?;
                let error_ns = self.poll_error_ns(event);
                // The barrier's own `isCompleted()` stores the error it finds, and the wait
                // then aborts the communicator and raises (R14, R27).
                if let Some(error_ns) = self.errors.program_polled(event, error_ns, host_ns) {
                    self.wait_aborts(iteration, op, (collective, fired), Some(error_ns))?;
                } else if !work::is_completed(fired, error_ns, host_ns) {
                    self.device.stream_sync(stream)?;
                }
            }
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
            Step::SetAside { tensor } => self.memory.set_aside(tensor),
            Step::FreeSetAside { tensor } => {
                // The name is bound to the new result already: only the old blocks go (R30).
                let mut events = Vec::new();
                for used_on in self.memory.set_aside_streams(tensor).unwrap_or_default() {
                    events.push(self.record(used_on)?);
                }
                self.memory.free_set_aside(tensor, events);
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
            Step::Copy { .. }
            | Step::Access { .. }
            | Step::BucketAccess { .. }
            | Step::ReadSetAside { .. } => {}
            // Only an eager world's send or receive warns (R11), and hw refuses those runs
            // before the first step ([`not_on_hardware`]).
            Step::EagerP2pWarning { .. } => {}
            // hw creates every communicator in blocking mode at its `InitComm` step, which
            // exchanges the unique id there ([`crate::nccl`]).
            Step::FetchUniqueId { .. } => {}
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

    /// `torch.empty` on the op's stream (R17), once per tensor of a list: each from the
    /// stream's cache, a new segment, or — at the capacity, or where the GPU refused the new
    /// segment — after releasing the cache: the host first waits for the whole device, unless
    /// expandable segments (R20).
    fn alloc(
        &mut self,
        iteration: u32,
        op: &Op,
        tensor: TensorId,
        stream: StreamRef,
    ) -> Result<(), HwError> {
        for _ in 0..self.scenario.tensors[tensor].count {
            self.alloc_one(iteration, op, tensor, stream)?;
        }
        self.device.bind(tensor, self.memory.place(tensor));
        Ok(())
    }

    /// One `torch.empty`: the next tensor of `tensor`'s list.
    fn alloc_one(
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
        let size_bytes = self.scenario.tensors[tensor].size_bytes;
        let count = self.scenario.tensors[tensor].count;
        let list_position = self.memory.list_position_text(tensor, count);
        // The GPU's words, where it refused the new segment the books had room for.
        let mut gpu_refusal = None;
        // At most one release: after it the request fits a new segment or never will (R20).
        for released in [false, true] {
            let mut step = if released {
                self.memory
                    .allocate_after_release(tensor, size_bytes, stream)
            } else {
                self.memory.allocate(tensor, size_bytes, stream)
            };
            if let AllocStep::NewSegment { place, bytes } = step {
                match self.device.malloc(place.segment, bytes, false) {
                    Ok(()) => return Ok(()),
                    // PyTorch counts a segment only once `cudaMalloc` returned it, and its
                    // `malloc` takes a refusal as no room: the cache is released and the
                    // segment asked for again, once (`release_cached_blocks`, R20).
                    Err(HwError::OutOfMemory(refused)) => {
                        gpu_refusal = Some(refused);
                        step = self.memory.refuse_new_segment();
                    }
                    Err(error) => return Err(error),
                }
            }
            match step {
                AllocStep::Cached(_) => return Ok(()),
                AllocStep::NewSegment { .. } => unreachable!("asked of the GPU above"),
                AllocStep::NeedsRelease { synchronises } if !released => {
                    // synchronize_and_free_events: recordStream's events first, even with
                    // expandable segments (R19, R20).
                    for event in self.memory.pending_events() {
                        self.device.event_sync(event)?;
                    }
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
                AllocStep::NeedsRelease { .. } | AllocStep::OutOfMemory => break,
            }
        }
        let pytorch_text = self.pytorch_out_of_memory_text(size_bytes, gpu_refusal.as_deref());
        let asked = (op, size_bytes, list_position.as_str());
        let refused = (gpu_refusal.as_deref())
            .map_or_else(|| CACHE_RELEASE_DID_NOT_HELP.to_string(), gpu_refused);
        Err(self.out_of_memory(iteration, stream, &pytorch_text, asked, &refused))
    }

    /// `torch.empty` at `op` raised PyTorch's `OutOfMemoryError` (`pytorch_text`, then what was
    /// `asked` and why it was `refused`), uncaught: its call ends there and the rank's program
    /// stops, with the simulator's `out_of_memory` finding. The error ends the program.
    fn out_of_memory(
        &mut self,
        iteration: u32,
        stream: StreamRef,
        pytorch_text: &str,
        asked: (&Op, u64, &str),
        refused: &str,
    ) -> HwError {
        let op = asked.0;
        let rank = self.plan.rank;
        let message = out_of_memory_finding(rank, pytorch_text, asked, refused);
        self.in_call = false;
        self.log.host.push(HostCall {
            iteration,
            op: op.index as OpRef,
            start_ns: self.call_start_ns,
            end_ns: self.device.now_ns(),
        });
        self.log.findings.push(Finding {
            stands_for: Default::default(),
            kind: FindingKind::OutOfMemory,
            rank: Some(rank),
            iteration: Some(iteration),
            op: Some(op.index as OpRef),
            stream: Some(self.plan.streams[stream as usize].name.clone()),
            message: message.clone(),
        });
        self.log.ended_early = true;
        HwError::OutOfMemory(message)
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
        let async_error = match &fate {
            CollectiveFate::AsyncError { after_ns } => Some(*after_ns),
            _ => None,
        };
        let remote_error =
            (self.plan.stand_in).and_then(|_| self.faults.remote_error(op, iteration, call.group));
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
                self.device
                    .collective(call.stream, g, comm_call)
                    .map_err(|error| self.call_failed(iteration, op, call.group, error))?
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
            remote_error,
        });
        Ok(())
    }

    /// A collective call NCCL refused because its communicator already holds an async error
    /// raises `DistBackendError` in the main thread, which ends the process (R27,
    /// [`work::nccl_call_raised`]); any other failure is returned as it is.
    fn call_failed(&mut self, iteration: u32, op: &Op, group: usize, error: HwError) -> HwError {
        let HwError::CommunicatorFailed { error: failed, .. } = error else {
            return error;
        };
        let now_ns = self.device.now_ns();
        self.raised(iteration, op, group, now_ns);
        HwError::AsyncError {
            work: None,
            finding: work::nccl_call_raised(self.plan.rank, failed, op),
        }
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
        let description = work_text(
            self.scenario,
            op,
            (
                call.kind,
                call.bytes,
                op.kind.call_dtype(&self.scenario.tensors),
            ),
            (call.group, call.seq_num),
        );
        if let Some(after_ns) = issued.async_error {
            let error_ns = work::async_error_ns(issued.enqueue_ns, after_ns);
            let communicator = self.scenario.communicator(call.group);
            self.errors.work_failed(end, communicator, error_ns);
        }
        if let Some((after_ns, from_rank)) = issued.remote_error {
            let error_ns = work::async_error_ns(issued.enqueue_ns, after_ns);
            self.remote_error_reads.push(RemoteErrorRead {
                group: self.scenario.process_group(call.group),
                read_ns: work::remote_error_read_ns(error_ns),
                from_rank,
            });
        }
        let rank = self.plan.rank;
        let async_error = issued.async_error.map(|after_ns| {
            let verdict = HwError::AsyncError {
                work: Some(end),
                finding: work::async_exception(rank, &description, NcclAsyncError::Remote),
            };
            (after_ns, verdict)
        });
        self.device.watch(WatchedWork {
            rank,
            group: call.group,
            end,
            enqueue_ns: issued.enqueue_ns,
            timeout_ns: g.timeout_ns,
            description: description.clone(),
            async_error,
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
                seq_num: call.seq_num,
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
                aborted: false,
                wait: None,
            },
        });
        if let Some(tensor) = stash {
            self.memory.keep_alive(
                tensor,
                call.group,
                call.stream,
                (record, end),
                (call.kind, held),
            );
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

    /// The NCCL async error a poll of the Work of end event `end` finds from its instant on
    /// (R27, [`WorkErrors::poll_error_ns`]): the Work's own, or its communicator's while that
    /// is not aborted.
    fn poll_error_ns(&self, end: Ev) -> Option<u64> {
        self.errors.poll_error_ns(
            end,
            || {
                let group = self.works.iter().find(|work| work.end == end)?.group;
                Some(self.scenario.communicator(group))
            },
            |communicator| self.aborted[communicator],
        )
    }

    /// Blocking wait or `wait(timeout)`: poll `is_completed()`, sleeping the interval between
    /// polls (R15); a poll that finds the Work failed by an async error (R27: its own or its
    /// communicator's, a Work completed before the call included) or the timeout
    /// (`sim::pg`'s: the wait's own, else the group's) passed since the enqueue (R26's clock,
    /// [`work::timed_out`]) aborts the Work's group's communicator and raises
    /// ([`Self::wait_aborts`]). A verdict of the watchdog (`wait(timeout)`, where it runs) ends
    /// the wait first, never returned: hw takes the process down at the verdict, as every
    /// other blocking call does; one the watchdog handles while the process lives on
    /// ([`Handling`], `TORCH_NCCL_ASYNC_ERROR_HANDLING=2`) does not stop the polls.
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
        loop {
            let completed = self.device.query(end)?;
            let now_ns = self.device.now_ns();
            let error_ns = (self.poll_error_ns(end))
                .filter(|&error_ns| work::failed_by(Some(error_ns), now_ns));
            if completed && error_ns.is_none() {
                return Ok(());
            }
            if let Some(failure) = self.unhandled_watchdog_failure() {
                return Err(failure);
            }
            // The poll's `isCompleted()` stores the error it finds in the Work (R27); the wait
            // raises the one stored.
            let stored_ns = self.errors.program_polled(end, error_ns, now_ns);
            if error_ns.is_some() || work::timed_out(enqueue_ns, limit_ns, now_ns) {
                let raised_error_ns = error_ns.and(stored_ns);
                return self.wait_aborts(iteration, op, (collective, completed), raised_error_ns);
            }
            self.device.host_sleep(poll_ns);
        }
    }

    /// A polling wait (R15) leaves its loop on the Work's async error (`error_ns`, R27) or its
    /// timeout: as PyTorch's `WorkNCCL::wait()`, the main thread aborts the communicator of
    /// the Work's group, then raises once the abort returned, the error or the timeout; where
    /// it runs, the watchdog finds, in the raise's millisecond, the Work's error or, after the
    /// timeout, the aborted communicator's ([`Self::found_at_the_raise`]; uncaught after a
    /// timeout, in [`Self::verdict`]); caught, the program goes on with the communicator
    /// aborted.
    fn wait_aborts(
        &mut self,
        iteration: u32,
        op: &Op,
        (collective, completed): (u32, bool),
        error_ns: Option<u64>,
    ) -> Result<(), HwError> {
        let rank = self.plan.rank;
        let now_ns = self.device.now_ns();
        let work = &self.works[collective as usize];
        let (end, group, description) = (work.end, work.group, work.description.clone());
        let ran_ns = now_ns.saturating_sub(work.enqueue_ns);
        let (event, lines) = match error_ns {
            Some(_) => (
                WatchdogEvent::WaitError,
                vec![work::wait_error_log(rank, &description)],
            ),
            None => (
                WatchdogEvent::WaitTimeout,
                work::wait_timeout_log(rank, &description, ran_ns).to_vec(),
            ),
        };
        for line in lines {
            self.note_group(Some(group), ThreadKind::Main, event, now_ns, line);
        }
        // A Work completed before the call stays completed.
        self.abort_pending_works(group, (!completed).then_some(collective))?;
        self.device.abort_comm(group);
        self.aborted[group] = true;
        // It raises once the abort returned.
        let raised_ns = self.device.now_ns();
        let name = &self.scenario.groups[group].name;
        let (thread, event) = (ThreadKind::Main, WatchdogEvent::Abort);
        if let Some(error_ns) = error_ns {
            let aborted = work::wait_error_abort_returned(rank, &description, name);
            self.note_group(Some(group), thread, event, raised_ns, aborted);
            // The watchdog, whose polls blocked on the abort, finds the Work's own error
            // before the wait's exception is caught or ends the process (R15, R27, R28). That
            // finding is the one it would give on the injected error, which a real
            // watchdog's poll would meet again after the abort: it is done with the group's
            // Works, as after its own handling. It names the Work the network failed under,
            // whichever Work the wait was on (R27).
            let communicator = self.scenario.communicator(group);
            let failed_under = self.errors.failed_under(communicator).unwrap_or(end);
            if self.found_at_the_raise(failed_under, NcclAsyncError::Remote, op.catch) {
                self.device.watchdog_resumed(group);
            }
            return self.raise_failed(iteration, op, collective, (error_ns, raised_ns));
        }
        let aborted = work::wait_abort_returned(rank, &description, name);
        self.note_group(Some(group), thread, event, raised_ns, aborted.clone());
        self.raised(iteration, op, group, raised_ns);
        let finding = work::wait_timeout_finding(rank, &description, ran_ns, op);
        if op.catch {
            self.timeout_caught(iteration, op, (end, finding));
            self.catch(iteration, op, raised_ns, work::wait_raise_caught(&aborted));
            return Ok(());
        }
        Err(HwError::Timeout {
            work: Some(end),
            finding,
        })
    }

    /// Before the main thread aborts the communicator of `group` under the timed-out Work
    /// `timed_out` (R15): that Work and every other of the group not completed by now are
    /// aborted, their collectives written unfinished ([`CollectiveLog::aborted`]).
    fn abort_pending_works(&mut self, group: usize, timed_out: Option<u32>) -> Result<(), HwError> {
        for (index, work) in self.works.iter().enumerate() {
            let record = &self.log.collectives[index].rest;
            if work.group != group || record.aborted {
                continue;
            }
            if timed_out == Some(index as u32) || !self.device.query(work.end)? {
                self.log.collectives[index].rest.aborted = true;
            }
        }
        Ok(())
    }

    /// A polling wait's timeout (R15) on the Work of end event `end`, which the program caught:
    /// its `wait_timeout` finding (`finding`), and where the watchdog runs, its finding of the
    /// error of the communicator the main thread aborted under the Work, in the raise's
    /// millisecond ([`Self::aborted_found`]), after which hw takes the process down where
    /// `TORCH_NCCL_ASYNC_ERROR_HANDLING` tears down (1, 3), after the dump wait or at the
    /// program's end ([`Self::watchdog_found`]).
    fn timeout_caught(&mut self, iteration: u32, op: &Op, (end, finding): (Ev, String)) {
        let stream = self.plan.streams[op.stream].name.clone();
        self.log.findings.push(Finding {
            stands_for: Default::default(),
            kind: FindingKind::WaitTimeout,
            rank: Some(self.plan.rank),
            iteration: Some(iteration),
            op: Some(op.index as OpRef),
            stream: Some(stream),
            message: finding,
        });
        self.found_at_the_raise(end, NcclAsyncError::AbortedByWait, true);
    }

    /// Where the watchdog runs, its finding of `error` under the Work of end event `end`, in
    /// the raise's millisecond, once the main thread's abort of the Work's communicator
    /// returned ([`Self::aborted_found`]): its `async_error` record and finding, then, where
    /// the program `caught` the wait's exception, its error handling ([`Self::handles_later`]);
    /// uncaught, the exception ends the process first. Whether the watchdog found it.
    fn found_at_the_raise(&mut self, end: Ev, error: NcclAsyncError, caught: bool) -> bool {
        let Some((watchdog, found)) = self.aborted_found(end, error) else {
            return false;
        };
        let at_ns = self.device.now_ns();
        let (thread, event) = (ThreadKind::Watchdog, WatchdogEvent::AsyncError);
        self.note_group(Some(watchdog), thread, event, at_ns, found.message.clone());
        self.log.findings.push(found);
        if caught {
            // Found after the main thread's abort returned, as its handling of a verdict: the
            // aborted communicator's error is traced, the Work's own async error is not.
            let traced = work::stack_traced(Some(error));
            self.handles_later(Some(watchdog), at_ns, traced, false);
        }
        true
    }

    /// `wait()` on the Work of `collective`, failed by an NCCL async error at `error_ns`, raises
    /// `DistBackendError` at `at_ns` (R27): caught, the program goes on.
    fn raise_failed(
        &mut self,
        iteration: u32,
        op: &Op,
        collective: u32,
        (error_ns, at_ns): (u64, u64),
    ) -> Result<(), HwError> {
        let work = &self.works[collective as usize];
        let failed = work::async_error_failed(self.plan.rank, &work.description, error_ns, op);
        let group = work.group;
        self.raised(iteration, op, group, at_ns);
        if op.catch {
            self.catch(iteration, op, at_ns, work::failed_work_caught(&failed));
            return Ok(());
        }
        let message = work::uncaught(&failed);
        Err(HwError::AsyncError {
            work: None,
            finding: message,
        })
    }
}

/// Whether `error` is a verdict of the watchdog: a timeout (R26), an NCCL async error (R27).
fn is_verdict(error: &HwError) -> bool {
    matches!(error, HwError::Timeout { .. } | HwError::AsyncError { .. })
}

/// Why no block came where the GPU refused the new segment the books had room for: `detail`,
/// the device's words (`HwError::OutOfMemory`).
fn gpu_refused(detail: &str) -> String {
    format!("the GPU refused the new segment ({detail})")
}

#[cfg(test)]
mod tests;
