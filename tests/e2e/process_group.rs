//! `init_process_group` and `new_group` as ops of the program (R8): process_group_setup.toml
//! and its variants (eager, split, non-blocking), and the program errors around them.

use crate::util::run_with;
use analysis::metrics::Report;
use sim::timeline::{HostCall, Timeline};

const US: u64 = 1_000;
const MS: u64 = 1_000_000;

fn call(timeline: &Timeline, name: &str, iteration: u32) -> Option<HostCall> {
    let op = timeline.ops.iter().position(|o| o.name == name).unwrap() as u32;
    timeline.ranks[0]
        .host
        .iter()
        .find(|h| h.op == op && h.iteration == iteration)
        .copied()
}

fn took(timeline: &Timeline, name: &str, iteration: u32) -> u64 {
    let host = call(timeline, name, iteration).unwrap();
    host.end_ns - host.start_ns
}

/// process_group_setup.toml with the default profile (init 1.6 ms, new_group 0.45 ms, first
/// communicator 300 ms, later ones 25 ms, a collective call 30 µs): the lazy world's first
/// all_reduce returns after the 300 ms backlog and the bootstrap; sub's first one after 25 ms
/// and no drain; the setup ops run once.
pub fn check_process_group_setup(timeline: &Timeline, _report: &Report) {
    assert_eq!(took(timeline, "init", 0), 1_600 * US);
    let backlog_end_ns = timeline.ranks[0].kernels[0].end_ns;
    let first_world = call(timeline, "first_world", 0).unwrap();
    // The 300 ms bootstrap beside the 300 ms sleep: the later of the two, then the call's 30 µs.
    let ready_ns = (first_world.start_ns + 300 * MS).max(backlog_end_ns);
    assert_eq!(first_world.end_ns, ready_ns + 30 * US);
    assert_eq!(took(timeline, "make_sub", 0), 450 * US);
    assert_eq!(took(timeline, "first_sub", 0), 25 * MS + 30 * US);
    // The second iteration: no setup op, warm communicators.
    assert!(call(timeline, "init", 1).is_none() && call(timeline, "make_sub", 1).is_none());
    assert_eq!(took(timeline, "first_world", 1), 30 * US);
    assert_eq!(took(timeline, "first_sub", 1), 30 * US);
    assert!(timeline.findings.is_empty(), "{:?}", timeline.findings);
}

#[test]
fn the_first_communicator_returns_at_the_later_of_its_bootstrap_and_the_device_drain() {
    for (backlog_us, drain_wins) in [(1_000_000, true), (1, false)] {
        let set = format!("op.backlog.gpu_sleep_us={backlog_us}");
        let timeline = run_with("process_group_setup.toml", &[&set]);
        let first_world = call(&timeline, "first_world", 0).unwrap();
        let backlog_end_ns = timeline.ranks[0].kernels[0].end_ns;
        let expected_ns = if drain_wins {
            backlog_end_ns
        } else {
            first_world.start_ns + 300 * MS
        };
        assert_eq!(first_world.end_ns, expected_ns + 30 * US, "{set}");
    }
}

#[test]
fn eager_init_pays_the_bootstrap_in_init_process_group_and_new_group_splits_from_it() {
    let eager = run_with(
        "process_group_setup.toml",
        &["op.init.device_id=true", "groups.sub.eager_init=true"],
    );
    assert_eq!(took(&eager, "init", 0), 1_600 * US + 300 * MS);
    // The first all_reduce finds its communicator: it does not wait for the backlog.
    assert_eq!(took(&eager, "first_world", 0), 30 * US);
    assert_eq!(took(&eager, "make_sub", 0), 450 * US + 25 * MS);
    assert_eq!(took(&eager, "first_sub", 0), 30 * US);
}

#[test]
fn a_non_blocking_eager_init_returns_at_once_and_is_finished_at_the_first_use() {
    let timeline = run_with(
        "process_group_setup.toml",
        &[
            "op.init.device_id=true",
            "env.TORCH_NCCL_USE_COMM_NONBLOCKING=1",
        ],
    );
    assert_eq!(took(&timeline, "init", 0), 1_600 * US);
    let backlog_end_ns = timeline.ranks[0].kernels[0].end_ns;
    let first_world = call(&timeline, "first_world", 0).unwrap();
    let ready_ns = (first_world.start_ns + 300 * MS).max(backlog_end_ns);
    assert_eq!(first_world.end_ns, ready_ns + 30 * US);
    // A device-bound world makes new_group create `sub`'s communicator at once, as PyTorch did
    // on the H200 (25.9 ms in new_group), though the scenario does not ask for it.
    assert_eq!(took(&timeline, "make_sub", 0), 450 * US + 25 * MS);
    assert_eq!(took(&timeline, "first_sub", 0), 30 * US);
}

/// The shipped scenario's text.
fn shipped() -> String {
    std::fs::read_to_string(crate::util::scenarios_dir().join("process_group_setup.toml")).unwrap()
}

/// The shipped setup on two ranks under `TORCH_NCCL_USE_COMM_NONBLOCKING=1` with
/// `TORCH_NCCL_NONBLOCKING_TIMEOUT = {setting}` and an eager `init_process_group`, where rank
/// `dead` dies before it.
fn nonblocking_with_a_dead_rank(setting: &str, dead: u32) -> String {
    shipped()
        .replace("ranks = 1\n", "ranks = 2\n")
        .replace("ranks = [0]", "ranks = [0, 1]")
        .replace(
            "[tensors]",
            &format!("[env]\nTORCH_NCCL_USE_COMM_NONBLOCKING = 1\nTORCH_NCCL_NONBLOCKING_TIMEOUT = {setting}\n\n[tensors]"),
        )
        .replace("init_process_group = true\n", "init_process_group = true\ndevice_id = true\n")
        + &format!("\n[[fault]]\nranks = [{dead}]\nat = \"backlog\"\nkind = \"die\"\n")
}

/// The parse error of `text`.
fn error_of(text: &str) -> String {
    sim::scenario::parse("p.toml", text)
        .unwrap_err()
        .to_string()
}

#[test]
fn a_lazy_world_cannot_split_an_eager_group_nor_can_a_collective_precede_its_group() {
    let with = |sets: &[&str]| {
        let overrides: Vec<_> = sets
            .iter()
            .map(|s| sim::scenario::Override::parse(s).unwrap())
            .collect();
        error_of(&sim::sweep::apply_overrides_with_ops(&shipped(), &overrides).unwrap())
    };
    let message = with(&["groups.sub.eager_init=true"]);
    assert!(
        message.contains("world's communicator is lazy"),
        "{message}"
    );
    let message = with(&["groups.world.eager_init=true"]);
    assert!(message.contains("device_id = true"), "{message}");
    let text = shipped();
    // A program that creates the world but not `sub`.
    let message = error_of(&text.replace("new_group = \"sub\"", "host_sleep_us = 1"));
    assert!(message.contains("never created"), "{message}");
    // A collective on `sub` before its new_group.
    let message = error_of(&text.replace(
        "[[op]]\nlabel = \"backlog\"",
        "[[op]]\nall_reduce = \"x\"\ngroup = \"sub\"\n\n[[op]]\nlabel = \"backlog\"",
    ));
    assert!(message.contains("before its new_group"), "{message}");
    // And on the world before init_process_group.
    let message = error_of(&text.replace(
        "[[op]]\nlabel = \"init\"",
        "[[op]]\nall_reduce = \"x\"\n\n[[op]]\nlabel = \"init\"",
    ));
    assert!(message.contains("before init_process_group"), "{message}");
    // A second init_process_group.
    let message = error_of(&text.replace(
        "[[op]]\nlabel = \"backlog\"",
        "[[op]]\ninit_process_group = true\n\n[[op]]\nlabel = \"backlog\"",
    ));
    assert!(message.contains("called twice"), "{message}");
}

#[test]
fn a_non_blocking_communicator_whose_peer_never_comes_raises_after_its_own_timeout() {
    // Two ranks; rank 1 dies before init_process_group, so rank 0's first use waits for a
    // communicator that is never finished: it raises after TORCH_NCCL_NONBLOCKING_TIMEOUT,
    // not after the group's (600 s) store timeout.
    let text = nonblocking_with_a_dead_rank("5", 1);
    let timeline = sim::engine::simulate(&sim::scenario::parse("p.toml", &text).unwrap());
    // first_world starts where the backlog's launch returned; it raises there, uncaught, and
    // its call ends at the raise.
    let first_world_start_ns = call(&timeline, "backlog", 0).unwrap().end_ns;
    let end = timeline.ranks[0].end.unwrap();
    assert_eq!(end.status, sim::timeline::ExitStatus::Raised);
    let at_ns = end.at_ns.unwrap();
    let raised = call(&timeline, "first_world", 0).expect("the call that raised");
    assert_eq!(
        (raised.start_ns, raised.end_ns),
        (first_world_start_ns, at_ns)
    );
    // The 5 s of TORCH_NCCL_NONBLOCKING_TIMEOUT from the wait's start, not the group's 600 s.
    assert_eq!(at_ns, first_world_start_ns + 5_000 * MS);
    assert!(
        timeline
            .watchdog
            .iter()
            .any(|r| r.message.contains("TORCH_NCCL_NONBLOCKING_TIMEOUT")),
        "{:?}",
        timeline.watchdog
    );
}

#[test]
fn a_non_blocking_timeout_of_zero_or_less_waits_for_the_communicator_for_good() {
    // PyTorch checks the non-blocking init's timeout only where it is above 0
    // (`nccl_nonblocking_timeout() > 0`): rank 0's first use waits for good, and the run ends
    // with the deadlock finding of a host blocked in the communicator's creation. Any integer
    // of 0 or less: one below i32::MIN was refused, with a message it satisfied.
    for setting in ["0", "-1", "-3000000000", "\"-3000000000\""] {
        let text = nonblocking_with_a_dead_rank(setting, 1);
        let scenario = sim::scenario::parse("p.toml", &text).unwrap();
        assert_eq!(scenario.env.nonblocking_timeout_ns, None, "{setting}");
        let timeline = sim::engine::simulate(&scenario);
        assert!(
            !(timeline.watchdog.iter())
                .any(|r| r.message.contains("TORCH_NCCL_NONBLOCKING_TIMEOUT")),
            "{setting}: {:?}",
            timeline.watchdog
        );
        let kinds: Vec<_> = timeline.findings.iter().map(|f| f.kind).collect();
        assert_eq!(
            kinds,
            [sim::timeline::FindingKind::Deadlock; 2],
            "{setting}"
        );
        assert!(
            timeline.findings[0].message.contains("never forms (R8)"),
            "{:?}",
            timeline.findings
        );
        let end = timeline.ranks[0].end.unwrap();
        assert_eq!(
            (end.status, end.at_ns),
            (sim::timeline::ExitStatus::Running, None),
            "{setting}: rank 0 never ends"
        );
    }
    let text = shipped().replace(
        "[tensors]",
        "[env]\nTORCH_NCCL_NONBLOCKING_TIMEOUT = 100000\n\n[tensors]",
    );
    let message = error_of(&text);
    assert!(
        message.contains("expects an integer of at most 86400 (0 or less: no timeout)"),
        "{message}"
    );
}

#[test]
fn a_non_blocking_rank_whose_root_never_comes_raises_the_store_s_timeout() {
    // Rank 0, the root, dies before init_process_group, so it never publishes the unique id:
    // rank 1's `store.get` of it is bounded by the store's timeout (the group's `timeout_s`,
    // R29) whatever TORCH_NCCL_NONBLOCKING_TIMEOUT says, which bounds only the wait for the
    // communicator once the id came (R8). It raised after 5 s (the non-blocking timeout), or
    // at 0 or less never.
    for setting in ["5", "0", "-1"] {
        let text = nonblocking_with_a_dead_rank(setting, 0);
        let scenario = sim::scenario::parse("p.toml", &text).unwrap();
        let timeline = sim::engine::simulate(&scenario);
        let backlog = timeline
            .ops
            .iter()
            .position(|o| o.name == "backlog")
            .unwrap() as u32;
        let first_world_start_ns = (timeline.ranks[1].host.iter())
            .find(|h| h.op == backlog)
            .unwrap()
            .end_ns;
        let end = timeline.ranks[1].end.unwrap();
        assert_eq!(
            (end.status, end.at_ns),
            (
                sim::timeline::ExitStatus::Raised,
                Some(first_world_start_ns + scenario.groups[0].timeout_ns)
            ),
            "{setting}"
        );
        let raised: Vec<_> = (timeline.findings.iter())
            .filter(|f| f.kind == sim::timeline::FindingKind::StoreTimeout)
            .collect();
        assert_eq!(raised.len(), 1, "{setting}: {:?}", timeline.findings);
        assert!(
            raised[0].message.contains("retrieving ncclUniqueId"),
            "{setting}: {}",
            raised[0].message
        );
    }
}

#[test]
fn a_non_blocking_rank_waits_for_the_communicator_from_the_root_s_unique_id() {
    // Three ranks: rank 0, the root, reaches the first use 2 s after rank 1; rank 2 dies
    // before it. Rank 1's `store.get` returns when the root publishes the id, and its wait for
    // the communicator, 5 s of TORCH_NCCL_NONBLOCKING_TIMEOUT, starts there: it raises with the
    // root, 7 s after its own arrival, with the non-blocking init's error.
    let text = shipped()
        .replace("ranks = 1\n", "ranks = 3\n")
        .replace("ranks = [0]", "ranks = [0, 1, 2]")
        .replace(
            "[tensors]",
            "[env]\nTORCH_NCCL_USE_COMM_NONBLOCKING = 1\nTORCH_NCCL_NONBLOCKING_TIMEOUT = 5\n\n[tensors]",
        )
        .replace("init_process_group = true\n", "init_process_group = true\ndevice_id = true\n")
        + "\n[[fault]]\nranks = [2]\nat = \"backlog\"\nkind = \"die\"\n"
        + "\n[[perturb]]\nranks = [0]\nbefore = \"first_world\"\nhost_delay_us = 2_000_000\n";
    let timeline = sim::engine::simulate(&sim::scenario::parse("p.toml", &text).unwrap());
    let first_world = timeline
        .ops
        .iter()
        .position(|o| o.name == "first_world")
        .unwrap() as u32;
    let arrival_ns = |rank: usize| {
        (timeline.ranks[rank].host.iter())
            .find(|h| h.op == first_world)
            .unwrap()
            .start_ns
    };
    let ends: Vec<_> = (0..2)
        .map(|rank| timeline.ranks[rank].end.unwrap())
        .collect();
    assert_eq!(
        (ends[0].status, ends[1].status),
        (
            sim::timeline::ExitStatus::Raised,
            sim::timeline::ExitStatus::Raised
        ),
        "{:?}",
        timeline.findings
    );
    assert_eq!(ends[0].at_ns, Some(arrival_ns(0) + 5_000 * MS));
    assert_eq!(ends[1].at_ns, ends[0].at_ns);
    assert!(arrival_ns(1) + 5_000 * MS < ends[1].at_ns.unwrap());
    let raised: Vec<_> = (timeline.findings.iter())
        .filter(|f| f.kind == sim::timeline::FindingKind::StoreTimeout)
        .collect();
    assert_eq!(raised.len(), 2, "{:?}", timeline.findings);
    assert!(raised
        .iter()
        .all(|f| f.message.contains("TORCH_NCCL_NONBLOCKING_TIMEOUT")));
}
