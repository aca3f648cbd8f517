//! The Timeline: what happened, per rank, per stream, per op — written by the simulator and by
//! the hardware backend alike, read by `analysis` (metrics, traces, diffs, sweeps).
//!
//! Its JSON form is a documented wire format (`docs/timeline-format.md`, format id
//! [`TIMELINE_FORMAT`]). Times are integer nanoseconds on one axis per rank: host and GPU times
//! share it (the hardware backend aligns them, R1–R3).
//!
//! About 1,520 lines because the wire format is one piece: every record type, `Timeline::expand`
//! (a folded Timeline rank by rank, docs/scale.md) and the reference check that a file read back
//! must pass. The summaries of a summarised run (`TimelineSummary`, `RecordSelection`,
//! `Distribution`) are `timeline/summary.rs`; its unit tests `timeline/tests.rs`.

pub use crate::ranks::RankSet;
use crate::scenario::{CollectiveKind, OpKind, Scenario};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use std::ops::Range;
pub use summary::*;

mod summary;

/// Format id written into every Timeline; bumped on incompatible changes.
pub const TIMELINE_FORMAT: &str = "c10dsim-timeline/1";

/// A time that never came (an event that never fired), in the records an engine builds before
/// [`RankTimeline::set_apart_unfinished`]: both engines build their kernel and collective
/// records with it, and that one function turns them into the Timeline's, so that the two
/// engines give the same records for the same times.
pub const NEVER_NS: u64 = u64::MAX;

/// Where a Timeline came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    Simulated,
    /// Measured by the hardware backend (`hw`), the re-enactment of ProcessGroupNCCL.
    Measured,
    /// Measured through real `torch.distributed` by the Python interpreter (`c10dsim torch`).
    Torch,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Timeline {
    pub format: String,
    pub source: Source,
    pub scenario: ScenarioInfo,
    /// Machine description: for a measured run the device, driver, CUDA and NCCL versions; for
    /// a simulated one the model's version and GPU preset.
    pub machine: BTreeMap<String, String>,
    /// The program's ops, indexed by [`OpRef`]s in the records.
    pub ops: Vec<OpInfo>,
    pub ranks: Vec<RankTimeline>,
    pub findings: Vec<Finding>,
    /// What the watchdog, the heartbeat monitor and the main thread did about timeouts and
    /// errors (R15, R26–R29, R31), in time order; empty in a run where nothing went wrong.
    #[serde(default)]
    pub watchdog: Vec<WatchdogRecord>,
    /// The Flight Recorder dump of each rank that dumped (`TORCH_NCCL_DUMP_ON_TIMEOUT`, R27),
    /// in rank order; absent when none did (docs/flight-recorder.md).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flight_recorder: Vec<crate::flight_recorder::FlightRecorderDump>,
    /// A run kept as summaries (`run --summary`): the distributions of every record, while
    /// `ranks` holds only the ranks and iterations named by `--records-for`; absent from a
    /// Timeline that holds every record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<TimelineSummary>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScenarioInfo {
    pub name: String,
    pub path: String,
    pub source_hash: String,
    pub seed: u64,
    pub torch: String,
    pub repeat: u32,
    pub warmup: u32,
    pub ranks: u32,
    /// Named measures (`[[measure]]`): name, from-mark, to-mark, clock.
    pub measures: Vec<MeasureInfo>,
    /// Overlap figures (R3): name, then the compute, comm and both measures, by name.
    pub overlaps: Vec<[String; 4]>,
    pub marks: Vec<String>,
    /// Process group names; index 0 is the world group.
    pub groups: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MeasureInfo {
    pub name: String,
    pub from: String,
    pub to: String,
    pub clock: String,
}

/// One op of the program, as the records refer to it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OpInfo {
    pub index: u32,
    /// Label, or `key#index`.
    pub name: String,
    /// The scenario key (`all_reduce`, `wait`, `gemm`, …).
    pub key: String,
    /// Line of the op in the scenario file.
    pub line: u32,
    /// The kernel it launches, named as a profiler shows it, if any.
    pub kernel_name: Option<String>,
    /// Host-side API names a profiler shows for the call (`cudaStreamSynchronize`, …).
    pub host_name: String,
    /// A collective's element type as NCCL names it (`f32`, `bf16`, `f16`): the trace's
    /// `record_param_comms` needs it where the kernel's name does not carry it (all_to_all,
    /// send and recv launch `ncclDevKernel_SendRecv`). Absent from older files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dtype: Option<String>,
    /// A `batch_isend_irecv`'s sends and receives, in the batch's order: PyTorch's profiler
    /// records each (`ProcessGroupNCCL::send` / `::recv` inside the coalescing), where the
    /// records keep the batch as one call. Empty for every other op, and in older files.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub transfers: Vec<TransferInfo>,
    /// A `_coalescing_manager` block (`coalesce = true`, R25): PyTorch's fast path makes one
    /// call of all its tensors, which the trace's `record_param_comms` names
    /// (`allreduce_coalesced`, …). False for every other op, and in older files.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub coalesced: bool,
}

/// One send or receive of a `batch_isend_irecv`, as the trace's `record_param_comms` needs it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TransferInfo {
    /// `dist.isend`; else `dist.irecv`.
    pub send: bool,
    /// The peer, as a distance along the group's ranks (+1: the next rank, −1: the previous).
    pub shift: i64,
    /// The tensor's bytes.
    pub bytes: u64,
    /// Its element type as NCCL names it (`f32`, `bf16`, `f16`).
    pub dtype: String,
}

/// Index into [`Timeline::ops`].
pub type OpRef = u32;
/// Index into [`RankTimeline::streams`].
pub type StreamRef = u16;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StreamKind {
    /// The default (current at start) stream.
    Default,
    /// A stream the scenario declared.
    User,
    /// A process group's internal NCCL stream (R9).
    Nccl,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamInfo {
    pub name: String,
    pub kind: StreamKind,
    pub high_priority: bool,
}

/// How a rank's process ended, as its launcher sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExitStatus {
    /// The program ran to its end and its GPU work drained: exit code 0 (R31).
    Clean,
    /// An exception nobody caught in the main thread (`DistBackendError` from a failed Work or
    /// an aborted communicator, a blocking wait's timeout, `DistStoreError`, CUDA out of
    /// memory): exit code 1.
    Raised,
    /// `SIGABRT`: the watchdog took the process down (`TORCH_NCCL_ASYNC_ERROR_HANDLING` 1 or
    /// 3: its exception, uncaught in its thread, ends in `std::abort`), or the heartbeat
    /// monitor called `std::abort()` (R27, R28).
    Aborted,
    /// Killed from outside (a `die` fault).
    Killed,
    /// `SIGSEGV` at exit (exit code 139): the program returned while its watchdog slept for
    /// the Flight Recorder dumps, as PyTorch 2.11 was measured to crash (R31).
    Crashed,
    /// Still running when the run ended: hung (a deadlock, a `hang` fault, an error left
    /// alone) or stopped at the time cap; only a launcher's time limit would end it.
    Running,
}

/// An exception a call raised and the program caught (`catch = true`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExceptionRecord {
    pub iteration: u32,
    pub op: OpRef,
    /// Host time of the raise (the call's end).
    pub at_ns: u64,
    /// Its Python type, e.g. `DistBackendError`.
    pub exception: String,
    pub message: String,
}

/// A rank's process end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessEnd {
    pub status: ExitStatus,
    /// When it ended (for a clean exit the later of the last host call's return and the drain
    /// of its GPU work, R31); `None` while running.
    pub at_ns: Option<u64>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RankTimeline {
    pub rank: u32,
    pub streams: Vec<StreamInfo>,
    /// Every host call, in program order.
    pub host: Vec<HostCall>,
    /// Every kernel (compute, sleep, NCCL), in order of launch.
    pub kernels: Vec<KernelRecord>,
    /// Every collective call (also `async_op=False` and barriers).
    pub collectives: Vec<CollectiveRecord>,
    pub marks: Vec<MarkRecord>,
    /// Every `cudaStreamWaitEvent`: syncStream (R10a), `wait()` (R12), `wait_event` (R5).
    pub stream_waits: Vec<StreamWaitRecord>,
    /// `is_completed()` results (R13).
    pub queries: Vec<QueryRecord>,
    /// Every collective call whose host call happened but whose collective never completed (a
    /// hang, a timeout, an abort): recorded as called, never counted as completed. Absent
    /// when none, and from older files.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unfinished_collectives: Vec<UnfinishedCollective>,
    /// Every kernel launched that never ended, in order of launch (its `cudaLaunchKernel`
    /// returned; CUPTI reports no kernel that has not finished). Absent when none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unfinished_kernels: Vec<UnfinishedKernel>,
    /// Every `cudaStreamWaitEvent` whose waiting stream was never released, in program order
    /// (its event never fired, or the stream never reached the wait). Absent when none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unfinished_stream_waits: Vec<UnfinishedStreamWait>,
    /// The host call that never returned: still blocked (or running) when the rank's process
    /// ended or the run did. Never a completed call: `host` holds none of it. Absent when the
    /// host was between calls, and from older files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unfinished_host: Option<UnfinishedHostCall>,
    /// The iteration the rank's program was in when its process ended, or the run did, before
    /// the program returned (stopped by a fault, an uncaught exception, a call that never
    /// returned): its `profiler.step()` never came. Absent when the program returned, and from
    /// older files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unfinished_iteration: Option<u32>,
    /// In a summarised Timeline (`run --summary`): where the profiler step of each kept
    /// iteration whose previous iteration's records are not kept starts, `[iteration,
    /// start_ns]` (the end of the previous iteration's last host call), in iteration order; a
    /// kept iteration not listed starts where the kept one before it ends (the first at 0).
    /// Absent when none, and from a Timeline that holds every record.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub step_starts_ns: Vec<(u32, u64)>,
    /// Peak memory of the caching allocator (R17–R20).
    #[serde(default)]
    pub memory: crate::allocator::MemoryPeaks,
    /// Allocations that had to release the cache first: a device-wide stall (R20).
    #[serde(default)]
    pub cache_releases: Vec<CacheRelease>,
    /// Data races the detector found (R21).
    #[serde(default)]
    pub races: Vec<RaceRecord>,
    /// Exceptions the program caught (`catch = true`) and went on from.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exceptions: Vec<ExceptionRecord>,
    /// How the rank's process ended (the simulator's; engines that do not know leave it out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<ProcessEnd>,
    /// In a folded Timeline (docs/scale.md): every rank these records stand for, `rank` the
    /// lowest, as inclusive ranges; absent when they are `rank`'s alone.
    #[serde(default, skip_serializing_if = "RankSet::is_empty")]
    pub stands_for: RankSet,
}

/// An allocation that released the allocator's cache (`release_cached_blocks`: synchronise,
/// then `cudaFree` every cached segment, R20).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheRelease {
    pub iteration: u32,
    pub op: OpRef,
    /// The host call that stalled, from its start to the allocation.
    pub host_start_ns: u64,
    pub host_end_ns: u64,
    /// When the device had drained (none with expandable segments, or when the release freed
    /// no segment: it waited only for recordStream's events).
    pub device_idle_ns: Option<u64>,
    pub segments_freed: u32,
}

/// Two accesses of one block of memory that nothing orders (R21).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RaceRecord {
    pub iteration: u32,
    /// Host time of the later access's call.
    pub host_ns: u64,
    /// The tensor of the later access (the block may have been another tensor's before), or
    /// the bucket buffer, as `bucket buffer 1 of 2 of ddp (line 7)` (R25).
    pub tensor: String,
    /// The tensor of the earlier access, where it was another one: the allocator gave its
    /// freed block to `tensor` (R17).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub earlier_tensor: Option<String>,
    pub earlier_op: OpRef,
    pub earlier_stream: String,
    pub earlier_write: bool,
    pub later_op: OpRef,
    pub later_stream: String,
    pub later_write: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostCall {
    pub iteration: u32,
    pub op: OpRef,
    pub start_ns: u64,
    pub end_ns: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KernelClass {
    Compute,
    Communication,
    Sleep,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelRecord {
    pub iteration: u32,
    pub op: OpRef,
    pub stream: StreamRef,
    pub class: KernelClass,
    /// Host time of the launch.
    pub enqueue_ns: u64,
    pub start_ns: u64,
    pub end_ns: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CollectiveRecord {
    pub iteration: u32,
    pub op: OpRef,
    /// Index into [`ScenarioInfo::groups`].
    pub group: u16,
    /// Sequence number within the group, counted from 1: the group's calls, point-to-point
    /// batches on it included, by which the ranks of a call meet. PyTorch's `SeqNum` differs
    /// for point-to-point calls and after batches: [`CollectiveRecord::seq_num`].
    pub seq: u64,
    /// The Work's `SeqNum` as PyTorch prints it, where it is not `seq`: a point-to-point
    /// call's count among its process group's point-to-point calls, a collective's count
    /// among its group's collectives when batches of point-to-point calls came before it.
    /// Absent (and left out of the JSON) where it equals `seq`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub work_seq_num: Option<std::num::NonZeroU64>,
    pub bytes: u64,
    pub async_op: bool,
    /// Stream current at the call.
    pub call_stream: StreamRef,
    /// Stream the kernel ran on (internal for async, R10; current for sync under 2.12, R11).
    pub run_stream: StreamRef,
    pub host_start_ns: u64,
    pub host_end_ns: u64,
    /// When the calling stream passed the call's point (the input-ready event fired, R10a).
    pub input_ready_ns: u64,
    pub kernel_start_ns: u64,
    /// When the Work's start event fired, for a timed Work (`TORCH_NCCL_ENABLE_TIMING`, R6):
    /// PyTorch records it on the kernel's stream before NCCL enqueues the kernel, so on an idle
    /// stream it fires before the kernel starts. `None` where Works are not timed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub work_start_ns: Option<u64>,
    /// When the last rank's kernel arrived and data began to move (R16); for a measured run,
    /// not observable and equal to `kernel_start_ns`.
    pub data_start_ns: u64,
    /// Kernel end = the Work's end event (R10d).
    pub end_ns: u64,
    /// The rank whose kernel arrived last (R16), where known.
    pub last_rank: Option<u32>,
    pub wait: Option<WaitRecord>,
}

impl CollectiveRecord {
    /// The Work's `SeqNum` as PyTorch prints it (the watchdog's `WorkNCCL(SeqNum=…)`, the
    /// Flight Recorder's `collective_seq_id` or `p2p_seq_id`).
    pub fn seq_num(&self) -> u64 {
        self.work_seq_num
            .map_or(self.seq, std::num::NonZeroU64::get)
    }

    /// The `work_seq_num` field of a call whose group numbered it `seq` and whose Work's
    /// `SeqNum` is `seq_num`.
    pub fn work_seq_num_field(seq: u64, seq_num: u64) -> Option<std::num::NonZeroU64> {
        std::num::NonZeroU64::new(seq_num).filter(|_| seq_num != seq)
    }

    /// The collective's duration as PyTorch reports it (the Flight Recorder's `duration_ms`,
    /// R6): from the Work's start event to its end event where the Work is timed, else the
    /// kernel's own start to its end.
    pub fn duration_ns(&self) -> i64 {
        self.end_ns as i64 - self.work_start_ns.unwrap_or(self.kernel_start_ns) as i64
    }

    /// R3 `stream_interval`: from the input-ready point on the calling stream to the point
    /// from which work issued on the consuming stream after the wait returned can run (the
    /// stream's release, or the wait's host return where that is later).
    pub fn stream_interval_ns(&self) -> i64 {
        let released_ns = match &self.wait {
            Some(wait) => wait.released_ns.max(wait.host_end_ns),
            // A blocking collective (`async_op=False`) releases the calling stream itself.
            None if !self.async_op => self.end_ns.max(self.host_end_ns),
            None => self.end_ns,
        };
        released_ns as i64 - self.input_ready_ns as i64
    }
}

/// A `wait()` on a collective's Work, or the implicit one of `async_op=False`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct WaitRecord {
    /// The wait op, or the collective itself for the implicit wait.
    pub op: OpRef,
    pub host_start_ns: u64,
    pub host_end_ns: u64,
    /// The stream current at `wait()` (R12).
    pub stream: StreamRef,
    /// When that stream passed the wait, i.e. the dependency resolved on the GPU.
    pub released_ns: u64,
    /// `is_completed()` right after `wait()` returned (R3).
    pub completed_at_return: bool,
}

/// A collective the program called whose Work never completed: the host side of the call
/// (its `record_param_comms`, its launch, its Work) happened; its data never moved.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UnfinishedCollective {
    pub iteration: u32,
    pub op: OpRef,
    /// Index into [`ScenarioInfo::groups`].
    pub group: u16,
    /// As [`CollectiveRecord::seq`].
    pub seq: u64,
    /// As [`CollectiveRecord::work_seq_num`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub work_seq_num: Option<std::num::NonZeroU64>,
    pub bytes: u64,
    pub async_op: bool,
    pub call_stream: StreamRef,
    pub run_stream: StreamRef,
    pub host_start_ns: u64,
    /// The call's return; for a call that never returned (its implicit wait blocked), where
    /// ProcessGroupNCCL's call returned its Work.
    pub host_end_ns: u64,
    /// When the calling stream passed the call (R10a); `None`: never.
    pub input_ready_ns: Option<u64>,
    /// When its kernel started on the GPU; `None`: never.
    pub kernel_start_ns: Option<u64>,
    /// When an abort of the communicator ended its spinning kernel before data moved (R15,
    /// R27); `None`: the kernel never ended.
    pub kernel_end_ns: Option<u64>,
    /// The `wait()` on its Work (or the implicit one, R11) the host called; its stream was
    /// never released.
    pub wait: Option<UnfinishedWait>,
}

impl UnfinishedCollective {
    /// As [`CollectiveRecord::seq_num`].
    pub fn seq_num(&self) -> u64 {
        self.work_seq_num
            .map_or(self.seq, std::num::NonZeroU64::get)
    }
}

/// The host side of a `wait()` whose stream was never released.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnfinishedWait {
    /// The wait op, or the collective itself for the implicit wait.
    pub op: OpRef,
    pub host_start_ns: u64,
    /// Its return (or its raise); `None`: it never returned (the rank's
    /// [`RankTimeline::unfinished_host`]).
    pub host_end_ns: Option<u64>,
    /// The stream current at `wait()` (R12).
    pub stream: StreamRef,
}

/// A host call that never returned: the rank's process ended, or the run did, while the host
/// was inside it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnfinishedHostCall {
    pub iteration: u32,
    pub op: OpRef,
    pub start_ns: u64,
    /// What the call was blocked on; `None`: it was not blocked, the host was still running
    /// it (its own host time) when it ended.
    pub blocked_on: Option<HostBlock>,
}

/// What a host call that never returned was blocked on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum HostBlock {
    /// A point on `stream` the GPU never reached: `.item()`, `stream.synchronize()`,
    /// `event.synchronize()` (the event's stream) (R14).
    Stream { stream: StreamRef },
    /// Every stream of the device to drain: `torch.cuda.synchronize()`, a cache release (R14,
    /// R20).
    Device,
    /// The Work of the collective `seq` of `group` (as [`CollectiveRecord::seq`]): a polling
    /// `wait()` (blocking wait or `timeout`, R15); `aborting` once past its timeout, in the
    /// main thread's abort of the communicator, which waits for the device to drain.
    Work {
        group: u16,
        seq: u64,
        aborting: bool,
    },
    /// The communicator of `group`: its creation, waiting for the other members (R8), or the
    /// watchdog of its process group, busy with an error: its abort of the communicator, or
    /// its Work list, which the call needs to enqueue its Work (R27).
    Communicator { group: u16 },
    /// An enqueue onto `stream`, whose launch queue is full (R1).
    LaunchQueue { stream: StreamRef },
}

impl RankTimeline {
    /// Records `call` as the host call that never returned; a `wait()` it is (or the implicit
    /// one of a blocking collective it is) never returned either.
    pub fn leave_open(&mut self, call: UnfinishedHostCall) {
        let waits = (self.unfinished_collectives.iter_mut()).filter_map(|c| c.wait.as_mut());
        for wait in waits.filter(|w| w.op == call.op && w.host_start_ns >= call.start_ns) {
            wait.host_end_ns = None;
        }
        self.unfinished_host = Some(call);
    }
}

/// A kernel launched that never ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnfinishedKernel {
    pub iteration: u32,
    pub op: OpRef,
    pub stream: StreamRef,
    pub class: KernelClass,
    /// Host time of the launch.
    pub enqueue_ns: u64,
    /// When it started; `None`: it never started (queued behind a kernel that never ended).
    pub start_ns: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct MarkRecord {
    pub iteration: u32,
    pub mark: u32,
    pub host_ns: u64,
    /// When the stream passed the mark's event.
    pub gpu_ns: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamWaitRecord {
    pub iteration: u32,
    pub op: OpRef,
    /// Stream whose event is waited on.
    pub source_stream: StreamRef,
    /// When that event fired.
    pub source_ns: u64,
    pub waiting_stream: StreamRef,
    /// When the waiting stream passed the wait.
    pub released_ns: u64,
}

/// A `cudaStreamWaitEvent` the host issued whose waiting stream was never released: a
/// `get_future()`'s, a `wait_event` on an event that never fired, a `wait()` (the last one on a
/// collective that never completed, as that collective's `wait` says, or an earlier one), a
/// collective's on an input that never came (R10a).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnfinishedStreamWait {
    pub iteration: u32,
    pub op: OpRef,
    /// Stream whose event is waited on.
    pub source_stream: StreamRef,
    /// When that event fired; `None`: never.
    pub source_ns: Option<u64>,
    pub waiting_stream: StreamRef,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueryRecord {
    pub iteration: u32,
    pub op: OpRef,
    pub host_ns: u64,
    pub completed: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FindingKind {
    /// Some rank can never proceed: a collective that a rank never joins, a wait that cannot be
    /// satisfied.
    Deadlock,
    /// Simulated time reached the scenario's cap.
    TimeCap,
    /// A polling `wait()` passed its timeout and raised in the main thread (R15).
    WaitTimeout,
    /// The watchdog caught a collective past its timeout, counted from enqueue (R26).
    WatchdogTimeout,
    /// The watchdog caught an NCCL async error on a communicator, or one another rank
    /// propagated (R26, R27).
    AsyncError,
    /// The heartbeat monitor found the watchdog stuck and aborted the process (R28).
    HeartbeatAbort,
    /// `store.get` of the NCCL unique id timed out: rank 0 never published it (R29).
    StoreTimeout,
    /// Ranks issued different collectives or sizes at one SeqNum of a group (R16).
    Mismatch,
    /// Two accesses of one tensor's memory that nothing orders (R21).
    Race,
    /// An allocation that does not fit even after the cache was released (R20).
    OutOfMemory,
    /// The simulator itself held more memory than its cap (`--max-memory`): the run was
    /// stopped, and what it recorded so far is reported.
    MemoryCap,
    /// A process whose program returned failed at exit (R31): the destructor's abort of the
    /// communicators timed out, or the program returned while the watchdog slept for the
    /// dumps.
    ExitFailure,
    /// The program raised an exception of its own, not PyTorch's, and did not catch it: a
    /// Work's name used where every call that would have bound it raised first (`catch =
    /// true`), Python's `NameError`.
    ProgramError,
}

impl FindingKind {
    /// The kind as written in the Timeline.
    pub fn as_str(self) -> &'static str {
        match self {
            FindingKind::Deadlock => "deadlock",
            FindingKind::TimeCap => "time_cap",
            FindingKind::WaitTimeout => "wait_timeout",
            FindingKind::WatchdogTimeout => "watchdog_timeout",
            FindingKind::AsyncError => "async_error",
            FindingKind::HeartbeatAbort => "heartbeat_abort",
            FindingKind::StoreTimeout => "store_timeout",
            FindingKind::Mismatch => "mismatch",
            FindingKind::Race => "race",
            FindingKind::OutOfMemory => "out_of_memory",
            FindingKind::MemoryCap => "memory_cap",
            FindingKind::ExitFailure => "exit_failure",
            FindingKind::ProgramError => "program_error",
        }
    }
}

/// The thread of a rank's process that acted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ThreadKind {
    /// The Python main thread (blocking wait, store rendezvous, program faults).
    Main,
    /// `pt_nccl_watchdg`, one per process group (R26).
    Watchdog,
    /// `pt_nccl_heartbt`, one per process group (R28).
    HeartbeatMonitor,
}

/// The thread as the Timeline names it (`main`, `watchdog`, `heartbeat_monitor`): serde's name.
impl fmt::Display for ThreadKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.serialize(f)
    }
}

/// The event as the Timeline names it (`wait_error`, `abort_returned`, …): serde's name.
impl fmt::Display for WatchdogEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.serialize(f)
    }
}

/// What happened, in the order PyTorch's error path goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WatchdogEvent {
    /// An injected fault took effect (`[[fault]]`).
    Fault,
    /// The watchdog caught a collective past its timeout (R26).
    Timeout,
    /// The watchdog caught an NCCL async error (R26).
    AsyncError,
    /// The watchdog learned through the store that another rank failed (R27,
    /// `TORCH_NCCL_PROPAGATE_ERROR`).
    RemoteError,
    /// Flight-Recorder-like report of every rank's SeqNums (`TORCH_NCCL_DESYNC_DEBUG`).
    DesyncReport,
    /// The watchdog logged a timed-out Work's stack trace before signalling the dump (R27).
    StackTrace,
    /// The dump signal was written to the store for every rank (R27).
    DumpSignal,
    /// This rank dumped its Flight Recorder.
    Dump,
    /// `TORCH_NCCL_ASYNC_ERROR_HANDLING=0`: the error is left alone.
    NoHandling,
    /// The communicators were aborted (`ncclCommAbort`).
    Abort,
    /// The watchdog's abort of the communicators returned and it goes on polling
    /// (`TORCH_NCCL_ASYNC_ERROR_HANDLING=2`: after `host.comm_abort_us` and the device's drain).
    AbortReturned,
    /// The process ended (exception, `std::abort()`, or a fault); its GPU work vanished.
    Exit,
    /// The heartbeat monitor found the watchdog's heartbeat unchanged (R28).
    HeartbeatTimeout,
    /// `TORCH_NCCL_ENABLE_MONITORING=0`: the heartbeat monitor, done with its dump and its
    /// sleep, would have terminated the process and did not (R28).
    MonitorDisabled,
    /// `store.get` of the NCCL unique id timed out (R29).
    StoreTimeout,
    /// A polling `wait()` raised its timeout in the main thread (R15).
    WaitTimeout,
    /// A `wait()`, default or polling, found its Work failed by its communicator's NCCL async
    /// error in the main thread, which aborts the communicator, then raises (R15, R27).
    /// Timelines written before this event record that line as a `wait_timeout`.
    WaitError,
    /// A warning PyTorch logged from the main thread, once (`TORCH_WARN_ONCE`): an unbatched
    /// send or receive on an eagerly initialised group, serialised with its collectives (R11).
    Warning,
}

/// One step of the watchdog / error-handling story of a rank.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WatchdogRecord {
    pub rank: u32,
    /// Index into [`ScenarioInfo::groups`], for the per-group threads.
    pub group: Option<u16>,
    pub thread: ThreadKind,
    pub event: WatchdogEvent,
    pub at_ns: u64,
    /// The log line, shaped like PyTorch's.
    pub message: String,
    /// Every rank that logged the same at the same time (`rank` the lowest), when more than
    /// `rank` did: the record is made once per class of ranks that behave alike
    /// (docs/scale.md).
    #[serde(default, skip_serializing_if = "RankSet::is_empty")]
    pub stands_for: RankSet,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    pub kind: FindingKind,
    pub rank: Option<u32>,
    pub iteration: Option<u32>,
    pub op: Option<OpRef>,
    pub stream: Option<String>,
    pub message: String,
    /// Every rank that found the same (`rank` the lowest), when more than `rank` did: a
    /// finding is made once per class of ranks that behave alike (docs/scale.md).
    #[serde(default, skip_serializing_if = "RankSet::is_empty")]
    pub stands_for: RankSet,
}

impl WatchdogRecord {
    /// Whether `rank` logged this step: the record's own rank or one it stands for.
    pub fn concerns(&self, rank: u32) -> bool {
        self.rank == rank || self.stands_for.contains(rank)
    }

    /// Every rank that logged this step: those it stands for (a record made once for a class
    /// of ranks, docs/scale.md), else its own.
    pub fn ranks(&self) -> RankSet {
        if self.stands_for.is_empty() {
            RankSet::range(self.rank, self.rank)
        } else {
            self.stands_for.clone()
        }
    }
}

impl Finding {
    /// Whether `rank` found this: the finding's own rank or one it stands for.
    pub fn concerns(&self, rank: u32) -> bool {
        self.rank == Some(rank) || self.stands_for.contains(rank)
    }

    /// Every rank that found this: those it stands for (a finding made once for a class of
    /// ranks, docs/scale.md), else its own; none for a finding of no rank.
    pub fn ranks(&self) -> RankSet {
        match self.rank {
            Some(rank) if self.stands_for.is_empty() => RankSet::range(rank, rank),
            _ => self.stands_for.clone(),
        }
    }

    /// This finding as only `ranks` (some of those it concerns) made it: the lowest of them its
    /// `rank`, its message opening with that rank's `[Rank r]` and naming only their ranks in
    /// their process group where it names the group ranks of all it concerns, the others in
    /// `stands_for`.
    pub fn narrowed_to(&self, ranks: RankSet) -> Finding {
        let (Some(rank), Some(lowest)) = (self.rank, ranks.first()) else {
            return self.clone();
        };
        let concerned = self.ranks();
        let group_ranks = group_ranks_named(&self.message, &concerned).map(|(span, named)| {
            let kept = concerned
                .iter()
                .zip(named)
                .filter(|&(concerned, _)| ranks.contains(concerned))
                .map(|(_, group_rank)| group_rank);
            (span, RankSet::from_ranks(kept).to_string())
        });
        Finding {
            rank: Some(lowest),
            message: with_ranks(&self.message, rank, lowest, group_ranks),
            stands_for: if ranks.count() > 1 {
                ranks
            } else {
                RankSet::default()
            },
            ..self.clone()
        }
    }
}

impl Timeline {
    /// An empty Timeline for `scenario`, with the op table filled in; `kernel_name` names the
    /// kernel an op launches, as a profiler would show it (the simulator passes
    /// `crate::nccl::kernel_name`, which knows the NCCL algorithm it picked).
    pub fn for_scenario(
        scenario: &Scenario,
        source: Source,
        kernel_name: impl Fn(&OpKind) -> Option<String>,
    ) -> Timeline {
        let ops = scenario
            .ops
            .iter()
            .map(|op| OpInfo {
                index: op.index as u32,
                name: op.display_name(),
                key: op.kind.key().to_string(),
                line: op.line,
                kernel_name: kernel_name(&op.kind),
                host_name: host_name(&op.kind).to_string(),
                dtype: match op.kind {
                    OpKind::Collective { tensor, .. } => {
                        Some(scenario.tensors[tensor].dtype.as_str().to_string())
                    }
                    _ => None,
                },
                transfers: match &op.kind {
                    OpKind::BatchP2p { transfers, .. } => (transfers.iter())
                        .map(|t| TransferInfo {
                            send: t.send,
                            shift: t.shift,
                            bytes: scenario.tensor_bytes(t.tensor),
                            dtype: scenario.tensors[t.tensor].dtype.as_str().to_string(),
                        })
                        .collect(),
                    _ => Vec::new(),
                },
                coalesced: op.kind.is_coalescing_block(),
            })
            .collect();
        let mark_name = |id: usize| scenario.marks[id].clone();
        let measure_name = |id: usize| scenario.measures[id].name.clone();
        Timeline {
            format: TIMELINE_FORMAT.to_string(),
            source,
            scenario: ScenarioInfo {
                name: scenario.name.clone(),
                path: scenario.path.clone(),
                source_hash: scenario.source_hash.clone(),
                seed: scenario.seed,
                torch: scenario.torch.as_str().to_string(),
                repeat: scenario.repeat,
                warmup: scenario.warmup,
                ranks: scenario.cluster.ranks,
                measures: scenario
                    .measures
                    .iter()
                    .map(|m| MeasureInfo {
                        name: m.name.clone(),
                        from: mark_name(m.from),
                        to: mark_name(m.to),
                        clock: match m.clock {
                            crate::scenario::Clock::Gpu => "gpu".into(),
                            crate::scenario::Clock::Host => "host".into(),
                        },
                    })
                    .collect(),
                overlaps: scenario
                    .overlaps
                    .iter()
                    .map(|o| {
                        [
                            o.name.clone(),
                            measure_name(o.compute),
                            measure_name(o.comm),
                            measure_name(o.both),
                        ]
                    })
                    .collect(),
                marks: scenario.marks.clone(),
                groups: scenario.groups.iter().map(|g| g.name.clone()).collect(),
            },
            machine: BTreeMap::new(),
            ops,
            ranks: Vec::new(),
            findings: Vec::new(),
            watchdog: Vec::new(),
            flight_recorder: Vec::new(),
            summary: None,
        }
    }
}

impl RankTimeline {
    /// Whether the rank kept any host call or kernel: none where its process ended before its
    /// first op, or where a summarised run left its records out.
    pub fn has_records(&self) -> bool {
        !self.host.is_empty() || !self.kernels.is_empty()
    }

    /// How many ranks these records stand for.
    pub fn weight(&self) -> u64 {
        if self.stands_for.is_empty() {
            1
        } else {
            self.stands_for.count()
        }
    }

    /// Moves the kernels that never ended, the collectives that never completed (a hang, or a
    /// kernel an abort ended before data moved, R27) and the stream waits never released out
    /// of the records into the unfinished ones, their times that never came ([`NEVER_NS`]) as
    /// `None`: their host side happened. A collective that completed keeps its record though
    /// its wait's stream release never came (the process ended first): only that wait did
    /// not happen.
    pub fn set_apart_unfinished(&mut self) {
        let known = |ns: u64| (ns != NEVER_NS).then_some(ns);
        self.unfinished_stream_waits = (self.stream_waits)
            .extract_if(.., |w| w.released_ns == NEVER_NS || w.source_ns == NEVER_NS)
            .map(|w| UnfinishedStreamWait {
                iteration: w.iteration,
                op: w.op,
                source_stream: w.source_stream,
                source_ns: known(w.source_ns),
                waiting_stream: w.waiting_stream,
            })
            .collect();
        self.unfinished_kernels = (self.kernels)
            .extract_if(.., |k| k.start_ns == NEVER_NS || k.end_ns == NEVER_NS)
            .map(|k| UnfinishedKernel {
                iteration: k.iteration,
                op: k.op,
                stream: k.stream,
                class: k.class,
                enqueue_ns: k.enqueue_ns,
                start_ns: known(k.start_ns),
            })
            .collect();
        self.unfinished_collectives = (self.collectives)
            .extract_if(.., |c| {
                [
                    c.input_ready_ns,
                    c.kernel_start_ns,
                    c.data_start_ns,
                    c.end_ns,
                ]
                .contains(&NEVER_NS)
            })
            .map(|c| UnfinishedCollective {
                iteration: c.iteration,
                op: c.op,
                group: c.group,
                seq: c.seq,
                work_seq_num: c.work_seq_num,
                bytes: c.bytes,
                async_op: c.async_op,
                call_stream: c.call_stream,
                run_stream: c.run_stream,
                host_start_ns: c.host_start_ns,
                host_end_ns: c.host_end_ns,
                input_ready_ns: known(c.input_ready_ns),
                kernel_start_ns: known(c.kernel_start_ns),
                // An abort ends a spinning kernel; one that never started never ended.
                kernel_end_ns: known(c.kernel_start_ns).and(known(c.end_ns)),
                wait: c.wait.map(|w| UnfinishedWait {
                    op: w.op,
                    host_start_ns: w.host_start_ns,
                    host_end_ns: Some(w.host_end_ns),
                    stream: w.stream,
                }),
            })
            .collect();
        for collective in &mut self.collectives {
            if collective.wait.is_some_and(|w| w.released_ns == NEVER_NS) {
                collective.wait = None;
            }
        }
    }
}

impl Timeline {
    /// Whether some [`RankTimeline`] stands for several ranks (a folded run, docs/scale.md).
    pub fn is_folded(&self) -> bool {
        self.ranks.iter().any(|rank| !rank.stands_for.is_empty())
    }

    /// The Timeline of the same run simulated rank by rank: each class's records copied to
    /// every rank it stands for, with the rank substituted (its `rank`, the `[Rank r]` that
    /// opens its exceptions' messages, its Flight Recorder dump). Findings and watchdog
    /// records are made once per class in both and stay as they are. A Timeline that is not
    /// folded comes back unchanged.
    /// A summarised Timeline's dumps that stand for several ranks are copied to each of them
    /// too (`FlightRecorderDump::stands_for`).
    pub fn expand(&self) -> Timeline {
        if !self.is_folded() {
            if !self.has_dumps_for_several_ranks() {
                return self.clone();
            }
            return Timeline {
                ranks: self.ranks.clone(),
                flight_recorder: self.rank_dumps(),
                ..self.clone_without_ranks()
            };
        }
        let mut ranks = Vec::with_capacity(self.scenario.ranks as usize);
        for class in &self.ranks {
            if class.stands_for.is_empty() {
                ranks.push(class.clone());
                continue;
            }
            let group_ranks: Vec<_> = class
                .exceptions
                .iter()
                .map(|exception| group_ranks_named(&exception.message, &class.stands_for))
                .collect();
            for (index, member) in class.stands_for.iter().enumerate() {
                let mut copy = class.clone();
                copy.rank = member;
                copy.stands_for = RankSet::default();
                for (exception, named) in copy.exceptions.iter_mut().zip(&group_ranks) {
                    let own = named
                        .as_ref()
                        .map(|(span, named)| (span.clone(), named[index].to_string()));
                    exception.message = with_ranks(&exception.message, class.rank, member, own);
                }
                ranks.push(copy);
            }
        }
        ranks.sort_by_key(|rank| rank.rank);
        Timeline {
            ranks,
            flight_recorder: self.rank_dumps(),
            ..self.clone_without_ranks()
        }
    }

    /// About how large [`Timeline::expand`] would make this Timeline as the commands that
    /// expand one to compare it hold it, found without expanding it, in bytes of JSON: each
    /// class's records and each dump once per rank it stands for (the substituted ranks' digits
    /// aside), the rest once, and each dump's lists of its groups' ranks once: the expanded
    /// dumps share them (`DumpGroup::ranks`, an `Arc`) and those commands never write them
    /// (counted per rank, the square of the ranks, 65,536 ranks of a hang came to 23 GiB). A
    /// folded Timeline of 65,536 ranks x 10^6 iterations is 135 MB and expands to terabytes;
    /// callers hold this to `--max-timeline` before they expand (docs/reliability.md).
    /// Saturates.
    pub fn expanded_bytes(&self) -> u64 {
        let copies = |stands_for: &RankSet| stands_for.count().max(1);
        let classes: BTreeMap<u32, &RankSet> = (self.ranks.iter())
            .filter(|class| !class.stands_for.is_empty())
            .map(|class| (class.rank, &class.stands_for))
            .collect();
        let ranks = (self.ranks.iter()).fold(0u64, |sum, class| {
            sum.saturating_add(json_bytes(class).saturating_mul(copies(&class.stands_for)))
        });
        let dumps = (self.flight_recorder.iter()).fold(0u64, |sum, dump| {
            let stands_for = classes.get(&dump.rank).copied().unwrap_or(&dump.stands_for);
            let lists = (dump.groups.iter()).fold(0u64, |sum, group| {
                sum.saturating_add(json_bytes(&group.ranks))
            });
            let copied = json_bytes(dump).saturating_sub(lists);
            sum.saturating_add(copied.saturating_mul(copies(stands_for)))
                .saturating_add(lists)
        });
        json_bytes(&self.clone_without_ranks())
            .saturating_add(ranks)
            .saturating_add(dumps)
    }

    /// Whether some dump stands for several ranks (a summarised Timeline's).
    pub fn has_dumps_for_several_ranks(&self) -> bool {
        (self.flight_recorder.iter()).any(|dump| !dump.stands_for.is_empty())
    }

    /// Each Flight Recorder dump the Timeline holds, with the ranks it stands for where it
    /// stands for several: its class's in a folded Timeline, its own `stands_for` in a
    /// summarised one.
    pub fn dumps_standing_for(
        &self,
    ) -> Vec<(
        &crate::flight_recorder::FlightRecorderDump,
        Option<&RankSet>,
    )> {
        let classes: BTreeMap<u32, &RankSet> = (self.ranks.iter())
            .filter(|class| !class.stands_for.is_empty())
            .map(|class| (class.rank, &class.stands_for))
            .collect();
        (self.flight_recorder.iter())
            .map(|dump| {
                let stands_for = classes.get(&dump.rank).copied().unwrap_or(&dump.stands_for);
                (dump, Some(stands_for).filter(|ranks| !ranks.is_empty()))
            })
            .collect()
    }

    /// One Flight Recorder dump per rank that dumped, in rank order, as PyTorch writes them (a
    /// file each): a dump that stands for several ranks ([`Self::dumps_standing_for`]) copied
    /// to each of them with its rank.
    pub fn rank_dumps(&self) -> Vec<crate::flight_recorder::FlightRecorderDump> {
        let mut dumps = Vec::new();
        for (dump, stands_for) in self.dumps_standing_for() {
            let Some(stands_for) = stands_for else {
                dumps.push(dump.clone());
                continue;
            };
            for member in stands_for.iter() {
                dumps.push(crate::flight_recorder::FlightRecorderDump {
                    rank: member,
                    stands_for: RankSet::default(),
                    ..dump.clone()
                });
            }
        }
        dumps.sort_by_key(|dump| dump.rank);
        dumps
    }

    /// A copy with no rank records and no dumps (cheap to make for a large folded Timeline).
    fn clone_without_ranks(&self) -> Timeline {
        Timeline {
            format: self.format.clone(),
            source: self.source,
            scenario: self.scenario.clone(),
            machine: self.machine.clone(),
            ops: self.ops.clone(),
            ranks: Vec::new(),
            findings: self.findings.clone(),
            watchdog: self.watchdog.clone(),
            flight_recorder: Vec::new(),
            summary: self.summary.clone(),
        }
    }
}

/// The length of `value`'s JSON, counted as it is written, not kept.
fn json_bytes(value: &impl Serialize) -> u64 {
    struct Counter(u64);
    impl std::io::Write for Counter {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 = self.0.saturating_add(bytes.len() as u64);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut counter = Counter(0);
    serde_json::to_writer(&mut counter, value).expect("Timeline records serialise");
    counter.0
}

/// What follows PyTorch's `[r]`, the rank in the process group, in the words of a store
/// timeout (`broadcastUniqueNCCLID`, R29; `sim/src/engine/failure/store.rs` writes them): a
/// record made for several ranks names all of theirs there (`[1-3]`).
pub(crate) const GROUP_RANKS_END: &str = "] is setting up NCCL communicator";

/// Where `message` names ranks in their process group (PyTorch's `[r]` of a store timeout,
/// R29: `[1-3]` in a record made for several ranks), and which; `None` where it names none.
pub fn group_ranks_in(message: &str) -> Option<(Range<usize>, RankSet)> {
    let end = message.find(GROUP_RANKS_END)?;
    let start = message[..end].rfind('[')? + 1;
    Some((start..end, RankSet::parse(&message[start..end])?))
}

/// Where `message`, written for `ranks`, names their ranks in their process group (one per
/// rank, in the same order), and those group ranks; `None` where it names none, or not one
/// per rank.
fn group_ranks_named(message: &str, ranks: &RankSet) -> Option<(Range<usize>, Vec<u32>)> {
    let (span, named) = group_ranks_in(message)?;
    (named.count() == ranks.count()).then(|| (span, named.iter().collect()))
}

/// `message` as `member` writes it, where `rank` wrote it: the `[Rank r]` it opens with, and
/// the group ranks it names at `group_ranks`' span, where it names some, replaced by theirs.
fn with_ranks(
    message: &str,
    rank: u32,
    member: u32,
    group_ranks: Option<(Range<usize>, String)>,
) -> String {
    let mut message = message.to_string();
    if let Some((span, group_ranks)) = group_ranks {
        message.replace_range(span, &group_ranks);
    }
    match message.strip_prefix(&format!("[Rank {rank}]")) {
        Some(rest) => format!("[Rank {member}]{rest}"),
        None => message,
    }
}

/// Why [`Timeline::from_json`] refused a text: where the JSON itself is at fault, its line and
/// column (1-based); a failed reference check names the record in its message instead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimelineError {
    pub position: Option<(usize, usize)>,
    pub message: String,
}

impl TimelineError {
    /// The error as a reader of the file `path` reports it: `path:line:column: error: not a
    /// Timeline: …` (as scenario and trace errors read) where the JSON is at fault, else
    /// `path is not a Timeline: …`.
    pub fn in_file(&self, path: &str) -> String {
        match self.position {
            Some((line, column)) => {
                format!(
                    "{path}:{line}:{column}: error: not a Timeline: {}",
                    self.message
                )
            }
            None => format!("{path} is not a Timeline: {}", self.message),
        }
    }
}

impl std::fmt::Display for TimelineError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.position {
            Some((line, column)) => write!(f, "{} at line {line} column {column}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

/// A JSON reader's error as a file's error is written, `file:line:column: message`: where
/// serde_json places it, 1-based (its column 0, the end of an empty text or of one cut after a
/// newline, is 1; `None` where it names no line), and its message without the " at line L
/// column C" it ends with, so that the place is said once.
pub fn json_error_place(error: &serde_json::Error) -> (Option<(usize, usize)>, String) {
    let (line, column) = (error.line(), error.column());
    let message = error.to_string();
    let message = (message.strip_suffix(&format!(" at line {line} column {column}")))
        .map_or(message.clone(), str::to_string);
    ((line > 0).then_some((line, column.max(1))), message)
}

/// The host-side API a profiler's CPU row shows for an op.
impl Timeline {
    /// Reads a Timeline's JSON and checks that every index in it points at something
    /// ([`Timeline::check_references`]): a file cut or edited by hand is refused with a
    /// message, never read into a panic later.
    pub fn from_json(text: &str) -> Result<Timeline, TimelineError> {
        let timeline: Timeline = serde_json::from_str(text).map_err(|error| {
            let (position, message) = json_error_place(&error);
            TimelineError { position, message }
        })?;
        timeline
            .check_references()
            .map_err(|message| TimelineError {
                position: None,
                message,
            })?;
        Ok(timeline)
    }

    /// Every op, mark, group and stream index of the records is in range, and every interval
    /// ends no earlier than it starts. The message names the rank and the record.
    pub fn check_references(&self) -> Result<(), String> {
        let ops = self.ops.len();
        let marks = self.scenario.marks.len();
        let groups = self.scenario.groups.len();
        let check = |what: &str, index: u64, count: usize| {
            if index < count as u64 {
                Ok(())
            } else {
                Err(format!(
                    "{what} {index} is out of range (the Timeline has {count})"
                ))
            }
        };
        let ordered = |what: &str, start_ns: u64, end_ns: u64| {
            if start_ns <= end_ns {
                Ok(())
            } else {
                Err(format!(
                    "{what} ends at {end_ns} ns, before it starts at {start_ns} ns"
                ))
            }
        };
        // The sizes a scenario may have (the parser's limits), so that expanding the ranks or
        // walking the iterations of a damaged file cannot ask for terabytes.
        let scenario_ranks = self.scenario.ranks;
        if !(1..=crate::scenario::MAX_RANKS).contains(&scenario_ranks) {
            return Err(format!(
                "scenario.ranks is {scenario_ranks}; a Timeline has 1 to {}",
                crate::scenario::MAX_RANKS
            ));
        }
        if self.format != TIMELINE_FORMAT {
            return Err(format!(
                "format is {:?}; this c10dsim reads {TIMELINE_FORMAT:?}",
                self.format
            ));
        }
        for (what, count) in [
            ("scenario.repeat", self.scenario.repeat),
            ("scenario.warmup", self.scenario.warmup),
        ] {
            if count > crate::scenario::MAX_REPEAT {
                return Err(format!(
                    "{what} is {count}; a Timeline has at most {}",
                    crate::scenario::MAX_REPEAT
                ));
            }
        }
        if self.scenario.repeat == 0 || self.scenario.warmup >= self.scenario.repeat {
            return Err(format!(
                "scenario.repeat is {} and scenario.warmup {}: a run has at least one \
                 iteration and one measured after the warmup",
                self.scenario.repeat, self.scenario.warmup
            ));
        }
        let mut represented = 0u64;
        for rank in &self.ranks {
            if !rank.stands_for.is_well_formed() {
                return Err(format!(
                    "rank {}'s stands_for is not ascending, disjoint [first, last] ranges",
                    rank.rank
                ));
            }
            let last = rank.stands_for.last().unwrap_or(rank.rank).max(rank.rank);
            if last >= scenario_ranks {
                return Err(format!(
                    "rank {last} (of ranks[] or a stands_for) is not below scenario.ranks = {scenario_ranks}"
                ));
            }
            represented += rank.stands_for.count().max(1);
        }
        if represented > u64::from(scenario_ranks) {
            return Err(format!(
                "the ranks stand for {represented} ranks, more than scenario.ranks = {scenario_ranks}"
            ));
        }
        for measure in &self.scenario.measures {
            for mark in [&measure.from, &measure.to] {
                if !self.scenario.marks.contains(mark) {
                    return Err(format!(
                        "measure {:?} names mark {mark:?}, which scenario.marks does not list",
                        measure.name
                    ));
                }
            }
        }
        for overlap in &self.scenario.overlaps {
            for measure in &overlap[1..] {
                if !self.scenario.measures.iter().any(|m| &m.name == measure) {
                    return Err(format!(
                        "overlap {:?} names measure {measure:?}, which scenario.measures does not list",
                        overlap[0]
                    ));
                }
            }
        }
        for (position, rank) in self.ranks.iter().enumerate() {
            let in_rank =
                |error: String| format!("ranks[{position}] (rank {}): {error}", rank.rank);
            let streams = rank.streams.len();
            let op = |index: OpRef| check("op", u64::from(index), ops);
            let stream = |index: StreamRef| check("stream", u64::from(index), streams);
            (|| -> Result<(), String> {
                for call in &rank.host {
                    op(call.op)?;
                    ordered("a host call", call.start_ns, call.end_ns)?;
                }
                for kernel in &rank.kernels {
                    op(kernel.op)?;
                    stream(kernel.stream)?;
                    ordered("a kernel", kernel.start_ns, kernel.end_ns)?;
                }
                for collective in &rank.collectives {
                    op(collective.op)?;
                    check("group", u64::from(collective.group), groups)?;
                    stream(collective.call_stream)?;
                    stream(collective.run_stream)?;
                    ordered(
                        "a collective's host call",
                        collective.host_start_ns,
                        collective.host_end_ns,
                    )?;
                    ordered(
                        "a collective's kernel",
                        collective.kernel_start_ns,
                        collective.end_ns,
                    )?;
                    if let Some(wait) = &collective.wait {
                        op(wait.op)?;
                        stream(wait.stream)?;
                        ordered("a wait", wait.host_start_ns, wait.host_end_ns)?;
                    }
                }
                for collective in &rank.unfinished_collectives {
                    op(collective.op)?;
                    check("group", u64::from(collective.group), groups)?;
                    stream(collective.call_stream)?;
                    stream(collective.run_stream)?;
                    ordered(
                        "an unfinished collective's host call",
                        collective.host_start_ns,
                        collective.host_end_ns,
                    )?;
                    if let (Some(start_ns), Some(end_ns)) =
                        (collective.kernel_start_ns, collective.kernel_end_ns)
                    {
                        ordered("an unfinished collective's kernel", start_ns, end_ns)?;
                    }
                    if let Some(wait) = &collective.wait {
                        op(wait.op)?;
                        stream(wait.stream)?;
                        if let Some(end_ns) = wait.host_end_ns {
                            ordered("a wait", wait.host_start_ns, end_ns)?;
                        }
                    }
                }
                if let Some(call) = &rank.unfinished_host {
                    op(call.op)?;
                    match call.blocked_on {
                        Some(
                            HostBlock::Stream { stream: s } | HostBlock::LaunchQueue { stream: s },
                        ) => stream(s)?,
                        Some(HostBlock::Work { group, .. } | HostBlock::Communicator { group }) => {
                            check("group", u64::from(group), groups)?
                        }
                        Some(HostBlock::Device) | None => {}
                    }
                }
                for kernel in &rank.unfinished_kernels {
                    op(kernel.op)?;
                    stream(kernel.stream)?;
                }
                for mark in &rank.marks {
                    check("mark", u64::from(mark.mark), marks)?;
                }
                for wait in &rank.stream_waits {
                    op(wait.op)?;
                    stream(wait.source_stream)?;
                    stream(wait.waiting_stream)?;
                }
                for wait in &rank.unfinished_stream_waits {
                    op(wait.op)?;
                    stream(wait.source_stream)?;
                    stream(wait.waiting_stream)?;
                }
                for query in &rank.queries {
                    op(query.op)?;
                }
                for release in &rank.cache_releases {
                    op(release.op)?;
                    ordered(
                        "a cache release",
                        release.host_start_ns,
                        release.host_end_ns,
                    )?;
                }
                for race in &rank.races {
                    op(race.earlier_op)?;
                    op(race.later_op)?;
                }
                Ok(())
            })()
            .map_err(in_rank)?;
        }
        for finding in &self.findings {
            if let Some(index) = finding.op {
                check("a finding's op", u64::from(index), ops)?;
            }
        }
        for record in &self.watchdog {
            if let Some(group) = record.group {
                check("a watchdog record's group", u64::from(group), groups)?;
            }
        }
        if let Some(summary) = &self.summary {
            summary.check_references(ops, scenario_ranks)?;
            let names = summary.measures.iter().map(|m| &m.name);
            if !names.eq(self.scenario.measures.iter().map(|m| &m.name)) {
                return Err("summary.measures do not name scenario.measures, in order".to_string());
            }
        }
        Ok(())
    }
}

pub fn host_name(kind: &OpKind) -> &'static str {
    match kind {
        OpKind::Collective { collective, .. } => collective.descriptor().host_name,
        OpKind::BatchP2p { .. } => CollectiveKind::BatchP2p.descriptor().host_name,
        OpKind::Barrier { .. } => "c10d::barrier",
        OpKind::Wait { .. } => "Work.wait",
        OpKind::IsCompleted { .. } => "Work.is_completed",
        OpKind::GetFuture { callback: None, .. } => "Future.wait",
        OpKind::GetFuture { .. } => "Future.then",
        OpKind::SetStream { .. } => "torch.cuda.set_stream",
        OpKind::RecordEvent { .. } => "cudaEventRecord",
        OpKind::WaitEvent { .. } => "cudaStreamWaitEvent",
        OpKind::EventSync { .. } => "cudaEventSynchronize",
        OpKind::StreamSync { .. } => "cudaStreamSynchronize",
        OpKind::DeviceSync => "cudaDeviceSynchronize",
        OpKind::Item { .. } => "aten::item (cudaMemcpy DtoH)",
        OpKind::Gemm { .. } => "aten::mm",
        OpKind::Kernel { .. } | OpKind::GpuSleep { .. } => "cudaLaunchKernel",
        OpKind::HostSleep { .. } => "host work",
        OpKind::Mark { .. } => "mark",
        OpKind::Alloc { .. } => "aten::empty (CUDACachingAllocator::malloc)",
        OpKind::Free { .. } => "del (CUDACachingAllocator::free)",
        OpKind::InitProcessGroup { .. } => "c10d::init_process_group",
        OpKind::NewGroup { .. } => "c10d::new_group",
    }
}

#[cfg(test)]
mod tests;
