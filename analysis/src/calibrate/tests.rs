//! The calibration's unit tests: profiles parsed, written and rendered; fits that recover the
//! parameters a simulation ran with.

use super::*;

fn number(profile: &Profile, key: &str) -> f64 {
    match profile.values[key] {
        ProfileValue::Number(x) => x,
        ProfileValue::Text(_) => panic!("{key} is text"),
    }
}

/// The calibration of a default profile to the simulation of one scenario.
fn calibrated_to_its_simulation(path: &str, text: &str) -> Calibration {
    let scenario = sim::scenario::parse(path, text).unwrap();
    let timeline = sim::engine::simulate(&scenario);
    let runs = [CalibrationRun {
        scenario: &scenario,
        timeline: &timeline,
    }];
    calibrate(&runs, &Profile::default())
}

#[test]
fn a_profile_parses_and_errors_name_line_and_column() {
    let text = "[profile]\nname = \"m\"\nsources = [\"datasheet\"]\n[network]\nalpha_us = 2\n[cluster]\ngpu = \"h200\"\n";
    let profile = parse_profile("m.toml", text).unwrap();
    assert_eq!(profile.name, "m");
    assert_eq!(profile.sources, ["datasheet"]);
    assert_eq!(number(&profile, "network.alpha_us"), 2.0);
    assert_eq!(
        profile.values["cluster.gpu"],
        ProfileValue::Text("h200".into())
    );
    for (text, says) in [
        (
            "[host]\nwiat_us = 1\n",
            "m.toml:2:1: error: unknown key host.wiat_us; did you mean \"wait_us\"?",
        ),
        (
            "[host]\nwait_us = \"1\"\n",
            "m.toml:2:11: error: host.wait_us must be a number",
        ),
        (
            "[host]\nwait_us = -1\n",
            "m.toml:2:11: error: host.wait_us must be ≥ 0",
        ),
        (
            "[cluster]\ngpu = 3\n",
            "m.toml:2:7: error: cluster.gpu must be a string",
        ),
        (
            "[hots]\nX = 1\n",
            "m.toml:1:2: error: unknown table [hots]; expected [profile], [cluster], [network], [host], [memory], [env]",
        ),
        (
            "env = 1\n",
            "m.toml:1:1: error: \"env\" must be a table ([profile], [cluster], [network], [host], [memory], [env])",
        ),
        ("[host\n", "m.toml:1:"),
    ] {
        let error = parse_profile("m.toml", text).unwrap_err().to_string();
        assert!(error.starts_with(says), "{error} should start with {says}");
    }
}

#[test]
fn a_fitted_collective_call_shorter_than_the_tail_lowers_the_tail() {
    let profile = parse_profile("p.toml", "[host]\ncollective_us = 12.5\n").unwrap();
    let own_tail =
        "[host]\ncollective_us = 70\ncollective_tail_us = 20\n[[op]]\ndevice_sync = true\n";
    let replaced = apply_profile(own_tail, &profile, ProfileMode::Replace).unwrap();
    let host = sim::scenario::parse("s.toml", &replaced).unwrap().host;
    assert_eq!(
        (host.collective_ns, host.collective_tail_ns),
        (12_500, 12_500)
    );
    let short = parse_profile("p.toml", "[host]\ncollective_us = 4\n").unwrap();
    let default_tail = "[[op]]\ndevice_sync = true\n";
    let filled = apply_profile(default_tail, &short, ProfileMode::FillUnset).unwrap();
    let host = sim::scenario::parse("s.toml", &filled).unwrap().host;
    assert_eq!(
        (host.collective_ns, host.collective_tail_ns),
        (4_000, 4_000)
    );
    let long = parse_profile("p.toml", "[host]\ncollective_us = 40\n").unwrap();
    let kept = apply_profile(own_tail, &long, ProfileMode::Replace).unwrap();
    let host = sim::scenario::parse("s.toml", &kept).unwrap().host;
    assert_eq!(host.collective_tail_ns, 20_000);
}

#[test]
fn a_fitted_enqueue_and_synchronous_call_leave_room_for_the_tail() {
    // Fitted from torch runs without a prior: the enqueue against the default tail, no tail.
    let profile = parse_profile(
        "p.toml",
        "[host]\ncollective_us = 22.153\nsync_collective_us = 21.581\ncollective_enqueue_us = 3.034\n",
    )
    .unwrap();
    let own_tail =
        "[host]\ncollective_us = 70\ncollective_tail_us = 20\n[[op]]\ndevice_sync = true\n";
    let replaced = apply_profile(own_tail, &profile, ProfileMode::Replace).unwrap();
    let host = sim::scenario::parse("s.toml", &replaced).unwrap().host;
    assert_eq!(
        (host.collective_enqueue_ns, host.collective_tail_ns),
        (3_034, 18_547)
    );
    // The scenario's own call wins under `machine = …`: its tail fits it and stays.
    let short = parse_profile("p.toml", "[host]\ncollective_us = 12.5\n").unwrap();
    let filled = apply_profile(own_tail, &short, ProfileMode::FillUnset).unwrap();
    let host = sim::scenario::parse("s.toml", &filled).unwrap().host;
    assert_eq!(
        (host.collective_ns, host.collective_tail_ns),
        (70_000, 20_000)
    );
}

/// The tail is lowered in the nanoseconds the scenario reads its costs in: a call and an
/// enqueue finer than a nanosecond round apart (13.0004 µs to 13 000 ns, 3.0346 µs to
/// 3 035 ns), and a tail lowered in microseconds (9.966 µs) left the parts 1 ns over the call.
#[test]
fn a_lowered_tail_fits_the_call_in_whole_nanoseconds() {
    let profile = parse_profile("p.toml", "[host]\nsync_collective_us = 13.0004\n").unwrap();
    let scenario = "[host]\ncollective_enqueue_us = 3.0346\n[[op]]\ndevice_sync = true\n";
    let applied = apply_profile(scenario, &profile, ProfileMode::Replace).unwrap();
    let host = sim::scenario::parse("s.toml", &applied)
        .unwrap_or_else(|error| panic!("{error}\n{applied}"))
        .host;
    assert_eq!(
        (
            host.sync_collective_ns,
            host.collective_enqueue_ns,
            host.collective_tail_ns
        ),
        (13_000, 3_035, 9_965)
    );
}

#[test]
fn the_scenario_keeps_its_keys_unless_the_profile_replaces_them() {
    let profile = parse_profile("p.toml", "[host]\nwait_us = 2\nlaunch_us = 3\n").unwrap();
    let scenario = "machine = \"p\"\n[host]\nwait_us = 9\n[[op]]\ndevice_sync = true\n";
    let filled = apply_profile(scenario, &profile, ProfileMode::FillUnset).unwrap();
    let parsed = sim::scenario::parse("s.toml", &filled).unwrap();
    assert_eq!(parsed.host.wait_ns, 9_000);
    assert_eq!(parsed.host.launch_ns, 3_000);
    let replaced = apply_profile(scenario, &profile, ProfileMode::Replace).unwrap();
    assert_eq!(
        sim::scenario::parse("s.toml", &replaced)
            .unwrap()
            .host
            .wait_ns,
        2_000
    );
    // The machine key is blanked in place and an existing value replaced in place: the op
    // stays on line 4 (an inserted key moves the lines below it).
    let only_wait = parse_profile("p.toml", "[host]\nwait_us = 2\n").unwrap();
    let replaced = apply_profile(scenario, &only_wait, ProfileMode::Replace).unwrap();
    assert_eq!(
        sim::scenario::parse("s.toml", &replaced).unwrap().ops[0].line,
        4
    );
}

#[test]
fn calibration_recovers_the_parameters_a_simulation_ran_with() {
    // Two ranks on one node, all_reduces of 1 KiB to 256 MiB, waits, bf16 GEMMs.
    let text = "repeat = 3\nwarmup = 1\n[cluster]\nranks = 2\ngpu = \"h200\"\ngemm_efficiency = 0.8\n\
        [network]\nnvlink_gbps = 300\nalpha_us = 7\n[host]\nwait_us = 3\ncollective_us = 12\nlaunch_us = 6\n\
        [tensors]\na = \"1KiB\"\nb = \"1MiB\"\nc = \"64MiB\"\nd = \"256MiB\"\n\
        [[op]]\nall_reduce = \"a\"\nasync_op = true\nwork = \"wa\"\n[[op]]\nwait = \"wa\"\n\
        [[op]]\nall_reduce = \"b\"\nasync_op = true\nwork = \"wb\"\n[[op]]\nwait = \"wb\"\n\
        [[op]]\nall_reduce = \"c\"\nasync_op = true\nwork = \"wc\"\n[[op]]\nwait = \"wc\"\n\
        [[op]]\nall_reduce = \"d\"\nasync_op = true\nwork = \"wd\"\n[[op]]\nwait = \"wd\"\n\
        [[op]]\ngemm = [4096, 4096, 4096]\n[[op]]\ngemm = [8192, 8192, 8192]\n";
    let calibration = calibrated_to_its_simulation("cal.toml", text);
    let fitted = |key: &str| number(&calibration.profile, key);
    let close = |key: &str, truth: f64| {
        let value = fitted(key);
        assert!(
            (value - truth).abs() <= 0.01 * truth,
            "{key}: fitted {value}, ran with {truth}"
        );
    };
    close("network.nvlink_gbps", 300.0);
    close("network.alpha_us", 7.0);
    close("host.wait_us", 3.0);
    close("host.collective_us", 12.0);
    close("host.launch_us", 6.0);
    close("cluster.gemm_efficiency", 0.8);
    let rendered = render_profile(&calibration.profile, &calibration.fitted);
    assert!(rendered.contains("nvlink_gbps = 300"), "{rendered}");
    // What it writes is a profile again.
    assert_eq!(
        parse_profile("out.toml", &rendered).unwrap().values,
        calibration.profile.values
    );
}

#[test]
fn one_rank_runs_recover_the_floor_the_nccl_launch_latency_and_the_sync_and_coalesced_calls() {
    // Timed Works on one rank: synchronous all_reduces in a tight loop (the stream idle
    // at each call: the floor plus the NCCL launch latency) and one behind a 5 ms sleep
    // (the stream busy: the floor alone).
    let text = "torch = \"2.12\"\nrepeat = 3\nwarmup = 1\n[cluster]\nranks = 1\n[network]\nkernel_floor_us = 1.5\n\
        [host]\ncollective_us = 25\ncollective_tail_us = 9\nsync_collective_us = 20\nnccl_launch_latency_us = 1.2\n\
        coalesced_call_us = 4\n[env]\nTORCH_NCCL_ENABLE_TIMING = 1\n[groups.world]\neager_init = true\n\
        [tensors]\nx = \"1KiB\"\ngrads = { size = \"1KiB\", count = 11 }\n\
        [[op]]\nall_reduce = \"grads\"\ncoalesce = true\n\
        [[op]]\nall_reduce = \"x\"\n[[op]]\nall_reduce = \"x\"\n[[op]]\nall_reduce = \"x\"\n\
        [[op]]\ngpu_sleep_us = 5000\n[[op]]\nall_reduce = \"x\"\n[[op]]\ndevice_sync = true\n";
    let calibration = calibrated_to_its_simulation("one.toml", text);
    let fitted = |key: &str| number(&calibration.profile, key);
    assert!((fitted("network.kernel_floor_us") - 1.5).abs() < 1e-6);
    assert!((fitted("host.nccl_launch_latency_us") - 1.2).abs() < 1e-6);
    assert!((fitted("host.sync_collective_us") - 20.0).abs() < 1e-6);
    // A coalesced block: ten recorded calls and one synchronous launching call.
    assert!((fitted("host.coalesced_call_us") - 4.0).abs() < 1e-6);
}

#[test]
fn a_synchronous_send_is_not_a_sample_of_the_synchronous_collective_cost() {
    // `dist.send` / `dist.recv` run on the internal stream and wait (R11): their host calls
    // are an async call and a wait, not `sync_collective_us`.
    let text = "torch = \"2.12\"\nrepeat = 3\nwarmup = 1\n[cluster]\nranks = 2\n\
        [host]\ncollective_us = 25\ncollective_tail_us = 9\nsync_collective_us = 20\n\
        [groups.world]\neager_init = true\n[tensors]\nx = \"1KiB\"\n\
        [[op]]\nall_reduce = \"x\"\n\
        [[op]]\nranks = [0]\nsend = \"x\"\npeer = 1\n[[op]]\nranks = [1]\nrecv = \"x\"\npeer = 0\n\
        [[op]]\nranks = [0]\nsend = \"x\"\npeer = 1\n[[op]]\nranks = [1]\nrecv = \"x\"\npeer = 0\n";
    let calibration = calibrated_to_its_simulation("send.toml", text);
    let fitted = number(&calibration.profile, "host.sync_collective_us");
    assert!((fitted - 20.0).abs() < 1e-6, "{fitted}");
}

#[test]
fn held_out_errors_take_the_timing_metrics() {
    let text = "[cluster]\nranks = 2\n[tensors]\nx = \"64MiB\"\n[[op]]\nall_reduce = \"x\"\n";
    let scenario = sim::scenario::parse("v.toml", text).unwrap();
    let a = sim::engine::simulate(&scenario);
    let result = validation(&[crate::diff::diff(
        &a,
        &a,
        &crate::diff::DiffOptions::default(),
    )]);
    assert_eq!(
        result.rows.len(),
        3,
        "host_call, stream_interval and kernel µs"
    );
    assert_eq!(result.median_error_pct, Some(0.0));
    assert!(render_validation(&result).contains("median error 0.00% over 3 timing metrics"));
    assert_eq!(result.rows[0].scenario, "v (2 ranks)");
}

#[test]
fn a_pytorch_release_picks_the_behaviour_profile_it_runs() {
    use sim::scenario::TorchProfile;
    assert_eq!(
        TorchProfile::of_release("2.11.0+cu130"),
        Some(TorchProfile::V2_12)
    );
    assert_eq!(TorchProfile::of_release("2.8.0"), Some(TorchProfile::V2_12));
    assert_eq!(
        TorchProfile::of_release("2.7.1+cu126"),
        Some(TorchProfile::V2_5)
    );
    assert_eq!(TorchProfile::of_release("2.5.1"), Some(TorchProfile::V2_5));
    assert_eq!(TorchProfile::of_release("3.0.0"), Some(TorchProfile::V2_12));
    assert_eq!(TorchProfile::of_release("nightly"), None);
}

#[test]
fn a_measured_run_is_simulated_with_its_timing_variable_and_its_pytorch_profile() {
    let mut timeline = sim::engine::simulate(
        &sim::scenario::parse(
            "m.toml",
            "[cluster]\nranks = 1\n[[op]]\ndevice_sync = true\n",
        )
        .unwrap(),
    );
    timeline.machine.insert(
        "env".into(),
        "TORCH_FR_BUFFER_SIZE=100000 TORCH_NCCL_ENABLE_TIMING=1 TORCH_NCCL_TRACE_BUFFER_SIZE=100000"
            .into(),
    );
    timeline
        .machine
        .insert("torch".into(), "2.11.0+cu130".into());
    let sets: Vec<String> = measurement_overrides(&timeline)
        .iter()
        .map(|o| format!("{o:?}"))
        .collect();
    assert_eq!(sets.len(), 2, "{sets:?}");
    assert!(sets[0].contains("TORCH_NCCL_ENABLE_TIMING"), "{sets:?}");
    assert!(sets[1].contains("2.12"), "{sets:?}");
    // The Flight Recorder's buffer sizes are the instrument's, not the program's.
    assert!(!sets.iter().any(|s| s.contains("BUFFER")), "{sets:?}");
    timeline.machine.clear();
    assert!(measurement_overrides(&timeline).is_empty());
}

#[test]
fn runs_that_know_each_works_creation_recover_the_enqueue_after_it() {
    let text = "torch = \"2.12\"\nrepeat = 4\nwarmup = 1\n[cluster]\nranks = 1\n\
        [host]\ncollective_us = 25\ncollective_tail_us = 9\nsync_collective_us = 20\ncollective_enqueue_us = 3.5\n\
        [groups.world]\neager_init = true\n[tensors]\nx = \"1KiB\"\n\
        [[op]]\nall_reduce = \"x\"\n[[op]]\nall_reduce = \"x\"\nasync_op = true\nwork = \"w\"\n[[op]]\nwait = \"w\"\n";
    let scenario = sim::scenario::parse("e.toml", text).unwrap();
    let mut timeline = sim::engine::simulate(&scenario);
    let mut prior = Profile::default();
    prior
        .values
        .insert("host.collective_tail_us".into(), ProfileValue::Number(9.0));
    let fit = |timeline: &Timeline| {
        let runs = [CalibrationRun {
            scenario: &scenario,
            timeline,
        }];
        calibrate(&runs, &prior)
    };
    // Only a torch Timeline whose input-ready points are the Works' creation says anything.
    assert!(!fit(&timeline)
        .profile
        .values
        .contains_key("host.collective_enqueue_us"));
    timeline
        .machine
        .insert("backend".into(), "c10dsim.torch".into());
    timeline.machine.insert(
        "work_created".into(),
        "Flight Recorder time_created_ns within its call for 8 of 8 collectives (used for input_ready_ns)".into(),
    );
    let calibration = fit(&timeline);
    assert!((number(&calibration.profile, "host.collective_enqueue_us") - 3.5).abs() < 1e-6);
}

#[test]
fn a_one_rank_all_to_all_copies_its_buffer_and_the_fit_recovers_the_rate() {
    // Timed Works behind a 1 ms sleep (the stream busy at each call): the duration is the
    // copy of the 32 MiB buffer, NCCL's send and receive to itself.
    let text = "torch = \"2.12\"\nrepeat = 3\nwarmup = 1\n[cluster]\nranks = 1\n\
        [network]\nkernel_floor_us = 1.5\nself_copy_gbps = 1800\n[env]\nTORCH_NCCL_ENABLE_TIMING = 1\n\
        [groups.world]\neager_init = true\n[tensors]\nx = \"32MiB\"\n\
        [[op]]\ngpu_sleep_us = 1000\n[[op]]\nall_to_all = \"x\"\n[[op]]\ndevice_sync = true\n";
    let scenario = sim::scenario::parse("a.toml", text).unwrap();
    let timeline = sim::engine::simulate(&scenario);
    let copy_ns = (32u64 << 20) as f64 / 1800.0;
    for c in &timeline.ranks[0].collectives {
        assert!((c.duration_ns() as f64 - copy_ns).abs() <= 1.0, "{c:?}");
    }
    let runs = [CalibrationRun {
        scenario: &scenario,
        timeline: &timeline,
    }];
    let calibration = calibrate(&runs, &Profile::default());
    assert!((number(&calibration.profile, "network.self_copy_gbps") - 1800.0).abs() < 1.0);
    // Without the key a one-rank all_to_all costs the floor.
    let floor =
        sim::scenario::parse("a.toml", &text.replace("self_copy_gbps = 1800\n", "")).unwrap();
    let timeline = sim::engine::simulate(&floor);
    assert!(timeline.ranks[0]
        .collectives
        .iter()
        .all(|c| c.duration_ns() == 1_500));
}

#[test]
fn the_boost_window_and_the_sustained_clock_are_recovered_from_gemms_that_slow_down() {
    // 40 GEMMs of 8192³ bf16 at 0.8 of the nominal rate (1.39 ms each): the clock settles
    // after 20 ms of compute, then runs at 0.9.
    let text = "torch = \"2.12\"\nrepeat = 40\nwarmup = 0\n[cluster]\nranks = 1\ngpu = \"h200\"\n\
        gemm_efficiency = 0.8\nboost_ms = 20\nsustained_clock = 0.9\n\
        [[op]]\ngemm = [8192, 8192, 8192]\n";
    let calibration = calibrated_to_its_simulation("b.toml", text);
    let fitted = |key: &str| number(&calibration.profile, key);
    assert!((fitted("cluster.gemm_efficiency") - 0.8).abs() < 1e-3);
    assert!((fitted("cluster.sustained_clock") - 0.9).abs() < 1e-3);
    // The first kernel launched at or after 20 ms of compute is the first slow one.
    let gemm_ms = 2.0 * 8192f64.powi(3) / (989e12 * 0.8) * 1e3;
    let boost = fitted("cluster.boost_ms");
    assert!(boost >= 20.0 && boost < 20.0 + gemm_ms, "{boost}");
    // A GPU that never slows fits no boost window.
    let steady = calibrated_to_its_simulation(
        "s.toml",
        &text.replace("boost_ms = 20\nsustained_clock = 0.9\n", ""),
    );
    assert!(!steady.profile.values.contains_key("cluster.boost_ms"));
}

#[test]
fn the_gap_before_each_op_is_fitted_from_torch_timelines_only() {
    let text =
        "torch = \"2.12\"\nrepeat = 3\nwarmup = 1\n[cluster]\nranks = 1\n[host]\nop_gap_us = 6\n\
        [[op]]\ngpu_sleep_us = 10\n[[op]]\nmark = \"m\"\n";
    let scenario = sim::scenario::parse("g.toml", text).unwrap();
    let mut timeline = sim::engine::simulate(&scenario);
    let fit = |timeline: &Timeline| {
        let runs = [CalibrationRun {
            scenario: &scenario,
            timeline,
        }];
        calibrate(&runs, &Profile::default())
    };
    assert!(!fit(&timeline).profile.values.contains_key("host.op_gap_us"));
    timeline
        .machine
        .insert("backend".into(), "c10dsim.torch".into());
    assert!((number(&fit(&timeline).profile, "host.op_gap_us") - 6.0).abs() < 1e-6);
}

#[test]
fn the_stack_trace_and_a_dump_outlasting_its_sleep_are_recovered_from_a_timeout() {
    // One rank times out (1 s, behind a 3 s sleep); its watchdog symbolises the stack trace
    // for 3.5 s, then sleeps 4 x 250 ms for the dumps, which the 1.9 s dump outlasts.
    let text = "[cluster]\nranks = 1\n[env]\nTORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC = 250\n\
        [host]\nwatchdog_stack_trace_us = 3_500_000\nflight_recorder_dump_us = 1_900_000\n\
        [groups.world]\neager_init = true\ntimeout_s = 1\n[tensors]\nx = \"1MiB\"\n\
        [[op]]\ngpu_sleep_us = 3_000_000\n[[op]]\nall_reduce = \"x\"\n";
    let calibration = calibrated_to_its_simulation("dump.toml", text);
    assert_eq!(
        number(&calibration.profile, "host.watchdog_stack_trace_us"),
        3_500_000.0
    );
    assert_eq!(
        number(&calibration.profile, "host.flight_recorder_dump_us"),
        1_900_000.0
    );
    // With the Flight Recorder off the watchdog signals at the timeout: no stack-trace sample,
    // where counting it would have fitted 0 s.
    let off = text.replace("[env]\n", "[env]\nTORCH_FR_BUFFER_SIZE = 0\n");
    let calibration = calibrated_to_its_simulation("dump.toml", &off);
    assert!(!calibration
        .fitted
        .iter()
        .any(|fitted| fitted.key == "host.watchdog_stack_trace_us"));
    // Under TORCH_NCCL_ASYNC_ERROR_HANDLING=1 the take-down also waits for the abort of the
    // communicators (host.comm_abort_us): such a run says nothing about the dump alone.
    let tear_down = text
        .replace("[env]\n", "[env]\nTORCH_NCCL_ASYNC_ERROR_HANDLING = 1\n")
        .replace("[host]\n", "[host]\ncomm_abort_us = 550_000\n");
    let calibration = calibrated_to_its_simulation("dump.toml", &tear_down);
    assert!(!calibration
        .fitted
        .iter()
        .any(|fitted| fitted.key == "host.flight_recorder_dump_us"));
    // A dump shorter than the sleep leaves nothing to fit: the sleep explains the wait.
    let shorter = text.replace("1_900_000", "900_000");
    let calibration = calibrated_to_its_simulation("dump.toml", &shorter);
    assert!(!calibration
        .fitted
        .iter()
        .any(|fitted| fitted.key == "host.flight_recorder_dump_us"));
}

#[test]
fn the_first_gemm_s_extra_cost_is_recovered_over_the_launch() {
    // Two iterations, a warm-up among them: the process's first GEMM of each dtype (bf16, f32)
    // costs 80 ms more than a launch; the fit takes it from those calls, warm-up or not, and the
    // launch from the rest.
    let text = "warmup = 1\nrepeat = 2\n[cluster]\nranks = 1\n\
        [host]\nlaunch_us = 20\nfirst_gemm_us = 80_000\n\
        [[op]]\ngemm = [1024, 1024, 1024]\n[[op]]\ngemm = [2048, 2048, 2048]\n\
        [[op]]\ngemm = [512, 512, 512]\ndtype = \"f32\"\n";
    let calibration = calibrated_to_its_simulation("first_gemm.toml", text);
    assert_eq!(number(&calibration.profile, "host.launch_us"), 20.0);
    assert_eq!(number(&calibration.profile, "host.first_gemm_us"), 80_000.0);
    // Without the warm-up the first GEMMs are measured calls, half of the bf16 and f32 ops'
    // calls: the launch's fit leaves them out, else its median would be 40 ms.
    let measured = text.replace("warmup = 1", "warmup = 0");
    let calibration = calibrated_to_its_simulation("first_gemm_measured.toml", &measured);
    assert_eq!(number(&calibration.profile, "host.launch_us"), 20.0);
    assert_eq!(number(&calibration.profile, "host.first_gemm_us"), 80_000.0);
}

#[test]
fn a_timeline_without_records_has_nothing_to_fit() {
    let text = "[cluster]\nranks = 2\n[tensors]\nx = \"1MiB\"\n[[op]]\nall_reduce = \"x\"\n";
    let scenario = sim::scenario::parse("c.toml", text).unwrap();
    let mut timeline = sim::engine::simulate(&scenario);
    assert_eq!(nothing_to_fit(&timeline), None);
    timeline.ranks.iter_mut().for_each(|rank| {
        rank.host.clear();
        rank.kernels.clear();
    });
    assert_eq!(check_pairing(&timeline, &scenario), Ok(()));
    let error = nothing_to_fit(&timeline).unwrap();
    assert!(error.contains("nothing to fit"), "{error}");
}

/// GEMMs measured on an A100 whose scenario names an H100 (an `hw` run of a catalogue
/// scenario): the profile names the A100, so its efficiency is the A100's share of the A100's
/// rate, and the profile simulates the measured GEMMs again.
#[test]
fn the_gemm_efficiency_is_of_the_rate_of_the_gpu_the_profile_names() {
    let program = "repeat = 3\nwarmup = 1\n[cluster]\nranks = 1\ngemm_efficiency = 0.8\n\
        [[op]]\ngemm = [8192, 8192, 8192]\n";
    let on = |gpu: &str| program.replace("ranks = 1\n", &format!("ranks = 1\ngpu = \"{gpu}\"\n"));
    let ran = sim::scenario::parse("a100.toml", &on("a100")).unwrap();
    let mut timeline = sim::engine::simulate(&ran);
    timeline
        .machine
        .insert("device".into(), "NVIDIA A100-SXM4-80GB".into());
    let named = sim::scenario::parse("h100.toml", &on("h100-sxm")).unwrap();
    let runs = [CalibrationRun {
        scenario: &named,
        timeline: &timeline,
    }];
    let calibration = calibrate(&runs, &Profile::default());
    assert_eq!(
        calibration.profile.values["cluster.gpu"],
        ProfileValue::Text("a100".into())
    );
    let efficiency = number(&calibration.profile, "cluster.gemm_efficiency");
    assert!((efficiency - 0.8).abs() < 1e-3, "{efficiency}");
}

#[test]
fn runs_on_different_gpus_are_counted_per_gpu_and_one_gpu_says_nothing() {
    let scenario = sim::scenario::parse(
        "g.toml",
        "[cluster]\nranks = 1\n[[op]]\ndevice_sync = true\n",
    )
    .unwrap();
    let on = |device: &str| {
        let mut timeline = sim::engine::simulate(&scenario);
        timeline.machine.insert("device".into(), device.into());
        timeline
    };
    let (h200, h100, simulated) = (
        on("NVIDIA H200"),
        on("NVIDIA H100 80GB HBM3"),
        sim::engine::simulate(&scenario),
    );
    let runs = |timelines: &[&Timeline]| -> Option<String> {
        let runs: Vec<CalibrationRun> = timelines
            .iter()
            .map(|timeline| CalibrationRun {
                scenario: &scenario,
                timeline,
            })
            .collect();
        runs_per_gpu(&runs)
    };
    assert_eq!(runs(&[&h200, &h200]), None);
    assert_eq!(
        runs(&[&h100, &h200, &h200]).as_deref(),
        Some("2 on NVIDIA H200 and 1 on NVIDIA H100 80GB HBM3")
    );
    // A simulated Timeline names its GPU preset.
    assert_eq!(
        runs(&[&h200, &h100, &simulated]).as_deref(),
        Some("1 on NVIDIA H100 80GB HBM3, 1 on NVIDIA H200 and 1 on h100-sxm")
    );
}

#[test]
fn a_refused_profile_names_the_prior_values_its_reason_names() {
    let mut prior = Profile::default();
    for (key, value) in [
        ("host.collective_tail_us", 10.0),
        ("host.collective_us", 30.0),
        ("host.wait_us", 4.0),
    ] {
        prior.values.insert(key.into(), ProfileValue::Number(value));
    }
    let mut profile = prior.clone();
    profile
        .values
        .insert("host.collective_us".into(), ProfileValue::Number(7.6));
    let calibration = Calibration {
        fitted: vec![FittedValue {
            key: "host.collective_us".into(),
            value: 7.6,
            samples: 3,
            residual: "0.03 µs".into(),
            method: "median".into(),
        }],
        profile,
        notes: Vec::new(),
    };
    let reason = check_usable(&calibration.profile).unwrap_err();
    assert!(reason.contains("host.collective_tail_us"), "{reason}");
    // The fitted call is the runs'; wait_us is the prior's but not in the reason.
    assert_eq!(
        unfitted_keys_named(&reason, &calibration),
        ["host.collective_tail_us"]
    );
}

#[test]
fn one_collective_size_fits_the_bandwidth_at_a_given_alpha() {
    // 64 MiB all_reduces over 4 ranks at α = 2.5 µs, 113.3 GB/s: one size cannot tell α from B,
    // so the two-value fit gives nothing; at α given, B comes back.
    let size_bytes = 64 << 20;
    let point = |alpha_us: f64| {
        let model =
            CollectivePoint::new(sim::scenario::CollectiveKind::AllReduce, 4, size_bytes, 0.0);
        let kernel_us = model.steps * alpha_us + model.volume_bytes / 113.3e3;
        CollectivePoint { kernel_us, ..model }
    };
    let points = [point(2.5), point(2.5)];
    assert!(fit_network(&points).is_empty());
    let fitted = fit_bandwidth_given_alpha(&points, 2.5);
    assert_eq!(fitted.len(), 1);
    assert_eq!(fitted[0].key, "network.nvlink_gbps");
    assert!((fitted[0].value - 113.3).abs() < 1e-6, "{fitted:?}");
    // kernels shorter than α alone makes them: no bandwidth
    assert!(fit_bandwidth_given_alpha(&points, 1e6).is_empty());
}

#[test]
fn a_calibration_from_one_collective_size_keeps_the_network_and_says_so() {
    // The review's case: overlap_bench's all_reduces, one 25 MiB buffer, used to write
    // `alpha_us = -0.0` and nvlink_gbps 393 at a residual of 32%.
    let text = include_str!("../../../scenarios/overlap_bench.toml");
    let calibration = calibrated_to_its_simulation("overlap_bench.toml", text);
    let keys: Vec<&str> = calibration.fitted.iter().map(|f| f.key.as_str()).collect();
    assert!(
        !keys.iter().any(|key| key.starts_with("network.")),
        "{keys:?}"
    );
    assert!(
        calibration
            .notes
            .iter()
            .any(|note| note.contains("one size") && note.contains("[network]")),
        "{:?}",
        calibration.notes
    );
    let rendered = render_profile(&calibration.profile, &calibration.fitted);
    assert!(!rendered.contains("-0.0"), "{rendered}");
}
