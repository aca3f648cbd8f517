//! A job's Flight Recorder dumps (one per rank) → a scenario that reproduces what they show
//! (docs/flight-recorder.md): the collective sequence of the rank that kept the most, with the
//! calls other ranks kept and it lacks merged in, their sizes, dtypes and groups, the host time
//! between the calls; then, rank by rank, where the ranks part from it — a rank that never
//! issued a collective (its `pg_status` tells that from an entry its full buffer dropped) hangs
//! there (`hang` fault), a rank that issued another kind, size or dtype there mismatches
//! (`mismatch` fault) — and, where every rank issued a collective that some never completed, a
//! GPU sleep of twice the timeout before it on those ranks (the dumps do not say what kept their
//! streams busy). The scenario turns on `TORCH_NCCL_DESYNC_DEBUG`, so that running it gives the
//! simulator's desync report, whose verdict [`verdict`] collects. Where a ring buffer wrapped,
//! each group's `first_seq_num` keeps the replay's SeqNums the dumps'.
//!
//! About 1,420 lines, of which 485 are unit tests kept beside the private steps they check
//! (`call_of`, `dtype`, the departures); the import itself is one pass over the dumps.

use sim::flight_recorder::{DumpEntry, EntryState, FlightRecorderDump};
use sim::scenario::{DType, MAX_FIRST_SEQ_NUM};
use sim::timeline::{FindingKind, Timeline, WatchdogEvent};
use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

/// Why the dumps cannot be made a scenario.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportError {
    pub message: String,
}

impl std::fmt::Display for ImportError {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

fn error(message: impl Into<String>) -> ImportError {
    ImportError {
        message: message.into(),
    }
}

/// A recorded collective as the scenario issues it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Call {
    /// The scenario key (`all_reduce`, …; `barrier`).
    key: &'static str,
    /// The scenario's dtype.
    dtype: DType,
    /// The tensor's bytes as the scenario counts them (an all_gather's gathered output).
    size_bytes: u64,
}

impl Call {
    /// The call as ProcessGroupNCCL issues it, whose collective, size and element type the
    /// ranks' calls at one SeqNum must agree on (R16): a barrier is the all_reduce of its
    /// one-element f32 tensor.
    fn issued(&self) -> (&'static str, DType, u64) {
        let key = if self.key == "barrier" {
            "all_reduce"
        } else {
            self.key
        };
        (key, self.dtype, self.size_bytes)
    }
}

/// The scenario key of a profiling name, and whether its size is the output's.
fn scenario_key(profiling_name: &str) -> Option<(&'static str, bool)> {
    let name = profiling_name.strip_prefix("nccl:")?;
    Some(match name {
        "all_reduce" | "allreduce_coalesced" => ("all_reduce", false),
        "all_reduce_barrier" => ("barrier", false),
        "_all_gather_base"
        | "all_gather"
        | "all_gather_into_tensor_coalesced"
        | "ALLGATHER_coalesced" => ("all_gather", true),
        "_reduce_scatter_base"
        | "reduce_scatter"
        | "reduce_scatter_tensor_coalesced"
        | "REDUCE_SCATTER_coalesced" => ("reduce_scatter", false),
        "broadcast" | "_broadcast_oop" => ("broadcast", false),
        "all_to_all" => ("all_to_all", false),
        _ => return None,
    })
}

/// A PyTorch dtype name (c10's `ScalarType` as the dump writes it) → the scenario's dtype and
/// element bytes. The scenario knows three; another dtype becomes `f32` of the same byte
/// count; a name not listed is `None`.
fn dtype(name: &str) -> Option<(DType, u64)> {
    Some(match name {
        "Float" => (DType::F32, 4),
        "BFloat16" => (DType::Bf16, 2),
        "Half" => (DType::F16, 2),
        "ComplexDouble" => (DType::F32, 16),
        "Double" | "Long" | "ComplexFloat" | "UInt64" => (DType::F32, 8),
        "Int" | "UInt32" | "ComplexHalf" | "QInt32" => (DType::F32, 4),
        "Short" | "UInt16" | "Bits16" => (DType::F32, 2),
        "Byte" | "Char" | "Bool" | "QInt8" | "QUInt8" | "Bits8" | "Float8_e5m2"
        | "Float8_e4m3fn" | "Float8_e5m2fnuz" | "Float8_e4m3fnuz" | "Float8_e8m0fnu"
        | "Float4_e2m1fn_x2" => (DType::F32, 1),
        _ => return None,
    })
}

/// The dtype names of the tensors a call's size is taken from (its outputs for an all_gather,
/// else its inputs), one per tensor, as the dump wrote them.
fn recorded_dtypes(entry: &DumpEntry) -> &[String] {
    let output = scenario_key(&entry.profiling_name).is_some_and(|(_, output)| output);
    if output {
        &entry.output_dtypes
    } else {
        &entry.input_dtypes
    }
}

/// The dtype name of a call's first tensor, the one the scenario's dtype is: `Float` when none
/// is recorded.
fn recorded_dtype(entry: &DumpEntry) -> &str {
    recorded_dtypes(entry)
        .first()
        .map_or("Float", String::as_str)
}

fn call_of(rank: u32, entry: &DumpEntry) -> Result<Call, ImportError> {
    let (key, output) = scenario_key(&entry.profiling_name).ok_or_else(|| {
        error(format!(
            "rank {rank}, record_id {} (SeqNum {}): {:?} is not a collective c10dsim models (all_reduce, all_gather, reduce_scatter, broadcast, all_to_all, barrier)",
            entry.record_id, entry.collective_seq_id, entry.profiling_name
        ))
    })?;
    let sizes = if output {
        &entry.output_sizes
    } else {
        &entry.input_sizes
    };
    let known = |name: &str| {
        dtype(name).ok_or_else(|| {
            error(format!(
                "rank {rank}, record_id {}: dtype {:?} of {} is not one c10dsim knows the element size of",
                entry.record_id,
                comment_safe(name),
                comment_safe(&entry.profiling_name)
            ))
        })
    };
    let first_dtype = recorded_dtype(entry);
    let (dtype, _) = known(first_dtype)?;
    // Each tensor of a coalesced block in its own dtype's bytes.
    let dtypes = recorded_dtypes(entry);
    let mut bytes = 0u64;
    for (index, shape) in sizes.iter().enumerate() {
        let (_, element_bytes) = known(dtypes.get(index).map_or(first_dtype, String::as_str))?;
        let numel = shape.iter().fold(1u64, |n, &d| n.saturating_mul(d));
        bytes = bytes.saturating_add(numel.saturating_mul(element_bytes));
    }
    if bytes > 1 << 40 {
        return Err(error(format!(
            "rank {rank}, record_id {}: {} of {bytes} B: c10dsim's tensors are at most 1 TiB",
            entry.record_id,
            comment_safe(&entry.profiling_name)
        )));
    }
    // A whole number of the scenario dtype's elements, at least one: a dtype the scenario does
    // not know counts as f32 bytes, rounded up.
    let scenario_element_bytes = dtype.size_bytes();
    let size_bytes = bytes.max(1).div_ceil(scenario_element_bytes) * scenario_element_bytes;
    Ok(Call {
        key,
        dtype,
        size_bytes,
    })
}

/// One collective of the program: the entry of the first rank, in the order of preference, that
/// kept it.
struct Step<'a> {
    rank: u32,
    entry: &'a DumpEntry,
    call: Call,
    label: String,
}

/// What a rank does differently at a step.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Departure {
    Hang,
    Mismatch {
        /// The collective the rank issued (a barrier's is its all_reduce, [`Call::issued`]).
        key: &'static str,
        size_bytes: u64,
        dtype: DType,
    },
}

/// `text` with only ASCII letters, digits and `_` kept (the rest become `_`).
fn identifier(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}

/// `text` fit for a one-line comment: control characters become spaces.
fn comment_safe(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

/// The scenario's name of a group: its description where that is a usable name, else
/// `pg<name>`; unique among `taken`.
fn group_name(name: &str, desc: &str, taken: &BTreeSet<String>) -> String {
    if desc == "default_pg" {
        return "world".into();
    }
    let clean = identifier(desc);
    let usable = clean != "undefined"
        && clean != "world"
        && clean.starts_with(|c: char| c.is_ascii_alphabetic());
    let base = if usable {
        clean
    } else {
        format!("pg{}", identifier(name))
    };
    let mut candidate = base.clone();
    let mut suffix = 2;
    while taken.contains(&candidate) || candidate == "world" {
        candidate = format!("{base}_{suffix}");
        suffix += 1;
    }
    candidate
}

/// The longest a scenario's duration may be: one day, in µs.
const ONE_DAY_US: u64 = 86_400_000_000;

/// The host time between two calls created at these times, at most one day.
fn gap_us(earlier_ns: u64, later_ns: u64) -> u64 {
    (later_ns.saturating_sub(earlier_ns) / 1000).min(ONE_DAY_US)
}

/// The GPU sleep standing for a busy stream: twice the timeout, at most one day.
fn busy_sleep_us(timeout_ms: u64) -> u64 {
    timeout_ms.saturating_mul(2000).min(ONE_DAY_US)
}

type Slot = (String, bool, u64);

/// The key of a call in its group: (group name, point-to-point or not, its number in that
/// sequence). Every entry records both of the group's counters as they stood; a send or
/// receive is numbered by `p2p_seq_id`, a collective by `collective_seq_id`.
fn slot(entry: &DumpEntry) -> Slot {
    let seq = if entry.is_p2p {
        entry.p2p_seq_id
    } else {
        entry.collective_seq_id
    };
    (entry.pg_name.clone(), entry.is_p2p, seq)
}

/// The dumps with each process group told apart by its ranks as well as its name: a
/// `split_group` (DeviceMesh's, among others) gives each of its subgroups one name, so that
/// ranks 0 and 1 list a group "1" of [0, 1] and ranks 2 and 3 a group "1" of [2, 3], as
/// torchfrtrace reads them. The first listing of a name keeps it; a listing of other ranks is
/// named `<name> <ranks>` (`1 [2, 3]`) in its dump's groups and entries.
fn split_groups_apart(dumps: &[FlightRecorderDump]) -> Cow<'_, [FlightRecorderDump]> {
    let mut first: BTreeMap<&str, &[u32]> = BTreeMap::new();
    for group in dumps.iter().flat_map(|d| &d.groups) {
        first.entry(&group.name).or_insert(&group.ranks);
    }
    let renamed = |dump: &FlightRecorderDump| -> BTreeMap<String, String> {
        (dump.groups.iter())
            .filter(|g| first[g.name.as_str()] != &*g.ranks)
            .map(|g| {
                (
                    g.name.clone(),
                    format!("{} {}", g.name, rank_list(&g.ranks)),
                )
            })
            .collect()
    };
    if dumps.iter().all(|dump| renamed(dump).is_empty()) {
        return Cow::Borrowed(dumps);
    }
    Cow::Owned(
        dumps
            .iter()
            .map(|dump| {
                let names = renamed(dump);
                let mut dump = dump.clone();
                for group in &mut dump.groups {
                    if let Some(name) = names.get(&group.name) {
                        group.name = name.clone();
                    }
                }
                for entry in &mut dump.entries {
                    if let Some(name) = names.get(&entry.pg_name) {
                        entry.pg_name = name.clone();
                    }
                }
                dump
            })
            .collect(),
    )
}

/// The scenario text reproducing `dumps` (any order, one per rank), from files described by
/// `source` (for the header).
pub fn scenario(dumps: &[FlightRecorderDump], source: &str) -> Result<String, ImportError> {
    let dumps = &*split_groups_apart(dumps);
    let mut by_rank: BTreeMap<u32, &FlightRecorderDump> = BTreeMap::new();
    for dump in dumps {
        if by_rank.insert(dump.rank, dump).is_some() {
            return Err(error(format!("two dumps for rank {}", dump.rank)));
        }
    }
    let first = by_rank
        .values()
        .next()
        .ok_or_else(|| error("no dumps to import"))?;
    // The default group, as the dumps that list it give it: PyTorch lists a group only where
    // the rank created its communicator (`pg_config`), so a rank that never used the world,
    // lazily initialised, has none. Where no dump lists it, the job is the ranks of its dumps,
    // one per rank (as torchfrtrace reads them), 0 to the highest.
    let default_group = |dump: &FlightRecorderDump| {
        (dump.groups.iter())
            .find(|g| g.desc == "default_pg")
            .or_else(|| dump.groups.iter().find(|g| g.name == "0"))
            .map(|g| g.ranks.to_vec())
    };
    if by_rank.values().all(|d| d.entries.is_empty()) {
        return Err(error(
            "no collective in the dumps to import: they hold no entries (was the Flight Recorder off, TORCH_FR_BUFFER_SIZE = 0?)",
        ));
    }
    let listed = by_rank
        .values()
        .find_map(|dump| default_group(dump).map(|ranks| (dump.rank, ranks)));
    let (world_from, world) = match listed {
        Some(listed) => listed,
        None => {
            let highest = by_rank.keys().next_back().copied().unwrap_or(first.rank);
            (first.rank, (0..=highest).collect())
        }
    };
    for dump in by_rank.values() {
        let Some(own) = default_group(dump) else {
            continue;
        };
        if own != world {
            return Err(error(format!(
                "rank {}'s default group lists ranks {own:?}, rank {world_from}'s {world:?}: the dumps are not of one job",
                dump.rank
            )));
        }
    }
    let world_size = world.len() as u32;
    if world.iter().copied().ne(0..world_size) {
        return Err(error(format!(
            "rank {world_from}'s default group lists ranks {world:?}: expected 0 to {} in order",
            world_size.saturating_sub(1)
        )));
    }
    if world_size > sim::scenario::MAX_RANKS {
        return Err(error(format!(
            "the default group has {world_size} ranks; c10dsim simulates at most {}",
            sim::scenario::MAX_RANKS
        )));
    }
    let missing: Vec<String> = (0..world_size)
        .filter(|rank| !by_rank.contains_key(rank))
        .map(|rank| rank.to_string())
        .collect();
    if !missing.is_empty() {
        return Err(error(format!(
            "the default group has {world_size} ranks but there is no dump for rank {}: a dump per rank is needed (torchfrtrace needs them too)",
            missing.join(", ")
        )));
    }
    if let Some(extra) = by_rank.keys().find(|&&rank| rank >= world_size) {
        return Err(error(format!(
            "a dump for rank {extra}, outside the default group's {world_size} ranks"
        )));
    }
    // Groups: every dump's pg_config, by PyTorch's group name.
    let mut groups: BTreeMap<String, (String, Vec<u32>)> = BTreeMap::new();
    let mut taken = BTreeSet::new();
    for dump in by_rank.values() {
        for group in &dump.groups {
            if groups.contains_key(&group.name) {
                continue;
            }
            let mut members = group.ranks.to_vec();
            members.sort_unstable();
            members.dedup();
            if members.len() != group.ranks.len()
                || members.is_empty()
                || members.iter().any(|&r| r >= world_size)
            {
                return Err(error(format!(
                    "rank {}'s process group {:?} lists ranks {:?}: expected distinct ranks of the {world_size} of the default group",
                    dump.rank, group.name, group.ranks
                )));
            }
            let name = group_name(&group.name, &group.desc, &taken);
            taken.insert(name.clone());
            groups.insert(group.name.clone(), (name, group.ranks.to_vec()));
        }
    }
    // Each rank's collectives in the order it created them.
    let mut entries: BTreeMap<u32, Vec<&DumpEntry>> = BTreeMap::new();
    for (&rank, dump) in &by_rank {
        let mut list: Vec<&DumpEntry> = dump.entries.iter().collect();
        list.sort_by_key(|e| e.record_id);
        if let Some(p2p) = list.iter().find(|e| e.is_p2p) {
            return Err(error(format!(
                "rank {rank}, record_id {}: point-to-point entries ({}) are not imported yet",
                p2p.record_id, p2p.profiling_name
            )));
        }
        // One entry for a whole block the generic `endCoalescing` closed: a batch_isend_irecv
        // (PyTorch does not mark it point-to-point) or a `_coalescing_manager` block its fast
        // path does not take; the fast path's blocks (`nccl:allreduce_coalesced`, …) are
        // imported as one collective.
        if let Some(coalesced) = list.iter().find(|e| e.profiling_name == "nccl:coalesced") {
            return Err(error(format!(
                "rank {rank}, record_id {}: nccl:coalesced entries (a batch_isend_irecv, or a coalescing manager's block of calls other than all_reduce, all_gather_into_tensor and reduce_scatter_tensor, whose blocks have names of their own) are not imported yet",
                coalesced.record_id
            )));
        }
        if let Some(bad) = list
            .iter()
            .find(|e| !(1..=ONE_DAY_US / 1000).contains(&e.timeout_ms))
        {
            return Err(error(format!(
                "rank {rank}, record_id {}: timeout_ms = {} (c10dsim takes 1 ms to one day)",
                bad.record_id, bad.timeout_ms
            )));
        }
        let mut seen = BTreeSet::new();
        if let Some(twice) = list.iter().find(|e| !seen.insert(slot(e))) {
            return Err(error(format!(
                "rank {rank}, record_id {}: SeqNum {} of process group {:?} is recorded twice",
                twice.record_id, twice.collective_seq_id, twice.pg_name
            )));
        }
        if let Some(unknown) = list.iter().find(|e| !groups.contains_key(&e.pg_name)) {
            return Err(error(format!(
                "rank {rank}, record_id {}: process group {:?} is not in any dump's pg_config",
                unknown.record_id, unknown.pg_name
            )));
        }
        entries.insert(rank, list);
    }
    // Where every member's record of a group is whole: from the oldest entry of the group its
    // buffer still holds or, where a full ring buffer dropped every one of them, past the last
    // collective it enqueued (its `pg_status`). From there on, a member without an entry at a
    // SeqNum never issued it; before, it may have issued it and dropped the entry.
    let mut start: BTreeMap<String, u64> = BTreeMap::new();
    for (pg, (_, members)) in &groups {
        let whole_from = members.iter().map(|rank| {
            let held = entries[rank].iter().filter(|e| &e.pg_name == pg);
            held.map(|e| e.collective_seq_id).min().unwrap_or_else(|| {
                let status = by_rank[rank].groups.iter().find(|g| &g.name == pg);
                let last_enqueued = status.map_or(-1, |g| g.last_enqueued);
                u64::try_from(last_enqueued.saturating_add(1)).unwrap_or(0)
            })
        });
        start.insert(pg.clone(), whole_from.max().unwrap_or(0));
    }
    let kept = |rank: u32| {
        let start = &start;
        entries[&rank]
            .iter()
            .copied()
            .filter(move |e| e.collective_seq_id >= start[&e.pg_name])
    };
    // The reference: the rank that kept the most (the lowest such rank). Its sequence is the
    // program; each other rank's calls the program lacks go in after that rank's call before
    // them, so that a group the reference is not in, or a collective it never reached, is
    // replayed too.
    let mut preference: Vec<u32> = entries.keys().copied().collect();
    preference.sort_by_cached_key(|&rank| (std::cmp::Reverse(kept(rank).count()), rank));
    let reference = preference[0];
    let mut program: Vec<(u32, &DumpEntry)> = Vec::new();
    for &rank in &preference {
        let placed: BTreeMap<Slot, usize> = (program.iter().enumerate())
            .map(|(index, (_, entry))| (slot(entry), index))
            .collect();
        // The calls to add, by the index of the program's call they go before.
        let mut before: BTreeMap<usize, Vec<&DumpEntry>> = BTreeMap::new();
        let mut at = 0;
        for entry in kept(rank) {
            match placed.get(&slot(entry)) {
                Some(&index) => at = at.max(index + 1),
                None => before.entry(at).or_default().push(entry),
            }
        }
        if before.is_empty() {
            continue;
        }
        let old = std::mem::take(&mut program);
        for (index, call) in old.into_iter().map(Some).chain([None]).enumerate() {
            let added = before.remove(&index).unwrap_or_default();
            program.extend(added.into_iter().map(|entry| (rank, entry)));
            program.extend(call);
        }
    }
    let mut steps = Vec::new();
    for (rank, entry) in program {
        let call = call_of(rank, entry)?;
        let group = &groups[&entry.pg_name].0;
        let label = if group == "world" {
            format!("{}_{}", call.key, entry.collective_seq_id)
        } else {
            format!("{group}_{}_{}", call.key, entry.collective_seq_id)
        };
        steps.push(Step {
            rank,
            entry,
            call,
            label,
        });
    }
    if steps.is_empty() {
        return Err(error(
            "no collective in the dumps to import (none from where every member's record of its group is whole)",
        ));
    }
    if let Some(step) = (steps.iter()).find(|s| s.entry.collective_seq_id > MAX_FIRST_SEQ_NUM) {
        return Err(error(format!(
            "rank {}, record_id {}: SeqNum {} (c10dsim numbers a group's collectives up to {MAX_FIRST_SEQ_NUM})",
            step.rank, step.entry.record_id, step.entry.collective_seq_id
        )));
    }
    // Where each rank parts from the program.
    let mut departures: BTreeMap<(usize, Departure), Vec<u32>> = BTreeMap::new();
    let mut slots: BTreeMap<u32, BTreeMap<Slot, &DumpEntry>> = BTreeMap::new();
    for (&rank, list) in &entries {
        let own = list.iter().map(|e| (slot(e), *e)).collect();
        slots.insert(rank, own);
    }
    for &rank in entries.keys() {
        for (index, step) in steps.iter().enumerate() {
            if !groups[&step.entry.pg_name].1.contains(&rank) {
                continue;
            }
            let departure = match slots[&rank].get(&slot(step.entry)) {
                None => Some(Departure::Hang),
                Some(entry) => {
                    let call = call_of(rank, entry)?;
                    let (own, theirs) = (recorded_dtype(entry), recorded_dtype(step.entry));
                    let (issued, expected) = (call.issued(), step.call.issued());
                    if issued == expected && own != theirs {
                        // Int and Float, say: both f32 of the same bytes to the scenario, which
                        // would replay them as one call.
                        return Err(error(format!(
                            "rank {rank}, record_id {}: {} of dtype {:?} where rank {} \
                             has {:?}: a dtype mismatch the scenario cannot write (its dtypes \
                             are Float, BFloat16 and Half; another counts as Float of its bytes)",
                            entry.record_id,
                            comment_safe(&entry.profiling_name),
                            comment_safe(own),
                            step.rank,
                            comment_safe(theirs),
                        )));
                    }
                    (issued != expected).then_some(Departure::Mismatch {
                        key: issued.0,
                        size_bytes: call.size_bytes,
                        dtype: call.dtype,
                    })
                }
            };
            if let Some(departure) = departure {
                departures.entry((index, departure)).or_default().push(rank);
                break;
            }
        }
    }
    // A collective every rank issued alike but some never completed: their streams were busy.
    let departed: BTreeSet<usize> = departures.keys().map(|(index, _)| *index).collect();
    let timing = by_rank.values().flat_map(|d| &d.entries).any(|e| {
        e.state == EntryState::Started
            || e.time_discovered_started_ns.is_some()
            || e.duration_ms.is_some()
    });
    let mut busy: Option<(usize, Vec<u32>)> = None;
    for (index, step) in steps.iter().enumerate() {
        if departed.iter().any(|&d| d <= index) {
            break;
        }
        let late: Vec<u32> = groups[&step.entry.pg_name]
            .1
            .iter()
            .copied()
            .filter(|rank| {
                slots[rank].get(&slot(step.entry)).is_some_and(|e| {
                    e.state == EntryState::Scheduled
                        || (!timing && e.state != EntryState::Completed)
                })
            })
            .collect();
        if !late.is_empty() {
            busy = Some((index, late));
            break;
        }
    }
    Ok(render(&RenderInput {
        source,
        world_size,
        reference,
        groups: &groups,
        steps: &steps,
        departures: &departures,
        busy: busy.as_ref(),
        timing,
        slots: &slots,
    }))
}

struct RenderInput<'a> {
    source: &'a str,
    world_size: u32,
    reference: u32,
    groups: &'a BTreeMap<String, (String, Vec<u32>)>,
    steps: &'a [Step<'a>],
    departures: &'a BTreeMap<(usize, Departure), Vec<u32>>,
    busy: Option<&'a (usize, Vec<u32>)>,
    timing: bool,
    slots: &'a BTreeMap<u32, BTreeMap<Slot, &'a DumpEntry>>,
}

fn rank_list(ranks: &[u32]) -> String {
    let list: Vec<String> = ranks.iter().map(u32::to_string).collect();
    format!("[{}]", list.join(", "))
}

/// `4194304` bytes as `"4MiB"`, and a tensor name for a size and dtype.
fn tensor_name(call: &Call) -> String {
    format!(
        "{}_{}",
        call.dtype.as_str(),
        sim::units::format_size(call.size_bytes)
    )
}

/// Where each rank stands at a step, for the step's comment.
fn states(input: &RenderInput, step: &Step) -> String {
    let mut by_state: BTreeMap<&str, Vec<u32>> = BTreeMap::new();
    for &rank in &input.groups[&step.entry.pg_name].1 {
        let state = input.slots[&rank]
            .get(&slot(step.entry))
            .map_or("not issued", |e| e.state.name());
        by_state.entry(state).or_default().push(rank);
    }
    let parts: Vec<String> = by_state
        .iter()
        .map(|(state, ranks)| format!("{state} on {}", rank_list(ranks)))
        .collect();
    parts.join(", ")
}

fn render(input: &RenderInput) -> String {
    let mut out = String::new();
    let steps = input.steps;
    let _ = writeln!(
        out,
        "# Imported from the Flight Recorder dumps in {} by `c10dsim import flight-recorder`\n\
         # (docs/flight-recorder.md): {} collective{}, those rank {} kept (the rank that kept\n\
         # the most) and, each after that rank's call before it, those other ranks kept and it\n\
         # lacks; each host_sleep_us is the time between two calls. Where a rank parts from\n\
         # them is a [[fault]] at the end.\n\
         # TORCH_NCCL_DESYNC_DEBUG gives the desync report when the watchdog times out.",
        comment_safe(input.source),
        steps.len(),
        if steps.len() == 1 { "" } else { "s" },
        input.reference,
    );
    let _ = writeln!(out, "name = \"flight_recorder_import\"");
    let _ = writeln!(
        out,
        "about = \"the collectives in the Flight Recorder dumps of {} rank{}, replayed to their end\"",
        input.world_size,
        if input.world_size == 1 { "" } else { "s" }
    );
    // Simulated time to reach the end: the host gaps, a busy stream's sleep, then the
    // timeout and the watchdog's dump wait (4 × 15 s), with a minute to spare.
    let mut total_us: u64 = steps
        .windows(2)
        .map(|pair| gap_us(pair[0].entry.time_created_ns, pair[1].entry.time_created_ns))
        .sum();
    if let Some((index, _)) = input.busy {
        total_us += busy_sleep_us(steps[*index].entry.timeout_ms);
    }
    let longest_timeout_ms = steps.iter().map(|s| s.entry.timeout_ms).max().unwrap_or(0);
    let needed_s = (total_us / 1_000_000 + longest_timeout_ms / 1000 + 120).min(86_400);
    if needed_s > 3600 {
        let _ = writeln!(out, "max_sim_time_s = {needed_s}");
    }
    let _ = writeln!(out, "\n[cluster]\nranks = {}", input.world_size);
    // Groups, with the timeout their last recorded entry had and the SeqNum of their first.
    let mut timeouts: BTreeMap<&str, u64> = BTreeMap::new();
    let mut first_seq_nums: BTreeMap<&str, u64> = BTreeMap::new();
    for step in steps {
        timeouts.insert(step.entry.pg_name.as_str(), step.entry.timeout_ms);
        (first_seq_nums.entry(step.entry.pg_name.as_str())).or_insert(step.entry.collective_seq_id);
    }
    for (pg, (name, ranks)) in input.groups {
        let _ = writeln!(out, "\n[groups.{name}]");
        if name != "world" {
            let _ = writeln!(out, "ranks = {}", rank_list(ranks));
        }
        let _ = writeln!(out, "eager_init = true");
        if let Some(timeout_ms) = timeouts.get(pg.as_str()) {
            let _ = writeln!(
                out,
                "timeout_s = {}   # timeout_ms = {timeout_ms} in the dumps",
                *timeout_ms as f64 / 1000.0
            );
        }
        // A ring buffer that wrapped dropped the group's first collectives: the replay's
        // SeqNums go on from the dumps'.
        if let Some(first) = first_seq_nums.get(pg.as_str()).filter(|&&first| first > 1) {
            let _ = writeln!(
                out,
                "first_seq_num = {first}   # the first SeqNum every member's dump holds or never issued"
            );
        }
    }
    let _ = writeln!(out, "\n[env]\nTORCH_NCCL_DESYNC_DEBUG = 1");
    let mut tensors: BTreeMap<String, &Call> = BTreeMap::new();
    for step in steps.iter().filter(|s| s.call.key != "barrier") {
        tensors.insert(tensor_name(&step.call), &step.call);
    }
    let _ = writeln!(out, "\n[tensors]");
    for (name, call) in &tensors {
        let _ = writeln!(
            out,
            "{name} = {{ size = \"{}\", dtype = \"{}\" }}",
            sim::units::format_size(call.size_bytes),
            call.dtype.as_str()
        );
    }
    let mut previous_ns: Option<u64> = None;
    for (index, step) in steps.iter().enumerate() {
        let entry = step.entry;
        if let Some(previous_ns) = previous_ns {
            let gap_us = gap_us(previous_ns, entry.time_created_ns);
            if gap_us > 0 {
                let _ = writeln!(out, "\n[[op]]\nhost_sleep_us = {gap_us}");
            }
        }
        previous_ns = Some(entry.time_created_ns);
        if let Some((busy_index, ranks)) = input.busy {
            if *busy_index == index {
                let sleep_us = busy_sleep_us(entry.timeout_ms);
                let why = if input.timing {
                    "never started it"
                } else {
                    "never completed it (without timing, the dumps cannot tell a busy\n# stream from a kernel that started and never finished)"
                };
                let _ = writeln!(
                    out,
                    "\n# Every rank issued SeqNum {}; ranks {} {why}:\n# a GPU sleep of twice the timeout stands for what kept their streams busy.\n[[op]]\nlabel = \"busy_before_{}\"\ngpu_sleep_us = {sleep_us}\nranks = {}",
                    entry.collective_seq_id,
                    rank_list(ranks),
                    step.label,
                    rank_list(ranks)
                );
            }
        }
        let frame = entry
            .frames
            .iter()
            .find(|f| !f.filename.contains("-packages/"))
            .or(entry.frames.first())
            .map(|f| comment_safe(&format!(", from {} ({}:{})", f.name, f.filename, f.line)))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "\n# SeqNum {} {} {:?} {:?}{frame}: {}",
            entry.collective_seq_id,
            comment_safe(&entry.profiling_name),
            entry.input_sizes,
            entry.input_dtypes,
            states(input, step)
        );
        let _ = writeln!(out, "[[op]]\nlabel = \"{}\"", step.label);
        if step.call.key == "barrier" {
            let _ = writeln!(out, "barrier = true");
        } else {
            let _ = writeln!(out, "{} = \"{}\"", step.call.key, tensor_name(&step.call));
        }
        let group = &input.groups[&entry.pg_name].0;
        if group != "world" {
            let _ = writeln!(out, "group = \"{group}\"");
        }
    }
    let _ = writeln!(
        out,
        "\n# The program waits for its GPU work, as a training step does before its next one.\n[[op]]\ndevice_sync = true"
    );
    for ((index, departure), ranks) in input.departures {
        let step = &steps[*index];
        let _ = writeln!(
            out,
            "\n[[fault]]\nranks = {}\nat = \"{}\"",
            rank_list(ranks),
            step.label
        );
        match departure {
            Departure::Hang => {
                let _ = writeln!(
                    out,
                    "kind = \"hang\"   # never issued SeqNum {}",
                    step.entry.collective_seq_id
                );
            }
            Departure::Mismatch {
                key,
                size_bytes,
                dtype,
            } => {
                let _ = writeln!(out, "kind = \"mismatch\"");
                if *key != step.call.key {
                    let _ = writeln!(out, "collective = \"{key}\"");
                }
                // A fault's `dtype` alone keeps the op's element count; its size says where
                // the rank's differs.
                let mut default_bytes = step.call.size_bytes;
                if *dtype != step.call.dtype {
                    let _ = writeln!(out, "dtype = \"{}\"", dtype.as_str());
                    default_bytes =
                        default_bytes.div_ceil(step.call.dtype.size_bytes()) * dtype.size_bytes();
                }
                if *size_bytes != default_bytes {
                    let _ = writeln!(out, "size = \"{}\"", sim::units::format_size(*size_bytes));
                }
            }
        }
    }
    out
}

/// What the dumps' `pg_status` shows and no dump's entries can replay, a sentence each: a group
/// whose members enqueued different numbers of its collectives, where no dump holds the first
/// collective the furthest-behind members never issued (the buffers of the ranks that issued it
/// wrapped past it), so the replay cannot show them missing it.
pub fn unreplayed(dumps: &[FlightRecorderDump]) -> Vec<String> {
    let dumps = &*split_groups_apart(dumps);
    let kept: BTreeSet<(&str, u64)> = (dumps.iter().flat_map(|d| &d.entries))
        .filter(|e| !e.is_p2p)
        .map(|e| (e.pg_name.as_str(), e.collective_seq_id))
        .collect();
    let mut enqueued: BTreeMap<&str, (&str, BTreeMap<i64, Vec<u32>>)> = BTreeMap::new();
    for dump in dumps {
        for group in &dump.groups {
            let (_, by_count) = (enqueued.entry(group.name.as_str()))
                .or_insert_with(|| (group.desc.as_str(), BTreeMap::new()));
            by_count
                .entry(group.last_enqueued)
                .or_default()
                .push(dump.rank);
        }
    }
    let mut lines = Vec::new();
    for (pg, (desc, by_count)) in enqueued {
        let (Some((&behind, laggards)), Some((&ahead, leaders))) =
            (by_count.first_key_value(), by_count.last_key_value())
        else {
            continue;
        };
        // SeqNums count from 1; a member that enqueued none says -1.
        let missed = u64::try_from(behind.saturating_add(1)).unwrap_or(0).max(1);
        if behind == ahead || kept.contains(&(pg, missed)) {
            continue;
        }
        let named = |ranks: &[u32]| sim::ranks::RankSet::from_ranks(ranks.iter().copied()).named();
        let group = group_name(pg, desc, &BTreeSet::new());
        let laggards_enqueued = if behind < 1 {
            format!("enqueued no collective of {group}")
        } else {
            format!("enqueued collectives of {group} up to {behind}")
        };
        lines.push(format!(
            "not replayed: {} {laggards_enqueued}, {} up to {ahead} (pg_status); collective {missed} of {group} is in no dump (the ring buffers that held it wrapped), so the replay cannot show {} never issuing it",
            named(laggards),
            named(leaders),
            named(laggards),
        ));
    }
    lines
}

/// The verdicts of a run of an imported scenario: each desync report's verdict (with every rank
/// whose watchdog gave it, a folded record's `stands_for` included), then each mismatch finding; a sentence when there is neither.
pub fn verdict(timeline: &Timeline) -> Vec<String> {
    let mut verdicts: BTreeMap<String, sim::ranks::RankSet> = BTreeMap::new();
    let mut order = Vec::new();
    for record in &timeline.watchdog {
        if record.event != WatchdogEvent::DesyncReport {
            continue;
        }
        let Some((_, verdict)) = record.message.split_once("verdict: ") else {
            continue;
        };
        let verdict = verdict.trim().to_string();
        if !verdicts.contains_key(&verdict) {
            order.push(verdict.clone());
        }
        // A folded record is every rank it stands for (docs/scale.md).
        let reported = verdicts.entry(verdict).or_default();
        *reported = reported.union(&record.ranks());
    }
    let mut lines: Vec<String> = order
        .into_iter()
        .map(|verdict| {
            let who = verdicts[&verdict].named();
            format!("desync report ({who}'s watchdog): {verdict}")
        })
        .collect();
    for finding in &timeline.findings {
        if finding.kind == FindingKind::Mismatch {
            lines.push(format!("mismatch: {}", finding.message));
        }
    }
    if lines.is_empty() {
        lines.push(
            "no watchdog timeout and no mismatch: every collective in the dumps completes when replayed"
                .to_string(),
        );
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The dumps of a simulated two-rank run: three all_reduces, `fault` at the third on
    /// rank 1.
    fn simulated(env: &str, fault: &str) -> Vec<FlightRecorderDump> {
        let text = format!(
            "[cluster]\nranks = 2\n[groups.world]\neager_init = true\ntimeout_s = 1\n[env]\n{env}\n\
             [tensors]\ng = \"4MiB\"\n[[op]]\nlabel = \"a\"\nall_reduce = \"g\"\n[[op]]\n\
             host_sleep_us = 500\n[[op]]\nlabel = \"b\"\nall_reduce = \"g\"\n[[op]]\nlabel = \"c\"\n\
             all_reduce = \"g\"\n[[op]]\ndevice_sync = true\n\
             [[fault]]\nranks = [1]\nat = \"c\"\n{fault}\n"
        );
        sim::engine::simulate(&sim::scenario::parse("fr.toml", &text).unwrap()).flight_recorder
    }

    /// The verdicts of the imported scenario's run.
    fn replayed(text: &str) -> Vec<String> {
        let scenario =
            sim::scenario::parse("imported.toml", text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        verdict(&sim::engine::simulate(&scenario))
    }

    #[test]
    fn a_desync_verdict_names_every_rank_its_watchdog_record_stands_for() {
        // Eight ranks, rank 1 issuing the other collective: ranks 0 and 2-7 behave alike, so
        // one watchdog record stands for all seven; with rank 1's, all eight watchdogs reported.
        let text = "[cluster]\nranks = 8\n[groups.world]\neager_init = true\ntimeout_s = 1\n\
             [env]\nTORCH_NCCL_DESYNC_DEBUG = 1\n[tensors]\ng = \"4MiB\"\n\
             [[op]]\nlabel = \"a\"\nall_reduce = \"g\"\n[[op]]\ndevice_sync = true\n\
             [[fault]]\nranks = [1]\nat = \"a\"\nkind = \"mismatch\"\ncollective = \"all_gather\"\n";
        let timeline = sim::engine::simulate(&sim::scenario::parse("fr.toml", text).unwrap());
        assert!(
            (timeline.watchdog.iter()).any(|record| record.stands_for.count() == 7),
            "the record of ranks 0 and 2-7 is folded"
        );
        let verdicts = verdict(&timeline);
        assert!(
            verdicts[0].starts_with("desync report (ranks 0-7 (8 ranks)'s watchdog): "),
            "{verdicts:?}"
        );
    }

    #[test]
    fn a_rank_that_never_issued_a_collective_hangs_there() {
        let text = scenario(&simulated("", "kind = \"hang\""), "sim").unwrap();
        assert!(
            text.contains("[[fault]]\nranks = [1]\nat = \"all_reduce_3\"\nkind = \"hang\""),
            "{text}"
        );
        assert!(text.contains("timeout_s = 1 "), "{text}");
        assert!(
            text.contains("g_4MiB")
                || text.contains("f32_4MiB = { size = \"4MiB\", dtype = \"f32\" }"),
            "{text}"
        );
        // The host time between the calls (500 µs and the calls' own costs).
        assert!(text.contains("host_sleep_us = 5"), "{text}");
        assert_eq!(
            replayed(&text),
            ["desync report (rank 0's watchdog): rank 1 never joined collective 3 (ALLREDUCE, world); rank 0 waiting"]
        );
        // Same dumps, same text.
        assert_eq!(
            scenario(&simulated("", "kind = \"hang\""), "sim").unwrap(),
            text
        );
    }

    #[test]
    fn dumps_that_list_no_default_group_are_one_job_of_their_ranks() {
        // A lazily initialised world no rank used: PyTorch lists only the groups whose
        // communicator a rank created, so no dump lists the world; the dumps, one per rank, say
        // how many ranks it has. Rank 1 hangs at tp's second all_reduce.
        let text = "[cluster]\nranks = 4\n[groups.world]\ntimeout_s = 1\n\
                    [groups.tp]\nranks = [0, 1]\ntimeout_s = 1\n\
                    [groups.dp]\nranks = [2, 3]\ntimeout_s = 1\n[tensors]\ng = \"4MiB\"\n\
                    [[op]]\nranks = [0, 1]\nall_reduce = \"g\"\ngroup = \"tp\"\n\
                    [[op]]\nranks = [2, 3]\nall_reduce = \"g\"\ngroup = \"dp\"\n\
                    [[op]]\nranks = [0, 1]\nlabel = \"t2\"\nall_reduce = \"g\"\ngroup = \"tp\"\n\
                    [[op]]\nranks = [2, 3]\nhost_sleep_us = 5_000_000\n\
                    [[fault]]\nranks = [1]\nat = \"t2\"\nkind = \"hang\"\n";
        let dumps = sim::engine::simulate(&sim::scenario::parse("lazy.toml", text).unwrap())
            .flight_recorder;
        assert_eq!(dumps.len(), 4);
        assert!(dumps
            .iter()
            .all(|d| d.groups.iter().all(|g| g.desc != "default_pg")));
        let imported = scenario(&dumps, "sim").unwrap();
        assert!(imported.contains("[cluster]\nranks = 4\n"), "{imported}");
        assert!(
            imported.contains("[groups.tp]\nranks = [0, 1]"),
            "{imported}"
        );
        assert!(
            imported.contains("[groups.dp]\nranks = [2, 3]"),
            "{imported}"
        );
        assert!(
            imported.contains("[[fault]]\nranks = [1]\nat = \"tp_all_reduce_2\"\nkind = \"hang\""),
            "{imported}"
        );
    }

    #[test]
    fn dumps_with_the_recorder_off_have_nothing_to_import() {
        // `TORCH_FR_BUFFER_SIZE = 0`: the recorder records no entry and no group.
        let dumps = simulated("TORCH_FR_BUFFER_SIZE = 0", "kind = \"hang\"");
        assert!(dumps
            .iter()
            .all(|d| d.groups.is_empty() && d.entries.is_empty()));
        let message = scenario(&dumps, "sim").unwrap_err().message;
        assert!(
            message.starts_with("no collective in the dumps to import"),
            "{message}"
        );
    }

    #[test]
    fn subgroups_of_one_name_and_other_ranks_are_told_apart() {
        // Groups tp = [0, 1] and dp = [2, 3], rank 3 hanging at dp's all_reduce; then named
        // alike, "1", as a split_group names its subgroups.
        let text = "[cluster]\nranks = 4\n[groups.world]\neager_init = true\ntimeout_s = 1\n\
                    [groups.tp]\nranks = [0, 1]\neager_init = true\ntimeout_s = 1\n\
                    [groups.dp]\nranks = [2, 3]\neager_init = true\ntimeout_s = 1\n\
                    [tensors]\ng = \"4MiB\"\n[[op]]\nall_reduce = \"g\"\n\
                    [[op]]\nall_reduce = \"g\"\ngroup = \"tp\"\n\
                    [[op]]\nlabel = \"dp_ar\"\nall_reduce = \"g\"\ngroup = \"dp\"\n\
                    [[op]]\nall_reduce = \"g\"\n[[op]]\ndevice_sync = true\n\
                    [[fault]]\nranks = [3]\nat = \"dp_ar\"\nkind = \"hang\"\n";
        let mut dumps = sim::engine::simulate(&sim::scenario::parse("split.toml", text).unwrap())
            .flight_recorder;
        let apart = replayed(&scenario(&dumps, "sim").unwrap());
        for dump in dumps.iter_mut().filter(|d| d.rank >= 2) {
            for group in dump.groups.iter_mut().filter(|g| g.name == "2") {
                group.name = "1".into();
            }
            for entry in dump.entries.iter_mut().filter(|e| e.pg_name == "2") {
                entry.pg_name = "1".into();
            }
        }
        let ranks: Vec<u32> = dumps.iter().map(|d| d.rank).collect();
        assert_eq!(ranks, [0, 1, 2, 3]);
        let text = scenario(&dumps, "sim").unwrap();
        assert!(text.contains("[groups.dp]\nranks = [2, 3]\n"), "{text}");
        let verdicts = replayed(&text);
        assert_eq!(verdicts, apart);
        assert!(
            verdicts.contains(&"desync report (rank 2's watchdog): rank 3 never joined collective 1 (ALLREDUCE, dp); rank 2 waiting".to_string()),
            "{verdicts:?}"
        );
        assert!(unreplayed(&dumps).is_empty(), "{:?}", unreplayed(&dumps));
    }

    #[test]
    fn a_wrapped_buffer_s_replay_numbers_on_from_its_first_seq_num() {
        // Each buffer keeps one entry: SeqNum 3 on rank 0, 2 on rank 1 (which hung at 3).
        let dumps = simulated("TORCH_FR_BUFFER_SIZE = 1", "kind = \"hang\"");
        let text = scenario(&dumps, "sim").unwrap();
        assert!(text.contains("\nfirst_seq_num = 3 "), "{text}");
        assert_eq!(
            replayed(&text),
            ["desync report (rank 0's watchdog): rank 1 never joined collective 3 (ALLREDUCE, world); rank 0 waiting"]
        );
        // A SeqNum no scenario can number up to is refused.
        let mut far = dumps;
        for entry in far.iter_mut().flat_map(|d| &mut d.entries) {
            entry.collective_seq_id += MAX_FIRST_SEQ_NUM;
        }
        let refused = scenario(&far, "sim").unwrap_err().message;
        assert!(
            refused.contains("c10dsim numbers a group's collectives up to 1000000000000"),
            "{refused}"
        );
    }

    #[test]
    fn another_kind_or_size_is_a_mismatch() {
        let text = scenario(
            &simulated("", "kind = \"mismatch\"\nsize = \"2MiB\""),
            "sim",
        )
        .unwrap();
        assert!(
            text.contains("kind = \"mismatch\"\nsize = \"2MiB\"\n"),
            "{text}"
        );
        assert!(!text.contains("collective = "), "{text}");
        let verdicts = replayed(&text);
        assert!(
            verdicts[0].contains("ranks disagree on the op at 3"),
            "{verdicts:?}"
        );
        assert!(
            verdicts[1].contains("rank 1 issued ALLREDUCE of 2MiB"),
            "{verdicts:?}"
        );
        let text = scenario(
            &simulated("", "kind = \"mismatch\"\ncollective = \"broadcast\""),
            "sim",
        )
        .unwrap();
        assert!(
            text.contains("kind = \"mismatch\"\ncollective = \"broadcast\"\n"),
            "{text}"
        );
    }

    /// Rank 1 calls `barrier()` where rank 0 issues an all_reduce of 1MiB: the scenario's
    /// fault has rank 1 issue the barrier's all_reduce of 4B (a mismatch fault names no
    /// `barrier`), and the replay names the same two calls.
    #[test]
    fn a_barrier_where_the_others_issue_a_collective_is_its_all_reduce() {
        let text = "[cluster]\nranks = 2\n[groups.world]\neager_init = true\ntimeout_s = 1\n\
            [tensors]\nx = \"1MiB\"\n[[op]]\nlabel = \"a\"\nranks = [0]\nall_reduce = \"x\"\n\
            [[op]]\nlabel = \"b\"\nranks = [1]\nbarrier = true\n";
        let timeline = sim::engine::simulate(&sim::scenario::parse("fr.toml", text).unwrap());
        let text = scenario(&timeline.flight_recorder, "sim").unwrap();
        assert!(
            text.contains("kind = \"mismatch\"\nsize = \"4B\"\n"),
            "{text}"
        );
        let verdicts = replayed(&text);
        assert!(
            (verdicts.iter()).any(|line| line.starts_with("mismatch: ")
                && line.contains("rank 0 issued ALLREDUCE of 1MiB")
                && line.contains("rank 1 issued ALLREDUCE of 4B")),
            "{verdicts:?}"
        );
    }

    /// Rank 1 calls `barrier()` where rank 0 issues an all_reduce of one f32 element: the same
    /// call to ProcessGroupNCCL (R16), which the run completed, so the import replays them
    /// alike (it wrote a mismatch fault that changed nothing, and refused its own scenario).
    #[test]
    fn a_barrier_where_the_others_all_reduce_its_one_element_is_no_mismatch() {
        let text = "[cluster]\nranks = 2\n[groups.world]\neager_init = true\ntimeout_s = 1\n\
            [tensors]\nx = \"4B\"\n[[op]]\nlabel = \"a\"\nranks = [0]\nall_reduce = \"x\"\n\
            [[op]]\nlabel = \"b\"\nranks = [1]\nbarrier = true\n\
            [[op]]\nlabel = \"c\"\nall_reduce = \"x\"\n\
            [[fault]]\nranks = [1]\nat = \"c\"\nkind = \"hang\"\n";
        let timeline = sim::engine::simulate(&sim::scenario::parse("fr.toml", text).unwrap());
        let text = scenario(&timeline.flight_recorder, "sim").unwrap();
        assert!(!text.contains("kind = \"mismatch\""), "{text}");
        let verdicts = replayed(&text);
        assert!(
            verdicts[0].contains("rank 1 never joined collective 2"),
            "{verdicts:?}"
        );
    }

    /// Three calls at one SeqNum: ranks 0 and 3 agree, ranks 1 and 2 each issue a size of their
    /// own. One finding of ranks 1 and 2 names every call (R16); the verdict prints it once.
    #[test]
    fn a_mismatch_of_three_calls_is_one_verdict_line() {
        let text = "[cluster]\nranks = 4\n[groups.world]\ntimeout_s = 1\n[tensors]\nx = \"1MiB\"\n\
            [[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\n\
            [[fault]]\nranks = [1]\nat = \"ar\"\nkind = \"mismatch\"\nsize = \"2MiB\"\n\
            [[fault]]\nranks = [2]\nat = \"ar\"\nkind = \"mismatch\"\nsize = \"3MiB\"\n";
        let timeline = sim::engine::simulate(&sim::scenario::parse("three.toml", text).unwrap());
        let findings: Vec<_> = (timeline.findings.iter())
            .filter(|f| f.kind == FindingKind::Mismatch)
            .collect();
        assert_eq!(findings.len(), 1, "{findings:?}");
        assert_eq!(findings[0].stands_for, sim::ranks::RankSet::range(1, 2));
        let lines = verdict(&timeline);
        let mismatches: Vec<_> = (lines.iter())
            .filter(|line| line.starts_with("mismatch: "))
            .collect();
        assert_eq!(mismatches.len(), 1, "{lines:?}");
        assert!(
            mismatches[0].contains(
                "ranks 0,3 (2 ranks) issued ALLREDUCE of 1MiB (ar, line 7), rank 1 issued ALLREDUCE \
                 of 2MiB (ar, line 7), rank 2 issued ALLREDUCE of 3MiB (ar, line 7)"
            ),
            "{lines:?}"
        );
    }

    #[test]
    fn another_dtype_is_a_dtype_mismatch_not_a_size_one() {
        // The same shape as bf16 (half the bytes): the dtype alone.
        let text = scenario(
            &simulated("", "kind = \"mismatch\"\ndtype = \"bf16\""),
            "sim",
        )
        .unwrap();
        assert!(
            text.contains("kind = \"mismatch\"\ndtype = \"bf16\"\n\n")
                || text.ends_with("kind = \"mismatch\"\ndtype = \"bf16\"\n"),
            "{text}"
        );
        assert!(!text.contains("\nsize = "), "{text}");
        let verdicts = replayed(&text);
        assert!(
            verdicts[1].contains("rank 0 issued ALLREDUCE of 4MiB f32")
                && verdicts[1].contains("rank 1 issued ALLREDUCE of 2MiB bf16"),
            "{verdicts:?}"
        );
        // The same bytes as bf16 (twice the elements): a mismatch all the same, of dtype.
        let text = scenario(
            &simulated("", "kind = \"mismatch\"\ndtype = \"bf16\"\nsize = \"4MiB\""),
            "sim",
        )
        .unwrap();
        assert!(
            text.contains("kind = \"mismatch\"\ndtype = \"bf16\"\nsize = \"4MiB\"\n"),
            "{text}"
        );
        let verdicts = replayed(&text);
        assert!(
            verdicts[1].contains("rank 0 issued ALLREDUCE of 4MiB f32")
                && verdicts[1].contains("rank 1 issued ALLREDUCE of 4MiB bf16"),
            "{verdicts:?}"
        );
    }

    #[test]
    fn a_full_ring_buffer_starts_the_program_where_every_rank_still_has_entries() {
        // Rank 0 kept SeqNums 2 and 3, rank 1 (hung before 3) 1 and 2.
        let dumps = simulated("TORCH_FR_BUFFER_SIZE = 2", "kind = \"hang\"");
        let text = scenario(&dumps, "sim").unwrap();
        assert!(!text.contains("label = \"all_reduce_1\""), "{text}");
        assert!(text.contains("label = \"all_reduce_2\""), "{text}");
        assert!(
            text.contains("at = \"all_reduce_3\"\nkind = \"hang\""),
            "{text}"
        );
    }

    #[test]
    fn every_rank_issued_it_and_one_never_started_it_a_busy_stream() {
        let real = crate::flight_recorder::read(
            include_bytes!("../../../tests/data/torch/recorded/fr/timeout_rank0"),
            0,
        )
        .unwrap();
        let text = scenario(&[real], "recorded/fr").unwrap();
        assert!(
            text.contains(
                "gpu_sleep_us = 2000000\nranks = [0]\n\n# SeqNum 47 nccl:all_reduce [[1048576]]"
            ),
            "{text}"
        );
        // The frame shown is the program's, not PyTorch's.
        assert!(
            text.contains("from ddp_step_fn (/work/main/tests/data/torch/probes/train_step.py:47)"),
            "{text}"
        );
        assert_eq!(
            replayed(&text),
            ["desync report (rank 0's watchdog): every rank enqueued collective 47; rank 0 has not started its kernel: its stream is still busy before it"]
        );
    }

    #[test]
    fn dumps_that_cannot_be_imported_say_why() {
        let mut dumps = simulated("", "kind = \"hang\"");
        let message = |dumps: &[FlightRecorderDump]| scenario(dumps, "sim").unwrap_err().message;
        assert!(message(&dumps[..1]).contains("no dump for rank 1"));
        let mut twice = dumps.clone();
        twice[1].rank = 0;
        assert_eq!(message(&twice), "two dumps for rank 0");
        let mut other_job = dumps.clone();
        other_job[1].groups[0].ranks = vec![0, 1, 2].into();
        assert_eq!(
            message(&other_job),
            "rank 1's default group lists ranks [0, 1, 2], rank 0's [0, 1]: the dumps are not of one job"
        );
        let mut odd_dtype = dumps.clone();
        odd_dtype[0].entries[0].input_dtypes = vec!["Float9".into()];
        assert!(
            message(&odd_dtype).contains(
                "record_id 0: dtype \"Float9\" of nccl:all_reduce is not one c10dsim knows"
            ),
            "{}",
            message(&odd_dtype)
        );
        dumps[0].entries[0].profiling_name = "nccl:gather".into();
        assert!(message(&dumps).contains("\"nccl:gather\" is not a collective c10dsim models"));
        let mut coalesced = dumps.clone();
        coalesced[0].entries[1].profiling_name = "nccl:coalesced".into();
        coalesced[0].entries[1].collective_seq_id = coalesced[0].entries[0].collective_seq_id;
        assert!(
            message(&coalesced).contains("record_id 1: nccl:coalesced entries (a batch_isend_irecv, or a coalescing manager's block of calls other than all_reduce, all_gather_into_tensor and reduce_scatter_tensor, whose blocks have names of their own) are not imported yet"),
            "a batch entry shares the collective count of the call before it: {}",
            message(&coalesced)
        );
        dumps[0].entries[0].is_p2p = true;
        assert!(message(&dumps).contains("point-to-point entries"));
        assert_eq!(message(&[]), "no dumps to import");
    }

    #[test]
    fn an_int_where_another_rank_has_a_float_is_refused_not_replayed_as_one_call() {
        // Int and Float are both 4-byte f32 to the scenario: importing them as one call would
        // hide the mismatch torchfrtrace reports.
        let mut dumps = simulated("", "kind = \"hang\"");
        dumps[1].entries[0].input_dtypes = vec!["Int".into()];
        let message = scenario(&dumps, "sim").unwrap_err().message;
        assert!(
            message.starts_with("rank 1, record_id 0: nccl:all_reduce of dtype \"Int\" where rank 0 has \"Float\": a dtype mismatch the scenario cannot write"),
            "{message}"
        );
    }

    #[test]
    fn a_coalesced_block_counts_each_tensor_in_its_own_dtype() {
        // `nccl:allreduce_coalesced` of a 1024-element float and a 1024-element bfloat16: 4 KiB
        // and 2 KiB. The first tensor's dtype made it 8 KiB.
        let mut dumps = simulated("", "kind = \"hang\"");
        for dump in &mut dumps {
            for entry in &mut dump.entries {
                entry.profiling_name = "nccl:allreduce_coalesced".into();
                entry.input_sizes = vec![vec![1024], vec![1024]];
                entry.input_dtypes = vec!["Float".into(), "BFloat16".into()];
            }
        }
        let text = scenario(&dumps, "sim").unwrap();
        assert!(text.contains("all_reduce = \"f32_6KiB\""), "{text}");
    }

    #[test]
    fn a_dtype_the_scenario_lacks_keeps_its_bytes() {
        let mut dumps = simulated("", "kind = \"hang\"");
        for dump in &mut dumps {
            for entry in &mut dump.entries {
                entry.input_sizes = vec![vec![1024]];
                entry.input_dtypes = vec!["UInt32".into()];
            }
        }
        let text = scenario(&dumps, "sim").unwrap();
        assert!(text.contains("all_reduce = \"f32_4KiB\""), "{text}");
        for (name, bytes) in [
            ("ComplexDouble", 16),
            ("UInt64", 8),
            ("UInt16", 2),
            ("Bool", 1),
        ] {
            assert_eq!(dtype(name).map(|(_, b)| b), Some(bytes), "{name}");
        }
    }

    #[test]
    fn a_group_the_rank_that_kept_the_most_is_not_in_is_replayed_too() {
        // Ranks 0 and 1 all_reduce twice in `tp`, ranks 2 and 3 once in `dp`, where rank 3
        // hangs: rank 0 kept the most, and `dp` is not in its sequence.
        let text = "[cluster]\nranks = 4\n[groups.world]\neager_init = true\n\
            [groups.tp]\nranks = [0, 1]\neager_init = true\ntimeout_s = 1\n\
            [groups.dp]\nranks = [2, 3]\neager_init = true\ntimeout_s = 1\n\
            [tensors]\ng = \"4MiB\"\n\
            [[op]]\nlabel = \"a\"\nall_reduce = \"g\"\ngroup = \"tp\"\n\
            [[op]]\nlabel = \"b\"\nall_reduce = \"g\"\ngroup = \"dp\"\n\
            [[op]]\nlabel = \"c\"\nall_reduce = \"g\"\ngroup = \"tp\"\n\
            [[op]]\ndevice_sync = true\n[[op]]\nhost_sleep_us = 5000000\n\
            [[fault]]\nranks = [3]\nat = \"b\"\nkind = \"hang\"\n";
        let dumps = sim::engine::simulate(&sim::scenario::parse("groups.toml", text).unwrap())
            .flight_recorder;
        assert_eq!(dumps.len(), 4);
        let text = scenario(&dumps, "sim").unwrap();
        for label in ["tp_all_reduce_1", "tp_all_reduce_2", "dp_all_reduce_1"] {
            assert!(text.contains(&format!("label = \"{label}\"")), "{text}");
        }
        assert!(
            text.contains("ranks = [3]\nat = \"dp_all_reduce_1\"\nkind = \"hang\""),
            "{text}"
        );
        assert_eq!(
            replayed(&text),
            ["desync report (rank 2's watchdog): rank 3 never joined collective 1 (ALLREDUCE, dp); rank 2 waiting"]
        );
    }

    #[test]
    fn without_a_hang_every_collective_completes() {
        let mut dumps = simulated("", "kind = \"hang\"");
        dumps[0].entries.pop();
        let text = scenario(&dumps, "sim").unwrap();
        assert!(!text.contains("\n[[fault]]\n"), "{text}");
        assert_eq!(
            replayed(&text),
            ["no watchdog timeout and no mismatch: every collective in the dumps completes when replayed"]
        );
    }
}
