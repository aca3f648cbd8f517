//! The engine-equivalence test: for every catalogue scenario, the steps the simulator's host
//! executed for rank 0 equal the steps `hw`'s executor ran on the fake device (a scenario of
//! several ranks as the one-GPU model stand-in runs it, as `golden.rs` does). Both engines
//! execute the steps `sim::pg` lowers the program to, so a difference means one engine
//! skipped, repeated or reordered a step of ProcessGroupNCCL.
//!
//! The fake device never times out and `hw` does not inject `[[fault]]`s, so where a fault or a
//! timeout (and what follows: an abort, an exit) stops rank 0 in the simulation, the
//! simulator's steps are compared up to there; where the program catches a timed-out wait's
//! raise, the fake device plays the GPU backlog that holds the Work (`FakeDevice::for_catalogue`),
//! and where hw then takes the process down at the watchdog's verdict (the simulator does after
//! the dump wait), hw's steps are compared up to there.

use crate::exec::Executor;
use crate::fake::{rank0_plan, FakeDevice};
use std::path::{Path, PathBuf};

fn catalogue() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios");
    let mut paths: Vec<PathBuf> = std::fs::read_dir(root)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "toml"))
        .collect();
    paths.sort();
    paths
}

/// Where two step logs first differ, or `None` when they agree as the scenario requires:
/// `faults` where the simulation stopped rank 0 early, `taken_down` where hw did (it takes the
/// process down at the watchdog's verdict, the simulator after the dump wait).
fn first_difference(
    simulated: &[String],
    ran: &[String],
    (faults, taken_down): (bool, bool),
) -> Option<usize> {
    let common = simulated.len().min(ran.len());
    if let Some(index) = (0..common).find(|&i| simulated[i] != ran[i]) {
        return Some(index);
    }
    let complete = simulated.len() == ran.len()
        || (faults && simulated.len() < ran.len())
        || (taken_down && ran.len() < simulated.len());
    (!complete).then_some(common)
}

#[test]
fn both_engines_execute_the_same_steps_for_every_catalogue_scenario() {
    let paths = catalogue();
    assert!(paths.len() >= 20, "found {} scenarios", paths.len());
    let mut failures = Vec::new();
    let mut refused = Vec::new();
    for path in &paths {
        let text = std::fs::read_to_string(path).unwrap();
        let scenario = sim::scenario::parse(&path.to_string_lossy(), &text)
            .unwrap_or_else(|error| panic!("{error}"));
        let plan = rank0_plan(&scenario).unwrap();
        if Executor::<FakeDevice>::refusal(&scenario, &plan).is_some() {
            // Refused on hardware (its snapshot in tests/golden/hw says why): no steps to
            // compare.
            refused.push(path.file_name().unwrap().to_string_lossy().into_owned());
            continue;
        }
        let mut device = FakeDevice::for_catalogue(&scenario);
        let mut executor = Executor::new(&scenario, &plan, &mut device);
        // An error (an out-of-memory, say) stops hw: the steps up to it are compared.
        let outcome = executor.setup().and_then(|()| executor.run());
        let taken_down = outcome.is_ok_and(|log| log.ended_early);
        let ran: Vec<String> = executor.executed().iter().map(|s| s.to_string()).collect();
        let simulated: Vec<String> = sim::engine::executed_steps(&scenario, 0)
            .iter()
            .map(|s| s.to_string())
            .collect();
        // A process that dies at its first op (rank0_crash_init) runs no step in either.
        assert!(
            !ran.is_empty() || simulated.is_empty(),
            "{}: hw ran no step",
            path.display()
        );
        // Did a fault or a timeout end rank 0's process before its program did?
        let stopped = !scenario.faults.is_empty()
            || sim::engine::simulate(&scenario).ranks[0]
                .end
                .is_some_and(|end| end.status != sim::timeline::ExitStatus::Clean);
        if let Some(at) = first_difference(&simulated, &ran, (stopped, stopped && taken_down)) {
            failures.push(format!(
                "{}: step {at} differs (simulated {} steps, hw ran {}):\n  simulator: {}\n  hw:        {}",
                path.display(),
                simulated.len(),
                ran.len(),
                simulated.get(at).map_or("<end>", String::as_str),
                ran.get(at).map_or("<end>", String::as_str),
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert_eq!(
        refused,
        ["watchdog_stuck.toml"],
        "refused on hardware: the stuck watchdog"
    );
}

#[test]
fn a_missing_or_extra_step_is_a_difference() {
    let steps = |list: &[&str]| list.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let full = steps(&["call", "record s0 e0", "return"]);
    assert_eq!(first_difference(&full, &full, (false, false)), None);
    assert_eq!(first_difference(&full[..2], &full, (false, false)), Some(2));
    assert_eq!(first_difference(&full[..2], &full, (true, false)), None);
    assert_eq!(first_difference(&full, &full[..2], (true, false)), Some(2));
    assert_eq!(first_difference(&full, &full[..2], (true, true)), None);
    assert_eq!(first_difference(&full[..2], &full, (false, true)), Some(2));
    let reordered = steps(&["record s0 e0", "call", "return"]);
    assert_eq!(first_difference(&reordered, &full, (true, true)), Some(0));
}

#[test]
fn both_engines_skip_then_run_the_wait_on_a_result_the_previous_iteration_left() {
    // R30 across iterations (`y = fcol.all_reduce(x); use(y); x = fcol.all_reduce(y)`): the
    // wait before the first call does nothing in the first iteration and waits in the others,
    // in both engines alike.
    let text = "repeat = 3\n[cluster]\nranks = 2\n[tensors]\nx = \"1MiB\"\ny = \"1MiB\"\n[[op]]\nfunctional_all_reduce = \"x\"\nresult = \"y\"\n[[op]]\nkernel = { us = 5 }\nreads = [\"y\"]\n[[op]]\nfunctional_all_reduce = \"y\"\nresult = \"x\"\n";
    let scenario = sim::scenario::parse("fcol_loop.toml", text).unwrap();
    let plan = rank0_plan(&scenario).unwrap();
    let mut device = FakeDevice::default();
    let mut executor = Executor::new(&scenario, &plan, &mut device);
    executor.setup().and_then(|()| executor.run()).unwrap();
    let ran: Vec<String> = executor.executed().iter().map(|s| s.to_string()).collect();
    let simulated: Vec<String> = sim::engine::executed_steps(&scenario, 0)
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert_eq!(first_difference(&simulated, &ran, (false, false)), None);
    // Three iterations of two calls, each but the last one's second waited.
    let waits = ran.iter().filter(|step| step.starts_with("wait ")).count();
    assert_eq!(waits, 5);
}
