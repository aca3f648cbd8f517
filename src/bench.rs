//! `c10dsim bench`: the speed benchmark of docs/perf.md — a generated scenario of many ranks,
//! each iteration an async all_reduce, a GEMM and a wait — timed with the wall clock, with the
//! process's peak resident memory.

use crate::Failure;
use std::time::Instant;

/// The benchmark scenario: `ranks` ranks, `iterations` repeats of {async all_reduce, GEMM, wait}.
pub fn scenario_text(ranks: u32, iterations: u32) -> String {
    format!(
        r#"name = "bench_{ranks}x{iterations}"
about = "speed benchmark: every rank issues an async all_reduce, a GEMM and a wait per iteration"
repeat = {iterations}
[cluster]
ranks = {ranks}
ranks_per_node = 8
[host]
comm_init_us = 0
[tensors]
grad = "25MiB"
[[op]]
label = "ar"
all_reduce = "grad"
async_op = true
work = "w"
[[op]]
gemm = [4096, 4096, 4096]
[[op]]
wait = "w"
"#
    )
}

fn peak_resident_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

pub fn bench(ranks: u32, iterations: u32, print_scenario: bool) -> Result<u8, Failure> {
    let text = scenario_text(ranks, iterations);
    if print_scenario {
        out!("{text}")?;
        return Ok(0);
    }
    let scenario =
        sim::scenario::parse("<bench>", &text).map_err(|e| Failure::input(e.to_string()))?;
    eprintln!(
        "c10dsim: simulating {ranks} ranks x {iterations} iterations without the race detector ..."
    );
    let started = Instant::now();
    let options = sim::engine::Options {
        race_detector: false,
        ..sim::engine::Options::default()
    };
    let (without_detector, _) = sim::engine::simulate_with(&scenario, options);
    let without_detector_s = started.elapsed().as_secs_f64();
    drop(without_detector);
    eprintln!("c10dsim: simulating {ranks} ranks x {iterations} iterations ...");
    let started = Instant::now();
    let (timeline, events) = sim::engine::simulate_with(&scenario, sim::engine::Options::default());
    let simulate_s = started.elapsed().as_secs_f64();
    let report_started = Instant::now();
    let report = analysis::metrics::report(&timeline);
    let report_s = report_started.elapsed().as_secs_f64();
    let collectives: usize = timeline.ranks.iter().map(|r| r.collectives.len()).sum();
    let kernels: usize = timeline.ranks.iter().map(|r| r.kernels.len()).sum();
    let classes = sim::engine::classes(&scenario, sim::engine::Options::default());
    outln!("scenario: {ranks} ranks x {iterations} iterations (async all_reduce 25MiB + gemm 4096^3 + wait)")?;
    outln!(
        "classes of ranks that behave alike: {} ({} simulated ranks; docs/scale.md)",
        classes.count(),
        classes.simulated()
    )?;
    outln!(
        "collective records: {collectives}, kernel records: {kernels} (of the simulated ranks)"
    )?;
    outln!("events processed: {events}")?;
    outln!("simulate wall time: {simulate_s:.3} s")?;
    outln!(
        "simulate wall time without the race detector: {without_detector_s:.3} s (detector costs {:.2}x)",
        simulate_s / without_detector_s.max(1e-9)
    )?;
    outln!(
        "events per second: {:.0}",
        events as f64 / simulate_s.max(1e-9)
    )?;
    outln!("report (metrics) wall time: {report_s:.3} s")?;
    match peak_resident_bytes() {
        Some(bytes) => outln!("peak resident memory: {:.1} MiB", bytes as f64 / 1048576.0)?,
        None => outln!("peak resident memory: unavailable (no /proc/self/status)")?,
    }
    outln!(
        "simulated stream interval of ar: {:.3} us (median), findings: {}",
        report
            .collectives
            .first()
            .map_or(0.0, |c| c.stream_interval_us.median),
        report.findings.len()
    )?;
    Ok(0)
}
