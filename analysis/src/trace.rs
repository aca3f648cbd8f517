//! Chrome trace event JSON, shaped like torch.profiler's export, so that a simulated run opens
//! in Perfetto (or chrome://tracing) beside a real one.
//!
//! One process row per rank ("rank N"); thread 0 is the host (Python main thread), thread
//! `1 + s` is stream `s`. Host calls and kernels are complete (`X`) events in microseconds;
//! every `cudaStreamWaitEvent` is a flow arrow from the event's record on its stream to the point
//! where the waiting stream was released; findings are instant events. The watchdog and the
//! heartbeat monitor of group `g` (R26, R28) are threads `1000 + 2g` and `1001 + 2g`, their
//! steps instant events and their dump wait a slice; steps of the main thread (store timeout,
//! blocking wait) are on thread 0.

use serde_json::{json, Value};
use sim::timeline::{KernelClass, ThreadKind, Timeline, WatchdogEvent};

fn us(ns: u64) -> f64 {
    ns as f64 / 1_000.0
}

/// Builds the trace of a Timeline.
pub fn chrome_trace(timeline: &Timeline) -> Value {
    let mut events: Vec<Value> = Vec::new();
    let mut flow_id: u64 = 0;
    for rank in &timeline.ranks {
        let pid = rank.rank;
        events.push(
            json!({"ph": "M", "name": "process_name", "pid": pid, "tid": 0,
            "args": {"name": format!("rank {}", rank.rank)}}),
        );
        events.push(
            json!({"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0,
            "args": {"sort_index": pid}}),
        );
        events.push(
            json!({"ph": "M", "name": "thread_name", "pid": pid, "tid": 0,
            "args": {"name": "host (python main thread)"}}),
        );
        for (index, stream) in rank.streams.iter().enumerate() {
            let priority = if stream.high_priority {
                ", high priority"
            } else {
                ""
            };
            events.push(
                json!({"ph": "M", "name": "thread_name", "pid": pid, "tid": index + 1,
                "args": {"name": format!("stream {index} ({}{priority})", stream.name)}}),
            );
        }
        for call in &rank.host {
            let op = &timeline.ops[call.op as usize];
            events.push(
                json!({"ph": "X", "cat": "cpu_op", "name": op.host_name, "pid": pid, "tid": 0,
                "ts": us(call.start_ns), "dur": us(call.end_ns - call.start_ns),
                "args": {"op": op.name, "line": op.line, "iteration": call.iteration}}),
            );
        }
        for kernel in &rank.kernels {
            let op = &timeline.ops[kernel.op as usize];
            let (name, category) = match kernel.class {
                KernelClass::Communication | KernelClass::Compute => (
                    op.kernel_name.clone().unwrap_or_else(|| op.name.clone()),
                    "kernel",
                ),
                KernelClass::Sleep => (
                    op.kernel_name.clone().unwrap_or_else(|| "delay".into()),
                    "kernel",
                ),
            };
            events.push(json!({"ph": "X", "cat": category, "name": name, "pid": pid,
                "tid": kernel.stream as usize + 1, "ts": us(kernel.start_ns),
                "dur": us(kernel.end_ns - kernel.start_ns),
                "args": {"op": op.name, "line": op.line, "iteration": kernel.iteration,
                    "stream": kernel.stream, "launched_at_us": us(kernel.enqueue_ns)}}));
        }
        for wait in &rank.stream_waits {
            let op = &timeline.ops[wait.op as usize];
            flow_id += 1;
            let source_tid = wait.source_stream as usize + 1;
            let waiting_tid = wait.waiting_stream as usize + 1;
            events.push(
                json!({"ph": "X", "cat": "cuda_runtime", "name": "cudaEventRecord",
                "pid": pid, "tid": source_tid, "ts": us(wait.source_ns), "dur": 0.0,
                "args": {"op": op.name, "iteration": wait.iteration}}),
            );
            events.push(
                json!({"ph": "X", "cat": "cuda_runtime", "name": "cudaStreamWaitEvent",
                "pid": pid, "tid": waiting_tid, "ts": us(wait.released_ns), "dur": 0.0,
                "args": {"op": op.name, "iteration": wait.iteration}}),
            );
            events.push(
                json!({"ph": "s", "cat": "stream_wait", "name": "cudaStreamWaitEvent",
                "id": flow_id, "pid": pid, "tid": source_tid, "ts": us(wait.source_ns)}),
            );
            events.push(json!({"ph": "f", "bp": "e", "cat": "stream_wait",
                "name": "cudaStreamWaitEvent", "id": flow_id, "pid": pid, "tid": waiting_tid,
                "ts": us(wait.released_ns)}));
        }
        for release in &rank.cache_releases {
            let op = &timeline.ops[release.op as usize];
            events.push(json!({"ph": "X", "cat": "cuda_runtime",
                "name": "cudaFree (release_cached_blocks)", "pid": pid, "tid": 0,
                "ts": us(release.host_start_ns),
                "dur": us(release.host_end_ns - release.host_start_ns),
                "args": {"op": op.name, "iteration": release.iteration,
                    "segments_freed": release.segments_freed,
                    "device_idle_us": release.device_idle_ns.map(us)}}));
        }
        for race in &rank.races {
            let tid = rank
                .streams
                .iter()
                .position(|s| s.name == race.later_stream)
                .map_or(0, |index| index + 1);
            events.push(json!({"ph": "i", "s": "t", "cat": "race",
                "name": format!("data race on {}", race.tensor), "pid": pid, "tid": tid,
                "ts": us(race.host_ns),
                "args": {"earlier_op": timeline.ops[race.earlier_op as usize].name,
                    "earlier_stream": race.earlier_stream,
                    "later_op": timeline.ops[race.later_op as usize].name,
                    "later_stream": race.later_stream, "iteration": race.iteration}}));
        }
        let mut named_threads = Vec::new();
        for record in timeline.watchdog.iter().filter(|r| r.rank == rank.rank) {
            let group = usize::from(record.group.unwrap_or(0));
            let (tid, thread) = match record.thread {
                ThreadKind::Main => (0, "main"),
                ThreadKind::Watchdog => (1000 + 2 * group, "pt_nccl_watchdg"),
                ThreadKind::HeartbeatMonitor => (1001 + 2 * group, "pt_nccl_heartbt"),
            };
            if tid != 0 && !named_threads.contains(&tid) {
                named_threads.push(tid);
                let group_name = &timeline.scenario.groups[group];
                events.push(
                    json!({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
                    "args": {"name": format!("{thread} (group {group_name})")}}),
                );
            }
            events.push(
                json!({"ph": "i", "s": "t", "cat": "watchdog", "name": record.event,
                "pid": pid, "tid": tid, "ts": us(record.at_ns),
                "args": {"message": record.message}}),
            );
            // R27: the watchdog sleeps for the dumps until it acts on the error.
            let acted = timeline.watchdog.iter().find(|r| {
                (r.rank, r.group, r.thread) == (record.rank, record.group, record.thread)
                    && r.at_ns > record.at_ns
                    && matches!(
                        r.event,
                        WatchdogEvent::NoHandling | WatchdogEvent::Abort | WatchdogEvent::Exit
                    )
            });
            if let (WatchdogEvent::DumpSignal, Some(acted)) = (record.event, acted) {
                events.push(
                    json!({"ph": "X", "cat": "watchdog", "name": "dump wait (4 x TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC)",
                    "pid": pid, "tid": tid, "ts": us(record.at_ns),
                    "dur": us(acted.at_ns - record.at_ns)}),
                );
            }
        }
        for mark in &rank.marks {
            let name = &timeline.scenario.marks[mark.mark as usize];
            events.push(
                json!({"ph": "i", "s": "t", "cat": "mark", "name": name, "pid": pid,
                "tid": 0, "ts": us(mark.host_ns), "args": {"gpu_us": us(mark.gpu_ns),
                "iteration": mark.iteration}}),
            );
        }
    }
    for finding in &timeline.findings {
        events.push(json!({"ph": "i", "s": "g", "cat": "finding",
            "name": format!("{:?}", finding.kind), "pid": finding.rank.unwrap_or(0), "tid": 0,
            "ts": 0.0, "args": {"message": finding.message}}));
    }
    json!({
        "schemaVersion": 1,
        "displayTimeUnit": "ms",
        "traceEvents": events,
        "otherData": {
            "producer": "c10dsim",
            "source": timeline.source,
            "scenario": timeline.scenario.name,
            "seed": timeline.scenario.seed,
            "machine": timeline.machine,
        },
    })
}
