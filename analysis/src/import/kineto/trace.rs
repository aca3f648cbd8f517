//! Reading a torch.profiler trace: its GPU activities, CUDA calls, collectives and steps,
//! joined (a call to the activity it launched and to the collective it is part of) and its
//! streams named.
//!
//! About 1,120 lines, over 1,000, kept as one piece: the pass over the events (`Trace::from_events`, which
//! calls the collectives' readers, `Comm`, and sizes a coalescing block from the annotation
//! inside it) and the linking after it (`check_and_link`) fill and read the one `Trace` being
//! built; its tests are in `kineto/mod.rs`.

use super::TraceFile;
use crate::import::ImportError;
use serde_json::{Map, Value};
use sim::scenario::{DType, MAX_FIRST_SEQ_NUM};
use std::collections::{BTreeMap, BTreeSet};

/// What a GPU activity is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GpuKind {
    Kernel,
    Memcpy { device_to_host: bool },
    Memset,
}

/// A GPU activity of the trace.
#[derive(Debug, Clone)]
pub struct GpuOp {
    pub kind: GpuKind,
    pub name: String,
    pub stream: i64,
    pub device: i64,
    pub start_ns: i64,
    pub duration_ns: i64,
    pub correlation: Option<i64>,
    /// Thread blocks (grid x·y·z), where the trace gives a grid.
    pub blocks: Option<u64>,
}

/// A CUDA runtime or driver call on a host thread.
#[derive(Debug, Clone)]
pub(super) struct RuntimeCall {
    pub(super) name: String,
    pub(super) thread: String,
    pub(super) start_ns: i64,
    pub(super) end_ns: i64,
    pub(super) correlation: Option<i64>,
    /// The stream a `cudaStreamWaitEvent` made wait or a `cudaStreamSynchronize` waited for,
    /// where the trace has its `cuda_sync` event (torch.profiler's `enable_cuda_sync_events`)
    /// or, in c10dsim's traces, its `c10dsim stream` argument.
    pub(super) stream: Option<i64>,
    /// The stream whose event a `cudaStreamWaitEvent` waits on, where its `cuda_sync` event
    /// (`wait_on_stream`) or c10dsim's `c10dsim wait_on_stream` argument names it.
    pub(super) waits_on: Option<i64>,
}

/// A collective call (`record_param_comms`, or `nccl:*` where a trace has none).
#[derive(Debug, Clone)]
pub(super) struct Comm {
    pub(super) thread: String,
    pub(super) start_ns: i64,
    pub(super) end_ns: i64,
    /// Scenario key (`all_reduce`, …).
    pub(super) key: &'static str,
    pub(super) dtype: &'static str,
    pub(super) bytes: u64,
    /// The group's ranks, where the trace names them.
    pub(super) ranks: Option<Vec<u32>>,
    /// PyTorch's `Process Group Name` (`"0"` the default group, the others numbered in order of
    /// creation), where the trace names it: two groups on the same ranks are two communicators,
    /// each with its own internal stream.
    pub(super) group: Option<String>,
    /// The Work's `SeqNum`, the group's count of its collectives, where the trace has it
    /// (`Seq`: PyTorch ≥ 2.12 and c10dsim write it).
    pub(super) seq_num: Option<u64>,
    /// A group of unevenly spaced ranks, which the event does not list: its first rank and its
    /// size; its ranks are those whose traces record its `Process Group Name`
    /// (`mod::list_unlisted_groups`).
    pub(super) unlisted: Option<UnlistedGroup>,
}

/// What `record_param_comms` tells of a group of unevenly spaced ranks: PyTorch gives it no
/// stride, so lists none of its ranks, but its `Global rank start` and `Group size`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct UnlistedGroup {
    pub(super) start: u32,
    pub(super) size: u64,
}

/// A `ProfilerStep#N` on the host.
#[derive(Debug, Clone)]
pub struct Step {
    pub name: String,
    pub start_ns: i64,
    pub end_ns: i64,
}

/// One rank's trace, read.
#[derive(Debug, Clone)]
pub struct Trace {
    /// The file's name, for messages (`rank0.json`, `all.json (process 3)`).
    pub file: String,
    /// The file's name alone.
    pub path: String,
    pub rank: u32,
    pub world_size: u32,
    /// Whether the trace says its rank and world size (`distributedInfo`, or a file of every
    /// rank); without, it reads as rank 0 of a one-rank job.
    pub(super) ranked: bool,
    pub gpu_name: Option<String>,
    pub sms: Option<u32>,
    pub nccl_version: Option<String>,
    /// The steps, in time order; one step spanning the trace where it has no `ProfilerStep`.
    pub steps: Vec<Step>,
    pub gpu: Vec<GpuOp>,
    /// Trace stream id → scenario stream name, for the streams that carry work other than a
    /// collective's (the others are ProcessGroupNCCL's internal streams).
    pub streams: BTreeMap<i64, String>,
    pub(super) runtime: Vec<RuntimeCall>,
    pub(super) comms: Vec<Comm>,
    /// Per runtime call: the collective it is part of.
    pub(super) comm_of_call: Vec<Option<usize>>,
    /// Per runtime call: the GPU activity it launched.
    pub(super) gpu_of_call: Vec<Option<usize>>,
    /// Per collective: its GPU activities.
    pub(super) comm_activity: Vec<Vec<usize>>,
    /// Per collective: the first runtime call inside it that launched GPU work (NCCL's kernel,
    /// a one-rank collective's copy), where the collective's host time before it ends.
    pub(super) comm_launch: Vec<Option<usize>>,
    /// Per collective: whether it ran on an internal stream (ProcessGroupNCCL made that stream
    /// wait on the caller's: a `cudaStreamWaitEvent` inside the call).
    pub(super) comm_async: Vec<bool>,
    /// Per collective name the importer does not model (a gather, a send): how many calls of
    /// it the trace has (a Work's `wait` and a group's `init` are no collectives).
    pub(super) left_out: BTreeMap<String, u64>,
}

pub(super) fn error(file: &str, place: Option<String>, message: impl Into<String>) -> ImportError {
    ImportError {
        file: file.to_string(),
        place,
        message: message.into(),
    }
}

/// The longest span the importer takes (the scenario's times are at most a day).
const DAY_NS: i64 = 86_400_000_000_000;

/// The most SMs a trace's GPU may have: with the import's 65 more, the scenario's limit of 1024.
const MAX_GPU_SMS: u64 = 959;

/// The largest collective the importer takes (a scenario's tensor is at most 1 TiB).
const MAX_TENSOR_BYTES: u64 = 1 << 40;

/// Microseconds (Kineto's unit) → integer nanoseconds; `None` outside ±10¹⁵ µs.
fn ns_of_us(us: f64) -> Option<i64> {
    (us.is_finite() && us.abs() < 1e15).then(|| (us * 1000.0).round() as i64)
}

fn thread_key(value: Option<&Value>) -> String {
    match value {
        Some(Value::String(text)) => text.clone(),
        Some(other) => other.to_string(),
        None => String::new(),
    }
}

/// dtype as `record_param_comms` (`BFloat16`) or an op's input type (`c10::BFloat16`,
/// `float`) writes it → the scenario's dtype and the element's bytes.
fn dtype_of(name: &str) -> Option<(&'static str, u64)> {
    let name = name.trim_start_matches("c10::");
    Some(match name {
        "Float" | "float" => ("f32", 4),
        "BFloat16" => ("bf16", 2),
        "Half" => ("f16", 2),
        "Double" | "double" | "Long" | "long int" | "ComplexFloat" => ("f32", 8),
        "Int" | "int" => ("f32", 4),
        "Short" => ("f32", 2),
        "Byte" | "Char" | "Bool" | "bool" | "Float8_e4m3fn" | "Float8_e5m2" => ("f32", 1),
        _ => return None,
    })
}

/// A collective's bytes as the scenario's tensor holds them: a whole number of elements of its
/// dtype, at least one. A dtype the scenario lacks counts as f32 of its bytes, rounded up (3
/// `Byte` elements: 4 B).
fn whole_elements(bytes: u64, dtype: &str) -> u64 {
    let element_bytes = DType::parse(dtype).map_or(4, DType::size_bytes);
    bytes
        .max(1)
        .div_ceil(element_bytes)
        .saturating_mul(element_bytes)
}

/// A collective's name in `record_param_comms` or after `nccl:` → the scenario key. A
/// coalescing block of all_gather_into_tensor calls is `allgather_into_tensor_coalesced` in
/// `record_param_comms`, `nccl:all_gather_into_tensor_coalesced` in its Work's annotation.
fn collective_key(name: &str) -> Option<&'static str> {
    Some(match name {
        "allreduce" | "all_reduce" | "allreduce_coalesced" => "all_reduce",
        "allgather"
        | "all_gather"
        | "_allgather_base"
        | "_all_gather_base"
        | "all_gather_into_tensor"
        | "allgather_into_tensor_coalesced"
        | "all_gather_into_tensor_coalesced" => "all_gather",
        "reduce_scatter"
        | "_reduce_scatter_base"
        | "reduce_scatter_tensor"
        | "reduce_scatter_tensor_coalesced" => "reduce_scatter",
        "broadcast" => "broadcast",
        "all_to_all" | "alltoall" | "alltoall_base" | "all_to_all_single" => "all_to_all",
        // `nccl:all_reduce_barrier`: the Work of ProcessGroupNCCL::barrier's all_reduce.
        "barrier" | "all_reduce_barrier" => "barrier",
        _ => return None,
    })
}

/// The most ranks a trace's job may have (`distributedInfo`'s `world_size`).
const MAX_WORLD_SIZE: u64 = 65_536;

/// A `Process Group Ranks` list as the profiler writes it: the ranks it lists and, where it cut
/// the list of a group of over 30 ranks (`...`), those after the cut — none (older PyTorch,
/// after its first 30) or the group's last (PyTorch 2.11 and c10dsim's traces, after 29).
struct RankList {
    listed: Vec<u32>,
    after_cut: Option<Vec<u32>>,
}

fn read_rank_list(text: &str) -> Result<RankList, String> {
    let not_a_list = || format!("\"Process Group Ranks\" {text:?} is not a list of ranks");
    let inner = (text.trim().strip_prefix('['))
        .and_then(|rest| rest.strip_suffix(']'))
        .ok_or_else(not_a_list)?;
    if inner.trim().is_empty() {
        return Ok(RankList {
            listed: Vec::new(),
            after_cut: None,
        });
    }
    let items: Vec<&str> = inner.split(',').map(str::trim).collect();
    let parse = |items: &[&str]| -> Result<Vec<u32>, String> {
        (items.iter())
            .map(|item| {
                item.parse().map_err(|_| {
                    format!("\"Process Group Ranks\" {text:?}: {item:?} is not a rank")
                })
            })
            .collect()
    };
    match items.iter().position(|&item| item == "...") {
        None => Ok(RankList {
            listed: parse(&items)?,
            after_cut: None,
        }),
        Some(cut) => Ok(RankList {
            listed: parse(&items[..cut])?,
            after_cut: Some(parse(&items[cut + 1..])?),
        }),
    }
}

impl RankList {
    /// Whether the list is one the profiler writes for a group of `ranks`: all of them, or a
    /// cut list of their first ones and none or the last.
    fn lists(&self, ranks: &[u32]) -> bool {
        match &self.after_cut {
            None => self.listed == ranks,
            Some(after_cut) => {
                self.listed.len() < ranks.len()
                    && ranks.starts_with(&self.listed)
                    && after_cut.len() <= 1
                    && after_cut
                        .first()
                        .is_none_or(|last| ranks.last() == Some(last))
            }
        }
    }
}

/// A group's ranks from `record_param_comms`'s `Process Group Ranks` and `Group size`: the
/// whole list, or the profiler's cut one of a group of over 30 ranks, whose ranks are then
/// `Group size` steps of the listed ones' stride (as `new_subgroups` and DeviceMesh make them);
/// a cut list that is not is refused, as is one that names no rank.
fn parse_ranks(text: &str, group_size: Option<u64>) -> Result<Vec<u32>, String> {
    let list = read_rank_list(text)?;
    let Some(after_cut) = &list.after_cut else {
        return Ok(list.listed);
    };
    let unknown = |why: &str| {
        format!(
            "\"Process Group Ranks\" {text:?} lists only some of the group's ranks (the profiler cuts the list after 30) and {why}: c10dsim cannot tell the others"
        )
    };
    let size = group_size.ok_or_else(|| unknown("the event has no \"Group size\""))?;
    let (Some(&first), Some(&second)) = (list.listed.first(), list.listed.get(1)) else {
        return Err(format!(
            "\"Process Group Ranks\" {text:?} is not a list of ranks"
        ));
    };
    let stride = second.checked_sub(first).filter(|&stride| stride > 0);
    let ranks: Option<Vec<u32>> = stride
        .filter(|_| size <= MAX_WORLD_SIZE && after_cut.len() <= 1)
        .and_then(|stride| ranks_in_steps(first, stride, size as u32));
    match ranks {
        Some(ranks) if list.lists(&ranks) => Ok(ranks),
        _ => Err(unknown(&format!(
            "its {size} ranks are not in steps of the listed ones' stride"
        ))),
    }
}

/// The `size` ranks from `first` in steps of `stride`, or `None` where they pass `u32::MAX`.
fn ranks_in_steps(first: u32, stride: u32, size: u32) -> Option<Vec<u32>> {
    (0..size)
        .map(|step| step.checked_mul(stride)?.checked_add(first))
        .collect()
}

/// A group's ranks from `record_param_comms`'s `Global rank start` and `Global rank stride`,
/// which PyTorch writes for a group of evenly spaced global ranks (the stride only then), and
/// `Group size`; `None` where the event has not both.
fn strided_group(args: &Map<String, Value>) -> Result<Option<Vec<u32>>, String> {
    let (Some(start), Some(stride)) = (rank_start(args)?, args.get("Global rank stride")) else {
        return Ok(None);
    };
    let stride: u32 = (stride.as_u64())
        .filter(|&stride| stride > 0)
        .and_then(|stride| stride.try_into().ok())
        .ok_or_else(|| {
            format!("\"Global rank stride\" {stride} is not a positive whole number of ranks")
        })?;
    let size = args_u64(args, "Group size").filter(|&size| size > 0).ok_or_else(|| {
        format!(
            "\"Global rank start\" {start} and \"Global rank stride\" {stride} begin a group, but the event has no \"Group size\" of one rank or more: c10dsim cannot tell its ranks"
        )
    })?;
    if size > MAX_WORLD_SIZE {
        return Err(format!(
            "\"Group size\" {size}: a job has at most {MAX_WORLD_SIZE} ranks"
        ));
    }
    ranks_in_steps(start, stride, size as u32).map(Some).ok_or_else(|| {
        format!(
            "\"Global rank start\" {start} and \"Global rank stride\" {stride} make a group of {size} ranks reaching beyond rank {}",
            u32::MAX
        )
    })
}

/// A group's ranks from `record_param_comms`: those of its `Global rank start` and
/// `Global rank stride`, which its `Process Group Ranks` must list (else it is refused), or
/// those of its `Process Group Ranks`; `None` where it has neither.
fn group_ranks(args: &Map<String, Value>) -> Result<Option<Vec<u32>>, String> {
    let text = match args.get("Process Group Ranks") {
        None => None,
        Some(Value::String(text)) => Some(text),
        Some(other) => {
            return Err(format!(
                "\"Process Group Ranks\" {other} is not a list of ranks"
            ))
        }
    };
    let Some(strided) = strided_group(args)? else {
        let listed =
            (text.map(|text| parse_ranks(text, args_u64(args, "Group size")))).transpose()?;
        // A group without a stride is listed as none; one of a lone rank is its start.
        let lone = rank_start(args)?.filter(|_| args_u64(args, "Group size") == Some(1));
        return Ok(match (listed, lone) {
            (listed, Some(start)) if listed.as_ref().is_none_or(Vec::is_empty) => Some(vec![start]),
            (listed, _) => listed,
        });
    };
    if let Some(text) = text {
        let list = read_rank_list(text)?;
        if !list.listed.is_empty() && !list.lists(&strided) {
            let stride = args
                .get("Global rank stride")
                .map_or(String::new(), Value::to_string);
            return Err(format!(
                "\"Global rank start\" {} and \"Global rank stride\" {stride} make the group's {} ranks {}, …, {}, which \"Process Group Ranks\" {text:?} does not list",
                strided[0],
                strided.len(),
                strided[0],
                strided[strided.len() - 1]
            ));
        }
    }
    Ok(Some(strided))
}

/// `record_param_comms`'s `Global rank start`, where it has one.
fn rank_start(args: &Map<String, Value>) -> Result<Option<u32>, String> {
    (args.get("Global rank start"))
        .map(|start| {
            (start.as_u64())
                .and_then(|start| start.try_into().ok())
                .ok_or_else(|| format!("\"Global rank start\" {start} is not a rank"))
        })
        .transpose()
}

/// The group of unevenly spaced ranks that `record_param_comms` names by `Global rank start`
/// and a `Group size` of two or more, with no stride and no ranks listed; `None` for any other.
fn unlisted_group(
    args: &Map<String, Value>,
    ranks: Option<&[u32]>,
) -> Result<Option<UnlistedGroup>, String> {
    if args.contains_key("Global rank stride") || ranks.is_some_and(|ranks| !ranks.is_empty()) {
        return Ok(None);
    }
    let size = args_u64(args, "Group size").filter(|&size| size > 1);
    Ok(rank_start(args)?
        .zip(size)
        .map(|(start, size)| UnlistedGroup { start, size }))
}

fn args_u64(args: &Map<String, Value>, key: &str) -> Option<u64> {
    args.get(key).and_then(Value::as_u64)
}

impl Trace {
    /// Reads one trace: JSON syntax errors with their line and column, malformed events with
    /// their index in `traceEvents`; a trace without CUDA activities or runtime calls is refused.
    pub fn parse(file: &TraceFile) -> Result<Trace, ImportError> {
        let mut traces = Trace::parse_file(file)?;
        if traces.len() > 1 {
            return Err(error(
                file.name,
                None,
                format!("the file holds the CUDA calls of {} processes (a trace of every rank): read it with parse_file", traces.len()),
            ));
        }
        Ok(traces.remove(0))
    }

    /// Reads a file: one rank's trace, or, where CUDA calls come from several processes (a
    /// trace of every rank in one file, as `c10dsim run --trace` writes it, each rank a process
    /// with its host and GPU rows), one trace per process: ranks in process order, the world
    /// their number.
    pub fn parse_file(file: &TraceFile) -> Result<Vec<Trace>, ImportError> {
        let name = file.name;
        let root: Value = serde_json::from_str(file.text).map_err(|e| {
            let (place, message) = sim::timeline::json_error_place(&e);
            let place = place.map(|(line, column)| format!("{line}:{column}"));
            error(name, place, format!("not a JSON trace: {message}"))
        })?;
        let (events, meta) = match &root {
            Value::Object(map) => match map.get("traceEvents") {
                Some(Value::Array(events)) => (events, Some(map)),
                _ => {
                    return Err(error(
                        name,
                        None,
                        "no \"traceEvents\" array: not a torch.profiler trace (export it with prof.export_chrome_trace)",
                    ))
                }
            },
            Value::Array(events) => (events, None),
            _ => {
                return Err(error(
                    name,
                    None,
                    "a trace is a JSON object with \"traceEvents\" (or an array of events)",
                ))
            }
        };
        let mut processes: Vec<&Value> = Vec::new();
        for event in events {
            let cuda_call = matches!(
                event.get("cat").and_then(Value::as_str),
                Some("cuda_runtime" | "cuda_driver")
            );
            if let (true, Some(pid)) = (cuda_call, event.get("pid")) {
                if !processes.contains(&pid) {
                    processes.push(pid);
                }
            }
        }
        if processes.len() <= 1 {
            return Ok(vec![Trace::from_events(name, events, meta, None)?]);
        }
        processes.sort_by_key(|pid| (pid.as_i64(), pid.to_string()));
        let world = processes.len() as u32;
        processes
            .iter()
            .enumerate()
            .map(|(rank, pid)| {
                let process = format!("{name} (process {pid})");
                let mut trace =
                    Trace::from_events(&process, events, meta, Some((pid, rank as u32, world)))?;
                trace.path = name.to_string();
                Ok(trace)
            })
            .collect()
    }

    /// One rank's trace from the file's events; where `process` is (pid, rank, world), of that
    /// process only, as that rank of that world.
    fn from_events(
        name: &str,
        events: &[Value],
        meta: Option<&Map<String, Value>>,
        process: Option<(&Value, u32, u32)>,
    ) -> Result<Trace, ImportError> {
        let mut trace = Trace {
            file: name.to_string(),
            path: name.to_string(),
            rank: 0,
            world_size: 1,
            ranked: false,
            gpu_name: None,
            sms: None,
            nccl_version: None,
            steps: Vec::new(),
            gpu: Vec::new(),
            streams: BTreeMap::new(),
            runtime: Vec::new(),
            comms: Vec::new(),
            comm_of_call: Vec::new(),
            gpu_of_call: Vec::new(),
            comm_activity: Vec::new(),
            comm_launch: Vec::new(),
            comm_async: Vec::new(),
            left_out: BTreeMap::new(),
        };
        if let Some(meta) = meta {
            trace.read_meta(meta)?;
        }
        if let Some((_, rank, world)) = process {
            trace.rank = rank;
            trace.world_size = world;
            trace.ranked = true;
        }
        let empty = Map::new();
        let mut nccl_annotations = Vec::new();
        // The coalescing blocks among `trace.comms`, by index.
        let mut coalesced = Vec::new();
        // Per correlation: the stream a `cuda_sync` event synchronised, and the one it waited on.
        let mut synced_streams: BTreeMap<i64, (i64, Option<i64>)> = BTreeMap::new();
        for (index, event) in events.iter().enumerate() {
            let Value::Object(event) = event else {
                continue;
            };
            if event.get("ph").and_then(Value::as_str) != Some("X")
                || process.is_some_and(|(pid, _, _)| event.get("pid") != Some(pid))
            {
                continue;
            }
            let category = event.get("cat").and_then(Value::as_str).unwrap_or("");
            let event_name = event.get("name").and_then(Value::as_str).unwrap_or("");
            let wanted = matches!(
                category,
                "kernel"
                    | "gpu_memcpy"
                    | "gpu_memset"
                    | "cuda_runtime"
                    | "cuda_driver"
                    | "cuda_sync"
            ) || event_name == "record_param_comms"
                || (category == "user_annotation"
                    && (event_name.starts_with("ProfilerStep#")
                        || event_name.starts_with("nccl:")));
            if !wanted {
                continue;
            }
            let place = || Some(format!("traceEvents[{index}]"));
            let (Some(start_ns), Some(duration_ns)) = (
                event.get("ts").and_then(Value::as_f64).and_then(ns_of_us),
                event.get("dur").and_then(Value::as_f64).and_then(ns_of_us),
            ) else {
                return Err(error(
                    name,
                    place(),
                    format!("{event_name:?} ({category}) needs numeric \"ts\" and \"dur\" in µs"),
                ));
            };
            if !(0..=DAY_NS).contains(&duration_ns) {
                return Err(error(
                    name,
                    place(),
                    format!(
                        "{event_name:?} lasts {duration_ns} ns: a duration is between 0 and a day"
                    ),
                ));
            }
            let args = event
                .get("args")
                .and_then(Value::as_object)
                .unwrap_or(&empty);
            let thread = thread_key(event.get("tid"));
            match category {
                "kernel" | "gpu_memcpy" | "gpu_memset" => {
                    let stream = match args.get("stream") {
                        None => Err(format!(
                            "GPU activity {event_name:?} names no \"stream\" in its args"
                        )),
                        Some(stream) => stream.as_i64().ok_or_else(|| {
                            format!("GPU activity {event_name:?}: \"stream\" {stream} is not a stream id (a whole number from -2^63 to 2^63-1)")
                        }),
                    }
                    .map_err(|message| error(name, place(), message))?;
                    let kind = match category {
                        "kernel" => GpuKind::Kernel,
                        "gpu_memset" => GpuKind::Memset,
                        _ => GpuKind::Memcpy {
                            device_to_host: event_name.contains("DtoH"),
                        },
                    };
                    let blocks = args.get("grid").and_then(Value::as_array).and_then(|grid| {
                        grid.iter()
                            .try_fold(1u64, |product, d| product.checked_mul(d.as_u64()?))
                    });
                    trace.gpu.push(GpuOp {
                        kind,
                        name: event_name.to_string(),
                        stream,
                        device: args.get("device").and_then(Value::as_i64).unwrap_or(0),
                        start_ns,
                        duration_ns,
                        correlation: args.get("correlation").and_then(Value::as_i64),
                        blocks,
                    });
                }
                "cuda_runtime" | "cuda_driver" => trace.runtime.push(RuntimeCall {
                    name: event_name.to_string(),
                    thread,
                    start_ns,
                    end_ns: start_ns + duration_ns,
                    correlation: args.get("correlation").and_then(Value::as_i64),
                    stream: args.get("c10dsim stream").and_then(Value::as_i64),
                    waits_on: args.get("c10dsim wait_on_stream").and_then(Value::as_i64),
                }),
                "cuda_sync" => {
                    let stream = args.get("stream").and_then(Value::as_i64);
                    let correlation = args.get("correlation").and_then(Value::as_i64);
                    let waits_on = args.get("wait_on_stream").and_then(Value::as_i64);
                    if let (Some(stream @ 0..), Some(correlation)) = (stream, correlation) {
                        synced_streams.insert(correlation, (stream, waits_on.filter(|&s| s >= 0)));
                    }
                }
                _ if event_name == "record_param_comms" => {
                    let comm = Comm::from_record_param_comms(args, thread, start_ns, duration_ns)
                        .map_err(|message| error(name, place(), message))?;
                    if comm.is_none() {
                        let collective = args.get("Collective name").and_then(Value::as_str);
                        trace.count_left_out(collective.unwrap_or_default());
                    }
                    if let Some(comm) = comm {
                        let collective = args.get("Collective name").and_then(Value::as_str);
                        if collective.is_some_and(|c| c.ends_with("_coalesced")) {
                            coalesced.push(trace.comms.len());
                        }
                        trace.comms.push(comm);
                    }
                }
                _ if event_name.starts_with("nccl:") => {
                    nccl_annotations.push((index, event_name, args, thread, start_ns, duration_ns));
                }
                _ => trace.steps.push(Step {
                    name: event_name.to_string(),
                    start_ns,
                    end_ns: start_ns + duration_ns,
                }),
            }
        }
        // A coalescing block's `record_param_comms` counts all its tensors' elements in the
        // first one's dtype; its Work's annotation, inside it on its thread, lists each tensor
        // with its own.
        for index in coalesced {
            let comm = &trace.comms[index];
            let group_size = (comm.ranks.as_ref().map(Vec::len))
                .filter(|&members| members > 0)
                .map_or(u64::from(trace.world_size), |members| members as u64);
            let annotated = (nccl_annotations.iter())
                .filter(|(_, _, _, thread, start_ns, _)| {
                    *thread == comm.thread && (comm.start_ns..=comm.end_ns).contains(start_ns)
                })
                .find_map(|&(_, event_name, args, _, start_ns, duration_ns)| {
                    let at = (comm.thread.clone(), start_ns, duration_ns);
                    Comm::from_nccl_annotation(event_name, args, group_size, at)
                        .ok()
                        .flatten()
                        .filter(|annotated| annotated.key == comm.key)
                });
            if let Some(annotated) = annotated {
                trace.comms[index].bytes = annotated.bytes;
            }
        }
        if trace.comms.is_empty() {
            if !nccl_annotations.is_empty() {
                // The annotations stand for the collectives: those left out are counted anew.
                trace.left_out.clear();
            }
            for (index, event_name, args, thread, start_ns, duration_ns) in nccl_annotations {
                // The annotations name no group: their collectives are the world's.
                let group_size = u64::from(trace.world_size);
                if let Some(comm) = Comm::from_nccl_annotation(
                    event_name,
                    args,
                    group_size,
                    (thread, start_ns, duration_ns),
                )
                .map_err(|message| error(name, Some(format!("traceEvents[{index}]")), message))?
                {
                    trace.comms.push(comm);
                } else {
                    trace.count_left_out(event_name.trim_start_matches("nccl:"));
                }
            }
        }
        for call in &mut trace.runtime {
            if let Some(&(stream, waits_on)) = call.correlation.and_then(|c| synced_streams.get(&c))
            {
                (call.stream, call.waits_on) = (Some(stream), waits_on);
            }
        }
        trace.check_and_link()?;
        Ok(trace)
    }

    /// Counts a call of a collective the importer does not model; a Work's `wait` and a
    /// group's `init`, which `record_param_comms` records too, are none.
    fn count_left_out(&mut self, collective: &str) {
        if !matches!(collective, "wait" | "init") {
            *self.left_out.entry(collective.to_string()).or_default() += 1;
        }
    }

    /// For an error that may come of the trace's rank and world size being the defaults: says
    /// so where they are.
    pub(super) fn unranked_hint(&self) -> &'static str {
        if self.ranked {
            ""
        } else {
            " (the trace has no distributedInfo: it reads as rank 0 of a one-rank job)"
        }
    }

    fn read_meta(&mut self, meta: &Map<String, Value>) -> Result<(), ImportError> {
        if let Some(info) = meta.get("distributedInfo").and_then(Value::as_object) {
            let whole = |field: &str, default: u64| match info.get(field) {
                None => Ok(default),
                Some(value) => value.as_u64().ok_or_else(|| {
                    error(
                        &self.file,
                        None,
                        format!("distributedInfo: {field} {value} is not a whole number"),
                    )
                }),
            };
            let rank = whole("rank", 0)?;
            let world = whole("world_size", 1)?;
            if world == 0 || world > MAX_WORLD_SIZE || rank >= world {
                return Err(error(
                    &self.file,
                    None,
                    format!("distributedInfo: rank {rank} of world size {world} is not a rank of the job"),
                ));
            }
            self.rank = rank as u32;
            self.world_size = world as u32;
            self.ranked = true;
            self.nccl_version = info
                .get("nccl_version")
                .and_then(Value::as_str)
                .map(str::to_string);
        }
        if let Some(device) = meta
            .get("deviceProperties")
            .and_then(Value::as_array)
            .and_then(|devices| devices.first())
            .and_then(Value::as_object)
        {
            self.gpu_name = device
                .get("name")
                .and_then(Value::as_str)
                .map(str::to_string);
            self.sms = args_u64(device, "numSms")
                .filter(|&sms| (1..=MAX_GPU_SMS).contains(&sms))
                .map(|sms| sms as u32);
        }
        Ok(())
    }

    /// Refuses traces this importer cannot turn into a program, orders everything by time and
    /// joins the calls to their GPU activities and collectives.
    fn check_and_link(&mut self) -> Result<(), ImportError> {
        if self.gpu.is_empty() && self.runtime.is_empty() {
            return Err(error(
                &self.file,
                None,
                "the trace has no CUDA activities (no \"kernel\", \"gpu_memcpy\" or \"gpu_memset\" events): record it with torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])",
            ));
        }
        if self.gpu.is_empty() {
            // CUDA activities were recorded (the runtime calls are), but no GPU work ended
            // while the profiler ran: a run that hung or failed before its first kernel ended.
            return Err(error(
                &self.file,
                None,
                format!(
                    "the trace has {} CUDA runtime call{} but no GPU activity (no \"kernel\", \"gpu_memcpy\" or \"gpu_memset\" events): no GPU work ended while it was recorded, so there is no program to replay",
                    self.runtime.len(),
                    if self.runtime.len() == 1 { "" } else { "s" }
                ),
            ));
        }
        if self.runtime.is_empty() {
            return Err(error(
                &self.file,
                None,
                "the trace has CUDA activities but no CUDA runtime calls (\"cuda_runtime\" events): record it with ProfilerActivity.CPU as well",
            ));
        }
        let devices: BTreeSet<i64> = self.gpu.iter().map(|op| op.device).collect();
        if devices.len() > 1 {
            return Err(error(
                &self.file,
                None,
                format!("the trace has GPU activities on {} devices ({devices:?}): give one trace per rank (one device each)", devices.len()),
            ));
        }
        let starts = self
            .gpu
            .iter()
            .map(|op| op.start_ns)
            .chain(self.runtime.iter().map(|c| c.start_ns))
            .chain(self.comms.iter().map(|c| c.start_ns))
            .chain(self.steps.iter().map(|s| s.start_ns));
        let ends = self
            .gpu
            .iter()
            .map(|op| op.start_ns + op.duration_ns)
            .chain(self.runtime.iter().map(|c| c.end_ns))
            .chain(self.comms.iter().map(|c| c.end_ns))
            .chain(self.steps.iter().map(|s| s.end_ns));
        if let (Some(first), Some(last)) = (starts.min(), ends.max()) {
            if last - first > DAY_NS {
                return Err(error(
                    &self.file,
                    None,
                    "the trace spans more than a day; c10dsim imports at most a day",
                ));
            }
        }
        for comm in &self.comms {
            if comm.bytes > MAX_TENSOR_BYTES {
                return Err(error(
                    &self.file,
                    None,
                    format!(
                        "{} of {} bytes: c10dsim's tensors are at most 1 TiB",
                        comm.key, comm.bytes
                    ),
                ));
            }
            if let Some(seq_num) = comm.seq_num.filter(|&s| s > MAX_FIRST_SEQ_NUM) {
                return Err(error(
                    &self.file,
                    None,
                    format!(
                        "{} with Seq {seq_num}: c10dsim numbers a group's collectives up to {MAX_FIRST_SEQ_NUM}",
                        comm.key
                    ),
                ));
            }
            if comm
                .ranks
                .as_ref()
                .is_some_and(|r| !r.is_empty() && !r.contains(&self.rank))
            {
                return Err(error(
                    &self.file,
                    None,
                    format!(
                        "rank {} calls {} on a group without it{}",
                        self.rank,
                        comm.key,
                        self.unranked_hint()
                    ),
                ));
            }
            if let Some(rank) = comm.ranks.iter().flatten().find(|&&r| r >= self.world_size) {
                return Err(error(
                    &self.file,
                    None,
                    format!(
                        "{} on a group with rank {rank}, outside the world of {}{}",
                        comm.key,
                        self.world_size,
                        self.unranked_hint()
                    ),
                ));
            }
        }
        self.gpu.sort_by_key(|op| (op.start_ns, op.stream));
        self.runtime.sort_by_key(|call| call.start_ns);
        self.comms.sort_by_key(|comm| comm.start_ns);
        self.steps.sort_by_key(|step| step.start_ns);
        if self.steps.is_empty() {
            let start_ns = self.runtime[0].start_ns;
            let end_ns = self
                .runtime
                .iter()
                .map(|c| c.end_ns)
                .max()
                .unwrap_or(start_ns);
            self.steps.push(Step {
                name: "the whole trace (no ProfilerStep#N)".to_string(),
                start_ns,
                end_ns,
            });
        }
        let by_correlation: BTreeMap<i64, usize> = self
            .gpu
            .iter()
            .enumerate()
            .filter_map(|(index, op)| Some((op.correlation?, index)))
            .collect();
        let mut comms_by_thread: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
        for (index, comm) in self.comms.iter().enumerate() {
            comms_by_thread.entry(&comm.thread).or_default().push(index);
        }
        self.comm_activity = vec![Vec::new(); self.comms.len()];
        self.comm_launch = vec![None; self.comms.len()];
        self.comm_async = vec![false; self.comms.len()];
        for (index, call) in self.runtime.iter().enumerate() {
            let gpu = call
                .correlation
                .and_then(|c| by_correlation.get(&c).copied());
            let comm = comms_by_thread.get(call.thread.as_str()).and_then(|list| {
                let before = list.partition_point(|&c| self.comms[c].start_ns <= call.start_ns);
                let candidate = *list.get(before.checked_sub(1)?)?;
                (call.start_ns < self.comms[candidate].end_ns).then_some(candidate)
            });
            if let (Some(comm), Some(gpu)) = (comm, gpu) {
                self.comm_activity[comm].push(gpu);
                self.comm_launch[comm].get_or_insert(index);
            }
            if let (Some(comm), "cudaStreamWaitEvent") = (comm, call.name.as_str()) {
                self.comm_async[comm] = true;
            }
            self.gpu_of_call.push(gpu);
            self.comm_of_call.push(comm);
        }
        // A user stream carries work other than an asynchronous collective's (a synchronous
        // collective runs on the caller's stream).
        let internal_ops: BTreeSet<usize> = (0..self.comms.len())
            .filter(|&comm| self.comm_async[comm])
            .flat_map(|comm| self.comm_activity[comm].iter().copied())
            .collect();
        let collective_ops: BTreeSet<usize> =
            self.comm_activity.iter().flatten().copied().collect();
        let mut work_per_stream: BTreeMap<i64, usize> = BTreeMap::new();
        // A stream the program made wait or synchronised, though it may run nothing.
        for (call, comm) in self.runtime.iter().zip(&self.comm_of_call) {
            if let (Some(stream), None) = (call.stream, comm) {
                work_per_stream.entry(stream).or_default();
            }
        }
        for (index, op) in self.gpu.iter().enumerate() {
            if !internal_ops.contains(&index) {
                let work = usize::from(!collective_ops.contains(&index));
                *work_per_stream.entry(op.stream).or_default() += work;
            }
        }
        let default = work_per_stream
            .iter()
            .max_by_key(|(stream, count)| (**count, std::cmp::Reverse(**stream)))
            .map(|(stream, _)| *stream);
        for stream in work_per_stream.keys() {
            let name = if Some(*stream) == default {
                "default".to_string()
            } else {
                format!("stream{stream}")
            };
            self.streams.insert(*stream, name);
        }
        Ok(())
    }

    /// Where a collective's host time reaches its launch: the start of its first launching
    /// call, else (no GPU work joined to it) the collective's start.
    pub(super) fn comm_launch_ns(&self, comm: usize) -> i64 {
        self.comm_launch[comm].map_or(self.comms[comm].start_ns, |call| {
            self.runtime[call].start_ns
        })
    }

    /// The index of the step a host time falls in: from its start to the next step's start
    /// (the last step: to its end).
    pub(super) fn step_of(&self, at_ns: i64) -> Option<usize> {
        let after = self.steps.partition_point(|s| s.start_ns <= at_ns);
        let index = after.checked_sub(1)?;
        (index + 1 < self.steps.len() || at_ns <= self.steps[index].end_ns).then_some(index)
    }
}

impl Comm {
    fn from_record_param_comms(
        args: &Map<String, Value>,
        thread: String,
        start_ns: i64,
        duration_ns: i64,
    ) -> Result<Option<Comm>, String> {
        let collective = args
            .get("Collective name")
            .and_then(Value::as_str)
            .ok_or("record_param_comms has no \"Collective name\"")?;
        let Some(key) = collective_key(collective) else {
            return Ok(None);
        };
        let dtype_name = args.get("dtype").and_then(Value::as_str).unwrap_or("Float");
        let (dtype, element_bytes) = dtype_of(dtype_name).ok_or_else(|| {
            format!("record_param_comms: dtype {dtype_name:?} is not one c10dsim knows")
        })?;
        let elements_key = if key == "all_gather" {
            "Out msg nelems"
        } else {
            "In msg nelems"
        };
        let elements = if key == "barrier" {
            1
        } else {
            match args.get(elements_key) {
                None => Err(format!(
                    "record_param_comms ({collective}) has no {elements_key:?}"
                )),
                Some(elements) => elements.as_u64().ok_or_else(|| {
                    format!("record_param_comms ({collective}): {elements_key:?} {elements} is not a count of elements (a whole number from 0)")
                }),
            }?
        };
        let ranks = group_ranks(args)?.map(|mut ranks| {
            ranks.sort_unstable();
            ranks.dedup();
            ranks
        });
        let unlisted = unlisted_group(args, ranks.as_deref())?;
        let ranks = ranks.filter(|_| unlisted.is_none());
        let group = args.get("Process Group Name").map(|name| match name {
            Value::String(text) => text.clone(),
            other => other.to_string(),
        });
        Ok(Some(Comm {
            thread,
            start_ns,
            end_ns: start_ns + duration_ns,
            key,
            dtype,
            bytes: whole_elements(elements.saturating_mul(element_bytes), dtype),
            ranks,
            group,
            seq_num: args_u64(args, "Seq"),
            unlisted,
        }))
    }

    /// A collective from the `nccl:*` annotation of its Work, on a group of `group_size` ranks;
    /// `(thread, start_ns, duration_ns)` the annotation's.
    fn from_nccl_annotation(
        name: &str,
        args: &Map<String, Value>,
        group_size: u64,
        (thread, start_ns, duration_ns): (String, i64, i64),
    ) -> Result<Option<Comm>, String> {
        let Some(key) = collective_key(name.trim_start_matches("nccl:")) else {
            return Ok(None);
        };
        // One dims and one type per input tensor: a coalesced block's (`nccl:allreduce_coalesced`)
        // are several, each counted in its own dtype; the first names the collective's. The
        // Work lists its inputs only: an all_gather's are one rank's slices, of which the
        // scenario's tensor, the gathered output, holds one per rank of the group.
        let list = |key: &str| args.get(key).and_then(Value::as_array).cloned();
        let types = list("Input type").unwrap_or_default();
        let type_of = |index: usize| {
            let input_type = (types.get(index).or(types.first()))
                .and_then(Value::as_str)
                .unwrap_or("float");
            dtype_of(input_type).ok_or_else(|| {
                format!("{name}: input type {input_type:?} is not one c10dsim knows")
            })
        };
        let (dtype, element_bytes) = type_of(0)?;
        // Without dims, one element.
        let dims = list("Input Dims").unwrap_or_else(|| vec![Value::Array(Vec::new())]);
        let mut bytes = 0u64;
        for (index, shape) in dims.iter().enumerate() {
            let element_bytes = if index == 0 {
                element_bytes
            } else {
                type_of(index)?.1
            };
            let elements = (shape.as_array())
                .and_then(|shape| (shape.iter()).try_fold(1u64, |p, d| p.checked_mul(d.as_u64()?)))
                .unwrap_or(1);
            bytes = bytes.saturating_add(elements.saturating_mul(element_bytes));
        }
        if key == "all_gather" {
            bytes = bytes.saturating_mul(group_size);
        }
        Ok(Some(Comm {
            thread,
            start_ns,
            end_ns: start_ns + duration_ns,
            key,
            dtype,
            bytes: whole_elements(bytes, dtype),
            ranks: None,
            group: None,
            seq_num: None,
            unlisted: None,
        }))
    }
}
