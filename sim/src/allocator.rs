//! The CUDA caching allocator of one rank (R17, R20), as far as timing and reuse go.
//!
//! Freed blocks are cached per stream: an allocation on stream S takes the smallest cached block
//! of S that fits (R17), else asks `cudaMalloc` for a new segment while the reserved total stays
//! under the capacity. When it would not, the allocator must first release its cache — in
//! PyTorch `release_cached_blocks`: synchronise the events of blocks still in use elsewhere, then
//! `cudaFree` every cached segment, which synchronises the whole device (R20). The engine carries
//! out that stall; this type keeps the books: blocks, pools, reserved and allocated bytes, peaks.
//!
//! Sizes are rounded up to 512 B as PyTorch does; blocks are not split or merged.
//!
//! ```
//! use sim::allocator::{Allocation, CachingAllocator};
//! let mut pool = CachingAllocator::new(4 << 20);
//! let Allocation::NewSegment(a) = pool.allocate(3 << 20, 0) else { panic!() };
//! pool.free(a);
//! // Cached for stream 0: stream 1 would need the cache released first (R20) …
//! assert_eq!(pool.allocate(2 << 20, 1), Allocation::NeedsRelease);
//! // … while stream 0 reuses it at once (R17).
//! assert_eq!(pool.allocate(1 << 20, 0), Allocation::Cached(a));
//! ```

use serde::{Deserialize, Serialize};

/// Index of a block (a segment) of this rank's allocator.
pub type BlockId = u32;

/// PyTorch rounds every request up to a multiple of 512 bytes.
const MIN_BLOCK_BYTES: u64 = 512;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Allocation {
    /// A cached block of the same stream (R17).
    Cached(BlockId),
    /// A new segment from `cudaMalloc`.
    NewSegment(BlockId),
    /// The capacity is reached: cached blocks must be released first (R20).
    NeedsRelease,
    /// Even with the cache released the request does not fit.
    OutOfMemory,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BlockState {
    InUse,
    Cached,
    /// Returned to the system by `cudaFree`.
    Released,
}

#[derive(Debug, Clone)]
struct Block {
    size_bytes: u64,
    /// The stream whose pool it returns to.
    stream: u16,
    state: BlockState,
    /// Bytes the current user asked for.
    requested_bytes: u64,
}

/// Peak memory of a rank, for reports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryPeaks {
    pub peak_reserved_bytes: u64,
    pub peak_allocated_bytes: u64,
    /// Times the cache had to be released (`cudaFree`, R20).
    pub cache_releases: u32,
}

#[derive(Debug, Clone)]
pub struct CachingAllocator {
    capacity_bytes: u64,
    blocks: Vec<Block>,
    reserved_bytes: u64,
    allocated_bytes: u64,
    peaks: MemoryPeaks,
}

fn rounded(size_bytes: u64) -> u64 {
    size_bytes.max(1).div_ceil(MIN_BLOCK_BYTES) * MIN_BLOCK_BYTES
}

impl CachingAllocator {
    pub fn new(capacity_bytes: u64) -> CachingAllocator {
        CachingAllocator {
            capacity_bytes,
            blocks: Vec::new(),
            reserved_bytes: 0,
            allocated_bytes: 0,
            peaks: MemoryPeaks::default(),
        }
    }

    /// Serves a request of `size_bytes` on `stream`.
    pub fn allocate(&mut self, size_bytes: u64, stream: u16) -> Allocation {
        let size = rounded(size_bytes);
        let best = self
            .blocks
            .iter()
            .enumerate()
            .filter(|(_, b)| b.state == BlockState::Cached && b.stream == stream)
            .filter(|(_, b)| b.size_bytes >= size)
            .min_by_key(|(index, b)| (b.size_bytes, *index))
            .map(|(index, _)| index);
        if let Some(index) = best {
            self.take(index, size_bytes);
            return Allocation::Cached(index as BlockId);
        }
        if self.reserved_bytes + size > self.capacity_bytes {
            let releasable: u64 = self
                .blocks
                .iter()
                .filter(|b| b.state == BlockState::Cached)
                .map(|b| b.size_bytes)
                .sum();
            return if self.reserved_bytes - releasable + size <= self.capacity_bytes {
                Allocation::NeedsRelease
            } else {
                Allocation::OutOfMemory
            };
        }
        self.reserved_bytes += size;
        self.blocks.push(Block {
            size_bytes: size,
            stream,
            state: BlockState::Cached,
            requested_bytes: 0,
        });
        let index = self.blocks.len() - 1;
        self.take(index, size_bytes);
        self.peaks.peak_reserved_bytes = self.peaks.peak_reserved_bytes.max(self.reserved_bytes);
        Allocation::NewSegment(index as BlockId)
    }

    fn take(&mut self, index: usize, size_bytes: u64) {
        let block = &mut self.blocks[index];
        block.state = BlockState::InUse;
        block.requested_bytes = size_bytes;
        self.allocated_bytes += size_bytes;
        self.peaks.peak_allocated_bytes = self.peaks.peak_allocated_bytes.max(self.allocated_bytes);
    }

    /// Returns a block to its stream's pool.
    pub fn free(&mut self, block: BlockId) {
        let block = &mut self.blocks[block as usize];
        debug_assert_eq!(block.state, BlockState::InUse, "a block freed twice");
        block.state = BlockState::Cached;
        self.allocated_bytes -= block.requested_bytes;
        block.requested_bytes = 0;
    }

    /// `cudaFree`s every cached block; returns how many segments went back.
    pub fn release_cached(&mut self) -> u32 {
        let mut released = 0;
        for block in &mut self.blocks {
            if block.state == BlockState::Cached {
                block.state = BlockState::Released;
                self.reserved_bytes -= block.size_bytes;
                released += 1;
            }
        }
        self.peaks.cache_releases += 1;
        released
    }

    pub fn peaks(&self) -> MemoryPeaks {
        self.peaks
    }

    pub fn reserved_bytes(&self) -> u64 {
        self.reserved_bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn best_fit_within_the_stream_pool() {
        let mut pool = CachingAllocator::new(1 << 30);
        let Allocation::NewSegment(big) = pool.allocate(8 << 20, 0) else {
            panic!()
        };
        let Allocation::NewSegment(small) = pool.allocate(2 << 20, 0) else {
            panic!()
        };
        pool.free(big);
        pool.free(small);
        assert_eq!(pool.allocate(1 << 20, 0), Allocation::Cached(small));
        assert_eq!(pool.allocate(1 << 20, 0), Allocation::Cached(big));
        assert_eq!(pool.reserved_bytes(), 10 << 20);
        assert_eq!(pool.peaks().peak_allocated_bytes, 10 << 20);
    }

    #[test]
    fn capacity_forces_a_release_then_out_of_memory() {
        let mut pool = CachingAllocator::new(10 << 20);
        let Allocation::NewSegment(a) = pool.allocate(6 << 20, 0) else {
            panic!()
        };
        pool.free(a);
        // 6 MiB cached on stream 0; 6 MiB on stream 1 does not fit beside it.
        assert_eq!(pool.allocate(6 << 20, 1), Allocation::NeedsRelease);
        assert_eq!(pool.release_cached(), 1);
        assert_eq!(pool.reserved_bytes(), 0);
        assert!(matches!(
            pool.allocate(6 << 20, 1),
            Allocation::NewSegment(_)
        ));
        assert_eq!(pool.allocate(6 << 20, 1), Allocation::OutOfMemory);
        assert_eq!(pool.peaks().cache_releases, 1);
    }

    #[test]
    fn requests_round_to_512_bytes() {
        let mut pool = CachingAllocator::new(1024);
        assert!(matches!(pool.allocate(1, 0), Allocation::NewSegment(_)));
        assert!(matches!(pool.allocate(513, 0), Allocation::OutOfMemory));
    }
}
