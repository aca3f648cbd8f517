//! ProcessGroupNCCL, written once. Each op of a rank's program becomes, when the rank's host
//! reaches it, the sequence of primitive [`Step`]s that PyTorch's ProcessGroupNCCL, CUDA and
//! the caching allocator carry out for it. Both engines execute these steps and nothing else:
//! the simulator (`crate::engine`) maps each to simulated time, `hw` to CUDA and NCCL calls.
//!
//! The rules implemented here: lazy communicator init (R8), one internal stream per group
//! (R9), `async_op=True` (R10: input-ready event on the current stream, the internal stream
//! waits on it, the kernel, the end event, the Work to the watchdog), `async_op=False` by
//! PyTorch version (R11), `wait()` as a stream wait (R12), `is_completed()` (R13), the blocking
//! points (R14), blocking wait's polls (R15), a straggler's delays before an op (R16), the
//! stash and its release (R18), recordStream (R19, through the allocator steps), barrier
//! (R14: a one-element all_reduce, `wait()`, then the current stream synchronised),
//! coalescing (R25) and functional collectives (R30: their `wait_tensor` is an ordinary
//! `wait` op the parser placed). The random draws (straggler delays, kernel jitter) are made
//! here, in program order, so that both engines apply the same ones.
//!
//! Over 1,000 lines (about 1,330): the lowering of every op kind is one `match` (the setup ops and
//! communicator creation included), so that each ProcessGroupNCCL rule is written in one place;
//! its unit tests are `pg/tests.rs`.

pub mod faults;
mod step;
pub mod streams;
pub mod work;

pub use step::{CallWarmth, Kernel, NcclCall, Slot, Step, WorkHolder};

use crate::collective::NumelShare;
use crate::random::{collective_rng, jitter_factor, rank_rng};
use crate::scenario::{
    Batch, CollectiveKind, DType, FaultKind, GroupId, Op, OpKind, Scenario, TensorId, WorkId,
};
use crate::timeline::{KernelClass, StreamRef};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

/// A program that uses a Work or an event this rank never created (possible only when a fault
/// skipped the op that creates it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LowerError(pub String);

/// The ProcessGroupNCCL state of one rank: sequence numbers, communicators, Works, events and
/// the rank's random stream.
#[derive(Clone)]
pub struct ProcessGroupNccl {
    rank: u32,
    rng: ChaCha8Rng,
    /// The internal NCCL stream of each group this rank belongs to (R9): after the scenario's
    /// streams, one per member group in group order.
    group_stream: Vec<Option<StreamRef>>,
    /// Per group: collectives issued so far (the last SeqNum).
    group_seq: Vec<u64>,
    /// Per group: whether the communicator exists (the prologue's eager init, or an earlier
    /// collective).
    initialised: Vec<bool>,
    /// Whether PyTorch warned of an unbatched send, and of an unbatched receive, on an eager
    /// world (R11): `TORCH_WARN_ONCE` in the function template `pointToPoint`, whose send and
    /// receive are two instantiations, each with its own once.
    warned_eager_p2p: [bool; 2],
    /// Whether this process created a communicator yet: its first waits for the device to
    /// drain and costs `comm_init_ns`, later ones `comm_init_next_ns` (R8).
    any_communicator: bool,
    /// Whether the world's communicator, the process's first, began in a non-blocking eager
    /// `init_process_group` and its device drain is still to come: at its first use (R8).
    world_drain_at_first_use: bool,
    /// The dtypes of the GEMMs this process launched: the first of each dtype costs
    /// `host.first_gemm_us` more.
    gemm_dtypes: Vec<DType>,
    /// Whether this process has loaded PyTorch's fill kernels (R14: under CUDA's lazy loading
    /// the first launch of a kernel from a module not loaded yet waits for the device to
    /// drain; the fill kernels of every dtype share one): true where tensors were made before
    /// the program, made filled as `c10dsim torch` makes them (`torch.ones`), and once a
    /// barrier filled its one-element tensor.
    fill_kernels_loaded: bool,
    /// Per group: an eager init that `TORCH_NCCL_USE_COMM_NONBLOCKING` left to the first use.
    deferred: Vec<bool>,
    /// Per op: a setup op (`init_process_group`, `new_group`) that already ran.
    ran_once: Vec<bool>,
    next_slot: Slot,
    /// Per collective record: its group (a wait's timeout defaults to the group's).
    collective_groups: Vec<GroupId>,
    /// Per collective record: whether it is a barrier's all_reduce, whose Work's wait()
    /// synchronises the current stream (R14).
    barrier_collectives: Vec<bool>,
    /// The copy back into the gradients that follows the wait() of a bucketed collective's
    /// last bucket (R25), by that bucket's collective record, in the order made (kept for those
    /// records alone: a per-record entry would grow every run's memory with its collectives).
    copy_outs: Vec<(u32, CopyOut)>,
    /// Per process group: point-to-point calls issued so far. PyTorch numbers them apart from
    /// the collectives, whatever the peer, and a p2p Work's `SeqNum` is this count.
    p2p_seq: Vec<u64>,
    /// Per group: the `batch_isend_irecv` calls on its own communicator, which `group_seq`
    /// counts and PyTorch's collective count does not.
    group_batches: Vec<u64>,
    /// Latest slot of each named event.
    event_slot: Vec<Option<Slot>>,
    /// Latest (collective record, end event) of each named Work or future.
    works: Vec<Option<(u32, Slot)>>,
    /// Per name: whether it holds its collective's Work itself (`work = "w"` on the call), not
    /// a future `then` returned (`get_future`'s `work`), which holds no Work.
    holds_work: Vec<bool>,
    /// Per name of a functional collective's Work (R30): whether the `wait_tensor` of the
    /// result it names ran (`AsyncCollectiveTensor.completed`), after which a use of that
    /// result waits for nothing; the name keeps the result when a later call raised before
    /// binding it (`catch`, a skipped op). True too before a call bound one: the name holds
    /// the plain tensor it was, whose use waits for nothing. `None` for the other names.
    result_waited: Vec<Option<bool>>,
    /// Per op: the perturbations (straggler delays) that apply to this rank.
    perturbations_by_op: Vec<Vec<usize>>,
    /// While an op that catches is lowered ([`ProcessGroupNccl::keep_call_checkpoints`]): the
    /// state before each of its collective calls checks its communicator, where the call
    /// raises if it was aborted meanwhile (R27; [`ProcessGroupNccl::left_before_call`]).
    call_checkpoints: Option<Vec<ProcessGroupNccl>>,
}

/// Whether `rank` makes tensors before the program, each made filled (`torch.ones`, as
/// `c10dsim torch` makes them), which loads the fill kernels (R14): the scenario's tensors that
/// live for the whole run, the bucket buffers of a bucketed op this rank runs (DDP's Reducer
/// makes them whether or not the program makes the gradients) or the scratch tensors of a
/// `mismatch` fault on this rank.
fn fills_before_program(scenario: &Scenario, rank: u32) -> bool {
    scenario.tensors.iter().any(|tensor| !tensor.dynamic)
        || (scenario.ops.iter()).any(|op| {
            op.runs_on(rank)
                && matches!(
                    op.kind,
                    OpKind::Collective {
                        batch: Batch::Bucketed { .. },
                        ..
                    }
                )
        })
        || (scenario.faults.iter()).any(|fault| {
            matches!(fault.kind, FaultKind::Mismatch { .. }) && fault.ranks.contains(&rank)
        })
}

impl ProcessGroupNccl {
    pub fn new(scenario: &Scenario, rank: u32) -> ProcessGroupNccl {
        let mut perturbations_by_op = vec![Vec::new(); scenario.ops.len()];
        for (index, perturbation) in scenario.perturbations.iter().enumerate() {
            if perturbation.ranks.contains(&rank) {
                perturbations_by_op[perturbation.before_op].push(index);
            }
        }
        let result_waited = (functional_works(scenario).into_iter())
            .map(|functional| functional.then_some(true))
            .collect();
        ProcessGroupNccl {
            rank,
            rng: rank_rng(scenario.seed, rank),
            group_stream: streams::group_streams(scenario, rank),
            group_seq: vec![0; scenario.groups.len()],
            initialised: vec![false; scenario.groups.len()],
            warned_eager_p2p: [false; 2],
            any_communicator: false,
            world_drain_at_first_use: false,
            gemm_dtypes: Vec::new(),
            fill_kernels_loaded: fills_before_program(scenario, rank),
            deferred: vec![false; scenario.groups.len()],
            ran_once: vec![false; scenario.ops.len()],
            next_slot: 0,
            collective_groups: Vec::new(),
            barrier_collectives: Vec::new(),
            copy_outs: Vec::new(),
            p2p_seq: vec![0; scenario.groups.len()],
            group_batches: vec![0; scenario.groups.len()],
            event_slot: vec![None; scenario.events.len()],
            works: vec![None; scenario.works.len()],
            holds_work: vec![false; scenario.works.len()],
            result_waited,
            perturbations_by_op,
            call_checkpoints: None,
        }
    }

    /// Whether the op lowered next keeps the state before each of its collective calls' checks
    /// of their communicators: one that catches does, as a call that raises there goes on
    /// from it.
    #[inline]
    pub fn keep_call_checkpoints(&mut self, keep: bool) {
        if keep {
            self.call_checkpoints = Some(Vec::new());
        } else if self.call_checkpoints.is_some() {
            self.call_checkpoints = None;
        }
    }

    /// The op, which catches, left before its collective call `call` (counted from 0 in the
    /// op) went through its check of its communicator: that call raised at the check, the
    /// communicator aborted after the op was lowered (R27: it issued nothing and bound no
    /// Work), or the wait of the call before it raised (a synchronous list's under the 2.5
    /// profile, R11, R15). The op's later calls never ran, so the state is the one before that
    /// check; where no call follows (`call` past the op's calls), the one the op lowered to. A
    /// call lowered as raising (`ProcessGroupNccl::aborted_call`) keeps no checkpoint and
    /// changed nothing to undo.
    pub fn left_before_call(&mut self, call: usize) {
        let checkpoint = (self.call_checkpoints.take())
            .and_then(|mut kept| (call < kept.len()).then(|| kept.swap_remove(call)));
        if let Some(checkpoint) = checkpoint {
            *self = checkpoint;
        }
    }

    /// `init_process_group(device_id=…)`, before the program's first op: the communicator of
    /// every group of this rank declared with `eager_init` is created now (R8, eager), so that
    /// its first collective bootstraps nothing. Both engines run these steps first.
    pub fn prologue(&mut self, scenario: &Scenario, out: &mut Vec<Step>) {
        for (group, declared) in scenario.groups.iter().enumerate() {
            let before_program = declared.created_by.is_none();
            if declared.eager_init && before_program && self.group_stream[group].is_some() {
                self.initialised[group] = true;
                self.any_communicator = true;
                out.push(Step::EagerInit { group });
            }
        }
    }

    /// A communicator created now (R8). The process's first also waits for the device to
    /// drain, at its end: its bootstrap runs beside the GPU backlog and returns at the later of
    /// the two (on the H200 a lazy world init behind a 300 ms GPU sleep returned after 386-507
    /// ms with the sleep drained, an eager one with no backlog took 391-417 ms; later groups'
    /// never waited, docs/torch.md#process-group-setup).
    fn create_communicator(&mut self, scenario: &Scenario, group: GroupId, out: &mut Vec<Step>) {
        let first = !self.any_communicator;
        self.any_communicator = true;
        let drains = first || (group == 0 && std::mem::take(&mut self.world_drain_at_first_use));
        self.initialised[group] = true;
        let nonblocking = self.deferred[group];
        out.push(Step::InitComm {
            group,
            cost_ns: if first {
                scenario.host.comm_init_ns
            } else {
                scenario.host.comm_init_next_ns
            },
            nonblocking_timeout_ns: scenario.env.nonblocking_timeout_ns.filter(|_| nonblocking),
            nonblocking,
        });
        if drains {
            out.push(Step::DeviceSync { cost_ns: 0 });
        }
    }

    /// A fill kernel launched: under lazy module loading the first in the process loads the
    /// fill kernels' module, which waits for the device to drain (R14; PyTorch 2.11 on an H100
    /// and an H200: the process's first barrier behind a 5 s GPU sleep returned after it, its
    /// Work made only then, while a `torch.zeros(1)`, a bf16 one or a `torch.ones(4)` before
    /// the sleep, or `CUDA_MODULE_LOADING=EAGER`, let the watchdog time the barrier out;
    /// tests/data/torch/probes/sync_watchdog).
    fn launch_fill_kernel(&mut self, scenario: &Scenario, out: &mut Vec<Step>) {
        if std::mem::replace(&mut self.fill_kernels_loaded, true) {
            return;
        }
        if scenario.env.lazy_module_loading {
            out.push(Step::DeviceSync { cost_ns: 0 });
        }
    }

    /// A communication op on a communicator the watchdog aborted (R27, mode 2), as the host
    /// reaches it: the call checks the communicator and raises `DistBackendError` before it
    /// issues anything (no SeqNum, no Work, no NCCL kernel); a `catch` goes on at the next op.
    /// A barrier fills its tensor before it reaches the communicator, so its fill kernel's
    /// first launch still waits for the device (R14).
    fn aborted_call(&mut self, scenario: &Scenario, op: &Op, group: GroupId, out: &mut Vec<Step>) {
        out.push(Step::CallStart);
        if matches!(op.kind, OpKind::Barrier { .. }) {
            self.launch_fill_kernel(scenario, out);
        }
        out.extend([Step::CheckComm { group }, Step::CallEnd]);
    }

    /// `init_process_group` and `new_group` (R8), in the first iteration only.
    fn setup_op(&mut self, scenario: &Scenario, op: &Op, out: &mut Vec<Step>) {
        if std::mem::replace(&mut self.ran_once[op.index], true) {
            return;
        }
        out.push(Step::CallStart);
        match op.kind {
            OpKind::InitProcessGroup { .. } => {
                out.push(Step::HostCost {
                    cost_ns: scenario.host.init_process_group_ns,
                });
                // With a `device_id` (the world's `eager_init`), the world's communicator.
                let eager = scenario.creates_communicator_in_setup(0, self.rank);
                if eager && scenario.env.use_comm_nonblocking {
                    // `initNCCLComm` gets the unique id through the store before it starts the
                    // non-blocking creation (R29), which runs on from there; the call returns,
                    // and the communicator's first use waits until it is finished.
                    // It is the process's first communicator: its cost is the first's, and the
                    // device drain that comes with that cost waits for its first use.
                    self.deferred[0] = true;
                    let first = !std::mem::replace(&mut self.any_communicator, true);
                    self.world_drain_at_first_use = first;
                    let cost_ns = if first {
                        scenario.host.comm_init_ns
                    } else {
                        scenario.host.comm_init_next_ns
                    };
                    out.push(Step::FetchUniqueId { group: 0, cost_ns });
                } else if eager {
                    self.create_communicator(scenario, 0, out);
                }
            }
            OpKind::NewGroup { group } => {
                out.push(Step::HostCost {
                    cost_ns: scenario.host.new_group_ns,
                });
                // PyTorch splits the world's communicator for the new group on its members
                // when the world has a device (`eager_init` of a group `new_group` makes says
                // so, from the parse).
                if scenario.creates_communicator_in_setup(group, self.rank) {
                    self.create_communicator(scenario, group, out);
                }
            }
            _ => unreachable!("only setup ops"),
        }
        out.push(Step::CallEnd);
    }

    /// The groups whose communicator this process created so far (R8).
    pub fn communicator_groups(&self) -> impl Iterator<Item = GroupId> + '_ {
        (self.initialised.iter().enumerate())
            .filter(|(_, created)| **created)
            .map(|(group, _)| group)
    }

    /// Whether a group this rank belongs to has no communicator yet, so that an op could still
    /// create one (R8) and raise in its creation (R29).
    pub fn communicators_pending(&self, scenario: &Scenario) -> bool {
        (self.initialised.iter().zip(&self.group_stream))
            .enumerate()
            .any(|(group, (created, stream))| {
                !created && stream.is_some() && scenario.communicator(group) == group
            })
    }

    /// The group's internal NCCL stream on this rank (R9).
    pub fn group_stream(&self, group: GroupId) -> Option<StreamRef> {
        self.group_stream[group]
    }

    /// A straggler's delays before `op` in `iteration` (R16): a host sleep, then a one-block
    /// delay kernel on the op's stream, both drawn from the rank's stream.
    pub fn before_op(&mut self, scenario: &Scenario, iteration: u32, op: &Op, out: &mut Vec<Step>) {
        if scenario.host.op_gap_ns > 0 {
            out.push(Step::HostCost {
                cost_ns: scenario.host.op_gap_ns,
            });
        }
        for &index in &self.perturbations_by_op[op.index] {
            let perturbation = &scenario.perturbations[index];
            let applies = perturbation
                .iterations
                .as_ref()
                .is_none_or(|list| list.contains(&iteration));
            if !applies {
                continue;
            }
            let host_delay_ns = perturbation.host_delay.sample_ns(&mut self.rng);
            let gpu_delay_ns = perturbation.gpu_delay.sample_ns(&mut self.rng);
            if host_delay_ns > 0 {
                out.push(Step::HostSleep {
                    duration_ns: host_delay_ns,
                });
            }
            if gpu_delay_ns > 0 {
                out.push(Step::Launch {
                    stream: op.stream as StreamRef,
                    class: KernelClass::Sleep,
                    kernel: Kernel::Spin {
                        duration_ns: gpu_delay_ns,
                        blocks: 1,
                        own_sm: false,
                    },
                    jitter: 1.0,
                });
            }
        }
    }

    /// The steps of `op` as the host reaches it (after [`ProcessGroupNccl::before_op`]): a
    /// collective on a communicator the rank aborted (`aborted(group)`: the main thread after
    /// a wait's timeout, R15, or the watchdog, R27) raises before it issues anything
    /// (`ProcessGroupNccl::aborted_call`); any other op is [`ProcessGroupNccl::op`]'s.
    pub fn reached_op(
        &mut self,
        scenario: &Scenario,
        op: &Op,
        aborted: impl Fn(GroupId) -> bool,
        out: &mut Vec<Step>,
    ) -> Result<(), LowerError> {
        match op
            .kind
            .collective()
            .map(|(_, group)| scenario.communicator(group))
        {
            Some(group) if aborted(group) => {
                self.aborted_call(scenario, op, group, out);
                Ok(())
            }
            _ => self.op(scenario, op, out),
        }
    }

    /// The steps of `op` (after [`ProcessGroupNccl::before_op`]).
    pub fn op(
        &mut self,
        scenario: &Scenario,
        op: &Op,
        out: &mut Vec<Step>,
    ) -> Result<(), LowerError> {
        let costs = &scenario.host;
        let stream = op.stream as StreamRef;
        match op.kind {
            OpKind::Collective {
                collective,
                tensor,
                group,
                async_op,
                work,
                batch,
                result,
            } => {
                // R25: inside a `_coalescing_manager` block every call but the last is only
                // recorded; one launch follows. The block is one host record.
                let recorded_calls_ns = (batch == Batch::Coalesced).then(|| {
                    let count = u64::from(scenario.tensors[tensor].count);
                    (count - 1) * costs.coalesced_call_ns
                });
                // A functional collective reduces the clone of its input (R30).
                let call = |bytes, bucket| CollectiveCall {
                    kind: collective,
                    tensor: Some(result.unwrap_or(tensor)),
                    group,
                    bytes,
                    async_op,
                    work,
                    clone_of: result.map(|_| tensor),
                    recorded_calls_ns,
                    bucket,
                };
                if scenario.tensors[tensor].count == 1 {
                    // One tensor: one call of its size, however it is batched.
                    let bytes = scenario.tensors[tensor].size_bytes;
                    self.collective(scenario, op, call(bytes, None), out);
                    return Ok(());
                }
                // A list of tensors is one NCCL call per tensor, one for a coalesced group, or
                // one per bucket, on the bucket's flat buffer (R25).
                let bucketed = matches!(batch, Batch::Bucketed { .. });
                let sizes = scenario.call_sizes(&op.kind);
                let buckets = sizes.len() as u32;
                for (bytes, index) in sizes.into_iter().zip(0..) {
                    let call = call(bytes, bucketed.then_some(Bucket { index, buckets }));
                    self.collective(scenario, op, call, out);
                }
                return Ok(());
            }
            OpKind::BatchP2p {
                group,
                ref transfers,
                work,
            } => {
                // R25: the coalescing manager records each isend/irecv; one NCCL group on the
                // group's communicator and stream, one kernel, one Work. Its transfers run
                // together: the kernel moves the larger of what this rank sends and receives.
                let total = |send: bool| -> u64 {
                    transfers
                        .iter()
                        .filter(|t| t.send == send)
                        .map(|t| scenario.tensor_bytes(t.tensor))
                        .sum()
                };
                let call = CollectiveCall {
                    kind: CollectiveKind::BatchP2p,
                    tensor: Some(transfers[0].tensor),
                    group,
                    bytes: total(true).max(total(false)),
                    async_op: true,
                    work,
                    clone_of: None,
                    recorded_calls_ns: Some((transfers.len() as u64 - 1) * costs.coalesced_call_ns),
                    bucket: None,
                };
                self.collective(scenario, op, call, out);
                return Ok(());
            }
            OpKind::InitProcessGroup { .. } | OpKind::NewGroup { .. } => {
                self.setup_op(scenario, op, out);
                return Ok(());
            }
            OpKind::Barrier {
                group,
                async_op,
                work,
            } => {
                // R14: a one-element all_reduce (OpType ALLREDUCE: PyTorch's barrier calls
                // allreduce_impl); a synchronous one then synchronises the current stream, an
                // async one returns its Work, whose wait() may.
                let call = CollectiveCall {
                    kind: CollectiveKind::AllReduce,
                    tensor: None,
                    group,
                    bytes: crate::collective::BARRIER_BYTES,
                    async_op,
                    work,
                    clone_of: None,
                    recorded_calls_ns: None,
                    bucket: None,
                };
                self.collective(scenario, op, call, out);
                return Ok(());
            }
            // R30: no result of a previous iteration to wait for (the first iteration, or a
            // rank the call does not run on): the program calls nothing here.
            OpKind::Wait {
                work,
                previous_iteration: true,
                ..
            } if self.works[work].is_none() => return Ok(()),
            // R30: the result was waited already (`trigger_wait` calls nothing), or no call
            // bound one yet.
            OpKind::Wait { work, .. } if self.result_waited[work] == Some(true) => return Ok(()),
            // A Work name no call bound on this rank: validation saw a call that binds it
            // before, but every such call raised first (`catch = true`, R27), so the name was
            // never assigned. Python raises NameError at the use, before calling anything.
            OpKind::Wait { work, .. }
            | OpKind::GetFuture { work, .. }
            | OpKind::IsCompleted { work }
                if self.works[work].is_none() =>
            {
                out.extend([Step::CallStart, Step::NameError { work }, Step::CallEnd]);
                return Ok(());
            }
            _ => {}
        }
        out.push(Step::CallStart);
        match op.kind {
            OpKind::Collective { .. }
            | OpKind::Barrier { .. }
            | OpKind::BatchP2p { .. }
            | OpKind::InitProcessGroup { .. }
            | OpKind::NewGroup { .. } => {
                unreachable!("lowered above")
            }
            OpKind::Wait {
                work, timeout_ns, ..
            } => {
                let (collective, end) = self.work(scenario, op, work)?;
                // R15: blocking wait polls; so does wait(timeout) where the profile says so.
                let timed = timeout_ns.is_some() && scenario.torch.timed_wait_polls();
                let poll = scenario.env.blocking_wait || timed;
                self.wait(
                    scenario,
                    (collective, end),
                    stream,
                    poll.then_some(timeout_ns),
                    out,
                );
                if let Some(waited) = &mut self.result_waited[work] {
                    *waited = true;
                }
            }
            OpKind::GetFuture {
                work,
                callback,
                child,
            } => {
                // The future was marked complete when the collective was enqueued. wait()
                // makes the current stream wait on the Work's end event; then(callback) runs
                // the callback at once, on a pool stream made to wait on it instead, and the
                // future it returns completes at an event after the callback's kernel.
                let (collective, end) = self.work(scenario, op, work)?;
                out.push(Step::HostCost {
                    cost_ns: costs.wait_ns,
                });
                match callback {
                    None => out.push(Step::StreamWait { stream, slot: end }),
                    Some(callback) => {
                        let pool = callback.stream as StreamRef;
                        out.push(Step::StreamWait {
                            stream: pool,
                            slot: end,
                        });
                        let kernel = Kernel::Spin {
                            duration_ns: callback.duration_ns,
                            blocks: callback.sms,
                            own_sm: true,
                        };
                        self.launch(scenario, pool, kernel, out);
                        if let Some(child) = child {
                            let done = self.record(pool, out);
                            self.bind(child, (collective, done), false, out);
                        }
                    }
                }
            }
            OpKind::IsCompleted { work } => {
                let (_, end) = self.work(scenario, op, work)?;
                out.push(Step::Query {
                    slot: end,
                    cost_ns: costs.query_ns,
                });
            }
            OpKind::SetStream { .. } => out.push(Step::HostCost {
                cost_ns: costs.event_ns,
            }),
            OpKind::RecordEvent { event } => {
                out.push(Step::HostCost {
                    cost_ns: costs.event_ns,
                });
                let slot = self.record(stream, out);
                self.event_slot[event] = Some(slot);
            }
            OpKind::WaitEvent { event } => {
                let slot = self.event(scenario, op, event)?;
                out.push(Step::HostCost {
                    cost_ns: costs.event_ns,
                });
                out.push(Step::StreamWait { stream, slot });
            }
            OpKind::EventSync { event } => {
                let slot = self.event(scenario, op, event)?;
                out.push(Step::EventSync {
                    slot,
                    cost_ns: costs.sync_ns,
                });
            }
            OpKind::StreamSync { stream: target } => out.push(Step::StreamSync {
                stream: target as StreamRef,
                cost_ns: costs.sync_ns,
            }),
            OpKind::DeviceSync => out.push(Step::DeviceSync {
                cost_ns: costs.sync_ns,
            }),
            OpKind::Item { tensor } => {
                out.push(Step::HostCost {
                    cost_ns: costs.launch_ns,
                });
                out.push(Step::Item {
                    stream,
                    tensor,
                    cost_ns: costs.item_ns,
                });
                out.push(Step::Access {
                    tensor,
                    write: false,
                });
            }
            OpKind::Gemm { m, n, k, dtype } => {
                self.launch(scenario, stream, Kernel::Gemm { m, n, k, dtype }, out)
            }
            OpKind::Kernel { duration_ns, sms } => self.launch(
                scenario,
                stream,
                Kernel::Spin {
                    duration_ns,
                    blocks: sms,
                    own_sm: true,
                },
                out,
            ),
            OpKind::GpuSleep { duration_ns } => {
                out.push(Step::HostCost {
                    cost_ns: costs.launch_ns,
                });
                out.push(Step::Launch {
                    stream,
                    class: KernelClass::Sleep,
                    kernel: Kernel::Spin {
                        duration_ns,
                        blocks: 1,
                        own_sm: false,
                    },
                    jitter: 1.0,
                });
            }
            OpKind::HostSleep { duration_ns } => out.push(Step::HostSleep { duration_ns }),
            OpKind::Alloc { tensor } => out.push(Step::Alloc { tensor, stream }),
            OpKind::Free { tensor } => out.push(Step::Free { tensor }),
            OpKind::Mark { mark } => out.push(Step::Mark {
                mark,
                stream,
                cost_ns: costs.mark_ns,
            }),
        }
        declared_accesses(op, out);
        out.push(Step::CallEnd);
        Ok(())
    }

    /// One collective call (R10, R11), or a barrier's all_reduce (R14).
    fn collective(
        &mut self,
        scenario: &Scenario,
        op: &Op,
        call: CollectiveCall,
        out: &mut Vec<Step>,
    ) {
        let costs = &scenario.host;
        let group = call.group;
        let call_stream = op.stream as StreamRef;
        let barrier = call.tensor.is_none();
        out.push(Step::CallStart);
        if barrier {
            // R14: `ProcessGroupNCCL::barrier` fills its tensor (`at::zeros`) first; the first
            // launch of a fill kernel in the process waits for the device to drain.
            self.launch_fill_kernel(scenario, out);
        }
        if let Some(cost_ns) = call.recorded_calls_ns {
            out.push(Step::HostCost { cost_ns });
        }
        // R8, R11: an eager world's unbatched send or receive uses the world's communicator,
        // which exists (PyTorch asserts it), and no pair communicator.
        let communicator = scenario.communicator(group);
        if let Some(mut kept) = self.call_checkpoints.take() {
            kept.push(self.clone());
            self.call_checkpoints = Some(kept);
        }
        out.push(Step::CheckComm {
            group: communicator,
        });
        if !self.initialised[communicator] {
            // R8: the first collective of a group bootstraps the communicator inside the call.
            self.create_communicator(scenario, communicator, out);
        }
        if communicator != group && scenario.env.show_eager_init_p2p_serialization_warning {
            let direction = usize::from(call.kind == CollectiveKind::Recv);
            if !std::mem::replace(&mut self.warned_eager_p2p[direction], true) {
                out.push(Step::EagerP2pWarning {
                    group: communicator,
                });
            }
        }
        // R11: a synchronous collective runs on the current stream where the profile says so.
        // `dist.send` and `dist.recv` never do: ProcessGroupNCCL's point-to-point path takes no
        // `asyncOp` and always runs on the internal stream, and the Python wrapper is `isend`
        // (or `irecv`) followed by `wait()`.
        let on_internal_stream = call.async_op
            || call.kind.is_point_to_point()
            || !scenario.torch.sync_collective_on_current_stream();
        // R11: a call on the current stream skips the internal stream's part of the path.
        let (warm_ns, cold_ns) = if on_internal_stream {
            (costs.collective_ns, costs.collective_cold_ns)
        } else {
            let cold_ns = (costs.collective_cold_ns + costs.sync_collective_ns)
                .saturating_sub(costs.collective_ns)
                .max(costs.collective_enqueue_ns + costs.collective_tail_ns);
            (costs.sync_collective_ns, cold_ns)
        };
        // The Work is created (and the input-ready event recorded) `collective_enqueue_ns`
        // before the kernel launch, which is `collective_tail_ns` before the call returns.
        let after_work_ns = costs.collective_enqueue_ns + costs.collective_tail_ns;
        out.push(Step::CollectiveCost(CallWarmth {
            warm_ns: warm_ns - after_work_ns,
            cold_ns: cold_ns - after_work_ns,
            warm_within_ns: costs.collective_warm_within_ns,
            cold_after_ns: costs.collective_cold_after_ns,
            rest_ns: after_work_ns,
        }));
        self.group_seq[group] += 1;
        let seq = self.group_seq[group];
        let internal_stream = self.group_stream[group].expect("members have the group's stream");
        let stream = if on_internal_stream {
            internal_stream
        } else {
            call_stream
        };
        let functional_result = call.clone_of.and(call.tensor);
        if let (Some(input), Some(result)) = (call.clone_of, call.tensor) {
            // R30: `input.clone()` on the current stream before the call returns: a new
            // tensor, made while the one the result's name held lives on until the call
            // returns; the clone reads the input there, so the input is the program's again
            // once the call returned; the collective then runs on the clone. In `y =
            // fcol.all_reduce(y)` the clone reads the y set aside, not the new one.
            out.push(Step::SetAside { tensor: result });
            out.push(Step::Alloc {
                tensor: result,
                stream: call_stream,
            });
            out.push(if input == result {
                Step::ReadSetAside { tensor: input }
            } else {
                Step::Access {
                    tensor: input,
                    write: false,
                }
            });
            out.push(Step::Access {
                tensor: result,
                write: true,
            });
        }
        if let (Some(Bucket { index: 0, buckets }), Some(gradients)) = (call.bucket, call.tensor) {
            // R25: the Reducer copies each gradient into its bucket's buffer on the current
            // stream (`copy_grad_to_bucket`) before it all_reduces the bucket; here all of
            // them, before the first bucket. The copy is the gradients' last use by the
            // collective: the kernels and the Work hold the bucket buffers, which live for
            // the run, so the gradients may be freed and their blocks reused at once.
            out.push(Step::Copy {
                stream: call_stream,
            });
            out.push(Step::Access {
                tensor: gradients,
                write: false,
            });
            out.extend((0..buckets).map(|bucket| Step::BucketAccess {
                op: op.index as u32,
                bucket,
                write: true,
            }));
        }
        // R10a: input-ready event on the current stream; the internal stream waits on it. A
        // call on the current stream records none (R11): its input-ready point is a probe.
        let input_ready = if on_internal_stream {
            let input_ready = self.record(call_stream, out);
            out.push(Step::StreamWait {
                stream,
                slot: input_ready,
            });
            input_ready
        } else {
            let slot = self.new_slot();
            out.push(Step::Probe {
                stream: call_stream,
                slot,
            });
            slot
        };
        out.push(Step::ReleaseShelf { group });
        if costs.collective_enqueue_ns > 0 {
            out.push(Step::HostCost {
                cost_ns: costs.collective_enqueue_ns,
            });
        }
        // R6: the Work's start event, on the kernel's stream right before the kernel.
        let work_start = scenario.env.times_works().then(|| self.record(stream, out));
        let jitter = if scenario.cluster.kernel_jitter > 0.0 {
            // Drawn per collective, so that every rank of it draws the same.
            let mut rng = collective_rng(scenario.seed, group, seq);
            jitter_factor(scenario.cluster.kernel_jitter, &mut rng)
        } else {
            1.0
        };
        let collective = self.collective_groups.len() as u32;
        self.collective_groups.push(group);
        self.barrier_collectives.push(barrier);
        let copy_out = match (call.bucket, call.tensor) {
            (Some(bucket), Some(gradients)) if bucket.index + 1 == bucket.buckets => {
                let copy_out = CopyOut {
                    op: op.index as u32,
                    gradients,
                    buckets: bucket.buckets,
                };
                self.copy_outs.push((collective, copy_out));
                Some(copy_out)
            }
            _ => None,
        };
        let process_group = scenario.process_group(group);
        let seq_num = if call.kind.is_point_to_point() {
            self.p2p_seq[process_group] += 1;
            if process_group == group {
                self.group_batches[group] += 1;
            }
            self.p2p_seq[process_group]
        } else {
            // The group's batches counted in `seq`; PyTorch's collective count skips them and
            // goes on from the collectives the group ran before the program.
            seq.saturating_sub(self.group_batches[group])
                + scenario.groups[group].collectives_before()
        };
        out.push(Step::Nccl(NcclCall {
            collective,
            group,
            kind: call.kind,
            tensor: call.tensor,
            bytes: call.bytes,
            seq,
            seq_num,
            call_stream,
            stream,
            async_op: call.async_op,
            input_ready,
            work_start,
            jitter,
        }));
        // The collective reads and writes its tensor on the stream it runs on (R21); a batch
        // reads what it sends and writes what it receives.
        match &op.kind {
            OpKind::BatchP2p { transfers, .. } => {
                out.extend(transfers.iter().map(|t| Step::Access {
                    tensor: t.tensor,
                    write: !t.send,
                }))
            }
            _ => match (call.bucket, call.tensor) {
                // A bucket's kernel reduces the bucket's flat buffer, not the gradients (R25).
                (Some(bucket), _) => out.push(Step::BucketAccess {
                    op: op.index as u32,
                    bucket: bucket.index,
                    write: true,
                }),
                (None, Some(tensor)) => out.push(Step::Access {
                    tensor,
                    write: true,
                }),
                (None, None) => {}
            },
        }
        declared_accesses(op, out);
        // R10d: the Work's end event on the stream the kernel ran on.
        let end = self.record(stream, out);
        out.push(Step::HostCost {
            cost_ns: costs.collective_tail_ns,
        });
        let holder = match call.work {
            Some(work) => WorkHolder::Named(work),
            None if call.async_op => WorkHolder::Dropped,
            None => WorkHolder::Call,
        };
        // A bucket's Work holds its flat buffer, which lives for the run: nothing to keep.
        out.push(Step::Watch {
            collective,
            end,
            stash: (call.tensor).filter(|_| on_internal_stream && call.bucket.is_none()),
            holder,
        });
        if let Some(work) = call.work {
            self.bind(work, (collective, end), true, out);
            if functional_result.is_some() {
                self.result_waited[work] = Some(false);
            }
        }
        if !call.async_op && on_internal_stream {
            // R11 (≤ 2.5, and a synchronous send or recv): the wrapper calls wait() itself
            // (polling under blocking wait, R15); a barrier's wait() then synchronises.
            let poll = scenario.env.blocking_wait.then_some(None);
            self.wait(scenario, (collective, end), call_stream, poll, out);
        } else if barrier && !call.async_op {
            // R11, R14 (≥ 2.8): the all_reduce ran on the current stream and returned no Work;
            // ProcessGroupNCCL::barrier synchronises that stream itself, which the host blocks
            // in.
            out.push(Step::StreamSync {
                stream: call_stream,
                cost_ns: costs.sync_ns,
            });
        }
        if let Some(copy_out) = copy_out.filter(|_| !call.async_op && !on_internal_stream) {
            // R11 (≥ 2.8): the buckets ran on the current stream, which copies them back.
            copy_out.lower(call_stream, out);
        }
        if let Some(result) = functional_result {
            // `y = …` binds the name to the new result: the tensor it held goes (R30).
            out.push(Step::FreeSetAside { tensor: result });
        }
        out.push(Step::CallEnd);
    }

    /// `work.wait()` (R12), polling when `poll` is `Some(timeout)` (R15); a barrier's Work
    /// then may synchronise the current stream (R14).
    fn wait(
        &mut self,
        scenario: &Scenario,
        (collective, end): (u32, Slot),
        stream: StreamRef,
        poll: Option<Option<u64>>,
        out: &mut Vec<Step>,
    ) {
        out.push(Step::Wait {
            collective,
            stream,
            end,
            cost_ns: scenario.host.wait_ns,
        });
        out.push(Step::ReleaseOnWait { collective });
        if let Some(own_timeout_ns) = poll {
            // R15: `wait(timeout)`'s own timeout, else the group's (blocking wait).
            let group = self.collective_groups[collective as usize];
            out.push(Step::Poll {
                collective,
                end,
                interval_ns: scenario.host.blocking_wait_poll_ns,
                timeout_ns: own_timeout_ns.unwrap_or(scenario.groups[group].timeout_ns),
            });
        }
        if self.barrier_collectives[collective as usize] {
            self.barrier_wait_sync(scenario, (collective, end), stream, poll, out);
        }
        out.push(Step::WaitReturn { collective });
        if let Ok(index) = (self.copy_outs).binary_search_by_key(&collective, |(made, _)| *made) {
            self.copy_outs[index].1.lower(stream, out);
        }
    }

    /// The end of a barrier Work's `wait()` (R14), after its stream wait and any poll: the
    /// host synchronises the current stream `stream`, under "2.5" always, under "2.12" only
    /// where it did not poll (R15) and the Work is not completed at that point.
    fn barrier_wait_sync(
        &self,
        scenario: &Scenario,
        (collective, end): (u32, Slot),
        stream: StreamRef,
        poll: Option<Option<u64>>,
        out: &mut Vec<Step>,
    ) {
        let costs = &scenario.host;
        if !scenario.torch.barrier_wait_syncs_only_unfinished() {
            out.push(Step::StreamSync {
                stream,
                cost_ns: costs.sync_ns,
            });
        } else if poll.is_none() {
            out.push(Step::StreamSyncUnlessCompleted {
                collective,
                stream,
                end,
                query_cost_ns: costs.query_ns,
                sync_cost_ns: costs.sync_ns,
            });
        }
    }

    /// A compute kernel, its duration jittered by a draw from the rank's stream.
    fn launch(
        &mut self,
        scenario: &Scenario,
        stream: StreamRef,
        kernel: Kernel,
        out: &mut Vec<Step>,
    ) {
        out.push(Step::HostCost {
            cost_ns: scenario.host.launch_ns,
        });
        if let Kernel::Gemm { dtype, .. } = kernel {
            let first_gemm_ns = scenario.host.first_gemm_ns;
            if !self.gemm_dtypes.contains(&dtype) {
                self.gemm_dtypes.push(dtype);
                if first_gemm_ns > 0 {
                    out.push(Step::HostCost {
                        cost_ns: first_gemm_ns,
                    });
                }
            }
        }
        let jitter = jitter_factor(scenario.cluster.kernel_jitter, &mut self.rng);
        out.push(Step::Launch {
            stream,
            class: KernelClass::Compute,
            kernel,
            jitter,
        });
    }

    fn record(&mut self, stream: StreamRef, out: &mut Vec<Step>) -> Slot {
        let slot = self.new_slot();
        out.push(Step::Record { stream, slot });
        slot
    }

    fn new_slot(&mut self) -> Slot {
        let slot = self.next_slot;
        self.next_slot += 1;
        slot
    }

    /// Binds `name` to a collective's Work (`holds_work`) or to a future `then` returned: the
    /// Work the name held before is dropped (`w = dist.all_reduce(..., async_op=True)`, `w =
    /// w.get_future().then(f)`), a future it held drops no Work.
    fn bind(&mut self, name: WorkId, bound: (u32, Slot), holds_work: bool, out: &mut Vec<Step>) {
        let previous = self.works[name].replace(bound);
        if let Some((collective, _)) = previous.filter(|_| self.holds_work[name]) {
            out.push(Step::DropHandle { collective });
        }
        self.holds_work[name] = holds_work;
    }

    fn work(&self, scenario: &Scenario, op: &Op, work: WorkId) -> Result<(u32, Slot), LowerError> {
        self.works[work].ok_or_else(|| {
            LowerError(format!(
                "op {} (line {}) uses Work {:?} before rank {} created it",
                op.display_name(),
                op.line,
                scenario.works[work],
                self.rank
            ))
        })
    }

    fn event(&self, scenario: &Scenario, op: &Op, event: usize) -> Result<Slot, LowerError> {
        self.event_slot[event].ok_or_else(|| {
            LowerError(format!(
                "op {} (line {}) uses event {:?} before rank {} recorded it",
                op.display_name(),
                op.line,
                scenario.events[event],
                self.rank
            ))
        })
    }
}

/// What one NCCL call of an op is.
struct CollectiveCall {
    kind: CollectiveKind,
    tensor: Option<TensorId>,
    group: GroupId,
    bytes: u64,
    async_op: bool,
    work: Option<WorkId>,
    /// A functional collective's input, cloned into `tensor` on the current stream (R30).
    clone_of: Option<TensorId>,
    /// Host time of the calls a coalescing manager block only recorded before this, its one
    /// launch (R25); `None` outside a block.
    recorded_calls_ns: Option<u64>,
    /// The bucket whose flat buffer this call of a bucketed collective reduces (R25): DDP's
    /// Reducer copies the gradients `tensor` into the buckets on the current stream, and the
    /// kernel and the Work touch the buffer, not the gradients.
    bucket: Option<Bucket>,
}

/// R25: DDP's `finalize_backward`, after the wait for the last bucket's Work (the buckets
/// run in order on one stream, so all of them are done): on the stream current at the wait,
/// `copy_bucket_to_grad` copies each bucket's buffer back into its gradients
/// (`grad.copy_(bucket_view)`, with the default gradient_as_bucket_view=False): it reads
/// every buffer and writes the gradients.
#[derive(Clone, Copy)]
struct CopyOut {
    /// The bucketed collective.
    op: u32,
    gradients: TensorId,
    buckets: u32,
}

impl CopyOut {
    fn lower(self, stream: StreamRef, out: &mut Vec<Step>) {
        out.push(Step::Copy { stream });
        out.extend((0..self.buckets).map(|bucket| Step::BucketAccess {
            op: self.op,
            bucket,
            write: false,
        }));
        out.push(Step::Access {
            tensor: self.gradients,
            write: true,
        });
    }
}

/// One bucket of a bucketed collective (R25).
#[derive(Clone, Copy)]
struct Bucket {
    /// Numbered from 0.
    index: u32,
    /// How many the collective has.
    buckets: u32,
}

/// The op's declared `reads` and `writes` (R21).
fn declared_accesses(op: &Op, out: &mut Vec<Step>) {
    for &tensor in &op.reads {
        out.push(Step::Access {
            tensor,
            write: false,
        });
    }
    for &tensor in &op.writes {
        out.push(Step::Access {
            tensor,
            write: true,
        });
    }
}

/// `WorkNCCL(SeqNum=…, OpType=…, NumelIn=…, NumelOut=…, Timeout(ms)=…)` as PyTorch prints a
/// Work, for a call of `kind` over `bytes` of `dtype` issued by `op` (element counts, as
/// PyTorch counts them: a barrier's is its one element). A coalescing block's Work is
/// `COALESCED` (R25), its element counts the whole block's (unverified: PyTorch's were not seen
/// for such a Work), its timeout its process group's ([`Scenario::work_timeout_ns`]), whatever
/// a `wait(timeout)`'s own.
pub fn work_text(
    scenario: &Scenario,
    op: &Op,
    (kind, bytes, dtype): (CollectiveKind, u64, DType),
    (group, seq): (GroupId, u64),
) -> String {
    let (numel_in, numel_out) = work_numels(scenario, op, kind, group);
    let numel = bytes / dtype.size_bytes();
    format!(
        "WorkNCCL(SeqNum={seq}, OpType={}, NumelIn={}, NumelOut={}, Timeout(ms)={})",
        op.kind.work_op_type(kind),
        numel_in.of(numel),
        numel_out.of(numel),
        scenario.work_timeout_ns(group) / 1_000_000
    )
}

/// How `NumelIn` and `NumelOut` of `op`'s Work of a call of `kind` on `group` follow from the
/// call's element count. A `batch_isend_irecv`'s Work is the one `endCoalescing` makes without tensors, whose
/// `numelIn_` and `numelOut_` keep their default, `size_t(-1)`.
fn work_numels(
    scenario: &Scenario,
    op: &Op,
    kind: CollectiveKind,
    group: GroupId,
) -> (NumelShare, NumelShare) {
    match op.kind {
        OpKind::BatchP2p { .. } => (NumelShare::Fixed(u64::MAX), NumelShare::Fixed(u64::MAX)),
        _ => {
            let members = scenario.groups[group].ranks.len() as u64;
            kind.descriptor().work_numel.shares(members)
        }
    }
}

/// What the PyTorch engine needs to print a Work of one op as [`work_text`] does (in a raising
/// `wait()`'s records, `work::wait_error_log`, `work::wait_timeout_log`), each fact decided
/// here: the interpreter only fills in the call's SeqNum and bytes (docs/torch.md,
/// `op_works`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct OpWork {
    /// The Work's `OpType`.
    pub op_type: &'static str,
    /// Bytes of one element of the op's calls.
    pub element_bytes: u64,
    pub numel_in: NumelShare,
    pub numel_out: NumelShare,
    /// The Work's timeout as it prints it ([`Scenario::work_timeout_ns`]).
    pub timeout_ms: u64,
}

/// Each op's [`OpWork`], in op order: None for an op that makes no Work.
pub fn op_works(scenario: &Scenario) -> Vec<Option<OpWork>> {
    scenario
        .ops
        .iter()
        .map(|op| {
            let (kind, group) = op.kind.collective()?;
            let (numel_in, numel_out) = work_numels(scenario, op, kind, group);
            Some(OpWork {
                op_type: op.kind.work_op_type(kind),
                element_bytes: op.kind.call_dtype(&scenario.tensors).size_bytes(),
                numel_in,
                numel_out,
                timeout_ms: scenario.work_timeout_ns(group) / 1_000_000,
            })
        })
        .collect()
}

/// Per Work name: whether it is a functional collective's result's (R30), the Work of an op
/// carrying a `result`, whose wait is that result's `wait_tensor`.
pub fn functional_works(scenario: &Scenario) -> Vec<bool> {
    let mut functional = vec![false; scenario.works.len()];
    for op in &scenario.ops {
        if let OpKind::Collective {
            work: Some(work),
            result: Some(_),
            ..
        } = op.kind
        {
            functional[work] = true;
        }
    }
    functional
}

/// The resolved scenario as the PyTorch engine reads it (`c10dsim resolve --json`,
/// docs/torch.md): the scenario's own keys, then the facts the engine reads and does not
/// decide.
#[derive(Serialize)]
pub struct Resolved<'a> {
    #[serde(flatten)]
    pub scenario: &'a Scenario,
    /// For each group, the group whose communicator and internal stream its calls run on
    /// ([`Scenario::communicator`], R11).
    pub communicators: Vec<GroupId>,
    /// For each group, the process group its calls go through, whose SeqNums and Flight
    /// Recorder entries number them ([`Scenario::process_group`]: the world, for a pair); a
    /// group whose process group is another is no `new_group` of the program's.
    pub process_groups: Vec<GroupId>,
    /// For each group, whether its internal stream is at high priority
    /// ([`Scenario::group_stream_high_priority`], R9), as [`streams::rank_streams`] lays it
    /// out; a pair's is the world's, whose options make its communicator.
    pub stream_high_priority: Vec<bool>,
    /// For each group, the ranks whose call making it (`init_process_group`, `new_group`)
    /// creates its communicator and blocks on it ([`Scenario::creates_communicator_in_setup`],
    /// R8): none for a lazy group or one the program does not make.
    pub setup_communicator_ranks: Vec<Vec<u32>>,
    /// For each Work name, whether it is a functional collective's result's
    /// ([`functional_works`], R30): its collective a `_functional_collectives` call, its wait a
    /// `wait_tensor`.
    pub functional_works: Vec<bool>,
    pub op_works: Vec<Option<OpWork>>,
}

impl<'a> Resolved<'a> {
    pub fn new(scenario: &'a Scenario) -> Self {
        let groups = 0..scenario.groups.len();
        Resolved {
            scenario,
            communicators: groups
                .clone()
                .map(|group| scenario.communicator(group))
                .collect(),
            process_groups: groups
                .clone()
                .map(|group| scenario.process_group(group))
                .collect(),
            stream_high_priority: groups
                .clone()
                .map(|group| scenario.group_stream_high_priority(group))
                .collect(),
            setup_communicator_ranks: groups
                .map(|group| {
                    (scenario.groups[group].ranks.iter().copied())
                        .filter(|&rank| scenario.creates_communicator_in_setup(group, rank))
                        .collect()
                })
                .collect(),
            functional_works: functional_works(scenario),
            op_works: op_works(scenario),
        }
    }
}

#[cfg(test)]
mod tests;
