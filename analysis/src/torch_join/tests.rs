use super::*;
use sim::timeline::FindingKind;

fn record(rank: u32, thread: ThreadKind, event: WatchdogEvent, at_ns: u64) -> WatchdogRecord {
    WatchdogRecord {
        stands_for: Default::default(),
        rank,
        group: None,
        thread,
        event,
        at_ns,
        message: format!("[Rank {rank}] logged"),
    }
}

fn one_rank_timeline() -> Timeline {
    let text = include_str!("../../../scenarios/timeout_dump.toml");
    let scenario = sim::scenario::parse("timeout_dump.toml", text).unwrap();
    Timeline::for_scenario(&scenario, sim::timeline::Source::Torch, |_| None)
}

#[test]
fn an_inferred_exit_moves_to_the_ranks_last_record_and_no_other_record_moves() {
    let mut part = one_rank_timeline();
    part.machine
        .insert("journal".to_string(), "partial: inside op 3".to_string());
    assert!(note_unfinished(&mut part, 0, "1"));
    assert!(!note_unfinished(&mut part, 0, "1"), "one exit per rank");
    let mut watchdog = part.watchdog.clone();
    assert_eq!(watchdog[0].at_ns, 0);
    let stack_trace = record(
        0,
        ThreadKind::Watchdog,
        WatchdogEvent::StackTrace,
        4_689_000_000,
    );
    let other_rank = record(
        1,
        ThreadKind::Watchdog,
        WatchdogEvent::Timeout,
        9_000_000_000,
    );
    watchdog.extend([stack_trace.clone(), other_rank.clone()]);
    place_inferred_exits(&mut watchdog, &[0]);
    assert_eq!(watchdog[0].at_ns, 4_689_000_000);
    assert!(is_inferred_exit(&watchdog[0]));
    assert_eq!(watchdog[1..], [stack_trace, other_rank]);
}

#[test]
fn an_inferred_exit_comes_no_earlier_than_the_call_the_process_never_returned_from() {
    let mut part = one_rank_timeline();
    part.machine
        .insert("journal".to_string(), "partial: inside op 3".to_string());
    part.ranks.push(RankTimeline {
        host: vec![sim::timeline::HostCall {
            iteration: 0,
            op: 0,
            start_ns: 1_000,
            end_ns: 2_000,
        }],
        unfinished_host: Some(sim::timeline::UnfinishedHostCall {
            iteration: 0,
            op: 1,
            start_ns: 3_000,
            blocked_on: Some(sim::timeline::HostBlock::Device),
        }),
        ..RankTimeline::default()
    });
    assert!(note_unfinished(&mut part, 0, "1"));
    assert_eq!(part.watchdog[0].at_ns, 3_000);
    assert!(is_inferred_exit(&part.watchdog[0]));
}

#[test]
fn an_inferred_exit_gives_way_to_the_take_down_pytorch_logged() {
    let mut part = one_rank_timeline();
    part.machine
        .insert("journal".to_string(), "partial: inside op 3".to_string());
    assert!(note_unfinished(&mut part, 0, "1"));
    let take_down = record(0, ThreadKind::Watchdog, WatchdogEvent::Exit, 5_689_000_000);
    let mut watchdog = part.watchdog.clone();
    watchdog.push(take_down.clone());
    place_inferred_exits(&mut watchdog, &[0]);
    assert_eq!(watchdog, [take_down]);
}

/// `c10dsim torch`'s join of rank 0's file `part`, written and read back as `c10dsim torch`
/// reads it, and PyTorch's stderr `log`, after a launcher that exited with status 1.
fn join_one_rank(part: &Timeline, log: &str) -> Timeline {
    let Ok(written) = Timeline::from_json(&serde_json::to_string(part).unwrap()) else {
        panic!("the rank's file reads back")
    };
    let files = vec![Some(("rank0.json".to_string(), written))];
    match join_ranks(files, "1", log, hw::merge_ranks) {
        Ok(joined) => joined,
        Err(error) => panic!("the rank joins: {error}"),
    }
}

/// `c10dsim torch`'s join of the stored run `tests/data/torch/gpu_backlog_timeout.run1` (one
/// rank, its stored Timeline the join's output), its rank's Timeline first changed by `edit`.
fn joined_gpu_backlog_timeout(edit: impl FnOnce(&mut Timeline)) -> Timeline {
    let stored = include_str!("../../../tests/data/torch/gpu_backlog_timeout.run1.json");
    let Ok(mut part) = Timeline::from_json(stored) else {
        panic!("gpu_backlog_timeout.run1 is a stored Timeline")
    };
    // The rank's own file, as its interpreter wrote it: what `c10dsim torch` read from
    // PyTorch's log is read again below.
    part.findings
        .retain(|finding| !finding.message.contains("(PyTorch's log)"));
    part.watchdog.clear();
    edit(&mut part);
    let log = include_str!("../../../tests/data/torch/gpu_backlog_timeout.run1.log");
    join_one_rank(&part, log)
}

#[test]
fn a_timeout_read_from_pytorch_s_log_names_the_call_of_its_work_as_the_simulator_does() {
    // The stored run's rank: its partial Timeline, written while `.item()` blocked behind
    // the 3 s backlog, by an interpreter that did not yet keep the all_reduce its `wait()`
    // never released as an unfinished collective; the interpreter keeps it now.
    let joined = joined_gpu_backlog_timeout(|part| {
        part.ranks[0]
            .unfinished_collectives
            .push(sim::timeline::UnfinishedCollective {
                iteration: 0,
                op: 1,
                group: 0,
                seq: 1,
                work_seq_num: None,
                bytes: 26_214_400,
                async_op: true,
                call_stream: 0,
                run_stream: 1,
                host_start_ns: 501_274_045,
                host_end_ns: 501_555_588,
                input_ready_ns: None,
                kernel_start_ns: None,
                kernel_end_ns: None,
                wait: None,
            });
    });
    let [finding] = joined.findings.as_slice() else {
        panic!("one finding expected: {:?}", joined.findings)
    };
    assert_eq!(finding.kind, FindingKind::WatchdogTimeout);
    assert_eq!(
        (finding.iteration, finding.op),
        (Some(0), Some(1)),
        "{}",
        finding.message
    );
    // The simulation of the same invocation makes the same finding, so `diff` pairs them.
    let Ok((file, overrides)) = sim::scenario::read_recorded_invocation(&joined.scenario.path)
    else {
        panic!("the run recorded its invocation")
    };
    assert_eq!(file, "scenarios/gpu_backlog_timeout.toml");
    let text = include_str!("../../../scenarios/gpu_backlog_timeout.toml");
    let Ok(text) = sim::sweep::apply_overrides_with_ops(text, &overrides) else {
        panic!("the recorded --sets apply")
    };
    let Ok(scenario) = sim::scenario::parse(&joined.scenario.path, &text) else {
        panic!("{file} parses")
    };
    let simulated = sim::engine::simulate(&scenario);
    let diff = crate::diff::diff(&simulated, &joined, &Default::default());
    assert!(diff.findings_only_in_a.is_empty(), "{diff:?}");
    assert!(diff.findings_only_in_b.is_empty(), "{diff:?}");
    // The stored Timeline as it is holds no record of the Work: the finding names neither,
    // and says why.
    let joined = joined_gpu_backlog_timeout(|_| {});
    let finding = &joined.findings[0];
    assert_eq!((finding.iteration, finding.op), (None, None));
    assert!(
        finding
            .message
            .contains("no op or iteration named: rank 0 has no collective record of the Work with SeqNum=1, OpType=ALLREDUCE"),
        "{}",
        finding.message
    );
}

/// Rank 0's own file of a two-rank job whose all_reduce on the world and all_reduce on the
/// group `pair` are both SeqNum 1, with time 0 at 2026-12-02 09:42:00 UTC.
fn two_groups_rank0() -> Timeline {
    let text = "[cluster]\nranks = 2\n[groups.world]\neager_init = true\n\
                [groups.pair]\nranks = [0, 1]\neager_init = true\n[tensors]\nx = \"1MiB\"\n\
                [[op]]\nlabel = \"ar_world\"\nall_reduce = \"x\"\n\
                [[op]]\nlabel = \"ar_pair\"\nall_reduce = \"x\"\ngroup = \"pair\"\n";
    let mut part = sim::engine::simulate(&sim::scenario::parse("two.toml", text).unwrap());
    part.ranks.retain(|rank| rank.rank == 0);
    part.findings.clear();
    part.watchdog.clear();
    let origin_s: u64 = 20_789 * 86_400 + 9 * 3600 + 42 * 60;
    part.machine.insert(
        "host_origin_unix_ns".to_string(),
        (origin_s * 1_000_000_000).to_string(),
    );
    part
}

#[test]
fn a_timeout_read_from_pytorch_s_log_names_the_call_on_its_group() {
    // The pair's SeqNum 1 timed out; the world's all_reduce is SeqNum 1 too. The line the
    // pair's watchdog prints next carries its prefix (PyTorch 2.11's
    // ProcessGroupNCCL.cpp:2303), the description the interpreter's `group_desc`.
    let log = "[rank0]:[E1202 09:42:40.100000000 ProcessGroupNCCL.cpp:689] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=262144, NumelOut=262144, Timeout(ms)=1000) ran for 1005 milliseconds before timing out.\n\
               [rank0]:[E1202 09:42:40.100100000 ProcessGroupNCCL.cpp:2303] [PG ID 1 PG GUID 1(pair) Rank 0]  failure detected by watchdog at work sequence id: 1 PG status: last enqueued work: 1, last completed work: -1\n";
    let part = two_groups_rank0();
    let op = |name: &str| part.ops.iter().find(|o| o.name == name).map(|o| o.index);
    let joined = join_one_rank(&part, log);
    let [finding] = joined.findings.as_slice() else {
        panic!("one finding expected: {:?}", joined.findings)
    };
    assert_eq!(
        (finding.iteration, finding.op),
        (Some(0), op("ar_pair")),
        "{}",
        finding.message
    );
    let [record] = joined.watchdog.as_slice() else {
        panic!("one record expected: {:?}", joined.watchdog)
    };
    assert_eq!(record.group, Some(1));
}

#[test]
fn each_group_s_timed_out_work_is_a_finding_naming_its_call() {
    // Both groups' watchdogs time their SeqNum 1 out; the line after each, from the group's
    // own watchdog, carries the group's prefix (PyTorch 2.11's ProcessGroupNCCL.cpp:2303),
    // and the pair's desc is its scenario name (the interpreter's `group_desc`).
    let timeout = |ran_ms: u32| {
        format!("[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=262144, NumelOut=262144, Timeout(ms)=1000) ran for {ran_ms} milliseconds before timing out.")
    };
    let failure = "failure detected by watchdog at work sequence id: 1 PG status: last enqueued work: 1, last completed work: -1";
    let log = format!(
        "[rank0]:[E1202 09:42:40.100000000 ProcessGroupNCCL.cpp:689] {}\n\
         [rank0]:[E1202 09:42:40.100100000 ProcessGroupNCCL.cpp:2303] [PG ID 1 PG GUID 1(pair) Rank 0]  {failure}\n\
         [rank0]:[E1202 09:42:40.150000000 ProcessGroupNCCL.cpp:689] {}\n\
         [rank0]:[E1202 09:42:40.150100000 ProcessGroupNCCL.cpp:2303] [PG ID 0 PG GUID 0(default_pg) Rank 0]  {failure}\n",
        timeout(1005),
        timeout(1055),
    );
    let part = two_groups_rank0();
    let op = |name: &str| part.ops.iter().find(|o| o.name == name).map(|o| o.index);
    let joined = join_one_rank(&part, &log);
    let named: Vec<_> = joined
        .findings
        .iter()
        .map(|f| (f.kind, f.iteration, f.op))
        .collect();
    assert_eq!(
        named,
        [
            (FindingKind::WatchdogTimeout, Some(0), op("ar_pair")),
            (FindingKind::WatchdogTimeout, Some(0), op("ar_world"))
        ],
        "{:?}",
        joined.findings
    );
    // The same lines twice (a log read twice) are the same two Works: still two findings.
    let twice = join_one_rank(&part, &format!("{log}{log}"));
    assert_eq!(twice.findings, joined.findings);
}

#[test]
fn a_complete_timeline_gets_no_inferred_exit() {
    let mut part = one_rank_timeline();
    part.machine
        .insert("journal".to_string(), "complete".to_string());
    assert!(!note_unfinished(&mut part, 0, "0"));
    assert!(part.watchdog.is_empty());
}
