//! The SMs of one GPU and the kernels that share them (R7, R22).
//!
//! A kernel is a set of blocks; each block runs on one SM. The scheduler here is a fluid model
//! of the hardware block scheduler:
//!
//! - **GEMM-like kernels are elastic**: `work` SM·ns split into blocks of `block_work` SM·ns.
//!   They use as many SMs as they have blocks left (up to the whole GPU) and progress at one
//!   SM·ns per ns per SM held, so a GEMM that holds fewer SMs runs longer.
//! - **Rigid kernels** (`kernel { us, sms }`, `torch.cuda._sleep`) need `sms` blocks of fixed
//!   duration; they start once all their blocks fit and end `duration` later. (On hardware
//!   the first blocks would start earlier on the SMs free then; the end is the same, and two
//!   rigid kernels can never each hold a part of the SMs and wait for the other.)
//! - **NCCL kernels** hold one block per channel for their whole life (R22); the engine times
//!   their data movement (R16, R24) and scales it by the channels resident when data starts.
//! - Free SMs go to pending blocks in order of stream priority, then launch order (R7). Running
//!   blocks are never pre-empted. An elastic kernel gives SMs up only as its blocks retire: to a
//!   higher-priority kernel at the block boundaries (after `needed / held` of a block time), to
//!   any other kernel only once it has no blocks left to place (its tail).
//!
//! HBM bandwidth is not shared in this model: a kernel's speed depends on its SMs alone.
//!
//! ```
//! use sim::gpu::{KernelShape, SmScheduler};
//! let mut gpu = SmScheduler::new(132);
//! // A GEMM of 1 ms at the full GPU, in 4096 blocks, then an NCCL kernel of 16 channels.
//! gpu.submit(0, 1, false, KernelShape::elastic(1_000_000, 132, 4096));
//! gpu.submit(0, 2, false, KernelShape::Collective { channels: 16 });
//! let changes = gpu.rebalance(0);
//! assert_eq!(changes.started.to_vec(), vec![1]); // the GEMM took every SM; NCCL waits for its tail
//! assert!(changes.transfer_at_ns.unwrap() > 800_000);
//! ```

use smallvec::SmallVec;

/// Identifies a kernel to the scheduler (the engine uses its Timeline kernel index).
pub type KernelKey = u32;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KernelShape {
    Elastic {
        /// Work left, SM·ns.
        work_left: u64,
        /// Work of one block, SM·ns.
        block_work: u64,
        /// The most SMs it can use at once.
        max_sms: u32,
    },
    Rigid {
        sms: u32,
        duration_ns: u64,
    },
    Collective {
        channels: u32,
    },
}

impl KernelShape {
    /// A kernel that takes `duration_ns` on all `sms` SMs, made of `blocks` equal blocks.
    pub fn elastic(duration_ns: u64, sms: u32, blocks: u64) -> KernelShape {
        let work = duration_ns.saturating_mul(u64::from(sms)).max(1);
        KernelShape::Elastic {
            work_left: work,
            block_work: work.div_ceil(blocks.max(1)).max(1),
            max_sms: sms,
        }
    }
}

/// A kernel on the GPU. `kernels` keeps them in launch order, so precedence (R7) is the
/// high-priority ones in that order, then the others in that order.
#[derive(Debug, Clone)]
struct Resident {
    key: KernelKey,
    high_priority: bool,
    shape: KernelShape,
    held: u32,
    /// SMs held when the current rebalance began.
    held_before: u32,
    /// What [`Resident::wants`] was when the current rebalance began (its shape does not
    /// change during one).
    wanted: u32,
    started: bool,
    /// Rigid kernels: when every block is resident, their end is fixed.
    timed: bool,
}

impl Resident {
    /// SMs this kernel could use now.
    fn wants(&self) -> u32 {
        match self.shape {
            KernelShape::Elastic {
                work_left,
                block_work,
                max_sms,
            } => {
                let blocks_left = work_left.div_ceil(block_work);
                blocks_left.min(u64::from(max_sms)) as u32
            }
            KernelShape::Rigid { sms, .. } => sms,
            KernelShape::Collective { channels } => channels,
        }
    }
}

/// What a rebalance decided. A GPU holds a handful of kernels at once, so the lists live inline
/// (a rebalance runs at every kernel start and end: it allocates nothing).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Changes {
    /// Kernels that got their first SM now.
    pub started: SmallVec<[KernelKey; 4]>,
    /// Kernels whose end time is (re)computed: elastic kernels whose SMs changed (`u64::MAX`
    /// when they hold none: no end yet), rigid kernels that became fully resident.
    pub ends: SmallVec<[(KernelKey, u64); 4]>,
    /// When SMs will next move from an elastic kernel to a waiting one, if any waits.
    pub transfer_at_ns: Option<u64>,
}

/// SMs an elastic kernel will hand to a waiting one as its blocks retire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct PlannedTransfer {
    giver: KernelKey,
    taker: KernelKey,
    sms: u32,
}

/// Kernels a GPU holds at once without a heap allocation: a handful (a GEMM, an NCCL kernel or
/// two, a sleep). Inline, they sit beside the rest of the rank's state, one cache miss away
/// rather than two when thousands of ranks take turns.
const INLINE_KERNELS: usize = 4;

/// The SMs of one GPU. In the order of the fields (`repr(C)`): the few words every call reads,
/// then the kernels, so that a call on a cold scheduler touches as few cache lines as it can.
#[derive(Debug, Clone)]
#[repr(C)]
pub struct SmScheduler {
    sms: u32,
    updated_ns: u64,
    planned: Option<PlannedTransfer>,
    /// In launch order: a kernel joins at the end, and one that ends leaves a gap closed up.
    kernels: SmallVec<[Resident; INLINE_KERNELS]>,
}

impl SmScheduler {
    pub fn new(sms: u32) -> SmScheduler {
        SmScheduler {
            sms,
            kernels: SmallVec::new(),
            updated_ns: 0,
            planned: None,
        }
    }

    /// A kernel reached the head of its stream and asks for SMs; call [`rebalance`] after.
    ///
    /// [`rebalance`]: SmScheduler::rebalance
    pub fn submit(&mut self, now_ns: u64, key: KernelKey, high_priority: bool, shape: KernelShape) {
        self.progress(now_ns);
        let shape = match shape {
            KernelShape::Elastic {
                work_left,
                block_work,
                max_sms,
            } => KernelShape::Elastic {
                work_left,
                block_work,
                max_sms: max_sms.min(self.sms),
            },
            KernelShape::Rigid { sms, duration_ns } => KernelShape::Rigid {
                sms: sms.clamp(1, self.sms),
                duration_ns,
            },
            KernelShape::Collective { channels } => KernelShape::Collective {
                channels: channels.clamp(1, self.sms),
            },
        };
        self.kernels.push(Resident {
            key,
            high_priority,
            shape,
            held: 0,
            held_before: 0,
            wanted: 0,
            started: false,
            timed: false,
        });
    }

    /// A kernel ended: its SMs are free. Call [`rebalance`] after.
    ///
    /// [`rebalance`]: SmScheduler::rebalance
    pub fn finish(&mut self, now_ns: u64, key: KernelKey) {
        self.progress(now_ns);
        let Some(index) = self.kernels.iter().position(|k| k.key == key) else {
            return;
        };
        self.kernels.remove(index);
    }

    /// SMs a kernel holds.
    pub fn held(&self, key: KernelKey) -> u32 {
        self.kernels
            .iter()
            .find(|k| k.key == key)
            .map_or(0, |k| k.held)
    }

    /// Elastic kernels progress at one SM·ns per ns per SM held.
    fn progress(&mut self, now_ns: u64) {
        let elapsed = now_ns.saturating_sub(self.updated_ns);
        self.updated_ns = now_ns;
        if elapsed == 0 {
            return;
        }
        for kernel in &mut self.kernels {
            if let KernelShape::Elastic { work_left, .. } = &mut kernel.shape {
                *work_left = work_left.saturating_sub(elapsed * u64::from(kernel.held));
            }
        }
    }

    /// The planned transfer is due: SMs move from the elastic kernel to the waiting one, as
    /// its blocks retired. Call [`rebalance`] after.
    ///
    /// [`rebalance`]: SmScheduler::rebalance
    pub fn transfer(&mut self, now_ns: u64) {
        self.progress(now_ns);
        let Some(plan) = self.planned.take() else {
            return;
        };
        let kernels = self.kernels.as_mut_slice();
        let position = |key: KernelKey| kernels.iter().position(|k| k.key == key);
        let (Some(giver), Some(taker)) = (position(plan.giver), position(plan.taker)) else {
            return;
        };
        let room = kernels[taker].wants().saturating_sub(kernels[taker].held);
        let moved = plan.sms.min(kernels[giver].held).min(room);
        kernels[giver].held -= moved;
        kernels[taker].held += moved;
    }

    /// Hands free SMs to waiting blocks in precedence order and reports what changed.
    ///
    /// Inlined into the engine's one caller: the call and the move of `Changes` out of it cost
    /// instructions at every kernel start and end.
    #[inline]
    pub fn rebalance(&mut self, now_ns: u64) -> Changes {
        self.progress(now_ns);
        let kernels = self.kernels.as_mut_slice();
        let mut held = 0;
        let mut any_high_priority = false;
        for kernel in kernels.iter_mut() {
            kernel.held_before = kernel.held;
            kernel.wanted = kernel.wants();
            // Tails: an elastic kernel with fewer blocks left than SMs held frees the rest.
            if matches!(kernel.shape, KernelShape::Elastic { .. }) {
                kernel.held = kernel.held.min(kernel.wanted.max(1));
            }
            held += kernel.held;
            any_high_priority |= kernel.high_priority;
        }
        let mut free = self.sms - held;
        let mut changes = Changes::default();
        // The first kernel in precedence order that is still short of SMs: its index and key,
        // how many it lacks, and its priority.
        let mut waiting: Option<(usize, KernelKey, u32, bool)> = None;
        // Precedence (R7): the high-priority kernels in launch order, then the others.
        let passes: &[bool] = if any_high_priority {
            &[true, false]
        } else {
            &[false]
        };
        for &high_priority in passes {
            for (index, kernel) in kernels.iter_mut().enumerate() {
                if kernel.high_priority != high_priority {
                    continue;
                }
                let rigid_start =
                    matches!(kernel.shape, KernelShape::Rigid { .. }) && kernel.held == 0;
                // A rigid kernel starts with all its blocks resident: two rigid kernels that
                // each held part of the SMs would wait for each other for ever.
                if !rigid_start || free >= kernel.wanted {
                    let take = free.min(kernel.wanted.saturating_sub(kernel.held));
                    kernel.held += take;
                    free -= take;
                    if kernel.held > 0 && !kernel.started {
                        kernel.started = true;
                        changes.started.push(kernel.key);
                    }
                }
                if waiting.is_none() && kernel.held < kernel.wanted {
                    let lacks = kernel.wanted - kernel.held;
                    waiting = Some((index, kernel.key, lacks, kernel.high_priority));
                }
            }
        }
        // The giver that passes SMs to the waiting kernel first (the first of equals).
        let mut earliest: Option<(u64, KernelKey)> = None;
        for (index, kernel) in kernels.iter_mut().enumerate() {
            let previous = kernel.held_before;
            match kernel.shape {
                KernelShape::Elastic { work_left, .. } if kernel.held != previous => {
                    // With no SM left it makes no progress: its end is unknown (`u64::MAX`).
                    let end = match kernel.held {
                        0 => u64::MAX,
                        held => now_ns + work_left.div_ceil(u64::from(held)),
                    };
                    changes.ends.push((kernel.key, end));
                }
                KernelShape::Rigid { sms, duration_ns } if !kernel.timed && kernel.held == sms => {
                    kernel.timed = true;
                    changes.ends.push((kernel.key, now_ns + duration_ns));
                }
                _ => {}
            }
            let Some((_, _, lacks, taker_high_priority)) = waiting.filter(|w| w.0 != index) else {
                continue;
            };
            let Some(at_ns) = yield_time(kernel, lacks, taker_high_priority, now_ns) else {
                continue;
            };
            if earliest.is_none_or(|(best_ns, _)| at_ns < best_ns) {
                earliest = Some((at_ns, kernel.key));
            }
        }
        self.planned = None;
        if let (Some((_, taker, lacks, _)), Some((at_ns, giver))) = (waiting, earliest) {
            self.planned = Some(PlannedTransfer {
                giver,
                taker,
                sms: lacks,
            });
            changes.transfer_at_ns = Some(at_ns.max(now_ns + 1));
        }
        changes
    }
}

/// When elastic kernel `giver` will have passed SMs to a kernel that lacks `lacks` of them and
/// is of priority `taker_high_priority` (see the module doc); `None` if it holds none.
fn yield_time(giver: &Resident, lacks: u32, taker_high_priority: bool, now_ns: u64) -> Option<u64> {
    let KernelShape::Elastic {
        work_left,
        block_work,
        ..
    } = giver.shape
    else {
        return None;
    };
    let held = u64::from(giver.held);
    if held == 0 {
        return None;
    }
    let needed = u64::from(lacks).min(held);
    if taker_high_priority && !giver.high_priority {
        // Blocks retire at `held / block time` per ns; the next `needed` go to the taker.
        let block_ns = block_work;
        return Some(now_ns + (needed * block_ns).div_ceil(held));
    }
    // Otherwise the giver's own pending blocks come first: SMs free up only in its tail,
    // once fewer than `held − needed` blocks of work remain.
    let keep_work = (held - needed) * block_work;
    Some(now_ns + work_left.saturating_sub(keep_work).div_ceil(held))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gemm(duration_ns: u64) -> KernelShape {
        // 132 SMs, 4096 blocks: one block is 132·duration/4096 SM·ns.
        KernelShape::elastic(duration_ns, 132, 4096)
    }

    #[test]
    fn a_lone_gemm_takes_every_sm_and_its_duration() {
        let mut gpu = SmScheduler::new(132);
        gpu.submit(0, 1, false, gemm(1_000_000));
        let changes = gpu.rebalance(0);
        assert_eq!(changes.started.to_vec(), vec![1]);
        assert_eq!(changes.ends.to_vec(), vec![(1, 1_000_000)]);
        assert_eq!(gpu.held(1), 132);
        assert_eq!(changes.transfer_at_ns, None);
    }

    #[test]
    fn nccl_first_slows_the_gemm_by_its_channels_r22() {
        let mut gpu = SmScheduler::new(132);
        gpu.submit(0, 1, false, KernelShape::Collective { channels: 16 });
        gpu.submit(0, 2, false, gemm(1_000_000));
        let changes = gpu.rebalance(0);
        assert_eq!(changes.started.to_vec(), vec![1, 2]);
        assert_eq!(gpu.held(2), 116);
        // 132 ms·SM of work on 116 SMs.
        assert_eq!(
            changes.ends.to_vec(),
            vec![(2, (132_000_000u64).div_ceil(116))]
        );
        // The collective ends after 200 µs: the GEMM gets all SMs for the rest of its work.
        gpu.finish(200_000, 1);
        let changes = gpu.rebalance(200_000);
        let left = 132_000_000 - 116 * 200_000;
        assert_eq!(
            changes.ends.to_vec(),
            vec![(2, 200_000 + (left as u64).div_ceil(132))]
        );
    }

    #[test]
    fn normal_priority_nccl_waits_for_the_gemm_tail_r7() {
        let mut gpu = SmScheduler::new(132);
        gpu.submit(0, 1, false, gemm(1_000_000));
        gpu.rebalance(0);
        gpu.submit(10_000, 2, false, KernelShape::Collective { channels: 16 });
        let changes = gpu.rebalance(10_000);
        assert!(changes.started.is_empty());
        // The GEMM keeps its SMs until only (132 − 16) blocks of work are left.
        let block_work = (132_000_000u64).div_ceil(4096);
        let left = 132_000_000 - 132 * 10_000;
        let expected = 10_000 + (left - 116 * block_work).div_ceil(132);
        assert_eq!(changes.transfer_at_ns, Some(expected));
        gpu.transfer(expected);
        let changes = gpu.rebalance(expected);
        assert_eq!(changes.started.to_vec(), vec![2]);
        assert_eq!(gpu.held(2), 16);
        assert_eq!(gpu.held(1), 116);
    }

    #[test]
    fn high_priority_nccl_gets_sms_at_the_next_block_boundaries_r7() {
        let mut gpu = SmScheduler::new(132);
        gpu.submit(0, 1, false, gemm(1_000_000));
        gpu.rebalance(0);
        gpu.submit(10_000, 2, true, KernelShape::Collective { channels: 16 });
        let changes = gpu.rebalance(10_000);
        let block_work = (132_000_000u64).div_ceil(4096);
        // 16 of 132 resident blocks retire after 16/132 of a block time.
        assert_eq!(
            changes.transfer_at_ns,
            Some(10_000 + (16 * block_work).div_ceil(132))
        );
    }

    #[test]
    fn two_rigid_kernels_behind_a_collective_do_not_split_the_sms() {
        // A low-priority then a high-priority full-GPU kernel queue behind 16 NCCL channels:
        // neither takes the 116 free SMs alone, so when the channels end the high-priority one
        // gets all 132 (before, each held a part and waited for the other for ever).
        let mut gpu = SmScheduler::new(132);
        gpu.submit(0, 1, false, KernelShape::Collective { channels: 16 });
        gpu.submit(
            0,
            2,
            false,
            KernelShape::Rigid {
                sms: 132,
                duration_ns: 1_000,
            },
        );
        let changes = gpu.rebalance(0);
        assert_eq!(changes.started.to_vec(), vec![1]);
        gpu.submit(
            10,
            3,
            true,
            KernelShape::Rigid {
                sms: 132,
                duration_ns: 1_000,
            },
        );
        assert!(gpu.rebalance(10).started.is_empty());
        gpu.finish(20, 1);
        let changes = gpu.rebalance(20);
        assert_eq!(changes.started.to_vec(), vec![3]);
        assert_eq!(changes.ends.to_vec(), vec![(3, 1_020)]);
    }

    #[test]
    fn a_rigid_kernel_runs_its_duration_once_fully_resident() {
        let mut gpu = SmScheduler::new(8);
        gpu.submit(
            0,
            1,
            false,
            KernelShape::Rigid {
                sms: 6,
                duration_ns: 100,
            },
        );
        gpu.submit(
            0,
            2,
            false,
            KernelShape::Rigid {
                sms: 4,
                duration_ns: 50,
            },
        );
        // Kernel 2's 4 blocks do not fit beside kernel 1's 6: it starts once they do. Its end
        // is the same as if 2 of its blocks had run early (the last one decides), its start
        // is later than the hardware's first block (the price of never deadlocking).
        let changes = gpu.rebalance(0);
        assert_eq!(changes.started.to_vec(), vec![1]);
        assert_eq!(changes.ends.to_vec(), vec![(1, 100)]);
        gpu.finish(100, 1);
        let changes = gpu.rebalance(100);
        assert_eq!(changes.started.to_vec(), vec![2]);
        assert_eq!(changes.ends.to_vec(), vec![(2, 150)]);
    }
}
