//! The store rendezvous (R29): a rank waiting for the NCCL unique id of a lazily created
//! communicator (R8) raises when the group's timeout passes before the root published it.

use super::{ms, wake, Command, Failure, FindingAbout, RunView, Wake};
use crate::scenario::GroupId;
use crate::timeline::{FindingKind, ThreadKind, WatchdogEvent};

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

    /// `store.get` timed out: `DistStoreError` in the main thread ends the process.
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
        let root = group_spec.ranks[0];
        let message = if self.nonblocking_waits.contains(&(rank, group)) {
            format!(
                "[Rank {rank_id}] DistBackendError: the non-blocking NCCL communicator of group {} was not ready after {} ms (TORCH_NCCL_NONBLOCKING_TIMEOUT): its other ranks never finished the init (R8)",
                group_spec.name,
                ms(self.scenario.env.nonblocking_timeout_ns)
            )
        } else {
            format!(
            "[Rank {rank_id}] DistStoreError: wait timeout after {} ms for the NCCL unique id of group {} published by rank {root}. This may indicate a possible application crash on rank {root} or a network set up issue (R29)",
            ms(group_spec.timeout_ns),
            group_spec.name
        )
        };
        self.note(
            rank,
            Some(group),
            (ThreadKind::Main, WatchdogEvent::StoreTimeout),
            now_ns,
            message.clone(),
        );
        out.push(Command::Finding {
            kind: FindingKind::StoreTimeout,
            rank,
            about: FindingAbout::Call(view.host_op(rank)),
            message,
        });
        self.exit_uncaught(rank, group, now_ns, out);
    }
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
            timeout_ns: 1_000_000_000,
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
        assert!(
            messages[0].contains("DistStoreError: wait timeout after 1000 ms"),
            "{}",
            messages[0]
        );
    }
}
