use super::super::fake::{
    enqueue, enqueue_listed, finding, per_rank, split, time_out_rank_0, two_ranks, wake, woken,
    FakeRun, DUMP_WAIT_OVER_NS,
};
use super::super::FindingAbout;
use super::super::{Command, Failure, Wake};
use crate::timeline::{ExitStatus, FindingKind, WatchdogEvent};

#[test]
fn the_deadline_is_the_first_poll_at_or_after_enqueue_plus_timeout_r26() {
    let scenario = two_ranks("", "");
    let mut failure = Failure::new(&scenario, per_rank(&scenario));
    let run = FakeRun::default().with_work(0, 0, 1).with_work(1, 0, 1);
    // Enqueued at 0: enqueue + timeout falls on a poll, and that poll is the deadline.
    assert_eq!(
        enqueue(&mut failure, &run, (0, 0), 0),
        [wake(0, Wake::Check, 1_000_000_000)]
    );
    // One nanosecond later, it is the next poll.
    assert_eq!(
        enqueue(&mut failure, &run, (1, 0), 1),
        [wake(1, Wake::Check, 1_100_000_000)]
    );
    // At the deadline itself the Work times out (deadline >= poll).
    let (commands, _) = split(woken(&mut failure, &run, 0, Wake::Check, 1_000_000_000));
    assert_eq!(
        commands[0],
        finding(FindingKind::WatchdogTimeout, 0, FindingAbout::Work(0))
    );
}

#[test]
fn a_work_listed_past_its_deadline_times_out_at_the_first_poll_after_the_listing_r26() {
    // Enqueued at 20 µs, listed at 2.05 s (its call blocked behind a full launch queue): the
    // deadline (1.1 s) is found at the 2.1-s poll, the first that has the Work on the list,
    // whatever the simulation's time when the host listed it. Listed on a poll: the next one.
    for listed_ns in [2_050_000_000, 2_000_000_000] {
        let scenario = two_ranks("", "");
        let mut failure = Failure::new(&scenario, per_rank(&scenario));
        let run = FakeRun::default().with_work(0, 0, 1);
        assert_eq!(
            enqueue_listed(&mut failure, &run, (0, 0), (20_000, listed_ns)),
            [wake(0, Wake::Check, 2_100_000_000)],
            "{listed_ns}"
        );
    }
}

#[test]
fn a_work_seen_complete_before_its_deadline_poll_is_dropped_else_it_times_out_r26() {
    // Enqueued at 20 µs: the deadline poll is 1.1 s, the poll before it 1.0 s. A Work
    // complete by the 1.0-s poll is dropped; one complete after it is first seen at the
    // deadline poll, where the timeout is checked before completion.
    for (end_ns, times_out) in [
        (950_000_000, false),
        (1_000_000_000, false),
        (1_000_000_001, true),
        (1_050_000_000, true),
    ] {
        let scenario = two_ranks("", "");
        let mut failure = Failure::new(&scenario, per_rank(&scenario));
        let mut run = FakeRun::default().with_work(0, 0, 1).with_work(1, 0, 1);
        enqueue(&mut failure, &run, (0, 0), 20_000);
        run.ends_ns.insert((0, 0), end_ns);
        let (commands, messages) = split(woken(&mut failure, &run, 0, Wake::Check, 1_100_000_000));
        if times_out {
            assert_eq!(
                commands[0],
                finding(FindingKind::WatchdogTimeout, 0, FindingAbout::Work(0)),
                "{end_ns}"
            );
            assert!(
                messages[0].contains("ran for 1099 milliseconds"),
                "{}",
                messages[0]
            );
        } else {
            assert!(commands.is_empty(), "{end_ns}: {commands:?}");
        }
    }
}

#[test]
fn a_timeout_reports_signals_the_dumps_and_sleeps_r26_r27() {
    // Rank 1 never enqueued: the diagnosis names it. Both heartbeat monitors, rank 0's own
    // too, see the dump signal at their next 1-s store poll (2 s); the watchdog sleeps
    // 4 × 15 s.
    let scenario = two_ranks("", "");
    let mut failure = Failure::new(&scenario, per_rank(&scenario));
    let run = FakeRun::default().with_work(0, 0, 1);
    let (commands, messages) = split(time_out_rank_0(&mut failure, &run));
    assert_eq!(
        commands,
        [
            finding(FindingKind::WatchdogTimeout, 0, FindingAbout::Work(0)),
            wake(0, Wake::DumpSeen, 2_000_000_000),
            wake(1, Wake::DumpSeen, 2_000_000_000),
            wake(0, Wake::DumpWaitOver, DUMP_WAIT_OVER_NS),
        ]
    );
    assert_eq!(
        messages[0],
        "[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=262144, NumelOut=262144, Timeout(ms)=1000) ran for 1099 milliseconds before timing out. Diagnosis: rank 1 never joined collective 1 (ALLREDUCE, world); rank 0 waiting."
    );
    // Asleep, the watchdog asks for no deadline of a new Work, and its async errors wait.
    let run = run.with_work(0, 1, 2);
    assert_eq!(enqueue(&mut failure, &run, (0, 1), 2_000_000_000), []);
    let async_error = Wake::AsyncError { collective: 1 };
    assert_eq!(woken(&mut failure, &run, 0, async_error, 2_100_000_000), []);
}

#[test]
fn without_dump_on_timeout_the_watchdog_still_signals_and_waits_but_nothing_is_dumped_r27() {
    // Measured on PyTorch 2.11 (tests/data/torch/probes/dump_off.txt): with
    // TORCH_NCCL_DUMP_ON_TIMEOUT=0 the stack trace, the signal and the wait stay; no dump,
    // and no monitor reacts to the signal.
    let scenario = two_ranks(
        "[env]\nTORCH_NCCL_DUMP_ON_TIMEOUT = 0\nTORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC = 250\n[host]\nwatchdog_stack_trace_us = 3_900_000",
        "",
    );
    let mut failure = Failure::new(&scenario, per_rank(&scenario));
    let run = FakeRun::default().with_work(0, 0, 1);
    enqueue(&mut failure, &run, (0, 0), 20_000);
    let commands = woken(&mut failure, &run, 0, Wake::Check, 1_100_000_000);
    assert_eq!(
        commands.last(),
        Some(&wake(0, Wake::StackTraceLogged, 5_000_000_000))
    );
    let commands = woken(&mut failure, &run, 0, Wake::StackTraceLogged, 5_000_000_000);
    assert_eq!(commands, [wake(0, Wake::DumpWaitOver, 6_000_000_000)]);
    let (commands, _) = split(woken(
        &mut failure,
        &run,
        0,
        Wake::DumpWaitOver,
        6_000_000_000,
    ));
    assert_eq!(
        commands,
        [Command::KillProcess {
            rank: 0,
            status: ExitStatus::Aborted,
            at_ns: 6_000_000_000,
        }]
    );
    let events: Vec<(WatchdogEvent, u64)> = failure
        .into_records()
        .iter()
        .map(|r| (r.event, r.at_ns))
        .collect();
    assert_eq!(
        events,
        [
            (WatchdogEvent::Timeout, 1_100_000_000),
            (WatchdogEvent::StackTrace, 5_000_000_000),
            (WatchdogEvent::DumpSignal, 5_000_000_000),
            (WatchdogEvent::Exit, 6_000_000_000),
        ]
    );
}

#[test]
fn propagate_error_only_flags_the_groups_other_ranks_at_their_next_poll_r27() {
    let scenario = two_ranks("[env]\nTORCH_NCCL_PROPAGATE_ERROR = 1", "");
    let mut failure = Failure::new(&scenario, per_rank(&scenario));
    let run = FakeRun::default().with_work(0, 0, 1).with_work(1, 0, 1);
    enqueue(&mut failure, &run, (0, 0), 20_000);
    let (commands, _) = split(woken(&mut failure, &run, 0, Wake::Check, 1_100_000_000));
    assert_eq!(
        commands[1],
        wake(1, Wake::RemoteError { from_rank: 0 }, 1_200_000_000)
    );
    // Rank 1's watchdog sets its group's error to REMOTE_ERROR and logs PyTorch's line:
    // no finding, no dump wait, no handling; its Work stays pending.
    let remote = Wake::RemoteError { from_rank: 0 };
    let commands = woken(&mut failure, &run, 1, remote, 1_200_000_000);
    assert_eq!(commands, []);
    assert!(!failure.holds_work_list(1, 0));
    // The group's error is set: a later signal is not read again.
    assert_eq!(woken(&mut failure, &run, 1, remote, 1_300_000_000), []);
    let remote_records: Vec<(u32, u64, String)> = (failure.into_records().iter())
        .filter(|r| r.event == WatchdogEvent::RemoteError)
        .map(|r| (r.rank, r.at_ns, r.message.clone()))
        .collect();
    assert_eq!(
        remote_records,
        [(
            1,
            1_200_000_000,
            "[Rank 1] remote error detected from rank: 0".to_string()
        )]
    );
    // A rank whose watchdog found its own error first (the group's error set) logs nothing.
    let mut failure = Failure::new(&scenario, per_rank(&scenario));
    enqueue(&mut failure, &run, (0, 0), 20_000);
    enqueue(&mut failure, &run, (1, 0), 20_000);
    woken(&mut failure, &run, 0, Wake::Check, 1_100_000_000);
    woken(&mut failure, &run, 1, Wake::Check, 1_100_000_000);
    assert_eq!(woken(&mut failure, &run, 1, remote, 1_200_000_000), []);
    assert!(!(failure.into_records().iter()).any(|r| r.event == WatchdogEvent::RemoteError));
    // A dead peer is told nothing.
    let scenario = two_ranks("[env]\nTORCH_NCCL_PROPAGATE_ERROR = 1", "");
    let mut failure = Failure::new(&scenario, per_rank(&scenario));
    let mut run = FakeRun::default().with_work(0, 0, 1);
    run.dead.push(1);
    enqueue(&mut failure, &run, (0, 0), 20_000);
    let commands = woken(&mut failure, &run, 0, Wake::Check, 1_100_000_000);
    assert!(!commands
        .iter()
        .any(|c| matches!(c, Command::Wake { rank: 1, .. })));
}

#[test]
fn the_diagnosis_tells_a_busy_stream_from_a_process_that_ended_before_the_kernel_r26() {
    let scenario = two_ranks("", "");
    let mut failure = Failure::new(&scenario, per_rank(&scenario));
    let mut run = FakeRun::default().with_work(0, 0, 1).with_work(1, 0, 1);
    run.not_started = vec![0, 1];
    run.dead.push(1);
    let (_, messages) = split(time_out_rank_0(&mut failure, &run));
    assert!(
        messages[0].ends_with(
            "Diagnosis: every rank enqueued collective 1; rank 0 has not started its kernel: \
             its stream is still busy before it; rank 1 never started its kernel: its process \
             ended first."
        ),
        "{}",
        messages[0]
    );
    // Both alive: one clause, in the plural.
    let mut failure = Failure::new(&scenario, per_rank(&scenario));
    run.dead.clear();
    let (_, messages) = split(time_out_rank_0(&mut failure, &run));
    assert!(
        messages[0].ends_with(
            "ranks 0-1 (2 ranks) have not started their kernels: their streams are still \
             busy before it."
        ),
        "{}",
        messages[0]
    );
}
