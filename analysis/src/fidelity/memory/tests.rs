//! The memory table's rows: the interpreter's own bytes taken off (recorded, derived or from
//! the memory runs), and which memory runs are refused.

use super::*;

const MIB: u64 = 1 << 20;

/// A GEMM of 32 MiB operands (bf16) and a 64 MiB gradient, one rank.
const GEMM: &str = "[cluster]\nranks = 1\n[tensors]\ng = \"64MiB\"\n\
    [[op]]\ngemm = [4096, 4096, 4096]\n[[op]]\nall_reduce = \"g\"\n";

fn parse(text: &str) -> Scenario {
    sim::scenario::parse("memory.toml", text).expect("valid scenario")
}

/// A "measured" run of `scenario`: the simulation's Timeline with the given peaks and
/// machine entries.
fn measured_run(
    scenario: &Scenario,
    allocated: u64,
    reserved: u64,
    machine: &[(&str, &str)],
) -> Timeline {
    let mut run = sim::engine::simulate(scenario);
    run.ranks[0].memory = MemoryPeaks {
        peak_allocated_bytes: allocated,
        peak_reserved_bytes: reserved,
        cache_releases: 0,
    };
    for (key, value) in machine {
        run.machine.insert(key.to_string(), value.to_string());
    }
    run
}

fn row(scenario: &Scenario, runs: &[Timeline]) -> MemoryRow {
    let simulated = sim::engine::simulate(scenario);
    memory_row("s", scenario, &simulated, runs, &[], None).expect("a row")
}

#[test]
fn the_recorded_own_bytes_come_off_each_runs_peaks() {
    let scenario = parse(GEMM);
    let own = [
        ("interpreter_allocated_bytes", "134217728"), // 3 × 32 MiB + 32 MiB; 130 MiB reserved
        ("interpreter_reserved_bytes", "136314880"),
    ];
    let runs = [
        measured_run(&scenario, 64 * MIB + 128 * MIB, 64 * MIB + 130 * MIB, &own),
        measured_run(&scenario, 128 * MIB + 128 * MIB, 64 * MIB + 130 * MIB, &own),
    ];
    let compared = row(&scenario, &runs);
    let torch = compared.torch.as_ref().expect("compared");
    assert_eq!(torch.interpreter_bytes, (128 * MIB, 130 * MIB));
    assert!(torch.interpreter_bytes_recorded);
    assert_eq!(torch.peak_reserved_bytes.median, (64 * MIB) as f64);
    // One run held 64 MiB more: the simulation's 64 MiB lies within the runs' spread.
    assert_eq!(torch.peak_allocated_bytes.spread, (64 * MIB) as f64);
    assert_eq!(compared.simulated.peak_allocated_bytes, 64 * MIB);
    assert_eq!(compared.differing(), Some(vec![]));
    let over = [measured_run(
        &scenario,
        128 * MIB + 128 * MIB,
        64 * MIB + 130 * MIB,
        &own,
    )];
    assert_eq!(
        row(&scenario, &over).differing(),
        Some(vec!["peak allocated"])
    );
}

#[test]
fn an_older_runs_own_bytes_are_derived_only_with_its_workspaces_measured() {
    let scenario = parse(GEMM);
    let peak = 64 * MIB + 96 * MIB + 32 * MIB;
    let old = [measured_run(
        &scenario,
        peak,
        peak,
        &[("blas_workspace_bytes", "33554432")],
    )];
    let torch = row(&scenario, &old).torch.expect("derived");
    assert_eq!(torch.interpreter_bytes, (128 * MIB, 128 * MIB));
    assert!(!torch.interpreter_bytes_recorded);
    assert_eq!(torch.peak_allocated_bytes.median, (64 * MIB) as f64);
    // Without the workspaces' bytes nothing is guessed.
    let older = [measured_run(&scenario, peak, peak, &[])];
    let why = row(&scenario, &older).torch.expect_err("not comparable");
    assert_eq!(
        why,
        "not comparable: recorded before the interpreter reported its own bytes (its \
         cuBLAS workspaces were not measured)"
    );
    // With no GEMM there is no workspace: nothing to take off.
    let plain =
        parse("[cluster]\nranks = 1\n[tensors]\ng = \"64MiB\"\n[[op]]\nall_reduce = \"g\"\n");
    let torch = row(&plain, &[measured_run(&plain, 64 * MIB, 64 * MIB, &[])]).torch;
    assert_eq!(torch.expect("compared").interpreter_bytes, (0, 0));
}

#[test]
fn own_buffers_that_would_share_a_segment_with_the_scenarios_are_not_derived() {
    // The 2 MiB tensor takes a 20 MiB segment; the 2 MiB operands would go into its rest.
    let scenario =
        parse("[cluster]\nranks = 1\n[tensors]\nx = \"2MiB\"\n[[op]]\ngemm = [1024, 1024, 1024]\n");
    let run = measured_run(
        &scenario,
        40 * MIB,
        40 * MIB,
        &[("blas_workspace_bytes", "33554432")],
    );
    let why = row(&scenario, &[run]).torch.expect_err("not comparable");
    assert!(
        why.starts_with(NOT_COMPARABLE_OLD) && why.contains("shares a segment"),
        "{why}"
    );
}

#[test]
fn a_partial_run_or_a_dynamic_all_to_all_is_not_compared() {
    let scenario = parse(GEMM);
    let partial = measured_run(
        &scenario,
        0,
        0,
        &[(
            "journal",
            "partial (written before the process could end normally)",
        )],
    );
    let why = row(&scenario, &[partial]).torch.expect_err("not measured");
    assert!(why.starts_with("not measured: the process ended"), "{why}");
    let dynamic = parse(
        "[cluster]\nranks = 1\n[tensors]\nt = \"32MiB\"\n\
         [[op]]\nalloc = \"t\"\n[[op]]\nall_to_all = \"t\"\n[[op]]\nfree = \"t\"\n",
    );
    let run = measured_run(&dynamic, 64 * MIB, 64 * MIB, &[]);
    let why = row(&dynamic, &[run]).torch.expect_err("not comparable");
    assert!(
        why.contains("all_to_all receive buffer of dynamic tensor `t`"),
        "{why}"
    );
    assert_eq!(
        row(&dynamic, &[measured_run(&dynamic, 0, 0, &[])]).differing(),
        None
    );
}

/// A timing run of [`GEMM`] recorded before the interpreter reported its own bytes (and
/// its cuBLAS workspaces): not comparable alone.
fn old_timing_run(scenario: &Scenario) -> Timeline {
    let peak = 64 * MIB + 128 * MIB;
    measured_run(scenario, peak, peak, &[])
}

const OWN: [(&str, &str); 2] = [
    ("interpreter_allocated_bytes", "134217728"),
    ("interpreter_reserved_bytes", "134217728"),
];

#[test]
fn memory_runs_stand_in_where_the_timing_runs_predate_the_interpreters_record() {
    let scenario = parse(GEMM);
    let simulated = sim::engine::simulate(&scenario);
    let timing = [old_timing_run(&scenario), old_timing_run(&scenario)];
    let alone = memory_row("s", &scenario, &simulated, &timing, &[], None).unwrap();
    assert!(alone.torch.is_err(), "{:?}", alone.torch);
    let memory_run = measured_run(&scenario, 64 * MIB + 128 * MIB, 64 * MIB + 128 * MIB, &OWN);
    let row = memory_row("s", &scenario, &simulated, &timing, &[memory_run], None).unwrap();
    let torch = row.torch.as_ref().expect("compared from the memory run");
    assert_eq!(torch.source, MemorySource::MemoryRuns);
    assert_eq!(
        (torch.runs, torch.interpreter_bytes),
        (1, (128 * MIB, 128 * MIB))
    );
    assert_eq!(row.differing(), Some(vec![]));
    // The row says which runs it is of, and the summary how many rows are.
    let shown = &memory_rows(std::slice::from_ref(&row))[0];
    assert_eq!(shown[4], "67108864 (1 memory run)");
    let sentence = memory_sentence(&[row]);
    assert!(
        sentence.contains("1 of 1 compared scenarios agree")
            && sentence.contains("(1 of them measured by memory runs"),
        "{sentence}"
    );
    // Timing runs that record the bytes themselves are kept, whatever memory runs there are.
    let recording = [
        measured_run(&scenario, 64 * MIB + 128 * MIB, 64 * MIB + 128 * MIB, &OWN),
        measured_run(&scenario, 64 * MIB + 128 * MIB, 64 * MIB + 128 * MIB, &OWN),
    ];
    let memory_run = measured_run(&scenario, 0, 0, &OWN);
    let row = memory_row("s", &scenario, &simulated, &recording, &[memory_run], None).unwrap();
    let torch = row.torch.as_ref().expect("compared from the timing runs");
    assert_eq!((torch.source, torch.runs), (MemorySource::TimingRuns, 2));
    assert_eq!(memory_rows(&[row])[0][4], "67108864 (2 runs)");
}

#[test]
fn a_memory_run_of_another_invocation_text_or_setting_or_without_the_bytes_is_refused() {
    let scenario = parse(GEMM);
    let mut timing = old_timing_run(&scenario);
    timing.scenario.path = "scenarios/x.toml [--set cluster.ranks=1]".into();
    timing.scenario.source_hash = "aaaa".into();
    let mut run = measured_run(&scenario, 0, 0, &OWN);
    run.scenario.path = timing.scenario.path.clone();
    run.scenario.source_hash = "aaaa".into();
    assert_eq!(memory_run_mismatch(&run, &timing, "aaaa"), None);
    // The timing runs' own text may be older: the memory run must be of the text as it is.
    assert_eq!(
        memory_run_mismatch(&run, &timing, "bbbb").as_deref(),
        Some(
            "recorded from another text of scenarios/x.toml (source_hash aaaa, the file now \
         bbbb): record it again"
        )
    );
    let mut other_sets = run.clone();
    other_sets.scenario.path = "scenarios/x.toml [--set cluster.ranks=1 --set repeat=2]".into();
    let why = memory_run_mismatch(&other_sets, &timing, "aaaa").expect("refused");
    assert!(why.contains("another scenario or other --sets"), "{why}");
    let mut other_torch = run.clone();
    other_torch.machine.insert("torch".into(), "2.5.1".into());
    timing.machine.insert("torch".into(), "2.11.0+cu130".into());
    let why = memory_run_mismatch(&other_torch, &timing, "aaaa").expect("refused");
    assert!(
        why.ends_with("(--set torch=\"2.5\"; the timing runs: --set torch=\"2.12\")"),
        "{why}"
    );
    let mut without = run.clone();
    without
        .machine
        .insert("torch".into(), "2.11.0+cu130".into());
    without.machine.remove("interpreter_allocated_bytes");
    without.machine.remove("interpreter_reserved_bytes");
    let why = memory_run_mismatch(&without, &timing, "aaaa").expect("refused");
    assert!(
        why.contains("does not record the interpreter's own bytes"),
        "{why}"
    );
}
