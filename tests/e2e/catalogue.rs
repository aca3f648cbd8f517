//! End-to-end tests driven by the scenario catalogue: every file in `scenarios/` is run, and
//! its outcome checked against figures derived from the model's inputs (the arithmetic is
//! stated beside each check). A shipped scenario without an entry here fails the suite.
//!
//! About 900 lines: one check function per catalogue scenario and the table naming them;
//! split by scenario family (faults, overlap, memory) if the catalogue grows.

use crate::util::{load, run_with, scenarios_dir};
use crate::{faults, lifetime, process_group};
use analysis::metrics::{report, CollectiveMetrics, OverlapValue, Report};
use sim::timeline::{KernelRecord, OpInfo, RankTimeline, Timeline};

/// Checks a scenario's outcome from its Timeline and report.
type Check = fn(&Timeline, &Report);

/// Every shipped scenario and the check of its outcome.
const CATALOGUE: &[(&str, Check)] = &[
    ("exp_a_api_modes.toml", check_exp_a),
    ("exp_a_sweep.toml", check_exp_a_sweep),
    ("exp_b_stream_scope.toml", check_exp_b),
    ("nccl_tests_all_reduce.toml", check_nccl_tests_all_reduce),
    ("overlap_bench.toml", check_overlap_bench),
    ("overlap_sweep.toml", check_overlap_sweep),
    ("sm_contention.toml", check_sm_contention),
    ("straggler.toml", check_straggler),
    ("coalescing.toml", check_coalescing),
    ("all_to_all.toml", check_all_to_all),
    ("send_recv.toml", check_send_recv),
    ("get_future.toml", check_get_future),
    ("unwaited_work.toml", lifetime::check_unwaited_work),
    ("batch_isend_irecv.toml", check_batch_isend_irecv),
    ("hang_10min.toml", faults::check_hang_10min),
    ("watchdog_stuck.toml", faults::check_watchdog_stuck),
    (
        "gpu_backlog_timeout.toml",
        faults::check_gpu_backlog_timeout,
    ),
    ("mismatch.toml", faults::check_mismatch),
    ("rank0_crash_init.toml", faults::check_rank0_crash_init),
    ("async_error.toml", faults::check_async_error),
    ("caught_timeout.toml", faults::check_caught_timeout),
    ("wait_timeout.toml", faults::check_wait_timeout),
    ("timeout_dump.toml", faults::check_timeout_dump),
    (
        "functional_collective.toml",
        faults::check_functional_collective,
    ),
    ("races_4_6.toml", lifetime::check_races_4_6),
    ("races_streams.toml", lifetime::check_races_streams),
    ("frag_killer.toml", lifetime::check_frag_killer),
    ("frag_seed.toml", lifetime::check_frag_seed),
    ("lifetime_peak.toml", lifetime::check_lifetime_peak),
    ("launch_queue.toml", check_launch_queue),
    (
        "process_group_setup.toml",
        process_group::check_process_group_setup,
    ),
];

/// R1 bounded by CUDA's launch queue (`host.launch_queue_depth` = 1022): 1,022 launches of
/// 5 µs each (5.1 ms) return before the first 12 ms kernel ends; launch 1,022 returns when
/// kernel 0 ends, and each later one when the next kernel ends.
fn check_launch_queue(timeline: &Timeline, _report: &Report) {
    let rank = &timeline.ranks[0];
    assert_eq!(rank.host.len(), 1026);
    let first_end_ns = rank.kernels[0].end_ns;
    assert_eq!(rank.host[1021].end_ns, 1022 * 5_000);
    assert!(rank.host[1021].end_ns < first_end_ns);
    for (call, kernel) in (1022..1026).zip(0..) {
        assert_eq!(
            rank.host[call].end_ns, rank.kernels[kernel].end_ns,
            "call {call}"
        );
    }
    assert!(timeline.findings.is_empty(), "{:?}", timeline.findings);
}

fn collective<'r>(report: &'r Report, name: &str) -> &'r CollectiveMetrics {
    report
        .collectives
        .iter()
        .find(|c| c.op == name)
        .unwrap_or_else(|| panic!("no collective {name} in the report"))
}

fn overlap<'r>(report: &'r Report, name: &str) -> &'r OverlapValue {
    report
        .overlaps
        .iter()
        .find(|o| o.name == name)
        .unwrap_or_else(|| panic!("no overlap {name} in the report"))
}

fn assert_close(actual: f64, expected: f64, tolerance: f64, what: &str) {
    assert!(
        (actual - expected).abs() <= tolerance,
        "{what}: {actual} is not within {tolerance} of {expected}"
    );
}

#[test]
fn every_shipped_scenario_runs_and_shows_its_outcome() {
    let mut shipped: Vec<String> = std::fs::read_dir(scenarios_dir())
        .expect("scenarios/ exists")
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".toml"))
        .collect();
    shipped.sort();
    let mut listed: Vec<&str> = CATALOGUE.iter().map(|(name, _)| *name).collect();
    listed.sort_unstable();
    assert_eq!(
        shipped, listed,
        "every shipped scenario needs a check in CATALOGUE"
    );
    for (name, check) in CATALOGUE {
        let scenario = load(name, &[]);
        let timeline = sim::engine::simulate(&scenario);
        // Fault scenarios end in findings on purpose; every other one ends without.
        assert_eq!(
            faults::finding_kinds(&timeline),
            faults::expected_findings(name),
            "{name}: unexpected findings {:?}",
            timeline.findings
        );
        check(&timeline, &report(&timeline));
    }
}

/// Experiment B: 130 ms sleep on the default stream, 64 MiB async all_reduce, wait() on
/// wait_stream + marker, marker on free_stream.
fn check_exp_b(_timeline: &Timeline, report: &Report) {
    // R12: the free stream never waits for the collective; the wait stream does — the wait
    // marker fires after the free marker in every sample (4 ranks x 40 measured repeats).
    let order = report
        .measures
        .iter()
        .find(|m| m.name == "wait_marker_after_free_marker")
        .unwrap();
    assert_eq!(order.positive_fraction, 1.0);
    assert_eq!(order.value_us.samples, 4 * 40);
    let ar = collective(report, "ar");
    // Host wait() = the scenario's wait_us (5.4 µs): it does not block (R12).
    assert_close(ar.wait_us.unwrap().median, 5.4, 1e-9, "host wait() in µs");
    // R13: right after wait() the Work is not complete in any repeat.
    assert_eq!(ar.completed_at_wait, Some(0.0));
    // The wait marker trails the free marker by the sleep (130 ms, minus the host time spent
    // between the two markers' launches) plus the all_reduce: 6·2.5 µs + 1.5·64 MiB/113.3 GB/s
    // = 903.467 µs.
    assert_close(
        ar.kernel_us.median,
        15.0 + 1.5 * 67_108_864.0 / 113.3e9 * 1e6,
        0.01,
        "kernel",
    );
    let gap = &report.measures[0];
    assert_eq!(gap.name, "wait_marker_after_free_marker");
    assert_eq!(gap.positive_fraction, 1.0);
    assert!(gap.value_us.median > 130_000.0 && gap.value_us.median < 131_000.0);
}

/// The model's inputs for experiment A (exp_a_api_modes.toml).
const COLLECTIVE_US: f64 = 70.0;
const TAIL_US: f64 = 20.0;
const WAIT_US: f64 = 4.15;
const LATENCY_US: f64 = 3.0;
const SIZES: [(&str, f64); 4] = [
    ("1KiB", 1024.0),
    ("1MiB", 1048576.0),
    ("64MiB", 67108864.0),
    ("256MiB", 268435456.0),
];

/// R24 for 4 ranks: 6·α + 2·3/4 · S/B with α = 2.5 µs, B = 113.3 GB/s.
fn exp_a_kernel_us(bytes: f64) -> f64 {
    6.0 * 2.5 + 1.5 * bytes / 113.3e9 * 1e6
}

fn check_exp_a(_timeline: &Timeline, report: &Report) {
    let mut previous_interval = 0.0;
    for (size, bytes) in SIZES {
        let kernel_us = exp_a_kernel_us(bytes);
        let sync = collective(report, &format!("sync_{size}"));
        let with_wait = collective(report, &format!("async_{size}"));
        // 2.5 profile: the sync API is the call plus the wrapper's non-blocking wait() (R11).
        assert_close(
            sync.host_call_us.median,
            COLLECTIVE_US + WAIT_US,
            1e-6,
            "sync host call",
        );
        assert_close(
            with_wait.host_call_us.median,
            COLLECTIVE_US,
            1e-6,
            "async host call",
        );
        assert_close(with_wait.wait_us.unwrap().median, WAIT_US, 1e-6, "wait()");
        assert_close(with_wait.kernel_us.median, kernel_us, 0.01, "kernel");
        // The stream is released at the later of the kernel's end (launch latency + kernel
        // after the input-ready point) and the wait's enqueue (tail + wait after it).
        let interval = (LATENCY_US + kernel_us).max(TAIL_US + WAIT_US);
        assert_close(
            with_wait.stream_interval_us.median,
            interval,
            0.01,
            "stream interval",
        );
        assert!(
            interval >= previous_interval,
            "the stream interval grows with size"
        );
        previous_interval = interval;
        // is_completed() right after wait() returned: only when the kernel ended before the
        // wait returned, i.e. 3 + kernel < 20 + 4.15 — true for 1 KiB (18.0 µs) alone.
        let expected = if LATENCY_US + kernel_us < TAIL_US + WAIT_US {
            1.0
        } else {
            0.0
        };
        assert_eq!(with_wait.completed_at_wait, Some(expected), "{size}");
        // Device sync: the host pays the whole interval (R14).
        let devsync = report
            .measures
            .iter()
            .find(|m| m.name == format!("devsync_{size}_host"))
            .unwrap();
        // mark 2 + call (up to the launch) 50 + latency 3 + kernel + sync 5, or the call's
        // return (70) + sync 5 when the kernel ended first.
        let expected_host =
            2.0 + (COLLECTIVE_US - TAIL_US + LATENCY_US + kernel_us).max(COLLECTIVE_US) + 5.0;
        assert_close(
            devsync.value_us.median,
            expected_host,
            0.01,
            "device sync host time",
        );
    }
    // 256 MiB: host call of microseconds, stream interval of milliseconds ([streams] experiment A:
    // 74 µs vs 3584 µs).
    let big = collective(report, "sync_256MiB");
    assert!(big.stream_interval_us.median / big.host_call_us.median > 40.0);
}

#[test]
fn timing_adds_a_start_event_per_work_and_moves_nothing_r6() {
    // TORCH_NCCL_ENABLE_TIMING: every Work records a start event before its kernel (both
    // engines execute it); an event record takes no GPU time, so the simulated run is the
    // same but for the start times. The event fires as the host records it on an idle stream,
    // the kernel `nccl_launch_latency_us` later (3 µs here), so PyTorch's duration, from the
    // start event to the end event, is that much longer than the kernel.
    let plain = run_with("exp_a_api_modes.toml", &[]);
    let timed = run_with("exp_a_api_modes.toml", &["env.TORCH_NCCL_ENABLE_TIMING=1"]);
    for (a, b) in plain.ranks.iter().zip(&timed.ranks) {
        assert_eq!(a.host, b.host);
        assert_eq!(a.kernels, b.kernels);
        let untimed: Vec<_> = b
            .collectives
            .iter()
            .map(|c| sim::timeline::CollectiveRecord {
                work_start_ns: None,
                ..c.clone()
            })
            .collect();
        assert_eq!(a.collectives, untimed);
        assert!(a.collectives.iter().all(|c| c.work_start_ns.is_none()));
        for c in &b.collectives {
            let start_ns = c.work_start_ns.expect("a timed Work has a start event");
            assert!(start_ns <= c.kernel_start_ns, "{c:?}");
            assert_eq!(c.duration_ns(), (c.end_ns - start_ns) as i64);
        }
        let launch_behind_ns: Vec<u64> = b
            .collectives
            .iter()
            .map(|c| c.kernel_start_ns - c.work_start_ns.unwrap())
            .collect();
        assert!(launch_behind_ns.contains(&3_000), "{launch_behind_ns:?}");
    }
    let steps = |overrides: &[&str]| {
        let scenario = load("exp_a_api_modes.toml", overrides);
        let mut pg = sim::pg::ProcessGroupNccl::new(&scenario, 0);
        let mut steps = Vec::new();
        for op in scenario.ops.iter().filter(|op| op.runs_on(0)) {
            pg.op(&scenario, op, &mut steps).unwrap();
        }
        let collectives = steps
            .iter()
            .filter(|s| matches!(s, sim::pg::Step::Nccl(_)))
            .count();
        let records = steps
            .iter()
            .filter(|s| matches!(s, sim::pg::Step::Record { .. }))
            .count();
        (collectives, records)
    };
    let (collectives, untimed_records) = steps(&[]);
    assert!(collectives > 0);
    assert_eq!(
        steps(&["env.TORCH_NCCL_ENABLE_TIMING=1"]),
        (collectives, untimed_records + collectives)
    );
}

#[test]
fn blocking_wait_quantises_the_host_wait_to_the_poll_interval() {
    for (profile, poll_us) in [("2.5", 10_000.0), ("2.12", 1_000.0)] {
        let timeline = run_with(
            "exp_a_api_modes.toml",
            &[
                "env.TORCH_NCCL_BLOCKING_WAIT=1",
                &format!("torch={profile}"),
            ],
        );
        let report = report(&timeline);
        for (size, bytes) in SIZES {
            let with_wait = collective(&report, &format!("async_{size}"));
            // R15: the first poll comes right after the stream block, at launch + 20 + 4.15 µs;
            // then every poll interval. The kernel ends at launch + 3 + kernel.
            let first_poll = TAIL_US + WAIT_US;
            let done = LATENCY_US + exp_a_kernel_us(bytes);
            let polls = if done <= first_poll {
                0.0
            } else {
                ((done - first_poll) / poll_us).ceil()
            };
            let expected = WAIT_US + polls * poll_us;
            assert_close(
                with_wait.wait_us.unwrap().median,
                expected,
                1e-6,
                &format!("{profile} {size} blocking wait"),
            );
            if size != "1KiB" {
                // Quantised: a whole number of polls, never the kernel's own duration.
                let steps = (with_wait.wait_us.unwrap().median - WAIT_US) / poll_us;
                assert!(steps >= 1.0 && (steps - steps.round()).abs() < 1e-9);
            }
        }
        // 2.5: the sync API's wrapper wait() blocks too (R11, R15); 2.12 sync runs on the
        // current stream without a Work, so its host call does not poll.
        let sync = collective(&report, "sync_1MiB");
        if profile == "2.5" {
            assert_close(
                sync.host_call_us.median,
                COLLECTIVE_US + WAIT_US + poll_us,
                1e-6,
                "2.5 sync",
            );
        } else {
            assert_close(sync.host_call_us.median, COLLECTIVE_US, 1e-6, "2.12 sync");
        }
    }
}

/// Overlap benchmark: 25 MiB all_reduce (8 ranks, α = 5 µs, B = 450 GB/s) and an 8192³ bf16 GEMM
/// (989 TFLOP/s · 0.7) on 132 SMs; the NCCL kernel holds 16 channels = 16 SMs (R22).
fn check_overlap_bench(_timeline: &Timeline, report: &Report) {
    let ar_us = 14.0 * 5.0 + 1.75 * 26_214_400.0 / 450e9 * 1e6; // 171.945
    let gemm_us = 2.0 * 8192f64.powi(3) / (989e12 * 0.7) * 1e6; // 1588.2
    let sm_share = 16.0 / 132.0;
    let none = overlap(report, "none");
    assert_close(none.comm_us, ar_us, 0.01, "ar alone");
    assert_close(none.compute_us, gemm_us, 0.01, "gemm alone");
    // none: the all_reduce starts first and holds 16 SMs; the GEMM runs on 116 of 132 while it
    // lasts, losing 16·ar SM·µs: both = gemm + ar·16/132, overlap = 1 − 16/132 (R22).
    assert_close(
        none.both_us,
        gemm_us + ar_us * sm_share,
        0.01,
        "both (none)",
    );
    assert_close(none.overlap, 1.0 - sm_share, 1e-4, "none");
    // early_wait and async_op=False: the GEMM queues behind the all_reduce: both = ar + gemm.
    assert_close(
        overlap(report, "early_wait").overlap,
        0.0,
        1e-6,
        "early_wait",
    );
    assert_close(
        overlap(report, "async_false").overlap,
        0.0,
        1e-6,
        "async_false",
    );
    // sync: the host waits for every stream, then sync (5) + launch (5) + latency (3) µs pass
    // before the GEMM starts: both = ar + 13 + gemm, overlap = −13/ar.
    assert_close(overlap(report, "sync").overlap, -13.0 / ar_us, 1e-4, "sync");
    // item: the host waits for the *current* stream only (R14). The all_reduce starts when that
    // stream reaches the input-ready point, the same moment .item() can return; item (15) +
    // launch (5) + latency (3) µs later the GEMM starts, on 116 SMs for the rest of the
    // all_reduce: overlap = (ar − 23)·(116/132)/ar.
    let item = (ar_us - 23.0) * (1.0 - sm_share) / ar_us;
    assert_close(overlap(report, "item").overlap, item, 1e-4, "item");
}

/// Experiment A as a sweep (exp_a_sweep.toml), base point: 256 MiB, sync API, no blocking wait,
/// PyTorch 2.5 profile, the inputs of exp_a_api_modes.toml. The whole grid is checked in
/// `sweep.rs`.
fn check_exp_a_sweep(_timeline: &Timeline, report: &Report) {
    let kernel_us = exp_a_kernel_us(268_435_456.0); // 6·2.5 + 1.5·256 MiB/113.3 GB/s = 3568.867
    let ar = collective(report, "ar");
    // 2.5 sync API: the call plus the wrapper's non-blocking wait() (R11): 70 + 4.15 µs.
    assert_close(
        ar.host_call_us.median,
        COLLECTIVE_US + WAIT_US,
        1e-6,
        "sync host call",
    );
    assert_close(ar.kernel_us.median, kernel_us, 0.01, "kernel (R24)");
    // The stream is released when the kernel ends: launch latency 3 µs + kernel after the
    // input-ready point (the wrapper's wait is enqueued 24.15 µs after it, earlier).
    assert_close(
        ar.stream_interval_us.median,
        LATENCY_US + kernel_us,
        0.01,
        "interval",
    );
    assert_eq!(
        ar.completed_at_wait,
        Some(0.0),
        "3571.9 µs kernel vs 24.15 µs host"
    );
    // start mark (2 µs) + the call (74.15 µs) + the no-op finish (event_us = 0) on the host.
    let host = report
        .measures
        .iter()
        .find(|m| m.name == "mode_host")
        .unwrap();
    assert_close(
        host.value_us.median,
        2.0 + COLLECTIVE_US + WAIT_US,
        1e-6,
        "mode_host",
    );
}

/// The overlap sweep (overlap_sweep.toml), base point: killer none, 25 MiB, 8192³ — the
/// `none` row of overlap_bench.toml with the same inputs. The grid is checked in `sweep.rs`.
fn check_overlap_sweep(_timeline: &Timeline, report: &Report) {
    let ar_us = 14.0 * 5.0 + 1.75 * 26_214_400.0 / 450e9 * 1e6; // 171.945
    let gemm_us = 2.0 * 8192f64.powi(3) / (989e12 * 0.7) * 1e6; // 1588.2
    let killed = overlap(report, "killed");
    assert_close(killed.comm_us, ar_us, 0.01, "ar alone");
    assert_close(killed.compute_us, gemm_us, 0.01, "gemm alone");
    // The all_reduce holds 16 of 132 SMs while the GEMM runs (R22): both = gemm + ar·16/132,
    // overlap = 1 − 16/132.
    assert_close(killed.both_us, gemm_us + ar_us * 16.0 / 132.0, 0.01, "both");
    assert_close(killed.overlap, 1.0 - 16.0 / 132.0, 1e-4, "none");
}

fn kernel<'r>(report: &'r Report, name: &str) -> &'r analysis::metrics::KernelMetrics {
    report
        .kernels
        .iter()
        .find(|k| k.op == name)
        .unwrap_or_else(|| panic!("no kernel {name} in the report"))
}

/// Start of the first measured `op` kernel on rank 0.
fn kernel_start_ns(timeline: &Timeline, op: &str) -> u64 {
    let index = timeline.ops.iter().position(|o| o.name == op).unwrap() as u32;
    timeline.ranks[0]
        .kernels
        .iter()
        .find(|k| k.op == index && k.iteration == timeline.scenario.warmup)
        .unwrap()
        .start_ns
}

/// The op named `name` in the Timeline's op table.
fn op_named<'t>(timeline: &'t Timeline, name: &str) -> &'t OpInfo {
    timeline
        .ops
        .iter()
        .find(|op| op.name == name)
        .unwrap_or_else(|| panic!("no op {name}"))
}

/// The kernel op `op` launched on `rank` in `iteration`.
fn kernel_of(rank: &RankTimeline, op: &OpInfo, iteration: u32) -> KernelRecord {
    *rank
        .kernels
        .iter()
        .find(|k| k.op == op.index && k.iteration == iteration)
        .unwrap_or_else(|| {
            panic!(
                "rank {}: no kernel of {} in iteration {iteration}",
                rank.rank, op.name
            )
        })
}

/// all_to_all on 8 ranks of one node: (n−1)·α + (n−1)/n · S/B = 7·5 µs + 7/8 · 32 MiB / 450
/// GB/s, for the dispatch and the combine alike; the dispatch's Work is not complete when wait()
/// returns (R12: a stream dependency), and the expert kernel starts only after the dispatch ended.
fn check_all_to_all(timeline: &Timeline, report: &Report) {
    let expected_us = 35.0 + 0.875 * 33_554_432.0 / 450e9 * 1e6;
    for name in ["dispatch", "combine"] {
        assert_close(
            collective(report, name).kernel_us.median,
            expected_us,
            0.01,
            name,
        );
    }
    assert_eq!(collective(report, "dispatch").completed_at_wait, Some(0.0));
    let dispatch = op_named(timeline, "dispatch");
    assert_eq!(
        dispatch.kernel_name.as_deref(),
        Some("ncclDevKernel_SendRecv")
    );
    let expert = op_named(timeline, "expert");
    for rank in &timeline.ranks {
        for record in rank.collectives.iter().filter(|c| c.op == dispatch.index) {
            let kernel = kernel_of(rank, expert, record.iteration);
            assert!(kernel.start_ns >= record.end_ns, "rank {}", rank.rank);
        }
    }
}

/// Two pipeline stages over a pair communicator: α + S/B = 5 µs + 16 MiB / 450 GB/s per
/// transfer; the pair's communicator is bootstrapped by its first send/recv (R8: the default
/// 300 ms inside that call on both ranks) and by no later one; the next stage's GEMM starts only
/// after its receive ended (R12).
fn check_send_recv(timeline: &Timeline, report: &Report) {
    let expected_us = 5.0 + 16_777_216.0 / 450e9 * 1e6;
    assert_close(
        collective(report, "recv_act").kernel_us.median,
        expected_us,
        0.01,
        "recv",
    );
    assert_eq!(timeline.scenario.groups, ["world", "p2p:0:1"]);
    let op = |name: &str| op_named(timeline, name);
    assert_eq!(
        op("send_act").kernel_name.as_deref(),
        Some("ncclDevKernel_SendRecv")
    );
    assert_eq!(op("recv_act").host_name, "c10d::recv_");
    for (rank, name) in [(0, "send_act"), (1, "recv_act")] {
        let calls: Vec<u64> = timeline.ranks[rank]
            .host
            .iter()
            .filter(|call| call.op == op(name).index)
            .map(|call| call.end_ns - call.start_ns)
            .collect();
        assert_eq!(calls.len(), 4, "{name}: one call per iteration");
        assert!(
            calls[0] >= 300_000_000,
            "{name}: the first call bootstraps the pair"
        );
        assert!(
            calls[1..].iter().all(|&ns| ns == 30_000),
            "{name}: {calls:?}"
        );
    }
    let rank1 = &timeline.ranks[1];
    for record in &rank1.collectives {
        let forward = kernel_of(rank1, op("forward_1"), record.iteration);
        assert!(forward.start_ns >= record.end_ns);
    }
}

/// A comm hook on the all_reduce's future: `then` returns after the wait and launch costs
/// (4 + 5 µs, no host wait for the GPU); the callback's kernel runs on the pool stream and starts
/// exactly when the all_reduce ends (14·5 µs + 1.75 · 100 MiB / 450 GB/s), after the GEMM that
/// ended earlier on the current stream; the optimizer, behind the wait on then()'s future,
/// starts after the callback. Without that wait the optimizer would read the bucket while the
/// all_reduce writes it: the race detector says so.
fn check_get_future(timeline: &Timeline, report: &Report) {
    let expected_us = 70.0 + 1.75 * 104_857_600.0 / 450e9 * 1e6;
    assert_close(
        collective(report, "bucket_ar").kernel_us.median,
        expected_us,
        0.01,
        "ar",
    );
    let op = |name: &str| op_named(timeline, name);
    assert_eq!(op("hook").host_name, "Future.then");
    for rank in &timeline.ranks {
        for call in rank.host.iter().filter(|c| c.op == op("hook").index) {
            assert_eq!(call.end_ns - call.start_ns, 9_000, "rank {}", rank.rank);
        }
        for record in &rank.collectives {
            let kernel = |name: &str| kernel_of(rank, op(name), record.iteration);
            let hook = kernel("hook");
            assert_eq!(hook.start_ns, record.end_ns, "rank {}", rank.rank);
            assert_eq!(hook.stream, 1, "the pool stream");
            assert!(kernel("backward_gemm").end_ns < record.end_ns);
            assert!(kernel("optimizer").start_ns >= hook.end_ns);
        }
    }
    assert!(timeline.findings.is_empty(), "{:?}", timeline.findings);
    let text = std::fs::read_to_string(scenarios_dir().join("get_future.toml")).unwrap();
    let unordered = text.replace("[[op]]\nwait = \"hooked\"\n", "");
    assert_ne!(unordered, text);
    let scenario = sim::scenario::parse("get_future.toml", &unordered).unwrap();
    let races = sim::engine::simulate(&scenario).findings;
    assert!(
        races
            .iter()
            .any(|f| f.kind == sim::timeline::FindingKind::Race && f.message.contains("bucket")),
        "{races:?}"
    );
}

/// A ring exchange with batch_isend_irecv: one SendRecv kernel of α + S/B (5 µs + 8 MiB /
/// 450 GB/s) on the world communicator, which the first batch bootstraps on every rank (R8; no
/// pair communicators), and the next GEMM only after the exchange (R12).
fn check_batch_isend_irecv(timeline: &Timeline, report: &Report) {
    let expected_us = 5.0 + 8_388_608.0 / 450e9 * 1e6;
    assert_close(
        collective(report, "ring_step").kernel_us.median,
        expected_us,
        0.01,
        "ring",
    );
    assert_eq!(timeline.scenario.groups, ["world"]);
    let op = |name: &str| op_named(timeline, name);
    assert_eq!(
        op("ring_step").kernel_name.as_deref(),
        Some("ncclDevKernel_SendRecv")
    );
    for rank in &timeline.ranks {
        let first = rank
            .host
            .iter()
            .find(|call| call.op == op("ring_step").index)
            .expect("a batch call");
        assert!(
            first.end_ns - first.start_ns >= 300_000_000,
            "rank {}",
            rank.rank
        );
        for record in &rank.collectives {
            let next = kernel_of(rank, op("attention_next"), record.iteration);
            assert!(next.start_ns >= record.end_ns, "rank {}", rank.rank);
        }
    }
}

/// SM contention (H200 preset: 132 SMs; 16 NCCL channels; 8192³ GEMM in 4096 blocks).
fn check_sm_contention(timeline: &Timeline, report: &Report) {
    let ar_us = 14.0 * 5.0 + 1.75 * 26_214_400.0 / 450e9 * 1e6; // 171.945
    let gemm_us = 2.0 * 8192f64.powi(3) / (989e12 * 0.7) * 1e6; // 1588.2

    // NCCL first: the all_reduce starts 3 µs (launch latency) after its launch; the GEMM is
    // launched when the call returns (tail 10 µs) + 5 µs launch cost and starts 3 µs later,
    // i.e. 15 µs after the collective. For the remaining ar − 15 µs it runs on 116 of 132 SMs
    // (R22), losing 16·(ar − 15) SM·µs.
    let slowed = gemm_us + (ar_us - 15.0) * 16.0 / 132.0;
    assert_close(
        kernel(report, "gemm_after_nccl").kernel_us.median,
        slowed,
        0.01,
        "gemm after nccl",
    );
    assert_close(
        kernel(report, "gemm_alone").kernel_us.median,
        gemm_us,
        0.01,
        "gemm alone",
    );
    // GEMM first, normal priority (R7): the NCCL blocks get SMs only in the GEMM's tail, once
    // fewer than 116 blocks (of 132·gemm/4096 SM·µs each) are left: 116/4096 of the GEMM
    // before its end. The GEMM itself is not slowed: its tail needs no more than 116 SMs.
    let nccl_start = kernel_start_ns(timeline, "ar_behind_gemm") as f64 / 1e3;
    let gemm_start = kernel_start_ns(timeline, "gemm_first") as f64 / 1e3;
    assert_close(
        nccl_start - gemm_start,
        gemm_us * (1.0 - 116.0 / 4096.0),
        0.01,
        "tail start",
    );
    assert_close(
        kernel(report, "gemm_first").kernel_us.median,
        gemm_us,
        0.01,
        "gemm first",
    );
    assert_close(
        collective(report, "ar_behind_gemm").kernel_us.median,
        ar_us,
        0.01,
        "ar",
    );
}

#[test]
fn fewer_nccl_channels_make_the_gemm_faster_and_the_collective_slower() {
    let timeline = run_with("sm_contention.toml", &["env.NCCL_MAX_CTAS=8"]);
    let report = report(&timeline);
    let gemm_us = 2.0 * 8192f64.powi(3) / (989e12 * 0.7) * 1e6;
    // 8 of the ring's 16 channels carry the data: half the bandwidth (R22, R24):
    // 14·5 µs + 1.75 · 25 MiB / (450 GB/s · 8/16) = 273.890 µs.
    let ar_us = 70.0 + 1.75 * 26_214_400.0 / (450e9 * 0.5) * 1e6;
    assert_close(
        collective(&report, "ar_first").kernel_us.median,
        ar_us,
        0.01,
        "ar",
    );
    // The GEMM loses only 8 SMs for the (ar − 15) µs they overlap.
    let gemm = kernel(&report, "gemm_after_nccl").kernel_us.median;
    assert_close(gemm, gemm_us + (ar_us - 15.0) * 8.0 / 132.0, 0.01, "gemm");
    let default_channels = report_of("sm_contention.toml");
    assert!(
        gemm < kernel(&default_channels, "gemm_after_nccl")
            .kernel_us
            .median
    );
}

fn report_of(name: &str) -> Report {
    report(&run_with(name, &[]))
}

#[test]
fn a_high_priority_nccl_stream_gets_sms_at_the_next_block_boundaries() {
    let timeline = run_with("sm_contention.toml", &["env.TORCH_NCCL_HIGH_PRIORITY=1"]);
    let report = report(&timeline);
    let ar_us = 14.0 * 5.0 + 1.75 * 26_214_400.0 / 450e9 * 1e6;
    let gemm_us = 2.0 * 8192f64.powi(3) / (989e12 * 0.7) * 1e6;
    // R7: 16 of the GEMM's 132 resident blocks retire after 16/132 of a block time
    // (a block = 132·gemm/4096 SM·µs), and go to the high-priority NCCL stream.
    let ar = collective(&report, "ar_behind_gemm");
    let wait_for_sms = 16.0 * gemm_us / 4096.0;
    assert_close(
        ar.stream_interval_us.median,
        3.0 + wait_for_sms + ar_us,
        0.01,
        "interval",
    );
    // ... and the GEMM pays for it: 116 SMs while the collective runs.
    let gemm = kernel(&report, "gemm_first");
    assert_close(
        gemm.kernel_us.median,
        gemm_us + ar_us * 16.0 / 132.0,
        0.01,
        "gemm",
    );
}

/// nccl-tests all_reduce on 8 H200s (NCCL model, docs/nccl-model.md): busbw = S/t · 2·7/8 within
/// 15% of the published figures, and NCCL's switch of protocol with size (LL, then LL128, then
/// Simple on NVLS).
fn check_nccl_tests_all_reduce(timeline: &Timeline, _report: &Report) {
    let rows = analysis::nccl_tests::rows(timeline);
    assert_eq!(rows.len(), 32, "8 B … 16 GiB in powers of two");
    // Published busbw (GB/s) for 8 GPUs (docs/nccl-model.md, "Calibration").
    for (size_bytes, published_gbps) in [
        (1u64 << 20, 72.0),
        (32 << 20, 298.0),
        (256 << 20, 442.0),
        (16 << 30, 480.0),
    ] {
        let row = rows.iter().find(|r| r.size_bytes == size_bytes).unwrap();
        let error = row.busbw_gbps / published_gbps - 1.0;
        assert!(
            error.abs() <= 0.15,
            "{size_bytes} B: busbw {} vs published {published_gbps}",
            row.busbw_gbps
        );
        assert_close(
            row.busbw_gbps,
            row.algbw_gbps * 1.75,
            1e-9,
            "busbw = algbw · 2(n−1)/n",
        );
    }
    assert_eq!(rows[0].algorithm, "RING_LL", "8 B: latency-bound, LL");
    assert_eq!(
        rows[31].algorithm, "NVLS_SIMPLE",
        "16 GiB: bandwidth-bound, Simple on NVLS"
    );
    let protocol_rank = |name: &str| {
        ["_LL", "_LL128", "_SIMPLE"]
            .iter()
            .rposition(|p| name.ends_with(p))
            .unwrap()
    };
    for pair in rows.windows(2) {
        assert!(
            protocol_rank(&pair[0].algorithm) <= protocol_rank(&pair[1].algorithm),
            "the protocol never steps back as size grows: {} then {}",
            pair[0].algorithm,
            pair[1].algorithm
        );
        assert!(pair[0].time_us <= pair[1].time_us, "time grows with size");
    }
    assert!(
        rows.iter().any(|r| r.algorithm == "RING_LL128"),
        "LL128 in between"
    );
}

/// Straggler: rank 3's host is late by a lognormal draw before every all_reduce (R16).
fn check_straggler(timeline: &Timeline, report: &Report) {
    use sim::random::{rank_rng, Delay};
    let ar = collective(report, "ar");
    assert_eq!(ar.last_rank, Some(3));
    assert_eq!(ar.last_rank_share, 1.0);
    // Rank 3's stream draws one delay per iteration, in program order (seed 42).
    let delay = Delay::LogNormal {
        mean_ns: 200_000.0,
        std_ns: 50_000.0,
    };
    let mut rng = rank_rng(42, 3);
    let draws: Vec<u64> = (0..timeline.scenario.repeat)
        .map(|_| delay.sample_ns(&mut rng))
        .collect();
    // 8 ranks in one node: 14·5 µs + 1.75 · 25 MiB / 450 GB/s.
    let data_ns = 70_000 + (1.75 * 26_214_400.0 / 450e9 * 1e9_f64).round() as u64;
    for rank in &timeline.ranks {
        for record in &rank.collectives {
            let spin = record.data_start_ns - record.kernel_start_ns;
            let expected = if rank.rank == 3 {
                0
            } else {
                draws[record.iteration as usize]
            };
            // Every early rank's kernel spins for exactly that iteration's delay, then moves
            // data; rank 3's kernel is the short one.
            assert_eq!(
                spin, expected,
                "rank {} iteration {}",
                rank.rank, record.iteration
            );
            assert_eq!(record.end_ns - record.data_start_ns, data_ns);
        }
    }
    let mean_us = draws.iter().sum::<u64>() as f64 / draws.len() as f64 / 1e3;
    assert!(
        (150.0..250.0).contains(&mean_us),
        "draws average {mean_us} µs"
    );
}

/// 1,000 × 25 KB on 8 ranks (α = 5 µs, B = 450 GB/s): separate calls, one coalesced group,
/// one 25 MB bucket (R24, R25).
fn check_coalescing(timeline: &Timeline, report: &Report) {
    let measure = |name: &str| {
        report
            .measures
            .iter()
            .find(|m| m.name == name)
            .unwrap()
            .value_us
            .median
    };
    // One call: 14·α + 1.75 · 25,000 B / 450 GB/s.
    let one_us = 70.0 + 1.75 * 25_000.0 / 450e9 * 1e6;
    let each = collective(report, "each");
    assert_close(each.kernel_us.median, one_us, 0.001, "one small all_reduce");
    // α paid 1,000 times: the GPU time is 1,000 kernels back to back (+ the marks' 23 µs of
    // launch and latency around them).
    assert_close(measure("each_gpu"), 1_000.0 * one_us, 30.0, "each");
    // α paid once: 14·α + 1.75 · 25 MB / 450 GB/s, coalesced or bucketed alike under α-β.
    let once_us = 70.0 + 1.75 * 25e6 / 450e9 * 1e6;
    assert_close(
        collective(report, "coalesced").kernel_us.median,
        once_us,
        0.001,
        "coalesced",
    );
    assert_close(
        collective(report, "bucket").kernel_us.median,
        once_us,
        0.001,
        "bucket",
    );
    assert_close(measure("coalesced_gpu"), once_us, 0.001, "coalesced gpu");
    // The host: 1,000 calls of 30 µs, but each puts two commands on the current stream (the
    // kernel and the Work's end event: PyTorch >= 2.8 records no input-ready event there,
    // R11) and the GPU takes one call per 70 µs: the stream's launch queue (1,022 commands,
    // R1) fills after about 510 calls, and from there the host follows the GPU. It returns
    // from the last call when 510 calls are left queued (on the H200, with a 2 µs kernel,
    // PyTorch 2.11's each_host equals its each_gpu, docs/fidelity.md).
    assert_close(
        measure("each_host"),
        measure("each_gpu") - 510.0 * one_us,
        100.0,
        "each host",
    );
    assert_close(
        measure("coalesced_host"),
        30.0 + 999.0 * 2.0 + 2.0,
        1e-6,
        "coalesced host",
    );
    // The block is one host record: its recorded calls, then the call that launches (R25).
    assert_close(
        collective(report, "coalesced").host_call_us.median,
        30.0 + 999.0 * 2.0,
        1e-6,
        "coalesced host call",
    );
    // One kernel per call: 1,000 + 1 + 1 per rank and iteration.
    let kernels = timeline.ranks[0]
        .kernels
        .iter()
        .filter(|k| k.iteration == 1)
        .count();
    assert_eq!(kernels, 1_002);
}
