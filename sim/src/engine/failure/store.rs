//! The store rendezvous (R29): a rank waiting for the NCCL unique id of a lazily created
//! communicator (R8) raises when the group's timeout passes before the root published it.

use super::{ms, wake, Command, Failure, FindingAbout, RunView, Wake};
use crate::ranks::RankSet;
use crate::scenario::{Group, GroupId};
use crate::timeline::{FindingKind, ThreadKind, WatchdogEvent, GROUP_RANKS_END};

impl Failure<'_> {
    /// A rank blocked in `store.get` at `host_ns`: unless it is the root or the root already
    /// published the id, it raises after the group's timeout.
    pub(super) fn store_wait(
        &mut self,
        rank: u32,
        group: GroupId,
        host_ns: u64,
        root_published: bool,
        timeout_ns: u64,
        out: &mut Vec<Command>,
    ) {
        let group_spec = &self.scenario.groups[group];
        if self.rank_id(rank) == group_spec.ranks[0] || root_published {
            return;
        }
        let at_ns = host_ns + timeout_ns;
        wake(out, rank, group, Wake::StoreTimeout, at_ns);
    }

    /// `store.get` timed out: TCPStore's `DistStoreError`, which ProcessGroupNCCL wraps into a
    /// `DistBackendError` in the main thread (or the non-blocking init's own `DistBackendError`):
    /// a `store_timeout` finding, caught or not. Caught (`catch = true` on the op whose call
    /// creates the communicator), the program goes on at its next op without the communicator;
    /// uncaught, the exception ends the process.
    pub(super) fn store_timed_out(
        &mut self,
        view: &impl RunView,
        rank: u32,
        group: GroupId,
        now_ns: u64,
        out: &mut Vec<Command>,
    ) {
        let rank_id = self.rank_id(rank);
        let group_spec = &self.scenario.groups[group];
        let op = view.host_op(rank);
        let nonblocking = self.nonblocking_waits.remove(&(rank, group)).is_some();
        let message = if nonblocking {
            // NCCLUtils' wait for the communicator's readiness: its file and line are PyTorch's.
            format!(
                "[Rank {rank_id}] DistBackendError: NCCL timeout in: … (c10dsim: the non-blocking NCCL communicator of group {} was not ready after {} ms, TORCH_NCCL_NONBLOCKING_TIMEOUT: its other ranks never finished the init; R8)",
                group_spec.name,
                ms(self.scenario.env.nonblocking_timeout_ns.unwrap_or_default())
            )
        } else {
            unique_id_timeout(
                rank_id,
                &group_ranks(group_spec, &RankSet::range(rank_id, rank_id)),
                group_spec,
                self.store_key(rank, group),
                group_spec.timeout_ns,
            )
        };
        // The record and the finding stand for the rank's whole class: PyTorch's words carry
        // each member's own group rank, so theirs name the class's. Only the rank that reports
        // for its class keeps them (an unfolded run's others would each list the whole class:
        // quadratic in the ranks where every rank times out).
        let class = self.classes.class_members(rank);
        let for_class = if nonblocking || class.count() <= 1 || !self.classes.reports(rank) {
            message.clone()
        } else {
            unique_id_timeout(
                rank_id,
                &group_ranks(group_spec, class),
                group_spec,
                self.store_key(rank, group),
                group_spec.timeout_ns,
            )
        };
        self.note(
            rank,
            Some(group),
            (ThreadKind::Main, WatchdogEvent::StoreTimeout),
            now_ns,
            for_class.clone(),
        );
        out.push(Command::Finding {
            kind: FindingKind::StoreTimeout,
            rank,
            about: FindingAbout::Call(op),
            message: for_class.clone(),
        });
        if !self.scenario.ops[op].catch {
            self.exit_uncaught(rank, group, now_ns, out);
            return;
        }
        if !nonblocking {
            // The next try takes the process group's next key (`ncclCommCounter_`).
            *self.store_attempts.entry((rank, group)).or_default() += 1;
        }
        // A folded run's rank is its whole class: its exception names the class's group ranks,
        // which `Timeline::expand` gives each member its own of.
        let caught = if self.classes.folded() {
            &for_class
        } else {
            &message
        };
        out.push(Command::caught_backend_error(rank, op, caught, now_ns));
    }

    /// The key `store.get` waits on: a pair's `<low>:<high>`, else how many communicators
    /// of the group this process began to create before (ProcessGroupNCCL's
    /// `ncclCommCounter_`: a caught raise's try counts).
    fn store_key(&self, rank: u32, group: GroupId) -> String {
        let group_spec = &self.scenario.groups[group];
        if group_spec.point_to_point {
            return format!("{}:{}", group_spec.ranks[0], group_spec.ranks[1]);
        }
        let tries = self.store_attempts.get(&(rank, group)).copied();
        tries.unwrap_or_default().to_string()
    }
}

/// PyTorch's words for a `store.get` of the unique id that timed out (R29):
/// `broadcastUniqueNCCLID`'s `DistBackendError` around TCPStore's `DistStoreError`, then
/// c10dsim's explanation. `[r]` is the rank in the process group (a pair's process group is
/// the world), `group_ranks` as [`group_ranks`] writes them (several for a record made once
/// for a class of ranks: `[1-3]`), `from [0]` fixed text; PyTorch's `keys:` carries the
/// prefixes of its `PrefixStore`s (`/default_pg/0//cuda//0` for the world's first
/// communicator), shown as `…`.
fn unique_id_timeout(
    rank_id: u32,
    group_ranks: &str,
    group: &Group,
    key: String,
    timeout_ns: u64,
) -> String {
    let root = group.ranks[0];
    format!(
        "[Rank {rank_id}] DistBackendError: [{group_ranks}{GROUP_RANKS_END} and retrieving ncclUniqueId from [0] via c10d key-value store by key '{key}', but store->get('{key}') got error: wait timeout after {}ms, keys: …/{key}. This may indicate a possible application crash on rank 0 or a network set up issue. (c10dsim: rank {root} never published the NCCL unique id of group {} within the group's timeout; R29)",
        ms(timeout_ns),
        group.name
    )
}

/// The ranks in the process group of `ranks` (global ranks of `group`), as ranges (`1-3`):
/// a pair's process group is the world, so there they are the global ranks.
fn group_ranks(group: &Group, ranks: &RankSet) -> String {
    if group.point_to_point {
        return ranks.to_string();
    }
    let in_group = ranks
        .iter()
        .map(|rank| group.ranks.binary_search(&rank).unwrap_or_default() as u32);
    RankSet::from_ranks(in_group).to_string()
}

#[cfg(test)]
mod tests {
    use super::super::fake::{finding, per_rank, split, two_ranks, wake, woken, FakeRun};
    use super::super::FindingAbout;
    use super::super::{Command, Failure, Notice, Wake};
    use crate::timeline::{ExitStatus, FindingKind};

    fn store_wait(rank: u32, root_published: bool) -> Notice {
        Notice::StoreWait {
            rank,
            group: 0,
            host_ns: 30_000,
            root_published,
            nonblocking_timeout_ns: None,
            nonblocking: false,
        }
    }

    #[test]
    fn a_rank_waiting_for_the_unique_id_raises_after_the_group_timeout_r29() {
        let scenario = two_ranks("", "");
        let mut failure = Failure::new(&scenario, per_rank(&scenario));
        let mut run = FakeRun::default();
        let mut out = Vec::new();
        // The root never waits, nor a rank that finds the id published.
        failure.notify(&run, store_wait(0, false), &mut out);
        failure.notify(&run, store_wait(1, true), &mut out);
        assert_eq!(out, []);
        failure.notify(&run, store_wait(1, false), &mut out);
        assert_eq!(out, [wake(1, Wake::StoreTimeout, 1_000_030_000)]);
        // Stale once the rank no longer waits (the root published in time).
        assert_eq!(
            woken(&mut failure, &run, 1, Wake::StoreTimeout, 1_000_030_000),
            []
        );
        run.waiting_for_unique_id.push(1);
        let (commands, messages) = split(woken(
            &mut failure,
            &run,
            1,
            Wake::StoreTimeout,
            1_000_030_000,
        ));
        assert_eq!(
            commands,
            [
                finding(FindingKind::StoreTimeout, 1, FindingAbout::Call(0)),
                Command::KillProcess {
                    rank: 1,
                    status: ExitStatus::Raised,
                    at_ns: 1_000_030_000,
                },
            ]
        );
        // PyTorch's words: ProcessGroupNCCL's DistBackendError around TCPStore's error.
        assert!(
            messages[0].contains("DistBackendError: [1] is setting up NCCL communicator and retrieving ncclUniqueId from [0] via c10d key-value store by key '0', but store->get('0') got error: wait timeout after 1000ms"),
            "{}",
            messages[0]
        );
        assert!(messages[0].ends_with("(c10dsim: rank 0 never published the NCCL unique id of group world within the group's timeout; R29)"));
    }

    #[test]
    fn a_caught_store_timeout_is_a_finding_and_the_program_goes_on_r29() {
        let mut scenario = two_ranks("", "");
        scenario.ops[0].catch = true;
        let mut failure = Failure::new(&scenario, per_rank(&scenario));
        let mut run = FakeRun::default();
        let mut out = Vec::new();
        failure.notify(&run, store_wait(1, false), &mut out);
        run.waiting_for_unique_id.push(1);
        let (commands, messages) = split(woken(
            &mut failure,
            &run,
            1,
            Wake::StoreTimeout,
            1_000_030_000,
        ));
        assert_eq!(commands.len(), 2, "{commands:?}");
        assert_eq!(
            commands[0],
            finding(FindingKind::StoreTimeout, 1, FindingAbout::Call(0))
        );
        assert!(matches!(
            commands[1],
            Command::Caught {
                rank: 1,
                op: 0,
                exception: "DistBackendError",
                at_ns: 1_000_030_000,
                ..
            }
        ));
        // The next try waits on the process group's next key.
        assert!(messages[0].contains("store->get('0')"), "{}", messages[0]);
        let (_, messages) = split(woken(
            &mut failure,
            &run,
            1,
            Wake::StoreTimeout,
            2_000_030_000,
        ));
        assert!(messages[0].contains("store->get('1')"), "{}", messages[0]);
    }
}
