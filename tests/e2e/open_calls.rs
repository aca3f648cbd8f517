//! Host calls that never returned: a `.item()` or a polling `wait()` still blocked when the
//! watchdog took the process down is kept as the rank's `unfinished_host`, never as a completed
//! call, and the trace writes it as torch.profiler writes an op still open when it stopped;
//! a call that raised, uncaught, ended at its raise.

use crate::faults::{MS, US};
use crate::util::{c10dsim, run_with, stderr};
use serde_json::Value;
use sim::timeline::{ExitStatus, HostBlock, UnfinishedHostCall};

/// `hang_10min`: ranks 0-2 block in `.item()` (op 2) from 34 µs (the all_reduce's 30 µs, the
/// wait's 4 µs) until their watchdog takes the process down at 660.1 s; rank 3 hangs before
/// any call.
#[test]
fn an_item_blocked_behind_a_hang_is_kept_open_with_the_stream_it_waits_on() {
    let timeline = run_with("hang_10min.toml", &[]).expand();
    for rank in &timeline.ranks {
        if rank.rank == 3 {
            assert_eq!(rank.unfinished_host, None);
            continue;
        }
        assert_eq!(
            rank.unfinished_host,
            Some(UnfinishedHostCall {
                iteration: 0,
                op: 2,
                start_ns: 34 * US,
                blocked_on: Some(HostBlock::Stream { stream: 0 }),
            }),
            "rank {}",
            rank.rank
        );
        assert!(
            rank.host.iter().all(|call| call.op != 2),
            "never a completed call"
        );
        // The wait() before it returned: its record keeps its end.
        let wait = rank.unfinished_collectives[0].wait.expect("wait() called");
        assert_eq!(wait.host_end_ns, Some(34 * US));
    }
}

#[test]
fn the_trace_writes_the_open_call_to_the_end_of_the_capture_as_not_finished() {
    let trace = hang_10min_trace_of_rank(0, "open-calls");
    let events = trace["traceEvents"].as_array().unwrap();
    let host = |name: &str| {
        events
            .iter()
            .find(|e| e["tid"] == 1 && e["name"].as_str().is_some_and(|n| n.starts_with(name)))
            .unwrap_or_else(|| panic!("no {name} on the host"))
    };
    // Open from 34 µs to the process's end at 660.1 s, with Kineto's `finished: false`; and so
    // is the profiler step it is in.
    let item = host("aten::item");
    assert_eq!(
        (&item["ts"], &item["dur"]),
        (&34.into(), &(660_100_000 - 34).into())
    );
    assert_eq!(item["args"]["finished"], false);
    let step = host("ProfilerStep#0");
    assert_eq!(
        (&step["ts"], &step["dur"]),
        (&0.into(), &660_100_000.into())
    );
    assert_eq!(step["args"]["finished"], false);
}

/// Rank 3 of `hang_10min` hangs (a `hang` fault) before its first call: its program never
/// finished iteration 0, whose profiler step is open from 0 to the end of the capture (its
/// process's end, 1081 s, the heartbeat monitor's abort) though it made no call.
#[test]
fn a_rank_a_hang_fault_stopped_has_its_step_open_to_the_end_of_the_capture() {
    let timeline = run_with("hang_10min.toml", &[]).expand();
    let unfinished: Vec<Option<u32>> = (timeline.ranks.iter())
        .map(|r| r.unfinished_iteration)
        .collect();
    assert_eq!(unfinished, [Some(0); 4]);
    let trace = hang_10min_trace_of_rank(3, "open-step");
    let steps: Vec<&Value> = (trace["traceEvents"].as_array().unwrap().iter())
        .filter(|e| {
            e["name"]
                .as_str()
                .is_some_and(|n| n.starts_with("ProfilerStep"))
        })
        .collect();
    let [step] = steps.as_slice() else {
        panic!("one step: {steps:?}");
    };
    assert_eq!(step["name"], "ProfilerStep#0");
    assert_eq!(
        (&step["ts"], &step["dur"]),
        (&0.into(), &1_081_000_000.into())
    );
    assert_eq!(step["args"]["finished"], false);
}

/// A `wait(timeout=600 s)` on a collective rank 1 never joins, under a 1-s group timeout: the
/// watchdog times the Work out at 1.1 s and takes the process down after the 60-s dump wait,
/// the wait still polling.
#[test]
fn a_polling_wait_still_blocked_names_its_work_and_never_returned() {
    let text = r#"
name = "open_wait"
repeat = 1
warmup = 0
[cluster]
ranks = 2
[groups.world]
eager_init = true
timeout_s = 1
[tensors]
x = "1MiB"
[[op]]
label = "ar"
all_reduce = "x"
async_op = true
work = "w"
[[op]]
wait = "w"
timeout_ms = 600_000
[[fault]]
ranks = [1]
at = "ar"
kind = "hang"
"#;
    let scenario = sim::scenario::parse("open_wait.toml", text).unwrap();
    let timeline = sim::engine::simulate(&scenario);
    let rank = &timeline.ranks[0];
    let end = rank.end.unwrap();
    assert_eq!(
        (end.status, end.at_ns),
        (ExitStatus::Aborted, Some(61_100 * MS))
    );
    assert_eq!(
        rank.unfinished_host,
        Some(UnfinishedHostCall {
            iteration: 0,
            op: 1,
            start_ns: 30 * US,
            blocked_on: Some(HostBlock::Work {
                group: 0,
                seq: 1,
                aborting: false
            }),
        })
    );
    let wait = rank.unfinished_collectives[0].wait.expect("wait() called");
    assert_eq!((wait.host_start_ns, wait.host_end_ns), (30 * US, None));
    assert_eq!(rank.host.len(), 1, "only the all_reduce returned");
}

/// Ranks 1-3 of `rank0_crash_init` wait in `store.get` of the unique id until the store's
/// timeout raises `DistStoreError` at 600 s, uncaught: that call ended at its raise.
#[test]
fn a_call_that_raised_uncaught_ends_at_its_raise() {
    let timeline = run_with("rank0_crash_init.toml", &[]).expand();
    for rank in &timeline.ranks[1..] {
        let end = rank.end.unwrap();
        assert_eq!(end.status, ExitStatus::Raised);
        let last = rank.host.last().expect("the call that raised");
        assert_eq!(Some(last.end_ns), end.at_ns, "rank {}", rank.rank);
        assert_eq!(rank.unfinished_host, None);
    }
}

/// A polling `wait()` that raised ends at its raise, its record on the Work too: in
/// `wait_timeout` (caught) the wait times out at 50 ms and raises once the abort returned with
/// the 300-ms backlog drained; in `hang_10min` under blocking wait (uncaught) ranks 0-2 raise at
/// 600 s.
#[test]
fn a_polling_wait_that_raised_ends_its_wait_record_at_the_raise() {
    let cases = [
        ("wait_timeout.toml", &[][..], 300_008 * US),
        (
            "hang_10min.toml",
            &["env.TORCH_NCCL_BLOCKING_WAIT=1"][..],
            600_000_034 * US,
        ),
    ];
    for (name, overrides, raised_ns) in cases {
        let timeline = run_with(name, overrides).expand();
        for rank in timeline.ranks.iter().filter(|r| r.rank != 3) {
            let wait = rank.unfinished_collectives[0].wait.expect("wait() called");
            let call = rank.host.iter().find(|c| c.op == wait.op).unwrap();
            assert_eq!(call.end_ns, raised_ns, "{name} rank {}", rank.rank);
            assert_eq!(
                wait.host_end_ns,
                Some(raised_ns),
                "{name} rank {}",
                rank.rank
            );
        }
    }
}

/// `run scenarios/hang_10min.toml --trace-dir` into a temporary folder named after `test`, and
/// the trace `rank` wrote there.
fn hang_10min_trace_of_rank(rank: u32, test: &str) -> Value {
    let dir = std::env::temp_dir().join(format!("c10dsim-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let output = c10dsim(&[
        "run",
        "scenarios/hang_10min.toml",
        "--trace-dir",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let text = std::fs::read_to_string(dir.join(format!("rank{rank}.pt.trace.json"))).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    serde_json::from_str(&text).unwrap()
}
