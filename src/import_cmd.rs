//! `c10dsim import …`: other tools' files → scenarios (docs/import.md). One subcommand per
//! format; each reads its files, calls `analysis::import`, writes the scenario.

use crate::{stdio, Failure};
use analysis::import::{kineto, replay};
use clap::Subcommand;
use std::path::{Path, PathBuf};

#[derive(Subcommand)]
pub enum ImportCommand {
    /// torch.profiler (Kineto) Chrome traces with CUDA activities, one per rank, → a scenario:
    /// kernels of their measured durations on the trace's streams, collectives with their
    /// sizes, dtypes and groups, event edges, synchronisations, the host's gaps as host time;
    /// one `ProfilerStep#N` per commented block (docs/import.md).
    // The caps hold the replay's simulation: without --replay, nothing would read them.
    #[command(
        mut_arg("max_events", |arg| arg.requires("replay")),
        mut_arg("max_timeline", |arg| arg.requires("replay")),
        mut_arg("max_memory", |arg| arg.requires("replay"))
    )]
    Kineto {
        /// The traces (`prof.export_chrome_trace(...)`), one per rank of the job; gzipped ones
        /// (`….json.gz`) are read as they are.
        #[arg(required = true, value_name = "TRACE.json")]
        traces: Vec<PathBuf>,
        /// The scenario to write (`-`: standard output).
        #[arg(short, long, value_name = "SCENARIO.toml")]
        output: PathBuf,
        /// What-if: re-bucket DDP's all_reduces as its reducer would with `bucket_cap_mb` of
        /// this size (`100MiB`): consecutive asynchronous all_reduces of a step join one
        /// collective while it holds less than SIZE.
        #[arg(long, value_name = "SIZE", value_parser = parse_bucket, allow_hyphen_values = true)]
        bucket: Option<u64>,
        /// Also simulate the scenario and print the replay error: step time and each stream's
        /// busy time, traced against simulated (on standard error when `-o -`).
        #[arg(long)]
        replay: bool,
        /// With --replay: compare against these traces instead of the imported ones (a
        /// what-if checked against a measured run of it): every rank's, of the imported world
        /// size.
        #[arg(long, value_name = "TRACE.json", requires = "replay", num_args = 1..)]
        replay_against: Vec<PathBuf>,
        /// With --replay: the caps its simulation is held to, as `run` holds a scenario.
        #[command(flatten)]
        caps: crate::limits::SimulationCaps,
    },
    /// A job's Flight Recorder dumps (one pickle per rank, as PyTorch writes them on a watchdog
    /// timeout) → a scenario that replays their collectives to the hang, and the verdict of
    /// its desync report: which rank never joined, which op mismatched
    /// (docs/flight-recorder.md).
    FlightRecorder(crate::fr_cmd::FlightRecorderArgs),
}

impl ImportCommand {
    /// The scenario file the import writes (`-o`).
    pub fn output(&self) -> &Path {
        match self {
            ImportCommand::Kineto { output, .. } => output,
            ImportCommand::FlightRecorder(args) => &args.output,
        }
    }
}

fn parse_bucket(text: &str) -> Result<u64, String> {
    match sim::units::parse_size_bytes(text)? {
        0 => Err("a bucket holds at least 1 byte".to_string()),
        bytes => Ok(bytes),
    }
}

pub fn import(command: ImportCommand) -> Result<u8, Failure> {
    match command {
        ImportCommand::FlightRecorder(args) => crate::fr_cmd::import(&args),
        ImportCommand::Kineto {
            traces,
            output,
            bucket,
            replay,
            replay_against,
            caps,
        } => import_kineto(
            &traces,
            &output,
            bucket,
            replay.then_some(&caps),
            &replay_against,
        ),
    }
}

/// The traces of the files (gzipped or not): one rank each, or every rank of a file that holds
/// them all.
fn read_traces(paths: &[PathBuf]) -> Result<Vec<kineto::Trace>, Failure> {
    let mut traces = Vec::new();
    for path in paths {
        let text = stdio::read_text_gunzipped(path)?;
        let name = path.display().to_string();
        let file = kineto::TraceFile {
            name: &name,
            text: &text,
        };
        traces.extend(
            kineto::Trace::parse_file(&file).map_err(|error| Failure::input(error.to_string()))?,
        );
    }
    Ok(traces)
}

/// An error of the traces of `paths` as one job, naming them.
fn job_error(paths: &[PathBuf], message: &str) -> Failure {
    let names: Vec<String> = paths
        .iter()
        .map(|path| path.display().to_string())
        .collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    Failure::input(format!("{}: error: {message}", kineto::files_named(&names)))
}

fn import_kineto(
    paths: &[PathBuf],
    output: &Path,
    bucket_bytes: Option<u64>,
    replay: Option<&crate::limits::SimulationCaps>,
    against: &[PathBuf],
) -> Result<u8, Failure> {
    let traces = read_traces(paths)?;
    let options = kineto::KinetoOptions { bucket_bytes };
    let text =
        kineto::import_traces(&traces, &options).map_err(|message| job_error(paths, &message))?;
    for line in kineto::left_out_notes(&traces) {
        note!("c10dsim: {line}");
    }
    // Read and checked before anything is written.
    let against_traces = if replay.is_some() && !against.is_empty() {
        let against_traces = read_traces(against)?;
        kineto::replayable_against(&traces, &against_traces)
            .map_err(|message| job_error(against, &format!("--replay-against: {message}")))?;
        Some(against_traces)
    } else {
        None
    };
    stdio::write_bytes(output, text.as_bytes())?;
    if !stdio::is_dash(output) {
        note!("c10dsim: wrote {}", output.display());
    }
    let Some(caps) = replay else {
        return Ok(0);
    };
    let scenario =
        sim::scenario::parse(&output.display().to_string(), &text).map_err(|error| Failure {
            code: 1,
            message: format!(
                "the imported scenario does not parse (a bug of the importer): {error}"
            ),
        })?;
    let timeline = caps.simulate(output, &scenario)?;
    let reference = against_traces.unwrap_or(traces);
    let traced: Vec<replay::StepFigures> = reference.iter().flat_map(replay::traced).collect();
    let table = replay::render(&traced, &replay::simulated(&timeline));
    if stdio::is_dash(output) {
        eprint!("{table}");
    } else {
        out!("{table}")?;
    }
    Ok(0)
}
