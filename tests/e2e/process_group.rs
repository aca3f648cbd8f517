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
    // NCCL's creation runs from the unique id, at the end of init_process_group, beside the
    // program; the first use waits for it, then for the device (the process's first).
    let ready_ns = (1_600 * US + 300 * MS).max(backlog_end_ns);
    assert_eq!(first_world.end_ns, ready_ns + 30 * US);
    // A device-bound world makes new_group create `sub`'s communicator at once, as PyTorch did
    // on the H200 (25.9 ms in new_group), though the scenario does not ask for it.
    assert_eq!(took(&timeline, "make_sub", 0), 450 * US + 25 * MS);
    assert_eq!(took(&timeline, "first_sub", 0), 30 * US);
}

#[test]
fn a_new_group_before_the_non_blocking_worlds_first_use_is_a_later_communicator() {
    // The world's communicator, begun in the non-blocking eager init_process_group, is the
    // process's first: `sub`'s, split from it in new_group before the world's first use, costs
    // a later one's 25 ms and waits for no drain; the world's first use waits for the creation
    // and then for the device, the 300 ms backlog (R8). Both were `sub`'s before.
    let text = "[cluster]\nranks = 2\n[groups.sub]\nranks = [0, 1]\n\
        [env]\nTORCH_NCCL_USE_COMM_NONBLOCKING = 1\n[tensors]\nx = \"1MiB\"\n\
        [[op]]\nlabel = \"init\"\ninit_process_group = true\ndevice_id = true\n\
        [[op]]\nlabel = \"backlog\"\ngpu_sleep_us = 300_000\n\
        [[op]]\nlabel = \"make_sub\"\nnew_group = \"sub\"\n\
        [[op]]\nlabel = \"first_sub\"\nall_reduce = \"x\"\ngroup = \"sub\"\n\
        [[op]]\nlabel = \"first_world\"\nall_reduce = \"x\"\n";
    let timeline = folded_and_unfolded(text);
    let took_on_0 = |name| {
        let host = call_of(&timeline, 0, name);
        host.end_ns - host.start_ns
    };
    assert_eq!(took_on_0("make_sub"), 450 * US + 25 * MS);
    let backlog_end_ns = timeline.ranks[0].kernels[0].end_ns;
    assert!(backlog_end_ns > 300 * MS, "{backlog_end_ns}");
    // The drain waits for the backlog and for `sub`'s all_reduce queued behind it (R10).
    let sub_end_ns = timeline.ranks[0].collectives[0].end_ns;
    assert!(sub_end_ns > backlog_end_ns, "{sub_end_ns} {backlog_end_ns}");
    assert_eq!(
        call_of(&timeline, 0, "first_world").end_ns,
        sub_end_ns + 30 * US
    );
}

/// The shipped scenario's text.
fn shipped() -> String {
    std::fs::read_to_string(crate::util::scenarios_dir().join("process_group_setup.toml")).unwrap()
}

/// The shipped setup on `ranks` ranks under `TORCH_NCCL_USE_COMM_NONBLOCKING=1` with
/// `TORCH_NCCL_NONBLOCKING_TIMEOUT = {setting}` and an eager `init_process_group`.
fn nonblocking(ranks: u32, setting: &str) -> String {
    let members: Vec<String> = (0..ranks).map(|rank| rank.to_string()).collect();
    shipped()
        .replace("ranks = 1\n", &format!("ranks = {ranks}\n"))
        .replace("ranks = [0]", &format!("ranks = [{}]", members.join(", ")))
        .replace(
            "[tensors]",
            &format!("[env]\nTORCH_NCCL_USE_COMM_NONBLOCKING = 1\nTORCH_NCCL_NONBLOCKING_TIMEOUT = {setting}\n\n[tensors]"),
        )
        .replace("init_process_group = true\n", "init_process_group = true\ndevice_id = true\n")
}

/// [`nonblocking`] on two ranks, where rank `dead` dies at the op labelled `at`.
fn nonblocking_with_a_dead_rank(setting: &str, dead: u32, at: &str) -> String {
    nonblocking(2, setting)
        + &format!("\n[[fault]]\nranks = [{dead}]\nat = \"{at}\"\nkind = \"die\"\n")
}

/// The host call of the op labelled `name` on `rank`, in the first iteration.
fn call_of(timeline: &Timeline, rank: usize, name: &str) -> HostCall {
    let op = timeline.ops.iter().position(|o| o.name == name).unwrap() as u32;
    *(timeline.ranks[rank].host.iter())
        .find(|h| h.op == op && h.iteration == 0)
        .unwrap()
}

/// `text` simulated folded and with `--no-fold`, expanded; the two must agree.
fn folded_and_unfolded(text: &str) -> Timeline {
    let scenario = sim::scenario::parse("p.toml", text).unwrap();
    let run = |fold| {
        let options = sim::engine::Options {
            fold,
            ..Default::default()
        };
        sim::engine::simulate_with(&scenario, options).0.expand()
    };
    let (folded, unfolded) = (run(true), run(false));
    assert_eq!(folded.findings, unfolded.findings);
    for (a, b) in folded.ranks.iter().zip(&unfolded.ranks) {
        assert_eq!((&a.host, a.end), (&b.host, b.end), "rank {}", a.rank);
    }
    folded
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
    let text = nonblocking_with_a_dead_rank("5", 1, "backlog");
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
        let text = nonblocking_with_a_dead_rank(setting, 1, "backlog");
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
fn a_non_blocking_rank_whose_root_never_comes_raises_the_store_s_timeout_in_init_process_group() {
    // Rank 0, the root, dies before init_process_group, so it never publishes the unique id.
    // The eager init gets the id inside init_process_group (`eagerConnectSingleDevice` →
    // `initNCCLComm` → `broadcastUniqueNCCLID` before the non-blocking `ncclCommInitRankConfig`),
    // so rank 1's `store.get` raises there, after the store's timeout (the group's `timeout_s`,
    // R29), whatever TORCH_NCCL_NONBLOCKING_TIMEOUT says, which bounds only the wait for the
    // communicator at its first use (R8). It raised in the first all_reduce before.
    for setting in ["5", "0", "-1"] {
        let text = nonblocking_with_a_dead_rank(setting, 0, "init");
        let scenario = sim::scenario::parse("p.toml", &text).unwrap();
        let timeline = folded_and_unfolded(&text);
        let init = call_of(&timeline, 1, "init");
        let raised_ns = init.start_ns + 1_600 * US + scenario.groups[0].timeout_ns;
        assert_eq!(init.end_ns, raised_ns, "{setting}");
        let end = timeline.ranks[1].end.unwrap();
        assert_eq!(
            (end.status, end.at_ns),
            (sim::timeline::ExitStatus::Raised, Some(raised_ns)),
            "{setting}"
        );
        let raised: Vec<_> = (timeline.findings.iter())
            .filter(|f| f.kind == sim::timeline::FindingKind::StoreTimeout)
            .collect();
        assert_eq!(raised.len(), 1, "{setting}: {:?}", timeline.findings);
        assert_eq!(raised[0].op, Some(init.op), "{setting}");
        assert!(
            raised[0].message.contains("retrieving ncclUniqueId"),
            "{setting}: {}",
            raised[0].message
        );
    }
}

#[test]
fn a_non_blocking_eager_init_waits_in_init_process_group_for_the_root_s_unique_id() {
    // Four ranks (ranks 1-3 fold into one class); the root reaches init_process_group 2 s
    // late. The others' `store.get` of the unique id is inside init_process_group, which
    // returns when the root published it (at the end of its own 1.6 ms call), not at the first
    // all_reduce; a member's first use then finds the id and waits only for the communicator.
    let text = nonblocking(4, "5")
        + "\n[[perturb]]\nranks = [0]\nbefore = \"init\"\nhost_delay_us = 2_000_000\n";
    let timeline = folded_and_unfolded(&text);
    assert!(timeline.findings.is_empty(), "{:?}", timeline.findings);
    let root_init = call_of(&timeline, 0, "init");
    assert_eq!(root_init.end_ns - root_init.start_ns, 1_600 * US);
    for rank in 1..4 {
        let init = call_of(&timeline, rank, "init");
        assert_eq!(init.end_ns, root_init.end_ns, "rank {rank}");
        assert!(init.end_ns - init.start_ns >= 2_000 * MS, "rank {rank}");
        // The program's next op runs after the wait, not before it.
        assert!(call_of(&timeline, rank, "backlog").start_ns >= root_init.end_ns);
    }
}

#[test]
fn a_non_blocking_rank_waits_for_the_communicator_from_its_first_use() {
    // Three ranks: rank 0, the root, reaches the first use 2 s after rank 1; rank 2 dies
    // before it. Every rank got the unique id inside init_process_group, so the first use
    // waits only for the communicator, and NCCLUtils' wait counts
    // TORCH_NCCL_NONBLOCKING_TIMEOUT (5 s) from its own start: each rank raises 5 s after its
    // own arrival, with the non-blocking init's error (rank 1 raised with the root before,
    // 5 s after the root's arrival, as if its `store.get` were there).
    let text = nonblocking(3, "5")
        + "\n[[fault]]\nranks = [2]\nat = \"backlog\"\nkind = \"die\"\n"
        + "\n[[perturb]]\nranks = [0]\nbefore = \"first_world\"\nhost_delay_us = 2_000_000\n";
    let timeline = sim::engine::simulate(&sim::scenario::parse("p.toml", &text).unwrap());
    let arrival_ns = |rank: usize| call_of(&timeline, rank, "first_world").start_ns;
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
    assert!(arrival_ns(1) + 2_000 * MS <= arrival_ns(0));
    assert_eq!(ends[0].at_ns, Some(arrival_ns(0) + 5_000 * MS));
    assert_eq!(ends[1].at_ns, Some(arrival_ns(1) + 5_000 * MS));
    let raised: Vec<_> = (timeline.findings.iter())
        .filter(|f| f.kind == sim::timeline::FindingKind::StoreTimeout)
        .collect();
    assert_eq!(raised.len(), 2, "{:?}", timeline.findings);
    assert!(raised
        .iter()
        .all(|f| f.message.contains("TORCH_NCCL_NONBLOCKING_TIMEOUT")));
}

#[test]
fn a_caught_non_blocking_timeout_leaves_the_creation_running_for_the_next_collective() {
    // Rank 1 reaches init_process_group 1.5 s late, past rank 0's 1 s of
    // TORCH_NCCL_NONBLOCKING_TIMEOUT in its first all_reduce, which raises, caught. ProcessGroupNCCL
    // keeps the communicator init_process_group began, so rank 0's next all_reduce waits for that
    // same creation again (1.5 s + 1.6 ms + 300 ms) and runs with rank 1's first.
    let text = nonblocking(2, "1")
        .replace("label = \"first_world\"\n", "label = \"first_world\"\ncatch = true\n")
        .replace(
            "[[op]]\nlabel = \"make_sub\"",
            "[[op]]\nlabel = \"retry\"\nranks = [0]\nall_reduce = \"x\"\n\n[[op]]\nlabel = \"make_sub\"",
        )
        .replace("repeat = 2", "repeat = 1")
        + "\n[[perturb]]\nranks = [1]\nbefore = \"init\"\nhost_delay_us = 1_500_000\n";
    let timeline = folded_and_unfolded(&text);
    let kinds: Vec<_> = timeline.findings.iter().map(|f| f.kind).collect();
    assert_eq!(
        kinds,
        [sim::timeline::FindingKind::StoreTimeout],
        "{:?}",
        timeline.findings
    );
    let raised = call_of(&timeline, 0, "first_world");
    assert_eq!(raised.end_ns, raised.start_ns + 1_000 * MS);
    assert_eq!(timeline.ranks[0].exceptions.len(), 1);
    let created_ns = call_of(&timeline, 1, "init").end_ns + 300 * MS;
    assert_eq!(
        call_of(&timeline, 1, "init").end_ns,
        1_500 * MS + 1_600 * US
    );
    let retry = call_of(&timeline, 0, "retry");
    assert_eq!(retry.start_ns, raised.end_ns);
    assert!(retry.end_ns >= created_ns, "{retry:?}");
    assert!(retry.end_ns < created_ns + MS, "{retry:?}");
    for rank in 0..2 {
        let end = timeline.ranks[rank].end.unwrap();
        assert_eq!(end.status, sim::timeline::ExitStatus::Clean, "rank {rank}");
    }
}

/// The shipped setup on four ranks with a blocking eager `init_process_group(device_id=…)`.
fn blocking_eager(ranks: u32) -> String {
    nonblocking(ranks, "5").replace(
        "TORCH_NCCL_USE_COMM_NONBLOCKING = 1",
        "TORCH_NCCL_USE_COMM_NONBLOCKING = 0",
    )
}

#[test]
fn a_blocking_eager_init_waits_in_init_process_group_for_a_late_root() {
    // `eagerConnectSingleDevice` creates the world's communicator inside init_process_group,
    // the store exchange of the unique id included (R8, R29): ranks 1-3 wait there for the
    // root, 2 s late, and the creation ends for all at the root's arrival plus the bootstrap;
    // the first all_reduce then creates nothing. The root dead before the call: their
    // `store.get` raises in init_process_group after the group's timeout.
    let late = blocking_eager(4)
        + "\n[[perturb]]\nranks = [0]\nbefore = \"init\"\nhost_delay_us = 2_000_000\n";
    let timeline = folded_and_unfolded(&late);
    assert!(timeline.findings.is_empty(), "{:?}", timeline.findings);
    let root_init = call_of(&timeline, 0, "init");
    let created_ns = root_init.start_ns + 1_600 * US + 300 * MS;
    for rank in 0..4 {
        assert_eq!(
            call_of(&timeline, rank, "init").end_ns,
            created_ns,
            "rank {rank}"
        );
        let first_world = call_of(&timeline, rank, "first_world");
        assert!(
            first_world.end_ns - first_world.start_ns < 300 * MS,
            "rank {rank}"
        );
    }
    let dead_root = blocking_eager(4) + "\n[[fault]]\nranks = [0]\nat = \"init\"\nkind = \"die\"\n";
    let scenario = sim::scenario::parse("p.toml", &dead_root).unwrap();
    let timeline = folded_and_unfolded(&dead_root);
    for rank in 1..4 {
        let init = call_of(&timeline, rank, "init");
        let raised_ns = init.start_ns + 1_600 * US + scenario.groups[0].timeout_ns;
        assert_eq!(init.end_ns, raised_ns, "rank {rank}");
        assert_eq!(
            timeline.ranks[rank].end.unwrap().at_ns,
            Some(raised_ns),
            "rank {rank}"
        );
    }
    assert!(timeline
        .findings
        .iter()
        .any(|f| f.kind == sim::timeline::FindingKind::StoreTimeout
            && f.op == Some(call_of(&timeline, 1, "init").op)));
}

/// Two ranks under a non-blocking eager init whose creation takes 2 s (`host.comm_init_us`),
/// TORCH_NCCL_NONBLOCKING_TIMEOUT 1 s, rank 1 reaching init_process_group 300 ms late: rank 0's
/// first all_reduce (`catch = true`) waits for the creation from 1.6 ms on. `extra` adds ops
/// and faults; rank 0 then queues 10 s of GPU work and waits for its device.
fn slow_nonblocking_creation(extra: &str) -> String {
    nonblocking(2, "1")
        .replace("label = \"first_world\"\n", "label = \"first_world\"\ncatch = true\n")
        .replace(
            "[[op]]\nlabel = \"make_sub\"",
            "[[op]]\nlabel = \"long\"\nranks = [0]\ngpu_sleep_us = 10_000_000\n\n[[op]]\nlabel = \"sync0\"\nranks = [0]\ndevice_sync = true\n\n[[op]]\nlabel = \"make_sub\"",
        )
        .replace("repeat = 2", "repeat = 1")
        + "\n[host]\ncomm_init_us = 2_000_000\n"
        + "\n[[perturb]]\nranks = [1]\nbefore = \"init\"\nhost_delay_us = 300_000\n"
        + extra
}

#[test]
fn a_rank_that_left_a_creation_undone_by_a_death_is_not_resumed_at_its_end() {
    // Rank 1 dies 200 ms after its init_process_group, with every member's part started but
    // the creation not done (it would end at 2.3 s): the creation never ends (R8). Rank 0's
    // first use raises after its 1 s, caught, and rank 0 goes on to wait for its device; the
    // resume the creation's end had scheduled for it is void (it resumed rank 0 in its device
    // wait, and the engine panicked when the GPU work ended).
    let text = slow_nonblocking_creation(
        "\n[[fault]]\nranks = [1]\nat = \"boom\"\nkind = \"die\"\n",
    )
    .replace(
        "[[op]]\nlabel = \"first_world\"",
        "[[op]]\nlabel = \"nap\"\nranks = [1]\nhost_sleep_us = 200_000\n\n[[op]]\nlabel = \"boom\"\nranks = [1]\nhost_sleep_us = 1\n\n[[op]]\nlabel = \"first_world\"",
    );
    let timeline = folded_and_unfolded(&text);
    let raised = call_of(&timeline, 0, "first_world");
    assert_eq!(raised.end_ns, raised.start_ns + 1_000 * MS);
    let sync = call_of(&timeline, 0, "sync0");
    assert!(sync.end_ns >= raised.end_ns + 10_000 * MS, "{sync:?}");
}

#[test]
fn a_non_blocking_first_use_raises_when_the_creation_ends_after_its_timeout() {
    // Every member has its part running by 301.6 ms, but the creation takes 2 s: it ends at
    // 2.3 s. Both first uses wait for that end, TORCH_NCCL_NONBLOCKING_TIMEOUT (1 s) from their
    // own start, and raise there, caught (R8): NCCLUtils' wait gives up on a communicator that
    // is still in progress, whether or not every member started its part (they went on at the
    // end, past their timeouts).
    let timeline = folded_and_unfolded(&slow_nonblocking_creation(""));
    for rank in 0..2 {
        let raised = call_of(&timeline, rank, "first_world");
        assert_eq!(raised.end_ns, raised.start_ns + 1_000 * MS, "rank {rank}");
        assert_eq!(timeline.ranks[rank].exceptions.len(), 1, "rank {rank}");
    }
    let raised: Vec<_> = (timeline.findings.iter())
        .filter(|f| f.kind == sim::timeline::FindingKind::StoreTimeout)
        .map(|f| f.rank)
        .collect();
    assert_eq!(raised, [Some(0), Some(1)], "{:?}", timeline.findings);
    // Rank 0 went on from its raise, to 10 s of GPU work.
    let sync = call_of(&timeline, 0, "sync0");
    assert!(sync.end_ns >= 1_001 * MS + 10_000 * MS, "{sync:?}");
    assert!(sync.end_ns < 1_002 * MS + 10_000 * MS, "{sync:?}");
}

#[test]
fn a_first_use_after_every_member_started_still_waits_for_the_creation_s_end() {
    // Three ranks, a 2 s creation, TORCH_NCCL_NONBLOCKING_TIMEOUT 5 s: rank 1 dies 200 ms after
    // its init_process_group, before the creation's end, which never comes (R8). Ranks 0 and 2
    // run the same program; each first use waits and raises after its 5 s, whichever of them
    // the engine got to after every member had its part started (that one went on at the end,
    // with a communicator that never formed: folded and unfolded runs differed).
    let text = nonblocking(3, "5")
        .replace(
            "[[op]]\nlabel = \"first_world\"",
            "[[op]]\nlabel = \"nap\"\nranks = [1]\nhost_sleep_us = 200_000\n\n[[op]]\nlabel = \"boom\"\nranks = [1]\nhost_sleep_us = 1\n\n[[op]]\nlabel = \"first_world\"",
        )
        .replace("repeat = 2", "repeat = 1")
        + "\n[host]\ncomm_init_us = 2_000_000\n"
        + "\n[[fault]]\nranks = [1]\nat = \"boom\"\nkind = \"die\"\n";
    let timeline = folded_and_unfolded(&text);
    for rank in [0, 2] {
        let raised = call_of(&timeline, rank, "first_world");
        let end = timeline.ranks[rank].end.unwrap();
        assert_eq!(end.status, sim::timeline::ExitStatus::Raised, "rank {rank}");
        assert_eq!(end.at_ns, Some(raised.start_ns + 5_000 * MS), "rank {rank}");
    }
}

#[test]
fn a_retry_that_waits_for_the_same_creation_is_resumed_once_at_its_end() {
    // Two ranks, a 1.5 s creation, TORCH_NCCL_NONBLOCKING_TIMEOUT 1 s: each first all_reduce
    // raises at 1 s, caught; the retry waits for the same creation (R8), which ends within
    // its timeout, and goes on at 1.5 s; then 10 s of GPU work and a device sync. The end's
    // resume that the raise left behind was due at the same time as the retry's: it resumed
    // the host a second time, in its device sync (engine panic).
    let text = nonblocking(2, "1")
        .replace("label = \"first_world\"\n", "label = \"first_world\"\ncatch = true\n")
        .replace(
            "[[op]]\nlabel = \"make_sub\"",
            "[[op]]\nlabel = \"retry\"\nall_reduce = \"x\"\n\n[[op]]\nlabel = \"long\"\ngpu_sleep_us = 10_000_000\n\n[[op]]\nlabel = \"sync\"\ndevice_sync = true\n\n[[op]]\nlabel = \"make_sub\"",
        )
        .replace("repeat = 2", "repeat = 1")
        + "\n[host]\ncomm_init_us = 1_500_000\n";
    let timeline = folded_and_unfolded(&text);
    for rank in 0..2 {
        let raised = call_of(&timeline, rank, "first_world");
        assert_eq!(raised.end_ns, raised.start_ns + 1_000 * MS, "rank {rank}");
        let retry = call_of(&timeline, rank, "retry");
        assert_eq!(retry.start_ns, raised.end_ns, "rank {rank}");
        assert!(retry.end_ns >= 1_501 * MS, "rank {rank}: {retry:?}");
        let sync = call_of(&timeline, rank, "sync");
        assert!(
            sync.end_ns >= retry.end_ns + 10_000 * MS,
            "rank {rank}: {sync:?}"
        );
        let end = timeline.ranks[rank].end.unwrap();
        assert_eq!(end.status, sim::timeline::ExitStatus::Clean, "rank {rank}");
    }
}

#[test]
fn a_member_s_death_does_not_hold_a_rank_that_got_the_unique_id_in_init_process_group() {
    // Three ranks of a non-blocking eager init; the root reaches init_process_group 3 s late,
    // ranks 1 and 2 wait there for its unique id (R29), and rank 1 dies at its next op, at the
    // very time the id came. Rank 2 has the id: its init_process_group returns then (the
    // creation runs on beside the program), and its first use waits for the creation that
    // rank 1's death undid, raising after TORCH_NCCL_NONBLOCKING_TIMEOUT (5 s). Its return from
    // init_process_group was taken for the end of the creation and dropped where the engine
    // got to rank 1's death first: rank 2 stayed in init_process_group for good.
    let text = nonblocking(3, "5").replace("repeat = 2", "repeat = 1")
        + "\n[[perturb]]\nranks = [0]\nbefore = \"init\"\nhost_delay_us = 3_000_000\n"
        + "\n[[fault]]\nranks = [1]\nat = \"backlog\"\nkind = \"die\"\n";
    let timeline = folded_and_unfolded(&text);
    let published_ns = call_of(&timeline, 0, "init").end_ns;
    assert_eq!(call_of(&timeline, 2, "init").end_ns, published_ns);
    let first_use = call_of(&timeline, 2, "first_world");
    let end = timeline.ranks[2].end.unwrap();
    assert_eq!(end.status, sim::timeline::ExitStatus::Raised);
    assert_eq!(end.at_ns, Some(first_use.start_ns + 5_000 * MS));
}
