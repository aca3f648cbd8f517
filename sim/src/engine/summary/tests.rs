use super::*;
use crate::engine::{simulate_with, Options};
use crate::scenario::{parse, Scenario};

/// Four ranks, rank 3 a drawn straggler, marks and measures, a query, an async and a
/// synchronous collective.
fn scenario() -> Scenario {
    parse(
        "s.toml",
        "repeat = 12\nwarmup = 2\nseed = 5\n[cluster]\nranks = 4\n[tensors]\nx = \"4MiB\"\n\
         [[perturb]]\nranks = [3]\nbefore = \"ar\"\nhost_delay_us = { lognormal = { mean = 200, std = 50 } }\n\
         [[op]]\nmark = \"a\"\n[[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\nasync_op = true\nwork = \"w\"\n\
         [[op]]\ngemm = [2048, 2048, 2048]\n[[op]]\nis_completed = \"w\"\n[[op]]\nwait = \"w\"\n\
         [[op]]\nmark = \"b\"\n[[op]]\nall_reduce = \"x\"\n\
         [[measure]]\nname = \"ab\"\nfrom = \"a\"\nto = \"b\"\n\
         [[measure]]\nname = \"ab_host\"\nfrom = \"a\"\nto = \"b\"\nclock = \"host\"\n",
    )
    .unwrap()
}

fn summarised(scenario: &Scenario, selection: &str) -> Timeline {
    let options = Options {
        summary: Some(RecordSelection::parse(selection).unwrap()),
        ..Options::default()
    };
    simulate_with(scenario, options).0
}

fn counts_of(values: impl Iterator<Item = i64>) -> Distribution {
    let mut histogram = Histogram::new();
    values.for_each(|v| add(&mut histogram, v));
    distribution(&histogram)
}

#[test]
fn the_summary_holds_the_distributions_of_every_record() {
    let scenario = scenario();
    let full = simulate_with(&scenario, Options::default()).0.expand();
    let summary = summarised(&scenario, "none");
    assert!(summary.ranks.is_empty());
    let summary = summary.summary.unwrap();
    let measured = || {
        full.ranks
            .iter()
            .flat_map(|r| r.collectives.iter())
            .filter(|c| c.iteration >= scenario.warmup)
    };
    assert_eq!(summary.collectives.len(), 2);
    for collective in &summary.collectives {
        let of_op = || measured().filter(|c| c.op == collective.op);
        let span = |a: u64, b: u64| b as i64 - a as i64;
        assert_eq!(
            collective.host_call,
            counts_of(of_op().map(|c| span(c.host_start_ns, c.host_end_ns)))
        );
        assert_eq!(
            collective.kernel,
            counts_of(of_op().map(|c| span(c.kernel_start_ns, c.end_ns)))
        );
        assert_eq!(
            collective.stream_interval,
            counts_of(of_op().map(|c| c.stream_interval_ns()))
        );
        // The spin of every rank but the one that arrived last (it waited for none).
        let early = (full.ranks.iter())
            .flat_map(|r| r.collectives.iter().map(move |c| (r.rank, c)))
            .filter(|(rank, c)| {
                c.iteration >= scenario.warmup
                    && c.op == collective.op
                    && c.last_rank != Some(*rank)
            });
        assert_eq!(
            collective.spin,
            counts_of(early.map(|(_, c)| span(c.kernel_start_ns, c.data_start_ns)))
        );
        assert_eq!(collective.spin.count, 3 * 10);
        assert_eq!(collective.host_call.count, 4 * 10);
    }
    // The straggler spins every other rank's kernel by its drawn delay: a value per
    // measured iteration, none of them its own 0.
    assert_eq!(summary.collectives[0].spin.values.len(), 10);
    assert!(summary.collectives[0].spin.min_ns > 0);
    assert_eq!(summary.queries[0].calls, 40);
    assert_eq!(summary.measures[0].values.count, 40);
    assert_eq!(summary.measures[0].rank_medians_us.len(), 4);
    assert_eq!(summary.ends.len(), 1);
    assert_eq!(summary.ends[0].ranks, "0-3");
    assert_eq!(summary.kernels.len(), 1);
    assert_eq!(summary.kernels[0].kernel.count, 40);
}

#[test]
fn the_named_records_are_kept_whole_and_the_rest_is_the_same_run() {
    let scenario = scenario();
    let full = simulate_with(&scenario, Options::default()).0.expand();
    let summary = summarised(&scenario, "ranks=1,3 iterations=0-1,11");
    assert_eq!(summary.findings, full.findings);
    assert_eq!(summary.ranks.len(), 2);
    for kept in &summary.ranks {
        let whole = &full.ranks[kept.rank as usize];
        let named = |iteration: u32| [0, 1, 11].contains(&iteration);
        let collectives: Vec<_> = whole
            .collectives
            .iter()
            .filter(|c| named(c.iteration))
            .cloned()
            .collect();
        assert_eq!(kept.collectives, collectives);
        let kernels: Vec<_> = whole
            .kernels
            .iter()
            .filter(|k| named(k.iteration))
            .copied()
            .collect();
        assert_eq!(kept.kernels, kernels);
        let host: Vec<_> = whole
            .host
            .iter()
            .filter(|h| named(h.iteration))
            .copied()
            .collect();
        assert_eq!(kept.host, host);
        let waits: Vec<_> = whole
            .stream_waits
            .iter()
            .filter(|w| named(w.iteration))
            .copied()
            .collect();
        assert_eq!(kept.stream_waits, waits);
        assert_eq!(kept.streams, whole.streams);
        assert_eq!(kept.memory, whole.memory);
        assert_eq!(kept.end, whole.end);
    }
}

#[test]
fn records_are_folded_while_the_run_goes_on() {
    // The host blocks at each iteration's end (`synchronize`), so it never runs far ahead:
    // what is held at the end is what the last fold left (at most FOLD_EVERY_ITERATIONS
    // iterations and one), not 200 iterations.
    let scenario = parse(
        "f.toml",
        "repeat = 200\n[cluster]\nranks = 2\n[tensors]\nx = \"1MiB\"\n\
         [[op]]\nall_reduce = \"x\"\nasync_op = true\nwork = \"w\"\n[[op]]\nwait = \"w\"\n\
         [[op]]\ndevice_sync = true\n",
    )
    .unwrap();
    let options = Options {
        summary: Some(RecordSelection::parse("none").unwrap()),
        ..Options::default()
    };
    let mut engine = super::super::Engine::new(&scenario, options);
    engine.run();
    for state in &engine.ranks {
        let held = &state.timeline;
        let most = FOLD_EVERY_ITERATIONS as usize + 1;
        let held_collectives = held.collectives.items().len();
        assert!(held_collectives <= most, "{held_collectives}");
        assert!(
            held.host.items().len() <= 3 * most,
            "{}",
            held.host.items().len()
        );
        assert_eq!(held.collectives.len(), 200);
        assert_eq!(held.folded_works.len() + held_collectives, 200);
    }
    let timeline = engine.finish();
    assert_eq!(
        timeline.summary.unwrap().collectives[0].host_call.count,
        400
    );
}

/// Every rank of a hang dumps its Flight Recorder, and each dump lists every rank of its
/// groups: a summary keeps the named ranks' dumps whole and one dump per class of the
/// others, standing for them, as a folded Timeline does, so that its size grows with the
/// classes and the named ranks, not with the square of the ranks.
#[test]
fn a_summary_keeps_the_named_ranks_dumps_and_one_per_class_of_the_others() {
    let scenario = parse(
        "h.toml",
        "[cluster]\nranks = 8\n[groups.world]\neager_init = true\n[tensors]\ng = \"1MiB\"\n\
         [[op]]\nlabel = \"ar\"\nall_reduce = \"g\"\n\
         [[fault]]\nranks = [3]\nat = \"ar\"\nkind = \"hang\"\n",
    )
    .unwrap();
    let every_rank = Options {
        fold: false,
        ..Options::default()
    };
    let whole = simulate_with(&scenario, every_rank).0;
    assert_eq!(whole.flight_recorder.len(), 8, "every rank dumps");
    let summary = summarised(&scenario, "ranks=0,5");
    let kept: Vec<(u32, String)> = (summary.flight_recorder.iter())
        .map(|dump| (dump.rank, dump.stands_for.to_string()))
        .collect();
    let expected = [(0, ""), (1, "1-2,4,6-7"), (3, ""), (5, "")];
    let expected: Vec<(u32, String)> = (expected.iter())
        .map(|&(rank, stands_for)| (rank, stands_for.to_string()))
        .collect();
    assert_eq!(kept, expected);
    assert_eq!(summary.expand().flight_recorder, whole.flight_recorder);
    // Every rank named: every dump whole.
    assert_eq!(
        summarised(&scenario, "ranks=0-7").flight_recorder,
        whole.flight_recorder
    );
}

#[test]
fn record_selections_parse_with_clear_errors() {
    let selection = RecordSelection::parse("iterations=0-2,99 ranks=0,3,7").unwrap();
    assert!(selection.keeps(3, 99) && selection.keeps(0, 1));
    assert!(!selection.keeps(1, 1) && !selection.keeps(3, 50));
    let ranks_only = RecordSelection::parse("ranks=2").unwrap();
    assert!(ranks_only.keeps(2, 1_000) && !ranks_only.keeps(1, 0));
    assert!(!RecordSelection::parse("none").unwrap().keeps_rank(0));
    let error = |text: &str| RecordSelection::parse(text).unwrap_err();
    assert!(
        error("rank=1").contains("\"rank\" is not a part"),
        "{}",
        error("rank=1")
    );
    assert!(error("ranks=1 ranks=2").contains("given twice"));
    assert!(error("ranks").contains("expected ranks=LIST"));
    assert!(error("ranks=3-1").contains("ranks: \"3-1\" ends before it starts"));
    assert!(error("").contains("or none"));
}
