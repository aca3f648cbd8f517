//! NCCL kernel names as a profiler shows them.
//!
//! The Timeline names an NCCL kernel after what it does (`ncclDevKernel_AllReduce_Sum_bf16_NVLS_SIMPLE`:
//! the collective, the reduction, the type, then the algorithm and protocol the model picked). NCCL
//! (2.19 and later, `src/device/generate.py`) compiles far fewer kernels than that: one per
//! collective, type and ring-or-tree, always for the LL protocol; every other algorithm and protocol
//! runs inside one of them, through a table of device functions. So the kernel CUPTI reports — and
//! torch.profiler writes — for an NVLS Simple all_reduce of bf16 is
//! `ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)`:
//!
//! - all_gather and broadcast: `ncclDevKernel_AllGather_RING_LL`, no type (they reduce nothing);
//! - all_reduce, reduce_scatter: `…_Sum_<type>_TREE_LL` for the tree algorithm, `…_RING_LL`
//!   for every other (ring, NVLS, CollNet, PAT), whatever the reduction;
//! - send, receive, all_to_all: `ncclDevKernel_SendRecv`.
//!
//! The parameter list is that of NCCL 2.22 and later (`ncclDevKernelArgsStorage<4096ul>`, the
//! kernel's 4-KiB argument block). The algorithm and protocol the name no longer shows go into the
//! event's arguments.

/// The parameter list of every NCCL device kernel since NCCL 2.22, as demangled by CUPTI.
const KERNEL_PARAMETERS: &str = "(ncclDevKernelArgsStorage<4096ul>)";

const PREFIX: &str = "ncclDevKernel_";

/// What a Timeline's NCCL kernel name says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NcclKernel {
    /// The kernel as a profiler names it.
    pub profiler_name: String,
    /// The algorithm (`RING`, `TREE`, `NVLS`, …), where the Timeline's name says it.
    pub algorithm: Option<String>,
    /// The protocol (`LL`, `LL128`, `SIMPLE`), likewise.
    pub protocol: Option<String>,
    /// The element type in NCCL's spelling (`f32`, `bf16`, `u8`), likewise.
    pub nccl_type: Option<String>,
}

const PROTOCOLS: [&str; 3] = ["LL", "LL128", "SIMPLE"];
const ALGORITHMS: [&[&str]; 7] = [
    &["NVLS", "TREE"],
    &["COLLNET", "DIRECT"],
    &["COLLNET", "CHAIN"],
    &["RING"],
    &["TREE"],
    &["NVLS"],
    &["PAT"],
];

/// The profiler's name of the kernel a Timeline calls `name`; `None` for a kernel that is not
/// NCCL's (a GEMM, a spin kernel) or a name already in the profiler's form.
pub fn nccl_kernel(name: &str) -> Option<NcclKernel> {
    let rest = name.strip_prefix(PREFIX)?;
    if rest.contains('(') {
        return None;
    }
    let mut tokens: Vec<&str> = rest.split('_').collect();
    let protocol = tokens
        .last()
        .filter(|token| PROTOCOLS.contains(token))
        .map(|token| token.to_string());
    if protocol.is_some() {
        tokens.pop();
    }
    let algorithm_words = ALGORITHMS
        .iter()
        .find(|words| protocol.is_some() && tokens.ends_with(words));
    let algorithm = algorithm_words.map(|words| {
        tokens.truncate(tokens.len() - words.len());
        words.join("_")
    });
    let kernel_algorithm = match algorithm.as_deref() {
        Some("TREE") => "TREE",
        _ => "RING",
    };
    let (kernel, nccl_type) = match tokens.as_slice() {
        [collective @ ("AllGather" | "Broadcast" | "AllGatherV"), rest @ ..] if rest.len() <= 1 => {
            (
                format!("{PREFIX}{collective}_RING_LL"),
                rest.first().map(|t| t.to_string()),
            )
        }
        [collective @ ("AllReduce" | "Reduce" | "ReduceScatter"), _reduction, nccl_type] => (
            format!("{PREFIX}{collective}_Sum_{nccl_type}_{kernel_algorithm}_LL"),
            Some(nccl_type.to_string()),
        ),
        ["SendRecv"] => (format!("{PREFIX}SendRecv"), None),
        _ => (name.to_string(), None),
    };
    Some(NcclKernel {
        profiler_name: format!("{kernel}{KERNEL_PARAMETERS}"),
        algorithm,
        protocol,
        nccl_type,
    })
}

/// PyTorch's name of a scalar type (`c10::ScalarType`, what `record_param_comms` writes as
/// `dtype`) for NCCL's spelling of it: the scenario's types.
pub fn torch_dtype(nccl_type: &str) -> Option<&'static str> {
    Some(match nccl_type {
        "f32" => "Float",
        "f16" => "Half",
        "bf16" => "BFloat16",
        _ => return None,
    })
}

/// Bytes of one element of NCCL's type.
pub fn element_bytes(nccl_type: &str) -> Option<u64> {
    Some(match nccl_type {
        "f32" => 4,
        "f16" | "bf16" => 2,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profiler(name: &str) -> String {
        nccl_kernel(name).unwrap().profiler_name
    }

    #[test]
    fn every_algorithm_and_protocol_runs_in_the_ring_or_tree_ll_kernel() {
        assert_eq!(
            profiler("ncclDevKernel_AllReduce_Sum_f32_RING_LL"),
            "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
        );
        assert_eq!(
            profiler("ncclDevKernel_AllReduce_Sum_bf16_NVLS_SIMPLE"),
            "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
        );
        assert_eq!(
            profiler("ncclDevKernel_AllReduce_Sum_f32_TREE_LL128"),
            "ncclDevKernel_AllReduce_Sum_f32_TREE_LL(ncclDevKernelArgsStorage<4096ul>)"
        );
        assert_eq!(
            profiler("ncclDevKernel_AllReduce_Sum_f16_NVLS_TREE_SIMPLE"),
            "ncclDevKernel_AllReduce_Sum_f16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
        );
        assert_eq!(
            profiler("ncclDevKernel_ReduceScatter_Sum_bf16_RING_SIMPLE"),
            "ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
        );
    }

    #[test]
    fn gathers_and_broadcasts_carry_no_type_and_send_receive_no_algorithm() {
        assert_eq!(
            profiler("ncclDevKernel_AllGather_f32_RING_LL128"),
            "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
        );
        assert_eq!(
            profiler("ncclDevKernel_Broadcast_bf16_RING_SIMPLE"),
            "ncclDevKernel_Broadcast_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
        );
        let send_recv = nccl_kernel("ncclDevKernel_SendRecv").unwrap();
        assert_eq!(
            send_recv.profiler_name,
            "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)"
        );
        assert_eq!(
            (send_recv.algorithm, send_recv.protocol, send_recv.nccl_type),
            (None, None, None)
        );
    }

    #[test]
    fn the_model_s_choice_and_the_type_are_kept_beside_the_name() {
        let kernel = nccl_kernel("ncclDevKernel_AllReduce_Sum_bf16_NVLS_SIMPLE").unwrap();
        assert_eq!(kernel.algorithm.as_deref(), Some("NVLS"));
        assert_eq!(kernel.protocol.as_deref(), Some("SIMPLE"));
        assert_eq!(kernel.nccl_type.as_deref(), Some("bf16"));
        let gather = nccl_kernel("ncclDevKernel_AllGather_f32_RING_LL").unwrap();
        assert_eq!(gather.nccl_type.as_deref(), Some("f32"));
        let tree = nccl_kernel("ncclDevKernel_AllReduce_Sum_f32_NVLS_TREE_LL").unwrap();
        assert_eq!(tree.algorithm.as_deref(), Some("NVLS_TREE"));
    }

    #[test]
    fn other_kernels_and_names_already_in_profiler_form_are_left_alone() {
        assert_eq!(nccl_kernel("gemm_bf16_8192x8192x8192"), None);
        assert_eq!(nccl_kernel("spin_kernel"), None);
        assert_eq!(
            nccl_kernel(
                "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
            ),
            None
        );
        // An NCCL name of an unknown shape keeps its words, with the parameter list.
        assert_eq!(
            profiler("ncclDevKernel_Odd"),
            "ncclDevKernel_Odd(ncclDevKernelArgsStorage<4096ul>)"
        );
    }

    #[test]
    fn dtypes_read_as_pytorch_names_them() {
        assert_eq!(torch_dtype("f32"), Some("Float"));
        assert_eq!(torch_dtype("bf16"), Some("BFloat16"));
        assert_eq!(torch_dtype("e4m3"), None);
        assert_eq!(element_bytes("bf16"), Some(2));
        assert_eq!(element_bytes("f32"), Some(4));
        assert_eq!(element_bytes("x"), None);
    }
}
