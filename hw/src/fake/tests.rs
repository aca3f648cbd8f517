//! The failure texts of a run on the fake device are the simulator's, word for word but for
//! the milliseconds each engine measured: both build them with `sim::pg::work` (a fault's
//! records with `sim::pg::faults`).
//!
//! About 1,280 lines in one module: every test runs a scenario on the fake device and simulates
//! it, through the same few helpers (`on_both`, `caught_outlines`, the field extractors), and
//! compares the two engines' texts, records and exceptions; split by fault kind they would
//! have to share those helpers from a module of their own.

use super::*;
use crate::exec::RunLog;
use crate::exec::{Executor, AT_THE_PROGRAMS_END};
use sim::pg::work::{
    async_error_raised, async_exception, remote_error_detected, timeout_caught,
    wait_timeout_finding, NcclAsyncError,
};
use sim::timeline::{
    Finding, FindingKind, RankTimeline, ThreadKind, Timeline, WatchdogEvent, WatchdogRecord,
};

mod comm_error;
mod pairs;

/// Rank 0 of `scenario` run on the fake device (the one-GPU model stand-in for its peers):
/// its log and the device after the run; and the whole scenario simulated.
fn rank0_on_fake_and_simulated(scenario: &Scenario) -> (RunLog, FakeDevice, Timeline) {
    let plan = rank0_plan(scenario).unwrap();
    let mut device = FakeDevice::default().for_environment_of(scenario);
    let mut executor = Executor::new(scenario, &plan, &mut device);
    executor.setup().unwrap();
    let log = executor.run().unwrap();
    (log, device, sim::engine::simulate(scenario))
}

/// Rank 0 of a two-rank job, run on the fake device as the one-GPU model stand-in and
/// simulated: `env` goes into `[env]`, `between` between the all_reduce and its `wait()`,
/// `fault` (its `ranks` and `kind`, and more) is at the all_reduce. Rank 0's first finding
/// on each side, the simulator's watchdog records of rank 0, the Work as PyTorch prints it,
/// and the scenario.
fn rank0_on_both(
    env: &str,
    between: &str,
    fault: &str,
) -> (Finding, Finding, Vec<String>, String, Scenario) {
    let text = format!(
        "[env]\n{env}\n[cluster]\nranks = 2\n[groups.world]\neager_init = true\ntimeout_s = 1\n\
         [tensors]\nx = \"1MiB\"\n[[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\nasync_op = true\n\
         work = \"w\"\n{between}[[op]]\nlabel = \"wait\"\nwait = \"w\"\n[[fault]]\n{fault}\nat = \"ar\"\n"
    );
    let scenario = sim::scenario::parse("texts.toml", &text).unwrap();
    let (log, device, simulated) = rank0_on_fake_and_simulated(&scenario);
    let work = device.watched[0].description.clone();
    let rank0 = |findings: &[Finding]| findings.iter().find(|f| f.rank == Some(0)).cloned();
    let records = (simulated.watchdog.iter())
        .filter(|r| r.rank == 0 && r.event != WatchdogEvent::Fault)
        .map(|r| r.message.clone())
        .collect();
    (
        rank0(&log.findings).unwrap(),
        rank0(&simulated.findings).unwrap(),
        records,
        work,
        scenario,
    )
}

/// `text` with the milliseconds after "ran for " left out: the part each engine measures.
fn unmeasured(text: &str) -> String {
    let Some((before, after)) = text.split_once("ran for ") else {
        return text.to_string();
    };
    let digits = after
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(after.len());
    format!("{before}ran for … {}", &after[digits..])
}

#[test]
fn the_watchdogs_timeout_is_pytorchs_line_on_both_engines_r26() {
    let (hw, simulated, records, work, _) = rank0_on_both("", "", "ranks = [1]\nkind = \"hang\"");
    assert_eq!(
        (hw.kind, simulated.kind),
        (FindingKind::WatchdogTimeout, FindingKind::WatchdogTimeout)
    );
    assert_eq!(
        unmeasured(&hw.message),
        unmeasured(&timeout_caught(0, &work, 0))
    );
    assert!(
        hw.message
            .starts_with("[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=262144, NumelOut=262144, Timeout(ms)=1000) ran for 1"),
        "{}",
        hw.message
    );
    // The simulator's log line is the same; its finding adds the desync diagnosis.
    assert_eq!(unmeasured(&records[0]), unmeasured(&hw.message));
    assert!(simulated.message.starts_with(&records[0]));
}

#[test]
fn the_watchdogs_async_error_is_pytorchs_line_on_both_engines_r27() {
    let (hw, simulated, _, work, _) = rank0_on_both(
        "",
        "",
        "ranks = [0]\nkind = \"async_error\"\nafter_us = 1000",
    );
    assert_eq!(hw.kind, FindingKind::AsyncError);
    assert_eq!(
        hw.message,
        async_exception(0, &work, NcclAsyncError::Remote)
    );
    assert_eq!(hw.message, simulated.message);
}

#[test]
fn a_peers_propagated_error_only_adds_the_remote_error_line_r27() {
    // TORCH_NCCL_PROPAGATE_ERROR=1 sets rank 0's group's error and logs one line; rank 0
    // times out as it does without it, on both engines.
    let peers = "ranks = [1]\nkind = \"async_error\"\nafter_us = 1000";
    let (hw, simulated, records, work, _) =
        rank0_on_both("TORCH_NCCL_PROPAGATE_ERROR = 1", "", peers);
    let (local, simulated_local, local_records, _, _) =
        rank0_on_both("TORCH_NCCL_PROPAGATE_ERROR = 0", "", peers);
    assert_eq!(
        (hw.kind, simulated.kind),
        (FindingKind::WatchdogTimeout, FindingKind::WatchdogTimeout)
    );
    assert_eq!(
        unmeasured(&hw.message),
        unmeasured(&timeout_caught(0, &work, 0))
    );
    assert_eq!((hw, simulated), (local, simulated_local));
    assert_eq!(records[0], remote_error_detected(0, 1));
    assert_eq!(records[1..], local_records[..]);
}

#[test]
fn wait_on_a_failed_work_raises_the_same_text_on_both_engines_r27() {
    let text = "[cluster]\nranks = 2\n[groups.world]\neager_init = true\ntimeout_s = 1\n\
        [tensors]\nx = \"1MiB\"\n[[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\nasync_op = true\n\
        work = \"w\"\n[[op]]\nhost_sleep_us = 5000\n[[op]]\nis_completed = \"w\"\n\
        [[op]]\nlabel = \"wait\"\nwait = \"w\"\n\
        [[fault]]\nranks = [0]\nkind = \"async_error\"\nafter_us = 1000\nat = \"ar\"\n";
    let scenario = sim::scenario::parse("texts.toml", text).unwrap();
    let run = on_both(text, FakeDevice::default());
    // The wait's raise (its Work stored the error the `is_completed()` found), after the
    // watchdog's finding at the raise (the main thread's abort).
    let raised_in_wait = |findings: &[Finding]| {
        (findings.iter())
            .find(|f| f.rank == Some(0) && f.op == Some(3))
            .map(|f| f.message.clone())
    };
    let work =
        "WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=262144, NumelOut=262144, Timeout(ms)=1000)";
    // The error 1 ms after the enqueue, 4 µs in (the fake device's calls).
    let raised = async_error_raised(0, work, 1_004_000, &scenario.ops[3]);
    let hw = raised_in_wait(&run.findings).expect("hw raised in the wait");
    assert_eq!(hw, raised);
    assert!(
        hw.contains(&format!(" {work} failed: ")),
        "the Work as PyTorch prints it: {hw}"
    );
    assert_eq!(Some(hw), raised_in_wait(&run.simulated.findings));
}

#[test]
fn a_blocking_waits_timeout_raises_pytorchs_line_on_both_engines_r15() {
    let (hw, simulated, _, work, scenario) = rank0_on_both(
        "TORCH_NCCL_BLOCKING_WAIT = 1",
        "",
        "ranks = [1]\nkind = \"hang\"",
    );
    assert_eq!(
        (hw.kind, simulated.kind),
        (FindingKind::WaitTimeout, FindingKind::WaitTimeout)
    );
    let expected = wait_timeout_finding(0, &work, 0, &scenario.ops[1]);
    assert_eq!(unmeasured(&hw.message), unmeasured(&expected));
    assert_eq!(unmeasured(&hw.message), unmeasured(&simulated.message));
}

/// A fault rank 0 meets is logged in the simulator's words on both engines: its `fault`
/// record, and for `die` the process's `exit` record. Each kind hw produces is run where hw
/// produces it: `skip` with the two ranks launched, the others on the downscale.
#[test]
fn a_fault_and_a_dies_exit_are_the_simulators_records_on_both_engines() {
    for (fault, launched) in [
        ("kind = \"die\"", false),
        ("kind = \"die\"", true),
        ("kind = \"skip\"", true),
        ("kind = \"mismatch\"\nsize = \"2MiB\"", false),
        ("kind = \"async_error\"\nafter_us = 1000", false),
    ] {
        let text = format!(
            "[cluster]\nranks = 2\n[groups.world]\neager_init = true\ntimeout_s = 1\n\
             [tensors]\nx = \"1MiB\"\n[[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\n\
             [[fault]]\nranks = [0]\nat = \"ar\"\n{fault}\n"
        );
        let scenario = sim::scenario::parse("faults.toml", &text).unwrap();
        let plan = if launched {
            let layout = Layout {
                rank: 0,
                world: 2,
                device: 0,
                launched: true,
                stand_in: None,
            };
            RankPlan::new(&scenario, &layout).unwrap()
        } else {
            rank0_plan(&scenario).unwrap()
        };
        let mut device = FakeDevice::default();
        let mut executor = Executor::new(&scenario, &plan, &mut device);
        executor.setup().unwrap();
        let log = executor.run().unwrap();
        let simulated = sim::engine::simulate(&scenario);
        let fault_and_exit = |records: &[WatchdogRecord]| -> Vec<_> {
            (records.iter())
                .filter(|r| r.rank == 0 && r.thread == ThreadKind::Main)
                .filter(|r| match r.event {
                    WatchdogEvent::Fault => true,
                    WatchdogEvent::Exit => fault.contains("die"),
                    _ => false,
                })
                .map(|r| (r.event, r.message.clone()))
                .collect()
        };
        let ran = fault_and_exit(&log.records);
        assert_eq!(ran, fault_and_exit(&simulated.watchdog), "{fault}");
        assert_eq!(ran.len(), 1 + usize::from(fault.contains("die")), "{ran:?}");
    }
}

/// A `wait()` that raises and nothing catches ends the process: rank 0's main-thread
/// records from the fault on — a polling wait's timeout (blocking wait, `wait(timeout)`)
/// with the abort of the communicator and the exit line, or a failed Work's raise — are
/// the simulator's, event, group and words, but for the milliseconds measured (R15, R27).
#[test]
fn an_uncaught_raise_in_wait_ends_the_process_in_the_simulators_words_on_both_engines() {
    let hang = "[[fault]]\nranks = [1]\nat = \"ar\"\nkind = \"hang\"\n";
    let failed = "[[fault]]\nranks = [0]\nat = \"ar\"\nkind = \"async_error\"\nafter_us = 1000\n";
    for (env, between, wait, fault) in [
        ("TORCH_NCCL_BLOCKING_WAIT = 1\n", "", "", hang),
        ("", "", "timeout_ms = 3\n", hang),
        (
            "",
            "[[op]]\nhost_sleep_us = 5000\n[[op]]\nis_completed = \"w\"\n",
            "",
            failed,
        ),
        ("TORCH_NCCL_BLOCKING_WAIT = 1\n", "", "", failed),
    ] {
        let text = format!(
            "[env]\n{env}[cluster]\nranks = 2\n[groups.world]\neager_init = true\ntimeout_s = 1\n\
             [tensors]\nx = \"1MiB\"\n[[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\nasync_op = true\n\
             work = \"w\"\n{between}[[op]]\nlabel = \"wait\"\nwait = \"w\"\n{wait}{fault}"
        );
        let scenario = sim::scenario::parse("uncaught.toml", &text).unwrap();
        let (log, _, simulated) = rank0_on_fake_and_simulated(&scenario);
        let main = |records: &[WatchdogRecord]| -> Vec<_> {
            (records.iter())
                .filter(|r| r.rank == 0 && r.thread == ThreadKind::Main)
                .filter(|r| r.event != WatchdogEvent::Fault)
                .map(|r| (r.event, r.group, unmeasured(&r.message)))
                .collect()
        };
        let ran = main(&log.records);
        assert_eq!(
            ran,
            main(&simulated.watchdog),
            "{env}{between}{wait}{fault}"
        );
        assert_eq!(
            ran.last().map(|(event, _, _)| *event),
            Some(WatchdogEvent::Exit),
            "{ran:?}"
        );
    }
}

/// A `wait(timeout)` that times out, uncaught, on one group (`scenarios/wait_timeout.toml`
/// without its `catch`) and on a subgroup's Work beside the world group's: hw's findings and
/// records are the simulator's (kind, iteration, op, stream, group, words but for the
/// milliseconds measured). Where the watchdog runs, it finds the error of the communicator
/// the main thread aborted under the Work before the exception ends the process, a second
/// finding; under blocking wait none runs. The dump signal and its sleep, which hw does not
/// re-enact (R27), are left out of the simulator's records (R15, R26, R27).
#[test]
fn an_uncaught_wait_timeout_is_the_simulators_findings_and_records_on_both_engines_r15() {
    let one_group =
        include_str!("../../../scenarios/wait_timeout.toml").replace("catch = true\n", "");
    let two_groups = "[cluster]\nranks = 1\n[groups.world]\neager_init = true\n\
         [groups.sub]\nranks = [0]\neager_init = true\n[tensors]\nx = \"1MiB\"\ny = \"1MiB\"\n\
         [[op]]\nlabel = \"ar_world\"\nall_reduce = \"y\"\n[[op]]\nlabel = \"backlog\"\n\
         gpu_sleep_us = 300_000\n[[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\ngroup = \"sub\"\n\
         async_op = true\nwork = \"w\"\n[[op]]\nlabel = \"wait_w\"\nwait = \"w\"\ntimeout_ms = 50\n\
         [[op]]\nlabel = \"done\"\ndevice_sync = true\n";
    let blocking_wait = one_group.replace(
        "[cluster]",
        "[env]\nTORCH_NCCL_BLOCKING_WAIT = 1\n[cluster]",
    );
    // Under TearDown the watchdog's abort would come after the dump wait: the exception
    // ends the process first, on both engines.
    let tear_down = format!("[env]\nTORCH_NCCL_ASYNC_ERROR_HANDLING = 1\n{two_groups}");
    for (text, watchdog_runs) in [
        (one_group.as_str(), true),
        (two_groups, true),
        (tear_down.as_str(), true),
        (blocking_wait.as_str(), false),
    ] {
        let scenario = sim::scenario::parse("wait_timeout.toml", text).unwrap();
        let plan = rank0_plan(&scenario).unwrap();
        // The Work is not complete at any poll: the 300 ms backlog is ahead of it.
        let mut device = FakeDevice {
            query_answers: std::iter::repeat_n(false, 1000).collect(),
            ..FakeDevice::default()
        }
        .for_environment_of(&scenario);
        let mut executor = Executor::new(&scenario, &plan, &mut device);
        executor.setup().unwrap();
        let log = executor.run().unwrap();
        let simulated = sim::engine::simulate(&scenario);
        let findings = |findings: &[Finding]| -> Vec<_> {
            (findings.iter())
                .map(|f| {
                    (
                        f.kind,
                        f.rank,
                        f.iteration,
                        f.op,
                        f.stream.clone(),
                        unmeasured(&f.message),
                    )
                })
                .collect()
        };
        let not_reenacted = [
            WatchdogEvent::StackTrace,
            WatchdogEvent::DumpSignal,
            WatchdogEvent::Dump,
        ];
        let records = |records: &[WatchdogRecord]| -> Vec<_> {
            (records.iter())
                .filter(|r| !not_reenacted.contains(&r.event))
                .map(|r| (r.rank, r.thread, r.event, r.group, unmeasured(&r.message)))
                .collect()
        };
        let ran = findings(&log.findings);
        assert_eq!(ran, findings(&simulated.findings), "{text}");
        let kinds: Vec<_> = ran.iter().map(|f| f.0).collect();
        let mut expected = vec![FindingKind::WaitTimeout];
        if watchdog_runs {
            expected.push(FindingKind::AsyncError);
        }
        assert_eq!(kinds, expected, "{text}");
        assert_eq!(
            records(&log.records),
            records(&simulated.watchdog),
            "{text}"
        );
    }
}

/// Rank 0 of `text` run on the fake device behind a backlog
/// ([`FakeDevice::behind_a_backlog`]), and the scenario simulated.
fn behind_a_backlog_on_both(text: &str) -> OnBoth {
    on_both(text, FakeDevice::behind_a_backlog())
}

/// Rank 0 of `text` run on `device`, and the scenario simulated.
fn on_both(text: &str, device: FakeDevice) -> OnBoth {
    let scenario = sim::scenario::parse("caught.toml", text).unwrap();
    let mut device = device.for_environment_of(&scenario);
    let plan = rank0_plan(&scenario).unwrap();
    let mut executor = Executor::new(&scenario, &plan, &mut device);
    executor.setup().unwrap();
    let mut log = executor.run().unwrap();
    let (findings, records) = (
        std::mem::take(&mut log.findings),
        std::mem::take(&mut log.records),
    );
    let rank0 = log
        .resolve(&plan, |event| Ok(device.time_of(event)))
        .unwrap();
    OnBoth {
        rank0,
        findings,
        records,
        aborted: device.aborted,
        simulated: sim::engine::simulate(&scenario),
    }
}

/// A run on the fake device (the rank's Timeline part, its findings and records, the
/// groups it aborted) and the same scenario simulated.
struct OnBoth {
    rank0: RankTimeline,
    findings: Vec<Finding>,
    records: Vec<WatchdogRecord>,
    aborted: Vec<usize>,
    simulated: Timeline,
}

impl OnBoth {
    /// Rank 0's outline on the fake device and simulated ([`caught_outline`]).
    fn outlines(&self) -> (Vec<String>, Vec<String>) {
        let simulated = &self.simulated;
        (
            caught_outline(&self.rank0, &self.findings, &self.records),
            caught_outline(
                &simulated.ranks[0],
                &simulated.findings,
                &simulated.watchdog,
            ),
        )
    }
}

/// A run's findings, each but for the milliseconds measured.
fn finding_fields(findings: &[Finding]) -> Vec<FindingFields> {
    (findings.iter())
        .map(|f| {
            let message = unmeasured(&f.message);
            (f.kind, f.rank, f.iteration, f.op, f.stream.clone(), message)
        })
        .collect()
}

type FindingFields = (
    FindingKind,
    Option<u32>,
    Option<u32>,
    Option<u32>,
    Option<String>,
    String,
);

/// A run's records but the dump signal and its sleep, which hw does not re-enact (R27), and
/// the words of the process's end, which hw's own (it takes the process down at the
/// watchdog's verdict, or at the program's end, without the dump wait).
fn reenacted_records(records: &[WatchdogRecord]) -> Vec<RecordFields> {
    let not_reenacted = [
        WatchdogEvent::StackTrace,
        WatchdogEvent::DumpSignal,
        WatchdogEvent::Dump,
    ];
    (records.iter())
        .filter(|r| !not_reenacted.contains(&r.event))
        .map(|r| {
            let own_words = r.event == WatchdogEvent::Exit && r.thread == ThreadKind::Watchdog;
            // hw's words for a handling it did at the program's end, before the simulator's.
            let message = if own_words {
                String::new()
            } else {
                unmeasured(r.message.trim_end_matches(AT_THE_PROGRAMS_END))
            };
            (r.rank, r.thread, r.event, r.group, message)
        })
        .collect()
}

type RecordFields = (u32, ThreadKind, WatchdogEvent, Option<u16>, String);

/// The exceptions the program caught: iteration, op, type and words.
fn exception_fields(timeline: &RankTimeline) -> Vec<(u32, u32, String, String)> {
    (timeline.exceptions.iter())
        .map(|e| (e.iteration, e.op, e.exception.clone(), e.message.clone()))
        .collect()
}

/// The catalogue's two caught timeouts run on hw as the simulator runs them (R15, R27):
/// `caught_timeout` (blocking wait) catches the wait's `DistBackendError` once the abort of
/// the communicator returned, then the retry's on the aborted communicator, raised before it
/// issues anything, and runs to its end; `wait_timeout` (`wait(timeout)`, where the
/// watchdog runs) catches the wait's, and the watchdog finds the aborted communicator's
/// error. The exceptions, findings and records are the simulator's, but for the
/// milliseconds measured; both run to the program's end, `wait_timeout`'s take-down after
/// it (the simulator's after the dump wait, hw's at the program's end).
#[test]
fn the_catalogues_caught_timeouts_are_the_simulators_exceptions_and_findings_on_both_engines() {
    for (text, exceptions, findings) in [
        (
            include_str!("../../../scenarios/caught_timeout.toml"),
            2,
            vec![FindingKind::WaitTimeout],
        ),
        (
            include_str!("../../../scenarios/wait_timeout.toml"),
            1,
            vec![FindingKind::WaitTimeout, FindingKind::AsyncError],
        ),
    ] {
        let OnBoth {
            rank0,
            findings: hw_findings,
            simulated,
            ..
        } = behind_a_backlog_on_both(text);
        let name = text.lines().find(|l| l.starts_with("name")).unwrap();
        assert_eq!(
            exception_fields(&rank0),
            exception_fields(&simulated.ranks[0]),
            "{name}"
        );
        assert_eq!(rank0.exceptions.len(), exceptions, "{name}");
        let ran = finding_fields(&hw_findings);
        assert_eq!(ran, finding_fields(&simulated.findings), "{name}");
        let kinds: Vec<_> = ran.iter().map(|f| f.0).collect();
        assert_eq!(kinds, findings, "{name}");
        let ops = |t: &RankTimeline| -> Vec<u32> { t.host.iter().map(|call| call.op).collect() };
        assert_eq!(ops(&rank0), ops(&simulated.ranks[0]), "{name}");
        assert_eq!(
            rank0.unfinished_iteration, simulated.ranks[0].unfinished_iteration,
            "{name}"
        );
    }
}

/// The records of the catalogue's two caught timeouts: the wait's timeout and abort, the
/// caught raise on the aborted communicator, the watchdog's finding of its error and the
/// end of the process (R15, R27).
#[test]
fn the_catalogues_caught_timeouts_are_the_simulators_records_on_both_engines() {
    for text in [
        include_str!("../../../scenarios/caught_timeout.toml"),
        include_str!("../../../scenarios/wait_timeout.toml"),
    ] {
        let run = behind_a_backlog_on_both(text);
        assert_eq!(run.aborted, [0], "the wait's abort of world, once");
        let simulated = run.simulated;
        assert_eq!(
            reenacted_records(&run.records),
            reenacted_records(&simulated.watchdog),
            "{text}"
        );
    }
}

/// After a caught timeout, what nothing catches ends the process in the simulator's words:
/// the retry on the aborted communicator without its `catch`, and the use of a Work's name
/// that the retry would have bound (Python's NameError, which `except DistBackendError:`
/// does not catch) (R27).
#[test]
fn an_uncaught_raise_after_a_caught_timeout_ends_the_process_as_the_simulators() {
    let caught = include_str!("../../../scenarios/caught_timeout.toml");
    let uncaught_retry = caught.replace(
        "label = \"retry\"\nall_reduce = \"x\"\ncatch = true\n",
        "label = \"retry\"\nall_reduce = \"x\"\n",
    );
    let name_error = caught
        .replace(
            "all_reduce = \"x\"\ncatch = true\n",
            "all_reduce = \"x\"\nasync_op = true\nwork = \"w2\"\ncatch = true\n",
        )
        .replace(
            "[[op]]\nlabel = \"after\"",
            "[[op]]\nlabel = \"use_w2\"\nwait = \"w2\"\n\n[[op]]\nlabel = \"after\"",
        );
    for (text, kind, exceptions) in [
        (uncaught_retry, FindingKind::AsyncError, 1),
        (name_error, FindingKind::ProgramError, 2),
    ] {
        assert_ne!(text, caught);
        let OnBoth {
            rank0,
            findings,
            records,
            simulated,
            ..
        } = behind_a_backlog_on_both(&text);
        let ran = finding_fields(&findings);
        assert_eq!(ran, finding_fields(&simulated.findings), "{text}");
        assert_eq!(
            ran.iter().map(|f| f.0).collect::<Vec<_>>(),
            [FindingKind::WaitTimeout, kind]
        );
        let records = reenacted_records(&records);
        assert_eq!(records, reenacted_records(&simulated.watchdog), "{text}");
        assert_eq!(
            records.last().map(|r| (r.1, r.2)),
            Some((ThreadKind::Main, WatchdogEvent::Exit))
        );
        assert_eq!(rank0.exceptions.len(), exceptions, "{text}");
        let ops = |t: &RankTimeline| -> Vec<u32> { t.host.iter().map(|call| call.op).collect() };
        assert_eq!(ops(&rank0), ops(&simulated.ranks[0]), "{text}");
        assert_eq!(
            exception_fields(&rank0),
            exception_fields(&simulated.ranks[0])
        );
    }
}

/// The watchdog's verdict on a Work of one group aborts, under
/// `TORCH_NCCL_ASYNC_ERROR_HANDLING` 1 and 2, that group's communicators alone, as each
/// process group's own watchdog does in PyTorch 2.11 (`abortComms()`); the world
/// communicator, with a Work of its own still held, runs on. hw asks the device to abort
/// `sub` only and logs the simulator's `timeout` and `abort` records, group and words but
/// for the milliseconds measured (under 2, whose handling comes after the dump wait, after
/// the program's end, hw's `abort` record adds that hw aborted at the program's end, without
/// the dump wait); under 3 nothing is aborted on either engine (R26, R27).
#[test]
fn the_watchdogs_abort_is_the_failed_groups_alone_on_both_engines_r27() {
    for mode in [1, 2, 3] {
        let text = format!(
            "[env]\nTORCH_NCCL_ASYNC_ERROR_HANDLING = {mode}\n[cluster]\nranks = 2\n\
             [groups.world]\neager_init = true\n[groups.sub]\nranks = [0, 1]\neager_init = true\n\
             timeout_s = 1\n[tensors]\nx = \"1MiB\"\ny = \"1MiB\"\n\
             [[op]]\nlabel = \"world_ar\"\nall_reduce = \"x\"\nasync_op = true\nwork = \"w0\"\n\
             [[op]]\nlabel = \"sub_ar\"\nall_reduce = \"y\"\ngroup = \"sub\"\nasync_op = true\n\
             work = \"w\"\n[[op]]\nwait = \"w\"\n\
             [[fault]]\nranks = [1]\nat = \"sub_ar\"\nkind = \"hang\"\n"
        );
        let scenario = sim::scenario::parse("two_groups.toml", &text).unwrap();
        let sub = scenario
            .groups
            .iter()
            .position(|g| g.name == "sub")
            .unwrap();
        let (log, device, simulated) = rank0_on_fake_and_simulated(&scenario);
        let timeout_and_abort = |records: &[WatchdogRecord]| -> Vec<_> {
            (records.iter())
                .filter(|r| r.rank == 0 && r.thread == ThreadKind::Watchdog)
                .filter(|r| matches!(r.event, WatchdogEvent::Timeout | WatchdogEvent::Abort))
                .map(|r| {
                    let message = r.message.trim_end_matches(AT_THE_PROGRAMS_END);
                    (r.event, r.group, unmeasured(message))
                })
                .collect()
        };
        let ran = timeout_and_abort(&log.records);
        assert_eq!(ran, timeout_and_abort(&simulated.watchdog), "mode {mode}");
        let aborts = usize::from(mode != 3);
        assert_eq!(device.aborted, vec![sub; aborts], "mode {mode}");
        assert_eq!(ran.len(), 1 + aborts, "mode {mode}: {ran:?}");
        assert!(
            ran.iter().all(|(_, group, _)| *group == Some(sub as u16)),
            "{ran:?}"
        );
    }
}

/// What rank 0's Timeline part says of its program, but for the times each engine
/// measures: its exceptions, findings and records, its host calls, collectives (and the
/// op of their wait), what it left unfinished.
fn caught_outline(
    rank0: &RankTimeline,
    findings: &[Finding],
    records: &[WatchdogRecord],
) -> Vec<String> {
    let rank0_findings: Vec<_> = findings
        .iter()
        .filter(|f| f.rank == Some(0))
        .cloned()
        .collect();
    let rank0_records: Vec<_> = records.iter().filter(|r| r.rank == 0).cloned().collect();
    let mut outline = vec![
        format!("exceptions {:?}", exception_fields(rank0)),
        format!("findings {:?}", finding_fields(&rank0_findings)),
        format!("records {:?}", reenacted_records(&rank0_records)),
    ];
    outline.extend(
        rank0
            .host
            .iter()
            .map(|c| format!("host {} op {}", c.iteration, c.op)),
    );
    outline.extend(rank0.collectives.iter().map(|c| {
        format!(
            "collective {} op {} g{} seq {} wait {:?}",
            c.iteration,
            c.op,
            c.group,
            c.seq,
            c.wait.as_ref().map(|w| w.op)
        )
    }));
    outline.extend(rank0.unfinished_collectives.iter().map(|c| {
        format!(
            "unfinished collective {} op {} g{} seq {} wait {:?}",
            c.iteration,
            c.op,
            c.group,
            c.seq,
            c.wait.as_ref().map(|w| w.op)
        )
    }));
    outline.push(format!(
        "unfinished host {:?}",
        rank0
            .unfinished_host
            .as_ref()
            .map(|u| (u.iteration, u.op, u.blocked_on))
    ));
    outline.push(format!(
        "unfinished iteration {:?}",
        rank0.unfinished_iteration
    ));
    outline
}

/// Rank 0 of `text` on `device` and simulated, outlined ([`caught_outline`]).
fn caught_outlines(text: &str, device: FakeDevice) -> (Vec<String>, Vec<String>) {
    on_both(text, device).outlines()
}

/// The Work whose timed-out wait the program caught was aborted under it: the simulator
/// writes its collective unfinished, the kernel ended by the abort and no data moved
/// (R15, R27); hw writes it the same way, not as a collective that completed when the
/// aborted kernel's end event fired.
#[test]
fn a_caught_timeouts_aborted_collective_is_unfinished_on_both_engines_r15() {
    let OnBoth {
        rank0, simulated, ..
    } = behind_a_backlog_on_both(include_str!("../../../scenarios/caught_timeout.toml"));
    let shape = |t: &RankTimeline| -> Vec<_> {
        (t.unfinished_collectives.iter())
            .map(|c| {
                let wait = c.wait.as_ref().map(|w| w.op);
                (c.iteration, c.op, c.seq, c.kernel_end_ns.is_some(), wait)
            })
            .collect()
    };
    assert!(simulated.ranks[0].collectives.is_empty());
    assert_eq!(shape(&simulated.ranks[0]), [(0, 1, 1, true, Some(2))]);
    assert!(rank0.collectives.is_empty(), "{:?}", rank0.collectives);
    assert_eq!(shape(&rank0), shape(&simulated.ranks[0]));
}

/// The caught timeouts of a synchronous collective's and a barrier's implicit `wait()`
/// (the 2.5 profile), an async barrier's, a coalescing block's, one Work of two groups,
/// and a second iteration's wait on the Work the first one's timed out on (the call that
/// would have rebound its name raised on the aborted communicator), end as the simulator's: exceptions, findings, records, host calls, collectives
/// and what is left unfinished (R15, R25, R27).
#[test]
fn caught_timeouts_of_every_call_shape_are_the_simulators_on_both_engines_r15() {
    let base = include_str!("../../../scenarios/caught_timeout.toml");
    let t25 = base.replace("warmup = 0\n", "warmup = 0\ntorch = \"2.5\"\n");
    let no_wait = |t: &str| {
        t.replace(
            "[[op]]\nlabel = \"wait_w\"\nwait = \"w\"\ncatch = true\n",
            "",
        )
    };
    let two_groups = base
        .replace("[tensors]", "[groups.sub]\nranks = [0]\neager_init = true\ntimeout_s = 0.5\n\n[tensors]")
        .replace("label = \"retry\"\nall_reduce = \"x\"\ncatch = true\n", "label = \"retry\"\nall_reduce = \"x\"\ngroup = \"sub\"\nasync_op = true\nwork = \"w2\"\n\n[[op]]\nwait = \"w2\"\ncatch = true\n");
    let variants = vec![
        (
            "sync25",
            no_wait(&t25.replace("async_op = true\nwork = \"w\"\n", "catch = true\n")),
        ),
        (
            "barrier25",
            no_wait(&t25.replace(
                "all_reduce = \"x\"\nasync_op = true\nwork = \"w\"\n",
                "barrier = true\ncatch = true\n",
            )),
        ),
        (
            "barrier212",
            no_wait(&base.replace(
                "all_reduce = \"x\"\nasync_op = true\nwork = \"w\"\n",
                "barrier = true\ncatch = true\n",
            )),
        ),
        (
            "async_barrier",
            base.replace(
                "all_reduce = \"x\"\nasync_op = true\n",
                "barrier = true\nasync_op = true\n",
            ),
        ),
        (
            "coalesce",
            base.replace(
                "[tensors]\nx = \"1MiB\"",
                "[tensors]\nx = { size = \"1MiB\", count = 2 }",
            )
            .replace(
                "all_reduce = \"x\"\nasync_op = true\nwork = \"w\"\n",
                "all_reduce = \"x\"\ncoalesce = true\nasync_op = true\nwork = \"w\"\n",
            ),
        ),
        ("two_groups", two_groups),
        (
            "repeat2",
            base.replace("repeat = 1", "repeat = 2")
                .replace("work = \"w\"\n", "work = \"w\"\ncatch = true\n"),
        ),
    ];
    assert!(variants.iter().all(|(_, text)| text != base));
    let mut failures = Vec::new();
    for (name, text) in variants {
        let (hw, sim) = caught_outlines(&text, FakeDevice::behind_a_backlog());
        failures.extend(outlines_differ(name, &hw, &sim));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// A caught `wait(timeout)` where the watchdog runs: the watchdog finds the error of the
/// communicator the main thread aborted (R15, R27). Under `TORCH_NCCL_ASYNC_ERROR_HANDLING`
/// 0 and 2 it does not take the process down; under 1 and 3 it does, after the dump wait
/// (60 s), long after the program's end: the program goes on to its end on both engines,
/// every iteration finished, with the same findings and records (hw takes the process down
/// at the program's end, without the dump wait).
#[test]
fn a_caught_wait_timeouts_watchdog_finding_lets_the_program_run_to_its_end_in_every_mode_r27() {
    let base = include_str!("../../../scenarios/wait_timeout.toml");
    for mode in 0..=3u8 {
        let text = base.replace(
            "[cluster]",
            &format!("[env]\nTORCH_NCCL_ASYNC_ERROR_HANDLING = {mode}\n\n[cluster]"),
        );
        let run = behind_a_backlog_on_both(&text);
        let ops = |t: &RankTimeline| -> Vec<u32> { t.host.iter().map(|call| call.op).collect() };
        let simulated_ops = ops(&run.simulated.ranks[0]);
        assert_eq!(simulated_ops, [0, 1, 2, 3], "mode {mode}");
        assert_eq!(ops(&run.rank0), simulated_ops, "mode {mode}");
        assert_eq!(run.simulated.ranks[0].unfinished_iteration, None);
        assert_eq!(run.rank0.unfinished_iteration, None, "mode {mode}");
        assert_eq!(
            finding_fields(&run.findings),
            finding_fields(&run.simulated.findings),
            "mode {mode}"
        );
        assert_eq!(
            reenacted_records(&run.records),
            reenacted_records(&run.simulated.watchdog),
            "mode {mode}"
        );
        let exit = (run.records.iter())
            .find(|r| r.event == WatchdogEvent::Exit)
            .map(|r| r.message.as_str());
        let tears_down = mode == 1 || mode == 3;
        assert_eq!(
            exit.is_some_and(|m| m.contains("at the program's end, without the dump wait")),
            tears_down,
            "mode {mode}: {exit:?}"
        );
    }
}

/// A dump wait shorter than what follows the caught `wait(timeout)`
/// (`TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC = 10`: 40 ms; then a 200 ms host sleep): the
/// watchdog takes the process down during the sleep in the simulator, and hw, which checks
/// before each op, before the next one (`done`): the sleep runs on both engines, `done` on
/// neither, and the iteration is left unfinished on both (R27).
#[test]
fn a_caught_wait_timeouts_take_down_comes_after_the_simulators_dump_wait_r27() {
    let text = include_str!("../../../scenarios/wait_timeout.toml")
        .replace(
            "[cluster]",
            "[env]\nTORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC = 10\n\n[cluster]",
        )
        .replace(
            "label = \"done\"",
            "label = \"pause\"\nhost_sleep_us = 200_000\n\n[[op]]\nlabel = \"done\"",
        );
    let run = behind_a_backlog_on_both(&text);
    let ops = |t: &RankTimeline| -> Vec<u32> { t.host.iter().map(|call| call.op).collect() };
    assert_eq!(ops(&run.rank0), [0, 1, 2, 3]);
    let simulated = &run.simulated.ranks[0];
    let simulated_ops: Vec<u32> = (ops(simulated).into_iter())
        .chain(simulated.unfinished_host.as_ref().map(|call| call.op))
        .collect();
    assert_eq!(simulated_ops, [0, 1, 2, 3]);
    assert_eq!(simulated.unfinished_iteration, Some(0));
    assert_eq!(run.rank0.unfinished_iteration, Some(0));
    assert_eq!(
        reenacted_records(&run.records),
        reenacted_records(&run.simulated.watchdog)
    );
    let exit = (run.records.iter())
        .find(|r| r.event == WatchdogEvent::Exit)
        .map(|r| r.message.clone())
        .unwrap_or_default();
    assert!(
        exit.contains("after the watchdog's dump wait (40 ms)"),
        "{exit}"
    );
}

/// Under `TORCH_NCCL_ASYNC_ERROR_HANDLING = 2` (CleanUpOnly) the watchdog's verdict — a
/// collective's timeout (`scenarios/hang_10min.toml`, R26) or an NCCL async error
/// (`scenarios/async_error.toml`, R27), small: two ranks, a 1-s timeout, a 1-ms error on
/// rank 0's own network — aborts the failed group's communicators and the process lives:
/// the call blocked on the collective returns, a later `wait()` on the failed Work raises
/// and a later collective on the aborted communicator raises before it issues anything,
/// caught (`catch = true`) or not. hw runs on as the simulator does: exceptions, findings,
/// records, host calls, collectives and what is left unfinished are the simulator's.
#[test]
fn clean_up_only_lets_the_program_run_on_after_the_watchdogs_verdict_on_both_engines_r27() {
    let program = |fault: &str, catch: &str| {
        format!(
            "[env]\nTORCH_NCCL_ASYNC_ERROR_HANDLING = 2\n[cluster]\nranks = 2\n\
             [groups.world]\neager_init = true\ntimeout_s = 1\n[tensors]\ngrad = \"1MiB\"\n\
             [[op]]\nlabel = \"ar\"\nall_reduce = \"grad\"\nasync_op = true\nwork = \"w\"\n\
             [[op]]\nwait = \"w\"\n[[op]]\nlabel = \"loss\"\nitem = \"grad\"\n\
             [[op]]\nlabel = \"again\"\nwait = \"w\"\ncatch = {catch}\n\
             [[op]]\nlabel = \"retry\"\nall_reduce = \"grad\"\ncatch = {catch}\n\
             [[op]]\nlabel = \"done\"\ndevice_sync = true\n\
             [[fault]]\nat = \"ar\"\n{fault}\n"
        )
    };
    let hang = "ranks = [1]\nkind = \"hang\"";
    let failed = "ranks = [0]\nkind = \"async_error\"\nafter_us = 1000";
    let mut failures = Vec::new();
    for (fault, catch) in [(hang, true), (hang, false), (failed, true), (failed, false)] {
        let text = program(fault, &catch.to_string());
        let (hw, mut sim) = caught_outlines(&text, FakeDevice::default());
        // The simulator's timeout finding adds the desync diagnosis, from every rank.
        for line in &mut sim {
            while let Some(at) = line.find(" Diagnosis: ") {
                let end = at + line[at..].find("\")").unwrap();
                line.replace_range(at..end, "");
            }
        }
        assert!(
            sim.iter().any(|line| line.contains("AbortReturned")),
            "{fault} catch {catch}: the simulator's process lives: {sim:?}"
        );
        failures.extend(outlines_differ(
            &format!("{fault} catch {catch}"),
            &hw,
            &sim,
        ));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// Under blocking wait no watchdog runs (R15): an `async_error` fault (`scenarios/async_error.toml`'s,
/// on a two-rank job run as rank 0's one-GPU downscale) is met by rank 0's polling `wait()`
/// alone, never by a watchdog. Rank 0's own failed Work, uncaught, raises in `wait()` and ends
/// the process; a peer's error, which no watchdog of the peer writes into the store, leaves
/// rank 0's wait to time out. Rank 0's findings and records are the simulator's on both
/// engines, and no watchdog thread logs anything. Caught or not, rank 0's wait() on its own
/// failed Work aborts the communicator, which ends the stand-in collective, before it raises
/// (R15, R27): caught, the program goes on.
#[test]
fn an_async_error_under_blocking_wait_meets_no_watchdog_on_both_engines_r15() {
    let own = "ranks = [0]\nkind = \"async_error\"\nafter_us = 1000";
    let peers = "ranks = [1]\nkind = \"async_error\"\nafter_us = 1000";
    for (fault, catch, rank0_kinds) in [
        (own, "", vec![FindingKind::AsyncError]),
        (peers, "", vec![FindingKind::WaitTimeout]),
        (peers, "catch = true\n", vec![FindingKind::WaitTimeout]),
        (own, "catch = true\n", vec![]),
    ] {
        let text = format!(
            "[env]\nTORCH_NCCL_BLOCKING_WAIT = 1\nTORCH_NCCL_PROPAGATE_ERROR = 1\n[cluster]\n\
             ranks = 2\n[groups.world]\neager_init = true\ntimeout_s = 1\n[tensors]\n\
             x = \"1MiB\"\n[[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\nasync_op = true\n\
             work = \"w\"\n[[op]]\nlabel = \"wait\"\nwait = \"w\"\n{catch}[[op]]\n\
             label = \"after\"\nhost_sleep_us = 10\n[[fault]]\n{fault}\nat = \"ar\"\n"
        );
        let OnBoth {
            findings,
            records,
            simulated,
            ..
        } = on_both(&text, FakeDevice::behind_a_backlog());
        let watchdog_records = (simulated.watchdog.iter())
            .filter(|r| r.thread == ThreadKind::Watchdog)
            .count();
        assert_eq!(watchdog_records, 0, "{fault} {catch}");
        let rank0_findings = |findings: &[Finding]| -> Vec<FindingFields> {
            let rank0: Vec<_> = (findings.iter())
                .filter(|f| f.rank == Some(0) && f.kind != FindingKind::Deadlock)
                .cloned()
                .collect();
            finding_fields(&rank0)
        };
        let hw_findings = rank0_findings(&findings);
        assert_eq!(
            hw_findings,
            rank0_findings(&simulated.findings),
            "{fault} {catch}"
        );
        let kinds: Vec<_> = hw_findings.iter().map(|f| f.0).collect();
        assert_eq!(kinds, rank0_kinds, "{fault} {catch}");
        let rank0_records = |records: &[WatchdogRecord]| -> Vec<RecordFields> {
            (reenacted_records(records).into_iter())
                .filter(|r| r.0 == 0)
                .collect()
        };
        let hw_records = rank0_records(&records);
        assert_eq!(
            hw_records,
            rank0_records(&simulated.watchdog),
            "{fault} {catch}"
        );
        assert!(
            hw_records.iter().all(|r| r.1 == ThreadKind::Main),
            "{fault} {catch}: {hw_records:?}"
        );
    }
}

/// A `wait(timeout)` without blocking wait, where the watchdog runs, on a Work rank 0's own
/// NCCL async error failed (1 ms in, the wait's timeout 500 ms): the wait's poll finds the
/// error, the main thread aborts the communicator and raises the error once the abort
/// returned; the watchdog, whose polls blocked on the abort, finds that error in the raise's
/// millisecond, caught or not (uncaught, before the exception ends the process), as after a
/// wait's timeout (R15, R27, R28). Caught, under `TORCH_NCCL_ASYNC_ERROR_HANDLING` 0 and 2
/// the program runs to its end on both engines, hw writing the watchdog's handling at the
/// finding; under 1 and 3 the take-down comes after the dump wait (60 s), after the program's
/// end, where hw takes the process down. Rank 0's exceptions, findings, records (but for the
/// dump and the take-down's words), host calls, collectives and what is left unfinished are
/// the simulator's ([`caught_outline`]).
#[test]
fn a_wait_timeouts_own_async_error_is_found_by_the_watchdog_at_the_raise_on_both_engines_r27() {
    let mut failures = Vec::new();
    for mode in 0..=3u8 {
        for catch in [true, false] {
            let text = format!(
                "[env]\nTORCH_NCCL_ASYNC_ERROR_HANDLING = {mode}\n[cluster]\nranks = 2\n\
                 [groups.world]\neager_init = true\ntimeout_s = 2\n[tensors]\nx = \"1MiB\"\n\
                 [[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\nasync_op = true\nwork = \"w\"\n\
                 [[op]]\nlabel = \"wait\"\nwait = \"w\"\ntimeout_ms = 500\ncatch = {catch}\n\
                 [[op]]\nlabel = \"after\"\nhost_sleep_us = 10\n\
                 [[op]]\nlabel = \"done\"\ndevice_sync = true\n\
                 [[fault]]\nranks = [0]\nat = \"ar\"\nkind = \"async_error\"\nafter_us = 1000\n"
            );
            let case = format!("mode {mode} catch {catch}");
            let run = on_both(&text, FakeDevice::default());
            let found_at_the_raise = |records: &[WatchdogRecord]| {
                let raise = (records.iter())
                    .find(|r| r.rank == 0 && r.event == WatchdogEvent::Abort)
                    .map(|r| r.at_ns / 1_000_000);
                let found = (records.iter())
                    .filter(|r| r.rank == 0 && r.thread == ThreadKind::Watchdog)
                    .find(|r| r.event == WatchdogEvent::AsyncError)
                    .map(|r| r.at_ns / 1_000_000);
                found.is_some() && found == raise
            };
            assert!(found_at_the_raise(&run.simulated.watchdog), "{case}");
            assert!(found_at_the_raise(&run.records), "{case}");
            let (hw, sim) = run.outlines();
            failures.extend(outlines_differ(&case, &hw, &sim));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// Any `wait()` called after its Work's own NCCL async error (a sleep past the error at
/// 1 ms): a default wait (after the program's `is_completed()` stored the error in its Work),
/// `wait(timeout)` and blocking wait alike find it at the call, after the stream wait, and the main thread aborts the communicator before it raises (PyTorch's
/// `WorkNCCL::wait()`: `exception()` → `abort()` → rethrow, R15, R27), caught or not; caught,
/// the next collective meets the aborted communicator. Rank 0's exceptions, findings, records,
/// host calls, collectives and what is left unfinished are the simulator's
/// ([`caught_outline`]).
#[test]
fn a_wait_of_any_kind_on_a_failed_work_aborts_before_it_raises_on_both_engines_r15_r27() {
    // The last: called at 200 ms, after the watchdog found the error at its 100-ms poll and
    // while it handles it (the dump wait): it finds nothing more at the raise.
    let query = "[[op]]\nis_completed = \"w\"\n";
    let kinds = [
        ("", query, "", 5000),
        ("", "", "timeout_ms = 500\n", 5000),
        ("TORCH_NCCL_BLOCKING_WAIT = 1", "", "", 5000),
        ("TORCH_NCCL_ASYNC_ERROR_HANDLING = 2", query, "", 200_000),
    ];
    let mut failures = Vec::new();
    for (env, between, kind, sleep_us) in kinds {
        for catch in [true, false] {
            let text = format!(
                "[env]\n{env}\n[cluster]\nranks = 2\n[groups.world]\neager_init = true\n\
                 timeout_s = 2\n[tensors]\nx = \"1MiB\"\n\
                 [[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\nasync_op = true\nwork = \"w\"\n\
                 [[op]]\nhost_sleep_us = {sleep_us}\n{between}\
                 [[op]]\nlabel = \"wait\"\nwait = \"w\"\n{kind}catch = {catch}\n\
                 [[op]]\nlabel = \"again\"\nall_reduce = \"x\"\ncatch = true\n\
                 [[op]]\nlabel = \"done\"\nhost_sleep_us = 10\n\
                 [[fault]]\nranks = [0]\nat = \"ar\"\nkind = \"async_error\"\nafter_us = 1000\n"
            );
            let case = format!("{env} {kind}sleep {sleep_us} µs catch {catch}");
            let run = on_both(&text, FakeDevice::default());
            // The main thread's finding of the error, then its abort's return.
            let main_thread = |records: &[WatchdogRecord]| -> Vec<_> {
                (records.iter())
                    .filter(|r| r.rank == 0 && r.thread == ThreadKind::Main)
                    .filter(|r| {
                        matches!(
                            r.event,
                            WatchdogEvent::WaitTimeout
                                | WatchdogEvent::WaitError
                                | WatchdogEvent::Abort
                        )
                    })
                    .map(|r| r.event)
                    .collect()
            };
            let expected = [WatchdogEvent::WaitError, WatchdogEvent::Abort];
            assert_eq!(main_thread(&run.simulated.watchdog), expected, "{case}");
            assert_eq!(main_thread(&run.records), expected, "{case}");
            assert!(run.aborted.contains(&0), "{case}: hw aborted world");
            let (hw, sim) = run.outlines();
            failures.extend(outlines_differ(&case, &hw, &sim));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// The two engines' outlines of `case`, side by side, where they differ.
fn outlines_differ(case: &str, hw: &[String], sim: &[String]) -> Option<String> {
    (hw != sim).then(|| {
        format!(
            "{case}:\n hw:  {}\n sim: {}",
            hw.join("\n      "),
            sim.join("\n      ")
        )
    })
}

/// The time of rank 0's first `event` record of the watchdog thread.
fn watchdog_record_ns(records: &[WatchdogRecord], event: WatchdogEvent) -> u64 {
    (records.iter())
        .find(|r| r.rank == 0 && r.thread == ThreadKind::Watchdog && r.event == event)
        .unwrap_or_else(|| panic!("no {event:?} record: {records:?}"))
        .at_ns
}

/// Under `TORCH_NCCL_ASYNC_ERROR_HANDLING = 2` the watchdog handles its verdict (a timeout,
/// R26; an NCCL async error, R27) as the simulator's does: the finding at the verdict, the
/// abort of the group's communicators only after the dump wait (60 s), and the call blocked
/// on the failed collective (`loss`, an `.item()`) stays blocked until the abort, then
/// returns; the next call on the aborted communicator raises. The records' order, the abort's
/// time (after a timeout's stack trace too, `host.watchdog_stack_trace_us`) and the blocked
/// call's return are the simulator's (within a millisecond: the fake device's host calls take
/// a microsecond each).
#[test]
fn clean_up_only_aborts_after_the_dump_wait_as_the_simulator_does_r27() {
    let program = |fault: &str| {
        format!(
            "[env]\nTORCH_NCCL_ASYNC_ERROR_HANDLING = 2\n[cluster]\nranks = 2\n\
             [groups.world]\neager_init = true\ntimeout_s = 1\n[tensors]\ngrad = \"1MiB\"\n\
             [[op]]\nlabel = \"ar\"\nall_reduce = \"grad\"\nasync_op = true\nwork = \"w\"\n\
             [[op]]\nwait = \"w\"\n[[op]]\nlabel = \"loss\"\nitem = \"grad\"\n\
             [[op]]\nlabel = \"retry\"\nall_reduce = \"grad\"\ncatch = true\n\
             [[fault]]\nat = \"ar\"\n{fault}\n"
        )
    };
    let hang = "ranks = [1]\nkind = \"hang\"";
    let failed = "ranks = [0]\nkind = \"async_error\"\nafter_us = 1000";
    // A timeout's stack trace delays the handling; an async error has none (R27).
    let traced = "[host]\nwatchdog_stack_trace_us = 3_500_000\n";
    for (fault, found, host) in [
        (hang, WatchdogEvent::Timeout, ""),
        (failed, WatchdogEvent::AsyncError, ""),
        (hang, WatchdogEvent::Timeout, traced),
        (failed, WatchdogEvent::AsyncError, traced),
    ] {
        let run = on_both(&(program(fault) + host), FakeDevice::default());
        let rank0_records = |records: &[WatchdogRecord]| -> Vec<RecordFields> {
            (reenacted_records(records).into_iter())
                .filter(|r| r.0 == 0)
                .collect()
        };
        assert_eq!(
            rank0_records(&run.records),
            rank0_records(&run.simulated.watchdog),
            "{fault}"
        );
        let (hw_found, sim_found) = (
            watchdog_record_ns(&run.records, found),
            watchdog_record_ns(&run.simulated.watchdog, found),
        );
        assert_eq!(hw_found / 1_000_000, sim_found / 1_000_000, "{fault}");
        let (hw_abort, sim_abort) = (
            watchdog_record_ns(&run.records, WatchdogEvent::Abort),
            watchdog_record_ns(&run.simulated.watchdog, WatchdogEvent::Abort),
        );
        assert!(
            sim_abort >= sim_found + 60_000_000_000,
            "{fault}: {sim_abort}"
        );
        assert!(
            hw_abort.abs_diff(sim_abort) < 1_000_000,
            "{fault}: {hw_abort} {sim_abort}"
        );
        let loss_end = |rank: &RankTimeline| rank.host.iter().find(|c| c.op == 2).unwrap().end_ns;
        let (hw_loss, sim_loss) = (loss_end(&run.rank0), loss_end(&run.simulated.ranks[0]));
        assert!(hw_loss >= hw_abort, "{fault}: {hw_loss} {hw_abort}");
        assert!(
            hw_loss.abs_diff(sim_loss) < 1_000_000,
            "{fault}: {hw_loss} {sim_loss}"
        );
        assert_eq!(
            exception_fields(&run.rank0),
            exception_fields(&run.simulated.ranks[0])
        );
    }
}

/// Under `TORCH_NCCL_ASYNC_ERROR_HANDLING = 2`, a program that ends before the watchdog's
/// handling of its verdict: the simulator's process, whose end waits for its watchdog, is
/// left with the collective that never completes until the abort after the dump wait; hw
/// aborts at the program's end, without the dump wait, and its `abort` record says so. The
/// records are the simulator's, in its order.
#[test]
fn clean_up_only_aborts_at_the_programs_end_without_the_dump_wait_r27() {
    let text = "[env]\nTORCH_NCCL_ASYNC_ERROR_HANDLING = 2\n[cluster]\nranks = 2\n\
        [groups.world]\neager_init = true\ntimeout_s = 1\n[tensors]\ngrad = \"1MiB\"\n\
        [[op]]\nlabel = \"ar\"\nall_reduce = \"grad\"\nasync_op = true\nwork = \"w\"\n\
        [[op]]\nwait = \"w\"\n[[fault]]\nat = \"ar\"\nranks = [1]\nkind = \"hang\"\n";
    let run = on_both(text, FakeDevice::default());
    let rank0_records = |records: &[WatchdogRecord]| -> Vec<RecordFields> {
        (reenacted_records(records).into_iter())
            .filter(|r| r.0 == 0)
            .collect()
    };
    assert_eq!(
        rank0_records(&run.records),
        rank0_records(&run.simulated.watchdog)
    );
    let abort = (run.records.iter())
        .find(|r| r.event == WatchdogEvent::Abort)
        .unwrap();
    assert!(
        abort.message.ends_with(AT_THE_PROGRAMS_END),
        "{}",
        abort.message
    );
    let found = watchdog_record_ns(&run.records, WatchdogEvent::Timeout);
    assert!(abort.at_ns - found < 1_000_000, "{} {found}", abort.at_ns);
    assert_eq!(run.aborted, [0]);
    assert_eq!(run.rank0.unfinished_iteration, None);
}

/// After a caught `wait(timeout)` under `TORCH_NCCL_ASYNC_ERROR_HANDLING` 0 and 2, the
/// watchdog's `no_handling`, or its `abort` and `abort_returned`, come after the dump wait on
/// both engines (a 40 ms one: `TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC = 10`): during the 200 ms
/// `pause` in the simulator, before the next op (`done`) on hw, which checks before each op.
#[test]
fn a_caught_wait_timeouts_handling_comes_after_the_dump_wait_under_0_and_2_r27() {
    for (mode, handling) in [(0u8, WatchdogEvent::NoHandling), (2, WatchdogEvent::Abort)] {
        let text = include_str!("../../../scenarios/wait_timeout.toml")
            .replace(
                "[cluster]",
                &format!(
                    "[env]\nTORCH_NCCL_ASYNC_ERROR_HANDLING = {mode}\n\
                     TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC = 10\n\n[cluster]"
                ),
            )
            .replace(
                "label = \"done\"",
                "label = \"pause\"\nhost_sleep_us = 200_000\n\n[[op]]\nlabel = \"done\"",
            );
        let run = behind_a_backlog_on_both(&text);
        assert_eq!(
            reenacted_records(&run.records),
            reenacted_records(&run.simulated.watchdog),
            "mode {mode}"
        );
        let found = watchdog_record_ns(&run.records, WatchdogEvent::AsyncError);
        let (hw_ns, sim_ns) = (
            watchdog_record_ns(&run.records, handling),
            watchdog_record_ns(&run.simulated.watchdog, handling),
        );
        assert!(hw_ns >= found + 40_000_000, "mode {mode}: {hw_ns} {found}");
        let starts =
            |rank: &RankTimeline, op: u32| rank.host.iter().find(|c| c.op == op).unwrap().start_ns;
        let (pause, done) = (3, 4);
        assert!(
            starts(&run.simulated.ranks[0], pause) < sim_ns,
            "mode {mode}"
        );
        assert!(
            sim_ns < starts(&run.simulated.ranks[0], done),
            "mode {mode}"
        );
        assert!(starts(&run.rank0, pause) < hw_ns, "mode {mode}");
        assert!(hw_ns <= starts(&run.rank0, done), "mode {mode}");
        let message = &run
            .records
            .iter()
            .find(|r| r.event == handling)
            .unwrap()
            .message;
        assert!(
            !message.ends_with(AT_THE_PROGRAMS_END),
            "mode {mode}: {message}"
        );
    }
}
