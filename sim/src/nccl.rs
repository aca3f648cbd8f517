//! NCCL-style collective planning: which algorithm and protocol a collective runs with, how many
//! channels (one thread block, so one SM, each: R22) its kernel holds, and how long its data
//! movement takes once every rank has arrived (R16).
//!
//! Two cost models sit behind one entry point, [`plan_collective`]:
//!
//! - **α-β ring** (`network.algorithm = "ring"`, the default): the plain formula of R24, exactly
//!   as before this module existed, so that every shipped figure holds. Its kernel keeps the
//!   name it always had (`…_RING_LL`) and holds the preset's ring channel count.
//! - **NCCL model** (`network.algorithm = "auto"`, or `NCCL_ALGO` / `NCCL_PROTO` in `[env]`): the
//!   shape of NCCL's tuning model, with parameters of our own calibrated to published nccl-tests
//!   figures (docs/nccl-model.md). Every (algorithm, protocol) pair gets
//!   `time = latency + S / algbw`, where the latency is a launch cost plus one hop cost per
//!   pipeline step (NVLink hops inside a node, NIC hops across), and the algorithm bandwidth is
//!   the bus bandwidth — the lesser of `channels × per-channel rate` and `line rate × protocol
//!   efficiency` — divided by the algorithm's traffic factor (`2(n−1)/n` for a ring all_reduce,
//!   2 for a tree, which sends everything up and then down). The fastest allowed pair wins, as
//!   NCCL's tuner picks; `NCCL_ALGO`/`NCCL_PROTO` (and `NCCL_NVLS_ENABLE=0`) narrow the choice,
//!   `NCCL_MIN_CTAS` / `NCCL_MAX_CTAS` bound the channel count (R22: fewer channels, fewer SMs
//!   held, less bandwidth).
//!
//! Algorithms: ring (every collective), tree (all_reduce only) and NVLS — NVLink SHARP, the
//! switch-side reduction NCCL uses by default for all_reduce on H100/H200 NVSwitch nodes; it is
//! what lets the published all_reduce bus bandwidth (≈480 GB/s) exceed the ring's ceiling
//! (≈370 GB/s on 450 GB/s NVLink), so the H100/H200 calibration needs it. Protocols: LL (8-byte
//! flag per 8 bytes of data: lowest latency, lowest bandwidth), LL128 (a flag per 128-byte line:
//! 120/128 of Simple's bandwidth), Simple (bulk copies with fences: highest latency and
//! bandwidth). NVLS runs Simple only.
//!
//! Pure: no clock, file or GPU. Floats appear only in the cost formulas, rounded once to ns.

use crate::cost::ring_alpha_beta_ns;
use crate::nccl_env::{allowed_pairs, preset_has_nvls};
pub use crate::nccl_env::{Algorithm, Protocol};
use crate::scenario::{CollectiveKind, DType, OpKind, Scenario};
use serde::Serialize;
use std::fmt;

/// The interconnect parameters of a GPU preset, for the NCCL model. Arrays are indexed by
/// [`Protocol`] (LL, LL128, Simple). Line rates come from `[network]` (`nvlink_gbps`,
/// `nic_gbps`); these say how much of them each protocol gets and what each step costs.
#[derive(Debug, Clone, PartialEq)]
pub struct FabricTuning {
    /// Channels (thread blocks) of a full-width ring or tree kernel.
    pub ring_channels: u32,
    /// Channels of an NVLS kernel; 0 when the preset has no NVSwitch multicast.
    pub nvls_channels: u32,
    /// Bus bandwidth one channel can drive, GB/s.
    pub channel_gbps: [f64; 3],
    /// Fraction of the line rate a ring reaches with each protocol.
    pub wire_efficiency: [f64; 3],
    /// Further fraction a tree reaches (the fan-in of its reduction costs it some).
    pub tree_efficiency: f64,
    /// NVLS algorithm bandwidth as a fraction of the NVLink line rate.
    pub nvls_efficiency: f64,
    /// Fixed cost of a collective kernel with each protocol, µs.
    pub launch_us: [f64; 3],
    /// Fixed cost of an NVLS kernel, µs: its launch plus the pipeline start the published curve
    /// shows (fitted; see docs/nccl-model.md).
    pub nvls_launch_us: f64,
    /// Cost of one pipeline step over NVLink with each protocol, µs.
    pub nvlink_hop_us: [f64; 3],
    /// Cost of one pipeline step over the NIC with each protocol, µs.
    pub nic_hop_us: [f64; 3],
    /// Bytes each channel should carry before NCCL spreads a collective over another channel:
    /// small messages hold fewer SMs (R22).
    pub channel_min_bytes: [u64; 3],
}

impl FabricTuning {
    /// The tuning of a `cluster.gpu` preset. H100 SXM and H200 share NVLink 4 behind NVSwitch
    /// with multicast (NVLS), and the H200 calibration (docs/nccl-model.md) applies to both. The
    /// A100 has NVLink 3 and no NVLS; it reuses the Hopper protocol figures uncalibrated.
    pub fn for_gpu(preset: &str) -> FabricTuning {
        let hopper = FabricTuning {
            ring_channels: 16,
            nvls_channels: 16,
            channel_gbps: [9.0, 22.0, 24.0],
            wire_efficiency: [0.30, 0.77, 0.82],
            tree_efficiency: 0.9,
            nvls_efficiency: 0.611,
            launch_us: [4.5, 6.0, 9.0],
            nvls_launch_us: 70.0,
            nvlink_hop_us: [0.7, 1.0, 2.2],
            nic_hop_us: [3.5, 5.0, 10.0],
            channel_min_bytes: [16 << 10, 64 << 10, 512 << 10],
        };
        FabricTuning {
            nvls_channels: if preset_has_nvls(preset) { 16 } else { 0 },
            ..hopper
        }
    }

    /// The preset's tuning with the scenario's `network.nccl_*_launch_us` and
    /// `network.nccl_*_wire_efficiency` in place of its figures (a machine profile's fit).
    pub fn for_scenario(scenario: &Scenario) -> FabricTuning {
        let mut tuning = FabricTuning::for_gpu(&scenario.cluster.gpu.preset);
        let network = &scenario.network;
        for protocol in Protocol::ALL {
            let p = protocol.index();
            if let Some(launch_ns) = network.nccl_launch_ns[p] {
                tuning.launch_us[p] = launch_ns as f64 / 1e3;
            }
            if let Some(efficiency) = network.nccl_wire_efficiency[p] {
                tuning.wire_efficiency[p] = efficiency;
            }
        }
        tuning
    }
}

/// How one collective runs: the engine holds `channels` SMs for `duration_ns` (R16, R22).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CollectivePlan {
    pub algorithm: Algorithm,
    pub protocol: Protocol,
    /// Thread blocks of the kernel, one per channel, each on its own SM (R22).
    pub channels: u32,
    /// Data movement once every rank has arrived, with all channels resident.
    pub duration_ns: u64,
    /// NCCL enqueues no kernel: a one-rank collective other than all_to_all does nothing in
    /// place and a device-to-device copy out of place (NCCL's one-rank path), so it holds no
    /// SMs and takes `duration_ns` on its stream whatever runs beside it.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub without_kernel: bool,
}

impl CollectivePlan {
    /// The kernel name a profiler shows (`ncclDevKernel_AllReduce_Sum_f32_RING_LL`), for a
    /// tensor of `dtype` (`f32`, `bf16`, `u8`, …).
    pub fn kernel_name(&self, collective: CollectiveKind, dtype: &str) -> String {
        if !collective.descriptor().kernel_name_is_specialised {
            return format!("ncclDevKernel_{}", collective.kernel_word());
        }
        format!(
            "ncclDevKernel_{}_{dtype}_{}_{}",
            collective.kernel_word(),
            self.algorithm.nccl_name(),
            self.protocol.nccl_name()
        )
    }
}

impl fmt::Display for CollectivePlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}_{}",
            self.algorithm.nccl_name(),
            self.protocol.nccl_name()
        )
    }
}

/// Plans one collective of `collective` over `group_ranks` moving `size_bytes` (the full,
/// gathered size for all_gather, as R24 counts it).
///
/// Panics if the scenario's `NCCL_ALGO`/`NCCL_PROTO` leave no possible pair for this group;
/// parsing rejects such scenarios (`Scenario::unplannable_collective`).
pub fn plan_collective(
    scenario: &Scenario,
    group_ranks: &[u32],
    collective: CollectiveKind,
    size_bytes: u64,
) -> CollectivePlan {
    let tuning = FabricTuning::for_scenario(scenario);
    let floor_ns = scenario.network.kernel_floor_ns;
    let nccl_model = scenario.uses_nccl_model();
    if group_ranks.len() <= 1 {
        // One rank: no peer (the α-β model keeps its historical name). all_to_all becomes a
        // send and a receive to itself, which launch the point-to-point kernel and copy the
        // buffer (`network.self_copy_gbps`).
        let copy_ns = match scenario.network.self_copy_bytes_per_s {
            Some(rate) if collective == CollectiveKind::AllToAll => {
                crate::units::modelled_ns(size_bytes as f64 / rate * 1e9)
            }
            _ => 0,
        };
        return CollectivePlan {
            algorithm: Algorithm::Ring,
            protocol: if nccl_model {
                Protocol::Simple
            } else {
                Protocol::Ll
            },
            channels: 1,
            duration_ns: floor_ns.max(copy_ns),
            without_kernel: collective != CollectiveKind::AllToAll,
        };
    }
    if !nccl_model {
        // R24 at the ring's full width; NCCL_MAX_CTAS below it shares the bandwidth among
        // fewer channels.
        let channels = bound_channels(scenario, tuning.ring_channels);
        let share = f64::from(channels.min(tuning.ring_channels)) / f64::from(tuning.ring_channels);
        return CollectivePlan {
            algorithm: Algorithm::Ring,
            protocol: Protocol::Ll,
            channels,
            duration_ns: ring_alpha_beta_ns(scenario, group_ranks, collective, size_bytes, share),
            without_kernel: false,
        };
    }
    let fabric = Fabric::of(scenario, group_ranks);
    candidates(scenario, &tuning, &fabric, collective)
        .map(|(algorithm, protocol)| {
            let (time_ns, channels) = nccl_time_ns(
                scenario, &tuning, &fabric, collective, algorithm, protocol, size_bytes,
            );
            (time_ns, algorithm, protocol, channels)
        })
        .fold(
            None,
            |best: Option<(f64, Algorithm, Protocol, u32)>, next| match best {
                Some(best) if best.0 <= next.0 => Some(best),
                _ => Some(next),
            },
        )
        .map(|(time_ns, algorithm, protocol, channels)| CollectivePlan {
            algorithm,
            protocol,
            channels,
            duration_ns: crate::units::modelled_ns(time_ns).max(floor_ns),
            without_kernel: false,
        })
        .expect(
            "parsing rejects an environment that leaves no pair (Scenario::unplannable_collective)",
        )
}

/// The kernel name a profiler shows for an op (`ncclDevKernel_AllReduce_Sum_f32_RING_LL`); for
/// collectives the algorithm and protocol are those [`plan_collective`] picks for
/// the op's group and size.
pub fn kernel_name(scenario: &Scenario, kind: &OpKind) -> Option<String> {
    Some(match kind {
        OpKind::Collective {
            collective,
            tensor,
            group,
            ..
        } => {
            let tensor = &scenario.tensors[*tensor];
            plan_collective(
                scenario,
                &scenario.groups[*group].ranks,
                *collective,
                tensor.size_bytes,
            )
            .kernel_name(*collective, tensor.dtype.as_str())
        }
        OpKind::Barrier { group, .. } => plan_collective(
            scenario,
            &scenario.groups[*group].ranks,
            CollectiveKind::AllReduce,
            crate::collective::BARRIER_BYTES,
        )
        .kernel_name(CollectiveKind::AllReduce, DType::F32.as_str()),
        OpKind::Gemm { m, n, k, dtype } => format!("gemm_{}_{m}x{n}x{k}", dtype.as_str()),
        OpKind::BatchP2p { .. } => {
            format!("ncclDevKernel_{}", CollectiveKind::BatchP2p.kernel_word())
        }
        OpKind::Kernel { .. }
        | OpKind::GetFuture {
            callback: Some(_), ..
        } => "spin_kernel".to_string(),
        OpKind::GpuSleep { .. } => "cuda_sleep".to_string(),
        _ => return None,
    })
}

/// Where a group's ring runs.
struct Fabric {
    ranks: u32,
    nodes: u32,
    ranks_per_node: u32,
    line_gbps: f64,
}

impl Fabric {
    fn of(scenario: &Scenario, group_ranks: &[u32]) -> Fabric {
        let per_node = scenario.cluster.ranks_per_node;
        let mut nodes: Vec<u32> = group_ranks.iter().map(|rank| rank / per_node).collect();
        nodes.dedup();
        let nodes = nodes.len() as u32;
        let line_bytes_per_s = if nodes > 1 {
            scenario.network.nic_bytes_per_s
        } else {
            scenario.network.nvlink_bytes_per_s
        };
        Fabric {
            ranks: group_ranks.len() as u32,
            nodes,
            ranks_per_node: (group_ranks.len() as u32).div_ceil(nodes),
            line_gbps: line_bytes_per_s / 1e9,
        }
    }
}

/// The (algorithm, protocol) pairs allowed by the environment and supported for this
/// collective on this fabric.
fn candidates<'a>(
    scenario: &'a Scenario,
    tuning: &'a FabricTuning,
    fabric: &'a Fabric,
    collective: CollectiveKind,
) -> impl Iterator<Item = (Algorithm, Protocol)> + 'a {
    let env = &scenario.env;
    allowed_pairs(
        collective,
        env.nccl_algorithms.as_ref(),
        env.nccl_protocols.as_ref(),
        env.nccl_nvls_enable && tuning.nvls_channels > 0 && fabric.nodes == 1,
    )
}

/// NCCL_MIN_CTAS / NCCL_MAX_CTAS applied to a channel count.
fn bound_channels(scenario: &Scenario, channels: u32) -> u32 {
    let env = &scenario.env;
    let channels = env.nccl_max_ctas.map_or(channels, |max| channels.min(max));
    env.nccl_min_ctas.map_or(channels, |min| channels.max(min))
}

/// The NCCL model's time (ns, unrounded) and channel count for one pair.
fn nccl_time_ns(
    scenario: &Scenario,
    tuning: &FabricTuning,
    fabric: &Fabric,
    collective: CollectiveKind,
    algorithm: Algorithm,
    protocol: Protocol,
    size_bytes: u64,
) -> (f64, u32) {
    let p = protocol.index();
    let full_channels = match algorithm {
        Algorithm::Nvls => tuning.nvls_channels,
        Algorithm::Ring | Algorithm::Tree => tuning.ring_channels,
    };
    // Bandwidth uses every channel the environment allows; the SMs held shrink further for
    // small messages (more channels would not make them faster), which keeps time monotonic
    // in size.
    let bandwidth_channels = f64::from(bound_channels(scenario, full_channels));
    let wanted = size_bytes.div_ceil(tuning.channel_min_bytes[p]).max(1);
    let channels = bound_channels(scenario, full_channels.min(wanted as u32));
    let channel_limit_gbps = bandwidth_channels * tuning.channel_gbps[p];
    let (latency_us, algbw_gbps) = match algorithm {
        Algorithm::Ring => {
            let ring = collective.descriptor().ring;
            let steps = ring.steps(u64::from(fabric.ranks)) as u32;
            let traffic = ring.volume_factor(u64::from(fabric.ranks));
            let nic_steps = ring.steps(u64::from(fabric.nodes)) as u32;
            let latency_us = tuning.launch_us[p]
                + f64::from(steps - nic_steps) * tuning.nvlink_hop_us[p]
                + f64::from(nic_steps) * tuning.nic_hop_us[p];
            let busbw = channel_limit_gbps.min(fabric.line_gbps * tuning.wire_efficiency[p]);
            (latency_us, busbw / traffic)
        }
        Algorithm::Tree => {
            // A chain inside each node, a binary tree across nodes; up, then down.
            let depth_levels = f64::from(32 - (fabric.nodes - 1).leading_zeros());
            let latency_us = tuning.launch_us[p]
                + 2.0
                    * (f64::from(fabric.ranks_per_node - 1) * tuning.nvlink_hop_us[p]
                        + depth_levels * tuning.nic_hop_us[p]);
            let busbw = channel_limit_gbps
                .min(fabric.line_gbps * tuning.wire_efficiency[p] * tuning.tree_efficiency);
            (latency_us, busbw / 2.0)
        }
        Algorithm::Nvls => {
            let algbw = channel_limit_gbps.min(fabric.line_gbps * tuning.nvls_efficiency);
            (tuning.nvls_launch_us, algbw)
        }
    };
    // S bytes at X GB/s take S / X ns.
    (latency_us * 1e3 + size_bytes as f64 / algbw_gbps, channels)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::parse;

    fn scenario(ranks: u32, ranks_per_node: u32, network: &str, env: &str) -> Scenario {
        let text = format!(
            "[cluster]\nranks = {ranks}\nranks_per_node = {ranks_per_node}\ngpu = \"h200\"\n\
             [network]\n{network}\n[env]\n{env}\n[tensors]\nx = \"1MiB\"\n[[op]]\nall_reduce = \"x\"\n"
        );
        parse("nccl.toml", &text).unwrap()
    }

    fn auto(ranks: u32, ranks_per_node: u32) -> Scenario {
        scenario(ranks, ranks_per_node, "algorithm = \"auto\"", "")
    }

    fn plan(s: &Scenario, size_bytes: u64) -> CollectivePlan {
        let ranks: Vec<u32> = (0..s.cluster.ranks).collect();
        plan_collective(s, &ranks, CollectiveKind::AllReduce, size_bytes)
    }

    #[test]
    fn a_node_larger_than_the_job_is_the_job_on_part_of_one_node() {
        // `ranks_per_node` is the node's size: a job of fewer ranks (`--set cluster.ranks=2`
        // on a scenario written for 8 per node) sits on one node and runs as if the node held
        // only its ranks.
        for size_bytes in [8, 4 << 20, 1 << 30] {
            assert_eq!(plan(&auto(2, 8), size_bytes), plan(&auto(2, 2), size_bytes));
        }
    }

    #[test]
    fn selection_picks_ll_for_tiny_and_simple_for_large_messages() {
        let s = auto(8, 8);
        let tiny = plan(&s, 8);
        assert_eq!(
            (tiny.algorithm, tiny.protocol),
            (Algorithm::Ring, Protocol::Ll)
        );
        assert_eq!(tiny.channels, 1, "8 bytes need one channel");
        let mid = plan(&s, 4 << 20);
        assert_eq!(mid.protocol, Protocol::Ll128);
        let large = plan(&s, 1 << 30);
        assert_eq!(
            (large.algorithm, large.protocol),
            (Algorithm::Nvls, Protocol::Simple)
        );
        // Without NVLS (NCCL_ALGO=Ring) a large ring all_reduce runs Simple.
        let ring = scenario(8, 8, "", "NCCL_ALGO = \"Ring\"");
        let large_ring = plan(&ring, 1 << 30);
        assert_eq!(
            (large_ring.algorithm, large_ring.protocol),
            (Algorithm::Ring, Protocol::Simple)
        );
    }

    #[test]
    fn a_barrier_s_kernel_reduces_one_f32_as_pytorch_s() {
        // ProcessGroupNCCL::barrier all_reduces `at::zeros({1}, kFloat)`: ncclFloat, count 1.
        let s = parse("b.toml", "[cluster]\nranks = 2\n[[op]]\nbarrier = true\n").unwrap();
        let name = kernel_name(&s, &s.ops[0].kind).unwrap();
        assert_eq!(name, "ncclDevKernel_AllReduce_Sum_f32_RING_LL");
        // Its one call is that f32's 4 bytes, as the lowering issues it.
        assert_eq!(
            s.call_sizes(&s.ops[0].kind),
            [crate::collective::BARRIER_BYTES]
        );
    }

    #[test]
    fn h200_ring_simple_follows_the_model_arithmetic() {
        // NCCL_ALGO=Ring, NCCL_PROTO=Simple, 8 ranks on NVLink 450 GB/s, 1 GiB:
        // latency 9 µs + 14 hops · 2.2 µs = 39.8 µs; busbw min(16 · 24, 450 · 0.82) = 369 GB/s;
        // algbw 369 / (2·7/8) = 210.857 GB/s; 2^30 B / 210.857 GB/s = 5_092_271.5 ns.
        let s = scenario(8, 8, "", "NCCL_ALGO = \"Ring\"\nNCCL_PROTO = \"Simple\"");
        let p = plan(&s, 1 << 30);
        assert_eq!(p.duration_ns, 39_800 + 5_092_272);
        assert_eq!(p.channels, 16);
        assert_eq!(
            p.kernel_name(CollectiveKind::AllReduce, "f32"),
            "ncclDevKernel_AllReduce_Sum_f32_RING_SIMPLE"
        );
    }

    #[test]
    fn env_forces_algorithm_and_protocol() {
        let s = scenario(8, 8, "", "NCCL_ALGO = \"tree\"\nNCCL_PROTO = \"LL128\"");
        assert!(s.uses_nccl_model());
        for size in [8, 1 << 20, 1 << 30] {
            let p = plan(&s, size);
            assert_eq!(
                (p.algorithm, p.protocol),
                (Algorithm::Tree, Protocol::Ll128)
            );
        }
        let no_ll = scenario(8, 8, "algorithm = \"auto\"", "NCCL_PROTO = \"^LL\"");
        assert_eq!(plan(&no_ll, 8).protocol, Protocol::Ll128);
    }

    #[test]
    fn tree_beats_ring_for_many_ranks_at_small_sizes() {
        // 64 nodes × 8: the ring pays 2·63 NIC hops, the tree 2·6 levels.
        let s = auto(512, 8);
        let small = plan(&s, 1 << 10);
        assert_eq!(small.algorithm, Algorithm::Tree);
        let ring = scenario(512, 8, "", "NCCL_ALGO = \"Ring\"");
        assert!(plan(&ring, 1 << 10).duration_ns > 2 * small.duration_ns);
        // On one node the ring's larger algbw wins at large sizes.
        assert_eq!(
            plan(&scenario(8, 8, "", "NCCL_ALGO = \"Ring,Tree\""), 1 << 30).algorithm,
            Algorithm::Ring
        );
    }

    #[test]
    fn channels_are_bounded_by_min_and_max_ctas() {
        let s = scenario(8, 8, "algorithm = \"auto\"", "NCCL_MAX_CTAS = 8");
        let few = plan(&s, 1 << 30);
        assert_eq!(few.channels, 8);
        assert!(few.duration_ns > plan(&auto(8, 8), 1 << 30).duration_ns);
        let s = scenario(8, 8, "algorithm = \"auto\"", "NCCL_MIN_CTAS = 4");
        assert_eq!(plan(&s, 8).channels, 4);
        // The α-β ring holds the full ring width; fewer channels share its bandwidth:
        // 14·5 µs + 2·7/8 · 2^30 B / 450 GB/s · 16/8 = 70 µs + 8_351_325 ns.
        let s = scenario(8, 8, "", "NCCL_MAX_CTAS = 8");
        let p = plan(&s, 1 << 30);
        assert_eq!((p.channels, p.duration_ns), (8, 70_000 + 8_351_325));
        assert_eq!(plan(&scenario(8, 8, "", ""), 1 << 30).channels, 16);
    }

    #[test]
    fn time_grows_with_size() {
        for s in [
            auto(8, 8),
            auto(64, 8),
            scenario(16, 8, "", "NCCL_ALGO = \"Ring\""),
        ] {
            let mut previous = 0;
            for shift in 0..=34 {
                let ns = plan(&s, 1 << shift).duration_ns;
                assert!(
                    ns >= previous,
                    "{} ranks, 2^{shift} B: {ns} < {previous}",
                    s.cluster.ranks
                );
                previous = ns;
            }
        }
    }

    #[test]
    fn nvls_needs_one_node_and_a_preset_with_multicast() {
        assert_ne!(plan(&auto(16, 8), 1 << 30).algorithm, Algorithm::Nvls);
        let a100 = parse(
            "a.toml",
            "[cluster]\nranks = 8\ngpu = \"a100\"\n[network]\nalgorithm = \"auto\"\n\
             [tensors]\nx = \"1GiB\"\n[[op]]\nall_reduce = \"x\"\n",
        )
        .unwrap();
        assert_eq!(plan(&a100, 1 << 30).algorithm, Algorithm::Ring);
    }

    #[test]
    fn nvls_enable_0_leaves_nvls_out_of_the_choice() {
        let off = scenario(8, 8, "algorithm = \"auto\"", "NCCL_NVLS_ENABLE = 0");
        let ring = scenario(8, 8, "", "NCCL_ALGO = \"Ring\"");
        for shift in [10, 20, 30] {
            assert_eq!(
                plan(&off, 1 << shift),
                plan(&ring, 1 << shift),
                "2^{shift} B"
            );
        }
        assert_eq!(plan(&auto(8, 8), 1 << 30).algorithm, Algorithm::Nvls);
        assert!(!scenario(8, 8, "", "NCCL_NVLS_ENABLE = \"0\"").uses_nccl_model());
        let forced = "[cluster]\nranks = 8\ngpu = \"h200\"\n[env]\nNCCL_ALGO = \"NVLS\"\n\
                      NCCL_NVLS_ENABLE = 0\n[tensors]\nx = \"1GiB\"\n[[op]]\nall_reduce = \"x\"\n";
        assert!(parse("n.toml", forced)
            .unwrap_err()
            .to_string()
            .contains("leave no algorithm"));
        let bad = "[env]\nNCCL_NVLS_ENABLE = 2\n";
        assert!(parse("b.toml", bad)
            .unwrap_err()
            .to_string()
            .contains("expects 0 or 1"));
    }

    #[test]
    fn network_keys_replace_the_presets_launch_cost_and_wire_efficiency() {
        // 4 ranks, Ring/Simple, 1 GiB: latency 16.2 µs + 6 hops · 2.2 µs = 29.4 µs; busbw
        // min(16 · 24, 450 · 0.788) = 354.6 GB/s; algbw 354.6 / 1.5 = 236.4 GB/s;
        // 2^30 B / 236.4 GB/s = 4_542_055.1 ns.
        let s = scenario(
            4,
            4,
            "nccl_simple_launch_us = 16.2\nnccl_simple_wire_efficiency = 0.788",
            "NCCL_ALGO = \"Ring\"\nNCCL_PROTO = \"Simple\"",
        );
        assert_eq!(plan(&s, 1 << 30).duration_ns, 29_400 + 4_542_055);
        // LL and LL128 keep the preset's figures unless set.
        let ll = scenario(4, 4, "nccl_ll_launch_us = 7.8", "NCCL_PROTO = \"LL\"");
        assert_eq!(plan(&ll, 8).duration_ns, 7_800 + 6 * 700);
        let bad = "[network]\nnccl_ll128_wire_efficiency = 1.5\n";
        assert!(parse("b.toml", bad)
            .unwrap_err()
            .to_string()
            .contains("at most 1"));
    }
}
