//! Outputs under stress (docs/reliability.md, "Outputs: written whole, never over an input"):
//! a reader that goes away, a full disk, an output named like an input, a write cut half-way, a
//! sweep's file removed or emptied while it runs.
//! Split from robustness.rs, whose helpers it shares.

use crate::robustness::{assert_no_panic, assert_refused, code, temp};
use crate::util::{c10dsim, skipped, stderr};
use sim::timeline::Timeline;
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Output, Stdio};

/// Runs the binary with `args`, reads the first `bytes` bytes of its stdout, then closes the
/// pipe: the command must end quietly (exit 0, no panic, nothing on stderr). The bytes read.
fn reader_goes_away(args: &[&str], bytes: usize) -> Vec<u8> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_c10dsim"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = vec![0u8; bytes];
    child.stdout.take().unwrap().read_exact(&mut first).unwrap();
    let output = child.wait_with_output().unwrap();
    assert_no_panic(&output);
    assert_eq!(code(&output), Some(0), "{args:?}: {}", stderr(&output));
    assert_eq!(stderr(&output), "", "{args:?}");
    first
}

#[test]
fn a_reader_that_goes_away_ends_the_run_quietly() {
    let first = reader_goes_away(
        &[
            "run",
            "scenarios/hang_10min.toml",
            // Unfolded, every rank's lines: more output than a pipe holds.
            "--no-fold",
            "--detail",
            "ranks",
            "--set",
            "cluster.ranks=256",
        ],
        21,
    );
    assert_eq!(first, b"scenario \"hang_10min\"");
}

#[test]
fn a_reader_that_goes_away_from_a_file_on_stdout_ends_the_run_quietly() {
    // `--trace -`, `--timeline -` and `--svg -` used to exit 2 with "cannot write to standard
    // output: Broken pipe" where the report's own stdout ended quietly.
    for flag in ["--trace", "--timeline", "--svg"] {
        // Every file of the overlap benchmark is more than a pipe holds; a few bytes, then the
        // pipe closes (the Timeline is one line of JSON).
        let first = reader_goes_away(&["run", "scenarios/overlap_bench.toml", flag, "-"], 4);
        assert!(first == b"<svg" || first[0] == b'{', "{flag}: {first:?}");
    }
}

#[test]
fn a_reader_that_goes_away_from_the_man_page_or_completions_ends_them_quietly() {
    // They used to exit 2 with "cannot write the man page: Broken pipe" (`c10dsim man | head`).
    for args in [["man"].as_slice(), ["completions", "bash"].as_slice()] {
        reader_goes_away(args, 1);
    }
}

#[test]
fn a_standard_error_nobody_reads_changes_no_exit_status() {
    // Its read end closed before the command starts: every note, warning and error message
    // meets a closed pipe. `eprintln!` used to panic there (exit 101): a sweep's notes, a bad
    // `--set`'s message.
    for (args, expected) in [
        (
            ["sweep", "scenarios/overlap_sweep.toml", "-o", "-"].as_slice(),
            0,
        ),
        (
            ["run", "scenarios/hang_10min.toml", "--set", "op.nope={}"].as_slice(),
            2,
        ),
        (["run", "scenarios/hang_10min.toml"].as_slice(), 1),
    ] {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let output = Command::new(env!("CARGO_BIN_EXE_c10dsim"))
            .args(args)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .stdout(Stdio::null())
            .stderr(writer)
            .output()
            .unwrap();
        assert_eq!(code(&output), Some(expected), "{args:?}");
    }
}

#[test]
fn a_full_disk_is_an_error_with_a_message() {
    let Ok(full) = std::fs::OpenOptions::new().write(true).open("/dev/full") else {
        skipped("a_full_disk_is_an_error_with_a_message: no /dev/full on this machine");
        return;
    };
    let output = Command::new(env!("CARGO_BIN_EXE_c10dsim"))
        .args(["run", "scenarios/all_to_all.toml"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdout(full)
        .output()
        .unwrap();
    assert_no_panic(&output);
    assert_eq!(code(&output), Some(2));
    assert!(
        stderr(&output).starts_with("c10dsim: writing output: "),
        "{}",
        stderr(&output)
    );
    // A full disk under a named output: the same exit code.
    let output = Command::new(env!("CARGO_BIN_EXE_c10dsim"))
        .args([
            "run",
            "scenarios/all_to_all.toml",
            "--timeline",
            "/dev/full",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    assert_no_panic(&output);
    assert_eq!(code(&output), Some(2));
    assert!(
        stderr(&output).contains("cannot write /dev/full: "),
        "{}",
        stderr(&output)
    );
}

#[test]
fn completions_and_man_on_a_full_disk_exit_2_without_a_panic() {
    for args in [["completions", "bash"].as_slice(), ["man"].as_slice()] {
        let Ok(full) = std::fs::OpenOptions::new().write(true).open("/dev/full") else {
            skipped("completions_and_man_on_a_full_disk_exit_2_without_a_panic: no /dev/full");
            return;
        };
        let output = Command::new(env!("CARGO_BIN_EXE_c10dsim"))
            .args(args)
            .stdout(full)
            .output()
            .unwrap();
        assert_no_panic(&output);
        assert_eq!(code(&output), Some(2), "{args:?}: {}", stderr(&output));
    }
}
#[test]
fn an_output_named_like_an_input_is_refused_and_the_input_kept() {
    let scenario = temp("same.toml");
    std::fs::copy("scenarios/exp_b_stream_scope.toml", &scenario).unwrap();
    let original = std::fs::read(&scenario).unwrap();
    let path = scenario.to_str().unwrap();
    for flag in ["--timeline", "--trace", "--svg"] {
        let output = c10dsim(&["run", path, flag, path]);
        assert_refused(&output, "is also an input of this command", flag);
        assert_eq!(std::fs::read(&scenario).unwrap(), original, "{flag}");
    }
    let sweep = temp("same_sweep.toml");
    std::fs::copy("scenarios/exp_a_sweep.toml", &sweep).unwrap();
    let original = std::fs::read(&sweep).unwrap();
    let path = sweep.to_str().unwrap();
    let output = c10dsim(&["sweep", path, "-o", path]);
    assert_refused(&output, "is also an input of this command", "sweep");
    assert_eq!(std::fs::read(&sweep).unwrap(), original);
}

#[test]
fn an_output_is_written_whole_or_not_at_all() {
    // A write that fails half-way (here: the file is a directory's name by the time of the
    // rename, which cannot replace a directory) leaves no partial file beside it.
    let dir = temp("whole");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("out.json")).unwrap();
    let target = dir.join("out.json");
    let output = c10dsim(&[
        "run",
        "scenarios/exp_b_stream_scope.toml",
        "--timeline",
        target.to_str().unwrap(),
    ]);
    assert_no_panic(&output);
    assert_eq!(code(&output), Some(2), "{}", stderr(&output));
    let left: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name())
        .collect();
    assert_eq!(left, ["out.json"], "a partial file was left behind");
    // A successful write replaces an existing file's contents whole and keeps its permissions.
    let file = dir.join("t.json");
    std::fs::write(&file, "old").unwrap();
    // Execute bits: a file the command creates never has them, whatever the umask.
    let kept_mode = 0o755;
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(kept_mode)).unwrap();
    let output = c10dsim(&[
        "run",
        "scenarios/exp_b_stream_scope.toml",
        "--timeline",
        file.to_str().unwrap(),
    ]);
    assert_eq!(code(&output), Some(0), "{}", stderr(&output));
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(Timeline::from_json(&text).is_ok());
    let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
    assert_eq!(
        mode, kept_mode,
        "the replaced file's permissions were not kept"
    );
    // Through a symbolic link, the file it names is replaced and the link kept.
    let link = dir.join("link.json");
    let real = dir.join("real.json");
    std::fs::write(&real, "old").unwrap();
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let output = c10dsim(&[
        "run",
        "scenarios/exp_b_stream_scope.toml",
        "--timeline",
        link.to_str().unwrap(),
    ]);
    assert_eq!(code(&output), Some(0), "{}", stderr(&output));
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    assert!(Timeline::from_json(&std::fs::read_to_string(&real).unwrap()).is_ok());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_sweep_refused_before_it_runs_leaves_the_existing_csv_alone() {
    let csv = temp("kept.csv");
    let path = csv.to_str().unwrap();
    let first = c10dsim(&["sweep", "scenarios/exp_a_sweep.toml", "-o", path]);
    assert_eq!(code(&first), Some(0), "{}", stderr(&first));
    let rows = std::fs::read(&csv).unwrap();
    let refused = c10dsim(&[
        "sweep",
        "scenarios/exp_a_sweep.toml",
        "-o",
        path,
        "--threads",
        "100000",
    ]);
    assert_refused(&refused, "--threads 100000: at most 1024", "--threads");
    assert_eq!(std::fs::read(&csv).unwrap(), rows);
}

/// Starts `c10dsim sweep` of 2,000 points into `csv` (no shard variables), waits until its first
/// rows are in the file, does `change` to the file while the sweep runs, and waits for the end.
fn sweep_changed_while_it_runs(csv: &std::path::Path, change: impl FnOnce()) -> Output {
    let bufs: Vec<String> = (1..=100).map(|mib| format!("{mib}MiB")).collect();
    let set = format!("tensors.buf={}", bufs.join(","));
    // A file of an earlier run would be taken for this run's rows.
    let _ = std::fs::remove_file(csv);
    let mut command = Command::new(env!("CARGO_BIN_EXE_c10dsim"));
    command
        .args(["sweep", "scenarios/overlap_sweep.toml", "--set", &set])
        .args(["--threads", "2", "-o", csv.to_str().unwrap()])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for variable in [
        "SLURM_ARRAY_TASK_ID",
        "SLURM_ARRAY_TASK_COUNT",
        "JOB_COMPLETION_INDEX",
        "C10DSIM_SHARD_COUNT",
    ] {
        command.env_remove(variable);
    }
    let child = command.spawn().unwrap();
    let started = std::time::Instant::now();
    while std::fs::read_to_string(csv).map_or(true, |text| text.lines().count() < 3) {
        assert!(started.elapsed().as_secs() < 120, "no rows after 2 minutes");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    change();
    let output = child.wait_with_output().unwrap();
    assert_no_panic(&output);
    output
}

#[test]
fn a_sweep_whose_output_is_removed_or_renamed_while_it_runs_fails_and_says_where_the_rows_are() {
    let csv = temp("removed_while_running.csv");
    let output = sweep_changed_while_it_runs(&csv, || std::fs::remove_file(&csv).unwrap());
    let err = stderr(&output);
    assert_eq!(code(&output), Some(2), "{err}");
    assert!(
        err.contains(&format!("{} was deleted", csv.display()))
            && err.contains("are lost")
            && !err.contains("c10dsim: wrote"),
        "{err}"
    );
    assert!(
        !csv.exists(),
        "the sweep made a new file at the removed name"
    );
    // Renamed: the rows are in the file under its new name, header first.
    let csv = temp("renamed_while_running.csv");
    let moved = temp("renamed_while_running_moved.csv");
    let output = sweep_changed_while_it_runs(&csv, || std::fs::rename(&csv, &moved).unwrap());
    let err = stderr(&output);
    assert_eq!(code(&output), Some(2), "{err}");
    assert!(
        err.contains(&format!("{} was renamed", csv.display())) && !err.contains("c10dsim: wrote"),
        "{err}"
    );
    assert!(std::fs::read_to_string(&moved)
        .unwrap()
        .starts_with("point,"));
}

#[test]
fn a_sweep_whose_output_is_cut_short_while_it_runs_fails() {
    let csv = temp("truncated_while_running.csv");
    let output = sweep_changed_while_it_runs(&csv, || {
        std::fs::File::create(&csv).unwrap();
    });
    let err = stderr(&output);
    assert_eq!(code(&output), Some(2), "{err}");
    assert!(
        err.contains(&format!("{} was cut short", csv.display()))
            && !err.contains("c10dsim: wrote"),
        "{err}"
    );
}

#[test]
fn two_outputs_on_one_path_are_refused_before_anything_is_written() {
    // `--trace same.json --timeline same.json` used to write both, the trace lost, exit 0.
    let same = temp("same_output.json");
    let _ = std::fs::remove_file(&same);
    let same = same.to_str().unwrap();
    let output = c10dsim(&[
        "run",
        "scenarios/send_recv.toml",
        "--trace",
        same,
        "--timeline",
        same,
    ]);
    assert_refused(&output, "--trace", "--trace and --timeline on one file");
    assert!(
        stderr(&output).contains("--timeline"),
        "{}",
        stderr(&output)
    );
    assert!(
        !std::path::Path::new(same).exists(),
        "written before the refusal"
    );
    // The same file named two ways: through `..` and a folder of its own.
    let folder = temp("same_output_folder");
    std::fs::create_dir_all(&folder).unwrap();
    let direct = folder.join("x.svg");
    let roundabout = folder.join("../same_output_folder/x.svg");
    let output = c10dsim(&[
        "run",
        "scenarios/send_recv.toml",
        "--trace",
        direct.to_str().unwrap(),
        "--svg",
        roundabout.to_str().unwrap(),
    ]);
    assert_refused(&output, "--svg", "--trace and --svg on one file");
    assert!(stderr(&output).contains("--trace"), "{}", stderr(&output));
    // Two folders likewise: the Flight Recorder's dumps would be read by HTA as ranks' traces.
    let output = c10dsim(&[
        "run",
        "scenarios/hang_10min.toml",
        "--trace-dir",
        folder.to_str().unwrap(),
        "--fr-dir",
        folder.to_str().unwrap(),
    ]);
    assert_refused(
        &output,
        "--fr-dir",
        "--trace-dir and --fr-dir on one folder",
    );
    // bench's CSV and its picture.
    let picture = temp("bench_same.svg");
    let output = c10dsim(&[
        "bench",
        "--scaling",
        "2",
        "-o",
        picture.to_str().unwrap(),
        "--plot",
        picture.to_str().unwrap(),
    ]);
    assert_refused(&output, "--plot", "bench -o and --plot on one file");
    // /dev/null takes any number of outputs.
    let output = c10dsim(&[
        "run",
        "scenarios/send_recv.toml",
        "--trace",
        "/dev/null",
        "--timeline",
        "/dev/null",
    ]);
    assert_eq!(code(&output), Some(0), "{}", stderr(&output));
}

/// Every command that writes its output at the end refuses, before any work, an output whose
/// folder does not exist or that is a folder, naming the flag: `bench --scaling` used to run
/// every point and `calibrate` to fit and print its values, then fail with the system's "No
/// such file or directory".
#[test]
fn an_output_in_a_missing_folder_or_onto_a_folder_is_refused_before_any_work() {
    let missing = temp("no_such_folder/out");
    let _ = std::fs::remove_dir_all(missing.parent().unwrap());
    let missing = missing.to_str().unwrap();
    let folder = temp("an_output_folder");
    std::fs::create_dir_all(&folder).unwrap();
    let folder = folder.to_str().unwrap();
    let written = temp("written_before_the_refusal.csv");
    let _ = std::fs::remove_file(&written);
    let written = written.to_str().unwrap();
    let commands: [&[&str]; 9] = [
        &["bench", "--iterations", "5", "--scaling", "8", "-o"],
        &[
            "bench",
            "--iterations",
            "5",
            "--scaling",
            "8",
            "-o",
            written,
            "--plot",
        ],
        &[
            "bench",
            "--ranks",
            "8",
            "--iterations",
            "5",
            "--repeat",
            "1",
            "-o",
        ],
        &["calibrate", "tests/data/hw/exp_a_api_modes.json", "-o"],
        &[
            "hw-merge",
            "tests/data/hw/x2/exp_a_api_modes.2ranks.json",
            "-o",
        ],
        &["merge", "docs/scaling.csv", "-o"],
        &[
            "plot",
            "docs/scaling.csv",
            "--x",
            "ranks",
            "--y",
            "wall_s",
            "-o",
        ],
        &[
            "import",
            "kineto",
            "tests/data/torch/recorded/traces/ddp_b25/rank0.json",
            "-o",
        ],
        &[
            "import",
            "flight-recorder",
            "tests/data/torch/recorded/fr",
            "-o",
        ],
    ];
    for args in commands {
        let flag = *args.last().unwrap();
        let extension = if flag == "--plot" || args[0] == "plot" {
            ".svg"
        } else {
            ".txt"
        };
        for (output_path, says) in [
            (format!("{missing}{extension}"), "does not exist"),
            (folder.to_string(), "it is a folder; name a file"),
        ] {
            let mut args = args.to_vec();
            args.push(&output_path);
            let output = c10dsim(&args);
            assert_refused(&output, &format!("{flag} {output_path}: "), &args.join(" "));
            assert_refused(&output, says, &args.join(" "));
            let err = stderr(&output);
            assert!(
                !err.contains("simulating") && !err.contains("wrote"),
                "{args:?}: work done before the refusal: {err}"
            );
            assert!(
                output.stdout.is_empty(),
                "{args:?}: printed before the refusal"
            );
            assert!(
                !std::path::Path::new(written).exists(),
                "{args:?}: -o written before --plot was refused"
            );
        }
    }
    // `fidelity -o` likewise (its Markdown file is read, then rewritten).
    let fidelity_output = format!("{missing}.md");
    let output = c10dsim(&["fidelity", "-o", &fidelity_output]);
    assert_refused(
        &output,
        &format!("-o {fidelity_output}: the folder"),
        "fidelity",
    );
}
