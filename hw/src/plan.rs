//! Planning: which streams a rank needs, which communicator each collective uses, and how long
//! a downscale stand-in lasts (where each collective's kernel runs is `sim::pg`'s). Pure
//! functions of the scenario and the [`Layout`], tested without a GPU.

use crate::error::HwError;
use crate::options::{Layout, StandIn};
use sim::collective::NcclCount;
use sim::scenario::{CollectiveKind, GroupId, OpKind, Scenario};
use sim::timeline::{StreamInfo, StreamRef};

/// Largest number of timed events one run may use (a limit on every queue).
pub const MAX_EVENTS: usize = 4_000_000;

/// One process group as this rank sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupPlan {
    pub group: GroupId,
    pub name: String,
    /// This rank's position in the communicator.
    pub comm_rank: u32,
    /// Ranks in the communicator actually created (1 when downscaled).
    pub comm_size: u32,
    /// The group's internal NCCL stream (R9).
    pub stream: StreamRef,
    /// The group's timeout (R26, R29), or the run's override.
    pub timeout_ns: u64,
}

/// Everything the executor needs to know before the first op.
#[derive(Debug, Clone, PartialEq)]
pub struct RankPlan {
    pub rank: u32,
    /// Scenario streams first (index = [`StreamId`]), then one internal stream per group of
    /// this rank that runs collectives.
    pub streams: Vec<StreamInfo>,
    /// Per scenario group: `Some` when this rank is a member and calls collectives on it.
    pub groups: Vec<Option<GroupPlan>>,
    pub stand_in: Option<StandIn>,
    /// Upper bound of timed events one iteration records.
    pub events_per_iteration: usize,
}

impl RankPlan {
    /// The plan of `layout`'s rank (the groups' timeouts are the scenario's: `--timeout-ms` is
    /// applied to the scenario first, so that the lowering's waits see it too).
    pub fn new(scenario: &Scenario, layout: &Layout) -> Result<RankPlan, HwError> {
        let rank = layout.rank;
        // `sim::pg`'s layout: the scenario's streams, then one internal stream per group this
        // rank belongs to, in group order (R9), whether or not the program uses it.
        let streams = sim::pg::streams::rank_streams(scenario, rank);
        let downscaled = layout.world == 1;
        let groups: Vec<Option<GroupPlan>> = scenario
            .groups
            .iter()
            .zip(sim::pg::streams::group_streams(scenario, rank))
            .enumerate()
            .map(|(group, (declared, stream))| {
                let position = declared.ranks.iter().position(|&r| r == rank)?;
                Some(GroupPlan {
                    group,
                    name: declared.name.clone(),
                    comm_rank: if downscaled { 0 } else { position as u32 },
                    comm_size: if downscaled {
                        1
                    } else {
                        declared.ranks.len() as u32
                    },
                    stream: stream?,
                    timeout_ns: declared.timeout_ns,
                })
            })
            .collect();
        // The parser restricts a subgroup's collectives to its members, so every collective
        // this rank runs has a group plan.
        let nccl_streams = groups.iter().flatten().count();
        let delay_kernels = scenario
            .perturbations
            .iter()
            .filter(|p| p.ranks.contains(&rank) && !p.gpu_delay.is_none())
            .count();
        let events_per_iteration: usize = scenario
            .ops
            .iter()
            .filter(|op| op.runs_on(rank))
            .map(|op| match op.kind {
                // recordStream (R19): at most one event per internal stream.
                OpKind::Free { .. } => nccl_streams,
                _ => events_of(scenario, &op.kind),
            })
            .sum::<usize>()
            + 2 * delay_kernels;
        let total = events_per_iteration.saturating_mul(scenario.repeat as usize);
        if total > MAX_EVENTS {
            return Err(HwError::Unsupported(format!(
                "the run needs {total} timed CUDA events ({events_per_iteration} per iteration × {} \
                 repeats); the hardware backend keeps at most {MAX_EVENTS}: lower repeat",
                scenario.repeat
            )));
        }
        Ok(RankPlan {
            rank,
            streams,
            groups,
            stand_in: layout.stand_in,
            events_per_iteration,
        })
    }

    pub fn group(&self, group: GroupId) -> &GroupPlan {
        self.groups[group]
            .as_ref()
            .expect("the plan holds every group this rank calls collectives on")
    }
}

/// Timed events an op records (see the executor): the bound sizes the event pool.
fn events_of(scenario: &Scenario, kind: &OpKind) -> usize {
    match kind {
        // input-ready, start (= release of the syncStream wait), end, wait release
        OpKind::Collective { .. } | OpKind::Barrier { .. } => 4 * scenario.call_sizes(kind).len(),
        OpKind::BatchP2p { .. } => 4,
        OpKind::Gemm { .. } | OpKind::Kernel { .. } | OpKind::GpuSleep { .. } => 2,
        // The stream wait's release, the callback kernel's start and end, the child future.
        OpKind::GetFuture { .. } => 4,
        OpKind::Wait { .. }
        | OpKind::Mark { .. }
        | OpKind::RecordEvent { .. }
        | OpKind::WaitEvent { .. } => 1,
        OpKind::IsCompleted { .. }
        | OpKind::SetStream { .. }
        | OpKind::EventSync { .. }
        | OpKind::StreamSync { .. }
        | OpKind::DeviceSync
        | OpKind::Item { .. }
        | OpKind::HostSleep { .. }
        | OpKind::Alloc { .. }
        | OpKind::Free { .. }
        | OpKind::InitProcessGroup { .. }
        | OpKind::NewGroup { .. } => 0,
    }
}

/// What a collective call hands NCCL: element counts as the descriptor's
/// [`sim::collective::NcclCount`] says, for an in-place call on the scenario's tensor. The
/// tensor is the full buffer: all_gather's output (each rank sends its `1/n` slice),
/// reduce_scatter's input (each rank keeps a `1/n` slice), the all_reduce and broadcast buffer
/// (root = the group's first rank).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NcclCounts {
    /// Elements each rank sends (all_gather, reduce_scatter: the slice; others: the buffer).
    pub count: usize,
    /// Byte offset of this rank's slice inside the buffer (all_gather, reduce_scatter).
    pub slice_offset_bytes: u64,
}

pub fn nccl_counts(
    collective: CollectiveKind,
    tensor_bytes: u64,
    element_bytes: u64,
    comm_rank: u32,
    comm_size: u32,
) -> NcclCounts {
    let elements = tensor_bytes / element_bytes;
    match collective.descriptor().nccl_count {
        NcclCount::Whole => NcclCounts {
            count: elements as usize,
            slice_offset_bytes: 0,
        },
        NcclCount::Slice | NcclCount::PerPeer => {
            let slice = elements / u64::from(comm_size);
            NcclCounts {
                count: slice as usize,
                slice_offset_bytes: slice * element_bytes * u64::from(comm_rank),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::{HwOptions, Layout};

    const TWO_GROUPS: &str = r#"
torch = "2.5"
repeat = 3
[cluster]
ranks = 4
[tensors]
grad = "64MiB"
[streams]
side = { priority = "high" }
[groups]
pair = { ranks = [0, 1], high_priority = true }
[[op]]
all_reduce = "grad"
async_op = true
work = "w"
[[op]]
wait = "w"
[[op]]
all_gather = "grad"
group = "pair"
ranks = [0, 1]
[[op]]
mark = "m"
stream = "side"
"#;

    fn scenario(text: &str) -> Scenario {
        sim::scenario::parse("plan.toml", text).unwrap()
    }

    #[test]
    fn streams_and_groups_of_a_rank() {
        let scenario = scenario(TWO_GROUPS);
        let layout = Layout {
            rank: 1,
            world: 4,
            device: 1,
            launched: true,
            stand_in: None,
        };
        let plan = RankPlan::new(&scenario, &layout).unwrap();
        let names: Vec<&str> = plan.streams.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["default", "side", "nccl:world", "nccl:pair"]);
        assert!(plan.streams[1].high_priority);
        assert!(!plan.streams[2].high_priority);
        assert!(plan.streams[3].high_priority, "R9: the group asked for it");
        let pair = plan.group(1);
        assert_eq!((pair.comm_rank, pair.comm_size, pair.stream), (1, 2, 3));
        assert_eq!(plan.events_per_iteration, 4 + 1 + 4 + 1);

        // Rank 2 is not in `pair` and does not run the all_gather (ranks = [0, 1]).
        let rank2 = RankPlan::new(&scenario, &Layout { rank: 2, ..layout }).unwrap();
        assert!(rank2.groups[1].is_none());
        assert_eq!(rank2.streams.len(), 3);
    }

    #[test]
    fn downscaled_groups_are_one_rank_communicators() {
        let scenario = scenario(TWO_GROUPS);
        let layout = Layout::resolve(
            4,
            &HwOptions {
                downscale: crate::options::Downscale::RankZero(StandIn::Model),
                ..HwOptions::default()
            },
            1,
        )
        .unwrap();
        let plan = RankPlan::new(&scenario, &layout).unwrap();
        let world = plan.group(0);
        assert_eq!((world.comm_rank, world.comm_size), (0, 1));
        assert_eq!(plan.stand_in, Some(StandIn::Model));
    }

    #[test]
    fn a_subgroup_collective_skips_non_members() {
        let text = r#"
[cluster]
ranks = 2
[tensors]
t = "4KiB"
[groups]
solo = { ranks = [1] }
[[op]]
all_reduce = "t"
group = "solo"
"#;
        let layout = Layout::resolve(
            2,
            &HwOptions {
                downscale: crate::options::Downscale::RankZero(StandIn::Nccl),
                ..HwOptions::default()
            },
            1,
        )
        .unwrap();
        let plan = RankPlan::new(&scenario(text), &layout).unwrap();
        assert!(plan.groups[1].is_none());
        assert_eq!(plan.events_per_iteration, 0, "rank 0 does not run the op");
    }

    #[test]
    fn a_delay_kernel_takes_two_events_per_iteration() {
        let text = r#"
[cluster]
ranks = 2
[[op]]
kernel = { us = 5, sms = 1 }
label = "k"
[[perturb]]
ranks = [0]
before = "k"
gpu_delay_us = 10
[[perturb]]
ranks = [0]
before = "k"
host_delay_us = 10
"#;
        let layout = |rank| Layout {
            rank,
            world: 2,
            device: 0,
            launched: true,
            stand_in: None,
        };
        let delayed = RankPlan::new(&scenario(text), &layout(0)).unwrap();
        assert_eq!(
            delayed.events_per_iteration,
            2 + 2,
            "the kernel, then its delay"
        );
        let plain = RankPlan::new(&scenario(text), &layout(1)).unwrap();
        assert_eq!(
            plain.events_per_iteration, 2,
            "a host delay records no event"
        );
    }

    #[test]
    fn nccl_counts_per_collective() {
        use CollectiveKind::*;
        assert_eq!(nccl_counts(AllReduce, 1024, 4, 1, 4).count, 256);
        let gather = nccl_counts(AllGather, 1024, 4, 3, 4);
        assert_eq!((gather.count, gather.slice_offset_bytes), (64, 768));
        assert_eq!(nccl_counts(ReduceScatter, 1024, 2, 0, 1).count, 512);
    }
}
