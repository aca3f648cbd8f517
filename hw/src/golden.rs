//! Golden snapshots of the executor's call log against the fake device, for every catalogue
//! scenario (rank 0; a scenario of several ranks as the one-GPU model stand-in runs it).
//!
//! The safety net for moving ProcessGroupNCCL's behaviour out of the executor: each shipped
//! scenario's log is checked in as `tests/golden/hw/<name>.txt`. A change of behaviour shows as
//! a diff of that file; one made on purpose is recorded with `C10DSIM_BLESS=1` and explained in
//! the commit. The first [`LINES_SHOWN`] calls are written in full, then the number and a hash
//! of all of them, so that a change past the shown part shows too.

use crate::exec::Executor;
use crate::fake::{rank0_plan, FakeDevice};
use std::fmt::Write;
use std::path::{Path, PathBuf};

const LINES_SHOWN: usize = 400;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// FNV-1a: a stable hash, the same on every machine.
fn fnv1a(lines: &[String]) -> u64 {
    lines
        .iter()
        .flat_map(|line| line.bytes().chain(std::iter::once(b'\n')))
        .fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
            (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
        })
}

fn section(out: &mut String, title: &str, lines: &[String]) {
    writeln!(
        out,
        "# {title}: count={} hash={:016x}",
        lines.len(),
        fnv1a(lines)
    )
    .unwrap();
    for line in lines.iter().take(LINES_SHOWN) {
        writeln!(out, "{line}").unwrap();
    }
    if lines.len() > LINES_SHOWN {
        writeln!(out, "… {} more", lines.len() - LINES_SHOWN).unwrap();
    }
}

/// The call log of rank 0 of `text` on the fake device, with the Works it handed the watchdog
/// and the resolved Timeline's record counts.
fn call_log(path: &Path, text: &str) -> String {
    let scenario = sim::scenario::parse(&path.to_string_lossy(), text)
        .unwrap_or_else(|error| panic!("{error}"));
    let mut out = String::new();
    let plan = match rank0_plan(&scenario) {
        Ok(plan) => plan,
        Err(error) => {
            writeln!(out, "refused: {error}").unwrap();
            return out;
        }
    };
    let mut device = FakeDevice::for_catalogue(&scenario);
    let mut executor = Executor::new(&scenario, &plan, &mut device);
    let outcome = executor.setup().and_then(|()| executor.run());
    let watched: Vec<String> = device
        .watched
        .iter()
        .map(|w| {
            let injected = w
                .async_error
                .as_ref()
                .map_or_else(String::new, |error| format!(", async_error: {error:?}"));
            format!(
                "WatchedWork {{ end: {}, enqueue_ns: {}, timeout_ns: {}, description: {:?}{injected} }}",
                w.end, w.enqueue_ns, w.timeout_ns, w.description
            )
        })
        .collect();
    section(&mut out, "calls", &device.calls);
    section(&mut out, "memory", &device.memory_calls);
    section(&mut out, "watched", &watched);
    match outcome {
        Ok(log) => {
            let findings: Vec<String> = log
                .findings
                .iter()
                .map(|f| format!("{:?} op {:?} iteration {:?}", f.kind, f.op, f.iteration))
                .collect();
            if !findings.is_empty() {
                section(&mut out, "findings", &findings);
            }
            match log.resolve(&plan, |ev| Ok(device.time_of(ev))) {
                Ok(rank) => writeln!(
                    out,
                    "# resolved: host={} kernels={} collectives={} marks={} stream_waits={} queries={}",
                    rank.host.len(),
                    rank.kernels.len(),
                    rank.collectives.len(),
                    rank.marks.len(),
                    rank.stream_waits.len(),
                    rank.queries.len()
                )
                .unwrap(),
                Err(error) => writeln!(out, "# resolve error: {error}").unwrap(),
            }
        }
        Err(error) => writeln!(out, "# run error: {error}").unwrap(),
    }
    out
}

#[test]
fn every_catalogue_scenario_matches_its_fake_device_snapshot() {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(root().join("scenarios"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "toml"))
        .collect();
    paths.sort();
    assert!(paths.len() >= 20, "found {} scenarios", paths.len());
    let bless = std::env::var_os("C10DSIM_BLESS").is_some();
    let mut failures = Vec::new();
    for path in &paths {
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(path).unwrap();
        let actual = call_log(Path::new(&format!("scenarios/{name}.toml")), &text);
        let snapshot = root().join("tests/golden/hw").join(format!("{name}.txt"));
        if bless {
            std::fs::write(&snapshot, &actual).unwrap();
            continue;
        }
        let expected = std::fs::read_to_string(&snapshot).unwrap_or_default();
        if expected != actual {
            let line = expected
                .lines()
                .zip(actual.lines())
                .position(|(e, a)| e != a)
                .unwrap_or(expected.lines().count().min(actual.lines().count()));
            failures.push(format!(
                "{} differs from line {}:\n  expected: {}\n  actual:   {}",
                snapshot.display(),
                line + 1,
                expected.lines().nth(line).unwrap_or("<end>"),
                actual.lines().nth(line).unwrap_or("<end>")
            ));
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
