//! Same scenario and seed ⇒ byte-identical output, through the binary: every catalogue
//! scenario run twice, in two processes (whose hash maps are seeded apart), writes the same
//! report, Timeline, per-rank traces, Gantt chart and Flight Recorder dumps, and the same
//! notes on stderr but for the output paths; folded and `--no-fold`, everything is the same
//! but the Timeline, which a folded run writes folded (docs/scale.md) and which expands to the
//! unfolded one. (`--trace` writes the per-rank traces' events as one file: `cli.rs` checks it
//! on one scenario, which keeps this test's cost down; `coalescing`'s is 28 MB.)

use crate::util::{c10dsim, catalogue_files, stderr};
use sim::timeline::Timeline;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Every file under `dir`, by its path relative to `dir`, with its bytes.
fn files_under(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut files = BTreeMap::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(folder) = pending.pop() {
        for entry in std::fs::read_dir(&folder).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
            } else {
                let relative = path.strip_prefix(dir).unwrap().to_path_buf();
                files.insert(relative, std::fs::read(&path).unwrap());
            }
        }
    }
    files
}

/// What one `run` wrote: its exit code, stdout, stderr (with `dir` written as `OUT`) and
/// every output file.
struct Outputs {
    code: Option<i32>,
    stdout: Vec<u8>,
    stderr: String,
    files: BTreeMap<PathBuf, Vec<u8>>,
}

/// Runs `file` with every output of `run` into a fresh `dir`.
fn run_into(file: &str, dir: &Path, extra: &[&str]) -> Outputs {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).unwrap();
    let path = |name: &str| dir.join(name).display().to_string();
    let (timeline, traces, svg, dumps) = (
        path("timeline.json"),
        path("traces"),
        path("gantt.svg"),
        path("dumps"),
    );
    let mut args = vec![
        "run",
        file,
        "--json",
        "--timeline",
        &timeline,
        "--trace-dir",
        &traces,
        "--svg",
        &svg,
        "--fr-dir",
        &dumps,
    ];
    args.extend_from_slice(extra);
    let output = c10dsim(&args);
    Outputs {
        code: output.status.code(),
        stderr: stderr(&output).replace(&dir.display().to_string(), "OUT"),
        stdout: output.stdout,
        files: files_under(dir),
    }
}

fn timeline_of(outputs: &Outputs) -> Timeline {
    let bytes = &outputs.files[Path::new("timeline.json")];
    serde_json::from_slice(bytes).unwrap()
}

#[test]
fn every_catalogue_scenario_writes_the_same_bytes_in_every_run_folded_or_not() {
    let root = std::env::temp_dir().join(format!("c10dsim-determinism-{}", std::process::id()));
    for path in catalogue_files() {
        let file = path.to_str().unwrap();
        // The three processes at once: the test's cost is its slowest scenario's writing.
        let (first, again, unfolded) = std::thread::scope(|scope| {
            let again = scope.spawn(|| run_into(file, &root.join("again"), &[]));
            let unfolded = scope.spawn(|| run_into(file, &root.join("unfolded"), &["--no-fold"]));
            let first = run_into(file, &root.join("first"), &[]);
            (first, again.join().unwrap(), unfolded.join().unwrap())
        });
        assert!(
            matches!(first.code, Some(0 | 1)),
            "{file}: {}",
            first.stderr
        );
        assert!(!first.stdout.is_empty(), "{file}");
        assert!(first.files.len() >= 3, "{file}: {:?}", first.files.keys());
        for (what, other) in [("run again", &again), ("--no-fold", &unfolded)] {
            assert_eq!(first.code, other.code, "{file}, {what}: exit code");
            assert!(first.stdout == other.stdout, "{file}, {what}: stdout");
            assert_eq!(first.stderr, other.stderr, "{file}, {what}: stderr");
            let names = |outputs: &Outputs| outputs.files.keys().cloned().collect::<Vec<_>>();
            assert_eq!(names(&first), names(other), "{file}, {what}: files");
        }
        for (name, bytes) in &first.files {
            assert!(
                bytes == &again.files[name],
                "{file}: {} differs",
                name.display()
            );
            if name != Path::new("timeline.json") {
                let unfolded_bytes = &unfolded.files[name];
                assert!(
                    bytes == unfolded_bytes,
                    "{file}: {} differs with --no-fold",
                    name.display()
                );
            }
        }
        let expanded = serde_json::to_string(&timeline_of(&first).expand()).unwrap();
        let unfolded_json = serde_json::to_string(&timeline_of(&unfolded)).unwrap();
        assert!(
            expanded == unfolded_json,
            "{file}: the folded Timeline expanded"
        );
    }
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn the_nccl_tests_table_is_the_same_in_every_run_folded_or_not() {
    let file = "scenarios/nccl_tests_all_reduce.toml";
    let table = |extra: &[&str]| {
        let mut args = vec!["run", file, "--nccl-tests"];
        args.extend_from_slice(extra);
        let output = c10dsim(&args);
        assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
        output.stdout
    };
    let first = table(&[]);
    assert!(String::from_utf8_lossy(&first).contains("# Avg bus bandwidth"));
    assert!(first == table(&[]), "run again");
    assert!(first == table(&["--no-fold"]), "--no-fold");
}

/// A misspelt label as far from several labels: the error names the same one in every process
/// (the labels are looked up in a hash map, whose order is seeded per process).
#[test]
fn a_misspelt_label_suggests_the_same_label_in_every_run() {
    let dir = std::env::temp_dir().join(format!("c10dsim-tied-label-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ops: String = ["ab", "ac", "ad", "ae", "af", "ag"]
        .iter()
        .map(|label| format!("[[op]]\nlabel = \"{label}\"\nall_reduce = \"x\"\n"))
        .collect();
    let head = "name = \"tied\"\n[cluster]\nranks = 2\n[tensors]\nx = \"1MiB\"\n";
    for (what, tail) in [
        (
            "perturb.before",
            "[[perturb]]\nranks = [1]\nbefore = \"aa\"\nhost_delay_us = 10\n",
        ),
        (
            "fault.at",
            "[[fault]]\nranks = [1]\nat = \"aa\"\nkind = \"hang\"\n",
        ),
    ] {
        let file = dir.join(format!("{what}.toml"));
        std::fs::write(&file, format!("{head}{ops}{tail}")).unwrap();
        for _ in 0..8 {
            let output = c10dsim(&["check", file.to_str().unwrap()]);
            assert_eq!(output.status.code(), Some(2), "{what}: {}", stderr(&output));
            assert!(
                stderr(&output)
                    .contains("names label \"aa\", which no op has; did you mean \"ab\"?"),
                "{what}: {}",
                stderr(&output)
            );
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
