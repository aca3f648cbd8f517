//! `c10dsim bench`: the speed benchmark of docs/perf.md — a generated scenario of many ranks,
//! each iteration an async all_reduce, a GEMM and a wait — timed with the wall clock, with the
//! process's peak resident memory; and its scaling mode, one child process per number of ranks
//! (so that each point's peak memory is its own), into a CSV and a chart; and its repeat mode,
//! the same point run again and again in fresh processes, alternating with another binary's
//! where one is named, each figure printed with its spread.
//!
//! About 1,050 lines, about 120 of them tests: the three modes share the scenario, the
//! measurement of one point and the row every mode prints, and the thin `bench` command is
//! the only user of them all.

use crate::Failure;
use analysis::spread::Spread;
use analysis::text::counted;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// What `c10dsim bench` was asked.
pub struct BenchArgs {
    pub ranks: u32,
    pub iterations: u32,
    pub print_scenario: bool,
    /// Simulate with `--summary` (records folded as they complete).
    pub summary: bool,
    /// `--max-events` and `--max-timeline`, which each point's scenario must fit, and
    /// `--no-fold` (without it, one rank is simulated per class of ranks that behave alike).
    pub caps: crate::limits::CapArgs,
    /// Scaling mode: these numbers of ranks, each in its own process.
    pub scaling: Option<Vec<u32>>,
    /// The scaling CSV (`-`: standard output).
    pub output: Option<PathBuf>,
    /// The scaling chart (SVG or PNG).
    pub plot: Option<PathBuf>,
    /// Print the figures as one CSV row (what a scaling point's process prints).
    pub csv_row: bool,
    /// Repeat mode: this many runs, each in a process of its own.
    pub repeat: Option<u32>,
    /// With `repeat`: another c10dsim binary, run alternately with this one.
    pub against: Option<PathBuf>,
}

/// The flags that size the scenario, `--plot`'s name, and `-o` and `--plot` on one file, refused
/// before any work, naming the flag (the generated scenario's own errors would point at a file
/// the user never wrote).
fn check_sizes(args: &BenchArgs) -> Result<(), Failure> {
    let max_ranks = sim::scenario::MAX_RANKS;
    let mut ranks = vec![("--ranks", args.ranks)];
    ranks.extend(
        args.scaling
            .iter()
            .flatten()
            .map(|&count| ("--scaling", count)),
    );
    for (flag, count) in ranks {
        if !(1..=max_ranks).contains(&count) {
            return Err(Failure::input(format!(
                "{flag} {count}: the number of ranks must be between 1 and {max_ranks}"
            )));
        }
    }
    // Two points of one count would be two rows at one x: `plot` refuses the CSV.
    let counts = args.scaling.as_deref().unwrap_or_default();
    if let Some(twice) = (counts.iter().enumerate())
        .find(|&(position, count)| counts[..position].contains(count))
        .map(|(_, count)| count)
    {
        return Err(Failure::input(format!(
            "--scaling {twice}: a number of ranks given twice (each point is one number of ranks)"
        )));
    }
    let max_repeat = sim::scenario::MAX_REPEAT;
    if !(1..=max_repeat).contains(&args.iterations) {
        return Err(Failure::input(format!(
            "--iterations {}: must be between 1 and {max_repeat}",
            args.iterations
        )));
    }
    if let Some(picture) = &args.plot {
        crate::plot::picture_is_png(picture)
            .map_err(|refused| Failure::input(format!("--plot {}", refused.message)))?;
        if let Some(output) = &args.output {
            crate::stdio::refuse_shared_outputs(&[("-o", output), ("--plot", picture)])?;
        }
    }
    Ok(())
}

/// Refuses, before any runs, a benchmark whose scenario (each point's, with `--scaling`) is
/// over the work caps, as `run` refuses it (docs/reliability.md#limits).
fn check_work(args: &BenchArgs) -> Result<(), Failure> {
    let points = args.scaling.clone().unwrap_or_else(|| vec![args.ranks]);
    for ranks in points {
        let text = scenario_text(ranks, args.iterations);
        let scenario =
            sim::scenario::parse("<bench>", &text).map_err(|e| Failure::input(e.to_string()))?;
        args.caps.over(&scenario, args.summary).map_err(|message| {
            let unfolded = if args.summary {
                " (--summary simulates every rank, unfolded)"
            } else {
                ""
            };
            Failure::input(format!(
                "bench --ranks {ranks} --iterations {}: {message}{unfolded}; nothing was run \
                 (give fewer --ranks or --iterations, or raise the caps with --max-events / \
                 --max-timeline)",
                args.iterations
            ))
        })?;
    }
    Ok(())
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

/// Linux reports the CPU times of /proc/PID/stat in clock ticks of 1/100 s (`USER_HZ`, fixed by
/// the kernel's ABI whatever the kernel's own tick rate).
const CLOCK_TICKS_PER_S: f64 = 100.0;

/// What the kernel counted for this process so far: the page faults it served without I/O (the
/// first touch of fresh memory, zeroed by the kernel: docs/perf.md, thirteenth look) and the
/// CPU time in user and system mode.
#[derive(Debug, Clone, Copy, PartialEq)]
struct ProcessCounters {
    minor_faults: u64,
    user_s: f64,
    system_s: f64,
}

impl ProcessCounters {
    /// This process's counters (None without /proc/self/stat).
    fn now() -> Option<ProcessCounters> {
        ProcessCounters::parse(&std::fs::read_to_string("/proc/self/stat").ok()?)
    }

    /// Reads a /proc/PID/stat line (proc(5)): after the command name, which is in parentheses
    /// and may itself hold spaces and parentheses, field 10 is `minflt`, 14 `utime` and 15
    /// `stime`.
    fn parse(stat: &str) -> Option<ProcessCounters> {
        let after_name = &stat[stat.rfind(')')? + 1..];
        // The fields after the name start at field 3 (`state`).
        let field = |number: usize| -> Option<u64> {
            after_name.split_whitespace().nth(number - 3)?.parse().ok()
        };
        Some(ProcessCounters {
            minor_faults: field(10)?,
            user_s: field(14)? as f64 / CLOCK_TICKS_PER_S,
            system_s: field(15)? as f64 / CLOCK_TICKS_PER_S,
        })
    }

    /// What was counted from the reading `earlier` to now (None where either is missing).
    fn counted_since(earlier: Option<ProcessCounters>) -> Option<ProcessCounters> {
        Some(ProcessCounters::now()?.since(earlier?))
    }

    /// What was counted from `earlier` to `self`.
    fn since(self, earlier: ProcessCounters) -> ProcessCounters {
        ProcessCounters {
            minor_faults: self.minor_faults.saturating_sub(earlier.minor_faults),
            user_s: self.user_s - earlier.user_s,
            system_s: self.system_s - earlier.system_s,
        }
    }
}

/// The line `bench` prints for what the kernel counted over `what`.
fn counters_line(what: &str, counted: Option<ProcessCounters>) -> String {
    match counted {
        Some(c) => format!(
            "{what}: {} page faults, CPU {:.2} s user + {:.2} s system (1/100 s ticks)",
            c.minor_faults, c.user_s, c.system_s
        ),
        None => format!("{what}: page faults and CPU time unavailable (no /proc/self/stat)"),
    }
}

/// The scaling CSV's columns (a `point` column first, as the sweep CSVs that `plot` reads).
/// The last three are what the kernel counted during the headline simulation (empty where
/// /proc/self/stat is not there).
const COLUMNS: [&str; 16] = [
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
    "page_faults",
    "user_s",
    "system_s",
];

/// The figures of a row (`COLUMNS` but `point`) that binaries from before the page-fault and CPU
/// columns print: `bench --repeat --against` an older binary reads them, its missing figures
/// left empty.
const OLDER_ROW_FIGURES: usize = 12;

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
    /// What the kernel counted during the simulation with the detector, and during the whole
    /// command so far.
    simulate_counters: Option<ProcessCounters>,
    command_counters: Option<ProcessCounters>,
    peak_bytes: Option<u64>,
    stream_interval_us: f64,
    findings: usize,
    /// Classes of ranks that behave alike, and the ranks simulated for them (docs/scale.md).
    classes: (usize, usize),
}

pub fn bench(args: &BenchArgs) -> Result<u8, Failure> {
    check_sizes(args)?;
    // A point's process (`--csv-row`) was checked by the command that started it.
    if !args.csv_row {
        check_work(args)?;
    }
    if let Some(ranks) = &args.scaling {
        if args.repeat.is_some() {
            return Err(Failure::input(
                "--scaling and --repeat are two modes: give one (repeat a scaling point with --ranks)",
            ));
        }
        return scaling(args, ranks);
    }
    if let Some(runs) = args.repeat {
        return repeat(args, runs);
    }
    if args.against.is_some() {
        return Err(Failure::input("--against goes with --repeat"));
    }
    if args.output.is_some() || args.plot.is_some() {
        return Err(Failure::input(
            "-o goes with --scaling or --repeat, --plot with --scaling",
        ));
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
        let counted = figures.simulate_counters.map_or(",,".to_string(), |c| {
            format!("{},{:.2},{:.2}", c.minor_faults, c.user_s, c.system_s)
        });
        outln!(
            "{ranks},{iterations},{},{},{},{},{:.6},{:.6},{:.0},{:.6},{:.6},{peak_mib},{counted}",
            args.summary,
            !args.caps.no_fold,
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
    outln!(
        "scenario: {} x {} (async all_reduce 25MiB + gemm 4096^3 + wait){}",
        counted(u64::from(ranks), "rank"),
        counted(u64::from(iterations), "iteration"),
        if args.summary {
            ", summarised (--summary)"
        } else {
            ""
        }
    )?;
    outln!(
        "classes of ranks that behave alike: {} ({}; docs/scale.md)",
        figures.classes.0,
        counted(figures.classes.1 as u64, "simulated rank")
    )?;
    outln!(
        "collective records: {}, kernel records: {} (of the simulated ranks)",
        figures.collectives,
        figures.kernels
    )?;
    outln!("events processed: {}", figures.events)?;
    outln!("simulate wall time: {:.3} s", figures.simulate_s)?;
    outln!(
        "{}",
        without_detector_line(figures.simulate_s, figures.without_detector_s)
    )?;
    outln!(
        "{}",
        counters_line("during the simulation", figures.simulate_counters)
    )?;
    outln!("events per second: {:.0}", per_s(figures.simulate_s))?;
    outln!(
        "events per second without the race detector: {:.0}",
        per_s(figures.without_detector_s)
    )?;
    // Events per second depend on how many events a rank's iteration takes, which the launch
    // queue changes (docs/perf.md, eleventh look): the time per rank-iteration compares runs
    // of different sizes.
    let rank_iterations = (figures.classes.1 as f64 * f64::from(iterations)).max(1.0);
    outln!(
        "per simulated rank and iteration: {:.2} events, {:.0} ns of simulate wall time",
        figures.events as f64 / rank_iterations,
        figures.simulate_s * 1e9 / rank_iterations
    )?;
    outln!("report (metrics) wall time: {:.3} s", figures.report_s)?;
    outln!(
        "whole command wall time (parse, both simulations, report): {:.3} s",
        figures.command_s
    )?;
    outln!(
        "{}",
        counters_line("during the whole command", figures.command_counters)
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

/// The line of the simulation without the race detector and the ratio of the detector's run
/// to it. Not called the detector's cost: the run without it goes first and pays the first
/// touch of memory, which the second finds in the allocator (docs/perf.md, "A caution about
/// `bench`'s headline"), so that on a small run the ratio is below 1.
fn without_detector_line(simulate_s: f64, without_detector_s: f64) -> String {
    format!(
        "simulate wall time without the race detector: {without_detector_s:.3} s (the race \
         detector's run took {:.2}x this time; this run goes first and pays the first touch of \
         memory: compare with --repeat)",
        simulate_s / without_detector_s.max(1e-9)
    )
}

/// Simulates the benchmark without the race detector, then with it, then takes the report.
fn measure(args: &BenchArgs, text: &str) -> Result<Figures, Failure> {
    let command_started = Instant::now();
    let command_counted_from = ProcessCounters::now();
    let (ranks, iterations) = (args.ranks, args.iterations);
    let scenario =
        sim::scenario::parse("<bench>", text).map_err(|e| Failure::input(e.to_string()))?;
    let summary = args
        .summary
        .then(|| sim::timeline::RecordSelection::parse("none").expect("none parses"));
    let size = format!(
        "{} x {}",
        counted(u64::from(ranks), "rank"),
        counted(u64::from(iterations), "iteration")
    );
    note!("c10dsim: simulating {size} without the race detector ...");
    let started = Instant::now();
    let options = sim::engine::Options {
        race_detector: false,
        summary: summary.clone(),
        fold: !args.caps.no_fold,
        ..sim::engine::Options::default()
    };
    let (without_detector, _) = sim::engine::simulate_with(&scenario, options);
    let without_detector_s = started.elapsed().as_secs_f64();
    drop(without_detector);
    note!("c10dsim: simulating {size} ...");
    let counted_from = ProcessCounters::now();
    let started = Instant::now();
    let options = sim::engine::Options {
        summary,
        fold: !args.caps.no_fold,
        ..sim::engine::Options::default()
    };
    let options_for_classes = options.clone();
    let (timeline, events) = sim::engine::simulate_with(&scenario, options);
    let simulate_s = started.elapsed().as_secs_f64();
    let simulate_counters = ProcessCounters::counted_since(counted_from);
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
        simulate_counters,
        command_counters: ProcessCounters::counted_since(command_counted_from),
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

/// `bench --scaling N1,N2,…`: each number of ranks in a process of its own (this binary with
/// `--csv-row`), whose own peak resident set is its point's memory; rows are written as the
/// points finish; then the chart, if asked.
fn scaling(args: &BenchArgs, ranks: &[u32]) -> Result<u8, Failure> {
    let Some(output) = &args.output else {
        return Err(Failure::input("--scaling needs -o OUT.csv"));
    };
    let program = std::env::current_exe()
        .map_err(|error| Failure::input(format!("cannot find this program: {error}")))?;
    let mut rows = GrowingCsv::new(output, &COLUMNS.join(","))?;
    for (point, &count) in ranks.iter().enumerate() {
        note!(
            "c10dsim: scaling point {}/{}: {} x {}",
            point + 1,
            ranks.len(),
            counted(u64::from(count), "rank"),
            counted(u64::from(args.iterations), "iteration")
        );
        let row = point_row(&program, args, count)?;
        rows.push(&format!("{point},{row}"))?;
    }
    if !crate::stdio::is_dash(output) {
        note!("c10dsim: wrote {}", output.display());
    }
    if let Some(picture) = &args.plot {
        if crate::stdio::is_dash(output) {
            return Err(Failure::input("--plot reads the CSV back: give -o a file"));
        }
        plot_scaling(output, picture)?;
    }
    Ok(0)
}

/// One point's figures as the CSV row (without `point`) a process of `program` prints for
/// `bench --csv-row` with `ranks` ranks and the other arguments of `args`.
fn point_row(program: &Path, args: &BenchArgs, ranks: u32) -> Result<String, Failure> {
    let mut command = std::process::Command::new(program);
    command.args([
        "bench",
        "--csv-row",
        "--ranks",
        &ranks.to_string(),
        "--iterations",
        &args.iterations.to_string(),
    ]);
    if args.summary {
        command.arg("--summary");
    }
    if args.caps.no_fold {
        command.arg("--no-fold");
    }
    let child = command
        .stderr(std::process::Stdio::inherit())
        .output()
        .map_err(|error| Failure::input(format!("cannot run {}: {error}", program.display())))?;
    let row = String::from_utf8_lossy(&child.stdout).trim().to_string();
    let Some(row) = complete_row(&row).filter(|_| child.status.success()) else {
        let printed = if row.is_empty() {
            "nothing on stdout".to_string()
        } else {
            format!("this on stdout: {row}")
        };
        // A binary that ran and printed no row is not a c10dsim with `bench --csv-row` (bad
        // input, 2); one that failed says why on the stderr it shares with this one (1).
        return Err(Failure {
            code: if child.status.success() { 2 } else { 1 },
            message: format!(
                "{} bench --csv-row with {ranks} ranks failed or printed no row of {} figures ({}; {printed})",
                program.display(),
                COLUMNS.len() - 1,
                child.status
            ),
        });
    };
    Ok(row)
}

/// A `--csv-row` row with every figure of `COLUMNS` but `point`: as printed, or, from a binary
/// older than the last columns, with empty cells for them; None for any other count.
fn complete_row(row: &str) -> Option<String> {
    let figures = row.split(',').count();
    let missing = (COLUMNS.len() - 1).checked_sub(figures)?;
    // Each figure is what `bench --csv-row` prints: `summary` and `fold` true or false, the
    // others finite non-negative numbers (the CPU times may be empty without /proc).
    let sound = row
        .split(',')
        .zip(&COLUMNS[1..])
        .all(|(cell, &column)| match column {
            "summary" | "fold" => cell == "true" || cell == "false",
            "page_faults" | "user_s" | "system_s" if cell.is_empty() => true,
            _ => cell
                .parse::<f64>()
                .is_ok_and(|value| value.is_finite() && value >= 0.0),
        });
    (sound && (missing == 0 || figures == OLDER_ROW_FIGURES))
        .then(|| format!("{row}{}", ",".repeat(missing)))
}

/// A figure `bench --repeat` gives a spread: its CSV column, what the summary calls it, its
/// unit and the decimals it is shown with.
struct Repeated {
    column: &'static str,
    name: &'static str,
    unit: &'static str,
    decimals: usize,
}

impl Repeated {
    /// The decimals `spread` is shown with: the figure's own, or more where a value is below
    /// them, for three significant digits (a 56 µs simulation read `0.000`), down to the
    /// microsecond the rows carry; counts (no decimals) as they are.
    fn decimals_for(&self, spread: &Spread) -> usize {
        const MICROSECOND_DECIMALS: i64 = 6;
        let least = [spread.min, spread.median, spread.max]
            .into_iter()
            .filter(|&value| value > 0.0)
            .fold(f64::INFINITY, f64::min);
        if self.decimals == 0 || !least.is_finite() {
            return self.decimals;
        }
        let significant = (2 - least.log10().floor() as i64).clamp(0, MICROSECOND_DECIMALS);
        self.decimals.max(significant as usize)
    }
}

const REPEATED: [Repeated; 8] = [
    Repeated {
        column: "wall_s",
        name: "simulate",
        unit: " s",
        decimals: 3,
    },
    Repeated {
        column: "wall_without_detector_s",
        name: "simulate without the race detector",
        unit: " s",
        decimals: 3,
    },
    Repeated {
        column: "events_per_s",
        name: "events per second",
        unit: "",
        decimals: 0,
    },
    Repeated {
        column: "command_s",
        name: "whole command",
        unit: " s",
        decimals: 3,
    },
    Repeated {
        column: "peak_memory_mib",
        name: "peak resident memory",
        unit: " MiB",
        decimals: 1,
    },
    Repeated {
        column: "page_faults",
        name: "page faults during the simulation",
        unit: "",
        decimals: 0,
    },
    Repeated {
        column: "user_s",
        name: "user CPU during the simulation",
        unit: " s",
        decimals: 2,
    },
    Repeated {
        column: "system_s",
        name: "system CPU during the simulation",
        unit: " s",
        decimals: 2,
    },
];

/// What the runs of one binary measured.
#[derive(Default, Clone)]
struct Series {
    /// Per figure of `REPEATED`, the runs' values.
    figures: [Vec<f64>; REPEATED.len()],
    /// The events each run counted.
    events: Vec<u64>,
}

/// `bench --repeat N [--against OTHER]`: N runs of the point, each in a fresh process (a
/// simulation that is the first of its process, as `c10dsim run`'s is). With another binary,
/// round k runs both, this one first when k is even and the other first when k is odd, so
/// that neither always finds the machine as the other left it. Every run's row goes to
/// stderr as it ends (and to -o, rewritten after each, with `binary` and `round` columns);
/// then each figure's least, median and greatest value per binary, and the other's medians
/// against this one's.
fn repeat(args: &BenchArgs, runs: u32) -> Result<u8, Failure> {
    if runs == 0 {
        return Err(Failure::input("--repeat needs at least 1 run"));
    }
    if args.plot.is_some() {
        return Err(Failure::input("--plot goes with --scaling"));
    }
    let this = std::env::current_exe()
        .map_err(|error| Failure::input(format!("cannot find this program: {error}")))?;
    let mut binaries = vec![("this", this)];
    if let Some(other) = &args.against {
        check_program(other)?;
        binaries.push(("against", other.clone()));
    }
    let series = run_series(args, runs, &binaries)?;
    let text = render_series(args, runs, &binaries, &series);
    match &args.output {
        // The CSV has standard output: the summary goes beside the progress.
        Some(output) if crate::stdio::is_dash(output) => eprint!("{text}"),
        _ => out!("{text}")?,
    }
    Ok(0)
}

/// `--against`'s binary exists, is a file and is executable: refused before any run (exit 2),
/// not when its first run fails after this binary's.
fn check_program(program: &Path) -> Result<(), Failure> {
    use std::os::unix::fs::PermissionsExt;
    let why = match std::fs::metadata(program) {
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => "no such file".to_string(),
        Err(error) => format!("cannot be read: {error}"),
        Ok(meta) if meta.is_dir() => "a folder, not a c10dsim binary".to_string(),
        Ok(meta) if !meta.is_file() => "not a file".to_string(),
        Ok(meta) if meta.permissions().mode() & 0o111 == 0 => {
            "not executable (its mode has no x bit)".to_string()
        }
        Ok(_) => return Ok(()),
    };
    Err(Failure::input(format!(
        "--against {}: {why} (give the path of another c10dsim binary)",
        program.display()
    )))
}

/// Runs the rounds of `bench --repeat`, writing each run's row as it ends.
fn run_series(
    args: &BenchArgs,
    runs: u32,
    binaries: &[(&str, PathBuf)],
) -> Result<Vec<Series>, Failure> {
    let header = format!("run,binary,round,{}", COLUMNS[1..].join(","));
    let mut csv = match &args.output {
        Some(output) => Some(GrowingCsv::new(output, &header)?),
        None => None,
    };
    let mut series = vec![Series::default(); binaries.len()];
    let mut run = 0;
    for round in 0..runs {
        let mut order: Vec<usize> = (0..binaries.len()).collect();
        if round % 2 == 1 {
            order.reverse();
        }
        for which in order {
            let (label, program) = &binaries[which];
            note!(
                "c10dsim: run {}/{} ({label}, round {}): {} x {}",
                run + 1,
                runs as usize * binaries.len(),
                round + 1,
                counted(u64::from(args.ranks), "rank"),
                counted(u64::from(args.iterations), "iteration")
            );
            let row = point_row(program, args, args.ranks)?;
            let fields: Vec<&str> = row.split(',').collect();
            // The row is the CSV's columns but `point`.
            let field = |column: &str| {
                let index = COLUMNS.iter().position(|c| *c == column)?;
                fields.get(index - 1)
            };
            let measured = &mut series[which];
            for (values, figure) in measured.figures.iter_mut().zip(&REPEATED) {
                values.extend(field(figure.column).and_then(|f| f.parse::<f64>().ok()));
            }
            measured
                .events
                .extend(field("events").and_then(|f| f.parse::<u64>().ok()));
            note!("c10dsim: {label}: {row}");
            if let Some(csv) = &mut csv {
                csv.push(&format!("{run},{label},{round},{row}"))?;
            }
            run += 1;
        }
    }
    if let Some(output) = &args.output {
        if !crate::stdio::is_dash(output) {
            note!("c10dsim: wrote {}", output.display());
        }
    }
    Ok(series)
}

/// The summary of `bench --repeat`: each figure's spread per binary, then the other binary's
/// medians over this one's.
fn render_series(
    args: &BenchArgs,
    runs: u32,
    binaries: &[(&str, PathBuf)],
    series: &[Series],
) -> String {
    let spreads: Vec<Vec<Option<Spread>>> = (series.iter())
        .map(|measured| measured.figures.iter().map(|v| Spread::of(v)).collect())
        .collect();
    let mut text = format!(
        "scenario: {} x {}{}{}, {runs} run(s){}, each in a process of its own\n",
        counted(u64::from(args.ranks), "rank"),
        counted(u64::from(args.iterations), "iteration"),
        if args.caps.no_fold { ", unfolded" } else { "" },
        if args.summary { ", summarised" } else { "" },
        if binaries.len() > 1 {
            " of each binary, by turns"
        } else {
            ""
        },
    );
    text.push_str("each figure: least / median / greatest over the runs\n");
    for ((label, program), per_figure) in binaries.iter().zip(&spreads) {
        text.push_str(&format!("{label} ({}):\n", program.display()));
        for (figure, spread) in REPEATED.iter().zip(per_figure) {
            let shown = spread.map_or("unavailable".to_string(), |s| {
                let digits = figure.decimals_for(&s);
                format!(
                    "{:.digits$} / {:.digits$} / {:.digits$}{}",
                    s.min, s.median, s.max, figure.unit
                )
            });
            text.push_str(&format!("  {}: {shown}\n", figure.name));
        }
    }
    if let ([this, other], [this_series, other_series]) = (&spreads[..], series) {
        text.push_str("against / this, medians (ranges that overlap do not tell the two apart):\n");
        for ((figure, mine), theirs) in REPEATED.iter().zip(this).zip(other) {
            let (Some(mine), Some(theirs)) = (mine, theirs) else {
                continue;
            };
            let ranges = if mine.overlaps(theirs) {
                "overlap"
            } else {
                "apart"
            };
            // A median of 0 (a run shorter than the row's rounding) has no ratio.
            let ratio = if mine.median > 0.0 {
                format!("{:.2}x", theirs.median / mine.median)
            } else {
                "–".to_string()
            };
            text.push_str(&format!("  {}: {ratio}, ranges {ranges}\n", figure.name));
        }
        if this_series.events != other_series.events {
            text.push_str("note: the two binaries count different events for this scenario; compare their times, not their events per second\n");
        }
    }
    text
}

/// A CSV written as its rows arrive: a file is rewritten whole after each row (a long run that
/// stops keeps what it measured), standard output gets each line once.
struct GrowingCsv<'p> {
    path: &'p Path,
    text: String,
}

impl<'p> GrowingCsv<'p> {
    fn new(path: &'p Path, header: &str) -> Result<GrowingCsv<'p>, Failure> {
        let mut csv = GrowingCsv {
            path,
            text: String::new(),
        };
        csv.push(header)?;
        Ok(csv)
    }

    fn push(&mut self, line: &str) -> Result<(), Failure> {
        let line = format!("{line}\n");
        self.text.push_str(&line);
        let bytes = if crate::stdio::is_dash(self.path) {
            &line
        } else {
            &self.text
        };
        crate::stdio::write_bytes(self.path, bytes.as_bytes())
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_time_without_the_detector_gives_a_ratio_never_called_the_detectors_cost() {
        // The run without the detector goes first and pays the first touch of memory: on a small
        // run the detector's run is the faster, and "detector costs 0.45x" misled.
        for (simulate_s, without_detector_s, ratio) in [(0.009, 0.02, "0.45x"), (1.2, 1.0, "1.20x")]
        {
            let line = without_detector_line(simulate_s, without_detector_s);
            assert!(
                line.starts_with(&format!(
                    "simulate wall time without the race detector: {without_detector_s:.3} s (the \
                     race detector's run took {ratio} this time; "
                )),
                "{line}"
            );
            assert!(line.contains("first touch of memory"), "{line}");
            assert!(!line.contains("cost"), "{line}");
        }
    }

    #[test]
    fn a_stat_line_gives_the_minor_faults_and_the_cpu_times_whatever_the_command_name() {
        // The name holds spaces and parentheses: the fields are counted from its last ')'.
        let stat = "4242 (a (b) c) R 1 4242 4242 0 -1 4194304 44927 3 1 0 27 11 0 0 20 0 1 0 100";
        let counters = ProcessCounters::parse(stat).expect("a stat line");
        assert_eq!(counters.minor_faults, 44_927);
        assert!((counters.user_s - 0.27).abs() < 1e-12, "{counters:?}");
        assert!((counters.system_s - 0.11).abs() < 1e-12, "{counters:?}");
        assert_eq!(ProcessCounters::parse("4242 (cut) R 1 2"), None);
        assert_eq!(ProcessCounters::parse("no name here"), None);
    }

    #[test]
    fn an_older_binarys_row_gets_empty_cells_for_the_columns_it_lacks() {
        let older = "2,3,false,false,2,30,0.001,0.001,30000,0.000,0.002,12.0";
        assert_eq!(
            complete_row(older).as_deref(),
            Some("2,3,false,false,2,30,0.001,0.001,30000,0.000,0.002,12.0,,,")
        );
        let full = format!("{older},120,0.00,0.00");
        assert_eq!(complete_row(&full), Some(full.clone()));
        assert_eq!(complete_row(&format!("{older},120")), None);
        assert_eq!(complete_row(&format!("{full},1")), None);
        assert_eq!(complete_row(""), None);
        // A row of the right length whose figures are not figures: not a bench row.
        let nan = full.replacen("30000", "NaN", 1);
        assert_eq!(complete_row(&nan), None);
        assert_eq!(complete_row(&full.replacen("12.0", "-1", 1)), None);
        assert_eq!(complete_row(&full.replacen("false", "no", 1)), None);
        assert_eq!(complete_row("x,".repeat(14).trim_end_matches(',')), None);
    }

    #[test]
    fn touching_fresh_memory_counts_page_faults_between_two_readings() {
        let before = ProcessCounters::now().expect("/proc/self/stat on Linux");
        let fresh = vec![1u8; 8 << 20];
        let after = ProcessCounters::now().expect("/proc/self/stat on Linux");
        assert_eq!(fresh.iter().map(|&b| u64::from(b)).sum::<u64>(), 8 << 20);
        let counted = after.since(before);
        assert!(counted.minor_faults >= 1, "{counted:?}");
        assert!(
            counted.user_s >= 0.0 && counted.system_s >= 0.0,
            "{counted:?}"
        );
        assert!(ProcessCounters::counted_since(Some(before)).is_some());
        assert_eq!(ProcessCounters::counted_since(None), None);
    }

    #[test]
    fn the_counters_line_gives_faults_and_both_cpu_times_or_says_why_not() {
        let counted = ProcessCounters {
            minor_faults: 8_979,
            user_s: 0.24,
            system_s: 0.02,
        };
        assert_eq!(
            counters_line("during the simulation", Some(counted)),
            "during the simulation: 8979 page faults, CPU 0.24 s user + 0.02 s system (1/100 s ticks)"
        );
        assert_eq!(
            counters_line("during the simulation", None),
            "during the simulation: page faults and CPU time unavailable (no /proc/self/stat)"
        );
    }

    fn args() -> BenchArgs {
        BenchArgs {
            ranks: 4,
            iterations: 2,
            print_scenario: false,
            summary: false,
            caps: crate::limits::CapArgs {
                no_fold: true,
                ..crate::limits::CapArgs::default()
            },
            scaling: None,
            output: None,
            plot: None,
            csv_row: false,
            repeat: Some(2),
            against: None,
        }
    }

    fn series(simulate_s: [f64; 2], events: u64) -> Series {
        let mut measured = Series::default();
        measured.figures[0] = simulate_s.to_vec();
        measured.events = vec![events; 2];
        measured
    }

    #[test]
    fn the_summary_compares_medians_and_says_when_the_events_differ() {
        let binaries = [
            ("this", PathBuf::from("a")),
            ("against", PathBuf::from("b")),
        ];
        let text = render_series(
            &args(),
            2,
            &binaries,
            &[series([1.0, 3.0], 10), series([4.0, 5.0], 10)],
        );
        assert!(
            text.contains("  simulate: 1.000 / 2.000 / 3.000 s\n"),
            "{text}"
        );
        assert!(text.contains("  simulate: 2.25x, ranges apart\n"), "{text}");
        assert!(
            text.contains("  events per second: unavailable\n"),
            "{text}"
        );
        assert!(!text.contains("different events"), "{text}");
        let text = render_series(
            &args(),
            2,
            &binaries,
            &[series([0.0, 0.0], 10), series([0.0, 1.0], 11)],
        );
        assert!(text.contains("  simulate: –, ranges overlap\n"), "{text}");
        assert!(text.contains("count different events"), "{text}");
    }

    /// A time below the fixed decimals gets more, for three significant digits (a 56 µs
    /// simulation was `0.000 / 0.000 / 0.000 s`), down to the microsecond the rows carry.
    #[test]
    fn small_times_keep_their_significant_digits() {
        let binaries = [("this", PathBuf::from("a"))];
        let text = render_series(&args(), 2, &binaries, &[series([0.000056, 0.000072], 10)]);
        assert!(
            text.contains("  simulate: 0.000056 / 0.000064 / 0.000072 s\n"),
            "{text}"
        );
        let text = render_series(&args(), 2, &binaries, &[series([0.0, 0.000002], 10)]);
        assert!(
            text.contains("  simulate: 0.000000 / 0.000001 / 0.000002 s\n"),
            "{text}"
        );
    }
}
