//! The collective rendezvous (R16): a collective's kernel, once started, spins until every
//! rank of its group has started it; then data moves for the collective's α-β or NCCL-model
//! time (R24), at the pace of the rank with the fewest resident channels (R22).

use super::*;

pub(super) struct Rendezvous {
    pub(super) group: GroupId,
    pub(super) collective: CollectiveKind,
    /// How many ranks arrived (a folded rank counts as its class).
    pub(super) arrived: u32,
    /// The time of the latest arrival and the highest rank that arrived then.
    pub(super) last_arrival: (u64, u32),
    /// (rank, stream) of every arrived kernel.
    pub(super) members: Vec<(u32, u16)>,
    /// The op and sequence number, for findings.
    pub(super) op: usize,
    pub(super) seq: u64,
    pub(super) iteration: u32,
    /// Factor on the data-moving time, the same for every rank (`cluster.kernel_jitter`).
    pub(super) jitter: f64,
}

/// A collective whose data is moving: its end and the (rank, stream) of its members.
pub(super) struct Transfer {
    end_ns: u64,
    group: GroupId,
    members: Vec<(u32, u16)>,
}

impl Engine<'_> {
    /// The plan of one call of a collective op: precomputed for the sizes the program issues,
    /// computed here for others (a rank that issues a different size, a mismatch fault).
    pub(super) fn plan(&mut self, op: usize, size_bytes: u64) -> CollectivePlan {
        let scenario = self.scenario;
        self.plans
            .entry((op, size_bytes))
            .or_insert_with(|| {
                let (collective, group) =
                    scenario.ops[op].kind.collective().expect("a collective op");
                plan_collective(
                    scenario,
                    &scenario.groups[group].ranks,
                    collective,
                    size_bytes,
                )
            })
            .clone()
    }

    /// A collective kernel started on `rank` (R16): it spins until the last rank arrives.
    pub(super) fn arrive(&mut self, rank: u32, stream: u16, rendezvous: u32) {
        let now_ns = self.now_ns;
        let slot = self.rendezvous[rendezvous as usize]
            .as_mut()
            .expect("a live rendezvous");
        slot.arrived += self.classes.weight(rank);
        slot.members.push((rank, stream));
        if self.failure.is_aborted(rank, slot.group) {
            // The rank aborted this communicator (R15, R27): it launched the collective, but
            // NCCL's kernel returns at once and the collective can never complete.
            self.poisoned.insert(rendezvous);
            self.schedule_kernel_end(rank, stream, now_ns);
            return;
        }
        // The last rank is the highest among the latest arrivals, whatever order equal times
        // were processed in (a folded run processes fewer of them).
        let highest = self.classes.highest_rank(rank);
        if (now_ns, highest) > slot.last_arrival {
            slot.last_arrival = (now_ns, highest);
        }
        let group = &self.scenario.groups[slot.group];
        if slot.arrived < group.ranks.len() as u32 || self.poisoned(rendezvous) {
            return;
        }
        // The data starts now, but after the events already due now: what the last rank's
        // arrival schedules (every member's kernel end) then takes its place behind what each
        // member's own events at this time scheduled, as it does for every other member. Done
        // at once, the last rank's kernel end went ahead of its other same-time events and the
        // others' behind theirs, and a rigid kernel waiting for the SMs on a member's other
        // stream could start before or after the next collective depending on which rank came
        // last: a folded run (fewer ranks, another last) then differed from the unfolded one.
        self.schedule(now_ns, Event::RendezvousDue { rendezvous });
    }

    /// Every member of `rendezvous` arrived: data moves for the collective's time (R24), at
    /// the pace of the member with the fewest resident channels (R22), unless a member's
    /// communicator was aborted meanwhile (R27: then it never completes).
    pub(super) fn rendezvous_due(&mut self, rendezvous: u32) {
        if self.poisoned(rendezvous) {
            return;
        }
        let now_ns = self.now_ns;
        let slot = self.rendezvous[rendezvous as usize]
            .take()
            .expect("a live rendezvous");
        self.rendezvous_index.remove(&(slot.group, slot.seq));
        self.free_rendezvous.push(rendezvous);
        // R22: data moves only on resident channels; the collective runs at the pace of the
        // rank with the fewest channels resident when data starts.
        let resident = slot
            .members
            .iter()
            .map(|&(member, member_stream)| {
                let state = &self.ranks[member as usize];
                let kernel = match state.streams[member_stream as usize].queue.front() {
                    Some(QueuedItem {
                        item: GpuItem::Collective { kernel, .. },
                        ..
                    }) => *kernel,
                    _ => unreachable!("an arrived collective is at its stream's head"),
                };
                state.gpu.held(kernel).max(1)
            })
            .min()
            .unwrap_or(1);
        let (first_rank, first_stream) = slot.members[0];
        let size_bytes = match self.ranks[first_rank as usize].streams[first_stream as usize]
            .queue
            .front()
        {
            Some(QueuedItem {
                item: GpuItem::Collective { collective, .. },
                ..
            }) => self.ranks[first_rank as usize].timeline.collectives[*collective as usize].bytes,
            _ => unreachable!("an arrived collective is at its stream's head"),
        };
        let plan = self.plan(slot.op, size_bytes);
        let resident = resident.min(plan.channels);
        let full_ns = (u128::from(plan.duration_ns) * u128::from(plan.channels))
            .div_ceil(u128::from(resident)) as u64;
        let end_ns = now_ns + apply_jitter(full_ns, slot.jitter);
        for &(member, member_stream) in &slot.members {
            let state = &mut self.ranks[member as usize];
            let collective = match state.streams[member_stream as usize].queue.front() {
                Some(QueuedItem {
                    item: GpuItem::Collective { collective, .. },
                    ..
                }) => *collective,
                _ => unreachable!("an arrived collective is at its stream's head"),
            };
            *state.scratch.collective_data.get_mut(collective as usize) = gpu_times::DataStart {
                data_start_ns: now_ns,
                last_rank: Some(slot.last_arrival.1),
            };
            self.schedule_kernel_end(member, member_stream, end_ns);
        }
        self.in_flight.retain(|transfer| transfer.end_ns > now_ns);
        self.in_flight.push(Transfer {
            end_ns,
            group: slot.group,
            members: slot.members,
        });
    }

    /// `rank`'s process died: a collective whose data it was moving never completes on the
    /// other members either (NCCL's kernels wait for its data forever, R16); their kernels spin
    /// on, their data start unset, until an abort ends them. A member that had aborted its
    /// communicator keeps its end: its abort left the moving collective to run out.
    ///
    /// Why this is not the poisoning of a rendezvous ([`Self::kill`] does both): poisoning
    /// stops a rendezvous before [`Self::rendezvous_due`] scheduled its members' kernel ends;
    /// here those ends are already in the queue and must be overridden. One mechanism would
    /// need the rendezvous kept until its data ends, with one event then scheduling every
    /// member's kernel end: those ends would then come behind the events scheduled meanwhile
    /// for the same time, which reorders equal-time events and changes Timelines.
    pub(super) fn stop_transfers_of(&mut self, rank: u32) {
        let now_ns = self.now_ns;
        let stopped: Vec<Transfer> = (self.in_flight)
            .extract_if(.., |t| {
                t.end_ns > now_ns && t.members.iter().any(|&(member, _)| member == rank)
            })
            .collect();
        for transfer in stopped {
            for (member, stream) in transfer.members {
                if member == rank
                    || self.is_dead(member)
                    || self.failure.is_aborted(member, transfer.group)
                {
                    continue;
                }
                let state = &mut self.ranks[member as usize];
                let Some(QueuedItem {
                    item: GpuItem::Collective { collective, .. },
                    ..
                }) = state.streams[stream as usize].queue.front().copied()
                else {
                    continue;
                };
                *state.scratch.collective_data.get_mut(collective as usize) =
                    gpu_times::DataStart {
                        data_start_ns: NEVER,
                        last_rank: None,
                    };
                self.schedule_kernel_end(member, stream, NEVER);
            }
        }
    }

    pub(super) fn rendezvous_slot(
        &mut self,
        group: GroupId,
        seq: u64,
        collective: CollectiveKind,
        op: usize,
        iteration: u32,
        jitter: f64,
    ) -> u32 {
        if let Some(&slot) = self.rendezvous_index.get(&(group, seq)) {
            return slot;
        }
        let rendezvous = Rendezvous {
            group,
            collective,
            arrived: 0,
            last_arrival: (0, 0),
            members: Vec::new(),
            op,
            seq,
            iteration,
            jitter,
        };
        let slot = match self.free_rendezvous.pop() {
            Some(slot) => {
                self.rendezvous[slot as usize] = Some(rendezvous);
                slot
            }
            None => {
                self.rendezvous.push(Some(rendezvous));
                (self.rendezvous.len() - 1) as u32
            }
        };
        self.rendezvous_index.insert((group, seq), slot);
        slot
    }
}
