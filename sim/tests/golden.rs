//! Golden snapshots of every catalogue scenario's simulated Timeline.
//!
//! The safety net for refactoring the engine: each shipped scenario in `scenarios/` is
//! simulated and summarised into `tests/golden/sim/<name>.txt`, which is checked in and
//! reviewed. A change of behaviour shows as a diff of that file; a change made on purpose is
//! recorded by running the test with `C10DSIM_BLESS=1` and saying why in the commit.
//!
//! The summary is stable and readable: per rank (all ranks up to four, else the first two and
//! the last) and per iteration (the first two and the last), every record in full, one line
//! each (at most [`LINES_PER_LIST`] per list); every list's record count and a hash of all its
//! records, so that a change anywhere else shows too; the findings and the watchdog's records.

use serde_json::Value;
use std::collections::BTreeSet;
use std::fmt::Write;
use std::path::{Path, PathBuf};

/// Records printed in full per list, rank and snapshot; the rest are covered by the list hash.
const LINES_PER_LIST: usize = 80;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// FNV-1a over the text: a stable hash, the same on every machine.
fn fnv1a(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

fn iteration_of(record: &Value) -> Option<u64> {
    record.get("iteration").and_then(Value::as_u64)
}

/// The summary of a Timeline (as JSON) described in the module's documentation.
fn summarise(timeline: &Value) -> String {
    let mut out = String::new();
    let ops = timeline["ops"].as_array().expect("ops");
    writeln!(out, "# ops").unwrap();
    for op in ops {
        writeln!(
            out,
            "op {} {} key={} line={} kernel={} host={}",
            op["index"], op["name"], op["key"], op["line"], op["kernel_name"], op["host_name"]
        )
        .unwrap();
    }
    let ranks = timeline["ranks"].as_array().expect("ranks");
    let shown_ranks: BTreeSet<usize> = if ranks.len() <= 4 {
        (0..ranks.len()).collect()
    } else {
        [0, 1, ranks.len() - 1].into_iter().collect()
    };
    for (index, rank) in ranks.iter().enumerate() {
        let fields = rank.as_object().expect("rank is an object");
        writeln!(out, "# rank {}", rank["rank"]).unwrap();
        for (name, value) in fields {
            let Some(records) = value.as_array() else {
                if name != "rank" {
                    writeln!(out, "{name} {value}").unwrap();
                }
                continue;
            };
            let all = serde_json::to_string(records).unwrap();
            writeln!(
                out,
                "{name}: count={} hash={:016x}",
                records.len(),
                fnv1a(&all)
            )
            .unwrap();
            if !shown_ranks.contains(&index) {
                continue;
            }
            let last = records.iter().filter_map(iteration_of).max().unwrap_or(0);
            let shown: Vec<&Value> = records
                .iter()
                .filter(|r| iteration_of(r).is_none_or(|i| i <= 1 || i == last))
                .collect();
            for record in shown.iter().take(LINES_PER_LIST) {
                writeln!(out, "  {record}").unwrap();
            }
            if shown.len() > LINES_PER_LIST {
                writeln!(out, "  … {} more", shown.len() - LINES_PER_LIST).unwrap();
            }
        }
    }
    writeln!(out, "# findings").unwrap();
    for finding in timeline["findings"].as_array().expect("findings") {
        writeln!(out, "{finding}").unwrap();
    }
    writeln!(out, "# watchdog").unwrap();
    if let Some(records) = timeline["watchdog"].as_array() {
        for (shown, record) in records.iter().enumerate() {
            if shown == LINES_PER_LIST {
                writeln!(out, "… {} more", records.len() - LINES_PER_LIST).unwrap();
                break;
            }
            writeln!(out, "{record}").unwrap();
        }
        let all = serde_json::to_string(records).unwrap();
        writeln!(
            out,
            "watchdog: count={} hash={:016x}",
            records.len(),
            fnv1a(&all)
        )
        .unwrap();
    }
    out
}

/// Compares `actual` with the checked-in snapshot, or writes it under `C10DSIM_BLESS=1`.
/// Returns a description of the mismatch, if any.
fn compare(path: &Path, actual: &str) -> Option<String> {
    if std::env::var_os("C10DSIM_BLESS").is_some() {
        std::fs::write(path, actual).unwrap();
        return None;
    }
    let expected = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(error) => return Some(format!("{}: {error}", path.display())),
    };
    if expected == actual {
        return None;
    }
    let first = expected
        .lines()
        .zip(actual.lines())
        .position(|(e, a)| e != a)
        .unwrap_or(expected.lines().count().min(actual.lines().count()));
    Some(format!(
        "{} differs from line {}:\n  expected: {}\n  actual:   {}",
        path.display(),
        first + 1,
        expected.lines().nth(first).unwrap_or("<end>"),
        actual.lines().nth(first).unwrap_or("<end>")
    ))
}

#[test]
fn every_catalogue_scenario_matches_its_golden_snapshot() {
    let dir = root().join("scenarios");
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "toml"))
        .collect();
    paths.sort();
    assert!(paths.len() >= 20, "found {} scenarios", paths.len());
    let mut failures = Vec::new();
    for path in &paths {
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(path).unwrap();
        let display = format!("scenarios/{name}.toml");
        let scenario = sim::scenario::parse(&display, &text).unwrap_or_else(|e| panic!("{e}"));
        let timeline = sim::engine::simulate(&scenario);
        let value = serde_json::to_value(&timeline).unwrap();
        let snapshot = root().join("tests/golden/sim").join(format!("{name}.txt"));
        if let Some(mismatch) = compare(&snapshot, &summarise(&value)) {
            failures.push(mismatch);
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} snapshots differ (run with C10DSIM_BLESS=1 to accept a change made on purpose):\n{}",
        failures.len(),
        paths.len(),
        failures.join("\n")
    );
}

#[test]
fn a_changed_time_changes_the_summary() {
    let text = std::fs::read_to_string(root().join("scenarios/exp_b_stream_scope.toml")).unwrap();
    let scenario = sim::scenario::parse("exp_b.toml", &text).unwrap();
    let mut timeline = serde_json::to_value(sim::engine::simulate(&scenario)).unwrap();
    let before = summarise(&timeline);
    let last_rank = timeline["ranks"].as_array().unwrap().len() - 1;
    let host = timeline["ranks"][last_rank]["host"].as_array_mut().unwrap();
    let middle = host.len() / 2;
    let end = host[middle]["end_ns"].as_u64().unwrap();
    host[middle]["end_ns"] = Value::from(end + 1);
    assert_ne!(before, summarise(&timeline));
}
