//! The GPU side of a rank: FIFO streams (R4) of event records, event waits (R5), kernels and
//! NCCL kernels; event instances fire when their stream reaches them, and kernels share the
//! GPU's SMs through the rank's [`crate::gpu::SmScheduler`] (R7, R22).

use super::*;

#[derive(Debug, Clone, Copy)]
pub(super) enum GpuItem {
    /// An event record: fires when the stream reaches it (R5).
    Record { instance: Instance },
    /// A point that fires as a record does but is no command of the stream's launch queue
    /// (R1): the input-ready point of a call on the current stream (`Step::Probe`, R11).
    Probe { instance: Instance },
    /// `cudaStreamWaitEvent`: the stream holds until the instance fired (R5).
    WaitFor {
        instance: Instance,
        stream_wait: u32,
    },
    /// A kernel of known duration; `compute_op` says how it holds SMs ([`compute_op`]), so
    /// that the stream's head needs no look-up in the kernel record the host made long before
    /// (the item stays 16 bytes).
    Kernel {
        duration_ns: u64,
        kernel: u32,
        compute_op: u16,
    },
    /// An NCCL kernel: rendezvous with the group's other ranks (R16), then α-β time (R24).
    Collective {
        kernel: u32,
        rendezvous: u32,
        collective: u32,
        /// The SMs its plan holds (R22), clamped to the GPU's as the scheduler clamps them
        /// (at most 1,024): known at the launch, so that the stream's head needs no look-up
        /// in records the host made long before. 0 where NCCL launches no kernel (a one-rank
        /// collective, R24).
        channels: u16,
    },
}

/// `GpuItem::Kernel::compute_op` of a kernel that is not a compute kernel (a sleep, a
/// straggler's delay): it holds one block (R22).
pub(super) const NOT_COMPUTE: u16 = u16::MAX;
/// ... of a compute kernel whose op index does not fit: its record says which op it is.
const OP_IN_RECORD: u16 = u16::MAX - 1;

/// What a kernel item carries of its launch for its SMs: the op of a compute kernel (whose kind
/// decides, R22), or [`NOT_COMPUTE`].
pub(super) fn compute_op(class: KernelClass, op: usize) -> u16 {
    match class {
        KernelClass::Compute => u16::try_from(op)
            .ok()
            .filter(|&op| op < OP_IN_RECORD)
            .unwrap_or(OP_IN_RECORD),
        _ => NOT_COMPUTE,
    }
}

/// How the compute kernels of an op hold SMs (R22): a GEMM's blocks of `cluster.gemm_tile`, a
/// generic kernel's `sms`, or one block (anything else).
#[derive(Debug, Clone, Copy)]
pub(super) enum ComputeSms {
    Gemm { blocks: u64 },
    Rigid { sms: u32 },
    OneBlock,
}

impl ComputeSms {
    pub(super) fn of(scenario: &Scenario, kind: &OpKind) -> ComputeSms {
        match kind {
            OpKind::Gemm { m, n, .. } => {
                let [tile_m, tile_n] = scenario.cluster.gemm_tile;
                ComputeSms::Gemm {
                    blocks: m.div_ceil(tile_m) * n.div_ceil(tile_n),
                }
            }
            OpKind::Kernel { sms, .. } => ComputeSms::Rigid { sms: *sms },
            _ => ComputeSms::OneBlock,
        }
    }
}

#[derive(Debug, Clone, Copy)]
pub(super) struct QueuedItem {
    pub(super) item: GpuItem,
    /// Earliest start: the host time of the call plus, for kernels, the launch latency.
    pub(super) ready_ns: u64,
}

#[derive(Default)]
pub(super) struct StreamState {
    pub(super) queue: VecDeque<QueuedItem>,
    /// The kernel at the head, once it asked for SMs (it is running or waits for them).
    pub(super) running: Option<u32>,
    /// An `Advance` is already scheduled for this time.
    pub(super) wake_at_ns: Option<u64>,
    /// Bumped whenever the head kernel's end is rescheduled; stale `KernelEnd`s are skipped.
    pub(super) end_version: u32,
    /// Runs at high priority (R7).
    pub(super) high_priority: bool,
    /// The head is a stream wait on an instance that has not fired, and the stream is among
    /// the rank's waiters for it (once: the instance's fire advances the stream).
    pub(super) awaits_fire: bool,
    /// The probes in `queue`, which CUDA's launch queue does not hold (R1).
    pub(super) probes: usize,
}

impl StreamState {
    /// The commands the stream holds in CUDA's launch queue (R1): its items but the probes.
    pub(super) fn commands(&self) -> usize {
        self.queue.len() - self.probes
    }
}

impl Engine<'_> {
    pub(super) fn new_instance(&mut self, rank: u32, stream: u16) -> Instance {
        let state = &mut self.ranks[rank as usize];
        state.fired_ns.push(NEVER);
        state.instance_stream.push(stream);
        (state.fired_ns.len() - 1) as Instance
    }

    /// Queues an item on a stream (R4) and returns its happens-before point (R21).
    pub(super) fn push(&mut self, rank: u32, stream: u16, item: GpuItem, ready_ns: u64) -> Point {
        let state = &mut self.ranks[rank as usize];
        let point = state.race.enqueue(stream);
        match item {
            GpuItem::Record { instance } | GpuItem::Probe { instance } => {
                state.race.record(instance, &point)
            }
            GpuItem::WaitFor { instance, .. } => state.race.stream_waits(stream, instance),
            _ => {}
        }
        let stream_state = &mut state.streams[stream as usize];
        stream_state.probes += usize::from(matches!(item, GpuItem::Probe { .. }));
        stream_state.queue.push_back(QueuedItem { item, ready_ns });
        // The host runs ahead (R1): most pushes find the head of their stream running, waiting
        // for an instance to fire, or waiting for a time an `Advance` is already scheduled
        // for, and then `advance` would change nothing.
        let head_waits = stream_state.running.is_some()
            || stream_state.awaits_fire
            || stream_state
                .wake_at_ns
                .is_some_and(|at_ns| at_ns > self.now_ns);
        if !head_waits {
            self.advance(rank, stream);
        }
        point
    }

    /// Runs the head of a stream as far as it can go at the current time (R4). A process that
    /// ended runs nothing more on its GPU without a check here: the events of a dead process
    /// are dropped (`ignored`) and its host pushes nothing, so the one way in for it is a
    /// kernel's end whose `stream_popped` ended the process as its GPU drained — with nothing
    /// left to run.
    pub(super) fn advance(&mut self, rank: u32, stream: u16) {
        debug_assert!(
            !matches!(self.ranks[rank as usize].blocked, Blocked::Dead)
                || self.ranks[rank as usize].drained(),
            "a process that ended has GPU work to advance"
        );
        loop {
            let now_ns = self.now_ns;
            let state = &mut self.ranks[rank as usize].streams[stream as usize];
            if state.running.is_some() {
                return;
            }
            let Some(head) = state.queue.front().copied() else {
                return;
            };
            if head.ready_ns > now_ns {
                if state.wake_at_ns != Some(head.ready_ns) {
                    state.wake_at_ns = Some(head.ready_ns);
                    self.schedule(head.ready_ns, Event::Advance { rank, stream });
                }
                return;
            }
            match head.item {
                GpuItem::Record { instance } | GpuItem::Probe { instance } => {
                    state.queue.pop_front();
                    state.probes -= usize::from(matches!(head.item, GpuItem::Probe { .. }));
                    self.stream_popped(rank, stream);
                    self.fire(rank, instance);
                }
                GpuItem::WaitFor {
                    instance,
                    stream_wait,
                } => {
                    let rank_state = &mut self.ranks[rank as usize];
                    let fired_ns = rank_state.fired_ns[instance as usize];
                    if fired_ns == NEVER {
                        let state = &mut rank_state.streams[stream as usize];
                        if !state.awaits_fire {
                            state.awaits_fire = true;
                            (rank_state.waiters).add(instance, Waiter::Stream { stream });
                        }
                        return;
                    }
                    let release_ns = fired_ns + self.scenario.host.stream_wait_latency_ns;
                    if release_ns > now_ns {
                        let state = &mut rank_state.streams[stream as usize];
                        if state.wake_at_ns != Some(release_ns) {
                            state.wake_at_ns = Some(release_ns);
                            self.schedule(release_ns, Event::Advance { rank, stream });
                        }
                        return;
                    }
                    rank_state.streams[stream as usize].queue.pop_front();
                    let released_ns = &mut rank_state.scratch.stream_wait_released_ns;
                    *released_ns.get_mut(stream_wait as usize) = now_ns;
                    self.stream_popped(rank, stream);
                }
                GpuItem::Kernel {
                    duration_ns,
                    kernel,
                    compute_op,
                } => {
                    state.running = Some(kernel);
                    let high_priority = state.high_priority;
                    let shape = self.kernel_shape(rank, (kernel, compute_op), duration_ns);
                    self.ranks[rank as usize]
                        .gpu
                        .submit(now_ns, kernel, high_priority, shape);
                    self.rebalance(rank);
                    return;
                }
                GpuItem::Collective {
                    kernel,
                    rendezvous,
                    channels,
                    ..
                } => {
                    state.running = Some(kernel);
                    let high_priority = state.high_priority;
                    if channels == 0 {
                        // NCCL launched no kernel (R24): nothing for the SMs, it starts at once.
                        let state = &mut self.ranks[rank as usize];
                        state.scratch.kernel_times.get_mut(kernel as usize).start_ns = now_ns;
                        self.arrive(rank, stream, rendezvous);
                        return;
                    }
                    let shape = KernelShape::Collective {
                        channels: u32::from(channels),
                    };
                    self.ranks[rank as usize]
                        .gpu
                        .submit(now_ns, kernel, high_priority, shape);
                    self.rebalance(rank);
                    return;
                }
            }
        }
    }

    /// The kernel running on `stream` ends at `end_ns` (`u64::MAX`: not known yet): any end
    /// scheduled before for it is outdated (its version passed).
    pub(super) fn schedule_kernel_end(&mut self, rank: u32, stream: u16, end_ns: u64) {
        let stream_state = &mut self.ranks[rank as usize].streams[stream as usize];
        stream_state.end_version += 1;
        let version = stream_state.end_version;
        if end_ns != u64::MAX {
            self.schedule(
                end_ns,
                Event::KernelEnd {
                    rank,
                    stream,
                    version,
                },
            );
        }
    }

    /// How a kernel uses SMs: a GEMM fills the GPU in waves of `cluster.gemm_tile` blocks, a generic
    /// kernel holds its `sms`, a sleep (or a straggler's delay) one block (R22).
    pub(super) fn kernel_shape(
        &self,
        rank: u32,
        (kernel, compute_op): (u32, u16),
        duration_ns: u64,
    ) -> KernelShape {
        let op = match compute_op {
            NOT_COMPUTE => usize::MAX,
            OP_IN_RECORD => self.ranks[rank as usize].timeline.kernels[kernel as usize].op as usize,
            op => usize::from(op),
        };
        match self.compute_sms_by_op.get(op) {
            Some(&ComputeSms::Gemm { blocks }) => {
                KernelShape::elastic(duration_ns, self.scenario.cluster.gpu.sms, blocks)
            }
            Some(&ComputeSms::Rigid { sms }) => KernelShape::Rigid { sms, duration_ns },
            Some(ComputeSms::OneBlock) | None => KernelShape::Rigid {
                sms: 1,
                duration_ns,
            },
        }
    }

    /// Applies the SM scheduler's decisions for `rank`: kernels that got SMs start (a
    /// collective's start is its arrival, R16), changed end times are rescheduled, and the
    /// next SM transfer is timed.
    pub(super) fn rebalance(&mut self, rank: u32) {
        let now_ns = self.now_ns;
        let changes = self.ranks[rank as usize].gpu.rebalance(now_ns);
        for &kernel in &changes.started {
            let state = &mut self.ranks[rank as usize];
            state.scratch.kernel_times.get_mut(kernel as usize).start_ns = now_ns;
            let stream = state.running_stream(kernel);
            if let Some(QueuedItem {
                item: GpuItem::Collective { rendezvous, .. },
                ..
            }) = state.streams[stream as usize].queue.front().copied()
            {
                self.arrive(rank, stream, rendezvous);
            }
        }
        for &(kernel, end_ns) in &changes.ends {
            let state = &mut self.ranks[rank as usize];
            let stream = state.running_stream(kernel);
            self.schedule_kernel_end(rank, stream, end_ns);
        }
        let state = &mut self.ranks[rank as usize];
        if let Some(at_ns) = changes.transfer_at_ns {
            if state.transfer_at_ns != Some(at_ns) {
                state.transfer_at_ns = Some(at_ns);
                self.schedule(at_ns, Event::SmTransfer { rank });
            }
        }
    }

    /// A stream's head left its queue: a host blocked on the full queue (R1) goes on now; a
    /// process whose program returned ends once the last one drained (R31).
    pub(super) fn stream_popped(&mut self, rank: u32, stream: u16) {
        let depth = self.scenario.host.launch_queue_depth as usize;
        let state = &mut self.ranks[rank as usize];
        if !state.aborts_awaiting_drain.is_empty() && state.drained() {
            // A watchdog's abort returns once the device drained (R27): at a wake-up of its
            // own, not from inside this stream's advance.
            let mut wakes: Vec<failure::Command> =
                (std::mem::take(&mut state.aborts_awaiting_drain))
                    .into_iter()
                    .map(|group| failure::Command::Wake {
                        rank,
                        group: group as GroupId,
                        wake: failure::Wake::AbortReturned,
                        at_ns: self.now_ns,
                    })
                    .collect();
            self.apply(&mut wakes);
        }
        let state = &mut self.ranks[rank as usize];
        match state.blocked {
            Blocked::LaunchQueue { stream: full }
                if full == stream && state.streams[stream as usize].commands() < depth =>
            {
                state.blocked = Blocked::Timer;
                let at_ns = self.now_ns;
                self.schedule(at_ns, self.host_resume(rank, at_ns));
            }
            Blocked::Done if state.drained() => {
                let now_ns = self.now_ns;
                self.notify(failure::Notice::Drained { rank, now_ns });
            }
            // The abort after a wait's timeout returns once the device drained (R15).
            Blocked::Aborting {
                floor_passed: true, ..
            } if state.drained() => {
                let (at_ns, generation) = (self.now_ns, state.generation);
                self.schedule(at_ns, Event::WaitAbortDue { rank, generation });
            }
            _ => {}
        }
    }

    /// An event instance fired: release the streams and hosts waiting on it.
    pub(super) fn fire(&mut self, rank: u32, instance: Instance) {
        let now_ns = self.now_ns;
        let state = &mut self.ranks[rank as usize];
        state.fired_ns[instance as usize] = now_ns;
        for waiter in state.waiters.take(instance) {
            match waiter {
                Waiter::Stream { stream } => {
                    self.ranks[rank as usize].streams[stream as usize].awaits_fire = false;
                    self.advance(rank, stream);
                }
                Waiter::Host => self.host_instance_fired(rank),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_that_ends_as_its_gpu_drains_is_advanced_with_nothing_left_r31() {
        // The program returns at once; the sleep's end drains the GPU, `stream_popped` ends the
        // process there, and the kernel end's advance then finds it dead with empty streams.
        let text = "[cluster]\nranks = 1\n[[op]]\ngpu_sleep_us = 1000\n";
        let timeline = simulate(&crate::scenario::parse("drain.toml", text).unwrap());
        let rank = &timeline.ranks[0];
        let end = rank.end.unwrap();
        assert_eq!(end.status, ExitStatus::Clean);
        assert_eq!(end.at_ns, Some(rank.kernels[0].end_ns));
    }

    #[test]
    fn a_stream_waiting_for_an_unfired_instance_is_its_waiter_once_however_much_is_pushed() {
        // The current stream waits for an event the side stream records after a 1-ms sleep,
        // and the host queues five kernels behind that wait, all at t = 0 (host calls cost
        // nothing here, so the wait is the stream's head when they come): the stream is one
        // waiter of the event, not one per push, and the kernels run after the sleep, in order.
        let text = "[cluster]\nranks = 1\n[host]\nevent_us = 0\nlaunch_us = 0\n\
                    [streams]\nside = {}\n\
                    [[op]]\nset_stream = \"side\"\n[[op]]\ngpu_sleep_us = 1000\n\
                    [[op]]\nrecord_event = \"e\"\n[[op]]\nset_stream = \"default\"\n\
                    [[op]]\nwait_event = \"e\"\n\
                    [[op]]\nkernel = { us = 10, sms = 1 }\n[[op]]\nkernel = { us = 10, sms = 1 }\n\
                    [[op]]\nkernel = { us = 10, sms = 1 }\n[[op]]\nkernel = { us = 10, sms = 1 }\n\
                    [[op]]\nkernel = { us = 10, sms = 1 }\n";
        let scenario = crate::scenario::parse("w.toml", text).unwrap();
        let mut engine = Engine::new(&scenario, Options::default());
        engine.run_host(0);
        let state = &engine.ranks[0];
        let waiting = (state.streams.iter()).filter(|s| s.awaits_fire).count();
        assert_eq!(waiting, 1, "the current stream waits for the event");
        assert_eq!(state.waiters.len(), 1, "one waiter, not one per push");
        engine.run();
        let state = &engine.ranks[0];
        assert!(state.streams.iter().all(|s| !s.awaits_fire));
        assert_eq!(state.waiters.len(), 0);
        let timeline = engine.finish();
        let kernels = &timeline.ranks[0].kernels;
        assert_eq!(kernels.len(), 6);
        assert!(kernels[1].start_ns >= kernels[0].end_ns, "{kernels:?}");
        assert!(
            kernels.windows(2).all(|k| k[0].end_ns <= k[1].start_ns),
            "{kernels:?}"
        );
    }

    #[test]
    fn a_kernel_item_names_the_op_of_a_compute_kernel_and_nothing_else() {
        assert_eq!(compute_op(KernelClass::Compute, 7), 7);
        assert_eq!(compute_op(KernelClass::Sleep, 7), NOT_COMPUTE);
        assert_eq!(compute_op(KernelClass::Communication, 7), NOT_COMPUTE);
        // An op index past what the item holds: the kernel's record is read instead.
        assert_eq!(compute_op(KernelClass::Compute, 65_533), 65_533);
        assert_eq!(compute_op(KernelClass::Compute, 65_534), OP_IN_RECORD);
        assert_eq!(compute_op(KernelClass::Compute, 1 << 20), OP_IN_RECORD);
        assert_eq!(
            std::mem::size_of::<QueuedItem>(),
            24,
            "a queued item stays 24 bytes"
        );
        assert_eq!(
            std::mem::size_of::<GpuItem>(),
            16,
            "a kernel item stays 16 bytes"
        );
    }
}
