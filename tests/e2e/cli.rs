//! The command line: bad input names file, line and column and exits 2; outputs are
//! deterministic; `check` validates the catalogue.
//!
//! Over 1,000 lines (about 1,300): one table of bad inputs and one test per command-line
//! behaviour, sharing the table's helpers; the next split is by command (run, sweep, diff).

use crate::util::{c10dsim, c10dsim_fed, stderr, stdout};

/// One class of bad input: the scenario text, where the error must point, and what it says.
struct BadInput {
    class: &'static str,
    text: &'static str,
    line: u32,
    column: u32,
    says: &'static str,
}

const BAD_INPUTS: &[BadInput] = &[
    BadInput {
        class: "an empty file",
        text: "",
        line: 1,
        column: 1,
        says: "the scenario has no [[op]]",
    },
    BadInput {
        class: "a program without ops",
        text: "name = \"idle\"\n[cluster]\nranks = 2\n",
        line: 1,
        column: 1,
        says: "the scenario has no [[op]]",
    },
    BadInput {
        class: "TOML syntax",
        text: "repeat = = 3\n",
        line: 1,
        column: 10,
        says: "extra `=`",
    },
    BadInput {
        class: "unknown key",
        text: "[cluster]\nrankz = 4\n",
        line: 2,
        column: 1,
        says: "unknown field `rankz`",
    },
    BadInput {
        class: "unknown environment variable",
        text: "[env]\nTORCH_NCCL_BLOCKING_WAITT = 1\n[[op]]\ndevice_sync = true\n",
        line: 2,
        column: 1,
        says: "unknown or unmodelled environment variable \"TORCH_NCCL_BLOCKING_WAITT\"",
    },
    BadInput {
        class: "a CUDA_MODULE_LOADING CUDA does not know",
        text: "[env]\nCUDA_MODULE_LOADING = \"lazy\"\n[[op]]\ndevice_sync = true\n",
        line: 2,
        column: 23,
        says: "CUDA_MODULE_LOADING expects \"LAZY\" or \"EAGER\", found \"lazy\"",
    },
    BadInput {
        class: "unknown tensor",
        text: "[tensors]\nx = \"1MiB\"\n[[op]]\nall_reduce = \"y\"\n",
        line: 4,
        column: 14,
        says: "unknown tensor \"y\"; expected one declared in [tensors] (known: x)",
    },
    BadInput {
        class: "unknown stream",
        text: "[[op]]\nset_stream = \"side\"\n",
        line: 2,
        column: 14,
        says: "unknown stream \"side\"",
    },
    BadInput {
        class: "event never recorded",
        text: "[[op]]\nwait_event = \"e\"\n",
        line: 2,
        column: 14,
        says: "no earlier record_event records",
    },
    BadInput {
        class: "wait on a Work never created",
        text: "[tensors]\nx = \"1MiB\"\n[[op]]\nall_reduce = \"x\"\n[[op]]\nwait = \"w\"\n",
        line: 6,
        column: 8,
        says: "wait on Work \"w\", which no earlier collective creates",
    },
    BadInput {
        class: "Work of another rank",
        text: "[cluster]\nranks = 2\n[tensors]\nx = \"1MiB\"\n[[op]]\nranks = [0]\nall_reduce = \"x\"\nasync_op = true\nwork = \"w\"\n[[op]]\nwait = \"w\"\n",
        line: 11,
        column: 8,
        says: "wait on Work \"w\" runs on rank 1, where no earlier op creates it",
    },
    BadInput {
        class: "Work bound by a send on one rank only",
        text: "[cluster]\nranks = 2\n[tensors]\nx = \"1MiB\"\n[[op]]\nranks = [0]\nsend = \"x\"\npeer = 1\nasync_op = true\nwork = \"w\"\n[[op]]\nranks = [1]\nrecv = \"x\"\npeer = 0\n[[op]]\nwait = \"w\"\n",
        line: 16,
        column: 8,
        says: "wait on Work \"w\" runs on rank 1, where no earlier op creates it",
    },
    BadInput {
        class: "size out of range",
        text: "[tensors]\nx = \"2TiB\"\n[[op]]\nall_reduce = \"x\"\n",
        line: 2,
        column: 5,
        says: "tensor size must be between 1 B and 1 TiB",
    },
    BadInput {
        class: "size unit",
        text: "[tensors]\nx = \"25 MB/s\"\n[[op]]\nall_reduce = \"x\"\n",
        line: 2,
        column: 5,
        says: "unknown size unit",
    },
    BadInput {
        class: "time out of range",
        text: "[[op]]\ngpu_sleep_us = -5\n",
        line: 2,
        column: 16,
        says: "gpu_sleep_us must be > 0",
    },
    BadInput {
        class: "count out of range",
        text: "repeat = 0\n[[op]]\ndevice_sync = true\n",
        line: 1,
        column: 10,
        says: "repeat must be between 1 and 1000000",
    },
    BadInput {
        class: "two operations in one op",
        text: "[[op]]\ndevice_sync = true\ngpu_sleep_us = 5\n",
        line: 3,
        column: 16,
        says: "names exactly one operation, but this one has both",
    },
    BadInput {
        class: "modifier that does not apply",
        text: "[[op]]\ngpu_sleep_us = 5\nasync_op = true\n",
        line: 3,
        column: 12,
        says: "async_op does not apply to gpu_sleep_us",
    },
    BadInput {
        class: "unknown mark in a measure",
        text: "[[op]]\nmark = \"a\"\n[[measure]]\nname = \"m\"\nfrom = \"a\"\nto = \"b\"\n",
        line: 6,
        column: 6,
        says: "unknown mark \"b\"",
    },
    BadInput {
        class: "unknown NCCL algorithm",
        text: "[env]\nNCCL_ALGO = \"Ring,Butterfly\"\n[[op]]\ndevice_sync = true\n",
        line: 2,
        column: 13,
        says: "NCCL_ALGO: unknown name \"Butterfly\"; expected a comma-separated list of RING, TREE, NVLS, CollNetDirect, CollNetChain, NVLSTree, PAT",
    },
    BadInput {
        class: "NCCL_ALGO leaves a collective no algorithm (NCCL >= 2.24: no ring fallback)",
        text: "[cluster]\nranks = 8\n[env]\nNCCL_ALGO = \"Tree\"\n[tensors]\nx = \"1MiB\"\n[[op]]\nall_gather = \"x\"\n",
        line: 4,
        column: 13,
        says: "NCCL_ALGO/NCCL_PROTO leave no algorithm and protocol for the all_gather",
    },
    BadInput {
        class: "NCCL channel bounds",
        text: "[env]\nNCCL_MAX_CTAS = 2\nNCCL_MIN_CTAS = 4\n[[op]]\ndevice_sync = true\n",
        line: 3,
        column: 17,
        says: "NCCL_MIN_CTAS (4) is larger than NCCL_MAX_CTAS (2)",
    },
    BadInput {
        class: "NCCL choice impossible for a group",
        text: "[cluster]\nranks = 16\n[env]\nNCCL_ALGO = \"NVLS\"\n[tensors]\nx = \"1MiB\"\n[[op]]\nall_reduce = \"x\"\n",
        line: 4,
        column: 13,
        says: "NCCL_ALGO/NCCL_PROTO leave no algorithm and protocol for the all_reduce",
    },
    BadInput {
        class: "an observability variable whose effect is not modelled",
        text: "[env]\nTORCH_NCCL_NAN_CHECK = 1\n[[op]]\ndevice_sync = true\n",
        line: 2,
        column: 24,
        says: "that kernel's duration is not modelled",
    },
    BadInput {
        class: "a legacy name PyTorch does not read",
        text: "[env]\nNCCL_TRACE_BUFFER_SIZE = 100\n[[op]]\ndevice_sync = true\n",
        line: 2,
        column: 1,
        says: "PyTorch 2.12 reads this variable only as TORCH_NCCL_TRACE_BUFFER_SIZE",
    },
    BadInput {
        class: "coalescing a single tensor",
        text: "[tensors]\nx = \"1MiB\"\n[[op]]\nall_reduce = \"x\"\ncoalesce = true\n",
        line: 5,
        column: 12,
        says: "give tensor \"x\" a count = N > 1",
    },
    BadInput {
        class: "unknown tensor lifetime",
        text: "[memory]\nlifetime = \"forever\"\n[[op]]\ndevice_sync = true\n",
        line: 2,
        column: 12,
        says: "unknown lifetime \"forever\"",
    },
    BadInput {
        class: "use outside alloc and free",
        text: "[tensors]\nt = \"1MiB\"\n[[op]]\nalloc = \"t\"\n[[op]]\nfree = \"t\"\n[[op]]\nitem = \"t\"\n",
        line: 7,
        column: 1,
        says: "uses tensor \"t\" outside its alloc … free",
    },
    BadInput {
        class: "send without a peer",
        text: "[cluster]\nranks = 2\n[tensors]\nt = \"1MiB\"\n[[op]]\nranks = [0]\nsend = \"t\"\n",
        line: 5,
        column: 1,
        says: "send needs peer = <rank>",
    },
    BadInput {
        class: "send on several ranks",
        text: "[cluster]\nranks = 4\n[tensors]\nt = \"1MiB\"\n[[op]]\nranks = [0, 1]\nrecv = \"t\"\npeer = 2\n",
        line: 6,
        column: 9,
        says: "recv runs on one rank: give it ranks = [r]",
    },
    BadInput {
        class: "send to itself",
        text: "[cluster]\nranks = 2\n[tensors]\nt = \"1MiB\"\n[[op]]\nranks = [1]\nsend = \"t\"\npeer = 1\n",
        line: 8,
        column: 8,
        says: "peer must be another rank than the op's own rank 1",
    },
    BadInput {
        class: "a callback on a plain wait",
        text: "[streams]\npool = {}\n[tensors]\nt = \"1MiB\"\n[[op]]\nall_reduce = \"t\"\nasync_op = true\nwork = \"w\"\n[[op]]\nwait = \"w\"\nthen = { us = 5, stream = \"pool\" }\n",
        line: 11,
        column: 8,
        says: "then does not apply to wait (it takes timeout_ms, catch)",
    },
    BadInput {
        class: "naming the future of a get_future without then",
        text: "[tensors]\nt = \"1MiB\"\n[[op]]\nall_reduce = \"t\"\nasync_op = true\nwork = \"w\"\n[[op]]\nget_future = \"w\"\nwork = \"f\"\n",
        line: 9,
        column: 8,
        says: "work = … names the future that then(…) returns",
    },
    BadInput {
        class: "a batch send nobody receives",
        text: "[cluster]\nranks = 4\n[tensors]\na = \"1MiB\"\n[[op]]\nbatch_isend_irecv = [{ send = \"a\", shift = 1 }]\n",
        line: 6,
        column: 22,
        says: "this send by shift 1 has no matching recv by shift -1 of the same size",
    },
    BadInput {
        class: "a batch transfer of a tensor list",
        text: "[cluster]\nranks = 2\n[tensors]\na = { size = \"1MiB\", count = 2 }\n[[op]]\nbatch_isend_irecv = [{ send = \"a\", shift = 1 }, { recv = \"a\", shift = -1 }]\n",
        line: 6,
        column: 31,
        says: "a P2POp takes one tensor, and \"a\" is a list of 2",
    },
    BadInput {
        class: "a batch transfer to itself",
        text: "[cluster]\nranks = 2\n[tensors]\na = \"1MiB\"\n[[op]]\nbatch_isend_irecv = [{ send = \"a\", shift = 2 }]\n",
        line: 6,
        column: 44,
        says: "shift 2 points a rank at itself in a group of 2 ranks",
    },
    BadInput {
        class: "an overlap of one measure",
        text: "[[op]]\nmark = \"m0\"\n[[op]]\nkernel = { us = 10 }\n[[op]]\nmark = \"m1\"\n[[measure]]\nname = \"x\"\nfrom = \"m0\"\nto = \"m1\"\n[[overlap]]\nname = \"o\"\ncompute = \"x\"\ncomm = \"x\"\nboth = \"x\"\n",
        line: 11,
        column: 1,
        says: "overlap \"o\": compute and comm are the same measure (\"x\")",
    },
    BadInput {
        class: "an overlap of two measures of one span",
        text: "[[op]]\nmark = \"m0\"\n[[op]]\nkernel = { us = 10 }\n[[op]]\nmark = \"m1\"\n[[measure]]\nname = \"x\"\nfrom = \"m0\"\nto = \"m1\"\n[[measure]]\nname = \"y\"\nfrom = \"m0\"\nto = \"m1\"\n[[overlap]]\ncompute = \"x\"\ncomm = \"y\"\nboth = \"x\"\n",
        line: 15,
        column: 1,
        says: "overlap \"overlap\": compute and comm are the same measure (\"x\" and \"y\" both time m0 to m1 on the gpu clock)",
    },
    BadInput {
        class: "a perturb whose delays are 0",
        text: "[[op]]\nlabel = \"k\"\nkernel = { us = 10 }\n[[perturb]]\nranks = [0]\nbefore = \"k\"\nhost_delay_us = 0\ngpu_delay_us = 0\n",
        line: 7,
        column: 17,
        says: "a [[perturb]] whose delays are all 0 does nothing",
    },
    BadInput {
        class: "a perturb without a delay",
        text: "[[op]]\nlabel = \"k\"\nkernel = { us = 10 }\n[[perturb]]\nranks = [0]\nbefore = \"k\"\n",
        line: 4,
        column: 1,
        says: "a [[perturb]] needs host_delay_us or gpu_delay_us",
    },
    BadInput {
        class: "a key set twice",
        text: "[cluster]\nranks = 2\nranks = 4\n[[op]]\nkernel = { us = 1 }\n",
        line: 3,
        column: 1,
        says: "duplicate key `ranks`",
    },
    BadInput {
        class: "a misspelt key in a tensor",
        text: "[tensors]\nt = { size = \"1MiB\", dtpye = \"bf16\" }\n[[op]]\nkernel = { us = 1 }\n",
        line: 2,
        column: 22,
        says: "unknown key \"dtpye\" in tensor \"t\"; did you mean \"dtype\"?",
    },
    BadInput {
        class: "a misspelt key in a tensor's own table",
        text: "[tensors.t]\nsize = \"1MiB\"\ndtpye = \"bf16\"\n[[op]]\nkernel = { us = 1 }\n",
        line: 3,
        column: 1,
        says: "unknown key \"dtpye\" in tensor \"t\"; did you mean \"dtype\"?",
    },
    BadInput {
        class: "a peer that does not exist",
        text: "[cluster]\nranks = 4\n[tensors]\na = \"1MiB\"\n[[op]]\nranks = [0]\nsend = \"a\"\npeer = 9\n",
        line: 8,
        column: 8,
        says: "peer: rank 9 does not exist (cluster.ranks = 4, ranks are 0..3)",
    },
];

#[test]
fn every_class_of_bad_input_names_its_line_and_column() {
    for bad in BAD_INPUTS {
        let error = sim::scenario::parse("bad.toml", bad.text)
            .expect_err(&format!("{} must be rejected", bad.class));
        assert_eq!(
            (error.line, error.column),
            (bad.line, bad.column),
            "{}: {error}",
            bad.class
        );
        assert!(
            error.message.contains(bad.says),
            "{}: {:?} does not say {:?}",
            bad.class,
            error.message,
            bad.says
        );
    }
}

#[test]
fn the_binary_reports_bad_input_with_file_line_column_and_exit_2() {
    let dir = std::env::temp_dir().join(format!("c10dsim-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (index, bad) in BAD_INPUTS.iter().enumerate() {
        let path = dir.join(format!("bad{index}.toml"));
        std::fs::write(&path, bad.text).unwrap();
        let path = path.to_string_lossy().into_owned();
        for command in ["run", "check"] {
            let output = c10dsim(&[command, &path]);
            assert_eq!(
                output.status.code(),
                Some(2),
                "{}: {}",
                bad.class,
                stderr(&output)
            );
            // Every command prefixes its errors alike, `check` each file's too.
            let expected = format!("c10dsim: {path}:{}:{}: error:", bad.line, bad.column);
            assert!(
                stderr(&output).contains(&expected),
                "{}: {:?} lacks {expected:?}",
                bad.class,
                stderr(&output)
            );
            assert!(!stderr(&output).contains("panicked"));
        }
    }
    let missing = c10dsim(&["run", "no/such/file.toml"]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(stderr(&missing).contains("cannot read no/such/file.toml"));
    let bad_set = c10dsim(&[
        "run",
        "scenarios/exp_b_stream_scope.toml",
        "--set",
        "torch.x=1",
    ]);
    assert_eq!(bad_set.status.code(), Some(2));
    assert!(
        stderr(&bad_set).contains("is not a table"),
        "{}",
        stderr(&bad_set)
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn check_accepts_the_whole_catalogue() {
    let mut args = vec!["check".to_string()];
    for entry in std::fs::read_dir(crate::util::scenarios_dir()).unwrap() {
        args.push(entry.unwrap().path().to_string_lossy().into_owned());
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let output = c10dsim(&args);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(stdout(&output).matches("ok: ").count(), args.len() - 1);
    // One of a thing is singular (launch_queue has one op, on one rank).
    let text = stdout(&output);
    assert!(text.contains("launch_queue.toml (1 op, 1 rank, "), "{text}");
    assert!(
        !text.contains(" 1 ranks") && !text.contains("(1 ops"),
        "{text}"
    );
    // Sizes read as sizes: "a 10.50KiB Timeline", not "a 10752B Timeline".
    for line in stdout(&output).lines() {
        let size = line
            .split(", a ")
            .last()
            .unwrap()
            .trim_end_matches(" Timeline)");
        assert!(size.ends_with("iB") || size.len() < 5, "{line}");
    }
}

#[test]
fn check_estimates_the_work_as_the_flags_would_simulate_it() {
    // exp_b's ranks that behave alike are simulated once folded, each with --no-fold: the
    // estimate printed is the run's (it printed the folded one either way).
    let estimate = |extra: &[&str]| {
        let mut args = vec!["check", "scenarios/exp_b_stream_scope.toml"];
        args.extend(extra);
        let output = c10dsim(&args);
        assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
        let text = stdout(&output);
        let calls = text
            .split("about ")
            .nth(1)
            .unwrap()
            .split(' ')
            .next()
            .unwrap();
        calls.parse::<u64>().unwrap()
    };
    let folded = estimate(&[]);
    let unfolded = estimate(&["--no-fold"]);
    assert!(
        unfolded > folded,
        "{unfolded} op calls unfolded, {folded} folded"
    );
    // --set applies as in run: the same file checked at twice its ranks, unfolded.
    let doubled = estimate(&["--no-fold", "--set", "cluster.ranks=8"]);
    assert_eq!(doubled, 2 * unfolded);
}

#[test]
fn same_file_and_seed_give_byte_identical_json_trace_and_timeline() {
    let dir = std::env::temp_dir().join(format!("c10dsim-det-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut runs = Vec::new();
    for attempt in 0..2 {
        let trace = dir.join(format!("trace{attempt}.json"));
        let timeline = dir.join(format!("timeline{attempt}.json"));
        let output = c10dsim(&[
            "run",
            "scenarios/overlap_bench.toml",
            "--json",
            "--trace",
            trace.to_str().unwrap(),
            "--timeline",
            timeline.to_str().unwrap(),
        ]);
        assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
        runs.push((
            output.stdout,
            std::fs::read(&trace).unwrap(),
            std::fs::read(&timeline).unwrap(),
        ));
    }
    assert!(runs[0] == runs[1], "two runs differ");
    let json: serde_json::Value = serde_json::from_slice(&runs[0].0).unwrap();
    assert_eq!(json["parameters"]["seed"], 1);
    assert!(json["report"]["overlaps"].as_array().unwrap().len() == 5);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_trace_has_rank_processes_stream_threads_kernels_and_flows() {
    let dir = std::env::temp_dir().join(format!("c10dsim-trace-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let trace = dir.join("trace.json");
    let output = c10dsim(&[
        "run",
        "scenarios/exp_b_stream_scope.toml",
        "--trace",
        trace.to_str().unwrap(),
    ]);
    assert_eq!(output.status.code(), Some(0));
    let value: serde_json::Value = serde_json::from_slice(&std::fs::read(&trace).unwrap()).unwrap();
    let events = value["traceEvents"].as_array().unwrap();
    let named = |name: &str| events.iter().filter(|e| e["name"] == name).count();
    assert_eq!(named("process_name"), 4, "one process row per rank");
    // Per rank: 45 repeats of one all_reduce kernel, named as NCCL names it.
    assert_eq!(
        named("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"),
        4 * 45
    );
    // Flow arrows: syncStream (R10a) and wait() (R12) per all_reduce; one launch arrow per kernel.
    let flow_starts = |cat: &str| {
        events
            .iter()
            .filter(|e| e["ph"] == "s" && e["cat"] == cat)
            .count()
    };
    assert_eq!(flow_starts("stream_wait"), 4 * 45 * 2);
    let launches = events
        .iter()
        .filter(|e| e["name"] == "cudaLaunchKernel" && e["cat"] == "cuda_runtime")
        .count();
    assert_eq!(flow_starts("ac2g"), launches);
    let thread_names: Vec<&str> = events
        .iter()
        .filter(|e| e["name"] == "thread_name" && e["pid"] == 1)
        .map(|e| e["args"]["name"].as_str().unwrap())
        .collect();
    assert!(
        thread_names.contains(&"stream 1 (wait_stream)"),
        "{thread_names:?}"
    );
    assert!(
        thread_names.contains(&"stream 3 (nccl:world)"),
        "{thread_names:?}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// hang_10min: ranks 0-2 call and launch the all_reduce that rank 3 never joins. torch.profiler
/// records the host side of that call, which returned; CUPTI reports no kernel that never
/// ended. So each of them has the call's `record_param_comms` (marked as never completed) and
/// its `cudaLaunchKernel`, and no kernel; rank 3, which never called it, has neither.
#[test]
fn trace_dir_shows_the_hung_collective_called_and_launched_by_every_rank_that_called_it() {
    let dir = std::env::temp_dir().join(format!("c10dsim-hung-trace-{}", std::process::id()));
    let output = c10dsim(&[
        "run",
        "scenarios/hang_10min.toml",
        "--trace-dir",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    for rank in 0..4 {
        let path = dir.join(format!("rank{rank}.pt.trace.json"));
        let value: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        let events = value["traceEvents"].as_array().unwrap();
        let named = |name: &str| -> Vec<&serde_json::Value> {
            events.iter().filter(|e| e["name"] == name).collect()
        };
        let calls = named("c10d::allreduce_");
        let comms: Vec<_> = named("record_param_comms")
            .into_iter()
            .filter(|e| e["args"]["Collective name"] == "allreduce")
            .collect();
        let launches = named("cudaLaunchKernel");
        assert!(!events.iter().any(|e| e["cat"] == "kernel"), "rank {rank}");
        if rank == 3 {
            assert!(calls.is_empty() && comms.is_empty() && launches.is_empty());
            continue;
        }
        assert_eq!(
            (calls.len(), comms.len(), launches.len()),
            (1, 1, 1),
            "rank {rank}"
        );
        let args = &comms[0]["args"];
        assert_eq!(args["Seq"], 1);
        assert_eq!(args["Rank"], rank);
        assert_eq!(args["c10dsim never completed"], true);
        assert_eq!(launches[0]["args"]["c10dsim kernel never ended"], true);
        // The launch, at 20 µs, inside the 30-µs call that made it.
        let (call_ts, call_dur) = (calls[0]["ts"].as_u64(), calls[0]["dur"].as_u64());
        assert_eq!((call_ts, call_dur), (Some(0), Some(30)));
        let launch_end = launches[0]["ts"].as_u64().unwrap() + launches[0]["dur"].as_u64().unwrap();
        assert_eq!(launch_end, 20);
        // Work.wait on it returned too (R12): its record_param_comms, never completed either.
        let wait = named("record_param_comms")
            .into_iter()
            .find(|e| e["args"]["Collective name"] == "wait")
            .expect("the wait's record_param_comms");
        assert_eq!(wait["args"]["c10dsim never completed"], true);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn trace_dir_writes_one_file_per_rank_and_refuses_files_of_other_ranks() {
    let dir = std::env::temp_dir().join(format!("c10dsim-trace-dir-{}", std::process::id()));
    let traces = dir.join("traces");
    let run = || {
        c10dsim(&[
            "run",
            "scenarios/exp_b_stream_scope.toml",
            "--trace-dir",
            traces.to_str().unwrap(),
        ])
    };
    let output = run();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(stderr(&output).contains("wrote 4 rank traces into"));
    for rank in 0..4 {
        let path = traces.join(format!("rank{rank}.pt.trace.json"));
        let value: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(value["distributedInfo"]["rank"], rank);
        assert_eq!(value["distributedInfo"]["world_size"], 4);
        assert!(value["traceEvents"].as_array().unwrap().len() > 100);
    }
    // Writing again over the same ranks is fine; a file of a rank this run lacks is refused,
    // as HTA would read it as part of the run.
    assert_eq!(run().status.code(), Some(0));
    std::fs::write(traces.join("rank7.pt.trace.json"), "{}").unwrap();
    let refused = run();
    assert_eq!(refused.status.code(), Some(2));
    assert!(
        stderr(&refused).contains("holds rank7.pt.trace.json, of a rank this run does not have"),
        "{}",
        stderr(&refused)
    );
    let dash = c10dsim(&[
        "run",
        "scenarios/exp_b_stream_scope.toml",
        "--trace-dir",
        "-",
    ]);
    assert_eq!(dash.status.code(), Some(2));
    assert!(stderr(&dash).contains("--trace-dir writes a folder"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_rank_skipping_a_collective_ends_in_a_deadlock_finding_and_exit_1() {
    let dir = std::env::temp_dir().join(format!("c10dsim-dead-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("skip.toml");
    std::fs::write(
        &path,
        "[cluster]\nranks = 4\n[tensors]\nx = \"1MiB\"\n[[op]]\nlabel = \"ar\"\nranks = [0, 1, 2]\nall_reduce = \"x\"\n[[op]]\nlabel = \"sync\"\ndevice_sync = true\n",
    )
    .unwrap();
    let output = c10dsim(&["run", path.to_str().unwrap(), "--json"]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let findings = json["report"]["findings"].as_array().unwrap();
    let messages: Vec<&str> = findings
        .iter()
        .map(|f| f["message"].as_str().unwrap())
        .collect();
    // Rank 3 never creates the communicator, so ranks 0..2 wait in the lazy init (R8).
    assert!(
        messages
            .iter()
            .any(|m| m.contains("[Rank 0] the host is blocked in ar")),
        "{messages:?}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn help_names_the_subcommands_and_exit_codes() {
    let output = c10dsim(&["--help"]);
    assert_eq!(output.status.code(), Some(0));
    let text = stdout(&output);
    // Each subcommand is a line of clap's "Commands:" list: two spaces, the name, its summary.
    for command in [
        "run", "check", "hw", "torch", "bench", "sweep", "diff", "import",
    ] {
        assert!(
            text.lines().any(|line| line
                .strip_prefix("  ")
                .and_then(|rest| rest.strip_prefix(command))
                .is_some_and(|rest| rest.starts_with("  "))),
            "subcommand {command} missing from --help:\n{text}"
        );
    }
    assert!(text.contains("Exit codes: 0 ok; 1 "), "{text}");
    // `help COMMAND…` prints what `COMMAND… --help` does, and `help --help` its own help (clap's
    // `help` took `--help` for a command's name and refused it).
    for path in [&[][..], &["run"][..], &["import", "kineto"][..]] {
        let asked = c10dsim(&[&["help"], path].concat());
        assert_eq!(asked.status.code(), Some(0), "help {path:?}");
        let direct = c10dsim(&[path, &["--help"]].concat());
        assert_eq!(stdout(&asked), stdout(&direct), "help {path:?}");
    }
    let own = c10dsim(&["help", "--help"]);
    assert_eq!(own.status.code(), Some(0), "{}", stderr(&own));
    assert!(
        stdout(&own).contains("Usage: c10dsim help [COMMAND]..."),
        "{}",
        stdout(&own)
    );
    let unknown = c10dsim(&["help", "import", "kinetoo"]);
    assert_eq!(unknown.status.code(), Some(2));
    assert!(
        stderr(&unknown).contains("c10dsim import has no command \"kinetoo\""),
        "{}",
        stderr(&unknown)
    );
}

#[test]
fn hw_without_a_gpu_exits_2_naming_what_is_missing() {
    // Downscaled: a 4-rank scenario in one process is refused before the GPU is looked for.
    let output = c10dsim(&[
        "hw",
        "scenarios/exp_b_stream_scope.toml",
        "--downscale",
        "model",
    ]);
    let text = stderr(&output);
    if output.status.code() == Some(0) {
        crate::util::skipped(&format!(
            "hw_without_a_gpu_exits_2_naming_what_is_missing: this machine has a GPU; `c10dsim hw` ran ({text})"
        ));
        return;
    }
    assert_eq!(output.status.code(), Some(2), "{text}");
    // What is missing, by how far the machine gets: no driver library, or no usable GPU.
    let named = [
        "libcuda.so not found by the dynamic loader",
        "no usable NVIDIA GPU: ",
    ];
    assert!(
        text.starts_with("c10dsim: ") && named.iter().any(|what| text.contains(what)),
        "{text}"
    );
    assert!(!text.contains("panicked"), "{text}");
}

#[test]
fn errors_show_the_line_with_a_caret_and_suggest_the_near_name() {
    let dir = std::env::temp_dir().join(format!("c10dsim-caret-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("typo.toml");
    std::fs::write(
        &path,
        "[tensors]\nbuf = \"1MiB\"\n[[op]]\nall_reduce = \"bfu\"\n",
    )
    .unwrap();
    let path = path.to_string_lossy().into_owned();
    let output = c10dsim(&["check", &path]);
    assert_eq!(output.status.code(), Some(2));
    let text = stderr(&output);
    assert!(
        text.contains(&format!("{path}:4:14: error: unknown tensor \"bfu\"")),
        "{text}"
    );
    assert!(text.contains("did you mean \"buf\"?"), "{text}");
    assert!(text.contains("4 │ all_reduce = \"bfu\""), "{text}");
    assert!(text.contains("│              ^^^^^"), "{text}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn an_error_written_by_set_points_at_the_set_argument() {
    let output = c10dsim(&[
        "run",
        "scenarios/exp_b_stream_scope.toml",
        "--set",
        "cluster.ranks=4",
        "--set",
        "env.TORCH_NCCL_BLOCKING_WAITT=1",
    ]);
    assert_eq!(output.status.code(), Some(2));
    let text = stderr(&output);
    let heading = text.lines().next().unwrap_or_default();
    assert!(
        heading.starts_with("c10dsim: --set env.TORCH_NCCL_BLOCKING_WAITT=1:1:5: error:"),
        "{text}"
    );
    assert!(
        heading.contains("did you mean \"TORCH_NCCL_BLOCKING_WAIT\""),
        "{text}"
    );
    // One suggestion, not the ~1,800 characters of every modelled variable.
    assert!(
        heading.len() < 300,
        "{} characters: {heading}",
        heading.len()
    );
    assert!(
        text.contains("1 │ env.TORCH_NCCL_BLOCKING_WAITT=1"),
        "{text}"
    );
    // A bad value given by --set: the caret is under the value in the argument.
    let output = c10dsim(&[
        "run",
        "scenarios/exp_b_stream_scope.toml",
        "--set",
        "repeat=0",
    ]);
    assert_eq!(output.status.code(), Some(2));
    let text = stderr(&output);
    assert!(
        text.starts_with("c10dsim: --set repeat=0:1:8: error: repeat must be"),
        "{text}"
    );
    assert!(text.contains("1 │ repeat=0\n  │        ^"), "{text}");
    // An error on a line the overrides left alone keeps the file's own line number, though
    // the edit added lines before it.
    let dir = std::env::temp_dir().join(format!("c10dsim-setline-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("late.toml");
    std::fs::write(
        &path,
        "[env]\n[tensors]\nbuf = \"1MiB\"\n[[op]]\nall_reduce = \"nope\"\n",
    )
    .unwrap();
    let path = path.to_string_lossy().into_owned();
    let output = c10dsim(&[
        "run",
        &path,
        "--set",
        "env.TORCH_NCCL_BLOCKING_WAIT=1",
        "--set",
        "host.launch_us=4",
    ]);
    assert_eq!(output.status.code(), Some(2));
    let text = stderr(&output);
    assert!(
        text.starts_with(&format!("c10dsim: {path}:5:14: error: unknown tensor")),
        "{text}"
    );
    assert!(text.contains("5 │ all_reduce = \"nope\""), "{text}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_report_names_the_files_lines_after_a_set_inserted_lines() {
    // The --set adds a key to [env], above the ops: the report still names the file's lines.
    let report = |args: &[&str]| {
        let mut all = vec!["run", "scenarios/hang_10min.toml"];
        all.extend_from_slice(args);
        let output = c10dsim(&all);
        assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
        String::from_utf8(output.stdout).unwrap()
    };
    let plain = report(&[]);
    let set = report(&["--set", "env.TORCH_NCCL_ASYNC_ERROR_HANDLING=3"]);
    assert!(plain.contains("at ar (line 36)"), "{plain}");
    assert!(set.contains("at ar (line 36)"), "{set}");
    let lines = |text: &str| -> Vec<String> {
        (text.lines())
            .filter(|line| line.contains("(line "))
            .map(str::to_string)
            .collect()
    };
    assert_eq!(lines(&plain), lines(&set));
}

#[test]
fn nccl_tests_output_has_all_reduce_perf_columns_and_json_stays_json() {
    let output = c10dsim(&[
        "run",
        "scenarios/nccl_tests_all_reduce.toml",
        "--nccl-tests",
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    // The table alone on stdout, as all_reduce_perf prints it; the report on stderr.
    let table = stdout(&output);
    assert!(table.starts_with("# c10dsim: simulated"), "{table}");
    assert!(
        stderr(&output).contains("collectives (medians"),
        "{}",
        stderr(&output)
    );
    // As scripts parse all_reduce_perf: data lines are those not starting with '#'; 13 fields.
    let mut sizes = Vec::new();
    let mut busbw_sum = 0.0;
    for line in table
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
    {
        let fields: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(fields.len(), 13, "{line}");
        let size: u64 = fields[0].parse().unwrap();
        let count: u64 = fields[1].parse().unwrap();
        assert_eq!(
            (fields[2], fields[3], fields[4]),
            ("float", "sum", "-1"),
            "{line}"
        );
        assert_eq!(count * 4, size);
        for at in [5, 6, 7, 9, 10, 11] {
            fields[at]
                .parse::<f64>()
                .unwrap_or_else(|_| panic!("{line}: field {at}"));
        }
        assert_eq!(
            fields[5..9],
            fields[9..13],
            "in place = out of place: {line}"
        );
        assert_eq!(fields[8], "N/A");
        busbw_sum += fields[7].parse::<f64>().unwrap();
        sizes.push(size);
    }
    assert!(
        sizes.len() > 20 && sizes.windows(2).all(|w| w[0] < w[1]),
        "{sizes:?}"
    );
    let average: f64 = table
        .lines()
        .find_map(|l| l.strip_prefix("# Avg bus bandwidth    : "))
        .expect("the footer")
        .trim()
        .parse()
        .unwrap();
    let mean = busbw_sum / sizes.len() as f64;
    assert!(
        (average - mean).abs() < 0.01 + 1e-3 * mean,
        "{average} vs {mean}"
    );

    let output = c10dsim(&[
        "run",
        "scenarios/nccl_tests_all_reduce.toml",
        "--nccl-tests",
        "--json",
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).expect("one JSON object");
    let rows = json["nccl_tests"].as_array().expect("the table's rows");
    assert_eq!(rows.len(), sizes.len());
    assert_eq!(rows[0]["size_bytes"], sizes[0]);
    assert!(json["report"].is_object());
    // The table and a file on stdout would mix: refused.
    let both = c10dsim(&[
        "run",
        "scenarios/nccl_tests_all_reduce.toml",
        "--nccl-tests",
        "--timeline",
        "-",
    ]);
    assert_eq!(both.status.code(), Some(2), "{}", stderr(&both));
    assert!(both.stdout.is_empty());
}

#[test]
fn completions_and_the_man_page_name_every_subcommand() {
    let subcommands = [
        "run",
        "check",
        "sweep",
        "merge",
        "plot",
        "diff",
        "completions",
        "man",
    ];
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let output = c10dsim(&["completions", shell]);
        assert_eq!(
            output.status.code(),
            Some(0),
            "{shell}: {}",
            stderr(&output)
        );
        let script = stdout(&output);
        for word in subcommands {
            assert!(script.contains(word), "{shell} completion lacks {word}");
        }
    }
    let bash = stdout(&c10dsim(&["completions", "bash"]));
    assert!(bash.contains("complete -F _c10dsim"), "{bash}");
    assert!(bash.contains("--nccl-tests") && bash.contains("--log-y"));
    let bad = c10dsim(&["completions", "tcsh"]);
    assert_eq!(bad.status.code(), Some(2));
    let man = c10dsim(&["man"]);
    assert_eq!(man.status.code(), Some(0), "{}", stderr(&man));
    let page = stdout(&man);
    assert!(
        page.contains(".TH c10dsim 1"),
        "{}",
        &page[..300.min(page.len())]
    );
    for word in ["run", "sweep", "completions", "Exit codes"] {
        assert!(page.contains(word), "the man page lacks {word}");
    }
    // Every page c10dsim's lists (`c10dsim-run(1)`) is printed by `man run`; `help` has none.
    // They used to be listed without a way to get them.
    assert!(!page.contains("c10dsim\\-help(1)"), "{page}");
    let listed: Vec<&str> = page
        .split("c10dsim\\-")
        .skip(1)
        .filter_map(|rest| rest.split_once("(1)"))
        .map(|(name, _)| name)
        .collect();
    assert!(
        listed.contains(&"run") && listed.contains(&"hw\\-merge"),
        "{listed:?}"
    );
    for name in listed {
        let name = name.replace("\\-", "-");
        let output = c10dsim(&["man", &name]);
        assert_eq!(
            output.status.code(),
            Some(0),
            "man {name}: {}",
            stderr(&output)
        );
        let title = format!(".TH c10dsim-{name} 1");
        assert!(stdout(&output).contains(&title), "man {name}");
    }
    let run = stdout(&c10dsim(&["man", "run"]));
    assert!(run.contains("\\-\\-nccl\\-tests"), "{run}");
    let kineto = c10dsim(&["man", "import", "kineto"]);
    assert!(stdout(&kineto).contains(".TH c10dsim-import-kineto 1"));
    let unknown = c10dsim(&["man", "import", "nosuch"]);
    assert_eq!(unknown.status.code(), Some(2));
    assert!(
        stderr(&unknown).contains("its commands are kineto, flight-recorder"),
        "{}",
        stderr(&unknown)
    );
}

#[test]
fn a_dash_reads_standard_input_and_writes_standard_output() {
    let scenario = std::fs::read("scenarios/exp_b_stream_scope.toml").unwrap();
    let check = c10dsim_fed(&["check", "-"], &scenario);
    assert_eq!(check.status.code(), Some(0), "{}", stderr(&check));
    assert!(stdout(&check).starts_with("ok: - "), "{}", stdout(&check));
    // --timeline - puts the Timeline alone on stdout; the report moves to stderr.
    let run = c10dsim_fed(
        &["run", "-", "--set", "repeat=10", "--timeline", "-"],
        &scenario,
    );
    assert_eq!(run.status.code(), Some(0), "{}", stderr(&run));
    let timeline: serde_json::Value = serde_json::from_slice(&run.stdout).expect("one JSON");
    assert_eq!(timeline["format"], "c10dsim-timeline/1");
    assert!(
        stderr(&run).contains("collectives (medians"),
        "{}",
        stderr(&run)
    );
    let diff = c10dsim_fed(&["diff", "-", "-"], b"");
    assert_eq!(diff.status.code(), Some(2), "{}", stderr(&diff));
    let bad = c10dsim_fed(&["check", "-"], b"[cluster]\nrankz = 2\n");
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        stderr(&bad).contains("-:2:1: error: unknown field `rankz`"),
        "{}",
        stderr(&bad)
    );
    let twice = c10dsim(&[
        "run",
        "scenarios/exp_b_stream_scope.toml",
        "--trace",
        "-",
        "--timeline",
        "-",
    ]);
    assert_eq!(twice.status.code(), Some(2), "{}", stderr(&twice));
}

#[test]
fn a_file_on_standard_output_moves_the_whole_report_to_standard_error() {
    // The report on stderr used to start at `collectives (…)`: the scenario line, its sha,
    // seed and resolved parameters were left out (`--json` and `--nccl-tests` kept them).
    let plain = c10dsim(&["run", "scenarios/overlap_bench.toml"]);
    assert_eq!(plain.status.code(), Some(0), "{}", stderr(&plain));
    let report = stdout(&plain);
    assert!(report.starts_with("scenario \"overlap_bench\""), "{report}");
    for flag in ["--timeline", "--trace", "--svg"] {
        let run = c10dsim(&["run", "scenarios/overlap_bench.toml", flag, "-"]);
        assert_eq!(run.status.code(), Some(0), "{flag}: {}", stderr(&run));
        let (note, rest) = stderr(&run)
            .split_once('\n')
            .map(|(note, rest)| (note.to_string(), rest.to_string()))
            .unwrap();
        assert!(note.starts_with("c10dsim: wrote "), "{flag}: {note}");
        assert_eq!(rest, report, "{flag}");
    }
}

/// `-o -` of `hw-merge`, `calibrate` and `fidelity` (`sweep` and `run --svg`: tests/e2e/sweep.rs)
/// writes to stdout the bytes the file gets, with the notes on stderr.
#[test]
fn hw_merge_calibrate_and_fidelity_write_standard_output_with_a_dash() {
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("cli_dash_outputs");
    std::fs::create_dir_all(&dir).unwrap();
    let path = |name: &str| dir.join(name).display().to_string();
    // One-rank parts as `hw` writes them under a launcher: a rank and a wall-clock origin each
    // (from an unfolded run: hw's parts hold one rank each).
    let run = c10dsim(&[
        "run",
        "scenarios/exp_b_stream_scope.toml",
        "--no-fold",
        "--set",
        "repeat=10",
        "--timeline",
        "-",
    ]);
    assert_eq!(run.status.code(), Some(0), "{}", stderr(&run));
    let whole: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
    let mut merge_args = vec!["hw-merge".to_string()];
    for (index, rank) in whole["ranks"].as_array().unwrap().iter().enumerate() {
        let mut part = whole.clone();
        part["ranks"] = serde_json::json!([rank]);
        part["machine"]["rank"] = serde_json::json!(index.to_string());
        part["machine"]["host_origin_unix_ns"] = serde_json::json!((1_000 + index).to_string());
        let name = path(&format!("part{index}.json"));
        std::fs::write(&name, part.to_string()).unwrap();
        merge_args.push(name);
    }
    let merge_to = |output: &str| {
        let mut args: Vec<&str> = merge_args.iter().map(String::as_str).collect();
        args.extend(["-o", output]);
        c10dsim(&args)
    };
    let merged = path("merged.json");
    let to_file = merge_to(&merged);
    assert_eq!(to_file.status.code(), Some(0), "{}", stderr(&to_file));
    let piped = merge_to("-");
    assert_eq!(piped.status.code(), Some(0), "{}", stderr(&piped));
    let mut file = std::fs::read(&merged).unwrap();
    file.push(b'\n');
    assert!(piped.stdout == file, "hw-merge -o - differs from the file");
    assert!(
        stderr(&piped).contains("merged 4 ranks into standard output"),
        "{}",
        stderr(&piped)
    );

    // calibrate: the profile alone on stdout, the fitted values on stderr.
    let run = "tests/data/hw/exp_b_stream_scope.json";
    let profile = path("profile.toml");
    let to_file = c10dsim(&["calibrate", run, "-o", &profile]);
    assert_eq!(to_file.status.code(), Some(0), "{}", stderr(&to_file));
    let piped = c10dsim(&["calibrate", run, "-o", "-"]);
    assert_eq!(piped.status.code(), Some(0), "{}", stderr(&piped));
    assert!(piped.stdout == std::fs::read(&profile).unwrap());
    assert_eq!(stderr(&piped), stdout(&to_file));
    let held_out = "tests/data/hw/x2/overlap_bench.2ranks.json";
    let validate = c10dsim(&["calibrate", run, "-o", "-", "--validate", held_out]);
    assert_eq!(validate.status.code(), Some(2), "{}", stderr(&validate));
    assert!(
        stderr(&validate).contains("`-o -`"),
        "{}",
        stderr(&validate)
    );
    assert!(validate.stdout.is_empty());

    // fidelity: the marker and the generated Markdown, what follows the marker in a file.
    let torch = dir.join("torch");
    std::fs::create_dir_all(&torch).unwrap();
    for run in 1..=3 {
        let name = format!("exp_b_stream_scope.run{run}.json");
        std::fs::copy(format!("tests/data/torch/{name}"), torch.join(&name)).unwrap();
    }
    let torch = torch.display().to_string();
    let markdown = path("fidelity.md");
    let marker = "<!-- generated by `c10dsim fidelity`: everything below this line is replaced -->";
    std::fs::write(&markdown, format!("prose\n\n{marker}\nold table\n")).unwrap();
    let fidelity =
        |output: &str| c10dsim(&["fidelity", "--torch", &torch, "--hw", &torch, "-o", output]);
    let to_file = fidelity(&markdown);
    assert_eq!(to_file.status.code(), Some(0), "{}", stderr(&to_file));
    let piped = fidelity("-");
    assert_eq!(piped.status.code(), Some(0), "{}", stderr(&piped));
    let written = std::fs::read_to_string(&markdown).unwrap();
    assert!(
        stdout(&piped).contains("| exp_b_stream_scope |"),
        "{}",
        stdout(&piped)
    );
    assert!(stdout(&piped).starts_with(marker));
    assert_eq!(format!("prose\n\n{}", stdout(&piped)), written);
}

#[test]
fn json_with_the_timeline_on_stdout_puts_the_json_report_alone_on_stderr() {
    let output = c10dsim(&[
        "run",
        "scenarios/exp_b_stream_scope.toml",
        "--timeline",
        "-",
        "--json",
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let timeline = sim::timeline::Timeline::from_json(&stdout(&output)).unwrap();
    let report: serde_json::Value = serde_json::from_str(&stderr(&output)).unwrap();
    assert_eq!(report["parameters"]["name"], timeline.scenario.name);
    assert!(report["report"]["findings"].is_array(), "{report}");
}

#[test]
fn one_of_a_thing_is_singular_in_check_run_diff_and_bench() {
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("cli_singular");
    std::fs::create_dir_all(&dir).unwrap();
    let path = |name: &str| dir.join(name).to_string_lossy().into_owned();
    let scenario = path("one.toml");
    std::fs::write(
        &scenario,
        "[cluster]\nranks = 1\n[tensors]\nx = \"1MiB\"\n[[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\n\
         async_op = true\nwork = \"w\"\n[[op]]\nlabel = \"q\"\nis_completed = \"w\"\n[[op]]\nwait = \"w\"\n",
    )
    .unwrap();
    let broken = path("broken.toml");
    std::fs::write(&broken, "x").unwrap();
    let output = c10dsim(&["check", &scenario, &broken]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stdout(&output).contains("(3 ops, 1 rank, repeat 1; about 3 op calls,"),
        "{}",
        stdout(&output)
    );
    assert!(
        stderr(&output).contains("1 of 2 scenario files is invalid"),
        "{}",
        stderr(&output)
    );
    let one_op = path("one_op.toml");
    std::fs::write(&one_op, "[cluster]\nranks = 1\n[[op]]\nmark = \"a\"\n").unwrap();
    let output = c10dsim(&["check", &one_op]);
    assert!(
        stdout(&output).contains("about 1 op call,"),
        "{}",
        stdout(&output)
    );
    let (timeline, svg) = (path("one.json"), path("one.svg"));
    let output = c10dsim(&["run", &scenario, "--timeline", &timeline, "--svg", &svg]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        stdout(&output).contains("is_completed q (line 10): true in 100% of 1 call\n"),
        "{}",
        stdout(&output)
    );
    let chart = std::fs::read_to_string(&svg).unwrap();
    assert!(chart.contains("one: 1 rank, 1 iteration — "), "{chart}");
    for (selection, refusal) in [
        (
            "ranks=3",
            "rank 3 does not exist (the scenario has 1 rank, 0-0)",
        ),
        (
            "iterations=3",
            "iteration 3 does not exist (the scenario runs 1 iteration, 0-0)",
        ),
    ] {
        let output = c10dsim(&["run", &scenario, "--summary", "--records-for", selection]);
        assert_eq!(output.status.code(), Some(2));
        assert!(stderr(&output).contains(refusal), "{}", stderr(&output));
    }
    let output = c10dsim(&["diff", &timeline, &timeline]);
    assert!(
        stdout(&output).contains("A: one (1 rank, simulated, "),
        "{}",
        stdout(&output)
    );
    let output = c10dsim(&["bench", "--ranks", "1", "--iterations", "1"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        stdout(&output).contains("scenario: 1 rank x 1 iteration (")
            && stdout(&output).contains("(1 simulated rank; docs/scale.md)"),
        "{}",
        stdout(&output)
    );
    assert!(
        stderr(&output).contains("simulating 1 rank x 1 iteration ..."),
        "{}",
        stderr(&output)
    );
}

#[test]
fn bench_calls_no_ratio_of_its_two_simulations_the_detectors_cost() {
    // The detector's run goes second: its ratio to the first is no cost ("detector costs
    // 0.45x" where the first paid the first touch of memory).
    let output = c10dsim(&["bench", "--ranks", "16", "--iterations", "50"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        stdout(&output).contains("(the race detector's run took ")
            && stdout(&output).contains("first touch of memory")
            && !stdout(&output).contains("detector costs"),
        "{}",
        stdout(&output)
    );
}
