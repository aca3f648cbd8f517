//! The executor against the recording fake device: which GPU calls each step becomes, faults,
//! the run log and the Timeline's assembly, without a GPU.
//!
//! About 1,560 lines in one file: every test drives the same `Executor` over the same fake
//! device and shares its helpers (`run_fake_log`, `fake_and_simulated`); a split by step kind
//! would scatter those comparisons with the simulator.

use super::*;
use crate::fake::{CommError, FakeDevice};
use crate::options::Layout;

/// Rank 0 of a one-process launch on device 0, with `stand_in` for its peers' collectives.
fn rank0_layout(stand_in: Option<StandIn>) -> Layout {
    Layout {
        rank: 0,
        world: 1,
        device: 0,
        launched: false,
        stand_in,
    }
}

pub fn run_fake(text: &str, device: &mut FakeDevice) -> Result<RankTimeline, HwError> {
    let scenario = sim::scenario::parse("fake.toml", text).unwrap();
    let layout = rank0_layout(None);
    let plan = RankPlan::new(&scenario, &layout)?;
    let mut executor = Executor::new(&scenario, &plan, device);
    executor.setup()?;
    let log = executor.run()?;
    log.resolve(&plan, |ev| Ok(device.time_of(ev)))
}

/// The log of a run on the fake device that must end early, with its one finding.
fn run_fake_log(text: &str, device: &mut FakeDevice, stand_in: Option<StandIn>) -> RunLog {
    let scenario = sim::scenario::parse("fake.toml", text).unwrap();
    let layout = rank0_layout(stand_in);
    let plan = RankPlan::new(&scenario, &layout).unwrap();
    let mut executor = Executor::new(&scenario, &plan, device);
    executor.setup().unwrap();
    let log = executor.run().unwrap();
    assert!(log.ended_early);
    log
}

fn only_finding(text: &str, device: &mut FakeDevice) -> Finding {
    let log = run_fake_log(text, device, None);
    assert_eq!(log.findings.len(), 1, "{:?}", log.findings);
    log.findings[0].clone()
}

/// A batch of sends and receives is one NCCL call of all its transfers (R25), on the group's
/// stream, and the batch's one Work waits as any other.
#[test]
fn batch_isend_irecv_is_one_call_of_every_transfer() {
    let text = r#"
[cluster]
ranks = 2
[tensors]
kv = "1MiB"
kv_next = "1MiB"
[[op]]
batch_isend_irecv = [{ send = "kv", shift = 1 }, { recv = "kv_next", shift = -1 }]
work = "exchange"
[[op]]
wait = "exchange"
"#;
    let mut device = FakeDevice::default();
    let rank = run_fake(text, &mut device).unwrap();
    let batches: Vec<&String> = device
        .calls
        .iter()
        .filter(|c| c.contains("batch"))
        .collect();
    assert_eq!(
        batches,
        ["nccl s1 batch [send t0 +1, recv t1 -1] world"],
        "{:?}",
        device.calls
    );
    assert_eq!(rank.collectives.len(), 1);
    assert_eq!(rank.collectives[0].bytes, 1 << 20);
    assert!(rank.collectives[0].wait.is_some());
}

const ASYNC: &str = r#"
[cluster]
ranks = 1
[tensors]
grad = "1MiB"
[streams]
side = {}
[[op]]
all_reduce = "grad"
async_op = true
work = "w"
[[op]]
set_stream = "side"
[[op]]
wait = "w"
[[op]]
is_completed = "w"
"#;

#[test]
fn the_executor_runs_the_process_groups_steps_and_nothing_else() {
    let text = ASYNC.replace("[tensors]", "[groups.world]\neager_init = true\n[tensors]");
    let scenario = sim::scenario::parse("fake.toml", &text).unwrap();
    let layout = rank0_layout(None);
    let plan = RankPlan::new(&scenario, &layout).unwrap();
    let mut device = FakeDevice::default();
    let mut executor = Executor::new(&scenario, &plan, &mut device);
    executor.setup().unwrap();
    executor.run().unwrap();
    let mut pg = ProcessGroupNccl::new(&scenario, 0);
    let mut expected = Vec::new();
    pg.prologue(&scenario, &mut expected);
    for op in &scenario.ops {
        pg.before_op(&scenario, 0, op, &mut expected);
        pg.op(&scenario, op, &mut expected).unwrap();
    }
    assert_eq!(executor.executed(), expected);
    assert!(expected.len() > scenario.ops.len());
    // R8, eager: pg's prologue created the communicator before the program; no
    // collective bootstraps it again.
    assert_eq!(expected[0], Step::EagerInit { group: 0 });
    assert!(!expected
        .iter()
        .any(|step| matches!(step, Step::InitComm { group: 0, .. })));
    assert_eq!(device.calls[0], "init_comm world");
}

#[test]
fn async_all_reduce_is_r10_and_wait_is_r12() {
    let mut device = FakeDevice::default();
    let rank = run_fake(ASYNC, &mut device).unwrap();
    // Streams: default 0, side 1, nccl:world 2.
    assert_eq!(
        device.calls,
        [
            "init_comm world",
            "device_sync", // the process's first communicator then waits for the device (R8)
            "record s0 e0", // input-ready on the current stream (R10a)
            "wait s2 e0",  // syncStream
            "record s2 e1", // release = kernel start
            "nccl s2 all_reduce world",
            "record s2 e2", // end event (R10d)
            "wait s1 e2",   // wait() blocks the stream current at the call (R12)
            "record s1 e3",
            "query e2 true", // completed_at_return
            "query e2 true", // is_completed (R13)
            "device_sync",
        ]
    );
    assert_eq!(device.watched.len(), 1, "R10e: handed to the watchdog");
    let c = &rank.collectives[0];
    assert_eq!(
        (c.call_stream, c.run_stream, c.seq, c.async_op),
        (0, 2, 1, true)
    );
    let wait = c.wait.unwrap();
    assert_eq!((wait.op, wait.stream), (2, 1));
    assert_eq!(rank.stream_waits.len(), 2);
    assert_eq!(rank.stream_waits[1].source_stream, 2);
    assert_eq!(rank.stream_waits[1].waiting_stream, 1);
    assert_eq!(rank.kernels[0].class, KernelClass::Communication);
    assert_eq!(rank.queries.len(), 1);
    assert_eq!(rank.host.len(), 4);
    assert_eq!(c.data_start_ns, c.kernel_start_ns);
    assert_eq!(c.last_rank, None);
}

#[test]
fn a_timed_work_starts_at_its_start_event_r6() {
    // Under TORCH_NCCL_ENABLE_TIMING the kernel is timed from the start event recorded right
    // before it, so the record's Work start is its kernel start; untimed, there is none.
    let mut device = FakeDevice::default();
    let untimed = run_fake(ASYNC, &mut device).unwrap();
    assert_eq!(untimed.collectives[0].work_start_ns, None);
    let timed_text = format!("[env]\nTORCH_NCCL_ENABLE_TIMING = 1\n{ASYNC}");
    let mut device = FakeDevice::default();
    let timed = run_fake(&timed_text, &mut device).unwrap();
    let c = &timed.collectives[0];
    assert_eq!(c.work_start_ns, Some(c.kernel_start_ns));
    assert_eq!(c.duration_ns(), (c.end_ns - c.kernel_start_ns) as i64);
}

#[test]
fn sync_collective_differs_by_profile() {
    let text = r#"
[cluster]
ranks = 1
[tensors]
grad = "1MiB"
[[op]]
all_reduce = "grad"
"#;
    let mut v2_12 = FakeDevice::default();
    let rank = run_fake(text, &mut v2_12).unwrap();
    assert_eq!(
        v2_12.calls,
        [
            "init_comm world",
            "device_sync", // the process's first communicator then waits for the device (R8)
            "record s0 e0",
            "nccl s0 all_reduce world", // R11: on the current stream
            "record s0 e1",
            "device_sync"
        ]
    );
    assert_eq!(rank.collectives[0].run_stream, 0);
    assert!(rank.collectives[0].wait.is_none());
    assert_eq!(v2_12.watched.len(), 1, "the watchdog still tracks it (R11)");

    let mut v2_5 = FakeDevice::default();
    let rank = run_fake(&format!("torch = \"2.5\"\n{text}"), &mut v2_5).unwrap();
    assert_eq!(
        v2_5.calls,
        [
            "init_comm world",
            "device_sync", // the process's first communicator then waits for the device (R8)
            "record s0 e0",
            "wait s1 e0",
            "record s1 e1",
            "nccl s1 all_reduce world",
            "record s1 e2",
            "wait s0 e2", // the wrapper's wait()
            "record s0 e3",
            "query e2 true",
            "device_sync"
        ]
    );
    let c = &rank.collectives[0];
    assert_eq!(c.run_stream, 1);
    assert_eq!(
        c.wait.unwrap().op,
        0,
        "the implicit wait names the collective"
    );
}

#[test]
fn an_async_barriers_wait_syncs_the_current_stream_only_if_its_work_is_unfinished_r14() {
    let text = "[cluster]\nranks = 1\n[[op]]\nbarrier = true\nasync_op = true\nwork = \"b\"\n[[op]]\nwait = \"b\"\n";
    let calls = |first_query: bool| {
        let mut device = FakeDevice {
            query_answers: [first_query].into(),
            ..FakeDevice::default()
        };
        let rank = run_fake(text, &mut device).unwrap();
        let barrier = &rank.collectives[0];
        assert!(barrier.async_op);
        assert_eq!((barrier.call_stream, barrier.run_stream), (0, 1));
        assert_eq!(barrier.wait.map(|w| w.op), Some(1));
        device.calls[2..].to_vec()
    };
    let unfinished = [
        "device_sync", // no tensor made before: the first fill waits for the device (R14)
        "record s0 e0",
        "wait s1 e0",
        "record s1 e1",
        "nccl s1 barrier world",
        "record s1 e2",
        "wait s0 e2",
        "record s0 e3",
        "query e2 false", // is_completed(): not yet, so the host synchronises the stream
        "stream_sync s0",
        "query e2 true", // the wait's record: completed at its return
        "device_sync",
    ];
    assert_eq!(calls(false), unfinished);
    let completed: Vec<&str> = (unfinished.iter().copied())
        .filter(|&c| c != "stream_sync s0")
        .map(|c| {
            if c == "query e2 false" {
                "query e2 true"
            } else {
                c
            }
        })
        .collect();
    assert_eq!(calls(true), completed);
}

#[test]
fn blocking_wait_polls_with_the_profile_interval() {
    let text = ASYNC.replace(
        "[cluster]",
        "[env]\nTORCH_NCCL_BLOCKING_WAIT = 1\n[cluster]",
    );
    let mut device = FakeDevice {
        query_answers: [false, false, false].into_iter().collect(),
        ..FakeDevice::default()
    };
    let rank = run_fake(&text, &mut device).unwrap();
    let sleeps = device
        .calls
        .iter()
        .filter(|c| c.as_str() == "sleep 1000000")
        .count();
    assert_eq!(sleeps, 3, "R15: 1 ms polls under 2.12");
    let wait = rank.collectives[0].wait.unwrap();
    let host_ns = wait.host_end_ns - wait.host_start_ns;
    assert!((3_000_000..3_100_000).contains(&host_ns), "{host_ns}");
    assert!(wait.completed_at_return);
}

#[test]
fn blocking_wait_times_out_and_aborts() {
    let text = ASYNC.replace("wait = \"w\"", "wait = \"w\"\ntimeout_ms = 3");
    let mut device = FakeDevice {
        query_answers: std::iter::repeat_n(false, 100).collect(),
        ..FakeDevice::default()
    };
    let findings = run_fake_log(&text, &mut device, None).findings;
    let finding = &findings[0];
    assert_eq!(finding.kind, FindingKind::WaitTimeout);
    // The watchdog runs under `wait(timeout)`: it finds the aborted communicator's error.
    assert_eq!(findings[1].kind, FindingKind::AsyncError);
    assert_eq!(findings.len(), 2, "{findings:?}");
    // The wait() op raised (as the simulator's finding names it).
    assert_eq!((finding.op, finding.iteration), (Some(2), Some(0)));
    // The stream current at the wait, as the simulator's finding names it.
    assert_eq!(finding.stream.as_deref(), Some("side"));
    assert!(finding.message.contains("SeqNum=1"), "{}", finding.message);
    assert_eq!(device.aborted, [0], "the world group's communicator");
    let sleeps = device
        .calls
        .iter()
        .filter(|c| c.starts_with("sleep"))
        .count();
    assert_eq!(sleeps, 3, "gave up at the third 1 ms poll, at 3 ms");
}

/// A wait's timeout aborts the Work's process group only (R15, as PyTorch and the simulator's
/// `abort_communicators` do): a subgroup's communicator, created before, is left running.
#[test]
fn a_wait_timeout_aborts_the_works_group_only() {
    let text = ASYNC
        .replace("wait = \"w\"", "wait = \"w\"\ntimeout_ms = 3")
        .replace("[tensors]", "[groups]\nsub = { ranks = [0] }\n[tensors]")
        .replace(
            "[[op]]\nall_reduce",
            "[[op]]\nall_reduce = \"grad\"\ngroup = \"sub\"\n[[op]]\nall_reduce",
        );
    let scenario = sim::scenario::parse("fake.toml", &text).unwrap();
    let group_of = |name: &str| scenario.groups.iter().position(|g| g.name == name).unwrap();
    let mut device = FakeDevice {
        query_answers: std::iter::repeat_n(false, 100).collect(),
        ..FakeDevice::default()
    };
    let findings = run_fake_log(&text, &mut device, None).findings;
    let kinds: Vec<_> = findings.iter().map(|finding| finding.kind).collect();
    // The watchdog runs under `wait(timeout)`: it finds the aborted communicator's error.
    assert_eq!(kinds, [FindingKind::WaitTimeout, FindingKind::AsyncError]);
    assert_eq!(device.comms, ["sub", "world"]);
    assert_eq!(device.aborted, [group_of("world")]);
}

#[test]
fn barrier_item_marks_events_and_kernels() {
    let text = r#"
repeat = 2
warmup = 1
[cluster]
ranks = 1
[tensors]
x = { size = "4KiB", dtype = "bf16" }
[streams]
side = {}
[[op]]
mark = "a"
[[op]]
gemm = [256, 256, 256]
[[op]]
record_event = "e"
[[op]]
wait_event = "e"
stream = "side"
[[op]]
kernel = { us = 100, sms = 8 }
stream = "side"
[[op]]
gpu_sleep_us = 50
[[op]]
barrier = true
[[op]]
item = "x"
[[op]]
host_sleep_us = 20
[[op]]
event_sync = "e"
[[op]]
stream_sync = "side"
[[op]]
device_sync = true
"#;
    let mut device = FakeDevice::default();
    let rank = run_fake(text, &mut device).unwrap();
    let first: Vec<&str> = device.calls.iter().take(20).map(String::as_str).collect();
    assert_eq!(
        first,
        [
            "record s0 e0", // mark
            "record s0 e1", // gemm start
            "launch s0 gemm 256x256x256 bf16",
            "record s0 e2",
            "record s0 e3", // record_event
            "wait s1 e3",   // wait_event on side
            "record s1 e4",
            "record s1 e5",
            "launch s1 spin 100000ns x8 own",
            "record s1 e6",
            "record s0 e7",
            "launch s0 spin 50000ns x1",
            "record s0 e8",
            "init_comm world", // barrier: on the current stream, then its stream sync (R14)
            "device_sync",     // the process's first communicator then waits for the device (R8)
            "record s0 e9",
            "nccl s0 barrier world",
            "record s0 e10",
            "stream_sync s0",
            "item s0 t0",
        ]
    );
    assert!(device.calls.contains(&"item s0 t0".to_string()));
    assert!(device.calls.contains(&"sleep 20000".to_string()));
    assert!(device.calls.contains(&"event_sync e3".to_string()));
    assert!(device.calls.contains(&"stream_sync s1".to_string()));
    assert_eq!(rank.marks.len(), 2);
    assert_eq!(rank.host.len(), 2 * 12);
    assert_eq!(rank.kernels.len(), 2 * 4);
    let barrier = &rank.collectives[0];
    assert!(!barrier.async_op);
    assert_eq!(barrier.bytes, 4, "one f32, as ProcessGroupNCCL::barrier's");
    assert_eq!((barrier.call_stream, barrier.run_stream), (0, 0));
    assert_eq!(
        barrier.wait, None,
        "no Work: the stream sync is the barrier's own"
    );
    assert_eq!(
        rank.collectives[1].seq, 2,
        "seq counts per group across iterations"
    );
}

#[test]
fn stand_ins_replace_collectives_when_downscaled() {
    let text = r#"
[cluster]
ranks = 4
[tensors]
grad = "64MiB"
[[op]]
all_reduce = "grad"
async_op = true
work = "w"
[[op]]
wait = "w"
"#;
    let scenario = sim::scenario::parse("down.toml", text).unwrap();
    let model = sim::nccl::plan_collective(
        &scenario,
        &[0, 1, 2, 3],
        CollectiveKind::AllReduce,
        64 << 20,
    );
    let channels = model.channels;
    for (stand_in, expected) in [
        (
            StandIn::Spin { duration_ns: 7_000 },
            format!("launch s1 spin 7000ns x{channels} own"),
        ),
        (
            StandIn::Model,
            format!("launch s1 spin {}ns x{channels} own", model.duration_ns),
        ),
        (StandIn::Nccl, "nccl s1 all_reduce world".to_string()),
    ] {
        let layout = rank0_layout(Some(stand_in));
        let plan = RankPlan::new(&scenario, &layout).unwrap();
        let mut device = FakeDevice::default();
        Executor::new(&scenario, &plan, &mut device).run().unwrap();
        assert!(device.calls.contains(&expected), "{:?}", device.calls);
    }
}

#[test]
fn perturbations_delay_the_host_and_the_gpu() {
    let text = r#"
repeat = 2
[cluster]
ranks = 1
[[op]]
label = "late"
gpu_sleep_us = 10
[[perturb]]
ranks = [0]
before = "late"
host_delay_us = 30
gpu_delay_us = 40
iterations = [1]
"#;
    let mut device = FakeDevice::default();
    let rank = run_fake(text, &mut device).unwrap();
    let delays: Vec<_> = rank
        .kernels
        .iter()
        .filter(|k| k.class == KernelClass::Sleep && k.iteration == 1)
        .collect();
    assert_eq!(delays.len(), 2, "the delay kernel and the op's own sleep");
    let sleeps: Vec<&String> = device
        .calls
        .iter()
        .filter(|c| c.contains("sleep 30000") || c.contains("40000ns"))
        .collect();
    assert_eq!(sleeps.len(), 2, "only in iteration 1: {:?}", device.calls);
}

/// Every committed hardware scenario (and the shipped catalogue) plans and runs on the fake
/// device: the GPU runs only ever see programs that the executor accepts.
#[test]
fn committed_scenarios_run_on_the_fake_device() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut count = 0;
    for dir in ["tests/data/hw/scenarios", "scenarios"] {
        let Ok(entries) = std::fs::read_dir(root.join(dir)) else {
            continue;
        };
        for entry in entries {
            let path = entry.unwrap().path();
            if path.extension().is_none_or(|e| e != "toml") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let scenario = sim::scenario::parse(&path.to_string_lossy(), &text)
                .unwrap_or_else(|e| panic!("{e}"));
            let plan = crate::fake::rank0_plan(&scenario).unwrap();
            if Executor::<FakeDevice>::refusal(&scenario, &plan).is_some() {
                continue;
            }
            let mut device = FakeDevice::default();
            let log = Executor::new(&scenario, &plan, &mut device)
                .run()
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            assert!(
                device.event_times.len() <= plan.events_per_iteration * scenario.repeat as usize
            );
            let times = device.event_times.clone();
            log.resolve(&plan, |ev| Ok(Some(times[ev]))).unwrap();
            count += 1;
        }
    }
    assert!(count >= 5, "found {count} scenarios");
}

/// Drawn delays come from the rank's seeded stream in the simulator's order (host, then
/// GPU, per perturbation and iteration; a jitter draw per compute kernel), so hw sleeps what
/// the simulator's rank sleeps.
#[test]
fn drawn_delays_and_jitter_follow_the_simulators_stream() {
    let text = r#"
seed = 9
repeat = 3
[cluster]
ranks = 1
kernel_jitter_pct = 5
[[op]]
label = "late"
kernel = { us = 100, sms = 2 }
[[perturb]]
ranks = [0]
before = "late"
host_delay_us = { normal = { mean = 50, std = 10 } }
gpu_delay_us = { uniform = { min = 10, max = 20 } }
"#;
    let scenario = sim::scenario::parse("draws.toml", text).unwrap();
    let perturbation = &scenario.perturbations[0];
    let mut rng = sim::random::rank_rng(9, 0);
    let mut expected = Vec::new();
    for _ in 0..3 {
        let host = perturbation.host_delay.sample_ns(&mut rng);
        let gpu = perturbation.gpu_delay.sample_ns(&mut rng);
        let jitter = scenario.cluster.kernel_jitter;
        let spin = sim::random::jittered_ns(100_000, jitter, &mut rng);
        expected.push(format!("sleep {host}"));
        expected.push(format!("launch s0 spin {gpu}ns x1"));
        expected.push(format!("launch s0 spin {spin}ns x2 own"));
    }
    let mut device = FakeDevice::default();
    run_fake(text, &mut device).unwrap();
    let drawn: Vec<&str> = device
        .calls
        .iter()
        .filter(|c| c.starts_with("sleep") || c.starts_with("launch"))
        .map(String::as_str)
        .collect();
    assert_eq!(drawn, expected);
}

/// R20 through the executor: the allocation that does not fit synchronises the device,
/// frees the cached segment and records the release; with expandable segments it neither
/// synchronises nor frees before the run ends.
#[test]
fn a_cache_release_synchronises_unless_expandable() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/data/hw/scenarios/hw_cache_release.toml");
    let text = std::fs::read_to_string(path).unwrap();
    let mut device = FakeDevice::default();
    let rank = run_fake(&text, &mut device).unwrap();
    let release = rank.cache_releases[0];
    assert_eq!(
        (release.iteration, release.op, release.segments_freed),
        (0, 3, 1)
    );
    assert!(release.device_idle_ns.is_some());
    let alloc_b = device
        .calls
        .iter()
        .position(|c| c == "launch s1 spin 5000000ns x1")
        .unwrap();
    assert_eq!(
        device.calls[alloc_b + 2],
        "device_sync",
        "{:?}",
        device.calls
    );
    assert_eq!(
        &device.memory_calls[..5],
        [
            "malloc s0 629145600",
            "bind t0 Some(\"s0+0\")",
            "bind t0 None",
            "free s0",
            "malloc s1 629145600",
        ]
    );
    assert_eq!(rank.memory.cache_releases, rank.cache_releases.len() as u32);
    assert!(rank.memory.peak_reserved_bytes <= 1 << 30);

    let expandable = text.replace(
        "fraction = 1.0",
        "fraction = 1.0\nexpandable_segments = true",
    );
    let mut device = FakeDevice::default();
    let rank = run_fake(&expandable, &mut device).unwrap();
    assert!(rank
        .cache_releases
        .iter()
        .all(|r| r.device_idle_ns.is_none()));
    // The program's five device_sync ops and the one after the run: none for the releases.
    let syncs = device.calls.iter().filter(|c| *c == "device_sync").count();
    assert_eq!(syncs, 6);
    assert!(device
        .memory_calls
        .contains(&"free s0 deferred".to_string()));
}

/// Rank 0's network fails under its all_reduce, NCCL reporting it 1 ms after the enqueue
/// (as `sim`'s engine tests have it); `extra` goes into `[env]`, `between` between the
/// all_reduce and `is_completed()`, `wait()`. Run on the fake device as the one-GPU stand-in
/// does (the device injects the error), and simulated.
fn failed_work(extra: &str, between: &str) -> (RunLog, sim::timeline::Timeline) {
    let text = format!(
        "[env]\n{extra}\n[cluster]\nranks = 2\n[groups.world]\neager_init = true\ntimeout_s = 1\n[tensors]\nx = \"1MiB\"\n[[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\nasync_op = true\nwork = \"w\"\n{between}[[op]]\nis_completed = \"w\"\n[[op]]\nlabel = \"wait\"\nwait = \"w\"\n[[fault]]\nranks = [0]\nat = \"ar\"\nkind = \"async_error\"\nafter_us = 1000\n"
    );
    let mut device = FakeDevice::default();
    let log = run_fake_log(&text, &mut device, Some(StandIn::Model));
    let scenario = sim::scenario::parse("failed.toml", &text).unwrap();
    (log, sim::engine::simulate(&scenario))
}

/// The first finding about rank 0: (kind, iteration, op, whether it says DistBackendError).
fn rank0_verdict(findings: &[Finding]) -> (FindingKind, Option<u32>, Option<OpRef>, bool) {
    let finding = findings.iter().find(|f| f.rank == Some(0)).unwrap();
    let raised = finding.message.contains("DistBackendError");
    (finding.kind, finding.iteration, finding.op, raised)
}

/// R27 on hardware as in the simulator: from the async error on, the failed Work's
/// `is_completed()` is true and its `wait()` aborts the communicator, then raises
/// `DistBackendError` in the main thread, ending the process there (the watchdog finds the
/// error at the raise); before the error `wait()` returns and the watchdog catches it.
#[test]
fn a_work_failed_by_an_async_error_is_completed_and_its_wait_raises_r27() {
    let (log, simulated) = failed_work("", "[[op]]\nhost_sleep_us = 5000\n");
    assert_eq!(log.queries.len(), 1);
    assert!(log.queries[0].completed, "completed with its error");
    let in_wait = |findings: &[Finding]| {
        let findings: Vec<_> = findings
            .iter()
            .filter(|f| f.op == Some(3))
            .cloned()
            .collect();
        rank0_verdict(&findings)
    };
    let verdict = in_wait(&log.findings);
    assert_eq!(verdict, (FindingKind::AsyncError, Some(0), Some(3), true));
    assert_eq!(verdict, in_wait(&simulated.findings), "both engines");
    assert_eq!(
        simulated.ranks[0].queries[0].completed,
        log.queries[0].completed
    );
    let exit = log
        .records
        .iter()
        .find(|r| r.event == WatchdogEvent::Exit)
        .unwrap();
    assert_eq!(exit.thread, ThreadKind::Main);
    let raised = log.findings.iter().find(|f| f.op == Some(3)).unwrap();
    assert_eq!(exit.message, raised.message);
    let main_thread: Vec<_> = (log.records.iter())
        .filter(|r| r.thread == ThreadKind::Main && r.event != WatchdogEvent::Fault)
        .map(|r| r.event)
        .collect();
    assert_eq!(
        main_thread,
        [
            WatchdogEvent::WaitError,
            WatchdogEvent::Abort,
            WatchdogEvent::Exit
        ],
        "the abort before the raise"
    );
    let wait_call = log.host.last().unwrap();
    assert_eq!(wait_call.op, 3);

    // Before the error: is_completed() is false, wait() returns, and the watchdog's poll
    // finds the error later.
    let (log, simulated) = failed_work("", "");
    assert!(!log.queries[0].completed);
    assert!(!simulated.ranks[0].queries[0].completed);
    assert!(log.host.iter().any(|h| h.op == 2));
    let (kind, _, _, raised) = rank0_verdict(&log.findings);
    assert_eq!((kind, raised), (FindingKind::AsyncError, false));
}

/// A polling wait() raises the async error at its first poll after it, not the timeout.
#[test]
fn a_blocking_wait_raises_at_the_first_poll_after_the_async_error_r15_r27() {
    let (log, simulated) = failed_work("TORCH_NCCL_BLOCKING_WAIT = 1", "");
    let verdict = rank0_verdict(&log.findings);
    assert_eq!(verdict, (FindingKind::AsyncError, Some(0), Some(2), true));
    assert_eq!(verdict, rank0_verdict(&simulated.findings), "both engines");
    let wait_call = log.host.last().unwrap();
    assert!(
        (1_000_000..2_100_000).contains(&wait_call.end_ns),
        "{}",
        wait_call.end_ns
    );
}

/// Without `timeout_ms`, a blocking wait gives up after its group's timeout
/// (`init_process_group(timeout=…)`, R15, R26), which the watchdog gets too.
#[test]
fn the_groups_timeout_bounds_blocking_wait_and_the_watchdog() {
    let text = ASYNC.replace(
        "[cluster]",
        "[env]\nTORCH_NCCL_BLOCKING_WAIT = 1\n[groups.world]\ntimeout_s = 0.004\n[cluster]",
    );
    let mut device = FakeDevice {
        query_answers: std::iter::repeat_n(false, 100).collect(),
        ..FakeDevice::default()
    };
    let finding = only_finding(&text, &mut device);
    assert!(
        finding
            .message
            .contains("Timeout(ms)=4) ran for 4 milliseconds before timing out."),
        "{}",
        finding.message
    );
    assert_eq!(device.watched[0].timeout_ns, 4_000_000);
    let sleeps = device
        .calls
        .iter()
        .filter(|c| c.starts_with("sleep"))
        .count();
    assert_eq!(
        sleeps, 4,
        "gave up at the fourth 1 ms poll, which reached 4 ms"
    );
}

/// R19 and R20: with expandable segments a release needs no device-wide synchronisation, but
/// it still waits for the events of blocks freed under recordStream before it hands them back
/// (g's Work is dropped at once: one the program kept would keep g, R18).
#[test]
fn an_expandable_release_still_waits_for_recordstream_events() {
    let text = "[cluster]\nranks = 1\n[memory]\ncapacity_gib = 1\nfraction = 1.0\n\
                lifetime = \"record_stream\"\nexpandable_segments = true\n[streams]\nside = {}\n\
                [groups.world]\neager_init = true\n\
                [tensors]\ng = \"256MiB\"\nc = \"300MiB\"\nh = \"700MiB\"\n\
                [[op]]\nalloc = \"c\"\nstream = \"side\"\n[[op]]\nfree = \"c\"\nstream = \"side\"\n\
                [[op]]\nalloc = \"g\"\n[[op]]\nall_reduce = \"g\"\nasync_op = true\n\
                [[op]]\nfree = \"g\"\n[[op]]\nalloc = \"h\"\n\
                [[op]]\nfree = \"h\"\n";
    // g's event has not passed when h is asked for.
    let mut device = FakeDevice {
        query_answers: [false].into(),
        ..FakeDevice::default()
    };
    let rank = run_fake(text, &mut device).unwrap();
    assert_eq!(rank.cache_releases.len(), 1);
    assert_eq!(rank.cache_releases[0].device_idle_ns, None);
    let query = (device.calls.iter())
        .find(|c| c.starts_with("query e"))
        .unwrap();
    let event = query
        .trim_start_matches("query ")
        .trim_end_matches(" false");
    assert!(
        device.calls.contains(&format!("event_sync {event}")),
        "{:?}",
        device.calls
    );
}

/// The `out_of_memory` finding of a run on the fake device and the simulator's, which must
/// be the same, word for word (R17, R20).
fn same_out_of_memory_finding(text: &str, device: &mut FakeDevice) -> Finding {
    let log = run_fake_log(text, device, None);
    assert_eq!(log.findings.len(), 1, "{:?}", log.findings);
    let scenario = sim::scenario::parse("oom.toml", text).unwrap();
    let simulated = sim::engine::simulate(&scenario);
    assert_eq!(log.findings, simulated.findings);
    assert_eq!(log.findings[0].kind, FindingKind::OutOfMemory);
    log.findings[0].clone()
}

/// An up-front tensor that does not fit is PyTorch's "CUDA out of memory" in the simulator's
/// words (R17, R20): the allocator as PyTorch left it at that `torch.empty`, the tensors after
/// it never made, on the GPU as in the simulation; the program never starts, and the run ends
/// with the finding (exit 1), its Timeline written.
#[test]
fn an_up_front_tensor_that_does_not_fit_is_the_simulators_out_of_memory() {
    let text = "[cluster]\nranks = 1\n[memory]\ncapacity_gib = 1\n[tensors]\na = \"600MiB\"\n\
                big = \"600MiB\"\nafter = \"1MiB\"\n[[op]]\nall_reduce = \"a\"\n";
    let mut device = FakeDevice::default();
    let finding = same_out_of_memory_finding(text, &mut device);
    let pytorch = "CUDA out of memory. Tried to allocate 600.00 MiB. 1024.00 MiB allowed; Of the \
                   allocated memory 600.00 MiB is allocated by PyTorch, and 0 bytes is reserved \
                   by PyTorch but unallocated.";
    assert_eq!(
        finding.message,
        format!(
            "[Rank 0] {pytorch} Tensor \"big\", 629145600 B asked before the program (R17); the \
             rank's program never started"
        )
    );
    assert_eq!(
        device.memory_calls,
        ["malloc s0 629145600 filled", "bind t0 Some(\"s0+0\")"]
    );
    assert!(device.calls.is_empty(), "{:?}", device.calls);
}

/// A segment the GPU refuses though the books had room for it (`cuMemAlloc`'s
/// `CUDA_ERROR_OUT_OF_MEMORY`: a GPU smaller than the scenario's, or memory another process
/// holds) is PyTorch's raise as well: the run's `out_of_memory` finding in the simulator's frame,
/// the GPU's refusal as the reason. In the program the `alloc` call ends at the raise, and the
/// run ends with its Timeline up to there (exit 1); before the program, it never starts.
#[test]
fn a_segment_the_gpu_refuses_is_an_out_of_memory_finding_and_the_run_keeps_its_timeline() {
    let text = "[cluster]\nranks = 1\n[memory]\ncapacity_gib = 1\n[tensors]\na = \"100MiB\"\n\
                big = \"600MiB\"\n[[op]]\nall_reduce = \"a\"\n[[op]]\nalloc = \"big\"\n\
                [[op]]\nall_reduce = \"big\"\n[[op]]\nfree = \"big\"\n";
    let scenario = sim::scenario::parse("refused.toml", text).unwrap();
    let layout = rank0_layout(None);
    let plan = RankPlan::new(&scenario, &layout).unwrap();
    let mut device = FakeDevice {
        gpu_bytes: Some(512 << 20),
        ..FakeDevice::default()
    };
    let mut executor = Executor::new(&scenario, &plan, &mut device);
    executor.setup().unwrap();
    let mut log = executor.run().unwrap();
    assert!(log.ended_early);
    let findings = std::mem::take(&mut log.findings);
    assert_eq!(findings.len(), 1, "{findings:?}");
    let finding = &findings[0];
    assert_eq!(
        (finding.kind, finding.rank, finding.iteration, finding.op),
        (FindingKind::OutOfMemory, Some(0), Some(0), Some(1))
    );
    assert_eq!(finding.stream.as_deref(), Some("default"));
    assert_eq!(
        finding.message,
        "[Rank 0] CUDA out of memory. Tried to allocate 600.00 MiB. Of the allocated memory \
         100.00 MiB is allocated by PyTorch, and 0 bytes is reserved by PyTorch but unallocated. \
         At alloc#1 (line 10), 629145600 B asked, the GPU refused the new segment (cuMemAlloc of 629145600 B: \
         CUDA_ERROR_OUT_OF_MEMORY); the rank's program stopped"
    );
    let rank = log.resolve(&plan, |ev| Ok(device.time_of(ev))).unwrap();
    // The first all_reduce ran; the alloc call ended at the raise; nothing after it was issued.
    let ops: Vec<OpRef> = rank.host.iter().map(|call| call.op).collect();
    assert_eq!(ops, [0, 1]);
    assert_eq!(rank.collectives.len(), 1);
    assert_eq!(rank.unfinished_iteration, Some(0));
    // PyTorch counts a segment once cudaMalloc returned it: the refused one is in no peak.
    let a_bytes = 100 << 20;
    assert_eq!(
        (
            rank.memory.peak_reserved_bytes,
            rank.memory.peak_allocated_bytes
        ),
        (a_bytes, a_bytes)
    );

    // Before the program: the up-front tensor the GPU refuses.
    let mut device = FakeDevice {
        gpu_bytes: Some(50 << 20),
        ..FakeDevice::default()
    };
    let log = run_fake_log(text, &mut device, None);
    assert_eq!(log.findings.len(), 1, "{:?}", log.findings);
    assert_eq!(
        log.findings[0].message,
        "[Rank 0] CUDA out of memory. Tried to allocate 100.00 MiB. Of the allocated memory \
         0 bytes is allocated by PyTorch, and 0 bytes is reserved by PyTorch but unallocated. \
         Tensor \"a\", 104857600 B asked before the program (R17); the GPU refused the new segment (cuMemAlloc of 104857600 \
         B: CUDA_ERROR_OUT_OF_MEMORY); the rank's program never started"
    );
    assert_eq!(log.findings[0].op, None);
    assert!(device.calls.is_empty(), "{:?}", device.calls);
    assert_eq!(log.memory, MemoryPeaks::default(), "nothing was obtained");
}

/// A segment the GPU refuses is not yet PyTorch's raise: `malloc` first releases the cache
/// (`release_cached_blocks`: the device synchronised, every wholly free segment freed) and asks
/// `cudaMalloc` again (R20); only a second refusal raises. Here the 300 MiB cached for the side
/// stream make the room: the run goes on, one release recorded, and the peaks count the
/// segments the GPU gave, never both at once.
#[test]
fn a_segment_the_gpu_refuses_is_asked_again_after_a_cache_release_r20() {
    let text = "[cluster]\nranks = 1\n[memory]\ncapacity_gib = 1\n[streams]\nside = {}\n\
                [tensors]\nc = \"300MiB\"\nbig = \"600MiB\"\n\
                [[op]]\nalloc = \"c\"\nstream = \"side\"\n[[op]]\nfree = \"c\"\nstream = \"side\"\n\
                [[op]]\nalloc = \"big\"\n[[op]]\nfree = \"big\"\n";
    let mut device = FakeDevice {
        gpu_bytes: Some(700 << 20),
        ..FakeDevice::default()
    };
    let rank = run_fake(text, &mut device).unwrap();
    // Every op ran.
    assert_eq!(rank.host.len(), 4);
    assert_eq!(rank.unfinished_iteration, None);
    assert_eq!(
        device.memory_calls,
        [
            "malloc s0 314572800",
            "bind t0 Some(\"s0+0\")",
            "bind t0 None",
            "malloc s1 629145600",
            "free s0",
            "malloc s1 629145600",
            "bind t1 Some(\"s1+0\")",
            "bind t1 None",
        ]
    );
    assert_eq!(rank.cache_releases.len(), 1);
    let release = rank.cache_releases[0];
    assert_eq!((release.op, release.segments_freed), (2, 1));
    assert!(release.device_idle_ns.is_some());
    assert_eq!(
        rank.memory,
        MemoryPeaks {
            peak_reserved_bytes: 600 << 20,
            peak_allocated_bytes: 600 << 20,
            cache_releases: 1,
        }
    );

    // c still alive: nothing to release, so the refusal raises at once, no release recorded.
    let mut device = FakeDevice {
        gpu_bytes: Some(700 << 20),
        ..FakeDevice::default()
    };
    let free_c = "[[op]]\nfree = \"c\"\nstream = \"side\"\n";
    let kept = text.replace(free_c, "") + free_c;
    let log = run_fake_log(&kept, &mut device, None);
    assert!(
        log.findings[0]
            .message
            .contains("the GPU refused the new segment"),
        "{}",
        log.findings[0].message
    );
    assert!(log.cache_releases.is_empty());
    assert_eq!(log.memory.peak_reserved_bytes, 300 << 20);
}

/// A bucketed collective's buffers are booked before the program, after the tensors, as DDP's
/// Reducer makes them (R17, R25): their segments are allocated on the GPU (a later allocation
/// may be cut from one), nothing is bound to them, and one that does not fit is the
/// simulator's out of memory.
#[test]
fn bucket_buffers_are_booked_before_the_program_as_in_the_simulator() {
    let text = |capacity_gib: u32| {
        format!(
            "[cluster]\nranks = 1\n[memory]\ncapacity_gib = {capacity_gib}\n\
             [tensors]\ngrads = {{ size = \"200MiB\", count = 4 }}\n\
             [[op]]\nlabel = \"ddp\"\nall_reduce = \"grads\"\nbucket = \"400MiB\"\n"
        )
    };
    let mut device = FakeDevice::default();
    run_fake(&text(2), &mut device).unwrap();
    let mib = 1u64 << 20;
    let segments: Vec<String> = (device.memory_calls.iter())
        .filter(|call| call.starts_with("malloc"))
        .cloned()
        .collect();
    let expected: Vec<String> = (0..6)
        .map(|s| format!("malloc s{s} {} filled", if s < 4 { 200 } else { 400 } * mib))
        .collect();
    assert_eq!(segments, expected);
    let simulated = sim::engine::simulate(&sim::scenario::parse("b.toml", &text(2)).unwrap());
    assert_eq!(simulated.ranks[0].memory.peak_reserved_bytes, 1600 * mib);

    let finding = same_out_of_memory_finding(&text(1), &mut FakeDevice::default());
    assert_eq!(
        finding.message,
        "[Rank 0] CUDA out of memory. Tried to allocate 400.00 MiB. 1024.00 MiB allowed; Of the \
         allocated memory 800.00 MiB is allocated by PyTorch, and 0 bytes is reserved by PyTorch \
         but unallocated. The bucket buffer 1 of 2 of ddp (line 7), 419430400 B asked before the \
         program (DDP's Reducer makes it when it is built; R17, R25); the rank's program never \
         started"
    );
}

/// A list (`count` = N) is N `torch.empty` calls in the books, as in the simulator (R17): one
/// block each, the same peaks; bound once, at its first tensor's place; an allocation that does
/// not fit names the one tensor's size.
#[test]
fn a_list_is_allocated_tensor_by_tensor_as_in_the_simulator() {
    let text = "[cluster]\nranks = 1\n[memory]\ncapacity_gib = 1\n[tensors]\n\
                grads = { size = \"300KiB\", count = 4 }\n\
                [[op]]\nalloc = \"grads\"\n[[op]]\nfree = \"grads\"\n";
    let mut device = FakeDevice::default();
    let rank = run_fake(text, &mut device).unwrap();
    assert_eq!(
        device.memory_calls[..3],
        [
            "malloc s0 2097152",
            "bind t0 Some(\"s0+0\")",
            "bind t0 None"
        ]
    );
    let scenario = sim::scenario::parse("list.toml", text).unwrap();
    let simulated = sim::engine::simulate(&scenario);
    assert_eq!(rank.memory, simulated.ranks[0].memory);
    assert_eq!(rank.memory.peak_allocated_bytes, 1200 << 10);

    let too_many = text.replace("count = 4", "count = 4000");
    let finding = same_out_of_memory_finding(&too_many, &mut FakeDevice::default());
    assert!(
        finding
            .message
            .starts_with("[Rank 0] CUDA out of memory. Tried to allocate 2.00 MiB.")
            && finding.message.contains(
                "At alloc#0 (line 7), 307200 B asked (tensor 3073 of the list of 4000), even after"
            ),
        "{}",
        finding.message
    );
}

/// The Timeline's unfinished records come from one mapping (`RankTimeline::set_apart_unfinished`)
/// in both engines: for a collective that never completes (rank 1 never joins; no error
/// handling, so no abort ends its kernel), its wait's stream wait and the kernel queued behind
/// it, the fake device's run and the simulator give the same records, times aside, and the
/// same times that never came.
#[test]
fn both_engines_set_apart_the_same_unfinished_records() {
    let text = "[cluster]\nranks = 2\n[env]\nTORCH_NCCL_ASYNC_ERROR_HANDLING = 0\n[groups.world]\neager_init = true\ntimeout_s = 1\n[tensors]\nx = \"1MiB\"\n[[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\nasync_op = true\nwork = \"w\"\n[[op]]\nwait = \"w\"\n[[op]]\ngpu_sleep_us = 10\n[[fault]]\nranks = [1]\nat = \"ar\"\nkind = \"hang\"\n";
    let (ran, simulated) = fake_and_simulated("unfinished.toml", text);
    // Times differ between the engines; which of them came must not.
    let came = |ns: Option<u64>| ns.map(|_| 0);
    let without_times = |rank: &RankTimeline| {
        let mut collectives = rank.unfinished_collectives.clone();
        for c in &mut collectives {
            (c.host_start_ns, c.host_end_ns) = (0, 0);
            c.input_ready_ns = came(c.input_ready_ns);
            c.kernel_start_ns = came(c.kernel_start_ns);
            c.kernel_end_ns = came(c.kernel_end_ns);
            if let Some(wait) = &mut c.wait {
                (wait.host_start_ns, wait.host_end_ns) = (0, came(wait.host_end_ns));
            }
        }
        let mut kernels = rank.unfinished_kernels.clone();
        for k in &mut kernels {
            k.enqueue_ns = 0;
            k.start_ns = came(k.start_ns);
        }
        let mut stream_waits = rank.unfinished_stream_waits.clone();
        for w in &mut stream_waits {
            w.source_ns = came(w.source_ns);
        }
        (collectives, kernels, stream_waits)
    };
    let (collectives, kernels, stream_waits) = without_times(&ran);
    assert_eq!((collectives.len(), kernels.len()), (1, 2), "{ran:?}");
    assert_eq!(
        (
            stream_waits.len(),
            stream_waits[0].op,
            stream_waits[0].source_ns
        ),
        (1, 1, None),
        "the wait()'s, on the Work's end event that never fired"
    );
    assert!(collectives[0].wait.is_some() && collectives[0].kernel_end_ns.is_none());
    assert_eq!(
        (kernels[0].start_ns, kernels[1].start_ns),
        (Some(0), None),
        "the collective's kernel started, the sleep behind its wait never did"
    );
    assert_eq!(
        (collectives, kernels, stream_waits),
        without_times(&simulated)
    );
    assert!(ran.collectives.is_empty() && simulated.collectives.is_empty());
}

/// A `.item()` behind a collective a peer never joins blocks until the watchdog's verdict ends
/// the run: the call never returned, blocked on its stream, as the simulator records it.
#[test]
fn an_item_the_verdict_interrupts_is_the_host_call_that_never_returned() {
    let text = "[cluster]\nranks = 2\n[groups.world]\neager_init = true\ntimeout_s = 1\n\
                [tensors]\nx = \"1MiB\"\n[[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\n\
                async_op = true\nwork = \"w\"\n[[op]]\nwait = \"w\"\n[[op]]\nitem = \"x\"\n\
                [[fault]]\nranks = [1]\nat = \"ar\"\nkind = \"hang\"\n";
    let mut device = FakeDevice::default();
    let log = run_fake_log(text, &mut device, Some(StandIn::Model));
    let call = log.unfinished_host.expect("the item never returned");
    assert_eq!(
        (call.iteration, call.op, call.blocked_on),
        (0, 2, Some(HostBlock::Stream { stream: 0 }))
    );
    assert!(log.host.iter().all(|h| h.op != 2));
    let scenario = sim::scenario::parse("hang.toml", text).unwrap();
    let simulated = sim::engine::simulate(&scenario).ranks[0]
        .unfinished_host
        .unwrap();
    assert_eq!(
        (simulated.op, simulated.blocked_on),
        (call.op, call.blocked_on),
        "both engines"
    );
}

/// Rank 0 of two, the other never joining (run alone, as the one-GPU stand-in does), both
/// engines: the unfinished collective's record and the Timeline rank 0's.
fn hung_peer(ops: &str) -> (RankTimeline, RankTimeline) {
    let text = format!(
        "[cluster]\nranks = 2\n[groups.world]\neager_init = true\ntimeout_s = 1\n[tensors]\nx = \"1MiB\"\n{ops}[[fault]]\nranks = [1]\nat = \"ar\"\nkind = \"hang\"\n"
    );
    fake_and_simulated("hung_peer.toml", &text)
}

/// Rank 0 of the scenario `text`, which its watchdog's verdict ends early: as the fake device
/// ran it (the collectives' stand-ins modelled) and as the simulator gives it.
fn fake_and_simulated(name: &str, text: &str) -> (RankTimeline, RankTimeline) {
    let scenario = sim::scenario::parse(name, text).unwrap();
    let layout = rank0_layout(Some(StandIn::Model));
    let plan = RankPlan::new(&scenario, &layout).unwrap();
    let mut device = FakeDevice::default();
    let mut executor = Executor::new(&scenario, &plan, &mut device);
    executor.setup().unwrap();
    let log = executor.run().unwrap();
    assert!(log.ended_early);
    let ran = log.resolve(&plan, |ev| Ok(device.time_of(ev))).unwrap();
    (ran, sim::engine::simulate(&scenario).ranks.swap_remove(0))
}

/// A `wait(timeout)` on a collective that never completes raises at its timeout: the
/// collective's record keeps the wait, ended at the raise where its call ended, in both
/// engines.
#[test]
fn a_wait_that_raised_is_kept_on_the_unfinished_collective_ended_at_its_raise() {
    let ops = "[[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\nasync_op = true\nwork = \"w\"\n\
               [[op]]\nwait = \"w\"\ntimeout_ms = 3\n";
    let (ran, simulated) = hung_peer(ops);
    for rank in [&ran, &simulated] {
        let wait = rank.unfinished_collectives[0]
            .wait
            .unwrap_or_else(|| panic!("the wait is kept: {rank:?}"));
        let call = rank.host.iter().find(|c| c.op == 1).expect("it raised");
        assert_eq!(wait.op, 1);
        assert_eq!(wait.host_end_ns, Some(call.end_ns), "{rank:?}");
        assert!(call.end_ns >= 3_000_000, "at its timeout: {}", call.end_ns);
    }
}

/// A polling wait's own timeout (blocking wait, and `wait(timeout)` where the watchdog runs)
/// is the main thread's log in both engines, PyTorch's two lines in its order at the timeout:
/// the timeout check's "Watchdog caught collective operation timeout", then the wait's "timed
/// out in blocking wait" (R15); nothing of it on the watchdog's thread.
#[test]
fn a_waits_own_timeout_logs_pytorchs_two_main_thread_lines_in_both_engines_r15() {
    for (env, timeout, ran_ms) in [
        ("TORCH_NCCL_BLOCKING_WAIT = 1\n", "", 1_000),
        ("", "timeout_ms = 3\n", 3),
    ] {
        let text = format!(
            "[env]\n{env}[cluster]\nranks = 2\n[groups.world]\neager_init = true\ntimeout_s = 1\n\
             [tensors]\nx = \"1MiB\"\n[[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\nasync_op = true\n\
             work = \"w\"\n[[op]]\nwait = \"w\"\n{timeout}[[fault]]\nranks = [1]\nat = \"ar\"\nkind = \"hang\"\n"
        );
        let mut device = FakeDevice::default();
        let log = run_fake_log(&text, &mut device, Some(StandIn::Model));
        let scenario = sim::scenario::parse("wait.toml", &text).unwrap();
        let simulated = sim::engine::simulate(&scenario);
        let work = device.watched[0].description.clone();
        // The records of rank 0 up to the wait's raise.
        let logged = |records: &[WatchdogRecord]| -> Vec<(ThreadKind, WatchdogEvent, String)> {
            (records.iter())
                .filter(|r| r.rank == 0 && r.event != WatchdogEvent::Exit)
                .take_while(|r| r.event != WatchdogEvent::Abort)
                .map(|r| (r.thread, r.event, r.message.replace(&work, "W")))
                .collect()
        };
        let main = |message: &str| {
            (
                ThreadKind::Main,
                WatchdogEvent::WaitTimeout,
                message.to_string(),
            )
        };
        assert_eq!(
            logged(&log.records),
            [
                main(&format!("[Rank 0] Watchdog caught collective operation timeout: W ran for {ran_ms} milliseconds before timing out.")),
                main("[Rank 0] Work W timed out in blocking wait. Aborting the communicator, then raising DistBackendError in the main thread."),
            ],
            "{env}{timeout}"
        );
        assert_eq!(
            logged(&log.records),
            logged(&simulated.watchdog),
            "{env}{timeout}"
        );
    }
}

/// A `wait(timeout)` longer than the group's timeout, on a collective a peer never joins, does
/// not outlast the watchdog: its verdict takes the process down while the wait still polls, so
/// the finding is the watchdog's timeout and the wait never returned, in both engines (the
/// simulator after the dump wait, hw at once).
#[test]
fn the_watchdogs_verdict_ends_a_polling_wait_r15_r26() {
    let ops = "[[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\nasync_op = true\nwork = \"w\"\n\
               [[op]]\nwait = \"w\"\ntimeout_ms = 100000\n";
    let text = format!(
        "[cluster]\nranks = 2\n[groups.world]\neager_init = true\ntimeout_s = 1\n[tensors]\nx = \"1MiB\"\n{ops}[[fault]]\nranks = [1]\nat = \"ar\"\nkind = \"hang\"\n"
    );
    let mut device = FakeDevice::default();
    let log = run_fake_log(&text, &mut device, Some(StandIn::Model));
    let scenario = sim::scenario::parse("verdict.toml", &text).unwrap();
    let simulated = sim::engine::simulate(&scenario);
    let first = |findings: &[Finding]| findings.iter().find(|f| f.rank == Some(0)).unwrap().kind;
    assert_eq!(first(&log.findings), FindingKind::WatchdogTimeout);
    assert_eq!(first(&simulated.findings), FindingKind::WatchdogTimeout);
    let call = log.unfinished_host.expect("the wait never returned");
    let simulated_call = simulated.ranks[0].unfinished_host.unwrap();
    assert_eq!(
        (call.op, call.blocked_on),
        (simulated_call.op, simulated_call.blocked_on),
        "both engines"
    );
    assert_eq!(call.op, 1);
    assert!(
        device.now_ns < 2_000_000_000,
        "ended at the verdict, not the wait's 100 s: {}",
        device.now_ns
    );
}

/// One rank's all_reduce, its `wait()`, then `after` (ops), on the real NCCL path; with
/// `fault`, the simulator's injected async error at the all_reduce, 1 ms after its enqueue.
fn one_rank_all_reduce(after: &str, fault: bool) -> String {
    let fault = if fault {
        "[[fault]]\nranks = [0]\nat = \"ar\"\nkind = \"async_error\"\nafter_us = 1000\n"
    } else {
        ""
    };
    format!(
        "[cluster]\nranks = 1\n[groups.world]\neager_init = true\ntimeout_s = 1\n[tensors]\nx = \"1MiB\"\n\
         [[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\nasync_op = true\nwork = \"w\"\n\
         [[op]]\nwait = \"w\"\n{after}{fault}"
    )
}

/// The fake device with a real NCCL async error on the world's communicator, `at_ns` into
/// the run: the network failed under the collective in flight.
fn failed_network(at_ns: u64) -> FakeDevice {
    FakeDevice {
        comm_errors: vec![CommError {
            group: 0,
            at_ns,
            error: NcclAsyncError::Remote,
        }],
        ..FakeDevice::default()
    }
}

/// A real NCCL async error (`ncclCommGetAsyncError` reports `ncclRemoteError` under a
/// collective in flight) is the watchdog's finding in PyTorch's words, the injected error's of
/// the simulator, with the run's records kept (R26, R27): not a failed call (exit 2).
#[test]
fn a_real_nccl_async_error_is_the_watchdogs_finding_as_an_injected_one_r27() {
    let mut device = failed_network(1_010_000);
    let log = run_fake_log(&one_rank_all_reduce("", false), &mut device, None);
    assert_eq!(log.findings.len(), 1, "{:?}", log.findings);
    let finding = &log.findings[0];
    let work = &device.watched[0].description;
    assert_eq!(
        (finding.kind, finding.op),
        (FindingKind::AsyncError, Some(0))
    );
    assert_eq!(
        finding.message,
        work::async_exception(0, work, NcclAsyncError::Remote)
    );
    let scenario = sim::scenario::parse("injected.toml", &one_rank_all_reduce("", true)).unwrap();
    let simulated = sim::engine::simulate(&scenario);
    assert_eq!(
        finding.message, simulated.findings[0].message,
        "both engines"
    );
    assert!(log
        .records
        .iter()
        .any(|r| r.event == WatchdogEvent::AsyncError && r.thread == ThreadKind::Watchdog));
    assert_eq!(log.collectives.len(), 1, "the collective in flight is kept");
}

/// A collective called after the network failed, before the watchdog's poll found it, is
/// refused by NCCL: the call raises `DistBackendError` in the main thread, in PyTorch's words,
/// and the run ends there with its records (R27).
#[test]
fn a_collective_on_a_failed_communicator_raises_in_the_main_thread_r27() {
    let after = "[[op]]\nhost_sleep_us = 5000\n[[op]]\nlabel = \"ar2\"\nall_reduce = \"x\"\n";
    let text = one_rank_all_reduce(after, false);
    let mut device = failed_network(1_000_000);
    let log = run_fake_log(&text, &mut device, None);
    assert_eq!(log.findings.len(), 1, "{:?}", log.findings);
    let finding = &log.findings[0];
    let scenario = sim::scenario::parse("fake.toml", &text).unwrap();
    assert_eq!(
        (finding.kind, finding.op),
        (FindingKind::AsyncError, Some(3))
    );
    assert_eq!(
        finding.message,
        work::nccl_call_raised(0, NcclAsyncError::Remote, &scenario.ops[3])
    );
    let call = log.host.last().unwrap();
    assert_eq!(call.op, 3, "the call ended at its raise");
    assert!(log.unfinished_host.is_none());
    assert_eq!(log.collectives.len(), 1, "no Work for the refused call");
}

/// A peer's async error signalled through the store is read by rank 0's watchdog one poll
/// after the peer's watchdog found it, in both engines, and only logged (R27): 0.2 s for an
/// error 1 ms in; rank 0 still times out at 1.1 s, as without propagation. When the error falls
/// on the group's timeout, rank 0's watchdog times out first, at the poll before it would read
/// the store, and the group's error is set: nothing is read.
#[test]
fn a_peers_error_through_the_store_is_logged_a_poll_later_r27() {
    for (after_us, read_ns) in [(1_000, Some(200_000_000)), (1_000_000, None)] {
        let text = format!(
            "[env]\nTORCH_NCCL_PROPAGATE_ERROR = 1\n[cluster]\nranks = 2\n[groups.world]\neager_init = true\ntimeout_s = 1\n\
             [tensors]\nx = \"1MiB\"\n[[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\nasync_op = true\nwork = \"w\"\n\
             [[op]]\nwait = \"w\"\n[[fault]]\nranks = [1]\nat = \"ar\"\nkind = \"async_error\"\nafter_us = {after_us}\n"
        );
        let mut device = FakeDevice::default();
        let log = run_fake_log(&text, &mut device, Some(StandIn::Model));
        let scenario = sim::scenario::parse("store.toml", &text).unwrap();
        let simulated = sim::engine::simulate(&scenario);
        let first = |findings: &[Finding]| {
            let f = findings.iter().find(|f| f.rank == Some(0)).unwrap();
            f.kind
        };
        assert_eq!(first(&log.findings), FindingKind::WatchdogTimeout);
        assert_eq!(first(&simulated.findings), FindingKind::WatchdogTimeout);
        let read = |records: &[WatchdogRecord]| -> Vec<(u64, String)> {
            (records.iter())
                .filter(|r| r.rank == 0 && r.event == WatchdogEvent::RemoteError)
                .map(|r| (r.at_ns, r.message.clone()))
                .collect()
        };
        let expected: Vec<(u64, String)> = read_ns
            .map(|at_ns| (at_ns, work::remote_error_detected(0, 1)))
            .into_iter()
            .collect();
        assert_eq!(read(&log.records), expected, "after_us {after_us}");
        assert_eq!(read(&simulated.watchdog), expected, "after_us {after_us}");
    }
}

/// A peer's async error read from the store is recorded as the simulator records it (R27):
/// a `remote_error` of the watchdog under the failed collective's group, and no finding: it
/// fails no Work of rank 0, whether its host waits or its program returned.
#[test]
fn a_peers_error_through_the_store_is_the_simulators_remote_error_record_r27() {
    for wait in ["[[op]]\nwait = \"w\"\n[[op]]\nitem = \"x\"\n", ""] {
        let text = format!(
            "[env]\nTORCH_NCCL_PROPAGATE_ERROR = 1\n[cluster]\nranks = 2\n[groups.world]\neager_init = true\n\
             [groups.pair]\nranks = [0, 1]\neager_init = true\n[tensors]\nx = \"1MiB\"\n\
             [[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\ngroup = \"pair\"\nasync_op = true\nwork = \"w\"\n\
             {wait}[[fault]]\nranks = [1]\nat = \"ar\"\nkind = \"async_error\"\nafter_us = 1000\n"
        );
        let mut device = FakeDevice::default();
        let log = run_fake_log(&text, &mut device, Some(StandIn::Model));
        let scenario = sim::scenario::parse("store.toml", &text).unwrap();
        let simulated = sim::engine::simulate(&scenario);
        let async_errors = |findings: &[Finding]| {
            (findings.iter())
                .filter(|f| f.rank.unwrap_or(0) == 0 && f.kind == FindingKind::AsyncError)
                .count()
        };
        assert_eq!(async_errors(&log.findings), 0, "{wait}");
        assert_eq!(async_errors(&simulated.findings), 0, "{wait}");
        let found = |records: &[WatchdogRecord]| {
            let r = (records.iter())
                .find(|r| r.rank == 0 && r.event == WatchdogEvent::RemoteError)
                .unwrap();
            (r.group, r.thread, r.at_ns, r.message.clone())
        };
        assert_eq!(
            found(&log.records),
            (
                Some(1),
                ThreadKind::Watchdog,
                200_000_000,
                work::remote_error_detected(0, 1)
            ),
            "{wait}"
        );
        assert_eq!(found(&log.records), found(&simulated.watchdog), "{wait}");
    }
}

/// The watchdog's verdict names the Work it caught, also where an older Work of another group
/// is still pending: the subgroup's all_reduce, on a 1-s timeout, times out while the world's,
/// older, on the default 10 minutes, never completes either. The finding's op and the
/// record's group are that Work's, in both engines (R26).
#[test]
fn the_verdict_names_the_work_the_watchdog_caught_not_the_oldest_pending_r26() {
    let text = "[cluster]\nranks = 2\n[groups.world]\neager_init = true\n\
                [groups.pair]\nranks = [0, 1]\neager_init = true\ntimeout_s = 1\n\
                [tensors]\nx = \"1MiB\"\ny = \"1MiB\"\n\
                [[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\nasync_op = true\nwork = \"w\"\n\
                [[op]]\nlabel = \"ar2\"\nall_reduce = \"y\"\ngroup = \"pair\"\nasync_op = true\nwork = \"w2\"\n\
                [[op]]\nwait = \"w2\"\n[[op]]\nlabel = \"loss\"\nitem = \"y\"\n\
                [[fault]]\nranks = [1]\nat = \"ar\"\nkind = \"hang\"\n";
    let mut device = FakeDevice::default();
    let log = run_fake_log(text, &mut device, Some(StandIn::Model));
    let scenario = sim::scenario::parse("groups.toml", text).unwrap();
    let simulated = sim::engine::simulate(&scenario);
    let finding = |findings: &[Finding]| {
        let f = findings.iter().find(|f| f.rank == Some(0)).unwrap();
        (f.kind, f.iteration, f.op)
    };
    let caught_group = |records: &[WatchdogRecord]| {
        (records.iter())
            .find(|r| r.rank == 0 && r.event == WatchdogEvent::Timeout)
            .unwrap()
            .group
    };
    assert_eq!(
        finding(&log.findings),
        (FindingKind::WatchdogTimeout, Some(0), Some(1))
    );
    assert_eq!(finding(&log.findings), finding(&simulated.findings));
    assert_eq!(caught_group(&log.records), Some(1));
    assert_eq!(
        caught_group(&log.records),
        caught_group(&simulated.watchdog)
    );
}

/// The verdict names the iteration of the Work the watchdog caught, not the host's: rank 1
/// hangs before the all_reduce of iteration 1 of 3, and rank 0, which never waits, has
/// returned from its program when its watchdog catches that Work (SeqNum 2), in both engines
/// (R26).
#[test]
fn the_verdict_names_the_iteration_of_the_work_the_watchdog_caught_r26() {
    let text = "repeat = 3\n[cluster]\nranks = 2\n[groups.world]\neager_init = true\ntimeout_s = 1\n\
                [tensors]\nx = \"1MiB\"\n[[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\nasync_op = true\n\
                [[fault]]\nranks = [1]\nat = \"ar\"\niteration = 1\nkind = \"hang\"\n";
    let mut device = FakeDevice::default();
    let log = run_fake_log(text, &mut device, Some(StandIn::Model));
    let scenario = sim::scenario::parse("hang.toml", text).unwrap();
    let simulated = sim::engine::simulate(&scenario);
    let finding = |findings: &[Finding]| {
        let f = findings.iter().find(|f| f.rank == Some(0)).unwrap();
        (f.kind, f.iteration, f.op, f.message.contains("SeqNum=2"))
    };
    assert_eq!(
        finding(&log.findings),
        (FindingKind::WatchdogTimeout, Some(1), Some(0), true)
    );
    assert_eq!(finding(&log.findings), finding(&simulated.findings));
}

/// A barrier whose all_reduce never completes blocks in its stream synchronize until the
/// watchdog's verdict ends the run. Before PyTorch 2.8 that is after its `wait()` began: the
/// wait is kept, never returned, in both engines; from 2.8 on there is no Work to wait on
/// (R11, R14).
#[test]
fn a_wait_under_way_at_the_end_is_kept_on_the_unfinished_collective_never_returned() {
    let (ran, simulated) = fake_and_simulated(
        "hung_peer.toml",
        "torch = \"2.5\"\n[cluster]\nranks = 2\n[groups.world]\neager_init = true\ntimeout_s = 1\n\
         [[op]]\nlabel = \"ar\"\nbarrier = true\n\
         [[fault]]\nranks = [1]\nat = \"ar\"\nkind = \"hang\"\n",
    );
    for rank in [&ran, &simulated] {
        let wait = rank.unfinished_collectives[0]
            .wait
            .unwrap_or_else(|| panic!("the wait is kept: {rank:?}"));
        assert_eq!((wait.op, wait.host_end_ns), (0, None), "{rank:?}");
        let call = rank.unfinished_host.expect("the barrier never returned");
        assert_eq!(call.op, 0);
        assert_eq!(
            rank.unfinished_iteration,
            Some(0),
            "its profiler step never came"
        );
    }
    let (ran, simulated) = hung_peer("[[op]]\nlabel = \"ar\"\nbarrier = true\n");
    for rank in [&ran, &simulated] {
        assert_eq!(rank.unfinished_collectives[0].wait, None, "{rank:?}");
        let call = rank.unfinished_host.expect("the barrier never returned");
        assert_eq!(call.op, 0);
    }
}

/// A program that ran to its end leaves no iteration unfinished; one a `die` fault stopped
/// before its second iteration's all_reduce leaves that iteration so, in both engines.
#[test]
fn the_iteration_a_fault_stopped_is_unfinished() {
    let mut device = FakeDevice::default();
    assert_eq!(
        run_fake(ASYNC, &mut device).unwrap().unfinished_iteration,
        None
    );
    let text = "repeat = 2\n[cluster]\nranks = 1\n[groups.world]\neager_init = true\n\
                [tensors]\nx = \"1MiB\"\n[[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\n\
                [[fault]]\nranks = [0]\nat = \"ar\"\niteration = 1\nkind = \"die\"\n";
    let scenario = sim::scenario::parse("stopped.toml", text).unwrap();
    let simulated = sim::engine::simulate(&scenario).ranks.swap_remove(0);
    assert_eq!(simulated.unfinished_iteration, Some(1));
    let mut device = FakeDevice::default();
    let log = run_fake_log(text, &mut device, None);
    assert_eq!(log.unfinished_iteration, Some(1));
}
