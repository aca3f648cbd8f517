//! The state of one rank in the simulation: its host's place in the program, its streams,
//! event instances and SMs, its Timeline records as they are made, its memory books and its
//! race detector.

use super::gpu_times::{DataStart, GpuTimes, KernelTimes};
use super::host::Cursor;
use super::memory::MemoryState;
use super::streams::StreamState;
use super::summary::{RankRecords, Records};
use super::{Blocked, Instance, Waiter, NOT_ENQUEUED};
use crate::gpu::SmScheduler;
use crate::pg::ProcessGroupNccl;
use crate::race::RaceDetector;
use crate::timeline::{ProcessEnd, UnfinishedHostCall};
use smallvec::SmallVec;

/// Streams a rank holds without a heap allocation.
const INLINE_STREAMS: usize = 4;

/// In the order of the fields (`repr(C)`): what the GPU side's events touch first, then what
/// the host's steps touch, then the rest. With thousands of ranks taking turns each event finds
/// its rank's state cold, so the fields one event reads should share as few cache lines as
/// they can (Rust would order them by alignment).
#[repr(C)]
pub(super) struct RankState {
    // ---- the GPU side's events
    /// Inline for the usual few (the current stream and a group's internal one or two), so
    /// that an event reaches its stream's state without a second cache miss when thousands
    /// of ranks take turns.
    pub(super) streams: SmallVec<[StreamState; INLINE_STREAMS]>,
    pub(super) blocked: Blocked,
    /// The pending `SmTransfer`, if one is scheduled.
    pub(super) transfer_at_ns: Option<u64>,
    /// Fire time of every event instance this rank recorded.
    pub(super) fired_ns: Vec<u64>,
    /// Who waits for which instance that has not fired: a stream's head or the host.
    pub(super) waiters: Waiters,
    /// The GPU's SMs and the kernels sharing them (R7, R22).
    pub(super) gpu: SmScheduler,
    pub(super) scratch: Scratch,
    /// The Timeline records as they are made (summary hook: folded as they complete when the
    /// run is summarised, engine/summary.rs).
    pub(super) timeline: RankRecords,
    // ---- the host's steps
    pub(super) host_ns: u64,
    pub(super) iteration: u32,
    /// The next op of the program.
    pub(super) pc: usize,
    /// The op the host is in (blocked in, for deadlock findings).
    pub(super) blocked_op: usize,
    /// The current op's steps and the host's place in them.
    pub(super) cursor: Cursor,
    /// Host time at which the rank's last collective call returned (`pg::CallWarmth`).
    pub(super) last_collective_return_ns: Option<u64>,
    /// The event instance of every slot the steps recorded.
    pub(super) slot_instance: Vec<Instance>,
    /// The host's state, counted: it moves on at every resumption, and when a caught raise
    /// takes the host out of a communicator's init (R8, R29) whose end was to resume it. A
    /// wake-up of the host carries the generation it was scheduled in, and one that no longer
    /// matches is stale, for a state the host left: a resume or the end of an init is dropped
    /// (`Engine::ignored`), a wait's timeout or abort does nothing.
    pub(super) generation: u64,
    /// Stream on which each instance was recorded.
    pub(super) instance_stream: Vec<u16>,
    /// Per group: the SeqNum of the last collective the host enqueued.
    pub(super) group_seq: Vec<u64>,
    /// Per group: when this rank's communicator of it was created (R8), `NEVER` for not: the
    /// Flight Recorder lists a group from then (`initNCCLComm`'s `record_pg_ranks`).
    pub(super) comm_created_ns: Vec<u64>,
    /// This GPU's compute time relative to the model's (`cluster.rank_speed_spread_pct`).
    pub(super) compute_speed: f64,
    /// Compute-kernel time launched so far (`cluster.boost_ms`).
    pub(super) compute_launched_ns: u64,
    /// Happens-before of this rank's host and streams, for data races (R21).
    pub(super) race: RaceDetector,
    /// Per Work name: the end instance and collective record of its latest creation.
    pub(super) work_end: Vec<Option<(Instance, u32)>>,
    /// The caching allocator and the lifetime of each tensor (R17–R20).
    pub(super) memory: MemoryState,
    /// ProcessGroupNCCL of this rank: what each op is made of.
    pub(super) pg: ProcessGroupNccl,
    /// ProcessGroupNCCL as it was before the current op, kept where the op catches its raise
    /// (`catch = true`) and a communicator of the rank is still to be created: a
    /// communicator's creation that raised (R29) leaves it as it was.
    pub(super) pg_before_op: Option<Box<ProcessGroupNccl>>,
    // ---- the rest
    /// How the process ended, once it did (the first end counts).
    pub(super) end: Option<ProcessEnd>,
    /// The host call its end left open (`RankState::end_call`).
    pub(super) unfinished_host: Option<UnfinishedHostCall>,
    /// The current call raised an exception the program catches (`catch = true`).
    pub(super) caught: bool,
    /// The groups whose watchdog's abort waits for this rank's GPU work to drain (R27).
    pub(super) aborts_awaiting_drain: Vec<u16>,
}

/// `created_ns[group]` (a [`RankState::comm_created_ns`]): created at `at_ns`, unless earlier.
pub(super) fn comm_created(created_ns: &mut [u64], group: usize, at_ns: u64) {
    created_ns[group] = created_ns[group].min(at_ns);
}

impl RankState {
    /// This rank's communicator of `group` exists from `at_ns` (R8), unless it did earlier.
    pub(super) fn comm_created(&mut self, group: usize, at_ns: u64) {
        comm_created(&mut self.comm_created_ns, group, at_ns);
    }

    /// The stream a kernel the SM scheduler holds runs on: the one it is the head of (the
    /// streams' states are at hand; its record, made by the host long before, is not).
    #[inline]
    pub(super) fn running_stream(&self, kernel: u32) -> u16 {
        let stream = (self.streams.iter())
            .position(|stream| stream.running == Some(kernel))
            .expect("a kernel the SMs hold is the head of its stream");
        debug_assert_eq!(
            stream,
            self.timeline.kernels[kernel as usize].stream as usize
        );
        stream as u16
    }

    /// No GPU work is left on any stream (R31: a process whose program returned ends then).
    #[inline]
    pub(super) fn drained(&self) -> bool {
        self.streams.iter().all(|stream| stream.queue.is_empty())
    }

    /// After the first iteration: room for `more` iterations like it in the records that grow
    /// with the program, so the Timeline is not copied as it grows (and holds no doubling slack).
    /// A summarised run folds its records as they complete: only the event instances, kept
    /// whole, get their room.
    pub(super) fn reserve_iterations(&mut self, more: usize) {
        fn room_vec<T>(records: &mut Vec<T>, more: usize) {
            records.reserve_exact(records.len().saturating_mul(more));
        }
        room_vec(&mut self.fired_ns, more);
        room_vec(&mut self.instance_stream, more);
        room_vec(&mut self.slot_instance, more);
        if self.timeline.folds {
            return;
        }
        fn room<T>(records: &mut Records<T>, more: usize) {
            records.reserve_exact(records.len().saturating_mul(more));
        }
        let timeline = &mut self.timeline;
        room(&mut timeline.host, more);
        room(&mut timeline.kernels, more);
        room(&mut timeline.collectives, more);
        room(&mut timeline.marks, more);
        room(&mut timeline.stream_waits, more);
        room(&mut timeline.queries, more);
        let scratch = &mut self.scratch;
        room(&mut scratch.collective_input_ready, more);
        room(&mut scratch.collective_work_start, more);
        room(&mut scratch.collective_end, more);
        room(&mut scratch.collective_kernel, more);
        room(&mut scratch.collective_wait_stream_wait, more);
        room(&mut scratch.mark_instance, more);
        room(&mut scratch.stream_wait_instance, more);
        room(&mut scratch.query_instance, more);
        room(&mut scratch.query_failed_ns, more);
        let room_times = |count: usize| count.saturating_mul(more + 1);
        (scratch.kernel_times).reserve_exact(room_times(timeline.kernels.len()));
        (scratch.stream_wait_released_ns).reserve_exact(room_times(timeline.stream_waits.len()));
        (scratch.collective_data).reserve_exact(room_times(timeline.collectives.len()));
    }
}

/// Instances whose fire times fill Timeline fields once the run ends (or the records fold),
/// indexed as the records they belong to; first (`repr(C)`), what the GPU side writes.
#[derive(Default)]
#[repr(C)]
pub(super) struct Scratch {
    /// What the GPU side writes into the kernel, stream wait and collective records, indexed as
    /// they are: the records take it when they are resolved (engine/summary.rs).
    pub(super) kernel_times: GpuTimes<KernelTimes>,
    pub(super) stream_wait_released_ns: GpuTimes<u64>,
    pub(super) collective_data: GpuTimes<DataStart>,
    pub(super) collective_input_ready: Records<Instance>,
    /// The timed Work's start event (R6), `NO_WORK_START` where Works are not timed.
    pub(super) collective_work_start: Records<Instance>,
    /// The Work's end event (R10d) once the Work is enqueued, `NOT_ENQUEUED` until then: read
    /// through [`Scratch::enqueued_end`].
    pub(super) collective_end: Records<Instance>,
    pub(super) collective_kernel: Records<u32>,
    pub(super) collective_wait_stream_wait: Records<u32>,
    pub(super) mark_instance: Records<Instance>,
    pub(super) stream_wait_instance: Records<Instance>,
    pub(super) query_instance: Records<Instance>,
    /// Per query: when its Work failed with an NCCL async error (`NEVER`: it did not).
    pub(super) query_failed_ns: Records<u64>,
}

impl Scratch {
    /// The end event of collective `index`'s Work; `None` while the Work is not enqueued: a
    /// collective whose Work never was does not complete (its host blocked before the Work).
    #[inline]
    pub(super) fn enqueued_end(&self, index: usize) -> Option<Instance> {
        let end = self.collective_end[index];
        (end != NOT_ENQUEUED).then_some(end)
    }
}

/// The streams and the host waiting for instances that have not fired, in the order they began
/// to wait. At most one per stream (its head) and a few for the host (a `synchronize()` waits on
/// every stream), so a short list searched in order costs less than a hash map, and nothing
/// when no one waits, which is what most instances find when they fire.
#[derive(Default)]
pub(super) struct Waiters {
    pending: SmallVec<[(Instance, Waiter); INLINE_WAITERS]>,
}

/// Waiters a rank holds without a heap allocation.
const INLINE_WAITERS: usize = 4;

impl Waiters {
    pub(super) fn add(&mut self, instance: Instance, waiter: Waiter) {
        self.pending.push((instance, waiter));
    }

    /// Takes the waiters of `instance`, in the order they began to wait.
    pub(super) fn take(&mut self, instance: Instance) -> SmallVec<[Waiter; INLINE_WAITERS]> {
        let mut taken = SmallVec::new();
        if self.pending.is_empty() {
            return taken;
        }
        self.pending.retain(|&mut (waited, waiter)| {
            if waited == instance {
                taken.push(waiter);
            }
            waited != instance
        });
        taken
    }

    /// How many (instance, waiter) pairs are pending.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.pending.len()
    }

    /// The host no longer waits for anything (its wait raised and was caught).
    pub(super) fn forget_host(&mut self) {
        (self.pending).retain(|(_, waiter)| !matches!(waiter, Waiter::Host));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waiters_come_back_per_instance_in_the_order_they_began_to_wait() {
        let mut waiters = Waiters::default();
        waiters.add(7, Waiter::Stream { stream: 1 });
        waiters.add(3, Waiter::Host);
        waiters.add(7, Waiter::Host);
        waiters.add(7, Waiter::Stream { stream: 0 });
        let streams = |taken: &[Waiter]| -> Vec<Option<u16>> {
            (taken.iter())
                .map(|waiter| match waiter {
                    Waiter::Stream { stream } => Some(*stream),
                    Waiter::Host => None,
                })
                .collect()
        };
        assert_eq!(streams(&waiters.take(7)), [Some(1), None, Some(0)]);
        assert!(waiters.take(7).is_empty(), "taken once");
        waiters.forget_host();
        assert!(waiters.take(3).is_empty(), "the host no longer waits");
        assert!(waiters.pending.is_empty());
    }
}
