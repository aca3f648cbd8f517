//! Cost models: the α-β ring of collectives (R24; the NCCL model in `crate::nccl` builds on it)
//! and GEMMs by FLOPs. A leaf: it reads the scenario and nothing else.

use crate::scenario::{CollectiveKind, DType, GpuSpec, Scenario};

/// The α-β ring of R24 over `group_ranks`:
/// all_reduce `2(n−1)·α + 2(n−1)/n · S/B`; all_gather and reduce_scatter `(n−1)·α + (n−1)/n · S/B`
/// (S = the full, gathered size); broadcast, pipelined along the ring, `(n−1)·α + S/B`. B and α
/// are NVLink's when the ring stays in one node, the NIC's otherwise; B is scaled by
/// `bandwidth_share` (1 at the ring's full channel count, less when `NCCL_MAX_CTAS` caps it).
/// Never shorter than the network's kernel floor (a one-rank collective still runs a kernel).
pub fn ring_alpha_beta_ns(
    scenario: &Scenario,
    group_ranks: &[u32],
    collective: CollectiveKind,
    size_bytes: u64,
    bandwidth_share: f64,
) -> u64 {
    let network = &scenario.network;
    let n = group_ranks.len() as u64;
    if n <= 1 {
        return network.kernel_floor_ns;
    }
    let first = group_ranks[0];
    let crosses_nodes = group_ranks
        .iter()
        .any(|&rank| !scenario.same_node(first, rank));
    let (bandwidth, alpha_ns) = if crosses_nodes {
        (network.nic_bytes_per_s, network.nic_alpha_ns)
    } else {
        (network.nvlink_bytes_per_s, network.alpha_ns)
    };
    let ring = collective.descriptor().ring;
    let (steps, volume_factor) = (ring.steps(n), ring.volume_factor(n));
    let bandwidth_ns = crate::units::modelled_ns(
        volume_factor * size_bytes as f64 / (bandwidth * bandwidth_share) * 1e9,
    );
    (steps * alpha_ns + bandwidth_ns)
        .min(crate::units::MAX_MODELLED_NS)
        .max(network.kernel_floor_ns)
}

/// Duration of an `m×n×k` GEMM: `2·m·n·k` FLOPs at the GPU's nominal rate for the dtype times
/// its efficiency (FP32 at the plain FP32 rate: PyTorch does not use TF32 for matmul unless
/// `allow_tf32` is set).
pub fn gemm_ns(gpu: &GpuSpec, m: u64, n: u64, k: u64, dtype: DType) -> u64 {
    let flops = 2.0 * m as f64 * n as f64 * k as f64;
    let tflops = match dtype {
        DType::Bf16 | DType::F16 => gpu.bf16_tflops,
        DType::F32 => gpu.fp32_tflops,
    };
    let seconds = flops / (tflops * 1e12 * gpu.gemm_efficiency);
    crate::units::modelled_ns(seconds * 1e9).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::parse;

    fn scenario(extra: &str) -> Scenario {
        let text = format!("{extra}\n[tensors]\nx = \"1MiB\"\n[[op]]\nall_reduce = \"x\"\n");
        parse("cost.toml", &text).unwrap()
    }

    #[test]
    fn ring_all_reduce_follows_r24() {
        // 8 ranks in one node, 25 MiB, B = 450 GB/s, α = 5 µs:
        // 14·5 µs + 2·7/8 · 26214400 B / 450e9 B/s = 70 µs + 101.945 µs.
        let s = scenario("[cluster]\nranks = 8\n[network]\nnvlink_gbps = 450\nalpha_us = 5");
        let ranks: Vec<u32> = (0..8).collect();
        let ns = ring_alpha_beta_ns(&s, &ranks, CollectiveKind::AllReduce, 25 << 20, 1.0);
        assert_eq!(ns, 70_000 + 101_945);
    }

    #[test]
    fn crossing_nodes_uses_the_nic() {
        // 2 nodes of 1 rank: 2·1·10 µs + 2·1/2 · 50e6 B / 50e9 B/s = 20 µs + 1000 µs.
        let s = scenario(
            "[cluster]\nranks = 2\nranks_per_node = 1\n[network]\nnic_gbps = 50\nnic_alpha_us = 10",
        );
        let ns = ring_alpha_beta_ns(&s, &[0, 1], CollectiveKind::AllReduce, 50_000_000, 1.0);
        assert_eq!(ns, 20_000 + 1_000_000);
    }

    #[test]
    fn gather_and_broadcast_step_counts() {
        let s = scenario("[cluster]\nranks = 4\n[network]\nnvlink_gbps = 100\nalpha_us = 1");
        let ranks = [0, 1, 2, 3];
        // (n−1)·α + (n−1)/n · S/B = 3 µs + 0.75 · 1e8 / 1e11 s = 3 µs + 750 µs.
        assert_eq!(
            ring_alpha_beta_ns(&s, &ranks, CollectiveKind::AllGather, 100_000_000, 1.0),
            753_000
        );
        // (n−1)·α + S/B = 3 µs + 1000 µs.
        assert_eq!(
            ring_alpha_beta_ns(&s, &ranks, CollectiveKind::Broadcast, 100_000_000, 1.0),
            1_003_000
        );
    }

    #[test]
    fn one_rank_costs_the_kernel_floor() {
        let s = scenario("[cluster]\nranks = 1\n[network]\nkernel_floor_us = 7");
        assert_eq!(
            ring_alpha_beta_ns(&s, &[0], CollectiveKind::AllReduce, 1 << 30, 1.0),
            7_000
        );
    }

    #[test]
    fn gemm_8192_cubed_on_h100() {
        // 2·8192³ = 1.0995e12 FLOP at 989 TFLOP/s · 0.7 = 1.588 ms.
        let gpu = GpuSpec::preset("h100-sxm").unwrap();
        let ns = gemm_ns(&gpu, 8192, 8192, 8192, DType::Bf16);
        assert!((1_587_000..1_590_000).contains(&ns), "{ns}");
    }
}
