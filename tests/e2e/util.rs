//! Helpers shared by the end-to-end tests.

use sim::scenario::{self, Override, Scenario};
use sim::timeline::Timeline;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output};

pub fn scenarios_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scenarios")
}

/// Every catalogue scenario's file (`scenarios/*.toml`), in name order.
pub fn catalogue_files() -> Vec<PathBuf> {
    let mut paths: Vec<_> = std::fs::read_dir(scenarios_dir())
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "toml"))
        .collect();
    paths.sort();
    assert!(paths.len() > 20, "the catalogue: {paths:?}");
    paths
}

/// Loads a shipped scenario, with `--set`-style overrides.
pub fn load(name: &str, overrides: &[&str]) -> Scenario {
    let path = scenarios_dir().join(name);
    let text = std::fs::read_to_string(&path).expect("shipped scenario is readable");
    let overrides: Vec<Override> = overrides
        .iter()
        .map(|o| Override::parse(o).expect("valid override"))
        .collect();
    let text = sim::sweep::apply_overrides_with_ops(&text, &overrides).expect("overrides apply");
    scenario::parse(name, &text).unwrap_or_else(|e| panic!("{e}"))
}

pub fn run_with(name: &str, overrides: &[&str]) -> Timeline {
    sim::engine::simulate(&load(name, overrides))
}

/// Runs the `c10dsim` binary.
pub fn c10dsim(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_c10dsim"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("the binary runs")
}

/// Runs the binary with `input` on its standard input; what it leaves unread when it exits (a
/// refusal before the end of its input) is dropped.
pub fn c10dsim_fed(args: &[&str], input: &[u8]) -> Output {
    use std::io::Write;
    let mut child = Command::new(env!("CARGO_BIN_EXE_c10dsim"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the binary runs");
    let written = child.stdin.take().unwrap().write_all(input);
    if let Err(error) = written {
        assert_eq!(error.kind(), std::io::ErrorKind::BrokenPipe, "{error}");
    }
    child.wait_with_output().unwrap()
}

pub fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Asserts that a command was refused as bad input (exit 2) with `says` in its standard error.
pub fn refused(output: &Output, says: &str) {
    assert_eq!(output.status.code(), Some(2), "{}", stderr(output));
    assert!(stderr(output).contains(says), "{}", stderr(output));
}

/// Says a test was skipped and why, outside the harness's capture (which swallows `eprintln!`
/// of a passing test), so that the skip is visible in `cargo test`'s output.
pub fn skipped(why: &str) {
    let _ = writeln!(std::io::stderr(), "SKIPPED {why}");
}

/// The `plot` arguments after the CSV that draw `docs/scaling.svg` from `docs/scaling.csv`
/// (docs/perf.md): what `bench --scaling --plot` draws.
pub const SCALING_PLOT: [&str; 11] = [
    "--x",
    "ranks",
    "--y",
    "wall_s",
    "--y",
    "events_per_s",
    "--y",
    "peak_memory_mib",
    "--log-x",
    "--height",
    "1080",
];
