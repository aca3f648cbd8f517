//! Scenario files: TOML → a validated [`Scenario`].
//!
//! The format is described for users in `docs/scenario-format.md`. Every error names the file,
//! the 1-based line and column, and what was expected; nothing half-parses.
//!
//! Over 1,000 lines (about 2,700): it is one `impl Resolver`, and every table's resolution needs
//! the same source text, spans and name tables to build its `file:line:column` errors, while ops
//! refer to every other table. Parts already live beside it as further `impl Resolver` blocks
//! (`faults.rs`, `observability.rs`, `setup.rs` for the process-group setup ops). Two thirds of
//! what remains is the op parser, one arm per op kind; moving those arms to a `scenario/ops.rs`
//! is the next cut, not made yet.
//!
//! ```
//! let text = r#"
//! [cluster]
//! ranks = 2
//! [tensors]
//! buf = "1MiB"
//! [[op]]
//! all_reduce = "buf"
//! async_op = true
//! work = "w"
//! [[op]]
//! wait = "w"
//! "#;
//! let scenario = sim::scenario::parse("example.toml", text).unwrap();
//! assert_eq!(scenario.ops.len(), 2);
//! let bad = sim::scenario::parse("bad.toml", "[[op]]\nwait = \"w\"\n").unwrap_err();
//! assert_eq!((bad.line, bad.column), (2, 8));
//! ```

mod faults;
mod model;
mod names;
mod observability;
pub(crate) mod overrides;
mod raw;
mod setup;
mod suggest;
mod type_errors;

pub use model::*;
pub use names::unfit_name;
pub use overrides::{
    apply_overrides, dotted_path, line_origin, path_keys, read_recorded_invocation,
    recorded_invocation, renumber_op_lines, table_header, Invocation, LineOrigin, Override,
    OverrideError, MACHINE_KEY,
};
pub use raw::TOP_LEVEL_KEYS;
pub use suggest::{did_you_mean, nearest};

use crate::units::{parse_size_bytes, us_to_ns};
use faults::FUNCTIONAL_WORK_PREFIX;
use raw::*;
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::ops::Range;
use toml::Spanned;

/// A scenario file that cannot be used, with where and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScenarioError {
    pub path: String,
    /// 1-based; 0 when the error concerns the whole file.
    pub line: u32,
    /// 1-based, in characters.
    pub column: u32,
    /// Characters from `column` that the error concerns, on that line (at least 1 when `line`
    /// is not 0): what a rendering underlines.
    pub width: u32,
    pub message: String,
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "{}: error: {}", self.path, self.message)
        } else {
            write!(
                f,
                "{}:{}:{}: error: {}",
                self.path, self.line, self.column, self.message
            )
        }
    }
}

impl std::error::Error for ScenarioError {}

/// Largest rank count a scenario may ask for.
pub const MAX_RANKS: u32 = 1 << 17;
/// Output rows × columns of one GEMM block unless `cluster.gemm_tile_m` / `_n` say otherwise
/// (128×128, a tile cuBLAS's large-GEMM kernels use).
pub const DEFAULT_GEMM_TILE: [u64; 2] = [128, 128];
/// Largest repeat count.
pub const MAX_REPEAT: u32 = 1_000_000;
/// Largest `first_seq_num` of a group: a collective every microsecond for 11 days, far from
/// the i64 the Flight Recorder's counters are written as.
pub const MAX_FIRST_SEQ_NUM: u64 = 1_000_000_000_000;
/// `init_process_group(timeout=…)`'s default for NCCL: 10 minutes (R26).
pub const DEFAULT_GROUP_TIMEOUT_NS: u64 = 600 * 1_000_000_000;
pub use crate::units::MAX_TIME_NS;

/// Parses and validates a scenario. `path` is only used in error messages and reports.
pub fn parse(path: &str, text: &str) -> Result<Scenario> {
    let resolver = Resolver {
        path,
        line_starts: line_starts(text),
        text,
    };
    let raw: RawScenario = toml::from_str(text).map_err(|error| {
        let span = error.span().unwrap_or(0..0);
        let message = suggest::explain_unknown_field(error.message().trim_end());
        let message = type_errors::explain_type_error(&message, text, span.clone());
        let message = name_duplicate_key(message, text, span.clone());
        resolver.error(span, message)
    })?;
    resolver.resolve(raw)
}

/// The TOML parsers' "duplicate key", which points at the key (`span` of `text`) without naming
/// it, with the key named; any other message unchanged.
pub(crate) fn name_duplicate_key(message: String, text: &str, span: Range<usize>) -> String {
    match text
        .get(span)
        .filter(|key| message == "duplicate key" && !key.is_empty())
    {
        Some(key) => format!("duplicate key `{key}`: a table sets each key once"),
        None => message,
    }
}

fn line_starts(text: &str) -> Vec<usize> {
    std::iter::once(0)
        .chain(text.match_indices('\n').map(|(i, _)| i + 1))
        .collect()
}

/// The name of a scenario without `name = …`: its file's stem. A path may carry the edits it
/// was read with after the file (`FILE [--set K=V …]`, a sweep's `FILE [point i: …]`), whose
/// dots and slashes are not the file's.
fn name_from_path(path: &str) -> String {
    let file = path.split_once(" [").map_or(path, |(file, _)| file);
    std::path::Path::new(file)
        .file_stem()
        .map_or("scenario".into(), |stem| {
            stem.to_string_lossy().into_owned()
        })
}

/// FNV-1a 64-bit, printed in hex: a stable content hash for reports and CSV rows.
pub fn content_hash(text: &str) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in text.as_bytes() {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{hash:016x}")
}

/// An error at a byte span of `text`, for checks made outside this module (the sweep axes of
/// `crate::sweep`), with the same file:line:column as every other scenario error.
pub fn error_at(
    path: &str,
    text: &str,
    span: Range<usize>,
    message: impl Into<String>,
) -> ScenarioError {
    let resolver = Resolver {
        path,
        line_starts: line_starts(text),
        text,
    };
    resolver.error(span, message)
}

struct Resolver<'a> {
    path: &'a str,
    text: &'a str,
    line_starts: Vec<usize>,
}

type Result<T> = std::result::Result<T, ScenarioError>;

struct Names {
    tensors: HashMap<String, TensorId>,
    streams: HashMap<String, StreamId>,
    groups: HashMap<String, GroupId>,
}

impl Resolver<'_> {
    fn line_column(&self, offset: usize) -> (u32, u32) {
        let offset = offset.min(self.text.len());
        let line_index = self.line_starts.partition_point(|&start| start <= offset) - 1;
        let line_start = self.line_starts[line_index];
        let column = self.text[line_start..offset].chars().count() + 1;
        (line_index as u32 + 1, column as u32)
    }

    fn error(&self, span: Range<usize>, message: impl Into<String>) -> ScenarioError {
        let (line, column) = self.line_column(span.start);
        let start = span.start.min(self.text.len());
        let end = span.end.clamp(start, self.text.len());
        let on_line = self.text.get(start..end).map_or(0, |spanned| {
            spanned.split('\n').next().unwrap_or("").chars().count()
        });
        ScenarioError {
            path: self.path.to_string(),
            line,
            column,
            width: on_line.max(1) as u32,
            message: message.into(),
        }
    }

    /// Where `key` is written as a key (bare or quoted, before its `=`) in the table at `span`
    /// (an inline table, or a `[header]` and the lines up to the next one), read as a
    /// `toml::Value`, which keeps no spans of its own; `span` itself if not found.
    fn key_within(&self, span: Range<usize>, key: &str) -> Range<usize> {
        let start = span.start.min(self.text.len());
        let end = match self.text[start..].starts_with('[') {
            true => (self.text[start..].find("\n[")).map_or(self.text.len(), |at| start + at),
            false => span.end.clamp(start, self.text.len()),
        };
        let within = self.text.get(start..end).unwrap_or("");
        let written = [format!("\"{key}\""), format!("'{key}'"), key.to_string()];
        (within.match_indices(|c| c == '"' || c == '\'' || c == key.chars().next().unwrap_or(' ')))
            .find_map(|(at, _)| {
                let before = within[..at].chars().next_back();
                let starts_key = before.is_none_or(|c| c == '{' || c == ',' || c.is_whitespace());
                let form = written
                    .iter()
                    .find(|form| within[at..].starts_with(form.as_str()))?;
                let after = within[at + form.len()..].trim_start_matches([' ', '\t']);
                (starts_key && after.starts_with('=')).then(|| {
                    let key_start = start + at;
                    key_start..key_start + form.len()
                })
            })
            .unwrap_or(span)
    }

    fn line_of(&self, span: &Range<usize>) -> u32 {
        self.line_column(span.start).0
    }

    /// A `dtype = "bf16"` key, `default` without one; an unknown name is refused at its place.
    fn dtype_or(&self, name: Option<&Spanned<String>>, default: DType) -> Result<DType> {
        let Some(name) = name else {
            return Ok(default);
        };
        DType::parse(name.get_ref()).ok_or_else(|| {
            self.error(
                name.span(),
                format!(
                    "unknown dtype {:?}; expected f32, bf16 or f16",
                    name.get_ref()
                ),
            )
        })
    }

    fn count(&self, value: &Spanned<i64>, what: &str, min: i64, max: i64) -> Result<u64> {
        let number = *value.get_ref();
        if number < min || number > max {
            return Err(self.error(
                value.span(),
                format!("{what} must be between {min} and {max}, found {number}"),
            ));
        }
        Ok(number as u64)
    }

    fn time_us(&self, value: &Spanned<f64>, what: &str, allow_zero: bool) -> Result<u64> {
        let us = *value.get_ref();
        let max_us = MAX_TIME_NS as f64 / 1_000.0;
        let too_small = if allow_zero { us < 0.0 } else { us <= 0.0 };
        if !us.is_finite() || too_small || us > max_us {
            let lower = if allow_zero { "≥ 0" } else { "> 0" };
            return Err(self.error(
                value.span(),
                format!("{what} must be {lower} and at most one day ({max_us} µs), found {us}"),
            ));
        }
        Ok(us_to_ns(us))
    }

    /// `wait`'s `timeout_ms`: in range first (in milliseconds, as the key is), then whole:
    /// `Work.wait(timeout=timedelta(…))` reaches C++ as truncated milliseconds, 0 meaning no
    /// timeout of its own (R15).
    fn wait_timeout_ns(&self, timeout_ms: &Spanned<f64>) -> Result<u64> {
        let ms = *timeout_ms.get_ref();
        let max_ms = MAX_TIME_NS as f64 / 1e6;
        if !ms.is_finite() || ms <= 0.0 || ms > max_ms {
            return Err(self.error(
                timeout_ms.span(),
                format!("timeout_ms must be > 0 and at most one day ({max_ms} ms), found {ms}"),
            ));
        }
        if ms.fract() != 0.0 {
            return Err(self.error(
                timeout_ms.span(),
                format!(
                    "timeout_ms must be a whole number of milliseconds, found {ms}: \
                     Work.wait(timeout=timedelta(…)) keeps whole milliseconds, so PyTorch would \
                     wait {} ms{}",
                    ms.trunc(),
                    if ms < 1.0 {
                        " (0: no timeout of its own)"
                    } else {
                        ""
                    }
                ),
            ));
        }
        self.time_us(
            &Spanned::new(timeout_ms.span(), ms * 1_000.0),
            "timeout_ms",
            false,
        )
    }

    /// A group's `timeout_s`: PyTorch keeps the timeout of `init_process_group` and `new_group`
    /// in whole milliseconds (the Options' `std::chrono::milliseconds`, the `timedelta`
    /// truncated), so a value that is not one, which PyTorch would shorten, is refused as the
    /// wait's `timeout_ms` is.
    fn group_timeout_ns(&self, seconds: &Spanned<f64>) -> Result<u64> {
        let given = self.positive(seconds, "groups.timeout_s", 86_400.0)?;
        let ns = (given * 1e9).round() as u64;
        if !ns.is_multiple_of(1_000_000) {
            return Err(self.error(
                seconds.span(),
                format!(
                    "groups.timeout_s must be a whole number of milliseconds, found {given}: \
                     init_process_group(timeout=…) and new_group(timeout=…) keep whole \
                     milliseconds, so PyTorch would time out after {} ms",
                    ns / 1_000_000
                ),
            ));
        }
        Ok(ns)
    }

    fn optional_time_us(
        &self,
        value: &Option<Spanned<f64>>,
        what: &str,
        default_ns: u64,
    ) -> Result<u64> {
        value
            .as_ref()
            .map_or(Ok(default_ns), |v| self.time_us(v, what, true))
    }

    fn positive(&self, value: &Spanned<f64>, what: &str, max: f64) -> Result<f64> {
        let number = *value.get_ref();
        if !number.is_finite() || number <= 0.0 || number > max {
            return Err(self.error(
                value.span(),
                format!("{what} must be > 0 and at most {max}, found {number}"),
            ));
        }
        Ok(number)
    }

    fn rank_list(&self, value: &Spanned<Vec<i64>>, ranks: u32, what: &str) -> Result<Vec<u32>> {
        let mut list = Vec::with_capacity(value.get_ref().len());
        for &rank in value.get_ref() {
            if rank < 0 || rank >= i64::from(ranks) {
                return Err(self.error(
                    value.span(),
                    format!(
                        "{what}: rank {rank} does not exist (cluster.ranks = {ranks}, ranks are 0..{})",
                        ranks - 1
                    ),
                ));
            }
            list.push(rank as u32);
        }
        list.sort_unstable();
        if let Some(pair) = list.windows(2).find(|pair| pair[0] == pair[1]) {
            return Err(self.error(
                value.span(),
                format!("{what}: rank {} is listed twice", pair[0]),
            ));
        }
        if list.is_empty() {
            return Err(self.error(value.span(), format!("{what}: expected at least one rank")));
        }
        Ok(list)
    }

    fn lookup<T: Copy>(
        &self,
        table: &HashMap<String, T>,
        name: &Spanned<String>,
        what: &str,
        declared_in: &str,
    ) -> Result<T> {
        table.get(name.get_ref()).copied().ok_or_else(|| {
            let mut known: Vec<&str> = table.keys().map(String::as_str).collect();
            known.sort_unstable();
            let hint = suggest::did_you_mean(name.get_ref(), known.iter().copied());
            // A long list is cut: the hint names the likely one.
            const SHOWN: usize = 20;
            let known = match known.len() {
                0 => "none is declared".to_string(),
                count if count <= SHOWN => format!("known: {}", known.join(", ")),
                count => format!(
                    "known: {}, … ({} more)",
                    known[..SHOWN].join(", "),
                    count - SHOWN
                ),
            };
            self.error(
                name.span(),
                format!(
                    "unknown {what} {:?}; expected one declared in {declared_in} ({known}){hint}",
                    name.get_ref()
                ),
            )
        })
    }

    fn resolve(&self, raw: RawScenario) -> Result<Scenario> {
        let torch = match &raw.torch {
            None => TorchProfile::V2_12,
            Some(value) => match value.get_ref().as_str() {
                "2.12" => TorchProfile::V2_12,
                "2.5" => TorchProfile::V2_5,
                other => {
                    return Err(self.error(
                        value.span(),
                        format!(
                            "unknown behaviour profile {other:?}; expected \"2.12\" or \"2.5\""
                        ),
                    ))
                }
            },
        };
        let seed = match &raw.seed {
            None => 0,
            Some(value) => self.count(value, "seed", 0, i64::MAX)?,
        };
        let repeat = match &raw.repeat {
            None => 1,
            Some(value) => self.count(value, "repeat", 1, i64::from(MAX_REPEAT))? as u32,
        };
        let warmup = match &raw.warmup {
            None => 0,
            Some(value) => {
                let warmup = self.count(value, "warmup", 0, i64::from(MAX_REPEAT))? as u32;
                if warmup >= repeat {
                    return Err(self.error(
                        value.span(),
                        format!("warmup ({warmup}) must be smaller than repeat ({repeat}), or no repeat is left to measure"),
                    ));
                }
                warmup
            }
        };
        let max_sim_time_ns = match &raw.max_sim_time_s {
            None => 3_600 * 1_000_000_000,
            Some(value) => (self.positive(value, "max_sim_time_s", 86_400.0)? * 1e9) as u64,
        };
        let cluster = self.cluster(raw.cluster.as_ref())?;
        let network = self.network(raw.network.as_ref())?;
        let env = self.env(raw.env.as_ref())?;
        let host = self.host(raw.host.as_ref(), torch)?;
        let memory = self.memory(raw.memory.as_ref(), &cluster, torch, &env)?;

        self.check_names(&raw)?;
        let mut names = Names {
            tensors: HashMap::new(),
            streams: HashMap::new(),
            groups: HashMap::new(),
        };
        let tensors = self.tensors(raw.tensors.as_ref(), &mut names)?;
        let streams = self.streams(raw.streams.as_ref(), &mut names)?;
        let mut groups = self.groups(raw.groups.as_ref(), &cluster, &mut names)?;

        let raw_ops = raw.op.unwrap_or_default();
        if raw_ops.is_empty() {
            // No line is at fault: the error names the file's start, as every scenario error
            // names a line and column.
            return Err(self.error(
                0..0,
                "the scenario has no [[op]]: a program needs at least one operation",
            ));
        }
        let mut program = ProgramBuilder {
            tensor_counts: tensors.iter().map(|t| t.count).collect(),
            tensor_sizes: tensors.iter().map(|t| t.size_bytes).collect(),
            tensor_dtypes: tensors.iter().map(|t| t.dtype).collect(),
            ..ProgramBuilder::default()
        };
        program.init_planned = raw_ops
            .iter()
            .any(|op| op.get_ref().init_process_group.is_some());
        program.created_planned = raw_ops
            .iter()
            .filter_map(|op| op.get_ref().new_group.as_ref())
            .filter_map(|name| names.groups.get(name.get_ref()).copied())
            .collect();
        let declared_groups = groups.len();
        let mut op_index_of_raw = Vec::with_capacity(raw_ops.len());
        for raw_op in &raw_ops {
            // R30: a functional collective's wait_tensor goes before the first op reading its
            // result on each rank, so op indices count those waits too. Bad ranks are the op's
            // error, reported below.
            if let Ok(ranks) = self.op_ranks(raw_op.get_ref(), &names, &cluster, &groups) {
                self.insert_tensor_waits(raw_op, &ranks, cluster.ranks, &names, &mut program);
            }
            let index = program.ops.len();
            let op = self.op(index, raw_op, &names, &cluster, &groups, &mut program)?;
            self.check_group_exists(&op, raw_op.span(), declared_groups, &groups, &program)?;
            program.ops.push(op);
            op_index_of_raw.push(index);
        }
        if repeat > 1 {
            self.insert_carried_tensor_waits(
                &raw_ops,
                &op_index_of_raw,
                cluster.ranks,
                &names,
                &mut program,
            );
        }
        self.setup_ops(&raw_ops, &mut groups, &program)?;
        for &(low, high) in &program.pairs {
            groups.push(Group {
                name: Group::pair_name(low, high),
                ranks: vec![low, high],
                eager_init: false,
                high_priority: groups[0].high_priority,
                timeout_ns: groups[0].timeout_ns,
                first_seq_num: 1,
                point_to_point: true,
                created_by: None,
            });
        }
        let perturbations = self.perturbations(
            raw.perturb.as_deref().unwrap_or_default(),
            &program,
            &cluster,
            repeat,
        )?;
        let faults = self.faults(
            raw.fault.as_deref().unwrap_or_default(),
            &program,
            &cluster,
            &tensors,
            repeat,
        )?;
        let mut tensors = tensors;
        self.check_lifetimes(&program.ops, &mut tensors)?;
        let measures = self.measures(raw.measure.as_deref().unwrap_or_default(), &program)?;
        let mut overlaps: Vec<OverlapSpec> = Vec::new();
        for overlap in raw.overlap.iter().flatten() {
            let spec = self.overlap(overlap, &measures, &program.marks.names)?;
            if overlaps.iter().any(|o| o.name == spec.name) {
                return Err(self.error(
                    overlap.span(),
                    format!(
                        "overlap {:?} is declared twice; give each [[overlap]] its own name",
                        spec.name
                    ),
                ));
            }
            overlaps.push(spec);
        }

        let scenario = Scenario {
            name: raw.name.unwrap_or_else(|| name_from_path(self.path)),
            about: raw.about.unwrap_or_default(),
            path: self.path.to_string(),
            source_hash: content_hash(self.text),
            torch,
            seed,
            repeat,
            warmup,
            max_sim_time_ns,
            destroy_process_group: raw.destroy_process_group.unwrap_or(true),
            cluster,
            network,
            host,
            env,
            memory,
            tensors,
            streams,
            groups,
            works: program.works.names,
            events: program.events.names,
            marks: program.marks.names,
            ops: program.ops,
            perturbations,
            faults,
            measures,
            overlaps,
        };
        if let Some(message) = scenario.unplannable_collective() {
            let span = raw
                .env
                .iter()
                .flatten()
                .find(|(key, _)| ["NCCL_ALGO", "NCCL_PROTO"].contains(&key.get_ref().as_str()))
                .map_or(0..0, |(_, value)| value.span());
            return Err(self.error(span, message));
        }
        Ok(scenario)
    }

    fn cluster(&self, raw: Option<&RawCluster>) -> Result<Cluster> {
        let default_gpu = GpuSpec::preset("h100-sxm").expect("the default preset exists");
        let Some(raw) = raw else {
            return Ok(Cluster {
                ranks: 8,
                ranks_per_node: DEFAULT_RANKS_PER_NODE,
                gpu: default_gpu,
                kernel_jitter: 0.0,
                rank_speed_spread: 0.0,
                gemm_tile: DEFAULT_GEMM_TILE,
                fold: true,
            });
        };
        let ranks = match &raw.ranks {
            None => 8,
            Some(value) => self.count(value, "cluster.ranks", 1, i64::from(MAX_RANKS))? as u32,
        };
        let ranks_per_node = match &raw.ranks_per_node {
            None => ranks.min(DEFAULT_RANKS_PER_NODE),
            Some(value) => {
                self.count(value, "cluster.ranks_per_node", 1, i64::from(MAX_RANKS))? as u32
            }
        };
        let mut gpu = match &raw.gpu {
            None => default_gpu,
            Some(name) => GpuSpec::preset(name.get_ref()).ok_or_else(|| {
                self.error(
                    name.span(),
                    format!(
                        "unknown GPU preset {:?}; expected one of {}{}",
                        name.get_ref(),
                        GpuSpec::PRESETS.join(", "),
                        suggest::did_you_mean(name.get_ref(), GpuSpec::PRESETS.iter().copied())
                    ),
                )
            })?,
        };
        if let Some(sms) = &raw.sms {
            gpu.sms = self.count(sms, "cluster.sms", 1, 1024)? as u32;
        }
        if let Some(rate) = &raw.bf16_tflops {
            gpu.bf16_tflops = self.positive(rate, "cluster.bf16_tflops", 1e6)?;
        }
        if let Some(rate) = &raw.fp32_tflops {
            gpu.fp32_tflops = self.positive(rate, "cluster.fp32_tflops", 1e6)?;
        }
        if let Some(efficiency) = &raw.gemm_efficiency {
            gpu.gemm_efficiency = self.positive(efficiency, "cluster.gemm_efficiency", 1.0)?;
        }
        if let Some(boost) = &raw.boost_ms {
            let ms = self.positive(boost, "cluster.boost_ms", 1e9)?;
            gpu.boost_ns = Some((ms * 1e6).round() as u64);
        }
        if let Some(clock) = &raw.sustained_clock {
            gpu.sustained_clock = self.positive(clock, "cluster.sustained_clock", 1.0)?;
        }
        let percent = |value: &Option<Spanned<f64>>, what: &str| -> Result<f64> {
            let Some(pct) = value else {
                return Ok(0.0);
            };
            let number = *pct.get_ref();
            if !(0.0..=50.0).contains(&number) {
                return Err(self.error(
                    pct.span(),
                    format!("{what} must be between 0 and 50, found {number}"),
                ));
            }
            Ok(number / 100.0)
        };
        Ok(Cluster {
            ranks,
            ranks_per_node,
            gpu,
            kernel_jitter: percent(&raw.kernel_jitter_pct, "cluster.kernel_jitter_pct")?,
            rank_speed_spread: percent(
                &raw.rank_speed_spread_pct,
                "cluster.rank_speed_spread_pct",
            )?,
            gemm_tile: [
                match &raw.gemm_tile_m {
                    None => DEFAULT_GEMM_TILE[0],
                    Some(rows) => self.count(rows, "cluster.gemm_tile_m", 1, 4096)?,
                },
                match &raw.gemm_tile_n {
                    None => DEFAULT_GEMM_TILE[1],
                    Some(columns) => self.count(columns, "cluster.gemm_tile_n", 1, 4096)?,
                },
            ],
            fold: raw.fold.as_ref().is_none_or(|fold| *fold.get_ref()),
        })
    }

    fn network(&self, raw: Option<&RawNetwork>) -> Result<Network> {
        let mut network = Network {
            nvlink_bytes_per_s: 450e9,
            nic_bytes_per_s: 50e9,
            alpha_ns: DEFAULT_ALPHA_NS,
            nic_alpha_ns: 10_000,
            kernel_floor_ns: 5_000,
            self_copy_bytes_per_s: None,
            algorithm: NetworkAlgorithm::Ring,
            nccl_launch_ns: [None; 3],
            nccl_wire_efficiency: [None; 3],
        };
        let Some(raw) = raw else {
            return Ok(network);
        };
        if let Some(gbps) = &raw.nvlink_gbps {
            network.nvlink_bytes_per_s =
                self.positive(gbps, "network.nvlink_gbps", MAX_LINK_GBPS)? * 1e9;
        }
        if let Some(gbps) = &raw.nic_gbps {
            network.nic_bytes_per_s = self.positive(gbps, "network.nic_gbps", MAX_LINK_GBPS)? * 1e9;
        }
        network.alpha_ns =
            self.optional_time_us(&raw.alpha_us, "network.alpha_us", DEFAULT_ALPHA_NS)?;
        network.nic_alpha_ns =
            self.optional_time_us(&raw.nic_alpha_us, "network.nic_alpha_us", 10_000)?;
        network.kernel_floor_ns =
            self.optional_time_us(&raw.kernel_floor_us, "network.kernel_floor_us", 5_000)?;
        if let Some(gbps) = &raw.self_copy_gbps {
            network.self_copy_bytes_per_s =
                Some(self.positive(gbps, "network.self_copy_gbps", MAX_LINK_GBPS)? * 1e9);
        }
        let launches = [
            (&raw.nccl_ll_launch_us, "network.nccl_ll_launch_us"),
            (&raw.nccl_ll128_launch_us, "network.nccl_ll128_launch_us"),
            (&raw.nccl_simple_launch_us, "network.nccl_simple_launch_us"),
        ];
        for (slot, (value, what)) in network.nccl_launch_ns.iter_mut().zip(launches) {
            if let Some(value) = value {
                *slot = Some(self.time_us(value, what, true)?);
            }
        }
        let efficiencies = [
            (
                &raw.nccl_ll_wire_efficiency,
                "network.nccl_ll_wire_efficiency",
            ),
            (
                &raw.nccl_ll128_wire_efficiency,
                "network.nccl_ll128_wire_efficiency",
            ),
            (
                &raw.nccl_simple_wire_efficiency,
                "network.nccl_simple_wire_efficiency",
            ),
        ];
        for (slot, (value, what)) in network.nccl_wire_efficiency.iter_mut().zip(efficiencies) {
            if let Some(value) = value {
                *slot = Some(self.positive(value, what, 1.0)?);
            }
        }
        if let Some(algorithm) = &raw.algorithm {
            network.algorithm = match algorithm.get_ref().as_str() {
                "ring" => NetworkAlgorithm::Ring,
                "auto" => NetworkAlgorithm::Auto,
                other => {
                    return Err(self.error(
                        algorithm.span(),
                        format!(
                            "network.algorithm {other:?} is not modelled; expected \"ring\" (the α-β ring of R24) or \"auto\" (the NCCL model: docs/nccl-model.md)"
                        ),
                    ))
                }
            };
        }
        Ok(network)
    }

    /// A collective call's cost (`key`, `default_ns` when unset), which must cover
    /// `host.collective_enqueue_us` and `host.collective_tail_us`, the parts of a call from the
    /// Work's creation on (`after_work_ns`).
    fn call_covering_tail(
        &self,
        value: &Option<Spanned<f64>>,
        key: &str,
        default_ns: u64,
        after_work_ns: u64,
    ) -> Result<u64> {
        let call_ns = self.optional_time_us(value, key, default_ns)?;
        if after_work_ns > call_ns {
            let span = value.as_ref().map_or(0..0, |v| v.span());
            return Err(self.error(
                span,
                format!(
                    "{key} ({} us) must cover host.collective_enqueue_us + host.collective_tail_us ({} us), the parts of a call from the Work's creation on",
                    call_ns as f64 / 1e3,
                    after_work_ns as f64 / 1e3
                ),
            ));
        }
        Ok(call_ns)
    }

    fn host(&self, raw: Option<&RawHost>, torch: TorchProfile) -> Result<HostCosts> {
        let empty = RawHost {
            launch_us: None,
            first_gemm_us: None,
            launch_latency_us: None,
            nccl_launch_latency_us: None,
            stream_wait_latency_us: None,
            collective_us: None,
            collective_tail_us: None,
            collective_enqueue_us: None,
            op_gap_us: None,
            collective_cold_us: None,
            sync_collective_us: None,
            collective_warm_within_us: None,
            collective_cold_after_us: None,
            wait_us: None,
            event_us: None,
            coalesced_call_us: None,
            sync_us: None,
            item_us: None,
            mark_us: None,
            query_us: None,
            comm_init_us: None,
            comm_init_next_us: None,
            init_process_group_us: None,
            new_group_us: None,
            blocking_wait_poll_us: None,
            watchdog_stack_trace_us: None,
            comm_abort_us: None,
            flight_recorder_dump_us: None,
            launch_queue_depth: None,
        };
        let raw = raw.unwrap_or(&empty);
        let poll_ns = match &raw.blocking_wait_poll_us {
            None => torch.blocking_wait_poll_ns(),
            Some(value) => self.time_us(value, "host.blocking_wait_poll_us", false)?,
        };
        let collective_ns =
            self.optional_time_us(&raw.collective_us, "host.collective_us", 30_000)?;
        let collective_tail_ns =
            self.optional_time_us(&raw.collective_tail_us, "host.collective_tail_us", 10_000)?;
        if collective_tail_ns > collective_ns {
            let span = raw.collective_tail_us.as_ref().map_or(0..0, |v| v.span());
            return Err(self.error(
                span,
                format!(
                    "host.collective_tail_us ({} us) is part of host.collective_us ({} us) and cannot exceed it",
                    collective_tail_ns as f64 / 1e3,
                    collective_ns as f64 / 1e3
                ),
            ));
        }
        let collective_enqueue_ns =
            self.optional_time_us(&raw.collective_enqueue_us, "host.collective_enqueue_us", 0)?;
        let after_work_ns = collective_enqueue_ns + collective_tail_ns;
        if after_work_ns > collective_ns {
            let span = raw
                .collective_enqueue_us
                .as_ref()
                .map_or(0..0, |v| v.span());
            return Err(self.error(
                span,
                format!(
                    "host.collective_enqueue_us + host.collective_tail_us ({} us) are parts of host.collective_us ({} us) and cannot exceed it",
                    after_work_ns as f64 / 1e3,
                    collective_ns as f64 / 1e3
                ),
            ));
        }
        let collective_cold_ns = self.call_covering_tail(
            &raw.collective_cold_us,
            "host.collective_cold_us",
            collective_ns,
            after_work_ns,
        )?;
        let sync_collective_ns = self.call_covering_tail(
            &raw.sync_collective_us,
            "host.sync_collective_us",
            collective_ns,
            after_work_ns,
        )?;
        let collective_warm_within_ns = self.optional_time_us(
            &raw.collective_warm_within_us,
            "host.collective_warm_within_us",
            30_000,
        )?;
        let collective_cold_after_ns = self.optional_time_us(
            &raw.collective_cold_after_us,
            "host.collective_cold_after_us",
            30_000_000,
        )?;
        if collective_warm_within_ns == 0 || collective_cold_after_ns <= collective_warm_within_ns {
            let span = raw
                .collective_cold_after_us
                .as_ref()
                .or(raw.collective_warm_within_us.as_ref())
                .map_or(0..0, |v| v.span());
            return Err(self.error(
                span,
                format!(
                    "host.collective_warm_within_us ({} us) must be above 0 and below host.collective_cold_after_us ({} us)",
                    collective_warm_within_ns as f64 / 1e3,
                    collective_cold_after_ns as f64 / 1e3
                ),
            ));
        }
        let launch_latency_ns =
            self.optional_time_us(&raw.launch_latency_us, "host.launch_latency_us", 3_000)?;
        let nccl_launch_latency_ns = self.optional_time_us(
            &raw.nccl_launch_latency_us,
            "host.nccl_launch_latency_us",
            launch_latency_ns,
        )?;
        let event_ns = self.optional_time_us(&raw.event_us, "host.event_us", 2_000)?;
        Ok(HostCosts {
            launch_ns: self.optional_time_us(&raw.launch_us, "host.launch_us", 5_000)?,
            first_gemm_ns: self.optional_time_us(&raw.first_gemm_us, "host.first_gemm_us", 0)?,
            launch_latency_ns,
            nccl_launch_latency_ns,
            stream_wait_latency_ns: self.optional_time_us(
                &raw.stream_wait_latency_us,
                "host.stream_wait_latency_us",
                0,
            )?,
            collective_ns,
            collective_tail_ns,
            collective_enqueue_ns,
            op_gap_ns: self.optional_time_us(&raw.op_gap_us, "host.op_gap_us", 0)?,
            collective_cold_ns,
            sync_collective_ns,
            collective_warm_within_ns,
            collective_cold_after_ns,
            wait_ns: self.optional_time_us(&raw.wait_us, "host.wait_us", 4_000)?,
            event_ns,
            coalesced_call_ns: self.optional_time_us(
                &raw.coalesced_call_us,
                "host.coalesced_call_us",
                event_ns,
            )?,
            sync_ns: self.optional_time_us(&raw.sync_us, "host.sync_us", 5_000)?,
            item_ns: self.optional_time_us(&raw.item_us, "host.item_us", 15_000)?,
            mark_ns: self.optional_time_us(&raw.mark_us, "host.mark_us", 2_000)?,
            query_ns: self.optional_time_us(&raw.query_us, "host.query_us", 1_000)?,
            comm_init_ns: self.optional_time_us(
                &raw.comm_init_us,
                "host.comm_init_us",
                300_000_000,
            )?,
            comm_init_next_ns: self.optional_time_us(
                &raw.comm_init_next_us,
                "host.comm_init_next_us",
                DEFAULT_COMM_INIT_NEXT_NS,
            )?,
            init_process_group_ns: self.optional_time_us(
                &raw.init_process_group_us,
                "host.init_process_group_us",
                DEFAULT_INIT_PROCESS_GROUP_NS,
            )?,
            new_group_ns: self.optional_time_us(
                &raw.new_group_us,
                "host.new_group_us",
                DEFAULT_NEW_GROUP_NS,
            )?,
            blocking_wait_poll_ns: poll_ns,
            watchdog_stack_trace_ns: self.optional_time_us(
                &raw.watchdog_stack_trace_us,
                "host.watchdog_stack_trace_us",
                0,
            )?,
            comm_abort_ns: self.optional_time_us(&raw.comm_abort_us, "host.comm_abort_us", 0)?,
            flight_recorder_dump_ns: self.optional_time_us(
                &raw.flight_recorder_dump_us,
                "host.flight_recorder_dump_us",
                0,
            )?,
            launch_queue_depth: match &raw.launch_queue_depth {
                Some(depth) => self.count(depth, "host.launch_queue_depth", 1, 1 << 20)? as u32,
                None => DEFAULT_LAUNCH_QUEUE_DEPTH,
            },
        })
    }

    fn env(&self, raw: Option<&BTreeMap<Spanned<String>, Spanned<toml::Value>>>) -> Result<Env> {
        let mut env = Env {
            blocking_wait: false,
            high_priority: false,
            show_eager_init_p2p_serialization_warning: true,
            enable_timing: false,
            nccl_algorithms: None,
            nccl_protocols: None,
            nccl_nvls_enable: true,
            nccl_min_ctas: None,
            nccl_max_ctas: None,
            async_error_handling: ErrorHandling::SkipCleanUp,
            wait_timeout_dump_ns: 15_000_000_000,
            heartbeat_timeout_ns: 480_000_000_000,
            enable_monitoring: true,
            coord_check_ns: 1_000_000_000,
            propagate_error: false,
            desync_debug: false,
            use_comm_nonblocking: false,
            nonblocking_timeout_ns: Some(1_800_000_000_000),
            dump_on_timeout: true,
            trace_buffer_entries: 2000,
            dump_file_prefix: None,
            avoid_record_streams: None,
            expandable_segments: false,
            lazy_module_loading: true,
            raw: BTreeMap::new(),
        };
        let none = BTreeMap::new();
        let all = raw.unwrap_or(&none);
        for (written, value) in all {
            let key = &self.canonical_env_key(written, all)?;
            if self.observability_env(&mut env, key, value)? {
                continue;
            }
            if key.get_ref().starts_with("NCCL_") && self.nccl_env(&mut env, key, value)? {
                continue;
            }
            if self.watchdog_env(&mut env, key, value)? {
                continue;
            }
            if self.cuda_runtime_env(&mut env, key, value)? {
                continue;
            }
            let flag = match key.get_ref().as_str() {
                "TORCH_NCCL_BLOCKING_WAIT" => &mut env.blocking_wait,
                "TORCH_NCCL_HIGH_PRIORITY" => &mut env.high_priority,
                "TORCH_NCCL_SHOW_EAGER_INIT_P2P_SERIALIZATION_WARNING" => {
                    &mut env.show_eager_init_p2p_serialization_warning
                }
                "TORCH_NCCL_ENABLE_TIMING" => &mut env.enable_timing,
                "TORCH_NCCL_ENABLE_MONITORING" => &mut env.enable_monitoring,
                "TORCH_NCCL_PROPAGATE_ERROR" => &mut env.propagate_error,
                "TORCH_NCCL_DESYNC_DEBUG" => &mut env.desync_debug,
                "TORCH_NCCL_USE_COMM_NONBLOCKING" => &mut env.use_comm_nonblocking,
                other => {
                    let names = Env::KNOWN.iter().map(|(name, _)| *name);
                    let advice = match suggest::nearest(other, names.clone()) {
                        Some(found) => {
                            let meaning = Env::KNOWN
                                .iter()
                                .find(|(name, _)| *name == found)
                                .map_or("", |(_, meaning)| *meaning);
                            format!("did you mean {found:?} ({meaning})?")
                        }
                        None => format!(
                            "the modelled ones are {} (docs/scenario-format.md says what each does)",
                            names.collect::<Vec<_>>().join(", ")
                        ),
                    };
                    return Err(self.error(
                        key.span(),
                        format!("unknown or unmodelled environment variable {other:?}; {advice}"),
                    ));
                }
            };
            let on = self.env_flag(key, value)?;
            *flag = on;
            env.raw
                .insert(key.get_ref().clone(), u8::from(on).to_string());
        }
        Ok(env)
    }

    /// Tensors that an `alloc` op creates are dynamic: every use must come between their
    /// `alloc` and their `free`, in program order, and each iteration must free what it
    /// allocated (R17).
    ///
    /// A functional collective's result is a new tensor at each call, bound to the result's
    /// name, and the tensor the name held before lives until the call returns (R30): a result
    /// that no op names before its first call is dynamic too, alive from that call on and for
    /// the rest of the run (until a `free`, or the next call rebinds it). In `y =
    /// fcol.all_reduce(y)` the call itself names it first, as its input: the program's own.
    fn check_lifetimes(&self, ops: &[Op], tensors: &mut [Tensor]) -> Result<()> {
        let mut allocated_by_program = vec![false; tensors.len()];
        let mut named = vec![false; tensors.len()];
        for op in ops {
            match op.kind {
                OpKind::Alloc { tensor } => {
                    tensors[tensor].dynamic = true;
                    allocated_by_program[tensor] = true;
                }
                OpKind::Collective {
                    tensor,
                    result: Some(result),
                    ..
                } if !named[result] && tensor != result => tensors[result].dynamic = true,
                _ => {}
            }
            for tensor in op_tensors(op) {
                named[tensor] = true;
            }
        }
        let at = |op: &Op, message: String| ScenarioError {
            path: self.path.to_string(),
            line: op.line,
            column: 1,
            width: 1,
            message,
        };
        let mut alive = vec![false; tensors.len()];
        for op in ops {
            let mut used: Vec<TensorId> = op.reads.iter().chain(&op.writes).copied().collect();
            match op.kind {
                OpKind::Collective { tensor, result, .. } => {
                    used.push(tensor);
                    if let Some(result) = result {
                        alive[result] = true;
                    }
                }
                OpKind::Item { tensor } => used.push(tensor),
                OpKind::Alloc { tensor } => {
                    if alive[tensor] {
                        return Err(at(
                            op,
                            format!(
                                "tensor {:?} is allocated again before it is freed",
                                tensors[tensor].name
                            ),
                        ));
                    }
                    alive[tensor] = true;
                }
                OpKind::Free { tensor } => {
                    if !tensors[tensor].dynamic || !alive[tensor] {
                        return Err(at(op, format!("free of tensor {:?}, which is not allocated here; add alloc = {:?} before it", tensors[tensor].name, tensors[tensor].name)));
                    }
                    alive[tensor] = false;
                }
                _ => {}
            }
            if let Some(&tensor) = used.iter().find(|&&t| tensors[t].dynamic && !alive[t]) {
                return Err(at(
                    op,
                    format!(
                        "{} uses tensor {:?} outside its alloc … free",
                        op.display_name(),
                        tensors[tensor].name
                    ),
                ));
            }
        }
        if let Some(tensor) = (0..tensors.len()).find(|&t| alive[t] && allocated_by_program[t]) {
            let last = ops.last().expect("a program has ops");
            return Err(at(last, format!("tensor {:?} is still allocated when the program ends; free it in the same iteration", tensors[tensor].name)));
        }
        Ok(())
    }

    /// A 0/1 environment variable (an integer, a boolean or the string "0"/"1").
    fn env_flag(&self, key: &Spanned<String>, value: &Spanned<toml::Value>) -> Result<bool> {
        match value.get_ref() {
            toml::Value::Integer(0) => Ok(false),
            toml::Value::Integer(1) => Ok(true),
            toml::Value::Boolean(b) => Ok(*b),
            toml::Value::String(s) if s == "0" || s == "1" => Ok(s == "1"),
            other => Err(self.error(
                value.span(),
                format!("{} expects 0 or 1, found {other}", key.get_ref()),
            )),
        }
    }

    /// Reads the CUDA runtime's variables (the caching allocator's two, `CUDA_MODULE_LOADING`)
    /// into `env`; false if `key` is none of them.
    fn cuda_runtime_env(
        &self,
        env: &mut Env,
        key: &Spanned<String>,
        value: &Spanned<toml::Value>,
    ) -> Result<bool> {
        match key.get_ref().as_str() {
            "TORCH_NCCL_AVOID_RECORD_STREAMS" => {
                let on = self.env_flag(key, value)?;
                env.avoid_record_streams = Some(on);
                env.raw
                    .insert(key.get_ref().clone(), u8::from(on).to_string());
            }
            "PYTORCH_CUDA_ALLOC_CONF" => {
                let setting = match value.get_ref() {
                    toml::Value::String(text) => text.replace(' ', ""),
                    other => {
                        return Err(self.error(
                            value.span(),
                            format!("PYTORCH_CUDA_ALLOC_CONF expects a string such as \"expandable_segments:True\", found {other}"),
                        ))
                    }
                };
                env.expandable_segments = match setting.as_str() {
                    "expandable_segments:True" => true,
                    "expandable_segments:False" => false,
                    _ => {
                        return Err(self.error(
                            value.span(),
                            format!("PYTORCH_CUDA_ALLOC_CONF {setting:?} is not modelled; expected \"expandable_segments:True\" or \"expandable_segments:False\""),
                        ))
                    }
                };
                env.raw.insert(key.get_ref().clone(), setting);
            }
            "CUDA_MODULE_LOADING" => {
                env.lazy_module_loading = match value.get_ref() {
                    toml::Value::String(text) if text == "LAZY" => true,
                    toml::Value::String(text) if text == "EAGER" => false,
                    other => {
                        return Err(self.error(
                            value.span(),
                            format!(
                                "CUDA_MODULE_LOADING expects \"LAZY\" or \"EAGER\", found {other}"
                            ),
                        ))
                    }
                };
                let setting = if env.lazy_module_loading {
                    "LAZY"
                } else {
                    "EAGER"
                };
                env.raw.insert(key.get_ref().clone(), setting.to_string());
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// The caching allocator (R17–R20): capacity from the GPU preset and `fraction`, the
    /// lifetime rule from `lifetime`, else `TORCH_NCCL_AVOID_RECORD_STREAMS`, else the profile.
    fn memory(
        &self,
        raw: Option<&RawMemory>,
        cluster: &Cluster,
        torch: TorchProfile,
        env: &Env,
    ) -> Result<Memory> {
        let device_gib = match cluster.gpu.preset.as_str() {
            "h200" => 141.0,
            _ => 80.0,
        };
        let empty = RawMemory {
            capacity_gib: None,
            fraction: None,
            lifetime: None,
            expandable_segments: None,
            alloc_us: None,
            malloc_us: None,
            free_us: None,
        };
        let raw = raw.unwrap_or(&empty);
        let capacity_gib = match &raw.capacity_gib {
            None => device_gib,
            Some(value) => self.positive(value, "memory.capacity_gib", 1e6)?,
        };
        let fraction = match &raw.fraction {
            None => 1.0,
            Some(value) => self.positive(value, "memory.fraction", 1.0)?,
        };
        let lifetime = match &raw.lifetime {
            Some(name) => match name.get_ref().as_str() {
                "stash" => Lifetime::Stash,
                "record_stream" => Lifetime::RecordStream,
                "none" => Lifetime::None,
                other => {
                    return Err(self.error(
                        name.span(),
                        format!("unknown lifetime {other:?}; expected \"stash\", \"record_stream\" or \"none\""),
                    ))
                }
            },
            // 2.12 stashes always (the variable is deprecated there); ≤ 2.5 records streams
            // unless TORCH_NCCL_AVOID_RECORD_STREAMS=1 (R18, R19).
            None => match (torch, env.avoid_record_streams) {
                (TorchProfile::V2_12, _) | (_, Some(true)) => Lifetime::Stash,
                _ => Lifetime::RecordStream,
            },
        };
        Ok(Memory {
            capacity_bytes: (capacity_gib * fraction * (1u64 << 30) as f64) as u64,
            lifetime,
            expandable_segments: raw.expandable_segments.unwrap_or(env.expandable_segments),
            alloc_ns: self.optional_time_us(&raw.alloc_us, "memory.alloc_us", 2_000)?,
            malloc_ns: self.optional_time_us(&raw.malloc_us, "memory.malloc_us", 20_000)?,
            free_ns: self.optional_time_us(&raw.free_us, "memory.free_us", 30_000)?,
        })
    }

    /// Reads one of the NCCL variables of [`Env::KNOWN`] into `env`; false if `key` is none of
    /// them.
    fn nccl_env(
        &self,
        env: &mut Env,
        key: &Spanned<String>,
        value: &Spanned<toml::Value>,
    ) -> Result<bool> {
        let name = key.get_ref().as_str();
        let text = match value.get_ref() {
            toml::Value::String(text) => text.clone(),
            toml::Value::Integer(number) => number.to_string(),
            other => {
                return Err(self.error(
                    value.span(),
                    format!("{name} expects a string or an integer, found {other}"),
                ))
            }
        };
        let invalid = |message: String| self.error(value.span(), format!("{name}: {message}"));
        match name {
            "NCCL_ALGO" => {
                env.nccl_algorithms =
                    Some(crate::nccl_env::parse_algorithms(&text).map_err(invalid)?)
            }
            "NCCL_PROTO" => {
                env.nccl_protocols = Some(crate::nccl_env::parse_protocols(&text).map_err(invalid)?)
            }
            "NCCL_NVLS_ENABLE" => env.nccl_nvls_enable = self.env_flag(key, value)?,
            "NCCL_MIN_CTAS" | "NCCL_MAX_CTAS" => {
                let ctas = text
                    .trim()
                    .parse::<u32>()
                    .ok()
                    .filter(|ctas| (1..=64).contains(ctas))
                    .ok_or_else(|| {
                        invalid(format!(
                            "expects a channel count between 1 and 64, found {text:?}"
                        ))
                    })?;
                let (min, max) = if name == "NCCL_MIN_CTAS" {
                    env.nccl_min_ctas = Some(ctas);
                    (Some(ctas), env.nccl_max_ctas)
                } else {
                    env.nccl_max_ctas = Some(ctas);
                    (env.nccl_min_ctas, Some(ctas))
                };
                if let (Some(min), Some(max)) = (min, max) {
                    if min > max {
                        return Err(invalid(format!(
                            "NCCL_MIN_CTAS ({min}) is larger than NCCL_MAX_CTAS ({max})"
                        )));
                    }
                }
            }
            _ => return Ok(false),
        }
        env.raw.insert(name.to_string(), text);
        Ok(true)
    }

    fn tensors(
        &self,
        raw: Option<&BTreeMap<Spanned<String>, Spanned<toml::Value>>>,
        names: &mut Names,
    ) -> Result<Vec<Tensor>> {
        let mut tensors = Vec::new();
        for (name, value) in in_file_order(raw) {
            let (size_text, dtype) = match value.get_ref() {
                toml::Value::String(size) => (size.clone(), DType::F32),
                toml::Value::Integer(bytes) => (bytes.to_string(), DType::F32),
                toml::Value::Table(table) => {
                    const KEYS: [&str; 3] = ["size", "dtype", "count"];
                    if let Some(key) = table.keys().find(|key| !KEYS.contains(&key.as_str())) {
                        let hint = match suggest::nearest(key, KEYS) {
                            Some(found) => format!("did you mean {found:?}?"),
                            None => "expected size, dtype and count".to_string(),
                        };
                        return Err(self.error(
                            self.key_within(value.span(), key),
                            format!("unknown key {key:?} in tensor {:?}; {hint}", name.get_ref()),
                        ));
                    }
                    let size = match table.get("size") {
                        Some(toml::Value::String(size)) => size.clone(),
                        Some(toml::Value::Integer(bytes)) => bytes.to_string(),
                        _ => {
                            return Err(self.error(
                                value.span(),
                                format!("tensor {:?} needs size = \"25MiB\" (a string with a unit, or bytes)", name.get_ref()),
                            ))
                        }
                    };
                    let dtype = match table.get("dtype") {
                        None => DType::F32,
                        Some(toml::Value::String(dtype)) => DType::parse(dtype).ok_or_else(|| {
                            self.error(
                                value.span(),
                                format!("unknown dtype {dtype:?}; expected f32, bf16 or f16"),
                            )
                        })?,
                        Some(other) => {
                            return Err(self.error(
                                value.span(),
                                format!("dtype must be a string such as \"bf16\", found {other}"),
                            ))
                        }
                    };
                    (size, dtype)
                }
                other => {
                    return Err(self.error(
                        value.span(),
                        format!(
                            "tensor {:?}: expected a size such as \"25MiB\" or a table {{ size, dtype }}, found {other}",
                            name.get_ref()
                        ),
                    ))
                }
            };
            let size_bytes = parse_size_bytes(&size_text)
                .map_err(|message| self.error(value.span(), message))?;
            if size_bytes == 0 || size_bytes > (1 << 40) {
                return Err(self.error(
                    value.span(),
                    format!("tensor size must be between 1 B and 1 TiB, found {size_bytes} B"),
                ));
            }
            if size_bytes % dtype.size_bytes() != 0 {
                return Err(self.error(
                    value.span(),
                    format!(
                        "tensor size {size_bytes} B is not a whole number of {} elements",
                        dtype.as_str()
                    ),
                ));
            }
            let count = match value.get_ref() {
                toml::Value::Table(table) => match table.get("count") {
                    None => 1,
                    Some(toml::Value::Integer(n)) if (1..=100_000).contains(n) => *n as u32,
                    Some(other) => {
                        return Err(self.error(
                            value.span(),
                            format!("tensor {:?}: count must be an integer between 1 and 100000, found {other}", name.get_ref()),
                        ))
                    }
                },
                _ => 1,
            };
            names.tensors.insert(name.get_ref().clone(), tensors.len());
            tensors.push(Tensor {
                count,
                name: name.get_ref().clone(),
                size_bytes,
                dtype,
                dynamic: false,
            });
        }
        Ok(tensors)
    }

    fn streams(
        &self,
        raw: Option<&BTreeMap<Spanned<String>, RawStream>>,
        names: &mut Names,
    ) -> Result<Vec<StreamDecl>> {
        let mut streams = vec![StreamDecl {
            name: "default".into(),
            priority: Priority::Normal,
        }];
        names.streams.insert("default".into(), 0);
        for (name, stream) in in_file_order(raw) {
            if name.get_ref() == "default" {
                return Err(self.error(
                    name.span(),
                    "\"default\" is the default stream and cannot be redeclared",
                ));
            }
            let priority = match &stream.priority {
                None => Priority::Normal,
                Some(p) => match p.get_ref().as_str() {
                    "normal" => Priority::Normal,
                    "high" => Priority::High,
                    other => {
                        return Err(self.error(
                            p.span(),
                            format!("unknown priority {other:?}; expected \"normal\" or \"high\""),
                        ))
                    }
                },
            };
            names.streams.insert(name.get_ref().clone(), streams.len());
            streams.push(StreamDecl {
                name: name.get_ref().clone(),
                priority,
            });
        }
        Ok(streams)
    }

    fn groups(
        &self,
        raw: Option<&BTreeMap<Spanned<String>, Spanned<RawGroup>>>,
        cluster: &Cluster,
        names: &mut Names,
    ) -> Result<Vec<Group>> {
        let mut groups = vec![Group {
            name: "world".into(),
            ranks: (0..cluster.ranks).collect(),
            eager_init: false,
            high_priority: false,
            timeout_ns: DEFAULT_GROUP_TIMEOUT_NS,
            first_seq_num: 1,
            point_to_point: false,
            created_by: None,
        }];
        names.groups.insert("world".into(), 0);
        for (name, group) in in_file_order(raw) {
            let raw_group = group.get_ref();
            let ranks = match &raw_group.ranks {
                None if name.get_ref() == "world" => (0..cluster.ranks).collect(),
                None => {
                    return Err(self.error(
                        group.span(),
                        format!("group {:?} needs ranks = [..]", name.get_ref()),
                    ))
                }
                Some(ranks) => self.rank_list(
                    ranks,
                    cluster.ranks,
                    &format!("groups.{}.ranks", name.get_ref()),
                )?,
            };
            let declared = Group {
                name: name.get_ref().clone(),
                ranks,
                eager_init: raw_group.eager_init.unwrap_or(false),
                high_priority: raw_group.high_priority.unwrap_or(false),
                timeout_ns: match &raw_group.timeout_s {
                    None => DEFAULT_GROUP_TIMEOUT_NS,
                    Some(seconds) => self.group_timeout_ns(seconds)?,
                },
                first_seq_num: match &raw_group.first_seq_num {
                    None => 1,
                    Some(first) => self.count(
                        first,
                        &format!("groups.{}.first_seq_num", name.get_ref()),
                        1,
                        MAX_FIRST_SEQ_NUM as i64,
                    )?,
                },
                point_to_point: false,
                created_by: None,
            };
            if name.get_ref() == "world" {
                if declared.ranks.len() as u32 != cluster.ranks {
                    return Err(self.error(
                        group.span(),
                        "the world group always holds every rank; leave its ranks out",
                    ));
                }
                groups[0] = declared;
            } else {
                names.groups.insert(name.get_ref().clone(), groups.len());
                groups.push(declared);
            }
        }
        Ok(groups)
    }

    fn op(
        &self,
        index: usize,
        raw_op: &Spanned<RawOp>,
        names: &Names,
        cluster: &Cluster,
        groups: &[Group],
        program: &mut ProgramBuilder,
    ) -> Result<Op> {
        let span = raw_op.span();
        let raw = raw_op.get_ref();
        let line = self.line_of(&span);

        let mut present: Vec<(&'static str, Range<usize>)> = Vec::new();
        macro_rules! note {
            ($($field:ident),*) => {$(
                if let Some(value) = &raw.$field {
                    present.push((stringify!($field), value.span()));
                }
            )*};
        }
        note!(
            all_reduce,
            all_gather,
            reduce_scatter,
            broadcast,
            all_to_all,
            send,
            recv,
            batch_isend_irecv,
            barrier,
            wait,
            is_completed,
            get_future,
            set_stream,
            record_event,
            wait_event,
            event_sync,
            stream_sync,
            device_sync,
            item,
            gemm,
            kernel,
            gpu_sleep_us,
            host_sleep_us,
            mark,
            functional_all_reduce,
            alloc,
            free,
            init_process_group,
            new_group
        );
        let key = match present.as_slice() {
            [] => {
                return Err(self.error(
                    span,
                    "this [[op]] names no operation; expected one of all_reduce, all_gather, reduce_scatter, broadcast, all_to_all, send, recv, batch_isend_irecv, barrier, wait, is_completed, get_future, set_stream, record_event, wait_event, event_sync, stream_sync, device_sync, item, gemm, kernel, gpu_sleep_us, host_sleep_us, mark, functional_all_reduce, alloc, free, init_process_group, new_group",
                ))
            }
            [(key, _)] => *key,
            [(first, _), (second, second_span), ..] => {
                return Err(self.error(
                    second_span.clone(),
                    format!("an [[op]] names exactly one operation, but this one has both {first} and {second}"),
                ))
            }
        };

        let mut allowed_modifiers: &[&str] = &[];
        let ranks = self.op_ranks(raw, names, cluster, groups)?;
        let label = raw.label.as_ref().map(|l| l.get_ref().clone());
        if let Some(label_value) = &raw.label {
            if program.labels.contains_key(label_value.get_ref()) {
                return Err(self.error(
                    label_value.span(),
                    format!(
                        "label {:?} is used twice; labels name one op",
                        label_value.get_ref()
                    ),
                ));
            }
            program.labels.insert(label_value.get_ref().clone(), index);
        }
        let stream = match &raw.stream {
            Some(name) => self.lookup(&names.streams, name, "stream", "[streams]")?,
            None => program.current_stream,
        };

        let kind = match key {
            "all_reduce" | "all_gather" | "reduce_scatter" | "broadcast" | "all_to_all" => {
                allowed_modifiers = &["async_op", "work", "group", "coalesce", "bucket", "catch"];
                let (collective, tensor_name) = match key {
                    "all_reduce" => (CollectiveKind::AllReduce, raw.all_reduce.as_ref()),
                    "all_gather" => (CollectiveKind::AllGather, raw.all_gather.as_ref()),
                    "reduce_scatter" => {
                        (CollectiveKind::ReduceScatter, raw.reduce_scatter.as_ref())
                    }
                    "broadcast" => (CollectiveKind::Broadcast, raw.broadcast.as_ref()),
                    "all_to_all" => (CollectiveKind::AllToAll, raw.all_to_all.as_ref()),
                    other => unreachable!("the arm lists {other} without its collective"),
                };
                let tensor_name = tensor_name.expect("the key was found present");
                let tensor = self.lookup(&names.tensors, tensor_name, "tensor", "[tensors]")?;
                let group = match &raw.group {
                    None => 0,
                    Some(name) => self.lookup(&names.groups, name, "group", "[groups]")?,
                };
                let (async_op, work) = self.async_work(raw, &ranks, program)?;
                let batch = match (&raw.coalesce, &raw.bucket) {
                    (Some(_), Some(bucket)) => return Err(self.error(
                        bucket.span(),
                        "coalesce and bucket are two ways to batch one list of tensors; choose one",
                    )),
                    (Some(flag), None) if *flag.get_ref() => Batch::Coalesced,
                    (None, Some(bucket)) => {
                        let cap_bytes = parse_size_bytes(bucket.get_ref())
                            .map_err(|message| self.error(bucket.span(), message))?;
                        if !(1..=1 << 40).contains(&cap_bytes) {
                            return Err(self.error(
                                bucket.span(),
                                format!(
                                    "bucket must be between 1 B and 1 TiB, found {cap_bytes} B"
                                ),
                            ));
                        }
                        Batch::Bucketed { cap_bytes }
                    }
                    _ => Batch::Each,
                };
                let batched =
                    raw.coalesce.as_ref().is_some_and(|c| *c.get_ref()) || raw.bucket.is_some();
                if batched && program.tensor_counts[tensor] < 2 {
                    let span = raw.coalesce.as_ref().map_or_else(
                        || raw.bucket.as_ref().expect("batched").span(),
                        |c| c.span(),
                    );
                    return Err(self.error(
                        span,
                        format!("coalesce and bucket apply to a list of tensors; give tensor {:?} a count = N > 1 in [tensors]", tensor_name.get_ref()),
                    ));
                }
                OpKind::Collective {
                    collective,
                    tensor,
                    group,
                    async_op,
                    work,
                    batch,
                    result: None,
                }
            }
            "send" | "recv" => {
                allowed_modifiers = &["async_op", "work", "peer", "catch"];
                let (collective, tensor_name) = if key == "send" {
                    (CollectiveKind::Send, raw.send.as_ref())
                } else {
                    (CollectiveKind::Recv, raw.recv.as_ref())
                };
                let tensor_name = tensor_name.expect("the key was found present");
                let tensor = self.lookup(&names.tensors, tensor_name, "tensor", "[tensors]")?;
                let group = self.pair_group(raw, span.clone(), &ranks, cluster, groups, program)?;
                let (async_op, work) = self.async_work(raw, &ranks, program)?;
                OpKind::Collective {
                    collective,
                    tensor,
                    group,
                    async_op,
                    work,
                    batch: Batch::Each,
                    result: None,
                }
            }
            "batch_isend_irecv" => {
                allowed_modifiers = &["group", "work", "catch"];
                let list = raw.batch_isend_irecv.as_ref().expect("present");
                let group = match &raw.group {
                    None => 0,
                    Some(name) => self.lookup(&names.groups, name, "group", "[groups]")?,
                };
                let members = &groups[group].ranks;
                if ranks.as_ref().is_some_and(|r| r != members) {
                    return Err(self.error(
                        raw.ranks.as_ref().map_or(list.span(), |r| r.span()),
                        "batch_isend_irecv runs on every rank of its group (each rank's peers are given by shift); leave ranks out",
                    ));
                }
                let transfers = self.p2p_transfers(
                    list,
                    members.len(),
                    names,
                    (&program.tensor_sizes, &program.tensor_counts),
                )?;
                let work = match &raw.work {
                    None => None,
                    Some(name) => {
                        self.program_work_name(name)?;
                        let work = program.works.intern(name.get_ref());
                        cover(&mut program.work_coverage, work, &ranks);
                        Some(work)
                    }
                };
                OpKind::BatchP2p {
                    group,
                    transfers,
                    work,
                }
            }
            "barrier" => {
                allowed_modifiers = &["async_op", "work", "group", "catch"];
                let group = match &raw.group {
                    None => 0,
                    Some(name) => self.lookup(&names.groups, name, "group", "[groups]")?,
                };
                if raw.barrier.as_ref().is_some_and(|b| !*b.get_ref()) {
                    return Err(self.error(
                        raw.barrier.as_ref().expect("present").span(),
                        "barrier = false is not an operation; write barrier = true or drop the op",
                    ));
                }
                let (async_op, work) = self.async_work(raw, &ranks, program)?;
                OpKind::Barrier {
                    group,
                    async_op,
                    work,
                }
            }
            "wait" | "is_completed" | "get_future" => {
                let name = match key {
                    "wait" => {
                        allowed_modifiers = &["timeout_ms", "catch"];
                        raw.wait.as_ref()
                    }
                    "get_future" => {
                        allowed_modifiers = &["then", "work"];
                        raw.get_future.as_ref()
                    }
                    _ => raw.is_completed.as_ref(),
                }
                .expect("the key was found present");
                self.program_work_name(name)?;
                let Some(work) = program.works.find(name.get_ref()) else {
                    return Err(self.error(
                        name.span(),
                        format!(
                            "{key} on Work {:?}, which no earlier collective creates; add work = {:?} to an async_op = true collective before it{}",
                            name.get_ref(),
                            name.get_ref(),
                            suggest::did_you_mean(
                                name.get_ref(),
                                (program.works.names.iter())
                                    .map(String::as_str)
                                    .filter(|name| !name.starts_with(FUNCTIONAL_WORK_PREFIX))
                            )
                        ),
                    ));
                };
                if let Some(rank) = uncovered(&program.work_coverage[work], &ranks, cluster.ranks) {
                    return Err(self.error(
                        name.span(),
                        format!(
                            "{key} on Work {:?} runs on {rank}, where no earlier op creates it",
                            name.get_ref()
                        ),
                    ));
                }
                if key == "wait" {
                    let timeout_ns = match &raw.timeout_ms {
                        None => None,
                        Some(ms) => Some(self.wait_timeout_ns(ms)?),
                    };
                    OpKind::Wait {
                        work,
                        timeout_ns,
                        previous_iteration: false,
                    }
                } else if key == "get_future" {
                    let callback = match &raw.then {
                        None => None,
                        Some(then) => {
                            let then = then.get_ref();
                            let shape = RawKernel {
                                us: then.us.clone(),
                                sms: then.sms.clone(),
                            };
                            let (duration_ns, sms) = self.kernel_shape(&shape, "then", cluster)?;
                            let stream =
                                self.lookup(&names.streams, &then.stream, "stream", "[streams]")?;
                            Some(Callback {
                                duration_ns,
                                sms,
                                stream,
                            })
                        }
                    };
                    let child = match (&raw.work, &callback) {
                        (None, _) => None,
                        (Some(name), None) => {
                            return Err(self.error(
                                name.span(),
                                "work = … names the future that then(…) returns; without then, get_future returns none to name",
                            ))
                        }
                        (Some(name), Some(_)) => {
                            self.program_work_name(name)?;
                            let child = program.works.intern(name.get_ref());
                            cover(&mut program.work_coverage, child, &ranks);
                            Some(child)
                        }
                    };
                    OpKind::GetFuture {
                        work,
                        callback,
                        child,
                    }
                } else {
                    OpKind::IsCompleted { work }
                }
            }
            "set_stream" => {
                let name = raw.set_stream.as_ref().expect("present");
                let stream = self.lookup(&names.streams, name, "stream", "[streams]")?;
                if raw.stream.is_some() {
                    return Err(self.error(
                        span,
                        "set_stream changes the current stream; it takes no stream = … of its own",
                    ));
                }
                program.current_stream = stream;
                OpKind::SetStream { stream }
            }
            "record_event" => {
                let name = raw.record_event.as_ref().expect("present");
                let event = program.events.intern(name.get_ref());
                cover(&mut program.event_coverage, event, &ranks);
                OpKind::RecordEvent { event }
            }
            "wait_event" | "event_sync" => {
                let name = if key == "wait_event" {
                    raw.wait_event.as_ref()
                } else {
                    raw.event_sync.as_ref()
                }
                .expect("present");
                let Some(event) = program.events.find(name.get_ref()) else {
                    return Err(self.error(
                        name.span(),
                        format!(
                            "{key} on event {:?}, which no earlier record_event records",
                            name.get_ref()
                        ),
                    ));
                };
                let recorded = &program.event_coverage[event];
                if let Some(rank) = uncovered(recorded, &ranks, cluster.ranks) {
                    return Err(self.error(
                        name.span(),
                        format!(
                            "{key} on event {:?} runs on {rank}, where no earlier record_event records it",
                            name.get_ref()
                        ),
                    ));
                }
                if key == "wait_event" {
                    OpKind::WaitEvent { event }
                } else {
                    OpKind::EventSync { event }
                }
            }
            "stream_sync" => {
                let name = raw.stream_sync.as_ref().expect("present");
                let stream = if name.get_ref() == "current" {
                    stream
                } else {
                    self.lookup(&names.streams, name, "stream", "[streams] (or \"current\")")?
                };
                OpKind::StreamSync { stream }
            }
            "device_sync" => {
                let flag = raw.device_sync.as_ref().expect("present");
                if !*flag.get_ref() {
                    return Err(self.error(
                        flag.span(),
                        "device_sync = false is not an operation; write device_sync = true or drop the op",
                    ));
                }
                OpKind::DeviceSync
            }
            "item" => {
                let name = raw.item.as_ref().expect("present");
                OpKind::Item {
                    tensor: self.lookup(&names.tensors, name, "tensor", "[tensors]")?,
                }
            }
            "alloc" | "free" => {
                let name = if key == "alloc" {
                    raw.alloc.as_ref()
                } else {
                    raw.free.as_ref()
                }
                .expect("present");
                let tensor = self.lookup(&names.tensors, name, "tensor", "[tensors]")?;
                if ranks.is_some() {
                    return Err(self.error(
                        name.span(),
                        format!("{key} runs on every rank; it takes no ranks = …"),
                    ));
                }
                if key == "alloc" {
                    OpKind::Alloc { tensor }
                } else {
                    OpKind::Free { tensor }
                }
            }
            "gemm" => {
                allowed_modifiers = &["dtype"];
                let shape = raw.gemm.as_ref().expect("present");
                let dims = shape.get_ref();
                if dims.len() != 3 || dims.iter().any(|&d| !(1..=1 << 20).contains(&d)) {
                    return Err(self.error(
                        shape.span(),
                        format!("gemm expects [m, n, k] with each between 1 and 1048576, found {dims:?}"),
                    ));
                }
                let dtype = self.dtype_or(raw.dtype.as_ref(), DType::Bf16)?;
                OpKind::Gemm {
                    m: dims[0] as u64,
                    n: dims[1] as u64,
                    k: dims[2] as u64,
                    dtype,
                }
            }
            "kernel" => {
                let kernel = raw.kernel.as_ref().expect("present").get_ref();
                let (duration_ns, sms) = self.kernel_shape(kernel, "kernel", cluster)?;
                OpKind::Kernel { duration_ns, sms }
            }
            "gpu_sleep_us" => OpKind::GpuSleep {
                duration_ns: self.time_us(
                    raw.gpu_sleep_us.as_ref().expect("present"),
                    "gpu_sleep_us",
                    false,
                )?,
            },
            "host_sleep_us" => OpKind::HostSleep {
                duration_ns: self.time_us(
                    raw.host_sleep_us.as_ref().expect("present"),
                    "host_sleep_us",
                    false,
                )?,
            },
            "mark" => {
                let name = raw.mark.as_ref().expect("present");
                if program.marks.find(name.get_ref()).is_some() {
                    return Err(self.error(
                        name.span(),
                        format!(
                            "mark {:?} is set twice; a mark names one point of the program",
                            name.get_ref()
                        ),
                    ));
                }
                OpKind::Mark {
                    mark: program.marks.intern(name.get_ref()),
                }
            }
            "functional_all_reduce" => {
                allowed_modifiers = &["group", "result", "catch"];
                self.functional_collective(raw, &ranks, cluster.ranks, names, program)?
            }
            "init_process_group" => {
                allowed_modifiers = &["device_id"];
                self.init_process_group_op(raw, index, &ranks, program)?
            }
            "new_group" => self.new_group_op(raw, index, &ranks, names, groups, program)?,
            _ => unreachable!("every operation key is matched above"),
        };

        macro_rules! check_modifier {
            ($($field:ident),*) => {$(
                if let Some(value) = &raw.$field {
                    if !allowed_modifiers.contains(&stringify!($field)) {
                        return Err(self.error(
                            value.span(),
                            format!("{} does not apply to {key}{}", stringify!($field), if allowed_modifiers.is_empty() { String::new() } else { format!(" (it takes {})", allowed_modifiers.join(", ")) }),
                        ));
                    }
                }
            )*};
        }
        check_modifier!(
            async_op, work, group, dtype, timeout_ms, result, coalesce, bucket, peer, then, catch,
            device_id
        );

        let resolve_tensors = |list: &Option<Vec<Spanned<String>>>| -> Result<Vec<TensorId>> {
            list.iter()
                .flatten()
                .map(|name| self.lookup(&names.tensors, name, "tensor", "[tensors]"))
                .collect()
        };
        Ok(Op {
            index,
            label,
            line,
            kind,
            stream,
            ranks,
            reads: resolve_tensors(&raw.reads)?,
            writes: resolve_tensors(&raw.writes)?,
            catch: raw.catch.as_ref().is_some_and(|catch| *catch.get_ref()),
        })
    }

    /// The ranks an op runs on (`None`: every rank): its `ranks`, and of those the members of
    /// its subgroup, as in PyTorch a non-member's call is a no-op.
    fn op_ranks(
        &self,
        raw: &RawOp,
        names: &Names,
        cluster: &Cluster,
        groups: &[Group],
    ) -> Result<Option<Vec<u32>>> {
        let mut ranks = match &raw.ranks {
            None => None,
            // Listing every rank is the same as listing none.
            Some(ranks) => Some(self.rank_list(ranks, cluster.ranks, "op ranks")?)
                .filter(|list| list.len() < cluster.ranks as usize),
        };
        // A collective of a subgroup runs only on its members: in PyTorch a non-member's call
        // is a no-op.
        if let Some(name) = &raw.group {
            let group = self.lookup(&names.groups, name, "group", "[groups]")?;
            if group != 0 && groups[group].ranks.len() < cluster.ranks as usize {
                let members = &groups[group].ranks;
                ranks = Some(match ranks {
                    None => members.clone(),
                    Some(list) => list.into_iter().filter(|r| members.contains(r)).collect(),
                });
                if ranks.as_ref().is_some_and(Vec::is_empty) {
                    return Err(self.error(
                        name.span(),
                        format!(
                            "no rank listed in ranks = … is a member of group {:?}",
                            name.get_ref()
                        ),
                    ));
                }
            }
        }
        Ok(ranks)
    }

    /// A kernel's `{ us, sms }` (every SM unless `sms` is given) under `key`.
    fn kernel_shape(&self, kernel: &RawKernel, key: &str, cluster: &Cluster) -> Result<(u64, u32)> {
        let duration_ns = self.time_us(&kernel.us, &format!("{key}.us"), false)?;
        let sms = match &kernel.sms {
            None => cluster.gpu.sms,
            Some(sms) => {
                self.count(sms, &format!("{key}.sms"), 1, i64::from(cluster.gpu.sms))? as u32
            }
        };
        Ok((duration_ns, sms))
    }

    /// The sends and receives of a `batch_isend_irecv` over a group of `size` ranks: each names
    /// one tensor, not a list (a `P2POp` takes one), and a `shift` that is not a multiple of the
    /// size, and every send by `k` has a receive by `−k` of the same size, so that the batch
    /// matches itself on every rank.
    fn p2p_transfers(
        &self,
        list: &Spanned<Vec<Spanned<RawP2p>>>,
        size: usize,
        names: &Names,
        (tensor_sizes, tensor_counts): (&[u64], &[u32]),
    ) -> Result<Vec<P2pTransfer>> {
        if list.get_ref().is_empty() {
            return Err(self.error(list.span(), "batch_isend_irecv needs at least one { send = …, shift = … } or { recv = …, shift = … }"));
        }
        let mut transfers = Vec::new();
        for entry in list.get_ref() {
            let raw = entry.get_ref();
            let (send, name) = match (&raw.send, &raw.recv) {
                (Some(name), None) => (true, name),
                (None, Some(name)) => (false, name),
                _ => {
                    return Err(self.error(
                        entry.span(),
                        "each transfer names exactly one of send = \"t\" or recv = \"t\"",
                    ))
                }
            };
            let shift = *raw.shift.get_ref();
            if shift.rem_euclid(size as i64) == 0 {
                return Err(self.error(
                    raw.shift.span(),
                    format!("shift {shift} points a rank at itself in a group of {size} ranks"),
                ));
            }
            let tensor = self.lookup(&names.tensors, name, "tensor", "[tensors]")?;
            if tensor_counts[tensor] != 1 {
                return Err(self.error(
                    name.span(),
                    format!(
                        "a P2POp takes one tensor, and {:?} is a list of {}",
                        name.get_ref(),
                        tensor_counts[tensor]
                    ),
                ));
            }
            transfers.push((
                entry.span(),
                P2pTransfer {
                    send,
                    tensor,
                    shift,
                },
            ));
        }
        for (span, transfer) in &transfers {
            let size_of = |t: &P2pTransfer| tensor_sizes[t.tensor];
            let sends = |t: &&P2pTransfer| {
                t.send == transfer.send
                    && t.shift == transfer.shift
                    && size_of(t) == size_of(transfer)
            };
            let matches = |t: &&P2pTransfer| {
                t.send != transfer.send
                    && t.shift == -transfer.shift
                    && size_of(t) == size_of(transfer)
            };
            let mine = transfers.iter().map(|(_, t)| t).filter(sends).count();
            let theirs = transfers.iter().map(|(_, t)| t).filter(matches).count();
            if mine != theirs {
                let (verb, other) = if transfer.send {
                    ("send", "recv")
                } else {
                    ("recv", "send")
                };
                return Err(self.error(
                    span.clone(),
                    format!(
                        "this {verb} by shift {} has no matching {other} by shift {} of the same size: the peer's batch, which is the same list, would never match it",
                        transfer.shift, -transfer.shift
                    ),
                ));
            }
        }
        Ok(transfers.into_iter().map(|(_, t)| t).collect())
    }

    /// `async_op = true` and the `work = "w"` it may name (R10, R11).
    fn async_work(
        &self,
        raw: &RawOp,
        ranks: &Option<Vec<u32>>,
        program: &mut ProgramBuilder,
    ) -> Result<(bool, Option<WorkId>)> {
        let async_op = raw.async_op.as_ref().is_some_and(|a| *a.get_ref());
        let work = match &raw.work {
            None => None,
            Some(name) => {
                if !async_op {
                    return Err(self.error(
                        name.span(),
                        "work = … needs async_op = true: a collective with async_op=False returns no Work (R11)",
                    ));
                }
                self.program_work_name(name)?;
                let work = program.works.intern(name.get_ref());
                cover(&mut program.work_coverage, work, ranks);
                Some(work)
            }
        };
        Ok((async_op, work))
    }

    /// The two-rank communicator ProcessGroupNCCL creates lazily for a send or receive between
    /// the op's one rank and its `peer` (R8: keyed by the pair, bootstrapped by the pair's first
    /// point-to-point op). Its index follows the declared groups.
    fn pair_group(
        &self,
        raw: &RawOp,
        span: Range<usize>,
        ranks: &Option<Vec<u32>>,
        cluster: &Cluster,
        groups: &[Group],
        program: &mut ProgramBuilder,
    ) -> Result<GroupId> {
        let key = if raw.send.is_some() { "send" } else { "recv" };
        let Some(peer) = &raw.peer else {
            return Err(self.error(
                span,
                format!(
                    "{key} needs peer = <rank>: the rank it {} (dist.{key}(t, {}))",
                    if key == "send" {
                        "sends to"
                    } else {
                        "receives from"
                    },
                    if key == "send" { "dst" } else { "src" }
                ),
            ));
        };
        let own = match ranks.as_deref() {
            Some([own]) => *own,
            _ => {
                return Err(self.error(
                    raw.ranks.as_ref().map_or(span, |r| r.span()),
                    format!("{key} runs on one rank: give it ranks = [r] (and the other side its matching {} on the peer)", if key == "send" { "recv" } else { "send" }),
                ))
            }
        };
        let peer_rank = *peer.get_ref();
        if peer_rank < 0 || peer_rank >= i64::from(cluster.ranks) {
            return Err(self.error(
                peer.span(),
                format!(
                    "peer: rank {peer_rank} does not exist (cluster.ranks = {}, ranks are 0..{})",
                    cluster.ranks,
                    cluster.ranks - 1
                ),
            ));
        }
        if peer_rank == i64::from(own) {
            return Err(self.error(
                peer.span(),
                format!("peer must be another rank than the op's own rank {own}"),
            ));
        }
        let pair = (own.min(peer_rank as u32), own.max(peer_rank as u32));
        let position = match program.pairs.iter().position(|&p| p == pair) {
            Some(position) => position,
            None => {
                program.pairs.push(pair);
                program.pairs.len() - 1
            }
        };
        Ok(groups.len() + position)
    }

    fn perturbations(
        &self,
        raw: &[Spanned<RawPerturb>],
        program: &ProgramBuilder,
        cluster: &Cluster,
        repeat: u32,
    ) -> Result<Vec<Perturbation>> {
        raw.iter()
            .map(|perturb| {
                let p = perturb.get_ref();
                let before_op = *program.labels.get(p.before.get_ref()).ok_or_else(|| {
                    self.error(
                        p.before.span(),
                        format!(
                            "perturb.before names label {:?}, which no op has{}",
                            p.before.get_ref(),
                            suggest::did_you_mean(
                                p.before.get_ref(),
                                program.labels.keys().map(String::as_str)
                            )
                        ),
                    )
                })?;
                let host_delay = match &p.host_delay_us {
                    None => Delay::NONE,
                    Some(value) => self.delay(value, "perturb.host_delay_us")?,
                };
                let gpu_delay = match &p.gpu_delay_us {
                    None => Delay::NONE,
                    Some(value) => self.delay(value, "perturb.gpu_delay_us")?,
                };
                if host_delay.is_none() && gpu_delay.is_none() {
                    // A key given as 0 is in range; a perturb whose every delay is 0 does nothing.
                    let given = p.host_delay_us.as_ref().or(p.gpu_delay_us.as_ref());
                    return Err(match given {
                        None => self.error(
                            perturb.span(),
                            "a [[perturb]] needs host_delay_us or gpu_delay_us",
                        ),
                        Some(value) => self.error(
                            value.span(),
                            "a [[perturb]] whose delays are all 0 does nothing: give host_delay_us or gpu_delay_us a delay above 0, or remove the [[perturb]]",
                        ),
                    });
                }
                let iterations = match &p.iterations {
                    None => None,
                    Some(list) => {
                        let mut iterations = Vec::new();
                        for &iteration in list.get_ref() {
                            if iteration < 0 || iteration >= i64::from(repeat) {
                                return Err(self.error(
                                    list.span(),
                                    format!(
                                        "iteration {iteration} does not exist (repeat = {repeat})"
                                    ),
                                ));
                            }
                            iterations.push(iteration as u32);
                        }
                        Some(iterations)
                    }
                };
                let op = &program.ops[before_op];
                Ok(Perturbation {
                    ranks: self.ranks_running(&p.ranks, op, &p.before, cluster, "perturb.ranks")?,
                    before_op,
                    host_delay,
                    gpu_delay,
                    iterations,
                })
            })
            .collect()
    }

    /// A delay in µs: a number, or one distribution as a table:
    /// `{ normal = { mean = 200, std = 50 } }`, `lognormal` (mean, std), `exponential` (mean),
    /// `gamma` (shape, scale), `uniform` (min, max).
    fn delay(&self, value: &Spanned<toml::Value>, what: &str) -> Result<Delay> {
        let expected = "a number of µs, or one of { normal = { mean, std } }, { lognormal = { mean, std } }, { exponential = { mean } }, { gamma = { shape, scale } }, { uniform = { min, max } }";
        let fail = |message: String| self.error(value.span(), format!("{what}: {message}"));
        let table = match value.get_ref() {
            toml::Value::Integer(_) | toml::Value::Float(_) => {
                let us = value
                    .get_ref()
                    .as_float()
                    .or_else(|| value.get_ref().as_integer().map(|i| i as f64))
                    .expect("a number");
                let ns = self.time_us(&Spanned::new(value.span(), us), what, true)?;
                return Ok(Delay::Fixed { ns });
            }
            toml::Value::Table(table) if table.len() == 1 => table,
            other => return Err(fail(format!("expected {expected}, found {other}"))),
        };
        let (name, params) = table.iter().next().expect("one entry");
        let toml::Value::Table(params) = params else {
            return Err(fail(format!(
                "{name} takes a table of parameters, found {params}"
            )));
        };
        let wanted: &[&str] = match name.as_str() {
            "normal" | "lognormal" => &["mean", "std"],
            "exponential" => &["mean"],
            "gamma" => &["shape", "scale"],
            "uniform" => &["min", "max"],
            other => {
                return Err(fail(format!(
                    "unknown distribution {other:?}; expected {expected}"
                )))
            }
        };
        if let Some(key) = params.keys().find(|k| !wanted.contains(&k.as_str())) {
            return Err(fail(format!(
                "{name} takes {}, not {key:?}",
                wanted.join(" and ")
            )));
        }
        let param = |key: &str| -> Result<f64> {
            match params.get(key) {
                Some(toml::Value::Float(f)) => Ok(*f),
                Some(toml::Value::Integer(i)) => Ok(*i as f64),
                _ => Err(fail(format!("{name} needs {key} = <number>"))),
            }
        };
        let us = 1_000.0;
        let delay = match name.as_str() {
            "normal" => Delay::Normal {
                mean_ns: param("mean")? * us,
                std_ns: param("std")? * us,
            },
            "lognormal" => Delay::LogNormal {
                mean_ns: param("mean")? * us,
                std_ns: param("std")? * us,
            },
            "exponential" => Delay::Exponential {
                mean_ns: param("mean")? * us,
            },
            "gamma" => Delay::Gamma {
                shape: param("shape")?,
                scale_ns: param("scale")? * us,
            },
            _ => Delay::Uniform {
                min_ns: param("min")? * us,
                max_ns: param("max")? * us,
            },
        };
        delay
            .validate()
            .map_err(|message| fail(format!("{name}: {message}")))?;
        Ok(delay)
    }

    fn measures(
        &self,
        raw: &[Spanned<RawMeasure>],
        program: &ProgramBuilder,
    ) -> Result<Vec<Measure>> {
        let mut measures: Vec<Measure> = Vec::new();
        for measure in raw {
            let m = measure.get_ref();
            if measures.iter().any(|other| &other.name == m.name.get_ref()) {
                return Err(self.error(
                    m.name.span(),
                    format!("measure {:?} is declared twice", m.name.get_ref()),
                ));
            }
            let mark = |name: &Spanned<String>| {
                program.marks.find(name.get_ref()).ok_or_else(|| {
                    self.error(
                        name.span(),
                        format!(
                            "unknown mark {:?}; expected one set by a mark = … op ({}){}",
                            name.get_ref(),
                            if program.marks.names.is_empty() {
                                "the program sets none".to_string()
                            } else {
                                format!("known: {}", program.marks.names.join(", "))
                            },
                            suggest::did_you_mean(
                                name.get_ref(),
                                program.marks.names.iter().map(String::as_str)
                            )
                        ),
                    )
                })
            };
            let clock = match &m.clock {
                None => Clock::Gpu,
                Some(clock) => match clock.get_ref().as_str() {
                    "gpu" => Clock::Gpu,
                    "host" => Clock::Host,
                    other => {
                        return Err(self.error(
                            clock.span(),
                            format!("unknown clock {other:?}; expected \"gpu\" or \"host\""),
                        ))
                    }
                },
            };
            let from = mark(&m.from)?;
            let to = mark(&m.to)?;
            if to == from {
                return Err(self.error(
                    m.to.span(),
                    format!(
                        "measure {:?} starts and ends at the same mark",
                        m.name.get_ref()
                    ),
                ));
            }
            measures.push(Measure {
                name: m.name.get_ref().clone(),
                from,
                to,
                clock,
            });
        }
        Ok(measures)
    }

    fn overlap(
        &self,
        spanned: &Spanned<RawOverlap>,
        measures: &[Measure],
        marks: &[String],
    ) -> Result<OverlapSpec> {
        let raw = spanned.get_ref();
        let find = |name: &Spanned<String>| {
            measures
                .iter()
                .position(|m| &m.name == name.get_ref())
                .ok_or_else(|| {
                    self.error(
                        name.span(),
                        format!(
                            "unknown measure {:?}; overlap names three [[measure]]s{}",
                            name.get_ref(),
                            suggest::did_you_mean(
                                name.get_ref(),
                                measures.iter().map(|m| m.name.as_str())
                            )
                        ),
                    )
                })
        };
        let name = raw
            .name
            .as_ref()
            .map_or_else(|| "overlap".to_string(), |n| n.get_ref().clone());
        let roles = [
            ("compute", find(&raw.compute)?),
            ("comm", find(&raw.comm)?),
            ("both", find(&raw.both)?),
        ];
        // R3 compares a compute phase and a communication phase timed alone with the two timed
        // together: one span in two roles makes the score say nothing of overlap (all three the
        // same read 1.000, a perfect overlap).
        for (position, &(role, first)) in roles.iter().enumerate() {
            for &(other_role, second) in &roles[position + 1..] {
                let (a, b) = (&measures[first], &measures[second]);
                if (a.from, a.to, a.clock) != (b.from, b.to, b.clock) {
                    continue;
                }
                let which = if first == second {
                    format!("{:?}", a.name)
                } else {
                    let clock = match a.clock {
                        Clock::Gpu => "gpu",
                        Clock::Host => "host",
                    };
                    format!(
                        "{:?} and {:?} both time {} to {} on the {clock} clock",
                        a.name, b.name, marks[a.from], marks[a.to]
                    )
                };
                return Err(self.error(
                    spanned.span(),
                    format!(
                        "overlap {name:?}: {role} and {other_role} are the same measure ({which}); \
                         an overlap compares a compute phase and a communication phase each timed \
                         alone (compute, comm) with the two timed together (both), R3's \
                         (t_compute + t_comm - t_both) / min(t_compute, t_comm), so it needs three \
                         measures of different spans"
                    ),
                ));
            }
        }
        Ok(OverlapSpec {
            name,
            compute: roles[0].1,
            comm: roles[1].1,
            both: roles[2].1,
        })
    }
}

/// The entries of a TOML table in the order the file declares them (a `BTreeMap` sorts them by
/// name; the keys' spans give the file's order back).
fn in_file_order<V>(table: Option<&BTreeMap<Spanned<String>, V>>) -> Vec<(&Spanned<String>, &V)> {
    let mut entries: Vec<(&Spanned<String>, &V)> = table.into_iter().flatten().collect();
    entries.sort_by_key(|(key, _)| key.span().start);
    entries
}

#[derive(Default)]
struct Interner {
    names: Vec<String>,
    index: HashMap<String, usize>,
}

impl Interner {
    fn intern(&mut self, name: &str) -> usize {
        if let Some(&id) = self.index.get(name) {
            return id;
        }
        self.names.push(name.to_string());
        self.index.insert(name.to_string(), self.names.len() - 1);
        self.names.len() - 1
    }

    fn find(&self, name: &str) -> Option<usize> {
        self.index.get(name).copied()
    }
}

#[derive(Default)]
struct ProgramBuilder {
    ops: Vec<Op>,
    labels: HashMap<String, usize>,
    works: Interner,
    events: Interner,
    marks: Interner,
    current_stream: StreamId,
    /// Per Work name: the ranks on which an earlier collective creates it.
    work_coverage: Vec<Coverage>,
    /// Per event name: the ranks on which an earlier op records it.
    event_coverage: Vec<Coverage>,
    /// `count` of each tensor, for batched collectives (R25).
    tensor_counts: Vec<u32>,
    /// Size of each tensor, to match a batch's sends with its receives.
    tensor_sizes: Vec<u64>,
    /// Element type of each tensor, for a functional collective's result (R30).
    tensor_dtypes: Vec<DType>,
    /// Functional collectives whose result no op has read yet (R30).
    pending_results: Vec<faults::PendingResult>,
    /// Rank pairs with a point-to-point communicator, in order of first use (their groups
    /// follow the declared ones).
    pairs: Vec<(u32, u32)>,
    /// The program has an `init_process_group` op somewhere (found before resolving ops).
    init_planned: bool,
    /// Groups a `new_group` op creates somewhere (found before resolving ops).
    created_planned: std::collections::BTreeSet<GroupId>,
    /// The `init_process_group` op resolved so far.
    init_op: Option<usize>,
    /// The `new_group` op of each group resolved so far.
    created: BTreeMap<GroupId, usize>,
}

impl ProgramBuilder {
    /// Puts `op` at its `index`, moving the ops from there on, and what names them, one
    /// place on.
    fn insert_op(&mut self, op: Op) {
        let at = op.index;
        self.ops.insert(at, op);
        for (index, op) in self.ops.iter_mut().enumerate().skip(at + 1) {
            op.index = index;
        }
        let named = (self.labels.values_mut())
            .chain(self.init_op.iter_mut())
            .chain(self.created.values_mut());
        for index in named.filter(|index| **index >= at) {
            *index += 1;
        }
    }
}

/// The ranks on which a name has been defined so far.
#[derive(Clone)]
enum Coverage {
    Every,
    Some(std::collections::BTreeSet<u32>),
}

fn cover(coverage: &mut Vec<Coverage>, id: usize, ranks: &Option<Vec<u32>>) {
    if coverage.len() <= id {
        coverage.resize(id + 1, Coverage::Some(Default::default()));
    }
    match (ranks, &mut coverage[id]) {
        (None, slot) => *slot = Coverage::Every,
        (Some(_), Coverage::Every) => {}
        (Some(list), Coverage::Some(set)) => set.extend(list.iter().copied()),
    }
}

/// Describes a rank of `ranks` (all `rank_count` ranks when `None`) that `coverage` lacks: a
/// name that different ops define on different ranks (`w = isend(...)` on one, `w =
/// irecv(...)` on the other) covers every rank that defines it.
fn uncovered(coverage: &Coverage, ranks: &Option<Vec<u32>>, rank_count: u32) -> Option<String> {
    let Coverage::Some(set) = coverage else {
        return None;
    };
    if set.is_empty() && ranks.is_none() {
        return Some("every rank".to_string());
    }
    let lacks = |rank: &u32| !set.contains(rank);
    match ranks {
        Some(list) => list.iter().copied().find(lacks),
        None => (0..rank_count).find(lacks),
    }
    .map(|rank| format!("rank {rank}"))
}
/// Every tensor an op names: its declared reads and writes, and those of its kind (a
/// functional collective's result too).
fn op_tensors(op: &Op) -> impl Iterator<Item = TensorId> + '_ {
    let of_kind: Vec<TensorId> = match &op.kind {
        OpKind::Collective { tensor, result, .. } => {
            std::iter::once(*tensor).chain(*result).collect()
        }
        OpKind::BatchP2p { transfers, .. } => transfers.iter().map(|t| t.tensor).collect(),
        OpKind::Item { tensor } | OpKind::Alloc { tensor } | OpKind::Free { tensor } => {
            vec![*tensor]
        }
        _ => Vec::new(),
    };
    (op.reads.iter().chain(&op.writes).copied()).chain(of_kind)
}
