//! The fit of a machine profile to measured runs ([`calibrate`]): robust estimators per
//! parameter — medians of per-op medians for host costs (R1, R11, R12, R14, R25), the ratio of
//! FLOPs to duration for GEMM rates, a relative least-squares line through the multi-rank
//! collectives' kernel times (R24, in `calibrate/network.rs`), and the one-rank floor and NCCL launch latency from timed
//! Works (R6) — each value with its residual.
//!
//! One file over 1,000 lines (about 1,190): every estimator shares the run selection (warm calls, torch
//! Timelines, busy or idle streams) and the median helpers, and `calibrate` orders them (the
//! tail and the shortest call before the enqueue, the event-free floor before the launch
//! latency); split along parameter families when a next one is added.

use super::{Profile, ProfileValue};
use serde::Serialize;
use sim::scenario::{Batch, CollectiveKind, DType, OpKind, Scenario};
use sim::timeline::{
    CollectiveRecord, HostCall, KernelClass, KernelRecord, RankTimeline, ThreadKind, Timeline,
    WatchdogEvent,
};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// A measured run and the scenario it ran.
pub struct CalibrationRun<'a> {
    pub scenario: &'a Scenario,
    pub timeline: &'a Timeline,
}

/// One fitted parameter.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FittedValue {
    /// The profile key (`host.wait_us`).
    pub key: String,
    pub value: f64,
    /// Per-op medians (or collectives) it was fitted to.
    pub samples: usize,
    /// How far the samples lie from the fitted model: the median |residual|, with its unit.
    pub residual: String,
    pub method: String,
}

/// Median of values (mean of the middle two); 0 for none.
pub(super) fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    match n {
        0 => 0.0,
        _ if n % 2 == 1 => sorted[n / 2],
        _ => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
    }
}

/// The median of (value, weight) pairs: the value at which half the total weight lies below;
/// 0 for none.
fn weighted_median(values: &mut [(f64, f64)]) -> f64 {
    values.sort_by(|a, b| a.0.total_cmp(&b.0));
    let total: f64 = values.iter().map(|v| v.1).sum();
    let mut below = 0.0;
    for &(value, weight) in values.iter() {
        below += weight;
        if below * 2.0 >= total {
            return value;
        }
    }
    0.0
}

fn median_abs_residual(values: &[f64], fitted: f64) -> f64 {
    median(
        &values
            .iter()
            .map(|v| (v - fitted).abs())
            .collect::<Vec<_>>(),
    )
}

/// Per-op median samples in µs, one list per (run, op).
type OpSamples = Vec<Vec<f64>>;

/// `machine.backend` of a Timeline measured by `c10dsim torch`.
const TORCH_BACKEND: &str = "c10dsim.torch";

fn host_cost(key: &str, method: &str, per_op: OpSamples) -> Option<FittedValue> {
    let medians: Vec<f64> = per_op
        .iter()
        .filter(|s| !s.is_empty())
        .map(|s| median(s))
        .collect();
    if medians.is_empty() {
        return None;
    }
    let value = median(&medians);
    Some(FittedValue {
        key: key.to_string(),
        value,
        samples: medians.len(),
        residual: format!("{:.2} µs", median_abs_residual(&medians, value)),
        method: method.to_string(),
    })
}

pub(super) fn us(ns: i64) -> f64 {
    ns as f64 / 1e3
}

/// Host durations of the measured calls of ops whose key is in `keys`, per (run, op), leaving
/// out each rank's first GEMM call of each dtype: cuBLAS's first matmul of a dtype costs the host
/// tens of milliseconds more (`host.first_gemm_us`), so in a run of a few iterations that one
/// call would decide an op's median.
fn host_durations(runs: &[CalibrationRun], keys: &[&str]) -> OpSamples {
    let mut out = Vec::new();
    for run in runs {
        let t = run.timeline;
        let ops: Vec<_> = (t.ops.iter())
            .filter(|op| keys.contains(&op.key.as_str()))
            .collect();
        if ops.is_empty() {
            continue;
        }
        let first_gemms = first_gemm_calls_of(run);
        for op in ops {
            let samples = (t.ranks.iter())
                .flat_map(|r| &r.host)
                .filter(|&c| {
                    c.op == op.index
                        && c.iteration >= t.scenario.warmup
                        && !first_gemms.iter().any(|&first| std::ptr::eq(first, c))
                })
                .map(|c| us(c.end_ns as i64 - c.start_ns as i64))
                .collect();
            out.push(samples);
        }
    }
    out
}

/// Each rank's first GEMM call of each dtype in `run` (in any iteration, warm-ups included).
fn first_gemm_calls_of<'a>(run: &CalibrationRun<'a>) -> Vec<&'a HostCall> {
    let gemm_dtypes: Vec<(u32, DType)> = (run.scenario.ops.iter())
        .filter_map(|op| match op.kind {
            OpKind::Gemm { dtype, .. } => Some((op.index as u32, dtype)),
            _ => None,
        })
        .collect();
    let mut first = Vec::new();
    for timeline in &run.timeline.ranks {
        let mut seen: Vec<DType> = Vec::new();
        let mut calls: Vec<&HostCall> = timeline.host.iter().collect();
        calls.sort_by_key(|call| call.start_ns);
        for call in calls {
            let Some(&(_, dtype)) = gemm_dtypes.iter().find(|(op, _)| *op == call.op) else {
                continue;
            };
            if !seen.contains(&dtype) {
                seen.push(dtype);
                first.push(call);
            }
        }
    }
    first
}

/// Per run: each rank's first GEMM call of each dtype, its host time less `launch_us`.
fn first_gemm_calls(runs: &[CalibrationRun], launch_us: f64) -> OpSamples {
    (runs.iter())
        .map(|run| {
            (first_gemm_calls_of(run).into_iter())
                .map(|c| us(c.end_ns as i64 - c.start_ns as i64) - launch_us)
                .collect()
        })
        .collect()
}

/// For blocking calls: host return minus the moment the GPU work it waited for ended (the last
/// kernel or collective end inside the call), where the call did block.
fn return_after_gpu(runs: &[CalibrationRun], keys: &[&str]) -> OpSamples {
    let mut out = Vec::new();
    for run in runs {
        let t = run.timeline;
        for op in t.ops.iter().filter(|op| keys.contains(&op.key.as_str())) {
            let mut samples = Vec::new();
            for rank in &t.ranks {
                let ends: Vec<u64> = rank
                    .kernels
                    .iter()
                    .map(|k| k.end_ns)
                    .chain(rank.collectives.iter().map(|c| c.end_ns))
                    .collect();
                for call in rank
                    .host
                    .iter()
                    .filter(|c| c.op == op.index && c.iteration >= t.scenario.warmup)
                {
                    let done = ends
                        .iter()
                        .filter(|&&end| end > call.start_ns && end <= call.end_ns)
                        .max();
                    if let Some(&done) = done {
                        samples.push(us(call.end_ns as i64 - done as i64));
                    }
                }
            }
            out.push(samples);
        }
    }
    out
}

/// How long before each collective record's call the rank's previous collective call returned
/// (`None` for the rank's first), by (rank, record) position.
fn gaps_since_previous_call(rank: &RankTimeline) -> Vec<Option<u64>> {
    let mut order: Vec<usize> = (0..rank.collectives.len()).collect();
    order.sort_by_key(|&i| rank.collectives[i].host_start_ns);
    let mut gaps = vec![None; rank.collectives.len()];
    let mut previous_return_ns: Option<u64> = None;
    for i in order {
        let call = &rank.collectives[i];
        gaps[i] = previous_return_ns.map(|returned| call.host_start_ns.saturating_sub(returned));
        previous_return_ns = Some(call.host_end_ns);
    }
    gaps
}

/// Whether a call `gap_ns` after the previous collective call is warm, cold or between, by
/// the model's thresholds (`host.collective_warm_within_us`, `host.collective_cold_after_us`).
fn warmth_of(gap_ns: Option<u64>, costs: &sim::scenario::HostCosts) -> Option<bool> {
    match gap_ns {
        Some(gap) if gap <= costs.collective_warm_within_ns => Some(true),
        Some(gap) if gap >= costs.collective_cold_after_ns => Some(false),
        _ => None,
    }
}

/// Host calls of the single synchronous collectives (`async_op=False`, one call per tensor) of
/// a run whose profile launches them on the current stream (R11), per op: those within
/// `collective_warm_within_us` of the previous call.
fn sync_calls_in_tight_loops(run: &CalibrationRun, gaps: &[Vec<Option<u64>>]) -> OpSamples {
    let t = run.timeline;
    let mut out = OpSamples::new();
    for op in &run.scenario.ops {
        let OpKind::Collective {
            async_op: false,
            batch: Batch::Each,
            ..
        } = op.kind
        else {
            continue;
        };
        if op.kind.is_point_to_point() {
            // A synchronous send or recv runs on the internal stream and waits (R11).
            continue;
        }
        out.push(
            t.ranks
                .iter()
                .zip(gaps)
                .flat_map(|(r, gaps)| r.collectives.iter().zip(gaps))
                .filter(|(c, gap)| {
                    c.op == op.index as u32
                        && c.iteration >= t.scenario.warmup
                        && warmth_of(**gap, &run.scenario.host) == Some(true)
                })
                .map(|(c, _)| us(c.host_end_ns as i64 - c.host_start_ns as i64))
                .collect(),
        );
    }
    out
}

/// The fitted cost of one collective call, async and synchronous on the current stream (µs).
#[derive(Clone, Copy)]
struct CallCosts {
    async_us: f64,
    sync_us: f64,
}

/// Per `_coalescing_manager` block (R25), the host time of each call it only records: the
/// block's host call less its launching call (synchronous on the current stream or not, R11),
/// over its tensors but the last.
fn coalesced_calls(runs: &[CalibrationRun], calls_us: CallCosts) -> OpSamples {
    let mut out = OpSamples::new();
    for run in runs {
        let t = run.timeline;
        for op in &run.scenario.ops {
            let OpKind::Collective {
                batch: Batch::Coalesced,
                tensor,
                async_op,
                ..
            } = op.kind
            else {
                continue;
            };
            let collective_us =
                if !async_op && run.scenario.torch.sync_collective_on_current_stream() {
                    calls_us.sync_us
                } else {
                    calls_us.async_us
                };
            let recorded = f64::from(run.scenario.tensors[tensor].count.saturating_sub(1));
            if recorded == 0.0 {
                continue;
            }
            out.push(
                t.ranks
                    .iter()
                    .flat_map(|r| &r.collectives)
                    .filter(|c| c.op == op.index as u32 && c.iteration >= t.scenario.warmup)
                    .map(|c| {
                        let block_us = us(c.host_end_ns as i64 - c.host_start_ns as i64);
                        ((block_us - collective_us) / recorded).max(0.0)
                    })
                    .collect(),
            );
        }
    }
    out
}

fn fit_host_costs(runs: &[CalibrationRun]) -> Vec<FittedValue> {
    let mut fitted = Vec::new();
    let mut collective = OpSamples::new();
    let mut warm = OpSamples::new();
    let mut cold = OpSamples::new();
    let mut tail = OpSamples::new();
    let mut wait = OpSamples::new();
    let mut sync_warm = OpSamples::new();
    for run in runs {
        let t = run.timeline;
        let blocking_wait = run.scenario.env.blocking_wait;
        let gaps: Vec<Vec<Option<u64>>> = t.ranks.iter().map(gaps_since_previous_call).collect();
        if run.scenario.torch.sync_collective_on_current_stream() {
            sync_warm.extend(sync_calls_in_tight_loops(run, &gaps));
        }
        for op in &t.ops {
            let records: Vec<_> = t
                .ranks
                .iter()
                .zip(&gaps)
                .flat_map(|(r, gaps)| r.collectives.iter().zip(gaps))
                .filter(|(c, _)| c.op == op.index && c.iteration >= t.scenario.warmup && c.async_op)
                .collect();
            if records.is_empty() {
                continue;
            }
            let host_call =
                |c: &&CollectiveRecord| us(c.host_end_ns as i64 - c.host_start_ns as i64);
            let of_warmth = |want: bool| -> Vec<f64> {
                records
                    .iter()
                    .filter(|(_, gap)| warmth_of(**gap, &run.scenario.host) == Some(want))
                    .map(|(c, _)| host_call(c))
                    .collect()
            };
            collective.push(records.iter().map(|(c, _)| host_call(c)).collect());
            warm.push(of_warmth(true));
            cold.push(of_warmth(false));
            // The torch engine cannot see the kernel start (it infers it from the call's
            // start, docs/torch.md): its Timelines say nothing of the tail.
            let kernel_start_seen =
                t.machine.get("backend").map(String::as_str) != Some(TORCH_BACKEND);
            tail.push(
                records
                    .iter()
                    .filter(|_| kernel_start_seen)
                    .filter(|(c, gap)| {
                        c.kernel_start_ns >= c.host_start_ns
                            && c.kernel_start_ns <= c.host_end_ns
                            && warmth_of(**gap, &run.scenario.host) == Some(true)
                    })
                    .map(|(c, _)| us(c.host_end_ns as i64 - c.kernel_start_ns as i64))
                    .collect(),
            );
            if !blocking_wait {
                wait.push(
                    records
                        .iter()
                        .filter_map(|(c, _)| c.wait.filter(|w| w.op != c.op))
                        .map(|w| us(w.host_end_ns as i64 - w.host_start_ns as i64))
                        .collect(),
                );
            }
        }
    }
    // Calls in a tight loop fit `collective_us` where the runs have them, and calls after a
    // long gap `collective_cold_us` (docs/torch.md#host-warmth); without tight loops every
    // call fits `collective_us`, as before the distinction.
    let has_warm = warm.iter().any(|samples| !samples.is_empty());
    fitted.extend(host_cost(
        "host.collective_us",
        if has_warm {
            "median over async collectives of each one's median host call, calls within host.collective_warm_within_us of the previous one (R10)"
        } else {
            "median over async collectives of each one's median host call (R10)"
        },
        if has_warm { warm } else { collective },
    ));
    fitted.extend(host_cost(
        "host.sync_collective_us",
        "median over synchronous collectives on the current stream of each one's median host call, calls within host.collective_warm_within_us of the previous one (R11)",
        sync_warm,
    ));
    let fitted_us = |key: &str| fitted.iter().find(|f| f.key == key).map(|f| f.value);
    let async_us = fitted_us("host.collective_us").unwrap_or(0.0);
    let calls_us = CallCosts {
        async_us,
        sync_us: fitted_us("host.sync_collective_us").unwrap_or(async_us),
    };
    fitted.extend(host_cost(
        "host.coalesced_call_us",
        "median over _coalescing_manager blocks of each one's median host time less its launching call, per recorded call (R25)",
        coalesced_calls(runs, calls_us),
    ));
    fitted.extend(host_cost(
        "host.collective_cold_us",
        "median over async collectives of each one's median host call, calls host.collective_cold_after_us or more after the previous one (R10)",
        cold,
    ));
    fitted.extend(host_cost(
        "host.collective_tail_us",
        "median of host return − NCCL stream start, where the stream started inside a warm call",
        tail,
    ));
    fitted.extend(host_cost(
        "host.wait_us",
        "median over waits of each one's median host time, blocking wait off (R12)",
        wait,
    ));
    fitted.extend(host_cost(
        "host.op_gap_us",
        "median over ops of each op's median host time since the previous op returned, runs of c10dsim torch (its interpreter's Python between calls)",
        gaps_before_ops(runs),
    ));
    let per_op = "median over ops of each op's median host time";
    fitted.extend(host_cost(
        "host.launch_us",
        per_op,
        host_durations(runs, &["gemm", "kernel", "gpu_sleep_us"]),
    ));
    let launch_us = (fitted.iter())
        .find(|f| f.key == "host.launch_us")
        .map_or(0.0, |f| f.value);
    fitted.extend(host_cost(
        "host.first_gemm_us",
        "median over runs of each one's median, per rank and dtype, of the first GEMM call's host time less host.launch_us (cuBLAS's first matmul of a dtype, R1)",
        first_gemm_calls(runs, launch_us),
    ));
    fitted.extend(host_cost(
        "host.event_us",
        per_op,
        host_durations(runs, &["record_event", "wait_event", "set_stream"]),
    ));
    fitted.extend(host_cost(
        "host.mark_us",
        per_op,
        host_durations(runs, &["mark"]),
    ));
    fitted.extend(host_cost(
        "host.query_us",
        per_op,
        host_durations(runs, &["is_completed"]),
    ));
    fitted.extend(host_cost(
        "host.sync_us",
        "median of host return − end of the GPU work waited for (R14)",
        return_after_gpu(runs, &["device_sync", "stream_sync", "event_sync"]),
    ));
    fitted.extend(host_cost(
        "host.item_us",
        "median of host return − end of the GPU work waited for (R14)",
        return_after_gpu(runs, &["item"]),
    ));
    fitted.extend(host_cost(
        "host.watchdog_stack_trace_us",
        "median of the watchdog's dump signal − its timeout detection, per rank (R27)",
        timeout_to_dump_signal(runs),
    ));
    fitted.extend(host_cost(
        "host.flight_recorder_dump_us",
        "median of the watchdog's exit − its dump signal, per rank, where that outlasted its sleep for the dumps (4 x TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC, R27)",
        dump_outlasting_the_sleep(runs),
    ));
    fitted
}

/// Per (run, op): the host time from the previous op's return to the op's call, in the torch
/// engine's Timelines (the interpreter's own Python between calls, outside every call's
/// bracket).
fn gaps_before_ops(runs: &[CalibrationRun]) -> OpSamples {
    let mut out = OpSamples::new();
    for run in runs {
        let t = run.timeline;
        if t.machine.get("backend").map(String::as_str) != Some(TORCH_BACKEND) {
            continue;
        }
        let mut per_op: Vec<Vec<f64>> = vec![Vec::new(); t.ops.len()];
        for rank in &t.ranks {
            let mut calls: Vec<_> = rank.host.iter().collect();
            calls.sort_by_key(|h| h.start_ns);
            for pair in calls.windows(2) {
                let (previous, call) = (pair[0], pair[1]);
                if call.iteration >= t.scenario.warmup && call.start_ns >= previous.end_ns {
                    per_op[call.op as usize]
                        .push(us(call.start_ns as i64 - previous.end_ns as i64));
                }
            }
        }
        out.extend(per_op);
    }
    out
}

/// Per (run, rank): the watchdog's first dump signal minus its first timeout detection, where
/// the rank's watchdog found a timeout and signalled the dump. A run with the Flight Recorder
/// off (`TORCH_FR_BUFFER_SIZE = 0`) symbolises no stack trace and signals at once: no sample.
fn timeout_to_dump_signal(runs: &[CalibrationRun]) -> OpSamples {
    let first = |t: &Timeline, rank: u32, event: WatchdogEvent| {
        t.watchdog
            .iter()
            .filter(|r| r.concerns(rank) && r.event == event)
            .map(|r| r.at_ns)
            .min()
    };
    runs.iter()
        .filter(|run| run.scenario.env.trace_buffer_entries > 0)
        .flat_map(|run| {
            let t = run.timeline;
            (0..t.ranks.len() as u32).filter_map(move |rank| {
                let found = first(t, rank, WatchdogEvent::Timeout)?;
                let signalled = first(t, rank, WatchdogEvent::DumpSignal)?;
                (signalled >= found).then(|| vec![us(signalled as i64 - found as i64)])
            })
        })
        .collect()
}

/// A process taken down this much after its sleep for the dumps ended waited for something
/// else: the dump itself (PyTorch 2.11 ends the sleep and goes down within 6 ms otherwise).
const DUMP_OUTLASTED_NS: u64 = 50_000_000;

/// Per rank of a run that took its process down after a dump signal, later than the sleep for
/// the dumps explains: from the signal to the watchdog's exit.
fn dump_outlasting_the_sleep(runs: &[CalibrationRun]) -> OpSamples {
    runs.iter()
        // In error-handling modes 1 and 2 the watchdog aborts the communicators before it goes
        // on, so its exit says nothing about the dump alone (R27).
        .filter(|run| !run.scenario.env.async_error_handling.cleans_up())
        .flat_map(|run| {
            let t = run.timeline;
            let sleep_ns = 4 * run.scenario.env.wait_timeout_dump_ns;
            (0..t.ranks.len() as u32).filter_map(move |rank| {
                let of_rank = |event: WatchdogEvent| {
                    t.watchdog.iter().filter(move |r| {
                        r.concerns(rank) && r.thread == ThreadKind::Watchdog && r.event == event
                    })
                };
                let signalled = of_rank(WatchdogEvent::DumpSignal).map(|r| r.at_ns).min()?;
                let exit = of_rank(WatchdogEvent::Exit)
                    .map(|r| r.at_ns)
                    .filter(|&at_ns| at_ns >= signalled)
                    .min()?;
                (exit - signalled > sleep_ns + DUMP_OUTLASTED_NS)
                    .then(|| vec![us((exit - signalled) as i64)])
            })
        })
        .collect()
}

/// A kernel far longer than its op's median (the process's first cuBLAS call) is no measure
/// of how long the GPU computed, nor of its clock.
const OUTLIER_FACTOR: f64 = 10.0;

/// A compute kernel of a rank, as the GEMM and boost fits read it.
struct ComputeKernel {
    op: u32,
    iteration: u32,
    duration_us: f64,
    /// The compute time the rank launched before it, outliers counted at their op's median.
    launched_before_us: f64,
}

/// Per rank, its compute kernels in start order.
fn compute_history(rank: &RankTimeline) -> Vec<ComputeKernel> {
    let mut kernels: Vec<_> = rank
        .kernels
        .iter()
        .filter(|k| k.class == KernelClass::Compute)
        .collect();
    kernels.sort_by_key(|k| k.start_ns);
    let duration_us = |k: &KernelRecord| us(k.end_ns as i64 - k.start_ns as i64);
    let mut by_op: std::collections::BTreeMap<u32, Vec<f64>> = Default::default();
    for k in &kernels {
        by_op.entry(k.op).or_default().push(duration_us(k));
    }
    let medians: std::collections::BTreeMap<u32, f64> =
        by_op.iter().map(|(op, d)| (*op, median(d))).collect();
    let mut before_us = 0.0;
    kernels
        .iter()
        .map(|k| {
            let entry = ComputeKernel {
                op: k.op,
                iteration: k.iteration,
                duration_us: duration_us(k),
                launched_before_us: before_us,
            };
            before_us += entry.duration_us.min(medians[&k.op] * OUTLIER_FACTOR);
            entry
        })
        .collect()
}

/// Per run, per rank, its compute history: walked once, read by both GEMM fits.
fn compute_histories(runs: &[CalibrationRun]) -> Vec<Vec<Vec<ComputeKernel>>> {
    (runs.iter())
        .map(|run| run.timeline.ranks.iter().map(compute_history).collect())
        .collect()
}

/// How many kernels the boost window's detection compares (the first ones, then a sliding run).
const BOOST_WINDOW_KERNELS: usize = 10;
/// A slowdown this large over the first kernels' median marks the sustained clock.
const SUSTAINED_SLOWDOWN: f64 = 1.05;

/// `cluster.boost_ms`: per rank of each run, over its bf16/f16 GEMM kernels in start order
/// (those within 3× of their median), the first ten's median is the boost duration; the first
/// run of ten whose median is 5% slower marks the settling, and its first kernel 5% slower is
/// where it happened: the compute time launched before that kernel. The median over the ranks
/// that slowed down; `None` where none did.
fn fit_boost_window(
    runs: &[CalibrationRun],
    histories: &[Vec<Vec<ComputeKernel>>],
) -> Option<FittedValue> {
    let mut windows_us = Vec::new();
    for (run, run_histories) in runs.iter().zip(histories) {
        let gemm_ops: Vec<u32> = run
            .scenario
            .ops
            .iter()
            .filter(|op| matches!(op.kind, OpKind::Gemm { dtype, .. } if dtype != DType::F32))
            .map(|op| op.index as u32)
            .collect();
        for history in run_histories {
            let gemms: Vec<(f64, f64)> = history
                .iter()
                .filter(|k| gemm_ops.contains(&k.op))
                .map(|k| (k.duration_us, k.launched_before_us))
                .collect();
            if gemms.len() < 3 * BOOST_WINDOW_KERNELS {
                continue;
            }
            let durations: Vec<f64> = gemms.iter().map(|g| g.0).collect();
            let typical = median(&durations);
            let regular: Vec<(f64, f64)> = gemms
                .into_iter()
                .filter(|g| g.0 < typical * 3.0 && g.0 > typical / 3.0)
                .collect();
            if regular.len() < 3 * BOOST_WINDOW_KERNELS {
                continue;
            }
            let first: Vec<f64> = regular[..BOOST_WINDOW_KERNELS]
                .iter()
                .map(|g| g.0)
                .collect();
            let base = median(&first);
            let settled =
                (BOOST_WINDOW_KERNELS..=regular.len() - BOOST_WINDOW_KERNELS).find(|&i| {
                    let next: Vec<f64> = regular[i..i + BOOST_WINDOW_KERNELS]
                        .iter()
                        .map(|g| g.0)
                        .collect();
                    median(&next) > base * SUSTAINED_SLOWDOWN
                });
            // The window's median turns once most of it is slow: the first slow kernel in it
            // is where the clock settled.
            if let Some(i) = settled {
                let threshold = base * SUSTAINED_SLOWDOWN;
                let first_slow = (i..i + BOOST_WINDOW_KERNELS)
                    .find(|&j| regular[j].0 > threshold)
                    .unwrap_or(i);
                windows_us.push(regular[first_slow].1);
            }
        }
    }
    if windows_us.is_empty() {
        return None;
    }
    let window_us = median(&windows_us);
    Some(FittedValue {
        key: "cluster.boost_ms".into(),
        value: window_us / 1e3,
        samples: windows_us.len(),
        residual: format!(
            "{:.1} ms",
            median_abs_residual(&windows_us, window_us) / 1e3
        ),
        method: "median over ranks whose GEMMs slowed by 5% of the compute time launched before the slowdown (the GPU's boost window)".into(),
    })
}

/// GEMM kernels: (FLOPs, duration µs, dtype, the run's nominal rate for the dtype in TFLOP/s,
/// whether at the sustained clock), per (run, op, clock) the median. With a boost window a
/// kernel launched after that much compute is at the sustained clock.
fn gemm_samples(
    runs: &[CalibrationRun],
    histories: &[Vec<Vec<ComputeKernel>>],
    boost_us: Option<f64>,
    profile_bf16_tflops: Option<f64>,
) -> Vec<(f64, f64, DType, f64, bool)> {
    let mut out = Vec::new();
    for (run, run_histories) in runs.iter().zip(histories) {
        let warmup = run.timeline.scenario.warmup;
        for op in &run.scenario.ops {
            let OpKind::Gemm { m, n, k, dtype } = op.kind else {
                continue;
            };
            let gpu = &run.scenario.cluster.gpu;
            let rate = match dtype {
                DType::Bf16 | DType::F16 => profile_bf16_tflops.unwrap_or(gpu.bf16_tflops),
                DType::F32 => gpu.fp32_tflops,
            };
            for sustained in [false, true] {
                let durations: Vec<f64> = (run_histories.iter().flatten())
                    .filter(|k| k.op == op.index as u32 && k.iteration >= warmup)
                    .filter(|k| boost_us.is_some_and(|b| k.launched_before_us >= b) == sustained)
                    .map(|k| k.duration_us)
                    .collect();
                if durations.is_empty() {
                    continue;
                }
                out.push((
                    2.0 * m as f64 * n as f64 * k as f64,
                    median(&durations),
                    dtype,
                    rate,
                    sustained,
                ));
            }
        }
    }
    out
}

/// The nominal BF16 rate the written profile simulates with, where it gives one: its own
/// `cluster.bf16_tflops` (the prior's), else that of the GPU preset it names (the runs' device,
/// else the prior's). The GEMM efficiency is fitted against it, so that efficiency × rate is
/// the measured rate even where the runs' scenarios name another GPU (an `hw` run of a
/// catalogue scenario, `gpu = "h100-sxm"`, on an A100).
fn profile_bf16_tflops(prior: &Profile, measured_gpu: Option<&str>) -> Option<f64> {
    if let Some(ProfileValue::Number(rate)) = prior.values.get("cluster.bf16_tflops") {
        return Some(*rate);
    }
    let gpu = match (measured_gpu, prior.values.get("cluster.gpu")) {
        (Some(gpu), _) => gpu,
        (None, Some(ProfileValue::Text(gpu))) => gpu.as_str(),
        (None, _) => return None,
    };
    sim::scenario::GpuSpec::preset(gpu).map(|spec| spec.bf16_tflops)
}

fn fit_gemms(runs: &[CalibrationRun], profile_bf16_tflops: Option<f64>) -> Vec<FittedValue> {
    let histories = compute_histories(runs);
    let boost = fit_boost_window(runs, &histories);
    let samples = gemm_samples(
        runs,
        &histories,
        boost.as_ref().map(|b| b.value * 1e3),
        profile_bf16_tflops,
    );
    let half: Vec<_> = samples
        .iter()
        .filter(|s| s.2 != DType::F32 && !s.4)
        .collect();
    if half.is_empty() {
        return Vec::new();
    }
    // "The fraction a large GEMM reaches": each GEMM weighs by its FLOPs, so the large ones,
    // which take the GPU's time, decide it (smaller ones reach less of the rate).
    let mut weighted: Vec<(f64, f64)> = half
        .iter()
        .map(|(flops, t, _, rate, _)| (flops / (t * 1e-6) / (rate * 1e12), *flops))
        .collect();
    let efficiency = weighted_median(&mut weighted);
    let relative = |flops: f64, t: f64, rate_tflops: f64| {
        let predicted = flops / (rate_tflops * 1e12 * efficiency) * 1e6;
        (predicted - t).abs() / t * 100.0
    };
    let half_residuals: Vec<f64> = half
        .iter()
        .map(|(f, t, _, r, _)| relative(*f, *t, *r))
        .collect();
    let mut fitted = vec![FittedValue {
        key: "cluster.gemm_efficiency".into(),
        value: efficiency,
        samples: half.len(),
        residual: format!("{:.1}% of duration", median(&half_residuals)),
        method: "FLOP-weighted median over bf16/f16 GEMMs at the boost clock of FLOPs / (duration · nominal bf16 rate)".into(),
    }];
    let sustained: Vec<f64> = samples
        .iter()
        .filter(|s| s.2 != DType::F32 && s.4)
        .map(|(flops, t, _, rate, _)| flops / (t * 1e-6) / (rate * 1e12) / efficiency)
        .collect();
    if let Some(boost) = boost.filter(|_| !sustained.is_empty()) {
        let clock = median(&sustained).min(1.0);
        fitted.push(boost);
        fitted.push(FittedValue {
            key: "cluster.sustained_clock".into(),
            value: clock,
            samples: sustained.len(),
            residual: format!("{:.3}", median_abs_residual(&sustained, clock)),
            method: "median over bf16/f16 GEMMs launched after the boost window of their rate / the boost rate".into(),
        });
    }
    let single: Vec<_> = samples
        .iter()
        .filter(|s| s.2 == DType::F32 && !s.4)
        .collect();
    if !single.is_empty() {
        let rates: Vec<f64> = single
            .iter()
            .map(|(flops, t, _, _, _)| flops / (t * 1e-6) / efficiency / 1e12)
            .collect();
        let rate = median(&rates);
        let residuals: Vec<f64> = single
            .iter()
            .map(|(f, t, _, _, _)| relative(*f, *t, rate))
            .collect();
        fitted.push(FittedValue {
            key: "cluster.fp32_tflops".into(),
            value: rate,
            samples: single.len(),
            residual: format!("{:.1}% of duration", median(&residuals)),
            method: "median over f32 GEMMs of FLOPs / (duration · gemm_efficiency) (the backend runs them as TF32)".into(),
        });
    }
    fitted
}

/// Telling the two one-rank cases apart: the stream was idle when the call was made (its Work
/// started before the call returned) or still busy (the Work started more than this after the
/// call returned, behind earlier work).
const BUSY_AFTER_RETURN_NS: i64 = 10_000;

/// A one-rank collective has no peer and no data (R16, R24), and NCCL enqueues no kernel for
/// it (all_to_all aside, which becomes a send/recv to itself). PyTorch's duration of it, from
/// the Work's start event to its end event (R6), is the network's floor where the stream was
/// busy when the call was made (the start event waits behind earlier work, and the launch
/// follows it). On an idle stream the start event fires as the host records it and the rest
/// follows NCCL's own enqueue: there the duration is the floor plus `nccl_launch_latency_us`.
/// Medians over real (not downscaled) one-rank collectives of each one's median.
/// The samples `sample` takes from the measured calls (after the warm-up) of each collective op
/// `keep_op` selects, one list per (run, op), over the runs `keep_run` selects. `sample` sees
/// the record and the host time since the rank's previous collective call returned (`None`:
/// the first call); it returns `None` to leave the call out.
fn per_collective_op<T>(
    runs: &[CalibrationRun],
    keep_run: impl Fn(&Timeline) -> bool,
    keep_op: impl Fn(&Scenario, &OpKind) -> bool,
    sample: impl Fn(&CalibrationRun, &CollectiveRecord, Option<u64>) -> Option<T>,
) -> Vec<Vec<T>> {
    let mut out = Vec::new();
    for run in runs.iter().filter(|run| keep_run(run.timeline)) {
        let t = run.timeline;
        let gaps: Vec<Vec<Option<u64>>> = t.ranks.iter().map(gaps_since_previous_call).collect();
        for op in (run.scenario.ops.iter()).filter(|op| keep_op(run.scenario, &op.kind)) {
            out.push(
                (t.ranks.iter().zip(&gaps))
                    .flat_map(|(r, gaps)| r.collectives.iter().zip(gaps))
                    .filter(|(c, _)| c.op == op.index as u32 && c.iteration >= t.scenario.warmup)
                    .filter_map(|(c, &gap)| sample(run, c, gap))
                    .collect(),
            );
        }
    }
    out
}

/// A collective of a one-rank group: a real NCCL call at world size 1.
fn one_rank_collective(scenario: &Scenario, kind: &OpKind) -> Option<CollectiveKind> {
    match *kind {
        OpKind::Collective {
            group, collective, ..
        } if scenario.groups[group].ranks.len() == 1 => Some(collective),
        _ => None,
    }
}

/// Host time from a call's return to its collective's start event: past
/// `BUSY_AFTER_RETURN_NS`, the start event waited behind earlier work on a busy stream.
fn start_after_return_ns(c: &CollectiveRecord) -> i64 {
    c.work_start_ns.unwrap_or(c.kernel_start_ns) as i64 - c.host_end_ns as i64
}

fn fit_one_rank_collectives(runs: &[CalibrationRun]) -> Vec<FittedValue> {
    let real = |t: &Timeline| t.machine.get("downscale").is_none_or(|d| d == "off");
    let not_all_to_all = |scenario: &Scenario, kind: &OpKind| {
        one_rank_collective(scenario, kind).is_some_and(|c| c != CollectiveKind::AllToAll)
    };
    let busy = per_collective_op(runs, real, not_all_to_all, |_, c, _| {
        (start_after_return_ns(c) > BUSY_AFTER_RETURN_NS).then(|| us(c.duration_ns()))
    });
    // The launch path after the start event is as warm as the call (CallWarmth).
    let idle = per_collective_op(runs, real, not_all_to_all, |run, c, gap| {
        let warm = warmth_of(gap, &run.scenario.host) == Some(true);
        (start_after_return_ns(c) <= 0 && warm).then(|| us(c.duration_ns()))
    });
    let Some(floor) = host_cost(
        "network.kernel_floor_us",
        "median over real one-rank collectives issued while their stream was busy of each one's median duration, start event to end event (R6, R24)",
        busy,
    ) else {
        return Vec::new();
    };
    let launch = host_cost(
        "host.nccl_launch_latency_us",
        "median over real one-rank collectives issued on an idle stream in a tight loop (within host.collective_warm_within_us of the previous call) of each one's median duration, start event to end event, less the floor (R6)",
        idle,
    )
    .map(|idle| FittedValue {
        value: (idle.value - floor.value).max(0.0),
        ..idle
    });
    std::iter::once(floor).chain(launch).collect()
}

/// A one-rank all_to_all is NCCL's send and receive to itself: a copy of the whole buffer
/// (`network.self_copy_gbps`). Per op, the median of bytes / duration (start event to end
/// event, R6) over the calls made while the stream was busy (the start event waits behind
/// earlier work, so the duration is the copy's); the median over ops. Downscaled runs count:
/// their collective ran at one rank for real.
fn fit_self_copy(runs: &[CalibrationRun]) -> Option<FittedValue> {
    let all_to_all = |scenario: &Scenario, kind: &OpKind| {
        one_rank_collective(scenario, kind) == Some(CollectiveKind::AllToAll)
    };
    let rates = per_collective_op(
        runs,
        |_| true,
        all_to_all,
        |_, c, _| {
            (start_after_return_ns(c) > BUSY_AFTER_RETURN_NS && c.duration_ns() > 0)
                .then(|| c.bytes as f64 / c.duration_ns() as f64)
        },
    );
    host_cost(
        "network.self_copy_gbps",
        "median over one-rank all_to_alls issued while their stream was busy of each one's median bytes / duration, start event to end event (R6, R24)",
        rates,
    )
    .map(|fitted| FittedValue {
        residual: fitted.residual.replace(" µs", " GB/s"),
        ..fitted
    })
}

/// Where the torch engine placed a collective's input-ready point at the Work's creation (the
/// Flight Recorder's `time_created_ns`, `machine.work_created` says whether it could).
fn knows_work_creation(t: &Timeline) -> bool {
    t.machine.get("backend").map(String::as_str) == Some(TORCH_BACKEND)
        && t.machine
            .get("work_created")
            .is_some_and(|w| w.contains("used for input_ready_ns"))
}

/// The part of a collective call from the Work's creation to the kernel launch (R10a, R10c):
/// per collective op (one call per tensor) of the torch Timelines that know when each Work was
/// created, the median of host return − input-ready point over warm calls whose point lies
/// inside the call, less the tail after the launch (`tail_us`, which the torch engine cannot
/// see). Kept within the fitted calls, less the tail.
fn fit_collective_enqueue(
    runs: &[CalibrationRun],
    tail_us: f64,
    shortest_call_us: f64,
) -> Option<FittedValue> {
    let each = |_: &Scenario, kind: &OpKind| {
        matches!(
            kind,
            OpKind::Collective {
                batch: Batch::Each,
                ..
            }
        )
    };
    let after_creation = per_collective_op(runs, knows_work_creation, each, |run, c, gap| {
        let inside_call = c.input_ready_ns >= c.host_start_ns && c.input_ready_ns <= c.host_end_ns;
        let warm = warmth_of(gap, &run.scenario.host) == Some(true);
        (inside_call && warm).then(|| us(c.host_end_ns as i64 - c.input_ready_ns as i64))
    });
    let fitted = host_cost(
        "host.collective_enqueue_us",
        "median over collectives of each one's median host return − input-ready point at the Work's creation (the Flight Recorder's time_created_ns), warm calls, less host.collective_tail_us (R10a)",
        after_creation,
    )?;
    let most_us = (shortest_call_us - tail_us).max(0.0);
    Some(FittedValue {
        value: (fitted.value - tail_us).clamp(0.0, most_us),
        ..fitted
    })
}

/// The GPU preset of the measured device (`machine.device`, e.g. `NVIDIA H200`), when every run
/// names the same one.
fn measured_gpu_preset(runs: &[CalibrationRun]) -> Option<&'static str> {
    let preset = |device: &str| {
        let device = device.to_ascii_uppercase();
        [("H200", "h200"), ("H100", "h100-sxm"), ("A100", "a100")]
            .into_iter()
            .find(|(needle, _)| device.contains(needle))
            .map(|(_, preset)| preset)
    };
    let mut presets = runs
        .iter()
        .map(|run| run.timeline.machine.get("device").and_then(|d| preset(d)));
    let first = presets.next()??;
    presets.all(|p| p == Some(first)).then_some(first)
}

/// The GPUs the runs ran on, each with its number of runs, when they are more than one:
/// `55 on NVIDIA H200 and 8 on NVIDIA H100 80GB HBM3` (most runs first). Each run's GPU is its
/// `machine.device`, else a simulated Timeline's `machine.gpu` preset. Such a fit puts every
/// GPU's host costs and rates into one value each, and the profile names no GPU of its own.
pub fn runs_per_gpu(runs: &[CalibrationRun]) -> Option<String> {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for run in runs {
        let machine = &run.timeline.machine;
        let gpu = machine
            .get("device")
            .or(machine.get("gpu"))
            .map_or("no GPU recorded", String::as_str);
        *counts.entry(gpu).or_default() += 1;
    }
    if counts.len() < 2 {
        return None;
    }
    let mut counts: Vec<(&str, usize)> = counts.into_iter().collect();
    counts.sort_by_key(|&(_, runs)| std::cmp::Reverse(runs));
    let parts: Vec<String> = counts
        .iter()
        .map(|(gpu, runs)| format!("{runs} on {gpu}"))
        .collect();
    let (last, first) = parts.split_last().expect("at least two GPUs");
    Some(format!("{} and {last}", first.join(", ")))
}

/// The result of a calibration: the fitted values and the profile they make.
#[derive(Debug, Clone, PartialEq)]
pub struct Calibration {
    pub fitted: Vec<FittedValue>,
    /// `prior` with every fitted value replaced (its `about` ending in the notes).
    pub profile: Profile,
    /// What the runs could not fit and why (the network from one collective size), printed
    /// under the table.
    pub notes: Vec<String>,
}

/// Why a Timeline gives `calibrate` nothing to fit, if it does not: no rank kept a host call or
/// a kernel (a process that ended before its first op, or a summarised run). Such a run is left
/// out of a calibration that has other runs, and refused alone.
pub fn nothing_to_fit(timeline: &Timeline) -> Option<String> {
    let empty = !timeline.ranks.iter().any(RankTimeline::has_records);
    empty.then(|| {
        let why = if timeline.summary.is_some() {
            " (a summarised Timeline keeps the records of --records-for only: calibrate from \
             a run without --summary, or name the ranks and iterations to keep)"
        } else {
            ""
        };
        format!("the Timeline holds no host call or kernel of any rank: nothing to fit{why}")
    })
}

/// A measured Timeline belongs to the scenario it is paired with: the same program, op by op
/// (key and name), and the same rank count. A Timeline of another scenario would fit the
/// profile to unrelated records.
pub fn check_pairing(timeline: &Timeline, scenario: &Scenario) -> Result<(), String> {
    if timeline.scenario.ranks != scenario.cluster.ranks {
        return Err(format!(
            "the Timeline ran {}, the scenario has {}: not a run of this scenario",
            crate::text::counted(u64::from(timeline.scenario.ranks), "rank"),
            scenario.cluster.ranks
        ));
    }
    if timeline.ops.len() != scenario.ops.len() {
        return Err(format!(
            "the Timeline's program has {} ops, the scenario's {}: not a run of this scenario",
            timeline.ops.len(),
            scenario.ops.len()
        ));
    }
    for (recorded, op) in timeline.ops.iter().zip(&scenario.ops) {
        let name = op.display_name();
        if recorded.key != op.kind.key() || recorded.name != name {
            return Err(format!(
                "op {} is {} {:?} in the Timeline but {} {name:?} in the scenario: not a run of this scenario",
                op.index,
                recorded.key,
                recorded.name,
                op.kind.key()
            ));
        }
    }
    Ok(())
}

/// Fits a profile to measured runs, starting from `prior` (kept for what the runs cannot fit).
pub fn calibrate(runs: &[CalibrationRun], prior: &Profile) -> Calibration {
    let mut fitted = fit_host_costs(runs);
    let value_of = |fitted: &[FittedValue], key: &str| {
        fitted
            .iter()
            .find(|f| f.key == key)
            .map(|f| f.value)
            .or(match prior.values.get(key) {
                Some(ProfileValue::Number(value)) => Some(*value),
                _ => None,
            })
    };
    let tail_us =
        value_of(&fitted, "host.collective_tail_us").unwrap_or(super::DEFAULT_COLLECTIVE_TAIL_US);
    let shortest_call_us = [
        "host.collective_us",
        "host.sync_collective_us",
        "host.collective_cold_us",
    ]
    .iter()
    .filter_map(|key| value_of(&fitted, key))
    .fold(f64::INFINITY, f64::min);
    fitted.extend(fit_collective_enqueue(runs, tail_us, shortest_call_us));
    let measured_gpu = measured_gpu_preset(runs);
    fitted.extend(fit_gemms(runs, profile_bf16_tflops(prior, measured_gpu)));
    let points = super::network::collective_points(runs);
    let network = super::network::fit_network(&points);
    let mut notes = Vec::new();
    if network.is_empty() && !points.is_empty() {
        let why = if super::network::tell_alpha_from_bandwidth(&points) {
            "no line with a positive bandwidth fits the collectives' kernel times"
        } else {
            "the collectives are of one size, which cannot tell α from the bandwidth"
        };
        notes.push(format!(
            "[network] not fitted: {why}; alpha_us and nvlink_gbps are the prior's or the defaults"
        ));
    }
    fitted.extend(network);
    fitted.extend(fit_one_rank_collectives(runs));
    fitted.extend(fit_self_copy(runs));
    let mut profile = prior.clone();
    if let Some(preset) = measured_gpu {
        profile
            .values
            .insert("cluster.gpu".into(), ProfileValue::Text(preset.into()));
    }
    for value in &mut fitted {
        // Three decimals are far below every residual; the table prints what is written. A
        // negative value rounded to zero is zero, not `-0.0`.
        let rounded = (value.value * 1e3).round() / 1e3;
        value.value = if rounded == 0.0 { 0.0 } else { rounded };
        profile
            .values
            .insert(value.key.clone(), ProfileValue::Number(value.value));
    }
    for note in &notes {
        profile.about = format!("{}; {note}", profile.about);
    }
    Calibration {
        fitted,
        profile,
        notes,
    }
}

/// The fitted values as a table: key, value, samples, residual, method.
pub fn render_fitted(fitted: &[FittedValue]) -> String {
    let mut out = format!(
        "{:<26} {:>12} {:>8}  {:<24} {}\n",
        "parameter", "value", "samples", "residual", "method"
    );
    for f in fitted {
        let _ = writeln!(
            out,
            "{:<26} {:>12.3} {:>8}  {:<24} {}",
            f.key, f.value, f.samples, f.residual, f.method
        );
    }
    out
}
