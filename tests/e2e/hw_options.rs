//! `c10dsim hw`: what needs no GPU is refused (exit 2) before the GPU probe, naming the flag or
//! variable at fault, so these run the same with or without a GPU; and `hw-merge` of its parts.

use crate::util::stderr;
use std::process::{Command, Output};

/// The 4-rank scenario of the reports.
const SCENARIO: &str = "scenarios/exp_b_stream_scope.toml";

/// Every variable a launcher or the rendezvous reads, so that the test's own environment (a CI
/// job under Slurm) does not leak in.
const LAUNCH_VARS: [&str; 16] = [
    "RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "SLURM_PROCID",
    "SLURM_NTASKS",
    "SLURM_LOCALID",
    "SLURM_JOB_ID",
    "SLURM_STEP_ID",
    "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_SIZE",
    "OMPI_COMM_WORLD_LOCAL_RANK",
    "PMIX_NAMESPACE",
    "TORCHELASTIC_RUN_ID",
    "MASTER_ADDR",
    "MASTER_PORT",
    "C10DSIM_RENDEZVOUS_DIR",
];

/// `env VARS c10dsim hw SCENARIO ARGS`.
fn hw(vars: &[(&str, &str)], args: &[&str]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_c10dsim"));
    command
        .arg("hw")
        .arg(SCENARIO)
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"));
    for name in LAUNCH_VARS {
        command.env_remove(name);
    }
    command.envs(vars.iter().copied());
    command.output().expect("the binary runs")
}

/// Exit 2 with `expected` in the message, and no sign of a GPU probe: the check came first.
fn refused_before_the_probe(output: &Output, expected: &str) {
    let text = stderr(output);
    assert_eq!(output.status.code(), Some(2), "{text}");
    assert!(text.contains(expected), "expected {expected:?} in:\n{text}");
    for probed in ["dynamic loader", "no usable NVIDIA GPU", " visible; CUDA "] {
        assert!(!text.contains(probed), "the GPU was probed first:\n{text}");
    }
}

#[test]
fn a_launch_that_does_not_match_the_scenario_is_refused_before_the_probe() {
    refused_before_the_probe(
        &hw(&[("RANK", "0"), ("WORLD_SIZE", "2")], &[]),
        "the scenario has 4 ranks but torchrun started 2 processes (WORLD_SIZE=2)",
    );
    refused_before_the_probe(
        &hw(
            &[("RANK", "0"), ("WORLD_SIZE", "4")],
            &["--downscale", "model"],
        ),
        "downscale runs rank 0 alone in one process, but torchrun started 4 processes",
    );
}

#[test]
fn a_multi_rank_scenario_in_a_single_process_is_refused_before_the_probe() {
    refused_before_the_probe(
        &hw(&[], &[]),
        "the scenario has 4 ranks but this is a single process (no RANK/WORLD_SIZE",
    );
    refused_before_the_probe(
        &hw(&[], &[]),
        "`torchrun --no-python --nproc-per-node=4 c10dsim hw FILE`",
    );
}

#[test]
fn layout_errors_name_the_launcher_variables_that_were_read() {
    let output = hw(
        &[("OMPI_COMM_WORLD_RANK", "0"), ("OMPI_COMM_WORLD_SIZE", "2")],
        &[],
    );
    refused_before_the_probe(
        &output,
        "mpirun started 2 processes (OMPI_COMM_WORLD_SIZE=2)",
    );
    assert!(
        !stderr(&output).contains("(WORLD_SIZE)"),
        "{}",
        stderr(&output)
    );
    refused_before_the_probe(
        &hw(&[("SLURM_PROCID", "1"), ("SLURM_NTASKS", "8")], &[]),
        "srun started 8 processes (SLURM_NTASKS=8)",
    );
}

#[test]
fn a_half_set_launcher_is_refused_naming_the_missing_variable() {
    refused_before_the_probe(
        &hw(&[("RANK", "1")], &[]),
        "RANK is set but WORLD_SIZE is not",
    );
    refused_before_the_probe(
        &hw(&[("SLURM_PROCID", "1")], &[]),
        "SLURM_PROCID is set but SLURM_NTASKS is not",
    );
}

#[test]
fn disagreeing_launchers_use_torchrun_and_say_so() {
    let output = hw(
        &[
            ("RANK", "1"),
            ("WORLD_SIZE", "2"),
            ("SLURM_PROCID", "0"),
            ("SLURM_NTASKS", "1"),
        ],
        &[],
    );
    refused_before_the_probe(&output, "torchrun started 2 processes");
    assert!(
        stderr(&output).contains(
            "note: using RANK=1, WORLD_SIZE=2 (torchrun); ignoring SLURM_PROCID=0, SLURM_NTASKS=1 (srun)"
        ),
        "{}",
        stderr(&output)
    );
}

#[test]
fn a_missing_timeline_folder_is_refused_before_the_run() {
    let folder = std::env::temp_dir().join(format!("c10dsim-absent-{}", std::process::id()));
    let path = folder.join("out.json");
    refused_before_the_probe(
        &hw(&[], &["--timeline", &path.display().to_string()]),
        &format!(
            "--timeline {}: the folder {} does not exist",
            path.display(),
            folder.display()
        ),
    );
}

#[test]
fn a_missing_trace_dir_is_refused_before_the_run() {
    let folder = std::env::temp_dir().join(format!("c10dsim-absent-dir-{}", std::process::id()));
    let dir = folder.display().to_string();
    refused_before_the_probe(
        &hw(&[], &["--trace-dir", &dir, "--downscale", "model"]),
        &format!("--trace-dir {dir}: the folder does not exist"),
    );
    assert!(!folder.exists(), "the refused run made {dir}");
}

#[test]
fn one_timeline_file_for_every_launched_process_is_refused() {
    let path = std::env::temp_dir().join("out.json");
    refused_before_the_probe(
        &hw(
            &[("RANK", "0"), ("WORLD_SIZE", "4")],
            &["--timeline", &path.display().to_string()],
        ),
        "put {rank} in the path",
    );
}

#[test]
fn a_rendezvous_folder_that_does_not_exist_is_refused_at_once() {
    let folder = std::env::temp_dir().join(format!("c10dsim-no-ids-{}", std::process::id()));
    refused_before_the_probe(
        &hw(
            &[
                ("RANK", "0"),
                ("WORLD_SIZE", "4"),
                ("C10DSIM_RENDEZVOUS_DIR", &folder.display().to_string()),
            ],
            &[],
        ),
        &format!(
            "the NCCL id folder {:?} cannot be used",
            folder.display().to_string()
        ),
    );
}

#[test]
fn a_timeout_of_zero_or_past_a_day_is_refused() {
    for timeout_ms in ["0", "86400001", "18446744073709551615"] {
        refused_before_the_probe(
            &hw(&[], &["--timeout-ms", timeout_ms, "--downscale", "model"]),
            &format!("--timeout-ms {timeout_ms}: a timeout lasts from 1 ms to a day"),
        );
    }
}

#[test]
fn a_trace_dir_that_cannot_be_one_is_refused_before_the_run() {
    let folder = std::env::temp_dir().join(format!("c10dsim-hw-trace-dir-{}", std::process::id()));
    std::fs::create_dir_all(&folder).unwrap();
    let file = folder.join("a-file");
    std::fs::write(&file, b"").unwrap();
    let file = file.display().to_string();
    refused_before_the_probe(
        &hw(&[], &["--trace-dir", &file]),
        &format!("--trace-dir {file}: it exists and is not a folder"),
    );
    refused_before_the_probe(
        &hw(&[], &["--trace-dir", "-"]),
        "`-` (standard output) cannot hold it",
    );
    // A Timeline inside the trace folder would be read by HTA as one more rank's trace.
    let dir = folder.display().to_string();
    let timeline = folder.join("out.json").display().to_string();
    refused_before_the_probe(
        &hw(&[], &["--trace-dir", &dir, "--timeline", &timeline]),
        "it would be written into --trace-dir",
    );
    std::fs::remove_dir_all(folder).unwrap();
    // Two files on standard output: refused before the GPUs run, not once they have.
    refused_before_the_probe(
        &hw(&[], &["--timeline", "-", "--trace", "-"]),
        "--trace - and --timeline - both ask for standard output",
    );
}

#[test]
fn an_output_over_the_scenario_is_refused_before_the_run() {
    let folder = std::env::temp_dir().join(format!("c10dsim-hw-over-input-{}", std::process::id()));
    std::fs::create_dir_all(&folder).unwrap();
    let copy = folder.join("scenario.toml");
    std::fs::copy(SCENARIO, &copy).unwrap();
    let copy = copy.display().to_string();
    let mut command = Command::new(env!("CARGO_BIN_EXE_c10dsim"));
    command
        .args(["hw", &copy, "--downscale", "model", "--timeline", &copy])
        .current_dir(env!("CARGO_MANIFEST_DIR"));
    for name in LAUNCH_VARS {
        command.env_remove(name);
    }
    refused_before_the_probe(
        &command.output().expect("the binary runs"),
        &format!("{copy} is also an input of this command"),
    );
    std::fs::remove_dir_all(folder).unwrap();
}

/// Parts of a launch of 4 processes (`machine.world` 4) of which ranks 1 and 3 wrote no file:
/// refused, naming them and `--partial`; with `--partial`, merged with a warning naming them.
#[test]
fn a_merge_missing_ranks_of_the_launch_is_refused_unless_partial() {
    let folder =
        std::env::temp_dir().join(format!("c10dsim-hw-merge-missing-{}", std::process::id()));
    std::fs::create_dir_all(&folder).unwrap();
    let c10dsim = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_c10dsim"))
            .args(args)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .expect("the binary runs")
    };
    let run = c10dsim(&["run", SCENARIO, "--no-fold", "--timeline", "-"]);
    assert_eq!(run.status.code(), Some(0), "{}", stderr(&run));
    let whole: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
    let mut parts = Vec::new();
    for rank in [0, 2] {
        let mut part = whole.clone();
        part["ranks"] = serde_json::json!([whole["ranks"][rank]]);
        part["machine"]["rank"] = serde_json::json!(rank.to_string());
        part["machine"]["world"] = serde_json::json!("4");
        part["machine"]["host_origin_unix_ns"] = serde_json::json!("1000");
        let path = folder
            .join(format!("part{rank}.json"))
            .display()
            .to_string();
        std::fs::write(&path, part.to_string()).unwrap();
        parts.push(path);
    }
    let merged = folder.join("merged.json").display().to_string();
    let merge = |partial: bool| {
        let mut args = vec!["hw-merge", &parts[0], &parts[1], "-o", &merged];
        if partial {
            args.push("--partial");
        }
        c10dsim(&args)
    };
    let refused = merge(false);
    let text = stderr(&refused);
    assert_eq!(refused.status.code(), Some(2), "{text}");
    assert!(
        text.contains(
            "the parts are processes of a launch of 4 (machine.world), but ranks 1,3 (2 ranks) \
             have no part: give every rank's file, or --partial to merge those given"
        ),
        "{text}"
    );
    assert!(
        !std::path::Path::new(&merged).exists(),
        "refused, yet written"
    );
    let partial = merge(true);
    let text = stderr(&partial);
    assert_eq!(partial.status.code(), Some(0), "{text}");
    assert!(
        text.contains("c10dsim: warning: ranks 1,3 (2 ranks) of the launch of 4 have no part"),
        "{text}"
    );
    let written: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&merged).unwrap()).unwrap();
    assert_eq!(written["ranks"].as_array().unwrap().len(), 2);
    std::fs::remove_dir_all(folder).unwrap();
}
