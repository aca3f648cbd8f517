use super::*;

/// The one-rank Timeline of `rank`, named as the file it would be read from.
fn part(rank: u32, origin_ns: u64, hash: &str) -> (String, Timeline) {
    let text = "[cluster]\nranks = 2\n[[op]]\nmark = \"m\"\n";
    let scenario = sim::scenario::parse("merge.toml", text).unwrap();
    let mut timeline = Timeline::for_scenario(&scenario, Source::Measured, |kind| {
        sim::nccl::kernel_name(&scenario, kind)
    });
    timeline.scenario.source_hash = hash.to_string();
    timeline
        .machine
        .insert(ORIGIN_KEY.into(), origin_ns.to_string());
    timeline.machine.insert("rank".into(), rank.to_string());
    timeline.machine.insert(
        "clock_alignment_uncertainty_ns".into(),
        (rank + 3).to_string(),
    );
    timeline.ranks.push(sim::timeline::RankTimeline {
        rank,
        marks: vec![sim::timeline::MarkRecord {
            iteration: 0,
            mark: 0,
            host_ns: 100,
            gpu_ns: 150,
        }],
        ..Default::default()
    });
    (format!("part{rank}.json"), timeline)
}

#[test]
fn merged_ranks_share_the_earliest_origin() {
    let merged = merge_ranks(vec![part(1, 5_000, "h"), part(0, 7_000, "h")]).unwrap();
    let ranks: Vec<u32> = merged.ranks.iter().map(|r| r.rank).collect();
    assert_eq!(ranks, [0, 1]);
    assert_eq!(
        merged.ranks[0].marks[0].host_ns, 2_100,
        "rank 0 started 2 µs later"
    );
    assert_eq!(merged.ranks[1].marks[0].gpu_ns, 150);
    assert_eq!(merged.machine[ORIGIN_KEY], "5000");
    assert_eq!(merged.machine["clock_alignment_uncertainty_ns"], "4");
    assert!(!merged.machine.contains_key("rank"));
    let error = |parts| merge_ranks(parts).unwrap_err().to_string();
    assert_eq!(
        error(vec![
            part(0, 1, "h"),
            ("again.json".into(), part(0, 1, "h").1)
        ]),
        "cannot merge rank Timelines: again.json: rank 0 again (also in part0.json)"
    );
    assert!(error(vec![part(0, 1, "h"), part(1, 1, "other")])
        .starts_with("cannot merge rank Timelines: part1.json: scenario merge (hash other) is not part0.json's"));
    let mut no_origin = part(1, 1, "h");
    no_origin.1.machine.remove(ORIGIN_KEY);
    assert!(error(vec![part(0, 1, "h"), no_origin])
        .starts_with("cannot merge rank Timelines: part1.json: no host_origin_unix_ns"));
    let mut bad_origin = part(1, 1, "h");
    bad_origin.1.machine.insert(ORIGIN_KEY.into(), "-5".into());
    assert_eq!(
        error(vec![part(0, 1, "h"), bad_origin]),
        "cannot merge rank Timelines: part1.json: host_origin_unix_ns \"-5\" is not a \
         wall-clock time in Unix ns"
    );
    assert_eq!(
        error(Vec::new()),
        "cannot merge rank Timelines: no Timeline given"
    );
    // Parts a day apart are not one run; a time shifted past u64::MAX is refused, where
    // it used to wrap around; a time that never came stays so.
    assert!(error(vec![
        part(0, 0, "h"),
        part(1, 2 * MAX_ORIGIN_SPREAD_NS, "h")
    ])
    .contains("part1.json: started 172800 s after the first part"));
    let mut late = part(1, 5_000, "h");
    late.1.ranks[0].marks[0].host_ns = u64::MAX - 1_000;
    assert!(error(vec![part(0, 1_000, "h"), late]).contains("is past what a Timeline holds"));
    let mut never = part(1, 5_000, "h");
    never.1.ranks[0].marks[0].gpu_ns = u64::MAX;
    let merged = merge_ranks(vec![part(0, 1_000, "h"), never]).unwrap();
    assert_eq!(merged.ranks[1].marks[0].gpu_ns, u64::MAX);
    assert_eq!(merged.ranks[1].marks[0].host_ns, 4_100);
}

/// A rank with one record of every kind, each time distinct.
fn every_record(rank: u32) -> sim::timeline::RankTimeline {
    use sim::timeline::*;
    RankTimeline {
        rank,
        host: vec![HostCall {
            iteration: 0,
            op: 0,
            start_ns: 1,
            end_ns: 2,
        }],
        kernels: vec![KernelRecord {
            iteration: 0,
            op: 0,
            stream: 0,
            class: KernelClass::Compute,
            enqueue_ns: 3,
            start_ns: 4,
            end_ns: 5,
        }],
        collectives: vec![CollectiveRecord {
            iteration: 0,
            op: 0,
            group: 0,
            seq: 1,
            work_seq_num: None,
            bytes: 4,
            async_op: true,
            call_stream: 0,
            run_stream: 1,
            host_start_ns: 6,
            host_end_ns: 7,
            input_ready_ns: 8,
            kernel_start_ns: 9,
            work_start_ns: Some(10),
            data_start_ns: 11,
            end_ns: 12,
            last_rank: None,
            wait: Some(WaitRecord {
                op: 0,
                host_start_ns: 13,
                host_end_ns: 14,
                stream: 0,
                released_ns: 15,
                completed_at_return: false,
            }),
        }],
        marks: vec![MarkRecord {
            iteration: 0,
            mark: 0,
            host_ns: 16,
            gpu_ns: 17,
        }],
        stream_waits: vec![StreamWaitRecord {
            iteration: 0,
            op: 0,
            source_stream: 0,
            source_ns: 18,
            waiting_stream: 1,
            released_ns: 19,
        }],
        queries: vec![QueryRecord {
            iteration: 0,
            op: 0,
            host_ns: 20,
            completed: true,
        }],
        cache_releases: vec![CacheRelease {
            iteration: 0,
            op: 0,
            host_start_ns: 21,
            host_end_ns: 22,
            device_idle_ns: Some(23),
            segments_freed: 1,
        }],
        unfinished_kernels: vec![UnfinishedKernel {
            iteration: 0,
            op: 0,
            stream: 0,
            class: KernelClass::Communication,
            enqueue_ns: 24,
            start_ns: Some(25),
        }],
        unfinished_host: Some(UnfinishedHostCall {
            iteration: 0,
            op: 0,
            start_ns: 26,
            blocked_on: None,
        }),
        unfinished_stream_waits: vec![UnfinishedStreamWait {
            iteration: 0,
            op: 0,
            source_stream: 0,
            source_ns: Some(27),
            waiting_stream: 1,
        }],
        ..Default::default()
    }
}

#[test]
fn every_time_of_a_later_rank_is_shifted() {
    let (name, mut later) = part(1, 1_000, "h");
    later.ranks[0] = every_record(1);
    let merged = merge_ranks(vec![part(0, 0, "h"), (name, later)]).unwrap();
    let rank = &merged.ranks[1];
    let (host, kernel) = (rank.host[0], rank.kernels[0]);
    assert_eq!((host.start_ns, host.end_ns), (1_001, 1_002));
    assert_eq!(
        (kernel.enqueue_ns, kernel.start_ns, kernel.end_ns),
        (1_003, 1_004, 1_005)
    );
    let c = &rank.collectives[0];
    assert_eq!(
        [
            c.host_start_ns,
            c.host_end_ns,
            c.input_ready_ns,
            c.kernel_start_ns,
            c.data_start_ns,
            c.end_ns
        ],
        [1_006, 1_007, 1_008, 1_009, 1_011, 1_012]
    );
    assert_eq!(c.work_start_ns, Some(1_010));
    let wait = c.wait.unwrap();
    assert_eq!(
        (wait.host_start_ns, wait.host_end_ns, wait.released_ns),
        (1_013, 1_014, 1_015)
    );
    assert_eq!(
        (rank.marks[0].host_ns, rank.marks[0].gpu_ns),
        (1_016, 1_017)
    );
    let stream_wait = rank.stream_waits[0];
    assert_eq!(
        (stream_wait.source_ns, stream_wait.released_ns),
        (1_018, 1_019)
    );
    assert_eq!(rank.queries[0].host_ns, 1_020);
    let release = rank.cache_releases[0];
    assert_eq!(
        (
            release.host_start_ns,
            release.host_end_ns,
            release.device_idle_ns
        ),
        (1_021, 1_022, Some(1_023))
    );
    let unfinished = rank.unfinished_kernels[0];
    assert_eq!(
        (unfinished.enqueue_ns, unfinished.start_ns),
        (1_024, Some(1_025))
    );
    assert_eq!(rank.unfinished_host.unwrap().start_ns, 1_026);
    assert_eq!(rank.unfinished_stream_waits[0].source_ns, Some(1_027));
}

#[test]
fn the_merged_machine_map_keeps_the_largest_uncertainty_and_no_rank_entries() {
    let with = |rank, uncertainty_ns: u64| {
        let (name, mut timeline) = part(rank, 0, "h");
        (timeline.machine).insert(
            "clock_alignment_uncertainty_ns".into(),
            uncertainty_ns.to_string(),
        );
        (timeline.machine).insert("gpu_ordinal".into(), rank.to_string());
        (name, timeline)
    };
    // The largest is neither the first part's nor the last's.
    let merged = merge_ranks(vec![with(0, 4), with(1, 9), with(2, 6)]).unwrap();
    assert_eq!(merged.machine["clock_alignment_uncertainty_ns"], "9");
    assert!(!merged.machine.contains_key("gpu_ordinal"));
    assert!(!merged.machine.contains_key("rank"));
}

#[test]
fn every_part_s_findings_and_watchdog_records_are_kept_on_the_common_axis() {
    use sim::timeline::{Finding, FindingKind, ThreadKind, WatchdogEvent};
    let with_timeout = |rank, origin_ns, at_ns| {
        let (name, mut timeline) = part(rank, origin_ns, "h");
        timeline.findings.push(Finding {
            kind: FindingKind::WatchdogTimeout,
            rank: Some(rank),
            iteration: Some(0),
            op: Some(0),
            stream: None,
            message: format!("[Rank {rank}] timeout"),
            stands_for: Default::default(),
        });
        timeline.watchdog.push(WatchdogRecord {
            rank,
            group: Some(0),
            thread: ThreadKind::Watchdog,
            event: WatchdogEvent::Timeout,
            at_ns,
            message: format!("[Rank {rank}] timeout"),
            stands_for: Default::default(),
        });
        (name, timeline)
    };
    // Rank 0 started 3 µs after rank 1: its record moves 3 µs later, past rank 1's.
    let merged = merge_ranks(vec![
        with_timeout(0, 8_000, 1_000),
        with_timeout(1, 5_000, 2_500),
    ])
    .unwrap();
    let findings: Vec<Option<u32>> = merged.findings.iter().map(|f| f.rank).collect();
    assert_eq!(findings, [Some(0), Some(1)]);
    let records: Vec<(u32, u64)> = (merged.watchdog.iter())
        .map(|record| (record.rank, record.at_ns))
        .collect();
    assert_eq!(records, [(1, 2_500), (0, 4_000)]);
    let mut late = with_timeout(1, 5_000, u64::MAX - 1_000);
    late.0 = "late.json".into();
    assert!(merge_ranks(vec![with_timeout(0, 1_000, 0), late])
        .unwrap_err()
        .to_string()
        .starts_with("cannot merge rank Timelines: late.json: a time of"));
}

#[test]
fn parts_of_another_engine_or_launch_are_refused() {
    let with_world = |rank, world: &str| {
        let (name, mut timeline) = part(rank, 0, "h");
        timeline.machine.insert("world".into(), world.into());
        (name, timeline)
    };
    let error = |parts| merge_ranks(parts).unwrap_err().to_string();
    // A rank run downscaled (rank 0 alone, world 1) beside a rank of a 2-process launch.
    assert_eq!(
        error(vec![with_world(0, "1"), with_world(1, "2")]),
        "cannot merge rank Timelines: part1.json: one process of a launch of 2 \
         (machine.world), not of 1 as part0.json: not the same launch (a downscaled run is \
         rank 0 alone, world 1)"
    );
    let (name, mut torch) = with_world(1, "2");
    torch.source = Source::Torch;
    assert_eq!(
        error(vec![with_world(0, "2"), (name, torch)]),
        "cannot merge rank Timelines: part1.json: a torch Timeline, not measured as part0.json"
    );
    let merged = merge_ranks(vec![with_world(0, "2"), with_world(1, "2")]).unwrap();
    assert_eq!(merged.machine["world"], "2");
    assert!(missing_ranks(&merged).is_empty());
    // Rank 0's file alone of a launch of 2: merged (as `torch` joins the ranks that wrote),
    // with rank 1 named as missing for `hw-merge` to refuse.
    let alone = merge_ranks(vec![with_world(0, "2")]).unwrap();
    assert_eq!(missing_ranks(&alone).named(), "rank 1");
    let mut middle = with_world(1, "4");
    middle.1.scenario.ranks = 4;
    let (name, mut last) = with_world(3, "4");
    last.scenario.ranks = 4;
    let merged = merge_ranks(vec![middle, (name, last)]).unwrap();
    assert_eq!(missing_ranks(&merged).to_string(), "0,2");
    // A rank past its launch's processes (a hand-edited or mixed-up file).
    assert_eq!(
        error(vec![with_world(0, "2"), with_world(5, "2")]),
        "cannot merge rank Timelines: part5.json: rank 5 of a launch of 2 processes \
         (machine.world): no process of that launch"
    );
}

#[test]
fn parts_whose_headers_differ_under_one_hash_or_that_stand_for_others_are_refused() {
    // Found by the `hw_merge` fuzz target: parts with one source hash but another
    // `scenario.ranks` merged into a Timeline that `diff` and `calibrate` refuse to read.
    let error = |parts| merge_ranks(parts).unwrap_err().to_string();
    let (name, mut one_rank) = part(0, 0, "h");
    one_rank.scenario.ranks = 1;
    assert_eq!(
        error(vec![(name, one_rank), part(1, 0, "h")]),
        "cannot merge rank Timelines: part1.json: its scenario.ranks is 2, not 1 as in \
         part0.json's: not parts of one run"
    );
    let (name, mut other_ops) = part(1, 0, "h");
    other_ops.ops[0].line = 7;
    assert_eq!(
        error(vec![part(0, 0, "h"), (name, other_ops)]),
        "cannot merge rank Timelines: part1.json: its ops are not part0.json's: not parts of \
         one run"
    );
    // A folded Timeline's rank that stands for others is no process's part.
    let (name, mut folded) = part(0, 0, "h");
    folded.ranks[0].stands_for = sim::ranks::RankSet::range(0, 1);
    assert_eq!(
        error(vec![(name, folded), part(1, 0, "h")]),
        "cannot merge rank Timelines: part0.json: rank 0 stands for ranks 0-1 (2 ranks), a \
         folded Timeline's: a process of `c10dsim hw` writes its own rank alone"
    );
}

#[test]
fn a_part_holding_two_ranks_is_refused() {
    let (name, mut two) = part(1, 0, "h");
    two.ranks.push(every_record(2));
    let error = merge_ranks(vec![part(0, 0, "h"), (name, two)]).unwrap_err();
    assert_eq!(
        error.to_string(),
        "cannot merge rank Timelines: part1.json: holds 2 ranks, not 1"
    );
    assert_eq!(error.exit_code(), 2);
}

#[test]
fn what_needs_no_gpu_is_checked_without_one() {
    let text = "[cluster]\nranks = 2\n[[op]]\nmark = \"m\"\n";
    let scenario = sim::scenario::parse("two.toml", text).unwrap();
    let launched = |rank, world_size| HwOptions {
        launch: Some(LaunchEnv {
            rank,
            world_size,
            local_rank: rank,
            launcher: &TORCHRUN,
            local_rank_set: true,
        }),
        rendezvous_dir: std::env::temp_dir()
            .join(format!("c10dsim-hw-absent-{}", std::process::id())),
        ..HwOptions::default()
    };
    let error = check_without_gpu(&scenario, &launched(0, 3)).unwrap_err();
    assert!(
        error
            .to_string()
            .contains("the scenario has 2 ranks but torchrun started 3"),
        "{error}"
    );
    let error = check_without_gpu(&scenario, &launched(1, 2)).unwrap_err();
    assert!(
        error.to_string().contains("C10DSIM_RENDEZVOUS_DIR"),
        "{error}"
    );
    // Downscaled, the ranks exchange no id: the folder does not matter.
    let alone = HwOptions {
        downscale: Downscale::RankZero(StandIn::Nccl),
        ..launched(0, 1)
    };
    check_without_gpu(&scenario, &alone).unwrap();
}

#[test]
fn a_send_on_an_eager_world_s_communicator_is_refused_before_the_gpu_r11() {
    // PyTorch runs it on the world's communicator and stream; hw makes pair communicators.
    let text = "[cluster]\nranks = 2\n[groups.world]\neager_init = true\n[tensors]\nx = \"1MiB\"\n\
        [[op]]\nall_reduce = \"x\"\n\
        [[op]]\nranks = [0]\nsend = \"x\"\npeer = 1\n[[op]]\nranks = [1]\nrecv = \"x\"\npeer = 0\n";
    let alone = HwOptions {
        downscale: Downscale::RankZero(StandIn::Nccl),
        ..HwOptions::default()
    };
    let scenario = sim::scenario::parse("eager.toml", text).unwrap();
    let error = check_without_gpu(&scenario, &alone).unwrap_err();
    assert!(
        error
            .to_string()
            .contains("eagerly created world's communicator"),
        "{error}"
    );
    // The refusal names the rank's first send or receive and its line, as a fault's does.
    assert!(
        (error.to_string()).contains("send \"send#1\" (line 9) and the other sends"),
        "{error}"
    );
    let lazy = sim::scenario::parse("lazy.toml", &text.replace("eager_init = true\n", "")).unwrap();
    check_without_gpu(&lazy, &alone).unwrap();
}

#[test]
fn run_facts_describe_the_downscale() {
    let layout = Layout {
        rank: 0,
        world: 1,
        device: 0,
        launched: false,
        stand_in: Some(StandIn::Spin { duration_ns: 5_000 }),
    };
    let anchor = clock::ClockAnchor {
        host_ns: 0,
        uncertainty_ns: 4,
        sample: 0,
    };
    let clock = clock::ClockMap::new(anchor, anchor, 0.0);
    let facts: std::collections::BTreeMap<String, String> =
        run_facts(&layout, clock, 1_700_000_000_000_000_000)
            .into_iter()
            .collect();
    assert_eq!(
        facts["downscale"],
        "rank 0 alone; collectives: 5000 ns spin kernels"
    );
    assert_eq!(facts["clock_alignment_uncertainty_ns"], "4");
    assert_eq!(facts["gpu_clock_drift_ppm"], "+0.00");
    assert_eq!(facts[ORIGIN_KEY], "1700000000000000000");
}
