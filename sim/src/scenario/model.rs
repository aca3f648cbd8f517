//! The resolved scenario: every name replaced by an index, every time in integer nanoseconds,
//! every size in bytes. Both engines (the simulator and the hardware backend) read this type.
//!
//! Over 1,000 lines (about 1,250), kept whole: it is the one data model every engine, `analysis` and the
//! Python side read (`c10dsim resolve --json` serialises it), a flat set of plain structs of
//! which about a third is doc comments on their fields; split, the one definition of the
//! resolved scenario would be scattered.

pub use crate::collective::CollectiveKind;
pub use crate::random::Delay;
use serde::Serialize;
use std::collections::BTreeMap;

/// Index of a tensor in [`Scenario::tensors`].
pub type TensorId = usize;
/// Index of a stream in [`Scenario::streams`]; 0 is the default stream.
pub type StreamId = usize;
/// Index of a process group in [`Scenario::groups`]; 0 is the world group.
pub type GroupId = usize;
/// Index of a Work name in [`Scenario::works`].
pub type WorkId = usize;
/// Index of an event name in [`Scenario::events`].
pub type EventId = usize;
/// Index of a mark name in [`Scenario::marks`].
pub type MarkId = usize;

/// PyTorch behaviour profile (semantics.md "Defaults"): which version's ProcessGroupNCCL is
/// modelled where the two seed articles differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum TorchProfile {
    /// PyTorch 2.12: `async_op=False` runs on the current stream (R11), blocking-wait poll 1 ms
    /// (R15), stash lifetime.
    #[serde(rename = "2.12")]
    V2_12,
    /// PyTorch 2.5: `async_op=False` uses the internal stream and calls `wait()` (R11),
    /// blocking-wait poll 10 ms (R15).
    #[serde(rename = "2.5")]
    V2_5,
}

impl TorchProfile {
    /// The blocking-wait poll interval of R15.
    pub fn blocking_wait_poll_ns(self) -> u64 {
        match self {
            TorchProfile::V2_12 => 1_000_000,
            TorchProfile::V2_5 => 10_000_000,
        }
    }

    /// Whether `wait(timeout)` polls without `TORCH_NCCL_BLOCKING_WAIT` (R15): in 2.12 an
    /// explicit timeout makes `wait()` poll until it; 2.5 polls only under blocking wait and
    /// ignores the timeout otherwise (its `wait()` adds the stream dependency and returns).
    pub fn timed_wait_polls(self) -> bool {
        matches!(self, TorchProfile::V2_12)
    }

    /// Whether `async_op=False` enqueues on the current stream (R11, 2.12) rather than on the
    /// internal stream followed by `wait()` (2.5).
    pub fn sync_collective_on_current_stream(self) -> bool {
        matches!(self, TorchProfile::V2_12)
    }

    /// Whether a barrier Work's `wait()` synchronises the current stream only while the Work
    /// is not completed and no poll ran (R14, R15; 2.12: `isBarrierOp_ && !isCompleted()`)
    /// rather than always (2.5: `barrierTensor_.defined()`).
    pub fn barrier_wait_syncs_only_unfinished(self) -> bool {
        matches!(self, TorchProfile::V2_12)
    }

    /// The profile a PyTorch release behaves as (a version such as `2.11.0+cu130`): 2.8 and
    /// later launch a synchronous collective on the current stream (R11; pytorch/pytorch#150398,
    /// first released in 2.8), earlier ones on the internal stream with a `wait()`. `None`
    /// where the version has no major.minor.
    pub fn of_release(version: &str) -> Option<TorchProfile> {
        let mut parts = version.split(['.', '+']);
        let major: u32 = parts.next()?.parse().ok()?;
        let minor: u32 = parts.next()?.parse().ok()?;
        Some(if (major, minor) >= (2, 8) {
            TorchProfile::V2_12
        } else {
            TorchProfile::V2_5
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            TorchProfile::V2_12 => "2.12",
            TorchProfile::V2_5 => "2.5",
        }
    }
}

/// A GPU model: SM count and compute rates.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GpuSpec {
    pub preset: String,
    pub sms: u32,
    pub bf16_tflops: f64,
    pub fp32_tflops: f64,
    /// Fraction of the nominal rate a large GEMM reaches.
    pub gemm_efficiency: f64,
    /// Compute-kernel time a rank's GPU runs at its boost clock; after it the GPU holds its
    /// sustained clock under the power limit (`sustained_clock`). `None`: it never settles.
    pub boost_ns: Option<u64>,
    /// The compute rate after `boost_ns` of compute, relative to the boost rate (1: none).
    pub sustained_clock: f64,
}

impl GpuSpec {
    /// The presets a scenario can name in `cluster.gpu`.
    pub const PRESETS: [&'static str; 3] = ["h100-sxm", "h200", "a100"];

    pub fn preset(name: &str) -> Option<GpuSpec> {
        let (sms, bf16_tflops, fp32_tflops) = match name {
            // Dense BF16 tensor-core and plain FP32 nominal rates from NVIDIA's H100/H200 and
            // A100 datasheets. FP32 matmuls do not use TF32 unless asked
            // (`torch.backends.cuda.matmul.allow_tf32` defaults to False).
            "h100-sxm" | "h200" => (132, 989.0, 67.0),
            "a100" => (108, 312.0, 19.5),
            _ => return None,
        };
        Some(GpuSpec {
            preset: name.to_string(),
            sms,
            bf16_tflops,
            fp32_tflops,
            gemm_efficiency: 0.7,
            boost_ns: None,
            sustained_clock: 1.0,
        })
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Cluster {
    pub ranks: u32,
    pub ranks_per_node: u32,
    pub gpu: GpuSpec,
    /// Standard deviation of per-kernel jitter, as a fraction of the kernel's duration.
    pub kernel_jitter: f64,
    /// Standard deviation of each rank's compute speed (drawn once per rank from the seed), as
    /// a fraction: GPUs of one model differ by a few percent.
    pub rank_speed_spread: f64,
    /// Output rows and columns of one GEMM thread block (the SM model's unit of work, R22).
    pub gemm_tile: [u64; 2],
    /// Simulate ranks that behave alike once (`cluster.fold`, default true; docs/scale.md).
    pub fold: bool,
}

/// How collectives are costed (`network.algorithm`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum NetworkAlgorithm {
    /// `"ring"`: the plain α-β ring of R24.
    Ring,
    /// `"auto"`: the NCCL model picks algorithm and protocol per collective (`crate::nccl`).
    Auto,
}

/// `network.alpha_us`'s default, the per-step latency inside a node.
pub const DEFAULT_ALPHA_NS: u64 = 5_000;

/// The most a link's bandwidth (`network.nvlink_gbps`, `nic_gbps`, `self_copy_gbps`) may be,
/// GB/s.
pub const MAX_LINK_GBPS: f64 = 1e5;

/// `cluster.ranks_per_node`'s default (fewer where the job has fewer ranks).
pub const DEFAULT_RANKS_PER_NODE: u32 = 8;

/// Link parameters: the α-β ring of R24, and the line rates the NCCL model starts from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Network {
    /// Per-GPU unidirectional NVLink bandwidth, bytes per second.
    pub nvlink_bytes_per_s: f64,
    /// Per-GPU unidirectional NIC bandwidth, bytes per second.
    pub nic_bytes_per_s: f64,
    /// Per-step latency inside a node.
    pub alpha_ns: u64,
    /// Per-step latency across nodes.
    pub nic_alpha_ns: u64,
    /// Shortest NCCL kernel (a 1-rank collective still launches and finishes a kernel).
    pub kernel_floor_ns: u64,
    /// NCCL's copy of a rank's own chunk (a send and receive to itself), bytes per second: a
    /// one-rank all_to_all copies its whole buffer so. `None`: it costs the floor.
    pub self_copy_bytes_per_s: Option<f64>,
    /// The cost model of collectives.
    pub algorithm: NetworkAlgorithm,
    /// NCCL model: fixed cost of a kernel per protocol (LL, LL128, Simple) in place of the GPU
    /// preset's (`crate::nccl::FabricTuning`).
    pub nccl_launch_ns: [Option<u64>; 3],
    /// NCCL model: fraction of the line rate a ring reaches per protocol (LL, LL128, Simple) in
    /// place of the GPU preset's.
    pub nccl_wire_efficiency: [Option<f64>; 3],
}

/// Host-side costs of the Python + c10d path (R1), in nanoseconds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HostCosts {
    /// Launching a compute kernel (`gemm`, `kernel`, `gpu_sleep_us`).
    pub launch_ns: u64,
    /// More for the process's first GEMM of each dtype: cuBLAS's first matmul of a dtype loads
    /// its kernels (R1); 0 unless a machine profile measured it (PyTorch 2.11 on an H200: 67–107
    /// ms over 24 runs, 79–130 ms in a probe, docs/torch.md).
    pub first_gemm_ns: u64,
    /// From a host launch until the GPU can start the work at the earliest.
    pub launch_latency_ns: u64,
    /// The same for an NCCL kernel (its launch goes through NCCL's enqueue); defaults to
    /// `launch_latency_ns`.
    pub nccl_launch_latency_ns: u64,
    /// From the event a stream waits on firing until the waiting stream can start its next
    /// item (cross-stream synchronisation on the GPU; a kernel queued behind another on the
    /// same stream starts at once).
    pub stream_wait_latency_ns: u64,
    /// A collective call through c10d and NCCL's enqueue (R10 a–f).
    pub collective_ns: u64,
    /// The part of `collective_ns` after the kernel launch (end-event record, watchdog
    /// enqueue, return to Python): the GPU may start the kernel this long before the call
    /// returns.
    pub collective_tail_ns: u64,
    /// The part of `collective_ns` from the Work's creation, where ProcessGroupNCCL records
    /// the input-ready event on the current stream (R10a), to the kernel launch: the Work's
    /// start event, `pre` hooks and NCCL's enqueue. Everything before it (the dispatch, the
    /// communicator look-up, a cold call's extra cost) comes before the input-ready event.
    /// 0 unless a profile says otherwise: the event is then recorded at the launch.
    pub collective_enqueue_ns: u64,
    /// The program's own host time before each op: the Python between one call's return and
    /// the next call. 0 unless a profile says otherwise (`profiles/h200-torch.toml` fits the
    /// gaps `c10dsim torch`'s interpreter leaves between calls).
    pub op_gap_ns: u64,
    /// `collective_ns` of a cold call: the first collective call of a rank, or one issued
    /// `collective_cold_after_ns` or more after the rank's previous collective call returned
    /// (PyTorch's call path costs several times more after the host did other things or
    /// waited on the GPU than in a tight loop; docs/torch.md#host-warmth). Between
    /// `collective_warm_within_ns` and `collective_cold_after_ns` the cost is interpolated on a
    /// log scale of that gap; equal to `collective_ns` unless a profile says otherwise.
    pub collective_cold_ns: u64,
    /// `collective_ns` of a synchronous collective launched on the current stream (R11, the
    /// 2.12 profile), which records no input-ready event, makes no stream wait, stashes nothing
    /// and returns no Work to Python; a cold one costs `collective_cold_ns` less the same
    /// difference. Equal to `collective_ns` unless a profile says otherwise.
    pub sync_collective_ns: u64,
    /// Gap after the previous collective call up to which a call costs `collective_ns`.
    pub collective_warm_within_ns: u64,
    /// Gap from which a call costs `collective_cold_ns`.
    pub collective_cold_after_ns: u64,
    /// `work.wait()` without blocking wait (R12).
    pub wait_ns: u64,
    /// `event.record`, `stream.wait_event`, `set_stream`.
    pub event_ns: u64,
    /// Each collective call inside a `_coalescing_manager` block (or each `P2POp` of a
    /// `batch_isend_irecv`) but the last, which only records the call (R25); `event_ns`
    /// unless set.
    pub coalesced_call_ns: u64,
    /// Returning from a synchronisation once the GPU reached the point.
    pub sync_ns: u64,
    /// `.item()`: the device-to-host copy and the return, after the stream drained.
    pub item_ns: u64,
    /// A `mark` (host timestamp plus an event record).
    pub mark_ns: u64,
    /// `work.is_completed()` (an event query, R13).
    pub query_ns: u64,
    /// The process's first communicator (R8): NCCL's bootstrap and the load of its device
    /// code, paid inside the group's first collective (lazy) or in `init_process_group`
    /// (eager), after the device drained.
    pub comm_init_ns: u64,
    /// Every later communicator of the process (another group's, split from or made beside
    /// the first): no device drain, much cheaper (R8).
    pub comm_init_next_ns: u64,
    /// `init_process_group` without the communicator: the store, the ProcessGroupNCCL object.
    pub init_process_group_ns: u64,
    /// `new_group` without the communicator.
    pub new_group_ns: u64,
    /// Blocking-wait poll interval (R15); the profile's unless the scenario overrides it.
    pub blocking_wait_poll_ns: u64,
    /// After the watchdog found a timed-out Work it logs the Work's stack trace (C++ and
    /// Python frames, symbolised) before it signals the dump (R27); 0 unless a machine profile
    /// measured it (PyTorch 2.11 on an H200: 3.6–4.0 s, docs/watchdog.md).
    pub watchdog_stack_trace_ns: u64,
    /// How long aborting a communicator (`ncclCommAbort`) takes. After a wait's own timeout
    /// (blocking wait, `wait(timeout)`) the main thread aborts the communicator before it
    /// raises (R15): at least this long, and until the device (every stream of the rank)
    /// drained. The watchdog's abort in error-handling modes 1 and 2 lasts as long, and until
    /// the device drained, before the take-down or the next poll (R27). 0 unless a machine profile measured it (PyTorch 2.11
    /// on an H200: 0.90–0.99 s after a wait's timeout; on an H100, mode 1's take-down came
    /// 0.54–0.78 s after mode 3's; docs/watchdog.md).
    pub comm_abort_ns: u64,
    /// From the dump signal to the end of the rank's Flight Recorder dump (the heartbeat
    /// monitor's pickup and the dump itself): the watchdog takes the process down no earlier,
    /// even when its sleep for the dumps (4 × `TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC`) is shorter
    /// (R27); 0 unless a machine profile measured it (PyTorch 2.11 on an H200: 1.1–2.0 s,
    /// docs/watchdog.md).
    pub flight_recorder_dump_ns: u64,
    /// Kernels a stream holds (queued or running) before the next launch onto it blocks the
    /// launching host thread until one ends: CUDA's launch queue.
    pub launch_queue_depth: u32,
}

/// `host.launch_queue_depth` unless a scenario sets it: on an H200 (driver 580, CUDA 13.0,
/// PyTorch 2.11) the 1,022nd kernel launched behind a running 2 s sleep blocked the host until
/// the sleep ended, in 3 of 3 runs (`tests/data/torch/recorded/launch_queue.json`).
pub const DEFAULT_LAUNCH_QUEUE_DEPTH: u32 = 1022;

/// `host.comm_init_next_us` unless a scenario sets it: on an H200 (PyTorch 2.11, NCCL 2.28.9,
/// one rank) a new group's communicator took 23–31 ms inside its first collective, and the
/// eager `new_group` 17–27 ms, against 300–390 ms for the process's first
/// (`tests/data/torch/probes/`, docs/torch.md#process-group-setup).
pub const DEFAULT_COMM_INIT_NEXT_NS: u64 = 25_000_000;

/// `host.init_process_group_us` unless set: 1.6 ms on the H200 without `device_id`.
pub const DEFAULT_INIT_PROCESS_GROUP_NS: u64 = 1_600_000;

/// `host.new_group_us` unless set: 0.39–0.56 ms on the H200 for a lazily created group.
pub const DEFAULT_NEW_GROUP_NS: u64 = 450_000;

/// The environment variables of PyTorch and NCCL the model reads.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Env {
    /// `TORCH_NCCL_BLOCKING_WAIT` (R15).
    pub blocking_wait: bool,
    /// `TORCH_NCCL_HIGH_PRIORITY` (R9: the internal streams are high priority).
    pub high_priority: bool,
    /// `TORCH_NCCL_SHOW_EAGER_INIT_P2P_SERIALIZATION_WARNING` (default on): PyTorch warns at an
    /// unbatched send/recv on an eagerly initialised group (R11).
    pub show_eager_init_p2p_serialization_warning: bool,
    /// `TORCH_NCCL_ENABLE_TIMING` (R6: Works get start events).
    pub enable_timing: bool,
    /// `NCCL_ALGO`: the algorithms each collective may use (`crate::nccl`).
    pub nccl_algorithms: Option<crate::nccl_env::Selection<crate::nccl_env::Algorithm>>,
    /// `NCCL_PROTO`: the protocols each collective may use.
    pub nccl_protocols: Option<crate::nccl_env::Selection<crate::nccl_env::Protocol>>,
    /// `NCCL_NVLS_ENABLE`: NVLink SHARP may be chosen (1, NCCL's default); 0 leaves it out.
    pub nccl_nvls_enable: bool,
    /// `NCCL_MIN_CTAS`: fewest channels (thread blocks) of an NCCL kernel (R22).
    pub nccl_min_ctas: Option<u32>,
    /// `NCCL_MAX_CTAS`: most channels of an NCCL kernel (R22).
    pub nccl_max_ctas: Option<u32>,
    /// `TORCH_NCCL_ASYNC_ERROR_HANDLING` (R27): what the watchdog does after an error.
    pub async_error_handling: ErrorHandling,
    /// `TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC` (R27): the watchdog sleeps 4× this for the dumps.
    pub wait_timeout_dump_ns: u64,
    /// `TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC` (R28).
    pub heartbeat_timeout_ns: u64,
    /// `TORCH_NCCL_ENABLE_MONITORING` (R28): the heartbeat monitor may abort the process (at 0
    /// it still reads, dumps and sleeps, and only logs the abort it would have done).
    pub enable_monitoring: bool,
    /// `TORCH_NCCL_COORD_CHECK_MILSEC`: the monitor polls the store's dump signal this often.
    pub coord_check_ns: u64,
    /// `TORCH_NCCL_PROPAGATE_ERROR` (R27): an error is signalled to the group's other ranks.
    pub propagate_error: bool,
    /// `TORCH_NCCL_DESYNC_DEBUG`: a timeout reports where every rank stopped.
    pub desync_debug: bool,
    /// `TORCH_NCCL_USE_COMM_NONBLOCKING` (R8): `init_process_group(device_id=…)` returns
    /// without waiting for the communicator, which is finished at its first use.
    pub use_comm_nonblocking: bool,
    /// `TORCH_NCCL_NONBLOCKING_TIMEOUT` (seconds, default 1800): how long the first use of a
    /// non-blocking communicator waits for it before raising (R8); `None` (0 or less): for good.
    pub nonblocking_timeout_ns: Option<u64>,
    /// `TORCH_NCCL_DUMP_ON_TIMEOUT` (R27, default 1): after a timeout or error the watchdog
    /// broadcasts the dump signal and sleeps for the Flight Recorder dumps; 0: the same signal
    /// and sleep, but nothing is dumped and no heartbeat monitor reacts to the signal (as
    /// PyTorch 2.11 did, docs/watchdog.md).
    pub dump_on_timeout: bool,
    /// `TORCH_FR_BUFFER_SIZE` / `TORCH_NCCL_TRACE_BUFFER_SIZE` (default 2000): the entries a
    /// Flight Recorder dump holds at most (the last ones created); 0: the recorder is off, no
    /// stack trace to symbolise and empty dumps.
    pub trace_buffer_entries: u64,
    /// `TORCH_FR_DUMP_TEMP_FILE` / `TORCH_NCCL_DEBUG_INFO_TEMP_FILE`: the dump files' path
    /// before the rank; set, `c10dsim run` writes the dumps there (docs/flight-recorder.md).
    pub dump_file_prefix: Option<String>,
    /// `TORCH_NCCL_AVOID_RECORD_STREAMS` (R18, R19): stash (1) or recordStream (0); the
    /// profile decides when unset.
    pub avoid_record_streams: Option<bool>,
    /// `PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True` (R20).
    pub expandable_segments: bool,
    /// `CUDA_MODULE_LOADING` (`LAZY`, the default, or `EAGER`): under lazy loading a kernel's
    /// first launch in a process loads its code, which waits for the device to drain (R14).
    pub lazy_module_loading: bool,
    /// Every variable as written, for reports.
    pub raw: BTreeMap<String, String>,
}

impl Env {
    /// Whether every Work records a start event on its kernel's stream (R6):
    /// `TORCH_NCCL_ENABLE_TIMING`, or `TORCH_NCCL_DESYNC_DEBUG`, which needs the start events
    /// and turns timing on.
    pub fn times_works(&self) -> bool {
        self.enable_timing || self.desync_debug
    }

    /// The variables a scenario may set, with what they mean.
    pub const KNOWN: [(&'static str, &'static str); 28] = [
        (
            "TORCH_NCCL_USE_COMM_NONBLOCKING",
            "0 or 1: an eager communicator is finished at its first use, not in init_process_group (R8)",
        ),
        (
            "TORCH_NCCL_NONBLOCKING_TIMEOUT",
            "seconds, default 1800: the first use of a non-blocking communicator raises after this; 0 or less: it waits for good (R8)",
        ),
        (
            "TORCH_NCCL_AVOID_RECORD_STREAMS",
            "0 or 1: Works stash their tensors (1) or the allocator waits on recordStream events (0) (R18, R19)",
        ),
        (
            "PYTORCH_CUDA_ALLOC_CONF",
            "\"expandable_segments:True\" or \"expandable_segments:False\" (R20)",
        ),
        (
            "CUDA_MODULE_LOADING",
            "\"LAZY\" (default) or \"EAGER\": a kernel's first launch waits for the device to drain under LAZY (R14)",
        ),
        (
            "TORCH_NCCL_BLOCKING_WAIT",
            "0 or 1: wait() polls completion on the host (R15)",
        ),
        (
            "TORCH_NCCL_HIGH_PRIORITY",
            "0 or 1: internal NCCL streams are high priority (R9)",
        ),
        (
            "TORCH_NCCL_SHOW_EAGER_INIT_P2P_SERIALIZATION_WARNING",
            "0 or 1 (default 1): the warning at an unbatched send/recv on an eagerly initialised world (R11)",
        ),
        (
            "TORCH_NCCL_ENABLE_TIMING",
            "0 or 1: Works record start events (R6)",
        ),
        (
            "NCCL_ALGO",
            "Ring, Tree, NVLS (comma list, ^ excludes): all_reduce algorithms; turns on the NCCL model",
        ),
        (
            "NCCL_PROTO",
            "LL, LL128, Simple (comma list, ^ excludes): protocols; turns on the NCCL model",
        ),
        (
            "NCCL_NVLS_ENABLE",
            "0 or 1 (default 1): the NCCL model may choose NVLS (NVLink SHARP)",
        ),
        ("NCCL_MIN_CTAS", "1..64: fewest channels of an NCCL kernel (R22)"),
        ("NCCL_MAX_CTAS", "1..64: most channels of an NCCL kernel (R22)"),
        (
            "TORCH_NCCL_ASYNC_ERROR_HANDLING",
            "0 NoHandling, 1 TearDown, 2 CleanUpOnly, 3 SkipCleanUp (default): after a timeout or error (R27)",
        ),
        (
            "TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC",
            "ms, default 15000: the watchdog waits 4x this for dumps (R27)",
        ),
        (
            "TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC",
            "s, default 480: a stuck watchdog is killed after this (R28)",
        ),
        (
            "TORCH_NCCL_ENABLE_MONITORING",
            "0 or 1 (default 1): the heartbeat monitor runs (R28)",
        ),
        (
            "TORCH_NCCL_COORD_CHECK_MILSEC",
            "ms, default 1000: the monitor polls the store's dump signal (R27)",
        ),
        (
            "TORCH_NCCL_PROPAGATE_ERROR",
            "0 or 1: an error is signalled to the group's other ranks through the store (R27)",
        ),
        (
            "TORCH_NCCL_DESYNC_DEBUG",
            "0 or 1: a timeout reports every rank's last enqueued and completed SeqNum; turns timing on (R6)",
        ),
        (
            "TORCH_NCCL_DUMP_ON_TIMEOUT",
            "0 or 1 (default 1): after a timeout or error, the dump signal, the dumps and the dump wait (R27); 0 keeps the signal and the wait but dumps nothing",
        ),
        (
            "TORCH_FR_BUFFER_SIZE",
            "entries, default 2000: the Flight Recorder's buffer (PyTorch >= 2.11; 0 turns it off)",
        ),
        (
            "TORCH_NCCL_TRACE_BUFFER_SIZE",
            "entries, default 2000: the Flight Recorder's buffer, older name of TORCH_FR_BUFFER_SIZE",
        ),
        (
            "TORCH_FR_DUMP_TEMP_FILE",
            "a path prefix: `c10dsim run` writes each rank's Flight Recorder dump to it, the rank appended",
        ),
        (
            "TORCH_NCCL_DEBUG_INFO_TEMP_FILE",
            "a path prefix, older name of TORCH_FR_DUMP_TEMP_FILE",
        ),
        (
            "TORCH_NCCL_NAN_CHECK",
            "0 only: 1 (a NaN-check kernel before each collective) is refused, not modelled",
        ),
        (
            "TORCH_NCCL_CUDA_EVENT_CACHE",
            "1 only (the default): 0 (no event cache) is refused, not modelled",
        ),
    ];
}

/// `TORCH_NCCL_ASYNC_ERROR_HANDLING` (R27): two switches, clean up (abort the communicators)
/// and tear down (raise, so the process exits).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum ErrorHandling {
    /// 0: nothing; the watchdog only logs.
    NoHandling,
    /// 1: abort the communicators, then the process exits.
    TearDown,
    /// 2: abort the communicators; the process stays alive.
    CleanUpOnly,
    /// 3 (default): the process exits without aborting (an abort could hang too).
    SkipCleanUp,
}

impl ErrorHandling {
    pub fn from_number(number: i64) -> Option<ErrorHandling> {
        Some(match number {
            0 => ErrorHandling::NoHandling,
            1 => ErrorHandling::TearDown,
            2 => ErrorHandling::CleanUpOnly,
            3 => ErrorHandling::SkipCleanUp,
            _ => return None,
        })
    }

    /// PyTorch's `SHOULD_CLEAN_UP`: abort the communicators.
    pub fn cleans_up(self) -> bool {
        matches!(self, ErrorHandling::TearDown | ErrorHandling::CleanUpOnly)
    }

    /// PyTorch's `SHOULD_TEAR_DOWN`: rethrow, so the process exits.
    pub fn tears_down(self) -> bool {
        matches!(self, ErrorHandling::TearDown | ErrorHandling::SkipCleanUp)
    }

    pub fn number(self) -> u8 {
        match self {
            ErrorHandling::NoHandling => 0,
            ErrorHandling::TearDown => 1,
            ErrorHandling::CleanUpOnly => 2,
            ErrorHandling::SkipCleanUp => 3,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DType {
    F32,
    Bf16,
    F16,
}

impl DType {
    pub fn size_bytes(self) -> u64 {
        match self {
            DType::F32 => 4,
            DType::Bf16 | DType::F16 => 2,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::Bf16 => "bf16",
            DType::F16 => "f16",
        }
    }

    pub fn parse(text: &str) -> Option<DType> {
        match text {
            "f32" | "fp32" | "float32" => Some(DType::F32),
            "bf16" | "bfloat16" => Some(DType::Bf16),
            "f16" | "fp16" | "float16" => Some(DType::F16),
            _ => None,
        }
    }
}

/// How a collective on a tensor list (`count` > 1) is issued (R25).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "batch", rename_all = "snake_case")]
pub enum Batch {
    /// One call per tensor: `for t in tensors: dist.all_reduce(t)` — α paid each time.
    Each,
    /// `with dist._coalescing_manager(): …`: one NCCL group, one kernel launch, one Work, one
    /// end event — α paid once.
    Coalesced,
    /// DDP buckets: the tensors flattened into buffers of at most `cap_bytes`, one collective
    /// each.
    Bucketed { cap_bytes: u64 },
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Tensor {
    pub name: String,
    /// Bytes of one tensor (of each, when `count` > 1).
    pub size_bytes: u64,
    /// A list of `count` equal tensors (gradients, say) under one name.
    pub count: u32,
    pub dtype: DType,
    /// Allocated and freed by the program (`alloc`/`free`); otherwise it lives for the whole
    /// run, allocated before the program starts.
    pub dynamic: bool,
}

/// How the Work keeps a collective's tensors alive (semantics.md R18, R19).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Lifetime {
    /// 2.12 default: the Work holds its tensors until `wait()`, or until the next collective
    /// when never waited (R18).
    Stash,
    /// ≤ 2.5 default: a freed block returns to the pool once an event recorded on the NCCL
    /// stream has passed, checked at later allocations (R19).
    RecordStream,
    /// Neither: `del t` returns the block at once (what R21 warns against).
    None,
}

/// The CUDA caching allocator of each rank (R17, R20).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Memory {
    /// Bytes the allocator may reserve (device memory × `set_per_process_memory_fraction`).
    pub capacity_bytes: u64,
    pub lifetime: Lifetime,
    /// `PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`: cached memory is returned without a
    /// device-wide synchronisation (R20).
    pub expandable_segments: bool,
    /// Host time of an allocation served from the cache.
    pub alloc_ns: u64,
    /// Host time of a `cudaMalloc` for a new segment.
    pub malloc_ns: u64,
    /// Host time of each `cudaFree` when cached blocks are released (R20).
    pub free_ns: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Priority {
    Normal,
    High,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StreamDecl {
    pub name: String,
    pub priority: Priority,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Group {
    pub name: String,
    /// Global ranks in the group, ascending.
    pub ranks: Vec<u32>,
    /// Communicator created at `init_process_group(device_id=…)` instead of the first collective
    /// (R8).
    pub eager_init: bool,
    /// The group's internal stream is high priority (R9).
    pub high_priority: bool,
    /// `init_process_group(timeout=…)`: a Work's timeout from its enqueue (R26), and the store
    /// timeout of the communicator rendezvous (R29).
    pub timeout_ns: u64,
    /// The `SeqNum` of the group's first collective: 1, unless the group ran collectives
    /// before the program (a Flight Recorder's dumps whose ring buffer dropped the oldest),
    /// whose count its Works' `SeqNum`s, the dumps' counters and the desync report go on from.
    pub first_seq_num: u64,
    /// A two-rank communicator ProcessGroupNCCL creates by itself for `send`/`recv` between a
    /// pair of ranks (named `p2p:<low>:<high>`), not a group the program declared.
    pub point_to_point: bool,
    /// The op that creates the group during the program (`init_process_group` for the world,
    /// `new_group` for another); `None`: it exists before the program's first op.
    pub created_by: Option<usize>,
}

impl Group {
    /// The name of the group of a pair's point-to-point communicator, ranks `low` ≤ `high`.
    pub fn pair_name(low: u32, high: u32) -> String {
        format!("p2p:{low}:{high}")
    }

    /// The two ranks a [`Group::pair_name`] names, low first; `None` for any other name.
    pub fn pair_ranks(name: &str) -> Option<(u32, u32)> {
        let (low, high) = name.strip_prefix("p2p:")?.split_once(':')?;
        Some((low.parse().ok()?, high.parse().ok()?))
    }

    /// Whether `rank` is a member (`ranks` is ascending: a search, not a scan, so that laying
    /// out every rank's streams is not quadratic in the rank count).
    pub fn has_rank(&self, rank: u32) -> bool {
        self.ranks.binary_search(&rank).is_ok()
    }

    /// The collectives the group ran before the program (`first_seq_num` − 1), counted as
    /// enqueued and completed.
    pub fn collectives_before(&self) -> u64 {
        self.first_seq_num - 1
    }
}

/// The kernel a future's callback launches (`then`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Callback {
    pub duration_ns: u64,
    pub sms: u32,
    /// The stream the callback runs on (PyTorch's pool stream, declared by the scenario).
    pub stream: StreamId,
}

/// One send or receive of a `batch_isend_irecv`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct P2pTransfer {
    /// `dist.P2POp(dist.isend, …)`; else `dist.irecv`.
    pub send: bool,
    pub tensor: TensorId,
    /// The peer, as a distance along the group's ranks (+1: the next rank, −1: the previous).
    pub shift: i64,
}

/// What one host-side call of the program does.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum OpKind {
    /// `dist.<collective>(t, async_op=…, group=…)` (R10, R11); on a tensor of `count` > 1,
    /// one call per tensor, one coalesced call, or bucketed calls (R25).
    Collective {
        collective: CollectiveKind,
        tensor: TensorId,
        group: GroupId,
        async_op: bool,
        work: Option<WorkId>,
        batch: Batch,
        /// A functional collective's result (R30): `y = fcol.all_reduce(x)` clones `tensor`
        /// into this one on the current stream, then reduces the clone in place; `tensor` is
        /// only read, by the clone, before the call returns.
        #[serde(skip_serializing_if = "Option::is_none")]
        result: Option<TensorId>,
    },
    /// `dist.batch_isend_irecv([...])` on every rank of `group`: its sends and receives, each to
    /// or from the rank `shift` places along the group, in one NCCL group on the group's
    /// communicator and internal stream (R25's coalescing manager), one Work.
    BatchP2p {
        group: GroupId,
        transfers: Vec<P2pTransfer>,
        work: Option<WorkId>,
    },
    /// `dist.barrier()`: a synchronous 1-element all_reduce (R11), then the current stream is
    /// synchronised (R14). With `async_op`, `dist.barrier(async_op=True)`: the all_reduce on the
    /// internal stream and a Work, whose `wait()` synchronises the current stream only while
    /// the Work is not completed (R14).
    Barrier {
        group: GroupId,
        async_op: bool,
        work: Option<WorkId>,
    },
    /// `work.wait()` (R12), blocking when `TORCH_NCCL_BLOCKING_WAIT` (R15).
    Wait {
        work: WorkId,
        timeout_ns: Option<u64>,
        /// The `wait_tensor` of a functional result the previous iteration made and left
        /// unused, at its first use in this one (R30): where no such Work exists yet (the
        /// first iteration) there is nothing to wait on, and the op does nothing.
        previous_iteration: bool,
    },
    /// `work.is_completed()` (R13): recorded, never blocks.
    IsCompleted { work: WorkId },
    /// `work.get_future().wait()`: the current stream waits on the Work's end event (R12); or,
    /// with `callback`, `work.get_future().then(callback)`. NCCL's Work marks its CUDA-aware
    /// future complete when the collective is enqueued, so the callback runs at once on the
    /// calling thread, on a stream PyTorch takes from its pool, made to wait on the Work's end
    /// event; the current stream is not. `child` names the future `then` returns: a later
    /// `wait` on it orders the current stream after the callback's kernel.
    GetFuture {
        work: WorkId,
        callback: Option<Callback>,
        child: Option<WorkId>,
    },
    /// `with torch.cuda.stream(s):` for the following ops of this iteration.
    SetStream { stream: StreamId },
    /// `event.record()` on the op's stream (R5).
    RecordEvent { event: EventId },
    /// `stream.wait_event(event)` (R5).
    WaitEvent { event: EventId },
    /// `event.synchronize()`: the host blocks until the event's point executed (R14).
    EventSync { event: EventId },
    /// `stream.synchronize()` (R14).
    StreamSync { stream: StreamId },
    /// `torch.cuda.synchronize()`: every stream, the internal ones included (R14).
    DeviceSync,
    /// `t.item()`: a read of `t` and a synchronisation of the current stream (R14).
    Item { tensor: TensorId },
    /// A GEMM `m×n×k` costed by FLOPs at the GPU's rate.
    Gemm {
        m: u64,
        n: u64,
        k: u64,
        dtype: DType,
    },
    /// A generic kernel of a given duration and SM footprint.
    Kernel { duration_ns: u64, sms: u32 },
    /// `torch.cuda._sleep`: one block spinning for a duration.
    GpuSleep { duration_ns: u64 },
    /// Host work: data loading, checkpointing.
    HostSleep { duration_ns: u64 },
    /// A host timestamp plus a CUDA event on the op's stream.
    Mark { mark: MarkId },
    /// `t = torch.empty(...)` on the op's stream: a block from the caching allocator (R17).
    Alloc { tensor: TensorId },
    /// `del t`: the block goes back to the allocator, or waits for the Work's stash or a
    /// recordStream event first (R18, R19).
    Free { tensor: TensorId },
    /// `dist.init_process_group("nccl", device_id=…)`, once, in the first iteration: the
    /// world group exists from here; with `device_id` its communicator is created in the call
    /// (eager, R8), else at its first collective.
    InitProcessGroup { device_id: bool },
    /// `dist.new_group(ranks=…)`, once, in the first iteration, on every rank: the group exists
    /// from here; an `eager_init` group's communicator is created in the call, from the
    /// world's (R8).
    NewGroup { group: GroupId },
}

impl OpKind {
    /// Whether the op sets up the process group (`init_process_group`, `new_group`): it runs
    /// in the first iteration only.
    pub fn runs_once(&self) -> bool {
        matches!(
            self,
            OpKind::InitProcessGroup { .. } | OpKind::NewGroup { .. }
        )
    }

    /// The op is a send, a receive or a batch of them: PyTorch numbers its Work among the
    /// process group's point-to-point calls.
    pub fn is_point_to_point(&self) -> bool {
        self.collective()
            .is_some_and(|(kind, _)| kind.is_point_to_point())
    }

    /// The collective an op issues and its group: a barrier's is an all_reduce (R14), a
    /// `batch_isend_irecv`'s one coalesced send-receive.
    pub fn collective(&self) -> Option<(CollectiveKind, GroupId)> {
        match *self {
            OpKind::Collective {
                collective, group, ..
            } => Some((collective, group)),
            OpKind::Barrier { group, .. } => Some((CollectiveKind::AllReduce, group)),
            OpKind::BatchP2p { group, .. } => Some((CollectiveKind::BatchP2p, group)),
            _ => None,
        }
    }

    /// A `_coalescing_manager` block of collectives (`coalesce = true`, R25).
    pub fn is_coalescing_block(&self) -> bool {
        matches!(
            self,
            OpKind::Collective {
                batch: Batch::Coalesced,
                ..
            }
        )
    }

    /// The `OpType` PyTorch prints for the Work of a call of `kind` this op issued: a
    /// coalescing block's one Work is `COALESCED` whatever its calls (`collectiveCoalesced`
    /// or `endCoalescing`, R25); any other Work is its call's kind's.
    pub fn work_op_type(&self, kind: CollectiveKind) -> &'static str {
        if self.is_coalescing_block() {
            crate::collective::COALESCED_OP_TYPE
        } else {
            kind.op_type()
        }
    }

    /// The element type of what the op's NCCL calls move: its tensor's; f32 for any other op
    /// (a barrier's one-element tensor).
    pub fn call_dtype(&self, tensors: &[Tensor]) -> DType {
        match *self {
            OpKind::Collective { tensor, .. } => tensors[tensor].dtype,
            _ => DType::F32,
        }
    }

    /// The bytes of each NCCL call an op issues (R25): one per tensor of a list, one for all
    /// of them coalesced, or one per bucket of at most the cap (a tensor is never split across
    /// buckets, as DDP does not split a gradient); a barrier's one f32; nothing for other ops.
    pub fn call_sizes(&self, tensors: &[Tensor]) -> Vec<u64> {
        match *self {
            OpKind::Collective { tensor, batch, .. } => {
                let tensor = &tensors[tensor];
                let (size, count) = (tensor.size_bytes, u64::from(tensor.count));
                match batch {
                    Batch::Each => vec![size; count as usize],
                    Batch::Coalesced => vec![size * count],
                    Batch::Bucketed { cap_bytes } => {
                        let per_bucket = (cap_bytes / size).max(1);
                        let mut sizes = vec![per_bucket * size; (count / per_bucket) as usize];
                        if count % per_bucket != 0 {
                            sizes.push((count % per_bucket) * size);
                        }
                        sizes
                    }
                }
            }
            OpKind::Barrier { .. } => vec![crate::collective::BARRIER_BYTES],
            _ => Vec::new(),
        }
    }

    /// The scenario key that names this operation.
    pub fn key(&self) -> &'static str {
        match self {
            OpKind::Collective { collective, .. } => collective.key(),
            OpKind::Barrier { .. } => "barrier",
            OpKind::Wait { .. } => "wait",
            OpKind::IsCompleted { .. } => "is_completed",
            OpKind::BatchP2p { .. } => "batch_isend_irecv",
            OpKind::GetFuture { .. } => "get_future",
            OpKind::SetStream { .. } => "set_stream",
            OpKind::RecordEvent { .. } => "record_event",
            OpKind::WaitEvent { .. } => "wait_event",
            OpKind::EventSync { .. } => "event_sync",
            OpKind::StreamSync { .. } => "stream_sync",
            OpKind::DeviceSync => "device_sync",
            OpKind::Item { .. } => "item",
            OpKind::Gemm { .. } => "gemm",
            OpKind::Kernel { .. } => "kernel",
            OpKind::GpuSleep { .. } => "gpu_sleep",
            OpKind::HostSleep { .. } => "host_sleep",
            OpKind::Mark { .. } => "mark",
            OpKind::Alloc { .. } => "alloc",
            OpKind::Free { .. } => "free",
            OpKind::InitProcessGroup { .. } => "init_process_group",
            OpKind::NewGroup { .. } => "new_group",
        }
    }
}

/// One op of the program, with its resolved stream.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Op {
    pub index: usize,
    pub label: Option<String>,
    /// 1-based line of the op's table in the scenario file.
    pub line: u32,
    pub kind: OpKind,
    /// The stream current at this op (statically resolved: programs have no control flow; every
    /// iteration starts on the default stream).
    pub stream: StreamId,
    /// Ranks that execute the op; `None` means every rank.
    pub ranks: Option<Vec<u32>>,
    pub reads: Vec<TensorId>,
    pub writes: Vec<TensorId>,
    /// `try: … except DistBackendError:` around the call (`catch = true`, on `wait` ops): an
    /// exception it raises is recorded and the program goes on.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub catch: bool,
}

impl Op {
    pub fn runs_on(&self, rank: u32) -> bool {
        self.ranks
            .as_ref()
            .is_none_or(|ranks| ranks.contains(&rank))
    }

    /// The label, or `key#index` when the op has none.
    pub fn display_name(&self) -> String {
        match &self.label {
            Some(label) => label.clone(),
            None => format!("{}#{}", self.kind.key(), self.index),
        }
    }
}

/// What a `[[fault]]` does to its ranks at its op and iteration.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum FaultKind {
    /// The rank never issues the collective and goes on: its next collective pairs with the
    /// others' call of this one (a desync).
    Skip,
    /// The host hangs for good before the op (a stuck data loader): the process and its GPU
    /// work stay, the others' collectives time out.
    Hang,
    /// The rank issues a different collective, size or element type: NCCL hangs or corrupts;
    /// the model reports it and hangs.
    Mismatch {
        collective: CollectiveKind,
        size_bytes: u64,
        dtype: DType,
    },
    /// The process dies before the op: its host stops, its kernels vanish.
    Die,
    /// An NCCL async error (network failure) on the op's communicator `after_ns` after the
    /// collective's enqueue; the collective never completes on that rank.
    AsyncError { after_ns: u64 },
    /// The watchdog thread hangs (in `cudaEventQuery`) at its first poll after the
    /// collective's enqueue; only the heartbeat monitor can act (R28).
    WatchdogStuck,
}

impl FaultKind {
    pub fn key(&self) -> &'static str {
        match self {
            FaultKind::Skip => "skip",
            FaultKind::Hang => "hang",
            FaultKind::Mismatch { .. } => "mismatch",
            FaultKind::Die => "die",
            FaultKind::AsyncError { .. } => "async_error",
            FaultKind::WatchdogStuck => "watchdog_stuck",
        }
    }
}

/// A `[[fault]]`: something that goes wrong on some ranks at one op of one iteration.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Fault {
    pub ranks: Vec<u32>,
    pub op: usize,
    pub iteration: u32,
    pub kind: FaultKind,
}

/// A per-rank delay before a labelled op (a straggler).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Perturbation {
    pub ranks: Vec<u32>,
    pub before_op: usize,
    /// Host time spent before the op (fixed or drawn per rank and iteration).
    pub host_delay: Delay,
    /// A one-block delay kernel on the op's stream before it.
    pub gpu_delay: Delay,
    /// Iterations it applies to; `None` means all.
    pub iterations: Option<Vec<u32>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Clock {
    Gpu,
    Host,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Measure {
    pub name: String,
    pub from: MarkId,
    pub to: MarkId,
    pub clock: Clock,
}

/// The R3 overlap figure from three named measures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OverlapSpec {
    pub name: String,
    pub compute: usize,
    pub comm: usize,
    pub both: usize,
}

/// A validated scenario.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Scenario {
    pub name: String,
    pub about: String,
    /// The file it came from, as given.
    pub path: String,
    /// FNV-1a hash of the file's bytes, hex.
    pub source_hash: String,
    pub torch: TorchProfile,
    pub seed: u64,
    pub repeat: u32,
    pub warmup: u32,
    /// Simulated time after which the simulator stops with a finding.
    pub max_sim_time_ns: u64,
    /// The program ends with `destroy_process_group()` (R31); false: it returns without, and
    /// ProcessGroupNCCL's destructor tears the group down at exit.
    pub destroy_process_group: bool,
    pub cluster: Cluster,
    pub network: Network,
    pub host: HostCosts,
    pub env: Env,
    pub memory: Memory,
    pub tensors: Vec<Tensor>,
    pub streams: Vec<StreamDecl>,
    pub groups: Vec<Group>,
    pub works: Vec<String>,
    pub events: Vec<String>,
    pub marks: Vec<String>,
    pub ops: Vec<Op>,
    pub perturbations: Vec<Perturbation>,
    pub faults: Vec<Fault>,
    pub measures: Vec<Measure>,
    pub overlaps: Vec<OverlapSpec>,
}

impl Scenario {
    /// The bytes of each NCCL call an op issues ([`OpKind::call_sizes`]).
    pub fn call_sizes(&self, kind: &OpKind) -> Vec<u64> {
        kind.call_sizes(&self.tensors)
    }

    /// Bytes of a tensor, all of a list's tensors together.
    pub fn tensor_bytes(&self, tensor: TensorId) -> u64 {
        let tensor = &self.tensors[tensor];
        tensor.size_bytes * u64::from(tensor.count)
    }

    /// Whether ranks `a` and `b` share a node.
    /// Whether collectives are costed by the NCCL model (algorithms × protocols) rather than
    /// the plain α-β ring: `network.algorithm = "auto"`, or `NCCL_ALGO` / `NCCL_PROTO` set.
    pub fn uses_nccl_model(&self) -> bool {
        self.network.algorithm == NetworkAlgorithm::Auto
            || self.env.nccl_algorithms.is_some()
            || self.env.nccl_protocols.is_some()
    }

    /// The first collective that the NCCL model could not plan because `NCCL_ALGO` /
    /// `NCCL_PROTO` exclude every pair its group supports (NCCL fails such a call), described.
    pub fn unplannable_collective(&self) -> Option<String> {
        if !self.uses_nccl_model() {
            return None;
        }
        self.ops.iter().find_map(|op| {
            let (collective, group) = op.kind.collective()?;
            let ranks = &self.groups[group].ranks;
            let single_node = ranks.iter().all(|&rank| self.same_node(ranks[0], rank));
            let nvls_possible = self.env.nccl_nvls_enable
                && crate::nccl_env::preset_has_nvls(&self.cluster.gpu.preset)
                && single_node;
            let none = ranks.len() > 1
                && crate::nccl_env::allowed_pairs(
                    collective,
                    self.env.nccl_algorithms.as_ref(),
                    self.env.nccl_protocols.as_ref(),
                    nvls_possible,
                )
                .next()
                .is_none();
            none.then(|| {
                format!(
                    "NCCL_ALGO/NCCL_PROTO leave no algorithm and protocol for the {} of op {} (line {}) on group {:?} \
                     (c10dsim models a ring for every collective, tree and NVLS for all_reduce; NCCL 2.24 and later fail such a call rather than fall back to the ring)",
                    collective.key(),
                    op.display_name(),
                    op.line,
                    self.groups[group].name
                )
            })
        })
    }

    /// The process group a call on `group` goes through: a pair's send or receive goes through
    /// the group it was called on, the default one (its numbering, watchdog and abort are that
    /// group's); any other group is its own.
    pub fn process_group(&self, group: GroupId) -> GroupId {
        if self.groups[group].point_to_point {
            0
        } else {
            group
        }
    }

    /// The timeout a Work of a call on `group` carries, and prints as `Timeout(ms)`: its process
    /// group's ([`Self::process_group`]; PyTorch copies the group's options into each Work), so a
    /// pair's send or receive has the default group's (R11).
    pub fn work_timeout_ns(&self, group: GroupId) -> u64 {
        self.groups[self.process_group(group)].timeout_ns
    }

    /// The groups whose calls go through process group `process_group` ([`Self::process_group`]):
    /// the group itself and, for the default group, every pair (R11). Its watchdog watches
    /// their Works, and its error handling under `TORCH_NCCL_ASYNC_ERROR_HANDLING` 1 and 2
    /// aborts all their communicators (PyTorch's `abortComms()` of the process group, R27);
    /// another process group's run on. Both engines ask.
    pub fn groups_of_process_group(
        &self,
        process_group: GroupId,
    ) -> impl Iterator<Item = GroupId> + '_ {
        (0..self.groups.len()).filter(move |&group| self.process_group(group) == process_group)
    }

    /// The group whose communicator and internal stream a call on `group` runs on: a pair's
    /// unbatched send or receive runs on the world's when the world was created eagerly
    /// (`device_id`: PyTorch's `eagerInit_` makes no two-rank communicator, R8, R11), so that it
    /// is serialised with the world's collectives; any other call on its group's own. The pair
    /// stays the call's group for its matching with the peer's call (NCCL matches a
    /// communicator's sends and receives per pair of ranks, in order).
    pub fn communicator(&self, group: GroupId) -> GroupId {
        if self.groups[group].point_to_point && self.groups[0].eager_init {
            0
        } else {
            group
        }
    }

    /// Whether `rank`'s call that makes `group` during the program (`init_process_group` for
    /// the world, `new_group` for another: [`Group::created_by`]) creates the group's
    /// communicator, blocking there (R8): an eager group's call does on its members; else the
    /// group's first collective creates it.
    pub fn creates_communicator_in_setup(&self, group: GroupId, rank: u32) -> bool {
        let group = &self.groups[group];
        group.created_by.is_some() && group.eager_init && group.has_rank(rank)
    }

    pub fn same_node(&self, a: u32, b: u32) -> bool {
        a / self.cluster.ranks_per_node == b / self.cluster.ranks_per_node
    }

    /// Whether the op's internal-stream collectives of `group` run at high priority (R9).
    pub fn group_stream_high_priority(&self, group: GroupId) -> bool {
        self.env.high_priority || self.groups[group].high_priority
    }
}

#[cfg(test)]
mod tests {
    /// Ranks 0 and 1 send to each other's neighbours on the world (pairs `p2p:0:1`,
    /// `p2p:1:2`), and group `half` has a collective of its own.
    const PAIRS: &str = "[cluster]\nranks = 4\n[groups]\nhalf = { ranks = [0, 1] }\n\
        [tensors]\nx = \"1MiB\"\n\
        [[op]]\nall_reduce = \"x\"\ngroup = \"half\"\n\
        [[op]]\nranks = [0]\nsend = \"x\"\npeer = 1\n[[op]]\nranks = [1]\nrecv = \"x\"\npeer = 0\n\
        [[op]]\nranks = [1]\nsend = \"x\"\npeer = 2\n[[op]]\nranks = [2]\nrecv = \"x\"\npeer = 1\n";

    #[test]
    fn the_default_process_group_covers_every_pair_and_another_group_only_itself_r27() {
        let scenario = crate::scenario::parse("pairs.toml", PAIRS).unwrap();
        let name = |group: usize| scenario.groups[group].name.as_str();
        let names = |process_group| {
            (scenario.groups_of_process_group(process_group))
                .map(name)
                .collect::<Vec<_>>()
        };
        let half = (0..scenario.groups.len())
            .find(|&group| name(group) == "half")
            .unwrap();
        assert_eq!(names(0), ["world", "p2p:0:1", "p2p:1:2"]);
        assert_eq!(names(half), ["half"]);
    }

    #[test]
    fn a_pair_groups_name_gives_back_its_two_ranks_and_no_other_name_does() {
        let scenario = crate::scenario::parse("pairs.toml", PAIRS).unwrap();
        let read: Vec<Option<(u32, u32)>> = (scenario.groups.iter())
            .map(|group| super::Group::pair_ranks(&group.name))
            .collect();
        assert_eq!(read, [None, None, Some((0, 1)), Some((1, 2))]);
        for name in ["p2p:1", "p2p:1:x", "p2p:-1:2", "pair:0:1"] {
            assert_eq!(super::Group::pair_ranks(name), None, "{name}");
        }
    }
}
