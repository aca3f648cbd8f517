//! `c10dsim hw` and `c10dsim hw-merge`: run a scenario on this machine's GPUs through the `hw`
//! crate, and join the per-process Timelines of a torchrun/srun launch.

use crate::{emit, load, Failure, RunOutputs};
use analysis::metrics;
use sim::scenario::Override;
use sim::timeline::Timeline;
use std::path::{Path, PathBuf};

/// Options of `c10dsim hw` beyond the run outputs.
pub struct HwArgs<'a> {
    pub file: &'a Path,
    pub overrides: &'a [Override],
    pub downscale: &'a str,
    pub timeout_ms: Option<u64>,
    pub device: Option<usize>,
    pub json: bool,
    pub trace: Option<&'a Path>,
    pub trace_dir: Option<&'a Path>,
    pub timeline: Option<&'a Path>,
}

fn hw_failure(error: hw::HwError) -> Failure {
    Failure {
        code: error.exit_code() as u8,
        message: error.to_string(),
    }
}

/// `{rank}` in an output path becomes this process's rank, so that every process of a launch
/// writes its own file.
fn per_rank(path: Option<&Path>, rank: u32) -> Option<PathBuf> {
    path.map(|p| PathBuf::from(p.to_string_lossy().replace("{rank}", &rank.to_string())))
}

pub fn hw(args: HwArgs) -> Result<u8, Failure> {
    let scenario = load(args.file, args.overrides)?;
    let mut options = hw::HwOptions::from_env().map_err(hw_failure)?;
    options.downscale = hw::Downscale::parse(args.downscale).map_err(hw_failure)?;
    if let Some(ms) = args.timeout_ms {
        options.timeout_ns = Some(ms.saturating_mul(1_000_000));
    }
    if args.device.is_some() {
        options.device = args.device;
    }
    // A fault the hardware cannot produce is refused before any GPU is touched.
    if let Some(refusal) = hw::refusal(&scenario, &options) {
        return Err(hw_failure(refusal));
    }
    let report = hw::probe().map_err(hw_failure)?;
    let rank = options.launch.as_ref().map_or(0, |launch| launch.rank);
    if let Some(device) = report.devices.first() {
        eprintln!(
            "c10dsim: rank {rank} on {} ({} GPUs visible; CUDA {}, NCCL {})",
            device.name,
            report.devices.len(),
            report.driver_cuda,
            report.nccl
        );
    }
    let timeline = hw::run_scenario(&scenario, &options).map_err(hw_failure)?;
    let report = metrics::report(&timeline);
    let trace = per_rank(args.trace, rank);
    let timeline_path = per_rank(args.timeline, rank);
    emit(
        &scenario,
        &timeline,
        &report,
        args.json,
        false,
        &RunOutputs {
            trace: trace.as_deref(),
            trace_dir: args.trace_dir,
            timeline: timeline_path.as_deref(),
            fr_dir: None,
            svg: None,
            summary: None,
            per_rank: false,
        },
    )?;
    // A run that a verdict or a dead process ended wrote its Timeline up to there (with the
    // finding); it ends now, whatever the GPU still holds.
    if hw::ended_early(&timeline) {
        hw::exit_without_cleanup(1);
    }
    Ok(u8::from(!report.findings.is_empty()))
}

/// Joins one-rank Timelines into one on a common axis (`hw::merge_ranks`).
pub fn merge(parts: &[PathBuf], output: &Path) -> Result<u8, Failure> {
    let timelines = parts
        .iter()
        .map(|path| {
            let text = crate::stdio::read_text(path)?;
            let timeline = Timeline::from_json(&text).map_err(|e| {
                Failure::input(format!("{} is not a Timeline: {e}", path.display()))
            })?;
            Ok((path.display().to_string(), timeline))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let merged = hw::merge_ranks(timelines).map_err(hw_failure)?;
    crate::write_json(output, &merged)?;
    eprintln!(
        "c10dsim: merged {} ranks into {}",
        merged.ranks.len(),
        if crate::stdio::is_dash(output) {
            "standard output".to_string()
        } else {
            output.display().to_string()
        }
    );
    Ok(0)
}
