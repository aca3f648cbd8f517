//! What the GPU side writes into records the host made long before, kept apart from them
//! ([`GpuTimes`]): a kernel's start and end, a stream wait's release, a collective's data
//! start and last rank.

use super::NEVER;

/// An unset value of what the GPU side writes ([`GpuTimes`]).
pub(super) trait Unset: Copy {
    const UNSET: Self;
}

impl Unset for u64 {
    const UNSET: u64 = NEVER;
}

/// What the GPU side writes into records the host made long before — a kernel's start and
/// end, a stream wait's release, a collective's data start — kept apart from those records,
/// indexed as they are (`Records`, engine/summary.rs), and copied into them when they are
/// resolved. The host runs hundreds of iterations ahead of its GPU (the launch queue), so that
/// a record is cold by the time its GPU fields are written; here the writes go densely, near
/// where the GPU side wrote last, and the vector grows as it writes (an index never written
/// reads unset).
#[derive(Debug)]
pub(super) struct GpuTimes<T> {
    base: usize,
    items: Vec<T>,
}

impl<T> Default for GpuTimes<T> {
    fn default() -> Self {
        GpuTimes {
            base: 0,
            items: Vec::new(),
        }
    }
}

impl<T: Unset> GpuTimes<T> {
    /// The value of record `index` (unset if never written).
    #[inline]
    pub(super) fn get(&self, index: usize) -> T {
        self.items
            .get(index - self.base)
            .copied()
            .unwrap_or(T::UNSET)
    }

    /// The value of record `index`, to write.
    #[inline]
    pub(super) fn get_mut(&mut self, index: usize) -> &mut T {
        let offset = index - self.base;
        if offset >= self.items.len() {
            self.items.resize(offset + 1, T::UNSET);
        }
        &mut self.items[offset]
    }

    pub(super) fn reserve_exact(&mut self, more: usize) {
        self.items.reserve_exact(more);
    }

    /// Drops the values of the `count` oldest records, returning them.
    pub(super) fn take_front(&mut self, count: usize) -> Vec<T> {
        self.base += count;
        if count >= self.items.len() {
            let mut taken = std::mem::take(&mut self.items);
            taken.resize(count, T::UNSET);
            return taken;
        }
        self.items.drain(..count).collect()
    }
}

/// A kernel's start and end (`NEVER`: not yet).
#[derive(Debug, Clone, Copy)]
pub(super) struct KernelTimes {
    pub(super) start_ns: u64,
    pub(super) end_ns: u64,
}

impl Unset for KernelTimes {
    const UNSET: KernelTimes = KernelTimes {
        start_ns: NEVER,
        end_ns: NEVER,
    };
}

/// When a collective's data started moving, and the last rank that arrived.
#[derive(Debug, Clone, Copy)]
pub(super) struct DataStart {
    pub(super) data_start_ns: u64,
    pub(super) last_rank: Option<u32>,
}

impl Unset for DataStart {
    const UNSET: DataStart = DataStart {
        data_start_ns: NEVER,
        last_rank: None,
    };
}
