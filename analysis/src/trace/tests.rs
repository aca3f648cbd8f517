//! The writer's files as their readers see them: parsed back, then checked event by event.
//!
//! About 1,300 lines in one module: every test simulates a scenario and parses the writer's
//! files back through the same few helpers (`simulated`, `rank_files`, `events`, `named`,
//! `span`); split by event kind, the parts would share them from a module of their own.

use super::events::{listed_ranks, Launches};
use super::*;
use serde_json::{json, Value};
use sim::timeline::{Finding, FindingKind, HostCall};
use std::collections::BTreeSet;

/// Two ranks, 3 iterations (the first a warm-up) of an async all_reduce, a GEMM and a wait.
fn simulated(extra: &str) -> Timeline {
    let text = format!(
        "repeat = 3\nwarmup = 1\n[cluster]\nranks = 2\n{extra}[tensors]\ngrad = \"8MiB\"\n\
         [[op]]\nlabel = \"ar\"\nall_reduce = \"grad\"\nasync_op = true\nwork = \"w\"\n\
         [[op]]\nlabel = \"mm\"\ngemm = [2048, 2048, 2048]\n[[op]]\nwait = \"w\"\n"
    );
    let scenario = sim::scenario::parse("t.toml", &text).unwrap();
    sim::engine::simulate(&scenario)
}

/// Each rank's file, parsed, by rank.
fn rank_files(timeline: &Timeline) -> Vec<(String, String, Value)> {
    let traces = RankTraces::new(timeline);
    traces
        .files()
        .map(|(position, name)| {
            let mut bytes = Vec::new();
            traces.write(position, &mut bytes).unwrap();
            let text = String::from_utf8(bytes).unwrap();
            let value = serde_json::from_str(&text).unwrap();
            (name, text, value)
        })
        .collect()
}

fn single_file(timeline: &Timeline) -> Value {
    let mut bytes = Vec::new();
    write_chrome_trace(timeline, &mut bytes).unwrap();
    serde_json::from_slice(&bytes).unwrap()
}

fn events(trace: &Value) -> &Vec<Value> {
    trace["traceEvents"].as_array().unwrap()
}

fn named<'a>(trace: &'a Value, name: &str) -> Vec<&'a Value> {
    events(trace).iter().filter(|e| e["name"] == name).collect()
}

fn span(event: &Value) -> (f64, f64) {
    let ts = event["ts"].as_f64().unwrap();
    (ts, ts + event["dur"].as_f64().unwrap())
}

fn within(inner: &Value, outer: &Value) -> bool {
    let ((inner_start, inner_end), (outer_start, outer_end)) = (span(inner), span(outer));
    outer_start <= inner_start && inner_end <= outer_end
}

#[test]
fn every_rank_file_says_which_rank_it_is_before_any_event() {
    let timeline = simulated("");
    let files = rank_files(&timeline);
    assert_eq!(files.len(), 2);
    for (rank, (name, text, trace)) in files.iter().enumerate() {
        assert_eq!(name, &format!("rank{rank}.pt.trace.json"));
        let info = &trace["distributedInfo"];
        assert_eq!(info["backend"], "nccl");
        assert_eq!(info["rank"], rank);
        assert_eq!(info["world_size"], 2);
        assert_eq!(info["pg_config"][0]["pg_desc"], "default_pg");
        assert_eq!(info["pg_config"][0]["ranks"], serde_json::json!([0, 1]));
        let device = &trace["deviceProperties"][0];
        assert_eq!(
            (device["id"].clone(), device["numSms"].clone()),
            (rank.into(), 132.into())
        );
        // HTA finds the rank with the pattern `"rank":\s+(\d+)`: the first such text in the
        // file is distributedInfo's, before the events.
        let first = text.find("\"rank\": ").unwrap();
        assert_eq!(&text[first..first + 9], format!("\"rank\": {rank}"));
        assert!(first < text.find("traceEvents").unwrap());
        // Every event is this rank's process, none the pid HTA reads as a GPU.
        assert!(events(trace).iter().all(|e| e["pid"] == rank + 1));
    }
}

#[test]
fn distributed_info_lists_the_rank_s_process_groups_not_pair_communicators() {
    // The profiler's `_get_distributed_info` (torch/profiler/profiler.py) writes `pg_count`,
    // `dist.get_pg_count()` (every process group made, on every rank), and `pg_config`,
    // `_get_all_pg_configs()` over `_world.pg_map`, which holds the groups the rank is a member
    // of; a send's two-rank communicator (`p2p:0:1`) is ProcessGroupNCCL's own, no group.
    let text = "[cluster]\nranks = 3\n[groups.sub]\nranks = [1, 2]\n[tensors]\nx = \"1MiB\"\n\
                [[op]]\nall_reduce = \"x\"\n[[op]]\nranks = [1, 2]\nall_reduce = \"x\"\ngroup = \"sub\"\n\
                [[op]]\nranks = [0]\nsend = \"x\"\npeer = 1\n[[op]]\nranks = [1]\nrecv = \"x\"\npeer = 0\n";
    let timeline = sim::engine::simulate(&sim::scenario::parse("d.toml", text).unwrap());
    assert_eq!(timeline.scenario.groups, ["world", "sub", "p2p:0:1"]);
    let configs: Vec<(Value, Vec<Value>)> = rank_files(&timeline)
        .iter()
        .map(|(_, _, trace)| {
            let info = &trace["distributedInfo"];
            let groups = (info["pg_config"].as_array().unwrap().iter())
                .map(|g| json!([g["pg_name"], g["pg_desc"], g["pg_size"], g["ranks"]]))
                .collect();
            (info["pg_count"].clone(), groups)
        })
        .collect();
    let world = json!(["0", "default_pg", 3, [0, 1, 2]]);
    let sub = json!(["1", "sub", 2, [1, 2]]);
    assert_eq!(
        configs,
        [
            (json!(2), vec![world.clone()]),
            (json!(2), vec![world.clone(), sub.clone()]),
            (json!(2), vec![world, sub])
        ]
    );
}

#[test]
fn each_kernel_pairs_with_one_launch_on_the_host_by_correlation() {
    let timeline = simulated("");
    for (_, _, trace) in rank_files(&timeline) {
        let kernels: Vec<&Value> = events(&trace)
            .iter()
            .filter(|e| e["cat"] == "kernel")
            .collect();
        let launches = named(&trace, "cudaLaunchKernel");
        assert_eq!(
            kernels.len(),
            3 * 2,
            "an all_reduce and a GEMM per iteration"
        );
        assert_eq!(launches.len(), kernels.len());
        let host_calls: Vec<&Value> = events(&trace)
            .iter()
            .filter(|e| e["cat"] == "cpu_op" && e["name"] != "record_param_comms")
            .collect();
        for kernel in &kernels {
            let correlation = &kernel["args"]["correlation"];
            let paired: Vec<&&Value> = launches
                .iter()
                .filter(|l| &l["args"]["correlation"] == correlation)
                .collect();
            assert_eq!(paired.len(), 1, "{kernel}");
            let launch = paired[0];
            // The launch is on the host thread, inside its call, and ends before the kernel
            // starts; the kernel is on its stream's thread with that stream as argument.
            assert_eq!(launch["tid"], 1);
            assert_eq!(launch["cat"], "cuda_runtime");
            assert_eq!(launch["args"]["cbid"], 211);
            assert!(
                host_calls.iter().any(|call| within(launch, call)),
                "{launch}"
            );
            assert!(span(launch).1 <= span(kernel).0);
            assert_eq!(kernel["tid"], kernel["args"]["stream"]);
            assert!(kernel["args"]["stream"].as_u64().unwrap() >= 2);
            // torch.profiler's ac2g arrow joins them.
            let flows: Vec<&Value> = events(&trace)
                .iter()
                .filter(|e| e["cat"] == "ac2g" && &e["id"] == correlation)
                .collect();
            assert_eq!(flows.len(), 2);
            assert_eq!(
                (flows[0]["ph"].as_str(), flows[0]["tid"].as_u64()),
                (Some("s"), Some(1))
            );
            assert_eq!(flows[1]["ph"], "f");
            assert_eq!(flows[1]["tid"], kernel["tid"]);
            assert_eq!(flows[1]["ts"], kernel["ts"]);
        }
    }
}

#[test]
fn nccl_kernels_carry_the_compiled_name_and_the_model_s_choice() {
    let timeline = simulated("[env]\nNCCL_ALGO = \"Ring\"\nNCCL_PROTO = \"Simple\"\n");
    assert_eq!(
        timeline.ops[0].kernel_name.as_deref(),
        Some("ncclDevKernel_AllReduce_Sum_f32_RING_SIMPLE")
    );
    let trace = single_file(&timeline);
    let nccl: Vec<&Value> = events(&trace)
        .iter()
        .filter(|e| e["cat"] == "kernel" && e["args"]["op"] == "ar")
        .collect();
    assert_eq!(nccl.len(), 2 * 3);
    for kernel in nccl {
        assert_eq!(
            kernel["name"],
            "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
        );
        assert_eq!(kernel["args"]["algorithm"], "RING");
        assert_eq!(kernel["args"]["protocol"], "SIMPLE");
    }
    // Other kernels keep the Timeline's name.
    let gemm = timeline.ops[1].kernel_name.as_deref().unwrap();
    assert!(gemm.starts_with("gemm_"));
    assert_eq!(named(&trace, gemm).len(), 2 * 3);
}

#[test]
fn record_param_comms_sits_inside_each_collective_call_with_pytorch_s_arguments() {
    let timeline = simulated("");
    let (_, _, trace) = &rank_files(&timeline)[1];
    let calls = named(trace, "c10d::allreduce_");
    let (waits, params): (Vec<&Value>, Vec<&Value>) = named(trace, "record_param_comms")
        .into_iter()
        .partition(|p| p["args"]["Collective name"] == "wait");
    assert_eq!((calls.len(), params.len()), (3, 3));
    // `WorkNCCL::wait` records its own, inside `Work.wait`, around its cudaStreamWaitEvent.
    let wait_calls = named(trace, "Work.wait");
    let stream_waits: Vec<&Value> = named(trace, "cudaStreamWaitEvent")
        .into_iter()
        .filter(|e| e["args"]["op"] == "wait#2")
        .collect();
    assert_eq!(
        (waits.len(), wait_calls.len(), stream_waits.len()),
        (3, 3, 3)
    );
    for (seq, ((wait, call), stream_wait)) in
        waits.iter().zip(&wait_calls).zip(&stream_waits).enumerate()
    {
        assert!(within(wait, call) && within(call, wait), "{wait}\n{call}");
        assert!(within(stream_wait, wait));
        let args = &wait["args"];
        assert_eq!(
            (
                &args["dtype"],
                &args["In msg nelems"],
                &args["Out msg nelems"]
            ),
            (&json!("Byte"), &json!(0), &json!(0))
        );
        assert_eq!(
            (&args["Group size"], &args["Process Group Ranks"]),
            (&json!(1), &json!("[]"))
        );
        assert_eq!(args["Process Group Name"], "0");
        assert_eq!(args["Rank"], 1);
        assert_eq!(args["Seq"], seq + 1);
    }
    for (seq, (call, param)) in calls.iter().zip(&params).enumerate() {
        assert!(within(param, call));
        let args = &param["args"];
        assert_eq!(args["Collective name"], "allreduce");
        assert_eq!(args["dtype"], "Float");
        assert_eq!(args["In msg nelems"], 2 * 1024 * 1024);
        assert_eq!(args["Out msg nelems"], 2 * 1024 * 1024);
        assert_eq!(args["Group size"], 2);
        assert_eq!(args["Process Group Name"], "0");
        assert_eq!(args["Process Group Description"], "default_pg");
        assert_eq!(args["Process Group Ranks"], "[0, 1]");
        assert_eq!(args["Rank"], 1);
        assert_eq!(args["Seq"], seq + 1);
    }
}

#[test]
fn record_param_comms_seq_is_the_work_s_seqnum_and_the_record_keeps_it_where_it_differs() {
    // Rank 1 of a pipeline: a receive from rank 0, a send to rank 2 (its second point-to-point
    // call, the first on that pair), then an all_reduce (the world's first collective).
    let text = "[cluster]\nranks = 3\n[tensors]\nx = \"1MiB\"\n\
                [[op]]\nranks = [0]\nsend = \"x\"\npeer = 1\n[[op]]\nranks = [1]\nrecv = \"x\"\npeer = 0\n\
                [[op]]\nranks = [1]\nsend = \"x\"\npeer = 2\n[[op]]\nranks = [2]\nrecv = \"x\"\npeer = 1\n\
                [[op]]\nall_reduce = \"x\"\n";
    let timeline = sim::engine::simulate(&sim::scenario::parse("p.toml", text).unwrap());
    let rank1 = &timeline.ranks[1].collectives;
    let numbers: Vec<(u64, u64)> = rank1.iter().map(|c| (c.seq, c.seq_num())).collect();
    assert_eq!(
        numbers,
        [(1, 1), (1, 2), (1, 1)],
        "(the group's count, the Work's SeqNum)"
    );
    let json = serde_json::to_value(rank1).unwrap();
    let kept: Vec<&Value> = (json.as_array().unwrap().iter())
        .map(|c| &c["work_seq_num"])
        .collect();
    assert_eq!(kept, [&Value::Null, &Value::from(2), &Value::Null]);
    let back: Vec<sim::timeline::CollectiveRecord> = serde_json::from_value(json).unwrap();
    assert_eq!(&back, rank1);
    let (_, _, trace) = &rank_files(&timeline)[1];
    let seqs: Vec<(&str, u64)> = named(trace, "record_param_comms")
        .iter()
        .map(|p| {
            (
                p["args"]["Collective name"].as_str().unwrap(),
                p["args"]["Seq"].as_u64().unwrap(),
            )
        })
        .collect();
    // A synchronous send or receive is isend/irecv then wait(), which records its own.
    assert_eq!(
        seqs,
        [
            ("recv", 1),
            ("wait", 1),
            ("send", 2),
            ("wait", 2),
            ("allreduce", 1)
        ]
    );
}

#[test]
fn a_send_or_receive_records_its_process_group_and_its_peer_not_its_pair_communicator() {
    // Rank 1 of a three-stage pipeline receives from rank 0 and sends to rank 2, on the pairs'
    // communicators `p2p:0:1` and `p2p:1:2`. ProcessGroupNCCL::send/recv hand the profiler the
    // process group's name, start, stride and size and the peer as the rank (`pointToPoint`
    // only picks the pair's communicator); the profiler lists the group's ranks and adds the
    // peer's global rank as `Src Rank` / `Dst Rank`. Their Works' waits record the group too.
    let text = "[cluster]\nranks = 3\n[tensors]\nx = \"1MiB\"\n\
                [[op]]\nranks = [0]\nsend = \"x\"\npeer = 1\n[[op]]\nranks = [1]\nrecv = \"x\"\npeer = 0\n\
                [[op]]\nranks = [1]\nsend = \"x\"\npeer = 2\n[[op]]\nranks = [2]\nrecv = \"x\"\npeer = 1\n";
    let timeline = sim::engine::simulate(&sim::scenario::parse("p.toml", text).unwrap());
    let (_, _, trace) = &rank_files(&timeline)[1];
    let keys = [
        "Collective name",
        "Process Group Name",
        "Process Group Description",
        "Global rank start",
        "Global rank stride",
        "Group size",
        "Process Group Ranks",
        "Rank",
        "Src Rank",
        "Dst Rank",
    ];
    let args: Vec<Vec<&Value>> = named(trace, "record_param_comms")
        .iter()
        .map(|p| keys.iter().map(|key| &p["args"][key]).collect())
        .collect();
    let (world, none) = (json!("[0, 1, 2]"), Value::Null);
    let expected = |name: &str, ranks: &Value, rank: u32, src: Value, dst: Value| {
        let (start, stride, size) = match name {
            "wait" => (Value::Null, Value::Null, json!(1)),
            _ => (json!(0), json!(1), json!(3)),
        };
        [
            json!(name),
            json!("0"),
            json!("default_pg"),
            start,
            stride,
            size,
            ranks.clone(),
            json!(rank),
            src,
            dst,
        ]
    };
    let expected = [
        expected("recv", &world, 0, json!(0), none.clone()),
        expected("wait", &json!("[]"), 1, none.clone(), none.clone()),
        expected("send", &world, 2, none.clone(), json!(2)),
        expected("wait", &json!("[]"), 1, none.clone(), none),
    ];
    let expected: Vec<Vec<&Value>> = expected.iter().map(|e| e.iter().collect()).collect();
    assert_eq!(args, expected, "{keys:?}");
    // A Timeline whose pair is not named `p2p:<low>:<high>` does not tell the peer: its calls
    // are the world's still, with no `Rank`, `Src Rank` or `Dst Rank`.
    let mut renamed = timeline.clone();
    renamed.scenario.groups[1] = "first pair".to_string();
    let (_, _, trace) = &rank_files(&renamed)[1];
    let recv = named(trace, "record_param_comms")[0]["args"].clone();
    assert_eq!(
        (&recv["Collective name"], &recv["Group size"]),
        (&json!("recv"), &json!(3))
    );
    assert!(
        ["Rank", "Src Rank", "Dst Rank"]
            .iter()
            .all(|key| recv.get(key).is_none()),
        "{recv}"
    );
}

#[test]
fn a_batch_records_each_send_and_receive_then_its_one_wait() {
    // Rank 1 of three: batch_isend_irecv sends `kv` to rank 2 and receives `kv_next` from
    // rank 0. ProcessGroupNCCL::send and ::recv record one record_param_comms each inside the
    // coalescing (the peer as `Rank`, the batch's SeqNum as `Seq`); endCoalescing records
    // none; the Work's wait() records one.
    let text = "repeat = 2\n[cluster]\nranks = 3\n[tensors]\nkv = { size = \"1MiB\", dtype = \"bf16\" }\n\
                kv_next = { size = \"1MiB\", dtype = \"bf16\" }\n\
                [[op]]\nlabel = \"ring\"\nbatch_isend_irecv = [{ send = \"kv\", shift = 1 }, { recv = \"kv_next\", shift = -1 }]\n\
                work = \"w\"\n[[op]]\nwait = \"w\"\n";
    let timeline = sim::engine::simulate(&sim::scenario::parse("b.toml", text).unwrap());
    let (_, _, trace) = &rank_files(&timeline)[1];
    let keys = [
        "Collective name",
        "Process Group Name",
        "Group size",
        "Process Group Ranks",
        "Rank",
        "Src Rank",
        "Dst Rank",
        "dtype",
        "In msg nelems",
        "Out msg nelems",
        "Seq",
        "op",
    ];
    let params = named(trace, "record_param_comms");
    let args: Vec<Vec<&Value>> = (params.iter())
        .map(|p| keys.iter().map(|key| &p["args"][key]).collect())
        .collect();
    let (world, none) = (json!("[0, 1, 2]"), Value::Null);
    let call = |name: &str, rank: u32, src: Value, dst: Value, seq: u64| {
        [
            json!(name),
            json!("0"),
            json!(3),
            world.clone(),
            json!(rank),
            src,
            dst,
            json!("BFloat16"),
            json!(512 * 1024),
            json!(512 * 1024),
            json!(seq),
            json!("ring"),
        ]
    };
    let wait = |seq: u64| {
        [
            json!("wait"),
            json!("0"),
            json!(1),
            json!("[]"),
            json!(1),
            none.clone(),
            none.clone(),
            json!("Byte"),
            json!(0),
            json!(0),
            json!(seq),
            json!("wait#1"),
        ]
    };
    let expected: Vec<[Value; 12]> = (1..=2)
        .flat_map(|seq| {
            [
                call("send", 2, none.clone(), json!(2), seq),
                call("recv", 0, json!(0), none.clone(), seq),
                wait(seq),
            ]
        })
        .collect();
    let expected: Vec<Vec<&Value>> = expected.iter().map(|e| e.iter().collect()).collect();
    assert_eq!(args, expected, "{keys:?}");
    // Each call's record is inside the batch's one host call.
    let batches = named(trace, "c10d::batch_isend_irecv");
    assert_eq!(batches.len(), 2);
    for (index, param) in params.iter().enumerate().filter(|(i, _)| i % 3 != 2) {
        assert!(within(param, batches[index / 3]), "{param}");
    }
    // A Timeline that lists no transfers (an older file) writes the batch's wait alone.
    let mut older = timeline.clone();
    for op in &mut older.ops {
        op.transfers.clear();
    }
    let (_, _, trace) = &rank_files(&older)[1];
    let names: Vec<&Value> = (named(trace, "record_param_comms").iter())
        .map(|p| &p["args"]["Collective name"])
        .collect();
    assert_eq!(names, [&json!("wait"), &json!("wait")]);
}

#[test]
fn record_param_comms_rank_is_the_rank_within_its_group() {
    // PyTorch records the Backend's `rank_`: global rank 3 is rank 1 of the group [1, 3].
    let text = "[cluster]\nranks = 4\n[groups.odd]\nranks = [1, 3]\n[tensors]\nx = \"1MiB\"\n\
                [[op]]\nall_reduce = \"x\"\n\
                [[op]]\nranks = [1, 3]\nall_reduce = \"x\"\ngroup = \"odd\"\n";
    let timeline = sim::engine::simulate(&sim::scenario::parse("g.toml", text).unwrap());
    let (_, _, trace) = &rank_files(&timeline)[3];
    let ranks: Vec<(&str, u64)> = named(trace, "record_param_comms")
        .iter()
        .map(|p| {
            (
                p["args"]["Process Group Ranks"].as_str().unwrap(),
                p["args"]["Rank"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(ranks, [("[0, 1, 2, 3]", 3), ("[1, 3]", 1)]);
}

#[test]
fn a_broadcast_records_its_root_s_rank_within_the_group_on_every_rank() {
    // ProcessGroupNCCL::broadcast hands the profiler `opts.rootRank` (the root's rank in the
    // group), not the caller's; c10dsim's broadcasts root at the group's first rank. Global
    // rank 3's broadcast on the group [1, 3] records 0, and so does rank 1's.
    let text = "[cluster]\nranks = 4\n[groups.odd]\nranks = [1, 3]\n[tensors]\nx = \"1MiB\"\n\
                [[op]]\nbroadcast = \"x\"\n\
                [[op]]\nranks = [1, 3]\nbroadcast = \"x\"\ngroup = \"odd\"\n";
    let timeline = sim::engine::simulate(&sim::scenario::parse("b.toml", text).unwrap());
    for rank in [1, 3] {
        let (_, _, trace) = &rank_files(&timeline)[rank];
        let ranks: Vec<(&str, &str, u64)> = named(trace, "record_param_comms")
            .iter()
            .map(|p| {
                (
                    p["args"]["Collective name"].as_str().unwrap(),
                    p["args"]["Process Group Ranks"].as_str().unwrap(),
                    p["args"]["Rank"].as_u64().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            ranks,
            [("broadcast", "[0, 1, 2, 3]", 0), ("broadcast", "[1, 3]", 0)],
            "rank {rank}"
        );
    }
}

#[test]
fn an_all_gather_counts_one_slice_in_and_the_whole_out() {
    let text = "[cluster]\nranks = 4\n[tensors]\nx = \"4MiB\"\n[[op]]\nall_gather = \"x\"\n\
                [[op]]\nreduce_scatter = \"x\"\n";
    let scenario = sim::scenario::parse("t.toml", text).unwrap();
    let timeline = sim::engine::simulate(&scenario);
    let trace = single_file(&timeline);
    let params = named(&trace, "record_param_comms");
    let gather = params
        .iter()
        .find(|p| p["args"]["Collective name"] == "_allgather_base")
        .unwrap();
    assert_eq!(gather["args"]["In msg nelems"], 256 * 1024);
    assert_eq!(gather["args"]["Out msg nelems"], 1024 * 1024);
    let scatter = params
        .iter()
        .find(|p| p["args"]["Collective name"] == "_reduce_scatter_base")
        .unwrap();
    assert_eq!(scatter["args"]["In msg nelems"], 1024 * 1024);
    assert_eq!(scatter["args"]["Out msg nelems"], 256 * 1024);
    assert!(
        named(
            &trace,
            "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
        )
        .len()
            == 4
    );
}

#[test]
fn a_coalescing_block_records_the_name_of_the_coalesced_call_pytorch_makes_r25() {
    // `_coalescing_manager`'s fast path makes one call of the block, whose
    // `RECORD_PARAM_COMMS_DATA` names it (ProcessGroupNCCL::allreduce_coalesced,
    // allgather_into_tensor_coalesced, reduce_scatter_tensor_coalesced) and counts every tensor's
    // elements; a block of broadcasts keeps its collective's name.
    let text = "[cluster]\nranks = 4\n[tensors]\nx = { size = \"4MiB\", count = 3 }\n\
                [[op]]\nall_reduce = \"x\"\ncoalesce = true\n\
                [[op]]\nall_gather = \"x\"\ncoalesce = true\n\
                [[op]]\nreduce_scatter = \"x\"\ncoalesce = true\n\
                [[op]]\nbroadcast = \"x\"\ncoalesce = true\n";
    let timeline = sim::engine::simulate(&sim::scenario::parse("c.toml", text).unwrap());
    let (_, _, trace) = &rank_files(&timeline)[0];
    let params: Vec<(&str, u64, u64)> = named(trace, "record_param_comms")
        .iter()
        .map(|p| {
            let args = &p["args"];
            (
                args["Collective name"].as_str().unwrap(),
                args["In msg nelems"].as_u64().unwrap(),
                args["Out msg nelems"].as_u64().unwrap(),
            )
        })
        .collect();
    let (whole, slice) = (3 * 1024 * 1024, 3 * 256 * 1024);
    assert_eq!(
        params,
        [
            ("allreduce_coalesced", whole, whole),
            ("allgather_into_tensor_coalesced", slice, whole),
            ("reduce_scatter_tensor_coalesced", whole, slice),
            ("broadcast", whole, whole),
        ]
    );
}

#[test]
fn a_barrier_s_record_param_comms_has_pytorch_s_literal_arguments() {
    let text = "[cluster]\nranks = 2\n[[op]]\nbarrier = true\n";
    let timeline = sim::engine::simulate(&sim::scenario::parse("t.toml", text).unwrap());
    let trace = single_file(&timeline);
    let params = named(&trace, "record_param_comms");
    let barrier = params
        .iter()
        .find(|p| p["args"]["Collective name"] == "barrier")
        .unwrap();
    // ProcessGroupNCCL::barrier records no elements, of bytes, whatever it all_reduces.
    assert_eq!(barrier["args"]["In msg nelems"], 0);
    assert_eq!(barrier["args"]["Out msg nelems"], 0);
    assert_eq!(barrier["args"]["dtype"], "Byte");
}

#[test]
fn one_profiler_step_per_iteration_holds_that_iteration_s_calls() {
    let timeline = simulated("");
    for (_, _, trace) in rank_files(&timeline) {
        let steps: Vec<&Value> = events(&trace)
            .iter()
            .filter(|e| e["cat"] == "user_annotation")
            .collect();
        let names: Vec<&str> = steps.iter().map(|s| s["name"].as_str().unwrap()).collect();
        assert_eq!(
            names,
            ["ProfilerStep#0", "ProfilerStep#1", "ProfilerStep#2"]
        );
        for call in events(&trace)
            .iter()
            .filter(|e| e["cat"] == "cpu_op" && e["name"] != "record_param_comms")
        {
            let holding: Vec<&&Value> = steps.iter().filter(|s| within(call, s)).collect();
            assert!(!holding.is_empty(), "{call}");
            let iteration = call["args"]["iteration"].as_u64().unwrap();
            assert!(holding
                .iter()
                .any(|s| s["name"] == format!("ProfilerStep#{iteration}").as_str()));
        }
    }
}

#[test]
fn rank_files_hold_whole_microseconds_and_the_single_file_nanoseconds() {
    let timeline = simulated("");
    for (_, _, trace) in rank_files(&timeline) {
        for event in events(&trace).iter().filter(|e| e["ph"] == "X") {
            assert!(event["ts"].is_u64() && event["dur"].is_u64(), "{event}");
        }
    }
    let trace = single_file(&timeline);
    let kernel = events(&trace)
        .iter()
        .find(|e| e["cat"] == "kernel")
        .unwrap();
    let record = &timeline.ranks[0].kernels[0];
    assert_eq!(kernel["ts"].as_f64().unwrap(), record.start_ns as f64 / 1e3);
    // Correlations stay unique across the ranks of one file.
    let mut correlations: Vec<u64> = named(&trace, "cudaLaunchKernel")
        .iter()
        .map(|l| l["args"]["correlation"].as_u64().unwrap())
        .collect();
    let count = correlations.len();
    correlations.sort_unstable();
    correlations.dedup();
    assert_eq!(correlations.len(), count);
    assert_eq!(count, 2 * 6);
}

#[test]
fn findings_sit_at_their_time() {
    let mut timeline = simulated("");
    let wait = &timeline.ranks[1].host[5];
    let at_call = wait.start_ns;
    let (op, iteration) = (wait.op, wait.iteration);
    let last_ns = timeline
        .ranks
        .iter()
        .flat_map(|r| {
            r.kernels
                .iter()
                .map(|k| k.end_ns)
                .chain(r.host.iter().map(|h| h.end_ns))
        })
        .max()
        .unwrap();
    let finding = |rank, op, iteration, message: &str| Finding {
        stands_for: Default::default(),
        kind: FindingKind::Deadlock,
        rank,
        iteration,
        op,
        stream: None,
        message: message.into(),
    };
    timeline.findings = vec![
        finding(Some(1), Some(op), Some(iteration), "at a call"),
        finding(None, None, None, "the whole run"),
    ];
    let trace = single_file(&timeline);
    let found: Vec<&Value> = events(&trace)
        .iter()
        .filter(|e| e["cat"] == "finding")
        .collect();
    assert_eq!(found.len(), 2);
    assert_eq!(found[0]["args"]["message"], "at a call");
    assert_eq!(found[0]["ts"].as_f64().unwrap(), at_call as f64 / 1e3);
    assert_eq!(found[0]["pid"], 2);
    assert_eq!(found[1]["ts"].as_f64().unwrap(), last_ns as f64 / 1e3);
    assert!(at_call > 0);
    // Per rank: rank 1's file has both (the run's finding is every rank's), rank 0's only the
    // run's.
    let files = rank_files(&timeline);
    let count = |trace: &Value| {
        events(trace)
            .iter()
            .filter(|e| e["cat"] == "finding")
            .count()
    };
    assert_eq!((count(&files[0].2), count(&files[1].2)), (1, 2));
    // Each on the file's own process: a rank's file names no other.
    for (rank, (_, _, trace)) in files.iter().enumerate() {
        let pids: Vec<&Value> = events(trace).iter().map(|e| &e["pid"]).collect();
        assert!(pids.iter().all(|&pid| *pid == rank + 1), "{pids:?}");
    }
}

#[test]
fn the_same_timeline_writes_the_same_bytes() {
    let timeline = simulated("");
    let write = || {
        let mut bytes = Vec::new();
        write_chrome_trace(&timeline, &mut bytes).unwrap();
        bytes
    };
    assert_eq!(write(), write());
    let first: Vec<String> = rank_files(&timeline).into_iter().map(|f| f.1).collect();
    let second: Vec<String> = rank_files(&timeline).into_iter().map(|f| f.1).collect();
    assert_eq!(first, second);
}

#[test]
fn a_launch_starts_at_its_call_or_at_the_call_s_previous_launch() {
    let call = |start_ns, end_ns| HostCall {
        iteration: 0,
        op: 0,
        start_ns,
        end_ns,
    };
    let calls = [call(0, 10), call(10, 10), call(20, 40)];
    let mut launches = Launches::new(&calls);
    assert_eq!(launches.locate((0, 0), 10), (Some(0), 0));
    assert_eq!(launches.locate((0, 0), 25), (Some(2), 20));
    assert_eq!(launches.locate((0, 0), 30), (Some(2), 25));
    // A launch outside every call (a measured clock) has no length.
    assert_eq!(launches.locate((0, 0), 50), (None, 50));
}

#[test]
fn a_launch_where_one_call_ends_and_the_next_starts_is_the_next_call_s() {
    // An imported scenario's calls cost nothing: a 300 µs host_sleep (op 1), then a barrier
    // (op 2) that launches at its start. Its launch was drawn over the sleep, 300 µs long.
    let call = |op, start_ns, end_ns| HostCall {
        iteration: 0,
        op,
        start_ns,
        end_ns,
    };
    let calls = [call(1, 0, 300_000), call(2, 300_000, 310_000)];
    let mut launches = Launches::new(&calls);
    assert_eq!(launches.locate((0, 2), 300_000), (Some(1), 300_000));
}

#[test]
fn group_ranks_are_listed_up_to_thirty_then_cut_to_29_and_the_last_as_pytorch_writes_them() {
    assert_eq!(listed_ranks(&[0, 2, 4]), "[0, 2, 4]");
    let thirty: Vec<u32> = (0..30).collect();
    assert_eq!(listed_ranks(&thirty), format!("{thirty:?}"));
    // PyTorch 2.11's `format_list` keeps the first 29, then `...`, then the last.
    let many: Vec<u32> = (0..64).collect();
    let first_29: Vec<String> = (0..29).map(|rank| rank.to_string()).collect();
    assert_eq!(
        listed_ranks(&many),
        format!("[{}, ..., 63]", first_29.join(", "))
    );
}

#[test]
fn record_param_comms_names_its_group_s_ranks_by_start_and_stride_as_pytorch_2_11_does() {
    // As PyTorch 2.11 recorded them (tests/data/torch/probes/group_ranks_args.txt):
    // a group of evenly spaced ranks has a `Global rank start` and `Global rank stride`, and
    // `Process Group Ranks` lists the ranks they make; any other group has its start only and
    // lists none (the stride is -1 for uneven ranks, 0 for one rank, neither written).
    let text = "[cluster]\nranks = 4\n[groups.odd]\nranks = [1, 3]\n\
                [groups.uneven]\nranks = [0, 1, 3]\n[groups.alone]\nranks = [2]\n\
                [tensors]\nx = \"1MiB\"\n[[op]]\nall_reduce = \"x\"\n\
                [[op]]\nranks = [1, 3]\nall_reduce = \"x\"\ngroup = \"odd\"\n\
                [[op]]\nranks = [0, 1, 3]\nall_reduce = \"x\"\ngroup = \"uneven\"\n\
                [[op]]\nranks = [2]\nall_reduce = \"x\"\ngroup = \"alone\"\n";
    let timeline = sim::engine::simulate(&sim::scenario::parse("g.toml", text).unwrap());
    let files = rank_files(&timeline);
    let ranks_args = |rank: usize| -> Vec<Value> {
        named(&files[rank].2, "record_param_comms")
            .iter()
            .map(|p| {
                let args = &p["args"];
                json!([
                    args["Collective name"],
                    args["Process Group Description"],
                    args["Global rank start"],
                    args["Global rank stride"],
                    args["Process Group Ranks"],
                    args["Group size"],
                ])
            })
            .collect()
    };
    let null = Value::Null;
    assert_eq!(
        ranks_args(3),
        [
            json!(["allreduce", "default_pg", 0, 1, "[0, 1, 2, 3]", 4]),
            json!(["allreduce", "odd", 1, 2, "[1, 3]", 2]),
            json!(["allreduce", "uneven", 0, null, "[]", 3]),
        ]
    );
    assert_eq!(
        ranks_args(2)[1],
        json!(["allreduce", "alone", 2, null, "[]", 1])
    );
    // `WorkNCCL::wait` passes neither (-1, -1).
    let wait_args = |trace: &Value| -> Vec<(Value, Value)> {
        named(trace, "record_param_comms")
            .iter()
            .filter(|p| p["args"]["Collective name"] == "wait")
            .map(|p| {
                (
                    p["args"]["Global rank start"].clone(),
                    p["args"]["Global rank stride"].clone(),
                )
            })
            .collect()
    };
    let waits = wait_args(&single_file(&simulated("")));
    assert!(!waits.is_empty());
    assert!(waits
        .iter()
        .all(|wait| *wait == (null.clone(), null.clone())));
}

#[test]
fn a_one_rank_world_has_stride_one_as_a_recorded_pytorch_2_11_trace_does() {
    // tests/data/torch/recorded/traces/ddp_b25/rank0.json (PyTorch 2.11, one H200): the default
    // group's ranks are none listed to ProcessGroupNCCL, so its stride is 1, not a lone rank's 0.
    let text = "[cluster]\nranks = 1\n[tensors]\nx = \"1MiB\"\n[[op]]\nall_reduce = \"x\"\n";
    let timeline = sim::engine::simulate(&sim::scenario::parse("one.toml", text).unwrap());
    let trace = single_file(&timeline);
    let args = &named(&trace, "record_param_comms")[0]["args"];
    assert_eq!(
        (
            &args["Global rank start"],
            &args["Global rank stride"],
            &args["Process Group Ranks"],
            &args["Group size"]
        ),
        (&json!(0), &json!(1), &json!("[0]"), &json!(1))
    );
}

#[test]
fn a_timeline_claiming_a_huge_world_or_no_groups_still_writes() {
    let mut timeline = simulated("");
    timeline.scenario.ranks = u32::MAX;
    let (_, _, trace) = &rank_files(&timeline)[0];
    let world = trace["distributedInfo"]["pg_config"][0]["ranks"]
        .as_array()
        .unwrap();
    assert_eq!(world.len(), sim::scenario::MAX_RANKS as usize);
    // A watchdog record of a group the Timeline does not name (a hand-edited file).
    let mut timeline = simulated("");
    timeline.watchdog.push(sim::timeline::WatchdogRecord {
        stands_for: Default::default(),
        rank: 0,
        group: None,
        thread: sim::timeline::ThreadKind::Watchdog,
        event: sim::timeline::WatchdogEvent::Timeout,
        at_ns: 5,
        message: "m".into(),
    });
    timeline.scenario.groups.clear();
    for rank in &mut timeline.ranks {
        rank.collectives.clear();
    }
    let trace = single_file(&timeline);
    assert!(named(&trace, "thread_name")
        .iter()
        .any(|e| e["args"]["name"] == "pt_nccl_watchdg (group ?)"));
}

#[test]
fn a_profiler_step_holds_the_host_time_before_its_first_call() {
    // Rank 1 is 500 µs late before every all_reduce (R16): that delay is in the iteration's own
    // step, the first one's too, as torch.profiler's step() at each iteration's end marks them.
    let timeline = simulated("[[perturb]]\nranks = [1]\nbefore = \"ar\"\nhost_delay_us = 500\n");
    let (_, _, trace) = &rank_files(&timeline)[1];
    let steps = named(trace, "ProfilerStep#0")
        .into_iter()
        .chain(named(trace, "ProfilerStep#1"))
        .chain(named(trace, "ProfilerStep#2"))
        .map(span)
        .collect::<Vec<_>>();
    assert_eq!(steps.len(), 3);
    assert_eq!(steps[0].0, 0.0);
    for pair in steps.windows(2) {
        assert_eq!(pair[0].1, pair[1].0, "steps follow one another: {steps:?}");
    }
    for (iteration, step) in steps.iter().enumerate() {
        let first_call = events(trace)
            .iter()
            .filter(|e| e["cat"] == "cpu_op" && e["args"]["iteration"] == iteration)
            .map(|e| span(e).0)
            .fold(f64::INFINITY, f64::min);
        assert!(
            first_call - step.0 >= 500.0,
            "{iteration}: {step:?} {first_call}"
        );
    }
}

/// Rank 1 hangs before the second iteration's all_reduce: rank 0 calls it and launches its
/// kernel (which starts and never ends), then the third iteration's all_reduce and GEMM (queued
/// behind it, never started). Each call keeps its `record_param_comms` and each launch its
/// `cudaLaunchKernel`, in host order among the others, with a correlation of its own and no
/// kernel, as CUPTI reports none that never ended.
#[test]
fn a_collective_that_never_completes_keeps_its_call_and_launch_but_no_kernel() {
    let timeline =
        simulated("[[fault]]\nranks = [1]\nat = \"ar\"\niteration = 1\nkind = \"hang\"\n").expand();
    let rank = &timeline.ranks[0];
    assert_eq!(rank.unfinished_collectives.len(), 2);
    assert_eq!(rank.unfinished_kernels.len(), 3);
    let trace = single_file(&timeline);
    let kernels: Vec<&Value> = (events(&trace).iter())
        .filter(|e| e["cat"] == "kernel")
        .collect();
    // Each correlation once on the host, and once more on its kernel where that ended.
    let mut on_host: Vec<u64> = (events(&trace).iter())
        .filter(|e| e["cat"] == "cuda_runtime")
        .filter_map(|e| e["args"]["correlation"].as_u64())
        .collect();
    let count = on_host.len();
    on_host.sort_unstable();
    on_host.dedup();
    assert_eq!(on_host.len(), count);
    let launches = named(&trace, "cudaLaunchKernel");
    let never_ended: Vec<&Value> = (launches.iter().copied())
        .filter(|l| l["args"]["c10dsim kernel never ended"] == true)
        .collect();
    assert_eq!(never_ended.len(), 3);
    for launch in &never_ended {
        assert_eq!(launch["pid"], 1);
        let correlation = &launch["args"]["correlation"];
        assert!(!kernels
            .iter()
            .any(|k| &k["args"]["correlation"] == correlation));
    }
    assert_eq!(launches.len(), kernels.len() + 3);
    // In host order: rank 0's launches are written in time order.
    let times: Vec<f64> = (launches.iter())
        .filter(|l| l["pid"] == 1)
        .map(|l| l["ts"].as_f64().unwrap())
        .collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
    // The hung all_reduce's launch inside the call that made it, under a record_param_comms
    // over the call, marked as never completed.
    let call = named(&trace, "c10d::allreduce_")
        .into_iter()
        .find(|c| c["pid"] == 1 && c["args"]["iteration"] == 1)
        .unwrap();
    assert!(within(never_ended[0], call));
    let comms = named(&trace, "record_param_comms")
        .into_iter()
        .find(|c| {
            c["pid"] == 1
                && c["args"]["iteration"] == 1
                && c["args"]["Collective name"] == "allreduce"
        })
        .unwrap();
    assert_eq!(comms["args"]["c10dsim never completed"], true);
    assert_eq!(span(comms), span(call));
    // Each wait() on them made its cudaStreamWaitEvent, on the Work's end event that never
    // fired, inside the wait's record_param_comms; the third iteration's all_reduce made one on
    // its input, which the stream blocked by the second iteration's wait never reached (R10a).
    let waited = (rank.unfinished_collectives.iter())
        .filter(|c| c.wait.is_some())
        .count();
    assert_eq!(waited, 2);
    assert_eq!(rank.unfinished_stream_waits.len(), 3);
    let unreleased: Vec<&Value> = named(&trace, "cudaStreamWaitEvent")
        .into_iter()
        .filter(|w| w["pid"] == 1 && w["args"]["c10dsim never released"] == true)
        .collect();
    assert_eq!(unreleased.len(), 3);
    let (waits, inputs): (Vec<&Value>, Vec<&Value>) =
        (unreleased.into_iter()).partition(|w| w["args"]["op"] == "wait#2");
    assert_eq!(waits.len(), waited);
    for stream_wait in waits {
        let wait_comms = named(&trace, "record_param_comms")
            .into_iter()
            .find(|c| {
                c["pid"] == 1
                    && c["args"]["Collective name"] == "wait"
                    && c["args"]["iteration"] == stream_wait["args"]["iteration"]
            })
            .unwrap();
        assert!(within(stream_wait, wait_comms), "{stream_wait}");
    }
    let [input] = inputs.as_slice() else {
        panic!("{inputs:?}");
    };
    assert_eq!(
        (&input["args"]["op"], &input["args"]["iteration"]),
        (&json!("ar"), &json!(2))
    );
    assert!(within(input, comms_of(&trace, 2)), "{input}");
}

/// Rank 1 hangs before the second iteration's all_reduce, its first call of the iteration:
/// its first step is closed at its last call's end, the second open from there to the end of
/// the capture though it holds no call; rank 0, whose program returned, has its three closed.
#[test]
fn the_step_a_fault_stopped_is_open_to_the_end_of_the_capture() {
    let timeline =
        simulated("[[fault]]\nranks = [1]\nat = \"ar\"\niteration = 1\nkind = \"hang\"\n").expand();
    assert_eq!(timeline.ranks[0].unfinished_iteration, None);
    let stopped = &timeline.ranks[1];
    assert_eq!(stopped.unfinished_iteration, Some(1));
    assert!(stopped.host.iter().all(|c| c.iteration == 0));
    let trace = single_file(&timeline);
    let steps = |pid: u32| -> Vec<(String, (f64, f64), bool)> {
        (events(&trace).iter())
            .filter(|e| e["pid"] == pid && e["cat"] == "user_annotation")
            .map(|e| {
                let name = e["name"].as_str().unwrap().to_string();
                (name, span(e), e["args"]["finished"] == false)
            })
            .collect()
    };
    let rank0 = steps(1);
    assert_eq!(rank0.len(), 3);
    assert!(rank0.iter().all(|(_, _, open)| !open), "{rank0:?}");
    let last_call_us = stopped.host.last().unwrap().end_ns as f64 / 1_000.0;
    let rank1 = steps(2);
    let [(first, first_span, false), (second, second_span, true)] = rank1.as_slice() else {
        panic!("{rank1:?}");
    };
    assert_eq!(
        (first.as_str(), second.as_str()),
        ("ProfilerStep#0", "ProfilerStep#1")
    );
    assert_eq!((first_span.1, second_span.0), (last_call_us, last_call_us));
    let end_us = events(&trace)
        .iter()
        .find(|e| e["pid"] == 2 && e["cat"] == "trace_span")
        .map(|e| span(e).1)
        .unwrap();
    assert_eq!(second_span.1, end_us);
}

/// Rank 0's `record_param_comms` of the all_reduce of `iteration`.
fn comms_of(trace: &Value, iteration: u32) -> &Value {
    named(trace, "record_param_comms")
        .into_iter()
        .find(|c| {
            c["pid"] == 1
                && c["args"]["iteration"] == iteration
                && c["args"]["Collective name"] == "allreduce"
        })
        .unwrap()
}

/// Rank 1 never joins the all_reduce; rank 0 makes the other stream waits that never get
/// released: a `get_future()`'s, an earlier `wait()` on the hung Work, a `wait_event` on an
/// event behind it, a later collective's on its input (R10a), then the last `wait()`. The
/// Timeline keeps each, apart from the released ones and counted nowhere; the trace writes
/// each `cudaStreamWaitEvent` where the host made it, marked never released, with no release.
#[test]
fn stream_waits_never_released_are_kept_and_traced_as_made_but_never_released() {
    let text = "repeat = 1\nwarmup = 0\n[cluster]\nranks = 2\n[groups.world]\neager_init = true\n\
                timeout_s = 1\n[streams]\nside = {}\n[tensors]\nx = \"1MiB\"\ny = \"1MiB\"\n\
                [[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\nasync_op = true\nwork = \"w\"\n\
                [[op]]\nlabel = \"hook\"\nget_future = \"w\"\n\
                [[op]]\nlabel = \"first_wait\"\nwait = \"w\"\n\
                [[op]]\nrecord_event = \"e\"\n\
                [[op]]\nlabel = \"side_wait\"\nwait_event = \"e\"\nstream = \"side\"\n\
                [[op]]\nlabel = \"ar2\"\nall_reduce = \"y\"\nasync_op = true\nwork = \"w2\"\n\
                [[op]]\nlabel = \"last_wait\"\nwait = \"w\"\n\
                [[fault]]\nranks = [1]\nat = \"ar\"\nkind = \"hang\"\n";
    let scenario = sim::scenario::parse("unreleased.toml", text).unwrap();
    let timeline = sim::engine::simulate(&scenario);
    let rank = &timeline.ranks[0];
    // (op, waiting stream, source stream, whether the event fired): default 0, side 1, nccl 2.
    let unreleased: Vec<(u32, u16, u16, bool)> = (rank.unfinished_stream_waits.iter())
        .map(|w| {
            (
                w.op,
                w.waiting_stream,
                w.source_stream,
                w.source_ns.is_some(),
            )
        })
        .collect();
    assert_eq!(
        unreleased,
        [
            (1, 0, 2, false),
            (2, 0, 2, false),
            (4, 1, 0, false),
            (5, 2, 0, false),
            (6, 0, 2, false)
        ]
    );
    // Only the all_reduce's wait on its input was released.
    let released: Vec<u32> = rank.stream_waits.iter().map(|w| w.op).collect();
    assert_eq!(released, [0]);
    let trace = single_file(&timeline);
    let traced: Vec<(String, f64)> = named(&trace, "cudaStreamWaitEvent")
        .into_iter()
        .filter(|w| w["pid"] == 1 && w["args"]["c10dsim never released"] == true)
        .map(|w| {
            (
                w["args"]["op"].as_str().unwrap().to_string(),
                w["ts"].as_f64().unwrap(),
            )
        })
        .collect();
    let call_start_us = |op: u32| {
        let call = rank.host.iter().find(|c| c.op == op).unwrap();
        call.start_ns as f64 / 1_000.0
    };
    let mut expected: Vec<(String, f64)> = [4, 1, 2, 5, 6]
        .into_iter()
        .map(|op| (timeline.ops[op as usize].name.clone(), call_start_us(op)))
        .collect();
    expected.sort_by(|a, b| a.1.total_cmp(&b.1));
    let mut traced_sorted = traced.clone();
    traced_sorted.sort_by(|a, b| a.1.total_cmp(&b.1));
    assert_eq!(traced_sorted, expected);
    // None released: no mark or arrow past the all_reduce's own.
    let marks = (events(&trace).iter())
        .filter(|e| e["pid"] == 1 && e["cat"] == "stream_wait" && e["ph"] == "X")
        .count();
    assert_eq!(marks, 2, "the all_reduce's input wait: fired and released");
}

/// A `kernel` or `gpu_sleep_us` op's host call is one CUDA call, its launch: written once, as
/// the `cuda_runtime` `cudaLaunchKernel` beside its kernel. It used to have a `cpu_op` of the
/// same name, start and length too, which HTA counted as a second call.
#[test]
fn a_launch_alone_on_the_host_is_one_cuda_runtime_call() {
    let text = "repeat = 2\n[cluster]\nranks = 1\n[[op]]\nlabel = \"sleep\"\ngpu_sleep_us = 50\n\
        [[op]]\nlabel = \"k\"\nkernel = { us = 20 }\n";
    let scenario = sim::scenario::parse("launch.toml", text).unwrap();
    let timeline = sim::engine::simulate(&scenario);
    let trace = single_file(&timeline);
    let launches = named(&trace, "cudaLaunchKernel");
    assert!(
        launches.iter().all(|l| l["cat"] == "cuda_runtime"),
        "{launches:#?}"
    );
    assert_eq!(launches.len(), 2 * 2, "two launches per iteration");
    let kernels = (events(&trace).iter())
        .filter(|e| e["cat"] == "kernel")
        .count();
    assert_eq!(launches.len(), kernels);
}

#[test]
fn a_record_for_several_ranks_is_drawn_on_each_with_its_own_rank() {
    // Ranks 0, 2 and 3 log rank 1's error from the store alike: one watchdog record (and one
    // heartbeat finding) for the three, drawn on each rank's process with that rank's text.
    let scenario = sim::scenario::parse(
        "ae.toml",
        "[cluster]\nranks = 4\n[groups.world]\neager_init = true\n\
         [env]\nTORCH_NCCL_PROPAGATE_ERROR = 1\n[tensors]\ngrad = \"25MiB\"\n\
         [[op]]\nlabel = \"ar\"\nall_reduce = \"grad\"\nasync_op = true\nwork = \"w\"\n\
         [[op]]\nwait = \"w\"\n[[fault]]\nranks = [1]\nat = \"ar\"\nkind = \"async_error\"\n\
         after_us = 5_000_000\n",
    )
    .unwrap();
    let timeline = sim::engine::simulate(&scenario);
    assert!(
        (timeline.watchdog.iter()).any(|r| r.stands_for.count() == 3),
        "the scenario makes one record for three ranks"
    );
    let trace = single_file(&timeline);
    let mut drawn = 0;
    for event in events(&trace)
        .iter()
        .filter(|e| e["cat"] == "watchdog" || e["cat"] == "finding")
    {
        let Some(message) = event["args"]["message"].as_str() else {
            continue;
        };
        let rank = event["pid"].as_u64().unwrap() - 1;
        assert!(
            message.starts_with(&format!("[Rank {rank}]")),
            "on rank {rank}'s track: {message}"
        );
        drawn += 1;
    }
    let remote = named(&trace, "remote_error");
    assert_eq!(remote.len(), 3, "{remote:?}");
    assert!(drawn > 6);
}

/// The four ranks of `a_record_for_several_ranks_is_drawn_on_each_with_its_own_rank`'s run,
/// summarised, keeping the records `records_for` selects.
fn summarised_async_error(records_for: &str) -> Timeline {
    let scenario = sim::scenario::parse(
        "ae.toml",
        "[cluster]\nranks = 4\n[groups.world]\neager_init = true\n\
         [env]\nTORCH_NCCL_PROPAGATE_ERROR = 1\n[tensors]\ngrad = \"25MiB\"\n\
         [[op]]\nlabel = \"ar\"\nall_reduce = \"grad\"\nasync_op = true\nwork = \"w\"\n\
         [[op]]\nlabel = \"s\"\nranks = [0]\nsend = \"grad\"\npeer = 1\n\
         [[op]]\nlabel = \"r\"\nranks = [1]\nrecv = \"grad\"\npeer = 0\n\
         [[op]]\nwait = \"w\"\n[[fault]]\nranks = [1]\nat = \"ar\"\nkind = \"async_error\"\n\
         after_us = 5_000_000\n",
    )
    .unwrap();
    let options = sim::engine::Options {
        summary: Some(sim::timeline::RecordSelection::parse(records_for).unwrap()),
        ..Default::default()
    };
    sim::engine::simulate_with(&scenario, options).0
}

#[test]
fn a_summarised_trace_draws_the_ranks_it_kept_no_records_of_on_their_own_processes() {
    for records_for in ["ranks=0", "none"] {
        let timeline = summarised_async_error(records_for);
        assert!(timeline.summary.is_some());
        let trace = single_file(&timeline);
        let process_of = |pid: &Value| {
            named(&trace, "process_name")
                .into_iter()
                .find(|e| &e["pid"] == pid)
                .map(|e| e["args"]["name"].as_str().unwrap().to_string())
        };
        // Every watchdog record and finding the Timeline keeps is drawn, each on the process
        // of a rank it concerns, named as that rank's.
        let drawn = |cat: &str| {
            (events(&trace).iter())
                .filter(|e| e["cat"] == cat)
                .map(|e| {
                    let rank = e["pid"].as_u64().unwrap() - 1;
                    let name = process_of(&e["pid"]).unwrap_or_default();
                    assert!(
                        name == format!("rank {rank}")
                            || name.starts_with(&format!("rank {rank} (")),
                        "{records_for}: {cat} on the process {name:?}: {e}"
                    );
                    if let Some(message) = e["args"]["message"].as_str() {
                        assert!(message.contains(&format!("Rank {rank}]")), "{message}");
                    }
                    (rank, e["name"].as_str().unwrap().to_string())
                })
                .collect::<BTreeSet<_>>()
        };
        let watchdog = drawn("watchdog");
        let findings = drawn("finding");
        for record in &timeline.watchdog {
            let event = serde_json::to_value(record.event).unwrap();
            assert!(
                watchdog.contains(&(u64::from(record.rank), event.as_str().unwrap().to_string())),
                "{records_for}: {record:?} not drawn: {watchdog:?}"
            );
        }
        for finding in &timeline.findings {
            let rank = finding.rank.unwrap();
            assert!(
                findings.contains(&(u64::from(rank), finding.kind.as_str().to_string())),
                "{records_for}: {finding:?} not drawn: {findings:?}"
            );
        }
        assert!(timeline
            .watchdog
            .iter()
            .any(|r| r.event == sim::timeline::WatchdogEvent::Warning));
    }
}

/// Each `ProfilerStep#<i>` of `trace` on rank `rank`'s process: `(name, ts, dur)`.
fn profiler_steps_of(trace: &Value, rank: u64) -> Vec<(String, f64, f64)> {
    (events(trace).iter())
        .filter(|e| e["pid"] == rank + 1)
        .filter(|e| {
            e["name"]
                .as_str()
                .is_some_and(|n| n.starts_with("ProfilerStep#"))
        })
        .map(|e| {
            let name = e["name"].as_str().unwrap().to_string();
            (name, e["ts"].as_f64().unwrap(), e["dur"].as_f64().unwrap())
        })
        .collect()
}

#[test]
fn a_summarised_trace_spans_the_steps_it_kept_as_the_full_trace_does() {
    let text = "seed = 42\nrepeat = 7\nwarmup = 1\n[cluster]\nranks = 4\n[tensors]\n\
                grad = \"8MiB\"\n[[perturb]]\nranks = [3]\nbefore = \"ar\"\n\
                host_delay_us = { lognormal = { mean = 200, std = 50 } }\n\
                [[op]]\nlabel = \"ar\"\nall_reduce = \"grad\"\nasync_op = true\nwork = \"w\"\n\
                [[op]]\nwait = \"w\"\n[[op]]\ndevice_sync = true\n";
    let scenario = sim::scenario::parse("straggler.toml", text).unwrap();
    let full = single_file(&sim::engine::simulate(&scenario));
    for records_for in [
        "ranks=3 iterations=5",
        "ranks=3 iterations=1,5",
        "iterations=2-3,6",
    ] {
        let options = sim::engine::Options {
            summary: Some(sim::timeline::RecordSelection::parse(records_for).unwrap()),
            ..Default::default()
        };
        let summarised = single_file(&sim::engine::simulate_with(&scenario, options).0);
        let selection = sim::timeline::RecordSelection::parse(records_for).unwrap();
        for rank in 0..4u64 {
            let kept = profiler_steps_of(&summarised, rank);
            let expected: Vec<_> = (profiler_steps_of(&full, rank).into_iter())
                .filter(|(name, _, _)| {
                    let iteration = name["ProfilerStep#".len()..].parse().unwrap();
                    selection.keeps(rank as u32, iteration)
                })
                .collect();
            assert!(!expected.is_empty() || !selection.keeps_rank(rank as u32));
            assert_eq!(kept, expected, "{records_for}, rank {rank}");
        }
    }
}
