//! `c10dsim resolve` and `c10dsim torch`: hand the resolved scenario to the Python interpreter
//! (`python/c10dsim/torch`), launch it under torchrun, one process per GPU, and join the
//! per-rank Timelines it writes (docs/torch.md).
//!
//! The launch is here: the probe of the Python side, the scenario downscaled to the GPUs
//! there, the run folder, the launcher's stderr echoed and kept, the rank files read. What
//! the join makes of those files, the launcher's status and its log (the ranks on one axis,
//! the exits a run cut short implies, PyTorch's log lines as records and findings) is
//! `analysis::torch_join`'s.

use crate::{emit, Failure, RunOutputs, ScenarioArgs};
use analysis::metrics;
use analysis::text::counted;
use sim::pg::Resolved;
use sim::scenario::{Override, Scenario};
use sim::timeline::Timeline;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The interpreter's package, relative to a folder on `PYTHONPATH`.
const PACKAGE_ENTRY: &str = "c10dsim/torch/__main__.py";

/// What the probe asks Python: whether torch imports, its versions and the GPUs it sees.
const PROBE_SCRIPT: &str = "import json\n\
try:\n    import torch\nexcept Exception as error:\n    print(json.dumps({'torch': None, 'error': repr(error)}))\n    raise SystemExit(0)\n\
try:\n    import c10dsim.torch.interpreter\n    package = True\nexcept Exception:\n    package = False\n\
print(json.dumps({'torch': torch.__version__, 'cuda': torch.cuda.is_available(), 'gpus': torch.cuda.device_count() if torch.cuda.is_available() else 0, 'package': package}))\n";

/// `c10dsim resolve FILE --json`: the scenario both engines read, as JSON, with the facts the
/// PyTorch engine reads beside it (`sim::pg::Resolved`).
pub fn resolve(file: &Path, with: &ScenarioArgs) -> Result<u8, Failure> {
    let scenario = with.load(file)?;
    outln!("{}", crate::json_text::to_string(&Resolved::new(&scenario)))?;
    Ok(0)
}

/// Options of `c10dsim torch`.
pub struct TorchArgs<'a> {
    pub file: &'a Path,
    pub scenario: &'a ScenarioArgs,
    pub nproc: Option<u32>,
    pub json: bool,
    pub timeline: Option<&'a Path>,
    /// `--max-timeline`: each rank's file is held to it before it is read.
    pub max_timeline: u64,
}

/// What the probe found.
struct Probe {
    torch_version: String,
    gpus: u32,
}

/// The Python interpreter to launch: `C10DSIM_PYTHON`, else `python3`.
fn python() -> String {
    std::env::var("C10DSIM_PYTHON").unwrap_or_else(|_| "python3".to_string())
}

/// The folder holding `c10dsim/torch` in a checkout: `python/` in the working directory or
/// beside the binary's ancestors (`target/release/c10dsim`, `.carry/c10dsim`). `None` when the
/// package is not in a checkout (then it must be installed, e.g. from the wheel).
fn package_folder() -> Option<PathBuf> {
    let mut candidates = vec![PathBuf::from("python")];
    if let Ok(exe) = std::env::current_exe() {
        candidates.extend(
            exe.ancestors()
                .skip(1)
                .take(3)
                .map(|dir| dir.join("python")),
        );
    }
    candidates
        .into_iter()
        .find(|dir| dir.join(PACKAGE_ENTRY).is_file())
        .and_then(|dir| dir.canonicalize().ok())
}

/// `PYTHONPATH` with the package's folder first.
fn python_path(package: Option<&Path>) -> Option<String> {
    let package = package?;
    let mut path = package.display().to_string();
    if let Ok(existing) = std::env::var("PYTHONPATH") {
        if !existing.is_empty() {
            path = format!("{path}:{existing}");
        }
    }
    Some(path)
}

/// Python with the interpreter package on its path, in UTC: PyTorch's C++ logger stamps its
/// lines with the local date and time, and the log reader reads them as UTC
/// (`analysis::torch_log`), so a machine in another time zone would put every line hours off.
fn python_command(python: &str, package: Option<&Path>) -> Command {
    let mut command = Command::new(python);
    if let Some(path) = python_path(package) {
        command.env("PYTHONPATH", path);
    }
    command.env("TZ", "UTC");
    command
}

/// Checks, before launching anything, that Python, PyTorch with CUDA, a GPU and the
/// interpreter package are there; each missing piece is named (exit 2).
fn probe(python: &str, package: Option<&Path>) -> Result<Probe, Failure> {
    let output = python_command(python, package)
        .args(["-c", PROBE_SCRIPT])
        .output()
        .map_err(|error| {
            Failure::input(format!(
                "cannot run {python} ({error}): c10dsim torch needs Python 3 with PyTorch; set C10DSIM_PYTHON to its interpreter"
            ))
        })?;
    let text = String::from_utf8_lossy(&output.stdout);
    let answer: serde_json::Value = text
        .lines()
        .last()
        .and_then(|line| serde_json::from_str(line).ok())
        .ok_or_else(|| {
            let stderr = String::from_utf8_lossy(&output.stderr);
            let said = match stderr.trim() {
                "" => format!(
                    "it printed nothing and exited with {}",
                    output
                        .status
                        .code()
                        .map_or("a signal".to_string(), |code| format!("status {code}"))
                ),
                said => said.to_string(),
            };
            Failure::input(format!(
                "{python} did not answer the probe: {said}; c10dsim torch needs Python 3 with PyTorch (set C10DSIM_PYTHON to its interpreter)"
            ))
        })?;
    let Some(torch_version) = answer["torch"].as_str() else {
        return Err(Failure::input(format!(
            "{python} cannot import torch ({}): install PyTorch with CUDA, or set C10DSIM_PYTHON",
            answer["error"].as_str().unwrap_or("unknown error")
        )));
    };
    if answer["package"] != serde_json::Value::Bool(true) {
        return Err(Failure::input(format!(
            "{python} cannot import c10dsim.torch: run from the checkout (its python/ folder) or install the c10dsim wheel"
        )));
    }
    if answer["cuda"] != serde_json::Value::Bool(true) {
        return Err(Failure::input(format!(
            "PyTorch {torch_version} sees no CUDA GPU (torch.cuda.is_available() is False): c10dsim torch needs an NVIDIA GPU"
        )));
    }
    let gpus = answer["gpus"].as_u64().unwrap_or(0) as u32;
    if gpus == 0 {
        return Err(Failure::input(format!(
            "PyTorch {torch_version} sees no GPU: c10dsim torch needs an NVIDIA GPU"
        )));
    }
    Ok(Probe {
        torch_version: torch_version.to_string(),
        gpus,
    })
}

/// The scenario to launch with `world` processes, and a note for the user when it is not the
/// file's own rank count: first the scenario at `cluster.ranks = world`; where that does not
/// parse (a fault or op names a rank the smaller world lacks), the full scenario with only
/// ranks below `world` launched (faults of the others are not enacted).
fn downscaled(
    args: &TorchArgs,
    scenario: Scenario,
    world: u32,
) -> Result<(Scenario, Option<String>), Failure> {
    let ranks = scenario.cluster.ranks;
    if ranks <= world {
        return Ok((scenario, None));
    }
    // The user's own `cluster.ranks` gives way, so that the run's recorded `--set`s name each
    // key once, as the command line takes them.
    let mut with = args.scenario.clone();
    with.overrides.retain(|set| set.path != "cluster.ranks");
    with.overrides.push(Override {
        path: "cluster.ranks".to_string(),
        value: world.to_string(),
    });
    match with.load(args.file) {
        Ok(smaller) => Ok((
            smaller,
            Some(format!(
                "the scenario has {ranks} ranks and this machine {}: running it at cluster.ranks = {world} (compare with `c10dsim run … --set cluster.ranks={world}`)",
                counted(u64::from(world), "GPU")
            )),
        )),
        Err(failure) => Ok((
            scenario,
            Some(format!(
                "the scenario has {ranks} ranks and this machine {}; at cluster.ranks = {world} it does not parse ({}), so ranks 0..{} run the {ranks}-rank program on {world}-rank groups and the other ranks' ops and faults are left out",
                counted(u64::from(world), "GPU"),
                failure.message,
                world - 1
            )),
        )),
    }
}

/// A fresh folder for the run's files.
fn run_folder() -> Result<PathBuf, Failure> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let dir = std::env::temp_dir().join(format!("c10dsim-torch-{}-{nanos}", std::process::id()));
    std::fs::create_dir_all(&dir)
        .map_err(|e| Failure::input(format!("cannot create {}: {e}", dir.display())))?;
    Ok(dir)
}

/// `c10dsim torch FILE`: the scenario through real `torch.distributed` (docs/torch.md).
pub fn torch(args: TorchArgs) -> Result<u8, Failure> {
    let scenario = args.scenario.load(args.file)?;
    let outputs = RunOutputs {
        trace: None,
        trace_dir: None,
        timeline: args.timeline,
        fr_dir: None,
        svg: None,
        summary: None,
        per_rank: false,
        timeline_cap_bytes: None,
    };
    outputs.check_places(false)?;
    // What is wrong whatever the machine is refused before Python is asked.
    match args.nproc {
        Some(0) => return Err(Failure::input("--nproc must be at least 1")),
        Some(n) if n > scenario.cluster.ranks => {
            return Err(Failure::input(format!(
                "--nproc {n}: the scenario has {}",
                counted(u64::from(scenario.cluster.ranks), "rank")
            )))
        }
        _ => {}
    }
    let python = python();
    let package = package_folder();
    let probe = probe(&python, package.as_deref())?;
    let world = match args.nproc {
        Some(n) if n > probe.gpus => {
            return Err(Failure::input(format!(
                "--nproc {n}: PyTorch sees {} here (one process per GPU)",
                counted(u64::from(probe.gpus), "GPU")
            )))
        }
        Some(n) => n,
        None => probe.gpus.min(scenario.cluster.ranks),
    };
    let (scenario, note) = downscaled(&args, scenario, world)?;
    if let Some(note) = &note {
        note!("c10dsim: {note}");
    }
    let dir = run_folder()?;
    let scenario_path = dir.join("scenario.json");
    crate::write_json(&scenario_path, &Resolved::new(&scenario))?;
    note!(
        "c10dsim: PyTorch {} on {world} of {}, files in {}",
        probe.torch_version,
        counted(u64::from(probe.gpus), "GPU"),
        dir.display()
    );
    let mut launcher = python_command(&python, package.as_deref())
        .args(["-m", "torch.distributed.run", "--standalone"])
        .arg(format!("--nproc-per-node={world}"))
        .args(["-m", "c10dsim.torch"])
        .arg(&scenario_path)
        .arg("--out")
        .arg(&dir)
        .arg("--world")
        .arg(world.to_string())
        .stdout(Stdio::from(std::io::stderr()))
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| {
            Failure::input(format!(
                "cannot launch {python} -m torch.distributed.run: {e}"
            ))
        })?;
    let log = launcher.stderr.take().map(echo_and_keep);
    let status = launcher
        .wait()
        .map_err(|e| Failure::input(format!("the launcher could not be waited for: {e}")))?;
    let log = log
        .and_then(|reader| reader.join().ok())
        .unwrap_or_default();
    let launcher_status = status
        .code()
        .map_or_else(|| "killed by a signal".to_string(), |code| code.to_string());
    let timeline = join_ranks(&dir, world, &launcher_status, &log, args.max_timeline)?;
    let report = metrics::report(&timeline);
    emit(&scenario, &timeline, &report, args.json, false, &outputs)?;
    let findings = !report.findings.is_empty();
    Ok(u8::from(findings || !status.success()))
}

/// Copies the launcher's stderr (PyTorch's and NCCL's logs) to ours as it comes, and keeps it
/// for [`analysis::torch_log`].
fn echo_and_keep(pipe: std::process::ChildStderr) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        use std::io::{BufRead, Write};
        let mut reader = std::io::BufReader::new(pipe);
        let mut kept = String::new();
        let mut line = Vec::new();
        while reader
            .read_until(b'\n', &mut line)
            .is_ok_and(|read| read > 0)
        {
            let text = String::from_utf8_lossy(&line);
            eprint!("{text}");
            std::io::stderr().flush().ok();
            kept.push_str(&text);
            line.clear();
        }
        kept
    })
}

/// Reads `rank<r>.json` for every launched rank and joins them with PyTorch's log
/// (`analysis::torch_join`, on the common axis of `hw::merge_ranks`); a rank whose file is
/// missing wrote nothing.
fn join_ranks(
    dir: &Path,
    world: u32,
    launcher_status: &str,
    log: &str,
    max_timeline_bytes: u64,
) -> Result<Timeline, Failure> {
    let mut files = Vec::new();
    for rank in 0..world {
        let path = dir.join(format!("rank{rank}.json"));
        files.push(if path.is_file() {
            let part = crate::diff_cmd::read_timeline_capped(&path, max_timeline_bytes)?;
            Some((path.display().to_string(), part))
        } else {
            None
        });
    }
    if files.iter().all(Option::is_none) {
        return Err(Failure::input(format!(
            "no rank wrote a Timeline into {} (the launcher exited with status {launcher_status}); its output above says why",
            dir.display()
        )));
    }
    analysis::torch_join::join_ranks(files, launcher_status, log, |parts| {
        hw::merge_ranks(parts).map_err(|e| Failure::input(e.to_string()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_and_the_ranks_it_launches_log_in_utc() {
        let command = python_command("python3", None);
        let tz = command.get_envs().find(|(key, _)| *key == "TZ");
        assert_eq!(tz, Some(("TZ".as_ref(), Some("UTC".as_ref()))));
    }

    #[test]
    fn a_downscaled_run_records_cluster_ranks_once_as_the_command_line_takes_it() {
        let with = ScenarioArgs {
            seed: Some(3),
            overrides: vec![
                Override::parse("cluster.ranks=4").unwrap(),
                Override::parse("repeat=7").unwrap(),
            ],
            ..ScenarioArgs::default()
        };
        let args = TorchArgs {
            file: Path::new("scenarios/overlap_bench.toml"),
            scenario: &with,
            nproc: None,
            json: false,
            timeline: None,
            max_timeline: 4 << 30,
        };
        let Ok(scenario) = with.load(args.file) else {
            panic!("overlap_bench loads")
        };
        let Ok((smaller, note)) = downscaled(&args, scenario, 1) else {
            panic!("downscaling never fails")
        };
        assert_eq!(smaller.cluster.ranks, 1);
        assert!(note.unwrap().contains("running it at cluster.ranks = 1"));
        assert_eq!(
            smaller.path,
            "scenarios/overlap_bench.toml [--seed 3 --set repeat=7 --set cluster.ranks=1]"
        );
    }
}
