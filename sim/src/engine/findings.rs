//! Findings the simulator reports besides the watchdog's: data races with their fix (R21) and,
//! when the event queue runs dry with work pending, the deadlocks — collectives some ranks never
//! joined (R16), communicators that never formed (R8), hosts blocked for good (R14, R15).

use super::*;
use crate::lifetime::Binding;

/// What an access touches (R21): a tensor (all of a list: the list is one tensor to the op),
/// or the flat buffer of bucket `bucket` of the bucketed collective at op `op` (R25).
#[derive(Debug, Clone, Copy)]
pub(super) enum Accessed {
    Tensor(TensorId, Binding),
    Bucket { op: usize, bucket: u32 },
}

impl Engine<'_> {
    /// One access of a tensor's blocks or of a bucket buffer; a race with an earlier access
    /// becomes a record and a finding (R21). To the race detector, bucket buffer number `n`
    /// (in program order) is tensor number `tensors.len() + n`.
    pub(super) fn access(
        &mut self,
        rank: u32,
        point: Point,
        accessed: Accessed,
        kind: AccessKind,
        op_index: usize,
    ) {
        let state = &mut self.ranks[rank as usize];
        let site = op_index as u64;
        let (race, id) = match accessed {
            Accessed::Tensor(tensor, binding) => {
                let mut first_race = None;
                for region in state.memory.books.regions(tensor, binding) {
                    let range = (region.segment, region.start_bytes, region.end_bytes);
                    let race = (state.race).access(point.clone(), range, kind, site, tensor as u32);
                    first_race = first_race.or(race);
                }
                (first_race, tensor as u32)
            }
            Accessed::Bucket { op, bucket } => {
                let Some((index, region)) = state.memory.books.bucket_region(op, bucket) else {
                    return;
                };
                let id = self.scenario.tensors.len() as u32 + index;
                let range = (region.segment, region.start_bytes, region.end_bytes);
                (state.race.access(point, range, kind, site, id), id)
            }
        };
        let Some(race) = race else {
            return;
        };
        let state = &self.ranks[rank as usize];
        // A tensor by its name, a bucket buffer by its bucket and op.
        let name = |id: u32| match self.scenario.tensors.get(id as usize) {
            Some(declared) => declared.name.clone(),
            None => {
                let index = id - self.scenario.tensors.len() as u32;
                let (op, bucket) = state.memory.books.bucket_of(index);
                crate::lifetime::bucket_buffer_text(self.scenario, op, bucket)
            }
        };
        let noun = |id: u32| match self.scenario.tensors.get(id as usize) {
            Some(declared) => format!("tensor {}", declared.name),
            None => name(id),
        };
        // A block reused by another tensor: name the one the earlier access touched.
        let (earlier_of, reused) = if race.earlier_tensor == id {
            (String::new(), String::new())
        } else {
            (
                format!(" of {}", noun(race.earlier_tensor)),
                format!(", whose freed block {} was given", name(id)),
            )
        };
        let stream_name = |agent: usize| match agent {
            0 => "host".to_string(),
            agent => state.timeline.streams[agent - 1].name.clone(),
        };
        let record = RaceRecord {
            iteration: state.iteration,
            host_ns: state.host_ns,
            tensor: name(id),
            earlier_tensor: (race.earlier_tensor != id).then(|| name(race.earlier_tensor)),
            earlier_op: race.earlier_site as OpRef,
            earlier_stream: stream_name(race.earlier_agent),
            earlier_write: race.earlier_kind == AccessKind::Write,
            later_op: race.later_site as OpRef,
            later_stream: stream_name(race.later_agent),
            later_write: race.later_kind == AccessKind::Write,
        };
        let is_nccl =
            |agent: usize| agent > 0 && state.timeline.streams[agent - 1].kind == StreamKind::Nccl;
        let ops = &self.scenario.ops;
        let earlier = &ops[race.earlier_site as usize];
        let later = &ops[race.later_site as usize];
        let verb = |write: bool| if write { "write" } else { "read" };
        // A functional collective's Work has no name in the program: its wait is the first
        // use of its result (R30).
        let functional_result = match earlier.kind {
            OpKind::Collective {
                result: Some(result),
                ..
            } => Some(&self.scenario.tensors[result].name),
            _ => None,
        };
        let fix = match (
            functional_result,
            is_nccl(race.earlier_agent),
            is_nccl(race.later_agent),
        ) {
            (Some(result), true, _) => format!(
                "use {result} at {} or before it on stream {} (reads = [\"{result}\"], an item or a collective of it): a functional result's first use issues its wait_tensor there (R30)",
                later.display_name(), record.later_stream
            ),
            (_, true, true) => format!(
                "order the two collectives: call wait() on the Work of {} before launching {} (syncStream then makes {} wait too, R10a), or run both on one group",
                earlier.display_name(), later.display_name(), record.later_stream
            ),
            (_, true, false) => format!(
                "call wait() on the Work of {} while stream {} is current, before {} (R12)",
                earlier.display_name(), record.later_stream, later.display_name()
            ),
            (_, false, true) => format!(
                "make the stream current at {} wait for stream {} first (record_event there after {}, wait_event before the collective; syncStream only waits for the current stream, R10a)",
                later.display_name(), record.earlier_stream, earlier.display_name()
            ),
            (_, false, false) => format!(
                "record_event on stream {} after {} and wait_event on stream {} before {}",
                record.earlier_stream, earlier.display_name(), record.later_stream, later.display_name()
            ),
        };
        let rank_id = state.timeline.rank;
        let message = format!(
            "data race on {} (rank {rank_id}, iteration {}): {} by {} (line {}) on stream {} is not ordered with the earlier {}{earlier_of} by {} (line {}) on stream {}{reused}; to order them, {fix}",
            noun(id),
            record.iteration,
            verb(record.later_write),
            later.display_name(),
            later.line,
            record.later_stream,
            verb(record.earlier_write),
            earlier.display_name(),
            earlier.line,
            record.earlier_stream,
        );
        let stream = Some(record.later_stream.clone());
        let iteration = record.iteration;
        self.ranks[rank as usize].timeline.races.push(record);
        let finding = Finding {
            kind: FindingKind::Race,
            rank: None,
            iteration: Some(iteration),
            op: Some(op_index as OpRef),
            stream,
            message,
            stands_for: RankSet::default(),
        };
        self.rank_finding(rank, finding);
        let races = (self.findings.iter())
            .filter(|f| f.kind == FindingKind::Race)
            .count();
        if races >= 2 * MAX_RACE_FINDINGS {
            self.order_findings();
        }
    }

    pub(super) fn report_deadlocks(&mut self) {
        const MAX_FINDINGS: usize = 32;
        let scenario = self.scenario;
        let mut stuck_collectives: Vec<&Rendezvous> = self.rendezvous.iter().flatten().collect();
        stuck_collectives.sort_by_key(|r| (r.group, r.seq));
        stuck_collectives.retain(|r| !self.rendezvous_settled(r));
        for rendezvous in stuck_collectives.iter().take(MAX_FINDINGS) {
            let group = &scenario.groups[rendezvous.group];
            let arrived: Vec<u32> = rendezvous.members.iter().map(|&(r, _)| r).collect();
            // A live rank that called it, its kernel not started (queued behind earlier work on
            // its stream), is no rank that never launched it.
            let (queued, missing): (Vec<u32>, Vec<u32>) = self
                .others_in_group(rendezvous.group, &arrived)
                .into_iter()
                .partition(|&r| {
                    !self.is_dead(r)
                        && self.ranks[r as usize].group_seq[rendezvous.group] >= rendezvous.seq
                });
            // A rank that aborted its communicator launched the collective, but its kernel
            // returned at once (R15, R27); the others spin.
            let (aborted, spinning): (Vec<u32>, Vec<u32>) = arrived
                .iter()
                .partition(|&&r| self.failure.is_aborted(r, rendezvous.group));
            let mut absent = Vec::new();
            if !aborted.is_empty() {
                let aborted = self.ranks_of(&aborted);
                let its = aborted.one_or_many(
                    "its communicator, its kernel",
                    "their communicators, their kernels",
                );
                absent.push(format!(
                    "{} aborted {its} ending at once (R15, R27)",
                    aborted.named()
                ));
            }
            if !queued.is_empty() {
                let queued = self.ranks_of(&queued);
                absent.push(format!(
                    "{} called it but {} never started",
                    queued.named(),
                    queued.one_or_many("its kernel", "their kernels"),
                ));
            }
            if !missing.is_empty() || absent.is_empty() {
                absent.push(self.absent_ranks(&missing, "never launched it", "launching it"));
            }
            let absent = absent.join(", ");
            let op = &scenario.ops[rendezvous.op];
            let seq_nums = self.member_seq_nums(rendezvous);
            let (first_rank, first_stream) =
                rendezvous.members.iter().copied().min().unwrap_or((0, 0));
            let spinning = self.ranks_of(&spinning);
            let spin = spinning.one_or_many(
                "started its kernel and spins",
                "started their kernels and spin",
            );
            self.findings.push(Finding {
                kind: FindingKind::Deadlock,
                rank: Some(self.classes.rank_of(first_rank)),
                iteration: Some(rendezvous.iteration),
                op: Some(rendezvous.op as OpRef),
                stream: Some(
                    self.ranks[first_rank as usize].timeline.streams[first_stream as usize]
                        .name
                        .clone(),
                ),
                message: format!(
                    "collective {} ({seq_nums}, OpType={}, group {}, line {}) never completes: {} {spin} (R16), {absent}",
                    op.display_name(),
                    op.kind.work_op_type(rendezvous.collective),
                    group.name,
                    op.line,
                    spinning.named(),
                ),
                stands_for: RankSet::default(),
            });
        }
        for (group_id, arrived) in self.comm_init.iter().enumerate() {
            let group = &scenario.groups[group_id];
            // Ranks whose caught raise took them out of the init wait there no more.
            let arrived: Vec<u32> = (arrived.iter())
                .filter(|arrival| !arrival.left)
                .map(|arrival| arrival.rank)
                .collect();
            if arrived.is_empty()
                || self.comm_init_ranks[group_id] as usize == group.ranks.len()
                || arrived.iter().all(|&rank| self.is_dead(rank))
            {
                continue;
            }
            let missing = self.others_in_group(group_id, &arrived);
            // Ranks that died in the init wait no more, nor do their part.
            let (died, mut waiting): (Vec<u32>, Vec<u32>) =
                arrived.into_iter().partition(|&r| self.is_dead(r));
            waiting.sort_unstable();
            let absent = self.absent_ranks(
                &missing,
                "never issued a collective on it",
                "issuing a collective on it",
            );
            let absent = if died.is_empty() {
                absent
            } else {
                let died = self.ranks_of(&died);
                let process = died.one_or_many("process", "processes");
                let ended = format!("the {process} of {} ended in its init", died.named());
                if missing.is_empty() {
                    ended
                } else {
                    format!("{absent}, and {ended}")
                }
            };
            let first = waiting[0];
            let op = &scenario.ops[self.ranks[first as usize].blocked_op];
            let waiting = self.ranks_of(&waiting);
            let wait = waiting.one_or_many("waits", "wait");
            self.findings.push(Finding {
                kind: FindingKind::Deadlock,
                rank: Some(self.classes.rank_of(first)),
                iteration: Some(self.ranks[first as usize].iteration),
                op: Some(op.index as OpRef),
                stream: None,
                message: format!(
                    "the communicator of group {} never forms (R8): {} {wait} in its lazy init at {} (line {}), {absent}",
                    group.name,
                    waiting.named(),
                    op.display_name(),
                    op.line,
                ),
                stands_for: RankSet::default(),
            });
        }
        // The blocked hosts are named up to a cap of their own: the findings before them (races,
        // the watchdog's, the stuck collectives) may be many, and hide none of them.
        let mut blocked_hosts = 0u64;
        let mut named_hosts = 0usize;
        let mut unnamed_hosts = false;
        for (simulated, state) in self.ranks.iter().enumerate() {
            let simulated = simulated as u32;
            if matches!(state.blocked, Blocked::Done | Blocked::Dead) {
                continue;
            }
            blocked_hosts += u64::from(self.classes.weight(simulated));
            if !self.classes.reports(simulated) {
                continue;
            }
            if named_hosts == MAX_FINDINGS {
                unnamed_hosts = true;
                continue;
            }
            named_hosts += 1;
            let class = self.classes.class_members(simulated);
            let op = &scenario.ops[state.blocked_op];
            let why = match state.blocked {
                Blocked::CommInit => {
                    "waits for the group's other ranks to create the communicator (R8)"
                }
                Blocked::Polling { .. } => "polls a Work that never completes (blocking wait, R15)",
                Blocked::Aborting { .. } => {
                    "aborts the communicator after the wait's timeout or the Work's async error, which waits for the device to drain: GPU work on one of its streams never finishes (R15)"
                }
                Blocked::Hung => "hangs before it (a [[fault]] of kind hang)",
                Blocked::Watchdog { .. } => {
                    "calls a collective while its watchdog handles an error (on the communicator it aborts, or to enqueue the Work onto the list it holds), and the abort waits for the device to drain: GPU work on one of its streams never finishes (R27)"
                }
                Blocked::LaunchQueue { .. } => {
                    "is in a kernel launch or event record onto a stream that holds host.launch_queue_depth commands, none of which the GPU ever takes (CUDA's launch queue)"
                }
                _ => "waits for GPU work that never finishes (R14)",
            };
            self.findings.push(Finding {
                kind: FindingKind::Deadlock,
                rank: Some(state.timeline.rank),
                iteration: Some(state.iteration),
                op: Some(state.blocked_op as OpRef),
                stream: Some(state.timeline.streams[op.stream].name.clone()),
                message: format!(
                    "[Rank {}] the host is blocked in {} (line {}, iteration {}): it {why}",
                    state.timeline.rank,
                    op.display_name(),
                    op.line,
                    state.iteration
                ),
                stands_for: if class.count() > 1 {
                    class.clone()
                } else {
                    RankSet::default()
                },
            });
        }
        if unnamed_hosts {
            self.findings.push(Finding {
                kind: FindingKind::Deadlock,
                rank: None,
                iteration: None,
                op: None,
                stream: None,
                message: format!(
                    "{} hosts in all are blocked; only the first {MAX_FINDINGS} findings on them are listed",
                    crate::ranks::thousands(blocked_hosts)
                ),
                stands_for: RankSet::default(),
            });
        }
    }
}

impl Engine<'_> {
    /// The ranks that did not do what a deadlock waits for: those that never did (`never`),
    /// and apart from them those whose process ended before doing it (`before`) — their death
    /// stopped them, so they are not blamed for it.
    fn absent_ranks(&self, missing: &[u32], never: &str, before: &str) -> String {
        let (dead, alive): (Vec<u32>, Vec<u32>) = missing.iter().partition(|&&r| self.is_dead(r));
        let dead_ranks = self.ranks_of(&dead);
        let process = dead_ranks.one_or_many("process", "processes");
        let ended = format!(
            "the {process} of {} ended before {before}",
            dead_ranks.named()
        );
        match (dead.is_empty(), alive.is_empty()) {
            (true, true) => "every rank of the group did".to_string(),
            (true, false) => format!("{} {never}", self.ranks_of(&alive).named()),
            (false, true) => ended,
            (false, false) => format!("{} {never}, and {ended}", self.ranks_of(&alive).named()),
        }
    }

    /// The simulated ranks of `group` that are not in `present`.
    fn others_in_group(&self, group: GroupId, present: &[u32]) -> Vec<u32> {
        let present: FxHashSet<u32> = present.iter().copied().collect();
        self.classes
            .group_simulated(group)
            .iter()
            .copied()
            .filter(|r| !present.contains(r))
            .collect()
    }

    /// `SeqNum=N`: the Work's `SeqNum` of the rendezvous's arrived ranks; where they differ
    /// (point-to-point calls, which each rank numbers among its own), each with its ranks.
    fn member_seq_nums(&self, rendezvous: &Rendezvous) -> String {
        let mut by_seq_num: Vec<(u64, Vec<u32>)> = Vec::new();
        for &(rank, _) in &rendezvous.members {
            let records = &self.ranks[rank as usize].timeline;
            let seq_num = records
                .folded_works
                .iter()
                .filter(|w| (w.group as GroupId, w.seq) == (rendezvous.group, rendezvous.seq))
                .map(|w| w.seq_num)
                .chain(
                    records
                        .collectives
                        .items()
                        .iter()
                        .filter(|c| {
                            (c.group as GroupId, c.seq) == (rendezvous.group, rendezvous.seq)
                        })
                        .map(CollectiveRecord::seq_num),
                )
                .next()
                .unwrap_or(rendezvous.seq);
            match by_seq_num.iter_mut().find(|(n, _)| *n == seq_num) {
                Some((_, ranks)) => ranks.push(rank),
                None => by_seq_num.push((seq_num, vec![rank])),
            }
        }
        match by_seq_num.as_slice() {
            [] => format!("SeqNum={}", rendezvous.seq),
            [(seq_num, _)] => format!("SeqNum={seq_num}"),
            _ => {
                by_seq_num.sort_unstable();
                let each: Vec<String> = by_seq_num
                    .iter()
                    .map(|(seq_num, ranks)| {
                        format!("{seq_num} on {}", self.ranks_of(ranks).named())
                    })
                    .collect();
                format!("SeqNum={}", each.join(", "))
            }
        }
    }

    /// Every rank the simulated ranks stand for.
    pub(super) fn ranks_of(&self, simulated: &[u32]) -> RankSet {
        if !self.classes.folded() {
            return RankSet::from_ranks(simulated.iter().copied());
        }
        let mut set = RankSet::default();
        for &r in simulated {
            set.union_with(self.classes.class_members(r));
        }
        set
    }

    /// A finding of simulated rank `simulated`: kept once per class, for its lowest rank and
    /// standing for the others (docs/scale.md).
    pub(super) fn rank_finding(&mut self, simulated: u32, mut finding: Finding) {
        if !self.classes.reports(simulated) {
            return;
        }
        let class = self.classes.class_members(simulated);
        let rank = self.classes.rank_of(simulated);
        finding.rank = Some(rank);
        if class.count() > 1 {
            finding.stands_for = class.clone();
        }
        // Found by the host's own steps, running ahead of the simulation (R1), at its time.
        let state = &self.ranks[simulated as usize];
        let found_ns = if matches!(state.blocked, Blocked::Running) {
            state.host_ns.max(self.now_ns)
        } else {
            self.now_ns
        };
        self.finding_keys.push((found_ns, rank));
        self.findings.push(finding);
    }
}
