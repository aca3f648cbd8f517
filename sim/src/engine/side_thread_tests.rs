//! Point-to-point calls and the side threads, each through a whole small scenario: a Work's
//! `SeqNum` as each rank numbers it (desync report, mismatch and deadlock findings), one
//! watchdog per process group, and the aborts of communicators (R15, R27, R28, R31). Apart from
//! `tests.rs`, the run loop's own behaviours, so that each file reads on its own.

use super::*;
use crate::scenario::parse;

/// Rank 1 receives from rank 0 (its point-to-point call 1) and sends 1 MiB to rank 2 (its 2),
/// which receives 2 MiB from it (rank 2's call 1): a mismatch at their pair's first call.
const PIPELINE_MISMATCH: &str = "[cluster]\nranks = 3\n[groups.world]\ntimeout_s = 1\n\
    [tensors]\nx = \"1MiB\"\ny = \"2MiB\"\n\
    [[op]]\nranks = [0]\nsend = \"x\"\npeer = 1\n[[op]]\nranks = [1]\nrecv = \"x\"\npeer = 0\n\
    [[op]]\nranks = [1]\nsend = \"x\"\npeer = 2\n[[op]]\nranks = [2]\nrecv = \"y\"\npeer = 1\n";

#[test]
fn the_desync_report_and_the_mismatch_number_calls_as_each_rank_s_work_does() {
    let text = format!("{PIPELINE_MISMATCH}[env]\nTORCH_NCCL_DESYNC_DEBUG = 1\n");
    let timeline = simulate(&parse("pipeline.toml", &text).unwrap());
    let mismatch = (timeline.findings.iter())
        .find(|f| f.kind == FindingKind::Mismatch)
        .expect("a mismatch finding");
    assert!(
        mismatch
            .message
            .contains("SeqNum=2 on rank 1, 1 on rank 2 of group p2p:1:2"),
        "{}",
        mismatch.message
    );
    let report = (timeline.watchdog.iter())
        .find(|r| r.rank == 1 && r.message.contains("Desync debug report"))
        .expect("rank 1's desync report");
    assert!(
        report
            .message
            .contains("Desync debug report at SeqNum=2 (SEND, group p2p:1:2)"),
        "{}",
        report.message
    );
    assert!(
        report
            .message
            .contains("rank 1: last enqueued 2, last completed 1"),
        "{}",
        report.message
    );
    assert!(
        report
            .message
            .contains("rank 2: last enqueued 1, last completed 0"),
        "{}",
        report.message
    );
    assert!(
        report
            .message
            .contains("ranks disagree on the op at 2 (p2p:1:2)"),
        "{}",
        report.message
    );
}

#[test]
fn one_watchdog_polls_a_process_group_s_sends_and_collectives_in_enqueue_order() {
    // Rank 1's send to rank 2 never completes (a mismatch), and the all_reduce after it
    // waits behind it. The default group's one watchdog catches its oldest pending Work, the
    // send, and handles that error alone: no second timeout for the all_reduce, as a watchdog
    // per pair and per group would have logged.
    let text = format!("{PIPELINE_MISMATCH}[[op]]\nall_reduce = \"x\"\n");
    let timeline = simulate(&parse("pipeline.toml", &text).unwrap());
    let timeouts: Vec<&str> = (timeline.findings.iter())
        .filter(|f| f.kind == FindingKind::WatchdogTimeout && f.concerns(1))
        .map(|f| f.message.as_str())
        .collect();
    assert_eq!(timeouts.len(), 1, "{timeouts:#?}");
    assert!(timeouts[0].contains("OpType=SEND"), "{}", timeouts[0]);
    let rank0 = (timeline.findings.iter())
        .find(|f| f.kind == FindingKind::WatchdogTimeout && f.concerns(0))
        .expect("rank 0's all_reduce times out");
    assert!(
        rank0.message.contains("OpType=ALLREDUCE"),
        "{}",
        rank0.message
    );
}

#[test]
fn a_process_group_s_abort_ends_its_pairs_spinning_kernels_too_r27() {
    // Mode 2: rank 1 hangs before the all_reduce; rank 0's watchdog catches it at 1.1 s and
    // aborts at 2.1 s, when rank 0's send to rank 1 (issued at 2.0 s) spins. The default
    // group's abort covers the pair's communicator: the send's kernel ends and the abort
    // returns at once (it used to wait until the pair's own watchdog aborted it at 4.1 s).
    // The send, called during the dump wait, launched its kernel and then waited for the
    // watchdog's Work list until the abort returned: its Work is on the aborted pair
    // communicator, found at the next poll (2.2 s), and handled again (abort at 3.2 s).
    let text = std::fs::read_to_string("../tests/data/sim/p2p_abort.toml").unwrap();
    let timeline = simulate(&parse("p2p_abort.toml", &text).unwrap());
    assert_eq!(
        abort_returns_of_rank_0(&timeline),
        [2_100_000_000, 3_200_000_000]
    );
    let send = (timeline.ranks[0].host.iter())
        .find(|c| c.op == 4)
        .expect("the send's call");
    assert_eq!(send.end_ns, 2_100_000_000);
}

/// When rank 0's watchdog logged that its abort of the communicators returned (R27, mode 2).
fn abort_returns_of_rank_0(timeline: &Timeline) -> Vec<u64> {
    (timeline.watchdog.iter())
        .filter(|r| r.rank == 0 && r.event == WatchdogEvent::AbortReturned)
        .map(|r| r.at_ns)
        .collect()
}

/// Rank 1 hangs before `ar`; rank 0's wait on it times out at 1.5 s (its own `timeout_ms`),
/// and the main thread's abort lasts `comm_abort_us`. `{extra}` sets the rest.
fn caught_wait_timeout(extra: &str) -> String {
    format!(
        "[cluster]\nranks = 2\n[groups.world]\neager_init = true\ntimeout_s = 1\n[tensors]\nx = \"4MiB\"\n\
         [[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\nasync_op = true\nwork = \"w\"\n\
         [[op]]\nwait = \"w\"\ntimeout_ms = 1500\ncatch = true\n[[op]]\nhost_sleep_us = 40_000_000\n\
         [[fault]]\nranks = [1]\nat = \"ar\"\nkind = \"hang\"\n{extra}"
    )
}

#[test]
fn the_watchdog_s_abort_waits_for_the_main_thread_s_that_began_first_r15_r27() {
    // The main thread's abort runs from 1.5 s to 6.5 s; the watchdog's begins at 2.1 s, after
    // its 1-s dump wait, and returns only with it (mode 2 logs the return; mode 1 then takes
    // the process down), not at 2.1 s.
    for mode in [1, 2] {
        let text = caught_wait_timeout(&format!(
            "[env]\nTORCH_NCCL_ASYNC_ERROR_HANDLING = {mode}\nTORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC = 250\n\
             [host]\ncomm_abort_us = 5_000_000\n"
        ));
        let timeline = simulate(&parse("floor.toml", &text).unwrap());
        // The main thread's abort ended 5 s after its wait's poll past 1.5 s.
        let main_returned_ns = (timeline.watchdog.iter())
            .find(|r| {
                r.rank == 0 && r.thread == ThreadKind::Main && r.event == WatchdogEvent::Abort
            })
            .expect("the main thread's raise after its abort")
            .at_ns;
        assert!((6_500_000_000..6_510_000_000).contains(&main_returned_ns));
        let rank0 = &timeline.ranks[0];
        if mode == 1 {
            assert_eq!(rank0.end.and_then(|end| end.at_ns), Some(main_returned_ns));
        } else {
            assert_eq!(abort_returns_of_rank_0(&timeline), [main_returned_ns]);
        }
    }
}

#[test]
fn an_abort_that_returns_at_once_does_not_stall_the_heartbeat_r28() {
    // The main thread's abort (1.2 s to 9.2 s) is over when the watchdog's dump wait ends at
    // 13.1 s: the watchdog's abort returns at once (logged), and the monitor, reading every
    // 10 s, finds a heartbeat that moved; it once counted the 8-s abort as a stall.
    let text = caught_wait_timeout(
        "[env]\nTORCH_NCCL_ASYNC_ERROR_HANDLING = 2\nTORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC = 3000\n\
         TORCH_NCCL_DUMP_ON_TIMEOUT = 0\nTORCH_NCCL_HEARTBEAT_TIMEOUT_SEC = 10\n[host]\ncomm_abort_us = 8_000_000\n",
    )
    .replace("timeout_ms = 1500", "timeout_ms = 1200");
    let timeline = simulate(&parse("hb.toml", &text).unwrap());
    assert!(
        !(timeline.findings.iter()).any(|f| f.kind == FindingKind::HeartbeatAbort),
        "{:?}",
        timeline.findings
    );
    assert!(!(timeline.watchdog.iter()).any(|r| r.event == WatchdogEvent::HeartbeatTimeout));
    assert_eq!(abort_returns_of_rank_0(&timeline), [13_100_000_000]);
}

/// A scenario of `tests/data/sim/`, simulated.
fn simulated_data(name: &str) -> Timeline {
    let path = format!("../tests/data/sim/{name}.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    simulate(&parse(&path, &text).unwrap())
}

/// When rank 0's process ended raising, in simulated nanoseconds.
fn raised_end_of_rank_0(timeline: &Timeline) -> Option<u64> {
    let end = timeline.ranks[0].end.unwrap();
    assert_eq!(end.status, ExitStatus::Raised);
    end.at_ns
}

#[test]
fn review_cases_a_pair_call_during_the_group_s_abort_raises_when_it_returns_r27() {
    // A lazy world: the first all_reduce creates it (0.3 s), so the sends run on the pair's
    // own communicator (R11). Rank 1 hangs before `ar` (enqueued at 0.325 s); the watchdog's
    // timeout at its 1.4 s poll, the dump wait (1 s), then mode 2's abort of every
    // communicator of the default group, the pair's included: 0.5 s from 2.4 s. Rank 0's
    // send at 2.525 s (after its 2.2 s sleep) blocks on the aborting pair communicator and
    // raises when the abort returns, at 2.9 s (it used to block for good, until the heartbeat
    // monitor's end at 482 s).
    let timeline = simulated_data("review_blocked_lazy");
    let at_ns = raised_end_of_rank_0(&timeline);
    assert!(
        at_ns.is_some_and(|at_ns| (2_900_000_000..2_901_000_000).contains(&at_ns)),
        "{at_ns:?}"
    );
}

#[test]
fn review_cases_an_eager_worlds_send_during_the_world_s_abort_raises_when_it_returns_r11_r27() {
    // The same program on an eager world: the send runs on the world's communicator (R11),
    // the one the watchdog aborts, 0.5 s from 2.1 s (no bootstrap: the timeout at the 1.1 s
    // poll); the send at 2.2 s raises when that abort returns, at 2.6 s.
    let timeline = simulated_data("review_blocked");
    let at_ns = raised_end_of_rank_0(&timeline);
    assert!(
        at_ns.is_some_and(|at_ns| (2_600_000_000..2_700_000_000).contains(&at_ns)),
        "{at_ns:?}"
    );
}

#[test]
fn review_cases_an_eager_worlds_send_wait_aborts_the_worlds_communicator_r11_r15() {
    // The world is eager, so the send runs on the world's communicator, behind the all_reduce
    // rank 1 never joins (R11). Its wait times out at 0.5 s and the main thread aborts that
    // communicator, the all_reduce's kernel with it: the device drains, and the abort
    // (0.9 s) returns at 1.4 s, where the program catches the raise; no watchdog abort
    // follows. (On a lazy world the send has a pair communicator of its own:
    // review_cases_the_watchdog_s_abort_keeps_its_least_time_after_the_main_thread_s.)
    let timeline = simulated_data("review_pairwait");
    let caught = (timeline.ranks[0].exceptions.iter())
        .map(|e| e.at_ns)
        .collect::<Vec<_>>();
    assert!(
        matches!(caught[..], [at_ns] if (1_400_000_000..1_401_000_000).contains(&at_ns)),
        "{caught:?}"
    );
    assert_eq!(abort_returns_of_rank_0(&timeline), Vec::<u64>::new());
}

#[test]
fn review_cases_the_watchdog_s_abort_keeps_its_least_time_after_the_main_thread_s_r15_r27() {
    // A lazy world: the first all_reduce creates it (0.3 s), and the send runs on the pair's
    // own communicator (R11). The send's wait times out at 0.825 s (its 500 ms) and the
    // main thread aborts the pair, whose abort waits for the device, held by the all_reduce
    // rank 1 never joins. The watchdog times that all_reduce out at its 1.4 s poll; after the
    // dump wait (1 s), its abort of the default group (0.9 s) begins at 2.4 s, ends the
    // all_reduce's kernel, and returns once, at 3.3 s (it returned at once, then again).
    let timeline = simulated_data("review_pairwait_lazy");
    assert_eq!(abort_returns_of_rank_0(&timeline), [3_300_000_000]);
}

#[test]
fn review_cases_a_send_in_the_program_changes_nothing_of_a_caught_wait_s_end_r31() {
    // The same program with and without a send before it: both processes end as the mode 3
    // watchdog takes them down, not at once with a failure (a pair group once aliased the
    // default group's watchdog in the exit's checks).
    let plain = simulated_data("review_wt2");
    let with_send = simulated_data("review_wt2p");
    let statuses = |t: &Timeline| {
        t.ranks
            .iter()
            .map(|r| r.end.unwrap().status)
            .collect::<Vec<_>>()
    };
    assert!(statuses(&plain).iter().all(|&s| s == ExitStatus::Aborted));
    assert!(statuses(&with_send)
        .iter()
        .all(|&s| s == ExitStatus::Aborted));
}

/// When rank 0's op `name` raised, caught.
fn caught_at(timeline: &Timeline, name: &str) -> Vec<u64> {
    let op = timeline.ops.iter().position(|op| op.name == name).unwrap() as OpRef;
    (timeline.ranks[0].exceptions.iter())
        .filter(|e| e.op == op)
        .map(|e| e.at_ns)
        .collect()
}

#[test]
fn review_cases_the_watchdog_handling_a_pair_s_aborted_work_aborts_the_whole_group_r15_r27() {
    // A lazy world: the first all_reduce creates it (0.3 s), and the send runs on the pair's
    // own communicator (R11). The send's wait times out at 0.425 s (its 100 ms) and is
    // caught once the main thread's abort of the pair (1 s) returned, at 1.425 s; the
    // watchdog finds the pair's aborted communicator then and, after the dump wait (1 s),
    // aborts every communicator of the default group (mode 2), the world's included, from
    // 2.425 s to 3.425 s: the world all_reduce after the 3.5 s sleep raises, caught, at
    // 4.925 s (every instant plus the host calls' 98 us). The world was aborted by the
    // watchdog alone.
    let timeline = simulated_data("review_abw_lazy");
    let caught = caught_at(&timeline, "ar2");
    assert!(
        matches!(caught[..], [at_ns] if (4_925_000_000..4_926_000_000).contains(&at_ns)),
        "{caught:?}"
    );
    assert_eq!(abort_returns_of_rank_0(&timeline), [3_425_098_000]);
}

#[test]
fn review_cases_an_eager_worlds_send_wait_aborts_the_world_itself_r11_r15() {
    // The same program on an eager world: the send runs on the world's communicator (R11),
    // so the wait's timeout (0.1 s) aborts the world's own communicator; the watchdog's
    // abort at 2.1 s finds it aborted and returns at once; the all_reduce after the 3.5 s
    // sleep raises, caught, at 4.6 s, on the communicator the main thread aborted (every
    // instant plus the host calls' 68 us).
    let timeline = simulated_data("review_abw");
    let caught = caught_at(&timeline, "ar2");
    assert!(
        matches!(caught[..], [at_ns] if (4_600_000_000..4_601_000_000).contains(&at_ns)),
        "{caught:?}"
    );
    assert_eq!(abort_returns_of_rank_0(&timeline), [2_100_068_000]);
}

#[test]
fn a_wait_s_timeout_on_a_send_aborts_the_pair_s_communicator_alone_r15() {
    // After a first exchange, rank 0's second send to rank 2 is never received; its wait
    // times out after 100 ms and the program catches the raise. The main thread aborted the
    // pair's communicator only: the all_reduce of all three ranks after it completes.
    let text = "[cluster]\nranks = 3\n[tensors]\nx = \"1MiB\"\n\
                [[op]]\nranks = [0]\nsend = \"x\"\npeer = 2\n[[op]]\nranks = [2]\nrecv = \"x\"\npeer = 0\n\
                [[op]]\nranks = [0]\nsend = \"x\"\npeer = 2\nasync_op = true\nwork = \"s\"\n\
                [[op]]\nranks = [0]\nwait = \"s\"\ntimeout_ms = 100\ncatch = true\n\
                [[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\n";
    let timeline = simulate(&parse("r15.toml", text).unwrap());
    let ar = timeline.ops.iter().position(|op| op.name == "ar").unwrap() as OpRef;
    for rank in &timeline.ranks {
        assert!(
            rank.collectives.iter().any(|c| c.op == ar),
            "rank {}: {:?}",
            rank.rank,
            timeline.findings
        );
    }
}

#[test]
fn a_deadlock_names_each_rank_s_seqnum_where_they_differ() {
    let text = format!(
        "{PIPELINE_MISMATCH}[env]\nTORCH_NCCL_ASYNC_ERROR_HANDLING = 0\nTORCH_NCCL_ENABLE_MONITORING = 0\n"
    );
    let timeline = simulate(&parse("pipeline.toml", &text).unwrap());
    let deadlock = (timeline.findings.iter())
        .find(|f| f.kind == FindingKind::Deadlock && f.message.contains("never completes"))
        .expect("the pair's call never completes");
    assert!(
        deadlock
            .message
            .contains("(SeqNum=1 on rank 2, 2 on rank 1, OpType="),
        "{}",
        deadlock.message
    );
}

#[test]
fn a_caught_wait_timeout_on_a_send_ends_as_one_on_a_collective_does_r15_r31() {
    // review_wt2p with the timed-out wait on a send instead of the all_reduce: the main
    // thread's abort aborted the pair's communicator, so at the return without
    // destroy_process_group() the destructor has nothing to abort and joins the watchdog as
    // for the all_reduce, instead of crashing as on a return during the dump sleep.
    let text = "destroy_process_group = false\nrepeat = 1\n[cluster]\nranks = 2\n\
                [groups.world]\neager_init = true\n[tensors]\nx = \"1MiB\"\n\
                [[op]]\nlabel = \"backlog\"\ngpu_sleep_us = 300_000\n\
                [[op]]\nranks = [0]\nsend = \"x\"\npeer = 1\nasync_op = true\nwork = \"s\"\n\
                [[op]]\nranks = [1]\nrecv = \"x\"\npeer = 0\n\
                [[op]]\nranks = [0]\nwait = \"s\"\ntimeout_ms = 50\ncatch = true\n\
                [[op]]\nlabel = \"done\"\ndevice_sync = true\n";
    let timeline = simulate(&parse("send_wait.toml", text).unwrap());
    let rank0 = timeline.ranks[0].end.unwrap();
    assert_ne!(rank0.status, ExitStatus::Crashed, "{:?}", timeline.findings);
    assert!(
        !(timeline.findings.iter()).any(|f| f.kind == FindingKind::ExitFailure),
        "{:?}",
        timeline.findings
    );
}

/// Rank 1 hangs before the all_reduce of iteration 1 of 3; rank 0 never waits, so its
/// program returns while that all_reduce spins, and its watchdog catches it 1.1 s in.
const HANG_IN_ITERATION_1: &str = "repeat = 3\n[cluster]\nranks = 2\n\
    [groups.world]\neager_init = true\ntimeout_s = 1\n[tensors]\nx = \"1MiB\"\n\
    [[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\nasync_op = true\n\
    [[fault]]\nranks = [1]\nat = \"ar\"\niteration = 1\nkind = \"hang\"\n";

/// (iteration, op) of rank `rank`'s finding of `kind`.
fn finding_place(
    timeline: &Timeline,
    rank: u32,
    kind: FindingKind,
) -> (Option<u32>, Option<OpRef>) {
    let finding = (timeline.findings.iter())
        .find(|f| f.kind == kind && f.concerns(rank))
        .unwrap_or_else(|| panic!("rank {rank}'s {kind:?}: {:#?}", timeline.findings));
    (finding.iteration, finding.op)
}

#[test]
fn a_watchdog_finding_names_the_iteration_of_the_work_it_caught_not_the_host_s_r26() {
    // The Work is SeqNum 2, the all_reduce of iteration 1; rank 0's host, past its program's
    // end, is in no iteration (it used to name iteration 3, one past the last). Rank 1's
    // heartbeat monitor ends its process while its host hangs in iteration 1.
    let timeline = simulate(&parse("hang.toml", HANG_IN_ITERATION_1).unwrap());
    let timeout = (timeline.findings.iter())
        .find(|f| f.kind == FindingKind::WatchdogTimeout && f.concerns(0))
        .expect("rank 0's timeout");
    assert!(timeout.message.contains("SeqNum=2"), "{}", timeout.message);
    assert_eq!(timeline.ranks[0].unfinished_iteration, None, "it returned");
    assert_eq!(
        finding_place(&timeline, 0, FindingKind::WatchdogTimeout),
        (Some(1), Some(0))
    );
    assert_eq!(
        finding_place(&timeline, 1, FindingKind::HeartbeatAbort),
        (Some(1), None)
    );
}

#[test]
fn a_finding_of_no_call_after_the_program_returned_names_no_iteration_r27() {
    // Rank 1's network fails under the all_reduce; rank 0's heartbeat monitor reads its dump
    // signal after rank 0's one-iteration program returned and ends the process (R28): a
    // finding of no op and no iteration (it used to name iteration 1, which does not exist).
    // The error rank 1 writes into the store (TORCH_NCCL_PROPAGATE_ERROR) is only logged.
    let text = "[env]\nTORCH_NCCL_PROPAGATE_ERROR = 1\n[cluster]\nranks = 2\n\
        [groups.world]\neager_init = true\n[tensors]\nx = \"1MiB\"\n\
        [[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\nasync_op = true\n\
        [[fault]]\nranks = [1]\nat = \"ar\"\nkind = \"async_error\"\nafter_us = 1000\n";
    let timeline = simulate(&parse("remote.toml", text).unwrap());
    assert_eq!(timeline.ranks[0].unfinished_iteration, None, "it returned");
    assert_eq!(
        finding_place(&timeline, 0, FindingKind::HeartbeatAbort),
        (None, None)
    );
    assert_eq!(
        finding_place(&timeline, 1, FindingKind::AsyncError),
        (Some(0), Some(0)),
        "rank 1's own is its Work's"
    );
}

/// After an all_reduce of `y` (which creates a lazy world's communicator), rank 0 all_reduces
/// `x` then sends `y` to rank 1; rank 1 receives `y` then all_reduces `x`; every call async,
/// its Work waited at the end. `{world}` declares the world group.
fn crossed_send_and_all_reduce(world: &str) -> String {
    format!(
        "[cluster]\nranks = 2\n[groups.world]\ntimeout_s = 1\n{world}[tensors]\nx = \"64MiB\"\ny = \"1MiB\"\n\
         [[op]]\nall_reduce = \"y\"\n\
         [[op]]\nranks = [0]\nall_reduce = \"x\"\nasync_op = true\nwork = \"a\"\n\
         [[op]]\nranks = [0]\nsend = \"y\"\npeer = 1\nasync_op = true\nwork = \"p\"\n\
         [[op]]\nranks = [1]\nrecv = \"y\"\npeer = 0\nasync_op = true\nwork = \"q\"\n\
         [[op]]\nranks = [1]\nall_reduce = \"x\"\nasync_op = true\nwork = \"b\"\n\
         [[op]]\nranks = [0]\nwait = \"a\"\n[[op]]\nranks = [1]\nwait = \"b\"\n\
         [[op]]\nranks = [0]\nwait = \"p\"\n[[op]]\nranks = [1]\nwait = \"q\"\n[[op]]\ndevice_sync = true\n"
    )
}

#[test]
fn an_eager_world_serialises_a_send_with_its_collectives_and_crossed_orders_hang_r11() {
    // Lazy: the send and the receive run on their pair's communicator and stream, beside the
    // all_reduces: the run completes. Eager (`device_id`): PyTorch makes no pair
    // communicator; the send queues behind rank 0's all_reduce on the world's stream, the
    // receive ahead of rank 1's: neither can start, and the watchdogs time both out.
    let lazy = simulate(&parse("lazy.toml", &crossed_send_and_all_reduce("")).unwrap());
    assert!(lazy.findings.is_empty(), "{:#?}", lazy.findings);
    assert!(
        (lazy.ranks[0].streams.iter()).any(|s| s.name == "nccl:p2p:0:1"),
        "the pair's stream"
    );
    for world in ["eager_init = true\n", ""] {
        let text = if world.is_empty() {
            crossed_send_and_all_reduce("").replace(
                "[tensors]",
                "[[op]]\ninit_process_group = true\ndevice_id = true\n[tensors]",
            )
        } else {
            crossed_send_and_all_reduce(world)
        };
        let eager = simulate(&parse("eager.toml", &text).unwrap());
        let timeouts: Vec<u32> = (eager.findings.iter())
            .filter(|f| f.kind == FindingKind::WatchdogTimeout)
            .filter_map(|f| f.rank)
            .collect();
        assert_eq!(timeouts, [0, 1], "{:#?}", eager.findings);
        assert!(
            !(eager.ranks[0].streams.iter()).any(|s| s.name.starts_with("nccl:p2p")),
            "no pair stream: {:?}",
            eager.ranks[0].streams
        );
        let sends: Vec<u64> = (eager.ranks[0].host.iter())
            .filter(|c| eager.ops[c.op as usize].key == "send")
            .map(|c| c.end_ns - c.start_ns)
            .collect();
        assert!(
            sends.len() == 1 && sends[0] < 1_000_000,
            "no pair communicator bootstrapped inside the send: {sends:?}"
        );
    }
}

#[test]
fn an_eager_world_runs_a_send_after_its_all_reduce_a_lazy_one_beside_it_r11() {
    // Both ranks all_reduce 64 MiB, then send (receive) 1 MiB, async, twice (the first
    // iteration bootstraps the lazy communicators): in the second, on the pair's stream
    // the send starts while the all_reduce runs; on the eager world's one stream it starts
    // only once the all_reduce ended.
    let text = "repeat = 2\n[cluster]\nranks = 2\n{world}[tensors]\nx = \"64MiB\"\ny = \"1MiB\"\n\
        [[op]]\nall_reduce = \"x\"\nasync_op = true\nwork = \"a\"\n\
        [[op]]\nranks = [0]\nsend = \"y\"\npeer = 1\nasync_op = true\nwork = \"p\"\n\
        [[op]]\nranks = [1]\nrecv = \"y\"\npeer = 0\nasync_op = true\nwork = \"q\"\n\
        [[op]]\nwait = \"a\"\n[[op]]\nranks = [0]\nwait = \"p\"\n[[op]]\nranks = [1]\nwait = \"q\"\n[[op]]\ndevice_sync = true\n";
    let spans = |world: &str| {
        let timeline = simulate(&parse("overlap.toml", &text.replace("{world}", world)).unwrap());
        assert!(timeline.findings.is_empty(), "{:#?}", timeline.findings);
        // PyTorch's warning, once per rank (its first send, its first receive), eager only.
        let warnings: Vec<(u32, ThreadKind)> = (timeline.watchdog.iter())
            .filter(|r| r.event == WatchdogEvent::Warning)
            .inspect(|r| assert!(r.message.contains("with size 2.  In eager initialization mode, unbatched P2P ops are treated as independent collective ops"), "{}", r.message))
            .map(|r| (r.rank, r.thread))
            .collect();
        let expected: &[(u32, ThreadKind)] = if world.is_empty() {
            &[]
        } else {
            &[(0, ThreadKind::Main), (1, ThreadKind::Main)]
        };
        assert_eq!(warnings, expected);
        let kernel = |op: u32| {
            let k = (timeline.ranks[0].kernels.iter())
                .find(|k| k.op == op && k.iteration == 1)
                .expect("the op's kernel in the second iteration");
            (k.start_ns, k.end_ns, k.stream)
        };
        (kernel(0), kernel(1))
    };
    let ((_, all_reduce_end, all_reduce_stream), (send_start, _, send_stream)) = spans("");
    assert!(send_start < all_reduce_end, "lazy: the send overlaps");
    assert_ne!(all_reduce_stream, send_stream);
    let ((_, all_reduce_end, all_reduce_stream), (send_start, _, send_stream)) =
        spans("[groups.world]\neager_init = true\n");
    assert!(send_start >= all_reduce_end, "eager: the send waits");
    assert_eq!(all_reduce_stream, send_stream, "the world's stream");
    // The variable silences the warning and changes nothing else.
    let silenced = text.replace("{world}", "[groups.world]\neager_init = true\n[env]\nTORCH_NCCL_SHOW_EAGER_INIT_P2P_SERIALIZATION_WARNING = 0\n");
    let timeline = simulate(&parse("silenced.toml", &silenced).unwrap());
    assert!(
        timeline.findings.is_empty() && timeline.watchdog.is_empty(),
        "{:#?}",
        timeline.watchdog
    );
}
