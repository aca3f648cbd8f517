//! Flight Recorder dumps through the binary (docs/flight-recorder.md): a simulated hang writes
//! them, `import flight-recorder` reads them back and names the culprit the simulator named;
//! the dump PyTorch 2.11 wrote on the H200 imports and replays to its timeout; bad folders exit
//! 2; and, where PyTorch's analyser is importable, torchfrtrace names the same culprit.
//!
//! About 850 lines: one test per dump the import must read or refuse, each with its own small
//! scenario; split by the import's input (simulated, PyTorch's, malformed) if it grows.

use crate::util::{c10dsim, skipped, stderr, stdout};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A fresh scratch folder for one test.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("c10dsim-fr-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `c10dsim run SCENARIO --fr-dir DIR` with short timeouts; its standard output.
fn dump(scenario: &str, dir: &Path) -> String {
    let output = c10dsim(&[
        "run",
        scenario,
        "--set",
        "groups.world.timeout_s=1",
        "--set",
        "env.TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC=100",
        "--fr-dir",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("Flight Recorder dump"),
        "{}",
        stderr(&output)
    );
    stdout(&output)
}

/// `c10dsim import flight-recorder DIR -o OUT`, which must exit with `code`.
fn import_exiting(dir: &Path, out: &Path, code: i32) -> std::process::Output {
    let output = c10dsim(&[
        "import",
        "flight-recorder",
        dir.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(output.status.code(), Some(code), "{}", stderr(&output));
    output
}

/// `c10dsim import flight-recorder DIR -o OUT`: its standard output (the verdict).
fn import(dir: &Path, out: &Path) -> String {
    stdout(&import_exiting(dir, out, 0))
}

#[test]
fn a_simulated_hang_s_dumps_import_to_the_culprit_the_simulator_named() {
    let dir = scratch("hang");
    let dumps = dir.join("dumps");
    let report = dump("scenarios/hang_10min.toml", &dumps);
    let named = "rank 3 never joined collective 1 (ALLREDUCE, world)";
    assert!(report.contains(&format!("Diagnosis: {named}")), "{report}");
    let names: Vec<String> = (0..4).map(|r| format!("nccl_trace_rank_{r}")).collect();
    for name in &names {
        assert!(dumps.join(name).is_file(), "{name}");
    }
    let scenario = dir.join("imported.toml");
    let verdict = import(&dumps, &scenario);
    // The one verdict, from the watchdogs of the three waiting ranks (one folded record): rank
    // 3's `pg_status` (-1, none enqueued) names no collective the dumps lack, since the others'
    // dumps hold SeqNum 1.
    let verdicts: Vec<&str> = verdict
        .lines()
        .filter(|l| l.starts_with("verdict:"))
        .collect();
    assert_eq!(
        verdicts,
        [format!(
            "verdict: desync report (ranks 0-2 (3 ranks)'s watchdog): {named}; ranks 0-2 (3 ranks) waiting"
        )],
        "{verdict}"
    );
    // Same run, same bytes; same dumps, same scenario.
    let again = dir.join("again");
    dump("scenarios/hang_10min.toml", &again);
    for name in &names {
        assert_eq!(
            std::fs::read(dumps.join(name)).unwrap(),
            std::fs::read(again.join(name)).unwrap()
        );
    }
    let second = dir.join("second.toml");
    import(&dumps, &second);
    assert_eq!(
        std::fs::read_to_string(&scenario).unwrap(),
        std::fs::read_to_string(&second).unwrap()
    );
    // The imported scenario runs on its own and hangs the same way.
    let output = c10dsim(&["run", scenario.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stdout(&output).contains(&format!("Diagnosis: {named}")),
        "{}",
        stdout(&output)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The keys (and their Python types where both are set) of a dump, as `python3`'s own pickle
/// reads it: the top level, `pg_config`'s and `pg_status`'s groups, the first entry and frame.
fn shape(path: &Path) -> Option<String> {
    const SHAPE: &str = "import pickle, sys\n\
        d = pickle.load(open(sys.argv[1], 'rb'))\n\
        g = lambda x: sorted((k, type(v).__name__) for k, v in x.items() if v is not None)\n\
        print(g(d)); print(g(next(iter(d['pg_config'].values()))))\n\
        print(g(next(iter(d['pg_status'].values()))))\n\
        e = d['entries'][0]; print(sorted(e)); print(g(e['frames'][0]))\n\
        print(sorted((k, type(v).__name__) for k, v in e.items() if k not in ('time_discovered_started_ns', 'time_discovered_completed_ns')))";
    let output = Command::new("python3")
        .args(["-c", SHAPE, path.to_str().unwrap()])
        .output()
        .ok()?;
    assert!(output.status.success(), "{}", stderr(&output));
    Some(stdout(&output))
}

#[test]
fn python_reads_the_simulator_s_dumps_with_the_keys_and_types_of_pytorch_s() {
    let dir = scratch("shape");
    dump("scenarios/mismatch.toml", &dir);
    let (Some(ours), Some(theirs)) = (
        shape(&dir.join("nccl_trace_rank_0")),
        shape(Path::new("tests/data/torch/recorded/fr/timeout_rank0")),
    ) else {
        skipped(
            "python_reads_the_simulator_s_dumps_with_the_keys_and_types_of_pytorch_s: no python3",
        );
        return;
    };
    assert_eq!(ours, theirs);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_mismatch_s_dumps_import_to_the_rank_that_issued_another_op() {
    let dir = scratch("mismatch");
    let dumps = dir.join("dumps");
    dump("scenarios/mismatch.toml", &dumps);
    let scenario = dir.join("imported.toml");
    let verdict = import(&dumps, &scenario);
    assert!(
        verdict.contains("ranks disagree on the op at 1 (world)"),
        "{verdict}"
    );
    assert!(
        verdict.contains("rank 1 issued _ALLGATHER_BASE of 4MiB"),
        "{verdict}"
    );
    let text = std::fs::read_to_string(&scenario).unwrap();
    assert!(
        text.contains("kind = \"mismatch\"\ncollective = \"all_gather\""),
        "{text}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Four ranks, a tensor-parallel group of ranks 0 and 1 whose all_gather rank 1 issues at half
/// the size, between two world all_reduces.
const SUBGROUP: &str = "[cluster]\nranks = 4\n[groups.world]\neager_init = true\ntimeout_s = 2\n\
    [groups.tp]\nranks = [0, 1]\neager_init = true\ntimeout_s = 1\n\
    [tensors]\ng = { size = \"8MiB\", dtype = \"bf16\" }\n\
    [[op]]\nlabel = \"ar\"\nall_reduce = \"g\"\n\
    [[op]]\nlabel = \"tp_ag\"\nall_gather = \"g\"\ngroup = \"tp\"\n\
    [[op]]\nlabel = \"ar2\"\nall_reduce = \"g\"\n[[op]]\ndevice_sync = true\n\
    [[fault]]\nranks = [1]\nat = \"tp_ag\"\nkind = \"mismatch\"\nsize = \"4MiB\"\n";

/// The subgroup scenario's dumps in `dir/dumps`.
fn subgroup_dumps(dir: &Path) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let scenario = dir.join("subgroup.toml");
    std::fs::write(&scenario, SUBGROUP).unwrap();
    let dumps = dir.join("dumps");
    let output = c10dsim(&[
        "run",
        scenario.to_str().unwrap(),
        "--fr-dir",
        dumps.to_str().unwrap(),
    ]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    dumps
}

#[test]
fn a_subgroup_s_size_mismatch_imports_to_that_group_and_size() {
    let dir = scratch("subgroup");
    let dumps = subgroup_dumps(&dir);
    let scenario = dir.join("imported.toml");
    let verdict = import(&dumps, &scenario);
    assert!(
        verdict.contains("ranks disagree on the op at 1 (tp)"),
        "{verdict}"
    );
    assert!(
        verdict.contains("rank 0 issued _ALLGATHER_BASE of 8MiB")
            && verdict.contains("rank 1 issued _ALLGATHER_BASE of 4MiB"),
        "{verdict}"
    );
    let text = std::fs::read_to_string(&scenario).unwrap();
    assert!(
        text.contains("[groups.tp]\nranks = [0, 1]\neager_init = true\ntimeout_s = 1 "),
        "{text}"
    );
    assert!(
        text.contains("all_gather = \"bf16_8MiB\"\ngroup = \"tp\""),
        "{text}"
    );
    assert!(
        text.contains("kind = \"mismatch\"\nsize = \"4MiB\""),
        "{text}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_dump_under_another_rank_s_name_exits_2_naming_the_file() {
    let dir = scratch("renamed");
    let dumps = subgroup_dumps(&dir);
    let out = dir.join("imported.toml");
    // Ranks 1 and 2 swapped: rank 1's dump (of `tp`, ranks 0 and 1) named rank 2's.
    let file = |rank: u32| dumps.join(format!("nccl_trace_rank_{rank}"));
    std::fs::rename(file(1), dir.join("one")).unwrap();
    std::fs::rename(file(2), file(1)).unwrap();
    std::fs::rename(dir.join("one"), file(2)).unwrap();
    let message = stderr(&import_exiting(&dumps, &out, 2));
    assert!(
        message.contains(&format!(
            "{}: the file name says rank 2, but the dump's process group \"1\" (tp) lists ranks [0, 1], without it",
            file(2).display()
        )),
        "{message}"
    );
    assert!(!out.exists());
    let _ = std::fs::remove_dir_all(&dir);
}

/// Two ranks all_reduce 4 MiB of f32; rank 1 issues the same tensor as bf16 (as many elements,
/// half the bytes).
const DTYPE_MISMATCH: &str = "[cluster]\nranks = 2\n[groups.world]\neager_init = true\n\
    [tensors]\ng = \"4MiB\"\n[[op]]\nlabel = \"ar\"\nall_reduce = \"g\"\n[[op]]\ndevice_sync = true\n\
    [[fault]]\nranks = [1]\nat = \"ar\"\nkind = \"mismatch\"\ndtype = \"bf16\"\n";

/// The dtype mismatch's dumps in `dir/dumps`.
fn dtype_dumps(dir: &Path) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let scenario = dir.join("dtype.toml");
    std::fs::write(&scenario, DTYPE_MISMATCH).unwrap();
    let dumps = dir.join("dumps");
    let report = dump(scenario.to_str().unwrap(), &dumps);
    assert!(
        report.contains("rank 0 issued ALLREDUCE of 4MiB f32")
            && report.contains("rank 1 issued ALLREDUCE of 2MiB bf16"),
        "{report}"
    );
    dumps
}

#[test]
fn a_dtype_mismatch_s_dumps_import_to_that_dtype_not_to_a_size() {
    let dir = scratch("dtype");
    let dumps = dtype_dumps(&dir);
    let scenario = dir.join("imported.toml");
    let verdict = import(&dumps, &scenario);
    assert!(
        verdict.contains("ranks disagree on the op at 1 (world)"),
        "{verdict}"
    );
    assert!(
        verdict.contains("rank 0 issued ALLREDUCE of 4MiB f32")
            && verdict.contains("rank 1 issued ALLREDUCE of 2MiB bf16"),
        "{verdict}"
    );
    let text = std::fs::read_to_string(&scenario).unwrap();
    assert!(
        text.ends_with("kind = \"mismatch\"\ndtype = \"bf16\"\n"),
        "{text}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Two ranks all_reduce a `_coalescing_manager` block of three 4 KiB tensors; rank 1 issues
/// the block as bf16.
const BLOCK_MISMATCH: &str = "[cluster]\nranks = 2\n[groups.world]\neager_init = true\n\
    [tensors]\ng = { size = \"4KiB\", count = 3 }\n\
    [[op]]\nlabel = \"block\"\nall_reduce = \"g\"\ncoalesce = true\n[[op]]\ndevice_sync = true\n\
    [[fault]]\nranks = [1]\nat = \"block\"\nkind = \"mismatch\"\ndtype = \"bf16\"\n";

#[test]
fn a_coalescing_block_s_dumps_list_its_tensors_and_import_to_one_collective_of_them_all() {
    let dir = scratch("block");
    let scenario = dir.join("block.toml");
    std::fs::write(&scenario, BLOCK_MISMATCH).unwrap();
    let dumps = dir.join("dumps");
    let report = dump(scenario.to_str().unwrap(), &dumps);
    assert!(
        report.contains("rank 0 issued ALLREDUCE of 12KiB f32")
            && report.contains("rank 1 issued ALLREDUCE of 6KiB bf16"),
        "{report}"
    );
    let imported = dir.join("imported.toml");
    let verdict = import(&dumps, &imported);
    assert!(
        verdict.contains("rank 0 issued ALLREDUCE of 12KiB f32")
            && verdict.contains("rank 1 issued ALLREDUCE of 6KiB bf16"),
        "{verdict}"
    );
    let text = std::fs::read_to_string(&imported).unwrap();
    // One shape and dtype per tensor of the block, as PyTorch lists them; one collective of
    // their total size.
    assert!(
        text.contains(
            "nccl:allreduce_coalesced [[1024], [1024], [1024]] [\"Float\", \"Float\", \"Float\"]"
        ),
        "{text}"
    );
    assert!(text.contains("all_reduce = \"f32_12KiB\""), "{text}");
    assert!(
        text.ends_with("kind = \"mismatch\"\ndtype = \"bf16\"\n"),
        "{text}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_scenario_s_dump_prefix_places_the_files() {
    let dir = scratch("prefix");
    let prefix = format!("{}/job/fr_", dir.display());
    let output = c10dsim(&[
        "run",
        "scenarios/mismatch.toml",
        "--set",
        "groups.world.timeout_s=1",
        "--set",
        &format!("env.TORCH_FR_DUMP_TEMP_FILE={prefix}"),
    ]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(dir.join("job/fr_0").is_file() && dir.join("job/fr_1").is_file());
    // --fr-dir keeps the prefix's file name.
    let other = dir.join("other");
    let output = c10dsim(&[
        "run",
        "scenarios/mismatch.toml",
        "--set",
        "groups.world.timeout_s=1",
        "--set",
        &format!("env.TORCH_FR_DUMP_TEMP_FILE={prefix}"),
        "--fr-dir",
        other.to_str().unwrap(),
    ]);
    assert_eq!(output.status.code(), Some(1));
    assert!(other.join("fr_1").is_file());
    // A run where no watchdog fired writes nothing, and says so.
    let output = c10dsim(&[
        "run",
        "scenarios/straggler.toml",
        "--fr-dir",
        other.to_str().unwrap(),
    ]);
    assert!(
        stderr(&output).contains("no rank dumped"),
        "{}",
        stderr(&output)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The note of what `--fr-dir` wrote names one dump once, several as a range: one dump was
/// shown as the range from itself to itself (`(d/nccl_trace_rank_0 … d/nccl_trace_rank_0)`).
#[test]
fn the_note_of_the_dumps_written_names_one_dump_once() {
    let dir = scratch("one_dump");
    let output = c10dsim(&[
        "run",
        "scenarios/timeout_dump.toml",
        "--fr-dir",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let one = dir.join("nccl_trace_rank_0");
    assert!(one.is_file());
    assert!(
        stderr(&output).contains(&format!(
            "wrote 1 Flight Recorder dump ({})\n",
            one.display()
        )),
        "{}",
        stderr(&output)
    );
    let output = c10dsim(&[
        "run",
        "scenarios/mismatch.toml",
        "--set",
        "groups.world.timeout_s=1",
        "--fr-dir",
        dir.to_str().unwrap(),
    ]);
    assert!(
        stderr(&output).contains(&format!(
            "wrote 2 Flight Recorder dumps ({} … {})",
            one.display(),
            dir.join("nccl_trace_rank_1").display()
        )),
        "{}",
        stderr(&output)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_h200_dump_imports_and_replays_to_its_timeout() {
    let output = c10dsim(&[
        "import",
        "flight-recorder",
        "tests/data/torch/recorded/fr",
        "-o",
        "-",
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let text = stdout(&output);
    assert!(
        text.starts_with("# Imported from the Flight Recorder dumps"),
        "{text}"
    );
    assert!(text.contains("label = \"all_reduce_47\""), "{text}");
    assert!(
        stderr(&output).contains("verdict: desync report (rank 0's watchdog): every rank enqueued collective 47; rank 0 has not started its kernel"),
        "{}",
        stderr(&output)
    );
    let dir = scratch("h200");
    let scenario = dir.join("h200.toml");
    std::fs::write(&scenario, &text).unwrap();
    let run = c10dsim(&["run", scenario.to_str().unwrap()]);
    assert_eq!(run.status.code(), Some(1));
    // PyTorch: "WorkNCCL(SeqNum=47, OpType=ALLREDUCE, NumelIn=1048576, …) ran for 1052
    // milliseconds" (tests/data/torch/recorded/fr/run.log).
    assert!(
        stdout(&run).contains("WorkNCCL(SeqNum=47, OpType=ALLREDUCE, NumelIn=1048576, NumelOut=1048576, Timeout(ms)=1000) ran for 10"),
        "{}",
        stdout(&run)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn folders_that_hold_no_readable_dumps_exit_2_naming_the_file() {
    let dir = scratch("bad");
    let out = dir.join("out.toml");
    let run = |folder: &Path| {
        let output = c10dsim(&[
            "import",
            "flight-recorder",
            folder.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
        ]);
        assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
        stderr(&output)
    };
    assert!(run(&dir.join("absent")).contains("cannot read the folder"));
    assert!(run(&dir).contains("no Flight Recorder dumps"));
    std::fs::write(dir.join("nccl_trace_rank_0"), "{\"not\": \"a pickle\"}").unwrap();
    let message = run(&dir);
    assert!(
        message.contains("nccl_trace_rank_0: not a Flight Recorder dump"),
        "{message}"
    );
    let real = std::fs::read("tests/data/torch/recorded/fr/timeout_rank0").unwrap();
    let at = real.windows(4).position(|w| w == b"2.10").unwrap();
    let mut newer = real.clone();
    newer[at..at + 4].copy_from_slice(b"2.99");
    std::fs::write(dir.join("nccl_trace_rank_0"), newer).unwrap();
    let message = run(&dir);
    assert!(
        message.contains("version \"2.99\" is not supported; supported: 2.10 (PyTorch 2.11)"),
        "{message}"
    );
    std::fs::write(dir.join("nccl_trace_rank_0"), &real[..real.len() / 2]).unwrap();
    assert!(run(&dir).contains("not a readable pickle: at byte"));
    std::fs::write(dir.join("nccl_trace_rank_0"), &real).unwrap();
    std::fs::write(dir.join("other_1"), &real).unwrap();
    assert!(run(&dir).contains("several prefixes"));
    assert!(!out.exists());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn two_files_of_one_rank_or_a_rank_out_of_range_exit_2_naming_them() {
    let dir = scratch("ranks");
    let out = dir.join("out.toml");
    let real = std::fs::read("tests/data/torch/recorded/fr/timeout_rank0").unwrap();
    std::fs::write(dir.join("fr_0"), &real).unwrap();
    std::fs::write(dir.join("fr_00"), &real).unwrap();
    let run = || stderr(&import_exiting(&dir, &out, 2));
    let message = run();
    assert!(
        message.contains("two dumps of rank 0 in ")
            && message.contains("fr_0 and ")
            && message.contains("fr_00 (a leading zero"),
        "{message}"
    );
    std::fs::remove_file(dir.join("fr_00")).unwrap();
    std::fs::write(dir.join("fr_99999999999"), &real).unwrap();
    let message = run();
    assert!(
        message.contains(
            "fr_99999999999: rank 99999999999 (the digits its name ends in) is not a rank"
        ),
        "{message}"
    );
    assert!(!out.exists());
    let _ = std::fs::remove_dir_all(&dir);
}

/// A dump's name that is no readable file (a dangling symbolic link, a FIFO) is refused, naming
/// it and why, not skipped as if the rank had written nothing; a folder and a name without a
/// rank are still skipped.
#[cfg(unix)]
#[test]
fn a_dump_name_that_is_no_readable_file_exits_2_naming_it() {
    let dir = scratch("unreadable");
    let out =
        std::env::temp_dir().join(format!("c10dsim-fr-unreadable-{}.toml", std::process::id()));
    std::fs::copy("tests/data/torch/recorded/fr/timeout_rank0", dir.join("x0")).unwrap();
    std::fs::create_dir(dir.join("notes")).unwrap();
    std::fs::create_dir(dir.join("x_old2")).unwrap();
    std::fs::write(dir.join("README"), "not a dump").unwrap();
    import(&dir, &out);
    let dangling = dir.join("x1");
    std::os::unix::fs::symlink("/nonexistent", &dangling).unwrap();
    let message = stderr(&import_exiting(&dir, &out, 2));
    assert!(
        message.contains(&format!(
            "{}: the dump of rank 1 is a symbolic link to /nonexistent, which cannot be read",
            dangling.display()
        )),
        "{message}"
    );
    std::fs::remove_file(&dangling).unwrap();
    let made = Command::new("mkfifo").arg(&dangling).status().unwrap();
    assert!(made.success());
    let message = stderr(&import_exiting(&dir, &out, 2));
    assert!(
        message.contains(&format!(
            "{}: the dump of rank 1 is not a regular file (a FIFO)",
            dangling.display()
        )),
        "{message}"
    );
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_file(&out);
}

/// PyTorch's own analyser on the simulator's dumps, where `python3` can import it (PyTorch
/// installed, or its `torch/distributed/flight_recorder` on `PYTHONPATH`: docs/flight-recorder.md).
#[test]
fn torchfrtrace_names_the_culprits_the_simulator_named() {
    let importable = Command::new("python3")
        .args(["-c", "import torch.distributed.flight_recorder.fr_trace"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !importable {
        skipped("torchfrtrace_names_the_culprits_the_simulator_named: python3 cannot import torch.distributed.flight_recorder (docs/flight-recorder.md)");
        return;
    }
    let dir = scratch("torchfrtrace");
    let analyse = |folder: &Path| {
        let output = Command::new("python3")
            .args([
                "-m",
                "torch.distributed.flight_recorder.fr_trace",
                folder.to_str().unwrap(),
            ])
            .output()
            .unwrap();
        assert!(output.status.success(), "{}", stderr(&output));
        // Its findings are log records, on standard error.
        stdout(&output) + &stderr(&output)
    };
    dump("scenarios/hang_10min.toml", &dir.join("hang"));
    let hang = analyse(&dir.join("hang"));
    assert!(
        hang.contains("Not all ranks joining collective, sequence number: 1"),
        "{hang}"
    );
    assert!(hang.contains("missing ranks: {3}"), "{hang}");
    dump("scenarios/mismatch.toml", &dir.join("mismatch"));
    let mismatch = analyse(&dir.join("mismatch"));
    assert!(
        mismatch.contains("Culprit rank 1; Error type: COLLECTIVE_TYPE_MISMATCH"),
        "{mismatch}"
    );
    let dtype = analyse(&dtype_dumps(&dir.join("dtype")));
    assert!(
        dtype.contains("Culprit rank 1; Error type: COLLECTIVE_DTYPE_MISMATCH, Expected dtypes: '{'Float'}' does not match found dtype: '{'Float'}/{'BFloat16'}/{'BFloat16'}'"),
        "{dtype}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_process_group_numbers_its_collectives_and_its_sends_apart_whatever_the_peer() {
    // Rank 0 sends to ranks 1 and 2 between two all_reduces; rank 2 hangs at the second. As
    // PyTorch does, every entry records the group's three counters as they stand: op_id counts
    // every call, collective_seq_id the collectives, p2p_seq_id the sends and receives of
    // any peer (it was numbered per pair).
    let dir = scratch("p2p_numbers");
    let scenario = dir.join("p2p.toml");
    std::fs::write(
        &scenario,
        "[cluster]\nranks = 3\n[tensors]\nx = \"1MiB\"\n[[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\n\
         [[op]]\nsend = \"x\"\nranks = [0]\npeer = 1\n[[op]]\nrecv = \"x\"\nranks = [1]\npeer = 0\n\
         [[op]]\nsend = \"x\"\nranks = [0]\npeer = 2\n[[op]]\nrecv = \"x\"\nranks = [2]\npeer = 0\n\
         [[op]]\nlabel = \"ar2\"\nall_reduce = \"x\"\n\
         [[fault]]\nranks = [2]\nat = \"ar2\"\nkind = \"hang\"\n",
    )
    .unwrap();
    let out = dir.join("dumps");
    dump(scenario.to_str().unwrap(), &out);
    let bytes = std::fs::read(out.join("nccl_trace_rank_0")).unwrap();
    let rank0 = analysis::flight_recorder::read(&bytes, 0).unwrap();
    let numbers: Vec<(String, u64, u64, u64, bool)> = (rank0.entries.iter())
        .map(|e| {
            let name = e.profiling_name.clone();
            (name, e.op_id, e.collective_seq_id, e.p2p_seq_id, e.is_p2p)
        })
        .collect();
    let expected = [
        ("nccl:all_reduce", 1, 1, 0, false),
        ("nccl:send 0->1", 2, 1, 1, true),
        ("nccl:send 0->2", 3, 1, 2, true),
        ("nccl:all_reduce", 4, 2, 2, false),
    ]
    .map(|(name, op, collective, p2p, is_p2p)| (name.to_string(), op, collective, p2p, is_p2p));
    assert_eq!(numbers, expected);
    // The importer models no point-to-point call yet, and says so.
    let imported = c10dsim(&[
        "import",
        "flight-recorder",
        out.to_str().unwrap(),
        "-o",
        dir.join("imported.toml").to_str().unwrap(),
    ]);
    assert_eq!(imported.status.code(), Some(2), "{}", stderr(&imported));
    assert!(
        stderr(&imported).contains("point-to-point entries (nccl:send 0->1) are not imported yet"),
        "{}",
        stderr(&imported)
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Four ranks, twelve iterations of an all_reduce; rank 2 hangs before the tenth (SeqNum 10),
/// and each rank's ring buffer keeps its last four entries: SeqNums 1 to 6 are gone.
const WRAPPED: &str = "repeat = 12\n[cluster]\nranks = 4\n[groups.world]\neager_init = true\n\
    [env]\nTORCH_NCCL_DESYNC_DEBUG = 1\nTORCH_FR_BUFFER_SIZE = 4\n[tensors]\ng = \"4MiB\"\n\
    [[op]]\nlabel = \"ar\"\nall_reduce = \"g\"\n[[op]]\ndevice_sync = true\n\
    [[fault]]\nranks = [2]\nat = \"ar\"\niteration = 9\nkind = \"hang\"\n";

#[test]
fn a_wrapped_ring_buffer_s_dumps_replay_with_their_seq_nums() {
    let dir = scratch("wrapped");
    let scenario = dir.join("wrapped.toml");
    std::fs::write(&scenario, WRAPPED).unwrap();
    let named = "rank 2 never joined collective 10 (ALLREDUCE, world)";
    let report = dump(scenario.to_str().unwrap(), &dir.join("dumps"));
    assert!(report.contains(&format!("Diagnosis: {named}")), "{report}");
    // The importer replays SeqNums 7 to 10 and says where the group's numbers start.
    let imported = dir.join("imported.toml");
    let verdict = import(&dir.join("dumps"), &imported);
    assert!(verdict.contains(named), "{verdict}");
    let text = std::fs::read_to_string(&imported).unwrap();
    assert!(text.contains("\nfirst_seq_num = 7 "), "{text}");
    // The replay's watchdog, desync report and dumps carry the dumps' SeqNums.
    let replay = dump(imported.to_str().unwrap(), &dir.join("replayed"));
    assert!(replay.contains("WorkNCCL(SeqNum=10,"), "{replay}");
    assert!(replay.contains(&format!("Diagnosis: {named}")), "{replay}");
    let bytes = std::fs::read(dir.join("replayed/nccl_trace_rank_0")).unwrap();
    let rank0 = analysis::flight_recorder::read(&bytes, 0).unwrap();
    let numbers: Vec<(u64, u64)> = (rank0.entries.iter())
        .map(|e| (e.collective_seq_id, e.op_id))
        .collect();
    assert_eq!(numbers, [(7, 7), (8, 8), (9, 9), (10, 10)]);
    let world = &rank0.groups[0];
    assert_eq!((world.last_enqueued, world.last_completed), (10, 9));
    // Each replayed entry has the record_id the job's dump gave that collective.
    for rank in 0..4 {
        let ids = |folder: &str| -> BTreeMap<u64, u64> {
            let path = dir.join(folder).join(format!("nccl_trace_rank_{rank}"));
            let dump =
                analysis::flight_recorder::read(&std::fs::read(path).unwrap(), rank).unwrap();
            (dump.entries.iter())
                .map(|e| (e.collective_seq_id, e.record_id))
                .collect()
        };
        let (job, replayed) = (ids("dumps"), ids("replayed"));
        assert!(!replayed.is_empty());
        for (seq, record_id) in &replayed {
            assert_eq!(
                job.get(seq),
                Some(record_id),
                "rank {rank}: {job:?} {replayed:?}"
            );
        }
    }
    // PyTorch's analyser names SeqNum 10 on both, where python3 can import it.
    let importable = Command::new("python3")
        .args(["-c", "import torch.distributed.flight_recorder.fr_trace"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !importable {
        skipped("a_wrapped_ring_buffer_s_dumps_replay_with_their_seq_nums: torchfrtrace's part: python3 cannot import torch.distributed.flight_recorder (docs/flight-recorder.md)");
    }
    for folder in ["dumps", "replayed"].iter().filter(|_| importable) {
        let output = Command::new("python3")
            .args(["-m", "torch.distributed.flight_recorder.fr_trace"])
            .arg(dir.join(folder))
            .output()
            .unwrap();
        assert!(output.status.success(), "{}", stderr(&output));
        let analysed = stdout(&output) + &stderr(&output);
        assert!(
            analysed.contains("Not all ranks joining collective, sequence number: 10")
                && analysed.contains("missing ranks: {2}"),
            "{folder}: {analysed}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Four ranks, twice: an all_reduce of `tp` (ranks 0 and 1), three of `side` (ranks 1 and 3),
/// one of the world, three entries a ring buffer; rank 0 hangs before the second world
/// all_reduce. Rank 1 runs ahead: its buffer keeps `side` 5 and 6 and world 2, no `tp` entry,
/// while rank 0's keeps `tp` 1, world 1 and `tp` 2.
const RAN_AHEAD: &str = "repeat = 2\n[cluster]\nranks = 4\n[groups.world]\neager_init = true\n\
    [groups.tp]\nranks = [0, 1]\neager_init = true\ntimeout_s = 1\n\
    [groups.side]\nranks = [1, 3]\neager_init = true\ntimeout_s = 1\n\
    [env]\nTORCH_NCCL_DESYNC_DEBUG = 1\nTORCH_FR_BUFFER_SIZE = 3\n[tensors]\ng = \"4MiB\"\n\
    [[op]]\nlabel = \"a\"\nall_reduce = \"g\"\ngroup = \"tp\"\n\
    [[op]]\nlabel = \"b1\"\nall_reduce = \"g\"\ngroup = \"side\"\n\
    [[op]]\nlabel = \"b2\"\nall_reduce = \"g\"\ngroup = \"side\"\n\
    [[op]]\nlabel = \"b3\"\nall_reduce = \"g\"\ngroup = \"side\"\n\
    [[op]]\nlabel = \"c\"\nall_reduce = \"g\"\n\
    [[fault]]\nranks = [0]\nat = \"c\"\niteration = 1\nkind = \"hang\"\n";

#[test]
fn a_rank_whose_buffer_dropped_a_group_s_entries_is_not_named_for_them() {
    let dir = scratch("ran-ahead");
    let scenario = dir.join("ahead.toml");
    std::fs::write(&scenario, RAN_AHEAD).unwrap();
    let named = "rank 0 never joined collective 2 (ALLREDUCE, world)";
    let report = dump(scenario.to_str().unwrap(), &dir.join("dumps"));
    assert!(report.contains(&format!("Diagnosis: {named}")), "{report}");
    // Rank 1's pg_status says it enqueued tp 1 and 2: dropped from its buffer, not missed.
    let imported = dir.join("imported.toml");
    let verdict = import(&dir.join("dumps"), &imported);
    let text = std::fs::read_to_string(&imported).unwrap();
    assert!(verdict.contains(named), "{verdict}\n{text}");
    assert!(
        !verdict.contains("rank 1 never joined"),
        "{verdict}\n{text}"
    );
    // World 2 is in the buffers of ranks 1 to 3 only, not of the rank that recorded first.
    assert!(text.contains("label = \"all_reduce_2\""), "{text}");
    assert!(
        text.contains("ranks = [0]\nat = \"all_reduce_2\"\nkind = \"hang\""),
        "{text}"
    );
    let replay = dump(imported.to_str().unwrap(), &dir.join("replayed"));
    assert!(replay.contains(&format!("Diagnosis: {named}")), "{replay}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_collective_no_dump_kept_is_said_not_replayed() {
    // Rank 0 hangs at the second tp all_reduce instead: rank 1 enqueued it, then its buffer
    // dropped it, so only pg_status tells that rank 0 never issued it.
    let dir = scratch("not-kept");
    let scenario = dir.join("ahead.toml");
    std::fs::write(&scenario, RAN_AHEAD.replace("at = \"c\"", "at = \"a\"")).unwrap();
    let report = dump(scenario.to_str().unwrap(), &dir.join("dumps"));
    assert!(
        report.contains("Diagnosis: rank 0 never joined collective 2 (ALLREDUCE, tp)"),
        "{report}"
    );
    let verdict = import(&dir.join("dumps"), &dir.join("imported.toml"));
    assert!(
        verdict.contains("verdict: not replayed: rank 0 enqueued collectives of tp up to 1, rank 1 up to 2 (pg_status); collective 2 of tp is in no dump (the ring buffers that held it wrapped), so the replay cannot show rank 0 never issuing it\n"),
        "{verdict}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_rank_that_enqueued_none_of_a_group_whose_first_collective_no_dump_kept_is_said_not_replayed() {
    // Rank 1 hangs before its first all_reduce; rank 0's host runs ahead through ten async
    // ones, and its buffer of 3 dropped SeqNum 1. Rank 1's pg_status says -1: none enqueued.
    let dir = scratch("none-enqueued");
    let scenario = dir.join("none.toml");
    std::fs::write(
        &scenario,
        "repeat = 10\n[cluster]\nranks = 2\n[groups.world]\neager_init = true\ntimeout_s = 1\n\
         [env]\nTORCH_NCCL_DESYNC_DEBUG = 1\nTORCH_FR_BUFFER_SIZE = 3\n[tensors]\ng = \"4MiB\"\n\
         [[op]]\nlabel = \"a\"\nall_reduce = \"g\"\nasync_op = true\n\
         [[fault]]\nranks = [1]\nat = \"a\"\nkind = \"hang\"\n",
    )
    .unwrap();
    dump(scenario.to_str().unwrap(), &dir.join("dumps"));
    let verdict = import(&dir.join("dumps"), &dir.join("imported.toml"));
    assert!(
        verdict.contains("verdict: not replayed: rank 1 enqueued no collective of world, rank 0 up to 10 (pg_status); collective 1 of world is in no dump"),
        "{verdict}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// docs/flight-recorder.md's example of `import flight-recorder` on PyTorch's recorded dump is
/// what the binary prints, word for word but the output's path. Until 2026-12-07 the page
/// showed "imported 1 dumps".
#[test]
fn the_documented_import_example_is_what_the_binary_prints() {
    let doc = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("docs/flight-recorder.md"),
    )
    .unwrap();
    let command = "$ c10dsim import flight-recorder tests/data/torch/recorded/fr -o h200.toml\n";
    let shown = doc
        .split(command)
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("docs/flight-recorder.md shows the import of tests/data/torch/recorded/fr");
    let dir = scratch("documented");
    let out = dir.join("h200.toml");
    let printed = import(Path::new("tests/data/torch/recorded/fr"), &out);
    assert_eq!(shown, printed.replace(out.to_str().unwrap(), "h200.toml"));
    std::fs::remove_dir_all(&dir).unwrap();
}
