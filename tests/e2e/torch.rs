//! `c10dsim resolve` and `c10dsim torch` without PyTorch or a GPU: the resolved JSON, the exit
//! code and message when something is missing, and the whole launch against the fake torch of
//! `python/tests/fake_torch` (the Timeline it writes must parse as a Rust [`Timeline`]).

use crate::util::{c10dsim, skipped, stderr, stdout};
use sim::timeline::{FindingKind, Source, ThreadKind, Timeline, WatchdogEvent};
use std::path::PathBuf;
use std::process::Command;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn python_available() -> bool {
    Command::new("python3")
        .arg("--version")
        .output()
        .is_ok_and(|output| output.status.success())
}

/// `c10dsim torch SCENARIO --timeline …` against the fake torch, with `env` set: the command's
/// output and the Timeline it wrote.
fn torch_with_fake_torch(
    scenario: &str,
    tag: &str,
    env: &[(&str, &str)],
) -> (std::process::Output, Timeline) {
    let out = std::env::temp_dir().join(format!("c10dsim-torch-{tag}-{}.json", std::process::id()));
    let output = Command::new(env!("CARGO_BIN_EXE_c10dsim"))
        .args(["torch", scenario, "--timeline"])
        .arg(&out)
        .current_dir(repo())
        .env("C10DSIM_PYTHON", "python3")
        .env("PYTHONPATH", repo().join("python/tests/fake_torch"))
        .envs(env.iter().copied())
        .output()
        .expect("the binary runs");
    let text = std::fs::read_to_string(&out)
        .unwrap_or_else(|error| panic!("no Timeline ({error}): {}", stderr(&output)));
    std::fs::remove_file(&out).ok();
    (output, serde_json::from_str(&text).expect("a Timeline"))
}

#[test]
fn resolve_prints_the_scenario_both_engines_read() {
    let output = c10dsim(&[
        "resolve",
        "scenarios/exp_b_stream_scope.toml",
        "--json",
        "--set",
        "repeat=3",
        "--set",
        "warmup=1",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let resolved: serde_json::Value = serde_json::from_str(&stdout(&output)).expect("JSON");
    let scenario = crate::util::load("exp_b_stream_scope.toml", &["repeat=3", "warmup=1"]);
    assert_eq!(resolved["repeat"], 3);
    assert_eq!(
        resolved["ops"].as_array().expect("ops").len(),
        scenario.ops.len()
    );
    assert_eq!(resolved["ops"][1]["kind"]["kind"], "gpu_sleep");
    assert_eq!(resolved["ops"][1]["kind"]["duration_ns"], 130_000_000);
    assert_eq!(resolved["env"]["blocking_wait"], false);
}

#[test]
fn resolve_without_json_is_refused() {
    let output = c10dsim(&["resolve", "scenarios/exp_b_stream_scope.toml"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("--json"), "{}", stderr(&output));
}

/// `c10dsim torch` on a catalogue scenario with `python` as its interpreter, and `extra` flags.
fn torch_with(python: &str, extra: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_c10dsim"))
        .args(["torch", "scenarios/exp_b_stream_scope.toml"])
        .args(extra)
        .current_dir(repo())
        .env("C10DSIM_PYTHON", python)
        .output()
        .expect("the binary runs")
}

/// `c10dsim torch` on a catalogue scenario with `python` as its interpreter.
fn torch_with_interpreter(python: &str) -> std::process::Output {
    torch_with(python, &[])
}

#[test]
fn nproc_0_is_refused_before_python_is_asked() {
    let output = torch_with("/nonexistent/python3", &["--nproc", "0"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("--nproc must be at least 1"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn nproc_above_the_scenario_ranks_is_refused_before_python_is_asked() {
    let output = Command::new(env!("CARGO_BIN_EXE_c10dsim"))
        .args([
            "torch",
            "scenarios/process_group_setup.toml",
            "--nproc",
            "5",
        ])
        .current_dir(repo())
        .env("C10DSIM_PYTHON", "/nonexistent/python3")
        .output()
        .expect("the binary runs");
    assert_eq!(output.status.code(), Some(2));
    let message = stderr(&output);
    assert!(
        message.contains("--nproc 5: the scenario has 1 rank") && !message.contains("python3"),
        "{message}"
    );
}

#[test]
fn torch_without_python_exits_2_and_names_it() {
    let output = torch_with_interpreter("/nonexistent/python3");
    assert_eq!(output.status.code(), Some(2));
    let message = stderr(&output);
    assert!(
        message.contains("cannot run /nonexistent/python3") && message.contains("PyTorch"),
        "{message}"
    );
}

#[test]
fn torch_with_an_interpreter_that_says_nothing_says_how_it_ended() {
    if !std::path::Path::new("/bin/false").exists() {
        skipped("torch_with_an_interpreter_that_says_nothing_says_how_it_ended: no /bin/false");
        return;
    }
    let output = torch_with_interpreter("/bin/false");
    assert_eq!(output.status.code(), Some(2));
    let message = stderr(&output);
    assert!(
        message.contains("it printed nothing and exited with status 1"),
        "{message}"
    );
}

#[test]
fn torch_without_torch_exits_2_and_names_it() {
    if !python_available() {
        skipped("torch_without_torch_exits_2_and_names_it: no python3 on PATH");
        return;
    }
    let imports_torch = Command::new("python3")
        .args(["-c", "import torch"])
        .env("PYTHONPATH", repo().join("tests"))
        .env("PYTHONNOUSERSITE", "1")
        .output()
        .is_ok_and(|output| output.status.success());
    if imports_torch {
        // A machine with PyTorch installed gets past this check (then a GPU decides).
        skipped("torch_without_torch_exits_2_and_names_it: python3 imports torch here");
        return;
    }
    let output = Command::new(env!("CARGO_BIN_EXE_c10dsim"))
        .args(["torch", "scenarios/exp_b_stream_scope.toml"])
        .current_dir(repo())
        .env("C10DSIM_PYTHON", "python3")
        .env("PYTHONPATH", repo().join("tests"))
        .env("PYTHONNOUSERSITE", "1")
        .output()
        .expect("the binary runs");
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    let message = stderr(&output);
    assert!(
        message.contains("cannot import torch") && message.contains("install PyTorch"),
        "{message}"
    );
}

#[test]
fn torch_against_the_fake_torch_writes_a_timeline_the_parser_accepts() {
    if !python_available() {
        skipped("torch_against_the_fake_torch_writes_a_timeline_the_parser_accepts: no python3 on PATH (the interpreter is Python)");
        return;
    }
    let (output, timeline) = torch_with_fake_torch("scenarios/overlap_bench.toml", "e2e", &[]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("running it at cluster.ranks = 1"),
        "{}",
        stderr(&output)
    );
    assert_eq!(timeline.source, Source::Torch);
    assert_eq!(timeline.scenario.ranks, 1);
    assert_eq!(timeline.machine["device"], "Fake GPU");
    assert_eq!(timeline.machine["launcher_exit_status"], "0");
    let [rank] = timeline.ranks.as_slice() else {
        panic!("one rank expected")
    };
    // `repeat` counts every iteration, the warmup ones among them, as the simulator runs it.
    let iterations = timeline.scenario.repeat as usize;
    let collectives = timeline
        .ops
        .iter()
        .filter(|op| op.key == "all_reduce")
        .count();
    assert_eq!(rank.collectives.len(), collectives * iterations);
    assert!(stdout(&output).contains("overlap"), "{}", stdout(&output));
}

#[test]
fn a_rank_taken_down_inside_item_shows_the_call_it_died_in_everywhere() {
    if !python_available() {
        skipped("a_rank_taken_down_inside_item_shows_the_call_it_died_in_everywhere: no python3 on PATH (the interpreter is Python)");
        return;
    }
    // The GPU stops at the second all_reduce; the .item() after its wait blocks until the
    // (fake) watchdog takes the process down, after the journal wrote.
    let dir = std::env::temp_dir().join(format!("c10dsim-torch-open-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let scenario = dir.join("blocked_item.toml");
    std::fs::write(
        &scenario,
        "repeat = 2\nwarmup = 0\n[cluster]\nranks = 1\n[tensors]\nx = \"1MiB\"\n\
         [[op]]\nall_reduce = \"x\"\nasync_op = true\nwork = \"w\"\n\
         [[op]]\nwait = \"w\"\n[[op]]\nitem = \"x\"\n",
    )
    .unwrap();
    let (output, timeline) = torch_with_fake_torch(
        scenario.to_str().unwrap(),
        "open",
        &[
            ("FAKE_TORCH_GPU_STOPS", "all_reduce:2"),
            ("FAKE_TORCH_ABORTS", "item:2"),
        ],
    );
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    timeline.check_references().unwrap();
    let [rank] = timeline.ranks.as_slice() else {
        panic!("one rank expected")
    };
    let open = rank.unfinished_host.expect("the call it died in");
    assert_eq!((open.iteration, open.op), (1, 2));
    assert_eq!(
        open.blocked_on,
        Some(sim::timeline::HostBlock::Stream { stream: 0 })
    );
    assert_eq!(rank.unfinished_iteration, Some(1));
    let [never] = rank.unfinished_collectives.as_slice() else {
        panic!(
            "one collective never completed: {:?}",
            rank.unfinished_collectives
        )
    };
    assert_eq!((never.iteration, never.seq), (1, 2));
    // The process ended inside that call: not before it began.
    let exits: Vec<u64> = (timeline.watchdog.iter())
        .filter(|record| record.event == WatchdogEvent::Exit)
        .map(|record| record.at_ns)
        .collect();
    assert_eq!(exits.len(), 1, "{:?}", timeline.watchdog);
    assert!(
        exits[0] >= open.start_ns,
        "{exits:?} before {}",
        open.start_ns
    );
    // The trace writes the open call to the end of the capture, unfinished.
    let mut bytes = Vec::new();
    analysis::trace::write_chrome_trace(&timeline, &mut bytes).unwrap();
    let trace: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    assert!(trace["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e["name"] == "torch.Tensor.item" && e["args"]["finished"] == false));
    // The simulator's run of the scenario diffs against it (exit 0 or 1, not 2).
    let measured = dir.join("measured.json");
    std::fs::write(&measured, serde_json::to_string(&timeline).unwrap()).unwrap();
    let against = c10dsim(&[
        "run",
        scenario.to_str().unwrap(),
        "--against",
        measured.to_str().unwrap(),
    ]);
    assert!(
        matches!(against.status.code(), Some(0 | 1)),
        "{}",
        stderr(&against)
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_killed_rank_is_an_outcome_with_its_exit_recorded() {
    if !python_available() {
        skipped("a_killed_rank_is_an_outcome_with_its_exit_recorded: no python3 on PATH (the interpreter is Python)");
        return;
    }
    let (output, timeline) = torch_with_fake_torch("scenarios/rank0_crash_init.toml", "kill", &[]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let events: Vec<WatchdogEvent> = timeline.watchdog.iter().map(|r| r.event).collect();
    assert_eq!(events, [WatchdogEvent::Fault, WatchdogEvent::Exit]);
    assert_eq!(timeline.machine["exit_status"], "-9");
    assert_ne!(timeline.machine["launcher_exit_status"], "0");
    assert!(timeline.ranks[0].collectives.is_empty());
}

#[test]
fn pytorch_s_watchdog_log_lines_become_records_and_a_finding() {
    if !python_available() {
        skipped("pytorch_s_watchdog_log_lines_become_records_and_a_finding: no python3 on PATH (the interpreter is Python)");
        return;
    }
    let (output, timeline) = torch_with_fake_torch(
        "scenarios/lifetime_peak.toml",
        "log",
        &[("FAKE_TORCH_LOG_TIMEOUT", "1")],
    );
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(stderr(&output).contains("Watchdog caught collective operation timeout"));
    let [record] = timeline.watchdog.as_slice() else {
        panic!("one record expected: {:?}", timeline.watchdog)
    };
    assert_eq!(record.event, WatchdogEvent::Timeout);
    let last_host_ns = timeline.ranks[0].host.last().expect("host calls").end_ns;
    assert!(
        record.at_ns < last_host_ns,
        "{} {last_host_ns}",
        record.at_ns
    );
    assert_eq!(timeline.findings.len(), 1);
    assert!(timeline.findings[0].message.contains("(PyTorch's log)"));
    // The line's Work, SeqNum=1, is the first iteration's all_reduce: the finding names its
    // call, as the simulator's does.
    let ar_g = timeline.ops.iter().position(|op| op.name == "ar_g");
    assert_eq!(
        (timeline.findings[0].iteration, timeline.findings[0].op),
        (Some(0), ar_g.map(|op| op as u32)),
        "{}",
        timeline.findings[0].message
    );
    // The watchdog's async error (after a wait's timeout aborted the communicator, docs/torch.md)
    // is a record and an `async_error` finding too.
    let (output, timeline) = torch_with_fake_torch(
        "scenarios/lifetime_peak.toml",
        "log_async",
        &[("FAKE_TORCH_LOG_ASYNC_ERROR", "1")],
    );
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let [record] = timeline.watchdog.as_slice() else {
        panic!("one record expected: {:?}", timeline.watchdog)
    };
    assert_eq!(
        (record.thread, record.event),
        (ThreadKind::Watchdog, WatchdogEvent::AsyncError)
    );
    let [finding] = timeline.findings.as_slice() else {
        panic!("one finding expected: {:?}", timeline.findings)
    };
    assert_eq!(finding.kind, FindingKind::AsyncError);
    assert!(finding.message.contains("(PyTorch's log)"));
}

#[test]
fn a_caught_wait_timeout_s_collective_is_unfinished_and_the_log_s_async_error_names_it() {
    if !python_available() {
        skipped("a_caught_wait_timeout_s_collective_is_unfinished_and_the_log_s_async_error_names_it: no python3 on PATH (the interpreter is Python)");
        return;
    }
    // wait_timeout's `wait_w` raises its timeout and the program catches it; the watchdog then
    // logs the async error of SeqNum=1. The interpreter's final Timeline dropped `ar`, the
    // Work's call, so the log's finding named no op and `diff` saw `ar` unfinished on one side.
    let (output, timeline) = torch_with_fake_torch(
        "scenarios/wait_timeout.toml",
        "wait_raised",
        &[
            (
                "FAKE_TORCH_RAISES",
                "work.wait=DistBackendError: [Rank 0] Watchdog caught collective operation \
                 timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE) ran for 50 milliseconds before \
                 timing out.",
            ),
            ("FAKE_TORCH_LOG_ASYNC_ERROR", "1"),
        ],
    );
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let op = |name: &str| timeline.ops.iter().position(|op| op.name == name);
    let rank = &timeline.ranks[0];
    let [unfinished] = rank.unfinished_collectives.as_slice() else {
        panic!("one unfinished collective expected: {rank:?}")
    };
    assert_eq!(
        (unfinished.op as usize, unfinished.seq),
        (op("ar").expect("ar"), 1)
    );
    let wait = unfinished.wait.expect("the wait that raised");
    assert_eq!(Some(wait.op as usize), op("wait_w"));
    let [async_error] = (timeline.findings.iter())
        .filter(|f| f.kind == FindingKind::AsyncError)
        .collect::<Vec<_>>()[..]
    else {
        panic!("one async_error finding expected: {:?}", timeline.findings)
    };
    assert_eq!(
        (async_error.iteration, async_error.op.map(|op| op as usize)),
        (Some(0), op("ar")),
        "{}",
        async_error.message
    );
}

#[test]
fn a_polling_wait_s_timeout_has_the_simulator_s_main_thread_records_once() {
    if !python_available() {
        skipped("a_polling_wait_s_timeout_has_the_simulator_s_main_thread_records_once: no python3 on PATH (the interpreter is Python)");
        return;
    }
    // wait_timeout's `wait_w` times out and the program catches it. The rank writes the
    // simulator's two main-thread `wait_timeout` records and its `abort`, at the raise; PyTorch's
    // log has the same three at their times, which stand in for the rank's: both kept, `diff`
    // counted four `wait_timeout` records and two `abort`s against the simulator's two and one.
    let (output, measured) = torch_with_fake_torch(
        "scenarios/wait_timeout.toml",
        "polling_wait",
        &[
            (
                "FAKE_TORCH_RAISES",
                "work.wait=DistBackendError: [Rank 0] Watchdog caught collective operation \
                 timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE) ran for 50 milliseconds before \
                 timing out.",
            ),
            ("FAKE_TORCH_LOG_WAIT_TIMEOUT", "1"),
        ],
    );
    // The caught timeout is a finding all the same.
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let main: Vec<(WatchdogEvent, bool)> = (measured.watchdog.iter())
        .filter(|record| record.thread == ThreadKind::Main)
        .map(|record| (record.event, record.message.contains("fake")))
        .collect();
    // The log's: its lines name the fake's Work.
    assert_eq!(
        main,
        [
            (WatchdogEvent::WaitTimeout, true),
            (WatchdogEvent::WaitTimeout, true),
            (WatchdogEvent::Abort, false),
        ],
        "{:#?}",
        measured.watchdog
    );
    let dir = std::env::temp_dir().join(format!("c10dsim-polling-wait-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (simulated, torch) = (dir.join("simulated.json"), dir.join("torch.json"));
    std::fs::write(&torch, serde_json::to_string(&measured).unwrap()).unwrap();
    let run = c10dsim(&[
        "run",
        "scenarios/wait_timeout.toml",
        "--timeline",
        simulated.to_str().unwrap(),
    ]);
    assert_eq!(run.status.code(), Some(1), "{}", stderr(&run));
    // Counts alone: the fake's calls take no time.
    let diff = c10dsim(&[
        "diff",
        simulated.to_str().unwrap(),
        torch.to_str().unwrap(),
        "--json",
        "--tol-pct",
        "1e9",
        "--tol-us",
        "1e12",
    ]);
    assert!(
        matches!(diff.status.code(), Some(0 | 1)),
        "{}",
        stderr(&diff)
    );
    let report: serde_json::Value = serde_json::from_str(&stdout(&diff)).expect("JSON");
    let main_disagreements: Vec<&serde_json::Value> = (report["watchdog_disagreements"]
        .as_array()
        .into_iter()
        .flatten())
    .filter(|d| d["thread"] == "main")
    .collect();
    assert!(main_disagreements.is_empty(), "{main_disagreements:#?}");
    std::fs::remove_dir_all(&dir).ok();
}
