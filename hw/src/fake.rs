//! The recording fake [`Device`] the tests run the executor on: no GPU, every call written
//! down as text (the golden snapshots and the engine-equivalence test read it). It also plays
//! a GPU that never finishes a stand-in collective of [`FOREVER_NS`] and the watchdog that
//! then gives its verdict (R26), so that fault runs are tested without a GPU.

use crate::error::HwError;
use crate::exec::{CommCall, Device, Ev, Kernel, WatchedWork, FOREVER_NS};
use crate::options::{Layout, StandIn};
use crate::plan::{GroupPlan, RankPlan};
use crate::watchdog::comm_error_finding;
use sim::lifetime::Place;
use sim::pg::work::{
    async_error_ns, timeout_caught, timeout_deadline_ns, watchdog_runs, NcclAsyncError,
    WATCHDOG_POLL_NS,
};
use sim::scenario::Scenario;
use sim::scenario::TensorId;
use sim::timeline::StreamRef;
use std::collections::{HashSet, VecDeque};

/// A recording device: every call is logged as text (the allocator's in `memory_calls`), host
/// time advances by 1 µs per call (sleeps by their length), an event's time is its record
/// time, and queries answer from a script (then `true`) — except for events that never fire:
/// those behind a [`FOREVER_NS`] kernel on their stream, or behind a wait on such an event.
pub struct FakeDevice {
    pub calls: Vec<String>,
    pub now_ns: u64,
    pub event_times: Vec<u64>,
    pub query_answers: VecDeque<bool>,
    pub comms: Vec<String>,
    pub watched: Vec<WatchedWork>,
    /// The groups whose communicator was aborted, in order.
    pub aborted: Vec<usize>,
    /// The allocator's calls, apart from the stream calls.
    pub memory_calls: Vec<String>,
    /// Streams stuck behind a kernel that never ends.
    pub hung_streams: HashSet<StreamRef>,
    /// Events that never fire.
    pub never_fired: HashSet<Ev>,
    /// Real NCCL async errors, as a failed network gives them: the group whose communicator
    /// reports `error` from `at_ns` on. Its collectives never complete; one called from then on
    /// is refused ([`HwError::CommunicatorFailed`]).
    pub comm_errors: Vec<CommError>,
    /// The GPU's memory, if limited: a segment that does not fit beside the ones held is
    /// refused as `cuMemAlloc` refuses it ([`HwError::OutOfMemory`]).
    pub gpu_bytes: Option<u64>,
    /// The bytes of each segment held, by segment.
    pub segment_bytes: Vec<u64>,
    /// Whether ProcessGroupNCCL's watchdog thread runs (`sim::pg::work::watchdog_runs`, true
    /// by default; not under blocking wait, R15). Without it nothing gives a verdict on work
    /// that never ends: a polling `wait()` alone meets it, and a host call blocked on it
    /// blocks for good, as on a GPU.
    pub watchdog_runs: bool,
}

impl Default for FakeDevice {
    fn default() -> FakeDevice {
        FakeDevice {
            calls: Vec::new(),
            now_ns: 0,
            event_times: Vec::new(),
            query_answers: VecDeque::new(),
            comms: Vec::new(),
            watched: Vec::new(),
            aborted: Vec::new(),
            memory_calls: Vec::new(),
            hung_streams: HashSet::new(),
            never_fired: HashSet::new(),
            comm_errors: Vec::new(),
            gpu_bytes: None,
            segment_bytes: Vec::new(),
            watchdog_runs: true,
        }
    }
}

/// A communicator's NCCL async error on the fake device.
#[derive(Debug, Clone, Copy)]
pub struct CommError {
    pub group: usize,
    pub at_ns: u64,
    pub error: NcclAsyncError,
}

impl FakeDevice {
    /// A device whose GPU is busy with a backlog: each Work is still running at every one of
    /// the first 1,000 queries, so a polling wait behind it times out (the catalogue's caught
    /// timeouts, whose GPU sleep holds the Work past the wait's timeout), until an abort of a
    /// communicator, which returns once the device drained (R15): every query then answers
    /// that the Work is done.
    pub fn behind_a_backlog() -> FakeDevice {
        FakeDevice {
            query_answers: std::iter::repeat_n(false, 1000).collect(),
            ..FakeDevice::default()
        }
    }

    /// The device a scenario's rank 0 runs on in the catalogue tests: behind a backlog where
    /// the program catches what a timed-out wait raises, else idle; with a watchdog where the
    /// scenario's environment starts one.
    pub fn for_catalogue(scenario: &Scenario) -> FakeDevice {
        let device = if scenario.ops.iter().any(|op| op.catch) {
            FakeDevice::behind_a_backlog()
        } else {
            FakeDevice::default()
        };
        device.for_environment_of(scenario)
    }

    /// This device with the watchdog `scenario`'s environment starts, or none
    /// (`sim::pg::work::watchdog_runs`, R15).
    pub fn for_environment_of(self, scenario: &Scenario) -> FakeDevice {
        FakeDevice {
            watchdog_runs: watchdog_runs(&scenario.env),
            ..self
        }
    }

    fn tick(&mut self, call: String) {
        self.now_ns += 1_000;
        self.calls.push(call);
    }

    /// An event's time, `None` if it never fired.
    pub fn time_of(&self, event: Ev) -> Option<u64> {
        (!self.never_fired.contains(&event)).then(|| self.event_times[event])
    }

    /// The watchdog's verdict on the Works that never complete: at its first 100-ms poll past
    /// the first communicator's async error, injected one (both checked first) or timeout
    /// (counted from the enqueue); none where no watchdog runs.
    fn verdict(&self) -> Option<(u64, HwError)> {
        if !self.watchdog_runs {
            return None;
        }
        let next_poll = |at_ns: u64| at_ns.div_ceil(WATCHDOG_POLL_NS) * WATCHDOG_POLL_NS;
        let stuck = || {
            self.watched
                .iter()
                .filter(|work| self.never_fired.contains(&work.end))
        };
        let mut verdict: Option<(u64, HwError)> = None;
        for comm in &self.comm_errors {
            let at_ns = next_poll(comm.at_ns);
            if let Some(error) = comm_error_finding(stuck(), comm.group, comm.error) {
                if verdict.as_ref().is_none_or(|(best, _)| at_ns < *best) {
                    verdict = Some((at_ns, error));
                }
            }
        }
        for work in stuck() {
            let candidates = [
                work.async_error.as_ref().map(|(after_ns, verdict)| {
                    let at_ns = next_poll(async_error_ns(work.enqueue_ns, *after_ns));
                    (at_ns, verdict.clone())
                }),
                Some({
                    let at_ns = next_poll(timeout_deadline_ns(work.enqueue_ns, work.timeout_ns));
                    let ran_ns = at_ns - work.enqueue_ns;
                    let finding = timeout_caught(work.rank, &work.description, ran_ns);
                    let work = Some(work.end);
                    (at_ns, HwError::Timeout { work, finding })
                }),
            ];
            for (at_ns, error) in candidates.into_iter().flatten() {
                if verdict.as_ref().is_none_or(|(best, _)| at_ns < *best) {
                    verdict = Some((at_ns, error));
                }
            }
        }
        verdict
    }

    /// A host call that blocks on work that never ends returns at the watchdog's verdict.
    fn block_until_verdict(&mut self, call: String) -> Result<(), HwError> {
        self.tick(call);
        let (at_ns, error) = self.verdict().ok_or_else(|| {
            HwError::Unsupported("the fake host would block forever: no watchdog verdict".into())
        })?;
        self.now_ns = self.now_ns.max(at_ns);
        self.calls.push(format!("watchdog verdict at {at_ns}ns"));
        Err(error)
    }
}

impl Device for FakeDevice {
    fn now_ns(&self) -> u64 {
        self.now_ns
    }
    fn record(&mut self, stream: StreamRef) -> Result<Ev, HwError> {
        let ev = self.event_times.len();
        self.tick(format!("record s{stream} e{ev}"));
        self.event_times.push(self.now_ns);
        if self.hung_streams.contains(&stream) {
            self.never_fired.insert(ev);
        }
        Ok(ev)
    }
    fn stream_wait(&mut self, stream: StreamRef, event: Ev) -> Result<(), HwError> {
        self.tick(format!("wait s{stream} e{event}"));
        if self.never_fired.contains(&event) {
            self.hung_streams.insert(stream);
        }
        Ok(())
    }
    fn query(&mut self, event: Ev) -> Result<bool, HwError> {
        if self.never_fired.contains(&event) {
            self.tick(format!("query e{event} false"));
            return Ok(false);
        }
        let answer = self.query_answers.pop_front().unwrap_or(true);
        self.tick(format!("query e{event} {answer}"));
        Ok(answer)
    }
    fn event_sync(&mut self, event: Ev) -> Result<(), HwError> {
        let call = format!("event_sync e{event}");
        if self.never_fired.contains(&event) {
            return self.block_until_verdict(call);
        }
        self.tick(call);
        Ok(())
    }
    fn stream_sync(&mut self, stream: StreamRef) -> Result<(), HwError> {
        let call = format!("stream_sync s{stream}");
        if self.hung_streams.contains(&stream) {
            return self.block_until_verdict(call);
        }
        self.tick(call);
        Ok(())
    }
    fn device_sync(&mut self) -> Result<(), HwError> {
        if !self.hung_streams.is_empty() {
            return self.block_until_verdict("device_sync".into());
        }
        self.tick("device_sync".into());
        Ok(())
    }
    fn launch(&mut self, stream: StreamRef, kernel: Kernel) -> Result<(), HwError> {
        let what = match kernel {
            Kernel::Spin {
                duration_ns,
                blocks,
                own_sm,
            } => format!(
                "spin {duration_ns}ns x{blocks}{}",
                if own_sm { " own" } else { "" }
            ),
            Kernel::Gemm { m, n, k, dtype } => format!("gemm {m}x{n}x{k} {}", dtype.as_str()),
        };
        self.tick(format!("launch s{stream} {what}"));
        if matches!(kernel, Kernel::Spin { duration_ns, .. } if duration_ns == FOREVER_NS) {
            self.hung_streams.insert(stream);
        }
        Ok(())
    }
    fn init_comm(&mut self, group: &GroupPlan) -> Result<(), HwError> {
        if !self.comms.contains(&group.name) {
            self.comms.push(group.name.clone());
            self.tick(format!("init_comm {}", group.name));
        }
        Ok(())
    }
    fn collective(
        &mut self,
        stream: StreamRef,
        group: &GroupPlan,
        call: CommCall<'_>,
    ) -> Result<(), HwError> {
        let what = match call {
            CommCall::Collective { collective, .. } => collective.key().to_string(),
            CommCall::Barrier => "barrier".to_string(),
            CommCall::Batch { transfers } => {
                let each: Vec<String> = transfers
                    .iter()
                    .map(|t| {
                        let verb = if t.send { "send" } else { "recv" };
                        format!("{verb} t{} {:+}", t.tensor, t.shift)
                    })
                    .collect();
                format!("batch [{}]", each.join(", "))
            }
        };
        self.tick(format!("nccl s{stream} {what} {}", group.name));
        if let Some(comm) = self.comm_errors.iter().find(|c| c.group == group.group) {
            if comm.at_ns <= self.now_ns {
                return Err(HwError::CommunicatorFailed {
                    call: "ncclCollective".into(),
                    error: comm.error,
                });
            }
            self.hung_streams.insert(stream);
        }
        Ok(())
    }
    fn read_element(&mut self, stream: StreamRef, tensor: TensorId) -> Result<(), HwError> {
        let call = format!("item s{stream} t{tensor}");
        if self.hung_streams.contains(&stream) {
            return self.block_until_verdict(call);
        }
        self.tick(call);
        Ok(())
    }
    fn host_sleep(&mut self, duration_ns: u64) {
        self.now_ns += duration_ns;
        self.calls.push(format!("sleep {duration_ns}"));
    }
    fn watch(&mut self, work: WatchedWork) {
        self.watched.push(work);
    }
    fn watchdog_failure(&mut self) -> Option<HwError> {
        self.verdict()
            .filter(|(at_ns, _)| *at_ns <= self.now_ns)
            .map(|(_, error)| error)
    }
    /// The abort ends the kernels that would never end (the fake device fails one group at a
    /// time): their streams and events go on.
    fn abort_comm(&mut self, group: usize) {
        self.aborted.push(group);
        self.calls.push(format!("abort g{group}"));
        self.query_answers.clear();
        self.hung_streams.clear();
        self.never_fired.clear();
    }
    fn watchdog_resumed(&mut self, group: usize) {
        self.calls.push(format!("watchdog resumed g{group}"));
        self.watched.retain(|work| work.group != group);
        self.comm_errors.retain(|comm| comm.group != group);
    }
    fn event_time_ns(&mut self, event: Ev) -> Result<u64, HwError> {
        Ok(self.event_times[event])
    }
    fn malloc(&mut self, segment: u32, bytes: u64, fill: bool) -> Result<(), HwError> {
        let how = if fill { " filled" } else { "" };
        self.memory_calls
            .push(format!("malloc s{segment} {bytes}{how}"));
        let held_bytes: u64 = self.segment_bytes.iter().sum();
        if self.gpu_bytes.is_some_and(|gpu| held_bytes + bytes > gpu) {
            let refusal = format!("cuMemAlloc of {bytes} B: CUDA_ERROR_OUT_OF_MEMORY");
            return Err(HwError::OutOfMemory(refusal));
        }
        let index = segment as usize;
        if self.segment_bytes.len() <= index {
            self.segment_bytes.resize(index + 1, 0);
        }
        self.segment_bytes[index] = bytes;
        Ok(())
    }
    fn free_segment(&mut self, segment: u32, deferred: bool) {
        let how = if deferred { " deferred" } else { "" };
        self.memory_calls.push(format!("free s{segment}{how}"));
        // A deferred segment is kept until the run ends.
        if !deferred {
            if let Some(bytes) = self.segment_bytes.get_mut(segment as usize) {
                *bytes = 0;
            }
        }
    }
    fn bind(&mut self, tensor: TensorId, place: Option<Place>) {
        let at = place.map(|p| format!("s{}+{}", p.segment, p.offset_bytes));
        self.memory_calls.push(format!("bind t{tensor} {at:?}"));
    }
}

/// The plan of rank 0 of `scenario` on one fake GPU: a scenario of several ranks runs as the
/// one-GPU model stand-in, as `c10dsim hw --downscale model` runs it (the golden snapshots, the
/// engine-equivalence test and the executor's catalogue test all use it).
pub fn rank0_plan(scenario: &Scenario) -> Result<RankPlan, HwError> {
    let layout = Layout {
        rank: 0,
        world: 1,
        device: 0,
        launched: false,
        stand_in: (scenario.cluster.ranks > 1).then_some(StandIn::Model),
    };
    RankPlan::new(scenario, &layout)
}

mod tests;
