//! `diff`'s comparisons on small simulated Timelines.

use super::*;
use sim::scenario::{parse, Override};
use sim::sweep::apply_overrides_with_ops;

/// Two ranks: an all_reduce waited on the default stream; a sleep and a mark on a side
/// stream, a kernel and a mark on the default one.
const SCENARIO: &str = "repeat = 4\nwarmup = 1\n[cluster]\nranks = 2\n[tensors]\nx = \"64MiB\"\n\
    [streams]\nside = {}\n\
    [[op]]\nlabel = \"side_sleep\"\ngpu_sleep_us = 50\nstream = \"side\"\n\
    [[op]]\nmark = \"side_done\"\nstream = \"side\"\n\
    [[op]]\nlabel = \"main_kernel\"\nkernel = { us = 200, sms = 8 }\n\
    [[op]]\nmark = \"main_done\"\n\
    [[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\nasync_op = true\nwork = \"w\"\n\
    [[op]]\nlabel = \"wait\"\nwait = \"w\"\n";

fn simulate(overrides: &[&str]) -> Timeline {
    let overrides: Vec<Override> = overrides
        .iter()
        .map(|o| Override::parse(o).unwrap())
        .collect();
    let text = apply_overrides_with_ops(SCENARIO, &overrides).unwrap();
    sim::engine::simulate(&parse("diff.toml", &text).unwrap())
}

#[test]
fn a_timeline_against_itself_is_identical() {
    let a = simulate(&[]);
    let result = diff(&a, &a, &DiffOptions::default());
    assert!(result.identical && result.within_tolerance(), "{result:#?}");
    assert!(result.order_pairs > 0);
    assert_eq!(result.order_pairs, result.order_pairs_agreeing);
    assert!(result.worst_ops.is_empty());
}

#[test]
fn records_missing_on_one_side_are_not_identical() {
    let a = simulate(&[]);
    // Rank 1's records gone: its ops ran in A only.
    let mut b = a.clone();
    b.ranks.retain(|r| r.rank == 0);
    let result = diff(&a, &b, &DiffOptions::default());
    assert!(
        !result.identical && !result.within_tolerance(),
        "{result:#?}"
    );
    assert_eq!(
        (
            result.ranks_only_in_a.clone(),
            result.ranks_only_in_b.clone()
        ),
        (vec![1], vec![])
    );
    assert!(render_diff(&result).contains("rank(s) 1 ran ops in A only"));
    // No rank at all on one side: not "identical", and nothing said to be compared.
    let mut empty = a.clone();
    empty.ranks.clear();
    let result = diff(&empty, &a, &DiffOptions::default());
    assert!(!result.identical && !result.within_tolerance());
    assert_eq!(result.ranks_only_in_b, [0, 1]);
    // One measured iteration of rank 0's kernel op missing in B.
    let mut c = a.clone();
    let kernel_op = op_index(&a, "main_kernel");
    c.ranks[0]
        .host
        .retain(|h| !(h.op == kernel_op && h.iteration == 2));
    c.ranks[0]
        .kernels
        .retain(|k| !(k.op == kernel_op && k.iteration == 2));
    let result = diff(&a, &c, &DiffOptions::default());
    assert!(!result.identical);
    assert_eq!(result.calls_only_in_a, [(0, "main_kernel".to_string(), 1)]);
    assert!(render_diff(&result)
        .contains("op main_kernel (rank 0): 1 measured iteration(s) ran in A only"));
}

#[test]
fn a_summarised_timeline_missing_records_by_design_is_not_a_difference() {
    let text = apply_overrides_with_ops(SCENARIO, &[]).unwrap();
    let scenario = parse("diff.toml", &text).unwrap();
    let whole = sim::engine::simulate(&scenario);
    let options = sim::engine::Options {
        summary: Some(sim::timeline::RecordSelection::parse("none").unwrap()),
        ..sim::engine::Options::default()
    };
    let summarised = sim::engine::simulate_with(&scenario, options).0;
    let result = diff(&summarised, &whole, &DiffOptions::default());
    assert!(result.ranks_only_in_b.is_empty() && result.calls_only_in_b.is_empty());
    assert!(result.within_tolerance(), "{:?}", result.exceeded);
    assert!(result.summarised);
    assert!(!diff(&whole, &whole, &DiffOptions::default()).summarised);
    // The whole Timeline kept every record: the report does not say that neither side did.
    let one = render_diff(&result);
    assert!(!one.contains("neither"), "{one}");
    assert!(
        one.contains("no op kept its records on both sides"),
        "{one}"
    );
    // Two summarised Timelines: ops ran, but neither kept a record; the report says why
    // nothing was compared op by op, and what "identical" covers.
    let both = render_diff(&diff(&summarised, &summarised, &DiffOptions::default()));
    assert!(!both.contains("no op ran"), "{both}");
    assert!(
        both.contains(
            "a summarised Timeline (--summary) keeps only the records --records-for names"
        ),
        "{both}"
    );
    assert!(
        both.contains("identical in what was compared: no differences"),
        "{both}"
    );
}

#[test]
fn timelines_where_no_op_ran_say_nothing_was_compared() {
    let mut a = simulate(&[]);
    for rank in &mut a.ranks {
        rank.host.clear();
        rank.kernels.clear();
        rank.collectives.clear();
    }
    let text = render_diff(&diff(&a, &a, &DiffOptions::default()));
    assert!(text.contains("no op ran in either Timeline"), "{text}");
    let no_samples = text.lines().find(|l| l.contains("host_return")).unwrap();
    assert_eq!(
        no_samples.split_whitespace().collect::<Vec<_>>(),
        ["host_return", "0", "-", "-", "-"],
        "{text}"
    );
    let full = simulate(&[]);
    let text = render_diff(&diff(&full, &full, &DiffOptions::default()));
    assert!(!text.contains("no op ran"), "{text}");
}

#[test]
fn half_the_bandwidth_moves_the_collective_and_its_metrics() {
    let a = simulate(&[]);
    let b = simulate(&["network.nvlink_gbps=225"]);
    let result = diff(&a, &b, &DiffOptions::default());
    assert!(!result.within_tolerance());
    let kernel = result
        .metrics
        .iter()
        .find(|m| m.metric == "ar.kernel_us")
        .unwrap();
    assert!(kernel.exceeds && kernel.ratio.unwrap() > 1.8, "{kernel:?}");
    assert!(
        result
            .exceeded
            .iter()
            .any(|e| e.starts_with("op ar (ranks 0-1; 2 ranks): gpu_end")),
        "{:#?}",
        result.exceeded
    );
    // In µs, as the text's other lines (the JSON's `unit` stays `us`).
    let line = result
        .exceeded
        .iter()
        .find(|e| e.starts_with("metric ar.kernel_us: "))
        .expect("the kernel's metric moved");
    assert!(line.contains(" µs (×") && !line.contains(" us"), "{line}");
    assert_eq!(kernel.unit, "us");
    assert_eq!(result.worst_ops[0].op, "ar");
    // The mark GPU times did not move, so no order changed.
    assert!(result.order_disagreements.is_empty());
}

#[test]
fn an_order_that_flips_is_a_verdict() {
    let a = simulate(&[]);
    // The side stream's sleep now outlasts the default stream's kernel.
    let b = simulate(&["op.side_sleep.gpu_sleep_us=500"]);
    let result = diff(&a, &b, &DiffOptions::default());
    let flipped = result
        .order_disagreements
        .iter()
        .find(|v| v.first == "mark:side_done" && v.second == "mark:main_done")
        .expect("the marks' order flipped");
    assert_eq!((flipped.a, flipped.b), (Order::Before, Order::After));
    assert_eq!(
        (flipped.a_before, flipped.a_iterations, flipped.b_before),
        (3, 3, 0)
    );
    assert!(
        result
            .exceeded
            .iter()
            .any(|e| e
                .starts_with("order (ranks 0-1; 2 ranks): mark:side_done before mark:main_done"))
    );
}

#[test]
fn events_within_the_tie_have_no_order() {
    assert_eq!(verdict(3, 0, 3), Order::Before);
    assert_eq!(verdict(0, 2, 3), Order::After);
    assert_eq!(verdict(1, 1, 3), Order::Unsettled);
    let unsettled = OrderVerdict {
        rank: 0,
        first: "a".into(),
        second: "b".into(),
        a: Order::Before,
        b: Order::Unsettled,
        a_before: 3,
        a_iterations: 3,
        b_before: 1,
        b_iterations: 3,
    };
    assert!(!unsettled.disagrees());
}

#[test]
fn tolerances_need_both_the_share_and_the_microseconds() {
    let options = DiffOptions {
        tolerance_pct: 10.0,
        tolerance_us: 10.0,
        ..DiffOptions::default()
    };
    assert!(!exceeds_us(&options, 5.0, 12.0), "7 µs is under 10 µs");
    assert!(!exceeds_us(&options, 1000.0, 1050.0), "5% is under 10%");
    assert!(exceeds_us(&options, 1000.0, 1200.0));
    assert!(exceeds_fraction(&options, 0.4, 0.0));
    assert!(!exceeds_fraction(&options, 0.4, 0.45));
}

#[test]
fn a_finding_on_one_side_only_is_reported() {
    let a = simulate(&[]);
    let mut b = a.clone();
    b.findings.push(Finding {
        stands_for: Default::default(),
        kind: sim::timeline::FindingKind::Deadlock,
        rank: Some(1),
        iteration: Some(2),
        op: Some(4),
        stream: None,
        message: "rank 1 never joined ar".into(),
    });
    let result = diff(&a, &b, &DiffOptions::default());
    assert_eq!(result.findings_only_in_b.len(), 1);
    assert!(result.findings_only_in_a.is_empty());
    assert!(!result.identical && !result.within_tolerance());
}

/// The index of the op named `name` in `timeline`.
fn op_index(timeline: &Timeline, name: &str) -> u32 {
    let op = timeline.ops.iter().find(|op| op.name == name);
    op.unwrap_or_else(|| panic!("no op {name}")).index
}

/// A watchdog timeout of `rank` at op 4 of iteration 1, standing for `stands_for`.
fn watchdog_timeout_finding(rank: u32, stands_for: sim::ranks::RankSet) -> Finding {
    Finding {
        stands_for,
        kind: sim::timeline::FindingKind::WatchdogTimeout,
        rank: Some(rank),
        iteration: Some(1),
        op: Some(4),
        stream: None,
        message: format!("[Rank {rank}] Watchdog caught collective operation timeout"),
    }
}

/// A finding made once for a class of ranks (`stands_for`) is each member's: against a run
/// that holds one finding per rank (measured, or `--detail ranks`) nothing differs, and a
/// member whose finding is missing there still is a difference.
#[test]
fn a_finding_standing_for_several_ranks_matches_one_finding_per_rank() {
    let finding = watchdog_timeout_finding;
    let mut folded = simulate(&[]);
    folded
        .findings
        .push(finding(0, sim::ranks::RankSet::range(0, 1)));
    let mut per_rank = simulate(&[]);
    per_rank.findings = vec![
        finding(0, Default::default()),
        finding(1, Default::default()),
    ];
    let result = diff(&folded, &per_rank, &DiffOptions::default());
    assert!(
        result.findings_only_in_a.is_empty() && result.findings_only_in_b.is_empty(),
        "{result:#?}"
    );
    assert!(
        result.identical && result.within_tolerance(),
        "{:?}",
        result.exceeded
    );

    per_rank.findings.truncate(1);
    let result = diff(&folded, &per_rank, &DiffOptions::default());
    assert_eq!(result.findings_only_in_a.len(), 1);
    assert!(result.findings_only_in_b.is_empty());
    assert!(!result.within_tolerance());
    // The finding names the member that lacks it (rank 1), not the class's lowest rank.
    assert_eq!(result.findings_only_in_a[0], finding(1, Default::default()));
    assert!(
        render_diff(&result).contains(
            "finding only in A: watchdog_timeout: [Rank 1] Watchdog caught collective operation timeout\n"
        ),
        "{}",
        render_diff(&result)
    );
}

/// A diff of two folded runs names every rank a finding of one side only stands for, those
/// the other side lacks, and prints the findings of several classes that differ only in their
/// `[Rank r]` as one line, as the report does (docs/scale.md).
#[test]
fn findings_of_one_side_name_the_ranks_that_lack_them() {
    let finding = watchdog_timeout_finding;
    let ranks = |list: &[u32]| sim::ranks::RankSet::from_ranks(list.iter().copied());
    // A: classes {0, 2, 4} and {1, 5}; B: rank 3 joined the first class, rank 2 and rank 5
    // hung (no finding).
    let mut a = simulate(&[]);
    a.findings = vec![finding(0, ranks(&[0, 2, 4])), finding(1, ranks(&[1, 5]))];
    let mut b = simulate(&[]);
    b.findings = vec![
        finding(0, ranks(&[0, 3, 4])),
        finding(1, Default::default()),
    ];
    let result = diff(&a, &b, &DiffOptions::default());
    assert_eq!(
        result.findings_only_in_a,
        vec![
            finding(2, Default::default()),
            finding(5, Default::default())
        ]
    );
    assert_eq!(
        result.findings_only_in_b,
        vec![finding(3, Default::default())]
    );
    let text = render_diff(&result);
    assert!(
        text.contains(
            "finding only in A: watchdog_timeout: [Ranks 2,5 (2 ranks)] Watchdog caught collective operation timeout\n"
        ) && text.contains(
            "finding only in B: watchdog_timeout: [Rank 3] Watchdog caught collective operation timeout\n"
        ),
        "{text}"
    );
    assert!(
        result
            .exceeded
            .contains(&"finding only in A: watchdog_timeout: [Ranks 2,5 (2 ranks)] Watchdog caught collective operation timeout".to_string()),
        "{:?}",
        result.exceeded
    );
}

/// Differences that are the same on many ranks (a folded run's class) are one line naming the
/// ranks, not a line per rank: a diff at 100,000 ranks stays a few lines.
#[test]
fn differences_alike_on_many_ranks_are_one_line() {
    let a = simulate(&["cluster.ranks=6"]);
    let kernel_op = op_index(&a, "main_kernel");
    let mut b = a.clone();
    for rank in &mut b.ranks {
        for kernel in rank.kernels.iter_mut().filter(|k| k.op == kernel_op) {
            kernel.start_ns += 100_000;
            kernel.end_ns += 100_000;
        }
    }
    for rank in b
        .ranks
        .iter_mut()
        .filter(|r| [0, 1, 2, 4].contains(&r.rank))
    {
        rank.host
            .retain(|h| !(h.op == kernel_op && h.iteration == 2));
        rank.kernels
            .retain(|k| !(k.op == kernel_op && k.iteration == 2));
    }
    let result = diff(&a, &b, &DiffOptions::default());
    let lines = |needle: &str| {
        result
            .exceeded
            .iter()
            .filter(|line| line.contains(needle))
            .cloned()
            .collect::<Vec<_>>()
    };
    assert_eq!(
        lines("ran in A only"),
        ["op main_kernel (ranks 0-2,4; 4 ranks): 1 measured iteration(s) ran in A only"]
    );
    let shifted = lines("op main_kernel (ranks 0-5; 6 ranks): gpu_start +100.0 µs");
    assert_eq!(shifted.len(), 1, "{:#?}", result.exceeded);
    assert!(lines("(rank 0)").is_empty(), "{:#?}", result.exceeded);

    b.ranks.retain(|r| r.rank < 3);
    let result = diff(&a, &b, &DiffOptions::default());
    assert!(
        render_diff(&result).contains("rank(s) 3-5 ran ops in A only"),
        "{}",
        render_diff(&result)
    );
}

#[test]
fn a_fraction_that_moved_is_written_bare() {
    let overlap = MetricDelta {
        metric: "overlap.none".into(),
        unit: "fraction".into(),
        a: 0.88,
        b: 0.52,
        ratio: Some(0.52 / 0.88),
        error_pct: Some(40.9),
        exceeds: true,
    };
    assert_eq!(
        metric_line(&overlap),
        "metric overlap.none: 0.880 → 0.520 (×0.591)"
    );
}

/// `ranks` ranks whose all_reduce `ar` is waited on, then `.item()`; `hung` hangs before `op`.
fn hang(ranks: u32, hung: u32, op: &str) -> Timeline {
    let text = format!(
        "[cluster]\nranks = {ranks}\n[groups.world]\neager_init = true\n[tensors]\ng = \"1MiB\"\n\
         [[op]]\nlabel = \"ar\"\nall_reduce = \"g\"\nasync_op = true\nwork = \"w\"\n\
         [[op]]\nlabel = \"wait\"\nwait = \"w\"\n\
         [[op]]\nlabel = \"loss\"\nitem = \"g\"\n\
         [[fault]]\nranks = [{hung}]\nat = \"{op}\"\nkind = \"hang\"\n"
    );
    sim::engine::simulate(&parse("hang.toml", &text).unwrap()).expand()
}

/// The lines of `result.exceeded` about unfinished records.
fn unfinished_lines(result: &Diff) -> Vec<String> {
    (result.exceeded.iter())
        .filter(|line| line.starts_with("unfinished"))
        .cloned()
        .collect()
}

/// Where each rank stopped is compared: a host call left open, the iteration, the collectives,
/// kernels and stream waits that never finished, each on one side only, is a difference even
/// where every completed record and finding agrees.
#[test]
fn where_the_ranks_stopped_is_compared() {
    let a = hang(4, 3, "ar");
    let result = diff(&a, &a, &DiffOptions::default());
    assert!(result.identical && result.within_tolerance(), "{result:#?}");
    assert!(render_diff(&result).contains("where the ranks stopped: 4/4 ranks agree"));

    // Rank 0's process ended (or was captured) with nothing left open on B's side.
    let mut b = a.clone();
    let rank = &mut b.ranks[0];
    rank.unfinished_host = None;
    rank.unfinished_iteration = None;
    rank.unfinished_collectives.clear();
    rank.unfinished_kernels.clear();
    rank.unfinished_stream_waits.clear();
    let result = diff(&a, &b, &DiffOptions::default());
    assert!(!result.identical && !result.within_tolerance());
    assert_eq!(
        unfinished_lines(&result),
        [
            "unfinished host call (rank 0): A loss (iteration 0), blocked on stream default; B none",
            "unfinished iteration (rank 0): A 0; B none",
            "unfinished collective (rank 0): ar (iteration 0, world seq 1) in A only",
            "unfinished kernel (rank 0): ar (iteration 0, stream nccl:world, communication, started) in A only",
            "unfinished stream wait (rank 0): wait (iteration 0, stream default waiting on nccl:world) in A only",
        ],
        "{:#?}",
        result.exceeded
    );
    let text = render_diff(&result);
    assert!(
        text.contains("where the ranks stopped: 3/4 ranks agree"),
        "{text}"
    );
    assert_eq!(
        (
            result.unfinished_ranks,
            result.unfinished_disagreements.len()
        ),
        (4, 5)
    );
    let host = &result.unfinished_disagreements[0];
    assert_eq!(
        (host.rank, host.record.as_str(), host.b.as_deref()),
        (0, "host", None)
    );
    // Timelines that leave nothing unfinished say nothing of it.
    let whole = simulate(&[]);
    let text = render_diff(&diff(&whole, &whole, &DiffOptions::default()));
    assert!(!text.contains("where the ranks stopped"), "{text}");
}

/// The same disagreement on many ranks is one line; another rank stuck elsewhere is its own.
#[test]
fn ranks_stopped_alike_are_one_line() {
    // A: rank 7 hangs before the all_reduce, the others block in `.item()`; B: rank 7 hangs
    // before `.item()`, so the all_reduce completes and the others block nowhere but in it.
    let a = hang(8, 7, "ar");
    let b = hang(8, 7, "loss");
    let result = diff(&a, &b, &DiffOptions::default());
    let lines = unfinished_lines(&result);
    assert!(
        lines.contains(
            &"unfinished collective (ranks 0-6; 7 ranks): ar (iteration 0, world seq 1) in A only"
                .to_string()
        ),
        "{lines:#?}"
    );
    assert!(lines.iter().all(|l| !l.contains("(rank 0)")), "{lines:#?}");
    assert!(!result.within_tolerance());
    // The JSON keeps one entry per rank.
    let collectives = (result.unfinished_disagreements.iter())
        .filter(|d| d.record == "collective")
        .count();
    assert_eq!(collectives, 7);
}

/// Against a `torch` Timeline, what its interpreter cannot see is not a difference: NCCL's
/// kernels, what a collective's own call blocks on (`blocked_on` null), whether a wait is
/// in the abort.
#[test]
fn what_a_torch_timeline_cannot_see_is_not_compared() {
    let a = hang(2, 1, "ar");
    let mut b = a.clone();
    b.source = sim::timeline::Source::Torch;
    for rank in &mut b.ranks {
        rank.unfinished_kernels
            .retain(|k| k.class != sim::timeline::KernelClass::Communication);
        if let Some(call) = &mut rank.unfinished_host {
            call.blocked_on = None;
        }
    }
    let result = diff(&a, &b, &DiffOptions::default());
    assert!(result.unfinished_disagreements.is_empty(), "{result:#?}");
    // What it can see still counts: the iteration.
    b.ranks[0].unfinished_host.as_mut().unwrap().iteration = 1;
    let result = diff(&a, &b, &DiffOptions::default());
    assert_eq!(
        unfinished_lines(&result),
        ["unfinished host call (rank 0): A loss (iteration 0), blocked on stream default; B loss (iteration 1), blocked on: not known"]
    );
}

/// A summarised hang keeps the unfinished records of the ranks and iterations it names only:
/// those it left out are no difference, those it kept are compared.
#[test]
fn a_summarised_hang_is_compared_in_what_it_kept() {
    let text = "[cluster]\nranks = 4\n[groups.world]\neager_init = true\n[tensors]\n\
        g = \"1MiB\"\n[[op]]\nlabel = \"ar\"\nall_reduce = \"g\"\n\
        [[fault]]\nranks = [3]\nat = \"ar\"\nkind = \"hang\"\n";
    let scenario = parse("hang.toml", text).unwrap();
    let whole = sim::engine::simulate(&scenario).expand();
    let options = sim::engine::Options {
        summary: Some(sim::timeline::RecordSelection::parse("ranks=1").unwrap()),
        ..sim::engine::Options::default()
    };
    let summarised = sim::engine::simulate_with(&scenario, options).0.expand();
    let result = diff(&summarised, &whole, &DiffOptions::default());
    assert!(result.unfinished_disagreements.is_empty(), "{result:#?}");
    assert_eq!(result.unfinished_ranks, 1);
    let mut other = whole.clone();
    other.ranks[1].unfinished_collectives.clear();
    let result = diff(&summarised, &other, &DiffOptions::default());
    assert_eq!(
        unfinished_lines(&result),
        ["unfinished collective (rank 1): ar (iteration 0, world seq 1) in A only"]
    );
}

/// Four ranks: rank 1's network fails under the all_reduce; with TORCH_NCCL_PROPAGATE_ERROR
/// the others' watchdogs read its error from the store (R27). Records are made once for
/// ranks 0, 2 and 3.
fn async_error(propagate: u8) -> Timeline {
    let text = format!(
        "[cluster]\nranks = 4\n[groups.world]\neager_init = true\n\
         [env]\nTORCH_NCCL_PROPAGATE_ERROR = {propagate}\n[tensors]\ngrad = \"25MiB\"\n\
         [[op]]\nlabel = \"ar\"\nall_reduce = \"grad\"\nasync_op = true\nwork = \"w\"\n\
         [[op]]\nwait = \"w\"\n[[fault]]\nranks = [1]\nat = \"ar\"\nkind = \"async_error\"\n\
         after_us = 5_000_000\n"
    );
    sim::engine::simulate(&parse("ae.toml", &text).unwrap())
}

#[test]
fn watchdog_records_on_one_side_only_are_a_difference() {
    let (a, b) = (async_error(1), async_error(0));
    let same = diff(&a, &a, &DiffOptions::default());
    assert!(same.identical && same.watchdog_disagreements.is_empty());
    let result = diff(&a, &b, &DiffOptions::default());
    assert!(!result.identical, "{result:#?}");
    let remote: Vec<&WatchdogDisagreement> = (result.watchdog_disagreements.iter())
        .filter(|d| d.event == "remote_error")
        .collect();
    // Each rank the record stands for, with its own count and first instant.
    assert_eq!(
        remote.iter().map(|d| d.rank).collect::<Vec<_>>(),
        [0, 2, 3],
        "{remote:#?}"
    );
    assert_eq!((remote[0].a_count, remote[0].b_count), (1, 0));
    assert_eq!(remote[0].thread, "watchdog");
    assert!(remote[0].a_first_ns.is_some() && remote[0].b_first_ns.is_none());
    let text = render_diff(&result);
    assert!(
        text.contains("watchdog (ranks 0,2-3; 3 ranks): watchdog remote_error: A 1 (first at "),
        "{text}"
    );
    assert!(
        result.exceeded.iter().any(|l| l.contains("remote_error")),
        "{:?}",
        result.exceeded
    );
}

#[test]
fn watchdog_records_are_compared_from_each_sides_program_start() {
    // A measured run's clock starts before its setup: the same run with every time 0.4 s
    // later (host calls and records alike) logs nothing the other does not; the records alone
    // 0.4 s later are a difference.
    let a = async_error(1);
    let shift = |timeline: &mut Timeline, host_too: bool| {
        for record in &mut timeline.watchdog {
            record.at_ns += 400_000_000;
        }
        if host_too {
            for rank in &mut timeline.ranks {
                for call in &mut rank.host {
                    call.start_ns += 400_000_000;
                    call.end_ns += 400_000_000;
                }
            }
        }
    };
    let mut later = a.clone();
    shift(&mut later, true);
    let result = diff(&a, &later, &DiffOptions::default());
    assert!(result.watchdog_disagreements.is_empty(), "{result:#?}");
    let mut records_later = a.clone();
    shift(&mut records_later, false);
    let result = diff(&a, &records_later, &DiffOptions::default());
    assert!(!result.watchdog_disagreements.is_empty());
}
