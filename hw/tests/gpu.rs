//! Runs a small scenario on the GPU through the public API. Where no GPU, driver or library is
//! found it says why on stderr (outside the test harness's capture) and passes: CI has no GPU.

use std::io::Write;

const SCENARIO: &str = r#"
name = "gpu_smoke"
repeat = 3
warmup = 1
[cluster]
ranks = 1
[tensors]
x = "1MiB"
[streams]
side = {}
[[op]]
mark = "start"
[[op]]
gpu_sleep_us = 2000
[[op]]
all_reduce = "x"
async_op = true
work = "w"
[[op]]
set_stream = "side"
[[op]]
wait = "w"
[[op]]
is_completed = "w"
[[op]]
mark = "after_wait"
[[op]]
kernel = { us = 500, sms = 4 }
[[op]]
device_sync = true
"#;

/// The GPU, or the reason there is none (printed so that the skip is visible).
fn gpu_or_skip(test: &str) -> bool {
    match hw::probe() {
        Ok(_) => true,
        Err(error) => {
            let _ = writeln!(
                std::io::stderr(),
                "SKIPPED {test}: no usable GPU here ({error})"
            );
            false
        }
    }
}

#[test]
fn a_small_scenario_runs_on_the_gpu() {
    if !gpu_or_skip("a_small_scenario_runs_on_the_gpu") {
        return;
    }
    let scenario = sim::scenario::parse("gpu_smoke.toml", SCENARIO).unwrap();
    let timeline = hw::run_scenario(&scenario, &hw::HwOptions::default()).unwrap();
    let rank = &timeline.ranks[0];
    assert_eq!(rank.host.len(), 3 * scenario.ops.len());
    assert_eq!(rank.collectives.len(), 3);
    for c in &rank.collectives {
        let wait = c.wait.unwrap();
        // R12: wait() returned before the Work (queued behind 2 ms of GPU sleep) completed —
        // except in the warm-up, where the lazy communicator init (R8) waited for the sleep.
        assert!(c.iteration < scenario.warmup || !wait.completed_at_return);
        assert!(wait.released_ns >= c.end_ns);
        assert!(c.kernel_start_ns >= c.input_ready_ns);
    }
    // Measured iterations only: the warm-up's first launch of the spin kernel also loads its
    // module (522 µs once on the H200, 2026-12-02).
    let spins: Vec<u64> = rank
        .kernels
        .iter()
        .filter(|k| k.op == 7 && k.iteration >= scenario.warmup)
        .map(|k| k.end_ns - k.start_ns)
        .collect();
    assert!(!spins.is_empty());
    assert!(
        spins.iter().all(|&ns| (490_000..520_000).contains(&ns)),
        "{spins:?}"
    );
    assert!(timeline.machine.contains_key("nccl"));
}

#[test]
fn more_ranks_than_gpus_fail_with_exit_code_2() {
    if !gpu_or_skip("more_ranks_than_gpus_fail_with_exit_code_2") {
        return;
    }
    let text = SCENARIO.replace("ranks = 1", "ranks = 512");
    let scenario = sim::scenario::parse("many.toml", &text).unwrap();
    let error = hw::run_scenario(&scenario, &hw::HwOptions::default()).unwrap_err();
    assert_eq!(error.exit_code(), 2, "{error}");
}
