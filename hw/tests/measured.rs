//! The Timelines measured on the H200 (committed under `tests/data/hw/`, see docs/hw.md) still
//! parse as `sim::timeline::Timeline` and still show issue 7's outcomes. Needs no GPU: it reads
//! the data only.

use sim::timeline::{Source, Timeline, TIMELINE_FORMAT};
use std::path::PathBuf;

fn data_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/data/hw")
}

fn load(name: &str) -> Timeline {
    let path = data_dir().join(name);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|error| panic!("{}: {error}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

fn op(timeline: &Timeline, name: &str) -> u32 {
    timeline
        .ops
        .iter()
        .find(|op| op.name == name)
        .unwrap_or_else(|| panic!("no op {name} in {}", timeline.scenario.name))
        .index
}

/// Experiment B's measure of how long after the free-stream marker the wait-stream marker
/// fired: positive in a sample when the free stream was first (R12).
fn free_marker_first(timeline: &Timeline) -> analysis::metrics::MeasureValue {
    analysis::metrics::report(timeline)
        .measures
        .into_iter()
        .find(|m| m.name == "wait_marker_after_free_marker")
        .expect("experiment B measures the marker order")
}

/// Host durations (ns) of an op over the measured iterations.
fn host_ns(timeline: &Timeline, name: &str) -> Vec<u64> {
    let op = op(timeline, name);
    timeline.ranks[0]
        .host
        .iter()
        .filter(|call| call.op == op && call.iteration >= timeline.scenario.warmup)
        .map(|call| call.end_ns - call.start_ns)
        .collect()
}

fn median(mut values: Vec<u64>) -> u64 {
    values.sort_unstable();
    values[values.len() / 2]
}

fn uncertainty_ns(timeline: &Timeline) -> u64 {
    timeline.machine["clock_alignment_uncertainty_ns"]
        .parse()
        .unwrap()
}

#[test]
fn every_measured_timeline_parses_and_is_consistent() {
    let mut count = 0;
    for dir in ["", "x2", "new_kinds", "faults"] {
        for entry in std::fs::read_dir(data_dir().join(dir)).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_none_or(|e| e != "json") {
                continue;
            }
            let name = path.file_name().unwrap().to_str().unwrap();
            let relative = if dir.is_empty() {
                name.to_string()
            } else {
                format!("{dir}/{name}")
            };
            check_consistent(&load(&relative), name);
            count += 1;
        }
    }
    assert!(count >= 9, "found {count} measured Timelines");
}

fn check_consistent(timeline: &Timeline, name: &str) {
    assert_eq!(timeline.format, TIMELINE_FORMAT);
    assert_eq!(timeline.source, Source::Measured);
    for key in ["device", "driver", "cuda", "nccl", "backend", "downscale"] {
        assert!(timeline.machine.contains_key(key), "{name} lacks {key}");
    }
    // One process's rank, or every rank of a launched run joined by merge_ranks.
    let ranks = timeline.ranks.len() as u32;
    assert!(
        ranks == 1 || ranks == timeline.scenario.ranks,
        "{name}: {ranks} ranks"
    );
    let slack = uncertainty_ns(timeline);
    let repeat = timeline.scenario.repeat;
    for rank in &timeline.ranks {
        assert!(rank
            .host
            .iter()
            .all(|c| c.end_ns >= c.start_ns && c.iteration < repeat));
        assert!(rank.kernels.iter().all(|k| k.end_ns >= k.start_ns));
        // Kernels start after their launch, within the clock alignment's uncertainty.
        assert!(rank
            .kernels
            .iter()
            .all(|k| k.start_ns + slack >= k.enqueue_ns));
        for c in &rank.collectives {
            assert!(c.end_ns >= c.kernel_start_ns);
            assert!(c.kernel_start_ns + slack >= c.input_ready_ns);
            assert_eq!(
                c.data_start_ns, c.kernel_start_ns,
                "R16 not observable from one rank"
            );
        }
    }
}

/// Experiment B (R12): the free-stream marker fires before the wait-stream marker in every
/// repeat; wait() returns in microseconds with the Work incomplete.
#[test]
fn stream_scope_free_marker_first_and_wait_returns_at_once() {
    let t = load("exp_b_stream_scope.json");
    let rank = &t.ranks[0];
    let order = free_marker_first(&t);
    assert_eq!(
        order.positive_fraction, 1.0,
        "free marker first in every repeat"
    );
    assert_eq!(
        order.value_us.samples as u32,
        t.scenario.repeat - t.scenario.warmup
    );
    let waits: Vec<_> = rank
        .collectives
        .iter()
        .filter(|c| c.iteration >= t.scenario.warmup)
        .map(|c| c.wait.unwrap())
        .collect();
    assert!(waits.iter().all(|w| !w.completed_at_return));
    let wait_ns = median(
        waits
            .iter()
            .map(|w| w.host_end_ns - w.host_start_ns)
            .collect(),
    );
    assert!(wait_ns < 20_000, "median wait() {wait_ns} ns");
}

/// The backend's own host overhead (issue 7: under 10 µs each), and wait() returning before the
/// Work completed.
#[test]
fn async_all_reduce_and_wait_cost_microseconds() {
    let t = load("hw_host_overhead.json");
    let call = median(host_ns(&t, "all_reduce_async"));
    let wait = median(host_ns(&t, "wait"));
    assert!(call < 10_000, "all_reduce {call} ns");
    assert!(wait < 10_000, "wait {wait} ns");
    let measured: Vec<_> = t.ranks[0]
        .collectives
        .iter()
        .filter(|c| c.iteration >= t.scenario.warmup)
        .collect();
    let incomplete = measured
        .iter()
        .filter(|c| !c.wait.unwrap().completed_at_return)
        .count();
    assert!(
        incomplete * 10 >= measured.len() * 9,
        "{incomplete}/{}",
        measured.len()
    );
}

/// R15 under 2.12: blocking wait's host time comes in ~1 ms steps, one per poll, and returns
/// only after the Work's end event.
#[test]
fn blocking_wait_host_times_step_by_one_millisecond() {
    let t = load("hw_blocking_wait_2_12.json");
    assert_eq!(t.scenario.torch, "2.12");
    let slack = uncertainty_ns(&t);
    for (index, label) in ["wait_0.5ms", "wait_1.5ms", "wait_2.5ms", "wait_3.5ms"]
        .into_iter()
        .enumerate()
    {
        let polls = index as u64 + 1;
        let op = op(&t, label);
        for c in &t.ranks[0].collectives {
            let Some(wait) = c.wait.filter(|w| w.op == op) else {
                continue;
            };
            if c.iteration < t.scenario.warmup {
                continue;
            }
            let host_ns = wait.host_end_ns - wait.host_start_ns;
            assert!(wait.completed_at_return);
            assert!(
                wait.host_end_ns + slack >= c.end_ns,
                "{label} returned before the end"
            );
            assert!(
                (polls * 1_000_000..=polls * 1_150_000 + 100_000).contains(&host_ns),
                "{label}: {host_ns} ns is not {polls} poll(s) of ~1 ms"
            );
        }
    }
}

/// R14: `.item()` and the synchronisations block the host for the GPU backlog in front of them
/// (a 5 ms sleep).
#[test]
fn item_and_synchronize_block_for_the_backlog() {
    let t = load("hw_host_blocking.json");
    for label in ["item", "device_sync", "stream_sync", "event_sync"] {
        let ns = median(host_ns(&t, label));
        assert!((4_800_000..6_000_000).contains(&ns), "{label}: {ns} ns");
    }
    let sleep = median(host_ns(&t, "host_sleep_3ms"));
    assert!(
        (3_000_000..3_500_000).contains(&sleep),
        "host sleep {sleep} ns"
    );
}

/// Spin kernels last the asked duration within 2%, or within 5 µs for short ones: timed by CUDA
/// events, a kernel also carries a fixed 3–5 µs of launch (132 blocks reserving their SMs'
/// shared memory) that is no error of the spin (docs/hw.md). Warm-up excluded.
#[test]
fn spin_kernels_last_the_asked_duration() {
    let t = load("hw_spin_kernels.json");
    for (label, asked_ns) in [
        ("spin_200us_132sm", 200_000u64),
        ("spin_1ms_8sm", 1_000_000),
        ("sleep_2ms", 2_000_000),
        ("spin_20ms_66sm", 20_000_000),
    ] {
        let op = op(&t, label);
        for k in t.ranks[0]
            .kernels
            .iter()
            .filter(|k| k.op == op && k.iteration >= t.scenario.warmup)
        {
            let ns = k.end_ns - k.start_ns;
            let tolerance_ns = (asked_ns / 50).max(5_000);
            assert!(
                ns.abs_diff(asked_ns) <= tolerance_ns,
                "{label}: {ns} ns for {asked_ns} ns asked"
            );
        }
    }
}

/// Two H200s, one process each under torchrun, parts joined by `merge_ranks`: every rank shows
/// experiment B's outcome, and the ranks' collectives pair up by sequence number and end together
/// (R16: data moves only once both kernels are running), which also checks the merged time axis.
#[test]
fn two_rank_runs_pair_up_and_keep_the_stream_scope() {
    let t = load("x2/exp_b_stream_scope.2ranks.json");
    assert_eq!(t.machine["world"], "2");
    let order = free_marker_first(&t);
    assert_eq!(
        order.positive_fraction, 1.0,
        "free marker first on every rank"
    );
    assert_eq!(
        order.value_us.samples as u32,
        2 * (t.scenario.repeat - t.scenario.warmup)
    );
    let a = load("x2/exp_a_api_modes.2ranks.json");
    let (r0, r1) = (&a.ranks[0], &a.ranks[1]);
    assert_eq!(r0.collectives.len(), r1.collectives.len());
    let gaps: Vec<u64> = r0
        .collectives
        .iter()
        .zip(&r1.collectives)
        .map(|(c0, c1)| {
            assert_eq!((c0.seq, c0.op), (c1.seq, c1.op));
            c0.end_ns.abs_diff(c1.end_ns)
        })
        .collect();
    let gap = median(gaps);
    assert!(
        gap < 10_000,
        "median end-time gap between the ranks {gap} ns"
    );
}

/// R20 on the GPU: an allocation that must release the cache waits for the device (behind a 5 ms
/// sleep on another stream); with expandable segments it does not.
#[test]
fn a_cache_release_waits_for_the_device_unless_expandable() {
    let t = load("hw_cache_release.json");
    let rank = &t.ranks[0];
    let alloc_b = op(&t, "alloc_b");
    let stalls: Vec<_> = rank
        .cache_releases
        .iter()
        .filter(|r| r.op == alloc_b && r.iteration >= t.scenario.warmup)
        .collect();
    assert_eq!(stalls.len() as u32, t.scenario.repeat - t.scenario.warmup);
    for release in &stalls {
        assert!(release.device_idle_ns.is_some());
        let ns = release.host_end_ns - release.host_start_ns;
        assert!(
            ns >= 4_500_000,
            "release took {ns} ns, not the 5 ms backlog"
        );
    }
    assert!(median(host_ns(&t, "alloc_b")) >= 4_500_000);

    let e = load("hw_cache_release_expandable.json");
    assert!(!e.ranks[0].cache_releases.is_empty());
    assert!(e.ranks[0]
        .cache_releases
        .iter()
        .all(|r| r.device_idle_ns.is_none()));
    let host = median(host_ns(&e, "alloc_b"));
    assert!(host < 1_000_000, "expandable alloc_b took {host} ns");
    assert_eq!(e.ranks[0].memory.peak_reserved_bytes, 600 << 20);
}

/// The op kinds added through the shared lowering, measured on one H200 (tests/data/hw/new_kinds):
/// `get_future().then` at one rank with real NCCL runs its callback on the pool stream after the
/// all_reduce, and the optimizer, behind the wait on then()'s future, after the callback; the
/// point-to-point stand-ins last about the model's α + S/B.
#[test]
fn new_kinds_measured_on_the_h200() {
    let future = load("new_kinds/get_future.r1.json");
    let slack = uncertainty_ns(&future);
    let (hook, optimizer) = (op(&future, "hook"), op(&future, "optimizer"));
    let rank = &future.ranks[0];
    assert_eq!(rank.streams[1].name, "pool");
    for record in &rank.collectives {
        let kernel = |index: u32| {
            rank.kernels
                .iter()
                .find(|k| k.op == index && k.iteration == record.iteration)
                .expect("one kernel per iteration")
        };
        assert_eq!(kernel(hook).stream, 1);
        assert!(kernel(hook).start_ns + slack >= record.end_ns);
        assert!(kernel(optimizer).start_ns + slack >= kernel(hook).end_ns);
    }
    let all_to_all = load("new_kinds/all_to_all.r1.json");
    assert_eq!(all_to_all.machine["downscale"], "off");
    assert_eq!(
        all_to_all.ranks[0].collectives.len(),
        2 * all_to_all.scenario.repeat as usize
    );
    // Stand-ins of the model's α + S/B: 5 µs + 16 MiB / 450 GB/s and 5 µs + 8 MiB / 450 GB/s;
    // after the first (cold) iteration the spin kernel adds at most 15 µs of its own start.
    for (name, model_us) in [("send_recv", 42.28), ("batch_isend_irecv", 23.64)] {
        let timeline = load(&format!("new_kinds/{name}.json"));
        for c in timeline.ranks[0].collectives.iter().skip(1) {
            let us = (c.end_ns - c.kernel_start_ns) as f64 / 1e3;
            assert!(us >= model_us && us <= model_us + 15.0, "{name}: {us} µs");
        }
    }
}

/// The fault scenarios on one H200 (`--downscale model --timeout-ms 5000`): rank 0's collective
/// never ends, the real watchdog's verdict comes at the first poll past the 5 s timeout (or the
/// injected async error's), and the Timeline up to there holds the finding.
#[test]
fn fault_runs_end_at_the_watchdogs_verdict() {
    use sim::timeline::{FindingKind, WatchdogEvent};
    for (name, kind, event) in [
        (
            "hang_10min",
            FindingKind::WatchdogTimeout,
            WatchdogEvent::Timeout,
        ),
        (
            "mismatch",
            FindingKind::WatchdogTimeout,
            WatchdogEvent::Timeout,
        ),
        (
            "gpu_backlog_timeout",
            FindingKind::WatchdogTimeout,
            WatchdogEvent::Timeout,
        ),
        // Rank 0 is a peer of the rank whose network fails: TORCH_NCCL_PROPAGATE_ERROR only
        // flags it (R27), and its collective never ends (H100, 2026-12-07).
        (
            "async_error",
            FindingKind::WatchdogTimeout,
            WatchdogEvent::Timeout,
        ),
    ] {
        let timeline = load(&format!("faults/{name}.json"));
        let kinds: Vec<FindingKind> = timeline.findings.iter().map(|f| f.kind).collect();
        assert_eq!(kinds, [kind], "{name}");
        let verdict = timeline
            .watchdog
            .iter()
            .find(|record| record.event == event)
            .unwrap_or_else(|| panic!("{name}: no verdict"));
        assert!(
            (5_000_000_000..6_000_000_000).contains(&verdict.at_ns),
            "{name}: verdict at {} ns",
            verdict.at_ns
        );
        assert_eq!(timeline.watchdog.last().unwrap().event, WatchdogEvent::Exit);
    }
}
