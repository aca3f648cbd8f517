//! The primitive steps ProcessGroupNCCL's calls are made of: what [`super::ProcessGroupNccl`]
//! emits and what each engine executes (the simulator in simulated time, `hw` as CUDA and NCCL
//! calls). A step names streams by [`StreamRef`] and events by [`Slot`]; each engine keeps its
//! own handle per slot.

use crate::scenario::{CollectiveKind, DType, GroupId, MarkId, TensorId, WorkId};
use crate::timeline::{KernelClass, StreamRef};
use std::fmt;

/// An event this rank recorded, numbered in recording order from 0.
pub type Slot = u32;

/// A kernel the program launches (not an NCCL one).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Kernel {
    /// Busy for `duration_ns` on `blocks` blocks; with `own_sm` each block has its SM to itself
    /// (`kernel {us, sms}`), else it is one small block (`gpu_sleep_us`, a straggler's delay).
    Spin {
        duration_ns: u64,
        blocks: u32,
        own_sm: bool,
    },
    /// A GEMM `m×n×k`.
    Gemm {
        m: u64,
        n: u64,
        k: u64,
        dtype: DType,
    },
}

/// Who holds a collective's Work once the call returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkHolder {
    /// The program, under this name (`work = "w"`).
    Named(WorkId),
    /// Nobody: an `async_op=True` Work the program dropped; it is never waited on.
    Dropped,
    /// The call itself: a synchronous collective or a barrier waits on it before returning.
    Call,
}

impl WorkHolder {
    /// Whether the program keeps a handle on the Work after the call: only a named one, until
    /// the name is bound to a newer Work ([`Step::DropHandle`]).
    pub fn program_holds(self) -> bool {
        matches!(self, WorkHolder::Named(_))
    }
}

/// One NCCL call (R10c): the kernel on `stream`, joined with the group's other ranks (R16).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NcclCall {
    /// Index of the call among this rank's collective records (the Timeline's order).
    pub collective: u32,
    pub group: GroupId,
    pub kind: CollectiveKind,
    /// The collective's tensor; `None` for a barrier's internal one-element tensor.
    pub tensor: Option<TensorId>,
    pub bytes: u64,
    /// The call's number in its group, from 1, by which the ranks of the call meet
    /// (`CollectiveRecord::seq`).
    pub seq: u64,
    /// The Work's `SeqNum` as PyTorch prints it: a point-to-point call's count among its
    /// process group's point-to-point calls, a collective's among its group's collectives.
    pub seq_num: u64,
    /// The stream current at the call.
    pub call_stream: StreamRef,
    /// The stream the kernel runs on: the group's internal one (R10) or the current one (R11).
    pub stream: StreamRef,
    pub async_op: bool,
    /// The input-ready event on the current stream (R10a); for a call on the current stream
    /// (R11), a [`Step::Probe`].
    pub input_ready: Slot,
    /// The Work's start event on the kernel's stream, where Works are timed (R6).
    pub work_start: Option<Slot>,
    /// Factor on the kernel's modelled duration, drawn per (group, SeqNum) so that every rank
    /// of the collective draws the same (`cluster.kernel_jitter`; 1 without jitter).
    pub jitter: f64,
}

/// A primitive step of ProcessGroupNCCL, CUDA or the caching allocator.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Step {
    /// A host call of the program begins (the start of its Timeline host record).
    CallStart,
    /// The host call returns (its host record ends; a collective call's record ends with it).
    CallEnd,
    /// Host time the model charges for a call (`[host]` costs); on hardware the call itself
    /// takes its time, so `hw` does nothing.
    HostCost { cost_ns: u64 },
    /// The host part of a collective call before its kernel launch, which depends on how long
    /// ago the rank's previous collective call returned ([`CallWarmth`]); `hw` does nothing.
    CollectiveCost(CallWarmth),
    /// The host sleeps: a `host_sleep` op or a straggler's host delay (R16).
    HostSleep { duration_ns: u64 },
    /// `cudaEventRecord` of a new event on `stream` (R5).
    Record { stream: StreamRef, slot: Slot },
    /// A point on `stream` whose time the engines take but for which PyTorch enqueues
    /// nothing: the input-ready point of a synchronous collective on the current stream,
    /// where ProcessGroupNCCL records no event (R11). It fires when the stream reaches it, as a
    /// record does, and takes no place in the stream's launch queue (R1); `hw` records an
    /// event there, one of its own timing events.
    Probe { stream: StreamRef, slot: Slot },
    /// `cudaStreamWaitEvent`: later work on `stream` waits until `slot` fired (R5).
    StreamWait { stream: StreamRef, slot: Slot },
    /// A compute or sleep kernel; `jitter` multiplies a modelled duration
    /// (`cluster.kernel_jitter`, drawn from the rank's stream for compute kernels).
    Launch {
        stream: StreamRef,
        class: KernelClass,
        kernel: Kernel,
        jitter: f64,
    },
    /// A collective on `group` first checks that its communicator was not aborted (R27).
    CheckComm { group: GroupId },
    /// The program uses the Work name `work` on a rank where no call bound it: every call that
    /// would have raised before returning (`catch = true`), so Python raises `NameError` before
    /// calling anything, which nothing catches (`except DistBackendError:` does not): the
    /// process ends there.
    NameError { work: WorkId },
    /// Eager communicator init (R8 with `device_id`): `init_process_group` creates the
    /// group's communicator before the program's first op. The simulator counts it as done
    /// before t = 0 (it costs the program nothing); `hw` creates the communicator.
    EagerInit { group: GroupId },
    /// The exchange of `group`'s NCCL unique id through the store (R29), inside an eager
    /// `init_process_group(device_id=…)` under `TORCH_NCCL_USE_COMM_NONBLOCKING`, which then
    /// only starts the communicator's creation: the root publishes the id, every other member
    /// blocks in `store.get` until it is there, or raises after the store's timeout (the
    /// group's). From the id on, the member's part of the creation (`cost_ns`) runs beside the
    /// program; the group's first use ([`Step::InitComm`] with `nonblocking`) waits for the end.
    FetchUniqueId { group: GroupId, cost_ns: u64 },
    /// A communicator created during the program (R8): lazily inside the group's first
    /// collective, or eagerly in `init_process_group(device_id=…)` / `new_group`. The host
    /// blocks until every member arrived, then for `cost_ns`; a member still waiting for the
    /// root's unique id raises after the store's timeout (the group's, R29). Under
    /// `TORCH_NCCL_USE_COMM_NONBLOCKING` (`nonblocking`: the world's first use after a
    /// [`Step::FetchUniqueId`], which exchanged the id) it waits for the creation's end and
    /// raises if that end comes after `nonblocking_timeout_ns` (R8; `None`: it waits for good).
    InitComm {
        group: GroupId,
        cost_ns: u64,
        nonblocking_timeout_ns: Option<u64>,
        nonblocking: bool,
    },
    /// Works of `group` never waited on leave the stash shelf once complete (R18).
    ReleaseShelf { group: GroupId },
    /// PyTorch's warning that an unbatched send or receive runs on the eagerly initialised
    /// `group`'s communicator and stream, serialised with its collectives (R11): logged by the
    /// main thread, once per process for sends and once for receives.
    EagerP2pWarning { group: GroupId },
    /// The program's name for a Work was bound to a newer one: it no longer holds `collective`'s
    /// Work, so a never-waited Work's tensors may leave at the group's next collective (R18).
    DropHandle { collective: u32 },
    /// The NCCL kernel (R10c, R16, R24, R25).
    Nccl(NcclCall),
    /// The Work of collective record `collective`, whose end event is `end`, is handed to the
    /// watchdog (R10e, R26); `stash` is the tensor the Work keeps alive (R18, R19).
    Watch {
        collective: u32,
        end: Slot,
        stash: Option<TensorId>,
        holder: WorkHolder,
    },
    /// `work.wait()`: after `cost_ns` of host time the stream current at the call waits on the
    /// Work's end event (R12).
    Wait {
        collective: u32,
        stream: StreamRef,
        end: Slot,
        cost_ns: u64,
    },
    /// After the stream wait the Work lets go of its stashed tensors (R18).
    ReleaseOnWait { collective: u32 },
    /// Blocking wait or `wait(timeout)`: the host polls `is_completed()` every `interval_ns`
    /// and raises once `timeout_ns` (the wait's own, else the group's) passed since the enqueue
    /// (R15).
    Poll {
        collective: u32,
        end: Slot,
        interval_ns: u64,
        timeout_ns: u64,
    },
    /// `wait()` returns (the end of its wait record).
    WaitReturn { collective: u32 },
    /// `work.is_completed()` after `cost_ns`: never blocks (R13).
    Query { slot: Slot, cost_ns: u64 },
    /// `event.synchronize()`: the host blocks until `slot` fired, then `cost_ns` (R14).
    EventSync { slot: Slot, cost_ns: u64 },
    /// `stream.synchronize()` (R14).
    StreamSync { stream: StreamRef, cost_ns: u64 },
    /// The end of a barrier Work's `wait()` (R14): `is_completed()` after `query_cost_ns`
    /// (R13: the end event `end` of collective record `collective` fired, or the Work failed),
    /// and only when it is not, `stream.synchronize()` as [`Step::StreamSync`] with
    /// `sync_cost_ns`.
    StreamSyncUnlessCompleted {
        collective: u32,
        stream: StreamRef,
        end: Slot,
        query_cost_ns: u64,
        sync_cost_ns: u64,
    },
    /// `torch.cuda.synchronize()`: every stream, the internal ones included (R14).
    DeviceSync { cost_ns: u64 },
    /// `.item()`: one element copied to the host on `stream`, which the host waits for (R14).
    Item {
        stream: StreamRef,
        tensor: TensorId,
        cost_ns: u64,
    },
    /// `torch.empty` on `stream` through the caching allocator (R17, R20).
    Alloc { tensor: TensorId, stream: StreamRef },
    /// `del t` (R18, R19).
    Free { tensor: TensorId },
    /// A functional collective's call binds the name `tensor` to a new result (R30): the
    /// tensor the name held is set aside, alive, so that the next `Alloc` of `tensor` makes
    /// the new one.
    SetAside { tensor: TensorId },
    /// The call returned: the tensor set aside for `tensor` is dropped, as `del` drops one
    /// (R18, R19).
    FreeSetAside { tensor: TensorId },
    /// A named mark: an event on `stream` and the host time before `cost_ns`.
    Mark {
        mark: MarkId,
        stream: StreamRef,
        cost_ns: u64,
    },
    /// The op reads or writes `tensor` at its last GPU item (R21; only the race detector
    /// looks).
    Access { tensor: TensorId, write: bool },
    /// A copy DDP's Reducer issues on `stream` (R25): the op's accesses that follow happen at
    /// its place in that stream. Neither engine times it or carries it out.
    Copy { stream: StreamRef },
    /// The op reads or writes the flat buffer of bucket `bucket` (numbered from 0) of the
    /// bucketed collective at op `op`, at its last GPU item (R21, R25; only the race detector
    /// looks).
    BucketAccess { op: u32, bucket: u32, write: bool },
    /// The clone of `y = fcol.all_reduce(y)` reads the tensor set aside for `tensor`, the one
    /// the name held before the call (R30, R21; only the race detector looks).
    ReadSetAside { tensor: TensorId },
}

impl fmt::Display for Kernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Kernel::Spin {
                duration_ns,
                blocks,
                own_sm,
            } => write!(
                f,
                "spin {duration_ns}ns x{blocks}{}",
                if own_sm { " own" } else { "" }
            ),
            Kernel::Gemm { m, n, k, dtype } => write!(f, "gemm {m}x{n}x{k} {}", dtype.as_str()),
        }
    }
}

/// A collective call's host cost by the gap since the rank's previous collective call
/// returned: `warm_ns` up to `warm_within_ns`, `cold_ns` from `cold_after_ns` on (and for the
/// rank's first call), interpolated on a log scale of the gap between
/// (`host.collective_cold_us`, docs/torch.md#host-warmth).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CallWarmth {
    pub warm_ns: u64,
    pub cold_ns: u64,
    pub warm_within_ns: u64,
    pub cold_after_ns: u64,
    /// The rest of the call after this cost (the enqueue and the tail), the same warm or cold.
    pub rest_ns: u64,
}

impl CallWarmth {
    /// The cost of a call `since_previous_ns` after the previous collective call returned
    /// (`None`: the rank's first).
    pub fn cost_ns(&self, since_previous_ns: Option<u64>) -> u64 {
        let Some(gap_ns) = since_previous_ns else {
            return self.cold_ns;
        };
        if gap_ns <= self.warm_within_ns || self.warm_ns == self.cold_ns {
            return self.warm_ns;
        }
        if gap_ns >= self.cold_after_ns {
            return self.cold_ns;
        }
        let share = (gap_ns as f64 / self.warm_within_ns as f64).ln()
            / (self.cold_after_ns as f64 / self.warm_within_ns as f64).ln();
        let cost = self.warm_ns as f64 + share * (self.cold_ns as f64 - self.warm_ns as f64);
        cost.round() as u64
    }

    /// `warm_latency_ns` slowed as the whole call is, for a call that cost `cost_ns`: PyTorch's
    /// host path from the Work's start event to NCCL's kernel launch runs as cold as the rest
    /// of the call (docs/torch.md#host-warmth). A warm call of no host cost (an imported
    /// trace's, whose host time is `host_sleep_us`) gives no ratio: the latency as given.
    pub fn slowed_ns(&self, warm_latency_ns: u64, cost_ns: u64) -> u64 {
        let warm_call_ns = u128::from(self.warm_ns + self.rest_ns);
        if warm_call_ns == 0 {
            return warm_latency_ns;
        }
        let call_ns = u128::from(cost_ns + self.rest_ns);
        u64::try_from(u128::from(warm_latency_ns) * call_ns / warm_call_ns).unwrap_or(u64::MAX)
    }
}

impl fmt::Display for Step {
    /// One line per step, the same from both engines (the engine-equivalence test compares
    /// them).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Step::CallStart => write!(f, "call"),
            Step::CallEnd => write!(f, "return"),
            Step::HostCost { cost_ns } => write!(f, "host_cost {cost_ns}ns"),
            Step::CollectiveCost(warmth) => write!(
                f,
                "collective_cost {}..{}ns",
                warmth.warm_ns, warmth.cold_ns
            ),
            Step::HostSleep { duration_ns } => write!(f, "host_sleep {duration_ns}ns"),
            Step::Record { stream, slot } => write!(f, "record s{stream} e{slot}"),
            Step::Probe { stream, slot } => write!(f, "probe s{stream} e{slot}"),
            Step::StreamWait { stream, slot } => write!(f, "stream_wait s{stream} e{slot}"),
            Step::Launch {
                stream,
                class,
                kernel,
                jitter,
            } => write!(f, "launch s{stream} {class:?} {kernel} jitter {jitter:.9}"),
            Step::CheckComm { group } => write!(f, "check_comm g{group}"),
            Step::NameError { work } => write!(f, "name_error w{work}"),
            Step::EagerInit { group } => write!(f, "eager_init g{group}"),
            Step::FetchUniqueId { group, .. } => write!(f, "fetch_unique_id g{group}"),
            Step::InitComm { group, .. } => write!(f, "init_comm g{group}"),
            Step::ReleaseShelf { group } => write!(f, "release_shelf g{group}"),
            Step::EagerP2pWarning { group } => write!(f, "eager_p2p_warning g{group}"),
            Step::DropHandle { collective } => write!(f, "drop_handle c{collective}"),
            Step::Nccl(call) => write!(
                f,
                "nccl c{} g{} {} {}B seq {} s{}->s{}{} ready e{}{} jitter {:.9}",
                call.collective,
                call.group,
                call.kind.op_type(),
                call.bytes,
                call.seq,
                call.call_stream,
                call.stream,
                if call.async_op { " async" } else { "" },
                call.input_ready,
                call.work_start
                    .map_or(String::new(), |slot| format!(" start e{slot}")),
                call.jitter
            ),
            Step::Watch {
                collective,
                end,
                stash,
                holder,
            } => write!(
                f,
                "watch c{collective} end e{end} stash {stash:?} {holder:?}"
            ),
            Step::Wait {
                collective,
                stream,
                end,
                cost_ns,
            } => write!(f, "wait c{collective} s{stream} e{end} +{cost_ns}ns"),
            Step::ReleaseOnWait { collective } => write!(f, "release_on_wait c{collective}"),
            Step::Poll {
                collective,
                end,
                interval_ns,
                timeout_ns,
            } => write!(
                f,
                "poll c{collective} e{end} every {interval_ns}ns timeout {timeout_ns}ns"
            ),
            Step::WaitReturn { collective } => write!(f, "wait_return c{collective}"),
            Step::Query { slot, cost_ns } => write!(f, "query e{slot} +{cost_ns}ns"),
            Step::EventSync { slot, cost_ns } => write!(f, "event_sync e{slot} +{cost_ns}ns"),
            Step::StreamSync { stream, cost_ns } => {
                write!(f, "stream_sync s{stream} +{cost_ns}ns")
            }
            Step::StreamSyncUnlessCompleted {
                collective,
                stream,
                end,
                query_cost_ns,
                sync_cost_ns,
            } => write!(
                f,
                "stream_sync_unless_completed c{collective} s{stream} e{end} +{query_cost_ns}ns +{sync_cost_ns}ns"
            ),
            Step::DeviceSync { cost_ns } => write!(f, "device_sync +{cost_ns}ns"),
            Step::Item {
                stream,
                tensor,
                cost_ns,
            } => write!(f, "item s{stream} t{tensor} +{cost_ns}ns"),
            Step::Alloc { tensor, stream } => write!(f, "alloc t{tensor} s{stream}"),
            Step::Free { tensor } => write!(f, "free t{tensor}"),
            Step::SetAside { tensor } => write!(f, "set_aside t{tensor}"),
            Step::FreeSetAside { tensor } => write!(f, "free_set_aside t{tensor}"),
            Step::Mark {
                mark,
                stream,
                cost_ns,
            } => write!(f, "mark m{mark} s{stream} +{cost_ns}ns"),
            Step::Access { tensor, write } => {
                write!(f, "{} t{tensor}", if write { "write" } else { "read" })
            }
            Step::Copy { stream } => write!(f, "copy s{stream}"),
            Step::BucketAccess { op, bucket, write } => {
                let verb = if write { "write" } else { "read" };
                write!(f, "{verb} bucket {bucket} of op {op}")
            }
            Step::ReadSetAside { tensor } => write!(f, "read_set_aside t{tensor}"),
        }
    }
}

#[cfg(test)]
mod warmth_tests {
    use super::CallWarmth;

    const WARMTH: CallWarmth = CallWarmth {
        warm_ns: 20_000,
        cold_ns: 200_000,
        warm_within_ns: 30_000,
        cold_after_ns: 30_000_000,
        rest_ns: 5_000,
    };

    #[test]
    fn a_call_is_warm_in_a_tight_loop_cold_after_a_long_gap_and_first() {
        assert_eq!(WARMTH.cost_ns(Some(0)), 20_000);
        assert_eq!(WARMTH.cost_ns(Some(30_000)), 20_000);
        assert_eq!(WARMTH.cost_ns(Some(30_000_000)), 200_000);
        assert_eq!(WARMTH.cost_ns(Some(u64::MAX)), 200_000);
        assert_eq!(WARMTH.cost_ns(None), 200_000);
    }

    #[test]
    fn between_the_thresholds_the_cost_follows_the_log_of_the_gap() {
        // 30 µs → 30 ms spans three decades: 300 µs is a third of the way, 3 ms two thirds.
        assert_eq!(WARMTH.cost_ns(Some(300_000)), 80_000);
        assert_eq!(WARMTH.cost_ns(Some(3_000_000)), 140_000);
        let rising: Vec<u64> = [40_000, 100_000, 1_000_000, 10_000_000]
            .iter()
            .map(|&gap| WARMTH.cost_ns(Some(gap)))
            .collect();
        assert!(rising.windows(2).all(|w| w[0] < w[1]), "{rising:?}");
    }

    #[test]
    fn the_launch_latency_slows_as_the_whole_call_does() {
        // Warm: the call is 20 + 5 µs, the latency as given; cold: 205 µs, 8.2 times that.
        assert_eq!(WARMTH.slowed_ns(1_000, 20_000), 1_000);
        assert_eq!(WARMTH.slowed_ns(1_000, 200_000), 8_200);
        assert_eq!(WARMTH.slowed_ns(0, 200_000), 0);
    }

    #[test]
    fn a_call_of_no_host_cost_keeps_the_launch_latency() {
        // `import kineto` sets every collective cost to 0: the NCCL launch latency stays.
        let free = CallWarmth {
            warm_ns: 0,
            cold_ns: 0,
            warm_within_ns: 30_000,
            cold_after_ns: 30_000_000,
            rest_ns: 0,
        };
        assert_eq!(free.slowed_ns(3_000, free.cost_ns(None)), 3_000);
        assert_eq!(free.slowed_ns(3_000, free.cost_ns(Some(1_000))), 3_000);
    }
}
