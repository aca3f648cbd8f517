//! The Flight Recorder's snapshot of a rank at its dump (docs/flight-recorder.md): every
//! collective the rank created before the dump, finished or not — taken before the Timeline
//! drops the records of what never happened.
//!
//! About 950 lines, over half of them tests: one function builds a dump, and its tests run
//! scenarios through the engine to check each key PyTorch records, so they stay beside it.

use super::summary::FoldedWork;
use super::NEVER;
use crate::collective::CollectiveKind;
use crate::flight_recorder::{
    coalesced_profiling_name, dtype_name, group_names, profiling_name, DumpEntry, DumpGroup,
    EntryState, FlightRecorderDump, Frame, DUMP_VERSION,
};
use crate::pg::faults::RankFaults;
use crate::pg::work::WATCHDOG_POLL_NS;
use crate::scenario::{FaultKind, Op, OpKind, P2pTransfer, Scenario};
use crate::timeline::CollectiveRecord;

/// The first poll of the watchdog (every 100 ms from 0) at or after `at_ns`.
fn discovered_ns(at_ns: u64) -> u64 {
    at_ns.div_ceil(WATCHDOG_POLL_NS) * WATCHDOG_POLL_NS
}

/// An entry's input and output shapes for a call of `numel_in` and `numel_out` elements: one
/// each, or for a `_coalescing_manager` block of `tensors` tensors one per tensor, as PyTorch
/// lists a block's tensors (measured on PyTorch 2.11: three all_reduces of 1024 floats are
/// `[[1024], [1024], [1024]]`). A mismatch fault's size that does not split into as many equal
/// tensors is one shape of its whole size: the block's tensors it stands for are not known.
fn block_shapes((numel_in, numel_out): (u64, u64), tensors: u64) -> (Vec<Vec<u64>>, Vec<Vec<u64>>) {
    let tensors = if numel_in % tensors == 0 && numel_out % tensors == 0 {
        tensors
    } else {
        1
    };
    let each = |numel: u64| vec![vec![numel / tensors]; tensors as usize];
    (each(numel_in), each(numel_out))
}

/// The entries `ProcessGroupNCCL::pointToPoint` records for a batch's `transfers` on `group`,
/// each inside the coalescing, before the batch's own entry `batch` (its numbers are the last
/// transfer's): `nccl:send <rank>-><peer>` or `nccl:recv <rank><-<peer>` in ranks of the group,
/// its one tensor, each counting an op, with no events, so scheduled for good.
fn transfer_entries(
    scenario: &Scenario,
    rank: u32,
    group: usize,
    transfers: &[P2pTransfer],
    batch: &DumpEntry,
) -> Vec<DumpEntry> {
    let members = &scenario.groups[group].ranks;
    let size = members.len() as i64;
    let at = members.binary_search(&rank).unwrap_or(0) as i64;
    let last = transfers.len() as u64;
    (transfers.iter().zip(1..))
        .map(|(transfer, nth)| {
            let peer = (at + transfer.shift).rem_euclid(size);
            let dtype = scenario.tensors[transfer.tensor].dtype;
            let numel = scenario.tensor_bytes(transfer.tensor) / dtype.size_bytes();
            let dtypes = vec![dtype_name(dtype).to_string()];
            DumpEntry {
                op_id: batch.op_id - (last - nth),
                profiling_name: if transfer.send {
                    format!("nccl:send {at}->{peer}")
                } else {
                    format!("nccl:recv {at}<-{peer}")
                },
                duration_ms: None,
                input_sizes: vec![vec![numel]],
                input_dtypes: dtypes.clone(),
                output_sizes: vec![vec![numel]],
                output_dtypes: dtypes,
                state: EntryState::Scheduled,
                time_discovered_started_ns: None,
                time_discovered_completed_ns: None,
                retired: false,
                is_p2p: true,
                ..batch.clone()
            }
        })
        .collect()
}

/// One call the rank made before its dump, as the dump's counters and status see it.
struct Call {
    process_group: usize,
    point_to_point: bool,
    seq_num: u64,
    /// When its kernel started (a folded call: ended), `NEVER` for not yet.
    started_ns: u64,
    end_ns: u64,
    /// The sends and receives of a batch, else 0.
    transfers: u64,
}

/// The sends and receives of `op`'s call: a `batch_isend_irecv`'s, else none.
fn transfers(op: &Op) -> &[P2pTransfer] {
    match &op.kind {
        OpKind::BatchP2p { transfers, .. } => transfers,
        _ => &[],
    }
}

/// The entries PyTorch records for a call with `transfers` sends and receives: one, or for a
/// batch one per send or receive (`pointToPoint` inside the coalescing) and the batch's own
/// (`endCoalescing`'s Work).
fn entries_of(transfers: u64) -> u64 {
    match transfers {
        0 => 1,
        k => k + 1,
    }
}

/// A process group's counters as a Flight Recorder entry records them.
#[derive(Clone, Copy, Default)]
struct Numbers {
    op_id: u64,
    collective_seq_id: u64,
    p2p_seq_id: u64,
}

/// `rank`'s dump at `dump_ns`: the last `TORCH_FR_BUFFER_SIZE` collectives it created by then,
/// from its records (`u64::MAX` for what never happened), each in its state at the dump, and
/// the groups whose communicator it created by then (per group, when: `comm_created_ns`);
/// `group_ranks` holds each group's ranks, shared by every dump.
pub(super) fn dump(
    scenario: &Scenario,
    group_ranks: &[std::sync::Arc<[u32]>],
    (rank, comm_created_ns): (u32, &[u64]),
    dump_ns: u64,
    (folded, records): (&[FoldedWork], &[CollectiveRecord]),
) -> FlightRecorderDump {
    let timing = scenario.env.enable_timing || scenario.env.desync_debug;
    let faults = RankFaults::new(scenario, rank);
    let created: Vec<&CollectiveRecord> = records
        .iter()
        .filter(|record| record.host_start_ns <= dump_ns)
        .collect();
    // PyTorch records a send or receive under the group it was called on (the default one).
    let process_group = |group: u16| scenario.process_group(usize::from(group));
    // The collective and element type a record's call issued: the op's, or a mismatch
    // fault's in its place — only in the op's first NCCL call (one tensor's, a block's, the
    // first bucket's): its first record of that iteration, all of which are on one group.
    let first_call = |record: &CollectiveRecord| {
        (records.iter())
            .find(|first| (first.op, first.iteration) == (record.op, record.iteration))
            .is_some_and(|first| first.seq_num() == record.seq_num())
    };
    let issued = |record: &CollectiveRecord| {
        let op = &scenario.ops[record.op as usize];
        match faults.at(op.index, record.iteration).map(|f| &f.kind) {
            Some(FaultKind::Mismatch {
                collective, dtype, ..
            }) if first_call(record) => (*collective, *dtype),
            _ => (
                op.kind
                    .collective()
                    .map_or(CollectiveKind::AllReduce, |(kind, _)| kind),
                op.kind.call_dtype(&scenario.tensors),
            ),
        }
    };
    // Every call the rank made before the dump, in order: a summarised run's folded calls
    // first (all of them where a record after them was created before the dump; else those
    // up to the first that had not ended by then, the rest maybe made after it), then its
    // records. Only records become entries.
    let folded_before: &[FoldedWork] = if created.is_empty() {
        let ended = folded
            .iter()
            .take_while(|work| work.end_ns <= dump_ns)
            .count();
        &folded[..ended]
    } else {
        folded
    };
    let calls: Vec<Call> = (folded_before.iter())
        .map(|work| {
            let op = &scenario.ops[work.op as usize];
            Call {
                process_group: process_group(work.group),
                point_to_point: op.kind.is_point_to_point(),
                seq_num: work.seq_num,
                started_ns: work.end_ns,
                end_ns: work.end_ns,
                transfers: transfers(op).len() as u64,
            }
        })
        .chain(created.iter().map(|record| Call {
            process_group: process_group(record.group),
            point_to_point: issued(record).0.is_point_to_point(),
            seq_num: record.seq_num(),
            started_ns: record.kernel_start_ns,
            end_ns: record.end_ns,
            transfers: transfers(&scenario.ops[record.op as usize]).len() as u64,
        }))
        .collect();
    // The recorder lists a process group once `initNCCLComm` created a communicator of it
    // (`record_pg_ranks`: the group's own, or a pair's for a send or receive on it), and takes
    // its status with its first entry; with the recorder off it records neither. A group that
    // ran collectives before the program had both.
    let recorder_on = scenario.env.trace_buffer_entries > 0;
    let communicator = |index: usize| {
        (comm_created_ns.iter().enumerate())
            .any(|(group, &at_ns)| at_ns <= dump_ns && process_group(group as u16) == index)
    };
    let groups = scenario
        .groups
        .iter()
        .enumerate()
        .filter(|(_, group)| !group.point_to_point && group.ranks.binary_search(&rank).is_ok())
        .filter_map(|(index, group)| {
            let recorded = group.collectives_before() > 0
                || calls.iter().any(|call| call.process_group == index);
            (recorder_on && (recorded || communicator(index))).then_some((index, recorded))
        })
        .map(|(index, recorded)| {
            let (name, desc) = group_names(scenario, index);
            // PyTorch's status holds the `SeqNum` of the Work it saw last, whichever counter
            // numbered it: a send's count among the point-to-point calls, a collective's among
            // the collectives. Enqueued: the latest call. Started: the highest number seen
            // started at a watchdog poll (a running maximum). Completed: the last Work the
            // watchdog retired, in the order of its polls and, within one, of the calls.
            // Before any call: −1, or the last of the collectives the group ran before the
            // program, all of them completed.
            let none = match scenario.groups[index].collectives_before() {
                0 => -1,
                before => before as i64,
            };
            let in_group =
                (calls.iter().enumerate()).filter(|(_, call)| call.process_group == index);
            let seen = |at_ns: u64| at_ns != NEVER && discovered_ns(at_ns) <= dump_ns;
            let last_completed = in_group
                .clone()
                .filter(|(_, call)| seen(call.end_ns))
                .max_by_key(|(order, call)| (discovered_ns(call.end_ns), *order))
                .map_or(none, |(_, call)| call.seq_num as i64);
            DumpGroup {
                name,
                desc,
                ranks: std::sync::Arc::clone(&group_ranks[index]),
                last_enqueued: in_group
                    .clone()
                    .next_back()
                    .map_or(none, |(_, call)| call.seq_num as i64),
                last_started: if timing {
                    in_group
                        .filter(|(_, call)| seen(call.started_ns))
                        .map(|(_, call)| call.seq_num as i64)
                        .max()
                        .unwrap_or(none)
                } else {
                    -1
                },
                last_completed,
                recorded,
            }
        })
        .collect();
    // A process group numbers its calls three ways: every call (`op_id`; each send and
    // receive of a batch), its collectives (`collective_seq_id`, a collective's SeqNum) and its
    // point-to-point calls (`p2p_seq_id`, a send's or a batch's SeqNum, whatever the peer).
    // PyTorch records all three counters, as they stand, with every entry; the collectives a
    // group ran before the program count in the first two. Each call's numbers here are those
    // of its last entry.
    let mut counted: std::collections::HashMap<usize, Numbers> = Default::default();
    let numbers: Vec<Numbers> = calls
        .iter()
        .map(|call| {
            let numbers = counted.entry(call.process_group).or_insert_with(|| {
                let before = scenario.groups[call.process_group].collectives_before();
                Numbers {
                    op_id: before,
                    collective_seq_id: before,
                    p2p_seq_id: 0,
                }
            });
            numbers.op_id += call.transfers.max(1);
            if call.point_to_point {
                numbers.p2p_seq_id = call.seq_num;
            } else {
                numbers.collective_seq_id = call.seq_num;
            }
            *numbers
        })
        .collect();
    // `record_id` counts every call of the rank: the collectives its groups ran before the
    // program (`first_seq_num`), then the folded ones.
    let collectives_before: u64 = (scenario.groups.iter())
        .filter(|group| !group.point_to_point && group.ranks.binary_search(&rank).is_ok())
        .map(|group| group.collectives_before())
        .sum();
    let folded_entries: u64 = (calls[..folded_before.len()].iter())
        .map(|call| entries_of(call.transfers))
        .sum();
    let calls = &calls[folded_before.len()..];
    let numbers = &numbers[folded_before.len()..];
    // The ring buffer keeps the last entries: those of the records from the one whose entries
    // reach back to them, less any of its first ones that are older.
    let buffer = scenario.env.trace_buffer_entries;
    let (mut first_kept, mut held) = (created.len(), 0);
    while first_kept > 0 && held < buffer {
        first_kept -= 1;
        held += entries_of(calls[first_kept].transfers);
    }
    let first_record_id = collectives_before
        + folded_entries
        + (calls[..first_kept].iter())
            .map(|call| entries_of(call.transfers))
            .sum::<u64>();
    let mut entries: Vec<DumpEntry> = created[first_kept..]
        .iter()
        .zip(&numbers[first_kept..])
        .flat_map(|(record, numbers)| {
            let op = &scenario.ops[record.op as usize];
            let pair = usize::from(record.group);
            let group = process_group(record.group);
            let barrier = matches!(op.kind, OpKind::Barrier { .. });
            let (kind, dtype) = issued(record);
            let members = scenario.groups[group].ranks.len() as u64;
            // A barrier all_reduces one float (`at::zeros({1})`), whatever bytes it is costed at.
            let numel = if barrier {
                1
            } else {
                record.bytes / dtype.size_bytes()
            };
            let (numel_in, numel_out) = kind.descriptor().work_numel.of(numel, members);
            let tensors = match op.kind {
                OpKind::Collective { tensor, .. } if op.kind.is_coalescing_block() => {
                    u64::from(scenario.tensors[tensor].count)
                }
                _ => 1,
            };
            let batch = kind == CollectiveKind::BatchP2p;
            // A batch's Work (`endCoalescing`'s `initWork`) is given no tensors: its sends and
            // receives, recorded before it, carry them.
            let (input_sizes, output_sizes) = if batch {
                (Vec::new(), Vec::new())
            } else {
                block_shapes((numel_in, numel_out), tensors)
            };
            let peer = scenario.groups[pair]
                .ranks
                .iter()
                .copied()
                .find(|&member| member != rank)
                .unwrap_or(rank);
            let profiling = match kind {
                CollectiveKind::Send => format!("nccl:send {rank}->{peer}"),
                CollectiveKind::Recv => format!("nccl:recv {rank}<-{peer}"),
                _ if barrier => "nccl:all_reduce_barrier".to_string(),
                _ if op.kind.is_coalescing_block() => coalesced_profiling_name(kind).to_string(),
                _ => profiling_name(kind).to_string(),
            };
            // `initWork` records `isP2POp(opType)`, false for a batch's `COALESCED` Work.
            let is_p2p = kind.is_point_to_point() && !batch;
            let completed = record.end_ns <= dump_ns;
            let started = timing && record.kernel_start_ns <= dump_ns;
            let state = if completed {
                EntryState::Completed
            } else if started {
                EntryState::Started
            } else {
                EntryState::Scheduled
            };
            let completed_seen_ns = completed.then(|| discovered_ns(record.end_ns));
            let (pg_name, pg_desc) = group_names(scenario, group);
            let dtypes = vec![dtype_name(dtype).to_string(); input_sizes.len()];
            let own = DumpEntry {
                record_id: 0,
                pg_id: group as u64,
                pg_name,
                pg_desc,
                collective_seq_id: numbers.collective_seq_id,
                p2p_seq_id: numbers.p2p_seq_id,
                op_id: numbers.op_id,
                profiling_name: profiling,
                time_created_ns: record.host_start_ns,
                duration_ms: (timing && completed)
                    .then(|| (record.end_ns - record.kernel_start_ns) as f64 / 1e6),
                input_sizes,
                input_dtypes: dtypes.clone(),
                output_sizes,
                output_dtypes: dtypes,
                state,
                time_discovered_started_ns: started
                    .then(|| discovered_ns(record.kernel_start_ns).min(dump_ns)),
                time_discovered_completed_ns: completed_seen_ns.map(|seen| seen.min(dump_ns)),
                retired: completed_seen_ns.is_some_and(|seen| seen <= dump_ns),
                timeout_ms: scenario.groups[group].timeout_ns / 1_000_000,
                is_p2p,
                thread_name: "python".to_string(),
                thread_id: "1".to_string(),
                frames: vec![Frame {
                    name: op.display_name(),
                    filename: scenario.path.clone(),
                    line: u64::from(op.line),
                }],
            };
            let mut made = transfer_entries(scenario, rank, group, transfers(op), &own);
            made.push(own);
            made
        })
        .collect();
    for (index, entry) in entries.iter_mut().enumerate() {
        entry.record_id = first_record_id + index as u64;
    }
    entries.drain(..entries.len().saturating_sub(buffer as usize));
    FlightRecorderDump {
        rank,
        stands_for: crate::ranks::RankSet::default(),
        version: DUMP_VERSION.to_string(),
        comm_lib_version: "c10dsim".to_string(),
        groups,
        entries,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flight_recorder::DUMP_VERSION;
    use crate::scenario::parse;

    /// Two ranks, three all_reduces of 4 MiB; rank 1 hangs before the third.
    fn dumps(env: &str, fault: &str) -> Vec<FlightRecorderDump> {
        let text = format!(
            "[cluster]\nranks = 2\n[groups.world]\neager_init = true\ntimeout_s = 1\n[env]\n{env}\n\
             [tensors]\ng = \"4MiB\"\n[[op]]\nlabel = \"a\"\nall_reduce = \"g\"\n[[op]]\nlabel = \"b\"\n\
             all_reduce = \"g\"\n[[op]]\nlabel = \"c\"\nall_reduce = \"g\"\n[[op]]\ndevice_sync = true\n\
             [[fault]]\nranks = [1]\nat = \"c\"\n{fault}\n"
        );
        crate::engine::simulate(&parse("fr.toml", &text).unwrap()).flight_recorder
    }

    #[test]
    fn each_rank_dumps_its_last_entries_with_their_states_at_the_dump() {
        let dumps = dumps("TORCH_FR_BUFFER_SIZE = 2", "kind = \"hang\"");
        assert_eq!(dumps.len(), 2);
        let (waiting, hung) = (&dumps[0], &dumps[1]);
        assert_eq!((waiting.rank, hung.rank), (0, 1));
        assert_eq!(waiting.version, DUMP_VERSION);
        // The buffer keeps the last two of rank 0's three entries; record ids count all three.
        let ids: Vec<(u64, u64)> = waiting
            .entries
            .iter()
            .map(|e| (e.record_id, e.collective_seq_id))
            .collect();
        assert_eq!(ids, [(1, 2), (2, 3)]);
        let (done, stuck) = (&waiting.entries[0], &waiting.entries[1]);
        assert_eq!(done.state, EntryState::Completed);
        assert!(done.retired);
        assert!(done.time_discovered_completed_ns.unwrap() % WATCHDOG_POLL_NS == 0);
        // Without timing, a started kernel is not known to have started.
        assert_eq!(stuck.state, EntryState::Scheduled);
        assert_eq!(stuck.time_discovered_started_ns, None);
        assert_eq!(stuck.duration_ms, None);
        assert!(!stuck.retired);
        assert_eq!(stuck.profiling_name, "nccl:all_reduce");
        assert_eq!(stuck.input_sizes, [[1 << 20]]);
        assert_eq!(stuck.input_dtypes, ["Float"]);
        assert_eq!(stuck.timeout_ms, 1000);
        assert_eq!(
            (stuck.pg_name.as_str(), stuck.pg_desc.as_str()),
            ("0", "default_pg")
        );
        assert_eq!(stuck.frames[0].name, "c");
        let world = &waiting.groups[0];
        assert_eq!(*world.ranks, [0, 1]);
        assert_eq!(
            (
                world.last_enqueued,
                world.last_started,
                world.last_completed
            ),
            (3, -1, 2)
        );
        // The hung rank dumps too (its heartbeat monitor saw the signal): two entries, done.
        assert_eq!(hung.entries.len(), 2);
        assert!(hung
            .entries
            .iter()
            .all(|e| e.state == EntryState::Completed));
        assert_eq!(hung.groups[0].last_enqueued, 2);
    }

    #[test]
    fn a_group_s_counters_and_status_go_on_from_its_first_seq_num() {
        // The group ran six collectives before the program; rank 1 hangs before the first of
        // the program's, after the ops `before`.
        let dumps = |before: &str| {
            let text = format!(
                "[cluster]\nranks = 2\n[groups.world]\neager_init = true\ntimeout_s = 1\n\
                 first_seq_num = 7\n[tensors]\ng = \"4MiB\"\n{before}\
                 [[op]]\nlabel = \"a\"\nall_reduce = \"g\"\n[[op]]\ndevice_sync = true\n\
                 [[fault]]\nranks = [1]\nat = \"a\"\nkind = \"hang\"\n"
            );
            crate::engine::simulate(&parse("fr.toml", &text).unwrap()).flight_recorder
        };
        let status = |dump: &FlightRecorderDump| {
            let world = &dump.groups[0];
            (
                world.last_enqueued,
                world.last_started,
                world.last_completed,
            )
        };
        // Nothing else: rank 1's status holds the last collective before the program.
        let quiet = dumps("");
        assert_eq!(quiet[0].entries[0].collective_seq_id, 7);
        assert_eq!(quiet[0].entries[0].op_id, 7);
        // The rank's six calls before it were recorded too.
        assert_eq!(quiet[0].entries[0].record_id, 6);
        assert_eq!(status(&quiet[0]), (7, -1, 6));
        assert!(quiet[1].entries.is_empty());
        assert_eq!(status(&quiet[1]), (6, -1, 6));
        // A send from rank 1 to rank 0 first: every call counts on from the six, and the
        // send's own number starts at 1.
        let sent = dumps(
            "[[op]]\nsend = \"g\"\nranks = [1]\npeer = 0\n[[op]]\nrecv = \"g\"\nranks = [0]\npeer = 1\n",
        );
        let numbers = |dump: &FlightRecorderDump| -> Vec<(u64, u64, u64)> {
            (dump.entries.iter())
                .map(|e| (e.op_id, e.collective_seq_id, e.p2p_seq_id))
                .collect()
        };
        assert_eq!(numbers(&sent[0]), [(7, 6, 1), (8, 7, 1)]);
        let record_ids: Vec<u64> = sent[0].entries.iter().map(|e| e.record_id).collect();
        assert_eq!(record_ids, [6, 7]);
        assert_eq!(numbers(&sent[1]), [(7, 6, 1)]);
        assert_eq!(status(&sent[1]).0, 1);
    }

    #[test]
    fn timing_shows_started_kernels_and_durations() {
        let dumps = dumps("TORCH_NCCL_ENABLE_TIMING = 1", "kind = \"hang\"");
        let entries = &dumps[0].entries;
        assert_eq!(entries.len(), 3);
        assert!(entries[0].duration_ms.is_some_and(|ms| ms > 0.0));
        assert_eq!(entries[2].state, EntryState::Started);
        assert!(entries[2].time_discovered_started_ns.is_some());
        assert_eq!(dumps[0].groups[0].last_started, 3);
    }

    #[test]
    fn a_barrier_is_recorded_as_its_one_float_element() {
        let text = "[cluster]\nranks = 2\n[groups.world]\neager_init = true\ntimeout_s = 1\n\
                    [tensors]\ng = \"4MiB\"\n[[op]]\nbarrier = true\n\
                    [[op]]\nlabel = \"c\"\nall_reduce = \"g\"\n\
                    [[fault]]\nranks = [1]\nat = \"c\"\nkind = \"hang\"\n";
        let dumps = crate::engine::simulate(&parse("fr.toml", text).unwrap()).flight_recorder;
        let barrier = &dumps[0].entries[0];
        assert_eq!(barrier.profiling_name, "nccl:all_reduce_barrier");
        // ProcessGroupNCCL::barrier all_reduces `at::zeros({1}, kFloat)`.
        assert_eq!(
            (&barrier.input_sizes, &barrier.input_dtypes),
            (&vec![vec![1]], &vec!["Float".to_string()])
        );
        assert_eq!(barrier.output_sizes, [[1]]);
    }

    #[test]
    fn a_mismatch_is_recorded_as_the_rank_issued_it() {
        let gather = dumps("", "kind = \"mismatch\"\ncollective = \"all_gather\"");
        let issued = gather[1].entries.last().unwrap();
        assert_eq!(issued.profiling_name, "nccl:_all_gather_base");
        assert_eq!(issued.input_sizes, [[1 << 19]]);
        assert_eq!(issued.output_sizes, [[1 << 20]]);
        // The same tensor as bf16: as many elements, of another type.
        let bf16 = dumps("", "kind = \"mismatch\"\ndtype = \"bf16\"");
        let (expected, issued) = (&bf16[0].entries[2], &bf16[1].entries[2]);
        assert_eq!(
            (&expected.input_sizes, &expected.input_dtypes),
            (&vec![vec![1 << 20]], &vec!["Float".to_string()])
        );
        assert_eq!(
            (&issued.input_sizes, &issued.output_dtypes),
            (&vec![vec![1 << 20]], &vec!["BFloat16".to_string()])
        );
    }

    #[test]
    fn a_mismatch_on_a_tensor_list_records_only_the_first_call_as_the_fault_s() {
        // Three 4 KiB tensors all_reduced one by one; rank 1 issues the first as bf16 and the
        // other two as declared.
        let text = "[cluster]\nranks = 2\n[groups.world]\ntimeout_s = 1\n\
                    [tensors]\ng = { size = \"4KiB\", count = 3 }\n\
                    [[op]]\nlabel = \"l\"\nall_reduce = \"g\"\nasync_op = true\nwork = \"w\"\n\
                    [[op]]\nwait = \"w\"\n\
                    [[fault]]\nranks = [1]\nat = \"l\"\nkind = \"mismatch\"\ndtype = \"bf16\"\n";
        let timeline = crate::engine::simulate(&parse("fr.toml", text).unwrap());
        let dump = (timeline.flight_recorder.iter().find(|d| d.rank == 1)).expect("rank 1 dumps");
        let calls: Vec<(Vec<Vec<u64>>, String)> = (dump.entries.iter())
            .map(|e| (e.input_sizes.clone(), e.input_dtypes[0].clone()))
            .collect();
        let call = |dtype: &str| (vec![vec![1024]], dtype.to_string());
        assert_eq!(calls, [call("BFloat16"), call("Float"), call("Float")]);
    }

    #[test]
    fn a_dtype_mismatch_is_found_and_its_work_counts_its_own_elements_r16() {
        let text = "[cluster]\nranks = 2\n[groups.world]\neager_init = true\ntimeout_s = 1\n\
             [tensors]\ng = \"4MiB\"\n[[op]]\nlabel = \"c\"\nall_reduce = \"g\"\n\
             [[op]]\ndevice_sync = true\n\
             [[fault]]\nranks = [1]\nat = \"c\"\nkind = \"mismatch\"\ndtype = \"bf16\"\n";
        let timeline = crate::engine::simulate(&parse("fr.toml", text).unwrap());
        let mismatch = (timeline.findings.iter())
            .find(|f| f.kind == crate::timeline::FindingKind::Mismatch)
            .expect("a mismatch finding");
        assert!(
            mismatch.message.contains(
                "rank 0 issued ALLREDUCE of 4MiB f32 (c, line 8), rank 1 issued ALLREDUCE of 2MiB bf16"
            ),
            "{}",
            mismatch.message
        );
        let fault = (timeline.watchdog.iter())
            .find(|r| r.message.contains("fault: issues"))
            .expect("the fault's record");
        assert!(
            fault.message.contains("issues ALLREDUCE of 2MiB bf16 at c"),
            "{}",
            fault.message
        );
        // Rank 1's timed-out Work counts bf16 elements: 1 Mi of them, as rank 0's f32.
        let timeouts: Vec<&str> = (timeline.findings.iter())
            .filter(|f| f.kind == crate::timeline::FindingKind::WatchdogTimeout)
            .map(|f| f.message.as_str())
            .collect();
        assert_eq!(timeouts.len(), 2, "{timeouts:?}");
        assert!(
            timeouts
                .iter()
                .all(|m| m.contains("NumelIn=1048576, NumelOut=1048576")),
            "{timeouts:?}"
        );
    }

    #[test]
    fn pg_status_holds_the_seqnum_of_the_last_work_whichever_counter_numbered_it() {
        // Rank 0: three all_reduces (collectives 1-3), then two sends to rank 1 (p2p 1, 2),
        // which hangs before its second receive. As PyTorch's status does, the last enqueued
        // is the second send's p2p number and the last completed the first send's, though
        // three collectives came before.
        let text = "[cluster]\nranks = 3\n[groups.world]\ntimeout_s = 1\n[tensors]\nx = \"1MiB\"\n\
                    [[op]]\nall_reduce = \"x\"\n[[op]]\nall_reduce = \"x\"\n[[op]]\nall_reduce = \"x\"\n\
                    [[op]]\nsend = \"x\"\nranks = [0]\npeer = 1\n[[op]]\nrecv = \"x\"\nranks = [1]\npeer = 0\n\
                    [[op]]\nsend = \"x\"\nranks = [0]\npeer = 1\n\
                    [[op]]\nlabel = \"r2\"\nrecv = \"x\"\nranks = [1]\npeer = 0\n\
                    [[fault]]\nranks = [1]\nat = \"r2\"\nkind = \"hang\"\n";
        let timeline = crate::engine::simulate(&parse("status.toml", text).unwrap());
        let rank0 = (timeline.flight_recorder.iter())
            .find(|dump| dump.rank == 0)
            .expect("rank 0 dumps at its send's timeout");
        let world = &rank0.groups[0];
        assert_eq!((world.last_enqueued, world.last_completed), (2, 1));
        let last = rank0.entries.last().unwrap();
        assert_eq!((last.collective_seq_id, last.p2p_seq_id), (3, 2));
    }

    #[test]
    fn pg_status_counts_a_work_completed_only_once_a_watchdog_poll_retired_it() {
        // Rank 0's send waits behind a 1.12 s GPU sleep; its all_reduce, enqueued at once, times
        // out at the 1.1 s poll (rank 1 hangs before it), and the stack trace takes 50 ms
        // before the dump. The send ends at about 1.12 s: completed at the dump, but no poll
        // retired it, so the status has nothing completed.
        let text = "[cluster]\nranks = 2\n[groups.world]\neager_init = true\ntimeout_s = 1\n\
                    [host]\nwatchdog_stack_trace_us = 50000\n[tensors]\nx = \"1MiB\"\n\
                    [[op]]\nranks = [0]\ngpu_sleep_us = 1120000\n\
                    [[op]]\nranks = [0]\nsend = \"x\"\npeer = 1\n[[op]]\nranks = [1]\nrecv = \"x\"\npeer = 0\n\
                    [[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\nasync_op = true\n\
                    [[fault]]\nranks = [1]\nat = \"ar\"\nkind = \"hang\"\n";
        let timeline = crate::engine::simulate(&parse("late.toml", text).unwrap());
        let rank0 = (timeline.flight_recorder.iter())
            .find(|dump| dump.rank == 0)
            .expect("rank 0 dumps");
        let send = &rank0.entries[0];
        assert_eq!(
            (send.profiling_name.as_str(), send.state, send.retired),
            ("nccl:send 0->1", EntryState::Completed, false)
        );
        let world = &rank0.groups[0];
        assert_eq!((world.last_enqueued, world.last_completed), (1, -1));
    }

    #[test]
    fn a_summarised_run_dumps_the_counters_and_status_of_the_full_one() {
        // 200 iterations of a send from rank 0 to 1 and an all_reduce; rank 1 hangs before the
        // last all_reduce. A summarised run folds the early iterations' records (rank 0's host,
        // five commands an iteration on its current stream, stops at the 512-command launch
        // queue, R1, while the GPU runs them): the dump's entries still carry the counters and
        // record ids the whole run gives them.
        let text = "repeat = 200\n[cluster]\nranks = 2\n[groups.world]\ntimeout_s = 1\n\
                    [host]\nlaunch_queue_depth = 512\n\
                    [env]\nTORCH_NCCL_ENABLE_TIMING = 1\n[tensors]\nx = \"1MiB\"\n\
                    [[op]]\nsend = \"x\"\nranks = [0]\npeer = 1\n[[op]]\nrecv = \"x\"\nranks = [1]\npeer = 0\n\
                    [[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\n\
                    [[fault]]\nranks = [1]\nat = \"ar\"\niteration = 199\nkind = \"hang\"\n";
        let scenario = parse("long.toml", text).unwrap();
        let rank0 = |summary: Option<&str>| {
            let options = crate::engine::Options {
                summary: summary.map(|s| crate::timeline::RecordSelection::parse(s).unwrap()),
                ..crate::engine::Options::default()
            };
            let timeline = crate::engine::simulate_with(&scenario, options).0;
            let dump = timeline.flight_recorder.into_iter().find(|d| d.rank == 0);
            dump.expect("rank 0 dumps")
        };
        let (full, summarised) = (rank0(None), rank0(Some("none")));
        let status = |dump: &FlightRecorderDump| {
            let world = &dump.groups[0];
            (
                world.last_enqueued,
                world.last_started,
                world.last_completed,
            )
        };
        // Enqueued and started: all_reduce 200 (spinning); completed: the 200th send.
        assert_eq!(status(&full), (200, 200, 200));
        assert_eq!(status(&summarised), status(&full));
        let numbers = |dump: &FlightRecorderDump| -> Vec<(u64, u64, u64, u64)> {
            (dump.entries.iter())
                .map(|e| (e.record_id, e.op_id, e.collective_seq_id, e.p2p_seq_id))
                .collect()
        };
        let (full, summarised) = (numbers(&full), numbers(&summarised));
        assert!(
            summarised.len() < full.len(),
            "the early records were folded"
        );
        assert_eq!(summarised[..], full[full.len() - summarised.len()..]);
        assert_eq!(full.last(), Some(&(399, 400, 200, 200)));
    }

    #[test]
    fn a_batch_records_each_send_and_receive_then_its_coalesced_entry() {
        // An all_reduce, a ring batch that rank 1 never joins, then another all_reduce. As
        // ProcessGroupNCCL records them: `pointToPoint` one entry per send or receive inside
        // the coalescing (no events: scheduled for good), each counting an op, the first
        // counting the batch's p2p number; `endCoalescing` the batch's Work, `nccl:coalesced`,
        // no tensors, at the last op's number, not point-to-point (`isP2POp(COALESCED)`).
        let text = "[cluster]\nranks = 2\n[groups.world]\neager_init = true\ntimeout_s = 1\n\
                    [tensors]\na = \"1MiB\"\nb = \"1MiB\"\n[[op]]\nall_reduce = \"a\"\n\
                    [[op]]\nlabel = \"ring\"\nbatch_isend_irecv = [{ send = \"a\", shift = 1 }, { recv = \"b\", shift = -1 }]\n\
                    [[op]]\nall_reduce = \"a\"\nasync_op = true\n\
                    [[fault]]\nranks = [1]\nat = \"ring\"\nkind = \"hang\"\n";
        let timeline = crate::engine::simulate(&parse("batch.toml", text).unwrap());
        let rank0 = (timeline.flight_recorder.iter())
            .find(|dump| dump.rank == 0)
            .expect("rank 0 dumps");
        let entries: Vec<(&str, u64, u64, u64, u64, bool)> = (rank0.entries.iter())
            .map(|e| {
                (
                    e.profiling_name.as_str(),
                    e.record_id,
                    e.collective_seq_id,
                    e.p2p_seq_id,
                    e.op_id,
                    e.is_p2p,
                )
            })
            .collect();
        assert_eq!(
            entries,
            [
                ("nccl:all_reduce", 0, 1, 0, 1, false),
                ("nccl:send 0->1", 1, 1, 1, 2, true),
                ("nccl:recv 0<-1", 2, 1, 1, 3, true),
                ("nccl:coalesced", 3, 1, 1, 3, false),
                ("nccl:all_reduce", 4, 2, 1, 4, false),
            ]
        );
        let (send, coalesced) = (&rank0.entries[1], &rank0.entries[3]);
        assert_eq!(
            (send.state, send.retired, send.time_discovered_started_ns),
            (EntryState::Scheduled, false, None)
        );
        assert_eq!(
            (&send.input_sizes, &send.output_dtypes),
            (&vec![vec![1 << 18]], &vec!["Float".to_string()])
        );
        assert!(coalesced.input_sizes.is_empty() && coalesced.input_dtypes.is_empty());
        // The ring buffer keeps the last entries, whichever call made them.
        let text = text.replace(
            "timeout_s = 1\n",
            "timeout_s = 1\n[env]\nTORCH_FR_BUFFER_SIZE = 3\n",
        );
        let timeline = crate::engine::simulate(&parse("batch.toml", &text).unwrap());
        let kept: Vec<(u64, &str)> = (timeline.flight_recorder[0].entries.iter())
            .map(|e| (e.record_id, e.profiling_name.as_str()))
            .collect();
        assert_eq!(
            kept,
            [
                (2, "nccl:recv 0<-1"),
                (3, "nccl:coalesced"),
                (4, "nccl:all_reduce")
            ]
        );
    }

    #[test]
    fn a_batch_on_a_subgroup_names_its_peers_by_their_rank_in_the_group() {
        // `nccl:send {rank_}->{dstRank}`: ranks within the group, as torchfrtrace reads them.
        let text = "[cluster]\nranks = 4\n[groups.world]\neager_init = true\ntimeout_s = 1\n\
                    [groups.odd]\nranks = [1, 3]\ntimeout_s = 1\n[tensors]\na = \"1MiB\"\n\
                    [[op]]\nlabel = \"first\"\nall_reduce = \"a\"\nasync_op = true\n\
                    [[op]]\nranks = [1, 3]\nbatch_isend_irecv = [{ send = \"a\", shift = 1 }, { recv = \"a\", shift = -1 }]\ngroup = \"odd\"\n\
                    [[fault]]\nranks = [0]\nat = \"first\"\nkind = \"hang\"\n";
        let timeline = crate::engine::simulate(&parse("odd.toml", text).unwrap());
        let rank3 = (timeline.flight_recorder.iter())
            .find(|dump| dump.rank == 3)
            .expect("rank 3 dumps");
        let names: Vec<(&str, &str)> = (rank3.entries.iter())
            .map(|e| (e.profiling_name.as_str(), e.pg_desc.as_str()))
            .collect();
        assert_eq!(
            names,
            [
                ("nccl:all_reduce", "default_pg"),
                ("nccl:send 1->0", "odd"),
                ("nccl:recv 1<-0", "odd"),
                ("nccl:coalesced", "odd"),
            ]
        );
    }

    #[test]
    fn a_coalescing_block_is_one_entry_named_as_pytorch_names_its_coalesced_call_r25() {
        // Measured on PyTorch 2.11 (an H100): a `_coalescing_manager` block of all_reduces is one
        // `nccl:allreduce_coalesced` entry, of all_gather_into_tensor one
        // `nccl:all_gather_into_tensor_coalesced`; reduce_scatter_tensor's name is its
        // `collectiveCoalesced` title. Other kinds PyTorch does not coalesce: the generic
        // `endCoalescing`'s `nccl:coalesced`.
        let name = |key: &str| {
            let text = format!(
                "[cluster]\nranks = 2\n[groups.world]\neager_init = true\ntimeout_s = 1\n\
                 [tensors]\ng = {{ size = \"4KiB\", count = 3 }}\n\
                 [[op]]\nlabel = \"block\"\n{key} = \"g\"\ncoalesce = true\n\
                 [[fault]]\nranks = [1]\nat = \"block\"\nkind = \"hang\"\n"
            );
            let timeline = crate::engine::simulate(&parse("block.toml", &text).unwrap());
            let rank0 = (timeline.flight_recorder.iter())
                .find(|dump| dump.rank == 0)
                .expect("rank 0 dumps");
            assert_eq!(rank0.entries.len(), 1);
            rank0.entries[0].profiling_name.clone()
        };
        assert_eq!(name("all_reduce"), "nccl:allreduce_coalesced");
        assert_eq!(name("all_gather"), "nccl:all_gather_into_tensor_coalesced");
        assert_eq!(
            name("reduce_scatter"),
            "nccl:reduce_scatter_tensor_coalesced"
        );
        assert_eq!(name("broadcast"), "nccl:coalesced");
        assert_eq!(name("all_to_all"), "nccl:coalesced");
    }

    #[test]
    fn a_coalescing_block_s_entry_lists_one_shape_and_dtype_per_tensor() {
        // Measured on PyTorch 2.11 (an H100): a block of three all_reduces of 1024 floats is one
        // entry whose `input_sizes` are `[[1024], [1024], [1024]]`.
        let block = |key: &str, fault: &str| {
            let text = format!(
                "[cluster]\nranks = 2\n[groups.world]\neager_init = true\ntimeout_s = 1\n\
                 [tensors]\ng = {{ size = \"4KiB\", count = 3 }}\n\
                 [[op]]\nlabel = \"block\"\n{key} = \"g\"\ncoalesce = true\n\
                 [[fault]]\nranks = [1]\nat = \"block\"\nkind = \"mismatch\"\n{fault}\n"
            );
            let timeline = crate::engine::simulate(&parse("block.toml", &text).unwrap());
            let dump = |rank: u32| {
                let dump = timeline.flight_recorder.iter().find(|d| d.rank == rank);
                let entry = &dump.expect("every rank dumps").entries[0];
                (
                    entry.input_sizes.clone(),
                    entry.input_dtypes.clone(),
                    entry.output_sizes.clone(),
                    entry.output_dtypes.clone(),
                )
            };
            (dump(0), dump(1))
        };
        let each = |numel: u64, dtype: &str| (vec![vec![numel]; 3], vec![dtype.to_string(); 3]);
        let ((sizes, dtypes, out_sizes, out_dtypes), bf16) =
            block("all_reduce", "dtype = \"bf16\"");
        assert_eq!((sizes, dtypes), each(1024, "Float"));
        assert_eq!((out_sizes, out_dtypes), each(1024, "Float"));
        // The block as bf16: as many elements, tensor by tensor.
        assert_eq!((bf16.0, bf16.1), each(1024, "BFloat16"));
        // An all_gather's inputs are one rank's slices.
        let (gather, _) = block("all_gather", "dtype = \"bf16\"");
        assert_eq!((gather.0, gather.1), each(512, "Float"));
        assert_eq!((gather.2, gather.3), each(1024, "Float"));
        // A fault's size splits into the block's tensors where it can, else it is one shape.
        let (_, even) = block("all_reduce", "size = \"6KiB\"");
        assert_eq!((even.0, even.1), each(512, "Float"));
        let (_, odd) = block("all_reduce", "size = \"10KiB\"");
        assert_eq!(
            (odd.0, odd.1),
            (vec![vec![2560]], vec!["Float".to_string()])
        );
    }

    #[test]
    fn a_dump_lists_the_groups_whose_communicator_the_rank_created() {
        // `world` and `ep` eager, `tp` and `dp` lazy. Both ranks all_reduce on tp; rank 1 hangs
        // before the world's all_reduce, which times out on rank 0, whose all_reduce on dp
        // meanwhile waits in dp's init for rank 1. PyTorch's `initNCCLComm` records a group's
        // ranks once it created the communicator (`pg_config`); the recorder takes a group's
        // status with its first entry (`pg_status`): nothing of dp, ep without a status.
        let scenario = |env: &str| {
            let text = format!(
                "[cluster]\nranks = 2\n[groups.world]\neager_init = true\ntimeout_s = 1\n\
                 [groups.tp]\nranks = [0, 1]\ntimeout_s = 1\n[groups.dp]\nranks = [0, 1]\n\
                 timeout_s = 1\n[groups.ep]\nranks = [0, 1]\neager_init = true\ntimeout_s = 1\n\
                 [env]\n{env}\n[tensors]\nx = \"1MiB\"\n\
                 [[op]]\nall_reduce = \"x\"\ngroup = \"tp\"\n\
                 [[op]]\nlabel = \"w\"\nall_reduce = \"x\"\nasync_op = true\n\
                 [[op]]\nall_reduce = \"x\"\ngroup = \"dp\"\n\
                 [[fault]]\nranks = [1]\nat = \"w\"\nkind = \"hang\"\n"
            );
            crate::engine::simulate(&parse("groups.toml", &text).unwrap()).flight_recorder
        };
        let listed = |dump: &FlightRecorderDump| -> Vec<(String, bool)> {
            (dump.groups.iter())
                .map(|group| (group.desc.clone(), group.recorded))
                .collect()
        };
        let dumps = scenario("");
        let named = |list: &[(&str, bool)]| -> Vec<(String, bool)> {
            (list.iter())
                .map(|&(desc, recorded)| (desc.to_string(), recorded))
                .collect()
        };
        assert_eq!(
            listed(&dumps[0]),
            named(&[("default_pg", true), ("tp", true), ("ep", false)])
        );
        assert_eq!(
            listed(&dumps[1]),
            named(&[("default_pg", false), ("tp", true), ("ep", false)])
        );
        // With the recorder off (`enabled_` false), it records no group either.
        let off = scenario("TORCH_FR_BUFFER_SIZE = 0");
        assert!(off.iter().all(|dump| dump.groups.is_empty()), "{off:?}");
    }

    #[test]
    fn nothing_is_dumped_without_a_timeout_or_with_dump_on_timeout_off() {
        assert!(dumps("TORCH_NCCL_DUMP_ON_TIMEOUT = 0", "kind = \"hang\"").is_empty());
        let text = "[cluster]\nranks = 2\n[[op]]\nbarrier = true\n";
        let timeline = crate::engine::simulate(&parse("ok.toml", text).unwrap());
        assert!(timeline.flight_recorder.is_empty());
    }
}
