//! The memory part of the fidelity table: the caching allocator's peaks and cache releases of
//! the simulation against PyTorch's (`torch.cuda.max_memory_allocated` / `_reserved`,
//! `num_alloc_retries`). PyTorch's peaks are the process's: they hold what the interpreter
//! allocates itself before the program and keeps to the end (GEMM operands, all_to_all receive
//! buffers, mismatch scratch buffers, cuBLAS workspaces), which the simulator does not book, so
//! those bytes are taken off them — as the run recorded them, or, for a run recorded before the
//! interpreter reported them, as its setup makes them where that can be derived exactly.

use sim::allocator::{Allocation, CachingAllocator, MemoryPeaks};
use sim::collective::CollectiveKind;
use sim::scenario::{Batch, DType, FaultKind, OpKind, Scenario, TensorId};
use sim::timeline::Timeline;
use std::collections::BTreeSet;

/// A PyTorch figure over the runs: the median run's value and the largest less the smallest.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct MeasuredFigure {
    pub median: f64,
    pub spread: f64,
    pub least: u64,
    pub greatest: u64,
}

impl MeasuredFigure {
    fn of(values: &[u64]) -> MeasuredFigure {
        let mut sorted = values.to_vec();
        sorted.sort_unstable();
        let n = sorted.len();
        let median = if n % 2 == 1 {
            sorted[n / 2] as f64
        } else {
            (sorted[n / 2 - 1] as f64 + sorted[n / 2] as f64) / 2.0
        };
        MeasuredFigure {
            median,
            spread: (sorted[n - 1] - sorted[0]) as f64,
            least: sorted[0],
            greatest: sorted[n - 1],
        }
    }

    /// The simulated value lies among the runs' (equal, for runs that all measured the same).
    fn holds(&self, simulated: u64) -> bool {
        (self.least..=self.greatest).contains(&simulated)
    }
}

/// PyTorch's figures, the interpreter's own bytes taken off the peaks.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct MeasuredMemory {
    pub peak_allocated_bytes: MeasuredFigure,
    pub peak_reserved_bytes: MeasuredFigure,
    pub cache_releases: MeasuredFigure,
    pub runs: usize,
    /// The interpreter's own bytes taken off (allocated, reserved), of the newest run.
    pub interpreter_bytes: (u64, u64),
    /// Whether they are the run's own record (`machine.interpreter_*_bytes`) or derived from
    /// the scenario as the interpreter's setup makes them.
    pub interpreter_bytes_recorded: bool,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct MemoryRow {
    pub scenario: String,
    /// The rank compared: the lowest the PyTorch run launched, whose `machine` map (and with
    /// it the interpreter's own bytes) the merged Timeline keeps.
    pub rank: u32,
    pub simulated: MemoryPeaks,
    /// `Err` says why PyTorch's figures are not compared.
    pub torch: Result<MeasuredMemory, String>,
}

impl MemoryRow {
    /// The figures that differ: none where every one agrees; `None` where nothing is compared.
    pub fn differing(&self) -> Option<Vec<&'static str>> {
        let torch = self.torch.as_ref().ok()?;
        let sim = &self.simulated;
        let mut differing = Vec::new();
        if !torch.peak_allocated_bytes.holds(sim.peak_allocated_bytes) {
            differing.push("peak allocated");
        }
        if !torch.peak_reserved_bytes.holds(sim.peak_reserved_bytes) {
            differing.push("peak reserved");
        }
        if !torch.cache_releases.holds(u64::from(sim.cache_releases)) {
            differing.push("cache releases");
        }
        Some(differing)
    }
}

/// What is said of a run recorded before the interpreter reported its own bytes, when they
/// cannot be derived exactly; the reason follows it.
const NOT_COMPARABLE_OLD: &str =
    "not comparable: recorded before the interpreter reported its own bytes";

/// The memory row of one scenario; `launched_of` as in the outcome row (fewer ranks launched
/// than the scenario has: another program than the one simulated).
pub fn memory_row(
    name: &str,
    scenario: &Scenario,
    simulated: &Timeline,
    torch: &[Timeline],
    launched_of: Option<(usize, u32)>,
) -> Option<MemoryRow> {
    let newest = torch.last()?;
    let rank = newest.ranks.first()?.rank;
    let simulated_peaks = simulated
        .ranks
        .iter()
        .find(|r| r.rank == rank)
        .map(|r| r.memory)
        .unwrap_or_default();
    let compared = match launched_of {
        Some((launched, ranks)) => Err(format!(
            "not comparable: {launched} of {ranks} ranks launched, the others' part not run"
        )),
        None => measured(scenario, torch, rank),
    };
    Some(MemoryRow {
        scenario: name.to_string(),
        rank,
        simulated: simulated_peaks,
        torch: compared,
    })
}

fn measured(scenario: &Scenario, torch: &[Timeline], rank: u32) -> Result<MeasuredMemory, String> {
    if let Some(tensor) = dynamic_all_to_all(scenario, rank) {
        return Err(format!(
            "not comparable: the interpreter makes the all_to_all receive buffer of dynamic \
             tensor `{}` during the program, which the simulator does not book",
            scenario.tensors[tensor].name
        ));
    }
    let mut allocated = Vec::new();
    let mut reserved = Vec::new();
    let mut releases = Vec::new();
    let mut own = (0, 0);
    let mut recorded = false;
    for run in torch {
        let partial = run
            .machine
            .get("journal")
            .is_some_and(|journal| journal.starts_with("partial"));
        if partial {
            return Err(
                "not measured: the process ended before the interpreter read the \
                        allocator's peaks (a partial Timeline)"
                    .to_string(),
            );
        }
        let Some(memory) = run.ranks.iter().find(|r| r.rank == rank).map(|r| r.memory) else {
            return Err(format!("not measured: a run has no rank {rank}"));
        };
        (own, recorded) = match recorded_bytes(run)? {
            Some(bytes) => (bytes, true),
            None => (derived_bytes(scenario, rank, run)?, false),
        };
        let taken_off = |peak: u64, bytes: u64, what: &str| {
            peak.checked_sub(bytes).ok_or_else(|| {
                format!(
                    "not comparable: the run's peak {what} ({peak} B) is below the \
                     interpreter's own bytes ({bytes} B)"
                )
            })
        };
        allocated.push(taken_off(memory.peak_allocated_bytes, own.0, "allocated")?);
        reserved.push(taken_off(memory.peak_reserved_bytes, own.1, "reserved")?);
        releases.push(u64::from(memory.cache_releases));
    }
    if allocated.is_empty() {
        return Err("not measured: no run".to_string());
    }
    Ok(MeasuredMemory {
        peak_allocated_bytes: MeasuredFigure::of(&allocated),
        peak_reserved_bytes: MeasuredFigure::of(&reserved),
        cache_releases: MeasuredFigure::of(&releases),
        runs: allocated.len(),
        interpreter_bytes: own,
        interpreter_bytes_recorded: recorded,
    })
}

/// `machine.interpreter_allocated_bytes` / `interpreter_reserved_bytes`, where the run has them.
fn recorded_bytes(run: &Timeline) -> Result<Option<(u64, u64)>, String> {
    let number = |key: &str| -> Result<Option<u64>, String> {
        run.machine
            .get(key)
            .map(|text| {
                text.parse()
                    .map_err(|_| format!("not comparable: machine.{key} {text:?} is not bytes"))
            })
            .transpose()
    };
    match (
        number("interpreter_allocated_bytes")?,
        number("interpreter_reserved_bytes")?,
    ) {
        (Some(allocated), Some(reserved)) => Ok(Some((allocated, reserved))),
        (None, None) => Ok(None),
        _ => Err(
            "not comparable: the run records only one of the interpreter's own \
                  allocated and reserved bytes"
                .to_string(),
        ),
    }
}

/// An all_to_all of `rank` on a dynamic tensor: the interpreter makes its receive buffer at the
/// call, inside the program.
fn dynamic_all_to_all(scenario: &Scenario, rank: u32) -> Option<TensorId> {
    scenario
        .ops
        .iter()
        .filter(|op| op.runs_on(rank))
        .find_map(|op| match op.kind {
            OpKind::Collective {
                collective: CollectiveKind::AllToAll,
                tensor,
                ..
            } if scenario.tensors[tensor].dynamic => Some(tensor),
            _ => None,
        })
}

/// The bytes of a tensor of `size_bytes` as the interpreter makes it: whole elements, one at
/// least.
fn tensor_bytes(size_bytes: u64, dtype: DType) -> u64 {
    (size_bytes / dtype.size_bytes()).max(1) * dtype.size_bytes()
}

/// The interpreter's own bytes of a run recorded before it reported them, replayed through the
/// caching allocator in the order its setup made them then (the scenario's tensors; per op, the
/// GEMM operands, bucket buffers and all_to_all receive buffers; the rank's mismatch buffers;
/// the cuBLAS workspaces the run recorded). Exact only where each of its own buffers takes a
/// new segment of its own, whole: then no byte of it is shared with the scenario's, and the
/// program's allocations could never have used it.
fn derived_bytes(scenario: &Scenario, rank: u32, run: &Timeline) -> Result<(u64, u64), String> {
    let gemm_streams: BTreeSet<usize> = (scenario.ops.iter())
        .filter(|op| matches!(op.kind, OpKind::Gemm { .. }))
        .map(|op| op.stream)
        .collect();
    let workspace_bytes = if gemm_streams.is_empty() {
        0
    } else {
        let recorded = run.machine.get("blas_workspace_bytes").ok_or_else(|| {
            format!("{NOT_COMPARABLE_OLD} (its cuBLAS workspaces were not measured)")
        })?;
        let total: u64 = recorded.parse().map_err(|_| {
            format!("not comparable: machine.blas_workspace_bytes {recorded:?} is not bytes")
        })?;
        if !total.is_multiple_of(gemm_streams.len() as u64) {
            return Err(format!(
                "{NOT_COMPARABLE_OLD} (its {total} B of cuBLAS workspaces do not split evenly \
                 over {} streams)",
                gemm_streams.len()
            ));
        }
        total / gemm_streams.len() as u64
    };
    let mut allocator = CachingAllocator::new(u64::MAX);
    let mut own = Own::default();
    for tensor in scenario.tensors.iter().filter(|t| !t.dynamic) {
        for _ in 0..tensor.count {
            allocator.allocate(tensor_bytes(tensor.size_bytes, tensor.dtype), 0);
        }
    }
    let mut gemm_shapes = BTreeSet::new();
    // A receive buffer per buffer sent (the interpreter's is keyed by the sent buffer).
    let mut received: BTreeSet<Sent> = BTreeSet::new();
    for op in &scenario.ops {
        match &op.kind {
            // One set of operands per shape.
            &OpKind::Gemm { m, n, k, dtype } if gemm_shapes.insert((m, n, k, dtype)) => {
                for elements in [m * k, k * n, m * n] {
                    own.allocate(&mut allocator, elements * dtype.size_bytes(), 0)?;
                }
            }
            OpKind::Collective {
                collective,
                tensor,
                batch,
                ..
            } => {
                let dtype = scenario.tensors[*tensor].dtype;
                if matches!(batch, Batch::Bucketed { .. }) {
                    for size in scenario.call_sizes(&op.kind) {
                        allocator.allocate(tensor_bytes(size, dtype), 0);
                    }
                }
                let declared = &scenario.tensors[*tensor];
                if *collective == CollectiveKind::AllToAll && !declared.dynamic {
                    for index in 0..declared.count {
                        if received.insert(Sent::Tensor(*tensor, index)) {
                            let bytes = tensor_bytes(declared.size_bytes, dtype);
                            own.allocate(&mut allocator, bytes, 0)?;
                        }
                    }
                }
            }
            _ => {}
        }
    }
    let mut scratch = BTreeSet::new();
    for fault in scenario.faults.iter().filter(|f| f.ranks.contains(&rank)) {
        if let FaultKind::Mismatch {
            collective,
            size_bytes,
            dtype,
        } = fault.kind
        {
            let bytes = tensor_bytes(size_bytes, dtype);
            if scratch.insert((dtype, size_bytes)) {
                own.allocate(&mut allocator, bytes, 0)?;
            }
            let sent = Sent::Scratch(dtype, size_bytes);
            if collective == CollectiveKind::AllToAll && received.insert(sent) {
                own.allocate(&mut allocator, bytes, 0)?;
            }
        }
    }
    for &stream in &gemm_streams {
        let stream = u16::try_from(stream).expect("a scenario has fewer than 65536 streams");
        own.allocate(&mut allocator, workspace_bytes, stream)?;
    }
    Ok((own.bytes, own.bytes))
}

/// A buffer an all_to_all sends: one of a declared tensor's list, or a mismatch fault's scratch
/// buffer (one per element type and size).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Sent {
    Tensor(TensorId, u32),
    Scratch(DType, u64),
}

/// The interpreter's own buffers as they are replayed: their bytes, each a whole new segment.
#[derive(Default)]
struct Own {
    bytes: u64,
}

impl Own {
    fn allocate(
        &mut self,
        allocator: &mut CachingAllocator,
        size_bytes: u64,
        stream: u16,
    ) -> Result<(), String> {
        let (allocated, reserved) = (allocator.allocated_bytes(), allocator.reserved_bytes());
        let whole_segment = matches!(
            allocator.allocate(size_bytes, stream),
            Allocation::NewSegment(_)
        ) && allocator.allocated_bytes() - allocated
            == allocator.reserved_bytes() - reserved;
        if !whole_segment {
            return Err(format!(
                "{NOT_COMPARABLE_OLD} (its {size_bytes}-byte buffer shares a segment with \
                 others, so its reserved bytes cannot be told apart)"
            ));
        }
        self.bytes += allocator.allocated_bytes() - allocated;
        Ok(())
    }
}

pub(super) fn memory_sentence(rows: &[MemoryRow]) -> String {
    let compared = rows.iter().filter_map(MemoryRow::differing);
    let (agreeing, total) = compared.fold((0, 0), |(agreeing, total), differing| {
        (agreeing + usize::from(differing.is_empty()), total + 1)
    });
    format!(
        "{agreeing} of {total} compared scenarios agree on peak allocated, peak reserved and \
         cache releases, PyTorch's peaks less the interpreter's own bytes ({} not compared: \
         the verdict column says why)",
        rows.len() - total
    )
}

pub(super) const MEMORY_HEADER: [&str; 10] = [
    "scenario",
    "rank",
    "interpreter's own (allocated / reserved)",
    "sim peak allocated",
    "torch peak allocated",
    "sim peak reserved",
    "torch peak reserved",
    "sim cache releases",
    "torch cache releases",
    "verdict",
];

/// A PyTorch figure: the median run's, with the spread where the runs differ.
fn shown(figure: &MeasuredFigure, runs: usize) -> String {
    let value = if figure.median.fract() == 0.0 {
        format!("{}", figure.median as u64)
    } else {
        format!("{:.1}", figure.median)
    };
    if figure.spread == 0.0 {
        format!("{value} ({runs} runs)")
    } else {
        format!("{value} (spread {}, {runs} runs)", figure.spread)
    }
}

/// One row per scenario under [`MEMORY_HEADER`]; bytes.
pub(super) fn memory_rows(rows: &[MemoryRow]) -> Vec<Vec<String>> {
    rows.iter()
        .map(|row| {
            let sim = &row.simulated;
            let (own, torch) = match &row.torch {
                Ok(torch) => (
                    format!(
                        "{} / {} ({})",
                        torch.interpreter_bytes.0,
                        torch.interpreter_bytes.1,
                        if torch.interpreter_bytes_recorded {
                            "recorded"
                        } else {
                            "derived"
                        }
                    ),
                    [
                        shown(&torch.peak_allocated_bytes, torch.runs),
                        shown(&torch.peak_reserved_bytes, torch.runs),
                        shown(&torch.cache_releases, torch.runs),
                    ],
                ),
                Err(_) => ("–".to_string(), ["–".to_string(), "–".into(), "–".into()]),
            };
            let differing = row.differing().unwrap_or_default();
            let verdict = match &row.torch {
                Err(why) => why.clone(),
                Ok(_) if differing.is_empty() => "agree".to_string(),
                Ok(_) => format!("differ: {}", differing.join(", ")),
            };
            let [allocated, reserved, releases] = torch;
            vec![
                row.scenario.clone(),
                row.rank.to_string(),
                own,
                sim.peak_allocated_bytes.to_string(),
                allocated,
                sim.peak_reserved_bytes.to_string(),
                reserved,
                sim.cache_releases.to_string(),
                releases,
                verdict,
            ]
        })
        .collect()
}

#[cfg(test)]
mod tests {
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
        memory_row("s", scenario, &simulated, runs, None).expect("a row")
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
        let scenario = parse(
            "[cluster]\nranks = 1\n[tensors]\nx = \"2MiB\"\n[[op]]\ngemm = [1024, 1024, 1024]\n",
        );
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
}
