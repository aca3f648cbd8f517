//! Folded runs (docs/scale.md) through the binary: for every catalogue scenario, `run` prints
//! the same report and exits the same with folding as with `--no-fold`, and the fault
//! scenarios at 100,000 ranks print a summary, not a line per rank; identical ranks get the
//! same times whatever order the engine takes them in.

use crate::util::{c10dsim, catalogue_files, scenarios_dir, stderr, stdout};

#[test]
fn every_catalogue_scenario_reports_the_same_folded_and_unfolded() {
    for path in catalogue_files() {
        let file = path.to_str().unwrap();
        let folded = c10dsim(&["run", file]);
        let unfolded = c10dsim(&["run", file, "--no-fold"]);
        assert_eq!(folded.status.code(), unfolded.status.code(), "{file}");
        assert_eq!(stdout(&folded), stdout(&unfolded), "{file}");
        assert!(!stdout(&folded).is_empty(), "{file}");
    }
}

#[test]
fn faults_at_100000_ranks_print_classes_not_ranks() {
    for name in ["hang_10min.toml", "async_error.toml"] {
        let file = scenarios_dir().join(name);
        let output = c10dsim(&[
            "run",
            file.to_str().unwrap(),
            "--set",
            "cluster.ranks=100000",
        ]);
        assert_eq!(output.status.code(), Some(1), "{name}: ends in findings");
        let printed = stdout(&output).len() + stderr(&output).len();
        assert!(printed < 1 << 20, "{name}: {printed} bytes");
        assert!(
            stdout(&output).contains("(99,999 ranks)"),
            "{name}: {}",
            stdout(&output)
        );
    }
    // Rank by rank on request: every rank's watchdog records at 64 ranks.
    let file = scenarios_dir().join("hang_10min.toml");
    let file = file.to_str().unwrap();
    let detail = c10dsim(&[
        "run",
        file,
        "--set",
        "cluster.ranks=64",
        "--detail",
        "ranks",
    ]);
    let text = stdout(&detail);
    assert!(text.contains("[Rank 63] Watchdog caught"), "{text}");
    assert!(!text.contains("[Ranks "), "{text}");
}

/// Three identical ranks whose group's Work is listed after its deadline passed (the host
/// blocked behind a full launch queue with timing on), then a call that waits for the
/// watchdog's list through its 60 s dump sleep (mode 0, R27): each rank's watchdog finds the
/// timeout at its first poll after the listing, not at whatever instant the engine happened
/// to be at when that rank's host listed the Work, so folded and unfolded runs agree.
#[test]
fn a_work_listed_past_its_deadline_times_out_alike_on_identical_ranks() {
    let scenario = r#"repeat = 2
[cluster]
ranks = 3
[env]
TORCH_NCCL_ASYNC_ERROR_HANDLING = 0
TORCH_NCCL_ENABLE_TIMING = 1
[host]
launch_queue_depth = 3
[groups.g]
ranks = [0, 1, 2]
timeout_s = 0.1
[tensors]
x = "1MiB"
fy = "1MiB"
[[op]]
init_process_group = true
device_id = true
[[op]]
new_group = "g"
[[op]]
label = "op0"
functional_all_reduce = "x"
result = "fy"
group = "g"
[[op]]
all_to_all = "x"
[[perturb]]
ranks = [0, 1, 2]
before = "op0"
gpu_delay_us = 187500
"#;
    folds_alike("listed_late", scenario, &[&[0, 1, 2]]);
}

/// Ranks that block behind a launch queue of depth 1 or 2 while a delayed rank holds their
/// collective back, so that each lists later Works past their deadlines: a watchdog timeout
/// at the third iteration (mode 0), barriers behind a host delay on a reordered group, and an
/// async error caught in mode 1. Identical ranks stopped at different host horizons once
/// timed out, and ran their next barriers, 10 us apart (R26), so folded and unfolded reports
/// differed.
#[test]
fn works_listed_late_behind_a_shallow_launch_queue_time_out_alike_on_identical_ranks() {
    let third_iteration = r#"repeat = 3
[cluster]
ranks = 3
[env]
TORCH_NCCL_ASYNC_ERROR_HANDLING = 0
[host]
launch_queue_depth = 1
[groups.world]
timeout_s = 1
[tensors]
x = "1KiB"
[[op]]
label = "op0"
all_to_all = "x"
[[perturb]]
ranks = [0]
before = "op0"
gpu_delay_us = 1500000
"#;
    folds_alike("third_iteration", third_iteration, &[&[1, 2]]);
    let barriers = r#"[env]
TORCH_NCCL_ASYNC_ERROR_HANDLING = 0
[host]
launch_queue_depth = 1
[groups.g]
ranks = [0, 2, 3, 1]
timeout_s = 1
[tensors]
x = "1KiB"
[[op]]
init_process_group = true
device_id = true
[[op]]
new_group = "g"
[[op]]
label = "c0"
all_reduce = "x"
group = "g"
[[op]]
barrier = true
group = "g"
[[op]]
barrier = true
[[perturb]]
ranks = [0, 1]
before = "c0"
host_delay_us = 1125000
"#;
    folds_alike("barriers", barriers, &[&[0, 1], &[2, 3], &[4, 5, 6, 7]]);
    let async_error = r#"[env]
TORCH_NCCL_ASYNC_ERROR_HANDLING = 1
[host]
launch_queue_depth = 2
[groups.g]
ranks = [0, 1, 2, 3, 4, 5, 6, 7]
timeout_s = 0.1
[tensors]
x = "1KiB"
[[op]]
init_process_group = true
device_id = true
[[op]]
new_group = "g"
[[op]]
label = "c0"
all_reduce = "x"
async_op = true
work = "w0"
group = "g"
[[op]]
wait = "w0"
[[op]]
barrier = true
[[perturb]]
ranks = [0, 1]
before = "c0"
gpu_delay_us = 187500
[[fault]]
ranks = [2]
at = "c0"
kind = "async_error"
"#;
    folds_alike("async_error", async_error, &[&[0, 1], &[3, 4, 5, 6, 7]]);
}

/// The root publishes the unique id at the very instant a member's `store.get` times out (R29):
/// the tie is decided alike whichever of the two events the engine processes first.
#[test]
fn a_unique_id_published_at_the_store_deadline_folds_alike() {
    let tie = r#"
[cluster]
ranks = 5
[env]
TORCH_NCCL_USE_COMM_NONBLOCKING = 1
TORCH_NCCL_NONBLOCKING_TIMEOUT = 5
[host]
comm_init_us = 2000000
[groups.world]
timeout_s = 2
[groups.g]
ranks = [0, 1, 3]
[tensors]
x = "1KiB"
[[op]]
label = "ipg"
init_process_group = true
device_id = true
[[op]]
new_group = "g"
[[op]]
barrier = true
[[fault]]
ranks = [4]
at = "ipg"
kind = "hang"
"#;
    folds_alike("store_tie", tie, &[&[0, 1, 3]]);
}

/// Ranks 1-3 reach their first use of the world while its non-blocking creation runs, the others
/// before it ends; every rank goes on at its end and finds a race at one instant. An unfolded
/// run holds more events at that instant (each rank's store wake-up), so a host stopped at one
/// and found its race later in the engine's order: the two classes' findings came in opposite
/// orders (found by a fold hunt; listed by time, then rank, since 2026-12-07).
#[test]
fn findings_of_one_instant_are_listed_alike_folded_and_unfolded() {
    let same_instant = r#"
[cluster]
ranks = 16
[env]
TORCH_NCCL_USE_COMM_NONBLOCKING = 1
TORCH_NCCL_NONBLOCKING_TIMEOUT = 2
[host]
comm_init_us = 2000000
[tensors]
x = "1KiB"
[[op]]
init_process_group = true
device_id = true
[[op]]
label = "c0"
all_reduce = "x"
async_op = true
[[op]]
all_reduce = "x"
[[perturb]]
ranks = [1, 2, 3]
before = "c0"
host_delay_us = 1001000
"#;
    folds_alike("same_instant", same_instant, &[&[0, 4, 15], &[1, 2, 3]]);
}

/// Ranks disagree on the world's SeqNum 2: ten ranks (one class of them rank 14 alone) issue
/// `r0`'s all_reduce, the others `c1`'s barrier, each host at a time of its own after a
/// 1-second stall. The mismatch finding was made at the first disagreeing call the engine
/// took, which depends on which ranks it simulates: folded it named 7 ranks of each side,
/// unfolded ranks 3,8,10 against rank 14 (36 findings against 30; found by a fold hunt). Made
/// once the run ended, it names every caller (R16).
#[test]
fn a_mismatch_names_every_caller_alike_folded_and_unfolded_r16() {
    let disagree = r#"
repeat = 1
[cluster]
ranks = 16
[env]
TORCH_NCCL_ASYNC_ERROR_HANDLING = 3
TORCH_NCCL_USE_COMM_NONBLOCKING = 1
TORCH_NCCL_NONBLOCKING_TIMEOUT = 2
TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC = 2
[host]
comm_init_us = 2000000
init_process_group_us = 0
[groups.world]
timeout_s = 1
[tensors]
x = "1KiB"
[[op]]
label = "ipg"
init_process_group = true
device_id = true
[[op]]
label = "c0"
all_reduce = "x"
async_op = true
work = "w0"
catch = true
[[op]]
wait = "w0"
catch = true
[[op]]
label = "r0"
ranks = [1, 4, 5, 6, 7, 9, 11, 12, 13, 14]
all_reduce = "x"
[[op]]
label = "c1"
barrier = true
catch = true
[[perturb]]
ranks = [0]
before = "c1"
host_delay_us = 1000
[[perturb]]
ranks = [0, 1, 2, 4, 5, 6, 7, 9, 11, 12, 13, 15]
before = "c0"
host_delay_us = 1001000
[[fault]]
ranks = [7]
at = "c1"
kind = "die"
[[fault]]
ranks = [13]
at = "c0"
kind = "hang"
"#;
    let report = folds_alike("disagree", disagree, &[&[4, 5, 6], &[3, 8, 10]]);
    assert!(
        report.contains(
            "[Mismatch] ranks 0,2-3,8,10,15 (6 ranks): ranks disagree on collective SeqNum=2 of \
             group world: ranks 1,4-7,9,11-12,14 (9 ranks) issued ALLREDUCE of 1KiB (r0, line 30), \
             ranks 0,2-3,8,10,15 (6 ranks) issued ALLREDUCE of 4B (c1, line 34)"
        ),
        "{report}"
    );
}

/// Runs `scenario` folded and with `--no-fold`: the reports and exit codes are the same, and
/// in the unfolded Timeline the ranks of each of `identical` have the same host records. The
/// report.
fn folds_alike(name: &str, scenario: &str, identical: &[&[usize]]) -> String {
    let dir = std::env::temp_dir().join(format!("c10dsim-fold-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join(format!("{name}.toml"));
    std::fs::write(&file, scenario).unwrap();
    let file = file.to_str().unwrap();
    let timeline = dir.join("unfolded.json");
    let folded = c10dsim(&["run", file]);
    let unfolded = c10dsim(&[
        "run",
        file,
        "--no-fold",
        "--timeline",
        timeline.to_str().unwrap(),
    ]);
    assert_eq!(folded.status.code(), unfolded.status.code(), "{name}");
    assert_eq!(stdout(&folded), stdout(&unfolded), "{name}");
    let timeline: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&timeline).unwrap()).unwrap();
    let host = |rank: usize| timeline["ranks"][rank]["host"].clone();
    for ranks in identical {
        for pair in ranks.windows(2) {
            assert_eq!(host(pair[0]), host(pair[1]), "{name}: ranks {pair:?}");
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
    stdout(&folded)
}
