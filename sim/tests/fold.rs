//! Folding is exact (docs/scale.md): for every catalogue scenario and for a generated set of
//! symmetric jobs with stragglers, hangs, deaths, async errors, mismatches and several groups,
//! the folded run, expanded, is the unfolded run — the whole Timeline, as its JSON.

use sim::engine::{classes, simulate_with, Options};
use sim::scenario::{parse, Scenario};
use std::path::Path;

fn options(fold: bool) -> Options {
    Options {
        fold,
        ..Options::default()
    }
}

/// Asserts that the folded run expands to the unfolded one; returns the number of classes.
fn assert_exact(name: &str, scenario: &Scenario) -> usize {
    let (folded, _) = simulate_with(scenario, options(true));
    let (unfolded, _) = simulate_with(scenario, options(false));
    assert!(
        !unfolded.is_folded(),
        "{name}: an unfolded run is not folded"
    );
    let expanded = serde_json::to_string_pretty(&folded.expand()).unwrap();
    let unfolded = serde_json::to_string_pretty(&unfolded).unwrap();
    if expanded != unfolded {
        let line = expanded
            .lines()
            .zip(unfolded.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(0);
        let around = |text: &str| {
            text.lines()
                .skip(line.saturating_sub(3))
                .take(8)
                .collect::<Vec<_>>()
                .join("\n")
        };
        panic!(
            "{name}: the folded run, expanded, differs from the unfolded one at line {line}:\nfolded:\n{}\nunfolded:\n{}",
            around(&expanded),
            around(&unfolded)
        );
    }
    classes(scenario, &options(true)).count()
}

#[test]
fn every_catalogue_scenario_folds_exactly() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios");
    let mut paths: Vec<_> = std::fs::read_dir(&root)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "toml"))
        .collect();
    paths.sort();
    assert!(paths.len() > 20, "the catalogue is there");
    let mut folded = 0;
    for path in paths {
        let text = std::fs::read_to_string(&path).unwrap();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let scenario = parse(&name, &text).unwrap_or_else(|e| panic!("{name}: {e}"));
        let classes = assert_exact(&name, &scenario);
        folded += usize::from(classes < scenario.cluster.ranks as usize);
    }
    assert!(folded >= 10, "most of the catalogue folds ({folded})");
}

/// A job of `ranks` identical ranks, two groups, and `extra` (stragglers, faults, per-rank ops).
fn job(ranks: u32, env: &str, eager: bool, extra: &str) -> String {
    let half: Vec<String> = (0..ranks / 2).map(|r| r.to_string()).collect();
    format!(
        "repeat = 3\n[cluster]\nranks = {ranks}\n[env]\nTORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC = 100\n{env}\n\
         [groups.world]\neager_init = {eager}\ntimeout_s = 0.5\n\
         [groups.half]\nranks = [{}]\neager_init = {eager}\ntimeout_s = 0.5\n\
         [tensors]\nx = \"1MiB\"\ny = \"4MiB\"\n\
         [[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\nasync_op = true\nwork = \"w\"\n\
         [[op]]\ngemm = [1024, 1024, 1024]\n\
         [[op]]\nwait = \"w\"\n\
         [[op]]\nlabel = \"ag\"\nall_gather = \"y\"\ngroup = \"half\"\nranks = [{}]\n\
         [[op]]\nlabel = \"loss\"\nitem = \"x\"\n{extra}",
        half.join(", "),
        half.join(", "),
    )
}

#[test]
fn symmetric_jobs_with_stragglers_and_faults_fold_exactly() {
    let faults = [
        "",
        "[[perturb]]\nranks = [2]\nbefore = \"ar\"\nhost_delay_us = 3000\n",
        "[[perturb]]\nranks = [1, 5]\nbefore = \"ar\"\nhost_delay_us = 200\ngpu_delay_us = 700\niterations = [1]\n",
        "[[fault]]\nranks = [3]\nat = \"ar\"\nkind = \"hang\"\n",
        "[[fault]]\nranks = [1]\nat = \"ar\"\niteration = 1\nkind = \"die\"\n",
        "[[fault]]\nranks = [4]\nat = \"ar\"\nkind = \"async_error\"\nafter_us = 50000\n",
        "[[fault]]\nranks = [2]\nat = \"ar\"\niteration = 2\nkind = \"mismatch\"\nsize = \"2MiB\"\n",
        "[[fault]]\nranks = [0]\nat = \"ar\"\nkind = \"watchdog_stuck\"\n",
        "[[fault]]\nranks = [1, 2]\nat = \"ag\"\nkind = \"skip\"\n",
        "[[fault]]\nranks = [0]\nat = \"ar\"\nkind = \"hang\"\n[[fault]]\nranks = [5]\nat = \"loss\"\niteration = 1\nkind = \"die\"\n",
        "[[op]]\nranks = [2]\nhost_sleep_us = 800000\n",
        "[[op]]\nranks = [0, 7]\nall_reduce = \"x\"\n",
    ];
    let envs = [
        "",
        "TORCH_NCCL_DESYNC_DEBUG = 1\nTORCH_NCCL_PROPAGATE_ERROR = 1",
        "TORCH_NCCL_ASYNC_ERROR_HANDLING = 1",
        "TORCH_NCCL_ASYNC_ERROR_HANDLING = 2\nTORCH_NCCL_DESYNC_DEBUG = 1",
        "TORCH_NCCL_ASYNC_ERROR_HANDLING = 0",
        "TORCH_NCCL_BLOCKING_WAIT = 1",
        "TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC = 1\nTORCH_NCCL_PROPAGATE_ERROR = 1",
    ];
    let mut cases = 0;
    for fault in faults {
        for env in envs {
            for eager in [true, false] {
                let text = job(8, env, eager, fault);
                let scenario = parse("job.toml", &text).unwrap_or_else(|e| panic!("{e}\n{text}"));
                let classes = assert_exact(&text, &scenario);
                assert!(classes < 8, "{text}\nfolds into {classes} classes");
                cases += 1;
            }
        }
    }
    assert_eq!(cases, faults.len() * envs.len() * 2);
}

#[test]
fn a_large_job_with_three_stragglers_costs_about_four_ranks() {
    let text = "[cluster]\nranks = 4096\n[groups.world]\neager_init = true\n[tensors]\nx = \"25MiB\"\n\
                [[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\nasync_op = true\nwork = \"w\"\n[[op]]\nwait = \"w\"\n\
                [[perturb]]\nranks = [7]\nbefore = \"ar\"\nhost_delay_us = 100\n\
                [[perturb]]\nranks = [100]\nbefore = \"ar\"\nhost_delay_us = 200\n\
                [[perturb]]\nranks = [4000]\nbefore = \"ar\"\nhost_delay_us = 300\n";
    let scenario = parse("large.toml", text).unwrap();
    let (folded, events) = simulate_with(&scenario, options(true));
    assert_eq!(folded.ranks.len(), 4);
    assert_eq!(folded.ranks[0].stands_for.count(), 4093);
    let (_, unfolded_events) = simulate_with(&scenario, options(false));
    // 4 of 4,096 ranks: a thousandth of the events, less the collective's own completion event,
    // which both runs have once (25 against 24,577 when this was written).
    assert!(
        events * 900 < unfolded_events,
        "{events} vs {unfolded_events}"
    );
    // The last rank of every collective is the slowest straggler's.
    let expanded = folded.expand();
    assert_eq!(expanded.ranks.len(), 4096);
    assert!(expanded
        .ranks
        .iter()
        .all(|r| r.collectives[0].last_rank == Some(4000)));
}

#[test]
fn a_caught_store_timeout_expands_to_each_member_s_own_group_rank_r29() {
    // The roots of the lazily created world and odd groups die before publishing the NCCL
    // unique id; the others' store.get times out, is caught, and the retry times out again.
    // PyTorch's words name the rank in the process group: rank 5 is the odd group's 2. The
    // expanded copies once all said the class's lowest member's `[1]`.
    let caught = |group: &str, members: &str, root: u32| {
        format!(
            "[[op]]\nlabel = \"ar_{group}\"\nall_reduce = \"x\"\ngroup = \"{group}\"\nranks = [{members}]\ncatch = true\n\
             [[op]]\nall_reduce = \"x\"\ngroup = \"{group}\"\nranks = [{members}]\ncatch = true\n\
             [[fault]]\nranks = [{root}]\nat = \"ar_{group}\"\nkind = \"die\"\n"
        )
    };
    let text = format!(
        "[cluster]\nranks = 8\n[groups.world]\ntimeout_s = 1\n[groups.odd]\nranks = [1, 3, 5, 7]\ntimeout_s = 1\n\
         [tensors]\nx = \"1MiB\"\n{}{}[[op]]\nkernel = {{ us = 5 }}\n",
        caught("world", "2, 4, 6", 2),
        caught("odd", "1, 3, 5, 7", 1),
    );
    let scenario = parse("caught.toml", &text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert!(assert_exact("caught store timeouts", &scenario) < 8);
    let (folded, _) = simulate_with(&scenario, options(true));
    let expanded = folded.expand();
    let messages = |rank: usize| -> Vec<&str> {
        expanded.ranks[rank]
            .exceptions
            .iter()
            .map(|e| e.message.split(" is setting up").next().unwrap())
            .collect()
    };
    assert_eq!(
        messages(5),
        [
            "[Rank 5] DistBackendError: [2]",
            "[Rank 5] DistBackendError: [2]"
        ]
    );
    assert_eq!(
        messages(6),
        [
            "[Rank 6] DistBackendError: [6]",
            "[Rank 6] DistBackendError: [6]"
        ]
    );
}
