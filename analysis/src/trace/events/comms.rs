//! `record_param_comms`: the CPU op torch.profiler writes around each c10d collective call and
//! each `wait()` on its Work, with the arguments PyTorch's profiler gives it, for collectives
//! that completed and for those that never did.

use super::*;
use sim::timeline::TransferInfo;

/// What `record_param_comms` reads of a collective, completed or not.
pub(super) struct CommsCall {
    iteration: u32,
    op: OpRef,
    group: u16,
    seq_num: u64,
    bytes: u64,
    host_start_ns: u64,
    host_end_ns: u64,
    /// The wait's op and host call.
    wait: Option<CommsWait>,
    unfinished: bool,
}

struct CommsWait {
    op: OpRef,
    host_start_ns: u64,
    /// `None`: it never returned (the rank's `unfinished_host`).
    host_end_ns: Option<u64>,
}

/// A [`CommsCall`] of a [`CollectiveRecord`] or an [`UnfinishedCollective`], which name these
/// fields alike.
macro_rules! comms_call {
    ($record:expr, $unfinished:expr) => {
        CommsCall {
            iteration: $record.iteration,
            op: $record.op,
            group: $record.group,
            seq_num: $record.seq_num(),
            bytes: $record.bytes,
            host_start_ns: $record.host_start_ns,
            host_end_ns: $record.host_end_ns,
            wait: $record.wait.map(|wait| CommsWait {
                op: wait.op,
                host_start_ns: wait.host_start_ns,
                host_end_ns: wait.host_end_ns.into(),
            }),
            unfinished: $unfinished,
        }
    };
}

impl CommsCall {
    fn completed(record: &CollectiveRecord) -> CommsCall {
        comms_call!(record, false)
    }

    fn unfinished(record: &UnfinishedCollective) -> CommsCall {
        comms_call!(record, true)
    }
}

impl TraceContext<'_> {
    /// `record_param_comms` over each collective's host call, with the arguments PyTorch's
    /// profiler gives it (`torch/csrc/profiler/util.cpp` names them).
    /// A collective that never completed gets one too, its call having returned, marked
    /// `c10dsim never completed`.
    /// Its group's ranks are those of ProcessGroupNCCL's `globalRankStart`/`globalRankStride`
    /// (`torch/csrc/distributed/c10d/ParamCommsUtils.cpp` lists them from these two).
    pub(super) fn param_comms(&self, rank: &RankTimeline, sink: &mut Sink) -> io::Result<()> {
        let at = (pid(rank.rank), HOST_TID);
        let calls = (rank.collectives.iter().map(CommsCall::completed)).chain(
            rank.unfinished_collectives
                .iter()
                .map(CommsCall::unfinished),
        );
        for record in calls {
            let op = &self.ops[record.op as usize];
            let params: Vec<Value> = if op.collective == Some(CollectiveKind::BatchP2p) {
                // ProcessGroupNCCL::send and ::recv record each transfer inside the coalescing,
                // and endCoalescing, which launches the batch, records none. The Timeline keeps
                // the batch as one host call: each transfer's record spans all of it.
                (self.timeline.ops[record.op as usize].transfers.iter())
                    .map(|transfer| self.transfer_args(rank.rank, &record, transfer))
                    .collect()
            } else if let Some(name) = op.collective_name {
                vec![self.call_args(rank.rank, &record, op, name)]
            } else {
                continue;
            };
            for args in params {
                sink.slice(
                    "cpu_op",
                    "record_param_comms",
                    at,
                    record.host_start_ns,
                    record.host_end_ns,
                    args,
                )?;
            }
            if let Some(wait) = &record.wait {
                // `WorkNCCL::wait` records one too, over the whole wait(): from its start to the
                // end of the host call it is part of, a blocking wait's polls included.
                // A wait() that never returned is open at the end of the capture, as
                // torch.profiler writes an op still open when it stops.
                let group = self.process_group_and_peer(rank.rank, &record, op).0;
                let mut args = self.wait_args(rank, group, &record, wait.op);
                let end_ns = match wait.host_end_ns {
                    None => {
                        args[NEVER_FINISHED.0] = json!(NEVER_FINISHED.1);
                        last_recorded_ns(self.timeline, rank)
                    }
                    Some(host_end_ns) => {
                        let call = rank
                            .host
                            .partition_point(|c| c.start_ns <= wait.host_start_ns);
                        (call.checked_sub(1).map(|c| &rank.host[c]))
                            .filter(|c| c.op == wait.op)
                            .map_or(host_end_ns, |c| c.end_ns.max(host_end_ns))
                    }
                };
                sink.slice(
                    "cpu_op",
                    "record_param_comms",
                    at,
                    wait.host_start_ns,
                    end_ns,
                    args,
                )?;
            }
        }
        Ok(())
    }

    /// The arguments of the `record_param_comms` of a collective call named `name`: its
    /// group's, its rank's and its elements'.
    fn call_args(&self, rank: u32, record: &CommsCall, op: &OpTrace, name: &str) -> Value {
        let (group, peer) = self.process_group_and_peer(rank, record, op);
        let members = &self.group_ranks[group];
        // The kernel's type, else the tensor's (a SendRecv kernel names none).
        let nccl_type =
            (op.nccl.as_ref().and_then(|k| k.nccl_type.as_deref()))
                .or(self.timeline.ops[record.op as usize].dtype.as_deref());
        let elements = nccl_type
            .and_then(nccl_names::element_bytes)
            .map(|bytes| record.bytes / bytes);
        let group_size = (members.len() as u64).max(1);
        // As the Work counts them (sim::collective::WorkNumel): one rank's slice on the
        // sliced side, a remainder the ranks do not divide left out.
        // A barrier's are PyTorch's literals: no elements, of bytes.
        let barrier = name == "barrier";
        let (in_elements, out_elements) = match (op.collective, elements) {
            _ if barrier => (Some(0), Some(0)),
            (Some(kind), Some(n)) => {
                let (input, output) = kind.descriptor().work_numel.of(n, group_size);
                (Some(input), Some(output))
            }
            (_, n) => (n, n),
        };
        let mut args = self.group_args(group, record, name);
        match peer {
            // PyTorch records a send's or a receive's peer as its rank.
            Some(peer) => {
                let send = op.collective == Some(CollectiveKind::Send);
                peer_args(&mut args, members, peer, send);
            }
            // A broadcast's root (`opts.rootRank`, its rank within the group): c10dsim's
            // broadcasts root at the group's first rank, as `c10dsim torch` and `hw` call them.
            None if op.collective == Some(CollectiveKind::Broadcast) => args["Rank"] = json!(0),
            // The Backend's `rank_`, the rank within the group.
            None => args["Rank"] = json!(rank_in_group(members, rank)),
        }
        if barrier {
            args["dtype"] = json!("Byte");
        } else if let Some(dtype) = nccl_type.and_then(nccl_names::torch_dtype) {
            args["dtype"] = json!(dtype);
        }
        if let (Some(input), Some(output)) = (in_elements, out_elements) {
            args["In msg nelems"] = json!(input);
            args["Out msg nelems"] = json!(output);
        }
        args
    }

    /// The arguments of the `record_param_comms` of one send or receive of a batch, as
    /// `ProcessGroupNCCL::send` / `::recv` record it inside the coalescing: the batch's process
    /// group and SeqNum, the peer `shift` places along the group as the rank, the tensor's
    /// elements.
    fn transfer_args(&self, rank: u32, record: &CommsCall, transfer: &TransferInfo) -> Value {
        let group = usize::from(record.group);
        let members = &self.group_ranks[group];
        let name = if transfer.send { "send" } else { "recv" };
        let mut args = self.group_args(group, record, name);
        let peer = match members.iter().position(|&member| member == rank) {
            Some(at) => {
                let size = members.len() as i64;
                let place = (at as i64 + transfer.shift.rem_euclid(size)) % size;
                Peer::Known(members[place as usize])
            }
            None => Peer::Unknown,
        };
        peer_args(&mut args, members, peer, transfer.send);
        if let Some(dtype) = nccl_names::torch_dtype(&transfer.dtype) {
            args["dtype"] = json!(dtype);
        }
        if let Some(bytes) = nccl_names::element_bytes(&transfer.dtype) {
            args["In msg nelems"] = json!(transfer.bytes / bytes);
            args["Out msg nelems"] = json!(transfer.bytes / bytes);
        }
        args
    }

    /// What every `record_param_comms` of a call on `group` carries: its name, its group as
    /// ProcessGroupNCCL hands it to the profiler (ranks listed only where they have a stride),
    /// the Work's SeqNum and c10dsim's op and iteration.
    fn group_args(&self, group: usize, record: &CommsCall, name: &str) -> Value {
        let members = &self.group_ranks[group];
        let (start, stride) = global_rank_start_and_stride(group, members);
        let mut args = json!({
            "Collective name": name,
            "In split size": "[]",
            "Out split size": "[]",
            "Group size": members.len(),
            "Process Group Name": group.to_string(),
            "Process Group Description": self.group_description(group),
            "Process Group Ranks": match stride {
                Some(_) => listed_ranks(members),
                None => "[]".to_string(),
            },
            "Seq": record.seq_num,
            "op": self.timeline.ops[record.op as usize].name,
            "iteration": record.iteration,
        });
        if let Some(start) = start {
            args["Global rank start"] = json!(start);
        }
        if let Some(stride) = stride {
            args["Global rank stride"] = json!(stride);
        }
        if record.unfinished {
            args[NEVER_COMPLETED] = json!(true);
        }
        args
    }

    /// The process group `record`'s call went through and, for a send or a receive, its peer.
    /// A pair's send or receive goes through the world, as `Scenario::process_group` has it:
    /// `ProcessGroupNCCL::send` and `::recv` hand the profiler the process group's name,
    /// `globalRankStart_`, `globalRankStride_` and size, and the peer (`dstRank`, `srcRank`) as
    /// the rank; `pointToPoint` uses the pair's communicator but records no group of its own,
    /// and its Work, whose `wait()` records the group too, is the process group's.
    fn process_group_and_peer(
        &self,
        rank: u32,
        record: &CommsCall,
        op: &OpTrace,
    ) -> (usize, Option<Peer>) {
        let group = usize::from(record.group);
        match op.collective {
            Some(CollectiveKind::Send | CollectiveKind::Recv) => {
                let pair = Group::pair_ranks(&self.timeline.scenario.groups[group]);
                let peer = pair.map_or(Peer::Unknown, |(low, high)| {
                    Peer::Known(if low == rank { high } else { low })
                });
                (0, Some(peer))
            }
            _ => (group, None),
        }
    }

    /// The arguments of the `record_param_comms` that `WorkNCCL::wait` records: named `wait`,
    /// with no elements and no ranks (PyTorch passes it no rank start or stride).
    fn wait_args(&self, rank: &RankTimeline, group: usize, record: &CommsCall, op: OpRef) -> Value {
        let members = &self.group_ranks[group];
        let mut args = json!({
            "Collective name": "wait",
            "dtype": "Byte",
            "In msg nelems": 0,
            "Out msg nelems": 0,
            "In split size": "[]",
            "Out split size": "[]",
            "Group size": 1,
            "Process Group Name": group.to_string(),
            "Process Group Description": self.group_description(group),
            "Process Group Ranks": "[]",
            "Rank": rank_in_group(members, rank.rank),
            "Seq": record.seq_num,
            "op": self.timeline.ops[op as usize].name,
            "iteration": record.iteration,
        });
        if record.unfinished {
            args[NEVER_COMPLETED] = json!(true);
        }
        args
    }
}

/// The peer of a send or a receive: the other rank of its pair's group, as the group's name
/// (`p2p:<low>:<high>`) gives it; unknown in a Timeline whose pair is named otherwise, whose
/// `Rank` and `Src Rank` / `Dst Rank` are then left out.
enum Peer {
    Known(u32),
    Unknown,
}

/// A send's or a receive's `Rank`, its peer's rank within the group of `members`, and the
/// peer's global rank the profiler adds from the listed ranks at `Rank` (`Dst Rank` on a send,
/// `Src Rank` on a receive); neither where the peer is unknown.
fn peer_args(args: &mut Value, members: &[u32], peer: Peer, send: bool) {
    if let Peer::Known(peer) = peer {
        args["Rank"] = json!(rank_in_group(members, peer));
        args[if send { "Dst Rank" } else { "Src Rank" }] = json!(peer);
    }
}

/// `rank`'s rank within the group of `members` (ascending global ranks), as ProcessGroupNCCL
/// numbers it; `rank` itself where it is not a member.
fn rank_in_group(members: &[u32], rank: u32) -> u64 {
    members
        .iter()
        .position(|&member| member == rank)
        .map_or(u64::from(rank), |at| at as u64)
}
