//! `c10dsim hw` and `c10dsim hw-merge`: run a scenario on this machine's GPUs through the `hw`
//! crate, and join the per-process Timelines of a torchrun/srun launch.

use crate::{emit, Failure, RunOutputs, ScenarioArgs};
use analysis::metrics;
use analysis::text::counted;
use std::path::{Path, PathBuf};

/// Options of `c10dsim hw` beyond the run outputs.
pub struct HwArgs<'a> {
    pub file: &'a Path,
    pub scenario: &'a ScenarioArgs,
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

/// An output path of this process: `{rank}` becomes its rank, so that every process of a
/// launch writes its own file. Refused before the run (exit 2) when the `processes` of a launch
/// would all write one file, or when the file's folder does not exist; `-` (standard output,
/// each process's own) passes as it is.
fn output_path(
    flag: &str,
    path: Option<&Path>,
    rank: u32,
    processes: u32,
) -> Result<Option<PathBuf>, Failure> {
    let Some(path) = path else {
        return Ok(None);
    };
    if crate::stdio::is_dash(path) {
        return Ok(Some(path.to_path_buf()));
    }
    let text = path.to_string_lossy();
    if processes > 1 && !text.contains("{rank}") {
        return Err(Failure::input(format!(
            "{flag} {text}: the launcher started {processes} processes, and each would write \
             this one file; put {{rank}} in the path (e.g. out-{{rank}}.json)"
        )));
    }
    let path = PathBuf::from(text.replace("{rank}", &rank.to_string()));
    crate::stdio::check_output_place(flag, &path)?;
    Ok(Some(path))
}

/// `--trace-dir` is the launch's folder, into which every process writes its rank's file: it
/// must exist before the run (exit 2), as the folder of `--timeline` and `--trace` must, so that
/// a mistyped path is found before the GPUs run rather than made after.
fn check_trace_dir_exists(dir: &Path) -> Result<(), Failure> {
    if dir.is_dir() {
        return Ok(());
    }
    Err(Failure::input(format!(
        "--trace-dir {}: the folder does not exist; make it first (each process of a launch \
         writes its rank's trace into it)",
        dir.display()
    )))
}

pub fn hw(args: HwArgs) -> Result<u8, Failure> {
    let scenario = args.scenario.load(args.file)?;
    let mut options = hw::HwOptions::from_env().map_err(hw_failure)?;
    for note in &options.notes {
        note!("c10dsim: note: {note}");
    }
    options.downscale = hw::Downscale::parse(args.downscale).map_err(hw_failure)?;
    if let Some(timeout_ms) = args.timeout_ms {
        options.set_timeout_ms(timeout_ms).map_err(hw_failure)?;
    }
    if let Some(device) = args.device {
        options.device = Some(hw::DeviceChoice::Flag(device));
    }
    let (rank, processes) = options
        .launch
        .map_or((0, 1), |launch| (launch.rank, launch.world_size));
    let trace = output_path("--trace", args.trace, rank, processes)?;
    let timeline_path = output_path("--timeline", args.timeline, rank, processes)?;
    let outputs = RunOutputs {
        trace: trace.as_deref(),
        trace_dir: args.trace_dir,
        timeline: timeline_path.as_deref(),
        fr_dir: None,
        svg: None,
        summary: None,
        per_rank: false,
        timeline_cap_bytes: None,
    };
    // What is wrong whatever the machine is refused before any GPU is touched.
    outputs.check_places(false)?;
    if let Some(dir) = args.trace_dir {
        check_trace_dir_exists(dir)?;
    }
    hw::check_without_gpu(&scenario, &options).map_err(hw_failure)?;
    let report = hw::probe().map_err(hw_failure)?;
    let layout = hw::Layout::resolve(scenario.cluster.ranks, &options, report.devices.len())
        .map_err(hw_failure)?;
    if let Some(device) = report.devices.get(layout.device) {
        note!(
            "c10dsim: rank {rank} on GPU {} ({}; {} visible; CUDA {}, NCCL {})",
            layout.device,
            device.name,
            counted(report.devices.len() as u64, "GPU"),
            report.driver_cuda,
            report.nccl
        );
    }
    let timeline = hw::run_scenario(&scenario, &options).map_err(hw_failure)?;
    let report = metrics::report(&timeline);
    emit(&scenario, &timeline, &report, args.json, false, &outputs)?;
    // A run that a verdict or a dead process ended wrote its Timeline up to there (with the
    // finding); it ends now, whatever the GPU still holds.
    if hw::ended_early(&timeline) {
        hw::exit_without_cleanup(1);
    }
    Ok(u8::from(!report.findings.is_empty()))
}

/// Joins one-rank Timelines into one on a common axis (`hw::merge_ranks`), each part held to
/// `max_timeline_bytes` (`--max-timeline`) before it is read. Ranks of the launch with no part
/// are refused (exit 2), or with `partial` merged without them and named.
pub fn merge(
    parts: &[PathBuf],
    output: &Path,
    partial: bool,
    max_timeline_bytes: u64,
) -> Result<u8, Failure> {
    let timelines = parts
        .iter()
        .map(|path| {
            let timeline = crate::diff_cmd::read_timeline_capped(path, max_timeline_bytes)?;
            Ok((path.display().to_string(), timeline))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let merged = hw::merge_ranks(timelines).map_err(hw_failure)?;
    let missing = hw::missing_ranks(&merged);
    if !missing.is_empty() {
        let world = &merged.machine["world"];
        if !partial {
            return Err(Failure::input(format!(
                "cannot merge rank Timelines: the parts are processes of a launch of {world} \
                 (machine.world), but {} {} no part: give every rank's file, or --partial to \
                 merge those given",
                missing.named(),
                missing.one_or_many("has", "have")
            )));
        }
        note!(
            "c10dsim: warning: {} of the launch of {world} {} no part (--partial): the merged \
             Timeline lacks {}",
            missing.named(),
            missing.one_or_many("has", "have"),
            missing.one_or_many("it", "them")
        );
    }
    crate::write_json(output, &merged)?;
    note!(
        "c10dsim: merged {} into {}",
        analysis::text::counted(merged.ranks.len() as u64, "rank"),
        if crate::stdio::is_dash(output) {
            "standard output".to_string()
        } else {
            output.display().to_string()
        }
    );
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The path `output_path` gives, or its message.
    fn written(path: &Path, rank: u32, processes: u32) -> Result<Option<PathBuf>, String> {
        output_path("--timeline", Some(path), rank, processes).map_err(|failure| failure.message)
    }

    fn folder(test: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("c10dsim-hw-cmd-{test}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn rank_in_an_output_path_becomes_this_process_rank() {
        let dir = folder("rank");
        let asked = dir.join("out-{rank}.json");
        assert_eq!(written(&asked, 3, 4).unwrap(), Some(dir.join("out-3.json")));
        let twice = dir.join("r{rank}-{rank}.json");
        assert_eq!(
            written(&twice, 12, 16).unwrap(),
            Some(dir.join("r12-12.json"))
        );
        // A single process is rank 0 and may write a plain name.
        assert_eq!(written(&asked, 0, 1).unwrap(), Some(dir.join("out-0.json")));
        let plain = dir.join("out.json");
        assert_eq!(written(&plain, 0, 1).unwrap(), Some(plain.clone()));
        assert!(matches!(output_path("--timeline", None, 0, 4), Ok(None)));
        assert_eq!(
            written(Path::new("-"), 1, 4).unwrap(),
            Some(PathBuf::from("-"))
        );
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn one_file_for_every_process_or_a_missing_folder_is_refused() {
        let dir = folder("refused");
        let shared = output_path("--timeline", Some(&dir.join("out.json")), 1, 4).unwrap_err();
        assert_eq!(shared.code, 2);
        assert!(
            shared.message.contains("the launcher started 4 processes")
                && shared.message.contains("put {rank} in the path"),
            "{}",
            shared.message
        );
        let missing = dir.join("absent").join("out-{rank}.json");
        let error = output_path("--trace", Some(&missing), 2, 4).unwrap_err();
        assert_eq!(error.code, 2);
        assert!(
            error.message.starts_with("--trace ")
                && error.message.contains("absent does not exist")
                && error.message.contains("out-2.json"),
            "{}",
            error.message
        );
        std::fs::remove_dir_all(dir).unwrap();
    }
}
