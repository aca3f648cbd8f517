//! The engine's behaviours, each through a whole small scenario: the unit tests of
//! `engine/mod.rs`, apart so that the run loop and the Timeline's assembly read on their own.
//!
//! About 1,650 lines: the failure component's scenarios are in `engine/commands/tests.rs`
//! already; what is left here is one run loop seen from many scenarios, which share their
//! helpers.

use super::*;
use crate::scenario::parse;

const TWO_RANKS: &str = "torch = \"2.12\"\n[cluster]\nranks = 2\n[groups.world]\neager_init = true\n[tensors]\nx = \"1MiB\"\n";

#[test]
fn a_dropped_work_leaves_the_shelf_at_the_next_collective_a_held_one_at_wait_r18() {
    // x's all_reduce ends ~50 ms in; the host, a second later, calls the next collective on
    // the group. A Work the program dropped lets go of x there, although the simulation
    // had not yet reached the host's time when the host got there; a Work still held by
    // its name keeps x (PyTorch 2.11, docs/torch.md#unwaited-works).
    let text = |work: &str| {
        format!(
            "[cluster]\nranks = 1\n[groups.world]\neager_init = true\n\
             [tensors]\nx = \"64MiB\"\nfresh = \"64MiB\"\ny = \"512KiB\"\n\
             [[op]]\nalloc = \"x\"\n[[op]]\ngpu_sleep_us = 50000\n\
             [[op]]\nall_reduce = \"x\"\nasync_op = true\n{work}[[op]]\nfree = \"x\"\n\
             [[op]]\nhost_sleep_us = 1000000\n[[op]]\nalloc = \"y\"\n[[op]]\nall_reduce = \"y\"\n\
             [[op]]\nfree = \"y\"\n[[op]]\nalloc = \"fresh\"\n[[op]]\nfree = \"fresh\"\n"
        )
    };
    let peak_allocated = |work: &str| {
        let timeline = simulate(&parse("shelf.toml", &text(work)).unwrap());
        timeline.ranks[0].memory.peak_allocated_bytes
    };
    assert_eq!(peak_allocated(""), (64 << 20) + (512 << 10));
    assert_eq!(peak_allocated("work = \"w\"\n"), (128 << 20));
}

#[test]
fn a_collective_call_costs_more_the_longer_since_the_previous_one() {
    // Warm 20 µs within 30 µs of the previous call's return, cold 200 µs from 30 ms on and
    // for the first call; 3 ms after the previous call is two thirds of the way (log).
    let text = format!(
        "{TWO_RANKS}[host]\ncollective_us = 20\ncollective_tail_us = 0\ncollective_cold_us = 200\n\
         [[op]]\nall_reduce = \"x\"\n[[op]]\nall_reduce = \"x\"\n[[op]]\nhost_sleep_us = 3000\n\
         [[op]]\nall_reduce = \"x\"\n[[op]]\nhost_sleep_us = 50000\n[[op]]\nall_reduce = \"x\"\n"
    );
    let timeline = simulate(&parse("w.toml", &text).unwrap());
    let calls_us: Vec<u64> = timeline.ranks[0]
        .collectives
        .iter()
        .map(|c| (c.host_end_ns - c.host_start_ns) / 1_000)
        .collect();
    assert_eq!(calls_us, [200, 20, 140, 200]);
}

#[test]
fn a_straggler_makes_the_early_kernel_spin_r16() {
    // Rank 1 arrives 500 µs late: rank 0's kernel starts at launch and spins until then.
    let text = format!(
        "{TWO_RANKS}[[perturb]]\nranks = [1]\nbefore = \"ar\"\nhost_delay_us = 500\n[[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\n"
    );
    let timeline = simulate(&parse("s.toml", &text).unwrap());
    let early = &timeline.ranks[0].collectives[0];
    let late = &timeline.ranks[1].collectives[0];
    assert_eq!(early.last_rank, Some(1));
    assert_eq!(late.data_start_ns, late.kernel_start_ns);
    assert_eq!(early.data_start_ns - early.kernel_start_ns, 500_000);
    assert_eq!(early.end_ns, late.end_ns);
}

#[test]
fn wait_with_a_timeout_raises_at_the_first_poll_past_it_r15() {
    // Rank 0 waits 10 ms for a collective rank 1 joins after 50 ms. Call at 0, kernel
    // enqueued at 20 µs, returns at 30 µs; wait() costs 4 µs, first poll at 34 µs, then
    // every 1 ms: the first poll past enqueue + 10 ms (R26's clock) is 34 µs + 10 ms,
    // 10.014 ms after the enqueue.
    let text = format!(
        "{TWO_RANKS}[[perturb]]\nranks = [1]\nbefore = \"ar\"\nhost_delay_us = 50000\n[[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\nasync_op = true\nwork = \"w\"\n[[op]]\nwait = \"w\"\ntimeout_ms = 10\n"
    );
    let timeline = simulate(&parse("t.toml", &text).unwrap());
    // Rank 0's process raises, so its kernel never meets rank 1's: rank 1 times out too.
    let finding = timeline
        .findings
        .iter()
        .find(|f| f.rank == Some(0))
        .expect("rank 0 raised");
    assert_eq!(finding.kind, FindingKind::WaitTimeout);
    assert_eq!(finding.rank, Some(0));
    // The Work as PyTorch prints it, the same text the watchdog and hw use: 1 MiB of f32,
    // with the Work's own timeout (the group's 10 min), not the wait's (measured:
    // tests/data/torch/h200-torchrun/wait_timeout.run1.log).
    assert!(
        finding.message.contains(
            "WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=262144, NumelOut=262144, Timeout(ms)=600000)"
        ),
        "{}",
        finding.message
    );
    // What it raises, in PyTorch's words: 10.014 ms in whole milliseconds.
    assert!(
        finding
            .message
            .contains("ran for 10 milliseconds before timing out."),
        "{}",
        finding.message
    );
    let wait_call = timeline.ranks[0].host.last().unwrap();
    assert_eq!(wait_call.end_ns, 10_034_000);
}

/// Rank 0's watchdog timeout finding, which the test's scenario must produce.
fn rank0_watchdog_timeout(timeline: &Timeline) -> &Finding {
    timeline
        .findings
        .iter()
        .find(|f| f.kind == FindingKind::WatchdogTimeout && f.rank == Some(0))
        .expect("rank 0's watchdog times out")
}

#[test]
fn a_batch_that_times_out_is_named_as_the_coalesced_work_it_is() {
    // Rank 1 hangs before the batch: rank 0's watchdog catches the batch's one Work.
    let text = "[cluster]\nranks = 2\n[groups.world]\neager_init = true\ntimeout_s = 1\n[tensors]\na = \"1MiB\"\nb = \"1MiB\"\n\
                [[op]]\nlabel = \"ring\"\nbatch_isend_irecv = [{ send = \"a\", shift = 1 }, { recv = \"b\", shift = -1 }]\n\
                [[fault]]\nranks = [1]\nat = \"ring\"\nkind = \"hang\"\n";
    let timeline = simulate(&parse("b.toml", text).unwrap());
    let timeout = rank0_watchdog_timeout(&timeline);
    assert!(
        timeout.message.contains("OpType=COALESCED"),
        "{}",
        timeout.message
    );
}

#[test]
fn a_coalescing_block_that_times_out_is_named_as_the_coalesced_work_it_is_r25() {
    // Rank 1 hangs before a `_coalescing_manager` block of three all_reduces: rank 0's
    // watchdog catches the block's one Work, which PyTorch makes with OpType::COALESCED.
    let text = "[cluster]\nranks = 2\n[groups.world]\neager_init = true\ntimeout_s = 1\n\
                [env]\nTORCH_NCCL_DESYNC_DEBUG = 1\n[tensors]\ng = { size = \"4KiB\", count = 3 }\n\
                [[op]]\nlabel = \"block\"\nall_reduce = \"g\"\ncoalesce = true\n\
                [[fault]]\nranks = [1]\nat = \"block\"\nkind = \"hang\"\n";
    let timeline = simulate(&parse("c.toml", text).unwrap());
    let timeout = rank0_watchdog_timeout(&timeline);
    assert!(
        timeout.message.contains(
            "WorkNCCL(SeqNum=1, OpType=COALESCED, NumelIn=3072, NumelOut=3072, Timeout(ms)=1000)"
        ),
        "{}",
        timeout.message
    );
    // The desync report and its verdict name the Work as the timeout line does.
    let texts = (timeline.findings.iter().map(|f| &f.message))
        .chain(timeline.watchdog.iter().map(|r| &r.message));
    for text in texts {
        assert!(!text.contains("ALLREDUCE"), "{text}");
    }
    assert!(
        timeline.watchdog.iter().any(|r| r
            .message
            .contains("Desync debug report at SeqNum=1 (COALESCED, group world)")),
        "{:#?}",
        timeline.watchdog
    );
    // Without a watchdog to take it down, the block's deadlock names the same Work.
    let text = text
        .replace("TORCH_NCCL_DESYNC_DEBUG", "TORCH_NCCL_BLOCKING_WAIT")
        .replace("\"hang\"", "\"skip\"");
    let timeline = simulate(&parse("c.toml", &text).unwrap());
    let deadlock = (timeline.findings.iter())
        .find(|f| f.kind == FindingKind::Deadlock)
        .expect("the block never completes");
    assert!(
        deadlock
            .message
            .contains("(SeqNum=1, OpType=COALESCED, group world, line 10) never completes"),
        "{}",
        deadlock.message
    );
}

#[test]
fn a_rate_near_zero_gives_a_transfer_that_never_ends_not_one_that_wraps_short() {
    // 4 MiB at 1e-13 GB/s is past u64::MAX nanoseconds; unbounded, the sum with α wrapped to a
    // few microseconds. Held to 1,000 days, the send times out at the group's timeout.
    let text =
        "[cluster]\nranks = 2\n[network]\nnvlink_gbps = 1e-13\n[groups.world]\ntimeout_s = 1\n\
                [tensors]\nx = \"4MiB\"\n[[op]]\nranks = [0]\nsend = \"x\"\npeer = 1\n\
                [[op]]\nranks = [1]\nrecv = \"x\"\npeer = 0\n";
    let timeline = simulate(&parse("slow.toml", text).unwrap());
    assert!(
        timeline
            .findings
            .iter()
            .any(|f| f.kind == FindingKind::WatchdogTimeout),
        "{:?}",
        timeline.findings
    );
    assert!(timeline.ranks.iter().all(|r| r.collectives.is_empty()));
}

#[test]
fn a_settled_clock_near_zero_gives_a_gemm_that_never_ends_not_an_overflow() {
    // Past the 1-µs boost window the second GEMM runs at 1e-13 of its rate: held to 1,000
    // days, it outlasts the time cap instead of wrapping (a panic in a debug build).
    let text = "[cluster]\nranks = 1\nboost_ms = 0.001\nsustained_clock = 1e-13\n\
                [[op]]\ngemm = [16384, 16384, 16384]\n[[op]]\ngemm = [16384, 16384, 16384]\n";
    let timeline = simulate(&parse("slow.toml", text).unwrap());
    // The first GEMM, inside the window, ends; the second never does within the cap.
    assert_eq!(timeline.ranks[0].kernels.len(), 1);
    assert!(
        timeline
            .findings
            .iter()
            .any(|f| f.kind == FindingKind::TimeCap),
        "{:?}",
        timeline.findings
    );
}

#[test]
fn a_launch_onto_a_full_stream_blocks_the_host_until_a_kernel_ends() {
    // A 1 ms sleep, then five 1 µs kernels on the same stream; the stream holds 4 commands:
    // the sleep and three launch at once, the fourth launch returns when the sleep ends.
    let ops = "[[op]]\nkernel = { us = 1 }\n".repeat(5);
    let text =
        |depth: &str| format!("{TWO_RANKS}[host]\n{depth}[[op]]\ngpu_sleep_us = 1000\n{ops}");
    let timeline = simulate(&parse("q.toml", &text("launch_queue_depth = 4\n")).unwrap());
    let rank = &timeline.ranks[0];
    let sleep_end_ns = rank.kernels[0].end_ns;
    assert_eq!(rank.host.len(), 6);
    assert!(rank.host[3].end_ns < 100_000, "{:?}", rank.host[3]);
    assert!(rank.host[4].end_ns >= sleep_end_ns, "{:?}", rank.host[4]);
    assert!(rank.kernels[4].enqueue_ns >= sleep_end_ns);
    // The default depth (1,022 measured on an H200) never fills with six kernels.
    let unbounded = simulate(&parse("q.toml", &text("")).unwrap());
    assert!(unbounded.ranks[0].host[5].end_ns < 100_000);
    assert!(unbounded.findings.is_empty(), "{:?}", unbounded.findings);
}

#[test]
fn a_sync_collective_on_the_current_stream_takes_two_launch_queue_slots_r1_r11() {
    // PyTorch >= 2.8 records no input-ready event for a synchronous call on the current
    // stream: its kernel and its Work's end event are the call's two commands there. Behind a
    // 1 ms sleep, with room for five commands, two calls fit (1 + 2 × 2) and the third call's
    // launch waits for the sleep to end.
    let text = format!(
        "{TWO_RANKS}[host]\nlaunch_queue_depth = 5\n[[op]]\ngpu_sleep_us = 1000\n{}",
        "[[op]]\nall_reduce = \"x\"\n".repeat(3)
    );
    let timeline = simulate(&parse("q.toml", &text).unwrap());
    assert!(timeline.findings.is_empty(), "{:?}", timeline.findings);
    let rank = &timeline.ranks[0];
    let sleep_end_ns = rank.kernels[0].end_ns;
    assert!(rank
        .collectives
        .iter()
        .all(|c| c.run_stream == c.call_stream));
    assert!(rank.host[2].end_ns < sleep_end_ns, "{:?}", rank.host[2]);
    assert!(rank.host[3].end_ns >= sleep_end_ns, "{:?}", rank.host[3]);
    // The input-ready point is still when the stream passed the call: the sleep's end.
    assert_eq!(rank.collectives[0].input_ready_ns, sleep_end_ns);
}

#[test]
fn a_launch_behind_kernels_that_never_end_is_a_named_deadlock() {
    // Rank 1 never joins: rank 0's synchronous all_reduce spins for ever on the current
    // stream (where 2.12 runs an `async_op=False` collective), its end event behind it; with
    // room for two commands, the first GEMM's launch never returns. (Mode 0
    // and no heartbeat monitor: nothing ends the process, R27, R28.)
    let text = format!(
        "{TWO_RANKS}[host]\nlaunch_queue_depth = 2\n[env]\nTORCH_NCCL_ASYNC_ERROR_HANDLING = 0\nTORCH_NCCL_ENABLE_MONITORING = 0\n[[op]]\nlabel = \"ar\"\nranks = [0]\nall_reduce = \"x\"\nstream = \"default\"\n[[op]]\ngemm = [512, 512, 512]\n[[op]]\nlabel = \"stuck\"\ngemm = [512, 512, 512]\n"
    );
    let timeline = simulate(&parse("d.toml", &text).unwrap());
    let deadlock = timeline
        .findings
        .iter()
        .find(|f| f.kind == FindingKind::Deadlock && f.message.contains("launch queue"))
        .unwrap_or_else(|| panic!("{:?}", timeline.findings));
    assert_eq!(deadlock.rank, Some(0));
    assert!(deadlock.message.contains("gemm#1"), "{}", deadlock.message);
}

#[test]
fn a_wait_that_completes_in_time_does_not_raise() {
    let text = format!(
        "{TWO_RANKS}[[op]]\nall_reduce = \"x\"\nasync_op = true\nwork = \"w\"\n[[op]]\nwait = \"w\"\ntimeout_ms = 10\n"
    );
    let timeline = simulate(&parse("t.toml", &text).unwrap());
    assert!(timeline.findings.is_empty(), "{:?}", timeline.findings);
    // A timeout makes wait() poll (R15): the host returns at the first poll after the end.
    let record = &timeline.ranks[0].collectives[0];
    let wait = record.wait.unwrap();
    assert!(wait.host_end_ns >= record.end_ns);
    assert!(wait.completed_at_return);
}

#[test]
fn a_one_rank_collective_enqueues_no_kernel_and_ignores_a_full_gpu_r24() {
    // NCCL's one-rank path launches nothing for an all_reduce: behind a GEMM that holds
    // every SM on another stream, it still takes only the floor (PyTorch 2.11 on an H200:
    // 5.3 µs, docs/fidelity.md). An all_to_all becomes a send/recv to itself, a kernel,
    // and waits for SMs.
    let text = |collective: &str| {
        format!(
            "torch = \"2.12\"\n[cluster]\nranks = 1\n[network]\nkernel_floor_us = 2\n[groups.world]\neager_init = true\n[tensors]\nx = \"1MiB\"\n[streams]\nside = {{}}\n[[op]]\nstream = \"side\"\ngemm = [8192, 8192, 8192]\n[[op]]\nhost_sleep_us = 100\n[[op]]\nlabel = \"c\"\n{collective} = \"x\"\nasync_op = true\nwork = \"w\"\n[[op]]\nwait = \"w\"\n"
        )
    };
    let run = |collective: &str| {
        let timeline = simulate(&parse("one.toml", &text(collective)).unwrap());
        let rank = &timeline.ranks[0];
        let gemm = rank
            .kernels
            .iter()
            .find(|k| k.class == KernelClass::Compute)
            .copied()
            .unwrap();
        (gemm, rank.collectives[0].clone())
    };
    let (gemm, all_reduce) = run("all_reduce");
    assert!(all_reduce.kernel_start_ns < gemm.end_ns);
    assert_eq!(all_reduce.end_ns - all_reduce.kernel_start_ns, 2_000);
    let (gemm, all_to_all) = run("all_to_all");
    assert!(all_to_all.kernel_start_ns > gemm.start_ns + (gemm.end_ns - gemm.start_ns) / 2);
}

#[test]
fn a_synchronous_collective_on_the_current_stream_costs_sync_collective_us_r11() {
    let host_call_ns = |torch: &str, sync_us: &str| {
        let text = format!(
            "torch = \"{torch}\"\n[cluster]\nranks = 2\n[groups.world]\neager_init = true\n[tensors]\nx = \"1MiB\"\n[host]\ncollective_us = 30\ncollective_tail_us = 5\n{sync_us}\n[[op]]\nall_reduce = \"x\"\n"
        );
        let timeline = simulate(&parse("s.toml", &text).unwrap());
        let c = &timeline.ranks[0].collectives[0];
        c.host_end_ns - c.host_start_ns
    };
    assert_eq!(host_call_ns("2.12", ""), 30_000);
    assert_eq!(host_call_ns("2.12", "sync_collective_us = 20"), 20_000);
    // Under 2.5 the call goes through the internal stream and waits: the cost is the async
    // call's (and its wait's).
    assert_eq!(
        host_call_ns("2.5", "sync_collective_us = 20"),
        host_call_ns("2.5", "")
    );
    let error = parse(
        "s.toml",
        &format!("{TWO_RANKS}[host]\ncollective_tail_us = 5\nsync_collective_us = 4\n"),
    )
    .unwrap_err()
    .to_string();
    assert!(error.contains("host.sync_collective_us"), "{error}");
    assert!(error.contains("s.toml:"), "{error}");
}

#[test]
fn the_input_ready_event_is_recorded_at_the_works_creation_enqueue_plus_tail_before_the_return_r10a(
) {
    let call = |torch: &str, enqueue: &str| {
        let text = format!(
            "torch = \"{torch}\"\n[cluster]\nranks = 2\n[groups.world]\neager_init = true\n[tensors]\nx = \"1MiB\"\n[host]\ncollective_us = 30\nsync_collective_us = 20\ncollective_tail_us = 5\n{enqueue}\n[[op]]\nall_reduce = \"x\"\nasync_op = true\nwork = \"w\"\n[[op]]\nwait = \"w\"\n[[op]]\nall_reduce = \"x\"\n"
        );
        let timeline = simulate(&parse("e.toml", &text).unwrap());
        timeline.ranks[0].collectives.clone()
    };
    for torch in ["2.12", "2.5"] {
        let at_launch = call(torch, "");
        let at_work = call(torch, "collective_enqueue_us = 4");
        for (launch, work) in at_launch.iter().zip(&at_work) {
            // The call costs the same and launches at the same time; the input-ready point
            // moves 4 µs earlier.
            assert_eq!(
                work.host_end_ns - work.host_start_ns,
                launch.host_end_ns - launch.host_start_ns
            );
            assert_eq!(launch.input_ready_ns - work.input_ready_ns, 4_000);
            assert_eq!(work.kernel_start_ns, launch.kernel_start_ns);
        }
        // The async call returns the tail after the launch, which follows the input-ready
        // point by the enqueue.
        let (launch, work) = (&at_launch[0], &at_work[0]);
        assert_eq!(launch.host_end_ns - launch.input_ready_ns, 5_000);
        assert_eq!(work.host_end_ns - work.input_ready_ns, 9_000);
    }
    // On the current stream (2.12) the synchronous call keeps its own cost.
    let sync = &call("2.12", "collective_enqueue_us = 4")[1];
    assert!(!sync.async_op);
    assert_eq!(sync.host_end_ns - sync.host_start_ns, 20_000);
    assert_eq!(sync.host_end_ns - sync.input_ready_ns, 9_000);
    let error = parse(
        "e.toml",
        &format!("{TWO_RANKS}[host]\ncollective_us = 30\nsync_collective_us = 20\ncollective_tail_us = 5\ncollective_enqueue_us = 16\n"),
    )
    .unwrap_err()
    .to_string();
    assert!(
        error.contains("host.sync_collective_us") && error.contains("host.collective_enqueue_us"),
        "{error}"
    );
    assert!(error.contains("e.toml:"), "{error}");
}

#[test]
fn the_programs_gap_before_each_op_moves_every_later_call() {
    let host_starts = |gap: &str| {
        let text = format!(
            "{TWO_RANKS}[host]\nlaunch_us = 5\n{gap}\n[[op]]\ngpu_sleep_us = 10\n[[op]]\ngpu_sleep_us = 10\n[[op]]\ngpu_sleep_us = 10\n"
        );
        let timeline = simulate(&parse("g.toml", &text).unwrap());
        timeline.ranks[0]
            .host
            .iter()
            .map(|h| h.start_ns)
            .collect::<Vec<u64>>()
    };
    assert_eq!(host_starts(""), [0, 5_000, 10_000]);
    assert_eq!(host_starts("op_gap_us = 3"), [3_000, 11_000, 19_000]);
}

#[test]
fn compute_after_the_boost_window_runs_at_the_sustained_clock() {
    // Four 1 ms kernels; the GPU settles after 2 ms of compute, then runs at 0.8 of its
    // rate: the third and fourth take 1.25 ms.
    let durations = |cluster: &str| {
        let text = format!(
            "torch = \"2.12\"\n[cluster]\nranks = 1\n{cluster}\n[[op]]\nkernel = {{ us = 1000, sms = 132 }}\n[[op]]\nkernel = {{ us = 1000, sms = 132 }}\n[[op]]\nkernel = {{ us = 1000, sms = 132 }}\n[[op]]\nkernel = {{ us = 1000, sms = 132 }}\n"
        );
        let timeline = simulate(&parse("b.toml", &text).unwrap());
        timeline.ranks[0]
            .kernels
            .iter()
            .map(|k| k.end_ns - k.start_ns)
            .collect::<Vec<u64>>()
    };
    assert_eq!(durations(""), [1_000_000; 4]);
    assert_eq!(
        durations("boost_ms = 2\nsustained_clock = 0.8"),
        [1_000_000, 1_000_000, 1_250_000, 1_250_000]
    );
    let error = parse("b.toml", "[cluster]\nsustained_clock = 1.5\n")
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("cluster.sustained_clock") && error.contains("b.toml:2:"),
        "{error}"
    );
}

#[test]
fn a_cold_calls_nccl_launch_latency_is_slowed_as_the_call_is() {
    // One rank, timed Works on an idle stream: PyTorch's duration is the floor plus the
    // launch latency. The first call is cold (100 µs against 20 µs warm: 5×), the second
    // warm.
    let text = "torch = \"2.12\"\n[cluster]\nranks = 1\n[network]\nkernel_floor_us = 1\n[host]\ncollective_us = 20\ncollective_tail_us = 5\ncollective_cold_us = 100\nsync_collective_us = 20\nnccl_launch_latency_us = 2\n[env]\nTORCH_NCCL_ENABLE_TIMING = 1\n[groups.world]\neager_init = true\n[tensors]\nx = \"1KiB\"\n[[op]]\nall_reduce = \"x\"\n[[op]]\nall_reduce = \"x\"\n";
    let timeline = simulate(&parse("c.toml", text).unwrap());
    let durations: Vec<i64> = timeline.ranks[0]
        .collectives
        .iter()
        .map(|c| c.duration_ns())
        .collect();
    assert_eq!(durations, [1_000 + 10_000, 1_000 + 2_000]);
}

#[test]
fn a_slower_nccl_launch_lets_the_gemm_take_the_sms_first_r22() {
    // The all_reduce is launched first, but its kernel is ready 20 µs after the launch; the
    // GEMM, launched 15 µs later with a 3 µs latency, starts first and holds every SM, so
    // the NCCL kernel gets SMs only in the GEMM's tail.
    let text = format!(
        "{TWO_RANKS}[host]\nnccl_launch_latency_us = 20\n[[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\nasync_op = true\nwork = \"w\"\n[[op]]\ngemm = [8192, 8192, 8192]\n[[op]]\nwait = \"w\"\n"
    );
    let timeline = simulate(&parse("l.toml", &text).unwrap());
    let rank = &timeline.ranks[0];
    let gemm = rank
        .kernels
        .iter()
        .find(|k| k.class == KernelClass::Compute)
        .unwrap();
    let nccl = &rank.collectives[0];
    assert!(gemm.start_ns < nccl.kernel_start_ns);
    assert!(nccl.kernel_start_ns > gemm.start_ns + (gemm.end_ns - gemm.start_ns) / 2);
}

#[test]
fn a_stream_wait_latency_lets_a_queued_gemm_start_before_the_nccl_kernel_r22() {
    // The GPU is behind the host (a 2 ms sleep): the all_reduce's input-ready wait and the
    // GEMM queued behind the sleep become runnable at the sleep's end. Without a latency
    // the NCCL kernel, launched first, takes its SMs first; with one, the GEMM does.
    let text = format!(
        "{TWO_RANKS}[[op]]\ngpu_sleep_us = 2000\n[[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\nasync_op = true\nwork = \"w\"\n[[op]]\ngemm = [8192, 8192, 8192]\n[[op]]\nwait = \"w\"\n"
    );
    let starts = |text: &str| {
        let timeline = simulate(&parse("w.toml", text).unwrap());
        let rank = &timeline.ranks[0];
        let sleep_end = rank.kernels[0].end_ns;
        let gemm = rank
            .kernels
            .iter()
            .rfind(|k| k.class == KernelClass::Compute);
        let nccl = &rank.collectives[0];
        let wait = &rank.stream_waits[0];
        (
            sleep_end,
            gemm.unwrap().start_ns,
            nccl.kernel_start_ns,
            wait.released_ns,
        )
    };
    let (sleep_end, gemm, nccl, released) = starts(&text);
    assert_eq!((gemm, nccl, released), (sleep_end, sleep_end, sleep_end));
    let late = text.replace(
        "[[op]]\ngpu",
        "[host]\nstream_wait_latency_us = 3\n[[op]]\ngpu",
    );
    let (sleep_end, gemm, nccl, released) = starts(&late);
    assert_eq!((gemm, released), (sleep_end, sleep_end + 3_000));
    assert!(
        nccl > gemm + 500_000,
        "the NCCL kernel waits for the GEMM's tail"
    );
}

#[test]
fn wider_gemm_tiles_give_the_nccl_kernel_a_longer_tail_r22() {
    // 8192² outputs: 4096 blocks of 128×128 are 31.03 waves on 132 SMs, so the last wave
    // (4 blocks) frees SMs for about 1/31 of the GEMM; 2048 blocks of 128×256 are 15.5
    // waves and the last (68 blocks) frees 64 SMs for about 1/15.5 of it.
    let text = format!(
        "{TWO_RANKS}[host]\nstream_wait_latency_us = 3\n[[op]]\ngpu_sleep_us = 2000\n[[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\nasync_op = true\nwork = \"w\"\n[[op]]\ngemm = [8192, 8192, 8192]\n[[op]]\nwait = \"w\"\n"
    );
    let lead_ns = |text: &str| {
        let timeline = simulate(&parse("t.toml", text).unwrap());
        let rank = &timeline.ranks[0];
        let gemm = rank
            .kernels
            .iter()
            .rfind(|k| k.class == KernelClass::Compute);
        let gemm = gemm.unwrap();
        let waves = (gemm.end_ns - gemm.start_ns) as f64;
        (gemm.end_ns - rank.collectives[0].kernel_start_ns) as f64 / waves
    };
    let narrow = lead_ns(&text);
    let wide = lead_ns(&text.replace("[cluster]", "[cluster]\ngemm_tile_n = 256"));
    // At least one wave ahead of the GEMM's end (a little more: the NCCL kernel's 16 SMs
    // slow the GEMM's last blocks).
    assert!((1.0 / 31.03..1.3 / 31.03).contains(&narrow), "{narrow}");
    assert!((1.0 / 15.52..1.3 / 15.52).contains(&wide), "{wide}");
}

#[test]
fn ranks_compute_at_their_own_drawn_speed() {
    let text = "seed = 3\n[cluster]\nranks = 4\nrank_speed_spread_pct = 5\n[[op]]\ngemm = [4096, 4096, 4096]\n";
    let durations = |text: &str| -> Vec<u64> {
        simulate(&parse("s.toml", text).unwrap())
            .ranks
            .iter()
            .map(|r| r.kernels[0].end_ns - r.kernels[0].start_ns)
            .collect()
    };
    let first = durations(text);
    assert_eq!(first, durations(text), "seeded");
    assert!(first.iter().any(|&d| d != first[0]), "{first:?}");
    let even = durations(&text.replace("rank_speed_spread_pct = 5", "rank_speed_spread_pct = 0"));
    assert!(even.iter().all(|&d| d == even[0]));
}

#[test]
fn the_watchdog_times_out_a_synchronous_collective_and_barrier_r11_r26() {
    // Measured on PyTorch 2.11 (an H100, tests/data/torch/probes/sync_watchdog/): behind a 5 s
    // kernel with a 2 s group timeout, a synchronous all_reduce (2,076 ms) and a barrier after
    // a first one (2,018 ms) are timed out by the watchdog, though Python never sees their Work.
    let program = |call: &str| {
        format!(
            "[cluster]\nranks = 1\n[groups.world]\neager_init = true\ntimeout_s = 2\n\
             [tensors]\nx = \"1MiB\"\n[[op]]\nlabel = \"warm\"\nbarrier = true\n\
             [[op]]\nlabel = \"busy\"\nkernel = {{ us = 5000000, sms = 132 }}\n\
             [[op]]\nlabel = \"call\"\n{call}\n[[op]]\nstream_sync = \"current\"\n"
        )
    };
    for (call, work) in [
        (
            "all_reduce = \"x\"",
            "WorkNCCL(SeqNum=2, OpType=ALLREDUCE, NumelIn=262144,",
        ),
        (
            "barrier = true",
            "WorkNCCL(SeqNum=2, OpType=ALLREDUCE, NumelIn=1,",
        ),
    ] {
        let timeline = simulate(&parse("w.toml", &program(call)).unwrap());
        let timeout = rank0_watchdog_timeout(&timeline);
        assert!(timeout.message.contains(work), "{}", timeout.message);
        assert!(
            timeout.message.contains("ran for 2099 milliseconds"),
            "{}",
            timeout.message
        );
    }
}

#[test]
fn stream_sync_blocks_the_host_for_the_backlog_r14() {
    // A 2 ms sleep launched at 5 µs (launch cost), on the GPU from 8 µs; stream_sync returns
    // 5 µs (sync cost) after it ends.
    let text =
        "[cluster]\nranks = 1\n[[op]]\ngpu_sleep_us = 2000\n[[op]]\nstream_sync = \"current\"\n";
    let timeline = simulate(&parse("s.toml", text).unwrap());
    let sync = timeline.ranks[0].host[1];
    assert_eq!(sync.end_ns, 8_000 + 2_000_000 + 5_000);
}

#[test]
fn an_async_barriers_wait_syncs_the_current_stream_only_while_the_work_is_unfinished_r14() {
    // Rank 1 reaches the barrier 5 ms late; after it, rank 0 queues a 20 ms sleep on the
    // current stream, then waits on the barrier's Work at once or 10 ms later.
    let text = |torch: &str, before_wait: &str| {
        format!(
            "torch = \"{torch}\"\n[cluster]\nranks = 2\n[groups.world]\neager_init = true\n\
             [[perturb]]\nranks = [1]\nbefore = \"b\"\nhost_delay_us = 5000\n\
             [[op]]\nlabel = \"b\"\nbarrier = true\nasync_op = true\nwork = \"w\"\n\
             [[op]]\ngpu_sleep_us = 20000\n{before_wait}[[op]]\nwait = \"w\"\n"
        )
    };
    // The wait's host time, and how long after the sleep's end it returned (R14's 5 µs sync).
    let wait = |torch: &str, before_wait: &str| {
        let timeline = simulate(&parse("b.toml", &text(torch, before_wait)).unwrap());
        let rank = &timeline.ranks[0];
        let wait = rank.collectives[0].wait.expect("waited");
        let sleep_end_ns = rank.kernels[1].end_ns;
        assert!(
            rank.collectives[0].end_ns < 6_000_000,
            "ends after rank 1 came"
        );
        (
            wait.host_end_ns - wait.host_start_ns,
            wait.host_end_ns as i64 - sleep_end_ns as i64,
        )
    };
    // Unfinished at the wait: the host synchronises the current stream, sleep included.
    assert_eq!(wait("2.12", "").1, 5_000);
    // Finished by the wait 10 ms in: is_completed() is true and the host goes on after the
    // wait's 4 µs and the query's 1 µs, while the sleep still runs.
    let (wait_ns, after_sleep_ns) = wait("2.12", "[[op]]\nhost_sleep_us = 10000\n");
    assert_eq!(wait_ns, 5_000);
    assert!(after_sleep_ns < -9_000_000, "{after_sleep_ns}");
    // Before 2.8 the barrier Work's wait() synchronises the stream whatever the Work's state.
    assert_eq!(wait("2.5", "[[op]]\nhost_sleep_us = 10000\n").1, 5_000);
}

#[test]
fn an_out_of_memory_ends_the_process_and_its_gpu_work_with_it_r20_r31() {
    // A 2 s GPU sleep and an async all_reduce are pending when an allocation that cannot fit
    // raises: the process ends there (uncaught OutOfMemoryError), and nothing of it runs on.
    let text = "[cluster]\nranks = 1\n[groups.world]\neager_init = true\ntimeout_s = 0.5\n[memory]\ncapacity_gib = 1\n[tensors]\nx = \"1MiB\"\nhuge = \"2GiB\"\n[[op]]\ngpu_sleep_us = 2000000\n[[op]]\nall_reduce = \"x\"\nasync_op = true\nwork = \"w\"\n[[op]]\nalloc = \"huge\"\n[[op]]\nfree = \"huge\"\n";
    let timeline = simulate(&parse("t.toml", text).unwrap());
    let rank = &timeline.ranks[0];
    let end = rank.end.unwrap();
    assert_eq!(end.status, ExitStatus::Raised);
    let end_ns = end.at_ns.unwrap();
    assert!(rank.kernels.iter().all(|k| k.start_ns <= end_ns));
    assert!(
        timeline.watchdog.iter().all(|r| r.at_ns <= end_ns),
        "{:?}",
        timeline.watchdog
    );
    let kinds: Vec<FindingKind> = timeline.findings.iter().map(|f| f.kind).collect();
    assert_eq!(kinds, [FindingKind::OutOfMemory]);
}

#[test]
fn an_up_front_tensor_that_does_not_fit_ends_the_process_before_its_program_r17_r20() {
    // PyTorch's torch.empty of a tensor that no `alloc` creates raises OutOfMemoryError before
    // the program: no op runs, and the books stop there (the 1 MiB tensor after it is never
    // made). The simulation used to run the program as if the 2 GiB fitted in 1 GiB.
    let text = "[cluster]\nranks = 2\n[memory]\ncapacity_gib = 1\n[tensors]\na = \"600MiB\"\n\
                big = \"600MiB\"\nafter = \"1MiB\"\n[[op]]\nall_reduce = \"a\"\n";
    let unfolded = Options {
        fold: false,
        per_rank_detail: true,
        ..Options::default()
    };
    let (timeline, _) = simulate_with(&parse("t.toml", text).unwrap(), unfolded);
    for rank in &timeline.ranks {
        let end = rank.end.unwrap();
        assert_eq!((end.status, end.at_ns), (ExitStatus::Raised, Some(0)));
        assert!(rank.host.is_empty() && rank.kernels.is_empty());
    }
    let messages: Vec<&str> = (timeline.findings.iter())
        .map(|f| {
            assert_eq!(f.kind, FindingKind::OutOfMemory);
            f.message.as_str()
        })
        .collect();
    let message = "CUDA out of memory. Tried to allocate 600.00 MiB. 1024.00 MiB allowed; Of the \
                   allocated memory 600.00 MiB is allocated by PyTorch, and 0 bytes is reserved by \
                   PyTorch but unallocated. Tensor \"big\", 629145600 B asked before the program \
                   (R17); the rank's program never started";
    assert_eq!(
        messages,
        [0, 1].map(|rank| format!("[Rank {rank}] {message}"))
    );
}

#[test]
fn a_bucket_buffer_that_does_not_fit_ends_the_process_before_its_program_r17_r25() {
    // DDP's Reducer makes each bucket's flattened buffer when it is built, beside the
    // gradients: 4 × 200 MiB of gradients and two 400 MiB buckets ask 1600 MiB of 1 GiB, and
    // the second bucket's buffer raises before the program. The simulation used to book the
    // gradients alone and run the program.
    let text = "[cluster]\nranks = 1\n[memory]\ncapacity_gib = 1\n\
                [tensors]\ngrads = { size = \"200MiB\", count = 4 }\n\
                [[op]]\nlabel = \"ddp\"\nall_reduce = \"grads\"\nbucket = \"400MiB\"\n";
    let timeline = simulate(&parse("t.toml", text).unwrap());
    let rank = &timeline.ranks[0];
    let end = rank.end.unwrap();
    assert_eq!((end.status, end.at_ns), (ExitStatus::Raised, Some(0)));
    assert!(rank.host.is_empty() && rank.kernels.is_empty());
    assert_eq!(timeline.findings.len(), 1);
    assert_eq!(
        timeline.findings[0].message,
        "[Rank 0] CUDA out of memory. Tried to allocate 400.00 MiB. 1024.00 MiB allowed; Of the \
         allocated memory 800.00 MiB is allocated by PyTorch, and 0 bytes is reserved by \
         PyTorch but unallocated. The bucket buffer 1 of 2 of ddp (line 7), 419430400 B asked \
         before the program (DDP's Reducer makes it when it is built; R17, R25); the rank's \
         program never started"
    );
}

#[test]
fn only_the_ranks_that_run_a_bucketed_op_hold_its_bucket_buffers_r17_r25() {
    // A rank that never runs the bucketed op (left out by `ranks`, or not a member of its
    // group) never builds that DDP Reducer: it holds the 4 MiB of gradients alone, not the
    // 4 MiB bucket buffer beside them. The buffers used to be allocated on every rank.
    // Folded or not, the same peaks.
    let text = |restriction: &str| {
        format!(
            "[cluster]\nranks = 4\n[groups.world]\neager_init = true\n\
             [groups.half]\nranks = [0, 1]\neager_init = true\n\
             [tensors]\ngrads = {{ size = \"1MiB\", count = 4 }}\n\
             [[op]]\nall_reduce = \"grads\"\nbucket = \"4MiB\"\n{restriction}"
        )
    };
    for restriction in ["ranks = [0, 1]\n", "group = \"half\"\n"] {
        let scenario = parse("t.toml", &text(restriction)).unwrap();
        for fold in [true, false] {
            let options = Options {
                fold,
                ..Options::default()
            };
            let timeline = simulate_with(&scenario, options).0.expand();
            let peaks: Vec<u64> = (timeline.ranks.iter())
                .map(|rank| rank.memory.peak_allocated_bytes)
                .collect();
            assert_eq!(
                peaks,
                [8 << 20, 8 << 20, 4 << 20, 4 << 20],
                "{restriction}, fold {fold}"
            );
        }
    }
}

#[test]
fn a_bucket_s_work_holds_its_flat_buffer_not_the_gradients_r18_r21_r25() {
    // DDP's Reducer copies the gradients into each bucket's buffer on the current stream and
    // all_reduces the buffer, which the Work holds: gradients freed before wait() go back to
    // the cache at once, and a tensor that reuses their block races with nothing. The Work
    // used to stash the gradients (72 MiB, not 64), and without the stash the NCCL write of
    // the gradients made x's kernel a race.
    let text = |lifetime: &str| {
        format!(
            "[cluster]\nranks = 1\n[groups.world]\neager_init = true\n\
             [memory]\nlifetime = \"{lifetime}\"\n\
             [tensors]\ngrads = {{ size = \"8MiB\", count = 4 }}\nx = \"8MiB\"\n\
             [[op]]\nalloc = \"grads\"\n[[op]]\nall_reduce = \"grads\"\nbucket = \"16MiB\"\n\
             async_op = true\nwork = \"w\"\n[[op]]\nfree = \"grads\"\n[[op]]\nalloc = \"x\"\n\
             [[op]]\nkernel = {{ us = 10 }}\nwrites = [\"x\"]\n[[op]]\nwait = \"w\"\n\
             [[op]]\nfree = \"x\"\n"
        )
    };
    for lifetime in ["stash", "record_stream", "none"] {
        let timeline = simulate(&parse("ddp.toml", &text(lifetime)).unwrap());
        // Two 16 MiB bucket buffers, four 8 MiB gradients; x takes a gradient's block.
        assert_eq!(
            timeline.ranks[0].memory.peak_allocated_bytes,
            64 << 20,
            "{lifetime}"
        );
        assert!(
            timeline.findings.is_empty(),
            "{lifetime}: {:?}",
            timeline.findings
        );
    }
}

#[test]
fn a_bucketed_collective_reads_its_gradients_on_the_current_stream_r21_r25() {
    // The copy into the bucket reads the gradients: a side stream's write of them that the
    // current stream did not wait for races with that read, and the fix names it; the copy
    // back out of the buckets after wait() writes them, and races with that write too.
    let text = "[cluster]\nranks = 1\n[groups.world]\neager_init = true\n[streams]\nside = {}\n\
                [tensors]\ngrads = { size = \"8MiB\", count = 4 }\n\
                [[op]]\nstream = \"side\"\nkernel = { us = 100 }\nwrites = [\"grads\"]\n\
                [[op]]\nlabel = \"ddp\"\nall_reduce = \"grads\"\nbucket = \"16MiB\"\n\
                async_op = true\nwork = \"w\"\n[[op]]\nwait = \"w\"\n";
    let timeline = simulate(&parse("side.toml", text).unwrap());
    let messages = race_messages(&timeline);
    assert_eq!(messages.len(), 2, "{messages:?}");
    assert!(
        messages[0].contains("read by ddp (line 13) on stream default"),
        "{}",
        messages[0]
    );
    assert!(
        messages[1].contains("write by wait#2 (line 19) on stream default"),
        "{}",
        messages[1]
    );
}

/// Two buckets of four 8 MiB gradients, all_reduced with `async_op = true` into Work `w`
/// (line 8), with `ops` after it.
fn ddp_scenario(ops: &str) -> Timeline {
    let text = format!(
        "[cluster]\nranks = 1\n[groups.world]\neager_init = true\n[streams]\nside = {{}}\n\
         [tensors]\ngrads = {{ size = \"8MiB\", count = 4 }}\n\
         [[op]]\nlabel = \"ddp\"\nall_reduce = \"grads\"\nbucket = \"16MiB\"\n\
         async_op = true\nwork = \"w\"\n{ops}"
    );
    simulate(&parse("ddp.toml", &text).unwrap())
}

fn race_messages(timeline: &Timeline) -> Vec<&str> {
    (timeline.findings.iter())
        .filter(|f| f.kind == FindingKind::Race)
        .map(|f| f.message.as_str())
        .collect()
}

#[test]
fn the_wait_of_a_bucket_s_work_copies_the_buckets_back_into_the_gradients_r21_r25() {
    // DDP's finalize_backward waits for each bucket's Work, then copies the bucket's buffer
    // back into its gradients on the current stream (`copy_bucket_to_grad`, the default
    // gradient_as_bucket_view=False): the gradients are written there. A side stream that
    // reads them before that wait, or after it without waiting for the current stream,
    // races with that copy; one that reads them after a wait() made while it is current
    // does not. The copy used to be left out, and each read raced with nothing.
    let before = ddp_scenario(
        "[[op]]\nlabel = \"read\"\nstream = \"side\"\nkernel = { us = 10 }\nreads = [\"grads\"]\n\
         [[op]]\nlabel = \"finalize\"\nwait = \"w\"\n",
    );
    assert_eq!(
        race_messages(&before),
        [
            "data race on tensor grads (rank 0, iteration 0): write by finalize (line 20) on \
          stream default is not ordered with the earlier read by read (line 15) on stream \
          side; to order them, record_event on stream side after read and wait_event on \
          stream default before finalize"
        ]
    );
    let unordered_after = ddp_scenario(
        "[[op]]\nlabel = \"finalize\"\nwait = \"w\"\n\
         [[op]]\nlabel = \"read\"\nstream = \"side\"\nkernel = { us = 10 }\nreads = [\"grads\"]\n",
    );
    assert_eq!(race_messages(&unordered_after).len(), 1);
    assert!(
        race_messages(&unordered_after)[0].contains(
            "read by read (line 18) on stream side is not ordered with the earlier write by \
             finalize (line 15) on stream default"
        ),
        "{:?}",
        unordered_after.findings
    );
    let ordered_after = ddp_scenario(
        "[[op]]\nlabel = \"finalize\"\nstream = \"side\"\nwait = \"w\"\n\
         [[op]]\nlabel = \"read\"\nstream = \"side\"\nkernel = { us = 10 }\nreads = [\"grads\"]\n",
    );
    assert!(
        ordered_after.findings.is_empty(),
        "{:?}",
        ordered_after.findings
    );
}

#[test]
fn a_bucket_s_flat_buffer_is_memory_the_race_detector_sees_r21_r25() {
    // The next iteration's copy into the bucket, on the current stream, writes the buffer
    // the previous iteration's NCCL kernel still reduces on the internal stream when the
    // program never waited for its Work. The buffers used to be invisible to the detector.
    let text = "repeat = 2\n[cluster]\nranks = 1\n[groups.world]\neager_init = true\n\
                [tensors]\ngrads = { size = \"8MiB\", count = 4 }\n\
                [[op]]\nlabel = \"ddp\"\nall_reduce = \"grads\"\nbucket = \"16MiB\"\n\
                async_op = true\n";
    let timeline = simulate(&parse("ddp.toml", text).unwrap());
    // One finding per pair of ops: the first bucket's.
    assert_eq!(
        race_messages(&timeline),
        [
            "data race on bucket buffer 1 of 2 of ddp (line 8) (rank 0, iteration 1): write by \
          ddp (line 8) on stream default is not ordered with the earlier write by ddp (line 8) \
          on stream nccl:world; to order them, call wait() on the Work of ddp while stream \
          default is current, before ddp (R12)"
        ]
    );
    assert_eq!(
        timeline.ranks[0].races[0].tensor,
        "bucket buffer 1 of 2 of ddp (line 8)"
    );
    // Waited, as DDP's finalize_backward always does, there is no race.
    let waited = ddp_scenario("[[op]]\nwait = \"w\"\n");
    assert!(waited.findings.is_empty(), "{:?}", waited.findings);
}

#[test]
fn a_synchronous_bucketed_collective_copies_out_on_the_current_stream_r11_r21_r25() {
    // `async_op = false`: the wrapper's wait (2.5) or the current stream (2.12) orders the
    // copy back into the gradients; a side stream's later read that did not wait for the
    // current stream races with it.
    for torch in ["2.5", "2.12"] {
        let text = format!(
            "torch = \"{torch}\"\n[cluster]\nranks = 1\n[groups.world]\neager_init = true\n\
             [streams]\nside = {{}}\n[tensors]\ngrads = {{ size = \"8MiB\", count = 4 }}\n\
             [[op]]\nlabel = \"ddp\"\nall_reduce = \"grads\"\nbucket = \"16MiB\"\n\
             [[op]]\nlabel = \"read\"\nstream = \"side\"\nkernel = {{ us = 10 }}\n\
             reads = [\"grads\"]\n"
        );
        let timeline = simulate(&parse("sync.toml", &text).unwrap());
        let messages = race_messages(&timeline);
        assert_eq!(messages.len(), 1, "{torch}: {messages:?}");
        assert!(
            messages[0].contains(
                "read by read (line 14) on stream side is not ordered with the earlier write \
                 by ddp (line 10) on stream default"
            ),
            "{torch}: {}",
            messages[0]
        );
    }
}

#[test]
fn ranks_that_all_reduce_the_same_bytes_of_other_dtypes_disagree_r16() {
    // Rank 0 reduces 1 MiB of f32, rank 1 1 MiB of bf16 at the same SeqNum: NCCL would reduce
    // 262144 floats against 524288 bfloat16s (a hang or garbage), so the calls disagree.
    let text = "[cluster]\nranks = 2\n[groups.world]\neager_init = true\ntimeout_s = 1\n\
        [tensors]\nx = \"1MiB\"\nb = { size = \"1MiB\", dtype = \"bf16\" }\n\
        [[op]]\nranks = [0]\nall_reduce = \"x\"\n[[op]]\nranks = [1]\nall_reduce = \"b\"\n";
    let timeline = simulate(&parse("dtypes.toml", text).unwrap());
    let mismatch = (timeline.findings.iter())
        .find(|f| f.kind == FindingKind::Mismatch)
        .expect("a mismatch finding");
    assert!(
        mismatch
            .message
            .contains("rank 0 issued ALLREDUCE of 1MiB f32")
            && mismatch
                .message
                .contains("rank 1 issued ALLREDUCE of 1MiB bf16"),
        "{}",
        mismatch.message
    );
}

#[test]
fn a_collective_whose_wait_never_released_keeps_its_record_on_every_rank_r16() {
    // Found by the property test (its seed in sim/tests/properties.proptest-regressions):
    // ranks 0-1 complete world's third all_reduce, and their processes end later (at
    // ≈ 826 ms, an exception their host raised ahead of the simulation); rank 2's record names
    // their arrival as its data start. Their records stay, with the wait that released their
    // stream at ≈ 716 ms, before their deaths.
    let text = "repeat = 6\ndestroy_process_group = false\n[cluster]\nranks = 3\n[env]\nTORCH_NCCL_ASYNC_ERROR_HANDLING = 2\nTORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC = 100\nTORCH_NCCL_HEARTBEAT_TIMEOUT_SEC = 2\nTORCH_NCCL_PROPAGATE_ERROR = 0\n[groups.world]\neager_init = true\ntimeout_s = 0.5\n[tensors]\nx = \"1MiB\"\n[[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\nasync_op = true\nwork = \"w\"\n[[op]]\nhost_sleep_us = 157000\n[[op]]\nwait = \"w\"\n[[op]]\nhost_sleep_us = 109900\n[groups.pair]\nranks = [0, 1]\ntimeout_s = 0.007\n[[op]]\nall_reduce = \"x\"\ngroup = \"pair\"\nasync_op = true\n[[fault]]\nranks = [1]\nat = \"ar\"\niteration = 4\nkind = \"watchdog_stuck\"\n";
    let timeline = simulate(&parse("w.toml", text).unwrap());
    let third = |rank: usize| {
        (timeline.ranks[rank].collectives.iter())
            .find(|c| c.group == 0 && c.seq == 3)
            .unwrap_or_else(|| panic!("rank {rank} lost world's SeqNum 3"))
    };
    let last_arrival_ns = (0..3)
        .map(|rank| third(rank).kernel_start_ns)
        .max()
        .unwrap();
    for rank in 0..3 {
        assert_eq!(third(rank).data_start_ns, last_arrival_ns, "rank {rank}");
    }
    for rank in 0..2 {
        let released_ns = third(rank)
            .wait
            .as_ref()
            .expect("the wait happened")
            .released_ns;
        let end = timeline.ranks[rank].end.expect("the process ended");
        assert!(
            released_ns < end.at_ns.expect("at a known time"),
            "rank {rank}"
        );
    }
}

#[test]
fn each_group_s_heartbeat_monitor_reads_its_own_watchdog_and_the_first_abort_ends_the_process_r28()
{
    // Rank 0's watchdogs of both groups hang at their first poll (0.1 s). Every group's
    // watchdog starts a monitor of its own that reads that watchdog's heartbeat
    // (`HeartbeatMonitor::runLoop`): both find it stalled at 960 s, each says so under its
    // group's name (as each watchdog's hang note does), and the process is aborted once, at
    // 1440 s. No dumps on timeout, so no dump signal or flag ends a loop earlier.
    let text = "[cluster]\nranks = 2\n[env]\nTORCH_NCCL_DUMP_ON_TIMEOUT = 0\n\
                [groups.world]\neager_init = true\n[groups.pair]\nranks = [0, 1]\neager_init = true\n\
                [tensors]\nx = \"1MiB\"\n\
                [[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\n\
                [[op]]\nlabel = \"ar2\"\nall_reduce = \"x\"\ngroup = \"pair\"\n\
                [[op]]\nhost_sleep_us = 2000000000\n\
                [[fault]]\nranks = [0]\nat = \"ar\"\nkind = \"watchdog_stuck\"\n\
                [[fault]]\nranks = [0]\nat = \"ar2\"\nkind = \"watchdog_stuck\"\n";
    let timeline = simulate(&parse("two_stuck.toml", text).unwrap());
    let heartbeat: Vec<&str> = (timeline.findings.iter())
        .filter(|finding| finding.kind == FindingKind::HeartbeatAbort)
        .map(|finding| finding.message.as_str())
        .collect();
    assert_eq!(heartbeat.len(), 2, "{heartbeat:?}");
    assert!(heartbeat[0].starts_with("[Rank 0] Heartbeat monitor timed out!"));
    assert!(heartbeat[1].starts_with("[Rank 0] [group pair] Heartbeat monitor timed out!"));
    // Each watchdog's hang is noted under its own group's name too.
    let hangs: Vec<(Option<u16>, &str)> = (timeline.watchdog.iter())
        .filter(|record| record.event == WatchdogEvent::Fault && record.group.is_some())
        .map(|record| (record.group, record.message.as_str()))
        .collect();
    let hang = "the watchdog thread hangs in cudaEventQuery; its heartbeat stops";
    assert_eq!(
        hangs,
        [
            (Some(0), format!("[Rank 0] {hang}").as_str()),
            (Some(1), format!("[Rank 0] [group pair] {hang}").as_str()),
        ]
    );
    let exits: Vec<(Option<u16>, u64)> = (timeline.watchdog.iter())
        .filter(|record| record.event == WatchdogEvent::Exit)
        .map(|record| (record.group, record.at_ns))
        .collect();
    assert_eq!(exits, [(Some(0), 1_440_000_000_000)]);
    let end = timeline.ranks[0].end.as_ref().expect("rank 0 ended");
    assert_eq!(
        (end.status, end.at_ns),
        (ExitStatus::Aborted, Some(1_440_000_000_000))
    );
}

#[test]
fn a_lazy_init_ends_when_its_last_member_is_done_whatever_order_they_arrived_r8() {
    // Ranks 0 and 2 created `pair`'s communicator eagerly, so the world's, made lazily at the
    // first all_reduce, is their second (`comm_init_next_us`, 25 ms) and the others' first
    // (`comm_init_us`, 300 ms): the init ends for all four when the costlier parts are done,
    // so folded and unfolded runs agree (a folded run processes the equal arrivals in another
    // order; the last one processed used to decide the cost for all).
    let text = "[cluster]\nranks = 4\n[groups.pair]\nranks = [0, 2]\neager_init = true\n\
                [tensors]\nx = \"1MiB\"\n[[op]]\nall_reduce = \"x\"\n";
    let scenario = parse("init.toml", text).unwrap();
    let run = |fold: bool| {
        let options = Options {
            fold,
            ..Options::default()
        };
        simulate_with(&scenario, options).0
    };
    let unfolded = run(false);
    let calls_ms: Vec<u64> = (unfolded.ranks.iter())
        .map(|rank| {
            let call = &rank.collectives[0];
            (call.host_end_ns - call.host_start_ns) / 1_000_000
        })
        .collect();
    assert_eq!(calls_ms, [300, 300, 300, 300]);
    assert_eq!(run(true).expand(), unfolded);
}

#[test]
fn the_end_of_an_init_a_caught_raise_left_does_not_resume_the_host_in_a_later_op_r8() {
    // A non-blocking eager init (R8): the creation takes 1.5 s, the first use gives up after
    // TORCH_NCCL_NONBLOCKING_TIMEOUT (1 s) and the program catches the raise, then launches
    // 10 s of GPU work and synchronises the device. Unfolded, rank 0 reaches its first use
    // before rank 1 started its part, so the creation's end was scheduled to resume it: due
    // at 1.5 s, in the device sync, it is stale (the raise moved the host's generation on).
    let text = "torch = \"2.12\"\n[cluster]\nranks = 2\n\
                [env]\nTORCH_NCCL_USE_COMM_NONBLOCKING = 1\nTORCH_NCCL_NONBLOCKING_TIMEOUT = 1\n\
                [host]\ncomm_init_us = 1_500_000\n[tensors]\nx = \"1MiB\"\n\
                [[op]]\ninit_process_group = true\ndevice_id = true\n\
                [[op]]\nall_reduce = \"x\"\ncatch = true\n\
                [[op]]\ngpu_sleep_us = 10_000_000\n[[op]]\ndevice_sync = true\n";
    let scenario = parse("stale.toml", text).unwrap();
    let options = Options {
        fold: false,
        ..Options::default()
    };
    let timeline = simulate_with(&scenario, options).0;
    for rank in &timeline.ranks {
        let [_, raised, sleep, sync] = rank.host[..] else {
            panic!("rank {}: {:?}", rank.rank, rank.host);
        };
        assert_eq!(raised.end_ns, raised.start_ns + 1_000_000_000);
        assert_eq!(rank.exceptions.len(), 1, "rank {}", rank.rank);
        // The sync returns once the 10 s of GPU work are done, not at the creation's end.
        assert!(sync.end_ns >= sleep.end_ns + 10_000_000_000, "{sync:?}");
        let end = rank.end.expect("the program returned");
        assert_eq!(end.status, ExitStatus::Clean, "rank {}", rank.rank);
    }
}

#[test]
fn the_progress_hook_observes_without_changing_the_run() {
    use std::sync::atomic::{AtomicU64, Ordering};
    static CALLS: AtomicU64 = AtomicU64::new(0);
    static LAST_EVENTS: AtomicU64 = AtomicU64::new(0);
    fn seen(events: u64, _simulated_ns: u64) {
        CALLS.fetch_add(1, Ordering::Relaxed);
        LAST_EVENTS.store(events, Ordering::Relaxed);
    }
    let text = "repeat = 2000\n[cluster]\nranks = 4\n[tensors]\nx = \"1MiB\"\n\
                [[op]]\nall_reduce = \"x\"\nasync_op = true\nwork = \"w\"\n[[op]]\nwait = \"w\"\n";
    let scenario = parse("progress.toml", text).unwrap();
    let options = |progress| Options {
        fold: false,
        progress,
        ..Options::default()
    };
    let (plain, events) = simulate_with(&scenario, options(None));
    let (observed, observed_events) = simulate_with(&scenario, options(Some(seen)));
    assert_eq!(observed, plain);
    assert_eq!(observed_events, events);
    // At the first event, then every MEMORY_CHECK_EVENTS.
    let calls = CALLS.load(Ordering::Relaxed);
    assert_eq!(
        calls,
        (events - 1) / MEMORY_CHECK_EVENTS + 1,
        "{events} events"
    );
    assert_eq!(
        LAST_EVENTS.load(Ordering::Relaxed),
        (calls - 1) * MEMORY_CHECK_EVENTS + 1
    );
    assert!(calls > 1, "{events} events");
}

/// One rank: a 1-s timeout behind a 3-s GPU sleep, a dump wait of 4 x 250 ms, an abort of
/// 550 ms in the error-handling modes that abort; `program` follows the timed-out all_reduce.
fn timed_out_behind_a_backlog(mode: u8, program: &str) -> Timeline {
    let text = format!(
        "[cluster]\nranks = 1\n[env]\nTORCH_NCCL_ASYNC_ERROR_HANDLING = {mode}\n\
         TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC = 250\n[host]\ncomm_abort_us = 550_000\n\
         [groups.world]\neager_init = true\ntimeout_s = 1\n[tensors]\nx = \"4MiB\"\n\
         [[op]]\ngpu_sleep_us = 3_000_000\n[[op]]\nall_reduce = \"x\"\nasync_op = true\n\
         work = \"w\"\n{program}"
    );
    simulate(&parse("abort.toml", &text).unwrap())
}

/// When the watchdog found the timeout (its first poll past enqueue + 1 s) and when its dump
/// wait ended.
const CAUGHT_NS: u64 = 1_100_000_000;
const DUMP_WAIT_OVER_NS: u64 = CAUGHT_NS + 1_000_000_000;
const ABORT_NS: u64 = 550_000_000;

#[test]
fn a_collective_during_the_watchdogs_abort_blocks_until_it_returned_r27() {
    // The host calls a second all_reduce at 2.3 s, inside the abort, which begins at 2.1 s and
    // returns once its 550 ms passed and the GPU sleep ahead of the first all_reduce ended
    // (3 s): as measured on PyTorch 2.11 (tests/data/torch/probes/abort_backlog.txt). Mode 2:
    // the call raises then; mode 1: the process is taken down then, the call still blocked.
    let program =
        "[[op]]\nhost_sleep_us = 2_300_000\n[[op]]\nlabel = \"again\"\nall_reduce = \"x\"\n";
    let drained_ns = |timeline: &Timeline| timeline.ranks[0].kernels[0].end_ns;
    let clean_up = timed_out_behind_a_backlog(2, program);
    let end = clean_up.ranks[0].end.unwrap();
    assert!(drained_ns(&clean_up) > DUMP_WAIT_OVER_NS + ABORT_NS);
    assert_eq!(
        (end.status, end.at_ns),
        (ExitStatus::Raised, Some(drained_ns(&clean_up)))
    );
    let returned: Vec<u64> = (clean_up.watchdog.iter())
        .filter(|r| r.event == WatchdogEvent::AbortReturned)
        .map(|r| r.at_ns)
        .collect();
    assert_eq!(returned, [drained_ns(&clean_up)]);
    // With no least time at all (comm_abort_us = 0, the default) the abort still waits for the
    // device.
    let text = |abort: &str| {
        format!(
            "[cluster]\nranks = 1\n[env]\nTORCH_NCCL_ASYNC_ERROR_HANDLING = 2\n\
             TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC = 250\n[host]\ncomm_abort_us = {abort}\n\
             [groups.world]\neager_init = true\ntimeout_s = 1\n[tensors]\nx = \"4MiB\"\n\
             [[op]]\ngpu_sleep_us = 3_000_000\n[[op]]\nall_reduce = \"x\"\nasync_op = true\n\
             work = \"w\"\n{program}"
        )
    };
    for abort in ["0", "1"] {
        let timeline = simulate(&parse("abort.toml", &text(abort)).unwrap());
        assert_eq!(
            timeline.ranks[0].end.unwrap().at_ns,
            Some(drained_ns(&timeline)),
            "comm_abort_us = {abort}"
        );
    }
    let tear_down = timed_out_behind_a_backlog(1, program);
    let end = tear_down.ranks[0].end.unwrap();
    assert_eq!(
        (end.status, end.at_ns),
        (ExitStatus::Aborted, Some(drained_ns(&tear_down)))
    );
    assert!(tear_down
        .findings
        .iter()
        .all(|f| f.kind != FindingKind::AsyncError));
    // Mode 1's take-down marks the abort's return; no line of its own.
    assert!((tear_down.watchdog.iter()).all(|r| r.event != WatchdogEvent::AbortReturned));
}

#[test]
fn the_heartbeat_stalls_through_the_watchdogs_abort_r27_r28() {
    // Heartbeat timeout 1 s, dumps off, mode 2: the watchdog sleeps 1.6 s from the timeout
    // (1.1 s), then aborts until its least time passed and the GPU sleep ahead ended; its
    // heartbeat is still from 1.1 s until then. The monitor reads at 2 s, 3 s, …: a stall still
    // on at 3 s ends the process one heartbeat timeout later, at 4 s.
    let text = |abort_us: u64, sleep_us: u64| {
        format!(
            "[cluster]\nranks = 1\n[env]\nTORCH_NCCL_ASYNC_ERROR_HANDLING = 2\n\
             TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC = 400\nTORCH_NCCL_DUMP_ON_TIMEOUT = 0\n\
             TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC = 1\n[host]\ncomm_abort_us = {abort_us}\n\
             [groups.world]\neager_init = true\ntimeout_s = 1\n[tensors]\nx = \"4MiB\"\n\
             [[op]]\ngpu_sleep_us = {sleep_us}\n[[op]]\nall_reduce = \"x\"\nasync_op = true\n\
             work = \"w\"\n[[op]]\nhost_sleep_us = 5_000_000\n"
        )
    };
    let heartbeat_abort = |abort_us: u64, sleep_us: u64| {
        let timeline = simulate(&parse("hb.toml", &text(abort_us, sleep_us)).unwrap());
        let end = timeline.ranks[0].end.unwrap();
        let found = (timeline.findings.iter()).any(|f| f.kind == FindingKind::HeartbeatAbort);
        (found, end.status, end.at_ns)
    };
    // Still until 3.25 s: the least time of the abort (550 ms from 2.7 s).
    assert_eq!(
        heartbeat_abort(550_000, 3_000_000),
        (true, ExitStatus::Aborted, Some(4_000_000_000))
    );
    // Still until 20 s: the abort waits for the GPU sleep to end.
    assert_eq!(
        heartbeat_abort(0, 20_000_000),
        (true, ExitStatus::Aborted, Some(4_000_000_000))
    );
    // Still until 2.7 s only (the sleep ended at 2.5 s, the abort returns at once): the
    // process lives on.
    let (found, status, _) = heartbeat_abort(0, 2_500_000);
    assert!(!found);
    assert_ne!(status, ExitStatus::Aborted);
}

#[test]
fn the_watchdogs_abort_after_the_main_threads_waits_for_it_or_costs_nothing_r15_r27() {
    // wait(timeout) at 50 ms aborts the communicator in the main thread (caught, the program
    // goes on); the watchdog then finds the error and, after its dump wait, aborts too.
    let program =
        "[[op]]\nwait = \"w\"\ntimeout_ms = 50\ncatch = true\n[[op]]\nhost_sleep_us = 5_000_000\n";
    // Behind the 3-s GPU sleep the main thread's abort still runs when the dump wait ends
    // (2.1 s): the watchdog's waits for it, and mode 1 takes the process down at the drain.
    let behind = timed_out_behind_a_backlog(1, program);
    let end = behind.ranks[0].end.unwrap();
    let drained_ns = behind.ranks[0].kernels[0].end_ns;
    assert_eq!(
        (end.status, end.at_ns),
        (ExitStatus::Aborted, Some(drained_ns))
    );
    // Two ranks, rank 1 never joins: the main thread's abort returned long before the dump
    // wait ends, so NCCL has nothing left to abort and the process goes down at once (the
    // recorded wait_timeout runs: 60.000 s after the dump signal under mode 1).
    let text = "[cluster]\nranks = 2\n[env]\nTORCH_NCCL_ASYNC_ERROR_HANDLING = 1\n\
        TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC = 250\n[host]\ncomm_abort_us = 550_000\n\
        [groups.world]\neager_init = true\ntimeout_s = 1\n[tensors]\nx = \"4MiB\"\n\
        [[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\nasync_op = true\nwork = \"w\"\n\
        [[op]]\nwait = \"w\"\ntimeout_ms = 50\ncatch = true\n[[op]]\nhost_sleep_us = 5_000_000\n\
        [[fault]]\nranks = [1]\nat = \"ar\"\nkind = \"hang\"\n";
    let timeline = simulate(&parse("abort.toml", text).unwrap());
    let signal_ns = (timeline.watchdog.iter())
        .find(|r| r.rank == 0 && r.event == WatchdogEvent::DumpSignal)
        .expect("rank 0's watchdog signalled the dumps")
        .at_ns;
    let end = timeline.ranks[0].end.unwrap();
    assert_eq!(
        (end.status, end.at_ns),
        (ExitStatus::Aborted, Some(signal_ns + 1_000_000_000))
    );
}

#[test]
fn a_point_to_point_works_seqnum_counts_the_process_groups_p2p_calls_whatever_the_peer() {
    // A pipeline's middle stage: rank 1 receives from rank 0, then sends to rank 2 twice; rank
    // 2's host hangs before the second receive. Rank 1's second send is its third
    // point-to-point call on the default group, so PyTorch prints its Work as SeqNum=3, though
    // it is the second on the pair 1-2.
    let text = "[cluster]\nranks = 3\n[groups.world]\neager_init = true\ntimeout_s = 1\n\
        [tensors]\nx = \"1MiB\"\n\
        [[op]]\nranks = [0]\nsend = \"x\"\npeer = 1\n\
        [[op]]\nranks = [1]\nrecv = \"x\"\npeer = 0\n\
        [[op]]\nranks = [1]\nsend = \"x\"\npeer = 2\n\
        [[op]]\nranks = [2]\nrecv = \"x\"\npeer = 1\n\
        [[op]]\nlabel = \"onward\"\nranks = [1]\nsend = \"x\"\npeer = 2\n\
        [[op]]\nlabel = \"in\"\nranks = [2]\nrecv = \"x\"\npeer = 1\n\
        [[fault]]\nranks = [2]\nat = \"in\"\nkind = \"hang\"\n";
    let timeline = simulate(&parse("pipeline.toml", text).unwrap());
    let timeout = (timeline.watchdog.iter())
        .find(|r| r.rank == 1 && r.event == WatchdogEvent::Timeout)
        .expect("rank 1's second send times out");
    assert!(
        timeout.message.contains("WorkNCCL(SeqNum=3, OpType=SEND"),
        "{}",
        timeout.message
    );
    // The records keep each pair's own numbering: 1 on the pair 0-1, 1 on the pair 1-2.
    let seqs: Vec<u64> = timeline.ranks[1]
        .collectives
        .iter()
        .map(|c| c.seq)
        .collect();
    assert_eq!(seqs, [1, 1]);
}

#[test]
fn a_host_does_not_run_ahead_of_an_abort_that_waits_for_the_device_r27() {
    // Mode 1: the abort begins at 2.1 s behind a GPU sleep that ends at 3 s; at 2.7 s the host
    // launches a 100-ms kernel behind it (the device drains at 3.1 s), sleeps 5 s and launches
    // another. The process is taken down when the device drained, before that second launch.
    let program = "[[op]]\nhost_sleep_us = 2_700_000\n[[op]]\nkernel = { us = 100_000, sms = 1 }\n\
        [[op]]\nhost_sleep_us = 5_000_000\n[[op]]\nkernel = { us = 100_000, sms = 1 }\n";
    let timeline = timed_out_behind_a_backlog(1, program);
    let end = timeline.ranks[0].end.unwrap();
    let kernels = &timeline.ranks[0].kernels;
    let drained_ns = kernels
        .iter()
        .find(|k| k.op == 3)
        .expect("the first kernel ran")
        .end_ns;
    assert_eq!(
        (end.status, end.at_ns),
        (ExitStatus::Aborted, Some(drained_ns))
    );
    assert!(
        kernels.iter().all(|k| k.op != 5),
        "the later kernel never launched"
    );
}

#[test]
fn a_collectives_seqnum_skips_the_groups_batches_of_point_to_point_calls() {
    // Two batch_isend_irecv on the world group, then an all_reduce that rank 1 never joins:
    // PyTorch numbers the batches apart, so the all_reduce's Work is SeqNum=1, and the Flight
    // Recorder files it as collective_seq_id 1.
    let text = "[cluster]\nranks = 2\n[groups.world]\neager_init = true\ntimeout_s = 1\n\
        [tensors]\nkv = \"1MiB\"\nkv_next = \"1MiB\"\nx = \"1MiB\"\n\
        [[op]]\nbatch_isend_irecv = [{ send = \"kv\", shift = 1 }, { recv = \"kv_next\", shift = -1 }]\n\
        [[op]]\nbatch_isend_irecv = [{ send = \"kv\", shift = 1 }, { recv = \"kv_next\", shift = -1 }]\n\
        [[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\n\
        [[fault]]\nranks = [1]\nat = \"ar\"\nkind = \"hang\"\n";
    let scenario = parse("batches.toml", text).unwrap();
    let timeline = simulate(&scenario);
    let timeout = (timeline.watchdog.iter())
        .find(|r| r.rank == 0 && r.event == WatchdogEvent::Timeout)
        .expect("rank 0's all_reduce times out");
    assert!(
        timeout
            .message
            .contains("WorkNCCL(SeqNum=1, OpType=ALLREDUCE"),
        "{}",
        timeout.message
    );
}

#[test]
fn the_main_threads_abort_stall_outlives_the_watchdogs_abort_r15_r28() {
    // Mode 2, heartbeat 10 s, an abort's least time of 15 s, a 17.6-s GPU sleep. The watchdog's
    // abort begins at 2.7 s and returns at the drain (17.7 s); the main thread's wait times out
    // at 17.5 s and its own abort holds the heartbeat until 32.5 s. The monitor's read at 30 s
    // finds it still, whatever the watchdog's abort did meanwhile, as in mode 0.
    let text = |mode: u8| {
        format!(
            "[cluster]\nranks = 1\n[env]\nTORCH_NCCL_ASYNC_ERROR_HANDLING = {mode}\n\
             TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC = 400\nTORCH_NCCL_DUMP_ON_TIMEOUT = 0\n\
             TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC = 10\n[host]\ncomm_abort_us = 15_000_000\n\
             [groups.world]\neager_init = true\ntimeout_s = 1\n[tensors]\nx = \"4MiB\"\ny = \"4MiB\"\n\
             [[op]]\ngpu_sleep_us = 17_600_000\n[[op]]\nall_reduce = \"x\"\nasync_op = true\nwork = \"w\"\n\
             [[op]]\nall_reduce = \"y\"\nasync_op = true\nwork = \"w2\"\n\
             [[op]]\nwait = \"w2\"\ntimeout_ms = 17_500\ncatch = true\n[[op]]\nhost_sleep_us = 60_000_000\n"
        )
    };
    for mode in [0, 2] {
        let timeline = simulate(&parse("stalls.toml", &text(mode)).unwrap());
        let heartbeat: Vec<u64> = (timeline.watchdog.iter())
            .filter(|r| r.event == WatchdogEvent::HeartbeatTimeout)
            .map(|r| r.at_ns)
            .collect();
        assert_eq!(heartbeat, [30_000_000_000], "mode {mode}");
    }
}

#[test]
fn a_process_s_first_barrier_behind_a_kernel_waits_for_it_and_is_not_timed_out_r14() {
    // Measured on PyTorch 2.11 (an H100, tests/data/torch/probes/sync_watchdog/): the process's
    // first barrier behind a 5 s kernel returned after the kernel and was not timed out (2 s
    // group timeout): its fill kernel's first launch waited for the device, and the Work came
    // after. A `torch.zeros(1)` before the kernel, or CUDA_MODULE_LOADING=EAGER, and the
    // watchdog timed it out after 2.0 s.
    let program = |before: &str| {
        format!(
            "[cluster]\nranks = 1\n[groups.world]\neager_init = true\ntimeout_s = 2\n{before}\
             [[op]]\nlabel = \"busy\"\nkernel = {{ us = 5000000, sms = 132 }}\n\
             [[op]]\nlabel = \"bar\"\nbarrier = true\n"
        )
    };
    let cold = simulate(&parse("b.toml", &program("")).unwrap());
    assert!(
        !(cold.findings.iter()).any(|f| f.kind == FindingKind::WatchdogTimeout),
        "{:?}",
        cold.findings
    );
    let rank = &cold.ranks[0];
    let barrier = rank.host[1];
    assert!(barrier.end_ns >= rank.kernels[0].end_ns, "{barrier:?}");
    for before in [
        "[tensors]\nx = \"4B\"\n",
        "[env]\nCUDA_MODULE_LOADING = \"EAGER\"\n",
    ] {
        let timeline = simulate(&parse("b.toml", &program(before)).unwrap());
        let timeout = rank0_watchdog_timeout(&timeline);
        assert!(
            timeout.message.contains("ran for 2099 milliseconds"),
            "{before}: {}",
            timeout.message
        );
    }
}

/// tests/data/torch/probes/mode2_timeout/mode2_timeout.toml under `mode` (measured under 2): a
/// 2-s timeout behind a 5-s kernel, a 1-s dump wait, then, after a device synchronize at 5 s,
/// the `again` all_reduce (caught); then a 6-s host sleep, for the measured interpreter's
/// life after its program (it wrote its Timeline); `host` adds lines to `[host]`.
fn mode2_timeout_probe(mode: u8, host: &str) -> Timeline {
    let text = format!(
        "[cluster]\nranks = 1\n[env]\nTORCH_NCCL_ASYNC_ERROR_HANDLING = {mode}\n\
         TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC = 250\n[host]\n{host}\n[groups.world]\n\
         eager_init = true\ntimeout_s = 2\n[tensors]\nx = \"1MiB\"\n\
         [[op]]\nlabel = \"busy\"\nkernel = {{ us = 5000000, sms = 132 }}\n\
         [[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\nasync_op = true\nwork = \"w\"\n\
         [[op]]\nwait = \"w\"\n[[op]]\ndevice_sync = true\n\
         [[op]]\nlabel = \"again\"\nall_reduce = \"x\"\ncatch = true\n\
         [[op]]\ndevice_sync = true\n[[op]]\nhost_sleep_us = 6_000_000\n"
    );
    simulate(&parse("mode2_timeout.toml", &text).unwrap())
}

/// The times of rank 0's watchdog records of `event`.
fn watchdog_times(timeline: &Timeline, event: WatchdogEvent) -> Vec<u64> {
    (timeline.watchdog.iter())
        .filter(|r| r.rank == 0 && r.event == event)
        .map(|r| r.at_ns)
        .collect()
}

/// The host call of op `op` (its index in the program) of rank 0.
fn host_call(timeline: &Timeline, op: OpRef) -> &crate::timeline::HostCall {
    (timeline.ranks[0].host.iter())
        .find(|c| c.op == op)
        .expect("the op's host call")
}

#[test]
fn a_collective_called_during_the_watchdogs_handling_waits_for_it_then_its_work_fails_r27() {
    // As measured on PyTorch 2.11 (tests/data/torch/probes/mode2_timeout/): the watchdog holds
    // its Work list from the timeout it found (2.1 s) through the stack trace (3.5 s here, as
    // profiles/h200-torch.toml), the dump wait (1 s) and the abort (930 ms); `again`, called at
    // 5 s, launches its kernel and then waits to enqueue its Work until the abort returned. Its
    // Work is on the aborted communicator: the watchdog's next poll finds NCCL's system error
    // under SeqNum 2 and handles it as mode 2 does, dump wait and abort again.
    let host = "watchdog_stack_trace_us = 3_500_000\ncomm_abort_us = 930_000";
    let timeline = mode2_timeout_probe(2, host);
    let again = 4;
    let returned = watchdog_times(&timeline, WatchdogEvent::AbortReturned);
    assert_eq!(returned.len(), 2, "{:#?}", timeline.watchdog);
    let call = host_call(&timeline, again);
    let busy_end_ns = timeline.ranks[0].kernels[0].end_ns;
    let aborts = watchdog_times(&timeline, WatchdogEvent::Abort);
    assert!(busy_end_ns < call.start_ns && call.start_ns < aborts[0] - 1_000_000_000);
    assert_eq!(call.end_ns, returned[0]);
    // The kernel went out before the wait.
    let kernel = (timeline.ranks[0].kernels.iter())
        .find(|k| k.op == again)
        .expect("again's kernel");
    assert!(kernel.enqueue_ns < call.start_ns + 1_000_000);
    let errors: Vec<&Finding> = (timeline.findings.iter())
        .filter(|f| f.kind == FindingKind::AsyncError)
        .collect();
    assert_eq!(errors.len(), 1, "{:#?}", timeline.findings);
    assert!(
        errors[0]
            .message
            .starts_with("[Rank 0] Collective WorkNCCL(SeqNum=2, OpType=ALLREDUCE")
            && errors[0].message.contains(
                "raised the following async exception: NCCL error: unhandled system error"
            ),
        "{}",
        errors[0].message
    );
    assert_eq!(errors[0].op, Some(again));
    // Found at the watchdog's next poll after the abort returned; its stack trace at once (the
    // process kept the first trace's symbols: PyTorch logged it 1 ms after the finding), then
    // the dump wait, then the second abort (nothing left to abort: it returns at once).
    let found = watchdog_times(&timeline, WatchdogEvent::AsyncError);
    assert_eq!(found, [returned[0] + 100_000_000]);
    let traces = watchdog_times(&timeline, WatchdogEvent::StackTrace);
    assert_eq!(traces, [2_100_000_000 + 3_500_000_000, found[0]]);
    assert_eq!(aborts.len(), 2);
    assert_eq!(aborts[1], found[0] + 1_000_000_000);
    assert_eq!(returned[1], aborts[1]);
    // No exception reached the program: the call returned.
    assert!(!(timeline.watchdog.iter()).any(|r| r.thread == ThreadKind::Main));
    assert_eq!(timeline.ranks[0].end.unwrap().status, ExitStatus::Clean);
}

#[test]
fn a_collective_called_after_the_watchdogs_handling_raises_before_it_issues_r27() {
    // The default profile: no stack trace, the abort returns when the 5-s kernel ended, with
    // the device synchronize before `again`: the call finds the communicator aborted and
    // raises (caught) before it issues anything; no Work, no second finding.
    let timeline = mode2_timeout_probe(2, "");
    let again = 4;
    let returned = watchdog_times(&timeline, WatchdogEvent::AbortReturned);
    assert_eq!(returned, [timeline.ranks[0].kernels[0].end_ns]);
    let rank = &timeline.ranks[0];
    assert_eq!(
        rank.collectives.len() + rank.unfinished_collectives.len(),
        1
    );
    assert!(!(timeline.ranks[0].kernels.iter()).any(|k| k.op == again));
    let raised: Vec<&WatchdogRecord> = (timeline.watchdog.iter())
        .filter(|r| r.thread == ThreadKind::Main)
        .collect();
    assert_eq!(raised.len(), 1);
    assert!(raised[0].message.contains("DistBackendError"));
    assert_eq!(host_call(&timeline, again).end_ns, raised[0].at_ns);
    assert!(!(timeline.findings.iter()).any(|f| f.kind == FindingKind::AsyncError));
}

#[test]
fn under_mode_0_a_collective_called_during_the_dump_wait_waits_for_its_end_r27() {
    // Mode 0 leaves the error alone once the dump wait is over (2.1 + 3.5 + 1 s): the Work
    // list is free then, and the communicator was not aborted, so the Work fails nothing.
    let timeline = mode2_timeout_probe(0, "watchdog_stack_trace_us = 3_500_000");
    let left_alone = watchdog_times(&timeline, WatchdogEvent::NoHandling);
    assert_eq!(left_alone, [6_600_000_000]);
    assert_eq!(host_call(&timeline, 4).end_ns, left_alone[0]);
    assert!(!(timeline.findings.iter()).any(|f| f.kind == FindingKind::AsyncError));
}

#[test]
fn the_memory_cap_finding_says_the_memory_held_in_readable_units_and_one_event() {
    // It used to say "held 7868KiB … after 1 events".
    let text = format!("{TWO_RANKS}[[op]]\nall_reduce = \"x\"\n");
    let options = Options {
        memory_in_use: Some(|| 18_706_432),
        max_memory_bytes: 1024,
        ..Options::default()
    };
    let (timeline, _) = simulate_with(&parse("cap.toml", &text).unwrap(), options);
    let finding = &timeline.findings[0];
    assert_eq!(finding.kind, FindingKind::MemoryCap);
    assert_eq!(
        finding.message,
        "the simulation held 17.84MiB of memory, over the cap of 1KiB (--max-memory), after 1 \
         event at simulated time 0.000 s; the run was stopped there"
    );
}

#[test]
fn the_race_findings_kept_past_their_cap_are_the_earliest_r21() {
    // 70 tensors, each written by a kernel on the default stream and one on a side stream
    // that nothing orders: 70 races per rank, at the same launches on both ranks (rank 0's
    // last op, after them, makes the two ranks classes of their own). Each host runs its
    // program ahead of the simulation (R1), rank 0's first: the cap kept the first 64 races
    // the engine found, all rank 0's. The 64 listed are the earliest, by time then rank: 32
    // of each rank, alternating.
    let mut text = String::from("[cluster]\nranks = 2\n[streams]\nside = {}\n[tensors]\n");
    for tensor in 0..70 {
        text += &format!("t{tensor} = \"4KiB\"\n");
    }
    for tensor in 0..70 {
        text += &format!(
            "[[op]]\nkernel = {{ us = 10, sms = 1 }}\nwrites = [\"t{tensor}\"]\n\
             [[op]]\nstream = \"side\"\nkernel = {{ us = 10, sms = 1 }}\nwrites = [\"t{tensor}\"]\n"
        );
    }
    text += "[[op]]\nranks = [0]\nhost_sleep_us = 1\n";
    let scenario = parse("race_cap.toml", &text).unwrap();
    for fold in [false, true] {
        let options = Options {
            fold,
            ..Options::default()
        };
        let timeline = simulate_with(&scenario, options).0;
        assert_eq!(timeline.ranks[0].races.len(), 70);
        let ranks: Vec<Option<u32>> = (timeline.findings.iter())
            .filter(|f| f.kind == FindingKind::Race)
            .map(|f| f.rank)
            .collect();
        let alternating: Vec<Option<u32>> = (0..64).map(|i| Some(i % 2)).collect();
        assert_eq!(ranks, alternating, "fold {fold}");
    }
}

/// Forty ranks, each its own class (`--detail ranks`), race twice each, then all but rank 1
/// (hung) wait in a device sync for good. Earlier findings (the races, the watchdog's) used up
/// the cap of the per-host deadlock findings, so no blocked host was named and the last line
/// said "only the first findings are listed" of none. The cap counts those findings alone.
#[test]
fn blocked_hosts_are_named_however_many_findings_came_before_r14() {
    let text = "[cluster]\nranks = 40\n[env]\nTORCH_NCCL_ASYNC_ERROR_HANDLING = 0\n\
        TORCH_NCCL_ENABLE_MONITORING = 0\n[tensors]\nx = \"1KiB\"\n\
        [[op]]\nlabel = \"a\"\nall_reduce = \"x\"\nasync_op = true\n\
        [[op]]\nlabel = \"b\"\nall_reduce = \"x\"\n[[op]]\nlabel = \"c\"\nall_reduce = \"x\"\n\
        [[op]]\ndevice_sync = true\n\
        [[fault]]\nranks = [1]\nat = \"c\"\nkind = \"hang\"\n";
    let scenario = parse("blocked.toml", text).unwrap();
    let options = Options {
        per_rank_detail: true,
        ..Options::default()
    };
    let (timeline, _) = simulate_with(&scenario, options);
    let hosts: Vec<&str> = (timeline.findings.iter())
        .filter(|f| f.kind == FindingKind::Deadlock && f.message.contains("the host is blocked"))
        .map(|f| f.message.as_str())
        .collect();
    assert_eq!(hosts.len(), 32, "{hosts:?}");
    assert!(
        hosts[0].starts_with("[Rank 0] the host is blocked in device_sync#3"),
        "{hosts:?}"
    );
    assert!(
        hosts[1].starts_with("[Rank 1] the host is blocked in c"),
        "{hosts:?}"
    );
    let last = timeline.findings.last().unwrap();
    assert_eq!(
        last.message,
        "40 hosts in all are blocked; only the first 32 findings on them are listed"
    );
}
