//! An NCCL async error belongs to the communicator (R27): a polling `wait()` or
//! `is_completed()` on any Work of the failed communicator finds it, as in the simulator
//! (`sim::pg::work::poll_error_ns`).

use super::*;

/// Rank 0's network fails under all_reduce `a` of group world, 1 ms after its enqueue; then
/// come `program`'s ops (`b`, `wb`: a Work of group `{group}`), under `env`.
fn comm_error(env: &str, first: &str, program: &str) -> String {
    format!(
        "[env]\n{env}\n[cluster]\nranks = 2\n[groups.world]\neager_init = true\ntimeout_s = 1\n\
         [groups.other]\nranks = [0, 1]\neager_init = true\ntimeout_s = 1\n\
         [tensors]\nx = \"1MiB\"\ny = \"1MiB\"\n{first}\
         [[op]]\nlabel = \"a\"\nall_reduce = \"x\"\nasync_op = true\nwork = \"wa\"\n{program}\
         [[op]]\nlabel = \"done\"\nhost_sleep_us = 10\n\
         [[fault]]\nranks = [0]\nat = \"a\"\nkind = \"async_error\"\nafter_us = 1000\n"
    )
}

/// A polling wait (blocking wait, or `wait(timeout)` where the watchdog runs, leaving the
/// error alone: `TORCH_NCCL_ASYNC_ERROR_HANDLING=0`) on `b`, another Work of the failed
/// communicator, raises its error at the first poll after it, caught or not; a completed `b`
/// waited on after the error raises at the first check; `b` of another group is unaffected;
/// `is_completed()` on `b` is true from the error on. Rank 0's exceptions, findings, records,
/// host calls, collectives and queries are the simulator's ([`caught_outline`]).
#[test]
fn another_work_of_the_failed_communicator_sees_its_error_on_both_engines_r15_r27() {
    let b = |group: &str| {
        format!(
            "[[op]]\nlabel = \"b\"\nall_reduce = \"y\"\ngroup = \"{group}\"\nasync_op = true\n\
             work = \"wb\"\n"
        )
    };
    let wait = |extra: &str| format!("[[op]]\nlabel = \"wait_b\"\nwait = \"wb\"\n{extra}");
    let again = "[[op]]\nlabel = \"again\"\nall_reduce = \"y\"\ncatch = true\n";
    let blocking = "TORCH_NCCL_BLOCKING_WAIT = 1";
    let clean_up = "TORCH_NCCL_ASYNC_ERROR_HANDLING = 2";
    let timed_caught = wait("timeout_ms = 500\ncatch = true\n");
    let sleep = "[[op]]\nhost_sleep_us = 5000\n";
    let b_first = b("world").replace("\"b\"", "\"b0\"");
    let cases = [
        (blocking, "", format!("{}{}", b("world"), wait(""))),
        (
            blocking,
            "",
            format!("{}{}{again}", b("world"), wait("catch = true\n")),
        ),
        (clean_up, "", format!("{}{timed_caught}{again}", b("world"))),
        (clean_up, "", format!("{}{timed_caught}{again}", b("other"))),
        (
            clean_up,
            b_first.as_str(),
            format!("{sleep}{timed_caught}{again}"),
        ),
        (
            clean_up,
            "",
            format!("{}{sleep}[[op]]\nis_completed = \"wb\"\n", b("world")),
        ),
    ];
    let mut failures = Vec::new();
    let mut raised = Vec::new();
    for (env, first, program) in cases {
        let text = comm_error(env, first, &program);
        let case = format!("{env} {first}{program}");
        let run = on_both(&text, FakeDevice::default());
        let queries = |rank: &RankTimeline| {
            let completed: Vec<_> = rank.queries.iter().map(|q| q.completed).collect();
            format!("queries {completed:?}")
        };
        let (mut hw, mut sim) = run.outlines();
        hw.push(queries(&run.rank0));
        let simulated = &run.simulated;
        sim.push(queries(&simulated.ranks[0]));
        failures.extend(outlines_differ(&case, &hw, &sim));
        // Whether rank 0 raised the communicator's error at `wait_b`, and what it queried.
        let scenario = sim::scenario::parse("comm_error.toml", &text).unwrap();
        let wait_b = (scenario.ops.iter())
            .position(|op| op.label.as_deref() == Some("wait_b"))
            .map(|op| op as u32);
        let at_wait_b = (run.findings.iter().map(|f| (f.op, &f.message)))
            .chain(
                run.rank0
                    .exceptions
                    .iter()
                    .map(|e| (Some(e.op), &e.message)),
            )
            .any(|(op, message)| {
                op.is_some() && op == wait_b && message.contains("NCCL reported an async error")
            });
        raised.push((at_wait_b, queries(&run.rank0)));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    let none = "queries []".to_string();
    assert_eq!(
        raised,
        [
            (true, none.clone()),
            (true, none.clone()),
            (true, none.clone()),
            (false, none.clone()),
            (true, none),
            (false, "queries [true]".to_string()),
        ]
    );
}

/// A default `wait()` after the error raises only where the program's own `is_completed()`
/// stored the error in its Work, as in the simulator (`sim::pg::work::stored_error_ns`): the
/// watchdog's finding stays in its copy of the Work (PyTorch's `workEnqueue` hands it
/// `*work`). On `a`, the Work the network failed under, or on `b`, another Work of the failed
/// communicator; under the default error handling (3) and under 2 (the process lives on).
/// Without the query the wait returns and the watchdog handles the error; with it the main
/// thread aborts the communicator, then raises. Rank 0's exceptions, findings, records, host
/// calls, collectives and queries are the simulator's ([`caught_outline`]).
#[test]
fn a_default_wait_raises_only_after_the_programs_is_completed_found_the_error_on_both_engines_r12_r27(
) {
    let b = "[[op]]\nlabel = \"b\"\nall_reduce = \"y\"\nasync_op = true\nwork = \"wb\"\n";
    let sleep = "[[op]]\nhost_sleep_us = 5000\n";
    let again = "[[op]]\nlabel = \"again\"\nall_reduce = \"y\"\ncatch = true\n";
    let mut failures = Vec::new();
    let mut raised = Vec::new();
    for env in ["", "TORCH_NCCL_ASYNC_ERROR_HANDLING = 2"] {
        for (work, extra) in [("wa", ""), ("wb", b)] {
            for query in [false, true] {
                let query_op = if query {
                    format!("[[op]]\nis_completed = \"{work}\"\n")
                } else {
                    String::new()
                };
                let program = format!(
                    "{extra}{sleep}{query_op}[[op]]\nlabel = \"wait\"\nwait = \"{work}\"\n\
                     catch = true\n{again}"
                );
                let text = comm_error(env, "", &program);
                let case = format!("{env} {program}");
                let run = on_both(&text, FakeDevice::default());
                let (hw, sim) = run.outlines();
                failures.extend(outlines_differ(&case, &hw, &sim));
                let scenario = sim::scenario::parse("comm_error.toml", &text).unwrap();
                let wait = (scenario.ops.iter())
                    .position(|op| op.label.as_deref() == Some("wait"))
                    .map(|op| op as u32)
                    .unwrap();
                let at_wait = (run.rank0.exceptions.iter())
                    .any(|e| e.op == wait && e.message.contains("NCCL reported an async error"));
                raised.push((case, at_wait, query));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    for (case, at_wait, query) in raised {
        assert_eq!(at_wait, query, "{case}");
    }
}

/// A barrier's default `wait()` after its Work's error: its own `isCompleted()` (PyTorch
/// 2.12's `isBarrierOp_ && !isCompleted()`) stores the error, and the wait aborts the
/// communicator, then raises, caught or not, as in the simulator.
#[test]
fn a_barriers_default_wait_stores_its_error_itself_on_both_engines_r14_r27() {
    let mut failures = Vec::new();
    for catch in [true, false] {
        let text = format!(
            "[cluster]\nranks = 2\n[groups.world]\neager_init = true\ntimeout_s = 1\n\
             [[op]]\nlabel = \"a\"\nbarrier = true\nasync_op = true\nwork = \"wa\"\n\
             [[op]]\nhost_sleep_us = 5000\n\
             [[op]]\nlabel = \"wait\"\nwait = \"wa\"\ncatch = {catch}\n\
             [[op]]\nlabel = \"done\"\nhost_sleep_us = 10\n\
             [[fault]]\nranks = [0]\nat = \"a\"\nkind = \"async_error\"\nafter_us = 1000\n"
        );
        let run = on_both(&text, FakeDevice::default());
        let (hw, sim) = run.outlines();
        failures.extend(outlines_differ(&format!("catch {catch}"), &hw, &sim));
        let raised_in_wait = (run.findings.iter().map(|f| (f.op, &f.message)))
            .chain(
                run.rank0
                    .exceptions
                    .iter()
                    .map(|e| (Some(e.op), &e.message)),
            )
            .any(|(op, message)| op == Some(2) && message.contains("NCCL reported an async error"));
        assert!(raised_in_wait, "catch {catch}: {hw:?}");
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// After a caught wait aborted the failed communicator, a wait on another Work of it whose
/// own fault failed it later raises that Work's own error, the one its poll found and stored
/// (`sim::pg::work::stored_error_ns`), not the communicator's earliest: rank 0's network
/// fails under `a` 1 ms after its enqueue and under `b` 2 ms after its; the first wait
/// catches `a`'s error and aborts, the second, 5 ms later, finds `b`'s (the communicator's
/// is no longer seen once aborted). Rank 0's exceptions, findings, records, host calls,
/// collectives and queries are the simulator's ([`caught_outline`]).
#[test]
fn a_wait_after_the_abort_raises_its_own_works_error_on_both_engines_r15_r27() {
    let program = "[[op]]\nlabel = \"b\"\nall_reduce = \"y\"\nasync_op = true\nwork = \"wb\"\n\
                   [[op]]\nlabel = \"wait_a\"\nranks = [0]\nwait = \"wa\"\ntimeout_ms = 60000\ncatch = true\n\
                   [[op]]\nranks = [0]\nhost_sleep_us = 5000\n\
                   [[op]]\nlabel = \"wait_b\"\nranks = [0]\nwait = \"wb\"\ntimeout_ms = 60000\n\
                   catch = true\n\
                   [[fault]]\nranks = [0]\nat = \"b\"\nkind = \"async_error\"\nafter_us = 2000\n";
    let text = comm_error("TORCH_NCCL_ASYNC_ERROR_HANDLING = 0", "", program);
    let run = on_both(&text, FakeDevice::default());
    let (hw, sim) = run.outlines();
    let simulated = &run.simulated;
    if let Some(failure) = outlines_differ("two faults", &hw, &sim) {
        panic!("{failure}");
    }
    let instant = |label: &str| {
        let scenario = sim::scenario::parse("comm_error.toml", &text).unwrap();
        let op = (scenario.ops.iter())
            .position(|op| op.label.as_deref() == Some(label))
            .unwrap() as u32;
        let raised = (simulated.ranks[0].exceptions.iter())
            .find(|e| e.op == op)
            .map(|e| e.message.clone())
            .unwrap_or_default();
        let (_, after) = raised.split_once(") at ").unwrap_or_default();
        after.split_once(" s;").unwrap_or_default().0.to_string()
    };
    let (a_error, b_error) = (instant("wait_a"), instant("wait_b"));
    assert!(!a_error.is_empty() && !b_error.is_empty());
    assert_ne!(a_error, b_error, "wait_b raised wait_a's error");
}
