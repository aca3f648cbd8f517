//! The caching allocator and the race detector (R17–R21): the catalogue's checks of the
//! lifetime and race scenarios, and their variants.

use crate::util::{run_with, scenarios_dir};
use analysis::metrics::{report, Report};
use sim::timeline::{FindingKind, Timeline};

/// (rank, later op, earlier op) of every race, by op name.
fn races(timeline: &Timeline) -> Vec<(u32, String, String)> {
    let mut list: Vec<(u32, String, String)> = timeline
        .ranks
        .iter()
        .flat_map(|rank| {
            rank.races.iter().map(move |race| {
                (
                    rank.rank,
                    timeline.ops[race.later_op as usize].name.clone(),
                    timeline.ops[race.earlier_op as usize].name.clone(),
                )
            })
        })
        .collect();
    list.sort();
    list
}

fn on_both_ranks(pairs: &[(&str, &str)]) -> Vec<(u32, String, String)> {
    let mut list: Vec<(u32, String, String)> = (0..2)
        .flat_map(|rank| {
            pairs
                .iter()
                .map(move |(later, earlier)| (rank, later.to_string(), earlier.to_string()))
        })
        .collect();
    list.sort();
    list
}

/// [c10d] §4.6 (docs/semantics.md#sources) under the 2.12 stash: only the write before wait()
/// races (R21); `del a` before wait() is safe because the Work holds `a`'s block (R18); the write
/// after wait() is ordered (R12).
pub fn check_races_4_6(timeline: &Timeline, _report: &Report) {
    assert_eq!(
        races(timeline),
        on_both_ranks(&[("write_before_wait", "ar_t")])
    );
    let finding = timeline
        .findings
        .iter()
        .find(|f| f.kind == FindingKind::Race)
        .unwrap();
    assert!(
        finding
            .message
            .contains("call wait() on the Work of ar_t while stream default is current"),
        "{}",
        finding.message
    );
}

#[test]
fn without_stash_or_record_stream_del_before_wait_is_a_use_after_free() {
    // `del a` returns the block at once; `u`, allocated next on the same stream, gets it and its
    // writer races the all_reduce still reading and writing it on the NCCL stream.
    let timeline = run_with("races_4_6.toml", &["memory.lifetime=none"]);
    assert_eq!(
        races(&timeline),
        on_both_ranks(&[("write_before_wait", "ar_t"), ("write_u", "ar_a")])
    );
    let u = timeline.ranks[0]
        .races
        .iter()
        .find(|r| r.tensor == "u")
        .unwrap();
    assert_eq!(u.earlier_stream, "nccl:world");
    assert!(u.later_write && u.earlier_write);
    // The all_reduce touched `a`, not `u`: the record and the message name the tensor whose
    // freed block `u` was given, as a user needs to find the `del` at fault.
    assert_eq!(u.earlier_tensor.as_deref(), Some("a"));
    let message = &timeline
        .findings
        .iter()
        .find(|f| f.kind == FindingKind::Race && f.message.contains("tensor u"))
        .unwrap()
        .message;
    assert!(
        message.contains("the earlier write of tensor a by ar_a (line 45) on stream nccl:world, whose freed block u was given"),
        "{message}"
    );
    // A race on the tensor's own memory names no other tensor.
    let t = timeline.ranks[0]
        .races
        .iter()
        .find(|r| r.tensor == "t")
        .unwrap();
    assert_eq!(t.earlier_tensor, None);
}

/// Wait on the wrong stream, input from a side stream, two groups on one buffer (R21).
pub fn check_races_streams(timeline: &Timeline, _report: &Report) {
    assert_eq!(
        races(timeline),
        on_both_ranks(&[
            ("ar_pair", "ar_world"),
            ("ar_x", "produce_x"),
            ("read_grad", "ar_grad"),
        ])
    );
    let streams: Vec<(&str, &str)> = timeline.ranks[0]
        .races
        .iter()
        .map(|r| (r.earlier_stream.as_str(), r.later_stream.as_str()))
        .collect();
    assert!(streams.contains(&("nccl:world", "default")));
    assert!(streams.contains(&("side", "nccl:world")));
    assert!(streams.contains(&("nccl:world", "nccl:pair")));
}

/// The frag killer (R20): the 200 MiB request releases the cache, which waits for the whole
/// device — the all_reduce included — before the GEMM can even be launched.
pub fn check_frag_killer(timeline: &Timeline, report: &Report) {
    let frag = report.overlaps.iter().find(|o| o.name == "frag").unwrap();
    let none = report.overlaps.iter().find(|o| o.name == "none").unwrap();
    // Serial at best (0), worse by the cudaFree and cudaMalloc time the host spends after the
    // device drained.
    assert!(frag.overlap <= 0.0, "frag overlap {}", frag.overlap);
    assert!(none.overlap > 0.85, "none overlap {}", none.overlap);
    // Every release waited for the device: each a stall.
    assert_eq!(
        report.memory.cache_release_stalls,
        report.memory.cache_releases
    );
    assert!(report.memory.cache_releases > 0);
    for rank in &timeline.ranks {
        let [release] = rank.cache_releases.as_slice() else {
            panic!("rank {}: one cache release expected", rank.rank)
        };
        // The device drained exactly when the all_reduce launched just before ended: the
        // release waited for it (a device-wide stall, visible as one long host call).
        let ar_frag = timeline
            .ops
            .iter()
            .position(|o| o.name == "ar_frag")
            .unwrap() as u32;
        let ar_end = rank
            .collectives
            .iter()
            .find(|c| c.op == ar_frag)
            .unwrap()
            .end_ns;
        assert_eq!(release.device_idle_ns, Some(ar_end));
        // The four deleted 12–24 MiB tensors' segments go back (12+16+20+24 = 72 MiB).
        assert_eq!(release.segments_freed, 4);
    }
    assert_eq!(report.memory.cache_releases, 8);
}

/// frag_seed.toml (R20, R23): the seed's own recipe, a 0.12 quota of 141 GiB (16.9 GiB), is
/// never reached by the ~1 GiB the program holds: no cache release, the overlap stays; a quota
/// of 0.0065 (938 MiB) is, and the release stalls the device.
pub fn check_frag_seed(timeline: &Timeline, report: &Report) {
    let frag = report.overlaps.iter().find(|o| o.name == "frag").unwrap();
    assert!(frag.overlap > 0.85, "frag overlap {}", frag.overlap);
    assert!(timeline.ranks.iter().all(|r| r.cache_releases.is_empty()));
    assert!(report.memory.peak_reserved_bytes < 1 << 30);
    let small = run_with("frag_seed.toml", &["memory.fraction=0.0065"]);
    let small_report = analysis::metrics::report(&small);
    let frag = small_report
        .overlaps
        .iter()
        .find(|o| o.name == "frag")
        .unwrap();
    assert!(frag.overlap <= 0.0, "frag overlap {}", frag.overlap);
    assert!(small.ranks.iter().all(|r| r.cache_releases.len() == 1));
}

#[test]
fn expandable_segments_recover_the_overlap() {
    let timeline = run_with(
        "frag_killer.toml",
        &["env.PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"],
    );
    let report = report(&timeline);
    let frag = report.overlaps.iter().find(|o| o.name == "frag").unwrap();
    let none = report.overlaps.iter().find(|o| o.name == "none").unwrap();
    // No device synchronisation: the frag phase overlaps exactly as the phase without it.
    assert_eq!(frag.overlap, none.overlap);
    assert!(timeline.ranks[0].cache_releases[0].device_idle_ns.is_none());
    // The releases are counted; none of them stalled the device.
    assert!(report.memory.cache_releases > 0);
    assert_eq!(report.memory.cache_release_stalls, 0);
}

/// Stash (2.12): the Work `w` keeps its output g past `wait()` and `del g` until the next
/// iteration's all_reduce binds `w` anew, after that iteration's `alloc g`: two 64 MiB blocks
/// take turns (R18), as PyTorch 2.11 measured (128 MiB, tests/data/torch/lifetime_peak.run*).
pub fn check_lifetime_peak(timeline: &Timeline, report: &Report) {
    assert_eq!(report.memory.peak_reserved_bytes, 2 * (64 << 20));
    assert!(timeline.findings.is_empty());
}

/// R18 as PyTorch 2.11 does it (measured, docs/torch.md#unwaited-works): x's block stays with
/// the never-waited Work the program still holds, through ten watchdog polls and the group's
/// next collective, so fresh and again each need their own 64 MiB: 3 × 64 + 2 MiB (y's
/// small-pool segment) reserved.
pub fn check_unwaited_work(timeline: &Timeline, report: &Report) {
    assert_eq!(report.memory.peak_reserved_bytes, 194 << 20);
    assert_eq!(report.memory.peak_allocated_bytes, 192 << 20);
    assert!(timeline.findings.is_empty());
}

#[test]
fn record_stream_raises_peak_memory_in_the_same_loop() {
    // R19: each freed block waits for an event on the NCCL stream; with the host eight
    // iterations ahead none has passed at the next allocation, so every iteration takes a new
    // segment: 8 × 64 MiB.
    let timeline = run_with("lifetime_peak.toml", &["memory.lifetime=record_stream"]);
    let report = report(&timeline);
    assert_eq!(report.memory.peak_reserved_bytes, 8 * (64 << 20));
    assert!(timeline.findings.is_empty(), "{:?}", timeline.findings);
}

#[test]
fn the_detector_reports_no_race_in_the_correct_scenarios() {
    // Every shipped scenario not written to race runs clean (the catalogue's expected finding
    // kinds say which ones race).
    for entry in std::fs::read_dir(scenarios_dir()).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        if name.starts_with("races_") {
            continue;
        }
        let timeline = run_with(&name, &[]);
        let races: Vec<_> = timeline
            .findings
            .iter()
            .filter(|f| f.kind == FindingKind::Race)
            .collect();
        assert!(races.is_empty(), "{name}: {races:?}");
    }
}

#[test]
fn races_fail_the_run_only_with_fail_on_race() {
    use crate::util::{c10dsim, stdout};
    let plain = c10dsim(&["run", "scenarios/races_4_6.toml"]);
    assert_eq!(plain.status.code(), Some(0));
    assert!(stdout(&plain).contains("data race on tensor t"));
    let strict = c10dsim(&[
        "run",
        "scenarios/races_4_6.toml",
        "--fail-on-race",
        "--json",
    ]);
    assert_eq!(strict.status.code(), Some(1));
    let json: serde_json::Value = serde_json::from_slice(&strict.stdout).unwrap();
    let kinds: Vec<&str> = json["report"]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["kind"].as_str().unwrap())
        .collect();
    // One finding per class of ranks that behave alike (both ranks race alike, docs/scale.md).
    assert_eq!(kinds, ["race"]);
}
