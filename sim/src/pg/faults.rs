//! `[[fault]]`s as a transformer of a rank's step stream, shared by both engines.
//!
//! Before a rank's host lowers an op, [`RankFaults::at`] finds the fault of that rank, op and
//! iteration, and [`host_effect`] says what becomes of the op's steps: none and the host goes
//! on (`skip`: the rank never joins that collective), none and the host stops for good (`hang`:
//! the process lives on; `die`: the process is gone), or the op's steps with the collective
//! armed (`mismatch`, `async_error`, `watchdog_stuck`). The simulator (`crate::engine`) and
//! `hw`'s executor both ask here, and log the fault in the words of [`fault_reached`] (and a
//! `die`'s end in those of [`died`]).
//!
//! A one-GPU hardware run executes one rank alone (the downscale): the other ranks' faults then
//! cannot act through a rendezvous, so [`RankFaults::collective_fate`] says what they do to the
//! lone rank's collectives — the collective never completes (a peer hangs, dies or issues
//! another op), or it never completes and NCCL reports an async error after a delay.
//! [`RankFaults::not_on_hardware`] names the faults a hardware run cannot produce.

use crate::scenario::{Fault, FaultKind, GroupId, Op, OpKind, Scenario, WorkId};

/// The main thread's `fault` record when rank `rank`'s host reaches `op` in `iteration`, where
/// a fault of kind `kind` applies: what the fault does there. c10dsim's own line (PyTorch logs
/// nothing of an injected fault); both engines log it.
pub fn fault_reached(
    scenario: &Scenario,
    rank: u32,
    kind: &FaultKind,
    op: &Op,
    iteration: u32,
) -> String {
    let where_ = format!(
        "{} (line {}, iteration {iteration})",
        op.display_name(),
        op.line
    );
    match kind {
        FaultKind::Skip => format!("[Rank {rank}] fault: skips {where_}"),
        FaultKind::Hang => format!("[Rank {rank}] fault: the host hangs before {where_}"),
        FaultKind::Die => format!("[Rank {rank}] fault: the process dies before {where_}"),
        FaultKind::Mismatch {
            collective,
            size_bytes,
            dtype,
        } => format!(
            "[Rank {rank}] fault: issues {} of {}{} at {where_}",
            collective.op_type(),
            crate::units::format_size(*size_bytes),
            if *dtype == op.kind.call_dtype(&scenario.tensors) {
                String::new()
            } else {
                format!(" {}", dtype.as_str())
            }
        ),
        FaultKind::AsyncError { after_ns } => format!(
            "[Rank {rank}] fault: the network fails under {where_}; NCCL reports an async error {:.3} s after its enqueue",
            *after_ns as f64 / 1e9
        ),
        FaultKind::WatchdogStuck if super::work::watchdog_runs(&scenario.env) => format!(
            "[Rank {rank}] fault: the watchdog hangs in cudaEventQuery on the Work of {where_}"
        ),
        // R15: blocking wait starts no watchdog, so there is none to hang.
        FaultKind::WatchdogStuck => format!(
            "[Rank {rank}] fault: the watchdog would hang in cudaEventQuery on the Work of {where_}, but TORCH_NCCL_BLOCKING_WAIT=1 starts no watchdog (R15): the fault has no effect"
        ),
    }
}

/// The last line of rank `rank`'s process, ended by a `die` fault (its `fault` record, just
/// before, says where). Both engines log it (an `exit` record).
pub fn died(rank: u32) -> String {
    format!("[Rank {rank}] process exited (fault); its GPU work vanishes")
}

/// What becomes of an op's steps on a rank with a fault there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostEffect {
    /// The op's steps run; a collective fault is armed for its collective.
    Run,
    /// No steps: the rank does not issue the op and goes on to the next one.
    Skip,
    /// No steps, now or later: the host hangs (`hang`) or the process died (`die`).
    Stop,
}

/// What a fault does to the steps of the op it is at.
pub fn host_effect(kind: &FaultKind) -> HostEffect {
    match kind {
        FaultKind::Skip => HostEffect::Skip,
        FaultKind::Hang | FaultKind::Die => HostEffect::Stop,
        FaultKind::Mismatch { .. } | FaultKind::AsyncError { .. } | FaultKind::WatchdogStuck => {
            HostEffect::Run
        }
    }
}

/// How a collective of a rank run alone ends, given the faults of the ranks that are not run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CollectiveFate {
    Completes,
    /// It never completes: only a timeout (R26, R15) or the process's end stops its kernel.
    NeverCompletes {
        why: String,
    },
    /// It never completes, and NCCL reports an async error `after_ns` after its enqueue (R26):
    /// the network failed under this rank's own call, so that its Work is completed with the
    /// error from then on (`is_completed()` true, `wait()` raises, R27; see
    /// [`super::work::failed_by`]). A peer's error never fails this rank's Work: it only
    /// leaves the collective incomplete (and, propagated, logged: [`RankFaults::remote_error`]).
    AsyncError {
        after_ns: u64,
    },
}

/// The faults of one rank, looked up by op and iteration.
pub struct RankFaults<'a> {
    scenario: &'a Scenario,
    rank: u32,
}

impl<'a> RankFaults<'a> {
    pub fn new(scenario: &'a Scenario, rank: u32) -> RankFaults<'a> {
        RankFaults { scenario, rank }
    }

    /// The fault of this rank at `op` in `iteration`, if any (the first declared).
    pub fn at(&self, op: usize, iteration: u32) -> Option<&'a Fault> {
        self.scenario.faults.iter().find(|fault| {
            fault.op == op
                && fault.iteration == iteration
                && fault.ranks.binary_search(&self.rank).is_ok()
        })
    }

    /// The fate of this rank's collective at `op` (on `group`) in `iteration` when the group's
    /// other ranks are not run: their faults at or before this point of the program decide,
    /// and so does this rank's own armed fault.
    pub fn collective_fate(&self, op: &Op, iteration: u32, group: GroupId) -> CollectiveFate {
        let members = &self.scenario.groups[group].ranks;
        let here = (iteration, op.index);
        let mut fate = CollectiveFate::Completes;
        for fault in &self.scenario.faults {
            let own = fault.ranks.binary_search(&self.rank).is_ok();
            let peers: Vec<u32> = fault
                .ranks
                .iter()
                .copied()
                .filter(|rank| *rank != self.rank && members.contains(rank))
                .collect();
            let at_this_op = (fault.iteration, fault.op) == here;
            let before = (fault.iteration, fault.op) <= here;
            let where_ = format!(
                "{} (iteration {})",
                self.scenario.ops[fault.op].display_name(),
                fault.iteration
            );
            let ranks_text = peers
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(", ");
            let next = match &fault.kind {
                FaultKind::AsyncError { after_ns } if own && at_this_op => {
                    Some(CollectiveFate::AsyncError {
                        after_ns: *after_ns,
                    })
                }
                FaultKind::Mismatch { .. } if own && at_this_op => {
                    Some(CollectiveFate::NeverCompletes {
                        why: format!("this rank issues another collective at {where_}"),
                    })
                }
                _ if peers.is_empty() || !before => None,
                FaultKind::Hang | FaultKind::Die | FaultKind::Skip => {
                    Some(CollectiveFate::NeverCompletes {
                        why: format!("rank {ranks_text} never joins from {where_} on"),
                    })
                }
                FaultKind::Mismatch { .. } if at_this_op => Some(CollectiveFate::NeverCompletes {
                    why: format!("rank {ranks_text} issues another collective at {where_}"),
                }),
                FaultKind::AsyncError { .. } if at_this_op => {
                    Some(CollectiveFate::NeverCompletes {
                        why: format!("the network fails under {where_} on rank {ranks_text}"),
                    })
                }
                _ => None,
            };
            if let Some(next) = next {
                // An async error decides earlier than a plain hang.
                if !matches!(fate, CollectiveFate::AsyncError { .. }) {
                    fate = next;
                }
            }
        }
        fate
    }

    /// The peer error this rank's watchdog reads from the store under its collective at `op`
    /// (on `group`) in `iteration`, when the group's other ranks are not run: where errors
    /// propagate (`TORCH_NCCL_PROPAGATE_ERROR=1`, R27) and the network fails under this very
    /// collective on a peer, how long after the enqueue, and the lowest such peer, whose
    /// watchdog writes it. The watchdog only logs it ([`super::work::remote_error_detected`]).
    pub fn remote_error(&self, op: &Op, iteration: u32, group: GroupId) -> Option<(u64, u32)> {
        if !super::work::propagates_error(&self.scenario.env) {
            return None;
        }
        let members = &self.scenario.groups[group].ranks;
        (self.scenario.faults.iter())
            .filter(|fault| (fault.iteration, fault.op) == (iteration, op.index))
            .find_map(|fault| {
                let FaultKind::AsyncError { after_ns } = fault.kind else {
                    return None;
                };
                let peer = (fault.ranks.iter())
                    .find(|rank| **rank != self.rank && members.contains(rank))?;
                Some((after_ns, *peer))
            })
    }

    /// Whether a `wait()` waits for the Work `op` makes, or for a later Work of its
    /// communicator ([`Scenario::communicator`]: a lazy world's pair has its own, an eager
    /// world's sends and receives share the world's, R11): under blocking wait,
    /// where an async error failed the Work, it finds the communicator's error (R27), or times
    /// out, aborts the communicator, which ends the failed collective, then raises (R15),
    /// caught or ending the process.
    fn failed_work_waited(&self, op: &Op) -> bool {
        let made = |op: &Op| match op.kind {
            OpKind::Collective { work, .. }
            | OpKind::BatchP2p { work, .. }
            | OpKind::Barrier { work, .. } => work,
            _ => None,
        };
        let communicator =
            |op: &Op| (op.kind.collective()).map(|(_, group)| self.scenario.communicator(group));
        let failed_group = communicator(op);
        let same_communicator = |later: &Op| {
            later.index > op.index && failed_group.is_some() && communicator(later) == failed_group
        };
        let waited = |made: WorkId| {
            (self.scenario.ops.iter())
                .any(|wait| matches!(wait.kind, OpKind::Wait { work, .. } if work == made))
        };
        (self.scenario.ops.iter())
            .filter(|other| other.index == op.index || same_communicator(other))
            .filter_map(made)
            .any(waited)
    }

    /// Why a hardware run of this rank cannot produce the scenario's faults, if it cannot:
    /// `alone` when the other ranks are not run (the downscale).
    pub fn not_on_hardware(&self, alone: bool) -> Option<String> {
        for fault in &self.scenario.faults {
            let own = fault.ranks.binary_search(&self.rank).is_ok();
            let op = &self.scenario.ops[fault.op];
            let where_ = format!(
                "[[fault]] kind = \"{}\" at {:?} (line {})",
                fault.kind.key(),
                op.display_name(),
                op.line
            );
            let why = match &fault.kind {
                FaultKind::WatchdogStuck if own => Some(
                    "hw has no heartbeat monitor (R28), the only thread that could end a run whose \
                     watchdog hangs",
                ),
                FaultKind::Hang if own => Some(
                    "the rank the hardware runs would hang for good: nothing ends that process \
                     (the simulator reports it as a deadlock)",
                ),
                FaultKind::Skip if own && alone => Some(
                    "a skipped collective desyncs the others' later calls, which the one-GPU \
                     stand-ins do not model",
                ),
                FaultKind::Mismatch { .. } | FaultKind::AsyncError { .. } if own && !alone => {
                    Some("it is produced only on the one-GPU downscale's stand-in collectives")
                }
                FaultKind::AsyncError { .. }
                    if own && !super::work::watchdog_runs(&self.scenario.env)
                        && !self.failed_work_waited(op) =>
                {
                    Some(
                        "under blocking wait no watchdog runs (R15) and no wait() on the failed \
                         Work or a later Work of its communicator aborts it: the rank the \
                         hardware runs would hang for good at its next synchronise, its \
                         collective never ending (the simulator reports it as a deadlock)",
                    )
                }
                _ => None,
            };
            if let Some(why) = why {
                return Some(format!("{where_} cannot be produced on hardware: {why}"));
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::parse;

    fn scenario(faults: &str, env: &str) -> Scenario {
        let text = format!(
            "[cluster]\nranks = 4\n[env]\n{env}\n[tensors]\ng = \"1MiB\"\n[[op]]\nlabel = \"a\"\nall_reduce = \"g\"\n[[op]]\nlabel = \"b\"\nall_reduce = \"g\"\nasync_op = true\nwork = \"w\"\n[[op]]\nwait = \"w\"\n{faults}"
        );
        parse("faults.toml", &text).unwrap()
    }

    fn fault(ranks: &str, at: &str, kind: &str) -> String {
        format!("[[fault]]\nranks = {ranks}\nat = \"{at}\"\nkind = \"{kind}\"\n")
    }

    #[test]
    fn a_fault_transforms_the_steps_of_its_rank_op_and_iteration_only() {
        let scenario = scenario(&fault("[1]", "b", "die"), "");
        let rank1 = RankFaults::new(&scenario, 1);
        let found = rank1.at(1, 0).expect("rank 1 dies at b");
        assert_eq!(host_effect(&found.kind), HostEffect::Stop);
        assert!(rank1.at(0, 0).is_none());
        assert!(RankFaults::new(&scenario, 0).at(1, 0).is_none());
        assert_eq!(host_effect(&FaultKind::Skip), HostEffect::Skip);
        assert_eq!(host_effect(&FaultKind::Hang), HostEffect::Stop);
        assert_eq!(
            host_effect(&FaultKind::AsyncError { after_ns: 1 }),
            HostEffect::Run
        );
    }

    #[test]
    fn a_peer_that_never_joins_leaves_the_lone_ranks_collectives_incomplete_from_there_on() {
        let scenario = scenario(&fault("[3]", "b", "hang"), "");
        let rank0 = RankFaults::new(&scenario, 0);
        assert_eq!(
            rank0.collective_fate(&scenario.ops[0], 0, 0),
            CollectiveFate::Completes
        );
        let CollectiveFate::NeverCompletes { why } = rank0.collective_fate(&scenario.ops[1], 0, 0)
        else {
            panic!("rank 3 hangs before b");
        };
        assert_eq!(why, "rank 3 never joins from b (iteration 0) on");
    }

    #[test]
    fn a_peers_async_error_only_leaves_the_lone_ranks_collective_incomplete_r27() {
        let faults = format!("{}after_us = 5000\n", fault("[1]", "b", "async_error"));
        let propagated = scenario(&faults, "TORCH_NCCL_PROPAGATE_ERROR = 1");
        let local = scenario(&faults, "");
        for scenario in [&propagated, &local] {
            assert!(matches!(
                RankFaults::new(scenario, 0).collective_fate(&scenario.ops[1], 0, 0),
                CollectiveFate::NeverCompletes { .. }
            ));
        }
        // Propagated, rank 0's watchdog reads rank 1's error from the store, and only logs it.
        let rank0 = RankFaults::new(&propagated, 0);
        assert_eq!(
            rank0.remote_error(&propagated.ops[1], 0, 0),
            Some((5_000_000, 1))
        );
        assert_eq!(rank0.remote_error(&propagated.ops[0], 0, 0), None);
        let local0 = RankFaults::new(&local, 0);
        assert_eq!(local0.remote_error(&local.ops[1], 0, 0), None);
        // The rank that fails sees its own error, propagated or not, and reads none.
        let rank1 = RankFaults::new(&propagated, 1);
        assert_eq!(
            rank1.collective_fate(&propagated.ops[1], 0, 0),
            CollectiveFate::AsyncError {
                after_ns: 5_000_000
            }
        );
        assert_eq!(rank1.remote_error(&propagated.ops[1], 0, 0), None);
    }

    #[test]
    fn no_peers_async_error_reaches_the_lone_rank_under_blocking_wait_r15() {
        // The peer's watchdog, which would write its error into the store, does not run.
        let faults = format!("{}after_us = 5000\n", fault("[1]", "b", "async_error"));
        let env = "TORCH_NCCL_PROPAGATE_ERROR = 1\nTORCH_NCCL_BLOCKING_WAIT = 1";
        let blocking = scenario(&faults, env);
        assert!(matches!(
            RankFaults::new(&blocking, 0).collective_fate(&blocking.ops[1], 0, 0),
            CollectiveFate::NeverCompletes { .. }
        ));
        assert_eq!(
            RankFaults::new(&blocking, 0).remote_error(&blocking.ops[1], 0, 0),
            None
        );
    }

    #[test]
    fn an_own_async_error_nothing_ends_under_blocking_wait_is_refused_on_hardware_r15() {
        let faults = format!("{}after_us = 5000\n", fault("[0]", "b", "async_error"));
        let blocking = "TORCH_NCCL_BLOCKING_WAIT = 1";
        // The wait() on the failed Work aborts its communicator, caught or not; with a
        // watchdog, its verdict ends the process.
        assert_eq!(
            RankFaults::new(&scenario(&faults, blocking), 0).not_on_hardware(true),
            None
        );
        let mut caught = scenario(&faults, blocking);
        caught.ops[2].catch = true;
        assert_eq!(RankFaults::new(&caught, 0).not_on_hardware(true), None);
        // No wait() on it: nothing ends the failed collective.
        let mut unwaited = scenario(&faults, blocking);
        unwaited.ops.pop();
        let why = RankFaults::new(&unwaited, 0).not_on_hardware(true).unwrap();
        assert!(why.contains("hang for good"), "{why}");
        let mut watched = scenario(&faults, "");
        watched.ops.pop();
        assert_eq!(RankFaults::new(&watched, 0).not_on_hardware(true), None);
        // A wait() on a later Work of the failed communicator finds its error (R27) and
        // aborts it too.
        let earlier = format!("{}after_us = 5000\n", fault("[0]", "a", "async_error"));
        assert_eq!(
            RankFaults::new(&scenario(&earlier, blocking), 0).not_on_hardware(true),
            None
        );
        let mut unwaited = scenario(&earlier, blocking);
        unwaited.ops.pop();
        assert!(RankFaults::new(&unwaited, 0)
            .not_on_hardware(true)
            .is_some());
    }

    #[test]
    fn a_wait_on_a_later_work_of_the_failed_pair_ends_it_on_hardware_r11_r15() {
        // On a lazy world a pair's sends run on the pair's own communicator (R11): a wait()
        // on the pair's later Work finds the error of the first (R27) and aborts it.
        let pair = |waited: &str| {
            let text = format!(
                "[cluster]\nranks = 2\n[env]\nTORCH_NCCL_BLOCKING_WAIT = 1\n\
                 [tensors]\ng = \"1MiB\"\n\
                 [[op]]\nall_reduce = \"g\"\n\
                 [[op]]\nlabel = \"s1\"\nranks = [0]\nsend = \"g\"\npeer = 1\nasync_op = true\n\
                 work = \"w1\"\n\
                 [[op]]\nranks = [1]\nrecv = \"g\"\npeer = 0\n\
                 [[op]]\nlabel = \"s2\"\nranks = [0]\nsend = \"g\"\npeer = 1\nasync_op = true\n\
                 work = \"w2\"\n\
                 [[op]]\nranks = [1]\nrecv = \"g\"\npeer = 0\n\
                 [[op]]\nranks = [0]\nwait = \"{waited}\"\n\
                 {}after_us = 5000\n",
                fault("[0]", "s1", "async_error")
            );
            parse("pair.toml", &text).unwrap()
        };
        assert_eq!(RankFaults::new(&pair("w2"), 0).not_on_hardware(true), None);
        assert_eq!(RankFaults::new(&pair("w1"), 0).not_on_hardware(true), None);
    }

    #[test]
    fn a_mismatch_hangs_only_the_collective_it_is_at() {
        let faults = format!("{}size = \"2MiB\"\n", fault("[1]", "a", "mismatch"));
        let scenario = scenario(&faults, "");
        let rank0 = RankFaults::new(&scenario, 0);
        assert!(matches!(
            rank0.collective_fate(&scenario.ops[0], 0, 0),
            CollectiveFate::NeverCompletes { .. }
        ));
        assert_eq!(
            rank0.collective_fate(&scenario.ops[1], 0, 0),
            CollectiveFate::Completes
        );
    }

    #[test]
    fn faults_hardware_cannot_produce_are_named_with_the_reason() {
        let stuck = scenario(&fault("[0]", "b", "watchdog_stuck"), "");
        let why = RankFaults::new(&stuck, 0).not_on_hardware(true).unwrap();
        assert!(
            why.starts_with("[[fault]] kind = \"watchdog_stuck\" at \"b\" (line"),
            "{why}"
        );
        assert!(why.contains("no heartbeat monitor"), "{why}");
        // Another rank's stuck watchdog does not concern rank 0's run.
        assert_eq!(RankFaults::new(&stuck, 1).not_on_hardware(true), None);
        let hang = scenario(&fault("[3]", "b", "hang"), "");
        assert_eq!(RankFaults::new(&hang, 0).not_on_hardware(true), None);
        assert!(RankFaults::new(&hang, 3)
            .not_on_hardware(false)
            .unwrap()
            .contains("hang for good"));
    }
}
