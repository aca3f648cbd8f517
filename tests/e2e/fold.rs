//! Folded runs (docs/scale.md) through the binary: for every catalogue scenario, `run` prints
//! the same report and exits the same with folding as with `--no-fold`, and the fault
//! scenarios at 100,000 ranks print a summary, not a line per rank.

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
