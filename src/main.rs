//! `c10dsim`: the command line. Thin glue: parse arguments, read files, call the `sim`, `hw` and
//! `analysis` crates, write outputs. Exit codes: 0 ok, 1 the run found a problem (deadlock,
//! time cap, …), 2 bad input or environment (an unwritable output too).
//!
//! Over 1,000 lines (about 1,100): the clap definition of every command (most of the file is their
//! help text) and one dispatch; each command's work lives in its own module (`run_cmd`,
//! `sweep`, `diff_cmd`, `torch_cmd`, `import_cmd`, `fr_cmd`, …).

/// `print!` that returns a [`Failure`] instead of panicking when standard output is a closed
/// pipe or a full disk (`c10dsim run … | head -1`, `> /dev/full`).
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::write_stdout(format_args!($($arg)*))
    };
}

/// `println!` through [`out!`].
macro_rules! outln {
    () => {
        out!("\n")
    };
    ($($arg:tt)*) => {
        $crate::write_stdout(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// `eprintln!` that leaves a standard error nobody reads alone: a note, warning or error
/// message written to a closed pipe (`c10dsim sweep … 2>&1 | head -0`) is lost, where
/// `eprintln!` would panic (exit 101) and hide the command's own exit status.
macro_rules! note {
    () => {
        note!("")
    };
    ($($arg:tt)*) => {{
        let _ = std::io::Write::write_fmt(
            &mut std::io::stderr().lock(),
            format_args!("{}\n", format_args!($($arg)*)),
        );
    }};
}

mod bench;
mod diagnostic;
mod diff_cmd;
mod fidelity_cmd;
mod fr_cmd;
mod hw_cmd;
mod import_cmd;
mod json_text;
mod limits;
mod plot;
mod progress;
mod run_cmd;
mod stdio;
mod sweep;
mod torch_cmd;
mod trace_out;

use clap::{CommandFactory, Parser, Subcommand};
use run_cmd::{emit, run, Against, RunOutputs};
use sim::scenario::{self, Scenario};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "c10dsim",
    version,
    // clap's own `help` command takes every word after it as a command's name, so that `help
    // --help` was refused as an unknown command; [`Command::Help`] replaces it.
    disable_help_subcommand = true,
    about = "When is my collective really done? Simulate torch.distributed + NCCL stream semantics, then check on GPUs.",
    long_about = "c10dsim runs TOML scenarios — what every rank's PyTorch program does with collectives, \
Works, streams and events — in a discrete-event simulation of ProcessGroupNCCL and CUDA streams, \
and reports host call times, stream intervals, completion and overlap (rules R1–R31 of docs/semantics.md).\n\n\
Exit codes: 0 ok; 1 the run found a problem (a deadlock, a wait or watchdog timeout, an \
out-of-memory, a failure at exit, the simulated-time cap, the memory cap; a data race with --fail-on-race) or `diff` \
found a difference beyond its tolerances; 2 bad input or environment, an output that could not \
be written included.\n\n\
Limits (docs/reliability.md): before a run, its work is estimated (op calls, engine events, \
Timeline size) and a scenario over --max-events (10^9) or --max-timeline (4GiB) is refused with \
exit 2 and the numbers; a run holding more memory than --max-memory (8GiB, or 3/4 of the \
machine's) stops with a memory_cap finding (exit 1); max_sim_time_s caps host and GPU time alike."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Simulate a scenario and print its parameters, R3 metrics and measures.
    // The tolerances are --against's: given without it (even at their defaults), nothing would
    // read them.
    #[command(group(
        clap::ArgGroup::new("tolerances")
            .args(["tol_pct", "tol_us", "order_tie_us"])
            .multiple(true)
            .requires("against")
    ))]
    Run {
        /// The scenario file (TOML).
        file: PathBuf,
        /// Print one JSON object (parameters and report) instead of tables.
        #[arg(long)]
        json: bool,
        /// Write a Chrome trace with every rank (opens in Perfetto / chrome://tracing; `-`:
        /// standard output).
        #[arg(long, value_name = "OUT.json")]
        trace: Option<PathBuf>,
        /// Write a folder with one trace per rank (`rank<N>.pt.trace.json`), shaped like
        /// torch.profiler's, for Holistic Trace Analysis (`TraceAnalysis(trace_dir=DIR)`) and
        /// Perfetto.
        #[arg(long, value_name = "DIR")]
        trace_dir: Option<PathBuf>,
        /// Write the full Timeline (docs/timeline-format.md; `-`: standard output).
        #[arg(long, value_name = "OUT.json")]
        timeline: Option<PathBuf>,
        /// Write the Flight Recorder dump of each rank that dumped after a watchdog timeout or
        /// error into DIR, as `<prefix><rank>` (the file name of TORCH_FR_DUMP_TEMP_FILE, else
        /// `nccl_trace_rank_`): the pickles torchfrtrace reads (docs/flight-recorder.md).
        /// Without it, a scenario that sets TORCH_FR_DUMP_TEMP_FILE gets its dumps there.
        #[arg(long, value_name = "DIR")]
        fr_dir: Option<PathBuf>,
        /// Write a Gantt chart of the Timeline (SVG): a host row and a row per stream for each
        /// rank, kernels as bars, cross-stream waits as arrows (`-`: standard output, the report
        /// then goes to stderr).
        #[arg(long, value_name = "OUT.svg")]
        svg: Option<PathBuf>,
        /// Print nccl-tests' all_reduce_perf table (size, count, type, redop, root, time, algbw,
        /// busbw, #wrong) alone on stdout, as all_reduce_perf does, and the report on stderr;
        /// with --json, its rows join the JSON object.
        #[arg(long)]
        nccl_tests: bool,
        /// Exit 1 when the race detector finds a data race (R21); races are reported either way.
        /// Not with --against, whose exit code is the diff's.
        #[arg(long, conflicts_with = "against")]
        fail_on_race: bool,
        /// Keep the Timeline as summaries: every rank's records fold, as they complete, into
        /// exact per-op distributions (the report is the same), so memory stays bounded at
        /// scale; --timeline, --trace and --svg then hold only the records of --records-for
        /// (docs/timeline-format.md#summaries). Not with --nccl-tests or --against, which read
        /// every rank's records.
        #[arg(long, conflicts_with_all = ["nccl_tests", "against"])]
        summary: bool,
        /// With --summary: the records kept whole, `ranks=0,3,7 iterations=0-2,99` (either part
        /// may be left out: every rank, every iteration; default none).
        #[arg(long, value_name = "SELECTION", requires = "summary", value_parser = parse_selection)]
        records_for: Option<sim::timeline::RecordSelection>,
        /// Diff the simulated Timeline against this one (measured) instead of printing the
        /// report; exit 1 when a difference exceeds the tolerances. Not with --trace,
        /// --trace-dir, --svg or --nccl-tests, which it would not write.
        #[arg(long, value_name = "MEASURED.json", conflicts_with_all = ["trace", "trace_dir", "svg", "nccl_tests"])]
        against: Option<PathBuf>,
        #[command(flatten)]
        tolerance: diff_cmd::ToleranceArgs,
        #[command(flatten)]
        limits: limits::LimitArgs,
        #[command(flatten)]
        scenario: ScenarioArgs,
    },
    /// Print a shell completion script on stdout, e.g. `mkdir -p
    /// ~/.local/share/bash-completion/completions; c10dsim completions bash >
    /// ~/.local/share/bash-completion/completions/c10dsim`.
    Completions {
        /// bash, zsh, fish, elvish or powershell.
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff) on stdout, e.g. `c10dsim man > c10dsim.1; man ./c10dsim.1`,
    /// or a command's page, which that one lists: `c10dsim man run > c10dsim-run.1`.
    Man {
        /// The command whose page to print (`run`, `import kineto`); without it, c10dsim's.
        #[arg(value_name = "COMMAND")]
        command: Vec<String>,
    },
    /// Validate scenario files without running them.
    Check {
        /// Scenario files (TOML).
        #[arg(required = true)]
        files: Vec<PathBuf>,
        #[command(flatten)]
        limits: limits::CapArgs,
        #[command(flatten)]
        scenario: ScenarioArgs,
    },
    /// Run a scenario on this machine's GPUs with real NCCL (docs/hw.md) and print the same
    /// report as `run`. Under torchrun/srun each process runs its rank (RANK, WORLD_SIZE,
    /// LOCAL_RANK); write per-rank files with `{rank}` in the path and join them with
    /// `hw-merge`.
    Hw {
        /// The scenario file (TOML).
        file: PathBuf,
        /// With more ranks than GPUs: `off` (refuse), or run rank 0 alone with each collective
        /// as a 1-rank NCCL call (`nccl`), a spin kernel of the simulator's planned duration
        /// (`model`) or of a fixed length (`spin:<µs>`).
        #[arg(long, default_value = "off", value_name = "MODE")]
        downscale: String,
        /// Override every group's timeout (the watchdog aborts communicators after it).
        #[arg(long, value_name = "MS", allow_negative_numbers = true, value_parser = parse_count::<u64>)]
        timeout_ms: Option<u64>,
        /// The GPU to use (default: LOCAL_RANK, else 0).
        #[arg(long, allow_negative_numbers = true, value_parser = parse_count::<usize>)]
        device: Option<usize>,
        /// Print one JSON object instead of tables.
        #[arg(long)]
        json: bool,
        /// Write a Chrome trace; `{rank}` in the path becomes the rank (`-`: standard output).
        #[arg(long, value_name = "OUT.json")]
        trace: Option<PathBuf>,
        /// Write this process's rank as `DIR/rank<N>.pt.trace.json`, beside the other
        /// processes' files: a folder Holistic Trace Analysis loads. DIR must exist.
        #[arg(long, value_name = "DIR")]
        trace_dir: Option<PathBuf>,
        /// Write the measured Timeline; `{rank}` in the path becomes the rank (`-`: standard
        /// output).
        #[arg(long, value_name = "OUT.json")]
        timeline: Option<PathBuf>,
        #[command(flatten)]
        scenario: ScenarioArgs,
    },
    /// Print the resolved scenario (what the simulator, `hw` and `torch` read) as JSON
    /// (docs/torch.md).
    Resolve {
        /// The scenario file (TOML).
        file: PathBuf,
        /// Print JSON (the only form `resolve` prints).
        #[arg(long, required = true)]
        json: bool,
        #[command(flatten)]
        scenario: ScenarioArgs,
    },
    /// Run a scenario through real torch.distributed (NCCL backend), one process per GPU under
    /// torchrun, and print the same report as `run` from the measured Timeline
    /// (docs/torch.md). Needs Python with PyTorch and a GPU (exit 2 names what is missing).
    Torch {
        /// The scenario file (TOML).
        file: PathBuf,
        /// Processes (= GPUs = world size); default: the scenario's ranks, at most the GPUs.
        #[arg(long, allow_negative_numbers = true, value_parser = parse_count::<u32>)]
        nproc: Option<u32>,
        /// Print one JSON object instead of tables.
        #[arg(long)]
        json: bool,
        /// Write the measured Timeline (all ranks joined; `-`: standard output).
        #[arg(long, value_name = "OUT.json")]
        timeline: Option<PathBuf>,
        /// The cap of each rank's Timeline file, read to join them (6 bytes of memory a byte
        /// of the file).
        #[command(flatten)]
        cap: limits::TimelineCap,
        #[command(flatten)]
        scenario: ScenarioArgs,
    },
    /// The fidelity table (docs/fidelity.md): measured PyTorch runs (`<scenario>.run<k>.json`)
    /// against the simulator and the hardware backend, with PyTorch's run-to-run spread, the
    /// outcome verdicts and the peak memory.
    Fidelity {
        /// Folder of `c10dsim torch` Timelines named `<scenario>.run<k>.json`.
        #[arg(long, default_value = fidelity_cmd::DEFAULT_TORCH_DIR)]
        torch: PathBuf,
        /// Folder of `c10dsim torch` Timelines made for the memory table alone, named
        /// `<scenario>.run<k>.json`: used where the timing runs do not record the interpreter's
        /// own bytes [default: TORCH/memory, where it exists].
        #[arg(long, value_name = "DIR")]
        memory_runs: Option<PathBuf>,
        /// Folder of `hw` Timelines named `<scenario>.json`, measured at the PyTorch runs' world
        /// size without stand-ins [default: tests/data/hw/world1, where it exists].
        #[arg(long, value_name = "DIR")]
        hw: Option<PathBuf>,
        /// Simulate on this machine profile (`--machine` of `run`).
        #[arg(
            long,
            value_name = "PROFILE.toml",
            default_value = fidelity_cmd::DEFAULT_MACHINE
        )]
        machine: PathBuf,
        /// Write Markdown here, replacing what follows the generated-part marker (`-`: the
        /// marker and the generated Markdown on standard output).
        #[arg(short, long, value_name = "OUT.md")]
        output: Option<PathBuf>,
        /// The caps of each run read (--max-timeline) and of each scenario's simulation, held
        /// to them as `run` holds a scenario.
        #[command(flatten)]
        caps: limits::SimulationCaps,
    },
    /// Join the one-rank Timelines of a launched `hw` run into one (a common time axis).
    HwMerge {
        /// Per-rank Timeline files.
        #[arg(required = true)]
        parts: Vec<PathBuf>,
        /// The merged Timeline (`-`: standard output).
        #[arg(short, long, value_name = "OUT.json")]
        output: PathBuf,
        /// Merge the parts given even when ranks of the launch (`machine.world`) have none (a
        /// lost file, a process killed before it wrote one), with a warning naming them.
        #[arg(long)]
        partial: bool,
        /// Each part's cap: its reading (6 bytes of memory a byte of the file).
        #[command(flatten)]
        cap: limits::TimelineCap,
    },
    /// Measure the simulator's speed on a generated scenario (docs/perf.md).
    Bench {
        /// Ranks of the generated scenario (with --scaling, its list gives them).
        #[arg(
            long,
            default_value_t = 1024,
            allow_negative_numbers = true, value_parser = parse_count::<u32>,
            conflicts_with = "scaling"
        )]
        ranks: u32,
        /// Iterations, each an async all_reduce, a GEMM and a wait.
        #[arg(long, default_value_t = 1000, allow_negative_numbers = true, value_parser = parse_count::<u32>)]
        iterations: u32,
        /// Print the generated scenario and exit (it is the same with or without --summary and
        /// --no-fold, which say how it is simulated).
        #[arg(long, conflicts_with_all = ["scaling", "repeat", "summary", "no_fold"])]
        print_scenario: bool,
        /// Simulate as `run --summary` does (records folded as they complete).
        #[arg(long)]
        summary: bool,
        /// Simulate every rank, as `run --no-fold` does (without it, the ranks that behave alike
        /// are simulated once, docs/scale.md).
        #[arg(long)]
        no_fold: bool,
        /// The caps `run` holds a scenario to, held here by each point of --scaling and
        /// --repeat before any runs.
        #[command(flatten)]
        work: limits::WorkCaps,
        /// Scaling mode: one point per number of ranks (`1024,8192,65536`), each simulated in
        /// a process of its own so that its peak memory is its own; rows into -o (docs/perf.md).
        #[arg(
            long,
            value_name = "RANKS,...",
            value_delimiter = ',',
            requires = "output",
            allow_negative_numbers = true, value_parser = parse_count::<u32>
        )]
        scaling: Option<Vec<u32>>,
        /// The scaling CSV (point, ranks, iterations, summary, fold, classes, events, wall_s,
        /// wall_without_detector_s, events_per_s, report_s, command_s, peak_memory_mib,
        /// page_faults, user_s, system_s), or with --repeat the runs' CSV (run, binary, round,
        /// then the same from ranks on); `-`: standard output.
        #[arg(short, long, value_name = "OUT.csv")]
        output: Option<PathBuf>,
        /// With --scaling: draw wall time, events per second and peak memory against ranks
        /// (.svg or .png), as `c10dsim plot` draws the CSV.
        #[arg(long, value_name = "OUT.svg", requires = "scaling")]
        plot: Option<PathBuf>,
        /// Print the figures as one CSV row without a header (what each scaling point prints).
        #[arg(long, hide = true)]
        csv_row: bool,
        /// Repeat mode: run the benchmark N times, each in a process of its own, and print each
        /// figure's least / median / greatest value; rows into -o if given (docs/perf.md).
        #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = parse_count::<u32>)]
        repeat: Option<u32>,
        /// With --repeat: another c10dsim binary to run alternately with this one (this one
        /// first in even rounds, the other in odd ones), then compare the two's medians.
        #[arg(long, value_name = "BINARY", requires = "repeat")]
        against: Option<PathBuf>,
    },
    /// Run a scenario's sweep points in parallel into a CSV (docs/sweep-format.md).
    Sweep {
        /// The scenario file (TOML) with a [sweep] table, or axes given with --set.
        file: PathBuf,
        /// The CSV to write (rows appear as points finish, in point order; `-`: standard
        /// output, without --resume).
        #[arg(short, long, value_name = "OUT.csv")]
        output: PathBuf,
        /// Worker threads (default: one per CPU).
        #[arg(long, allow_negative_numbers = true, value_parser = parse_count::<usize>)]
        threads: Option<usize>,
        /// Add or replace an axis: `--set tensors.buf=1MiB,64MiB`; one value on a key that is
        /// not an axis sets it on every point (repeatable).
        #[arg(long = "set", value_name = "KEY=V1,V2,...", value_parser = parse_axis)]
        axes: Vec<sim::sweep::AxisArg>,
        /// Run slice I of N (points with index mod N = I); default from
        /// SLURM_ARRAY_TASK_ID/SLURM_ARRAY_TASK_COUNT or JOB_COMPLETION_INDEX/C10DSIM_SHARD_COUNT.
        #[arg(long, value_name = "I/N", value_parser = sim::sweep::Shard::parse)]
        shard: Option<sim::sweep::Shard>,
        /// Keep the rows already in OUT.csv and run only the missing points.
        #[arg(long)]
        resume: bool,
        #[command(flatten)]
        limits: limits::LimitArgs,
    },
    /// Draw columns of a sweep CSV as lines (SVG or PNG by the output's extension).
    Plot {
        /// A CSV written by `c10dsim sweep`.
        csv: PathBuf,
        /// The x column (sizes such as 64MiB give a log axis).
        #[arg(long)]
        x: String,
        /// The y column; given more than once, one panel per column, stacked (`--y wall_s
        /// --y peak_memory_mib`).
        #[arg(long, required = true)]
        y: Vec<String>,
        /// One line per value of this column.
        #[arg(long)]
        by: Option<String>,
        /// Only rows where COLUMN equals VALUE (repeatable).
        #[arg(long = "where", value_name = "COLUMN=VALUE")]
        filters: Vec<String>,
        /// A logarithmic y axis (every y must be positive).
        #[arg(long)]
        log_y: bool,
        /// A logarithmic x axis (every x must be positive; a size column has one anyway).
        #[arg(long)]
        log_x: bool,
        /// The picture's width in pixels (16 to 16384).
        #[arg(
            long,
            default_value_t = 960,
            value_name = "PX",
            allow_negative_numbers = true, value_parser = parse_count::<u32>
        )]
        width: u32,
        /// The picture's height in pixels (16 to 16384).
        #[arg(
            long,
            default_value_t = 600,
            value_name = "PX",
            allow_negative_numbers = true, value_parser = parse_count::<u32>
        )]
        height: u32,
        /// The picture: .svg or .png (`-`: SVG on stdout).
        #[arg(short, long, value_name = "OUT.svg")]
        output: PathBuf,
    },
    /// Compare two Timelines (simulated or measured) op by op: Δs, R3 metrics, ordering
    /// verdicts, findings (docs/diff.md). Exit 1 when a difference exceeds the tolerances.
    Diff {
        /// The reference Timeline (A).
        a: PathBuf,
        /// The Timeline compared with it (B).
        b: PathBuf,
        /// Print one JSON object instead of tables.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        tolerance: diff_cmd::ToleranceArgs,
        /// The cap of the memory both Timelines take: each file's reading and, folded, its
        /// expansion to every rank, which the comparison needs (6 bytes a byte of JSON).
        #[command(flatten)]
        cap: limits::TimelineCap,
    },
    /// Fit a machine profile to measured Timelines and print each value with its residual
    /// (docs/diff.md).
    Calibrate {
        /// Measured Timelines: RUN.json (scenario: `scenarios/<stem>.toml` beside it, else the
        /// path it records) or RUN.json=SCENARIO.toml.
        #[arg(required = true)]
        runs: Vec<String>,
        /// The profile to write (TOML; `-`: standard output, the fitted values then go to
        /// stderr; not with --validate, which reads the profile back).
        #[arg(short, long, value_name = "PROFILE.toml")]
        output: PathBuf,
        /// Start from this profile's values (kept where the runs fit nothing).
        #[arg(long, value_name = "PROFILE.toml")]
        prior: Option<PathBuf>,
        /// The profile's name.
        #[arg(long, default_value = "calibrated")]
        name: String,
        /// Held-out measured runs (as RUNS): simulated with the fitted profile and compared,
        /// timing metric by metric, with the median error and the ordering verdicts.
        #[arg(long = "validate", value_name = "RUN.json")]
        held_out: Vec<String>,
        /// The caps of each run read (--max-timeline) and of --validate's simulations, held
        /// to them as `run` holds a scenario.
        #[command(flatten)]
        caps: limits::SimulationCaps,
    },
    /// Turn what a real job recorded into a scenario: torch.profiler traces (docs/import.md) or
    /// Flight Recorder dumps (docs/flight-recorder.md).
    #[command(disable_help_subcommand = true)]
    Import {
        #[command(subcommand)]
        format: import_cmd::ImportCommand,
    },
    /// Join the CSVs of a sweep's shards into one, in point order.
    Merge {
        /// Shard CSVs written by `c10dsim sweep --shard`.
        #[arg(required = true)]
        inputs: Vec<PathBuf>,
        /// The merged CSV (`-`: standard output).
        #[arg(short, long, value_name = "OUT.csv")]
        output: PathBuf,
    },
    /// Print this message or a command's help (`c10dsim help import kineto`).
    Help {
        /// The command whose help to print (`run`, `import kineto`); without it, c10dsim's.
        #[arg(value_name = "COMMAND")]
        command: Vec<String>,
    },
}

/// Writes to standard output; see [`out!`].
fn write_stdout(text: std::fmt::Arguments) -> Result<(), Failure> {
    std::io::Write::write_fmt(&mut std::io::stdout().lock(), text).map_err(output_failure)
}

/// A write to standard output that failed: a reader that went away (`| head -1`) ends the
/// program quietly, as `cat` does; anything else (a full disk) is the environment's failure,
/// exit 2, as for an output file that cannot be written.
fn output_failure(error: std::io::Error) -> Failure {
    if error.kind() == std::io::ErrorKind::BrokenPipe {
        Failure {
            code: 0,
            message: String::new(),
        }
    } else {
        Failure {
            code: 2,
            message: format!("writing output: {error}"),
        }
    }
}

/// A failure with the exit code it maps to.
struct Failure {
    code: u8,
    message: String,
}

impl Failure {
    fn input(message: impl Into<String>) -> Failure {
        Failure {
            code: 2,
            message: message.into(),
        }
    }
}

fn main() -> ExitCode {
    // Interrupted (Ctrl-C, SIGTERM), a command leaves no hidden half-written output behind;
    // 130 as a shell reports an interrupted command. Without a handler (one could not be set),
    // the signal ends the process as before.
    let _ = ctrlc::set_handler(|| stdio::remove_partials_and_exit(130));
    let cli = Cli::parse();
    if let Some(key) = repeated_set(&cli.command) {
        note!("c10dsim: --set {key} is given twice: the last would win silently; give it once");
        return ExitCode::from(2);
    }
    if let Err(failure) = check_output_places(&cli.command) {
        note!("c10dsim: {}", failure.message);
        return ExitCode::from(failure.code);
    }
    let result = match cli.command {
        Command::Run {
            file,
            json,
            trace,
            trace_dir,
            timeline,
            fr_dir,
            svg,
            nccl_tests,
            fail_on_race,
            summary,
            records_for,
            against,
            tolerance,
            limits,
            scenario,
        } => run(
            &file,
            &scenario,
            json,
            &RunOutputs {
                trace: trace.as_deref(),
                trace_dir: trace_dir.as_deref(),
                timeline: timeline.as_deref(),
                fr_dir: fr_dir.as_deref(),
                svg: svg.as_deref(),
                summary: summary.then(|| {
                    records_for.unwrap_or_else(|| {
                        sim::timeline::RecordSelection::parse("none").expect("none parses")
                    })
                }),
                per_rank: limits.engine_options().per_rank_detail,
                timeline_cap_bytes: Some(limits.caps.work.timeline.max_timeline),
            },
            nccl_tests,
            fail_on_race,
            &Against {
                limits,
                measured: against.as_deref(),
                tolerance,
            },
        ),
        Command::Completions { shell } => {
            // Generated whole first: clap_complete panics on a write error (a full disk, a
            // closed pipe), which is reported here instead.
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "c10dsim", &mut script);
            std::io::Write::write_all(&mut std::io::stdout(), &script)
                .map(|()| 0)
                .map_err(output_failure)
        }
        Command::Man { command } => man_page(&command),
        Command::Help { command } => help(&command),
        Command::Check {
            files,
            limits,
            scenario,
        } => check(&files, &scenario, &limits),
        Command::Hw {
            file,
            downscale,
            timeout_ms,
            device,
            json,
            trace,
            trace_dir,
            timeline,
            scenario,
        } => hw_cmd::hw(hw_cmd::HwArgs {
            file: &file,
            scenario: &scenario,
            downscale: &downscale,
            timeout_ms,
            device,
            json,
            trace: trace.as_deref(),
            trace_dir: trace_dir.as_deref(),
            timeline: timeline.as_deref(),
        }),
        Command::Resolve {
            file,
            json: _,
            scenario,
        } => torch_cmd::resolve(&file, &scenario),
        Command::Torch {
            file,
            nproc,
            json,
            timeline,
            cap,
            scenario,
        } => torch_cmd::torch(torch_cmd::TorchArgs {
            file: &file,
            scenario: &scenario,
            nproc,
            json,
            timeline: timeline.as_deref(),
            max_timeline: cap.max_timeline,
        }),
        Command::Fidelity {
            torch,
            memory_runs,
            hw,
            machine,
            output,
            caps,
        } => fidelity_cmd::fidelity(
            &torch,
            memory_runs.as_deref(),
            hw.as_deref(),
            &machine,
            output.as_deref(),
            &caps,
        ),
        Command::HwMerge {
            parts,
            output,
            partial,
            cap,
        } => hw_cmd::merge(&parts, &output, partial, cap.max_timeline),
        Command::Import { format } => import_cmd::import(format),
        Command::Bench {
            ranks,
            iterations,
            print_scenario,
            summary,
            no_fold,
            work,
            scaling,
            output,
            plot,
            csv_row,
            repeat,
            against,
        } => bench::bench(&bench::BenchArgs {
            ranks,
            iterations,
            print_scenario,
            summary,
            caps: limits::CapArgs {
                work,
                no_fold,
                detail: None,
            },
            scaling,
            output,
            plot,
            csv_row,
            repeat,
            against,
        }),
        Command::Sweep {
            file,
            output,
            threads,
            axes,
            shard,
            resume,
            limits,
        } => sweep::sweep(&sweep::SweepArgs {
            file,
            output,
            threads,
            axes,
            shard,
            resume,
            limits,
        }),
        Command::Merge { inputs, output } => sweep::merge(&inputs, &output),
        Command::Diff {
            a,
            b,
            json,
            tolerance,
            cap,
        } => diff_cmd::diff_files(&a, &b, tolerance, json, cap.max_timeline),
        Command::Calibrate {
            runs,
            output,
            prior,
            name,
            held_out,
            caps,
        } => diff_cmd::calibrate_runs(&diff_cmd::CalibrateArgs {
            runs,
            output,
            prior,
            name,
            held_out,
            caps,
        }),
        Command::Plot {
            csv,
            x,
            y,
            by,
            filters,
            log_y,
            log_x,
            width,
            height,
            output,
        } => plot::plot(&plot::PlotArgs {
            csv,
            x,
            y,
            by,
            filters,
            canvas: analysis::plot::Canvas {
                width_px: width,
                height_px: height,
                log_y,
                log_x,
            },
            output,
        }),
    };
    // What is still buffered goes out now, so that its failure is reported too.
    let result = result.and_then(|code| {
        std::io::Write::flush(&mut std::io::stdout())
            .map(|()| code)
            .map_err(output_failure)
    });
    match result {
        Ok(code) => ExitCode::from(code),
        Err(failure) => {
            if !failure.message.is_empty() {
                note!("c10dsim: {}", failure.message);
            }
            ExitCode::from(failure.code)
        }
    }
}

/// `c10dsim man [COMMAND]…`: the page of c10dsim or of one of its commands, each page listing
/// its commands' pages (`c10dsim-run(1)`), as clap_mangen names them.
fn man_page(path: &[String]) -> Result<u8, Failure> {
    // `help` has no page: the pages list only the commands that have one.
    let pages = Cli::command().mut_subcommand("help", |help| help.hide(true));
    let page = find_command(pages, "man", path)?;
    clap_mangen::Man::new(page)
        .source(format!("c10dsim {}", env!("CARGO_PKG_VERSION")))
        .render(&mut std::io::stdout())
        .map(|()| 0)
        .map_err(output_failure)
}

/// `c10dsim help [COMMAND]…`: what `c10dsim COMMAND… --help` prints.
fn help(path: &[String]) -> Result<u8, Failure> {
    find_command(Cli::command(), "help", path)?;
    let asked = std::iter::once("c10dsim")
        .chain(path.iter().map(String::as_str))
        .chain(["--help"]);
    let shown = Cli::command()
        .try_get_matches_from(asked)
        .err()
        .filter(|shown| shown.kind() == clap::error::ErrorKind::DisplayHelp)
        .ok_or_else(|| Failure::input(format!("help {}: no help to print", path.join(" "))))?;
    shown.print().map_err(output_failure)?;
    Ok(0)
}

/// The command of `root` that `path` names (`["import", "kineto"]`; `root` itself when empty),
/// for `verb` (`help`, `man`), which an unknown name's message names.
fn find_command(
    mut root: clap::Command,
    verb: &str,
    path: &[String],
) -> Result<clap::Command, Failure> {
    root.build();
    let mut page = root;
    for (depth, name) in path.iter().enumerate() {
        let known: Vec<&str> = page
            .get_subcommands()
            .filter(|c| !c.is_hide_set())
            .map(|c| c.get_name())
            .collect();
        let Some(found) = page.find_subcommand(name).cloned() else {
            let parent = ["c10dsim"]
                .into_iter()
                .chain(path[..depth].iter().map(String::as_str))
                .collect::<Vec<_>>()
                .join(" ");
            let asked = path.join(" ");
            return Err(Failure::input(if known.is_empty() {
                format!("{verb} {asked}: {parent} has no commands")
            } else {
                format!(
                    "{verb} {asked}: {parent} has no command {name:?}; its commands are {}",
                    known.join(", ")
                )
            }));
        };
        page = found;
    }
    Ok(page)
}

/// Refused before any work (exit 2), as `run` refuses its own ([`stdio::check_output_place`]):
/// an output file, of the commands that write theirs at the end, whose folder does not exist or
/// that is a folder. `bench --scaling` used to run every point and `calibrate` to fit, then fail
/// on the write.
fn check_output_places(command: &Command) -> Result<(), Failure> {
    let places: Vec<(&str, &Path)> = match command {
        Command::Fidelity { output, .. } => output.iter().map(|o| ("-o", o.as_path())).collect(),
        Command::HwMerge { output, .. }
        | Command::Merge { output, .. }
        | Command::Sweep { output, .. }
        | Command::Calibrate { output, .. }
        | Command::Plot { output, .. } => vec![("-o", output.as_path())],
        Command::Bench { output, plot, .. } => (output.iter().map(|o| ("-o", o.as_path())))
            .chain(plot.iter().map(|p| ("--plot", p.as_path())))
            .collect(),
        Command::Import { format } => vec![("-o", format.output())],
        _ => Vec::new(),
    };
    places
        .into_iter()
        .try_for_each(|(flag, path)| stdio::check_output_place(flag, path))
}

/// A key the command's `--set`s name twice (a sweep's axis takes its values in one `--set`).
fn repeated_set(command: &Command) -> Option<String> {
    let paths: Vec<&str> = match command {
        Command::Run { scenario, .. }
        | Command::Check { scenario, .. }
        | Command::Hw { scenario, .. }
        | Command::Resolve { scenario, .. }
        | Command::Torch { scenario, .. } => (scenario.overrides.iter())
            .map(|o| o.path.as_str())
            .collect(),
        Command::Sweep { axes, .. } => axes.iter().map(|a| a.path.as_str()).collect(),
        _ => return None,
    };
    let mut seen = std::collections::BTreeSet::new();
    paths
        .into_iter()
        .find(|&path| !seen.insert(path))
        .map(str::to_string)
}

/// `--seed`'s value: a count ([`parse_count`]) a scenario holds, at most its largest integer
/// (2^63 - 1), so that the refusal names `--seed`, not the `--set seed=` it stands for.
fn parse_seed(text: &str) -> Result<u64, String> {
    let seed = parse_count::<u64>(text)?;
    let largest = i64::MAX.unsigned_abs();
    if seed > largest {
        return Err(format!(
            "{seed} is past the largest integer a scenario holds ({largest})"
        ));
    }
    Ok(seed)
}

/// A count or an identifier of a flag (`--seed`, `--ranks`, `--threads`): its flag takes a
/// negative number as its value (`allow_negative_numbers`) so that this, not "unexpected argument
/// '-1'", says what is wrong with it. The range each flag accepts (`--ranks` from 1, `--seed`
/// from 0) is checked by its command, which names it; this message claims none.
pub(crate) fn parse_count<T>(text: &str) -> Result<T, String>
where
    T: std::str::FromStr<Err = std::num::ParseIntError>,
{
    const EXPECTED: &str = "expected a whole number";
    if text.trim_start().starts_with('-') {
        return Err(format!("a negative value is not allowed: {EXPECTED}"));
    }
    text.parse()
        .map_err(|error: std::num::ParseIntError| format!("{error}: {EXPECTED}"))
}

fn parse_axis(text: &str) -> Result<sim::sweep::AxisArg, String> {
    sim::sweep::AxisArg::parse(text).map_err(|e| e.to_string())
}

fn parse_selection(text: &str) -> Result<sim::timeline::RecordSelection, String> {
    sim::timeline::RecordSelection::parse(text)
}

fn parse_override(text: &str) -> Result<scenario::Override, String> {
    scenario::Override::parse(text).map_err(|e| e.to_string())
}

/// What `run`, `check`, `hw`, `resolve` and `torch` apply to the scenario they load: the
/// `--set`s, `--seed N` (`--set seed=N`) and `--machine`, the last two recorded as typed
/// ([`load_plan`]). Not `sweep`'s, whose `--set` makes axes and whose points draw their own
/// seeds (docs/sweep-format.md#seeds).
#[derive(clap::Args, Clone, Default)]
pub(crate) struct ScenarioArgs {
    /// Override the scenario's seed, as `--set seed=N` does (not with it).
    #[arg(long, allow_negative_numbers = true, value_parser = parse_seed)]
    pub(crate) seed: Option<u64>,
    /// Run on this machine profile: its values replace the scenario's (docs/diff.md); not with
    /// `--set machine=…`.
    #[arg(long, value_name = "PROFILE.toml")]
    pub(crate) machine: Option<PathBuf>,
    /// Override a scenario value: `--set env.TORCH_NCCL_BLOCKING_WAIT=1`, `--set
    /// tensors.x=64MiB`, `--set torch=2.12`, `--set cluster.ranks=100000` (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE", value_parser = parse_override)]
    pub(crate) overrides: Vec<scenario::Override>,
}

impl ScenarioArgs {
    /// The scenario at `path` with these applied ([`load_on`]).
    pub(crate) fn load(&self, path: &Path) -> Result<Scenario, Failure> {
        load_on(path, &self.overrides, self.seed, self.machine.as_deref())
    }
}

/// Reads and validates a scenario, applying `--set` overrides first. An error points at the
/// file's line, or at the `--set` argument that wrote the line (`diagnostic::locate`).
fn load(path: &Path, overrides: &[scenario::Override]) -> Result<Scenario, Failure> {
    load_on(path, overrides, None, None)
}

/// [`load`] with `--seed`, then the scenario's `machine` profile and `--machine`
/// (docs/diff.md).
pub(crate) fn load_on(
    path: &Path,
    overrides: &[scenario::Override],
    seed: Option<u64>,
    machine: Option<&Path>,
) -> Result<Scenario, Failure> {
    load_plan(path, overrides, seed, machine).map(|(scenario, _)| scenario)
}

/// [`load_on`], and the file's sweep as `sweep` reads it.
fn load_plan(
    path: &Path,
    typed: &[scenario::Override],
    seed: Option<u64>,
    machine: Option<&Path>,
) -> Result<(Scenario, sweep::Plan), Failure> {
    // `--seed N` is `--set seed=N`, recorded as typed with `--machine`: the Timeline's recorded
    // invocation then carries them, so that `diff`, `calibrate` and `fidelity` simulate it again
    // with its seed, and a reader of the header knows the profile it ran on.
    let shown_machine = machine.map(|machine| machine.display().to_string());
    let invocation = scenario::Invocation::new(seed, shown_machine, typed)
        .map_err(|e| Failure::input(e.to_string()))?;
    let overrides = &invocation.applied();
    let original = stdio::read_scenario_text(path)?;
    let shown = path.display().to_string();
    // `--set machine=…` names the profile, so it applies before the profile is read; then the
    // profile, so that the other `--set`s win over it.
    let (machine_set, rest): (Vec<_>, Vec<_>) =
        (overrides.iter().cloned()).partition(|o| o.path == sim::scenario::MACHINE_KEY);
    // A [sweep] table is checked too, on the machine's values as `sweep` checks it (its points
    // are scenarios without `machine`): bad input never half-runs.
    let plan = sweep::Plan::read(path, original.clone(), machine_set, machine, &[])?;
    let with_machine = &plan.file.with_machine;
    let text = sim::sweep::apply_overrides_with_ops(&with_machine.text, &rest)
        .map_err(|error| Failure::input(format!("{shown}: {error}")))?;
    // The scenario records how it was invoked (`FILE [--set K=V …]`, the Timeline's
    // `scenario.path`), so that a measured run can be simulated again as it ran.
    let recorded = scenario::recorded_invocation(&shown, &invocation);
    let parsed = scenario::parse(&recorded, &text).map(|mut parsed| {
        // The report names the file's own lines, whatever the edits inserted above them.
        scenario::renumber_op_lines(&mut parsed, &original, &text);
        parsed
    });
    let scenario = parsed.map_err(|error| {
        let located = diagnostic::locate_with_profiles(
            error,
            &shown,
            &original,
            &text,
            overrides,
            &with_machine.profiles,
        );
        let rendered = diagnostic::render(&located);
        Failure::input(match &with_machine.note {
            Some(note) => format!("{rendered}\n(with {note} applied)"),
            None => rendered,
        })
    })?;
    Ok((scenario, plan))
}

/// Writes JSON to `path`, or to standard output for `-`, streaming (Timelines can be large).
fn write_json(path: &Path, value: &impl serde::Serialize) -> Result<(), Failure> {
    stdio::replace(path, |out| {
        serde_json::to_writer(&mut *out, value)?;
        if stdio::is_dash(path) {
            out.write_all(b"\n")?;
        }
        Ok(())
    })
}

fn check(files: &[PathBuf], with: &ScenarioArgs, limits: &limits::CapArgs) -> Result<u8, Failure> {
    let mut bad = 0;
    for file in files {
        match load_plan(file, &with.overrides, with.seed, with.machine.as_deref()).and_then(
            |(scenario, plan)| {
                limits.check(file, &scenario, false)?;
                // What `sweep` refuses before it runs a point: an axis that would make two CSV
                // columns of one name. The metric columns are those the base point reports, so it
                // is simulated, as `sweep` simulates it (under the default memory cap), only where
                // an axis could be named like one.
                let metrics = if plan.may_name_a_metric() {
                    let options = limits::LimitArgs {
                        caps: *limits,
                        memory: limits::MemoryCap::default(),
                    }
                    .engine_options();
                    let base = sim::engine::simulate_with(&scenario, options).0;
                    analysis::sweep::metric_columns(&analysis::metrics::report(&base))
                } else {
                    Vec::new()
                };
                plan.columns(metrics)?;
                Ok(scenario)
            },
        ) {
            Ok(scenario) => {
                let estimate = limits.estimate(&scenario);
                outln!(
                    "ok: {} ({} op{}, {} rank{}, repeat {}; about {} op call{}, {} event{}, a {} Timeline)",
                    file.display(),
                    scenario.ops.len(),
                    if scenario.ops.len() == 1 { "" } else { "s" },
                    scenario.cluster.ranks,
                    if scenario.cluster.ranks == 1 { "" } else { "s" },
                    scenario.repeat,
                    estimate.op_calls,
                    if estimate.op_calls == 1 { "" } else { "s" },
                    estimate.events,
                    if estimate.events == 1 { "" } else { "s" },
                    sim::units::format_size_readable(estimate.timeline_bytes)
                )?
            }
            Err(failure) => {
                bad += 1;
                note!("c10dsim: {}", failure.message);
            }
        }
    }
    if bad > 0 {
        return Err(Failure::input(format!(
            "{bad} of {} scenario files {} invalid",
            files.len(),
            if bad == 1 { "is" } else { "are" }
        )));
    }
    Ok(0)
}
