//! The traced job's network: `[network]`'s `alpha_us` and `nvlink_gbps` fitted to the traced
//! collectives' NCCL kernels with `calibrate`'s fit (R24: `kernel time = steps·α + volume/B`),
//! so the replay times its collectives as the trace did, and what stays the default and why
//! (docs/import.md).

use super::trace::{GpuKind, Trace};
use crate::calibrate::{fit_bandwidth_given_alpha, fit_network, CollectivePoint, FittedValue};
use sim::collective::BARRIER_BYTES;
use sim::scenario::{CollectiveKind, DEFAULT_ALPHA_NS, DEFAULT_RANKS_PER_NODE, MAX_LINK_GBPS};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// The fitted network: its `[network]` lines (empty where every value stays the default) and
/// the header's comment saying what was fitted to what, or why the default stays.
pub(super) struct TracedNetwork {
    pub(super) values: String,
    pub(super) note: String,
}

/// One traced collective, matched across the ranks of its group by its place in the group's
/// order (every rank issues a group's collectives in one order).
struct Instance {
    kind: CollectiveKind,
    ranks: u64,
    bytes: u64,
    /// The shortest of the ranks' NCCL kernels: the last rank to arrive waited for no one, so
    /// its kernel is the data movement alone (the replay adds the waits of its own skew).
    kernel_ns: i64,
}

/// The points of the fit: per collective, group size and size, the mean over its instances of
/// the shortest kernel; and whether a collective across nodes was left out. The mean, not the
/// median: the replay is to reproduce the streams' busy time, a sum of kernel times; and a
/// trace of whole µs (`run --trace-dir`'s) rounds a 70.097 µs kernel to 70 or 71, whose median
/// is 70, 0.1 µs short on each of a thousand collectives.
fn collective_points(traces: &[&Trace]) -> (Vec<CollectivePoint>, bool) {
    let mut instances: BTreeMap<(Vec<u32>, Option<String>, usize), Instance> = BTreeMap::new();
    let mut across_nodes = false;
    for trace in traces {
        let mut issued: BTreeMap<(Vec<u32>, Option<String>), usize> = BTreeMap::new();
        for (index, comm) in trace.comms.iter().enumerate() {
            let ranks = (comm.ranks.clone()).unwrap_or_else(|| (0..trace.world_size).collect());
            let group = (ranks, comm.group.clone());
            let order = issued.entry(group.clone()).or_default();
            let place = *order;
            *order += 1;
            let (kind, bytes) = match comm.key {
                "barrier" => (CollectiveKind::AllReduce, BARRIER_BYTES),
                key => match CollectiveKind::from_key(key) {
                    Some(kind) => (kind, comm.bytes),
                    None => continue,
                },
            };
            let members = &group.0;
            if members.len() < 2 {
                continue;
            }
            let node = |rank: u32| rank / DEFAULT_RANKS_PER_NODE;
            if members.iter().any(|&r| node(r) != node(members[0])) {
                across_nodes = true;
                continue;
            }
            let kernel_ns: i64 = (trace.comm_activity[index].iter())
                .map(|&op| &trace.gpu[op])
                .filter(|op| op.kind == GpuKind::Kernel)
                .map(|op| op.duration_ns)
                .sum();
            if kernel_ns <= 0 {
                continue;
            }
            let (members, name) = group;
            instances
                .entry((members.clone(), name, place))
                .and_modify(|instance| instance.kernel_ns = instance.kernel_ns.min(kernel_ns))
                .or_insert(Instance {
                    kind,
                    ranks: members.len() as u64,
                    bytes,
                    kernel_ns,
                });
        }
    }
    let mut by_shape: BTreeMap<(&str, u64, u64), (CollectiveKind, Vec<i64>)> = BTreeMap::new();
    for instance in instances.values() {
        let shape = (instance.kind.key(), instance.ranks, instance.bytes);
        let (_, kernels_ns) = by_shape.entry(shape).or_insert((instance.kind, Vec::new()));
        kernels_ns.push(instance.kernel_ns);
    }
    let points = (by_shape.into_iter())
        .map(|((_, ranks, bytes), (kind, kernels_ns))| {
            let total_ns: i64 = kernels_ns.iter().sum();
            let kernel_us = total_ns as f64 / kernels_ns.len() as f64 / 1e3;
            CollectivePoint::new(kind, ranks, bytes, kernel_us)
        })
        .collect();
    (points, across_nodes)
}

/// A fitted value the scenario takes (the bandwidth within the scenario's bounds, written to
/// three decimals as `calibrate` writes them).
fn writable(fitted: &[FittedValue]) -> bool {
    fitted.iter().all(|value| {
        value.value.is_finite()
            && match value.key.as_str() {
                "network.nvlink_gbps" => (0.001..=MAX_LINK_GBPS).contains(&value.value),
                _ => value.value >= 0.0 && value.value < 1e9,
            }
    })
}

/// `[network]`'s α and NVLink bandwidth fitted to the traces' collectives inside one node (the
/// imported scenario keeps `cluster.ranks_per_node` at its default): both where the collectives
/// tell them apart (two sizes or more), else the bandwidth at the default α, else neither.
pub(super) fn traced_network(traces: &[&Trace]) -> TracedNetwork {
    let (points, across_nodes) = collective_points(traces);
    let default_alpha_us = DEFAULT_ALPHA_NS as f64 / 1e3;
    let both = fit_network(&points);
    let (fitted, why) = if points.is_empty() {
        let why = if traces.iter().all(|t| t.world_size == 1) {
            "one rank, where NCCL moves no data: alpha_us and nvlink_gbps keep the defaults"
        } else {
            "no multi-rank collective inside one node with a traced NCCL kernel: alpha_us and\n# nvlink_gbps keep the defaults"
        };
        (Vec::new(), why.to_string())
    } else if !both.is_empty() && writable(&both) {
        (both, String::new())
    } else {
        let given = fit_bandwidth_given_alpha(&points, default_alpha_us);
        let why = if points.len() == 1 {
            "one collective size only: alpha_us keeps the default"
        } else {
            "the collectives do not tell α from the bandwidth: alpha_us keeps the default"
        };
        if writable(&given) && !given.is_empty() {
            (given, format!("{why} ({default_alpha_us} µs)"))
        } else {
            let why = format!(
                "{why}, and no positive nvlink_gbps fits the kernels at it: both keep the defaults"
            );
            (Vec::new(), why)
        }
    };
    let mut note = String::from("# Network: ");
    if let Some(first) = fitted.first() {
        let keys: Vec<&str> = (fitted.iter())
            .map(|value| value.key.trim_start_matches("network."))
            .collect();
        let _ = write!(
            note,
            "{} fitted to the NCCL kernels of {} traced collective size(s) (kernel time =\n\
             # steps·α + volume/B, the shortest rank's kernel of each; residual {})",
            keys.join(" and "),
            first.samples,
            first.residual
        );
        if !why.is_empty() {
            let _ = write!(note, ";\n# {why}");
        }
    } else {
        note.push_str(&why);
    }
    if across_nodes {
        note.push_str(";\n# collectives across nodes are not fitted: nic_gbps and nic_alpha_us keep the defaults");
    }
    note.push_str(".\n");
    let mut values = String::new();
    for value in &fitted {
        let _ = writeln!(
            values,
            "{} = {}",
            value.key.trim_start_matches("network."),
            (value.value * 1e3).round() / 1e3
        );
    }
    TracedNetwork { values, note }
}
