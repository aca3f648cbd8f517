use crate::scenario::{parse, ErrorHandling, FaultKind, OpKind};

const PROGRAM: &str = "[cluster]\nranks = 2\n[tensors]\nx = \"1MiB\"\ny = \"1MiB\"\n[[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\nasync_op = true\nwork = \"w\"\n[[op]]\nwait = \"w\"\n";

/// The line and column of an error, and its message.
fn error(text: &str) -> (u32, u32, String) {
    let error = parse("f.toml", text).unwrap_err();
    (error.line, error.column, error.message)
}

#[test]
fn an_async_barrier_names_its_work_which_a_skip_fault_would_leave_unmade() {
    let program = "[cluster]\nranks = 2\n[[op]]\nlabel = \"b\"\nbarrier = true\nasync_op = true\nwork = \"w\"\n[[op]]\nwait = \"w\"\n";
    let scenario = parse("f.toml", program).unwrap();
    assert!(matches!(
        scenario.ops[0].kind,
        OpKind::Barrier {
            group: 0,
            async_op: true,
            work: Some(0),
        }
    ));
    let (line, _, message) = error("[[op]]\nbarrier = true\nwork = \"w\"\n");
    assert_eq!(line, 3);
    assert!(message.contains("needs async_op = true"), "{message}");
    let (_, _, message) = error(&format!(
        "{program}[[fault]]\nranks = [1]\nat = \"b\"\nkind = \"skip\"\n"
    ));
    assert!(
        message.contains("would leave the later wait on Work \"w\" without a Work"),
        "{message}"
    );
}

#[test]
fn faults_resolve_to_their_op_and_kind() {
    let text = format!(
        "{PROGRAM}[[fault]]\nranks = [1]\nat = \"ar\"\nkind = \"mismatch\"\nsize = \"2MiB\"\n"
    );
    let scenario = parse("f.toml", &text).unwrap();
    assert_eq!(scenario.faults[0].op, 0);
    assert_eq!(
        scenario.faults[0].kind,
        FaultKind::Mismatch {
            collective: crate::scenario::CollectiveKind::AllReduce,
            size_bytes: 2 << 20,
            dtype: crate::scenario::DType::F32,
        }
    );
    // Another dtype alone: the op's tensor as that type, as many elements.
    let mismatch = |keys: &str| {
        let text =
            format!("{PROGRAM}[[fault]]\nranks = [1]\nat = \"ar\"\nkind = \"mismatch\"\n{keys}");
        parse("f.toml", &text).unwrap().faults[0].kind.clone()
    };
    assert_eq!(
        mismatch("dtype = \"bf16\"\n"),
        FaultKind::Mismatch {
            collective: crate::scenario::CollectiveKind::AllReduce,
            size_bytes: 512 << 10,
            dtype: crate::scenario::DType::Bf16,
        }
    );
    assert_eq!(
        mismatch("dtype = \"bf16\"\nsize = \"1MiB\"\n"),
        FaultKind::Mismatch {
            collective: crate::scenario::CollectiveKind::AllReduce,
            size_bytes: 1 << 20,
            dtype: crate::scenario::DType::Bf16,
        }
    );
}

#[test]
fn a_barrier_s_own_four_bytes_are_no_mismatch() {
    // ProcessGroupNCCL's barrier all_reduces one f32 (R14): 4 bytes, as it issues them.
    let text = "[cluster]\nranks = 2\n[[op]]\nlabel = \"bar\"\nbarrier = true\n\
                [[fault]]\nranks = [1]\nat = \"bar\"\nkind = \"mismatch\"\n";
    let error = parse("f.toml", &format!("{text}size = \"4B\"\n")).unwrap_err();
    assert!(
        error.to_string().contains("differing from the op's"),
        "{error}"
    );
    assert!(parse("f.toml", &format!("{text}size = \"8B\"\n")).is_ok());
}

#[test]
fn a_mismatch_on_a_tensor_list_replaces_its_first_call_whole() {
    // Three 4 KiB tensors: the fault hits the op's first NCCL call, a coalescing block's
    // one call of all three (12 KiB), a bucketed op's first bucket (8 KiB under a 10 KB
    // cap), or one tensor's call.
    let mismatch = |batch: &str, keys: &str| {
        let text = format!(
            "[cluster]\nranks = 2\n[tensors]\ng = {{ size = \"4KiB\", count = 3 }}\n\
             [[op]]\nlabel = \"l\"\nall_reduce = \"g\"\n{batch}\n\
             [[fault]]\nranks = [1]\nat = \"l\"\nkind = \"mismatch\"\n{keys}"
        );
        parse("f.toml", &text).map(|s| s.faults[0].kind.clone())
    };
    let issued = |batch: &str, keys: &str| match mismatch(batch, keys).unwrap() {
        FaultKind::Mismatch { size_bytes, .. } => size_bytes,
        other => panic!("{other:?}"),
    };
    let block = "coalesce = true";
    assert_eq!(issued(block, "dtype = \"bf16\"\n"), 6 << 10);
    assert_eq!(issued(block, "collective = \"broadcast\"\n"), 12 << 10);
    assert_eq!(issued("bucket = \"10KB\"", "dtype = \"bf16\"\n"), 4 << 10);
    assert_eq!(issued("", "dtype = \"bf16\"\n"), 2 << 10);
    // The block's own size is no mismatch.
    let error = mismatch(block, "size = \"12KiB\"\n").unwrap_err();
    assert!(
        error.message.contains("differing from the op's"),
        "{}",
        error.message
    );
}

#[test]
fn bad_faults_name_their_line_and_column() {
    // The [[fault]] table opens on line 13: ranks on 14, at on 15, then the next keys.
    let fault = |body: &str| format!("{PROGRAM}[[fault]]\n{body}");
    let (line, column, message) = error(&fault("ranks = [1]\nat = \"ar\"\nkind = \"explode\"\n"));
    assert_eq!((line, column), (16, 8));
    assert!(
        message.contains("expected skip, hang, mismatch"),
        "{message}"
    );
    let (line, column, message) = error(&fault("ranks = [1]\nat = \"nope\"\nkind = \"die\"\n"));
    assert_eq!((line, column), (15, 6));
    assert!(message.contains("no op has"), "{message}");
    let (line, _, message) = error(&fault("ranks = [1]\nat = \"ar\"\nkind = \"mismatch\"\n"));
    assert_eq!(line, 16);
    assert!(message.contains("differing from the op's"), "{message}");
    let (line, _, message) = error(&fault(
        "ranks = [1]\nat = \"ar\"\nkind = \"mismatch\"\ndtype = \"f32\"\n",
    ));
    assert_eq!(line, 16);
    assert!(
        message.contains("size = … or dtype = … differing from the op's"),
        "{message}"
    );
    let (line, column, message) = error(&fault(
        "ranks = [1]\nat = \"ar\"\nkind = \"mismatch\"\ndtype = \"f64\"\n",
    ));
    assert_eq!((line, column), (17, 9));
    assert!(
        message.contains("unknown dtype \"f64\"; expected f32, bf16 or f16"),
        "{message}"
    );
    let (line, _, message) = error(&fault(
        "ranks = [1]\nat = \"ar\"\nkind = \"mismatch\"\ndtype = \"f32\"\nsize = 6\n",
    ));
    assert_eq!(line, 18);
    assert!(
        message.contains("fault.size 6 B is not a whole number of f32 elements"),
        "{message}"
    );
    let (line, _, message) = error(&fault(
        "ranks = [1]\nat = \"ar\"\nkind = \"hang\"\ndtype = \"bf16\"\n",
    ));
    assert_eq!(line, 17);
    assert!(
        message.contains("dtype does not apply to a hang fault"),
        "{message}"
    );
    let (line, _, message) = error(&fault("ranks = [1]\nat = \"ar\"\nkind = \"skip\"\n"));
    assert_eq!(line, 16);
    assert!(message.contains("use kind = \"hang\""), "{message}");
    let (line, _, message) = error(&fault(
        "ranks = [1]\nat = \"ar\"\nkind = \"die\"\nafter_us = 5\n",
    ));
    assert_eq!(line, 17);
    assert!(
        message.contains("after_us does not apply to a die fault"),
        "{message}"
    );
    let (line, _, message) = error(&fault(
        "ranks = [1]\nat = \"ar\"\niteration = 1\nkind = \"die\"\n",
    ));
    assert_eq!(line, 16);
    assert!(
        message.contains("fault.iteration must be between 0 and 0"),
        "{message}"
    );
}

#[test]
fn watchdog_variables_are_checked_and_read() {
    let text = format!("[env]\nTORCH_NCCL_ASYNC_ERROR_HANDLING = 2\nTORCH_NCCL_HEARTBEAT_TIMEOUT_SEC = \"60\"\n{PROGRAM}");
    let env = parse("f.toml", &text).unwrap().env;
    assert_eq!(env.async_error_handling, ErrorHandling::CleanUpOnly);
    assert_eq!(env.heartbeat_timeout_ns, 60_000_000_000);
    let (line, column, message) = error(&format!(
        "[env]\nTORCH_NCCL_ASYNC_ERROR_HANDLING = 4\n{PROGRAM}"
    ));
    assert_eq!((line, column), (2, 35));
    assert!(message.contains("between 0 and 3"), "{message}");
    let (line, _, message) = error(&format!("[groups.world]\ntimeout_s = -1\n{PROGRAM}"));
    assert_eq!(line, 2);
    assert!(message.contains("groups.timeout_s"), "{message}");
    // PyTorch keeps whole milliseconds: 0.5 ms would be 0 ms there, 1.0005 s 1000 ms.
    let (line, column, message) = error(&format!("[groups.world]\ntimeout_s = 0.0005\n{PROGRAM}"));
    assert_eq!((line, column), (2, 13));
    assert!(
        message.contains("groups.timeout_s must be a whole number of milliseconds, found 0.0005")
            && message.contains("PyTorch would time out after 0 ms"),
        "{message}"
    );
    let (_, _, message) = error(&format!("[groups.world]\ntimeout_s = 1.0005\n{PROGRAM}"));
    assert!(message.contains("after 1000 ms"), "{message}");
    // Whole milliseconds that a binary fraction cannot hold exactly are kept.
    let groups = |timeout_s: &str| {
        parse(
            "f.toml",
            &format!("[groups.world]\ntimeout_s = {timeout_s}\n{PROGRAM}"),
        )
        .unwrap()
        .groups
    };
    assert_eq!(groups("1.001")[0].timeout_ns, 1_001_000_000);
    assert_eq!(groups("0.001")[0].timeout_ns, 1_000_000);
}

#[test]
fn a_group_s_first_seq_num_is_read_and_checked() {
    let first = |text: &str| {
        let groups = parse("f.toml", &format!("{text}{PROGRAM}")).unwrap().groups;
        groups.iter().map(|g| g.first_seq_num).collect::<Vec<_>>()
    };
    assert_eq!(first(""), [1]);
    let tp = "[groups.tp]\nranks = [0]\nfirst_seq_num = 2001\n";
    assert_eq!(
        first(&format!("[groups.world]\nfirst_seq_num = 7\n{tp}")),
        [7, 2001]
    );
    for (value, column) in [("0", 17), ("1000000000001", 17)] {
        let (line, at, message) = error(&format!(
            "[groups.world]\nfirst_seq_num = {value}\n{PROGRAM}"
        ));
        assert_eq!((line, at), (2, column));
        assert!(
            message.contains(&format!(
                "groups.world.first_seq_num must be between 1 and 1000000000000, found {value}"
            )),
            "{message}"
        );
    }
}

#[test]
fn a_functional_collective_waits_at_the_first_read_of_its_result_r30() {
    let text = "[cluster]\nranks = 2\n[tensors]\nx = \"1MiB\"\ny = \"1MiB\"\n[[op]]\nfunctional_all_reduce = \"x\"\nresult = \"y\"\n[[op]]\ngemm = [64, 64, 64]\nreads = [\"x\"]\n[[op]]\nlabel = \"use\"\nkernel = { us = 5 }\nreads = [\"y\"]\n[[op]]\nkernel = { us = 5 }\nreads = [\"y\"]\n";
    let scenario = parse("f.toml", text).unwrap();
    let keys: Vec<&str> = scenario.ops.iter().map(|op| op.kind.key()).collect();
    // One wait_tensor, right before the first reader; none before the second.
    assert_eq!(keys, ["all_reduce", "gemm", "wait", "kernel", "kernel"]);
    assert!(matches!(
        scenario.ops[0].kind,
        OpKind::Collective {
            async_op: true,
            work: Some(_),
            ..
        }
    ));
    assert_eq!(scenario.ops[2].display_name(), "wait_tensor(y)");
    let (line, _, message) =
        error("[tensors]\nx = \"1MiB\"\n[[op]]\nfunctional_all_reduce = \"x\"\n");
    assert_eq!(line, 4);
    assert!(message.contains("needs result"), "{message}");
}

#[test]
fn each_rank_waits_for_a_functional_result_at_its_own_first_use_r30() {
    // Rank 0 uses y at use0, rank 1 only at use1: each rank's wait_tensor comes before its
    // own first use, in the iteration and across the loop's back edge.
    let head = "[cluster]\nranks = 2\n[tensors]\nx = \"1MiB\"\ny = \"1MiB\"\n";
    let call = "[[op]]\nfunctional_all_reduce = \"x\"\nresult = \"y\"\n";
    let uses = "[[op]]\nlabel = \"use0\"\nranks = [0]\nkernel = { us = 5 }\nreads = [\"y\"]\n[[op]]\nlabel = \"use1\"\nranks = [1]\nkernel = { us = 5 }\nreads = [\"y\"]\n";
    let waits = |text: &str| -> Vec<(String, Option<Vec<u32>>, bool)> {
        (parse("f.toml", text).unwrap().ops.iter())
            .map(|op| {
                let previous = matches!(
                    op.kind,
                    OpKind::Wait {
                        previous_iteration: true,
                        ..
                    }
                );
                (op.display_name(), op.ranks.clone(), previous)
            })
            .collect()
    };
    let wait = |ranks: u32, previous| ("wait_tensor(y)".to_string(), Some(vec![ranks]), previous);
    let use_on = |rank: u32| (format!("use{rank}"), Some(vec![rank]), false);
    assert_eq!(
        waits(&format!("{head}{call}{uses}"))[1..],
        [wait(0, false), use_on(0), wait(1, false), use_on(1)]
    );
    assert_eq!(
        waits(&format!("repeat = 2\n{head}{uses}{call}"))[..4],
        [wait(0, true), use_on(0), wait(1, true), use_on(1)]
    );
}

#[test]
fn a_call_on_some_ranks_leaves_the_others_result_pending_r30() {
    // `ar0` rebinds y on rank 0 only: rank 1's y is still `ar`'s result, whose wait_tensor
    // comes before its use, as rank 0's for `ar0`'s.
    let text = "[cluster]\nranks = 2\n[groups.solo]\nranks = [0]\n[tensors]\nx = \"1MiB\"\ny = \"1MiB\"\n[[op]]\nlabel = \"ar\"\nfunctional_all_reduce = \"x\"\nresult = \"y\"\n[[op]]\nlabel = \"ar0\"\ngroup = \"solo\"\nfunctional_all_reduce = \"x\"\nresult = \"y\"\n[[op]]\nlabel = \"use\"\nkernel = { us = 5 }\nreads = [\"y\"]\n";
    let ops: Vec<(String, Option<Vec<u32>>)> = (parse("f.toml", text).unwrap().ops.iter())
        .map(|op| (op.display_name(), op.ranks.clone()))
        .collect();
    let wait = |rank: u32| ("wait_tensor(y)".to_string(), Some(vec![rank]));
    assert_eq!(ops[2..], [wait(1), wait(0), ("use".to_string(), None)]);
}

#[test]
fn the_program_cannot_name_a_functional_result_s_work_r30() {
    // `wait_tensor(y)` is the Work of the result y: a Work the program names so would be
    // taken for it (and y's wait_tensor would wait on that Work), and a wait on it is a
    // wait Python has no handle for.
    let head = "[cluster]\nranks = 2\n[tensors]\nx = \"1MiB\"\ny = \"1MiB\"\nz = \"1MiB\"\n[[op]]\nfunctional_all_reduce = \"x\"\nresult = \"y\"\n";
    for (program, column) in [
        (
            "[[op]]\nall_reduce = \"z\"\nasync_op = true\nwork = \"wait_tensor(y)\"\n",
            8,
        ),
        (
            "[[op]]\nbarrier = true\nasync_op = true\nwork = \"wait_tensor(q)\"\n",
            8,
        ),
        ("[[op]]\nwait = \"wait_tensor(y)\"\n", 8),
        ("[[op]]\nis_completed = \"wait_tensor(y)\"\n", 16),
    ] {
        let (line, at, message) = error(&format!("{head}{program}"));
        let lines = program.lines().count() as u32;
        assert_eq!((line, at), (9 + lines, column), "{program}");
        assert!(
            message.contains("are the Works of functional collectives' results (R30)"),
            "{message}"
        );
    }
}

#[test]
fn a_functional_result_is_a_clone_of_one_input_tensor_r30() {
    let program = |x: &str, y: &str| {
        format!("[cluster]\nranks = 2\n[tensors]\nx = {x}\ny = {y}\n[[op]]\nfunctional_all_reduce = \"x\"\nresult = \"y\"\n")
    };
    let (line, column, message) = error(&program("\"4MiB\"", "\"1MiB\""));
    assert_eq!((line, column), (8, 10), "{message}");
    assert!(
        message.contains("clone of its input \"x\" (4MiB f32); \"y\" is declared as 1MiB f32"),
        "{message}"
    );
    let (_, _, message) = error(&program(
        "\"4MiB\"",
        "{ size = \"4MiB\", dtype = \"bf16\" }",
    ));
    assert!(message.contains("declared as 4MiB bf16"), "{message}");
    let (_, _, message) = error(&program("\"4MiB\"", "{ size = \"4MiB\", count = 2 }"));
    assert!(
        message.contains("declared as a list of 2 x 4MiB f32"),
        "{message}"
    );
    let (line, column, message) = error(&program("{ size = \"4MiB\", count = 3 }", "\"4MiB\""));
    assert_eq!((line, column), (7, 25), "{message}");
    assert!(
        message.contains("takes one tensor, and \"x\" is a list of 3"),
        "{message}"
    );
    assert!(parse("f.toml", &program("\"4MiB\"", "\"4MiB\"")).is_ok());
}

#[test]
fn a_functional_result_exists_from_its_call_unless_named_before_r30() {
    let text = |before: &str| {
        format!("[cluster]\nranks = 2\n[tensors]\nx = \"1MiB\"\ny = \"1MiB\"\n{before}[[op]]\nfunctional_all_reduce = \"x\"\nresult = \"y\"\n[[op]]\nkernel = {{ us = 5 }}\nreads = [\"y\"]\n")
    };
    // Made by the call, and alive past the program's end (the next iteration's call
    // rebinds it): no `free` asked.
    let scenario = parse("f.toml", &text("")).unwrap();
    assert!(scenario.tensors[1].dynamic);
    // Written before the call: a tensor of its own before the call binds the name.
    let scenario = parse(
        "f.toml",
        &text("[[op]]\nkernel = { us = 5 }\nwrites = [\"y\"]\n"),
    )
    .unwrap();
    assert!(!scenario.tensors[1].dynamic);
    // `y = fcol.all_reduce(y)`: the call reads y before it binds the result, so y is the
    // program's from the start.
    let in_place = "[cluster]\nranks = 2\n[tensors]\ny = \"1MiB\"\n[[op]]\nfunctional_all_reduce = \"y\"\nresult = \"y\"\n";
    assert!(!parse("f.toml", in_place).unwrap().tensors[0].dynamic);
}

#[test]
fn every_collective_given_a_functional_result_waits_for_it_first_r30() {
    let program = |uses: &str| {
        format!("[cluster]\nranks = 2\n[tensors]\nx = \"1MiB\"\ny = \"1MiB\"\n[[op]]\nfunctional_all_reduce = \"x\"\nresult = \"y\"\n{uses}")
    };
    // Each program, and the index its wait_tensor(y) takes: right before the op given y.
    let uses = [
        ("[[op]]\nall_reduce = \"y\"\n", 1),
        ("[[op]]\nall_gather = \"y\"\n", 1),
        ("[[op]]\nreduce_scatter = \"y\"\n", 1),
        ("[[op]]\nbroadcast = \"y\"\n", 1),
        ("[[op]]\nall_to_all = \"y\"\n", 1),
        ("[[op]]\nfunctional_all_reduce = \"y\"\nresult = \"x\"\n", 1),
        ("[[op]]\nranks = [0]\nsend = \"y\"\npeer = 1\n[[op]]\nranks = [1]\nrecv = \"x\"\npeer = 0\n", 1),
        ("[[op]]\nranks = [1]\nsend = \"x\"\npeer = 0\n[[op]]\nranks = [0]\nrecv = \"y\"\npeer = 1\n", 2),
        ("[[op]]\nbatch_isend_irecv = [{ send = \"y\", shift = 1 }, { recv = \"x\", shift = -1 }]\n", 1),
    ];
    for (used, index) in uses {
        let scenario =
            parse("f.toml", &program(used)).unwrap_or_else(|e| panic!("{used}: {}", e.message));
        let waits: Vec<usize> = (scenario.ops.iter())
            .filter(|op| op.display_name() == "wait_tensor(y)")
            .map(|op| op.index)
            .collect();
        assert_eq!(waits, [index], "{used}");
    }
    // A kernel writing the result's storage is not a use: no wait before it.
    let scenario = parse(
        "f.toml",
        &program("[[op]]\nkernel = { us = 5 }\nwrites = [\"y\"]\n"),
    )
    .unwrap();
    assert!(scenario
        .ops
        .iter()
        .all(|op| op.display_name() != "wait_tensor(y)"));
}

#[test]
fn a_result_unused_at_the_program_end_is_waited_at_its_first_use_in_the_next_iteration_r30() {
    // y = fcol.all_reduce(x); use(y); x = fcol.all_reduce(y): the next iteration's first
    // call uses x, the result the previous iteration left pending.
    let program = |repeat: u32, first: &str| {
        format!("repeat = {repeat}\n[cluster]\nranks = 4\n[tensors]\nx = \"1MiB\"\ny = \"1MiB\"\n{first}[[op]]\nlabel = \"ar_x\"\nfunctional_all_reduce = \"x\"\nresult = \"y\"\n[[op]]\nlabel = \"use_y\"\nkernel = {{ us = 5 }}\nreads = [\"y\"]\n[[op]]\nlabel = \"ar_y\"\nranks = [0, 1]\nfunctional_all_reduce = \"y\"\nresult = \"x\"\n")
    };
    let scenario = parse("f.toml", &program(2, "")).unwrap();
    let names: Vec<String> = scenario.ops.iter().map(|op| op.display_name()).collect();
    assert_eq!(
        names,
        ["wait_tensor(x)", "ar_x", "wait_tensor(y)", "use_y", "ar_y"]
    );
    let wait = &scenario.ops[0];
    assert!(matches!(
        wait.kind,
        OpKind::Wait {
            previous_iteration: true,
            ..
        }
    ));
    // On the ranks of the call that made it, named after the op that moved.
    assert_eq!(wait.ranks, Some(vec![0, 1]));
    assert_eq!(wait.line, scenario.ops[1].line);
    assert!(scenario.ops.iter().enumerate().all(|(i, op)| op.index == i));
    let labelled = |label: &str| {
        let text = format!(
            "{}[[perturb]]\nranks = [0]\nbefore = \"{label}\"\nhost_delay_us = 1\n",
            program(2, "")
        );
        parse("f.toml", &text).unwrap().perturbations[0].before_op
    };
    assert_eq!((labelled("ar_x"), labelled("ar_y")), (1, 4));
    // One iteration has no next one; a call that binds x again before any use drops the
    // pending result unwaited.
    for scenario in [
        parse("f.toml", &program(1, "")).unwrap(),
        parse(
            "f.toml",
            &program(2, "[[op]]\nfunctional_all_reduce = \"y\"\nresult = \"x\"\n"),
        )
        .unwrap(),
    ] {
        assert!(scenario.ops.iter().all(|op| !matches!(
            op.kind,
            OpKind::Wait {
                previous_iteration: true,
                ..
            }
        )));
    }
}

#[test]
fn two_faults_on_one_rank_op_and_iteration_are_refused_at_the_second() {
    let fault = |kind: &str| format!("[[fault]]\nranks = [1]\nat = \"ar\"\nkind = \"{kind}\"\n");
    let (hang, die) = (fault("hang"), fault("die"));
    let shrink = fault("mismatch") + "dtype = \"bf16\"\n";
    let swap = fault("mismatch") + "collective = \"broadcast\"\n";
    for (first, second) in [(&hang, &die), (&die, &hang), (&shrink, &swap)] {
        let (line, column, message) = error(&format!("repeat = 2\n{PROGRAM}{first}{second}"));
        let second_line = 14 + first.lines().count() as u32;
        assert_eq!((line, column), (second_line, 1), "{message}");
        assert!(
            message.contains("rank 1 at \"ar\" in iteration 0, as the [[fault]] of line 14"),
            "{message}"
        );
    }
    // Another rank, or another iteration after a fault that does not stop the rank, is
    // another place.
    let other_rank = die.replace("[1]", "[0]");
    let other_iteration = die.clone() + "iteration = 1\n";
    for (first, second) in [(&hang, &other_rank), (&shrink, &other_iteration)] {
        let text = format!("repeat = 2\n{PROGRAM}{first}{second}");
        assert_eq!(parse("f.toml", &text).unwrap().faults.len(), 2);
    }
}

#[test]
fn a_fault_after_a_hang_or_death_of_its_rank_is_refused_as_never_happening() {
    let fault = |kind: &str, iteration: u32| {
        format!("[[fault]]\nranks = [1]\nat = \"ar\"\nkind = \"{kind}\"\niteration = {iteration}\n")
    };
    // Listed after the hang: refused at itself.
    let text = format!(
        "repeat = 3\n{PROGRAM}{}{}",
        fault("hang", 0),
        fault("die", 2)
    );
    let (line, _, message) = error(&text);
    assert_eq!(line, 19, "{message}");
    assert!(
        message.contains("this [[fault]] never happens: the hang of the [[fault]] of line 14 stops rank 1 for good in iteration 0"),
        "{message}"
    );
    // Listed before the death that stops the rank first: refused at the death.
    let text = format!(
        "repeat = 3\n{PROGRAM}{}dtype = \"bf16\"\n{}",
        fault("mismatch", 2),
        fault("die", 1)
    );
    let (line, _, message) = error(&text);
    assert_eq!(line, 20, "{message}");
    assert!(
        message.contains("this die stops rank 1 for good in iteration 1, so the [[fault]] of line 14 (iteration 2, later) never happens"),
        "{message}"
    );
    // A fault before the hang happens.
    let text = format!(
        "repeat = 3\n{PROGRAM}{}dtype = \"bf16\"\n{}",
        fault("mismatch", 0),
        fault("hang", 1)
    );
    assert_eq!(parse("f.toml", &text).unwrap().faults.len(), 2);
}

#[test]
fn a_perturb_on_a_rank_that_does_not_run_the_op_is_refused_as_a_fault_is() {
    let program =
        "[cluster]\nranks = 2\n[[op]]\nlabel = \"k\"\nranks = [0]\nkernel = { us = 10 }\n";
    for (table, what) in [
        (
            "[[perturb]]\nranks = [1]\nbefore = \"k\"\nhost_delay_us = 5\n",
            "perturb.ranks",
        ),
        (
            "[[fault]]\nranks = [1]\nat = \"k\"\nkind = \"hang\"\n",
            "fault.ranks",
        ),
    ] {
        let (line, column, message) = error(&format!("{program}{table}"));
        assert_eq!((line, column), (8, 9), "{message}");
        assert!(
            message.contains(&format!("{what}: rank 1 does not run op \"k\"")),
            "{message}"
        );
    }
}

#[test]
fn a_mismatch_fault_names_every_collective_it_accepts() {
    let (line, column, message) = error(&format!(
        "{PROGRAM}[[fault]]\nranks = [1]\nat = \"ar\"\nkind = \"mismatch\"\ncollective = \"all_to_al\"\n"
    ));
    assert_eq!((line, column), (17, 14));
    assert!(
        message.contains("unknown collective \"all_to_al\"; expected one of all_reduce, all_gather, reduce_scatter, broadcast, all_to_all, send, recv, batch_isend_irecv"),
        "{message}"
    );
}
