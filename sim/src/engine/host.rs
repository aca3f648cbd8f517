//! The host side of a rank: a cursor over the steps ProcessGroupNCCL makes of each op
//! ([`crate::pg`]), each step mapped to simulated time.
//!
//! The host runs its program ahead of its GPU (R1): a step costs host time or pushes items onto
//! streams. A blocking step (R14, R15, a lazy communicator init R8, a cache release R20) stops
//! the cursor; when the host resumes, the cursor goes on at the next step (or runs the same
//! step again, for an allocation that had to wait). Faults are applied when the cursor reaches
//! an op, after its straggler delays.
//!
//! About 1,380 lines, over 1,000: one `match` maps every step kind to simulated time, and the blocking points
//! resume the same cursor; a communicator's init (R8, R29: the arrivals, the store's unique id,
//! the non-blocking exchange) reads and writes the same rank states. The polling waits, their
//! timeouts, the abort and the raise (and its catch) are in [`super::wait`].

use super::failure::Notice;
use super::findings::Accessed;
use super::{
    Blocked, Engine, GpuItem, InitArrival, Instance, StoreGet, Waiter, NEVER, NOT_ENQUEUED,
    NO_WORK_START,
};
use crate::lifetime::Binding;
use crate::pg::faults::HostEffect;
use crate::pg::{work, Kernel, NcclCall, ProcessGroupNccl, Slot, Step, WorkHolder};
use crate::race::{AccessKind, Point};
use crate::random::apply_jitter;
use crate::scenario::{CollectiveKind, GroupId, OpKind, Scenario, TensorId};
use crate::timeline::*;
use std::collections::BTreeMap;

/// Where a rank's host is in its program.
#[derive(Default)]
pub(super) struct Cursor {
    /// The steps of the current op; `next` is the one to run.
    steps: Vec<Step>,
    next: usize,
    /// Steps of the current op logged so far (a step run again is logged once).
    counted: usize,
    /// Host time at the current call's start.
    pub(super) call_start_ns: u64,
    /// Whether the host is inside a call: started, neither returned nor raised.
    in_call: bool,
    /// What the host blocked on last in a synchronisation, a cache release or a communicator's
    /// creation (the other blocking points say it in [`Blocked`]).
    blocked_on: Option<HostBlock>,
    /// The collective record the current call made.
    call_collective: Option<u32>,
    /// Where the op's accesses happen (R21): its last GPU item.
    access_point: Option<Point>,
    /// The NCCL call issued last, until its Work is watched.
    issued: Option<Issued>,
    /// The current call's NCCL launch latency, slowed as the call is (`CallWarmth::slowed_ns`).
    nccl_launch_latency_ns: Option<u64>,
    /// The op's collective calls that checked their communicators so far.
    calls_checked: usize,
    /// The current op's delays before it took host time, and the op is not lowered yet: what
    /// it does depends on what the side threads did until the host's time (R27: a communicator
    /// aborted meanwhile makes a collective raise), so it is lowered once the simulation got
    /// there ([`Engine::lower_op`]).
    unlowered: bool,
}

#[derive(Clone, Copy)]
struct Issued {
    group: GroupId,
    stream: u16,
    /// As issued: a mismatch fault changes the kind.
    kind: CollectiveKind,
}

impl Cursor {
    /// The cursor at the start of a rank's program: on the steps `init_process_group` runs
    /// before the first op (R8, eager init).
    pub(super) fn at_start(scenario: &Scenario, pg: &mut ProcessGroupNccl) -> Cursor {
        let mut steps = Vec::new();
        pg.prologue(scenario, &mut steps);
        Cursor {
            steps,
            ..Cursor::default()
        }
    }

    /// The current op's remaining steps are skipped: a raise the program caught left the op,
    /// and the cursor goes on at the next one.
    pub(super) fn leave_op(&mut self) {
        self.next = self.steps.len();
    }

    /// The current op's collective calls that checked their communicators so far.
    pub(super) fn calls_checked(&self) -> usize {
        self.calls_checked
    }

    /// The creation of the communicator the host waits for ended at `at_ns` (R8): it exists
    /// from then in `created_ns` ([`RankState::comm_created_ns`]).
    pub(super) fn comm_init_ended(&self, created_ns: &mut [u64], at_ns: u64) {
        if let Some(HostBlock::Communicator { group }) = self.blocked_on {
            super::rank::comm_created(created_ns, usize::from(group), at_ns);
        }
    }
}

/// The steps each rank executed, when the caller asked for them.
pub(super) type StepLog = Option<(u32, Vec<Step>)>;

impl Engine<'_> {
    /// Runs the rank's steps until the host blocks or the program ends (R1: the host runs ahead
    /// of the GPU).
    pub(super) fn run_host(&mut self, rank: u32) {
        let logged = self.step_log.as_ref().is_some_and(|(r, _)| *r == rank);
        // The simulation's time does not move while the host runs.
        let read_bound_ns = self.dump_signal_read_bound_ns();
        loop {
            let horizon_ns = self.host_horizon_ns().min(read_bound_ns);
            let max_sim_time_ns = self.scenario.max_sim_time_ns;
            let launch_queue_depth = self.scenario.host.launch_queue_depth as usize;
            let state = &mut self.ranks[rank as usize];
            if !matches!(state.blocked, Blocked::Running) {
                return;
            }
            if state.host_ns > horizon_ns
                || state.host_ns > max_sim_time_ns
                || (!state.aborts_awaiting_drain.is_empty() && state.host_ns > self.now_ns)
            {
                // A side thread may act before the host's next step (R26–R29): at a wake-up it
                // asked for, or when the device drains under its abort of the communicators
                // (no wake-up time known). Or host-only work went past the time cap. Wait for
                // the simulation to reach the host's time (the event loop's cap check ends a
                // run past the cap), then go on.
                let at_ns = state.host_ns;
                state.blocked = Blocked::Timer;
                self.schedule(at_ns.max(self.now_ns), self.host_resume(rank, at_ns));
                return;
            }
            let cursor = &mut state.cursor;
            if cursor.next == cursor.steps.len() {
                if cursor.unlowered {
                    if !self.reach_op(rank) {
                        return;
                    }
                } else if !self.next_op(rank) {
                    return;
                }
                continue;
            }
            let index = cursor.next;
            let step = cursor.steps[index];
            // Straggler delays (the steps of an op not lowered yet) never block.
            if let Some(stream) = enqueue_stream(step).filter(|_| !cursor.unlowered) {
                if state.streams[stream as usize].commands() >= launch_queue_depth {
                    // The enqueue waits until the GPU takes a command off the stream, then runs.
                    state.blocked = Blocked::LaunchQueue { stream };
                    return;
                }
            }
            let cursor = &mut state.cursor;
            cursor.next += 1;
            if logged && index == cursor.counted {
                cursor.counted += 1;
                self.log_step(step);
            }
            self.step(rank, step);
        }
    }

    /// The program of `rank` ran to its end (R31): its process ends now if its GPU work is
    /// done, else once it drained, or earlier if the watchdog or the destructor's abort of the
    /// communicators says so (`failure`).
    fn program_returned(&mut self, rank: u32) {
        let scenario = self.scenario;
        let state = &self.ranks[rank as usize];
        let abort_timeout = (state.pg.communicator_groups())
            .map(|group| (group, scenario.groups[group].timeout_ns))
            .min_by_key(|&(group, timeout_ns)| (timeout_ns, group));
        self.notify(Notice::ProgramReturned {
            rank,
            host_ns: state.host_ns,
            abort_timeout,
            drained: state.drained(),
        });
    }

    /// PyTorch's warning at an unbatched send or receive on the eager world (R11), logged by
    /// the main thread at the call; once per class of ranks that behave alike.
    fn warn_eager_p2p(&mut self, rank: u32, group: GroupId) {
        let message = crate::pg::work::eager_p2p_serialization_warning(
            self.classes.rank_of(rank),
            self.scenario.groups[group].ranks.len(),
        );
        let at_ns = self.ranks[rank as usize].host_ns;
        self.failure.warn(rank, group, at_ns, message);
    }

    /// Adds a step to the log of the rank whose steps were asked for.
    fn log_step(&mut self, step: Step) {
        if let Some((_, steps)) = &mut self.step_log {
            steps.push(step);
        }
    }

    /// Moves the cursor to the next op of the program: its straggler delays run, then a fault
    /// may apply, then the op is lowered. False when the host stopped (the program ended, or
    /// a fault stopped it).
    fn next_op(&mut self, rank: u32) -> bool {
        let scenario = self.scenario;
        let ops = &scenario.ops;
        let state = &mut self.ranks[rank as usize];
        if state.pc == ops.len() {
            if state.iteration + 1 == scenario.repeat && state.host_ns > self.now_ns {
                // The program returns at the host's time: how its process ends depends on what
                // the side threads did until then (R31), so the simulation gets there first.
                let at_ns = state.host_ns;
                state.blocked = Blocked::Timer;
                self.schedule(at_ns, self.host_resume(rank, at_ns));
                return false;
            }
            state.pc = 0;
            state.iteration += 1;
            if state.iteration == scenario.repeat {
                state.blocked = Blocked::Done;
                self.program_returned(rank);
                return false;
            }
            if state.iteration == 1 {
                state.reserve_iterations((scenario.repeat - 1) as usize);
            }
            // Summary hook (engine/summary.rs): fold what the past iterations completed.
            self.iteration_ended(rank);
        }
        let state = &mut self.ranks[rank as usize];
        let op = &ops[state.pc];
        state.pc += 1;
        if !op.runs_on(state.timeline.rank) {
            return true;
        }
        state.blocked_op = op.index;
        let delayed_from_ns = state.host_ns;
        let mut steps = std::mem::take(&mut state.cursor).steps;
        steps.clear();
        state
            .pg
            .before_op(scenario, state.iteration, op, &mut steps);
        let logged = self.step_log.as_ref().is_some_and(|(r, _)| *r == rank);
        let mut ran = 0;
        while ran < steps.len() && self.ranks[rank as usize].host_ns == delayed_from_ns {
            let step = steps[ran];
            ran += 1;
            if logged {
                self.log_step(step);
            }
            self.step(rank, step);
        }
        steps.drain(..ran);
        let state = &mut self.ranks[rank as usize];
        state.cursor.steps = steps;
        if state.host_ns != delayed_from_ns {
            // The run loop runs the delays after the first one that took host time (a GPU
            // delay's launch), then reaches the op, once the simulation got to the host's time:
            // a side thread may end the process, or abort a communicator, during the delay.
            state.cursor.unlowered = true;
            return true;
        }
        self.reach_op(rank)
    }

    /// The host reached the op `next_op` moved to: its fault, if one is placed there, then its
    /// steps. False when the host stops there.
    fn reach_op(&mut self, rank: u32) -> bool {
        let state = &mut self.ranks[rank as usize];
        state.cursor.unlowered = false;
        let op = state.blocked_op;
        match self.fault_reached(rank, op) {
            HostEffect::Run => {}
            HostEffect::Skip => return true,
            HostEffect::Stop => return false,
        }
        self.ranks[rank as usize].race.host_step();
        self.lower_op(rank);
        true
    }

    /// Puts the steps of the op the host reached (the one `next_op` moved to) in its cursor.
    fn lower_op(&mut self, rank: u32) {
        let scenario = self.scenario;
        let state = &mut self.ranks[rank as usize];
        let op = &scenario.ops[state.pc - 1];
        let mut steps = std::mem::take(&mut state.cursor.steps);
        // Only an op that could still create a communicator can raise in its creation (R29):
        // the copy is not made once every communicator of the rank exists.
        // Boxed and written only when it changes: a copy of the large state moved in and out at
        // every op cost about 170 instructions an op.
        if op.catch && state.pg.communicators_pending(scenario) {
            state.pg_before_op = Some(Box::new(state.pg.clone()));
        } else if state.pg_before_op.is_some() {
            state.pg_before_op = None;
        }
        state.pg.keep_call_checkpoints(op.catch);
        // R27: a collective on an aborted communicator raises before it issues anything.
        let failure = &self.failure;
        let aborted = |group| failure.is_aborted(rank, group);
        if let Err(error) = state.pg.reached_op(scenario, op, aborted, &mut steps) {
            unreachable!("validation guarantees what the op uses: {}", error.0);
        }
        state.cursor = Cursor {
            steps,
            ..Cursor::default()
        };
    }

    /// Executes one step in simulated time.
    #[inline(always)]
    fn step(&mut self, rank: u32, step: Step) {
        let op = self.ranks[rank as usize].blocked_op;
        match step {
            Step::CallStart => {
                let state = &mut self.ranks[rank as usize];
                state.cursor.call_start_ns = state.host_ns;
                state.cursor.in_call = true;
                state.cursor.call_collective = None;
                state.cursor.nccl_launch_latency_ns = None;
            }
            Step::CallEnd => {
                let state = &mut self.ranks[rank as usize];
                let host_ns = state.host_ns;
                if let Some(collective) = state.cursor.call_collective {
                    state.timeline.collectives[collective as usize].host_end_ns = host_ns;
                    state.last_collective_return_ns = Some(host_ns);
                }
                self.push_host_call(rank, op, host_ns);
            }
            Step::HostCost { cost_ns } => self.ranks[rank as usize].host_ns += cost_ns,
            Step::CollectiveCost(warmth) => {
                let state = &mut self.ranks[rank as usize];
                let since_previous_ns = state
                    .last_collective_return_ns
                    .map(|returned_ns| state.host_ns.saturating_sub(returned_ns));
                let cost_ns = warmth.cost_ns(since_previous_ns);
                state.host_ns += cost_ns;
                state.cursor.nccl_launch_latency_ns =
                    Some(warmth.slowed_ns(self.scenario.host.nccl_launch_latency_ns, cost_ns));
            }
            Step::HostSleep { duration_ns } => self.ranks[rank as usize].host_ns += duration_ns,
            Step::Record { stream, slot } | Step::Probe { stream, slot } => {
                let instance = self.new_instance(rank, stream);
                let host_ns = self.ranks[rank as usize].host_ns;
                let item = match step {
                    Step::Probe { .. } => GpuItem::Probe { instance },
                    _ => GpuItem::Record { instance },
                };
                self.push(rank, stream, item, host_ns);
                let slots = &mut self.ranks[rank as usize].slot_instance;
                debug_assert_eq!(slot as usize, slots.len());
                slots.push(instance);
            }
            Step::StreamWait { stream, slot } => {
                let instance = self.instance(rank, slot);
                self.push_stream_wait(rank, op, stream, instance);
            }
            Step::Launch {
                stream,
                class,
                kernel,
                jitter,
            } => {
                let gpu = &self.scenario.cluster.gpu;
                let state = &mut self.ranks[rank as usize];
                let mut duration_ns = match kernel {
                    Kernel::Spin { duration_ns, .. } => duration_ns,
                    Kernel::Gemm { .. } => self.gemm_ns_by_op[op],
                };
                if class == KernelClass::Compute {
                    let mut speed = state.compute_speed;
                    if gpu
                        .boost_ns
                        .is_some_and(|boost_ns| state.compute_launched_ns >= boost_ns)
                    {
                        // The GPU has settled to its sustained clock under the power limit.
                        speed /= gpu.sustained_clock;
                    }
                    // Within what the model holds, however slow the settled clock.
                    let modelled_ns = crate::units::modelled_ns(duration_ns as f64 * speed);
                    duration_ns = apply_jitter(modelled_ns, jitter);
                    state.compute_launched_ns =
                        state.compute_launched_ns.saturating_add(duration_ns);
                }
                let host_ns = state.host_ns;
                let point = self.launch_kernel(rank, stream, op, class, duration_ns, host_ns);
                self.ranks[rank as usize].cursor.access_point = Some(point);
            }
            Step::CheckComm { group } => {
                let host_ns = self.ranks[rank as usize].host_ns;
                if self.failure.is_aborting(rank, group) {
                    // The watchdog holds the communicator while it aborts it (R27): the call
                    // blocks until the abort returned, then raises (mode 2), unless the
                    // watchdog took the process down then (mode 1).
                    let state = &mut self.ranks[rank as usize];
                    state.cursor.next -= 1;
                    state.blocked = Blocked::Watchdog {
                        group: self.failure.watchdog_group(group) as u16,
                    };
                    return;
                }
                let call = self.ranks[rank as usize].cursor.calls_checked;
                self.ranks[rank as usize].cursor.calls_checked += 1;
                // An aborted communicator raises and ends the process (R27).
                self.notify(Notice::CommunicatorUsed {
                    rank,
                    group,
                    op,
                    host_ns,
                });
                if self.take_caught(rank) {
                    // `catch = true`: the call ends where it raised; the program goes on from
                    // before the call.
                    self.push_host_call(rank, op, host_ns);
                    let state = &mut self.ranks[rank as usize];
                    state.pg.left_before_call(call);
                    state.cursor.leave_op();
                }
            }
            Step::NameError { work } => {
                let host_ns = self.ranks[rank as usize].host_ns;
                self.notify(Notice::NameError {
                    rank,
                    work,
                    op,
                    host_ns,
                });
            }
            // Created in init_process_group, before the program's t = 0: free here.
            Step::EagerInit { group } => {
                let state = &mut self.ranks[rank as usize];
                state.comm_created(group, state.host_ns);
            }
            Step::FetchUniqueId { group, cost_ns } => self.fetch_unique_id(rank, group, cost_ns),
            Step::InitComm {
                group,
                cost_ns,
                nonblocking_timeout_ns,
                nonblocking,
            } => self.init_comm(rank, group, cost_ns, (nonblocking_timeout_ns, nonblocking)),
            Step::EagerP2pWarning { group } => self.warn_eager_p2p(rank, group),
            Step::ReleaseShelf { group } => {
                if !self.release_shelf(rank, group) {
                    // The release runs again once the simulation reached the host's time.
                    self.ranks[rank as usize].cursor.next -= 1;
                }
            }
            Step::Nccl(call) => self.nccl(rank, op, call),
            Step::Watch {
                collective,
                end,
                stash,
                holder,
            } => self.watch(rank, collective, end, stash, holder),
            Step::DropHandle { collective } => self.ranks[rank as usize]
                .memory
                .books
                .drop_handle(collective as usize),
            Step::Wait {
                collective,
                stream,
                end,
                cost_ns,
            } => {
                let instance = self.instance(rank, end);
                let state = &mut self.ranks[rank as usize];
                let host_start_ns = state.host_ns;
                state.host_ns += cost_ns;
                let stream_wait = state.timeline.stream_waits.len() as u32;
                self.push_stream_wait(rank, op, stream, instance);
                let state = &mut self.ranks[rank as usize];
                state.timeline.collectives[collective as usize].wait = Some(WaitRecord {
                    op: op as OpRef,
                    host_start_ns,
                    host_end_ns: state.host_ns,
                    stream,
                    released_ns: NEVER,
                    completed_at_return: false,
                });
                state.scratch.collective_wait_stream_wait[collective as usize] = stream_wait;
                // After its stream wait, every wait() on a Work that stored its NCCL async
                // error (its own `is_completed()` found it) aborts the communicator, then
                // raises (R15, R27); the watchdog's finding stays in its copy of the Work.
                if self.failure.stored_error_ns(rank, collective).is_some() {
                    self.wait_found_error(rank, collective);
                }
            }
            Step::ReleaseOnWait { collective } => {
                // R18: after the stream block the Work lets go of its stashed tensor.
                let books = &mut self.ranks[rank as usize].memory.books;
                books.release_on_wait(collective as usize);
            }
            Step::Poll {
                collective,
                end,
                interval_ns,
                timeout_ns,
            } => self.poll(rank, collective, end, interval_ns, timeout_ns),
            Step::WaitReturn { collective } => {
                let state = &mut self.ranks[rank as usize];
                let host_ns = state.host_ns;
                if let Some(wait) = &mut state.timeline.collectives[collective as usize].wait {
                    wait.host_end_ns = host_ns;
                }
            }
            Step::Query { slot, cost_ns } => {
                let instance = self.instance(rank, slot);
                let polled = match self.scenario.ops[op].kind {
                    OpKind::IsCompleted { work } => self.ranks[rank as usize].work_end[work]
                        .map(|(_, collective)| (collective, self.poll_error_ns(rank, collective))),
                    _ => None,
                };
                let failed_ns = polled.and_then(|(_, failed_ns)| failed_ns);
                let state = &mut self.ranks[rank as usize];
                state
                    .scratch
                    .query_failed_ns
                    .push(failed_ns.unwrap_or(NEVER));
                state.host_ns += cost_ns;
                if let Some((collective, failed_ns)) = polled {
                    // The program's Work stores the error its own query found (R27).
                    let host_ns = state.host_ns;
                    (self.failure).program_polled((rank, collective), failed_ns, host_ns);
                }
                let state = &mut self.ranks[rank as usize];
                state.timeline.queries.push(QueryRecord {
                    iteration: state.iteration,
                    op: op as OpRef,
                    host_ns: state.host_ns,
                    completed: false,
                });
                state.scratch.query_instance.push(instance);
            }
            Step::EventSync { slot, cost_ns } => {
                let instance = self.instance(rank, slot);
                let stream = self.ranks[rank as usize].instance_stream[instance as usize];
                self.block_on(rank, &[instance], cost_ns, HostBlock::Stream { stream });
            }
            Step::StreamSync { stream, cost_ns } => self.stream_sync(rank, stream, cost_ns),
            Step::StreamSyncUnlessCompleted {
                collective,
                stream,
                end,
                query_cost_ns,
                sync_cost_ns,
            } => {
                let instance = self.instance(rank, end);
                let error_ns = self.poll_error_ns(rank, collective);
                let now_ns = self.now_ns;
                let state = &mut self.ranks[rank as usize];
                let host_ns = state.host_ns;
                let fired_ns = state.fired_ns[instance as usize];
                if fired_ns == NEVER && now_ns < host_ns {
                    // is_completed() asks at the host's time: the simulation gets there
                    // first, then the step runs again.
                    state.cursor.next -= 1;
                    state.blocked = Blocked::Timer;
                    self.schedule(host_ns, self.host_resume(rank, host_ns));
                    return;
                }
                state.host_ns += query_cost_ns;
                // The barrier's own `isCompleted()` stores the error it finds, and the wait
                // then aborts the communicator and raises (R14, R27).
                (self.failure).program_polled((rank, collective), error_ns, host_ns);
                if self.failure.stored_error_ns(rank, collective).is_some() {
                    self.wait_found_error(rank, collective);
                } else if !work::is_completed(fired_ns <= host_ns, error_ns, host_ns) {
                    self.stream_sync(rank, stream, sync_cost_ns);
                }
            }
            Step::DeviceSync { cost_ns } => {
                let streams = self.ranks[rank as usize].streams.len() as u16;
                let instances: Vec<Instance> = (0..streams).map(|s| self.record(rank, s)).collect();
                self.block_on(rank, &instances, cost_ns, HostBlock::Device);
            }
            Step::Item {
                stream, cost_ns, ..
            } => {
                let (instance, point) = self.record_at(rank, stream);
                self.ranks[rank as usize].cursor.access_point = Some(point);
                self.block_on(rank, &[instance], cost_ns, HostBlock::Stream { stream });
            }
            Step::Alloc { tensor, stream } => {
                if !self.alloc(rank, op, tensor, stream) {
                    // The allocation runs again once the host resumes.
                    self.ranks[rank as usize].cursor.next -= 1;
                }
            }
            Step::Free { tensor } => self.free(rank, tensor),
            Step::SetAside { tensor } => self.ranks[rank as usize].memory.books.set_aside(tensor),
            Step::FreeSetAside { tensor } => self.free_set_aside(rank, tensor),
            Step::Mark {
                mark,
                stream,
                cost_ns,
            } => {
                let state = &mut self.ranks[rank as usize];
                let host_ns = state.host_ns;
                state.host_ns += cost_ns;
                let instance = self.record(rank, stream);
                let state = &mut self.ranks[rank as usize];
                state.timeline.marks.push(MarkRecord {
                    iteration: state.iteration,
                    mark: mark as u32,
                    host_ns,
                    gpu_ns: NEVER,
                });
                state.scratch.mark_instance.push(instance);
            }
            Step::Copy { stream } => {
                let state = &mut self.ranks[rank as usize];
                state.cursor.access_point = Some(state.race.enqueue(stream));
            }
            Step::Access { tensor, write } => {
                self.access_at_op_point(rank, op, Accessed::Tensor(tensor, Binding::Current), write)
            }
            Step::BucketAccess {
                op: bucketed,
                bucket,
                write,
            } => {
                let accessed = Accessed::Bucket {
                    op: bucketed as usize,
                    bucket,
                };
                self.access_at_op_point(rank, op, accessed, write)
            }
            Step::ReadSetAside { tensor } => {
                let accessed = Accessed::Tensor(tensor, Binding::SetAside);
                self.access_at_op_point(rank, op, accessed, false)
            }
        }
    }

    /// An access by op `op` at its last GPU item (R21).
    fn access_at_op_point(&mut self, rank: u32, op: usize, accessed: Accessed, write: bool) {
        let state = &mut self.ranks[rank as usize];
        let point = match &state.cursor.access_point {
            Some(point) => point.clone(),
            None => {
                // An op without a GPU item of its own accesses at its place in the stream.
                let point = state.race.enqueue(self.scenario.ops[op].stream as u16);
                state.cursor.access_point = Some(point.clone());
                point
            }
        };
        let kind = if write {
            AccessKind::Write
        } else {
            AccessKind::Read
        };
        self.access(rank, point, accessed, kind, op);
    }

    pub(super) fn instance(&self, rank: u32, slot: Slot) -> Instance {
        self.ranks[rank as usize].slot_instance[slot as usize]
    }

    /// The host call record of the current call, ending at `end_ns` (its return or its raise).
    pub(super) fn push_host_call(&mut self, rank: u32, op: usize, end_ns: u64) {
        let state = &mut self.ranks[rank as usize];
        state.cursor.in_call = false;
        state.timeline.host.push(HostCall {
            iteration: state.iteration,
            op: op as OpRef,
            start_ns: state.cursor.call_start_ns,
            end_ns,
        });
    }

    /// R29 in a non-blocking eager `init_process_group` (R8): `initNCCLComm` exchanges the
    /// unique id through the store before it starts the creation. The root publishes it at its
    /// host time, and the members already blocked in `store.get` go on from then, unless their
    /// `store.get` gave up by then (an id published at that very instant is too late); a member
    /// that finds it published goes on from the later of the two times, else it blocks and
    /// raises after the store's timeout (the group's). A member's part of the creation runs
    /// from its id on, beside the program ([`Self::unique_id_received`]).
    fn fetch_unique_id(&mut self, rank: u32, group: GroupId, cost_ns: u64) {
        let host_ns = self.ranks[rank as usize].host_ns;
        let root = self
            .classes
            .simulated_of(self.scenario.groups[group].ranks[0]);
        let store_timeout_ns = self.scenario.groups[group].timeout_ns;
        let exchange = &mut self.unique_ids[group];
        if rank == root {
            exchange.published_ns = Some(host_ns);
            let (in_time, too_late): (BTreeMap<_, _>, BTreeMap<_, _>) =
                (std::mem::take(&mut exchange.waiting).into_iter())
                    .partition(|(_, get)| host_ns < get.since_ns + store_timeout_ns);
            exchange.waiting = too_late;
            self.unique_id_received(group, rank, host_ns, cost_ns);
            for (member, get) in in_time {
                let resume_ns = get.since_ns.max(host_ns);
                self.unique_id_received(group, member, resume_ns, get.cost_ns);
                self.schedule(
                    resume_ns.max(self.now_ns),
                    self.host_resume(member, resume_ns),
                );
            }
            return;
        }
        if let Some(root_ns) = exchange.published_ns {
            if root_ns < host_ns + store_timeout_ns {
                let id_at_ns = host_ns.max(root_ns);
                self.ranks[rank as usize].host_ns = id_at_ns;
                self.unique_id_received(group, rank, id_at_ns, cost_ns);
                return;
            }
        }
        exchange.waiting.insert(
            rank,
            StoreGet {
                since_ns: host_ns,
                cost_ns,
            },
        );
        let state = &mut self.ranks[rank as usize];
        state.blocked = Blocked::CommInit;
        state.cursor.blocked_on = Some(HostBlock::Communicator {
            group: group as u16,
        });
        self.notify_store_get(rank, group, host_ns, false);
    }

    /// `rank`'s `store.get` of `group`'s unique id, to the failure component: where
    /// `root_published` the rank has the id at `host_ns`, else its wait began then and raises
    /// after the store's timeout unless the root comes (R29).
    fn notify_store_get(&mut self, rank: u32, group: GroupId, host_ns: u64, root_published: bool) {
        self.notify(Notice::StoreWait {
            rank,
            group,
            host_ns,
            root_published,
            nonblocking_timeout_ns: None,
            nonblocking: false,
        });
    }

    /// `arrival` joins `group`'s init (R8), after the arrivals before it.
    fn push_arrival(&mut self, group: GroupId, arrival: InitArrival) {
        if arrival.rank == self.root_of(group) {
            self.comm_init_root_ns[group] = Some(arrival.host_ns);
        }
        let arrived = &mut self.comm_init[group];
        self.comm_init_index[group].insert(arrival.rank, arrived.len());
        arrived.push(arrival);
    }

    /// The simulated rank of `group`'s root, which publishes its unique id (R29).
    fn root_of(&self, group: GroupId) -> u32 {
        self.classes
            .simulated_of(self.scenario.groups[group].ranks[0])
    }

    /// `rank` got the unique id of `group` at `at_ns` in a non-blocking eager init: NCCL's
    /// creation runs from there beside the program (its part costs `cost_ns`), the rank's
    /// arrival in the group's init (R8). The last one forms it.
    fn unique_id_received(&mut self, group: GroupId, rank: u32, at_ns: u64, cost_ns: u64) {
        self.unique_ids[group].fetched.insert(rank);
        // `initNCCLComm` has its communicator once the non-blocking creation started.
        self.ranks[rank as usize].comm_created(group, at_ns);
        self.push_arrival(
            group,
            InitArrival {
                rank,
                host_ns: at_ns,
                cost_ns,
                counted: true,
                left: false,
            },
        );
        self.comm_init_ranks[group] += self.classes.weight(rank);
        if (self.comm_init_ranks[group] as usize) == self.scenario.groups[group].ranks.len() {
            self.init_formed(group);
        }
    }

    /// R8: the first collective of a group bootstraps the communicator, a rendezvous of every
    /// member through the store (R29), inside the call.
    fn init_comm(
        &mut self,
        rank: u32,
        group: GroupId,
        cost_ns: u64,
        (nonblocking_timeout_ns, nonblocking): (Option<u64>, bool),
    ) {
        if nonblocking {
            // Every rank got the world's unique id in `init_process_group` (a store timeout
            // there ends its process: that op cannot catch), so its first use only waits for
            // the creation.
            self.await_nonblocking_comm(rank, group, nonblocking_timeout_ns);
            return;
        }
        let host_ns = self.ranks[rank as usize].host_ns;
        let state = &mut self.ranks[rank as usize];
        state.blocked = Blocked::CommInit;
        state.cursor.blocked_on = Some(HostBlock::Communicator {
            group: group as u16,
        });
        let root = self
            .classes
            .simulated_of(self.scenario.groups[group].ranks[0]);
        let store_timeout_ns = self.scenario.groups[group].timeout_ns;
        // `store.get` gives up at its deadline: an id published at that very instant comes too
        // late (R29). The rule holds whichever of the two the engine processes first.
        let root_too_late = (self.comm_init_root_ns[group])
            .is_some_and(|root_ns| root_ns >= host_ns + store_timeout_ns);
        let arrival = InitArrival {
            rank,
            host_ns,
            cost_ns,
            counted: !root_too_late,
            left: false,
        };
        if root_too_late {
            // The root, whose host ran ahead, publishes the unique id only once this rank's
            // `store.get` timed out (R29): the rank never gets to do its part of the init.
            self.push_arrival(group, arrival);
            self.notify_store_get(rank, group, host_ns, false);
            return;
        }
        if rank == root {
            // The members that arrived earlier in the engine's order, though the host of the
            // root ran ahead, and whose `store.get` gave up by the time it publishes (R29), do
            // no part of the init: each raises at its deadline, as where the engine processed
            // that deadline first.
            for arrival in &mut self.comm_init[group] {
                if arrival.counted && arrival.host_ns + store_timeout_ns <= host_ns {
                    arrival.counted = false;
                    self.comm_init_ranks[group] -= self.classes.weight(arrival.rank);
                }
            }
        }
        self.push_arrival(group, arrival);
        self.comm_init_ranks[group] += self.classes.weight(rank);
        if (self.comm_init_ranks[group] as usize) < self.scenario.groups[group].ranks.len() {
            // Hosts run ahead of the simulation, each to a time of its own: the root publishes
            // the unique id at its arrival's time, which may come after a member's that the
            // engine processed later. A member has the id from the later of the two, unless its
            // `store.get` timed out first or at that instant (R29).
            let id_at_ns = (self.comm_init_root_ns[group]).and_then(|root_ns| {
                (root_ns < host_ns + store_timeout_ns).then_some(host_ns.max(root_ns))
            });
            self.notify_store_get(rank, group, id_at_ns.unwrap_or(host_ns), id_at_ns.is_some());
            return;
        }
        // The init is collective: it ends for every member together, once the member that
        // arrived and did its part latest is done (a modelling choice: each member's part runs
        // from its arrival, as NCCL's once-per-process setup comes before its bootstrap; not
        // measured with members that differ). A process's first communicator costs more than a
        // later one (R8), and members may differ there (some created another group's eagerly);
        // taking the last arrival's cost for all made the result depend on which of equal
        // arrivals the engine processed last. Where the members' costs are equal, this is the
        // last arrival plus that cost, as before.
        self.init_formed(group);
    }

    /// Every member of `group` did or does its part of the init (R8): the members waiting in
    /// it go on at its end. Those are the ones that arrived in the call that creates it, and
    /// under a non-blocking eager init the ones already in their first use; a member whose
    /// part started in `init_process_group` and that has not reached its first use goes on
    /// there ([`Self::await_nonblocking_comm`]).
    fn init_formed(&mut self, group: GroupId) {
        let arrived = &self.comm_init[group];
        let resume_ns = init_end_ns(arrived);
        self.comm_init_end_ns[group] = resume_ns;
        let exchange = &mut self.unique_ids[group];
        let mut members: Vec<u32> = std::mem::take(&mut exchange.in_first_use)
            .into_iter()
            .collect();
        members.extend(
            (arrived.iter())
                .filter(|arrival| !arrival.left)
                .map(|arrival| arrival.rank)
                .filter(|rank| !exchange.fetched.contains(rank)),
        );
        for member in members {
            self.ranks[member as usize].blocked = Blocked::CommInit;
            let end = self.comm_init_end(member, resume_ns);
            self.schedule(resume_ns.max(self.now_ns), end);
        }
    }

    /// The first use of a communicator whose non-blocking creation `rank` started in
    /// `init_process_group`, with the unique id (R8): it goes on at the creation's end where
    /// every member's part counts and that end comes within `nonblocking_timeout_ns` of the
    /// wait's start (and no member's process ends before it); else it raises after
    /// `nonblocking_timeout_ns` from its start (NCCLUtils' wait for the communicator; `None`:
    /// it waits for good).
    fn await_nonblocking_comm(
        &mut self,
        rank: u32,
        group: GroupId,
        nonblocking_timeout_ns: Option<u64>,
    ) {
        let state = &mut self.ranks[rank as usize];
        let host_ns = state.host_ns;
        let formed =
            (self.comm_init_ranks[group] as usize) == self.scenario.groups[group].ranks.len();
        let end_ns = self.comm_init_end_ns[group];
        // Over in the simulation already: no member's end can undo it any more (R8).
        if formed && end_ns <= self.now_ns {
            state.host_ns = host_ns.max(end_ns);
            return;
        }
        state.blocked = Blocked::CommInit;
        state.cursor.blocked_on = Some(HostBlock::Communicator {
            group: group as u16,
        });
        let in_time =
            nonblocking_timeout_ns.is_none_or(|timeout_ns| end_ns <= host_ns + timeout_ns);
        if !formed {
            self.unique_ids[group].in_first_use.insert(rank);
        } else if in_time {
            // The rank waits for the end, as the members already waiting do: a member's
            // process may still end before it and undo the creation (R8), whichever rank the
            // engine got to first (hosts run ahead of the simulation).
            self.schedule(end_ns, self.comm_init_end(rank, end_ns));
        }
        // Else the creation ends after the wait's timeout: the rank raises at the timeout (the
        // store wake's `waits_for_communicator`), nothing resumes it at the end.
        self.notify(Notice::StoreWait {
            rank,
            group,
            host_ns,
            root_published: true,
            nonblocking_timeout_ns,
            nonblocking: true,
        });
    }

    /// The program caught the raise of `rank`'s communicator creation at `at_ns` (a store
    /// timeout, R29, or the non-blocking init's, R8; `catch = true`): the call ends at the raise
    /// and the host goes on at the next op, its ProcessGroupNCCL as before the call. A lazy
    /// init's communicator was never created, so the rank leaves the group's init and the
    /// group's next collective creates it again; a non-blocking eager init's first use leaves
    /// the creation `init_process_group` began running, and the next collective waits for it
    /// again. (`init_process_group` itself cannot catch: a `store.get` there that times out
    /// ends the process.)
    pub(super) fn comm_init_raised(&mut self, rank: u32, at_ns: u64) {
        let state = &mut self.ranks[rank as usize];
        let Some(HostBlock::Communicator { group }) = state.cursor.blocked_on else {
            unreachable!("a rank in a communicator's init is blocked on it");
        };
        let group = group as GroupId;
        state.caught = false;
        state.pg = *(state.pg_before_op.take()).expect("an op that catches keeps its state");
        let op = state.blocked_op;
        // The host leaves the init: the resume its end scheduled, if every member counted
        // once, is stale (it would resume the host elsewhere).
        state.generation += 1;
        let exchange = &mut self.unique_ids[group];
        exchange.in_first_use.remove(&rank);
        if exchange.fetched.contains(&rank) {
            // A non-blocking eager init's first use: ProcessGroupNCCL keeps the communicator
            // `init_process_group` began (`initNCCLComm` cached it), so the group's next
            // collective waits for the same creation again, and the rank's part runs on (R8),
            // also where the others were resumed at its end before a member's death undid it.
        } else {
            // A rank whose store wait timed out before the root published never counted.
            if let Some(index) = self.comm_init_index[group].remove(&rank) {
                let arrival = &mut self.comm_init[group][index];
                if arrival.counted {
                    self.comm_init_ranks[group] -= self.classes.weight(rank);
                }
                arrival.counted = false;
                arrival.left = true;
                if self.comm_init_root_ns[group].is_some() && rank == self.root_of(group) {
                    self.comm_init_root_ns[group] = None;
                }
            }
        }
        self.push_host_call(rank, op, at_ns);
        let state = &mut self.ranks[rank as usize];
        state.cursor.leave_op();
        state.blocked = Blocked::Timer;
        self.schedule(at_ns, self.host_resume(rank, at_ns));
    }

    /// Whether `rank` waits in a communicator's init that will not end: a member's process
    /// ended while it ran (R8), so the `CommInitEnd` its end scheduled is dropped.
    pub(super) fn waits_in_unformed_init(&self, rank: u32) -> bool {
        let state = &self.ranks[rank as usize];
        let (Blocked::CommInit, Some(HostBlock::Communicator { group })) =
            (state.blocked, state.cursor.blocked_on)
        else {
            return false;
        };
        let group = group as GroupId;
        (self.comm_init_ranks[group] as usize) < self.scenario.groups[group].ranks.len()
    }

    /// R10c: the NCCL kernel, joined to the group's rendezvous (R16).
    fn nccl(&mut self, rank: u32, op: usize, call: NcclCall) {
        let (kind, bytes) = self.failure.issued(rank, call.kind, call.bytes);
        let input_ready = self.instance(rank, call.input_ready);
        let work_start = call
            .work_start
            .map_or(NO_WORK_START, |slot| self.instance(rank, slot));
        let state = &mut self.ranks[rank as usize];
        state.race.forget(input_ready);
        state.group_seq[call.group] = call.seq;
        let iteration = state.iteration;
        let rendezvous =
            self.rendezvous_slot(call.group, call.seq, kind, op, iteration, call.jitter);
        let state = &mut self.ranks[rank as usize];
        let host_ns = state.host_ns;
        let kernel = state.timeline.kernels.len() as u32;
        state.timeline.kernels.push(KernelRecord {
            iteration,
            op: op as OpRef,
            stream: call.stream,
            class: KernelClass::Communication,
            enqueue_ns: host_ns,
            start_ns: NEVER,
            end_ns: NEVER,
        });
        debug_assert_eq!(call.collective as usize, state.timeline.collectives.len());
        state.timeline.collectives.push(CollectiveRecord {
            iteration,
            op: op as OpRef,
            group: call.group as u16,
            seq: call.seq,
            work_seq_num: CollectiveRecord::work_seq_num_field(call.seq, call.seq_num),
            bytes,
            async_op: call.async_op,
            call_stream: call.call_stream,
            run_stream: call.stream,
            host_start_ns: state.cursor.call_start_ns,
            host_end_ns: host_ns,
            input_ready_ns: NEVER,
            kernel_start_ns: NEVER,
            work_start_ns: None,
            data_start_ns: NEVER,
            end_ns: NEVER,
            last_rank: None,
            wait: None,
        });
        state.scratch.collective_input_ready.push(input_ready);
        state.scratch.collective_work_start.push(work_start);
        state.scratch.collective_end.push(NOT_ENQUEUED);
        state.scratch.collective_kernel.push(kernel);
        state.scratch.collective_wait_stream_wait.push(u32::MAX);
        state.cursor.call_collective = Some(call.collective);
        state.cursor.issued = Some(Issued {
            group: call.group,
            stream: call.stream,
            kind,
        });
        // The fault armed for the collective acts on its kernel before the kernel joins the
        // rendezvous (R16): a poisoned one never completes.
        if self.failure.acts_on_issue(rank) {
            self.notify(Notice::CollectiveIssued {
                rank,
                collective: call.collective,
                rendezvous,
                enqueue_ns: host_ns,
                issued: (kind, bytes),
            });
        }
        let latency_ns = self.ranks[rank as usize]
            .cursor
            .nccl_launch_latency_ns
            .unwrap_or(self.scenario.host.nccl_launch_latency_ns);
        let ready_ns = host_ns + latency_ns;
        let sms = self.scenario.cluster.gpu.sms;
        let plan = self.plan(op, bytes);
        // No SMs for a collective NCCL launches no kernel for (R24): 0 channels.
        let channels = if plan.without_kernel {
            0
        } else {
            plan.channels.clamp(1, sms)
        };
        let point = self.push(
            rank,
            call.stream,
            GpuItem::Collective {
                kernel,
                rendezvous,
                collective: call.collective,
                channels: u16::try_from(channels).expect("at most 1,024 SMs"),
            },
            ready_ns,
        );
        self.ranks[rank as usize].cursor.access_point = Some(point);
    }

    /// R10e: the Work goes to the watchdog (R26); its tensor is stashed (R18) or recorded on
    /// the NCCL stream (R19).
    fn watch(
        &mut self,
        rank: u32,
        collective: u32,
        end: Slot,
        stash: Option<TensorId>,
        holder: WorkHolder,
    ) {
        let end = self.instance(rank, end);
        let state = &mut self.ranks[rank as usize];
        state.scratch.collective_end[collective as usize] = end;
        let group = (state.cursor.issued.as_ref())
            .expect("a Work follows its NCCL call")
            .group;
        if self.failure.holds_work_list(rank, group) {
            // The kernel is out; the Work waits for the watchdog, busy with an error, to let go
            // of its list (R27), then this step runs again.
            state.cursor.next -= 1;
            state.blocked = Blocked::Watchdog {
                group: self.failure.watchdog_group(group) as u16,
            };
            return;
        }
        let issued = state
            .cursor
            .issued
            .take()
            .expect("a Work follows its NCCL call");
        state.timeline.collectives[collective as usize].host_end_ns = state.host_ns;
        match holder {
            WorkHolder::Named(work) => {
                if let Some((previous_end, _)) = state.work_end[work].replace((end, collective)) {
                    state.race.forget(previous_end);
                }
            }
            // A Work nobody can name is never waited on.
            WorkHolder::Dropped => state.race.forget(end),
            WorkHolder::Call => {}
        }
        if let Some(tensor) = stash {
            let books = &mut state.memory.books;
            books.keep_alive(
                tensor,
                issued.group,
                issued.stream,
                (collective as usize, end),
                (issued.kind, holder.program_holds()),
            );
        }
        let enqueue_ns = self.enqueue_ns(rank, collective);
        self.notify(Notice::WorkEnqueued {
            rank,
            group: issued.group,
            collective,
            end,
            enqueue_ns,
            listed_ns: self.ranks[rank as usize].host_ns,
        });
    }

    /// An event instance the host waits on fired.
    pub(super) fn host_instance_fired(&mut self, rank: u32) {
        let now_ns = self.now_ns;
        let state = &mut self.ranks[rank as usize];
        match &mut state.blocked {
            Blocked::Instances {
                pending,
                latest_ns,
                from_ns,
                cost_ns,
            } => {
                *pending -= 1;
                *latest_ns = (*latest_ns).max(now_ns);
                if *pending == 0 {
                    let resume_ns = (*from_ns).max(*latest_ns) + *cost_ns;
                    self.schedule(resume_ns, self.host_resume(rank, resume_ns));
                }
            }
            Blocked::Polling {
                first_poll_ns,
                poll_ns,
                deadline_ns,
                ..
            } => {
                // R15: the host sees completion at the first poll at or after the fire time.
                let resume_ns = next_poll_ns(*first_poll_ns, *poll_ns, now_ns);
                // Past the deadline the pending timeout raises first.
                if resume_ns < *deadline_ns {
                    self.schedule(resume_ns, self.host_resume(rank, resume_ns));
                }
            }
            // The host raised in a timed-out wait() and the Work finished afterwards.
            Blocked::Done => {}
            _ => unreachable!("a host waiter is blocked"),
        }
    }

    /// `stream.synchronize()`: the host waits for everything enqueued on the stream so far,
    /// then `cost_ns` more (R14).
    fn stream_sync(&mut self, rank: u32, stream: u16, cost_ns: u64) {
        let instance = self.record(rank, stream);
        self.block_on(rank, &[instance], cost_ns, HostBlock::Stream { stream });
    }

    /// Blocks the host until every instance fired, then resumes `cost_ns` later (R14); the
    /// instances are what `on` says. Returns true when the host can go on at once.
    pub(super) fn block_on(
        &mut self,
        rank: u32,
        instances: &[Instance],
        cost_ns: u64,
        on: HostBlock,
    ) -> bool {
        let state = &mut self.ranks[rank as usize];
        for &instance in instances {
            state.race.host_waits(instance);
            state.race.forget(instance);
        }
        let mut pending = 0;
        let mut latest_ns = 0;
        for &instance in instances {
            let fired = state.fired_ns[instance as usize];
            if fired == NEVER {
                pending += 1;
                state.waiters.add(instance, Waiter::Host);
            } else {
                latest_ns = latest_ns.max(fired);
            }
        }
        if pending == 0 {
            state.host_ns = state.host_ns.max(latest_ns) + cost_ns;
            return true;
        }
        state.cursor.blocked_on = Some(on);
        state.blocked = Blocked::Instances {
            pending,
            latest_ns,
            from_ns: state.host_ns,
            cost_ns,
        };
        false
    }

    pub(super) fn launch_kernel(
        &mut self,
        rank: u32,
        stream: u16,
        op: usize,
        class: KernelClass,
        duration_ns: u64,
        host_ns: u64,
    ) -> Point {
        let state = &mut self.ranks[rank as usize];
        let kernel = state.timeline.kernels.len() as u32;
        state.timeline.kernels.push(KernelRecord {
            iteration: state.iteration,
            op: op as OpRef,
            stream,
            class,
            enqueue_ns: host_ns,
            start_ns: NEVER,
            end_ns: NEVER,
        });
        let ready_ns = host_ns + self.scenario.host.launch_latency_ns;
        self.push(
            rank,
            stream,
            GpuItem::Kernel {
                duration_ns,
                kernel,
                compute_op: super::streams::compute_op(class, op),
            },
            ready_ns,
        )
    }

    /// Adds a `cudaStreamWaitEvent` of `waiting` on `instance`.
    fn push_stream_wait(&mut self, rank: u32, op: usize, waiting: u16, instance: Instance) {
        let state = &mut self.ranks[rank as usize];
        let stream_wait = state.timeline.stream_waits.len() as u32;
        state.timeline.stream_waits.push(StreamWaitRecord {
            iteration: state.iteration,
            op: op as OpRef,
            source_stream: state.instance_stream[instance as usize],
            source_ns: NEVER,
            waiting_stream: waiting,
            released_ns: NEVER,
        });
        state.scratch.stream_wait_instance.push(instance);
        let host_ns = state.host_ns;
        self.push(
            rank,
            waiting,
            GpuItem::WaitFor {
                instance,
                stream_wait,
            },
            host_ns,
        );
    }

    pub(super) fn record(&mut self, rank: u32, stream: u16) -> Instance {
        self.record_at(rank, stream).0
    }

    fn record_at(&mut self, rank: u32, stream: u16) -> (Instance, Point) {
        let instance = self.new_instance(rank, stream);
        let host_ns = self.ranks[rank as usize].host_ns;
        let point = self.push(rank, stream, GpuItem::Record { instance }, host_ns);
        (instance, point)
    }
}

impl super::rank::RankState {
    /// The call the host is inside, as a call that never returned (the process or the run
    /// ends now), with what it is blocked on.
    pub(super) fn open_call(&self) -> Option<UnfinishedHostCall> {
        if !self.cursor.in_call {
            return None;
        }
        let work = |collective: u32, aborting: bool| {
            let record = &self.timeline.collectives[collective as usize];
            HostBlock::Work {
                group: record.group,
                seq: record.seq,
                aborting,
            }
        };
        let blocked_on = match self.blocked {
            Blocked::Instances { .. } | Blocked::CommInit => self.cursor.blocked_on,
            Blocked::Polling { collective, .. } => Some(work(collective, false)),
            Blocked::Aborting { collective, .. } => Some(work(collective, true)),
            Blocked::Watchdog { group } => Some(HostBlock::Communicator { group }),
            Blocked::LaunchQueue { stream } => Some(HostBlock::LaunchQueue { stream }),
            // Its own host time, or waiting for the simulation to reach it (its process's end
            // among what it waits for).
            Blocked::Running | Blocked::Timer | Blocked::Exiting { .. } => None,
            Blocked::Done | Blocked::Dead | Blocked::Hung => return None,
        };
        Some(UnfinishedHostCall {
            iteration: self.iteration,
            op: self.blocked_op as OpRef,
            start_ns: self.cursor.call_start_ns,
            blocked_on,
        })
    }

    /// The process ends at `at_ns` inside the call it is in, if any: a call that raised ends
    /// there (the exception unwound it); any other is left open, never returned.
    pub(super) fn end_call(&mut self, status: ExitStatus, at_ns: u64) {
        let Some(call) = self.open_call() else {
            return;
        };
        self.cursor.in_call = false;
        if status == ExitStatus::Raised {
            self.timeline.host.push(HostCall {
                iteration: call.iteration,
                op: call.op,
                start_ns: call.start_ns,
                end_ns: at_ns.max(call.start_ns),
            });
        } else if call.start_ns <= at_ns {
            self.unfinished_host = Some(call);
        }
    }
}

/// The stream a step enqueues a command onto (a kernel, an event record, a stream wait), if
/// it does: the enqueue blocks while that stream's queue is full (R1).
fn enqueue_stream(step: Step) -> Option<u16> {
    match step {
        Step::Launch { stream, .. }
        | Step::Record { stream, .. }
        | Step::StreamWait { stream, .. }
        | Step::Wait { stream, .. }
        | Step::Mark { stream, .. }
        | Step::Item { stream, .. }
        | Step::StreamSync { stream, .. }
        | Step::StreamSyncUnlessCompleted { stream, .. } => Some(stream),
        Step::Nccl(call) => Some(call.stream),
        _ => None,
    }
}

/// The first poll at or after `at_ns` of a loop polling at `first_poll_ns + k·poll_ns`.
pub(super) fn next_poll_ns(first_poll_ns: u64, poll_ns: u64, at_ns: u64) -> u64 {
    if at_ns <= first_poll_ns {
        first_poll_ns
    } else {
        first_poll_ns + (at_ns - first_poll_ns).div_ceil(poll_ns) * poll_ns
    }
}

/// When a communicator's init that every member reached ends: once the member that arrived
/// and did its part latest is done (`Engine::init_comm`).
pub(super) fn init_end_ns(arrived: &[InitArrival]) -> u64 {
    (arrived.iter())
        .filter(|arrival| !arrival.left)
        .map(|arrival| arrival.host_ns + arrival.cost_ns)
        .max()
        .unwrap_or(0)
}
