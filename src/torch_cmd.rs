//! `c10dsim resolve` and `c10dsim torch`: hand the resolved scenario to the Python interpreter
//! (`python/c10dsim/torch`), launch it under torchrun, one process per GPU, and join the
//! per-rank Timelines it writes (docs/torch.md).
//!
//! Just over 800 lines, two fifths of them tests: the launch, the probe of the Python side
//! and the join of the ranks' Timelines (with the notes on a run cut short) are one command's
//! path through one set of run folders.

use crate::{emit, Failure, RunOutputs, ScenarioArgs};
use analysis::metrics;
use analysis::text::counted;
use sim::pg::Resolved;
use sim::scenario::{Override, Scenario};
use sim::timeline::{RankTimeline, ThreadKind, Timeline, WatchdogEvent, WatchdogRecord};
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
    let timeline = join_ranks(&dir, world, &launcher_status, &log)?;
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

/// Reads `rank<r>.json` for every launched rank and joins them (`hw::merge_ranks`), keeping
/// every rank's watchdog records on the common axis. A rank that wrote nothing (killed before
/// its first journal) gets an empty record and an `exit` watchdog record saying so.
fn join_ranks(
    dir: &Path,
    world: u32,
    launcher_status: &str,
    log: &str,
) -> Result<Timeline, Failure> {
    let mut parts = Vec::new();
    let mut silent = Vec::new();
    // Ranks whose end the launcher's status implies but no record of theirs says.
    let mut inferred_exits = Vec::new();
    for rank in 0..world {
        let path = dir.join(format!("rank{rank}.json"));
        if !path.is_file() {
            silent.push(rank);
            inferred_exits.push(rank);
            continue;
        }
        let mut part = crate::diff_cmd::read_timeline(&path)?;
        if note_unfinished(&mut part, rank, launcher_status) {
            inferred_exits.push(rank);
        }
        parts.push((path.display().to_string(), part));
    }
    if parts.is_empty() {
        return Err(Failure::input(format!(
            "no rank wrote a Timeline into {} (the launcher exited with status {launcher_status}); its output above says why",
            dir.display()
        )));
    }
    // One host's ranks share CLOCK_MONOTONIC: the earliest rank's pair places every log line.
    let earliest = parts
        .iter()
        .map(|(_, part)| part)
        .min_by_key(|part| origin_ns(part));
    let log_origin = analysis::torch_log::LogOrigin {
        unix_ns: earliest.map_or(0, origin_ns),
        monotonic_ns: earliest
            .and_then(|part| part.machine.get("host_origin_monotonic_ns"))
            .and_then(|text| text.parse().ok()),
    };
    // Every rank's watchdog records, on the common axis.
    let mut timeline = hw::merge_ranks(parts).map_err(|e| Failure::input(e.to_string()))?;
    let mut watchdog = std::mem::take(&mut timeline.watchdog);
    for rank in silent {
        timeline.ranks.push(RankTimeline {
            rank,
            ..RankTimeline::default()
        });
        watchdog.push(WatchdogRecord {
            stands_for: Default::default(),
            rank,
            group: None,
            thread: ThreadKind::Main,
            event: WatchdogEvent::Exit,
            at_ns: 0,
            message: format!(
                "[Rank {rank}] the process ended without writing its Timeline (launcher exit status {launcher_status}); {INFERRED_EXIT_PLACE}"
            ),
        });
    }
    // What PyTorch's watchdog logged (its timeout or async error, dump, taking the process
    // down) is on the same wall clock: records on the common axis, and a finding for each Work
    // the watchdog timed out or found an error on, naming the call that made it where the
    // rank's records say which (as the simulator's does).
    let records = analysis::torch_log::watchdog_records(log, log_origin, &timeline.scenario.groups);
    let findings = analysis::torch_log::log_findings(&timeline, &records);
    timeline.findings.extend(findings);
    // A polling wait's timeout, which a rank wrote at its raise, the log has at its times.
    analysis::torch_log::drop_superseded(&mut watchdog, &records);
    watchdog.extend(records);
    place_inferred_exits(&mut watchdog, &inferred_exits);
    timeline.ranks.sort_by_key(|rank| rank.rank);
    // An inferred exit comes after whatever else its rank logged at the same time.
    watchdog.sort_by_key(|record| (record.at_ns, record.rank, is_inferred_exit(record)));
    timeline.watchdog = watchdog;
    timeline.machine.insert(
        "launcher_exit_status".to_string(),
        launcher_status.to_string(),
    );
    Ok(timeline)
}

/// A rank whose last file is the journal written while an op blocked (not its final
/// Timeline) ended inside that op without saying so: an `exit` record says it did, at the end
/// of its last completed op or the start of the call it never returned from
/// (`unfinished_host`), whichever is later, until [`place_inferred_exits`] knows better.
/// Returns whether it added one.
fn note_unfinished(part: &mut Timeline, rank: u32, launcher_status: &str) -> bool {
    let partial = part
        .machine
        .get("journal")
        .is_some_and(|journal| journal.starts_with("partial"));
    let exit_recorded = part
        .watchdog
        .iter()
        .any(|record| record.event == WatchdogEvent::Exit);
    if !partial || exit_recorded {
        return false;
    }
    let at_ns = part
        .ranks
        .iter()
        .flat_map(|rank| {
            let returned = rank.host.iter().map(|call| call.end_ns);
            returned.chain(rank.unfinished_host.iter().map(|call| call.start_ns))
        })
        .max()
        .unwrap_or(0);
    part.watchdog.push(WatchdogRecord {
        stands_for: Default::default(),
        rank,
        group: None,
        thread: ThreadKind::Main,
        event: WatchdogEvent::Exit,
        at_ns,
        message: format!(
            "[Rank {rank}] the process ended inside a blocking call without writing its final Timeline (launcher exit status {launcher_status}); {INFERRED_EXIT_PLACE}"
        ),
    });
    true
}

/// Where an exit no rank recorded is placed, as its message says.
const INFERRED_EXIT_PLACE: &str =
    "placed at the rank's last record (the end of its last completed op or the start of the call it never returned from, or a later line PyTorch logged for it)";

/// Each exit that `note_unfinished` or a silent rank implied: dropped where PyTorch's log says
/// how the process ended (the watchdog's take-down), else moved to the rank's last record, since
/// the log often says more than the rank's own file (the watchdog's timeout comes after the last
/// op it completed) and a process cannot end before what it logged.
fn place_inferred_exits(watchdog: &mut Vec<WatchdogRecord>, ranks: &[u32]) {
    for &rank in ranks {
        let logged_exit = watchdog.iter().any(|record| {
            record.rank == rank && record.event == WatchdogEvent::Exit && !is_inferred_exit(record)
        });
        if logged_exit {
            watchdog.retain(|record| record.rank != rank || !is_inferred_exit(record));
            continue;
        }
        let latest_ns = watchdog
            .iter()
            .filter(|record| record.rank == rank)
            .map(|record| record.at_ns)
            .max()
            .unwrap_or(0);
        if let Some(exit) = watchdog
            .iter_mut()
            .find(|record| record.rank == rank && is_inferred_exit(record))
        {
            exit.at_ns = latest_ns;
        }
    }
}

fn is_inferred_exit(record: &WatchdogRecord) -> bool {
    record.thread == ThreadKind::Main
        && record.event == WatchdogEvent::Exit
        && record.message.ends_with(INFERRED_EXIT_PLACE)
}

fn origin_ns(part: &Timeline) -> u64 {
    part.machine
        .get("host_origin_unix_ns")
        .and_then(|text| text.parse().ok())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diff_cmd::{read_timeline, recorded_invocation};
    use crate::load;
    use sim::timeline::FindingKind;

    fn record(rank: u32, thread: ThreadKind, event: WatchdogEvent, at_ns: u64) -> WatchdogRecord {
        WatchdogRecord {
            stands_for: Default::default(),
            rank,
            group: None,
            thread,
            event,
            at_ns,
            message: format!("[Rank {rank}] logged"),
        }
    }

    #[test]
    fn python_and_the_ranks_it_launches_log_in_utc() {
        let command = python_command("python3", None);
        let tz = command.get_envs().find(|(key, _)| *key == "TZ");
        assert_eq!(tz, Some(("TZ".as_ref(), Some("UTC".as_ref()))));
    }

    fn one_rank_timeline() -> Timeline {
        let text = std::fs::read_to_string("scenarios/timeout_dump.toml").unwrap();
        let scenario = sim::scenario::parse("timeout_dump.toml", &text).unwrap();
        Timeline::for_scenario(&scenario, sim::timeline::Source::Torch, |_| None)
    }

    #[test]
    fn an_inferred_exit_moves_to_the_ranks_last_record_and_no_other_record_moves() {
        let mut part = one_rank_timeline();
        part.machine
            .insert("journal".to_string(), "partial: inside op 3".to_string());
        assert!(note_unfinished(&mut part, 0, "1"));
        assert!(!note_unfinished(&mut part, 0, "1"), "one exit per rank");
        let mut watchdog = part.watchdog.clone();
        assert_eq!(watchdog[0].at_ns, 0);
        let stack_trace = record(
            0,
            ThreadKind::Watchdog,
            WatchdogEvent::StackTrace,
            4_689_000_000,
        );
        let other_rank = record(
            1,
            ThreadKind::Watchdog,
            WatchdogEvent::Timeout,
            9_000_000_000,
        );
        watchdog.extend([stack_trace.clone(), other_rank.clone()]);
        place_inferred_exits(&mut watchdog, &[0]);
        assert_eq!(watchdog[0].at_ns, 4_689_000_000);
        assert!(is_inferred_exit(&watchdog[0]));
        assert_eq!(watchdog[1..], [stack_trace, other_rank]);
    }

    #[test]
    fn an_inferred_exit_comes_no_earlier_than_the_call_the_process_never_returned_from() {
        let mut part = one_rank_timeline();
        part.machine
            .insert("journal".to_string(), "partial: inside op 3".to_string());
        part.ranks.push(RankTimeline {
            host: vec![sim::timeline::HostCall {
                iteration: 0,
                op: 0,
                start_ns: 1_000,
                end_ns: 2_000,
            }],
            unfinished_host: Some(sim::timeline::UnfinishedHostCall {
                iteration: 0,
                op: 1,
                start_ns: 3_000,
                blocked_on: Some(sim::timeline::HostBlock::Device),
            }),
            ..RankTimeline::default()
        });
        assert!(note_unfinished(&mut part, 0, "1"));
        assert_eq!(part.watchdog[0].at_ns, 3_000);
        assert!(is_inferred_exit(&part.watchdog[0]));
    }

    #[test]
    fn an_inferred_exit_gives_way_to_the_take_down_pytorch_logged() {
        let mut part = one_rank_timeline();
        part.machine
            .insert("journal".to_string(), "partial: inside op 3".to_string());
        assert!(note_unfinished(&mut part, 0, "1"));
        let take_down = record(0, ThreadKind::Watchdog, WatchdogEvent::Exit, 5_689_000_000);
        let mut watchdog = part.watchdog.clone();
        watchdog.push(take_down.clone());
        place_inferred_exits(&mut watchdog, &[0]);
        assert_eq!(watchdog, [take_down]);
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

    /// `c10dsim torch`'s join of the stored run `tests/data/torch/<run>` (one rank, its stored
    /// Timeline the join's output), its rank's Timeline first changed by `edit`.
    fn joined_stored_run(run: &str, edit: impl FnOnce(&mut Timeline)) -> Timeline {
        let stored =
            |extension: &str| Path::new("tests/data/torch").join(format!("{run}.{extension}"));
        let Ok(mut part) = read_timeline(&stored("json")) else {
            panic!("{run} is a stored Timeline")
        };
        // The rank's own file, as its interpreter wrote it: what `c10dsim torch` read from
        // PyTorch's log is read again below.
        part.findings
            .retain(|finding| !finding.message.contains("(PyTorch's log)"));
        part.watchdog.clear();
        edit(&mut part);
        let dir = std::env::temp_dir().join(format!(
            "c10dsim-join-{}-{run}-{}",
            std::process::id(),
            part.ranks[0].unfinished_collectives.len()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("rank0.json"),
            serde_json::to_string(&part).unwrap(),
        )
        .unwrap();
        let log = std::fs::read_to_string(stored("log")).unwrap();
        let Ok(joined) = join_ranks(&dir, 1, "1", &log) else {
            panic!("{run} joins")
        };
        std::fs::remove_dir_all(&dir).ok();
        joined
    }

    #[test]
    fn a_timeout_read_from_pytorch_s_log_names_the_call_of_its_work_as_the_simulator_does() {
        // The stored run's rank: its partial Timeline, written while `.item()` blocked behind
        // the 3 s backlog, by an interpreter that did not yet keep the all_reduce its `wait()`
        // never released as an unfinished collective; the interpreter keeps it now.
        let joined = joined_stored_run("gpu_backlog_timeout.run1", |part| {
            part.ranks[0]
                .unfinished_collectives
                .push(sim::timeline::UnfinishedCollective {
                    iteration: 0,
                    op: 1,
                    group: 0,
                    seq: 1,
                    work_seq_num: None,
                    bytes: 26_214_400,
                    async_op: true,
                    call_stream: 0,
                    run_stream: 1,
                    host_start_ns: 501_274_045,
                    host_end_ns: 501_555_588,
                    input_ready_ns: None,
                    kernel_start_ns: None,
                    kernel_end_ns: None,
                    wait: None,
                });
        });
        let [finding] = joined.findings.as_slice() else {
            panic!("one finding expected: {:?}", joined.findings)
        };
        assert_eq!(finding.kind, FindingKind::WatchdogTimeout);
        assert_eq!(
            (finding.iteration, finding.op),
            (Some(0), Some(1)),
            "{}",
            finding.message
        );
        // The simulation of the same invocation makes the same finding, so `diff` pairs them.
        let Ok((file, overrides)) = recorded_invocation(&joined.scenario.path) else {
            panic!("the run recorded its invocation")
        };
        let Ok(scenario) = load(&file, &overrides) else {
            panic!("{} loads", file.display())
        };
        let simulated = sim::engine::simulate(&scenario);
        let diff = analysis::diff::diff(&simulated, &joined, &Default::default());
        assert!(diff.findings_only_in_a.is_empty(), "{diff:?}");
        assert!(diff.findings_only_in_b.is_empty(), "{diff:?}");
        // The stored Timeline as it is holds no record of the Work: the finding names neither,
        // and says why.
        let joined = joined_stored_run("gpu_backlog_timeout.run1", |_| {});
        let finding = &joined.findings[0];
        assert_eq!((finding.iteration, finding.op), (None, None));
        assert!(
            finding
                .message
                .contains("no op or iteration named: rank 0 has no collective record of the Work with SeqNum=1, OpType=ALLREDUCE"),
            "{}",
            finding.message
        );
    }

    /// Rank 0's own file of a two-rank job whose all_reduce on the world and all_reduce on the
    /// group `pair` are both SeqNum 1, with time 0 at 2026-12-02 09:42:00 UTC.
    fn two_groups_rank0() -> Timeline {
        let text = "[cluster]\nranks = 2\n[groups.world]\neager_init = true\n\
                    [groups.pair]\nranks = [0, 1]\neager_init = true\n[tensors]\nx = \"1MiB\"\n\
                    [[op]]\nlabel = \"ar_world\"\nall_reduce = \"x\"\n\
                    [[op]]\nlabel = \"ar_pair\"\nall_reduce = \"x\"\ngroup = \"pair\"\n";
        let mut part = sim::engine::simulate(&sim::scenario::parse("two.toml", text).unwrap());
        part.ranks.retain(|rank| rank.rank == 0);
        part.findings.clear();
        part.watchdog.clear();
        let origin_s: u64 = 20_789 * 86_400 + 9 * 3600 + 42 * 60;
        part.machine.insert(
            "host_origin_unix_ns".to_string(),
            (origin_s * 1_000_000_000).to_string(),
        );
        part
    }

    /// `c10dsim torch`'s join of one rank's file `part` and PyTorch's stderr `log`.
    fn join_one_rank(part: &Timeline, tag: &str, log: &str) -> Timeline {
        let dir = std::env::temp_dir().join(format!("c10dsim-join-{}-{tag}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("rank0.json"), serde_json::to_string(part).unwrap()).unwrap();
        let Ok(joined) = join_ranks(&dir, 1, "1", log) else {
            panic!("{tag} joins")
        };
        std::fs::remove_dir_all(&dir).ok();
        joined
    }

    #[test]
    fn a_timeout_read_from_pytorch_s_log_names_the_call_on_its_group() {
        // The pair's SeqNum 1 timed out; the world's all_reduce is SeqNum 1 too. The line the
        // pair's watchdog prints next carries its prefix (PyTorch 2.11's
        // ProcessGroupNCCL.cpp:2303), the description the interpreter's `group_desc`.
        let log = "[rank0]:[E1202 09:42:40.100000000 ProcessGroupNCCL.cpp:689] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=262144, NumelOut=262144, Timeout(ms)=1000) ran for 1005 milliseconds before timing out.\n\
                   [rank0]:[E1202 09:42:40.100100000 ProcessGroupNCCL.cpp:2303] [PG ID 1 PG GUID 1(pair) Rank 0]  failure detected by watchdog at work sequence id: 1 PG status: last enqueued work: 1, last completed work: -1\n";
        let part = two_groups_rank0();
        let op = |name: &str| part.ops.iter().find(|o| o.name == name).map(|o| o.index);
        let joined = join_one_rank(&part, "pair", log);
        let [finding] = joined.findings.as_slice() else {
            panic!("one finding expected: {:?}", joined.findings)
        };
        assert_eq!(
            (finding.iteration, finding.op),
            (Some(0), op("ar_pair")),
            "{}",
            finding.message
        );
        let [record] = joined.watchdog.as_slice() else {
            panic!("one record expected: {:?}", joined.watchdog)
        };
        assert_eq!(record.group, Some(1));
    }

    #[test]
    fn each_group_s_timed_out_work_is_a_finding_naming_its_call() {
        // Both groups' watchdogs time their SeqNum 1 out; the line after each, from the group's
        // own watchdog, carries the group's prefix (PyTorch 2.11's ProcessGroupNCCL.cpp:2303),
        // and the pair's desc is its scenario name (the interpreter's `group_desc`).
        let timeout = |ran_ms: u32| {
            format!("[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=262144, NumelOut=262144, Timeout(ms)=1000) ran for {ran_ms} milliseconds before timing out.")
        };
        let failure = "failure detected by watchdog at work sequence id: 1 PG status: last enqueued work: 1, last completed work: -1";
        let log = format!(
            "[rank0]:[E1202 09:42:40.100000000 ProcessGroupNCCL.cpp:689] {}\n\
             [rank0]:[E1202 09:42:40.100100000 ProcessGroupNCCL.cpp:2303] [PG ID 1 PG GUID 1(pair) Rank 0]  {failure}\n\
             [rank0]:[E1202 09:42:40.150000000 ProcessGroupNCCL.cpp:689] {}\n\
             [rank0]:[E1202 09:42:40.150100000 ProcessGroupNCCL.cpp:2303] [PG ID 0 PG GUID 0(default_pg) Rank 0]  {failure}\n",
            timeout(1005),
            timeout(1055),
        );
        let part = two_groups_rank0();
        let op = |name: &str| part.ops.iter().find(|o| o.name == name).map(|o| o.index);
        let joined = join_one_rank(&part, "two-groups", &log);
        let named: Vec<_> = joined
            .findings
            .iter()
            .map(|f| (f.kind, f.iteration, f.op))
            .collect();
        assert_eq!(
            named,
            [
                (FindingKind::WatchdogTimeout, Some(0), op("ar_pair")),
                (FindingKind::WatchdogTimeout, Some(0), op("ar_world"))
            ],
            "{:?}",
            joined.findings
        );
        // The same lines twice (a log read twice) are the same two Works: still two findings.
        let twice = join_one_rank(&part, "two-groups-twice", &format!("{log}{log}"));
        assert_eq!(twice.findings, joined.findings);
    }

    #[test]
    fn a_complete_timeline_gets_no_inferred_exit() {
        let mut part = one_rank_timeline();
        part.machine
            .insert("journal".to_string(), "complete".to_string());
        assert!(!note_unfinished(&mut part, 0, "0"));
        assert!(part.watchdog.is_empty());
    }
}
