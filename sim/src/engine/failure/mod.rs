//! ProcessGroupNCCL's side threads and the faults a scenario injects, as a component of the
//! engine that receives notifications and returns commands (R15, R16, R26–R29, R31).
//!
//! The component owns its state — each watchdog's pending Works and deadline, the heartbeat,
//! per-rank error state (armed faults, dumps, aborted communicators), the calls at each
//! SeqNum for the mismatch check — and its log (the Timeline's `watchdog` records). It never
//! touches the engine: the engine tells it what happened ([`Notice`]), it answers with
//! [`Command`]s the engine applies in one place (`engine/commands.rs`), in the order given.
//! What it must know of the run's progress that it is not told (whether a Work's end event
//! fired, where each rank stands for the desync report) it reads through [`RunView`], a
//! read-only view the engine implements and unit tests fake.
//!
//! Its parts: `watchdog` (R26: pending Works, deadline polls, what a poll catches, the desync
//! report), `error_handling` (R27: the dump signal, the dump wait, the modes of
//! `TORCH_NCCL_ASYNC_ERROR_HANDLING`, aborted communicators, a blocking wait that raised),
//! `heartbeat` (R28), `store` (R29), `faults` (`[[fault]]`s as they act at run time, and the
//! R16 mismatch check), `exit` (R31: a process whose program returned, until its GPU work
//! drained).
//!
//! About 920 lines: the `Notice` and `Command` vocabulary, the component's state and the
//! dispatch of each notice to its part, which the parts above share.

use super::host::next_poll_ns as next_tick_ns;
use crate::fold::Classes;
use crate::pg::work::WorkErrors;
use crate::ranks::RankSet;
use crate::scenario::{CollectiveKind, DType, FaultKind, GroupId, OpKind, Scenario, WorkId};
use crate::timeline::{ExitStatus, FindingKind, ThreadKind, WatchdogEvent, WatchdogRecord};
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use std::rc::Rc;
use watchdog::WatchdogState;

mod error_handling;
mod exit;
mod faults;
mod heartbeat;
mod store;
mod watchdog;

#[cfg(test)]
mod fake;

/// A wake-up the component asked for: a step of a group's watchdog or heartbeat monitor, or
/// of the store rendezvous, for one rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(in crate::engine) enum Wake {
    /// The deadline poll of the oldest pending Work (R26).
    Check,
    /// The first poll that sees an async error on the communicator under collective record
    /// `collective` (R26).
    AsyncError { collective: u32 },
    /// The first poll after the Work of collective record `collective` went onto the list on a
    /// communicator the watchdog aborted while the call waited for the list (R27): NCCL's
    /// system error under it.
    AbortedCommunicator { collective: u32 },
    /// The first poll after another rank wrote its error into the store
    /// (`TORCH_NCCL_PROPAGATE_ERROR=1`, R27): the watchdog reads it, unless its group's error
    /// is set already.
    RemoteError { from_rank: u32 },
    /// The heartbeat monitor's poll that finds the dump signal in the store (R27).
    DumpSeen,
    /// The default group's heartbeat monitor's wake that finds the process's dump flag, set by
    /// a non-default group's monitor that found its watchdog stuck (R28).
    DumpFlagSeen,
    /// The watchdog finished logging a timed-out Work's stack trace: it signals the dump now
    /// (R27; `host.watchdog_stack_trace_us`).
    StackTraceLogged,
    /// The watchdog's sleep for the dumps is over: act on the error-handling mode (R27).
    DumpWaitOver,
    /// The watchdog's abort of the communicators (error-handling modes 1 and 2) may return:
    /// `host.comm_abort_us` passed since it began, or the device drained after that. It returns
    /// once both hold; then the process is taken down, or the watchdog goes on (R27).
    AbortReturned,
    /// The watchdog's poll that hangs in `cudaEventQuery` (a `watchdog_stuck` fault): its
    /// heartbeat stops from here (R28).
    WatchdogHangs,
    /// The heartbeat monitor's read that finds the heartbeat unchanged (R28).
    HeartbeatCheck,
    /// The same read, asked for by the main thread's abort of the communicator after a wait's
    /// timeout that began at `since_ns` (R15): the watchdog blocks until that abort returns, and
    /// the read finds nothing if it returned first.
    AbortStallCheck { since_ns: u64 },
    /// The heartbeat monitor, done with its dump and its sleep of one heartbeat timeout,
    /// terminates the process (R28).
    MonitorKill,
    /// `store.get` of the unique id passes the store timeout (R29).
    StoreTimeout,
    /// The destructor's abort of the communicators, at exit, passes the group's timeout (R31).
    ExitAbortTimeout,
}

/// What happened in the run, as the component is told.
#[derive(Debug, Clone, PartialEq)]
pub(in crate::engine) enum Notice {
    /// `rank`'s host reached `op`, where a `[[fault]]` of kind `fault` applies.
    FaultReached {
        rank: u32,
        op: usize,
        iteration: u32,
        fault: FaultKind,
        host_ns: u64,
    },
    /// `rank` issued its collective record `collective` (R10c): its kernel, enqueued at
    /// `enqueue_ns`, joins rendezvous `rendezvous`, issued as `issued` (kind and size; a
    /// mismatch fault changes them). The fault armed for it acts on the kernel now, before the
    /// Work exists: a launch queue the end event's record waits on (R1) or a watchdog holding
    /// its list (R27) may keep the Work from the list while the kernel runs.
    CollectiveIssued {
        rank: u32,
        collective: u32,
        rendezvous: u32,
        enqueue_ns: u64,
        issued: (CollectiveKind, u64),
    },
    /// A Work was enqueued (R10e): collective record `collective` of `rank`.
    WorkEnqueued {
        rank: u32,
        group: GroupId,
        collective: u32,
        /// The Work's end event instance.
        end: u32,
        /// When its kernel was enqueued: its timeout counts from then.
        enqueue_ns: u64,
        /// When it went onto the watchdog's list: later than `enqueue_ns` where the call
        /// waited for the watchdog to let go of the list ([`Failure::holds_work_list`]).
        listed_ns: u64,
    },
    /// A rank waiting, from `host_ns`, for the others to create `group`'s communicator (R8): a
    /// non-root one blocked in `store.get` for the unique id until the root published it
    /// (`root_published`: the root already arrived), which the store's timeout bounds (the
    /// group's, R29); then, under `TORCH_NCCL_USE_COMM_NONBLOCKING` (`nonblocking`), for the
    /// communicator, which `nonblocking_timeout_ns` bounds (`None`: for good).
    StoreWait {
        rank: u32,
        group: GroupId,
        host_ns: u64,
        root_published: bool,
        nonblocking_timeout_ns: Option<u64>,
        nonblocking: bool,
    },
    /// The main thread checks the communicator of `group` before a collective of `op`.
    CommunicatorUsed {
        rank: u32,
        group: GroupId,
        op: usize,
        host_ns: u64,
    },
    /// The main thread uses (op `op`) the Work name `work` that no call bound on the rank, and
    /// raises NameError (uncaught).
    NameError {
        rank: u32,
        work: WorkId,
        op: usize,
        host_ns: u64,
    },
    /// A polling `wait()` of collective record `collective` timed out (R15): the main thread
    /// aborts the communicator, then raises ([`Notice::WaitRaised`]).
    WaitTimedOut {
        rank: u32,
        collective: u32,
        /// When the Work was enqueued: it ran from then to `now_ns` (`WorkNCCL::checkTimeout`).
        enqueue_ns: u64,
        now_ns: u64,
    },
    /// A `wait()` of collective record `collective` found the Work failed by its
    /// communicator's NCCL async error (R15, R27): a default one at the call, a polling one at
    /// the call or at a poll. As after a timeout, the main thread aborts the communicator,
    /// then raises the error ([`Notice::WaitRaised`] with `failed`).
    WaitFoundError {
        rank: u32,
        collective: u32,
        now_ns: u64,
    },
    /// A `wait()` of collective record `collective` raised (R15), once the main thread's
    /// abort of the communicator ended: the Work's async error where `failed`
    /// ([`Notice::WaitFoundError`]), else its timeout.
    WaitRaised {
        rank: u32,
        collective: u32,
        op: usize,
        now_ns: u64,
        failed: bool,
    },
    /// The program of `rank` ran to its end at host time `host_ns` (R31). `abort_timeout`:
    /// the group with the smallest timeout among those whose communicator the process created,
    /// and that timeout; `drained`: no GPU work of the rank is left.
    ProgramReturned {
        rank: u32,
        host_ns: u64,
        abort_timeout: Option<(GroupId, u64)>,
        drained: bool,
    },
    /// The GPU work of `rank`, whose program returned, drained at `now_ns` (R31).
    Drained { rank: u32, now_ns: u64 },
    /// A wake-up the component asked for is due and not stale.
    Woken {
        rank: u32,
        group: GroupId,
        wake: Wake,
        now_ns: u64,
    },
}

/// What the component asks the engine to do.
#[derive(Debug, Clone, PartialEq)]
pub(in crate::engine) enum Command {
    /// Deliver [`Notice::Woken`] at `at_ns` (or now, if that passed).
    Wake {
        rank: u32,
        group: GroupId,
        wake: Wake,
        at_ns: u64,
    },
    /// A finding on `rank`, naming the op and iteration of what it is `about`.
    Finding {
        kind: FindingKind,
        rank: u32,
        about: FindingAbout,
        message: String,
    },
    /// The collective of this rendezvous can never complete.
    PoisonRendezvous { rendezvous: u32 },
    /// The host of `rank` hangs for good in `op` (a `hang` fault).
    HangHost { rank: u32, op: usize },
    /// `ncclCommAbort` of `rank`'s communicator of `group`: its started kernels end now and
    /// their collectives can never complete.
    AbortCommunicators { rank: u32, group: GroupId },
    /// Wake `group`'s watchdog of `rank` ([`Wake::AbortReturned`]) once the last GPU work of
    /// `rank` left its streams.
    AwaitDrain { rank: u32, group: GroupId },
    /// `rank`'s watchdog of process group `group` is done with its error: its abort of the
    /// communicators returned (modes 1, 2), or it left the error alone (mode 0). A call that
    /// waited for it (on the communicator it aborted, or to put its Work onto the list it held)
    /// goes on now (R27).
    WatchdogFree { rank: u32, group: GroupId },
    /// The process of `rank` ends at `at_ns` with `status`: its host stops, its GPU work
    /// vanishes.
    KillProcess {
        rank: u32,
        status: ExitStatus,
        at_ns: u64,
    },
    /// The program of `rank` caught the exception `op` raised at `at_ns` (`catch = true`): the
    /// call ends there and the program goes on at its next op.
    Caught {
        rank: u32,
        op: usize,
        exception: &'static str,
        message: String,
        at_ns: u64,
    },
}

impl Command {
    /// The program caught (`catch = true`) the `DistBackendError` raised with `message` in
    /// op `op` at `at_ns`, and goes on.
    fn caught_backend_error(rank: u32, op: usize, message: &str, at_ns: u64) -> Command {
        Command::Caught {
            rank,
            op,
            exception: "DistBackendError",
            message: crate::pg::work::wait_raise_caught(message),
            at_ns,
        }
    }
}

/// What a finding is about, which decides the op and iteration it names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::engine) enum FindingAbout {
    /// The Work of the rank's collective record `collective`: the op and iteration of its
    /// call. PyTorch names a Work by its SeqNum, one call's, so a Work the watchdog catches
    /// after the host moved on, or after the program returned, is still that call's.
    Work(u32),
    /// The host's call `op`, in the iteration the host is in: an error the main thread raises.
    Call(usize),
    /// No call: the rank, in the iteration its host is in; none once its program returned.
    Rank,
}

/// What a collective record is, as the run knows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::engine) struct WorkFacts {
    pub(in crate::engine) op: usize,
    /// The iteration of the call that made the Work.
    pub(in crate::engine) iteration: u32,
    pub(in crate::engine) group: GroupId,
    pub(in crate::engine) seq: u64,
    /// The `SeqNum` PyTorch prints for the Work (`CollectiveRecord::seq_num`).
    pub(in crate::engine) seq_num: u64,
    pub(in crate::engine) bytes: u64,
}

/// Where a rank stands in a group at some time, for the desync report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(in crate::engine) struct Progress {
    /// The group's numbers (`CollectiveRecord::seq`) of its last enqueued and last completed
    /// calls, by which ranks are compared.
    pub(in crate::engine) last_enqueued: u64,
    pub(in crate::engine) last_completed: u64,
    /// The same as the Works' `SeqNum`s (`CollectiveRecord::seq_num`), among the calls of the
    /// asked-about kind (point-to-point or collective), for the report; a collective's go on
    /// from those its group ran before the program (`Group::collectives_before`).
    pub(in crate::engine) enqueued_seq_num: u64,
    pub(in crate::engine) completed_seq_num: u64,
    /// The kernel of the SeqNum asked about started.
    pub(in crate::engine) kernel_started: bool,
}

/// The run's progress as the component may read it; the engine implements it.
pub(in crate::engine) trait RunView {
    /// The process of `rank` ended.
    fn is_dead(&self, rank: u32) -> bool;
    /// Collective record `collective` of `rank`.
    fn work(&self, rank: u32, collective: u32) -> WorkFacts;
    /// When the end event of that Work (event instance `end`, as the Work carries it) fired,
    /// if it has as far as the run has got.
    fn work_end_ns(&self, rank: u32, collective: u32, end: u32) -> Option<u64>;
    /// Where `rank` stands in the group of `call` (group, seq) at `now_ns`, and whether its
    /// kernel of that call started; its `SeqNum`s among its point-to-point calls where
    /// `point_to_point`, else among its collectives.
    fn progress(
        &self,
        rank: u32,
        call: (GroupId, u64),
        point_to_point: bool,
        now_ns: u64,
    ) -> Progress;
    /// `rank`'s host still waits at `now_ns` in `store.get` for the unique id of `group`'s
    /// communicator: the root has not published it by then.
    fn waits_for_unique_id(&self, rank: u32, group: GroupId, now_ns: u64) -> bool;
    /// `rank`'s host still waits at `now_ns` for `group`'s communicator (R8): the others have
    /// not all done their part, or its creation ends after `now_ns`.
    fn waits_for_communicator(&self, rank: u32, group: GroupId, now_ns: u64) -> bool;
    /// The op `rank`'s host is in.
    fn host_op(&self, rank: u32) -> usize;
    /// No GPU work of `rank` is left on any of its streams.
    fn drained(&self, rank: u32) -> bool;
    /// A number that changes whenever anything the failure component can read may have
    /// changed (an engine event other than its own wake-ups, a command that ends, hangs or
    /// aborts something): equal epochs at equal times mean the same run to look at.
    fn epoch(&self) -> u64;
}

/// The calls of one (group, SeqNum) (R16). A disagreement is found at the engine's first
/// disagreeing call, and the collective hangs from there; the finding, which names every
/// caller, is made once the run ended ([`Failure::mismatch_findings`]), so that it does not
/// depend on the order in which the engine took calls that hosts made at their own times.
struct SeqNumCalls {
    /// The call the engine took first, which each later one is compared with.
    first: Signature,
    /// The distinct calls made, each with the ranks that made it.
    variants: Vec<CallVariant>,
}

/// One call made at a (group, SeqNum), by `ranks`.
struct CallVariant {
    /// What the earliest of them issued (its own rank and `SeqNum`).
    signature: Signature,
    ranks: RankSet,
    /// The earliest caller: its host's time at the call, its rank (the lowest of those at
    /// that time), the iteration of its call.
    earliest: (u64, u32),
    iteration: u32,
}

/// A mismatch finding (R16), made once the run ended: `ranks`, those whose call disagrees with
/// the call most ranks made (the lowest reports it), the time the earliest of their calls was
/// made at, and the op and iteration of that call.
pub(in crate::engine) struct MismatchFinding {
    pub(in crate::engine) ranks: RankSet,
    pub(in crate::engine) found_ns: u64,
    pub(in crate::engine) iteration: u32,
    pub(in crate::engine) op: usize,
    pub(in crate::engine) message: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Signature {
    collective: CollectiveKind,
    size_bytes: u64,
    dtype: DType,
    rank: u32,
    op: usize,
    /// The Work's `SeqNum` on `rank`.
    seq_num: u64,
}

impl Signature {
    /// Whether `issued`, at the same (group, SeqNum), agrees with this call: the same
    /// collective (a send's receive), size and element type, or the same rank's call of the
    /// same collective (R16).
    fn agrees_with(&self, issued: &Signature) -> bool {
        (
            self.collective.descriptor().counterpart,
            self.size_bytes,
            self.dtype,
        ) == (issued.collective, issued.size_bytes, issued.dtype)
            || (self.rank == issued.rank && self.collective == issued.collective)
    }

    /// Whether `issued` is the same call as this one, as a report names it: collective, size,
    /// element type, op and `SeqNum`.
    fn same_call(&self, issued: &Signature) -> bool {
        (
            self.collective,
            self.size_bytes,
            self.dtype,
            self.op,
            self.seq_num,
        ) == (
            issued.collective,
            issued.size_bytes,
            issued.dtype,
            issued.op,
            issued.seq_num,
        )
    }
}

/// Faults and ProcessGroupNCCL's side threads of every rank.
///
/// Its ranks are the engine's simulated ranks (one per class of ranks that behave alike when
/// the run is folded, docs/scale.md): it acts once per class, and names a class by its lowest
/// rank in what it logs, each record standing for the class.
pub(in crate::engine) struct Failure<'s> {
    scenario: &'s Scenario,
    classes: Rc<Classes>,
    /// Watchdog threads exist: not under `TORCH_NCCL_BLOCKING_WAIT` (R15).
    watchdog_enabled: bool,
    groups: usize,
    /// Per rank × group (a pair's slot unused: its Works are its process group's watchdog's).
    watchdogs: Vec<WatchdogState>,
    /// Per rank × group: the communicator was aborted (`is_aborted`).
    comm_aborted: Vec<bool>,
    records: Vec<WatchdogRecord>,
    /// Per rank: the fault that applies to the collective being issued.
    armed: Vec<Option<FaultKind>>,
    /// (rank, collective record) → the fault its collective was issued under, until its Work
    /// goes onto the watchdog's list.
    issued_faults: HashMap<(u32, u32), FaultKind>,
    /// Per rank: the watchdog has symbolised a failed Work's stack trace before; the process
    /// keeps the symbols, so a later trace costs nothing (R27; measured on PyTorch 2.11: the
    /// second, of a Work issued at the same call site, 1 ms after its finding against 4.4 s
    /// for the first, tests/data/torch/probes/mode2_timeout/).
    symbolised: Vec<bool>,
    /// Per (group, SeqNum): the calls made there so far, when calls may disagree (R16).
    signatures: Option<HashMap<(GroupId, u64), SeqNumCalls>>,
    /// (group, SeqNum) at which calls disagreed.
    mismatched: HashSet<(GroupId, u64)>,
    /// Per rank: its Flight Recorder was dumped.
    dumped: Vec<bool>,
    /// (rank, collective record) → the collective and element type a mismatch fault issued
    /// instead of the op's.
    issued_instead: HashMap<(u32, u32), (CollectiveKind, DType)>,
    /// The NCCL async errors (R27) of the Works, by (rank, collective record), and of the
    /// communicators, by (rank, group of `Scenario::communicator`).
    errors: WorkErrors<(u32, u32), (u32, GroupId)>,
    /// (rank, group) → when its wait for the others to finish a non-blocking communicator
    /// (R8) raises: the non-blocking init's error, not the store's.
    nonblocking_waits: HashMap<(u32, GroupId), u64>,
    /// (rank, group) → the store timeouts of its unique id the program caught (R29): each
    /// try of the communicator's creation waits on the process group's next store key.
    store_attempts: HashMap<(u32, GroupId), u32>,
    /// The last desync report's table (without its `[Rank r]` header) and verdict, with what
    /// it was made of; the next rank reporting at the same time, epoch and SeqNum reuses it
    /// (a hang's every rank reports at the same poll: one table, not one per rank).
    desync_cache: Option<(watchdog::DesyncKey, String, String)>,
    /// The heartbeat-monitor tick at which the last dump-signal broadcast woke the ranks.
    dump_signal_seen_ns: Option<u64>,
    /// Per rank: its program returned and its process waits for its GPU work (R31).
    exiting: Vec<Option<exit::Exiting>>,
}

impl<'s> Failure<'s> {
    pub(in crate::engine) fn new(scenario: &'s Scenario, classes: Rc<Classes>) -> Failure<'s> {
        let ranks = classes.simulated() as usize;
        let groups = scenario.groups.len();
        // Calls at one SeqNum can only disagree where some rank issues another op than its
        // peers: faults, or ops restricted to some ranks.
        let calls_may_disagree = !scenario.faults.is_empty()
            || scenario.ops.iter().any(|op| {
                op.ranks.is_some()
                    && matches!(op.kind, OpKind::Collective { .. } | OpKind::Barrier { .. })
            });
        Failure {
            scenario,
            classes,
            watchdog_enabled: crate::pg::work::watchdog_runs(&scenario.env),
            groups,
            watchdogs: (0..ranks * groups)
                .map(|_| WatchdogState::default())
                .collect(),
            comm_aborted: vec![false; ranks * groups],
            records: Vec::new(),
            armed: vec![None; ranks],
            issued_faults: HashMap::default(),
            symbolised: vec![false; ranks],
            signatures: calls_may_disagree.then(HashMap::default),
            mismatched: HashSet::default(),
            dumped: vec![false; ranks],
            issued_instead: HashMap::default(),
            errors: WorkErrors::default(),
            nonblocking_waits: HashMap::default(),
            store_attempts: HashMap::default(),
            desync_cache: None,
            dump_signal_seen_ns: None,
            exiting: vec![None; ranks],
        }
    }

    /// Whether a collective `rank` issues now needs its `CollectiveIssued` notice: a fault is
    /// armed for it, or the ranks' calls may disagree (R16). Most runs need neither, and the
    /// notice costs a dispatch per collective.
    pub(in crate::engine) fn acts_on_issue(&self, rank: u32) -> bool {
        self.armed[rank as usize].is_some() || self.signatures.is_some()
    }

    /// The log, in time order.
    pub(in crate::engine) fn into_records(mut self) -> Vec<WatchdogRecord> {
        self.records.sort_by_key(|r| (r.at_ns, r.rank));
        self.records
    }

    /// Takes in what happened; pushes what the engine must do onto `out`, in order.
    pub(in crate::engine) fn notify(
        &mut self,
        view: &impl RunView,
        notice: Notice,
        out: &mut Vec<Command>,
    ) {
        match notice {
            Notice::FaultReached {
                rank,
                op,
                iteration,
                fault,
                host_ns,
            } => self.fault_reached((rank, op, iteration), fault, host_ns, out),
            Notice::CollectiveIssued {
                rank,
                collective,
                rendezvous,
                enqueue_ns,
                issued,
            } => {
                let armed = self.armed[rank as usize].take();
                self.check_issued(
                    view,
                    (rank, collective, rendezvous),
                    (issued, enqueue_ns),
                    armed.as_ref(),
                    out,
                );
                if let Some(fault) = armed {
                    self.issued_faults.insert((rank, collective), fault);
                }
            }
            Notice::WorkEnqueued {
                rank,
                group,
                collective,
                end,
                enqueue_ns,
                listed_ns,
            } => {
                let armed = self.issued_faults.remove(&(rank, collective));
                // The call launched its kernel before the watchdog's abort, then waited for
                // the list (R27): the Work is on the aborted communicator.
                let on_aborted = self.is_aborted(rank, group);
                let work = watchdog::PendingWork {
                    enqueue_ns,
                    listed_ns,
                    collective,
                    end,
                };
                let watchdog = self.watchdog_group(group);
                if on_aborted {
                    self.watch_aborted(rank, watchdog, collective, listed_ns, out);
                } else {
                    self.watch(view, (rank, watchdog), work, armed, out);
                }
                if watchdog == 0 && self.watchdog_enabled && self.scenario.env.dump_on_timeout {
                    self.work_list_updated(self.index(rank, 0), listed_ns);
                }
            }
            Notice::StoreWait {
                rank,
                group,
                host_ns,
                root_published,
                nonblocking_timeout_ns,
                nonblocking,
            } => {
                let root = self.scenario.groups[group].ranks[0];
                let waits_for_id = !root_published && self.rank_id(rank) != root;
                if !nonblocking || waits_for_id {
                    // `store.get` of the unique id: the store's timeout (R29), whatever
                    // TORCH_NCCL_NONBLOCKING_TIMEOUT says.
                    let store_timeout_ns = self.scenario.groups[group].timeout_ns;
                    self.store_wait(rank, group, host_ns, root_published, store_timeout_ns, out);
                } else if let Some(timeout_ns) = nonblocking_timeout_ns {
                    // The id is there: the wait for the non-blocking communicator (R8).
                    let at_ns = host_ns + timeout_ns;
                    self.nonblocking_waits.insert((rank, group), at_ns);
                    wake(out, rank, group, Wake::StoreTimeout, at_ns);
                }
                // At 0 or less, TORCH_NCCL_NONBLOCKING_TIMEOUT bounds no wait for the
                // communicator: it never raises.
            }
            Notice::CommunicatorUsed {
                rank,
                group,
                op,
                host_ns,
            } => self.communicator_used(rank, group, op, host_ns, out),
            Notice::NameError {
                rank,
                work,
                op,
                host_ns,
            } => self.name_error(rank, work, op, host_ns, out),
            Notice::WaitTimedOut {
                rank,
                collective,
                enqueue_ns,
                now_ns,
            } => self.wait_timed_out(view, (rank, collective), (enqueue_ns, now_ns), out),
            Notice::WaitFoundError {
                rank,
                collective,
                now_ns,
            } => self.wait_found_error(view, (rank, collective), now_ns, out),
            Notice::WaitRaised {
                rank,
                collective,
                op,
                now_ns,
                failed,
            } => self.wait_raised(view, (rank, collective, op), (now_ns, failed), out),
            Notice::ProgramReturned {
                rank,
                host_ns,
                abort_timeout,
                drained,
            } => self.program_returned(view, (rank, host_ns), abort_timeout, drained, out),
            Notice::Drained { rank, now_ns } => self.drained(view, rank, now_ns, out),
            Notice::Woken {
                rank,
                group,
                wake,
                now_ns,
            } => match wake {
                Wake::Check => {
                    let watchdog = &self.watchdogs[self.index(rank, group)];
                    let head = *watchdog.pending.front().expect("a due check has a Work");
                    self.caught(view, rank, group, Caught::Timeout(head), now_ns, out);
                }
                Wake::AsyncError { collective } => self.caught(
                    view,
                    rank,
                    group,
                    Caught::AsyncError(collective),
                    now_ns,
                    out,
                ),
                Wake::AbortedCommunicator { collective } => self.caught(
                    view,
                    rank,
                    group,
                    Caught::AbortedByWatchdog(collective),
                    now_ns,
                    out,
                ),
                Wake::RemoteError { from_rank } => {
                    self.remote_error_read(rank, group, from_rank, now_ns)
                }
                Wake::DumpSeen => self.dump_seen(view, (rank, group, false), now_ns, out),
                Wake::DumpFlagSeen => self.dump_seen(view, (rank, group, true), now_ns, out),
                Wake::StackTraceLogged => {
                    self.stack_trace_logged(rank, group, now_ns);
                    self.signal_dump(view, rank, group, now_ns, out);
                }
                Wake::DumpWaitOver => self.handle_error(view, rank, group, now_ns, out),
                Wake::AbortReturned => self.abort_may_return(view, rank, group, now_ns, out),
                Wake::HeartbeatCheck | Wake::AbortStallCheck { .. } => {
                    self.heartbeat_abort(rank, group, now_ns, out)
                }
                Wake::MonitorKill => self.monitor_kill(rank, group, now_ns, out),
                Wake::WatchdogHangs => {
                    let thread = self.thread_of(rank, group);
                    self.note(
                        rank,
                        Some(group),
                        (ThreadKind::Watchdog, WatchdogEvent::Fault),
                        now_ns,
                        format!("{thread} the watchdog thread hangs in cudaEventQuery; its heartbeat stops"),
                    );
                }
                Wake::StoreTimeout => self.store_timed_out(view, rank, group, now_ns, out),
                Wake::ExitAbortTimeout => self.exit_abort_timed_out(rank, group, now_ns, out),
            },
        }
    }

    /// Whether a wake-up due at `at_ns` changes nothing any more (the Work finished in time,
    /// the root published the id, the watchdog is busy or hung); such wake-ups are dropped
    /// before the time cap is checked, so a 10-minute deadline left over by a run that ended
    /// in milliseconds costs nothing. A `Check` whose Work is not due yet asks for its next
    /// deadline poll on `out`.
    pub(in crate::engine) fn is_stale(
        &mut self,
        view: &impl RunView,
        (rank, group, wake): (u32, GroupId, Wake),
        at_ns: u64,
        out: &mut Vec<Command>,
    ) -> bool {
        match wake {
            Wake::Check => !self.timeout_due(view, rank, group, at_ns, out),
            // A rank's store wait for the unique id became a wait for the non-blocking
            // communicator once the root published it: the latter's deadline counts.
            Wake::StoreTimeout => match self.nonblocking_waits.get(&(rank, group)) {
                Some(&deadline_ns) => {
                    deadline_ns != at_ns || !view.waits_for_communicator(rank, group, at_ns)
                }
                None => !view.waits_for_unique_id(rank, group, at_ns),
            },
            // A poll in the main thread's abort after a wait found the Work's async error
            // blocks on it: the watchdog finds the error once it returned (`wait_raised`).
            Wake::AsyncError { .. }
                if self.watchdogs[self.index(rank, group)].main_abort_running =>
            {
                true
            }
            Wake::AsyncError { .. } | Wake::AbortedCommunicator { .. } => {
                let watchdog = &self.watchdogs[self.index(rank, group)];
                watchdog.handling || watchdog.stuck_at_ns.is_some_and(|t| t <= at_ns)
            }
            Wake::RemoteError { .. } => {
                let watchdog = &self.watchdogs[self.index(rank, group)];
                watchdog.error_set || watchdog.stuck_at_ns.is_some_and(|t| t <= at_ns)
            }
            // After a return without destroy_process_group() the monitor was stopped (R31).
            Wake::DumpSeen | Wake::DumpFlagSeen => {
                (self.watchdogs[self.index(rank, group)].monitor_ending).is_some()
                    || self.heartbeat_stopped(rank)
            }
            Wake::AbortStallCheck { since_ns } => {
                let watchdog = &self.watchdogs[self.index(rank, group)];
                watchdog.abort_stall_since_ns != Some(since_ns)
                    && watchdog.own_abort_stall_since_ns != Some(since_ns)
            }
            // The destructor stopped the monitor during its sleep (R31).
            Wake::MonitorKill => self.heartbeat_stopped(rank),
            Wake::StackTraceLogged
            | Wake::DumpWaitOver
            | Wake::AbortReturned
            | Wake::WatchdogHangs
            | Wake::HeartbeatCheck
            | Wake::ExitAbortTimeout => false,
        }
    }

    /// Op `op` uses the Work name `work` that no call bound on the rank: the NameError it
    /// raises is never caught (`catch = true` is `except DistBackendError:`), so the process
    /// ends at the raise.
    fn name_error(
        &mut self,
        rank: u32,
        work: WorkId,
        op: usize,
        host_ns: u64,
        out: &mut Vec<Command>,
    ) {
        let scenario = self.scenario;
        let message = crate::pg::work::name_error(
            self.rank_id(rank),
            &scenario.works[work],
            &scenario.ops[op],
        );
        let raised = (host_ns, message);
        self.raise_uncaught((rank, None, op), FindingKind::ProgramError, raised, out);
    }

    /// An exception nobody catches in `rank`'s main thread at `op` (a `DistBackendError` of
    /// `group`, R27; a NameError): logged, a `kind` finding, and the process ends.
    fn raise_uncaught(
        &mut self,
        (rank, group, op): (u32, Option<GroupId>, usize),
        kind: FindingKind,
        (host_ns, message): (u64, String),
        out: &mut Vec<Command>,
    ) {
        self.note(
            rank,
            group,
            (ThreadKind::Main, WatchdogEvent::Exit),
            host_ns,
            message.clone(),
        );
        out.push(Command::Finding {
            kind,
            rank,
            about: FindingAbout::Call(op),
            message,
        });
        out.push(Command::KillProcess {
            rank,
            status: ExitStatus::Raised,
            at_ns: host_ns,
        });
    }

    /// The main thread ends on an exception nobody caught (R27, R29): logged, and the process
    /// ends with status `raised`.
    fn exit_uncaught(&mut self, rank: u32, group: GroupId, now_ns: u64, out: &mut Vec<Command>) {
        let message = crate::pg::work::exception_not_caught(self.rank_id(rank));
        self.take_down(
            (rank, Some(group), ThreadKind::Main),
            (ExitStatus::Raised, now_ns),
            message,
            out,
        );
    }

    /// Logs the end of `rank`'s process (an `Exit` record of `thread`) and ends it with
    /// `status` at `at_ns`.
    fn take_down(
        &mut self,
        (rank, group, thread): (u32, Option<GroupId>, ThreadKind),
        (status, at_ns): (ExitStatus, u64),
        message: String,
        out: &mut Vec<Command>,
    ) {
        self.note(rank, group, (thread, WatchdogEvent::Exit), at_ns, message);
        out.push(Command::KillProcess {
            rank,
            status,
            at_ns,
        });
    }

    /// A warning PyTorch's main thread logs (R11's eager send/recv), among the side threads'
    /// records.
    pub(in crate::engine) fn warn(
        &mut self,
        rank: u32,
        group: GroupId,
        at_ns: u64,
        message: String,
    ) {
        self.note(
            rank,
            Some(group),
            (ThreadKind::Main, WatchdogEvent::Warning),
            at_ns,
            message,
        );
    }

    fn note(
        &mut self,
        rank: u32,
        group: Option<GroupId>,
        (thread, event): (ThreadKind, WatchdogEvent),
        at_ns: u64,
        message: String,
    ) {
        if !self.classes.reports(rank) {
            return;
        }
        let class = self.classes.class_members(rank);
        self.records.push(WatchdogRecord {
            rank: self.classes.rank_of(rank),
            group: group.map(|g| g as u16),
            thread,
            event,
            at_ns,
            message,
            stands_for: if class.count() > 1 {
                class.clone()
            } else {
                RankSet::default()
            },
        });
    }

    /// The rank a simulated rank is (its class's lowest), as messages name it.
    fn rank_id(&self, rank: u32) -> u32 {
        self.classes.rank_of(rank)
    }
}

/// What the watchdog caught.
#[derive(Debug, Clone, Copy)]
enum Caught {
    Timeout(watchdog::PendingWork),
    AsyncError(u32),
    /// The communicator the main thread aborted after a wait's own timeout reports an NCCL
    /// error under the Work of collective record `.0` (R15, R27).
    AbortedByWait(u32),
    /// The communicator the watchdog aborted while the call of collective record `.0` waited
    /// to put its Work onto the list (R27).
    AbortedByWatchdog(u32),
}

/// Asks for a wake-up.
fn wake(out: &mut Vec<Command>, rank: u32, group: GroupId, wake: Wake, at_ns: u64) {
    out.push(Command::Wake {
        rank,
        group,
        wake,
        at_ns,
    });
}

fn ms(ns: u64) -> u64 {
    ns / 1_000_000
}

fn seconds(ns: u64) -> String {
    format!("{:.3} s", ns as f64 / 1e9)
}
