//! `c10dsim bench`: the speed benchmark of docs/perf.md — a generated scenario of many ranks,
//! each iteration an async all_reduce, a GEMM and a wait — timed with the wall clock, with the
//! process's peak resident memory; and its scaling mode, one child process per number of ranks
//! (so that each point's peak memory is its own), into a CSV and a chart.

use crate::Failure;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// What `c10dsim bench` was asked.
pub struct BenchArgs {
    pub ranks: u32,
    pub iterations: u32,
    pub print_scenario: bool,
    /// Simulate with `--summary` (records folded as they complete).
    pub summary: bool,
    /// Simulate one rank per class of ranks that behave alike (without `--no-fold`).
    pub fold: bool,
    /// Scaling mode: these numbers of ranks, each in its own process.
    pub scaling: Option<Vec<u32>>,
    /// The scaling CSV (`-`: standard output).
    pub output: Option<PathBuf>,
    /// The scaling chart (SVG or PNG).
    pub plot: Option<PathBuf>,
    /// Print the figures as one CSV row (what a scaling point's process prints).
    pub csv_row: bool,
}

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

/// The process's peak resident set so far (`VmHWM` of /proc/self/status).
fn peak_resident_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// The scaling CSV's columns (a `point` column first, as the sweep CSVs that `plot` reads).
const COLUMNS: [&str; 13] = [
    "point",
    "ranks",
    "iterations",
    "summary",
    "fold",
    "classes",
    "events",
    "wall_s",
    "wall_without_detector_s",
    "events_per_s",
    "report_s",
    "command_s",
    "peak_memory_mib",
];

/// One benchmark's figures.
struct Figures {
    collectives: usize,
    kernels: usize,
    events: u64,
    simulate_s: f64,
    without_detector_s: f64,
    report_s: f64,
    /// The whole command so far: both simulations, the report, the scenario's parse.
    command_s: f64,
    peak_bytes: Option<u64>,
    stream_interval_us: f64,
    findings: usize,
    /// Classes of ranks that behave alike, and the ranks simulated for them (docs/scale.md).
    classes: (usize, usize),
}

pub fn bench(args: &BenchArgs) -> Result<u8, Failure> {
    if let Some(ranks) = &args.scaling {
        return scaling(args, ranks);
    }
    if args.output.is_some() || args.plot.is_some() {
        return Err(Failure::input("-o and --plot go with --scaling"));
    }
    let text = scenario_text(args.ranks, args.iterations);
    if args.print_scenario {
        out!("{text}")?;
        return Ok(0);
    }
    let figures = measure(args, &text)?;
    let (ranks, iterations) = (args.ranks, args.iterations);
    if args.csv_row {
        let peak_mib = figures.peak_bytes.map_or(String::new(), |bytes| {
            format!("{:.1}", bytes as f64 / 1048576.0)
        });
        outln!(
            "{ranks},{iterations},{},{},{},{},{:.3},{:.3},{:.0},{:.3},{:.3},{peak_mib}",
            args.summary,
            args.fold,
            figures.classes.0,
            figures.events,
            figures.simulate_s,
            figures.without_detector_s,
            figures.events as f64 / figures.simulate_s.max(1e-9),
            figures.report_s,
            figures.command_s
        )?;
        return Ok(0);
    }
    let per_s = |seconds: f64| figures.events as f64 / seconds.max(1e-9);
    outln!("scenario: {ranks} ranks x {iterations} iterations (async all_reduce 25MiB + gemm 4096^3 + wait){}", if args.summary { ", summarised (--summary)" } else { "" })?;
    outln!(
        "classes of ranks that behave alike: {} ({} simulated ranks; docs/scale.md)",
        figures.classes.0,
        figures.classes.1
    )?;
    outln!(
        "collective records: {}, kernel records: {} (of the simulated ranks)",
        figures.collectives,
        figures.kernels
    )?;
    outln!("events processed: {}", figures.events)?;
    outln!("simulate wall time: {:.3} s", figures.simulate_s)?;
    outln!(
        "simulate wall time without the race detector: {:.3} s (detector costs {:.2}x)",
        figures.without_detector_s,
        figures.simulate_s / figures.without_detector_s.max(1e-9)
    )?;
    outln!("events per second: {:.0}", per_s(figures.simulate_s))?;
    outln!(
        "events per second without the race detector: {:.0}",
        per_s(figures.without_detector_s)
    )?;
    outln!("report (metrics) wall time: {:.3} s", figures.report_s)?;
    outln!(
        "whole command wall time (parse, both simulations, report): {:.3} s",
        figures.command_s
    )?;
    match figures.peak_bytes {
        Some(bytes) => outln!("peak resident memory: {:.1} MiB", bytes as f64 / 1048576.0)?,
        None => outln!("peak resident memory: unavailable (no /proc/self/status)")?,
    }
    outln!(
        "simulated stream interval of ar: {:.3} us (median), findings: {}",
        figures.stream_interval_us,
        figures.findings
    )?;
    Ok(0)
}

/// Simulates the benchmark without the race detector, then with it, then takes the report.
fn measure(args: &BenchArgs, text: &str) -> Result<Figures, Failure> {
    let command_started = Instant::now();
    let (ranks, iterations) = (args.ranks, args.iterations);
    let scenario =
        sim::scenario::parse("<bench>", text).map_err(|e| Failure::input(e.to_string()))?;
    let summary = args
        .summary
        .then(|| sim::timeline::RecordSelection::parse("none").expect("none parses"));
    eprintln!(
        "c10dsim: simulating {ranks} ranks x {iterations} iterations without the race detector ..."
    );
    let started = Instant::now();
    let options = sim::engine::Options {
        race_detector: false,
        summary: summary.clone(),
        fold: args.fold,
        ..sim::engine::Options::default()
    };
    let (without_detector, _) = sim::engine::simulate_with(&scenario, options);
    let without_detector_s = started.elapsed().as_secs_f64();
    drop(without_detector);
    eprintln!("c10dsim: simulating {ranks} ranks x {iterations} iterations ...");
    let started = Instant::now();
    let options = sim::engine::Options {
        summary,
        fold: args.fold,
        ..sim::engine::Options::default()
    };
    let options_for_classes = options.clone();
    let (timeline, events) = sim::engine::simulate_with(&scenario, options);
    let simulate_s = started.elapsed().as_secs_f64();
    let report_started = Instant::now();
    let report = analysis::metrics::report(&timeline);
    let report_s = report_started.elapsed().as_secs_f64();
    let (collectives, kernels) = match &timeline.summary {
        Some(summary) => (
            summary
                .collectives
                .iter()
                .map(|c| c.host_call.count as usize)
                .sum(),
            summary
                .kernels
                .iter()
                .map(|k| k.kernel.count as usize)
                .sum::<usize>()
                + summary
                    .collectives
                    .iter()
                    .map(|c| c.kernel.count as usize)
                    .sum::<usize>(),
        ),
        None => (
            timeline.ranks.iter().map(|r| r.collectives.len()).sum(),
            timeline.ranks.iter().map(|r| r.kernels.len()).sum(),
        ),
    };
    Ok(Figures {
        collectives,
        kernels,
        events,
        simulate_s,
        without_detector_s,
        report_s,
        command_s: command_started.elapsed().as_secs_f64(),
        peak_bytes: peak_resident_bytes(),
        classes: {
            let classes = sim::engine::classes(&scenario, &options_for_classes);
            (classes.count(), classes.simulated() as usize)
        },
        stream_interval_us: report
            .collectives
            .first()
            .map_or(0.0, |c| c.stream_interval_us.median),
        findings: report.findings.len(),
    })
}

/// `bench --scaling R1,R2,…`: each number of ranks in a process of its own (this binary with
/// `--csv-row`), whose own peak resident set is its point's memory; rows are written as the
/// points finish; then the chart, if asked.
fn scaling(args: &BenchArgs, ranks: &[u32]) -> Result<u8, Failure> {
    let Some(output) = &args.output else {
        return Err(Failure::input("--scaling needs -o OUT.csv"));
    };
    let program = std::env::current_exe()
        .map_err(|error| Failure::input(format!("cannot find this program: {error}")))?;
    let mut rows = String::new();
    rows.push_str(&COLUMNS.join(","));
    rows.push('\n');
    for (point, &count) in ranks.iter().enumerate() {
        eprintln!(
            "c10dsim: scaling point {}/{}: {count} ranks x {} iterations",
            point + 1,
            ranks.len(),
            args.iterations
        );
        let mut command = std::process::Command::new(&program);
        command.args([
            "bench",
            "--csv-row",
            "--ranks",
            &count.to_string(),
            "--iterations",
            &args.iterations.to_string(),
        ]);
        if args.summary {
            command.arg("--summary");
        }
        if !args.fold {
            command.arg("--no-fold");
        }
        let child = command
            .stderr(std::process::Stdio::inherit())
            .output()
            .map_err(|error| {
                Failure::input(format!("cannot run {}: {error}", program.display()))
            })?;
        let row = String::from_utf8_lossy(&child.stdout);
        if !child.status.success() || row.trim().split(',').count() != COLUMNS.len() - 1 {
            return Err(Failure {
                code: 1,
                message: format!(
                    "the point of {count} ranks failed ({}): {row}",
                    child.status
                ),
            });
        }
        rows.push_str(&format!("{point},{}\n", row.trim()));
        // Written after every point: a long scaling run that stops keeps what it measured.
        crate::stdio::write_bytes(output, rows.as_bytes())?;
    }
    if !crate::stdio::is_dash(output) {
        eprintln!("c10dsim: wrote {}", output.display());
    }
    if let Some(picture) = &args.plot {
        if crate::stdio::is_dash(output) {
            return Err(Failure::input("--plot reads the CSV back: give -o a file"));
        }
        plot_scaling(output, picture)?;
    }
    Ok(0)
}

/// The scaling chart: wall time, events per second and peak memory against ranks, on a log
/// axis of ranks — what `c10dsim plot CSV --x ranks --y wall_s --y events_per_s --y
/// peak_memory_mib --log-x` draws.
fn plot_scaling(csv: &Path, picture: &Path) -> Result<(), Failure> {
    crate::plot::plot(&crate::plot::PlotArgs {
        csv: csv.to_path_buf(),
        x: "ranks".into(),
        y: ["wall_s", "events_per_s", "peak_memory_mib"]
            .map(String::from)
            .to_vec(),
        by: None,
        filters: Vec::new(),
        canvas: analysis::plot::Canvas {
            width_px: 960,
            height_px: 1080,
            log_x: true,
            log_y: false,
        },
        output: picture.to_path_buf(),
    })
    .map(|_| ())
}
