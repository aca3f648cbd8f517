//! The TOML schema exactly as written in a scenario file, before names are resolved.
//!
//! Every table denies unknown keys (a misspelt `TORCH_NCCL_BLOCKING_WAIT` must not pass as the
//! default), and every value that a later check may reject keeps its byte span so that the error
//! can name the line and column.

use serde::Deserialize;
use std::collections::BTreeMap;
use toml::Spanned;

/// The top-level keys of a scenario file: the fields of `RawScenario`, in its order (a test
/// keeps the two in step). The first key of every path `--set` sets (`tensors.buf`, `seed`).
pub const TOP_LEVEL_KEYS: [&str; 22] = [
    "name",
    "about",
    "torch",
    "seed",
    "repeat",
    "warmup",
    "max_sim_time_s",
    "destroy_process_group",
    "cluster",
    "network",
    "host",
    "env",
    "memory",
    "tensors",
    "streams",
    "groups",
    "perturb",
    "fault",
    "op",
    "measure",
    "overlap",
    "sweep",
];

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawScenario {
    pub name: Option<String>,
    pub about: Option<String>,
    pub torch: Option<Spanned<String>>,
    pub seed: Option<Spanned<i64>>,
    pub repeat: Option<Spanned<i64>>,
    pub warmup: Option<Spanned<i64>>,
    pub max_sim_time_s: Option<Spanned<f64>>,
    pub destroy_process_group: Option<bool>,
    pub cluster: Option<RawCluster>,
    pub network: Option<RawNetwork>,
    pub host: Option<RawHost>,
    pub env: Option<BTreeMap<Spanned<String>, Spanned<toml::Value>>>,
    pub memory: Option<RawMemory>,
    pub tensors: Option<BTreeMap<Spanned<String>, Spanned<toml::Value>>>,
    pub streams: Option<BTreeMap<Spanned<String>, RawStream>>,
    pub groups: Option<BTreeMap<Spanned<String>, Spanned<RawGroup>>>,
    pub perturb: Option<Vec<Spanned<RawPerturb>>>,
    pub fault: Option<Vec<Spanned<RawFault>>>,
    pub op: Option<Vec<Spanned<RawOp>>>,
    pub measure: Option<Vec<Spanned<RawMeasure>>>,
    pub overlap: Option<Vec<Spanned<RawOverlap>>>,
    /// Sweep axes: read and checked by `crate::sweep`; a single run uses the file's own values.
    #[serde(rename = "sweep")]
    pub _sweep: Option<serde::de::IgnoredAny>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawCluster {
    pub ranks: Option<Spanned<i64>>,
    pub ranks_per_node: Option<Spanned<i64>>,
    pub gpu: Option<Spanned<String>>,
    pub sms: Option<Spanned<i64>>,
    pub bf16_tflops: Option<Spanned<f64>>,
    pub fp32_tflops: Option<Spanned<f64>>,
    pub gemm_efficiency: Option<Spanned<f64>>,
    pub boost_ms: Option<Spanned<f64>>,
    pub sustained_clock: Option<Spanned<f64>>,
    pub kernel_jitter_pct: Option<Spanned<f64>>,
    pub rank_speed_spread_pct: Option<Spanned<f64>>,
    pub gemm_tile_m: Option<Spanned<i64>>,
    pub gemm_tile_n: Option<Spanned<i64>>,
    pub fold: Option<Spanned<bool>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawNetwork {
    pub nvlink_gbps: Option<Spanned<f64>>,
    pub nic_gbps: Option<Spanned<f64>>,
    pub alpha_us: Option<Spanned<f64>>,
    pub nic_alpha_us: Option<Spanned<f64>>,
    pub kernel_floor_us: Option<Spanned<f64>>,
    pub self_copy_gbps: Option<Spanned<f64>>,
    pub algorithm: Option<Spanned<String>>,
    pub nccl_ll_launch_us: Option<Spanned<f64>>,
    pub nccl_ll128_launch_us: Option<Spanned<f64>>,
    pub nccl_simple_launch_us: Option<Spanned<f64>>,
    pub nccl_ll_wire_efficiency: Option<Spanned<f64>>,
    pub nccl_ll128_wire_efficiency: Option<Spanned<f64>>,
    pub nccl_simple_wire_efficiency: Option<Spanned<f64>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawHost {
    pub launch_us: Option<Spanned<f64>>,
    pub first_gemm_us: Option<Spanned<f64>>,
    pub launch_latency_us: Option<Spanned<f64>>,
    pub nccl_launch_latency_us: Option<Spanned<f64>>,
    pub stream_wait_latency_us: Option<Spanned<f64>>,
    pub collective_us: Option<Spanned<f64>>,
    pub collective_tail_us: Option<Spanned<f64>>,
    pub collective_enqueue_us: Option<Spanned<f64>>,
    pub op_gap_us: Option<Spanned<f64>>,
    pub collective_cold_us: Option<Spanned<f64>>,
    pub sync_collective_us: Option<Spanned<f64>>,
    pub collective_warm_within_us: Option<Spanned<f64>>,
    pub collective_cold_after_us: Option<Spanned<f64>>,
    pub wait_us: Option<Spanned<f64>>,
    pub event_us: Option<Spanned<f64>>,
    pub coalesced_call_us: Option<Spanned<f64>>,
    pub sync_us: Option<Spanned<f64>>,
    pub item_us: Option<Spanned<f64>>,
    pub mark_us: Option<Spanned<f64>>,
    pub query_us: Option<Spanned<f64>>,
    pub comm_init_us: Option<Spanned<f64>>,
    pub comm_init_next_us: Option<Spanned<f64>>,
    pub init_process_group_us: Option<Spanned<f64>>,
    pub new_group_us: Option<Spanned<f64>>,
    pub blocking_wait_poll_us: Option<Spanned<f64>>,
    pub watchdog_stack_trace_us: Option<Spanned<f64>>,
    pub comm_abort_us: Option<Spanned<f64>>,
    pub flight_recorder_dump_us: Option<Spanned<f64>>,
    pub launch_queue_depth: Option<Spanned<i64>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawMemory {
    pub capacity_gib: Option<Spanned<f64>>,
    pub fraction: Option<Spanned<f64>>,
    pub lifetime: Option<Spanned<String>>,
    pub expandable_segments: Option<bool>,
    pub alloc_us: Option<Spanned<f64>>,
    pub malloc_us: Option<Spanned<f64>>,
    pub free_us: Option<Spanned<f64>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawStream {
    pub priority: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawGroup {
    pub ranks: Option<Spanned<Vec<i64>>>,
    pub eager_init: Option<bool>,
    pub high_priority: Option<bool>,
    pub timeout_s: Option<Spanned<f64>>,
    pub first_seq_num: Option<Spanned<i64>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawPerturb {
    pub ranks: Spanned<Vec<i64>>,
    pub before: Spanned<String>,
    pub host_delay_us: Option<Spanned<toml::Value>>,
    pub gpu_delay_us: Option<Spanned<toml::Value>>,
    pub iterations: Option<Spanned<Vec<i64>>>,
}

/// One `[[fault]]`: what goes wrong on which ranks, at which labelled op and iteration.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawFault {
    pub ranks: Spanned<Vec<i64>>,
    pub at: Spanned<String>,
    pub iteration: Option<Spanned<i64>>,
    pub kind: Spanned<String>,
    /// `mismatch`: the collective the rank issues instead.
    pub collective: Option<Spanned<String>>,
    /// `mismatch`: the size the rank issues instead.
    pub size: Option<Spanned<toml::Value>>,
    /// `mismatch`: the element type the rank issues instead.
    pub dtype: Option<Spanned<String>>,
    /// `async_error`: delay from the collective's enqueue to the error.
    pub after_us: Option<Spanned<f64>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawKernel {
    pub us: Spanned<f64>,
    pub sms: Option<Spanned<i64>>,
}

/// `then = { us, sms, stream }`: the kernel a future's callback launches, and the stream PyTorch
/// took from its pool to run the callback on.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawCallback {
    pub us: Spanned<f64>,
    pub sms: Option<Spanned<i64>>,
    pub stream: Spanned<String>,
}

/// One send or receive of a `batch_isend_irecv = [...]` list.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawP2p {
    pub send: Option<Spanned<String>>,
    pub recv: Option<Spanned<String>>,
    pub shift: Spanned<i64>,
}

/// One `[[op]]` table. Exactly one of the operation keys (`all_reduce`, `wait`, `gemm`, …) must
/// be present; the others are modifiers checked against the operation.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawOp {
    pub label: Option<Spanned<String>>,
    pub ranks: Option<Spanned<Vec<i64>>>,
    pub stream: Option<Spanned<String>>,
    pub reads: Option<Vec<Spanned<String>>>,
    pub writes: Option<Vec<Spanned<String>>>,
    // operation keys
    pub all_reduce: Option<Spanned<String>>,
    pub all_gather: Option<Spanned<String>>,
    pub reduce_scatter: Option<Spanned<String>>,
    pub broadcast: Option<Spanned<String>>,
    pub all_to_all: Option<Spanned<String>>,
    pub send: Option<Spanned<String>>,
    pub recv: Option<Spanned<String>>,
    pub batch_isend_irecv: Option<Spanned<Vec<Spanned<RawP2p>>>>,
    pub barrier: Option<Spanned<bool>>,
    pub wait: Option<Spanned<String>>,
    pub is_completed: Option<Spanned<String>>,
    pub get_future: Option<Spanned<String>>,
    pub set_stream: Option<Spanned<String>>,
    pub record_event: Option<Spanned<String>>,
    pub wait_event: Option<Spanned<String>>,
    pub event_sync: Option<Spanned<String>>,
    pub stream_sync: Option<Spanned<String>>,
    pub device_sync: Option<Spanned<bool>>,
    pub item: Option<Spanned<String>>,
    pub gemm: Option<Spanned<Vec<i64>>>,
    pub kernel: Option<Spanned<RawKernel>>,
    pub gpu_sleep_us: Option<Spanned<f64>>,
    pub host_sleep_us: Option<Spanned<f64>>,
    pub mark: Option<Spanned<String>>,
    pub alloc: Option<Spanned<String>>,
    pub free: Option<Spanned<String>>,
    pub functional_all_reduce: Option<Spanned<String>>,
    pub init_process_group: Option<Spanned<bool>>,
    pub new_group: Option<Spanned<String>>,
    // modifiers
    pub async_op: Option<Spanned<bool>>,
    pub work: Option<Spanned<String>>,
    pub group: Option<Spanned<String>>,
    pub dtype: Option<Spanned<String>>,
    pub timeout_ms: Option<Spanned<f64>>,
    pub coalesce: Option<Spanned<bool>>,
    pub bucket: Option<Spanned<String>>,
    pub result: Option<Spanned<String>>,
    pub peer: Option<Spanned<i64>>,
    pub then: Option<Spanned<RawCallback>>,
    pub catch: Option<Spanned<bool>>,
    pub device_id: Option<Spanned<bool>>,
}

impl RawOp {
    /// The tensors the op uses, by name, as R30 counts a use of a functional collective's
    /// result: its `reads`, its `.item()`, and every collective or point-to-point op given it
    /// (c10d's ops go through the dispatcher, where an AsyncCollectiveTensor waits). A `writes`
    /// is not a use here (a kernel writing through the tensor's storage,
    /// docs/scenario-format.md). A new collective key belongs in this list.
    pub fn tensors_used(&self) -> impl Iterator<Item = &Spanned<String>> {
        let p2p = (self.batch_isend_irecv.iter())
            .flat_map(|list| list.get_ref())
            .flat_map(|p2p| [&p2p.get_ref().send, &p2p.get_ref().recv])
            .flatten();
        let collectives = [
            &self.all_reduce,
            &self.all_gather,
            &self.reduce_scatter,
            &self.broadcast,
            &self.all_to_all,
            &self.send,
            &self.recv,
            &self.functional_all_reduce,
        ];
        (self.reads.iter().flatten())
            .chain(self.item.as_ref())
            .chain(collectives.into_iter().flatten())
            .chain(p2p)
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawMeasure {
    pub name: Spanned<String>,
    pub from: Spanned<String>,
    pub to: Spanned<String>,
    pub clock: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawOverlap {
    pub name: Option<Spanned<String>>,
    pub compute: Spanned<String>,
    pub comm: Spanned<String>,
    pub both: Spanned<String>,
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_top_level_keys_are_the_fields_of_a_raw_scenario() {
        // serde names every field it expects when it meets an unknown one.
        let error = toml::from_str::<super::RawScenario>("no_such_key = 1\n").unwrap_err();
        let expected: Vec<String> = super::TOP_LEVEL_KEYS
            .iter()
            .map(|key| format!("`{key}`"))
            .collect();
        assert!(
            error
                .message()
                .ends_with(&format!("expected one of {}", expected.join(", "))),
            "{}",
            error.message()
        );
    }
}
