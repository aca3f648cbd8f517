//! Chrome trace event JSON shaped like torch.profiler's (Kineto's) export, written as it is built:
//! one file with every rank for Perfetto ([`write_chrome_trace`]), or one file per rank for
//! Holistic Trace Analysis ([`RankTraces`], named by [`rank_file_name`]). Both hold the same
//! events (`docs/timeline-format.md#traces-for-hta-and-perfetto`); memory beyond the Timeline is
//! bounded by its ops, groups and ranks, never by its events.
//!
//! Layout of a rank: one process, pid `rank + 1`; thread 1 is the host (Python main thread),
//! thread `2 + s` is stream `s` (also the kernels' `stream` argument); the watchdog and the
//! heartbeat monitor of group `g` (R26, R28) are threads `1000 + 2g` and `1001 + 2g`. None of these
//! is 0: HTA takes a pid, tid or stream 0 for a GPU.
//!
//! On the host thread, as torch.profiler writes them: a `ProfilerStep#<iteration>` annotation per
//! iteration, each host call as a `cpu_op`, a `record_param_comms` op inside every collective call
//! with PyTorch's arguments (collective name, dtype, element counts, group), a `cudaLaunchKernel`
//! per kernel (from the call's start, or its previous launch, to the launch) whose `correlation`
//! the kernel carries, joined to it by an `ac2g` flow arrow. Kernels sit on their stream's
//! thread, NCCL's named as NCCL compiles them ([`nccl_names`]). Every `cudaStreamWaitEvent` is a
//! flow arrow from the event's firing on its stream to the point where the waiting stream was
//! released; marks, races, watchdog steps and findings are instant events at their times.

mod events;
pub mod nccl_names;
#[cfg(test)]
mod tests;

use serde::Serialize;
use sim::timeline::Timeline;
use std::collections::BTreeMap;
use std::io::{self, Write};

/// How times are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Clock {
    /// Microseconds with the nanoseconds as decimals (`"ts": 1234.567`), as torch.profiler
    /// writes them since PyTorch 2.3: the single file, for Perfetto.
    Nanoseconds,
    /// Whole microseconds, each time rounded down (`"ts": 1234`): the per-rank files. HTA rounds
    /// finer times itself (with a warning), starts up and ends down, which can give a
    /// sub-microsecond slice a negative length; rounding both down keeps every slice's length
    /// non-negative and every nesting intact.
    WholeMicroseconds,
}

/// The file name of a rank's trace in a per-rank folder: `rank<N>.pt.trace.json`, the suffix
/// TensorBoard's profiler plugin looks for; HTA reads every `.json` file of the folder.
pub fn rank_file_name(rank: u32) -> String {
    format!("rank{rank}.pt.trace.json")
}

/// Writes one trace with every rank of `timeline` (Perfetto, chrome://tracing).
pub fn write_chrome_trace(timeline: &Timeline, out: &mut dyn Write) -> io::Result<()> {
    let context = events::TraceContext::new(timeline);
    write!(
        out,
        "{{\"schemaVersion\":1,\"displayTimeUnit\":\"ms\",\"otherData\":"
    )?;
    serde_json::to_writer(&mut *out, &other_data(timeline))?;
    write!(out, ",\"traceEvents\":[")?;
    let mut sink = events::Sink::new(out, Clock::Nanoseconds);
    let kernels: u64 = timeline.ranks.iter().map(events::RankIds::launches).sum();
    let mut ids = events::RankIds {
        correlation_base: 0,
        wait_flow_base: kernels,
        runtime_correlation_base: kernels,
    };
    for position in 0..timeline.ranks.len() {
        context.rank_events(position, ids, &mut sink)?;
        let rank = &timeline.ranks[position];
        ids.correlation_base += events::RankIds::launches(rank);
        ids.wait_flow_base += rank.stream_waits.len() as u64;
        ids.runtime_correlation_base += events::RankIds::runtime_correlations(rank);
    }
    context.unheld_ranks(&mut sink)?;
    context.rankless_findings(0, false, &mut sink)?;
    let out = sink.finish()?;
    writeln!(out, "]}}")
}

/// One file per rank for HTA: with `distributedInfo` and `deviceProperties`, whole-microsecond
/// times, and the findings of that rank and of none.
pub struct RankTraces<'a> {
    context: events::TraceContext<'a>,
}

impl<'a> RankTraces<'a> {
    pub fn new(timeline: &'a Timeline) -> RankTraces<'a> {
        RankTraces {
            context: events::TraceContext::new(timeline),
        }
    }

    /// Each rank's position in `timeline.ranks` and its file name ([`rank_file_name`]).
    pub fn files(&self) -> impl Iterator<Item = (usize, String)> + 'a {
        let timeline = self.context.timeline();
        (0..timeline.ranks.len())
            .map(|position| (position, rank_file_name(timeline.ranks[position].rank)))
    }

    /// Writes the file of the rank at `position`.
    pub fn write(&self, position: usize, out: &mut dyn Write) -> io::Result<()> {
        write_rank_trace_with(&self.context, position, out)
    }
}

fn write_rank_trace_with(
    context: &events::TraceContext,
    position: usize,
    out: &mut dyn Write,
) -> io::Result<()> {
    let timeline = context.timeline();
    let rank = &timeline.ranks[position];
    // Pretty-printed, so that `"rank": N` reads as HTA's file scan expects (a space after the
    // colon) before any event.
    let header = RankHeader {
        schema_version: 1,
        distributed_info: context.distributed_info(rank.rank),
        device_properties: [device_properties(timeline, rank.rank)],
        display_time_unit: "ms",
        other_data: other_data(timeline),
    };
    let text = serde_json::to_string_pretty(&header)?;
    let open = text.strip_suffix("\n}").unwrap_or(&text);
    write!(out, "{open},\n  \"traceEvents\": [")?;
    let mut sink = events::Sink::new(out, Clock::WholeMicroseconds);
    let ids = events::RankIds {
        correlation_base: 0,
        wait_flow_base: events::RankIds::launches(rank),
        runtime_correlation_base: events::RankIds::launches(rank),
    };
    context.rank_events(position, ids, &mut sink)?;
    context.rankless_findings(position, true, &mut sink)?;
    let out = sink.finish()?;
    writeln!(out, "\n  ]\n}}")
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct RankHeader {
    schema_version: u32,
    distributed_info: events::DistributedInfo,
    device_properties: [DeviceProperties; 1],
    display_time_unit: &'static str,
    other_data: OtherData,
}

/// The GPU, as far as the Timeline's `machine` says (its device, or the simulator's preset).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct DeviceProperties {
    id: u32,
    name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    num_sms: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    compute_major: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    compute_minor: Option<u32>,
}

fn device_properties(timeline: &Timeline, rank: u32) -> DeviceProperties {
    let machine = &timeline.machine;
    let preset = machine
        .get("gpu")
        .and_then(|name| sim::scenario::GpuSpec::preset(name));
    let capability = machine
        .get("compute_capability")
        .and_then(|text| text.split_once('.'))
        .and_then(|(major, minor)| Some((major.parse().ok()?, minor.parse().ok()?)));
    DeviceProperties {
        id: rank,
        name: machine
            .get("device")
            .or_else(|| machine.get("gpu"))
            .cloned()
            .unwrap_or_else(|| "unknown".into()),
        num_sms: machine
            .get("sms")
            .and_then(|sms| sms.parse().ok())
            .or(preset.map(|gpu| gpu.sms)),
        compute_major: capability.map(|(major, _)| major),
        compute_minor: capability.map(|(_, minor)| minor),
    }
}

#[derive(Serialize)]
struct OtherData {
    producer: &'static str,
    source: sim::timeline::Source,
    scenario: String,
    seed: u64,
    machine: BTreeMap<String, String>,
}

fn other_data(timeline: &Timeline) -> OtherData {
    OtherData {
        producer: "c10dsim",
        source: timeline.source,
        scenario: timeline.scenario.name.clone(),
        seed: timeline.scenario.seed,
        machine: timeline.machine.clone(),
    }
}
