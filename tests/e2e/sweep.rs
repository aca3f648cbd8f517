//! `c10dsim sweep`, `merge` and `plot`: the CSV has the documented columns (docs/sweep-format.md)
//! and the figures the model's inputs give; it is the same bytes for 1 and 2 threads, for shards
//! merged, and after an interrupted run resumed; failing points get error rows.
//!
//! About 1,940 lines, over 1,000: the sweep, its shards (by flag and by the schedulers' variables, the
//! shipped `sbatch` and Kubernetes files among them), `merge` and `plot` share one set of
//! helpers that run the binary and read its CSV. The committed pictures are checked here too.

use crate::util::{refused, stderr, stdout};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The variables `c10dsim sweep` takes its shard from when `--shard` is not given.
const SHARD_VARIABLES: [&str; 6] = [
    "SLURM_ARRAY_TASK_ID",
    "SLURM_ARRAY_TASK_MIN",
    "SLURM_ARRAY_TASK_STEP",
    "SLURM_ARRAY_TASK_COUNT",
    "JOB_COMPLETION_INDEX",
    "C10DSIM_SHARD_COUNT",
];

/// Runs the binary with `shard` as its shard variables and none of the caller's, so that a test
/// run inside a Slurm array or an indexed Job sees the whole sweep.
fn c10dsim_with(args: &[&str], shard: &[(&str, &str)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_c10dsim"));
    command.args(args).current_dir(env!("CARGO_MANIFEST_DIR"));
    for variable in SHARD_VARIABLES {
        command.env_remove(variable);
    }
    command.envs(shard.iter().copied());
    command.output().expect("the binary runs")
}

fn c10dsim(args: &[&str]) -> Output {
    c10dsim_with(args, &[])
}

fn temp(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("sweep_{name}"))
}

/// Writes `text` to the temporary file `name` and gives its path.
fn written(name: &str, text: impl AsRef<[u8]>) -> PathBuf {
    let path = temp(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn sweep_to(out: &PathBuf, args: &[&str]) -> Vec<u8> {
    let out_text = out.to_str().unwrap();
    let mut all = vec!["sweep"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["-o", out_text]);
    let output = c10dsim(&all);
    assert!(output.status.success(), "{}", stderr(&output));
    std::fs::read(out).unwrap()
}

/// Rows as column → cell maps; the csv reader rejects ragged rows.
fn rows(bytes: &[u8]) -> (Vec<String>, Vec<HashMap<String, String>>) {
    let mut reader = csv::Reader::from_reader(bytes);
    let header: Vec<String> = reader.headers().unwrap().iter().map(String::from).collect();
    let rows = reader
        .records()
        .map(|record| {
            let record = record.unwrap();
            assert_eq!(record.len(), header.len(), "every row has every column");
            header
                .iter()
                .cloned()
                .zip(record.iter().map(String::from))
                .collect()
        })
        .collect();
    (header, rows)
}

fn number(row: &HashMap<String, String>, column: &str) -> f64 {
    row[column]
        .parse()
        .unwrap_or_else(|_| panic!("{column} = {:?} is not a number", row[column]))
}

fn close(actual: f64, expected: f64, what: &str) {
    assert!(
        (actual - expected).abs() <= 0.01,
        "{what}: {actual} is not within 0.01 of {expected}"
    );
}

/// The inputs of exp_a_sweep.toml (as exp_a_api_modes.toml): collective 70 µs, tail 20 µs,
/// wait 4.15 µs, launch latency 3 µs, mark 2 µs, sync 5 µs, 2.5 blocking-wait poll 10 ms.
const CALL_US: f64 = 70.0;
const TAIL_US: f64 = 20.0;
const WAIT_US: f64 = 4.15;
const POLL_US: f64 = 10_000.0;

#[test]
fn exp_a_sweep_has_the_documented_columns_and_the_model_figures() {
    let (header, rows) = rows(&sweep_to(
        &temp("exp_a.csv"),
        &["scenarios/exp_a_sweep.toml", "--threads", "2"],
    ));
    let collective = ["host_call_us", "wait_us", "stream_interval_us", "kernel_us"]
        .iter()
        .chain(&["completed_at_wait_share"])
        .map(|suffix| format!("ar.{suffix}"));
    let expected: Vec<String> = ["point", "tensors.x", "tensors.x_bytes", "mode", "blocking"]
        .iter()
        .map(ToString::to_string)
        .chain(collective)
        .chain(
            [
                "mode_host.median_us",
                "memory.peak_reserved_bytes",
                "memory.peak_allocated_bytes",
                "memory.cache_releases",
                "findings",
                "findings.deadlock",
                "findings.time_cap",
                "findings.wait_timeout",
                "findings.watchdog_timeout",
                "findings.async_error",
                "findings.heartbeat_abort",
                "findings.store_timeout",
                "findings.mismatch",
                "findings.race",
                "findings.out_of_memory",
                "findings.memory_cap",
                "findings.exit_failure",
                "findings.program_error",
                "error",
                "seed",
                "scenario_hash",
                "sweep_points",
                "c10dsim_version",
            ]
            .iter()
            .map(ToString::to_string),
        )
        .collect();
    assert_eq!(header, expected);
    assert_eq!(rows.len(), 4 * 3 * 2, "size x mode x blocking");
    let sizes = [
        ("1KiB", 1024.0),
        ("1MiB", 1048576.0),
        ("64MiB", 67108864.0),
        ("256MiB", 268435456.0),
    ];
    for (i, row) in rows.iter().enumerate() {
        assert_eq!(row["point"], i.to_string());
        assert_eq!(row["error"], "", "point {i}");
        let bytes = sizes
            .iter()
            .find(|(s, _)| *s == row["tensors.x"])
            .unwrap()
            .1;
        assert_eq!(number(row, "tensors.x_bytes"), bytes, "the label's bytes");
        // R24, 4 ranks: 6·2.5 µs + 1.5·S / 113.3 GB/s.
        let kernel_us = 15.0 + 1.5 * bytes / 113.3e9 * 1e6;
        close(number(row, "ar.kernel_us"), kernel_us, "kernel");
        // The kernel ends 3 + kernel µs after the input-ready point; a wait() issued with the
        // call returns 20 + 4.15 µs after it. Done by then only at 1 KiB (18.0 < 24.15).
        let done_us = 3.0 + kernel_us;
        let done_at_wait = done_us <= TAIL_US + WAIT_US;
        // R15 (2.5): a blocking wait polls every 10 ms until the kernel is done.
        let blocking = row["blocking"] == "1";
        let polls_us = if blocking && !done_at_wait {
            POLL_US
        } else {
            0.0
        };
        let host = number(row, "mode_host.median_us");
        match row["mode"].as_str() {
            "sync" => {
                // 2.5: the call includes the wrapper's wait() (R11): 70 + 4.15 µs, + polls.
                close(
                    number(row, "ar.host_call_us"),
                    CALL_US + WAIT_US + polls_us,
                    "sync call",
                );
                close(host, 2.0 + CALL_US + WAIT_US + polls_us, "sync host");
            }
            "async_wait" => {
                close(number(row, "ar.host_call_us"), CALL_US, "async call");
                close(number(row, "ar.wait_us"), WAIT_US + polls_us, "wait()");
                close(host, 2.0 + CALL_US + WAIT_US + polls_us, "async+wait host");
            }
            "async_devsync" => {
                assert_eq!(row["ar.wait_us"], "", "no wait() on this Work");
                assert_eq!(row["ar.completed_at_wait_share"], "");
                // The host waits until the kernel ends (launched 50 µs into the call), or for
                // the call's return if later, then 5 µs: R14.
                let expected = 2.0 + (CALL_US - TAIL_US + done_us).max(CALL_US) + 5.0;
                close(host, expected, "device sync host");
                continue;
            }
            other => panic!("unknown mode {other}"),
        }
        // R13: complete right after wait() only if done before it returned; a blocking wait
        // returns only once complete.
        let completed = if done_at_wait || blocking { 1.0 } else { 0.0 };
        close(
            number(row, "ar.completed_at_wait_share"),
            completed,
            "completed_at_wait_share",
        );
        // The stream is released at the later of the kernel's end and the wait's enqueue;
        // work issued after wait() can run from its return on, after the polls (R3).
        close(
            number(row, "ar.stream_interval_us"),
            done_us.max(TAIL_US + WAIT_US + polls_us),
            "stream interval",
        );
    }
}

/// The first rows docs/sweep-format.md shows of `scenarios/exp_a_sweep.toml`'s CSV are the rows
/// the sweep writes, header included, every cell but the version's.
#[test]
fn the_documented_csv_example_is_what_the_sweep_writes() {
    let written = sweep_to(
        &temp("exp_a_documented.csv"),
        &["scenarios/exp_a_sweep.toml", "--threads", "1"],
    );
    let written = String::from_utf8(written).unwrap();
    let doc = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("docs/sweep-format.md"),
    )
    .unwrap();
    let example = doc
        .split("```csv\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("docs/sweep-format.md has a ```csv example");
    let without_version = |line: &str| line.rsplit_once(',').unwrap().0.to_string();
    let example: Vec<String> = example.lines().map(without_version).collect();
    let first: Vec<String> = written
        .lines()
        .take(example.len())
        .map(without_version)
        .collect();
    assert_eq!(example, first, "docs/sweep-format.md's example rows");
}

/// A point's findings are counted and its `error` names the first as `run`'s report lists them
/// (the two lines of "findings: 8 (2 lines: …)", `[Ranks 0-2,4-7 (7 ranks)] Watchdog caught
/// …`), whether its ranks fold into classes or, under drawn kernel jitter, are each simulated on
/// their own; `--detail ranks` counts one per rank. Until 2026-12-07 the jittered point of
/// `hang_10min` at 8 ranks counted 8 findings and the folded one 2, and both named only
/// `[Rank 0]`.
#[test]
fn findings_are_counted_as_the_report_lists_them_folded_or_not() {
    let args = [
        "scenarios/hang_10min.toml",
        "--set",
        "cluster.ranks=8",
        "--set",
        "cluster.kernel_jitter_pct=0,1",
    ];
    let (_, listed) = rows(&sweep_to(&temp("findings_listed.csv"), &args));
    let report = stdout(&c10dsim(&[
        "run",
        "scenarios/hang_10min.toml",
        "--set",
        "cluster.ranks=8",
        "--set",
        "cluster.kernel_jitter_pct=1",
    ]));
    // The report's header counts the 8 findings `--json` lists (one per rank's class), and
    // the 2 lines they make, which the sweep counts.
    assert!(
        report.contains("findings: 8 (2 lines: alike findings of several ranks are one line)\n"),
        "{report}"
    );
    for row in &listed {
        let point = &row["point"];
        assert_eq!(row["findings"], "2", "point {point}");
        assert_eq!(row["findings.watchdog_timeout"], "1", "point {point}");
        assert_eq!(row["findings.heartbeat_abort"], "1", "point {point}");
        assert!(
            row["error"].starts_with(
                "watchdog_timeout: [Ranks 0-2,4-7 (7 ranks)] Watchdog caught collective operation timeout"
            ) && row["error"].ends_with(" (and 1 more finding)"),
            "point {point}: {}",
            row["error"]
        );
    }
    let mut per_rank_args = args.to_vec();
    per_rank_args.extend(["--detail", "ranks"]);
    let (_, per_rank) = rows(&sweep_to(&temp("findings_per_rank.csv"), &per_rank_args));
    for row in &per_rank {
        assert_eq!(row["findings"], "8", "point {}", row["point"]);
        assert_eq!(
            row["findings.watchdog_timeout"], "7",
            "point {}",
            row["point"]
        );
    }
}

#[test]
fn overlap_sweep_shows_each_killer() {
    let (_, rows) = rows(&sweep_to(
        &temp("overlap_figures.csv"),
        &["scenarios/overlap_sweep.toml"],
    ));
    assert_eq!(
        rows.len(),
        5 * 5 * 4,
        "killer x all_reduce size x GEMM size"
    );
    let gemm_us = 2.0 * 8192f64.powi(3) / (989e12 * 0.7) * 1e6; // 1588.2
    let sm_share = 16.0 / 132.0;
    for row in rows.iter().filter(|r| r["gemm"] == "8192") {
        assert_eq!(row["error"], "");
        let ar_us = number(row, "ar_us.median_us");
        let mib: f64 = row["tensors.buf"].trim_end_matches("MiB").parse().unwrap();
        // R24, 8 ranks: 14·5 µs + 1.75·S / 450 GB/s.
        close(
            ar_us,
            70.0 + 1.75 * mib * 1048576.0 / 450e9 * 1e6,
            "ar alone",
        );
        close(number(row, "gemm_us.median_us"), gemm_us, "gemm alone");
        let overlap = number(row, "killed.overlap");
        // The arithmetic of overlap_bench (catalogue.rs), for all_reduces shorter than the GEMM.
        let expected = match row["killer"].as_str() {
            _ if ar_us > gemm_us => continue,
            "none" => 1.0 - sm_share,
            "item" => (ar_us - 23.0) * (1.0 - sm_share) / ar_us,
            "early_wait" | "async_false" => 0.0,
            "sync" => -13.0 / ar_us,
            other => panic!("unknown killer {other}"),
        };
        close(overlap, expected, &format!("{} {}", row["killer"], mib));
    }
}

#[test]
fn one_and_two_threads_and_standard_output_write_the_same_bytes() {
    let one = sweep_to(
        &temp("threads1.csv"),
        &["scenarios/overlap_sweep.toml", "--threads", "1"],
    );
    let two = sweep_to(
        &temp("threads2.csv"),
        &["scenarios/overlap_sweep.toml", "--threads", "2"],
    );
    assert_eq!(rows(&one).1.len(), 100);
    assert!(one == two, "1 and 2 threads differ");
    // `-o -`: the same CSV on stdout, the notes on stderr.
    let piped = c10dsim(&["sweep", "scenarios/overlap_sweep.toml", "-o", "-"]);
    assert!(piped.status.success(), "{}", stderr(&piped));
    assert!(piped.stdout == one, "-o - differs from the file");
    assert!(
        stderr(&piped).contains("c10dsim: wrote standard output (100 points run"),
        "{}",
        stderr(&piped)
    );
    let resume = c10dsim(&[
        "sweep",
        "scenarios/overlap_sweep.toml",
        "--resume",
        "-o",
        "-",
    ]);
    assert_eq!(resume.status.code(), Some(2), "{}", stderr(&resume));
    assert!(resume.stdout.is_empty());
    assert!(
        stderr(&resume).contains("--resume keeps the rows already in OUT.csv"),
        "{}",
        stderr(&resume)
    );
}

#[test]
fn a_reader_that_goes_away_ends_the_sweep_without_running_the_rest() {
    use std::io::BufRead;
    // 10,000 points of about 30 ms each on one thread: minutes, were they all run.
    let sizes: Vec<String> = (1..=500).map(|mib| format!("{mib}MiB")).collect();
    let mut child = Command::new(env!("CARGO_BIN_EXE_c10dsim"))
        .args(["sweep", "scenarios/overlap_sweep.toml", "--threads", "1"])
        .args(["--set", "repeat=400", "--set"])
        .arg(format!("tensors.buf={}", sizes.join(",")))
        .args(["-o", "-"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env_remove("SLURM_ARRAY_TASK_ID")
        .env_remove("JOB_COMPLETION_INDEX")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("the binary runs");
    let mut reader = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    for _ in 0..2 {
        line.clear();
        reader.read_line(&mut line).unwrap();
    }
    assert!(line.starts_with("0,none,1MiB,"), "{line}");
    // `| head -2`: the reader goes away after the header and the first row.
    drop(reader);
    let start = std::time::Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > std::time::Duration::from_secs(60) {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("the sweep went on running its points after its reader went away");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert!(status.success(), "a reader that went away ends it quietly");
}

#[test]
fn shards_merged_equal_the_unsharded_run() {
    let args = ["scenarios/exp_a_sweep.toml", "--set", "cluster.ranks=4,8"];
    let whole = sweep_to(&temp("whole.csv"), &args);
    let mut parts = Vec::new();
    for index in 0..2 {
        let path = temp(&format!("shard{index}.csv"));
        let shard = format!("{index}/3");
        let mut with_shard = args.to_vec();
        with_shard.extend_from_slice(&["--shard", &shard]);
        sweep_to(&path, &with_shard);
        parts.push(path);
    }
    // The third slice as a Slurm array task (--array=1-3: task 3 of 3 is shard 2/3).
    let slurm = temp("shard2.csv");
    let output = c10dsim_with(
        &[
            "sweep",
            args[0],
            args[1],
            args[2],
            "-o",
            slurm.to_str().unwrap(),
        ],
        &[
            ("SLURM_ARRAY_TASK_ID", "3"),
            ("SLURM_ARRAY_TASK_MIN", "1"),
            ("SLURM_ARRAY_TASK_COUNT", "3"),
        ],
    );
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(stderr(&output).contains("shard 2/3 (SLURM_ARRAY_TASK_ID)"));
    // The sweep as a Slurm task with `variables`, refused (exit 2) with `message`.
    let refused_as_task = |variables: &[(&str, &str)], message: &str| {
        let output = c10dsim_with(&["sweep", args[0], args[1], args[2], "-o", "-"], variables);
        refused(&output, message);
    };
    // A task id below the array's first is no task of it (it used to run shard 0).
    refused_as_task(
        &[
            ("SLURM_ARRAY_TASK_ID", "0"),
            ("SLURM_ARRAY_TASK_MIN", "1"),
            ("SLURM_ARRAY_TASK_COUNT", "3"),
        ],
        "SLURM_ARRAY_TASK_ID=0 is below SLURM_ARRAY_TASK_MIN=1",
    );
    // A stepped array (--array=0-8:4: tasks 0, 4 and 8) numbers its shards by the step.
    let stepped = c10dsim_with(
        &["sweep", args[0], args[1], args[2], "-o", "-"],
        &[
            ("SLURM_ARRAY_TASK_ID", "8"),
            ("SLURM_ARRAY_TASK_MIN", "0"),
            ("SLURM_ARRAY_TASK_STEP", "4"),
            ("SLURM_ARRAY_TASK_COUNT", "3"),
        ],
    );
    assert!(stepped.status.success(), "{}", stderr(&stepped));
    assert!(stderr(&stepped).contains("shard 2/3 (SLURM_ARRAY_TASK_ID)"));
    assert_eq!(
        stepped.stdout,
        std::fs::read(&slurm).unwrap(),
        "the stepped array's last task is the third slice"
    );
    refused_as_task(
        &[
            ("SLURM_ARRAY_TASK_ID", "5"),
            ("SLURM_ARRAY_TASK_STEP", "4"),
            ("SLURM_ARRAY_TASK_COUNT", "3"),
        ],
        "plus a multiple of SLURM_ARRAY_TASK_STEP=4",
    );
    // A task id without the array's count would have run the whole sweep in every task.
    refused_as_task(
        &[("SLURM_ARRAY_TASK_ID", "1")],
        "SLURM_ARRAY_TASK_ID is set but SLURM_ARRAY_TASK_COUNT is not",
    );
    // A count of 0 is refused as such (it read `shard index 0 is not below the shard count 0`).
    refused_as_task(
        &[("JOB_COMPLETION_INDEX", "0"), ("C10DSIM_SHARD_COUNT", "0")],
        "C10DSIM_SHARD_COUNT=0: a sweep has at least 1 shard",
    );
    refused_as_task(
        &[
            ("SLURM_ARRAY_TASK_ID", "0"),
            ("SLURM_ARRAY_TASK_COUNT", "0"),
        ],
        "SLURM_ARRAY_TASK_COUNT=0: a sweep has at least 1 shard",
    );
    parts.push(slurm);
    let sliced: Vec<usize> = parts
        .iter()
        .map(|p| rows(&std::fs::read(p).unwrap()).1.len())
        .collect();
    assert_eq!(sliced, [16, 16, 16], "48 points in 3 slices");
    let merged = temp("merged.csv");
    let mut merge = vec!["merge"];
    // In any order.
    merge.extend(parts.iter().rev().map(|p| p.to_str().unwrap()));
    merge.extend_from_slice(&["-o", merged.to_str().unwrap()]);
    let output = c10dsim(&merge);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        std::fs::read(&merged).unwrap() == whole,
        "merged != unsharded"
    );
    assert!(!stderr(&output).contains("warning"), "{}", stderr(&output));
    // Through a symbolic link: the file it names is replaced, the link stays (it used to be
    // replaced by a regular file, as /dev/full was).
    let target = temp("merged_target.csv");
    let link = temp("merged_link.csv");
    let _ = std::fs::remove_file(&link);
    std::fs::write(&target, "old").unwrap();
    std::os::unix::fs::symlink(&target, &link).unwrap();
    merge.truncate(merge.len() - 1);
    merge.push(link.to_str().unwrap());
    let output = c10dsim(&merge);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    assert!(
        std::fs::read(&target).unwrap() == whole,
        "the link's target holds the merge"
    );
    // Two of the three slices: merged, with the points no row holds named.
    let output = c10dsim(&[
        "merge",
        parts[0].to_str().unwrap(),
        parts[2].to_str().unwrap(),
        "-o",
        merged.to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("warning: 16 of the points 0-47 have no row (points 1, 4, 7, 10, 13, 16, 19, 22, … (16 ranges))"),
        "{}",
        stderr(&output)
    );
    // The last slice missing: its points above the highest one given are named too (every
    // row says how many points the sweep has).
    let output = c10dsim(&[
        "merge",
        parts[0].to_str().unwrap(),
        parts[1].to_str().unwrap(),
        "-o",
        merged.to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("warning: 16 of the points 0-47 have no row (points 2, 5, 8, 11, 14, 17, 20, 23, … (16 ranges))"),
        "{}",
        stderr(&output)
    );
    // The whole sweep but its last row: one point, said in the singular.
    let text = String::from_utf8(whole.clone()).unwrap();
    let cut = temp("whole_but_last.csv");
    std::fs::write(&cut, &text[..=text.trim_end().rfind('\n').unwrap()]).unwrap();
    let output = c10dsim(&[
        "merge",
        cut.to_str().unwrap(),
        "-o",
        merged.to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("merged 47 points from 1 file into"),
        "{}",
        stderr(&output)
    );
    assert!(
        stderr(&output).contains("warning: 1 of the points 0-47 has no row (point 47)"),
        "{}",
        stderr(&output)
    );
    // A slice of another sweep (other --set values, same columns) is refused.
    let other = temp("shard_other.csv");
    sweep_to(
        &other,
        &[
            "scenarios/exp_a_sweep.toml",
            "--set",
            "cluster.ranks=2,4",
            "--shard",
            "1/3",
        ],
    );
    let output = c10dsim(&[
        "merge",
        parts[0].to_str().unwrap(),
        other.to_str().unwrap(),
        "-o",
        merged.to_str().unwrap(),
    ]);
    refused(&output, "the files hold rows of two sweeps");
}

#[test]
fn a_shard_count_alone_is_refused_and_disagreeing_schedulers_are_noted() {
    let sweep = ["sweep", "scenarios/exp_a_sweep.toml", "-o", "-"];
    // A count without its index would run the whole sweep in every task (it did).
    refused(
        &c10dsim_with(&sweep, &[("C10DSIM_SHARD_COUNT", "8")]),
        "C10DSIM_SHARD_COUNT is set but JOB_COMPLETION_INDEX is not",
    );
    refused(
        &c10dsim_with(&sweep, &[("SLURM_ARRAY_TASK_COUNT", "2")]),
        "SLURM_ARRAY_TASK_COUNT is set but SLURM_ARRAY_TASK_ID is not",
    );
    // Slurm's variables are read first; the Kubernetes ones, disagreeing, are named as ignored.
    let slurm = [
        ("SLURM_ARRAY_TASK_ID", "0"),
        ("SLURM_ARRAY_TASK_COUNT", "2"),
    ];
    let both = c10dsim_with(
        &sweep,
        &[
            slurm[0],
            slurm[1],
            ("JOB_COMPLETION_INDEX", "1"),
            ("C10DSIM_SHARD_COUNT", "8"),
        ],
    );
    assert!(both.status.success(), "{}", stderr(&both));
    assert!(
        stderr(&both).contains(
            "c10dsim: note: using shard 0/2 (SLURM_ARRAY_TASK_ID=0, SLURM_ARRAY_TASK_COUNT=2); \
             ignoring shard 1/8 (JOB_COMPLETION_INDEX=1, C10DSIM_SHARD_COUNT=8), which disagrees"
        ) && stderr(&both).contains("shard 0/2 (SLURM_ARRAY_TASK_ID) has 12"),
        "{}",
        stderr(&both)
    );
    assert_eq!(both.stdout, c10dsim_with(&sweep, &slurm).stdout);
    // A count alone beside a whole pair: that pair is used, the count named as ignored.
    let half = c10dsim_with(&sweep, &[slurm[0], slurm[1], ("C10DSIM_SHARD_COUNT", "8")]);
    assert!(half.status.success(), "{}", stderr(&half));
    assert!(
        stderr(&half).contains("ignoring C10DSIM_SHARD_COUNT=8, set without JOB_COMPLETION_INDEX"),
        "{}",
        stderr(&half)
    );
    // Agreeing, they need no note.
    let agree = c10dsim_with(
        &sweep,
        &[
            slurm[0],
            slurm[1],
            ("JOB_COMPLETION_INDEX", "0"),
            ("C10DSIM_SHARD_COUNT", "2"),
        ],
    );
    assert!(agree.status.success(), "{}", stderr(&agree));
    assert!(!stderr(&agree).contains("note"), "{}", stderr(&agree));
}

#[test]
fn resume_finishes_an_interrupted_sweep_with_the_same_bytes() {
    let whole = sweep_to(&temp("resume_whole.csv"), &["scenarios/exp_a_sweep.toml"]);
    // Interrupted after 10 rows, in the middle of the 11th.
    let text = String::from_utf8(whole.clone()).unwrap();
    let cut: usize = text.match_indices('\n').nth(10).unwrap().0 + 1 + 7;
    let partial = temp("resume_partial.csv");
    std::fs::write(&partial, &text[..cut]).unwrap();
    resumes_to_whole("scenarios/exp_a_sweep.toml", &partial, &whole, 10);
    // Rows that are not a prefix (here: the first ten points missing) end up in point order.
    let lines: Vec<&str> = text.lines().collect();
    let gappy = format!("{}\n{}\n", lines[0], lines[11..].join("\n"));
    std::fs::write(&partial, gappy).unwrap();
    let output = c10dsim(&[
        "sweep",
        "scenarios/exp_a_sweep.toml",
        "--resume",
        "-o",
        partial.to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        std::fs::read(&partial).unwrap() == whole,
        "gap filled != whole"
    );
    // Another sweep's file is refused rather than mixed.
    let output = c10dsim(&[
        "sweep",
        "scenarios/overlap_sweep.toml",
        "--resume",
        "-o",
        partial.to_str().unwrap(),
    ]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("other columns"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn a_csv_that_lost_its_header_is_named_as_such_and_resume_says_what_to_do() {
    // What a file emptied while a sweep appends to it holds: rows, from a later point on.
    let whole = sweep_to(&temp("headless_whole.csv"), &["scenarios/exp_a_sweep.toml"]);
    let text = String::from_utf8(whole).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let headless = written("headless.csv", format!("{}\n", lines[5..].join("\n")));
    let headless = headless.to_str().unwrap();
    let resume = c10dsim(&[
        "sweep",
        "scenarios/exp_a_sweep.toml",
        "--resume",
        "-o",
        headless,
    ]);
    refused(
        &resume,
        &format!(
            "--resume: {headless}:1 is the row of point 4, not the header: the file lost its \
             header"
        ),
    );
    assert!(
        stderr(&resume).contains("delete it (or move it aside) and run the sweep again"),
        "{}",
        stderr(&resume)
    );
    let merged = temp("headless_merged.csv");
    for args in [
        vec!["merge", headless, "-o", merged.to_str().unwrap()],
        vec![
            "plot",
            headless,
            "--x",
            "point",
            "--y",
            "ar.wait_us",
            "-o",
            "-",
        ],
    ] {
        refused(
            &c10dsim(&args),
            &format!("{headless}:1: error: not a c10dsim sweep CSV: line 1 is the row of point 4"),
        );
    }
}

#[test]
fn a_column_quotes_a_name_that_is_no_bare_key_and_resume_reads_it_back() {
    // A tensor named "a,b" or "a b" used to give the columns `tensors.a,b` and `tensors.a b`:
    // TOML's bare keys are A-Za-z0-9_- alone, so both are quoted, as `tensors."a.b"` is.
    let scenario = written(
        "quoted_columns.toml",
        "name = \"quoted_columns\"\nrepeat = 3\nwarmup = 1\n[cluster]\nranks = 2\n\
         [tensors]\n\"a,b\" = \"1MiB\"\n\"a b\" = \"1MiB\"\n\
         [[op]]\nall_reduce = \"a,b\"\n[[op]]\nall_reduce = \"a b\"\n\
         [sweep]\ntensors.\"a,b\" = [\"1MiB\", \"2MiB\"]\ntensors.\"a b\" = [\"1MiB\", \"2MiB\"]\n",
    );
    let scenario = scenario.to_str().unwrap();
    let whole = sweep_to(&temp("quoted_columns.csv"), &[scenario]);
    let (header, table) = rows(&whole);
    assert_eq!(
        header[1..5],
        [
            "tensors.\"a,b\"",
            "tensors.\"a,b\"_bytes",
            "tensors.\"a b\"",
            "tensors.\"a b\"_bytes"
        ]
    );
    assert_eq!(table[3]["tensors.\"a b\"_bytes"], "2097152");
    // `--resume` reads the columns it wrote back as its own.
    let text = String::from_utf8(whole.clone()).unwrap();
    let cut = text.match_indices('\n').nth(2).unwrap().0 + 1;
    let partial = written("quoted_columns_partial.csv", &text[..cut]);
    resumes_to_whole(scenario, &partial, &whole, 2);
}

/// `sweep SCENARIO --resume -o PARTIAL` keeps the `already` rows in `partial`, runs the rest
/// and leaves the bytes of the whole sweep (`whole`).
fn resumes_to_whole(scenario: &str, partial: &std::path::Path, whole: &[u8], already: usize) {
    let output = c10dsim(&[
        "sweep",
        scenario,
        "--resume",
        "-o",
        partial.to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        stderr(&output).contains(&format!("{already} already in")),
        "{}",
        stderr(&output)
    );
    assert!(std::fs::read(partial).unwrap() == whole, "resumed != whole");
}

/// A file with CRLF line ends (an editor's) is resumed with CRLF rows, not LF ones; a file of
/// another shard's rows is refused rather than mixed with this shard's.
#[test]
fn resume_keeps_the_files_line_end_and_refuses_another_shards_rows() {
    let whole = sweep_to(
        &temp("resume_crlf_whole.csv"),
        &["scenarios/exp_a_sweep.toml"],
    );
    let text = String::from_utf8(whole).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let partial = temp("resume_crlf.csv");
    std::fs::write(&partial, format!("{}\r\n", lines[..11].join("\r\n"))).unwrap();
    let whole_crlf = text.replace('\n', "\r\n");
    resumes_to_whole(
        "scenarios/exp_a_sweep.toml",
        &partial,
        whole_crlf.as_bytes(),
        10,
    );
    let other_shard = temp("resume_shard1.csv");
    sweep_to(
        &other_shard,
        &["scenarios/exp_a_sweep.toml", "--shard", "1/3"],
    );
    let before = std::fs::read(&other_shard).unwrap();
    let output = c10dsim(&[
        "sweep",
        "scenarios/exp_a_sweep.toml",
        "--shard",
        "0/3",
        "--resume",
        "-o",
        other_shard.to_str().unwrap(),
    ]);
    refused(
        &output,
        "holds point 1, which is not one of shard 0/3's (points 0, 3, 6, …)",
    );
    assert!(
        std::fs::read(&other_shard).unwrap() == before,
        "the file is left as it was"
    );
}

#[test]
fn resume_refuses_the_rows_of_other_set_values() {
    // The same file and columns, other values on the command line: its rows are another
    // sweep's, so they are refused rather than joined.
    let partial = temp("resume_other_sets.csv");
    let first = sweep_to(&partial, &["scenarios/exp_a_sweep.toml", "--set", "seed=3"]);
    let text = String::from_utf8(first).unwrap();
    let head: Vec<&str> = text.lines().take(4).collect();
    std::fs::write(&partial, format!("{}\n", head.join("\n"))).unwrap();
    for other in ["seed=5", "tensors.x=2KiB,2MiB,32MiB,128MiB"] {
        let output = c10dsim(&[
            "sweep",
            "scenarios/exp_a_sweep.toml",
            "--set",
            other,
            "--resume",
            "-o",
            partial.to_str().unwrap(),
        ]);
        assert_eq!(
            output.status.code(),
            Some(2),
            "{other}: {}",
            stderr(&output)
        );
        assert!(
            stderr(&output).contains("holds rows of another sweep"),
            "{other}: {}",
            stderr(&output)
        );
    }
    // The same --set resumes.
    let output = c10dsim(&[
        "sweep",
        "scenarios/exp_a_sweep.toml",
        "--set",
        "seed=3",
        "--resume",
        "-o",
        partial.to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(std::fs::read_to_string(&partial).unwrap(), text);
}

#[test]
fn failing_points_get_error_rows_and_the_sweep_goes_on() {
    let scenario = written(
        "failing.toml",
        "[cluster]\nranks = 2\n[tensors]\nx = \"1MiB\"\n[[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\n\
         [sweep]\n\"tensors.x\" = [\"1KiB\", \"oops\"]\n\"op.ar.ranks\" = [[0], [0, 1]]\n",
    );
    let (_, rows) = rows(&sweep_to(
        &temp("failing.csv"),
        &[scenario.to_str().unwrap()],
    ));
    assert_eq!(rows.len(), 4);
    // An invalid value: the point's error names the file, the point and the position.
    for row in &rows[2..] {
        let error = &row["error"];
        assert!(
            error.contains("failing.toml [point") && error.contains("tensors.x=\"oops\""),
            "{error}"
        );
        // The position is that of the value set, in the edited text: `x = "oops"` on line 4.
        assert!(error.contains("]:4:5: error: expected a size"), "{error}");
        assert_eq!(row["findings"], "");
    }
    // Only rank 0 joins the all_reduce: rank 1 never does (R16), a deadlock finding.
    assert_eq!(rows[0]["op.ar.ranks"], "[0]");
    assert!(
        rows[0]["error"].starts_with("deadlock: "),
        "{}",
        rows[0]["error"]
    );
    assert_ne!(rows[0]["findings.deadlock"], "0");
    assert_eq!(rows[1]["error"], "");
    assert_eq!(rows[1]["findings"], "0");
}

#[test]
fn a_zipped_axis_named_like_a_column_is_refused_before_the_file_is_written() {
    let base = "repeat = 2\n[cluster]\nranks = 2\n[tensors]\nx = \"1MiB\"\n\
                [[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\n";
    // Every column c10dsim writes alike, the trailing ones (`seed`, `error`) too, at the name's
    // line and column: the name is the user's, not a scenario key (a `seed` path axis is
    // `scenario.seed`, below).
    for (name, zip) in [
        ("point", "point"),
        ("metric", "\"ar.kernel_us\""),
        ("bytes", "\"tensors.x_bytes\""),
        ("seed", "seed"),
        ("error", "error"),
        ("findings", "findings"),
        ("sweep_points", "sweep_points"),
        ("memory", "\"memory.peak_reserved_bytes\""),
    ] {
        let path = temp(&format!("zip_{name}.toml"));
        let sweep = format!(
            "[sweep]\n\"tensors.x\" = [\"1MiB\", \"2MiB\"]\n\
             [sweep.zip.{zip}]\nvalues = [\"a\", \"b\"]\nrepeat = [2, 3]\n"
        );
        std::fs::write(&path, format!("{base}{sweep}")).unwrap();
        let out = temp(&format!("zip_{name}.csv"));
        let _ = std::fs::remove_file(&out);
        let output = c10dsim(&["sweep", path.to_str().unwrap(), "-o", out.to_str().unwrap()]);
        assert_eq!(output.status.code(), Some(2), "{name}: {}", stderr(&output));
        let column = zip.trim_matches('"');
        let at = format!(
            "{}:11:12: error: zipped axis {column:?} is named like another column of the CSV",
            path.display()
        );
        assert!(stderr(&output).contains(&at), "{}", stderr(&output));
        assert!(!out.exists(), "{name}: no CSV of two same-named columns");
    }
}

#[test]
fn a_zipped_axis_named_like_a_renamed_path_axis_is_refused_at_its_name() {
    // A `seed` path axis is written `scenario.seed`: a zipped axis of that name is refused at
    // its name, as one named like any other column.
    let path = written(
        "zip_scenario_seed.toml",
        "[cluster]\nranks = 2\n[tensors]\nx = \"1MiB\"\n[[op]]\nall_reduce = \"x\"\n\
         [sweep]\nseed = [1, 2]\n[sweep.zip.\"scenario.seed\"]\nvalues = [\"a\", \"b\"]\n\
         \"cluster.ranks\" = [2, 4]\n",
    );
    let out = temp("zip_scenario_seed.csv");
    let _ = std::fs::remove_file(&out);
    let output = c10dsim(&["sweep", path.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    let at = format!(
        "{}:9:12: error: zipped axis \"scenario.seed\" is named like another column of the CSV",
        path.display()
    );
    assert!(stderr(&output).contains(&at), "{}", stderr(&output));
    assert!(!out.exists());
    // A path axis named like a size axis's `_bytes` twin: no zipped axis to rename; refused at
    // the axis's key.
    let path = written(
        "bytes_twin_axis.toml",
        "[cluster]\nranks = 2\n[tensors]\nx = \"1MiB\"\nx_bytes = \"1MiB\"\n[[op]]\n\
         all_reduce = \"x\"\n[sweep]\n\"tensors.x\" = [\"1MiB\", \"2MiB\"]\n\
         \"tensors.x_bytes\" = [\"1MiB\", \"2MiB\"]\n",
    );
    let output = c10dsim(&["sweep", path.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    let at = format!(
        "{}:10:1: error: the CSV would have two columns named \"tensors.x_bytes\"",
        path.display()
    );
    assert!(
        stderr(&output).contains(&at) && !stderr(&output).contains("zipped"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn a_zipped_axis_named_like_a_scenario_path_is_refused_with_or_without_a_set() {
    // `--set tensors.x=…` used to relabel the zipped axis "tensors.x": the CSV's column showed
    // 1KiB and 2KiB for points that all ran the file's 1MiB.
    let path = written(
        "zip_scenario_path.toml",
        "repeat = 2\n[cluster]\nranks = 2\n[tensors]\nx = \"1MiB\"\n[[op]]\nlabel = \"ar\"\n\
         all_reduce = \"x\"\n[sweep.zip.\"tensors.x\"]\nvalues = [\"a\", \"b\"]\nrepeat = [2, 3]\n",
    );
    let out = temp("zip_scenario_path.csv");
    for set in [&["--set", "tensors.x=1KiB,2KiB"][..], &[]] {
        let _ = std::fs::remove_file(&out);
        let mut args = vec!["sweep", path.to_str().unwrap(), "-o", out.to_str().unwrap()];
        args.extend(set);
        let output = c10dsim(&args);
        assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
        let at = format!(
            "{}:9:12: error: zipped axis \"tensors.x\" is named like a scenario path",
            path.display()
        );
        assert!(stderr(&output).contains(&at), "{}", stderr(&output));
        assert!(!out.exists());
    }
}

#[test]
fn a_sweep_on_a_machine_profile_names_the_files_lines_and_runs_its_base_point() {
    // The profile fills in [cluster] and adds [network] and [host]: the errors still name the
    // file's own lines, and `run` and `check` read the file's [sweep] on the profile's values.
    let profile = Path::new(env!("CARGO_MANIFEST_DIR")).join("profiles/h200.toml");
    for machine in ["h200".to_string(), profile.display().to_string()] {
        let head = format!(
            "machine = {machine:?}\n[cluster]\nranks = 2\n[tensors]\nx = \"1MiB\"\n[[op]]\n\
             label = \"ar\"\nall_reduce = \"x\"\n[sweep]\nrepeat = [1, 2]\n"
        );
        let path = temp("on_machine.toml");
        std::fs::write(&path, &head).unwrap();
        let file = path.to_str().unwrap();
        for command in ["run", "check"] {
            let output = c10dsim(&[command, file]);
            assert!(output.status.success(), "{command}: {}", stderr(&output));
        }
        let out = temp("on_machine.csv");
        let (_, rows) = rows(&sweep_to(&out, &[file]));
        assert_eq!(rows.len(), 2);
        for (tail, at, commands) in [
            ("\"tensors.x\" = \"1KiB\"\n", "11:15", &["sweep", "check"][..]),
            ("\"cluster.sms\" = [\"a\", \"b\"]\n", "11:1", &["sweep", "check"]),
            (
                "[sweep.zip.seed]\nvalues = [\"a\", \"b\"]\n\"cluster.ranks\" = [2, 4]\n",
                "11:12",
                &["sweep"],
            ),
            (
                "[sweep.zip.\"ar.kernel_us\"]\nvalues = [\"a\", \"b\"]\n\"cluster.ranks\" = [2, 4]\n",
                "11:12",
                &["sweep"],
            ),
        ] {
            std::fs::write(&path, format!("{head}{tail}")).unwrap();
            for &command in commands {
                let output = match command {
                    "sweep" => c10dsim(&[command, file, "-o", out.to_str().unwrap()]),
                    _ => c10dsim(&[command, file]),
                };
                assert_eq!(output.status.code(), Some(2), "{command}: {}", stderr(&output));
                assert!(
                    stderr(&output).contains(&format!("{file}:{at}: error: ")),
                    "{command} {tail}: {}",
                    stderr(&output)
                );
            }
        }
    }
}

#[test]
fn set_machine_runs_every_point_on_that_profile_as_for_run() {
    let body = "[cluster]\nranks = 2\n[tensors]\nx = \"1MiB\"\n[[op]]\nlabel = \"ar\"\n\
                all_reduce = \"x\"\n[sweep]\nrepeat = [1, 2]\n";
    let named = temp("machine_named.toml");
    std::fs::write(&named, format!("machine = \"h200\"\n{body}")).unwrap();
    let set = temp("machine_set.toml");
    std::fs::write(&set, body).unwrap();
    let (_, on_h200) = rows(&sweep_to(
        &temp("machine_named.csv"),
        &[named.to_str().unwrap()],
    ));
    let (_, by_set) = rows(&sweep_to(
        &temp("machine_set.csv"),
        &[set.to_str().unwrap(), "--set", "machine=h200"],
    ));
    let (_, plain) = rows(&sweep_to(
        &temp("machine_plain.csv"),
        &[set.to_str().unwrap()],
    ));
    for ((h200, by_set), plain) in on_h200.iter().zip(&by_set).zip(&plain) {
        assert_eq!(by_set["ar.kernel_us"], h200["ar.kernel_us"]);
        assert_ne!(
            by_set["ar.kernel_us"], plain["ar.kernel_us"],
            "the profile applies"
        );
        assert_eq!(by_set["error"], "",);
    }
    // One profile per sweep: a machine axis is refused before anything runs.
    let out = temp("machine_axis.csv");
    let _ = std::fs::remove_file(&out);
    let output = c10dsim(&[
        "sweep",
        set.to_str().unwrap(),
        "--set",
        "machine=h200,h100",
        "-o",
        out.to_str().unwrap(),
    ]);
    refused(&output, "one machine profile");
    assert!(!out.exists());
}

#[test]
fn a_machine_key_of_the_sweep_table_is_refused_as_one_profile_per_sweep() {
    // It used to read "none of its values gives a valid scenario … unknown field `machine`".
    let body = "[cluster]\nranks = 2\n[tensors]\nx = \"1MiB\"\n[[op]]\nall_reduce = \"x\"\n";
    for (name, sweep, at) in [
        ("axis", "[sweep]\nmachine = [\"h100\", \"h200\"]\n", "8:1"),
        (
            "zipped",
            "[sweep.zip.gpu]\nvalues = [\"a\", \"b\"]\nmachine = [\"h100\", \"h200\"]\n",
            "9:1",
        ),
    ] {
        let path = written(&format!("machine_in_{name}.toml"), format!("{body}{sweep}"));
        let expected = format!(
            "{}:{at}: error: sweep axis \"machine\": a sweep runs every point on one machine \
             profile",
            path.display()
        );
        let file = path.to_str().unwrap();
        for args in [&["sweep", file, "-o", "-"][..], &["check", file]] {
            refused(&c10dsim(args), &expected);
        }
    }
}

#[test]
fn check_refuses_what_sweep_refuses_before_it_runs() {
    // `check` used to pass these files, which `sweep` then refused: a zipped axis named like a
    // column (point, a metric the base point reports) or a scenario path, a path axis named like
    // a size axis's `_bytes` twin. Same words, same file:line:column, exit 2.
    let base = "[cluster]\nranks = 2\n[tensors]\nx = \"1MiB\"\nx_bytes = \"1MiB\"\n[[op]]\n\
                label = \"ar\"\nall_reduce = \"x\"\n[sweep]\n\"tensors.x\" = [\"1MiB\", \"2MiB\"]\n";
    let zipped =
        |name: &str| format!("[sweep.zip.{name}]\nvalues = [\"a\", \"b\"]\nrepeat = [1, 2]\n");
    for (name, sweep, says) in [
        (
            "point",
            zipped("point"),
            "11:12: error: zipped axis \"point\" is named like another column",
        ),
        (
            "metric",
            zipped("\"ar.kernel_us\""),
            "11:12: error: zipped axis \"ar.kernel_us\" is named like another column",
        ),
        (
            "path",
            zipped("\"tensors.y\""),
            "11:12: error: zipped axis \"tensors.y\" is named like a scenario path",
        ),
        (
            "twin",
            "\"tensors.x_bytes\" = [\"1MiB\", \"2MiB\"]\n".to_string(),
            "11:1: error: the CSV would have two columns named \"tensors.x_bytes\"",
        ),
    ] {
        let path = written(&format!("check_{name}.toml"), format!("{base}{sweep}"));
        let says = format!("{}:{says}", path.display());
        let out = temp(&format!("check_{name}.csv"));
        refused(
            &c10dsim(&["sweep", path.to_str().unwrap(), "-o", out.to_str().unwrap()]),
            &says,
        );
        refused(&c10dsim(&["check", path.to_str().unwrap()]), &says);
    }
    // A name shaped like a metric that the base point does not report is fine for both.
    let path = written(
        "check_other_metric.toml",
        format!("{base}{}", zipped("\"other.kernel_us\"")),
    );
    let output = c10dsim(&["check", path.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let output = c10dsim(&["sweep", path.to_str().unwrap(), "-o", "-"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
}

#[test]
fn bad_sweep_keys_name_file_line_and_column() {
    let path = written(
        "bad.toml",
        "[tensors]\nx = \"1MiB\"\n[[op]]\nall_reduce = \"x\"\n[sweep]\n\"tensors.x\" = \"1KiB\"\n",
    );
    let out = temp("bad.csv");
    let output = c10dsim(&["sweep", path.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2));
    let expected = "bad.toml:6:15: error: sweep axis \"tensors.x\" must be a list";
    assert!(stderr(&output).contains(expected), "{}", stderr(&output));
    // `run` and `check` refuse it too, rather than run half of the file.
    for command in ["run", "check"] {
        let output = c10dsim(&[command, path.to_str().unwrap()]);
        assert_eq!(output.status.code(), Some(2), "{command}",);
        assert!(stderr(&output).contains(expected), "{}", stderr(&output));
    }
    // `run` on a sweep file runs its base point; its --set reaches ops by label as axes do.
    let output = c10dsim(&["run", "scenarios/overlap_sweep.toml"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let output = c10dsim(&[
        "run",
        "scenarios/overlap_sweep.toml",
        "--set",
        "op.killer={ device_sync = true }",
        "--set",
        "op.ar.work=w2",
    ]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    // The error is on a line the edits kept: it names the file's own line.
    assert!(
        stderr(&output).contains("scenarios/overlap_sweep.toml:77:8: error: wait on Work \"w\""),
        "wait(\"w\") now has no Work: {}",
        stderr(&output)
    );
    assert!(
        stderr(&output).contains("did you mean \"w2\"?"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn every_plot_error_about_the_data_names_the_csv_and_an_argument_error_does_not() {
    let csv = temp("errors.csv");
    std::fs::write(&csv, "point,x,y\n0,1,1\n1,2,-3\n2,oops,5\n").unwrap();
    let csv_text = csv.to_str().unwrap();
    let picture = temp("errors.svg");
    let error = |extra: &[&str]| {
        let mut args = vec![
            "plot",
            csv_text,
            "--y",
            "y",
            "-o",
            picture.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        let output = c10dsim(&args);
        assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
        stderr(&output)
    };
    // Found while reading: the file, the column and the row.
    assert_eq!(
        error(&["--x", "x"]),
        format!("c10dsim: {csv_text}: column \"x\" holds \"oops\" at point 2, not a finite number or a size\n")
    );
    // Found while drawing: the file too.
    let only_numbers = ["--x", "x", "--where", "point=1"];
    assert_eq!(
        error(&[&only_numbers[..], &["--log-y"]].concat()),
        format!("c10dsim: {csv_text}: --log-y needs positive values; line \"y\" has -3 at x = 2\n")
    );
    // An argument's own error, whatever the file holds: no file named.
    assert_eq!(
        error(&[&only_numbers[..], &["--width", "5"]].concat()),
        "c10dsim: --width 5: expected 16 to 16384 pixels\n"
    );
}

#[test]
fn plot_of_one_shard_warns_of_the_points_without_a_row_as_merge_does_and_still_draws() {
    let shard = temp("plot_one_shard.csv");
    sweep_to(&shard, &["scenarios/exp_a_sweep.toml", "--shard", "0/3"]);
    let whole = temp("plot_whole.csv");
    sweep_to(&whole, &["scenarios/exp_a_sweep.toml"]);
    let picture = temp("plot_one_shard.svg");
    let plot = |csv: &Path| {
        c10dsim(&[
            "plot",
            csv.to_str().unwrap(),
            "--x",
            "tensors.x",
            "--y",
            "ar.host_call_us",
            "--by",
            "mode",
            "--where",
            "blocking=0",
            "-o",
            picture.to_str().unwrap(),
        ])
    };
    let output = plot(&shard);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        stderr(&output).contains(
            "c10dsim: warning: 16 of the points 0-23 have no row (points 1-2, 4-5, 7-8, "
        ) && stderr(&output).contains("c10dsim: wrote"),
        "{}",
        stderr(&output)
    );
    assert!(std::fs::read_to_string(&picture)
        .unwrap()
        .starts_with("<svg"));
    let output = plot(&whole);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(!stderr(&output).contains("warning"), "{}", stderr(&output));
}

#[test]
fn plot_draws_one_line_per_by_value_with_units_and_run_draws_the_timeline() {
    let csv = temp("plot.csv");
    sweep_to(&csv, &["scenarios/overlap_sweep.toml"]);
    for extension in ["svg", "png"] {
        let picture = temp(&format!("plot.{extension}"));
        let output = c10dsim(&[
            "plot",
            csv.to_str().unwrap(),
            "--x",
            "tensors.buf",
            "--y",
            "killed.overlap",
            "--by",
            "killer",
            "--where",
            "gemm=8192",
            "-o",
            picture.to_str().unwrap(),
        ]);
        assert!(output.status.success(), "{}", stderr(&output));
        assert!(stderr(&output).contains("(5 lines)"), "{}", stderr(&output));
        let bytes = std::fs::read(&picture).unwrap();
        if extension == "png" {
            assert_eq!(bytes[..8], *b"\x89PNG\r\n\x1a\n");
        } else {
            let svg = String::from_utf8(bytes).unwrap();
            for killer in ["none", "item", "early_wait", "sync", "async_false"] {
                // plotters writes each text on its own line.
                assert!(
                    svg.lines().any(|line| line.trim() == killer),
                    "legend entry {killer}"
                );
            }
            assert!(svg.contains("tensors.buf (bytes, log scale)"));
            assert!(svg.contains("killed.overlap (R3: 1 = hidden, 0 = serial)"));
            // The commands docs/sweep-format.md gives for docs/overlap_sweep.svg.
            let shipped = std::fs::read_to_string("docs/overlap_sweep.svg").unwrap();
            assert!(svg == shipped, "docs/overlap_sweep.svg is stale");
        }
    }
    // Without --where gemm=…, each killer's line would join the four GEMM sizes' rows.
    let ambiguous = c10dsim(&[
        "plot",
        csv.to_str().unwrap(),
        "--x",
        "tensors.buf",
        "--y",
        "killed.overlap",
        "--by",
        "killer",
        "-o",
        temp("ambiguous.svg").to_str().unwrap(),
    ]);
    assert_eq!(ambiguous.status.code(), Some(2), "{}", stderr(&ambiguous));
    assert!(
        stderr(&ambiguous).contains("ambiguous series")
            && stderr(&ambiguous).contains("they differ in gemm."),
        "{}",
        stderr(&ambiguous)
    );
    assert!(!temp("ambiguous.svg").exists());
    // Any size, a log y axis, SVG on stdout with `-o -`.
    let output = c10dsim(&[
        "plot",
        csv.to_str().unwrap(),
        "--x",
        "tensors.buf_bytes",
        "--y",
        "gemm_us.median_us",
        "--by",
        "gemm",
        "--where",
        "killer=none",
        "--log-y",
        "--width",
        "640",
        "--height",
        "400",
        "-o",
        "-",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let svg = String::from_utf8(output.stdout).unwrap();
    assert!(
        svg.starts_with("<svg") && svg.contains(r#"width="640" height="400""#),
        "{}",
        &svg[..200.min(svg.len())]
    );
    let gantt = temp("timeline.svg");
    let output = c10dsim(&[
        "run",
        "scenarios/exp_b_stream_scope.toml",
        "--svg",
        gantt.to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let svg = std::fs::read_to_string(&gantt).unwrap();
    for row in ["rank 3 host", "rank 3 wait_stream", "rank 3 free_stream"] {
        assert!(svg.contains(&format!(">{row}<")), "row {row}");
    }
    assert!(svg.contains("marker-end=\"url(#arrow)\""));
    // `--svg -`: the same chart alone on stdout; the report moves to stderr.
    let piped = c10dsim(&["run", "scenarios/exp_b_stream_scope.toml", "--svg", "-"]);
    assert!(piped.status.success(), "{}", stderr(&piped));
    assert!(
        piped.stdout == svg.as_bytes(),
        "--svg - differs from the file"
    );
    assert!(
        stderr(&piped).contains("wrote timeline chart to standard output")
            && stderr(&piped).contains("collectives (medians"),
        "{}",
        stderr(&piped)
    );
}

#[test]
fn run_refuses_a_gantt_chart_named_png_before_it_simulates() {
    // `plot -o x.png` draws a PNG; `run --svg x.png` used to write SVG text into x.png.
    let png = temp("gantt.png");
    let output = c10dsim(&[
        "run",
        "scenarios/exp_b_stream_scope.toml",
        "--svg",
        png.to_str().unwrap(),
    ]);
    refused(&output, "drawn as SVG only; name the file .svg");
    assert!(stdout(&output).is_empty(), "{}", stdout(&output));
    assert!(!png.exists());
}

/// What pandas would make of the file: every column whose name carries a unit (`_us`, `_bytes`,
/// `_share`, `.overlap`, counts) parses as a number in every row that ran, with no float noise
/// (a shortest f64 text longer than 6 decimals), and size axes have integer bytes.
#[test]
fn numeric_columns_parse_as_numbers_without_float_noise() {
    let (header, rows) = rows(&sweep_to(
        &temp("numeric.csv"),
        &[
            "scenarios/overlap_sweep.toml",
            "--set",
            "tensors.buf=1MiB,400MiB",
        ],
    ));
    let text_columns = [
        "error",
        "scenario_hash",
        "c10dsim_version",
        "killer",
        "tensors.buf",
    ];
    let numeric: Vec<&String> = header
        .iter()
        .filter(|name| !text_columns.contains(&name.as_str()))
        .collect();
    assert!(
        header.contains(&"tensors.buf_bytes".to_string()),
        "{header:?}"
    );
    assert!(numeric.len() > 20, "{numeric:?}");
    for row in &rows {
        assert_eq!(row["error"], "");
        for column in &numeric {
            let cell = &row[column.as_str()];
            if cell.is_empty() {
                continue;
            }
            let value: f64 = cell
                .parse()
                .unwrap_or_else(|_| panic!("{column} = {cell:?} is not a number"));
            assert!(value.is_finite(), "{column} = {cell}");
            let decimals = cell
                .split_once('.')
                .map_or(0, |(_, fraction)| fraction.len());
            assert!(decimals <= 6, "{column} = {cell}: float noise");
            if column.ends_with("_bytes") {
                assert!(
                    cell.parse::<u64>().is_ok(),
                    "{column} = {cell}: not whole bytes"
                );
            }
        }
    }
    let bytes: Vec<u64> = rows
        .iter()
        .map(|row| row["tensors.buf_bytes"].parse().unwrap())
        .collect();
    assert!(bytes.contains(&(400 << 20)), "{bytes:?}");
}

/// The value of `key: value` on a line of `text` that starts (after spaces) with `key:`.
fn yaml_value<'t>(text: &'t str, key: &str) -> &'t str {
    text.lines()
        .map(str::trim)
        .find_map(|line| line.strip_prefix(key)?.strip_prefix(':'))
        .unwrap_or_else(|| panic!("no `{key}:` in the manifest"))
        .trim()
}

/// The directory holding the binary, for scripts that call `c10dsim` by name.
fn binary_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_c10dsim"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn path_with_binary() -> String {
    format!(
        "{}:{}",
        binary_dir().display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

/// Merges every CSV in `dir` and checks the result equals `whole` byte for byte.
fn assert_parts_merge_to(dir: &std::path::Path, tasks: usize, whole: &[u8]) {
    let mut parts: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().path().to_string_lossy().into_owned())
        .filter(|path| path.ends_with(".csv"))
        .collect();
    parts.sort();
    assert_eq!(parts.len(), tasks, "one part per task: {parts:?}");
    let merged = dir.join("merged.out");
    let mut merge = vec!["merge"];
    merge.extend(parts.iter().map(String::as_str));
    merge.extend_from_slice(&["-o", merged.to_str().unwrap()]);
    let output = c10dsim(&merge);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        std::fs::read(&merged).unwrap() == whole,
        "merged != unsharded"
    );
}

#[test]
fn the_shipped_slurm_array_script_runs_its_shards_and_they_merge_to_the_whole() {
    let script = std::fs::read_to_string("docs/cluster/sweep.sbatch").unwrap();
    let directives = script.replace("#SBATCH --array=", "array:");
    let array = yaml_value(&directives, "array");
    let (first, last) = array.split_once('-').expect("--array=A-B");
    let (first, last): (usize, usize) = (first.parse().unwrap(), last.parse().unwrap());
    let tasks = last - first + 1;
    let args = ["scenarios/exp_a_sweep.toml", "--set", "cluster.ranks=4,8"];
    let whole = sweep_to(&temp("slurm_whole.csv"), &args);
    let out_dir = temp("slurm_parts");
    let _ = std::fs::remove_dir_all(&out_dir);
    for task in first..=last {
        // As Slurm starts each array task: its variables, the script's arguments.
        let output = Command::new("bash")
            .arg("docs/cluster/sweep.sbatch")
            .args([args[0], out_dir.to_str().unwrap(), args[1], args[2]])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .env("PATH", path_with_binary())
            .env_remove("C10DSIM")
            .env_remove("JOB_COMPLETION_INDEX")
            .env_remove("C10DSIM_SHARD_COUNT")
            .env("SLURM_ARRAY_TASK_ID", task.to_string())
            .env("SLURM_ARRAY_TASK_MIN", first.to_string())
            .env("SLURM_ARRAY_TASK_COUNT", tasks.to_string())
            .env("SLURM_CPUS_PER_TASK", "1")
            .output()
            .unwrap();
        assert!(output.status.success(), "task {task}: {}", stderr(&output));
        assert!(stderr(&output).contains(&format!(
            "shard {}/{tasks} (SLURM_ARRAY_TASK_ID)",
            task - first
        )));
    }
    assert_parts_merge_to(&out_dir, tasks, &whole);
}

#[test]
fn the_shipped_kubernetes_indexed_job_runs_its_shards_and_they_merge_to_the_whole() {
    let manifest = std::fs::read_to_string("docs/cluster/sweep-job.yaml").unwrap();
    let completions: usize = yaml_value(&manifest, "completions").parse().unwrap();
    assert_eq!(yaml_value(&manifest, "completionMode"), "Indexed");
    // The container's environment, as written in the manifest.
    let mut env: HashMap<String, String> = manifest
        .lines()
        .filter_map(|line| line.trim().strip_prefix("- {name: "))
        .filter_map(|entry| {
            let (name, rest) = entry.split_once(", value: ")?;
            let value = rest.strip_suffix('}')?.trim_matches('"');
            Some((name.to_string(), value.to_string()))
        })
        .collect();
    assert_eq!(env["C10DSIM_SHARD_COUNT"], completions.to_string());
    // The command is a YAML flow sequence of double-quoted strings, which is JSON.
    let command: Vec<String> =
        serde_json::from_str(yaml_value(&manifest, "command")).expect("command is a JSON array");
    assert_eq!(command[..2], ["sh", "-c"]);
    let args = ["scenarios/exp_a_sweep.toml", "--set", "cluster.ranks=4,8"];
    let whole = sweep_to(&temp("k8s_whole.csv"), &args);
    // The two volume mounts become local paths; every other variable is the manifest's.
    let out_dir = temp("k8s_parts");
    let _ = std::fs::remove_dir_all(&out_dir);
    env.insert("SCENARIO".into(), args[0].into());
    env.insert("OUT_DIR".into(), out_dir.to_string_lossy().into_owned());
    env.insert("SWEEP_ARGS".into(), format!("{} {}", args[1], args[2]));
    for index in 0..completions {
        let output = Command::new(&command[0])
            .args(&command[1..])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .env("PATH", path_with_binary())
            .env_remove("SLURM_ARRAY_TASK_ID")
            .envs(&env)
            .env("JOB_COMPLETION_INDEX", index.to_string())
            .output()
            .unwrap();
        assert!(output.status.success(), "pod {index}: {}", stderr(&output));
        assert!(stderr(&output).contains(&format!("shard {index}/{completions}")));
    }
    assert_parts_merge_to(&out_dir, completions, &whole);
}

#[test]
fn folding_leaves_the_csv_unchanged_and_a_swept_seed_has_a_column_of_its_own() {
    // frag_killer releases the allocator's cache on every rank: the folded run simulates one
    // rank per class, and the sum over ranks must count each class once per rank.
    let folded = sweep_to(
        &temp("fold.csv"),
        &["scenarios/frag_killer.toml", "--set", "repeat=1,2"],
    );
    let unfolded = sweep_to(
        &temp("no_fold.csv"),
        &[
            "scenarios/frag_killer.toml",
            "--set",
            "repeat=1,2",
            "--no-fold",
        ],
    );
    let (_, table) = rows(&folded);
    assert!(number(&table[0], "memory.cache_releases") > 1.0);
    assert!(folded == unfolded, "folding changed the sweep CSV");
    let seeds = sweep_to(
        &temp("seed_axis.csv"),
        &["scenarios/straggler.toml", "--set", "seed=1,2,3"],
    );
    let (header, table) = rows(&seeds);
    let mut names = header.clone();
    names.sort();
    names.dedup();
    assert_eq!(
        names.len(),
        header.len(),
        "two columns share a name: {header:?}"
    );
    let swept: Vec<&str> = table
        .iter()
        .map(|row| row["scenario.seed"].as_str())
        .collect();
    assert_eq!(swept, ["1", "2", "3"]);
    assert!(table.iter().all(|row| number(row, "seed") > 3.0));
}

/// The other committed pictures are what the commands their pages give draw: the Gantt chart of
/// docs/sweep-format.md and the scaling chart of docs/perf.md (`bench --scaling --plot` draws
/// what `plot` draws of its CSV: tests/e2e/summary.rs), from the committed CSV.
#[test]
fn the_documented_commands_draw_the_committed_pictures() {
    let scaling: Vec<&str> = ["plot", "docs/scaling.csv"]
        .into_iter()
        .chain(crate::util::SCALING_PLOT)
        .chain(["-o"])
        .collect();
    let commands: [(&str, &[&str]); 2] = [
        (
            "docs/exp_b_timeline.svg",
            &[
                "run",
                "scenarios/exp_b_stream_scope.toml",
                "--set",
                "repeat=2",
                "--set",
                "warmup=0",
                "--svg",
            ],
        ),
        ("docs/scaling.svg", &scaling),
    ];
    for (shipped, args) in commands {
        let drawn = temp(&shipped.replace('/', "_"));
        let mut all = args.to_vec();
        all.push(drawn.to_str().unwrap());
        let output = c10dsim(&all);
        assert!(output.status.success(), "{}", stderr(&output));
        assert!(
            std::fs::read(&drawn).unwrap() == std::fs::read(shipped).unwrap(),
            "{shipped} is stale: c10dsim {}",
            args.join(" ")
        );
    }
}

#[test]
fn a_sweep_of_one_point_says_point_and_line_in_the_singular() {
    let scenario = written(
        "one_point.toml",
        "[cluster]\nranks = 1\n[tensors]\nx = \"1MiB\"\n[[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\n\
         [sweep]\n\"tensors.x\" = [\"1MiB\"]\n",
    );
    let csv = temp("one_point.csv");
    let sweep = [
        "sweep",
        scenario.to_str().unwrap(),
        "-o",
        csv.to_str().unwrap(),
    ];
    let output = c10dsim(&sweep);
    assert!(output.status.success(), "{}", stderr(&output));
    let said = stderr(&output);
    assert!(
        said.contains(": 1 point; shard 0/1 (default) has 1,"),
        "{said}"
    );
    assert!(said.contains(" (1 point run, 0 with an error"), "{said}");
    let output = c10dsim(&[
        "plot",
        csv.to_str().unwrap(),
        "--x",
        "tensors.x",
        "--y",
        "ar.kernel_us",
        "-o",
        temp("one_point.svg").to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(stderr(&output).contains("(1 line)"), "{}", stderr(&output));
    // A row of a point the sweep does not have, resumed: refused, naming its one point.
    let text = std::fs::read_to_string(&csv).unwrap();
    let (header, row) = text.split_once('\n').unwrap();
    std::fs::write(
        &csv,
        format!("{header}\n{row}{}", row.replacen('0', "7", 1)),
    )
    .unwrap();
    let mut resume = sweep.to_vec();
    resume.push("--resume");
    let output = c10dsim(&resume);
    refused(
        &output,
        "holds point 7, but this sweep has 1 point (0 to 0)",
    );
}

#[test]
fn a_bad_row_of_a_merged_or_plotted_csv_is_named_by_file_and_line() {
    let scenario = written(
        "bad_rows.toml",
        "[cluster]\nranks = 2\n[tensors]\nx = \"1MiB\"\n[[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\n\
         [sweep]\n\"tensors.x\" = [\"1MiB\", \"2MiB\"]\n",
    );
    let good = temp("bad_rows_good.csv");
    let text = String::from_utf8(sweep_to(&good, &[scenario.to_str().unwrap()])).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    // A row whose point is past its sweep's count: named in its own file, not the merge's.
    let past = temp("bad_rows_past.csv");
    let (_, rest) = lines[1].split_once(',').unwrap();
    std::fs::write(&past, format!("{}\n7,{rest}\n", lines[0])).unwrap();
    let merged = temp("bad_rows_merged.csv");
    let (good, past, merged) = (
        good.to_str().unwrap(),
        past.to_str().unwrap(),
        merged.to_str().unwrap(),
    );
    let output = c10dsim(&["merge", good, past, "-o", merged]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(
        stderr(&output).contains(&format!(
            "{past}:2: error: point 7 is not one of its sweep's 2 points (0 to 1)"
        )),
        "{}",
        stderr(&output)
    );
    // A row cut short: the file and line, in the other readers' words, not the csv crate's.
    let short = temp("bad_rows_short.csv");
    std::fs::write(&short, format!("{}\n{}\n1,2\n", lines[0], lines[1])).unwrap();
    let short = short.to_str().unwrap();
    let columns = lines[0].split(',').count();
    for args in [
        vec!["merge", short, "-o", merged],
        vec![
            "plot",
            short,
            "--x",
            "point",
            "--y",
            "ar.wait_us",
            "-o",
            "-",
        ],
    ] {
        let output = c10dsim(&args);
        assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
        let expected =
            format!("{short}:3: error: a row of 2 cells, but the header has {columns} columns");
        assert!(stderr(&output).contains(&expected), "{}", stderr(&output));
        assert!(
            !stderr(&output).contains("CSV error"),
            "{}",
            stderr(&output)
        );
    }
}

#[test]
fn merge_names_the_files_and_lines_of_a_point_twice_and_of_two_sweeps() {
    let scenario = temp("merge_places.toml");
    let text = "[cluster]\nranks = 2\n[tensors]\nx = \"1MiB\"\n[[op]]\nlabel = \"ar\"\n\
                all_reduce = \"x\"\n[sweep]\n\"tensors.x\" = [\"1MiB\", \"2MiB\"]\n";
    std::fs::write(&scenario, text).unwrap();
    let good = temp("merge_places_good.csv");
    let csv = String::from_utf8(sweep_to(&good, &[scenario.to_str().unwrap()])).unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    // Point 1 again (on line 2 of its file), one cell changed.
    let changed = temp("merge_places_changed.csv");
    let cells: Vec<&str> = lines[2].split(',').collect();
    let edited = [&cells[..3], &["0.5"], &cells[4..]].concat().join(",");
    std::fs::write(&changed, format!("{}\n{edited}\n", lines[0])).unwrap();
    // The same sweep of another scenario file: the same columns, another scenario_hash.
    let other_scenario = temp("merge_places_other.toml");
    std::fs::write(&other_scenario, text.replace("ranks = 2", "ranks = 4")).unwrap();
    let other = temp("merge_places_other.csv");
    sweep_to(&other, &[other_scenario.to_str().unwrap()]);
    let merged = temp("merge_places_merged.csv");
    let [good, changed, other, merged] =
        [&good, &changed, &other, &merged].map(|path| path.to_str().unwrap());
    // It said `line 2: point 1 appears twice …`, without the files.
    let output = c10dsim(&["merge", good, changed, "-o", merged]);
    refused(
        &output,
        &format!("point 1 appears twice with different rows, at {good}:3 and {changed}:2;"),
    );
    // It said `the files hold rows of two sweeps (scenario_hash A and B: …)`, without the files.
    let output = c10dsim(&["merge", good, other, "-o", merged]);
    refused(&output, "the files hold rows of two sweeps: scenario_hash ");
    assert!(
        stderr(&output).contains(&format!(" at {good}:2, "))
            && stderr(&output).contains(&format!(" at {other}:2 (")),
        "{}",
        stderr(&output)
    );
}

/// docs/sweep-format.md#seeds: `run FILE --set … --seed SEED` replays one point, every point —
/// also one whose drawn seed has its top bit set, which a scenario's seed (a TOML integer, at
/// most 2⁶³ − 1) could not hold before 2026-12-07, so `run --seed` refused half the points.
#[test]
fn run_with_a_rows_seed_replays_every_point() {
    let scenario = "scenarios/straggler.toml";
    let csv = sweep_to(
        &temp("replay.csv"),
        &[scenario, "--set", "cluster.kernel_jitter_pct=0,5,10,20"],
    );
    let (_, points) = rows(&csv);
    assert_eq!(points.len(), 4);
    for row in &points {
        let jitter = format!(
            "cluster.kernel_jitter_pct={}",
            row["cluster.kernel_jitter_pct"]
        );
        let seed = &row["seed"];
        let run = c10dsim(&["run", scenario, "--set", &jitter, "--seed", seed, "--json"]);
        assert_eq!(run.status.code(), Some(0), "seed {seed}: {}", stderr(&run));
        let json: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
        let replayed = json["report"]["collectives"][0]["stream_interval_us"]["median"]
            .as_f64()
            .unwrap();
        close(replayed, number(row, "ar.stream_interval_us"), &jitter);
    }
}

/// A row whose `seed` is not the seed this sweep gives its point (a file a c10dsim before
/// 2026-12-07 wrote, whose point seeds could pass 2^63 - 1, or an edited row) is refused at
/// its line: resumed, the file would mix two seeds for one sweep without a word.
#[test]
fn resume_refuses_a_row_whose_seed_is_not_its_point_s() {
    let partial = temp("resume_other_seed.csv");
    let whole = sweep_to(&partial, &["scenarios/exp_a_sweep.toml"]);
    let text = String::from_utf8(whole).unwrap();
    let mut lines: Vec<String> = text.lines().take(4).map(str::to_string).collect();
    let header: Vec<&str> = lines[0].split(',').collect();
    let seed_column = header.iter().position(|h| *h == "seed").unwrap();
    let mut fields: Vec<String> = lines[2].split(',').map(str::to_string).collect();
    fields[seed_column] = format!(
        "{}",
        fields[seed_column].parse::<u64>().unwrap() | (1 << 63)
    );
    lines[2] = fields.join(",");
    std::fs::write(&partial, format!("{}\n", lines.join("\n"))).unwrap();
    let output = c10dsim(&[
        "sweep",
        "scenarios/exp_a_sweep.toml",
        "--resume",
        "-o",
        partial.to_str().unwrap(),
    ]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(
        stderr(&output).contains(&format!(
            "{}:3: point 1's seed {} is not this sweep's",
            partial.display(),
            fields[seed_column]
        )),
        "{}",
        stderr(&output)
    );
}

/// `merge` reads no scenario, so it cannot draw a point's seed; but no c10dsim since
/// 2026-12-07 writes a seed past 2^63 - 1, and `run --seed` cannot replay one: a row with such
/// a seed is an older c10dsim's, whose slices would mix two seeds for one sweep (its other
/// rows' seeds, top bit clear, are the ones drawn now). Refused at its line.
#[test]
fn merge_refuses_a_row_whose_seed_an_older_c10dsim_drew() {
    let old = temp("merge_old_seed.csv");
    let whole = sweep_to(&old, &["scenarios/exp_a_sweep.toml"]);
    let text = String::from_utf8(whole).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    let header: Vec<&str> = lines[0].split(',').collect();
    let seed_column = header.iter().position(|h| *h == "seed").unwrap();
    let mut fields: Vec<String> = lines[2].split(',').map(str::to_string).collect();
    let high = fields[seed_column].parse::<u64>().unwrap() | (1 << 63);
    fields[seed_column] = high.to_string();
    lines[2] = fields.join(",");
    std::fs::write(&old, format!("{}\n", lines.join("\n"))).unwrap();
    let merged = temp("merge_old_seed_merged.csv");
    let _ = std::fs::remove_file(&merged);
    let output = c10dsim(&[
        "merge",
        old.to_str().unwrap(),
        "-o",
        merged.to_str().unwrap(),
    ]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(
        stderr(&output).contains(&format!(
            "{}:3: point 1's seed {high} is past 2^63 - 1",
            old.display()
        )),
        "{}",
        stderr(&output)
    );
    assert!(!merged.exists(), "merge wrote {}", merged.display());
}
