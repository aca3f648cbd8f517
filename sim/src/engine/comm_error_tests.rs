//! An NCCL async error belongs to the communicator (R27): PyTorch's `WorkNCCL::isCompleted()`
//! asks the Work's communicator for its error (`checkAndSetException`), so a polling wait or
//! `is_completed()` on any Work of that communicator finds it, not only on the Work the
//! network failed under. A `wait()` of any kind that finds its Work's error aborts the
//! communicator before it raises; a default `wait()` finds only the error the program's Work
//! stored through its own `is_completed()` (the watchdog's list holds copies). Whole small
//! scenarios, one per case.

use crate::engine::simulate;
use crate::scenario::parse;
use crate::timeline::{
    ExitStatus, FindingKind, KernelClass, OpRef, ThreadKind, Timeline, WatchdogEvent,
};

/// Rank 0's network fails under all_reduce `a` of group world (NCCL reports it 1 ms after
/// the enqueue at ≈ 20 µs; `comm_abort_us` 50 ms); then all_reduce `b` of `b_group`;
/// `between` goes before `wait_b`, the wait on `b` (`wait`: its extra lines), then `again`,
/// a caught all_reduce on world. `env` goes into `[env]`. The timeline, and `wait_b`'s op.
fn comm_error(env: &str, b_group: &str, between: &str, wait: &str) -> (Timeline, OpRef) {
    let text = format!(
        "[env]\n{env}\n[host]\ncomm_abort_us = 50000\n[cluster]\nranks = 2\n\
         [groups.world]\neager_init = true\ntimeout_s = 1\n\
         [groups.other]\nranks = [0, 1]\neager_init = true\ntimeout_s = 1\n\
         [tensors]\nx = \"1MiB\"\ny = \"1MiB\"\n\
         [[op]]\nlabel = \"a\"\nall_reduce = \"x\"\nasync_op = true\nwork = \"wa\"\n\
         [[op]]\nlabel = \"b\"\nall_reduce = \"y\"\ngroup = \"{b_group}\"\nasync_op = true\n\
         work = \"wb\"\n{between}\
         [[op]]\nlabel = \"wait_b\"\nwait = \"wb\"\n{wait}\
         [[op]]\nlabel = \"again\"\nall_reduce = \"y\"\ncatch = true\n\
         [[fault]]\nranks = [0]\nat = \"a\"\nkind = \"async_error\"\nafter_us = 1000\n"
    );
    labelled_run(&text)
}

/// The timeline of scenario `text`, and the op labelled `wait_b`.
fn labelled_run(text: &str) -> (Timeline, OpRef) {
    let scenario = parse("comm_error.toml", text).unwrap();
    let wait_b = (scenario.ops.iter())
        .position(|op| op.label.as_deref() == Some("wait_b"))
        .unwrap();
    (simulate(&scenario), wait_b as OpRef)
}

/// Rank 0's main-thread records: (event, time).
fn main_thread(timeline: &Timeline) -> Vec<(WatchdogEvent, u64)> {
    (timeline.watchdog.iter())
        .filter(|r| r.rank == 0 && r.thread == ThreadKind::Main)
        .map(|r| (r.event, r.at_ns))
        .collect()
}

#[test]
fn a_polling_wait_on_another_work_of_the_failed_communicator_raises_its_error_r15_r27() {
    // `wait(timeout)` (the watchdog runs) and blocking wait: the wait on `b` polls from
    // ≈ 40 µs every 1 ms; its first poll past `a`'s error at ≈ 1.02 ms finds the
    // communicator's error, not the 500-ms timeout: the main thread aborts the communicator
    // (50 ms), then raises DistBackendError naming `b`'s Work (SeqNum 2) in the wait.
    for (env, wait) in [
        ("", "timeout_ms = 500\n"),
        ("TORCH_NCCL_BLOCKING_WAIT = 1", ""),
    ] {
        let (timeline, wait_b) = comm_error(env, "world", "", wait);
        let raised = (timeline.findings.iter())
            .find(|f| f.rank == Some(0) && f.op == Some(wait_b))
            .unwrap_or_else(|| panic!("{env}: {:?}", timeline.findings));
        assert_eq!(
            raised.kind,
            FindingKind::AsyncError,
            "{env}: {}",
            raised.message
        );
        assert!(
            raised.message.contains("DistBackendError") && raised.message.contains("SeqNum=2"),
            "{env}: {}",
            raised.message
        );
        let records = main_thread(&timeline);
        let found = (records.iter())
            .find(|r| r.0 == WatchdogEvent::WaitError)
            .unwrap_or_else(|| panic!("{env}: the poll's finding: {records:?}"));
        assert!(
            (1_020_000..2_100_000).contains(&found.1),
            "{env}: {records:?}"
        );
        let abort = records
            .iter()
            .find(|r| r.0 == WatchdogEvent::Abort)
            .unwrap();
        assert_eq!(
            abort.1,
            found.1 + 50_000_000,
            "{env}: the raise waits for the abort"
        );
        // Where the watchdog runs, it finds the error at the raise under `a`, the Work the
        // network failed under (SeqNum 1).
        let watchdog: Vec<_> = (timeline.watchdog.iter())
            .filter(|r| r.rank == 0 && r.event == WatchdogEvent::AsyncError)
            .map(|r| (r.at_ns, r.message.contains("SeqNum=1,")))
            .collect();
        let expected = if env.is_empty() {
            vec![(abort.1, true)]
        } else {
            vec![]
        };
        assert_eq!(watchdog, expected, "{env}");
    }
}

#[test]
fn a_caught_raise_on_another_work_goes_on_with_the_communicator_aborted_r15_r27() {
    let (timeline, wait_b) = comm_error(
        "TORCH_NCCL_BLOCKING_WAIT = 1",
        "world",
        "",
        "catch = true\n",
    );
    let rank0 = &timeline.ranks[0];
    let [raised, again] = rank0.exceptions.as_slice() else {
        panic!("{:?}", rank0.exceptions)
    };
    assert_eq!(raised.op, wait_b);
    assert!(
        raised.message.contains("SeqNum=2") && raised.message.contains("async error"),
        "{}",
        raised.message
    );
    assert!(
        again.message.contains("was aborted"),
        "the next collective meets the aborted communicator: {}",
        again.message
    );
}

#[test]
fn a_work_of_another_group_or_another_rank_is_unaffected_r27() {
    // `b` on group other, whose communicator has no error: `b` completes and the wait
    // returns well before its timeout.
    let (timeline, wait_b) = comm_error("", "other", "", "timeout_ms = 500\n");
    assert!(
        !(timeline.findings.iter()).any(|f| f.rank == Some(0) && f.op == Some(wait_b)),
        "{:?}",
        timeline.findings
    );
    let wait = (timeline.ranks[0].host.iter())
        .find(|h| h.op == wait_b)
        .unwrap();
    assert!(wait.end_ns < 10_000_000, "{}", wait.end_ns);
    // Rank 1's `b` on world, behind its `a` that never completes: its wait times out.
    let (timeline, wait_b) = comm_error("TORCH_NCCL_BLOCKING_WAIT = 1", "world", "", "");
    let rank1 = (timeline.findings.iter())
        .find(|f| f.rank == Some(1) && f.op == Some(wait_b))
        .unwrap();
    assert_eq!(rank1.kind, FindingKind::WaitTimeout, "{}", rank1.message);
}

/// `b` goes first and completes; `a` fails 1 ms after its enqueue; the host sleeps
/// `sleep_us`, then waits on `b` under blocking wait, caught.
fn completed_first(sleep_us: u64) -> (Timeline, OpRef) {
    labelled_run(&format!(
        "[env]\nTORCH_NCCL_BLOCKING_WAIT = 1\n[host]\ncomm_abort_us = 50000\n[cluster]\n\
         ranks = 2\n[groups.world]\neager_init = true\ntimeout_s = 1\n[tensors]\n\
         x = \"1MiB\"\ny = \"1MiB\"\n\
         [[op]]\nlabel = \"b\"\nall_reduce = \"y\"\nasync_op = true\nwork = \"wb\"\n\
         [[op]]\nlabel = \"a\"\nall_reduce = \"x\"\nasync_op = true\nwork = \"wa\"\n\
         [[op]]\nhost_sleep_us = {sleep_us}\n\
         [[op]]\nlabel = \"wait_b\"\nwait = \"wb\"\ncatch = true\n\
         [[op]]\nlabel = \"again\"\nall_reduce = \"y\"\ncatch = true\n\
         [[fault]]\nranks = [0]\nat = \"a\"\nkind = \"async_error\"\nafter_us = 1000\n"
    ))
}

#[test]
fn a_polling_wait_on_a_completed_work_finds_the_communicators_earlier_error_r15_r27() {
    // Called after the error (a 5-ms sleep), the wait on the completed `b` finds it at its
    // first check: the main thread aborts the communicator, then raises.
    let (timeline, wait_b) = completed_first(5000);
    let rank0 = &timeline.ranks[0];
    let [raised, again] = rank0.exceptions.as_slice() else {
        panic!("{:?}", rank0.exceptions)
    };
    assert_eq!(raised.op, wait_b, "{}", raised.message);
    assert!(raised.message.contains("SeqNum=1"), "{}", raised.message);
    let call = rank0.host.iter().find(|h| h.op == wait_b).unwrap();
    assert!(
        (50_000_000..50_100_000).contains(&(call.end_ns - call.start_ns)),
        "the first check finds it, the raise waits for the abort: {call:?}"
    );
    assert!(again.message.contains("was aborted"), "{}", again.message);
    // Called before the error (a 100-µs sleep): `b` completed, the wait returns at once.
    let (timeline, wait_b) = completed_first(100);
    let rank0 = &timeline.ranks[0];
    assert!(rank0.exceptions.is_empty(), "{:?}", rank0.exceptions);
    let call = rank0.host.iter().find(|h| h.op == wait_b).unwrap();
    assert!(call.end_ns - call.start_ns < 100_000, "{call:?}");
}

#[test]
fn is_completed_on_another_work_of_the_failed_communicator_is_true_from_its_error_r27() {
    let query = "[[op]]\nis_completed = \"wb\"\n";
    let late = format!("[[op]]\nhost_sleep_us = 5000\n{query}");
    let (after, _) = comm_error("", "world", &late, "");
    assert!(after.ranks[0].queries[0].completed, "after the error");
    assert!(
        !after.ranks[1].queries[0].completed,
        "rank 1's communicator has no error"
    );
    let (before, _) = comm_error("", "world", query, "");
    assert!(!before.ranks[0].queries[0].completed, "before the error");
}

/// Rank 0's network fails under `a` (NCCL reports it 1 ms after the enqueue at ≈ 20 µs;
/// `comm_abort_us` 50 ms); `side_sleep_us` of GPU sleep on a side stream; the host sleeps
/// 5 ms, past the error, then `between`, then `wait_a`, a `wait()` on `a` (`wait`: its extra
/// lines), then `again`, a caught all_reduce. The timeline, `wait_a`'s op and `again`'s.
fn own_error(env: &str, side_sleep_us: u64, between: &str, wait: &str) -> (Timeline, OpRef, OpRef) {
    let text = format!(
        "[env]\n{env}\n[host]\ncomm_abort_us = 50000\n[cluster]\nranks = 2\n\
         [groups.world]\neager_init = true\ntimeout_s = 1\n[streams]\nside = {{}}\n\
         [tensors]\nx = \"1MiB\"\n\
         [[op]]\nlabel = \"a\"\nall_reduce = \"x\"\nasync_op = true\nwork = \"wa\"\n\
         [[op]]\nset_stream = \"side\"\n[[op]]\ngpu_sleep_us = {side_sleep_us}\n\
         [[op]]\nset_stream = \"default\"\n[[op]]\nhost_sleep_us = 5000\n{between}\
         [[op]]\nlabel = \"wait_a\"\nwait = \"wa\"\n{wait}\
         [[op]]\nlabel = \"again\"\nall_reduce = \"x\"\ncatch = true\n\
         [[fault]]\nranks = [0]\nat = \"a\"\nkind = \"async_error\"\nafter_us = 1000\n"
    );
    let scenario = parse("own_error.toml", &text).unwrap();
    let labelled = |label: &str| {
        (scenario.ops.iter())
            .position(|op| op.label.as_deref() == Some(label))
            .unwrap() as OpRef
    };
    let (wait_a, again) = (labelled("wait_a"), labelled("again"));
    (simulate(&scenario), wait_a, again)
}

/// The program's `is_completed()` on `a`, between the sleep past its error and the wait.
const IS_COMPLETED_A: &str = "[[op]]\nis_completed = \"wa\"\n";

#[test]
fn a_wait_of_any_kind_called_after_its_works_error_aborts_the_communicator_then_raises_r15_r27() {
    // PyTorch's `WorkNCCL::wait()`: `synchronize()`, then for every wait, `exception()` set
    // → `abort()`, then the rethrow. Called at ≈ 5.02 ms, past the error at 1.02 ms: a
    // polling wait's first check stores the error in the Work, a default wait finds the one
    // the program's `is_completed()` stored just before; the main thread finds it after the
    // stream wait, aborts the communicator (50 ms), then raises DistBackendError naming
    // `a`; caught, `again` meets the aborted communicator; uncaught, the process ends at the
    // raise.
    let kinds = [
        ("", IS_COMPLETED_A, ""),
        ("", "", "timeout_ms = 500\n"),
        ("TORCH_NCCL_BLOCKING_WAIT = 1", "", ""),
    ];
    for (env, between, kind) in kinds {
        for catch in [true, false] {
            let case = format!("{env} {kind} catch {catch}");
            let wait = format!("{kind}catch = {catch}\n");
            let (timeline, wait_a, again) = own_error(env, 10, between, &wait);
            let records = main_thread(&timeline);
            let found = (records.iter())
                .find(|r| r.0 == WatchdogEvent::WaitError)
                .unwrap_or_else(|| panic!("{case}: the wait's finding: {records:?}"));
            assert!(
                (5_000_000..5_100_000).contains(&found.1),
                "{case}: {records:?}"
            );
            let abort = (records.iter())
                .find(|r| r.0 == WatchdogEvent::Abort)
                .unwrap_or_else(|| panic!("{case}: the abort: {records:?}"));
            assert_eq!(
                abort.1,
                found.1 + 50_000_000,
                "{case}: the raise waits for the abort"
            );
            let rank0 = &timeline.ranks[0];
            let call = rank0.host.iter().find(|h| h.op == wait_a).unwrap();
            assert_eq!(
                call.end_ns, abort.1,
                "{case}: the wait raises once the abort returned"
            );
            let rank0_findings = timeline.findings.iter().filter(|f| f.rank == Some(0));
            let raised = (rank0_findings.map(|f| (f.op, &f.message)))
                .chain(rank0.exceptions.iter().map(|e| (Some(e.op), &e.message)))
                .find(|(op, _)| *op == Some(wait_a))
                .unwrap_or_else(|| panic!("{case}: {:?}", timeline.findings))
                .1;
            assert!(
                raised.contains("DistBackendError")
                    && raised.contains("SeqNum=1")
                    && raised.contains("NCCL reported an async error"),
                "{case}: {raised}"
            );
            if catch {
                let next = (rank0.exceptions.iter())
                    .find(|e| e.op == again)
                    .unwrap_or_else(|| panic!("{case}: {:?}", rank0.exceptions));
                assert!(
                    next.message.contains("was aborted"),
                    "{case}: {}",
                    next.message
                );
            } else {
                let end = rank0.end.unwrap();
                assert_eq!(
                    (end.status, end.at_ns),
                    (ExitStatus::Raised, Some(abort.1)),
                    "{case}"
                );
            }
        }
    }
}

#[test]
fn a_default_wait_after_its_works_error_raises_once_the_device_drained_r15_r27() {
    // A 200-ms sleep on a side stream the collective does not wait for: the abort after the
    // error found at ≈ 5 ms (stored by `is_completed()`) lasts until the sleep ended, past
    // its 50 ms.
    let (timeline, wait_a, _) = own_error("", 200_000, IS_COMPLETED_A, "catch = true\n");
    let rank0 = &timeline.ranks[0];
    let side_end_ns = (rank0.kernels.iter())
        .find(|k| k.class == KernelClass::Sleep)
        .unwrap()
        .end_ns;
    assert!(side_end_ns > 200_000_000, "{side_end_ns}");
    let call = rank0.host.iter().find(|h| h.op == wait_a).unwrap();
    assert!(
        (side_end_ns..side_end_ns + 100_000).contains(&call.end_ns),
        "raised at {} ns, the side stream drained at {side_end_ns} ns",
        call.end_ns
    );
    assert_eq!(rank0.exceptions[0].op, wait_a);
}

#[test]
fn a_default_wait_after_its_works_error_returns_unless_the_program_asked_is_completed_r12_r27() {
    // PyTorch's `workEnqueue` hands the watchdog a copy of the Work: the watchdog's finding
    // of the error stays in its copy. Without an `is_completed()` of its own, the program's
    // Work holds no exception: the default wait, after its stream wait on an end event that
    // never fires, returns at once (R12), and the main thread neither aborts nor raises
    // there. The watchdog finds the error at its poll (100 ms) and, under the default
    // `TORCH_NCCL_ASYNC_ERROR_HANDLING=3`, takes the process down after its dump wait.
    let (timeline, wait_a, again) = own_error("", 10, "", "");
    let rank0 = &timeline.ranks[0];
    let call = rank0.host.iter().find(|h| h.op == wait_a).unwrap();
    assert!(
        call.end_ns - call.start_ns < 100_000,
        "the wait returns at once: {call:?}"
    );
    let records = main_thread(&timeline);
    assert!(
        !(records.iter()).any(|r| matches!(
            r.0,
            WatchdogEvent::WaitTimeout | WatchdogEvent::WaitError | WatchdogEvent::Abort
        )),
        "no finding or abort in the main thread: {records:?}"
    );
    assert!(
        !(timeline.findings.iter()).any(|f| f.rank == Some(0) && f.op == Some(wait_a)),
        "{:?}",
        timeline.findings
    );
    assert!(
        !(rank0.exceptions.iter()).any(|e| e.op == wait_a),
        "{:?}",
        rank0.exceptions
    );
    assert!(
        (rank0.host.iter()).any(|h| h.op == again),
        "the program goes on past the wait"
    );
    let found = (timeline.watchdog.iter())
        .find(|r| {
            r.rank == 0 && r.thread != ThreadKind::Main && r.event == WatchdogEvent::AsyncError
        })
        .expect("the watchdog finds the error");
    assert_eq!(found.at_ns, crate::pg::work::WATCHDOG_POLL_NS);
    let end = rank0.end.unwrap();
    assert_eq!(
        end.status,
        ExitStatus::Aborted,
        "mode 3 takes the process down"
    );
    assert!(
        end.at_ns.unwrap() > found.at_ns,
        "after the dump wait: {end:?}"
    );
}

#[test]
fn is_completed_before_the_error_stores_nothing_for_a_later_default_wait_r12_r27() {
    // The program's `is_completed()` at ≈ 20 µs, before the error at 1.02 ms, finds none;
    // the default wait at 5 ms then returns as without it.
    let text = "[[op]]\nlabel = \"early\"\nis_completed = \"wa\"\n";
    let scenario = format!(
        "[env]\n\n[host]\ncomm_abort_us = 50000\n[cluster]\nranks = 2\n\
         [groups.world]\neager_init = true\ntimeout_s = 1\n[tensors]\nx = \"1MiB\"\n\
         [[op]]\nlabel = \"a\"\nall_reduce = \"x\"\nasync_op = true\nwork = \"wa\"\n{text}\
         [[op]]\nhost_sleep_us = 5000\n[[op]]\nlabel = \"wait_b\"\nwait = \"wa\"\n\
         [[fault]]\nranks = [0]\nat = \"a\"\nkind = \"async_error\"\nafter_us = 1000\n"
    );
    let (timeline, wait) = labelled_run(&scenario);
    assert!(!timeline.ranks[0].queries[0].completed);
    let records = main_thread(&timeline);
    assert!(
        !(records.iter())
            .any(|r| matches!(r.0, WatchdogEvent::WaitTimeout | WatchdogEvent::WaitError)),
        "{records:?}"
    );
    assert!(
        !(timeline.findings.iter()).any(|f| f.op == Some(wait)),
        "{:?}",
        timeline.findings
    );
}

#[test]
fn a_default_wait_on_another_work_raises_only_after_its_is_completed_found_the_error_r27() {
    // `b` of the failed communicator: the program's `is_completed()` on `b` after `a`'s error
    // stores the communicator's error in `b`, and the default wait on `b` aborts, then
    // raises; without it the wait on `b` raises nothing.
    let late = "[[op]]\nhost_sleep_us = 5000\n";
    for (between, raises) in [
        (format!("{late}[[op]]\nis_completed = \"wb\"\n"), true),
        (late.to_string(), false),
    ] {
        let (timeline, wait_b) = comm_error("", "world", &between, "");
        let raised = (timeline.findings.iter())
            .find(|f| f.rank == Some(0) && f.op == Some(wait_b))
            .map(|f| (f.kind, f.message.contains("SeqNum=2")));
        let expected = raises.then_some((FindingKind::AsyncError, true));
        assert_eq!(raised, expected, "{between}: {:?}", timeline.findings);
    }
}

#[test]
fn a_barriers_default_wait_after_its_error_stores_it_itself_and_raises_r14_r27() {
    // PyTorch 2.12's barrier `wait()` asks `isCompleted()` itself (`isBarrierOp_ &&
    // !isCompleted()`), which stores the error in the program's Work before the wait checks
    // `exception()`: no `is_completed()` of the program is needed.
    let text = "[host]\ncomm_abort_us = 50000\n[cluster]\nranks = 2\n\
         [groups.world]\neager_init = true\ntimeout_s = 1\n\
         [[op]]\nlabel = \"a\"\nbarrier = true\nasync_op = true\nwork = \"wa\"\n\
         [[op]]\nhost_sleep_us = 5000\n[[op]]\nlabel = \"wait_b\"\nwait = \"wa\"\n\
         [[fault]]\nranks = [0]\nat = \"a\"\nkind = \"async_error\"\nafter_us = 1000\n";
    let (timeline, wait) = labelled_run(text);
    let raised = (timeline.findings.iter())
        .find(|f| f.rank == Some(0) && f.op == Some(wait))
        .unwrap_or_else(|| panic!("{:?}", timeline.findings));
    assert_eq!(raised.kind, FindingKind::AsyncError, "{}", raised.message);
    let records = main_thread(&timeline);
    let events: Vec<_> = records.iter().map(|r| r.0).collect();
    assert_eq!(
        events,
        [
            WatchdogEvent::Fault,
            WatchdogEvent::WaitError,
            WatchdogEvent::Abort,
            WatchdogEvent::Exit
        ],
        "{records:?}"
    );
}

#[test]
fn an_eager_worlds_send_runs_on_the_worlds_communicator_and_sees_its_error_r11_r27() {
    // Eager world: rank 0's send to rank 1 runs on the world's communicator (R11), so after
    // the network failed under all_reduce `a` of that communicator, `wait(timeout)` on the
    // send's Work finds the communicator's error at its first poll past it (≈ 1.02 ms), not a
    // timeout; rank 1 receives nothing (its recv waits behind rank 0's failed all_reduce).
    let text = "[host]\ncomm_abort_us = 50000\n[cluster]\nranks = 2\n\
         [groups.world]\neager_init = true\ntimeout_s = 1\n\
         [tensors]\nx = \"1MiB\"\ny = \"1MiB\"\n\
         [[op]]\nlabel = \"a\"\nall_reduce = \"x\"\nasync_op = true\nwork = \"wa\"\n\
         [[op]]\nranks = [0]\nsend = \"y\"\npeer = 1\nasync_op = true\nwork = \"ws\"\n\
         [[op]]\nranks = [1]\nrecv = \"y\"\npeer = 0\nasync_op = true\nwork = \"wr\"\n\
         [[op]]\nlabel = \"wait_b\"\nranks = [0]\nwait = \"ws\"\ntimeout_ms = 500\n\
         [[fault]]\nranks = [0]\nat = \"a\"\nkind = \"async_error\"\nafter_us = 1000\n";
    let (timeline, wait_send) = labelled_run(text);
    let raised = (timeline.findings.iter())
        .find(|f| f.rank == Some(0) && f.op == Some(wait_send))
        .unwrap_or_else(|| panic!("{:?}", timeline.findings));
    assert_eq!(raised.kind, FindingKind::AsyncError, "{}", raised.message);
    let found = (main_thread(&timeline).into_iter())
        .find(|r| r.0 == WatchdogEvent::WaitError)
        .expect("the poll's finding");
    assert!((1_020_000..2_100_000).contains(&found.1), "{found:?}");
}

#[test]
fn a_caught_raise_in_a_lists_wait_leaves_the_lists_later_calls_unissued_r15_r27() {
    // Under the 2.5 profile each call of a synchronous list's all_reduce waits on its Work
    // (R11), and under blocking wait that wait polls (R15): rank 1 hangs, so rank 0's wait of
    // the list's first call times out after 100 ms and raises inside the op, which catches it
    // (`try: for t in lst: dist.all_reduce(t) except DistBackendError:`). The second call never
    // runs; the program goes on at the event record and the stream wait on it after the list.
    let text = "torch = \"2.5\"\n[cluster]\nranks = 2\n[env]\nTORCH_NCCL_BLOCKING_WAIT = 1\n\
         [groups.world]\neager_init = true\ntimeout_s = 0.1\n\
         [tensors]\nlst = { size = \"1KiB\", count = 2 }\n\
         [[op]]\nlabel = \"ar\"\nall_reduce = \"lst\"\ncatch = true\n\
         [[op]]\nrecord_event = \"e\"\n\
         [[op]]\nlabel = \"wait_b\"\nwait_event = \"e\"\n\
         [[op]]\nmark = \"after\"\n\
         [[fault]]\nranks = [1]\nat = \"ar\"\nkind = \"hang\"\n";
    let (timeline, wait_event) = labelled_run(text);
    let rank0 = &timeline.ranks[0];
    let [raised] = rank0.exceptions.as_slice() else {
        panic!("{:?}", rank0.exceptions)
    };
    assert!(raised.message.contains("SeqNum=1"), "{}", raised.message);
    let issued = rank0.collectives.len() + rank0.unfinished_collectives.len();
    assert_eq!(issued, 1, "the list's second call never ran");
    let waits: Vec<_> = (rank0.stream_waits.iter())
        .filter(|w| w.op == wait_event)
        .collect();
    assert_eq!(waits.len(), 1, "{:?}", rank0.stream_waits);
    assert!(
        waits[0].source_ns >= 100_000_000,
        "the wait is on the event recorded after the raise: {:?}",
        waits[0]
    );
    assert_eq!(rank0.marks.len(), 1);
}
