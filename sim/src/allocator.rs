//! The CUDA caching allocator of one rank (R17, R20), as far as timing and reuse go.
//!
//! Memory comes from `cudaMalloc` in segments: small requests (up to 1 MiB) share 2 MiB segments,
//! requests under 10 MiB share 20 MiB segments, larger ones get their own, rounded up to 2 MiB —
//! as PyTorch's allocator does. Small and large requests have separate pools: a small request
//! never takes a block of a large segment, nor a large one of a small segment. A segment is split
//! into blocks; a freed block is cached for the stream it was allocated on and merges with free
//! neighbours. An allocation on stream S takes the smallest cached block of S in its pool that
//! fits, of equal sizes the one at the lowest address (the model has no device addresses:
//! segments are taken to lie in the order they were allocated), splitting off the rest when it
//! is at least 512 B (small pool) or more than 1 MiB (large pool) (R17); else it asks for a new
//! segment while the reserved total stays under the capacity.
//! When it would not, the allocator must first release its cache — PyTorch's
//! `release_cached_blocks`: synchronise the events of blocks still in use elsewhere, then
//! `cudaFree` every segment that is wholly free, which synchronises the whole device (R20) — and
//! try again, for a new segment only (PyTorch's retry is `alloc_block`, not the pool); only when
//! that fails too, or nothing was left to release, is it out of memory. A
//! cached block that is split among live tensors keeps its whole segment: that is fragmentation,
//! and why a large request can force a release although much is free.
//!
//! The engine carries out the stall; this type keeps the books: segments, blocks, pools,
//! reserved and allocated bytes, peaks.
//!
//! ```
//! use sim::allocator::{Allocation, CachingAllocator};
//! let mut pool = CachingAllocator::new(48 << 20);
//! let Allocation::NewSegment(a) = pool.allocate(30 << 20, 0) else { panic!() };
//! pool.free(a);
//! // Cached for stream 0: stream 1 would need the cache released first (R20) …
//! assert_eq!(pool.allocate(30 << 20, 1), Allocation::NeedsRelease);
//! // … while stream 0 reuses it at once (R17).
//! assert_eq!(pool.allocate(30 << 20, 0), Allocation::Cached(a));
//! ```

use serde::{Deserialize, Serialize};

/// Index of a block of this rank's allocator; stable while the block lives.
pub type BlockId = u32;

/// PyTorch rounds every request up to a multiple of 512 bytes.
const MIN_BLOCK_BYTES: u64 = 512;
const MIB: u64 = 1 << 20;
/// The largest small request: small requests have a pool of their own, of 2 MiB segments.
const SMALL_REQUEST_BYTES: u64 = MIB;
/// Large requests below this share 20 MiB segments.
const MIN_LARGE_SEGMENT_BYTES: u64 = 10 * MIB;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Allocation {
    /// A cached block of the same stream (R17).
    Cached(BlockId),
    /// A block of a new segment from `cudaMalloc`.
    NewSegment(BlockId),
    /// The capacity is reached and wholly free segments are cached: they must be released
    /// before the request is tried again (R20), even if it will not fit then either.
    NeedsRelease,
    /// The capacity is reached and nothing is left to release.
    OutOfMemory,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BlockState {
    InUse,
    Cached,
    /// Merged into a neighbour or returned with its segment.
    Gone,
}

#[derive(Debug, Clone)]
struct Block {
    segment: u32,
    offset_bytes: u64,
    size_bytes: u64,
    state: BlockState,
}

#[derive(Debug, Clone)]
struct Segment {
    size_bytes: u64,
    /// The stream whose pool its blocks return to.
    stream: u16,
    /// A segment of the small pool (2 MiB, for requests up to 1 MiB).
    small: bool,
    released: bool,
    /// Its live blocks, by offset.
    blocks: Vec<BlockId>,
}

/// Where a block lives: for the race detector, memory is (segment, byte range).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Region {
    pub segment: u32,
    pub start_bytes: u64,
    pub end_bytes: u64,
}

/// Peak memory of a rank, for reports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryPeaks {
    pub peak_reserved_bytes: u64,
    /// Of blocks in use, whole: a request rounded up to 512 B, plus a remainder too small to
    /// split off — as `torch.cuda.max_memory_allocated` counts them.
    pub peak_allocated_bytes: u64,
    /// Times the cache had to be released (`cudaFree`, R20).
    pub cache_releases: u32,
}

#[derive(Debug, Clone)]
pub struct CachingAllocator {
    capacity_bytes: u64,
    segments: Vec<Segment>,
    blocks: Vec<Block>,
    reserved_bytes: u64,
    allocated_bytes: u64,
    peaks: MemoryPeaks,
    /// The peaks before the last new segment was booked, for [`Self::refuse_new_segment`].
    peaks_before_new_segment: MemoryPeaks,
}

fn rounded(size_bytes: u64) -> u64 {
    size_bytes.max(1).div_ceil(MIN_BLOCK_BYTES) * MIN_BLOCK_BYTES
}

/// The `cudaMalloc` size for a request, as PyTorch sizes segments.
fn segment_bytes(size_bytes: u64) -> u64 {
    if size_bytes <= SMALL_REQUEST_BYTES {
        2 * MIB
    } else if size_bytes < MIN_LARGE_SEGMENT_BYTES {
        20 * MIB
    } else {
        size_bytes.div_ceil(2 * MIB) * 2 * MIB
    }
}

impl CachingAllocator {
    pub fn new(capacity_bytes: u64) -> CachingAllocator {
        CachingAllocator {
            capacity_bytes,
            segments: Vec::new(),
            blocks: Vec::new(),
            reserved_bytes: 0,
            allocated_bytes: 0,
            peaks: MemoryPeaks::default(),
            peaks_before_new_segment: MemoryPeaks::default(),
        }
    }

    /// Serves a request of `size_bytes` on `stream`.
    pub fn allocate(&mut self, size_bytes: u64, stream: u16) -> Allocation {
        let size = rounded(size_bytes);
        let small = size <= SMALL_REQUEST_BYTES;
        let best = self
            .blocks
            .iter()
            .enumerate()
            .filter(|(_, b)| b.state == BlockState::Cached && b.size_bytes >= size)
            .filter(|(_, b)| {
                let segment = &self.segments[b.segment as usize];
                segment.stream == stream && segment.small == small
            })
            // PyTorch's pool is ordered by (stream, size, address): among equal sizes the
            // lowest address, here the segment's place in allocation order, then the offset.
            .min_by_key(|(_, b)| (b.size_bytes, b.segment, b.offset_bytes))
            .map(|(index, _)| index as BlockId);
        if let Some(block) = best {
            self.take(block, size);
            return Allocation::Cached(block);
        }
        match self.new_segment(size, stream) {
            Some(block) => Allocation::NewSegment(block),
            None => self.without_room(),
        }
    }

    /// What a request that got no new segment needs: PyTorch's `malloc` releases every wholly
    /// free segment and retries whether or not that makes room; only the retry's failure
    /// raises.
    fn without_room(&self) -> Allocation {
        if (0..self.segments.len()).any(|index| self.wholly_free(index)) {
            Allocation::NeedsRelease
        } else {
            Allocation::OutOfMemory
        }
    }

    /// The device refused the segment whose first block is `block`, the one the last request
    /// booked ([`Allocation::NewSegment`], nothing booked since): PyTorch counts a segment only
    /// once `cudaMalloc` returned it, so the books drop it — reserved and allocated bytes and
    /// their peaks as before the request — and say what the request needs now, as
    /// [`Self::allocate`] says it where the capacity leaves no room.
    pub fn refuse_new_segment(&mut self, block: BlockId) -> Allocation {
        let segment = self.segments.pop().expect("a segment was booked");
        debug_assert_eq!(
            segment.blocks.first(),
            Some(&block),
            "the last segment booked"
        );
        self.reserved_bytes -= segment.size_bytes;
        self.allocated_bytes -= self.blocks[block as usize].size_bytes;
        // Its first block and the rest split off it, the last blocks made.
        self.blocks.truncate(block as usize);
        self.peaks.peak_reserved_bytes = self.peaks_before_new_segment.peak_reserved_bytes;
        self.peaks.peak_allocated_bytes = self.peaks_before_new_segment.peak_allocated_bytes;
        self.without_room()
    }

    /// The retry after [`CachingAllocator::release_cached`] (R20): PyTorch's
    /// `alloc_block(params, isRetry)`, a new segment or nothing. The pool is not searched again,
    /// though the release may have returned a fitting block to it (a recordStream free).
    pub fn allocate_after_release(&mut self, size_bytes: u64, stream: u16) -> Allocation {
        match self.new_segment(rounded(size_bytes), stream) {
            Some(block) => Allocation::NewSegment(block),
            None => Allocation::OutOfMemory,
        }
    }

    /// A new segment for a request of `size` bytes (rounded), its first block taken; `None`
    /// where the segment would take the reserved total past the capacity.
    fn new_segment(&mut self, size: u64, stream: u16) -> Option<BlockId> {
        let small = size <= SMALL_REQUEST_BYTES;
        let new_bytes = segment_bytes(size);
        if self.reserved_bytes + new_bytes > self.capacity_bytes {
            return None;
        }
        self.peaks_before_new_segment = self.peaks;
        self.reserved_bytes += new_bytes;
        self.peaks.peak_reserved_bytes = self.peaks.peak_reserved_bytes.max(self.reserved_bytes);
        let segment = self.segments.len() as u32;
        let block = self.blocks.len() as BlockId;
        self.blocks.push(Block {
            segment,
            offset_bytes: 0,
            size_bytes: new_bytes,
            state: BlockState::Cached,
        });
        self.segments.push(Segment {
            size_bytes: new_bytes,
            stream,
            small,
            released: false,
            blocks: vec![block],
        });
        self.take(block, size);
        Some(block)
    }

    fn wholly_free(&self, segment: usize) -> bool {
        let segment = &self.segments[segment];
        !segment.released
            && segment
                .blocks
                .iter()
                .all(|&b| self.blocks[b as usize].state == BlockState::Cached)
    }

    /// Marks `block` in use for a request of `size` bytes (rounded), splitting off the rest
    /// where PyTorch's `should_split` would: at least 512 B left in the small pool, more than
    /// 1 MiB in the large one.
    fn take(&mut self, block: BlockId, size: u64) {
        let remainder = self.blocks[block as usize].size_bytes - size;
        let small = self.segments[self.blocks[block as usize].segment as usize].small;
        let split = if small {
            remainder >= MIN_BLOCK_BYTES
        } else {
            remainder > SMALL_REQUEST_BYTES
        };
        if split {
            let (segment, offset) = {
                let b = &mut self.blocks[block as usize];
                b.size_bytes = size;
                (b.segment, b.offset_bytes + size)
            };
            let rest = self.blocks.len() as BlockId;
            self.blocks.push(Block {
                segment,
                offset_bytes: offset,
                size_bytes: remainder,
                state: BlockState::Cached,
            });
            let list = &mut self.segments[segment as usize].blocks;
            let position = list
                .iter()
                .position(|&b| b == block)
                .expect("in its segment");
            list.insert(position + 1, rest);
        }
        let b = &mut self.blocks[block as usize];
        b.state = BlockState::InUse;
        self.allocated_bytes += b.size_bytes;
        self.peaks.peak_allocated_bytes = self.peaks.peak_allocated_bytes.max(self.allocated_bytes);
    }

    /// Returns a block to its stream's pool, merged with free neighbours. The block's id stays
    /// valid until the block is merged into a neighbour or its segment is released.
    pub fn free(&mut self, block: BlockId) {
        let b = &mut self.blocks[block as usize];
        debug_assert_eq!(b.state, BlockState::InUse, "a block freed twice");
        b.state = BlockState::Cached;
        self.allocated_bytes -= b.size_bytes;
        let segment = b.segment as usize;
        // Merge runs of cached neighbours into their first block.
        let list = std::mem::take(&mut self.segments[segment].blocks);
        let mut merged: Vec<BlockId> = Vec::with_capacity(list.len());
        for id in list {
            let cached = self.blocks[id as usize].state == BlockState::Cached;
            if let Some(&previous) = merged.last() {
                if cached && self.blocks[previous as usize].state == BlockState::Cached {
                    let size = self.blocks[id as usize].size_bytes;
                    self.blocks[previous as usize].size_bytes += size;
                    self.blocks[id as usize].state = BlockState::Gone;
                    continue;
                }
            }
            merged.push(id);
        }
        self.segments[segment].blocks = merged;
    }

    /// `cudaFree`s every wholly free segment; returns how many went back.
    pub fn release_cached(&mut self) -> u32 {
        let mut released = 0;
        for index in 0..self.segments.len() {
            if !self.wholly_free(index) {
                continue;
            }
            let segment = &mut self.segments[index];
            segment.released = true;
            self.reserved_bytes -= segment.size_bytes;
            for &b in &segment.blocks {
                self.blocks[b as usize].state = BlockState::Gone;
            }
            released += 1;
        }
        self.peaks.cache_releases += 1;
        released
    }

    /// Where a block lives.
    pub fn region(&self, block: BlockId) -> Region {
        let b = &self.blocks[block as usize];
        Region {
            segment: b.segment,
            start_bytes: b.offset_bytes,
            end_bytes: b.offset_bytes + b.size_bytes,
        }
    }

    pub fn peaks(&self) -> MemoryPeaks {
        self.peaks
    }

    pub fn reserved_bytes(&self) -> u64 {
        self.reserved_bytes
    }

    /// Of blocks in use, whole (as [`MemoryPeaks::peak_allocated_bytes`] counts them).
    pub fn allocated_bytes(&self) -> u64 {
        self.allocated_bytes
    }
}

/// What PyTorch's out-of-memory error says it "tried to allocate" for a request: the segment
/// it asked `cudaMalloc` for (`get_allocation_size` of the rounded size), so 4 KiB read as
/// 2 MiB and 3 MiB as 20 MiB.
pub fn allocation_bytes(size_bytes: u64) -> u64 {
    segment_bytes(rounded(size_bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_are_sized_as_pytorch_does() {
        assert_eq!(segment_bytes(4096), 2 * MIB);
        assert_eq!(segment_bytes(3 * MIB), 20 * MIB);
        assert_eq!(segment_bytes(25 * MIB), 26 * MIB);
        // `get_allocation_size`: 20 MiB only below 10 MiB; 10 MiB itself gets its own.
        assert_eq!(segment_bytes(10 * MIB - 512), 20 * MIB);
        assert_eq!(segment_bytes(10 * MIB), 10 * MIB);
    }

    #[test]
    fn small_and_large_requests_keep_to_their_own_pools() {
        let mut pool = CachingAllocator::new(1 << 30);
        let Allocation::NewSegment(large) = pool.allocate(3 * MIB, 0) else {
            panic!()
        };
        // 17 MiB of the 20 MiB segment are cached, but a small request takes a 2 MiB segment.
        let Allocation::NewSegment(small) = pool.allocate(4096, 0) else {
            panic!()
        };
        assert_ne!(pool.region(small).segment, pool.region(large).segment);
        assert_eq!(pool.reserved_bytes(), 22 * MIB);
        pool.free(small);
        // The 2 MiB segment is wholly free and the smallest cached block that fits, yet a 1.5 MiB
        // request is large: it takes its place in the large segment.
        let Allocation::Cached(middle) = pool.allocate(3 * MIB / 2, 0) else {
            panic!()
        };
        assert_eq!(pool.region(middle).segment, pool.region(large).segment);
        assert_eq!(pool.reserved_bytes(), 22 * MIB);
    }

    #[test]
    fn allocated_bytes_count_whole_blocks_as_pytorch_does() {
        let mut pool = CachingAllocator::new(1 << 30);
        // 4 B take a 512 B block; 19 MiB the whole 20 MiB block (1 MiB left is not split).
        pool.allocate(4, 0);
        assert_eq!(pool.peaks().peak_allocated_bytes, 512);
        let Allocation::NewSegment(block) = pool.allocate(19 * MIB, 0) else {
            panic!()
        };
        assert_eq!(pool.peaks().peak_allocated_bytes, 20 * MIB + 512);
        pool.free(block);
        pool.allocate(MIB + 512, 0);
        assert_eq!(pool.peaks().peak_allocated_bytes, 20 * MIB + 512);
    }

    #[test]
    fn small_blocks_split_down_to_512_bytes_large_ones_above_1_mib() {
        let mut pool = CachingAllocator::new(1 << 30);
        // Three 600 KiB requests: the 2 MiB small segment is split each time (848 KiB are left
        // after the second), so the third fits in it too.
        for _ in 0..3 {
            assert!(!matches!(
                pool.allocate(600 << 10, 0),
                Allocation::NeedsRelease | Allocation::OutOfMemory
            ));
        }
        assert_eq!(pool.reserved_bytes(), 2 * MIB);
        // A 19 MiB request leaves exactly 1 MiB of its 20 MiB segment: not split, so the next
        // large request takes a new segment.
        let Allocation::NewSegment(block) = pool.allocate(19 * MIB, 0) else {
            panic!()
        };
        assert_eq!(pool.region(block).end_bytes, 20 * MIB);
        assert!(matches!(
            pool.allocate(MIB + 512, 0),
            Allocation::NewSegment(_)
        ));
    }

    #[test]
    fn a_cached_block_is_split_and_merged_back() {
        let mut pool = CachingAllocator::new(1 << 30);
        let Allocation::NewSegment(a) = pool.allocate(3 * MIB, 0) else {
            panic!()
        };
        // The 20 MiB segment's other 17 MiB serve the next request of the stream.
        let Allocation::Cached(b) = pool.allocate(5 * MIB, 0) else {
            panic!()
        };
        assert_eq!(pool.region(b).start_bytes, 3 * MIB);
        assert_eq!(pool.reserved_bytes(), 20 * MIB);
        pool.free(a);
        pool.free(b);
        // Merged again: one 20 MiB block that fits 18 MiB.
        assert_eq!(pool.allocate(18 * MIB, 0), Allocation::Cached(a));
        assert_eq!(pool.peaks().peak_allocated_bytes, 18 * MIB);
    }

    #[test]
    fn best_fit_ties_go_to_the_lowest_address_not_the_oldest_block() {
        let mut pool = CachingAllocator::new(1 << 30);
        let mut cached = |size_bytes| match pool.allocate(size_bytes, 0) {
            Allocation::Cached(block) | Allocation::NewSegment(block) => block,
            other => panic!("{other:?}"),
        };
        // One 20 MiB segment: x [0, 6), y [6, 8), z [8, 10), w [10, 20) MiB.
        let x = cached(6 * MIB);
        let _y = cached(2 * MIB);
        let z = cached(2 * MIB);
        let _w = cached(10 * MIB);
        pool.free(x);
        // u [0, 4) leaves a 2 MiB block at 4 MiB, newer than z's.
        let u = pool.allocate(4 * MIB, 0);
        pool.free(z);
        // Two cached 2 MiB blocks: PyTorch's pool, ordered by (stream, size, address), hands
        // out the one at 4 MiB.
        let Allocation::Cached(v) = pool.allocate(2 * MIB, 0) else {
            panic!()
        };
        assert_eq!(pool.region(v).start_bytes, 4 * MIB);
        // Observable: u's block cannot merge with v's, so 6 MiB need a new segment.
        let Allocation::Cached(u) = u else { panic!() };
        pool.free(u);
        assert!(matches!(
            pool.allocate(6 * MIB, 0),
            Allocation::NewSegment(_)
        ));
        assert_eq!(pool.reserved_bytes(), 40 * MIB);
    }

    #[test]
    fn a_live_block_keeps_its_segment_from_release() {
        let mut pool = CachingAllocator::new(40 * MIB);
        let Allocation::NewSegment(a) = pool.allocate(3 * MIB, 0) else {
            panic!()
        };
        let Allocation::Cached(b) = pool.allocate(3 * MIB, 0) else {
            panic!()
        };
        pool.free(a);
        // 20 MiB reserved, 17 MiB of it free but split by b: 30 MiB more does not fit and
        // nothing can be released.
        assert_eq!(pool.allocate(30 * MIB, 0), Allocation::OutOfMemory);
        pool.free(b);
        assert_eq!(pool.allocate(30 * MIB, 1), Allocation::NeedsRelease);
        assert_eq!(pool.release_cached(), 1);
        assert!(matches!(
            pool.allocate(30 * MIB, 1),
            Allocation::NewSegment(_)
        ));
        assert_eq!(pool.peaks().cache_releases, 1);
    }

    #[test]
    fn a_refused_segment_leaves_the_books_as_they_were() {
        let mut pool = CachingAllocator::new(1 << 30);
        let Allocation::NewSegment(a) = pool.allocate(30 * MIB, 0) else {
            panic!()
        };
        pool.free(a);
        let before = pool.peaks();
        // 3 MiB on another stream: a 20 MiB segment, split.
        let Allocation::NewSegment(b) = pool.allocate(3 * MIB, 1) else {
            panic!()
        };
        assert_eq!(pool.peaks().peak_reserved_bytes, 50 * MIB);
        // The device refused it: a's cached segment can be released before asking again.
        assert_eq!(pool.refuse_new_segment(b), Allocation::NeedsRelease);
        assert_eq!(pool.peaks(), before);
        assert_eq!(
            (pool.reserved_bytes(), pool.allocated_bytes()),
            (30 * MIB, 0)
        );
        // Asked again, it is booked as if the refused one had never been.
        assert_eq!(pool.allocate(3 * MIB, 1), Allocation::NewSegment(b));
        assert_eq!(pool.region(b).segment, 1);
        assert_eq!(pool.allocate(3 * MIB, 1), Allocation::Cached(b + 1));
        // Once a's segment is released, nothing is wholly free: a refusal cannot be helped.
        assert_eq!(pool.release_cached(), 1);
        let Allocation::NewSegment(c) = pool.allocate(40 * MIB, 1) else {
            panic!()
        };
        assert_eq!(pool.refuse_new_segment(c), Allocation::OutOfMemory);
        assert_eq!(pool.peaks().peak_reserved_bytes, 50 * MIB);
    }
}
