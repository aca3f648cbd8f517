//! What a Work's state is at an instant, as ProcessGroupNCCL decides it: when it has timed out
//! (R15's polling `wait()`, R26's watchdog, whether that runs and how often it polls) and what
//! an NCCL async error does to it (R27).
//! These are decisions at run time, over times only an engine knows (the enqueue, the host's
//! clock), so both engines call these functions with their own times: the simulator with
//! simulated ones, `hw` with its host clock's.

use crate::scenario::{Env, ErrorHandling, Op, Scenario};
use rustc_hash::FxHashMap;
use std::hash::Hash;

/// The watchdog's poll interval (`kWatchdogThreadSleepMillis`, R26).
pub const WATCHDOG_POLL_NS: u64 = 100_000_000;

/// Whether ProcessGroupNCCL starts its watchdog thread (R26): not under
/// `TORCH_NCCL_BLOCKING_WAIT`, where `wait()` itself polls and times out (R15).
pub fn watchdog_runs(env: &Env) -> bool {
    !env.blocking_wait
}

/// Whether a rank's error reaches the other ranks of its group through the store
/// (`TORCH_NCCL_PROPAGATE_ERROR=1`, R27): the failed rank's watchdog writes it and theirs read
/// it, so only where the watchdog runs; under blocking wait none runs (R15), and the others'
/// blocking waits time out.
pub fn propagates_error(env: &Env) -> bool {
    env.propagate_error && watchdog_runs(env)
}

/// Whether a `wait(timeout)` that timed out also sets off the watchdog's error path (log,
/// stack trace, dump signal, dump wait, `TORCH_NCCL_ASYNC_ERROR_HANDLING`), whether or not the
/// program catches the exception: the watchdog finds the error of the communicator the main
/// thread aborted under the Work, in the raise's millisecond (uncaught, before the exception
/// ends the process: PyTorch 2.11, `wait_timeout_abort.variants.txt`, and with two groups).
/// Measured on PyTorch 2.11 (`scenarios/wait_timeout.toml`, docs/watchdog.md: an NCCL async
/// error in the raise's millisecond, `SIGABRT` after the dump wait). Only where the watchdog runs; under blocking wait none runs and the process lived on.
pub fn wait_timeout_reaches_watchdog(env: &Env) -> bool {
    watchdog_runs(env)
}

/// Whether the main thread's abort of the communicator after a wait's timeout blocks the
/// watchdog until it returns, so that its heartbeat stops (R15, R28). Measured on PyTorch 2.11
/// (tests/data/torch/probes/never_ending_side.txt): under `wait(timeout)` with a kernel on another
/// stream that never ends, the abort never returned, and the heartbeat monitor found the
/// watchdog stuck at its second read after the timeout; with a 3-s kernel the watchdog found the
/// aborted communicator's error only after the raise. Only where the watchdog runs.
pub fn wait_abort_stalls_watchdog(env: &Env) -> bool {
    watchdog_runs(env)
}

/// How long the watchdog symbolises a timed-out Work's stack trace from the Flight Recorder
/// (`host.watchdog_stack_trace_us`): nothing to symbolise with the recorder off
/// (`TORCH_FR_BUFFER_SIZE = 0`; PyTorch 2.11 then logs at once that it found none,
/// docs/watchdog.md).
pub fn stack_trace_ns(scenario: &Scenario) -> u64 {
    match scenario.env.trace_buffer_entries {
        0 => 0,
        _ => scenario.host.watchdog_stack_trace_ns,
    }
}

/// How long after the dump signal the watchdog goes on to handle the error (R27): its sleep
/// for the dumps, 4 × `TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC`, and no less than the rank's own
/// dump takes (`host.flight_recorder_dump_us`). Measured on PyTorch 2.11: 4 × the timeout
/// plus 6 ms from a 1 s timeout up, 1.1–1.6 s for 100 and 250 ms
/// (tests/data/torch/probes/dump_wait.txt).
/// The same with the recorder off (`TORCH_FR_BUFFER_SIZE = 0`): launched directly, PyTorch
/// 2.11 went down 1.000 s after the signal at 250 ms with the recorder off and on alike
/// (tests/data/torch/probes/fr_off.txt), so the recorder makes no measured difference.
pub fn dump_wait_ns(scenario: &Scenario) -> u64 {
    (4 * scenario.env.wait_timeout_dump_ns).max(scenario.host.flight_recorder_dump_ns)
}

/// Whether the watchdog logs the failed Work's stack trace before its dump signal (R27): for a
/// timeout (`error` None) and for the NCCL error of a communicator the main thread or the
/// watchdog aborted, not for a Work's own async error (measured on PyTorch 2.11,
/// docs/watchdog.md). Both engines ask.
pub fn stack_traced(error: Option<NcclAsyncError>) -> bool {
    match error {
        None => true,
        Some(error) => matches!(
            error,
            NcclAsyncError::AbortedByWait | NcclAsyncError::AbortedByWatchdog
        ),
    }
}

/// When the watchdog, having found an error at `found_ns`, goes on to handle it under
/// `TORCH_NCCL_ASYNC_ERROR_HANDLING` (R27): after the failed Work's stack trace
/// ([`stack_trace_ns`]) where `first_trace` (a timeout, or the error of a communicator a wait's
/// timeout or the watchdog aborted, the process's first such: later ones keep its symbols),
/// then the dump wait ([`dump_wait_ns`]). Modes 1 and 3 take the process down then (mode 1
/// once its abort returned: at once where the main thread's abort already returned, R15), 2
/// aborts the failed group's communicators, 0 leaves the error alone.
pub fn error_handled_ns(scenario: &Scenario, found_ns: u64, first_trace: bool) -> u64 {
    let trace_ns = if first_trace {
        stack_trace_ns(scenario)
    } else {
        0
    };
    found_ns + trace_ns + dump_wait_ns(scenario)
}

/// The earliest a wait that timed out at `timed_out_ns` raises to the program (R15): the main
/// thread first aborts the communicator, which takes at least `comm_abort_ns`
/// (`host.comm_abort_us`) and returns only once the device drained, every stream of it, the
/// collective's or not. Measured on PyTorch 2.11 (tests/data/torch/probes/wait_timeout_abort.txt):
/// 0.90–0.99 s after the timeout, or within a few ms of the end of a longer GPU backlog, on the
/// collective's stream or on a stream it does not wait for.
pub fn wait_abort_floor_ns(timed_out_ns: u64, comm_abort_ns: u64) -> u64 {
    timed_out_ns.saturating_add(comm_abort_ns)
}

/// The first instant at which a Work enqueued at `enqueue_ns` counts as timed out: PyTorch
/// checks `elapsed >= timeout`, the elapsed time counted from the enqueue (R15, R26).
pub fn timeout_deadline_ns(enqueue_ns: u64, timeout_ns: u64) -> u64 {
    enqueue_ns.saturating_add(timeout_ns)
}

/// Whether a Work enqueued at `enqueue_ns` has timed out at `now_ns` (R15, R26).
pub fn timed_out(enqueue_ns: u64, timeout_ns: u64, now_ns: u64) -> bool {
    now_ns >= timeout_deadline_ns(enqueue_ns, timeout_ns)
}

/// When NCCL reports the async error a `[[fault]] kind = "async_error"` injects under a Work
/// enqueued at `enqueue_ns`: `after_ns` (`after_us`) later (R26, R27).
pub fn async_error_ns(enqueue_ns: u64, after_ns: u64) -> u64 {
    enqueue_ns.saturating_add(after_ns)
}

/// When a rank's watchdog reads from the store the error a peer's NCCL reported at `error_ns`
/// (`TORCH_NCCL_PROPAGATE_ERROR=1`, R27): the peer's watchdog finds it at its first poll at or
/// after it and writes `remote_error:<pg_uid>`, and this rank's watchdog reads it at its next
/// poll (`checkAndSetRemoteError()` at the top of each). Watchdogs polling in step, every
/// [`WATCHDOG_POLL_NS`] from the run's start, as `hw`, running one rank, takes the peer's.
pub fn remote_error_read_ns(error_ns: u64) -> u64 {
    error_ns.div_ceil(WATCHDOG_POLL_NS) * WATCHDOG_POLL_NS + WATCHDOG_POLL_NS
}

/// Whether a Work whose communicator reported an NCCL async error at `error_ns` (if it did)
/// has failed by `now_ns`: from the error on it is completed, with its error, so that
/// `is_completed()` is true and `wait()` raises `DistBackendError` (R27).
pub fn failed_by(error_ns: Option<u64>, now_ns: u64) -> bool {
    error_ns.is_some_and(|error_ns| error_ns <= now_ns)
}

/// The NCCL async error a poll of a Work finds (R27), the instant from which it finds it:
/// `WorkNCCL::isCompleted()` runs `checkAndSetException()` unless the Work's communicator was
/// aborted (`ncclComm_->isAborted()`), and that asks the **communicator** for its async error
/// (`checkForNCCLErrors()`, NCCL's `ncclCommGetAsyncError`), so every Work of a failed
/// communicator sees the error, not only the one the network failed under. `own_error_ns`:
/// the Work's own failure (a fault under it), which it keeps; `comm_error_ns`: the earliest
/// error of its communicator on the rank, seen while the communicator is not aborted
/// (`comm_aborted`). Both engines ask, for a polling `wait()` (R15) and `is_completed()`;
/// a default `wait()` raises only on what these stored in the program's Work
/// ([`stored_error_ns`]).
pub fn poll_error_ns(
    own_error_ns: Option<u64>,
    comm_error_ns: Option<u64>,
    comm_aborted: bool,
) -> Option<u64> {
    let comm_error_ns = comm_error_ns.filter(|_| !comm_aborted);
    match (own_error_ns, comm_error_ns) {
        (Some(own_ns), Some(comm_ns)) => Some(own_ns.min(comm_ns)),
        (own, comm) => own.or(comm),
    }
}

/// The NCCL async error the **program's** Work holds (its `exception_`, R12, R27) after an
/// `is_completed()` on it at `now_ns` whose poll finds `poll_error_ns` ([`poll_error_ns`]),
/// where it held `stored_ns` before: PyTorch's `workEnqueue` hands the watchdog a copy of the
/// Work (`workMetaList_.emplace_back(*work)`), so the watchdog's `checkAndSetException()`
/// stores the error in its copy only; the program's Work stores it only through its own
/// `isCompleted()`: the program's `work.is_completed()`, a polling wait's poll (R15), a
/// barrier's `wait()` (R14). Once stored it stays. A `wait()` of any kind raises where its
/// Work holds one after its stream wait (`WorkNCCL::wait()` checks `exception()`, aborts the
/// communicator, then rethrows it): a default wait on a Work whose error only the watchdog
/// found returns, the current stream waiting on an end event that never fires, and the
/// watchdog handles the error (`TORCH_NCCL_ASYNC_ERROR_HANDLING`). Both engines ask.
pub fn stored_error_ns(
    stored_ns: Option<u64>,
    poll_error_ns: Option<u64>,
    now_ns: u64,
) -> Option<u64> {
    stored_ns.or(poll_error_ns.filter(|&error_ns| failed_by(Some(error_ns), now_ns)))
}

/// `work.is_completed()` at `now_ns` (R13, R27): its end event fired, or it failed.
pub fn is_completed(end_fired: bool, error_ns: Option<u64>, now_ns: u64) -> bool {
    end_fired || failed_by(error_ns, now_ns)
}

/// One engine's bookkeeping of NCCL async errors (R27), by its own keys: `W` names a Work
/// (the simulator's rank and collective record, `hw`'s end event), `C` a communicator on the
/// rank (`Scenario::communicator`; the simulator's with its rank). It holds each failed Work's
/// error instant, each communicator's earliest error and the Work it failed under, and the
/// error each program's Work stored through its own `isCompleted()`; the rules over them are
/// [`poll_error_ns`] and [`stored_error_ns`]. Both engines keep one.
pub struct WorkErrors<W, C> {
    /// Each Work an NCCL async error failed (an `async_error` fault under it) → the instant
    /// NCCL reports it ([`async_error_ns`]).
    failed: FxHashMap<W, u64>,
    /// Each communicator → its NCCL async error, the earliest of `failed` on it, and the
    /// Work it failed under. Every Work of the communicator sees it ([`poll_error_ns`]).
    communicators: FxHashMap<C, (u64, W)>,
    /// Each program's Work → the error it stored through its own `isCompleted()`
    /// ([`stored_error_ns`]); the watchdog's findings stay in its copies of the Works.
    stored: FxHashMap<W, u64>,
}

impl<W, C> Default for WorkErrors<W, C> {
    fn default() -> Self {
        WorkErrors {
            failed: FxHashMap::default(),
            communicators: FxHashMap::default(),
            stored: FxHashMap::default(),
        }
    }
}

impl<W: Copy + Eq + Hash, C: Copy + Eq + Hash> WorkErrors<W, C> {
    /// NCCL reports an async error at `error_ns` under `work`, enqueued on `communicator`: the
    /// Work keeps it, and the communicator has it from then on unless it had an earlier one
    /// (the first Work of an equal instant stays the one it failed under).
    pub fn work_failed(&mut self, work: W, communicator: C, error_ns: u64) {
        self.failed.insert(work, error_ns);
        let comm_error = self
            .communicators
            .entry(communicator)
            .or_insert((error_ns, work));
        if error_ns < comm_error.0 {
            *comm_error = (error_ns, work);
        }
    }

    /// The NCCL async error a poll of `work` finds from its instant on ([`poll_error_ns`]):
    /// its own, or its communicator's while that is not aborted. `communicator` gives the
    /// Work's communicator (None: not a Work, no error) and `aborted` whether it was aborted;
    /// neither is asked where no fault failed a Work.
    pub fn poll_error_ns(
        &self,
        work: W,
        communicator: impl FnOnce() -> Option<C>,
        aborted: impl FnOnce(C) -> bool,
    ) -> Option<u64> {
        if self.failed.is_empty() {
            // Most runs: no fault failed a Work, and every poll asks.
            return None;
        }
        let communicator = communicator()?;
        poll_error_ns(
            self.failed.get(&work).copied(),
            self.communicators
                .get(&communicator)
                .map(|&(error_ns, _)| error_ns),
            aborted(communicator),
        )
    }

    /// An `isCompleted()` on the program's `work` at `now_ns` (the program's
    /// `is_completed()`, a polling wait's poll, a barrier's wait) whose poll found
    /// `poll_error_ns` ([`Self::poll_error_ns`]): the Work stores the error found by then, and
    /// keeps it ([`stored_error_ns`]). The error it holds now, which a wait raises.
    pub fn program_polled(
        &mut self,
        work: W,
        poll_error_ns: Option<u64>,
        now_ns: u64,
    ) -> Option<u64> {
        let error_ns = stored_error_ns(self.stored_error_ns(work), poll_error_ns, now_ns);
        if let Some(error_ns) = error_ns {
            self.stored.insert(work, error_ns);
        }
        error_ns
    }

    /// The NCCL async error the program's `work` holds, if it stored one
    /// ([`Self::program_polled`]): a `wait()` on it raises.
    pub fn stored_error_ns(&self, work: W) -> Option<u64> {
        if self.stored.is_empty() {
            // Most runs: no Work stored an error, and every wait() asks.
            return None;
        }
        self.stored.get(&work).copied()
    }

    /// The Work the network failed under on `communicator` (its earliest NCCL async error),
    /// which the watchdog names, if it has an error. What a wait raises is its own Work's
    /// stored error ([`Self::stored_error_ns`]).
    pub fn failed_under(&self, communicator: C) -> Option<W> {
        let &(_, work) = self.communicators.get(&communicator)?;
        Some(work)
    }
}

/// `WorkNCCL::checkTimeout`'s line (PyTorch's words): the watchdog's timeout (R26), and what a
/// polling `wait()` that timed out raises as `DistBackendError` (R15), for the Work `work` (as
/// [`super::work_text`] prints it) of rank `rank` that ran `ran_ns` since its enqueue, in whole
/// milliseconds as PyTorch truncates them. Both engines print it; an engine's own explanation
/// follows it.
pub fn timeout_caught(rank: u32, work: &str, ran_ns: u64) -> String {
    format!(
        "[Rank {rank}] Watchdog caught collective operation timeout: {work} ran for {} milliseconds before timing out.",
        ran_ns / 1_000_000
    )
}

/// The main thread's log lines when a polling `wait()` (blocking wait or `wait(timeout)`, R15)
/// finds its Work `work` (as [`super::work_text`] prints it) of rank `rank` timed out, `ran_ns`
/// after its enqueue, in PyTorch's order (`WorkNCCL::wait`): the timeout check it shares with
/// the watchdog logs [`timeout_caught`], then the wait logs that the Work "timed out in blocking
/// wait", PyTorch's words, to which both engines add what the main thread does next.
pub fn wait_timeout_log(rank: u32, work: &str, ran_ns: u64) -> [String; 2] {
    [
        timeout_caught(rank, work, ran_ns),
        format!(
            "[Rank {rank}] Work {work} timed out in blocking wait. Aborting the communicator, then raising DistBackendError in the main thread."
        ),
    ]
}

/// The main thread's line once the abort of the communicator of group `group`, which a polling
/// `wait()` (R15) started when rank `rank`'s Work `work` timed out, returned: the wait raises
/// `DistBackendError` next. Both engines log it (an `abort` record).
pub fn wait_abort_returned(rank: u32, work: &str, group: &str) -> String {
    format!(
        "[Rank {rank}] Work {work} timed out in blocking wait; the main thread aborted the communicator of group {group} and raises DistBackendError."
    )
}

/// The main thread's line when a `wait()` of rank `rank`, default or polling (R15), finds
/// Work `work` failed by its communicator's NCCL async error (R27), at the call or at a poll:
/// PyTorch's `WorkNCCL::wait()` aborts the Work's communicator and rethrows the error once
/// the abort returned, as after a polling wait's timeout. Both engines log it (a
/// `wait_error` record of the main thread).
pub fn wait_error_log(rank: u32, work: &str) -> String {
    format!(
        "[Rank {rank}] Work {work} failed with its communicator's NCCL async error in wait(). Aborting the communicator, then raising DistBackendError in the main thread."
    )
}

/// The main thread's line once the abort that a `wait()` started on finding Work `work`'s
/// NCCL async error ([`wait_error_log`]) returned: the wait raises the error next. Both
/// engines log it (an `abort` record).
pub fn wait_error_abort_returned(rank: u32, work: &str, group: &str) -> String {
    format!(
        "[Rank {rank}] Work {work} failed with an NCCL async error in wait(); the main thread aborted the communicator of group {group} and raises DistBackendError."
    )
}

/// `TORCH_NCCL_ASYNC_ERROR_HANDLING=<n> (<name>)`, as the watchdog's lines name the mode (R27).
pub fn error_handling_setting(mode: ErrorHandling) -> String {
    let name = match mode {
        ErrorHandling::NoHandling => "NoHandling",
        ErrorHandling::TearDown => "TearDown",
        ErrorHandling::CleanUpOnly => "CleanUpOnly",
        ErrorHandling::SkipCleanUp => "SkipCleanUp",
    };
    format!("TORCH_NCCL_ASYNC_ERROR_HANDLING={} ({name})", mode.number())
}

/// The watchdog's line of rank `rank` as its error handling (`mode` 1 or 2, R27) aborts the
/// communicators of group `group`, the one whose Work failed or timed out: PyTorch 2.11's
/// `abortComms()` of that process group alone (one watchdog per process group; another group's
/// communicators run on). Both engines log it (an `abort` record).
pub fn watchdog_abort(rank: u32, mode: ErrorHandling, group: &str) -> String {
    format!(
        "[Rank {rank}] {}: aborting the communicators of group {group} (ncclCommAbort)",
        error_handling_setting(mode)
    )
}

/// The watchdog's abort of group `group`'s communicators under `mode` (1 or 2) returned, and,
/// as mode 2 leaves the process running, it goes on (R27). Both engines log it (an
/// `abort_returned` record).
pub fn watchdog_abort_returned(rank: u32, mode: ErrorHandling, group: &str) -> String {
    format!(
        "[Rank {rank}] {}: the abort of the communicators of group {group} returned; the watchdog goes on",
        error_handling_setting(mode)
    )
}

/// Whether the watchdog's error handling under `mode` aborts the failed group's communicators
/// and leaves the process running (R27): `CleanUpOnly` (2) alone. A call blocked on the failed
/// collective then returns (the abort ended its kernels), a later `wait()` on a Work that
/// stored its async error ([`stored_error_ns`]) raises, and a later collective on the aborted communicator raises before it
/// issues anything; 1 and 3 take the process down, 0 leaves it with its hung collective.
pub fn aborts_and_runs_on(mode: ErrorHandling) -> bool {
    mode.cleans_up() && !mode.tears_down()
}

/// Under `TORCH_NCCL_ASYNC_ERROR_HANDLING=0` the watchdog leaves the error it found alone
/// (R27). Both engines log it (a `no_handling` record).
pub fn error_left_alone(rank: u32, mode: ErrorHandling) -> String {
    format!(
        "[Rank {rank}] {}: the error is left alone; the process and its hung collective stay",
        error_handling_setting(mode)
    )
}

/// The last line of rank `rank`'s process when its main thread raised an exception nobody
/// caught (a polling `wait()`'s timeout, R15; `DistStoreError`, R29). Both engines log it (an
/// `exit` record).
pub fn exception_not_caught(rank: u32) -> String {
    format!("[Rank {rank}] process exited: the exception was not caught")
}

/// A polling `wait()` (blocking wait or `wait(timeout)`, R15) that timed out, as the finding of
/// both engines says it: what it raises ([`timeout_caught`]), then where and what follows.
pub fn wait_timeout_finding(rank: u32, work: &str, ran_ns: u64, op: &Op) -> String {
    format!(
        "{} {} (line {}) raises it as DistBackendError once the main thread's abort of the communicator returned, and {} (R15)",
        timeout_caught(rank, work, ran_ns),
        op.display_name(),
        op.line,
        if op.catch {
            "the program catches it (catch = true)"
        } else {
            "the raise stops the rank's program"
        },
    )
}

/// An NCCL async error ProcessGroupNCCL finds under a Work (R26, R27): the simulator's two
/// (an injected network failure, the communicator a wait's timeout aborted), and every other
/// `ncclResult_t` a real communicator can report (`hw`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NcclAsyncError {
    /// `ncclRemoteError`: the network failed under the collective (`[[fault]] kind =
    /// "async_error"`), or a peer's process exited.
    Remote,
    /// `ncclSystemError`: the communicator the main thread aborted after a wait's timeout (R15).
    AbortedByWait,
    /// `ncclSystemError`: the communicator the watchdog aborted (R27) after the call launched
    /// its kernel, while it waited to put its Work onto the watchdog's list.
    AbortedByWatchdog,
    /// `ncclUnhandledCudaError`.
    UnhandledCuda,
    /// `ncclSystemError` of its own: a system call, an external library or the device failed.
    System,
    /// `ncclInternalError`.
    Internal,
    /// `ncclInvalidArgument`.
    InvalidArgument,
    /// `ncclInvalidUsage`.
    InvalidUsage,
    /// A code NCCL's header does not name.
    Unknown,
}

impl NcclAsyncError {
    /// `ncclGetErrorString`'s words, then what PyTorch prints on the exception's next line
    /// (`getNcclErrorDetailStr`) or, where that depends on the machine, what caused it.
    fn words(self) -> (&'static str, &'static str) {
        match self {
            NcclAsyncError::Remote => (
                "remote process exited or there was a network error",
                "ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely.",
            ),
            NcclAsyncError::AbortedByWait => (
                "unhandled system error (run with NCCL_DEBUG=INFO for details)",
                "the communicator the main thread aborted after the wait's timeout",
            ),
            NcclAsyncError::AbortedByWatchdog => (
                "unhandled system error (run with NCCL_DEBUG=INFO for details)",
                "the communicator the watchdog aborted while the call waited to enqueue its Work",
            ),
            NcclAsyncError::UnhandledCuda => (
                "unhandled cuda error (run with NCCL_DEBUG=INFO for details)",
                "ncclUnhandledCudaError: Call to CUDA function failed.",
            ),
            NcclAsyncError::System => (
                "unhandled system error (run with NCCL_DEBUG=INFO for details)",
                "ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error.",
            ),
            NcclAsyncError::Internal => (
                "internal error - please report this issue to the NCCL developers",
                "ncclInternalError: Internal check failed.",
            ),
            NcclAsyncError::InvalidArgument => (
                "invalid argument (run with NCCL_DEBUG=WARN for details)",
                "ncclInvalidArgument: Invalid value for an argument.",
            ),
            NcclAsyncError::InvalidUsage => (
                "invalid usage (run with NCCL_DEBUG=WARN for details)",
                "ncclInvalidUsage: This usually reflects invalid usage of NCCL library.",
            ),
            NcclAsyncError::Unknown => ("unknown result code", "Unknown NCCL error!"),
        }
    }
}

/// `WorkNCCL::checkAndSetException`'s line (PyTorch's words) when the watchdog finds `error` on
/// the communicator of rank `rank`'s Work `work` (as [`super::work_text`] prints it), then,
/// after "; ", what PyTorch prints below it (without NCCL's version) or what caused it.
pub fn async_exception(rank: u32, work: &str, error: NcclAsyncError) -> String {
    let (words, detail) = error.words();
    format!(
        "[Rank {rank}] Collective {work} raised the following async exception: NCCL error: {words}; {detail}"
    )
}

/// What a collective call `op` raises when NCCL refuses to enqueue it on a communicator that
/// already holds the async error `error` (R27): `C10D_NCCL_CHECK`'s `DistBackendError` in the
/// main thread, in PyTorch's words without the source line and NCCL's version. Uncaught, it
/// ends the process.
pub fn nccl_call_raised(rank: u32, error: NcclAsyncError, op: &Op) -> String {
    let (words, detail) = error.words();
    uncaught(&format!(
        "[Rank {rank}] DistBackendError: NCCL error in: ProcessGroupNCCL.cpp, {words}; {detail} {} (line {}) raises it in the main thread",
        op.display_name(),
        op.line
    ))
}

/// What the watchdog of rank `rank` logs when it reads from the store that rank `from_rank`
/// found an error on their group (`TORCH_NCCL_PROPAGATE_ERROR=1`, R27): PyTorch's line of
/// `checkAndSetRemoteError()`, which sets the group's error to `REMOTE_ERROR` and does nothing
/// else.
pub fn remote_error_detected(rank: u32, from_rank: u32) -> String {
    format!("[Rank {rank}] remote error detected from rank: {from_rank}")
}

/// What the main thread raises when `op`'s `wait()` finds its Work `work` (as [`super::work_text`]
/// prints it) failed by an NCCL async error at `error_ns` (R27).
pub fn async_error_raised(rank: u32, work: &str, error_ns: u64, op: &Op) -> String {
    uncaught(&async_error_failed(rank, work, error_ns, op))
}

/// What the main thread of rank `rank` raises when `op` uses the Work name `work` that no
/// call bound on the rank (every call that would have raised first, `catch = true`): Python's
/// `NameError`, which no `except DistBackendError:` catches.
pub fn name_error(rank: u32, work: &str, op: &Op) -> String {
    uncaught(&format!(
        "[Rank {rank}] NameError: name '{work}' is not defined; {} (line {}) raises it in the main thread (every call that would have bound the Work raised first)",
        op.display_name(),
        op.line
    ))
}

/// PyTorch's warning at the first unbatched send (and at the first receive) of rank `rank` on
/// the eagerly initialised world of `group_size` ranks (`pointToPoint`, R11), with its log
/// prefix; `TORCH_NCCL_SHOW_EAGER_INIT_P2P_SERIALIZATION_WARNING=0` silences it.
pub fn eager_p2p_serialization_warning(rank: u32, group_size: usize) -> String {
    format!(
        "[PG ID 0 PG GUID 0(default_pg) Rank {rank}] An unbatched P2P op (send/recv) was called on this ProcessGroup with size {group_size}.  In eager initialization mode, unbatched P2P ops are treated as independent collective ops, and are thus serialized with all other ops on this ProcessGroup, including other P2P ops. To avoid serialization, either create additional independent ProcessGroups for the P2P ops or use batched P2P ops. You can squash this warning by setting the environment variable TORCH_NCCL_SHOW_EAGER_INIT_P2P_SERIALIZATION_WARNING to false."
    )
}

/// The message of an exception the program does not catch: it ends the process.
pub fn uncaught(raised: &str) -> String {
    format!("{raised} and, uncaught, ends the process")
}

/// The exception record of a polling `wait()`'s raise after its timeout (R15), `raised` as
/// [`wait_abort_returned`] words it, which the program catches (`catch = true`) and goes on.
pub fn wait_raise_caught(raised: &str) -> String {
    format!("{raised} Caught (catch = true), the program goes on.")
}

/// The exception record of `wait()` on a Work an async error failed (R27), `failed` as
/// [`async_error_failed`] words it, which the program catches (`catch = true`) and goes on.
pub fn failed_work_caught(failed: &str) -> String {
    format!("{failed}; caught (catch = true), the program goes on")
}

/// What a collective call `op` of rank `rank` raises on the communicator of group `group`
/// that the rank aborted (the main thread after a wait's timeout, R15; the watchdog, R27),
/// before it issues anything: `DistBackendError`, caught (`catch = true`) or ending the
/// process.
pub fn aborted_communicator_raised(rank: u32, group: &str, op: &Op) -> String {
    format!(
        "[Rank {rank}] DistBackendError: the NCCL communicator of group {group} was aborted; {} (line {}) raises in the main thread and, {}",
        op.display_name(),
        op.line,
        if op.catch {
            "caught (catch = true), the program goes on"
        } else {
            "uncaught, ends the process"
        }
    )
}

/// What `wait()` on a Work failed by an async error raises, before the program's choice of
/// catching it (`catch = true`) or not.
pub fn async_error_failed(rank: u32, work: &str, error_ns: u64, op: &Op) -> String {
    format!(
        "[Rank {rank}] DistBackendError: {work} failed: NCCL reported an async error (ncclRemoteError) at {:.3} s; {} (line {}) raises in the main thread",
        error_ns as f64 / 1e9,
        op.display_name(),
        op.line
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_timeout_and_an_aborted_communicator_s_error_take_a_stack_trace_r27() {
        assert!(stack_traced(None));
        assert!(stack_traced(Some(NcclAsyncError::AbortedByWait)));
        assert!(stack_traced(Some(NcclAsyncError::AbortedByWatchdog)));
        assert!(!stack_traced(Some(NcclAsyncError::Remote)));
        assert!(!stack_traced(Some(NcclAsyncError::System)));
    }

    #[test]
    fn a_work_times_out_when_the_elapsed_time_reaches_the_timeout() {
        assert_eq!(timeout_deadline_ns(20, 1_000), 1_020);
        assert!(!timed_out(20, 1_000, 1_019));
        assert!(timed_out(20, 1_000, 1_020), "elapsed >= timeout");
        assert_eq!(timeout_deadline_ns(5, u64::MAX), u64::MAX);
    }

    #[test]
    fn a_failed_work_is_completed_from_its_error_on() {
        assert!(!failed_by(None, 10));
        assert!(!failed_by(Some(11), 10));
        assert!(failed_by(Some(10), 10));
        assert!(!is_completed(false, Some(11), 10));
        assert!(is_completed(false, Some(9), 10));
        assert!(is_completed(true, None, 10));
    }

    #[test]
    fn the_programs_work_stores_the_error_its_own_poll_found_and_keeps_it() {
        assert_eq!(stored_error_ns(None, None, 10), None);
        assert_eq!(
            stored_error_ns(None, Some(11), 10),
            None,
            "before the error"
        );
        assert_eq!(stored_error_ns(None, Some(10), 10), Some(10));
        assert_eq!(stored_error_ns(Some(4), None, 10), Some(4), "it stays");
    }

    #[test]
    fn a_poll_finds_its_communicators_error_until_the_communicator_is_aborted() {
        assert_eq!(poll_error_ns(None, None, false), None);
        assert_eq!(poll_error_ns(None, Some(7), false), Some(7));
        assert_eq!(poll_error_ns(None, Some(7), true), None, "aborted");
        assert_eq!(poll_error_ns(Some(9), Some(7), false), Some(7), "earliest");
        assert_eq!(
            poll_error_ns(Some(9), Some(7), true),
            Some(9),
            "its own stays"
        );
        assert_eq!(poll_error_ns(Some(9), None, false), Some(9));
    }

    /// Two Works on communicator 0 fail, the later-enqueued one first; Work 3 on it never
    /// failed; communicator 1 has no error.
    fn two_failed_works() -> WorkErrors<u32, u8> {
        let mut errors = WorkErrors::default();
        errors.work_failed(1, 0, 900);
        errors.work_failed(2, 0, 700);
        errors.work_failed(4, 0, 700);
        errors
    }

    #[test]
    fn a_communicators_error_is_its_earliest_and_names_the_first_work_at_it_r27() {
        let errors = two_failed_works();
        assert_eq!(errors.failed_under(0), Some(2), "earliest, first at 700");
        assert_eq!(errors.failed_under(1), None);
    }

    #[test]
    fn every_work_of_a_failed_communicator_finds_its_error_until_it_is_aborted_r27() {
        let errors = two_failed_works();
        let on = |communicator| move || Some(communicator);
        assert_eq!(errors.poll_error_ns(1, on(0), |_| false), Some(700));
        assert_eq!(errors.poll_error_ns(3, on(0), |_| false), Some(700));
        assert_eq!(
            errors.poll_error_ns(1, on(0), |_| true),
            Some(900),
            "its own"
        );
        assert_eq!(errors.poll_error_ns(3, on(0), |_| true), None);
        assert_eq!(errors.poll_error_ns(3, on(1), |_| false), None);
        assert_eq!(errors.poll_error_ns(3, || None, |_| false), None);
    }

    #[test]
    fn without_a_failed_work_a_poll_asks_nothing() {
        let errors = WorkErrors::<u32, u8>::default();
        let asked = |_| -> bool { panic!("asked whether the communicator was aborted") };
        assert_eq!(
            errors.poll_error_ns(0, || panic!("asked for the communicator"), asked),
            None
        );
        assert_eq!(errors.stored_error_ns(0), None);
    }

    #[test]
    fn a_programs_work_stores_what_its_poll_found_by_then_and_keeps_it_r27() {
        let mut errors = two_failed_works();
        assert_eq!(errors.program_polled(3, Some(700), 699), None, "before it");
        assert_eq!(errors.stored_error_ns(3), None);
        assert_eq!(errors.program_polled(3, Some(700), 700), Some(700));
        assert_eq!(errors.program_polled(3, None, 800), Some(700), "it stays");
        assert_eq!(errors.stored_error_ns(3), Some(700));
        assert_eq!(errors.stored_error_ns(1), None, "another Work's is its own");
    }

    const WORK: &str =
        "WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=262144, NumelOut=262144, Timeout(ms)=500)";

    /// The lines of PyTorch 2.11 on an H200 (tests/data/torch/h200-torchrun/caught_timeout.run2.log,
    /// wait_timeout.run1.json): the timeout's whole, the async exception's up to NCCL's version.
    #[test]
    fn the_failure_texts_open_with_pytorchs_words() {
        assert_eq!(
            timeout_caught(0, WORK, 500_999_999),
            format!("[Rank 0] Watchdog caught collective operation timeout: {WORK} ran for 500 milliseconds before timing out.")
        );
        let measured = format!("[Rank 0] Collective {WORK} raised the following async exception: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.28.9");
        let ours = async_exception(0, WORK, NcclAsyncError::AbortedByWait);
        let (pytorchs, detail) = ours.split_once("; ").unwrap();
        assert!(
            measured.starts_with(&format!("{pytorchs}, NCCL version ")),
            "{ours}"
        );
        assert_eq!(
            detail,
            "the communicator the main thread aborted after the wait's timeout"
        );
        // SeqNum 2 of tests/data/torch/probes/mode2_timeout/, on the communicator the watchdog
        // aborted while the call waited to enqueue its Work.
        let measured = measured.replace("SeqNum=1", "SeqNum=2");
        let work = WORK.replace("SeqNum=1", "SeqNum=2");
        let ours = async_exception(0, &work, NcclAsyncError::AbortedByWatchdog);
        let (pytorchs, _) = ours.split_once("; ").unwrap();
        assert!(
            measured.starts_with(&format!("{pytorchs}, NCCL version ")),
            "{ours}"
        );
        assert_eq!(
            async_exception(3, WORK, NcclAsyncError::Remote),
            format!("[Rank 3] Collective {WORK} raised the following async exception: NCCL error: remote process exited or there was a network error; ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely.")
        );
    }

    /// A real communicator's errors in PyTorch's words (`getNcclErrorDetailStr`), and the
    /// raise of a collective call NCCL refused on a failed communicator (`C10D_NCCL_CHECK`).
    #[test]
    fn a_real_communicators_errors_are_pytorchs_words() {
        assert_eq!(
            async_exception(1, WORK, NcclAsyncError::System),
            format!("[Rank 1] Collective {WORK} raised the following async exception: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details); ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error.")
        );
        let text = "[tensors]\nx = \"1MiB\"\n[[op]]\nlabel = \"ar2\"\nall_reduce = \"x\"\n";
        let scenario = crate::scenario::parse("call.toml", text).unwrap();
        assert_eq!(
            nccl_call_raised(0, NcclAsyncError::Remote, &scenario.ops[0]),
            "[Rank 0] DistBackendError: NCCL error in: ProcessGroupNCCL.cpp, remote process exited or there was a network error; ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely. ar2 (line 3) raises it in the main thread and, uncaught, ends the process"
        );
    }

    /// PyTorch 2.11's main thread on an H200 (tests/data/torch/h200-torchrun/caught_timeout.run2.log):
    /// the shared timeout check's line, then the wait's own, both whole before c10dsim's words.
    #[test]
    fn a_waits_timeout_logs_the_timeout_checks_line_then_its_own() {
        let [caught, own] = wait_timeout_log(0, WORK, 500_999_999);
        assert_eq!(caught, timeout_caught(0, WORK, 500_999_999));
        let measured = format!("[Rank 0] Work {WORK} timed out in blocking wait.");
        assert!(own.starts_with(&format!("{measured} ")), "{own}");
    }

    #[test]
    fn a_waits_timeout_is_what_it_raises_then_where_and_what_follows() {
        let text =
            "[tensors]\nx = \"1MiB\"\n[[op]]\nall_reduce = \"x\"\nasync_op = true\nwork = \"w\"\n\
                    [[op]]\nlabel = \"w8\"\nwait = \"w\"\ntimeout_ms = 50\n";
        let scenario = crate::scenario::parse("wait.toml", text).unwrap();
        let wait = &scenario.ops[1];
        assert_eq!(
            wait_timeout_finding(2, WORK, 50_014_000, wait),
            format!("[Rank 2] Watchdog caught collective operation timeout: {WORK} ran for 50 milliseconds before timing out. w8 (line 7) raises it as DistBackendError once the main thread's abort of the communicator returned, and the raise stops the rank's program (R15)")
        );
        let caught = crate::scenario::parse("wait.toml", &format!("{text}catch = true\n")).unwrap();
        assert!(wait_timeout_finding(2, WORK, 50_014_000, &caught.ops[1])
            .ends_with("and the program catches it (catch = true) (R15)"));
    }

    #[test]
    fn a_timed_out_wait_s_abort_lasts_at_least_its_floor() {
        assert_eq!(wait_abort_floor_ns(50, 930), 980);
        assert_eq!(wait_abort_floor_ns(50, 0), 50);
        assert_eq!(wait_abort_floor_ns(u64::MAX, 930), u64::MAX);
    }
}
