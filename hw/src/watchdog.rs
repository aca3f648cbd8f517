//! The watchdog thread of R26: every 100 ms it checks each communicator for an NCCL async error,
//! found under its oldest pending Work as PyTorch words it (and each pending Work for one a
//! `[[fault]]` injects), then each pending Work for a timeout counted on the host clock from the enqueue, then for
//! completion. On an error or a timeout it gives its verdict, which ends the main thread's
//! blocked call and the run (R27, without the dump wait); the executor then aborts the
//! communicators of the failed Work's process group (its pairs' included) where
//! `TORCH_NCCL_ASYNC_ERROR_HANDLING` asks for it (1
//! TearDown, 2 CleanUpOnly; `Executor::verdict`). Under 2 the process lives: the verdict stays
//! until the executor's abort after the simulator's dump wait, a blocked call polled again
//! meanwhile, and [`Watchdog::resume`] then clears it. Not started under `TORCH_NCCL_BLOCKING_WAIT`
//! (R15), where the wait itself times out.

use crate::error::HwError;
use crate::exec::WatchedWork;
use crate::nccl::Communicator;
use cudarc::driver::{result, CudaContext, CudaEvent};
use sim::pg::work::{
    async_error_ns, async_exception, failed_by, timed_out, timeout_caught, NcclAsyncError,
    WATCHDOG_POLL_NS,
};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The watchdog's poll period (R26, docs/semantics.md "Defaults"; `sim::pg`'s).
pub const POLL: Duration = Duration::from_nanos(WATCHDOG_POLL_NS);

/// What the watchdog finds when the communicator of group `group` reports the NCCL async error
/// `error`: PyTorch's line (`checkAndSetException`, R27) for the oldest of the `pending` Works
/// on it, the one its loop meets first, in the simulator's words for an injected error. None
/// while no Work of the group is pending: the watchdog sees a communicator's error only through
/// a Work (a later call on it raises instead).
pub fn comm_error_finding<'a>(
    pending: impl IntoIterator<Item = &'a WatchedWork>,
    group: usize,
    error: NcclAsyncError,
) -> Option<HwError> {
    let work = pending.into_iter().find(|work| work.group == group)?;
    Some(HwError::AsyncError {
        work: Some(work.end),
        finding: async_exception(work.rank, &work.description, error),
    })
}

struct Shared {
    events: Arc<Vec<CudaEvent>>,
    /// The Works not seen complete.
    pending: Mutex<Vec<WatchedWork>>,
    /// Each communicator, with its group.
    comms: Mutex<Vec<(usize, Arc<Communicator>)>>,
    origin: Instant,
    stop: AtomicBool,
    failure: Mutex<Option<HwError>>,
}

impl Shared {
    fn fail(&self, error: HwError) {
        let mut failure = self.failure.lock().unwrap_or_else(|p| p.into_inner());
        if failure.is_none() {
            *failure = Some(error);
        }
    }

    fn check(&self) {
        let comms: Vec<(usize, Arc<Communicator>)> =
            self.comms.lock().unwrap_or_else(|p| p.into_inner()).clone();
        for (group, comm) in &comms {
            let found = match comm.async_error() {
                Ok(None) => None,
                Ok(Some(error)) => {
                    let pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
                    comm_error_finding(pending.iter(), *group, error)
                }
                Err(error) => Some(error),
            };
            if let Some(error) = found {
                self.fail(error);
                return;
            }
        }
        let now_ns = self.origin.elapsed().as_nanos() as u64;
        let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        // An injected async error (a `[[fault]]`) is found like a real one: first.
        let injected = pending.iter().find_map(|work| {
            let (after_ns, verdict) = work.async_error.as_ref()?;
            let error_ns = async_error_ns(work.enqueue_ns, *after_ns);
            failed_by(Some(error_ns), now_ns).then(|| verdict.clone())
        });
        if let Some(verdict) = injected {
            drop(pending);
            self.fail(verdict);
            return;
        }
        let mut caught = None;
        pending.retain(|work| {
            // SAFETY: the event belongs to the pool, alive as long as `Shared`.
            let done = unsafe { result::event::query(self.events[work.end].cu_event()) };
            if done.is_ok() {
                return false;
            }
            let ran_ns = now_ns.saturating_sub(work.enqueue_ns);
            if timed_out(work.enqueue_ns, work.timeout_ns, now_ns) && caught.is_none() {
                caught = Some(HwError::Timeout {
                    work: Some(work.end),
                    finding: timeout_caught(work.rank, &work.description, ran_ns),
                });
            }
            true
        });
        drop(pending);
        if let Some(verdict) = caught {
            self.fail(verdict);
        }
    }
}

pub struct Watchdog {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl Watchdog {
    pub fn start(
        ctx: Arc<CudaContext>,
        events: Arc<Vec<CudaEvent>>,
        origin: Instant,
    ) -> Result<Watchdog, HwError> {
        let shared = Arc::new(Shared {
            events,
            pending: Mutex::new(Vec::new()),
            comms: Mutex::new(Vec::new()),
            origin,
            stop: AtomicBool::new(false),
            failure: Mutex::new(None),
        });
        let thread_shared = shared.clone();
        let thread = std::thread::Builder::new()
            .name("c10dsim-watchdog".into())
            .spawn(move || {
                if let Err(error) = ctx.bind_to_thread() {
                    thread_shared.fail(HwError::cuda("cuCtxSetCurrent (watchdog)", error));
                    return;
                }
                let step = Duration::from_millis(10);
                while !thread_shared.stop.load(Ordering::Acquire) {
                    let mut slept = Duration::ZERO;
                    while slept < POLL && !thread_shared.stop.load(Ordering::Acquire) {
                        std::thread::sleep(step);
                        slept += step;
                    }
                    thread_shared.check();
                }
            })
            .map_err(|error| {
                HwError::BadOptions(format!("cannot start the watchdog thread: {error}"))
            })?;
        Ok(Watchdog {
            shared,
            thread: Some(thread),
        })
    }

    pub fn watch(&self, work: WatchedWork) {
        self.shared
            .pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(work);
    }

    pub fn add_comm(&self, group: usize, comm: Arc<Communicator>) {
        self.shared
            .comms
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((group, comm));
    }

    /// After its error handling aborted the communicators of `group` and left the process
    /// running (`TORCH_NCCL_ASYNC_ERROR_HANDLING=2`, R27): the verdict is handled, and the
    /// group's Works and aborted communicator are no longer checked; the watchdog goes on.
    pub fn resume(&self, group: usize) {
        self.shared
            .pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|work| work.group != group);
        self.shared
            .comms
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|(comm_group, _)| *comm_group != group);
        *self
            .shared
            .failure
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = None;
    }

    pub fn failure(&self) -> Option<HwError> {
        self.shared
            .failure
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        if let Some(thread) = self.thread.take() {
            // A panicked watchdog has nothing more to report at shutdown.
            let _ = thread.join();
        }
    }
}
