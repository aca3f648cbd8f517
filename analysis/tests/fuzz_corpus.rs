//! The fuzz targets' short run on the stable toolchain (CI): every seed of `fuzz/seeds/` and
//! every input a campaign found and `fuzz/regressions/` keeps goes through its target's entry
//! point (`analysis::robustness`; `hw::robustness` for `hw`'s launch options and the parts
//! `hw-merge` joins; the `simulation` target reads the scenario seeds), then proptest mutates
//! the seeds (byte edits, cuts and splices) a few hundred times per target. A panic fails the test; the catalogue's own
//! files must also be accepted. The long coverage-guided campaigns: docs/reliability.md.

use analysis::robustness;
use proptest::prelude::*;
use std::path::{Path, PathBuf};

type Entry = fn(&[u8]) -> bool;

const TARGETS: [(&str, Entry); 12] = [
    ("scenario", robustness::scenario),
    ("set_override", robustness::set_override),
    ("timeline", robustness::timeline),
    ("profile", robustness::profile),
    ("sweep_csv", robustness::sweep_csv),
    ("flight_recorder", robustness::flight_recorder),
    ("kineto", robustness::kineto),
    ("arguments", robustness::arguments),
    ("torch_log", robustness::torch_log),
    ("calibration", robustness::calibration),
    ("hw_options", hw::robustness::launch_options),
    ("hw_merge", hw::robustness::merge_parts),
];

/// The `simulation` target's entry point, with the simulator its fuzz target passes too.
fn simulation(bytes: &[u8]) -> bool {
    robustness::simulation(bytes, &|scenario, fold, summary| {
        let options = sim::engine::Options {
            fold,
            summary,
            ..sim::engine::Options::default()
        };
        sim::engine::simulate_with(scenario, options).0
    })
}

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz")
}

fn files(kind: &str, target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let Ok(entries) = std::fs::read_dir(fuzz_dir().join(kind).join(target)) else {
        return Vec::new();
    };
    let mut files: Vec<(PathBuf, Vec<u8>)> = entries
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.is_file())
        .map(|path| {
            let bytes = std::fs::read(&path).unwrap();
            (path, bytes)
        })
        .collect();
    files.sort();
    files
}

fn seeds(target: &str) -> Vec<Vec<u8>> {
    files("seeds", target)
        .into_iter()
        .map(|(_, bytes)| bytes)
        .collect()
}

#[test]
fn every_seed_is_accepted_and_every_kept_crash_input_runs() {
    for (target, entry) in TARGETS {
        let seeds = files("seeds", target);
        assert!(!seeds.is_empty(), "fuzz/seeds/{target} is empty");
        for (path, bytes) in seeds {
            // A `--set` seed may name a key its scenario refuses; every other seed is a file
            // of the catalogue and must read.
            let accepted = entry(&bytes);
            assert!(
                accepted || target == "set_override",
                "{} is not accepted",
                path.display()
            );
        }
        for (_, bytes) in files("regressions", target) {
            entry(&bytes);
        }
    }
}

#[test]
fn the_scenario_seeds_small_enough_to_simulate_fold_exactly() {
    // The `simulation` target reads the scenario seeds; the few too large to simulate at once
    // (over `robustness::SIMULATION_RANKS` ranks or `SIMULATION_EVENTS` events) it refuses.
    let seeds = files("seeds", "scenario");
    let simulated = (seeds.iter())
        .filter(|(_, bytes)| simulation(bytes))
        .count();
    assert!(
        simulated * 10 >= seeds.len() * 8,
        "{simulated} of {} scenario seeds simulated",
        seeds.len()
    );
    // A kept input must still simulate, or it would test nothing.
    for (path, bytes) in files("regressions", "simulation") {
        assert!(simulation(&bytes), "{}", path.display());
    }
}

/// One edit of a seed: overwrite a byte, insert bytes, cut a range, or splice in a piece of
/// another seed (positions are taken modulo the length).
#[derive(Debug, Clone)]
enum Edit {
    Overwrite(usize, u8),
    Insert(usize, Vec<u8>),
    Cut(usize, usize),
    Splice(usize, usize, usize, usize),
}

fn edit() -> impl Strategy<Value = Edit> {
    let byte = prop_oneof![
        any::<u8>(),
        prop::sample::select(b"0123456789-.e=[]{}\",\n ".to_vec())
    ];
    prop_oneof![
        (any::<usize>(), any::<u8>()).prop_map(|(at, byte)| Edit::Overwrite(at, byte)),
        (any::<usize>(), prop::collection::vec(byte, 1..12))
            .prop_map(|(at, bytes)| Edit::Insert(at, bytes)),
        (any::<usize>(), 1usize..64).prop_map(|(at, len)| Edit::Cut(at, len)),
        (any::<usize>(), any::<usize>(), any::<usize>(), 1usize..256)
            .prop_map(|(seed, from, at, len)| Edit::Splice(seed, from, at, len)),
    ]
}

fn mutate(seeds: &[Vec<u8>], seed: usize, edits: &[Edit]) -> Vec<u8> {
    let mut bytes = seeds[seed % seeds.len()].clone();
    for edit in edits {
        let at = |position: usize, bytes: &Vec<u8>| position % (bytes.len() + 1);
        match edit {
            Edit::Overwrite(position, byte) => {
                if !bytes.is_empty() {
                    let index = position % bytes.len();
                    bytes[index] = *byte;
                }
            }
            Edit::Insert(position, inserted) => {
                let index = at(*position, &bytes);
                bytes.splice(index..index, inserted.iter().copied());
            }
            Edit::Cut(position, len) => {
                let start = at(*position, &bytes);
                let end = (start + len).min(bytes.len());
                bytes.drain(start..end);
            }
            Edit::Splice(other, from, position, len) => {
                let donor = &seeds[other % seeds.len()];
                let start = from % (donor.len() + 1);
                let end = (start + len).min(donor.len());
                let index = at(*position, &bytes);
                bytes.splice(index..index, donor[start..end].iter().copied());
            }
        }
    }
    bytes
}

/// Runs `cases` mutations of `target`'s seeds through `entry`; returns how many it accepted.
fn mutations(target: &str, entry: Entry, cases: u32) -> usize {
    let seeds = seeds(target);
    let config = ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    };
    let accepted = std::cell::Cell::new(0);
    proptest!(config, |(seed in any::<usize>(), edits in prop::collection::vec(edit(), 1..6))| {
        if entry(&mutate(&seeds, seed, &edits)) {
            accepted.set(accepted.get() + 1);
        }
    });
    accepted.get()
}

#[test]
fn mutated_scenarios_never_panic() {
    mutations("scenario", robustness::scenario, 400);
}

#[test]
fn mutated_small_scenarios_never_panic_and_fold_exactly() {
    // Most edits break the TOML or the scenario; about one in twelve simulates (18–29 of 300
    // in three runs; the seed is drawn afresh each run), and at least 5 must, for the fold
    // check to bite: fewer is a chance below one in a million.
    let simulated = mutations("scenario", simulation, 300);
    assert!(
        simulated >= 5,
        "{simulated} of 300 mutated scenarios simulated"
    );
}

#[test]
fn mutated_set_overrides_never_panic() {
    mutations("set_override", robustness::set_override, 400);
}

#[test]
fn mutated_timelines_never_panic() {
    mutations("timeline", robustness::timeline, 200);
}

#[test]
fn mutated_profiles_never_panic() {
    mutations("profile", robustness::profile, 400);
}

#[test]
fn mutated_sweep_csvs_never_panic() {
    mutations("sweep_csv", robustness::sweep_csv, 400);
}

#[test]
fn mutated_flight_recorder_dumps_never_panic() {
    mutations("flight_recorder", robustness::flight_recorder, 400);
}

#[test]
fn mutated_kineto_traces_never_panic() {
    mutations("kineto", robustness::kineto, 200);
}

#[test]
fn mutated_arguments_never_panic() {
    mutations("arguments", robustness::arguments, 400);
}

#[test]
fn mutated_torch_logs_never_panic() {
    mutations("torch_log", robustness::torch_log, 200);
}

#[test]
fn mutated_calibrations_never_panic() {
    mutations("calibration", robustness::calibration, 200);
}

#[test]
fn mutated_launch_environments_never_break_a_layout() {
    mutations("hw_options", hw::robustness::launch_options, 400);
}

#[test]
fn mutated_hw_merge_parts_never_panic() {
    mutations("hw_merge", hw::robustness::merge_parts, 200);
}
