//! Unit tests of the lowering: each op kind's steps, as both engines execute them.
//!
//! About 1,050 lines in one module: every test lowers a scenario through the same helper
//! (`lowered`, the steps as text) and reads the steps it gives; split by op kind, the parts
//! would share that helper and the scenarios from a module of their own.

use super::*;
use crate::scenario::parse;

/// The steps of every op of rank 0's first iteration, as text.
fn lowered(text: &str) -> Vec<String> {
    let scenario = parse("pg.toml", text).unwrap();
    let mut pg = ProcessGroupNccl::new(&scenario, 0);
    let mut steps = Vec::new();
    pg.prologue(&scenario, &mut steps);
    for op in scenario.ops.iter().filter(|op| op.runs_on(0)) {
        pg.before_op(&scenario, 0, op, &mut steps);
        pg.op(&scenario, op, &mut steps).unwrap();
    }
    steps.iter().map(Step::to_string).collect()
}

const ASYNC: &str = r#"
[cluster]
ranks = 2
[host]
collective_us = 10
collective_tail_us = 2
wait_us = 3
[tensors]
grad = "1MiB"
[[op]]
all_reduce = "grad"
async_op = true
work = "w"
[[op]]
wait = "w"
[[op]]
all_reduce = "grad"
async_op = true
work = "w"
"#;

#[test]
fn an_async_collective_is_r10_and_its_wait_r12() {
    let steps = lowered(ASYNC);
    assert_eq!(
        steps[..13],
        [
            "call",
            "check_comm g0",
            "init_comm g0",
            "device_sync +0ns",
            "collective_cost 8000..8000ns",
            "record s0 e0",
            "stream_wait s1 e0",
            "release_shelf g0",
            "nccl c0 g0 ALLREDUCE 1048576B seq 1 s0->s1 async ready e0 jitter 1.000000000",
            "write t0",
            "record s1 e1",
            "host_cost 2000ns",
            "watch c0 end e1 stash Some(0) Named(0)",
        ]
    );
    assert_eq!(
        steps[14..19],
        [
            "call",
            "wait c0 s0 e1 +3000ns",
            "release_on_wait c0",
            "wait_return c0",
            "return"
        ]
    );
    // R8: the communicator is created once, inside the first collective.
    assert_eq!(
        steps.iter().filter(|s| s.starts_with("init_comm")).count(),
        1
    );
    assert!(steps.contains(
        &"nccl c1 g0 ALLREDUCE 1048576B seq 2 s0->s1 async ready e2 jitter 1.000000000".to_string()
    ));
}

#[test]
fn a_name_bound_to_a_future_drops_the_work_it_held_and_a_future_drops_none_r18() {
    // `f = dist.all_reduce(h, async_op=True)`, then `f = w.get_future().then(cb)`: binding `f`
    // to the future drops the Work of c1 (its output goes, R18); binding `f` to the next Work
    // drops no Work, for a future holds none (`w` still holds c0's).
    let steps = lowered(
        r#"
[cluster]
ranks = 2
[streams]
pool = {}
[tensors]
g = "1MiB"
h = "1MiB"
[[op]]
all_reduce = "g"
async_op = true
work = "w"
[[op]]
all_reduce = "h"
async_op = true
work = "f"
[[op]]
get_future = "w"
then = { us = 15, stream = "pool" }
work = "f"
[[op]]
all_reduce = "h"
async_op = true
work = "f"
[[op]]
wait = "f"
"#,
    );
    let drops: Vec<&String> = steps
        .iter()
        .filter(|s| s.starts_with("drop_handle"))
        .collect();
    assert_eq!(drops, ["drop_handle c1"]);
}

#[test]
fn a_sync_collective_runs_on_the_current_stream_in_2_12_and_waits_in_2_5_r11() {
    let sync = "[cluster]\nranks = 2\n[host]\nwait_us = 3\n[tensors]\ngrad = \"1MiB\"\n[[op]]\nall_reduce = \"grad\"\n";
    let v2_12 = lowered(sync);
    assert!(v2_12
        .iter()
        .any(|s| s.starts_with("nccl c0 g0 ALLREDUCE 1048576B seq 1 s0->s0 ready")));
    assert!(!v2_12
        .iter()
        .any(|s| s.starts_with("stream_wait") || s.starts_with("wait ")));
    // No input-ready event: its point is a probe, and the end event the one record (R1).
    assert!(v2_12.contains(&"probe s0 e0".to_string()), "{v2_12:?}");
    assert_eq!(
        (v2_12.iter().filter(|s| s.starts_with("record "))).collect::<Vec<_>>(),
        ["record s0 e1"]
    );
    let v2_5 = lowered(&format!("torch = \"2.5\"\n{sync}"));
    assert!(v2_5
        .iter()
        .any(|s| s.starts_with("nccl c0 g0 ALLREDUCE 1048576B seq 1 s0->s1 ready")));
    assert!(v2_5.contains(&"wait c0 s0 e1 +3000ns".to_string()));
    assert!(v2_5.contains(&"watch c0 end e1 stash Some(0) Call".to_string()));
}

#[test]
fn a_sync_send_or_recv_is_isend_or_irecv_and_wait_in_every_profile_r11() {
    // `dist.send` is `isend(...).wait()`: ProcessGroupNCCL's point-to-point path has no
    // `asyncOp` and always runs on the pair's internal stream, in 2.12 as in 2.5; the wait
    // polls under blocking wait.
    let sync = "[cluster]\nranks = 2\n[host]\nwait_us = 3\n[tensors]\nact = \"1MiB\"\n\
                [[op]]\nranks = [0]\nsend = \"act\"\npeer = 1\n\
                [[op]]\nranks = [1]\nrecv = \"act\"\npeer = 0\n";
    for profile in ["2.12", "2.5"] {
        let steps = lowered(&format!("torch = \"{profile}\"\n{sync}"));
        let nccl = steps.iter().find(|s| s.starts_with("nccl ")).unwrap();
        assert!(
            nccl.contains("SEND") && nccl.contains("s0->s2 ready"),
            "{nccl}"
        );
        assert!(
            steps.contains(&"stream_wait s2 e0".to_string()),
            "{steps:?}"
        );
        assert!(
            steps.contains(&"wait c0 s0 e1 +3000ns".to_string()),
            "{steps:?}"
        );
        assert!(steps.contains(&"watch c0 end e1 stash Some(0) Call".to_string()));
    }
    let blocking = lowered(&format!("[env]\nTORCH_NCCL_BLOCKING_WAIT = 1\n{sync}"));
    assert!(
        blocking.iter().any(|s| s.starts_with("poll c0")),
        "{blocking:?}"
    );
}

#[test]
fn a_work_bound_by_isend_on_one_rank_and_irecv_on_the_other_is_waited_on_both_r11() {
    // `w = isend(...)` on rank 0, `w = irecv(...)` on rank 1, then `w.wait()` on both: every
    // rank that waits binds `w` earlier, each by its own op.
    let text = "[cluster]\nranks = 2\n[host]\nwait_us = 3\n[tensors]\nact = \"1MiB\"\n\
                [[op]]\nranks = [0]\nsend = \"act\"\npeer = 1\nasync_op = true\nwork = \"w\"\n\
                [[op]]\nranks = [1]\nrecv = \"act\"\npeer = 0\nasync_op = true\nwork = \"w\"\n\
                [[op]]\nwait = \"w\"\n";
    let steps = lowered(text);
    assert!(
        steps.iter().any(|s| s.starts_with("wait c0 s0")),
        "{steps:?}"
    );
}

#[test]
fn blocking_wait_and_a_timeout_poll_r15() {
    // Blocking wait polls until the group's timeout (600 s by default); wait(timeout) until
    // its own.
    let blocking = lowered(&format!("[env]\nTORCH_NCCL_BLOCKING_WAIT = 1\n{ASYNC}"));
    assert!(blocking.contains(&"poll c0 e1 every 1000000ns timeout 600000000000ns".to_string()));
    let timed = lowered(&ASYNC.replace("wait = \"w\"", "wait = \"w\"\ntimeout_ms = 3"));
    assert!(timed.contains(&"poll c0 e1 every 1000000ns timeout 3000000ns".to_string()));
    assert!(!lowered(ASYNC).iter().any(|s| s.starts_with("poll")));
}

#[test]
fn a_wait_timeout_is_whole_milliseconds_as_pytorch_keeps_it_r15() {
    // Work.wait(timeout=timedelta) reaches C++ as std::chrono::milliseconds, truncated; 0 is
    // kNoTimeout.
    for (timeout, waits) in [
        ("2.5", "PyTorch would wait 2 ms"),
        ("0.5", "wait 0 ms (0: no"),
    ] {
        let text = ASYNC.replace(
            "wait = \"w\"",
            &format!("wait = \"w\"\ntimeout_ms = {timeout}"),
        );
        let error = parse("pg.toml", &text).unwrap_err().to_string();
        assert!(
            error.contains(&format!(
                "timeout_ms must be a whole number of milliseconds, found {timeout}"
            )) && error.contains(waits),
            "{error}"
        );
    }
    // Out of range is said in milliseconds, before wholeness: not "-0 ms", "NaN ms" or µs.
    for (timeout, found) in [
        ("-0.5", "-0.5"),
        ("nan", "NaN"),
        ("inf", "inf"),
        ("-1", "-1"),
    ] {
        let text = ASYNC.replace(
            "wait = \"w\"",
            &format!("wait = \"w\"\ntimeout_ms = {timeout}"),
        );
        let error = parse("pg.toml", &text).unwrap_err().to_string();
        assert!(
            error.ends_with(&format!(
                "timeout_ms must be > 0 and at most one day (86400000 ms), found {found}"
            )),
            "{error}"
        );
    }
}

#[test]
fn in_2_5_only_blocking_wait_polls_r15() {
    // 2.5's wait(timeout) adds the stream dependency and returns; its timeout only bounds
    // a blocking wait's polls.
    let timed = ASYNC.replace("wait = \"w\"", "wait = \"w\"\ntimeout_ms = 3");
    let v2_5 = lowered(&format!("torch = \"2.5\"\n{timed}"));
    assert!(!v2_5.iter().any(|s| s.starts_with("poll")), "{v2_5:?}");
    assert!(v2_5.contains(&"wait c0 s0 e1 +3000ns".to_string()));
    let blocking = lowered(&format!(
        "torch = \"2.5\"\n[env]\nTORCH_NCCL_BLOCKING_WAIT = 1\n{timed}"
    ));
    assert!(blocking.contains(&"poll c0 e1 every 10000000ns timeout 3000000ns".to_string()));
}

#[test]
fn a_coalesced_block_is_one_call_whose_record_covers_the_recorded_calls_r25() {
    let block = "[cluster]\nranks = 2\n[host]\nevent_us = 2\n[tensors]\ng = { size = \"1KiB\", count = 4 }\n[[op]]\nall_reduce = \"g\"\ncoalesce = true\n";
    let steps = lowered(block);
    // Three calls only recorded, then the one that launches, inside one host record.
    assert_eq!(steps[..2], ["call", "host_cost 6000ns"]);
    assert_eq!(steps.iter().filter(|s| *s == "call").count(), 1);
    let priced = lowered(&block.replace("event_us = 2", "event_us = 2\ncoalesced_call_us = 4.5"));
    assert_eq!(priced[..2], ["call", "host_cost 13500ns"]);
}

#[test]
fn timing_gives_every_work_a_start_event_before_its_kernel_r6() {
    let untimed = lowered(ASYNC);
    for env in [
        "TORCH_NCCL_ENABLE_TIMING = 1",
        "TORCH_NCCL_DESYNC_DEBUG = 1",
    ] {
        let timed = lowered(&format!("[env]\n{env}\n{ASYNC}"));
        let nccl = timed.iter().position(|s| s.starts_with("nccl c0")).unwrap();
        assert_eq!(timed[nccl - 1], "record s1 e1", "{env}");
        assert!(timed.contains(&"watch c0 end e2 stash Some(0) Named(0)".to_string()));
        // One more event per collective, nothing else.
        assert_eq!(timed.len(), untimed.len() + 2);
    }
    assert!(untimed.contains(&"watch c0 end e1 stash Some(0) Named(0)".to_string()));
}

/// The last `n` steps of `steps`.
fn tail(steps: &[String], n: usize) -> Vec<&str> {
    steps[steps.len() - n..]
        .iter()
        .map(String::as_str)
        .collect()
}

#[test]
fn a_barrier_is_a_sync_allreduce_on_the_current_stream_then_that_stream_synchronised_r14() {
    // Measured on PyTorch 2.11 (tests/data/torch/probes/barrier/): no cudaStreamWaitEvent
    // (the all_reduce runs on the current stream), no Work, cudaStreamSynchronize of the
    // current stream inside the call.
    let text = "[cluster]\nranks = 2\n[groups.world]\neager_init = true\n[[op]]\nbarrier = true\n";
    let steps = lowered(text);
    assert_eq!(steps[0], "eager_init g0", "R8: created before the program");
    assert!(
        !steps.iter().any(|s| s.starts_with("init_comm")),
        "eager init"
    );
    assert!(
        (steps.iter()).any(|s| s.starts_with("nccl c0 g0 ALLREDUCE 4B seq 1 s0->s0 ready")),
        "{steps:?}"
    );
    assert!(!steps.iter().any(|s| s.starts_with("stream_wait")));
    assert_eq!(
        tail(&steps, 3),
        [
            "watch c0 end e1 stash None Call",
            "stream_sync s0 +5000ns",
            "return"
        ]
    );
    // Under blocking wait too: there is no Work to poll, only the stream to synchronise.
    let blocking = lowered(&format!("[env]\nTORCH_NCCL_BLOCKING_WAIT = 1\n{text}"));
    assert_eq!(tail(&blocking, 2), ["stream_sync s0 +5000ns", "return"]);
}

#[test]
fn a_barrier_before_2_8_is_an_allreduce_waited_on_then_the_current_stream_synchronised_r14() {
    let text = "torch = \"2.5\"\n[cluster]\nranks = 2\n[groups.world]\neager_init = true\n[[op]]\nbarrier = true\n";
    let steps = lowered(text);
    assert!(
        (steps.iter()).any(|s| s.starts_with("nccl c0 g0 ALLREDUCE 4B seq 1 s0->s1 ready")),
        "{steps:?}"
    );
    assert_eq!(
        tail(&steps, 6),
        [
            "watch c0 end e1 stash None Call",
            "wait c0 s0 e1 +4000ns",
            "release_on_wait c0",
            "stream_sync s0 +5000ns",
            "wait_return c0",
            "return"
        ]
    );
}

#[test]
fn an_async_barrier_returns_its_work_whose_wait_syncs_the_stream_unless_completed_r14() {
    // Measured on PyTorch 2.11 (tests/data/torch/probes/barrier/): the internal stream waits
    // on the current one, the all_reduce, a Work; its wait() makes the current stream wait and
    // queries the Work (WorkNCCL::synchronize: `isBarrierOp_ && !isCompleted()`).
    let text = "[cluster]\nranks = 2\n[groups.world]\neager_init = true\n[[op]]\nbarrier = true\nasync_op = true\nwork = \"b\"\n[[op]]\nwait = \"b\"\n";
    let steps = lowered(text);
    assert!(
        (steps.iter()).any(|s| s.starts_with("nccl c0 g0 ALLREDUCE 4B seq 1 s0->s1 async")),
        "{steps:?}"
    );
    assert_eq!(
        tail(&steps, 7),
        [
            "return",
            "call",
            "wait c0 s0 e1 +4000ns",
            "release_on_wait c0",
            "stream_sync_unless_completed c0 s0 e1 +1000ns +5000ns",
            "wait_return c0",
            "return"
        ]
    );
    let call = &steps[..steps.len() - 6];
    assert!(
        !call.iter().any(|s| s.starts_with("stream_sync")),
        "the call itself synchronises nothing: {call:?}"
    );
    // A polling wait (R15) polls and synchronises nothing.
    let blocking = lowered(&format!("[env]\nTORCH_NCCL_BLOCKING_WAIT = 1\n{text}"));
    assert!(
        tail(&blocking, 3)[0].starts_with("poll c0 e1"),
        "{blocking:?}"
    );
    // Before 2.8 the barrier Work's wait() always synchronises.
    let v2_5 = lowered(&format!("torch = \"2.5\"\n{text}"));
    assert_eq!(
        tail(&v2_5, 3),
        ["stream_sync s0 +5000ns", "wait_return c0", "return"]
    );
}

#[test]
fn the_prologue_creates_only_this_ranks_eager_communicators_r8() {
    let text = "[cluster]\nranks = 4\n[groups.world]\neager_init = true\n[groups.pair]\nranks = [0, 1]\neager_init = true\n[groups.far]\nranks = [2, 3]\neager_init = true\n[groups.lazy]\nranks = [0, 2]\n[tensors]\nx = \"1MiB\"\n[[op]]\nall_reduce = \"x\"\ngroup = \"pair\"\n[[op]]\nall_reduce = \"x\"\ngroup = \"lazy\"\n";
    let steps = lowered(text);
    assert_eq!(steps[..2], ["eager_init g0", "eager_init g1"]);
    let inits: Vec<&String> = steps.iter().filter(|s| s.contains("init")).collect();
    assert_eq!(inits, ["eager_init g0", "eager_init g1", "init_comm g3"]);
}

#[test]
fn straggler_delays_and_jitter_are_drawn_in_program_order() {
    let text = r#"
[cluster]
ranks = 2
kernel_jitter_pct = 10
[[op]]
label = "k"
kernel = { us = 100, sms = 4 }
[[perturb]]
ranks = [0]
before = "k"
host_delay_us = { normal = { mean = 50, std = 10 } }
gpu_delay_us = 7
"#;
    let scenario = parse("pg.toml", text).unwrap();
    let mut rng = rank_rng(scenario.seed, 0);
    let host_ns = scenario.perturbations[0].host_delay.sample_ns(&mut rng);
    scenario.perturbations[0].gpu_delay.sample_ns(&mut rng);
    let jitter = jitter_factor(0.1, &mut rng);
    let steps = lowered(text);
    assert_eq!(steps[0], format!("host_sleep {host_ns}ns"));
    assert_eq!(
        steps[1],
        "launch s0 Sleep spin 7000ns x1 jitter 1.000000000"
    );
    assert_eq!(
        steps[4],
        format!("launch s0 Compute spin 100000ns x4 own jitter {jitter:.9}")
    );
}

#[test]
fn a_work_prints_element_counts_as_pytorch_does() {
    let text = "[cluster]\nranks = 4\n[tensors]\nx = { size = \"4KiB\", dtype = \"bf16\" }\n[[op]]\nall_gather = \"x\"\n";
    let scenario = parse("pg.toml", text).unwrap();
    let op = &scenario.ops[0];
    let gather = (CollectiveKind::AllGather, 4096, DType::Bf16);
    assert_eq!(
        work_text(&scenario, op, gather, (0, 3)),
        "WorkNCCL(SeqNum=3, OpType=_ALLGATHER_BASE, NumelIn=512, NumelOut=2048, Timeout(ms)=600000)"
    );
    // A barrier all_reduces `at::zeros({1}, kFloat)`: one element, whatever its 4 bytes.
    let text = "[cluster]\nranks = 2\n[[op]]\nbarrier = true\n";
    let scenario = parse("pg.toml", text).unwrap();
    let barrier = (
        CollectiveKind::AllReduce,
        crate::collective::BARRIER_BYTES,
        DType::F32,
    );
    assert_eq!(
        work_text(&scenario, &scenario.ops[0], barrier, (0, 1)),
        "WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000)"
    );
    // A batch's Work comes from endCoalescing, made without tensors: its numelIn_ and
    // numelOut_ keep their default, size_t(-1), whatever the batch moves.
    let text = "[cluster]\nranks = 2\n[tensors]\na = \"1MiB\"\nb = \"1MiB\"\n[[op]]\n\
                batch_isend_irecv = [{ send = \"a\", shift = 1 }, { recv = \"b\", shift = -1 }]\n";
    let scenario = parse("pg.toml", text).unwrap();
    let batch = (CollectiveKind::BatchP2p, 1 << 20, DType::F32);
    assert_eq!(
        work_text(&scenario, &scenario.ops[0], batch, (0, 1)),
        "WorkNCCL(SeqNum=1, OpType=COALESCED, NumelIn=18446744073709551615, \
         NumelOut=18446744073709551615, Timeout(ms)=600000)"
    );
}

#[test]
fn a_coalescing_block_s_work_is_coalesced_whatever_its_calls_r25() {
    // PyTorch's `_coalescing_manager` issues the block through `allgather_into_tensor_coalesced`
    // (`collectiveCoalesced`, OpType::COALESCED); the element counts are the whole block's.
    let text = "[cluster]\nranks = 4\n[tensors]\ng = { size = \"1KiB\", count = 4 }\n\
                [[op]]\nall_gather = \"g\"\ncoalesce = true\n";
    let scenario = parse("pg.toml", text).unwrap();
    let block = (CollectiveKind::AllGather, 4096, DType::F32);
    assert_eq!(
        work_text(&scenario, &scenario.ops[0], block, (0, 1)),
        "WorkNCCL(SeqNum=1, OpType=COALESCED, NumelIn=256, NumelOut=1024, Timeout(ms)=600000)"
    );
    // The same list without the manager is one Work per tensor, each of its own kind.
    let each = parse("pg.toml", &text.replace("coalesce = true\n", "")).unwrap();
    assert_eq!(
        work_text(
            &each,
            &each.ops[0],
            (CollectiveKind::AllGather, 1024, DType::F32),
            (0, 1)
        ),
        "WorkNCCL(SeqNum=1, OpType=_ALLGATHER_BASE, NumelIn=64, NumelOut=256, Timeout(ms)=600000)"
    );
}

#[test]
fn only_the_process_s_first_gemm_of_each_dtype_pays_cublas_s_first_call_r1() {
    // Measured on an H200 (tests/data/torch/probes/first_gemm_shapes.txt): the first bf16, f32
    // and f16 GEMMs each cost 79-130 ms, a second bf16 shape 2.8 ms.
    let text = r#"
[host]
launch_us = 5
first_gemm_us = 80000
[[op]]
gemm = [1024, 1024, 1024]
[[op]]
kernel = { us = 10, sms = 1 }
[[op]]
gemm = [2048, 2048, 2048]
[[op]]
gemm = [512, 512, 512]
dtype = "f32"
[[op]]
gemm = [256, 256, 256]
dtype = "f32"
"#;
    let host_costs: Vec<String> = (lowered(text).into_iter())
        .filter(|step| step.starts_with("host_cost"))
        .collect();
    assert_eq!(
        host_costs,
        [
            "host_cost 5000ns",
            "host_cost 80000000ns",
            "host_cost 5000ns",
            "host_cost 5000ns",
            "host_cost 5000ns",
            "host_cost 80000000ns",
            "host_cost 5000ns"
        ],
        "the first bf16 GEMM's launch and cuBLAS's first call, plain launches, then the same for f32"
    );
    let unset = lowered(&text.replace("first_gemm_us = 80000\n", ""));
    assert!(
        !unset.iter().any(|step| step == "host_cost 0ns"),
        "no step where the profile measured nothing"
    );
}

#[test]
fn a_pipelines_point_to_point_seqnums_count_across_peers() {
    // Rank 1 of a three-stage pipeline: 500 iterations of a receive from rank 0 and a send to
    // rank 2. Its p2p Works are numbered 1, 2, 3, … across both peers, while each pair counts
    // its own calls.
    let text = "repeat = 500\n[cluster]\nranks = 3\n[tensors]\nx = \"1MiB\"\n\
        [[op]]\nranks = [1]\nrecv = \"x\"\npeer = 0\n[[op]]\nranks = [1]\nsend = \"x\"\npeer = 2\n";
    let scenario = parse("pipeline.toml", text).unwrap();
    let mut pg = ProcessGroupNccl::new(&scenario, 1);
    let mut steps = Vec::new();
    let mut calls = Vec::new();
    for iteration in 0..scenario.repeat {
        for op in scenario.ops.iter().filter(|op| op.runs_on(1)) {
            steps.clear();
            pg.before_op(&scenario, iteration, op, &mut steps);
            pg.op(&scenario, op, &mut steps).unwrap();
            calls.extend(steps.iter().filter_map(|step| match step {
                Step::Nccl(call) => Some((call.seq, call.seq_num)),
                _ => None,
            }));
        }
    }
    assert_eq!(calls.len(), 1000);
    for (record, &(group_seq, seq_num)) in calls.iter().enumerate() {
        assert_eq!(seq_num, record as u64 + 1);
        assert_eq!(
            group_seq,
            record as u64 / 2 + 1,
            "each pair counts its own calls"
        );
    }
}

#[test]
fn an_eager_world_s_send_and_recv_use_its_communicator_and_stream_and_warn_once_each_r11() {
    // Rank 1 of a pipeline on an eager world: two iterations of a receive from rank 0 and a
    // send to rank 2. No pair communicator is made; every call checks the world's (g0) and
    // runs on its stream; PyTorch warns at the first receive and at the first send
    // (`TORCH_WARN_ONCE` in each instantiation of `pointToPoint`).
    let text = "repeat = 2\n[cluster]\nranks = 3\n[groups.world]\neager_init = true\n\
        [tensors]\nx = \"1MiB\"\n\
        [[op]]\nranks = [1]\nrecv = \"x\"\npeer = 0\n[[op]]\nranks = [1]\nsend = \"x\"\npeer = 2\n";
    let steps_of = |text: &str| {
        let scenario = parse("pipeline.toml", text).unwrap();
        let mut pg = ProcessGroupNccl::new(&scenario, 1);
        let mut steps = Vec::new();
        pg.prologue(&scenario, &mut steps);
        for _ in 0..scenario.repeat {
            for op in scenario.ops.iter().filter(|op| op.runs_on(1)) {
                pg.op(&scenario, op, &mut steps).unwrap();
            }
        }
        let world_stream = pg.group_stream(0).unwrap();
        (steps.iter().map(Step::to_string))
            .filter(|s| {
                s.starts_with("check_comm")
                    || s.starts_with("init_comm")
                    || s.starts_with("eager_p2p_warning")
                    || s.starts_with("nccl")
            })
            .map(|s| match s.split_once(" s") {
                Some((head, rest)) if s.starts_with("nccl") => {
                    let on_world = rest.contains(&format!("->s{world_stream}"));
                    format!(
                        "{} on_world={on_world}",
                        head.split(' ').take(3).collect::<Vec<_>>().join(" ")
                    )
                }
                _ => s,
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(
        steps_of(text),
        [
            "check_comm g0",
            "eager_p2p_warning g0",
            "nccl c0 g1 on_world=true",
            "check_comm g0",
            "eager_p2p_warning g0",
            "nccl c1 g2 on_world=true",
            "check_comm g0",
            "nccl c2 g1 on_world=true",
            "check_comm g0",
            "nccl c3 g2 on_world=true",
        ]
    );
    let silenced = steps_of(&format!(
        "{text}[env]\nTORCH_NCCL_SHOW_EAGER_INIT_P2P_SERIALIZATION_WARNING = 0\n"
    ));
    assert!(
        !silenced.iter().any(|s| s.contains("warning")),
        "{silenced:?}"
    );
    let lazy = steps_of(&text.replace("eager_init = true\n", ""));
    assert_eq!(
        lazy[..3],
        ["check_comm g1", "init_comm g1", "nccl c0 g1 on_world=false"]
    );
}

#[test]
fn a_collective_after_a_batch_on_its_group_is_numbered_among_the_collectives() {
    // Rank 0: an all_reduce (the world's call 1), a send to rank 1 (its pair's call 1, the
    // process group's p2p call 1), a batch on the world (the world's call 2, p2p call 2: one
    // counter for both), an all_reduce (the world's call 3, its collective 2).
    let text = "[cluster]\nranks = 2\n[tensors]\nx = \"1MiB\"\ny = \"1MiB\"\n\
        [[op]]\nall_reduce = \"x\"\n\
        [[op]]\nranks = [0]\nsend = \"x\"\npeer = 1\n[[op]]\nranks = [1]\nrecv = \"x\"\npeer = 0\n\
        [[op]]\nbatch_isend_irecv = [{ send = \"x\", shift = 1 }, { recv = \"y\", shift = -1 }]\n\
        [[op]]\nall_reduce = \"x\"\n";
    let scenario = parse("batch.toml", text).unwrap();
    let mut pg = ProcessGroupNccl::new(&scenario, 0);
    let mut steps = Vec::new();
    let mut calls = Vec::new();
    for op in scenario.ops.iter().filter(|op| op.runs_on(0)) {
        steps.clear();
        pg.before_op(&scenario, 0, op, &mut steps);
        pg.op(&scenario, op, &mut steps).unwrap();
        calls.extend(steps.iter().filter_map(|step| match step {
            Step::Nccl(call) => Some((call.seq, call.seq_num)),
            _ => None,
        }));
    }
    assert_eq!(
        calls,
        [(1, 1), (1, 1), (2, 2), (3, 2)],
        "(group's count, Work's SeqNum)"
    );
}

#[test]
fn a_result_the_previous_iteration_left_unused_is_waited_before_its_first_use_r30() {
    // y = fcol.all_reduce(x); use(y); x = fcol.all_reduce(y), twice: the second iteration's
    // first call uses x, so it waits on the Work of the first iteration's last call (c1)
    // before it clones x; the first iteration has no such Work and waits on nothing there.
    let scenario = parse(
        "pg.toml",
        "repeat = 2\n[cluster]\nranks = 2\n[tensors]\nx = \"1MiB\"\ny = \"1MiB\"\n[[op]]\nfunctional_all_reduce = \"x\"\nresult = \"y\"\n[[op]]\nkernel = { us = 5 }\nreads = [\"y\"]\n[[op]]\nfunctional_all_reduce = \"y\"\nresult = \"x\"\n",
    )
    .unwrap();
    let mut pg = ProcessGroupNccl::new(&scenario, 0);
    let iteration = |pg: &mut ProcessGroupNccl| {
        let mut steps = Vec::new();
        for op in &scenario.ops {
            pg.op(&scenario, op, &mut steps).unwrap();
        }
        let waits: Vec<String> = (steps.iter().map(Step::to_string))
            .filter(|step| step.starts_with("wait ") || step.starts_with("nccl "))
            .map(|step| step.split(' ').take(2).collect::<Vec<_>>().join(" "))
            .collect();
        waits
    };
    assert_eq!(iteration(&mut pg), ["nccl c0", "wait c0", "nccl c1"]);
    assert_eq!(
        iteration(&mut pg),
        ["wait c1", "nccl c2", "wait c2", "nccl c3"]
    );
}

#[test]
fn a_bucket_s_wait_is_ddp_s_finalize_the_copy_back_into_the_gradients_r25() {
    // Two buckets: the copy in on the current stream (the gradients read, both buffers
    // written), each bucket's kernel on its buffer on the internal stream, and after the wait of the last bucket's
    // Work, on the stream current there, both buffers read and the gradients written.
    let text = "[cluster]\nranks = 2\n[groups.world]\neager_init = true\n[streams]\nside = {}\n\
                [tensors]\ngrads = { size = \"8MiB\", count = 4 }\n\
                [[op]]\nall_reduce = \"grads\"\nbucket = \"16MiB\"\nasync_op = true\n\
                work = \"w\"\n[[op]]\nstream = \"side\"\nwait = \"w\"\n";
    let steps = lowered(text);
    let accesses: Vec<&str> = (steps.iter().map(String::as_str))
        .filter(|step| {
            ["copy ", "read ", "write ", "nccl "]
                .iter()
                .any(|k| step.starts_with(k))
        })
        .collect();
    assert_eq!(
        accesses,
        [
            "copy s0",
            "read t0",
            "write bucket 0 of op 0",
            "write bucket 1 of op 0",
            "nccl c0 g0 ALLREDUCE 16777216B seq 1 s0->s2 async ready e0 jitter 1.000000000",
            "write bucket 0 of op 0",
            "nccl c1 g0 ALLREDUCE 16777216B seq 2 s0->s2 async ready e2 jitter 1.000000000",
            "write bucket 1 of op 0",
            "copy s1",
            "read bucket 0 of op 0",
            "read bucket 1 of op 0",
            "write t0",
        ]
    );
    assert_eq!(tail(&steps, 6)[..2], ["wait_return c1", "copy s1"]);
    // A collective of one tensor has no copy.
    assert!(!lowered(ASYNC).iter().any(|step| step.starts_with("copy")));
}

#[test]
fn a_work_name_whose_binding_call_raised_lowers_to_name_error_in_both_engines() {
    // `w = dist.all_reduce(...)` in try/except raised on an aborted communicator (R27): the
    // engine ran `aborted_call`'s steps instead of the op's, so nothing bound `w`, and each use
    // of the name raises NameError before calling anything. The lowering used to return an
    // error the engines treated as unreachable.
    let scenario = parse(
        "pg.toml",
        "[cluster]\nranks = 1\n[tensors]\nx = \"1MiB\"\n\
         [[op]]\nall_reduce = \"x\"\nasync_op = true\nwork = \"w\"\ncatch = true\n\
         [[op]]\nwait = \"w\"\n[[op]]\nis_completed = \"w\"\n[[op]]\nget_future = \"w\"\n",
    )
    .unwrap();
    let mut pg = ProcessGroupNccl::new(&scenario, 0);
    let mut steps = Vec::new();
    for op in &scenario.ops[1..] {
        steps.clear();
        pg.op(&scenario, op, &mut steps).unwrap();
        assert_eq!(
            steps,
            [Step::CallStart, Step::NameError { work: 0 }, Step::CallEnd],
            "{}",
            op.display_name()
        );
    }
}

#[test]
fn only_a_barrier_whose_fill_kernels_are_not_loaded_waits_for_the_device_first_r14() {
    // Under lazy module loading the fill kernels' module loads at the first fill in the
    // process, which waits for the device to drain: a `device_sync` opens the first barrier's
    // call, unless a tensor of any dtype was made (filled) before the program or modules load
    // eagerly.
    let program = |tensors: &str, env: &str| {
        format!(
            "[cluster]\nranks = 1\n[groups.world]\neager_init = true\n{tensors}{env}\
             [[op]]\nbarrier = true\n[[op]]\nbarrier = true\n"
        )
    };
    // Per barrier (its call checks the communicator): whether its call opens with a drain.
    let drains = |text: &str| -> Vec<usize> {
        let steps = lowered(text);
        let barriers: Vec<usize> = (steps.iter().enumerate())
            .filter(|(_, step)| step.as_str() == "check_comm g0")
            .map(|(at, _)| at)
            .collect();
        assert_eq!(barriers.len(), 2, "{steps:?}");
        (barriers.iter().enumerate())
            .filter(|(_, &at)| steps[at - 1] == "device_sync +0ns" && steps[at - 2] == "call")
            .map(|(barrier, _)| barrier)
            .collect()
    };
    assert_eq!(drains(&program("", "")), [0], "the first barrier only");
    let bf16 = "[tensors]\nx = { size = \"2B\", dtype = \"bf16\" }\n";
    assert_eq!(
        drains(&program(bf16, "")),
        [] as [usize; 0],
        "a bf16 fill loads the same module (measured)"
    );
    let f32 = "[tensors]\nx = \"4B\"\n";
    assert_eq!(drains(&program(f32, "")), [] as [usize; 0]);
    let dynamic = "[tensors]\nx = \"4B\"\n";
    let made_in_program = program(dynamic, "").replace(
        "[[op]]\nbarrier = true\n[[op]]",
        "[[op]]\nalloc = \"x\"\n[[op]]\nfree = \"x\"\n[[op]]\nbarrier = true\n[[op]]",
    );
    assert_eq!(
        drains(&made_in_program),
        [0],
        "made empty by the program: no fill"
    );
    let eager = "[env]\nCUDA_MODULE_LOADING = \"EAGER\"\n";
    assert_eq!(drains(&program("", eager)), [] as [usize; 0]);
    let lazy = "[env]\nCUDA_MODULE_LOADING = \"LAZY\"\n";
    assert_eq!(drains(&program("", lazy)), [0]);
}

#[test]
fn a_bucketed_op_of_the_rank_loads_the_fill_kernels_before_the_program_r14() {
    // DDP's bucket buffers are made before the program (`c10dsim torch`: `torch.ones`) on the
    // ranks that run the bucketed op, even where its gradients are made by the program: the
    // barrier after them finds the fill kernels loaded and does not wait for the device.
    let program = |ranks: &str| {
        format!(
            "[cluster]\nranks = 2\n[groups.world]\neager_init = true\n\
             [tensors]\ng = {{ size = \"4KiB\", count = 4 }}\n\
             [[op]]\nalloc = \"g\"\n[[op]]\nall_reduce = \"g\"\nbucket = \"8KiB\"\n{ranks}\
             [[op]]\nfree = \"g\"\n[[op]]\nbarrier = true\n"
        )
    };
    let opens_with_drain = |text: &str| {
        let steps = lowered(text);
        let barrier = (steps.iter().rposition(|step| step == "check_comm g0")).unwrap();
        steps[barrier - 1] == "device_sync +0ns"
    };
    assert!(!opens_with_drain(&program("")), "rank 0 builds the Reducer");
    assert!(
        opens_with_drain(&program("ranks = [1]\n")),
        "a rank that does not run the bucketed op holds no bucket buffer"
    );
}

#[test]
fn a_barrier_on_an_aborted_communicator_still_fills_first_r14_r27() {
    // ProcessGroupNCCL::barrier fills its tensor (at::zeros) before it reaches the
    // communicator, so on an aborted one it raises after the fill: a process that filled no
    // tensor yet waits for the device there (R14); an all_reduce raises at once.
    let text = "[cluster]\nranks = 1\n[tensors]\nx = \"1MiB\"\n\
                [[op]]\nalloc = \"x\"\n[[op]]\nall_reduce = \"x\"\ncatch = true\n\
                [[op]]\nfree = \"x\"\n[[op]]\nbarrier = true\ncatch = true\n";
    let scenario = parse("pg.toml", text).unwrap();
    let steps = |pg: &mut ProcessGroupNccl, op: usize| {
        let mut steps = Vec::new();
        pg.aborted_call(&scenario, &scenario.ops[op], 0, &mut steps);
        steps.iter().map(Step::to_string).collect::<Vec<_>>()
    };
    let mut pg = ProcessGroupNccl::new(&scenario, 0);
    assert_eq!(steps(&mut pg, 1), ["call", "check_comm g0", "return"]);
    assert_eq!(
        steps(&mut pg, 3),
        ["call", "device_sync +0ns", "check_comm g0", "return"]
    );
    assert_eq!(
        steps(&mut pg, 3),
        ["call", "check_comm g0", "return"],
        "the fill kernels are loaded now"
    );
}

#[test]
fn the_interpreter_s_work_facts_print_each_op_s_work_as_work_text_does() {
    // The PyTorch engine prints a raising wait()'s Work from `op_works` alone (docs/torch.md):
    // for every op that makes a Work, the facts give work_text's OpType, element counts for the
    // call's bytes, its communicator (R11) and that communicator's timeout.
    let text = "[cluster]\nranks = 4\n[tensors]\n\
                x = { size = \"4KiB\", dtype = \"bf16\" }\ng = { size = \"1KiB\", count = 4 }\n\
                [groups]\nworld = { eager_init = true, timeout_s = 9 }\n\
                half = { ranks = [0, 1], timeout_s = 0.007 }\n\
                [[op]]\nall_gather = \"x\"\n[[op]]\nreduce_scatter = \"x\"\ngroup = \"half\"\n\
                [[op]]\nall_gather = \"g\"\ncoalesce = true\n[[op]]\nbarrier = true\n\
                [[op]]\nsend = \"x\"\nranks = [0]\npeer = 1\n\
                [[op]]\nrecv = \"x\"\nranks = [1]\npeer = 0\n[[op]]\ngemm = [8, 8, 8]\n";
    let scenario = parse("pg.toml", text).unwrap();
    let works = op_works(&scenario);
    let communicators = Resolved::new(&scenario).communicators;
    assert_eq!(works.len(), scenario.ops.len());
    assert!(works[6].is_none(), "a gemm makes no Work");
    for (op, work) in scenario.ops.iter().zip(&works).take(6) {
        let work = work.expect("a collective makes a Work");
        let (kind, group) = op.kind.collective().unwrap();
        let bytes = scenario.call_sizes(&op.kind)[0];
        // As the interpreter evaluates them (timeline.py `work_text`).
        let numel = bytes / work.element_bytes;
        let (numel_in, numel_out) = (work.numel_in.of(numel), work.numel_out.of(numel));
        assert_eq!(
            format!(
                "WorkNCCL(SeqNum=2, OpType={}, NumelIn={numel_in}, NumelOut={numel_out}, Timeout(ms)={})",
                work.op_type, work.timeout_ms
            ),
            work_text(
                &scenario,
                op,
                (kind, bytes, op.kind.call_dtype(&scenario.tensors)),
                (group, 2),
            )
        );
    }
    assert_eq!(works[1].unwrap().timeout_ms, 7);
    // The eager world's pair sends on the world's communicator, under its timeout (R11).
    let pair = scenario.ops[4].kind.collective().unwrap().1;
    assert_eq!(
        (communicators[pair], works[4].unwrap().timeout_ms),
        (0, 9000)
    );
    assert_eq!(communicators[..2], [0, 1]);
    // The timeout is the process group's, not the communicator's: a lazy world's pair sends on
    // a communicator of its own, and its Work still carries the world's.
    let mut lazy = parse(
        "pg.toml",
        &text.replace("eager_init = true", "eager_init = false"),
    )
    .unwrap();
    let pair = lazy.ops[4].kind.collective().unwrap().1;
    lazy.groups[pair].timeout_ns = 1_000_000;
    assert_eq!(lazy.communicator(pair), pair);
    assert_eq!(lazy.work_timeout_ns(pair), 9_000_000_000);
    assert_eq!(op_works(&lazy)[4].unwrap().timeout_ms, 9000);
}

#[test]
fn the_interpreter_s_group_facts_are_the_process_groups_and_stream_priorities_simulated() {
    // The PyTorch engine numbers a call in its `process_groups` entry's Flight Recorder counts
    // and makes a group's internal stream at its `stream_high_priority` (docs/torch.md): each
    // the simulator's own, for every group of an eager world and of a lazy one, with and
    // without TORCH_NCCL_HIGH_PRIORITY.
    for (eager, env_high_priority) in [(true, 0), (false, 0), (false, 1)] {
        let text = format!(
            "[cluster]\nranks = 4\n[env]\nTORCH_NCCL_HIGH_PRIORITY = {env_high_priority}\n\
             [tensors]\nx = \"1KiB\"\n\
             [groups]\nworld = {{ eager_init = {eager}, high_priority = true }}\n\
             half = {{ ranks = [0, 1] }}\n\
             [[op]]\nall_reduce = \"x\"\ngroup = \"half\"\n\
             [[op]]\nsend = \"x\"\nranks = [2]\npeer = 3\n\
             [[op]]\nrecv = \"x\"\nranks = [3]\npeer = 2\n"
        );
        let scenario = parse("pg.toml", &text).unwrap();
        let resolved = Resolved::new(&scenario);
        let pair = scenario.ops[1].kind.collective().unwrap().1;
        assert_eq!(resolved.process_groups.len(), scenario.groups.len());
        for group in 0..scenario.groups.len() {
            assert_eq!(
                resolved.process_groups[group],
                scenario.process_group(group)
            );
        }
        assert_eq!(resolved.process_groups[..2], [0, 1]);
        assert_eq!(
            resolved.process_groups[pair], 0,
            "a pair's calls are the world's"
        );
        for rank in 0..4 {
            let streams = streams::rank_streams(&scenario, rank);
            for (group, stream) in streams::group_streams(&scenario, rank).iter().enumerate() {
                if let Some(stream) = stream {
                    assert_eq!(
                        resolved.stream_high_priority[group],
                        streams[*stream as usize].high_priority,
                        "group {group} on rank {rank}, eager {eager}"
                    );
                }
            }
        }
        // A pair's communicator is made with the world's options, its stream at the world's
        // priority, whether its own or (eager) the world's.
        assert!(resolved.stream_high_priority[pair]);
        assert_eq!(resolved.stream_high_priority[1], env_high_priority == 1);
    }
}

#[test]
fn the_interpreter_s_setup_facts_are_the_ranks_whose_setup_call_creates_the_communicator() {
    // A process taken down inside `init_process_group` or `new_group` is blocked on the
    // group's communicator only where that call creates it on the rank (R8); the PyTorch
    // engine's journal says so from `setup_communicator_ranks` (docs/torch.md): each rank's
    // setup call lowers to a communicator's creation (or its unique id's fetch) exactly there.
    let base = "[cluster]\nranks = 3\n[groups]\nmine = { ranks = [0, 1] }\n\
                theirs = { ranks = [2] }\n[[op]]\nlabel = \"init\"\ninit_process_group = true\n\
                [[op]]\nnew_group = \"mine\"\n[[op]]\nnew_group = \"theirs\"\n";
    for (sets, expected) in [
        ("", [vec![], vec![], vec![]]),
        ("device_id = true\n", [vec![0, 1, 2], vec![0, 1], vec![2]]),
        (
            "device_id = true\n[env]\nTORCH_NCCL_USE_COMM_NONBLOCKING = 1\n",
            [vec![0, 1, 2], vec![0, 1], vec![2]],
        ),
    ] {
        let text = base.replace(
            "init_process_group = true\n",
            &format!("init_process_group = true\n{sets}"),
        );
        let scenario = parse("pg.toml", &text).unwrap();
        let resolved = Resolved::new(&scenario);
        assert_eq!(resolved.setup_communicator_ranks, expected, "{sets}");
        for rank in 0..3 {
            let mut pg = ProcessGroupNccl::new(&scenario, rank);
            for op in &scenario.ops {
                let mut steps = Vec::new();
                pg.op(&scenario, op, &mut steps).unwrap();
                let group = match op.kind {
                    OpKind::NewGroup { group } => group,
                    _ => 0,
                };
                let creates = steps.iter().any(|step| {
                    matches!(step, Step::InitComm { group: g, .. } | Step::FetchUniqueId { group: g, .. } if *g == group)
                });
                assert_eq!(
                    creates,
                    resolved.setup_communicator_ranks[group].contains(&rank),
                    "rank {rank}, op {}, {sets}",
                    op.index
                );
            }
        }
    }
}

#[test]
fn the_interpreter_s_functional_works_are_the_functional_collectives_results_r30() {
    // The PyTorch engine calls a collective through `_functional_collectives` and a wait as its
    // `wait_tensor` where `functional_works` says the Work is a functional result's
    // (docs/torch.md): the Works of the ops carrying a result, as the lowering tells them, and
    // no program's Work, whatever its name.
    let text = "[cluster]\nranks = 2\n[tensors]\nx = \"1MiB\"\ny = \"1MiB\"\n\
                [[op]]\nall_reduce = \"x\"\nasync_op = true\nwork = \"w\"\n\
                [[op]]\nfunctional_all_reduce = \"x\"\nresult = \"y\"\n\
                [[op]]\nwait = \"w\"\n[[op]]\nkernel = { us = 5 }\nreads = [\"y\"]\n";
    let scenario = parse("pg.toml", text).unwrap();
    let functional = Resolved::new(&scenario).functional_works;
    assert_eq!(functional.len(), scenario.works.len());
    for (work, name) in scenario.works.iter().enumerate() {
        let by_result = scenario.ops.iter().any(|op| {
            matches!(op.kind, OpKind::Collective { work: Some(w), result: Some(_), .. } if w == work)
        });
        assert_eq!(functional[work], by_result, "{name}");
    }
    assert_eq!(functional.iter().filter(|f| **f).count(), 1);
    let w = scenario.works.iter().position(|name| name == "w").unwrap();
    assert!(!functional[w]);
}

#[test]
fn a_barrier_s_work_fact_gives_its_call_s_bytes_as_one_element() {
    // The PyTorch engine records a barrier's call as one element of `op_works[op]
    // .element_bytes` (docs/torch.md): that is the call the simulator issues (R14).
    let scenario = parse("pg.toml", "[cluster]\nranks = 2\n[[op]]\nbarrier = true\n").unwrap();
    let work = op_works(&scenario)[0].expect("a barrier makes a Work");
    assert_eq!(
        scenario.call_sizes(&scenario.ops[0].kind),
        [work.element_bytes]
    );
    assert_eq!((work.numel_in.of(1), work.numel_out.of(1)), (1, 1));
}
