//! `hw`: run a c10dsim scenario on real NVIDIA GPUs and write the same
//! [`sim::timeline::Timeline`] the simulator writes, so that the two can be diffed.
//!
//! The crate re-enacts PyTorch's `ProcessGroupNCCL` (docs/semantics.md R8–R15, R26) over cudarc's
//! driver API, NVRTC, cuBLAS and a thin NCCL communicator of its own: per process group an
//! internal NCCL stream (high priority when asked, R9), an input-ready event recorded on the
//! current stream and waited on by the internal stream (R10a), Works with end events (R10d),
//! `async_op=False` on the current stream (2.12) or on the internal stream followed by `wait()`
//! (2.5, R11), `wait()` as a stream dependency (R12), blocking wait as host polling (R15) and a
//! watchdog that aborts communicators after the timeout (R26). Every host call is timed by a
//! monotonic clock, every GPU point by a timed CUDA event, and both are put on one axis by two
//! anchor events that also correct the clocks' drift (`docs/hw.md` explains how). The rest of
//! the `sim::pg` steps are carried out too: straggler delays (R16), the caching allocator's books
//! (R17–R20), coalescing and DDP buckets (R25), the NCCL async error handling (R27), the store's
//! unique-id exchange (R29) and functional collectives' results (R30).
//!
//! It builds and its tests run on machines without a GPU or CUDA libraries: cudarc loads them at
//! run time, and [`probe`] checks each library before any other use, turning absence into an
//! [`HwError`] (exit code 2) instead of cudarc's panic.
//!
//! ```no_run
//! let text = std::fs::read_to_string("scenarios/exp_b_stream_scope.toml").unwrap();
//! let scenario = sim::scenario::parse("scenarios/exp_b_stream_scope.toml", &text).unwrap();
//! let report = hw::probe().unwrap_or_else(|error| {
//!     eprintln!("{error}");
//!     std::process::exit(error.exit_code());
//! });
//! eprintln!("running on {}", report.devices[0].name);
//! let options = hw::HwOptions::from_env().unwrap();
//! let timeline = hw::run_scenario(&scenario, &options).unwrap();
//! println!("{}", serde_json::to_string_pretty(&timeline).unwrap());
//! ```
//!
//! Without a GPU, the same options decide at once whether a scenario could run:
//!
//! ```
//! use hw::{Downscale, HwOptions, Layout, StandIn};
//! let plain = HwOptions::default();
//! let error = Layout::resolve(8, &plain, 1).unwrap_err();
//! assert_eq!(error.exit_code(), 2); // 8 ranks cannot share one GPU
//! let downscaled = HwOptions { downscale: Downscale::parse("model").unwrap(), ..plain };
//! let layout = Layout::resolve(8, &downscaled, 1).unwrap();
//! assert_eq!((layout.rank, layout.world, layout.stand_in), (0, 1, Some(StandIn::Model)));
//! ```
//!
//! | PyTorch / CUDA | here |
//! |---|---|
//! | `ProcessGroupNCCL`, `WorkNCCL` | the executor (`exec.rs`) and its Work state; the Timeline's `CollectiveRecord` |
//! | `ncclComm_t` of a group | `nccl::Communicator` (raw `cudarc::nccl::result`, a stream per call, abortable) |
//! | internal NCCL stream (R9) | a `CudaStream` per group, named `nccl:<group>` in the Timeline |
//! | `torch.cuda.current_stream()` | the op's statically resolved `stream` |
//! | `cudaEvent_t` (timed) | an entry of the device's pre-created event pool, an `exec::Ev` |
//! | `TORCH_NCCL_BLOCKING_WAIT`, `wait(timeout)` | host polling of the end event with the profile's interval (R15) |
//! | watchdog thread (R26) | `watchdog::Watchdog`, `ncclCommAbort` on timeout or async error |
//! | `torch.cuda._sleep`, a kernel of `sms` SMs | the NVRTC spin kernel timed by `%globaltimer` |
//! | `torch.mm` | `cublasGemmEx` (bf16, f16, plain f32) |
//! | `t.item()` | 1-element `cuMemcpyDtoHAsync` to pageable memory, then `cuStreamSynchronize` |
//! | `init_process_group` store, rank 0's unique id (R29) | a file in [`HwOptions::rendezvous_dir`] |
//! | `torchrun` / `srun` ranks | [`HwOptions::from_env`], [`Layout`], [`merge_ranks`] for the per-process Timelines |
//! | `torch.cuda.synchronize()` | `cuCtxSynchronize` |
//! | `CUDACachingAllocator` (R17–R20) | the simulator's own books (`sim::lifetime` over `sim::allocator`: `exec::Memory`), carried out with `cuMemAlloc` / `cuMemFree` and, for a cache release, `cuCtxSynchronize` |

mod clock;
mod cuda;
#[cfg(test)]
mod equivalence;
mod error;
mod exec;
#[cfg(test)]
mod fake;
#[cfg(test)]
mod golden;
mod nccl;
mod options;
mod plan;
mod probe;
pub mod robustness;
mod watchdog;

pub use error::HwError;
pub use options::{
    DeviceChoice, Downscale, HwOptions, LaunchEnv, Launcher, Layout, StandIn, LAUNCHERS,
    MAX_TIMEOUT_MS, MPIRUN, SRUN, TORCHRUN,
};
pub use probe::{DeviceInfo, DeviceReport};

use sim::ranks::RankSet;
use sim::scenario::Scenario;
use sim::timeline::{ScenarioInfo, Source, Timeline, WatchdogRecord};

/// Checks the CUDA driver, NVRTC, cuBLAS and NCCL libraries (before any other cudarc use), then
/// lists the GPUs and the driver, CUDA and NCCL versions. A missing library or device is an
/// [`HwError`] naming it, never a panic.
pub fn probe() -> Result<DeviceReport, HwError> {
    probe::probe()
}

/// Runs `scenario` as one rank on this machine's GPU and returns its measured Timeline
/// (`source: measured`, one rank: this process's; warm-up iterations included and marked by
/// their `iteration`, as the simulator does).
///
/// What needs no GPU is checked first ([`check_without_gpu`]), then the layout is decided
/// ([`Layout::resolve`]): a scenario with more ranks than this process can host fails at once
/// unless [`HwOptions::downscale`] asks for rank 0 alone.
pub fn run_scenario(scenario: &Scenario, options: &HwOptions) -> Result<Timeline, HwError> {
    check_without_gpu(scenario, options)?;
    let report = probe()?;
    let layout = Layout::resolve(scenario.cluster.ranks, options, report.devices.len())?;
    let timed;
    let scenario = match options.timeout_ns {
        None => scenario,
        Some(timeout_ns) => {
            // `--timeout-ms`: every group's timeout, for the watchdog and blocking wait alike.
            let mut copy = scenario.clone();
            copy.groups
                .iter_mut()
                .for_each(|g| g.timeout_ns = timeout_ns);
            timed = copy;
            &timed
        }
    };
    let plan = plan::RankPlan::new(scenario, &layout)?;
    if let Some(refusal) = exec::Executor::<cuda::CudaDevice>::refusal(scenario, &plan) {
        return Err(refusal);
    }
    let rendezvous = layout.launched.then(|| nccl::Rendezvous {
        dir: options.rendezvous_dir.clone(),
        run_key: options.run_key.clone(),
    });
    if let Some(rendezvous) = &rendezvous {
        // An id file an earlier launch of this run key left (it crashed before deleting it)
        // goes before the GPU setup, so that the other ranks, still in theirs, do not read it.
        for group in plan.groups.iter().flatten().filter(|g| g.comm_rank == 0) {
            rendezvous.remove(&group.name);
        }
    }
    let mut device = cuda::CudaDevice::new(scenario, &plan, layout.device, rendezvous)?;
    device.start_clock()?;
    let mut executor = exec::Executor::new(scenario, &plan, &mut device);
    executor.setup()?;
    let mut log = executor.run()?;
    let clock = device.finish_clock()?;
    let findings = std::mem::take(&mut log.findings);
    let records = std::mem::take(&mut log.records);
    let ended_early = log.ended_early;
    let rank = log.resolve(&plan, |event| {
        if exec::Device::query(&mut device, event)? {
            exec::Device::event_time_ns(&mut device, event).map(Some)
        } else {
            Ok(None)
        }
    })?;

    let mut timeline = Timeline::for_scenario(scenario, Source::Measured, |kind| {
        sim::nccl::kernel_name(scenario, kind)
    });
    timeline.machine = report.machine(layout.device);
    timeline
        .machine
        .extend(run_facts(&layout, clock, device.origin_unix_ns));
    timeline.ranks.push(rank);
    timeline.findings = findings;
    timeline.watchdog = records;
    if ended_early {
        // The GPU may still run work that never ends: freeing its memory or destroying its
        // context would wait for it. The process ends soon after and takes the GPU work along.
        std::mem::forget(device);
    }
    Ok(timeline)
}

/// Ends the process at once with `code`, running no exit handler: after a watchdog's verdict the
/// GPU may still run a kernel that never ends, and the CUDA driver's exit handlers would wait
/// for it (measured on the H200: the report was written 5.4 s in, and the process still had not
/// ended 40 s later). PyTorch's error handling takes the process down the same way, whatever
/// the GPU holds (R27).
pub fn exit_without_cleanup(code: u8) -> ! {
    use std::io::Write;
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    // SAFETY: `_exit` ends the process; nothing of it runs afterwards.
    unsafe { libc::_exit(i32::from(code)) }
}

/// Refuses (exit 2), before any GPU is touched, what is wrong whatever the machine: a launch
/// that does not match the scenario ([`Layout::check_launch`]), a rendezvous folder that does
/// not exist or take files (when the ranks use it), and faults a hardware run cannot produce
/// (the rank this process runs comes from the launch: 0 when downscaled or alone).
pub fn check_without_gpu(scenario: &Scenario, options: &HwOptions) -> Result<(), HwError> {
    Layout::check_launch(scenario.cluster.ranks, options)?;
    if options.uses_rendezvous() {
        options.check_rendezvous_dir()?;
    }
    let rank = options.launch.as_ref().map_or(0, |launch| launch.rank);
    let alone = options.launch.is_none() || options.downscale != Downscale::Off;
    match exec::not_on_hardware(scenario, rank, alone) {
        Some(why) => Err(HwError::Unsupported(why)),
        None => Ok(()),
    }
}

/// Whether a Timeline of `hw` ended early: its process was taken down by a verdict (a timeout,
/// an async error), by a `die` fault or by an out-of-memory.
pub fn ended_early(timeline: &Timeline) -> bool {
    !timeline.findings.is_empty()
        || timeline
            .watchdog
            .iter()
            .any(|record| record.event == sim::timeline::WatchdogEvent::Exit)
}

/// `machine` entry: wall-clock time (Unix ns) of the rank's time 0.
pub const ORIGIN_KEY: &str = "host_origin_unix_ns";

/// The most the processes of one launched run may start apart (a day: any launcher's stragglers
/// start within minutes); parts further apart are not of one run.
const MAX_ORIGIN_SPREAD_NS: u64 = 86_400_000_000_000;

/// Joins the one-rank Timelines of a launched run (one per process, each with its own time 0)
/// into one Timeline holding every rank on a common axis: each rank is shifted by its
/// [`ORIGIN_KEY`] relative to the earliest. On one host all processes read the same wall clock,
/// so the axes agree to about a microsecond; across hosts, to the hosts' clock synchronisation
/// (NTP: milliseconds; PTP: microseconds). `machine` keeps the first rank's entries, less the
/// per-rank ones, with the largest alignment uncertainty. Every part's findings and watchdog
/// records are kept, the records shifted as their part's rank and put in time order.
/// Each part comes with the name its errors give it (the file it was read from).
pub fn merge_ranks(parts: Vec<(String, Timeline)>) -> Result<Timeline, HwError> {
    let bad = |name: &str, why: String| HwError::Merge(format!("{name}: {why}"));
    let origin = |(name, part): &(String, Timeline)| -> Result<u64, HwError> {
        let Some(text) = part.machine.get(ORIGIN_KEY) else {
            return Err(bad(
                name,
                format!("no {ORIGIN_KEY} (not written by one process of `c10dsim hw`)"),
            ));
        };
        text.parse().map_err(|_| {
            bad(
                name,
                format!("{ORIGIN_KEY} {text:?} is not a wall-clock time in Unix ns"),
            )
        })
    };
    let mut parts = parts;
    parts.sort_by_key(|(_, part)| part.ranks.first().map(|rank| rank.rank));
    let (first_name, first) = parts
        .first()
        .ok_or_else(|| HwError::Merge("no Timeline given".into()))?;
    let earliest = parts.iter().map(origin).collect::<Result<Vec<_>, _>>()?;
    let earliest = earliest.into_iter().min().unwrap_or(0);
    let mut merged = first.clone();
    merged.ranks.clear();
    merged.findings.clear();
    merged.watchdog.clear();
    let mut uncertainty_ns = 0u64;
    for named in &parts {
        let (name, part) = named;
        if part.scenario.source_hash != first.scenario.source_hash {
            return Err(bad(
                name,
                format!(
                    "scenario {} (hash {}) is not {first_name}'s {} (hash {})",
                    part.scenario.name,
                    part.scenario.source_hash,
                    first.scenario.name,
                    first.scenario.source_hash
                ),
            ));
        }
        // One source text, yet another header (`--seed`, a hand-edited file): the merge would
        // take the first part's and write a Timeline its own readers refuse.
        if let Some(field) = differing_field(&part.scenario, &first.scenario) {
            return Err(bad(
                name,
                format!("its {field} as in {first_name}'s: not parts of one run"),
            ));
        }
        if part.ops != first.ops {
            return Err(bad(
                name,
                format!("its ops are not {first_name}'s: not parts of one run"),
            ));
        }
        if part.source != first.source {
            let source = |timeline: &Timeline| format!("{:?}", timeline.source).to_lowercase();
            return Err(bad(
                name,
                format!(
                    "a {} Timeline, not {} as {first_name}",
                    source(part),
                    source(first)
                ),
            ));
        }
        // A process's `world`: how many processes its launch started (1 when downscaled to
        // rank 0 alone), so parts of one launch agree on it.
        let world = |timeline: &Timeline| timeline.machine.get("world").cloned();
        if world(part) != world(first) {
            let shown = |world: Option<String>| world.unwrap_or_else(|| "none".to_string());
            return Err(bad(
                name,
                format!(
                    "one process of a launch of {} (machine.world), not of {} as {first_name}: \
                     not the same launch (a downscaled run is rank 0 alone, world 1)",
                    shown(world(part)),
                    shown(world(first))
                ),
            ));
        }
        let [rank] = part.ranks.as_slice() else {
            return Err(bad(
                name,
                format!("holds {} ranks, not 1", part.ranks.len()),
            ));
        };
        if !rank.stands_for.is_empty() {
            return Err(bad(
                name,
                format!(
                    "rank {} stands for {}, a folded Timeline's: a process of `c10dsim hw` \
                     writes its own rank alone",
                    rank.rank,
                    rank.stands_for.named()
                ),
            ));
        }
        let launched = world(part).and_then(|world| world.parse::<u32>().ok());
        if let Some(launched) = launched.filter(|&launched| rank.rank >= launched) {
            return Err(bad(
                name,
                format!(
                    "rank {} of a launch of {launched} processes (machine.world): no process of \
                     that launch",
                    rank.rank
                ),
            ));
        }
        if merged.ranks.iter().any(|r| r.rank == rank.rank) {
            // The parts are in rank order: the first one of this rank is the other file.
            let (other, _) = (parts.iter())
                .find(|(_, p)| p.ranks.first().map(|r| r.rank) == Some(rank.rank))
                .expect("a merged rank came from a part");
            return Err(bad(
                name,
                format!("rank {} again (also in {other})", rank.rank),
            ));
        }
        let mut rank = rank.clone();
        let delta_ns = origin(named)? - earliest;
        if delta_ns > MAX_ORIGIN_SPREAD_NS {
            return Err(bad(
                name,
                format!(
                    "started {} s after the first part: the parts of one launched run start \
                     within seconds of each other",
                    delta_ns / 1_000_000_000
                ),
            ));
        }
        shift_rank(&mut rank, delta_ns).map_err(|why| bad(name, why))?;
        merged.ranks.push(rank);
        merged.findings.extend(part.findings.iter().cloned());
        for record in &part.watchdog {
            let at_ns = shift_time(record.at_ns, delta_ns).map_err(|why| bad(name, why))?;
            merged.watchdog.push(WatchdogRecord {
                at_ns,
                ..record.clone()
            });
        }
        let part_uncertainty = part
            .machine
            .get("clock_alignment_uncertainty_ns")
            .and_then(|text| text.parse().ok())
            .unwrap_or(0);
        uncertainty_ns = uncertainty_ns.max(part_uncertainty);
    }
    // In time order, as every Timeline's watchdog records are.
    merged
        .watchdog
        .sort_by_key(|record| (record.at_ns, record.rank));
    for key in ["rank", "gpu_ordinal"] {
        merged.machine.remove(key);
    }
    merged
        .machine
        .insert(ORIGIN_KEY.to_string(), earliest.to_string());
    merged.machine.insert(
        "clock_alignment_uncertainty_ns".to_string(),
        uncertainty_ns.to_string(),
    );
    Ok(merged)
}

/// The ranks of `merged`'s launch (`machine.world` processes: ranks 0 to world − 1) that it
/// holds no record of: processes whose part was not given to [`merge_ranks`] (a lost file, a
/// process killed before it wrote one). Empty when `machine.world` is absent or not a count.
pub fn missing_ranks(merged: &Timeline) -> RankSet {
    let mut missing = RankSet::default();
    let Some(world) = merged
        .machine
        .get("world")
        .and_then(|text| text.parse::<u32>().ok())
    else {
        return missing;
    };
    let mut present: Vec<u32> = merged.ranks.iter().map(|rank| rank.rank).collect();
    present.sort_unstable();
    let mut next = 0u32;
    for rank in present.into_iter().filter(|&rank| rank < world) {
        if rank > next {
            missing.union_with(&RankSet::range(next, rank - 1));
        }
        next = rank + 1;
    }
    if next < world {
        missing.union_with(&RankSet::range(next, world - 1));
    }
    missing
}

/// The first field of a part's `scenario` header that is not the first part's, as
/// `scenario.ranks is 2, not 1` (values as the Timeline writes them); `None` when they are equal.
fn differing_field(part: &ScenarioInfo, first: &ScenarioInfo) -> Option<String> {
    let fields = |info: &ScenarioInfo| match serde_json::to_value(info) {
        Ok(serde_json::Value::Object(fields)) => fields,
        _ => unreachable!("a scenario header serialises as an object"),
    };
    let (part, first) = (fields(part), fields(first));
    first.iter().find_map(|(key, value)| {
        let other = part.get(key).unwrap_or(&serde_json::Value::Null);
        (other != value).then(|| format!("scenario.{key} is {other}, not {value}"))
    })
}

/// Adds `delta_ns` to every time of a rank's records; a time that never came (`u64::MAX`,
/// as the simulator writes it) stays so. An error when a time would pass `u64::MAX`: the
/// part's times or its origin are not those of a run.
fn shift_rank(rank: &mut sim::timeline::RankTimeline, delta_ns: u64) -> Result<(), String> {
    let mut times: Vec<&mut u64> = Vec::new();
    for call in &mut rank.host {
        times.extend([&mut call.start_ns, &mut call.end_ns]);
    }
    for kernel in &mut rank.kernels {
        times.extend([
            &mut kernel.enqueue_ns,
            &mut kernel.start_ns,
            &mut kernel.end_ns,
        ]);
    }
    for c in &mut rank.collectives {
        times.extend([
            &mut c.host_start_ns,
            &mut c.host_end_ns,
            &mut c.input_ready_ns,
            &mut c.kernel_start_ns,
            &mut c.data_start_ns,
            &mut c.end_ns,
        ]);
        times.extend(c.work_start_ns.as_mut());
        if let Some(wait) = &mut c.wait {
            times.extend([
                &mut wait.host_start_ns,
                &mut wait.host_end_ns,
                &mut wait.released_ns,
            ]);
        }
    }
    for c in &mut rank.unfinished_collectives {
        times.extend([&mut c.host_start_ns, &mut c.host_end_ns]);
        times.extend(c.input_ready_ns.as_mut());
        times.extend(c.kernel_start_ns.as_mut());
        times.extend(c.kernel_end_ns.as_mut());
        if let Some(wait) = &mut c.wait {
            times.push(&mut wait.host_start_ns);
            times.extend(wait.host_end_ns.as_mut());
        }
    }
    times.extend(rank.unfinished_host.as_mut().map(|call| &mut call.start_ns));
    for kernel in &mut rank.unfinished_kernels {
        times.push(&mut kernel.enqueue_ns);
        times.extend(kernel.start_ns.as_mut());
    }
    for mark in &mut rank.marks {
        times.extend([&mut mark.host_ns, &mut mark.gpu_ns]);
    }
    for wait in &mut rank.stream_waits {
        times.extend([&mut wait.source_ns, &mut wait.released_ns]);
    }
    for wait in &mut rank.unfinished_stream_waits {
        times.extend(wait.source_ns.as_mut());
    }
    for query in &mut rank.queries {
        times.push(&mut query.host_ns);
    }
    for release in &mut rank.cache_releases {
        times.extend([&mut release.host_start_ns, &mut release.host_end_ns]);
        times.extend(release.device_idle_ns.as_mut());
    }
    for time in times {
        *time = shift_time(*time, delta_ns)?;
    }
    Ok(())
}

/// `time_ns` moved `delta_ns` later; a time that never came (`u64::MAX`) stays so.
fn shift_time(time_ns: u64, delta_ns: u64) -> Result<u64, String> {
    if time_ns == u64::MAX {
        return Ok(time_ns);
    }
    time_ns.checked_add(delta_ns).ok_or_else(|| {
        format!("a time of {time_ns} ns, {delta_ns} ns later, is past what a Timeline holds")
    })
}

/// The run's own entries of the `machine` map.
fn run_facts(
    layout: &Layout,
    clock: clock::ClockMap,
    origin_unix_ns: u64,
) -> Vec<(String, String)> {
    let downscale = match layout.stand_in {
        None => "off".to_string(),
        Some(StandIn::Nccl) => "rank 0 alone; collectives: 1-rank NCCL".to_string(),
        Some(StandIn::Spin { duration_ns }) => {
            format!("rank 0 alone; collectives: {duration_ns} ns spin kernels")
        }
        Some(StandIn::Model) => {
            "rank 0 alone; collectives: spin kernels as the simulator plans them (duration, channels)"
                .to_string()
        }
    };
    [
        (
            "backend",
            format!("c10dsim-hw {}", env!("CARGO_PKG_VERSION")),
        ),
        ("rank", layout.rank.to_string()),
        ("world", layout.world.to_string()),
        ("gpu_ordinal", layout.device.to_string()),
        ("downscale", downscale),
        (
            "clock_alignment_uncertainty_ns",
            clock.uncertainty_ns.to_string(),
        ),
        ("gpu_clock_drift_ppm", format!("{:+.2}", clock.drift_ppm())),
        (ORIGIN_KEY, origin_unix_ns.to_string()),
        (
            "events",
            "every event timed (behaves as TORCH_NCCL_ENABLE_TIMING=1)".to_string(),
        ),
        (
            "default_stream",
            "a non-blocking stream (like PyTorch's streams, no implicit sync)".to_string(),
        ),
    ]
    .into_iter()
    .map(|(key, value)| (key.to_string(), value))
    .collect()
}

#[cfg(test)]
mod tests;
