//! Property tests of the engine's invariants over randomly generated programs: causality
//! (nothing starts before its stream predecessor or the events it waits on, R4/R5/R10/R12),
//! host time only moves forward (R1), the rendezvous of R16, every Work completes or is named in a
//! deadlock finding, nothing of a process starts after it ended (R15, R27, R31), and determinism.
//!
//! About 810 lines: one generator per program family and the invariant checks they share; the
//! families differ in what they stress (streams and events, side threads, folding, run-ahead).

use proptest::prelude::*;
use sim::timeline::{ExitStatus, FindingKind, Timeline, WatchdogEvent};
use std::collections::HashMap;
use std::fmt::Write;

/// Builds a valid scenario from random choices: the generator tracks which Works and events
/// exist so that every reference resolves; `skip` makes one collective leave out the last rank,
/// which must end in a deadlock finding. `destroy` says whether the program ends with
/// `destroy_process_group()` or returns without it (R31).
fn scenario_text(
    ranks: u32,
    repeat: u32,
    (blocking_wait, destroy): (bool, bool),
    old_profile: bool,
    choices: &[(u8, u8)],
    skip: Option<usize>,
) -> String {
    let mut text = String::new();
    let _ = writeln!(
        text,
        "repeat = {repeat}\ndestroy_process_group = {destroy}\ntorch = \"{}\"\n[cluster]\nranks = {ranks}\nranks_per_node = 2\n[host]\ncomm_init_us = 50\ncomm_abort_us = 700\n[env]\nTORCH_NCCL_BLOCKING_WAIT = {}\n[tensors]\na = \"4KiB\"\nb = \"8MiB\"\nc = \"4KiB\"\n[streams]\ns1 = {{}}\ns2 = {{ priority = \"high\" }}\n[groups]\npair = {{ ranks = [{}] }}",
        if old_profile { "2.5" } else { "2.12" },
        u8::from(blocking_wait),
        // One rank: a group of rank 0 alone.
        if ranks > 1 { "0, 1" } else { "0" }
    );
    let streams = ["default", "s1", "s2"];
    let mut works = 0usize;
    let mut events: Vec<usize> = Vec::new();
    let mut marks = 0usize;
    for (index, &(kind, arg)) in choices.iter().enumerate() {
        text.push_str("[[op]]\n");
        let tensor = if arg % 2 == 0 { "a" } else { "b" };
        match kind % 16 {
            0 | 1 => {
                let _ = writeln!(
                    text,
                    "all_reduce = \"{tensor}\"\nasync_op = true\nwork = \"w{works}\""
                );
                if skip == Some(index) && ranks > 1 {
                    let listed: Vec<String> = (0..ranks - 1).map(|r| r.to_string()).collect();
                    let _ = writeln!(text, "ranks = [{}]", listed.join(", "));
                    // A Work that exists on some ranks only cannot be waited on everywhere.
                    continue;
                }
                works += 1;
            }
            2 => {
                let _ = writeln!(text, "all_gather = \"{tensor}\"");
            }
            3 if works > 0 => {
                let _ = writeln!(text, "wait = \"w{}\"", arg as usize % works);
                if arg % 5 <= 1 {
                    // A wait with its own timeout (R15): it times out, aborts the communicator
                    // and raises once the abort returned; caught, or ending the process.
                    let _ = writeln!(text, "timeout_ms = {}", 1 + arg / 32);
                    if arg % 5 == 1 {
                        text.push_str("catch = true\n");
                    }
                }
            }
            4 if works > 0 => {
                let _ = writeln!(text, "is_completed = \"w{}\"", arg as usize % works);
            }
            5 => {
                let _ = writeln!(text, "gemm = [{}, 512, 256]", 64 + u32::from(arg) * 8);
            }
            6 => {
                let _ = writeln!(text, "kernel = {{ us = {} }}", 1 + u32::from(arg));
            }
            7 => {
                let _ = writeln!(text, "gpu_sleep_us = {}", 1 + u32::from(arg) * 3);
            }
            8 => {
                let _ = writeln!(text, "set_stream = \"{}\"", streams[arg as usize % 3]);
            }
            9 => {
                let _ = writeln!(text, "record_event = \"e{}\"", arg as usize % 3);
                if !events.contains(&(arg as usize % 3)) {
                    events.push(arg as usize % 3);
                }
            }
            10 if !events.is_empty() => {
                let verb = if arg % 2 == 0 {
                    "wait_event"
                } else {
                    "event_sync"
                };
                let _ = writeln!(
                    text,
                    "{verb} = \"e{}\"",
                    events[arg as usize % events.len()]
                );
            }
            11 => {
                let _ = writeln!(text, "stream_sync = \"{}\"", streams[arg as usize % 3]);
            }
            12 => {
                let _ = writeln!(
                    text,
                    "{}",
                    if arg % 2 == 0 {
                        "device_sync = true"
                    } else {
                        "item = \"a\""
                    }
                );
            }
            13 => {
                let _ = writeln!(text, "mark = \"m{marks}\"");
                marks += 1;
            }
            15 if ranks > 1 => {
                // Point-to-point calls: a send from rank 0 to rank 1 (a pair of its own), or
                // a ring of batches on the world; sends and receives of one size.
                if arg % 2 == 0 {
                    let _ = writeln!(
                        text,
                        "ranks = [0]\nsend = \"a\"\npeer = 1\n[[op]]\nranks = [1]\nrecv = \"c\"\npeer = 0"
                    );
                } else {
                    text.push_str(
                        "batch_isend_irecv = [{ send = \"a\", shift = 1 }, { recv = \"c\", shift = -1 }]\n",
                    );
                }
            }
            _ => {
                let _ = writeln!(
                    text,
                    "{}",
                    if arg % 3 == 0 {
                        "barrier = true"
                    } else {
                        "host_sleep_us = 7"
                    }
                );
                if arg % 3 == 1 {
                    text.push_str("[[op]]\nall_reduce = \"a\"\ngroup = \"pair\"\n");
                }
            }
        }
    }
    text
}

fn check_invariants(timeline: &Timeline) {
    let latency_ns = 3_000;
    for rank in &timeline.ranks {
        // A process executes nothing after it ended (issue 14's property).
        let end = rank.end.expect("the simulator records every process's end");
        let end_ns = end.at_ns.unwrap_or(u64::MAX);
        assert!(
            rank.host.iter().all(|call| call.start_ns <= end_ns),
            "host call after the process ended"
        );
        // R1: host time only moves forward; calls do not overlap.
        for pair in rank.host.windows(2) {
            assert!(pair[0].start_ns <= pair[0].end_ns);
            assert!(pair[0].end_ns <= pair[1].start_ns, "host went back in time");
        }
        // R4: a stream runs one kernel at a time, in launch order, none before its launch;
        // nothing of a process that ended starts on its GPU (R15, R27, R31).
        let mut last_end: HashMap<u16, u64> = HashMap::new();
        for kernel in &rank.kernels {
            assert!(
                kernel.start_ns <= end_ns,
                "kernel started at {} after the process ended at {end_ns}",
                kernel.start_ns
            );
            assert!(
                kernel.start_ns >= kernel.enqueue_ns + latency_ns,
                "kernel before launch"
            );
            assert!(kernel.end_ns >= kernel.start_ns);
            let previous = last_end.entry(kernel.stream).or_insert(0);
            assert!(kernel.start_ns >= *previous, "stream FIFO violated");
            *previous = kernel.end_ns;
        }
        // R5: a waiting stream is released only after the event it waits on fired.
        for wait in &rank.stream_waits {
            assert!(
                wait.released_ns >= wait.source_ns,
                "released before the event fired"
            );
            assert!(
                wait.released_ns <= end_ns,
                "stream wait released at {} after the process ended at {end_ns}",
                wait.released_ns
            );
        }
        for mark in &rank.marks {
            assert!(
                mark.gpu_ns >= mark.host_ns,
                "a GPU point before its host call"
            );
        }
        for record in &rank.collectives {
            // A rank's collective starts while its process lives (R15, R27: nothing of a dead
            // process runs on its GPU).
            assert!(
                record.kernel_start_ns < end_ns,
                "collective started at {} after the process ended at {end_ns}",
                record.kernel_start_ns
            );
            // R10a: the NCCL stream waits for the input-ready event.
            assert!(record.kernel_start_ns >= record.input_ready_ns);
            // R16: data moves only when the last rank arrived.
            assert!(record.data_start_ns >= record.kernel_start_ns);
            assert!(record.end_ns >= record.data_start_ns);
            if let Some(wait) = &record.wait {
                // R12: the stream current at wait() is released only after the end event.
                assert!(wait.released_ns >= record.end_ns);
                assert_eq!(wait.completed_at_return, record.end_ns <= wait.host_end_ns);
                // Work launched on that stream after wait() returned starts after the collective.
                for kernel in &rank.kernels {
                    if kernel.stream == wait.stream && kernel.enqueue_ns >= wait.host_end_ns {
                        assert!(kernel.start_ns >= record.end_ns, "R12 ordering violated");
                    }
                }
            }
        }
    }
    // R16: every rank of a collective sees the same data start (the last arrival) and end.
    let mut by_key: HashMap<(u16, u64), (u64, u64, u64)> = HashMap::new();
    for rank in &timeline.ranks {
        for record in &rank.collectives {
            let entry = by_key.entry((record.group, record.seq)).or_insert((
                record.data_start_ns,
                record.end_ns,
                0,
            ));
            assert_eq!((entry.0, entry.1), (record.data_start_ns, record.end_ns));
            entry.2 = entry.2.max(record.kernel_start_ns);
        }
    }
    for rank in &timeline.ranks {
        for record in &rank.collectives {
            assert_eq!(record.data_start_ns, by_key[&(record.group, record.seq)].2);
        }
    }
}

/// Without findings, every rank ran every op of every iteration and every collective completed.
/// A deadlock, or a wait that timed out (its communicator aborted on purpose), ends that.
fn check_completion(timeline: &Timeline, text: &str) {
    let scenario = sim::scenario::parse("p.toml", text).unwrap();
    if timeline
        .findings
        .iter()
        .any(|f| matches!(f.kind, FindingKind::Deadlock | FindingKind::WaitTimeout))
    {
        return;
    }
    // Races (R21) are reported but stop nothing; anything else would have.
    assert!(
        timeline
            .findings
            .iter()
            .all(|f| f.kind == FindingKind::Race),
        "{:?}",
        timeline.findings
    );
    for rank in &timeline.ranks {
        let ops = scenario
            .ops
            .iter()
            .filter(|op| op.runs_on(rank.rank))
            .count();
        assert_eq!(
            rank.host.len(),
            ops * scenario.repeat as usize,
            "rank {}",
            rank.rank
        );
        let collectives = scenario
            .ops
            .iter()
            .filter(|op| {
                op.runs_on(rank.rank)
                    && matches!(
                        op.kind,
                        sim::scenario::OpKind::Collective { .. }
                            | sim::scenario::OpKind::Barrier { .. }
                            | sim::scenario::OpKind::BatchP2p { .. }
                    )
            })
            .count();
        assert_eq!(
            rank.collectives.len(),
            collectives * scenario.repeat as usize
        );
        // Every call completed: each rank's Works are numbered 1, 2, 3, … without a gap, the
        // point-to-point calls of its process group (a pair's are the world's, whatever the
        // peer) apart from each group's collectives (docs/watchdog.md).
        let mut counts: HashMap<(usize, bool), u64> = HashMap::new();
        for record in &rank.collectives {
            let point_to_point = scenario.ops[record.op as usize].kind.is_point_to_point();
            let process_group = scenario.process_group(record.group as usize);
            let count = counts.entry((process_group, point_to_point)).or_default();
            *count += 1;
            assert_eq!(record.seq_num(), *count, "rank {}: {record:?}", rank.rank);
        }
    }
}

/// Whether `message` names `rank` as findings do: "rank 3", or "ranks 0-2,4 (4 ranks)".
fn names_rank(message: &str, rank: u32) -> bool {
    let words: Vec<&str> = message.split_whitespace().collect();
    words.windows(2).any(|pair| {
        matches!(pair[0], "rank" | "ranks")
            && pair[1]
                .trim_end_matches([',', ':', ';', ')'])
                .split(',')
                .any(|range| match range.split_once('-') {
                    Some((first, last)) => match (first.parse::<u32>(), last.parse::<u32>()) {
                        (Ok(first), Ok(last)) => (first..=last).contains(&rank),
                        _ => false,
                    },
                    None => range.parse() == Ok(rank),
                })
    })
}

#[test]
fn a_host_ahead_stops_at_the_monitors_next_read_of_a_dump_signal() {
    // Found by `side_thread_effects_reach_the_host_at_their_simulated_time`: rank 2's watchdog
    // hangs, its host runs seconds ahead of the simulation, then ranks 0-1 time out at 0.7 s and
    // broadcast the dump signal, which rank 2's monitor reads at 1 s and ends the process 2 s
    // later. Its host had issued calls past 3 s before the broadcast existed.
    let text = failing_text(
        3,
        0,
        (98, 113_695_781, 2_283_788_496),
        (353, 2),
        (false, Some(1)),
    );
    let scenario = sim::scenario::parse("f.toml", &text).unwrap();
    let timeline = sim::engine::simulate(&scenario);
    assert!(timeline.ranks[2].end.and_then(|end| end.at_ns).is_some());
    check_invariants(&timeline);
}

#[test]
fn names_rank_reads_single_ranks_and_ranges_only() {
    assert!(names_rank("rank 3 never launched it", 3));
    assert!(names_rank("ranks 0-2,4 (4 ranks) started", 1));
    assert!(names_rank("ranks 0-2,4 (4 ranks) started", 4));
    assert!(!names_rank("ranks 0-2,4 (4 ranks) started", 3));
    assert!(!names_rank("collective ar (SeqNum=3, line 3) of rank 0", 3));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 192, ..ProptestConfig::default() })]

    #[test]
    fn engine_invariants_hold(
        ranks in 1u32..5,
        repeat in 1u32..4,
        blocking_wait in any::<bool>(),
        destroy in any::<bool>(),
        old_profile in any::<bool>(),
        choices in proptest::collection::vec((any::<u8>(), any::<u8>()), 1..16),
    ) {
        let text = scenario_text(ranks, repeat, (blocking_wait, destroy), old_profile, &choices, None);
        let scenario = sim::scenario::parse("p.toml", &text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        let timeline = sim::engine::simulate(&scenario);
        check_invariants(&timeline);
        check_completion(&timeline, &text);
        // Determinism: the same scenario gives the same Timeline.
        prop_assert_eq!(&timeline, &sim::engine::simulate(&scenario));
    }

    #[test]
    fn a_rank_skipping_a_collective_is_a_deadlock_finding_not_a_hang(
        ranks in 2u32..5,
        choices in proptest::collection::vec((0u8..2, any::<u8>()), 1..6),
        skip_at in 0usize..6,
    ) {
        let skip = skip_at % choices.len();
        let mut ops = choices.clone();
        ops.push((12, 0)); // a device sync after all: the host must wait for the stuck kernel
        let text = scenario_text(ranks, 1, (false, true), false, &ops, Some(skip));
        let scenario = sim::scenario::parse("p.toml", &text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        let timeline = sim::engine::simulate(&scenario);
        check_invariants(&timeline);
        // A rank that skips a collective leaves the others waiting — caught by the watchdog
        // after the timeout (R26), or a deadlock when nothing watches — or, when it issues
        // the next collective instead, disagrees with them at that SeqNum (mismatch).
        let stuck = timeline.findings.iter().find(|f| {
            matches!(
                f.kind,
                FindingKind::Deadlock | FindingKind::Mismatch | FindingKind::WatchdogTimeout
            )
        });
        prop_assert!(stuck.is_some(), "{}\n{:?}", text, timeline.findings);
        let deadlocks: Vec<_> = timeline
            .findings
            .iter()
            .filter(|f| f.kind == FindingKind::Deadlock)
            .collect();
        let named_last = deadlocks.is_empty()
            || deadlocks.iter().any(|f| names_rank(&f.message, ranks - 1));
        prop_assert!(named_last, "the finding names the missing rank: {:?}", timeline.findings);
    }

    #[test]
    fn side_thread_effects_reach_the_host_at_their_simulated_time(
        ranks in 2u32..4,
        mode in 0u8..4,
        fault in (any::<u8>(), any::<u32>(), any::<u32>()),
        host_phase_ms in 1u32..400,
        heartbeat_s in 1u32..3,
        ending in (any::<bool>(), proptest::option::of(1u32..900)),
    ) {
        let text = failing_text(ranks, mode, fault, (host_phase_ms, heartbeat_s), ending);
        let scenario = sim::scenario::parse("f.toml", &text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        let timeline = sim::engine::simulate(&scenario);
        check_invariants(&timeline);
        check_side_thread_effects(&timeline);
        check_abort_returns(&timeline, &scenario);
        prop_assert!(!timeline.findings.is_empty(), "{}", text);
        // Faults, watchdogs and heartbeats are deterministic too: the same run again.
        prop_assert_eq!(&timeline, &sim::engine::simulate(&scenario));
    }

    #[test]
    fn faults_and_raises_while_hosts_run_ahead_of_a_short_launch_queue(
        ranks in 2u32..4,
        mode in 0u8..4,
        fault in (any::<u8>(), any::<u32>(), any::<u32>()),
        queue_depth in 1u32..6,
        (delay_ms, caught, waited) in (1u32..300, any::<bool>(), any::<bool>()),
    ) {
        let text = run_ahead_text(ranks, mode, fault, queue_depth, (delay_ms, caught, waited));
        let scenario = sim::scenario::parse("q.toml", &text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        let timeline = sim::engine::simulate(&scenario);
        check_invariants(&timeline);
        check_side_thread_effects(&timeline);
        prop_assert_eq!(&timeline, &sim::engine::simulate(&scenario));
    }

    #[test]
    fn folding_is_exact_over_random_programs_and_faults(
        ranks in 1u32..7,
        repeat in 1u32..3,
        blocking_wait in any::<bool>(),
        destroy in any::<bool>(),
        choices in proptest::collection::vec((any::<u8>(), any::<u8>()), 1..10),
        skip in proptest::option::of(0usize..10),
        failing in proptest::option::of((0u8..4, any::<u8>(), any::<u32>(), any::<u32>())),
        pair_timeout_ms in proptest::option::of(1u32..900),
    ) {
        // A random program (some ranks skip a collective), or one that goes on after a fault.
        let text = match failing {
            None => scenario_text(ranks, repeat, (blocking_wait, destroy), false, &choices, skip),
            Some((mode, kind, rank, iteration)) => failing_text(
                ranks.max(2),
                mode,
                (kind, rank, iteration),
                (3 + rank % 300, 1),
                (destroy, pair_timeout_ms),
            ),
        };
        let scenario = sim::scenario::parse("p.toml", &text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        let run = |fold: bool| {
            let options = sim::engine::Options { fold, ..sim::engine::Options::default() };
            sim::engine::simulate_with(&scenario, options).0
        };
        let folded = serde_json::to_string(&run(true).expand()).unwrap();
        let unfolded = serde_json::to_string(&run(false)).unwrap();
        prop_assert!(folded == unfolded, "{}", text);
    }

    #[test]
    fn a_process_that_dies_runs_nothing_more_on_its_gpu(
        ranks in 2u32..5,
        repeat in 1u32..3,
        choices in proptest::collection::vec((any::<u8>(), any::<u8>()), 1..12),
        (at, dying, iteration) in (any::<usize>(), any::<u32>(), any::<u32>()),
    ) {
        // A random program (streams, events, kernels, collectives) in which one rank's process
        // dies before an op of some iteration, with the GPU work it launched before still
        // queued: none of it may start, nor any stream wait be released, after the death.
        let text = scenario_text(ranks, repeat, (false, true), false, &choices, None);
        let ops: Vec<usize> = text.match_indices("[[op]]").map(|(index, _)| index).collect();
        let split = ops[at % ops.len()];
        let text = format!(
            "{}[[op]]\nlabel = \"dies\"\nhost_sleep_us = 1\n{}[[fault]]\nranks = [{}]\nat = \"dies\"\niteration = {}\nkind = \"die\"\n",
            &text[..split],
            &text[split..],
            dying % ranks,
            iteration % repeat,
        );
        let scenario = sim::scenario::parse("p.toml", &text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        let timeline = sim::engine::simulate(&scenario);
        // A rank named by a fault is a class of its own (docs/scale.md): its own record.
        let dead = timeline.ranks.iter().find(|rank| rank.rank == dying % ranks);
        let died = dead.and_then(|rank| rank.end).and_then(|end| end.at_ns);
        prop_assert!(died.is_some(), "{}", text);
        check_invariants(&timeline);
        check_side_thread_effects(&timeline);
        prop_assert_eq!(&timeline, &sim::engine::simulate(&scenario));
    }

    #[test]
    fn a_wait_s_timeout_aborts_and_raises_in_order(
        backlog_us in 0u32..30_000,
        timeout_ms in 1u32..20,
        abort_us in 0u32..20_000,
        peer_delay_us in 0u32..40_000,
        blocking_wait in any::<bool>(),
        catch in any::<bool>(),
    ) {
        // Rank 0 waits, with a timeout, for a collective queued behind a GPU backlog; rank 1
        // joins late. Whatever the order of the timeout, the drain, the abort's least time and
        // the peer's arrival, nothing of rank 0 runs after its process ended, the raise comes
        // no earlier than the abort allows, and the run is deterministic. The timeout is whole
        // milliseconds, as PyTorch keeps it; the other times span ten times as much.
        let text = format!(
            "[cluster]\nranks = 2\n[host]\ncomm_abort_us = {abort_us}\n[env]\nTORCH_NCCL_BLOCKING_WAIT = {}\n\
             [groups.world]\neager_init = true\ntimeout_s = 600\n[tensors]\nx = \"1MiB\"\n\
             [[op]]\ngpu_sleep_us = {}\nranks = [0]\n\
             [[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\nasync_op = true\nwork = \"w\"\n\
             [[op]]\nwait = \"w\"\ntimeout_ms = {}\ncatch = {catch}\n\
             [[op]]\nkernel = {{ us = 5 }}\n[[op]]\ndevice_sync = true\n\
             [[perturb]]\nranks = [1]\nbefore = \"ar\"\nhost_delay_us = {}\n",
            u8::from(blocking_wait),
            1 + backlog_us,
            timeout_ms,
            1 + peer_delay_us,
        );
        let scenario = sim::scenario::parse("p.toml", &text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        let timeline = sim::engine::simulate(&scenario);
        check_invariants(&timeline);
        for record in timeline.watchdog.iter().filter(|r| r.event == WatchdogEvent::WaitTimeout) {
            let raised = timeline.watchdog.iter().find(|r| {
                r.rank == record.rank && r.event == WatchdogEvent::Abort && r.at_ns >= record.at_ns
            });
            if let Some(raised) = raised {
                prop_assert!(raised.at_ns >= record.at_ns + u64::from(abort_us) * 1_000, "{}", text);
            }
        }
        prop_assert_eq!(&timeline, &sim::engine::simulate(&scenario));
    }

    #[test]
    fn no_text_makes_the_parser_panic(text in "\\PC{0,300}") {
        let _ = sim::scenario::parse("fuzz.toml", &text);
    }

    #[test]
    fn mutated_scenarios_parse_or_fail_cleanly(
        cut in 0usize..2000,
        insert in "[=\\[\\]\"a-z0-9.\\n -]{0,6}",
    ) {
        let base = scenario_text(2, 2, (false, true), false, &[(0, 1), (3, 0), (5, 2), (13, 0)], None);
        let at = cut % base.len();
        let mut text = base[..at].to_string();
        text.push_str(&insert);
        text.push_str(&base[at..]);
        if let Ok(scenario) = sim::scenario::parse("mutated.toml", &text) {
            if scenario.cluster.ranks <= 64 && scenario.repeat <= 64 {
                check_invariants(&sim::engine::simulate(&scenario));
            }
        }
    }
}

/// A program that goes on after a fault: every iteration an async all_reduce (`ar`), a host
/// phase, `wait()`, another host phase and a barrier-free `.item()`-less tail, so hosts keep
/// issuing calls while the side threads time out, abort and end processes. Short timeouts
/// and dump waits make the side threads act within the run. `ending`: whether the program ends
/// with `destroy_process_group()`, and, if given, the timeout in ms of a second group (ranks 0
/// and 1) with an async all_reduce each iteration that no one waits for, so that a program
/// returning without the call leaves work of two groups with two timeouts behind (R31).
fn failing_text(
    ranks: u32,
    mode: u8,
    fault: (u8, u32, u32),
    (host_phase_ms, heartbeat_s): (u32, u32),
    (destroy, pair_timeout_ms): (bool, Option<u32>),
) -> String {
    let (kind, rank, iteration) = fault;
    // The watchdog's abort in modes 1 and 2: at once, short, or longer than a host phase.
    let abort_us = [0, 700, 200_000][(iteration / 6 % 3) as usize];
    let kind = match kind % 5 {
        0 => "kind = \"hang\"",
        1 => "kind = \"die\"",
        2 => "kind = \"async_error\"\nafter_us = 50000",
        3 => "kind = \"watchdog_stuck\"",
        _ => "kind = \"mismatch\"\nsize = \"2MiB\"",
    };
    let pair = match pair_timeout_ms {
        Some(timeout_ms) => format!(
            "[groups.pair]\nranks = [0, 1]\ntimeout_s = {}\n[[op]]\nall_reduce = \"x\"\ngroup = \"pair\"\nasync_op = true\n",
            f64::from(timeout_ms) / 1000.0
        ),
        None => String::new(),
    };
    format!(
        "repeat = 6\ndestroy_process_group = {destroy}\n[cluster]\nranks = {ranks}\n[host]\ncomm_abort_us = {abort_us}\n[env]\nTORCH_NCCL_ASYNC_ERROR_HANDLING = {mode}\nTORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC = 100\nTORCH_NCCL_HEARTBEAT_TIMEOUT_SEC = {heartbeat_s}\nTORCH_NCCL_PROPAGATE_ERROR = {}\n[groups.world]\neager_init = true\ntimeout_s = 0.5\n[tensors]\nx = \"1MiB\"\n[[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\nasync_op = true\nwork = \"w\"\n[[op]]\nhost_sleep_us = {}\n[[op]]\nwait = \"w\"\n[[op]]\nhost_sleep_us = {}\n{pair}[[fault]]\nranks = [{}]\nat = \"ar\"\niteration = {}\n{kind}\n",
        mode % 2,
        host_phase_ms * 1000,
        host_phase_ms * 700,
        rank % ranks,
        iteration % 6,
    )
}

/// A program whose hosts run ahead of their GPU (R1) into a launch queue of `queue_depth`
/// entries: every iteration an async all_reduce whose Work is waited only when `waited`, a
/// 100-µs kernel, and a host delay of `delay_ms` on rank 0 before the all_reduce of iteration 2;
/// `caught` catches what the all_reduce raises. A fault at one iteration, a 50-ms timeout and a
/// short dump wait let the side threads act while hosts are blocked on a full queue, on the
/// watchdog's list (R27) or in a raise.
fn run_ahead_text(
    ranks: u32,
    mode: u8,
    fault: (u8, u32, u32),
    queue_depth: u32,
    (delay_ms, caught, waited): (u32, bool, bool),
) -> String {
    let (kind, rank, iteration) = fault;
    let kind = match kind % 4 {
        0 => "kind = \"hang\"",
        1 => "kind = \"die\"",
        2 => "kind = \"async_error\"\nafter_us = 20000",
        _ => "kind = \"mismatch\"\nsize = \"2MiB\"",
    };
    let wait = if waited { "[[op]]\nwait = \"w\"\n" } else { "" };
    format!(
        "repeat = 8\n[cluster]\nranks = {ranks}\n[host]\nlaunch_queue_depth = {queue_depth}\n[env]\nTORCH_NCCL_ASYNC_ERROR_HANDLING = {mode}\nTORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC = 1\nTORCH_NCCL_HEARTBEAT_TIMEOUT_SEC = 1\n[groups.world]\ntimeout_s = 0.05\n[tensors]\nx = \"1MiB\"\n[[op]]\nlabel = \"step\"\nkernel = {{ us = 100 }}\n[[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\nasync_op = true\nwork = \"w\"\ncatch = {caught}\n{wait}[[perturb]]\nranks = [0]\nbefore = \"ar\"\nhost_delay_us = {}\niterations = [2]\n[[fault]]\nranks = [{}]\nat = \"ar\"\niteration = {}\n{kind}\n",
        delay_ms * 1000,
        rank % ranks,
        iteration % 8,
    )
}

/// The watchdog's abort (R27, modes 1 and 2) returns at most once per abort, the first of a
/// group no earlier than `host.comm_abort_us` after it began (these programs have no wait of
/// their own timeout, whose abort would leave the watchdog's nothing to do; a later abort, of
/// the error of a Work listed on the communicator the first one aborted, has nothing to do
/// either), and mode 1 logs no return: it takes the process down instead.
fn check_abort_returns(timeline: &Timeline, scenario: &sim::scenario::Scenario) {
    let watchdog_records = |rank: u32, event: WatchdogEvent| -> Vec<(Option<u16>, u64)> {
        (timeline.watchdog.iter())
            .filter(|r| (r.rank == rank || r.stands_for.contains(rank)) && r.event == event)
            .filter(|r| r.thread == sim::timeline::ThreadKind::Watchdog)
            .map(|r| (r.group, r.at_ns))
            .collect()
    };
    let tears_down = scenario.env.async_error_handling.tears_down();
    for rank in &timeline.ranks {
        let aborts = watchdog_records(rank.rank, WatchdogEvent::Abort);
        let returns = watchdog_records(rank.rank, WatchdogEvent::AbortReturned);
        if tears_down {
            assert!(returns.is_empty(), "rank {}: {returns:?}", rank.rank);
            continue;
        }
        for &(group, returned_ns) in &returns {
            let began: Vec<u64> = (aborts.iter())
                .filter(|(g, at_ns)| *g == group && *at_ns <= returned_ns)
                .map(|&(_, at_ns)| at_ns)
                .collect();
            let returns_before = (returns.iter())
                .filter(|(g, at_ns)| *g == group && *at_ns <= returned_ns)
                .count();
            assert!(
                began.len() >= returns_before,
                "rank {}: a return without its abort: {aborts:?} {returns:?}",
                rank.rank
            );
            let last_began = *began.last().expect("a return follows an abort");
            let least_ns = match began.len() {
                1 => scenario.host.comm_abort_ns,
                _ => 0,
            };
            assert!(
                returned_ns >= last_began + least_ns,
                "rank {}: returned at {returned_ns}, {} after the abort began at {last_began}",
                rank.rank,
                returned_ns - last_began
            );
        }
    }
}

/// No host call of a rank starts after its process ended, no deadlock finding blames a rank
/// whose process ended for not doing what its death stopped, and no collective a rank issued
/// after its communicator of that group was aborted completes.
fn check_side_thread_effects(timeline: &Timeline) {
    for rank in &timeline.ranks {
        let at = |event: WatchdogEvent| {
            timeline
                .watchdog
                .iter()
                .filter(|r| {
                    (r.rank == rank.rank || r.stands_for.contains(rank.rank)) && r.event == event
                })
                .map(|r| (r.group, r.at_ns))
                .min_by_key(|&(_, at_ns)| at_ns)
        };
        if let Some((_, exit_ns)) = at(WatchdogEvent::Exit) {
            for call in &rank.host {
                assert!(
                    call.start_ns <= exit_ns,
                    "rank {}: a host call starts at {} after the process ended at {exit_ns}",
                    rank.rank,
                    call.start_ns
                );
            }
        }
        // A process that ended starts no GPU work after its end either: killed, aborted,
        // raised or crashed, its CUDA context went with it; clean, its GPU work had drained
        // (R31).
        let end = rank.end.expect("the simulator records every process's end");
        if let Some(end_ns) = end.at_ns {
            if end.status == ExitStatus::Clean {
                let last_end = rank.kernels.iter().map(|k| k.end_ns).max().unwrap_or(0);
                assert!(
                    last_end <= end_ns,
                    "rank {}: a kernel ends at {last_end} after its clean exit at {end_ns}",
                    rank.rank
                );
            }
            let logged = (timeline.watchdog.iter())
                .filter(|r| r.rank == rank.rank || r.stands_for.contains(rank.rank))
                .map(|r| r.at_ns)
                .max()
                .unwrap_or(0);
            assert!(
                logged <= end_ns,
                "rank {}: a side thread logs at {logged} after the process ended at {end_ns}",
                rank.rank
            );
            let starts = [
                (
                    "a kernel starts",
                    rank.kernels.iter().map(|k| k.start_ns).max(),
                ),
                (
                    "a stream wait is released",
                    rank.stream_waits.iter().map(|w| w.released_ns).max(),
                ),
                (
                    "a collective starts",
                    rank.collectives.iter().map(|c| c.kernel_start_ns).max(),
                ),
            ];
            for (what, latest) in starts {
                let latest = latest.unwrap_or(0);
                assert!(
                    latest <= end_ns,
                    "rank {}: {what} at {latest} after the process ended at {end_ns}",
                    rank.rank
                );
            }
        }
        // No deadlock finding blames a dead rank for what its death stopped.
        if at(WatchdogEvent::Exit).is_some() {
            for finding in &timeline.findings {
                if finding.kind != FindingKind::Deadlock {
                    continue;
                }
                for never in [" never launched it", " never issued a collective"] {
                    let Some(end) = finding.message.find(never) else {
                        continue;
                    };
                    let blamed = named_ranks(&finding.message[..end]).contains(&rank.rank);
                    assert!(
                        !blamed,
                        "rank {} is dead and blamed: {}",
                        rank.rank, finding.message
                    );
                }
            }
        }
        if let Some((Some(group), abort_ns)) = at(WatchdogEvent::Abort) {
            for record in &rank.collectives {
                assert!(
                    record.group != group || record.host_start_ns <= abort_ns,
                    "rank {}: a collective issued at {} after the abort at {abort_ns} completed",
                    rank.rank,
                    record.host_start_ns
                );
            }
        }
    }
}

/// The ranks a message names just before its end: "… rank 3" or "… ranks 0-2,5 (4 ranks)".
fn named_ranks(text: &str) -> Vec<u32> {
    let text = match text.strip_suffix(" ranks)") {
        Some(rest) => &rest[..rest.rfind(" (").expect("a count in parentheses")],
        None => text,
    };
    let list = text.rsplit(' ').next().unwrap_or_default();
    list.split(',')
        .flat_map(|range| {
            let mut bounds = range
                .split('-')
                .map(|b| b.parse::<u32>().unwrap_or_else(|_| panic!("{text:?}")));
            let first = bounds.next().unwrap();
            let last = bounds.next().unwrap_or(first);
            first..=last
        })
        .collect()
}
