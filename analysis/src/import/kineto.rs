//! torch.profiler (Kineto) Chrome traces → a scenario (docs/import.md).
//!
//! One trace per rank, recorded with CUDA activities: every GPU activity (`kernel`,
//! `gpu_memcpy`, `gpu_memset`) becomes a `kernel` op of its measured duration on its stream (SMs
//! from the grid where the trace gives one); every `record_param_comms` a collective of its size,
//! dtype and group (the CUDA calls inside it are ProcessGroupNCCL's own and are left to the
//! simulator); `cudaEventRecord`/`cudaStreamWaitEvent`, the synchronisations and `.item()`-like
//! copies the matching ops; the host's time between the calls `host_sleep_us`, with every
//! `[host]` cost 0, so that the measured gaps are the host's whole time. A `mark` starts each
//! `ProfilerStep#N` (one comment per step) and a host-clock `[[measure]]` spans it.
//!
//! Kineto's runtime events do not name the stream or the event a call uses, so two things are
//! inferred, as docs/import.md says: a recorded event is on the stream of the GPU work the host
//! issued last, a wait is by the stream of the GPU work it issues next and on the latest event
//! recorded on another stream (or, while asynchronous collectives are outstanding, their Work,
//! oldest first).

use super::ImportError;
use serde_json::{Map, Value};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt::Write as _;

/// One trace file: its name (for messages and comments) and its text.
#[derive(Debug, Clone, Copy)]
pub struct TraceFile<'a> {
    pub name: &'a str,
    pub text: &'a str,
}

/// Edits of the imported program (what-ifs).
#[derive(Debug, Clone, Default)]
pub struct KinetoOptions {
    /// Re-bucket DDP's gradients: within a step, consecutive asynchronous all_reduces of one
    /// group and dtype join one collective the way DDP's reducer fills a bucket (a tensor joins
    /// while the bucket holds less than this many bytes); the joined collective is issued where
    /// the last of its members was, and the others' host time (their `record_param_comms`) is
    /// dropped.
    pub bucket_bytes: Option<u64>,
}

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
struct RuntimeCall {
    name: String,
    thread: String,
    start_ns: i64,
    end_ns: i64,
    correlation: Option<i64>,
}

/// A collective call (`record_param_comms`, or `nccl:*` where a trace has none).
#[derive(Debug, Clone)]
struct Comm {
    thread: String,
    start_ns: i64,
    end_ns: i64,
    /// Scenario key (`all_reduce`, …).
    key: &'static str,
    dtype: &'static str,
    bytes: u64,
    /// The group's ranks, where the trace names them.
    ranks: Option<Vec<u32>>,
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
    pub file: String,
    pub rank: u32,
    pub world_size: u32,
    pub gpu_name: Option<String>,
    pub sms: Option<u32>,
    pub nccl_version: Option<String>,
    /// The steps, in time order; one step spanning the trace where it has no `ProfilerStep`.
    pub steps: Vec<Step>,
    pub gpu: Vec<GpuOp>,
    /// Trace stream id → scenario stream name, for the streams that carry work other than a
    /// collective's (the others are ProcessGroupNCCL's internal streams).
    pub streams: BTreeMap<i64, String>,
    runtime: Vec<RuntimeCall>,
    comms: Vec<Comm>,
    /// Per runtime call: the collective it is part of.
    comm_of_call: Vec<Option<usize>>,
    /// Per runtime call: the GPU activity it launched.
    gpu_of_call: Vec<Option<usize>>,
    /// Per collective: its GPU activities.
    comm_activity: Vec<Vec<usize>>,
    /// Per collective: whether it ran on an internal stream (ProcessGroupNCCL made that stream
    /// wait on the caller's: a `cudaStreamWaitEvent` inside the call).
    comm_async: Vec<bool>,
}

fn error(file: &str, place: Option<String>, message: impl Into<String>) -> ImportError {
    ImportError {
        file: file.to_string(),
        place,
        message: message.into(),
    }
}

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

/// A collective's name in `record_param_comms` or after `nccl:` → the scenario key.
fn collective_key(name: &str) -> Option<&'static str> {
    Some(match name {
        "allreduce" | "all_reduce" | "allreduce_coalesced" => "all_reduce",
        "allgather" | "all_gather" | "_allgather_base" | "_all_gather_base"
        | "all_gather_into_tensor" | "allgather_into_tensor_coalesced" => "all_gather",
        "reduce_scatter" | "_reduce_scatter_base" | "reduce_scatter_tensor"
        | "reduce_scatter_tensor_coalesced" => "reduce_scatter",
        "broadcast" => "broadcast",
        "all_to_all" | "alltoall" | "alltoall_base" | "all_to_all_single" => "all_to_all",
        "barrier" => "barrier",
        _ => return None,
    })
}

fn parse_ranks(text: &str) -> Option<Vec<u32>> {
    let inner = text.trim().strip_prefix('[')?.strip_suffix(']')?;
    if inner.trim().is_empty() {
        return Some(Vec::new());
    }
    inner.split(',').map(|r| r.trim().parse().ok()).collect()
}

fn args_u64(args: &Map<String, Value>, key: &str) -> Option<u64> {
    args.get(key).and_then(Value::as_u64)
}

impl Trace {
    /// Reads one trace: JSON syntax errors with their line and column, malformed events with
    /// their index in `traceEvents`; a trace without CUDA activities or runtime calls is refused.
    pub fn parse(file: &TraceFile) -> Result<Trace, ImportError> {
        let name = file.name;
        let root: Value = serde_json::from_str(file.text).map_err(|e| {
            error(
                name,
                Some(format!("{}:{}", e.line(), e.column())),
                format!("not a JSON trace: {e}"),
            )
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
        let mut trace = Trace {
            file: name.to_string(),
            rank: 0,
            world_size: 1,
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
            comm_async: Vec::new(),
        };
        if let Some(meta) = meta {
            trace.read_meta(meta)?;
        }
        let empty = Map::new();
        let mut nccl_annotations = Vec::new();
        for (index, event) in events.iter().enumerate() {
            let Value::Object(event) = event else {
                continue;
            };
            if event.get("ph").and_then(Value::as_str) != Some("X") {
                continue;
            }
            let category = event.get("cat").and_then(Value::as_str).unwrap_or("");
            let event_name = event.get("name").and_then(Value::as_str).unwrap_or("");
            let wanted = matches!(
                category,
                "kernel" | "gpu_memcpy" | "gpu_memset" | "cuda_runtime" | "cuda_driver"
            ) || event_name == "record_param_comms"
                || (category == "user_annotation"
                    && (event_name.starts_with("ProfilerStep#") || event_name.starts_with("nccl:")));
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
            if duration_ns < 0 {
                return Err(error(
                    name,
                    place(),
                    format!("{event_name:?} has a negative duration"),
                ));
            }
            let args = event.get("args").and_then(Value::as_object).unwrap_or(&empty);
            let thread = thread_key(event.get("tid"));
            match category {
                "kernel" | "gpu_memcpy" | "gpu_memset" => {
                    let Some(stream) = args.get("stream").and_then(Value::as_i64) else {
                        return Err(error(
                            name,
                            place(),
                            format!("GPU activity {event_name:?} names no \"stream\" in its args"),
                        ));
                    };
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
                }),
                _ if event_name == "record_param_comms" => {
                    if let Some(comm) =
                        Comm::from_record_param_comms(args, thread, start_ns, duration_ns)
                            .map_err(|message| error(name, place(), message))?
                    {
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
        if trace.comms.is_empty() {
            for (index, event_name, args, thread, start_ns, duration_ns) in nccl_annotations {
                if let Some(comm) =
                    Comm::from_nccl_annotation(event_name, args, thread, start_ns, duration_ns)
                        .map_err(|message| error(name, Some(format!("traceEvents[{index}]")), message))?
                {
                    trace.comms.push(comm);
                }
            }
        }
        trace.check_and_link()?;
        Ok(trace)
    }

    fn read_meta(&mut self, meta: &Map<String, Value>) -> Result<(), ImportError> {
        if let Some(info) = meta.get("distributedInfo").and_then(Value::as_object) {
            let rank = args_u64(info, "rank").unwrap_or(0);
            let world = args_u64(info, "world_size").unwrap_or(1);
            if world == 0 || world > 65_536 || rank >= world {
                return Err(error(
                    &self.file,
                    None,
                    format!("distributedInfo: rank {rank} of world size {world} is not a rank of the job"),
                ));
            }
            self.rank = rank as u32;
            self.world_size = world as u32;
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
                .filter(|&sms| (1..=4096).contains(&sms))
                .map(|sms| sms as u32);
        }
        Ok(())
    }

    /// Refuses traces this importer cannot turn into a program, orders everything by time and
    /// joins the calls to their GPU activities and collectives.
    fn check_and_link(&mut self) -> Result<(), ImportError> {
        if self.gpu.is_empty() {
            return Err(error(
                &self.file,
                None,
                "the trace has no CUDA activities (no \"kernel\", \"gpu_memcpy\" or \"gpu_memset\" events): record it with torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])",
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
        self.gpu
            .sort_by(|a, b| (a.start_ns, a.stream).cmp(&(b.start_ns, b.stream)));
        self.runtime.sort_by_key(|call| call.start_ns);
        self.comms.sort_by_key(|comm| comm.start_ns);
        self.steps.sort_by_key(|step| step.start_ns);
        if self.steps.is_empty() {
            let start_ns = self.runtime[0].start_ns;
            let end_ns = self.runtime.iter().map(|c| c.end_ns).max().unwrap_or(start_ns);
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
        self.comm_async = vec![false; self.comms.len()];
        for call in &self.runtime {
            let gpu = call.correlation.and_then(|c| by_correlation.get(&c).copied());
            let comm = comms_by_thread.get(call.thread.as_str()).and_then(|list| {
                let before = list.partition_point(|&c| self.comms[c].start_ns <= call.start_ns);
                let candidate = *list.get(before.checked_sub(1)?)?;
                (call.start_ns <= self.comms[candidate].end_ns).then_some(candidate)
            });
            if let (Some(comm), Some(gpu)) = (comm, gpu) {
                self.comm_activity[comm].push(gpu);
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
        let collective_ops: BTreeSet<usize> = self.comm_activity.iter().flatten().copied().collect();
        let mut work_per_stream: BTreeMap<i64, usize> = BTreeMap::new();
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

    /// The index of the step a host time falls in: from its start to the next step's start
    /// (the last step: to its end).
    fn step_of(&self, at_ns: i64) -> Option<usize> {
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
        let (dtype, element_bytes) = dtype_of(dtype_name)
            .ok_or_else(|| format!("record_param_comms: dtype {dtype_name:?} is not one c10dsim knows"))?;
        let elements_key = if key == "all_gather" {
            "Out msg nelems"
        } else {
            "In msg nelems"
        };
        let elements = if key == "barrier" {
            1
        } else {
            args_u64(args, elements_key)
                .ok_or_else(|| format!("record_param_comms ({collective}) has no {elements_key:?}"))?
        };
        let ranks = args
            .get("Process Group Ranks")
            .and_then(Value::as_str)
            .and_then(parse_ranks);
        Ok(Some(Comm {
            thread,
            start_ns,
            end_ns: start_ns + duration_ns,
            key,
            dtype,
            bytes: elements.saturating_mul(element_bytes).max(1),
            ranks,
        }))
    }

    fn from_nccl_annotation(
        name: &str,
        args: &Map<String, Value>,
        thread: String,
        start_ns: i64,
        duration_ns: i64,
    ) -> Result<Option<Comm>, String> {
        let Some(key) = collective_key(name.trim_start_matches("nccl:")) else {
            return Ok(None);
        };
        let input_type = args
            .get("Input type")
            .and_then(Value::as_array)
            .and_then(|types| types.first())
            .and_then(Value::as_str)
            .unwrap_or("float");
        let (dtype, element_bytes) = dtype_of(input_type)
            .ok_or_else(|| format!("{name}: input type {input_type:?} is not one c10dsim knows"))?;
        let elements = args
            .get("Input Dims")
            .and_then(Value::as_array)
            .and_then(|dims| dims.first())
            .and_then(Value::as_array)
            .and_then(|dims| dims.iter().try_fold(1u64, |p, d| p.checked_mul(d.as_u64()?)))
            .unwrap_or(1);
        Ok(Some(Comm {
            thread,
            start_ns,
            end_ns: start_ns + duration_ns,
            key,
            dtype,
            bytes: elements.saturating_mul(element_bytes).max(1),
            ranks: None,
        }))
    }
}

/// Nanoseconds as µs with at most three decimals (`1234` → `1.234`, `5000` → `5`).
fn us(ns: i64) -> String {
    let ns = ns.max(0);
    let text = format!("{}.{:03}", ns / 1000, ns % 1000);
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

fn size_text(bytes: u64) -> String {
    const MIB: u64 = 1 << 20;
    const KIB: u64 = 1 << 10;
    if bytes % MIB == 0 {
        format!("{}MiB", bytes / MIB)
    } else if bytes % KIB == 0 {
        format!("{}KiB", bytes / KIB)
    } else {
        format!("{bytes}B")
    }
}

/// A kernel's name shortened to a label: the function's own name, without namespaces,
/// template arguments or parameters.
fn short_kernel_name(name: &str) -> String {
    let name = name.trim_start_matches("void ");
    let cut = name.find('<').or_else(|| name.find('(')).unwrap_or(name.len());
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
    Kernel { gpu: usize },
    Collective { comm: usize, bytes: u64, stream: String, work: Option<String> },
    RecordEvent { event: String, stream: String },
    WaitEvent { event: String, stream: String },
    Wait { work: String, stream: String },
    EventSync { event: String },
    StreamSync { stream: String },
    Item { stream: String },
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

/// The scenario-wide declarations the ranks' programs need.
#[derive(Default)]
struct Declarations {
    tensors: BTreeMap<String, (u64, &'static str)>,
    groups: BTreeMap<String, Vec<u32>>,
    streams: BTreeSet<String>,
    measures: Vec<(String, String, String)>,
    item: bool,
}

/// The program of one rank, as TOML text, and what it declares.
struct RankProgram<'t> {
    trace: &'t Trace,
    prefix: String,
    ranks_key: String,
    plan: Vec<Planned>,
    used_events: BTreeSet<String>,
    counter: usize,
}

impl<'t> RankProgram<'t> {
    fn new(trace: &'t Trace, several: bool) -> RankProgram<'t> {
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
            counter: 0,
        }
    }

    fn next_name(&mut self, stem: &str) -> String {
        self.counter += 1;
        format!("{}{stem}{}", self.prefix, self.counter)
    }

    fn stream_name(&self, stream: i64) -> Option<&str> {
        self.trace.streams.get(&stream).map(String::as_str)
    }

    /// Which collectives a bucket joins (what-if) and the bytes of the ones that remain.
    fn buckets(&self, options: &KinetoOptions) -> Vec<Option<u64>> {
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
    fn plan(&mut self, options: &KinetoOptions) {
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
        let bytes = self.buckets(options);
        enum Item {
            Call(usize),
            Comm(usize),
        }
        let mut items: Vec<(i64, Item)> = trace
            .comms
            .iter()
            .enumerate()
            .map(|(index, comm)| (comm.start_ns, Item::Comm(index)))
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
            let waiter = next_stream[index].clone().unwrap_or_else(|| current.clone());
            let mut push = |plan: &mut Vec<Planned>, resume_ns: i64, action: Action| {
                plan.push(Planned {
                    at_ns: *at_ns,
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
                    let (stream, work) = if trace.comm_async[*comm] {
                        let work = self.next_name("w");
                        works.push_back(work.clone());
                        (current.clone(), Some(work))
                    } else {
                        let stream = sync_stream[*comm].clone().unwrap_or_else(|| current.clone());
                        (stream, None)
                    };
                    push(&mut self.plan, *at_ns, Action::Collective { comm: *comm, bytes, stream: stream.clone(), work });
                    // One rank: NCCL's copy is the collective's whole GPU work, as measured.
                    if trace.world_size == 1 && !trace.comm_async[*comm] {
                        for &op in &trace.comm_activity[*comm] {
                            push(&mut self.plan, *at_ns, Action::Kernel { gpu: op });
                        }
                        last_stream = stream;
                    }
                }
                Item::Call(call) => {
                    let call_info = &trace.runtime[*call];
                    let name = call_info.name.as_str();
                    if let Some(op) = trace.gpu_of_call[*call] {
                        let Some(stream) = self.stream_name(trace.gpu[op].stream).map(str::to_string) else {
                            continue;
                        };
                        push(&mut self.plan, *at_ns, Action::Kernel { gpu: op });
                        let copy_to_host = trace.gpu[op].kind == (GpuKind::Memcpy { device_to_host: true });
                        if name == "cudaMemcpy" && copy_to_host {
                            push(&mut self.plan, call_info.end_ns, Action::Item { stream: stream.clone() });
                        }
                        last_stream = stream;
                        continue;
                    }
                    let blocking_end = call_info.end_ns;
                    match name {
                        "cudaEventRecord" | "cudaEventRecordWithFlags" => {
                            let event = self.next_name("e");
                            recorded.push((event.clone(), current.clone()));
                            push(&mut self.plan, *at_ns, Action::RecordEvent { event, stream: current });
                        }
                        "cudaStreamWaitEvent" => {
                            if let Some(work) = works.pop_front() {
                                push(&mut self.plan, *at_ns, Action::Wait { work, stream: waiter });
                            } else if let Some((event, _)) =
                                recorded.iter().rev().find(|(_, stream)| *stream != waiter)
                            {
                                self.used_events.insert(event.clone());
                                let event = event.clone();
                                push(&mut self.plan, *at_ns, Action::WaitEvent { event, stream: waiter });
                            }
                        }
                        "cudaEventSynchronize" => {
                            if let Some((event, _)) = recorded.last() {
                                self.used_events.insert(event.clone());
                                let event = event.clone();
                                push(&mut self.plan, blocking_end, Action::EventSync { event });
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
                            push(&mut self.plan, blocking_end, action);
                        }
                        "cudaDeviceSynchronize" | "cudaCtxSynchronize" | "cuCtxSynchronize" => {
                            push(&mut self.plan, blocking_end, Action::DeviceSync);
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
            dropped_ns: 0,
            action: Action::Comment(format!(
                "{} (rank {}): {} µs on the host in the trace, {calls} CUDA runtime calls",
                info.name,
                trace.rank,
                us(info.end_ns - info.start_ns)
            )),
        });
        *dropped_ns = 0;
        self.plan.push(Planned {
            at_ns: info.start_ns,
            resume_ns: info.start_ns,
            dropped_ns: 0,
            action: Action::Mark(format!("{}step_{number}", self.prefix)),
        });
    }

    /// The `[[op]]`s, with `host_sleep_us` for the host's time between them.
    fn render(&mut self, declarations: &mut Declarations) -> String {
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
            if let Action::Comment(comment) = &planned.action {
                let _ = writeln!(text, "\n# {comment}");
                continue;
            }
            if let Some(cursor) = cursor {
                let gap = planned.at_ns - cursor - planned.dropped_ns;
                if gap > 0 {
                    let _ = writeln!(text, "[[op]]\n{}host_sleep_us = {}", self.ranks_key, us(gap));
                }
            }
            cursor = Some(planned.resume_ns.max(cursor.unwrap_or(i64::MIN)));
            let stream_key = |stream: &str| {
                if stream == "default" {
                    String::new()
                } else {
                    format!("stream = \"{stream}\"\n")
                }
            };
            let body = match &planned.action {
                Action::Comment(_) => unreachable!("written above"),
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
                            op.blocks.map_or(u64::from(sms), |b| b.clamp(1, u64::from(sms))),
                        ),
                        GpuKind::Memcpy { device_to_host: true } => ("memcpy_dtoh".to_string(), 1),
                        GpuKind::Memcpy { .. } => ("memcpy".to_string(), 1),
                        GpuKind::Memset => ("memset".to_string(), 1),
                    };
                    let label = self.next_name(&format!("{stem}_"));
                    format!(
                        "label = \"{label}\"\nkernel = {{ us = {}, sms = {footprint} }}\n{}",
                        us(op.duration_ns.max(1)),
                        stream_key(&stream)
                    )
                }
                Action::Collective { comm, bytes, stream, work } => {
                    let c = &trace.comms[*comm];
                    declarations.streams.insert(stream.clone());
                    let label = self.next_name(&format!("{}_", c.key));
                    let mut body = format!("label = \"{label}\"\n");
                    if c.key == "barrier" {
                        body.push_str("barrier = true\n");
                    } else {
                        let tensor = format!("{}_{}", c.dtype, size_text(*bytes));
                        declarations.tensors.insert(tensor.clone(), (*bytes, c.dtype));
                        let _ = writeln!(body, "{} = \"{tensor}\"", c.key);
                    }
                    if let Some(ranks) = &c.ranks {
                        let world = ranks.len() as u32 == trace.world_size
                            && ranks.iter().enumerate().all(|(i, r)| *r == i as u32);
                        if !world && !ranks.is_empty() {
                            let group = format!(
                                "ranks_{}",
                                ranks.iter().map(u32::to_string).collect::<Vec<_>>().join("_")
                            );
                            declarations.groups.insert(group.clone(), ranks.clone());
                            let _ = writeln!(body, "group = \"{group}\"");
                        }
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
            declarations.measures.push((name, pair[0].clone(), pair[1].clone()));
        }
        text
    }
}

/// The host's launch latency the traces show: the median, over GPU activities that found their
/// stream idle, of the activity's start minus its launch call's start.
fn launch_latency_ns(traces: &[Trace]) -> Option<i64> {
    let mut samples = Vec::new();
    for trace in traces {
        let collective_ops: BTreeSet<usize> = trace.comm_activity.iter().flatten().copied().collect();
        let mut stream_free: BTreeMap<i64, i64> = BTreeMap::new();
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
            if let (Some(launch), false) = (launch_of[op], collective_ops.contains(&op)) {
                if free <= launch && gpu.start_ns >= launch {
                    samples.push(gpu.start_ns - launch);
                }
            }
            stream_free.insert(gpu.stream, gpu.start_ns + gpu.duration_ns);
        }
    }
    median(&mut samples)
}

/// The GPU time of the asynchronous collectives of one-rank traces (NCCL's copy on the internal
/// stream, or nothing for an in-place one): the median over them (0 without any), the
/// simulator's `kernel_floor_us` for a one-rank group. A synchronous one's copy is a kernel of
/// its own on the caller's stream.
fn one_rank_collective_ns(traces: &[Trace]) -> Option<i64> {
    if traces.iter().all(|t| t.world_size != 1) {
        return None;
    }
    let mut samples: Vec<i64> = traces
        .iter()
        .filter(|t| t.world_size == 1)
        .flat_map(|t| {
            (0..t.comms.len())
                .filter(|&comm| t.comm_async[comm])
                .map(|comm| t.comm_activity[comm].iter().map(|&op| t.gpu[op].duration_ns).sum())
        })
        .collect();
    Some(median(&mut samples).unwrap_or(0))
}

fn gpu_preset(name: &str) -> Option<&'static str> {
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

/// Imports traces (one per rank of the job) into a scenario's text.
pub fn import(files: &[TraceFile], options: &KinetoOptions) -> Result<String, ImportError> {
    let Some(first) = files.first() else {
        return Err(error("kineto", None, "no trace given"));
    };
    let traces = files.iter().map(Trace::parse).collect::<Result<Vec<_>, _>>()?;
    import_traces(&traces, options).map_err(|message| error(first.name, None, message))
}

/// Imports traces already read (see [`Trace::parse`]).
pub fn import_traces(traces: &[Trace], options: &KinetoOptions) -> Result<String, String> {
    let world = traces[0].world_size;
    let several = traces.len() > 1;
    let mut seen = BTreeSet::new();
    for trace in traces {
        if trace.world_size != world {
            return Err(format!(
                "{} is of world size {}, {} of world size {world}: the traces are not of one job",
                trace.file, trace.world_size, traces[0].file
            ));
        }
        if !seen.insert(trace.rank) {
            return Err(format!("two traces of rank {}", trace.rank));
        }
    }
    if seen.len() as u32 != world {
        let missing: Vec<u32> = (0..world).filter(|r| !seen.contains(r)).collect();
        return Err(format!(
            "world size {world} but no trace of rank{} {missing:?}: give one trace per rank",
            if missing.len() > 1 { "s" } else { "" }
        ));
    }
    let mut declarations = Declarations::default();
    let mut programs = String::new();
    let mut ordered: Vec<&Trace> = traces.iter().collect();
    ordered.sort_by_key(|t| t.rank);
    for trace in &ordered {
        let mut program = RankProgram::new(trace, several);
        program.plan(options);
        programs.push_str(&program.render(&mut declarations));
    }
    let mut text = String::new();
    let first = ordered[0];
    let names: Vec<&str> = ordered.iter().map(|t| t.file.as_str()).collect();
    let _ = writeln!(
        text,
        "# Imported by `c10dsim import kineto` from {} (docs/import.md).",
        names.join(", ")
    );
    let _ = writeln!(
        text,
        "# {} on {}, NCCL {}, world size {world}; {} step(s) per rank.",
        "torch.profiler trace",
        first.gpu_name.as_deref().unwrap_or("an unnamed GPU"),
        first.nccl_version.as_deref().unwrap_or("unknown"),
        first.steps.len()
    );
    let stream_map: Vec<String> = first
        .streams
        .iter()
        .map(|(id, name)| format!("{id} → {name}"))
        .collect();
    let _ = writeln!(
        text,
        "# Trace streams: {}; the others are ProcessGroupNCCL's internal streams.",
        stream_map.join(", ")
    );
    text.push_str(
        "# Every GPU activity is a kernel of its measured duration; the host's time between the\n\
         # calls is host_sleep_us and every [host] cost is 0. Events and waits are inferred: a\n\
         # record is on the stream of the GPU work issued last, a wait by the stream of the work\n\
         # issued next, on the latest event of another stream or an outstanding Work.\n",
    );
    if let Some(cap) = options.bucket_bytes {
        let _ = writeln!(
            text,
            "# What-if: asynchronous all_reduces re-bucketed as DDP fills buckets of {}.",
            size_text(cap)
        );
    }
    let stem = first
        .file
        .rsplit('/')
        .next()
        .unwrap_or("trace")
        .trim_end_matches(".json");
    let _ = writeln!(text, "name = \"kineto_{}\"", stem.replace(['"', '\\'], "_"));
    text.push_str("about = \"a torch.profiler trace imported by c10dsim import kineto\"\n");
    text.push_str("torch = \"2.12\"\n\n[cluster]\n");
    let _ = writeln!(text, "ranks = {world}");
    if let Some(preset) = first.gpu_name.as_deref().and_then(gpu_preset) {
        let _ = writeln!(text, "gpu = \"{preset}\"");
    }
    // One more SM than the GPU has: the copy engine, on which the copies (footprint 1) run
    // beside kernels, which ask for at most the GPU's own SMs.
    let _ = writeln!(
        text,
        "# the trace's {} SMs and one for the copy engine, where memcpys and memsets run\nsms = {}",
        first.sms.unwrap_or(132),
        first.sms.unwrap_or(132) + 1
    );
    if let Some(floor) = one_rank_collective_ns(traces) {
        let _ = writeln!(
            text,
            "\n[network]\n# a one-rank collective's GPU time in the trace (median)\nkernel_floor_us = {}",
            us(floor)
        );
    }
    text.push_str("\n[host]\n");
    if let Some(latency) = launch_latency_ns(traces) {
        let _ = writeln!(
            text,
            "# median start of a GPU activity after its launch call, on an idle stream\nlaunch_latency_us = {}\nnccl_launch_latency_us = {}",
            us(latency),
            us(latency)
        );
    }
    for key in [
        "launch_us",
        "collective_us",
        "collective_tail_us",
        "wait_us",
        "event_us",
        "sync_us",
        "item_us",
        "mark_us",
        "query_us",
    ] {
        let _ = writeln!(text, "{key} = 0");
    }
    text.push_str("\n[groups.world]\neager_init = true\n");
    for (name, ranks) in &declarations.groups {
        let list: Vec<String> = ranks.iter().map(u32::to_string).collect();
        let _ = writeln!(text, "[groups.{name}]\nranks = [{}]\neager_init = true", list.join(", "));
    }
    let user_streams: Vec<&String> = declarations
        .streams
        .iter()
        .filter(|s| s.as_str() != "default")
        .collect();
    if !user_streams.is_empty() {
        text.push_str("\n[streams]\n");
        for stream in user_streams {
            let _ = writeln!(text, "{stream} = {{}}");
        }
    }
    if !declarations.tensors.is_empty() || declarations.item {
        text.push_str("\n[tensors]\n");
        for (name, (bytes, dtype)) in &declarations.tensors {
            let _ = writeln!(
                text,
                "{name} = {{ size = \"{}\", dtype = \"{dtype}\" }}",
                size_text(*bytes)
            );
        }
        if declarations.item {
            text.push_str("item_value = 4\n");
        }
    }
    for (name, from, to) in &declarations.measures {
        let _ = writeln!(
            text,
            "\n[[measure]]\nname = \"{name}\"\nfrom = \"{from}\"\nto = \"{to}\"\nclock = \"host\""
        );
    }
    text.push_str(&programs);
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small trace: a GEMM on stream 7, an all_reduce whose GPU activity is an NCCL kernel on
    /// stream 13, the Work waited, a device synchronisation; one ProfilerStep.
    pub(crate) fn small_trace(rank: u32, world: u32) -> String {
        format!(
            r#"{{"distributedInfo": {{"rank": {rank}, "world_size": {world}, "nccl_version": "2.28.9"}},
"deviceProperties": [{{"name": "NVIDIA H200", "numSms": 132}}],
"traceEvents": [
{{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#3", "pid": 1, "tid": 1, "ts": 100.0, "dur": 500.0}},
{{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 110.0, "dur": 5.0, "args": {{"correlation": 1}}}},
{{"ph": "X", "cat": "kernel", "name": "void at::native::gemm_kernel<8>(int)", "pid": 0, "tid": 7, "ts": 118.0, "dur": 200.0, "args": {{"stream": 7, "device": 0, "correlation": 1, "grid": [2, 66, 1]}}}},
{{"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 1, "tid": 1, "ts": 130.0, "dur": 30.0, "args": {{"Collective name": "allreduce", "dtype": "Float", "In msg nelems": 262144, "Out msg nelems": 262144, "Process Group Ranks": "[0, 1]"}}}},
{{"ph": "X", "cat": "cuda_runtime", "name": "cudaEventRecord", "pid": 1, "tid": 1, "ts": 131.0, "dur": 1.0, "args": {{"correlation": 2}}}},
{{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernelExC", "pid": 1, "tid": 1, "ts": 140.0, "dur": 6.0, "args": {{"correlation": 3}}}},
{{"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "pid": 0, "tid": 13, "ts": 320.0, "dur": 40.0, "args": {{"stream": 13, "device": 0, "correlation": 3, "grid": [16, 1, 1]}}}},
{{"ph": "X", "cat": "cuda_runtime", "name": "cudaStreamWaitEvent", "pid": 1, "tid": 1, "ts": 200.0, "dur": 1.0, "args": {{"correlation": 4}}}},
{{"ph": "X", "cat": "cuda_runtime", "name": "cudaMemcpyAsync", "pid": 1, "tid": 1, "ts": 210.0, "dur": 3.0, "args": {{"correlation": 5}}}},
{{"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoH (Device -> Pinned)", "pid": 0, "tid": 7, "ts": 361.0, "dur": 2.0, "args": {{"stream": 7, "device": 0, "correlation": 5}}}},
{{"ph": "X", "cat": "cuda_runtime", "name": "cudaStreamSynchronize", "pid": 1, "tid": 1, "ts": 214.0, "dur": 150.0, "args": {{"correlation": 6}}}},
{{"ph": "X", "cat": "cuda_runtime", "name": "cudaDeviceSynchronize", "pid": 1, "tid": 1, "ts": 400.0, "dur": 10.0, "args": {{"correlation": 7}}}}
]}}"#
        )
    }

    fn import_one(text: &str) -> Result<String, ImportError> {
        import(
            &[TraceFile {
                name: "rank0.json",
                text,
            }],
            &KinetoOptions::default(),
        )
    }

    #[test]
    fn a_small_trace_becomes_a_scenario_that_parses() {
        let two = [small_trace(0, 2), small_trace(1, 2)];
        let files = [
            TraceFile { name: "rank0.json", text: &two[0] },
            TraceFile { name: "rank1.json", text: &two[1] },
        ];
        let text = import(&files, &KinetoOptions::default()).unwrap();
        assert!(text.contains("kernel = { us = 200, sms = 132 }"), "{text}");
        assert!(text.contains("all_reduce = \"f32_1MiB\"\nasync_op = true"), "{text}");
        assert!(text.contains("wait = \"r0_w1\""), "{text}");
        assert!(text.contains("item = \"item_value\""), "{text}");
        assert!(text.contains("device_sync = true"), "{text}");
        assert!(text.contains("# ProfilerStep#3 (rank 1)"), "{text}");
        // the host's own time: from the step's start to the launch, 10 µs
        assert!(text.contains("[[op]]\nranks = [0]\nhost_sleep_us = 10\n"), "{text}");
        let scenario = sim::scenario::parse("import.toml", &text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        let timeline = sim::engine::simulate(&scenario);
        assert!(timeline.findings.is_empty(), "{:?}", timeline.findings);
        assert_eq!(text, import(&files, &KinetoOptions::default()).unwrap());
    }

    #[test]
    fn refusals_say_what_is_wrong_and_where() {
        let syntax = import_one("{\"traceEvents\": [\n  {\"ph\": \"X\",]}").unwrap_err();
        assert_eq!(syntax.place.as_deref(), Some("2:14"));
        let no_cuda = import_one(r#"{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 1, "dur": 2}]}"#)
            .unwrap_err();
        assert!(no_cuda.message.contains("no CUDA activities"), "{no_cuda}");
        let bad_ts = import_one(r#"{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": "x", "dur": 2}]}"#)
            .unwrap_err();
        assert_eq!(bad_ts.to_string(), "rank0.json:traceEvents[0]: error: \"k\" (kernel) needs numeric \"ts\" and \"dur\" in µs");
        let half = small_trace(0, 2);
        let missing = import_one(&half).unwrap_err();
        assert!(missing.message.contains("no trace of rank [1]"), "{missing}");
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
        };
        let mut trace = Trace::parse(&TraceFile { name: "t", text: &small_trace(0, 1) }).unwrap();
        trace.comms = vec![comm(32), comm(32), comm(32), comm(32), comm(32)];
        trace.comm_activity = vec![Vec::new(); 5];
        let program = RankProgram::new(&trace, false);
        let options = KinetoOptions { bucket_bytes: Some(100) };
        trace.comm_async = vec![true; 5];
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
        assert_eq!(short_kernel_name("nvjet_sm90_tst_256x128"), "nvjet_sm90_tst_256x128");
        assert_eq!(short_kernel_name("(odd)"), "kernel");
        assert_eq!(us(1_234), "1.234");
        assert_eq!(us(5_000), "5");
        assert_eq!(size_text(3 << 20), "3MiB");
    }
}
