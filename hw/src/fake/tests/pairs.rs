//! A lazy world's point-to-point pairs (`p2p:a:b`, R11) on both engines: their Works are the
//! world's watchdog's (`Scenario::process_group`), whose verdict on one of them is logged under
//! the world, sets the world's error, and under `TORCH_NCCL_ASYNC_ERROR_HANDLING=2` aborts
//! every communicator of the world, its pairs' included (R27: PyTorch's `abortComms()`).

use super::*;

/// The group error a verdict sets belongs to the process group's watchdog, which watches its
/// pairs' Works too (`TORCH_NCCL_PROPAGATE_ERROR=1`, R27): rank 0's watchdog finds rank 0's
/// own error under the pair Work `snd` at its 100 ms poll, which sets the world's error, so
/// the peer's error under the world's `ar` (rank 1's, 50 ms after its enqueue, read from the
/// store at 200 ms, while the process lives on: `TORCH_NCCL_ASYNC_ERROR_HANDLING=2`) logs no
/// `remote_error` line, on both engines; the verdict's `async_error` record and the abort's are
/// the world's on both: rank 0's exceptions, findings, records, host calls, collectives and
/// what is left unfinished are the simulator's ([`caught_outline`]). The world is lazy: an
/// eager world's sends run on its own communicator (R11), which hw refuses.
#[test]
fn a_verdict_on_a_pair_work_sets_its_process_groups_error_on_both_engines_r27() {
    // hw's watchdog gives its verdict before an op: the program sleeps in 10 ms steps.
    let sleeps = "[[op]]\nhost_sleep_us = 10_000\n".repeat(50);
    let text = format!(
        "[env]\nTORCH_NCCL_PROPAGATE_ERROR = 1\nTORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC = 250\n\
                TORCH_NCCL_ASYNC_ERROR_HANDLING = 2\n\
                [cluster]\nranks = 2\n[tensors]\nx = \"1MiB\"\ny = \"1MiB\"\n\
                [[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\nasync_op = true\nwork = \"wa\"\n\
                [[op]]\nlabel = \"snd\"\nranks = [0]\nsend = \"y\"\npeer = 1\nasync_op = true\n\
                work = \"s\"\n\
                [[op]]\nranks = [1]\nrecv = \"y\"\npeer = 0\n\
                {sleeps}\
                [[fault]]\nranks = [0]\nat = \"snd\"\nkind = \"async_error\"\nafter_us = 1000\n\
                [[fault]]\nranks = [1]\nat = \"ar\"\nkind = \"async_error\"\nafter_us = 50_000\n"
    );
    let run = on_both(&text, FakeDevice::default());
    let rank0_count = |records: &[WatchdogRecord], event: WatchdogEvent| {
        (records.iter())
            .filter(|r| r.rank == 0 && r.event == event)
            .count()
    };
    for (engine, records) in [("hw", &run.records), ("sim", &run.simulated.watchdog)] {
        let found = rank0_count(records, WatchdogEvent::AsyncError);
        assert_eq!(found, 1, "{engine}: the pair Work's verdict: {records:?}");
        let read = rank0_count(records, WatchdogEvent::RemoteError);
        assert_eq!(read, 0, "{engine}: {records:?}");
    }
    let (hw, sim) = run.outlines();
    if let Some(failure) = outlines_differ("a pair Work's verdict", &hw, &sim) {
        panic!("{failure}");
    }
}

/// Under `TORCH_NCCL_ASYNC_ERROR_HANDLING=2` the watchdog's verdict on a Work of a lazy world
/// or of one of its pairs aborts every communicator of the world, the pairs' included (R27:
/// `work.abort()`, then `abortComms()` of the process group): rank 0's network fails under
/// `failed` (the world's all_reduce, or the send to rank 1, found by the watchdog or at the
/// raise of a caught polling wait on it, which aborted the pair's communicator alone), and
/// after the handling (the program sleeps 2 s, past the dump wait: a call made before the
/// handling is issued, as in the simulator) a later call on the world and a send on the pair
/// both raise, caught, on both engines. The device is asked to abort the world's communicator
/// and the pair's, each once. Rank 0's exceptions, findings, records, host calls, collectives
/// and what is left unfinished are the simulator's ([`caught_outline`]).
#[test]
fn clean_up_only_aborts_every_communicator_of_the_process_group_on_both_engines_r27() {
    let sleeps = "[[op]]\nhost_sleep_us = 10_000\n".repeat(200);
    let world_first =
        "[[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\nasync_op = true\nwork = \"wa\"\n\
                       [[op]]\nlabel = \"snd\"\nranks = [0]\nsend = \"y\"\npeer = 1\n\
                       async_op = true\nwork = \"s\"\n\
                       [[op]]\nranks = [1]\nrecv = \"y\"\npeer = 0\n";
    let mut failures = Vec::new();
    for (failed, waited) in [("ar", None), ("snd", None), ("snd", Some("s"))] {
        // A caught polling wait on the failed Work aborts its communicator alone and raises;
        // the watchdog finds the error at the raise, and its handling aborts the rest.
        let wait = waited.map_or(String::new(), |work| {
            format!("[[op]]\nranks = [0]\nwait = \"{work}\"\ntimeout_ms = 60000\ncatch = true\n")
        });
        let text = format!(
            "[env]\nTORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC = 250\n\
             TORCH_NCCL_ASYNC_ERROR_HANDLING = 2\n\
             [cluster]\nranks = 2\n[tensors]\nx = \"1MiB\"\ny = \"1MiB\"\n\
             {world_first}{wait}{sleeps}\
             [[op]]\nlabel = \"again_world\"\nall_reduce = \"x\"\ncatch = true\n\
             [[op]]\nlabel = \"again_pair\"\nranks = [0]\nsend = \"y\"\npeer = 1\ncatch = true\n\
             [[op]]\nranks = [1]\nrecv = \"y\"\npeer = 0\ncatch = true\n\
             [[fault]]\nranks = [0]\nat = \"{failed}\"\nkind = \"async_error\"\nafter_us = 1000\n"
        );
        let run = on_both(&text, FakeDevice::default());
        let scenario = sim::scenario::parse("pairs.toml", &text).unwrap();
        let pair = (scenario.groups.iter())
            .position(|g| g.point_to_point)
            .unwrap();
        let mut aborted = run.aborted.clone();
        aborted.sort();
        assert_eq!(aborted, [0, pair], "{failed}: the device's aborts");
        let simulated = &run.simulated;
        for (engine, timeline) in [("hw", &run.rank0), ("sim", &simulated.ranks[0])] {
            let raised = timeline.exceptions.len();
            let expected = 2 + usize::from(waited.is_some());
            let exceptions = &timeline.exceptions;
            assert_eq!(raised, expected, "{engine}, {failed}: {exceptions:?}");
        }
        let (hw, sim) = run.outlines();
        let (hw, sim) = (
            error_instants_unmeasured(hw),
            error_instants_unmeasured(sim),
        );
        let case = format!("{failed}, waited on: {waited:?}");
        failures.extend(outlines_differ(&case, &hw, &sim));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// `outline` but for the instants of the async errors a wait raised (`… at 0.326 s;`): the
/// simulator's pair communicator takes its bootstrap before the send's enqueue, the fake
/// device's none.
fn error_instants_unmeasured(outline: Vec<String>) -> Vec<String> {
    let marker = "async error (ncclRemoteError) at ";
    (outline.into_iter())
        .map(|line| {
            let mut parts = line.split(marker);
            let mut unmeasured = parts.next().unwrap_or_default().to_string();
            for part in parts {
                let rest = part.split_once(" s;").map_or(part, |(_, rest)| rest);
                unmeasured += &format!("{marker}… s;{rest}");
            }
            unmeasured
        })
        .collect()
}
