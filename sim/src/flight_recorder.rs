//! PyTorch's Flight Recorder dumps as values: what each rank that dumped after a timeout or an
//! error (`TORCH_NCCL_DUMP_ON_TIMEOUT`, R27) held in its ring buffer of collectives
//! (`TORCH_FR_BUFFER_SIZE` entries), with each entry's state at the dump, and the names PyTorch
//! gives their collectives, dtypes and groups. The engine builds them into the Timeline
//! (`engine/flight_recorder.rs`); `analysis::flight_recorder` writes and reads them as the
//! pickle PyTorch 2.11 writes (docs/flight-recorder.md); the binary writes the files.

use crate::collective::CollectiveKind;
use crate::scenario::{DType, Scenario};
use serde::{Deserialize, Serialize};

/// The `version` PyTorch 2.11 writes into its dumps (its Flight Recorder format, not the
/// PyTorch version).
pub const DUMP_VERSION: &str = "2.10";

/// The dump file's name before the rank when `TORCH_FR_DUMP_TEMP_FILE` is not set (PyTorch's
/// default prefix is `/tmp/nccl_trace_rank_`).
pub const DEFAULT_FILE_PREFIX: &str = "nccl_trace_rank_";

/// One rank's dump.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlightRecorderDump {
    pub rank: u32,
    /// In a summarised Timeline (`run --summary`), the ranks of a class of ranks that behave
    /// alike whose dumps this one stands for, `rank` the lowest of them: theirs are this one
    /// with their rank (`Timeline::rank_dumps`). Empty: this rank's alone (every dump of a
    /// Timeline that is not summarised, and the dumps of the ranks `--records-for` names).
    #[serde(default, skip_serializing_if = "crate::ranks::RankSet::is_empty")]
    pub stands_for: crate::ranks::RankSet,
    /// The dump format's version (`DUMP_VERSION` for the simulator's).
    pub version: String,
    /// NCCL's version as the dump writes it (`"2.28.9"`); the simulator writes `"c10dsim"`.
    pub comm_lib_version: String,
    /// `pg_config`: the process groups whose communicator this rank created (PyTorch's
    /// `initNCCLComm` records each: `record_pg_ranks`), none with the recorder off; with their
    /// `pg_status` where [`DumpGroup::recorded`].
    pub groups: Vec<DumpGroup>,
    pub entries: Vec<DumpEntry>,
}

/// A process group as a dump describes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DumpGroup {
    /// PyTorch's group name (`"0"` for the default group, then `"1"`, … in creation order).
    pub name: String,
    /// `"default_pg"` for the default group, else the group's description.
    pub desc: String,
    /// Global ranks; shared by every rank's dump of the group (each lists all of its ranks, so
    /// copies would make a job's dumps quadratic in its ranks).
    pub ranks: std::sync::Arc<[u32]>,
    /// The last SeqNum enqueued, started (known only with timing), completed; −1 for none.
    pub last_enqueued: i64,
    pub last_started: i64,
    pub last_completed: i64,
    /// The rank recorded an entry on the group (before the program, or in it, whether its
    /// ring buffer still holds it or not): `pg_status` lists only those groups (the recorder
    /// takes a group's status with its first entry). Absent from older files, whose groups
    /// all had it.
    #[serde(default = "recorded_by_default", skip_serializing_if = "is_recorded")]
    pub recorded: bool,
}

fn recorded_by_default() -> bool {
    true
}

fn is_recorded(recorded: &bool) -> bool {
    *recorded
}

/// What the recorder knew of an entry's Work at the dump.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EntryState {
    /// Enqueued; not known to have started.
    Scheduled,
    /// Its start event fired (only with timing: `TORCH_NCCL_ENABLE_TIMING` or desync debug).
    Started,
    /// Its end event fired.
    Completed,
}

impl EntryState {
    pub fn name(self) -> &'static str {
        match self {
            EntryState::Scheduled => "scheduled",
            EntryState::Started => "started",
            EntryState::Completed => "completed",
        }
    }

    pub fn from_name(name: &str) -> Option<EntryState> {
        [
            EntryState::Scheduled,
            EntryState::Started,
            EntryState::Completed,
        ]
        .into_iter()
        .find(|state| state.name() == name)
    }
}

/// One Python stack frame of the call that created an entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Frame {
    pub name: String,
    pub filename: String,
    pub line: u64,
}

/// One recorded collective (or point-to-point call), the keys of a PyTorch 2.11 entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DumpEntry {
    /// Counts every entry of this rank from 0 (across groups).
    pub record_id: u64,
    pub pg_id: u64,
    /// `process_group`: the group's name and description.
    pub pg_name: String,
    pub pg_desc: String,
    /// SeqNum of a collective in its group (0 for point-to-point calls).
    pub collective_seq_id: u64,
    /// Sequence number of a point-to-point call in its group (0 for collectives).
    pub p2p_seq_id: u64,
    pub op_id: u64,
    /// `nccl:all_reduce`, `nccl:_all_gather_base`, `nccl:send 0->1`, …
    pub profiling_name: String,
    pub time_created_ns: u64,
    /// The kernel's time between its start and end events (with timing, once completed).
    pub duration_ms: Option<f64>,
    pub input_sizes: Vec<Vec<u64>>,
    pub input_dtypes: Vec<String>,
    pub output_sizes: Vec<Vec<u64>>,
    pub output_dtypes: Vec<String>,
    pub state: EntryState,
    pub time_discovered_started_ns: Option<u64>,
    pub time_discovered_completed_ns: Option<u64>,
    /// The watchdog saw the Work complete and dropped it.
    pub retired: bool,
    pub timeout_ms: u64,
    pub is_p2p: bool,
    pub thread_name: String,
    pub thread_id: String,
    pub frames: Vec<Frame>,
}

/// The profiling name PyTorch records for a collective of `kind` (point-to-point calls add
/// their peers; a barrier is `nccl:all_reduce_barrier`).
pub fn profiling_name(kind: CollectiveKind) -> &'static str {
    match kind {
        CollectiveKind::AllReduce => "nccl:all_reduce",
        CollectiveKind::AllGather => "nccl:_all_gather_base",
        CollectiveKind::ReduceScatter => "nccl:_reduce_scatter_base",
        CollectiveKind::Broadcast => "nccl:broadcast",
        CollectiveKind::AllToAll => "nccl:all_to_all",
        CollectiveKind::Send => "nccl:send",
        CollectiveKind::Recv => "nccl:recv",
        CollectiveKind::BatchP2p => "nccl:coalesced",
    }
}

/// The profiling name of a `_coalescing_manager` block's one entry whose calls are of `kind`
/// (R25): the title of the coalesced call its fast path makes (measured on PyTorch 2.11 for
/// all_reduce and all_gather; reduce_scatter's from the source). PyTorch's manager coalesces
/// no other kind (a broadcast in a block runs on its own); for those the simulator's one group
/// takes the generic `endCoalescing`'s `nccl:coalesced`.
pub fn coalesced_profiling_name(kind: CollectiveKind) -> &'static str {
    match kind {
        CollectiveKind::AllReduce => "nccl:allreduce_coalesced",
        CollectiveKind::AllGather => "nccl:all_gather_into_tensor_coalesced",
        CollectiveKind::ReduceScatter => "nccl:reduce_scatter_tensor_coalesced",
        _ => "nccl:coalesced",
    }
}

/// The name PyTorch gives a dtype in dumps (`c10::ScalarType`'s name).
pub fn dtype_name(dtype: DType) -> &'static str {
    match dtype {
        DType::F32 => "Float",
        DType::Bf16 => "BFloat16",
        DType::F16 => "Half",
    }
}

/// The group's name and description in dumps: the default group is `"0"`, `default_pg`.
pub fn group_names(scenario: &Scenario, group: usize) -> (String, String) {
    let desc = if group == 0 {
        "default_pg".to_string()
    } else {
        scenario.groups[group].name.clone()
    };
    (group.to_string(), desc)
}
