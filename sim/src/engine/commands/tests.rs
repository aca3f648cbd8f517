//! The failure component's behaviours through whole small scenarios: the unit tests of
//! `engine/commands.rs`, apart so that the commands read on their own.
//!
//! About 940 lines, over 800: one small scenario per behaviour of the watchdog, the heartbeat
//! monitor and the error handling, sharing the scenario builders at the top; split by behaviour
//! they would repeat those builders.

use crate::engine::simulate;
use crate::scenario::parse;
use crate::timeline::{ExitStatus, FindingKind, ProcessEnd, ThreadKind, Timeline, WatchdogEvent};

/// Two ranks, a 1-s group timeout, an async all_reduce enqueued at 20 µs, then wait and
/// `.item()`.
fn two_ranks(extra: &str) -> String {
    format!(
        "[cluster]\nranks = 2\n[groups.world]\neager_init = true\ntimeout_s = 1\n[tensors]\nx = \"1MiB\"\n{extra}\n[[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\nasync_op = true\nwork = \"w\"\n[[op]]\nwait = \"w\"\n[[op]]\nitem = \"x\"\n"
    )
}

fn events_of(text: &str, rank: u32, event: WatchdogEvent) -> Vec<u64> {
    let timeline = simulate(&parse("t.toml", text).unwrap());
    timeline
        .watchdog
        .iter()
        .filter(|r| r.rank == rank && r.event == event)
        .map(|r| r.at_ns)
        .collect()
}

#[test]
fn a_work_seen_complete_only_at_its_deadline_poll_still_times_out_r26() {
    // Rank 0's deadline: the first poll past 20 µs + 1 s is 1.1 s. Rank 1 joins at
    // 1.05 s, so the Work completes at ≈ 1.0501 s: not yet at the 1.0-s poll, and at the
    // 1.1-s poll the timeout is checked before completion. (The program sleeps on: a
    // returned one's watchdog polls without pause, R31.)
    let late = two_ranks("[[perturb]]\nranks = [1]\nbefore = \"ar\"\nhost_delay_us = 1050000")
        + "[[op]]\nhost_sleep_us = 1000000\n";
    assert_eq!(events_of(&late, 0, WatchdogEvent::Timeout), [1_100_000_000]);
    // Returning at ≈ 1.0501 s instead, without destroy_process_group(), its watchdog polls
    // at once (R31): past the deadline, checked before completion, the Work times out at
    // the return and takes the process down there.
    let returned = "destroy_process_group = false\n".to_string()
        + &two_ranks("[[perturb]]\nranks = [1]\nbefore = \"ar\"\nhost_delay_us = 1050000");
    let timeline = simulate(&parse("t.toml", &returned).unwrap());
    let end = timeline.ranks[0].end.unwrap();
    let returned_ns = timeline.ranks[0].host.iter().map(|h| h.end_ns).max();
    assert_eq!((end.status, end.at_ns), (ExitStatus::Aborted, returned_ns));
    assert_eq!(
        events_of(&returned, 0, WatchdogEvent::Timeout),
        [returned_ns.unwrap()]
    );
    // Joining at 0.95 s, it completes before the 1.0-s poll: no timeout on any rank.
    let in_time = two_ranks("[[perturb]]\nranks = [1]\nbefore = \"ar\"\nhost_delay_us = 950000");
    let timeline = simulate(&parse("t.toml", &in_time).unwrap());
    assert!(timeline.findings.is_empty(), "{:?}", timeline.findings);
    assert!(timeline.watchdog.is_empty());
}

#[test]
fn a_slow_host_phase_before_a_collective_times_out_the_others() {
    // Rank 1's host spends 2 s (a checkpoint) before the all_reduce: rank 0 times out at
    // 1.1 s; rank 1 then joins at 2 s while rank 0 is still in its dump wait, so the
    // collective completes — and rank 0's destroy_process_group() waits for the watchdog,
    // which exits at 1.1 s + 60 s (R31). Without destroy_process_group(), the program's
    // return during the dump wait crashes the process at exit instead.
    let text = two_ranks("[[perturb]]\nranks = [1]\nbefore = \"ar\"\nhost_delay_us = 2000000");
    for destroy in [true, false] {
        let text = format!("destroy_process_group = {destroy}\n{text}");
        let timeline = simulate(&parse("t.toml", &text).unwrap());
        let at = |rank: u32, event: WatchdogEvent| {
            timeline
                .watchdog
                .iter()
                .find(|r| r.rank == rank && r.event == event)
                .map(|r| r.at_ns)
        };
        assert_eq!(at(0, WatchdogEvent::Timeout), Some(1_100_000_000));
        assert_eq!(at(1, WatchdogEvent::Timeout), None);
        let end_ns = timeline.ranks[1].collectives[0].end_ns;
        assert!(end_ns > 2_000_000_000 && end_ns < 2_001_000_000, "{end_ns}");
        let returned_ns = timeline.ranks[0].host.iter().map(|h| h.end_ns).max();
        let end = timeline.ranks[0].end.unwrap();
        if destroy {
            assert_eq!(at(0, WatchdogEvent::Exit), Some(61_100_000_000));
            assert_eq!(end.status, ExitStatus::Aborted);
        } else {
            assert!(returned_ns.unwrap() > end_ns);
            assert_eq!(at(0, WatchdogEvent::Exit), returned_ns);
            assert_eq!((end.status, end.at_ns), (ExitStatus::Crashed, returned_ns));
        }
        assert_eq!(timeline.ranks[1].end.unwrap().status, ExitStatus::Clean);
    }
}

#[test]
fn a_process_that_dies_loses_its_queued_gpu_work_and_its_peers_time_out() {
    // Rank 1 queues a 1-s GPU sleep, then dies before the all_reduce: the sleep never
    // finishes (its process is gone) and rank 0's Work times out at 1.1 s.
    let text = format!(
        "[[op]]\nlabel = \"backlog\"\ngpu_sleep_us = 1000000\nranks = [1]\n{}",
        two_ranks("[[fault]]\nranks = [1]\nat = \"ar\"\nkind = \"die\"")
    );
    let timeline = simulate(&parse("t.toml", &text).unwrap());
    assert!(timeline.ranks[1].kernels.is_empty());
    let exit: Vec<u64> = timeline
        .watchdog
        .iter()
        .filter(|r| r.rank == 1 && r.event == WatchdogEvent::Exit)
        .map(|r| r.at_ns)
        .collect();
    assert_eq!(exit, [5_000], "died after the 5-µs launch");
    let kinds: Vec<FindingKind> = timeline.findings.iter().map(|f| f.kind).collect();
    assert_eq!(kinds, [FindingKind::WatchdogTimeout]);
    assert!(timeline.findings[0]
        .message
        .contains("rank 1 never joined collective 1"));
}

#[test]
fn a_process_that_dies_after_host_work_keeps_the_gpu_work_due_before_its_death() {
    // Rank 1 queues a 5-ms GPU sleep, then its host works for 10 ms and dies before the
    // all_reduce. The host reaches the fault at ≈ 10 ms, long before the simulation does: the
    // sleep (8 µs to 5.008 ms) ended before the death and is a completed kernel.
    let text = format!(
        "[[op]]\ngpu_sleep_us = 5000\nranks = [1]\n[[op]]\nhost_sleep_us = 10000\nranks = [1]\n{}",
        two_ranks("[[fault]]\nranks = [1]\nat = \"ar\"\nkind = \"die\"")
    );
    let timeline = simulate(&parse("t.toml", &text).unwrap());
    let rank = &timeline.ranks[1];
    let end = rank.end.expect("rank 1's process ended");
    assert_eq!(end.status, ExitStatus::Killed);
    let died_ns = end.at_ns.expect("at a known time");
    assert!(died_ns > 10_000_000, "after the host's 10 ms: {died_ns}");
    assert!(
        rank.unfinished_kernels.is_empty(),
        "{:?}",
        rank.unfinished_kernels
    );
    let sleep = rank.kernels.first().expect("the sleep completed");
    assert_eq!((sleep.start_ns, sleep.end_ns), (8_000, 5_008_000));
    assert!(sleep.end_ns < died_ns);
}

#[test]
fn after_clean_up_only_the_next_collective_on_the_aborted_communicator_raises_r27() {
    // Mode 2: rank 0 times out at 1.1 s and aborts at 61.1 s; its wait and `.item()` return
    // (15 µs), and its second iteration's all_reduce raises in the main thread.
    let text = format!(
        "repeat = 2\n[env]\nTORCH_NCCL_ASYNC_ERROR_HANDLING = 2\n{}",
        two_ranks("[[fault]]\nranks = [1]\nat = \"ar\"\nkind = \"hang\"")
    );
    assert_eq!(events_of(&text, 0, WatchdogEvent::Abort), [61_100_000_000]);
    assert_eq!(
        events_of(&text, 0, WatchdogEvent::Exit),
        [61_100_000_000 + 15_000]
    );
}

#[test]
fn no_handling_goes_on_to_the_next_pending_work_after_the_dump_wait_r27() {
    // Mode 0: rank 0 enqueued two all_reduces (20 µs and 50 µs); both are past their
    // deadline at the 1.1-s poll, but the watchdog handles the first, sleeps 60 s, and only
    // then reaches the second (61.1 s), as one pass of Watchdog::runLoop does. (The
    // program sleeps on past both.)
    let text = "[env]\nTORCH_NCCL_ASYNC_ERROR_HANDLING = 0\n[cluster]\nranks = 2\n[groups.world]\neager_init = true\ntimeout_s = 1\n[tensors]\nx = \"1MiB\"\n[[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\nasync_op = true\nwork = \"w\"\n[[op]]\nall_reduce = \"x\"\nasync_op = true\nwork = \"v\"\n[[op]]\nitem = \"x\"\n[[op]]\nhost_sleep_us = 200000000\n[[fault]]\nranks = [1]\nat = \"ar\"\nkind = \"hang\"\n";
    assert_eq!(
        events_of(text, 0, WatchdogEvent::Timeout),
        [1_100_000_000, 61_100_000_000]
    );
    assert_eq!(
        events_of(text, 0, WatchdogEvent::NoHandling),
        [61_100_000_000, 121_100_000_000]
    );
}

#[test]
fn a_skipped_collective_desyncs_the_sequence_numbers() {
    // Rank 1 skips the all_reduce of iteration 0, so its iteration-1 call is its SeqNum 1
    // and completes rank 0's first; rank 0's SeqNum 2 is never joined and times out at the
    // first poll past its enqueue + 1 s.
    let text = "repeat = 2\n[cluster]\nranks = 2\n[groups.world]\neager_init = true\ntimeout_s = 1\n[tensors]\nx = \"1MiB\"\n[[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\n[[op]]\nitem = \"x\"\n[[fault]]\nranks = [1]\nat = \"ar\"\nkind = \"skip\"\n";
    let timeline = simulate(&parse("t.toml", text).unwrap());
    assert_eq!(timeline.ranks[1].collectives.len(), 1);
    assert_eq!(timeline.ranks[1].collectives[0].iteration, 1);
    assert_eq!(
        timeline.ranks[0].collectives[0].end_ns,
        timeline.ranks[1].collectives[0].end_ns
    );
    let kinds: Vec<FindingKind> = timeline.findings.iter().map(|f| f.kind).collect();
    assert_eq!(kinds, [FindingKind::WatchdogTimeout]);
    assert!(timeline.findings[0]
        .message
        .contains("rank 1 never joined collective 2 (ALLREDUCE, world)"));
    assert_eq!(timeline.findings[0].iteration, Some(1));
    assert_eq!(
        timeline
            .watchdog
            .iter()
            .find(|r| r.event == WatchdogEvent::Timeout)
            .map(|r| r.at_ns),
        Some(1_100_000_000)
    );
}

#[test]
fn a_group_s_seq_nums_go_on_from_its_first_seq_num_in_the_desync_report() {
    // The group ran six collectives before the program (dumps whose ring buffer dropped
    // them): rank 1, which hangs before the program's first, stands at SeqNum 6, not 0.
    let text = "[cluster]\nranks = 2\n[groups.world]\neager_init = true\ntimeout_s = 1\n\
        first_seq_num = 7\n[env]\nTORCH_NCCL_DESYNC_DEBUG = 1\n[tensors]\nx = \"1MiB\"\n\
        [[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\n[[op]]\nitem = \"x\"\n\
        [[fault]]\nranks = [1]\nat = \"ar\"\nkind = \"hang\"\n";
    let timeline = simulate(&parse("t.toml", text).unwrap());
    assert!(
        (timeline.findings.iter()).any(|f| f.message.contains("WorkNCCL(SeqNum=7,")),
        "{:?}",
        timeline.findings
    );
    let report = timeline
        .watchdog
        .iter()
        .find(|r| r.event == WatchdogEvent::DesyncReport)
        .map(|r| r.message.as_str())
        .unwrap();
    assert!(
        report.contains("Desync debug report at SeqNum=7 "),
        "{report}"
    );
    assert!(
        report.contains("rank 0: last enqueued 7, last completed 6"),
        "{report}"
    );
    assert!(
        report.contains("rank 1: last enqueued 6, last completed 6"),
        "{report}"
    );
    assert!(
        report.contains("verdict: rank 1 never joined collective 7 (ALLREDUCE, world)"),
        "{report}"
    );
}

#[test]
fn the_watchdog_costs_no_processed_event_when_nothing_times_out() {
    // The same program with and without watchdog threads (blocking wait starts none, R15;
    // with no wait() it changes nothing else) processes the same events: the one deadline
    // event per group and rank is dropped unprocessed at the end.
    let program = |blocking: u8| {
        format!(
            "repeat = 50\n[cluster]\nranks = 4\n[env]\nTORCH_NCCL_BLOCKING_WAIT = {blocking}\n[groups.world]\neager_init = true\n[tensors]\nx = \"1MiB\"\n[[op]]\nall_reduce = \"x\"\n[[op]]\ngemm = [512, 512, 512]\n"
        )
    };
    let options = crate::engine::Options::default();
    let (with_watchdog, events) =
        crate::engine::simulate_with(&parse("t.toml", &program(0)).unwrap(), options.clone());
    let (_, events_without) =
        crate::engine::simulate_with(&parse("t.toml", &program(1)).unwrap(), options);
    assert!(with_watchdog.findings.is_empty());
    assert_eq!(events, events_without);
}

#[test]
fn each_process_group_has_its_own_watchdog_and_timeout() {
    // A subgroup with a 2-s timeout: rank 1 never joins its collective, so rank 0's
    // watchdog of that group (not the world's) fires at the first poll past 20 µs + 2 s.
    let text = "[cluster]\nranks = 4\n[groups.world]\neager_init = true\n[groups.pair]\nranks = [0, 1]\neager_init = true\ntimeout_s = 2\n[tensors]\nx = \"1MiB\"\n[[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\ngroup = \"pair\"\n[[op]]\nitem = \"x\"\n[[fault]]\nranks = [1]\nat = \"ar\"\nkind = \"hang\"\n";
    let timeline = simulate(&parse("t.toml", text).unwrap());
    let timeout = timeline
        .watchdog
        .iter()
        .find(|r| r.event == WatchdogEvent::Timeout)
        .unwrap();
    assert_eq!(
        (timeout.rank, timeout.group, timeout.at_ns),
        (0, Some(1), 2_100_000_000)
    );
    assert!(timeout.message.contains("Timeout(ms)=2000"));
    assert!(timeline.findings[0]
        .message
        .contains("rank 1 never joined collective 1 (ALLREDUCE, pair)"));
}

#[test]
fn every_fault_under_every_handling_mode_ends_the_run_with_findings() {
    // Each fault kind on each rank, at each collective, under each error-handling mode and
    // with blocking wait: the run ends (no hang, no panic) and says what went wrong.
    let kinds = [
        ("ar", "hang", ""),
        ("ar", "die", ""),
        ("ar", "async_error", "after_us = 1000"),
        ("ar", "watchdog_stuck", ""),
        ("ar", "mismatch", "size = \"2MiB\""),
        ("ar2", "skip", ""),
        ("ar2", "mismatch", "collective = \"broadcast\""),
    ];
    for (at, kind, extra) in kinds {
        for rank in 0..3 {
            for mode in 0..4 {
                for blocking in 0..2 {
                    let text = format!(
                        "repeat = 2\n[cluster]\nranks = 3\n[env]\nTORCH_NCCL_ASYNC_ERROR_HANDLING = {mode}\nTORCH_NCCL_BLOCKING_WAIT = {blocking}\nTORCH_NCCL_DESYNC_DEBUG = 1\nTORCH_NCCL_HEARTBEAT_TIMEOUT_SEC = 30\n[groups.world]\ntimeout_s = 10\n[tensors]\nx = \"1MiB\"\n[[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\nasync_op = true\nwork = \"w\"\n[[op]]\ngemm = [256, 256, 256]\n[[op]]\nwait = \"w\"\n[[op]]\nlabel = \"ar2\"\nall_reduce = \"x\"\n[[op]]\nitem = \"x\"\n[[fault]]\nranks = [{rank}]\nat = \"{at}\"\niteration = 1\nkind = \"{kind}\"\n{extra}\n"
                    );
                    let timeline = simulate(&parse("t.toml", &text).unwrap());
                    // Blocking wait starts no watchdog, so none can hang.
                    let harmless = kind == "watchdog_stuck" && blocking == 1;
                    assert_eq!(
                        timeline.findings.is_empty(),
                        harmless,
                        "{kind} at {at} on rank {rank}, mode {mode}, blocking {blocking}"
                    );
                }
            }
        }
    }
}

#[test]
fn the_heartbeat_monitor_can_kill_a_watchdog_asleep_in_a_long_dump_wait_r28() {
    // A 1-s heartbeat timeout is shorter than the 60-s dump wait: rank 0's watchdog
    // stops beating at the 1.1-s timeout poll. Its monitor reads the dump signal at 2 s and
    // leaves its loop (its reads end there): it sleeps 1 s and aborts the process at 3 s,
    // long before the watchdog's sleep ends. Without the dump signal
    // (`TORCH_NCCL_DUMP_ON_TIMEOUT=0`, no sleep for the dumps) nothing stalls.
    let text = two_ranks(
        "[env]\nTORCH_NCCL_HEARTBEAT_TIMEOUT_SEC = 1\n[[fault]]\nranks = [1]\nat = \"ar\"\nkind = \"hang\"",
    );
    assert_eq!(events_of(&text, 0, WatchdogEvent::Exit), [3_000_000_000]);
    assert!(events_of(&text, 0, WatchdogEvent::Abort).is_empty());
}

#[test]
fn a_host_running_ahead_sees_the_abort_at_its_simulated_time_r27() {
    // Mode 2: rank 0 times out at 1.1 s and aborts at 61.1 s. Its host does not block
    // (no `.item()`): it sleeps 70 s and reaches the next iteration's all_reduce at
    // ≈ 70 s. That call starts after the abort, so it sees the aborted communicator and
    // raises, though the host ran ahead of the simulation.
    let text = "repeat = 2\n[env]\nTORCH_NCCL_ASYNC_ERROR_HANDLING = 2\n[cluster]\nranks = 2\n[groups.world]\neager_init = true\ntimeout_s = 1\n[tensors]\nx = \"1MiB\"\n[[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\nasync_op = true\nwork = \"w\"\n[[op]]\nhost_sleep_us = 70000000\n[[fault]]\nranks = [1]\nat = \"ar\"\nkind = \"hang\"\n";
    let timeline = simulate(&parse("t.toml", text).unwrap());
    assert_eq!(events_of(text, 0, WatchdogEvent::Abort), [61_100_000_000]);
    let exit = timeline
        .watchdog
        .iter()
        .find(|r| r.rank == 0 && r.event == WatchdogEvent::Exit)
        .unwrap();
    assert!(
        exit.message.contains("DistBackendError"),
        "{}",
        exit.message
    );
    assert!(exit.at_ns > 70_000_000_000, "{}", exit.at_ns);
    let raised = timeline
        .findings
        .iter()
        .find(|f| f.kind == FindingKind::AsyncError)
        .unwrap();
    assert_eq!((raised.rank, raised.iteration), (Some(0), Some(1)));
}

#[test]
fn a_process_taken_down_by_its_watchdog_runs_nothing_after_its_death_r27() {
    // Mode 3: rank 0 exits at 61.1 s; its host, sleeping 20 s per iteration and never
    // blocking, would otherwise have gone on calling past that instant.
    let text = "repeat = 10\n[cluster]\nranks = 2\n[groups.world]\neager_init = true\ntimeout_s = 1\n[tensors]\nx = \"1MiB\"\n[[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\nasync_op = true\nwork = \"w\"\n[[op]]\nhost_sleep_us = 20000000\n[[fault]]\nranks = [1]\nat = \"ar\"\nkind = \"hang\"\n";
    let timeline = simulate(&parse("t.toml", text).unwrap());
    assert_eq!(events_of(text, 0, WatchdogEvent::Exit), [61_100_000_000]);
    let starts: Vec<u64> = timeline.ranks[0].host.iter().map(|h| h.start_ns).collect();
    assert!(!starts.is_empty());
    assert!(starts.iter().all(|&t| t <= 61_100_000_000), "{starts:?}");
    // The sleep that began at ≈ 60 s never ended: the process died in it.
    assert!(timeline.ranks[0]
        .host
        .iter()
        .all(|h| h.end_ns <= 61_100_000_000));
}

#[test]
fn a_communicator_that_never_forms_names_its_waiting_ranks_with_a_verb_that_agrees() {
    let never_forms = |ranks: u32, callers: &str| {
        let text = format!(
            "[cluster]\nranks = {ranks}\n[tensors]\nx = \"1MiB\"\n[[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\nranks = [{callers}]\n"
        );
        let timeline = simulate(&parse("t.toml", &text).unwrap());
        let finding = timeline
            .findings
            .iter()
            .find(|f| f.message.contains("never forms"))
            .expect("a lazy init that never completes")
            .message
            .clone();
        finding
    };
    let one = never_forms(2, "0");
    assert!(
        one.ends_with("(R8): rank 0 waits in its lazy init at ar (line 5), the process of rank 1 ended before issuing a collective on it"),
        "{one}"
    );
    let two = never_forms(4, "0, 1");
    assert!(
        two.ends_with("(R8): ranks 0-1 (2 ranks) wait in its lazy init at ar (line 5), the processes of ranks 2-3 (2 ranks) ended before issuing a collective on it"),
        "{two}"
    );
}

#[test]
fn a_deadlock_finding_tells_ranks_that_called_a_collective_from_those_that_never_did() {
    // Rank 3 hangs before ar1; ranks 0-2 call ar1 and ar2, whose kernel queues behind ar1's
    // spinning one. They called ar2: only rank 3 never launched it.
    let text = "[env]\nTORCH_NCCL_ASYNC_ERROR_HANDLING = 0\nTORCH_NCCL_ENABLE_MONITORING = 0\n[cluster]\nranks = 4\n[groups.world]\neager_init = true\ntimeout_s = 1\n[tensors]\na = \"1MiB\"\nb = \"1MiB\"\n[[op]]\nlabel = \"ar1\"\nall_reduce = \"a\"\nasync_op = true\nwork = \"w1\"\n[[op]]\nlabel = \"ar2\"\nall_reduce = \"b\"\nasync_op = true\nwork = \"w2\"\n[[op]]\nwait = \"w2\"\n[[op]]\ndevice_sync = true\n[[fault]]\nranks = [3]\nat = \"ar1\"\nkind = \"hang\"\n";
    let timeline = simulate(&parse("t.toml", text).unwrap());
    let never_completes = |op: &str| {
        timeline
            .findings
            .iter()
            .find(|f| {
                f.kind == FindingKind::Deadlock
                    && f.message.starts_with(&format!("collective {op} "))
            })
            .unwrap_or_else(|| panic!("{op}: {:#?}", timeline.findings))
            .message
            .clone()
    };
    let first = never_completes("ar1");
    assert!(
        first.ends_with(
            "ranks 0-2 (3 ranks) started their kernels and spin (R16), rank 3 never launched it"
        ),
        "{first}"
    );
    let second = never_completes("ar2");
    assert!(
        second.ends_with("ranks 0-2 (3 ranks) called it but their kernels never started, rank 3 never launched it"),
        "{second}"
    );
}

#[test]
fn a_deadlock_finding_does_not_blame_a_dead_rank_for_what_its_death_stopped() {
    // Rank 1 dies before the all_reduce; under mode 0, without the heartbeat monitor
    // (which would end them after the dump signal, R28), ranks 0 and 2 stay blocked in
    // `.item()`: the collective never completes because rank 1's process ended.
    let text = "[env]\nTORCH_NCCL_ASYNC_ERROR_HANDLING = 0\nTORCH_NCCL_ENABLE_MONITORING = 0\n[cluster]\nranks = 3\n[groups.world]\neager_init = true\ntimeout_s = 1\n[tensors]\nx = \"1MiB\"\n[[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\n[[op]]\nitem = \"x\"\n[[fault]]\nranks = [1]\nat = \"ar\"\nkind = \"die\"\n";
    let timeline = simulate(&parse("t.toml", text).unwrap());
    let deadlock = timeline
        .findings
        .iter()
        .find(|f| f.kind == FindingKind::Deadlock)
        .unwrap();
    assert!(
        deadlock.message.ends_with(
            "ranks 0,2 (2 ranks) started their kernels and spin (R16), the process of rank 1 ended before launching it"
        ),
        "{}",
        deadlock.message
    );
    let timeout = timeline
        .findings
        .iter()
        .find(|f| f.kind == FindingKind::WatchdogTimeout)
        .unwrap();
    // Ranks 0 and 2 behave alike: one finding stands for both.
    assert_eq!(timeout.stands_for.to_string(), "0,2");
    assert!(
        timeout.message.ends_with(
            "rank 1 never joined collective 1 (ALLREDUCE, world): its process ended; ranks 0,2 (2 ranks) waiting."
        ),
        "{}",
        timeout.message
    );
}

/// Rank 0's network fails under its all_reduce, NCCL reporting it 1 ms after the 20-µs
/// enqueue; `extra` goes into `[env]`, `between` between the all_reduce and
/// `is_completed()`, `wait()`.
fn failed_work(extra: &str, between: &str) -> crate::timeline::Timeline {
    let text = format!(
        "[env]\n{extra}\n[cluster]\nranks = 2\n[groups.world]\neager_init = true\ntimeout_s = 1\n[tensors]\nx = \"1MiB\"\n[[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\nasync_op = true\nwork = \"w\"\n{between}[[op]]\nis_completed = \"w\"\n[[op]]\nlabel = \"wait\"\nwait = \"w\"\n[[fault]]\nranks = [0]\nat = \"ar\"\nkind = \"async_error\"\nafter_us = 1000\n"
    );
    simulate(&parse("t.toml", &text).unwrap())
}

#[test]
fn a_work_failed_by_an_async_error_is_completed_and_its_wait_raises_r27() {
    // The host sleeps 5 ms, past the error: is_completed() is true, wait() aborts the
    // communicator (no least time by default, the device drained) and raises; the watchdog
    // finds the error at the raise.
    let timeline = failed_work("", "[[op]]\nhost_sleep_us = 5000\n");
    assert_eq!(timeline.ranks[0].queries.len(), 1);
    assert!(timeline.ranks[0].queries[0].completed);
    let raised = timeline
        .findings
        .iter()
        .find(|f| f.kind == FindingKind::AsyncError && f.rank == Some(0) && f.op == Some(3))
        .expect("the wait() op raises");
    assert!(
        raised.message.contains("DistBackendError"),
        "{}",
        raised.message
    );
    let exit = timeline
        .watchdog
        .iter()
        .find(|r| r.rank == 0 && r.event == WatchdogEvent::Exit)
        .unwrap();
    assert_eq!(exit.message, raised.message);
    let wait_call = timeline.ranks[0].host.last().unwrap();
    assert_eq!(wait_call.op, 3);
    assert_eq!(
        wait_call.end_ns - wait_call.start_ns,
        4_000,
        "it raised after its stream wait (`host.wait_us`)"
    );
    // Before the error, is_completed() is false and wait() returns.
    let timeline = failed_work("", "");
    assert!(!timeline.ranks[0].queries[0].completed);
    assert!(timeline.ranks[0].host.iter().any(|h| h.op == 2));
}

#[test]
fn a_blocking_wait_raises_at_the_first_poll_after_the_async_error_r15_r27() {
    // wait() starts polling at ≈ 35 µs, every 1 ms: the first poll past the error at
    // 1.02 ms raises it, not the group timeout at 1 s.
    let timeline = failed_work("TORCH_NCCL_BLOCKING_WAIT = 1", "");
    let raised = timeline
        .findings
        .iter()
        .find(|f| f.rank == Some(0))
        .unwrap();
    assert_eq!(raised.kind, FindingKind::AsyncError, "{}", raised.message);
    let wait_call = timeline.ranks[0].host.last().unwrap();
    assert!(
        (1_020_000..2_100_000).contains(&wait_call.end_ns),
        "{}",
        wait_call.end_ns
    );
}

#[test]
fn a_blocking_wait_aborts_the_communicator_before_it_raises_the_async_error_r15_r27() {
    // PyTorch's `WorkNCCL::wait()`: the poll that finds the communicator's error leaves the
    // loop, aborts the Work's communicator, then rethrows the error. The raise comes once the
    // abort returned (`host.comm_abort_us`, here 50 ms, past the first poll after the error
    // at 1.02 ms), the failed collective's kernel is ended by the abort, and caught, the
    // program goes on with the communicator aborted: its next collective raises.
    let text = "[env]\nTORCH_NCCL_BLOCKING_WAIT = 1\n[host]\ncomm_abort_us = 50000\n\
        [cluster]\nranks = 2\n[groups.world]\neager_init = true\ntimeout_s = 1\n\
        [tensors]\nx = \"1MiB\"\n\
        [[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\nasync_op = true\nwork = \"w\"\n\
        [[op]]\nlabel = \"wait\"\nwait = \"w\"\ncatch = true\n\
        [[op]]\nlabel = \"again\"\nall_reduce = \"x\"\ncatch = true\n\
        [[op]]\ndevice_sync = true\n\
        [[fault]]\nranks = [0]\nat = \"ar\"\nkind = \"async_error\"\nafter_us = 1000\n";
    let timeline = simulate(&parse("t.toml", text).unwrap());
    let rank0 = &timeline.ranks[0];
    let [raised, again] = rank0.exceptions.as_slice() else {
        panic!("{:?}", rank0.exceptions)
    };
    assert!(
        raised.message.contains("unhandled system error") || raised.message.contains("async"),
        "{}",
        raised.message
    );
    assert!(
        (51_020_000..53_000_000).contains(&raised.at_ns),
        "the raise waits for the abort: {}",
        raised.at_ns
    );
    let abort = timeline
        .watchdog
        .iter()
        .find(|r| r.rank == 0 && r.thread == ThreadKind::Main && r.event == WatchdogEvent::Abort)
        .expect("the main thread's abort is recorded");
    assert_eq!(abort.at_ns, raised.at_ns);
    assert!(
        again.message.contains("aborted"),
        "the next collective meets the aborted communicator: {}",
        again.message
    );
    assert_eq!(rank0.end.unwrap().status, ExitStatus::Clean);
}

#[test]
fn the_watchdog_finds_the_error_a_wait_timeout_found_once_the_main_threads_abort_returned_r15_r27()
{
    // `wait(timeout)` without blocking wait: the watchdog runs. The wait's poll finds rank 0's
    // async error at 1 ms and the main thread aborts the communicator for 150 ms, over the
    // watchdog's poll at 100 ms: the watchdog blocks on the abort (R15, R28), so it finds the
    // Work's error once the abort returned, in the raise's millisecond, as after a timeout;
    // uncaught, before the exception ends the process, whose status stays `raised`.
    for catch in [true, false] {
        let text = format!(
            "[host]\ncomm_abort_us = 150000\n[cluster]\nranks = 2\n[groups.world]\n\
             eager_init = true\ntimeout_s = 2\n[tensors]\nx = \"1MiB\"\n\
             [[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\nasync_op = true\nwork = \"w\"\n\
             [[op]]\nwait = \"w\"\ntimeout_ms = 5000\ncatch = {catch}\n\
             [[op]]\ndevice_sync = true\n\
             [[fault]]\nranks = [0]\nat = \"ar\"\nkind = \"async_error\"\nafter_us = 1000\n"
        );
        let timeline = simulate(&parse("t.toml", &text).unwrap());
        let raise = (timeline.watchdog.iter())
            .find(|r| {
                r.rank == 0 && r.thread == ThreadKind::Main && r.event == WatchdogEvent::Abort
            })
            .expect("the main thread's abort returned");
        let found = (timeline.watchdog.iter())
            .filter(|r| r.rank == 0 && r.thread == ThreadKind::Watchdog)
            .find(|r| r.event == WatchdogEvent::AsyncError)
            .unwrap_or_else(|| panic!("catch {catch}: the watchdog finds the error"));
        assert_eq!(found.at_ns, raise.at_ns, "catch {catch}");
        let status = timeline.ranks[0].end.unwrap().status;
        if !catch {
            assert_eq!(status, ExitStatus::Raised);
        }
    }
}

/// Two ranks under blocking wait with a 500 ms group timeout; `ops` follow.
fn blocking_wait(ops: &str) -> crate::timeline::Timeline {
    let text = format!(
        "[cluster]\nranks = 2\n[env]\nTORCH_NCCL_BLOCKING_WAIT = 1\n[groups.world]\neager_init = true\ntimeout_s = 0.5\n[tensors]\nx = \"1MiB\"\ny = \"1MiB\"\n{ops}"
    );
    simulate(&parse("t.toml", &text).unwrap())
}

#[test]
fn the_abort_at_a_wait_s_timeout_ends_the_communicator_s_collectives_ahead_r15() {
    // Rank 1 hangs; rank 0's waited collective queues behind an unwaited one of the same
    // communicator. The abort at the timeout ends that one, so the wait raises.
    let timeline = blocking_wait(
        "[[op]]\nlabel = \"first\"\nall_reduce = \"x\"\nasync_op = true\nwork = \"a\"\n\
         [[op]]\nlabel = \"ar\"\nall_reduce = \"y\"\nasync_op = true\nwork = \"w\"\n\
         [[op]]\nwait = \"w\"\ncatch = true\n[[op]]\nkernel = { us = 5 }\n\
         [[fault]]\nranks = [1]\nat = \"first\"\nkind = \"hang\"\n",
    );
    let rank0 = &timeline.ranks[0];
    let [raised] = rank0.exceptions.as_slice() else {
        panic!("{:?}", rank0.exceptions)
    };
    assert!(
        (500_000_000..502_000_000).contains(&raised.at_ns),
        "{}",
        raised.at_ns
    );
    assert_eq!(rank0.end.unwrap().status, ExitStatus::Clean);
}

#[test]
fn a_collective_of_an_aborted_communicator_never_completes_r15() {
    // Rank 0's collective is behind a 2 s sleep; it times out at 0.5 s, raises once the
    // sleep drained, uncaught, and its process ends. Its collective starts only then, on
    // an aborted communicator: it completes nothing for rank 1.
    let timeline = blocking_wait(
        "[[op]]\ngpu_sleep_us = 2_000_000\nranks = [0]\n\
         [[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\nasync_op = true\nwork = \"w\"\n\
         [[op]]\nwait = \"w\"\nranks = [0]\n[[op]]\ndevice_sync = true\n",
    );
    let end = timeline.ranks[0].end.unwrap();
    assert_eq!(end.status, ExitStatus::Raised);
    let sleep_end = timeline.ranks[0].kernels[0].end_ns;
    assert!((sleep_end..sleep_end + 100_000).contains(&end.at_ns.unwrap()));
    assert!(timeline
        .ranks
        .iter()
        .all(|rank| rank.collectives.is_empty()));
    assert_ne!(timeline.ranks[1].end.unwrap().status, ExitStatus::Clean);
    // A peer that joins during the abort completes nothing either.
    let late = blocking_wait(
        "[[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\nasync_op = true\nwork = \"w\"\n\
         [[op]]\nwait = \"w\"\ncatch = true\n\
         [[perturb]]\nranks = [1]\nbefore = \"ar\"\nhost_delay_us = 700000\n",
    );
    assert!(late.ranks.iter().all(|rank| rank.collectives.is_empty()));
    assert!(late.ranks.iter().all(|rank| rank.exceptions.len() == 1));
}

#[test]
fn a_deadlock_report_names_the_rank_that_aborted_its_communicator_r15() {
    // Rank 0 times out behind a 2 s sleep and aborts; its collective then starts and ends
    // at once. Rank 1's copy spins: the report says who spins and who aborted.
    let spins = blocking_wait(
        "[[op]]\ngpu_sleep_us = 2_000_000\nranks = [0]\n\
         [[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\nasync_op = true\nwork = \"w\"\n\
         [[op]]\nwait = \"w\"\nranks = [0]\ncatch = true\n[[op]]\ndevice_sync = true\n",
    );
    let deadlock = spins
        .findings
        .iter()
        .find(|f| f.kind == FindingKind::Deadlock && f.message.starts_with("collective ar"))
        .expect("rank 1's copy spins");
    assert!(
        deadlock
            .message
            .contains("rank 1 started its kernel and spins (R16), rank 0 aborted its communicator"),
        "{}",
        deadlock.message
    );
    // Both ranks abort: nobody waits on the collective, and no deadlock names it.
    let both = blocking_wait(
        "[[op]]\ngpu_sleep_us = 2_000_000\n\
         [[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\nasync_op = true\nwork = \"w\"\n\
         [[op]]\nwait = \"w\"\ncatch = true\n\
         [[op]]\nlabel = \"h\"\nhost_sleep_us = 3_000_000\n\
         [[fault]]\nranks = [0]\nat = \"h\"\nkind = \"hang\"\n",
    );
    assert!(
        both.findings
            .iter()
            .all(|f| !f.message.starts_with("collective ar")),
        "{:?}",
        both.findings
    );
}

#[test]
fn the_abort_at_a_wait_s_timeout_raises_once_the_whole_device_drained_r15() {
    // Measured on an H200 (tests/data/torch/probes/wait_timeout_abort.txt): a 3 s sleep on
    // a side stream the collective does not wait for, a 1 s sleep ahead of the collective
    // on the current stream; timed out at 0.5 s, the raise came at the side sleep's end.
    // A second Work queued behind the aborted one is then complete and its wait returns.
    let timeline = blocking_wait(
        "[streams]\nside = {}\n\
         [[op]]\nset_stream = \"side\"\n[[op]]\nlabel = \"side_sleep\"\ngpu_sleep_us = 3_000_000\n\
         [[op]]\nset_stream = \"default\"\n[[op]]\ngpu_sleep_us = 1_000_000\n\
         [[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\nasync_op = true\nwork = \"w\"\n\
         [[op]]\nlabel = \"ar2\"\nall_reduce = \"y\"\nasync_op = true\nwork = \"w2\"\n\
         [[op]]\nwait = \"w\"\ncatch = true\n[[op]]\nlabel = \"wait_w2\"\nwait = \"w2\"\n\
         [[op]]\nkernel = { us = 5 }\n\
         [[fault]]\nranks = [1]\nat = \"ar\"\nkind = \"hang\"\n",
    );
    let rank0 = &timeline.ranks[0];
    let side_end_ns = rank0.kernels[0].end_ns;
    let [raised] = rank0.exceptions.as_slice() else {
        panic!("{:?}", rank0.exceptions)
    };
    assert!(
        (side_end_ns..side_end_ns + 100_000).contains(&raised.at_ns),
        "raised at {} ns, the side stream drained at {side_end_ns} ns",
        raised.at_ns
    );
    let wait_w2 = timeline.ops.iter().find(|op| op.name == "wait_w2").unwrap();
    let second = rank0
        .host
        .iter()
        .find(|call| call.op == wait_w2.index)
        .unwrap();
    assert!(second.end_ns - second.start_ns < 100_000, "{second:?}");
    assert_eq!(rank0.exceptions.len(), 1, "the second wait does not raise");
    assert_eq!(rank0.end.unwrap().status, ExitStatus::Clean);
}

/// `wait(timeout)` at 0.5 s while a sleep on a side stream never ends, heartbeat 15 s, the
/// stack trace's 4 s: tests/data/torch/probes/never_ending_side.txt's program.
const NEVER_ENDING_SIDE: &str =
    "[cluster]\nranks = 1\n[env]\nTORCH_NCCL_HEARTBEAT_TIMEOUT_SEC = 15\n\
     [host]\nwatchdog_stack_trace_us = 4_000_000\n\
     [groups.world]\neager_init = true\n[streams]\nside = {}\n[tensors]\nx = \"1MiB\"\n\
     [[op]]\nset_stream = \"side\"\n[[op]]\ngpu_sleep_us = 3_600_000_000\n\
     [[op]]\nset_stream = \"default\"\n[[op]]\ngpu_sleep_us = 1_000_000\n\
     [[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\nasync_op = true\nwork = \"w\"\n\
     [[op]]\nwait = \"w\"\ntimeout_ms = 500\ncatch = true\n";

/// The time of the first watchdog record of `event`.
fn first_at(timeline: &Timeline, event: WatchdogEvent) -> Option<u64> {
    (timeline.watchdog.iter())
        .find(|record| record.event == event)
        .map(|record| record.at_ns)
}

#[test]
fn an_abort_that_never_returns_stalls_the_watchdog_and_the_monitor_ends_the_process_r15_r28() {
    // Measured on an H200 (tests/data/torch/probes/never_ending_side.txt): the abort never
    // returns, the monitor finds the watchdog stuck at its second read (30 s), dumps (the
    // stack trace's 4 s) and sleeps 15 s before it aborts the process.
    let text = NEVER_ENDING_SIDE;
    let timeline = simulate(&parse("t.toml", text).unwrap());
    assert_eq!(
        first_at(&timeline, WatchdogEvent::HeartbeatTimeout),
        Some(30_000_000_000)
    );
    assert_eq!(
        first_at(&timeline, WatchdogEvent::Exit),
        Some(49_000_000_000)
    );
    let rank0 = &timeline.ranks[0];
    assert!(rank0.exceptions.is_empty(), "the wait never raised");
    assert_eq!(
        rank0.end,
        Some(ProcessEnd {
            status: ExitStatus::Aborted,
            at_ns: Some(49_000_000_000)
        })
    );
    // TORCH_NCCL_ENABLE_MONITORING=0 (tests/data/torch/probes/stalled_monitor_disabled.txt,
    // two runs): the monitor still finds the stalled heartbeat, dumps and sleeps, then
    // says it would have terminated the process, which lives on.
    let disabled = text.replace(
        "TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC = 15",
        "TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC = 15\nTORCH_NCCL_ENABLE_MONITORING = 0",
    );
    let timeline = simulate(&parse("t.toml", &disabled).unwrap());
    assert_eq!(
        first_at(&timeline, WatchdogEvent::HeartbeatTimeout),
        Some(30_000_000_000)
    );
    assert_eq!(
        first_at(&timeline, WatchdogEvent::MonitorDisabled),
        Some(49_000_000_000)
    );
    assert_eq!(first_at(&timeline, WatchdogEvent::Exit), None);
    let end = timeline.ranks[0].end.expect("the run ended");
    assert_ne!(end.status, ExitStatus::Aborted, "{end:?}");
    // The 3-s side sleep of the measured drain, the default 480-s heartbeat: the abort
    // returns at the sleep's end, so the monitor's read at 960 s, asked for by the abort,
    // finds the watchdog beating (no error handling and no dump signal, R28, keep the
    // process alive till then).
    let short = text.replace("3_600_000_000", "3_000_000").replace(
        "TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC = 15",
        "TORCH_NCCL_ASYNC_ERROR_HANDLING = 0\nTORCH_NCCL_DUMP_ON_TIMEOUT = 0",
    ) + "[[op]]\nhost_sleep_us = 1_000_000_000\n";
    let timeline = simulate(&parse("t.toml", &short).unwrap());
    assert!(timeline.ranks[0]
        .host
        .iter()
        .any(|call| call.end_ns > 960_000_000_000));
    assert!(timeline
        .watchdog
        .iter()
        .all(|record| record.event != WatchdogEvent::HeartbeatTimeout));
    assert_eq!(timeline.ranks[0].exceptions.len(), 1);
}

/// [`NEVER_ENDING_SIDE`] with the collective, its wait and the abort on `sub = [0]`.
fn on_a_subgroup() -> String {
    NEVER_ENDING_SIDE
        .replace(
            "[groups.world]\neager_init = true\n",
            "[groups.world]\neager_init = true\n[groups.sub]\nranks = [0]\neager_init = true\n",
        )
        .replace("work = \"w\"\n", "work = \"w\"\ngroup = \"sub\"\n")
}

#[test]
fn a_subgroup_s_stuck_watchdog_is_its_own_monitor_s_and_the_default_monitor_dumps_r28() {
    // Measured on an H200 (tests/data/torch/probes/subgroup_monitor.txt, two runs): the
    // subgroup's monitor finds its watchdog stuck and sets the process's dump flag; the
    // default group's monitor reads it at its next wake and dumps; the subgroup's monitor
    // aborts the process after its sleep.
    let subgroup = on_a_subgroup();
    let timeline = simulate(&parse("t.toml", &subgroup).unwrap());
    let records: Vec<(u64, Option<u16>, WatchdogEvent)> = (timeline.watchdog.iter())
        .filter(|record| record.thread == ThreadKind::HeartbeatMonitor)
        .map(|record| (record.at_ns, record.group, record.event))
        .collect();
    assert_eq!(
        records,
        [
            (30_000_000_000, Some(1), WatchdogEvent::HeartbeatTimeout),
            (31_000_000_000, Some(0), WatchdogEvent::Dump),
            (45_000_000_000, Some(1), WatchdogEvent::Exit),
        ]
    );
    assert_eq!(timeline.flight_recorder.len(), 1, "the rank dumped");
    // Without dumps on timeout (measured, two runs): no flag, no dump, the same abort.
    let no_dump = subgroup.replace("[env]\n", "[env]\nTORCH_NCCL_DUMP_ON_TIMEOUT = 0\n");
    let timeline = simulate(&parse("t.toml", &no_dump).unwrap());
    assert!(timeline.flight_recorder.is_empty());
    assert!(timeline
        .watchdog
        .iter()
        .all(|r| r.event != WatchdogEvent::Dump));
    assert_eq!(
        first_at(&timeline, WatchdogEvent::Exit),
        Some(45_000_000_000)
    );
}

#[test]
fn a_subgroup_s_dump_flag_is_its_process_s_own_r28() {
    // A second rank, outside the subgroup, sleeps on untouched by rank 0's flag (no dump, no
    // abort), while rank 0 is aborted as on its own.
    let two_ranks = on_a_subgroup()
        .replace("ranks = 1\n", "ranks = 2\n")
        .replace("[[op]]\n", "[[op]]\nranks = [0]\n")
        + "[[op]]\nranks = [1]\nhost_sleep_us = 100_000_000\n";
    let timeline = simulate(&parse("t.toml", &two_ranks).unwrap());
    assert!(
        timeline.watchdog.iter().all(|r| r.rank == 0),
        "rank 1 untouched"
    );
    assert_eq!(timeline.flight_recorder.len(), 1, "rank 0 alone dumped");
    let ends: Vec<ExitStatus> = (timeline.ranks.iter())
        .map(|rank| rank.end.expect("ended").status)
        .collect();
    assert_eq!(ends, [ExitStatus::Aborted, ExitStatus::Clean]);
}

#[test]
fn a_member_that_dies_while_the_data_moves_stops_the_collective_on_the_others_r16() {
    // Found by the property test `a_process_that_dies_runs_nothing_more_on_its_gpu`: rank 2's
    // process dies 5 µs after the data of world collective 5 started moving (every rank's
    // kernel running). The `die` fault: collectives it joined never complete, so ranks 0 and 1
    // wait for its data until their watchdog; before, their collective 5 completed as though
    // rank 2 had lived on, with a data start no other record matched.
    let text = "repeat = 2\ndestroy_process_group = true\ntorch = \"2.12\"\n[cluster]\nranks = 3\nranks_per_node = 2\n[host]\ncomm_init_us = 50\ncomm_abort_us = 700\n[env]\nTORCH_NCCL_BLOCKING_WAIT = 0\n[tensors]\na = \"4KiB\"\nb = \"8MiB\"\nc = \"4KiB\"\n[streams]\ns1 = {}\ns2 = { priority = \"high\" }\n[groups]\npair = { ranks = [0, 1] }\n[[op]]\nall_reduce = \"a\"\nasync_op = true\nwork = \"w0\"\n[[op]]\nall_reduce = \"a\"\nasync_op = true\nwork = \"w1\"\n[[op]]\ngpu_sleep_us = 1\n[[op]]\ngpu_sleep_us = 1\n[[op]]\nkernel = { us = 1 }\n[[op]]\nmark = \"m0\"\n[[op]]\nstream_sync = \"default\"\n[[op]]\nlabel = \"dies\"\nhost_sleep_us = 1\n[[op]]\nall_gather = \"a\"\n[[op]]\nhost_sleep_us = 7\n[[op]]\nall_reduce = \"a\"\ngroup = \"pair\"\n[[op]]\nall_reduce = \"a\"\nasync_op = true\nwork = \"w2\"\n[[fault]]\nranks = [2]\nat = \"dies\"\niteration = 1\nkind = \"die\"\n";
    let timeline: Timeline = simulate(&parse("t.toml", text).unwrap());
    let died_ns = timeline.ranks[2].end.and_then(|end| end.at_ns).unwrap();
    for survivor in &timeline.ranks[..2] {
        assert!(
            survivor.collectives.iter().all(|c| c.seq != 5),
            "{:?}",
            survivor.collectives
        );
        let stopped = (survivor.unfinished_collectives.iter())
            .find(|c| c.group == 0 && c.seq == 5)
            .unwrap();
        assert!(stopped.kernel_start_ns.unwrap() < died_ns);
    }
    assert!(
        timeline
            .findings
            .iter()
            .any(|f| f.kind == FindingKind::WatchdogTimeout
                && f.message.contains("SeqNum=5")
                && f.message.contains("Diagnosis: every rank enqueued and started collective 5; rank 2: its process ended before it finished")),
        "{:?}",
        timeline.findings
    );
}

#[test]
fn a_member_that_aborted_before_another_dies_while_the_data_moves_finishes_r16_r27() {
    // Rank 1's wait times out at 15 ms while the collective's data moves (10 ms to ≈ 48 ms):
    // its main thread aborts the communicator, which leaves a moving collective to run to its
    // end (R15, R27). Rank 0 dies at ≈ 20 ms: the collective never completes on rank 0, but
    // rank 1's aborted communicator no longer waits for rank 0's data, so its collective
    // still ends when the data would have.
    let text = "[cluster]\nranks = 2\n[env]\nTORCH_NCCL_BLOCKING_WAIT = 1\n[groups.world]\neager_init = true\n[tensors]\nx = \"16GiB\"\n[[op]]\nranks = [0]\nhost_sleep_us = 10_000\n[[op]]\nall_reduce = \"x\"\nasync_op = true\nwork = \"w\"\n[[op]]\nranks = [0]\ngpu_sleep_us = 10_000\n[[op]]\nranks = [0]\nstream_sync = \"default\"\n[[op]]\nlabel = \"dies\"\nhost_sleep_us = 1\n[[op]]\nwait = \"w\"\ntimeout_ms = 15\n[[fault]]\nranks = [0]\nat = \"dies\"\nkind = \"die\"\n";
    let timeline = simulate(&parse("t.toml", text).unwrap());
    let aborted_ns = first_at(&timeline, WatchdogEvent::WaitTimeout).unwrap();
    let died_ns = timeline.ranks[0].end.and_then(|end| end.at_ns).unwrap();
    let [collective] = timeline.ranks[1].collectives.as_slice() else {
        panic!("{:?}", timeline.ranks[1]);
    };
    assert!(aborted_ns < died_ns && collective.data_start_ns < aborted_ns);
    assert!(collective.end_ns > died_ns, "{collective:?}");
    assert!(timeline.ranks[1].unfinished_collectives.is_empty());
    assert!(timeline.ranks[0].collectives.is_empty());
    assert_eq!(timeline.ranks[0].unfinished_collectives.len(), 1);
}
