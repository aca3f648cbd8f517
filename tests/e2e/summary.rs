//! Summarised runs (`run --summary`, `--records-for`), reports that group ranks at scale, and
//! the scaling benchmark with its chart (`bench --scaling … --plot`).

use crate::util::{c10dsim, load, scenarios_dir, stderr, stdout};
use analysis::metrics::report;
use sim::engine::{simulate_with, Options};
use sim::timeline::{RecordSelection, Timeline};

fn summarised(scenario: &sim::scenario::Scenario, selection: &str) -> Timeline {
    let options = Options {
        summary: Some(RecordSelection::parse(selection).unwrap()),
        ..Options::default()
    };
    simulate_with(scenario, options).0
}

#[test]
fn every_catalogue_scenario_reports_the_same_from_its_summary() {
    let mut names: Vec<String> = std::fs::read_dir(scenarios_dir())
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".toml"))
        .collect();
    names.sort();
    let mut cases: Vec<(String, Vec<&str>)> = names.into_iter().map(|n| (n, Vec::new())).collect();
    // Stragglers drawn per rank and iteration give many distinct values: the medians must
    // still be exact.
    cases.push((
        "straggler.toml".into(),
        vec!["cluster.ranks=16", "repeat=40"],
    ));
    // The process taken down at 660.1 s in the second iteration: the all_reduce completed in
    // the first only, which the report must count from the summary as from the records.
    cases.push(("gpu_backlog_timeout.toml".into(), vec!["repeat=2"]));
    for (name, overrides) in &cases {
        let scenario = load(name, overrides);
        let full = simulate_with(&scenario, Options::default()).0;
        let summary = summarised(&scenario, "none");
        assert!(summary.ranks.is_empty(), "{name}");
        assert_eq!(report(&summary), report(&full), "{name}");
        if name == "gpu_backlog_timeout.toml" {
            assert_eq!(report(&summary).collectives[0].rank_iterations, 2);
        }
    }
}

/// A summarised run keeps the unfinished records of the ranks and iterations it names, as the
/// full run has them, and folds none of them into the distributions of completed collectives.
#[test]
fn a_summary_keeps_the_named_ranks_unfinished_collectives_and_counts_none_as_completed() {
    let scenario = load("hang_10min.toml", &[]);
    let full = simulate_with(&scenario, Options::default()).0.expand();
    let kept = summarised(&scenario, "ranks=1,3");
    let by_rank = |timeline: &Timeline, rank: u32| {
        let record = timeline.ranks.iter().find(|r| r.rank == rank).unwrap();
        (
            record.unfinished_collectives.clone(),
            record.unfinished_kernels.clone(),
            record.unfinished_stream_waits.clone(),
            record.unfinished_iteration,
        )
    };
    for rank in [1, 3] {
        assert_eq!(by_rank(&kept, rank), by_rank(&full, rank), "rank {rank}");
    }
    assert_eq!(by_rank(&kept, 1).0.len(), 1);
    assert_eq!(by_rank(&kept, 1).2.len(), 1, "the wait()'s stream wait");
    assert_eq!(by_rank(&kept, 3).3, Some(0), "rank 3 hangs in iteration 0");
    assert!(kept.summary.as_ref().unwrap().collectives.is_empty());
}

#[test]
fn the_cli_keeps_the_named_records_and_refuses_a_bad_selection() {
    let output = c10dsim(&[
        "run",
        "scenarios/straggler.toml",
        "--summary",
        "--records-for",
        "ranks=1,3 iterations=5",
        "--timeline",
        "-",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let timeline = Timeline::from_json(&stdout(&output)).unwrap();
    let summary = timeline.summary.as_ref().expect("a summarised Timeline");
    assert_eq!(summary.records_for.ranks, Some(vec![(1, 1), (3, 3)]));
    let ranks: Vec<u32> = timeline.ranks.iter().map(|r| r.rank).collect();
    assert_eq!(ranks, [1, 3]);
    for rank in &timeline.ranks {
        assert!(!rank.collectives.is_empty());
        assert!(rank.collectives.iter().all(|c| c.iteration == 5));
        assert!(rank.host.iter().all(|h| h.iteration == 5));
    }
    // The report printed with it (on stderr) is the full run's.
    let full = c10dsim(&["run", "scenarios/straggler.toml"]);
    let table = |text: &str| text[text.find("collectives (").unwrap()..].to_string();
    assert_eq!(table(&stderr(&output)), table(&stdout(&full)));

    // --summary alone keeps no record: a trace of it is empty, and the run says why.
    let trace = crate::robustness::temp("summary_alone.trace.json");
    let alone = c10dsim(&[
        "run",
        "scenarios/straggler.toml",
        "--summary",
        "--trace",
        trace.to_str().unwrap(),
    ]);
    assert!(alone.status.success(), "{}", stderr(&alone));
    assert!(
        stderr(&alone).contains("--summary keeps no record without --records-for")
            && stderr(&alone).contains("so --trace will show none")
            // The example is a command line that runs: unquoted, `iterations=0` would be an
            // argument of its own.
            && stderr(&alone).contains("--records-for 'ranks=0 iterations=0'"),
        "{}",
        stderr(&alone)
    );
    assert!(
        !stderr(&output).contains("keeps no record"),
        "{}",
        stderr(&output)
    );

    let bad = c10dsim(&[
        "run",
        "scenarios/straggler.toml",
        "--summary",
        "--records-for",
        "ranks=0-x",
    ]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        stderr(&bad).contains("ranks: \"0-x\" is not a number or a range such as 0-2"),
        "{}",
        stderr(&bad)
    );
    let without = c10dsim(&[
        "run",
        "scenarios/straggler.toml",
        "--records-for",
        "ranks=0",
    ]);
    assert_eq!(without.status.code(), Some(2));
    assert!(
        stderr(&without).contains("--summary"),
        "{}",
        stderr(&without)
    );
    // What reads every rank's records is refused rather than given the kept ones: the
    // nccl-tests table printed an empty table, --against compared nothing, both with exit 0.
    for other in [["--nccl-tests", "--summary"], ["--summary", "--against"]] {
        let mut args = vec!["run", "scenarios/nccl_tests_all_reduce.toml"];
        args.extend(other);
        if other[1] == "--against" {
            args.push("scenarios/nccl_tests_all_reduce.toml");
        }
        let refused = c10dsim(&args);
        assert_eq!(refused.status.code(), Some(2), "{args:?}");
        assert!(
            stderr(&refused).contains("cannot be used with"),
            "{}",
            stderr(&refused)
        );
    }
}

#[test]
fn the_report_of_a_hang_does_not_grow_with_the_ranks() {
    let lines = |ranks: &str| {
        let output = c10dsim(&[
            "run",
            "scenarios/hang_10min.toml",
            "--summary",
            "--set",
            &format!("cluster.ranks={ranks}"),
        ]);
        assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
        stdout(&output)
    };
    let small = lines("8");
    let large = lines("512");
    assert_eq!(small.lines().count(), large.lines().count(), "{large}");
    assert!(
        large
            .contains("[Ranks 0-2,4-511 (511 ranks)] Watchdog caught collective operation timeout"),
        "{large}"
    );
    assert!(large.contains("ranks 0-2,4-511 (511 ranks): last enqueued 1, last completed 0"));
    // Each rank's line on request.
    let each = c10dsim(&[
        "run",
        "scenarios/hang_10min.toml",
        "--detail",
        "ranks",
        "--set",
        "cluster.ranks=16",
    ]);
    assert!(stdout(&each).contains("[Rank 15] Watchdog caught"));
    assert!(!stdout(&each).contains("[Ranks"));
    // Ranks that cannot fold (drawn kernel jitter: every rank its own class) but did the same
    // are one line too.
    let jittered = |ranks: &str| {
        let output = c10dsim(&[
            "run",
            "scenarios/hang_10min.toml",
            "--set",
            &format!("cluster.ranks={ranks}"),
            "--set",
            "cluster.kernel_jitter_pct=1",
        ]);
        assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
        stdout(&output)
    };
    let (small, large) = (jittered("8"), jittered("256"));
    assert_eq!(small.lines().count(), large.lines().count(), "{large}");
    assert!(
        large
            .contains("[Ranks 0-2,4-255 (255 ranks)] Watchdog caught collective operation timeout"),
        "{large}"
    );
}

#[test]
fn bench_scaling_writes_the_documented_numeric_columns_and_its_chart() {
    let dir = std::env::temp_dir().join(format!("c10dsim-scaling-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let csv = dir.join("scaling.csv");
    let svg = dir.join("scaling.svg");
    let output = c10dsim(&[
        "bench",
        "--scaling",
        "2,4",
        "--iterations",
        "3",
        "-o",
        csv.to_str().unwrap(),
        "--plot",
        svg.to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let text = std::fs::read_to_string(&csv).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[0],
        "point,ranks,iterations,summary,fold,classes,events,wall_s,wall_without_detector_s,events_per_s,report_s,command_s,peak_memory_mib,page_faults,user_s,system_s"
    );
    assert_eq!(lines.len(), 3, "{text}");
    // `bench --help` lists every column, in order.
    let help = stdout(&c10dsim(&["bench", "--help"]));
    let listed = help
        .split_once("The scaling CSV (")
        .and_then(|(_, rest)| rest.split_once(')'))
        .map(|(columns, _)| columns.split_whitespace().collect::<String>());
    assert_eq!(listed.as_deref(), Some(lines[0]), "{help}");
    for (point, (line, ranks)) in lines[1..].iter().zip(["2", "4"]).enumerate() {
        let cells: Vec<&str> = line.split(',').collect();
        assert_eq!(cells.len(), 16, "{line}");
        assert_eq!(
            &cells[..5],
            [point.to_string().as_str(), ranks, "3", "false", "true"]
        );
        // The times to the microsecond: a small run's wall time is not 0.000.
        assert!(cells[7].parse::<f64>().is_ok_and(|v| v > 0.0), "{line}");
        assert_eq!(cells[7].split('.').nth(1).map(str::len), Some(6), "{line}");
        for cell in &cells[5..] {
            assert!(cell.parse::<f64>().is_ok_and(|v| v >= 0.0), "{line}");
        }
        // A process of its own: at least its binary's and the simulation's pages.
        assert!(cells[12].parse::<f64>().unwrap() > 1.0, "{line}");
    }
    let chart = std::fs::read_to_string(&svg).unwrap();
    for title in [
        "wall_s by ranks",
        "events_per_s by ranks",
        "peak_memory_mib by ranks",
    ] {
        assert!(chart.contains(title), "{title}");
    }
    // The same chart from the CSV with the plot command.
    let again = dir.join("again.svg");
    let mut args = vec!["plot", csv.to_str().unwrap()];
    args.extend(crate::util::SCALING_PLOT);
    args.extend(["-o", again.to_str().unwrap()]);
    let plotted = c10dsim(&args);
    assert!(plotted.status.success(), "{}", stderr(&plotted));
    assert_eq!(std::fs::read_to_string(&again).unwrap(), chart);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bench_prints_every_figure_of_docs_perf() {
    let output = c10dsim(&["bench", "--ranks", "4", "--iterations", "3", "--summary"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let text = stdout(&output);
    for figure in [
        "collective records: 12, kernel records: 24",
        "events processed: ",
        "simulate wall time: ",
        "simulate wall time without the race detector: ",
        "events per second: ",
        "events per second without the race detector: ",
        "report (metrics) wall time: ",
        "whole command wall time",
        "peak resident memory: ",
        "summarised (--summary)",
        "during the simulation: ",
        "during the whole command: ",
        " page faults, CPU ",
    ] {
        assert!(text.contains(figure), "{figure}: {text}");
    }
    // 4 ranks x 3 iterations, all simulated (summarised runs do not fold).
    let events: f64 = (text.lines())
        .find_map(|line| line.strip_prefix("events processed: "))
        .and_then(|n| n.parse().ok())
        .expect("events processed");
    let per_rank = format!(
        "per simulated rank and iteration: {:.2} events, ",
        events / 12.0
    );
    assert!(text.contains(&per_rank), "{per_rank}: {text}");
}

#[test]
fn bench_repeat_alternates_two_binaries_and_prints_each_figure_with_its_spread() {
    let dir = std::env::temp_dir().join(format!("c10dsim-repeat-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let csv = dir.join("runs.csv");
    let other = env!("CARGO_BIN_EXE_c10dsim");
    let output = c10dsim(&[
        "bench",
        "--repeat",
        "2",
        "--against",
        other,
        "--ranks",
        "2",
        "--iterations",
        "3",
        "--no-fold",
        "-o",
        csv.to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let text = std::fs::read_to_string(&csv).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[0].starts_with("run,binary,round,ranks,iterations,"),
        "{text}"
    );
    assert_eq!(lines.len(), 5, "{text}");
    // Round 0 runs this binary first, round 1 the other first.
    let order: Vec<(&str, &str)> = (lines[1..].iter())
        .map(|line| {
            let cells: Vec<&str> = line.split(',').collect();
            assert_eq!(cells.len(), 18, "{line}");
            assert_eq!(&cells[3..7], ["2", "3", "false", "false"], "{line}");
            (cells[1], cells[2])
        })
        .collect();
    assert_eq!(
        order,
        [
            ("this", "0"),
            ("against", "0"),
            ("against", "1"),
            ("this", "1")
        ]
    );
    let summary = stdout(&output);
    for figure in [
        "2 run(s) of each binary, by turns",
        "  simulate: ",
        "  simulate without the race detector: ",
        "  events per second: ",
        "  whole command: ",
        "  peak resident memory: ",
        "  page faults during the simulation: ",
        "  user CPU during the simulation: ",
        "  system CPU during the simulation: ",
        "against / this, medians",
    ] {
        assert!(summary.contains(figure), "{figure}: {summary}");
    }
    // The same binary twice counts the same events: no warning.
    assert!(!summary.contains("different events"), "{summary}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bench_modes_refuse_what_they_cannot_do() {
    for (args, says) in [
        (&["bench", "--repeat", "0"][..], "at least 1 run"),
        (
            &["bench", "--repeat", "1", "--against", "/no/such/c10dsim"][..],
            "--against /no/such/c10dsim: no such file",
        ),
        (
            &["bench", "--repeat", "1", "--scaling", "2", "-o", "-"][..],
            "--scaling and --repeat are two modes",
        ),
        (&["bench", "--against", "c10dsim"][..], "--repeat"),
    ] {
        let output = c10dsim(args);
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        assert!(
            stderr(&output).contains(says),
            "{args:?}: {}",
            stderr(&output)
        );
    }
}

#[test]
fn bench_scaling_to_standard_output_prints_each_row_once() {
    let output = c10dsim(&["bench", "--scaling", "2,4", "--iterations", "2", "-o", "-"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let text = stdout(&output);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert!(lines[0].starts_with("point,"), "{text}");
    assert!(
        lines[1].starts_with("0,2,") && lines[2].starts_with("1,4,"),
        "{text}"
    );
}

/// A collective of a 2-rank subgroup is not said to be over the job's ranks: its row says how
/// many ranks its figures are over, folded, unfolded and summarised alike.
#[test]
fn a_subgroup_collective_says_how_many_ranks_its_figures_are_over() {
    let dir = std::env::temp_dir().join(format!("c10dsim-subgroup-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("subgroup.toml");
    std::fs::write(
        &path,
        "repeat = 3\nwarmup = 1\n[cluster]\nranks = 8\n[groups.world]\n[groups.pair]\n\
         ranks = [0, 1]\n[tensors]\nx = \"8MiB\"\n\
         [[op]]\nlabel = \"ar_world\"\nall_reduce = \"x\"\n\
         [[op]]\nlabel = \"ar_pair\"\nall_reduce = \"x\"\ngroup = \"pair\"\nranks = [0, 1]\n",
    )
    .unwrap();
    let path = path.to_str().unwrap();
    for flags in [
        &["--set", "cluster.ranks=1024"][..],
        &["--no-fold"],
        &["--summary"],
    ] {
        let output = c10dsim(&[&["run", path][..], flags].concat());
        assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
        let text = stdout(&output);
        assert!(
            text.contains("collectives (medians over each one's ranks x 2 measured iterations"),
            "{flags:?}: {text}"
        );
        let row = |name: &str| {
            let line = text.lines().find(|l| l.trim_start().starts_with(name));
            let cells: Vec<String> = line.unwrap().split_whitespace().map(String::from).collect();
            cells[3].clone()
        };
        let world = if flags.len() == 2 { "1,024" } else { "8" };
        assert_eq!(
            (row("ar_world"), row("ar_pair")),
            (world.into(), "2".into()),
            "{text}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
    // Where every collective runs on every rank, the header says how many.
    let output = c10dsim(&["run", "scenarios/straggler.toml"]);
    assert!(stdout(&output).contains("collectives (medians over 8 ranks x 20 measured iterations"));
    assert!(!stdout(&output).contains(" ranks  async"));
}

/// `run --json` at 100,000 ranks stays under 1 MB (docs/perf.md's target for a run's output):
/// a group's ranks are one line, not one line each, and the JSON reads back whole.
#[test]
fn the_json_report_lists_a_group_s_ranks_on_one_line() {
    let output = c10dsim(&[
        "run",
        "scenarios/overlap_bench.toml",
        "--json",
        "--set",
        "cluster.ranks=100000",
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(
        output.stdout.len() < 1_000_000,
        "{} bytes",
        output.stdout.len()
    );
    let value: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let ranks = &value["parameters"]["groups"][0]["ranks"];
    assert_eq!(ranks.as_array().unwrap().len(), 100_000);
    assert!(stdout(&output).contains("\"ranks\": [0, 1, 2, 3,"));
    assert!(stdout(&output).contains("\n  \"report\": {\n"));
}

/// Every rank of a hang dumps its Flight Recorder and every dump lists every rank of its groups:
/// a summarised Timeline keeps the named ranks' dumps and one per class of the others, so it
/// stays small, while `--fr-dir` still gets a file per rank.
#[test]
fn a_summary_keeps_the_named_ranks_dumps_and_fr_dir_a_file_per_rank() {
    let dir = std::env::temp_dir().join(format!("c10dsim-summary-fr-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let timeline_path = dir.join("t.json");
    let fr_dir = dir.join("fr");
    let output = c10dsim(&[
        "run",
        "scenarios/hang_10min.toml",
        "--set",
        "cluster.ranks=512",
        "--summary",
        "--records-for",
        "ranks=0,3",
        "--timeline",
        timeline_path.to_str().unwrap(),
        "--fr-dir",
        fr_dir.to_str().unwrap(),
    ]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let text = std::fs::read_to_string(&timeline_path).unwrap();
    let timeline: Timeline = serde_json::from_str(&text).unwrap();
    let dumps: Vec<(u32, String)> = (timeline.flight_recorder.iter())
        .map(|dump| (dump.rank, dump.stands_for.to_string()))
        .collect();
    let expected = [(0, ""), (1, "1-2,4-511"), (3, "")];
    let expected: Vec<(u32, String)> = (expected.iter())
        .map(|&(rank, stands_for)| (rank, stands_for.to_string()))
        .collect();
    assert_eq!(dumps, expected);
    assert!(text.len() < 64 << 10, "{} bytes", text.len());
    let files = std::fs::read_dir(&fr_dir).unwrap().count();
    assert_eq!(files, 512);
    std::fs::remove_dir_all(&dir).unwrap();
}
