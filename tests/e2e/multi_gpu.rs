//! The Timelines measured on 4 H200s with real NCCL (`tests/data/hw/multi/`, docs/multi-gpu.md):
//! they still parse, and still show issue 9's outcomes — overlap per killer, the straggler's
//! spin against its delay, the all_reduce bus bandwidth at ≥ 64 MiB against the simulator's.
//! Needs no GPU: it reads the data, and runs the simulator on the same scenario copies.

use crate::util;
use analysis::calibrate::{apply_profile, parse_profile, ProfileMode};
use analysis::metrics::{report, Report};
use sim::timeline::{CollectiveRecord, Source, Timeline};
use std::collections::BTreeMap;
use std::path::PathBuf;

fn data_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/hw/multi")
}

fn load(name: &str) -> Timeline {
    let path = data_dir().join(name);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|error| panic!("{}: {error}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

/// Simulates one of the scenario copies that were measured on this machine's profile
/// (`profiles/h200-x4.toml`, as `run --machine` applies it).
fn simulate_on_profile(scenario: &str) -> Timeline {
    simulate_on_profile_with(scenario, &[])
}

/// As `simulate_on_profile`, with `--set`-style overrides.
fn simulate_on_profile_with(scenario: &str, overrides: &[&str]) -> Timeline {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let read = |path: PathBuf| {
        std::fs::read_to_string(&path).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
    };
    let profile = parse_profile(
        "profiles/h200-x4.toml",
        &read(root.join("profiles/h200-x4.toml")),
    )
    .unwrap();
    let text = apply_profile(
        &read(data_dir().join("scenarios").join(scenario)),
        &profile,
        ProfileMode::Replace,
    )
    .unwrap();
    let overrides: Vec<sim::scenario::Override> = overrides
        .iter()
        .map(|o| sim::scenario::Override::parse(o).expect("valid override"))
        .collect();
    let text = sim::sweep::apply_overrides_with_ops(&text, &overrides).expect("overrides apply");
    sim::engine::simulate(&sim::scenario::parse(scenario, &text).unwrap_or_else(|e| panic!("{e}")))
}

fn measure_us(report: &Report, name: &str) -> f64 {
    report
        .measures
        .iter()
        .find(|m| m.name == name)
        .unwrap_or_else(|| panic!("no measure {name}"))
        .value_us
        .median
}

/// nccl-tests' busbw (algbw · 2(n−1)/n) per size: time from the last rank's kernel start to
/// each rank's end, median over ranks × measured iterations.
fn busbw_by_size(timeline: &Timeline) -> BTreeMap<u64, f64> {
    let n = timeline.ranks.len() as f64;
    timeline
        .ops
        .iter()
        .filter_map(|op| {
            let iterations = by_iteration(timeline, op.index);
            let bytes = iterations.values().next()?[0].bytes;
            let mut times_us = Vec::new();
            for records in iterations.values() {
                let last_start = records.iter().map(|c| c.kernel_start_ns).max().unwrap();
                times_us.extend(records.iter().map(|c| (c.end_ns - last_start) as f64 / 1e3));
            }
            let busbw = bytes as f64 / median(times_us) / 1e3 * 2.0 * (n - 1.0) / n;
            Some((bytes, busbw))
        })
        .collect()
}

/// Simulates one of the scenario copies that were measured, with `--set`-style overrides.
fn simulate(scenario: &str, overrides: &[&str]) -> Timeline {
    util::run_with(
        &format!("../tests/data/hw/multi/scenarios/{scenario}"),
        overrides,
    )
}

fn overlap(report: &Report, name: &str) -> f64 {
    report
        .overlaps
        .iter()
        .find(|o| o.name == name)
        .unwrap_or_else(|| panic!("no overlap {name}"))
        .overlap
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// The measured collectives of op `op`, per iteration, in rank order.
fn by_iteration(timeline: &Timeline, op: u32) -> BTreeMap<u32, Vec<&CollectiveRecord>> {
    let mut iterations: BTreeMap<u32, Vec<&CollectiveRecord>> = BTreeMap::new();
    for rank in &timeline.ranks {
        for record in rank.collectives.iter().filter(|c| c.op == op) {
            if record.iteration >= timeline.scenario.warmup {
                iterations.entry(record.iteration).or_default().push(record);
            }
        }
    }
    iterations
}

fn kernel_us(record: &CollectiveRecord) -> f64 {
    (record.end_ns - record.kernel_start_ns) as f64 / 1e3
}

#[test]
fn every_multi_gpu_timeline_is_a_four_rank_measurement() {
    let mut count = 0;
    for entry in std::fs::read_dir(data_dir()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "json") {
            continue;
        }
        let timeline = load(path.file_name().unwrap().to_str().unwrap());
        assert_eq!(timeline.source, Source::Measured, "{}", path.display());
        assert_eq!(timeline.machine["gpus"], "4");
        assert_eq!(timeline.machine["device"], "NVIDIA H200");
        assert_eq!(timeline.ranks.len(), 4, "{}", path.display());
        for rank in &timeline.ranks {
            assert!(!rank.collectives.is_empty(), "{}", path.display());
        }
        count += 1;
    }
    assert_eq!(count, 7, "measured Timelines in tests/data/hw/multi");
}

/// Overlap per killer (R3), median over ranks: real NCCL beside an 8192³ GEMM overlaps
/// partly with no killer (SM contention, R22), most with `.item()` (the host waits, so the
/// collective holds its SMs before the GEMM is launched); a device sync serialises.
#[test]
fn overlap_per_killer_on_four_gpus() {
    let measured = report(&load("overlap_bench.4ranks.json"));
    let none = overlap(&measured, "none");
    let item = overlap(&measured, "item");
    assert!((0.4..0.8).contains(&none), "none {none}");
    assert!((0.6..1.0).contains(&item), "item {item}");
    assert!(overlap(&measured, "sync").abs() < 0.1);
    // early_wait and async_false serialise too; their small positive figure is the comm time
    // measured alone (the all_reduce after the GEMM), inflated by the ranks' GEMM skew.
    for killer in ["early_wait", "async_false"] {
        let value = overlap(&measured, killer);
        assert!((-0.1..0.25).contains(&value), "{killer} {value}");
        assert!(none - value > 0.3, "{killer} {value} vs none {none}");
    }
    // The simulator agrees within 0.1 for item and overestimates none (docs/multi-gpu.md).
    let simulated = report(&simulate("overlap_bench.4ranks.toml", &[]));
    assert!((overlap(&simulated, "item") - item).abs() < 0.1);
    assert!(overlap(&simulated, "none") > none);
}

/// Rank 3 is late by a seeded delay (R16): the other ranks' kernels spin until it arrives, so
/// their kernel is longer than rank 3's by its arrival gap; the gap is the simulator's drawn
/// delay plus the host sleep's overshoot (tens of µs).
#[test]
fn straggler_spin_matches_the_arrival_gap_and_the_drawn_delay() {
    let measured = load("straggler.4ranks.json");
    let simulated = simulate("straggler.4ranks.toml", &[]);
    let measured_iterations = by_iteration(&measured, 0);
    let simulated_iterations = by_iteration(&simulated, 0);
    let mut clean = 0;
    let mut excess = Vec::new();
    for (iteration, records) in &measured_iterations {
        let early_start = records[..3]
            .iter()
            .map(|c| c.kernel_start_ns)
            .max()
            .unwrap();
        let gap_us = (records[3].kernel_start_ns as f64 - early_start as f64) / 1e3;
        if gap_us <= 0.0 {
            continue; // another rank was later still (host jitter)
        }
        clean += 1;
        let spin_us =
            median(records[..3].iter().map(|c| kernel_us(c)).collect()) - kernel_us(records[3]);
        assert!(
            (spin_us - gap_us).abs() < 15.0,
            "iteration {iteration}: spin {spin_us} µs, gap {gap_us} µs"
        );
        let delay_us = median(
            simulated_iterations[iteration][..3]
                .iter()
                .map(|c| (c.data_start_ns - c.kernel_start_ns) as f64 / 1e3)
                .collect(),
        );
        assert!(
            spin_us > delay_us,
            "iteration {iteration}: spin {spin_us} µs < delay {delay_us} µs"
        );
        excess.push(spin_us - delay_us);
    }
    assert!(
        clean * 10 >= measured_iterations.len() * 8,
        "rank 3 last in {clean} of {} iterations",
        measured_iterations.len()
    );
    let excess = median(excess);
    assert!((20.0..100.0).contains(&excess), "overshoot {excess} µs");
}

/// nccl-tests' busbw (algbw · 2(n−1)/n) of the measured sweep: time from the last rank's kernel
/// start to each rank's end, median over ranks × iterations. NVLink SHARP is off on the machine,
/// so NCCL runs rings: within 10% of the simulator's NCCL model restricted to `NCCL_ALGO=Ring`
/// from 64 MiB on, both NCCL versions.
#[test]
fn all_reduce_busbw_from_64_mib_matches_the_ring_model() {
    let simulated = simulate("nccl_tests_all_reduce.4ranks.toml", &["env.NCCL_ALGO=Ring"]);
    let predicted: BTreeMap<u64, f64> = analysis::nccl_tests::rows(&simulated)
        .into_iter()
        .map(|row| (row.size_bytes, row.busbw_gbps))
        .collect();
    for file in [
        "nccl_tests_all_reduce.4ranks.json",
        "nccl_tests_all_reduce.4ranks.torch_nccl.json",
    ] {
        let measured = load(file);
        let mut checked = 0;
        for op in &measured.ops {
            let iterations = by_iteration(&measured, op.index);
            let bytes = iterations.values().next().unwrap()[0].bytes;
            if bytes < 64 << 20 {
                continue;
            }
            let mut times_us = Vec::new();
            for records in iterations.values() {
                let last_start = records.iter().map(|c| c.kernel_start_ns).max().unwrap();
                times_us.extend(records.iter().map(|c| (c.end_ns - last_start) as f64 / 1e3));
            }
            let busbw = bytes as f64 / median(times_us) / 1e3 * 2.0 * 3.0 / 4.0;
            assert!(
                (300.0..450.0).contains(&busbw),
                "{file} {bytes} B: {busbw} GB/s"
            );
            let error = (predicted[&bytes] - busbw) / busbw;
            assert!(
                error.abs() < 0.10,
                "{file} {bytes} B: measured {busbw} GB/s, simulated {}",
                predicted[&bytes]
            );
            checked += 1;
        }
        assert_eq!(checked, 7, "{file}: 64 MiB to 4 GiB");
    }
}

/// Experiment A and B on 4 ranks: `wait()` returns in µs with the Work incomplete; under
/// blocking wait it polls in 10 ms steps (PyTorch 2.5 profile, R15) and returns completed; the
/// free-stream marker fires ~130 ms before the wait-stream one in every repeat (R12).
#[test]
fn wait_semantics_hold_on_four_gpus() {
    let plain = report(&load("exp_a_api_modes.4ranks.json"));
    let blocking = report(&load("exp_a_api_modes.4ranks.blocking.json"));
    for size in ["1KiB", "64MiB", "256MiB"] {
        let name = format!("async_{size}");
        let find = |r: &Report| r.collectives.iter().find(|c| c.op == name).unwrap().clone();
        let (plain, blocking) = (find(&plain), find(&blocking));
        assert!(plain.wait_us.unwrap().median < 20.0, "{name}");
        assert_eq!(plain.completed_at_wait, Some(0.0), "{name}");
        let polled = blocking.wait_us.unwrap().median;
        assert!((10_000.0..10_500.0).contains(&polled), "{name}: {polled}");
        assert_eq!(blocking.completed_at_wait, Some(1.0), "{name}");
    }
    let scope = report(&load("exp_b_stream_scope.4ranks.json"));
    let after = scope
        .measures
        .iter()
        .find(|m| m.name == "wait_marker_after_free_marker")
        .unwrap();
    assert_eq!(after.positive_fraction, 1.0);
    assert!((130_000.0..131_000.0).contains(&after.value_us.median));
}

/// Overlap per killer with the machine's profile (docs/multi-gpu.md): every killer's
/// compute-and-comm time within 3% of the measured one; the overlap of `none` (the GEMM takes
/// the SMs first, R22) and `sync` within 0.1. The others depend on the comm time measured alone,
/// which carries the ranks' GEMM skew: the measured GPUs' speeds are not the seed's draw.
#[test]
fn profiled_overlap_matches_the_measured_phases() {
    let measured = report(&load("overlap_bench.4ranks.json"));
    let simulated = report(&simulate_on_profile("overlap_bench.4ranks.toml"));
    for name in [
        "gemm_us",
        "both_none",
        "both_item",
        "both_early_wait",
        "both_sync",
        "both_async_false",
    ] {
        let (m, s) = (measure_us(&measured, name), measure_us(&simulated, name));
        assert!(
            ((s - m) / m).abs() < 0.03,
            "{name}: measured {m} µs, simulated {s}"
        );
    }
    for killer in ["none", "sync"] {
        let (m, s) = (overlap(&measured, killer), overlap(&simulated, killer));
        assert!((s - m).abs() < 0.1, "{killer}: measured {m}, simulated {s}");
    }
}

/// The profile's NCCL model (protocols refitted to the sweep, NVLS off): busbw within 15% of
/// both NCCL versions' at every size from 8 B to 4 GiB, within 10% from 64 MiB on (issue 9's
/// target), within 5% from 4 MiB on; the preset's model with only NVLS off
/// (`NCCL_NVLS_ENABLE=0`, as on the machine) within 10% from 64 MiB on too.
#[test]
fn profiled_busbw_matches_the_sweep() {
    let profiled = busbw_by_size(&simulate_on_profile("nccl_tests_all_reduce.4ranks.toml"));
    let nvls_off = busbw_by_size(&simulate(
        "nccl_tests_all_reduce.4ranks.toml",
        &["env.NCCL_NVLS_ENABLE=0"],
    ));
    for file in [
        "nccl_tests_all_reduce.4ranks.json",
        "nccl_tests_all_reduce.4ranks.torch_nccl.json",
    ] {
        let measured = busbw_by_size(&load(file));
        assert_eq!(measured.len(), 30, "{file}: 8 B to 4 GiB");
        for (&bytes, &busbw) in &measured {
            let tolerance = match bytes {
                b if b >= 64 << 20 => 0.10,
                b if b >= 4 << 20 => 0.05,
                _ => 0.15,
            };
            let error = (profiled[&bytes] - busbw) / busbw;
            assert!(
                error.abs() < tolerance,
                "{file} {bytes} B: measured {busbw} GB/s, profile {}",
                profiled[&bytes]
            );
            if bytes >= 64 << 20 {
                let error = (nvls_off[&bytes] - busbw) / busbw;
                assert!(
                    error.abs() < 0.10,
                    "{file} {bytes} B: measured {busbw} GB/s, NVLS off {}",
                    nvls_off[&bytes]
                );
            }
        }
    }
}

/// The straggler on the profile: rank 3's kernel (it never spins: the data time) within 10% of
/// the measured one. The early ranks' spin is still the drawn delay, short of the measured gap
/// by the old backend's sleep overshoot (checked above).
#[test]
fn profiled_straggler_data_time_matches() {
    let last = |timeline: &Timeline| {
        let iterations = by_iteration(timeline, 0);
        median(
            iterations
                .values()
                .map(|records| kernel_us(records[3]))
                .collect(),
        )
    };
    let m = last(&load("straggler.4ranks.json"));
    let s = last(&simulate_on_profile("straggler.4ranks.toml"));
    assert!(((s - m) / m).abs() < 0.10, "measured {m} µs, simulated {s}");
}

/// The value of a row of docs/multi-gpu.md's metric tables (`ar host_call_us`, `sleep
/// queued_us`, `measure queued_sleep`, `overlap none`) in a report, as `c10dsim diff` and `run` print it.
fn table_value(report: &Report, row: &str) -> Option<f64> {
    let (op, metric) = row.split_once(' ')?;
    if op == "measure" {
        return Some(measure_us(report, metric));
    }
    if op == "overlap" {
        return Some(overlap(report, metric));
    }
    if let Some(c) = report.collectives.iter().find(|c| c.op == op) {
        return match metric {
            "host_call_us" => Some(c.host_call_us.median),
            "wait_us" => c.wait_us.as_ref().map(|s| s.median),
            "stream_interval_us" => Some(c.stream_interval_us.median),
            "kernel_us" => Some(c.kernel_us.median),
            "completed_at_wait" => c.completed_at_wait,
            _ => None,
        };
    }
    let k = report.kernels.iter().find(|k| k.op == op)?;
    match metric {
        "kernel_us" => Some(k.kernel_us.median),
        "queued_us" => Some(k.queued_us.median),
        _ => None,
    }
}

/// docs/multi-gpu.md's per-metric tables ("Every metric, measured against simulated") quote
/// model outputs: each measured, as-shipped and profile cell is what the data and the
/// simulator give now, to the digits the table shows, so a change of the model or of a
/// metric's definition that moves one cannot leave the page behind.
#[test]
fn the_every_metric_tables_of_the_multi_gpu_page_are_current() {
    let page = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("docs/multi-gpu.md"),
    )
    .unwrap();
    let lines: Vec<&str> = page.lines().collect();
    let sections: [(&str, &str, &str, &[&str]); 5] = [
        (
            "### Experiment A, 4 ranks",
            "exp_a_api_modes.4ranks",
            "exp_a_api_modes.4ranks.json",
            &[],
        ),
        (
            "### Experiment A with `TORCH_NCCL_BLOCKING_WAIT=1`",
            "exp_a_api_modes.4ranks",
            "exp_a_api_modes.4ranks.blocking.json",
            &["env.TORCH_NCCL_BLOCKING_WAIT=1"],
        ),
        (
            "### Experiment B, 4 ranks",
            "exp_b_stream_scope.4ranks",
            "exp_b_stream_scope.4ranks.json",
            &[],
        ),
        (
            "### Overlap benchmark, 4 ranks",
            "overlap_bench.4ranks",
            "overlap_bench.4ranks.json",
            &[],
        ),
        (
            "### Straggler, 4 ranks",
            "straggler.4ranks",
            "straggler.4ranks.json",
            &[],
        ),
    ];
    let mut checked = 0;
    let mut stale = Vec::new();
    for (heading, scenario, measured, overrides) in sections {
        let start = lines
            .iter()
            .position(|l| l.starts_with(heading))
            .unwrap_or_else(|| panic!("docs/multi-gpu.md has no section {heading}"));
        let file = format!("{scenario}.toml");
        let reports = [
            report(&load(measured)),
            report(&simulate(&file, overrides)),
            report(&simulate_on_profile_with(&file, overrides)),
        ];
        for (number, line) in lines.iter().enumerate().skip(start + 1) {
            if line.starts_with('#') {
                break;
            }
            let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
            let row = cells[0];
            let is_metric_row = cells.len() == 6
                && row.split(' ').count() == 2
                && !row.contains('(')
                && row != "metric (median, µs)";
            if !is_metric_row {
                continue;
            }
            for (report, cell) in reports.iter().zip([cells[1], cells[2], cells[4]]) {
                let quoted: f64 = cell
                    .parse()
                    .unwrap_or_else(|_| panic!("docs/multi-gpu.md:{}: {cell}", number + 1));
                let decimals = cell.split_once('.').map_or(0, |(_, d)| d.len()) as i32;
                let value = table_value(report, row)
                    .unwrap_or_else(|| panic!("docs/multi-gpu.md:{}: no {row}", number + 1));
                if (value - quoted).abs() > 0.5 * 10f64.powi(-decimals) + 1e-9 {
                    stale.push(format!(
                        "docs/multi-gpu.md:{}: {row}: the page says {cell}, now {value:.3}",
                        number + 1
                    ));
                }
                checked += 1;
            }
        }
    }
    assert!(
        checked > 400,
        "only {checked} cells found: has the page's layout changed?"
    );
    assert!(stale.is_empty(), "stale figures:\n{}", stale.join("\n"));
}
