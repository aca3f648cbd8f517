//! The fault scenarios of the catalogue (R15, R26–R30): the simulated times of detection,
//! dump wait, abort and exit, checked against the arithmetic of the model's inputs, and their
//! variants under the other `TORCH_NCCL_*` settings.
//!
//! About 2,100 lines: one test per fault path, all set against the same defaults (below);
//! the paths measured on PyTorch 2.11 are in `measured_paths.rs`.
//!
//! Defaults used below (docs/semantics.md "Defaults"): the group timeout is 600 s, the watchdog
//! polls every 100 ms from t = 0, the dump wait is 4 × 15 s = 60 s, the heartbeat timeout 480 s,
//! the monitor polls the store every 1 s. A collective call costs 30 µs of which the last 10 µs come
//! after the kernel launch, so a collective called at t is enqueued at t + 20 µs.

use crate::util::run_with;
use analysis::metrics::{report, Report};
use sim::timeline::{
    ExitStatus, FindingKind, HostBlock, ThreadKind, Timeline, WatchdogEvent, WatchdogRecord,
};

pub(crate) const S: u64 = 1_000_000_000;
pub(crate) const MS: u64 = 1_000_000;
pub(crate) const US: u64 = 1_000;
/// The watchdog's poll interval (R26).
const POLL_NS: u64 = 100 * MS;
/// 4 × TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC (R27).
pub(crate) const DUMP_WAIT_NS: u64 = 60 * S;
pub(crate) const TIMEOUT_NS: u64 = 600 * S;

/// The finding kinds a shipped scenario ends with on purpose (the catalogue accepts exactly
/// these; every other scenario must end without findings).
pub fn expected_findings(name: &str) -> Vec<FindingKind> {
    use FindingKind::*;
    match name {
        // Rank 3's host hangs for good: its heartbeat monitor, which read the others' dump
        // signal, ends its process 480 s later (R28).
        "hang_10min.toml" => vec![HeartbeatAbort, WatchdogTimeout],
        "watchdog_stuck.toml" => vec![HeartbeatAbort, WatchdogTimeout],
        "gpu_backlog_timeout.toml" => vec![WatchdogTimeout],
        "mismatch.toml" => vec![Mismatch, WatchdogTimeout],
        "rank0_crash_init.toml" => vec![StoreTimeout],
        // Rank 1's own error; the others' heartbeat monitors end them (R28).
        "async_error.toml" => vec![AsyncError, HeartbeatAbort],
        // Caught by the program (catch = true), still a finding: the wait raised.
        "caught_timeout.toml" => vec![WaitTimeout],
        // ... and the watchdog then finds the aborted communicator's error under a wait(timeout)'s
        // Work (measured on PyTorch 2.11).
        "wait_timeout.toml" => vec![AsyncError, WaitTimeout],
        "timeout_dump.toml" => vec![WatchdogTimeout],
        // Written to race (R21): the detector must find their races, and only those.
        "races_4_6.toml" | "races_streams.toml" => vec![Race],
        _ => Vec::new(),
    }
}

/// The distinct finding kinds of a run, in the order of [`expected_findings`].
pub fn finding_kinds(timeline: &Timeline) -> Vec<FindingKind> {
    let mut kinds: Vec<FindingKind> = timeline.findings.iter().map(|f| f.kind).collect();
    kinds.sort_by_key(|k| k.as_str());
    kinds.dedup();
    kinds
}

pub(crate) fn records(
    timeline: &Timeline,
    rank: u32,
    event: WatchdogEvent,
) -> Vec<&WatchdogRecord> {
    timeline
        .watchdog
        .iter()
        .filter(|r| (r.rank == rank || r.stands_for.contains(rank)) && r.event == event)
        .collect()
}

/// The time of the only `event` of `rank`.
pub(crate) fn at(timeline: &Timeline, rank: u32, event: WatchdogEvent) -> u64 {
    let found = records(timeline, rank, event);
    assert_eq!(found.len(), 1, "rank {rank} {event:?}: {found:?}");
    found[0].at_ns
}

/// When rank `rank`'s polling wait timed out (R15): the instant of its main thread's two
/// lines, PyTorch's timeout check's, then the wait's own.
pub(crate) fn wait_timed_out_ns(timeline: &Timeline, rank: u32) -> u64 {
    let lines = records(timeline, rank, WatchdogEvent::WaitTimeout);
    let messages: Vec<&str> = lines.iter().map(|r| r.message.as_str()).collect();
    assert_eq!(lines.len(), 2, "rank {rank}: {messages:?}");
    assert!(
        messages[0].contains("Watchdog caught collective operation timeout")
            && messages[1].contains("timed out in blocking wait"),
        "{messages:?}"
    );
    assert_eq!(lines[0].at_ns, lines[1].at_ns);
    lines[0].at_ns
}

/// The first watchdog poll at or after `ns` (polls at k·100 ms from t = 0).
pub(crate) fn next_poll_ns(ns: u64) -> u64 {
    ns.div_ceil(POLL_NS) * POLL_NS
}

/// hang_10min.toml ([c10d] §8.4, docs/semantics.md#sources): ranks 0–2 enqueue at 20 µs; rank 3
/// never joins.
pub fn check_hang_10min(timeline: &Timeline, _report: &Report) {
    let enqueue_ns = 20 * US;
    // R26: the first poll at or after enqueue + 600 s: 600.1 s, within one poll of the timeout.
    let detected_ns = next_poll_ns(enqueue_ns + TIMEOUT_NS);
    assert_eq!(detected_ns, 600_100 * MS);
    for rank in 0..3 {
        let timeout = records(timeline, rank, WatchdogEvent::Timeout);
        assert_eq!(timeout.len(), 1, "rank {rank}");
        assert_eq!(timeout[0].at_ns, detected_ns);
        assert!(timeout[0].at_ns - enqueue_ns >= TIMEOUT_NS);
        assert!(timeout[0].at_ns - enqueue_ns < TIMEOUT_NS + POLL_NS);
        assert_eq!(timeout[0].thread, ThreadKind::Watchdog);
        // 600.1 s − 20 µs = 600099.98 ms, printed truncated as PyTorch does.
        assert!(
            timeout[0].message.starts_with(&format!(
                "[Rank {}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=6553600, NumelOut=6553600, Timeout(ms)=600000) ran for 600099 milliseconds before timing out.",
                timeout[0].rank
            )),
            "{}",
            timeout[0].message
        );
        // The desync report (TORCH_NCCL_DESYNC_DEBUG=1) names the rank that never joined.
        let report = records(timeline, rank, WatchdogEvent::DesyncReport);
        assert_eq!(report.len(), 1);
        assert!(report[0]
            .message
            .contains("rank 3: last enqueued 0, last completed 0"));
        assert!(report[0]
            .message
            .contains("verdict: rank 3 never joined collective 1 (ALLREDUCE, world)"));
        // R27, mode 3 (SkipCleanUp): exit after the 60-s dump wait, with no abort: ≈ 11 min.
        assert_eq!(
            at(timeline, rank, WatchdogEvent::Exit),
            detected_ns + DUMP_WAIT_NS
        );
        assert!(records(timeline, rank, WatchdogEvent::Abort).is_empty());
    }
    // Rank 3's heartbeat monitor polls the store every second: it dumps at 601 s, leaves its
    // loop, sleeps one heartbeat timeout (480 s) and aborts the process (R28; measured on
    // PyTorch 2.11, docs/watchdog.md).
    assert_eq!(at(timeline, 3, WatchdogEvent::Dump), 601 * S);
    assert_eq!(at(timeline, 3, WatchdogEvent::Exit), 1_081 * S);
    // The all_reduce never completed, yet ranks 0-2 called it, launched its kernel (which
    // started and never ended) and waited on its Work: the Timeline keeps that host side as
    // an unfinished collective, never as a completed one. Rank 3 never called it.
    let expanded = timeline.expand();
    for rank in &expanded.ranks {
        assert!(rank.collectives.is_empty() && rank.kernels.is_empty());
        if rank.rank == 3 {
            assert!(rank.unfinished_collectives.is_empty() && rank.unfinished_kernels.is_empty());
            continue;
        }
        let [hung] = rank.unfinished_collectives.as_slice() else {
            panic!("rank {}: {:?}", rank.rank, rank.unfinished_collectives);
        };
        assert_eq!(
            (hung.seq, hung.host_start_ns, hung.host_end_ns),
            (1, 0, 30 * US)
        );
        assert_eq!(hung.input_ready_ns, Some(enqueue_ns));
        assert!(hung.kernel_start_ns.is_some() && hung.kernel_end_ns.is_none());
        assert!(hung.wait.is_some());
        let [kernel] = rank.unfinished_kernels.as_slice() else {
            panic!("rank {}: {:?}", rank.rank, rank.unfinished_kernels);
        };
        assert_eq!(
            (kernel.enqueue_ns, kernel.start_ns),
            (enqueue_ns, hung.kernel_start_ns)
        );
    }
}

/// Each rank's process end, as (status, time).
fn ends(timeline: &Timeline) -> Vec<(ExitStatus, Option<u64>)> {
    timeline
        .ranks
        .iter()
        .map(|rank| {
            let end = rank.end.expect("the simulator records every process's end");
            (end.status, end.at_ns)
        })
        .collect()
}

#[test]
fn every_process_end_is_recorded_with_its_exit_status() {
    // The watchdog's SkipCleanUp takes ranks 0-2 down (SIGABRT) after the dump wait; rank 3,
    // hung before the collective, by its heartbeat monitor 480 s after the dump signal; hung
    // without a monitor, it runs on.
    let aborted = (ExitStatus::Aborted, Some(660_100 * MS));
    assert_eq!(
        ends(&run_with("hang_10min.toml", &[])),
        [
            aborted,
            aborted,
            aborted,
            (ExitStatus::Aborted, Some(1_081 * S))
        ]
    );
    assert_eq!(
        ends(&run_with(
            "hang_10min.toml",
            &["env.TORCH_NCCL_ENABLE_MONITORING=0"]
        ))[3],
        (ExitStatus::Running, None)
    );
    // Under blocking wait the timeout raises in the main thread: exit code 1, at the poll.
    let blocking = run_with("hang_10min.toml", &["env.TORCH_NCCL_BLOCKING_WAIT=1"]);
    for (status, at_ns) in &ends(&blocking)[..3] {
        assert_eq!(*status, ExitStatus::Raised);
        assert!(at_ns.unwrap() >= TIMEOUT_NS);
    }
    // Rank 0 dies before publishing the unique id; the others' store wait raises (R29).
    let crash = ends(&run_with("rank0_crash_init.toml", &[]));
    assert_eq!(crash[0].0, ExitStatus::Killed);
    assert!(crash[1..]
        .iter()
        .all(|(status, _)| *status == ExitStatus::Raised));
    // A program that ran to its end exits cleanly when its last call returns: its last op
    // waited for its GPU work (R31).
    let clean = run_with("straggler.toml", &[]);
    for (rank, (status, at_ns)) in ends(&clean).into_iter().enumerate() {
        assert_eq!(status, ExitStatus::Clean);
        let last = clean.ranks[rank].host.iter().map(|h| h.end_ns).max();
        assert_eq!(at_ns, last);
    }
    // No host call starts after its process ended.
    for timeline in [&blocking, &clean] {
        for rank in &timeline.ranks {
            let end_ns = rank.end.unwrap().at_ns.unwrap_or(u64::MAX);
            assert!(rank.host.iter().all(|h| h.start_ns <= end_ns));
        }
    }
}

/// A blocking wait on a collective rank 1 never joins, on a 1-s timeout, then a kernel.
const CAUGHT_TIMEOUT: &str = "[cluster]\nranks = 2\n[env]\nTORCH_NCCL_BLOCKING_WAIT = 1\n[groups.world]\neager_init = true\ntimeout_s = 1\n[tensors]\nx = \"1MiB\"\n[[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\nasync_op = true\nwork = \"w\"\nranks = [0]\n[[op]]\nlabel = \"wait_w\"\nwait = \"w\"\nranks = [0]\ncatch = true\n[[op]]\nlabel = \"after\"\nkernel = { us = 5 }\n";

fn simulate_text(text: &str) -> Timeline {
    sim::engine::simulate(&sim::scenario::parse("catch.toml", text).unwrap())
}

/// `scenario` simulated folded or not (docs/scale.md), expanded to every rank.
fn simulated(scenario: &sim::scenario::Scenario, fold: bool) -> Timeline {
    let options = sim::engine::Options {
        fold,
        ..Default::default()
    };
    sim::engine::simulate_with(scenario, options).0.expand()
}

#[test]
fn a_caught_wait_timeout_is_recorded_and_the_program_goes_on() {
    let timeline = simulate_text(CAUGHT_TIMEOUT);
    let rank0 = &timeline.ranks[0];
    let caught = caught_at_wait(&timeline);
    assert!(caught.message.contains("timed out in blocking wait"));
    assert!(caught.at_ns >= S, "{}", caught.at_ns);
    // The program went on: the kernel after the wait ran, from the raise on, and the process
    // exited cleanly.
    let after = timeline.ops.iter().position(|o| o.name == "after").unwrap() as u32;
    let call = rank0.host.iter().find(|h| h.op == after).unwrap();
    assert!(call.start_ns >= caught.at_ns);
    assert!(rank0.kernels.iter().any(|k| k.op == after));
    assert_eq!(rank0.end.unwrap().status, ExitStatus::Clean);
    // Uncaught, the same raise ends the process there.
    let uncaught = simulate_text(&CAUGHT_TIMEOUT.replace("catch = true\n", ""));
    let rank0 = &uncaught.ranks[0];
    assert!(rank0.exceptions.is_empty());
    assert_eq!(rank0.end.unwrap().status, ExitStatus::Raised);
    assert!(rank0.host.iter().all(|h| h.op != after));
}

#[test]
fn a_caught_async_error_leaves_the_watchdog_to_end_the_process() {
    // The Work failed at 1 ms; `is_completed()` at 2 ms stores the error in the program's
    // Work, so wait() raises it, the program catches it and goes on; the watchdog still finds
    // the error at its poll and, after the dump wait, takes the process down (SkipCleanUp,
    // R27).
    let text = "[cluster]\nranks = 2\n[groups.world]\neager_init = true\n[tensors]\nx = \"1MiB\"\n[[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\nasync_op = true\nwork = \"w\"\n[[op]]\nhost_sleep_us = 2000\n[[op]]\nis_completed = \"w\"\n[[op]]\nlabel = \"wait_w\"\nwait = \"w\"\ncatch = true\n[[op]]\nlabel = \"after\"\nkernel = { us = 5 }\n[[fault]]\nranks = [0]\nat = \"ar\"\nkind = \"async_error\"\nafter_us = 1000\n";
    let timeline = simulate_text(text);
    let rank0 = &timeline.ranks[0];
    assert_eq!(rank0.exceptions.len(), 1);
    assert!(rank0.exceptions[0].message.contains("ncclRemoteError"));
    let after = timeline.ops.iter().position(|o| o.name == "after").unwrap() as u32;
    assert!(rank0.host.iter().any(|h| h.op == after));
    let end = rank0.end.unwrap();
    assert_eq!(end.status, ExitStatus::Aborted);
    assert!(end.at_ns.unwrap() > 60 * S);
}

/// One rank; iteration 0's `ar2` times out in blocking wait at 0.5 s, caught, and the abort
/// returns at 2 s: from then on the functional `ar` on the aborted communicator raises, caught,
/// and `y` keeps naming iteration 0's result. `FCOL_USE` goes where its use should be.
const CAUGHT_FUNCTIONAL: &str = "repeat = 3\n[cluster]\nranks = 1\n[env]\nTORCH_NCCL_BLOCKING_WAIT = 1\n[groups.world]\neager_init = true\ntimeout_s = 0.5\n[tensors]\nx = \"1MiB\"\ny = \"1MiB\"\nz = \"1MiB\"\nUSE_BEFORE[[op]]\nlabel = \"ar\"\nfunctional_all_reduce = \"x\"\nresult = \"y\"\ncatch = true\nUSE_AFTER[[op]]\nlabel = \"backlog\"\ngpu_sleep_us = 2_000_000\n[[op]]\nlabel = \"ar2\"\nall_reduce = \"z\"\nasync_op = true\nwork = \"w\"\ncatch = true\n[[op]]\nlabel = \"wait_w\"\nwait = \"w\"\ncatch = true\n";

#[test]
fn a_functional_call_that_raised_leaves_its_name_on_a_result_already_waited_r30() {
    // Python's assignment never happens, so `y` is still iteration 0's AsyncCollectiveTensor,
    // completed at its first wait_tensor: a later use waits for nothing (no wait() call, no
    // stream wait), whether the use follows the call or, unused at the end, starts the next
    // iteration.
    let use_y = "[[op]]\nlabel = \"use_y\"\nkernel = { us = 5 }\nreads = [\"y\"]\n";
    for (before, after) in [("", use_y), (use_y, "")] {
        let text = (CAUGHT_FUNCTIONAL.replace("USE_BEFORE", before)).replace("USE_AFTER", after);
        let timeline = simulate_text(&text);
        let rank0 = &timeline.ranks[0];
        let op = |name: &str| timeline.ops.iter().position(|o| o.name == name).unwrap() as u32;
        let (ar, wait_y) = (op("ar"), op("wait_tensor(y)"));
        let raised: Vec<u32> = (rank0.exceptions.iter())
            .filter(|e| e.op == ar)
            .map(|e| e.iteration)
            .collect();
        assert_eq!(raised, [1, 2]);
        // Iteration 0's result is waited once, in the iteration its use comes in.
        let waited_in = if before.is_empty() { 0 } else { 1 };
        let waits: Vec<u32> = (rank0.host.iter())
            .filter(|call| call.op == wait_y)
            .map(|call| call.iteration)
            .collect();
        assert_eq!(waits, [waited_in], "{before}{after}");
        let record = &rank0.collectives[0];
        assert_eq!(record.op, ar);
        let wait = record.wait.expect("waited");
        let call = rank0.host.iter().find(|call| call.op == wait_y).unwrap();
        assert_eq!(wait.host_start_ns, call.start_ns);
        assert_eq!(
            (rank0.stream_waits.iter())
                .filter(|w| w.op == wait_y)
                .count(),
            1
        );
    }
}

#[test]
fn a_functional_call_that_raised_before_any_bound_its_result_leaves_a_plain_tensor_r30() {
    // The communicator is aborted before `ar`'s first call: every call raises, caught, and `y`
    // stays the plain tensor it was, so its use waits for nothing: no wait_tensor call.
    let text = "repeat = 2\n[cluster]\nranks = 1\n[env]\nTORCH_NCCL_BLOCKING_WAIT = 1\n[groups.world]\neager_init = true\ntimeout_s = 0.5\n[tensors]\nx = \"1MiB\"\ny = \"1MiB\"\nz = \"1MiB\"\n[[op]]\nlabel = \"backlog\"\ngpu_sleep_us = 2_000_000\n[[op]]\nlabel = \"ar2\"\nall_reduce = \"z\"\nasync_op = true\nwork = \"w\"\ncatch = true\n[[op]]\nlabel = \"wait_w\"\nwait = \"w\"\ncatch = true\n[[op]]\nlabel = \"ar\"\nfunctional_all_reduce = \"x\"\nresult = \"y\"\ncatch = true\n[[op]]\nlabel = \"use_y\"\nkernel = { us = 5 }\nreads = [\"y\"]\n";
    let timeline = simulate_text(text);
    let rank0 = &timeline.ranks[0];
    let op = |name: &str| timeline.ops.iter().position(|o| o.name == name).unwrap() as u32;
    let raised: Vec<u32> = (rank0.exceptions.iter())
        .filter(|e| e.op == op("ar"))
        .map(|e| e.iteration)
        .collect();
    assert_eq!(raised, [0, 1]);
    let calls = |name: &str| rank0.host.iter().filter(|c| c.op == op(name)).count();
    assert_eq!((calls("wait_tensor(y)"), calls("use_y")), (0, 2));
    let wait_y = op("wait_tensor(y)");
    assert!(!rank0.stream_waits.iter().any(|w| w.op == wait_y));
}

#[test]
fn a_work_name_no_call_bound_raises_name_error_and_ends_the_process() {
    // `w2 = dist.all_reduce(x, async_op=True)` inside try/except on a communicator the blocking
    // wait's timeout aborted: the call raises before it returns, so `w2` is never bound, and
    // the program's next use of it raises Python's NameError, uncaught. The simulator used to
    // panic (unreachable!: "uses Work before rank 0 created it").
    let text = std::fs::read_to_string(crate::util::scenarios_dir().join("caught_timeout.toml"))
        .unwrap()
        .replace(
            "all_reduce = \"x\"\ncatch = true\n",
            "all_reduce = \"x\"\nasync_op = true\nwork = \"w2\"\ncatch = true\n",
        );
    for (use_key, call) in [
        ("wait", "wait"),
        ("is_completed", "is_completed"),
        ("get_future", "get_future"),
    ] {
        let text = text.replace(
            "[[op]]\nlabel = \"after\"",
            &format!("[[op]]\nlabel = \"use_w2\"\n{use_key} = \"w2\"\n\n[[op]]\nlabel = \"after\""),
        );
        let timeline = sim::engine::simulate(&sim::scenario::parse("unbound.toml", &text).unwrap());
        let rank0 = &timeline.ranks[0];
        let op = |name: &str| timeline.ops.iter().position(|o| o.name == name).unwrap() as u32;
        let retry = rank0
            .exceptions
            .iter()
            .find(|e| e.op == op("retry"))
            .unwrap();
        let end = rank0.end.unwrap();
        assert_eq!(end.status, ExitStatus::Raised, "{call}");
        assert_eq!(end.at_ns, Some(retry.at_ns), "{call}");
        let found: Vec<_> = (timeline.findings.iter())
            .filter(|f| f.kind == FindingKind::ProgramError)
            .collect();
        assert_eq!(found.len(), 1, "{call}: {:?}", timeline.findings);
        assert_eq!(found[0].op, Some(op("use_w2")));
        assert_eq!(
            found[0].message,
            "[Rank 0] NameError: name 'w2' is not defined; use_w2 (line 59) raises it in the main \
             thread (every call that would have bound the Work raised first) and, uncaught, ends \
             the process",
            "{call}"
        );
        assert!(rank0.host.iter().all(|h| h.op != op("after")), "{call}");
        let use_w2 = op("use_w2");
        assert!(rank0.queries.iter().all(|q| q.op != use_w2), "{call}");
        assert!(rank0.stream_waits.iter().all(|w| w.op != use_w2), "{call}");
    }
}

#[test]
fn catch_does_not_apply_to_a_kernel_and_hw_does_not_refuse_it() {
    let on_kernel = CAUGHT_TIMEOUT.replace(
        "kernel = { us = 5 }\n",
        "kernel = { us = 5 }\ncatch = true\n",
    );
    let error = sim::scenario::parse("catch.toml", &on_kernel).unwrap_err();
    assert!(
        error.message.contains("catch does not apply to kernel"),
        "{}",
        error.message
    );
    // hw enacts a caught raise as the simulator does: its checks before the GPU pass the
    // scenario, launched as rank 0 of its 2, which then needs a GPU (exit 2 here, where none
    // is).
    let path = std::env::temp_dir().join(format!("c10dsim-catch-{}.toml", std::process::id()));
    std::fs::write(&path, CAUGHT_TIMEOUT).unwrap();
    let ran = std::process::Command::new(env!("CARGO_BIN_EXE_c10dsim"))
        .arg("hw")
        .arg(&path)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .envs([("RANK", "0"), ("WORLD_SIZE", "2"), ("LOCAL_RANK", "0")])
        .output()
        .expect("the binary runs");
    let _ = std::fs::remove_file(&path);
    let text = crate::util::stderr(&ran);
    assert!(!text.contains("catch"), "{text}");
    assert!(
        ran.status.success()
            || ["dynamic loader", "no usable NVIDIA GPU"]
                .iter()
                .any(|probed| text.contains(probed)),
        "the checks before the GPU refused it: {text}"
    );
}

#[test]
fn tear_down_aborts_the_communicator_before_the_process_exits() {
    let timeline = run_with(
        "hang_10min.toml",
        &["env.TORCH_NCCL_ASYNC_ERROR_HANDLING=1"],
    );
    for rank in 0..3 {
        let abort = at(&timeline, rank, WatchdogEvent::Abort);
        let exit = at(&timeline, rank, WatchdogEvent::Exit);
        // Both after the 60-s dump wait past the 600.1-s detection; abort first.
        assert_eq!(abort, 660_100 * MS);
        assert_eq!(exit, abort);
        let order: Vec<WatchdogEvent> = timeline
            .watchdog
            .iter()
            .filter(|r| (r.rank == rank || r.stands_for.contains(rank)) && r.at_ns == abort)
            .map(|r| r.event)
            .collect();
        assert_eq!(order, [WatchdogEvent::Abort, WatchdogEvent::Exit]);
    }
}

#[test]
fn clean_up_only_aborts_and_the_process_lives_on() {
    let timeline = run_with(
        "hang_10min.toml",
        &["env.TORCH_NCCL_ASYNC_ERROR_HANDLING=2"],
    );
    for rank in 0..3u32 {
        assert_eq!(at(&timeline, rank, WatchdogEvent::Abort), 660_100 * MS);
        assert!(records(&timeline, rank, WatchdogEvent::Exit).is_empty());
        // The abort ends the spinning kernel, so the stream moves on and `.item()` returns
        // 15 µs (item_us) later: the program finishes alive.
        let last_call = timeline.ranks[rank as usize].host.last().unwrap();
        assert_eq!(last_call.end_ns, 660_100 * MS + 15 * US);
    }
}

#[test]
fn no_handling_leaves_the_hosts_blocked_and_the_run_ends_with_a_deadlock() {
    // With the heartbeat monitor on, each monitor read the dump signal at 601 s and ends its
    // process 480 s later (R28, measured on PyTorch 2.11 under NoHandling).
    let monitored = run_with(
        "hang_10min.toml",
        &["env.TORCH_NCCL_ASYNC_ERROR_HANDLING=0"],
    );
    for rank in 0..4 {
        assert_eq!(at(&monitored, rank, WatchdogEvent::Exit), 1_081 * S);
    }
    // Without it, nothing ends them.
    let timeline = run_with(
        "hang_10min.toml",
        &[
            "env.TORCH_NCCL_ASYNC_ERROR_HANDLING=0",
            "env.TORCH_NCCL_ENABLE_MONITORING=0",
        ],
    );
    for rank in 0..3 {
        assert_eq!(at(&timeline, rank, WatchdogEvent::NoHandling), 660_100 * MS);
        assert!(records(&timeline, rank, WatchdogEvent::Exit).is_empty());
        assert!(records(&timeline, rank, WatchdogEvent::Abort).is_empty());
    }
    let blocked = timeline
        .findings
        .iter()
        .filter(|f| f.kind == FindingKind::Deadlock && f.message.contains("is blocked in loss"))
        .map(|f| f.stands_for.count().max(1))
        .sum::<u64>();
    assert_eq!(blocked, 3, "{:?}", timeline.findings);
}

#[test]
fn blocking_wait_raises_in_the_main_thread_without_a_watchdog() {
    let timeline = run_with("hang_10min.toml", &["env.TORCH_NCCL_BLOCKING_WAIT=1"]);
    // R15: no watchdog thread; wait() (called at 30 µs, 4 µs) polls at 34 µs + k·1 ms and
    // raises at the first poll past enqueue + 600 s = 600.000020 s: 600.000034 s.
    assert!(timeline
        .watchdog
        .iter()
        .all(|r| r.thread == ThreadKind::Main));
    for rank in 0..3 {
        assert_eq!(wait_timed_out_ns(&timeline, rank), 600 * S + 34 * US);
        assert_eq!(at(&timeline, rank, WatchdogEvent::Exit), 600 * S + 34 * US);
    }
    assert_eq!(
        finding_kinds(&timeline),
        [FindingKind::Deadlock, FindingKind::WaitTimeout]
    );
}

/// watchdog_stuck.toml (R28): rank 0's watchdog hangs at its poll of 0.1 s.
pub fn check_watchdog_stuck(timeline: &Timeline, _report: &Report) {
    let stuck_ns = 100 * MS;
    let heartbeat_ns = 480 * S;
    let fault = records(timeline, 0, WatchdogEvent::Fault);
    assert!(fault
        .iter()
        .any(|r| r.thread == ThreadKind::Watchdog && r.at_ns == stuck_ns));
    // The monitor reads the other ranks' dump signal at 601 s, before its read at 960 s would
    // have found the heartbeat unchanged: it leaves its loop there, sleeps one heartbeat
    // timeout and terminates the process (R28, measured on PyTorch 2.11).
    assert!(records(timeline, 0, WatchdogEvent::HeartbeatTimeout).is_empty());
    assert_eq!(at(timeline, 0, WatchdogEvent::Exit), 601 * S + heartbeat_ns);
    // A stuck watchdog reports nothing itself.
    assert!(records(timeline, 0, WatchdogEvent::Timeout).is_empty());
    // Ranks 1 and 2 take the normal path; their dump signal reaches rank 0's monitor at 601 s.
    for rank in 1..3 {
        assert_eq!(at(timeline, rank, WatchdogEvent::Timeout), 600_100 * MS);
        assert_eq!(at(timeline, rank, WatchdogEvent::Exit), 660_100 * MS);
    }
    assert_eq!(at(timeline, 0, WatchdogEvent::Dump), 601 * S);
}

/// gpu_backlog_timeout.toml (R26): a 605-s GPU sleep before the all_reduce on every rank.
pub fn check_gpu_backlog_timeout(timeline: &Timeline, _report: &Report) {
    // Enqueued at 25 µs (sleep launch 5 µs, then 20 µs of the call): detected at 600.1 s.
    let enqueue_ns = 25 * US;
    let detected_ns = next_poll_ns(enqueue_ns + TIMEOUT_NS);
    for (rank, ranked) in timeline.ranks.iter().enumerate() {
        let rank = rank as u32;
        assert_eq!(at(timeline, rank, WatchdogEvent::Timeout), detected_ns);
        let collective = &ranked.collectives[0];
        // The kernel starts after the backlog (605 s + 8 µs of launches and latency), after
        // the timeout: the clock runs from enqueue, not from kernel start.
        assert!(collective.kernel_start_ns >= 605 * S);
        assert!(collective.kernel_start_ns > detected_ns);
        // Nothing was wrong: it completes, and the process still exits after the dump wait.
        let exit_ns = at(timeline, rank, WatchdogEvent::Exit);
        assert!(collective.end_ns < exit_ns);
        assert_eq!(exit_ns, detected_ns + DUMP_WAIT_NS);
        let report = records(timeline, rank, WatchdogEvent::DesyncReport);
        assert!(report[0]
            .message
            .contains("have not started their kernels: their streams are still busy"));
    }
}

/// mismatch.toml (R16): rank 1 issues an all_gather where rank 0 issues an all_reduce.
pub fn check_mismatch(timeline: &Timeline, _report: &Report) {
    let mismatch: Vec<_> = timeline
        .findings
        .iter()
        .filter(|f| f.kind == FindingKind::Mismatch)
        .collect();
    assert_eq!(mismatch.len(), 1);
    assert!(mismatch[0].message.contains(
        "rank 0 issued ALLREDUCE of 4MiB (ar, line 27), rank 1 issued _ALLGATHER_BASE of 4MiB"
    ));
    // Each rank's timeout line shows the Work it issued: rank 1's all_gather of 4 MiB gathers
    // 2 × 524288 f32 elements.
    let rank1 = records(timeline, 1, WatchdogEvent::Timeout);
    assert!(rank1[0]
        .message
        .contains("OpType=_ALLGATHER_BASE, NumelIn=524288, NumelOut=1048576"));
    for rank in 0..2 {
        assert_eq!(at(timeline, rank, WatchdogEvent::Timeout), 600_100 * MS);
        let report = records(timeline, rank, WatchdogEvent::DesyncReport);
        assert!(report[0]
            .message
            .contains("verdict: ranks disagree on the op at 1 (world)"));
        assert_eq!(at(timeline, rank, WatchdogEvent::Exit), 660_100 * MS);
    }
}

#[test]
fn a_mismatch_with_no_error_handling_still_ends_the_run() {
    // The heartbeat monitors end the processes 480 s after the dump signal (R28).
    let timeline = run_with("mismatch.toml", &["env.TORCH_NCCL_ASYNC_ERROR_HANDLING=0"]);
    assert_eq!(
        finding_kinds(&timeline),
        [
            FindingKind::HeartbeatAbort,
            FindingKind::Mismatch,
            FindingKind::WatchdogTimeout
        ]
    );
    // Without the monitor nothing ends them: the deadlock finding names the collective.
    let timeline = run_with(
        "mismatch.toml",
        &[
            "env.TORCH_NCCL_ASYNC_ERROR_HANDLING=0",
            "env.TORCH_NCCL_ENABLE_MONITORING=0",
        ],
    );
    assert!(timeline
        .findings
        .iter()
        .any(|f| f.kind == FindingKind::Deadlock && f.message.contains("never completes")));
}

/// rank0_crash_init.toml (R29): rank 0 dies before its lazy communicator init.
pub fn check_rank0_crash_init(timeline: &Timeline, _report: &Report) {
    assert_eq!(at(timeline, 0, WatchdogEvent::Exit), 0);
    for rank in 1..4 {
        // store.get from t = 0 until the store timeout (the group's 600 s).
        let raised = records(timeline, rank, WatchdogEvent::StoreTimeout);
        assert_eq!(raised.len(), 1);
        assert_eq!(raised[0].at_ns, TIMEOUT_NS);
        assert_eq!(raised[0].thread, ThreadKind::Main);
        assert!(raised[0]
            .message
            .contains("possible application crash on rank 0"));
        assert_eq!(at(timeline, rank, WatchdogEvent::Exit), TIMEOUT_NS);
    }
}

const STORE_TIMEOUT: &str = "[cluster]\nranks = 2\n[groups.world]\ntimeout_s = 10\n[tensors]\nx = \"1MiB\"\n[[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\ncatch = true\n[[op]]\nlabel = \"again\"\nall_reduce = \"x\"\ncatch = true\n[[op]]\nlabel = \"after\"\nkernel = { us = 5 }\n[[fault]]\nranks = [0]\nat = \"ar\"\nkind = \"die\"\n";

#[test]
fn a_store_timeout_is_pytorchs_dist_backend_error_and_catch_true_catches_it_r29() {
    // PyTorch wraps TCPStore's DistStoreError into a DistBackendError, which `catch = true`
    // (`except DistBackendError:`) catches. The simulator said "DistStoreError" and ended the
    // process whatever `catch` said.
    let timeline = simulate_text(STORE_TIMEOUT);
    let rank1 = &timeline.ranks[1];
    let keys: Vec<_> = (rank1.exceptions.iter())
        .map(|e| (e.op, e.at_ns, e.exception.as_str()))
        .collect();
    // The communicator was never created: `again` creates it anew, on the store's next key,
    // and times out again one group timeout later.
    assert_eq!(
        keys,
        [
            (0, 10 * S, "DistBackendError"),
            (1, 20 * S, "DistBackendError")
        ]
    );
    assert!(
        rank1.exceptions[0].message.contains(
            "DistBackendError: [1] is setting up NCCL communicator and retrieving ncclUniqueId from [0] via c10d key-value store by key '0', but store->get('0') got error: wait timeout after 10000ms"
        ),
        "{}",
        rank1.exceptions[0].message
    );
    assert!(rank1.exceptions[1].message.contains("store->get('1')"));
    // Caught or not, the store timed out: a finding each time, as for a wait's timeout.
    let findings: Vec<_> = timeline.findings.iter().map(|f| (f.kind, f.op)).collect();
    assert_eq!(
        findings,
        [
            (FindingKind::StoreTimeout, Some(0)),
            (FindingKind::StoreTimeout, Some(1))
        ]
    );
    // Each call ends at its raise; the program goes on and the process exits cleanly.
    let calls: Vec<_> = rank1.host.iter().map(|h| (h.op, h.end_ns)).collect();
    assert_eq!(calls[..2], [(0, 10 * S), (1, 20 * S)]);
    assert!(rank1.kernels.iter().any(|k| k.op == 2));
    assert!(rank1.collectives.is_empty());
    assert_eq!(rank1.end.unwrap().status, ExitStatus::Clean);
    // Uncaught, the first raise ends the process.
    let uncaught = simulate_text(&STORE_TIMEOUT.replace("catch = true\n", ""));
    let rank1 = &uncaught.ranks[1];
    assert!(rank1.exceptions.is_empty());
    assert_eq!(rank1.end.unwrap().status, ExitStatus::Raised);
    assert_eq!(rank1.end.unwrap().at_ns, Some(10 * S));
}

#[test]
fn a_caught_non_blocking_init_timeout_is_pytorchs_nccl_timeout_r8() {
    // init_process_group(device_id=…) under TORCH_NCCL_USE_COMM_NONBLOCKING: the first use
    // waits for the communicator, and raises NCCLUtils' DistBackendError after 5 s. The root
    // waits so, its peer dead (a non-root rank whose root never came raises the store's
    // timeout instead, R29).
    let text = STORE_TIMEOUT
        .replace(
            "[groups.world]\n",
            "[env]\nTORCH_NCCL_USE_COMM_NONBLOCKING = 1\nTORCH_NCCL_NONBLOCKING_TIMEOUT = 5\n[groups.world]\n",
        )
        .replace(
            "[[op]]\nlabel = \"ar\"",
            "[[op]]\ninit_process_group = true\ndevice_id = true\n[[op]]\nlabel = \"ar\"",
        )
        .replace("ranks = [0]\nat = \"ar\"", "ranks = [1]\nat = \"ar\"");
    let timeline = simulate_text(&text);
    let rank0 = &timeline.ranks[0];
    assert_eq!(rank0.exceptions.len(), 2, "{:?}", rank0.exceptions);
    assert!(
        rank0.exceptions[0]
            .message
            .contains("DistBackendError: NCCL timeout in: "),
        "{}",
        rank0.exceptions[0].message
    );
    assert_eq!(rank0.end.unwrap().status, ExitStatus::Clean);
}

/// async_error.toml (R26, R27): rank 1's network fails 5 s after its enqueue at 20 µs.
pub fn check_async_error(timeline: &Timeline, _report: &Report) {
    let seen_ns = next_poll_ns(20 * US + 5 * S);
    assert_eq!(seen_ns, 5_100 * MS);
    assert_eq!(at(timeline, 1, WatchdogEvent::AsyncError), seen_ns);
    assert_eq!(at(timeline, 1, WatchdogEvent::Exit), seen_ns + DUMP_WAIT_NS);
    for rank in [0, 2, 3] {
        // TORCH_NCCL_PROPAGATE_ERROR: the next poll after the error reached the store logs
        // it, and that is all; the heartbeat monitor reads rank 1's dump signal at 6 s and
        // aborts the process 480 s later (R28).
        let remote = records(timeline, rank, WatchdogEvent::RemoteError);
        assert_eq!(remote.len(), 1);
        assert_eq!(remote[0].at_ns, seen_ns + POLL_NS);
        assert_eq!(
            remote[0].message,
            "[Rank 0] remote error detected from rank: 1"
        );
        assert_eq!(at(timeline, rank, WatchdogEvent::Exit), 486 * S);
    }
}

#[test]
fn propagation_only_logs_the_remote_error_on_the_other_ranks_r27() {
    // checkAndSetRemoteError() sets the group's error to REMOTE_ERROR and logs one line;
    // no Work fails by it, no dump wait, no abort: every rank ends as it does without
    // propagation, and the records differ by that line alone.
    let propagated = run_with("async_error.toml", &["env.TORCH_NCCL_PROPAGATE_ERROR=1"]);
    let local = run_with("async_error.toml", &["env.TORCH_NCCL_PROPAGATE_ERROR=0"]);
    for rank in 0..4 {
        let end = |timeline: &Timeline| timeline.ranks[rank].end;
        assert_eq!(end(&propagated), end(&local), "rank {rank}");
        assert!(end(&local).is_some(), "rank {rank}");
    }
    assert_eq!(propagated.findings, local.findings);
    let without_remote: Vec<&WatchdogRecord> = (propagated.watchdog.iter())
        .filter(|r| r.event != WatchdogEvent::RemoteError)
        .collect();
    assert_eq!(without_remote, local.watchdog.iter().collect::<Vec<_>>());
    let remote: Vec<(u64, &str)> = (propagated.watchdog.iter())
        .filter(|r| r.event == WatchdogEvent::RemoteError)
        .map(|r| (r.at_ns, r.message.as_str()))
        .collect();
    assert_eq!(
        remote,
        [(5_200 * MS, "[Rank 0] remote error detected from rank: 1")]
    );
}

#[test]
fn without_propagation_the_other_ranks_wait_for_their_own_timeout() {
    // Without the heartbeat monitor (which would end them 480 s after rank 1's dump signal,
    // R28), the other ranks wait for their own timeout.
    let timeline = run_with(
        "async_error.toml",
        &[
            "env.TORCH_NCCL_PROPAGATE_ERROR=0",
            "env.TORCH_NCCL_ENABLE_MONITORING=0",
        ],
    );
    assert_eq!(at(&timeline, 1, WatchdogEvent::AsyncError), 5_100 * MS);
    for rank in [0, 2, 3] {
        assert_eq!(at(&timeline, rank, WatchdogEvent::Timeout), 600_100 * MS);
    }
    // With it, they are gone before: their monitors read the signal at 6 s.
    let timeline = run_with("async_error.toml", &["env.TORCH_NCCL_PROPAGATE_ERROR=0"]);
    for rank in [0, 2, 3] {
        assert!(records(&timeline, rank, WatchdogEvent::Timeout).is_empty());
        assert_eq!(at(&timeline, rank, WatchdogEvent::Exit), 486 * S);
    }
}

/// functional_collective.toml (R30): wait_tensor(y) is issued at the first read of y; the
/// GEMM that writes the input x after the call does not race (the call cloned x).
pub fn check_functional_collective(timeline: &Timeline, report: &Report) {
    assert!(
        timeline.ranks.iter().all(|rank| rank.races.is_empty()),
        "{:?}",
        timeline.findings
    );
    let names: Vec<&str> = timeline.ops.iter().map(|o| o.name.as_str()).collect();
    assert_eq!(
        names,
        ["ar", "gemm", "wait_tensor(y)", "use_y", "stream_sync#4"]
    );
    let wait_op = 2;
    // 8 ranks, 25 MiB over NVLink: 14·5 µs + 2·7/8·26214400 B / 450 GB/s = 171.945 µs.
    let ar = report.collectives.iter().find(|c| c.op == "ar").unwrap();
    assert!((ar.kernel_us.median - 171.945).abs() < 1e-3);
    for rank in &timeline.ranks {
        for record in &rank.collectives {
            let wait = record.wait.expect("wait_tensor waited on the Work");
            assert_eq!(wait.op, wait_op);
            let kernel = |op: u32| {
                rank.kernels
                    .iter()
                    .find(|k| k.op == op && k.iteration == record.iteration)
                    .unwrap()
            };
            let gemm = kernel(1);
            let use_y = kernel(3);
            // The wait is issued after the GEMM's launch, so the all_reduce runs under it and
            // ends first; the reader starts only once the default stream passed the wait.
            assert!(wait.host_start_ns >= gemm.enqueue_ns);
            assert!(record.end_ns < gemm.end_ns);
            assert!(use_y.start_ns >= wait.released_ns);
            assert!(wait.released_ns >= record.end_ns);
        }
    }
    // Each call makes a new y (x's clone) while the y it replaces lives until the call
    // returns: x and two results, each 25 MiB in a 26 MiB segment (R17, R30).
    for rank in &timeline.ranks {
        assert_eq!(rank.memory.peak_allocated_bytes, 3 * (26 << 20));
        assert_eq!(rank.memory.peak_reserved_bytes, 3 * (26 << 20));
    }
}

#[test]
fn a_functional_collective_reads_its_input_on_the_current_stream_and_writes_its_result_on_nccls() {
    // R30: writing x right after the call is ordered after the clone; writing y before its
    // wait_tensor races the all_reduce still writing y on the NCCL stream (R21).
    let text = "[cluster]\nranks = 2\n[tensors]\nx = \"1MiB\"\ny = \"1MiB\"\n[[op]]\nlabel = \"ar\"\nfunctional_all_reduce = \"x\"\nresult = \"y\"\n[[op]]\nlabel = \"write_x\"\nkernel = { us = 5 }\nwrites = [\"x\"]\n[[op]]\nlabel = \"write_y\"\nkernel = { us = 5 }\nwrites = [\"y\"]\n[[op]]\nlabel = \"read_y\"\nkernel = { us = 5 }\nreads = [\"y\"]\n";
    let scenario = sim::scenario::parse("fcol.toml", text).unwrap();
    let timeline = sim::engine::simulate(&scenario);
    for rank in &timeline.ranks {
        let races: Vec<(&str, &str, &str)> = rank
            .races
            .iter()
            .map(|race| {
                (
                    race.tensor.as_str(),
                    timeline.ops[race.later_op as usize].name.as_str(),
                    timeline.ops[race.earlier_op as usize].name.as_str(),
                )
            })
            .collect();
        assert_eq!(races, [("y", "write_y", "ar")]);
    }
    // The fix names the result's use, not a wait() on a Work the program has no name for.
    let message = &timeline.findings[0].message;
    assert!(
        message.ends_with("to order them, use y at write_y or before it on stream default (reads = [\"y\"], an item or a collective of it): a functional result's first use issues its wait_tensor there (R30)"),
        "{message}"
    );
}

#[test]
fn y_equals_fcol_all_reduce_of_y_clones_the_old_y_so_it_races_a_side_stream_writing_it() {
    // R30, R21: `y = fcol.all_reduce(y)` clones the y the name held before the call, on the
    // current stream; a side stream writing that y unordered races the clone's read, as it
    // does when the result has a name of its own.
    let text = "[cluster]\nranks = 2\n[groups.world]\neager_init = true\n[streams]\nside = {}\n[tensors]\ny = \"1MiB\"\n[[op]]\nlabel = \"side_write\"\nstream = \"side\"\nkernel = { us = 500 }\nwrites = [\"y\"]\n[[op]]\nlabel = \"ar\"\nfunctional_all_reduce = \"y\"\nresult = \"y\"\n[[op]]\nlabel = \"use\"\nkernel = { us = 5 }\nreads = [\"y\"]\n";
    let scenario = sim::scenario::parse("fcol_self.toml", text).unwrap();
    let timeline = sim::engine::simulate(&scenario);
    for rank in &timeline.ranks {
        let races: Vec<(&str, bool, &str, bool)> = (rank.races.iter())
            .map(|race| {
                (
                    timeline.ops[race.earlier_op as usize].name.as_str(),
                    race.earlier_write,
                    timeline.ops[race.later_op as usize].name.as_str(),
                    race.later_write,
                )
            })
            .collect();
        assert_eq!(races, [("side_write", true, "ar", false)]);
    }
    // The clone reads after the allocation of its result: when that allocation releases the
    // cache, the device synchronise it makes orders the side stream's write before the read.
    let text = "[cluster]\nranks = 2\n[groups.world]\neager_init = true\n[memory]\ncapacity_gib = 1\n[streams]\nside = {}\n[tensors]\nx = \"400MiB\"\ny = \"400MiB\"\ntmp = \"300MiB\"\n[[op]]\nalloc = \"tmp\"\n[[op]]\nfree = \"tmp\"\n[[op]]\nlabel = \"side_write\"\nstream = \"side\"\nkernel = { us = 500 }\nwrites = [\"x\"]\n[[op]]\nlabel = \"ar\"\nfunctional_all_reduce = \"x\"\nresult = \"y\"\n";
    let timeline = sim::engine::simulate(&sim::scenario::parse("fcol_release.toml", text).unwrap());
    for rank in &timeline.ranks {
        assert_eq!(rank.cache_releases.len(), 1);
        assert!(rank.races.is_empty(), "{:?}", rank.races);
    }
}

#[test]
fn a_result_the_previous_iteration_left_unused_is_waited_at_the_next_iteration_s_first_use() {
    // R30 across iterations: x, the result of the last call, is the input of the first; the
    // next iteration's first call uses it, so it waits there and reads x after its all_reduce
    // (no race), and the first iteration, with no such result, waits on nothing there.
    let text = "repeat = 3\n[cluster]\nranks = 2\n[tensors]\nx = \"1MiB\"\ny = \"1MiB\"\n[[op]]\nlabel = \"ar_x\"\nfunctional_all_reduce = \"x\"\nresult = \"y\"\n[[op]]\nlabel = \"use_y\"\nkernel = { us = 5 }\nreads = [\"y\"]\n[[op]]\nlabel = \"ar_y\"\nfunctional_all_reduce = \"y\"\nresult = \"x\"\n";
    let scenario = sim::scenario::parse("fcol_loop.toml", text).unwrap();
    let timeline = sim::engine::simulate(&scenario);
    assert!(timeline.findings.is_empty(), "{:?}", timeline.findings);
    let names: Vec<&str> = timeline.ops.iter().map(|o| o.name.as_str()).collect();
    assert_eq!(
        names,
        ["wait_tensor(x)", "ar_x", "wait_tensor(y)", "use_y", "ar_y"]
    );
    for rank in &timeline.ranks {
        let wait_iterations: Vec<u32> = (rank.host.iter())
            .filter(|call| call.op == 0)
            .map(|call| call.iteration)
            .collect();
        assert_eq!(wait_iterations, [1, 2]);
        // ar_y (op 4) of iterations 0 and 1 is waited by the next iteration's op 0; the last
        // one's result is never used.
        let waited: Vec<(u32, Option<u32>)> = (rank.collectives.iter())
            .filter(|record| record.op == 4)
            .map(|record| (record.iteration, record.wait.map(|wait| wait.op)))
            .collect();
        assert_eq!(waited, [(0, Some(0)), (1, Some(0)), (2, None)]);
    }
}

#[test]
fn the_watchdog_story_is_in_the_text_output_and_on_its_own_trace_threads() {
    let timeline = run_with("hang_10min.toml", &[]);
    let text = analysis::text::render_report(&report(&timeline));
    // Ranks 0-2 time out alike: one line names them (analysis::text groups ranks).
    assert!(text.contains(
        "     600.100 s  pt_nccl_watchdg  [Ranks 0-2 (3 ranks)] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE"
    ), "{text}");
    assert!(text.contains("     601.000 s  pt_nccl_heartbt  [Rank 3] Received a dump signal"));
    let mut bytes = Vec::new();
    analysis::trace::write_chrome_trace(&timeline, &mut bytes).unwrap();
    let trace: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    let events = trace["traceEvents"].as_array().unwrap();
    // Rank 0 (pid 1)'s watchdog of group 0 is thread 1000; its timeout is an instant at 600.1 s.
    assert!(events.iter().any(|e| e["ph"] == "M"
        && e["pid"] == 1
        && e["tid"] == 1000
        && e["args"]["name"] == "pt_nccl_watchdg (group world)"));
    assert!(events.iter().any(|e| e["ph"] == "i"
        && e["pid"] == 1
        && e["tid"] == 1000
        && e["name"] == "timeout"
        && e["ts"] == 600_100_000.0));
    // The 60-s dump wait is a slice on the watchdog's thread, from 600.1 s to 660.1 s.
    assert!(events.iter().any(|e| e["ph"] == "X"
        && e["pid"] == 1
        && e["tid"] == 1000
        && e["ts"] == 600_100_000.0
        && e["dur"] == 60_000_000.0));
    // Rank 3 (pid 4)'s heartbeat monitor is thread 1001.
    assert!(events
        .iter()
        .any(|e| e["pid"] == 4 && e["tid"] == 1001 && e["name"] == "dump"));
    // The watchdog's timeout finding sits at the watchdog's timeout, not at 0.
    assert!(events.iter().any(|e| e["ph"] == "i"
        && e["cat"] == "finding"
        && e["name"] == "watchdog_timeout"
        && e["ts"] == 600_100_000.0));
    // Ranks 1 and 2 share rank 0's records (one per class of ranks that behave alike): each
    // of their processes shows the same steps and finding at the same times as rank 0's.
    let steps_of = |pid: u64| -> Vec<(String, String)> {
        let mut steps: Vec<(String, String)> = (events.iter())
            .filter(|e| e["pid"] == pid && (e["cat"] == "watchdog" || e["cat"] == "finding"))
            .map(|e| (e["name"].to_string(), e["ts"].to_string()))
            .collect();
        steps.sort();
        steps
    };
    assert!(steps_of(1).len() >= 4, "{:?}", steps_of(1));
    assert_eq!(steps_of(2), steps_of(1));
    assert_eq!(steps_of(3), steps_of(1));
}

#[test]
fn a_time_cap_below_the_timeout_stops_the_hang_with_a_clear_finding() {
    // The watchdog's deadline poll (600.1 s) lies past a 300-s cap: the run stops at the cap.
    let timeline = run_with("hang_10min.toml", &["max_sim_time_s=300"]);
    assert_eq!(finding_kinds(&timeline), [FindingKind::TimeCap]);
    assert!(timeline.findings[0].message.contains("cap of 300.000 s"));
    assert!(timeline
        .watchdog
        .iter()
        .all(|r| r.event == WatchdogEvent::Fault));
}

#[test]
fn a_blocked_host_finding_made_once_for_a_class_does_not_name_its_lowest_rank_alone() {
    // Ranks 0-2 block alike in `.item()`: one deadlock finding stands for them. It read "ranks
    // 0-2 (3 ranks): host of rank 0 is blocked in loss", rank 0's number for all three; it
    // opens with `[Rank r]` now, which the report turns into the class's ranks. Ranks that do
    // not fold (drawn jitter) but block alike are one line the same way.
    let modes = [
        "env.TORCH_NCCL_ASYNC_ERROR_HANDLING=0",
        "env.TORCH_NCCL_DUMP_ON_TIMEOUT=0",
    ];
    let jitter = [&modes[..], &["cluster.kernel_jitter_pct=1"]].concat();
    for overrides in [&modes[..], &jitter[..]] {
        let text = analysis::text::render_report(&report(&run_with("hang_10min.toml", overrides)));
        assert!(
            text.contains("[Deadlock] [Ranks 0-2 (3 ranks)] the host is blocked in loss ("),
            "{text}"
        );
        assert!(
            text.contains("[Deadlock] [Rank 3] the host is blocked in ar"),
            "{text}"
        );
        assert!(!text.contains("host of rank"), "{text}");
    }
}

#[test]
fn without_the_heartbeat_monitor_s_abort_a_stuck_watchdog_leaves_a_deadlock() {
    // TORCH_NCCL_ENABLE_MONITORING=0 takes away only the monitor's abort (R28): rank 0's
    // monitor still reads the others' dump signal at 601 s, leaves its loop, dumps, sleeps one
    // heartbeat timeout and then only logs the termination it would have done. Its host stays
    // blocked in `.item()` and the run ends with a deadlock finding for it, not a hang.
    let timeline = run_with(
        "watchdog_stuck.toml",
        &["env.TORCH_NCCL_ENABLE_MONITORING=0"],
    );
    let monitor = |event| -> Vec<u64> {
        (records(&timeline, 0, event).iter())
            .filter(|r| r.thread == ThreadKind::HeartbeatMonitor)
            .map(|r| r.at_ns)
            .collect()
    };
    assert_eq!(monitor(WatchdogEvent::Dump), [601_000_000_000]);
    assert_eq!(monitor(WatchdogEvent::MonitorDisabled), [1_081_000_000_000]);
    assert!(records(&timeline, 0, WatchdogEvent::HeartbeatTimeout).is_empty());
    assert!(records(&timeline, 0, WatchdogEvent::Exit).is_empty());
    assert!(timeline
        .findings
        .iter()
        .all(|f| f.kind != FindingKind::HeartbeatAbort));
    assert!(timeline
        .findings
        .iter()
        .any(|f| f.kind == FindingKind::Deadlock
            && f.message
                .starts_with("[Rank 0] the host is blocked in loss")));
}

#[test]
fn a_store_timeout_made_once_for_a_class_names_each_member_s_group_rank_r29() {
    // Ranks that behave alike get one record and one finding standing for them all. PyTorch's
    // words carry each process's own group rank, `[r] is setting up …`; the report printed the
    // lowest member's for all of them (`[Ranks 1-3 (3 ranks)] DistBackendError: [1] …`). In a
    // subgroup the group ranks are not the global ones.
    let world = "[cluster]\nranks = 4\n[tensors]\nx = \"1MiB\"\n[[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\n[[fault]]\nranks = [0]\nat = \"ar\"\nkind = \"die\"\n";
    let subgroup = world
        .replace("ranks = 4", "ranks = 7\n[groups.sub]\nranks = [0, 2, 4, 6]")
        .replace("all_reduce = \"x\"", "all_reduce = \"x\"\ngroup = \"sub\"");
    for (text, named) in [
        (
            world.to_string(),
            "[Ranks 1-3 (3 ranks)] DistBackendError: [1-3] is setting up",
        ),
        (
            subgroup,
            "[Ranks 2,4,6 (3 ranks)] DistBackendError: [1-3] is setting up",
        ),
    ] {
        let scenario = sim::scenario::parse("store.toml", &text).unwrap();
        let rendered = analysis::text::render_report(&report(&sim::engine::simulate(&scenario)));
        assert!(rendered.contains(named), "{rendered}");
        assert!(!rendered.contains("DistBackendError: [1] "), "{rendered}");
        // Each rank on its own (`--detail ranks`) says its own.
        let options = sim::engine::Options {
            per_rank_detail: true,
            ..Default::default()
        };
        let (each, _) = sim::engine::simulate_with(&scenario, options);
        let messages: Vec<&str> = (each.findings.iter()).map(|f| f.message.as_str()).collect();
        assert_eq!(messages.len(), 3, "{messages:?}");
        for (message, group_rank) in messages.iter().zip(1..) {
            let own = format!("DistBackendError: [{group_rank}] is setting up");
            assert!(message.contains(&own), "{message}");
        }
    }
}

/// The exception `wait_w` raised on rank 0, caught (it raises once).
fn caught_at_wait(timeline: &Timeline) -> &sim::timeline::ExceptionRecord {
    let rank0 = &timeline.ranks[0];
    let wait = timeline
        .ops
        .iter()
        .position(|o| o.name == "wait_w")
        .unwrap() as u32;
    let mut at_wait = rank0.exceptions.iter().filter(|e| e.op == wait);
    let caught = at_wait.next().expect("wait_w raised");
    assert!(at_wait.next().is_none(), "{:?}", rank0.exceptions);
    assert_eq!(caught.exception, "DistBackendError");
    assert_eq!(timeline.ops[caught.op as usize].name, "wait_w");
    caught
}

/// The host time the call of `ar` started (it is enqueued within the call's 30 µs).
fn call_start_ns(timeline: &Timeline) -> u64 {
    let ar = timeline.ops.iter().position(|o| o.name == "ar").unwrap() as u32;
    timeline.ranks[0]
        .host
        .iter()
        .find(|h| h.op == ar)
        .unwrap()
        .start_ns
}

/// The end of the kernel of op `label` on rank 0.
fn kernel_end_ns(timeline: &Timeline, label: &str) -> u64 {
    let op = timeline.ops.iter().position(|o| o.name == label).unwrap() as u32;
    timeline.ranks[0]
        .kernels
        .iter()
        .find(|k| k.op == op)
        .unwrap()
        .end_ns
}

/// caught_timeout.toml (R15, R27): a blocking wait's timeout, caught; the program goes on.
pub fn check_caught_timeout(timeline: &Timeline, _report: &Report) {
    let caught = caught_at_wait(timeline);
    // Polled every 1 ms from the wait's start: timed out at the first poll ≥ 500 ms after
    // enqueue; the main thread's abort of the communicator then returns once the 2 s sleep
    // ahead of the collective drained, and the wait raises there.
    let timeout_ns = 500 * MS;
    let timed_out_ns = wait_timed_out_ns(timeline, 0);
    assert!(timed_out_ns >= call_start_ns(timeline) + timeout_ns);
    assert!(timed_out_ns <= call_start_ns(timeline) + timeout_ns + MS + 100 * US);
    let drained_ns = kernel_end_ns(timeline, "backlog");
    assert!(
        (drained_ns..drained_ns + 100 * US).contains(&caught.at_ns),
        "{} {drained_ns}",
        caught.at_ns
    );
    assert_eq!(at(timeline, 0, WatchdogEvent::Abort), caught.at_ns);
    let rank0 = &timeline.ranks[0];
    // The retry on the aborted communicator raises at once, before issuing anything: caught,
    // recorded, no second collective, no kernel; its call ends where it raised.
    let retry = timeline.ops.iter().position(|o| o.name == "retry").unwrap() as u32;
    let raised = rank0.exceptions.iter().find(|e| e.op == retry).unwrap();
    assert_eq!(raised.exception, "DistBackendError");
    assert!(raised.message.contains("aborted"), "{}", raised.message);
    assert!(raised.at_ns >= caught.at_ns && raised.at_ns < caught.at_ns + MS);
    // The aborted collective never completes (its kernel ended at its start), and the retry
    // issued nothing.
    assert!(rank0.collectives.is_empty(), "{:?}", rank0.collectives);
    assert!(rank0.kernels.iter().all(|k| k.op != retry));
    let retry_call = rank0.host.iter().find(|h| h.op == retry).unwrap();
    assert_eq!(retry_call.end_ns, raised.at_ns);
    // Without catch on the retry, its raise ends the process there.
    let text = std::fs::read_to_string(crate::util::scenarios_dir().join("caught_timeout.toml"))
        .unwrap()
        .replace("all_reduce = \"x\"\ncatch = true\n", "all_reduce = \"x\"\n");
    let uncaught =
        sim::engine::simulate(&sim::scenario::parse("caught_timeout.toml", &text).unwrap());
    let end = uncaught.ranks[0].end.unwrap();
    assert_eq!(end.status, ExitStatus::Raised);
    assert_eq!(end.at_ns, Some(raised.at_ns));
    let after = timeline.ops.iter().position(|o| o.name == "after").unwrap() as u32;
    assert!(uncaught.ranks[0].host.iter().all(|h| h.op != after));
    let kernel = rank0.kernels.iter().find(|k| k.op == after).unwrap();
    // The kernel after the catch queues behind the 2 s sleep; the process ends cleanly after it.
    assert!(kernel.start_ns >= 2 * S);
    let end = rank0.end.unwrap();
    assert_eq!(end.status, ExitStatus::Clean);
    assert!(end.at_ns.unwrap() >= kernel.end_ns);
}

/// wait_timeout.toml (R12, R15): `wait(timeout=50ms)` times out at 50 ms under 2.12 and
/// raises after the main thread's abort; it returns at once under 2.5.
pub fn check_wait_timeout(timeline: &Timeline, _report: &Report) {
    let caught = caught_at_wait(timeline);
    let timed_out_ns = wait_timed_out_ns(timeline, 0);
    assert!(timed_out_ns >= call_start_ns(timeline) + 50 * MS);
    assert!(timed_out_ns <= call_start_ns(timeline) + 51 * MS + 100 * US);
    // Without a machine profile the abort costs nothing: it ends once the 300 ms sleep ahead
    // of the collective drained, and the wait raises there.
    let drained_ns = kernel_end_ns(timeline, "backlog");
    assert!((drained_ns..drained_ns + 100 * US).contains(&caught.at_ns));
    // The watchdog then finds the aborted communicator's error under the Work and handles it
    // as its own: the dump signal, the default 60 s dump wait, then SIGABRT (mode 3), though
    // the program caught the exception.
    assert!(records(timeline, 0, WatchdogEvent::Timeout).is_empty());
    assert_eq!(at(timeline, 0, WatchdogEvent::AsyncError), caught.at_ns);
    assert_eq!(at(timeline, 0, WatchdogEvent::DumpSignal), caught.at_ns);
    let end = timeline.ranks[0].end.unwrap();
    assert_eq!(end.status, ExitStatus::Aborted);
    assert_eq!(end.at_ns, Some(caught.at_ns + DUMP_WAIT_NS));
    let text =
        std::fs::read_to_string(crate::util::scenarios_dir().join("wait_timeout.toml")).unwrap();
    // The abort's measured least time (host.comm_abort_us, profiles/h200-torch.toml) is longer
    // than the 250 ms of sleep left at the timeout: the raise comes 930 ms after it.
    let costed = text.replace("[cluster]", "[host]\ncomm_abort_us = 930_000\n\n[cluster]");
    let costed =
        sim::engine::simulate(&sim::scenario::parse("wait_timeout.toml", &costed).unwrap());
    let timed_out_ns = wait_timed_out_ns(&costed, 0);
    assert_eq!(caught_at_wait(&costed).at_ns, timed_out_ns + 930 * MS);
    let text = text.replace("warmup = 0\n", "warmup = 0\ntorch = \"2.5\"\n");
    let old = sim::engine::simulate(&sim::scenario::parse("wait_timeout.toml", &text).unwrap());
    let rank0 = &old.ranks[0];
    assert!(
        rank0.exceptions.is_empty(),
        "2.5 raises nothing: {:?}",
        rank0.exceptions
    );
    assert!(old.findings.is_empty(), "{:?}", old.findings);
    let wait = old.ops.iter().position(|o| o.name == "wait_w").unwrap() as u32;
    let call = rank0.host.iter().find(|h| h.op == wait).unwrap();
    assert!(call.end_ns < MS, "wait() returned at once: {}", call.end_ns);
    assert!(rank0.end.unwrap().at_ns.unwrap() >= 300 * MS);
}

/// timeout_dump.toml (R6, R26, R27): found at the first poll past 1 s, the desync report, the
/// dump signal and a 4 × 250 ms dump wait, then the process taken down.
pub fn check_timeout_dump(timeline: &Timeline, _report: &Report) {
    let detected_ns = next_poll_ns(call_start_ns(timeline) + S);
    assert_eq!(at(timeline, 0, WatchdogEvent::Timeout), detected_ns);
    assert_eq!(at(timeline, 0, WatchdogEvent::Dump), detected_ns);
    let report = records(timeline, 0, WatchdogEvent::DesyncReport);
    assert!(report[0].message.contains("not started its kernel"));
    let exit_ns = at(timeline, 0, WatchdogEvent::Exit);
    assert_eq!(exit_ns, detected_ns + 4 * 250 * MS);
    let end = timeline.ranks[0].end.unwrap();
    assert_eq!(end.status, ExitStatus::Aborted);
    assert_eq!(end.at_ns, Some(exit_ns));
}

#[test]
fn the_desync_verdict_tells_a_busy_stream_from_a_process_that_ended_before_the_kernel() {
    // gpu_backlog_timeout, with rank 1 dying at `loss`, after it enqueued `ar` behind its 605-s
    // backlog: at rank 0's timeout neither kernel started, for two different reasons.
    let text =
        std::fs::read_to_string(crate::util::scenarios_dir().join("gpu_backlog_timeout.toml"))
            .unwrap()
            + "\n[[fault]]\nranks = [1]\nat = \"loss\"\nkind = \"die\"\n";
    let timeline = simulate_text(&text);
    let report = records(&timeline, 0, WatchdogEvent::DesyncReport);
    assert!(
        report[0].message.ends_with(
            "verdict: every rank enqueued collective 1; rank 0 has not started its kernel: its \
             stream is still busy before it; rank 1 never started its kernel: its process ended \
             first"
        ),
        "{}",
        report[0].message
    );
}

/// `run`'s report, then the number of findings `--json` lists.
fn findings_of(args: &[&str]) -> (String, usize) {
    let text = crate::util::stdout(&crate::util::c10dsim(args));
    let json = crate::util::c10dsim(&[args, &["--json"]].concat());
    let json: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    // Each finding once per rank it stands for (a folded class's finding stands for many).
    let count = (json["report"]["findings"]
        .as_array()
        .expect("findings")
        .iter())
    .map(|finding| {
        let ranks = finding["stands_for"].as_array().map_or(0, |ranges| {
            ranges
                .iter()
                .map(|range| range[1].as_u64().unwrap() - range[0].as_u64().unwrap() + 1)
                .sum()
        });
        ranks.max(1) as usize
    })
    .sum();
    (text, count)
}

#[test]
fn the_findings_header_counts_the_findings_json_lists_and_the_lines_they_make() {
    // Drawn kernel jitter makes every rank a class of its own: 64 findings, 63 of the same
    // timeout, one line naming the 63 ranks that found it. The header counts every rank's
    // findings (a folded one once per rank it stands for), so folded runs say the same.
    let (text, json_count) = findings_of(&[
        "run",
        "scenarios/hang_10min.toml",
        "--set",
        "cluster.ranks=64",
        "--set",
        "cluster.kernel_jitter_pct=1",
    ]);
    let (_, findings) = text.split_once("\nfindings: ").expect("a findings section");
    let mut lines = findings.lines();
    let header = lines.next().unwrap();
    let listed = lines.take_while(|line| line.starts_with("  [")).count();
    assert_eq!(
        header,
        format!("{json_count} ({listed} lines: alike findings of several ranks are one line)"),
    );
    assert_eq!((json_count, listed), (64, 2), "{findings}");
    assert!(findings.contains("(63 ranks)"), "{findings}");
    // Folded the same: 64 findings of ranks over the two lines.
    let (folded, folded_count) = findings_of(&[
        "run",
        "scenarios/hang_10min.toml",
        "--set",
        "cluster.ranks=64",
    ]);
    assert_eq!(folded_count, 64);
    assert!(
        folded.contains("\nfindings: 64 (2 lines: alike findings of several ranks are one line)\n"),
        "{folded}"
    );
    // Rank 0 and rank 3 are classes of their own, their heartbeat aborts one line.
    let (text, json_count) = findings_of(&[
        "run",
        "scenarios/watchdog_stuck.toml",
        "--set",
        "cluster.ranks=64",
    ]);
    assert!(
        text.contains(&format!(
            "\nfindings: {json_count} (2 lines: alike findings of several ranks are one line)\n"
        )),
        "{text}"
    );
    assert!(
        text.contains("[HeartbeatAbort] [Ranks 0,3 (2 ranks)]"),
        "{text}"
    );
}

#[test]
fn unfolded_store_timeouts_are_one_line_naming_every_group_rank_r29() {
    // Drawn kernel jitter: every rank a class of its own, each store timeout's words naming its
    // own group rank (`[5] is setting up …`). They printed one watchdog line and one finding per
    // rank (3.5 MB at 4,096 ranks) where the folded run prints one of each.
    let report = |jitter: bool| {
        let mut args = vec![
            "run",
            "scenarios/rank0_crash_init.toml",
            "--set",
            "cluster.ranks=64",
        ];
        if jitter {
            args.extend(["--set", "cluster.kernel_jitter_pct=1"]);
        }
        crate::util::stdout(&crate::util::c10dsim(&args))
    };
    let (folded, jittered) = (report(false), report(true));
    // The same lines, the findings header's count included (every rank's findings).
    let section = |text: &str| text.split_once("\nwatchdog, ").unwrap().1.to_string();
    assert_eq!(section(&jittered), section(&folded));
    assert!(
        folded.contains("\nfindings: 63 (1 line: alike findings of several ranks are one line)\n"),
        "{folded}"
    );
    assert!(
        folded.contains(
            "\n  [StoreTimeout] [Ranks 1-63 (63 ranks)] DistBackendError: [1-63] is setting up NCCL communicator"
        ),
        "{folded}"
    );
}

/// Two ranks, `TORCH_NCCL_ASYNC_ERROR_HANDLING=0`, 1-s timeout: rank 1 is 1.5 s late at
/// iteration 2, rank 0's host ran ahead, so its Works of iterations 2 on time out (R26's clock
/// runs from the enqueue) while the collectives themselves go on completing, one per 100 ms.
fn late_rank_survived(repeat: u32) -> Timeline {
    simulate_text(&format!(
        "repeat = {repeat}\n[cluster]\nranks = 2\n[env]\nTORCH_NCCL_ASYNC_ERROR_HANDLING = 0\n[groups.world]\neager_init = true\ntimeout_s = 1\n[tensors]\nx = \"1MiB\"\n[[perturb]]\nranks = [1]\nbefore = \"ar\"\nhost_delay_us = 1_500_000\niterations = [2]\n[[op]]\nlabel = \"step\"\nkernel = {{ us = 100_000 }}\n[[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\nasync_op = true\nwork = \"w\"\n[[op]]\nwait = \"w\"\n"
    ))
}

#[test]
fn a_monitor_skips_the_store_while_its_default_group_s_works_leave_the_watchdog_s_list() {
    // Rank 0 broadcasts the dump signal at 1.1 s; rank 1's monitor would read it at its 2.0-s
    // wake, but rank 1's watchdog took a completed Work off its list at its 2.0-s poll, so the
    // monitor skips the store (R28) and rank 1 finds its own timeout at 2.6 s first.
    let timeline = late_rank_survived(20);
    let rank_1: Vec<(WatchdogEvent, u64)> = (timeline.watchdog.iter())
        .filter(|record| record.concerns(1))
        .map(|record| (record.event, record.at_ns))
        .take(3)
        .collect();
    assert_eq!(
        rank_1,
        [
            (WatchdogEvent::Timeout, 2_600_000_000),
            (WatchdogEvent::DumpSignal, 2_600_000_000),
            (WatchdogEvent::Dump, 2_600_000_000)
        ]
    );
}

#[test]
fn a_timeout_report_while_a_collective_waits_for_the_watchdog_s_list_does_not_panic() {
    // Rank 0's watchdog sleeps 60 s holding its Work list after each timeout, and its host
    // waits there with the next collective issued but not enqueued; the desync report of the
    // next timeout reads the rank's progress, which counted that collective's missing end
    // event (an index out of bounds).
    let timeline = late_rank_survived(400);
    let timeouts: Vec<(u32, u64)> = (timeline.watchdog.iter())
        .filter(|record| record.event == WatchdogEvent::Timeout)
        .map(|record| (record.rank, record.at_ns))
        .take(4)
        .collect();
    assert_eq!(
        timeouts,
        [
            (0, 1_100_000_000),
            (1, 2_600_000_000),
            (0, 61_100_000_000),
            (1, 62_600_000_000)
        ]
    );
}

#[test]
fn a_collective_whose_host_blocked_before_its_work_was_enqueued_ends_the_run_unfinished() {
    // `host.launch_queue_depth = 1`: rank 1's all_reduce of iteration 1 is on its stream, the
    // Work's end event waits for room behind it, and rank 0 died at that all_reduce, so the
    // kernel never runs and the Work is never enqueued. The run's records took that
    // collective's end event, which it never got (an index out of bounds).
    let timeline = simulate_text(
        "repeat = 2\n[cluster]\nranks = 2\n[host]\nlaunch_queue_depth = 1\n[tensors]\nx = \"1MiB\"\n[[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\n[[fault]]\nranks = [0]\nat = \"ar\"\niteration = 1\nkind = \"die\"\n",
    );
    let rank1 = &timeline.ranks[1];
    // It never completes: an unfinished collective of iteration 1 whose kernel spins, its
    // host blocked on the launch queue, and a deadlock found.
    let iterations = |records: &mut dyn Iterator<Item = u32>| records.collect::<Vec<_>>();
    assert_eq!(
        iterations(&mut rank1.collectives.iter().map(|c| c.iteration)),
        [0]
    );
    let unfinished = &rank1.unfinished_collectives;
    assert_eq!(unfinished.len(), 1, "{unfinished:?}");
    assert_eq!((unfinished[0].iteration, unfinished[0].seq), (1, 2));
    assert_eq!(unfinished[0].kernel_end_ns, None);
    let blocked_on = rank1.unfinished_host.as_ref().and_then(|h| h.blocked_on);
    assert_eq!(blocked_on, Some(HostBlock::LaunchQueue { stream: 0 }));
    assert_eq!(rank1.end.unwrap().status, ExitStatus::Running);
    let found: Vec<_> = (timeline.findings.iter())
        .map(|f| (f.kind, f.rank, f.iteration))
        .collect();
    assert_eq!(
        found,
        [
            (FindingKind::Deadlock, Some(1), Some(1)),
            (FindingKind::Deadlock, Some(1), Some(1))
        ]
    );
}

/// Mode 2, 50-ms timeout: rank 0's host is 200 ms late for `ar`, so the watchdog timed the
/// barrier out and aborted the communicator (at 0.404 s) before `ar` is called on it (0.5 s).
const LATE_FOR_AN_ABORTED_COMMUNICATOR: &str = "[cluster]\nranks = 2\n[env]\nTORCH_NCCL_ASYNC_ERROR_HANDLING = 2\nTORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC = 1\n[groups.world]\ntimeout_s = 0.05\n[tensors]\nx = \"1MiB\"\n[[op]]\nbarrier = true\n[[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\nasync_op = true\nwork = \"w\"\ncatch = true\n[[op]]\nlabel = \"use_w\"\nwait = \"w\"\n";

#[test]
fn a_perturb_s_host_delay_before_a_call_on_an_aborted_communicator_raises_as_a_sleep_does() {
    // The perturbation's delay is host time before `ar`, as a `host_sleep_us` op before it:
    // `ar` raises (caught) on the communicator aborted meanwhile, `w` is never bound, and its
    // wait raises NameError. The call used to be planned at the host's time before the delay,
    // as if it went through: its wait then read the end event of a Work never made (an index
    // out of bounds).
    let delayed = simulate_text(&format!(
        "{LATE_FOR_AN_ABORTED_COMMUNICATOR}[[perturb]]\nranks = [0]\nbefore = \"ar\"\nhost_delay_us = 200000\n"
    ));
    let slept = simulate_text(&LATE_FOR_AN_ABORTED_COMMUNICATOR.replace(
        "[[op]]\nlabel = \"ar\"",
        "[[op]]\nranks = [0]\nhost_sleep_us = 200000\n[[op]]\nlabel = \"ar\"",
    ));
    let program_error = |timeline: &Timeline| {
        let found: Vec<_> = (timeline.findings.iter())
            .filter(|f| f.kind == FindingKind::ProgramError)
            .map(|f| (f.rank, f.message.clone()))
            .collect();
        (found, timeline.ranks[0].end.unwrap())
    };
    let (found, end) = program_error(&delayed);
    assert_eq!(
        found,
        [(
            Some(0),
            "[Rank 0] NameError: name 'w' is not defined; use_w (line 18) raises it in the main \
             thread (every call that would have bound the Work raised first) and, uncaught, ends \
             the process"
                .to_string()
        )]
    );
    assert_eq!(end.status, ExitStatus::Raised);
    let (_, slept_end) = program_error(&slept);
    assert_eq!(end, slept_end);
    let exceptions = |timeline: &Timeline| {
        (timeline.ranks[0].exceptions.iter())
            .map(|e| (timeline.ops[e.op as usize].name.clone(), e.at_ns))
            .collect::<Vec<_>>()
    };
    assert_eq!(exceptions(&delayed), exceptions(&slept));
}

#[test]
fn a_call_whose_communicator_is_aborted_while_the_host_is_inside_it_raises_without_its_work() {
    // Rank 0 reaches `ar` 0.46 ms before the watchdog aborts the communicator (0.404 s), and
    // checks it later in the call: a coalescing block records its 50 calls first (4.9 ms), a
    // list of separate calls issues the first before the second checks it. The call raising
    // there, caught, binds no Work and issues nothing. Both were planned as if they went
    // through: `w` named a Work never made, whose wait read a slot never recorded (an index
    // out of bounds).
    let late = LATE_FOR_AN_ABORTED_COMMUNICATOR
        .replace("x = \"1MiB\"", "x = { size = \"1KiB\", count = 50 }")
        .replace(
            "[groups.world]",
            "[host]\ncoalesced_call_us = 100\n[groups.world]",
        )
        .replace(
            "[[op]]\nlabel = \"ar\"",
            "[[op]]\nranks = [0]\nhost_sleep_us = 103_500\n[[op]]\nlabel = \"ar\"",
        );
    let program_errors = |timeline: &Timeline| {
        (timeline.findings.iter())
            .filter(|f| f.kind == FindingKind::ProgramError)
            .map(|f| f.message.clone())
            .collect::<Vec<_>>()
    };
    let raised = |timeline: &Timeline| {
        (timeline.ranks[0].exceptions.iter())
            .map(|e| (timeline.ops[e.op as usize].name.clone(), e.at_ns))
            .collect::<Vec<_>>()
    };
    // The block raises after its recorded calls, before it made its Work: `w` was never bound.
    let coalesced =
        simulate_text(&late.replace("async_op = true\n", "async_op = true\ncoalesce = true\n"));
    assert_eq!(raised(&coalesced), [("ar".to_string(), 408_438 * US)]);
    let found = program_errors(&coalesced);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].starts_with("[Rank 0] NameError: name 'w' is not defined; use_w"));
    assert_eq!(coalesced.ranks[0].end.unwrap().status, ExitStatus::Raised);
    // The second call raises: `w` holds the first call's Work, which its wait waits for.
    let separate = simulate_text(&late);
    assert_eq!(raised(&separate), [("ar".to_string(), 404 * MS)]);
    assert_eq!(program_errors(&separate), Vec::<String>::new());
    let rank0 = &separate.ranks[0];
    let op = |name: &str| separate.ops.iter().position(|o| o.name == name).unwrap() as u32;
    let calls: Vec<_> = (rank0.collectives.iter())
        .filter(|c| c.op == op("ar"))
        .map(|c| (c.seq, c.wait.as_ref().map(|w| w.op)))
        .collect();
    assert_eq!(calls, [(2, Some(op("use_w")))]);
    assert_eq!(rank0.end.unwrap().status, ExitStatus::Clean);
}

#[test]
fn a_fault_after_a_perturbation_s_delay_is_reached_only_if_the_process_lives_to_its_time() {
    // Rank 0's host is delayed 104 ms before iteration 2's `ar`, where it would hang; mode 1
    // takes both processes down at 0.404 s, during that delay, so rank 0 never reaches the op
    // (before, the hang was logged at 0.404188 s, after the process had ended).
    let text = "repeat = 8\n[cluster]\nranks = 2\n[host]\nlaunch_queue_depth = 1\n[env]\nTORCH_NCCL_ASYNC_ERROR_HANDLING = 1\nTORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC = 1\nTORCH_NCCL_HEARTBEAT_TIMEOUT_SEC = 1\n[groups.world]\ntimeout_s = 0.05\n[tensors]\nx = \"1MiB\"\n[[op]]\nlabel = \"step\"\nkernel = { us = 100 }\n[[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\nasync_op = true\nwork = \"w\"\n[[perturb]]\nranks = [0]\nbefore = \"ar\"\nhost_delay_us = 104000\niterations = [2]\n[[fault]]\nranks = [0]\nat = \"ar\"\niteration = 2\nkind = \"hang\"\n";
    let timeline = simulate_text(text);
    let end = timeline.ranks[0].end.unwrap();
    assert_eq!(end.at_ns, Some(404_000_000));
    let faults: Vec<u64> = (timeline.watchdog.iter())
        .filter(|record| record.concerns(0) && record.event == WatchdogEvent::Fault)
        .map(|record| record.at_ns)
        .collect();
    assert!(faults.is_empty(), "the hang is never reached: {faults:?}");
}

/// Two ranks each calling the all_reduce `a`, rank 1 under the fault `fault` (a TOML inline
/// table's fields), with `launch_queue_depth` commands a stream holds.
fn collective_fault_at_depth(fault: &str, launch_queue_depth: u32) -> String {
    format!(
        "[cluster]\nranks = 2\n[host]\nlaunch_queue_depth = {launch_queue_depth}\n[tensors]\nx = \"1MiB\"\n[[op]]\nlabel = \"a\"\nall_reduce = \"x\"\n[[fault]]\nranks = [1]\nat = \"a\"\n{fault}\n"
    )
}

/// Whether any rank completed a collective of the op labelled `label`.
fn completed_anywhere(timeline: &Timeline, label: &str) -> bool {
    let op = timeline.ops.iter().position(|o| o.name == label).unwrap() as u32;
    (timeline.ranks.iter()).any(|rank| rank.collectives.iter().any(|c| c.op == op))
}

#[test]
fn a_collective_fault_acts_whatever_the_launch_queue_depth_r1_r16() {
    // The fault acts on the collective's kernel: it never completes. With a deeper queue its
    // Work goes onto the watchdog's list, which finds the fault; with a one-deep queue the
    // Work's end-event record waits behind that kernel for good (R1), before the Work is
    // listed: a deadlock, and the mismatch found at the call.
    use FindingKind::*;
    for (fault, depth, mut kinds) in [
        (
            "kind = \"async_error\"",
            2,
            vec![AsyncError, HeartbeatAbort],
        ),
        ("kind = \"async_error\"", 1, vec![Deadlock]),
        (
            "kind = \"mismatch\"\ndtype = \"bf16\"",
            2,
            vec![Mismatch, WatchdogTimeout],
        ),
        (
            "kind = \"mismatch\"\ndtype = \"bf16\"",
            1,
            vec![Mismatch, Deadlock],
        ),
    ] {
        let timeline = simulate_text(&collective_fault_at_depth(fault, depth));
        kinds.sort_by_key(|k| k.as_str());
        assert_eq!(finding_kinds(&timeline), kinds, "{fault}, depth {depth}");
        assert!(
            !completed_anywhere(&timeline, "a"),
            "{fault}, depth {depth}"
        );
        assert!(
            ends(&timeline)
                .iter()
                .all(|(status, _)| *status != ExitStatus::Clean),
            "{fault}, depth {depth}: {:?}",
            ends(&timeline)
        );
    }
}

#[test]
fn a_mismatch_issued_while_the_watchdog_handles_a_timeout_never_completes_r16_r27() {
    // Rank 0's GPU is 500 ms late to `a`: rank 1's watchdog times `a` out (100 ms) and holds
    // its Work list while it sleeps for the dumps; rank 1's mismatched `b` launches its kernel
    // and waits for the list. The mismatch is found, and `b` never completes.
    let scenario = |mode: u32| {
        format!(
            "[cluster]\nranks = 2\n[env]\nTORCH_NCCL_ASYNC_ERROR_HANDLING = {mode}\n[groups.world]\ntimeout_s = 0.1\n[tensors]\nx = \"1KiB\"\n[[op]]\nlabel = \"a\"\nall_reduce = \"x\"\n[[op]]\nhost_sleep_us = 300000\n[[op]]\nlabel = \"b\"\nall_reduce = \"x\"\n[[perturb]]\nranks = [0]\nbefore = \"a\"\ngpu_delay_us = 500000\n[[fault]]\nranks = [1]\nat = \"b\"\nkind = \"mismatch\"\ndtype = \"bf16\"\n"
        )
    };
    for mode in 0..=3 {
        let timeline = simulate_text(&scenario(mode));
        let kinds = finding_kinds(&timeline);
        assert!(
            kinds.contains(&FindingKind::Mismatch),
            "mode {mode}: {kinds:?}"
        );
        assert!(!completed_anywhere(&timeline, "b"), "mode {mode}");
        // Mode 2 (CleanUpOnly) aborts the communicators, which ends the hung kernels, and the
        // processes live on to their ends.
        let clean = ends(&timeline)
            .iter()
            .all(|(status, _)| *status == ExitStatus::Clean);
        let none_clean = ends(&timeline)
            .iter()
            .all(|(status, _)| *status != ExitStatus::Clean);
        assert!(
            if mode == 2 { clean } else { none_clean },
            "mode {mode}: {:?}",
            ends(&timeline)
        );
    }
}

/// Rank 1 raises the store timeout (R29) while it waits in the lazy init of the world, and its
/// process ends; rank 0, the root, arrives after its end.
const DEAD_IN_INIT: &str = r#"
[cluster]
ranks = 2
[groups.world]
timeout_s = 1
[tensors]
x = "1MiB"
[[op]]
label = "a"
ranks = [1]
all_reduce = "x"
[[op]]
ranks = [0]
host_sleep_us = 2000000
[[op]]
ranks = [0]
barrier = true
"#;

/// Rank 1's async error takes its process down (R27) while it waits in the lazy init of
/// group g, which rank 0 reaches a second later.
const ABORTED_IN_INIT: &str = r#"
[cluster]
ranks = 2
[env]
TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC = 1
[groups.g]
ranks = [0, 1]
[tensors]
x = "1MiB"
[[op]]
label = "a"
all_reduce = "x"
[[op]]
label = "b"
all_reduce = "x"
group = "g"
[[perturb]]
ranks = [0]
before = "b"
host_delay_us = 1000000
[[fault]]
ranks = [1]
at = "a"
kind = "async_error"
"#;

/// Nothing of `rank` after the end of its process: no host call, kernel, collective or side
/// thread's record.
fn assert_nothing_after_end(timeline: &Timeline, rank: usize) {
    let records = &timeline.ranks[rank];
    let end_ns = records.end.unwrap().at_ns.unwrap();
    assert!(
        records.host.iter().all(|h| h.end_ns <= end_ns),
        "{:?}",
        records.host
    );
    assert!(
        (records.kernels.iter())
            .all(|k| k.enqueue_ns <= end_ns && (k.start_ns == u64::MAX || k.start_ns <= end_ns)),
        "{:?}",
        records.kernels
    );
    assert!(
        (records.unfinished_kernels.iter()).all(|k| k.enqueue_ns <= end_ns),
        "{:?}",
        records.unfinished_kernels
    );
    assert!(
        (records.collectives.iter()).all(|c| c.host_start_ns <= end_ns),
        "{:?}",
        records.collectives
    );
    let late: Vec<&WatchdogRecord> = (timeline.watchdog.iter())
        .filter(|w| w.rank as usize == rank && w.at_ns > end_ns)
        .collect();
    assert!(late.is_empty(), "{late:?}");
}

#[test]
fn a_rank_that_ended_in_a_communicators_init_never_takes_part_again_r8() {
    let timeline = simulate_text(DEAD_IN_INIT);
    let rank1 = &timeline.ranks[1];
    assert_eq!(rank1.end.unwrap().status, ExitStatus::Raised);
    assert_eq!(rank1.end.unwrap().at_ns, Some(S));
    assert_nothing_after_end(&timeline, 1);
    // The root waits for good for the member that never comes.
    let never_forms: Vec<&str> = (timeline.findings.iter())
        .filter(|f| f.kind == FindingKind::Deadlock)
        .map(|f| f.message.as_str())
        .filter(|m| m.contains("never forms"))
        .collect();
    assert_eq!(never_forms.len(), 1, "{:?}", timeline.findings);
    assert!(
        never_forms[0].contains("the communicator of group world never forms (R8): rank 0 waits")
            && never_forms[0].ends_with("the process of rank 1 ended in its init"),
        "{}",
        never_forms[0]
    );
    assert_eq!(timeline.ranks[0].end.unwrap().status, ExitStatus::Running);
    // Taken down by its watchdog in the init, the same.
    let timeline = simulate_text(ABORTED_IN_INIT);
    assert!(timeline.ranks[1].end.is_some());
    assert_nothing_after_end(&timeline, 1);
    assert!(
        !(timeline.findings.iter())
            .any(|f| f.rank == Some(1) && f.kind == FindingKind::WatchdogTimeout),
        "{:?}",
        timeline.findings
    );
}

#[test]
fn a_rank_that_ended_in_a_communicators_init_reports_the_same_folded_r8() {
    for text in [DEAD_IN_INIT, ABORTED_IN_INIT] {
        let scenario =
            sim::scenario::parse("init.toml", &text.replace("ranks = 2", "ranks = 4")).unwrap();
        let (folded, unfolded) = (simulated(&scenario, true), simulated(&scenario, false));
        assert_eq!(report(&folded), report(&unfolded));
        assert_eq!(folded.findings, unfolded.findings);
    }
}

/// Rank 1 hangs in "a"; rank 0 sleeps 300 ms before "b", then would launch its 1 µs GPU delay
/// kernel. Its watchdog finds "a" past the 100 ms timeout at the 200 ms poll and, after the
/// 4 ms dump wait, ends the process at 204 ms, within the host delay (R16, R27).
const DELAY_KERNEL_AFTER_END: &str = r#"
[cluster]
ranks = 2
[groups.world]
eager_init = true
timeout_s = 0.1
[env]
TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC = 1
[tensors]
x = "1KiB"
[[op]]
label = "a"
all_reduce = "x"
[[op]]
label = "b"
all_reduce = "x"
[[perturb]]
ranks = [0]
before = "b"
host_delay_us = 300000
gpu_delay_us = 1
[[fault]]
ranks = [1]
at = "a"
kind = "hang"
"#;

#[test]
fn a_perturbations_gpu_delay_is_not_launched_after_its_process_ended_r16() {
    let scenario = sim::scenario::parse("delay.toml", DELAY_KERNEL_AFTER_END).unwrap();
    for fold in [true, false] {
        let timeline = simulated(&scenario, fold);
        let end = timeline.ranks[0].end.unwrap();
        assert_eq!(end.status, ExitStatus::Aborted);
        assert_eq!(end.at_ns, Some(204 * MS));
        assert_nothing_after_end(&timeline, 0);
    }
}

/// Rank 0 reaches "c3" 262.5 ms late and issues "c4" in bf16 (a mismatch fault); ranks 1-3
/// issue it in f32 before. Rank 1 is a class of its own (its 1 µs delay), ranks 2-3 another.
const MISMATCH_AFTER_SEVERAL_CLASSES: &str = r#"
[cluster]
ranks = 4
[host]
launch_queue_depth = 1
[groups.world]
timeout_s = 0.1
[tensors]
x = "1KiB"
[[op]]
all_reduce = "x"
[[op]]
label = "c3"
all_reduce = "x"
async_op = true
work = "w3"
[[op]]
wait = "w3"
[[op]]
label = "c4"
all_reduce = "x"
[[perturb]]
ranks = [1]
before = "c3"
host_delay_us = 1
[[perturb]]
ranks = [0]
before = "c3"
host_delay_us = 262500
[[fault]]
ranks = [0]
at = "c4"
kind = "mismatch"
dtype = "bf16"
"#;

#[test]
fn a_mismatch_names_every_rank_that_issued_the_first_call_folded_or_not_r16() {
    let scenario = sim::scenario::parse("mismatch.toml", MISMATCH_AFTER_SEVERAL_CLASSES).unwrap();
    let mismatch = |fold| {
        let timeline = simulated(&scenario, fold);
        let found: Vec<String> = (timeline.findings.iter())
            .filter(|f| f.kind == FindingKind::Mismatch)
            .map(|f| f.message.clone())
            .collect();
        assert_eq!(found.len(), 1, "{:?}", timeline.findings);
        found[0].clone()
    };
    let (folded, unfolded) = (mismatch(true), mismatch(false));
    assert_eq!(folded, unfolded);
    assert!(
        folded.contains(
            "SeqNum=3 of group world: ranks 1-3 (3 ranks) issued ALLREDUCE of 1KiB f32 (c4, line 19), \
             rank 0 issued ALLREDUCE of 512B bf16 (c4, line 19)"
        ),
        "{folded}"
    );
}

/// Under non-blocking init, rank 1 reaches the world's first collective at once, the root (rank
/// 0) and rank 2 1.125 s later. Every rank got the unique id inside init_process_group (R29),
/// and NCCL's creation ran on from there, so rank 1's first use finds the communicator ready
/// well within TORCH_NCCL_NONBLOCKING_TIMEOUT (1 s), however late the others' first use (R8).
const NONBLOCKING_ROOT_LATE: &str = r#"
[cluster]
ranks = 3
[env]
TORCH_NCCL_USE_COMM_NONBLOCKING = 1
TORCH_NCCL_NONBLOCKING_TIMEOUT = 1
TORCH_NCCL_DUMP_ON_TIMEOUT = 0
[tensors]
x = "1KiB"
[[op]]
label = "init"
init_process_group = true
device_id = true
[[op]]
label = "a"
all_reduce = "x"
[[perturb]]
ranks = [0, 2]
before = "a"
host_delay_us = 1125000
"#;

#[test]
fn a_nonblocking_init_runs_on_from_init_process_group_folded_or_not_r8() {
    let scenario = sim::scenario::parse("nonblocking.toml", NONBLOCKING_ROOT_LATE).unwrap();
    for fold in [true, false] {
        let timeline = simulated(&scenario, fold);
        assert_eq!(timeline.findings, [], "fold {fold}");
        for rank in &timeline.ranks {
            assert_eq!(rank.end.unwrap().status, ExitStatus::Clean, "fold {fold}");
            assert_eq!(rank.collectives.len(), 1, "fold {fold}");
        }
    }
}

#[test]
fn a_member_whose_store_wait_times_out_before_the_root_arrives_raises_r29() {
    // Two ranks, the world's timeout 1 s, the root 2 s late to init_process_group: rank 1's
    // `store.get` there times out at 1 s, whatever the order the engine ran the hosts in.
    let text = NONBLOCKING_ROOT_LATE
        .replace("ranks = 3", "ranks = 2")
        .replace("ranks = [0, 2]", "ranks = [0]")
        .replace("before = \"a\"", "before = \"init\"")
        .replace("1125000", "2000000")
        .replace("[tensors]", "[groups.world]\ntimeout_s = 1\n[tensors]");
    let scenario = sim::scenario::parse("late_root.toml", &text).unwrap();
    for fold in [true, false] {
        let timeline = simulated(&scenario, fold);
        let kinds: Vec<FindingKind> = timeline.findings.iter().map(|f| f.kind).collect();
        assert_eq!(
            kinds[0],
            FindingKind::StoreTimeout,
            "fold {fold}: {kinds:?}"
        );
        assert!(
            timeline.findings[0]
                .message
                .contains("wait timeout after 1000ms"),
            "{}",
            timeline.findings[0].message
        );
        let rank1 = timeline.ranks[1].end.unwrap();
        assert_eq!(rank1.status, ExitStatus::Raised, "fold {fold}");
        assert!(rank1.at_ns.unwrap() < 2 * S, "fold {fold}: {rank1:?}");
        assert_nothing_after_end(&timeline, 1);
    }
}

/// Ranks 1-3 arrive at the world's lazy init at 0; the root, rank 0, synchronises its stream,
/// sleeps, and arrives at 1 s, the very deadline of their `store.get` (R29). Its host ran ahead
/// of the simulation, so the engine processes its arrival before their deadline.
const ROOT_AT_THE_STORE_DEADLINE: &str = r#"
[cluster]
ranks = 4
[groups.world]
timeout_s = 1
[tensors]
x = "1KiB"
[[op]]
ranks = [0]
gpu_sleep_us = 10
[[op]]
ranks = [0]
stream_sync = "default"
[[op]]
ranks = [0]
host_sleep_us = 999977
[[op]]
label = "a"
all_reduce = "x"
"#;

#[test]
fn members_whose_store_wait_ended_as_the_root_published_leave_the_init_unformed_r8_r29() {
    let at_deadline = sim::scenario::parse("tie.toml", ROOT_AT_THE_STORE_DEADLINE).unwrap();
    // A nanosecond later, the root's host waits for the simulation to pass the deadline.
    let later = ROOT_AT_THE_STORE_DEADLINE.replace("999977", "999977.001");
    let later = sim::scenario::parse("later.toml", &later).unwrap();
    for fold in [true, false] {
        let timeline = simulated(&at_deadline, fold);
        let kinds: Vec<FindingKind> = timeline.findings.iter().map(|f| f.kind).collect();
        assert_eq!(
            kinds,
            [
                FindingKind::StoreTimeout,
                FindingKind::Deadlock,
                FindingKind::Deadlock
            ],
            "fold {fold}: {:?}",
            timeline.findings
        );
        assert!(
            timeline.findings[1].message.ends_with(
                "the communicator of group world never forms (R8): rank 0 waits in its lazy init at a (line 17), the processes of ranks 1-3 (3 ranks) ended in its init"
            ),
            "{}",
            timeline.findings[1].message
        );
        // The root never gets the communicator: no NCCL kernel after its GPU sleep.
        assert_eq!(timeline.ranks[0].kernels.len(), 1, "fold {fold}");
        assert_eq!(timeline.ranks[0].unfinished_kernels, [], "fold {fold}");
        assert_eq!(
            timeline.ranks[0].end.unwrap().status,
            ExitStatus::Running,
            "fold {fold}"
        );
        for rank in 1..4 {
            let end = timeline.ranks[rank].end.unwrap();
            assert_eq!((end.status, end.at_ns), (ExitStatus::Raised, Some(S)));
            assert_nothing_after_end(&timeline, rank);
        }
        // As when the engine processes the deadline first.
        assert_eq!(
            timeline.findings,
            simulated(&later, fold).findings,
            "fold {fold}"
        );
    }
}

/// Rank 1's async error takes its process down (R27) at 104 ms, in the group g's lazy init,
/// which both ranks reached at once and which takes a second (`comm_init_next_us`): the
/// communicator never forms for rank 0 (whose heartbeat monitor ignores the dump signal).
const ABORTED_WHILE_THE_INIT_RUNS: &str = r#"
[cluster]
ranks = 2
[host]
comm_init_next_us = 1000000
[groups.world]
eager_init = true
[env]
TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC = 1
TORCH_NCCL_DUMP_ON_TIMEOUT = 0
[groups.g]
ranks = [0, 1]
[tensors]
x = "1KiB"
[[op]]
label = "a"
ranks = [1]
all_reduce = "x"
async_op = true
work = "w"
[[op]]
label = "b"
all_reduce = "x"
group = "g"
[[fault]]
ranks = [1]
at = "a"
kind = "async_error"
"#;

#[test]
fn a_rank_that_ends_while_the_init_runs_leaves_the_communicator_unformed_r8() {
    let scenario = sim::scenario::parse("init.toml", ABORTED_WHILE_THE_INIT_RUNS).unwrap();
    let unfolded = simulated(&scenario, false);
    for timeline in [simulated(&scenario, true), unfolded.clone()] {
        let end = timeline.ranks[1].end.unwrap();
        assert_eq!(
            (end.status, end.at_ns),
            (ExitStatus::Aborted, Some(104 * MS))
        );
        assert_nothing_after_end(&timeline, 1);
        // Rank 0 never gets the communicator, so never issues b: no kernel at all.
        assert_eq!(timeline.ranks[0].kernels, []);
        assert_eq!(timeline.ranks[0].unfinished_kernels, []);
        let never_forms: Vec<&str> = (timeline.findings.iter())
            .filter(|f| f.kind == FindingKind::Deadlock)
            .map(|f| f.message.as_str())
            .filter(|m| m.contains("never forms"))
            .collect();
        assert_eq!(
            never_forms,
            ["the communicator of group g never forms (R8): rank 0 waits in its lazy init at b (line 21), the process of rank 1 ended in its init"],
            "{:?}",
            timeline.findings
        );
        assert_eq!(timeline.findings, unfolded.findings);
    }
}
