//! `c10dsim import kineto` on the traces recorded on the H200 (tests/data/torch/recorded,
//! docs/import.md): each imports into a scenario that parses and runs, whose simulated step
//! time is within the documented tolerance of the traced one; the 100 MiB-bucket what-if
//! predicted from the 25 MiB trace against the measured 100 MiB run; bad input refused.
//!
//! About 990 lines in one piece: the tests share the recorded traces and the imports of them
//! (each test reads them again); split by trace if it grows.

use crate::util::{c10dsim, stderr, stdout};
use analysis::import::kineto::{self, KinetoOptions, Trace, TraceFile};
use analysis::import::replay::{self, StepFigures};
use std::path::PathBuf;

/// docs/import.md: the simulated mean step time is within 5% of the traced one.
const STEP_TOLERANCE_PCT: f64 = 5.0;
/// Each stream's busy time is the sum of measured durations: within 1%.
const BUSY_TOLERANCE_PCT: f64 = 1.0;

fn trace_path(workload: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/torch/recorded/traces")
        .join(workload)
        .join("rank0.json")
}

fn read(workload: &str) -> Trace {
    let path = trace_path(workload);
    let text = std::fs::read_to_string(&path).unwrap();
    Trace::parse(&TraceFile {
        name: workload,
        text: &text,
    })
    .unwrap_or_else(|e| panic!("{e}"))
}

/// The imported scenario, simulated: its text and its steps' figures.
fn simulate(trace: &Trace, options: &KinetoOptions) -> (String, Vec<StepFigures>) {
    let text = kineto::import_traces(std::slice::from_ref(trace), options).unwrap();
    let scenario = sim::scenario::parse("import.toml", &text).unwrap_or_else(|e| panic!("{e}"));
    let timeline = sim::engine::simulate(&scenario);
    assert!(
        timeline.findings.is_empty(),
        "the replay ends cleanly: {:?}",
        timeline.findings
    );
    (text, replay::simulated(&timeline))
}

fn steps(figures: &[StepFigures]) -> Vec<u64> {
    figures.iter().map(|s| s.step_ns).collect()
}

fn busy(figures: &[StepFigures], stream: &str) -> Vec<u64> {
    figures
        .iter()
        .map(|s| s.busy_ns.get(stream).copied().unwrap_or(0))
        .collect()
}

/// The traced host step times of steps.jsonl (`traced_host_step_ns`), for one workload.
fn steps_jsonl(workload: &str, bucket_mb: u64) -> Vec<u64> {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/torch/recorded/steps.jsonl");
    let text = std::fs::read_to_string(path).unwrap();
    text.lines()
        .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap())
        .find(|row| row["workload"] == workload && row["bucket_mb"] == bucket_mb)
        .map(|row| {
            row["traced_host_step_ns"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_u64().unwrap())
                .collect()
        })
        .unwrap()
}

#[test]
fn every_recorded_trace_replays_within_the_tolerance() {
    for (workload, name, bucket_mb, streams) in [
        ("ddp_b25", "ddp", 25, &["default"][..]),
        ("ddp_b100", "ddp", 100, &["default"][..]),
        ("fsdp_b25", "fsdp", 25, &["default", "stream20"][..]),
    ] {
        let trace = read(workload);
        let traced = replay::traced(&trace);
        let (text, simulated) = simulate(&trace, &KinetoOptions::default());
        assert_eq!(traced.len(), 5, "{workload}: five ProfilerSteps");
        assert_eq!(simulated.len(), 5, "{workload}: five simulated steps");
        assert_eq!(
            text.matches("\n# ProfilerStep#").count(),
            5,
            "{workload}: one comment per step"
        );
        let error = replay::error_pct(&steps(&traced), &steps(&simulated)).unwrap();
        assert!(
            error.abs() <= STEP_TOLERANCE_PCT,
            "{workload}: step time {error:+.2}%"
        );
        // the probe's own clock around step() + synchronize(), outside the profiler's marks
        let probe = replay::error_pct(&steps_jsonl(name, bucket_mb), &steps(&simulated)).unwrap();
        assert!(
            probe.abs() <= STEP_TOLERANCE_PCT,
            "{workload}: step time against steps.jsonl {probe:+.2}%"
        );
        for stream in streams {
            let error = replay::error_pct(&busy(&traced, stream), &busy(&simulated, stream))
                .unwrap_or_else(|| panic!("{workload}: {stream} is busy"));
            assert!(
                error.abs() <= BUSY_TOLERANCE_PCT,
                "{workload}: {stream} busy {error:+.2}%"
            );
        }
    }
}

#[test]
fn the_100mib_bucket_predicted_from_the_25mib_trace_matches_the_measured_run() {
    let b25 = read("ddp_b25");
    let b100 = read("ddp_b100");
    let options = KinetoOptions {
        bucket_bytes: Some(100 << 20),
    };
    let (predicted_text, predicted) = simulate(&b25, &options);
    let (measured_text, _) = simulate(&b100, &KinetoOptions::default());
    // DDP's reducer closes a bucket once it holds 100 MiB: 4 × 32 MiB per bucket, 2 per step
    let all_reduces = |text: &str| text.matches("all_reduce = \"bf16_128MiB\"").count();
    assert_eq!(all_reduces(&predicted_text), 10, "{predicted_text}");
    assert_eq!(all_reduces(&measured_text), 10);
    let error = replay::error_pct(&steps(&replay::traced(&b100)), &steps(&predicted)).unwrap();
    assert!(
        error.abs() <= STEP_TOLERANCE_PCT,
        "predicted 100 MiB step {error:+.2}%"
    );
}

#[test]
fn the_command_writes_a_scenario_check_accepts_and_refuses_bad_traces() {
    let dir = std::env::temp_dir().join(format!("c10dsim-import-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let scenario = dir.join("fsdp.toml");
    let trace = trace_path("fsdp_b25");
    let written = c10dsim(&[
        "import",
        "kineto",
        trace.to_str().unwrap(),
        "-o",
        scenario.to_str().unwrap(),
        "--replay",
    ]);
    assert!(written.status.success(), "{}", stderr(&written));
    // Its note is c10dsim's, as every command's "wrote …" is.
    assert!(
        stderr(&written).starts_with(&format!("c10dsim: wrote {}", scenario.display())),
        "{}",
        stderr(&written)
    );
    assert!(
        stdout(&written).contains("| 0 | step time |"),
        "{}",
        stdout(&written)
    );
    let checked = c10dsim(&["check", scenario.to_str().unwrap()]);
    assert!(checked.status.success(), "{}", stderr(&checked));
    let to_stdout = c10dsim(&["import", "kineto", trace.to_str().unwrap(), "-o", "-"]);
    assert_eq!(
        stdout(&to_stdout),
        std::fs::read_to_string(&scenario).unwrap(),
        "same trace, same scenario"
    );

    let no_cuda = dir.join("cpu_only.json");
    std::fs::write(
        &no_cuda,
        r#"{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 1, "dur": 2}]}"#,
    )
    .unwrap();
    let refused = c10dsim(&["import", "kineto", no_cuda.to_str().unwrap(), "-o", "-"]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(
        stderr(&refused).contains("cpu_only.json: error: the trace has no CUDA activities"),
        "{}",
        stderr(&refused)
    );
    let broken = dir.join("broken.json");
    std::fs::write(&broken, "{\"traceEvents\": [\n  {\"ph\": ]}").unwrap();
    let refused = c10dsim(&["import", "kineto", broken.to_str().unwrap(), "-o", "-"]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(
        stderr(&refused).contains("broken.json:2:10: error: not a JSON trace"),
        "{}",
        stderr(&refused)
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Collectives the importer does not model are left out with a note per name on standard
/// error, how many calls; the scenario is the one without them (they were left out silently).
#[test]
fn collectives_left_out_are_noted_on_stderr_and_the_scenario_is_unchanged() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("import_left_out");
    let text = std::fs::read_to_string(trace_path("fsdp_b25")).unwrap();
    let gather = r#"{"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 1, "tid": 1, "ts": 1.0, "dur": 1.0, "args": {"Collective name": "gather", "dtype": "Float", "In msg nelems": 4, "Out msg nelems": 8, "Process Group Ranks": "[0, 1]"}},"#;
    let with_gathers = text.replacen(
        "\"traceEvents\": [",
        &format!("\"traceEvents\": [\n{gather}\n{gather}"),
        1,
    );
    let import = |folder: &str, text: &str| {
        let trace = dir.join(folder).join("rank0.json");
        std::fs::create_dir_all(trace.parent().unwrap()).unwrap();
        std::fs::write(&trace, text).unwrap();
        let imported = c10dsim(&["import", "kineto", trace.to_str().unwrap(), "-o", "-"]);
        assert!(imported.status.success(), "{}", stderr(&imported));
        imported
    };
    let plain = import("plain", &text);
    assert!(!stderr(&plain).contains("left out"), "{}", stderr(&plain));
    let noted = import("gathers", &with_gathers);
    assert!(
        stderr(&noted).contains(
            "c10dsim: left out 2 `gather` calls the importer does not model (docs/import.md)\n"
        ),
        "{}",
        stderr(&noted)
    );
    assert!(
        stdout(&noted).replace("gathers", "plain") == stdout(&plain),
        "the scenario changed"
    );
}

/// An unreadable JSON file is placed as every other error is, 1-based `file:line:column` and
/// once: import used to say `empty.json:1:0: … at line 1 column 0` where diff said `1:1`.
#[test]
fn import_and_diff_place_an_unreadable_json_file_alike() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("import_unreadable_json");
    std::fs::create_dir_all(&dir).unwrap();
    for (name, text, place) in [
        ("empty.json", "", "1:1"),
        ("newline.json", "\n", "2:1"),
        ("broken.json", "{\"traceEvents\": [\n  {\"ph\": ]}", "2:10"),
    ] {
        let file = dir.join(name);
        std::fs::write(&file, text).unwrap();
        let file = file.to_str().unwrap();
        let import = c10dsim(&["import", "kineto", file, "-o", "-"]);
        let diff = c10dsim(&["diff", file, file]);
        for (command, output) in [("import", &import), ("diff", &diff)] {
            let message = stderr(output);
            assert_eq!(output.status.code(), Some(2), "{command} {name}: {message}");
            assert!(
                message.contains(&format!("{file}:{place}: error: not a ")),
                "{command} {name}: {message}"
            );
            assert!(
                !message.contains(" at line "),
                "{command} {name}: {message}"
            );
        }
    }
}

/// torch.profiler writes `….pt.trace.json.gz` (`tensorboard_trace_handler(use_gzip=True)`):
/// it imports as the trace it holds; a cut one is named as such, not as a file that is not UTF-8.
#[test]
fn a_gzipped_trace_imports_as_the_plain_one() {
    use std::io::Write as _;
    let dir = std::env::temp_dir().join(format!("c10dsim-import-gz-{}", std::process::id()));
    let folder = dir.join("ddp_b25");
    std::fs::create_dir_all(&folder).unwrap();
    let plain = trace_path("ddp_b25");
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    encoder.write_all(&std::fs::read(&plain).unwrap()).unwrap();
    let gzipped_bytes = encoder.finish().unwrap();
    let gzipped = folder.join("rank0.json.gz");
    std::fs::write(&gzipped, &gzipped_bytes).unwrap();
    let from_plain = c10dsim(&["import", "kineto", plain.to_str().unwrap(), "-o", "-"]);
    let from_gzipped = c10dsim(&["import", "kineto", gzipped.to_str().unwrap(), "-o", "-"]);
    assert!(from_gzipped.status.success(), "{}", stderr(&from_gzipped));
    // The first line names the file read; the rest, the scenario's name included, is the same.
    let after_first_line = |text: String| text.split_once('\n').unwrap().1.to_string();
    assert_eq!(
        after_first_line(stdout(&from_gzipped)),
        after_first_line(stdout(&from_plain))
    );
    let cut = folder.join("cut.json.gz");
    std::fs::write(&cut, &gzipped_bytes[..gzipped_bytes.len() / 2]).unwrap();
    let refused = c10dsim(&["import", "kineto", cut.to_str().unwrap(), "-o", "-"]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(
        stderr(&refused).contains("cut.json.gz: error: not a readable gzip file"),
        "{}",
        stderr(&refused)
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The traces of `run --trace-dir`'s files of `scenario`, as `import kineto` reads them, and
/// the folder (removed by the caller).
fn traced_with_trace_dir(scenario: &str, tag: &str) -> (Vec<Trace>, PathBuf) {
    let dir = std::env::temp_dir().join(format!("c10dsim-import-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let run = c10dsim(&["run", scenario, "--trace-dir", dir.to_str().unwrap()]);
    assert!(run.status.success(), "{}", stderr(&run));
    let mut names: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .collect();
    names.sort();
    let traces = names
        .iter()
        .map(|path| {
            let text = std::fs::read_to_string(path).unwrap();
            let name = path.display().to_string();
            Trace::parse(&TraceFile {
                name: &name,
                text: &text,
            })
            .unwrap_or_else(|e| panic!("{e}"))
        })
        .collect();
    (traces, dir)
}

/// The imported scenario `text`, simulated: every rank's every stream is as busy in each step
/// as in the traces, within `BUSY_TOLERANCE_PCT`.
fn assert_busy_as_traced(traces: &[Trace], text: &str) {
    let scenario = sim::scenario::parse("rt.toml", text).unwrap_or_else(|e| panic!("{e}"));
    let simulated = replay::simulated(&sim::engine::simulate(&scenario));
    let traced: Vec<StepFigures> = traces.iter().flat_map(replay::traced).collect();
    assert_eq!(simulated.len(), traced.len());
    for (traced, simulated) in traced.iter().zip(&simulated) {
        assert_eq!(traced.rank, simulated.rank);
        for (stream, busy_ns) in &traced.busy_ns {
            let replayed = simulated.busy_ns.get(stream).copied().unwrap_or(0);
            let error = (replayed as f64 - *busy_ns as f64).abs() / (*busy_ns as f64).max(1.0);
            assert!(
                error <= BUSY_TOLERANCE_PCT / 100.0,
                "rank {} {}: {stream} busy {busy_ns} ns traced, {replayed} ns replayed",
                traced.rank,
                traced.step
            );
        }
    }
}

/// exp_b_stream_scope.toml runs on its own network (`nvlink_gbps = 113.3`, `alpha_us = 2.5`):
/// the import fits the network to the traced NCCL kernels, so the replay's internal stream is
/// as busy as the trace's (the default network timed its 64 MiB all_reduce at 253.7 µs against
/// the traced 903.5 µs: −71.9%). One collective size determines no α: it keeps the default,
/// and the scenario says so.
#[test]
fn a_traced_job_s_network_is_fitted_to_its_nccl_kernels() {
    let (traces, dir) = traced_with_trace_dir("scenarios/exp_b_stream_scope.toml", "net");
    assert_eq!(traces.len(), 4);
    let text = kineto::import_traces(&traces, &KinetoOptions::default()).unwrap();
    assert_busy_as_traced(&traces, &text);
    assert!(
        text.contains("one collective size only: alpha_us keeps the default"),
        "{text}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_multi_rank_trace_of_c10dsim_round_trips_as_a_folder_and_as_one_file() {
    // get_future.toml on 8 ranks, written as one torch.profiler-shaped file per rank, imported
    // back: every rank's streams are as busy as the trace says (the all_reduce's data time
    // comes from the rendezvous of the eight imported programs, not from the trace).
    let dir = std::env::temp_dir().join(format!("c10dsim-import-rt-{}", std::process::id()));
    let run = c10dsim(&[
        "run",
        "scenarios/get_future.toml",
        "--trace-dir",
        dir.to_str().unwrap(),
    ]);
    assert!(run.status.success(), "{}", stderr(&run));
    let texts: Vec<(String, String)> = (0..8)
        .map(|rank| {
            let name = format!("rank{rank}.pt.trace.json");
            let text = std::fs::read_to_string(dir.join(&name)).unwrap();
            (name, text)
        })
        .collect();
    let traces: Vec<Trace> = texts
        .iter()
        .map(|(name, text)| Trace::parse(&TraceFile { name, text }).unwrap())
        .collect();
    let text = kineto::import_traces(&traces, &KinetoOptions::default()).unwrap();
    assert_busy_as_traced(&traces, &text);
    // A job-level error of several files names them all, not the first as if it were at fault.
    let some: Vec<String> = (0..2)
        .map(|rank| {
            dir.join(format!("rank{rank}.pt.trace.json"))
                .display()
                .to_string()
        })
        .collect();
    let refused = c10dsim(&["import", "kineto", &some[0], &some[1], "-o", "-"]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(
        stderr(&refused).contains(&format!(
            "{}, {}: error: world size 8 but no trace of ranks 2-7 (6 ranks)",
            some[0], some[1]
        )),
        "{}",
        stderr(&refused)
    );
    // the same run as one file with every rank (`--trace`): one process per rank
    let merged = dir.join("all.json");
    let run = c10dsim(&[
        "run",
        "scenarios/get_future.toml",
        "--trace",
        merged.to_str().unwrap(),
    ]);
    assert!(run.status.success(), "{}", stderr(&run));
    let imported = c10dsim(&[
        "import",
        "kineto",
        merged.to_str().unwrap(),
        "-o",
        "-",
        "--replay",
    ]);
    assert!(imported.status.success(), "{}", stderr(&imported));
    let scenario = sim::scenario::parse("all.toml", &stdout(&imported)).unwrap();
    assert_eq!(scenario.cluster.ranks, 8);
    assert!(
        stderr(&imported).contains(
            "| 7 | busy: internal NCCL | 477.8 (477.8…477.8) | 477.8 (477.8…477.8) | +0.0% |"
        ),
        "{}",
        stderr(&imported)
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn traces_of_all_to_all_and_point_to_point_carry_their_dtype_and_import_back() {
    // Their NCCL kernel (ncclDevKernel_SendRecv) names no type: record_param_comms takes the
    // tensor's dtype, without which `import kineto` refused the tool's own trace.
    for scenario in ["all_to_all", "send_recv", "batch_isend_irecv"] {
        let dir =
            std::env::temp_dir().join(format!("c10dsim-import-{scenario}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let path = format!("scenarios/{scenario}.toml");
        let run = c10dsim(&["run", &path, "--trace-dir", dir.to_str().unwrap()]);
        assert!(run.status.success(), "{}", stderr(&run));
        let text = std::fs::read_to_string(dir.join("rank0.pt.trace.json")).unwrap();
        let trace: serde_json::Value = serde_json::from_str(&text).unwrap();
        let comms: Vec<&serde_json::Value> = (trace["traceEvents"].as_array().unwrap().iter())
            .filter(|e| e["name"] == "record_param_comms")
            .collect();
        assert!(!comms.is_empty(), "{scenario}: no record_param_comms");
        for event in &comms {
            assert!(event["args"]["dtype"].is_string(), "{scenario}: {event}");
            assert!(
                event["args"]["In msg nelems"].is_u64(),
                "{scenario}: {event}"
            );
        }
        if scenario == "send_recv" {
            // Rank 0's sends to rank 1 and their waits are the world's ("0"), not the pair
            // communicator's ("1"); a send records its peer as `Rank` and `Dst Rank`, a wait the
            // caller as `Rank` (ProcessGroupNCCL::send, WorkNCCL::wait).
            for event in comms {
                let args = &event["args"];
                let (rank, dst) = match args["Collective name"].as_str() {
                    Some("send") => (1, Some(1)),
                    _ => (0, None),
                };
                assert_eq!(
                    (
                        &args["Process Group Name"],
                        &args["Rank"],
                        args["Dst Rank"].as_u64()
                    ),
                    (&serde_json::json!("0"), &serde_json::json!(rank), dst),
                    "{event}"
                );
            }
        }
        let mut files: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|entry| entry.unwrap().path().to_str().unwrap().to_string())
            .collect();
        files.sort();
        let mut args = vec!["import", "kineto"];
        args.extend(files.iter().map(String::as_str));
        args.extend(["-o", "-"]);
        let imported = c10dsim(&args);
        assert!(
            imported.status.success(),
            "{scenario}: {}",
            stderr(&imported)
        );
        let imported_scenario = sim::scenario::parse("imported.toml", &stdout(&imported))
            .unwrap_or_else(|e| panic!("{scenario}: {e}"));
        if scenario == "send_recv" {
            // The importer does not model point-to-point: it leaves the calls out, whatever
            // group their events name, and makes no group of them.
            assert!(
                stderr(&imported).contains("left out 4 `send` calls")
                    && stderr(&imported).contains("left out 4 `recv` calls"),
                "{}",
                stderr(&imported)
            );
            let groups: Vec<&str> = (imported_scenario.groups.iter())
                .map(|group| group.name.as_str())
                .collect();
            assert_eq!(groups, ["world"]);
        }
        if scenario == "batch_isend_irecv" {
            // A batch records each of its sends and receives (4 ranks × 4 iterations of one
            // each), which the importer leaves out as it does a lone send's; its kernel stays.
            assert!(
                stderr(&imported).contains("left out 16 `send` calls")
                    && stderr(&imported).contains("left out 16 `recv` calls"),
                "{}",
                stderr(&imported)
            );
            assert!(
                (imported_scenario.ops.iter())
                    .any(|op| op.display_name().contains("ncclDevKernel_SendRecv")),
                "the batch's kernel is imported"
            );
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

/// What an import must give back of a rank's first iteration: its collectives (asynchronous or
/// not, and the stream current at the call), its waits (and the stream each makes wait) and its
/// synchronisations, in program order, the streams numbered as they first appear. `.item()` is
/// left out: the trace writes it as a `cpu_op` (docs/timeline-format.md says why).
fn syncs_waits_and_streams(ops: &[&sim::scenario::Op]) -> Vec<String> {
    use sim::scenario::OpKind;
    let mut numbered: Vec<usize> = Vec::new();
    let mut stream = |id: usize| {
        let at = numbered.iter().position(|&s| s == id).unwrap_or_else(|| {
            numbered.push(id);
            numbered.len() - 1
        });
        format!("s{at}")
    };
    ops.iter()
        .filter_map(|op| {
            let at = op.stream;
            Some(match &op.kind {
                OpKind::Collective {
                    collective,
                    async_op,
                    ..
                } => format!("{} async_op={async_op} on {}", collective.key(), stream(at)),
                OpKind::Wait { .. } => format!("wait on {}", stream(at)),
                OpKind::WaitEvent { .. } => format!("wait_event on {}", stream(at)),
                OpKind::EventSync { .. } => "event_sync".to_string(),
                OpKind::StreamSync { stream: synced } => {
                    format!("stream_sync {}", stream(*synced))
                }
                OpKind::DeviceSync => "device_sync".to_string(),
                _ => return None,
            })
        })
        .collect()
}

/// `run --trace-dir`'s files of a catalogue scenario, imported, give back the scenario's
/// synchronisations, waits and streams (rank 0, first iteration): the trace writes them as
/// torch.profiler does (`cuda_runtime` calls, `cuda_sync` stream waits), which the importer
/// reads as it reads a real trace.
#[test]
fn a_simulated_trace_imports_with_its_syncs_waits_and_streams() {
    for name in ["exp_b_stream_scope", "overlap_bench", "straggler"] {
        let file = format!("{name}.toml");
        let original = crate::util::load(&file, &["repeat=1", "warmup=0"]);
        let timeline = sim::engine::simulate(&original);
        let writer = analysis::trace::RankTraces::new(&timeline);
        let texts: Vec<(String, String)> = writer
            .files()
            .map(|(position, file_name)| {
                let mut out = Vec::new();
                writer.write(position, &mut out).unwrap();
                (file_name, String::from_utf8(out).unwrap())
            })
            .collect();
        let traces: Vec<Trace> = texts
            .iter()
            .map(|(file_name, text)| {
                Trace::parse(&TraceFile {
                    name: file_name,
                    text,
                })
                .unwrap_or_else(|e| panic!("{e}"))
            })
            .collect();
        let text = kineto::import_traces(&traces, &KinetoOptions::default()).unwrap();
        let imported = sim::scenario::parse("import.toml", &text).unwrap_or_else(|e| panic!("{e}"));
        let of_rank_0 = |op: &&sim::scenario::Op| op.ranks.as_ref().is_none_or(|r| r.contains(&0));
        let original_ops: Vec<&sim::scenario::Op> = original.ops.iter().filter(of_rank_0).collect();
        let imported_ops: Vec<&sim::scenario::Op> = imported
            .ops
            .iter()
            .filter(|op| op.ranks.as_deref() == Some(&[0]))
            .collect();
        assert_eq!(
            syncs_waits_and_streams(&imported_ops),
            syncs_waits_and_streams(&original_ops),
            "{name}:\n{text}"
        );
    }
}

/// The per-rank traces `run --trace-dir` writes of `scenario`, read back as `import kineto`
/// reads them.
fn rank_traces_of(scenario: &sim::scenario::Scenario) -> Vec<Trace> {
    let timeline = sim::engine::simulate(scenario);
    let writer = analysis::trace::RankTraces::new(&timeline);
    writer
        .files()
        .map(|(position, file_name)| {
            let mut out = Vec::new();
            writer.write(position, &mut out).unwrap();
            let text = String::from_utf8(out).unwrap();
            Trace::parse(&TraceFile {
                name: &file_name,
                text: &text,
            })
            .unwrap_or_else(|e| panic!("{e}"))
        })
        .collect()
}

/// Two process groups on the same ranks are two communicators, each with its internal stream
/// (R9), and a group over every rank beside the default one is not the world: the import keeps
/// them apart by `record_param_comms`'s `Process Group Name` (it joined them by their ranks,
/// and the replay ran their collectives one after the other on one stream: +68% busy time).
#[test]
fn process_groups_on_the_same_ranks_import_as_separate_groups() {
    let text = r#"
name = "groups_on_same_ranks"
[cluster]
ranks = 4
[groups.world]
eager_init = true
[groups.a]
ranks = [0, 1]
eager_init = true
[groups.b]
ranks = [0, 1]
eager_init = true
[groups.everyone]
ranks = [0, 1, 2, 3]
eager_init = true
[tensors]
x = "64MiB"
[[op]]
label = "ar_a"
all_reduce = "x"
group = "a"
async_op = true
work = "wa"
[[op]]
label = "ar_b"
all_reduce = "x"
group = "b"
async_op = true
work = "wb"
[[op]]
label = "ar_everyone"
all_reduce = "x"
group = "everyone"
async_op = true
work = "we"
[[op]]
label = "ar_world"
all_reduce = "x"
async_op = true
work = "ww"
[[op]]
wait = "wa"
ranks = [0, 1]
[[op]]
wait = "wb"
ranks = [0, 1]
[[op]]
wait = "we"
[[op]]
wait = "ww"
[[op]]
stream_sync = "current"
"#;
    let original = sim::scenario::parse("groups.toml", text).unwrap_or_else(|e| panic!("{e}"));
    let traces = rank_traces_of(&original);
    let imported = kineto::import_traces(&traces, &KinetoOptions::default()).unwrap();
    for group in [
        "[groups.ranks_0_1_pg1]\nranks = [0, 1]",
        "[groups.ranks_0_1_pg2]\nranks = [0, 1]",
        "[groups.world_pg3]\nranks = [0, 1, 2, 3]",
    ] {
        assert!(imported.contains(group), "{group}:\n{imported}");
    }
    let scenario = sim::scenario::parse("import.toml", &imported).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(scenario.groups.len(), 4, "{imported}");
    let simulated = replay::simulated(&sim::engine::simulate(&scenario));
    let traced: Vec<StepFigures> = traces.iter().flat_map(replay::traced).collect();
    assert_eq!(simulated.len(), traced.len());
    for (traced, simulated) in traced.iter().zip(&simulated) {
        for (stream, busy_ns) in &traced.busy_ns {
            let replayed = simulated.busy_ns.get(stream).copied().unwrap_or(0);
            let error = (replayed as f64 - *busy_ns as f64).abs() / (*busy_ns as f64).max(1.0);
            assert!(
                error <= BUSY_TOLERANCE_PCT / 100.0,
                "rank {}: {stream} busy {busy_ns} ns traced, {replayed} ns replayed",
                traced.rank
            );
        }
    }
}

/// A trace recorded mid-job has each group's `Seq` far above 1 (the profiler started at step
/// 100): the import writes the group's `first_seq_num`, so that the replay's Works, watchdog
/// and Flight Recorder name the job's SeqNums (it numbered from 1 again).
#[test]
fn a_trace_recorded_mid_job_replays_with_the_job_s_seq_nums() {
    let text = r#"
name = "mid_job"
[cluster]
ranks = 2
[groups.world]
eager_init = true
first_seq_num = 101
[groups.tp]
ranks = [0, 1]
eager_init = true
first_seq_num = 7
[groups.fresh]
ranks = [0, 1]
eager_init = true
[tensors]
x = "4MiB"
[[op]]
all_reduce = "x"
[[op]]
all_reduce = "x"
group = "tp"
[[op]]
all_reduce = "x"
group = "fresh"
[[op]]
all_gather = "x"
"#;
    let original = sim::scenario::parse("mid_job.toml", text).unwrap_or_else(|e| panic!("{e}"));
    let imported =
        kineto::import_traces(&rank_traces_of(&original), &KinetoOptions::default()).unwrap();
    let replay = sim::scenario::parse("import.toml", &imported).unwrap_or_else(|e| panic!("{e}"));
    let first_seq_nums: Vec<u64> = replay.groups.iter().map(|g| g.first_seq_num).collect();
    assert_eq!(first_seq_nums, [101, 7, 1], "{imported}");
    let seq_nums = |scenario: &sim::scenario::Scenario| -> Vec<Vec<u64>> {
        let timeline = sim::engine::simulate(scenario);
        (timeline.ranks.iter())
            .map(|rank| rank.collectives.iter().map(|c| c.seq_num()).collect())
            .collect()
    };
    assert_eq!(seq_nums(&replay), seq_nums(&original), "{imported}");
    assert_eq!(seq_nums(&replay)[0], [101, 7, 1, 102]);
}

/// Each rank's GPU activities from its second step on (the first creates the communicators), as
/// starts after that step's start, in order: of a trace, and of its imported replay (the
/// `step_2` mark on).
fn starts_from_step_2(
    traces: &[Trace],
    timeline: &sim::timeline::Timeline,
) -> Vec<(Vec<i64>, Vec<i64>)> {
    traces
        .iter()
        .zip(&timeline.ranks)
        .map(|(trace, rank)| {
            let from_ns = trace.steps[1].start_ns;
            let mut traced: Vec<i64> = (trace.gpu.iter())
                .filter(|op| op.start_ns >= from_ns)
                .map(|op| op.start_ns - from_ns)
                .collect();
            traced.sort_unstable();
            let step_2 = format!("r{}_step_2", rank.rank);
            let mark = (rank.marks.iter())
                .find(|m| timeline.scenario.marks[m.mark as usize] == step_2)
                .expect("the replay marks its steps");
            let mut replayed: Vec<i64> = (rank.kernels.iter())
                .filter(|k| k.start_ns >= mark.host_ns)
                .map(|k| (k.start_ns - mark.host_ns) as i64)
                .collect();
            replayed.sort_unstable();
            (traced, replayed)
        })
        .collect()
}

/// A replayed GPU activity starts within this of the traced one, from the second step on (the
/// host's own time after a synchronisation returns, which the simulator re-times, is lost at
/// each one: a few µs per step).
const START_TOLERANCE_NS: i64 = 20_000;

/// c10dsim's own traces of collectives, imported and replayed, start every kernel when the
/// trace did: the import issues a collective at the launch call inside its
/// `record_param_comms` and takes NCCL's launch latency from the collectives' own launches.
/// It issued them at the call's start with the latency of other kernels (and a collective of
/// no host cost lost even that), so that on all_reduce, barrier, all_reduce the kernels ran up
/// to 79 µs early and the step, whose barrier waits for them, was 21% short; coalescing's
/// kernels up to 51 µs early.
#[test]
fn collectives_replay_at_their_traced_launch() {
    let all_reduce_barrier = r#"
name = "all_reduce_barrier"
repeat = 3
warmup = 1
[cluster]
ranks = 2
[tensors]
x = "16MiB"
[[op]]
all_reduce = "x"
[[op]]
barrier = true
[[op]]
all_reduce = "x"
"#;
    let scenarios = [
        sim::scenario::parse("all_reduce_barrier.toml", all_reduce_barrier).unwrap(),
        crate::util::load("overlap_bench.toml", &["repeat=3", "warmup=1"]),
        crate::util::load("coalescing.toml", &[]),
    ];
    for original in &scenarios {
        let name = &original.name;
        let traces = rank_traces_of(original);
        let text = kineto::import_traces(&traces, &KinetoOptions::default()).unwrap();
        let scenario = sim::scenario::parse("import.toml", &text).unwrap_or_else(|e| panic!("{e}"));
        let timeline = sim::engine::simulate(&scenario);
        // the steps after the first, which creates the communicators
        let later = |figures: Vec<StepFigures>| -> Vec<u64> {
            (figures.iter())
                .filter(|s| !s.step.ends_with("#0") && !s.step.ends_with("step_1"))
                .map(|s| s.step_ns)
                .collect()
        };
        let traced = later(traces.iter().flat_map(replay::traced).collect());
        let simulated = later(replay::simulated(&timeline));
        assert_eq!(traced.len(), simulated.len(), "{name}");
        let error = replay::error_pct(&traced, &simulated).unwrap();
        assert!(
            error.abs() <= STEP_TOLERANCE_PCT,
            "{name}: step time {error:+.2}%"
        );
        for (rank, (traced, replayed)) in starts_from_step_2(&traces, &timeline).iter().enumerate()
        {
            assert_eq!(traced.len(), replayed.len(), "{name} rank {rank}");
            for (t, r) in traced.iter().zip(replayed) {
                assert!(
                    (r - t).abs() <= START_TOLERANCE_NS,
                    "{name} rank {rank}: a GPU activity {t} ns after step 2's start in the trace, {r} ns in the replay"
                );
            }
        }
    }
}

/// The profiler lists at most 30 of a group's ranks (`"[1, 3, …, 59, ...]"`, PyTorch ≤ 2.4
/// and c10dsim's traces; `"[1, 3, …, 57, ..., 63]"`, later PyTorch): a 64-rank job's two
/// 32-rank data-parallel groups import as those groups, from the listed ranks' stride and
/// `Group size` (they imported as the world, and the replay of a clean job hung).
#[test]
fn groups_of_over_30_ranks_import_from_the_profiler_s_cut_rank_list() {
    let even: Vec<String> = (0..64).step_by(2).map(|r: u32| r.to_string()).collect();
    let odd: Vec<String> = (1..64).step_by(2).map(|r: u32| r.to_string()).collect();
    let (even, odd) = (even.join(", "), odd.join(", "));
    let text = format!(
        r#"
name = "dp64"
[cluster]
ranks = 64
[groups.world]
eager_init = true
[groups.even]
ranks = [{even}]
eager_init = true
[groups.odd]
ranks = [{odd}]
eager_init = true
[tensors]
x = "4MiB"
[[op]]
ranks = [{even}]
all_reduce = "x"
group = "even"
[[op]]
ranks = [{odd}]
all_reduce = "x"
group = "odd"
[[op]]
ranks = [{odd}]
all_reduce = "x"
group = "odd"
[[op]]
all_reduce = "x"
[[op]]
device_sync = true
"#
    );
    let original = sim::scenario::parse("dp64.toml", &text).unwrap_or_else(|e| panic!("{e}"));
    let imported =
        kineto::import_traces(&rank_traces_of(&original), &KinetoOptions::default()).unwrap();
    let replay = sim::scenario::parse("import.toml", &imported).unwrap_or_else(|e| panic!("{e}"));
    let group_ranks: Vec<(String, usize)> = (replay.groups.iter())
        .map(|group| (group.name.clone(), group.ranks.len()))
        .collect();
    assert_eq!(
        group_ranks,
        [
            ("world".to_string(), 64),
            ("ranks_0_2_4_6_8_10_12_14_16_18_20_22_24_26_28_30_32_34_36_38_40_42_44_46_48_50_52_54_56_58_60_62".to_string(), 32),
            ("ranks_1_3_5_7_9_11_13_15_17_19_21_23_25_27_29_31_33_35_37_39_41_43_45_47_49_51_53_55_57_59_61_63".to_string(), 32),
        ]
    );
    let timeline = sim::engine::simulate(&replay);
    assert!(timeline.findings.is_empty(), "{:?}", timeline.findings);
}

/// `--replay-against TRACE.json…` takes every trace of the job it names, as the docs write it
/// (it took one, the rest became traces to import: "two traces of rank 1"), and they must be
/// one whole job of the imported world size (rank 0 of 8 was compared with a one-rank job).
#[test]
fn replay_against_takes_a_whole_job_of_the_imported_world_size() {
    let (_, dir) = traced_with_trace_dir("scenarios/get_future.toml", "against");
    let mut job: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|entry| entry.unwrap().path().display().to_string())
        .collect();
    job.sort();
    let job: Vec<&str> = job.iter().map(String::as_str).collect();
    let import_against = |imported: &[&str], against: &[&str]| {
        let mut args = vec!["import", "kineto"];
        args.extend(imported);
        args.extend(["-o", "-", "--replay", "--replay-against"]);
        args.extend(against);
        c10dsim(&args)
    };
    let whole = import_against(&job, &job);
    assert!(whole.status.success(), "{}", stderr(&whole));
    assert!(
        stderr(&whole).contains("| 7 | step time |"),
        "{}",
        stderr(&whole)
    );
    let one_rank = import_against(&job, &job[..1]);
    crate::util::refused(
        &one_rank,
        "error: --replay-against: world size 8 but no trace of ranks 1-7 (7 ranks)",
    );
    let b25 = trace_path("ddp_b25");
    let other_world = import_against(&[b25.to_str().unwrap()], &job);
    crate::util::refused(
        &other_world,
        "error: --replay-against: traces of world size 8, the imported ones of world size 1",
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// PyTorch 2.11 lists no ranks for a group of unevenly spaced ranks or of a lone rank
/// (`Process Group Ranks` `"[]"`, no `Global rank stride`; tests/data/torch/probes/
/// group_ranks_args.txt), as c10dsim's traces do: the import takes a lone rank from its
/// `Global rank start`, and an uneven group's ranks from the traces that record its
/// `Process Group Name`, not the world (it read both as the world's).
#[test]
fn groups_whose_traces_list_no_ranks_import_with_their_ranks() {
    let text = r#"
name = "unlisted_groups"
[cluster]
ranks = 4
[groups.uneven]
ranks = [0, 1, 3]
[groups.alone]
ranks = [2]
[tensors]
x = "4MiB"
[[op]]
all_reduce = "x"
[[op]]
ranks = [0, 1, 3]
all_reduce = "x"
group = "uneven"
[[op]]
ranks = [2]
all_reduce = "x"
group = "alone"
"#;
    let original = sim::scenario::parse("unlisted.toml", text).unwrap_or_else(|e| panic!("{e}"));
    let traces = rank_traces_of(&original);
    let imported = kineto::import_traces(&traces, &KinetoOptions::default()).unwrap();
    for group in [
        "[groups.ranks_0_1_3]\nranks = [0, 1, 3]",
        "[groups.ranks_2]\nranks = [2]",
    ] {
        assert!(imported.contains(group), "{group}:\n{imported}");
    }
}
