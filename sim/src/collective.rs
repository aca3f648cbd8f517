//! One descriptor per collective kind: everything that differs between `all_reduce`,
//! `all_gather`, `reduce_scatter`, `broadcast`, `all_to_all`, `send`, `recv` and
//! `batch_isend_irecv` — the scenario key, PyTorch's names for the call and its Work, NCCL's
//! kernel word, how a ring moves the bytes (R24), the NCCL function `NCCL_ALGO` / `NCCL_PROTO`
//! name, how NCCL counts a rank's elements, the Work's `NumelIn`/`NumelOut` and the kind the
//! other ranks must issue (R16) — in one table, so that the parser, the cost models, the
//! Timeline and `hw` read the same facts instead of matching on the kind each in its own way.
//!
//! Adding a kind: a variant of [`CollectiveKind`] and its row in [`DESCRIPTORS`]; the compiler
//! then points at the few `match`es that must say how the kind runs (`hw`'s NCCL call) and what
//! other tools call it (the Flight Recorder, torch.profiler). ARCHITECTURE.md ("Adding a
//! collective kind") lists the string tables, the PyTorch engine and the docs it does not point
//! at.

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CollectiveKind {
    AllReduce,
    AllGather,
    ReduceScatter,
    Broadcast,
    AllToAll,
    Send,
    Recv,
    BatchP2p,
}

/// How a ring moves a collective's bytes over `n` ranks (R24): the number of α-costed steps
/// and the fraction of the full size each rank sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RingTraffic {
    /// Reduce-scatter then all-gather: `2(n−1)` steps, `2(n−1)/n` of the size.
    ReduceThenGather,
    /// One pass: `n−1` steps, `(n−1)/n` of the (gathered) size.
    OnePass,
    /// A pipelined chain from the root: `n−1` steps, the whole size through every link.
    Chain,
    /// One transfer between two ranks: one step, the whole size.
    PointToPoint,
}

impl RingTraffic {
    /// Ring steps over `ranks` ranks.
    pub fn steps(self, ranks: u64) -> u64 {
        let hops = ranks.saturating_sub(1);
        match self {
            RingTraffic::ReduceThenGather => 2 * hops,
            RingTraffic::OnePass | RingTraffic::Chain => hops,
            RingTraffic::PointToPoint => hops.min(1),
        }
    }

    /// The fraction of the collective's full size each rank sends over `ranks` ranks.
    pub fn volume_factor(self, ranks: u64) -> f64 {
        let n = ranks as f64;
        match self {
            RingTraffic::ReduceThenGather => 2.0 * (n - 1.0) / n,
            RingTraffic::OnePass => (n - 1.0) / n,
            RingTraffic::Chain | RingTraffic::PointToPoint => 1.0,
        }
    }
}

/// NCCL's collective functions, as `NCCL_ALGO` / `NCCL_PROTO` prefixes name them
/// (`allreduce:tree`), in NCCL's order. Reduce has no scenario kind; a prefix may still name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum NcclFunction {
    Broadcast,
    Reduce,
    AllGather,
    ReduceScatter,
    AllReduce,
}

impl NcclFunction {
    pub const ALL: [NcclFunction; 5] = [
        NcclFunction::Broadcast,
        NcclFunction::Reduce,
        NcclFunction::AllGather,
        NcclFunction::ReduceScatter,
        NcclFunction::AllReduce,
    ];

    /// The name NCCL accepts as a prefix (case-insensitively).
    pub fn nccl_name(self) -> &'static str {
        match self {
            NcclFunction::Broadcast => "Broadcast",
            NcclFunction::Reduce => "Reduce",
            NcclFunction::AllGather => "AllGather",
            NcclFunction::ReduceScatter => "ReduceScatter",
            NcclFunction::AllReduce => "AllReduce",
        }
    }

    pub fn index(self) -> usize {
        self as usize
    }
}

/// How NCCL counts a rank's elements for a tensor of the collective's full size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NcclCount {
    /// The whole tensor (all_reduce, broadcast).
    Whole,
    /// One rank's slice of it (all_gather's input, reduce_scatter's output).
    Slice,
    /// One slice per peer, each sent to and received from that peer (all_to_all: NCCL has no
    /// all-to-all call; PyTorch issues a send and a receive per peer inside one NCCL group).
    PerPeer,
}

/// Which of a Work's tensors PyTorch counts as one rank's slice of the collective's full size
/// (`NumelIn`/`NumelOut` of the watchdog's `WorkNCCL(…)` and the Flight Recorder's sizes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkNumel {
    /// Input and output are the whole tensor.
    Whole,
    /// The input is one rank's slice, the output the whole (all_gather).
    InputSlice,
    /// The input is the whole, the output one rank's slice (reduce_scatter).
    OutputSlice,
    /// Input and output are the whole, cut into one equal slice per rank (all_to_all_single).
    WholeInSlices,
}

impl WorkNumel {
    /// `(NumelIn, NumelOut)` of a collective over `numel` elements in a group of `members`.
    pub fn of(self, numel: u64, members: u64) -> (u64, u64) {
        let (numel_in, numel_out) = self.shares(members);
        (numel_in.of(numel), numel_out.of(numel))
    }

    /// How `NumelIn` and `NumelOut` follow from the call's element count in a group of
    /// `members`. Where the tensor is cut into one slice per rank, the sliced side of it is
    /// what the call is given: the remainder of a size the ranks do not divide is left out, as
    /// the PyTorch interpreter (`python/c10dsim/torch/interpreter.py`) leaves it out.
    pub fn shares(self, members: u64) -> (NumelShare, NumelShare) {
        let members = members.max(1);
        let whole = NumelShare::Share { slices: 1, kept: 1 };
        let slice = NumelShare::Share {
            slices: members,
            kept: 1,
        };
        let sliced_whole = NumelShare::Share {
            slices: members,
            kept: members,
        };
        match self {
            WorkNumel::Whole => (whole, whole),
            WorkNumel::InputSlice => (slice, sliced_whole),
            WorkNumel::OutputSlice => (sliced_whole, slice),
            WorkNumel::WholeInSlices => (sliced_whole, sliced_whole),
        }
    }
}

/// One of a Work's element counts (`NumelIn` or `NumelOut`) as a function of its call's
/// element count; serialised for the PyTorch engine (`op_works` of the resolved JSON,
/// docs/torch.md), which evaluates it and decides nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum NumelShare {
    /// This count whatever the call moves.
    Fixed(u64),
    /// `numel / slices * kept`: `kept` of the `slices` equal slices of the call's elements.
    Share { slices: u64, kept: u64 },
}

impl NumelShare {
    /// The count for a call of `numel` elements.
    pub fn of(self, numel: u64) -> u64 {
        match self {
            NumelShare::Fixed(count) => count,
            NumelShare::Share { slices, kept } => numel / slices * kept,
        }
    }
}

/// The facts of one collective kind.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Descriptor {
    pub kind: CollectiveKind,
    /// The scenario key (`all_reduce = "grad"`) and the functional collective's name.
    pub key: &'static str,
    /// The `OpType` PyTorch prints for the Work.
    pub op_type: &'static str,
    /// The word in NCCL's device kernel names (`ncclDevKernel_AllReduce_Sum_f32_RING_LL`).
    pub kernel_word: &'static str,
    /// Whether the kernel's name carries the dtype, algorithm and protocol
    /// (`…_AllReduce_Sum_f32_RING_LL`); NCCL's send-receive kernel is named `…_SendRecv` alone.
    pub kernel_name_is_specialised: bool,
    /// The op torch.profiler shows on the CPU row.
    pub host_name: &'static str,
    pub ring: RingTraffic,
    /// The NCCL function that runs it, whose `NCCL_ALGO` / `NCCL_PROTO` entries apply; `None`
    /// for sends and receives (all_to_all is made of them), which `NCCL_ALGO` does not touch.
    pub nccl_function: Option<NcclFunction>,
    pub nccl_count: NcclCount,
    pub work_numel: WorkNumel,
    /// The kind the other ranks must issue at the same SeqNum (R16): the same one for a
    /// collective, a receive for a send and a send for a receive.
    pub counterpart: CollectiveKind,
}

/// Bytes of `dist.barrier()`'s all_reduce: ProcessGroupNCCL::barrier reduces
/// `at::zeros({1}, kFloat)`, one f32 element (R14).
pub const BARRIER_BYTES: u64 = 4;

/// The `OpType` of a Work that coalesces several calls: a `batch_isend_irecv`'s, a
/// `_coalescing_manager` block's (R25).
pub const COALESCED_OP_TYPE: &str = "COALESCED";

/// Every kind's descriptor, in [`CollectiveKind`] order.
pub const DESCRIPTORS: [Descriptor; 8] = [
    Descriptor {
        kind: CollectiveKind::AllReduce,
        key: "all_reduce",
        op_type: "ALLREDUCE",
        kernel_word: "AllReduce_Sum",
        kernel_name_is_specialised: true,
        host_name: "c10d::allreduce_",
        ring: RingTraffic::ReduceThenGather,
        nccl_function: Some(NcclFunction::AllReduce),
        nccl_count: NcclCount::Whole,
        work_numel: WorkNumel::Whole,
        counterpart: CollectiveKind::AllReduce,
    },
    Descriptor {
        kind: CollectiveKind::AllGather,
        key: "all_gather",
        op_type: "_ALLGATHER_BASE",
        kernel_word: "AllGather",
        kernel_name_is_specialised: true,
        host_name: "c10d::_allgather_base_",
        ring: RingTraffic::OnePass,
        nccl_function: Some(NcclFunction::AllGather),
        nccl_count: NcclCount::Slice,
        work_numel: WorkNumel::InputSlice,
        counterpart: CollectiveKind::AllGather,
    },
    Descriptor {
        kind: CollectiveKind::ReduceScatter,
        key: "reduce_scatter",
        op_type: "_REDUCE_SCATTER_BASE",
        kernel_word: "ReduceScatter_Sum",
        kernel_name_is_specialised: true,
        host_name: "c10d::_reduce_scatter_base_",
        ring: RingTraffic::OnePass,
        nccl_function: Some(NcclFunction::ReduceScatter),
        nccl_count: NcclCount::Slice,
        work_numel: WorkNumel::OutputSlice,
        counterpart: CollectiveKind::ReduceScatter,
    },
    Descriptor {
        kind: CollectiveKind::Broadcast,
        key: "broadcast",
        op_type: "BROADCAST",
        kernel_word: "Broadcast",
        kernel_name_is_specialised: true,
        host_name: "c10d::broadcast_",
        ring: RingTraffic::Chain,
        nccl_function: Some(NcclFunction::Broadcast),
        nccl_count: NcclCount::Whole,
        work_numel: WorkNumel::Whole,
        counterpart: CollectiveKind::Broadcast,
    },
    Descriptor {
        kind: CollectiveKind::AllToAll,
        key: "all_to_all",
        op_type: "ALLTOALL_BASE",
        // PyTorch's all_to_all_single is NCCL sends and receives in one group: one
        // send-receive kernel.
        kernel_word: "SendRecv",
        kernel_name_is_specialised: false,
        host_name: "c10d::alltoall_base_",
        ring: RingTraffic::OnePass,
        nccl_function: None,
        nccl_count: NcclCount::PerPeer,
        work_numel: WorkNumel::WholeInSlices,
        counterpart: CollectiveKind::AllToAll,
    },
    Descriptor {
        kind: CollectiveKind::Send,
        key: "send",
        op_type: "SEND",
        kernel_word: "SendRecv",
        kernel_name_is_specialised: false,
        host_name: "c10d::send",
        ring: RingTraffic::PointToPoint,
        nccl_function: None,
        nccl_count: NcclCount::Whole,
        work_numel: WorkNumel::Whole,
        counterpart: CollectiveKind::Recv,
    },
    Descriptor {
        kind: CollectiveKind::Recv,
        key: "recv",
        op_type: "RECV",
        kernel_word: "SendRecv",
        kernel_name_is_specialised: false,
        host_name: "c10d::recv_",
        ring: RingTraffic::PointToPoint,
        nccl_function: None,
        nccl_count: NcclCount::Whole,
        work_numel: WorkNumel::Whole,
        counterpart: CollectiveKind::Send,
    },
    Descriptor {
        kind: CollectiveKind::BatchP2p,
        key: "batch_isend_irecv",
        // One coalesced Work for the whole batch, as `_coalescing_manager` returns.
        op_type: COALESCED_OP_TYPE,
        kernel_word: "SendRecv",
        kernel_name_is_specialised: false,
        host_name: "c10d::batch_isend_irecv",
        ring: RingTraffic::PointToPoint,
        nccl_function: None,
        nccl_count: NcclCount::Whole,
        work_numel: WorkNumel::Whole,
        counterpart: CollectiveKind::BatchP2p,
    },
];

impl CollectiveKind {
    pub const ALL: [CollectiveKind; 8] = [
        CollectiveKind::AllReduce,
        CollectiveKind::AllGather,
        CollectiveKind::ReduceScatter,
        CollectiveKind::Broadcast,
        CollectiveKind::AllToAll,
        CollectiveKind::Send,
        CollectiveKind::Recv,
        CollectiveKind::BatchP2p,
    ];

    /// A send, a receive or a batch of them: PyTorch numbers such calls apart from the
    /// collectives of their process group (`p2p_seq_id`, the Work's `SeqNum`).
    pub fn is_point_to_point(self) -> bool {
        matches!(
            self,
            CollectiveKind::Send | CollectiveKind::Recv | CollectiveKind::BatchP2p
        )
    }

    /// Whether the Work keeps the op's own tensor as its outputs (`outputs_`, which a Work the
    /// program holds keeps alive, R18): every collective a scenario writes runs in place on its
    /// tensor (`all_gather` and `reduce_scatter` on views of one buffer), and a send or receive
    /// keeps its tensor; `all_to_all_single` receives into a buffer of its own, so its Work's
    /// outputs are not the tensor it sends.
    pub fn outputs_are_its_tensor(self) -> bool {
        self != CollectiveKind::AllToAll
    }

    pub fn descriptor(self) -> &'static Descriptor {
        &DESCRIPTORS[self as usize]
    }

    /// The kind a scenario key names.
    pub fn from_key(key: &str) -> Option<CollectiveKind> {
        DESCRIPTORS.iter().find(|d| d.key == key).map(|d| d.kind)
    }

    /// The scenario key of this kind.
    pub fn key(self) -> &'static str {
        self.descriptor().key
    }

    /// The word NCCL's device kernels carry (`ncclDevKernel_AllReduce_Sum_f32_RING_LL`).
    pub fn kernel_word(self) -> &'static str {
        self.descriptor().kernel_word
    }

    /// The `OpType` PyTorch prints for a Work.
    pub fn op_type(self) -> &'static str {
        self.descriptor().op_type
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_work_counts_the_slice_on_the_side_its_kind_slices() {
        let numel = |kind: CollectiveKind| kind.descriptor().work_numel.of(800, 8);
        assert_eq!(numel(CollectiveKind::AllReduce), (800, 800));
        assert_eq!(numel(CollectiveKind::AllGather), (100, 800));
        assert_eq!(numel(CollectiveKind::ReduceScatter), (800, 100));
        assert_eq!(numel(CollectiveKind::AllToAll), (800, 800));
        assert_eq!(WorkNumel::InputSlice.of(800, 0), (800, 800));
        let indivisible = |kind: CollectiveKind| kind.descriptor().work_numel.of(250, 3);
        assert_eq!(indivisible(CollectiveKind::AllReduce), (250, 250));
        assert_eq!(indivisible(CollectiveKind::AllGather), (83, 249));
        assert_eq!(indivisible(CollectiveKind::ReduceScatter), (249, 83));
        assert_eq!(indivisible(CollectiveKind::AllToAll), (249, 249));
    }

    #[test]
    fn descriptors_are_in_kind_order_and_keys_round_trip() {
        for (index, kind) in CollectiveKind::ALL.into_iter().enumerate() {
            assert_eq!(DESCRIPTORS[index].kind, kind);
            assert_eq!(CollectiveKind::from_key(kind.key()), Some(kind));
        }
        assert_eq!(CollectiveKind::from_key("all_to_al"), None);
        for kind in CollectiveKind::ALL {
            assert_eq!(kind.descriptor().counterpart.descriptor().counterpart, kind);
        }
    }

    #[test]
    fn ring_traffic_follows_r24() {
        // 8 ranks: all_reduce 14 steps and 14/8 of the size; all_gather 7 and 7/8; broadcast
        // 7 and the whole size.
        assert_eq!(RingTraffic::ReduceThenGather.steps(8), 14);
        assert_eq!(RingTraffic::ReduceThenGather.volume_factor(8), 1.75);
        assert_eq!(RingTraffic::OnePass.steps(8), 7);
        assert_eq!(RingTraffic::OnePass.volume_factor(8), 0.875);
        assert_eq!(RingTraffic::Chain.steps(8), 7);
        assert_eq!(RingTraffic::Chain.volume_factor(8), 1.0);
        assert_eq!(RingTraffic::OnePass.steps(1), 0);
        assert_eq!(RingTraffic::PointToPoint.steps(2), 1);
        assert_eq!(RingTraffic::PointToPoint.volume_factor(2), 1.0);
    }
}
