//! Regression tests of issue 16: every input the adversarial run found to panic, hang, abort
//! or mislead, small and written anew, with the exit code and message each must give now
//! (docs/reliability.md).
//!
//! About 1,870 lines, over 1,000: one test per input found, each standing alone; split by command if it
//! grows.

use crate::util::{c10dsim, c10dsim_fed, skipped, stderr, stdout};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

pub(crate) fn temp(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("robustness");
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

pub(crate) fn write(name: &str, text: &str) -> String {
    let path = temp(name);
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_string()
}

pub(crate) fn code(output: &std::process::Output) -> Option<i32> {
    output.status.code()
}

pub(crate) fn assert_no_panic(output: &std::process::Output) {
    let err = stderr(output);
    assert!(!err.contains("panicked"), "{err}");
    assert_ne!(code(output), Some(101), "{err}");
}

/// The command was refused as bad input: no panic, exit 2, and `message` on stderr.
pub(crate) fn assert_refused(output: &std::process::Output, message: &str, context: &str) {
    assert_no_panic(output);
    let err = stderr(output);
    assert_eq!(code(output), Some(2), "{context}: {err}");
    assert!(err.contains(message), "{context}: {err}");
}

const AR: &str =
    "[cluster]\nranks = 2\n[tensors]\nt = \"1MiB\"\n[[op]]\nlabel = \"ar\"\nall_reduce = \"t\"\n";

#[test]
fn a_label_and_a_measure_name_of_70000_characters_are_printed_whole() {
    let long = "m".repeat(70_000);
    let file = write(
        "long_names.toml",
        &format!(
            "[cluster]\nranks = 1\n[[op]]\nmark = \"a\"\n[[op]]\nlabel = \"{long}\"\nhost_sleep_us = 3\n\
             [[op]]\nmark = \"b\"\n[[measure]]\nname = \"{long}x\"\nfrom = \"a\"\nto = \"b\"\nclock = \"host\"\n"
        ),
    );
    let output = c10dsim(&["run", &file]);
    assert_no_panic(&output);
    assert_eq!(code(&output), Some(0), "{}", stderr(&output));
    assert!(stdout(&output).contains(&format!("{long}x")));
}

#[test]
fn delays_with_a_huge_mean_are_refused_at_their_position() {
    let file = write(
        "huge_mean.toml",
        &format!("{AR}[[perturb]]\nranks = [0]\nbefore = \"ar\"\nhost_delay_us = {{ normal = {{ mean = 1e30, std = 1e30 }} }}\n"),
    );
    let output = c10dsim(&["run", &file]);
    assert_eq!(code(&output), Some(2));
    assert!(stderr(&output).contains("huge_mean.toml:11:17: error: perturb.host_delay_us: normal: std must be > 0 and at most one day"), "{}", stderr(&output));
}

#[test]
fn a_lognormal_narrower_than_an_f64_runs() {
    let file = write(
        "narrow_lognormal.toml",
        &format!("{AR}[[perturb]]\nranks = [0]\nbefore = \"ar\"\nhost_delay_us = {{ lognormal = {{ mean = 200, std = 1e-9 }} }}\n"),
    );
    let output = c10dsim(&["run", &file]);
    assert_no_panic(&output);
    assert_eq!(code(&output), Some(0), "{}", stderr(&output));
}

#[test]
fn the_largest_gpu_delay_draws_leave_every_kernel_ending_after_it_starts() {
    let text = format!(
        "repeat = 20\n{}[[perturb]]\nranks = [0]\nbefore = \"ar\"\ngpu_delay_us = {{ lognormal = {{ mean = 1e9, std = 8.64e10 }} }}\n",
        AR.replace("[cluster]", "max_sim_time_s = 86400\n[cluster]")
    );
    let scenario = sim::scenario::parse("gpu_delay.toml", &text).unwrap();
    let timeline = sim::engine::simulate(&scenario);
    timeline.check_references().unwrap();
    let longest = timeline
        .ranks
        .iter()
        .flat_map(|r| &r.kernels)
        .map(|k| k.end_ns - k.start_ns)
        .max()
        .unwrap();
    assert!(longest <= sim::scenario::MAX_TIME_NS, "{longest}");
}

fn timeline_with_a_bad_op_index() -> String {
    let timeline = crate::util::run_with("exp_b_stream_scope.toml", &[]);
    let mut value = serde_json::to_value(&timeline).unwrap();
    value["ranks"][0]["host"][0]["op"] = serde_json::json!(4000);
    write("bad_op.json", &value.to_string())
}

#[test]
fn timelines_with_out_of_range_indices_are_refused_by_diff_against_and_calibrate() {
    let bad = timeline_with_a_bad_op_index();
    let good = write(
        "good.json",
        &serde_json::to_string(&crate::util::run_with("exp_b_stream_scope.toml", &[])).unwrap(),
    );
    let profile = temp("bad_op_profile.toml");
    let calibrate_arg = format!("{bad}=scenarios/exp_b_stream_scope.toml");
    for args in [
        vec!["diff", good.as_str(), bad.as_str()],
        vec![
            "run",
            "scenarios/exp_b_stream_scope.toml",
            "--against",
            bad.as_str(),
        ],
        vec![
            "calibrate",
            calibrate_arg.as_str(),
            "-o",
            profile.to_str().unwrap(),
        ],
    ] {
        let output = c10dsim(&args);
        assert_no_panic(&output);
        assert_eq!(code(&output), Some(2), "{args:?}");
        assert!(
            stderr(&output).contains("ranks[0] (rank 0): op 4000 is out of range"),
            "{args:?}: {}",
            stderr(&output)
        );
    }
}

#[test]
fn a_device_is_refused_as_an_input_instead_of_read_without_end() {
    if !std::path::Path::new("/dev/zero").exists() {
        skipped("a_device_is_refused_as_an_input_instead_of_read_without_end: no /dev/zero");
        return;
    }
    for args in [
        ["diff", "/dev/zero", "/dev/zero"].as_slice(),
        [
            "sweep",
            "scenarios/exp_a_sweep.toml",
            "--resume",
            "-o",
            "/dev/zero",
        ]
        .as_slice(),
    ] {
        let output = c10dsim(args);
        assert_no_panic(&output);
        assert_eq!(code(&output), Some(2), "{args:?}: {}", stderr(&output));
        assert!(
            stderr(&output).contains("/dev/zero: a device, not a file"),
            "{args:?}: {}",
            stderr(&output)
        );
    }
}

#[test]
fn small_input_mistakes_get_a_message_that_helps() {
    let output = c10dsim(&[
        "sweep",
        "scenarios/exp_a_sweep.toml",
        "--threads",
        "0",
        "-o",
        "-",
    ]);
    assert_refused(&output, "--threads 0: give at least 1", "sweep --threads 0");
    let file = write(
        "no_marks.toml",
        "[cluster]\nranks = 1\n[[op]]\ngpu_sleep_us = 1\n[[measure]]\nname = \"m\"\nfrom = \"a\"\nto = \"b\"\n",
    );
    let output = c10dsim(&["check", &file]);
    assert_refused(
        &output,
        "(the program sets none)",
        "a measure without marks",
    );
    assert!(!stderr(&output).contains("known: )"), "{}", stderr(&output));
    let trace = temp("chrome_trace.json");
    let output = c10dsim(&[
        "run",
        "scenarios/send_recv.toml",
        "--trace",
        trace.to_str().unwrap(),
    ]);
    assert_eq!(code(&output), Some(0), "{}", stderr(&output));
    let output = c10dsim(&["diff", trace.to_str().unwrap(), trace.to_str().unwrap()]);
    assert_refused(&output, "it is a Chrome trace", "diff of a Chrome trace");
    // A `run --json` report is the other usual wrong file.
    let (report, timeline) = (temp("run_report.json"), temp("run_timeline.json"));
    let output = c10dsim(&[
        "run",
        "scenarios/send_recv.toml",
        "--json",
        "--timeline",
        timeline.to_str().unwrap(),
    ]);
    assert_eq!(code(&output), Some(0), "{}", stderr(&output));
    std::fs::write(&report, &output.stdout).unwrap();
    let output = c10dsim(&["diff", timeline.to_str().unwrap(), report.to_str().unwrap()]);
    assert_refused(
        &output,
        "(it is a `run --json` report, not a Timeline: `run --timeline FILE` writes one)",
        "diff of a run --json report",
    );
    // A selection of records past the scenario kept nothing, silently.
    let output = c10dsim(&[
        "run",
        "scenarios/send_recv.toml",
        "--summary",
        "--records-for",
        "ranks=9",
    ]);
    assert_refused(
        &output,
        "rank 9 does not exist (the scenario has 2 ranks",
        "--records-for",
    );
    // One key set twice: the first would be lost.
    let output = c10dsim(&[
        "run",
        "scenarios/send_recv.toml",
        "--set",
        "repeat=2",
        "--set",
        "repeat=3",
    ]);
    assert_refused(&output, "--set repeat is given twice", "a repeated --set");
    // In a sweep too: the second `--set` replaced the first's values, silently (an axis takes
    // its values in one `--set key=v1,v2`).
    for values in [["repeat=2", "repeat=3"], ["repeat=2,3", "repeat=4"]] {
        let output = c10dsim(&[
            "sweep",
            "scenarios/send_recv.toml",
            "-o",
            "-",
            "--set",
            values[0],
            "--set",
            values[1],
        ]);
        assert_refused(
            &output,
            "--set repeat is given twice",
            "a repeated sweep --set",
        );
        assert_eq!(stdout(&output), "", "nothing runs");
    }
    // Printing the scenario runs nothing: with a mode that runs, one of them would be ignored.
    let output = c10dsim(&["bench", "--print-scenario", "--scaling", "8", "-o", "-"]);
    assert_refused(
        &output,
        "cannot be used with",
        "bench --print-scenario --scaling",
    );
    // Flags another one makes meaningless, which used to be ignored: the scaling list gives
    // the ranks, and the printed scenario is the same however it would be simulated.
    let output = c10dsim(&[
        "bench",
        "--scaling",
        "8",
        "--ranks",
        "99",
        "--iterations",
        "2",
        "-o",
        "-",
    ]);
    assert_refused(&output, "cannot be used with", "bench --scaling --ranks");
    assert_eq!(stdout(&output), "", "nothing runs");
    for flag in ["--summary", "--no-fold"] {
        let output = c10dsim(&["bench", "--print-scenario", flag]);
        assert_refused(&output, "cannot be used with", flag);
    }
    // A negative tolerance gets the range, not clap's "unexpected argument '-5'".
    let timeline = temp("tolerance_timeline.json");
    let timeline = timeline.to_str().unwrap();
    let output = c10dsim(&["run", "scenarios/send_recv.toml", "--timeline", timeline]);
    assert_eq!(code(&output), Some(0), "{}", stderr(&output));
    let output = c10dsim(&["diff", timeline, timeline, "--tol-pct", "-5"]);
    assert_refused(
        &output,
        "--tol-pct must be a number ≥ 0, found -5",
        "diff --tol-pct -5",
    );
    // A negative count or size says that a negative value is not allowed, not "unexpected
    // argument '-1'" with a tip to pass it as a positional, nor "invalid digit".
    for (args, says) in [
        (
            &["run", "scenarios/send_recv.toml", "--seed", "-1"][..],
            "invalid value '-1' for '--seed <SEED>': a negative value is not allowed",
        ),
        (
            &["bench", "--scaling", "8,-3", "-o", "-"][..],
            "invalid value '-3' for '--scaling <RANKS,...>': a negative value is not allowed",
        ),
        (
            &["import", "kineto", "t.json", "-o", "-", "--bucket", "-1MiB"][..],
            "invalid value '-1MiB' for '--bucket <SIZE>': a size cannot be negative",
        ),
        (
            &["run", "scenarios/send_recv.toml", "--max-memory", "-1GiB"][..],
            "invalid value '-1GiB' for '--max-memory <SIZE>': a size cannot be negative",
        ),
        (
            &[
                "check",
                "scenarios/send_recv.toml",
                "--max-timeline",
                "-4GiB",
            ][..],
            "invalid value '-4GiB' for '--max-timeline <SIZE>': a size cannot be negative",
        ),
    ] {
        assert_refused(&c10dsim(args), says, &args.join(" "));
    }
    // Not a number: the message claims no range that the command refuses afterwards (--scaling
    // takes 1 rank or more, and says so when given 0).
    let not_a_number = c10dsim(&["bench", "--scaling", "4,x", "-o", "-"]);
    assert_refused(
        &not_a_number,
        "invalid value 'x' for '--scaling <RANKS,...>': invalid digit found in string: \
         expected a whole number\n",
        "bench --scaling 4,x",
    );
    assert_refused(
        &c10dsim(&["bench", "--scaling", "4,0", "-o", "-"]),
        "--scaling 0: the number of ranks must be between 1 and",
        "bench --scaling 4,0",
    );
    // With --against the exit code is the diff's: --fail-on-race was ignored.
    let output = c10dsim(&[
        "run",
        "scenarios/races_4_6.toml",
        "--against",
        "tests/data/hw/overlap_bench.json",
        "--fail-on-race",
    ]);
    assert_refused(
        &output,
        "cannot be used with",
        "run --against --fail-on-race",
    );
    // A tolerance without --against would be ignored, also one given at its default.
    for value in ["5", "10"] {
        let output = c10dsim(&["run", "scenarios/send_recv.toml", "--tol-pct", value]);
        assert_refused(
            &output,
            "the following required arguments were not provided:\n  --against <MEASURED.json>",
            &format!("run --tol-pct {value} without --against"),
        );
    }
    // An output that cannot be written is refused before the simulation, and nothing is
    // written (the trace used to be written, then the timeline failed).
    let written = temp("written_first.json");
    let output = c10dsim(&[
        "run",
        "scenarios/send_recv.toml",
        "--trace",
        written.to_str().unwrap(),
        "--timeline",
        "/nonexistent-folder/x.json",
    ]);
    assert_refused(
        &output,
        "--timeline /nonexistent-folder/x.json: the folder /nonexistent-folder does not exist",
        "run --timeline into a missing folder",
    );
    assert!(
        !written.exists(),
        "the trace was written before the refusal"
    );
    // A file written into --trace-dir would be read by HTA as one more rank's trace.
    let dir = temp("hta_dir");
    std::fs::create_dir_all(&dir).unwrap();
    let inside = dir.join("all.json");
    let output = c10dsim(&[
        "run",
        "scenarios/send_recv.toml",
        "--trace-dir",
        dir.to_str().unwrap(),
        "--trace",
        inside.to_str().unwrap(),
    ]);
    assert_refused(
        &output,
        "it would be written into --trace-dir",
        "run --trace inside --trace-dir",
    );
    // A folder output where a file is.
    let file = write("not_a_folder", "x");
    let output = c10dsim(&["run", "scenarios/send_recv.toml", "--trace-dir", &file]);
    assert_refused(
        &output,
        "it exists and is not a folder",
        "--trace-dir over a file",
    );
    // The Flight Recorder's folder likewise: `-` used to make a folder named `-`.
    let output = c10dsim(&["run", "scenarios/hang_10min.toml", "--fr-dir", "-"]);
    assert_refused(
        &output,
        "--fr-dir writes a folder with one file per rank; `-` (standard output) cannot hold it",
        "--fr-dir -",
    );
    assert!(!std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("-")
        .exists());
    let output = c10dsim(&["run", "scenarios/hang_10min.toml", "--fr-dir", &file]);
    assert_refused(
        &output,
        "it exists and is not a folder",
        "--fr-dir over a file",
    );
}

/// A calibration argument `RUN.json=` or `=SCENARIO.toml` names what is missing: it was
/// "cannot read : No such file or directory", an empty name.
#[test]
fn a_calibration_argument_with_an_empty_side_says_which() {
    let profile = temp("empty_side.toml");
    let profile = profile.to_str().unwrap();
    let run = "tests/data/hw/exp_a_api_modes.json";
    for (argument, says) in [
        (format!("{run}="), "no scenario after its `=`"),
        (
            "=scenarios/exp_a_api_modes.toml".to_string(),
            "no run before its `=`",
        ),
    ] {
        for args in [
            vec!["calibrate", &argument, "-o", profile],
            vec![
                "calibrate",
                "tests/data/hw/exp_b_stream_scope.json",
                "-o",
                profile,
                "--validate",
                &argument,
            ],
        ] {
            let output = c10dsim(&args);
            assert_refused(&output, &format!("calibrate {argument}: {says}"), &argument);
            assert!(
                !stderr(&output).contains("cannot read :"),
                "{}",
                stderr(&output)
            );
        }
    }
}

/// `bench --repeat --against` checks the other binary before any run: a file that is not
/// executable failed after this binary's first run ("Permission denied"), a folder was "no such
/// file". No run's progress line may come before the refusal.
#[test]
fn bench_against_a_missing_path_a_folder_or_a_plain_file_is_refused_before_any_run() {
    let folder = temp("bench_against_folder");
    std::fs::create_dir_all(&folder).unwrap();
    let plain = temp("bench_against_plain.toml");
    std::fs::write(&plain, "not a program").unwrap();
    let missing = temp("bench_against_missing");
    for (path, says) in [
        (&missing, "no such file"),
        (&folder, "a folder, not a c10dsim binary"),
        (&plain, "not executable (its mode has no x bit)"),
    ] {
        let path = path.to_str().unwrap();
        let output = c10dsim(&[
            "bench",
            "--ranks",
            "2",
            "--iterations",
            "2",
            "--repeat",
            "2",
            "--against",
            path,
        ]);
        let context = format!("bench --against {path}");
        assert_refused(&output, &format!("--against {path}: {says}"), &context);
        assert!(
            !stderr(&output).contains("run 1/"),
            "{context}: {}",
            stderr(&output)
        );
    }
}

#[test]
fn fidelity_without_recorded_runs_or_machine_profile_exits_2() {
    let empty = temp("fidelity_empty");
    std::fs::create_dir_all(&empty).unwrap();
    let empty = empty.to_str().unwrap();
    let output = c10dsim(&["fidelity", "--torch", empty, "--hw", empty]);
    assert_eq!(code(&output), Some(2), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("holds no recorded run"),
        "{}",
        stderr(&output)
    );
    let output = c10dsim(&["fidelity", "--machine", "no/such/profile.toml"]);
    assert_eq!(code(&output), Some(2), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("cannot read no/such/profile.toml"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn hw_refuses_a_libcuda_without_the_driver_symbols() {
    let dir = temp("fake_cuda");
    std::fs::create_dir_all(&dir).unwrap();
    let source = dir.join("empty.c");
    std::fs::write(&source, "int c10dsim_fake_symbol(void) { return 0; }\n").unwrap();
    for library in ["cuda", "nvrtc", "cublas", "nccl"] {
        let built = Command::new("cc")
            .args(["-shared", "-fPIC", "-o"])
            .arg(dir.join(format!("lib{library}.so")))
            .arg(&source)
            .status();
        if !matches!(built, Ok(status) if status.success()) {
            skipped(&format!(
                "hw_refuses_a_libcuda_without_the_driver_symbols: no C compiler (cc) to build a stub lib{library}.so"
            ));
            return;
        }
    }
    // Downscaled to one process: a 4-rank scenario alone is refused before the library probe.
    let output = Command::new(env!("CARGO_BIN_EXE_c10dsim"))
        .args([
            "hw",
            "scenarios/exp_b_stream_scope.toml",
            "--downscale",
            "model",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("LD_LIBRARY_PATH", &dir)
        .output()
        .unwrap();
    assert_no_panic(&output);
    assert_eq!(code(&output), Some(2), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("libcuda.so was found but does not export cuInit"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn plot_draws_a_column_holding_nan_and_inf_without_hanging() {
    let csv = write(
        "nan.csv",
        "point,tensors.x,ar.wait_us\n0,1MiB,nan\n1,2MiB,inf\n2,4MiB,3.5\n3,8MiB,-inf\n4,16MiB,4\n",
    );
    let picture = temp("nan.svg");
    let mut child = Command::new(env!("CARGO_BIN_EXE_c10dsim"))
        .args(["plot", &csv, "--x", "tensors.x", "--y", "ar.wait_us", "-o"])
        .arg(&picture)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > Duration::from_secs(60) {
            child.kill().unwrap();
            panic!("plot still runs after 60 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success());
    assert!(std::fs::read_to_string(&picture)
        .unwrap()
        .starts_with("<svg"));
}

#[test]
fn check_and_run_refuse_a_scenario_too_large_to_finish_with_the_numbers() {
    let file = write(
        "too_large.toml",
        "repeat = 1000000\n[cluster]\nranks = 65536\nfold = false\n[[op]]\nhost_sleep_us = 1\n",
    );
    for command in ["check", "run"] {
        let output = c10dsim(&[command, &file]);
        assert_eq!(code(&output), Some(2));
        let err = stderr(&output);
        assert!(err.contains("65536000000 op calls"), "{err}");
        assert!(err.contains("over the cap of 1000000000"), "{err}");
        assert!(err.contains("--max-events"), "{err}");
    }
    let small = write(
        "raised.toml",
        "repeat = 300\n[cluster]\nranks = 4\n[[op]]\nhost_sleep_us = 1\n",
    );
    let refused = c10dsim(&["check", &small, "--max-events", "1000"]);
    assert_eq!(code(&refused), Some(2));
    let output = c10dsim(&["check", &small]);
    assert_eq!(code(&output), Some(0));
    // Folded: rank 0 (the root of the lazily created communicator) and ranks 1-3.
    assert!(stdout(&output).contains("about 600 op calls, 2400 events"));
}

/// A folded run keeps one class's records (docs/scale.md); a trace, chart or nccl-tests table
/// shows every rank, so the run's Timeline is expanded to every rank for it. That expanded
/// Timeline is held to `--max-timeline` before anything runs: 65,536 ranks x `repeat =
/// 1000000`, 0.3 s plain, took 24 GB with `--trace` before it was killed. Here 64 ranks x 1,000
/// iterations: folded about 1 MB, expanded about 31 MiB.
#[test]
fn outputs_that_expand_a_folded_run_are_held_to_the_timeline_cap() {
    let file = write(
        "expanded_over_cap.toml",
        "repeat = 1000\n[cluster]\nranks = 64\n[[op]]\nhost_sleep_us = 1\n",
    );
    let plain = c10dsim(&["run", &file, "--max-timeline", "4MiB"]);
    assert_eq!(code(&plain), Some(0), "{}", stderr(&plain));
    let trace = temp("expanded_over_cap.json");
    let svg = temp("expanded_over_cap.svg");
    let dir = temp("expanded_over_cap_traces");
    let trace_path = trace.to_str().unwrap();
    let svg_path = svg.to_str().unwrap();
    let dir_path = dir.to_str().unwrap();
    for (flag, path) in [
        ("--trace", trace_path),
        ("--svg", svg_path),
        ("--trace-dir", dir_path),
    ] {
        let _ = std::fs::remove_file(path);
        let _ = std::fs::remove_dir_all(path);
        let output = c10dsim(&["run", &file, "--max-timeline", "4MiB", flag, path]);
        assert_eq!(code(&output), Some(2), "{flag}: {}", stderr(&output));
        let err = stderr(&output);
        assert!(
            err.contains(&format!("{file}: {flag} shows every rank")),
            "{err}"
        );
        assert!(
            err.contains("over the cap of 4MiB (--max-timeline)"),
            "{err}"
        );
        assert!(err.contains("nothing was run"), "{err}");
        assert!(err.contains("--records-for"), "{err}");
        assert!(err.contains("--set repeat="), "{err}");
        assert!(!std::path::Path::new(path).exists(), "{flag} left {path}");
    }
    let output = c10dsim(&["run", &file, "--max-timeline", "4MiB", "--nccl-tests"]);
    assert_eq!(code(&output), Some(2), "{}", stderr(&output));
    assert!(stderr(&output).contains("--nccl-tests shows every rank"));
    // Raised, it runs and writes the trace.
    let output = c10dsim(&[
        "run",
        &file,
        "--max-timeline",
        "64MiB",
        "--trace",
        trace_path,
    ]);
    assert_eq!(code(&output), Some(0), "{}", stderr(&output));
    assert!(trace.exists());
    let _ = std::fs::remove_file(&trace);
}

/// The refusal of an output that expands a folded run proposes only command lines that run:
/// its `--records-for` selection quoted (unquoted, `iterations=0` is an argument of its own,
/// which clap refuses), and `--summary` only beside outputs it can be given with (not
/// `--nccl-tests` nor `--against`, which clap refuses with it).
#[test]
fn the_expanded_refusal_proposes_command_lines_that_run() {
    let file = write(
        "expanded_proposal.toml",
        "repeat = 1000\n[cluster]\nranks = 64\n[[op]]\nhost_sleep_us = 1\n",
    );
    let trace = temp("expanded_proposal.json");
    let trace_path = trace.to_str().unwrap();
    let output = c10dsim(&[
        "run",
        &file,
        "--max-timeline",
        "4MiB",
        "--trace",
        trace_path,
    ]);
    assert_eq!(code(&output), Some(2), "{}", stderr(&output));
    let err = stderr(&output);
    let proposed = "--summary --records-for 'ranks=0 iterations=0'";
    assert!(err.contains(proposed), "{err}");
    // As proposed, it runs.
    let output = c10dsim(&[
        "run",
        &file,
        "--max-timeline",
        "4MiB",
        "--trace",
        trace_path,
        "--summary",
        "--records-for",
        "ranks=0 iterations=0",
    ]);
    assert_eq!(code(&output), Some(0), "{}", stderr(&output));
    let _ = std::fs::remove_file(&trace);
    // Read after the refusal: a measured Timeline that is not there is never opened.
    let measured = temp("expanded_proposal_measured.json");
    let measured_path = measured.to_str().unwrap();
    for flags in [
        vec!["--nccl-tests"],
        vec!["--against", measured_path],
        vec!["--trace", trace_path, "--nccl-tests"],
    ] {
        let mut args = vec!["run", file.as_str(), "--max-timeline", "4MiB"];
        args.extend(flags.iter().copied());
        let output = c10dsim(&args);
        assert_eq!(code(&output), Some(2), "{flags:?}: {}", stderr(&output));
        let err = stderr(&output);
        assert!(
            err.contains("shows every rank") || err.contains("show every rank"),
            "{err}"
        );
        assert!(!err.contains("--summary"), "{flags:?}: {err}");
        assert!(err.contains("--set repeat="), "{err}");
    }
    let _ = std::fs::remove_file(&trace);
}

/// `run --summary` simulates every rank, unfolded (docs/scale.md): its estimate counts ranks,
/// not classes. It counted classes, so 65,536 ranks x `repeat = 1000000` with `--summary
/// --records-for ranks=0,1` (6.6 x 10^10 op calls) was not refused and ran for hours.
#[test]
fn a_summarised_run_is_estimated_unfolded() {
    let file = write(
        "summary_unfolded.toml",
        "repeat = 1000\n[cluster]\nranks = 64\n[[op]]\nhost_sleep_us = 1\n",
    );
    // Folded: 2 classes x 1,000 calls, 8,000 events; unfolded 64,000 calls, 256,000 events.
    let folded = c10dsim(&["run", &file, "--max-events", "100000"]);
    assert_eq!(code(&folded), Some(0), "{}", stderr(&folded));
    let output = c10dsim(&[
        "run",
        &file,
        "--max-events",
        "100000",
        "--summary",
        "--records-for",
        "ranks=0,1",
    ]);
    assert_eq!(code(&output), Some(2), "{}", stderr(&output));
    let err = stderr(&output);
    assert!(err.contains("64000 op calls"), "{err}");
    assert!(err.contains("over the cap of 100000"), "{err}");
    assert!(err.contains("--summary simulates every rank"), "{err}");
}

#[test]
fn the_time_cap_stops_host_only_work() {
    let file = write(
        "host_days.toml",
        "[cluster]\nranks = 1\n[[op]]\nhost_sleep_us = 86400000000\n[[op]]\nhost_sleep_us = 86400000000\n\
         [[op]]\nhost_sleep_us = 86400000000\n",
    );
    let output = c10dsim(&["run", &file, "--json"]);
    assert_eq!(code(&output), Some(1), "{}", stderr(&output));
    let report: serde_json::Value = serde_json::from_str(&stdout(&output)).unwrap();
    assert_eq!(report["report"]["findings"][0]["kind"], "time_cap");
}

#[test]
fn the_memory_cap_ends_the_run_with_a_finding() {
    if std::fs::read_to_string("/proc/self/statm").is_err() {
        skipped("the_memory_cap_ends_the_run_with_a_finding: no /proc/self/statm, so no memory figure to cap");
        return;
    }
    let output = c10dsim(&[
        "run",
        "scenarios/all_to_all.toml",
        "--max-memory",
        "1MiB",
        "--json",
    ]);
    assert_eq!(code(&output), Some(1), "{}", stderr(&output));
    let report: serde_json::Value = serde_json::from_str(&stdout(&output)).unwrap();
    let finding = &report["report"]["findings"][0];
    assert_eq!(finding["kind"], "memory_cap");
    assert!(finding["message"]
        .as_str()
        .unwrap()
        .contains("over the cap of 1MiB"));
    // `check` runs nothing: it used to take the cap and ignore it.
    let output = c10dsim(&["check", "scenarios/all_to_all.toml", "--max-memory", "1MiB"]);
    assert_refused(
        &output,
        "unexpected argument '--max-memory'",
        "check --max-memory",
    );
}

#[test]
fn a_misspelt_sweep_axis_exits_2_before_anything_runs() {
    let out = temp("misspelt.csv");
    let _ = std::fs::remove_file(&out);
    let output = c10dsim(&[
        "sweep",
        "scenarios/exp_a_api_modes.toml",
        "--set",
        "env.TORCH_NCCL_BLOCKING_WIAT=0,1",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code(&output), Some(2), "{}", stderr(&output));
    let err = stderr(&output);
    assert!(
        err.contains("sweep axis env.TORCH_NCCL_BLOCKING_WIAT: none of its values"),
        "{err}"
    );
    assert!(err.contains("TORCH_NCCL_BLOCKING_WIAT"), "{err}");
    assert!(!out.exists(), "nothing runs, nothing is written");
}

#[test]
fn calibrate_refuses_a_timeline_of_another_scenario() {
    let profile = temp("wrong_pair.toml");
    let output = c10dsim(&[
        "calibrate",
        "tests/data/hw/exp_b_stream_scope.json=scenarios/all_to_all.toml",
        "-o",
        profile.to_str().unwrap(),
    ]);
    assert_eq!(code(&output), Some(2));
    assert!(
        stderr(&output).contains("not a run of this scenario"),
        "{}",
        stderr(&output)
    );
    assert!(!profile.exists());
}

/// A held-out run of another scenario is refused like a fitted one: before the profile is
/// written, naming the `--validate` argument.
#[test]
fn calibrate_refuses_a_held_out_timeline_of_another_scenario_before_writing() {
    let profile = temp("wrong_held_out.toml");
    let held_out = "tests/data/hw/x2/exp_b_stream_scope.2ranks.json=scenarios/overlap_bench.toml";
    let output = c10dsim(&[
        "calibrate",
        "tests/data/hw/hw_host_overhead.json",
        "-o",
        profile.to_str().unwrap(),
        "--validate",
        held_out,
    ]);
    assert_eq!(code(&output), Some(2));
    assert!(
        stderr(&output).contains(&format!(
            "calibrate --validate {held_out}: the Timeline ran 2 ranks, the scenario has 8: \
             not a run of this scenario"
        )),
        "{}",
        stderr(&output)
    );
    assert!(!profile.exists());
}

#[test]
fn a_profile_calibrated_from_exp_b_alone_runs_exp_b() {
    let profile = temp("exp_b_only.toml");
    let output = c10dsim(&[
        "calibrate",
        "tests/data/hw/exp_b_stream_scope.json",
        "-o",
        profile.to_str().unwrap(),
    ]);
    assert_eq!(code(&output), Some(0), "{}", stderr(&output));
    let output = c10dsim(&[
        "run",
        "scenarios/exp_b_stream_scope.toml",
        "--machine",
        profile.to_str().unwrap(),
    ]);
    assert_eq!(code(&output), Some(0), "{}", stderr(&output));
}

#[test]
fn a_profile_calibrated_from_one_torch_run_predicts_another() {
    // Its enqueue (3.0 µs) and synchronous call (21.6 µs) leave no room for exp_a's own
    // 20 µs tail: the tail is lowered to what the call leaves, not the scenario refused.
    let profile = temp("exp_a_run2.toml");
    let output = c10dsim(&[
        "calibrate",
        "tests/data/torch/exp_a_api_modes.run2.json",
        "-o",
        profile.to_str().unwrap(),
        "--validate",
        "tests/data/torch/exp_a_api_modes.run1.json",
    ]);
    assert_eq!(code(&output), Some(0), "{}", stderr(&output));
    assert!(stdout(&output).contains("held-out: median error"));
}

#[test]
fn seed_with_set_seed_is_refused_and_the_header_shows_seed_as_typed() {
    // `--seed N` is sugar for `--set seed=N`: both given, the last won silently, and the header
    // listed a `--set seed=` nobody typed.
    let output = c10dsim(&[
        "run",
        "scenarios/straggler.toml",
        "--seed",
        "5",
        "--set",
        "seed=6",
    ]);
    assert_refused(
        &output,
        "--seed 5 and --set seed=6 both set the seed",
        "--seed with --set seed",
    );
    assert_eq!(stdout(&output), "", "nothing runs");
    let output = c10dsim(&["run", "scenarios/straggler.toml", "--seed", "5"]);
    assert_eq!(code(&output), Some(0), "{}", stderr(&output));
    let header = stdout(&output).lines().next().unwrap_or("").to_string();
    assert!(
        header.contains("(scenarios/straggler.toml [--seed 5], sha "),
        "{header}"
    );
    assert!(header.ends_with("seed 5"), "{header}");
}

/// A `--seed` past the largest integer a scenario holds (2^63 - 1) is refused naming `--seed`:
/// it was taken, then refused as a `--set seed=…` nobody typed.
#[test]
fn a_seed_past_what_a_scenario_holds_is_refused_naming_seed() {
    for command in ["run", "check"] {
        let output = c10dsim(&[
            command,
            "scenarios/straggler.toml",
            "--seed",
            "9223372036854775808",
        ]);
        assert_refused(&output, "--seed", command);
        assert_refused(&output, "9223372036854775807", command);
        assert!(!stderr(&output).contains("--set"), "{}", stderr(&output));
    }
    let output = c10dsim(&[
        "check",
        "scenarios/straggler.toml",
        "--seed",
        "9223372036854775807",
    ]);
    assert_eq!(code(&output), Some(0), "{}", stderr(&output));
}

/// `--seed` and `--machine` are taken by every command that loads one scenario with `--set`,
/// with `run`'s rules: beside `--set seed=` or `--set machine=` they are refused. Until
/// 2026-12-07 only `run` took them, though the README gives `--seed N` as `--set seed=N`.
#[test]
fn seed_and_machine_are_taken_by_every_command_that_takes_set() {
    let commands: [&[&str]; 4] = [
        &["resolve", "scenarios/straggler.toml", "--json"],
        &["check", "scenarios/straggler.toml"],
        &["torch", "scenarios/straggler.toml"],
        &["hw", "scenarios/straggler.toml"],
    ];
    for command in commands {
        let seeds = [command, &["--seed", "5", "--set", "seed=6"]].concat();
        let output = c10dsim(&seeds);
        assert_refused(
            &output,
            "--seed 5 and --set seed=6 both set the seed",
            &seeds.join(" "),
        );
        let machines = [
            command,
            &[
                "--machine",
                "profiles/h200-x4.toml",
                "--set",
                "machine=h200",
            ],
        ]
        .concat();
        let output = c10dsim(&machines);
        assert_refused(
            &output,
            "--machine profiles/h200-x4.toml and --set machine=h200 both name the machine profile",
            &machines.join(" "),
        );
    }
    let output = c10dsim(&["check", "scenarios/straggler.toml", "--seed", "5"]);
    assert_eq!(code(&output), Some(0), "{}", stderr(&output));
    // `torch` loads the scenario with them before it asks Python anything.
    let output = c10dsim(&[
        "torch",
        "scenarios/straggler.toml",
        "--seed",
        "5",
        "--nproc",
        "0",
    ]);
    assert_refused(
        &output,
        "--nproc must be at least 1",
        "torch --seed 5 --nproc 0",
    );
}

/// `resolve --seed N --machine P` is what `--set seed=N` and the profile give, recorded as typed
/// (the path `c10dsim torch` and its Timeline carry).
#[test]
fn resolve_applies_seed_and_machine_and_records_them_as_typed() {
    let resolved = |args: &[&str]| -> serde_json::Value {
        let output = c10dsim(&[&["resolve", "scenarios/straggler.toml", "--json"], args].concat());
        assert_eq!(code(&output), Some(0), "{}", stderr(&output));
        serde_json::from_str(&stdout(&output)).unwrap()
    };
    let typed = resolved(&["--seed", "5", "--machine", "profiles/h200-x4.toml"]);
    assert_eq!(typed["seed"], 5);
    assert_eq!(
        typed["path"],
        "scenarios/straggler.toml [--seed 5 --machine profiles/h200-x4.toml]"
    );
    // The same scenario but for how it was invoked and the hash of the edited text.
    let mut set = resolved(&["--set", "seed=5", "--set", "machine=h200-x4"]);
    assert_eq!(set["cluster"], typed["cluster"]);
    for key in ["path", "source_hash"] {
        set[key] = typed[key].clone();
    }
    assert_eq!(set, typed);
}

#[test]
fn machine_with_set_machine_is_refused_and_the_header_names_machine() {
    // Both given, parameters mixed the two profiles and the header named neither flag.
    let output = c10dsim(&[
        "run",
        "scenarios/straggler.toml",
        "--machine",
        "profiles/h200-x4.toml",
        "--set",
        "machine=h200",
    ]);
    assert_refused(
        &output,
        "--machine profiles/h200-x4.toml and --set machine=h200 both name the machine profile",
        "--machine with --set machine",
    );
    assert_eq!(stdout(&output), "", "nothing runs");
    let output = c10dsim(&[
        "run",
        "scenarios/straggler.toml",
        "--machine",
        "profiles/h200-x4.toml",
        "--seed",
        "3",
        "--set",
        "repeat=2",
    ]);
    assert_eq!(code(&output), Some(0), "{}", stderr(&output));
    let header = stdout(&output).lines().next().unwrap_or("").to_string();
    assert!(
        header.contains(
            "(scenarios/straggler.toml [--seed 3 --machine profiles/h200-x4.toml --set repeat=2], sha "
        ),
        "{header}"
    );
}

#[test]
fn set_machine_names_a_profile() {
    let output = c10dsim(&[
        "run",
        "scenarios/all_to_all.toml",
        "--set",
        "machine=h200",
        "--json",
    ]);
    assert_eq!(code(&output), Some(0), "{}", stderr(&output));
    assert!(stderr(&output).contains("machine profile profiles/h200.toml"));
    let report: serde_json::Value = serde_json::from_str(&stdout(&output)).unwrap();
    assert_eq!(
        report["parameters"]["memory"]["capacity_bytes"],
        serde_json::json!(141u64 << 30)
    );
}

#[test]
fn resume_removes_a_duplicated_row() {
    let out = temp("duplicated.csv");
    let out_text = out.to_str().unwrap();
    let args = [
        "sweep",
        "scenarios/exp_a_sweep.toml",
        "--threads",
        "1",
        "-o",
        out_text,
    ];
    let output = c10dsim(&args);
    assert_eq!(code(&output), Some(0), "{}", stderr(&output));
    let whole = std::fs::read_to_string(&out).unwrap();
    let lines: Vec<&str> = whole.lines().collect();
    let mut duplicated: Vec<&str> = lines[..3].to_vec();
    duplicated.push(lines[2]);
    std::fs::write(&out, duplicated.join("\n") + "\n").unwrap();
    let mut resume = args.to_vec();
    resume.push("--resume");
    let output = c10dsim(&resume);
    assert_eq!(code(&output), Some(0), "{}", stderr(&output));
    // The duplicated point counts once among those already there.
    assert!(
        stderr(&output).contains(", 2 already in"),
        "{}",
        stderr(&output)
    );
    assert_eq!(std::fs::read_to_string(&out).unwrap(), whole);
    // A row of a point this sweep does not have is refused, the file left as it is.
    let mut past: Vec<String> = lines[..3].iter().map(ToString::to_string).collect();
    past.push(lines[2].replacen('1', "18446744073709551615", 1));
    let text = past.join("\n") + "\n";
    std::fs::write(&out, &text).unwrap();
    let output = c10dsim(&resume);
    assert_refused(
        &output,
        "holds point 18446744073709551615, but this sweep has 24 points",
        "--resume",
    );
    assert_eq!(std::fs::read_to_string(&out).unwrap(), text);
}

#[test]
fn merge_takes_a_row_of_the_largest_point_index_without_overflow() {
    // A table without `sweep_points` (`c10dsim-sweep/2`): the points below the highest given
    // are named; one past u64::MAX used to overflow (a panic in a debug build).
    let table = write("merge_max.csv", "point,a\n0,x\n18446744073709551615,y\n");
    let out = temp("merge_max_out.csv");
    let output = c10dsim(&["merge", &table, "-o", out.to_str().unwrap()]);
    assert_no_panic(&output);
    assert_eq!(code(&output), Some(0), "{}", stderr(&output));
    assert!(
        stderr(&output).contains(
            "warning: 18446744073709551614 of the points 0-18446744073709551615 have no row (points 1-18446744073709551614)"
        ),
        "{}",
        stderr(&output)
    );
    // With `sweep_points`, a point past the sweep's count is refused.
    let table = write(
        "merge_past.csv",
        "point,sweep_points\n0,3\n18446744073709551615,3\n",
    );
    let output = c10dsim(&["merge", &table, "-o", out.to_str().unwrap()]);
    assert_refused(
        &output,
        "point 18446744073709551615 is not one of its sweep's 3 points (0 to 2)",
        "merge",
    );
}

#[test]
fn a_file_that_is_not_utf8_is_refused_at_its_first_bad_byte() {
    let path = temp("latin1.toml");
    std::fs::write(
        &path,
        b"[cluster]\nranks = 2 # caf\xe9\n[[op]]\nmark = \"a\"\n",
    )
    .unwrap();
    let output = c10dsim(&["run", path.to_str().unwrap()]);
    assert_eq!(code(&output), Some(2));
    assert!(
        stderr(&output).contains("latin1.toml:2:16: error: not UTF-8 text (byte 0xe9)"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn an_unknown_machine_profile_is_refused_at_its_key() {
    let file = write(
        "unknown_machine.toml",
        "name = \"m\"\nmachine = \"no_such_gpu\"\n[[op]]\nmark = \"a\"\n",
    );
    let output = c10dsim(&["run", &file]);
    assert_eq!(code(&output), Some(2));
    assert!(
        stderr(&output).contains(
            "unknown_machine.toml:2:1: error: machine = \"no_such_gpu\": no such profile ("
        ),
        "{}",
        stderr(&output)
    );
    // A near miss names the profile it likely meant, as unknown tensors and labels do.
    let file = write(
        "misspelt_machine.toml",
        "name = \"m\"\nmachine = \"h20\"\n[[op]]\nmark = \"a\"\n",
    );
    let output = c10dsim(&["run", &file]);
    assert_eq!(code(&output), Some(2));
    assert!(
        stderr(&output)
            .contains("machine = \"h20\": no such profile; did you mean \"h200\"? (looked for"),
        "{}",
        stderr(&output)
    );
    // The message says where it looked: a plain name only under `profiles/`, a path only
    // relative to the scenario's folder and the working directory.
    assert!(
        stderr(&output).contains(
            "(looked for profiles/h20.toml in the scenario's folder, the folders above it and \
             the working directory)"
        ),
        "{}",
        stderr(&output)
    );
    let file = write(
        "path_machine.toml",
        "name = \"m\"\nmachine = \"profiles/h20.toml\"\n[[op]]\nmark = \"a\"\n",
    );
    let output = c10dsim(&["run", &file]);
    assert_eq!(code(&output), Some(2));
    assert!(
        stderr(&output).contains(
            "machine = \"profiles/h20.toml\": no such profile (looked for it relative to the \
             scenario's folder, then to the working directory)"
        ),
        "{}",
        stderr(&output)
    );
}

#[test]
fn a_trace_whose_rank_calls_a_collective_on_a_group_without_it_is_refused() {
    // found by the kineto fuzz target (fuzz/regressions/kineto): a 2-rank c10dsim trace whose
    // group list was edited to [1] imported into a scenario the parser refused
    let output = c10dsim(&[
        "import",
        "kineto",
        "fuzz/regressions/kineto/crash-6409a95fcf0867c7728a7751c4cef6c9aacea68d",
        "-o",
        "-",
    ]);
    assert_no_panic(&output);
    assert_eq!(code(&output), Some(2));
    assert!(
        stderr(&output).contains("error: rank 0 calls all_reduce on a group without it"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn a_trace_whose_step_lies_days_from_its_calls_is_refused() {
    // found by the kineto fuzz target (fuzz/regressions/kineto): a ProfilerStep moved far from
    // the CUDA calls made a host gap of 61 days, which the scenario parser refused
    let output = c10dsim(&[
        "import",
        "kineto",
        "fuzz/regressions/kineto/crash-4e9e89b4335068698567072f4b652e71ce51ec08",
        "-o",
        "-",
    ]);
    assert_no_panic(&output);
    assert_eq!(code(&output), Some(2));
    assert!(
        stderr(&output).contains("error: the trace spans more than a day"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn bench_refuses_bad_sizes_naming_the_flag_before_any_work() {
    let csv = temp("bench_refused.csv");
    let _ = std::fs::remove_file(&csv);
    let csv = csv.to_str().unwrap();
    for (args, message) in [
        (
            vec!["--ranks", "0"],
            "--ranks 0: the number of ranks must be between 1 and 131072",
        ),
        (
            vec!["--iterations", "0"],
            "--iterations 0: must be between 1 and 1000000",
        ),
        (
            vec!["--scaling", "2,0", "-o", csv],
            "--scaling 0: the number of ranks",
        ),
        (
            vec!["--scaling", "2", "-o", csv, "--plot", "chart.txt"],
            "--plot chart.txt: the picture's name must end in .svg or .png",
        ),
        // A repeated count ran every point, wrote the CSV, then failed making the chart.
        (
            vec!["--scaling", "2,4,2", "-o", csv],
            "--scaling 2: a number of ranks given twice",
        ),
    ] {
        let output = c10dsim(&[&["bench"], args.as_slice()].concat());
        assert_refused(&output, message, &format!("{args:?}"));
        assert!(
            !std::path::Path::new(csv).exists(),
            "{args:?} wrote the CSV"
        );
    }
}

#[test]
fn bench_against_a_binary_that_prints_no_row_says_so_with_exit_2() {
    let output = c10dsim(&[
        "bench",
        "--repeat",
        "1",
        "--against",
        "/bin/true",
        "--ranks",
        "2",
        "--iterations",
        "2",
    ]);
    assert_refused(
        &output,
        "/bin/true bench --csv-row with 2 ranks failed or printed no row of 15 figures (exit status: 0; nothing on stdout)",
        "--against /bin/true",
    );
}

#[test]
fn a_held_out_scenario_over_the_caps_is_refused_not_simulated() {
    // calibrate --validate (and fidelity, import) simulate a scenario they reach on their own:
    // under the caps `run` applies, a million repeats are refused at once instead of running
    // for minutes and gigabytes.
    let scenario = std::fs::read_to_string("scenarios/exp_b_stream_scope.toml").unwrap();
    let heavy = write(
        "heavy.toml",
        &scenario.replacen("repeat = ", "repeat = 1000000 #", 1),
    );
    let measured = "tests/data/hw/exp_b_stream_scope.json";
    let profile = temp("heavy_profile.toml");
    // Fitted to another run: a run fitted is not held out.
    let output = c10dsim(&[
        "calibrate",
        "tests/data/hw/hw_host_overhead.json",
        "--validate",
        &format!("{measured}={heavy}"),
        "-o",
        profile.to_str().unwrap(),
    ]);
    assert_refused(
        &output,
        "this command simulates the scenario to compare it: raise the caps with --max-events",
        "calibrate --validate",
    );
}

#[test]
fn an_endless_scenario_file_is_refused_without_reading_it_all() {
    // /dev/zero is valid UTF-8 without end: read whole, it took gigabytes.
    if !std::path::Path::new("/dev/zero").exists() {
        skipped("an_endless_scenario_file_is_refused_without_reading_it_all: no /dev/zero");
        return;
    }
    let output = c10dsim(&["check", "/dev/zero"]);
    assert_refused(
        &output,
        "/dev/zero: a device, not a file",
        "check /dev/zero",
    );
    // Through standard input, a pipe: read up to the cap, then refused.
    let output = Command::new(env!("CARGO_BIN_EXE_c10dsim"))
        .args(["check", "-"])
        .stdin(std::fs::File::open("/dev/zero").unwrap())
        .output()
        .unwrap();
    assert_refused(
        &output,
        "standard input holds more than 64 MiB",
        "check - < /dev/zero",
    );
}

/// Every rank of a hang dumps its Flight Recorder, each dump listing every rank of its groups:
/// unfolded, the Timeline's `flight_recorder` section grows with the square of the ranks, and
/// the estimate counts it (refused before the run, the section named); a Timeline that still
/// passes `--max-timeline` as it is written (a summarised one, of whose size only the kept
/// records are estimated: here 96 KiB of the 142 KB) is not written.
#[test]
fn the_timeline_cap_counts_the_flight_recorder_dumps_and_holds_while_writing() {
    let path = temp("fr_capped.json");
    let _ = std::fs::remove_file(&path);
    let out = path.to_str().unwrap().to_string();
    let ranks = ["--set", "cluster.ranks=2048"];
    let unfolded = [
        &["run", "scenarios/hang_10min.toml", "--no-fold"][..],
        &ranks,
        &["--max-timeline", "10MiB", "--timeline", &out],
    ]
    .concat();
    let output = c10dsim(&unfolded);
    assert_eq!(code(&output), Some(2), "{}", stderr(&output));
    let err = stderr(&output);
    assert!(err.contains("flight_recorder"), "{err}");
    assert!(err.contains("nothing was run"), "{err}");
    assert!(!std::path::Path::new(&out).exists());
    let check = [
        &["check", "scenarios/hang_10min.toml", "--no-fold"][..],
        &ranks,
    ]
    .concat();
    let output = c10dsim(&[&check[..], &["--max-timeline", "10MiB"]].concat());
    assert_eq!(code(&output), Some(2), "{}", stderr(&output));
    // Under the default cap it runs, and the estimate is larger than the file.
    let estimated = stdout(&c10dsim(&check));
    assert!(estimated.contains("MiB Timeline"), "{estimated}");
    let summarised = [
        &["run", "scenarios/hang_10min.toml", "--summary"][..],
        &["--set", "cluster.ranks=64", "--records-for", "ranks=0-63"],
        &["--max-timeline", "128KiB", "--timeline", &out],
    ]
    .concat();
    let output = c10dsim(&summarised);
    assert_eq!(code(&output), Some(2), "{}", stderr(&output));
    let err = stderr(&output);
    assert!(err.contains("--max-timeline"), "{err}");
    assert!(err.contains("flight_recorder"), "{err}");
    assert!(!std::path::Path::new(&out).exists());
}

/// A UTF-8 byte order mark (what Windows editors and PowerShell's `Out-File` put first) is
/// skipped, as RFC 8259 allows and the scenario's TOML reader did: a Timeline or a profiler
/// trace that starts with one was refused at `1:1` with "expected value".
#[test]
fn a_utf8_byte_order_mark_is_skipped_by_every_reader() {
    let timeline = temp("bom_timeline.json");
    let run = c10dsim(&[
        "run",
        "scenarios/get_future.toml",
        "--timeline",
        timeline.to_str().unwrap(),
    ]);
    assert_eq!(code(&run), Some(0), "{}", stderr(&run));
    let with_bom = |path: &std::path::Path, name: &str| {
        let mut bytes = b"\xef\xbb\xbf".to_vec();
        bytes.extend(std::fs::read(path).unwrap());
        let marked = temp(name);
        std::fs::write(&marked, bytes).unwrap();
        marked
    };
    let marked = with_bom(&timeline, "bom_marked_timeline.json");
    let diff = c10dsim(&["diff", timeline.to_str().unwrap(), marked.to_str().unwrap()]);
    assert_eq!(code(&diff), Some(0), "{}", stderr(&diff));
    let trace = with_bom(
        std::path::Path::new("tests/data/torch/recorded/traces/ddp_b25/rank0.json"),
        "bom_rank0.json",
    );
    let import = c10dsim(&["import", "kineto", trace.to_str().unwrap(), "-o", "-"]);
    assert_eq!(code(&import), Some(0), "{}", stderr(&import));
}

/// `diff` (and `calibrate`, `fidelity`, `run --against`, the replays) compares every rank, so
/// it expands a folded Timeline (docs/scale.md): a folded Timeline of 65,536 ranks x `repeat =
/// 1000000`, 135 MB, was expanded by `diff` until the memory ran out (5.7 GB in 9 s under a
/// 6 GB limit; terabytes without one). The expanded size is held to `--max-timeline` before it
/// expands, as the memory it would hold. Here 64 ranks x 1,000 iterations: folded 119 KB,
/// expanded about 3.6 MiB of JSON, 21.6 MiB held; `diff` holds two.
#[test]
fn diff_holds_a_folded_timeline_expanded_to_every_rank_to_the_timeline_cap() {
    let file = write(
        "diff_expanded.toml",
        "repeat = 1000\n[cluster]\nranks = 64\n[[op]]\nhost_sleep_us = 1\n",
    );
    let timeline = temp("diff_expanded.json");
    let timeline_path = timeline.to_str().unwrap();
    let output = c10dsim(&["run", &file, "--timeline", timeline_path]);
    assert_eq!(code(&output), Some(0), "{}", stderr(&output));
    let output = c10dsim(&[
        "diff",
        timeline_path,
        timeline_path,
        "--max-timeline",
        "4MiB",
    ]);
    assert_refused(&output, "diff holds both Timelines", "diff at 4MiB");
    let err = stderr(&output);
    assert!(err.contains("expanded to every rank"), "{err}");
    assert!(
        err.contains("over the cap of 4MiB (--max-timeline); nothing was compared"),
        "{err}"
    );
    assert!(err.contains("--set repeat="), "{err}");
    assert!(stdout(&output).is_empty());
    // A command that holds one Timeline counts one.
    let profile = temp("diff_expanded.profile.toml");
    let output = c10dsim(&[
        "calibrate",
        &format!("{timeline_path}={file}"),
        "-o",
        profile.to_str().unwrap(),
        "--max-timeline",
        "4MiB",
    ]);
    assert_refused(
        &output,
        &format!("{timeline_path}: a folded Timeline: expanded to all 64 ranks"),
        "calibrate at 4MiB",
    );
    assert!(
        stderr(&output).contains("would hold about 21.63MiB of memory"),
        "{}",
        stderr(&output)
    );
    // Under the default cap it compares.
    let output = c10dsim(&["diff", timeline_path, timeline_path]);
    assert_eq!(code(&output), Some(0), "{}", stderr(&output));
    let _ = std::fs::remove_file(&timeline);
}

/// `diff` holds both Timelines, each expanded to every rank, in memory: 1.3 to 4.9 times their
/// JSON each, measured. Counted as one Timeline's JSON, `diff` of the folded Timeline of 65,536
/// ranks of hang_10min against itself was estimated at 127 MiB and held 511 MiB; `run
/// --against` holds the simulated run beside the measured one. Both are counted, at 6 bytes of
/// memory a byte of JSON. Here 64 ranks x 1000 iterations: 3.61 MiB of JSON expanded a side,
/// 43.26 MiB held as estimated.
#[test]
fn diff_counts_the_memory_of_both_timelines_it_holds() {
    let file = write(
        "diff_both.toml",
        "repeat = 1000\n[cluster]\nranks = 64\n[[op]]\nhost_sleep_us = 1\n",
    );
    let timeline = temp("diff_both.json");
    let timeline_path = timeline.to_str().unwrap();
    let output = c10dsim(&["run", &file, "--timeline", timeline_path]);
    assert_eq!(code(&output), Some(0), "{}", stderr(&output));
    let diff = |cap: &str| c10dsim(&["diff", timeline_path, timeline_path, "--max-timeline", cap]);
    let output = diff("16MiB");
    assert_refused(&output, "diff holds both Timelines", "diff at 16MiB");
    let err = stderr(&output);
    assert!(
        err.contains("about 43.26MiB of memory (3.61MiB and 3.61MiB of JSON, 6 bytes a byte)")
            && err.contains("over the cap of 16MiB (--max-timeline)"),
        "{err}"
    );
    let output = diff("64MiB");
    assert_eq!(code(&output), Some(0), "{}", stderr(&output));
    let tiny = write(
        "diff_both_tiny.toml",
        "[cluster]\nranks = 1\n[[op]]\nhost_sleep_us = 1\n",
    );
    let against = |cap: &str| {
        c10dsim(&[
            "run",
            &tiny,
            "--max-timeline",
            cap,
            "--against",
            timeline_path,
        ])
    };
    assert_refused(&against("16MiB"), "of memory", "run --against at 16MiB");
    let output = against("32MiB");
    assert_ne!(code(&output), Some(2), "{}", stderr(&output));
    let _ = std::fs::remove_file(&timeline);
}

/// A hang's every rank dumps its Flight Recorder, each dump listing every rank of its groups:
/// the expanded Timeline's dumps share those lists (one per group, in memory), and `diff` never
/// writes them. Counted once per rank, they made `diff` of the folded Timeline of 65,536 ranks
/// of scenarios/hang_10min.toml against itself refuse at about 23 GiB. Here 4,096 ranks: about
/// 84 MiB of JSON a side with the lists counted per rank (about 1 GiB held, both sides), 7.95
/// MiB as `diff` holds it (95 MiB estimated, 32 MiB measured).
#[test]
fn diff_counts_the_dumps_rank_lists_once_as_it_holds_them() {
    let timeline = temp("diff_dump_lists.json");
    let timeline_path = timeline.to_str().unwrap();
    let output = c10dsim(&[
        "run",
        "scenarios/hang_10min.toml",
        "--set",
        "cluster.ranks=4096",
        "--timeline",
        timeline_path,
    ]);
    assert_eq!(code(&output), Some(1), "{}", stderr(&output));
    let diff = |cap: &str| c10dsim(&["diff", timeline_path, timeline_path, "--max-timeline", cap]);
    let output = diff("128MiB");
    assert_eq!(code(&output), Some(0), "{}", stderr(&output));
    // Still held to the cap: the records and entries of every rank's dump count per rank.
    let output = diff("1MiB");
    assert_eq!(code(&output), Some(2), "{}", stderr(&output));
    let err = stderr(&output);
    assert!(
        err.contains("diff holds both Timelines") && err.contains("7.95MiB and 7.95MiB of JSON"),
        "{err}"
    );
    assert!(
        err.contains("over the cap of 1MiB (--max-timeline)"),
        "{err}"
    );
    let _ = std::fs::remove_file(&timeline);
}

/// Reading a Timeline file holds its text and the Timeline parsed from it: up to about 4.7 times
/// its size measured, which nothing capped: `diff` of a 2.6 GB Timeline against itself aborted
/// after 12 s at 3.8 GB under a 6 GB address-space limit. Each file is held to `--max-timeline`
/// before it is read, at `TIMELINE_MEMORY_BYTES_PER_JSON_BYTE` (6) bytes a byte, for `diff` and
/// `run --against` alike, and standard input is read no further than that share. Here a 47 KB
/// unfolded Timeline: about 280 KB read.
#[test]
fn a_timeline_file_is_held_to_the_timeline_cap_before_it_is_read() {
    let file = write(
        "read_cap.toml",
        "repeat = 200\n[cluster]\nranks = 4\nfold = false\n[[op]]\nhost_sleep_us = 1\n",
    );
    let timeline = temp("read_cap.json");
    let timeline_path = timeline.to_str().unwrap();
    let output = c10dsim(&["run", &file, "--timeline", timeline_path]);
    assert_eq!(code(&output), Some(0), "{}", stderr(&output));
    let size = std::fs::metadata(&timeline).unwrap().len();
    assert!(size > 32 << 10 && size < 64 << 10, "{size} bytes");
    let refused = |output: &std::process::Output, shown: &str| {
        assert_refused(output, &format!("{shown}: a Timeline file of "), shown);
        let err = stderr(output);
        assert!(
            err.contains("over the cap of 128KiB (--max-timeline)"),
            "{err}"
        );
        assert!(err.contains("raise --max-timeline"), "{err}");
        assert!(stdout(output).is_empty(), "{}", stdout(output));
    };
    let diff = |cap: &str| c10dsim(&["diff", timeline_path, timeline_path, "--max-timeline", cap]);
    let output = diff("128KiB");
    refused(&output, timeline_path);
    assert!(
        stderr(&output).contains(&format!("{size} bytes")),
        "{}",
        stderr(&output)
    );
    let against = c10dsim(&[
        "run",
        "scenarios/hang_10min.toml",
        "--max-timeline",
        "128KiB",
        "--against",
        timeline_path,
    ]);
    refused(&against, timeline_path);
    let text = std::fs::read(&timeline).unwrap();
    let small = temp("read_cap_small.json");
    let small_path = small.to_str().unwrap();
    let one_call = write(
        "read_cap_small.toml",
        "[cluster]\nranks = 1\n[[op]]\nhost_sleep_us = 1\n",
    );
    let output = c10dsim(&["run", &one_call, "--timeline", small_path]);
    assert_eq!(code(&output), Some(0), "{}", stderr(&output));
    let fed = c10dsim_fed(
        &["diff", "-", small_path, "--max-timeline", "128KiB"],
        &text,
    );
    refused(&fed, "standard input");
    // Raised, it is read and compared.
    let output = diff("1MiB");
    assert_eq!(code(&output), Some(0), "{}", stderr(&output));
    let _ = std::fs::remove_file(&timeline);
}

/// `run --fr-dir` writes a Flight Recorder dump per rank, each listing every rank of its
/// groups: the square of the ranks, whatever the folding. 65,536 ranks of
/// scenarios/hang_10min.toml (0.01 s plain) had written no file after 2 minutes, its dumps about
/// 26 GB of disk (16,384 ranks: 1.7 GB in 20 s; 131,072 ranks: about 100 GB). The dumps are
/// estimated unfolded and held to `--max-timeline` before the run. Here 64 ranks: folded a
/// 12.5 KiB Timeline, the dumps about 160 KiB (76 KB written).
#[test]
fn flight_recorder_files_of_every_rank_are_held_to_the_timeline_cap() {
    let dir = temp("fr_dir_over_cap");
    let dir_path = dir.to_str().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let run = |cap: &str| {
        c10dsim(&[
            "run",
            "scenarios/hang_10min.toml",
            "--set",
            "cluster.ranks=64",
            "--max-timeline",
            cap,
            "--fr-dir",
            dir_path,
        ])
    };
    let output = run("64KiB");
    assert_eq!(code(&output), Some(2), "{}", stderr(&output));
    let err = stderr(&output);
    assert!(
        err.contains("--fr-dir writes a Flight Recorder dump for each of the 64 ranks"),
        "{err}"
    );
    assert!(
        err.contains("over the cap of 64KiB (--max-timeline)"),
        "{err}"
    );
    assert!(err.contains("nothing was run"), "{err}");
    assert!(!dir.exists(), "--fr-dir made {dir_path}");
    // Without --fr-dir the folded run fits the cap; raised, the dumps are written.
    let output = c10dsim(&[
        "run",
        "scenarios/hang_10min.toml",
        "--set",
        "cluster.ranks=64",
        "--max-timeline",
        "64KiB",
    ]);
    assert_eq!(code(&output), Some(1), "{}", stderr(&output));
    let output = run("256KiB");
    assert_eq!(code(&output), Some(1), "{}", stderr(&output));
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 64);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The estimate before the run cannot see every timeout: a straggler's 2 s before an
/// all_reduce under a 1 s timeout times out the other 63 ranks, each dumping, though nothing in
/// the scenario is a fault (65,536 such ranks would write some 26 GB). The dumps the run made
/// are measured after it and held to `--max-timeline` before anything is written.
#[test]
fn flight_recorder_files_the_estimate_missed_are_held_to_the_timeline_cap_after_the_run() {
    let file = write(
        "straggler_dumps.toml",
        "[cluster]\nranks = 64\n[groups.world]\ntimeout_s = 1\neager_init = true\n\
         [tensors]\nx = \"1MiB\"\n[[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\n\
         [[perturb]]\nranks = [3]\nbefore = \"ar\"\nhost_delay_us = 2_000_000\n",
    );
    let dir = temp("straggler_dumps");
    let timeline = temp("straggler_dumps.json");
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_file(&timeline);
    let run = |cap: &str| {
        c10dsim(&[
            "run",
            &file,
            "--max-timeline",
            cap,
            "--fr-dir",
            dir.to_str().unwrap(),
            "--timeline",
            timeline.to_str().unwrap(),
        ])
    };
    let output = run("64KiB");
    assert_eq!(code(&output), Some(2), "{}", stderr(&output));
    let err = stderr(&output);
    assert!(
        err.contains("--fr-dir writes the Flight Recorder dumps of the 64 ranks that dumped"),
        "{err}"
    );
    assert!(
        err.contains("over the cap of 64KiB (--max-timeline)"),
        "{err}"
    );
    assert!(err.contains("nothing was written"), "{err}");
    assert!(!dir.exists() && !timeline.exists(), "an output was written");
    let output = run("1MiB");
    assert_eq!(code(&output), Some(1), "{}", stderr(&output));
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 64);
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_file(&timeline);
}

/// A summarised run keeps whole the records `--records-for` names, and `--trace`, `--trace-dir`,
/// `--svg` and `--timeline` show them: that share of the unfolded Timeline is held to
/// `--max-timeline` before the run. 65,536 ranks x `repeat = 300` with `--summary --records-for
/// 'ranks=0-65535 iterations=0-299' --trace` (refused without `--summary`) wrote a 5.35 GB trace
/// in 44 s. Here 64 ranks x 1,000 iterations: every record about 31 MiB, rank 0's 500 KiB.
#[test]
fn the_records_a_summarised_run_keeps_are_held_to_the_timeline_cap() {
    let file = write(
        "summary_records.toml",
        "repeat = 1000\n[cluster]\nranks = 64\n[[op]]\nhost_sleep_us = 1\n",
    );
    let trace = temp("summary_records.json");
    let trace_path = trace.to_str().unwrap();
    let run = |records: &str| {
        let _ = std::fs::remove_file(&trace);
        c10dsim(&[
            "run",
            &file,
            "--max-timeline",
            "1MiB",
            "--summary",
            "--records-for",
            records,
            "--trace",
            trace_path,
        ])
    };
    let output = run("ranks=0-63");
    assert_eq!(code(&output), Some(2), "{}", stderr(&output));
    let err = stderr(&output);
    assert!(
        err.contains("--trace shows the records --records-for keeps: 64 ranks x 1000 iterations"),
        "{err}"
    );
    // Its example runs as given: unquoted, clap takes `iterations=0` for an argument of its own.
    assert!(
        err.contains("--records-for 'ranks=0 iterations=0'"),
        "{err}"
    );
    assert!(
        err.contains("over the cap of 1MiB (--max-timeline)"),
        "{err}"
    );
    assert!(err.contains("nothing was run"), "{err}");
    assert!(!trace.exists());
    let output = run("ranks=0");
    assert_eq!(code(&output), Some(0), "{}", stderr(&output));
    assert!(trace.exists());
    let _ = std::fs::remove_file(&trace);
}

/// `bench` generates its scenario from `--ranks` and `--iterations` and simulated it with no
/// estimate: `bench --ranks 131072 --iterations 1000000 --no-fold` (1.3 x 10^11 rank-iterations)
/// ran out of a 6 GB limit in a second, and would run for days without one. Its scenario is
/// held to the caps as `run`'s is, for every point of `--scaling` and `--repeat` before any runs.
#[test]
fn bench_holds_its_scenario_to_the_work_caps() {
    let refused = |args: &[&str]| {
        let output = c10dsim(&[&["bench", "--iterations", "1000"][..], args].concat());
        assert_eq!(code(&output), Some(2), "{args:?}: {}", stderr(&output));
        let err = stderr(&output);
        assert!(err.contains("over the cap of 100000"), "{err}");
        assert!(err.contains("nothing was run"), "{err}");
        assert!(err.contains("--max-events"), "{err}");
        assert!(stdout(&output).is_empty());
        err
    };
    // 64 ranks x 1,000 iterations x 3 ops: folded 2 classes, 24,000 events; unfolded 768,000.
    let err = refused(&["--ranks", "64", "--no-fold", "--max-events", "100000"]);
    assert!(err.contains("bench --ranks 64 --iterations 1000"), "{err}");
    refused(&["--ranks", "64", "--summary", "--max-events", "100000"]);
    let points = ["--scaling", "2,64", "--no-fold", "--max-events", "100000"];
    let err = refused(&[&points[..], &["-o", "-"]].concat());
    assert!(err.contains("bench --ranks 64"), "{err}");
    refused(&[
        "--ranks",
        "64",
        "--no-fold",
        "--max-events",
        "100000",
        "--repeat",
        "2",
    ]);
    let output = c10dsim(&[
        "bench",
        "--ranks",
        "64",
        "--iterations",
        "1000",
        "--max-events",
        "100000",
    ]);
    assert_eq!(code(&output), Some(0), "{}", stderr(&output));
}
