//! Machine profiles and their calibration from measured Timelines (`c10dsim calibrate`,
//! docs/diff.md).
//!
//! A profile is a TOML file of a machine's parameters under the scenario's own keys (`[host]`
//! costs of each call kind (R1), `[network]` α and bandwidth (R24), `[cluster]` GPU rates), plus a
//! `[profile]` table naming it and its sources. [`apply_profile`] writes it into a scenario's
//! text before the scenario is parsed, so `sim` stays free of files.
//!
//! [`calibrate`] fits the parameters to measured runs with robust estimators: medians of
//! per-op medians for host costs (R1, R12, R14), the ratio of FLOPs to duration for GEMM rates,
//! and a relative least-squares line `t = steps·α + volume/B` through the real multi-rank
//! collectives' kernel times (R24). Each fitted value comes with its residual.
//!
//! Here: profiles (parse, write into a scenario, render) and the held-out validation; the fit is
//! in `calibrate/fit.rs` (the network's in `calibrate/network.rs`, which `import kineto` reuses),
//! the unit tests in `calibrate/tests.rs`.

use serde::Serialize;
use sim::scenario::{Override, TorchProfile};
use sim::timeline::Timeline;
use std::collections::BTreeMap;
use std::fmt::{self, Write as _};

mod fit;
mod network;
use fit::median;
pub use fit::{
    calibrate, check_pairing, nothing_to_fit, render_fitted, runs_per_gpu, Calibration,
    CalibrationRun, FittedValue,
};
pub use network::{fit_bandwidth_given_alpha, fit_network, CollectivePoint};

/// The keys a profile may set, by table.
pub const PROFILE_KEYS: [(&str, &[&str]); 5] = [
    (
        "cluster",
        &[
            "gpu",
            "sms",
            "bf16_tflops",
            "fp32_tflops",
            "gemm_efficiency",
            "boost_ms",
            "sustained_clock",
            "rank_speed_spread_pct",
            "gemm_tile_m",
            "gemm_tile_n",
        ],
    ),
    (
        "network",
        &[
            "nvlink_gbps",
            "nic_gbps",
            "alpha_us",
            "nic_alpha_us",
            "kernel_floor_us",
            "self_copy_gbps",
            "algorithm",
            "nccl_ll_launch_us",
            "nccl_ll128_launch_us",
            "nccl_simple_launch_us",
            "nccl_ll_wire_efficiency",
            "nccl_ll128_wire_efficiency",
            "nccl_simple_wire_efficiency",
        ],
    ),
    (
        "host",
        &[
            "collective_us",
            "collective_tail_us",
            "collective_enqueue_us",
            "op_gap_us",
            "collective_cold_us",
            "sync_collective_us",
            "collective_warm_within_us",
            "collective_cold_after_us",
            "wait_us",
            "launch_us",
            "first_gemm_us",
            "launch_latency_us",
            "nccl_launch_latency_us",
            "stream_wait_latency_us",
            "event_us",
            "coalesced_call_us",
            "sync_us",
            "item_us",
            "mark_us",
            "query_us",
            "watchdog_stack_trace_us",
            "comm_abort_us",
            "flight_recorder_dump_us",
            "comm_init_us",
            "comm_init_next_us",
            "init_process_group_us",
            "new_group_us",
            "launch_queue_depth",
        ],
    ),
    ("memory", &["alloc_us", "malloc_us", "free_us"]),
    // What the machine's NCCL is run with (a machine may keep NVLink SHARP off).
    ("env", &["NCCL_NVLS_ENABLE"]),
];

/// Number keys the scenario takes as integers (written without a fraction).
const INTEGER_KEYS: [&str; 4] = [
    "cluster.sms",
    "cluster.gemm_tile_m",
    "cluster.gemm_tile_n",
    "host.launch_queue_depth",
];

/// Keys whose values are strings; every other key holds a number ≥ 0.
const STRING_KEYS: [&str; 3] = ["cluster.gpu", "network.algorithm", "env.NCCL_NVLS_ENABLE"];

/// A machine profile: what it is, where its figures come from, and the values by dotted key
/// (`host.wait_us`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Profile {
    pub name: String,
    pub about: String,
    pub sources: Vec<String>,
    pub values: BTreeMap<String, ProfileValue>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum ProfileValue {
    Number(f64),
    Text(String),
}

impl fmt::Display for ProfileValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProfileValue::Number(value) => write!(f, "{}", toml_edit::Value::from(*value)),
            ProfileValue::Text(text) => write!(f, "{}", toml_edit::Value::from(text.as_str())),
        }
    }
}

/// A bad profile or scenario text: at a position of a file (`file:line:column: error: …`,
/// shown as scenario errors are), or of the text as a whole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProfileError {
    At(sim::scenario::ScenarioError),
    Whole(String),
}

impl fmt::Display for ProfileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProfileError::At(error) => error.fmt(f),
            ProfileError::Whole(message) => f.write_str(message),
        }
    }
}

impl std::error::Error for ProfileError {}

fn error_at(
    path: &str,
    text: &str,
    span: Option<std::ops::Range<usize>>,
    message: String,
) -> ProfileError {
    ProfileError::At(sim::scenario::error_at(
        path,
        text,
        span.unwrap_or(0..0),
        message,
    ))
}

/// The tables a profile may hold, as its errors list them: `[profile], [cluster], …`.
pub fn profile_tables() -> String {
    std::iter::once("profile")
        .chain(PROFILE_KEYS.iter().map(|(table, _)| *table))
        .map(|table| format!("[{table}]"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Parses and validates a profile; errors name `path:line:column`.
pub fn parse_profile(path: &str, text: &str) -> Result<Profile, ProfileError> {
    let document = toml_edit::Document::parse(text).map_err(|e| {
        error_at(
            path,
            text,
            e.span(),
            format!("not valid TOML: {}", e.message().trim()),
        )
    })?;
    let mut profile = Profile::default();
    for (table_name, item) in document.as_table().iter() {
        let (key, _) = document
            .as_table()
            .get_key_value(table_name)
            .expect("iterated keys exist");
        let Some(table) = item.as_table() else {
            return Err(error_at(
                path,
                text,
                key.span(),
                format!("{table_name:?} must be a table ({})", profile_tables()),
            ));
        };
        if table_name == "profile" {
            for (name, value) in table.iter() {
                let (key, _) = table.get_key_value(name).expect("iterated keys exist");
                let span = value.span().or(key.span());
                match (name, value.as_value()) {
                    ("name", Some(toml_edit::Value::String(s))) => profile.name = s.value().clone(),
                    ("about", Some(toml_edit::Value::String(s))) => {
                        profile.about = s.value().clone()
                    }
                    ("sources", Some(toml_edit::Value::Array(list))) => {
                        for entry in list.iter() {
                            let Some(source) = entry.as_str() else {
                                return Err(error_at(
                                    path,
                                    text,
                                    entry.span(),
                                    "profile.sources holds strings".into(),
                                ));
                            };
                            profile.sources.push(source.to_string());
                        }
                    }
                    ("name" | "about", _) => {
                        return Err(error_at(
                            path,
                            text,
                            span,
                            format!("profile.{name} must be a string"),
                        ))
                    }
                    ("sources", _) => {
                        return Err(error_at(
                            path,
                            text,
                            span,
                            "profile.sources must be a list of strings".into(),
                        ))
                    }
                    _ => {
                        return Err(error_at(
                            path,
                            text,
                            key.span(),
                            format!("unknown key profile.{name}; expected name, about, sources"),
                        ))
                    }
                }
            }
            continue;
        }
        let Some((_, allowed)) = PROFILE_KEYS.iter().find(|(name, _)| *name == table_name) else {
            return Err(error_at(
                path,
                text,
                key.span(),
                format!(
                    "unknown table [{table_name}]; expected {}",
                    profile_tables()
                ),
            ));
        };
        for (name, value) in table.iter() {
            let (key, _) = table.get_key_value(name).expect("iterated keys exist");
            let dotted = format!("{table_name}.{name}");
            if !allowed.contains(&name) {
                return Err(error_at(
                    path,
                    text,
                    key.span(),
                    match sim::scenario::nearest(name, allowed.iter().copied()) {
                        Some(near) => format!("unknown key {dotted}; did you mean {near:?}?"),
                        None => format!(
                            "unknown key {dotted}; [{table_name}] takes {}",
                            allowed.join(", ")
                        ),
                    },
                ));
            }
            let span = value.span().or(key.span());
            let parsed = match value.as_value() {
                Some(toml_edit::Value::String(s)) if STRING_KEYS.contains(&dotted.as_str()) => {
                    ProfileValue::Text(s.value().clone())
                }
                Some(toml_edit::Value::Float(x)) if !STRING_KEYS.contains(&dotted.as_str()) => {
                    ProfileValue::Number(*x.value())
                }
                Some(toml_edit::Value::Integer(x)) if !STRING_KEYS.contains(&dotted.as_str()) => {
                    ProfileValue::Number(*x.value() as f64)
                }
                _ if STRING_KEYS.contains(&dotted.as_str()) => {
                    return Err(error_at(
                        path,
                        text,
                        span,
                        format!("{dotted} must be a string"),
                    ))
                }
                _ => {
                    return Err(error_at(
                        path,
                        text,
                        span,
                        format!("{dotted} must be a number"),
                    ))
                }
            };
            if let ProfileValue::Number(x) = parsed {
                if !(x.is_finite() && x >= 0.0) {
                    return Err(error_at(
                        path,
                        text,
                        span,
                        format!("{dotted} must be ≥ 0, found {x}"),
                    ));
                }
            }
            profile.values.insert(dotted, parsed);
        }
    }
    Ok(profile)
}

/// How a profile meets a scenario's own values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProfileMode {
    /// The scenario's keys win; the profile fills the rest (`machine = "…"` in the scenario).
    FillUnset,
    /// The profile's keys win (`--machine`: predict this scenario on that machine).
    Replace,
}

/// The top-level `machine = "…"` of a scenario's text, with its byte span (key to value).
pub fn machine_reference(
    path: &str,
    text: &str,
) -> Result<Option<(String, std::ops::Range<usize>)>, ProfileError> {
    let Ok(document) = toml_edit::Document::parse(text) else {
        // The scenario parser reports bad TOML with its own position.
        return Ok(None);
    };
    let Some((key, item)) = document.as_table().get_key_value("machine") else {
        return Ok(None);
    };
    let Some(name) = item.as_str() else {
        return Err(error_at(
            path,
            text,
            item.span().or(key.span()),
            "machine must be a string: a profile file or a name in profiles/".into(),
        ));
    };
    let start = key.span().map_or(0, |s| s.start);
    let end = item.span().map_or(start, |s| s.end);
    Ok(Some((name.to_string(), start..end)))
}

/// Whether a scenario can run on `profile`: its values together pass the checks every scenario
/// applies (a synchronous call that covers the parts after the Work's creation, …). A fit can
/// break one by fitting a value against an unfitted prior's. The reason, if not.
pub fn check_usable(profile: &Profile) -> Result<(), String> {
    const ANY_PROGRAM: &str = "[[op]]\nmark = \"a\"\n";
    let text =
        apply_profile(ANY_PROGRAM, profile, ProfileMode::Replace).map_err(|e| e.to_string())?;
    sim::scenario::parse("profile", &text)
        .map(|_| ())
        .map_err(|error| error.message)
}

/// The keys a reason of [`check_usable`] names whose values the calibration did not fit: the
/// prior's, kept in the profile.
pub fn unfitted_keys_named(reason: &str, calibration: &Calibration) -> Vec<String> {
    let part_of_name = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '.';
    let names = |key: &str| {
        reason.match_indices(key).any(|(at, _)| {
            !reason[..at].ends_with(part_of_name)
                && !reason[at + key.len()..].starts_with(part_of_name)
        })
    };
    calibration
        .profile
        .values
        .keys()
        .filter(|key| !calibration.fitted.iter().any(|f| &f.key == *key))
        .filter(|key| names(key))
        .cloned()
        .collect()
}

/// Writes a profile's values into a scenario's text. The `machine` key is blanked (spaces keep
/// every other line and column where they were); keys are set per `mode`.
pub fn apply_profile(
    text: &str,
    profile: &Profile,
    mode: ProfileMode,
) -> Result<String, ProfileError> {
    let mut text = text.to_string();
    if let Some((_, span)) = machine_reference("", &text)? {
        text.replace_range(span.clone(), &" ".repeat(span.len()));
    }
    let mut document: toml_edit::DocumentMut =
        text.parse().map_err(|e: toml_edit::TomlError| {
            ProfileError::Whole(format!(
                "the scenario is not valid TOML: {}",
                e.message().trim()
            ))
        })?;
    for (dotted, value) in &profile.values {
        let (table_name, key) = dotted.split_once('.').expect("profile keys are dotted");
        let table = document
            .as_table_mut()
            .entry(table_name)
            .or_insert_with(|| toml_edit::Item::Table(toml_edit::Table::new()));
        let Some(table) = table.as_table_like_mut() else {
            return Err(ProfileError::Whole(format!(
                "the scenario's {table_name:?} is not a table"
            )));
        };
        if mode == ProfileMode::FillUnset && table.contains_key(key) {
            continue;
        }
        let value = match value {
            ProfileValue::Number(x) if INTEGER_KEYS.contains(&dotted.as_str()) => {
                toml_edit::Value::from(x.round() as i64)
            }
            ProfileValue::Number(x) => toml_edit::Value::from(*x),
            ProfileValue::Text(s) => toml_edit::Value::from(s.as_str()),
        };
        table.insert(key, toml_edit::Item::Value(value));
    }
    clamp_collective_tail(&mut document, profile);
    Ok(document.to_string())
}

/// `host.collective_us` and `host.collective_tail_us` the scenario does not set (R10).
const DEFAULT_COLLECTIVE_US: f64 = 30.0;
const DEFAULT_COLLECTIVE_TAIL_US: f64 = 10.0;

/// The tail is a part of every collective call, after the enqueue (R10a): a profile that fits
/// a call's cost or the enqueue but no tail (a run where no NCCL kernel started inside the
/// call) lowers the scenario's tail (its own or the default) to what the shortest call leaves
/// after the enqueue, rather than leave a scenario the parser refuses. The costs are those the
/// scenario runs with once the profile is written into it: its own where they win.
fn clamp_collective_tail(document: &mut toml_edit::DocumentMut, profile: &Profile) {
    const PARTS_AND_CALLS: [&str; 4] = [
        "host.collective_us",
        "host.sync_collective_us",
        "host.collective_cold_us",
        "host.collective_enqueue_us",
    ];
    if profile.values.contains_key("host.collective_tail_us")
        || !PARTS_AND_CALLS
            .iter()
            .any(|key| profile.values.contains_key(*key))
    {
        return;
    }
    let Some(host) = document
        .get_mut("host")
        .and_then(toml_edit::Item::as_table_like_mut)
    else {
        return;
    };
    // In whole nanoseconds, as the parser reads and compares them: a call and an enqueue
    // finer than that round apart, and only their rounded difference fits.
    let ns = |key: &str, default_us: f64| {
        let us = host
            .get(key)
            .and_then(|item| item.as_float().or(item.as_integer().map(|i| i as f64)));
        sim::units::us_to_ns(us.unwrap_or(default_us))
    };
    let collective_ns = ns("collective_us", DEFAULT_COLLECTIVE_US);
    // A synchronous or cold call costs a warm async one's unless set (scenario-format.md).
    let shortest_call_ns = ["sync_collective_us", "collective_cold_us"]
        .iter()
        .map(|key| ns(key, collective_ns as f64 / 1e3))
        .fold(collective_ns, u64::min);
    let enqueue_ns = ns("collective_enqueue_us", 0.0);
    let tail_ns = ns("collective_tail_us", DEFAULT_COLLECTIVE_TAIL_US);
    if enqueue_ns + tail_ns > shortest_call_ns && enqueue_ns <= shortest_call_ns {
        let lowered_us = (shortest_call_ns - enqueue_ns) as f64 / 1e3;
        host.insert(
            "collective_tail_us",
            toml_edit::Item::Value(toml_edit::Value::from(lowered_us)),
        );
    }
}

/// A profile as TOML, each fitted value followed by its residual as a comment.
pub fn render_profile(profile: &Profile, fitted: &[FittedValue]) -> String {
    let mut out = String::from("[profile]\n");
    let _ = writeln!(
        out,
        "name = {}",
        toml_edit::Value::from(profile.name.as_str())
    );
    let _ = writeln!(
        out,
        "about = {}",
        toml_edit::Value::from(profile.about.as_str())
    );
    out.push_str("sources = [\n");
    for source in &profile.sources {
        let _ = writeln!(out, "    {},", toml_edit::Value::from(source.as_str()));
    }
    out.push_str("]\n");
    for (table, keys) in PROFILE_KEYS {
        let present: Vec<&&str> = keys
            .iter()
            .filter(|k| profile.values.contains_key(&format!("{table}.{k}")))
            .collect();
        if present.is_empty() {
            continue;
        }
        let _ = writeln!(out, "\n[{table}]");
        for key in present {
            let dotted = format!("{table}.{key}");
            match &profile.values[&dotted] {
                ProfileValue::Number(x) if INTEGER_KEYS.contains(&dotted.as_str()) => {
                    let _ = write!(out, "{key} = {}", x.round() as i64);
                }
                value => {
                    let _ = write!(out, "{key} = {value}");
                }
            }
            match fitted.iter().find(|f| f.key == dotted) {
                Some(f) => {
                    let plural = if f.samples == 1 { "" } else { "s" };
                    let _ = writeln!(
                        out,
                        "  # fitted to {} sample{plural}, residual {}",
                        f.samples, f.residual
                    );
                }
                None => out.push('\n'),
            }
        }
    }
    out
}
/// What the simulation of a measured run needs to be the program PyTorch ran: the ProcessGroupNCCL
/// variables the torch engine sets for its own measurement (`machine.env`) that the simulator
/// models, and the behaviour profile of the PyTorch version that ran (`machine.torch`,
/// [`TorchProfile::of_release`]), whatever profile the scenario itself names. Under
/// `TORCH_NCCL_ENABLE_TIMING` a Work's start event is recorded before NCCL enqueues its kernel,
/// and PyTorch's duration (what the torch engine reports as the kernel's) runs from it (R6).
pub fn measurement_overrides(run: &Timeline) -> Vec<Override> {
    const MODELLED: [&str; 1] = ["TORCH_NCCL_ENABLE_TIMING"];
    let env = run.machine.get("env").map_or("", String::as_str);
    let mut sets: Vec<String> = env
        .split_whitespace()
        .filter_map(|pair| pair.split_once('='))
        .filter(|(name, _)| MODELLED.contains(name))
        .map(|(name, value)| format!("env.{name}={value}"))
        .collect();
    if let Some(profile) = run
        .machine
        .get("torch")
        .and_then(|version| TorchProfile::of_release(version))
    {
        sets.push(format!("torch=\"{}\"", profile.as_str()));
    }
    sets.iter()
        .filter_map(|set| Override::parse(set).ok())
        .collect()
}

/// One timing metric of a held-out run: measured, simulated with the calibrated profile, and
/// the relative error.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ValidationRow {
    pub scenario: String,
    pub metric: String,
    pub measured_us: f64,
    pub simulated_us: f64,
    pub error_pct: f64,
}

/// How well a calibrated profile predicts runs it was not fitted to.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Validation {
    /// Every timing (µs) metric of every held-out run with a nonzero measured value.
    pub rows: Vec<ValidationRow>,
    /// `None` without rows: nothing was validated.
    pub median_error_pct: Option<f64>,
    pub order_pairs: usize,
    pub order_pairs_agreeing: usize,
}

/// Collects the held-out errors from diffs of measured (A) against simulated (B) runs.
pub fn validation(diffs: &[crate::diff::Diff]) -> Validation {
    let rows: Vec<ValidationRow> = diffs
        .iter()
        .flat_map(|d| {
            d.metrics.iter().filter(|m| m.unit == "us").filter_map(|m| {
                Some(ValidationRow {
                    scenario: format!(
                        "{} ({})",
                        d.a.scenario,
                        crate::text::counted(u64::from(d.a.ranks), "rank")
                    ),
                    metric: m.metric.clone(),
                    measured_us: m.a,
                    simulated_us: m.b,
                    error_pct: m.error_pct?,
                })
            })
        })
        .collect();
    let errors: Vec<f64> = rows.iter().map(|r| r.error_pct).collect();
    Validation {
        median_error_pct: (!errors.is_empty()).then(|| median(&errors)),
        order_pairs: diffs.iter().map(|d| d.order_pairs).sum(),
        order_pairs_agreeing: diffs.iter().map(|d| d.order_pairs_agreeing).sum(),
        rows,
    }
}

/// The held-out table (Markdown) and its summary line; without timing metrics, the line alone,
/// its median `–` (as `fidelity` prints a median of nothing).
pub fn render_validation(validation: &Validation) -> String {
    let mut out = String::new();
    if !validation.rows.is_empty() {
        out.push_str(
            "| scenario | metric | measured (µs) | simulated (µs) | error |\n|---|---|---|---|---|\n",
        );
        for row in &validation.rows {
            let _ = writeln!(
                out,
                "| {} | {} | {:.1} | {:.1} | {:.1}% |",
                row.scenario, row.metric, row.measured_us, row.simulated_us, row.error_pct
            );
        }
        out.push('\n');
    }
    let _ = writeln!(
        out,
        "held-out: median error {} over {}; ordering verdicts {}/{} agree",
        validation
            .median_error_pct
            .map_or_else(|| "–".to_string(), |pct| format!("{pct:.2}%")),
        crate::text::counted(validation.rows.len() as u64, "timing metric"),
        validation.order_pairs_agreeing,
        validation.order_pairs
    );
    out
}

#[cfg(test)]
mod tests;
