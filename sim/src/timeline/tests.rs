//! Unit tests of the Timeline: reading back, the reference and size checks of a file.

use super::*;

fn simulated() -> Timeline {
    let scenario = crate::scenario::parse(
        "t.toml",
        "[cluster]\nranks = 2\n[tensors]\nt = \"1MiB\"\n[[op]]\nmark = \"a\"\n\
         [[op]]\nall_reduce = \"t\"\nasync_op = true\nwork = \"w\"\n[[op]]\nwait = \"w\"\n\
         [[op]]\nmark = \"b\"\n",
    )
    .unwrap();
    crate::engine::simulate(&scenario)
}

#[test]
fn a_simulated_timeline_reads_back() {
    let timeline = simulated();
    let text = serde_json::to_string(&timeline).unwrap();
    assert_eq!(Timeline::from_json(&text).unwrap(), timeline);
}

#[test]
fn sizes_a_scenario_cannot_have_are_refused_before_anything_expands() {
    let refused = |edit: &dyn Fn(&mut Timeline), expected: &str| {
        let mut timeline = simulated();
        edit(&mut timeline);
        let error = timeline.check_references().unwrap_err();
        assert!(error.contains(expected), "{error}");
    };
    refused(
        &|t| t.scenario.ranks = 1 << 31,
        "scenario.ranks is 2147483648",
    );
    refused(&|t| t.scenario.ranks = 0, "scenario.ranks is 0");
    refused(&|t| t.scenario.repeat = u32::MAX, "scenario.repeat is");
    refused(&|t| t.scenario.repeat = 0, "scenario.repeat is 0");
    refused(
        &|t| t.scenario.warmup = t.scenario.repeat,
        "one measured after the warmup",
    );
    refused(
        &|t| t.format = "c10dsim-timeline/2".into(),
        "format is \"c10dsim-timeline/2\"",
    );
    refused(&|t| t.scenario.warmup = u32::MAX, "scenario.warmup is");
    refused(
        &|t| t.ranks[1].stands_for = RankSet::range(1, u32::MAX),
        "is not below scenario.ranks = 2",
    );
    refused(&|t| t.ranks[0].rank = 2, "rank 2 (of ranks[]");
    refused(
        &|t| t.ranks[0].stands_for = RankSet::range(0, 1),
        "stand for 3 ranks",
    );
    refused(
        &|t| t.ranks[0].stands_for = RankSet::range(1, 0),
        "not ascending, disjoint",
    );
    let mut folded = simulated();
    folded.ranks.truncate(1);
    folded.ranks[0].stands_for = RankSet::range(0, 1);
    assert_eq!(folded.check_references(), Ok(()));
}

#[test]
fn out_of_range_indices_are_refused_with_the_record_named() {
    let mut timeline = simulated();
    timeline.ranks[1].host[0].op = 99;
    let error = timeline.check_references().unwrap_err();
    assert_eq!(
        error,
        "ranks[1] (rank 1): op 99 is out of range (the Timeline has 4)"
    );

    let mut timeline = simulated();
    timeline.ranks[0].marks[0].mark = 7;
    assert!(timeline.check_references().unwrap_err().contains("mark 7"));

    let mut timeline = simulated();
    timeline.ranks[0].collectives[0].group = 3;
    assert!(timeline.check_references().unwrap_err().contains("group 3"));

    let mut timeline = simulated();
    timeline.ranks[0].kernels[0].stream = 40;
    assert!(timeline
        .check_references()
        .unwrap_err()
        .contains("stream 40"));

    let mut timeline = simulated();
    let wait = timeline.ranks[0].collectives[0].wait.as_mut().unwrap();
    wait.op = 1000;
    assert!(timeline.check_references().unwrap_err().contains("op 1000"));
}

#[test]
fn a_damaged_summary_is_refused_with_the_record_named() {
    let scenario = crate::scenario::parse(
        "t.toml",
        "repeat = 3\n[cluster]\nranks = 2\n[tensors]\nt = \"1MiB\"\n[[op]]\n\
         all_reduce = \"t\"\nasync_op = true\nwork = \"w\"\n[[op]]\nis_completed = \"w\"\n\
         [[op]]\nwait = \"w\"\n[[op]]\ngemm = [64, 64, 64]\n",
    )
    .unwrap();
    let options = crate::engine::Options {
        summary: Some(RecordSelection::default()),
        ..crate::engine::Options::default()
    };
    let summarised = crate::engine::simulate_with(&scenario, options).0;
    assert_eq!(summarised.check_references(), Ok(()));
    let refused = |edit: &dyn Fn(&mut TimelineSummary), expected: &str| {
        let mut timeline = summarised.clone();
        edit(timeline.summary.as_mut().unwrap());
        let error = timeline.check_references().unwrap_err();
        assert!(error.contains(expected), "{error}");
    };
    refused(
        &|s| s.collectives[0].op = 99,
        "summary.collectives[0]: op 99 is out of range (the Timeline has 4)",
    );
    refused(&|s| s.kernels[0].op = 99, "summary.kernels[0]: op 99");
    refused(&|s| s.queries[0].op = 99, "summary.queries[0]: op 99");
    refused(
        &|s| s.queries[0].calls = 0,
        "summary.queries[0]: 0 of 0 calls completed",
    );
    refused(
        &|s| s.collectives[0].kernel.count += 1,
        "summary.collectives[0].kernel: count is 7 but its values are counted 6 times",
    );
    refused(
        &|s| s.collectives[0].host_call.values.reverse(),
        "not in ascending order",
    );
    refused(
        &|s| s.collectives[0].completed_at_return = u64::MAX,
        "summary.collectives[0].completed_at_return",
    );
    refused(
        &|s| s.collectives[0].last_ranks = vec![(2, 1)],
        "rank 2 counted 1 times",
    );
}

#[test]
fn a_kernel_that_ends_before_it_starts_is_refused() {
    let mut timeline = simulated();
    let kernel = &mut timeline.ranks[0].kernels[0];
    kernel.end_ns = kernel.start_ns.wrapping_sub(1);
    assert!(timeline
        .check_references()
        .unwrap_err()
        .contains("a kernel ends at"));
}

#[test]
fn a_finding_narrowed_to_some_of_its_ranks_names_only_their_group_ranks_r29() {
    // Ranks 3, 5 and 7 of a group [1, 3, 5, 7] whose root died: their group ranks 1-3. Narrowed
    // to ranks 5 and 7 (`diff`: only they lack it on the other side), it once still said
    // `[1-3]` after their `[Rank 5]`.
    let store_timeout = |rank: u32, stands_for: RankSet, group_ranks: &str| {
        Finding {
        kind: FindingKind::StoreTimeout,
        rank: Some(rank),
        iteration: Some(0),
        op: Some(0),
        stream: None,
        message: format!("[Rank {rank}] DistBackendError: [{group_ranks}] is setting up NCCL communicator and retrieving ncclUniqueId from [0] via c10d key-value store by key '0'"),
        stands_for,
    }
    };
    let class = store_timeout(3, RankSet::from_ranks([3, 5, 7]), "1-3");
    assert_eq!(
        class.narrowed_to(RankSet::from_ranks([5, 7])),
        store_timeout(5, RankSet::from_ranks([5, 7]), "2-3")
    );
    assert_eq!(
        class.narrowed_to(RankSet::from_ranks([3, 7])),
        store_timeout(3, RankSet::from_ranks([3, 7]), "1,3")
    );
    assert_eq!(
        class.narrowed_to(RankSet::from_ranks([7])),
        store_timeout(7, RankSet::default(), "3")
    );
    // A message that names no group ranks keeps all but its `[Rank r]`.
    let other = Finding {
        message: "[Rank 3] Watchdog caught collective operation timeout".into(),
        ..class
    };
    assert_eq!(
        other.narrowed_to(RankSet::from_ranks([5])).message,
        "[Rank 5] Watchdog caught collective operation timeout"
    );
}

#[test]
fn a_watchdog_record_s_ranks_are_those_it_stands_for_else_its_own() {
    let record = |rank: u32, stands_for: RankSet| WatchdogRecord {
        rank,
        group: Some(0),
        thread: ThreadKind::Main,
        event: WatchdogEvent::WaitError,
        at_ns: 5,
        message: format!("[Rank {rank}] Work failed"),
        stands_for,
    };
    assert_eq!(
        record(4, RankSet::default()).ranks(),
        RankSet::from_ranks([4])
    );
    let class = RankSet::from_ranks([2, 3, 4, 9]);
    assert_eq!(record(2, class.clone()).ranks(), class);
}

#[test]
fn a_finding_s_ranks_are_those_it_stands_for_else_its_own_else_none() {
    let finding = |rank: Option<u32>, stands_for: RankSet| Finding {
        kind: FindingKind::AsyncError,
        rank,
        iteration: None,
        op: None,
        stream: None,
        message: String::new(),
        stands_for,
    };
    assert_eq!(
        finding(Some(1), RankSet::default()).ranks(),
        RankSet::from_ranks([1])
    );
    let class = RankSet::from_ranks([1, 2, 7]);
    assert_eq!(finding(Some(1), class.clone()).ranks(), class);
    assert!(finding(None, RankSet::default()).ranks().is_empty());
}

#[test]
fn threads_and_events_display_as_the_timeline_names_them() {
    for thread in [
        ThreadKind::Main,
        ThreadKind::Watchdog,
        ThreadKind::HeartbeatMonitor,
    ] {
        assert_eq!(
            serde_json::to_value(thread).unwrap(),
            thread.to_string().as_str()
        );
    }
    for (event, name) in [
        (WatchdogEvent::WaitError, "wait_error"),
        (WatchdogEvent::AbortReturned, "abort_returned"),
        (WatchdogEvent::HeartbeatTimeout, "heartbeat_timeout"),
    ] {
        assert_eq!(event.to_string(), name);
    }
}

/// `diff`, `calibrate` and the replays expand a folded Timeline to every rank: its expanded
/// size is found without expanding, within the ranks' digits of the expansion's own, for a
/// hang's folded dumps too (each copied to every rank of its class, sharing its lists of its
/// groups' ranks, which count once).
#[test]
fn the_expanded_size_is_found_without_expanding() {
    let lists = |dumps: &[crate::flight_recorder::FlightRecorderDump]| -> usize {
        (dumps.iter().flat_map(|dump| &dump.groups))
            .map(|group| serde_json::to_string(&group.ranks).unwrap().len())
            .sum()
    };
    for text in [
        "repeat = 50\n[cluster]\nranks = 64\n[[op]]\nhost_sleep_us = 1\n",
        "[cluster]\nranks = 64\n[tensors]\nt = \"1MiB\"\n[[op]]\nlabel = \"ar\"\n\
         all_reduce = \"t\"\n[[op]]\nitem = \"t\"\n[[fault]]\nranks = [1]\nat = \"ar\"\n\
         kind = \"hang\"\n",
    ] {
        let scenario = crate::scenario::parse("t.toml", text).unwrap();
        let folded = crate::engine::simulate_with(&scenario, Default::default()).0;
        assert!(folded.is_folded());
        let expanded = folded.expand();
        let expanded_bytes = (serde_json::to_string(&expanded).unwrap().len()
            - lists(&expanded.flight_recorder)
            + lists(&folded.flight_recorder)) as u64;
        let estimate = folded.expanded_bytes();
        assert!(
            estimate * 10 > expanded_bytes * 9 && estimate * 10 < expanded_bytes * 11,
            "{estimate} against {expanded_bytes}"
        );
        assert!(estimate > 10 * serde_json::to_string(&folded).unwrap().len() as u64);
    }
}
