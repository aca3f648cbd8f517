//! The recording fake [`Device`] the tests run the executor on: no GPU, every call written
//! down as text (the golden snapshots and the engine-equivalence test read it).

use crate::error::HwError;
use crate::exec::{CommCall, Device, Ev, Kernel, WatchedWork};
use crate::plan::GroupPlan;
use sim::lifetime::Place;
use sim::scenario::TensorId;
use sim::timeline::StreamRef;
use std::collections::VecDeque;

/// A recording device: every call is logged as text (the allocator's in `memory_calls`), host
/// time advances by 1 µs per call (sleeps by their length), an event's time is its record
/// time, and queries answer from a script (then `true`).
#[derive(Default)]
pub struct FakeDevice {
    pub calls: Vec<String>,
    pub now_ns: u64,
    pub event_times: Vec<u64>,
    pub query_answers: VecDeque<bool>,
    pub comms: Vec<String>,
    pub watched: Vec<WatchedWork>,
    pub aborted: bool,
    /// The allocator's calls, apart from the stream calls.
    pub memory_calls: Vec<String>,
}

impl FakeDevice {
    fn tick(&mut self, call: String) {
        self.now_ns += 1_000;
        self.calls.push(call);
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
        Ok(ev)
    }
    fn stream_wait(&mut self, stream: StreamRef, event: Ev) -> Result<(), HwError> {
        self.tick(format!("wait s{stream} e{event}"));
        Ok(())
    }
    fn query(&mut self, event: Ev) -> Result<bool, HwError> {
        let answer = self.query_answers.pop_front().unwrap_or(true);
        self.tick(format!("query e{event} {answer}"));
        Ok(answer)
    }
    fn event_sync(&mut self, event: Ev) -> Result<(), HwError> {
        self.tick(format!("event_sync e{event}"));
        Ok(())
    }
    fn stream_sync(&mut self, stream: StreamRef) -> Result<(), HwError> {
        self.tick(format!("stream_sync s{stream}"));
        Ok(())
    }
    fn device_sync(&mut self) -> Result<(), HwError> {
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
        call: CommCall,
    ) -> Result<(), HwError> {
        let what = match call {
            CommCall::Collective { collective, .. } => collective.key(),
            CommCall::Barrier => "barrier",
        };
        self.tick(format!("nccl s{stream} {what} {}", group.name));
        Ok(())
    }
    fn read_element(&mut self, stream: StreamRef, tensor: TensorId) -> Result<(), HwError> {
        self.tick(format!("item s{stream} t{tensor}"));
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
        None
    }
    fn abort_comms(&mut self) {
        self.aborted = true;
        self.calls.push("abort".into());
    }
    fn event_time_ns(&mut self, event: Ev) -> Result<u64, HwError> {
        Ok(self.event_times[event])
    }
    fn malloc(&mut self, segment: u32, bytes: u64, fill: bool) -> Result<(), HwError> {
        let how = if fill { " filled" } else { "" };
        self.memory_calls
            .push(format!("malloc s{segment} {bytes}{how}"));
        Ok(())
    }
    fn free_segment(&mut self, segment: u32, deferred: bool) {
        let how = if deferred { " deferred" } else { "" };
        self.memory_calls.push(format!("free s{segment}{how}"));
    }
    fn bind(&mut self, tensor: TensorId, place: Option<Place>) {
        let at = place.map(|p| format!("s{}+{}", p.segment, p.offset_bytes));
        self.memory_calls.push(format!("bind t{tensor} {at:?}"));
    }
}
