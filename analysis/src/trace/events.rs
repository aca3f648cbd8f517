//! The events of one rank, each written as soon as it is built: nothing here holds more than the
//! op table, the groups' members and one event.
//!
//! Every kind of event is written through the one `Sink` and reads the one `TraceContext`:
//! host calls, kernels and stream waits here; `record_param_comms` in [`comms`]; races, the
//! watchdog's steps and the findings in [`incidents`].
//!
//! About 960 lines in one piece: host calls, kernel launches, kernels and stream waits (those
//! released and those never released) share the correlation ids and flow arrows numbered here,
//! so they are written together.

use super::nccl_names::{self, NcclKernel};
use super::Clock;
use serde::Serialize;
use serde_json::{json, Value};
use sim::ranks::RankSet;
use sim::scenario::{CollectiveKind, Group};
use sim::timeline::{
    group_ranks_in, CollectiveRecord, Finding, FindingKind, HostCall, KernelClass, OpRef,
    RankTimeline, StreamRef, ThreadKind, Timeline, UnfinishedCollective, WatchdogEvent,
};
use std::collections::BTreeSet;
use std::io::{self, Write};

mod comms;
mod incidents;

use incidents::last_recorded_ns;

/// The Python main thread of every rank.
const HOST_TID: u64 = 1;
/// CUPTI's callback id of `cudaLaunchKernel`, which torch.profiler writes as `cbid`.
const CUDA_LAUNCH_KERNEL_CBID: u32 = 211;
/// `cudaStreamWaitEvent` and its CUPTI callback id.
const STREAM_WAIT_EVENT: (&str, u32) = ("cudaStreamWaitEvent", 147);

/// The CUDA runtime call (name and CUPTI callback id) that an op's host call is, for the ops
/// that are one.
fn runtime_call(key: &str) -> Option<(&'static str, u32)> {
    Some(match key {
        "device_sync" => ("cudaDeviceSynchronize", 165),
        "stream_sync" => ("cudaStreamSynchronize", 131),
        "event_sync" => ("cudaEventSynchronize", 137),
        "record_event" => ("cudaEventRecord", 135),
        "wait_event" => STREAM_WAIT_EVENT,
        _ => return None,
    })
}
/// Whether an op's host call is one kernel launch and nothing else (`kernel`, `gpu_sleep_us`):
/// its `cuda_runtime` `cudaLaunchKernel` (`TraceContext::kernels`) is the whole call, which has no
/// `cpu_op` of its own, as CUPTI writes only the runtime call.
fn launch_alone(key: &str) -> bool {
    matches!(key, "kernel" | "gpu_sleep")
}

/// PyTorch's profiler writes a rank list of at most this many ranks whole, and cuts a longer one.
const LISTED_RANKS: usize = 30;

/// A rank's process in the trace, named `name` and sorted by its rank, with its host thread.
fn rank_process(rank: u32, name: &str, sink: &mut Sink) -> io::Result<()> {
    let pid = pid(rank);
    sink.metadata("process_name", pid, 0, json!({ "name": name }))?;
    sink.metadata("process_sort_index", pid, 0, json!({"sort_index": rank}))?;
    sink.metadata(
        "thread_name",
        pid,
        HOST_TID,
        json!({"name": "host (python main thread)"}),
    )
}

fn pid(rank: u32) -> u64 {
    u64::from(rank) + 1
}

fn stream_tid(stream: u16) -> u64 {
    2 + u64::from(stream)
}

/// Where a rank's correlation and flow ids start, so that they are unique in their file.
#[derive(Debug, Clone, Copy)]
pub(super) struct RankIds {
    /// Kernel `k` of the rank has correlation (and `ac2g` flow id) `correlation_base + k + 1`,
    /// its unfinished kernel `u` `correlation_base + kernels + u + 1`.
    pub correlation_base: u64,
    /// Stream wait `w` of the rank has flow id `wait_flow_base + w + 1`.
    pub wait_flow_base: u64,
    /// The rank's CUDA runtime calls other than launches: host call `h` has correlation
    /// `runtime_correlation_base + h + 1`, the `cudaStreamWaitEvent` of stream wait `w` inside
    /// a call `runtime_correlation_base + host calls + w + 1`, that of unfinished stream wait
    /// `u` (never released) `runtime_correlation_base + host calls + stream waits + u + 1`.
    pub runtime_correlation_base: u64,
}

impl RankIds {
    fn host_call_correlation(&self, call: usize) -> u64 {
        self.runtime_correlation_base + call as u64 + 1
    }

    fn stream_wait_correlation(&self, rank: &RankTimeline, wait: usize) -> u64 {
        self.runtime_correlation_base + (rank.host.len() + wait) as u64 + 1
    }

    fn unreleased_wait_correlation(&self, rank: &RankTimeline, wait: usize) -> u64 {
        self.runtime_correlation_base
            + (rank.host.len() + rank.stream_waits.len() + wait) as u64
            + 1
    }

    /// The correlations a rank's launches take.
    pub fn launches(rank: &RankTimeline) -> u64 {
        (rank.kernels.len() + rank.unfinished_kernels.len()) as u64
    }

    /// The correlations a rank's runtime calls other than launches take.
    pub fn runtime_correlations(rank: &RankTimeline) -> u64 {
        (rank.host.len() + rank.stream_waits.len() + rank.unfinished_stream_waits.len()) as u64
    }
}

/// The `traceEvents` array being written: one event per line.
pub(super) struct Sink<'w> {
    out: &'w mut dyn Write,
    clock: Clock,
    first: bool,
}

impl<'w> Sink<'w> {
    pub fn new(out: &'w mut dyn Write, clock: Clock) -> Sink<'w> {
        Sink {
            out,
            clock,
            first: true,
        }
    }

    /// The writer, after the last event.
    pub fn finish(self) -> io::Result<&'w mut dyn Write> {
        if !self.first {
            self.out.write_all(b"\n")?;
        }
        Ok(self.out)
    }

    fn event(&mut self, event: &Value) -> io::Result<()> {
        if !self.first {
            self.out.write_all(b",")?;
        }
        self.out.write_all(b"\n")?;
        self.first = false;
        serde_json::to_writer(&mut *self.out, event).map_err(io::Error::from)
    }

    fn time(&self, ns: u64) -> Value {
        match self.clock {
            Clock::Nanoseconds => json!(ns as f64 / 1_000.0),
            Clock::WholeMicroseconds => json!(ns / 1_000),
        }
    }

    fn length(&self, start_ns: u64, end_ns: u64) -> Value {
        match self.clock {
            Clock::Nanoseconds => json!(end_ns.saturating_sub(start_ns) as f64 / 1_000.0),
            Clock::WholeMicroseconds => json!((end_ns / 1_000).saturating_sub(start_ns / 1_000)),
        }
    }

    /// A process or thread name. It carries a time (0) as torch.profiler's do: without one,
    /// HTA's table of times has a gap, turns to floats, and HTA warns that it rounds them.
    fn metadata(&mut self, name: &str, pid: u64, tid: u64, args: Value) -> io::Result<()> {
        let ts = self.time(0);
        self.event(
            &json!({"ph": "M", "name": name, "pid": pid, "tid": tid, "ts": ts,
            "args": args}),
        )
    }

    fn slice(
        &mut self,
        cat: &str,
        name: &str,
        (pid, tid): (u64, u64),
        start_ns: u64,
        end_ns: u64,
        args: Value,
    ) -> io::Result<()> {
        let event = json!({"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid,
            "ts": self.time(start_ns), "dur": self.length(start_ns, end_ns), "args": args});
        self.event(&event)
    }

    fn instant(
        &mut self,
        cat: &str,
        name: &str,
        (pid, tid): (u64, u64),
        at_ns: u64,
        args: Value,
    ) -> io::Result<()> {
        let event = json!({"ph": "i", "s": "t", "cat": cat, "name": name, "pid": pid,
            "tid": tid, "ts": self.time(at_ns), "args": args});
        self.event(&event)
    }

    /// A flow arrow from `from` to the slice enclosing `to`'s time on its thread.
    fn flow(
        &mut self,
        cat: &str,
        name: &str,
        id: u64,
        from: ((u64, u64), u64),
        to: ((u64, u64), u64),
    ) -> io::Result<()> {
        let (((from_pid, from_tid), from_ns), ((to_pid, to_tid), to_ns)) = (from, to);
        self.event(&json!({"ph": "s", "cat": cat, "name": name, "id": id,
            "pid": from_pid, "tid": from_tid, "ts": self.time(from_ns)}))?;
        self.event(
            &json!({"ph": "f", "bp": "e", "cat": cat, "name": name, "id": id,
            "pid": to_pid, "tid": to_tid, "ts": self.time(to_ns)}),
        )
    }
}

/// What the trace says of an op beyond the Timeline's op table.
struct OpTrace {
    /// An NCCL kernel as a profiler names it.
    nccl: Option<NcclKernel>,
    /// `record_param_comms`'s collective name, for a collective or a barrier.
    collective_name: Option<&'static str>,
    collective: Option<CollectiveKind>,
}

/// PyTorch's name of a collective in `record_param_comms` (`ProcessGroupNCCL`'s calls).
fn param_comms_name(collective: CollectiveKind) -> Option<&'static str> {
    Some(match collective {
        CollectiveKind::AllReduce => "allreduce",
        CollectiveKind::AllGather => "_allgather_base",
        CollectiveKind::ReduceScatter => "_reduce_scatter_base",
        CollectiveKind::Broadcast => "broadcast",
        CollectiveKind::AllToAll => "all_to_all",
        CollectiveKind::Send => "send",
        CollectiveKind::Recv => "recv",
        // No name of its own: its sends and receives are recorded one by one, as `send` and
        // `recv`, from the op table's transfers.
        CollectiveKind::BatchP2p => return None,
    })
}

/// PyTorch's name in `record_param_comms` of the one call a `_coalescing_manager` block of
/// `collective`s makes (R25): its fast path's `ProcessGroupNCCL::allreduce_coalesced`,
/// `allgather_into_tensor_coalesced` and `reduce_scatter_tensor_coalesced` record these names
/// (`torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp`). The manager coalesces no other kind:
/// each of their calls records its own name, as a call outside a block does.
fn coalesced_param_comms_name(collective: CollectiveKind) -> Option<&'static str> {
    match collective {
        CollectiveKind::AllReduce => Some("allreduce_coalesced"),
        CollectiveKind::AllGather => Some("allgather_into_tensor_coalesced"),
        CollectiveKind::ReduceScatter => Some("reduce_scatter_tensor_coalesced"),
        other => param_comms_name(other),
    }
}

/// c10dsim's argument on the `record_param_comms` of a collective that never completed.
const NEVER_COMPLETED: &str = "c10dsim never completed";
/// The argument torch.profiler (Kineto's `processCpuTrace`, since March 2025) gives an op still
/// open when the profiler stopped, whose end it sets to the end of the capture window.
const NEVER_FINISHED: (&str, bool) = ("finished", false);
/// c10dsim's argument on the `cudaLaunchKernel` of a kernel that never ended.
const KERNEL_NEVER_ENDED: &str = "c10dsim kernel never ended";
/// c10dsim's argument on a `cudaStreamWaitEvent` whose waiting stream was never released.
const NEVER_RELEASED: &str = "c10dsim never released";

/// The group facts of `distributedInfo`, as torch.profiler writes them.
#[derive(Serialize)]
pub(super) struct DistributedInfo {
    backend: &'static str,
    rank: u32,
    world_size: u32,
    pg_count: usize,
    pg_config: Vec<GroupConfig>,
    #[serde(skip_serializing_if = "Option::is_none")]
    nccl_version: Option<String>,
}

#[derive(Serialize)]
struct GroupConfig {
    pg_name: String,
    pg_desc: String,
    backend_config: &'static str,
    pg_size: usize,
    ranks: Vec<u32>,
}

/// The Timeline with what every rank's events need: the ops' profiler names and the groups'
/// members.
pub(super) struct TraceContext<'a> {
    timeline: &'a Timeline,
    ops: Vec<OpTrace>,
    /// Per group: the world's ranks for group 0, else the ranks whose collectives the Timeline
    /// holds on it.
    group_ranks: Vec<Vec<u32>>,
}

impl<'a> TraceContext<'a> {
    pub fn new(timeline: &'a Timeline) -> TraceContext<'a> {
        let ops = timeline
            .ops
            .iter()
            .map(|op| {
                let collective = match op.key.as_str() {
                    "barrier" => None,
                    key => CollectiveKind::from_key(key),
                };
                OpTrace {
                    nccl: op.kernel_name.as_deref().and_then(nccl_names::nccl_kernel),
                    collective_name: match op.key.as_str() {
                        "barrier" => Some("barrier"),
                        _ if op.coalesced => collective.and_then(coalesced_param_comms_name),
                        _ => collective.and_then(param_comms_name),
                    },
                    collective,
                }
            })
            .collect();
        let groups = timeline.scenario.groups.len();
        let mut members = vec![BTreeSet::new(); groups];
        for rank in &timeline.ranks {
            let groups = (rank.collectives.iter().map(|c| c.group))
                .chain(rank.unfinished_collectives.iter().map(|c| c.group));
            for group in groups {
                if let Some(set) = members.get_mut(usize::from(group)) {
                    set.insert(rank.rank);
                }
            }
        }
        let group_ranks = members
            .into_iter()
            .enumerate()
            .map(|(group, set)| match group {
                // No scenario has more ranks; a file that says so was not written by c10dsim.
                0 => (0..timeline.scenario.ranks.min(sim::scenario::MAX_RANKS)).collect(),
                _ => set.into_iter().collect(),
            })
            .collect();
        TraceContext {
            timeline,
            ops,
            group_ranks,
        }
    }

    pub fn timeline(&self) -> &'a Timeline {
        self.timeline
    }

    /// `distributedInfo` of `rank`'s file, as the profiler's `_get_distributed_info`
    /// (`torch/profiler/profiler.py`) writes it: `pg_count` is `dist.get_pg_count()`, every
    /// process group made (on every rank, member or not), and `pg_config` lists
    /// `_get_all_pg_configs()`, the groups of `_world.pg_map`, which holds only those the rank
    /// is a member of (`torch/distributed/distributed_c10d.py`). A pair's two-rank communicator
    /// (`p2p:<low>:<high>`) is ProcessGroupNCCL's own, no process group: in neither. The
    /// Timeline keeps no group's members: a rank is a group's where it has a collective on it.
    pub fn distributed_info(&self, rank: u32) -> DistributedInfo {
        let scenario = &self.timeline.scenario;
        let process_groups = (0..scenario.groups.len())
            .filter(|&group| Group::pair_ranks(&scenario.groups[group]).is_none());
        DistributedInfo {
            backend: "nccl",
            rank,
            world_size: scenario.ranks,
            pg_count: process_groups.clone().count(),
            pg_config: process_groups
                .filter(|&group| self.group_ranks[group].contains(&rank))
                .map(|group| GroupConfig {
                    pg_name: group.to_string(),
                    pg_desc: self.group_description(group),
                    backend_config: "cuda:nccl",
                    pg_size: self.group_ranks[group].len(),
                    ranks: self.group_ranks[group].clone(),
                })
                .collect(),
            nccl_version: self.timeline.machine.get("nccl").cloned(),
        }
    }

    /// PyTorch names process groups by creation order (`"0"` the world) and describes the world
    /// as `default_pg`; the others carry the scenario's name as their description.
    fn group_description(&self, group: usize) -> String {
        match group {
            0 => "default_pg".into(),
            _ => self.timeline.scenario.groups[group].clone(),
        }
    }

    /// Every event of the rank at `position` in `timeline.ranks`.
    pub fn rank_events(&self, position: usize, ids: RankIds, sink: &mut Sink) -> io::Result<()> {
        let rank = &self.timeline.ranks[position];
        let pid = pid(rank.rank);
        rank_process(rank.rank, &format!("rank {}", rank.rank), sink)?;
        for (index, stream) in rank.streams.iter().enumerate() {
            let priority = if stream.high_priority {
                ", high priority"
            } else {
                ""
            };
            sink.metadata(
                "thread_name",
                pid,
                stream_tid(index as u16),
                json!({"name": format!("stream {index} ({}{priority})", stream.name)}),
            )?;
        }
        // The traced span, on a thread of its own (tid 0, which HTA reads as a device's and
        // leaves out of call stacks): HTA loads no file without a slice, and a rank that hung
        // before any call returned has no other.
        sink.metadata("thread_name", pid, 0, json!({"name": "trace span"}))?;
        sink.slice(
            "trace_span",
            &format!("c10dsim trace (rank {})", rank.rank),
            (pid, 0),
            0,
            last_recorded_ns(self.timeline, rank),
            json!({}),
        )?;
        // Parents before children: HTA nests slices of equal extent in file order.
        self.profiler_steps(rank, sink)?;
        self.host_calls(rank, ids, sink)?;
        self.param_comms(rank, sink)?;
        self.cache_releases(rank, sink)?;
        // A call's stream waits come before its launches, as PyTorch issues them; at one time,
        // file order is host order.
        self.stream_waits(rank, ids, sink)?;
        self.kernels(rank, ids, sink)?;
        self.races(rank, sink)?;
        self.watchdog(rank.rank, sink)?;
        for mark in &rank.marks {
            let name = &self.timeline.scenario.marks[mark.mark as usize];
            sink.instant(
                "mark",
                name,
                (pid, HOST_TID),
                mark.host_ns,
                json!({"gpu_us": mark.gpu_ns as f64 / 1_000.0, "iteration": mark.iteration}),
            )?;
        }
        for finding in &self.timeline.findings {
            if finding.concerns(rank.rank) {
                self.finding(finding, pid, sink)?;
            }
        }
        Ok(())
    }

    /// The findings of no rank (a whole-run deadlock) on the process of the rank at `position`
    /// in `timeline.ranks`, and, where `unheld_too` (a rank's own file, which names no process
    /// it does not have), those of a rank the Timeline holds no records of as well.
    pub fn rankless_findings(
        &self,
        position: usize,
        unheld_too: bool,
        sink: &mut Sink,
    ) -> io::Result<()> {
        let pid = self
            .timeline
            .ranks
            .get(position)
            .map_or(1, |rank| pid(rank.rank));
        for finding in &self.timeline.findings {
            let held = (self.timeline.ranks.iter()).any(|rank| finding.concerns(rank.rank));
            if !held && (unheld_too || finding.rank.is_none()) {
                self.finding(finding, pid, sink)?;
            }
        }
        Ok(())
    }

    /// The ranks the Timeline holds no records of but whose watchdog records or findings it
    /// keeps (a summarised Timeline's, `--summary`, which keeps those of every rank), each on a
    /// process of its own, `rank N (no records kept)`: its records and findings, with its own
    /// text, as a rank's process has them.
    pub fn unheld_ranks(&self, sink: &mut Sink) -> io::Result<()> {
        let timeline = self.timeline;
        let held = |rank: u32| (timeline.ranks.iter()).any(|r| r.rank == rank);
        let mut ranks = BTreeSet::new();
        for record in &timeline.watchdog {
            ranks.extend(record.ranks().iter().filter(|&r| !held(r)));
        }
        for finding in &timeline.findings {
            ranks.extend(finding.ranks().iter().filter(|&r| !held(r)));
        }
        for rank in ranks {
            let pid = pid(rank);
            rank_process(rank, &format!("rank {rank} (no records kept)"), sink)?;
            self.watchdog(rank, sink)?;
            for finding in (timeline.findings.iter()).filter(|f| f.concerns(rank)) {
                self.finding(finding, pid, sink)?;
            }
        }
        Ok(())
    }

    /// `ProfilerStep#<i>` from the end of iteration `i - 1`'s last host call (the first: from
    /// 0, where the program starts) to the end of iteration `i`'s last, as torch.profiler's
    /// `step()` at the end of each iteration marks them: host time before an iteration's first
    /// call (a straggler's injected delay, R16) is that iteration's. The iteration the program
    /// never finished is open to the end of the capture, as Kineto writes an op still open. In a
    /// summarised Timeline, a kept iteration after one not kept starts where `step_starts_ns`
    /// says.
    fn profiler_steps(&self, rank: &RankTimeline, sink: &mut Sink) -> io::Result<()> {
        let at = (pid(rank.rank), HOST_TID);
        let step_start_ns = |iteration: u32, otherwise_ns: u64| {
            (rank.step_starts_ns.iter())
                .find(|&&(kept, _)| kept == iteration)
                .map_or(otherwise_ns, |&(_, start_ns)| start_ns)
        };
        let mut start_ns = 0;
        let mut open: Option<(u32, u64)> = None;
        for call in &rank.host {
            match open {
                Some((iteration, end_ns)) if iteration != call.iteration => {
                    let name = format!("ProfilerStep#{iteration}");
                    sink.slice("user_annotation", &name, at, start_ns, end_ns, json!({}))?;
                    start_ns = step_start_ns(call.iteration, end_ns);
                    open = Some((call.iteration, call.end_ns));
                }
                Some((iteration, end_ns)) => open = Some((iteration, end_ns.max(call.end_ns))),
                None => {
                    start_ns = step_start_ns(call.iteration, 0);
                    open = Some((call.iteration, call.end_ns));
                }
            }
        }
        // An iteration the program never finished (a fault stopped it, an exception, a call
        // that never returned: a Timeline without `unfinished_iteration` names only the last)
        // leaves its step open to the end of the capture.
        let unfinished =
            (rank.unfinished_iteration).or(rank.unfinished_host.map(|call| call.iteration));
        if let Some((iteration, end_ns)) =
            open.filter(|&(iteration, _)| Some(iteration) != unfinished)
        {
            let name = format!("ProfilerStep#{iteration}");
            sink.slice("user_annotation", &name, at, start_ns, end_ns, json!({}))?;
            start_ns = end_ns;
        }
        if let Some(iteration) = unfinished {
            if open.is_none_or(|(last, _)| last != iteration) {
                start_ns = step_start_ns(iteration, start_ns);
            }
            let name = format!("ProfilerStep#{iteration}");
            let end_ns = last_recorded_ns(self.timeline, rank);
            let args = json!({NEVER_FINISHED.0: NEVER_FINISHED.1});
            sink.slice("user_annotation", &name, at, start_ns, end_ns, args)?;
        }
        Ok(())
    }

    fn host_calls(&self, rank: &RankTimeline, ids: RankIds, sink: &mut Sink) -> io::Result<()> {
        let at = (pid(rank.rank), HOST_TID);
        for (index, call) in rank.host.iter().enumerate() {
            let op = &self.timeline.ops[call.op as usize];
            let args = json!({"op": op.name, "line": op.line, "iteration": call.iteration,
                "External id": index + 1});
            if launch_alone(&op.key) {
                continue;
            }
            let Some((name, cbid)) = runtime_call(&op.key) else {
                sink.slice(
                    "cpu_op",
                    &op.host_name,
                    at,
                    call.start_ns,
                    call.end_ns,
                    args,
                )?;
                continue;
            };
            {
                let mut args = args;
                args["cbid"] = json!(cbid);
                args["correlation"] = json!(ids.host_call_correlation(index));
                if op.key == "wait_event" {
                    let key = (call.iteration, call.op);
                    let waits = &rank.stream_waits;
                    let at = waits.partition_point(|w| (w.iteration, w.op) < key);
                    let unreleased = &rank.unfinished_stream_waits;
                    let never = unreleased.partition_point(|w| (w.iteration, w.op) < key);
                    if let Some(wait) = waits.get(at).filter(|w| (w.iteration, w.op) == key) {
                        waited_streams(&mut args, (wait.waiting_stream, wait.source_stream));
                    } else if let Some(wait) =
                        (unreleased.get(never)).filter(|w| (w.iteration, w.op) == key)
                    {
                        waited_streams(&mut args, (wait.waiting_stream, wait.source_stream));
                        args[NEVER_RELEASED] = json!(true);
                    }
                }
                sink.slice("cuda_runtime", name, at, call.start_ns, call.end_ns, args)?;
            }
        }
        // The call that never returned, open to the end of the capture as torch.profiler
        // writes it; none for a CUDA call, of which CUPTI writes a record once it returned.
        if let Some(call) = &rank.unfinished_host {
            let op = &self.timeline.ops[call.op as usize];
            if runtime_call(&op.key).is_none() && !launch_alone(&op.key) {
                let mut args = json!({"op": op.name, "line": op.line,
                    "iteration": call.iteration, "External id": rank.host.len() + 1});
                args[NEVER_FINISHED.0] = json!(NEVER_FINISHED.1);
                let end_ns = last_recorded_ns(self.timeline, rank);
                sink.slice("cpu_op", &op.host_name, at, call.start_ns, end_ns, args)?;
            }
        }
        Ok(())
    }

    fn cache_releases(&self, rank: &RankTimeline, sink: &mut Sink) -> io::Result<()> {
        let at = (pid(rank.rank), HOST_TID);
        for release in &rank.cache_releases {
            let op = &self.timeline.ops[release.op as usize];
            sink.slice(
                "cuda_runtime",
                "cudaFree (release_cached_blocks)",
                at,
                release.host_start_ns,
                release.host_end_ns,
                json!({"op": op.name, "iteration": release.iteration,
                    "segments_freed": release.segments_freed,
                    "device_idle_us": release.device_idle_ns.map(|ns| ns as f64 / 1_000.0)}),
            )?;
        }
        Ok(())
    }

    /// Each kernel with its `cudaLaunchKernel` on the host and the `ac2g` arrow between them;
    /// a kernel that never ended has its launch alone, marked `c10dsim kernel never ended`, as
    /// CUPTI reports no unfinished kernel.
    fn kernels(&self, rank: &RankTimeline, ids: RankIds, sink: &mut Sink) -> io::Result<()> {
        let pid = pid(rank.rank);
        let mut launches = Launches::new(&rank.host);
        let unfinished_base = ids.correlation_base + rank.kernels.len() as u64;
        let mut unfinished = rank.unfinished_kernels.iter().enumerate().peekable();
        let mut launch = |owner: (u32, OpRef),
                          enqueue_ns: u64,
                          correlation: u64,
                          ended: bool,
                          sink: &mut Sink| {
            let (call, launch_start_ns) = launches.locate(owner, enqueue_ns);
            let external = call.map(|call| call + 1);
            let mut args = json!({"correlation": correlation, "External id": external,
                "cbid": CUDA_LAUNCH_KERNEL_CBID});
            if !ended {
                args[KERNEL_NEVER_ENDED] = json!(true);
            }
            sink.slice(
                "cuda_runtime",
                "cudaLaunchKernel",
                (pid, HOST_TID),
                launch_start_ns,
                enqueue_ns,
                args,
            )
            .map(|()| (external, launch_start_ns))
        };
        for (index, kernel) in rank.kernels.iter().enumerate() {
            // Launches in host order: an unfinished kernel's among the others'.
            while let Some((at, never_ended)) =
                unfinished.next_if(|(_, k)| k.enqueue_ns < kernel.enqueue_ns)
            {
                launch(
                    (never_ended.iteration, never_ended.op),
                    never_ended.enqueue_ns,
                    unfinished_base + at as u64 + 1,
                    false,
                    sink,
                )?;
            }
            let correlation = ids.correlation_base + index as u64 + 1;
            let (external, launch_start_ns) = launch(
                (kernel.iteration, kernel.op),
                kernel.enqueue_ns,
                correlation,
                true,
                sink,
            )?;
            let op_info = &self.timeline.ops[kernel.op as usize];
            let op = &self.ops[kernel.op as usize];
            let tid = stream_tid(kernel.stream);
            let fallback = match kernel.class {
                KernelClass::Sleep => "delay",
                KernelClass::Communication | KernelClass::Compute => &op_info.name,
            };
            let name = match &op.nccl {
                Some(nccl) => &nccl.profiler_name,
                None => op_info.kernel_name.as_deref().unwrap_or(fallback),
            };
            let mut args = json!({"op": op_info.name, "line": op_info.line,
                "iteration": kernel.iteration, "device": rank.rank, "stream": tid,
                "correlation": correlation, "External id": external});
            if let Some(nccl) = &op.nccl {
                if let Some(algorithm) = &nccl.algorithm {
                    args["algorithm"] = json!(algorithm);
                }
                if let Some(protocol) = &nccl.protocol {
                    args["protocol"] = json!(protocol);
                }
            }
            sink.slice(
                "kernel",
                name,
                (pid, tid),
                kernel.start_ns,
                kernel.end_ns,
                args,
            )?;
            sink.flow(
                "ac2g",
                "ac2g",
                correlation,
                ((pid, HOST_TID), launch_start_ns),
                ((pid, tid), kernel.start_ns),
            )?;
        }
        for (at, never_ended) in unfinished {
            launch(
                (never_ended.iteration, never_ended.op),
                never_ended.enqueue_ns,
                unfinished_base + at as u64 + 1,
                false,
                sink,
            )?;
        }
        Ok(())
    }

    /// Every `cudaStreamWaitEvent`: the call on the host, as torch.profiler writes it (a
    /// `stream.wait_event()` is its own host call; `wait()`'s, a collective's on its input and
    /// the implicit wait of `async_op=False` are written here, without duration, where the call
    /// issues them); then c10dsim's own view: where the event fired on its stream, where the
    /// waiting stream was released, and an arrow between them. Those two ends carry `stream`
    /// and no correlation, so that HTA reads them as GPU-side marks, not as CUDA calls.
    fn stream_waits(&self, rank: &RankTimeline, ids: RankIds, sink: &mut Sink) -> io::Result<()> {
        let pid = pid(rank.rank);
        for (index, wait) in rank.stream_waits.iter().enumerate() {
            let op = &self.timeline.ops[wait.op as usize];
            let source = (pid, stream_tid(wait.source_stream));
            let waiting = (pid, stream_tid(wait.waiting_stream));
            let call = (
                wait.iteration,
                wait.op,
                wait.waiting_stream,
                wait.source_stream,
            );
            let correlation = ids.stream_wait_correlation(rank, index);
            self.stream_wait_call(rank, call, (correlation, false), sink)?;
            sink.slice(
                "stream_wait",
                "event fired (cudaEventRecord)",
                source,
                wait.source_ns,
                wait.source_ns,
                json!({"op": op.name, "iteration": wait.iteration, "stream": source.1}),
            )?;
            sink.slice(
                "stream_wait",
                "wait released (cudaStreamWaitEvent)",
                waiting,
                wait.released_ns,
                wait.released_ns,
                json!({"op": op.name, "iteration": wait.iteration, "stream": waiting.1}),
            )?;
            sink.flow(
                "stream_wait",
                "cudaStreamWaitEvent",
                ids.wait_flow_base + index as u64 + 1,
                (source, wait.source_ns),
                (waiting, wait.released_ns),
            )?;
        }
        // A `cudaStreamWaitEvent` never released (its event never fired, or its stream never
        // got there) was still made by the host: the call alone, marked so, without the marks
        // and the arrow of a release (a `stream.wait_event()` is its own host call, above).
        for (index, wait) in rank.unfinished_stream_waits.iter().enumerate() {
            let call = (
                wait.iteration,
                wait.op,
                wait.waiting_stream,
                wait.source_stream,
            );
            let correlation = ids.unreleased_wait_correlation(rank, index);
            self.stream_wait_call(rank, call, (correlation, true), sink)?;
        }
        Ok(())
    }

    /// The host's `cudaStreamWaitEvent` of a stream wait (iteration, op, waiting and source
    /// streams), where the host time of the call is known; a `stream.wait_event()` is its own
    /// host call, written with the host calls. `never_released` marks one whose stream never
    /// passed it.
    fn stream_wait_call(
        &self,
        rank: &RankTimeline,
        (iteration, op_ref, waiting, source): (u32, OpRef, StreamRef, StreamRef),
        (correlation, never_released): (u64, bool),
        sink: &mut Sink,
    ) -> io::Result<()> {
        let op = &self.timeline.ops[op_ref as usize];
        let Some(host_ns) = stream_wait_host_ns(rank, (iteration, op_ref, waiting)) else {
            return Ok(());
        };
        if op.key == "wait_event" {
            return Ok(());
        }
        let (name, cbid) = STREAM_WAIT_EVENT;
        let mut args = json!({"cbid": cbid, "correlation": correlation, "op": op.name,
            "iteration": iteration});
        if never_released {
            args[NEVER_RELEASED] = json!(true);
        }
        waited_streams(&mut args, (waiting, source));
        sink.slice(
            "cuda_runtime",
            name,
            (pid(rank.rank), HOST_TID),
            host_ns,
            host_ns,
            args,
        )
    }
}

/// The `Global rank start` and `Global rank stride` ProcessGroupNCCL gives `record_param_comms`
/// for the group `group` of the ascending global ranks `ranks`: the default group is given no
/// ranks, so 0 and 1 (a world of one rank too); another starts at its first rank and has a
/// stride only where its ranks are two or more evenly spaced (PyTorch's -1 for uneven ones and 0
/// for a lone one are not written).
pub(super) fn global_rank_start_and_stride(
    group: usize,
    ranks: &[u32],
) -> (Option<u32>, Option<u32>) {
    if group == 0 {
        return (Some(0), Some(1));
    }
    let first_step = match ranks {
        [first, second, ..] => second.checked_sub(*first).filter(|&step| step > 0),
        _ => None,
    };
    let stride = first_step
        .filter(|&step| (ranks.windows(2)).all(|pair| pair[1].checked_sub(pair[0]) == Some(step)));
    (ranks.first().copied(), stride)
}

/// `"[0, 1, 2]"`, as PyTorch 2.11's profiler writes `Process Group Ranks`: a list of over 30
/// ranks is cut to its first 29, `...` and its last (`"[0, 1, …, 28, ..., 63]"`).
pub(super) fn listed_ranks(ranks: &[u32]) -> String {
    let text = |ranks: &[u32]| -> Vec<String> { ranks.iter().map(ToString::to_string).collect() };
    let listed = match ranks {
        [kept @ .., last] if ranks.len() > LISTED_RANKS => {
            let mut listed = text(&kept[..LISTED_RANKS - 1]);
            listed.extend(["...".to_string(), last.to_string()]);
            listed
        }
        _ => text(ranks),
    };
    format!("[{}]", listed.join(", "))
}

/// Where each kernel's launch sits among the host calls, both in program order: the call that
/// holds the launch (its op's, where a call ends at the very time the next one starts and
/// launches), and the launch's start — the call's start, or the end of the call's previous
/// launch (a call that launches twice, as a coalesced batch, spends its time on both).
pub(super) struct Launches<'a> {
    calls: &'a [HostCall],
    next_call: usize,
    previous: Option<(usize, u64)>,
}

impl<'a> Launches<'a> {
    pub(super) fn new(calls: &'a [HostCall]) -> Launches<'a> {
        Launches {
            calls,
            next_call: 0,
            previous: None,
        }
    }

    /// The call holding a launch at `enqueue_ns` of the op `(iteration, op)` and the launch's
    /// start; a launch outside every call (a measured Timeline's clock) starts where it ends.
    pub(super) fn locate(
        &mut self,
        (iteration, op): (u32, OpRef),
        enqueue_ns: u64,
    ) -> (Option<usize>, u64) {
        while self
            .calls
            .get(self.next_call)
            .is_some_and(|call| call.end_ns < enqueue_ns)
        {
            self.next_call += 1;
        }
        // Calls of no host cost meet: one ends when the next, the launching op's, starts.
        let holding = self.calls[self.next_call.min(self.calls.len())..]
            .iter()
            .take_while(|call| call.start_ns <= enqueue_ns)
            .position(|call| (call.iteration, call.op) == (iteration, op));
        self.next_call += holding.unwrap_or(0);
        match self.calls.get(self.next_call) {
            Some(call) if call.start_ns <= enqueue_ns => {
                let start_ns = match self.previous {
                    Some((index, at_ns)) if index == self.next_call => at_ns,
                    _ => call.start_ns,
                };
                self.previous = Some((self.next_call, enqueue_ns));
                (Some(self.next_call), start_ns.min(enqueue_ns))
            }
            _ => (None, enqueue_ns),
        }
    }
}

/// The streams of a `cudaStreamWaitEvent` (the waiting one, the event's), which CUPTI's runtime
/// record does not carry, as c10dsim's own arguments: `c10dsim stream` the waiting one,
/// `c10dsim wait_on_stream` the event's (thread ids, as the kernels' `stream`). torch.profiler's
/// `cuda_sync` events would carry them, but HTA ties those to the `cudaEventRecord` that
/// recorded the event, whose host time the Timeline does not keep.
fn waited_streams(args: &mut Value, (waiting, source): (StreamRef, StreamRef)) {
    args["c10dsim stream"] = json!(stream_tid(waiting));
    args["c10dsim wait_on_stream"] = json!(stream_tid(source));
}

/// Where on the host the stream wait of `(iteration, op)` making `waiting` wait was issued,
/// which the Timeline does not record: a collective's wait on its input at the call's start,
/// the implicit wait of `async_op=False` at that wait's start, any other op's at its call's
/// start (a call that never returned too). Host calls, collectives and stream waits, finished
/// or not, are in program order, so sorted by (iteration, op).
fn stream_wait_host_ns(
    rank: &RankTimeline,
    (iteration, op, waiting): (u32, OpRef, StreamRef),
) -> Option<u64> {
    let key = (iteration, op);
    // (call start, run stream, the implicit wait's start) of the collective `key`.
    let collective = {
        let records = &rank.collectives;
        let at = records.partition_point(|c| (c.iteration, c.op) < key);
        let completed = records.get(at).filter(|c| (c.iteration, c.op) == key);
        completed
            .map(|c| {
                let implicit = c.wait.filter(|w| w.op == c.op).map(|w| w.host_start_ns);
                (c.host_start_ns, c.run_stream, implicit)
            })
            .or_else(|| {
                let records = &rank.unfinished_collectives;
                let at = records.partition_point(|c| (c.iteration, c.op) < key);
                let record = records.get(at).filter(|c| (c.iteration, c.op) == key)?;
                let implicit = (record.wait)
                    .filter(|w| w.op == record.op)
                    .map(|w| w.host_start_ns);
                Some((record.host_start_ns, record.run_stream, implicit))
            })
    };
    if let Some((host_start_ns, run_stream, implicit)) = collective {
        let input = waiting == run_stream;
        return Some(match implicit {
            Some(wait_start_ns) if !input => wait_start_ns,
            _ => host_start_ns,
        });
    }
    let at = rank.host.partition_point(|c| (c.iteration, c.op) < key);
    match rank.host.get(at).filter(|c| (c.iteration, c.op) == key) {
        Some(call) => Some(call.start_ns),
        None => (rank.unfinished_host)
            .filter(|c| (c.iteration, c.op) == key)
            .map(|c| c.start_ns),
    }
}
