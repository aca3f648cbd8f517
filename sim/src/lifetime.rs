//! The books of a rank's tensor memory (R17–R20), shared by both engines: which block (a byte
//! range of a segment) each tensor lives in — a list (`count` = N) in N blocks, one per tensor,
//! as PyTorch's N `torch.empty` calls make them — and the flat buffer of each bucket of a
//! bucketed collective, made before the program as DDP's Reducer makes it (R25); what keeps a
//! freed block from its pool (the Work's stash, R18; recordStream events, R19), and when the
//! cache must be released (R20). The decisions — segment sizes, splitting, best fit per
//! stream — are the [`CachingAllocator`]'s.
//! The simulator times the steps; the hardware backend carries them out with one real
//! `cuMemAlloc` per segment, `cuMemFree` at a release and a real device-wide synchronise first.
//! `E` is the engine's handle of a recorded event (an event instance, a CUDA event).
//!
//! ```
//! use sim::lifetime::{AllocStep, TensorMemory};
//! let text = "[cluster]\nranks = 1\n[tensors]\ng = \"64MiB\"\n\
//!             [[op]]\nalloc = \"g\"\n[[op]]\nfree = \"g\"\n";
//! let scenario = sim::scenario::parse("doc.toml", text).unwrap();
//! let mut memory: TensorMemory<u32> = TensorMemory::new(&scenario, 0);
//! assert!(matches!(memory.allocate(0, 64 << 20, 0), AllocStep::NewSegment { .. }));
//! memory.free(0, Vec::new());
//! // Cached for the default stream: the next allocation there reuses the block (R17).
//! assert!(matches!(memory.allocate(0, 64 << 20, 0), AllocStep::Cached(_)));
//! ```

use crate::allocator::{Allocation, BlockId, CachingAllocator, MemoryPeaks, Region};
use crate::collective::CollectiveKind;
use crate::scenario::{Batch, Lifetime, Op, OpKind, Scenario, TensorId};
use crate::timeline::StreamRef;
use crate::units::format_size_as_pytorch;
use rustc_hash::FxHashMap as HashMap;
use smallvec::SmallVec;
use std::collections::{BTreeSet, VecDeque};

/// A tensor's blocks: one, unless it is a list (`count` > 1), so kept without a heap
/// allocation for each collective that stashes it.
type Blocks = SmallVec<[BlockId; 1]>;

/// A Work not yet waited that stashes a tensor's blocks (R18).
#[derive(Debug, Clone)]
struct ShelfEntry<E> {
    /// The collective's record in the engine's log.
    collective: usize,
    blocks: Blocks,
    end: E,
}

#[derive(Debug)]
pub struct TensorMemory<E> {
    allocator: CachingAllocator,
    lifetime: Lifetime,
    /// Each tensor's blocks while it is allocated, one per tensor of a list, in list order.
    blocks: Vec<Vec<BlockId>>,
    /// Each bucket buffer's op and block, in program order (an op's in bucket order): they
    /// live for the run (R25).
    bucket_blocks: Vec<(usize, BlockId)>,
    /// Works not yet waited, and Works the program holds, that hold each block.
    holders: HashMap<BlockId, u32>,
    /// Blocks whose tensor was deleted while Works still held them, with the recordStream
    /// events their `del` recorded (R19; none under the stash).
    deferred_free: Vec<(BlockId, Vec<E>)>,
    /// The output tensors of the collectives whose Work the program holds (`work = "w"`, not
    /// yet rebound): ProcessGroupNCCL's `collective` keeps them in the Work (`outputs_`, for
    /// `WorkNCCL::result`), and neither `wait()` nor the watchdog lets go of them; only the
    /// Work's end does (R18).
    handle_holds: Vec<(usize, Blocks)>,
    /// Streams other than its own on which a collective used each tensor (recordStream).
    recorded_streams: Vec<Vec<StreamRef>>,
    /// The tensor a name was bound to before a functional collective's call binds the name to
    /// its new result (R30): its blocks and recordStream streams, until the call returns and
    /// drops it.
    set_aside: Vec<(TensorId, Vec<BlockId>, Vec<StreamRef>)>,
    /// Freed blocks (a tensor's, all of a list's) waiting for their recordStream events.
    pending_frees: Vec<(Vec<BlockId>, Vec<E>)>,
    /// Per group, the shelf of R18.
    shelf: Vec<Vec<ShelfEntry<E>>>,
    /// Blocks handed out and not yet returned to the allocator, with their segment: a segment
    /// with none is wholly free, and a release gives it back.
    in_use: HashMap<BlockId, u32>,
    /// Segments allocated and not released.
    live_segments: BTreeSet<u32>,
    /// The allocations that live for the whole run and are not booked yet, in order: one per
    /// tensor of a list, then one per bucket buffer, with their bytes.
    up_front: VecDeque<(UpFront, u64)>,
    /// What the up-front allocations [`TensorMemory::new`] booked needed, in order.
    static_steps: Vec<(UpFront, AllocStep)>,
    /// Who the segment the last allocation booked went to, while the device may still refuse
    /// it ([`TensorMemory::refuse_new_segment`]).
    last_new_segment: Option<(Holder, BlockId)>,
    /// `expandable_segments:True`: a cache release neither synchronises nor frees (R20).
    expandable_segments: bool,
}

/// Where a tensor's block lies: a byte offset into a segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Place {
    pub segment: u32,
    pub offset_bytes: u64,
}

/// Which of a name's tensors [`TensorMemory::regions`] means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Binding {
    /// The one the name is bound to.
    Current,
    /// The one it was bound to before a functional collective's call, set aside until the
    /// call returns (R30).
    SetAside,
}

/// What is allocated before the program, for the whole run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpFront {
    /// A tensor that no `alloc` creates (one step per tensor of a list).
    Tensor(TensorId),
    /// The flattened buffer of one bucket of the bucketed collective at op `op` (the buckets
    /// numbered from 0, [`Scenario::call_sizes`]' sizes): DDP's Reducer allocates one per
    /// bucket when it is built (`bucket.gradients = at::empty(…)`), beside the gradients,
    /// which it copies in (`gradient_as_bucket_view=False`, its default) (R25).
    Bucket {
        op: usize,
        bucket: u32,
        size_bytes: u64,
    },
}

/// Why an allocation in the program got no block from the books: the cache release did not
/// make room (R20). `hw` gives the GPU's refusal of the new segment instead.
pub const CACHE_RELEASE_DID_NOT_HELP: &str = "even after releasing the cache (R20)";

/// The `out_of_memory` finding of rank `rank_id` when the `torch.empty` of `op` for
/// `size_bytes` (`list_position`: which tensor of a list, [`TensorMemory::list_position_text`])
/// got no block, `refused` saying why, after PyTorch's `OutOfMemoryError` words
/// `pytorch_text`: uncaught, it stops the rank's program. Both engines write it.
pub fn out_of_memory_finding(
    rank_id: u32,
    pytorch_text: &str,
    (op, size_bytes, list_position): (&Op, u64, &str),
    refused: &str,
) -> String {
    format!(
        "[Rank {rank_id}] CUDA out of memory. {pytorch_text} At {} (line {}), {size_bytes} B \
         asked{list_position}, {refused}; the rank's program stopped",
        op.display_name(),
        op.line,
    )
}

/// The `out_of_memory` finding of rank `rank_id` when the allocation before the program
/// `owner` (`list_position`: which tensor of a list) did not fit, after PyTorch's words
/// `pytorch_text`, and `refused` (`hw`: the GPU's refusal) after the rules: the rank's program
/// never starts. Both engines write it.
pub fn up_front_out_of_memory_finding(
    scenario: &Scenario,
    (rank_id, pytorch_text): (u32, &str),
    (owner, list_position): (UpFront, &str),
    refused: Option<&str>,
) -> String {
    let (what, why) = match owner {
        UpFront::Tensor(tensor) => {
            let declared = &scenario.tensors[tensor];
            let what = format!(
                "Tensor {:?}{list_position}, {} B",
                declared.name, declared.size_bytes
            );
            (what, "R17")
        }
        UpFront::Bucket {
            op,
            bucket,
            size_bytes,
        } => {
            let text = bucket_buffer_text(scenario, op, bucket);
            let what = format!("The {text}, {size_bytes} B");
            (what, "DDP's Reducer makes it when it is built; R17, R25")
        }
    };
    let refused = refused.map_or(String::new(), |refused| format!("; {refused}"));
    format!(
        "[Rank {rank_id}] CUDA out of memory. {pytorch_text} {what} asked before the program \
         ({why}){refused}; the rank's program never started",
    )
}

impl UpFront {
    /// The bytes the allocation asks for.
    pub fn size_bytes(self, scenario: &Scenario) -> u64 {
        match self {
            UpFront::Tensor(tensor) => scenario.tensors[tensor].size_bytes,
            UpFront::Bucket { size_bytes, .. } => size_bytes,
        }
    }
}

/// Which bucket buffer, for messages: `bucket buffer 2 of 3 of bucket (line 51)`.
pub fn bucket_buffer_text(scenario: &Scenario, op: usize, bucket: u32) -> String {
    let op = &scenario.ops[op];
    format!(
        "bucket buffer {} of {} of {} (line {})",
        bucket + 1,
        scenario.call_sizes(&op.kind).len(),
        op.display_name(),
        op.line,
    )
}

/// Who a block is handed to.
#[derive(Debug, Clone, Copy)]
enum Holder {
    /// The next tensor of a list (or the one tensor).
    Tensor(TensorId),
    /// A buffer of the next bucket of the bucketed collective at op `op`: it lives for the
    /// run.
    Bucket { op: usize },
}

/// What an allocation needs from the device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AllocStep {
    /// Served from the stream's cache (part of a segment already allocated).
    Cached(Place),
    /// A new segment of `bytes` must be allocated; the tensor lives at `place` in it.
    NewSegment {
        place: Place,
        bytes: u64,
    },
    /// The capacity is reached, or the device refused the new segment
    /// ([`TensorMemory::refuse_new_segment`]): wait for [`TensorMemory::pending_events`], call
    /// [`TensorMemory::release_cache`], then ask [`TensorMemory::allocate_after_release`]. With `synchronises` the release frees
    /// at least one segment with `cudaFree`, which waits for the whole device; without it,
    /// it waits for the pending events alone: expandable segments unmap pages without
    /// `cudaFree`, and pending frees may leave no segment wholly free (R20). Asked even where
    /// the request will not fit after it: PyTorch releases before it raises.
    NeedsRelease {
        synchronises: bool,
    },
    OutOfMemory,
}

impl<E: Copy> TensorMemory<E> {
    /// `rank`'s books, with every tensor that no `alloc` creates, then every bucket buffer of
    /// the bucketed collectives it runs, in program order, allocated up front on the default
    /// stream ([`TensorMemory::static_steps`] lists what that took), as `c10dsim torch` makes
    /// them. A rank that never runs a bucketed op (`ranks`, a group it is not a member of)
    /// never builds its DDP Reducer, so holds none of its buffers.
    pub fn new(scenario: &Scenario, rank: u32) -> TensorMemory<E> {
        let mut memory = TensorMemory::unbooked(scenario, rank);
        let steps = std::iter::from_fn(|| memory.allocate_up_front()).collect();
        memory.static_steps = steps;
        memory
    }

    /// `rank`'s books as [`TensorMemory::new`] makes them, but with none of the up-front
    /// allocations booked yet: [`TensorMemory::allocate_up_front`] books them one at a time,
    /// for an engine whose device may refuse a segment ([`TensorMemory::refuse_new_segment`]).
    pub fn unbooked(scenario: &Scenario, rank: u32) -> TensorMemory<E> {
        let mut memory = TensorMemory {
            allocator: CachingAllocator::new(scenario.memory.capacity_bytes),
            lifetime: scenario.memory.lifetime,
            blocks: vec![Vec::new(); scenario.tensors.len()],
            bucket_blocks: Vec::new(),
            holders: HashMap::default(),
            deferred_free: Vec::new(),
            handle_holds: Vec::new(),
            recorded_streams: vec![Vec::new(); scenario.tensors.len()],
            set_aside: Vec::new(),
            pending_frees: Vec::new(),
            shelf: vec![Vec::new(); scenario.groups.len()],
            in_use: HashMap::default(),
            live_segments: BTreeSet::new(),
            up_front: VecDeque::new(),
            static_steps: Vec::new(),
            last_new_segment: None,
            expandable_segments: scenario.memory.expandable_segments,
        };
        let elements = (scenario.tensors.iter().enumerate())
            .filter(|(_, declared)| !declared.dynamic)
            .flat_map(|(tensor, declared)| {
                (0..declared.count).map(move |_| (UpFront::Tensor(tensor), declared.size_bytes))
            });
        let buckets = (scenario.ops.iter())
            .filter(|op| {
                op.runs_on(rank)
                    && matches!(
                        op.kind,
                        OpKind::Collective {
                            batch: Batch::Bucketed { .. },
                            ..
                        }
                    )
            })
            .flat_map(|op| {
                (scenario.call_sizes(&op.kind).into_iter().zip(0..)).map(|(size_bytes, bucket)| {
                    let owner = UpFront::Bucket {
                        op: op.index,
                        bucket,
                        size_bytes,
                    };
                    (owner, size_bytes)
                })
            });
        memory.up_front = elements.chain(buckets).collect();
        memory
    }

    /// Books the next up-front allocation (one per tensor of a list, then per bucket buffer)
    /// and says what it needs; `None` once all are booked, or after the first that does not
    /// fit (nothing is freed before the program, so no release can help it, and
    /// [`Self::out_of_memory_text`] then says why): PyTorch raises at that `torch.empty`, and
    /// what comes after it is never made.
    pub fn allocate_up_front(&mut self) -> Option<(UpFront, AllocStep)> {
        let (owner, size_bytes) = self.up_front.pop_front()?;
        let holder = match owner {
            UpFront::Tensor(tensor) => Holder::Tensor(tensor),
            UpFront::Bucket { op, .. } => Holder::Bucket { op },
        };
        let step = self.allocate_for(holder, size_bytes, 0);
        if !matches!(step, AllocStep::Cached(_) | AllocStep::NewSegment { .. }) {
            self.up_front.clear();
        }
        Some((owner, step))
    }

    /// What the up-front allocations [`TensorMemory::new`] booked needed, in order, up to the
    /// first that does not fit (its step last, [`Self::allocate_up_front`]); empty after the
    /// first call.
    pub fn static_steps(&mut self) -> Vec<(UpFront, AllocStep)> {
        std::mem::take(&mut self.static_steps)
    }

    /// End events of the group's shelf.
    pub fn shelf_ends(&self, group: usize) -> Vec<E> {
        self.shelf[group].iter().map(|entry| entry.end).collect()
    }

    /// Events that recordStream frees wait for.
    pub fn pending_events(&self) -> Vec<E> {
        self.pending_frees
            .iter()
            .flat_map(|(_, events)| events.iter().copied())
            .collect()
    }

    pub fn peaks(&self) -> MemoryPeaks {
        self.allocator.peaks()
    }

    pub fn reserved_bytes(&self) -> u64 {
        self.allocator.reserved_bytes()
    }

    /// PyTorch's words for a request of `size_bytes` that does not fit (its
    /// `OutOfMemoryError`, after "CUDA out of memory. "): the size it tried to allocate (the
    /// segment, R17), the allocator's limit, what is allocated and what is reserved but not,
    /// in c10's `format_size`.
    pub fn out_of_memory_text(&self, size_bytes: u64, capacity_bytes: u64) -> String {
        format!(
            "Tried to allocate {}. {} allowed; {}",
            format_size_as_pytorch(crate::allocator::allocation_bytes(size_bytes)),
            format_size_as_pytorch(capacity_bytes),
            self.allocated_memory_text(),
        )
    }

    /// PyTorch's sentence of its `OutOfMemoryError` on what the allocator holds: what is
    /// allocated and what is reserved but not, in c10's `format_size`.
    pub fn allocated_memory_text(&self) -> String {
        let allocated = self.allocator.allocated_bytes();
        let unallocated = self.allocator.reserved_bytes() - allocated;
        format!(
            "Of the allocated memory {} is allocated by PyTorch, and {} is reserved by PyTorch \
             but unallocated.",
            format_size_as_pytorch(allocated),
            format_size_as_pytorch(unallocated),
        )
    }

    /// Where a tensor lives while it is allocated: one region, or for a list its blocks with
    /// adjacent ones joined (most of a list allocated at once lies end to end). `binding`
    /// says which tensor of the name: the one it is bound to, or the one a functional
    /// collective's call set aside (nothing when none is).
    pub fn regions(&self, tensor: TensorId, binding: Binding) -> impl Iterator<Item = Region> + '_ {
        let blocks: &[BlockId] = match binding {
            Binding::Current => &self.blocks[tensor],
            Binding::SetAside => (self.set_aside.iter())
                .find(|(t, _, _)| *t == tensor)
                .map_or(&[], |(_, blocks, _)| blocks),
        };
        let mut blocks = blocks
            .iter()
            .map(|&block| self.allocator.region(block))
            .peekable();
        std::iter::from_fn(move || {
            let mut region = blocks.next()?;
            while let Some(next) = blocks.next_if(|next| {
                next.segment == region.segment && next.start_bytes == region.end_bytes
            }) {
                region.end_bytes = next.end_bytes;
            }
            Some(region)
        })
    }

    /// Where bucket `bucket` (numbered from 0) of the bucketed collective at op `op` lives,
    /// with the buffer's number among all bucket buffers (in program order); `None` if it was
    /// never allocated (an up-front allocation before it did not fit).
    pub fn bucket_region(&self, op: usize, bucket: u32) -> Option<(u32, Region)> {
        let first = self.bucket_blocks.partition_point(|&(of, _)| of < op);
        let index = first + bucket as usize;
        let &(of, block) = self.bucket_blocks.get(index)?;
        (of == op).then(|| (index as u32, self.allocator.region(block)))
    }

    /// The op and bucket of bucket buffer number `index` ([`Self::bucket_region`]).
    pub fn bucket_of(&self, index: u32) -> (usize, u32) {
        let (op, _) = self.bucket_blocks[index as usize];
        let first = self.bucket_blocks.partition_point(|&(of, _)| of < op);
        (op, index - first as u32)
    }

    /// How many tensors of `tensor`'s list are allocated (1 for a plain tensor, once it is).
    pub fn allocated_tensors(&self, tensor: TensorId) -> u32 {
        self.blocks[tensor].len() as u32
    }

    /// Which tensor of a list of `count` an allocation that does not fit was for (the next one
    /// not made), as ` (tensor 7 of the list of 10)`, for the out-of-memory message; nothing
    /// for a plain tensor.
    pub fn list_position_text(&self, tensor: TensorId, count: u32) -> String {
        if count == 1 {
            return String::new();
        }
        let position = self.allocated_tensors(tensor) + 1;
        format!(" (tensor {position} of the list of {count})")
    }

    /// Where the first tensor of `tensor`'s list lives, while it is allocated.
    pub fn place(&self, tensor: TensorId) -> Option<Place> {
        let region = self.allocator.region(*self.blocks[tensor].first()?);
        Some(Place {
            segment: region.segment,
            offset_bytes: region.start_bytes,
        })
    }

    /// R19: blocks freed under recordStream return to their pool once their events passed,
    /// checked at each allocation.
    pub fn collect_pending(&mut self, mut passed: impl FnMut(E) -> bool) {
        let mut index = 0;
        while index < self.pending_frees.len() {
            if self.pending_frees[index].1.iter().all(|&ev| passed(ev)) {
                let (blocks, _) = self.pending_frees.swap_remove(index);
                for block in blocks {
                    self.return_block(block);
                }
            } else {
                index += 1;
            }
        }
    }

    /// `torch.empty` of `size_bytes` on `stream` (R17): the next tensor of `tensor`'s list (of
    /// [`TensorMemory::allocated_tensors`] so far), which gets a block of its own.
    pub fn allocate(&mut self, tensor: TensorId, size_bytes: u64, stream: StreamRef) -> AllocStep {
        self.allocate_for(Holder::Tensor(tensor), size_bytes, stream)
    }

    fn allocate_for(&mut self, holder: Holder, size_bytes: u64, stream: StreamRef) -> AllocStep {
        let reserved_before = self.allocator.reserved_bytes();
        self.last_new_segment = None;
        match self.allocator.allocate(size_bytes, stream) {
            Allocation::Cached(block) => AllocStep::Cached(self.hand_out(holder, block)),
            Allocation::NewSegment(block) => self.new_segment(holder, block, reserved_before),
            without_room => self.step_without_room(without_room),
        }
    }

    /// What a request the allocator found no room for (`without_room`: needs a release, or
    /// out of memory) needs from the device.
    fn step_without_room(&self, without_room: Allocation) -> AllocStep {
        match without_room {
            Allocation::NeedsRelease => AllocStep::NeedsRelease {
                synchronises: !self.expandable_segments,
            },
            // The release first waits for recordStream's events and returns those blocks
            // (`synchronize_and_free_events`), which may leave segments wholly free (R19, R20);
            // only a segment that `cudaFree` returns synchronises the device.
            Allocation::OutOfMemory if !self.pending_frees.is_empty() => AllocStep::NeedsRelease {
                synchronises: !self.expandable_segments
                    && !self.segments_free_after_pending().is_empty(),
            },
            Allocation::OutOfMemory => AllocStep::OutOfMemory,
            Allocation::Cached(_) | Allocation::NewSegment(_) => {
                unreachable!("{without_room:?} has room")
            }
        }
    }

    /// The device refused the segment the last allocation booked (its step was
    /// [`AllocStep::NewSegment`]; `cuMemAlloc`'s out of memory): PyTorch counts a segment only
    /// once `cudaMalloc` returned it, so the books drop it — the tensor's block, reserved and
    /// allocated bytes and their peaks as before that allocation — and say what PyTorch's
    /// `malloc` does next: release the cache and ask again ([`AllocStep::NeedsRelease`], R20),
    /// or raise where nothing is left to release.
    pub fn refuse_new_segment(&mut self) -> AllocStep {
        let (holder, block) =
            (self.last_new_segment.take()).expect("the last allocation booked a new segment");
        let handed = match holder {
            Holder::Tensor(tensor) => self.blocks[tensor].pop(),
            Holder::Bucket { .. } => self.bucket_blocks.pop().map(|(_, block)| block),
        };
        debug_assert_eq!(handed, Some(block), "the last block handed out");
        let segment = self.in_use.remove(&block).expect("handed out");
        self.live_segments.remove(&segment);
        let without_room = self.allocator.refuse_new_segment(block);
        self.step_without_room(without_room)
    }

    /// The allocation again after [`TensorMemory::release_cache`]: a new segment or out of
    /// memory, never a cached block, as PyTorch's retry (`alloc_block`) asks only `cudaMalloc`
    /// (R20).
    pub fn allocate_after_release(
        &mut self,
        tensor: TensorId,
        size_bytes: u64,
        stream: StreamRef,
    ) -> AllocStep {
        let reserved_before = self.allocator.reserved_bytes();
        self.last_new_segment = None;
        match self.allocator.allocate_after_release(size_bytes, stream) {
            Allocation::NewSegment(block) => {
                self.new_segment(Holder::Tensor(tensor), block, reserved_before)
            }
            _ => AllocStep::OutOfMemory,
        }
    }

    /// `block`, the first of a new segment, handed to `holder`.
    fn new_segment(&mut self, holder: Holder, block: BlockId, reserved_before: u64) -> AllocStep {
        let place = self.hand_out(holder, block);
        self.live_segments.insert(place.segment);
        self.last_new_segment = Some((holder, block));
        AllocStep::NewSegment {
            place,
            bytes: self.allocator.reserved_bytes() - reserved_before,
        }
    }

    /// R20's `release_cached_blocks`: pending recordStream frees are forced, then every wholly
    /// free segment goes back to the system. Returns those segments.
    pub fn release_cache(&mut self) -> Vec<u32> {
        for (blocks, _) in std::mem::take(&mut self.pending_frees) {
            for block in blocks {
                self.return_block(block);
            }
        }
        let released = self.allocator.release_cached();
        let segments = self.segments_free_after_pending();
        for segment in &segments {
            self.live_segments.remove(segment);
        }
        debug_assert_eq!(segments.len() as u32, released);
        segments
    }

    /// The segments a release gives back: every live one whose blocks in use are all pending
    /// recordStream frees (none in use: wholly free already).
    fn segments_free_after_pending(&self) -> Vec<u32> {
        let busy: BTreeSet<u32> = self
            .in_use
            .iter()
            .filter(|(block, _)| !self.pending_frees.iter().any(|(b, _)| b.contains(block)))
            .map(|(_, &segment)| segment)
            .collect();
        self.live_segments.difference(&busy).copied().collect()
    }

    fn hand_out(&mut self, holder: Holder, block: BlockId) -> Place {
        let region = self.allocator.region(block);
        match holder {
            Holder::Tensor(tensor) => self.blocks[tensor].push(block),
            Holder::Bucket { op } => self.bucket_blocks.push((op, block)),
        }
        self.in_use.insert(block, region.segment);
        Place {
            segment: region.segment,
            offset_bytes: region.start_bytes,
        }
    }

    /// Keeps the tensor (all of a list) of a collective of kind `kind`, run on an internal
    /// stream, alive as the lifetime rule says (R18, R19). Where the program holds the Work
    /// (`program_holds`) and the tensor is the Work's outputs (`outputs_`,
    /// [`CollectiveKind::outputs_are_its_tensor`]), they keep it until the Work goes, waited or
    /// not. A send or receive records its tensor on the NCCL stream whatever the collectives
    /// do: PyTorch's `pointToPoint` cannot know whether an `isend`'s Work will be waited, so
    /// it keeps recordStream (R19).
    pub fn keep_alive(
        &mut self,
        tensor: TensorId,
        group: usize,
        run_stream: StreamRef,
        (collective, end): (usize, E),
        (kind, program_holds): (CollectiveKind, bool),
    ) {
        if self.blocks[tensor].is_empty() {
            return;
        }
        let held = program_holds && kind.outputs_are_its_tensor();
        if held && self.lifetime != Lifetime::None {
            let blocks: Blocks = self.blocks[tensor].iter().copied().collect();
            for &block in &blocks {
                *self.holders.entry(block).or_default() += 1;
            }
            self.handle_holds.push((collective, blocks));
        }
        let lifetime = match self.lifetime {
            Lifetime::Stash if kind.is_point_to_point() => Lifetime::RecordStream,
            lifetime => lifetime,
        };
        match lifetime {
            Lifetime::Stash => {
                let blocks: Blocks = self.blocks[tensor].iter().copied().collect();
                for &block in &blocks {
                    *self.holders.entry(block).or_default() += 1;
                }
                self.shelf[group].push(ShelfEntry {
                    collective,
                    blocks,
                    end,
                });
            }
            Lifetime::RecordStream => {
                let streams = &mut self.recorded_streams[tensor];
                if !streams.contains(&run_stream) {
                    streams.push(run_stream);
                }
            }
            Lifetime::None => {}
        }
    }

    /// Whether Works of `group` that were never waited on hold blocks.
    pub fn has_shelved(&self, group: usize) -> bool {
        !self.shelf[group].is_empty()
    }

    /// The program let go of collective's Work (its name was bound to a newer Work): the
    /// Work's outputs go with it (R18).
    pub fn drop_handle(&mut self, collective: usize) {
        if let Some(position) = (self.handle_holds.iter()).position(|(c, _)| *c == collective) {
            let (_, blocks) = self.handle_holds.swap_remove(position);
            self.release_holders(blocks);
        }
    }

    /// R18: at a collective's enqueue, the stashes of the group's never-waited Works that
    /// completed leave the shelf, whether or not the program still holds the Work: the shelf
    /// is shared with the watchdog's copy of the Work, which hands it over for release once it
    /// sees the Work complete. A held Work keeps only its outputs ([`Self::keep_alive`]).
    pub fn release_shelf(&mut self, group: usize, mut completed: impl FnMut(E) -> bool) {
        let mut index = 0;
        while index < self.shelf[group].len() {
            let entry = &self.shelf[group][index];
            if completed(entry.end) {
                let entry = self.shelf[group].swap_remove(index);
                self.release_holders(entry.blocks);
            } else {
                index += 1;
            }
        }
    }

    /// R18: after `wait()`'s stream block the Work lets go of its stashed tensor.
    pub fn release_on_wait(&mut self, collective: usize) {
        for group in 0..self.shelf.len() {
            if let Some(position) = self.shelf[group]
                .iter()
                .position(|e| e.collective == collective)
            {
                let entry = self.shelf[group].remove(position);
                self.release_holders(entry.blocks);
                return;
            }
        }
    }

    /// The streams on which `del t` must record an event first (recordStream, R19).
    pub fn streams_to_record(&mut self, tensor: TensorId) -> Vec<StreamRef> {
        std::mem::take(&mut self.recorded_streams[tensor])
    }

    /// `del t` with the events recorded on [`TensorMemory::streams_to_record`]'s streams: each
    /// block (one per tensor of a list) returns to its pool once the last Work holding it let
    /// go and the events passed. Simplified: a block a Work still holds keeps the events of
    /// its `del`, where PyTorch records them when the Work lets go (R19).
    pub fn free(&mut self, tensor: TensorId, events: Vec<E>) {
        let blocks = std::mem::take(&mut self.blocks[tensor]);
        self.free_blocks(blocks, events);
    }

    /// `y = fcol.all_reduce(x)` (R30): the call makes a new tensor for `y` while the one `y`
    /// named before lives on until the call returns; that one is set aside, with the streams
    /// its `del` must record on (recordStream), so that the name's next allocation is the new
    /// tensor. Nothing to set aside before the name's first binding.
    pub fn set_aside(&mut self, tensor: TensorId) {
        let blocks = std::mem::take(&mut self.blocks[tensor]);
        if blocks.is_empty() {
            return;
        }
        let streams = std::mem::take(&mut self.recorded_streams[tensor]);
        self.set_aside.push((tensor, blocks, streams));
    }

    /// The streams on which dropping the tensor set aside for `tensor` must record an event
    /// first (recordStream, R19); `None` when nothing was set aside.
    pub fn set_aside_streams(&self, tensor: TensorId) -> Option<Vec<StreamRef>> {
        (self.set_aside.iter())
            .find(|(t, _, _)| *t == tensor)
            .map(|(_, _, streams)| streams.clone())
    }

    /// The call returned and the name is bound to its result: the tensor set aside for
    /// `tensor` is dropped as [`TensorMemory::free`] drops one, with the events recorded on
    /// [`TensorMemory::set_aside_streams`]' streams.
    pub fn free_set_aside(&mut self, tensor: TensorId, events: Vec<E>) {
        if let Some(position) = self.set_aside.iter().position(|(t, _, _)| *t == tensor) {
            let (_, blocks, _) = self.set_aside.swap_remove(position);
            self.free_blocks(blocks, events);
        }
    }

    fn free_blocks(&mut self, blocks: Vec<BlockId>, events: Vec<E>) {
        let (held, free): (Vec<BlockId>, Vec<BlockId>) =
            (blocks.into_iter()).partition(|block| self.holders.contains_key(block));
        (self.deferred_free).extend(held.into_iter().map(|block| (block, events.clone())));
        if events.is_empty() {
            for block in free {
                self.return_block(block);
            }
        } else if !free.is_empty() {
            self.pending_frees.push((free, events));
        }
    }

    fn release_holders(&mut self, blocks: Blocks) {
        for block in blocks {
            let count = self.holders.entry(block).or_default();
            *count = count.saturating_sub(1);
            if *count == 0 {
                self.holders.remove(&block);
                if let Some(position) = self.deferred_free.iter().position(|(b, _)| *b == block) {
                    let (_, events) = self.deferred_free.swap_remove(position);
                    if events.is_empty() {
                        self.return_block(block);
                    } else {
                        self.pending_frees.push((vec![block], events));
                    }
                }
            }
        }
    }

    fn return_block(&mut self, block: BlockId) {
        self.allocator.free(block);
        self.in_use.remove(&block);
    }
}

#[cfg(test)]
mod tests;
