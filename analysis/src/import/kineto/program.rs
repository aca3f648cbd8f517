//! One rank's trace as a program: the calls and collectives in host order turned into
//! actions (the inferred events and waits, DDP's re-bucketing), then written as `[[op]]`s with
//! the host's gaps between them.
//!
//! About 880 lines, kept as one piece: the plan (ordering the trace's items into actions) and
//! the writer of the `[[op]]`s share one rank's naming state (events, Works, streams), and its
//! unit tests are the last 100 lines.

use super::trace::{Comm, GpuKind, Trace};
use super::KinetoOptions;
use sim::units::format_size;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt::Write as _;

/// Nanoseconds as µs with at most three decimals (`1234` → `1.234`, `5000` → `5`).
pub(super) fn us(ns: i64) -> String {
    let ns = ns.max(0);
    let text = format!("{}.{:03}", ns / 1000, ns % 1000);
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// Text from the trace made safe for a TOML comment: control characters become spaces, and it
/// is cut at 200 characters.
pub(super) fn comment_text(text: &str) -> String {
    text.chars()
        .take(200)
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

/// A kernel's name shortened to a label: the function's own name, without namespaces,
/// template arguments or parameters.
pub(super) fn short_kernel_name(name: &str) -> String {
    let name = name.trim_start_matches("void ");
    let cut = name
        .find('<')
        .or_else(|| name.find('('))
        .unwrap_or(name.len());
    let function = name[..cut].rsplit("::").next().unwrap_or("");
    let short: String = function
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
        .take(48)
        .collect();
    if short.is_empty() {
        "kernel".to_string()
    } else {
        short
    }
}

fn median(values: &mut [i64]) -> Option<i64> {
    values.sort_unstable();
    values.get(values.len() / 2).copied()
}

/// What the host does at one point of the program.
#[derive(Debug, Clone)]
enum Action {
    Mark(String),
    Comment(String),
    Kernel {
        gpu: usize,
    },
    Collective {
        comm: usize,
        bytes: u64,
        stream: String,
        work: Option<String>,
    },
    RecordEvent {
        event: String,
        stream: String,
    },
    WaitEvent {
        event: String,
        stream: String,
    },
    Wait {
        work: String,
        stream: String,
    },
    EventSync {
        event: String,
    },
    StreamSync {
        stream: String,
    },
    Item {
        stream: String,
    },
    DeviceSync,
}

/// An action at a host time; `resume_ns` is where the host's own time goes on counting (the
/// call's start, or its end for a blocking call the simulator re-times); `dropped_ns` is host
/// time removed before it (collectives joined into a bucket).
#[derive(Debug, Clone)]
struct Planned {
    at_ns: i64,
    resume_ns: i64,
    dropped_ns: i64,
    action: Action,
}

/// A process group as a trace names it: its ranks and PyTorch's `Process Group Name`.
type GroupKey = (Vec<u32>, Option<String>);

/// The scenario's name of every process group the traces' collectives use but the world's:
/// the default group (`Process Group Name` `"0"`, or unnamed) over every rank is the world. A
/// group is named by its ranks (`ranks_0_1`); where several groups share those ranks — each its
/// own communicator and internal stream, R9 —, or where a group other than the default spans
/// the world (`world`), by its ranks and its name (`ranks_0_1_pg2`, `world_pg1`).
fn group_names(traces: &[&Trace]) -> BTreeMap<GroupKey, String> {
    let world_size = traces.first().map_or(0, |trace| trace.world_size);
    let mut names_of_ranks: BTreeMap<&[u32], BTreeSet<Option<&str>>> = BTreeMap::new();
    for comm in traces.iter().flat_map(|trace| &trace.comms) {
        if let Some(ranks) = comm.ranks.as_deref().filter(|ranks| !ranks.is_empty()) {
            names_of_ranks
                .entry(ranks)
                .or_default()
                .insert(comm.group.as_deref());
        }
    }
    let mut groups = BTreeMap::new();
    let mut taken = BTreeSet::new();
    for (ranks, names) in names_of_ranks {
        let world = ranks.len() as u32 == world_size
            && ranks.iter().enumerate().all(|(i, r)| *r == i as u32);
        let stem = if world {
            "world".to_string()
        } else {
            let list: Vec<String> = ranks.iter().map(u32::to_string).collect();
            format!("ranks_{}", list.join("_"))
        };
        for name in &names {
            if world && matches!(name, None | Some("0")) {
                continue;
            }
            let mut group = if names.len() == 1 && !world {
                stem.clone()
            } else {
                let tag: String = name
                    .unwrap_or("")
                    .chars()
                    .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .take(48)
                    .collect();
                format!("{stem}_pg{tag}")
            };
            let base = group.clone();
            let mut copy = 1;
            while !taken.insert(group.clone()) {
                copy += 1;
                group = format!("{base}_{copy}");
            }
            groups.insert((ranks.to_vec(), name.map(str::to_string)), group);
        }
    }
    groups
}

/// The scenario-wide declarations the ranks' programs need.
#[derive(Default)]
pub(super) struct Declarations {
    /// The name of each process group but the world (see [`group_names`]).
    group_names: BTreeMap<GroupKey, String>,
    pub(super) tensors: BTreeMap<String, (u64, &'static str)>,
    pub(super) groups: BTreeMap<String, Vec<u32>>,
    /// Per group (`world` too), the least `Seq` of its collectives in the traces: the SeqNum
    /// the job had reached when the profiler started.
    pub(super) first_seq_nums: BTreeMap<String, u64>,
    pub(super) streams: BTreeSet<String>,
    pub(super) measures: Vec<(String, String, String)>,
    pub(super) item: bool,
}

impl Declarations {
    /// Declarations for the programs of `traces`, the job's every rank.
    pub(super) fn new(traces: &[&Trace]) -> Declarations {
        let mut declarations = Declarations {
            group_names: group_names(traces),
            ..Declarations::default()
        };
        for comm in traces.iter().flat_map(|trace| &trace.comms) {
            if let Some(seq_num) = comm.seq_num {
                let group = declarations.group_of(comm).unwrap_or("world").to_string();
                let first = declarations.first_seq_nums.entry(group).or_insert(seq_num);
                *first = (*first).min(seq_num);
            }
        }
        declarations
    }

    /// The scenario's name of a collective's group; `None`: the world.
    fn group_of(&self, comm: &Comm) -> Option<&str> {
        let key = (comm.ranks.clone()?, comm.group.clone());
        self.group_names.get(&key).map(String::as_str)
    }
}

/// The program of one rank, as TOML text, and what it declares.
pub(super) struct RankProgram<'t> {
    trace: &'t Trace,
    prefix: String,
    ranks_key: String,
    plan: Vec<Planned>,
    used_events: BTreeSet<String>,
    /// Numbers of the labels, events and Works named so far.
    counters: [usize; 3],
}

impl<'t> RankProgram<'t> {
    pub(super) fn new(trace: &'t Trace, several: bool) -> RankProgram<'t> {
        RankProgram {
            trace,
            prefix: if several {
                format!("r{}_", trace.rank)
            } else {
                String::new()
            },
            ranks_key: if several {
                format!("ranks = [{}]\n", trace.rank)
            } else {
                String::new()
            },
            plan: Vec::new(),
            used_events: BTreeSet::new(),
            counters: [0; 3],
        }
    }

    /// The next name of a kind (0 labels, 1 events, 2 Works): `{prefix}{stem}{number}`.
    fn next_name(&mut self, kind: usize, stem: &str) -> String {
        self.counters[kind] += 1;
        format!("{}{stem}{}", self.prefix, self.counters[kind])
    }

    fn stream_name(&self, stream: i64) -> Option<&str> {
        self.trace.streams.get(&stream).map(String::as_str)
    }

    /// Which collectives a bucket joins (what-if) and the bytes of the ones that remain.
    pub(super) fn buckets(&self, options: &KinetoOptions) -> Vec<Option<u64>> {
        let trace = self.trace;
        let mut bytes: Vec<Option<u64>> = trace.comms.iter().map(|c| Some(c.bytes)).collect();
        let Some(cap) = options.bucket_bytes else {
            return bytes;
        };
        let mut index = 0;
        while index < trace.comms.len() {
            let first = &trace.comms[index];
            let joinable = |c: usize| {
                let comm = &trace.comms[c];
                comm.key == "all_reduce"
                    && trace.comm_async[c]
                    && comm.dtype == first.dtype
                    && comm.ranks == first.ranks
                    && comm.group == first.group
                    && trace.step_of(comm.start_ns) == trace.step_of(first.start_ns)
            };
            if !joinable(index) {
                index += 1;
                continue;
            }
            let mut total = first.bytes;
            let mut last = index;
            while total < cap && last + 1 < trace.comms.len() && joinable(last + 1) {
                last += 1;
                total = total.saturating_add(trace.comms[last].bytes);
            }
            for member in &mut bytes[index..last] {
                *member = None;
            }
            bytes[last] = Some(total);
            index = last + 1;
        }
        bytes
    }

    /// Orders the trace's calls and collectives into the rank's actions.
    pub(super) fn plan(&mut self, options: &KinetoOptions) {
        let trace = self.trace;
        // A synchronous collective runs on the caller's stream: where its GPU activity is, or
        // the current stream where it has none (an in-place one-rank call copies nothing).
        let sync_stream: Vec<Option<String>> = (0..trace.comms.len())
            .map(|comm| {
                if trace.comm_async[comm] {
                    return None;
                }
                trace.comm_activity[comm]
                    .first()
                    .and_then(|&op| self.stream_name(trace.gpu[op].stream))
                    .map(str::to_string)
            })
            .collect();
        // Collectives whose call synchronised a stream (a synchronous barrier's wait, R14).
        let mut synced_in = vec![false; trace.comms.len()];
        for (call, comm) in trace.runtime.iter().zip(&trace.comm_of_call) {
            if let (Some(comm), "cudaStreamSynchronize") = (comm, call.name.as_str()) {
                synced_in[*comm] = true;
            }
        }
        let bytes = self.buckets(options);
        enum Item {
            Call(usize),
            Comm(usize),
        }
        let mut items: Vec<(i64, Item)> = trace
            .comms
            .iter()
            .enumerate()
            .map(|(index, _)| (trace.comm_launch_ns(index), Item::Comm(index)))
            .collect();
        items.extend(
            (0..trace.runtime.len())
                .filter(|&call| trace.comm_of_call[call].is_none())
                .map(|call| (trace.runtime[call].start_ns, Item::Call(call))),
        );
        items.sort_by_key(|(at, item)| (*at, matches!(item, Item::Call(_))));
        // The stream of each item's GPU work, for the streams a record or a wait is inferred on.
        let stream_of: Vec<Option<String>> = items
            .iter()
            .map(|(_, item)| match item {
                Item::Call(call) => trace.gpu_of_call[*call]
                    .and_then(|op| self.stream_name(trace.gpu[op].stream))
                    .map(str::to_string),
                Item::Comm(comm) => sync_stream[*comm].clone(),
            })
            .collect();
        let mut next_stream = vec![None; items.len()];
        let mut upcoming: Option<String> = None;
        for index in (0..items.len()).rev() {
            next_stream[index] = upcoming.clone();
            if stream_of[index].is_some() {
                upcoming = stream_of[index].clone();
            }
        }
        let mut last_stream = "default".to_string();
        let mut recorded: Vec<(String, String)> = Vec::new();
        let mut works: VecDeque<String> = VecDeque::new();
        let mut dropped_ns = 0;
        let mut step = None;
        for (index, (at_ns, item)) in items.iter().enumerate() {
            let Some(item_step) = trace.step_of(*at_ns) else {
                continue;
            };
            if step != Some(item_step) {
                step = Some(item_step);
                self.begin_step(item_step, &mut dropped_ns);
            }
            let current = last_stream.clone();
            let waiter = next_stream[index]
                .clone()
                .unwrap_or_else(|| current.clone());
            let mut push = |plan: &mut Vec<Planned>, at_ns: i64, resume_ns: i64, action: Action| {
                plan.push(Planned {
                    at_ns,
                    resume_ns,
                    dropped_ns: std::mem::take(&mut dropped_ns),
                    action,
                });
            };
            match item {
                Item::Comm(comm) => {
                    let Some(bytes) = bytes[*comm] else {
                        let c = &trace.comms[*comm];
                        dropped_ns += c.end_ns - c.start_ns;
                        continue;
                    };
                    // The collective is issued at its launch (`at_ns`): its host time before
                    // that is the host's gap before it, the rest the gap after it, so that the
                    // replay launches its kernel when the trace did. A barrier blocks until
                    // its stream drained (`dist.barrier()`, R14) unless it was asynchronous
                    // (`dist.barrier(async_op=True)`: its all_reduce on the internal stream, a
                    // `cudaStreamWaitEvent` and no `cudaStreamSynchronize` inside the call),
                    // which returns a Work as other asynchronous collectives do. The simulator
                    // re-times a synchronous one's wait: the host's own time goes on from the
                    // call's end. Without a launch in the trace, the barrier is issued where it
                    // began to block (its last CUDA call, PyTorch's `cudaStreamSynchronize`; the
                    // call's start without one).
                    let barrier = trace.comms[*comm].key == "barrier";
                    let async_barrier = barrier && trace.comm_async[*comm] && !synced_in[*comm];
                    let (call_at_ns, resume_ns) = if barrier {
                        let blocked_from_ns = (trace.comm_of_call.iter().enumerate())
                            .filter(|(_, of)| **of == Some(*comm))
                            .map(|(call, _)| trace.runtime[call].start_ns)
                            .max()
                            .unwrap_or(*at_ns);
                        let issued_ns = match trace.comm_launch[*comm] {
                            Some(_) => *at_ns,
                            None => blocked_from_ns,
                        };
                        (issued_ns, trace.comms[*comm].end_ns)
                    } else {
                        (*at_ns, *at_ns)
                    };
                    let (stream, work) = if trace.comm_async[*comm] && (!barrier || async_barrier) {
                        let work = self.next_name(2, "w");
                        works.push_back(work.clone());
                        (current.clone(), Some(work))
                    } else {
                        let stream = sync_stream[*comm]
                            .clone()
                            .unwrap_or_else(|| current.clone());
                        (stream, None)
                    };
                    push(
                        &mut self.plan,
                        call_at_ns,
                        resume_ns,
                        Action::Collective {
                            comm: *comm,
                            bytes,
                            stream: stream.clone(),
                            work,
                        },
                    );
                    // One rank: NCCL's copy is the collective's whole GPU work, as measured.
                    if trace.world_size == 1 && !trace.comm_async[*comm] {
                        for &op in &trace.comm_activity[*comm] {
                            push(&mut self.plan, *at_ns, *at_ns, Action::Kernel { gpu: op });
                        }
                        last_stream = stream;
                    }
                }
                Item::Call(call) => {
                    let call_info = &trace.runtime[*call];
                    let name = call_info.name.as_str();
                    if let Some(op) = trace.gpu_of_call[*call] {
                        let Some(stream) =
                            self.stream_name(trace.gpu[op].stream).map(str::to_string)
                        else {
                            continue;
                        };
                        push(&mut self.plan, *at_ns, *at_ns, Action::Kernel { gpu: op });
                        let copy_to_host = trace.gpu[op].kind
                            == (GpuKind::Memcpy {
                                device_to_host: true,
                            });
                        if name == "cudaMemcpy" && copy_to_host {
                            push(
                                &mut self.plan,
                                *at_ns,
                                call_info.end_ns,
                                Action::Item {
                                    stream: stream.clone(),
                                },
                            );
                        }
                        last_stream = stream;
                        continue;
                    }
                    let blocking_end = call_info.end_ns;
                    // The stream the trace's `cuda_sync` event names, else the inferred one.
                    let synced = call_info.stream.and_then(|s| self.stream_name(s));
                    let waiter = synced.map_or(waiter, str::to_string);
                    let current = match (name, synced) {
                        ("cudaStreamSynchronize", Some(stream)) => stream.to_string(),
                        _ => current,
                    };
                    match name {
                        "cudaEventRecord" | "cudaEventRecordWithFlags" => {
                            let event = self.next_name(1, "e");
                            recorded.push((event.clone(), current.clone()));
                            push(
                                &mut self.plan,
                                *at_ns,
                                *at_ns,
                                Action::RecordEvent {
                                    event,
                                    stream: current,
                                },
                            );
                        }
                        "cudaStreamWaitEvent" => {
                            // On a stream of the program (the trace's `cuda_sync` says which):
                            // an event recorded there now, after the work issued on it so far.
                            let source = call_info.waits_on.and_then(|s| self.stream_name(s));
                            if let Some(source) = source.map(str::to_string) {
                                let event = self.next_name(1, "e");
                                self.used_events.insert(event.clone());
                                push(
                                    &mut self.plan,
                                    *at_ns,
                                    *at_ns,
                                    Action::RecordEvent {
                                        event: event.clone(),
                                        stream: source,
                                    },
                                );
                                push(
                                    &mut self.plan,
                                    *at_ns,
                                    *at_ns,
                                    Action::WaitEvent {
                                        event,
                                        stream: waiter,
                                    },
                                );
                            } else if let Some(work) = works.pop_front() {
                                push(
                                    &mut self.plan,
                                    *at_ns,
                                    *at_ns,
                                    Action::Wait {
                                        work,
                                        stream: waiter,
                                    },
                                );
                            } else if let Some((event, _)) =
                                recorded.iter().rev().find(|(_, stream)| *stream != waiter)
                            {
                                self.used_events.insert(event.clone());
                                let event = event.clone();
                                push(
                                    &mut self.plan,
                                    *at_ns,
                                    *at_ns,
                                    Action::WaitEvent {
                                        event,
                                        stream: waiter,
                                    },
                                );
                            }
                        }
                        "cudaEventSynchronize" => {
                            if let Some((event, _)) = recorded.last() {
                                self.used_events.insert(event.clone());
                                let event = event.clone();
                                push(
                                    &mut self.plan,
                                    *at_ns,
                                    blocking_end,
                                    Action::EventSync { event },
                                );
                            }
                        }
                        "cudaStreamSynchronize" => {
                            let after_copy = matches!(
                                self.plan.last(),
                                Some(Planned { action: Action::Kernel { gpu }, .. })
                                    if trace.gpu[*gpu].kind == (GpuKind::Memcpy { device_to_host: true })
                            );
                            let action = if after_copy {
                                Action::Item { stream: current }
                            } else {
                                Action::StreamSync { stream: current }
                            };
                            push(&mut self.plan, *at_ns, blocking_end, action);
                        }
                        "cudaDeviceSynchronize" | "cudaCtxSynchronize" | "cuCtxSynchronize" => {
                            push(&mut self.plan, *at_ns, blocking_end, Action::DeviceSync);
                        }
                        _ => {}
                    }
                }
            }
        }
        if let Some(last) = trace.steps.last() {
            let mark = format!("{}end", self.prefix);
            self.plan.push(Planned {
                at_ns: last.end_ns,
                resume_ns: last.end_ns,
                dropped_ns,
                action: Action::Mark(mark),
            });
        }
    }

    fn begin_step(&mut self, step: usize, dropped_ns: &mut i64) {
        let trace = self.trace;
        let info = &trace.steps[step];
        let calls = trace
            .runtime
            .iter()
            .filter(|c| trace.step_of(c.start_ns) == Some(step))
            .count();
        let number = step + 1;
        self.plan.push(Planned {
            at_ns: info.start_ns,
            resume_ns: info.start_ns,
            dropped_ns: std::mem::take(dropped_ns),
            action: Action::Comment(format!(
                "{} (rank {}): {} µs on the host in the trace, {calls} CUDA runtime calls",
                comment_text(&info.name),
                trace.rank,
                us(info.end_ns - info.start_ns)
            )),
        });
        self.plan.push(Planned {
            at_ns: info.start_ns,
            resume_ns: info.start_ns,
            dropped_ns: 0,
            action: Action::Mark(format!("{}step_{number}", self.prefix)),
        });
    }

    /// The `[[op]]`s, with `host_sleep_us` for the host's time between them.
    pub(super) fn render(&mut self, declarations: &mut Declarations) -> String {
        let trace = self.trace;
        let sms = trace.sms.unwrap_or(132);
        let mut text = String::new();
        let mut cursor: Option<i64> = None;
        let mut marks: Vec<String> = Vec::new();
        let plan = std::mem::take(&mut self.plan);
        for planned in &plan {
            if let Action::RecordEvent { event, .. } = &planned.action {
                if !self.used_events.contains(event) {
                    continue;
                }
            }
            if let Some(cursor) = cursor {
                let gap = planned.at_ns - cursor - planned.dropped_ns;
                if gap > 0 {
                    let _ = writeln!(
                        text,
                        "[[op]]\n{}host_sleep_us = {}",
                        self.ranks_key,
                        us(gap)
                    );
                }
            }
            cursor = Some(planned.resume_ns.max(cursor.unwrap_or(i64::MIN)));
            if let Action::Comment(comment) = &planned.action {
                let _ = writeln!(text, "\n# {comment}");
                continue;
            }
            let stream_key = |stream: &str| {
                if stream == "default" {
                    String::new()
                } else {
                    format!("stream = \"{stream}\"\n")
                }
            };
            if let Action::RecordEvent { stream, .. }
            | Action::WaitEvent { stream, .. }
            | Action::Wait { stream, .. }
            | Action::StreamSync { stream }
            | Action::Item { stream } = &planned.action
            {
                declarations.streams.insert(stream.clone());
            }
            let body = match &planned.action {
                Action::Comment(_) => continue,
                Action::Mark(mark) => {
                    marks.push(mark.clone());
                    format!("mark = \"{mark}\"\n")
                }
                Action::Kernel { gpu } => {
                    let op = &trace.gpu[*gpu];
                    let stream = self.stream_name(op.stream).unwrap_or("default").to_string();
                    declarations.streams.insert(stream.clone());
                    let (stem, footprint) = match op.kind {
                        GpuKind::Kernel => (
                            short_kernel_name(&op.name),
                            op.blocks
                                .map_or(u64::from(sms), |b| b.clamp(1, u64::from(sms))),
                        ),
                        GpuKind::Memcpy {
                            device_to_host: true,
                        } => ("memcpy_dtoh".to_string(), 1),
                        GpuKind::Memcpy { .. } => ("memcpy".to_string(), 1),
                        GpuKind::Memset => ("memset".to_string(), 1),
                    };
                    let label = self.next_name(0, &format!("{stem}_"));
                    format!(
                        "label = \"{label}\"\nkernel = {{ us = {}, sms = {footprint} }}\n{}",
                        us(op.duration_ns.max(1)),
                        stream_key(&stream)
                    )
                }
                Action::Collective {
                    comm,
                    bytes,
                    stream,
                    work,
                } => {
                    let c = &trace.comms[*comm];
                    declarations.streams.insert(stream.clone());
                    let label = self.next_name(0, &format!("{}_", c.key));
                    let mut body = format!("label = \"{label}\"\n");
                    if c.key == "barrier" {
                        body.push_str("barrier = true\n");
                    } else {
                        let tensor = format!("{}_{}", c.dtype, format_size(*bytes));
                        declarations
                            .tensors
                            .insert(tensor.clone(), (*bytes, c.dtype));
                        let _ = writeln!(body, "{} = \"{tensor}\"", c.key);
                    }
                    if let (Some(group), Some(ranks)) = (declarations.group_of(c), &c.ranks) {
                        let group = group.to_string();
                        let _ = writeln!(body, "group = \"{group}\"");
                        declarations.groups.insert(group, ranks.clone());
                    }
                    if let Some(work) = work {
                        let _ = writeln!(body, "async_op = true\nwork = \"{work}\"");
                    }
                    body + &stream_key(stream)
                }
                Action::RecordEvent { event, stream } => {
                    format!("record_event = \"{event}\"\n{}", stream_key(stream))
                }
                Action::WaitEvent { event, stream } => {
                    format!("wait_event = \"{event}\"\n{}", stream_key(stream))
                }
                Action::Wait { work, stream } => {
                    format!("wait = \"{work}\"\n{}", stream_key(stream))
                }
                Action::EventSync { event } => format!("event_sync = \"{event}\"\n"),
                Action::StreamSync { stream } => format!("stream_sync = \"{stream}\"\n"),
                Action::Item { stream } => {
                    declarations.item = true;
                    format!("item = \"item_value\"\n{}", stream_key(stream))
                }
                Action::DeviceSync => "device_sync = true\n".to_string(),
            };
            let _ = write!(text, "[[op]]\n{}{body}", self.ranks_key);
        }
        for pair in marks.windows(2) {
            let name = pair[0].clone();
            declarations
                .measures
                .push((name, pair[0].clone(), pair[1].clone()));
        }
        text
    }
}

/// The host's launch latencies the traces show, of kernels and of collectives' NCCL kernels:
/// over GPU activities that found their stream idle, the 10th percentile of the activity's
/// start minus its launch call's start (a wait on another stream only adds to it, so the low
/// end is the latency). A collective's is from the launch call inside it, where the import
/// issues it, to its NCCL kernel: NCCL's enqueue path is longer than a kernel's. Its samples
/// are the launches onto an idle GPU, since an asynchronous collective's stream waits for the
/// caller's, which is often busy (its input's producer).
pub(super) fn launch_latencies_ns(traces: &[Trace]) -> (Option<i64>, Option<i64>) {
    let mut kernels = Vec::new();
    let mut nccl = Vec::new();
    for trace in traces {
        let collective_ops: BTreeSet<usize> =
            trace.comm_activity.iter().flatten().copied().collect();
        let mut stream_free: BTreeMap<i64, i64> = BTreeMap::new();
        let mut device_free = i64::MIN;
        let mut launches: Vec<(i64, usize)> = (0..trace.runtime.len())
            .filter_map(|call| Some((trace.runtime[call].start_ns, trace.gpu_of_call[call]?)))
            .collect();
        launches.sort_unstable();
        let mut by_start: Vec<usize> = (0..trace.gpu.len()).collect();
        by_start.sort_by_key(|&op| trace.gpu[op].start_ns);
        let mut launch_of = vec![None; trace.gpu.len()];
        for (start, op) in launches {
            launch_of[op] = Some(start);
        }
        for op in by_start {
            let gpu = &trace.gpu[op];
            let free = stream_free.get(&gpu.stream).copied().unwrap_or(i64::MIN);
            if let Some(launch) = launch_of[op] {
                if free <= launch && gpu.start_ns >= launch {
                    let latency = gpu.start_ns - launch;
                    if !collective_ops.contains(&op) {
                        kernels.push(latency);
                    } else if gpu.kind == GpuKind::Kernel && device_free <= launch {
                        nccl.push(latency);
                    }
                }
            }
            stream_free.insert(gpu.stream, gpu.start_ns + gpu.duration_ns);
            device_free = device_free.max(gpu.start_ns + gpu.duration_ns);
        }
    }
    let tenth = |mut samples: Vec<i64>| {
        samples.sort_unstable();
        samples.get((samples.len().max(1) - 1) / 10).copied()
    };
    (tenth(kernels), tenth(nccl))
}

/// The GPU time of the asynchronous collectives of one-rank traces (NCCL's copy on the internal
/// stream, or nothing for an in-place one): the median over them (0 without any), the
/// simulator's `kernel_floor_us` for a one-rank group. A synchronous one's copy is a kernel of
/// its own on the caller's stream.
pub(super) fn one_rank_collective_ns(traces: &[Trace]) -> Option<i64> {
    if traces.iter().all(|t| t.world_size != 1) {
        return None;
    }
    let mut samples: Vec<i64> = traces
        .iter()
        .filter(|t| t.world_size == 1)
        .flat_map(|t| {
            (0..t.comms.len())
                .filter(|&comm| t.comm_async[comm])
                .map(|comm| {
                    t.comm_activity[comm]
                        .iter()
                        .map(|&op| t.gpu[op].duration_ns)
                        .sum()
                })
        })
        .collect();
    Some(median(&mut samples).unwrap_or(0))
}

/// The scenario's `gpu` preset for a trace's `deviceProperties` name, in any case: PyTorch
/// writes the device's name (`NVIDIA H100 80GB HBM3`), c10dsim's own traces the preset
/// (`h100-sxm`).
pub(super) fn gpu_preset(name: &str) -> Option<&'static str> {
    let name = name.to_ascii_uppercase();
    if name.contains("H200") {
        Some("h200")
    } else if name.contains("H100") {
        Some("h100-sxm")
    } else if name.contains("A100") {
        Some("a100")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::import::kineto::TraceFile;

    #[test]
    fn the_gpu_is_known_by_the_device_s_name_or_c10dsim_s_own_preset() {
        // PyTorch writes the device's name; c10dsim's own traces write the preset.
        assert_eq!(gpu_preset("NVIDIA H100 80GB HBM3"), Some("h100-sxm"));
        assert_eq!(gpu_preset("NVIDIA H200"), Some("h200"));
        assert_eq!(gpu_preset("h100-sxm"), Some("h100-sxm"));
        assert_eq!(gpu_preset("h200"), Some("h200"));
        assert_eq!(gpu_preset("a100"), Some("a100"));
        assert_eq!(gpu_preset("NVIDIA L4"), None);
    }

    #[test]
    fn buckets_join_as_ddp_fills_them() {
        let comm = |bytes| Comm {
            thread: "1".into(),
            start_ns: 0,
            end_ns: 1,
            key: "all_reduce",
            dtype: "bf16",
            bytes,
            ranks: None,
            group: None,
            seq_num: None,
            unlisted: None,
        };
        let text = crate::import::kineto::tests::small_trace(0, 2);
        let mut trace = Trace::parse(&TraceFile {
            name: "t",
            text: &text,
        })
        .unwrap();
        trace.comms = vec![comm(32), comm(32), comm(32), comm(32), comm(32)];
        trace.comm_activity = vec![Vec::new(); 5];
        trace.comm_async = vec![true; 5];
        let program = RankProgram::new(&trace, false);
        let options = KinetoOptions {
            bucket_bytes: Some(100),
        };
        let bytes = program.buckets(&options);
        // 32, 64, 96 < 100: the fourth joins, then the bucket holds 128 and closes
        assert_eq!(bytes, [None, None, None, Some(128), Some(32)]);
    }

    #[test]
    fn kernel_names_shorten_to_their_function() {
        assert_eq!(
            short_kernel_name("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::X<2>>(int)"),
            "multi_tensor_apply_kernel"
        );
        assert_eq!(
            short_kernel_name("nvjet_sm90_tst_256x128"),
            "nvjet_sm90_tst_256x128"
        );
        assert_eq!(short_kernel_name("(odd)"), "kernel");
        assert_eq!(us(1_234), "1.234");
        assert_eq!(us(5_000), "5");
    }
}
