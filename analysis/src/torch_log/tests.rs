use super::*;

/// An origin without its monotonic reading: the printed clock is read as wall time.
fn printed_clock(unix_ns: u64) -> LogOrigin {
    LogOrigin {
        unix_ns,
        monotonic_ns: None,
    }
}

#[test]
fn the_printed_fraction_is_read_on_the_monotonic_clock() {
    // Time 0 at wall 10.3 s and monotonic 5.0 s: the wall clock is 0.3 s past the
    // monotonic one within every second.
    let origin = LogOrigin {
        unix_ns: 10_300_000_000,
        monotonic_ns: Some(5_000_000_000),
    };
    assert_eq!(
        origin.unix_ns(12_000_000_000, 400_000_000),
        Some(12_700_000_000)
    );
    // Past the wrap: fraction 0.8 on the monotonic clock is 0.1 on the wall clock.
    assert_eq!(
        origin.unix_ns(12_000_000_000, 800_000_000),
        Some(12_100_000_000)
    );
    // A monotonic clock ahead of the wall clock (a negative difference) wraps too.
    let ahead = LogOrigin {
        unix_ns: 10_300_000_000,
        monotonic_ns: Some(20_900_000_000),
    };
    assert_eq!(
        ahead.unix_ns(12_000_000_000, 500_000_000),
        Some(12_900_000_000)
    );
    assert_eq!(
        ahead.unix_ns(12_000_000_000, 700_000_000),
        Some(12_100_000_000)
    );
    assert_eq!(
        printed_clock(0).unix_ns(12_000_000_000, 700_000_000),
        Some(12_700_000_000)
    );
}

/// Who did what, record by record.
fn thread_events(records: &[WatchdogRecord]) -> Vec<(ThreadKind, WatchdogEvent)> {
    records.iter().map(|r| (r.thread, r.event)).collect()
}

/// The two clocks of a measured run's time 0 (its Timeline's machine keys).
fn measured(unix_ns: u64, monotonic_ns: u64) -> LogOrigin {
    LogOrigin {
        unix_ns,
        monotonic_ns: Some(monotonic_ns),
    }
}

#[test]
fn a_blocking_wait_s_timeout_is_the_main_thread_s_and_its_abort_is_not_an_exit() {
    // Measured on the H200 (tests/data/torch/h200-torchrun/caught_timeout.run1): the main thread's
    // timeout check, its "timed out in blocking wait", and the end of its abort before the
    // program caught the raise and ran on. No watchdog line at all.
    let log = include_str!("../../../tests/data/torch/h200-torchrun/caught_timeout.run1.log");
    let mut records = watchdog_records(
        log,
        measured(1_796_277_415_231_240_229, 40_818_424_928),
        &[],
    );
    let kinds = thread_events(&records);
    assert_eq!(
        kinds,
        [
            (ThreadKind::Main, WatchdogEvent::WaitTimeout),
            (ThreadKind::Main, WatchdogEvent::WaitTimeout),
            (ThreadKind::Main, WatchdogEvent::Abort)
        ]
    );
    // The timeout check's line first, as the simulator and hw log it.
    let timeout_check = records.remove(0);
    assert!(timeout_check
        .message
        .contains("Watchdog caught collective operation timeout"));
    // Printed 8 ms apart in this run.
    assert!((0..10_000_000).contains(&(records[0].at_ns - timeout_check.at_ns)));
    assert!(records[0].message.contains("timed out in blocking wait"));
    assert!(records[1]
        .message
        .contains("abort of the communicator ended"));
    // The run's Timeline: the collective enqueued at 0.701 s with a 500 ms timeout, and
    // `wait()` returned (raised) at 2.652170944 s. On the monotonic reading the abort's
    // end is within a millisecond of the raise and the timeout within 10 ms of its due
    // time; read as printed, both were 1 s off on another day's machine.
    let raised_ns: u64 = 2_652_170_944;
    assert!(
        records[1].at_ns.abs_diff(raised_ns) < 1_000_000,
        "{}",
        records[1].at_ns
    );
    assert!((1_201_000_000..1_211_000_000).contains(&records[0].at_ns));
}

#[test]
fn after_a_timed_wait_s_abort_the_watchdog_reports_an_async_error() {
    // Measured on the H200 (tests/data/torch/h200-torchrun/wait_timeout.run1): `wait(timeout=50 ms)`
    // timed out in the main thread, which aborted the communicator and raised; the
    // watchdog then found the aborted communicator's NCCL error, logged the stack trace and
    // signalled the dump; the rank's own heartbeat monitor read the signal ("Received a dump
    // signal due to a collective timeout from this local rank") and made the dump; the
    // watchdog took the process down after its 60 s dump wait.
    let log = include_str!("../../../tests/data/torch/h200-torchrun/wait_timeout.run1.log");
    let mut records = watchdog_records(
        log,
        measured(1_796_277_602_361_854_062, 227_949_038_683),
        &[],
    );
    assert_eq!(
        thread_events(&records[..1]),
        [(ThreadKind::Main, WatchdogEvent::WaitTimeout)],
        "the timeout check's line"
    );
    records.remove(0);
    let kinds = thread_events(&records);
    assert_eq!(
        kinds,
        [
            (ThreadKind::Main, WatchdogEvent::WaitTimeout),
            (ThreadKind::Main, WatchdogEvent::Abort),
            (ThreadKind::Watchdog, WatchdogEvent::AsyncError),
            (ThreadKind::Watchdog, WatchdogEvent::StackTrace),
            (ThreadKind::Watchdog, WatchdogEvent::DumpSignal),
            (ThreadKind::HeartbeatMonitor, WatchdogEvent::Dump),
            (ThreadKind::Watchdog, WatchdogEvent::Exit)
        ]
    );
    assert!(records[2].message.contains("NCCL error"));
    // The Timeline's `wait()` raised at 1.507966748 s; the monotonic reading puts the
    // abort's end there, and every record in the order it happened.
    assert!(records[1].at_ns.abs_diff(1_507_966_748) < 1_000_000);
    assert!(records
        .windows(2)
        .all(|pair| pair[0].at_ns <= pair[1].at_ns));
    // The dump wait: 60 s from the dump signal to taking the process down.
    let dump_wait_ns = records[6].at_ns - records[4].at_ns;
    assert!(
        dump_wait_ns.abs_diff(60_000_000_000) < 10_000_000,
        "{dump_wait_ns}"
    );
}

#[test]
fn a_timeout_line_of_another_work_is_kept() {
    let log = "[rank0]:[E1202 09:42:40.100000000 ProcessGroupNCCL.cpp:689] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, Timeout(ms)=500) ran for 500 milliseconds before timing out.\n\
[rank0]:[E1202 09:42:40.200000000 ProcessGroupNCCL.cpp:821] [Rank 0] Work WorkNCCL(SeqNum=2, OpType=ALLREDUCE, Timeout(ms)=500) timed out in blocking wait.\n";
    let origin = 20_789 * 86_400 * 1_000_000_000 + (9 * 3600 + 42 * 60) * 1_000_000_000;
    let events: Vec<WatchdogEvent> = watchdog_records(log, printed_clock(origin), &[])
        .iter()
        .map(|r| r.event)
        .collect();
    assert_eq!(events, [WatchdogEvent::Timeout, WatchdogEvent::WaitTimeout]);
}

#[test]
fn the_work_a_measured_line_names() {
    let log = include_str!("../../../tests/data/torch/h200-torchrun/wait_timeout.run1.log");
    let async_error = log
        .lines()
        .find(|line| line.starts_with("[rank0]") && line.contains("async exception"))
        .expect("the watchdog's async error");
    assert_eq!(
        logged_work(async_error),
        Some(LoggedWork {
            seq_num: 1,
            op_type: Some("ALLREDUCE")
        })
    );
    assert_eq!(
        logged_work("WorkNCCL(SeqNum=7, fake)"),
        Some(LoggedWork {
            seq_num: 7,
            op_type: None
        })
    );
    assert_eq!(
        logged_work("[Rank 0] watchdog got stuck for 15 seconds"),
        None
    );
    assert_eq!(logged_work("WorkNCCL(SeqNum=x, OpType=SEND)"), None);
}

/// Rank 0 of a two-rank job: an all_reduce on the world (SeqNum 1), one on the group `pair`
/// (SeqNum 1 there too) and a send to rank 1 (the world's first point-to-point call:
/// SeqNum 1), each iteration.
fn two_groups_and_a_send() -> Timeline {
    let text = "repeat = 2\n[cluster]\nranks = 2\n[groups.world]\neager_init = true\n\
                [groups.pair]\nranks = [0, 1]\neager_init = true\n[tensors]\nx = \"1MiB\"\n\
                [[op]]\nlabel = \"ar_world\"\nall_reduce = \"x\"\n\
                [[op]]\nlabel = \"ar_pair\"\nall_reduce = \"x\"\ngroup = \"pair\"\n\
                [[op]]\nlabel = \"to_1\"\nranks = [0]\nsend = \"x\"\npeer = 1\n\
                [[op]]\nlabel = \"from_0\"\nranks = [1]\nrecv = \"x\"\npeer = 0\n";
    sim::engine::simulate(&sim::scenario::parse("two.toml", text).unwrap())
}

#[test]
fn a_line_s_work_is_the_one_record_with_its_seq_num_and_op_type() {
    let timeline = two_groups_and_a_send();
    let op = |name: &str| timeline.ops.iter().find(|o| o.name == name).unwrap().index;
    // The send's Work: SEND tells it from the two all_reduces numbered 1.
    let line = "[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=SEND, NumelIn=262144, NumelOut=262144, Timeout(ms)=1000) ran for 1000 milliseconds before timing out.";
    assert_eq!(work_call(&timeline, 0, None, line), Ok((0, op("to_1"))));
    // The second iteration's: SeqNum 2.
    let line = line.replace("SeqNum=1", "SeqNum=2");
    assert_eq!(work_call(&timeline, 0, None, &line), Ok((1, op("to_1"))));
    // Both groups' first all_reduce is SeqNum 1, and the line names no group.
    let line = line.replace("SeqNum=2, OpType=SEND", "SeqNum=1, OpType=ALLREDUCE");
    let why = work_call(&timeline, 0, None, &line).unwrap_err();
    assert!(
        why.contains(
            "2 collective records of rank 0 have SeqNum=1, OpType=ALLREDUCE (groups world, pair)"
        ),
        "{why}"
    );
    // Rank 1 sent nothing: no record has SeqNum 1 and OpType SEND.
    let line = line.replace("OpType=ALLREDUCE", "OpType=SEND");
    let why = work_call(&timeline, 1, None, &line).unwrap_err();
    assert!(
        why.contains("rank 1 has no collective record of the Work with SeqNum=1, OpType=SEND"),
        "{why}"
    );
    assert!(work_call(&timeline, 0, None, "[Rank 0] no Work here").is_err());
    assert!(work_call(&timeline, 5, None, &line)
        .unwrap_err()
        .contains("no rank 5"));
}

#[test]
fn a_coalescing_block_s_work_is_its_block_s_call() {
    // The simulator prints a `_coalescing_manager` block's Work as PyTorch does, `COALESCED`
    // (R25); its record is the block's op, an all_reduce.
    let text = "[cluster]\nranks = 2\n[groups.world]\neager_init = true\ntimeout_s = 1\n\
                [tensors]\ng = { size = \"4KiB\", count = 3 }\n[[op]]\nlabel = \"block\"\n\
                all_reduce = \"g\"\ncoalesce = true\n[[fault]]\nranks = [1]\nat = \"block\"\nkind = \"hang\"\n";
    let timeline = sim::engine::simulate(&sim::scenario::parse("c.toml", text).unwrap());
    let timeout = (timeline.findings.iter())
        .find(|f| f.kind == FindingKind::WatchdogTimeout && f.rank == Some(0))
        .expect("rank 0's watchdog times out");
    assert_eq!(
        logged_work(&timeout.message).and_then(|work| work.op_type),
        Some("COALESCED")
    );
    assert_eq!(
        work_call(&timeline, 0, Some(0), &timeout.message),
        Ok((0, 0))
    );
}

#[test]
fn a_group_prefix_is_read_as_pytorch_prints_it() {
    // PyTorch 2.11's lines (tests/data/torch/*.log, probes/subgroup_monitor.txt).
    let default_pg = "[PG ID 0 PG GUID 0(default_pg) Rank 0]  failure detected by watchdog at work sequence id: 1";
    assert_eq!(
        logged_group(default_pg),
        Some(LoggedGroup {
            local_id: 0,
            guid: "0",
            desc: Some("default_pg"),
            group_rank: 0
        })
    );
    // A group whose description is PyTorch's "undefined" is printed without one.
    let undefined =
        "[PG ID 1 PG GUID 1 Rank 3] ProcessGroupNCCL's watchdog got stuck for 15 seconds";
    assert_eq!(
        logged_group(undefined),
        Some(LoggedGroup {
            local_id: 1,
            guid: "1",
            desc: None,
            group_rank: 3
        })
    );
    // A description is the user's text: spaces, brackets and " Rank " of its own.
    let odd = "[PG ID 2 PG GUID 5(tp] Rank 9 x) Rank 1] First PG on this rank to signal dumping.";
    assert_eq!(
        logged_group(odd).map(|g| (g.guid, g.desc, g.group_rank)),
        Some(("5", Some("tp] Rank 9 x"), 1))
    );
    for not_a_prefix in [
        "[Rank 0] Watchdog caught collective operation timeout",
        "[PG 0 Rank 7] Timeout at NCCL work: 1",
        "[PG ID x PG GUID 0 Rank 0] m",
        "[PG ID 0 PG GUID 0 Rank -1] m",
        "[PG ID 0 PG GUID  Rank 0] m",
        "[PG ID 0 PG GUID 0(open Rank 0] m",
    ] {
        assert_eq!(logged_group(not_a_prefix), None, "{not_a_prefix}");
    }
}

#[test]
fn a_logged_group_is_the_world_by_its_guid_and_another_by_its_description() {
    let groups = ["world".to_string(), "pair".to_string(), "tp".to_string()];
    let group = |text: &str| logged_group(text).and_then(|group| group.index(&groups));
    assert_eq!(group("[PG ID 0 PG GUID 0(default_pg) Rank 0] m"), Some(0));
    assert_eq!(group("[PG ID 1 PG GUID 2(tp) Rank 1] m"), Some(2));
    // No description (a run before the interpreter gave one), or one no group has: unknown.
    assert_eq!(group("[PG ID 1 PG GUID 1 Rank 0] m"), None);
    assert_eq!(group("[PG ID 1 PG GUID 1(dp) Rank 0] m"), None);
    // The world's scenario name is not PyTorch's description of it.
    assert_eq!(group("[PG ID 1 PG GUID 1(world) Rank 0] m"), None);
}

/// A timeout of SeqNum 1 on rank 0, `ran_ms` after its enqueue, as line 689 prints it.
fn timeout_line(at: &str, ran_ms: u32) -> String {
    format!("[rank0]:[E1202 09:42:{at} ProcessGroupNCCL.cpp:689] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=262144, NumelOut=262144, Timeout(ms)=1000) ran for {ran_ms} milliseconds before timing out.\n")
}

/// The line a group's watchdog prints after it caught SeqNum 1, with the group's `prefix`.
fn failure_line(at: &str, prefix: &str) -> String {
    format!("[rank0]:[E1202 09:42:{at} ProcessGroupNCCL.cpp:2303] {prefix}  failure detected by watchdog at work sequence id: 1 PG status: last enqueued work: 1, last completed work: -1\n")
}

/// Time 0 of the fixtures above: 2026-12-02 09:42:00 UTC, read as printed.
fn fixture_origin() -> LogOrigin {
    printed_clock(20_789 * 86_400 * 1_000_000_000 + (9 * 3600 + 42 * 60) * 1_000_000_000)
}

#[test]
fn a_timeout_takes_the_group_of_its_watchdog_s_next_line_about_its_seq_num() {
    let groups = ["world".to_string(), "pair".to_string()];
    // Both groups' watchdogs time their SeqNum 1 out and log in between each other; each line
    // after a timeout names the group whose watchdog printed it, the earliest unclaimed
    // timeout of that SeqNum its own.
    let log = [
        timeout_line("40.100", 1005),
        timeout_line("40.110", 1015),
        failure_line("40.120", "[PG ID 1 PG GUID 1(pair) Rank 0]"),
        failure_line("40.130", "[PG ID 0 PG GUID 0(default_pg) Rank 0]"),
        "[rank0]:[E1202 09:42:45.000000000 ProcessGroupNCCL.cpp:2636] [PG ID 0 PG GUID 0(default_pg) Rank 0] First PG on this rank to signal dumping.\n".to_string(),
    ]
    .concat();
    let records = watchdog_records(&log, fixture_origin(), &groups);
    let read: Vec<_> = records.iter().map(|r| (r.event, r.group)).collect();
    assert_eq!(
        read,
        [
            (WatchdogEvent::Timeout, Some(1)),
            (WatchdogEvent::Timeout, Some(0)),
            (WatchdogEvent::DumpSignal, Some(0))
        ]
    );
    // The same lines without the prefixes name no group, as before.
    let bare = [timeout_line("40.100", 1005), timeout_line("40.110", 1015)].concat();
    let records = watchdog_records(&bare, fixture_origin(), &groups);
    assert!(records.iter().all(|r| r.group.is_none()), "{records:?}");
    // A wait's own timeout is the main thread's, of no group's thread, whatever comes after.
    let waited = [
        timeout_line("40.100", 1005),
        "[rank0]:[E1202 09:42:40.101000000 ProcessGroupNCCL.cpp:821] [Rank 0] Work WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=262144, NumelOut=262144, Timeout(ms)=1000) timed out in blocking wait.\n".to_string(),
        failure_line("40.120", "[PG ID 0 PG GUID 0(default_pg) Rank 0]"),
    ]
    .concat();
    let records = watchdog_records(&waited, fixture_origin(), &groups);
    let read: Vec<_> = records.iter().map(|r| (r.thread, r.group)).collect();
    assert_eq!(read, [(ThreadKind::Main, None), (ThreadKind::Main, None)]);
}

#[test]
fn the_measured_timeout_is_the_world_s() {
    // tests/data/torch/h200-torchrun/gpu_backlog_timeout.run1: the timeout, then the default
    // group's "failure detected … id: 1".
    let log = include_str!("../../../tests/data/torch/h200-torchrun/gpu_backlog_timeout.run1.log");
    let records = watchdog_records(
        log,
        measured(1_796_277_491_783_812_137, 117_370_996_936),
        &["world".to_string()],
    );
    assert_eq!(
        (records[0].event, records[0].group),
        (WatchdogEvent::Timeout, Some(0))
    );
}

#[test]
fn a_line_s_group_picks_its_work_among_the_groups() {
    let timeline = two_groups_and_a_send();
    let op = |name: &str| timeline.ops.iter().find(|o| o.name == name).unwrap().index;
    let line = timeout_line("40.100", 1005);
    assert!(work_call(&timeline, 0, None, &line).is_err());
    assert_eq!(
        work_call(&timeline, 0, Some(1), &line),
        Ok((0, op("ar_pair")))
    );
    assert_eq!(
        work_call(&timeline, 0, Some(0), &line),
        Ok((0, op("ar_world")))
    );
    // A group the Work's SeqNum and OpType are not on says so.
    let send = line.replace("ALLREDUCE", "SEND");
    let why = work_call(&timeline, 0, Some(1), &send).unwrap_err();
    assert!(
        why.contains(
            "rank 0 has no collective record of the Work with SeqNum=1, OpType=SEND on group pair"
        ),
        "{why}"
    );
}

/// A watchdog finding of rank 0 in the rank's own file, with `message`.
fn own_finding(kind: FindingKind, message: &str) -> Finding {
    Finding {
        stands_for: Default::default(),
        kind,
        rank: Some(0),
        iteration: None,
        op: None,
        stream: None,
        message: message.to_string(),
    }
}

#[test]
fn each_work_the_log_names_is_one_finding_unless_the_rank_s_file_has_it() {
    let mut timeline = two_groups_and_a_send();
    timeline.findings.clear();
    let groups = timeline.scenario.groups.clone();
    let op = |name: &str| {
        timeline
            .ops
            .iter()
            .find(|o| o.name == name)
            .map(|o| o.index)
    };
    let log = [
        timeout_line("40.100", 1005),
        failure_line("40.101", "[PG ID 1 PG GUID 1(pair) Rank 0]"),
        timeout_line("40.150", 1055),
        failure_line("40.151", "[PG ID 0 PG GUID 0(default_pg) Rank 0]"),
    ]
    .concat();
    // Each Work is one finding, in the log's order, however often its lines come.
    let records = watchdog_records(&format!("{log}{log}"), fixture_origin(), &groups);
    let named =
        |findings: &[Finding]| -> Vec<_> { findings.iter().map(|f| (f.kind, f.op)).collect() };
    let timeout = FindingKind::WatchdogTimeout;
    assert_eq!(
        named(&log_findings(&timeline, &records)),
        [(timeout, op("ar_pair")), (timeout, op("ar_world"))]
    );
    // The rank's own finding naming no Work stands for its first; one naming the Work, for
    // that Work's (the first, of two alike); one of another kind, for none.
    let records = watchdog_records(&log, fixture_origin(), &groups);
    timeline.findings = vec![own_finding(timeout, "[Rank 0] ar raised DistBackendError")];
    assert_eq!(
        named(&log_findings(&timeline, &records)),
        [(timeout, op("ar_world"))]
    );
    timeline.findings = vec![own_finding(timeout, &timeout_line("40.100", 1005))];
    assert_eq!(
        named(&log_findings(&timeline, &records)),
        [(timeout, op("ar_world"))]
    );
    timeline.findings = vec![own_finding(FindingKind::AsyncError, "[Rank 0] NCCL error")];
    assert_eq!(log_findings(&timeline, &records).len(), 2);
}

#[test]
fn civil_days_match_known_dates() {
    assert_eq!(days_from_civil(1970, 1, 1), 0);
    assert_eq!(days_from_civil(2000, 3, 1), 11_017);
    assert_eq!(days_from_civil(2026, 12, 1), 20_788);
    assert_eq!(year_of(20_788 * 86_400 * 1_000_000_000), 2026);
}

#[test]
fn the_measured_gpu_backlog_timeout_log_gives_pytorch_s_error_path() {
    // Measured on the H200 (tests/data/torch/h200-torchrun/gpu_backlog_timeout.run1): a 1 s timeout
    // behind a 3 s GPU backlog, the collective enqueued at 0.556870909 s.
    let log = include_str!("../../../tests/data/torch/h200-torchrun/gpu_backlog_timeout.run1.log");
    let records = watchdog_records(
        log,
        measured(1_796_277_491_783_812_137, 117_370_996_936),
        &[],
    );
    let events: Vec<WatchdogEvent> = records.iter().map(|r| r.event).collect();
    assert_eq!(
        events,
        [
            WatchdogEvent::Timeout,
            WatchdogEvent::StackTrace,
            WatchdogEvent::DumpSignal,
            WatchdogEvent::Dump,
            WatchdogEvent::Exit
        ]
    );
    assert_eq!(records[0].rank, 0);
    assert!(records[0].message.contains("Timeout(ms)=1000"));
    // The watchdog polls every 100 ms: it found the timeout within a poll of its due time.
    let due_ns = 556_870_909 + 1_000_000_000;
    assert!((due_ns..due_ns + 100_000_000).contains(&records[0].at_ns));
    // The times this reader gave the run's own Timeline (its `watchdog` records).
    let at_ns: Vec<u64> = records.iter().map(|r| r.at_ns).collect();
    assert_eq!(
        at_ns,
        [
            1_562_127_768,
            6_788_669_582,
            6_788_757_164,
            7_162_571_586,
            8_520_953_718
        ]
    );
}

#[test]
fn the_lines_of_a_failed_exit_become_records_r31() {
    // Measured on the H200 (tests/data/torch/probes/exit_with_pending_work.txt): the
    // watchdog's broken promise after a timeout in the exit window, and the destructor's
    // abort timing out with no Work pending.
    let log = "[rank0]:[E1202 18:44:57.528857658 ProcessGroupNCCL.cpp:689] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=2, OpType=ALLREDUCE, NumelIn=262144, NumelOut=262144, Timeout(ms)=500) ran for 500 milliseconds before timing out.\n\
[rank0]:[E1202 18:44:57.529498335 ProcessGroupNCCL.cpp:2119] [PG ID 0 PG GUID 0(default_pg) Rank 0] Process group watchdog thread terminated with exception: std::future_error: Broken promise\n\
[rank0]:[E1202 18:45:13.470668122 ProcessGroupNCCL.cpp:1389] [PG ID 0 PG GUID 0(default_pg) Rank 0] Future for ProcessGroup abort timed out after 500 ms\n";
    let origin_unix_ns = 20_789 * 86_400 * 1_000_000_000 + (18 * 3600 + 44 * 60) * 1_000_000_000;
    let records = watchdog_records(log, printed_clock(origin_unix_ns), &[]);
    let kinds = thread_events(&records);
    assert_eq!(
        kinds,
        [
            (ThreadKind::Watchdog, WatchdogEvent::Timeout),
            (ThreadKind::Watchdog, WatchdogEvent::Exit),
            (ThreadKind::Main, WatchdogEvent::Abort)
        ]
    );
    assert_eq!(records[1].at_ns - records[0].at_ns, 640_677);
}

#[test]
fn a_date_from_january_to_september_has_a_one_digit_month() {
    // c10's logger prints month × 100 + day without padding: 15 September is `E915`.
    let september =
        "[rank0]:[E915 03:54:42.5 F.cpp:1] Watchdog caught collective operation timeout";
    let line = parse_line(september, 2026).expect("a September line is PyTorch's");
    let seconds = days_from_civil(2026, 9, 15) * 86_400 + 3 * 3600 + 54 * 60 + 42;
    assert_eq!(line.whole_seconds_ns, seconds as u64 * 1_000_000_000);
    // A zero-padded month (a glog build's `E0915`) is the same date.
    let padded = september.replace("E915", "E0915");
    assert_eq!(parse_line(&padded, 2026), Some(line));
    let origin = printed_clock(seconds as u64 * 1_000_000_000);
    assert_eq!(watchdog_records(september, origin, &[]).len(), 1);
    for bad in ["E15", "E91501", "E9a5"] {
        let line = format!("[rank0]:[{bad} 03:54:42.5 F.cpp:1] message");
        assert_eq!(parse_line(&line, 2026), None, "{bad}");
    }
}

#[test]
fn a_run_started_on_new_years_eve_reads_januarys_lines_in_the_next_year() {
    let eve = (days_from_civil(2026, 12, 31) * 86_400 + 23 * 3600 + 59 * 60 + 59) as u64;
    let origin = printed_clock(eve * 1_000_000_000);
    let january = "[rank0]:[E101 00:00:01.0 F.cpp:1] Watchdog caught collective operation timeout";
    let records = watchdog_records(january, origin, &[]);
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].at_ns, 2_000_000_000);
    // A line of the origin's own day is not moved.
    let december =
        "[rank0]:[E1231 23:59:59.5 F.cpp:1] Watchdog caught collective operation timeout";
    assert_eq!(
        watchdog_records(december, origin, &[])[0].at_ns,
        500_000_000
    );
}

#[test]
fn a_clock_out_of_range_is_not_a_watchdog_line() {
    // An hour of 10^13 overflowed the nanoseconds (a panic with overflow checks on, a
    // wrong time without); such a line is skipped like any other that is not PyTorch's.
    let line = "[rank0]:[E1201 9999999999999:54:42.5 F.cpp:1] Watchdog caught collective operation timeout";
    assert_eq!(parse_line(line, 2026), None);
    for bad in [
        "E1301 03:54:42.5",
        "E1232 03:54:42.5",
        "E1201 24:00:00.0",
        "E1201 03:60:00.0",
        "E1201 03:54:61.0",
        "E1201 -1:54:42.5",
    ] {
        let line = format!("[rank0]:[{bad} F.cpp:1] message");
        assert_eq!(parse_line(&line, 2026), None, "{bad}");
    }
    assert!(parse_line("[rank0]:[E1201 23:59:60.999 F.cpp:1] message", 2026).is_some());
    assert!(watchdog_records(&format!("{line}\n"), printed_clock(0), &[]).is_empty());
    // A time 0 in the year 2343 (cargo fuzz): its nanoseconds overflowed an i64.
    let late = "[rank0]:[E1201 03:54:42.5 F.cpp:1] Watchdog caught collective operation timeout";
    assert!(parse_line(late, 2343).is_some());
    assert_eq!(
        watchdog_records(late, printed_clock(11_796_204_716_000_000_000), &[]).len(),
        1
    );
}

#[test]
fn the_heartbeat_monitor_s_stall_dump_and_abort_are_its_own() {
    // Lines shaped as PyTorch 2.11 printed them in tests/data/torch/probes/
    // never_ending_side.txt (sitting 2, run 2, time 0 at 11:17:26.732465344; read as
    // printed): the times of the first four to the ms of its records, their messages
    // shortened, the last line verbatim. The main thread's timeout, the monitor's stalled
    // heartbeat 29.19 s later, its dump, and its abort after "slept for 15".
    let log = "\
[rank0]:[E1203 11:17:30.956000000 ProcessGroupNCCL.cpp:689] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=2, OpType=ALLREDUCE, NumelIn=262144, NumelOut=262144, Timeout(ms)=600000) ran for 500 milliseconds before timing out.
[rank0]:[E1203 11:17:30.967000000 ProcessGroupNCCL.cpp:821] [Rank 0] Work WorkNCCL(SeqNum=2, OpType=ALLREDUCE, NumelIn=262144, NumelOut=262144, Timeout(ms)=600000) timed out in blocking wait.
[rank0]:[E1203 11:18:00.155000000 ProcessGroupNCCL.cpp:1914] [PG ID 0 PG GUID 0(default_pg) Rank 0] ProcessGroupNCCL's watchdog got stuck for 15 seconds without making progress in monitoring enqueued collectives.
[rank0]:[E1203 11:18:00.158000000 ProcessGroupNCCL.cpp:1628] [PG ID 0 PG GUID 0(default_pg) Rank 0] ProcessGroupNCCL preparing to dump debug info. Include stack trace: 1, only active collectives: 0
[rank0]:[F1203 11:18:20.316272848 ProcessGroupNCCL.cpp:1653] [PG ID 0 PG GUID 0(default_pg) Rank 0] [PG ID 0 PG GUID 0(default_pg) Rank 0] Terminating the process after attempting to dump debug info, due to ProcessGroupNCCL watchdog hang.
";
    let origin = LogOrigin {
        unix_ns: 1_796_296_646_732_465_344,
        monotonic_ns: None,
    };
    let records = watchdog_records(log, origin, &[]);
    assert_eq!(
        thread_events(&records),
        [
            (ThreadKind::Main, WatchdogEvent::WaitTimeout),
            (ThreadKind::Main, WatchdogEvent::WaitTimeout),
            (
                ThreadKind::HeartbeatMonitor,
                WatchdogEvent::HeartbeatTimeout
            ),
            (ThreadKind::HeartbeatMonitor, WatchdogEvent::Dump),
            (ThreadKind::HeartbeatMonitor, WatchdogEvent::Exit)
        ]
    );
    let seconds = |record: &WatchdogRecord| record.at_ns as f64 / 1e9;
    assert!((seconds(&records[2]) - seconds(&records[1]) - 29.19).abs() < 0.01);
    assert!((seconds(&records[4]) - 53.58).abs() < 0.01);
}

#[test]
fn a_disabled_monitor_logs_the_termination_it_would_have_done() {
    // PyTorch's line under TORCH_NCCL_ENABLE_MONITORING=0 (HeartbeatMonitor::runLoop's
    // `else` branch), after a stalled heartbeat read and the dump.
    let log = "\
[rank0]:[E1203 11:18:00.155000000 ProcessGroupNCCL.cpp:1914] [PG ID 0 PG GUID 0(default_pg) Rank 0] ProcessGroupNCCL's watchdog got stuck for 15 seconds without making progress in monitoring enqueued collectives.
[rank0]:[E1203 11:18:00.158000000 ProcessGroupNCCL.cpp:1628] [PG ID 0 PG GUID 0(default_pg) Rank 0] ProcessGroupNCCL preparing to dump debug info. Include stack trace: 1, only active collectives: 0
[rank0]:[E1203 11:18:20.316000000 ProcessGroupNCCL.cpp:2039] [PG ID 0 PG GUID 0(default_pg) Rank 0] ProcessGroupNCCL monitor thread is disabled, but would have terminated the processafter attempting to dump debug info, due to ProcessGroupNCCL watchdog hang.
";
    let origin = LogOrigin {
        unix_ns: 1_796_296_646_732_465_344,
        monotonic_ns: None,
    };
    assert_eq!(
        thread_events(&watchdog_records(log, origin, &[])),
        [
            (
                ThreadKind::HeartbeatMonitor,
                WatchdogEvent::HeartbeatTimeout
            ),
            (ThreadKind::HeartbeatMonitor, WatchdogEvent::Dump),
            (ThreadKind::HeartbeatMonitor, WatchdogEvent::MonitorDisabled)
        ]
    );
}

#[test]
fn a_remote_error_read_from_the_store_is_the_watchdog_s_record() {
    // PyTorch's `checkAndSetRemoteError` (TORCH_NCCL_PROPAGATE_ERROR=1, R27): the group's log
    // prefix, its trailing space, then the line's own leading space.
    let log = "[rank0]:[E1201 03:54:42.500000000 ProcessGroupNCCL.cpp:1962] [PG ID 0 PG GUID \
               0(default_pg) Rank 0]  remote error detected from rank: 1\n";
    let origin = printed_clock(1_796_097_282_000_000_000);
    let records = watchdog_records(log, origin, &["world".to_string()]);
    assert_eq!(
        thread_events(&records),
        [(ThreadKind::Watchdog, WatchdogEvent::RemoteError)]
    );
    assert_eq!((records[0].rank, records[0].group), (0, Some(0)));
    assert_eq!(records[0].at_ns, 500_000_000);
    assert!(records[0]
        .message
        .ends_with("Rank 0]  remote error detected from rank: 1"));
}

#[test]
fn the_eager_p2p_serialization_warning_is_the_main_thread_s_record() {
    // TORCH_WARN's `Warning: ` before the group's prefix, as a run of three ranks printed it.
    let log = "[rank0]:[W701 09:03:30.190545785 ProcessGroupNCCL.cpp:4025] Warning: [PG ID 0 \
               PG GUID 0(default_pg) Rank 0] An unbatched P2P op (send/recv) was called on this \
               ProcessGroup with size 3.  In eager initialization mode, unbatched P2P ops are \
               treated as independent collective ops, and are thus serialized with all other ops \
               on this ProcessGroup, including other P2P ops. To avoid serialization, either \
               create additional independent ProcessGroups for the P2P ops or use batched P2P \
               ops. You can squash this warning by setting the environment variable \
               TORCH_NCCL_SHOW_EAGER_INIT_P2P_SERIALIZATION_WARNING to false. (function \
               operator())\n\
               [rank0]:[W701 09:03:30.190545785 ProcessGroupNCCL.cpp:4025] Warning: something \
               else (function operator())\n";
    let origin = printed_clock(1_782_896_610_000_000_000);
    let records = watchdog_records(log, origin, &["world".to_string()]);
    assert_eq!(
        thread_events(&records),
        [(ThreadKind::Main, WatchdogEvent::Warning)]
    );
    // The group's warning, read as the simulator writes it: the prefix first.
    assert_eq!(records[0].group, Some(0));
    assert!(records[0]
        .message
        .starts_with("[PG ID 0 PG GUID 0(default_pg) Rank 0] An unbatched P2P op"));
    assert_eq!(records[0].at_ns, 190_545_785);
}

/// A main-thread record of rank 0, as a rank's interpreter writes it.
fn own_record(event: WatchdogEvent, message: &str) -> WatchdogRecord {
    WatchdogRecord {
        stands_for: Default::default(),
        rank: 0,
        group: Some(0),
        thread: ThreadKind::Main,
        event,
        at_ns: 2_652_170_944,
        message: message.to_string(),
    }
}

#[test]
fn the_log_s_records_of_a_wait_s_timeout_stand_in_for_the_rank_s_own() {
    // A rank's interpreter writes a polling wait's timeout as the simulator's three main-thread
    // records, all at the raise (docs/torch.md); PyTorch's log has the same three at their own
    // times. Both kept, `diff` counted four `wait_timeout` records and two `abort`s.
    let work =
        "WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=262144, NumelOut=262144, Timeout(ms)=500)";
    let timed_out = [
        own_record(
            WatchdogEvent::WaitTimeout,
            &format!("[Rank 0] Watchdog caught collective operation timeout: {work} ran for 500 milliseconds before timing out."),
        ),
        own_record(
            WatchdogEvent::WaitTimeout,
            &format!("[Rank 0] Work {work} timed out in blocking wait. Aborting the communicator, then raising DistBackendError in the main thread."),
        ),
        own_record(
            WatchdogEvent::Abort,
            &format!("[Rank 0] Work {work} timed out in blocking wait; the main thread aborted the communicator of group world and raises DistBackendError."),
        ),
    ];
    // What the log says nothing of stays: a wait's raise of its Work's async error, an exit.
    let kept = [
        own_record(
            WatchdogEvent::WaitError,
            &format!("[Rank 0] Work {work} failed with its communicator's NCCL async error in wait(). Aborting the communicator, then raising DistBackendError in the main thread."),
        ),
        own_record(
            WatchdogEvent::Abort,
            &format!("[Rank 0] Work {work} failed with an NCCL async error in wait(); the main thread aborted the communicator of group world and raises DistBackendError."),
        ),
        own_record(WatchdogEvent::Exit, "[Rank 0] process exited: the exception was not caught"),
    ];
    let log = include_str!("../../../tests/data/torch/h200-torchrun/caught_timeout.run1.log");
    let logged = watchdog_records(
        log,
        measured(1_796_277_415_231_240_229, 40_818_424_928),
        &[],
    );
    let mut own: Vec<WatchdogRecord> = timed_out.iter().chain(&kept).cloned().collect();
    drop_superseded(&mut own, &logged);
    assert_eq!(own, kept);
    // Another rank's log lines, or none, leave the rank's own records alone.
    let mut own: Vec<WatchdogRecord> = timed_out.to_vec();
    let others: Vec<WatchdogRecord> = (logged.iter())
        .map(|record| WatchdogRecord {
            rank: 1,
            ..record.clone()
        })
        .collect();
    drop_superseded(&mut own, &others);
    drop_superseded(&mut own, &[]);
    assert_eq!(own, timed_out);
}
