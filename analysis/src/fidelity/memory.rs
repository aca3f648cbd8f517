//! The memory part of the fidelity table: the caching allocator's peaks and cache releases of
//! the simulation against PyTorch's (`torch.cuda.max_memory_allocated` / `_reserved`,
//! `num_alloc_retries`). PyTorch's peaks are the process's: they hold what the interpreter
//! allocates itself before the program and keeps to the end (GEMM operands, all_to_all receive
//! buffers, mismatch scratch buffers, cuBLAS workspaces), which the simulator does not book, so
//! those bytes are taken off them — as the run recorded them, or, for a run recorded before the
//! interpreter reported them, as its setup makes them where that can be derived exactly. Where
//! the timing runs predate that record, runs made for the memory table alone (the memory runs,
//! `tests/data/torch/memory`) stand in, once [`memory_run_mismatch`] found them runs of the
//! same program.

use crate::calibrate::measurement_overrides;
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

/// Which runs PyTorch's memory figures of a row are of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MemorySource {
    /// The runs the timing table is made of (`<scenario>.run<k>.json`).
    TimingRuns,
    /// Runs made for the memory table alone, used where the timing runs do not all record the
    /// interpreter's own bytes.
    MemoryRuns,
}

/// PyTorch's figures, the interpreter's own bytes taken off the peaks.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct MeasuredMemory {
    pub source: MemorySource,
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
/// than the scenario has: another program than the one simulated). PyTorch's figures are the
/// timing runs' (`torch`) where every one records the interpreter's own bytes, else the memory
/// runs' where there are any (each already found a run of the same program by
/// [`memory_run_mismatch`]), else the timing runs' with those bytes derived where they can be.
pub fn memory_row(
    name: &str,
    scenario: &Scenario,
    simulated: &Timeline,
    torch: &[Timeline],
    memory_runs: &[Timeline],
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
        None => {
            let timing_runs_record = torch
                .iter()
                .all(|run| run.machine.contains_key(INTERPRETER_ALLOCATED));
            if timing_runs_record || memory_runs.is_empty() {
                measured(scenario, torch, rank, MemorySource::TimingRuns)
            } else {
                measured(scenario, memory_runs, rank, MemorySource::MemoryRuns)
            }
        }
    };
    Some(MemoryRow {
        scenario: name.to_string(),
        rank,
        simulated: simulated_peaks,
        torch: compared,
    })
}

/// Why a memory run does not measure the program the timing runs' row simulates, if it does
/// not: `timing` is the timing run the simulation is made from, `source_hash` the hash of the
/// scenario file's text as it is now under the run's recorded `--set`s (what `c10dsim torch`
/// would record running it today). A memory run is refused unless it was recorded with the
/// same file and `--set`s, from the same text, under the same settings the simulation takes
/// from a Timeline (PyTorch's version, `TORCH_NCCL_ENABLE_TIMING`), and records the
/// interpreter's own bytes.
pub fn memory_run_mismatch(run: &Timeline, timing: &Timeline, source_hash: &str) -> Option<String> {
    let invocation = |timeline: &Timeline| {
        let path = &timeline.scenario.path;
        sim::scenario::read_recorded_invocation(path)
            .map(|(file, sets)| (file.to_string(), sets))
            .map_err(|_| path.clone())
    };
    if invocation(run) != invocation(timing) {
        return Some(format!(
            "recorded as `{}`, the timing runs as `{}`: another scenario or other --sets",
            run.scenario.path, timing.scenario.path
        ));
    }
    if run.scenario.source_hash != source_hash {
        let file = invocation(run).map_or_else(|path| path, |(file, _)| file);
        return Some(format!(
            "recorded from another text of {file} (source_hash {}, the file now {}): record it \
             again",
            run.scenario.source_hash, source_hash
        ));
    }
    let settings = |timeline: &Timeline| -> Vec<String> {
        (measurement_overrides(timeline).iter())
            .map(ToString::to_string)
            .collect()
    };
    if settings(run) != settings(timing) {
        return Some(format!(
            "recorded under other settings than the timing runs, which the simulation takes \
             from them ({}; the timing runs: {})",
            shown_settings(&settings(run)),
            shown_settings(&settings(timing))
        ));
    }
    match recorded_bytes(run) {
        Ok(Some(_)) => None,
        Ok(None) => Some(format!(
            "it does not record the interpreter's own bytes (machine.{INTERPRETER_ALLOCATED}), \
             which a memory run is for"
        )),
        Err(why) => Some(why),
    }
}

fn shown_settings(settings: &[String]) -> String {
    if settings.is_empty() {
        "no --set".to_string()
    } else {
        format!("--set {}", settings.join(" --set "))
    }
}

const INTERPRETER_ALLOCATED: &str = "interpreter_allocated_bytes";

fn measured(
    scenario: &Scenario,
    torch: &[Timeline],
    rank: u32,
    source: MemorySource,
) -> Result<MeasuredMemory, String> {
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
        (own, recorded) = match (recorded_bytes(run)?, source) {
            (Some(bytes), _) => (bytes, true),
            (None, MemorySource::TimingRuns) => (derived_bytes(scenario, rank, run)?, false),
            (None, MemorySource::MemoryRuns) => {
                return Err(
                    "not comparable: a memory run does not record the interpreter's own bytes"
                        .to_string(),
                )
            }
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
        source,
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
        number(INTERPRETER_ALLOCATED)?,
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
    let from_memory_runs = (rows.iter())
        .filter(|row| {
            (row.torch.as_ref()).is_ok_and(|torch| torch.source == MemorySource::MemoryRuns)
        })
        .count();
    let sources = match from_memory_runs {
        0 => String::new(),
        n => {
            format!("{n} of them measured by memory runs, the timing runs predating that record; ")
        }
    };
    format!(
        "{agreeing} of {total} compared scenarios agree on peak allocated, peak reserved and \
         cache releases, PyTorch's peaks less the interpreter's own bytes ({sources}{} not \
         compared: the verdict column says why)",
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

/// The runs a PyTorch figure is of: `3 runs` (the timing runs), `1 memory run`.
fn runs_shown(torch: &MeasuredMemory) -> String {
    let kind = match torch.source {
        MemorySource::TimingRuns => "run",
        MemorySource::MemoryRuns => "memory run",
    };
    let plural = if torch.runs == 1 { "" } else { "s" };
    format!("{} {kind}{plural}", torch.runs)
}

/// A PyTorch figure: the median run's, with the spread where the runs differ.
fn shown(figure: &MeasuredFigure, runs: &str) -> String {
    let value = if figure.median.fract() == 0.0 {
        format!("{}", figure.median as u64)
    } else {
        format!("{:.1}", figure.median)
    };
    if figure.spread == 0.0 {
        format!("{value} ({runs})")
    } else {
        format!("{value} (spread {}, {runs})", figure.spread)
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
                        shown(&torch.peak_allocated_bytes, &runs_shown(torch)),
                        shown(&torch.peak_reserved_bytes, &runs_shown(torch)),
                        shown(&torch.cache_releases, &runs_shown(torch)),
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
mod tests;
